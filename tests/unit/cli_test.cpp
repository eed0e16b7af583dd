// The diffgemma binary end to end on the embedded default model: ask (text and JSON), determinism per seed,
// info, tokenize round trips, --help, and clear non-zero exits on bad input.
#include <gtest/gtest.h>

#include <algorithm>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "diffusion/json_grammar.h"
#include "support/paths.h"
#include "support/process.h"

namespace dg::test {
namespace cli_test {

using Result = ProcessResult;

Result run(const std::string& args) { return run_command(cli_path() + " " + args, true); }
Result run_stdout(const std::string& args) { return run_command(cli_path() + " " + args, false); }

std::string model() { return "-m " + source_path("models/dg-tiny"); }

TEST(Cli, AskAnswersAndReportsJson) {
  const Result r = run_stdout("ask " + model() + " -p 'What is two plus two?' --max-new-tokens 40 --steps 6 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_LE(j["tokens"].size(), 40u);
  EXPECT_TRUE(j.contains("text"));
  EXPECT_GT(j["prompt_tokens"].get<int>(), 5);
  EXPECT_GE(j["blocks"].size(), 1u);
  EXPECT_EQ(j["sampler"], "contract");
  EXPECT_GT(j["seconds"].get<double>(), 0.0);
  EXPECT_GT(j["first_block_seconds"].get<double>(), 0.0);
  EXPECT_LE(j["first_block_seconds"].get<double>(), j["seconds"].get<double>());
  // The first block's steps end in order, the last of them by the block's commit; the CPU has no graphs.
  const auto& ends = j["first_block_step_ends_seconds"];
  ASSERT_EQ(ends.size(), j["blocks"][0]["forwards"].get<size_t>()) << ends;
  for (size_t i = 1; i < ends.size(); ++i) EXPECT_LE(ends[i - 1].get<double>(), ends[i].get<double>());
  EXPECT_LE(ends.back().get<double>(), j["first_block_seconds"].get<double>());
  EXPECT_EQ(j["graphs"]["captures"], 0);
  EXPECT_EQ(j["graphs"]["instantiations"], 0);
}

// The CUDA path switches (graphs, the experts' activations) are accepted by every model command; on the CPU and a
// bf16 model they change nothing.
TEST(Cli, GraphAndExpertActSwitchesKeepTheAnswer) {
  const std::string ask = "ask " + model() + " -p 'What is the capital of France?' --max-new-tokens 32 --steps 4 --json -q";
  const Result a = run_stdout(ask), b = run_stdout(ask + " --no-graphs --expert-act bf16");
  ASSERT_EQ(a.code, 0) << a.out;
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_EQ(nlohmann::json::parse(a.out)["tokens"], nlohmann::json::parse(b.out)["tokens"]);
}

TEST(Cli, AskJsonObjectAnswersWithAJsonPrefix) {
  const std::string ask = "ask " + model() + " -p 'Reply in JSON: what is two plus two?' --max-new-tokens 48 "
                          "--steps 4 --seed 2 --json -q";
  const Result raw = run_stdout(ask);
  ASSERT_EQ(raw.code, 0) << raw.out;
  EXPECT_FALSE(nlohmann::json::accept(nlohmann::json::parse(raw.out)["content"].get<std::string>()));
  const Result r = run_stdout(ask + " --json-object");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  const std::string content = j["content"];
  JsonGrammar g;
  EXPECT_TRUE(g.feed(content)) << "not a JSON prefix: " << content;
  EXPECT_EQ(g.complete(), j["finish_reason"] == "stop") << content;
  int constrained = 0;
  for (const auto& b : j["blocks"]) constrained += b["constrained"].get<int>();
  EXPECT_GT(constrained, 0);
  const Result think = run(ask + " --json-object --think");
  EXPECT_NE(think.code, 0);
  EXPECT_NE(think.out.find("--json-object needs a chat prompt"), std::string::npos) << think.out;
}

TEST(Cli, SameSeedSameAnswer) {
  // One step of categorical draws from the seeded canvas: the seed shows in the tokens even when a trained model
  // would converge to the same answer from any canvas.
  const std::string args = "ask " + model() + " -p hello --max-new-tokens 64 --steps 1 --sampler reference "
                           "--show-ids -q --seed ";
  const Result a = run_stdout(args + "3"), b = run_stdout(args + "3"), c = run_stdout(args + "4");
  ASSERT_EQ(a.code, 0);
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
}

TEST(Cli, PromptIdsNeedNoTokenizerAndBothProfilesRun) {
  for (const char* s : {"contract", "reference"}) {
    const Result r = run_stdout("ask " + model() + " --prompt-ids 2,105,30,40 --max-new-tokens 16 --steps 4 "
                                "--show-ids -q --sampler " + std::string(s));
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_FALSE(r.out.empty());
  }
}

TEST(Cli, InfoDescribesTheModel) {
  const Result r = run_stdout("info " + model() + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  // The embedded model's structure as its config.json states it (whichever model is embedded).
  const auto cfg = nlohmann::json::parse(std::ifstream(source_path("models/dg-tiny/config.json")))["text_config"];
  nlohmann::json full = nlohmann::json::array();
  for (size_t i = 0; i < cfg["layer_types"].size(); ++i)
    if (cfg["layer_types"][i] == "full_attention") full.push_back(i);
  EXPECT_EQ(j["layers"], cfg["num_hidden_layers"]);
  EXPECT_EQ(j["full_layers"], full);
  ASSERT_GE(full.size(), 1u);
  EXPECT_LT(full.size(), cfg["layer_types"].size());  // both layer kinds
  EXPECT_GT(j["params"]["total"].get<int64_t>(), 1000000);
  EXPECT_EQ(j["params"]["total"].get<int64_t>(),
            j["params"]["embed"].get<int64_t>() + j["params"]["attention"].get<int64_t>() +
                j["params"]["dense_mlp"].get<int64_t>() + j["params"]["router"].get<int64_t>() +
                j["params"]["experts"].get<int64_t>() + j["params"]["norms"].get<int64_t>() +
                j["params"]["self_conditioning"].get<int64_t>());
  EXPECT_GT(j["kv_bytes_per_token_f16"].get<int64_t>(), 0);
  const Result text = run_stdout("info " + model());
  EXPECT_NE(text.out.find("parameters"), std::string::npos);
}

TEST(Cli, TokenizeRoundTrips) {
  const Result ids = run_stdout("tokenize " + model() + " --ids 'Hello world, héllo 🚀'");
  ASSERT_EQ(ids.code, 0) << ids.out;
  std::string list = ids.out;
  list.erase(list.find_last_not_of('\n') + 1);
  const Result back = run_stdout("tokenize " + model() + " --decode '" + list + "'");
  ASSERT_EQ(back.code, 0) << back.out;
  EXPECT_EQ(back.out, "Hello world, héllo 🚀\n");
}

// Every command's --help: exit 0, a usage line, and plain text (no control characters but newlines: the kernel
// choices of bench once printed their enum values as raw bytes).
TEST(Cli, HelpEverywhere) {
  for (const char* cmd : {"--help", "ask --help", "chat --help", "info --help", "tokenize --help", "bench --help",
                          "smoketest --help", "quantize --help", "serve --help", "replay --help", "golden --help",
                          "campaign --help", "verify --help"}) {
    const Result r = run(cmd);
    EXPECT_EQ(r.code, 0) << cmd;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << cmd;
    const auto bad = std::find_if(r.out.begin(), r.out.end(), [](char c) {
      const auto u = static_cast<unsigned char>(c);
      return (u < 0x20 && c != '\n') || u == 0x7f;
    });
    EXPECT_EQ(bad, r.out.end()) << cmd << ": a control character at " << (bad - r.out.begin());
  }
  const Result bench = run("bench --help");
  EXPECT_NE(bench.out.find("{auto,stream,cublas,wmma,wide,ws}"), std::string::npos) << bench.out;
}

// A kernel choice outside its names is a usage error that lists them.
TEST(Cli, BenchKernelChoicesAreCheckedByName) {
  const Result bad = run("bench " + model() + " --backend cpu --moe fast --skip-generate");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("--moe"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("wide"), std::string::npos) << bad.out;
}

// The batched load benchmark on the CPU with the embedded model: one record per stream count with every request's
// full answer committed (fixed steps, stops off), the second stream actually batched, and the stage record of one
// batched step of the largest count.
TEST(Cli, BenchServeReportsEveryStreamCountAndABatchedStep) {
  const Result r = run_stdout("bench " + model() + " --backend cpu --serve --streams 1,2 --steps 2 "
                              "--prompt-tokens 20 --serve-tokens 40 --json -q");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json cfg = nlohmann::json::parse(std::ifstream(source_path("models/dg-tiny/config.json")));
  const int canvas = cfg["canvas_length"].get<int>();
  std::vector<nlohmann::json> serve, step;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    const auto j = nlohmann::json::parse(line);
    if (j["event"] == "serve") serve.push_back(j);
    if (j["event"] == "serve_step") step.push_back(j);
  }
  ASSERT_EQ(serve.size(), 2u) << r.out;
  for (const auto& j : serve) {
    const int n = j["streams"].get<int>();
    EXPECT_EQ(j["committed_tokens"].get<int>(), n * 40) << j.dump();
    EXPECT_GT(j["aggregate_tok_per_s"].get<double>(), 0.0);
    EXPECT_GT(j["tflop"].get<double>(), 0.0);
  }
  EXPECT_GT(serve[1]["mean_occupancy"].get<double>(), 1.0) << serve[1].dump();
  ASSERT_EQ(step.size(), 1u) << r.out;
  EXPECT_EQ(step[0]["streams"].get<int>(), 2);
  EXPECT_EQ(step[0]["rows"].get<int>(), 2 * canvas);
  EXPECT_GT(step[0]["ms_per_step"].get<double>(), 0.0);
  EXPECT_TRUE(step[0]["stages_ms"].is_object());
}

// Without --backend, bench uses a backend that is built (the CPU here, with the embedded model) and prints a table,
// with what it measures on stderr; --json gives the JSON lines.
TEST(Cli, BenchDefaultsToABuiltBackendAndPrintsATable) {
#if defined(DG_WITH_CUDA)
  const std::string backend = " --backend cpu";  // CUDA builds default to cuda, which CI machines may not have
#else
  const std::string backend;
#endif
  const std::string args = "bench" + backend + " --prefill 32 --context 32 --denoise-steps 1 --steps 2 "
                           "--prompt-tokens 16 --gen-tokens 16";
  const std::string err = scratch_dir("bench-table") + "/stderr";
  const Result r = run_command("(" + cli_path() + " " + args + " 2>" + err + ")", false);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("diffgemma bench · ", 0), 0u) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("models/dg-tiny · cpu · [0-9]+ layers"))) << r.out;
  for (const char* row : {"\n  prefill ", "tokens/s", "\n  denoise ", "ms/step", "\n  generate ", "\n  memory "})
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  EXPECT_EQ(r.out.find("\n{"), std::string::npos) << r.out;
  std::ifstream in(err);
  const std::string progress((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(progress.find("bench [1/4] loading"), std::string::npos) << progress;
  EXPECT_NE(progress.find("bench [4/4] generation of 16 tokens"), std::string::npos) << progress;

  const Result j = run_stdout(args + " --json -q");
  ASSERT_EQ(j.code, 0) << j.out;
  std::istringstream lines(j.out);
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) EXPECT_TRUE(nlohmann::json::accept(line)) << line;
  EXPECT_EQ(n, 5);  // loaded, prefill, denoise, generate, memory
}

TEST(Cli, BadInputExitsNonZeroWithAClearMessage) {
  const std::string scratch = scratch_dir("cli");
  struct Case {
    std::string args, needle;
    int code;
  };
  const std::vector<Case> cases = {
      {"ask -m " + scratch + "/nope -p hi", "nope", 1},
      {"ask " + model() + " -p hi --prompt-ids 1,2", "--prompt excludes --prompt-ids", 2},
      {"ask " + model() + " --prompt-ids 1,x", "bad token id", 1},
      {"ask " + model() + " --prompt-ids 999999", "outside", 1},
      {"ask " + model() + " -p hi --t-min 0.9 --t-max 0.5", "t_max", 1},
      {"ask " + model() + " -p hi --sampler fancy", "fancy", 2},
      {"frobnicate", "frobnicate", 2},
      {"info -m " + scratch, "config.json", 1},
      {"tokenize " + model() + " --decode 'abc'", "abc", 1},
      {"ask -m synthetic:26b-a4b:int3 --prompt-ids 5", "unknown synthetic model 'synthetic:26b-a4b:int3'", 1},
      {"ask " + model() + " -p hi --expert-act fp8", "--expert-act fp8 needs fp8 experts", 1},
      {"ask " + model() + " -p hi --expert-act int8", "int8", 2},
  };
  for (const Case& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.code, c.code) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.needle), std::string::npos) << c.args << "\n" << r.out;
  }
}

}  // namespace cli_test
}  // namespace dg::test
