// Barrier: arrivals, generations, release and withdrawal.
//
// State, all guarded by lock_:
//   arrived_     arrivals counted in the open generation, 0 <= arrived_ < n_.
//   generation_  the open generation's number; only ever incremented.
//   waiters_     linked waiters, in arrival order. Each records the
//                generation it arrived in.
//
// Steps:
//   arrive   under the lock: if arrived_ + 1 == n_ the caller completes the
//            generation (generation_ += 1, arrived_ = 0), is the leader and
//            releases; otherwise arrived_ += 1 and the waiter is linked at
//            the back with generation = generation_.
//   release  still under the lock, from the front: while the front waiter's
//            generation is older than generation_, unlink it, move its waker
//            into a WakeList, then publish `released` (release store). Wake
//            after unlocking. When the WakeList is full, unlock, wake, relock
//            and go on (below).
//   re-await a Wait awaited again arrives nothing: once done it returns its
//            result; still queued, it only re-records where its task resumes
//            (same waker, same link), without the lock.
//   withdraw a destroyed Wait, under the lock: if the waiter is still linked,
//            unlink it, and if its generation is generation_ (still open)
//            decrement arrived_. Not linked means released (unlink and
//            publish happen in one critical section), so nothing is left.
//
// Invariants:
//   I1  The list is sorted by generation (waiters are appended with the
//       current generation, which only grows), and only its front part can
//       belong to completed generations.
//   I2  A waiter is released only when its generation has completed:
//       release takes waiters whose generation differs from generation_,
//       i.e. older ones (I1); a waiter of the open generation stays. So a
//       caller of generation g+1 is never released by generation g.
//   I3  arrived_ equals the number of linked waiters of the open generation:
//       arrive adds one and links one, completion resets it when every
//       earlier waiter belongs to a completed generation, withdraw unlinks
//       one and subtracts one only if it was of the open generation.
//   I4  Exactly one leader per generation: the arrival that took arrived_ to
//       n_ - 1 + 1, inside one critical section.
//
// The WakeList window: a generation of more than WakeList::kCapacity waiters
// is released in batches, dropping the lock between them. Meanwhile the
// remaining waiters of completed generations are still linked, at the front
// (I1). Arrivals append behind them; a withdrawal of one of them unlinks it
// without touching arrived_ (its generation is not generation_); another
// completing arrival may release them too (its loop takes every older
// waiter). Whoever relocks first carries on; nothing is released twice since
// each is unlinked in the critical section that publishes it.
#include "volt/sync/barrier.hpp"

#include <mutex>

#include "detail/thread_parker.hpp"
#include "volt/detail/wake_list.hpp"

namespace volt {

using detail::BarrierWaiter;

Barrier::Barrier(std::size_t n) : n_(n) {
  if (n == 0) throw Error(errc::invalid_argument, "Barrier: zero parties");
}

Barrier::~Barrier() = default;

bool Barrier::arrive(BarrierWaiter* waiter) noexcept {
  lock_.lock();
  if (arrived_ + 1 < n_) {
    ++arrived_;
    waiter->generation = generation_;
    waiters_.push_back(waiter);
    lock_.unlock();
    return false;
  }
  // Ours completes the generation (I4). Every linked waiter is now of a
  // completed generation (I3 with arrived_ == n_ - 1).
  ++generation_;
  arrived_ = 0;
  detail::WakeList wakes;
  while (BarrierWaiter* front = waiters_.front()) {
    if (front->generation == generation_) break;  // a newer arrival (I1): stays (I2)
    waiters_.pop_front();
    wakes.push(std::move(front->waker));  // copy before publish
    // release: pairs with the acquire in Wait::released / withdraw /
    // wait_blocking; after this store the waiter may be freed.
    front->released.store(true, std::memory_order_release);
    if (wakes.full()) {
      // The window described at the top: the state is consistent here.
      lock_.unlock();
      wakes.wake_all();
      lock_.lock();
    }
  }
  lock_.unlock();
  wakes.wake_all();
  return true;
}

void Barrier::withdraw(BarrierWaiter* waiter) noexcept {
  // acquire: pairs with the releaser's store. Seen true: released, and the
  // releaser no longer touches the waiter. Never stale: the waiter arrived
  // once (a Wait never arrives again, see barrier.hpp), so true means this
  // arrival was released.
  if (waiter->released.load(std::memory_order_acquire)) return;
  std::lock_guard guard(lock_);
  if (!waiters_.remove(waiter)) return;               // released since the load above
  if (waiter->generation == generation_) --arrived_;  // still open: not counted (I3)
  // Otherwise its generation completed during a release window: it stays
  // counted, and the releaser no longer finds it.
}

BarrierWaitResult Barrier::wait_blocking() {
  if (detail::tls_context.scheduler)
    throw Error(errc::blocking_in_runtime, "Barrier::wait_blocking on a runtime thread");
  detail::ThreadParker& parker = detail::ThreadParker::current();
  BarrierWaiter waiter;
  waiter.waker = parker.waker();
  if (arrive(&waiter)) return BarrierWaitResult(true);
  while (!waiter.released.load(std::memory_order_acquire))  // pairs with the releaser's store
    parker.park();
  return BarrierWaitResult(false);
}

}  // namespace volt
