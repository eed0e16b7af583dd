#include "ops/linear/linear.h"

#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "quant/packed_tensor.h"

namespace dg {

// The eight lanes as two 4-float vectors (GCC vector extensions): lane j accumulates a[i + j] b[i + j] in the order
// a scalar loop over j does (a product, then a sum, each rounded), so the result is the same bits; the vectors make it
// SIMD code at any optimisation level and one sanitizer check per 16-byte load instead of one per float (the
// sanitizer build's model tests spent 87 % of their time here, 4.7x less with the vectors; -O3 1.5x faster).
float dot_f32(const float* a, const float* b, int64_t n) {
  typedef float v4 __attribute__((vector_size(16)));
  v4 lo = {0, 0, 0, 0}, hi = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    v4 a0, a1, b0, b1;
    std::memcpy(&a0, a + i, sizeof a0);
    std::memcpy(&a1, a + i + 4, sizeof a1);
    std::memcpy(&b0, b + i, sizeof b0);
    std::memcpy(&b1, b + i + 4, sizeof b1);
    lo += a0 * b0;
    hi += a1 * b1;
  }
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((lo[0] + lo[1]) + (lo[2] + lo[3])) + ((hi[0] + hi[1]) + (hi[2] + hi[3])) + tail;
}

void linear_cpu_rows(const float* x, int64_t rows, int64_t in, const Tensor& w, int64_t w_row0, int64_t out, float* y) {
  DG_CHECK(w.shape.rank >= 2 && w.shape[w.shape.rank - 1] == in, "linear: weight {} does not take inputs of width {}",
           w.shape.str(), in);
  // Parallel over output features: each worker converts a block of weight rows once and applies it to every row.
  constexpr int64_t kBlock = 16;
  const int64_t n_blocks = (out + kBlock - 1) / kBlock;
  parallel_for(n_blocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> wrow(static_cast<size_t>(in * kBlock));
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t o0 = b * kBlock;
      const int64_t o1 = std::min(out, o0 + kBlock);
      weight_rows_f32(w, w_row0 + o0, o1 - o0, wrow.data());
      for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * in;
        for (int64_t o = o0; o < o1; ++o) y[r * out + o] = dot_f32(xr, wrow.data() + (o - o0) * in, in);
      }
    }
  });
}

void linear_cpu(const float* x, int64_t rows, int64_t in, const Tensor& w, float* y) {
  DG_CHECK(w.shape.rank == 2 && w.shape[1] == in, "linear: weight {} does not take inputs of width {}",
           w.shape.str(), in);
  linear_cpu_rows(x, rows, in, w, 0, w.shape[0], y);
}

}  // namespace dg
