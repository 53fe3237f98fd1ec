// TaskTracker's shared state: creation, destruction, close and reopen (the
// counting itself is inline in include/volt/task/task_tracker.hpp).
//
// The one event that completes waits is state_ becoming exactly kClosed
// (closed, no live task). It happens in one of two atomic steps, and the
// thread whose step it was calls notify_waiters():
//   - remove_task() on a closed tracker taking the count from 1 to 0;
//   - close() on an open, empty tracker (below).
// reopen() clears the bit; a wait that was completed stays completed.
// A wait() that loads state_ after its Notified was made either sees kClosed
// (done at once) or is covered by the notify_waiters() of the step that
// later makes it so.
#include "volt/task/task_tracker.hpp"

namespace volt::detail {

TaskTrackerState* TaskTrackerState::create() {
  return new TaskTrackerState();
}

void TaskTrackerState::destroy() noexcept {
  delete this;
}

bool TaskTrackerState::close() noexcept {
  // acq_rel: as remove_task (release: a wait() that sees the bit sees what we
  // did before; acquire: the count we test is current).
  const std::uint64_t prev = state_.fetch_or(kClosed, std::memory_order_acq_rel);
  if (prev == 0) notify_.notify_waiters();  // open and empty -> closed and empty
  return (prev & kClosed) == 0;
}

bool TaskTrackerState::reopen() noexcept {
  // acq_rel: as close.
  const std::uint64_t prev = state_.fetch_and(~kClosed, std::memory_order_acq_rel);
  return (prev & kClosed) != 0;
}

}  // namespace volt::detail
