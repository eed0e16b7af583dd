#include "core/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/cpus.h"

namespace dg {
namespace {

// One parallel region's work: its own chunk counter and pending count, so a worker that wakes late for an earlier
// region (and finds that region's chunks all claimed) can never claim a chunk of the next one.
struct Region {
  const std::function<void(int64_t)>* fn = nullptr;
  int64_t total = 0;
  std::atomic<int64_t> next{0}, pending{0};
  std::exception_ptr error;  // guarded by Pool::mu_
};

class Pool {
 public:
  explicit Pool(int n) {
    for (int i = 1; i < n; ++i) workers_.emplace_back([this] { loop(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void run(int64_t chunks, const std::function<void(int64_t)>& fn) {
    std::unique_lock<std::mutex> run_lock(run_mu_);  // one parallel region at a time
    auto region = std::make_shared<Region>();
    region->fn = &fn;
    region->total = chunks;
    region->pending = chunks;
    {
      std::lock_guard<std::mutex> lk(mu_);
      region_ = region;
      ++generation_;
    }
    cv_.notify_all();
    work(*region);
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [&] { return region->pending.load() == 0; });
    region_.reset();
    if (region->error) std::rethrow_exception(region->error);
  }

 private:
  void work(Region& r) {
    for (;;) {
      const int64_t i = r.next.fetch_add(1);
      if (i >= r.total) return;
      try {
        (*r.fn)(i);
      } catch (...) {
        std::lock_guard<std::mutex> lk(mu_);
        if (!r.error) r.error = std::current_exception();
      }
      if (r.pending.fetch_sub(1) == 1) {
        std::lock_guard<std::mutex> lk(mu_);
        done_cv_.notify_all();
      }
    }
  }
  void loop() {
    uint64_t seen = 0;
    for (;;) {
      std::shared_ptr<Region> region;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || (generation_ != seen && region_ != nullptr); });
        if (stop_) return;
        seen = generation_;
        region = region_;
      }
      work(*region);
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mu_, run_mu_;
  std::condition_variable cv_, done_cv_;
  std::shared_ptr<Region> region_;  // the region in progress; guarded by mu_
  uint64_t generation_ = 0;
  bool stop_ = false;
};

int g_requested = 0;
thread_local bool t_inside = false;  // nested parallel_for runs serially in the calling worker

Pool& pool() {
  static Pool p([] {
    int n = g_requested > 0 ? g_requested : usable_cpus();
    return std::max(1, n);
  }());
  return p;
}

}  // namespace

void set_num_threads(int n) { g_requested = n; }
int num_threads() { return pool().size(); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t max_chunks = (n + grain - 1) / grain;
  const int64_t threads = num_threads();
  const int64_t chunks = std::min<int64_t>(max_chunks, threads * 4);
  if (chunks <= 1 || t_inside) {
    body(0, n);
    return;
  }
  const int64_t step = (n + chunks - 1) / chunks;
  pool().run(chunks, [&](int64_t c) {
    const int64_t b = c * step;
    const int64_t e = std::min(n, b + step);
    if (b >= e) return;
    const bool outer = t_inside;
    t_inside = true;
    try {
      body(b, e);
    } catch (...) {
      t_inside = outer;
      throw;
    }
    t_inside = outer;
  });
}

}  // namespace dg
