// Every waiting synchronisation operation withdraws its waker when it is
// destroyed (an aborted task): the dead task's cell keeps no reference from
// the primitive, and a later release / notify / cancel does not reach it
// (withdraw_support.hpp has the check). On both runtime flavours.
#include <atomic>
#include <optional>
#include <utility>

#include <gtest/gtest.h>

#include "sync/withdraw_support.hpp"
#include "test_support.hpp"
#include "volt/sync/barrier.hpp"
#include "volt/sync/cancellation_token.hpp"
#include "volt/sync/mutex.hpp"
#include "volt/sync/notify.hpp"
#include "volt/sync/once_cell.hpp"
#include "volt/sync/rwlock.hpp"
#include "volt/sync/semaphore.hpp"

namespace volt {
namespace {

using test::RuntimeKind;
using test::Tracked;
using test::WaitProbe;

class SyncWithdrawTest : public ::testing::TestWithParam<RuntimeKind> {
 protected:
  Runtime rt_ = test::build_runtime(GetParam());
};

INSTANTIATE_TEST_SUITE_P(Runtimes, SyncWithdrawTest,
                         ::testing::Values(RuntimeKind::kMultiThread, RuntimeKind::kCurrentThread),
                         [](const auto& info) {
                           return info.param == RuntimeKind::kMultiThread ? "MultiThread"
                                                                          : "CurrentThread";
                         });

// Records the task, then awaits `op` (a pointer to a primitive; `wait` makes
// the operation).
template <class P, class Wait>
Task<void> wait_on(WaitProbe* probe, P* primitive, Wait wait) {
  test::record_current_task(*probe);
  Tracked in_frame(probe->counters, 1);
  probe->waiting.store(true, std::memory_order_release);
  (void)co_await wait(*primitive);
}

Task<void> abort_notified() {
  WaitProbe probe;
  Notify notify;
  co_await test::abort_waiter_and_check(
      wait_on(&probe, &notify, [](Notify& n) { return n.notified(); }), probe,
      [&] { notify.notify_one(); });
  // The permit notify_one stored (nobody waited) is still there.
  co_await notify.notified();
}

TEST_P(SyncWithdrawTest, NotifiedAbortedWaitWithdrawsItsWaker) {
  rt_.block_on(abort_notified());
}

Task<void> abort_acquire() {
  WaitProbe probe;
  Semaphore semaphore(0);
  co_await test::abort_waiter_and_check(
      wait_on(&probe, &semaphore, [](Semaphore& s) { return s.acquire(2); }), probe,
      [&] { semaphore.release(2); });
  EXPECT_EQ(semaphore.available_permits(), 2u) << "the aborted acquire took nothing";
}

TEST_P(SyncWithdrawTest, SemaphoreAbortedAcquireWithdrawsItsWaker) {
  rt_.block_on(abort_acquire());
}

Task<void> abort_lock() {
  WaitProbe probe;
  Mutex<int> mutex(0);
  std::optional<Mutex<int>::Guard> held = mutex.try_lock();
  EXPECT_TRUE(held.has_value());
  co_await test::abort_waiter_and_check(
      wait_on(&probe, &mutex, [](Mutex<int>& m) { return m.lock(); }), probe,
      [&] { held.reset(); });
  EXPECT_TRUE(mutex.try_lock().has_value());
}

TEST_P(SyncWithdrawTest, MutexAbortedLockWithdrawsItsWaker) {
  rt_.block_on(abort_lock());
}

Task<void> abort_read_and_write() {
  {
    WaitProbe probe;
    RwLock<int> lock(0);
    std::optional<RwLock<int>::WriteGuard> writer = lock.try_write();
    EXPECT_TRUE(writer.has_value());
    co_await test::abort_waiter_and_check(
        wait_on(&probe, &lock, [](RwLock<int>& l) { return l.read(); }), probe,
        [&] { writer.reset(); });
    EXPECT_TRUE(lock.try_write().has_value());
  }
  WaitProbe probe;
  RwLock<int> lock(0);
  std::optional<RwLock<int>::ReadGuard> reader = lock.try_read();
  EXPECT_TRUE(reader.has_value());
  co_await test::abort_waiter_and_check(
      wait_on(&probe, &lock, [](RwLock<int>& l) { return l.write(); }), probe,
      [&] { reader.reset(); });
  EXPECT_TRUE(lock.try_write().has_value());
}

TEST_P(SyncWithdrawTest, RwLockAbortedReadAndWriteWithdrawTheirWakers) {
  rt_.block_on(abort_read_and_write());
}

Task<void> abort_barrier_wait() {
  WaitProbe probe;
  Barrier barrier(2);
  co_await test::abort_waiter_and_check(
      wait_on(&probe, &barrier, [](Barrier& b) { return b.wait(); }), probe, [] {});
}

TEST_P(SyncWithdrawTest, BarrierAbortedWaitWithdrawsItsWaker) {
  rt_.block_on(abort_barrier_wait());
}

Task<int> init_after(Notify* gate, std::atomic<bool>* started) {
  started->store(true, std::memory_order_release);
  co_await gate->notified();
  co_return 11;
}

Task<void> initialise(OnceCell<int>* cell, Notify* gate, std::atomic<bool>* started) {
  (void)co_await cell->get_or_init([gate, started] { return init_after(gate, started); });
}

Task<int> twelve() {
  co_return 12;
}

Task<void> abort_get_or_init() {
  WaitProbe probe;
  OnceCell<int> cell;
  Notify gate;
  // Another task holds the turn to initialise until `gate` is notified.
  std::atomic<bool> started{false};
  JoinHandle<void> initialiser = spawn(initialise(&cell, &gate, &started));
  while (!started.load(std::memory_order_acquire))
    co_await yield_now();
  co_await test::abort_waiter_and_check(
      wait_on(&probe, &cell,
              [](OnceCell<int>& c) { return c.get_or_init([] { return twelve(); }); }),
      probe, [&] { gate.notify_one(); });
  co_await initialiser;
  EXPECT_EQ(*cell.get(), 11);
}

TEST_P(SyncWithdrawTest, OnceCellAbortedGetOrInitWithdrawsItsWaker) {
  rt_.block_on(abort_get_or_init());
}

Task<void> abort_cancelled() {
  WaitProbe probe;
  CancellationToken token;
  co_await test::abort_waiter_and_check(
      wait_on(&probe, &token, [](CancellationToken& t) { return t.cancelled(); }), probe,
      [&] { token.cancel(); });
  co_await token.cancelled();
}

TEST_P(SyncWithdrawTest, CancellationTokenAbortedWaitWithdrawsItsWaker) {
  rt_.block_on(abort_cancelled());
}

}  // namespace
}  // namespace volt
