// PTX wrappers for Hopper's warpgroup MMA (sm_90a): shared-memory matrix descriptors for K-major and MN-major tiles
// in the 128-byte swizzle, and wgmma.mma_async with f32 accumulation: e4m3 (m64nNk32) and bf16 or f16 (m64nNk16)
// operands from shared memory, or bf16 or f16 with A from registers. mma.sync has no e4m3 form on Hopper (the
// compiler unpacks the codes to f16 and runs f16 products), so this is the way to the fp8 tensor cores there.
// Reference: PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate" (matrix descriptors,
// wgmma.mma_async, wgmma.fence, wgmma.commit_group, wgmma.wait_group) and "fence.proxy.async".
//
// The tiles: rows of 128 bytes (128 e4m3 codes of one row's K slice), 16-byte chunk c of row r stored at chunk
// c ^ (r % 8), the tile 1024-byte aligned: the hardware's 128-byte swizzle (address bits 4-6 XOR bits 7-9). A k32
// step starts 32 bytes further into the rows. The m64nN accumulators of a warpgroup: warp w holds rows 16 w .. +15,
// lane (g, t) element 4 j + q of n8 tile j at row g + 8 (q / 2), column 8 j + 2 t + q % 2, as mma.sync's m16n8 C
// fragments.
//
// MN-major B (the f16 RS form with imm-trans-b 1, flash_wgmma.cuh's V tile): the same 128-byte swizzled rows, but a
// row holds 64 consecutive n (one k each): 8 k rows make a 1024-byte atom, atoms of the next 8 k lie SBO bytes on,
// atoms of the next 64 n lie LBO bytes on (cute's canonical ((8,n),(8,k)):((1,LBO),(8,SBO)) in 16-byte units).
#pragma once

#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define DG_HAS_WGMMA 1
#else
#define DG_HAS_WGMMA 0
#endif

namespace dg::cuda {

#if DG_HAS_WGMMA

// The descriptor of a K-major tile at shared address `addr` (1024-byte aligned, or that plus a k-step offset): rows
// of 128 bytes, 8-row groups 1024 bytes apart, 128-byte swizzle.
__device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}

// Descriptor d moved `bytes` (a multiple of 16) further in shared memory: its address field plus bytes / 16 (shared
// addresses stay under 2^18, so the 14-bit field does not carry). One add on the low word where each product
// encoding its own descriptor costs a mask, a shift and the constant fields.
__device__ __forceinline__ uint64_t wgmma_desc_plus(uint64_t d, uint32_t bytes) {
  return (d & 0xFFFFFFFF00000000ull) | static_cast<uint32_t>(static_cast<uint32_t>(d) + (bytes >> 4));
}

// The descriptor of an MN-major tile at `addr` (1024-byte aligned): 128-byte rows of 64 n for one k, 8-k atoms
// 1024 bytes apart (SBO), 64-n column blocks `lbo` bytes apart (LBO), 128-byte swizzle.
__device__ __forceinline__ uint64_t wgmma_desc_sw128_mn(uint32_t addr, uint32_t lbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>((lbo & 0x3FFFF) >> 4) << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

// Makes generic-proxy writes to shared memory (st.shared, cp.async) visible to wgmma's reads: this thread's, or
// another thread's that an mbarrier wait has just acquired (the reader fences after the wait).
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

#define DG_WG_ACC(j) "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
#define DG_WG_ACC16 DG_WG_ACC(0), DG_WG_ACC(1)
#define DG_WG_ACC32 DG_WG_ACC16, DG_WG_ACC(2), DG_WG_ACC(3)
#define DG_WG_ACC48 DG_WG_ACC32, DG_WG_ACC(4), DG_WG_ACC(5)
#define DG_WG_ACC64 DG_WG_ACC48, DG_WG_ACC(6), DG_WG_ACC(7)
#define DG_WG_ACC128                                                                                             \
  DG_WG_ACC64, DG_WG_ACC(8), DG_WG_ACC(9), DG_WG_ACC(10), DG_WG_ACC(11), DG_WG_ACC(12), DG_WG_ACC(13),           \
      DG_WG_ACC(14), DG_WG_ACC(15)
#define DG_WG_D16 "{%0, %1, %2, %3, %4, %5, %6, %7}"
#define DG_WG_D32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define DG_WG_D48                                                                                                \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23}"
#define DG_WG_D64                                                                                                \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "   \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define DG_WG_D128                                                                                               \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                      \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                             \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                             \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define DG_WG_ACC256                                                                                             \
  DG_WG_ACC128, DG_WG_ACC(16), DG_WG_ACC(17), DG_WG_ACC(18), DG_WG_ACC(19), DG_WG_ACC(20), DG_WG_ACC(21),        \
      DG_WG_ACC(22), DG_WG_ACC(23), DG_WG_ACC(24), DG_WG_ACC(25), DG_WG_ACC(26), DG_WG_ACC(27), DG_WG_ACC(28),   \
      DG_WG_ACC(29), DG_WG_ACC(30), DG_WG_ACC(31)
#define DG_WG_D256                                                                                               \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                      \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                             \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                             \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "                             \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "                             \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "                             \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "                 \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define DG_WG_PRED(S) "{\n.reg .pred p;\nsetp.ne.b32 p, " S ", 0;\n"
// Both operands from shared memory (descriptors a, b; operands A and B), scale-d from operand S (0: overwrite d);
// TAIL: the immediates after scale-d.
#define DG_WG_SS(SHAPE, TYPES, DL, A, B, S, TAIL, ACC, SCALE)                                                 \
  asm volatile(DG_WG_PRED("%" S) "wgmma.mma_async.sync.aligned." SHAPE "." TYPES " " DL ", %" A ", %" B ", p, " \
               TAIL ";\n}\n"                                                                                  \
               : ACC : "l"(a), "l"(b), "n"(SCALE))
// A from registers (a[4]: the warp's m16k16 fragment, as mma.sync's), B from shared memory; d accumulates. TNSP_B:
// the imm-trans-b immediate (1: B MN-major).
#define DG_WG_RS_T(SHAPE, TYPES, TNSP_B, DL, A0, A1, A2, A3, B, ...)                                        \
  asm volatile(DG_WG_PRED("1") "wgmma.mma_async.sync.aligned." SHAPE "." TYPES " " DL ", {%" A0 ", %" A1      \
               ", %" A2 ", %" A3 "}, %" B ", p, 1, 1, " TNSP_B ";\n}\n"                                        \
               : __VA_ARGS__ : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b))
#define DG_WG_RS(SHAPE, DL, A0, A1, A2, A3, B, ...) \
  DG_WG_RS_T(SHAPE, "f32.bf16.bf16", "0", DL, A0, A1, A2, A3, B, __VA_ARGS__)

// Pins the accumulators in program order around a stage's wgmma products (no access between the fence and the
// products, none moved above the wait).
template <int kRows, int kCols> __device__ __forceinline__ void fence_acc(float (&acc)[kRows][kCols]) {
#pragma unroll
  for (int j = 0; j < kRows; ++j)
#pragma unroll
    for (int q = 0; q < kCols; ++q) asm volatile("" : "+f"(acc[j][q])::"memory");
}
template <int kT, int kRows, int kCols> __device__ __forceinline__ void fence_acc(float (&acc)[kT][kRows][kCols]) {
#pragma unroll
  for (int t = 0; t < kT; ++t) fence_acc(acc[t]);
}

// d[64 x N] (+)= A[64 x 32] B[N x 32]^T, e4m3 codes, for the warpgroup; d holds N / 8 n8 tiles (the rest untouched);
// kAccumulate false overwrites d. The fp8 products keep fewer bits than f32 while they accumulate (about 14 in
// Hopper's tensor cores, as DeepSeek-V3's report measured), so a caller sums a few k steps here and adds them to
// f32 registers of its own.
template <int N, bool kAccumulate, int J>
__device__ __forceinline__ void wgmma_e4m3_m64k32(float (&d)[J][4], uint64_t a, uint64_t b) {
  static_assert(N == 16 || N == 32 || N == 48 || N == 64 || N == 128, "n16 .. n64 in steps of 16, or n128");
  static_assert(J >= N / 8, "the accumulator holds the N columns");
  constexpr int kScale = kAccumulate ? 1 : 0;
  if constexpr (N == 16) DG_WG_SS("m64n16k32", "f32.e4m3.e4m3", DG_WG_D16, "8", "9", "10", "1, 1", DG_WG_ACC16, kScale);
  else if constexpr (N == 32)
    DG_WG_SS("m64n32k32", "f32.e4m3.e4m3", DG_WG_D32, "16", "17", "18", "1, 1", DG_WG_ACC32, kScale);
  else if constexpr (N == 48)
    DG_WG_SS("m64n48k32", "f32.e4m3.e4m3", DG_WG_D48, "24", "25", "26", "1, 1", DG_WG_ACC48, kScale);
  else if constexpr (N == 64)
    DG_WG_SS("m64n64k32", "f32.e4m3.e4m3", DG_WG_D64, "32", "33", "34", "1, 1", DG_WG_ACC64, kScale);
  else DG_WG_SS("m64n128k32", "f32.e4m3.e4m3", DG_WG_D128, "64", "65", "66", "1, 1", DG_WG_ACC128, kScale);
}

// d[64 x N] += A[64 x 16] B[N x 16]^T, bf16, both K-major in shared memory; d holds J n8 tiles (J >= N / 8, the
// rest untouched).
template <int N, int J>
__device__ __forceinline__ void wgmma_bf16_m64k16(float (&d)[J][4], uint64_t a, uint64_t b) {
  static_assert(N == 16 || N == 32 || N == 48 || N == 64 || N == 128, "n16 .. n64 in steps of 16, or n128");
  static_assert(J >= N / 8, "the accumulator holds the N columns");
  if constexpr (N == 16)
    DG_WG_SS("m64n16k16", "f32.bf16.bf16", DG_WG_D16, "8", "9", "10", "1, 1, 0, 0", DG_WG_ACC16, 1);
  else if constexpr (N == 32)
    DG_WG_SS("m64n32k16", "f32.bf16.bf16", DG_WG_D32, "16", "17", "18", "1, 1, 0, 0", DG_WG_ACC32, 1);
  else if constexpr (N == 48)
    DG_WG_SS("m64n48k16", "f32.bf16.bf16", DG_WG_D48, "24", "25", "26", "1, 1, 0, 0", DG_WG_ACC48, 1);
  else if constexpr (N == 64)
    DG_WG_SS("m64n64k16", "f32.bf16.bf16", DG_WG_D64, "32", "33", "34", "1, 1, 0, 0", DG_WG_ACC64, 1);
  else DG_WG_SS("m64n128k16", "f32.bf16.bf16", DG_WG_D128, "64", "65", "66", "1, 1, 0, 0", DG_WG_ACC128, 1);
}

// d[64 x N] += A[64 x 16] B[N x 16]^T, bf16, A from each warp's registers (rows 16 w .. +15), B K-major in shared
// memory. d holds J n8 tiles (J >= N / 8, the rest untouched).
template <int N, int J>
__device__ __forceinline__ void wgmma_bf16_rs_m64k16(float (&d)[J][4], const uint32_t (&a)[4], uint64_t b) {
  static_assert(N == 16 || N == 32 || N == 48 || N == 64, "n16 .. n64 in steps of 16");
  static_assert(J >= N / 8, "the accumulator holds the N columns");
  if constexpr (N == 16) DG_WG_RS("m64n16k16", DG_WG_D16, "8", "9", "10", "11", "12", DG_WG_ACC16);
  else if constexpr (N == 32) DG_WG_RS("m64n32k16", DG_WG_D32, "16", "17", "18", "19", "20", DG_WG_ACC32);
  else if constexpr (N == 48) DG_WG_RS("m64n48k16", DG_WG_D48, "24", "25", "26", "27", "28", DG_WG_ACC48);
  else DG_WG_RS("m64n64k16", DG_WG_D64, "32", "33", "34", "35", "36", DG_WG_ACC64);
}

// S[64 x 64] (+)= A[64 x 16] B[64 x 16]^T, f16, both K-major in shared memory (flash_wgmma.cuh: Q K^T);
// kAccumulate false overwrites d.
template <bool kAccumulate>
__device__ __forceinline__ void wgmma_f16_m64n64k16(float (&d)[8][4], uint64_t a, uint64_t b) {
  DG_WG_SS("m64n64k16", "f32.f16.f16", DG_WG_D64, "32", "33", "34", "1, 1, 0, 0", DG_WG_ACC64, kAccumulate ? 1 : 0);
}

// d[64 x 256] += A[64 x 16] B[16 x 256], f16, A from each warp's registers (as mma.sync's m16k16 fragments), B
// MN-major in shared memory (wgmma_desc_sw128_mn; flash_wgmma.cuh: P V with V's rows as stored).
__device__ __forceinline__ void wgmma_f16_rs_m64n256k16_mn(float (&d)[32][4], const uint32_t (&a)[4], uint64_t b) {
  DG_WG_RS_T("m64n256k16", "f32.f16.f16", "1", DG_WG_D256, "128", "129", "130", "131", "132", DG_WG_ACC256);
}

#undef DG_WG_SS
#undef DG_WG_RS
#undef DG_WG_RS_T
#undef DG_WG_D256
#undef DG_WG_ACC256
#undef DG_WG_PRED
#undef DG_WG_D16
#undef DG_WG_D32
#undef DG_WG_D48
#undef DG_WG_D64
#undef DG_WG_D128
#undef DG_WG_ACC16
#undef DG_WG_ACC32
#undef DG_WG_ACC48
#undef DG_WG_ACC64
#undef DG_WG_ACC128
#undef DG_WG_ACC

#endif  // DG_HAS_WGMMA

}  // namespace dg::cuda
