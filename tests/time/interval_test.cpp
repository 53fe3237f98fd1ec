// Integration tests of volt::Interval (include/volt/time/interval.hpp):
//
//  - the first tick is immediate (interval) or at the start (interval_at);
//  - tick k completes at or after start + k * period, never before, and
//    returns its scheduled time;
//  - a period of zero or less throws errc::invalid_argument;
//  - missed ticks (late by more than 5 ms) follow the MissedTickBehavior:
//    burst, delay, skip, checked at exact instants on the paused clock,
//    including the 5 ms threshold, reset() and moving the Interval;
//  - a tick wait that is timed out or aborted does not lose the tick.
#include <atomic>
#include <chrono>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "time/time_test_support.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

class IntervalTest : public ::testing::TestWithParam<Flavour> {};

INSTANTIATE_TEST_SUITE_P(Flavours, IntervalTest, ::testing::ValuesIn(kTimeFlavours), FlavourName());

// ---- real clock ----

struct TickRecord {
  Instant returned{};
  Instant completed{};
};

struct RealTicks {
  Instant before_create{};
  Instant start{};
  Instant after_create{};
  std::vector<TickRecord> ticks;
  std::uint64_t polls = 0;
};

Task<RealTicks> tick_on_the_real_clock(std::chrono::nanoseconds period, int n) {
  RealTicks r;
  const std::uint64_t polls_before = stats_here().total_polled;
  r.before_create = SteadyClock::now();
  volt::Interval iv = volt::interval(period);
  r.after_create = SteadyClock::now();
  r.start = iv.next_tick();
  for (int k = 0; k < n; ++k) {
    const Instant at = co_await iv.tick();
    r.ticks.push_back({at, SteadyClock::now()});
  }
  r.polls = stats_here().total_polled - polls_before;
  co_return r;
}

TEST_P(IntervalTest, FirstTickIsImmediateThenTicksAreNeverEarly) {
  Runtime rt = make_runtime(GetParam());
  constexpr int kTicks = 8;
  constexpr auto kPeriod = 10ms;
  RealTicks r = run_in_runtime(rt, GetParam(), tick_on_the_real_clock(kPeriod, kTicks));
  ASSERT_EQ(r.ticks.size(), static_cast<std::size_t>(kTicks));
  EXPECT_GE(r.start, r.before_create);
  EXPECT_LE(r.start, r.after_create);
  // The first tick does not wait a period.
  EXPECT_EQ(r.ticks[0].returned, r.start);
  EXPECT_LT(r.ticks[0].completed - r.start, kPeriod + kNotHung / 10);
  for (int k = 0; k < kTicks; ++k) {
    SCOPED_TRACE(k);
    const TickRecord& t = r.ticks[static_cast<std::size_t>(k)];
    // The scheduled time (burst keeps the schedule even if a tick was late).
    EXPECT_EQ(t.returned, r.start + k * kPeriod);
    EXPECT_GE(t.completed, r.start + k * kPeriod) << "tick completed early";
  }
  EXPECT_LT(r.ticks.back().completed - r.start, kTicks * kPeriod + kNotHung);
  // Waiting for a tick is not polling for it.
  EXPECT_LT(r.polls, 10u * kTicks + 10);
  EXPECT_EQ(rt.stats().active_timers, 0u);
}

struct AtStart {
  Instant start{};
  Instant first{};
  Instant first_completed{};
  Instant second{};
  Instant second_completed{};
};

Task<AtStart> interval_at_a_later_start() {
  AtStart r;
  r.start = volt::time::now() + 15ms;
  volt::Interval iv = volt::interval_at(r.start, 10ms);
  r.first = co_await iv.tick();
  r.first_completed = SteadyClock::now();
  r.second = co_await iv.tick();
  r.second_completed = SteadyClock::now();
  co_return r;
}

TEST_P(IntervalTest, IntervalAtStartsAtItsStart) {
  Runtime rt = make_runtime(GetParam());
  AtStart r = run_in_runtime(rt, GetParam(), interval_at_a_later_start());
  EXPECT_EQ(r.first, r.start);
  EXPECT_GE(r.first_completed, r.start);
  EXPECT_EQ(r.second, r.start + 10ms);
  EXPECT_GE(r.second_completed, r.start + 10ms);
}

// A tick wait that loses a timeout is withdrawn, not lost: the next tick()
// waits for the same scheduled tick.
struct LostTick {
  Instant start{};
  bool timed_out = false;
  Instant next{};
  Instant next_completed{};
  std::uint64_t active_after = 99;
};

Task<LostTick> time_out_a_tick_real() {
  LostTick r;
  volt::Interval iv = volt::interval(50ms);
  r.start = co_await iv.tick();
  {
    // The tick wait moved into the timeout (the rvalue form).
    Expected<Instant> e = co_await volt::timeout(1ms, iv.tick());
    r.timed_out = !e && e.error() == errc::timed_out;
  }
  r.next = co_await iv.tick();
  r.next_completed = SteadyClock::now();
  r.active_after = stats_here().active_timers;
  co_return r;
}

TEST_P(IntervalTest, TimedOutTickIsNotLost) {
  Runtime rt = make_runtime(GetParam());
  LostTick r = run_in_runtime(rt, GetParam(), time_out_a_tick_real());
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.next, r.start + 50ms);
  EXPECT_GE(r.next_completed, r.start + 50ms);
  EXPECT_LT(r.next_completed, r.start + 50ms + kNotHung);
  EXPECT_EQ(r.active_after, 0u);
}

// ---- invalid periods ----

TEST(IntervalArgumentsTest, NonPositivePeriodThrowsInvalidArgument) {
  const Instant now = volt::time::now();
  EXPECT_EQ(volt_error_of([] { (void)volt::interval(0ms); }), code(errc::invalid_argument));
  EXPECT_EQ(volt_error_of([] { (void)volt::interval(-1ms); }), code(errc::invalid_argument));
  EXPECT_EQ(volt_error_of([] { (void)volt::interval(std::chrono::nanoseconds::min()); }),
            code(errc::invalid_argument));
  EXPECT_EQ(volt_error_of([] { (void)volt::interval(std::chrono::hours::min()); }),
            code(errc::invalid_argument));
  EXPECT_EQ(volt_error_of([&] { (void)volt::interval_at(now, 0ns); }),
            code(errc::invalid_argument));
  EXPECT_EQ(volt_error_of([&] { (void)volt::Interval(now, volt::Duration(-1)); }),
            code(errc::invalid_argument));
  // The smallest positive period and a saturated huge one are fine.
  EXPECT_EQ(volt_error_of([] { (void)volt::interval(1ns); }), std::error_code());
  EXPECT_EQ(volt_error_of([] { (void)volt::interval(std::chrono::hours::max()); }),
            std::error_code());
  EXPECT_EQ(volt::interval(std::chrono::hours::max()).period(), volt::Duration::max());
}

Task<bool> huge_period_ticks_once() {
  volt::Interval iv = volt::interval(std::chrono::hours::max());
  const Instant first = co_await iv.tick();
  co_return first <= volt::time::now() && iv.next_tick() == Instant::max();
}

TEST(IntervalArgumentsTest, HugePeriodSaturates) {
  Runtime rt = make_runtime(kCurrentThread);
  EXPECT_TRUE(rt.block_on(huge_period_ticks_once()));
}

// ---- missed ticks, on the paused clock (exact instants) ----

struct Seen {
  std::chrono::nanoseconds returned;  // relative to the start
  std::chrono::nanoseconds now;       // when tick() returned
};

// Ticks once at the start, advances by `jump`, then ticks `n` more times.
Task<std::vector<Seen>> ticks_after_a_jump(volt::MissedTickBehavior behavior,
                                           std::chrono::nanoseconds period,
                                           std::vector<std::chrono::nanoseconds> jumps_before,
                                           int n_after_each) {
  std::vector<Seen> seen;
  volt::Interval iv = volt::interval(period);
  iv.set_missed_tick_behavior(behavior);
  const Instant t0 = iv.next_tick();
  const Instant first = co_await iv.tick();
  seen.push_back({first - t0, volt::time::now() - t0});
  for (std::chrono::nanoseconds jump : jumps_before) {
    co_await volt::time::advance(jump);
    for (int i = 0; i < n_after_each; ++i) {
      const Instant at = co_await iv.tick();
      seen.push_back({at - t0, volt::time::now() - t0});
    }
  }
  co_return seen;
}

void expect_ticks(const std::vector<Seen>& seen, const std::vector<Seen>& expected) {
  ASSERT_EQ(seen.size(), expected.size());
  for (std::size_t i = 0; i < seen.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "tick " << i);
    EXPECT_EQ(seen[i].returned, expected[i].returned)
        << "returned +" << to_ms(seen[i].returned) << " ms, expected +"
        << to_ms(expected[i].returned) << " ms";
    EXPECT_EQ(seen[i].now, expected[i].now) << "completed at +" << to_ms(seen[i].now)
                                            << " ms, expected +" << to_ms(expected[i].now) << " ms";
  }
}

TEST(IntervalMissedTicksTest, BurstCatchesUpKeepingTheSchedule) {
  Runtime rt = paused_runtime();
  std::vector<Seen> seen =
      rt.block_on(ticks_after_a_jump(volt::MissedTickBehavior::burst, 10ms, {35ms}, 5));
  expect_ticks(seen, {{0ms, 0ms},
                      {10ms, 35ms},  // missed: at once
                      {20ms, 35ms},  // missed: at once
                      {30ms, 35ms},  // late by 5 ms only: on time, at once
                      {40ms, 40ms},  // caught up: waits for its time
                      {50ms, 50ms}});
}

TEST(IntervalMissedTicksTest, DelayShiftsTheSchedule) {
  Runtime rt = paused_runtime();
  std::vector<Seen> seen =
      rt.block_on(ticks_after_a_jump(volt::MissedTickBehavior::delay, 10ms, {35ms}, 3));
  expect_ticks(seen, {{0ms, 0ms},
                      {10ms, 35ms},  // the late tick, now
                      {45ms, 45ms},  // one period after it completed
                      {55ms, 55ms}});
}

TEST(IntervalMissedTicksTest, SkipDropsTheMissedTicks) {
  Runtime rt = paused_runtime();
  std::vector<Seen> seen =
      rt.block_on(ticks_after_a_jump(volt::MissedTickBehavior::skip, 10ms, {35ms}, 3));
  expect_ticks(seen, {{0ms, 0ms},
                      {10ms, 35ms},  // the late tick, now
                      {40ms, 40ms},  // the next of the original schedule after now
                      {50ms, 50ms}});
  // Landing exactly on a scheduled instant: the next one is strictly after.
  Runtime rt2 = paused_runtime();
  std::vector<Seen> exact =
      rt2.block_on(ticks_after_a_jump(volt::MissedTickBehavior::skip, 10ms, {30ms}, 2));
  expect_ticks(exact, {{0ms, 0ms}, {10ms, 30ms}, {40ms, 40ms}});
}

TEST(IntervalMissedTicksTest, LateByFiveMillisecondsIsNotMissed) {
  // With delay, a missed tick is visible as a shifted schedule.
  Runtime rt = paused_runtime();
  std::vector<Seen> seen =
      rt.block_on(ticks_after_a_jump(volt::MissedTickBehavior::delay, 10ms, {15ms, 16ms}, 2));
  expect_ticks(seen, {{0ms, 0ms},
                      {10ms, 15ms},  // 5 ms late: on schedule
                      {20ms, 20ms},
                      {30ms, 36ms},  // 6 ms late: missed, shifted
                      {46ms, 46ms}});
}

struct ResetMove {
  std::chrono::nanoseconds after_reset{};
  std::chrono::nanoseconds after_reset_now{};
  std::chrono::nanoseconds moved{};
  std::chrono::nanoseconds moved_now{};
};

Task<ResetMove> reset_and_move() {
  ResetMove r;
  volt::Interval iv = volt::interval(10ms);
  const Instant t0 = co_await iv.tick();
  co_await volt::time::advance(3ms);
  iv.reset();  // the next tick is one period from now
  const Instant a = co_await iv.tick();
  r.after_reset = a - t0;
  r.after_reset_now = volt::time::now() - t0;
  volt::Interval moved(std::move(iv));  // between ticks: the schedule moves along
  const Instant b = co_await moved.tick();
  r.moved = b - t0;
  r.moved_now = volt::time::now() - t0;
  co_return r;
}

TEST(IntervalMissedTicksTest, ResetAndMove) {
  Runtime rt = paused_runtime();
  ResetMove r = rt.block_on(reset_and_move());
  EXPECT_EQ(r.after_reset, 13ms);
  EXPECT_EQ(r.after_reset_now, 13ms);
  EXPECT_EQ(r.moved, 23ms);
  EXPECT_EQ(r.moved_now, 23ms);
}

// Each reset form, then two ticks: when each completed, relative to t0.
Task<std::vector<Seen>> resets() {
  std::vector<Seen> seen;
  volt::Interval iv = volt::interval(10ms);
  const Instant t0 = co_await iv.tick();
  auto record = [&](Instant at) { seen.push_back({at - t0, volt::time::now() - t0}); };
  co_await volt::time::advance(4ms);
  iv.reset_immediately();  // due at +4: at once, then every 10 ms from there
  record(co_await iv.tick());
  record(co_await iv.tick());
  iv.reset_after(7ms);  // now +14: due at +21
  record(co_await iv.tick());
  record(co_await iv.tick());
  iv.reset_at(t0 + 100ms);
  record(co_await iv.tick());
  iv.reset_after(-5ms);  // not in the past: now
  record(co_await iv.tick());
  co_return seen;
}

TEST(IntervalMissedTicksTest, ResetImmediatelyAfterAndAt) {
  Runtime rt = paused_runtime();
  std::vector<Seen> seen = rt.block_on(resets());
  expect_ticks(
      seen, {{4ms, 4ms}, {14ms, 14ms}, {21ms, 21ms}, {31ms, 31ms}, {100ms, 100ms}, {100ms, 100ms}});
}

// ---- withdrawn tick waits on the paused clock ----

Task<Instant> tick_once(volt::Interval* iv, std::atomic<int>* waiting) {
  waiting->fetch_add(1);
  const Instant at = co_await iv->tick();
  co_return at;
}

struct Withdrawn {
  std::chrono::nanoseconds timed_out_at{};
  bool timed_out = false;
  std::chrono::nanoseconds next{};
  std::chrono::nanoseconds next_now{};
  bool aborted = false;
  std::chrono::nanoseconds after_abort{};
  std::chrono::nanoseconds after_abort_now{};
  std::uint64_t active_after = 99;
};

Task<Withdrawn> withdrawn_tick_waits() {
  Withdrawn r;
  volt::Interval iv = volt::interval(50ms);
  const Instant t0 = co_await iv.tick();
  {
    // The tick wait held by reference (the lvalue form).
    auto wait = iv.tick();
    Expected<Instant> e = co_await volt::timeout(1ms, wait);
    r.timed_out = !e && e.error() == errc::timed_out;
    r.timed_out_at = volt::time::now() - t0;
  }
  const Instant next = co_await iv.tick();
  r.next = next - t0;
  r.next_now = volt::time::now() - t0;

  // A tick wait in a task that is aborted: the tick is still there for us.
  std::atomic<int> waiting{0};
  JoinHandle<Instant> h = volt::spawn(tick_once(&iv, &waiting));
  while (waiting.load() == 0) {
    co_await volt::yield_now();
  }
  co_await volt::yield_now();
  h.abort();
  try {
    Instant never = co_await h;
    (void)never;
  } catch (const Error& e) {
    r.aborted = e.code() == errc::cancelled;
  }
  const Instant after = co_await iv.tick();
  r.after_abort = after - t0;
  r.after_abort_now = volt::time::now() - t0;
  r.active_after = stats_here().active_timers;
  co_return r;
}

TEST(IntervalMissedTicksTest, TimedOutOrAbortedTickWaitsDoNotLoseTheTick) {
  Runtime rt = paused_runtime();
  Withdrawn r = rt.block_on(withdrawn_tick_waits());
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.timed_out_at, 1ms);
  EXPECT_EQ(r.next, 50ms);
  EXPECT_EQ(r.next_now, 50ms);
  EXPECT_TRUE(r.aborted);
  EXPECT_EQ(r.after_abort, 100ms);
  EXPECT_EQ(r.after_abort_now, 100ms);
  EXPECT_EQ(r.active_after, 0u);
}

// ---- Tokio's paths: volt::time::{interval, interval_at, Interval, MissedTickBehavior} ----

static_assert(std::is_same_v<volt::time::Interval, volt::Interval>);
static_assert(std::is_same_v<volt::time::MissedTickBehavior, volt::MissedTickBehavior>);

Task<std::vector<Duration>> ticks_by_tokio_paths() {
  const Instant start = volt::time::now();
  std::vector<Duration> at;
  volt::time::Interval every = volt::time::interval(10ms);
  every.set_missed_tick_behavior(volt::time::MissedTickBehavior::skip);
  for (int i = 0; i < 2; ++i) {
    const Instant t = co_await every.tick();
    at.push_back(t - start);
  }
  volt::time::Interval later = volt::time::interval_at(start + 35ms, 10ms);
  const Instant t = co_await later.tick();
  at.push_back(t - start);
  co_return at;
}

TEST(IntervalTokioPaths, TimeIntervalAndIntervalAtAreTheTopLevelFunctions) {
  Runtime rt = paused_runtime();
  EXPECT_EQ(rt.block_on(ticks_by_tokio_paths()), (std::vector<Duration>{0ms, 10ms, 35ms}));
}

}  // namespace
}  // namespace volt::test
