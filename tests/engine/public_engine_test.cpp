// The public dg::Engine (include/dg/engine.h) against the internal path it wraps: a request gives the tokens that
// EngineCore::generate gives for the prompt ids and SamplerOptions the request stands for, a chat turn is rendered as
// `diffgemma ask` renders it, and the texts are the decoder's and the reply parser's.
#include <gtest/gtest.h>

#include "chat/chat_tokens.h"
#include "chat/stream.h"
#include "chat/template.h"
#include "dg/engine.h"
#include "support/embedded_engine.h"
#include "support/paths.h"

namespace dg {
namespace public_engine_test {

const Engine& public_engine() {
  static const std::unique_ptr<Engine> e = [] {
    EngineOptions o;
    o.model_dir = test::source_path("models/dg-tiny");
    return Engine::open(o);
  }();
  return *e;
}

void expect_same_generation(const Result& got, const GenerateResult& ref) {
  EXPECT_EQ(got.tokens, ref.tokens);
  EXPECT_EQ(got.forwards, ref.forwards);
  EXPECT_EQ(got.blocks, static_cast<int>(ref.blocks.size()));
  EXPECT_EQ(got.stop_token, ref.stop_token);
  EXPECT_STREQ(finish_text(got.finish), finish_name(ref.finish));
}

TEST(PublicEngine, IdsAndSettingsGiveTheInternalEnginesTokens) {
  const EngineCore& core = test::embedded_engine();
  Request r;
  r.prompt_ids = {2, 105, 2364, 107, 3689, 563, 1156, 2915, 106, 107, 105, 4068, 107};
  r.max_new_tokens = 40;
  r.seed = 9;
  r.sampling.settings = {{"steps", 6}, {"entropy_bound", 0.2}, {"pad_gate", 0}};
  SamplerOptions so = core.default_sampler(SamplerProfile::kContract);
  so.max_new_tokens = 40;
  so.seed = 9;
  so.steps = 6;
  so.entropy_bound = 0.2;
  so.pad_gate = false;
  const GenerateResult ref = core.generate(r.prompt_ids, so);
  ASSERT_FALSE(ref.tokens.empty());
  const Result got = public_engine().generate(r);
  expect_same_generation(got, ref);
  EXPECT_EQ(got.text, core.tokenizer().decode(ref.tokens, true));
  EXPECT_EQ(got.reasoning, "");

  r.sampling.profile = "reference";
  r.sampling.settings = {{"steps", 6}};
  SamplerOptions ref_so = core.default_sampler(SamplerProfile::kReference);
  ref_so.max_new_tokens = 40;
  ref_so.seed = 9;
  ref_so.steps = 6;
  expect_same_generation(public_engine().generate(r), core.generate(r.prompt_ids, ref_so));
}

TEST(PublicEngine, AChatTurnIsRenderedAndParsedAsAskDoes) {
  const EngineCore& core = test::embedded_engine();
  for (const bool thinking : {false, true}) {
    Request r;
    r.prompt = "What is two plus two?";
    r.thinking = thinking;
    r.max_new_tokens = 48;
    r.seed = 4;
    r.sampling.settings = {{"steps", 6}};
    const ChatTokens chat = ChatTokens::from(core.tokenizer());
    Conversation conv;
    conv.messages.push_back(Message{Role::kUser, r.prompt});
    RenderOptions ro;
    ro.thinking = thinking;
    const RenderedPrompt prompt = render_chat(conv, ro, core.tokenizer(), chat);
    SamplerOptions so = core.default_sampler(SamplerProfile::kContract);
    so.max_new_tokens = 48;
    so.seed = 4;
    so.steps = 6;
    const GenerateResult ref = core.generate(prompt.ids, so);
    const Result got = public_engine().generate(r);
    expect_same_generation(got, ref);
    EXPECT_EQ(got.prompt_tokens, static_cast<int64_t>(prompt.ids.size()));
    const Reply reply =
        parse_reply(ref.tokens, core.tokenizer(), chat, so.stop_ids, prompt.end == PromptEnd::kThought);
    EXPECT_EQ(got.text, reply.content) << "thinking " << thinking;
    EXPECT_EQ(got.reasoning, reply.reasoning) << "thinking " << thinking;
  }
}

// The public options reach the model as the internal engine's typed settings.
TEST(PublicEngine, OptionsAreParsedOnce) {
  EngineOptions o;
  o.model_dir = test::source_path("models/dg-tiny");
  o.precision = "bf16";
  o.kv_precision = "f16";
  o.attention_topk = "dyn";
  const auto core = EngineCore::open(o);
  EXPECT_EQ(core->precision().act, Storage::kBF16);
  EXPECT_EQ(core->precision().kv, Storage::kF16);
  EXPECT_EQ(attn_topk_name(core->model().attention_topk()), "dyn");
  o.attention_topk = "lots";
  try {
    EngineCore::open(o);
    ADD_FAILURE() << "accepted attention_topk 'lots'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attention_topk 'lots'"), std::string::npos) << e.what();
  }
}

}  // namespace public_engine_test
}  // namespace dg
