// The CUDA backend's fp8 copies of the tied table (Backend::fp8_table, --vocab-act fp8): the table's rows, and the
// rows of its transpose, byte for byte the pack's fp8 format of the same bf16 values (pack_tensor: encode_rows' codes
// and scales), and a vocabulary the e4m3 product cannot take refused by name. Skipped without a GPU.
#include <gtest/gtest.h>

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include <cstring>
#include <memory>
#include <vector>

#include "backend/registry.h"
#include "core/cuda/cuda_check.h"
#include "quant/packed_tensor.h"
#include "support/expect_error.h"
#include "support/seeded.h"

namespace dg {
namespace cuda_fp8_table_test {

// A host bf16 [rows, cols] table of seeded values (one in 61 a tenth of the rest: a spread of magnitudes per row).
Tensor bf16_table(int64_t rows, int64_t cols, uint64_t seed) {
  const std::vector<float> f = test::seeded_uniform(static_cast<size_t>(rows * cols), seed, -0.2f, 0.2f);
  Tensor t = host_tensor(DType::kBF16, Shape{rows, cols});
  auto* b = static_cast<uint16_t*>(t.data);
  for (size_t i = 0; i < f.size(); ++i) b[i] = f32_to_bf16(i % 61 == 0 ? f[i] * 0.1f : f[i]);
  return t;
}

Tensor transposed(const Tensor& t) {
  const int64_t R = t.shape[0], C = t.shape[1];
  Tensor out = host_tensor(DType::kBF16, Shape{C, R});
  const auto* s = static_cast<const uint16_t*>(t.data);
  auto* d = static_cast<uint16_t*>(out.data);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) d[c * R + r] = s[r * C + c];
  return out;
}

std::vector<uint8_t> device_bytes(const Tensor& t) {
  std::vector<uint8_t> out(t.nbytes());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(out.data(), t.data, out.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

TEST(CudaFp8Table, RowsAndTransposeAreThePacksFp8BitForBit) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU tests run on the GPU machine";
  const std::unique_ptr<Backend> be = make_backend("cuda");
  // tiny_a's and dg-tiny's shapes, an odd tile count for the transpose, and a slice of the 26B-A4B table.
  const std::pair<int64_t, int64_t> shapes[] = {{512, 64}, {4096, 128}, {48, 16}, {1040, 2832}, {16384, 2816}};
  for (auto [V, H] : shapes) {
    SCOPED_TRACE(testing::Message() << V << " x " << H);
    const Tensor host = bf16_table(V, H, 100 + static_cast<uint64_t>(V));
    const Tensor dev = be->upload(host);
    for (bool transpose : {false, true}) {
      SCOPED_TRACE(transpose ? "transpose" : "rows");
      const Tensor want = pack_tensor(transpose ? transposed(host) : host, DType::kFp8);
      const Tensor got = be->fp8_table(dev, transpose);
      ASSERT_EQ(got.dtype, DType::kFp8);
      ASSERT_EQ(got.shape, want.shape);
      const std::vector<uint8_t> bytes = device_bytes(got);
      ASSERT_EQ(bytes.size(), want.nbytes());
      size_t differ = 0;
      for (size_t i = 0; i < bytes.size(); ++i) differ += bytes[i] != static_cast<const uint8_t*>(want.data)[i];
      EXPECT_EQ(differ, 0u);
    }
  }
}

TEST(CudaFp8Table, RefusesWidthsTheProductCannotTake) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU tests run on the GPU machine";
  const std::unique_ptr<Backend> be = make_backend("cuda");
  const Tensor dev = be->upload(bf16_table(1000, 32, 3));
  DG_EXPECT_ERROR(be->fp8_table(dev, false), "--vocab-act fp8", "multiples of 16", "1000", "--vocab-act bf16");
}

}  // namespace cuda_fp8_table_test
}  // namespace dg
#endif
