// bench/time.cpp: Tier 5, the timer (the same work as
// the Tokio side's timers.rs). Each iteration runs as a task on the
// benchmark's multi-thread runtime and is timed whole, from the first op to
// the last (sleep_many: from the first spawn to the last join).
#include <array>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "harness.hpp"

namespace volt_bench {
namespace {

using namespace std::chrono_literals;

// ---- timer_register_cancel ----

// Inside a task: create a 1 s sleep, poll it once so that it is registered
// with the timer, then drop it, which cancels it.
//
// Tokio polls the Sleep once by hand from inside a poll_fn (with the task's
// own Context) and drops it. A volt awaitable cannot be polled without
// suspending the coroutine, so this drives the Sleep's awaiter protocol by
// hand instead, which is the same step:
//   - await_ready() is the readiness test of the poll: false, a 1 s sleep
//     cannot be due yet (Tokio: poll() is Pending);
//   - await_suspend(h) is the registering half of the poll: it records itself
//     as the current task's suspension point (ResumeSlot) and links its
//     TimerNode, holding the task's waker, into the runtime's timer wheel. It
//     returns true ("registered, would wait"). The handle it is given is
//     std::noop_coroutine(), as it is never resumed: this coroutine does not
//     actually suspend, it carries on running.
//   - `s` going out of scope runs ~TimerNode, which unlinks it from the wheel
//     under the driver's lock and drops the waker (Tokio: dropping the Sleep).
// The suspension record left in the task's ResumeSlot is stale but never
// read: it is read only when the task is polled again after suspending, and
// every real suspension overwrites it first; this task never suspends again
// before it completes (`co_return`, in the same poll).
volt::Task<Sample> timer_register_cancel(std::uint64_t ops) {
  Meter meter = Meter::start();
  for (std::uint64_t i = 0; i < ops; ++i) {
    volt::Sleep s = volt::sleep(1s);
    if (s.await_ready())
      throw std::logic_error("timer_register_cancel: a 1 s sleep cannot be due yet");
    if (!s.await_suspend(std::noop_coroutine()))
      throw std::logic_error("timer_register_cancel: the 1 s sleep did not register");
  }  // each `s` is destroyed here: its registration is cancelled
  co_return meter.stop();
}

// ---- sleep_many ----

volt::Task<void> sleep_1ms() {
  co_await volt::sleep(1ms);
}

// `ops` tasks each sleep 1 ms, all at once; ns_per_op = total wall time / ops.
volt::Task<Sample> sleep_many(std::uint64_t ops) {
  Meter meter = Meter::start();
  std::vector<volt::JoinHandle<void>> tasks;  // Tokio: one Vec, collected
  tasks.reserve(ops);
  for (std::uint64_t i = 0; i < ops; ++i)
    tasks.push_back(volt::spawn(sleep_1ms()));
  for (auto& task : tasks)
    co_await task;
  co_return meter.stop();
}

// ---- timeout_ready ----

// An operation that is ready at once with `value`: the counterpart of Rust's
// std::future::ready(value).
struct Ready {
  std::uint64_t value;

  bool await_ready() const noexcept { return true; }
  void await_suspend(std::coroutine_handle<>) const noexcept {}
  std::uint64_t await_resume() const noexcept { return value; }
};

// Wrap an already-ready operation in a 1 s timeout and await it.
volt::Task<Sample> timeout_ready(std::uint64_t ops) {
  Meter meter = Meter::start();
  for (std::uint64_t value = 0; value < ops; ++value) {
    volt::Expected<std::uint64_t> result = co_await volt::timeout(1s, Ready{value});
    if (!result) throw std::logic_error("timeout_ready: a ready operation cannot time out");
    black_box(*result);
  }
  co_return meter.stop();
}

constexpr std::array kBenches{
    task_bench("timer_register_cancel", 100'000, timer_register_cancel),
    task_bench("sleep_many", 10'000, sleep_many),
    task_bench("timeout_ready", 100'000, timeout_ready),
};

}  // namespace

std::span<const Bench> time_benches() {
  return kBenches;
}

}  // namespace volt_bench
