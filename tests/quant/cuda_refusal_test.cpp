// The CUDA backend's seam for quantized kernels: until it has them, uploading a pack's packed weights is refused
// with a message naming the class and what to run instead. Skipped without a GPU (and absent in CPU builds).
#include <gtest/gtest.h>

#if defined(DG_WITH_CUDA)
#include "backend/cuda/cuda_check.h"
#include "model/model_harness.h"
#include "quant/quant_test_util.h"
#include "support/expect_error.h"
#include "support/paths.h"

namespace dg::test {
namespace {

TEST(CudaQuant, PackedWeightsAreRefusedWithDirections) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const std::string pack = quantize_fixture("cuda-refusal", source_path("tests/fixtures/tiny_a"), "q4");
  DG_EXPECT_ERROR(Engine(pack, Precision{}, "cuda"), "stores the self-conditioning MLP as q8",
                  "no kernels for packed weights", "--backend cpu");
}

}  // namespace
}  // namespace dg::test
#endif
