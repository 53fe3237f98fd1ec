// Tests of Shutdown and WorkGuard (include/volt/signal/shutdown.hpp): the
// trigger by call and by signal, the forced stop by a second signal, the
// count of work in flight and wait_pending's three ways to end. The signals
// raised are SIGUSR1/SIGUSR2, so that the rest of the binary's tests, which
// use others, are not disturbed.
#include "volt/signal/shutdown.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "test_support.hpp"
#include "volt/runtime/runtime.hpp"
#include "volt/sync/notify.hpp"
#include "volt/task/select.hpp"
#include "volt/time/sleep.hpp"
#include "volt/time/timeout.hpp"

namespace volt {
namespace {

using namespace std::chrono_literals;

class ShutdownTest : public ::testing::TestWithParam<test::RuntimeKind> {
 protected:
  Runtime rt_ = test::build_runtime(GetParam());
};

INSTANTIATE_TEST_SUITE_P(Runtimes, ShutdownTest,
                         ::testing::Values(test::RuntimeKind::kMultiThread,
                                           test::RuntimeKind::kCurrentThread),
                         [](const auto& info) { return test::runtime_kind_name(info.param); });

Task<bool> triggered_wakes_a_waiter() {
  Shutdown shutdown;
  Shutdown copy = shutdown;
  auto waiter = [](Shutdown s) -> Task<bool> {
    co_await s.triggered();
    co_return s.is_triggered();
  };
  JoinHandle<bool> h = spawn(waiter(copy));
  co_await sleep(5ms);  // the waiter is waiting (or not: it completes either way)
  if (h.is_finished()) co_return false;
  shutdown.trigger();
  shutdown.trigger();  // idempotent
  const bool woke = co_await h;
  co_return woke&& copy.is_triggered() && copy.token().is_cancelled() && !copy.forced();
}

TEST_P(ShutdownTest, TriggerCompletesTriggeredOnEveryCopy) {
  EXPECT_TRUE(rt_.block_on(triggered_wakes_a_waiter()));
}

Task<void> hold_until(WorkGuard guard, Notify* release) {
  co_await release->notified();
  (void)guard;
}

struct Drain {
  std::size_t pending_before = 0;
  bool drained = false;
  std::size_t pending_after = 0;
};

Task<void> release_later(Notify* release, WorkGuard guard) {
  co_await sleep(10ms);
  release->notify_waiters();  // the holders end, dropping theirs
  (void)guard;                // and this one goes with this frame
}

Task<Drain> drain_after_release() {
  Shutdown shutdown;
  Notify release;
  Drain d;
  if (!co_await shutdown.wait_pending(0ns)) co_return d;  // nothing pending: true at once
  std::vector<JoinHandle<void>> holders;
  for (int i = 0; i < 3; ++i)
    holders.push_back(spawn(hold_until(shutdown.start_work(), &release)));
  WorkGuard mine = shutdown.start_work();
  WorkGuard moved = std::move(mine);  // counts once
  d.pending_before = shutdown.pending();
  shutdown.trigger();
  JoinHandle<void> releaser = spawn(release_later(&release, std::move(moved)));
  d.drained = co_await shutdown.wait_pending(60s);
  d.pending_after = shutdown.pending();
  for (auto& h : holders)
    co_await h;
  co_await releaser;
  co_return d;
}

TEST_P(ShutdownTest, WaitPendingEndsWhenTheLastGuardGoes) {
  Drain d = rt_.block_on(drain_after_release());
  EXPECT_EQ(d.pending_before, 4u);
  EXPECT_TRUE(d.drained);
  EXPECT_EQ(d.pending_after, 0u);
}

Task<std::optional<bool>> drain_with_a_straggler() {
  Shutdown shutdown;
  WorkGuard straggler = shutdown.start_work();
  shutdown.trigger();
  // Bounded: gives up after the limit, reporting the straggler.
  const bool drained = co_await shutdown.wait_pending(20ms);
  co_return drained ? std::optional<bool>() : std::optional<bool>(shutdown.pending() == 1);
}

TEST_P(ShutdownTest, WaitPendingGivesUpAfterItsLimit) {
  std::optional<bool> r = rt_.block_on(drain_with_a_straggler());
  ASSERT_TRUE(r.has_value()) << "drained although a guard was held";
  EXPECT_TRUE(*r);
}

// ---- signals ----

Task<bool> first_signal_triggers_second_forces() {
  Shutdown shutdown = Shutdown::on_signals({SIGUSR1, SIGUSR2});
  WorkGuard stuck = shutdown.start_work();
  ::raise(SIGUSR2);
  Expected<void> triggered = co_await timeout(30s, shutdown.triggered());
  if (!triggered || shutdown.forced()) co_return false;
  // The drain would wait a minute for the stuck guard: a second signal (any
  // of the two) ends it at once.
  JoinHandle<bool> drain = spawn(shutdown.wait_pending(60s));
  co_await sleep(5ms);
  if (drain.is_finished()) co_return false;
  ::raise(SIGUSR1);
  Expected<bool> drained = co_await timeout(30s, drain);
  co_return drained && !*drained && shutdown.forced();
}

TEST_P(ShutdownTest, TheFirstSignalTriggersAndTheSecondEndsTheDrain) {
  EXPECT_TRUE(rt_.block_on(first_signal_triggers_second_forces()));
}

TEST_P(ShutdownTest, TheListenersEndWithTheLastCopy) {
  auto body = []() -> Task<bool> {
    const std::size_t before = Handle::current().stats().live_tasks;
    std::optional<Shutdown> shutdown = Shutdown::on_signals({SIGUSR1, SIGUSR2});
    const std::size_t with = Handle::current().stats().live_tasks;
    shutdown.reset();
    for (int i = 0; i < 1000 && Handle::current().stats().live_tasks != before; ++i)
      co_await sleep(1ms);
    co_return with == before + 2 && Handle::current().stats().live_tasks == before;
  };
  EXPECT_TRUE(rt_.block_on(body()));
}

TEST(ShutdownErrors, OnSignalsOutsideARuntimeIsNoRuntime) {
  try {
    (void)Shutdown::on_signals({SIGUSR1});
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::no_runtime);
  }
}

}  // namespace
}  // namespace volt
