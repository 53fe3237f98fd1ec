// volt/detail/timer_node.hpp: the part of a waiting timer operation (Sleep,
// Timeout, Interval) that the time driver links into its wheel. It lives in
// the operation, hence in the awaiting coroutine's frame: registering a timer
// allocates nothing, and destroying the operation cancels it.
//
// States (one atomic byte, `state`):
//   kIdle        not in the driver; the owner may re-arm it
//   kRegistered  linked in the driver (wheel or its firing list); `entry` and
//                `waker` belong to the driver's lock
//   kFired       the driver took it out and moved the waker away; it will not
//                touch the node again, so the owner may free or re-arm it
//
// The driver sets kFired while holding its lock, after moving the waker out
// (copy before publish: the node may be freed the moment kFired is visible),
// with a release store; the owner reads it with acquire (fired()). Cancelling
// a kRegistered node takes the driver's lock, so it either unlinks the node
// before the driver sees it or finds it kFired.
#pragma once

#include <atomic>
#include <cstdint>

#include "volt/detail/timer_entry.hpp"
#include "volt/detail/waker.hpp"
#include "volt/time/clock.hpp"

namespace volt::detail {

class TimeDriver;  // src/time/time_driver.hpp

struct TimerNode {
  enum : std::uint8_t { kIdle = 0, kRegistered = 1, kFired = 2 };

  TimerNode() noexcept = default;
  TimerNode(const TimerNode&) = delete;
  TimerNode& operator=(const TimerNode&) = delete;
  ~TimerNode() { cancel(); }

  // acquire: pairs with the driver's release store of kFired; after it the
  // driver is done with the node.
  bool fired() const noexcept { return state.load(std::memory_order_acquire) == kFired; }
  bool registered() const noexcept { return state.load(std::memory_order_acquire) == kRegistered; }

  // Owner only. Links the node with the current runtime's time driver, to wake
  // `waker` at `deadline`; if already registered, replaces the waker. Returns
  // false (registering nothing, state kFired) if the deadline is already due.
  // Throws Error(no_runtime) outside a runtime.
  bool arm(Instant deadline, Waker waker);
  // Owner only. Unlinks the node if registered; afterwards it is kIdle or
  // kFired and the driver no longer refers to it.
  void cancel() noexcept {
    if (state.load(std::memory_order_acquire) == kRegistered) cancel_slow();
  }
  // Owner only, when not registered: back to kIdle for re-arming.
  void reset() noexcept {
    cancel();
    state.store(kIdle, std::memory_order_relaxed);
  }

  TimerEntry entry;
  Waker waker;
  TimeDriver* driver = nullptr;
  std::atomic<std::uint8_t> state{kIdle};

 private:
  void cancel_slow() noexcept;
};

}  // namespace volt::detail
