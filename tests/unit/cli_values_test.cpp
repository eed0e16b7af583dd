// Option values through the diffgemma binary: a thread count above the usable CPUs is clamped with a warning, and a
// count below one is a usage error naming the option.
#include <gtest/gtest.h>

#include <string>

#include <fmt/format.h>

#include "core/cpus.h"
#include "support/paths.h"
#include "support/process.h"

namespace dg::test {
namespace {

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

}  // namespace
}  // namespace dg::test
