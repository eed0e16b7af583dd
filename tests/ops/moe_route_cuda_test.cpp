// moe_route_group_cuda (the router's top-k and the stable grouping in one launch, its last block grouping) against
// moe_route_cuda then moe_group_cuda, bit for bit: expert ids, weights, counts, offsets, perm and inv, for row counts
// from one to 1,024 (one block, a partial last block, 64 and 128 blocks), 1 to 256 experts and a top-k of 1 to 16, on
// scores with many ties (a handful of values). Each case runs twice on one ticket, which must come back to 0. The
// two-launch pair is checked against the host's stable sort in moe_stream_test.cpp and against the CPU routing in
// the op conformance cases. moe_router_route_cuda (the router's product in that launch too): below. Skipped without a
// GPU, except the refusals.
#include <gtest/gtest.h>

#if defined(DG_WITH_CUDA)
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "core/dtype.h"
#include "ops/moe/moe_cuda.h"
#include "ops/moe_stream_checks.h"
#include "support/device_buf.h"

namespace dg {
namespace moe_route_cuda_test {

using moe_stream_test::have_gpu;
using test::DeviceBuf;

struct Outputs {
  std::vector<int32_t> idx, counts, offsets, perm, inv;
  std::vector<float> weight;
};

Outputs fetch(const DeviceBuf& idx, const DeviceBuf& weight, const DeviceBuf& counts, const DeviceBuf& offsets,
              const DeviceBuf& perm, const DeviceBuf& inv, int64_t pairs, int64_t n_exp) {
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto n = static_cast<size_t>(pairs), e = static_cast<size_t>(n_exp);
  return Outputs{idx.get<int32_t>(n),          counts.get<int32_t>(e), offsets.get<int32_t>(e + 1),
                 perm.get<int32_t>(n),         inv.get<int32_t>(n),    weight.get<float>(n)};
}

TEST(MoeRouteGroupCuda, MatchesRouteThenGroupBitForBit) {
  DG_NEED_GPU();
  struct Case {
    int64_t rows;
    int top_k;
    int64_t n_exp;
  };
  const DeviceBuf ticket(std::vector<unsigned>{0u});
  for (const Case& c : {Case{1, 8, 128}, Case{7, 8, 128}, Case{8, 8, 128}, Case{9, 3, 5}, Case{256, 8, 128},
                        Case{500, 8, 128}, Case{512, 8, 128}, Case{256, 16, 256}, Case{1024, 1, 1}, Case{33, 2, 2}}) {
    const std::string name = std::to_string(c.rows) + " rows, top " + std::to_string(c.top_k) + " of " +
                             std::to_string(c.n_exp);
    ASSERT_TRUE(moe_route_group_takes(c.rows, c.n_exp, c.top_k)) << name;
    std::mt19937 rng(static_cast<uint32_t>(c.rows * 131 + c.n_exp));
    std::uniform_int_distribution<int> level(-4, 4);
    std::uniform_real_distribution<float> pe(0.5f, 1.5f);
    std::vector<uint16_t> scores(static_cast<size_t>(c.rows * c.n_exp)), pes(static_cast<size_t>(c.n_exp));
    for (uint16_t& v : scores) v = f32_to_bf16(0.25f * static_cast<float>(level(rng)));  // ties in every row
    for (uint16_t& v : pes) v = f32_to_bf16(pe(rng));
    const DeviceBuf ds(scores), dpes(pes);
    const int64_t pairs = c.rows * c.top_k;
    const size_t pb = static_cast<size_t>(pairs) * 4, eb = static_cast<size_t>(c.n_exp) * 4;
    const DeviceBuf idx(pb), weight(pb), counts(eb), offsets(eb + 4), perm(pb), inv(pb);
    Status s = moe_route_cuda(ds.p, c.rows, c.n_exp, c.top_k, dpes.p, idx.as<int32_t>(), weight.as<float>(), nullptr);
    ASSERT_TRUE(s.is_ok()) << s.message();
    s = moe_group_cuda(idx.as<int32_t>(), pairs, c.n_exp, counts.as<int32_t>(), offsets.as<int32_t>(),
                       perm.as<int32_t>(), inv.as<int32_t>(), nullptr);
    ASSERT_TRUE(s.is_ok()) << s.message();
    const Outputs want = fetch(idx, weight, counts, offsets, perm, inv, pairs, c.n_exp);
    const DeviceBuf scratch(static_cast<size_t>(moe_route_group_scratch(c.rows, c.n_exp, c.top_k)) * 4);
    for (int run = 0; run < 2; ++run) {
      for (const DeviceBuf* b : {&idx, &weight, &counts, &offsets, &perm, &inv})
        ASSERT_EQ(cudaMemset(b->p, 0xff, b == &counts ? eb : b == &offsets ? eb + 4 : pb), cudaSuccess);
      s = moe_route_group_cuda(ds.p, c.rows, c.n_exp, c.top_k, dpes.p, idx.as<int32_t>(), weight.as<float>(),
                               counts.as<int32_t>(), offsets.as<int32_t>(), perm.as<int32_t>(), inv.as<int32_t>(),
                               scratch.as<int32_t>(), ticket.as<unsigned>(), nullptr);
      ASSERT_TRUE(s.is_ok()) << s.message();
      const Outputs got = fetch(idx, weight, counts, offsets, perm, inv, pairs, c.n_exp);
      EXPECT_EQ(got.idx, want.idx) << name;
      EXPECT_EQ(got.counts, want.counts) << name;
      EXPECT_EQ(got.offsets, want.offsets) << name;
      EXPECT_EQ(got.perm, want.perm) << name;
      EXPECT_EQ(got.inv, want.inv) << name;
      ASSERT_EQ(got.weight.size(), want.weight.size());
      for (size_t i = 0; i < got.weight.size(); ++i)  // bitwise: the same arithmetic
        ASSERT_EQ(std::bit_cast<uint32_t>(got.weight[i]), std::bit_cast<uint32_t>(want.weight[i]))
            << name << " pair " << i;
      EXPECT_EQ(ticket.get<unsigned>(1)[0], 0u) << name << " run " << run;
    }
  }
}

// moe_router_route_cuda: its scores against f64 sums of the same bf16 inputs (within one bf16 step: its f32 sums run
// in another order, so a score may round to the other neighbour), and its routing and grouping bit for bit against
// moe_route_cuda then moe_group_cuda on those scores. Row tiles of 16 (1, 16, 17, 500 and 1,024 rows: a partial tile,
// 64 tiles), 16 to 256 experts, hidden sizes of 32 to 2,816; twice each on one set of tickets, all back to 0.
TEST(MoeRouterRouteCuda, ScoresWithinAStepRoutedAsTheTwoLaunches) {
  DG_NEED_GPU();
  struct Case {
    int64_t rows, hidden, n_exp;
    int top_k;
  };
  const DeviceBuf tickets(std::vector<unsigned>(kRouterTickets, 0u));
  for (const Case& c : {Case{1, 64, 16, 2}, Case{16, 2816, 128, 8}, Case{17, 2816, 128, 8}, Case{256, 2816, 128, 8},
                        Case{500, 96, 32, 4}, Case{1024, 64, 128, 8}, Case{100, 32, 256, 16}}) {
    const std::string name = std::to_string(c.rows) + " rows, hidden " + std::to_string(c.hidden) + ", top " +
                             std::to_string(c.top_k) + " of " + std::to_string(c.n_exp);
    ASSERT_TRUE(moe_router_route_takes(c.rows, c.hidden, c.n_exp, c.top_k)) << name;
    std::mt19937 rng(static_cast<uint32_t>(c.rows * 7 + c.hidden + c.n_exp));
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_real_distribution<float> pe(0.5f, 1.5f);
    std::vector<uint16_t> r(static_cast<size_t>(c.rows * c.hidden)), w(static_cast<size_t>(c.n_exp * c.hidden));
    std::vector<uint16_t> pes(static_cast<size_t>(c.n_exp));
    for (uint16_t& v : r) v = f32_to_bf16(nd(rng));
    for (uint16_t& v : w) v = f32_to_bf16(0.05f * nd(rng));
    for (uint16_t& v : pes) v = f32_to_bf16(pe(rng));
    const DeviceBuf dr(r), dw(w), dpes(pes);
    const int64_t pairs = c.rows * c.top_k;
    const size_t pb = static_cast<size_t>(pairs) * 4, eb = static_cast<size_t>(c.n_exp) * 4;
    const DeviceBuf scores(static_cast<size_t>(c.rows * c.n_exp) * 2), idx(pb), weight(pb), counts(eb),
        offsets(eb + 4), perm(pb), inv(pb);
    const DeviceBuf scratch(static_cast<size_t>(moe_router_route_scratch(c.rows, c.n_exp, c.top_k)) * 4);
    for (int run = 0; run < 2; ++run) {
      Status s = moe_router_route_cuda(dr.p, dw.p, c.rows, c.hidden, c.n_exp, c.top_k, dpes.p, scores.p,
                                       idx.as<int32_t>(), weight.as<float>(), counts.as<int32_t>(),
                                       offsets.as<int32_t>(), perm.as<int32_t>(), inv.as<int32_t>(),
                                       scratch.as<int32_t>(), tickets.as<unsigned>(), nullptr);
      ASSERT_TRUE(s.is_ok()) << s.message();
      const Outputs got = fetch(idx, weight, counts, offsets, perm, inv, pairs, c.n_exp);
      EXPECT_EQ(tickets.get<unsigned>(kRouterTickets), std::vector<unsigned>(kRouterTickets, 0u)) << name;
      const auto sc = scores.get<uint16_t>(static_cast<size_t>(c.rows * c.n_exp));
      int far = 0;
      for (int64_t i = 0; i < c.rows; ++i)
        for (int64_t e = 0; e < c.n_exp; ++e) {
          double ref = 0.0;
          for (int64_t k = 0; k < c.hidden; ++k)
            ref += static_cast<double>(bf16_to_f32(r[static_cast<size_t>(i * c.hidden + k)])) *
                   bf16_to_f32(w[static_cast<size_t>(e * c.hidden + k)]);
          const double step = std::ldexp(1.0, std::ilogb(ref) - 7);  // a bf16 step at |ref|
          far += std::fabs(bf16_to_f32(sc[static_cast<size_t>(i * c.n_exp + e)]) - ref) > step;
        }
      EXPECT_EQ(far, 0) << name << ": scores more than a bf16 step from the f64 sums";
      // The two launches on the kernel's own scores.
      const DeviceBuf idx2(pb), weight2(pb), counts2(eb), offsets2(eb + 4), perm2(pb), inv2(pb);
      s = moe_route_cuda(scores.p, c.rows, c.n_exp, c.top_k, dpes.p, idx2.as<int32_t>(), weight2.as<float>(),
                         nullptr);
      ASSERT_TRUE(s.is_ok()) << s.message();
      s = moe_group_cuda(idx2.as<int32_t>(), pairs, c.n_exp, counts2.as<int32_t>(), offsets2.as<int32_t>(),
                         perm2.as<int32_t>(), inv2.as<int32_t>(), nullptr);
      ASSERT_TRUE(s.is_ok()) << s.message();
      const Outputs want = fetch(idx2, weight2, counts2, offsets2, perm2, inv2, pairs, c.n_exp);
      EXPECT_EQ(got.idx, want.idx) << name;
      EXPECT_EQ(got.counts, want.counts) << name;
      EXPECT_EQ(got.offsets, want.offsets) << name;
      EXPECT_EQ(got.perm, want.perm) << name;
      EXPECT_EQ(got.inv, want.inv) << name;
      for (size_t i = 0; i < got.weight.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got.weight[i]), std::bit_cast<uint32_t>(want.weight[i]))
            << name << " pair " << i;
    }
  }
}

TEST(MoeRouterRouteCuda, RefusesWhatItDoesNotTake) {
  using Shape4 = std::tuple<int64_t, int64_t, int64_t, int>;  // rows, hidden, experts, top-k
  for (const auto& [rows, hidden, n_exp, top_k] :
       {Shape4{1025, 64, 16, 2}, Shape4{4, 48, 128, 8}, Shape4{4, 64, 120, 8}, Shape4{4, 64, 272, 8},
        Shape4{4, 64, 128, 17}, Shape4{0, 64, 128, 8}, Shape4{1000, 64, 256, 8}}) {
    EXPECT_FALSE(moe_router_route_takes(rows, hidden, n_exp, top_k)) << rows << " " << hidden << " " << n_exp;
    const Status s = moe_router_route_cuda(nullptr, nullptr, rows, hidden, n_exp, top_k, nullptr, nullptr, nullptr,
                                           nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("moe_route_group_cuda take the rest"), std::string::npos) << s.message();
  }
}

TEST(MoeRouteGroupCuda, RefusesWhatItDoesNotTake) {
  using Shape3 = std::tuple<int64_t, int64_t, int>;  // rows, experts, top-k
  for (const auto& [rows, n_exp, top_k] : {Shape3{1025, 1, 1}, Shape3{513, 128, 8}, Shape3{257, 256, 8},
                                          Shape3{4, 257, 8}, Shape3{4, 128, 17}, Shape3{0, 128, 8}, Shape3{4, 4, 5}}) {
    EXPECT_FALSE(moe_route_group_takes(rows, n_exp, top_k)) << rows << " " << n_exp << " " << top_k;
    const Status s = moe_route_group_cuda(nullptr, rows, n_exp, top_k, nullptr, nullptr, nullptr, nullptr, nullptr,
                                          nullptr, nullptr, nullptr, nullptr, nullptr);
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("moe_route_cuda then moe_group_cuda take the rest"), std::string::npos)
        << s.message();
  }
}

}  // namespace moe_route_cuda_test
}  // namespace dg
#endif
