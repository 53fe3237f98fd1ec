// Tests of volt::join and volt::try_join (include/volt/task/join.hpp), on the
// current-thread and the two-worker runtime:
//
//  - join: a tuple of every result (void as std::monostate, an lvalue
//    reference as std::reference_wrapper), operands that refer to the
//    caller's locals, two operands that each wait for the other (only
//    possible if they run concurrently), ready operands taken without a
//    branch;
//  - try_join: the values when all succeed; the first error ends it and the
//    operand still running is destroyed before the co_await returns (its
//    frame's destructor counted), an operand after one that failed at once
//    is never started; an exception ends join the same way;
//  - a join under a timeout: the branches are cancelled;
//  - no heap allocation in steady state.
// Coroutines are free functions taking their state by pointer or value;
// awaited values are bound to a local before they are tested (GCC 12).
#include "volt/task/join.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <variant>

#include "test_support.hpp"
#include "time/time_test_support.hpp"
#include "volt/volt.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

class JoinTest : public ::testing::TestWithParam<Flavour> {};

INSTANTIATE_TEST_SUITE_P(Flavours, JoinTest, ::testing::Values(kMultiThread2, kCurrentThread),
                         FlavourName());

Task<int> after_sleep(std::chrono::milliseconds d, int v) {
  co_await volt::sleep(d);
  co_return v;
}

Task<void> add_to(int* x, int v) {
  co_await yield_now();
  *x += v;
}

Task<int&> ref_to(int* x) {
  co_await yield_now();
  co_return *x;
}

// Always ready with `value`.
struct Ready {
  int value;
  bool await_ready() const noexcept { return true; }
  void await_suspend(std::coroutine_handle<>) const noexcept {}
  int await_resume() const noexcept { return value; }
};

struct JoinOutcome {
  int a = 0, b = 0, ready = 0, local = 0;
  bool ref_is_local = false;
  int ping_pong = 0;
};

// Sends `v` to `out`, then waits for the reply on `in`.
Task<int> ping(oneshot::Sender<int> out, oneshot::Receiver<int> in, int v) {
  (void)out.send(v);
  std::optional<int> r = co_await in;
  co_return r.value_or(-1);
}
// Waits on `in`, then replies with twice the value.
Task<int> pong(oneshot::Receiver<int> in, oneshot::Sender<int> out) {
  std::optional<int> r = co_await in;
  (void)out.send(2 * r.value_or(-1));
  co_return r.value_or(-1);
}

Task<JoinOutcome> join_results() {
  JoinOutcome out;
  int local = 1;
  auto [a, b, nothing, ready, ref] = co_await volt::join(
      after_sleep(2ms, 10), after_sleep(1ms, 20), add_to(&local, 5), Ready{7}, ref_to(&local));
  static_assert(std::is_same_v<decltype(nothing), std::monostate>);
  static_assert(std::is_same_v<decltype(ref), std::reference_wrapper<int>>);
  out.a = a;
  out.b = b;
  out.ready = ready;
  out.local = local;
  out.ref_is_local = &ref.get() == &local;

  auto [tx1, rx1] = oneshot::channel<int>();
  auto [tx2, rx2] = oneshot::channel<int>();
  auto [p, q] = co_await volt::join(ping(std::move(tx1), std::move(rx2), 21),
                                    pong(std::move(rx1), std::move(tx2)));
  out.ping_pong = p + q;  // 42 + 21
  co_return out;
}

TEST_P(JoinTest, JoinGivesEveryResultAndRunsOperandsConcurrently) {
  Runtime rt = make_runtime(GetParam());
  JoinOutcome out = run_in_runtime(rt, GetParam(), join_results());
  EXPECT_EQ(out.a, 10);
  EXPECT_EQ(out.b, 20);
  EXPECT_EQ(out.ready, 7);
  EXPECT_EQ(out.local, 6);
  EXPECT_TRUE(out.ref_is_local);
  EXPECT_EQ(out.ping_pong, 63);
}

// ---- try_join ----

Task<Expected<int>> ok_after(std::chrono::milliseconds d, int v) {
  co_await volt::sleep(d);
  co_return v;
}
Task<Expected<void>> ok_void() {
  co_await yield_now();
  co_return Expected<void>();
}
Task<Expected<int>> fail_after(std::chrono::milliseconds d) {
  co_await volt::sleep(d);
  co_return Expected<int>(errc::closed);
}
Task<Expected<int>> fail_now() {
  co_return Expected<int>(errc::full);
}
// Holds `probe` and waits for a notification that never comes.
Task<Expected<std::string>> waits_forever(Tracked probe, Notify* never) {
  co_await never->notified();
  co_return std::to_string(probe.value());
}
Task<Expected<int>> counts_start(std::atomic<int>* started) {
  started->fetch_add(1);
  co_await yield_now();
  co_return 1;
}

struct TryJoinOutcome {
  int sum = 0;
  bool all_ok = false;
  std::error_code first_error;
  std::int64_t live_after_error = -1;
  std::error_code immediate_error;
  int started_after_immediate = -1;
};

Task<TryJoinOutcome> try_join_cases(LifeCounters* counters) {
  TryJoinOutcome out;
  Expected<std::tuple<int, std::monostate, int>> all =
      co_await volt::try_join(ok_after(2ms, 3), ok_void(), ok_after(1ms, 4));
  out.all_ok = all.has_value();
  if (all) out.sum = std::get<0>(*all) + std::get<2>(*all);

  Notify never;
  Expected<std::tuple<int, std::string>> failed =
      co_await volt::try_join(fail_after(2ms), waits_forever(Tracked(*counters, 5), &never));
  out.first_error = failed.error();
  out.live_after_error = counters->live();  // the waiting branch is gone already

  std::atomic<int> started{0};
  Expected<std::tuple<int, int>> immediate =
      co_await volt::try_join(fail_now(), counts_start(&started));
  out.immediate_error = immediate.error();
  out.started_after_immediate = started.load();
  co_return out;
}

TEST_P(JoinTest, TryJoinStopsAtTheFirstErrorAndDestroysTheRest) {
  Runtime rt = make_runtime(GetParam());
  LifeCounters counters;
  TryJoinOutcome out = run_in_runtime(rt, GetParam(), try_join_cases(&counters));
  EXPECT_TRUE(out.all_ok);
  EXPECT_EQ(out.sum, 7);
  EXPECT_EQ(out.first_error, errc::closed);
  EXPECT_EQ(out.live_after_error, 0) << "the running operand outlived the try_join";
  EXPECT_EQ(out.immediate_error, errc::full);
  EXPECT_EQ(out.started_after_immediate, 0) << "an operand after an immediate error was started";
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

// ---- exceptions, timeout ----

Task<int> throws_after(std::chrono::milliseconds d) {
  co_await volt::sleep(d);
  throw std::runtime_error("operand failed");
}
Task<int> parked_int(Tracked probe, Notify* never) {
  co_await never->notified();
  co_return probe.value();
}

struct ThrowOutcome {
  bool caught = false;
  std::int64_t live_after_throw = -1;
  bool timed_out = false;
  std::int64_t live_after_timeout = -1;
};

Task<ThrowOutcome> throw_and_timeout(LifeCounters* counters) {
  ThrowOutcome out;
  Notify never;
  try {
    auto r = co_await volt::join(throws_after(1ms), parked_int(Tracked(*counters, 1), &never));
    (void)r;
  } catch (const std::runtime_error&) {
    out.caught = true;
  }
  out.live_after_throw = counters->live();

  Expected<std::tuple<int, int>> t = co_await volt::timeout(
      3ms, volt::join(after_sleep(1ms, 1), parked_int(Tracked(*counters, 2), &never)));
  out.timed_out = !t && t.error() == errc::timed_out;
  out.live_after_timeout = counters->live();
  co_return out;
}

TEST_P(JoinTest, ExceptionOrOuterTimeoutCancelsTheOtherOperands) {
  Runtime rt = make_runtime(GetParam());
  LifeCounters counters;
  ThrowOutcome out = run_in_runtime(rt, GetParam(), throw_and_timeout(&counters));
  EXPECT_TRUE(out.caught);
  EXPECT_EQ(out.live_after_throw, 0);
  EXPECT_TRUE(out.timed_out);
  EXPECT_EQ(out.live_after_timeout, 0);
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

// ---- allocation ----

Task<int> yield_value(int v) {
  co_await yield_now();
  co_return v;
}

Task<std::uint64_t> count_join_allocations() {
  int sum = 0;
  for (int i = 0; i < 100; ++i) {  // warm-up: frame pools, the timer wheel's first use
    auto [a, b] = co_await volt::join(yield_value(1), yield_value(2));
    sum += a + b;
    Expected<std::tuple<int, std::monostate>> r =
        co_await volt::try_join(ok_after(0ms, 1), ok_void());
    sum += r ? std::get<0>(*r) : 1000;
  }
  const std::uint64_t before = heap_allocations();
  for (int i = 0; i < 1000; ++i) {
    auto [a, b] = co_await volt::join(yield_value(1), yield_value(2));
    sum += a + b;
    Expected<std::tuple<int, std::monostate>> r =
        co_await volt::try_join(ok_after(0ms, 1), ok_void());
    sum += r ? std::get<0>(*r) : 1000;
  }
  const std::uint64_t allocs = heap_allocations() - before;
  EXPECT_EQ(sum, 100 * 4 + 1000 * 4);
  co_return allocs;
}

class JoinAllocationTest : public ::testing::TestWithParam<Flavour> {};

INSTANTIATE_TEST_SUITE_P(Flavours, JoinAllocationTest,
                         ::testing::Values(kMultiThread1, kCurrentThread), FlavourName());

TEST_P(JoinAllocationTest, NoHeapAllocationAfterWarmUp) {
  if (kFramePoolDisabled)
    GTEST_SKIP() << "frame pool disabled: the counting operator new is not installed";
  Runtime rt = make_runtime(GetParam());
  EXPECT_EQ(run_in_runtime(rt, GetParam(), count_join_allocations()), 0u);
}

}  // namespace
}  // namespace volt::test
