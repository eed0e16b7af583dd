// Schema-constrained output on the embedded model (SamplerOptions::json_schema, `ask --json-schema`): whatever the
// model writes, the committed answer is one JSON object that parses and validates — enums, nested objects, arrays
// with bounds, required fields — at the tightest budget allowed (the length limit forces the close) and at a loose
// one, and through `ask`, the op-log and replay.
#include <gtest/gtest.h>

#include <fstream>

#include "chat_test_util.h"
#include "diffusion/json_schema.h"
#include "engine/chat.h"
#include "engine/oplog.h"
#include "support/embedded_engine.h"
#include "support/expect_error.h"
#include "support/process.h"

namespace dg::test {
namespace structured_output_test {

const char* kSchemas[] = {
    R"({"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["C","F"]},
        "days":{"type":"integer"}},"required":["city","unit","days"],"additionalProperties":false})",
    R"({"type":"object","properties":{"person":{"type":"object","properties":{"name":{"type":"string"},
        "ok":{"type":"boolean"}},"required":["name","ok"],"additionalProperties":false},
        "tags":{"type":"array","items":{"type":"string","enum":["red","green"]},"minItems":1,"maxItems":3}},
        "required":["person","tags"],"additionalProperties":false})",
    R"({"type":"object","properties":{"n":{"type":"number"},"note":{"type":["string","null"]}},"required":["n"]})",
};

std::vector<int32_t> chat_prompt(const std::string& text) {
  Conversation c;
  c.messages.push_back(Message{Role::kUser, text});
  return render_chat(c, RenderOptions{}, tiny_tokenizer(), tiny_chat_tokens()).ids;
}

TEST(StructuredOutput, EmbeddedModelAnswersAlwaysParseAndValidate) {
  const EngineCore& e = embedded_engine();
  const auto vocab = chat_json_vocab(e.tokenizer(), tiny_chat_tokens(), e.default_sampler(SamplerProfile::kContract).stop_ids);
  int forced = 0;
  for (const char* text : kSchemas) {
    const auto schema = JsonSchema::compile(Json::parse(text));
    const int shortest = schema->node(0).min_bytes;  // the tightest budget allowed: the walk closes from the start
    for (const auto& [seed, budget] : {std::pair<uint64_t, int>{1, shortest}, std::pair<uint64_t, int>{2, 64}}) {
      {
        SamplerOptions o = e.default_sampler(SamplerProfile::kContract);
        o.seed = seed;
        o.max_new_tokens = budget;
        o.json = vocab;
        o.json_schema = schema;
        const GenerateResult r = e.generate(chat_prompt("Describe the weather as JSON."), o);
        const std::string answer = e.tokenizer().decode(r.tokens);
        const Json value = Json::parse(answer, nullptr, false);
        ASSERT_FALSE(value.is_discarded()) << "seed " << seed << " budget " << budget << ": " << answer;
        const std::vector<std::string> errs = schema->validate(value);
        EXPECT_TRUE(errs.empty()) << answer << ": " << (errs.empty() ? "" : errs[0]);
        EXPECT_LE(static_cast<int>(r.tokens.size()), budget);
        for (const BlockInfo& b : r.blocks) forced += b.constrained;
      }
    }
  }
  EXPECT_GT(forced, 0) << "the constraint had something to do";
}

TEST(StructuredOutput, ABudgetBelowTheShortestObjectIsRefused) {
  SamplerOptions o = embedded_engine().default_sampler(SamplerProfile::kContract);
  o.json = chat_json_vocab(embedded_engine().tokenizer(), tiny_chat_tokens(), o.stop_ids);
  o.json_schema = JsonSchema::compile(Json::parse(kSchemas[0]));
  o.max_new_tokens = o.json_schema->node(0).min_bytes - 1;
  DG_EXPECT_ERROR(o.validate(), "below the shortest object the JSON schema allows (31 bytes)");
  o.max_new_tokens += 1;
  EXPECT_NO_THROW(o.validate());
}

TEST(StructuredOutput, AskTakesASchemaFileAndNamesAnUnsupportedKeyword) {
  const std::string dir = scratch_dir("structured");
  const std::string good = dir + "/good.json", bad = dir + "/bad.json", log = dir + "/ops.jsonl";
  {
    std::ofstream(good) << kSchemas[0];
    std::ofstream(bad) << R"({"type":"object","properties":{"a":{"type":"string","minLength":2}}})";
  }
  const ProcessResult ok = run_command(cli_path() + " ask -q --max-new-tokens 40 --seed 3 --json-schema " + good +
                                           " --oplog " + log + " -p 'Weather in Oslo as JSON'",
                                       false);
  ASSERT_EQ(ok.code, 0) << ok.out;
  const Json value = Json::parse(ok.out, nullptr, false);
  ASSERT_FALSE(value.is_discarded()) << ok.out;
  EXPECT_TRUE(JsonSchema::compile(Json::parse(kSchemas[0]))->validate(value).empty()) << ok.out;
  const ReplayReport rep = replay_oplog(embedded_engine(), log);
  EXPECT_FALSE(rep.diverged) << rep.divergence;
  EXPECT_EQ(rep.jobs, 1);
  const ProcessResult no = run_command(cli_path() + " ask -q --json-schema " + bad + " -p x");
  EXPECT_NE(no.code, 0);
  EXPECT_NE(no.out.find("unsupported JSON Schema keyword 'minLength'"), std::string::npos) << no.out;
  EXPECT_NE(no.out.find("properties.a.minLength"), std::string::npos) << no.out;
}

}  // namespace structured_output_test
}  // namespace dg::test
