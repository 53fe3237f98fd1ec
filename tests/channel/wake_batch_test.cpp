// Many waiters on the broadcast and watch channels (include/volt/channel/
// broadcast.hpp, watch.hpp, src/channel/broadcast.cpp) and the waiter list
// behind the senders' closed() (include/volt/detail/closed_event.hpp).
//
// A drain that wakes waiters in WakeList batches unlocks between batches. A
// waiter woken in one batch that registers again at once (a watcher whose
// changed() completed and that calls changed() again) must not be woken
// again by the same drain: otherwise a send with more waiters than a batch
// can loop for as long as the watchers keep up (the send never returns).
// These tests make that deterministic with wakers that register their
// waiter again from inside wake().
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/runtime_support.hpp"
#include "volt/channel/broadcast.hpp"
#include "volt/channel/watch.hpp"
#include "volt/detail/closed_event.hpp"
#include "volt/detail/wake_list.hpp"
#include "volt/detail/waker.hpp"
#include "volt/time/timeout.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

// Stops a drain that would otherwise never end (the bug) so that the test
// fails instead of hanging.
constexpr int kWakeCap = 100'000;

// ---- watch: a send's drain wakes each waiter at most once ----

using WatchShared = watch::detail::Shared<int>;

// A watcher that, when woken, registers again for the version it now sees
// (what a task does when its changed() completes and it calls changed()
// again), from inside wake(): i.e. during the drain's unlocked gap.
struct EagerWatcher {
  WatchShared* shared = nullptr;
  watch::detail::Waiter waiter;
  std::atomic<int>* wakes = nullptr;

  static void* clone(void* data) noexcept { return data; }
  static void drop(void*) noexcept {}
  static void wake_by_ref(void* data) noexcept { wake(data); }
  static void wake(void* data) noexcept {
    auto* self = static_cast<EagerWatcher*>(data);
    if (self->wakes->fetch_add(1) >= kWakeCap) return;  // give up: the drain looped
    self->arm();
  }
  static constexpr volt::detail::WakerVTable kVTable{&clone, &wake, &wake_by_ref, &drop};

  // Registers for the current version; true if linked.
  bool arm() noexcept {
    waiter.waker = volt::detail::Waker(&kVTable, this);
    waiter.woken.store(false, std::memory_order_relaxed);
    const std::uint64_t seen = shared->state() & WatchShared::kVersionMask;
    if (shared->register_waiter(&waiter, seen)) return true;
    waiter.waker.reset();
    return false;
  }
};

TEST(WatchWakeBatch, ASendWakesEachWaiterOnceEvenIfItRegistersAgainAtOnce) {
  constexpr int kWaiters = 2 * static_cast<int>(volt::detail::WakeList::kCapacity) + 3;
  auto* shared = new WatchShared(0);
  std::atomic<int> wakes{0};
  std::vector<std::unique_ptr<EagerWatcher>> watchers;
  for (int i = 0; i < kWaiters; ++i) {
    auto w = std::make_unique<EagerWatcher>();
    w->shared = shared;
    w->wakes = &wakes;
    ASSERT_TRUE(w->arm());
    watchers.push_back(std::move(w));
  }
  shared->modify([](int& v) { ++v; });  // the send: wakes (and its watchers re-register)
  EXPECT_EQ(wakes.load(), kWaiters) << "a waiter that registered again during the drain was "
                                       "woken again by the same drain";
  // The next send wakes them all once more (none was lost).
  wakes.store(0);
  shared->modify([](int& v) { ++v; });
  EXPECT_EQ(wakes.load(), kWaiters);
  // The close wakes them too.
  wakes.store(kWakeCap);  // no re-registration from here on
  shared->close_tx();
  EXPECT_EQ(wakes.load(), kWakeCap + kWaiters);
  for (auto& w : watchers)
    shared->cancel(&w->waiter);
  shared->release();
  shared->release();
}

// ---- ClosedEvent (the senders' closed()): a notify wakes each waiter once ----

// The "no receiver left" condition, false again after the notify (a receiver
// subscribed just after the last one was dropped).
bool never_closed(const void*) noexcept {
  return false;
}

// A closed() wait that, woken and finding the condition false again, links
// itself again at once (ClosedWait's ready_check does this), from inside
// wake(): during notify_all's unlocked gap.
struct EagerClosedWait {
  volt::detail::ClosedEvent* event = nullptr;
  volt::detail::ClosedWaiter waiter;
  std::atomic<int>* wakes = nullptr;

  static void* clone(void* data) noexcept { return data; }
  static void drop(void*) noexcept {}
  static void wake_by_ref(void* data) noexcept { wake(data); }
  static void wake(void* data) noexcept {
    auto* self = static_cast<EagerClosedWait*>(data);
    if (self->wakes->fetch_add(1) >= kWakeCap) return;  // give up: the notify looped
    self->arm();
  }
  static constexpr volt::detail::WakerVTable kVTable{&clone, &wake, &wake_by_ref, &drop};

  bool arm() noexcept {
    waiter.waker = volt::detail::Waker(&kVTable, this);
    if (event->enqueue(waiter, &never_closed, nullptr)) return true;
    waiter.waker.reset();
    return false;
  }
};

TEST(ClosedEventWakeBatch, ANotifyWakesEachWaiterOnceEvenIfItLinksAgainAtOnce) {
  constexpr int kWaiters = 2 * static_cast<int>(volt::detail::WakeList::kCapacity) + 3;
  volt::detail::ClosedEvent event;
  std::atomic<int> wakes{0};
  std::vector<std::unique_ptr<EagerClosedWait>> waits;
  for (int i = 0; i < kWaiters; ++i) {
    auto w = std::make_unique<EagerClosedWait>();
    w->event = &event;
    w->wakes = &wakes;
    ASSERT_TRUE(w->arm());
    waits.push_back(std::move(w));
  }
  event.notify_all();
  EXPECT_EQ(wakes.load(), kWaiters) << "a waiter that linked again during the notify was woken "
                                       "again by the same notify";
  wakes.store(0);
  event.notify_all();  // none was lost: the next notify wakes them all once more
  EXPECT_EQ(wakes.load(), kWaiters);
  for (auto& w : waits)
    event.cancel(w->waiter);
}

// ---- stress: more waiters than one wake batch, on a multi-thread runtime ----
//
// Coverage (these pass before and after the fixes above; the existing
// stresses use at most 4 waiters, never more than one WakeList batch, so a
// drain's unlocked gap with waiters re-registering and being cancelled in it
// was not exercised on a runtime).

struct WatchOutcome {
  std::uint64_t last = 0;
  std::uint64_t decreases = 0;
};

// Loops changed() + borrow_and_update() until closed; every third watcher
// waits inside short timeouts (cancelled and re-created often), every third
// re-awaits one lvalue Changed across timeouts.
Task<WatchOutcome> many_watcher(watch::Receiver<std::uint64_t> rx, int mode) {
  WatchOutcome out;
  for (;;) {
    Expected<void> r;
    if (mode == 1) {
      Expected<Expected<void>> t = co_await volt::timeout(50us, rx.changed());
      if (!t) continue;
      r = *t;
    } else if (mode == 2) {
      watch::Receiver<std::uint64_t>::Changed op = rx.changed();
      Expected<Expected<void>> t = co_await volt::timeout(50us, op);
      if (t) {
        r = *t;
      } else {
        r = co_await op;  // re-awaited while (perhaps) still registered
      }
    } else {
      r = co_await rx.changed();
    }
    if (!r) break;
    const std::uint64_t v = *rx.borrow_and_update();
    if (v < out.last) ++out.decreases;
    out.last = v;
  }
  // Closed: the last value is there to borrow.
  const std::uint64_t v = *rx.borrow_and_update();
  if (v < out.last) ++out.decreases;
  out.last = v;
  co_return out;
}

TEST(WatchManyWaiters, ManyWatchersEndOnTheLastValue) {
  Runtime rt = make_runtime(kMultiThread4);
  constexpr std::uint64_t n = scale(20'000);
  constexpr int kWatchers = 70;  // more than two WakeList batches
  auto [tx, rx] = watch::channel<std::uint64_t>(0);
  std::vector<JoinHandle<WatchOutcome>> watchers;
  for (int w = 0; w < kWatchers; ++w)
    watchers.push_back(rt.spawn(many_watcher(rx, w % 3)));
  rx = watch::Receiver<std::uint64_t>();
  std::thread sender([tx = std::move(tx)]() mutable {
    for (std::uint64_t i = 1; i <= n; ++i) {
      tx.send_replace(std::uint64_t{i});          // (send would fail only with no receiver left)
      if (i % 4 == 0) std::this_thread::yield();  // let the watchers wait often
    }
  });
  sender.join();
  for (auto& h : watchers) {
    const WatchOutcome out = h.join();
    EXPECT_EQ(out.last, n) << "a watcher missed the last value";
    EXPECT_EQ(out.decreases, 0u);
  }
}

struct BroadcastTally {
  std::uint64_t received = 0;
  std::uint64_t missed = 0;
  std::uint64_t out_of_order = 0;
};

// Receives until closed. mode 0: plain recv; 1: recv in short timeouts
// (cancelled often); 2: one lvalue Recv re-awaited across timeouts.
Task<BroadcastTally> many_receiver(broadcast::Receiver<std::uint64_t> rx, int mode) {
  BroadcastTally tally;
  std::uint64_t next_expected = 0;
  for (;;) {
    std::optional<broadcast::RecvResult<std::uint64_t>> got;
    if (mode == 1) {
      Expected<broadcast::RecvResult<std::uint64_t>> t = co_await volt::timeout(50us, rx.recv());
      if (!t) continue;
      got.emplace(std::move(*t));
    } else if (mode == 2) {
      broadcast::Receiver<std::uint64_t>::Recv op = rx.recv();
      Expected<broadcast::RecvResult<std::uint64_t>> t = co_await volt::timeout(50us, op);
      if (t) {
        got.emplace(std::move(*t));
      } else {
        got.emplace(co_await op);
      }
    } else {
      got.emplace(co_await rx.recv());
    }
    broadcast::RecvResult<std::uint64_t>& r = *got;
    if (r) {
      ++tally.received;
      if (*r < next_expected) ++tally.out_of_order;
      next_expected = *r + 1;
    } else if (r.error() == errc::lagged) {
      tally.missed += r.missed();
      next_expected += r.missed();
    } else {
      EXPECT_EQ(r.error(), errc::closed);
      break;
    }
  }
  co_return tally;
}

TEST(BroadcastManyWaiters, ManyReceiversAccountForEveryValue) {
  Runtime rt = make_runtime(kMultiThread4);
  constexpr std::uint64_t n = scale(20'000);
  constexpr int kReceivers = 70;  // more than two WakeList batches
  auto [tx, rx] = broadcast::channel<std::uint64_t>(8);
  std::vector<JoinHandle<BroadcastTally>> receivers;
  for (int i = 0; i < kReceivers; ++i)
    receivers.push_back(rt.spawn(many_receiver(tx.subscribe(), i % 3)));
  rx = broadcast::Receiver<std::uint64_t>();
  std::thread sender([tx = std::move(tx)]() mutable {
    for (std::uint64_t i = 0; i < n; ++i) {
      EXPECT_TRUE(tx.send(std::uint64_t{i}));
      if (i % 4 == 0) std::this_thread::yield();  // let the receivers wait often
    }
  });
  sender.join();
  for (auto& h : receivers) {
    const BroadcastTally t = h.join();
    EXPECT_EQ(t.received + t.missed, n);
    EXPECT_EQ(t.out_of_order, 0u);
  }
}

}  // namespace
}  // namespace volt::test
