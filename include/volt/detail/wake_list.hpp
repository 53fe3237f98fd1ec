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

#include <cstddef>
#include <new>
#include <utility>

#include "volt/detail/waker.hpp"

namespace volt::detail {

class WakeList {
 public:
  static constexpr std::size_t kCapacity = 32;

  WakeList() noexcept = default;
  WakeList(const WakeList&) = delete;
  WakeList& operator=(const WakeList&) = delete;
  ~WakeList() { wake_all(); }  // a forgotten wake-up would be a lost one

  bool full() const noexcept { return size_ == kCapacity; }
  bool empty() const noexcept { return size_ == 0; }
  // Precondition: !full().
  void push(Waker waker) noexcept { ::new (slot(size_++)) Waker(std::move(waker)); }
  void wake_all() noexcept {
    for (std::size_t i = 0; i < size_; ++i) {
      Waker* waker = std::launder(reinterpret_cast<Waker*>(slot(i)));
      waker->wake();
      waker->~Waker();
    }
    size_ = 0;
  }

 private:
  // Raw storage: constructing 32 empty wakers on every release (the common
  // case wakes none) measured as most of semaphore_try_acquire's time.
  void* slot(std::size_t i) noexcept { return storage_ + i * sizeof(Waker); }

  alignas(Waker) unsigned char storage_[kCapacity * sizeof(Waker)];
  std::size_t size_ = 0;
};

}  // namespace volt::detail
