// volt/detail/wake_list.hpp: wakers collected under a lock, invoked after it.
//
// A primitive that completes waiters while holding its mutex moves each
// waiter's waker in here (before publishing the waiter's completion: the
// waiter may be freed as soon as it is published), releases the mutex, then
// calls wake_all(). Waking under the lock would run scheduler code (queue
// pushes, futex wakes) inside the critical section, and a woken task that
// runs at once on another worker would contend for the very lock.
//
// Fixed capacity, no allocation: when full() the caller unlocks, wakes what
// it has, re-locks and carries on (its state must be consistent there).
#pragma once

#include <array>
#include <cstddef>
#include <utility>

#include "volt/detail/waker.hpp"

namespace volt::detail {

class WakeList {
 public:
  static constexpr std::size_t kCapacity = 32;

  bool full() const noexcept { return size_ == kCapacity; }
  bool empty() const noexcept { return size_ == 0; }
  // Precondition: !full().
  void push(Waker waker) noexcept { wakers_[size_++] = std::move(waker); }
  void wake_all() noexcept {
    for (std::size_t i = 0; i < size_; ++i)
      wakers_[i].wake();
    size_ = 0;
  }
  ~WakeList() { wake_all(); }  // a forgotten wake-up would be a lost one

 private:
  std::array<Waker, kCapacity> wakers_;
  std::size_t size_ = 0;
};

}  // namespace volt::detail
