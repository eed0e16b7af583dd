// How a round's prompt-token budget is shared (PrefillRotation, src/diffusion/batch.h): within the budget, in
// turns from the prompt after the one served last; a long prompt delays the prompts behind it by at most one round
// and is not held back by prompts that keep arriving.
#include <gtest/gtest.h>

#include <limits>
#include <map>

#include "diffusion/batch.h"

namespace dg {
namespace prefill_rotation_test {

// Simulates rounds over prompts (admission number -> tokens left), new ones arriving at given rounds; returns the
// round each prompt finished in.
std::map<uint64_t, int> run(std::map<uint64_t, int64_t> left, int64_t budget,
                            const std::map<int, std::map<uint64_t, int64_t>>& arrivals = {}) {
  PrefillRotation rot;
  std::map<uint64_t, int> finished;
  for (int round = 0; round < 1000 && (!left.empty() || round <= (arrivals.empty() ? 0 : arrivals.rbegin()->first));
       ++round) {
    if (const auto a = arrivals.find(round); a != arrivals.end()) left.insert(a->second.begin(), a->second.end());
    std::vector<uint64_t> ids;
    std::vector<int64_t> waiting;
    for (const auto& [id, n] : left) {
      ids.push_back(id);
      waiting.push_back(n);
    }
    int64_t spent = 0;
    for (const PrefillTake& t : rot.pick(ids, waiting, budget)) {
      EXPECT_GT(t.tokens, 0);
      EXPECT_LE(t.tokens, waiting[t.index]);
      spent += t.tokens;
      if ((left[ids[t.index]] -= t.tokens) == 0) {
        left.erase(ids[t.index]);
        finished[ids[t.index]] = round;
      }
    }
    EXPECT_LE(spent, prefill_round_limit(budget)) << "round " << round;
    int64_t total = 0;
    for (const int64_t n : waiting) total += n;
    EXPECT_GE(spent, std::min(total, budget)) << "round " << round << ": the budget is used while prompts wait";
  }
  return finished;
}

TEST(PrefillRotation, PromptsArrivingTogetherShareTheBudgetInTurns) {
  // Eight prompts of 1,024 tokens, 4,096 per round: four finish in round 0, four in round 1.
  std::map<uint64_t, int64_t> p;
  for (uint64_t i = 0; i < 8; ++i) p[i] = 1024;
  const auto done = run(p, 4096);
  for (uint64_t i = 0; i < 8; ++i) EXPECT_EQ(done.at(i), i < 4 ? 0 : 1) << "prompt " << i;
}

TEST(PrefillRotation, ALongPromptDelaysTheShortOnesBehindItByOneRound) {
  // 40,000 tokens first, then three of 100, 4,096 per round.
  const auto done = run({{0, 40000}, {1, 100}, {2, 100}, {3, 100}}, 4096);
  for (uint64_t i = 1; i <= 3; ++i) EXPECT_EQ(done.at(i), 1) << "short prompt " << i;
  EXPECT_EQ(done.at(0), 9) << "40,300 tokens at 4,096 a round: ten rounds, none lost";
}

TEST(PrefillRotation, PromptsThatKeepArrivingDoNotHoldBackALongOne) {
  // A new 3,000-token prompt every round for 40 rounds beside one of 12,000: the long one gets a turn every
  // other round at least, so it finishes long before the stream of new prompts ends.
  std::map<int, std::map<uint64_t, int64_t>> arrivals;
  for (int r = 1; r < 40; ++r) arrivals[r] = {{static_cast<uint64_t>(r), 3000}};
  const auto done = run({{0, 12000}}, 4096, arrivals);
  EXPECT_LE(done.at(0), 8);
  for (int r = 1; r < 40; ++r) EXPECT_LE(done.at(static_cast<uint64_t>(r)), r + 1) << "prompt " << r;
}

TEST(PrefillRotation, NothingWaitingTakesNothing) {
  PrefillRotation rot;
  EXPECT_TRUE(rot.pick({}, {}, 100).empty());
  const std::vector<uint64_t> ids = {4};
  const std::vector<int64_t> waiting = {10};
  EXPECT_TRUE(rot.pick(ids, waiting, 0).empty());
}

// A chat turn a few tokens past the budget is encoded in one round, not a second pass for its last tokens; past an
// eighth of the budget it takes two, and a round never takes more than prefill_round_limit.
TEST(PrefillRotation, APromptAFewTokensPastTheBudgetFinishesInOneRound) {
  EXPECT_EQ(prefill_round_limit(4096), 4608);
  EXPECT_EQ(prefill_round_limit(std::numeric_limits<int64_t>::max()), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(run({{0, 4107}}, 4096).at(0), 0);
  EXPECT_EQ(run({{0, 4608}}, 4096).at(0), 0);
  EXPECT_EQ(run({{0, 4609}}, 4096).at(0), 1);
  // Behind a prompt that leaves 96 tokens of the budget, one of up to 96 + 512 tokens fits in that share and the
  // slack; one more token waits a round.
  const auto done = run({{0, 4000}, {1, 609}}, 4096);
  EXPECT_EQ(done.at(0), 0);
  EXPECT_EQ(done.at(1), 1) << "609 > 96 + 512: the rest waits a round";
  const auto fits = run({{0, 4000}, {1, 608}}, 4096);
  EXPECT_EQ(fits.at(1), 0) << "608 = 96 + 512";
}

}  // namespace prefill_rotation_test
}  // namespace dg
