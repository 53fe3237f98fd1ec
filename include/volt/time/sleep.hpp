// volt/time/sleep.hpp: wait until a deadline.
//
//   co_await volt::sleep(std::chrono::milliseconds(10));
//   co_await volt::sleep_until(volt::time::now() + 1s);
//   co_await volt::time::sleep(10ms);  // the same function, by Tokio's path
//
// Guarantees:
//  - Completes at or after its deadline, never before; on an idle runtime
//    within about 1 ms plus scheduling delay after it (the wheel's 1 ms
//    resolution, rounded up). Timers fire in deadline order.
//  - The timer lives in the Sleep (in the awaiting frame): waiting allocates
//    nothing. Destroying the Sleep cancels it (for instance when the task is
//    aborted, or when it loses a timeout/select).
//  - sleep(d) counts from the call. A zero or negative duration, or a deadline
//    already passed, completes without registering a timer (still counted
//    against the cooperative budget, like any ready operation). A duration
//    too large for the clock saturates: it waits "forever", never wraps.
//  - A Sleep may be awaited again: after it completed it stays complete;
//    after an aborted wait it resumes waiting for the same deadline. reset()
//    gives it a new deadline.
//  - Must be awaited inside a runtime task (errc::no_runtime otherwise); the
//    deadline follows the runtime's clock (volt/time/clock.hpp).
#pragma once

#include <chrono>
#include <coroutine>

#include "volt/detail/task_header.hpp"
#include "volt/detail/timer_node.hpp"
#include "volt/task/join_handle.hpp"
#include "volt/time/clock.hpp"

namespace volt {

namespace detail {

// Any chrono duration as nanoseconds, clamped to the representable range.
template <class Rep, class Period>
constexpr Duration saturate_ns(std::chrono::duration<Rep, Period> d) noexcept {
  const std::chrono::duration<long double, std::nano> wide = d;
  if (wide.count() >= static_cast<long double>(Duration::max().count())) return Duration::max();
  if (wide.count() <= static_cast<long double>(Duration::min().count())) return Duration::min();
  return std::chrono::duration_cast<Duration>(d);
}

// `at + d`, clamped to Instant::max() (a deadline that never comes).
inline Instant saturating_add(Instant at, Duration d) noexcept {
  if (d > Duration::zero() && Instant::max() - at < d) return Instant::max();
  return at + d;
}

// `later - earlier` for later >= earlier, clamped to Duration::max().
inline Duration saturating_diff(Instant later, Instant earlier) noexcept {
  Duration::rep out;
  if (__builtin_sub_overflow(later.time_since_epoch().count(), earlier.time_since_epoch().count(),
                             &out))
    return Duration::max();
  return Duration(out);
}

}  // namespace detail

class [[nodiscard]] Sleep {
 public:
  // Registers at the first await, even if `deadline` has passed (it then
  // fires at the driver's next turn); sleep_until() checks the clock first.
  explicit Sleep(Instant deadline) noexcept : deadline_(deadline) {}
  // An already-complete sleep (zero or negative duration, past deadline).
  static Sleep ready(Instant deadline) noexcept {
    Sleep s(deadline);
    s.immediate_ = true;
    return s;
  }
  // Moving cancels the source's registration; the moved-to Sleep registers
  // again when awaited.
  Sleep(Sleep&& other) noexcept : deadline_(other.deadline_), immediate_(other.immediate_) {
    immediate_ = immediate_ || other.node_.fired();
    other.node_.cancel();
  }
  Sleep& operator=(Sleep&&) = delete;

  Instant deadline() const noexcept { return deadline_; }
  // True once the sleep has completed (its timer fired, or it was born due).
  bool is_elapsed() const noexcept { return immediate_ || node_.fired(); }
  // A new deadline; cancels a pending registration.
  void reset(Instant deadline) noexcept {
    node_.reset();
    deadline_ = deadline;
    immediate_ = false;
  }

  bool await_ready() noexcept { return is_elapsed() && detail::coop_try_consume(); }
  bool await_suspend(std::coroutine_handle<> self) {
    if (!is_elapsed()) {
      detail::TaskHeader* task = detail::suspend_current(self, &elapsed, this);
      if (node_.arm(deadline_, detail::make_task_waker(task))) return true;
      // Already due by the timer's clock.
    }
    // Ready, but this poll's budget is spent: go round the queue once first.
    if (detail::coop_try_consume()) return false;
    detail::yield_current(self);
    return true;
  }
  void await_resume() const noexcept {}

 private:
  static bool elapsed(void* self) noexcept { return static_cast<Sleep*>(self)->node_.fired(); }

  detail::TimerNode node_;
  Instant deadline_;
  bool immediate_ = false;
};

// A deadline already passed gives a completed Sleep (no timer).
inline Sleep sleep_until(Instant deadline) noexcept {
  if (deadline <= time::now()) return Sleep::ready(deadline);
  return Sleep(deadline);
}

template <class Rep, class Period>
Sleep sleep(std::chrono::duration<Rep, Period> d) noexcept {
  const Duration ns = detail::saturate_ns(d);
  const Instant now = time::now();
  if (ns <= Duration::zero()) return Sleep::ready(now);
  return Sleep(detail::saturating_add(now, ns));
}

// Tokio's paths (tokio::time::sleep): the same declarations.
namespace time {
using volt::Sleep;
using volt::sleep;
using volt::sleep_until;
}  // namespace time

}  // namespace volt
