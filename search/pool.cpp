#include "search/pool.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "ir/diagnostic.h"

namespace morgana::search {

namespace {

// Idle workers sleep until a task is pushed or the run ends. The external stop flag raises no signal, so they
// also wake on this timeout; a missed notification costs at most that long.
constexpr auto kIdlePoll = std::chrono::milliseconds(2);

}  // namespace

TaskPool::TaskPool(int threads)
    : threads_(threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) {
  for (int i = 0; i < threads_; ++i) deques_.push_back(std::make_unique<Deque>());
}

TaskPool::~TaskPool() = default;

void TaskPool::Worker::spawn(Task task) {
  pool_.push(index_, std::move(task));
}

bool TaskPool::Worker::stop_requested() const {
  return pool_.stopping();
}

bool TaskPool::stopping() const {
  return failed_.load(std::memory_order_relaxed) || (stop_ && stop_->load());
}

void TaskPool::push(int index, Task task) {
  MG_CHECK(task != nullptr, "spawned an empty task");
  pending_.fetch_add(1);
  Deque& d = *deques_[static_cast<size_t>(index)];
  std::lock_guard<std::mutex> lock(d.mutex);
  d.tasks.push_back(std::move(task));
}

bool TaskPool::next_task(int index, Task& out) {
  {  // Own deque, newest first.
    Deque& d = *deques_[static_cast<size_t>(index)];
    std::lock_guard<std::mutex> lock(d.mutex);
    if (!d.tasks.empty()) {
      out = std::move(d.tasks.back());
      d.tasks.pop_back();
      return true;
    }
  }
  {  // A root not yet started.
    std::lock_guard<std::mutex> lock(roots_.mutex);
    if (!roots_.tasks.empty()) {
      out = std::move(roots_.tasks.front());
      roots_.tasks.pop_front();
      return true;
    }
  }
  // Steal the oldest task of another worker, starting with the next one so that thieves spread out.
  for (int k = 1; k < threads_; ++k) {
    Deque& d = *deques_[static_cast<size_t>((index + k) % threads_)];
    std::lock_guard<std::mutex> lock(d.mutex);
    if (!d.tasks.empty()) {
      out = std::move(d.tasks.front());
      d.tasks.pop_front();
      return true;
    }
  }
  return false;
}

void TaskPool::fail(std::exception_ptr e) {
  std::lock_guard<std::mutex> lock(error_mutex_);
  if (!error_) error_ = std::move(e);
  failed_ = true;
}

void TaskPool::work(int index) {
  Worker self(*this, index);
  Task task;
  while (!stopping() && pending_.load() > 0) {
    if (!next_task(index, task)) {
      std::unique_lock<std::mutex> lock(idle_mutex_);
      idle_cv_.wait_for(lock, kIdlePoll);
      continue;
    }
    try {
      task(self);
      done_.fetch_add(1);
    } catch (...) {
      fail(std::current_exception());
    }
    task = nullptr;  // release what the task captured before looking for the next one
    // Subtasks were counted when spawned, so pending_ reaches 0 only when nothing is queued or running.
    if (pending_.fetch_sub(1) == 1)
      idle_cv_.notify_all();
    else
      idle_cv_.notify_one();  // its subtasks, if any, may be stolen now
  }
}

TaskPool::RunStats TaskPool::run(std::vector<Task> roots, const std::atomic<bool>& stop) {
  MG_CHECK(stop_ == nullptr, "TaskPool::run called again while it runs (from a task?)");
  for (const Task& t : roots) MG_CHECK(t != nullptr, "an empty root task");
  stop_ = &stop;
  failed_ = false;
  error_ = nullptr;
  done_ = 0;
  pending_ = static_cast<int64_t>(roots.size());
  for (Task& t : roots) roots_.tasks.push_back(std::move(t));
  std::vector<std::thread> helpers;
  for (int i = 1; i < threads_; ++i) helpers.emplace_back([this, i] { work(i); });
  work(0);
  for (std::thread& t : helpers) t.join();

  // Whatever is still queued was dropped by a stop.
  RunStats stats;
  stats.done = done_.load();
  stats.dropped = roots_.tasks.size();
  roots_.tasks.clear();
  for (const std::unique_ptr<Deque>& d : deques_) {
    stats.dropped += d->tasks.size();
    d->tasks.clear();
  }
  stop_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return stats;
}

}  // namespace morgana::search
