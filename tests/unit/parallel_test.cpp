// parallel_for: every index exactly once per call, across many back-to-back regions of changing sizes (a worker
// waking late for one region must not claim a chunk of the next — that once ran a chunk twice and hung the pool).
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "core/parallel.h"

namespace dg {
namespace parallel_test {

TEST(Parallel, EveryIndexRunsOnceAcrossManyRegionsOfChangingSize) {
  set_num_threads(8);  // more workers than cores (when this test is the process's first parallel_for, as in ctest)
  std::vector<std::atomic<int>> hits(257);
  int bad = 0;
  for (int call = 0; call < 100000 && bad == 0; ++call) {
    const int64_t n = (call % 3 == 0) ? 2 : (call % 3 == 1) ? 257 : 9;
    for (int64_t i = 0; i < n; ++i) hits[static_cast<size_t>(i)] = 0;
    parallel_for(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) bad += hits[static_cast<size_t>(i)].load() != 1;
  }
  EXPECT_EQ(bad, 0);
}

TEST(Parallel, AnExceptionInOneChunkReachesTheCallerAndThePoolKeepsWorking) {
  EXPECT_THROW(parallel_for(64, 1, [](int64_t b, int64_t) {
                 if (b == 0) throw std::runtime_error("chunk 0");
               }),
               std::runtime_error);
  std::atomic<int64_t> sum{0};
  parallel_for(100, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 4950);
}

}  // namespace parallel_test
}  // namespace dg
