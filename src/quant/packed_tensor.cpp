#include "quant/packed_tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "quant/codec.h"

namespace dg {

namespace {

// Calls f(begin, end, matrix) over the pieces of [row0, row0 + n) that stay inside one matrix.
template <typename F>
void for_matrix_pieces(const PackedLayout& L, int64_t row0, int64_t n, F&& f) {
  const int64_t per = L.rows / L.matrices;
  for (int64_t r = row0; r < row0 + n;) {
    const int64_t m = r / per, end = std::min(row0 + n, (m + 1) * per);
    f(r, end, m);
    r = end;
  }
}

}  // namespace

void plane_rows(const PackedLayout& L, const uint8_t* base, int64_t row, const uint8_t* out[kMaxPlanes]) {
  for (int p = 0; p < kMaxPlanes; ++p) out[p] = p < L.n_planes ? base + L.offset[p] + row * L.row_bytes[p] : nullptr;
}

float packed_global(const PackedLayout& L, const uint8_t* base, int64_t m) {
  for (int p = 0; p < L.n_planes; ++p) {
    if (L.matrix_bytes[p] == 0) continue;
    float g;
    std::memcpy(&g, base + L.offset[p] + m * 4, 4);
    return g;
  }
  return 1.0f;
}

void nvfp4_globals(const PackedLayout& L, const float* x, float* globals) {
  const int64_t per = L.rows / L.matrices;
  for (int64_t m = 0; m < L.matrices; ++m) {
    float amax = 0.0f;
    for (int64_t i = m * per * L.cols; i < (m + 1) * per * L.cols; ++i) amax = std::max(amax, std::fabs(x[i]));
    globals[m] = nvfp4_global_scale(amax);
  }
}

void encode_tensor_rows(DType fmt, const PackedLayout& L, const float* x, int64_t row0, int64_t n,
                        const float* globals, uint8_t* const dst[kMaxPlanes]) {
  parallel_for(n, 16, [&](int64_t a, int64_t b) {
    for_matrix_pieces(L, row0 + a, b - a, [&](int64_t r0, int64_t r1, int64_t m) {
      uint8_t* planes[kMaxPlanes] = {};
      for (int p = 0; p < L.n_planes; ++p)
        if (L.row_bytes[p] > 0) planes[p] = dst[p] + (r0 - row0) * L.row_bytes[p];
      encode_rows(fmt, x + (r0 - row0) * L.cols, r1 - r0, L.cols, globals != nullptr ? globals[m] : 0.0f, planes);
    });
  });
}

Tensor pack_tensor(const Tensor& src, DType fmt) {
  const char* why = packed_shape_error(fmt, src.shape);
  if (why != nullptr) fail("cannot pack a {} tensor as {}: {}", src.shape.str(), dtype_name(fmt), why);
  const PackedLayout L = packed_layout(fmt, src.shape);
  std::vector<float> x(static_cast<size_t>(src.numel()));
  convert_to_f32(src.data, src.dtype, x.size(), x.data());
  for (size_t i = 0; i < x.size(); ++i)
    if (!std::isfinite(x[i])) fail("cannot pack a {} tensor: element {} is {}", src.shape.str(), i, x[i]);
  Tensor out = host_tensor(fmt, src.shape);
  auto* base = static_cast<uint8_t*>(out.data);
  std::vector<float> globals(static_cast<size_t>(L.matrices), 0.0f);
  if (fmt == DType::kNvFp4) {
    nvfp4_globals(L, x.data(), globals.data());
    std::memcpy(base + L.offset[2], globals.data(), globals.size() * 4);
  }
  uint8_t* dst[kMaxPlanes] = {};
  for (int p = 0; p < L.n_planes; ++p) dst[p] = base + L.offset[p];
  encode_tensor_rows(fmt, L, x.data(), 0, L.rows, globals.data(), dst);
  return out;
}

void weight_rows_f32(const Tensor& w, int64_t row0, int64_t n, float* dst) {
  const int64_t K = w.shape.rank > 0 ? w.shape[w.shape.rank - 1] : 1;
  DG_CHECK(row0 >= 0 && n >= 0 && (row0 + n) * K <= w.numel(), "weight rows [{}, {}) are outside {}", row0, row0 + n,
           w.shape.str());
  if (!dtype_is_packed(w.dtype)) {
    convert_to_f32(static_cast<const uint8_t*>(w.data) + static_cast<size_t>(row0 * K) * dtype_size(w.dtype), w.dtype,
                   static_cast<size_t>(n * K), dst);
    return;
  }
  const PackedLayout L = packed_layout(w.dtype, w.shape);
  const auto* base = static_cast<const uint8_t*>(w.data);
  for_matrix_pieces(L, row0, n, [&](int64_t r0, int64_t r1, int64_t m) {
    const uint8_t* planes[kMaxPlanes];
    plane_rows(L, base, r0, planes);
    decode_rows(w.dtype, planes, r1 - r0, K, packed_global(L, base, m), dst + (r0 - row0) * K);
  });
}

Tensor unpack_tensor(const Tensor& w) {
  Tensor out = host_tensor(DType::kF32, w.shape);
  const int64_t K = w.shape.rank > 0 ? w.shape[w.shape.rank - 1] : 1;
  const int64_t rows = w.numel() / K;
  parallel_for(rows, 64, [&](int64_t a, int64_t b) { weight_rows_f32(w, a, b - a, out.f32() + a * K); });
  return out;
}

}  // namespace dg
