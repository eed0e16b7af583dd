// The CPU count the worker pool starts with: cgroup quota parsing and the bounds of usable_cpus().
#include <gtest/gtest.h>

#include <thread>

#include "core/cpus.h"

namespace dg {
namespace cpus_test {

TEST(Cpus, CgroupV2CpuMaxGivesQuotaOverPeriod) {
  EXPECT_EQ(cpu_max_limit("400000 100000\n"), 4.0);
  EXPECT_EQ(cpu_max_limit("150000 100000"), 1.5);
  EXPECT_FALSE(cpu_max_limit("max 100000\n"));
  EXPECT_FALSE(cpu_max_limit(""));
  EXPECT_FALSE(cpu_max_limit("12 x"));
  EXPECT_FALSE(cpu_max_limit("0 100000"));
}

TEST(Cpus, CgroupV1QuotaOfMinusOneIsNoLimit) {
  EXPECT_EQ(cfs_limit("1600000\n", "100000\n"), 16.0);
  EXPECT_FALSE(cfs_limit("-1\n", "100000\n"));
  EXPECT_FALSE(cfs_limit("", "100000"));
  EXPECT_FALSE(cfs_limit("100000", "0"));
}

TEST(Cpus, UsableCpusIsPositiveAndAtMostTheOnlineProcessors) {
  const int n = usable_cpus();
  EXPECT_GE(n, 1);
  const auto hw = static_cast<int>(std::thread::hardware_concurrency());
  if (hw > 0) {
    EXPECT_LE(n, hw);
  }
}

}  // namespace cpus_test
}  // namespace dg
