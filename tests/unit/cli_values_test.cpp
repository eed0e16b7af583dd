// Option values through the diffgemma binary: a thread count above the usable CPUs is clamped with a warning, and a
// value that means nothing (zero steps, a non-finite or negative temperature, a negative threshold or seed, a kernel
// variant that does not exist, a zero in a bench length list) is a usage error naming the option, rejected before
// any model loads, instead of a silent default.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/cpus.h"
#include "support/paths.h"
#include "support/process.h"

namespace dg::test {
namespace cli_values_test {

ProcessResult run(const std::string& args) { return run_command(cli_path() + " " + args, true); }

std::string model() { return "-m " + source_path("models/dg-tiny"); }

TEST(CliValues, ThreadsAboveTheUsableCpusAreClampedWithAWarning) {
  const int usable = usable_cpus();
  const ProcessResult r =
      run(fmt::format("ask {} -p hi --steps 1 --max-new-tokens 8 -q --threads {}", model(), usable * 4 + 3));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(fmt::format("warning: --threads {} is more than the {} CPU(s) this process may use; using {}",
                                   usable * 4 + 3, usable, usable)),
            std::string::npos)
      << r.out;
  const ProcessResult fits = run(fmt::format("ask {} -p hi --steps 1 --max-new-tokens 8 -q --threads 1", model()));
  ASSERT_EQ(fits.code, 0) << fits.out;
  EXPECT_EQ(fits.out.find("warning"), std::string::npos) << fits.out;
}

TEST(CliValues, ThreadCountsBelowOneAreRejected) {
  for (const std::string& args : {std::string("--threads 0"), std::string("--threads -1")}) {
    const ProcessResult r = run("ask " + model() + " -p hi --steps 1 " + args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("--threads"), std::string::npos) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("is not an integer >= 1"), std::string::npos) << args << "\n" << r.out;
  }
  const ProcessResult env = run_command("DG_THREADS=0 " + cli_path() + " ask " + model() + " -p hi --steps 1", true);
  EXPECT_EQ(env.code, 2) << env.out;
  const ProcessResult q = run("quantize -m " + source_path("models/dg-tiny") + " -o " + scratch_dir("threads") +
                              "/pack --threads 0");
  EXPECT_EQ(q.code, 2) << q.out;
  EXPECT_NE(q.out.find("--threads"), std::string::npos) << q.out;
}

TEST(CliValues, MeaninglessSamplerValuesAreUsageErrors) {
  struct Case {
    std::string arg, option;
  };
  const std::vector<Case> cases = {
      {"--steps 0", "--steps"},
      {"--steps -3", "--steps"},
      {"--max-new-tokens 0", "--max-new-tokens"},
      {"--t-max inf", "--t-max"},
      {"--t-max nan", "--t-max"},
      {"--t-max -1", "--t-max"},
      {"--t-min -0.5", "--t-min"},
      {"--t-min nan", "--t-min"},
      {"--entropy-bound 0", "--entropy-bound"},
      {"--entropy-bound inf", "--entropy-bound"},
      {"--confidence-threshold -0.1", "--confidence-threshold"},
      {"--confidence-threshold 0", "--confidence-threshold"},
      {"--stability-threshold -1", "--stability-threshold"},
      {"--plateau-steps -1", "--plateau-steps"},
      {"--plateau-entropy -1", "--plateau-entropy"},
      {"--entropy-stop -0.05", "--entropy-stop"},
      {"--entropy-stop-min-steps -2", "--entropy-stop-min-steps"},
      {"--empty-reply-retries -1", "--empty-reply-retries"},
      {"--commit-trim-tau 1.5", "--commit-trim-tau"},
      {"--commit-trim-tau -1", "--commit-trim-tau"},
      {"--commit-trim-floor 0", "--commit-trim-floor"},
      {"--seed -1", "--seed"},
      {"--device -1", "--device"},
  };
  for (const Case& c : cases) {
    const ProcessResult r = run("ask " + model() + " -p hi -q " + c.arg);
    EXPECT_EQ(r.code, 2) << c.arg << "\n" << r.out;
    EXPECT_NE(r.out.find(c.option + ": '"), std::string::npos) << c.arg << "\n" << r.out;
  }
  // The same table serves chat and smoketest.
  const ProcessResult chat = run("chat " + model() + " --steps 0 < /dev/null");
  EXPECT_EQ(chat.code, 2) << chat.out;
  EXPECT_NE(chat.out.find("--steps: '0'"), std::string::npos) << chat.out;
  const ProcessResult smoke = run("smoketest " + model() + " --max-new-tokens 0");
  EXPECT_EQ(smoke.code, 2) << smoke.out;
}

TEST(CliValues, MeaninglessModelKernelAndBenchValuesAreUsageErrors) {
  // Rejected as the line is parsed (no model loads): exit 2 and the option named. Each is a parse only.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"ask " + model() + " -p hi --expert-act fp4", "--expert-act"},
      {"ask " + model() + " -p hi --graphs=maybe", "--graphs"},
      {"ask " + model() + " -p hi --no-graphs=2", "--graphs: '-2' is not a switch"},
      {"ask " + model() + " -p hi --graphs=3", "--graphs: '3' is not a switch"},
      {"ask " + model() + " -p hi --prefill-chunk 0", "--prefill-chunk: '0'"},
      {"chat " + model() + " --max-tool-rounds -1", "--max-tool-rounds: '-1'"},
      {"bench --backend cpu --moe-a8-stages 5", "--moe-a8-stages"},
      {"bench --backend cpu --moe-a8-stages three", "--moe-a8-stages"},
      {"bench --backend cpu --expert-act fp16", "--expert-act"},
      {"bench --backend cpu --no-graphs=yes,no", "--graphs"},
      {"bench --backend cpu --unfused-norms=7", "--unfused-norms"},
      {"bench --backend cpu --q4-disk-layout=7", "--q4-disk-layout"},
      {"bench --backend cpu --denoise-steps 0", "--denoise-steps: '0'"},
      {"bench --backend cpu --steps 0", "--steps: '0'"},
      {"bench --backend cpu --prompt-tokens 0", "--prompt-tokens: '0'"},
      {"bench --backend cpu --gen-tokens -4", "--gen-tokens: '-4'"},
      {"bench --backend cpu --layers -1", "--layers: '-1'"},
      {"bench --backend cpu --seed -1", "--seed: '-1'"},
      {"bench --backend cpu --weights q3", "--weights"},
      {"bench --backend cpu --prefill 512,0", "--prefill: '512,0'"},
      {"bench --backend cpu --context 1024,x", "--context: '1024,x'"},
      {"bench --backend cpu --serve --streams 1,-2", "--streams: '1,-2'"},
      {"bench --backend cpu --serve --serve-tokens 0", "--serve-tokens: '0'"},
      {"bench --backend cpu --serve --logit-rows 0", "--logit-rows: '0'"},
      {"bench --backend cpu --moe-auto-rows 0", "--moe-auto-rows: '0'"},
      {"bench --backend cpu --prefill-chunk -1", "--prefill-chunk: '-1'"},
  };
  for (const auto& [args, named] : cases) {
    const ProcessResult r = run(args + " < /dev/null");
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(named), std::string::npos) << args << "\n" << r.out;
  }
}

TEST(CliValues, EveryValidValueIsTakenAsGiven) {
  // Values at the edges of their ranges, a seed above INT64_MAX and explicit zeros that mean "off" are accepted.
  const ProcessResult r = run("ask " + model() + " -p hi -q --show-ids --max-new-tokens 8 --steps 1 --t-min 0 "
                              "--t-max 0.8 --stability-threshold 0 --plateau-steps 0 --entropy-stop 0 "
                              "--graphs=off --no-graphs=false --expert-act bf16 "
                              "--commit-trim-tau 0 --empty-reply-retries 0 --seed 18446744073709551615");
  EXPECT_EQ(r.code, 0) << r.out;
}

}  // namespace cli_values_test
}  // namespace dg::test
