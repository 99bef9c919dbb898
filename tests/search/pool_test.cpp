// The work-stealing pool (search/pool.h): every task runs exactly once for any thread count, nested spawns
// included; a stop drops what has not started; the first exception reaches run()'s caller.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "search/pool.h"

namespace morgana::search {
namespace {

// A tree of tasks: each of `roots` roots spawns `fanout` children, each child `fanout` grandchildren. Every
// task adds its own number once to `hits`.
std::vector<TaskPool::Task> tree(int roots, int fanout, std::vector<std::atomic<int>>& hits) {
  std::vector<TaskPool::Task> out;
  for (int r = 0; r < roots; ++r) {
    out.push_back([r, fanout, &hits](TaskPool::Worker& w) {
      int base = r * (1 + fanout + fanout * fanout);
      hits[static_cast<size_t>(base)]++;
      for (int c = 0; c < fanout; ++c) {
        w.spawn([base, c, fanout, &hits](TaskPool::Worker& w2) {
          int child = base + 1 + c * (1 + fanout);
          hits[static_cast<size_t>(child)]++;
          for (int g = 0; g < fanout; ++g)
            w2.spawn([child, g, &hits](TaskPool::Worker&) { hits[static_cast<size_t>(child + 1 + g)]++; });
        });
      }
    });
  }
  return out;
}

TEST(TaskPool, EveryTaskRunsExactlyOnceForAnyThreadCount) {
  for (int threads : {1, 2, 8}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    const int roots = 40, fanout = 6, total = roots * (1 + fanout + fanout * fanout);
    std::vector<std::atomic<int>> hits(static_cast<size_t>(total));
    TaskPool pool(threads);
    std::atomic<bool> stop{false};
    TaskPool::RunStats s = pool.run(tree(roots, fanout, hits), stop);
    EXPECT_EQ(s.done, static_cast<uint64_t>(total));
    EXPECT_EQ(s.dropped, 0u);
    for (int i = 0; i < total; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "task " << i;
  }
}

TEST(TaskPool, SumsOverManyTasksAndRunsAgain) {
  TaskPool pool(8);
  std::atomic<bool> stop{false};
  for (int round = 0; round < 3; ++round) {
    std::atomic<uint64_t> sum{0};
    std::vector<TaskPool::Task> roots;
    for (uint64_t i = 1; i <= 1000; ++i)
      roots.push_back([i, &sum](TaskPool::Worker& w) {
        sum += i;
        if (i % 10 == 0) w.spawn([i, &sum](TaskPool::Worker&) { sum += 1000 * i; });
      });
    pool.run(std::move(roots), stop);
    EXPECT_EQ(sum.load(), 500500u + 1000u * 50500u) << "round " << round;
  }
}

TEST(TaskPool, OneThreadRunsEverythingOnTheCallingThread) {
  TaskPool pool(1);
  std::atomic<bool> stop{false};
  std::thread::id caller = std::this_thread::get_id();
  bool elsewhere = false;
  std::vector<TaskPool::Task> roots;
  for (int i = 0; i < 10; ++i)
    roots.push_back([&](TaskPool::Worker& w) {
      elsewhere |= std::this_thread::get_id() != caller || w.index() != 0;
      w.spawn([&](TaskPool::Worker&) { elsewhere |= std::this_thread::get_id() != caller; });
    });
  EXPECT_EQ(pool.run(std::move(roots), stop).done, 20u);
  EXPECT_FALSE(elsewhere);
}

TEST(TaskPool, WorkerIndexIsInRange) {
  TaskPool pool(4);
  EXPECT_EQ(pool.threads(), 4);
  std::atomic<bool> stop{false}, bad{false};
  std::vector<TaskPool::Task> roots;
  for (int i = 0; i < 200; ++i)
    roots.push_back([&](TaskPool::Worker& w) { bad = bad || w.index() < 0 || w.index() >= 4; });
  pool.run(std::move(roots), stop);
  EXPECT_FALSE(bad);
  EXPECT_GE(TaskPool(0).threads(), 1) << "0 means the hardware concurrency";
}

TEST(TaskPool, StopDropsTasksNotStartedAndCountsThem) {
  for (int threads : {1, 2, 8}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    TaskPool pool(threads);
    std::atomic<bool> stop{false};
    std::atomic<int> ran{0};
    std::vector<TaskPool::Task> roots;
    for (int i = 0; i < 1000; ++i)
      roots.push_back([&](TaskPool::Worker& w) {
        if (++ran == 10) {
          stop = true;
          EXPECT_TRUE(w.stop_requested());
        }
      });
    TaskPool::RunStats s = pool.run(std::move(roots), stop);
    EXPECT_LT(s.done, 1000u);
    EXPECT_GE(s.done, 10u);
    EXPECT_EQ(s.done + s.dropped, 1000u) << "a task is either run or dropped";
    EXPECT_EQ(static_cast<uint64_t>(ran.load()), s.done);
  }
}

TEST(TaskPool, AStopSetBeforehandRunsNothing) {
  TaskPool pool(2);
  std::atomic<bool> stop{true};
  std::vector<TaskPool::Task> roots(5, [](TaskPool::Worker&) { FAIL() << "ran after stop"; });
  TaskPool::RunStats s = pool.run(std::move(roots), stop);
  EXPECT_EQ(s.done, 0u);
  EXPECT_EQ(s.dropped, 5u);
}

TEST(TaskPool, TheFirstExceptionReachesTheCaller) {
  std::atomic<bool> stop{false};
  {  // One thread: the order is the roots' order, so the first thrower is known.
    TaskPool pool(1);
    std::vector<TaskPool::Task> roots{
        [](TaskPool::Worker&) {},
        [](TaskPool::Worker&) { throw std::runtime_error("first"); },
        [](TaskPool::Worker&) { throw std::runtime_error("second"); },
    };
    try {
      pool.run(std::move(roots), stop);
      FAIL() << "run() did not throw";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "first");
    }
    // The pool is usable afterwards.
    std::atomic<int> n{0};
    pool.run({[&](TaskPool::Worker&) { ++n; }}, stop);
    EXPECT_EQ(n.load(), 1);
  }
  {  // Many threads and throwers: exactly one exception, from a subtask as well as from a root.
    TaskPool pool(8);
    std::vector<TaskPool::Task> roots;
    for (int i = 0; i < 100; ++i)
      roots.push_back([i](TaskPool::Worker& w) {
        w.spawn([i](TaskPool::Worker&) { throw std::runtime_error("task " + std::to_string(i)); });
      });
    EXPECT_THROW(pool.run(std::move(roots), stop), std::runtime_error);
  }
}

}  // namespace
}  // namespace morgana::search
