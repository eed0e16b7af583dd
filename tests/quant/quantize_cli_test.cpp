// `diffgemma quantize` end to end through the binary: quantize the embedded model (the same bytes with one
// thread), describe the pack with `info`, and `ask` it — the answer must equal, token for token, the answer of the
// pack's dequantised twin; bad options fail with the message and exit code of a usage error.
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "quant/quant_test_util.h"
#include "support/paths.h"
#include "support/process.h"
#include "support/tiny_checkpoint.h"

namespace dg::test {
namespace quantize_cli_test {

ProcessResult run(const std::string& args) { return run_command(cli_path() + " " + args, true); }
ProcessResult run_stdout(const std::string& args) { return run_command(cli_path() + " " + args, false); }

TEST(QuantizeCli, QuantizeInfoAsk) {
  const std::string pack = scratch_dir("cli-quantize") + "/dg-tiny-q4";
  const ProcessResult q = run("quantize -m " + source_path("models/dg-tiny") + " -o " + pack + " --profile q4");
  ASSERT_EQ(q.code, 0) << q.out;
  EXPECT_NE(q.out.find("quantize 100%"), std::string::npos) << q.out;  // the log-mode progress lines
  EXPECT_NE(q.out.find("wrote " + pack + ": profile q4"), std::string::npos) << q.out;
  EXPECT_NE(q.out.find("peak RSS"), std::string::npos) << q.out;
  // The bytes do not depend on the thread count.
  const std::string serial = scratch_dir("cli-quantize-1t") + "/pack";
  ASSERT_EQ(run("quantize -q --threads 1 -m " + source_path("models/dg-tiny") + " -o " + serial).code, 0);
  for (const char* f : {"/model.dgq.bin", "/model.dgq.json", "/tokenizer.json"})
    EXPECT_TRUE(read_bytes(pack + f) == read_bytes(serial + f)) << f;

  const ProcessResult source = run_stdout("info -m " + source_path("models/dg-tiny") + " --json");
  ASSERT_EQ(source.code, 0) << source.out;
  const auto src = nlohmann::json::parse(source.out);
  const ProcessResult info = run_stdout("info -m " + pack + " --json");
  ASSERT_EQ(info.code, 0) << info.out;
  const auto j = nlohmann::json::parse(info.out);
  EXPECT_EQ(j["pack"]["profile"], "q4");
  EXPECT_EQ(j["pack"]["version"], 2);
  EXPECT_EQ(j["pack"]["classes"]["experts.gate_up"]["format"], "q4");
  EXPECT_EQ(j["pack"]["classes"]["experts.down"]["tensors"], src["layers"]);  // one stacked tensor per layer
  EXPECT_EQ(j["pack"]["classes"]["sc"]["format"], "q8");
  EXPECT_EQ(j["pack"]["classes"]["attn"]["format"], "raw");
  EXPECT_LE(j["weight_bytes"].get<int64_t>(), j["pack"]["blob_bytes"].get<int64_t>());  // the blob adds padding
  // q4 stores the experts in about 5 bits a weight (the embedded model: 5.9 MB for 18.9 MB of bf16 experts, a
  // 15.9 MB pack from a 29.4 MB checkpoint), so the pack saves at least half the experts' bf16 bytes.
  const int64_t bf16_bytes = src["weight_bytes"].get<int64_t>();
  const int64_t experts_bf16 = 2 * src["params"]["experts"].get<int64_t>();
  EXPECT_LT(j["pack"]["blob_bytes"].get<int64_t>(), bf16_bytes - experts_bf16 / 2)
      << "the bf16 checkpoint is " << bf16_bytes << " bytes, " << experts_bf16 << " of them experts";
  const ProcessResult text = run_stdout("info -m " + pack);
  EXPECT_NE(text.out.find("profile q4"), std::string::npos) << text.out;

  const std::string args = " -p 'Why is the sky blue?' --max-new-tokens 48 --steps 6 --show-ids -q --seed 5";
  const ProcessResult a = run_stdout("ask -m " + pack + args);
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_FALSE(a.out.empty());
  const ProcessResult t = run_stdout("ask -m " + dequantised_twin(pack) + args);
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_EQ(a.out, t.out) << "the pack and its dequantised twin must answer identically";
}

TEST(QuantizeCli, BadOptionsFailClearly) {
  const std::string out = scratch_dir("cli-bad") + "/pack";
  const std::string m = " -m " + source_path("models/dg-tiny") + " -o " + out;
  // A bad --set is a usage error (exit 2) as a bad --profile is (it was a runtime error, exit 1).
  ProcessResult r = run("quantize" + m + " --set embed=q4");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("class 'embed' is locked"), std::string::npos) << r.out;
  r = run("quantize" + m + " --set attn=q3");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("unknown format 'q3'"), std::string::npos) << r.out;
  r = run("quantize" + m + " --set attn=q8 --set attn=fp8");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("class 'attn' is set twice"), std::string::npos) << r.out;
  r = run("quantize" + m + " --profile q5");
  EXPECT_EQ(r.code, 2) << r.out;
  r = run("quantize -m " + source_path("models/dg-tiny"));
  EXPECT_EQ(r.code, 2) << r.out;  // -o is required
  // An empty path is a usage error (an empty -o wrote the whole pack, then failed to rename it: exit 1).
  r = run("quantize -m " + source_path("models/dg-tiny") + " -o ''");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--out: the value is empty"), std::string::npos) << r.out;
  r = run("quantize -m '' -o " + out);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--model: the value is empty"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out));
  r = run("quantise");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("quantize"), std::string::npos) << "the unknown-command message lists quantize: " << r.out;
}

}  // namespace quantize_cli_test
}  // namespace dg::test
