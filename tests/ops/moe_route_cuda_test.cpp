// moe_route_group_cuda (the router's top-k and the stable grouping in one launch, its last block grouping) against
// moe_route_cuda then moe_group_cuda, bit for bit: expert ids, weights, counts, offsets, perm and inv, for row counts
// from one to 1,024 (one block, a partial last block, 64 and 128 blocks), 1 to 256 experts and a top-k of 1 to 16, on
// scores with many ties (a handful of values). Each case runs twice on one ticket, which must come back to 0. The
// two-launch pair is checked against the host's stable sort in moe_stream_test.cpp and against the CPU routing in
// the op conformance cases. Skipped without a GPU, except the refusal.
#include <gtest/gtest.h>

#if defined(DG_WITH_CUDA)
#include <bit>
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
