// Prefill progress (GenerateEvents::on_prefill, Session::sync's PrefillProgress): (0, total) before the first chunk
// and (done, total) after each --prefill-chunk of the prompt, only for the prompt (committed blocks stay silent),
// with the same cache as an unreported prefill. A session refuses a log beyond max_position_embeddings before its
// cache changes, and an encode that fails halfway leaves it empty rather than out of step with its log.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "core/error.h"
#include "engine/engine_core.h"
#include "support/expect_error.h"
#include "support/paths.h"
#include "support/tiny_checkpoint.h"

namespace dg {
namespace prefill_progress_test {

using Calls = std::vector<std::pair<int64_t, int64_t>>;

std::unique_ptr<EngineCore> tiny_engine(const std::string& tag, int64_t prefill_chunk, int max_positions = 0) {
  nlohmann::json cfg = test::tiny_config_json();
  if (max_positions > 0) cfg["text_config"]["max_position_embeddings"] = max_positions;
  const std::string dir = test::scratch_dir(tag);
  test::write_checkpoint(dir, cfg, test::tiny_tensors(test::tiny_model_config()));
  EngineOptions eo;
  eo.model_dir = dir;
  eo.prefill_chunk = prefill_chunk;
  return EngineCore::open(eo);
}

std::vector<int32_t> ids(size_t n) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(3 + i % 50);
  return v;
}

TEST(PrefillProgress, EachChunkOfThePromptIsReportedAndOnlyThePrompt) {
  const auto engine = tiny_engine("prefill-progress", 5);
  Calls calls;
  size_t encodes = 0;
  GenerateEvents ev;
  ev.on_prefill = [&](int64_t done, int64_t total) { calls.emplace_back(done, total); };
  ev.on_encoded = [&](size_t) { ++encodes; };
  const SamplerOptions so = fixed_step_options(1, 24);  // three 8-token blocks: two are encoded after the prompt
  const GenerateResult r = engine->generate(ids(23), so, &ev);
  EXPECT_EQ(r.tokens.size(), 24u);
  EXPECT_EQ(encodes, 3u);
  EXPECT_EQ(calls, (Calls{{0, 23}, {5, 23}, {10, 23}, {15, 23}, {20, 23}, {23, 23}}));

  calls.clear();  // a prompt within one chunk: before and after it
  engine->generate(ids(4), fixed_step_options(1, 8), &ev);
  EXPECT_EQ(calls, (Calls{{0, 4}, {4, 4}}));
}

TEST(PrefillProgress, ASessionReportsWhatItEncodesWithTheSameCache) {
  const auto engine = tiny_engine("prefill-progress-session", 4);
  Session reported = engine->open_session(), quiet = engine->open_session();
  Calls calls;
  const PrefillProgress progress = [&](int64_t done, int64_t total) { calls.emplace_back(done, total); };
  std::vector<int32_t> log = ids(10);
  reported.sync(log, progress);
  EXPECT_EQ(calls, (Calls{{0, 10}, {4, 10}, {8, 10}, {10, 10}}));
  calls.clear();
  log.insert(log.end(), {7, 8, 9, 10, 11});  // only the 5 new tokens are encoded
  const SyncStats st = reported.sync(log, progress);
  EXPECT_EQ(st.reused, 10);
  EXPECT_EQ(calls, (Calls{{0, 5}, {4, 5}, {5, 5}}));
  calls.clear();
  reported.sync(log, progress);  // nothing new: nothing reported
  EXPECT_TRUE(calls.empty());
  quiet.sync(log);
  EXPECT_EQ(reported.fingerprint(), quiet.fingerprint());
}

TEST(PrefillProgress, ASessionRefusesALogBeyondThePositionsBeforeItsCacheChanges) {
  const auto engine = tiny_engine("prefill-progress-limit", 4, 40);
  Session s = engine->open_session();
  const std::vector<int32_t> log = ids(30);
  s.sync(log);
  const uint64_t fp = s.fingerprint();
  std::vector<int32_t> longer = ids(41);
  longer[2] = 60;  // diverges early: a rewind would come first
  DG_EXPECT_ERROR(s.sync(longer), "position 41", "40 positions", "max_position_embeddings");
  EXPECT_EQ(s.size(), 30);
  EXPECT_EQ(s.fingerprint(), fp);
  EXPECT_EQ(s.tokens(), log);
}

TEST(PrefillProgress, AnEncodeThatFailsHalfwayLeavesTheSessionEmpty) {
  const auto engine = tiny_engine("prefill-progress-fail", 4);
  Session s = engine->open_session(), fresh = engine->open_session();
  const std::vector<int32_t> log = ids(12);
  s.sync(std::span<const int32_t>(log).first(3));
  s.set_encoder([&](KvCache& kv, std::span<const int32_t> rest) {
    engine->model().encode(kv, rest.first(4));  // one chunk reaches the cache, then the encode fails
    fail("encoder failed after {} tokens", 4);
  });
  DG_EXPECT_ERROR(s.sync(log), "encoder failed");
  EXPECT_EQ(s.size(), 0);
  EXPECT_EQ(s.cache().len(), 0);
  s.set_encoder(nullptr);
  const SyncStats st = s.sync(log);  // everything again, to the same cache as a fresh session's
  EXPECT_EQ(st.reused, 0);
  EXPECT_EQ(st.encoded, 12);
  fresh.sync(log);
  EXPECT_EQ(s.fingerprint(), fresh.fingerprint());
}

}  // namespace prefill_progress_test
}  // namespace dg
