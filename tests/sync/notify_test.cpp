// Tests of volt::Notify (include/volt/sync/notify.hpp, src/sync/notify.cpp):
// the stored permit (at most one), FIFO/LIFO wake order, notify_waiters
// (current waiters and Notifieds created before the call, no permit stored),
// cancellation passing a notification on, Notified inside a timeout, the
// blocking form, no allocation while waiting, and lost-wake-up stresses on the
// multi-thread runtime (run under TSan in CI).
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/runtime_support.hpp"
#include "volt/sync/notify.hpp"
#include "volt/time/sleep.hpp"
#include "volt/time/timeout.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

class NotifyTest : public ::testing::TestWithParam<Flavour> {};
INSTANTIATE_TEST_SUITE_P(Flavours, NotifyTest,
                         ::testing::Values(kMultiThread1, kMultiThread2, kCurrentThread),
                         FlavourName());

// ---- the permit, driven by enable() (no runtime needed) ----

TEST(NotifyPermit, NotifyOneWithNobodyWaitingStoresAPermitTheNextNotifiedTakes) {
  Notify notify;
  notify.notify_one();
  Notify::Notified first = notify.notified();
  EXPECT_TRUE(first.enable()) << "the stored permit was not consumed";
  EXPECT_TRUE(first.enable()) << "a completed Notified stays complete";
  Notify::Notified second = notify.notified();
  EXPECT_FALSE(second.enable()) << "the permit was consumed twice";
}

TEST(NotifyPermit, AtMostOnePermitIsStored) {
  Notify notify;
  notify.notify_one();
  notify.notify_one();
  notify.notify_last();
  Notify::Notified a = notify.notified();
  Notify::Notified b = notify.notified();
  EXPECT_TRUE(a.enable());
  EXPECT_FALSE(b.enable()) << "a second permit was stored";
}

TEST(NotifyPermit, EnableRegistersSoALaterNotifyOneReachesIt) {
  Notify notify;
  Notify::Notified waiting = notify.notified();
  EXPECT_FALSE(waiting.enable());
  notify.notify_one();  // goes to the registered waiter, not to the permit
  EXPECT_TRUE(waiting.enable());
  Notify::Notified later = notify.notified();
  EXPECT_FALSE(later.enable()) << "the notification was stored instead of delivered";
}

// ---- order ----

TEST(NotifyOrder, NotifyOneWakesTheOldestWaiterFirst) {
  Notify notify;
  std::array<std::optional<Notify::Notified>, 4> waiters;
  for (auto& w : waiters) {
    w.emplace(notify.notified());
    EXPECT_FALSE(w->enable());
  }
  for (std::size_t i = 0; i < waiters.size(); ++i) {
    notify.notify_one();
    for (std::size_t j = 0; j < waiters.size(); ++j)
      EXPECT_EQ(waiters[j]->enable(), j <= i) << "after " << i + 1 << " notify_one, waiter " << j;
  }
}

TEST(NotifyOrder, NotifyLastWakesTheNewestWaiterFirst) {
  Notify notify;
  std::array<std::optional<Notify::Notified>, 4> waiters;
  for (auto& w : waiters) {
    w.emplace(notify.notified());
    EXPECT_FALSE(w->enable());
  }
  for (std::size_t i = 0; i < waiters.size(); ++i) {
    notify.notify_last();
    for (std::size_t j = 0; j < waiters.size(); ++j)
      EXPECT_EQ(waiters[j]->enable(), j >= waiters.size() - 1 - i)
          << "after " << i + 1 << " notify_last, waiter " << j;
  }
}

Task<void> wait_and_record(Notify* notify, int id, std::vector<int>* order,
                           std::atomic<int>* registered) {
  Notify::Notified n = notify->notified();
  EXPECT_FALSE(n.enable());
  registered->fetch_add(1);
  co_await n;
  order->push_back(id);  // one thread at a time: current-thread runtime
}

Task<std::vector<int>> fifo_scenario(Notify* notify) {
  std::vector<int> order;
  std::atomic<int> registered{0};
  std::vector<JoinHandle<void>> hs;
  for (int i = 0; i < 5; ++i) {
    hs.push_back(volt::spawn(wait_and_record(notify, i, &order, &registered)));
    while (registered.load() != i + 1)  // registered before the next arrives
      co_await volt::yield_now();
  }
  for (int i = 0; i < 5; ++i) {
    notify->notify_one();
    const std::size_t want = static_cast<std::size_t>(i) + 1;
    while (order.size() != want)
      co_await volt::yield_now();
  }
  for (auto& h : hs)
    co_await h;
  co_return order;
}

TEST(NotifyOrder, AwaitingTasksAreWokenInArrivalOrder) {
  Runtime rt = Runtime::Builder::current_thread().build();
  Notify notify;
  EXPECT_EQ(rt.block_on(fifo_scenario(&notify)), (std::vector<int>{0, 1, 2, 3, 4}));
  Notify::Notified after = notify.notified();
  EXPECT_FALSE(after.enable()) << "a permit was left over";
}

// ---- notify_waiters ----

TEST(NotifyWaiters, WakesEveryRegisteredWaiterAndStoresNoPermit) {
  Notify notify;
  std::array<std::optional<Notify::Notified>, 40> waiters;  // > one wake batch (32)
  for (auto& w : waiters) {
    w.emplace(notify.notified());
    EXPECT_FALSE(w->enable());
  }
  notify.notify_waiters();
  for (auto& w : waiters)
    EXPECT_TRUE(w->enable());
  Notify::Notified later = notify.notified();
  EXPECT_FALSE(later.enable()) << "notify_waiters stored a permit";
  notify.notify_one();
  EXPECT_TRUE(later.enable()) << "the waiter list is inconsistent after notify_waiters";
}

TEST(NotifyWaiters, ANotifiedCreatedBeforeTheCallCompletesEvenIfNotYetPolled) {
  Notify notify;
  Notify::Notified before = notify.notified();  // not enabled, not awaited
  notify.notify_waiters();
  Notify::Notified after = notify.notified();
  EXPECT_TRUE(before.enable());
  EXPECT_FALSE(after.enable()) << "a Notified created after notify_waiters was completed by it";
}

TEST(NotifyWaiters, LeavesAStoredPermitForTheNextNotified) {
  Notify notify;
  Notify::Notified before = notify.notified();
  notify.notify_one();  // nobody registered: the permit
  notify.notify_waiters();
  // `before` is covered by the broadcast and must not eat the permit.
  EXPECT_TRUE(before.enable());
  Notify::Notified after = notify.notified();
  EXPECT_TRUE(after.enable()) << "the stored permit was lost to a broadcast";
}

Task<void> await_notified(Notify* notify, std::atomic<int>* registered, std::atomic<int>* woke) {
  Notify::Notified n = notify->notified();
  n.enable();
  registered->fetch_add(1);
  co_await n;
  woke->fetch_add(1);
}

TEST_P(NotifyTest, NotifyWaitersWakesAllWaitingTasks) {
  Runtime rt = make_runtime(GetParam());
  Notify notify;
  std::atomic<int> registered{0};
  std::atomic<int> woke{0};
  std::vector<JoinHandle<void>> hs;
  for (int i = 0; i < 50; ++i)
    hs.push_back(rt.spawn(await_notified(&notify, &registered, &woke)));
  if (GetParam().current_thread) {
    rt.block_on([](std::atomic<int>* r) -> Task<void> {
      while (r->load() != 50)
        co_await volt::yield_now();
    }(&registered));
  }
  ASSERT_TRUE(wait_until([&] { return registered.load() == 50; }));
  EXPECT_EQ(woke.load(), 0);
  notify.notify_waiters();
  for (auto& h : hs)
    h.join();
  EXPECT_EQ(woke.load(), 50);
}

Task<int> created_before_broadcast(Notify* notify, std::atomic<bool>* created) {
  Notify::Notified n = notify->notified();
  created->store(true);
  co_await volt::sleep(20ms);  // the broadcast happens meanwhile
  co_await n;                  // must not wait
  co_return 1;
}

TEST_P(NotifyTest, AnAwaitedNotifiedCreatedBeforeNotifyWaitersCompletes) {
  Runtime rt = make_runtime(GetParam());
  Notify notify;
  std::atomic<bool> created{false};
  auto h = rt.spawn(created_before_broadcast(&notify, &created));
  if (GetParam().current_thread) {
    rt.block_on([](std::atomic<bool>* c) -> Task<void> {
      while (!c->load())
        co_await volt::yield_now();
    }(&created));
  }
  ASSERT_TRUE(wait_until([&] { return created.load(); }));
  notify.notify_waiters();
  EXPECT_EQ(h.join(), 1);
}

// ---- cancellation passes the notification on ----

TEST(NotifyCancel, ADestroyedNotifiedThatWasWokenPassesItToTheNextWaiter) {
  Notify notify;
  std::optional<Notify::Notified> first(notify.notified());
  Notify::Notified second = notify.notified();
  EXPECT_FALSE(first->enable());
  EXPECT_FALSE(second.enable());
  notify.notify_one();  // chooses `first`
  first.reset();        // destroyed before it saw the notification
  EXPECT_TRUE(second.enable()) << "the notification died with the cancelled waiter";
  Notify::Notified third = notify.notified();
  EXPECT_FALSE(third.enable()) << "the notification was duplicated";
}

TEST(NotifyCancel, ADestroyedNotifiedThatWasWokenWithNobodyBehindStoresThePermit) {
  Notify notify;
  std::optional<Notify::Notified> only(notify.notified());
  EXPECT_FALSE(only->enable());
  notify.notify_last();
  only.reset();
  Notify::Notified next = notify.notified();
  EXPECT_TRUE(next.enable()) << "the notification was not stored as the permit";
}

TEST(NotifyCancel, NothingIsPassedOnForConsumedOrBroadcastOrUnwokenWaiters) {
  Notify notify;
  {
    Notify::Notified consumed = notify.notified();
    EXPECT_FALSE(consumed.enable());
    notify.notify_one();
    EXPECT_TRUE(consumed.enable());  // seen: consumed
  }
  {
    Notify::Notified broadcast = notify.notified();
    EXPECT_FALSE(broadcast.enable());
    notify.notify_waiters();
  }  // completed by the broadcast, never seen: nothing to pass on
  {
    Notify::Notified unwoken = notify.notified();
    EXPECT_FALSE(unwoken.enable());
  }  // withdrawn
  Notify::Notified probe = notify.notified();
  EXPECT_FALSE(probe.enable()) << "a permit appeared from a waiter that had nothing to pass on";
  notify.notify_one();
  EXPECT_TRUE(probe.enable()) << "a withdrawn waiter stayed in the list";
}

Task<void> wait_registered(Notify* notify, std::atomic<int>* registered, std::atomic<int>* woke) {
  Notify::Notified n = notify->notified();
  EXPECT_FALSE(n.enable());
  registered->fetch_add(1);
  co_await n;
  woke->fetch_add(1);
}

TEST(NotifyCancel, AnAbortedTaskThatWasWokenPassesTheNotificationOn) {
  Runtime rt = Runtime::Builder::current_thread().build();
  Notify notify;
  std::atomic<int> registered{0};
  std::atomic<int> woke{0};
  auto drive_until = [&](int n) {
    rt.block_on([](std::atomic<int>* r, int want) -> Task<void> {
      while (r->load() != want)
        co_await volt::yield_now();
    }(&registered, n));
  };
  auto first = rt.spawn(wait_registered(&notify, &registered, &woke));
  drive_until(1);
  auto second = rt.spawn(wait_registered(&notify, &registered, &woke));
  drive_until(2);
  // Nothing runs tasks now (current-thread, not driven): `first` is woken but
  // aborted before it runs, so its Notified is destroyed unseen.
  notify.notify_one();
  first.abort();
  EXPECT_EQ(volt_error_of([&] { first.join(); }), code(errc::cancelled));
  second.join();  // hangs (watchdog) if the notification was lost
  EXPECT_EQ(woke.load(), 1);
}

Task<int> wait_with_timeout(Notify* notify, std::chrono::milliseconds d) {
  Expected<void> r = co_await volt::timeout(d, notify->notified());
  co_return r ? 1 : 0;
}

Task<void> notify_later(Notify* notify) {
  co_await volt::sleep(10ms);
  notify->notify_one();
}

TEST_P(NotifyTest, NotifiedWorksInsideATimeout) {
  Runtime rt = make_runtime(GetParam());
  Notify notify;
  // Times out: the withdrawn waiter must not swallow a later notification.
  EXPECT_EQ(rt.block_on(wait_with_timeout(&notify, 10ms)), 0);
  notify.notify_one();
  Notify::Notified probe = notify.notified();
  EXPECT_TRUE(probe.enable()) << "a timed-out waiter took the notification";
  // Completes: notified before the deadline.
  auto notifier = rt.spawn(notify_later(&notify));
  EXPECT_EQ(rt.block_on(wait_with_timeout(&notify, std::chrono::milliseconds(kNotHung))), 1);
  notifier.join();
  // Ready at once: the permit.
  notify.notify_one();
  EXPECT_EQ(rt.block_on(wait_with_timeout(&notify, 0ms)), 1);
}

Task<int> enable_then_await(Notify* notify, std::atomic<bool>* enabled) {
  Notify::Notified n = notify->notified();
  const bool ready = n.enable();
  enabled->store(true);
  co_await volt::sleep(5ms);
  co_await n;
  co_return ready ? 0 : 1;
}

TEST_P(NotifyTest, AnEnabledNotifiedIsReachedByNotifyOneAndThenAwaited) {
  Runtime rt = make_runtime(GetParam());
  Notify notify;
  std::atomic<bool> enabled{false};
  auto h = rt.spawn(enable_then_await(&notify, &enabled));
  if (GetParam().current_thread) {
    rt.block_on([](std::atomic<bool>* e) -> Task<void> {
      while (!e->load())
        co_await volt::yield_now();
    }(&enabled));
  }
  ASSERT_TRUE(wait_until([&] { return enabled.load(); }));
  notify.notify_one();  // to the registered (not yet awaiting) Notified
  EXPECT_EQ(h.join(), 1);
  Notify::Notified probe = notify.notified();
  EXPECT_FALSE(probe.enable()) << "the notification was also stored";
}

// ---- blocking form ----

TEST(NotifyBlocking, PlainThreadsWaitAndRuntimeThreadsAreRefused) {
  Notify notify;
  notify.notify_one();
  notify.notified_blocking();  // the permit: returns at once
  std::atomic<bool> woke{false};
  std::thread t([&] {
    notify.notified_blocking();
    woke.store(true);
  });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(woke.load());
  notify.notify_one();
  t.join();
  EXPECT_TRUE(woke.load());

  Runtime rt = Runtime::Builder().worker_threads(1).build();
  auto h = rt.spawn([](Notify* n) -> Task<std::error_code> {
    co_return volt_error_of([&] { n->notified_blocking(); });
  }(&notify));
  EXPECT_EQ(h.join(), code(errc::blocking_in_runtime));
}

// ---- allocation ----

Task<void> ping_server(Notify* ping, Notify* pong, int rounds) {
  for (int i = 0; i < rounds; ++i) {
    co_await ping->notified();
    pong->notify_one();
  }
}

Task<void> ping_client(Notify* ping, Notify* pong, int rounds) {
  for (int i = 0; i < rounds; ++i) {
    ping->notify_one();
    co_await pong->notified();
  }
}

Task<std::uint64_t> pingpong_allocations(Notify* ping, Notify* pong) {
  auto round = [&]() -> Task<void> {
    std::array<JoinHandle<void>, 2> hs;
    hs[0] = volt::spawn(ping_server(ping, pong, 1000));
    hs[1] = volt::spawn(ping_client(ping, pong, 1000));
    for (auto& h : hs)
      co_await h;
  };
  co_await round();  // warm-up: frame pools and task cells
  const std::uint64_t before = heap_allocations();
  co_await round();
  co_return heap_allocations() - before;
}

TEST(NotifyAllocation, WaitingOnNotifiedDoesNotAllocate) {
  if (kFramePoolDisabled) GTEST_SKIP() << "frame pool disabled (ASan)";
  Runtime rt = Runtime::Builder().worker_threads(1).build();
  Notify ping;
  Notify pong;
  EXPECT_EQ(rt.block_on(pingpong_allocations(&ping, &pong)), 0u);
}

// ---- the cooperative budget ----

// A Notified whose task's budget is spent must not take the permit before it
// yields: if it is destroyed during that yield (a timeout of zero, a select
// that another operand wins), the permit would be consumed and never
// returned. The loop crosses the budget limit many times; after each round
// the permit is stored iff the timed Notified did not complete.
Task<int> permits_across_budget(int rounds) {
  Notify n;
  int wrong = 0;
  for (int i = 0; i < rounds; ++i) {
    n.notify_one();
    Expected<void> r = co_await timeout(0ms, n.notified());
    Notify::Notified probe = n.notified();
    const bool stored = probe.enable();  // takes the permit if it is there
    if (!r && !stored) ++wrong;          // timed out, yet the permit is gone
    if (r && stored) ++wrong;            // completed, yet the permit is still there
  }
  co_return wrong;
}

TEST(NotifyBudget, ATimedOutNotifiedNeverTakesThePermitWithIt) {
  Runtime rt = Runtime::Builder::current_thread().build();
  EXPECT_EQ(rt.block_on(permits_across_budget(5000)), 0);
}

// ---- lost-wake-up stresses (multi-thread) ----

class NotifyStress : public ::testing::TestWithParam<Flavour> {};
INSTANTIATE_TEST_SUITE_P(Workers, NotifyStress, ::testing::Values(kMultiThread2, kMultiThread4),
                         FlavourName());

TEST_P(NotifyStress, PingPongNeverLosesAWakeUp) {
  Runtime rt = make_runtime(GetParam());
  Notify ping;
  Notify pong;
  const int rounds = static_cast<int>(scale(50'000));
  // Several independent pairs, so workers steal and wake across threads.
  std::array<Notify, 6> more;
  std::vector<JoinHandle<void>> hs;
  hs.push_back(rt.spawn(ping_server(&ping, &pong, rounds)));
  hs.push_back(rt.spawn(ping_client(&ping, &pong, rounds)));
  for (std::size_t p = 0; p < more.size(); p += 2) {
    hs.push_back(rt.spawn(ping_server(&more[p], &more[p + 1], rounds)));
    hs.push_back(rt.spawn(ping_client(&more[p], &more[p + 1], rounds)));
  }
  for (auto& h : hs)
    h.join();  // the per-test watchdog turns a lost wake-up into a failure
  // Each ping was consumed exactly once: no permit is left behind.
  Notify::Notified a = ping.notified();
  Notify::Notified b = pong.notified();
  EXPECT_FALSE(a.enable());
  EXPECT_FALSE(b.enable());
}

Task<void> produce(Notify* notify, std::atomic<std::uint64_t>* pending, int items) {
  for (int i = 0; i < items; ++i) {
    // release: the consumer's exchange (acquire) that sees the item.
    pending->fetch_add(1, std::memory_order_release);
    notify->notify_one();
    if (i % 4 == 0) co_await volt::yield_now();
  }
}

Task<std::uint64_t> consume(Notify* notify, std::atomic<std::uint64_t>* pending,
                            std::uint64_t total) {
  std::uint64_t taken = 0;
  for (;;) {
    taken += pending->exchange(0, std::memory_order_acquire);
    if (taken >= total) break;
    // Check-then-wait is safe only because a notify_one between the check
    // and the wait is stored as the permit.
    co_await notify->notified();
  }
  co_return taken;
}

TEST_P(NotifyStress, ProducersNotifyingOneConsumerNeverStrandIt) {
  Runtime rt = make_runtime(GetParam());
  Notify notify;
  std::atomic<std::uint64_t> pending{0};
  constexpr int kProducers = 4;
  const int items = static_cast<int>(scale(50'000));
  const std::uint64_t total = static_cast<std::uint64_t>(kProducers) * items;
  auto consumer = rt.spawn(consume(&notify, &pending, total));
  std::vector<JoinHandle<void>> producers;
  for (int p = 0; p < kProducers; ++p)
    producers.push_back(rt.spawn(produce(&notify, &pending, items)));
  for (auto& h : producers)
    h.join();
  EXPECT_EQ(consumer.join(), total);
}

// The ping waiter retries with random very short timeouts (0 = one try) and
// the client notifies after a random short spin, so waiters are often
// cancelled around the moment notify_one chooses them. A notification that
// died with a cancelled waiter would strand the round (a hang); one
// duplicated would leave a permit behind at the end.
void spin_for(std::chrono::nanoseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

Task<void> cancelling_server(Notify* ping, Notify* pong, int rounds, std::uint64_t seed,
                             std::atomic<std::uint64_t>* timeouts) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < rounds; ++i) {
    for (;;) {
      Expected<void> r =
          co_await volt::timeout(std::chrono::nanoseconds(rng() % 3000), ping->notified());
      if (r) break;
      timeouts->fetch_add(1, std::memory_order_relaxed);
    }
    pong->notify_one();
  }
}

Task<void> jittery_client(Notify* ping, Notify* pong, int rounds, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < rounds; ++i) {
    spin_for(std::chrono::nanoseconds(rng() % 3000));
    ping->notify_one();
    co_await pong->notified();
  }
}

TEST_P(NotifyStress, WaitersCancelledAroundTheirWakeUpPassItOn) {
  Runtime rt = make_runtime(GetParam());
  Notify ping;
  Notify pong;
  std::atomic<std::uint64_t> timeouts{0};
  const int rounds = static_cast<int>(scale(20'000));
  auto server = rt.spawn(cancelling_server(&ping, &pong, rounds, 42, &timeouts));
  auto client = rt.spawn(jittery_client(&ping, &pong, rounds, 43));
  server.join();
  client.join();
  EXPECT_GT(timeouts.load(), 0u) << "no wait was cancelled: the test exercised nothing";
  Notify::Notified a = ping.notified();
  Notify::Notified b = pong.notified();
  EXPECT_FALSE(a.enable()) << "a ping was duplicated";
  EXPECT_FALSE(b.enable()) << "a pong was duplicated";
}

// Each round a fresh task registers on `ping`; the main thread sends a ping
// (unless one is still outstanding, so permits never merge) and often aborts
// the task right after, typically after notify_one chose it and before it
// ran. A chosen-then-aborted waiter must pass the ping on: it becomes the
// permit and the next round's task takes it at once. A lost ping leaves a
// later task waiting forever (a hang); a duplicated one fails the final
// count.
Task<int> one_shot_waiter(Notify* ping, std::atomic<bool>* registered) {
  Notify::Notified n = ping->notified();
  n.enable();
  registered->store(true, std::memory_order_release);
  co_await n;
  co_return 1;
}

TEST_P(NotifyStress, AbortedWaitersChosenByNotifyOnePassItOn) {
  Runtime rt = make_runtime(GetParam());
  Notify ping;
  std::mt19937_64 rng(99);
  const int rounds = static_cast<int>(scale(20'000));
  bool outstanding = false;  // a ping was sent and not yet received by a task
  int completed = 0;
  int cancelled = 0;
  for (int i = 0; i < rounds; ++i) {
    std::atomic<bool> registered{false};
    auto h = rt.spawn(one_shot_waiter(&ping, &registered));
    while (!registered.load(std::memory_order_acquire))
      std::this_thread::yield();
    if (!outstanding) {
      ping.notify_one();
      outstanding = true;
    }
    if (rng() % 2 == 0) {
      if (rng() % 2 == 0) spin_for(std::chrono::nanoseconds(rng() % 2000));
      h.abort();
    }
    const std::error_code ec = volt_error_of([&] { h.join(); });
    if (!ec) {
      outstanding = false;
      ++completed;
    } else {
      ASSERT_EQ(ec, code(errc::cancelled));
      ++cancelled;
    }
  }
  Notify::Notified probe = ping.notified();
  EXPECT_EQ(probe.enable(), outstanding) << "a ping was lost or duplicated";
  EXPECT_GT(completed, 0);
  EXPECT_GT(cancelled, 0);
}

// Broadcasts racing registration, re-registration and interrupted waits.
// In round i every waiter creates one Notified and announces it; once all
// have, the broadcaster calls notify_waiters() exactly once. Every Notified of
// the round was created before that call, so every one must complete: a
// waiter that missed it never announces round i + 1 and the broadcaster
// waits for it forever (a hang, caught by the watchdog). Waiters randomly
// enable() early, or wait in short timeouts re-awaiting the same Notified
// (withdrawn from the wait, still registered), and notify_one() noise lets
// some complete early through the permit.
constexpr int kRoundWaiters = 8;
using RoundCounters = std::array<std::atomic<int>, kRoundWaiters>;

Task<void> round_waiter(Notify* notify, std::atomic<int>* created, int rounds, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < rounds; ++i) {
    Notify::Notified n = notify->notified();
    created->fetch_add(1);
    if (rng() % 2 == 0 && n.enable()) continue;
    if (rng() % 4 == 0) {
      // An lvalue operand: a timed-out wait leaves `n` registered.
      while (!co_await volt::timeout(std::chrono::microseconds(rng() % 50), n)) {
      }
    } else {
      co_await n;
    }
  }
}

Task<void> round_broadcaster(Notify* notify, RoundCounters* created, int rounds) {
  for (int i = 0; i < rounds; ++i) {
    // Every waiter's round-i Notified exists (a waiter may be ahead, having
    // taken permits, never behind).
    for (auto& c : *created)
      while (c.load() < i + 1)
        co_await volt::yield_now();
    notify->notify_waiters();
    if (i % 3 == 0) notify->notify_one();
  }
}

TEST_P(NotifyStress, EveryNotifiedCreatedBeforeABroadcastCompletes) {
  Runtime rt = make_runtime(GetParam());
  Notify notify;
  RoundCounters created{};
  const int rounds = static_cast<int>(scale(5'000));
  std::vector<JoinHandle<void>> hs;
  for (int w = 0; w < kRoundWaiters; ++w)
    hs.push_back(rt.spawn(round_waiter(&notify, &created[w], rounds, 7 + w)));
  hs.push_back(rt.spawn(round_broadcaster(&notify, &created, rounds)));
  for (auto& h : hs)
    h.join();
  for (auto& c : created)
    EXPECT_EQ(c.load(), rounds);
}

}  // namespace
}  // namespace volt::test
