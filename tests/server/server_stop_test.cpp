// Stopping the server from another thread, as `diffgemma serve`'s signal thread does: run() returns only once the
// stop is through, so the caller may destroy the server at once. Without that, the network loop could return as
// soon as the stop released its work guard, and the destruction that followed raced the stop's last call
// (io_context::stop on freed memory: ASan's heap-use-after-free, a server that exits 1 on SIGTERM). The window is
// a few instructions wide, so this test (under the sanitizers) catches it only now and then; a 300 ms sleep put
// into that window made it fail on the first iteration before the fix and pass after it.
#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "server_test_util.h"

namespace dg::test {
namespace server_stop_test {

TEST(ServerStop, AStopFromAnotherThreadIsThroughWhenRunReturns) {
  const EngineCore& e = tiny_server_engine();
  server::ServerOptions opt;
  opt.host = "127.0.0.1";
  opt.port = 0;
  for (int i = 0; i < 20; ++i) {
    auto srv = std::make_unique<server::Server>(e, opt);
    const int port = srv->bind();
    ASSERT_GT(port, 0);
    std::thread stopper([&] {
      EXPECT_TRUE(eventually([&] { return health_seconds(port) >= 0; }, 60)) << "the server never answered";
      srv->stop();
    });
    srv->run();
    srv.reset();  // at once, while the stopping thread may still be on its way out of stop()
    stopper.join();
  }
}

}  // namespace server_stop_test
}  // namespace dg::test
