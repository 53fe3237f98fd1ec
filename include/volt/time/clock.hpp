// volt/time/clock.hpp: the runtime's clock, and pausing it in tests.
//
// volt::Instant is a std::chrono::steady_clock time point, and
// volt::time::now() reads the clock of the runtime the calling thread belongs
// to: steady_clock::now() normally, or the paused clock (below). Deadlines
// given to sleep_until / timeout_at / interval_at should come from
// volt::time::now() so that they follow the paused clock in tests.
//
// Paused clock (Tokio's `start_paused` / `time::pause`), for tests:
//  - Runtime::Builder::current_thread().start_paused(true) builds a runtime
//    whose clock stands still; time::pause() stops a running one.
//  - volt::time::advance(d) moves it forward by d, firing every timer that
//    comes due on the way, in deadline order, then yields once so the woken
//    tasks run.
//  - Auto-advance: when every task is waiting and only timers can make
//    progress, the runtime jumps the clock to the next timer's deadline
//    instead of sleeping, so a test of a 3-day timer takes milliseconds.
//    It does not jump while blocking-pool work is in flight (that work may be
//    what the tasks wait for).
//  - time::resume() lets a paused clock run again from where it stands.
//  - Only the current-thread flavour can pause (as in Tokio): elsewhere
//    start_paused(true) makes build() throw, and pause()/advance() throw,
//    volt::Error(errc::invalid_argument). Outside a runtime they throw
//    errc::no_runtime.
//
// Tokio's paths: volt::time::Instant and volt::time::Duration name
// volt::Instant and volt::Duration; the time headers put sleep, sleep_until,
// Sleep, timeout, timeout_at, Timeout, interval, interval_at, Interval and
// MissedTickBehavior in volt::time too (using-declarations of the top-level
// names, which stay).
#pragma once

#include <chrono>

#include "volt/task/task.hpp"

namespace volt {

using Instant = std::chrono::steady_clock::time_point;
using Duration = std::chrono::nanoseconds;

namespace time {

using volt::Duration;
using volt::Instant;

// The calling thread's runtime clock; steady_clock::now() outside a runtime.
Instant now() noexcept;

// Stops the clock of the current (current-thread) runtime.
void pause();
// Lets a paused clock run again (from its paused time).
void resume();
// Moves a paused clock forward by `d` (negative: nothing), firing the timers
// due on the way, then yields once. Must be awaited inside a runtime task.
Task<void> advance(Duration d);

}  // namespace time
}  // namespace volt
