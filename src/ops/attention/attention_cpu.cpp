// The CPU references of attention (attention.h) and top-k attention (attention_topk.h): one body, in which top-k
// masks the keys it drops before the softmax, so a rule that drops nothing runs dense attention's arithmetic.
#include "ops/attention/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "ops/attention/attention_topk.h"
#include "ops/linear/linear.h"

namespace dg {
namespace {

// Masks (-inf) every score of `visible` (key indices; reordered) but the `keep` that rank first: the larger order
// key, ties to the lower index (attention_topk.h).
void mask_all_but_top(std::vector<float>& score, std::vector<int64_t>& visible, int64_t keep) {
  const auto key = [&](int64_t j) { return attn_topk_order_key(score[static_cast<size_t>(j)]); };
  std::nth_element(visible.begin(), visible.begin() + keep, visible.end(), [&](int64_t a, int64_t b) {
    const uint32_t ka = key(a), kb = key(b);
    return ka > kb || (ka == kb && a < b);
  });
  for (auto it = visible.begin() + keep; it != visible.end(); ++it)
    score[static_cast<size_t>(*it)] = -std::numeric_limits<float>::infinity();
}

void attend(const float* q, int64_t rows, int64_t q_pos0, const AttnKeys& cached, const AttnKeys& fresh,
            const AttnShape& sh, bool causal, int64_t window, const AttnTopk& topk, Storage act, float* out) {
  const int64_t D = sh.head_dim;
  const int64_t group = sh.n_heads / sh.n_kv_heads;
  const int64_t n_keys = cached.count + fresh.count;
  parallel_for(rows * sh.n_heads, 4, [&](int64_t t0, int64_t t1) {
    std::vector<float> score(static_cast<size_t>(n_keys));
    std::vector<float> acc(static_cast<size_t>(D));
    std::vector<int64_t> shown;  // top-k: the visible keys' indices
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r = t / sh.n_heads, h = t % sh.n_heads, kvh = h / group;
      const int64_t qp = q_pos0 + r;
      const float* qv = q + (r * sh.n_heads + h) * D;
      float mx = -std::numeric_limits<float>::infinity();
      shown.clear();
      for (int64_t j = 0; j < n_keys; ++j) {
        const AttnKeys& src = j < cached.count ? cached : fresh;
        const int64_t jj = j < cached.count ? j : j - cached.count;
        const int64_t kp = src.first_pos + jj;
        const bool visible = !causal || (kp <= qp && (window <= 0 || kp > qp - window));
        if (!visible) {
          score[static_cast<size_t>(j)] = -std::numeric_limits<float>::infinity();
          continue;
        }
        const float s = round_to(act, dot_f32(qv, src.k + (jj * sh.n_kv_heads + kvh) * D, D));
        score[static_cast<size_t>(j)] = s;
        if (s > mx) mx = s;
        if (topk.on()) shown.push_back(j);
      }
      if (topk.on()) {  // the top-ranked key stays, so mx is still the largest kept score
        const auto n_shown = static_cast<int64_t>(shown.size());
        if (topk.keep(n_shown) < n_shown) mask_all_but_top(score, shown, topk.keep(n_shown));
      }
      double sum = 0.0;
      for (int64_t j = 0; j < n_keys; ++j) {
        const float e = std::isinf(score[static_cast<size_t>(j)]) ? 0.0f : std::exp(score[static_cast<size_t>(j)] - mx);
        score[static_cast<size_t>(j)] = e;
        sum += e;
      }
      const float inv = static_cast<float>(1.0 / sum);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j < n_keys; ++j) {
        const float p = round_to(act, score[static_cast<size_t>(j)] * inv);
        if (p == 0.0f) continue;
        const AttnKeys& src = j < cached.count ? cached : fresh;
        const int64_t jj = j < cached.count ? j : j - cached.count;
        const float* vv = src.v + (jj * sh.n_kv_heads + kvh) * D;
        for (int64_t d = 0; d < D; ++d) acc[static_cast<size_t>(d)] += p * vv[d];
      }
      float* o = out + r * sh.n_heads * D + h * D;
      for (int64_t d = 0; d < D; ++d) o[d] = round_to(act, acc[static_cast<size_t>(d)]);
    }
  });
}

}  // namespace

void attention_cpu(const float* q, int64_t rows, int64_t q_pos0, const AttnKeys& cached, const AttnKeys& fresh,
                   const AttnShape& sh, bool causal, int64_t window, Storage act, float* out) {
  attend(q, rows, q_pos0, cached, fresh, sh, causal, window, AttnTopk{}, act, out);
}

void attention_topk_cpu(const float* q, int64_t rows, int64_t q_pos0, const AttnKeys& cached, const AttnKeys& fresh,
                        const AttnShape& sh, bool causal, int64_t window, const AttnTopk& topk, Storage act,
                        float* out) {
  attend(q, rows, q_pos0, cached, fresh, sh, causal, window, topk, act, out);
}

void kv_write_cpu(const float* k, const float* v, int64_t n, int64_t row, int64_t pos0, float* cache_k,
                  float* cache_v, int64_t cap, bool ring, Storage storage) {
  const int64_t skip = ring ? std::max<int64_t>(0, n - cap) : 0;
  for (int64_t i = skip; i < n; ++i) {
    const int64_t p = pos0 + i, slot = ring ? p % cap : p;
    float* kd = cache_k + slot * row;
    float* vd = cache_v + slot * row;
    for (int64_t j = 0; j < row; ++j) {
      kd[j] = round_to(storage, k[i * row + j]);
      vd[j] = round_to(storage, v[i * row + j]);
    }
  }
}

void kv_read_cpu(const float* cache_k, const float* cache_v, int64_t row, int64_t cap, bool ring, int64_t pos0,
                 int64_t n, float* k, float* v) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = pos0 + i, slot = ring ? p % cap : p;
    std::memcpy(k + i * row, cache_k + slot * row, static_cast<size_t>(row) * 4);
    std::memcpy(v + i * row, cache_v + slot * row, static_cast<size_t>(row) * 4);
  }
}

}  // namespace dg
