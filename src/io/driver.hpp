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
// This issue builds the shape: the eventfd is the only registered source, and
// the timeout is "none" (block until unparked). The time driver supplies a
// deadline and the I/O driver registers sockets here.
#pragma once

#include <atomic>
#include <cstdint>

namespace volt::detail {

class Driver {
 public:
  Driver();
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // acquire: pairs with the release in release(): the new holder sees what the
  // previous holder did with the driver's state.
  bool try_acquire() noexcept { return !held_.exchange(true, std::memory_order_acquire); }
  void release() noexcept { held_.store(false, std::memory_order_release); }

  // Holder only. Blocks until unparked or `timeout_ms` elapses (-1: no limit,
  // 0: just poll). Dispatches whatever became ready.
  void park(int timeout_ms) noexcept;

  // Any thread. Makes the current or next park() return.
  void unpark() noexcept;

 private:
  int epoll_fd_ = -1;
  int event_fd_ = -1;
  std::atomic<bool> held_{false};
};

}  // namespace volt::detail
