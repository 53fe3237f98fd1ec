// Driver: the epoll instance that the one idle worker blocks in.
//
// Beyond the seed (which parks every idle worker on a futex with a 10 ms
// timeout and polls I/O from every worker with a try-lock), the first worker to
// go idle acquires the driver and blocks in epoll_wait with the next timer
// deadline as its timeout; the other idle workers park on their futex. Waking
// the driver's holder is a write to an eventfd registered with the epoll set.
// An idle runtime therefore makes no system calls at all, and a readiness
// event or a timer is seen when it happens, not at the next 10 ms tick.
//
// Ownership: acquire()/release() is a try-lock; only the holder calls park().
// unpark() may be called from any thread at any time; an unpark that arrives
// while nobody is in epoll_wait leaves the eventfd readable, so the next park
// returns at once (a harmless spurious wake-up, never a lost one).
//
// Timers: the driver owns the TimeDriver. A blocking park sleeps until the
// next timer deadline (TimeDriver::park_timeout_ms, which also arranges for an
// earlier registration to write the eventfd), and every park, blocking or
// not, fires the timers that came due before returning. So whoever holds the
// driver also runs the timer wheel, and a busy runtime's maintenance poll
// (park(false)) keeps timers firing when no worker is idle.
//
// I/O sources are registered here by the I/O driver (a later issue); today the
// eventfd is the only one.
#pragma once

#include <atomic>
#include <cstdint>

#include "time/time_driver.hpp"

namespace volt::detail {

class Driver {
 public:
  explicit Driver(bool start_paused = false);
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // acquire: pairs with the release in release(): the new holder sees what the
  // previous holder did with the driver's state.
  bool try_acquire() noexcept {
    if (held_.exchange(true, std::memory_order_acquire)) return false;
    time_.on_acquire();
    return true;
  }
  // Returns true if timers are pending: the caller must then hand the driver
  // to a sleeping worker (see TimeDriver), since it will not come back soon.
  [[nodiscard]] bool release() noexcept {
    const bool timers_pending = time_.on_release();
    held_.store(false, std::memory_order_release);
    return timers_pending;
  }

  // Holder only. With `block`, sleeps until unparked, an event, or the next
  // timer deadline; without, only polls. Then dispatches whatever became
  // ready and fires due timers.
  void park(bool block) noexcept;

  // Any thread. Makes the current or next park() return.
  void unpark() noexcept;

  TimeDriver& time() noexcept { return time_; }

 private:
  TimeDriver time_;
  int epoll_fd_ = -1;
  int event_fd_ = -1;
  std::atomic<bool> held_{false};
};

}  // namespace volt::detail
