// volt/time/interval.hpp: ticks at a fixed period.
//
//   volt::Interval every = volt::interval(std::chrono::milliseconds(100));
//   // or, Tokio's path to the same: volt::time::interval(100ms), volt::time::Interval
//   for (;;) {
//     volt::Instant at = co_await every.tick();   // the first tick is immediate
//     ...
//   }
//
// Guarantees:
//  - tick() completes at the tick's scheduled time or after (never before) and
//    returns that scheduled time. The first tick is at the start instant
//    (interval(): now, so it completes at once; interval_at(start, p): start).
//  - Missed ticks (the caller came back more than 5 ms after a tick was due,
//    as in Tokio) follow the MissedTickBehavior:
//      burst (default): the missed ticks complete at once, one per tick(),
//                       until caught up; the schedule is unchanged;
//      delay: the next tick is one period after the late one completed; the
//             schedule shifts;
//      skip:  the missed ticks are dropped; the next tick is the next one of
//             the original schedule after now.
//  - A period of zero or less throws volt::Error(errc::invalid_argument).
//  - The timer lives in the Interval: ticking allocates nothing. Destroying a
//    tick() wait (abort, timeout, select) cancels it; the tick is not lost and
//    the next tick() waits for it again.
//  - reset() (next tick one period from now), reset_immediately(),
//    reset_after(d), reset_at(t) restart the schedule from the tick they set.
//  - An Interval is one owner's; it may be moved between ticks.
#pragma once

#include <chrono>
#include <coroutine>

#include "volt/detail/timer_node.hpp"
#include "volt/error.hpp"
#include "volt/time/clock.hpp"
#include "volt/time/sleep.hpp"

namespace volt {

enum class MissedTickBehavior { burst, delay, skip };

class Interval {
 public:
  Interval(Instant start, Duration period) : next_(start), period_(period) {
    if (period <= Duration::zero())
      throw Error(errc::invalid_argument, "interval period must be positive");
  }
  Interval(Interval&& other) noexcept
      : next_(other.next_), period_(other.period_), behavior_(other.behavior_) {
    other.node_.cancel();
  }
  Interval& operator=(Interval&&) = delete;

  Duration period() const noexcept { return period_; }
  MissedTickBehavior missed_tick_behavior() const noexcept { return behavior_; }
  void set_missed_tick_behavior(MissedTickBehavior behavior) noexcept { behavior_ = behavior; }
  // When the next tick is due.
  Instant next_tick() const noexcept { return next_; }
  // Restarting the schedule (Tokio's reset family). Each sets when the next
  // tick is due; the ticks after it follow every period from there. Call
  // them between ticks, not while a tick() of this Interval is waiting.
  // The next tick is one period from now.
  void reset() noexcept { reset_at(detail::saturating_add(time::now(), period_)); }
  // The next tick is due now: the next tick() completes at once.
  void reset_immediately() noexcept { reset_at(time::now()); }
  // The next tick is `after` from now (zero or less: now).
  template <class Rep, class Period>
  void reset_after(std::chrono::duration<Rep, Period> after) noexcept {
    const Duration d = detail::saturate_ns(after);
    reset_at(d > Duration::zero() ? detail::saturating_add(time::now(), d) : time::now());
  }
  // The next tick is at `deadline` (a past one: due at once, and counted as
  // missed if more than 5 ms ago, under the MissedTickBehavior).
  void reset_at(Instant deadline) noexcept {
    node_.reset();
    next_ = deadline;
  }

  class [[nodiscard]] TickAwaiter {
   public:
    explicit TickAwaiter(Interval& interval) noexcept : interval_(interval) {}
    // Before it is awaited (e.g. into timeout(d, every.tick())).
    TickAwaiter(TickAwaiter&& other) noexcept
        : interval_(other.interval_), now_(other.now_), completed_(other.completed_) {
      other.completed_ = true;  // the moved-from one withdraws nothing
    }
    TickAwaiter(const TickAwaiter&) = delete;
    TickAwaiter& operator=(const TickAwaiter&) = delete;
    ~TickAwaiter() {
      if (!completed_) interval_.node_.cancel();  // withdrawn; the tick stays due
    }

    bool await_ready() {
      now_ = time::now();
      return interval_.due(now_) && detail::coop_try_consume();
    }
    bool await_suspend(std::coroutine_handle<> self) {
      if (!interval_.due(now_)) {
        detail::TaskHeader* task = detail::suspend_current(self, &fired, &interval_);
        if (interval_.node_.arm(interval_.next_, detail::make_task_waker(task))) return true;
      }
      if (detail::coop_try_consume()) return false;
      detail::yield_current(self);
      return true;
    }
    Instant await_resume() {
      completed_ = true;
      interval_.node_.reset();
      return interval_.advance(time::now());
    }

   private:
    static bool fired(void* interval) noexcept {
      return static_cast<Interval*>(interval)->node_.fired();
    }
    Interval& interval_;
    Instant now_{};
    bool completed_ = false;
  };

  // Waits for the next tick; returns its scheduled time.
  TickAwaiter tick() noexcept { return TickAwaiter(*this); }

 private:
  // Instant::max() is "never" (a saturated schedule), as for Sleep.
  bool due(Instant now) const noexcept { return next_ != Instant::max() && now >= next_; }

  // The tick at next_ completed at `now`: schedule the following one.
  Instant advance(Instant now) noexcept {
    const Instant due = next_;
    if (now > due && detail::saturating_diff(now, due) > std::chrono::milliseconds(5)) {
      switch (behavior_) {
        case MissedTickBehavior::burst:
          next_ = detail::saturating_add(due, period_);
          break;
        case MissedTickBehavior::delay:
          next_ = detail::saturating_add(now, period_);
          break;
        case MissedTickBehavior::skip: {
          // The first tick of the original schedule strictly after now.
          const Duration behind = detail::saturating_diff(now, due);
          next_ = detail::saturating_add(now, period_ - behind % period_);
          break;
        }
      }
    } else {
      next_ = detail::saturating_add(due, period_);
    }
    return due;
  }

  detail::TimerNode node_;
  Instant next_;
  Duration period_;
  MissedTickBehavior behavior_ = MissedTickBehavior::burst;
};

// Ticks every `period`, the first tick at once.
template <class Rep, class Period>
Interval interval(std::chrono::duration<Rep, Period> period) {
  return Interval(time::now(), detail::saturate_ns(period));
}

// Ticks every `period`, the first tick at `start`.
template <class Rep, class Period>
Interval interval_at(Instant start, std::chrono::duration<Rep, Period> period) {
  return Interval(start, detail::saturate_ns(period));
}

// Tokio's paths (tokio::time::interval): the same declarations.
namespace time {
using volt::Interval;
using volt::interval;
using volt::interval_at;
using volt::MissedTickBehavior;
}  // namespace time

}  // namespace volt
