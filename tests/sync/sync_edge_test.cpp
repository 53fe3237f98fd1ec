// Edge cases of the synchronisation primitives, judged against what
// tokio::sync promises (a second review): zero-permit acquires on a closed
// semaphore, permits returned past kMaxPermits, grants to cancelled
// acquires, Notify's permit and pass-on rules, Barrier rounds with withdrawn
// waiters, OnceCell initialisers that fail or are cancelled, token trees
// whose middle node is dropped, and a queued RwLock writer against new
// readers.
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/runtime_support.hpp"
#include "sync/withdraw_support.hpp"
#include "volt/sync/barrier.hpp"
#include "volt/sync/cancellation_token.hpp"
#include "volt/sync/notify.hpp"
#include "volt/sync/once_cell.hpp"
#include "volt/sync/rwlock.hpp"
#include "volt/sync/semaphore.hpp"
#include "volt/time/sleep.hpp"
#include "volt/time/timeout.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

// ---- Semaphore ----

Task<Expected<SemaphorePermit>> acquire_n(Semaphore* sem, std::uint64_t n) {
  co_return co_await sem->acquire(n);
}

// Tokio's acquire_many(0) on a closed semaphore is Err(Closed), as is
// try_acquire_many(0); here try_acquire(0) failed but acquire(0) and
// acquire_blocking(0) gave an empty permit (an `n == 0 ||` short-cut before
// try_take, which itself succeeds for 0 only while the semaphore is open).
TEST(SemaphoreEdge, ZeroPermitsFromAClosedSemaphoreFailAsEveryAcquireDoes) {
  Semaphore sem(2);
  sem.close();
  EXPECT_FALSE(sem.try_acquire(0));
  Expected<SemaphorePermit> blocking = sem.acquire_blocking(0);
  ASSERT_FALSE(blocking);
  EXPECT_EQ(blocking.error(), code(errc::closed));
  Runtime rt = Runtime::Builder::current_thread().build();
  Expected<SemaphorePermit> awaited = rt.block_on(acquire_n(&sem, 0));
  ASSERT_FALSE(awaited);
  EXPECT_EQ(awaited.error(), code(errc::closed));
  // Open: still an empty permit at once.
  Semaphore open(0);
  Expected<SemaphorePermit> zero = rt.block_on(acquire_n(&open, 0));
  ASSERT_TRUE(zero);
  EXPECT_EQ(zero->permits(), 0u);
}

// add_permits() refuses to take the count past kMaxPermits, but a permit
// handed out before the add came back unchecked: the count went past
// kMaxPermits, and a second round wrapped the 64-bit word, silently losing
// 2^60 permits. Tokio panics when a returned permit overflows MAX_PERMITS; a
// destructor cannot throw, so it is a terminating error naming the bound.
TEST(SemaphoreEdgeDeathTest, APermitReturnedPastKMaxPermitsIsAClearError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Semaphore sem(Semaphore::kMaxPermits);
        std::optional<SemaphorePermit> all = sem.try_acquire(Semaphore::kMaxPermits);
        sem.add_permits(Semaphore::kMaxPermits);  // accepted: the count was 0
        all.reset();                              // kMaxPermits more
      },
      "kMaxPermits");
  // Up to the bound it is fine.
  Semaphore sem(Semaphore::kMaxPermits);
  std::optional<SemaphorePermit> some = sem.try_acquire(5);
  ASSERT_TRUE(some);
  some.reset();
  EXPECT_EQ(sem.available_permits(), Semaphore::kMaxPermits);
}

// acquire_many larger than what is there: the partial grant goes back when
// close() fails the waiter, and with nothing queued the count is whole.
Task<std::error_code> wait_for_many(Semaphore* sem, std::uint64_t n) {
  Expected<SemaphorePermit> p = co_await sem->acquire(n);
  co_return p ? std::error_code() : p.error();
}

TEST(SemaphoreEdge, AcquireManyBeyondTheCountThenCloseGivesThePartialGrantBack) {
  Runtime rt = make_runtime(kMultiThread2);
  Semaphore sem(3);
  auto waiter = rt.spawn(wait_for_many(&sem, 5));
  ASSERT_TRUE(wait_until([&] { return sem.available_permits() == 0; }));
  sem.release(1);  // 4 of 5 granted
  sem.close();
  EXPECT_EQ(waiter.join(), code(errc::closed));
  EXPECT_EQ(sem.available_permits(), 4u);
}

// An acquire kept as an lvalue operand of a timeout that fired is granted in
// full afterwards and then dropped without being awaited again: the permits
// go to the next waiter, none is lost.
Task<void> granted_after_timeout_then_dropped(Semaphore* sem, std::atomic<bool>* second_got) {
  {
    auto acquire = sem->acquire(2);
    Expected<Expected<SemaphorePermit>> r = co_await volt::timeout(2ms, acquire);
    EXPECT_FALSE(r);
    auto second = volt::spawn([](Semaphore* s, std::atomic<bool>* got) -> Task<void> {
      Expected<SemaphorePermit> p = co_await s->acquire(2);
      got->store(p.has_value());
    }(sem, second_got));
    co_await volt::yield_now();
    sem->release(2);  // to the oldest: the interrupted acquire
    EXPECT_FALSE(second_got->load());
    // `acquire` goes out of scope granted, never awaited again.
    co_await volt::yield_now();
    EXPECT_FALSE(second_got->load());
    (void)second;  // dropping the handle detaches the task
  }
  EXPECT_TRUE(co_await yield_until([&] { return second_got->load(); }, kNotHung));
}

TEST(SemaphoreEdge, AGrantToADroppedInterruptedAcquireGoesToTheNextWaiter) {
  Runtime rt = Runtime::Builder::current_thread().build();
  Semaphore sem(0);
  std::atomic<bool> second_got{false};
  rt.block_on(granted_after_timeout_then_dropped(&sem, &second_got));
  EXPECT_TRUE(second_got.load());
  EXPECT_EQ(sem.available_permits(), 2u);
}

// ---- Notify ----

Task<void> notify_rules(Notify* n) {
  // One stored permit at most.
  n->notify_one();
  n->notify_one();
  co_await n->notified();
  {
    auto w = n->notified();
    EXPECT_FALSE(w.enable()) << "two notify_one() with nobody waiting stored two permits";
  }
  // notify_waiters() stores nothing.
  n->notify_waiters();
  {
    auto w = n->notified();
    EXPECT_FALSE(w.enable());
  }
  // A Notified created before notify_waiters() completes even unpolled.
  {
    auto w = n->notified();
    n->notify_waiters();
    EXPECT_TRUE(w.enable());
  }
  // enable() registers: a later notify_one() reaches it, not the permit.
  {
    auto w = n->notified();
    EXPECT_FALSE(w.enable());
    n->notify_one();
    auto other = n->notified();
    EXPECT_FALSE(other.enable()) << "the notify_one went to the permit, not the waiter";
    co_await w;
  }
  // Chosen by notify_one(), dropped before it returned: passed on to the next
  // waiter.
  {
    auto first = std::make_unique<Notify::Notified>(n->notified());
    auto second = n->notified();
    EXPECT_FALSE(first->enable());
    EXPECT_FALSE(second.enable());
    n->notify_one();  // first
    first.reset();
    EXPECT_TRUE(second.enable()) << "the notification was lost with the dropped Notified";
  }
  // ... or stored as the permit when nobody else waits.
  {
    auto only = std::make_unique<Notify::Notified>(n->notified());
    EXPECT_FALSE(only->enable());
    n->notify_one();
    only.reset();
    auto next = n->notified();
    EXPECT_TRUE(next.enable());
  }
}

TEST(NotifyEdge, PermitBroadcastEnableAndPassOnRules) {
  Runtime rt = Runtime::Builder::current_thread().build();
  Notify n;
  rt.block_on(notify_rules(&n));
}

// ---- Barrier ----

Task<bool> barrier_arrive(Barrier* b) {
  co_return (co_await b->wait()).is_leader();
}

Task<void> barrier_rounds(Barrier* b) {
  for (int round = 0; round < 3; ++round) {
    // A waiter that gives up withdraws its arrival: the generation still
    // needs three others.
    Expected<BarrierWaitResult> gave_up = co_await volt::timeout(2ms, b->wait());
    EXPECT_FALSE(gave_up);
    auto a = volt::spawn(barrier_arrive(b));
    auto c = volt::spawn(barrier_arrive(b));
    co_await volt::yield_now();
    EXPECT_FALSE(a.is_finished()) << "round " << round << ": released by a withdrawn arrival";
    const bool leader = co_await barrier_arrive(b);
    const int leaders = (co_await a ? 1 : 0) + (co_await c ? 1 : 0) + (leader ? 1 : 0);
    EXPECT_EQ(leaders, 1) << "round " << round;
  }
}

TEST(BarrierEdge, WithdrawnWaitersDoNotCountInAnyRound) {
  Runtime rt = Runtime::Builder::current_thread().build();
  Barrier b(3);
  rt.block_on(barrier_rounds(&b));
}

// ---- OnceCell ----

Task<int> slow_value(int v, std::atomic<int>* runs) {
  runs->fetch_add(1);
  co_await volt::sleep(20ms);
  co_return v;
}

Task<int> failing_value(std::atomic<int>* runs) {
  runs->fetch_add(1);
  co_await volt::sleep(5ms);
  throw std::runtime_error("init failed");
}

Task<int> get_or_init_with(OnceCell<int>* cell, std::atomic<int>* runs, int v) {
  auto f = [runs, v] { return slow_value(v, runs); };
  co_return co_await cell->get_or_init(f);
}

Task<void> once_cell_turns(OnceCell<int>* cell, std::atomic<int>* runs) {
  // The first initialiser fails; the waiting caller runs its own.
  auto f = [runs] { return failing_value(runs); };
  auto waiter = volt::spawn(get_or_init_with(cell, runs, 7));
  bool threw = false;
  try {
    (void)co_await cell->get_or_init(f);
  } catch (const std::runtime_error&) {
    threw = true;
  }
  EXPECT_TRUE(threw);
  EXPECT_EQ(co_await waiter, 7);
  EXPECT_EQ(runs->load(), 2);
}

Task<void> once_cell_cancelled(OnceCell<int>* cell, std::atomic<int>* runs) {
  auto waiter = volt::spawn(get_or_init_with(cell, runs, 9));
  // The first initialiser is cancelled by its timeout; the waiter runs its own.
  auto f = [runs] { return slow_value(1, runs); };
  auto first = co_await volt::timeout(5ms, cell->get_or_init(f));
  EXPECT_FALSE(first);
  EXPECT_EQ(co_await waiter, 9);
  EXPECT_EQ(*cell->get(), 9);
}

TEST(OnceCellEdge, AFailedOrCancelledInitialiserPassesTheTurnOn) {
  Runtime rt = Runtime::Builder::current_thread().build();
  {
    OnceCell<int> cell;
    std::atomic<int> runs{0};
    rt.block_on(once_cell_turns(&cell, &runs));
  }
  {
    OnceCell<int> cell;
    std::atomic<int> runs{0};
    rt.block_on(once_cell_cancelled(&cell, &runs));
    EXPECT_EQ(runs.load(), 2);
  }
}

// ---- CancellationToken ----

Task<void> wait_cancelled(CancellationToken t, std::atomic<int>* woken) {
  co_await t.cancelled();
  woken->fetch_add(1);
}

TEST(CancellationTokenEdge, DroppingTheMiddleTokenKeepsTheGrandchildAttached) {
  Runtime rt = make_runtime(kMultiThread2);
  CancellationToken root;
  std::optional<CancellationToken> middle = root.child_token();
  CancellationToken leaf = middle->child_token();
  std::atomic<int> woken{0};
  auto h = rt.spawn(wait_cancelled(leaf, &woken));
  ASSERT_TRUE(wait_until([&] { return detail::inspect(leaf).waiters == 1; }));
  middle.reset();
  EXPECT_FALSE(leaf.is_cancelled());
  root.cancel();
  EXPECT_TRUE(leaf.is_cancelled());
  h.join();
  EXPECT_EQ(woken.load(), 1);
  // A child of a cancelled token is born cancelled.
  EXPECT_TRUE(leaf.child_token().is_cancelled());
}

// ---- RwLock ----

Task<void> write_then_flag(RwLock<int>* lock, std::atomic<bool>* wrote) {
  auto w = co_await lock->write();
  *w = 1;
  wrote->store(true);
}

Task<int> read_value(RwLock<int>* lock) {
  auto r = co_await lock->read();
  co_return *r;
}

// A queued writer keeps new readers out while readers hold the lock
// (writer preference), and runs before a reader that came after it.
TEST(RwLockEdge, AQueuedWriterBlocksNewReaders) {
  Runtime rt = make_runtime(kMultiThread2);
  RwLock<int> lock(0);
  std::optional<RwLockReadGuard<int>> held = lock.try_read();
  ASSERT_TRUE(held);
  std::atomic<bool> wrote{false};
  auto writer = rt.spawn(write_then_flag(&lock, &wrote));
  ASSERT_TRUE(wait_until([&] { return lock.try_read() == std::nullopt; }));
  EXPECT_FALSE(lock.try_write());
  auto reader = rt.spawn(read_value(&lock));
  std::this_thread::sleep_for(5ms);
  EXPECT_FALSE(reader.is_finished());
  held.reset();
  EXPECT_EQ(reader.join(), 1) << "the later reader got in before the queued writer";
  writer.join();
  EXPECT_TRUE(lock.try_write());
}

}  // namespace
}  // namespace volt::test
