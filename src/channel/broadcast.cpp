// broadcast::detail::Core: the waiting half of the broadcast channel (queueing
// a receive, waking every waiter on a send or close, withdrawing a waiter).
// The ring and its slot protocol are templates in
// include/volt/channel/broadcast.hpp.
//
// State (all under Core::lock):
//   tail       the position the next send writes; a receiver at `next` has
//              something to receive (a value, or lag) iff next != tail
//   closed     the last Sender is gone
//   waiters_   sentinel of a circular ring of Waiters, oldest after the
//              sentinel. A send that finds it non-empty moves the whole ring
//              onto a sentinel of its own (the "guarded" ring) and drains
//              that in WakeList batches, unlocking between batches to wake;
//              a waiter destroyed meanwhile unlinks itself from whichever
//              ring it is in (circular: unlinking needs only the node).
//   waiter     links and waker under lock; `woken` written once per queueing,
//              by the send/close that unlinks it.
//
// Invariants:
//   W1 A waiter is queued only under the lock and only while next == tail
//      and !closed (enqueue checks both there). Every send advances tail and
//      every close sets closed under the same lock, and each empties the ring
//      (all of it, before its critical section ends: the guarded ring is the
//      send's), so a queued receiver is woken by the first send or close
//      after it queued: no lost wake-up. A woken receiver finds next != tail
//      or closed, since only it advances its own position.
//   W2 The waker is moved out of the waiter, and the waiter unlinked, before
//      the release store of `woken`; the waking thread never touches the
//      waiter after that store (its owner may free it at once).
//   W3 Wakers run after the lock is released (a woken task may come straight
//      back to the lock).
//
// Races considered:
//   - A Recv is destroyed while its waiter is in a send's guarded ring and the
//     send is unlocked between batches: cancel() unlinks it under the lock;
//     the send only ever pops what is still linked.
//   - A Recv is destroyed just as a send wakes it: cancel() sees woken (lock-
//     free, or under the lock with the waiter unlinked) and does nothing; the
//     wake-up only says "retry", so no value is lost with it.
//   - A woken receiver queues again during a send's unlocked gap: it goes
//     into waiters_, not the guarded ring, and is woken by the next send (it
//     queued because it had seen this send's value already).
#include "volt/channel/broadcast.hpp"

#include <utility>

#include "detail/waiter_ring.hpp"
#include "volt/detail/wake_list.hpp"

namespace volt::broadcast::detail {

namespace {

using volt::detail::ring_empty;
using volt::detail::ring_move_all;
using volt::detail::ring_push_back;
using volt::detail::ring_unlink;

// ---- the circular waiter ring (all under Core::lock) ----

Waiter* ring_pop_front(WaiterLink& sentinel) noexcept {
  if (ring_empty(sentinel)) return nullptr;
  WaiterLink* node = sentinel.next;
  ring_unlink(node);
  return static_cast<Waiter*>(node);
}

}  // namespace

void Core::wake_all_and_unlock() noexcept {
  // Only the waiters queued before this send (or close) are its to wake (W1);
  // the ring is moved out so that waiters queueing while we are unlocked
  // between batches cannot keep this loop going.
  WaiterLink guarded;
  ring_move_all(waiters_, guarded);
  volt::detail::WakeList wakes;
  while (Waiter* waiter = ring_pop_front(guarded)) {
    wakes.push(std::move(waiter->waker));  // before publishing (W2)
    // release: pairs with the owner's acquire loads (Recv::ready_check,
    // ~Recv, recv_blocking); the waiter may be freed from here on.
    waiter->woken.store(true, std::memory_order_release);
    if (wakes.full()) {
      // The guarded ring stays consistent while unlocked: waiters in it
      // unlink themselves under the lock if destroyed.
      lock.unlock();
      wakes.wake_all();
      lock.lock();
    }
  }
  lock.unlock();
  wakes.wake_all();  // W3
}

bool Core::enqueue(Waiter& waiter, volt::detail::Waker waker, std::uint64_t next) noexcept {
  lock.lock();
  if (next != tail || closed) {
    lock.unlock();
    return false;  // `waker` is dropped on return, after unlocking
  }
  waiter.waker = std::move(waker);
  ring_push_back(waiters_, &waiter);
  lock.unlock();
  return true;
}

void Core::cancel(Waiter& waiter) noexcept {
  volt::detail::Waker old;  // dropped after unlocking (dropping runs task code)
  lock.lock();
  if (waiter.next != nullptr) ring_unlink(&waiter);  // not woken: still in a ring
  old = std::move(waiter.waker);
  lock.unlock();
}

void Core::close() noexcept {
  lock.lock();
  closed = true;
  if (has_waiters_locked()) {
    wake_all_and_unlock();
  } else {
    lock.unlock();
  }
}

}  // namespace volt::broadcast::detail
