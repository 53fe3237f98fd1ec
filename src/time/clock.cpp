// The time API's out-of-line half: reaching the calling thread's time
// driver from TimerNode and volt::time.
#include <type_traits>

#include "runtime/runtime_core.hpp"
#include "time/time_driver.hpp"
#include "volt/task/yield_now.hpp"
#include "volt/time/clock.hpp"

namespace volt {

namespace detail {

namespace {

RuntimeCore& current_core_or_throw(const char* what) {
  RuntimeCore* core = RuntimeCore::current();
  if (!core) throw Error(errc::no_runtime, what);
  return *core;
}

// The driver's unlocked fire path finds the node from its entry.
static_assert(std::is_standard_layout_v<TimerNode> && offsetof(TimerNode, entry) == 0,
              "TimeDriver converts TimerEntry* to TimerNode*");

}  // namespace

bool TimerNode::arm(Instant deadline, Waker new_waker) {
  RuntimeCore& core = current_core_or_throw("awaiting a timer outside a runtime");
  TimeDriver& time = core.driver().time();
  if (driver != &time) {
    cancel();  // awaited before on another runtime
    driver = &time;
  }
  switch (time.insert(*this, deadline, new_waker)) {
    case TimeDriver::Registered::kDue:
      return false;
    case TimeDriver::Registered::kEarliest:
      core.driver().unpark();
      return true;
    case TimeDriver::Registered::kUnattended:
      core.on_unattended_timer();
      return true;
    case TimeDriver::Registered::kQueued:
      return true;
  }
  return true;
}

void TimerNode::cancel_slow() noexcept {
  driver->remove(*this);
}

}  // namespace detail

namespace time {

Instant now() noexcept {
  detail::RuntimeCore* core = detail::RuntimeCore::current();
  if (!core) return std::chrono::steady_clock::now();
  return core->driver().time().now();
}

namespace {
detail::TimeDriver& pausable_clock(const char* what) {
  detail::RuntimeCore* core = detail::RuntimeCore::current();
  if (!core) throw Error(errc::no_runtime, what);
  if (!core->config().current_thread)
    throw Error(errc::invalid_argument, "the clock can be paused only on a current-thread runtime");
  return core->driver().time();
}
}  // namespace

void pause() {
  pausable_clock("volt::time::pause outside a runtime").pause();
}

void resume() {
  pausable_clock("volt::time::resume outside a runtime").resume();
}

Task<void> advance(Duration d) {
  detail::TimeDriver& clock = pausable_clock("volt::time::advance outside a runtime");
  if (!clock.is_paused())
    throw Error(errc::invalid_argument, "volt::time::advance needs a paused clock");
  clock.advance(d);
  co_await yield_now();
}

}  // namespace time
}  // namespace volt
