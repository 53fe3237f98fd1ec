// Tests of volt::broadcast (include/volt/channel/broadcast.hpp,
// src/channel/broadcast.cpp): every receiver sees every value in order,
// subscribe/resubscribe/copy positions, exact lag accounting, closing, send
// with no receivers, value lifetimes (destroyed once the last receiver took
// it, never twice), moved-from handles, waiting receivers woken by sends and
// by the close (tasks and plain threads), cancellation by timeout losing
// nothing, the budget, zero allocations, and a multi-thread stress with
// random cancellation (run under TSan in CI).
#include "volt/channel/broadcast.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/runtime_support.hpp"
#include "volt/time/sleep.hpp"
#include "volt/time/timeout.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;
using broadcast::Receiver;
using broadcast::RecvResult;
using broadcast::Sender;

// Receives with try_recv and expects `value`.
template <class T>
void expect_value(Receiver<T>& rx, const T& value) {
  RecvResult<T> r = rx.try_recv();
  ASSERT_TRUE(r) << "expected a value, got " << r.error().message();
  EXPECT_EQ(*r, value);
}

template <class T>
void expect_error(Receiver<T>& rx, errc why) {
  RecvResult<T> r = rx.try_recv();
  EXPECT_FALSE(r);
  EXPECT_EQ(r.error(), why);
}

// ---- basics (no runtime) ----

TEST(BroadcastBasics, EveryReceiverSeesEveryValueInOrder) {
  auto [tx, rx0] = broadcast::channel<int>(16);
  Receiver<int> rx1 = tx.subscribe();
  Receiver<int> rx2 = tx.subscribe();
  EXPECT_EQ(tx.receiver_count(), 3u);
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(tx.send(i));
  for (Receiver<int>* rx : {&rx0, &rx1, &rx2}) {
    for (int i = 0; i < 10; ++i)
      expect_value(*rx, i);
    expect_error(*rx, errc::empty);
  }
}

TEST(BroadcastBasics, InterleavedSendsAndReceivesKeepOrder) {
  auto [tx, rx] = broadcast::channel<int>(4);
  Receiver<int> other = tx.subscribe();
  int next_rx = 0;
  int next_other = 0;
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(tx.send(i));
    expect_value(rx, next_rx++);
    if (i % 3 == 2) {  // `other` reads in bursts, staying within capacity
      for (int k = 0; k < 3; ++k)
        expect_value(other, next_other++);
    }
  }
  expect_error(rx, errc::empty);
}

TEST(BroadcastBasics, SubscribeSeesOnlyLaterValues) {
  auto [tx, rx] = broadcast::channel<int>(8);
  ASSERT_TRUE(tx.send(1));
  ASSERT_TRUE(tx.send(2));
  Receiver<int> late = tx.subscribe();
  expect_error(late, errc::empty);
  ASSERT_TRUE(tx.send(3));
  expect_value(late, 3);
  expect_error(late, errc::empty);
  expect_value(rx, 1);
  expect_value(rx, 2);
  expect_value(rx, 3);
  Receiver<int> re = rx.resubscribe();  // a new receiver at the send position
  expect_error(re, errc::empty);
  ASSERT_TRUE(tx.send(4));
  expect_value(re, 4);
  expect_value(rx, 4);
}

TEST(BroadcastBasics, CapacityIsRoundedUpToAPowerOfTwo) {
  EXPECT_EQ(broadcast::channel<int>(1).first.capacity(), 1u);
  EXPECT_EQ(broadcast::channel<int>(3).first.capacity(), 4u);
  EXPECT_EQ(broadcast::channel<int>(1000).first.capacity(), 1024u);
  EXPECT_EQ(broadcast::channel<int>(1024).first.capacity(), 1024u);
}

TEST(BroadcastBasics, BadCapacityThrowsInvalidArgument) {
  EXPECT_EQ(volt_error_of([] { (void)broadcast::channel<int>(0); }), code(errc::invalid_argument));
  EXPECT_EQ(volt_error_of([] { (void)broadcast::channel<int>(broadcast::kMaxCapacity + 1); }),
            code(errc::invalid_argument));
}

TEST(BroadcastBasics, CapacityOneKeepsOnlyTheNewest) {
  auto [tx, rx] = broadcast::channel<int>(1);
  ASSERT_TRUE(tx.send(1));
  expect_value(rx, 1);
  ASSERT_TRUE(tx.send(2));
  ASSERT_TRUE(tx.send(3));
  RecvResult<int> r = rx.try_recv();
  EXPECT_EQ(r.error(), errc::lagged);
  EXPECT_EQ(r.missed(), 1u);
  expect_value(rx, 3);
}

// ---- lag ----

TEST(BroadcastLag, MissedCountsExactlyTheOverwrittenValues) {
  constexpr int kCapacity = 4;
  constexpr int kSent = 10;
  auto [tx, rx] = broadcast::channel<int>(kCapacity);
  Receiver<int> reader = tx.subscribe();  // reads two values before the rest is sent
  ASSERT_TRUE(tx.send(0));
  ASSERT_TRUE(tx.send(1));
  expect_value(reader, 0);
  expect_value(reader, 1);
  for (int i = 2; i < kSent; ++i)
    ASSERT_TRUE(tx.send(i));
  // The ring keeps the newest kCapacity values: kSent - kCapacity .. kSent - 1.
  const int oldest_kept = kSent - kCapacity;
  RecvResult<int> r = rx.try_recv();
  EXPECT_FALSE(r);
  EXPECT_EQ(r.error(), errc::lagged);
  EXPECT_EQ(r.missed(), static_cast<std::uint64_t>(oldest_kept - 0));  // 0 .. 5 lost: 6
  EXPECT_THROW((void)r.value(), std::system_error);
  for (int i = oldest_kept; i < kSent; ++i)
    expect_value(rx, i);
  expect_error(rx, errc::empty);

  RecvResult<int> r2 = reader.try_recv();
  EXPECT_EQ(r2.error(), errc::lagged);
  EXPECT_EQ(r2.missed(), static_cast<std::uint64_t>(oldest_kept - 2));  // 2 .. 5 lost: 4
  for (int i = oldest_kept; i < kSent; ++i)
    expect_value(reader, i);
}

TEST(BroadcastLag, ExactlyCapacityBehindIsNotALag) {
  auto [tx, rx] = broadcast::channel<int>(4);
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(tx.send(i));
  EXPECT_EQ(rx.len(), 4u);
  for (int i = 0; i < 4; ++i)
    expect_value(rx, i);
}

TEST(BroadcastLag, LagThenClosed) {
  auto [tx, rx] = broadcast::channel<int>(2);
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(tx.send(i));
  tx = Sender<int>();  // the last sender is gone
  RecvResult<int> r = rx.try_recv();
  EXPECT_EQ(r.error(), errc::lagged);
  EXPECT_EQ(r.missed(), 3u);
  expect_value(rx, 3);
  expect_value(rx, 4);
  expect_error(rx, errc::closed);
  expect_error(rx, errc::closed);
}

// ---- closing and sending with nobody listening ----

TEST(BroadcastClose, ClosedOnlyAfterTheLastSenderAndAfterDraining) {
  auto [tx, rx] = broadcast::channel<int>(8);
  Sender<int> tx2 = tx;
  ASSERT_TRUE(tx.send(1));
  tx = Sender<int>();
  expect_value(rx, 1);
  expect_error(rx, errc::empty);  // tx2 is alive
  ASSERT_TRUE(tx2.send(2));
  ASSERT_TRUE(tx2.send(3));
  tx2 = Sender<int>();
  expect_value(rx, 2);
  expect_value(rx, 3);
  expect_error(rx, errc::closed);
}

TEST(BroadcastClose, SendWithNoReceiversHandsTheValueBack) {
  auto [tx, rx] = broadcast::channel<std::string>(4);
  rx = Receiver<std::string>();
  EXPECT_EQ(tx.receiver_count(), 0u);
  SendResult<std::string> r = tx.send("kept");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::closed);
  EXPECT_EQ(r.take_back(), "kept");
  // A new subscriber makes sends succeed again.
  Receiver<std::string> again = tx.subscribe();
  EXPECT_TRUE(tx.send("delivered"));
  expect_value(again, std::string("delivered"));
}

TEST(BroadcastClose, MovedFromHandlesBehaveAsClosed) {
  auto [tx, rx] = broadcast::channel<int>(4);
  Sender<int> tx_moved = std::move(tx);
  Receiver<int> rx_moved = std::move(rx);
  SendResult<int> sent = tx.send(5);  // NOLINT(bugprone-use-after-move): the point
  ASSERT_FALSE(sent);
  EXPECT_EQ(sent.error(), errc::closed);
  EXPECT_EQ(sent.take_back(), 5);
  EXPECT_EQ(tx.receiver_count(), 0u);
  EXPECT_EQ(tx.len(), 0u);
  EXPECT_TRUE(tx.is_empty());
  EXPECT_EQ(tx.capacity(), 0u);
  Receiver<int> none = tx.subscribe();
  expect_error(none, errc::closed);
  expect_error(rx, errc::closed);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(rx.len(), 0u);
  Receiver<int> copy_of_moved = rx;  // copying an empty receiver gives an empty one
  expect_error(copy_of_moved, errc::closed);
  Receiver<int> resubscribed = rx.resubscribe();
  expect_error(resubscribed, errc::closed);
  EXPECT_EQ(rx.recv_blocking().error(), errc::closed);
  // The live handles still work.
  ASSERT_TRUE(tx_moved.send(6));
  expect_value(rx_moved, 6);
}

// ---- copies and lengths ----

TEST(BroadcastHandles, ACopiedReceiverStartsAtTheSamePosition) {
  auto [tx, rx] = broadcast::channel<int>(8);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(tx.send(i));
  expect_value(rx, 0);
  Receiver<int> copy = rx;
  EXPECT_EQ(tx.receiver_count(), 2u);
  EXPECT_EQ(copy.len(), 2u);
  for (Receiver<int>* r : {&rx, &copy}) {
    expect_value(*r, 1);
    expect_value(*r, 2);
    expect_error(*r, errc::empty);
  }
  Receiver<int> assigned;
  assigned = copy;
  ASSERT_TRUE(tx.send(3));
  expect_value(assigned, 3);
  expect_value(copy, 3);
}

TEST(BroadcastHandles, SenderAndReceiverLengths) {
  auto [tx, a] = broadcast::channel<int>(4);
  Receiver<int> b = tx.subscribe();
  EXPECT_TRUE(tx.is_empty());
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(tx.send(i));
  EXPECT_EQ(tx.len(), 3u);
  EXPECT_EQ(a.len(), 3u);
  for (int i = 0; i < 3; ++i)
    expect_value(a, i);
  EXPECT_EQ(a.len(), 0u);
  EXPECT_TRUE(a.is_empty());
  EXPECT_EQ(tx.len(), 3u) << "b has not read them";
  expect_value(b, 0);
  EXPECT_EQ(tx.len(), 2u);
  for (int i = 3; i < 8; ++i)  // b falls behind: the ring holds 4 .. 7
    ASSERT_TRUE(tx.send(i));
  EXPECT_EQ(b.len(), 7u) << "positions 1 .. 7, more than the capacity";
  EXPECT_EQ(tx.len(), 4u);
  RecvResult<int> lag = b.try_recv();
  EXPECT_EQ(lag.missed(), 3u);  // 1, 2, 3
  for (int i = 4; i < 8; ++i)
    expect_value(b, i);
  EXPECT_EQ(tx.len(), 4u) << "a has not read 4 .. 7";
  RecvResult<int> lag_a = a.try_recv();  // a stopped at 3, which was overwritten
  EXPECT_EQ(lag_a.missed(), 1u);
  for (int i = 4; i < 8; ++i)
    expect_value(a, i);
  EXPECT_EQ(tx.len(), 0u);
  EXPECT_TRUE(tx.is_empty());
}

TEST(BroadcastHandles, ReceiverCountFollowsSubscriptionsAndCopies) {
  auto [tx, rx] = broadcast::channel<int>(2);
  std::vector<Receiver<int>> many;
  for (int i = 0; i < 100; ++i)
    many.push_back(i % 2 ? tx.subscribe() : rx);
  EXPECT_EQ(tx.receiver_count(), 101u);
  many.clear();
  EXPECT_EQ(tx.receiver_count(), 1u);
}

// ---- value lifetimes ----

TEST(BroadcastLifetime, AValueIsDestroyedWhenTheLastReceiverTookIt) {
  LifeCounters counters;
  {
    auto [tx, a] = broadcast::channel<Tracked>(4);
    Receiver<Tracked> b = tx.subscribe();
    ASSERT_TRUE(tx.send(Tracked(counters, 1)));
    ASSERT_TRUE(tx.send(Tracked(counters, 2)));
    EXPECT_EQ(counters.live(), 2) << "one stored copy per value";
    {
      RecvResult<Tracked> r = a.try_recv();
      ASSERT_TRUE(r);
      EXPECT_EQ(r->value(), 1);
    }
    EXPECT_EQ(counters.live(), 2) << "b has not read value 1";
    {
      RecvResult<Tracked> r = b.try_recv();
      ASSERT_TRUE(r);
      EXPECT_EQ(r->value(), 1);
      EXPECT_EQ(counters.live(), 2) << "value 1 was moved out to b, value 2 stored";
    }
    EXPECT_EQ(counters.live(), 1);
    b = Receiver<Tracked>();  // drops b, which has not read value 2
    EXPECT_EQ(counters.live(), 1) << "a has not read value 2";
    a = Receiver<Tracked>();
    EXPECT_EQ(counters.live(), 0) << "nobody is left to read value 2";
  }
  EXPECT_EQ(counters.double_destroyed.load(), 0);
  EXPECT_EQ(counters.live(), 0);
}

TEST(BroadcastLifetime, ReceiverDroppedWhileOthersLag) {
  LifeCounters counters;
  {
    auto [tx, lagging] = broadcast::channel<Tracked>(4);
    Receiver<Tracked> fast = tx.subscribe();
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE(tx.send(Tracked(counters, i)));
      RecvResult<Tracked> r = fast.try_recv();
      ASSERT_TRUE(r);
      EXPECT_EQ(r->value(), i);
    }
    EXPECT_EQ(counters.live(), 4) << "the ring keeps 4 values for `lagging`";
    fast = Receiver<Tracked>();
    EXPECT_EQ(tx.receiver_count(), 1u);
    RecvResult<Tracked> lag = lagging.try_recv();
    EXPECT_EQ(lag.error(), errc::lagged);
    EXPECT_EQ(lag.missed(), 6u);
    for (int i = 6; i < 10; ++i) {
      RecvResult<Tracked> r = lagging.try_recv();
      ASSERT_TRUE(r);
      EXPECT_EQ(r->value(), i);
    }
    EXPECT_EQ(counters.live(), 0) << "every value was taken by its last reader";
    // And the other way round: the lagging receiver dropped, the reader goes on.
    Receiver<Tracked> reader = tx.subscribe();
    Receiver<Tracked> behind = tx.subscribe();
    for (int i = 0; i < 9; ++i)
      ASSERT_TRUE(tx.send(Tracked(counters, 100 + i)));
    behind = Receiver<Tracked>();
    lagging = Receiver<Tracked>();
    RecvResult<Tracked> lag2 = reader.try_recv();
    EXPECT_EQ(lag2.missed(), 5u);
    for (int i = 5; i < 9; ++i) {
      RecvResult<Tracked> r = reader.try_recv();
      ASSERT_TRUE(r);
      EXPECT_EQ(r->value(), 100 + i);
    }
    EXPECT_EQ(counters.live(), 0);
  }
  EXPECT_EQ(counters.double_destroyed.load(), 0);
  EXPECT_EQ(counters.live(), 0);
}

TEST(BroadcastLifetime, ACopiedReceiverKeepsTheValuesItStillHasToRead) {
  LifeCounters counters;
  {
    auto [tx, rx] = broadcast::channel<Tracked>(8);
    for (int i = 0; i < 3; ++i)
      ASSERT_TRUE(tx.send(Tracked(counters, i)));
    Receiver<Tracked> copy = rx;
    for (int i = 0; i < 3; ++i) {
      RecvResult<Tracked> r = rx.try_recv();
      ASSERT_TRUE(r);
      EXPECT_EQ(r->value(), i);
    }
    EXPECT_EQ(counters.live(), 3) << "the copy still has to read all three";
    for (int i = 0; i < 3; ++i) {
      RecvResult<Tracked> r = copy.try_recv();
      ASSERT_TRUE(r);
      EXPECT_EQ(r->value(), i);
    }
    EXPECT_EQ(counters.live(), 0);
  }
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

TEST(BroadcastLifetime, ChannelDestroyedWithValuesInIt) {
  LifeCounters counters;
  {
    auto [tx, rx] = broadcast::channel<Tracked>(4);
    for (int i = 0; i < 6; ++i)
      ASSERT_TRUE(tx.send(Tracked(counters, i)));
    EXPECT_EQ(counters.live(), 4);
  }
  EXPECT_EQ(counters.live(), 0);
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

// A value whose copy constructor throws on demand.
struct Fragile {
  static inline bool explode = false;
  int value = 0;
  explicit Fragile(int v) : value(v) {}
  Fragile(const Fragile& other) : value(other.value) {
    if (explode) throw std::runtime_error("copy failed");
  }
  Fragile(Fragile&& other) noexcept = default;
};

TEST(BroadcastLifetime, AThrowingCopyConsumesNothing) {
  auto [tx, a] = broadcast::channel<Fragile>(4);
  Receiver<Fragile> b = tx.subscribe();
  ASSERT_TRUE(tx.send(Fragile(7)));
  Fragile::explode = true;
  EXPECT_THROW((void)a.try_recv(), std::runtime_error);  // two readers left: a copies
  Fragile::explode = false;
  RecvResult<Fragile> r = a.try_recv();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->value, 7);
  Fragile::explode = true;  // b is the last reader: it takes the value by move
  RecvResult<Fragile> last = b.try_recv();
  Fragile::explode = false;
  ASSERT_TRUE(last);
  EXPECT_EQ(last->value, 7);
}

// ---- waiting (runtime) ----

class BroadcastWait : public ::testing::TestWithParam<Flavour> {};
INSTANTIATE_TEST_SUITE_P(Flavours, BroadcastWait,
                         ::testing::Values(kMultiThread1, kMultiThread2, kMultiThread4,
                                           kCurrentThread),
                         FlavourName());

// Receives values until closed; returns them (lag would be a test failure).
Task<std::vector<int>> receive_until_closed(Receiver<int> rx, std::atomic<int>* started) {
  std::vector<int> got;
  started->fetch_add(1);
  for (;;) {
    RecvResult<int> r = co_await rx.recv();
    if (!r) {
      EXPECT_EQ(r.error(), errc::closed);
      break;
    }
    got.push_back(*r);
  }
  co_return got;
}

TEST_P(BroadcastWait, WaitingReceiversAreWokenBySendsAndByTheClose) {
  Runtime rt = make_runtime(GetParam());
  auto [tx, rx] = broadcast::channel<int>(64);
  std::atomic<int> started{0};
  std::vector<JoinHandle<std::vector<int>>> hs;
  constexpr int kReceivers = 40;  // more than one WakeList batch (32)
  for (int i = 0; i < kReceivers; ++i)
    hs.push_back(rt.spawn(receive_until_closed(i == 0 ? std::move(rx) : tx.subscribe(), &started)));
  if (!GetParam().current_thread) {
    ASSERT_TRUE(wait_until([&] { return started.load() == kReceivers; }));
    std::this_thread::sleep_for(5ms);  // most of them are waiting by now
  }
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(tx.send(i));
    if (!GetParam().current_thread) std::this_thread::sleep_for(1ms);
  }
  tx = Sender<int>();
  for (auto& h : hs)
    EXPECT_EQ(h.join(), (std::vector<int>{0, 1, 2, 3, 4}));
}

Task<RecvResult<int>> recv_once(Receiver<int>* rx) {
  RecvResult<int> r = co_await rx->recv();
  co_return r;
}

TEST_P(BroadcastWait, RecvReturnsLagAndThenTheOldestKept) {
  Runtime rt = make_runtime(GetParam());
  auto [tx, rx] = broadcast::channel<int>(2);
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(tx.send(i));
  RecvResult<int> lag = rt.block_on(recv_once(&rx));
  EXPECT_EQ(lag.error(), errc::lagged);
  EXPECT_EQ(lag.missed(), 3u);
  EXPECT_EQ(*rt.block_on(recv_once(&rx)), 3);
  EXPECT_EQ(*rt.block_on(recv_once(&rx)), 4);
}

TEST_P(BroadcastWait, MovedFromReceiverRecvIsClosed) {
  Runtime rt = make_runtime(GetParam());
  auto [tx, rx] = broadcast::channel<int>(2);
  Receiver<int> keep = std::move(rx);
  EXPECT_EQ(rt.block_on(recv_once(&rx)).error(), errc::closed);  // NOLINT(bugprone-use-after-move)
}

// A recv inside a timeout that expires is cancelled; the value sent after it
// is received by the next recv: nothing is lost, the position is unchanged.
Task<std::vector<int>> cancelled_waits_lose_nothing(Receiver<int>* rx, Sender<int>* tx) {
  std::vector<int> got;
  for (int i = 0; i < 3; ++i) {
    Expected<RecvResult<int>> t = co_await volt::timeout(2ms, rx->recv());
    EXPECT_FALSE(t);
    EXPECT_EQ(t.error(), errc::timed_out);
    Expected<RecvResult<int>> t0 = co_await volt::timeout(0ms, rx->recv());  // one try
    EXPECT_FALSE(t0);
    EXPECT_TRUE(tx->send(i));
    RecvResult<int> r = co_await rx->recv();
    got.push_back(r ? *r : -1);
  }
  co_return got;
}

TEST_P(BroadcastWait, CancelledRecvLosesNothing) {
  Runtime rt = make_runtime(GetParam());
  auto [tx, rx] = broadcast::channel<int>(4);
  EXPECT_EQ(rt.block_on(cancelled_waits_lose_nothing(&rx, &tx)), (std::vector<int>{0, 1, 2}));
  expect_error(rx, errc::empty);
}

// A Recv held by reference keeps its place when the timeout fires; awaited
// again (still queued) it is not registered twice; it then receives.
Task<int> lvalue_recv_keeps_its_place(Receiver<int>* rx, Sender<int>* tx) {
  Receiver<int>::Recv op = rx->recv();
  Expected<RecvResult<int>> first = co_await volt::timeout(2ms, op);
  EXPECT_FALSE(first);
  Expected<RecvResult<int>> second = co_await volt::timeout(2ms, op);  // re-await while queued
  EXPECT_FALSE(second);
  EXPECT_TRUE(tx->send(41));
  RecvResult<int> r = co_await op;
  EXPECT_TRUE(tx->send(42));
  RecvResult<int> again = co_await op;  // a completed Recv receives the next value
  co_return (r ? *r : -1) * 100 + (again ? *again : -1);
}

TEST_P(BroadcastWait, AnLvalueRecvKeepsItsPlaceAcrossTimeouts) {
  Runtime rt = make_runtime(GetParam());
  auto [tx, rx] = broadcast::channel<int>(4);
  EXPECT_EQ(rt.block_on(lvalue_recv_keeps_its_place(&rx, &tx)), 4142);
}

// ---- plain threads ----

// ---- Sender::closed() ----

TEST_P(BroadcastWait, SenderClosedCompletesWhenEveryReceiverIsGone) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    auto [tx, rx] = broadcast::channel<int>(4);
    Receiver<int> second = tx.subscribe();
    Receiver<int> copy = rx;
    std::vector<JoinHandle<void>> waiters;
    for (int i = 0; i < 3; ++i)
      waiters.push_back(volt::spawn([](Sender<int> tx) -> Task<void> {
        co_await tx.closed();
        EXPECT_EQ(tx.receiver_count(), 0u);
        EXPECT_FALSE(tx.send(1)) << "closed() completed while sends still succeed";
      }(tx)));
    Expected<void> early = co_await timeout(1ms, tx.closed());
    EXPECT_EQ(early.error(), code(errc::timed_out)) << "completed with receivers alive";
    { Receiver<int> gone = std::move(rx); }
    { Receiver<int> gone = std::move(second); }
    co_await sleep(2ms);
    for (auto& w : waiters)
      EXPECT_FALSE(w.is_finished()) << "completed with one receiver left";
    { Receiver<int> gone = std::move(copy); }
    for (auto& w : waiters)
      co_await w;
    co_await tx.closed();  // none left: at once
    Sender<int> empty;
    co_await empty.closed();  // moved-from: at once
  }());
}

TEST_P(BroadcastWait, SenderClosedWaitsAgainWhenAReceiverSubscribesFirst) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([](bool current_thread) -> Task<void> {
    auto [tx, rx] = broadcast::channel<int>(4);
    JoinHandle<void> waiter = volt::spawn([](Sender<int> tx) -> Task<void> {
      co_await tx.closed();
      EXPECT_EQ(tx.receiver_count(), 0u) << "completed with a receiver subscribed";
    }(tx));
    co_await sleep(1ms);  // the waiter is waiting
    // Wake it, then subscribe before it can run (on the current-thread
    // runtime it runs only when this task suspends): it must wait again.
    { Receiver<int> gone = std::move(rx); }
    Receiver<int> again = tx.subscribe();
    co_await sleep(2ms);
    if (current_thread) {
      EXPECT_FALSE(waiter.is_finished()) << "a woken closed() did not re-check";
    }
    if (waiter.is_finished()) again = Receiver<int>();  // it completed in between
    { Receiver<int> gone = std::move(again); }
    co_await waiter;
  }(GetParam().current_thread));
}

// closed() waits racing the drops of the last receivers on several threads:
// every wait completes (a lost wake-up hangs), none while one is alive.
TEST(BroadcastStress, SenderClosedRacesTheLastReceiversDrop) {
  Runtime rt = make_runtime(kMultiThread4);
  const int rounds = static_cast<int>(scale(300));
  for (int round = 0; round < rounds; ++round) {
    auto [tx, rx] = broadcast::channel<int>(2);
    std::vector<Receiver<int>> receivers;
    receivers.push_back(std::move(rx));
    receivers.push_back(tx.subscribe());
    receivers.push_back(tx.subscribe());
    std::atomic<int> dropped{0};
    std::vector<JoinHandle<bool>> waiters;
    for (int i = 0; i < 3; ++i)
      waiters.push_back(rt.spawn([](Sender<int> tx, std::atomic<int>* dropped) -> Task<bool> {
        co_await tx.closed();
        co_return dropped->load() == 3;
      }(tx, &dropped)));
    EXPECT_TRUE(tx.send(round));
    std::vector<std::thread> droppers;
    for (auto& r : receivers)
      droppers.emplace_back([r = std::move(r), &dropped]() mutable {
        dropped.fetch_add(1);
        Receiver<int> gone = std::move(r);
      });
    for (auto& t : droppers)
      t.join();
    for (auto& w : waiters)
      ASSERT_TRUE(w.join()) << "round " << round << ": closed() completed too early";
  }
}

TEST(BroadcastBlocking, RecvBlockingIsWokenBySendAndClose) {
  auto [tx, rx] = broadcast::channel<int>(4);
  std::atomic<bool> waiting{false};
  std::vector<int> got;
  std::thread reader([&, rx = std::move(rx)]() mutable {
    waiting.store(true);
    for (;;) {
      RecvResult<int> r = rx.recv_blocking();
      if (!r) {
        EXPECT_EQ(r.error(), errc::closed);
        break;
      }
      got.push_back(*r);
    }
  });
  ASSERT_TRUE(wait_until([&] { return waiting.load(); }));
  std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(tx.send(1));
  std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(tx.send(2));
  tx = Sender<int>();
  reader.join();
  EXPECT_EQ(got, (std::vector<int>{1, 2}));
}

Task<std::error_code> recv_blocking_in_a_task(Receiver<int>* rx) {
  co_return volt_error_of([&] { (void)rx->recv_blocking(); });
}

TEST(BroadcastBlocking, RecvBlockingOnARuntimeThreadThrows) {
  Runtime rt = Runtime::Builder::current_thread().build();
  auto [tx, rx] = broadcast::channel<int>(4);
  EXPECT_EQ(rt.block_on(recv_blocking_in_a_task(&rx)), code(errc::blocking_in_runtime));
}

// ---- the cooperative budget ----

Task<void> set_flag(std::atomic<bool>* flag) {
  flag->store(true);
  co_return;
}

// Receives `count` ready values; returns the index at which it first saw the
// flag that a task spawned at its start sets (it can run only when the
// receiving loop yields: one thread).
Task<int> receive_past_the_budget(Receiver<int>* rx, int count, std::vector<int>* got) {
  std::atomic<bool> flag{false};
  JoinHandle<void> flagger = volt::spawn(set_flag(&flag));
  int seen_at = -1;
  for (int i = 0; i < count; ++i) {
    RecvResult<int> r = co_await rx->recv();
    got->push_back(r ? *r : -1);
    if (seen_at < 0 && flag.load()) seen_at = i;
  }
  co_await flagger;
  co_return seen_at;
}

TEST(BroadcastBudget, ReceivingReadyValuesYieldsAndLosesNothing) {
  Runtime rt = Runtime::Builder::current_thread().build();
  auto [tx, rx] = broadcast::channel<int>(1024);
  constexpr int kCount = 1000;
  std::vector<int> want;
  for (int i = 0; i < kCount; ++i) {
    ASSERT_TRUE(tx.send(i));
    want.push_back(i);
  }
  std::vector<int> got;
  const int seen_at = rt.spawn(receive_past_the_budget(&rx, kCount, &got)).join();
  EXPECT_GT(seen_at, 0);
  EXPECT_LT(seen_at, kCount) << "the receiving loop never yielded";
  EXPECT_EQ(got, want);
}

// ---- allocation ----

// Two tasks bounce a counter over two broadcast channels: every recv waits.
Task<void> bounce(Receiver<int> rx, Sender<int> tx, int rounds) {
  for (int i = 0; i < rounds; ++i) {
    RecvResult<int> r = co_await rx.recv();
    EXPECT_TRUE(r);
    EXPECT_TRUE(tx.send(*r + 1));
  }
}

Task<std::uint64_t> waiting_recv_allocations(int rounds) {
  auto to_peer_peer_rx_pair =
      broadcast::channel<int>(4);  // not a structured binding: lambdas capture these (clang 14)
  auto& to_peer = to_peer_peer_rx_pair.first;
  auto& peer_rx = to_peer_peer_rx_pair.second;
  auto to_me_my_rx_pair =
      broadcast::channel<int>(4);  // not a structured binding: lambdas capture these (clang 14)
  auto& to_me = to_me_my_rx_pair.first;
  auto& my_rx = to_me_my_rx_pair.second;
  JoinHandle<void> peer = volt::spawn(bounce(std::move(peer_rx), std::move(to_me), 2 * rounds));
  auto round = [&]() -> Task<void> {
    for (int i = 0; i < rounds; ++i) {
      EXPECT_TRUE(to_peer.send(i));
      RecvResult<int> r = co_await my_rx.recv();
      EXPECT_EQ(r ? *r : -1, i + 1);
    }
  };
  co_await round();  // warm-up: frame pools
  const std::uint64_t before = heap_allocations();
  co_await round();
  const std::uint64_t allocations = heap_allocations() - before;
  co_await peer;
  co_return allocations;
}

TEST(BroadcastAllocation, WaitingRecvDoesNotAllocate) {
  if (kFramePoolDisabled) GTEST_SKIP() << "frame pool disabled (ASan)";
  Runtime rt = Runtime::Builder().worker_threads(2).build();
  EXPECT_EQ(rt.block_on(waiting_recv_allocations(1000)), 0u);
}

TEST(BroadcastAllocation, SendAndTryRecvDoNotAllocate) {
  if (kFramePoolDisabled) GTEST_SKIP() << "frame pool disabled (ASan)";
  auto [tx, rx] = broadcast::channel<std::uint64_t>(64);
  std::array<Receiver<std::uint64_t>, 3> more = {tx.subscribe(), tx.subscribe(), rx};
  const std::uint64_t before = heap_allocations();
  for (std::uint64_t i = 0; i < 10'000; ++i) {
    ASSERT_TRUE(tx.send(i));
    ASSERT_EQ(*rx.try_recv(), i);
    for (auto& r : more)
      ASSERT_EQ(*r.try_recv(), i);
  }
  EXPECT_EQ(heap_allocations() - before, 0u);
}

// ---- stress: 2 senders x N values, 4 receivers, capacity 16 ----

struct Tally {
  std::uint64_t received = 0;
  std::uint64_t missed = 0;
  std::uint64_t order_violations = 0;
  std::uint64_t timeouts = 0;
};

constexpr std::uint64_t kSenderShift = 32;

Task<void> stress_sender(Sender<std::uint64_t> tx, std::uint64_t id, std::uint64_t count) {
  for (std::uint64_t i = 0; i < count; ++i) {
    SendResult<std::uint64_t> r = tx.send(id << kSenderShift | i);
    EXPECT_TRUE(r) << "the receivers are alive until the channel closes";
    if (i % (id == 0 ? 2 : 16) == 0)
      co_await volt::yield_now();  // let the receivers keep up, often
  }
}

// mode 0: plain recv; 1: recv inside random short timeouts (cancelled
// often); 2: recv inside zero timeouts (one try) mixed with plain recv.
Task<Tally> stress_receiver(Receiver<std::uint64_t> rx, int mode, std::uint32_t seed) {
  Tally tally;
  std::mt19937 rng(seed);
  std::array<std::int64_t, 2> last = {-1, -1};
  for (;;) {
    std::optional<RecvResult<std::uint64_t>> got;
    const std::uint32_t pick = rng() % 4;
    if (mode == 1 && pick != 0) {
      Expected<RecvResult<std::uint64_t>> t =
          co_await volt::timeout(std::chrono::microseconds(rng() % 1500), rx.recv());
      if (!t) {
        ++tally.timeouts;
        continue;
      }
      got.emplace(std::move(*t));
    } else if (mode == 2 && pick < 2) {
      Expected<RecvResult<std::uint64_t>> t = co_await volt::timeout(0ms, rx.recv());
      if (!t) {
        ++tally.timeouts;
        continue;
      }
      got.emplace(std::move(*t));
    } else {
      RecvResult<std::uint64_t> r = co_await rx.recv();
      got.emplace(std::move(r));
    }
    RecvResult<std::uint64_t>& r = *got;
    if (r) {
      ++tally.received;
      const std::uint64_t sender = *r >> kSenderShift;
      const auto seq = static_cast<std::int64_t>(*r & ((std::uint64_t{1} << kSenderShift) - 1));
      if (sender > 1 || seq <= last[sender]) ++tally.order_violations;
      if (sender <= 1) last[sender] = seq;
    } else if (r.error() == errc::lagged) {
      EXPECT_GT(r.missed(), 0u);
      tally.missed += r.missed();
    } else {
      EXPECT_EQ(r.error(), errc::closed);
      break;
    }
  }
  co_return tally;
}

class BroadcastStress : public ::testing::TestWithParam<Flavour> {};
INSTANTIATE_TEST_SUITE_P(Workers, BroadcastStress, ::testing::Values(kMultiThread2, kMultiThread4),
                         FlavourName());

TEST_P(BroadcastStress, EveryReceiverAccountsForEveryValueSent) {
  Runtime rt = make_runtime(GetParam());
  const std::uint64_t per_sender = scale(100'000);
  auto [tx, rx] = broadcast::channel<std::uint64_t>(16);
  // Every receiver exists before the first send: each must account for all.
  std::vector<JoinHandle<Tally>> receivers;
  receivers.push_back(rt.spawn(stress_receiver(tx.subscribe(), 0, 1)));
  receivers.push_back(rt.spawn(stress_receiver(tx.subscribe(), 1, 2)));
  receivers.push_back(rt.spawn(stress_receiver(tx.subscribe(), 2, 3)));
  receivers.push_back(rt.spawn(stress_receiver(std::move(rx), 1, 4)));
  std::vector<JoinHandle<void>> senders;
  senders.push_back(rt.spawn(stress_sender(tx, 0, per_sender)));
  senders.push_back(rt.spawn(stress_sender(std::move(tx), 1, per_sender)));
  for (auto& s : senders)
    s.join();
  std::uint64_t lagged_total = 0;
  std::uint64_t timeouts_total = 0;
  for (auto& h : receivers) {
    const Tally t = h.join();
    EXPECT_EQ(t.received + t.missed, 2 * per_sender)
        << "received " << t.received << " missed " << t.missed;
    EXPECT_EQ(t.order_violations, 0u);
    lagged_total += t.missed;
    timeouts_total += t.timeouts;
  }
  // Not assertions (scheduling decides), but worth seeing when it fails.
  std::printf("  [lost to lag: %llu, cancelled waits: %llu]\n",
              static_cast<unsigned long long>(lagged_total),
              static_cast<unsigned long long>(timeouts_total));
}

// Receivers dropped, copied and resubscribed while values flow: the values'
// lifetimes stay exact (nothing leaked, nothing destroyed twice).
TEST(BroadcastStress, ReceiversComingAndGoingKeepValueLifetimesExact) {
  LifeCounters counters;
  {
    auto [tx, rx] = broadcast::channel<Tracked>(8);
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&, t, mine = tx.subscribe()]() mutable {
        std::mt19937 rng(static_cast<std::uint32_t>(t));
        while (!stop.load()) {
          switch (rng() % 8) {
            case 0:
              mine = mine.resubscribe();
              break;
            case 1: {
              Receiver<Tracked> copy = mine;
              for (int k = 0; k < 3; ++k)
                (void)copy.try_recv();
              break;
            }
            default:
              (void)mine.try_recv();
          }
        }
      });
    }
    const int sends = static_cast<int>(scale(200'000));
    for (int i = 0; i < sends; ++i)
      EXPECT_TRUE(tx.send(Tracked(counters, i)));
    stop.store(true);
    for (auto& th : threads)
      th.join();
    while (rx.try_recv().error() != errc::empty) {
    }
    EXPECT_EQ(counters.live(), 0) << "every value was taken by its last reader or overwritten";
  }
  EXPECT_EQ(counters.live(), 0);
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

}  // namespace
}  // namespace volt::test
