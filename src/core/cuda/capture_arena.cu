#include "core/cuda/capture_arena.h"

#include <algorithm>

namespace dg::cuda {
namespace {

thread_local CaptureArena* active = nullptr;

bool capturing(cudaStream_t s) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(s, &st) == cudaSuccess && st == cudaStreamCaptureStatusActive;
}

}  // namespace

CaptureArena::~CaptureArena() {
  free_retired();
  if (base_ != nullptr) cudaFree(base_);
}

void CaptureArena::begin_capture() {
  {
    std::lock_guard<std::mutex> lock(m_);
    const size_t want = offsets_.high_water();
    if (want > cap_ && in_region_ == 0) {
      // An eighth more than the furthest offset so far, in whole 2 MiB: a buffer that grows a little from capture to
      // capture (an attention scratch sized by the keys) stays inside.
      constexpr size_t kGrain = size_t{2} << 20;
      const size_t bytes = (want + want / 8 + kGrain - 1) / kGrain * kGrain;
      void* p = nullptr;
      if (cudaMalloc(&p, bytes) == cudaSuccess) {
        if (base_ != nullptr) retired_.push_back(base_);
        base_ = static_cast<char*>(p);
        cap_ = bytes;
      } else {
        (void)cudaGetLastError();  // the device is full: the region stays, and blocks past it stay memory nodes
      }
    }
  }
  captured_.clear();
  active = this;
}

void CaptureArena::end_capture() { active = nullptr; }

void CaptureArena::free_retired() {
  std::lock_guard<std::mutex> lock(m_);
  for (void* p : retired_) cudaFree(p);
  retired_.clear();
}

cudaError_t CaptureArena::alloc(void** p, size_t bytes, cudaStream_t s) {
  std::lock_guard<std::mutex> lock(m_);
  const size_t at = offsets_.place(bytes);
  if (at + bytes <= cap_) {
    *p = base_ + at;
    ++in_region_;
  } else {
    const cudaError_t e = cudaMallocAsync(p, bytes, s);
    if (e != cudaSuccess) {
      offsets_.release(at);
      return e;
    }
    ++overflows_;
  }
  blocks_.emplace(*p, Block{at, at + bytes <= cap_});
  captured_.emplace_back(at, bytes);
  return cudaSuccess;
}

bool CaptureArena::release(void* p, cudaStream_t s) {
  std::lock_guard<std::mutex> lock(m_);
  const auto it = blocks_.find(p);
  if (it == blocks_.end()) return false;
  offsets_.release(it->second.offset);
  if (it->second.in_region) {
    --in_region_;
  } else {
    cudaFreeAsync(p, s);
  }
  blocks_.erase(it);
  return true;
}

cudaError_t stream_alloc(void** p, size_t bytes, cudaStream_t s, CaptureArena** from) {
  CaptureArena* arena = active != nullptr && capturing(s) ? active : nullptr;
  if (from != nullptr) *from = arena;
  return arena != nullptr ? arena->alloc(p, bytes, s) : cudaMallocAsync(p, bytes, s);
}

void stream_free(void* p, cudaStream_t s) {
  if (active != nullptr && active->release(p, s)) return;
  cudaFreeAsync(p, s);
}

}  // namespace dg::cuda
