// JSON mode's commit-time constraint (src/diffusion/json_commit.h) in the block loop, on a scripted denoiser over a
// toy vocabulary whose raw answer is not JSON: JSON mode turns it into one JSON object that nlohmann::json parses,
// ends it with the end token once the object closes, and JSON mode off leaves the answer as the script wrote it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "diffusion/generate.h"
#include "diffusion/json_commit.h"
#include "support/toy_denoiser.h"

namespace dg {
namespace json_commit_test {

// Toy vocabulary: ids 0-2 and 14 are control tokens (pad, eos, bos, end of turn); the rest are text.
const std::vector<std::string> kText = {"", "", "", "{", "}", "\"name\"", ":", " ", "\"Ada\"", ",", "\"age\"",
                                        "36", "Sure", "!", "", "\""};
constexpr int32_t kEnd = 14;

std::shared_ptr<const JsonVocab> toy_vocab() {
  auto v = std::make_shared<JsonVocab>();
  v->bytes = kText;
  v->end_id = kEnd;
  v->stop_ids = {1, kEnd};
  return v;
}

std::string text_of(std::span<const int32_t> ids) {
  std::string s;
  for (const int32_t id : ids) s += kText[static_cast<size_t>(id)];
  return s;
}

SamplerOptions options(bool json, int max_new = 64) {
  GenerationConfig g;
  g.eos_ids = {1, kEnd};
  g.max_new_tokens = max_new;
  g.max_denoising_steps = 6;
  SamplerOptions o = make_sampler_options(SamplerProfile::kContract, g, 0, 2);
  if (json) o.json = toy_vocab();
  return o;
}

ModelConfig empty_config() {
  ModelConfig c;
  c.window = 4;
  return c;  // no layers: the cache only counts tokens
}

GenerateResult run(const std::vector<int32_t>& script, const SamplerOptions& o,
                   test::ToyScriptDenoiser* out = nullptr) {
  test::ToyScriptDenoiser d(script, static_cast<int64_t>(kText.size()), kEnd);
  KvCache kv(empty_config(), {});
  GenerateResult r = generate(d, kv, std::vector<int32_t>{2, 7}, o);
  if (out != nullptr) out->rows_asked = d.rows_asked;
  return r;
}

// "Sure! {"name": "Ada" "age": 36}!" then the end of turn: prose around an object that misses a comma.
const std::vector<int32_t> kProse = {12, 13, 7, 3, 5, 6, 7, 8, 7, 10, 6, 7, 11, 4, 13, kEnd};

TEST(JsonMode, OffLeavesTheScriptedAnswerAsWritten) {
  const GenerateResult r = run(kProse, options(false));
  EXPECT_EQ(r.tokens, std::vector<int32_t>(kProse.begin(), kProse.end() - 1));
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_FALSE(nlohmann::json::accept(text_of(r.tokens))) << text_of(r.tokens);
  for (const BlockInfo& b : r.blocks) EXPECT_EQ(b.constrained, 0);
}

TEST(JsonMode, TurnsTheAnswerIntoOneJsonObject) {
  test::ToyScriptDenoiser seen({}, static_cast<int64_t>(kText.size()), kEnd);
  const GenerateResult r = run(kProse, options(true), &seen);
  const std::string text = text_of(r.tokens);
  ASSERT_TRUE(nlohmann::json::accept(text)) << text;
  EXPECT_TRUE(nlohmann::json::parse(text).is_object()) << text;
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.stop_token, kEnd);
  int changed = 0;
  for (const BlockInfo& b : r.blocks) changed += b.constrained;
  EXPECT_GT(changed, 0);
  EXPECT_EQ(seen.rows_asked, changed - 1) << "logits only for replaced rows (the end token needs none)";
  // Hand-checked: "Sure" -> "{", "!" -> "}" (the lowest id the grammar allows): the object closes at once.
  EXPECT_EQ(text, "{}");
}

TEST(JsonMode, KeepsTheModelsTokensWhereTheyFitAndEndsAfterTheObject) {
  // {"name": "Ada" "age": 36}! -- the missing comma is the only misfit; the "!" after the object becomes the end.
  const std::vector<int32_t> script = {3, 5, 6, 7, 8, 7, 10, 6, 7, 11, 4, 13, 12, 13, kEnd};
  const GenerateResult r = run(script, options(true));
  const std::string text = text_of(r.tokens);
  ASSERT_TRUE(nlohmann::json::accept(text)) << text;
  // "age" after a value is refused; the lowest-id allowed token is "}" (id 4), so the object closes there.
  EXPECT_EQ(text, "{\"name\": \"Ada\" }");
  EXPECT_EQ(nlohmann::json::parse(text), nlohmann::json({{"name", "Ada"}}));
  EXPECT_EQ(r.finish, FinishReason::kStop);
  const GenerateResult raw = run(script, options(false));
  EXPECT_FALSE(nlohmann::json::accept(text_of(raw.tokens))) << text_of(raw.tokens);
}

TEST(JsonMode, AValidObjectIsKeptAndCutAtItsEnd) {
  // {"name":"Ada","age":36} Sure! -- valid JSON followed by prose: only the prose goes.
  const std::vector<int32_t> script = {3, 5, 6, 8, 9, 10, 6, 11, 4, 7, 12, 13, kEnd};
  const GenerateResult r = run(script, options(true));
  EXPECT_EQ(text_of(r.tokens), "{\"name\":\"Ada\",\"age\":36}");
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.blocks[1].constrained, 1) << "the space after the object became the end token";
}

TEST(JsonMode, AnObjectClosingOnTheBlocksLastRowEndsTheAnswer) {
  const std::vector<int32_t> script = {3, 5, 6, 7, 8, 7, 7, 4, 12, 13, kEnd};  // 8 rows: {"name": "Ada"  }
  const GenerateResult r = run(script, options(true));
  EXPECT_EQ(text_of(r.tokens), "{\"name\": \"Ada\"  }");
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.blocks.size(), 1u) << "no block is denoised only to write the end token";
}

TEST(JsonMode, TheTokenBudgetCutsTheObjectWithFinishLength) {
  const std::vector<int32_t> script = {3, 5, 6, 8, 9, 10, 6, 11, 4, kEnd};
  const GenerateResult r = run(script, options(true, 5));
  EXPECT_EQ(r.finish, FinishReason::kLength);
  EXPECT_EQ(text_of(r.tokens), "{\"name\":\"Ada\",");
  JsonGrammar g;
  EXPECT_TRUE(g.feed(text_of(r.tokens))) << "an incomplete object, but a valid prefix";
  EXPECT_FALSE(g.complete());
}

TEST(JsonMode, AStopTokenInsideTheObjectClosesIt) {
  // The end of turn right after "{": not allowed before the object closes; '}' closes it at once.
  const GenerateResult a = run({3, kEnd}, options(true, 16));
  EXPECT_EQ(text_of(a.tokens), "{}");
  EXPECT_EQ(a.finish, FinishReason::kStop);
  // After '{"name":' the model ends: each row takes the best token that gets closer to a closed object (a value:
  // the lowest-id string, "name"; then '}'), not the best token that merely fits (which would run on).
  const GenerateResult b = run({3, 5, 6, kEnd}, options(true, 64));
  EXPECT_EQ(text_of(b.tokens), "{\"name\":\"name\"}");
  EXPECT_EQ(b.finish, FinishReason::kStop);
  EXPECT_EQ(b.blocks.size(), 1u);
  // In a string: the closing quote first.
  const GenerateResult c = run({3, 5, 6, 15, 12, kEnd}, options(true, 64));
  EXPECT_EQ(text_of(c.tokens), "{\"name\":\"Sure\"}");
  EXPECT_EQ(c.finish, FinishReason::kStop);
}

TEST(JsonMode, NoRowLogitsIsAClearError) {
  class Blind final : public Denoiser {
   public:
    int canvas() const override { return 4; }
    int64_t vocab() const override { return static_cast<int64_t>(kText.size()); }
    void encode(KvCache& kv, std::span<const int32_t> ids) override { kv.commit(static_cast<int64_t>(ids.size())); }
    void denoise(const KvCache&, std::span<const int32_t> canvas, ScKind, float, float, RowStats* stats) override {
      for (size_t r = 0; r < canvas.size(); ++r) stats[r] = RowStats{12, 0.0f, 1.0f};  // "Sure": not JSON
    }
    void draw(std::span<const double>, int32_t*) override {}
  } d;
  KvCache kv(empty_config(), {});
  try {
    generate(d, kv, std::vector<int32_t>{2}, options(true, 8));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("JSON mode"), std::string::npos) << e.what();
  }
}

}  // namespace json_commit_test
}  // namespace dg
