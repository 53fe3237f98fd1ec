// A thread blocked in block_on / join helps run queued work when every worker
// is busy (seed: blockOnComplete), and only then.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "test_support.hpp"
#include "volt/volt.hpp"

namespace {

using namespace std::chrono_literals;

// Holds the only worker until released (a non-yielding poll, on purpose).
volt::Task<void> occupy(std::atomic<bool>& started, std::atomic<bool>& release) {
  started.store(true);
  while (!release.load())
    std::this_thread::yield();
  co_return;
}

volt::Task<std::thread::id> release_worker(std::atomic<bool>& release) {
  release.store(true);
  co_return std::this_thread::get_id();
}

volt::Task<void> nothing() {
  co_return;
}

TEST(BlockOnHelp, BlockedThreadRunsQueuedWorkWhenEveryWorkerIsBusy) {
  volt::Runtime rt = volt::Runtime::Builder().worker_threads(1).build();
  std::atomic<bool> started{false}, release{false}, done{false};
  auto occupant = rt.spawn(occupy(started, release));
  while (!started.load())
    std::this_thread::yield();

  // While the worker is stuck, keep queueing work from another thread: each
  // push finds no idle worker and offers the work to the blocked thread.
  std::thread pusher([&] {
    while (!done.load()) {
      rt.spawn(nothing()).abort();  // queued work; aborted so it is trivial
      std::this_thread::sleep_for(5ms);
    }
  });
  // Only the blocked main thread can run this task: the worker waits for it.
  std::thread::id ran_on = rt.block_on(release_worker(release));
  done.store(true);
  pusher.join();
  occupant.join();
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(BlockOnHelp, BlockedThreadDoesNotTakeWorkFromIdleWorkers) {
  volt::Runtime rt = volt::Runtime::Builder().worker_threads(2).build();
  // Idle workers take the task; the blocked thread only waits.
  for (int i = 0; i < 200; ++i) {
    std::thread::id ran_on = rt.block_on(
        []() -> volt::Task<std::thread::id> { co_return std::this_thread::get_id(); }());
    ASSERT_NE(ran_on, std::this_thread::get_id()) << "iteration " << i;
  }
}

volt::Task<void> spawn_and_join(int n) {
  std::vector<volt::JoinHandle<void>> children;
  children.reserve(static_cast<std::size_t>(n));
  // One poll spawning more than the local queue holds: the overflow goes to
  // the inject queue while the only worker is busy, which wakes the helper.
  for (int i = 0; i < n; ++i)
    children.push_back(volt::spawn(nothing()));
  for (auto& child : children)
    co_await child;
}

// Busy is not stuck: the spawning poll (1,000 spawns) ends long before the
// blocked thread's 10 ms watch is over, and the worker takes the overflow
// itself; the blocked thread, woken by the overflow, runs nothing. Before the
// watch it ran part of the overflow in every round (and everything those
// tasks spawned or woke went through the inject queue). A round may still
// see help when the worker is preempted for the whole watch on a loaded
// machine, so most rounds, not all.
TEST(BlockOnHelp, BlockedThreadDoesNotRunWorkOfABusyWorker) {
  volt::Runtime rt = volt::Runtime::Builder().worker_threads(1).build();
  int rounds_without_help = 0;
  for (int round = 0; round < 5; ++round) {
    const std::uint64_t before = rt.stats().blocked_thread_polls;
    // Under a sanitizer a spawn costs several microseconds: fewer, so that
    // the spawning poll still ends well inside the watch (257 overflow).
    rt.block_on(spawn_and_join(volt::test::kSanitized ? 400 : 1000));
    if (rt.stats().blocked_thread_polls == before) ++rounds_without_help;
  }
  EXPECT_GE(rounds_without_help, 3);
}

}  // namespace
