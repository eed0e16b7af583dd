// Cases of attention (src/ops/attention/attention.h) and the cache writes that feed it: heads, kv_heads, head_dim;
// `rows` queries at positions to.. (the fresh keys' positions); cached positions [from, to) in a cache of `cap`
// slots (ring: slot p % cap), written by kv_write from position 0 in chunks, so a ring wraps before it is read;
// causal with `window` (> 0: keys after pos - window) or bidirectional (the canvas). Top-k attention
// (attention_topk.h): `topk` 0 is the dyn rule, K > 0 keeps K keys; its runner draws queries whose scores spread over
// tens of keys, so the kept set shapes the output.
#include "ops/op_cases.h"

namespace dg {
namespace {

// Measured with the inputs representable in bf16 and f16 and the twin in f32, as this harness runs it.
constexpr Bound kCudaFlash{
    .abs = 2e-2,
    .min_cosine = 0.99995,
    .basis = "the output rounded to bf16 (2^-9 relative) and the probabilities to f16 inside P V: a few bf16 ulps "
             "of |out| <= 1; scores and the softmax stay f32 on both sides",
    .measured = "AttentionFlashCuda (H200, 2026-11-30): worst max_abs 2.1e-3, cosine >= 0.9999987 over canvas "
                "attention on linear and ring caches, causal prefill with a window, chunked prefill over a ring and "
                "the real head shapes, with and without split keys"};
// Head dims the flash kernel does not cover run the gemm kernel (gathered keys, cuBLAS, bf16 probabilities).
constexpr Bound kCudaGemm{
    .abs = 2e-2,
    .min_cosine = 0.9999,
    .basis = "probabilities rounded to bf16 before P V (2^-9 relative each) and the output to bf16: a few bf16 ulps "
             "of |out| <= 1",
    .measured = "Backends/OpConformance (H200, 2026-12-02, commit 59de0e2): tiny_b canvas at head dim 8: max_abs 2.8e-3 (0.14 of the bound), cosine 0.999998"};

// The top-k path: the gemm path's gathered bf16 keys and cuBLAS f32 scores, then the selection kernel (f32 softmax
// and f32 probabilities in P V).
constexpr Bound kCudaTopk{
    .abs = 2e-2,
    .min_cosine = 0.9999,
    .basis = "scores f32 on both sides (cuBLAS against the f32 loop: summation order only), the same kept set but "
             "where two scores within that error straddle the k-th place (a key of probability ~1/k or less "
             "swapped), probabilities f32, the output rounded to bf16",
    .measured = "Backends/OpConformance (H200, 2026-12-02, commit 59de0e2): worst max_abs 1.95e-3 (0.098 of the bound; 26B-A4B prefill, full, dyn), cosine "
                ">= 0.9999985 in all 7 cases: the kept sets agreed"};

OpCase attn(std::string name, CaseParams p, bool real = false) {
  const bool flash = p.n("head_dim") >= 16;  // powers of two 16..512 (attention_flash_supports)
  return {"attention", "attention", std::move(name), std::move(p), DType::kBF16, real, true,
          {{"cuda", "", flash ? kCudaFlash : kCudaGemm}}};
}

CaseParams shape(int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t rows, int64_t cap, int64_t from,
                 int64_t to, bool ring, bool causal, int64_t window) {
  return {{"heads", heads}, {"kv_heads", kv_heads}, {"head_dim", head_dim}, {"rows", rows}, {"cap", cap},
          {"from", from}, {"to", to}, {"ring", ring ? 1 : 0}, {"causal", causal ? 1 : 0}, {"window", window}};
}

// Top-k runs on full layers: a linear cache, no window. topk: 0 dyn, K > 0 fixed.
OpCase attn_topk(std::string name, int64_t heads, int64_t kv_heads, int64_t head_dim, int64_t rows, int64_t cap,
                 int64_t to, bool causal, int64_t topk, bool real = false) {
  CaseParams p{{"heads", heads}, {"kv_heads", kv_heads}, {"head_dim", head_dim}, {"rows", rows}, {"cap", cap},
               {"from", 0}, {"to", to}, {"ring", 0}, {"causal", causal ? 1 : 0}, {"window", 0}, {"topk", topk}};
  return {"attention", "attention_topk", std::move(name), std::move(p), DType::kBF16, real, true,
          {{"cuda", "", kCudaTopk}}};
}

}  // namespace

std::vector<OpCase> attention_cases() {
  return {
      attn("one query over 7 keys", shape(2, 1, 16, 1, 7, 0, 7, false, false, 0)),
      attn("canvas tiny", shape(4, 2, 16, 20, 64, 0, 37, false, false, 0)),
      attn("tiny_a canvas, ring of W-1", shape(4, 2, 16, 16, 7, 13, 20, true, false, 0)),
      attn("tiny_a full prefill", shape(4, 1, 32, 20, 1, 0, 0, false, true, 0)),
      attn("tiny_b canvas, head dim 8 (gemm)", shape(4, 2, 8, 8, 5, 7, 12, true, false, 0)),
      attn("canvas ring d64", shape(4, 2, 64, 70, 32, 90, 121, true, false, 0)),
      attn("prefill window d32", shape(4, 2, 32, 150, 1, 0, 0, false, true, 40)),
      attn("111 rows, window 7", shape(2, 2, 32, 111, 1, 0, 0, false, true, 7)),
      attn("chunked prefill ring d128", shape(8, 2, 128, 100, 48, 53, 100, true, true, 48)),
      attn("26B-A4B canvas, sliding", shape(16, 8, 256, 256, 1023, 1000, 2023, true, false, 0), true),
      attn("26B-A4B canvas, full", shape(16, 2, 512, 256, 1400, 0, 1100, false, false, 0), true),
      attn("26B-A4B prefill, full", shape(16, 2, 512, 300, 1, 0, 0, false, true, 0), true),
      attn_topk("top-k canvas tiny, k 8", 4, 2, 16, 20, 64, 37, false, 8),
      attn_topk("top-k prefill 111 rows, k 16", 2, 2, 32, 111, 1, 0, true, 16),
      attn_topk("top-k canvas d128 over a cache, dyn", 4, 1, 128, 40, 200, 180, false, 0),
      attn_topk("top-k chunked prefill over a cache, dyn", 8, 2, 64, 100, 400, 300, true, 0),
      attn_topk("top-k k above the visible keys (dense)", 4, 2, 32, 20, 64, 37, false, 4096),
      attn_topk("top-k 26B-A4B canvas, full, dyn (k 70)", 16, 2, 512, 256, 9000, 8800, false, 0, true),
      attn_topk("top-k 26B-A4B prefill, full, dyn", 16, 2, 512, 300, 1, 0, true, 0, true),
  };
}

}  // namespace dg
