// A thread blocked in block_on / join helps run queued work when every worker
// is busy (seed: blockOnComplete), and only then.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

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

}  // namespace
