// Integration tests of volt::sleep / sleep_until / time::now on a running
// runtime (include/volt/time/sleep.hpp, src/time/):
//
//  - a sleep never completes before its deadline (measured on steady_clock);
//  - zero, negative and past deadlines complete without registering a timer;
//  - huge durations saturate (never wrap into the past): the sleep stays
//    pending until its task is aborted, which cancels the timer (and, per
//    stats.hpp, a pending saturated sleep counts as an active timer);
//  - a Sleep can be awaited again, reset, moved; an aborted wait keeps its
//    deadline;
//  - idle wake-up latency: a short sleep on an idle runtime completes about on
//    time (not at the next 10 ms poll, not at some unrelated event), also
//    when the timer is registered while another worker already sleeps in the
//    driver with no timer; and an idle runtime with a pending timer does not
//    wake up repeatedly;
//  - time::now() outside a runtime is steady_clock, and awaiting a sleep
//    outside a task throws errc::no_runtime.
//
// Timing checks are lower bounds (never early) plus generous "did not hang /
// did not poll" upper bounds.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <coroutine>
#include <thread>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "time/time_test_support.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

class SleepTest : public ::testing::TestWithParam<Flavour> {};

INSTANTIATE_TEST_SUITE_P(Flavours, SleepTest, ::testing::ValuesIn(kTimeFlavours), FlavourName());

// ---- never early ----

struct Measured {
  std::chrono::nanoseconds requested;
  std::chrono::nanoseconds elapsed;
};

Task<std::vector<Measured>> measure_sleeps(std::vector<std::chrono::nanoseconds> durations,
                                           bool use_sleep_until) {
  std::vector<Measured> out;
  for (std::chrono::nanoseconds d : durations) {
    const auto start = SteadyClock::now();
    if (use_sleep_until) {
      co_await volt::sleep_until(volt::time::now() + d);
    } else {
      co_await volt::sleep(d);
    }
    out.push_back({d, SteadyClock::now() - start});
  }
  co_return out;
}

TEST_P(SleepTest, NeverCompletesBeforeItsDeadline) {
  Runtime rt = make_runtime(GetParam());
  std::vector<std::chrono::nanoseconds> durations;
  for (int round = 0; round < 3; ++round) {
    for (auto d : {1ms, 5ms, 20ms})
      durations.push_back(d);
    // Deadlines that do not fall on a millisecond boundary.
    durations.push_back(1500us);
    durations.push_back(2ms + 300us);
    durations.push_back(7ms + 999us);
  }
  for (bool use_sleep_until : {false, true}) {
    const RuntimeStats before = rt.stats();
    std::vector<Measured> measured =
        run_in_runtime(rt, GetParam(), measure_sleeps(durations, use_sleep_until));
    const RuntimeStats after = rt.stats();
    ASSERT_EQ(measured.size(), durations.size());
    for (const Measured& m : measured) {
      EXPECT_GE(m.elapsed, m.requested)
          << (use_sleep_until ? "sleep_until" : "sleep") << "(" << to_ms(m.requested)
          << " ms) completed early, after " << to_ms(m.elapsed) << " ms";
      EXPECT_LT(m.elapsed, m.requested + kNotHung);
    }
    // Each sleep waited on one timer that fired; none is left behind. (The
    // driver adds to timers_fired after a firing run, which may end after the
    // woken task finished on another thread.)
    EXPECT_TRUE(wait_until(
        [&] { return rt.stats().timers_fired - before.timers_fired >= durations.size(); }, 2s));
    EXPECT_EQ(after.active_timers, 0u);
    // A sleeping task is not polled over and over while it waits: a few polls
    // per sleep at most (a busy-polling sleep would need thousands).
    EXPECT_LT(after.total_polled - before.total_polled, 10 * durations.size() + 10);
  }
}

// ---- no timer for zero / negative / past ----

struct NoTimerReport {
  bool all_elapsed_before_await = false;
  std::uint64_t fired_delta = 0;
  std::uint64_t active_after = 0;
  std::chrono::nanoseconds elapsed{};
};

Task<NoTimerReport> sleeps_without_timer() {
  NoTimerReport report;
  const RuntimeStats before = stats_here();
  const auto start = SteadyClock::now();
  const Instant now = volt::time::now();
  bool all_elapsed = true;
  {
    volt::Sleep zero = volt::sleep(0ms);
    volt::Sleep negative = volt::sleep(-5ms);
    volt::Sleep min_ns = volt::sleep(std::chrono::nanoseconds::min());
    volt::Sleep min_hours = volt::sleep(std::chrono::hours::min());
    volt::Sleep until_now = volt::sleep_until(now);
    volt::Sleep until_past = volt::sleep_until(now - 1s);
    volt::Sleep until_min = volt::sleep_until(Instant::min());
    for (volt::Sleep* s :
         {&zero, &negative, &min_ns, &min_hours, &until_now, &until_past, &until_min})
      all_elapsed = all_elapsed && s->is_elapsed();
    co_await zero;
    co_await negative;
    co_await min_ns;
    co_await min_hours;
    co_await until_now;
    co_await until_past;
    co_await until_min;
    // And as temporaries, many times (beyond one poll's cooperative budget).
    for (int i = 0; i < 300; ++i) {
      co_await volt::sleep(0ns);
      co_await volt::sleep_until(now - 1ms);
    }
  }
  report.elapsed = SteadyClock::now() - start;
  const RuntimeStats after = stats_here();
  report.all_elapsed_before_await = all_elapsed;
  report.fired_delta = after.timers_fired - before.timers_fired;
  report.active_after = after.active_timers;
  co_return report;
}

TEST_P(SleepTest, ZeroNegativeAndPastDeadlinesCompleteWithoutATimer) {
  Runtime rt = make_runtime(GetParam());
  NoTimerReport r = run_in_runtime(rt, GetParam(), sleeps_without_timer());
  EXPECT_TRUE(r.all_elapsed_before_await);
  EXPECT_EQ(r.fired_delta, 0u) << "a zero/negative/past sleep went through the timer wheel";
  EXPECT_EQ(r.active_after, 0u);
  EXPECT_LT(r.elapsed, kNotHung);
  EXPECT_EQ(rt.stats().timers_fired, 0u);
}

// ---- huge durations saturate ----

Task<void> sleep_for_duration_then_set(std::chrono::nanoseconds d, std::atomic<bool>* woke) {
  co_await volt::sleep(d);
  woke->store(true);
}

template <class D>
Task<void> sleep_huge_then_set(D d, std::atomic<bool>* woke, std::atomic<bool>* deadline_is_max,
                               std::atomic<bool>* suspending = nullptr) {
  volt::Sleep s = volt::sleep(d);
  deadline_is_max->store(s.deadline() == Instant::max());
  if (suspending) suspending->store(true);
  co_await s;
  woke->store(true);
}

template <class D>
void check_huge_sleep_is_pending_until_aborted(Runtime& rt, D d, const char* what) {
  SCOPED_TRACE(what);
  std::atomic<bool> woke{false};
  std::atomic<bool> deadline_is_max{false};
  std::atomic<bool> suspending{false};
  const std::uint64_t fired_before = rt.stats().timers_fired;
  JoinHandle<void> h = rt.spawn(sleep_huge_then_set(d, &woke, &deadline_is_max, &suspending));
  ASSERT_TRUE(wait_until([&] { return suspending.load(); }));
  // Wrapping into the past would complete it at once; give it a moment.
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(woke.load()) << "a saturated sleep completed";
  EXPECT_FALSE(h.is_finished());
  EXPECT_TRUE(deadline_is_max.load()) << "the deadline did not saturate to Instant::max()";
  h.abort();
  EXPECT_EQ(volt_error_of([&] { h.join(); }), code(errc::cancelled));
  EXPECT_FALSE(woke.load());
  EXPECT_EQ(rt.stats().active_timers, 0u) << "aborting the task did not cancel its timer";
  EXPECT_EQ(rt.stats().timers_fired, fired_before);
}

TEST_P(SleepTest, HugeDurationSaturatesAndIsCancelledByAbort) {
  Runtime rt = make_runtime(GetParam());
  DriveInBackground drive(rt, GetParam());
  check_huge_sleep_is_pending_until_aborted(rt, std::chrono::hours::max(), "hours::max()");
  check_huge_sleep_is_pending_until_aborted(rt, std::chrono::nanoseconds::max(),
                                            "nanoseconds::max()");
  check_huge_sleep_is_pending_until_aborted(rt, std::chrono::seconds::max(), "seconds::max()");
  check_huge_sleep_is_pending_until_aborted(rt, std::chrono::duration<double>(1e300),
                                            "duration<double>(1e300)");
}

// stats().active_timers is documented as "registered, not yet fired or
// cancelled" (volt/runtime/stats.hpp). A saturated sleep is registered (its
// task waits on it, aborting cancels it) but kept out of the wheel
// (TimeDriver::insert, kNeverLevel), and active_timers counts only the wheel
// and the pending list: it reports 0 while such a sleep is pending.
TEST_P(SleepTest, SaturatedSleepCountsAsAnActiveTimer) {
  Runtime rt = make_runtime(GetParam());
  DriveInBackground drive(rt, GetParam());
  std::atomic<bool> woke{false};
  std::atomic<bool> deadline_is_max{false};
  std::atomic<bool> suspending{false};
  JoinHandle<void> h = rt.spawn(
      sleep_huge_then_set(std::chrono::hours::max(), &woke, &deadline_is_max, &suspending));
  ASSERT_TRUE(wait_until([&] { return suspending.load(); }));
  const bool counted = wait_until([&] { return rt.stats().active_timers == 1; }, 500ms);
  EXPECT_TRUE(counted) << "a pending saturated sleep is not counted in stats().active_timers ("
                       << rt.stats().active_timers << ")";
  h.abort();
  EXPECT_EQ(volt_error_of([&] { h.join(); }), code(errc::cancelled));
  EXPECT_EQ(rt.stats().active_timers, 0u);
}

// Far, but representable: beyond the wheel's span (about 2.1 years), and
// a plain few days. Pending until aborted, and cancelled by the abort.
TEST_P(SleepTest, FarDeadlinesStayPendingUntilAborted) {
  Runtime rt = make_runtime(GetParam());
  DriveInBackground drive(rt, GetParam());
  for (std::chrono::nanoseconds d :
       {std::chrono::nanoseconds(72h), std::chrono::nanoseconds(24h * 365 * 3),
        std::chrono::nanoseconds(24h * 365 * 100)}) {
    SCOPED_TRACE(to_ms(d));
    std::atomic<bool> woke{false};
    JoinHandle<void> h = rt.spawn(sleep_for_duration_then_set(d, &woke));
    ASSERT_TRUE(wait_until([&] { return rt.stats().active_timers == 1; }));
    std::this_thread::sleep_for(20ms);
    EXPECT_FALSE(woke.load());
    h.abort();
    EXPECT_EQ(volt_error_of([&] { h.join(); }), code(errc::cancelled));
    EXPECT_EQ(rt.stats().active_timers, 0u);
  }
  EXPECT_EQ(rt.stats().timers_fired, 0u);
}

// ---- re-awaiting, reset, move, aborted waits ----

struct ReuseReport {
  bool elapsed_after_first = false;
  std::uint64_t fired_by_second_await = 0;
  std::chrono::nanoseconds reset_elapsed{};
  std::chrono::nanoseconds reset_requested{};
  bool timed_out_first = false;
  std::chrono::nanoseconds resumed_total{};  // from creation to completion after the aborted wait
  std::uint64_t active_after_move = 99;
  std::chrono::nanoseconds moved_total{};
  std::uint64_t active_at_end = 99;
};

Task<ReuseReport> reuse_a_sleep() {
  ReuseReport r;
  volt::Sleep s = volt::sleep(3ms);
  co_await s;
  r.elapsed_after_first = s.is_elapsed();
  const std::uint64_t fired = stats_here().timers_fired;
  co_await s;  // stays complete: no second timer
  co_await s;
  r.fired_by_second_await = stats_here().timers_fired - fired;

  // reset(): a new deadline, waited for in full.
  r.reset_requested = 4ms;
  const auto reset_at = SteadyClock::now();
  s.reset(volt::time::now() + 4ms);
  co_await s;
  r.reset_elapsed = SteadyClock::now() - reset_at;

  // An aborted wait (lost a timeout) keeps the deadline: awaiting again
  // completes at the original deadline, not a new one.
  const auto created = SteadyClock::now();
  volt::Sleep longer = volt::sleep(25ms);
  Expected<void> first = co_await volt::timeout(2ms, longer);
  r.timed_out_first = !first && first.error() == errc::timed_out;
  co_await longer;
  r.resumed_total = SteadyClock::now() - created;

  // Moving a Sleep whose aborted wait left it registered cancels the source's
  // timer; the moved-to Sleep registers again when awaited.
  const auto created2 = SteadyClock::now();
  volt::Sleep source = volt::sleep(15ms);
  Expected<void> aborted = co_await volt::timeout(1ms, source);
  (void)aborted;
  volt::Sleep moved(std::move(source));
  r.active_after_move = stats_here().active_timers;
  co_await moved;
  r.moved_total = SteadyClock::now() - created2;
  r.active_at_end = stats_here().active_timers;
  co_return r;
}

TEST_P(SleepTest, ASleepCanBeAwaitedAgainResetAndMoved) {
  Runtime rt = make_runtime(GetParam());
  ReuseReport r = run_in_runtime(rt, GetParam(), reuse_a_sleep());
  EXPECT_TRUE(r.elapsed_after_first);
  EXPECT_EQ(r.fired_by_second_await, 0u);
  EXPECT_GE(r.reset_elapsed, r.reset_requested);
  EXPECT_TRUE(r.timed_out_first);
  EXPECT_GE(r.resumed_total, 25ms);
  EXPECT_LT(r.resumed_total, 25ms + kNotHung);
  EXPECT_EQ(r.active_after_move, 0u) << "moving a registered Sleep left its timer in the wheel";
  EXPECT_GE(r.moved_total, 15ms);
  EXPECT_EQ(r.active_at_end, 0u);
}

// ---- idle wake-up latency ----

// Generous: a sleep on an idle runtime is noticed within about 1 ms; the
// bound tells "woken by its timer" from "woken late by something else, or
// never" with room for a loaded machine. That no poll loop keeps an idle
// runtime awake instead is checked below, by counting its wake-ups.
constexpr std::chrono::milliseconds kLateBound{kSanitized ? 250 : 100};

Task<std::vector<std::chrono::nanoseconds>> timed_sleeps(int n, std::chrono::nanoseconds d) {
  std::vector<std::chrono::nanoseconds> out;
  for (int i = 0; i < n; ++i) {
    const auto start = SteadyClock::now();
    co_await volt::sleep(d);
    out.push_back(SteadyClock::now() - start);
  }
  co_return out;
}

TEST_P(SleepTest, ShortSleepOnAnIdleRuntimeCompletesAboutOnTime) {
  Runtime rt = make_runtime(GetParam());
  std::vector<std::chrono::nanoseconds> elapsed =
      run_in_runtime(rt, GetParam(), timed_sleeps(10, 5ms));
  for (auto e : elapsed) {
    EXPECT_GE(e, 5ms);
    EXPECT_LT(e, 5ms + kLateBound) << "a 5 ms sleep took " << to_ms(e) << " ms";
  }
  // Most complete within 1 ms resolution plus scheduling; the median is far
  // from a 10 ms polling period's 10-15 ms.
  std::sort(elapsed.begin(), elapsed.end());
  EXPECT_LT(elapsed[elapsed.size() / 2], 5ms + kLateBound / 2);
}

Task<std::chrono::nanoseconds> one_timed_sleep(std::chrono::nanoseconds d,
                                               std::atomic<bool>* done) {
  const auto start = SteadyClock::now();
  co_await volt::sleep(d);
  const auto elapsed = SteadyClock::now() - start;
  done->store(true);
  co_return elapsed;
}

TEST_P(SleepTest, SleepFromATaskSpawnedAfterIdlenessWakesOnTime) {
  Runtime rt = make_runtime(GetParam());
  DriveInBackground drive(rt, GetParam());
  EXPECT_EQ(rt.block_on(square(2)), 4);
  std::this_thread::sleep_for(50ms);  // every thread asleep, no timer anywhere
  for (int i = 0; i < 5; ++i) {
    std::atomic<bool> done{false};
    JoinHandle<std::chrono::nanoseconds> h = rt.spawn(one_timed_sleep(2ms, &done));
    ASSERT_TRUE(wait_until([&] { return done.load(); }, 1s))
        << "a 2 ms sleep did not complete in 1 s";
    const auto elapsed = h.join();
    EXPECT_GE(elapsed, 2ms);
    EXPECT_LT(elapsed, 2ms + kLateBound) << "took " << to_ms(elapsed) << " ms";
    std::this_thread::sleep_for(20ms);
  }
}

// The multi-thread race this guards: worker B sleeps in the driver with no
// timer (epoll_wait with no timeout) while worker A, busy, registers a timer.
// Only A's registration can wake B (A then parks on its futex, the driver
// being taken); without it the sleep never completes.
Task<std::chrono::nanoseconds> busy_then_sleep(std::atomic<int>* phase,
                                               std::chrono::nanoseconds d) {
  phase->store(1);
  // Hold this worker (no await) until the test says go.
  const auto give_up = SteadyClock::now() + kNotHung;
  for (;;) {
    const int p = phase->load();
    if (p == 2 || SteadyClock::now() > give_up) break;
    std::this_thread::sleep_for(200us);
  }
  const auto start = SteadyClock::now();
  co_await volt::sleep(d);
  const auto elapsed = SteadyClock::now() - start;
  phase->store(3);
  co_return elapsed;
}

Task<void> set_true(std::atomic<bool>* flag) {
  flag->store(true);
  co_return;
}

TEST(SleepIdleDriverTest, TimerRegisteredByABusyWorkerWakesTheDriverHolder) {
  Runtime rt = make_runtime(kMultiThread2);
  EXPECT_EQ(rt.block_on(square(3)), 9);
  for (int round = 0; round < 5; ++round) {
    std::atomic<int> phase{0};
    JoinHandle<std::chrono::nanoseconds> busy = rt.spawn(busy_then_sleep(&phase, 2ms));
    ASSERT_TRUE(wait_until([&] { return phase.load() == 1; }));
    // Wake the other worker with a short task; it then goes back to sleep,
    // taking the free driver (the busy worker does not hold it).
    std::atomic<bool> ran{false};
    const std::uint64_t parks = rt.stats().total_parked;
    JoinHandle<void> other = rt.spawn(set_true(&ran));
    ASSERT_TRUE(wait_until([&] { return ran.load(); }));
    ASSERT_TRUE(wait_until([&] { return rt.stats().total_parked > parks; }));
    std::this_thread::sleep_for(30ms);
    phase.store(2);
    ASSERT_TRUE(wait_until([&] { return phase.load() == 3; }, 1s))
        << "the timer registered from a busy worker never woke the sleeping driver holder";
    const auto elapsed = busy.join();
    EXPECT_GE(elapsed, 2ms);
    EXPECT_LT(elapsed, 2ms + kLateBound) << "took " << to_ms(elapsed) << " ms";
    other.join();
  }
}

// ---- a pending timer does not make an idle runtime spin ----

TEST_P(SleepTest, IdleRuntimeWithPendingTimersDoesNotSpin) {
  Runtime rt = make_runtime(GetParam());
  DriveInBackground drive(rt, GetParam());
  std::vector<std::atomic<bool>> woke(3);
  std::vector<JoinHandle<void>> sleepers;
  sleepers.push_back(rt.spawn(sleep_for_duration_then_set(10min, &woke[0])));
  sleepers.push_back(rt.spawn(sleep_for_duration_then_set(24h * 40, &woke[1])));
  std::atomic<bool> saturated{false};
  std::atomic<bool> suspending{false};
  sleepers.push_back(
      rt.spawn(sleep_huge_then_set(std::chrono::hours::max(), &woke[2], &saturated, &suspending)));
  // (The saturated one counts too, but it registers only after `suspending`
  // is set; see SaturatedSleepCountsAsAnActiveTimer.)
  ASSERT_TRUE(wait_until([&] { return rt.stats().active_timers >= 2 && suspending.load(); }));
  std::this_thread::sleep_for(50ms);
  const std::uint64_t parks_before = rt.stats().total_parked;
  const auto cpu_before = process_cpu_time();
  std::this_thread::sleep_for(500ms);
  const auto cpu_used = process_cpu_time() - cpu_before;
  const std::uint64_t parks = rt.stats().total_parked - parks_before;
  // Asleep until the next deadline: no periodic wake-ups (a 10 ms poll would
  // be 50 parks here; a park timeout of 0 would spin a core).
  EXPECT_LE(parks, 4u);
  EXPECT_LT(cpu_used, kSanitized ? 200ms : 50ms) << to_ms(cpu_used) << " ms of CPU while idle";
  for (auto& w : woke)
    EXPECT_FALSE(w.load());
  for (auto& h : sleepers)
    h.abort();
  for (auto& h : sleepers)
    EXPECT_EQ(volt_error_of([&] { h.join(); }), code(errc::cancelled));
  EXPECT_EQ(rt.stats().active_timers, 0u);
}

// ---- outside a runtime ----

TEST(SleepOutsideRuntimeTest, NowIsSteadyClockOutsideARuntime) {
  for (int i = 0; i < 100; ++i) {
    const auto before = SteadyClock::now();
    const Instant now = volt::time::now();
    const auto after = SteadyClock::now();
    EXPECT_LE(before, now);
    EXPECT_LE(now, after);
  }
  // Also from a thread that has a runtime but is not one of its threads.
  Runtime rt = Runtime::Builder::current_thread().start_paused(true).build();
  const auto before = SteadyClock::now();
  const Instant now = volt::time::now();
  EXPECT_GE(now, before);
  EXPECT_LE(now, SteadyClock::now());
}

TEST(SleepOutsideRuntimeTest, AwaitingOutsideATaskThrowsNoRuntime) {
  // A sleep can be created anywhere (it only reads the clock)...
  volt::Sleep s = volt::sleep(10ms);
  EXPECT_FALSE(s.is_elapsed());
  EXPECT_FALSE(s.await_ready());
  // ...but waiting on it needs a runtime task.
  EXPECT_EQ(volt_error_of([&] { (void)s.await_suspend(std::noop_coroutine()); }),
            code(errc::no_runtime));
  // The paused-clock controls, likewise.
  EXPECT_EQ(volt_error_of([] { volt::time::pause(); }), code(errc::no_runtime));
  EXPECT_EQ(volt_error_of([] { volt::time::resume(); }), code(errc::no_runtime));
}

TEST(SleepOutsideRuntimeTest, SleepInsideBlockOnWorks) {
  for (const Flavour& f : kTimeFlavours) {
    Runtime rt = make_runtime(f);
    const auto start = SteadyClock::now();
    EXPECT_EQ(rt.block_on(delayed_value(3ms, 11)), 11);
    EXPECT_GE(SteadyClock::now() - start, 3ms);
  }
}

// ---- Tokio's paths: volt::time::{sleep, sleep_until, Sleep, Instant, Duration} ----

static_assert(std::is_same_v<volt::time::Sleep, volt::Sleep>);
static_assert(std::is_same_v<volt::time::Instant, volt::Instant>);
static_assert(std::is_same_v<volt::time::Duration, volt::Duration>);

Task<volt::time::Duration> sleep_by_tokio_paths() {
  const volt::time::Instant start = volt::time::now();
  volt::time::Sleep first = volt::time::sleep(10ms);
  co_await first;
  co_await volt::time::sleep_until(start + 25ms);
  co_return volt::time::now() - start;
}

TEST(SleepTokioPaths, TimeSleepAndSleepUntilAreTheTopLevelFunctions) {
  Runtime rt = paused_runtime();
  const volt::time::Duration slept = rt.block_on(sleep_by_tokio_paths());
  EXPECT_EQ(slept, 25ms) << "paused clock: the deadlines exactly";
}

}  // namespace
}  // namespace volt::test
