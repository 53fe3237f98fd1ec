// volt/sync/barrier.hpp: n tasks meet, then all go on together; reusable.
//
//   volt::Barrier barrier(4);                  // 4 parties per generation
//   // in each of the 4 tasks:
//   volt::BarrierWaitResult r = co_await barrier.wait();
//   if (r.is_leader()) { /* exactly one of the 4 */ }
//
// Guarantees:
//  - Generations: every n-th arrival completes the current generation and
//    releases its n callers together; the next arrival starts the next
//    generation. A caller of generation g+1 is never released by generation
//    g, whatever the interleaving.
//  - Leader: exactly one caller per generation is the leader, the one whose
//    arrival completed it (as Tokio). It does not suspend; the other n-1 are
//    woken by it.
//  - Waiting allocates nothing: the waiter lives in the Wait operation (in
//    the awaiting frame), linked into the barrier's intrusive list.
//  - Cancellation (destroying a Wait that is waiting: abort, timeout,
//    select): if its generation has not completed yet the arrival is
//    withdrawn, the count goes back down, and the generation needs another
//    arrival to complete. If the generation completed already, the arrival
//    stays counted (the others were released with it) and the result is
//    simply dropped. Tokio's Barrier::wait does not define this; we choose
//    withdrawal so that a timed-out waiter does not complete a generation it
//    no longer takes part in.
//  - A timeout (or select) holding the Wait as an lvalue operand leaves it
//    queued, its arrival counted, when the timeout fires (the operand is the
//    caller's, as Tokio's `&mut fut` in a select loop); the usual
//    `timeout(d, barrier.wait())` destroys it and so withdraws.
//  - Awaiting a Wait again: once it completed, it gives the same
//    BarrierWaitResult at once, like a completed future, without arriving
//    again (a new arrival is a new wait()). If its wait was interrupted while
//    it still waited (the lvalue case above), the same task may await it
//    again and it keeps its one arrival.
//  - Released waiters resume on whichever worker the scheduler picks; the
//    leader carries on where it arrived (after a yield if its cooperative
//    budget is spent).
//  - wait() must be awaited in a runtime task; wait_blocking() is for plain
//    threads (errc::blocking_in_runtime on a runtime thread). Both kinds may
//    meet at the same barrier.
//  - Bad input: Barrier(0) throws volt::Error(errc::invalid_argument) (Tokio
//    treats 0 as 1; we prefer a clear error). Destroying the barrier while a
//    caller waits on it is a contract violation (undefined behaviour), as for
//    every primitive whose waiters live outside it. A Wait may be moved only
//    before it is awaited. Re-awaiting a Wait that still waits from a task
//    other than the one that first awaited it (its waker is that task's)
//    throws volt::Error(errc::invalid_handle).
//
// Protocol (src/sync/barrier.cpp): one spin lock guards the arrival count,
// the generation number and the FIFO list of waiters; each waiter records the
// generation it arrived in. The completing arrival advances the generation
// and releases, from the front, every waiter of an older generation: waker
// moved out, then `released` published, then woken after the lock is
// dropped. A Wait arrives at most once (its state goes idle -> queued or
// done, queued -> done, never back), so its waiter is linked at most once and
// `released`, once set, is never stale.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>

#include "volt/detail/intrusive_list.hpp"
#include "volt/detail/spin_lock.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/detail/waker.hpp"
#include "volt/error.hpp"
#include "volt/task/join_handle.hpp"

namespace volt {

class Barrier;

namespace detail {

// One waiting caller. `generation` and the links are guarded by the barrier's
// lock; `waker` is set before the waiter is linked and moved out by the
// releaser under the lock; `released` is the completion, stored last (release)
// by the releaser, read (acquire) by the owner. Once the owner sees it true
// the barrier never touches the waiter again.
struct BarrierWaiter : IntrusiveLink {
  std::atomic<bool> released{false};
  std::uint64_t generation = 0;
  Waker waker;
};

}  // namespace detail

// What a barrier wait gives back.
class BarrierWaitResult {
 public:
  // True for exactly one caller per generation: the one that completed it.
  bool is_leader() const noexcept { return leader_; }

 private:
  friend class Barrier;
  explicit BarrierWaitResult(bool leader) noexcept : leader_(leader) {}
  bool leader_;
};

class Barrier {
 public:
  // n callers per generation; n == 0 throws Error(errc::invalid_argument).
  explicit Barrier(std::size_t n);
  Barrier(const Barrier&) = delete;
  Barrier& operator=(const Barrier&) = delete;
  ~Barrier();

  std::size_t parties() const noexcept { return n_; }

  class [[nodiscard]] Wait {
   public:
    explicit Wait(Barrier& barrier) noexcept : barrier_(barrier) {}
    Wait(const Wait&) = delete;
    Wait& operator=(const Wait&) = delete;
    // Before it is awaited only (e.g. moved into a timeout).
    // Before it is awaited only (e.g. moved into a timeout): a queued or
    // completed Wait has arrived, and a moved copy would arrive again.
    Wait(Wait&& other) noexcept : barrier_(other.barrier_) {
      if (other.state_ != kIdle) std::terminate();
    }
    ~Wait() {
      if (state_ == kQueued) barrier_.withdraw(&waiter_);
    }

    bool await_ready() {
      switch (state_) {
        case kIdle:
          return false;  // arriving needs the lock: in await_suspend
        case kDone:
          return true;  // completed: the same result again
        case kQueued:
          // Awaited again after an interrupted wait. Released: done now.
          if (released(&waiter_)) return true;
          // Still linked, with the first task's waker: only that task may
          // carry on (another would never be woken).
          if (detail::current_task_or_throw() != owner_)
            throw Error(errc::invalid_handle, "Barrier::Wait: queued for another task");
          return false;
      }
      return false;
    }
    bool await_suspend(std::coroutine_handle<> self) {
      if (state_ == kQueued) {
        // Keep the one arrival: the linked waiter's waker already targets
        // this task (await_ready checked), and the waker and links belong to
        // the barrier's lock, so they are not touched here. Only where to
        // resume changes. A release after the check below leaves the task
        // notified; the poll that follows runs the check, which passes.
        detail::suspend_current(self, &released, &waiter_);
        return !released(&waiter_);
      }
      detail::TaskHeader* task = detail::suspend_current(self, &released, &waiter_);
      waiter_.waker = detail::make_task_waker(task);
      if (!barrier_.arrive(&waiter_)) {
        state_ = kQueued;
        owner_ = task;
        return true;
      }
      // We completed the generation: leader, ready now. Our own waker is not
      // needed (dropped here, outside the lock).
      leader_ = true;
      state_ = kDone;
      waiter_.waker.reset();
      // Ready, but this poll's budget is spent: go round the queue once first.
      if (detail::coop_try_consume()) return false;
      detail::yield_current(self);
      return true;
    }
    BarrierWaitResult await_resume() noexcept {
      // Resumed only once released (the check, or a re-await that saw it) or
      // as the leader: nothing of ours is left in the barrier.
      state_ = kDone;
      return BarrierWaitResult(leader_);
    }

   private:
    // kIdle -> kQueued (linked) or kDone (leader); kQueued -> kDone (seen
    // released). Never back: a Wait arrives once.
    enum State : unsigned char { kIdle, kQueued, kDone };
    static bool released(void* waiter) noexcept {
      // acquire: pairs with the releaser's store; see BarrierWaiter.
      return static_cast<detail::BarrierWaiter*>(waiter)->released.load(std::memory_order_acquire);
    }
    Barrier& barrier_;
    detail::BarrierWaiter waiter_;
    State state_ = kIdle;
    bool leader_ = false;
    detail::TaskHeader* owner_ = nullptr;  // the task whose waker waiter_ holds
  };

  // Arrives and waits for the generation to complete; co_await gives the
  // BarrierWaitResult.
  Wait wait() noexcept { return Wait(*this); }

  // Arrives and blocks the calling (non-runtime) thread until the generation
  // completes.
  BarrierWaitResult wait_blocking();

 private:
  // Counts the arrival of `waiter` (whose waker is set). True if it completed
  // the generation (the waiter was not linked and the others are woken);
  // false if it was linked to wait.
  bool arrive(detail::BarrierWaiter* waiter) noexcept;
  // A linked waiter's Wait is destroyed: unlink it and, if its generation is
  // still open, take its arrival back.
  void withdraw(detail::BarrierWaiter* waiter) noexcept;

  const std::size_t n_;
  detail::SpinLock lock_;
  std::size_t arrived_ = 0;                               // guarded by lock_; < n_
  std::uint64_t generation_ = 0;                          // guarded by lock_
  detail::IntrusiveList<detail::BarrierWaiter> waiters_;  // guarded by lock_; front oldest
};

// Tokio's paths (tokio::sync::Barrier, tokio::sync::BarrierWaitResult).
namespace sync {
using volt::Barrier;
using volt::BarrierWaitResult;
}  // namespace sync

}  // namespace volt
