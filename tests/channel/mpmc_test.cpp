// Tests of the bounded channel (include/volt/channel/mpmc.hpp and the waiter
// protocol of include/volt/detail/channel_waiters.hpp): the ring (capacity,
// FIFO, wrap-around at any capacity), closing from either side and by the
// last handle, bad input, the blocking forms, waiting and waking on both
// sides, cancellation losing nothing, re-awaiting after a timeout, no
// allocation while waiting, and the 4 x 4 exactly-once stress with random
// cancellation (run under TSan in CI).
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/runtime_support.hpp"
#include "volt/channel/broadcast.hpp"
#include "volt/channel/mpmc.hpp"
#include "volt/channel/mpsc.hpp"
#include "volt/channel/oneshot.hpp"
#include "volt/channel/watch.hpp"
#include "volt/task/select.hpp"
#include "volt/time/sleep.hpp"
#include "volt/time/timeout.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

std::error_code code_of(const SendResult<int>& r) {
  return r.error();
}

// ---- the ring, without a runtime ----

TEST(MpmcRing, HoldsExactlyCapacityValuesInOrder) {
  for (std::size_t capacity : {1u, 2u, 3u, 7u, 16u, 100u}) {
    auto [tx, rx] = mpmc::channel<int>(capacity);
    for (std::size_t i = 0; i < capacity; ++i)
      ASSERT_TRUE(tx.try_send(static_cast<int>(i))) << "capacity " << capacity << ", send " << i;
    SendResult<int> over = tx.try_send(-1);
    ASSERT_FALSE(over) << "capacity " << capacity << " took one more";
    EXPECT_EQ(code_of(over), make_error_code(errc::full));
    EXPECT_EQ(over.take_back(), -1) << "the refused value was not handed back";
    EXPECT_EQ(rx.len(), capacity);
    for (std::size_t i = 0; i < capacity; ++i) {
      Expected<int> v = rx.try_recv();
      ASSERT_TRUE(v);
      EXPECT_EQ(*v, static_cast<int>(i));
    }
    EXPECT_EQ(rx.try_recv().error(), make_error_code(errc::empty));
    EXPECT_TRUE(rx.is_empty());
  }
}

TEST(MpmcRing, WrapsAroundManyLapsAtAnyCapacity) {
  for (std::size_t capacity : {1u, 3u, 5u, 8u, 13u}) {
    auto [tx, rx] = mpmc::channel<std::uint64_t>(capacity);
    std::uint64_t sent = 0;
    std::uint64_t received = 0;
    std::mt19937 rng(static_cast<unsigned>(capacity));
    while (received < 10'000) {
      // A random number of sends then receives, so head and tail sit at
      // every offset from each other and from the end of a lap.
      for (int k = static_cast<int>(rng() % (capacity + 1)); k > 0; --k)
        if (tx.try_send(sent)) ++sent;
      for (int k = static_cast<int>(rng() % (capacity + 1)); k > 0; --k) {
        Expected<std::uint64_t> v = rx.try_recv();
        if (!v) {
          ASSERT_EQ(v.error(), make_error_code(errc::empty));
          ASSERT_EQ(received, sent) << "empty while values were in it";
          break;
        }
        ASSERT_EQ(*v, received) << "capacity " << capacity;
        ++received;
      }
      ASSERT_LE(sent - received, capacity);
      ASSERT_EQ(rx.len(), sent - received);
    }
  }
}

// Values of 8, 24 and 64 bytes: slots of 16 bytes (four to a cache line),
// 32 bytes (two) and 72 bytes (a line or more, kept dense).
template <std::size_t kWords>
struct Words {
  std::array<std::uint64_t, kWords> w{};
  static Words of(std::uint64_t n) {
    Words v;
    v.w.fill(n);
    return v;
  }
  bool holds(std::uint64_t n) const {
    return std::all_of(w.begin(), w.end(), [n](std::uint64_t x) { return x == n; });
  }
};

// The ring spreads consecutive positions over cache lines within blocks of
// up to 256 lines (Channel::slot_at). Every position of every lap must be a
// slot of its own: fill the ring to capacity and drain it, twice, then
// send and receive in random runs for several laps, checking every value.
template <class V>
void fill_drain_and_wrap(std::size_t capacity) {
  auto [tx, rx] = mpmc::channel<V>(capacity);
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
  for (int round = 0; round < 2; ++round) {
    for (std::size_t i = 0; i < capacity; ++i)
      ASSERT_TRUE(tx.try_send(V::of(sent++))) << "capacity " << capacity << ", send " << i;
    ASSERT_FALSE(tx.try_send(V::of(0))) << "capacity " << capacity << " took one more";
    for (std::size_t i = 0; i < capacity; ++i) {
      Expected<V> v = rx.try_recv();
      ASSERT_TRUE(v) << "capacity " << capacity << ", receive " << i;
      ASSERT_TRUE(v->holds(received++)) << "capacity " << capacity << ", receive " << i;
    }
    ASSERT_TRUE(rx.is_empty());
  }
  std::mt19937 rng(static_cast<unsigned>(capacity));
  const std::uint64_t until = received + 5 * capacity + 1000;
  while (received < until) {
    for (std::size_t k = rng() % (capacity + 1); k > 0; --k)
      if (tx.try_send(V::of(sent))) ++sent;
    for (std::size_t k = rng() % (capacity + 1); k > 0; --k) {
      Expected<V> v = rx.try_recv();
      if (!v) {
        ASSERT_EQ(received, sent) << "empty while values were in it";
        break;
      }
      ASSERT_TRUE(v->holds(received)) << "capacity " << capacity << ", value " << received;
      ++received;
    }
    ASSERT_EQ(rx.len(), sent - received);
  }
}

TEST(MpmcRing, EveryPositionIsASlotOfItsOwnAtBlockBoundaries) {
  for (std::size_t capacity :
       {1u, 2u, 3u, 4u, 5u, 8u, 9u, 63u, 64u, 65u, 1000u, 1023u, 1024u, 1025u, 4097u, 9000u}) {
    fill_drain_and_wrap<Words<1>>(capacity);
    fill_drain_and_wrap<Words<3>>(capacity);
    fill_drain_and_wrap<Words<8>>(capacity);
  }
}

TEST(MpmcRing, BadCapacityIsRefused) {
  for (std::size_t capacity : {std::size_t{0}, mpmc::kMaxCapacity + 1}) {
    try {
      (void)mpmc::channel<int>(capacity);
      FAIL() << "capacity " << capacity << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), make_error_code(errc::invalid_argument));
    }
  }
}

TEST(MpmcRing, CloseFailsSendsAndLetsReceiversDrain) {
  auto [tx, rx] = mpmc::channel<int>(4);
  ASSERT_TRUE(tx.try_send(1));
  ASSERT_TRUE(tx.try_send(2));
  rx.close();
  EXPECT_TRUE(tx.is_closed());
  SendResult<int> refused = tx.try_send(3);
  EXPECT_EQ(code_of(refused), make_error_code(errc::closed));
  EXPECT_EQ(refused.take_back(), 3);
  EXPECT_EQ(*rx.try_recv(), 1);
  EXPECT_EQ(*rx.try_recv(), 2);
  EXPECT_EQ(rx.try_recv().error(), make_error_code(errc::closed));
}

TEST(MpmcRing, LastSenderGoneClosesAfterTheValuesSent) {
  auto [tx, rx] = mpmc::channel<int>(4);
  {
    mpmc::Sender<int> second = tx;
    ASSERT_TRUE(second.try_send(7));
    mpmc::Sender<int> gone = std::move(tx);
  }
  EXPECT_EQ(*rx.try_recv(), 7);
  EXPECT_EQ(rx.try_recv().error(), make_error_code(errc::closed));
}

TEST(MpmcRing, OneSenderOfSeveralGoneDoesNotClose) {
  auto [tx, rx] = mpmc::channel<int>(4);
  { mpmc::Sender<int> copy = tx; }
  EXPECT_FALSE(rx.is_closed());
  EXPECT_EQ(rx.try_recv().error(), make_error_code(errc::empty));
}

TEST(MpmcRing, LastReceiverGoneFailsSendsAtOnce) {
  auto [tx, rx] = mpmc::channel<int>(4);
  {
    mpmc::Receiver<int> copy = rx;
    mpmc::Receiver<int> gone = std::move(rx);
  }
  EXPECT_EQ(code_of(tx.try_send(1)), make_error_code(errc::closed));
}

TEST(MpmcRing, MovedFromHandlesBehaveAsClosed) {
  auto [tx, rx] = mpmc::channel<int>(4);
  mpmc::Sender<int> tx2 = std::move(tx);
  mpmc::Receiver<int> rx2 = std::move(rx);
  SendResult<int> r = tx.try_send(5);  // NOLINT(bugprone-use-after-move): the point
  EXPECT_EQ(code_of(r), make_error_code(errc::closed));
  EXPECT_EQ(r.take_back(), 5);
  EXPECT_EQ(rx.try_recv().error(), make_error_code(errc::closed));  // NOLINT
  EXPECT_TRUE(tx.is_closed());
  EXPECT_TRUE(rx.is_closed());
  EXPECT_EQ(rx.recv_blocking(), std::nullopt);
  EXPECT_EQ(code_of(tx.send_blocking(6)), make_error_code(errc::closed));
  EXPECT_FALSE(tx2.is_closed()) << "the moved-to handles still own the channel";
}

TEST(MpmcRing, ValuesLeftInTheChannelAreDestroyedWithIt) {
  auto tracked = std::make_shared<int>(0);
  {
    auto [tx, rx] = mpmc::channel<std::shared_ptr<int>>(8);
    for (int i = 0; i < 5; ++i)
      ASSERT_TRUE(tx.try_send(tracked));
    ASSERT_TRUE(rx.try_recv());  // one taken, four left in the ring
    EXPECT_EQ(tracked.use_count(), 5);
  }
  EXPECT_EQ(tracked.use_count(), 1) << "values in a dropped channel leaked";
}

TEST(MpmcRing, MoveOnlyValues) {
  auto [tx, rx] = mpmc::channel<std::unique_ptr<std::string>>(2);
  ASSERT_TRUE(tx.try_send(std::make_unique<std::string>("a")));
  Expected<std::unique_ptr<std::string>> v = rx.try_recv();
  ASSERT_TRUE(v);
  EXPECT_EQ(**v, "a");
}

// ---- blocking forms (plain threads) ----

TEST(MpmcBlocking, SendAndReceiveAcrossThreadsExactlyOnce) {
  auto [tx, rx] = mpmc::channel<int>(2);  // small: both sides block often
  constexpr int kPerProducer = static_cast<int>(scale(20'000));
  std::vector<std::thread> threads;
  std::atomic<long long> sum{0};
  std::atomic<int> count{0};
  for (int p = 0; p < 2; ++p) {
    threads.emplace_back([tx = tx, p]() mutable {
      for (int i = 0; i < kPerProducer; ++i)
        ASSERT_TRUE(tx.send_blocking(p * kPerProducer + i));
    });
  }
  for (int c = 0; c < 2; ++c) {
    threads.emplace_back([rx = rx, &sum, &count]() mutable {
      while (std::optional<int> v = rx.recv_blocking()) {
        sum.fetch_add(*v, std::memory_order_relaxed);
        count.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  threads[0].join();
  threads[1].join();
  tx = mpmc::Sender<int>();  // the last sender: receivers drain and stop
  threads[2].join();
  threads[3].join();
  const long long n = 2LL * kPerProducer;
  EXPECT_EQ(count.load(), n);
  EXPECT_EQ(sum.load(), n * (n - 1) / 2);
}

TEST(MpmcBlocking, CloseWakesABlockedSenderWithItsValue) {
  auto [tx, rx] = mpmc::channel<int>(1);
  ASSERT_TRUE(tx.try_send(1));
  std::thread closer([rx = rx]() mutable {
    std::this_thread::sleep_for(20ms);
    rx.close();
  });
  SendResult<int> r = tx.send_blocking(2);
  closer.join();
  EXPECT_EQ(code_of(r), make_error_code(errc::closed));
  EXPECT_EQ(r.take_back(), 2);
}

TEST(MpmcBlocking, RefusedOnARuntimeThread) {
  Runtime rt = Runtime::Builder::current_thread().build();
  auto [tx, rx] = mpmc::channel<int>(1);
  const std::error_code got = rt.block_on([](mpmc::Receiver<int>* r) -> Task<std::error_code> {
    try {
      (void)r->recv_blocking();
    } catch (const Error& e) {
      co_return e.code();
    }
    co_return std::error_code();
  }(&rx));
  EXPECT_EQ(got, make_error_code(errc::blocking_in_runtime));
}

// ---- waiting, on the runtimes ----

class MpmcTest : public ::testing::TestWithParam<Flavour> {};
INSTANTIATE_TEST_SUITE_P(Flavours, MpmcTest,
                         ::testing::Values(kMultiThread1, kMultiThread2, kCurrentThread),
                         FlavourName());

Task<std::vector<int>> receive_all(mpmc::Receiver<int> rx) {
  std::vector<int> got;
  for (;;) {
    std::optional<int> v = co_await rx.recv();
    if (!v) break;
    got.push_back(*v);
  }
  co_return got;
}

TEST_P(MpmcTest, ReceiverWaitsForValuesAndEndsWhenSendersAreGone) {
  Runtime rt = make_runtime(GetParam());
  auto [tx, rx] = mpmc::channel<int>(2);
  JoinHandle<std::vector<int>> consumer = rt.spawn(receive_all(std::move(rx)));
  rt.block_on([](mpmc::Sender<int> tx) -> Task<void> {
    for (int i = 0; i < 100; ++i) {
      SendResult<int> r = co_await tx.send(i);  // waits for room: capacity 2
      EXPECT_TRUE(r);
      if (i % 7 == 0) co_await sleep(100us);  // let the receiver wait too
    }
  }(std::move(tx)));
  std::vector<int> got = consumer.join();
  std::vector<int> want(100);
  for (int i = 0; i < 100; ++i)
    want[i] = i;
  EXPECT_EQ(got, want);
}

Task<int> send_and_report(mpmc::Sender<int> tx, int value) {
  SendResult<int> r = co_await tx.send(std::move(value));
  co_return r ? -1 : r.take_back();
}

Task<bool> receive_expecting_close(mpmc::Receiver<int> rx) {
  std::optional<int> v = co_await rx.recv();
  co_return !v.has_value();
}

TEST_P(MpmcTest, CloseWakesWaitingReceiversAndSenders) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    auto [tx, rx] = mpmc::channel<int>(1);
    EXPECT_TRUE(tx.try_send(0));
    JoinHandle<int> blocked_sender = volt::spawn(send_and_report(tx, 42));  // full: waits
    co_await sleep(2ms);
    rx.close();
    EXPECT_EQ(co_await blocked_sender, 42) << "the closed send lost its value";
    EXPECT_EQ(*rx.try_recv(), 0) << "close lost the value already sent";

    auto [tx2, rx2] = mpmc::channel<int>(1);
    JoinHandle<bool> blocked_receiver = volt::spawn(receive_expecting_close(rx2));
    co_await sleep(2ms);
    tx2.close();
    EXPECT_TRUE(co_await blocked_receiver);
  }());
}

TEST_P(MpmcTest, TimedOutReceiveTakesNothing) {
  Runtime rt = make_runtime(GetParam());
  auto [tx, rx] = mpmc::channel<int>(4);
  const bool ok = rt.block_on([](mpmc::Sender<int> tx, mpmc::Receiver<int> rx) -> Task<bool> {
    Expected<std::optional<int>> first = co_await timeout(1ms, rx.recv());
    if (first || first.error() != make_error_code(errc::timed_out)) co_return false;
    EXPECT_TRUE(tx.try_send(9));
    std::optional<int> v = co_await rx.recv();
    co_return v == 9;
  }(tx, rx));
  EXPECT_TRUE(ok);
}

TEST_P(MpmcTest, AReceiveInterruptedByATimeoutKeepsItsPlaceAndCanBeAwaitedAgain) {
  Runtime rt = make_runtime(GetParam());
  auto [tx, rx] = mpmc::channel<int>(4);
  auto sender = rt.spawn([](mpmc::Sender<int> tx) -> Task<void> {
    co_await sleep(20ms);
    EXPECT_TRUE(tx.try_send(5));
  }(tx));
  const int got = rt.block_on([](mpmc::Receiver<int> rx) -> Task<int> {
    auto op = rx.recv();
    int timeouts = 0;
    for (;;) {
      Expected<std::optional<int>> r = co_await timeout(1ms, op);
      if (r) co_return timeouts > 0 ? r->value_or(-1) : -2;  // -2: never timed out
      ++timeouts;
    }
  }(rx));
  sender.join();
  EXPECT_EQ(got, 5) << "the re-awaited receive did not get the value (or never timed out)";
}

// A woken receiver that is destroyed before it runs passes its wake-up on:
// two receivers wait, one value is sent, the woken one is aborted; the other
// must get the value.
TEST_P(MpmcTest, AWokenReceiverThatIsCancelledPassesTheWakeUpOn) {
  if (GetParam().current_thread) GTEST_SKIP() << "needs the abort to race the wake-up";
  Runtime rt = make_runtime(GetParam());
  for (int round = 0; round < static_cast<int>(scale(200)); ++round) {
    auto [tx, rx] = mpmc::channel<int>(1);
    std::atomic<int> got{0};
    auto receiver = [](mpmc::Receiver<int> rx, std::atomic<int>* got) -> Task<void> {
      std::optional<int> v = co_await rx.recv();
      if (v) got->fetch_add(1);
    };
    JoinHandle<void> a = rt.spawn(receiver(rx, &got));
    JoinHandle<void> b = rt.spawn(receiver(rx, &got));
    std::this_thread::sleep_for(200us);
    ASSERT_TRUE(tx.try_send(1));
    a.abort();
    // Exactly one value: b gets it unless a took it before the abort.
    ASSERT_TRUE(wait_until([&] { return got.load() == 1; }))
        << "round " << round << ": lost wake-up";
    tx.close();  // lets the one still waiting (if any) finish
    try {
      a.join();
    } catch (const Error&) {
    }
    b.join();
    EXPECT_EQ(got.load(), 1);
  }
}

// ---- allocations ----

Task<std::uint64_t> pingpong_allocations(int rounds) {
  // Not structured bindings: the lambda below captures these (clang 14
  // cannot capture a structured binding).
  auto there = mpmc::channel<int>(1);
  auto back = mpmc::channel<int>(1);
  mpmc::Sender<int>& to_peer = there.first;
  mpmc::Receiver<int>& peer_rx = there.second;
  mpmc::Sender<int>& to_me = back.first;
  mpmc::Receiver<int>& my_rx = back.second;
  JoinHandle<void> peer =
      volt::spawn([](mpmc::Receiver<int> rx, mpmc::Sender<int> tx, int rounds) -> Task<void> {
        for (int i = 0; i < 2 * rounds; ++i) {
          std::optional<int> v = co_await rx.recv();
          SendResult<int> r = co_await tx.send(*v + 1);
          EXPECT_TRUE(r);
        }
      }(std::move(peer_rx), std::move(to_me), rounds));
  auto round = [&]() -> Task<void> {
    for (int i = 0; i < rounds; ++i) {
      SendResult<int> r = co_await to_peer.send(i);
      EXPECT_TRUE(r);
      std::optional<int> v = co_await my_rx.recv();
      EXPECT_EQ(v, i + 1);
    }
  };
  co_await round();  // warm-up: frame pools
  const std::uint64_t before = heap_allocations();
  co_await round();
  const std::uint64_t allocations = heap_allocations() - before;
  co_await peer;
  co_return allocations;
}

TEST(MpmcAllocation, WaitingSendAndReceiveDoNotAllocate) {
  if (kFramePoolDisabled) GTEST_SKIP() << "frame pool disabled (ASan)";
  Runtime rt = Runtime::Builder().worker_threads(2).build();
  EXPECT_EQ(rt.block_on(pingpong_allocations(1000)), 0u);
}

TEST(MpmcAllocation, TrySendAndTryRecvDoNotAllocate) {
  auto [tx, rx] = mpmc::channel<std::uint64_t>(64);
  const std::uint64_t before = heap_allocations();
  for (std::uint64_t i = 0; i < 10'000; ++i) {
    ASSERT_TRUE(tx.try_send(i));
    ASSERT_EQ(*rx.try_recv(), i);
  }
  EXPECT_EQ(heap_allocations() - before, 0u);
}

// ---- the stress: 4 producers x 4 consumers, capacity 16, random cancellation ----

struct StressCounts {
  std::vector<std::atomic<std::uint8_t>> seen;  // per value: times received
  std::atomic<std::uint64_t> received{0};
  std::atomic<std::uint64_t> order_violations{0};
  explicit StressCounts(std::size_t n) : seen(n) {}
};

constexpr std::uint64_t kProducers = 4;
constexpr std::uint64_t kConsumers = 4;

// Producer p sends p * per + i for i in [0, per). Some sends run under a
// timeout: a timed-out send sent nothing and is retried (with the value kept
// by re-awaiting the same operation, or by a new send of the same value).
Task<void> stress_producer(mpmc::Sender<std::uint64_t> tx, std::uint64_t p, std::uint64_t per,
                           std::uint32_t seed) {
  std::minstd_rand rng(seed);
  for (std::uint64_t i = 0; i < per; ++i) {
    const std::uint64_t value = p * per + i;
    const unsigned dice = rng() % 16;
    if (dice == 0) {
      // A new operation per attempt: a cancelled Send destroys its copy.
      for (;;) {
        Expected<SendResult<std::uint64_t>> r =
            co_await timeout(std::chrono::microseconds(rng() % 50), tx.send(std::uint64_t{value}));
        if (r) {
          EXPECT_TRUE(*r);
          break;
        }
      }
    } else if (dice == 1) {
      auto op = tx.send(std::uint64_t{value});  // kept: re-awaited after a timeout
      for (;;) {
        Expected<SendResult<std::uint64_t>> r =
            co_await timeout(std::chrono::microseconds(rng() % 50), op);
        if (r) {
          EXPECT_TRUE(*r);
          break;
        }
      }
    } else {
      SendResult<std::uint64_t> r = co_await tx.send(std::uint64_t{value});
      EXPECT_TRUE(r);
    }
  }
}

Task<void> stress_consumer(mpmc::Receiver<std::uint64_t> rx, StressCounts* counts,
                           std::uint64_t per, std::uint32_t seed) {
  std::minstd_rand rng(seed);
  std::vector<std::uint64_t> last(kProducers, 0);  // 1 + the last index seen per producer
  for (;;) {
    std::optional<std::uint64_t> v;
    const unsigned dice = rng() % 8;
    if (dice == 0) {
      Expected<std::optional<std::uint64_t>> r =
          co_await timeout(std::chrono::microseconds(rng() % 50), rx.recv());
      if (!r) continue;  // timed out: took nothing
      v = std::move(*r);
    } else if (dice == 1) {
      // select against a timer: a receive that loses is cancelled.
      auto r = co_await select(rx.recv(), sleep(std::chrono::microseconds(rng() % 50)));
      if (r.index() == 1) continue;
      v = std::move(std::get<0>(r));
    } else {
      v = co_await rx.recv();
    }
    if (!v) break;
    const std::uint64_t p = *v / per;
    const std::uint64_t i = *v % per;
    if (i + 1 <= last[p]) counts->order_violations.fetch_add(1, std::memory_order_relaxed);
    last[p] = i + 1;
    counts->seen[*v].fetch_add(1, std::memory_order_relaxed);
    counts->received.fetch_add(1, std::memory_order_relaxed);
  }
}

TEST_P(MpmcTest, FourByFourExactlyOnceWithRandomCancellation) {
  Runtime rt = make_runtime(GetParam());
  const std::uint64_t per = scale(250'000) / (GetParam().current_thread ? 4 : 1);
  StressCounts counts(kProducers * per);
  auto [tx, rx] = mpmc::channel<std::uint64_t>(16);
  std::vector<JoinHandle<void>> producers;
  std::vector<JoinHandle<void>> consumers;
  for (std::uint64_t c = 0; c < kConsumers; ++c)
    consumers.push_back(rt.spawn(stress_consumer(rx, &counts, per, 1000 + c)));
  for (std::uint64_t p = 0; p < kProducers; ++p)
    producers.push_back(rt.spawn(stress_producer(tx, p, per, 7 + p)));
  tx = mpmc::Sender<std::uint64_t>();
  rx = mpmc::Receiver<std::uint64_t>();
  for (auto& h : producers)
    h.join();
  for (auto& h : consumers)
    h.join();
  EXPECT_EQ(counts.received.load(), kProducers * per);
  EXPECT_EQ(counts.order_violations.load(), 0u) << "one producer's values arrived out of order";
  std::uint64_t missing = 0;
  std::uint64_t duplicated = 0;
  for (auto& s : counts.seen) {
    const auto n = s.load();
    missing += n == 0;
    duplicated += n > 1;
  }
  EXPECT_EQ(missing, 0u);
  EXPECT_EQ(duplicated, 0u);
}

// close() while senders and receivers wait: every send that reported success
// is received exactly once, every refused send got its value back, and
// everybody finishes.
Task<std::uint64_t> send_until_closed(mpmc::Sender<std::uint64_t> tx, std::uint64_t base,
                                      std::vector<std::uint8_t>* sent) {
  std::uint64_t count = 0;
  for (std::uint64_t i = 0;; ++i) {
    SendResult<std::uint64_t> r = co_await tx.send(base + i);
    if (!r) {
      EXPECT_EQ(r.error(), make_error_code(errc::closed));
      EXPECT_EQ(r.take_back(), base + i) << "a refused send lost its value";
      co_return count;
    }
    (*sent)[i] = 1;
    ++count;
  }
}

TEST_P(MpmcTest, CloseWhileSendersAndReceiversWaitLosesNothing) {
  Runtime rt = make_runtime(GetParam());
  constexpr std::uint64_t kSpan = 1'000'000;  // values of producer p: p * kSpan + i
  for (int round = 0; round < static_cast<int>(scale(20)); ++round) {
    auto [tx, rx] = mpmc::channel<std::uint64_t>(4);
    StressCounts counts(kProducers * kSpan);
    std::vector<std::vector<std::uint8_t>> sent(kProducers, std::vector<std::uint8_t>(kSpan, 0));
    std::vector<JoinHandle<std::uint64_t>> producers;
    std::vector<JoinHandle<void>> consumers;
    for (std::uint64_t c = 0; c < kConsumers; ++c)
      consumers.push_back(rt.spawn(stress_consumer(rx, &counts, kSpan, 50 + c)));
    for (std::uint64_t p = 0; p < kProducers; ++p)
      producers.push_back(rt.spawn(send_until_closed(tx, p * kSpan, &sent[p])));
    std::this_thread::sleep_for(std::chrono::microseconds(200 + 300 * (round % 4)));
    (round % 2 ? tx : mpmc::Sender<std::uint64_t>(tx)).close();
    std::uint64_t total = 0;
    for (auto& h : producers)
      total += h.join();
    for (auto& h : consumers)
      h.join();
    EXPECT_EQ(counts.received.load(), total) << "round " << round;
    for (std::uint64_t p = 0; p < kProducers; ++p)
      for (std::uint64_t i = 0; i < kSpan && (sent[p][i] || counts.seen[p * kSpan + i].load()); ++i)
        ASSERT_EQ(counts.seen[p * kSpan + i].load(), sent[p][i])
            << "value " << p * kSpan + i << ": sent " << int(sent[p][i]) << " times, received "
            << int(counts.seen[p * kSpan + i].load());
  }
}

// ---- fairness of senders: woken oldest first, bounded barging ----

Task<void> send_recording(mpmc::Sender<int>* tx, int value, std::atomic<detail::TaskHeader*>* task,
                          std::atomic<bool>* sent) {
  task->store(detail::tls_context.current_task, std::memory_order_release);
  SendResult<int> r = co_await tx->send(value);
  EXPECT_TRUE(r);
  sent->store(true, std::memory_order_release);
}

// Capacity 1, one value buffered, send(2) queued; recv() frees the slot and
// wakes the queued send, but a try_send that runs first may take it (the
// relaxed mode). Nothing is lost: the woken send finds no room, goes back
// to the front, and delivers after the next receive.
Task<void> a_barged_sender_still_delivers() {
  auto [tx, rx] = mpmc::channel<int>(1);
  EXPECT_TRUE(tx.try_send(1));
  std::atomic<detail::TaskHeader*> task{nullptr};
  std::atomic<bool> sent{false};
  JoinHandle<void> sender = spawn(send_recording(&tx, 2, &task, &sent));
  // Queued: the task ran and is suspended in its send (neither running nor
  // notified).
  while (task.load(std::memory_order_acquire) == nullptr ||
         !task.load(std::memory_order_acquire)->state.load().is_idle())
    co_await yield_now();
  EXPECT_EQ(co_await rx.recv(), std::optional<int>(1));
  SendResult<int> barged = tx.try_send(1337);
  if (barged) {
    EXPECT_EQ(co_await rx.recv(), std::optional<int>(1337));
    EXPECT_EQ(co_await rx.recv(), std::optional<int>(2)) << "the barged send delivers next";
  } else {
    // Multi-thread: the woken send retried first and took the slot.
    EXPECT_EQ(barged.error(), make_error_code(errc::full));
    EXPECT_EQ(co_await rx.recv(), std::optional<int>(2));
  }
  co_await sender;
  EXPECT_TRUE(sent.load());
  EXPECT_TRUE(tx.try_send(7)) << "nobody waits: the fast path is open";
  EXPECT_EQ(co_await rx.recv(), std::optional<int>(7));
}

TEST_P(MpmcTest, ASenderOvertakenByTrySendStillDelivers) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on(a_barged_sender_still_delivers());
}

// Several queued senders and nobody barging: they are woken, and deliver,
// oldest first.
Task<void> queued_senders_are_served_in_order() {
  auto [tx, rx] = mpmc::channel<int>(1);
  EXPECT_TRUE(tx.try_send(0));
  constexpr int kQueued = 3;
  std::atomic<detail::TaskHeader*> tasks[kQueued];
  std::atomic<bool> sent[kQueued];
  std::vector<JoinHandle<void>> senders;
  for (int i = 0; i < kQueued; ++i) {
    tasks[i].store(nullptr);
    sent[i].store(false);
    senders.push_back(spawn(send_recording(&tx, i + 1, &tasks[i], &sent[i])));
    while (tasks[i].load(std::memory_order_acquire) == nullptr ||
           !tasks[i].load(std::memory_order_acquire)->state.load().is_idle())
      co_await yield_now();
  }
  for (int i = 0; i <= kQueued; ++i)
    EXPECT_EQ(co_await rx.recv(), std::optional<int>(i));
  for (auto& h : senders)
    co_await h;
  EXPECT_TRUE(tx.try_send(7));
}

TEST_P(MpmcTest, QueuedSendersGetFreedSlotsOldestFirst) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on(queued_senders_are_served_in_order());
}

// Many senders on a small channel mixing try_send (retried while full),
// send(), and sends under a timeout (re-awaited, or dropped holding a
// grant); two receivers. Every value arrives exactly once, each sender's in
// the order it sent them, and nobody hangs. (Under TSan in CI.)
Task<void> mixed_sender(mpmc::Sender<std::uint64_t> tx, std::uint64_t p, std::uint64_t per,
                        std::uint32_t seed) {
  std::minstd_rand rng(seed);
  for (std::uint64_t i = 0; i < per; ++i) {
    const std::uint64_t value = p * per + i;
    switch (rng() % 4) {
      case 0:
        for (;;) {
          SendResult<std::uint64_t> r = tx.try_send(std::uint64_t{value});
          if (r) break;
          EXPECT_EQ(r.error(), make_error_code(errc::full));
          co_await yield_now();
        }
        break;
      case 1: {
        auto op = tx.send(std::uint64_t{value});
        for (;;) {
          Expected<SendResult<std::uint64_t>> r =
              co_await timeout(std::chrono::microseconds(rng() % 30), op);
          if (r) {
            EXPECT_TRUE(*r);
            break;
          }
        }
        break;
      }
      case 2:
        for (;;) {
          Expected<SendResult<std::uint64_t>> r = co_await timeout(
              std::chrono::microseconds(rng() % 30), tx.send(std::uint64_t{value}));
          if (r) {
            EXPECT_TRUE(*r);
            break;
          }
        }
        break;
      default: {
        SendResult<std::uint64_t> r = co_await tx.send(std::uint64_t{value});
        EXPECT_TRUE(r);
      }
    }
  }
}

Task<void> fair_receiver(mpmc::Receiver<std::uint64_t> rx, StressCounts* counts,
                         std::uint64_t senders, std::uint64_t per, std::uint32_t seed) {
  std::minstd_rand rng(seed);
  std::vector<std::uint64_t> last(senders, 0);  // 1 + the last index seen per sender
  for (;;) {
    std::optional<std::uint64_t> v;
    if (rng() % 4 == 0) {
      Expected<std::uint64_t> r = rx.try_recv();
      if (!r) {
        if (r.error() == make_error_code(errc::closed)) break;
        co_await yield_now();
        continue;
      }
      v = *r;
    } else {
      v = co_await rx.recv();
    }
    if (!v) break;
    const std::uint64_t p = *v / per;
    const std::uint64_t i = *v % per;
    if (i + 1 <= last[p]) counts->order_violations.fetch_add(1, std::memory_order_relaxed);
    last[p] = i + 1;
    counts->seen[*v].fetch_add(1, std::memory_order_relaxed);
    counts->received.fetch_add(1, std::memory_order_relaxed);
  }
}

TEST_P(MpmcTest, ManySendersOnASmallChannelLoseNothingAndKeepTheirOrder) {
  Runtime rt = make_runtime(GetParam());
  constexpr std::uint64_t kSenders = 6;
  const std::uint64_t per = scale(40'000) / (GetParam().current_thread ? 4 : 1);
  for (std::size_t capacity : {1, 2}) {
    StressCounts counts(kSenders * per);
    auto [tx, rx] = mpmc::channel<std::uint64_t>(capacity);
    std::vector<JoinHandle<void>> senders;
    std::vector<JoinHandle<void>> receivers;
    for (std::uint64_t c = 0; c < 2; ++c)
      receivers.push_back(rt.spawn(fair_receiver(rx, &counts, kSenders, per, 300 + c)));
    for (std::uint64_t p = 0; p < kSenders; ++p)
      senders.push_back(rt.spawn(mixed_sender(tx, p, per, 11 + p)));
    tx = mpmc::Sender<std::uint64_t>();
    rx = mpmc::Receiver<std::uint64_t>();
    for (auto& h : senders)
      h.join();
    for (auto& h : receivers)
      h.join();
    EXPECT_EQ(counts.received.load(), kSenders * per) << "capacity " << capacity;
    EXPECT_EQ(counts.order_violations.load(), 0u)
        << "capacity " << capacity << ": one sender's values arrived out of order";
    std::uint64_t missing = 0;
    std::uint64_t duplicated = 0;
    for (auto& seen : counts.seen) {
      const auto n = seen.load();
      missing += n == 0;
      duplicated += n > 1;
    }
    EXPECT_EQ(missing, 0u) << "capacity " << capacity;
    EXPECT_EQ(duplicated, 0u) << "capacity " << capacity;
  }
}

// ---- Tokio's names: mpsc::channel / Sender / Receiver (this channel), and
// volt::sync::{mpsc, oneshot, broadcast, watch} ----

static_assert(std::is_same_v<mpsc::Sender<int>, mpmc::Sender<int>>);
static_assert(std::is_same_v<mpsc::Receiver<int>, mpmc::Receiver<int>>);
static_assert(mpsc::kMaxCapacity == mpmc::kMaxCapacity);
static_assert(std::is_same_v<decltype(mpsc::channel<int>(1)),
                             std::pair<mpmc::Sender<int>, mpmc::Receiver<int>>>);
static_assert(std::is_same_v<sync::mpsc::Sender<int>, mpmc::Sender<int>>);
static_assert(std::is_same_v<sync::mpsc::UnboundedSender<int>, mpsc::UnboundedSender<int>>);
static_assert(std::is_same_v<sync::oneshot::Sender<int>, oneshot::Sender<int>>);
static_assert(std::is_same_v<sync::broadcast::Receiver<int>, broadcast::Receiver<int>>);
static_assert(std::is_same_v<sync::watch::Receiver<int>, watch::Receiver<int>>);

Task<int> produce_through_mpsc(mpsc::Sender<int> tx, int from) {
  for (int i = from; i < from + 3; ++i) {
    SendResult<int> sent = co_await tx.send(int{i});
    EXPECT_TRUE(sent);
  }
  co_return 0;
}

Task<std::vector<int>> mpsc_round_trip() {
  auto [tx, rx] = mpsc::channel<int>(2);  // bounded: the producers wait for room
  JoinHandle<int> a = spawn(produce_through_mpsc(tx, 0));
  JoinHandle<int> b = spawn(produce_through_mpsc(std::move(tx), 10));
  std::vector<int> got;
  for (;;) {
    std::optional<int> v = co_await rx.recv();
    if (!v) break;  // both senders gone, drained
    got.push_back(*v);
  }
  co_await a;
  co_await b;
  std::sort(got.begin(), got.end());
  co_return got;
}

TEST(MpscNames, BoundedChannelIsTheMpmcChannel) {
  auto [tx, rx] = mpsc::channel<int>(1);
  EXPECT_EQ(tx.capacity(), 1u);
  EXPECT_TRUE(tx.try_send(1));
  EXPECT_EQ(tx.try_send(2).error(), make_error_code(errc::full));
  EXPECT_EQ(*rx.try_recv(), 1);
  EXPECT_EQ(volt_error_of([] { (void)mpsc::channel<int>(0); }), code(errc::invalid_argument));
  Runtime rt = make_runtime(kMultiThread2);
  EXPECT_EQ(rt.block_on(mpsc_round_trip()), (std::vector<int>{0, 1, 2, 10, 11, 12}));
}

}  // namespace
}  // namespace volt::test
