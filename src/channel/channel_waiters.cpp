// The slow paths of ChannelWaiters (volt/detail/channel_waiters.hpp has the
// protocol and the Dekker argument; tests/model/channel.pml checks it).
#include "volt/detail/channel_waiters.hpp"

#include <utility>

#include "volt/detail/spin_wait.hpp"
#include "volt/detail/wake_list.hpp"

namespace volt::detail {

bool ChannelWaiters::enqueue(ChannelWaiter* waiter, bool (*recheck)(void*),
                             void* context) noexcept {
  lock_.lock();
  // seq_cst: R1 of the Dekker pair; the re-check's seq_cst loads (R2) come
  // after it in the single total order.
  waiting_.store(true, std::memory_order_seq_cst);
  if (recheck(context)) {
    clear_flag_if_empty();
    lock_.unlock();
    return false;
  }
  waiter->state.store(ChannelWaiter::kQueued, std::memory_order_relaxed);
  // The fast slot only when nobody waits, so it holds the oldest waiter and
  // waking it first keeps the order FIFO.
  ChannelWaiter* empty = nullptr;
  // release: pairs with the lock-free exchange in wake_one_slow(), which
  // then sees the waker and state written above.
  if (!list_.empty() || !fast_.compare_exchange_strong(empty, waiter, std::memory_order_release,
                                                       std::memory_order_relaxed)) {
    list_.push_back(waiter);
  }
  lock_.unlock();
  return true;
}

void ChannelWaiters::wake_one_slow() noexcept {
  // acquire: pairs with enqueue's release CAS (the waiter's waker).
  ChannelWaiter* waiter = fast_.exchange(nullptr, std::memory_order_acquire);
  if (waiter == nullptr) {
    lock_.lock();
    // Under the lock: a registrant that raised the flag has finished, so a
    // waiter it put in the fast slot is seen here.
    waiter = fast_.exchange(nullptr, std::memory_order_acquire);
    if (waiter == nullptr) waiter = list_.pop_front();
    clear_flag_if_empty();
    if (waiter == nullptr) {
      lock_.unlock();
      return;
    }
    Waker waker = std::move(waiter->waker);
    // release: the owner's acquire in notified(); last touch of the waiter.
    waiter->state.store(ChannelWaiter::kNotified, std::memory_order_release);
    lock_.unlock();
    waker.wake();
    return;
  }
  // Taken out of the fast slot without the lock: this thread owns it until
  // the store below (cancel() waits for that store; see there).
  Waker waker = std::move(waiter->waker);
  waiter->state.store(ChannelWaiter::kNotified, std::memory_order_release);
  waker.wake();
}

void ChannelWaiters::cancel(ChannelWaiter* waiter) noexcept {
  lock_.lock();
  if (waiter->state.load(std::memory_order_acquire) == ChannelWaiter::kQueued) {
    ChannelWaiter* expected = waiter;
    if (fast_.compare_exchange_strong(expected, nullptr, std::memory_order_relaxed) ||
        list_.remove(waiter)) {
      waiter->state.store(ChannelWaiter::kIdle, std::memory_order_relaxed);
      waiter->waker = Waker();
      clear_flag_if_empty();
      lock_.unlock();
      return;
    }
    // Neither in the slot nor in the list, yet kQueued: a waker took it out
    // of the fast slot and is about to publish kNotified, touching it. Wait
    // for that store (a few instructions away unless the waker's thread was
    // preempted, hence the yielding backoff; the waker takes no lock on that
    // path, so waiting here cannot deadlock). acquire: pairs with the
    // waker's release store of kNotified, its last touch of the waiter.
    lock_.unlock();
    SpinWait backoff;
    while (waiter->state.load(std::memory_order_acquire) != ChannelWaiter::kNotified)
      backoff.once();
  } else {
    lock_.unlock();
  }
  // Woken but never retried: pass the wake-up on.
  waiter->state.store(ChannelWaiter::kIdle, std::memory_order_relaxed);
  wake_one();
}

void ChannelWaiters::wake_all() noexcept {
  WakeList wakes;
  lock_.lock();
  for (;;) {
    ChannelWaiter* waiter = fast_.exchange(nullptr, std::memory_order_acquire);
    if (waiter == nullptr) waiter = list_.pop_front();
    if (waiter == nullptr) break;
    wakes.push(std::move(waiter->waker));
    waiter->state.store(ChannelWaiter::kNotified, std::memory_order_release);
    if (wakes.full()) {
      lock_.unlock();
      wakes.wake_all();
      lock_.lock();
    }
  }
  clear_flag_if_empty();
  lock_.unlock();
}

void ChannelWaiters::clear_flag_if_empty() noexcept {
  // Relaxed: every store to waiting_ is made under lock_, so the lock orders
  // them; a registrant's later seq_cst store of true follows this one.
  if (list_.empty() && fast_.load(std::memory_order_relaxed) == nullptr)
    waiting_.store(false, std::memory_order_relaxed);
}

}  // namespace volt::detail
