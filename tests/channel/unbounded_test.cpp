// Tests of the unbounded MPSC channel (include/volt/channel/unbounded.hpp):
// FIFO per sender across many blocks, closing from either side and by the
// last sender, values left in the channel destroyed exactly once, moved-from
// handles, a throwing move, the blocking form, waiting and waking (also by
// the drop of every sender), timeouts and re-awaiting an interrupted recv,
// no allocation in steady state or while waiting, block recycling with
// bounded allocation, and a 4-producer stress with a receiver under random
// timeouts (run under TSan in CI).
#include "volt/channel/unbounded.hpp"

#include <gtest/gtest.h>

#include <array>
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
#include "volt/time/sleep.hpp"
#include "volt/time/timeout.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

// ---- the queue, without a runtime ----

TEST(UnboundedQueue, TryRecvGivesValuesInOrderAcrossManyBlocks) {
  auto [tx, rx] = mpsc::unbounded_channel<int>();
  EXPECT_EQ(rx.try_recv().error(), code(errc::empty));
  EXPECT_TRUE(rx.is_empty());
  // Several blocks' worth (32 slots each), then drained, twice (the second
  // round runs over recycled blocks).
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 200; ++i)
      ASSERT_TRUE(tx.send(i));
    EXPECT_EQ(rx.len(), 200u);
    for (int i = 0; i < 200; ++i) {
      Expected<int> v = rx.try_recv();
      ASSERT_TRUE(v) << "round " << round << ", value " << i;
      ASSERT_EQ(*v, i);
    }
    EXPECT_EQ(rx.try_recv().error(), code(errc::empty));
    EXPECT_EQ(rx.len(), 0u);
  }
}

TEST(UnboundedQueue, FifoPerSenderWithInterleavedClones) {
  auto [tx, rx] = mpsc::unbounded_channel<int>();
  std::array<mpsc::UnboundedSender<int>, 3> senders = {tx, tx, tx};
  std::minstd_rand rng(3);
  std::array<int, 3> next_sent{};
  for (int n = 0; n < 1000; ++n) {
    const std::size_t s = rng() % 3;
    ASSERT_TRUE(senders[s].send(static_cast<int>(s) * 10'000 + next_sent[s]++));
  }
  std::array<int, 3> next_received{};
  for (int n = 0; n < 1000; ++n) {
    Expected<int> v = rx.try_recv();
    ASSERT_TRUE(v);
    const int s = *v / 10'000;
    EXPECT_EQ(*v % 10'000, next_received[s]++) << "sender " << s << " out of order";
  }
  EXPECT_EQ(next_received, next_sent);
}

TEST(UnboundedQueue, CloseFailsLaterSendsAndKeepsWhatWasSent) {
  auto [tx, rx] = mpsc::unbounded_channel<std::string>();
  for (int i = 0; i < 40; ++i)
    ASSERT_TRUE(tx.send(std::to_string(i)));
  EXPECT_FALSE(tx.is_closed());
  rx.close();
  rx.close();  // idempotent
  EXPECT_TRUE(tx.is_closed());
  EXPECT_TRUE(rx.is_closed());
  SendResult<std::string> refused = tx.send("late");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), code(errc::closed));
  EXPECT_EQ(refused.take_back(), "late");
  // Refused sends do not count as values to drain.
  EXPECT_EQ(rx.len(), 40u);
  for (int i = 0; i < 40; ++i) {
    Expected<std::string> v = rx.try_recv();
    ASSERT_TRUE(v);
    EXPECT_EQ(*v, std::to_string(i));
  }
  EXPECT_EQ(rx.try_recv().error(), code(errc::closed));
}

TEST(UnboundedQueue, TheLastSenderGoneClosesAfterTheValuesSent) {
  auto [tx, rx] = mpsc::unbounded_channel<int>();
  mpsc::UnboundedSender<int> clone = tx;
  ASSERT_TRUE(tx.send(1));
  ASSERT_TRUE(clone.send(2));
  tx = mpsc::UnboundedSender<int>();
  EXPECT_FALSE(rx.is_closed()) << "one sender is still alive";
  EXPECT_EQ(*rx.try_recv(), 1);
  EXPECT_EQ(*rx.try_recv(), 2);
  EXPECT_EQ(rx.try_recv().error(), code(errc::empty)) << "closed while a sender is alive";
  ASSERT_TRUE(clone.send(3));
  { mpsc::UnboundedSender<int> gone = std::move(clone); }
  EXPECT_TRUE(rx.is_closed());
  EXPECT_EQ(*rx.try_recv(), 3) << "the close overtook a value";
  EXPECT_EQ(rx.try_recv().error(), code(errc::closed));
  EXPECT_EQ(rx.try_recv().error(), code(errc::closed));
}

TEST(UnboundedQueue, ReceiverGoneFailsSendsAndDestroysWhatWasLeft) {
  LifeCounters counters;
  {
    auto [tx, rx] = mpsc::unbounded_channel<Tracked>();
    for (int i = 0; i < 50; ++i)
      ASSERT_TRUE(tx.send(Tracked(counters, i)));
    { mpsc::UnboundedReceiver<Tracked> gone = std::move(rx); }
    EXPECT_EQ(counters.live(), 0) << "the receiver's drop left values alive";
    EXPECT_TRUE(tx.is_closed());
    SendResult<Tracked> refused = tx.send(Tracked(counters, 99));
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error(), code(errc::closed));
    EXPECT_EQ(refused.value_back().value(), 99);
  }
  EXPECT_EQ(counters.live(), 0);
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

TEST(UnboundedQueue, ValuesNeverReceivedAreDestroyedOnceWithTheChannel) {
  LifeCounters counters;
  {
    auto [tx, rx] = mpsc::unbounded_channel<Tracked>();
    for (int i = 0; i < 70; ++i)
      ASSERT_TRUE(tx.send(Tracked(counters, i)));
    for (int i = 0; i < 35; ++i)
      EXPECT_EQ(rx.try_recv()->value(), i);
  }
  EXPECT_EQ(counters.live(), 0);
  EXPECT_EQ(counters.double_destroyed.load(), 0);
  EXPECT_GE(counters.constructed.load(), 70);
}

TEST(UnboundedQueue, MovedFromAndDefaultHandlesBehaveAsClosed) {
  auto [tx, rx] = mpsc::unbounded_channel<int>();
  mpsc::UnboundedSender<int> tx2 = std::move(tx);
  mpsc::UnboundedReceiver<int> rx2 = std::move(rx);
  SendResult<int> r = tx.send(4);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), code(errc::closed));
  EXPECT_EQ(r.take_back(), 4);
  EXPECT_TRUE(tx.is_closed());
  EXPECT_EQ(rx.try_recv().error(), code(errc::closed));
  EXPECT_EQ(rx.recv_blocking(), std::nullopt);
  EXPECT_TRUE(rx.is_closed());
  EXPECT_EQ(rx.len(), 0u);
  rx.close();
  mpsc::UnboundedSender<int> copy_of_empty = tx;
  EXPECT_TRUE(copy_of_empty.is_closed());
  // The moved-to handles work.
  ASSERT_TRUE(tx2.send(6));
  EXPECT_EQ(*rx2.try_recv(), 6);
  // recv() on an empty receiver completes at once with nullopt.
  Runtime rt = Runtime::Builder::current_thread().build();
  EXPECT_EQ(rt.block_on([](mpsc::UnboundedReceiver<int>* rx) -> Task<std::optional<int>> {
    co_return co_await rx->recv();
  }(&rx)),
            std::nullopt);
}

TEST(UnboundedQueue, MoveOnlyValues) {
  auto [tx, rx] = mpsc::unbounded_channel<std::unique_ptr<int>>();
  ASSERT_TRUE(tx.send(std::make_unique<int>(12)));
  Expected<std::unique_ptr<int>> v = rx.try_recv();
  ASSERT_TRUE(v);
  EXPECT_EQ(**v, 12);
}

// Throws from its move constructor when asked to.
struct ThrowsOnMove {
  int value;
  bool throw_on_move;
  ThrowsOnMove(int v, bool t) : value(v), throw_on_move(t) {}
  ThrowsOnMove(ThrowsOnMove&& other) : value(other.value), throw_on_move(other.throw_on_move) {
    if (throw_on_move) throw std::runtime_error("move");
  }
};

TEST(UnboundedQueue, ASendWhoseMoveThrowsDeliversNothingAndBlocksNothing) {
  auto [tx, rx] = mpsc::unbounded_channel<ThrowsOnMove>();
  ASSERT_TRUE(tx.send(ThrowsOnMove(1, false)));
  // The argument itself is built in place; the move into the slot throws.
  EXPECT_THROW((void)tx.send(ThrowsOnMove(2, true)), std::runtime_error);
  ASSERT_TRUE(tx.send(ThrowsOnMove(3, false)));
  EXPECT_EQ(rx.try_recv()->value, 1);
  EXPECT_EQ(rx.try_recv()->value, 3) << "the skipped slot stopped the receiver";
  EXPECT_EQ(rx.try_recv().error(), code(errc::empty));
}

// ---- the blocking form ----

TEST(UnboundedBlocking, ProducerThreadsToABlockedReceiverExactlyOnce) {
  constexpr int kThreads = 3;
  const int per = static_cast<int>(scale(20'000));
  auto [tx, rx] = mpsc::unbounded_channel<int>();
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([tx = tx, t]() mutable {
      for (int i = 0; i < per; ++i) {
        EXPECT_TRUE(tx.send(t * per + i));
        if (i % 1000 == 0) std::this_thread::sleep_for(50us);  // let the receiver block
      }
    });
  }
  tx = mpsc::UnboundedSender<int>();
  std::vector<int> next(kThreads, 0);
  int received = 0;
  while (std::optional<int> v = rx.recv_blocking()) {
    const int t = *v / per;
    EXPECT_EQ(*v % per, next[t]++) << "thread " << t << " out of order";
    ++received;
  }
  for (auto& p : producers)
    p.join();
  EXPECT_EQ(received, kThreads * per);
}

TEST(UnboundedBlocking, RefusedOnARuntimeThread) {
  Runtime rt = Runtime::Builder::current_thread().build();
  auto [tx, rx] = mpsc::unbounded_channel<int>();
  ASSERT_TRUE(tx.send(1));
  const std::error_code e =
      rt.block_on([](mpsc::UnboundedReceiver<int>* rx) -> Task<std::error_code> {
        co_return volt_error_of([&] { (void)rx->recv_blocking(); });
      }(&rx));
  EXPECT_EQ(e, code(errc::blocking_in_runtime));
  EXPECT_EQ(*rx.try_recv(), 1) << "the refused call took the value";
}

// ---- waiting and waking ----

class UnboundedTest : public ::testing::TestWithParam<Flavour> {};
INSTANTIATE_TEST_SUITE_P(Flavours, UnboundedTest,
                         ::testing::Values(kMultiThread1, kMultiThread2, kCurrentThread),
                         FlavourName());

Task<std::vector<int>> receive_all(mpsc::UnboundedReceiver<int> rx) {
  std::vector<int> got;
  for (;;) {
    std::optional<int> v = co_await rx.recv();
    if (!v) break;
    got.push_back(*v);
  }
  co_return got;
}

TEST_P(UnboundedTest, ReceiverWaitsForValuesAndEndsWhenSendersAreGone) {
  Runtime rt = make_runtime(GetParam());
  auto [tx, rx] = mpsc::unbounded_channel<int>();
  JoinHandle<std::vector<int>> consumer = rt.spawn(receive_all(std::move(rx)));
  rt.block_on([](mpsc::UnboundedSender<int> tx) -> Task<void> {
    for (int i = 0; i < 300; ++i) {
      EXPECT_TRUE(tx.send(i));
      if (i % 7 == 0) co_await sleep(100us);  // let the receiver wait
    }
  }(std::move(tx)));
  std::vector<int> got = consumer.join();
  std::vector<int> want(300);
  for (int i = 0; i < 300; ++i)
    want[i] = i;
  EXPECT_EQ(got, want);
}

Task<bool> receive_expecting_close(mpsc::UnboundedReceiver<int>* rx, std::atomic<bool>* waiting) {
  waiting->store(true);
  std::optional<int> v = co_await rx->recv();
  co_return !v.has_value();
}

TEST_P(UnboundedTest, DropOfEverySenderWakesTheWaitingReceiverWithNullopt) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    auto [tx, rx] = mpsc::unbounded_channel<int>();
    mpsc::UnboundedSender<int> clone = tx;
    std::atomic<bool> waiting{false};
    JoinHandle<bool> receiver = volt::spawn(receive_expecting_close(&rx, &waiting));
    while (!waiting.load())
      co_await sleep(100us);
    co_await sleep(1ms);  // now suspended in recv()
    tx = mpsc::UnboundedSender<int>();
    co_await sleep(1ms);
    EXPECT_FALSE(receiver.is_finished()) << "woken while a sender was alive";
    clone = mpsc::UnboundedSender<int>();
    EXPECT_TRUE(co_await receiver);
  }());
}

TEST_P(UnboundedTest, TimedOutReceiveTakesNothing) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    auto [tx, rx] = mpsc::unbounded_channel<int>();
    Expected<std::optional<int>> first = co_await timeout(1ms, rx.recv());
    EXPECT_EQ(first.error(), code(errc::timed_out));
    EXPECT_TRUE(tx.send(9));
    Expected<std::optional<int>> second = co_await timeout(1s, rx.recv());
    EXPECT_TRUE(second);
    if (second) {
      EXPECT_EQ(*second, 9);
    }
  }());
}

TEST_P(UnboundedTest, AReceiveInterruptedByATimeoutCanBeAwaitedAgain) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    auto [tx, rx] = mpsc::unbounded_channel<int>();
    JoinHandle<void> sender = volt::spawn([](mpsc::UnboundedSender<int> tx) -> Task<void> {
      co_await sleep(20ms);  // several timeouts pass first
      EXPECT_TRUE(tx.send(7));
    }(tx));
    auto op = rx.recv();
    int timeouts = 0;
    std::optional<int> got;
    for (;;) {
      // The same operation each time: it stays armed between the awaits.
      Expected<std::optional<int>> r = co_await timeout(500us, op);
      if (r) {
        got = *r;
        break;
      }
      ++timeouts;
    }
    co_await sender;
    EXPECT_EQ(got, 7);
    EXPECT_GE(timeouts, 1) << "never interrupted: the re-await went untested";
    EXPECT_EQ(rx.try_recv().error(), code(errc::empty)) << "received twice";
  }());
}

// A receiver task is aborted at a random moment while a value is sent: the
// value is either what the task returned, or still in the channel.
TEST_P(UnboundedTest, AbortingAWaitingReceiverLosesNoValue) {
  if (GetParam().current_thread) GTEST_SKIP() << "needs the abort to race the receiver's poll";
  Runtime rt = make_runtime(GetParam());
  auto [tx, rx] = mpsc::unbounded_channel<int>();
  std::minstd_rand rng(11);
  const int rounds = static_cast<int>(scale(300));
  int taken_by_task = 0;
  for (int i = 0; i < rounds; ++i) {
    std::atomic<bool> waiting{false};
    JoinHandle<bool> receiver = rt.spawn(
        [](mpsc::UnboundedReceiver<int>* rx, std::atomic<bool>* waiting, int want) -> Task<bool> {
          waiting->store(true);
          std::optional<int> v = co_await rx->recv();
          co_return v == want;
        }(&rx, &waiting, i));
    while (!waiting.load())
      std::this_thread::yield();
    if (rng() % 2) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 100));
    ASSERT_TRUE(tx.send(int{i}));
    if (rng() % 4 != 0) receiver.abort();
    bool got = false;
    try {
      got = receiver.join();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code(errc::cancelled));
    }
    if (got) {
      ++taken_by_task;
    } else {
      Expected<int> left = rx.try_recv();
      ASSERT_TRUE(left) << "round " << i << ": the value was lost";
      EXPECT_EQ(*left, i);
    }
    EXPECT_EQ(rx.try_recv().error(), code(errc::empty)) << "round " << i;
  }
  // Some rounds must have let the receiver run (the unaborted quarter).
  EXPECT_GT(taken_by_task, 0);
}

// ---- allocations ----

Task<std::uint64_t> unbounded_pingpong_allocations(int rounds) {
  auto to_peer_peer_rx_pair =
      mpsc::unbounded_channel<int>();  // not a structured binding: lambdas capture these (clang 14)
  auto& to_peer = to_peer_peer_rx_pair.first;
  auto& peer_rx = to_peer_peer_rx_pair.second;
  auto to_me_my_rx_pair =
      mpsc::unbounded_channel<int>();  // not a structured binding: lambdas capture these (clang 14)
  auto& to_me = to_me_my_rx_pair.first;
  auto& my_rx = to_me_my_rx_pair.second;
  JoinHandle<void> peer =
      volt::spawn([](mpsc::UnboundedReceiver<int> rx, mpsc::UnboundedSender<int> tx) -> Task<void> {
        for (;;) {
          std::optional<int> v = co_await rx.recv();
          if (!v) break;
          EXPECT_TRUE(tx.send(*v + 1));
        }
      }(std::move(peer_rx), std::move(to_me)));
  auto round = [&]() -> Task<void> {
    for (int i = 0; i < rounds; ++i) {
      EXPECT_TRUE(to_peer.send(int{i}));
      std::optional<int> v = co_await my_rx.recv();  // waits: the peer answers
      EXPECT_EQ(v, i + 1);
    }
  };
  co_await round();  // warm-up: frame pools, spare blocks
  const std::uint64_t before = heap_allocations();
  co_await round();
  const std::uint64_t allocations = heap_allocations() - before;
  to_peer = mpsc::UnboundedSender<int>();
  co_await peer;
  co_return allocations;
}

TEST(UnboundedAllocation, WaitingReceiveDoesNotAllocate) {
  if (kFramePoolDisabled) GTEST_SKIP() << "frame pool disabled (ASan)";
  Runtime rt = Runtime::Builder().worker_threads(2).build();
  EXPECT_EQ(rt.block_on(unbounded_pingpong_allocations(2000)), 0u);
}

// Values large enough that a block (32 of them) is above the frame pool's
// largest size class: every block allocation reaches operator new and is
// counted, so these tests see the channel's own block recycling.
using Big = std::array<char, 100>;
static_assert(sizeof(mpsc::detail::Block<Big>) > volt::detail::kMaxPooledSize);

TEST(UnboundedAllocation, SteadyStateSendAndReceiveReuseBlocks) {
  if (kFramePoolDisabled) GTEST_SKIP() << "frame pool disabled (ASan)";
  auto tx_rx_pair =
      mpsc::unbounded_channel<Big>();  // not a structured binding: lambdas capture these (clang 14)
  auto& tx = tx_rx_pair.first;
  auto& rx = tx_rx_pair.second;
  auto exchange = [&](int n) {
    for (int i = 0; i < n; ++i) {
      Big big{};
      big[0] = static_cast<char>(i);
      ASSERT_TRUE(tx.send(big));
      Expected<Big> v = rx.try_recv();
      ASSERT_TRUE(v);
      ASSERT_EQ((*v)[0], static_cast<char>(i));
    }
  };
  exchange(100);  // warm-up: the spare blocks get linked
  const std::uint64_t before = heap_allocations();
  exchange(10'000);  // ~300 blocks' worth
  EXPECT_EQ(heap_allocations() - before, 0u);
}

TEST(UnboundedAllocation, BurstsAllocateBoundedBlocks) {
  if (kFramePoolDisabled) GTEST_SKIP() << "frame pool disabled (ASan)";
  auto tx_rx_pair =
      mpsc::unbounded_channel<Big>();  // not a structured binding: lambdas capture these (clang 14)
  auto& tx = tx_rx_pair.first;
  auto& rx = tx_rx_pair.second;
  constexpr int kBurst = 10 * 32;  // ten blocks in flight at the peak
  auto burst = [&] {
    for (int i = 0; i < kBurst; ++i)
      ASSERT_TRUE(tx.send(Big{}));
    for (int i = 0; i < kBurst; ++i)
      ASSERT_TRUE(rx.try_recv());
  };
  burst();
  for (int round = 0; round < 20; ++round) {
    const std::uint64_t before = heap_allocations();
    burst();
    // At most one block per 32 values, less the spares kept from the last
    // burst: memory is given back between bursts, not accumulated.
    EXPECT_LE(heap_allocations() - before, static_cast<std::uint64_t>(kBurst / 32));
  }
}

// ---- the stress: 4 producers, one receiver under random timeouts ----

constexpr std::uint64_t kProducers = 4;

Task<void> stress_producer(mpsc::UnboundedSender<std::uint64_t> tx, std::uint64_t p,
                           std::uint64_t per, std::uint32_t seed) {
  std::minstd_rand rng(seed);
  for (std::uint64_t i = 0; i < per; ++i) {
    EXPECT_TRUE(tx.send(p * per + i));
    // Now and then let the receiver run dry and wait (a sleep is rarer: a
    // timer rounds it up to a millisecond).
    const unsigned dice = rng() % 8192;
    if (dice == 0) {
      co_await sleep(std::chrono::microseconds(rng() % 30));
    } else if (dice < 128) {
      co_await yield_now();
    }
  }
}

struct StressOutcome {
  std::uint64_t received = 0;
  std::uint64_t order_violations = 0;
  std::uint64_t timeouts = 0;
  std::vector<std::uint8_t> seen;
};

Task<StressOutcome> stress_receiver(mpsc::UnboundedReceiver<std::uint64_t> rx, std::uint64_t per,
                                    std::uint32_t seed, std::atomic<bool>* timed_out_once) {
  std::minstd_rand rng(seed);
  StressOutcome out;
  out.seen.assign(kProducers * per, 0);
  std::vector<std::uint64_t> next(kProducers, 0);
  for (;;) {
    std::optional<std::uint64_t> v;
    // The first receive always runs under timeouts: the producers start
    // only after one fired (see wait_for_first_timeout), so the cancel path
    // runs whatever the dice say later.
    const unsigned dice = out.received == 0 ? 1 : rng() % 8;
    if (dice == 0) {
      Expected<std::optional<std::uint64_t>> r =
          co_await timeout(std::chrono::microseconds(rng() % 40), rx.recv());
      if (!r) {
        ++out.timeouts;
        timed_out_once->store(true, std::memory_order_release);
        continue;  // timed out: took nothing
      }
      v = std::move(*r);
    } else if (dice == 1) {
      auto op = rx.recv();  // an lvalue, re-awaited after each timeout
      for (;;) {
        Expected<std::optional<std::uint64_t>> r =
            co_await timeout(std::chrono::microseconds(rng() % 40), op);
        if (r) {
          v = std::move(*r);
          break;
        }
        ++out.timeouts;
        timed_out_once->store(true, std::memory_order_release);
      }
    } else {
      v = co_await rx.recv();
    }
    if (!v) break;
    const std::uint64_t p = *v / per;
    const std::uint64_t i = *v % per;
    if (i != next[p]) ++out.order_violations;
    next[p] = i + 1;
    ++out.seen[*v];
    ++out.received;
  }
  co_return out;
}

// Blocks the test thread until the receiver's first timed wait, made against
// an empty channel, has timed out: only then may the producers start. A fixed
// sleep is not enough, since a slow start under a sanitizer can leave the
// receiver's first wait until after the values arrived.
void wait_for_first_timeout(const std::atomic<bool>& timed_out_once) {
  const auto give_up = std::chrono::steady_clock::now() + 60s;  // "not hung" bound only
  while (!timed_out_once.load(std::memory_order_acquire)) {
    ASSERT_LT(std::chrono::steady_clock::now(), give_up)
        << "the first timed receive never timed out";
    std::this_thread::sleep_for(1ms);
  }
}

TEST(UnboundedStress, FourProducersEveryValueExactlyOnceInProducerOrder) {
  Runtime rt = make_runtime(kMultiThread2);
  const std::uint64_t per = scale(100'000);
  auto [tx, rx] = mpsc::unbounded_channel<std::uint64_t>();
  std::atomic<bool> timed_out_once{false};
  JoinHandle<StressOutcome> receiver =
      rt.spawn(stress_receiver(std::move(rx), per, 99, &timed_out_once));
  wait_for_first_timeout(timed_out_once);
  std::vector<JoinHandle<void>> producers;
  for (std::uint64_t p = 0; p < kProducers; ++p)
    producers.push_back(rt.spawn(stress_producer(tx, p, per, 7 + static_cast<std::uint32_t>(p))));
  tx = mpsc::UnboundedSender<std::uint64_t>();
  for (auto& h : producers)
    h.join();
  StressOutcome out = receiver.join();
  EXPECT_EQ(out.received, kProducers * per);
  EXPECT_EQ(out.order_violations, 0u) << "a producer's values arrived out of order";
  std::uint64_t missing = 0;
  std::uint64_t duplicated = 0;
  for (std::uint8_t n : out.seen) {
    missing += n == 0;
    duplicated += n > 1;
  }
  EXPECT_EQ(missing, 0u);
  EXPECT_EQ(duplicated, 0u);
  EXPECT_GT(out.timeouts, 0u) << "the timeouts never fired: the cancel path went untested";
}

// ---- recv_many and Sender::closed() ----

TEST_P(UnboundedTest, RecvManyTakesUpToTheLimitInOrderAndKeepsWhatOutHeld) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    auto [tx, rx] = mpsc::unbounded_channel<int>();
    for (int i = 0; i < 10; ++i)
      EXPECT_TRUE(tx.send(int{i}));
    std::vector<int> out{-1};
    EXPECT_EQ(co_await rx.recv_many(out, 4), 4u);
    EXPECT_EQ(out, (std::vector<int>{-1, 0, 1, 2, 3}));
    EXPECT_EQ(co_await rx.recv_many(out, 0), 0u) << "limit 0 takes nothing";
    EXPECT_EQ(rx.len(), 6u);
    EXPECT_EQ(co_await rx.recv_many(out, 100), 6u) << "takes only what is there";
    EXPECT_EQ(out, (std::vector<int>{-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
    // Across a block boundary (32 slots), then closed and drained: 0.
    for (int i = 0; i < 70; ++i)
      EXPECT_TRUE(tx.send(int{100 + i}));
    tx = mpsc::UnboundedSender<int>();
    out.clear();
    EXPECT_EQ(co_await rx.recv_many(out, 1000), 70u);
    EXPECT_EQ(out.size(), 70u);
    for (std::size_t i = 0; i < out.size(); ++i)
      EXPECT_EQ(out[i], 100 + static_cast<int>(i));
    EXPECT_EQ(co_await rx.recv_many(out, 10), 0u) << "closed and drained";
    EXPECT_EQ(out.size(), 70u);
    mpsc::UnboundedReceiver<int> empty;
    EXPECT_EQ(co_await empty.recv_many(out, 10), 0u) << "an empty handle is closed";
  }());
}

TEST_P(UnboundedTest, RecvManyWaitsForTheFirstValueThenTakesTheBatch) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    auto [tx, rx] = mpsc::unbounded_channel<int>();
    std::atomic<bool> waiting{false};
    JoinHandle<std::vector<int>> receiver = volt::spawn(
        [](mpsc::UnboundedReceiver<int>* rx, std::atomic<bool>* waiting) -> Task<std::vector<int>> {
          std::vector<int> out;
          waiting->store(true);
          const std::size_t n = co_await rx->recv_many(out, 8);
          EXPECT_EQ(n, out.size());
          co_return out;
        }(&rx, &waiting));
    while (!waiting.load())
      co_await sleep(100us);
    co_await sleep(1ms);  // now suspended in recv_many
    EXPECT_FALSE(receiver.is_finished()) << "recv_many completed on an empty channel";
    // Sent without a suspension point in between: the receiver runs only
    // after all three are in (current thread), or takes at least the first.
    EXPECT_TRUE(tx.send(1));
    EXPECT_TRUE(tx.send(2));
    EXPECT_TRUE(tx.send(3));
    std::vector<int> got = co_await receiver;
    EXPECT_FALSE(got.empty());
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(got[i], static_cast<int>(i) + 1);
    std::vector<int> rest;
    while (rx.len() > 0)
      rest.push_back(*rx.try_recv());
    EXPECT_EQ(got.size() + rest.size(), 3u) << "a value was lost or duplicated";
    // A waiting recv_many is woken by the close with 0.
    JoinHandle<std::size_t> closing =
        volt::spawn([](mpsc::UnboundedReceiver<int>* rx) -> Task<std::size_t> {
          std::vector<int> out;
          co_return co_await rx->recv_many(out, 8);
        }(&rx));
    co_await sleep(1ms);
    tx = mpsc::UnboundedSender<int>();
    EXPECT_EQ(co_await closing, 0u);
  }());
}

TEST_P(UnboundedTest, ATimedOutRecvManyTakesNothingAndCanBeAwaitedAgain) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    auto [tx, rx] = mpsc::unbounded_channel<int>();
    std::vector<int> out;
    Expected<std::size_t> first = co_await timeout(1ms, rx.recv_many(out, 4));
    EXPECT_EQ(first.error(), code(errc::timed_out));
    EXPECT_TRUE(out.empty());
    JoinHandle<void> sender = volt::spawn([](mpsc::UnboundedSender<int> tx) -> Task<void> {
      co_await sleep(20ms);  // several timeouts pass first
      EXPECT_TRUE(tx.send(7));
      EXPECT_TRUE(tx.send(8));
    }(tx));
    auto op = rx.recv_many(out, 4);
    int timeouts = 0;
    std::size_t n = 0;
    for (;;) {
      Expected<std::size_t> r = co_await timeout(500us, op);
      if (r) {
        n = *r;
        break;
      }
      EXPECT_TRUE(out.empty()) << "an interrupted recv_many took values";
      ++timeouts;
    }
    co_await sender;
    EXPECT_GE(n, 1u);
    EXPECT_EQ(out.size(), n);
    EXPECT_EQ(out[0], 7);
    EXPECT_GE(timeouts, 1) << "never interrupted: the re-await went untested";
    if (n == 1) {
      EXPECT_EQ(*rx.try_recv(), 8);
    }
    EXPECT_EQ(rx.try_recv().error(), code(errc::empty));
  }());
}

// A recv_many task is aborted at a random moment while values are sent:
// every value is either in what the task returned or still in the channel.
TEST_P(UnboundedTest, AbortingAWaitingRecvManyLosesNoValue) {
  if (GetParam().current_thread) GTEST_SKIP() << "needs the abort to race the receiver's poll";
  Runtime rt = make_runtime(GetParam());
  auto [tx, rx] = mpsc::unbounded_channel<int>();
  std::minstd_rand rng(17);
  const int rounds = static_cast<int>(scale(300));
  int taken_by_task = 0;
  for (int i = 0; i < rounds; ++i) {
    std::atomic<bool> waiting{false};
    std::vector<int> out;
    JoinHandle<std::size_t> receiver =
        rt.spawn([](mpsc::UnboundedReceiver<int>* rx, std::vector<int>* out,
                    std::atomic<bool>* waiting) -> Task<std::size_t> {
          waiting->store(true);
          co_return co_await rx->recv_many(*out, 2);
        }(&rx, &out, &waiting));
    while (!waiting.load())
      std::this_thread::yield();
    if (rng() % 2) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 100));
    ASSERT_TRUE(tx.send(3 * i));
    ASSERT_TRUE(tx.send(3 * i + 1));
    ASSERT_TRUE(tx.send(3 * i + 2));
    if (rng() % 4 != 0) receiver.abort();
    std::size_t n = 0;
    try {
      n = receiver.join();
      EXPECT_EQ(n, out.size());
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code(errc::cancelled));
      EXPECT_TRUE(out.empty()) << "round " << i << ": an aborted recv_many took values";
    }
    if (n > 0) ++taken_by_task;
    EXPECT_LE(n, 2u) << "the limit was exceeded";
    while (rx.len() > 0)
      out.push_back(*rx.try_recv());
    ASSERT_EQ(out, (std::vector<int>{3 * i, 3 * i + 1, 3 * i + 2})) << "round " << i;
  }
  EXPECT_GT(taken_by_task, 0);
}

TEST_P(UnboundedTest, SenderClosedCompletesWhenTheReceiverGoes) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    auto [tx, rx] = mpsc::unbounded_channel<int>();
    std::vector<JoinHandle<void>> waiters;
    for (int i = 0; i < 3; ++i)
      waiters.push_back(volt::spawn([](mpsc::UnboundedSender<int> tx) -> Task<void> {
        co_await tx.closed();
        EXPECT_TRUE(tx.is_closed());
        EXPECT_FALSE(tx.send(1)) << "closed() completed while sends still succeed";
      }(tx)));
    co_await sleep(2ms);
    for (auto& w : waiters)
      EXPECT_FALSE(w.is_finished()) << "closed() completed with the receiver alive";
    // A timed-out wait is withdrawn and the sender keeps working.
    Expected<void> early = co_await timeout(1ms, tx.closed());
    EXPECT_EQ(early.error(), code(errc::timed_out));
    EXPECT_TRUE(tx.send(5));
    { auto dropped = std::move(rx); }
    for (auto& w : waiters)
      co_await w;
    co_await tx.closed();  // already closed: at once
    mpsc::UnboundedSender<int> empty;
    co_await empty.closed();  // an empty handle is closed
  }());
}

TEST_P(UnboundedTest, SenderClosedCompletesOnTheReceiversClose) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    auto [tx, rx] = mpsc::unbounded_channel<int>();
    EXPECT_TRUE(tx.send(1));
    JoinHandle<void> waiter = volt::spawn([](mpsc::UnboundedSender<int> tx) -> Task<void> {
      auto op = tx.closed();  // an lvalue, re-awaited after timeouts
      for (;;) {
        Expected<void> r = co_await timeout(300us, op);
        if (r) break;
      }
    }(tx));
    co_await sleep(2ms);
    EXPECT_FALSE(waiter.is_finished());
    rx.close();
    co_await waiter;
    EXPECT_EQ(*rx.try_recv(), 1) << "what was sent before close() stays receivable";
  }());
}

TEST(UnboundedAllocation, WaitingRecvManyAndClosedDoNotAllocate) {
  if (kFramePoolDisabled) GTEST_SKIP() << "frame pool disabled (ASan)";
  Runtime rt = Runtime::Builder().worker_threads(2).build();
  const std::uint64_t allocations = rt.block_on([]() -> Task<std::uint64_t> {
    auto to_peer_pair = mpsc::unbounded_channel<int>();  // not a structured binding (clang 14)
    auto to_me_pair = mpsc::unbounded_channel<int>();
    JoinHandle<void> peer = volt::spawn(
        [](mpsc::UnboundedReceiver<int> rx, mpsc::UnboundedSender<int> tx) -> Task<void> {
          std::vector<int> batch;
          batch.reserve(16);
          for (;;) {
            batch.clear();
            if (co_await rx.recv_many(batch, 16) == 0) break;
            for (int v : batch)
              EXPECT_TRUE(tx.send(v + 1));
          }
        }(std::move(to_peer_pair.second), std::move(to_me_pair.first)));
    // A task waiting in closed() the whole time (woken at the end).
    auto watched = mpsc::unbounded_channel<int>();
    JoinHandle<void> closed_waiter = volt::spawn([](mpsc::UnboundedSender<int> tx) -> Task<void> {
      co_await tx.closed();
    }(std::move(watched.first)));
    std::vector<int> batch;
    batch.reserve(16);
    auto round = [&](int rounds) -> Task<void> {
      for (int i = 0; i < rounds; ++i) {
        EXPECT_TRUE(to_peer_pair.first.send(int{i}));
        batch.clear();
        EXPECT_EQ(co_await to_me_pair.second.recv_many(batch, 16), 1u);  // waits
        EXPECT_EQ(batch.at(0), i + 1);
      }
    };
    co_await round(2000);  // warm-up
    const std::uint64_t before = heap_allocations();
    co_await round(2000);
    const std::uint64_t counted = heap_allocations() - before;
    to_peer_pair.first = mpsc::UnboundedSender<int>();
    co_await peer;
    watched.second = mpsc::UnboundedReceiver<int>();  // closed() completes
    co_await closed_waiter;
    co_return counted;
  }());
  EXPECT_EQ(allocations, 0u);
}

// closed() waits racing the receiver's drop on another thread: every wait
// completes (a lost wake-up hangs the test), none before the drop.
TEST(UnboundedStress, ClosedRacesTheReceiversDrop) {
  Runtime rt = make_runtime(kMultiThread4);
  const int rounds = static_cast<int>(scale(200));
  std::minstd_rand rng(23);
  for (int round = 0; round < rounds; ++round) {
    auto [tx, rx] = mpsc::unbounded_channel<int>();
    std::atomic<bool> dropped{false};
    std::vector<JoinHandle<bool>> waiters;
    for (int i = 0; i < 4; ++i)
      waiters.push_back(
          rt.spawn([](mpsc::UnboundedSender<int> tx, std::atomic<bool>* dropped) -> Task<bool> {
            co_await tx.closed();
            co_return dropped->load();
          }(tx, &dropped)));
    if (rng() % 2) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 50));
    dropped.store(true);
    { auto gone = std::move(rx); }
    for (auto& w : waiters)
      ASSERT_TRUE(w.join()) << "round " << round << ": closed() completed before the drop";
  }
}

// recv_many with random limits, some under timeouts, against four producers:
// every value exactly once, each producer's in order (run under TSan).
TEST(UnboundedStress, RecvManyAgainstFourProducers) {
  Runtime rt = make_runtime(kMultiThread2);
  const std::uint64_t per = scale(50'000);
  auto [tx, rx] = mpsc::unbounded_channel<std::uint64_t>();
  std::atomic<bool> timed_out_once{false};
  JoinHandle<StressOutcome> receiver =
      rt.spawn([](mpsc::UnboundedReceiver<std::uint64_t> rx, std::uint64_t per,
                  std::atomic<bool>* timed_out_once) -> Task<StressOutcome> {
        std::minstd_rand rng(5);
        StressOutcome out;
        out.seen.assign(kProducers * per, 0);
        std::vector<std::uint64_t> next(kProducers, 0);
        std::vector<std::uint64_t> batch;
        for (;;) {
          batch.clear();
          const std::size_t limit = 1 + rng() % 40;
          std::size_t n = 0;
          if (out.received == 0 || rng() % 8 == 0) {
            Expected<std::size_t> r =
                co_await timeout(std::chrono::microseconds(rng() % 40), rx.recv_many(batch, limit));
            if (!r) {
              ++out.timeouts;
              timed_out_once->store(true, std::memory_order_release);
              if (!batch.empty()) ++out.order_violations;  // took values and timed out
              continue;
            }
            n = *r;
          } else {
            n = co_await rx.recv_many(batch, limit);
          }
          if (n == 0) break;
          if (n > limit || n != batch.size()) ++out.order_violations;
          for (std::uint64_t v : batch) {
            const std::uint64_t p = v / per;
            const std::uint64_t i = v % per;
            if (i != next[p]) ++out.order_violations;
            next[p] = i + 1;
            ++out.seen[v];
            ++out.received;
          }
        }
        co_return out;
      }(std::move(rx), per, &timed_out_once));
  wait_for_first_timeout(timed_out_once);
  std::vector<JoinHandle<void>> producers;
  for (std::uint64_t p = 0; p < kProducers; ++p)
    producers.push_back(rt.spawn(stress_producer(tx, p, per, 31 + static_cast<std::uint32_t>(p))));
  tx = mpsc::UnboundedSender<std::uint64_t>();
  for (auto& h : producers)
    h.join();
  StressOutcome out = receiver.join();
  EXPECT_EQ(out.received, kProducers * per);
  EXPECT_EQ(out.order_violations, 0u);
  std::uint64_t missing = 0;
  std::uint64_t duplicated = 0;
  for (std::uint8_t n : out.seen) {
    missing += n == 0;
    duplicated += n > 1;
  }
  EXPECT_EQ(missing, 0u);
  EXPECT_EQ(duplicated, 0u);
  EXPECT_GT(out.timeouts, 0u);
}

}  // namespace
}  // namespace volt::test
