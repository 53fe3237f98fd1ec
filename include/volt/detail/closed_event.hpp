// volt/detail/closed_event.hpp: the waiting behind the channels' closed()
// awaitables (a sender waiting until nobody receives any more).
//
// A ClosedEvent is a list of waiters under a spin lock, and ClosedWait the
// operation that waits on it for a condition the channel owns ("every
// receiver is gone": a count at zero, a flag). The condition is read through
// a function the channel supplies; it may become false again later (a
// broadcast or watch sender subscribes a new receiver), so a woken ClosedWait
// re-checks it and waits again if it no longer holds, as Tokio's closed()
// loops.
//
// No lost wake-up. The side that makes the condition true (the last
// receiver's drop, a close) does so first, then calls notify_all(), which
// takes the lock. A waiter reads the condition under the same lock and links
// itself only if it does not hold. The lock orders the two critical
// sections: if the waiter's comes first, it is linked when notify_all runs
// and is woken; if notify_all's comes first, the change it follows happens
// before the waiter's read (the unlock releases it, the lock acquires it),
// so the waiter sees the condition true (or a later value) and does not
// link. The condition's own loads may therefore be relaxed or acquire: the
// lock gives the ordering. notify_all() must run after every change that
// can make the condition true.
//
// Lifetimes: the event lives in the channel's shared state; a ClosedWait is
// made from a sender handle, which keeps that state alive, and must not
// outlive it (the channels' contracts say so). Waiting allocates nothing:
// the waiter lives in the ClosedWait.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <utility>

#include "volt/detail/intrusive_list.hpp"
#include "volt/detail/spin_lock.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/detail/wake_list.hpp"
#include "volt/detail/waker.hpp"
#include "volt/task/join_handle.hpp"

namespace volt::detail {

// One waiting ClosedWait.
struct ClosedWaiter : IntrusiveLink {
  Waker waker;  // guarded by the event's lock while linked
  // Stored true (release) by notify_all after it unlinked the waiter and
  // moved its waker out: its last touch. Acquire loads by the owner.
  std::atomic<bool> woken{false};
  // Guarded by the event's lock: ClosedEvent::notifies_ when linked. A
  // notify wakes only the waiters linked before it began (epoch < its own).
  std::uint64_t epoch = 0;
};

// Whether the awaited condition holds ("closed"). Called with the event's
// lock held (enqueue) and without it (the operation's checks); it may take
// other locks (never the event's).
using ClosedCondition = bool (*)(const void* context) noexcept;

class ClosedEvent {
 public:
  ClosedEvent() noexcept = default;
  ClosedEvent(const ClosedEvent&) = delete;
  ClosedEvent& operator=(const ClosedEvent&) = delete;

  // Links `waiter` (its waker set by the caller) unless `closed(context)`
  // holds, read under the lock. True if linked.
  bool enqueue(ClosedWaiter& waiter, ClosedCondition closed, const void* context) noexcept {
    lock_.lock();
    if (closed(context)) {
      lock_.unlock();
      return false;
    }
    // relaxed: the owner reads it only after the lock (or notify_all's
    // release store) has published this.
    waiter.woken.store(false, std::memory_order_relaxed);
    waiter.epoch = notifies_;
    waiters_.push_back(&waiter);
    lock_.unlock();
    return true;
  }

  // The owner gives up (destroyed, or done early): unlinks `waiter` if
  // notify_all has not. Its waker is dropped outside the lock (dropping a
  // task waker may run scheduler code).
  void cancel(ClosedWaiter& waiter) noexcept {
    Waker old;
    lock_.lock();
    if (waiters_.remove(&waiter)) old = std::move(waiter.waker);
    lock_.unlock();
  }

  // After the condition became true: wakes every waiter linked before this
  // call took the lock, in batches (wakers run outside the lock).
  //
  // Only those: a waiter linking while we are unlocked between batches read
  // the condition after our change, so it found it false only if it became
  // false again (a receiver subscribed), and then the next change that makes
  // it true is followed by the next notify, which wakes it. Waking it here as
  // well would let waits that link again as soon as they are woken (each
  // woken ClosedWait finds the condition false and links again) keep this
  // loop going for as long as they keep up, with more than one WakeList
  // batch of waiters. The list is FIFO and epochs never decrease along it,
  // so the waiters to wake are a prefix.
  void notify_all() noexcept {
    WakeList wakes;
    lock_.lock();
    const std::uint64_t mine = ++notifies_;
    for (;;) {
      ClosedWaiter* waiter = waiters_.front();
      if (waiter == nullptr || waiter->epoch >= mine) break;
      waiters_.pop_front();
      wakes.push(std::move(waiter->waker));  // before publishing woken
      // release: pairs with the owner's acquire load; it may free the
      // waiter from here on.
      waiter->woken.store(true, std::memory_order_release);
      if (wakes.full()) {
        lock_.unlock();
        wakes.wake_all();
        lock_.lock();
      }
    }
    lock_.unlock();
    wakes.wake_all();
  }

 private:
  SpinLock lock_;
  IntrusiveList<ClosedWaiter> waiters_;  // guarded by lock_
  std::uint64_t notifies_ = 0;           // guarded by lock_: notifies begun (ClosedWaiter::epoch)
};

// The closed() operation of the channels' senders: co_await completes (void)
// once `closed(context)` holds, at once if it already does. An empty one
// (no event: a moved-from sender) completes at once.
// Cancelled by destruction (abort, timeout, select): the waiter is unlinked,
// nothing else is held. May be moved only before it is awaited. An lvalue
// interrupted by a timeout may be awaited again by the same task; it keeps
// its registration.
class [[nodiscard]] ClosedWait {
 public:
  ClosedWait(ClosedEvent* event, ClosedCondition closed, const void* context) noexcept
      : event_(event), closed_(closed), context_(context) {}
  ClosedWait(ClosedWait&& other) noexcept
      : event_(other.event_), closed_(other.closed_), context_(other.context_) {
    if (other.queued_) std::terminate();  // a linked waiter cannot move
  }
  ClosedWait(const ClosedWait&) = delete;
  ClosedWait& operator=(const ClosedWait&) = delete;
  ClosedWait& operator=(ClosedWait&&) = delete;
  ~ClosedWait() { leave(); }

  bool await_ready() {
    if (event_ == nullptr) return true;
    // Awaited again after an interrupted wait: no new budget unit; the
    // registration is kept (await_suspend) unless it was woken.
    if (queued_) return poll_queued();
    // The budget first: a task whose budget is spent yields, and looks from
    // ready_check.
    if (!coop_try_consume()) {
      yielding_ = true;
      return false;
    }
    return is_closed();
  }
  bool await_suspend(std::coroutine_handle<> self) {
    if (yielding_) {
      yielding_ = false;
      yield_current(self, &ready_check, this);
      return true;
    }
    TaskHeader* task = suspend_current(self, &ready_check, this);
    if (queued_) return true;  // linked from an interrupted await: same task's waker
    return enqueue(task);
  }
  void await_resume() noexcept { leave(); }

 private:
  bool is_closed() const noexcept { return closed_(context_); }

  // Links the waiter with `task`'s waker. True if the task must wait.
  bool enqueue(TaskHeader* task) noexcept {
    waiter_.waker = make_task_waker(task);
    if (event_->enqueue(waiter_, closed_, context_)) {
      queued_ = true;
      return true;
    }
    waiter_.waker.reset();  // closed already: not linked
    return false;
  }
  // queued_: true if the operation may complete (and it is off the list).
  bool poll_queued() noexcept {
    // acquire: pairs with notify_all's release store; it is done with us.
    if (waiter_.woken.load(std::memory_order_acquire)) {
      queued_ = false;
      return is_closed();  // false: a receiver came back; wait again
    }
    if (!is_closed()) return false;
    leave();  // closed, and the notify has not reached us yet
    return true;
  }
  void leave() noexcept {
    if (!queued_) return;
    queued_ = false;
    event_->cancel(waiter_);
  }
  // The task's readiness check (runs when it is polled).
  static bool ready_check(void* context) noexcept {
    ClosedWait& self = *static_cast<ClosedWait*>(context);
    if (self.queued_) {
      if (self.poll_queued()) return true;
      if (self.queued_) return false;  // still linked: wait for notify_all
    } else if (self.is_closed()) {
      return true;  // the first look after a budget yield
    }
    return !self.enqueue(tls_context.current_task);
  }

  ClosedEvent* event_;
  ClosedCondition closed_;
  const void* context_;
  ClosedWaiter waiter_;
  bool queued_ = false;    // waiter_ linked, and not yet seen woken
  bool yielding_ = false;  // budget spent: the first look is in ready_check
};

}  // namespace volt::detail
