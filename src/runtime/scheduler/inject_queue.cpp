#include "runtime/scheduler/inject_queue.hpp"

namespace volt::detail {

bool InjectQueue::push_batch(TaskHeader* first, TaskHeader* last, std::size_t count) noexcept {
  last->queue_next = nullptr;
  std::lock_guard lock(mutex_);
  if (closed_) return false;
  if (tail_) {
    tail_->queue_next = first;
  } else {
    head_ = first;
  }
  tail_ = last;
  // relaxed: the mutex publishes the links; len_ is only a hint to lock-free
  // readers, who order themselves with a fence where it matters.
  len_.store(len_.load(std::memory_order_relaxed) + count, std::memory_order_relaxed);
  return true;
}

TaskHeader* InjectQueue::pop() noexcept {
  std::size_t popped;
  return pop_batch(1, &popped);
}

TaskHeader* InjectQueue::pop_batch(std::size_t max, std::size_t* popped) noexcept {
  *popped = 0;
  if (is_empty() || max == 0) return nullptr;
  std::lock_guard lock(mutex_);
  TaskHeader* first = head_;
  if (!first) return nullptr;
  // relaxed: written only under mutex_, which we hold, so this is exact.
  const std::size_t len = len_.load(std::memory_order_relaxed);
  if (len <= max) {
    // All of it, without touching a task: the tail's link is already null
    // (push_batch clears it before linking the chain in).
    head_ = tail_ = nullptr;
    len_.store(0, std::memory_order_relaxed);
    *popped = len;
    return first;
  }
  TaskHeader* last = first;
  std::size_t n = 1;
  while (n < max && last->queue_next) {  // len > max: the check is only a guard
    last = last->queue_next;
    ++n;
  }
  head_ = last->queue_next;
  if (!head_) tail_ = nullptr;
  last->queue_next = nullptr;
  len_.store(len_.load(std::memory_order_relaxed) - n, std::memory_order_relaxed);
  *popped = n;
  return first;
}

void InjectQueue::close() noexcept {
  std::lock_guard lock(mutex_);
  closed_ = true;
}

bool InjectQueue::is_closed() const noexcept {
  std::lock_guard lock(mutex_);
  return closed_;
}

}  // namespace volt::detail
