// The lm_head's last elementwise step on the device, shared by the softcap passes (logits.cu) and the row
// statistics that finish logits left open (row_stats.cu): the same arithmetic, so the same bits.
#pragma once

#include "core/cuda/cuda_common.cuh"

namespace dg::cuda {

// One logit: rounded to bf16 (the reference's storage), then capped (cap <= 0: no cap).
__device__ __forceinline__ float softcapped(float x, float cap) {
  const float l = cuda::rbf(x);
  return cap > 0.0f ? tanhf(l / cap) * cap : l;
}

// A W8A8 product's raw sum scaled by its input row's and table row's E4M3 scales (in that order), then capped.
__device__ __forceinline__ float softcapped_scaled(float sum, float row_scale, float col_scale, float cap) {
  return softcapped(sum * row_scale * col_scale, cap);
}

}  // namespace dg::cuda
