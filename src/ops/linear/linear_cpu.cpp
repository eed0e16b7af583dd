#include "ops/linear/linear.h"

#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "quant/packed_tensor.h"

namespace dg {

float dot_f32(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
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
