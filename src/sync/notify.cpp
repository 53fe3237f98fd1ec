// Notify: the waiting half (waking waiters, registering, cancelling,
// broadcasting, the blocking form). The lock-free halves (storing and taking
// the permit) are inline in include/volt/sync/notify.hpp.
//
// State:
//   state_    phase (EMPTY / WAITING / NOTIFIED) | notify_waiters() count
//             << 2. Lock-free: EMPTY|NOTIFIED -> NOTIFIED (notify_one,
//             notify_last) and NOTIFIED -> EMPTY (a Notified takes the permit,
//             only if the count is still the one it was created with). Under
//             lock_: everything that involves WAITING or the count.
//   waiters_  sentinel of a circular ring of NotifyWaiters, oldest after the
//             sentinel; under lock_. notify_waiters() moves the whole ring
//             onto a sentinel of its own (the "guarded" ring) and drains that
//             in batches, unlocking between them to wake; a waiter destroyed
//             meanwhile unlinks itself from whichever ring it is in (the ring
//             is circular, so unlinking needs only the node).
//   waiter    NotifyWaiter inside each Notified: links and waker under lock_;
//             `notification` written once by the notifier that completes it.
//
// Invariants:
//   I1  Under lock_, phase == WAITING exactly when waiters_ is not empty.
//       WAITING is entered and left only under lock_, together with the ring
//       change; the lock-free transitions never start from or produce
//       WAITING. Hence a stored permit and a waiting Notified never coexist.
//   I2  No lost notify_one: it either turns a non-WAITING phase into NOTIFIED
//       with a CAS (a Notified that registers later makes its own CAS on the
//       same word, EMPTY -> WAITING, which fails against NOTIFIED and takes
//       the permit instead), or finds WAITING under lock_ and, by I1, a waiter
//       to complete.
//   I3  A notifier unlinks a waiter and moves its waker out before the release
//       store of `notification`, and touches it no more after: the owner may
//       see the store lock-free and free the waiter at once.
//   I4  notify_waiters() bumps the count and empties waiters_ in one critical
//       section. A Notified created before the bump was either in the ring
//       (it is completed from the guarded ring) or had not registered: when
//       it polls it sees the count differ, lock-free or under lock_, and
//       completes without registering. One created after samples the new
//       count and is not covered.
//   I5  A waiter that notify_one/notify_last completed but whose Notified is
//       destroyed before seeing it (cancel) passes the notification on in the
//       same critical section: to the next waiter, or as the permit.
//
// Races considered:
//   - notify_one's lock-free CAS fails on WAITING; before it locks, the last
//     waiter cancels (phase back to EMPTY). notify_locked tries the permit
//     CAS again under the lock first, so the notification is stored.
//   - A waiter registered by enable() (no waker) is completed before it is
//     awaited: the notification is there when it is awaited (await_ready).
//   - A waiter in the guarded ring is polled (spurious wake, or enable()) or
//     destroyed while notify_waiters() is unlocked between batches: the poll
//     sees the count differ under lock_ and completes, unlinking itself from
//     the guarded ring (as Tokio does); a destroyed one unlinks itself. The
//     batch loop only ever pops what is still linked.
#include "volt/sync/notify.hpp"

#include <utility>

#include "detail/thread_parker.hpp"
#include "detail/waiter_ring.hpp"
#include "volt/detail/wake_list.hpp"
#include "volt/error.hpp"

namespace volt {

using detail::NotifyKind;
using detail::NotifyLink;
using detail::NotifyWaiter;
using detail::ring_empty;
using detail::ring_move_all;
using detail::ring_push_back;
using detail::ring_unlink;

namespace {

// ---- the circular waiter ring (all under Notify::lock_) ----

NotifyWaiter* ring_pop(NotifyLink& sentinel, bool newest) noexcept {
  if (ring_empty(sentinel)) return nullptr;
  NotifyLink* node = newest ? sentinel.prev : sentinel.next;
  ring_unlink(node);
  return static_cast<NotifyWaiter*>(node);
}

}  // namespace

void Notify::notify_slow(bool newest) noexcept {
  lock_.lock();
  detail::Waker waker = notify_locked(newest);
  lock_.unlock();
  waker.wake();  // after unlocking: the woken task may come straight back here
}

detail::Waker Notify::notify_locked(bool newest) noexcept {
  // The phase may have left WAITING since the caller looked (the last waiter
  // cancelled): then the permit is stored, as with nobody waiting.
  if (try_store_permit()) return {};
  // WAITING, and stable while we hold the lock (I1): a waiter is queued.
  NotifyWaiter* waiter = ring_pop(waiters_, newest);
  detail::Waker waker = std::move(waiter->waker);  // before publishing (I3)
  if (ring_empty(waiters_)) {
    // No lock-free transition can run from WAITING, so a plain store cannot
    // overwrite one. release, although WAITING -> EMPTY publishes nothing of
    // ours: a plain store ends the release sequence of notify_waiters()'
    // fetch_add, and a Notified whose acquire load reads this store must
    // still see what that notify_waiters() caller wrote (we took the lock
    // after it released it, so a release store carries that on).
    state_.store(with_phase(state_.load(std::memory_order_relaxed), kEmpty),
                 std::memory_order_release);
  }
  // release: pairs with the owner's acquire load (Notified::woken,
  // notified_now); the waiter may be freed from here on.
  waiter->notification.store(newest ? NotifyKind::kLast : NotifyKind::kOne,
                             std::memory_order_release);
  return waker;
}

void Notify::notify_waiters() noexcept {
  lock_.lock();
  const std::uint64_t current = state_.load(std::memory_order_relaxed);
  if (phase(current) != kWaiting) {
    // Nobody registered; Notifieds created before now complete when they
    // poll. fetch_add, not a store: the phase bits may change lock-free
    // meanwhile. release: pairs with the acquire loads that see the new
    // count (try_take_permit, register_waiter), so a Notified completed by
    // the count sees what we wrote before the call.
    state_.fetch_add(kOneCall, std::memory_order_release);
    lock_.unlock();
    return;
  }
  // WAITING: stable under the lock, so a plain store may replace the word.
  // Count + 1 and EMPTY, and the ring moves out, in one critical section
  // (I4). release: as for the fetch_add above.
  state_.store(with_phase(current + kOneCall, kEmpty), std::memory_order_release);
  NotifyLink guarded;
  ring_move_all(waiters_, guarded);
  detail::WakeList wakes;
  while (NotifyWaiter* waiter = ring_pop(guarded, /*newest=*/false)) {
    wakes.push(std::move(waiter->waker));  // before publishing (I3)
    // release: pairs with the owner's acquire load, as in notify_locked.
    waiter->notification.store(NotifyKind::kAll, std::memory_order_release);
    if (wakes.full()) {
      // The guarded ring stays consistent while unlocked: waiters in it
      // unlink themselves under the lock if destroyed or polled.
      lock_.unlock();
      wakes.wake_all();
      lock_.lock();
    }
  }
  lock_.unlock();
  wakes.wake_all();
}

bool Notify::register_waiter(Notified& notified, detail::Waker waker) noexcept {
  NotifyWaiter& waiter = notified.waiter_;
  detail::Waker old;  // dropped after unlocking (dropping runs task code)
  lock_.lock();
  // acquire: pairs with notify_waiters' release (when the count differs, we
  // complete on its behalf). The count cannot change while we hold the lock.
  const std::uint64_t current = state_.load(std::memory_order_acquire);
  if (notified.state_ == Notified::kInit) {
    if (calls(current) != notified.created_calls_) {
      lock_.unlock();
      notified.state_ = Notified::kDone;  // covered by a notify_waiters() (I4)
      return false;
    }
    // EMPTY -> WAITING to queue, or take a permit stored since our lock-free
    // look (NOTIFIED -> EMPTY). acquire: pairs with try_store_permit's
    // release when we take the permit; when we queue, nothing is published.
    const Transition t = transition(
        [](std::uint64_t s, std::uint64_t* next) {
          if (phase(s) == kWaiting) return false;  // already queued behind others
          *next = with_phase(s, phase(s) == kEmpty ? kWaiting : kEmpty);
          return true;
        },
        std::memory_order_acquire);
    if (t.changed && phase(t.seen) == kNotified) {
      lock_.unlock();
      notified.state_ = Notified::kDone;
      return false;
    }
    waiter.waker = std::move(waker);
    ring_push_back(waiters_, &waiter);
    notified.state_ = Notified::kRegistered;
    lock_.unlock();
    return true;
  }
  // kRegistered: registered before (by enable(), or an earlier await that was
  // interrupted). relaxed: notifications are stored under the lock we hold.
  if (waiter.notification.load(std::memory_order_relaxed) != NotifyKind::kNone) {
    lock_.unlock();
    notified.state_ = Notified::kDone;
    return false;
  }
  if (calls(current) != notified.created_calls_) {
    // Not completed, yet notify_waiters() was called since: it is in that
    // call's guarded ring, not yet reached. Complete now (I4).
    ring_unlink(&waiter);
    old = std::move(waiter.waker);
    lock_.unlock();
    notified.state_ = Notified::kDone;
    return false;
  }
  if (waker) old = std::exchange(waiter.waker, std::move(waker));
  lock_.unlock();
  return true;
}

void Notify::cancel(Notified& notified) noexcept {
  NotifyWaiter& waiter = notified.waiter_;
  // A broadcast completion has nothing to pass on, and the notifier has
  // finished with the waiter (I3). acquire: pairs with its release store.
  if (waiter.notification.load(std::memory_order_acquire) == NotifyKind::kAll) return;
  detail::Waker old;
  detail::Waker next;
  lock_.lock();
  // relaxed: notifications are stored under the lock we hold.
  const NotifyKind kind = waiter.notification.load(std::memory_order_relaxed);
  if (waiter.next != nullptr) {
    // Not completed: still in a ring (waiters_ or a guarded one).
    ring_unlink(&waiter);
    const std::uint64_t current = state_.load(std::memory_order_relaxed);
    if (ring_empty(waiters_) && phase(current) == kWaiting) {
      // I1. release: as in notify_locked (keeps notify_waiters()' writes
      // visible through this store).
      state_.store(with_phase(current, kEmpty), std::memory_order_release);
    }
  }
  old = std::move(waiter.waker);
  if (kind == NotifyKind::kOne || kind == NotifyKind::kLast) {
    // Woken but destroyed before it returned: pass it on (I5).
    next = notify_locked(kind == NotifyKind::kLast);
  }
  lock_.unlock();
  next.wake();
}

void Notify::notified_blocking() {
  if (detail::tls_context.scheduler)
    throw Error(errc::blocking_in_runtime, "Notify::notified_blocking on a runtime thread");
  Notified notified = this->notified();
  if (notified.try_complete_lock_free()) return;
  detail::ThreadParker& parker = detail::ThreadParker::current();
  if (!register_waiter(notified, parker.waker())) return;
  while (!notified.notified_now())
    parker.park();
}

}  // namespace volt
