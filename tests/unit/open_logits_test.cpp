// Backend::lm_head_open and row_stats_open on the CPU reference: it leaves nothing open (its lm_head_open is its
// lm_head, the softcap applied), its row_stats_open is its row_stats, and it refuses logits another backend's lm_head
// left open rather than read unfinished sums as logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "core/error.h"
#include "diffusion/rng.h"

namespace dg {
namespace open_logits_test {

TEST(RowStatsOpen, TheReferenceLeavesNothingOpen) {
  const int64_t rows = 3, V = 61, H = 16;
  const auto be = make_backend("cpu");
  Lcg rng(5);
  Tensor y = be->alloc(Shape{rows, H});
  for (int64_t i = 0; i < y.numel(); ++i) y.f32()[i] = static_cast<float>(rng.uniform() * 8.0 - 4.0);
  Tensor embed = host_tensor(DType::kBF16, Shape{V, H});
  for (int64_t i = 0; i < embed.numel(); ++i)
    static_cast<uint16_t*>(embed.data)[i] = f32_to_bf16(static_cast<float>(rng.uniform() * 4.0 - 2.0));
  Tensor open_l = be->alloc_f32(Shape{rows, V}), plain_l = be->alloc_f32(Shape{rows, V});
  const OpenLogits open = be->lm_head_open(y, embed, 5.0f, open_l);
  EXPECT_FALSE(open.open);
  be->lm_head(y, embed, 5.0f, plain_l);
  float most = 0.0f;
  for (int64_t i = 0; i < open_l.numel(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(open_l.f32()[i]), std::bit_cast<uint32_t>(plain_l.f32()[i])) << i;
    most = std::max(most, std::abs(open_l.f32()[i]));
  }
  EXPECT_LE(most, 5.0f) << "the softcap was applied";

  Tensor to = be->alloc_tempered(Shape{rows, V}), tp = be->alloc_tempered(Shape{rows, V});
  std::vector<RowStats> so(rows), sp(rows);
  be->row_stats_open(open_l, open, 0, 0.9f, to, so.data(), false);
  be->row_stats(plain_l, 0.9f, tp, sp.data());
  for (int64_t i = 0; i < to.numel(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(load_f32(to.data, to.dtype, i)),
              std::bit_cast<uint32_t>(load_f32(tp.data, tp.dtype, i)))
        << "tempered " << i;
  for (size_t r = 0; r < so.size(); ++r) {
    EXPECT_EQ(so[r].argmax, sp[r].argmax);
    EXPECT_EQ(std::bit_cast<uint32_t>(so[r].entropy), std::bit_cast<uint32_t>(sp[r].entropy));
    EXPECT_EQ(std::bit_cast<uint32_t>(so[r].p_max), std::bit_cast<uint32_t>(sp[r].p_max));
  }

  OpenLogits foreign;
  foreign.open = true;
  foreign.cap = 5.0f;
  try {
    be->row_stats_open(open_l, foreign, 0, 0.9f, to, so.data(), false);
    ADD_FAILURE() << "logits left open were read as finished";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("left open"), std::string::npos) << e.what();
  }
}

}  // namespace open_logits_test
}  // namespace dg
