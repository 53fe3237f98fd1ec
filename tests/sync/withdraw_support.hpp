// tests/sync/withdraw_support.hpp: checks that a waiting operation withdraws
// its waker when it is destroyed (an aborted task, a timeout that fired).
//
// A waker holds a reference on its task's cell (and the cell one on its
// scheduler). A waiting operation destroyed without withdrawing leaves its
// waker in the primitive, keeping the dead task's cell alive and waking it
// later. The check: spawn a task that waits, abort it once it is suspended,
// wait until it finished, and look at the cell through the JoinHandle (not
// joined yet, so it keeps the cell):
// its frame (and a Tracked probe in it) must be gone, and the handle's must
// be the only reference left. The same after a wake-up (a send, a notify)
// that would have reached a waker left behind.
#pragma once

#include <atomic>
#include <chrono>

#include <gtest/gtest.h>

#include "test_support.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/error.hpp"
#include "volt/task/join_handle.hpp"
#include "volt/task/task.hpp"
#include "volt/task/yield_now.hpp"

namespace volt::test {

struct WaitProbe {
  std::atomic<volt::detail::TaskHeader*> task{nullptr};
  std::atomic<bool> waiting{false};
  LifeCounters counters;
};

// The waiting task calls this first, and sets `waiting` just before its wait.
// Out of line: called from coroutine bodies, and GCC 12 may keep a
// thread_local's address across a suspension when the access is inlined
// there (UBSan then sees a null ThreadContext in the next inlined
// suspend_current, after the task resumed on another thread).
[[gnu::noinline]] inline void record_current_task(WaitProbe& probe) {
  probe.task.store(volt::detail::tls_context.current_task, std::memory_order_release);
}

inline std::uint64_t cell_references(const WaitProbe& probe) {
  return probe.task.load(std::memory_order_acquire)->state.load().ref_count();
}

// Yields until `done()` or the deadline; returns done().
template <class Pred>
Task<bool> yield_until(Pred done, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < deadline)
    co_await yield_now();
  co_return done();
}

// Spawns `waiter`, aborts it once it is suspended in its wait, joins it and
// checks that the wait withdrew; then runs `wake()` and checks again.
template <class Wake>
Task<void> abort_waiter_and_check(Task<void> waiter, WaitProbe& probe, Wake wake) {
  using namespace std::chrono_literals;
  JoinHandle<void> handle = spawn(std::move(waiter));
  // Suspended in the wait: `waiting` set, and the task neither running nor
  // notified.
  EXPECT_TRUE(co_await yield_until(
      [&] {
        return probe.waiting.load(std::memory_order_acquire) &&
               probe.task.load(std::memory_order_acquire)->state.load().is_idle();
      },
      10s));
  handle.abort();
  // Not joined yet: the handle keeps the cell (joining takes the result and
  // lets the cell go).
  EXPECT_TRUE(co_await yield_until([&] { return handle.is_finished(); }, 10s));
  EXPECT_EQ(probe.counters.live(), 0) << "the aborted task's frame was destroyed";
  // The poll that cancelled it drops its reference just after completing.
  EXPECT_TRUE(co_await yield_until([&] { return cell_references(probe) == 1; }, 2s))
      << "references left on the aborted task's cell: " << cell_references(probe)
      << " (the handle's, and one per waker left behind by its wait)";
  wake();
  for (int i = 0; i < 10; ++i)
    co_await yield_now();
  EXPECT_EQ(cell_references(probe), 1u) << "a later wake-up reached the aborted task";
  bool cancelled = false;
  try {
    co_await handle;
  } catch (const Error& e) {
    cancelled = e.code() == errc::cancelled;
  }
  EXPECT_TRUE(cancelled);
}

}  // namespace volt::test
