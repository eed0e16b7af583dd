// The CUDA backend's side-by-side products and qkv_heads (see attention_heads.h).
#include "backend/cuda/attention_heads.h"

#include "backend/cuda/fp8_gemm.h"
#include "backend/cuda/host_check.h"
#include "backend/cuda/packed_linear.h"
#include "ops/elementwise/elementwise.h"
#include "ops/glu/glu_cuda.h"
#include "ops/rmsnorm/rmsnorm_cuda.h"
#include "ops/rope/rope_cuda.h"

namespace dg {

using cuda_host::check;

namespace {
int64_t act_rows(const Tensor& t) { return t.numel() / t.shape[t.shape.rank - 1]; }
int64_t act_cols(const Tensor& t) { return t.shape[t.shape.rank - 1]; }
}  // namespace

const Tensor* side_by_side(const Tensor& x, std::span<const Tensor* const> w, int64_t& total) {
  const Tensor* first = nullptr;
  const char* next = nullptr;
  int n = 0;
  total = 0;
  for (const Tensor* t : w) {
    if (t == nullptr) continue;
    if (t->dtype != DType::kBF16 || t->shape[1] != act_cols(x) || t->shape[0] % 8 != 0 ||
        (next != nullptr && t->data != next))
      return nullptr;
    next = static_cast<const char*>(t->data) + t->nbytes();
    if (first == nullptr) first = t;
    total += t->shape[0];
    ++n;
  }
  return n >= 2 && n <= 4 && act_rows(x) <= kFusedRowsMax ? first : nullptr;
}

const Tensor* fp8_side_by_side(const Tensor& x, std::span<const Tensor* const> w, int64_t& total, int64_t* col) {
  const Tensor* first = nullptr;
  const char* next = nullptr;
  int n = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const Tensor* t = w[i];
    if (t == nullptr) continue;
    if (t->dtype != DType::kFp8 || t->shape.rank != 2 || t->shape[1] != act_cols(x) || t->shape[0] % 16 != 0 ||
        (next != nullptr && t->data != next))
      return nullptr;
    if (first == nullptr) first = t;
    col[i] = (static_cast<const char*>(t->data) - static_cast<const char*>(first->data)) / t->shape[1];
    total = col[i] + t->shape[0];
    next = static_cast<const char*>(t->data) + fp8_group_stride(*t);
    ++n;
  }
  return n >= 2 && n <= 4 ? first : nullptr;
}

namespace {
// Whether w holds at least one weight, every one fp8, and fp8 inputs are on.
bool all_fp8(const CublasCtx& c, std::span<const Tensor* const> w) {
  int n = 0;
  for (const Tensor* t : w) {
    if (t == nullptr) continue;
    if (t->dtype != DType::kFp8) return false;
    ++n;
  }
  return c.act8 && n > 0;
}
}  // namespace

bool a8_on_load(const CublasCtx& c, const Tensor& x, std::span<const Tensor* const> w) {
  if (!c.a8_on_load || c.a8_stream || !all_fp8(c, w)) return false;
  DG_CHECK(c.fp8 != nullptr, "fp8 linears: the backend has no W8A8 product");
  for (const Tensor* t : w) {
    if (t == nullptr) continue;
    DG_CHECK(t->shape.rank == 2 && t->shape[1] == act_cols(x), "fp8 linears: a weight {} does not take inputs of "
             "width {}", t->shape.str(), act_cols(x));
    if (!fp8_gemm_shape_ok(act_cols(x), t->shape[0])) return false;
  }
  return true;
}

Act8 a8_quantise(const CublasCtx& c, const Tensor& x) {
  Act8 q{c.alloc(DType::kU8, Shape{act_rows(x), act_cols(x)}), c.alloc(DType::kF32, Shape{act_rows(x)})};
  check(moe_act_quant_fp8_cuda(x.data, act_rows(x), act_cols(x), q.codes.data, q.scale.f32(), c.stream));
  return q;
}

bool codes_wanted(const RowCodes* codes, const Tensor& x) {
  if (codes == nullptr || codes->codes.empty()) return false;
  DG_CHECK(codes->codes.numel() == x.numel() && codes->scale.numel() == act_rows(x),
           "W8A8 input codes of {} and {} row scales for an input of {}", codes->codes.shape.str(),
           codes->scale.numel(), x.shape.str());
  return true;
}

Act8 a8_input(const CublasCtx& c, const Tensor& x, const RowCodes* codes) {
  if (codes == nullptr || !codes->filled || !codes_wanted(codes, x)) return a8_quantise(c, x);
  return Act8{codes->codes, codes->scale};
}

bool linears_cuda(const CublasCtx& c, const Tensor& x, std::span<const Tensor* const> w,
                  std::span<Tensor* const> out) {
  int64_t total = 0;
  const Tensor* first = side_by_side(x, w, total);
  if (first == nullptr) {
    if (!all_fp8(c, w)) return false;
    fp8_linears_cuda(c, x, act_rows(x), act_cols(x), w, out);
    return true;
  }
  std::vector<void*> dst;
  std::vector<int64_t> widths;
  for (size_t i = 0; i < w.size(); ++i)
    if (w[i] != nullptr) {
      dst.push_back(out[i]->data);
      widths.push_back(w[i]->shape[0]);
    }
  Tensor y = c.alloc(DType::kBF16, Shape{act_rows(x), total});
  dense_linear_cuda(c, x.data, act_rows(x), act_cols(x), first->data, total, y.data);
  check(split_cols_cuda(y.data, act_rows(x), dst.data(), widths.data(), static_cast<int>(dst.size()), c.stream));
  return true;
}

bool gated_linear_cuda(const CublasCtx& c, const Tensor& x, const Tensor& gate, const Tensor& up, Tensor& out,
                       const RowCodes* x_codes, RowCodes* out_codes) {
  const int64_t I = gate.shape[0], rows = act_rows(x), K = act_cols(x);
  if (out_codes != nullptr) out_codes->filled = false;
  if (const Tensor* gu[2] = {&gate, &up}; a8_on_load(c, x, gu) && up.shape[0] == I) {  // gate | up raw, side by side
    const Act8 xq = a8_input(c, x, x_codes);
    int64_t total = 0, col[2] = {};
    Tensor raw;
    if (fp8_side_by_side(x, gu, total, col) != nullptr) {  // one product over both: up from column col[1]
      raw = c.alloc(DType::kBF16, Shape{rows, total});
      c.fp8->run_bf16(xq.codes.data, rows, K, gate.data, total, raw.data, total, c.stream);
    } else {
      total = 2 * I, col[1] = I;
      raw = c.alloc(DType::kBF16, Shape{rows, total});
      c.fp8->run_bf16(xq.codes.data, rows, K, gate.data, I, raw.data, total, c.stream);
      c.fp8->run_bf16(xq.codes.data, rows, K, up.data, I, static_cast<uint16_t*>(raw.data) + I, total, c.stream);
    }
    if (codes_wanted(out_codes, out) &&
        gelu_mul_split_scaled_codes_fits(raw.data, I, total, col[1], out.data, out_codes->codes.data)) {
      check(gelu_mul_split_scaled_codes_cuda(raw.data, rows, I, total, col[1], xq.scale.f32(), fp8_scales(gate),
                                             fp8_scales(up), out.data, out_codes->codes.data,
                                             out_codes->scale.f32(), c.stream));
      out_codes->filled = true;
      return true;
    }
    check(gelu_mul_split_scaled_cuda(raw.data, rows, I, total, col[1], xq.scale.f32(), fp8_scales(gate),
                                     fp8_scales(up), out.data, c.stream));
    return true;
  }
  if (const Tensor* gu[2] = {&gate, &up}; all_fp8(c, gu)) {  // W8A8: the input quantised once for both
    Tensor g = c.alloc(DType::kBF16, out.shape), u = c.alloc(DType::kBF16, out.shape);
    Tensor* outs[2] = {&g, &u};
    fp8_linears_cuda(c, x, act_rows(x), act_cols(x), gu, outs);
    check(gelu_mul_cuda(g.data, u.data, out.data, g.numel(), c.stream));
    return true;
  }
  if (gate.dtype != DType::kBF16 || up.dtype != DType::kBF16 || up.shape[0] != I ||
      up.data != static_cast<const char*>(gate.data) + gate.nbytes())
    return false;
  Tensor gu = c.alloc(DType::kBF16, Shape{act_rows(x), 2 * I});
  dense_linear_cuda(c, x.data, act_rows(x), act_cols(x), gate.data, 2 * I, gu.data);
  check(gelu_mul_split_cuda(gu.data, act_rows(x), I, out.data, c.stream));
  return true;
}

bool qkv_heads_cuda(const CublasCtx& c, float eps, const float* inv_freq, const Tensor& a,
                    std::span<const Tensor* const> w, const Tensor* q_norm, const Tensor& k_norm,
                    std::span<const RopeSpan> spans, Tensor* qn, Tensor& kn, Tensor& vn,
                    const std::function<void(std::span<Tensor* const>)>& linears, bool rope_table,
                    FreshKvCopy* f16, const RowCodes* a_codes) {
  const int64_t rows = act_rows(a), n_kv = kn.shape[1], D = kn.shape[2];
  int64_t covered = 0;
  for (const RopeSpan& sp : spans) covered = sp.row0 == covered ? covered + sp.rows : -1;
  if (w.size() != 3 || D % 16 != 0 || D > 1024 || covered != rows) return false;
  const void* src[3] = {};
  int64_t ld[3] = {};
  Tensor y, raw[3];
  Act8 xq;                              // the input's E4M3 codes and row scales (W8A8 raw sums)
  const float* col_scale[3] = {};       // each product's weight-row scales (W8A8 raw sums)
  int64_t total = 0;
  const Tensor* first = nullptr;  // the first of weights placed side by side: one product over them all
  if ((first = side_by_side(a, w, total)) != nullptr) {
    y = c.alloc(DType::kBF16, Shape{rows, total});
    dense_linear_cuda(c, a.data, rows, act_cols(a), first->data, total, y.data);
    int64_t col = 0;
    for (size_t i = 0; i < 3; ++i)
      if (w[i] != nullptr) {
        src[i] = static_cast<const char*>(y.data) + col * 2;  // bf16 columns
        ld[i] = total;
        col += w[i]->shape[0];
      }
  } else if (int64_t col[3] = {}; a8_on_load(c, a, w) && (first = fp8_side_by_side(a, w, total, col)) != nullptr) {
    xq = a8_input(c, a, a_codes);  // one e4m3 product over the weights side by side; heads_norm applies the scales
    y = c.alloc(DType::kBF16, Shape{rows, total});
    c.fp8->run_bf16(xq.codes.data, rows, act_cols(a), first->data, total, y.data, total, c.stream);
    for (size_t i = 0; i < 3; ++i)
      if (const Tensor* t = w[i]; t != nullptr) {
        src[i] = static_cast<const char*>(y.data) + col[i] * 2;  // bf16 columns
        ld[i] = total;
        col_scale[i] = fp8_scales(*t);
      }
  } else if (a8_on_load(c, a, w)) {  // W8A8 raw sums: heads_norm applies both scales as it reads them
    xq = a8_input(c, a, a_codes);
    for (size_t i = 0; i < 3; ++i)
      if (const Tensor* t = w[i]; t != nullptr) {
        raw[i] = c.alloc(DType::kBF16, Shape{rows, t->shape[0]});
        c.fp8->run_bf16(xq.codes.data, rows, act_cols(a), t->data, t->shape[0], raw[i].data, t->shape[0], c.stream);
        src[i] = raw[i].data;
        ld[i] = t->shape[0];
        col_scale[i] = fp8_scales(*t);
      }
  } else {
    Tensor* outs[3] = {};
    for (size_t i = 0; i < 3; ++i)
      if (const Tensor* t = w[i]; t != nullptr) {
        raw[i] = c.alloc(DType::kBF16, Shape{rows, t->shape[0]});
        outs[i] = &raw[i];
        src[i] = raw[i].data;
        ld[i] = t->shape[0];
      }
    linears(outs);
  }
  if (w[2] == nullptr) src[2] = src[1], ld[2] = ld[1], col_scale[2] = col_scale[1];  // V is the raw K product
  const float* row_scale = xq.scale.empty() ? nullptr : xq.scale.f32();
  HeadsBlock blocks[3];
  int n = 0;
  if (qn != nullptr) blocks[n++] = {src[0], ld[0], qn->shape[1], q_norm->data, true, qn->data, nullptr,
                                    row_scale, col_scale[0]};
  if (f16 != nullptr) {
    f16->k = c.alloc(DType::kF16, kn.shape);
    f16->v = c.alloc(DType::kF16, vn.shape);
  }
  blocks[n++] = {src[1], ld[1], n_kv, k_norm.data, true, kn.data, f16 != nullptr ? f16->k.data : nullptr, row_scale,
                 col_scale[1]};
  blocks[n++] = {src[2], ld[2], n_kv, nullptr, false, vn.data, f16 != nullptr ? f16->v.data : nullptr, row_scale,
                 col_scale[2]};
  Tensor table;
  if (rope_table) {  // [rows][D / 2] bf16 pairs: 4 bytes each
    table = c.alloc(DType::kF32, Shape{rows, D / 2});
    check(rope_table_cuda(spans.data(), static_cast<int>(spans.size()), rows, D / 2, inv_freq, table.data, c.stream));
  }
  check(heads_norm_cuda(blocks, n, rows, D, eps, spans.data(), static_cast<int>(spans.size()), inv_freq, c.stream,
                        rope_table ? table.data : nullptr));
  return true;
}

}  // namespace dg
