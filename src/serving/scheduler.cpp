#include "serving/scheduler.h"

namespace dg {

void EventChannel::push(JobEvent e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    q_.push_back(std::move(e));
  }
  cv_.notify_one();
}

std::optional<JobEvent> EventChannel::pop(std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, wait, [&] { return !q_.empty(); })) return std::nullopt;
  JobEvent e = std::move(q_.front());
  q_.pop_front();
  return e;
}

bool JobQueue::push(std::shared_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || q_.size() >= capacity_) return false;
    q_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

std::shared_ptr<Job> JobQueue::pop() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return closed_ || !q_.empty(); });
  if (q_.empty()) return nullptr;
  std::shared_ptr<Job> j = std::move(q_.front());
  q_.pop_front();
  return j;
}

std::shared_ptr<Job> JobQueue::try_pop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (q_.empty()) return nullptr;
  std::shared_ptr<Job> j = std::move(q_.front());
  q_.pop_front();
  return j;
}

void JobQueue::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

bool JobQueue::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

size_t JobQueue::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return q_.size();
}

}  // namespace dg
