// row_digests_cuda against its CPU twin row_digest (src/ops/attention/kv_digest.h) on random bytes: rows of whole
// words and rows with a partial last word (the byte path), whole words on an unaligned base (the byte path too), one
// row and many, a 26B-A4B sliding layer's f16 rows.
// Bit-identical. Skipped without a GPU.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "ops/attention/attention_cuda.h"
#include "ops/attention/kv_digest.h"

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include "core/cuda/cuda_check.h"

namespace dg {
namespace kv_digest_cuda_test {

// `offset` bytes past an allocation's (aligned) start: a base that is not 8-byte aligned takes the byte path even
// when the rows are whole words.
void matches_twin(int64_t rows, int64_t row_bytes, uint32_t seed, int offset = 0) {
  SCOPED_TRACE(std::to_string(rows) + " rows of " + std::to_string(row_bytes) + " bytes at offset " +
               std::to_string(offset));
  std::mt19937 rng(seed);
  std::vector<uint8_t> host(static_cast<size_t>(rows * row_bytes));
  for (uint8_t& b : host) b = static_cast<uint8_t>(rng());
  void* data = nullptr;
  uint64_t* out = nullptr;
  ASSERT_EQ(cudaMalloc(&data, host.size() + static_cast<size_t>(offset)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&out, static_cast<size_t>(rows) * 8), cudaSuccess);
  uint8_t* base = static_cast<uint8_t*>(data) + offset;
  ASSERT_EQ(cudaMemcpy(base, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
  const Status st = row_digests_cuda(base, rows, row_bytes, out, nullptr);
  ASSERT_TRUE(st.is_ok()) << st.message();
  std::vector<uint64_t> got(static_cast<size_t>(rows));
  ASSERT_EQ(cudaMemcpy(got.data(), out, got.size() * 8, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(data);
  cudaFree(out);
  for (int64_t r = 0; r < rows; ++r)
    ASSERT_EQ(got[static_cast<size_t>(r)], row_digest(host.data() + r * row_bytes, row_bytes)) << "row " << r;
}

TEST(KvDigestCuda, EveryRowEqualsTheTwin) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  matches_twin(1, 8, 1);
  matches_twin(7, 13, 2);      // partial words, unaligned rows
  matches_twin(33, 100, 3);    // a warp's worth and one, partial last word
  matches_twin(9, 264, 4);     // more words than lanes, not a multiple of 32
  matches_twin(3071, 4096, 5); // a 26B-A4B sliding layer's ring of f16 rows (8 heads x 256)
  matches_twin(5, 64, 6, 1);   // whole words on an unaligned base: the byte path
}

}  // namespace kv_digest_cuda_test
}  // namespace dg
#endif
