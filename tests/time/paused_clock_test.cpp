// Integration tests of the paused clock (include/volt/time/clock.hpp):
// Builder::start_paused, time::pause / resume / advance, and auto-advance.
//
// With the clock paused, virtual time is exact, so these tests assert exact
// instants: a timer fires at its deadline (rounded up to the wheel's 1 ms
// tick, which the paused clock starts on), never before, in deadline order,
// on every level of the wheel and beyond its span; advance(d) fires exactly
// the timers due by now + d; and the whole of it takes milliseconds of real
// time however far the virtual clock moves.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "time/time_test_support.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

constexpr std::chrono::hours kDay{24};

// ---- deadline order across the wheel's levels ----

struct Wake {
  Instant deadline{};
  Instant woke{};
  int order = -1;  // position in the global wake order
};

Task<void> sleep_and_record(std::chrono::nanoseconds d, Wake* slot, std::atomic<int>* order) {
  volt::Sleep s = volt::sleep(d);
  slot->deadline = s.deadline();
  co_await s;
  slot->woke = volt::time::now();
  slot->order = order->fetch_add(1);
}

struct OrderReport {
  Instant start{};
  std::vector<std::chrono::nanoseconds> durations;
  std::vector<Wake> wakes;
  Instant end{};
  std::uint64_t active_at_end = 99;
};

Task<OrderReport> sleep_on_every_level(std::vector<std::chrono::nanoseconds> durations) {
  OrderReport r;
  r.start = volt::time::now();
  r.durations = durations;
  r.wakes.resize(durations.size());
  std::atomic<int> order{0};
  std::vector<JoinHandle<void>> handles;
  for (std::size_t i = 0; i < durations.size(); ++i)
    handles.push_back(volt::spawn(sleep_and_record(durations[i], &r.wakes[i], &order)));
  for (auto& h : handles)
    co_await h;
  r.end = volt::time::now();
  r.active_at_end = stats_here().active_timers;
  co_return r;
}

TEST(PausedClockTest, TimersFireInDeadlineOrderOnEveryWheelLevelNeverEarly) {
  std::vector<std::chrono::nanoseconds> durations = {
      1ms, 2ms, 63ms, 64ms, 65ms, 127ms, 128ms, 4095ms, 4096ms, 4097ms, 262143ms, 262144ms,
      262145ms, 1h, 3 * kDay, 30 * kDay, 365 * kDay,
      // Beyond the wheel's span (63 * 64^5 ms, about 2.1 years): re-placed
      // as time comes closer, never early.
      800 * kDay, 1000 * kDay,
      // Not whole milliseconds: rounded up to the next tick.
      1500us, 64ms + 1ns, 3 * kDay + 999999ns};
  std::mt19937_64 rng(20240611);
  std::uniform_int_distribution<std::int64_t> ms_dist(1, std::int64_t{40} * 24 * 3600 * 1000);
  std::uniform_int_distribution<std::int64_t> small_dist(1, 5000);
  for (int i = 0; i < 150; ++i)
    durations.push_back(std::chrono::milliseconds(ms_dist(rng)));
  for (int i = 0; i < 100; ++i)
    durations.push_back(std::chrono::microseconds(small_dist(rng) * 37));
  // Equal deadlines too.
  for (int i = 0; i < 5; ++i)
    durations.push_back(4096ms);

  Runtime rt = paused_runtime();
  const auto real_start = SteadyClock::now();
  OrderReport r = rt.block_on(sleep_on_every_level(durations));
  const auto real_elapsed = SteadyClock::now() - real_start;

  EXPECT_LT(real_elapsed, 5s) << "the paused clock did not auto-advance (real "
                              << to_ms(real_elapsed) << " ms)";
  EXPECT_EQ(r.active_at_end, 0u);
  std::vector<std::size_t> by_order(durations.size());
  for (std::size_t i = 0; i < durations.size(); ++i) {
    const Wake& w = r.wakes[i];
    SCOPED_TRACE(::testing::Message() << "sleep of " << durations[i].count() << " ns");
    EXPECT_EQ(w.deadline, r.start + durations[i]);
    EXPECT_GE(w.woke, w.deadline) << "woke early by " << to_ms(w.deadline - w.woke) << " ms";
    EXPECT_LT(w.woke, w.deadline + 1ms) << "woke late by " << to_ms(w.woke - w.deadline) << " ms";
    ASSERT_GE(w.order, 0);
    ASSERT_LT(static_cast<std::size_t>(w.order), durations.size());
    by_order[static_cast<std::size_t>(w.order)] = i;
  }
  // Wake order is deadline order, at the wheel's 1 ms resolution: deadlines
  // in the same tick (1500 us and 1517 us, say) fire together, in any order.
  auto tick_of = [&](const Wake& w) {
    const auto since = w.deadline - r.start;
    return (since.count() + 999'999) / 1'000'000;  // rounded up, as the wheel does
  };
  for (std::size_t k = 1; k < by_order.size(); ++k) {
    const Wake& prev = r.wakes[by_order[k - 1]];
    const Wake& next = r.wakes[by_order[k]];
    EXPECT_LE(tick_of(prev), tick_of(next))
        << "woke " << durations[by_order[k - 1]].count() << " ns before "
        << durations[by_order[k]].count() << " ns";
    EXPECT_LE(prev.woke, next.woke);
  }
  EXPECT_EQ(r.end, r.start + 1000 * kDay);
}

// Auto-advance only when everything waits: a task that keeps running sees the
// clock stand still.
Task<bool> clock_stands_still_while_busy() {
  const Instant t0 = volt::time::now();
  std::atomic<bool> woke{false};
  JoinHandle<void> h = volt::spawn(sleep_then_set(1ms, &woke));
  bool still = true;
  for (int i = 0; i < 1000; ++i) {
    co_await volt::yield_now();
    still = still && volt::time::now() == t0 && !woke.load();
  }
  std::this_thread::sleep_for(5ms);  // real time passes; virtual does not
  still = still && volt::time::now() == t0;
  co_await h;
  still = still && woke.load() && volt::time::now() == t0 + 1ms;
  co_return still;
}

TEST(PausedClockTest, ClockStandsStillWhileTasksAreRunnable) {
  Runtime rt = paused_runtime();
  EXPECT_TRUE(rt.block_on(clock_stands_still_while_busy()));
}

// ---- advance ----

struct AdvanceStep {
  std::chrono::nanoseconds now_offset{};
  std::vector<bool> woke;
  std::uint64_t fired_delta = 0;
  std::uint64_t active = 0;
};

Task<std::vector<AdvanceStep>> advance_in_steps(std::vector<std::chrono::nanoseconds> sleeps,
                                                std::vector<std::chrono::nanoseconds> steps) {
  const Instant t0 = volt::time::now();
  auto flags = std::make_unique<std::atomic<bool>[]>(sleeps.size());
  std::vector<JoinHandle<void>> handles;
  for (std::size_t i = 0; i < sleeps.size(); ++i)
    handles.push_back(volt::spawn(sleep_then_set(sleeps[i], &flags[i])));
  co_await volt::yield_now();  // the sleepers run and register their timers
  std::uint64_t fired = stats_here().timers_fired;
  std::vector<AdvanceStep> out;
  for (std::chrono::nanoseconds step : steps) {
    co_await volt::time::advance(step);
    AdvanceStep s;
    s.now_offset = volt::time::now() - t0;
    for (std::size_t i = 0; i < sleeps.size(); ++i)
      s.woke.push_back(flags[i].load());
    const RuntimeStats st = stats_here();
    s.fired_delta = st.timers_fired - fired;
    fired = st.timers_fired;
    s.active = st.active_timers;
    out.push_back(std::move(s));
  }
  for (auto& h : handles)
    co_await h;
  co_return out;
}

TEST(PausedClockTest, AdvanceFiresExactlyTheTimersThatCameDue) {
  Runtime rt = paused_runtime();
  const std::vector<std::chrono::nanoseconds> sleeps = {10ms, 20ms, 30ms, 1h, 5 * kDay};
  const std::vector<std::chrono::nanoseconds> steps = {15ms,       // 10 fires
                                                       5ms,        // 20 fires, on the boundary
                                                       0ms,        // nothing moves
                                                       -1s,        // nothing moves
                                                       9ms,        // 29: nothing
                                                       1ms,        // 30 fires
                                                       1h - 31ms,  // 59:59.999: nothing
                                                       1ms,        // 1 h fires
                                                       5 * kDay};  // the 5-day one fires
  std::vector<AdvanceStep> out = rt.block_on(advance_in_steps(sleeps, steps));
  ASSERT_EQ(out.size(), steps.size());
  struct Expect {
    std::chrono::nanoseconds now;
    std::vector<bool> woke;
    std::uint64_t fired;
    std::uint64_t active;
  };
  const std::vector<Expect> expected = {
      {15ms, {true, false, false, false, false}, 1, 4},
      {20ms, {true, true, false, false, false}, 1, 3},
      {20ms, {true, true, false, false, false}, 0, 3},
      {20ms, {true, true, false, false, false}, 0, 3},
      {29ms, {true, true, false, false, false}, 0, 3},
      {30ms, {true, true, true, false, false}, 1, 2},
      {1h - 1ms, {true, true, true, false, false}, 0, 2},
      {1h, {true, true, true, true, false}, 1, 1},
      {1h + 5 * kDay, {true, true, true, true, true}, 1, 0},
  };
  for (std::size_t i = 0; i < out.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "after step " << i);
    EXPECT_EQ(out[i].now_offset, expected[i].now);
    EXPECT_EQ(out[i].woke, expected[i].woke);
    EXPECT_EQ(out[i].fired_delta, expected[i].fired);
    EXPECT_EQ(out[i].active, expected[i].active);
  }
}

// ---- where pausing is refused ----

Task<std::error_code> advance_error(std::chrono::nanoseconds d) {
  std::error_code code;
  try {
    co_await volt::time::advance(d);
  } catch (const Error& e) {
    code = e.code();
  }
  co_return code;
}

Task<std::error_code> pause_error() {
  co_return volt_error_of([] { volt::time::pause(); });
}

Task<std::error_code> resume_error() {
  co_return volt_error_of([] { volt::time::resume(); });
}

TEST(PausedClockTest, PausingNeedsACurrentThreadRuntime) {
  EXPECT_EQ(
      volt_error_of([] { (void)Runtime::Builder::multi_thread().start_paused(true).build(); }),
      code(errc::invalid_argument));
  EXPECT_EQ(volt_error_of([] {
              Runtime::Builder b = Runtime::Builder::multi_thread();
              b.worker_threads(2).start_paused(true);
              (void)b.build();
            }),
            code(errc::invalid_argument));
  // start_paused(false) is fine everywhere.
  {
    Runtime::Builder b = Runtime::Builder::multi_thread();
    b.worker_threads(1).start_paused(false);
    Runtime rt = b.build();
    EXPECT_EQ(rt.block_on(square(5)), 25);
  }

  // Multi-thread: pause, resume and advance are refused.
  Runtime mt = make_runtime(kMultiThread2);
  EXPECT_EQ(mt.block_on(advance_error(1ms)), code(errc::invalid_argument));
  EXPECT_EQ(mt.block_on(pause_error()), code(errc::invalid_argument));
  EXPECT_EQ(mt.block_on(resume_error()), code(errc::invalid_argument));

  // Current-thread, not paused: advance is refused (pause/resume work).
  Runtime ct = make_runtime(kCurrentThread);
  EXPECT_EQ(ct.block_on(advance_error(1ms)), code(errc::invalid_argument));
  EXPECT_EQ(ct.block_on(advance_error(0ms)), code(errc::invalid_argument));
  EXPECT_EQ(ct.block_on(resume_error()), std::error_code());  // not paused: nothing to do
  EXPECT_EQ(ct.block_on(pause_error()), std::error_code());
  EXPECT_EQ(ct.block_on(advance_error(1ms)), std::error_code());
  EXPECT_EQ(ct.block_on(resume_error()), std::error_code());
  EXPECT_EQ(ct.block_on(advance_error(1ms)), code(errc::invalid_argument));
}

// ---- pause / resume on a running clock ----

struct PauseReport {
  bool still_while_paused = false;
  std::chrono::nanoseconds advanced{};
  std::chrono::nanoseconds after_resume{};
  std::chrono::nanoseconds real_sleep_elapsed{};
  std::chrono::nanoseconds virtual_sleep_elapsed{};
  std::chrono::nanoseconds auto_advanced{};
  std::chrono::nanoseconds auto_real{};
};

Task<PauseReport> pause_and_resume() {
  PauseReport r;
  volt::time::pause();
  volt::time::pause();  // idempotent
  const Instant a = volt::time::now();
  std::this_thread::sleep_for(20ms);  // real time passes; the clock does not
  r.still_while_paused = volt::time::now() == a;
  co_await volt::time::advance(10ms);
  r.advanced = volt::time::now() - a;

  // Paused on a running clock: a long sleep auto-advances, to within the
  // 1 ms tick (the paused instant need not fall on a tick).
  const Instant b = volt::time::now();
  const auto real_before = SteadyClock::now();
  co_await volt::sleep(2h);
  r.auto_advanced = volt::time::now() - b;
  r.auto_real = SteadyClock::now() - real_before;

  // Resumed: it runs on from where it stood.
  const Instant c = volt::time::now();
  volt::time::resume();
  volt::time::resume();  // idempotent
  std::this_thread::sleep_for(5ms);
  r.after_resume = volt::time::now() - c;
  const auto start = SteadyClock::now();
  const Instant vstart = volt::time::now();
  co_await volt::sleep(5ms);
  r.real_sleep_elapsed = SteadyClock::now() - start;
  r.virtual_sleep_elapsed = volt::time::now() - vstart;
  co_return r;
}

TEST(PausedClockTest, PauseAndResumeARunningClock) {
  Runtime rt = make_runtime(kCurrentThread);
  PauseReport r = rt.block_on(pause_and_resume());
  EXPECT_TRUE(r.still_while_paused);
  EXPECT_EQ(r.advanced, 10ms);
  EXPECT_GE(r.auto_advanced, 2h);
  EXPECT_LT(r.auto_advanced, 2h + 1ms);
  EXPECT_LT(r.auto_real, 1s);
  EXPECT_GE(r.after_resume, 5ms);
  EXPECT_LT(r.after_resume, 5ms + kNotHung);
  // Running again: sleeps take real time.
  EXPECT_GE(r.real_sleep_elapsed, 5ms);
  EXPECT_GE(r.virtual_sleep_elapsed, 5ms);
  EXPECT_LT(r.real_sleep_elapsed, kNotHung);
}

// ---- auto-advance and the blocking pool ----

Task<Expected<int>> timeout_on_blocking_work() {
  JoinHandle<int> h = volt::spawn_blocking([] {
    std::this_thread::sleep_for(100ms);
    return 7;
  });
  // Auto-advance must not jump past 10 ms while the blocking work (which is
  // what we wait for) is in flight.
  Expected<int> r = co_await volt::timeout(10ms, h);
  co_return r;
}

TEST(PausedClockTest, AutoAdvanceWaitsForBlockingWork) {
  Runtime rt = paused_runtime();
  Expected<int> r = rt.block_on(timeout_on_blocking_work());
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(*r, 7);
}

// ---- timeouts on the paused clock ----

struct VirtualTimeout {
  bool ready_at_deadline_won = false;
  std::chrono::nanoseconds tie_at{};
  bool long_one_timed_out = false;
  std::chrono::nanoseconds long_at{};
  std::uint64_t active_after = 99;
};

Task<VirtualTimeout> timeouts_in_virtual_time() {
  VirtualTimeout r;
  const Instant t0 = volt::time::now();
  // The operation becomes ready at the very instant of the deadline: it wins.
  Expected<void> tie = co_await volt::timeout(10ms, volt::sleep(10ms));
  r.ready_at_deadline_won = tie.has_value();
  r.tie_at = volt::time::now() - t0;
  const Instant t1 = volt::time::now();
  Expected<void> late = co_await volt::timeout(1h, volt::sleep(2h));
  r.long_one_timed_out = !late && late.error() == errc::timed_out;
  r.long_at = volt::time::now() - t1;
  r.active_after = stats_here().active_timers;
  co_return r;
}

TEST(PausedClockTest, TimeoutsFireAtTheirExactVirtualDeadline) {
  Runtime rt = paused_runtime();
  VirtualTimeout r = rt.block_on(timeouts_in_virtual_time());
  EXPECT_TRUE(r.ready_at_deadline_won);
  EXPECT_EQ(r.tie_at, 10ms);
  EXPECT_TRUE(r.long_one_timed_out);
  EXPECT_EQ(r.long_at, 1h);
  EXPECT_EQ(r.active_after, 0u);
}

// ---- a saturated sleep on the paused clock ----

struct GuardSend {
  oneshot::Sender<int> tx;
  ~GuardSend() { (void)tx.send(1); }
};

Task<void> sleep_max_with_guard(oneshot::Sender<int> tx, std::atomic<bool>* woke) {
  GuardSend guard{std::move(tx)};
  co_await volt::sleep(std::chrono::hours::max());
  woke->store(true);
}

Task<Instant> wait_then_now(oneshot::Receiver<int> rx) {
  std::optional<int> v = co_await rx;
  (void)v;
  co_return volt::time::now();
}

TEST(PausedClockTest, SaturatedSleepNeverFiresAndTheClockNeverWraps) {
  Runtime rt = paused_runtime();
  const Instant start = rt.block_on([]() -> Task<Instant> { co_return volt::time::now(); }());
  auto [tx, rx] = oneshot::channel<int>();
  std::atomic<bool> woke{false};
  JoinHandle<void> sleeper = rt.spawn(sleep_max_with_guard(std::move(tx), &woke));
  // The runtime is idle but for the "forever" timer while this thread waits;
  // then the sleeper is aborted from outside, which ends the wait below.
  std::atomic<std::int64_t> cpu_while_idle_ns{-1};
  std::thread aborter([&] {
    std::this_thread::sleep_for(50ms);
    const auto cpu_before = process_cpu_time();
    std::this_thread::sleep_for(200ms);
    cpu_while_idle_ns.store((process_cpu_time() - cpu_before).count());
    sleeper.abort();
  });
  const Instant seen = rt.block_on(wait_then_now(std::move(rx)));
  aborter.join();
  // Only a "forever" timer: auto-advance has nowhere to go, the runtime sleeps.
  EXPECT_LT(std::chrono::nanoseconds(cpu_while_idle_ns.load()), kSanitized ? 150ms : 50ms)
      << "the paused runtime spun while its only timer was a saturated sleep";
  EXPECT_FALSE(woke.load()) << "a sleep of hours::max() completed";
  EXPECT_EQ(volt_error_of([&] { sleeper.join(); }), code(errc::cancelled));
  EXPECT_GE(seen, start) << "the paused clock went backwards";
  EXPECT_EQ(rt.stats().active_timers, 0u);
}

// A finite deadline within 1 ms of Instant::max(): its tick, rounded up, lies
// past Instant::max(). Auto-advance must still reach it (the clock jumps "to
// the next timer's deadline", volt/time/clock.hpp), and must not spin.
Task<void> sleep_until_with_guard(Instant at, oneshot::Sender<int> tx, std::atomic<bool>* woke,
                                  std::atomic<bool>* reached) {
  GuardSend guard{std::move(tx)};
  co_await volt::sleep_until(at);
  reached->store(volt::time::now() >= at);
  woke->store(true);
}

TEST(PausedClockTest, DeadlineJustBelowInstantMaxIsReached) {
  for (std::chrono::nanoseconds back :
       {std::chrono::nanoseconds(1ns), std::chrono::nanoseconds(1us),
        std::chrono::nanoseconds(1s)}) {
    SCOPED_TRACE(::testing::Message() << "deadline Instant::max() - " << back.count() << " ns");
    Runtime rt = paused_runtime();
    auto [tx, rx] = oneshot::channel<int>();
    std::atomic<bool> woke{false};
    std::atomic<bool> reached{false};
    const Instant at = Instant::max() - back;
    JoinHandle<void> sleeper = rt.spawn(sleep_until_with_guard(at, std::move(tx), &woke, &reached));
    // If the clock never gets there, abort the sleeper after a while so that
    // the test ends (its frame's guard then releases the wait below).
    std::atomic<bool> finished{false};
    std::atomic<std::int64_t> cpu_ns{0};
    std::thread rescue([&] {
      const auto cpu_before = process_cpu_time();
      const bool done = wait_until([&] { return finished.load(); }, 3s);
      cpu_ns.store((process_cpu_time() - cpu_before).count());
      if (!done) sleeper.abort();
    });
    const auto real_start = SteadyClock::now();
    (void)rt.block_on(wait_then_now(std::move(rx)));
    const auto real_elapsed = SteadyClock::now() - real_start;
    finished.store(true);
    rescue.join();
    EXPECT_TRUE(woke.load()) << "the auto-advancing clock never reached the deadline (real "
                             << to_ms(real_elapsed) << " ms, "
                             << to_ms(std::chrono::nanoseconds(cpu_ns.load()))
                             << " ms of CPU: the runtime spun)";
    EXPECT_EQ(woke.load(), reached.load()) << "woke before its deadline";
  }
}

}  // namespace
}  // namespace volt::test
