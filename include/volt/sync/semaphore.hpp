// volt/sync/semaphore.hpp: a counting semaphore whose waiters never allocate.
//
//   volt::Semaphore sem(2);
//   volt::Expected<volt::SemaphorePermit> p = co_await sem.acquire();  // waits
//   if (auto q = sem.try_acquire()) { ... }                             // never waits
//   // permits go back when the SemaphorePermit is destroyed
//
//   // Owned permits keep the semaphore alive (Tokio's Arc<Semaphore>):
//   auto shared = std::make_shared<volt::Semaphore>(4);
//   volt::Expected<volt::OwnedSemaphorePermit> o =
//       co_await volt::Semaphore::acquire_owned(shared);
//   volt::spawn(work(std::move(*o)));  // the task may outlive `shared`
//
//   std::uint64_t gone = sem.forget_permits(3);  // shrinks the count now
//   p->merge(std::move(*q));                     // one permit of p+q permits
//
// Guarantees:
//  - Waiting allocates nothing: the waiter lives in the Acquire operation (in
//    the awaiting frame). Destroying it while it waits (abort, timeout,
//    select) withdraws it and gives back any permits it had been granted.
//  - FIFO (Fairness::kFifo, the default, Tokio's): permits go to waiters in
//    arrival order; a waiter that needs n permits is granted them as they
//    are released (partial grants), and later waiters wait behind it even
//    if they need fewer. Permits never sit in the counter while a waiter
//    queues: release() hands them straight to the oldest waiter.
//  - Barging (Fairness::kBarging, what Mutex and RwLock use): release() puts
//    the permits in the counter and wakes the oldest waiter to take them; a
//    running acquire (or try_acquire, forget_permits) may take them first.
//    Waiters are still woken oldest first, and one passed over
//    kStrictAfter (3) times in a row makes the semaphore FIFO until it is
//    served. A lock that running tasks release and retake then costs no
//    task switch per acquisition (with FIFO hand-off, once a queue forms
//    the releaser's next acquire queues behind the waiter it woke, for
//    good: 40 ns an acquisition against 12 in mutex_contended at 4 workers
//    on 2 cores). Only the oldest waiter is granted part of what it needs.
//      volt::Semaphore lock_like(1, volt::Semaphore::Fairness::kBarging);
//  - try_acquire never waits and never takes the lock.
//  - close(): waiting and later acquires fail with errc::closed; permits held
//    stay valid and may still be released. try_acquire then fails.
//  - Bad input: acquire(n) or try_acquire(n) with n > kMaxPermits, a
//    constructor or release() that would take the count past kMaxPermits:
//    volt::Error(errc::invalid_argument), nothing changed. acquire(0)
//    succeeds at once with an empty permit while the semaphore is open, and
//    fails with errc::closed once it is closed, as every acquire does.
//  - An Acquire interrupted while it waits (an lvalue operand of a timeout
//    that expired) keeps its place in the queue; the same task may await it
//    again, or destroy it to leave the queue.
//  - acquire() must be awaited in a runtime task; acquire_blocking() is for
//    plain threads (errc::blocking_in_runtime on a runtime thread).
//  - Lifetime: a SemaphorePermit and an Acquire point at their Semaphore,
//    which must outlive them. acquire_owned()/try_acquire_owned() take a
//    std::shared_ptr<Semaphore>: the AcquireOwned operation and the
//    OwnedSemaphorePermit it gives hold a reference, so the semaphore lives
//    until the last of them is destroyed (also when the runtime destroys a
//    task holding one at shutdown, after every other reference is gone). A
//    null shared_ptr is Error(errc::invalid_argument).
//  - forget_permits(n) takes min(n, available) permits out of the count for
//    good (lock-free, also on a closed semaphore) and returns how many; it
//    never waits and never takes permits from a waiter or a holder.
//  - Permits can be combined and divided: merge(other) moves other's permits
//    into this permit (the same semaphore required: permits of another
//    semaphore are Error(errc::invalid_argument), both left unchanged; an
//    empty permit merges with anything); split(n) moves n of them into a new
//    permit. Neither touches the semaphore.
//
// Protocol (src/sync/semaphore.cpp has the full argument; tests/model/
// semaphore.pml checks it): the seed's two-tier release (a lock-free fast
// waiter slot, then a mutex-guarded FIFO list), with the seed's races fixed:
// a release that found the slot empty re-checks it under the mutex; only the
// oldest waiter, and only one needing a single permit, uses the slot (so no
// partial grant happens outside the mutex and no newcomer overtakes); a
// waiter's completion is published after its waker is copied and it is
// unlinked; cancelling a waiter that a releaser holds out of the slot waits
// for that releaser. Barging mode (tests/model/semaphore_barging.pml): a
// woken bit in the same word coalesces the wake-ups (one waiter retries at a
// time, and passes the wake-up on), and a strict bit turns the hand-off
// protocol back on for a starving waiter's turn.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include "volt/detail/intrusive_list.hpp"
#include "volt/detail/spin_lock.hpp"
#include "volt/detail/spin_wait.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/detail/waker.hpp"
#include "volt/error.hpp"
#include "volt/expected.hpp"
#include "volt/task/join_handle.hpp"

namespace volt {

class Semaphore;

namespace detail {

class WakeList;

// One waiting acquire. `state` is the number of permits still needed, with
// kClosedBit set if the semaphore closed first; 0 means granted in full.
// Written by whoever owns the waiter (its Acquire, or a releaser that took it
// out of the fast slot or holds the mutex), published with release stores;
// the Acquire reads it with acquire loads. Once the owner sees 0 or
// kClosedBit, no releaser touches the waiter again (they copy the waker
// first).
struct SemaphoreWaiter : IntrusiveLink {
  static constexpr std::uint64_t kClosedBit = std::uint64_t{1} << 63;
  // Taken out of the queue and woken to try again (relaxed mode: the permits
  // went to the count, see src/sync/semaphore.cpp); the rest of the word is
  // still the number needed. Only the owner clears it (retry_locked).
  static constexpr std::uint64_t kRetryBit = std::uint64_t{1} << 62;
  static constexpr std::uint64_t kNeededMask = kRetryBit - 1;
  std::atomic<std::uint64_t> state{0};
  std::uint64_t requested = 0;
  Waker waker;  // set before the waiter is published (under the mutex)
  // Under the mutex, by the owner's retries: how many in a row found too few
  // permits (Semaphore::kStrictAfter of them make it starving).
  std::uint32_t failed_retries = 0;
  // Set (under the mutex) when this waiter turned the semaphore strict; its
  // owner ends strict mode when its turn ends (served, closed or withdrawn).
  bool starving = false;
  bool finished() const noexcept {
    const std::uint64_t s = state.load(std::memory_order_acquire);
    return s == 0 || (s & kClosedBit);
  }
};

}  // namespace detail

// Permits held from a Semaphore; given back when destroyed (unless forgotten).
class [[nodiscard]] SemaphorePermit {
 public:
  SemaphorePermit() noexcept = default;
  SemaphorePermit(SemaphorePermit&& other) noexcept
      : semaphore_(std::exchange(other.semaphore_, nullptr)),
        permits_(std::exchange(other.permits_, 0)) {}
  SemaphorePermit& operator=(SemaphorePermit&& other) noexcept {
    if (this != &other) {
      reset();
      semaphore_ = std::exchange(other.semaphore_, nullptr);
      permits_ = std::exchange(other.permits_, 0);
    }
    return *this;
  }
  ~SemaphorePermit() { reset(); }

  std::uint64_t permits() const noexcept { return permits_; }
  // Keeps the permits taken: the semaphore's count is reduced for good.
  void forget() noexcept {
    semaphore_ = nullptr;
    permits_ = 0;
  }
  // Gives the permits back now.
  void reset() noexcept;
  // Moves n of these permits into a new permit (RwLock's downgrade).
  // Throws invalid_argument, changing nothing, if n > permits().
  SemaphorePermit split(std::uint64_t n) {
    if (n > permits_) throw Error(errc::invalid_argument, "SemaphorePermit::split: more than held");
    permits_ -= n;
    return SemaphorePermit(semaphore_, n);
  }
  // Moves other's permits into this one (Tokio's merge); other is left
  // empty. Both must come from the same semaphore, unless one of them holds
  // no permits: otherwise throws invalid_argument, changing neither.
  //   auto a = sem.try_acquire(2), b = sem.try_acquire(1);
  //   a->merge(std::move(*b));   // a->permits() == 3, b->permits() == 0
  void merge(SemaphorePermit&& other) {
    if (this == &other || other.permits_ == 0) return;
    if (permits_ != 0 && other.semaphore_ != semaphore_)
      throw Error(errc::invalid_argument, "SemaphorePermit::merge: permits of another semaphore");
    semaphore_ = other.semaphore_;
    permits_ += std::exchange(other.permits_, 0);
    other.semaphore_ = nullptr;
  }
  // The semaphore these permits go back to (null when empty by default
  // construction, move or forget()).
  Semaphore* semaphore() const noexcept { return semaphore_; }

 private:
  friend class Semaphore;  // only a semaphore hands out permits
  SemaphorePermit(Semaphore* semaphore, std::uint64_t permits) noexcept
      : semaphore_(semaphore), permits_(permits) {}

  Semaphore* semaphore_ = nullptr;
  std::uint64_t permits_ = 0;
};

// Permits held from a Semaphore reached through a std::shared_ptr: the
// permit holds a reference, so the semaphore lives at least as long as the
// permit. Otherwise as SemaphorePermit. Given back (then the reference
// dropped) when destroyed, unless forgotten.
class [[nodiscard]] OwnedSemaphorePermit {
 public:
  OwnedSemaphorePermit() noexcept = default;
  OwnedSemaphorePermit(OwnedSemaphorePermit&& other) noexcept
      : semaphore_(std::move(other.semaphore_)), permits_(std::exchange(other.permits_, 0)) {}
  OwnedSemaphorePermit& operator=(OwnedSemaphorePermit&& other) noexcept {
    if (this != &other) {
      reset();
      semaphore_ = std::move(other.semaphore_);
      permits_ = std::exchange(other.permits_, 0);
    }
    return *this;
  }
  ~OwnedSemaphorePermit() { reset(); }

  std::uint64_t permits() const noexcept { return permits_; }
  // Keeps the permits taken (the count is reduced for good) and drops the
  // reference.
  void forget() noexcept {
    permits_ = 0;
    semaphore_.reset();
  }
  // Gives the permits back now, then drops the reference (which may destroy
  // the semaphore: nothing touches it after the release returns).
  void reset() noexcept;
  // Moves n of these permits into a new permit sharing the semaphore.
  // Throws invalid_argument, changing nothing, if n > permits().
  OwnedSemaphorePermit split(std::uint64_t n) {
    if (n > permits_)
      throw Error(errc::invalid_argument, "OwnedSemaphorePermit::split: more than held");
    permits_ -= n;
    return OwnedSemaphorePermit(semaphore_, n);
  }
  // As SemaphorePermit::merge: the same semaphore (the same object, whatever
  // the shared_ptr's control block) unless one side is empty; otherwise
  // invalid_argument, changing neither.
  void merge(OwnedSemaphorePermit&& other) {
    if (this == &other || other.permits_ == 0) return;
    if (permits_ != 0 && other.semaphore_.get() != semaphore_.get())
      throw Error(errc::invalid_argument,
                  "OwnedSemaphorePermit::merge: permits of another semaphore");
    if (permits_ == 0) semaphore_ = std::move(other.semaphore_);
    permits_ += std::exchange(other.permits_, 0);
    other.semaphore_.reset();
  }
  // The reference this permit holds (empty when the permit is).
  const std::shared_ptr<Semaphore>& semaphore() const noexcept { return semaphore_; }

 private:
  friend class Semaphore;  // only a semaphore hands out permits
  OwnedSemaphorePermit(std::shared_ptr<Semaphore> semaphore, std::uint64_t permits) noexcept
      : semaphore_(std::move(semaphore)), permits_(permits) {}

  std::shared_ptr<Semaphore> semaphore_;
  std::uint64_t permits_ = 0;
};

class Semaphore {
 public:
  // The count, shifted left by four for the closed, queued, woken and strict
  // bits, fits in 64 bits (Tokio's bound is 2^61 - 1, with three bits).
  static constexpr std::uint64_t kMaxPermits = (std::uint64_t{1} << 59) - 1;
  // A queued waiter woken to retry that finds too few permits this many
  // times in a row (running acquirers took them first) turns the semaphore
  // strict until it is served (src/sync/semaphore.cpp, "Modes"). The
  // channel's senders use the same bound (kStrictAfter there).
  static constexpr std::uint32_t kStrictAfter = 3;

  // How permits released while waiters queue are given out.
  enum class Fairness {
    // Tokio's semaphore: straight to the oldest waiter (hand-off), partial
    // grants included; nobody overtakes a queued waiter.
    kFifo,
    // To the count, and the oldest waiter is woken to take them: a running
    // acquire may take them first (barging), so a lock released and retaken
    // by running tasks does not cost a task switch per acquisition. A
    // waiter passed over kStrictAfter times in a row makes the semaphore
    // kFifo until it is served. Mutex and RwLock use it.
    kBarging,
  };
  explicit Semaphore(std::uint64_t permits, Fairness fairness = Fairness::kFifo);
  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;
  ~Semaphore();

  std::uint64_t available_permits() const noexcept {
    return permits_.load(std::memory_order_acquire) >> kCountShift;
  }
  bool is_closed() const noexcept { return permits_.load(std::memory_order_acquire) & kClosed; }

  // Takes n permits if available now (lock-free); nullopt otherwise or when
  // closed.
  std::optional<SemaphorePermit> try_acquire(std::uint64_t n = 1) {
    if (n > kMaxPermits) throw Error(errc::invalid_argument, "Semaphore: more than kMaxPermits");
    if (!try_take(n)) return std::nullopt;
    return SemaphorePermit(this, n);
  }

  // Adds n permits: handed to waiters first, oldest first; the rest to the
  // count. Throws invalid_argument (and adds nothing) past kMaxPermits.
  void release(std::uint64_t n);
  void add_permits(std::uint64_t n) { release(n); }

  // Fails every waiting and later acquire with errc::closed.
  void close() noexcept;

  class [[nodiscard]] Acquire {
   public:
    Acquire(Semaphore& semaphore, std::uint64_t n) noexcept : semaphore_(semaphore), n_(n) {}
    Acquire(const Acquire&) = delete;
    Acquire& operator=(const Acquire&) = delete;
    // Before it is awaited only (e.g. moved into a timeout).
    Acquire(Acquire&& other) noexcept : semaphore_(other.semaphore_), n_(other.n_) {}
    ~Acquire() {
      if (queued_) semaphore_.cancel(&waiter_);
    }

    // Always inline, as the bounded channel's attempts: GCC kept it out of
    // line (semaphore_contended at 1 worker: 10.2 -> 9.0 ns an op, paired).
    [[gnu::always_inline]] bool await_ready() {
      if (n_ > kMaxPermits) return true;  // await_resume reports it
      // Awaited again while still queued: an lvalue operand of a timeout
      // that expired keeps its place in the queue (as Tokio's `&mut fut`).
      if (queued_) return settle();
      outcome_ = kPending;
      // The budget before the permit: a task whose poll budget is spent
      // yields holding nothing and takes the permit when it runs again
      // (retake_after_yield). Taking first and yielding with the permit held
      // would make every other task queue behind it, and once waiters queue
      // every later acquire must queue too (permits go to them directly):
      // the semaphore_contended workload fell into that convoy for good.
      if (!detail::coop_try_consume()) {
        outcome_ = kYielding;
        return false;
      }
      if (semaphore_.try_take(n_)) {  // n_ == 0 too: granted if open
        outcome_ = kGranted;
        return true;
      }
      return false;
    }
    bool await_suspend(std::coroutine_handle<> self) {
      if (outcome_ == kYielding) {
        // The check runs when the task is polled again, before it resumes.
        detail::yield_current(self, &ready_check, this);
        return true;
      }
      detail::TaskHeader* task = detail::suspend_current(self, &ready_check, this);
      // Still queued from an interrupted await: the waker already names this
      // task (only the task that first awaited may await it again), and a
      // grant racing with this suspension leaves the task notified, so the
      // check passes at the next poll.
      if (queued_) return true;
      return register_waiter(task);
    }
    Expected<SemaphorePermit> await_resume() {
      if (n_ > kMaxPermits) throw Error(errc::invalid_argument, "Semaphore: more than kMaxPermits");
      if (queued_) {
        queued_ = false;
        // This waiter's turn is over: if it made the semaphore strict, it
        // is relaxed again (src/sync/semaphore.cpp, "Modes").
        if (waiter_.starving) semaphore_.end_strict(&waiter_);
        if (waiter_.state.load(std::memory_order_acquire) & detail::SemaphoreWaiter::kClosedBit) {
          semaphore_.give_back_partial(&waiter_);
          return Expected<SemaphorePermit>(errc::closed);
        }
        return SemaphorePermit(&semaphore_, n_);
      }
      if (outcome_ == kClosedOutcome) return Expected<SemaphorePermit>(errc::closed);
      return SemaphorePermit(&semaphore_, n_);
    }

   private:
    enum Outcome { kPending, kYielding, kGranted, kClosedOutcome };
    // Queues waiter_ (or takes the permits the lock-before-CAS drain finds).
    // True when it must wait.
    bool register_waiter(detail::TaskHeader* task) noexcept {
      waiter_.waker = detail::make_task_waker(task);
      waiter_.requested = n_;
      switch (semaphore_.acquire_locked(&waiter_)) {
        case AcquireResult::kQueued:
          queued_ = true;
          return true;
        case AcquireResult::kGranted:
          outcome_ = kGranted;
          return false;
        case AcquireResult::kClosed:
          outcome_ = kClosedOutcome;
          return false;
      }
      return false;
    }
    // The ResumeSlot check: whether the task may resume. After a budget
    // yield it makes the first attempt (the task is current, so it can
    // queue itself); once queued, whether a release or close finished it.
    static bool ready_check(void* context) noexcept {
      Acquire& self = *static_cast<Acquire*>(context);
      if (self.queued_) return self.settle();
      if (self.outcome_ != kYielding) return true;
      if (self.semaphore_.try_take(self.n_)) {
        self.outcome_ = kGranted;
        return true;
      }
      return !self.register_waiter(detail::tls_context.current_task);
    }
    // Queued: whether the wait is over (granted in full, or closed). A
    // waiter woken to retry (relaxed mode) makes its retry here, in its own
    // task: it takes the permits, or queues again at the front.
    bool settle() noexcept {
      const std::uint64_t s = waiter_.state.load(std::memory_order_acquire);
      if (!(s & detail::SemaphoreWaiter::kRetryBit))
        return s == 0 || (s & detail::SemaphoreWaiter::kClosedBit);
      return semaphore_.retry(&waiter_,
                              detail::make_task_waker(detail::tls_context.current_task)) !=
             AcquireResult::kQueued;
    }
    Semaphore& semaphore_;
    std::uint64_t n_;
    detail::SemaphoreWaiter waiter_;
    Outcome outcome_ = kPending;
    bool queued_ = false;  // waiter_ was handed to the semaphore
  };

  // Waits for n permits. co_await gives Expected<SemaphorePermit>: the
  // permit, or errc::closed.
  Acquire acquire(std::uint64_t n = 1) noexcept { return Acquire(*this, n); }

  // Blocks the calling (non-runtime) thread for n permits.
  Expected<SemaphorePermit> acquire_blocking(std::uint64_t n = 1);

  // acquire(n) on a semaphore held by shared_ptr; co_await gives
  // Expected<OwnedSemaphorePermit>. The operation holds a reference from
  // construction, so it and the permit keep the semaphore alive. Otherwise
  // exactly Acquire (FIFO, no allocation to wait, cancelled by destruction
  // with nothing lost, an interrupted wait keeps its place).
  class [[nodiscard]] AcquireOwned {
   public:
    AcquireOwned(std::shared_ptr<Semaphore> semaphore, std::uint64_t n)
        : semaphore_(checked(std::move(semaphore))), acquire_(*semaphore_, n) {}
    AcquireOwned(const AcquireOwned&) = delete;
    AcquireOwned& operator=(const AcquireOwned&) = delete;
    // Before it is awaited only. Copies the reference: the moved-from
    // operation's Acquire still names the semaphore until it is destroyed.
    AcquireOwned(AcquireOwned&& other) noexcept
        : semaphore_(other.semaphore_), acquire_(std::move(other.acquire_)) {}

    bool await_ready() { return acquire_.await_ready(); }
    bool await_suspend(std::coroutine_handle<> self) { return acquire_.await_suspend(self); }
    Expected<OwnedSemaphorePermit> await_resume() {
      Expected<SemaphorePermit> permit = acquire_.await_resume();
      if (!permit) return Expected<OwnedSemaphorePermit>(permit.error());
      const std::uint64_t n = permit->permits();
      permit->forget();  // handed over to the owned permit, not given back
      return OwnedSemaphorePermit(semaphore_, n);
    }

   private:
    // Declared first, so destroyed last: acquire_'s destructor may still
    // withdraw a waiter from the semaphore this reference keeps alive.
    std::shared_ptr<Semaphore> semaphore_;
    Acquire acquire_;
  };

  // Waits for n permits of *semaphore; see AcquireOwned. A null semaphore
  // throws Error(errc::invalid_argument).
  //   auto sem = std::make_shared<volt::Semaphore>(1);
  //   volt::Expected<volt::OwnedSemaphorePermit> p =
  //       co_await volt::Semaphore::acquire_owned(sem);
  static AcquireOwned acquire_owned(std::shared_ptr<Semaphore> semaphore, std::uint64_t n = 1) {
    return AcquireOwned(std::move(semaphore), n);
  }
  // try_acquire(n) giving an owned permit: nullopt if not available now or
  // closed. A null semaphore throws Error(errc::invalid_argument).
  static std::optional<OwnedSemaphorePermit> try_acquire_owned(std::shared_ptr<Semaphore> semaphore,
                                                               std::uint64_t n = 1) {
    if (!semaphore) throw Error(errc::invalid_argument, "Semaphore: null shared_ptr");
    if (n > kMaxPermits) throw Error(errc::invalid_argument, "Semaphore: more than kMaxPermits");
    if (!semaphore->try_take(n)) return std::nullopt;
    return OwnedSemaphorePermit(std::move(semaphore), n);
  }

  // Removes up to n available permits for good and returns how many it
  // removed (min(n, available_permits()) at that instant). Never waits,
  // never takes permits from a queued waiter (while one queues, the count is
  // 0: I1 in src/sync/semaphore.cpp) or a holder; works on a closed
  // semaphore. Tokio's forget_permits.
  //   volt::Semaphore sem(5);
  //   sem.forget_permits(3);   // returns 3; available_permits() == 2
  //   sem.forget_permits(9);   // returns 2; available_permits() == 0
  std::uint64_t forget_permits(std::uint64_t n) noexcept;

 private:
  friend class SemaphorePermit;
  friend class OwnedSemaphorePermit;
  static std::shared_ptr<Semaphore> checked(std::shared_ptr<Semaphore> semaphore) {
    if (!semaphore) throw Error(errc::invalid_argument, "Semaphore: null shared_ptr");
    return semaphore;
  }
  enum class AcquireResult { kGranted, kQueued, kClosed };
  // permits_ = count << kCountShift | kStrict | kWoken | kQueued | kClosed.
  static constexpr std::uint64_t kClosed = 1;
  // Set (under the mutex) by an acquirer that found the count at zero and
  // will queue, in the same CAS that saw the zero; cleared only under the
  // mutex, by a release that found nobody queued. While it is clear a
  // release adds to the count without the mutex (src/sync/semaphore.cpp).
  static constexpr std::uint64_t kQueued = 2;
  // Relaxed mode: a waiter has been taken out of the queue and woken to
  // retry, and has not retried yet (at most one). While it is set a release
  // only credits the count: the retry passes the wake-up on. Set and cleared
  // under the mutex.
  static constexpr std::uint64_t kWoken = 4;
  // Strict mode (FIFO hand-off): set by a starving waiter, cleared when its
  // turn ends; under the mutex.
  static constexpr std::uint64_t kStrict = 8;
  static constexpr int kCountShift = 4;

  bool try_take(std::uint64_t n) noexcept {
    std::uint64_t current = permits_.load(std::memory_order_acquire);
    detail::ContentionBackoff contention;
    for (;;) {
      if ((current & kClosed) || (current >> kCountShift) < n) return false;
      // acquire on success: pairs with the release of whoever added the
      // permits (what they protected is visible to us).
      if (permits_.compare_exchange_weak(current, current - (n << kCountShift),
                                         std::memory_order_acquire, std::memory_order_acquire))
        return true;
      contention.once();  // the word changed under us: another take or a release won
    }
  }
  // The slow path of acquire, under the mutex (src/sync/semaphore.cpp).
  AcquireResult acquire_locked(detail::SemaphoreWaiter* waiter) noexcept;
  // A queued waiter's Acquire is destroyed: withdraw it, give back grants.
  void cancel(detail::SemaphoreWaiter* waiter) noexcept;
  // The owner of a waiter woken to retry (kRetryBit): takes the permits it
  // still needs, or queues it again at the front (with `waker`) and counts
  // the failure; kClosed if closed meanwhile.
  AcquireResult retry(detail::SemaphoreWaiter* waiter, detail::Waker waker) noexcept;
  // A starving waiter's turn ended: back to relaxed mode.
  void end_strict(detail::SemaphoreWaiter* waiter) noexcept;
  // Under the mutex: in relaxed mode, with waiters queued and none woken,
  // takes the oldest out and marks it woken to retry (its waker goes to
  // `wakes`): after a release (`released`), or when the count holds permits
  // (a pass-on).
  void wake_oldest_locked(detail::WakeList& wakes, bool released) noexcept;
  // A waiter finished as closed: give back what it had been granted.
  void give_back_partial(detail::SemaphoreWaiter* waiter) noexcept;
  // release() without the range check (permits that came from here).
  void release_unchecked(std::uint64_t n) noexcept;
  void release_locked(std::uint64_t n) noexcept;  // mutex held; unlocks

  // Every try_acquire CAS touches this word: its own cache line, away from
  // the mutex and the queue that waiters and releasers write.
  alignas(64) std::atomic<std::uint64_t> permits_;
  const bool barging_;
  alignas(64) std::atomic<detail::SemaphoreWaiter*> fast_{nullptr};
  detail::SpinLock mutex_;
  detail::IntrusiveList<detail::SemaphoreWaiter> waiters_;  // guarded by mutex_; front oldest
};

inline void SemaphorePermit::reset() noexcept {
  if (semaphore_ && permits_ > 0) semaphore_->release_unchecked(permits_);
  semaphore_ = nullptr;
  permits_ = 0;
}

inline void OwnedSemaphorePermit::reset() noexcept {
  // Release first, then drop the reference: the release runs on a live
  // semaphore, and whoever drops the last reference destroys it after
  // everything this permit did to it.
  if (semaphore_ && permits_ > 0) semaphore_->release_unchecked(permits_);
  permits_ = 0;
  semaphore_.reset();
}

// Tokio's paths (tokio::sync::Semaphore, tokio::sync::SemaphorePermit,
// tokio::sync::OwnedSemaphorePermit).
namespace sync {
using volt::OwnedSemaphorePermit;
using volt::Semaphore;
using volt::SemaphorePermit;
}  // namespace sync

}  // namespace volt
