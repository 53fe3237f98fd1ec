// volt/sync/notify.hpp: wakes one waiting task, or all of them, carrying no
// data (Tokio's Notify).
//
//   volt::Notify ready;
//   // consumer                               // producer
//   co_await ready.notified();                ready.notify_one();
//
//   // Broadcast: everyone waiting now, and every Notified made before the call.
//   ready.notify_waiters();
//
//   // Register first, then check a condition, then wait: no wake-up can fall
//   // between the check and the wait.
//   volt::Notify::Notified wait = ready.notified();
//   if (!wait.enable() && !queue_has_work()) co_await wait;
//
// Guarantees:
//  - notify_one() wakes the oldest waiting Notified (FIFO). With nobody waiting
//    it stores one permit, which the next notified() consumes without waiting.
//    At most one permit is stored: notify_one() twice with nobody waiting
//    leaves one. notify_last() is notify_one() for the newest waiter (LIFO).
//  - notify_waiters() completes every Notified registered at the time of the
//    call, and every Notified created (by notified()) before the call even if
//    it has not been awaited or enabled yet. It stores no permit and leaves a
//    stored permit alone.
//  - Waiting allocates nothing: the waiter lives in the Notified, i.e. in the
//    awaiting coroutine frame.
//  - Cancellation is destruction (abort, timeout, select, or just dropping a
//    Notified after enable()). A Notified that notify_one()/notify_last() chose
//    but that is destroyed before its co_await returned passes that
//    notification on to the next waiter, or stores it as the permit: no
//    wake-up is lost. A consumed permit is not given back.
//  - notify_one() with nobody waiting, and a Notified that finds the permit,
//    are lock-free (one CAS on the state word). Waiters are queued under a
//    spin lock; no waker runs while it is held.
//  - Notified::enable() is a poll that does not wait: true if the Notified is
//    complete (it took the stored permit, or notify_waiters() was called after
//    it was created, or it was woken since it registered); otherwise it is
//    registered, so later notify_one()/notify_waiters() calls reach it (and
//    co_await then returns at once). Awaiting or enabling a completed Notified
//    again completes at once.
//  - co_await on a Notified must run inside a runtime task; a task woken
//    resumes on whichever worker polls it. notified_blocking() is for plain
//    threads (errc::blocking_in_runtime on a runtime thread).
//  - No bad input: every call is valid in every state.
// Preconditions (undefined behaviour otherwise): the Notify outlives every
// Notified made from it; a Notified is moved only before it is enabled or
// awaited (moving one that is registered terminates), and is awaited by one
// task at a time.
//
// Protocol (src/sync/notify.cpp has the argument): one atomic word holds the
// phase (EMPTY / WAITING / NOTIFIED = the permit) and, above it, a count of
// notify_waiters() calls that every Notified samples when it is created.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <utility>

#include "volt/detail/spin_lock.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/detail/waker.hpp"
#include "volt/task/join_handle.hpp"

namespace volt {

namespace detail {

// A link of Notify's waiter ring. The ring is circular around a sentinel
// (Notify's, or notify_waiters()'s local one), so a waiter can unlink itself
// without knowing which of the two rings it is in. Guarded by Notify::lock_;
// next == nullptr means "in no ring".
struct NotifyLink {
  NotifyLink* prev = nullptr;
  NotifyLink* next = nullptr;
};

// What completed a waiter; written once, by the notifier, under the lock,
// after it unlinked the waiter and took its waker.
enum class NotifyKind : std::uint8_t { kNone, kOne, kLast, kAll };

// One registered Notified.
struct NotifyWaiter : NotifyLink {
  Waker waker;  // guarded by Notify::lock_ while linked; may be empty (enable())
  // kNone until a notifier completes the waiter. Release store by the
  // notifier (after which it never touches the waiter again), acquire loads
  // by the owner (lock-free) or relaxed loads under the lock.
  std::atomic<NotifyKind> notification{NotifyKind::kNone};
};

}  // namespace detail

class Notify {
 public:
  class Notified;

  Notify() noexcept { waiters_.prev = waiters_.next = &waiters_; }
  Notify(const Notify&) = delete;
  Notify& operator=(const Notify&) = delete;
  ~Notify() = default;  // precondition: no Notified of it is alive

  // Wakes the oldest waiter, or stores the permit if nobody waits.
  void notify_one() noexcept {
    if (try_store_permit()) return;
    notify_slow(/*newest=*/false);
  }
  // Wakes the newest waiter, or stores the permit if nobody waits.
  void notify_last() noexcept {
    if (try_store_permit()) return;
    notify_slow(/*newest=*/true);
  }
  // Completes every registered Notified and every Notified created before
  // this call. Stores no permit.
  void notify_waiters() noexcept;

  // A future notification; co_await it (gives void), or enable() it.
  Notified notified() noexcept;

  // Blocks the calling (non-runtime) thread until notified, consuming the
  // permit if one is stored.
  void notified_blocking();

 private:
  // ---- the state word ----
  // bits 0-1: phase. kEmpty: no permit, no waiter. kWaiting: the waiter ring
  //           is not empty (set and cleared only under lock_). kNotified: the
  //           permit is stored (set lock-free by notify_one/notify_last,
  //           consumed lock-free by a Notified).
  // bits 2-63: notify_waiters() calls, modulo 2^62 (compared for equality
  //           only, so wrapping is harmless); changed only under lock_.
  // Initial value 0: empty, no calls yet.
  static constexpr std::uint64_t kEmpty = 0;
  static constexpr std::uint64_t kWaiting = 1;
  static constexpr std::uint64_t kNotified = 2;
  static constexpr std::uint64_t kPhaseMask = 3;
  static constexpr std::uint64_t kOneCall = 4;  // one notify_waiters() call
  static_assert((kOneCall & kPhaseMask) == 0 && kOneCall == kPhaseMask + 1);

  static constexpr std::uint64_t phase(std::uint64_t s) noexcept { return s & kPhaseMask; }
  static constexpr std::uint64_t calls(std::uint64_t s) noexcept { return s & ~kPhaseMask; }
  static constexpr std::uint64_t with_phase(std::uint64_t s, std::uint64_t p) noexcept {
    return calls(s) | p;
  }

  struct Transition {
    std::uint64_t seen;  // the value the decision was made on
    bool changed;        // the new value was stored
  };
  // The one CAS loop on state_: `next(current, &replacement)` returns whether
  // to change the word. acquire loads: every caller acts on what the value it
  // saw publishes (the permit's release, a notify_waiters() count's release).
  template <class Next>
  Transition transition(Next next, std::memory_order success) noexcept {
    std::uint64_t current = state_.load(std::memory_order_acquire);
    for (;;) {
      std::uint64_t replacement = 0;
      if (!next(current, &replacement)) return {current, false};
      if (state_.compare_exchange_weak(current, replacement, success, std::memory_order_acquire))
        return {current, true};
    }
  }

  // EMPTY or NOTIFIED -> NOTIFIED. False, changing nothing, if the phase is
  // WAITING (a waiter must be woken instead, under the lock). release: pairs
  // with the acquire of the CAS that consumes the permit (try_take_permit,
  // or register_waiter's under the lock), so what the notifier wrote before
  // is visible to whoever the permit completes. A NOTIFIED -> NOTIFIED CAS is
  // still made for that reason (returning on "already set" would publish
  // nothing).
  bool try_store_permit() noexcept {
    return transition(
               [](std::uint64_t s, std::uint64_t* next) {
                 if (phase(s) == kWaiting) return false;
                 *next = with_phase(s, kNotified);
                 return true;
               },
               std::memory_order_release)
        .changed;
  }

  enum class [[nodiscard]] Take{kTaken, kBroadcast, kNothing};
  // The lock-free poll of a Notified created when the call count was
  // `created_calls`: kBroadcast if notify_waiters() was called since (the
  // permit is left for others), else NOTIFIED -> EMPTY (kTaken), else
  // kNothing.
  Take try_take_permit(std::uint64_t created_calls) noexcept {
    const Transition t = transition(
        [created_calls](std::uint64_t s, std::uint64_t* next) {
          if (calls(s) != created_calls || phase(s) != kNotified) return false;
          *next = with_phase(s, kEmpty);
          return true;
        },
        std::memory_order_acquire);  // pairs with try_store_permit's release
    if (t.changed) return Take::kTaken;
    return calls(t.seen) != created_calls ? Take::kBroadcast : Take::kNothing;
  }

  // The rest lives in src/sync/notify.cpp.
  void notify_slow(bool newest) noexcept;
  // Under lock_: wakes a waiter (oldest or newest) or stores the permit;
  // returns the waker to call once the lock is released.
  detail::Waker notify_locked(bool newest) noexcept;
  // Registers (or re-registers with a new waker) a Notified that did not
  // complete lock-free. True if it is now waiting; false if it completed.
  // An empty `waker` keeps the waker the waiter already has.
  bool register_waiter(Notified& notified, detail::Waker waker) noexcept;
  // A registered Notified is destroyed: unlink it, pass a notification on.
  void cancel(Notified& notified) noexcept;

  std::atomic<std::uint64_t> state_{0};
  detail::SpinLock lock_;
  detail::NotifyLink waiters_;  // sentinel of the waiter ring; guarded by lock_
};

class [[nodiscard]] Notify::Notified {
 public:
  // Only before it is enabled or awaited (e.g. moved into a timeout).
  Notified(Notified&& other) noexcept
      : notify_(other.notify_), created_calls_(other.created_calls_), state_(other.state_) {
    if (state_ == kRegistered) std::terminate();  // a registered waiter cannot move
  }
  Notified(const Notified&) = delete;
  Notified& operator=(const Notified&) = delete;
  Notified& operator=(Notified&&) = delete;
  ~Notified() {
    if (state_ == kRegistered) notify_->cancel(*this);
  }

  // Polls without waiting (see the header contract). True once complete.
  bool enable() noexcept {
    switch (state_) {
      case kDone:
        return true;
      case kInit:
        if (try_complete_lock_free()) return true;
        return !notify_->register_waiter(*this, detail::Waker());
      case kRegistered:
        if (notified_now()) return true;
        // Not woken: under the lock, see whether a notify_waiters() in
        // progress covers it (Tokio's enable does the same).
        return !notify_->register_waiter(*this, detail::Waker());
    }
    return false;
  }

  // The budget before the notification (as Semaphore::Acquire): a task whose
  // budget is spent yields holding nothing. Taking the permit (or a
  // notify_one's choice) first and then yielding would lose it if the
  // Notified were destroyed during that yield (a select or timeout that
  // lost): it is consumed, yet never returned.
  bool await_ready() noexcept {
    if (state_ == kInit) {
      if (!detail::coop_try_consume()) {
        yield_first_ = true;
        return false;
      }
      return try_complete_lock_free();
    }
    if (state_ == kRegistered) {
      // Still kRegistered until await_resume, so that a destruction before
      // then passes a notify_one's notification on (cancel()).
      return woken(&waiter_) && detail::coop_try_consume();
    }
    return detail::coop_try_consume();  // kDone: awaited again
  }
  bool await_suspend(std::coroutine_handle<> self) {
    if (std::exchange(yield_first_, false)) {
      // The first attempt happens in the check, at the next poll.
      detail::yield_current(self, &attempt_after_yield, this);
      return true;
    }
    if (state_ == kRegistered && woken(&waiter_)) {
      detail::yield_current(self, &woken, &waiter_);  // notified; budget spent
      return true;
    }
    if (state_ != kDone) {
      detail::TaskHeader* task = detail::suspend_current(self, &woken, &waiter_);
      if (notify_->register_waiter(*this, detail::make_task_waker(task))) return true;
    }
    // Complete, but this poll's budget is spent: go round the queue once.
    if (detail::coop_try_consume()) return false;
    detail::yield_current(self);
    return true;
  }
  void await_resume() noexcept {
    // Resumed from waiting: the readiness check (woken) passed, so a
    // notifier completed the waiter and unlinked it.
    if (state_ == kRegistered) notified_now();
  }

 private:
  friend class Notify;
  Notified(Notify& notify, std::uint64_t created_calls) noexcept
      : notify_(&notify), created_calls_(created_calls) {}

  enum State : std::uint8_t {
    kInit,        // not registered
    kRegistered,  // in a waiter ring (or completed there by a notifier, not yet seen)
    kDone,        // complete; the notification is consumed
  };

  bool try_complete_lock_free() noexcept {
    if (notify_->try_take_permit(created_calls_) == Take::kNothing) return false;
    state_ = kDone;
    return true;
  }
  // kRegistered: did a notifier complete us? acquire: pairs with the notifier's
  // release store of `notification` (its writes before the notify are
  // visible, and it has finished with the waiter).
  bool notified_now() noexcept {
    if (waiter_.notification.load(std::memory_order_acquire) == detail::NotifyKind::kNone)
      return false;
    state_ = kDone;
    return true;
  }
  // The check after a budget yield: the first attempt, then registering
  // (the task is current); once registered, whether a notifier completed it.
  static bool attempt_after_yield(void* self) noexcept {
    Notified& n = *static_cast<Notified*>(self);
    switch (n.state_) {
      case kInit:
        if (n.try_complete_lock_free()) return true;
        return !n.notify_->register_waiter(
            n, detail::make_task_waker(detail::tls_context.current_task));
      case kRegistered:
        return woken(&n.waiter_);
      case kDone:
        break;
    }
    return true;
  }
  // The readiness check given to suspend_current (may run on any worker
  // that polls the task).
  static bool woken(void* waiter) noexcept {
    // acquire: as in notified_now.
    return static_cast<detail::NotifyWaiter*>(waiter)->notification.load(
               std::memory_order_acquire) != detail::NotifyKind::kNone;
  }

  Notify* notify_;
  std::uint64_t created_calls_;  // calls(state_) when notified() made it
  detail::NotifyWaiter waiter_;
  State state_ = kInit;       // owner only
  bool yield_first_ = false;  // await_ready found the budget spent
};

inline Notify::Notified Notify::notified() noexcept {
  // acquire: pairs with notify_waiters()' release RMW. Coherence alone
  // places this load against that RMW (one that happens before it is seen,
  // and does not cover this Notified; one it happens before is not seen, and
  // does), but the caller's next loads must not move above it: in
  //   auto w = n.notified(); if (!flag.load(acquire)) co_await w;
  // against `flag = true; n.notify_waiters();`, a relaxed load here could
  // see the new count while the flag load, satisfied earlier on a weakly
  // ordered CPU, sees false: w is not covered and nothing else wakes it.
  // With acquire, seeing the new count means seeing the flag.
  return Notified(*this, calls(state_.load(std::memory_order_acquire)));
}

// Tokio's path (tokio::sync::Notify).
namespace sync {
using volt::Notify;
}  // namespace sync

}  // namespace volt
