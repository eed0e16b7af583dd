// PTX wrappers for warp-specialised kernels on sm_90a: shared-memory mbarriers (init, arrive, wait on a phase's
// parity; arrivals of cp.async copies and TMA transfers), TMA tile loads, named barriers over part of a CTA, and
// setmaxnreg (moving registers between warpgroups).
// Reference: PTX ISA, "mbarrier" (init, arrive, expect_tx, try_wait.parity; phases and their parity),
// "cp.async.mbarrier.arrive", "cp.async.bulk", "cp.async.bulk.tensor", "fence.mbarrier_init", "bar.sync", "setmaxnreg".
//
// An mbarrier counts arrivals towards its expected count; when they are all in, its current phase completes and the
// next begins (phase 0 first). A waiter names the phase by its parity: mbar_wait(bar, 0) returns once phase 0 is
// complete, mbar_wait(bar, 1) once phase 1 is, and so on alternately. Arrive releases and wait acquires (CTA scope),
// so memory written before an arrive is visible after the wait that sees the phase complete.
#pragma once

#include <cstdint>

#include "core/cuda/wgmma.cuh"

namespace dg::cuda {

#if DG_HAS_WGMMA

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes the initialised barriers visible to the other threads (then a __syncthreads before their first use).
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// An arrival that also tells the barrier to expect `bytes` more from asynchronous copies (TMA) in this phase: the
// phase completes when every arrival and every expected byte are in.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

// An arrival that the hardware makes once every cp.async this thread issued before it has landed (the thread goes
// on at once); `noinc`: it is one of the arrivals the barrier was initialised to expect.
__device__ __forceinline__ void cp_async_mbar_arrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// TMA: the box at element coordinates (x, y) of the 2-D tensor `map` describes (a __grid_constant__ kernel
// parameter's address) into shared memory at dst (laid out as the map's swizzle says), its bytes counted on `bar`.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void* map, int x, int y, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
}

// The same for a 3-D map: the box at element coordinates (x, y, z).
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void* map, int x, int y, int z, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(z), "r"(bar)
      : "memory");
}

// Bulk copy: `bytes` (a multiple of 16) contiguous bytes from global src to shared dst (both 16-byte aligned), counted
// on `bar`.
__device__ __forceinline__ void bulk_load(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
               ::"r"(dst), "l"(reinterpret_cast<uint64_t>(src)), "r"(bytes), "r"(bar)
               : "memory");
}

// Spins until the phase of parity `parity` of the barrier has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra WAIT;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// Barrier `id` (1-15; 0 is __syncthreads') over `threads` threads, a multiple of 32.
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// The warpgroup's registers per thread lowered (dec) or raised (inc) to kRegs, a multiple of 8 in [24, 256]; every
// warp of the warpgroup executes it.
template <int kRegs> __device__ __forceinline__ void regs_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs> __device__ __forceinline__ void regs_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

#endif  // DG_HAS_WGMMA

}  // namespace dg::cuda
