// Small edges of the CLI through the binary: --version names the commit and the backends; --json --show-ids stays one
// JSON object; a directory as --prompt-file is an error, so is a prompt that is not UTF-8; --prompt-file - reads
// standard input; ask reports the prompt's and the generation's tokens/s apart; info reports a pack's storage formats
// and the synthetic full shape's; the README's --prompt-ids example is a chat turn in the embedded model's own ids; an
// unknown option gets a hint of what was probably meant, a bad value from an environment variable names it, an unknown
// command the list of commands; the synthetic full shape is refused at open where its weights do not fit, and a slice
// of more layers than it has is an error.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/host_memory.h"
#include "quant/quant_test_util.h"
#include "support/paths.h"
#include "support/process.h"

namespace dg::test {
namespace cli_edges_test {

ProcessResult run(const std::string& args) { return run_command(cli_path() + " " + args, true); }
ProcessResult run_stdout(const std::string& args) { return run_command(cli_path() + " " + args, false); }
std::string model() { return "-m " + source_path("models/dg-tiny"); }

TEST(CliEdges, VersionNamesTheCommitAndTheBackends) {
  const std::string git = "git -C '" + source_path("") + "' ";
  const ProcessResult r = run_stdout("--version");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("diffgemma 0."), std::string::npos) << r.out;
  if (run_command(git + "rev-parse HEAD", false).code == 0) {
    // The commit the binary was built from: this checkout's HEAD or (built before a later commit) one before it.
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(commit    ([0-9a-f]{12})(-dirty)?\n)"))) << r.out;
    EXPECT_EQ(run_command(git + "merge-base --is-ancestor " + m[1].str() + " HEAD", false).code, 0) << r.out;
  }
#if defined(DG_WITH_CUDA)
  EXPECT_NE(r.out.find("backends  cpu, cuda (CUDA architectures "), std::string::npos) << r.out;
#else
  EXPECT_NE(r.out.find("backends  cpu"), std::string::npos) << r.out;
#endif
  EXPECT_NE(r.out.find("build     "), std::string::npos) << r.out;
}

// golden's --only names one of its cases and cannot go with --bless (which rewrites the whole file): usage errors,
// exit 2, before the model loads (an unknown case was a runtime error, exit 1).
TEST(CliEdges, GoldenOnlyNamesACase) {
  ProcessResult r = run("golden " + model() + " --only nope");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("nope not in {plain,"), std::string::npos) << r.out;
  r = run("golden " + model() + " --only tool_round --bless");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("excludes --bless"), std::string::npos) << r.out;
}

// golden's CUDA kernel choices (for finding which one moved a card's file) are refused on the CPU backend, whose
// file they cannot move.
TEST(CliEdges, GoldenKernelChoicesNeedCuda) {
  for (const char* opt : {"--row-stats-each", "--sc-survivors 0"}) {
    const ProcessResult r = run("golden " + model() + " --backend cpu " + opt);
    EXPECT_EQ(r.code, 1) << opt << "\n" << r.out;
    EXPECT_NE(r.out.find("choose CUDA kernels (use --backend cuda)"), std::string::npos) << opt << "\n" << r.out;
  }
}

TEST(CliEdges, JsonWithShowIdsIsOneJsonObject) {
  const ProcessResult r = run_stdout("ask " + model() + " -p hi --steps 2 --max-new-tokens 8 -q --json --show-ids");
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_TRUE(nlohmann::json::accept(r.out)) << r.out;
  EXPECT_FALSE(nlohmann::json::parse(r.out)["tokens"].empty());
}

TEST(CliEdges, ADirectoryAsPromptFileIsAnError) {
  const std::string dir = scratch_dir("prompt-dir");
  const ProcessResult r = run("ask " + model() + " --prompt-file " + dir + " --steps 1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--prompt-file '" + dir + "' is a directory"), std::string::npos) << r.out;
}

// The prompt's source is checked as the command line is: none, two, or an empty value is a usage error (exit 2;
// they were runtime errors, exit 1, and an empty --prompt said "give exactly one of ..."); an empty file is an error
// naming it (it ran an empty user turn).
TEST(CliEdges, PromptSourcesAreCheckedAsUsageAndAnEmptyFileIsAnError) {
  const std::string empty = scratch_dir("prompt-empty") + "/empty.txt";
  std::ofstream(empty).flush();
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"", "one of --prompt, --prompt-file or --prompt-ids is required"},
           {"-p hi --prompt-file " + empty, "--prompt excludes --prompt-file"},
           {"--prompt-ids 2,105 --prompt-file " + empty, "excludes"},
           {"-p ''", "--prompt: the value is empty"},
           {"--prompt-file ''", "--prompt-file: the value is empty"}}) {
    const ProcessResult r = run("ask " + model() + " --steps 1 " + args + " < /dev/null");
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << ": " << r.out;
  }
  const ProcessResult r = run("ask " + model() + " --steps 1 --prompt-file " + empty);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--prompt-file '" + empty + "' is empty"), std::string::npos) << r.out;
}

// --prompt-file - reads standard input (it said "cannot read --prompt-file '-'"), with the file's checks: an empty
// or non-UTF-8 input is an error naming it, and the answer equals the one to the same text given with -p.
TEST(CliEdges, PromptFileDashReadsStandardInput) {
  const std::string args = " --steps 2 --max-new-tokens 8 -q --show-ids --seed 3";
  const ProcessResult piped = run_command("printf 'Why is the sky blue?' | " + cli_path() + " ask " + model() + args +
                                              " --prompt-file -", false);
  EXPECT_EQ(piped.code, 0) << piped.out;
  const ProcessResult given = run_stdout("ask " + model() + args + " -p 'Why is the sky blue?'");
  EXPECT_EQ(given.code, 0) << given.out;
  EXPECT_FALSE(given.out.empty());
  EXPECT_EQ(piped.out, given.out);
  ProcessResult r = run("ask " + model() + args + " --prompt-file - < /dev/null");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--prompt-file - (standard input) is empty"), std::string::npos) << r.out;
  r = run_command("printf 'caf\\303' | " + cli_path() + " ask " + model() + args + " --prompt-file -", true);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--prompt-file - (standard input) is not valid UTF-8 at byte 3 of 4"), std::string::npos)
      << r.out;
  r = run("ask --help");
  EXPECT_NE(r.out.find("-: standard input"), std::string::npos) << r.out;
}

// Output that cannot be written (here a full disk, /dev/full) is an error: ask, info and --help exited 0 with the
// answer lost.
TEST(CliEdges, OutputThatCannotBeWrittenIsAnError) {
  for (const std::string& args : {"ask " + model() + " -p hi --steps 2 --max-new-tokens 8 -q", "info " + model(),
                                 std::string("tokenize ") + model() + " hello", std::string("ask --help")}) {
    const ProcessResult r = run_command("( " + cli_path() + " " + args + " > /dev/full )", true);
    EXPECT_EQ(r.code, 1) << args << ": " << r.out;
    EXPECT_NE(r.out.find("the output could not be written in full"), std::string::npos) << args << ": " << r.out;
  }
}

TEST(CliEdges, APromptThatIsNotUtf8IsAnErrorNamingItsSourceAndByte) {
  const std::string file = scratch_dir("prompt-utf8") + "/truncated.txt";
  std::ofstream(file, std::ios::binary) << "caf\xc3";
  const ProcessResult r = run("ask " + model() + " --prompt-file " + file + " --steps 1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--prompt-file '" + file + "' is not valid UTF-8 at byte 3 of 4"), std::string::npos) << r.out;
}

TEST(CliEdges, AskReportsPromptAndGenerationTokensPerSecondApart) {
  const ProcessResult r = run("ask " + model() + " -p 'Why is the sky blue?' --steps 2 --max-new-tokens 16");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(prompt +\d+ tokens in [0-9.]+ s \([0-9.]+ tokens/s\))"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(generation +\d+ tokens in [0-9.]+ s \([0-9.]+ tokens/s\))")))
      << r.out;
  const ProcessResult j = run_stdout("ask " + model() + " -p 'Why is the sky blue?' --steps 2 --max-new-tokens 16 --json");
  ASSERT_EQ(j.code, 0) << j.out;
  const auto t = nlohmann::json::parse(j.out)["timing"];
  EXPECT_GT(t["prompt_tokens_per_s"].get<double>(), 0.0) << j.out;
  EXPECT_GT(t["generation_tokens_per_s"].get<double>(), 0.0) << j.out;
}

TEST(CliEdges, InfoReportsAPacksStorageFormats) {
  const std::string pack = quantize_fixture("info-formats", source_path("tests/fixtures/tiny_a"), "q4");
  const ProcessResult r = run_stdout("info -m " + pack + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("formats")) << r.out;
  EXPECT_TRUE(j["formats"].contains("q4")) << r.out;
  EXPECT_TRUE(j["formats"].contains("q8")) << r.out;
  int64_t bytes = 0;
  for (const auto& [f, c] : j["formats"].items()) bytes += c["bytes"].get<int64_t>();
  EXPECT_EQ(bytes, j["weight_bytes"].get<int64_t>());
  const ProcessResult text = run_stdout("info -m " + pack);
  EXPECT_TRUE(std::regex_search(text.out, std::regex(R"(weights .*: .*q4 [0-9.]+ [KM]iB)"))) << text.out;
  EXPECT_TRUE(std::regex_search(text.out, std::regex(R"(attn +raw (BF16|F16|F32) )"))) << text.out;
}

TEST(CliEdges, InfoDescribesTheSyntheticFullShape) {
  const ProcessResult r = run_stdout("info -m synthetic:26b-a4b:q4 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["synthetic"], "q4") << r.out;
  EXPECT_EQ(j["layers"], 30) << r.out;
  EXPECT_EQ(j["experts"], 128) << r.out;
  EXPECT_EQ(j["params"]["total"].get<int64_t>(), 25250986752) << "the published 25.2 B parameters";
  int64_t bytes = 0;
  for (const auto& [f, c] : j["formats"].items()) bytes += c["bytes"].get<int64_t>();
  EXPECT_EQ(bytes, j["weight_bytes"].get<int64_t>()) << r.out;
  EXPECT_TRUE(j["formats"].contains("q4") && j["formats"].contains("BF16")) << r.out;
  EXPECT_TRUE(!j["formats"].contains("fp8") && j["formats"].contains("q8")) << "q4: the linears raw, sc q8 " << r.out;
  const ProcessResult mixed = run_stdout("info -m synthetic:26b-a4b:q4-fp8 --json");  // q4 experts, fp8 linears
  ASSERT_EQ(mixed.code, 0) << mixed.out;
  const auto m = nlohmann::json::parse(mixed.out);
  EXPECT_TRUE(m["formats"].contains("q4") && m["formats"].contains("fp8") && !m["formats"].contains("q8")) << mixed.out;
  EXPECT_EQ(m["formats"]["q4"]["bytes"], j["formats"]["q4"]["bytes"]) << "the same experts";
  EXPECT_LT(m["weight_bytes"].get<int64_t>(), j["weight_bytes"].get<int64_t>()) << "fp8 linears are smaller";
  const ProcessResult text = run_stdout("info -m synthetic:26b-a4b");
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("weights      47.03 GiB made on the device from a seed (profile bf16; no files)"),
            std::string::npos)
      << text.out;
  const ProcessResult bad = run("info -m synthetic:26b-a4b:bogus");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("unknown synthetic model"), std::string::npos) << bad.out;
}

TEST(CliEdges, TheSyntheticFullShapeBeyondFreeMemoryIsRefusedAtOpen) {
  // 94 GiB of weights at the CPU's f32 activations: refused before any is made, where that much is not free (where
  // it is, the test would allocate it: skipped).
  const MemoryInfo m = host_memory();
  if (m.free == 0 || m.free > (90ull << 30)) GTEST_SKIP() << "this machine may hold the full shape in f32";
  const ProcessResult r = run("ask -m synthetic:26b-a4b --prompt-ids 1,2 --steps 1 --max-new-tokens 4");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("'synthetic:26b-a4b' makes 94.07 GiB of weights on the cpu backend"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--backend cuda"), std::string::npos) << r.out;
}

TEST(CliEdges, MoreLayersThanTheSyntheticShapeHasIsAnError) {
  const ProcessResult r = run("bench --layers 31 --backend cpu");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--layers 31: the 26B-A4B shape has 30 layers"), std::string::npos) << r.out;
}

TEST(CliEdges, TheReadmePromptIdsAreAChatTurnOfTheEmbeddedTokenizer) {
  std::ifstream readme(source_path("README.md"));
  std::string ids;
  for (std::string line; std::getline(readme, line);) {
    const size_t at = line.find("ask --prompt-ids ");
    if (at == std::string::npos) continue;
    std::istringstream rest(line.substr(at + 17));
    rest >> ids;
    break;
  }
  ASSERT_FALSE(ids.empty()) << "no `diffgemma ask --prompt-ids` example in README.md";
  const ProcessResult text = run_stdout("tokenize " + model() + " --decode '" + ids + "'");
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_EQ(text.out.rfind("<bos><|turn>user\n", 0), 0u) << text.out;
  EXPECT_NE(text.out.find("<turn|>\n<|turn>model\n"), std::string::npos) << text.out;
  const ProcessResult ask = run_stdout("ask " + model() + " --prompt-ids " + ids + " --steps 2 --max-new-tokens 8 -q");
  EXPECT_EQ(ask.code, 0) << ask.out;
}

TEST(CliEdges, AnUnknownOptionNamesWhatItProbablyMeant) {
  struct Case {
    std::string args, hint;
  };
  const Case cases[] = {
      {"ask --max-tokens 5 -p hi", "--max-tokens: did you mean --max-new-tokens?"},
      {"ask --temperature 0.5 -p hi", "--temperature: did you mean --t-max or --t-min?"},
      {"ask --stpes 3 -p hi", "--stpes: did you mean --steps?"},
      {"ask -p hi --json-obj", "--json-obj: did you mean --json-object or --json?"},
      {"bench --contexts 1024", "--contexts: did you mean --context?"},
      {"tokenize --decod 1,2", "--decod: did you mean --decode?"},
  };
  for (const Case& c : cases) {
    const ProcessResult r = run(c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find("not expected"), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.hint), std::string::npos) << c.args << "\n" << r.out;
  }
  const ProcessResult none = run("ask --zzz-unknown 1 -p hi");
  EXPECT_EQ(none.code, 2) << none.out;
  EXPECT_EQ(none.out.find("did you mean"), std::string::npos) << "no hint without a likely meaning\n" << none.out;
}

TEST(CliEdges, ABadValueFromTheEnvironmentSaysWhereItCameFrom) {
  const ProcessResult r = run_command("DG_THREADS=abc " + cli_path() + " ask -p hi", true);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--threads: 'abc' is not an integer >= 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the value of --threads came from the environment: DG_THREADS=abc"), std::string::npos)
      << r.out;
  const ProcessResult given = run_command("DG_THREADS=abc " + cli_path() + " ask -p hi --threads 0", true);
  EXPECT_EQ(given.code, 2) << given.out;
  EXPECT_EQ(given.out.find("came from the environment"), std::string::npos) << "--threads was given\n" << given.out;
}

TEST(CliEdges, AnUnknownCommandListsEveryCommand) {
  const ProcessResult r = run("frobnicate");
  EXPECT_EQ(r.code, 2) << r.out;
  for (const char* c : {"ask", "chat", "info", "tokenize", "bench", "smoketest", "quantize", "serve", "replay",
                        "golden", "campaign", "verify"})
    EXPECT_NE(r.out.find(std::string(c) + (std::string(c) == "verify" ? ";" : ",")), std::string::npos)
        << c << "\n" << r.out;
}

}  // namespace cli_edges_test
}  // namespace dg::test
