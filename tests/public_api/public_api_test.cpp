// The public API alone (include/dg): this file is compiled with include/ as the project's only include path, so it
// sees nothing of src/. It opens the embedded model, generates, and checks the outcomes against the CLI (the internal
// path), the event order, stop strings, and the errors a caller gets for a bad model or a bad request.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "dg/engine.h"

namespace public_api_test {

std::string embedded_model_dir() { return std::string(DG_SOURCE_DIR) + "/models/dg-tiny"; }

const dg::Engine& public_api_engine() {
  static const std::unique_ptr<dg::Engine> e = [] {
    dg::EngineOptions o;
    o.model_dir = embedded_model_dir();
    return dg::Engine::open(o);
  }();
  return *e;
}

// The CLI's stdout for `args` (its exit status must be 0).
std::string public_api_cli_stdout(const std::string& args) {
  const std::string cmd = std::string(DG_CLI_PATH) + " " + args;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) throw std::runtime_error("cannot run " + cmd);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << cmd;
  return out;
}

std::vector<int32_t> public_api_parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::istringstream in(text);
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

// A raw prompt as token ids (the embedded model continues it for a few tokens at seed 2).
dg::Request ids_request(uint64_t seed) {
  dg::Request r;
  r.prompt_ids = public_api_engine().tokenize("Once upon a time, there was a little");
  r.max_new_tokens = 40;
  r.seed = seed;
  r.sampling.settings = {{"steps", 6}};
  return r;
}

TEST(PublicApi, OpensTheEmbeddedModel) {
  const dg::ModelInfo info = public_api_engine().info();
  EXPECT_EQ(info.dir, embedded_model_dir());
  EXPECT_EQ(info.backend, "cpu");
  EXPECT_TRUE(info.has_tokenizer);
  EXPECT_GT(info.vocab, 0);
  EXPECT_GT(info.canvas, 0);
  const std::vector<int32_t> ids = public_api_engine().tokenize("Hello there");
  EXPECT_FALSE(ids.empty());
  EXPECT_EQ(public_api_engine().detokenize(ids), "Hello there");
}

// The same request and seed give the CLI's tokens (`diffgemma ask --prompt-ids`, the internal engine), and the same
// tokens again.
TEST(PublicApi, GeneratesTheTokensOfTheInternalPath) {
  const dg::Request r = ids_request(2);
  const dg::Result a = public_api_engine().generate(r);
  ASSERT_FALSE(a.tokens.empty());
  EXPECT_LE(a.tokens.size(), 40u);
  EXPECT_EQ(a.prompt_tokens, static_cast<int64_t>(r.prompt_ids.size()));
  std::string ids;
  for (int32_t id : r.prompt_ids) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  const std::string out = public_api_cli_stdout("ask -q -m " + embedded_model_dir() + " --prompt-ids " + ids +
                                                " --seed 2 --max-new-tokens 40 --steps 6 --show-ids");
  EXPECT_EQ(a.tokens, public_api_parse_ids(out)) << out;
  EXPECT_EQ(public_api_engine().generate(r).tokens, a.tokens);
  EXPECT_GT(a.forwards, 0);
  EXPECT_GE(a.blocks, 1);
  EXPECT_GT(a.timings.total_s, 0.0);
  EXPECT_LE(a.timings.prefill_s, a.timings.first_block_s);
  EXPECT_LE(a.timings.first_block_s, a.timings.total_s);
}

// Prefill progress first, then the blocks in order, then one DoneEvent carrying the Result; the blocks' tokens and
// texts (with the DoneEvent's held-back text) make the Result's.
TEST(PublicApi, EventsArriveInOrder) {
  dg::Request r;
  r.prompt = "What is two plus two?";
  r.max_new_tokens = 48;
  r.seed = 3;
  r.sampling.settings = {{"steps", 6}};
  std::vector<dg::Event> events;
  dg::EventSink sink;
  sink.on_event = [&](const dg::Event& e) { events.push_back(e); };
  const dg::Result res = public_api_engine().generate(r, sink);

  ASSERT_GE(events.size(), 3u);
  size_t i = 0;
  int64_t done = -1;
  for (; i < events.size() && std::holds_alternative<dg::PrefillEvent>(events[i]); ++i) {
    const auto& p = std::get<dg::PrefillEvent>(events[i]);
    EXPECT_GE(p.done, done);
    EXPECT_EQ(p.total, res.prompt_tokens);
    done = p.done;
  }
  EXPECT_GE(i, 1u) << "no prefill event first";
  EXPECT_EQ(done, res.prompt_tokens);
  std::vector<int32_t> tokens;
  std::string text;
  int block = 0;
  for (; i < events.size() && std::holds_alternative<dg::BlockEvent>(events[i]); ++i) {
    const auto& b = std::get<dg::BlockEvent>(events[i]);
    EXPECT_EQ(b.block, block++);
    EXPECT_GT(b.steps, 0);
    tokens.insert(tokens.end(), b.tokens.begin(), b.tokens.end());
    text += b.text;
  }
  EXPECT_EQ(block, res.blocks);
  ASSERT_EQ(i + 1, events.size()) << "the DoneEvent is the last event and comes once";
  const auto& d = std::get<dg::DoneEvent>(events[i]);
  EXPECT_EQ(d.result.tokens, res.tokens);
  EXPECT_EQ(tokens, res.tokens);
  EXPECT_EQ(text + d.text, res.text);
  EXPECT_EQ(d.result.text, res.text);
  EXPECT_FALSE(res.tokens.empty());
}

// A stop string ends the text before it, with finish "stop"; the text before it is the text without the stop.
TEST(PublicApi, AStopStringEndsTheText) {
  dg::Request r;
  r.prompt = "Once upon a time, there was a little";
  r.raw = true;
  r.seed = 2;
  r.max_new_tokens = 64;
  r.sampling.settings = {{"steps", 6}};
  const dg::Result free = public_api_engine().generate(r);
  ASSERT_GE(free.text.size(), 8u) << free.text;
  const std::string stop = free.text.substr(free.text.size() / 2, 2);
  r.stop = {stop};
  const dg::Result cut = public_api_engine().generate(r);
  EXPECT_EQ(cut.text, free.text.substr(0, free.text.find(stop)));
  EXPECT_EQ(cut.finish, dg::Finish::kStop);
  EXPECT_STREQ(dg::finish_text(cut.finish), "stop");
}

TEST(PublicApi, CancelEndsTheGeneration) {
  dg::EventSink sink;
  sink.cancel = [] { return true; };
  const dg::Result res = public_api_engine().generate(ids_request(5), sink);
  EXPECT_EQ(res.finish, dg::Finish::kCancelled);
  EXPECT_TRUE(res.tokens.empty());
}

std::string public_api_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(PublicApi, ABadModelDirectoryIsAnErrorNamingIt) {
  dg::EngineOptions o;
  o.model_dir = std::string(DG_SOURCE_DIR) + "/models/no-such-model";
  const std::string msg = public_api_error_of([&] { dg::Engine::open(o); });
  EXPECT_NE(msg.find(o.model_dir), std::string::npos) << msg;
  o.model_dir = embedded_model_dir();
  o.precision = "f64";
  const std::string bad_precision = public_api_error_of([&] { dg::Engine::open(o); });
  EXPECT_NE(bad_precision.find("'f64'"), std::string::npos) << bad_precision;
}

TEST(PublicApi, ABadRequestIsAnErrorNamingTheField) {
  const dg::Engine& e = public_api_engine();
  dg::Request both = ids_request(1);
  both.prompt = "hi";
  EXPECT_NE(public_api_error_of([&] { e.generate(both); }).find("Request::prompt_ids"), std::string::npos);
  dg::Request none;
  EXPECT_NE(public_api_error_of([&] { e.generate(none); }).find("Request::prompt"), std::string::npos);
  dg::Request unknown = ids_request(1);
  unknown.sampling.settings = {{"temperature", 0.5}};
  const std::string msg = public_api_error_of([&] { e.generate(unknown); });
  EXPECT_NE(msg.find("'temperature'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("entropy_bound"), std::string::npos) << msg;
  dg::Request range = ids_request(1);
  range.sampling.settings = {{"steps", 0}};
  EXPECT_NE(public_api_error_of([&] { e.generate(range); }).find("'steps'"), std::string::npos);
  dg::Request profile = ids_request(1);
  profile.sampling.profile = "fast";
  EXPECT_NE(public_api_error_of([&] { e.generate(profile); }).find("'fast'"), std::string::npos);
}

}  // namespace public_api_test
