// volt/sync/mutex.hpp: an async mutex that owns the value it protects.
//
//   volt::Mutex<std::vector<int>> list;
//   {
//     auto guard = co_await list.lock();   // waits without blocking a worker
//     guard->push_back(1);
//   }                                      // unlocked here
//
// Guarantees:
//  - A Semaphore(1) holding the value (the reference design's, docs/design.md), so it
//    inherits its properties: FIFO hand-off to waiters, no allocation to
//    wait, a waiting lock() cancelled by destruction (abort, timeout, select)
//    with nothing lost.
//  - The guard is the only way to the value; destroying it unlocks. Guards
//    are movable, not copyable.
//  - try_lock() never waits; lock_blocking() is for plain threads
//    (errc::blocking_in_runtime on a runtime thread).
//  - Holding a guard across a co_await is allowed (that is the point of an
//    async mutex); a guard must not outlive its Mutex.
#pragma once

#include <coroutine>
#include <optional>
#include <utility>

#include "volt/sync/semaphore.hpp"

namespace volt {

template <class T>
class Mutex {
 public:
  class [[nodiscard]] Guard {
   public:
    Guard(Guard&&) noexcept = default;
    Guard& operator=(Guard&&) noexcept = default;
    T& operator*() const noexcept { return *value_; }
    T* operator->() const noexcept { return value_; }

   private:
    friend class Mutex;
    Guard(SemaphorePermit permit, T* value) noexcept : permit_(std::move(permit)), value_(value) {}
    SemaphorePermit permit_;  // unlocks when destroyed
    T* value_;
  };

  template <class... Args>
  explicit Mutex(Args&&... args) : value_(std::forward<Args>(args)...) {}
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  class [[nodiscard]] Lock {
   public:
    explicit Lock(Mutex& mutex) noexcept : mutex_(mutex), acquire_(mutex.semaphore_.acquire(1)) {}
    bool await_ready() { return acquire_.await_ready(); }
    bool await_suspend(std::coroutine_handle<> self) { return acquire_.await_suspend(self); }
    Guard await_resume() {
      // The semaphore is never closed: the permit is always there.
      return Guard(acquire_.await_resume().value(), &mutex_.value_);
    }

   private:
    Mutex& mutex_;
    Semaphore::Acquire acquire_;
  };

  // Waits for the lock; co_await gives the Guard.
  Lock lock() noexcept { return Lock(*this); }

  std::optional<Guard> try_lock() {
    std::optional<SemaphorePermit> permit = semaphore_.try_acquire(1);
    if (!permit) return std::nullopt;
    return Guard(std::move(*permit), &value_);
  }

  Guard lock_blocking() { return Guard(semaphore_.acquire_blocking(1).value(), &value_); }

 private:
  Semaphore semaphore_{1};
  T value_;
};

// Tokio's path (tokio::sync::Mutex).
namespace sync {
using volt::Mutex;
}  // namespace sync

}  // namespace volt
