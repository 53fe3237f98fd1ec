// Every waiting channel operation withdraws its waker when it is destroyed
// (an aborted task; for oneshot also a timeout that fired): the dead task's
// cell keeps no reference from the channel, and a later send does not reach
// it (tests/sync/withdraw_support.hpp has the check). On both runtime
// flavours.
#include <chrono>
#include <optional>
#include <utility>

#include <gtest/gtest.h>

#include "sync/withdraw_support.hpp"
#include "test_support.hpp"
#include "volt/channel/broadcast.hpp"
#include "volt/channel/mpmc.hpp"
#include "volt/channel/oneshot.hpp"
#include "volt/channel/unbounded.hpp"
#include "volt/channel/watch.hpp"
#include "volt/time/timeout.hpp"

namespace volt {
namespace {

using test::RuntimeKind;
using test::Tracked;
using test::WaitProbe;

class ChannelWithdrawTest : public ::testing::TestWithParam<RuntimeKind> {
 protected:
  Runtime rt_ = test::build_runtime(GetParam());
};

INSTANTIATE_TEST_SUITE_P(Runtimes, ChannelWithdrawTest,
                         ::testing::Values(RuntimeKind::kMultiThread, RuntimeKind::kCurrentThread),
                         [](const auto& info) {
                           return info.param == RuntimeKind::kMultiThread ? "MultiThread"
                                                                          : "CurrentThread";
                         });

// --- oneshot ---

Task<void> wait_oneshot(WaitProbe* probe, oneshot::Receiver<int>* rx) {
  test::record_current_task(*probe);
  Tracked in_frame(probe->counters, 1);
  probe->waiting.store(true, std::memory_order_release);
  (void)co_await *rx;
}

Task<void> abort_oneshot_wait() {
  WaitProbe probe;
  auto channel = oneshot::channel<int>();  // no structured bindings: clang 14 cannot capture them
  auto& tx = channel.first;
  auto& rx = channel.second;
  co_await test::abort_waiter_and_check(wait_oneshot(&probe, &rx), probe, [&] {
    EXPECT_EQ(tx.send(5), std::nullopt);  // the receiver is alive
  });
  EXPECT_EQ(rx.try_recv(), std::optional<int>(5));
}

TEST_P(ChannelWithdrawTest, OneshotAbortedWaitWithdrawsItsWaker) {
  rt_.block_on(abort_oneshot_wait());
}

// The wait ends by timeout and the task goes on to finish normally.
Task<void> time_out_on_oneshot(WaitProbe* probe, oneshot::Receiver<int>* rx) {
  test::record_current_task(*probe);
  Expected<std::optional<int>> r = co_await volt::timeout(std::chrono::milliseconds(2), *rx);
  EXPECT_FALSE(r.has_value());
}

Task<void> oneshot_timed_out_wait() {
  using namespace std::chrono_literals;
  WaitProbe probe;
  auto channel = oneshot::channel<int>();  // no structured bindings: clang 14 cannot capture them
  auto& tx = channel.first;
  auto& rx = channel.second;
  JoinHandle<void> handle = spawn(time_out_on_oneshot(&probe, &rx));
  // Not joined yet: the handle keeps the cell.
  EXPECT_TRUE(co_await test::yield_until([&] { return handle.is_finished(); }, 10s));
  EXPECT_TRUE(co_await test::yield_until([&] { return test::cell_references(probe) == 1; }, 2s))
      << "references left on the finished task's cell: " << test::cell_references(probe);
  EXPECT_EQ(tx.send(6), std::nullopt);
  EXPECT_EQ(test::cell_references(probe), 1u);
  co_await handle;
  // Awaited again after the timed-out wait: still receives.
  EXPECT_EQ(co_await rx, std::optional<int>(6));
}

TEST_P(ChannelWithdrawTest, OneshotTimedOutWaitWithdrawsItsWaker) {
  rt_.block_on(oneshot_timed_out_wait());
}

// --- mpmc ---

Task<void> wait_mpmc_recv(WaitProbe* probe, mpmc::Receiver<int>* rx) {
  test::record_current_task(*probe);
  Tracked in_frame(probe->counters, 1);
  probe->waiting.store(true, std::memory_order_release);
  (void)co_await rx->recv();
}

Task<void> abort_mpmc_recv() {
  WaitProbe probe;
  auto channel = mpmc::channel<int>(1);  // no structured bindings: clang 14 cannot capture them
  auto& tx = channel.first;
  auto& rx = channel.second;
  co_await test::abort_waiter_and_check(wait_mpmc_recv(&probe, &rx), probe,
                                        [&] { EXPECT_TRUE(tx.try_send(7)); });
  Expected<int> v = rx.try_recv();
  EXPECT_TRUE(v.has_value() && *v == 7) << "the aborted receive took nothing";
}

TEST_P(ChannelWithdrawTest, MpmcAbortedRecvWithdrawsItsWaker) {
  rt_.block_on(abort_mpmc_recv());
}

Task<void> wait_mpmc_send(WaitProbe* probe, mpmc::Sender<int>* tx) {
  test::record_current_task(*probe);
  Tracked in_frame(probe->counters, 1);
  probe->waiting.store(true, std::memory_order_release);
  (void)co_await tx->send(2);
}

Task<void> abort_mpmc_send() {
  WaitProbe probe;
  auto channel = mpmc::channel<int>(1);  // no structured bindings: clang 14 cannot capture them
  auto& tx = channel.first;
  auto& rx = channel.second;
  EXPECT_TRUE(tx.try_send(1));
  co_await test::abort_waiter_and_check(wait_mpmc_send(&probe, &tx), probe, [&] {
    Expected<int> v = rx.try_recv();
    EXPECT_TRUE(v.has_value() && *v == 1);
  });
  EXPECT_EQ(rx.try_recv().error(), errc::empty) << "the aborted send sent nothing";
}

TEST_P(ChannelWithdrawTest, MpmcAbortedSendWithdrawsItsWaker) {
  rt_.block_on(abort_mpmc_send());
}

// --- unbounded ---

Task<void> wait_unbounded(WaitProbe* probe, mpsc::UnboundedReceiver<int>* rx) {
  test::record_current_task(*probe);
  Tracked in_frame(probe->counters, 1);
  probe->waiting.store(true, std::memory_order_release);
  (void)co_await rx->recv();
}

Task<void> abort_unbounded_recv() {
  WaitProbe probe;
  auto channel =
      mpsc::unbounded_channel<int>();  // no structured bindings: clang 14 cannot capture them
  auto& tx = channel.first;
  auto& rx = channel.second;
  co_await test::abort_waiter_and_check(wait_unbounded(&probe, &rx), probe,
                                        [&] { EXPECT_TRUE(tx.send(8)); });
  EXPECT_EQ(co_await rx.recv(), std::optional<int>(8));
}

TEST_P(ChannelWithdrawTest, UnboundedAbortedRecvWithdrawsItsWaker) {
  rt_.block_on(abort_unbounded_recv());
}

// --- broadcast ---

Task<void> wait_broadcast(WaitProbe* probe, broadcast::Receiver<int>* rx) {
  test::record_current_task(*probe);
  Tracked in_frame(probe->counters, 1);
  probe->waiting.store(true, std::memory_order_release);
  (void)co_await rx->recv();
}

Task<void> abort_broadcast_recv() {
  WaitProbe probe;
  auto channel =
      broadcast::channel<int>(4);  // no structured bindings: clang 14 cannot capture them
  auto& tx = channel.first;
  auto& rx = channel.second;
  co_await test::abort_waiter_and_check(wait_broadcast(&probe, &rx), probe,
                                        [&] { EXPECT_TRUE(tx.send(9)); });
  broadcast::RecvResult<int> r = co_await rx.recv();
  EXPECT_TRUE(r.has_value() && *r == 9);
}

TEST_P(ChannelWithdrawTest, BroadcastAbortedRecvWithdrawsItsWaker) {
  rt_.block_on(abort_broadcast_recv());
}

// --- watch ---

Task<void> wait_watch(WaitProbe* probe, watch::Receiver<int>* rx) {
  test::record_current_task(*probe);
  Tracked in_frame(probe->counters, 1);
  probe->waiting.store(true, std::memory_order_release);
  (void)co_await rx->changed();
}

Task<void> abort_watch_changed() {
  WaitProbe probe;
  auto channel = watch::channel<int>(0);  // no structured bindings: clang 14 cannot capture them
  auto& tx = channel.first;
  auto& rx = channel.second;
  co_await test::abort_waiter_and_check(wait_watch(&probe, &rx), probe,
                                        [&] { EXPECT_TRUE(tx.send(10)); });
  EXPECT_TRUE(co_await rx.changed());
}

TEST_P(ChannelWithdrawTest, WatchAbortedChangedWithdrawsItsWaker) {
  rt_.block_on(abort_watch_changed());
}

}  // namespace
}  // namespace volt
