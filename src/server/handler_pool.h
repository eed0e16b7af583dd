// HandlerPool: the HTTP server's handler threads. A task is taken only while a thread is free: there is no queue
// behind them, so a full pool is answered at once (429) instead of making requests wait unseen.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dg::server {

class HandlerPool {
 public:
  explicit HandlerPool(int n) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { loop(); });
  }
  ~HandlerPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  bool try_submit(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_ || busy_ + tasks_.size() >= threads_.size()) return false;
    tasks_.push_back(std::move(task));
    cv_.notify_one();
    return true;
  }
  // Until no task is queued or running, or `until` passes; true when idle.
  bool wait_idle(std::chrono::steady_clock::time_point until) {
    std::unique_lock<std::mutex> lock(mu_);
    return idle_cv_.wait_until(lock, until, [&] { return busy_ == 0 && tasks_.empty(); });
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return closing_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
        ++busy_;
      }
      task();
      std::lock_guard<std::mutex> lock(mu_);
      --busy_;
      if (busy_ == 0 && tasks_.empty()) idle_cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  size_t busy_ = 0;
  bool closing_ = false;
};

}  // namespace dg::server
