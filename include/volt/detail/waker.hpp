// volt/detail/waker.hpp: a type-erased handle that reschedules whoever waits.
//
// A Waker is what a waiting operation leaves behind with the thing it waits on
// (a join handle's task, later a semaphore, a channel, a timer). It is two
// words, {vtable, data}, and never allocates: for a task the data is the task
// header and cloning takes a reference on it; for a blocked plain thread the
// data is that thread's parker.
//
// Contract:
//  - wake() consumes the waker; wake_by_ref() leaves it usable.
//  - Waking is idempotent from the waiter's point of view: waking a task that is
//    already scheduled, running (it is re-polled once more), or complete is
//    harmless and never loses the wake-up.
//  - wake() and wake_by_ref() may be called from any thread, but never while
//    holding a lock that the woken party may take (collect wakers under the lock,
//    wake after releasing it).
#pragma once

#include <utility>

namespace volt::detail {

struct WakerVTable {
  void* (*clone)(void* data) noexcept;
  void (*wake)(void* data) noexcept;         // consumes the reference
  void (*wake_by_ref)(void* data) noexcept;  // keeps the reference
  void (*drop)(void* data) noexcept;
};

class Waker {
 public:
  Waker() noexcept = default;
  Waker(const WakerVTable* vtable, void* data) noexcept : vtable_(vtable), data_(data) {}

  Waker(const Waker& other) noexcept
      : vtable_(other.vtable_),
        data_(other.vtable_ ? other.vtable_->clone(other.data_) : nullptr) {}
  Waker(Waker&& other) noexcept
      : vtable_(std::exchange(other.vtable_, nullptr)),
        data_(std::exchange(other.data_, nullptr)) {}
  Waker& operator=(Waker other) noexcept {
    std::swap(vtable_, other.vtable_);
    std::swap(data_, other.data_);
    return *this;
  }
  ~Waker() { reset(); }

  explicit operator bool() const noexcept { return vtable_ != nullptr; }

  // Wakes and empties this waker.
  void wake() noexcept {
    if (vtable_) {
      auto* vtable = std::exchange(vtable_, nullptr);
      vtable->wake(std::exchange(data_, nullptr));
    }
  }
  void wake_by_ref() const noexcept {
    if (vtable_) vtable_->wake_by_ref(data_);
  }
  void reset() noexcept {
    if (vtable_) {
      auto* vtable = std::exchange(vtable_, nullptr);
      vtable->drop(std::exchange(data_, nullptr));
    }
  }

 private:
  const WakerVTable* vtable_ = nullptr;
  void* data_ = nullptr;
};

}  // namespace volt::detail
