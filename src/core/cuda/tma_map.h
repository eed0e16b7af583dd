// Host helpers of the TMA kernels (sm_90a): whether the device is a Hopper GPU of compute capability 9.0, the
// driver's tensor-map encoder (through the runtime, no link against libcuda), and the 2-D map of a row-major array
// in boxes of 64 rows. Used by the warp-specialised expert kernels (src/ops/moe/moe_ws*.cu) and the W8A8 product for
// few rows (src/ops/linear/e4m3_rows.cu).
#pragma once

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/status.h"

namespace dg::cuda {

// Whether the current device has compute capability 9.0 (the sm_90a code's wgmma and TMA).
inline bool device_is_sm90() {
  int dev = 0, major = 0, minor = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  return major == 9 && minor == 0;
}

// cuTensorMapEncodeTiled from the driver (through the runtime: no link against libcuda), or null.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// The TMA map of `rows` rows of `inner` elements (`stride` bytes apart) at `base`, in boxes of 64 rows x
// box_inner elements with `swizzle`, zeros past the last row and the row's end (the caller has seen tensor_map_encoder() non-null). `operand`
// names it in the error.
inline Status rows_map(const uint8_t* base, CUtensorMapDataType type, int64_t inner, int64_t rows, int64_t stride,
                       uint32_t box_inner, CUtensorMapSwizzle swizzle, CUtensorMap& map, const std::string& what,
                       const char* operand) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(stride)};
  const cuuint32_t box[2] = {box_inner, 64};
  const cuuint32_t unit[2] = {1, 1};
  const CUresult r = tensor_map_encoder()(&map, type, 2, const_cast<uint8_t*>(base), dims, strides, box, unit,
                                          CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return Status::error(what + ": cuTensorMapEncodeTiled refused " + operand + " (" + std::to_string(rows) +
                         " rows of " + std::to_string(stride) + " bytes; error " + std::to_string(static_cast<int>(r)) +
                         ")");
  return Status::ok();
}

}  // namespace dg::cuda
