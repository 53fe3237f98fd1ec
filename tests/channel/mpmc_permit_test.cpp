// Tests of the bounded channel's issue-19 additions (include/volt/channel/
// mpmc.hpp): two-phase send (try_reserve / reserve / reserve_many and
// Permit / PermitIterator, with the reservation count of
// include/volt/detail/channel_waiters.hpp), recv_many, send_timeout,
// Sender::closed(), capacity() / max_capacity(), and the buffered values
// destroyed when the last Receiver goes. Each runtime test runs on both
// flavours; the stresses (permit drop against waiting senders, last-receiver
// drop against sends) run under TSan in CI. A wait that must end is bounded
// by kNotHung and fails (never hangs) when it does not.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/runtime_support.hpp"
#include "volt/channel/mpmc.hpp"
#include "volt/channel/mpsc.hpp"
#include "volt/task/select.hpp"
#include "volt/time/sleep.hpp"
#include "volt/time/timeout.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

// ---- the ring and the reservation count, without a runtime ----

TEST(MpmcPermitRing, APermitHoldsASlotAndItsSendNeverFindsTheChannelFull) {
  auto [tx, rx] = mpmc::channel<int>(2);
  EXPECT_EQ(tx.capacity(), 2u);
  EXPECT_EQ(tx.max_capacity(), 2u);
  Expected<mpmc::Permit<int>> permit = tx.try_reserve();
  ASSERT_TRUE(permit);
  EXPECT_EQ(tx.capacity(), 1u) << "the permit's slot is not free";
  EXPECT_EQ(rx.capacity(), 1u);
  EXPECT_EQ(rx.max_capacity(), 2u);
  ASSERT_TRUE(tx.try_send(1));
  SendResult<int> over = tx.try_send(2);
  ASSERT_FALSE(over) << "try_send took the slot the permit holds";
  EXPECT_EQ(over.error(), make_error_code(errc::full));
  EXPECT_EQ(tx.try_reserve().error(), make_error_code(errc::full));
  EXPECT_EQ(tx.capacity(), 0u);
  EXPECT_TRUE(permit->send(3));
  EXPECT_FALSE(*permit) << "a used permit holds nothing";
  EXPECT_EQ(*rx.try_recv(), 1);
  EXPECT_EQ(*rx.try_recv(), 3);
  EXPECT_EQ(tx.capacity(), 2u);
  // Used: a second send hands the value back.
  SendResult<int> again = permit->send(4);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.take_back(), 4);
  EXPECT_EQ(rx.try_recv().error(), make_error_code(errc::empty));
}

TEST(MpmcPermitRing, ADroppedPermitGivesItsSlotBack) {
  auto [tx, rx] = mpmc::channel<int>(1);
  {
    Expected<mpmc::Permit<int>> permit = tx.try_reserve();
    ASSERT_TRUE(permit);
    EXPECT_FALSE(tx.try_send(1));
    mpmc::Permit<int> moved = std::move(*permit);  // moving keeps the one slot
    EXPECT_FALSE(*permit);
    EXPECT_TRUE(moved);
    EXPECT_FALSE(tx.try_send(1));
  }
  EXPECT_EQ(tx.capacity(), 1u);
  EXPECT_TRUE(tx.try_send(1)) << "the dropped permit kept its slot";
  EXPECT_EQ(*rx.try_recv(), 1);
  // The fast path is open again: many laps without a permit.
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(tx.try_send(i));
    ASSERT_EQ(*rx.try_recv(), i);
  }
}

TEST(MpmcPermitRing, AHeldPermitDoesNotBlockReceivers) {
  auto [tx, rx] = mpmc::channel<int>(3);
  ASSERT_TRUE(tx.try_send(1));
  Expected<mpmc::Permit<int>> permit = tx.try_reserve();
  ASSERT_TRUE(permit);
  ASSERT_TRUE(tx.try_send(2));
  EXPECT_EQ(*rx.try_recv(), 1);
  EXPECT_EQ(*rx.try_recv(), 2) << "a value sent after the reservation waits for the permit";
  EXPECT_EQ(rx.try_recv().error(), make_error_code(errc::empty));
  EXPECT_EQ(rx.len(), 0u);
  ASSERT_TRUE(permit->send(3));
  EXPECT_EQ(*rx.try_recv(), 3);
}

TEST(MpmcPermitRing, ReserveManyIsAllOrNothingAndRefusesMoreThanTheCapacity) {
  auto [tx, rx] = mpmc::channel<int>(4);
  EXPECT_EQ(tx.try_reserve_many(5).error(), make_error_code(errc::invalid_argument));
  Expected<mpmc::PermitIterator<int>> none = tx.try_reserve_many(0);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  ASSERT_TRUE(tx.try_send(1));
  ASSERT_TRUE(tx.try_send(2));
  EXPECT_EQ(tx.try_reserve_many(3).error(), make_error_code(errc::full));
  EXPECT_EQ(tx.capacity(), 2u) << "a refused reserve_many holds nothing";
  Expected<mpmc::PermitIterator<int>> two = tx.try_reserve_many(2);
  ASSERT_TRUE(two);
  EXPECT_EQ(two->len(), 2u);
  EXPECT_EQ(tx.capacity(), 0u);
  EXPECT_FALSE(tx.try_send(9));
  EXPECT_TRUE(two->send(3));
  mpmc::Permit<int> last = two->next();
  EXPECT_TRUE(last);
  EXPECT_TRUE(two->empty());
  mpmc::Permit<int> beyond = two->next();
  EXPECT_FALSE(beyond);
  SendResult<int> extra = two->send(8);
  ASSERT_FALSE(extra);
  EXPECT_EQ(extra.error(), make_error_code(errc::full));
  EXPECT_EQ(extra.take_back(), 8);
  EXPECT_TRUE(last.send(4));
  for (int i = 1; i <= 4; ++i)
    EXPECT_EQ(*rx.try_recv(), i);
  // Dropped with slots left: all of them come back.
  {
    Expected<mpmc::PermitIterator<int>> three = tx.try_reserve_many(3);
    ASSERT_TRUE(three);
    EXPECT_TRUE(three->send(5));
    EXPECT_EQ(tx.capacity(), 1u) << "one value and two reserved slots of four";
  }
  EXPECT_EQ(tx.capacity(), 3u);
  EXPECT_EQ(*rx.try_recv(), 5);
}

TEST(MpmcPermitRing, APermitOfAClosedChannelHandsTheValueBack) {
  auto [tx, rx] = mpmc::channel<int>(2);
  Expected<mpmc::Permit<int>> permit = tx.try_reserve();
  ASSERT_TRUE(permit);
  ASSERT_TRUE(tx.try_send(1));
  rx.close();
  SendResult<int> r = permit->send(2);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), make_error_code(errc::closed));
  EXPECT_EQ(r.take_back(), 2);
  EXPECT_EQ(tx.try_reserve().error(), make_error_code(errc::closed));
  EXPECT_EQ(tx.try_reserve_many(1).error(), make_error_code(errc::closed));
  EXPECT_EQ(*rx.try_recv(), 1) << "values sent before the close stay receivable";
  EXPECT_EQ(rx.try_recv().error(), make_error_code(errc::closed));
}

TEST(MpmcPermitRing, APermitAfterTheLastReceiverIsGoneHandsTheValueBack) {
  auto [tx, rx] = mpmc::channel<int>(2);
  Expected<mpmc::Permit<int>> permit = tx.try_reserve();
  ASSERT_TRUE(permit);
  { mpmc::Receiver<int> gone = std::move(rx); }
  EXPECT_TRUE(tx.is_closed());
  SendResult<int> r = permit->send(7);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), make_error_code(errc::closed));
  EXPECT_EQ(r.take_back(), 7);
}

TEST(MpmcPermitRing, MovedFromSenderReservesNothing) {
  auto [tx, rx] = mpmc::channel<int>(2);
  mpmc::Sender<int> other = std::move(tx);
  EXPECT_EQ(tx.try_reserve().error(), make_error_code(errc::closed));
  EXPECT_EQ(tx.try_reserve_many(1).error(), make_error_code(errc::closed));
  EXPECT_EQ(tx.capacity(), 0u);
  EXPECT_EQ(tx.max_capacity(), 0u);
  mpmc::Permit<int> empty;
  SendResult<int> r = empty.send(1);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), make_error_code(errc::closed));
}

// The reservation count against a plain model, over many laps at several
// capacities: random try_reserve / try_reserve_many / try_send / permit
// send / permit drop / try_recv. capacity() is exact when single-threaded,
// the bound is never exceeded, a permit's send never fails, values come out
// in the order of the sends, and nothing is left stuck.
// try_send means full only when it is: reservations made and dropped beside
// it on a nearly empty channel set and clear the senders' gate, and a
// try_send that met the gate with the count already (or still) at zero used
// to report full (found in review).
TEST(MpmcPermitRing, TrySendIsNotFullWhileThereIsRoomAndNoSenderWaits) {
  constexpr std::size_t kCap = 1024;
  auto [tx, rx] = mpmc::channel<int>(kCap);
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> refused{0};
  std::thread reserver([&, tx2 = tx]() mutable {
    while (!stop.load(std::memory_order_relaxed)) {
      if (!tx2.try_reserve()) refused.fetch_add(1);  // a few values at most: room
    }
  });
  std::uint64_t full = 0;
  const int rounds = static_cast<int>(test::scale(2'000'000));
  for (int i = 0; i < rounds && full == 0; ++i) {
    if (tx.try_send(int{i})) {
      ASSERT_TRUE(rx.try_recv());  // keeps the ring (nearly) empty
    } else {
      ++full;
    }
  }
  stop.store(true);
  reserver.join();
  EXPECT_EQ(full, 0u) << "try_send reported full with ~" << kCap << " free slots";
  EXPECT_EQ(refused.load(), 0u);
}

TEST(MpmcPermitRing, TheReservationCountMatchesAModelOverManyLaps) {
  for (std::size_t capacity : {1u, 2u, 3u, 5u, 8u}) {
    auto [tx, rx] = mpmc::channel<std::uint64_t>(capacity);
    std::mt19937 rng(static_cast<unsigned>(capacity) * 7919u);
    std::vector<mpmc::Permit<std::uint64_t>> permits;
    std::uint64_t next_value = 0;
    std::uint64_t next_expected = 0;
    std::size_t in_ring = 0;
    for (int step = 0; step < 20'000; ++step) {
      const std::size_t held = permits.size();
      ASSERT_EQ(tx.capacity(), capacity - in_ring - held) << "step " << step;
      switch (rng() % 6) {
        case 0: {
          Expected<mpmc::Permit<std::uint64_t>> p = tx.try_reserve();
          ASSERT_EQ(static_cast<bool>(p), in_ring + held < capacity) << "step " << step;
          if (p) permits.push_back(std::move(*p));
          break;
        }
        case 1: {
          const std::size_t n = 1 + rng() % capacity;
          Expected<mpmc::PermitIterator<std::uint64_t>> many = tx.try_reserve_many(n);
          ASSERT_EQ(static_cast<bool>(many), in_ring + held + n <= capacity) << "step " << step;
          if (many)
            while (!many->empty())
              permits.push_back(many->next());
          break;
        }
        case 2: {
          SendResult<std::uint64_t> r = tx.try_send(std::uint64_t{next_value});
          ASSERT_EQ(static_cast<bool>(r), in_ring + held < capacity) << "step " << step;
          if (r) {
            ++next_value;
            ++in_ring;
          }
          break;
        }
        case 3:
          if (!permits.empty()) {
            const std::size_t k = rng() % permits.size();
            std::swap(permits[k], permits.back());
            ASSERT_TRUE(permits.back().send(std::uint64_t{next_value})) << "step " << step;
            permits.pop_back();
            ++next_value;
            ++in_ring;
          }
          break;
        case 4:
          if (!permits.empty()) permits.pop_back();  // dropped unused
          break;
        case 5: {
          Expected<std::uint64_t> v = rx.try_recv();
          if (in_ring == 0) {
            ASSERT_EQ(v.error(), make_error_code(errc::empty)) << "step " << step;
          } else {
            ASSERT_TRUE(v) << "step " << step << ": a value stuck behind a permit";
            ASSERT_EQ(*v, next_expected++);
            --in_ring;
          }
          break;
        }
      }
    }
  }
}

TEST(MpmcLastReceiver, BufferedValuesAreDestroyedWhenTheLastReceiverGoes) {
  LifeCounters counters;
  auto [tx, rx] = mpmc::channel<Tracked>(4);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(tx.try_send(Tracked(counters, i)));
  mpmc::Receiver<Tracked> second = rx;
  { mpmc::Receiver<Tracked> gone = std::move(rx); }
  EXPECT_EQ(counters.live(), 3) << "one receiver is left: the values stay";
  EXPECT_FALSE(tx.is_closed());
  { mpmc::Receiver<Tracked> gone = std::move(second); }
  EXPECT_EQ(counters.live(), 0) << "the values outlived the last receiver";
  EXPECT_EQ(tx.capacity(), 4u);
  SendResult<Tracked> r = tx.try_send(Tracked(counters, 9));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), make_error_code(errc::closed));
  EXPECT_EQ(r.value_back().value(), 9);
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

TEST(MpmcLastReceiver, ValuesStayWhenTheLastSenderGoes) {
  LifeCounters counters;
  auto [tx, rx] = mpmc::channel<Tracked>(4);
  ASSERT_TRUE(tx.try_send(Tracked(counters, 1)));
  { mpmc::Sender<Tracked> gone = std::move(tx); }
  EXPECT_EQ(counters.live(), 1);
  Expected<Tracked> v = rx.try_recv();
  ASSERT_TRUE(v);
  EXPECT_EQ(v->value(), 1);
}

// ---- on the runtimes ----

class MpmcPermitTest : public ::testing::TestWithParam<Flavour> {};
INSTANTIATE_TEST_SUITE_P(Flavours, MpmcPermitTest,
                         ::testing::Values(kMultiThread1, kMultiThread2, kCurrentThread),
                         FlavourName());

// Waits (yielding) until the task recorded in *task is suspended (idle:
// neither running nor notified), i.e. queued in the operation it awaits.
// (is_idle alone also holds for a task woken but not yet run.)
Task<void> until_suspended(std::atomic<detail::TaskHeader*>* task) {
  for (;;) {
    detail::TaskHeader* header = task->load(std::memory_order_acquire);
    if (header != nullptr) {
      const auto state = header->state.load();
      if (state.is_idle() && !state.is_notified()) co_return;
    }
    co_await yield_now();
  }
}

// rx.recv(), failing (not hanging) if no value comes within kNotHung.
Task<std::optional<int>> recv_bounded(mpmc::Receiver<int>& rx) {
  Expected<std::optional<int>> r = co_await timeout(kNotHung, rx.recv());
  if (!r) {
    ADD_FAILURE() << "recv() waited longer than kNotHung: a lost wake-up";
    co_return std::optional<int>(-999);
  }
  co_return std::move(*r);
}

template <class T>
Task<bool> finishes(JoinHandle<T>& handle) {
  Expected<T> r = co_await timeout(kNotHung, handle);
  co_return static_cast<bool>(r);
}
Task<bool> finishes(JoinHandle<void>& handle) {
  Expected<void> r = co_await timeout(kNotHung, handle);
  co_return static_cast<bool>(r);
}

Task<void> record_and_send(mpmc::Sender<int>* tx, int value,
                           std::atomic<detail::TaskHeader*>* task) {
  task->store(detail::tls_context.current_task, std::memory_order_release);
  SendResult<int> r = co_await tx->send(value);
  EXPECT_TRUE(r);
}

// reserve_many(2), then sends `first` and `second` through the permits;
// *reserved is set once both slots are held.
Task<void> record_and_reserve_two(mpmc::Sender<int>* tx, int first, int second,
                                  std::atomic<bool>* reserved,
                                  std::atomic<detail::TaskHeader*>* task) {
  task->store(detail::tls_context.current_task, std::memory_order_release);
  Expected<mpmc::PermitIterator<int>> permits = co_await tx->reserve_many(2);
  EXPECT_TRUE(permits);
  if (!permits) co_return;
  EXPECT_EQ(permits->len(), 2u);
  reserved->store(true, std::memory_order_release);
  EXPECT_TRUE(permits->send(first));
  EXPECT_TRUE(permits->send(second));
}

Task<void> record_and_reserve_send(mpmc::Sender<int>* tx, int value,
                                   std::atomic<detail::TaskHeader*>* task) {
  task->store(detail::tls_context.current_task, std::memory_order_release);
  Expected<mpmc::Permit<int>> permit = co_await tx->reserve();
  EXPECT_TRUE(permit);
  if (permit) {
    EXPECT_TRUE(permit->send(value));
  }
}

// A held permit fills a capacity-1 channel; a send() queues; dropping the
// permit unused must wake it (else finishes() fails after kNotHung).
Task<void> dropped_permit_wakes_a_waiting_sender(bool waiter_reserves) {
  auto [tx, rx] = mpmc::channel<int>(1);
  std::optional<mpmc::Permit<int>> permit;
  {
    Expected<mpmc::Permit<int>> p = co_await tx.reserve();
    EXPECT_TRUE(p);
    if (!p) co_return;
    permit.emplace(std::move(*p));
  }
  std::atomic<detail::TaskHeader*> task{nullptr};
  JoinHandle<void> waiter = spawn(waiter_reserves ? record_and_reserve_send(&tx, 5, &task)
                                                  : record_and_send(&tx, 5, &task));
  co_await until_suspended(&task);
  EXPECT_FALSE(waiter.is_finished()) << "the send did not wait for the permit's slot";
  EXPECT_EQ(rx.try_recv().error(), make_error_code(errc::empty)) << "a held permit is not a value";
  permit.reset();  // dropped unused
  EXPECT_TRUE(co_await finishes(waiter)) << "the dropped permit did not wake the waiting sender";
  EXPECT_EQ(co_await recv_bounded(rx), std::optional<int>(5));
}

TEST_P(MpmcPermitTest, ADroppedPermitWakesAWaitingSend) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on(dropped_permit_wakes_a_waiting_sender(false));
}

TEST_P(MpmcPermitTest, ADroppedPermitWakesAWaitingReserve) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on(dropped_permit_wakes_a_waiting_sender(true));
}

// reserve() queues with the senders, woken oldest first: full channel,
// send(1) queued, then reserve() queued; the freed slots go to them in that
// order.
Task<void> reserve_is_fifo_with_senders() {
  auto [tx, rx] = mpmc::channel<int>(1);
  EXPECT_TRUE(tx.try_send(0));
  std::atomic<detail::TaskHeader*> first{nullptr};
  std::atomic<detail::TaskHeader*> second{nullptr};
  JoinHandle<void> a = spawn(record_and_send(&tx, 1, &first));
  co_await until_suspended(&first);
  JoinHandle<void> b = spawn(record_and_reserve_send(&tx, 2, &second));
  co_await until_suspended(&second);
  EXPECT_EQ(co_await recv_bounded(rx), std::optional<int>(0));
  EXPECT_EQ(co_await recv_bounded(rx), std::optional<int>(1));
  EXPECT_EQ(co_await recv_bounded(rx), std::optional<int>(2));
  EXPECT_TRUE(co_await finishes(a));
  EXPECT_TRUE(co_await finishes(b));
  EXPECT_TRUE(tx.try_send(3)) << "nobody waits: the fast path is open again";
}

TEST_P(MpmcPermitTest, ReserveWaitsInTheSendersFifo) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on(reserve_is_fifo_with_senders());
}

// Barging is bounded: reserve_many(2) waits on a full channel of 2 while
// this task frees one slot at a time and refills it with try_send at once.
// Each time the waiter is woken it finds one slot, not two, and re-queues;
// after ChannelWaiters::kStrictAfter such retries the side turns strict and
// try_send reports full, so the next freed slots are the waiter's. Without
// the bound try_send would keep the ring full and the waiter would wait for
// ever (every round below would barge).
Task<void> barging_is_bounded() {
  auto [tx, rx] = mpmc::channel<int>(2);
  EXPECT_TRUE(tx.try_send(0));
  EXPECT_TRUE(tx.try_send(1));
  std::atomic<bool> reserved{false};
  std::atomic<detail::TaskHeader*> task{nullptr};
  JoinHandle<void> many = spawn(record_and_reserve_two(&tx, -1, -2, &reserved, &task));
  co_await until_suspended(&task);
  int barged = 0;
  int next = 2;
  bool refused = false;
  // kStrictAfter + 1 rounds would do; the rest is slack for the
  // multi-thread flavours, where the woken task may not have retried yet.
  for (int round = 0; round < 50 && !refused; ++round) {
    const std::optional<int> got = co_await recv_bounded(rx);
    if (!got) {
      ADD_FAILURE() << "closed";
      break;
    }
    SendResult<int> r = tx.try_send(next);
    if (r) {
      ++barged;
      ++next;
    } else {
      EXPECT_EQ(r.error(), make_error_code(errc::full));
      refused = true;
    }
    // Let the woken waiter retry (and, on one worker, run at all).
    if (!refused) co_await until_suspended(&task);
  }
  EXPECT_TRUE(refused) << "try_send barged " << barged << " times past a waiting reserve_many";
  EXPECT_GE(barged, 1) << "relaxed mode lets a running send take a freed slot";
  EXPECT_LE(barged, static_cast<int>(detail::ChannelWaiters::kStrictAfter) + 1);
  // Strict now: the next freed slot completes the waiter's two.
  EXPECT_TRUE((co_await recv_bounded(rx)).has_value());
  EXPECT_TRUE(co_await finishes(many));
  EXPECT_TRUE(reserved.load(std::memory_order_acquire));
  EXPECT_EQ(co_await recv_bounded(rx), std::optional<int>(-1));
  EXPECT_EQ(co_await recv_bounded(rx), std::optional<int>(-2));
  EXPECT_TRUE(tx.try_send(7)) << "nobody waits: relaxed again, the fast path open";
}

TEST_P(MpmcPermitTest, BargingSendsTurnTheSendersStrictForAStarvedReserveMany) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on(barging_is_bounded());
}

// Strict mode lasts for the starved waiter's turn only: once the
// reserve_many that turned the senders' side strict is served, barging
// resumes although another sender still waits behind it. (The side used to
// stay strict until nobody waited, which a ring kept full by running senders
// never reaches: channel_mpmc at 2 workers then stayed strict for good, a
// grant and a task switch per value.) The barge after the starved turn is
// asserted on the current-thread runtime only, where the woken send cannot
// run (and take the freed slot itself) before this task's try_send; on every
// flavour each value sent arrives exactly once.
Task<void> strict_mode_ends_with_the_starved_turn(bool current_thread) {
  auto [tx, rx] = mpmc::channel<int>(2);
  EXPECT_TRUE(tx.try_send(0));
  EXPECT_TRUE(tx.try_send(1));
  std::vector<int> sent{0, 1, -1, -2, 100};
  std::vector<int> received;
  std::atomic<bool> reserved{false};
  std::atomic<detail::TaskHeader*> starved{nullptr};
  std::atomic<detail::TaskHeader*> behind{nullptr};
  JoinHandle<void> many = spawn(record_and_reserve_two(&tx, -1, -2, &reserved, &starved));
  co_await until_suspended(&starved);
  JoinHandle<void> send = spawn(record_and_send(&tx, 100, &behind));
  co_await until_suspended(&behind);
  // Barge until the side turns strict (as in barging_is_bounded).
  int next = 2;
  bool refused = false;
  for (int round = 0; round < 50 && !refused; ++round) {
    received.push_back(*co_await recv_bounded(rx));
    if (tx.try_send(next)) {
      sent.push_back(next++);
    } else {
      refused = true;
    }
    if (!refused) co_await until_suspended(&starved);
  }
  EXPECT_TRUE(refused) << "the side never turned strict";
  // Strict: the freed slots go to the starved reserve_many, which needs the
  // whole ring: the last value taken here frees it. First let it finish the
  // retry it was woken for (one slot: no room) and queue again at the
  // front; a slot freed while it is out of the queue would go to the send
  // behind it (the oldest queued waiter), and then the ring never empties.
  co_await until_suspended(&starved);
  received.push_back(*co_await recv_bounded(rx));
  EXPECT_TRUE(co_await finishes(many));
  EXPECT_TRUE(reserved.load(std::memory_order_acquire));
  if (current_thread) {
    // The ring holds the reserve_many's two values; the send still waits.
    EXPECT_FALSE(send.is_finished());
  }
  received.push_back(*co_await recv_bounded(rx));  // frees a slot, wakes the send
  SendResult<int> barged = tx.try_send(777);
  if (barged) sent.push_back(777);
  if (current_thread) {
    EXPECT_TRUE(barged) << "the side stayed strict after the starved reserve_many was served";
  }
  while (received.size() < sent.size())
    received.push_back(*co_await recv_bounded(rx));
  EXPECT_TRUE(co_await finishes(send));
  EXPECT_EQ(rx.try_recv().error(), make_error_code(errc::empty));
  std::sort(sent.begin(), sent.end());
  std::sort(received.begin(), received.end());
  EXPECT_EQ(received, sent) << "a value was lost or delivered twice";
}

TEST_P(MpmcPermitTest, StrictModeEndsWhenTheStarvedWaiterIsServedNotWhenNobodyWaits) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on(strict_mode_ends_with_the_starved_turn(GetParam().current_thread));
}

// reserve_many(2) on a full channel of 3 waits until two slots are free.
Task<void> reserve_many_waits_for_n_slots() {
  auto [tx, rx] = mpmc::channel<int>(3);
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(tx.try_send(i));
  std::atomic<bool> reserved{false};
  std::atomic<detail::TaskHeader*> task{nullptr};
  JoinHandle<void> many = spawn(record_and_reserve_two(&tx, 10, 11, &reserved, &task));
  co_await until_suspended(&task);
  EXPECT_EQ(co_await recv_bounded(rx), std::optional<int>(0));
  // One slot free: not enough. Let the task run if it was woken.
  for (int i = 0; i < 20; ++i)
    co_await yield_now();
  EXPECT_FALSE(reserved.load(std::memory_order_acquire)) << "reserve_many(2) took one slot";
  EXPECT_EQ(co_await recv_bounded(rx), std::optional<int>(1));
  EXPECT_TRUE(co_await finishes(many));
  EXPECT_TRUE(reserved.load(std::memory_order_acquire));
  for (int v : {2, 10, 11})
    EXPECT_EQ(co_await recv_bounded(rx), std::optional<int>(v));
  Expected<mpmc::PermitIterator<int>> invalid = co_await tx.reserve_many(4);
  EXPECT_EQ(invalid.error(), make_error_code(errc::invalid_argument));
  Expected<mpmc::PermitIterator<int>> zero = co_await tx.reserve_many(0);
  EXPECT_TRUE(zero && zero->empty());
}

TEST_P(MpmcPermitTest, ReserveManyWaitsForAllItsSlots) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on(reserve_many_waits_for_n_slots());
}

Task<void> close_wakes_a_waiting_reserve() {
  auto [tx, rx] = mpmc::channel<int>(1);
  EXPECT_TRUE(tx.try_send(0));
  std::atomic<detail::TaskHeader*> task{nullptr};
  // (The task returns whether it got errc::closed: an Expected<error_code>
  // would be ambiguous.)
  JoinHandle<bool> waiter =
      spawn([](mpmc::Sender<int>* tx, std::atomic<detail::TaskHeader*>* task) -> Task<bool> {
        task->store(detail::tls_context.current_task, std::memory_order_release);
        Expected<mpmc::Permit<int>> p = co_await tx->reserve();
        co_return !p && p.error() == make_error_code(errc::closed);
      }(&tx, &task));
  co_await until_suspended(&task);
  rx.close();
  Expected<bool> got_closed = co_await timeout(kNotHung, waiter);
  EXPECT_TRUE(got_closed) << "close() did not wake the waiting reserve";
  if (got_closed) {
    EXPECT_TRUE(*got_closed) << "the woken reserve did not report errc::closed";
  }
  Expected<mpmc::Permit<int>> after = co_await tx.reserve();
  EXPECT_EQ(after.error(), make_error_code(errc::closed));
}

TEST_P(MpmcPermitTest, CloseWakesAWaitingReserveWithClosed) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on(close_wakes_a_waiting_reserve());
}

// A reserve that timed out (cancelled while queued) holds nothing: the slot
// freed later goes to a plain try_send.
Task<void> cancelled_reserve_holds_nothing() {
  auto [tx, rx] = mpmc::channel<int>(1);
  EXPECT_TRUE(tx.try_send(0));
  Expected<Expected<mpmc::Permit<int>>> r = co_await timeout(1ms, tx.reserve());
  EXPECT_FALSE(r);
  EXPECT_EQ(co_await recv_bounded(rx), std::optional<int>(0));
  EXPECT_EQ(tx.capacity(), 1u);
  EXPECT_TRUE(tx.try_send(1)) << "the cancelled reserve kept a slot or the gate";
  // And a reservation that completed inside the timeout is a real permit.
  EXPECT_EQ(co_await recv_bounded(rx), std::optional<int>(1));
  Expected<Expected<mpmc::Permit<int>>> ok = co_await timeout(kNotHung, tx.reserve());
  EXPECT_TRUE(ok && *ok);
  if (ok && *ok) {
    EXPECT_TRUE((*ok)->send(2));
  }
  EXPECT_EQ(co_await recv_bounded(rx), std::optional<int>(2));
}

TEST_P(MpmcPermitTest, ACancelledReserveHoldsNothing) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on(cancelled_reserve_holds_nothing());
}

// ---- recv_many ----

Task<void> recv_many_takes_a_batch() {
  auto [tx, rx] = mpmc::channel<int>(8);
  std::vector<int> out;
  EXPECT_EQ(co_await rx.recv_many(out, 0), 0u) << "limit 0 returns 0 at once";
  for (int i = 0; i < 5; ++i)
    EXPECT_TRUE(tx.try_send(i));
  EXPECT_EQ(co_await rx.recv_many(out, 0), 0u);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(co_await rx.recv_many(out, 3), 3u);
  EXPECT_EQ(out, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(co_await rx.recv_many(out, 100), 2u) << "appends what is there";
  EXPECT_EQ(out, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(tx.try_send(5));
  tx.close();
  EXPECT_EQ(co_await rx.recv_many(out, 4), 1u) << "drains after close";
  EXPECT_EQ(co_await rx.recv_many(out, 4), 0u) << "0: closed and drained";
  EXPECT_EQ(out.size(), 6u);
}

TEST_P(MpmcPermitTest, RecvManyTakesUpToLimitAndReturnsZeroWhenDrained) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on(recv_many_takes_a_batch());
}

// recv_many waits for the first value; a sender waiting for room is woken
// by the slots a batch frees.
Task<void> recv_many_waits_and_frees_slots() {
  auto [tx, rx] = mpmc::channel<int>(2);
  std::atomic<detail::TaskHeader*> task{nullptr};
  JoinHandle<std::vector<int>> batch =
      spawn([](mpmc::Receiver<int>* rx,
               std::atomic<detail::TaskHeader*>* task) -> Task<std::vector<int>> {
        task->store(detail::tls_context.current_task, std::memory_order_release);
        std::vector<int> out;
        std::size_t n = co_await rx->recv_many(out, 8);
        EXPECT_EQ(n, out.size());
        co_return out;
      }(&rx, &task));
  co_await until_suspended(&task);
  EXPECT_TRUE(tx.try_send(1));
  Expected<std::vector<int>> got = co_await timeout(kNotHung, batch);
  EXPECT_TRUE(got) << "recv_many was not woken by a send";
  if (got) {
    EXPECT_GE(got->size(), 1u);
    EXPECT_EQ(got->front(), 1);
  }
  // Full, with two senders waiting: one batch takes both values and the
  // senders get their room.
  EXPECT_TRUE(tx.try_send(2));
  EXPECT_TRUE(tx.try_send(3));
  std::atomic<detail::TaskHeader*> s1{nullptr};
  std::atomic<detail::TaskHeader*> s2{nullptr};
  JoinHandle<void> a = spawn(record_and_send(&tx, 4, &s1));
  co_await until_suspended(&s1);
  JoinHandle<void> b = spawn(record_and_send(&tx, 5, &s2));
  co_await until_suspended(&s2);
  std::vector<int> out;
  EXPECT_EQ(co_await rx.recv_many(out, 2), 2u);
  EXPECT_EQ(out, (std::vector<int>{2, 3}));
  EXPECT_TRUE(co_await finishes(a)) << "a slot freed by recv_many did not wake a sender";
  EXPECT_TRUE(co_await finishes(b)) << "a slot freed by recv_many did not wake a sender";
  out.clear();
  EXPECT_EQ(co_await rx.recv_many(out, 2), 2u);
  // Both were granted a slot by the one batch; which pushes first is theirs.
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, (std::vector<int>{4, 5}));
}

TEST_P(MpmcPermitTest, RecvManyWaitsForAValueAndWakesSenders) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on(recv_many_waits_and_frees_slots());
}

Task<void> cancelled_recv_many_takes_nothing() {
  auto [tx, rx] = mpmc::channel<int>(4);
  std::vector<int> out;
  Expected<std::size_t> r = co_await timeout(1ms, rx.recv_many(out, 4));
  EXPECT_FALSE(r);
  EXPECT_TRUE(out.empty());
  // select: the receive that loses takes nothing.
  auto s = co_await select(rx.recv_many(out, 4), sleep(1ms));
  EXPECT_EQ(s.index(), 1u);
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(tx.try_send(1));
  EXPECT_TRUE(tx.try_send(2));
  EXPECT_EQ(co_await rx.recv_many(out, 4), 2u) << "a cancelled recv_many took a value";
  EXPECT_EQ(out, (std::vector<int>{1, 2}));
}

TEST_P(MpmcPermitTest, ACancelledRecvManyTakesNothing) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on(cancelled_recv_many_takes_nothing());
}

// ---- send_timeout ----

Task<void> send_timeout_hands_the_value_back() {
  LifeCounters counters;
  {
    auto [tx, rx] = mpmc::channel<Tracked>(1);
    EXPECT_TRUE(tx.try_send(Tracked(counters, 1)));
    SendResult<Tracked> r = co_await tx.send_timeout(Tracked(counters, 2), 2ms);
    EXPECT_FALSE(r);
    EXPECT_EQ(r.error(), make_error_code(errc::timed_out));
    if (!r) {
      EXPECT_EQ(r.value_back().value(), 2) << "the timed-out value was not handed back";
    }
    EXPECT_EQ(rx.len(), 1u);
    // The timed-out send left the queue: the freed slot is free for anyone.
    std::optional<Tracked> first = co_await rx.recv();
    EXPECT_TRUE(first && first->value() == 1);
    EXPECT_TRUE(tx.try_send(Tracked(counters, 3))) << "the timed-out send kept its place";
    std::optional<Tracked> third = co_await rx.recv();
    EXPECT_TRUE(third && third->value() == 3);
    // Room now: sent at once, even with a zero duration.
    SendResult<Tracked> now = co_await tx.send_timeout(Tracked(counters, 4), 0ms);
    EXPECT_TRUE(now);
    rx.close();
    SendResult<Tracked> closed = co_await tx.send_timeout(Tracked(counters, 5), 1s);
    EXPECT_FALSE(closed);
    EXPECT_EQ(closed.error(), make_error_code(errc::closed));
    if (!closed) {
      EXPECT_EQ(closed.value_back().value(), 5);
    }
  }
  EXPECT_EQ(counters.live(), 0);
}

TEST_P(MpmcPermitTest, SendTimeoutHandsTheValueBackOnTimeout) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on(send_timeout_hands_the_value_back());
}

Task<void> send_timeout_succeeds_when_room_comes() {
  auto [tx, rx] = mpmc::channel<int>(1);
  EXPECT_TRUE(tx.try_send(1));
  JoinHandle<void> receiver = spawn([](mpmc::Receiver<int> rx) -> Task<void> {
    co_await sleep(5ms);
    EXPECT_EQ(co_await recv_bounded(rx), std::optional<int>(1));
    EXPECT_EQ(co_await recv_bounded(rx), std::optional<int>(2));
  }(rx));
  SendResult<int> r = co_await tx.send_timeout(2, kNotHung);
  EXPECT_TRUE(r) << "send_timeout gave up although room came in time";
  EXPECT_TRUE(co_await finishes(receiver));
}

TEST_P(MpmcPermitTest, SendTimeoutSendsWhenRoomComesInTime) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on(send_timeout_succeeds_when_room_comes());
}

// ---- closed() ----

Task<void> closed_completes_when_every_receiver_is_gone() {
  auto [tx, rx] = mpmc::channel<int>(1);
  mpmc::Receiver<int> second = rx;
  Expected<void> early = co_await timeout(2ms, tx.closed());
  EXPECT_FALSE(early) << "closed() completed while receivers live";
  std::atomic<detail::TaskHeader*> task{nullptr};
  JoinHandle<void> watcher =
      spawn([](mpmc::Sender<int> tx, std::atomic<detail::TaskHeader*>* task) -> Task<void> {
        task->store(detail::tls_context.current_task, std::memory_order_release);
        co_await tx.closed();
        EXPECT_TRUE(tx.is_closed());
      }(tx, &task));
  co_await until_suspended(&task);
  { mpmc::Receiver<int> gone = std::move(rx); }
  for (int i = 0; i < 20; ++i)
    co_await yield_now();
  EXPECT_FALSE(watcher.is_finished()) << "one receiver is left";
  { mpmc::Receiver<int> gone = std::move(second); }
  EXPECT_TRUE(co_await finishes(watcher)) << "closed() was not woken by the last receiver";
  Expected<void> at_once = co_await timeout(kNotHung, tx.closed());
  EXPECT_TRUE(at_once);
  mpmc::Sender<int> moved_from;
  co_await moved_from.closed();  // at once
}

TEST_P(MpmcPermitTest, ClosedCompletesWhenTheLastReceiverGoes) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on(closed_completes_when_every_receiver_is_gone());
}

Task<void> closed_completes_on_close() {
  auto [tx, rx] = mpmc::channel<int>(1);
  JoinHandle<void> a = spawn([](mpmc::Sender<int> tx) -> Task<void> { co_await tx.closed(); }(tx));
  JoinHandle<void> b = spawn([](mpmc::Sender<int> tx) -> Task<void> { co_await tx.closed(); }(tx));
  co_await sleep(1ms);
  rx.close();
  EXPECT_TRUE(co_await finishes(a));
  EXPECT_TRUE(co_await finishes(b));
}

TEST_P(MpmcPermitTest, ClosedCompletesOnClose) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on(closed_completes_on_close());
}

// ---- the last receiver: senders waiting get their value back ----

Task<void> last_receiver_gone_fails_waiting_senders() {
  LifeCounters counters;
  {
    auto [tx, rx] = mpmc::channel<Tracked>(1);
    EXPECT_TRUE(tx.try_send(Tracked(counters, 1)));
    std::atomic<detail::TaskHeader*> task{nullptr};
    JoinHandle<int> sender = spawn([](mpmc::Sender<Tracked>* tx, LifeCounters* counters,
                                      std::atomic<detail::TaskHeader*>* task) -> Task<int> {
      task->store(detail::tls_context.current_task, std::memory_order_release);
      SendResult<Tracked> r = co_await tx->send(Tracked(*counters, 2));
      EXPECT_FALSE(r);
      EXPECT_EQ(r.error(), make_error_code(errc::closed));
      co_return r ? -1 : r.value_back().value();
    }(&tx, &counters, &task));
    co_await until_suspended(&task);
    { mpmc::Receiver<Tracked> gone = std::move(rx); }
    Expected<int> back = co_await timeout(kNotHung, sender);
    EXPECT_TRUE(back) << "the waiting sender was not woken";
    if (back) {
      EXPECT_EQ(*back, 2) << "the waiting sender did not get its value back";
    }
    EXPECT_EQ(counters.live(), 0) << "the buffered value outlived the last receiver";
  }
  EXPECT_EQ(counters.live(), 0);
}

TEST_P(MpmcPermitTest, LastReceiverGoneFailsWaitingSendersWithTheirValues) {
  Runtime rt = make_runtime(GetParam());
  rt.block_on(last_receiver_gone_fails_waiting_senders());
}

// ---- allocations ----

Task<std::uint64_t> permit_pingpong_allocations(int rounds) {
  auto there = mpmc::channel<int>(1);
  auto back = mpmc::channel<int>(1);
  mpmc::Sender<int>& to_peer = there.first;
  mpmc::Receiver<int>& peer_rx = there.second;
  mpmc::Sender<int>& to_me = back.first;
  mpmc::Receiver<int>& my_rx = back.second;
  std::vector<int> batch;
  batch.reserve(4);
  JoinHandle<void> peer =
      volt::spawn([](mpmc::Receiver<int> rx, mpmc::Sender<int> tx, int rounds) -> Task<void> {
        std::vector<int> got;
        got.reserve(4);
        for (int i = 0; i < 2 * rounds; ++i) {
          got.clear();
          std::size_t n = co_await rx.recv_many(got, 4);
          EXPECT_EQ(n, 1u);
          Expected<mpmc::Permit<int>> p = co_await tx.reserve();
          EXPECT_TRUE(p);
          if (p) {
            EXPECT_TRUE(p->send(got[0] + 1));
          }
        }
      }(std::move(peer_rx), std::move(to_me), rounds));
  auto round = [&]() -> Task<void> {
    for (int i = 0; i < rounds; ++i) {
      Expected<mpmc::Permit<int>> p = co_await to_peer.reserve();
      EXPECT_TRUE(p);
      if (p) {
        EXPECT_TRUE(p->send(i));
      }
      batch.clear();
      EXPECT_EQ(co_await my_rx.recv_many(batch, 4), 1u);
      EXPECT_EQ(batch[0], i + 1);
    }
  };
  co_await round();  // warm-up: frame pools
  const std::uint64_t before = heap_allocations();
  co_await round();
  const std::uint64_t allocations = heap_allocations() - before;
  co_await peer;
  co_return allocations;
}

TEST(MpmcPermitAllocation, WaitingReserveAndRecvManyDoNotAllocate) {
  if (kFramePoolDisabled) GTEST_SKIP() << "frame pool disabled (ASan)";
  Runtime rt = Runtime::Builder().worker_threads(2).build();
  EXPECT_EQ(rt.block_on(permit_pingpong_allocations(1000)), 0u);
}

TEST(MpmcPermitAllocation, TryReserveAndPermitSendDoNotAllocate) {
  auto [tx, rx] = mpmc::channel<std::uint64_t>(64);
  const std::uint64_t before = heap_allocations();
  for (std::uint64_t i = 0; i < 10'000; ++i) {
    Expected<mpmc::Permit<std::uint64_t>> p = tx.try_reserve();
    ASSERT_TRUE(p);
    ASSERT_TRUE(p->send(std::uint64_t{i}));
    ASSERT_EQ(*rx.try_recv(), i);
  }
  EXPECT_EQ(heap_allocations() - before, 0u);
}

// ---- stresses (TSan) ----

// Senders mixing send(), reserve() + send, reserve() dropped unused (the
// value then goes by send()), reserve_many(2) with one slot dropped, and
// reserve under a short timeout; receivers mixing recv() and recv_many().
// A small channel, so senders wait and permits are dropped while others
// wait. Every value arrives exactly once, in each sender's order, and
// nobody hangs (a dropped permit that woke nobody strands a sender: the
// bounded join fails).
Task<void> permit_stress_sender(mpmc::Sender<std::uint64_t> tx, std::uint64_t p, std::uint64_t per,
                                std::uint32_t seed) {
  std::minstd_rand rng(seed);
  for (std::uint64_t i = 0; i < per; ++i) {
    const std::uint64_t value = p * per + i;
    switch (rng() % 6) {
      case 0: {
        SendResult<std::uint64_t> r = co_await tx.send(std::uint64_t{value});
        EXPECT_TRUE(r);
        break;
      }
      case 1: {
        Expected<mpmc::Permit<std::uint64_t>> permit = co_await tx.reserve();
        EXPECT_TRUE(permit);
        if (rng() % 2) co_await yield_now();  // hold it a while
        if (permit) {
          EXPECT_TRUE(permit->send(std::uint64_t{value}));
        }
        break;
      }
      case 2: {
        {
          Expected<mpmc::Permit<std::uint64_t>> dropped = co_await tx.reserve();
          EXPECT_TRUE(dropped);
          if (rng() % 2) co_await yield_now();
        }  // dropped unused: its slot goes to a waiting sender
        SendResult<std::uint64_t> r = co_await tx.send(std::uint64_t{value});
        EXPECT_TRUE(r);
        break;
      }
      case 3: {
        Expected<mpmc::PermitIterator<std::uint64_t>> two = co_await tx.reserve_many(2);
        EXPECT_TRUE(two);
        if (two) {
          EXPECT_TRUE(two->send(std::uint64_t{value}));
        }
        break;  // the second slot is dropped unused
      }
      case 4: {
        for (;;) {
          Expected<Expected<mpmc::Permit<std::uint64_t>>> permit =
              co_await timeout(std::chrono::microseconds(rng() % 50), tx.reserve());
          if (!permit) continue;  // timed out: held nothing
          EXPECT_TRUE(*permit);
          if (*permit) {
            EXPECT_TRUE((*permit)->send(std::uint64_t{value}));
          }
          break;
        }
        break;
      }
      default: {
        for (;;) {
          Expected<mpmc::Permit<std::uint64_t>> permit = tx.try_reserve();
          if (permit) {
            EXPECT_TRUE(permit->send(std::uint64_t{value}));
            break;
          }
          EXPECT_EQ(permit.error(), make_error_code(errc::full));
          co_await yield_now();
        }
        break;
      }
    }
  }
}

struct PermitStressCounts {
  std::vector<std::atomic<std::uint8_t>> seen;
  std::atomic<std::uint64_t> received{0};
  std::atomic<std::uint64_t> order_violations{0};
  explicit PermitStressCounts(std::size_t n) : seen(n) {}
};

Task<void> permit_stress_receiver(mpmc::Receiver<std::uint64_t> rx, PermitStressCounts* counts,
                                  std::uint64_t senders, std::uint64_t per, std::uint32_t seed) {
  std::minstd_rand rng(seed);
  std::vector<std::uint64_t> last(senders, 0);
  std::vector<std::uint64_t> batch;
  for (;;) {
    batch.clear();
    if (rng() % 2) {
      std::optional<std::uint64_t> v = co_await rx.recv();
      if (!v) break;
      batch.push_back(*v);
    } else if (co_await rx.recv_many(batch, 1 + rng() % 5) == 0) {
      break;
    }
    for (std::uint64_t v : batch) {
      const std::uint64_t p = v / per;
      const std::uint64_t i = v % per;
      if (i + 1 <= last[p]) counts->order_violations.fetch_add(1, std::memory_order_relaxed);
      last[p] = i + 1;
      counts->seen[v].fetch_add(1, std::memory_order_relaxed);
      counts->received.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

// Awaits every handle, all within one bound (inside the runtime, so a
// current-thread runtime runs the tasks meanwhile); false if one is not
// finished by then (a hang), after aborting the rest.
Task<bool> all_finish(std::vector<JoinHandle<void>>* handles, std::chrono::nanoseconds bound) {
  const Instant deadline = time::now() + bound;
  bool ok = true;
  for (auto& h : *handles) {
    if (!ok) {
      h.abort();
      continue;
    }
    Expected<void> r = co_await timeout_at(deadline, h);
    if (!r) ok = false;
  }
  co_return ok;
}

TEST_P(MpmcPermitTest, PermitsDroppedWhileSendersWaitLoseNothing) {
  Runtime rt = make_runtime(GetParam());
  constexpr std::uint64_t kSenders = 4;
  constexpr std::uint64_t kReceivers = 3;
  const std::uint64_t per = scale(20'000) / (GetParam().current_thread ? 4 : 1);
  for (std::size_t capacity : {2u, 5u}) {
    PermitStressCounts counts(kSenders * per);
    const bool finished = rt.block_on([](PermitStressCounts* counts, std::uint64_t per,
                                         std::size_t capacity) -> Task<bool> {
      auto [tx, rx] = mpmc::channel<std::uint64_t>(capacity);
      std::vector<JoinHandle<void>> tasks;
      for (std::uint64_t p = 0; p < kSenders; ++p)
        tasks.push_back(
            spawn(permit_stress_sender(tx, p, per, static_cast<std::uint32_t>(p * 31 + capacity))));
      for (std::uint64_t c = 0; c < kReceivers; ++c)
        tasks.push_back(spawn(permit_stress_receiver(
            rx, counts, kSenders, per, static_cast<std::uint32_t>(c * 17 + capacity))));
      { mpmc::Sender<std::uint64_t> gone = std::move(tx); }
      { mpmc::Receiver<std::uint64_t> gone = std::move(rx); }
      co_return co_await all_finish(&tasks, 5 * kNotHung);
    }(&counts, per, capacity));
    ASSERT_TRUE(finished) << "capacity " << capacity << ": a task hung (" << counts.received.load()
                          << " of " << kSenders * per << " received)";
    EXPECT_EQ(counts.received.load(), kSenders * per);
    EXPECT_EQ(counts.order_violations.load(), 0u);
    for (std::uint64_t v = 0; v < kSenders * per; ++v)
      ASSERT_EQ(counts.seen[v].load(), 1u) << "value " << v;
  }
}

// The last receiver goes while senders send (send, permit) and wait: every
// sender ends (errc::closed, the value back, or through a permit), the
// values buffered then are destroyed at once by the dropping receiver (none
// is alive while a Sender still holds the channel), and nothing is
// destroyed twice.
Task<void> drop_race_sender(mpmc::Sender<Tracked> tx, LifeCounters* counters, int id,
                            std::atomic<std::uint64_t>* delivered) {
  std::minstd_rand rng(static_cast<unsigned>(id));
  for (int i = 0;; ++i) {
    if (rng() % 2) {
      SendResult<Tracked> r = co_await tx.send(Tracked(*counters, i));
      if (!r) {
        EXPECT_EQ(r.error(), make_error_code(errc::closed));
        EXPECT_EQ(r.value_back().value(), i);
        co_return;
      }
    } else {
      Expected<mpmc::Permit<Tracked>> permit = co_await tx.reserve();
      if (!permit) {
        EXPECT_EQ(permit.error(), make_error_code(errc::closed));
        co_return;
      }
      if (rng() % 4 == 0) co_await yield_now();
      SendResult<Tracked> r = permit->send(Tracked(*counters, i));
      if (!r) {
        EXPECT_EQ(r.error(), make_error_code(errc::closed));
        EXPECT_EQ(r.value_back().value(), i);
        co_return;
      }
    }
    delivered->fetch_add(1, std::memory_order_relaxed);
  }
}

TEST_P(MpmcPermitTest, LastReceiverGoneWhileSendersSendLosesAndLeaksNothing) {
  Runtime rt = make_runtime(GetParam());
  const int rounds = static_cast<int>(scale(100));
  for (int round = 0; round < rounds; ++round) {
    LifeCounters counters;
    std::atomic<std::uint64_t> delivered{0};
    rt.block_on([](LifeCounters* counters, std::atomic<std::uint64_t>* delivered,
                   int round) -> Task<void> {
      auto [tx, rx] = mpmc::channel<Tracked>(1 + round % 4);
      std::vector<JoinHandle<void>> tasks;
      for (int s = 0; s < 3; ++s)
        tasks.push_back(spawn(drop_race_sender(tx, counters, round * 3 + s, delivered)));
      tasks.push_back(spawn([](mpmc::Receiver<Tracked> rx, int take) -> Task<void> {
        for (int i = 0; i < take; ++i) {
          std::optional<Tracked> v = co_await rx.recv();
          if (!v) break;
        }
        // rx (the last receiver) goes here, with senders running
      }(std::move(rx), round % 7)));
      const bool finished = co_await all_finish(&tasks, kNotHung);
      EXPECT_TRUE(finished) << "round " << round
                            << ": a sender was not failed by the last receiver's drop";
      // tx still holds the channel: anything buffered would be alive now.
      EXPECT_EQ(counters->live(), 0) << "round " << round << ": values outlived the last receiver";
      EXPECT_TRUE(tx.is_closed());
    }(&counters, &delivered, round));
    ASSERT_FALSE(HasFailure()) << "round " << round;
    EXPECT_EQ(counters.live(), 0);
    EXPECT_EQ(counters.double_destroyed.load(), 0);
  }
}

TEST(MpmcPermitNames, MpscSenderHasTheTwoPhaseSend) {
  auto [tx, rx] = mpsc::channel<int>(1);
  Expected<mpsc::Permit<int>> p = tx.try_reserve();
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->send(1));
  EXPECT_EQ(*rx.try_recv(), 1);
  Expected<mpsc::PermitIterator<int>> many = tx.try_reserve_many(1);
  ASSERT_TRUE(many);
  EXPECT_EQ(many->len(), 1u);
}

}  // namespace
}  // namespace volt::test
