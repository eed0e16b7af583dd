// Top-k sparse attention, the seed's full-layer attention (shared/seed/ARCHITECTURE.md §attention, "TOP-K
// SPARSE"): attention as attention.h defines it, except that each (query row, head) keeps only the keep(visible)
// highest-scoring keys among the `visible` ones its mask lets it see; the softmax (f32) and P V run over that set.
// Selection is exact on the scores as computed and ties go to the lower key position, so the kept set is a function
// of the scores alone (deterministic). keep(visible) >= visible drops nothing: the result is dense attention's, bit
// for bit on the CPU (one body). docs/ARCHITECTURE.md ("Top-k attention") says why k counts the row's visible keys.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/host_device.h"
#include "ops/attention/attention.h"

namespace dg {

// The k rule: off (dense), a fixed k, or dyn: clamp(visible / 128, 64, 512) per query row (the seed's rule, with
// its t_total read as the keys that row sees).
struct AttnTopk {
  enum class Mode : uint8_t { kOff, kFixed, kDyn };
  Mode mode = Mode::kOff;
  int64_t k = 0;  // kFixed: keys kept per row, 1..kAttnTopkMax

  bool on() const { return mode != Mode::kOff; }
  // Keys a row that sees `visible` keys keeps (never more than visible).
  DG_HOST_DEVICE int64_t keep(int64_t visible) const {
    int64_t n = visible;
    if (mode == Mode::kFixed) n = k;
    if (mode == Mode::kDyn) {
      n = visible / 128;
      n = n < 64 ? 64 : (n > 512 ? 512 : n);
    }
    return n < visible ? n : visible;
  }
};

// The largest fixed k (the CUDA kernel holds the kept set of a row in shared memory).
inline constexpr int64_t kAttnTopkMax = 4096;

// "off" | "dyn" | K (1..kAttnTopkMax) -> the rule; throws dg::Error naming `what` (the option) and the value.
AttnTopk attn_topk_from_name(std::string_view name, std::string_view what);
std::string attn_topk_name(const AttnTopk& t);  // "off", "dyn", "256"

// The ranking key of a score: unsigned order equals float order, -0 ranks as +0 (equal scores tie). A larger key
// ranks first; among equal keys the lower key position ranks first. Shared by the CPU reference and the kernel.
DG_HOST_DEVICE inline uint32_t attn_topk_order_key(float score) {
  const float s = score + 0.0f;  // -0 + 0 = +0
  uint32_t u = 0;
#if defined(__CUDA_ARCH__)
  u = __float_as_uint(s);
#else
  std::memcpy(&u, &s, sizeof u);
#endif
  return (u & 0x80000000u) != 0 ? ~u : u | 0x80000000u;
}

// attention_cpu (attention.h) keeping topk.keep(visible) keys per (row, head); topk off: attention_cpu itself. The
// scores are rounded to `act` before they are ranked, as attention_cpu rounds them before the softmax.
void attention_topk_cpu(const float* q, int64_t rows, int64_t q_pos0, const AttnKeys& cached, const AttnKeys& fresh,
                        const AttnShape& shape, bool causal, int64_t window, const AttnTopk& topk, Storage act,
                        float* out);

}  // namespace dg
