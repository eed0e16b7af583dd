// JSON mode on the embedded model (models/dg-tiny, CPU): the unconstrained answers are not JSON; constrained, every
// answer is a JSON prefix (one object when it stopped), and lock-step batched generation, which computes the rows
// the constraint asks for from the batched forward's hidden states, gives exactly the tokens of each request alone.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/chat_tokens.h"
#include "diffusion/batch.h"
#include "diffusion/json_commit.h"
#include "io/tokenizer.h"
#include "model/model_harness.h"
#include "support/paths.h"

namespace dg::test {
namespace json_mode_test {

struct Case {
  int prompt_len, seed, max_new;
};

TEST(JsonModeModel, ConstrainedAnswersAreJsonAndBatchedEqualsAlone) {
  const std::string dir = source_path("models/dg-tiny");
  ModelRig e(dir);
  const Tokenizer tok = Tokenizer::load(dir + "/tokenizer.json");
  const int32_t turn_close = ChatTokens::from(tok).turn_close;
  const std::vector<Case> cases = {{12, 1, 64}, {40, 2, 96}, {7, 3, 40}};
  auto options = [&](const Case& c, bool json) {
    SamplerOptions o = make_sampler_options(SamplerProfile::kContract, e.ck.generation, e.ck.config.pad_id, 2);
    o.seed = static_cast<uint64_t>(c.seed);
    o.steps = 4;
    o.max_new_tokens = c.max_new;
    if (json) o.json = JsonVocab::from(tok, o.stop_ids, turn_close);
    return o;
  };
  std::vector<GenerateResult> alone;
  int changed = 0;
  for (const Case& c : cases) {
    const std::vector<int32_t> prompt = pattern_ids(c.prompt_len, c.seed, e.ck.config.vocab);
    KvCache raw_kv = e.new_cache();
    const GenerateResult raw = generate(*e.model, raw_kv, prompt, options(c, false));
    EXPECT_FALSE(nlohmann::json::accept(tok.decode(raw.tokens))) << "the raw answer must not be JSON already";
    KvCache kv = e.new_cache();
    alone.push_back(generate(*e.model, kv, prompt, options(c, true)));
    const GenerateResult& r = alone.back();
    const std::string text = tok.decode(r.tokens);
    JsonGrammar g;
    EXPECT_TRUE(g.feed(text)) << "seed " << c.seed << ": not a JSON prefix: " << text;
    EXPECT_EQ(g.complete(), r.finish == FinishReason::kStop) << text;
    if (g.complete()) {
      EXPECT_TRUE(nlohmann::json::parse(text).is_object()) << text;
    }
    for (const BlockInfo& b : r.blocks) changed += b.constrained;
  }
  EXPECT_GT(changed, 0) << "the model's own tokens were all JSON: the constraint was not exercised";

  std::vector<KvCache> caches;
  for (size_t i = 0; i < cases.size(); ++i) caches.push_back(e.new_cache());
  std::vector<BatchJob> jobs;
  for (size_t i = 0; i < cases.size(); ++i)
    jobs.push_back(BatchJob{&caches[i], pattern_ids(cases[i].prompt_len, cases[i].seed, e.ck.config.vocab),
                            options(cases[i], true), nullptr});
  ModelBatchDenoiser d(*e.model, /*logit_rows=*/40);
  const std::vector<GenerateResult> together = generate_batch(d, jobs, BatchOptions{3, 4096});
  ASSERT_EQ(together.size(), alone.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(together[i].committed, alone[i].committed) << "request " << i;
    EXPECT_EQ(together[i].finish, alone[i].finish) << "request " << i;
  }
}

// JSON mode validates token bytes, so they must be what decoding writes: the concatenated token_bytes of encoded
// text equal its decode, byte-fallback characters (split over several tokens) included.
TEST(JsonModeModel, TokenBytesAreWhatDecodingWrites) {
  const Tokenizer tok = Tokenizer::load(source_path("models/dg-tiny") + "/tokenizer.json");
  const std::string text = "Hello, {\"city\": \"Z\xC3\xBCrich \xE2\x82\xAC \xF0\x9F\x98\x80\", \"n\": [1, 2]}\n\n ok";
  const std::vector<int32_t> ids = tok.encode(text, SpecialTokens::kPlain);
  std::string joined;
  int byte_tokens = 0;
  for (const int32_t id : ids) {
    const std::string b = tok.token_bytes(id);
    byte_tokens += tok.token(id).starts_with("<0x");
    joined += b;
  }
  EXPECT_EQ(joined, tok.decode(ids));
  EXPECT_EQ(joined, text);
  EXPECT_GT(byte_tokens, 0) << "the text must exercise byte-fallback tokens";
}

}  // namespace json_mode_test
}  // namespace dg::test
