// Tests of the watch channel (include/volt/channel/watch.hpp): versions and
// has_changed, borrow vs borrow_and_update, coalescing sends, send with and
// without receivers, send_modify (also when it throws), send_replace,
// clones and subscribe, mark_changed/unchanged, moved-from handles, changed()
// waking on a send and on the sender's drop, many waiters, timeouts and
// re-awaiting, no allocation, and the "never misses the last value" stress
// (run under TSan in CI).
#include "volt/channel/watch.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/runtime_support.hpp"
#include "volt/task/yield_now.hpp"
#include "volt/time/sleep.hpp"
#include "volt/time/timeout.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

// ---- values and versions, without a runtime ----

TEST(WatchValue, StartsWithTheInitialValueSeen) {
  auto [tx, rx] = watch::channel<std::string>("initial");
  EXPECT_EQ(*rx.borrow(), "initial");
  EXPECT_EQ(*tx.borrow(), "initial");
  EXPECT_EQ(rx.borrow()->size(), 7u);
  Expected<bool> changed = rx.has_changed();
  ASSERT_TRUE(changed);
  EXPECT_FALSE(*changed);
}

TEST(WatchValue, SendMarksChangedAndOnlyBorrowAndUpdateClearsIt) {
  auto [tx, rx] = watch::channel<int>(0);
  ASSERT_TRUE(tx.send(5));
  EXPECT_TRUE(*rx.has_changed());
  EXPECT_EQ(*rx.borrow(), 5);
  EXPECT_TRUE(*rx.has_changed()) << "borrow() marked the version seen";
  EXPECT_EQ(*rx.borrow_and_update(), 5);
  EXPECT_FALSE(*rx.has_changed());
}

TEST(WatchValue, ManySendsCoalesceIntoTheLast) {
  auto [tx, rx] = watch::channel<int>(0);
  for (int i = 1; i <= 100; ++i)
    ASSERT_TRUE(tx.send(int{i}));
  EXPECT_TRUE(*rx.has_changed());
  EXPECT_EQ(*rx.borrow_and_update(), 100);
  EXPECT_FALSE(*rx.has_changed());
}

TEST(WatchValue, SendWithNoReceiverFailsAndHandsTheValueBack) {
  auto [tx, rx] = watch::channel<std::string>("a");
  EXPECT_EQ(tx.receiver_count(), 1u);
  EXPECT_FALSE(tx.is_closed());
  { watch::Receiver<std::string> gone = std::move(rx); }
  EXPECT_EQ(tx.receiver_count(), 0u);
  EXPECT_TRUE(tx.is_closed());
  SendResult<std::string> r = tx.send("b");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), code(errc::closed));
  EXPECT_EQ(r.take_back(), "b");
  EXPECT_EQ(*tx.borrow(), "a") << "a failed send changed the value";
  // send_modify and send_replace change it all the same.
  tx.send_modify([](std::string& s) { s += "c"; });
  EXPECT_EQ(*tx.borrow(), "ac");
  EXPECT_EQ(tx.send_replace("d"), "ac");
  EXPECT_EQ(*tx.borrow(), "d");
  // A new subscriber has seen the current value; later sends reach it.
  watch::Receiver<std::string> late = tx.subscribe();
  EXPECT_EQ(tx.receiver_count(), 1u);
  EXPECT_FALSE(*late.has_changed());
  ASSERT_TRUE(tx.send("e"));
  EXPECT_TRUE(*late.has_changed());
  EXPECT_EQ(*late.borrow_and_update(), "e");
}

TEST(WatchValue, SendModifyChangesInPlaceAndPublishesEvenIfItThrows) {
  auto [tx, rx] = watch::channel<std::vector<int>>({1, 2});
  tx.send_modify([](std::vector<int>& v) { v.push_back(3); });
  EXPECT_TRUE(*rx.has_changed());
  EXPECT_EQ(*rx.borrow_and_update(), (std::vector<int>{1, 2, 3}));
  EXPECT_THROW(tx.send_modify([](std::vector<int>& v) {
    v.push_back(4);
    throw std::runtime_error("half done");
  }),
               std::runtime_error);
  EXPECT_TRUE(*rx.has_changed()) << "a throwing modification was not published";
  EXPECT_EQ(*rx.borrow_and_update(), (std::vector<int>{1, 2, 3, 4}));
  // The write lock was released: a send still goes through.
  ASSERT_TRUE(tx.send({9}));
  EXPECT_EQ(*rx.borrow_and_update(), std::vector<int>{9});
}

TEST(WatchValue, ClonesKeepTheirOwnSeenVersion) {
  auto [tx, rx] = watch::channel<int>(0);
  ASSERT_TRUE(tx.send(1));
  watch::Receiver<int> unseen = rx;  // copies "version 1 unseen"
  EXPECT_EQ(*rx.borrow_and_update(), 1);
  EXPECT_FALSE(*rx.has_changed());
  EXPECT_TRUE(*unseen.has_changed()) << "the copy shares the original's seen version";
  watch::Receiver<int> seen = rx;  // copies "version 1 seen"
  EXPECT_FALSE(*seen.has_changed());
  EXPECT_EQ(tx.receiver_count(), 3u);
  seen = unseen;  // assignment copies the seen version too
  EXPECT_TRUE(*seen.has_changed());
  EXPECT_EQ(tx.receiver_count(), 3u);
}

TEST(WatchValue, MarkChangedAndMarkUnchanged) {
  auto [tx, rx] = watch::channel<int>(0);
  rx.mark_changed();
  EXPECT_TRUE(*rx.has_changed());
  rx.mark_unchanged();
  EXPECT_FALSE(*rx.has_changed());
  ASSERT_TRUE(tx.send(1));
  rx.mark_unchanged();
  EXPECT_FALSE(*rx.has_changed());
  EXPECT_EQ(*rx.borrow(), 1);
}

TEST(WatchValue, SenderGoneMakesHasChangedClosed) {
  auto [tx, rx] = watch::channel<int>(0);
  ASSERT_TRUE(tx.send(3));
  { watch::Sender<int> gone = std::move(tx); }
  EXPECT_EQ(rx.has_changed().error(), code(errc::closed));
  // The last value stays readable.
  EXPECT_EQ(*rx.borrow_and_update(), 3);
}

TEST(WatchValue, MovedFromAndDefaultHandlesBehaveAsClosed) {
  auto tx_rx_pair =
      watch::channel<int>(1);  // not a structured binding: lambdas capture these (clang 14)
  auto& tx = tx_rx_pair.first;
  auto& rx = tx_rx_pair.second;
  watch::Sender<int> tx2 = std::move(tx);
  watch::Receiver<int> rx2 = std::move(rx);
  SendResult<int> r = tx.send(2);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), code(errc::closed));
  EXPECT_EQ(r.take_back(), 2);
  EXPECT_EQ(tx.send_replace(3), 3);
  tx.send_modify([](int& v) { v = 100; });  // nothing to modify
  EXPECT_EQ(tx.receiver_count(), 0u);
  EXPECT_TRUE(tx.is_closed());
  EXPECT_EQ(volt_error_of([&] { (void)tx.borrow(); }), code(errc::closed));
  watch::Receiver<int> from_empty = tx.subscribe();
  EXPECT_EQ(from_empty.has_changed().error(), code(errc::closed));
  EXPECT_EQ(rx.has_changed().error(), code(errc::closed));
  EXPECT_EQ(volt_error_of([&] { (void)rx.borrow(); }), code(errc::closed));
  EXPECT_EQ(volt_error_of([&] { (void)rx.borrow_and_update(); }), code(errc::closed));
  rx.mark_changed();
  rx.mark_unchanged();
  // changed() on an empty receiver completes at once, closed.
  Runtime rt = Runtime::Builder::current_thread().build();
  EXPECT_EQ(rt.block_on([](watch::Receiver<int>* rx) -> Task<std::error_code> {
    Expected<void> r = co_await rx->changed();
    co_return r.error();
  }(&rx)),
            code(errc::closed));
  // The moved-to handles work.
  EXPECT_EQ(*rx2.borrow(), 1);
  ASSERT_TRUE(tx2.send(4));
  EXPECT_EQ(*rx2.borrow_and_update(), 4);
}

// ---- waiting ----

class WatchTest : public ::testing::TestWithParam<Flavour> {};
INSTANTIATE_TEST_SUITE_P(Flavours, WatchTest,
                         ::testing::Values(kMultiThread1, kMultiThread2, kCurrentThread),
                         FlavourName());

TEST_P(WatchTest, ChangedCompletesAtOnceForAnUnseenVersion) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    auto [tx, rx] = watch::channel<int>(0);
    EXPECT_TRUE(tx.send(1));
    Expected<void> r = co_await rx.changed();
    EXPECT_TRUE(r);
    EXPECT_FALSE(*rx.has_changed()) << "changed() did not mark the version seen";
    EXPECT_EQ(*rx.borrow(), 1);
  }());
}

Task<int> wait_then_read(watch::Receiver<int> rx, std::atomic<int>* waiting) {
  waiting->fetch_add(1);
  Expected<void> r = co_await rx.changed();
  if (!r) co_return -1;
  co_return *rx.borrow_and_update();
}

TEST_P(WatchTest, ASendWakesEveryWaitingReceiver) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    auto [tx, rx] = watch::channel<int>(0);
    constexpr int kReceivers = 40;  // more than one WakeList batch
    std::atomic<int> waiting{0};
    std::vector<JoinHandle<int>> receivers;
    for (int i = 0; i < kReceivers; ++i)
      receivers.push_back(volt::spawn(wait_then_read(rx, &waiting)));
    while (waiting.load() < kReceivers)
      co_await sleep(100us);
    co_await sleep(1ms);  // all suspended in changed()
    for (auto& h : receivers)
      EXPECT_FALSE(h.is_finished()) << "changed() completed without a send";
    EXPECT_TRUE(tx.send(42));
    for (auto& h : receivers)
      EXPECT_EQ(co_await h, 42);
  }());
}

TEST_P(WatchTest, TheSendersDropWakesWaitersWithClosed) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    auto [tx, rx] = watch::channel<int>(0);
    std::atomic<int> waiting{0};
    JoinHandle<int> a = volt::spawn(wait_then_read(rx, &waiting));
    JoinHandle<int> b = volt::spawn(wait_then_read(rx, &waiting));
    while (waiting.load() < 2)
      co_await sleep(100us);
    co_await sleep(1ms);
    { watch::Sender<int> gone = std::move(tx); }
    EXPECT_EQ(co_await a, -1);
    EXPECT_EQ(co_await b, -1);
    // A version sent before the drop is still reported first.
    auto [tx2, rx2] = watch::channel<int>(0);
    EXPECT_TRUE(tx2.send(8));
    { watch::Sender<int> gone = std::move(tx2); }
    Expected<void> first = co_await rx2.changed();
    EXPECT_TRUE(first);
    EXPECT_EQ(*rx2.borrow(), 8);
    Expected<void> second = co_await rx2.changed();
    EXPECT_EQ(second.error(), code(errc::closed));
  }());
}

TEST_P(WatchTest, ATimedOutChangedLosesNothingAndCanBeAwaitedAgain) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    auto [tx, rx] = watch::channel<int>(0);
    Expected<Expected<void>> first = co_await timeout(1ms, rx.changed());
    EXPECT_EQ(first.error(), code(errc::timed_out));
    EXPECT_TRUE(tx.send(1));
    EXPECT_TRUE(*rx.has_changed()) << "the cancelled changed() marked something seen";
    Expected<Expected<void>> second = co_await timeout(1s, rx.changed());
    EXPECT_TRUE(second);
    if (second) {
      EXPECT_TRUE(*second);
    }
    EXPECT_EQ(*rx.borrow(), 1);

    // An lvalue operation, interrupted several times, then completed.
    JoinHandle<void> sender = volt::spawn([](watch::Sender<int>* tx) -> Task<void> {
      co_await sleep(20ms);
      EXPECT_TRUE(tx->send(2));
    }(&tx));
    auto op = rx.changed();
    int timeouts = 0;
    for (;;) {
      Expected<Expected<void>> r = co_await timeout(500us, op);
      if (r) {
        EXPECT_TRUE(*r);
        break;
      }
      ++timeouts;
    }
    co_await sender;
    EXPECT_GE(timeouts, 1) << "never interrupted: the re-await went untested";
    EXPECT_EQ(*rx.borrow(), 2);
    EXPECT_FALSE(*rx.has_changed());
  }());
}

// ---- allocations ----

TEST(WatchAllocation, SendAndObserveDoNotAllocate) {
  auto [tx, rx] = watch::channel<std::uint64_t>(0);
  const std::uint64_t before = heap_allocations();
  for (std::uint64_t i = 1; i <= 10'000; ++i) {
    ASSERT_TRUE(tx.send(std::uint64_t{i}));
    ASSERT_TRUE(*rx.has_changed());
    ASSERT_EQ(*rx.borrow_and_update(), i);
  }
  EXPECT_EQ(heap_allocations() - before, 0u);
}

Task<std::uint64_t> watch_pingpong_allocations(int rounds) {
  auto to_peer_peer_rx_pair =
      watch::channel<int>(0);  // not a structured binding: lambdas capture these (clang 14)
  auto& to_peer = to_peer_peer_rx_pair.first;
  auto& peer_rx = to_peer_peer_rx_pair.second;
  auto to_me_my_rx_pair =
      watch::channel<int>(0);  // not a structured binding: lambdas capture these (clang 14)
  auto& to_me = to_me_my_rx_pair.first;
  auto& my_rx = to_me_my_rx_pair.second;
  JoinHandle<void> peer =
      volt::spawn([](watch::Receiver<int> rx, watch::Sender<int> tx) -> Task<void> {
        for (;;) {
          Expected<void> r = co_await rx.changed();
          if (!r) break;
          const int v = *rx.borrow_and_update();
          EXPECT_TRUE(tx.send(v + 1));
        }
      }(std::move(peer_rx), std::move(to_me)));
  int next = 0;
  auto round = [&]() -> Task<void> {
    for (int i = 0; i < rounds; ++i) {
      ++next;
      EXPECT_TRUE(to_peer.send(int{next}));
      for (;;) {
        Expected<void> r = co_await my_rx.changed();  // waits: the peer answers
        EXPECT_TRUE(r);
        if (*my_rx.borrow_and_update() == next + 1) break;
      }
      ++next;
    }
  };
  co_await round();  // warm-up: frame pools
  const std::uint64_t before = heap_allocations();
  co_await round();
  const std::uint64_t allocations = heap_allocations() - before;
  to_peer = watch::Sender<int>();
  co_await peer;
  co_return allocations;
}

TEST(WatchAllocation, WaitingChangedDoesNotAllocate) {
  if (kFramePoolDisabled) GTEST_SKIP() << "frame pool disabled (ASan)";
  Runtime rt = Runtime::Builder().worker_threads(2).build();
  EXPECT_EQ(rt.block_on(watch_pingpong_allocations(2000)), 0u);
}

// ---- the stress: the last value is never missed ----

struct WatcherOutcome {
  std::uint64_t last = 0;
  std::uint64_t decreases = 0;
  std::uint64_t wakeups = 0;
};

Task<WatcherOutcome> watcher(watch::Receiver<std::uint64_t> rx) {
  WatcherOutcome out;
  for (;;) {
    Expected<void> r = co_await rx.changed();
    if (!r) break;
    ++out.wakeups;
    const std::uint64_t v = *rx.borrow_and_update();
    if (v < out.last) ++out.decreases;
    out.last = v;
  }
  // Closed: nothing newer than what was seen last.
  const std::uint64_t final_value = *rx.borrow();
  if (final_value != out.last) out.decreases += 1000;
  co_return out;
}

Task<void> stress_sender(watch::Sender<std::uint64_t> tx, std::uint64_t n) {
  for (std::uint64_t i = 1; i <= n; ++i) {
    if (i % 3 == 0) {
      tx.send_modify([i](std::uint64_t& v) { v = i; });
    } else {
      EXPECT_TRUE(tx.send(std::uint64_t{i}));
    }
    if (i % 16 == 0) co_await yield_now();  // let watchers wait and wake
  }
}

TEST(WatchStress, ReceiversEndOnTheLastValueAndNeverGoBack) {
  Runtime rt = make_runtime(kMultiThread2);
  const std::uint64_t n = scale(100'000);
  constexpr int kWatchers = 4;
  for (int round = 0; round < 3; ++round) {
    auto [tx, rx] = watch::channel<std::uint64_t>(0);
    std::vector<JoinHandle<WatcherOutcome>> watchers;
    for (int w = 0; w < kWatchers; ++w)
      watchers.push_back(rt.spawn(watcher(rx)));
    rx = watch::Receiver<std::uint64_t>();
    rt.spawn(stress_sender(std::move(tx), n)).join();
    for (auto& h : watchers) {
      WatcherOutcome out = h.join();
      EXPECT_EQ(out.last, n) << "a watcher missed the last value";
      EXPECT_EQ(out.decreases, 0u) << "a watcher saw the value go back";
      EXPECT_GT(out.wakeups, 0u);
    }
  }
}

// The sender on a plain thread, receivers on the runtime: sends race the
// watchers' registrations from outside any poll.
TEST(WatchStress, APlainThreadSenderAgainstWaitingWatchers) {
  Runtime rt = make_runtime(kMultiThread2);
  const std::uint64_t n = scale(50'000);
  auto [tx, rx] = watch::channel<std::uint64_t>(0);
  std::vector<JoinHandle<WatcherOutcome>> watchers;
  for (int w = 0; w < 3; ++w)
    watchers.push_back(rt.spawn(watcher(rx)));
  rx = watch::Receiver<std::uint64_t>();
  std::thread sender([tx = std::move(tx)]() mutable {
    for (std::uint64_t i = 1; i <= n; ++i) {
      EXPECT_TRUE(tx.send(std::uint64_t{i}));
      if (i % 256 == 0) std::this_thread::sleep_for(10us);
    }
  });
  sender.join();
  for (auto& h : watchers) {
    WatcherOutcome out = h.join();
    EXPECT_EQ(out.last, n);
    EXPECT_EQ(out.decreases, 0u);
  }
}

// ---- several senders, wait_for, Sender::closed() ----

TEST(WatchValue, CopiedSendersCloseTheChannelWhenTheLastGoes) {
  auto [tx, rx] = watch::channel<int>(0);
  watch::Sender<int> second = tx;
  watch::Sender<int> third;
  third = second;
  { watch::Sender<int> gone = std::move(tx); }
  EXPECT_TRUE(rx.has_changed()) << "closed while two senders live";
  ASSERT_TRUE(second.send(1));
  EXPECT_EQ(*rx.borrow_and_update(), 1);
  { watch::Sender<int> gone = std::move(second); }
  ASSERT_TRUE(third.send(2));  // a copy sends to the same channel
  EXPECT_TRUE(*rx.has_changed());
  EXPECT_EQ(*third.borrow(), 2);
  { watch::Sender<int> gone = std::move(third); }
  EXPECT_EQ(rx.has_changed().error(), code(errc::closed));
}

TEST_P(WatchTest, WaitForTakesTheCurrentValueWhenItSatisfies) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    auto [tx, rx] = watch::channel<int>(5);
    {
      // Version 0 is already seen: wait_for still looks at it.
      Expected<watch::Ref<int>> r = co_await rx.wait_for([](const int& v) { return v == 5; });
      EXPECT_TRUE(r);
      if (r) {
        EXPECT_EQ(**r, 5);
      }
    }
    EXPECT_TRUE(tx.send(6));
    {
      Expected<watch::Ref<int>> r = co_await rx.wait_for([](const int& v) { return v > 0; });
      EXPECT_TRUE(r);
      if (r) {
        EXPECT_EQ(**r, 6);
      }
    }
    EXPECT_FALSE(*rx.has_changed()) << "wait_for did not mark the value seen";
  }());
}

TEST_P(WatchTest, WaitForWaitsUntilASentValueSatisfies) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    auto [tx, rx] = watch::channel<int>(0);
    std::atomic<int> calls{0};
    JoinHandle<int> waiter =
        volt::spawn([](watch::Receiver<int> rx, std::atomic<int>* calls) -> Task<int> {
          Expected<watch::Ref<int>> r = co_await rx.wait_for([calls](const int& v) {
            calls->fetch_add(1);
            return v >= 3;
          });
          if (!r) co_return -1;
          const int got = **r;
          EXPECT_FALSE(*rx.has_changed());
          co_return got;
        }(rx, &calls));
    for (int v = 1; v <= 2; ++v) {
      co_await sleep(1ms);
      EXPECT_TRUE(tx.send(int{v}));
    }
    co_await sleep(2ms);
    EXPECT_FALSE(waiter.is_finished()) << "completed on a value that fails the predicate";
    EXPECT_GE(calls.load(), 2) << "the predicate was not re-evaluated on sends";
    EXPECT_TRUE(tx.send(3));
    EXPECT_EQ(co_await waiter, 3);
  }());
}

TEST_P(WatchTest, WaitForGivesClosedOnlyWhenTheLastValueFailsToo) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    {
      auto [tx, rx] = watch::channel<int>(0);
      watch::Sender<int> copy = tx;
      JoinHandle<std::error_code> waiter =
          volt::spawn([](watch::Receiver<int> rx) -> Task<std::error_code> {
            Expected<watch::Ref<int>> r =
                co_await rx.wait_for([](const int& v) { return v == 100; });
            co_return r.error();
          }(rx));
      co_await sleep(1ms);
      { watch::Sender<int> gone = std::move(tx); }
      co_await sleep(2ms);
      EXPECT_FALSE(waiter.is_finished()) << "closed while a sender lives";
      EXPECT_TRUE(copy.send(7));
      { watch::Sender<int> gone = std::move(copy); }
      EXPECT_EQ(co_await waiter, code(errc::closed));
    }
    {
      // The last value satisfies: success, although the senders are gone.
      auto [tx, rx] = watch::channel<int>(0);
      EXPECT_TRUE(tx.send(100));
      { watch::Sender<int> gone = std::move(tx); }
      Expected<watch::Ref<int>> r = co_await rx.wait_for([](const int& v) { return v == 100; });
      EXPECT_TRUE(r);
      if (r) {
        EXPECT_EQ(**r, 100);
      }
    }
    watch::Receiver<int> empty;
    Expected<watch::Ref<int>> r = co_await empty.wait_for([](const int&) { return true; });
    EXPECT_EQ(r.error(), code(errc::closed));
  }());
}

TEST_P(WatchTest, ATimedOutWaitForCanBeAwaitedAgainAndAThrowingPredicatePropagates) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    auto [tx, rx] = watch::channel<int>(0);
    Expected<Expected<watch::Ref<int>>> first =
        co_await timeout(1ms, rx.wait_for([](const int& v) { return v == 2; }));
    EXPECT_EQ(first.error(), code(errc::timed_out));
    JoinHandle<void> sender = volt::spawn([](watch::Sender<int> tx) -> Task<void> {
      co_await sleep(5ms);
      EXPECT_TRUE(tx.send(1));
      co_await sleep(5ms);
      EXPECT_TRUE(tx.send(2));
    }(tx));
    int timeouts = 0;
    {
      auto op = rx.wait_for([](const int& v) { return v == 2; });
      for (;;) {
        Expected<Expected<watch::Ref<int>>> r = co_await timeout(300us, op);
        if (r) {
          EXPECT_TRUE(*r);
          if (*r) {
            EXPECT_EQ(***r, 2);
          }
          break;
        }
        ++timeouts;
      }
    }
    EXPECT_GE(timeouts, 1);
    co_await sender;
    EXPECT_TRUE(tx.send(3));
    bool thrown = false;
    try {
      (void)co_await rx.wait_for([](const int& v) -> bool {
        if (v == 3) throw std::runtime_error("predicate");
        return false;
      });
    } catch (const std::runtime_error&) {
      thrown = true;
    }
    EXPECT_TRUE(thrown);
    // The read lock went with the exception: a send does not deadlock.
    EXPECT_TRUE(tx.send(4));
  }());
}

TEST_P(WatchTest, SenderClosedCompletesWhenEveryReceiverIsGone) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([](bool current_thread) -> Task<void> {
    auto [tx, rx] = watch::channel<int>(0);
    watch::Receiver<int> second = tx.subscribe();
    std::vector<JoinHandle<void>> waiters;
    for (int i = 0; i < 2; ++i)
      waiters.push_back(volt::spawn([](watch::Sender<int> tx) -> Task<void> {
        co_await tx.closed();
        EXPECT_TRUE(tx.is_closed());
      }(tx)));
    Expected<void> early = co_await timeout(1ms, tx.closed());
    EXPECT_EQ(early.error(), code(errc::timed_out));
    { watch::Receiver<int> gone = std::move(rx); }
    co_await sleep(2ms);
    for (auto& w : waiters)
      EXPECT_FALSE(w.is_finished()) << "completed with a receiver left";
    // Wake them, then subscribe before they run (current-thread runtime):
    // they must wait again.
    { watch::Receiver<int> gone = std::move(second); }
    watch::Receiver<int> again = tx.subscribe();
    co_await sleep(2ms);
    if (current_thread) {
      for (auto& w : waiters)
        EXPECT_FALSE(w.is_finished()) << "a woken closed() did not re-check";
    }
    { watch::Receiver<int> gone = std::move(again); }
    for (auto& w : waiters)
      co_await w;
    co_await tx.closed();  // none left: at once
    watch::Sender<int> empty;
    co_await empty.closed();
  }(GetParam().current_thread));
}

TEST(WatchAllocation, WaitingInWaitForAndClosedDoesNotAllocate) {
  if (kFramePoolDisabled) GTEST_SKIP() << "frame pool disabled (ASan)";
  Runtime rt = Runtime::Builder().worker_threads(2).build();
  const std::uint64_t counted = rt.block_on([]() -> Task<std::uint64_t> {
    auto tx_rx = watch::channel<int>(0);  // not a structured binding: a lambda uses it (clang 14)
    auto& tx = tx_rx.first;
    auto& rx = tx_rx.second;
    auto [other_tx, other_rx] = watch::channel<int>(0);
    JoinHandle<void> closed_waiter = volt::spawn(
        [](watch::Sender<int> tx) -> Task<void> { co_await tx.closed(); }(std::move(other_tx)));
    JoinHandle<void> peer = volt::spawn([](watch::Receiver<int> rx) -> Task<void> {
      for (int target = 1;; ++target) {
        Expected<watch::Ref<int>> r =
            co_await rx.wait_for([target](const int& v) { return v >= target || v < 0; });
        if (!r || **r < 0) break;
      }
    }(rx));
    auto rounds = [&](int from, int n) -> Task<void> {
      for (int i = from; i < from + n; ++i) {
        EXPECT_TRUE(tx.send(int{i}));
        co_await yield_now();
      }
    };
    co_await rounds(1, 500);
    const std::uint64_t before = heap_allocations();
    co_await rounds(501, 2000);
    const std::uint64_t n = heap_allocations() - before;
    EXPECT_TRUE(tx.send(-1));
    co_await peer;
    { watch::Receiver<int> gone = std::move(other_rx); }
    co_await closed_waiter;
    co_return n;
  }());
  EXPECT_EQ(counted, 0u);
}

// wait_for against sends from two plain threads through copied senders:
// each waiter gets a value that satisfies its predicate (the Ref holds it),
// a waiter whose target is reached never sees errc::closed, one whose target
// is never reached does once both senders are gone (run under TSan).
TEST(WatchStress, WaitForRacesSendsAndTheLastSendersDrop) {
  Runtime rt = make_runtime(kMultiThread4);
  const int rounds = static_cast<int>(scale(40));
  const int top = static_cast<int>(scale(2'000));
  std::minstd_rand rng(41);
  for (int round = 0; round < rounds; ++round) {
    auto [tx, rx] = watch::channel<int>(0);
    std::vector<JoinHandle<int>> waiters;
    std::vector<int> targets;
    for (int i = 0; i < 6; ++i) {
      const int target = i == 5 ? top + 1 : 1 + static_cast<int>(rng() % top);
      targets.push_back(target);
      waiters.push_back(rt.spawn([](watch::Receiver<int> rx, int target) -> Task<int> {
        Expected<watch::Ref<int>> r =
            co_await rx.wait_for([target](const int& v) { return v >= target; });
        if (!r) co_return r.error() == errc::closed ? -1 : -2;
        co_return **r;
      }(rx, target)));
    }
    { watch::Receiver<int> gone = std::move(rx); }
    watch::Sender<int> even = tx;
    watch::Sender<int> odd = std::move(tx);
    // Two threads send increasing values (the maximum only grows).
    std::atomic<int> next{1};
    auto run = [&next](watch::Sender<int> tx, int top) {
      for (;;) {
        const int v = next.fetch_add(1);
        if (v > top) break;
        tx.send_modify([v](int& cur) {
          if (v > cur) cur = v;
        });
      }
    };
    std::thread a(run, std::move(even), top);
    std::thread b(run, std::move(odd), top);
    a.join();
    b.join();
    for (std::size_t i = 0; i < waiters.size(); ++i) {
      const int got = waiters[i].join();
      if (targets[i] > top) {
        EXPECT_EQ(got, -1) << "round " << round << ": an unreachable target did not give closed";
      } else {
        EXPECT_GE(got, targets[i]) << "round " << round << ": target " << targets[i];
      }
    }
  }
}

// closed() waits racing the drops of the last receivers on several threads.
TEST(WatchStress, SenderClosedRacesTheLastReceiversDrop) {
  Runtime rt = make_runtime(kMultiThread4);
  const int rounds = static_cast<int>(scale(300));
  for (int round = 0; round < rounds; ++round) {
    auto [tx, rx] = watch::channel<int>(0);
    std::vector<watch::Receiver<int>> receivers;
    receivers.push_back(std::move(rx));
    receivers.push_back(tx.subscribe());
    receivers.push_back(tx.subscribe());
    std::atomic<int> dropped{0};
    std::vector<JoinHandle<bool>> waiters;
    for (int i = 0; i < 3; ++i)
      waiters.push_back(
          rt.spawn([](watch::Sender<int> tx, std::atomic<int>* dropped) -> Task<bool> {
            co_await tx.closed();
            co_return dropped->load() == 3;
          }(tx, &dropped)));
    std::vector<std::thread> droppers;
    for (auto& r : receivers)
      droppers.emplace_back([r = std::move(r), &dropped]() mutable {
        dropped.fetch_add(1);
        watch::Receiver<int> gone = std::move(r);
      });
    for (auto& t : droppers)
      t.join();
    for (auto& w : waiters)
      ASSERT_TRUE(w.join()) << "round " << round << ": closed() completed too early";
  }
}

}  // namespace
}  // namespace volt::test
