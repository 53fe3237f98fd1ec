// ThreadParker: how a plain (non-runtime) thread waits for a task.
//
// JoinHandle::join and Runtime::block_on register a waker whose data is the
// calling thread's parker. The parker is reference counted and outlives the
// thread if a waker still holds it: a completing task may still be inside
// wake_by_ref() when the woken thread has already returned and exited.
//
// State: kEmpty, kParked (futex-waiting), kNotified (a wake-up is pending and
// the next park() consumes it). unpark() swaps in kNotified and wakes the
// futex only if the previous state was kParked.
#pragma once

#include <atomic>
#include <cstdint>

#include "volt/detail/waker.hpp"

namespace volt::detail {

class ThreadParker {
 public:
  // The calling thread's parker (created on first use).
  static ThreadParker& current();

  Waker waker() noexcept;
  // Sleeps until unparked; a pending notification makes it return at once.
  void park() noexcept;
  // As park(), but returns after about `timeout_ns` at the latest. True if a
  // notification ended it (and was consumed), false on the timeout.
  bool park_for(std::int64_t timeout_ns) noexcept;
  void unpark() noexcept;

  void retain() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() noexcept;

 private:
  enum : std::uint32_t { kEmpty = 0, kParked = 1, kNotified = 2 };
  // kEmpty -> kParked, or consumes a pending notification (false: return
  // at once, woken).
  bool enter_parked() noexcept;
  std::atomic<std::uint32_t> state_{kEmpty};
  std::atomic<std::uint32_t> refs_{1};  // the owning thread's
};

}  // namespace volt::detail
