// The copying kernels of src/ops/elementwise against the host's conversions, bit for bit: convert_cuda in its
// eight-per-thread form (n a multiple of 8, aligned ends) and its per-element form (odd n, an offset start), and
// split_cols_cuda (a block per row) into one to four outputs. Skipped with a message when no GPU is present.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "ops/elementwise/elementwise.h"
#include "support/seeded.h"

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include "core/cuda/cuda_check.h"
#endif

namespace dg {
namespace elementwise_cuda_test {

#if defined(DG_WITH_CUDA)
template <class T>
std::vector<T> round_trip(const std::vector<uint8_t>& in_bytes, DType st, DType dt, int64_t offset, int64_t n) {
  void *src = nullptr, *dst = nullptr;
  EXPECT_EQ(cudaMalloc(&src, in_bytes.size() + 64), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&dst, static_cast<size_t>(n + offset) * sizeof(T) + 64), cudaSuccess);
  cudaMemcpy(src, in_bytes.data(), in_bytes.size(), cudaMemcpyHostToDevice);
  const size_t ss = dtype_size(st);
  const Status s = convert_cuda(static_cast<char*>(src) + offset * ss, st, static_cast<T*>(dst) + offset, dt, n, nullptr);
  EXPECT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<T> out(static_cast<size_t>(n));
  cudaMemcpy(out.data(), static_cast<T*>(dst) + offset, out.size() * sizeof(T), cudaMemcpyDeviceToHost);
  cudaFree(src);
  cudaFree(dst);
  return out;
}

TEST(ElementwiseCuda, ConvertMatchesTheHostConversionsBitForBit) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine";
  // n and offset: the packed form (8,192 and 2,048 x 256 at offset 0), the per-element form (odd n; offset 3).
  for (auto [n, offset] : {std::pair<int64_t, int64_t>{8192, 0}, {524288, 0}, {1001, 0}, {4096, 3}}) {
    const auto f = test::seeded_uniform(static_cast<size_t>(n + offset), 7 + static_cast<uint64_t>(n), -40.0f, 40.0f);
    std::vector<uint16_t> b(f.size());
    for (size_t i = 0; i < f.size(); ++i) b[i] = f32_to_bf16(f[i]);
    std::vector<uint8_t> bbytes(b.size() * 2), fbytes(f.size() * 4);
    std::memcpy(bbytes.data(), b.data(), bbytes.size());
    std::memcpy(fbytes.data(), f.data(), fbytes.size());
    const auto h = round_trip<uint16_t>(bbytes, DType::kBF16, DType::kF16, offset, n);
    const auto g = round_trip<float>(bbytes, DType::kBF16, DType::kF32, offset, n);
    const auto r = round_trip<uint16_t>(fbytes, DType::kF32, DType::kBF16, offset, n);
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(i + offset);
      ASSERT_EQ(h[static_cast<size_t>(i)], f32_to_f16(bf16_to_f32(b[k]))) << "bf16 -> f16, n " << n << " at " << i;
      ASSERT_EQ(g[static_cast<size_t>(i)], bf16_to_f32(b[k])) << "bf16 -> f32, n " << n << " at " << i;
      ASSERT_EQ(r[static_cast<size_t>(i)], f32_to_bf16(f[k])) << "f32 -> bf16, n " << n << " at " << i;
    }
  }
}

TEST(ElementwiseCuda, SplitColsCopiesEachColumnBlock) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine";
  // The 26B-A4B sliding q/k/v split (4,096 + 2,048 + 2,048 over 256 rows), odd widths and one to four outputs.
  const std::vector<std::vector<int64_t>> shapes = {{4096, 2048, 2048}, {8}, {16, 2056}, {24, 8, 3000, 40}};
  for (int64_t rows : {1, 5, 256}) {
    for (const auto& widths : shapes) {
      int64_t total = 0;
      for (int64_t w : widths) total += w;
      std::vector<uint16_t> src(static_cast<size_t>(rows * total));
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i * 2654435761u >> 7);
      void* dsrc = nullptr;
      ASSERT_EQ(cudaMalloc(&dsrc, src.size() * 2), cudaSuccess);
      cudaMemcpy(dsrc, src.data(), src.size() * 2, cudaMemcpyHostToDevice);
      std::vector<void*> dst(widths.size());
      for (size_t o = 0; o < widths.size(); ++o) ASSERT_EQ(cudaMalloc(&dst[o], static_cast<size_t>(rows * widths[o]) * 2), cudaSuccess);
      const Status s = split_cols_cuda(dsrc, rows, dst.data(), widths.data(), static_cast<int>(widths.size()), nullptr);
      ASSERT_TRUE(s.is_ok()) << s.message();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      int64_t col0 = 0;
      for (size_t o = 0; o < widths.size(); ++o) {
        std::vector<uint16_t> got(static_cast<size_t>(rows * widths[o]));
        cudaMemcpy(got.data(), dst[o], got.size() * 2, cudaMemcpyDeviceToHost);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < widths[o]; ++c)
            ASSERT_EQ(got[static_cast<size_t>(r * widths[o] + c)], src[static_cast<size_t>(r * total + col0 + c)])
                << "output " << o << " row " << r << " col " << c << " of " << rows << " rows";
        col0 += widths[o];
        cudaFree(dst[o]);
      }
      cudaFree(dsrc);
    }
  }
  const int64_t odd[] = {12};
  void* any = nullptr;
  EXPECT_FALSE(split_cols_cuda(any, 1, &any, odd, 1, nullptr).is_ok()) << "a width not a multiple of 8";
}
#endif

}  // namespace elementwise_cuda_test
}  // namespace dg
