// The CUDA backend's boundary for packed weights: a pack whose tensors use a format without a CUDA kernel (q6) is
// refused at upload, before any weight is allocated, with a message naming the tensor, the format and what to
// run instead. Skipped without a GPU (and absent in CPU builds).
#include <gtest/gtest.h>

#if defined(DG_WITH_CUDA)
#include "core/cuda/cuda_check.h"
#include "model/model_harness.h"
#include "quant/quant_test_util.h"
#include "support/expect_error.h"
#include "support/paths.h"

namespace dg::test {
namespace cuda_refusal_test {

TEST(CudaQuant, FormatsWithoutKernelsAreRefusedWithDirections) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const std::string pack = quantize_fixture("cuda-refusal", source_path("tests/fixtures/tiny_a"), "q6");
  DG_EXPECT_ERROR(ModelRig(pack, Precision{}, "cuda"), "layer 0 experts.gate_up as q6", "no q6 kernel",
                  "--backend cpu");
}

TEST(CudaQuant, PackedExpertsNeedTheStreamingKernel) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const std::string pack = quantize_fixture("cuda-refusal-moe", source_path("tests/fixtures/tiny_a"), "q4");
  DG_EXPECT_ERROR(ModelRig(pack, Precision{}, "cuda", CudaKernels{AttentionKernel::kFlash, MoeKernel::kCublas}),
                  "experts of this .dgq pack", "--moe auto");
}

}  // namespace cuda_refusal_test
}  // namespace dg::test
#endif
