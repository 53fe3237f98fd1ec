// Tests of volt::Semaphore (include/volt/sync/semaphore.hpp,
// src/sync/semaphore.cpp): the permit count, FIFO service with partial
// grants, cancellation giving grants back, close, the blocking form, bad
// input, and a contended stress with random aborts (run under TSan in CI).
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <optional>
#include <random>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/runtime_support.hpp"
#include "volt/sync/barrier.hpp"
#include "volt/sync/cancellation_token.hpp"
#include "volt/sync/mutex.hpp"
#include "volt/sync/notify.hpp"
#include "volt/sync/once_cell.hpp"
#include "volt/sync/rwlock.hpp"
#include "volt/sync/semaphore.hpp"
#include "volt/time/sleep.hpp"
#include "volt/time/timeout.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

class SemaphoreTest : public ::testing::TestWithParam<Flavour> {};
INSTANTIATE_TEST_SUITE_P(Flavours, SemaphoreTest,
                         ::testing::Values(kMultiThread1, kMultiThread2, kCurrentThread),
                         FlavourName());

TEST(SemaphoreBasics, TryAcquireCountsPermits) {
  Semaphore sem(3);
  EXPECT_EQ(sem.available_permits(), 3u);
  auto a = sem.try_acquire(2);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->permits(), 2u);
  EXPECT_EQ(sem.available_permits(), 1u);
  EXPECT_FALSE(sem.try_acquire(2));
  auto b = sem.try_acquire();
  ASSERT_TRUE(b);
  EXPECT_EQ(sem.available_permits(), 0u);
  a.reset();  // the permit guard gives its 2 back
  EXPECT_EQ(sem.available_permits(), 2u);
  b->forget();  // this one is kept for good
  b.reset();
  EXPECT_EQ(sem.available_permits(), 2u);
  sem.add_permits(5);
  EXPECT_EQ(sem.available_permits(), 7u);
}

TEST(SemaphoreBasics, BadInputIsRefusedAndChangesNothing) {
  EXPECT_EQ(volt_error_of([] { Semaphore s(Semaphore::kMaxPermits + 1); }),
            code(errc::invalid_argument));
  Semaphore sem(Semaphore::kMaxPermits - 1);
  EXPECT_EQ(volt_error_of([&] { sem.release(2); }), code(errc::invalid_argument));
  EXPECT_EQ(sem.available_permits(), Semaphore::kMaxPermits - 1);
  sem.release(1);
  EXPECT_EQ(sem.available_permits(), Semaphore::kMaxPermits);
  EXPECT_EQ(volt_error_of([&] { (void)sem.try_acquire(Semaphore::kMaxPermits + 1); }),
            code(errc::invalid_argument));
  EXPECT_EQ(volt_error_of([&] { (void)sem.acquire_blocking(Semaphore::kMaxPermits + 1); }),
            code(errc::invalid_argument));
  // acquire(0) succeeds at once with an empty permit.
  auto zero = sem.acquire_blocking(0);
  ASSERT_TRUE(zero);
  EXPECT_EQ(zero->permits(), 0u);
}

Task<std::error_code> acquire_too_many(Semaphore* sem) {
  try {
    Expected<SemaphorePermit> p = co_await sem->acquire(Semaphore::kMaxPermits + 1);
    (void)p;
  } catch (const Error& e) {
    co_return e.code();
  }
  co_return std::error_code();
}

TEST_P(SemaphoreTest, AcquiringMoreThanTheMaximumFailsAtOnce) {
  Runtime rt = make_runtime(GetParam());
  Semaphore sem(1);
  EXPECT_EQ(rt.block_on(acquire_too_many(&sem)), code(errc::invalid_argument));
}

// ---- FIFO with partial grants ----

Task<void> take_and_record(Semaphore* sem, std::uint64_t n, int id, std::vector<int>* order,
                           std::atomic<int>* queued) {
  auto acquire = sem->acquire(n);
  queued->fetch_add(1);
  Expected<SemaphorePermit> p = co_await acquire;
  order->push_back(id);  // one thread at a time: current-thread runtime
  p->forget();
}

Task<std::vector<int>> fifo_scenario(Semaphore* sem) {
  std::vector<int> order;
  std::atomic<int> queued{0};
  // Needs: 2, 1, 3, 1 arriving in that order, with no permits.
  std::vector<JoinHandle<void>> hs;
  const std::uint64_t needs[] = {2, 1, 3, 1};
  for (int i = 0; i < 4; ++i) {
    hs.push_back(volt::spawn(take_and_record(sem, needs[i], i, &order, &queued)));
    co_await volt::yield_now();  // let it queue before the next one arrives
    co_await volt::yield_now();
  }
  // One permit at a time: the first waiter (needs 2) is served partially
  // first; the 1-permit waiter behind it must not overtake it.
  for (int i = 0; i < 7; ++i) {
    sem->release(1);
    co_await volt::yield_now();
    co_await volt::yield_now();
  }
  for (auto& h : hs)
    co_await h;
  co_return order;
}

TEST(SemaphoreFifo, WaitersAreServedInArrivalOrderWithPartialGrants) {
  Runtime rt = Runtime::Builder::current_thread().build();
  Semaphore sem(0);
  std::vector<int> order = rt.block_on(fifo_scenario(&sem));
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(sem.available_permits(), 0u);
}

// ---- an interrupted wait keeps its place ----

Task<std::vector<int>> lvalue_acquire_keeps_its_place(Semaphore* sem) {
  std::vector<int> order;
  std::atomic<int> queued{0};
  auto acquire = sem->acquire(1);
  Expected<Expected<SemaphorePermit>> first = co_await volt::timeout(5ms, acquire);
  EXPECT_FALSE(first) << "no permit was released yet";
  // A later waiter queues behind the interrupted one.
  auto later = volt::spawn(take_and_record(sem, 1, 2, &order, &queued));
  co_await volt::yield_now();
  sem->release(1);  // goes to the oldest waiter: the interrupted acquire
  Expected<SemaphorePermit> permit = co_await acquire;
  EXPECT_TRUE(permit);
  order.push_back(1);
  permit->forget();
  sem->release(1);
  co_await later;
  co_return order;
}

TEST(SemaphoreInterrupted, AnLvalueAcquireKeepsItsPlaceAcrossATimeout) {
  Runtime rt = Runtime::Builder::current_thread().build();
  Semaphore sem(0);
  EXPECT_EQ(rt.block_on(lvalue_acquire_keeps_its_place(&sem)), (std::vector<int>{1, 2}));
  EXPECT_EQ(sem.available_permits(), 0u);
}

// ---- the cooperative budget ----

// More acquisitions than one poll's budget (128): the loop must yield at
// some point, and it must yield holding no permit, or every task that runs
// meanwhile finds the semaphore empty and queues (the convoy the
// semaphore_contended benchmark fell into).
Task<void> acquire_past_the_budget(Semaphore* sem, int rounds) {
  for (int i = 0; i < rounds; ++i) {
    Expected<SemaphorePermit> p = co_await sem->acquire(1);
    EXPECT_TRUE(p);
  }
}

Task<bool> try_while_the_other_yields(Semaphore* sem) {
  co_return sem->try_acquire(1).has_value();
}

TEST(SemaphoreBudget, AYieldForTheBudgetHoldsNoPermit) {
  Runtime rt = Runtime::Builder::current_thread().build();
  Semaphore sem(1);
  // One thread: `looper` runs until its budget is spent and yields; `prober`
  // runs in that gap.
  auto looper = rt.spawn(acquire_past_the_budget(&sem, 1000));
  auto prober = rt.spawn(try_while_the_other_yields(&sem));
  looper.join();
  EXPECT_TRUE(prober.join()) << "the permit was held across the budget yield";
  EXPECT_EQ(sem.available_permits(), 1u);
}

Task<void> hold_across_yields(Semaphore* sem, std::atomic<bool>* held) {
  std::optional<SemaphorePermit> p = sem->try_acquire(1);
  held->store(p.has_value());
  for (int i = 0; i < 5; ++i)
    co_await volt::yield_now();
}

TEST(SemaphoreBudget, TheFirstAttemptAfterABudgetYieldQueuesWhenItMustWait) {
  Runtime rt = Runtime::Builder::current_thread().build();
  Semaphore sem(1);
  std::atomic<bool> held{false};
  // `holder` takes the permit while `looper` is yielding for its budget, so
  // the attempt made when `looper` is polled again must queue, and the
  // holder's release must wake it.
  auto looper = rt.spawn(acquire_past_the_budget(&sem, 1000));
  auto holder = rt.spawn(hold_across_yields(&sem, &held));
  looper.join();
  holder.join();
  EXPECT_TRUE(held.load());
  EXPECT_EQ(sem.available_permits(), 1u);
}

// ---- cancellation gives grants back ----

Task<int> partial_then_timeout(Semaphore* sem) {
  // Needs 3; gets 2 from the releases below, then times out.
  Expected<Expected<SemaphorePermit>> r = co_await volt::timeout(30ms, sem->acquire(3));
  co_return r ? 1 : 0;
}

Task<void> release_twice(Semaphore* sem) {
  co_await volt::sleep(5ms);
  sem->release(1);
  sem->release(1);
}

TEST_P(SemaphoreTest, CancelledWaiterGivesItsPartialGrantBack) {
  Runtime rt = make_runtime(GetParam());
  Semaphore sem(0);
  auto releaser = rt.spawn(release_twice(&sem));
  EXPECT_EQ(rt.block_on(partial_then_timeout(&sem)), 0);
  releaser.join();
  EXPECT_EQ(sem.available_permits(), 2u)
      << "the 2 permits granted to the cancelled waiter were lost";
}

Task<void> hold_forever(Semaphore* sem, std::atomic<int>* got) {
  Expected<SemaphorePermit> p = co_await sem->acquire(2);
  got->fetch_add(1);
  co_await volt::sleep(std::chrono::hours(1));
}

TEST_P(SemaphoreTest, AbortedWaiterDoesNotBlockTheQueue) {
  Runtime rt = make_runtime(GetParam());
  Semaphore sem(0);
  std::atomic<int> got{0};
  auto first = rt.spawn(hold_forever(&sem, &got));  // will be aborted while waiting
  ASSERT_TRUE(wait_until([&] { return rt.stats().live_tasks == 1; }));
  std::this_thread::sleep_for(10ms);
  sem.release(1);  // a partial grant to `first`
  first.abort();
  EXPECT_EQ(volt_error_of([&] { first.join(); }), code(errc::cancelled));
  EXPECT_EQ(sem.available_permits(), 1u);
  auto p = sem.acquire_blocking(1);
  ASSERT_TRUE(p);
  EXPECT_EQ(got.load(), 0);
}

// ---- close ----

Task<std::error_code> wait_then_report(Semaphore* sem) {
  Expected<SemaphorePermit> p = co_await sem->acquire(2);
  co_return p ? std::error_code() : p.error();
}

TEST_P(SemaphoreTest, CloseFailsWaitersAndLaterAcquires) {
  Runtime rt = make_runtime(GetParam());
  Semaphore sem(1);
  auto waiter = rt.spawn(wait_then_report(&sem));
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(waiter.is_finished());
  sem.close();
  EXPECT_EQ(waiter.join(), code(errc::closed));
  EXPECT_TRUE(sem.is_closed());
  EXPECT_FALSE(sem.try_acquire());
  Expected<SemaphorePermit> later = sem.acquire_blocking(1);
  ASSERT_FALSE(later);
  EXPECT_EQ(later.error(), code(errc::closed));
  EXPECT_EQ(sem.available_permits(), 1u) << "the waiter's partial grant must go back";
}

// ---- blocking form ----

TEST(SemaphoreBlocking, PlainThreadsWaitAndRuntimeThreadsAreRefused) {
  Semaphore sem(0);
  std::atomic<bool> got{false};
  std::thread t([&] {
    auto p = sem.acquire_blocking(2);
    got.store(p.has_value());
  });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(got.load());
  sem.release(1);
  std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(got.load());
  sem.release(1);
  t.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(sem.available_permits(), 2u);  // the permit went back when dropped

  Runtime rt = Runtime::Builder().worker_threads(1).build();
  auto h = rt.spawn([](Semaphore* s) -> Task<std::error_code> {
    std::error_code ec = volt_error_of([&] { (void)s->acquire_blocking(1); });
    co_return ec;
  }(&sem));
  EXPECT_EQ(h.join(), code(errc::blocking_in_runtime));
}

// ---- contended stress with random aborts ----

// n more permits held; records the most held at once.
void enter_holders(std::atomic<int>* inside, std::atomic<int>* max_inside, std::uint64_t n) {
  const int now = inside->fetch_add(static_cast<int>(n)) + static_cast<int>(n);
  int seen = max_inside->load();
  while (now > seen && !max_inside->compare_exchange_weak(seen, now)) {
  }
}

Task<void> churn(Semaphore* sem, int ops, std::uint64_t seed, std::atomic<int>* inside,
                 std::atomic<int>* max_inside, std::atomic<std::uint64_t>* done) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < ops; ++i) {
    const std::uint64_t n = 1 + rng() % 2;
    if (rng() % 8 == 0) {
      // A wait that is cancelled at random (timeout of 0..1 ms).
      Expected<Expected<SemaphorePermit>> r =
          co_await volt::timeout(std::chrono::microseconds(rng() % 1000), sem->acquire(n));
      if (r && *r) {
        enter_holders(inside, max_inside, n);
        inside->fetch_sub(static_cast<int>(n));
      }
    } else {
      Expected<SemaphorePermit> p = co_await sem->acquire(n);
      enter_holders(inside, max_inside, n);
      if (rng() % 4 == 0) co_await volt::yield_now();
      inside->fetch_sub(static_cast<int>(n));
    }
  }
  done->fetch_add(1);
}

TEST_P(SemaphoreTest, ContendedAcquireReleaseWithRandomCancellationKeepsTheCount) {
  Runtime rt = make_runtime(GetParam());
  Semaphore sem(2);
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};
  std::atomic<std::uint64_t> done{0};
  const int ops = 100'000;  // the figure, under the sanitizers too
  std::vector<JoinHandle<void>> hs;
  for (int t = 0; t < 8; ++t)
    hs.push_back(rt.spawn(churn(&sem, ops, 1234 + t, &inside, &max_inside, &done)));
  for (auto& h : hs)
    h.join();
  EXPECT_EQ(done.load(), 8u);
  EXPECT_EQ(sem.available_permits(), 2u) << "a permit was lost or duplicated";
  EXPECT_LE(max_inside.load(), 2) << "more permits held at once than exist";
}

// Waits for n permits, then holds them across a few suspensions: aborted
// while it queues (with or without a partial grant), or while it holds.
Task<void> victim(Semaphore* sem, std::uint64_t n, std::atomic<int>* inside,
                  std::atomic<int>* max_inside) {
  Expected<SemaphorePermit> p = co_await sem->acquire(n);
  enter_holders(inside, max_inside, n);
  inside->fetch_sub(static_cast<int>(n));
  co_await volt::yield_now();
  co_await volt::yield_now();
}

Task<std::uint64_t> abort_victims(Semaphore* sem, int rounds, std::uint64_t seed,
                                  std::atomic<int>* inside, std::atomic<int>* max_inside) {
  std::mt19937_64 rng(seed);
  std::uint64_t cancelled = 0;
  for (int i = 0; i < rounds; ++i) {
    JoinHandle<void> h = volt::spawn(victim(sem, 1 + rng() % 2, inside, max_inside));
    for (std::uint64_t k = rng() % 4; k > 0; --k)
      co_await volt::yield_now();
    h.abort();
    try {
      co_await h;
    } catch (const Error& e) {
      if (e.code() == code(errc::cancelled)) ++cancelled;
    }
  }
  co_return cancelled;
}

// 8 tasks churn on a semaphore of 2 (acquire 1 or 2, some waits cancelled
// by a timeout) while another task spawns and aborts waiters at random.
void churn_with_aborts(Flavour flavour, Semaphore::Fairness fairness, std::uint64_t seed,
                       std::uint64_t abort_seed) {
  Runtime rt = make_runtime(flavour);
  Semaphore sem(2, fairness);
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};
  std::atomic<std::uint64_t> done{0};
  const int ops = 100'000;  // the figure, under the sanitizers too
  std::vector<JoinHandle<void>> hs;
  for (int t = 0; t < 8; ++t)
    hs.push_back(rt.spawn(churn(&sem, ops, seed + t, &inside, &max_inside, &done)));
  auto killer = rt.spawn(
      abort_victims(&sem, static_cast<int>(scale(20'000)), abort_seed, &inside, &max_inside));
  for (auto& h : hs)
    h.join();
  EXPECT_GT(killer.join(), 0u) << "no victim was aborted: the test exercised nothing";
  EXPECT_EQ(done.load(), 8u);
  EXPECT_EQ(sem.available_permits(), 2u) << "a permit was lost or duplicated";
  EXPECT_LE(max_inside.load(), 2) << "more permits held at once than exist";
}

TEST_P(SemaphoreTest, WaitersAbortedAtRandomAmidContentionKeepTheCount) {
  churn_with_aborts(GetParam(), Semaphore::Fairness::kFifo, 99, 7);
}

// ---- barging mode (Fairness::kBarging: Mutex and RwLock) ----

// Queues for one permit, then records that it got it.
Task<void> wait_one(Semaphore* sem, std::atomic<int>* queued, std::atomic<int>* got) {
  auto acquire = sem->acquire(1);
  queued->fetch_add(1);
  Expected<SemaphorePermit> p = co_await acquire;
  EXPECT_TRUE(p);
  got->fetch_add(1);
}

// On the current-thread runtime: whether a running try_acquire can take a
// permit released while a waiter queues, and whether that waiter then gets
// the next one.
Task<std::pair<bool, int>> take_after_release(Semaphore* sem) {
  std::optional<SemaphorePermit> held = sem->try_acquire(1);
  EXPECT_TRUE(held);
  std::atomic<int> queued{0}, got{0};
  JoinHandle<void> waiter = volt::spawn(wait_one(sem, &queued, &got));
  co_await volt::yield_now();  // it queues (the permit is held)
  EXPECT_EQ(queued.load(), 1);
  held.reset();  // released while it waits; it has not run since
  std::optional<SemaphorePermit> barged = sem->try_acquire(1);
  const bool took = barged.has_value();
  barged.reset();
  co_await waiter;
  co_return std::make_pair(took, got.load());
}

TEST(SemaphoreBarging, ARunningAcquireTakesAPermitReleasedWhileAWaiterQueues) {
  Runtime rt = make_runtime(kCurrentThread);
  Semaphore barging(1, Semaphore::Fairness::kBarging);
  EXPECT_EQ(rt.block_on(take_after_release(&barging)), std::make_pair(true, 1));
  EXPECT_EQ(barging.available_permits(), 1u);
  // kFifo (the default): the release went to the waiter, so nothing to take.
  Semaphore fifo(1);
  EXPECT_EQ(rt.block_on(take_after_release(&fifo)), std::make_pair(false, 1));
  EXPECT_EQ(fifo.available_permits(), 1u);
}

// A running task takes every permit released while `waiter` queues, letting
// it retry (and fail) in between, until the semaphore turns strict: then
// the release goes to the waiter and try_acquire fails. Returns how many
// times the running task got in first.
Task<std::uint32_t> pass_over_until_strict(Semaphore* sem, std::atomic<int>* got) {
  std::optional<SemaphorePermit> held = sem->try_acquire(1);
  EXPECT_TRUE(held);
  std::atomic<int> queued{0};
  JoinHandle<void> waiter = volt::spawn(wait_one(sem, &queued, got));
  co_await volt::yield_now();
  std::uint32_t passed = 0;
  for (int round = 0; round < 10; ++round) {
    held.reset();  // wakes the waiter to retry
    held = sem->try_acquire(1);
    if (!held) break;  // strict: the release was handed to the waiter
    ++passed;
    co_await volt::yield_now();  // its retry finds nothing and queues again
    EXPECT_EQ(got->load(), 0);
  }
  co_await waiter;
  co_return passed;
}

TEST(SemaphoreBarging, AWaiterPassedOverKStrictAfterTimesIsServedNext) {
  Runtime rt = make_runtime(kCurrentThread);
  Semaphore sem(1, Semaphore::Fairness::kBarging);
  std::atomic<int> got{0};
  EXPECT_EQ(rt.block_on(pass_over_until_strict(&sem, &got)), Semaphore::kStrictAfter);
  EXPECT_EQ(got.load(), 1);
  EXPECT_EQ(sem.available_permits(), 1u);
  // Relaxed again once it was served: a release with a waiter queued can be
  // taken by a running acquire.
  EXPECT_EQ(rt.block_on(take_after_release(&sem)), std::make_pair(true, 1));
}

// Two waiters queue; a release wakes the first, which is aborted before it
// retries: its wake-up must pass to the second.
Task<int> abort_the_woken(Semaphore* sem) {
  std::optional<SemaphorePermit> held = sem->try_acquire(1);
  EXPECT_TRUE(held);
  std::atomic<int> queued{0}, got{0};
  JoinHandle<void> first = volt::spawn(wait_one(sem, &queued, &got));
  co_await volt::yield_now();
  JoinHandle<void> second = volt::spawn(wait_one(sem, &queued, &got));
  co_await volt::yield_now();
  EXPECT_EQ(queued.load(), 2);
  held.reset();  // wakes `first` to retry
  first.abort();
  try {
    co_await first;
    ADD_FAILURE() << "the aborted waiter completed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code(errc::cancelled));
  }
  co_await second;  // hangs (kNotHung) if the wake-up died with `first`
  co_return got.load();
}

TEST(SemaphoreBarging, AnAbortedWokenWaiterPassesItsWakeUpOn) {
  Runtime rt = make_runtime(kCurrentThread);
  Semaphore sem(1, Semaphore::Fairness::kBarging);
  EXPECT_EQ(rt.block_on(abort_the_woken(&sem)), 1);
  EXPECT_EQ(sem.available_permits(), 1u);
}

// A waiter for 2 holds a partial grant of 1 and is woken to retry; close()
// comes before the retry: it must fail with closed and give its permit back.
Task<std::error_code> woken_then_closed(Semaphore* sem) {
  std::optional<SemaphorePermit> held = sem->try_acquire(1);  // of 2
  EXPECT_TRUE(held);
  JoinHandle<std::error_code> waiter = volt::spawn(wait_then_report(sem));  // drains 1, queues
  co_await volt::yield_now();
  EXPECT_EQ(sem->available_permits(), 0u);
  held.reset();  // wakes it to retry
  sem->close();
  co_return co_await waiter;
}

TEST(SemaphoreBarging, CloseReachesAWaiterWokenToRetry) {
  Runtime rt = make_runtime(kCurrentThread);
  Semaphore sem(2, Semaphore::Fairness::kBarging);
  EXPECT_EQ(rt.block_on(woken_then_closed(&sem)), code(errc::closed));
  EXPECT_EQ(sem.available_permits(), 2u) << "the partial grant or the release was lost";
}

Task<void> take_many(Semaphore* sem, std::uint64_t n, int rounds, std::atomic<int>* inside,
                     std::atomic<int>* max_inside) {
  for (int i = 0; i < rounds; ++i) {
    Expected<SemaphorePermit> p = co_await sem->acquire(n);
    EXPECT_TRUE(p);
    enter_holders(inside, max_inside, n);
    if (i % 4 == 0) co_await volt::yield_now();
    inside->fetch_sub(static_cast<int>(n));
  }
}

TEST_P(SemaphoreTest, BargingOnePermitAcquirersDoNotStarveAManyPermitOne) {
  Runtime rt = make_runtime(GetParam());
  Semaphore sem(4, Semaphore::Fairness::kBarging);
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};
  std::vector<JoinHandle<void>> hs;
  for (int t = 0; t < 4; ++t)
    hs.push_back(rt.spawn(take_many(&sem, 1, 20'000, &inside, &max_inside)));
  // All four permits at once, while the others keep taking one at a time:
  // it finishes (within kNotHung) only if a waiter cannot be passed over
  // for ever.
  JoinHandle<void> big = rt.spawn(take_many(&sem, 4, 500, &inside, &max_inside));
  big.join();
  for (auto& h : hs)
    h.join();
  EXPECT_EQ(sem.available_permits(), 4u);
  EXPECT_LE(max_inside.load(), 4) << "more permits held at once than exist";
}

TEST_P(SemaphoreTest, BargingWaitersAbortedAtRandomAmidContentionKeepTheCount) {
  churn_with_aborts(GetParam(), Semaphore::Fairness::kBarging, 4321, 11);
}

TEST(SemaphoreBarging, PlainThreadsContendWithTasks) {
  Semaphore sem(2, Semaphore::Fairness::kBarging);
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};
  Runtime rt = make_runtime(kMultiThread2);
  std::vector<JoinHandle<void>> hs;
  for (int t = 0; t < 4; ++t)
    hs.push_back(rt.spawn(take_many(&sem, 1 + t % 2, 5'000, &inside, &max_inside)));
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5'000; ++i) {
        const std::uint64_t n = 1 + (i + t) % 2;
        Expected<SemaphorePermit> p = sem.acquire_blocking(n);
        ASSERT_TRUE(p);
        enter_holders(&inside, &max_inside, n);
        inside.fetch_sub(static_cast<int>(n));
      }
    });
  for (auto& th : threads)
    th.join();
  for (auto& h : hs)
    h.join();
  EXPECT_EQ(sem.available_permits(), 2u);
  EXPECT_LE(max_inside.load(), 2);
}

// ---- allocation ----

// Holds n permits across a yield now and then, so that the others queue,
// some of them partially granted (n == 2 on a semaphore of 3).
Task<void> hold_and_yield(Semaphore* sem, std::uint64_t n, int rounds) {
  for (int i = 0; i < rounds; ++i) {
    Expected<SemaphorePermit> p = co_await sem->acquire(n);
    if (i % 4 == 0) co_await volt::yield_now();
  }
}

Task<std::uint64_t> contended_allocations(Semaphore* sem) {
  auto round = [&]() -> Task<void> {
    std::array<JoinHandle<void>, 8> hs;
    for (std::size_t t = 0; t < hs.size(); ++t)
      hs[t] = volt::spawn(hold_and_yield(sem, 1 + t % 2, 200));
    for (auto& h : hs)
      co_await h;
  };
  co_await round();  // warm-up: frame pools and task cells
  const std::uint64_t before = heap_allocations();
  co_await round();
  co_return heap_allocations() - before;
}

TEST(SemaphoreAllocation, ContendedWaitingWithPartialGrantsDoesNotAllocate) {
  if (kFramePoolDisabled) GTEST_SKIP() << "frame pool disabled (ASan)";
  Runtime rt = Runtime::Builder().worker_threads(1).build();
  Semaphore sem(3);
  EXPECT_EQ(rt.block_on(contended_allocations(&sem)), 0u);
  EXPECT_EQ(sem.available_permits(), 3u);
}

// ---- Tokio's paths: volt::sync::{Semaphore, SemaphorePermit, Mutex, RwLock,
// Notify, Barrier, BarrierWaitResult, OnceCell, CancellationToken} ----

static_assert(std::is_same_v<sync::Semaphore, Semaphore>);
static_assert(std::is_same_v<sync::SemaphorePermit, SemaphorePermit>);
static_assert(std::is_same_v<sync::Mutex<int>, Mutex<int>>);
static_assert(std::is_same_v<sync::RwLock<int>, RwLock<int>>);
static_assert(std::is_same_v<sync::Notify, Notify>);
static_assert(std::is_same_v<sync::Barrier, Barrier>);
static_assert(std::is_same_v<sync::BarrierWaitResult, BarrierWaitResult>);
static_assert(std::is_same_v<sync::OnceCell<int>, OnceCell<int>>);
static_assert(std::is_same_v<sync::CancellationToken, CancellationToken>);

Task<int> use_sync_by_tokio_paths(sync::Semaphore* sem, sync::Mutex<int>* mutex,
                                  sync::Notify* notify) {
  Expected<sync::SemaphorePermit> permit = co_await sem->acquire();
  EXPECT_TRUE(permit);
  auto guard = co_await mutex->lock();
  *guard += 1;
  notify->notify_one();  // stores a permit: the wait below completes at once
  co_await notify->notified();
  sync::Barrier barrier(1);
  sync::BarrierWaitResult r = co_await barrier.wait();
  EXPECT_TRUE(r.is_leader());
  co_return *guard;
}

TEST(SyncTokioPaths, TheSyncNamesAreTheTopLevelTypes) {
  Runtime rt = make_runtime(kCurrentThread);
  sync::Semaphore sem(1);
  sync::Mutex<int> mutex(41);
  sync::Notify notify;
  EXPECT_EQ(rt.block_on(use_sync_by_tokio_paths(&sem, &mutex, &notify)), 42);
  EXPECT_EQ(sem.available_permits(), 1u);
  sync::RwLock<int> lock(1);
  EXPECT_TRUE(lock.try_read());
  sync::OnceCell<int> cell;
  EXPECT_TRUE(cell.set(3));
  sync::CancellationToken token;
  token.cancel();
  EXPECT_TRUE(token.is_cancelled());
}

}  // namespace
}  // namespace volt::test
