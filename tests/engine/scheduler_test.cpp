// The worker's CPU-side pieces: the bounded job queue (full -> refused, close drains then ends), the event
// channel, and the session pool's routing (longest common prefix, empty slots before eviction, LRU eviction).
#include <gtest/gtest.h>

#include <thread>

#include "serving/scheduler.h"
#include "serving/session_pool.h"
#include "support/paths.h"

namespace dg {
namespace scheduler_test {

TEST(JobQueue, RefusesWhenFullAndDrainsAfterClose) {
  JobQueue q(2);
  EXPECT_TRUE(q.push(std::make_shared<Job>()));
  EXPECT_TRUE(q.push(std::make_shared<Job>()));
  EXPECT_FALSE(q.push(std::make_shared<Job>())) << "a full queue refuses (the server answers 429)";
  EXPECT_EQ(q.size(), 2u);
  EXPECT_NE(q.pop(), nullptr);
  EXPECT_TRUE(q.push(std::make_shared<Job>()));
  q.close();
  EXPECT_FALSE(q.push(std::make_shared<Job>()));
  EXPECT_NE(q.pop(), nullptr);
  EXPECT_NE(q.pop(), nullptr);
  EXPECT_EQ(q.pop(), nullptr);
}

TEST(JobQueue, PopWaitsForAPushOrClose) {
  JobQueue q(1);
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    q.push(std::make_shared<Job>());
  });
  EXPECT_NE(q.pop(), nullptr);
  t.join();
  std::thread c([&] { q.close(); });
  EXPECT_EQ(q.pop(), nullptr);
  c.join();
}

TEST(EventChannel, DeliversInOrderAndTimesOut) {
  EventChannel ch;
  EXPECT_FALSE(ch.pop(std::chrono::milliseconds(1)).has_value());
  JobEvent a, b;
  a.text = "a";
  b.text = "b";
  ch.push(a);
  ch.push(b);
  EXPECT_EQ(ch.pop(std::chrono::milliseconds(1))->text, "a");
  EXPECT_EQ(ch.pop(std::chrono::milliseconds(1))->text, "b");
}

TEST(SessionPool, RoutesToTheLongestPrefixThenEmptySlotsThenTheLeastRecentlyUsed) {
  EngineOptions eo;
  eo.model_dir = test::source_path("models/dg-tiny");
  const auto engine = EngineCore::open(eo);
  SessionPool pool(*engine, 2, SessionOptions{});
  const std::vector<int32_t> a = {2, 105, 10, 11, 12}, b = {2, 105, 20, 21, 22}, c = {2, 105, 30};

  Route r = pool.route(a);
  EXPECT_EQ(r.why, "empty");
  pool.acquire(r.slot);
  pool.session(r.slot).sync(a);
  pool.release(r.slot);
  const int slot_a = r.slot;

  r = pool.route(b);  // shares only <bos><|turn> with a: takes the empty slot rather than evicting a
  EXPECT_EQ(r.why, "empty");
  EXPECT_NE(r.slot, slot_a);
  pool.acquire(r.slot);
  pool.session(r.slot).sync(b);
  pool.release(r.slot);

  const std::vector<int32_t> a_next = {2, 105, 10, 11, 12, 13, 14};
  r = pool.route(a_next);
  EXPECT_EQ(r.why, "prefix");
  EXPECT_EQ(r.slot, slot_a);
  EXPECT_EQ(r.common, 5);
  EXPECT_EQ(r.held, 5);
  pool.acquire(r.slot);  // a is now the most recently used
  pool.release(r.slot);

  r = pool.route(c);  // no empty slot: the least recently used (b's) is evicted
  EXPECT_EQ(r.why, "evict");
  EXPECT_NE(r.slot, slot_a);
  pool.acquire(r.slot);
  EXPECT_EQ(pool.route(a_next).slot, slot_a) << "busy slots are skipped";
  pool.acquire(slot_a);
  EXPECT_EQ(pool.route(a_next).slot, -1) << "every slot busy";
}

TEST(SessionPool, APromptReusesOnlyItsOwnTenantsCache) {
  EngineOptions eo;
  eo.model_dir = test::source_path("models/dg-tiny");
  const auto engine = EngineCore::open(eo);
  SessionPool pool(*engine, 1, SessionOptions{});
  const std::vector<int32_t> secret = {2, 105, 10, 11, 12, 13};
  Route r = pool.route(secret, "alice");
  pool.acquire(r.slot, "alice");
  pool.session(r.slot).sync(secret);
  pool.release(r.slot);

  r = pool.route(secret, "bob");  // the one slot holds alice's prompt
  EXPECT_EQ(r.why, "evict");
  EXPECT_TRUE(r.clear) << "bob's prompt may not reuse alice's tokens";
  EXPECT_EQ(r.common, 0);
  r = pool.route(secret, "alice");
  EXPECT_EQ(r.why, "prefix");
  EXPECT_FALSE(r.clear);
  EXPECT_EQ(r.common, 6);
}

}  // namespace scheduler_test
}  // namespace dg
