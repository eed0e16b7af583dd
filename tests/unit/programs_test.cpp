// The programmatic battery's judge (smoketest/programs.h): known programs in each language come out pass,
// wrong_output or compile_fail; a hanging program is a failed case after the timeout, not a wedged test; fences are
// stripped and reported; each case runs in a fresh directory; the committed battery loads.
#include <gtest/gtest.h>

#include <chrono>

#include "smoketest/programs.h"
#include "support/expect_error.h"
#include "support/paths.h"

namespace dg::smoke {
namespace programs_test {

ProgramPrompt prompt(const std::string& language, std::vector<ProgramCase> cases) {
  ProgramPrompt p;
  p.name = "t";
  p.language = language;
  p.cases = std::move(cases);
  return p;
}

TEST(Programs, ShellPythonAndCAreJudgedByStdoutAndExitCode) {
  const ProgramPrompt sh = prompt("sh", {{"hi\n", {}, "HI\n", 0}, {"", {"x"}, "X\n", 0}});
  EXPECT_EQ(judge_program(sh, "if [ -n \"$1\" ]; then echo \"$1\"; else cat; fi | tr a-z A-Z").verdict,
            ProgramVerdict::kPass);
  EXPECT_EQ(judge_program(sh, "echo HI").verdict, ProgramVerdict::kWrongOutput);
  EXPECT_EQ(judge_program(sh, "if then fi (").verdict, ProgramVerdict::kCompileFail);

  const ProgramPrompt py = prompt("python", {{"", {"2", "3"}, "5\n", 0}, {"-1\n", {}, "", 3}});
  const char* good = "import sys\nif len(sys.argv) > 1:\n    print(sum(map(int, sys.argv[1:])))\nelse:\n"
                     "    sys.exit(3)\n";
  const ProgramResult ok = judge_program(py, good);
  EXPECT_EQ(ok.verdict, ProgramVerdict::kPass);
  ASSERT_EQ(ok.cases.size(), 2u);
  EXPECT_EQ(ok.cases[1].exit_code, 3);
  EXPECT_EQ(judge_program(py, "print(5)").verdict, ProgramVerdict::kWrongOutput) << "the exit code case fails";
  const ProgramResult bad = judge_program(py, "def (:\n");
  EXPECT_EQ(bad.verdict, ProgramVerdict::kCompileFail);
  EXPECT_NE(bad.diagnostics.find("SyntaxError"), std::string::npos) << bad.diagnostics;

  const ProgramPrompt c = prompt("c", {{"6\n", {}, "36\n", 0}});
  EXPECT_EQ(judge_program(c, "#include <stdio.h>\nint main(void){int x;scanf(\"%d\",&x);printf(\"%d\\n\",x*x);}")
                .verdict,
            ProgramVerdict::kPass);
  EXPECT_EQ(judge_program(c, "int main(void){ return }").verdict, ProgramVerdict::kCompileFail);
}

TEST(Programs, AHangingProgramFailsItsCaseAfterTheTimeout) {
  const ProgramPrompt sh = prompt("sh", {{"", {}, "done\n", 0}});
  const auto t0 = std::chrono::steady_clock::now();
  const ProgramResult r = judge_program(sh, "sleep 30 & sleep 30\necho done", 0.5);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.verdict, ProgramVerdict::kWrongOutput);
  ASSERT_EQ(r.cases.size(), 1u);
  EXPECT_TRUE(r.cases[0].timed_out);
  EXPECT_LT(s, 5.0);
  // A program that closes its pipes and goes on running is still bounded by the timeout.
  const auto t1 = std::chrono::steady_clock::now();
  const ProgramResult closed = judge_program(prompt("sh", {{"", {}, "", 0}}), "exec >&- 2>&-\nsleep 30", 0.5);
  EXPECT_EQ(closed.verdict, ProgramVerdict::kWrongOutput);
  ASSERT_EQ(closed.cases.size(), 1u);
  EXPECT_TRUE(closed.cases[0].timed_out);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count(), 5.0);
}

TEST(Programs, FencesAreStrippedAndReportedAndCasesStartClean) {
  const ProgramPrompt sh = prompt("sh", {{"", {}, "0\n", 0}, {"", {}, "0\n", 0}});
  const ProgramResult r = judge_program(sh, "Here:\n```sh\nls | wc -l\ntouch left_behind\n```\nDone.");
  EXPECT_TRUE(r.fenced);
  EXPECT_EQ(r.program, "ls | wc -l\ntouch left_behind\n");
  EXPECT_EQ(r.verdict, ProgramVerdict::kWrongOutput) << "the directory holds the program: ls counts 1";
  ASSERT_EQ(r.cases.size(), 2u);
  EXPECT_EQ(r.cases[0].output, "1\n");
  EXPECT_EQ(r.cases[1].output, "1\n") << "the second case does not see the first one's file";
  bool fenced = true;
  EXPECT_EQ(strip_fence("echo hi", &fenced), "echo hi");
  EXPECT_FALSE(fenced);
}

TEST(Programs, TheBatteryLoadsAndBadOnesAreNamed) {
  const std::vector<ProgramPrompt> b = load_programs(dg::test::source_path("tests/fixtures/programmatic/battery.json"));
  EXPECT_GE(b.size(), 6u);
  DG_EXPECT_ERROR(load_programs("/nonexistent.json"), "cannot read the programmatic battery");
}

}  // namespace programs_test
}  // namespace dg::smoke
