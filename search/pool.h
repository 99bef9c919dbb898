// The work-stealing task pool the search runs on (docs/search.md, "Driver and threads"). The search space is
// a tree whose subtrees differ in size by orders of magnitude, so a static split leaves threads idle: each
// worker keeps its own deque, runs its newest task first (depth first, so the deque stays short and the data
// warm), and an idle worker steals the oldest task of another (the biggest subtree, so steals are rare).
//
// The pool guarantees only that every task runs exactly once unless the run is stopped; the order, and which
// worker runs what, are not deterministic. A caller that needs a deterministic answer sorts what the tasks
// found.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace morgana::search {

class TaskPool {
 public:
  class Worker;
  using Task = std::function<void(Worker&)>;

  // What run() did: tasks that ran to the end, and tasks dropped because the run was stopped.
  struct RunStats {
    uint64_t done = 0;
    uint64_t dropped = 0;
  };

  // The handle a running task gets: it spawns subtasks onto its own worker's deque, and may poll whether the
  // run is being stopped to cut a long task short.
  class Worker {
   public:
    void spawn(Task task);
    // 0 .. threads()-1: the calling thread of run() is worker 0. Lets callers keep per-worker data without
    // locks.
    int index() const { return index_; }
    bool stop_requested() const;

   private:
    friend class TaskPool;
    Worker(TaskPool& pool, int index) : pool_(pool), index_(index) {}
    TaskPool& pool_;
    int index_;
  };

  // threads <= 0: the machine's hardware concurrency. threads == 1 runs everything on run()'s calling thread.
  explicit TaskPool(int threads);
  ~TaskPool();
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  int threads() const { return threads_; }

  // Runs `roots` (in order, as far as one worker is concerned) and everything they spawn. Returns when every
  // task is done, or as soon as the running tasks end after `stop` became true (the tasks not started are
  // dropped and counted). A task that throws stops the run the same way; run() then rethrows the first
  // exception and drops the later ones. The pool can run() again afterwards, but not from inside a task.
  RunStats run(std::vector<Task> roots, const std::atomic<bool>& stop);

 private:
  // A mutex per deque: a task is a subtree that takes far longer than a lock, so a lock-free deque would buy
  // nothing measurable and cost a subtle implementation.
  struct Deque {
    std::mutex mutex;
    std::deque<Task> tasks;
  };

  void work(int index);
  bool next_task(int index, Task& out);
  bool stopping() const;
  void fail(std::exception_ptr e);
  void push(int index, Task task);

  int threads_;
  std::vector<std::unique_ptr<Deque>> deques_;
  Deque roots_;  // the run's roots, taken FIFO by any idle worker
  // State of the current run.
  const std::atomic<bool>* stop_ = nullptr;
  std::atomic<bool> failed_{false};
  std::atomic<int64_t> pending_{0};  // tasks queued or running; the run is over when it reaches 0
  std::atomic<uint64_t> done_{0};
  std::mutex idle_mutex_;
  std::condition_variable idle_cv_;
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace morgana::search
