// volt/channel/watch.hpp: a single value that senders replace and any
// number of receivers watch (Tokio's watch channel).
//
//   auto [tx, rx] = volt::watch::channel<Config>(load_config());
//   // sender                                  // each receiver (rx copied)
//   tx.send(new_config);                       for (;;) {
//   tx.send_modify([](Config& c) { ... });       volt::Expected<void> r = co_await rx.changed();
//                                                if (!r) break;  // the sender is gone
//                                                apply(*rx.borrow_and_update());
//                                              }
//
//   // wait for a condition on the value (the current one included):
//   volt::Expected<volt::watch::Ref<State>> r =
//       co_await rx.wait_for([](const State& s) { return s.ready; });
//   if (r) use(**r);                        // errc::closed: senders gone, never ready
//   co_await tx.closed();                   // (a sender) every receiver is gone
//
// (The awaited value bound to a variable, not `while (co_await rx.changed())`:
// g++ 12 miscompiles a co_await in a condition of a coroutine that declares
// no variable; README, "Compiler issues".)
//
// Guarantees:
//  - The channel holds the latest value only. Every send makes a new
//    version; a receiver remembers the version it has seen. changed()
//    completes as soon as a version newer than the seen one exists (at once
//    if one does) and marks it seen; many sends while nobody looks coalesce.
//    A receiver that awaits changed() after any number of sends sees the
//    latest value ("watch never misses the last value").
//  - Senders are copyable (as Tokio's Clone): the channel closes when the
//    last sender is gone. changed() gives Expected<void>: success, or
//    errc::closed when every sender is gone and no unseen version is left.
//    has_changed() gives Expected<bool>: errc::closed whenever every sender
//    is gone.
//  - wait_for(pred) (co_await gives Expected<Ref<T>>) evaluates pred(const
//    T&) on the current value (whatever its version), then on each newer
//    version it sees, each marked seen, until one satisfies it: it returns a
//    Ref on that value (held since pred saw it, so it is the value pred
//    accepted). errc::closed when every sender is gone and the last value
//    does not satisfy it. pred runs under the read lock, on the waiting
//    task's thread, possibly inside the scheduler's poll: keep it short; it
//    must not send on this channel. If it throws, the exception propagates
//    from the co_await. Versions sent between two looks may be skipped
//    (coalesced), as for changed(). Cancel-safe as changed().
//  - Sender::closed() (co_await, void) completes once no receiver is left,
//    at once if none is. A woken wait checks again: a receiver subscribed
//    in between keeps it waiting (Tokio's). Any number may wait.
//  - borrow() / borrow_and_update() return a Ref: a read guard that derefs to
//    const T& and holds a shared lock on the value while alive. Keep it short
//    and never across a co_await or a send on the same thread (a send waits
//    for every Ref to go; a Ref held by the sending thread deadlocks it).
//    borrow_and_update() also marks the borrowed version seen.
//  - send(v) fails with errc::closed, handing v back, when no receiver is
//    left (as Tokio's). send_modify(f) and send_replace(v) always change the
//    value, receivers or not: f(T&) runs under the write lock (if it throws,
//    what it changed is published all the same and the exception
//    propagates); send_replace returns the old value.
//  - Receivers are copyable; a copy starts with its original's seen version.
//    subscribe() makes a receiver that has seen the current value.
//  - Waiting allocates nothing: the waiter lives in the Changed (WaitFor,
//    Closed) operation. Each is cancelled by destruction (abort, timeout,
//    select) and takes nothing, so cancelling it loses no version. An lvalue
//    one interrupted by a timeout may be awaited again by the same task; it
//    keeps its registration.
//  - A send with no receiver waiting takes the write lock and makes one RMW
//    on the state word; the waiter lock is taken only when someone waits.
//  - Bad input: a default-constructed or moved-from handle is closed: send()
//    hands the value back (errc::closed), send_replace() returns its
//    argument, send_modify() does nothing, subscribe() gives a closed
//    receiver, closed() completes at once; changed(), wait_for() and
//    has_changed() give errc::closed; borrow() (no value to lend) throws
//    volt::Error(errc::closed).
// Preconditions (undefined behaviour otherwise): a Receiver outlives its
// Changed and WaitFor operations (one at a time), and each Receiver is used
// by one thread at a time (copies are independent); a Sender outlives its
// Closed operations; a Ref does not outlive its channel's handles.
//
// Protocol. One atomic word, state_ = version << 2 | kHasWaiters | kClosed.
// The version changes only under the value's write lock (so a reader holding
// the read lock reads the version of the value it sees). A waiter registers
// under waiters_lock_ only after checking, in the same word, that the version
// is still the one it has seen, and sets kHasWaiters with a CAS on that exact
// word; a send bumps the version with a fetch_add and drains the waiters iff
// the value it replaced had kHasWaiters. Both sides are RMWs on one word, so
// they are ordered: either the registration comes first (the send sees the
// bit, and drains under the lock after the waiter is linked) or the send does
// (the CAS fails and the waiter sees the new version). No fence is needed.
// kHasWaiters is cleared only under waiters_lock_ by the drain.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include "volt/channel/send_result.hpp"
#include "volt/detail/closed_event.hpp"
#include "volt/detail/intrusive_list.hpp"
#include "volt/detail/rw_spin_lock.hpp"
#include "volt/detail/spin_lock.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/detail/wake_list.hpp"
#include "volt/detail/waker.hpp"
#include "volt/error.hpp"
#include "volt/expected.hpp"
#include "volt/task/join_handle.hpp"

namespace volt::watch {

template <class T>
class Sender;
template <class T>
class Receiver;
template <class T>
class Ref;
template <class T, class F>
class WaitFor;

namespace detail {

// One waiting changed().
struct Waiter : volt::detail::IntrusiveLink {
  volt::detail::Waker waker;  // guarded by waiters_lock_ while linked
  // Set by the drain after it unlinked the waiter and moved its waker out
  // (release; after it the drain never touches the waiter). Acquire loads
  // by the owner.
  std::atomic<bool> woken{false};
  // Guarded by waiters_lock_: Shared::drains_ when the waiter was linked. A
  // drain wakes only waiters linked before it began (epoch < its own).
  std::uint64_t epoch = 0;
};

template <class T>
class Shared {
 public:
  // ---- state_ ----
  static constexpr std::uint64_t kClosed = 1;      // the sender is gone
  static constexpr std::uint64_t kHasWaiters = 2;  // waiters_ may be non-empty
  static constexpr std::uint64_t kVersionOne = 4;  // versions count from bit 2
  static constexpr std::uint64_t kVersionMask = ~(kVersionOne - 1);
  static_assert((kVersionOne & (kClosed | kHasWaiters)) == 0);

  template <class U>
  explicit Shared(U&& init) : value_(std::forward<U>(init)) {}
  Shared(const Shared&) = delete;
  Shared& operator=(const Shared&) = delete;

  // ---- references: the sender and each receiver hold one ----
  void retain() noexcept {
    // relaxed: the caller already holds a reference.
    refs_.fetch_add(1, std::memory_order_relaxed);
  }
  void release() noexcept {
    // acq_rel: the last holder sees every other's writes before deleting.
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  // relaxed: a count; nothing is read through it (send() answers with a
  // snapshot, as Tokio's does). The senders' closed() reads it under
  // rx_gone_'s lock, which drop_receiver's notify takes after the decrement:
  // that lock orders them (closed_event.hpp).
  void add_receiver() noexcept { receivers_.fetch_add(1, std::memory_order_relaxed); }
  void drop_receiver() noexcept {
    if (receivers_.fetch_sub(1, std::memory_order_relaxed) == 1) rx_gone_.notify_all();
  }
  std::size_t receivers() const noexcept { return receivers_.load(std::memory_order_relaxed); }

  // relaxed: a sender is being copied, so the count is not 0 and cannot
  // reach 0 meanwhile.
  void add_sender() noexcept { senders_.fetch_add(1, std::memory_order_relaxed); }
  // True for the last sender. acq_rel: the last sender's close_tx comes
  // after every other sender's sends (their decrements release them).
  bool drop_sender() noexcept { return senders_.fetch_sub(1, std::memory_order_acq_rel) == 1; }

  // The senders' closed(): completes once no receiver is left; a woken wait
  // checks again (a subscribe() in between makes it wait on).
  volt::detail::ClosedWait closed_wait() noexcept {
    return volt::detail::ClosedWait(&rx_gone_, &no_receivers, this);
  }

  // acquire: pairs with the release RMWs that bumped the version (modify)
  // or set kClosed (close_tx).
  std::uint64_t state() const noexcept { return state_.load(std::memory_order_acquire); }
  // Read-locked (or write-locked) callers only: the version bits change
  // under the write lock, so relaxed reads the version of the value we see.
  std::uint64_t version_locked() const noexcept {
    return state_.load(std::memory_order_relaxed) & kVersionMask;
  }

  // Runs f(value) under the write lock, then publishes a new version and
  // wakes the waiters, also if f throws (it may have changed the value).
  template <class F>
  void modify(F&& f) {
    struct Publish {
      Shared* self;
      ~Publish() {
        // release: pairs with state()'s acquire loads: a receiver that sees
        // the version sees the send's effects (the value itself is read
        // under the read lock, which orders it anyway).
        const std::uint64_t before = self->state_.fetch_add(kVersionOne, std::memory_order_release);
        self->lock_.unlock();
        if (before & kHasWaiters) self->wake_waiters();
      }
    };
    lock_.lock();
    Publish publish{this};
    std::forward<F>(f)(value_);
  }

  void close_tx() noexcept {
    // release: as in modify.
    const std::uint64_t before = state_.fetch_or(kClosed, std::memory_order_release);
    if (before & kHasWaiters) wake_waiters();
  }

  // Links `waiter` unless the version is no longer `seen` or the sender is
  // gone. True if linked (see the protocol in the header).
  bool register_waiter(Waiter* waiter, std::uint64_t seen) noexcept {
    waiters_lock_.lock();
    // acquire: as state(); under the lock we also see every clear of
    // kHasWaiters made before (clears happen under it).
    std::uint64_t state = state_.load(std::memory_order_acquire);
    for (;;) {
      if ((state & kVersionMask) != seen || (state & kClosed)) {
        waiters_lock_.unlock();
        return false;
      }
      // Set by an earlier waiter: a send that comes after our load sees it,
      // since only a drain clears it, under the lock we hold.
      if (state & kHasWaiters) break;
      // The CAS orders us against sends by being an RMW on the same word;
      // the waiter itself is published by the lock. acquire (also on
      // failure, where the re-check reads the new version): as state().
      if (state_.compare_exchange_weak(state, state | kHasWaiters, std::memory_order_acquire,
                                       std::memory_order_acquire))
        break;
    }
    waiter->epoch = drains_;
    waiters_.push_back(waiter);
    waiters_lock_.unlock();
    return true;
  }

  // A registered waiter is destroyed (or leaves early): unlink it if the
  // drain has not. kHasWaiters may stay set; the next send clears it.
  void cancel(Waiter* waiter) noexcept {
    volt::detail::Waker old;  // dropped after unlocking (dropping runs task code)
    waiters_lock_.lock();
    if (waiters_.remove(waiter)) old = std::move(waiter->waker);
    waiters_lock_.unlock();
  }

 private:
  friend class Ref<T>;

  // Wakes the waiters linked before it began (those the send or close that
  // called it owes a wake-up to).
  //
  // Only those: a waiter that links itself while we are unlocked between
  // batches has seen our version (or the close) and is owed a wake-up by a
  // later send, not by us. Waking it too would let watchers that re-register
  // as soon as they are woken (a loop of changed()) keep this drain going for
  // as long as they keep up: with more than one WakeList batch of waiters the
  // send would not return. (The list is FIFO and epochs never decrease along
  // it, so the ones to wake are a prefix.) A later waiter is not lost: it
  // linked after our clear of kHasWaiters, so it set the bit or found it set,
  // and the bit stays set until the next drain begins, with a larger epoch,
  // and wakes it.
  void wake_waiters() noexcept {
    volt::detail::WakeList wakes;
    waiters_lock_.lock();
    const std::uint64_t mine = ++drains_;
    // relaxed: only holders of waiters_lock_ set (from clear) or clear the
    // bit; a waiter that registers after we unlock sets it again.
    state_.fetch_and(~kHasWaiters, std::memory_order_relaxed);
    for (;;) {
      Waiter* waiter = waiters_.front();
      if (waiter == nullptr || waiter->epoch >= mine) break;
      waiters_.pop_front();
      wakes.push(std::move(waiter->waker));  // before publishing (copy before publish)
      // release: pairs with the owner's acquire load; it may free the waiter.
      waiter->woken.store(true, std::memory_order_release);
      if (wakes.full()) {
        // The list stays consistent while unlocked (a waiter destroyed
        // meanwhile unlinks itself under the lock).
        waiters_lock_.unlock();
        wakes.wake_all();
        waiters_lock_.lock();
      }
    }
    waiters_lock_.unlock();
    wakes.wake_all();
  }

  static bool no_receivers(const void* shared) noexcept {
    return static_cast<const Shared*>(shared)->receivers() == 0;
  }

  volt::detail::RwSpinLock lock_;
  T value_;                              // guarded by lock_
  std::atomic<std::uint64_t> state_{0};  // version 0, open, nobody waiting
  volt::detail::SpinLock waiters_lock_;
  volt::detail::IntrusiveList<Waiter> waiters_;  // guarded by waiters_lock_
  std::uint64_t drains_ = 0;  // guarded by waiters_lock_: drains begun (Waiter::epoch)
  std::atomic<std::size_t> receivers_{1};
  std::atomic<std::size_t> senders_{1};
  std::atomic<std::size_t> refs_{2};   // the first sender, the first receiver
  volt::detail::ClosedEvent rx_gone_;  // senders waiting in closed()
};

}  // namespace detail

// A read guard on a watch channel's value: derefs to const T&.
template <class T>
class [[nodiscard]] Ref {
 public:
  Ref(Ref&& other) noexcept : shared_(std::exchange(other.shared_, nullptr)) {}
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  Ref& operator=(Ref&&) = delete;
  ~Ref() {
    if (shared_) shared_->lock_.unlock_shared();
  }

  const T& operator*() const noexcept { return shared_->value_; }
  const T* operator->() const noexcept { return &shared_->value_; }

 private:
  friend class Sender<T>;
  friend class Receiver<T>;
  template <class, class>
  friend class WaitFor;
  // Takes the read lock.
  explicit Ref(detail::Shared<T>* shared) noexcept : shared_(shared) {
    shared_->lock_.lock_shared();
  }
  detail::Shared<T>* shared_;
};

template <class T>
class Receiver {
  using Shared = detail::Shared<T>;

 public:
  class Changed;

  // A closed handle (see the header contract).
  Receiver() noexcept = default;
  // A copy that has seen what `other` has seen.
  Receiver(const Receiver& other) noexcept : shared_(other.shared_), seen_(other.seen_) {
    if (shared_) {
      shared_->retain();
      shared_->add_receiver();
    }
  }
  Receiver(Receiver&& other) noexcept
      : shared_(std::exchange(other.shared_, nullptr)), seen_(other.seen_) {}
  Receiver& operator=(Receiver other) noexcept {
    std::swap(shared_, other.shared_);
    std::swap(seen_, other.seen_);
    return *this;
  }
  ~Receiver() { reset(); }

  // The current value, under a read lock; the seen version is unchanged.
  Ref<T> borrow() const { return Ref<T>(checked()); }
  // The current value, under a read lock, and its version marked seen.
  Ref<T> borrow_and_update() {
    Ref<T> ref(checked());
    seen_ = shared_->version_locked();
    return ref;
  }

  // Whether a version newer than the seen one exists; errc::closed if the
  // sender is gone.
  Expected<bool> has_changed() const noexcept {
    if (!shared_) return Expected<bool>(errc::closed);
    const std::uint64_t state = shared_->state();
    if (state & Shared::kClosed) return Expected<bool>(errc::closed);
    return Expected<bool>((state & Shared::kVersionMask) != seen_);
  }

  // Waits for a version newer than the seen one and marks it seen.
  // co_await gives Expected<void> (errc::closed: sender gone, nothing new).
  Changed changed() noexcept { return Changed(shared_, &seen_); }

  // Waits until the value satisfies pred(const T&) -> bool, the current
  // value included; co_await gives Expected<Ref<T>>: a read guard on the
  // first value seen to satisfy it (marked seen), or errc::closed when every
  // sender is gone and the last value does not. See the header contract.
  template <class F>
  WaitFor<T, F> wait_for(F pred) {
    return WaitFor<T, F>(shared_, &seen_, std::move(pred));
  }

  // The current version counts as unseen / seen.
  void mark_changed() noexcept {
    if (shared_) seen_ = (shared_->state() & Shared::kVersionMask) - Shared::kVersionOne;
  }
  void mark_unchanged() noexcept {
    if (shared_) seen_ = shared_->state() & Shared::kVersionMask;
  }

 private:
  friend class Sender<T>;
  template <class U>
  friend std::pair<Sender<U>, Receiver<U>> channel(U init);
  template <class, class>
  friend class WaitFor;
  Receiver(Shared* shared, std::uint64_t seen) noexcept : shared_(shared), seen_(seen) {}
  Shared* checked() const {
    if (!shared_) throw Error(errc::closed, "watch::Receiver: empty handle");
    return shared_;
  }
  void reset() noexcept {
    if (Shared* shared = std::exchange(shared_, nullptr)) {
      shared->drop_receiver();
      shared->release();
    }
  }

  Shared* shared_ = nullptr;
  std::uint64_t seen_ = 0;  // version bits of the last version seen
};

// The changed() operation: co_await gives Expected<void>.
template <class T>
class [[nodiscard]] Receiver<T>::Changed {
 public:
  // Only before it is awaited (e.g. moved into a timeout).
  Changed(Changed&& other) noexcept : shared_(other.shared_), seen_(other.seen_) {}
  Changed(const Changed&) = delete;
  Changed& operator=(const Changed&) = delete;
  Changed& operator=(Changed&&) = delete;
  // Cancellation: leave the list; nothing was taken.
  ~Changed() {
    if (queued_) shared_->cancel(&waiter_);
  }

  bool await_ready() {
    if (!shared_) return true;
    // Awaited again after an interrupted wait: no new budget unit, and the
    // registration is kept (await_suspend).
    if (queued_) return poll_queued();
    // The budget before marking anything seen: a task whose budget is spent
    // yields first and looks again from the check.
    if (!volt::detail::coop_try_consume()) {
      yielding_ = true;
      return false;
    }
    return ready_now();
  }
  bool await_suspend(std::coroutine_handle<> self) {
    if (yielding_) {
      yielding_ = false;
      volt::detail::yield_current(self, &ready_check, this);
      return true;
    }
    volt::detail::TaskHeader* task = volt::detail::suspend_current(self, &ready_check, this);
    // Still queued from an interrupted await: its waker already names this
    // task (only that task may await it again).
    if (queued_) return true;
    return enqueue(task);
  }
  Expected<void> await_resume() {
    if (!shared_) return Expected<void>(errc::closed);
    leave();
    const std::uint64_t version = shared_->state() & Shared::kVersionMask;
    if (version != *seen_) {
      *seen_ = version;
      return Expected<void>();
    }
    return Expected<void>(errc::closed);  // every path here saw new or closed
  }

 private:
  friend class Receiver;
  Changed(Shared* shared, std::uint64_t* seen) noexcept : shared_(shared), seen_(seen) {}

  bool ready_now() const noexcept {
    const std::uint64_t state = shared_->state();
    return (state & Shared::kVersionMask) != *seen_ || (state & Shared::kClosed);
  }
  // Links the waiter with `task`'s waker. True if the task must wait.
  bool enqueue(volt::detail::TaskHeader* task) noexcept {
    waiter_.waker = volt::detail::make_task_waker(task);
    waiter_.woken.store(false, std::memory_order_relaxed);  // published by the lock
    if (shared_->register_waiter(&waiter_, *seen_)) {
      queued_ = true;
      return true;
    }
    waiter_.waker.reset();  // new version or closed: not linked
    return false;
  }
  // Queued: true if we may resume (off the list now). A drain unlinked us,
  // or a new version shows before its drain reached us (we leave early).
  bool poll_queued() noexcept {
    // acquire: pairs with the drain's release store; it is done with us.
    if (waiter_.woken.load(std::memory_order_acquire)) {
      queued_ = false;
      return ready_now();  // false: woken spuriously (see wake_waiters)
    }
    if (!ready_now()) return false;
    leave();
    return true;
  }
  void leave() noexcept {
    if (!queued_) return;
    queued_ = false;
    shared_->cancel(&waiter_);
  }
  // The task's readiness check (runs when it is polled).
  static bool ready_check(void* context) noexcept {
    Changed& self = *static_cast<Changed*>(context);
    if (self.queued_) {
      if (self.poll_queued()) return true;
      if (self.queued_) return false;  // still linked: wait for the drain
    } else if (self.ready_now()) {
      return true;  // first look after a budget yield
    }
    return !self.enqueue(volt::detail::tls_context.current_task);
  }

  Shared* shared_;
  std::uint64_t* seen_;  // the Receiver's
  detail::Waiter waiter_;
  bool queued_ = false;    // waiter_ was linked and we have not seen it unlinked
  bool yielding_ = false;  // budget spent: the first look is in ready_check
};

template <class T>
class Sender {
  using Shared = detail::Shared<T>;

 public:
  // A closed handle (see the header contract).
  Sender() noexcept = default;
  Sender(Sender&& other) noexcept : shared_(std::exchange(other.shared_, nullptr)) {}
  Sender& operator=(Sender&& other) noexcept {
    if (this != &other) {
      reset();
      shared_ = std::exchange(other.shared_, nullptr);
    }
    return *this;
  }
  // Another sender of the same channel (the channel closes when the last
  // one goes).
  Sender(const Sender& other) noexcept : shared_(other.shared_) {
    if (shared_) {
      shared_->retain();
      shared_->add_sender();
    }
  }
  Sender& operator=(const Sender& other) noexcept {
    if (this != &other) *this = Sender(other);
    return *this;
  }
  ~Sender() { reset(); }

  // Replaces the value and notifies the receivers; errc::closed, handing the
  // value back, if there are none.
  SendResult<T> send(T value) {
    if (!shared_ || shared_->receivers() == 0) return SendResult<T>(errc::closed, std::move(value));
    replace(std::move(value));  // the old value is destroyed here, outside the lock
    return SendResult<T>();
  }
  // Runs f(T&) on the value under the write lock, then notifies (always).
  template <class F>
  void send_modify(F&& f) {
    if (shared_) shared_->modify(std::forward<F>(f));
  }
  // Replaces the value (always) and notifies; returns the old value.
  T send_replace(T value) {
    if (!shared_) return value;
    return replace(std::move(value));
  }

  // The current value, under a read lock.
  Ref<T> borrow() const {
    if (!shared_) throw Error(errc::closed, "watch::Sender: empty handle");
    return Ref<T>(shared_);
  }
  // A new receiver that has seen the current value.
  Receiver<T> subscribe() const {
    if (!shared_) return Receiver<T>();
    shared_->retain();
    shared_->add_receiver();
    return Receiver<T>(shared_, shared_->state() & Shared::kVersionMask);
  }
  std::size_t receiver_count() const noexcept { return shared_ ? shared_->receivers() : 0; }
  // True when no receiver is left (send() would fail).
  bool is_closed() const noexcept { return receiver_count() == 0; }

  // co_await completes (void) once no receiver is left, at once if none is
  // (or this handle is empty). A woken wait checks again: a receiver
  // subscribed in between makes it go on waiting (Tokio's). Any number of
  // senders may wait; waiting allocates nothing; a destroyed wait is
  // withdrawn. It must not outlive this Sender.
  using Closed = volt::detail::ClosedWait;
  Closed closed() noexcept {
    return shared_ ? shared_->closed_wait() : Closed(nullptr, nullptr, nullptr);
  }

 private:
  template <class U>
  friend std::pair<Sender<U>, Receiver<U>> channel(U init);
  explicit Sender(Shared* shared) noexcept : shared_(shared) {}
  T replace(T&& value) {
    T old = std::move(value);
    shared_->modify([&old](T& current) {
      using std::swap;
      swap(current, old);
    });
    return old;
  }
  void reset() noexcept {
    if (Shared* shared = std::exchange(shared_, nullptr)) {
      if (shared->drop_sender()) shared->close_tx();
      shared->release();
    }
  }

  Shared* shared_ = nullptr;
};

// The wait_for() operation: co_await gives Expected<Ref<T>>.
//
// It looks at the value under the read lock: the first look evaluates the
// current value whatever its version; later looks evaluate a version only if
// it is newer than the one last looked at (each look marks the version
// seen). Not satisfied, it waits as Changed does (a waiter registered for
// the seen version, woken by the next send or by the close). The closed bit
// is read before the value: a closed channel's value is final (the last
// sender closes after its sends, and drop_sender orders the other senders'
// sends before that), so "closed, and this value fails" is final too.
template <class T, class F>
class [[nodiscard]] WaitFor {
  using Shared = detail::Shared<T>;

 public:
  // Only before it is awaited (e.g. moved into a timeout).
  WaitFor(WaitFor&& other) noexcept(std::is_nothrow_move_constructible_v<F>)
      : shared_(other.shared_), seen_(other.seen_), pred_(std::move(other.pred_)) {}
  WaitFor(const WaitFor&) = delete;
  WaitFor& operator=(const WaitFor&) = delete;
  WaitFor& operator=(WaitFor&&) = delete;
  // Cancellation: leave the list; a Ref already taken is released.
  ~WaitFor() {
    if (queued_) shared_->cancel(&waiter_);
  }

  bool await_ready() {
    if (!shared_) return true;
    if (settled()) return true;
    // Awaited again after an interrupted wait: no new budget unit, and the
    // registration is kept (await_suspend).
    if (queued_) return poll_queued();
    // The budget first: a task whose budget is spent yields and makes its
    // first look from ready_check.
    if (!volt::detail::coop_try_consume()) {
      yielding_ = true;
      return false;
    }
    return look();
  }
  bool await_suspend(std::coroutine_handle<> self) {
    if (yielding_) {
      yielding_ = false;
      volt::detail::yield_current(self, &ready_check, this);
      return true;
    }
    volt::detail::TaskHeader* task = volt::detail::suspend_current(self, &ready_check, this);
    if (queued_) return true;  // linked from an interrupted await: same task's waker
    return enqueue(task);
  }
  Expected<Ref<T>> await_resume() {
    leave();
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    if (found_) {
      Ref<T> ref = std::move(*found_);
      found_.reset();
      return Expected<Ref<T>>(std::move(ref));
    }
    return Expected<Ref<T>>(errc::closed);  // empty handle, or closed unsatisfied
  }

 private:
  friend class Receiver<T>;
  WaitFor(Shared* shared, std::uint64_t* seen, F pred)
      : shared_(shared), seen_(seen), pred_(std::move(pred)) {}

  bool settled() const noexcept { return found_ || closed_ || error_; }

  // Looks at the value (see the class comment). True if settled.
  // noexcept: pred's exception is kept for await_resume.
  bool look() noexcept {
    // Before the value (see above). acquire: as Shared::state().
    const bool closed = shared_->state() & Shared::kClosed;
    Ref<T> ref(shared_);
    const std::uint64_t version = shared_->version_locked();
    if (!looked_ || version != *seen_) {
      looked_ = true;
      *seen_ = version;
      try {
        if (pred_(*ref)) {
          found_.emplace(std::move(ref));
          return true;
        }
      } catch (...) {
        error_ = std::current_exception();  // the read lock goes with `ref`
        return true;
      }
    }
    closed_ = closed;
    return closed_;
  }
  // Links the waiter with `task`'s waker for the seen version. True if the
  // task must wait; otherwise a newer version or the close is there: look
  // again (true from the look settles it).
  bool enqueue(volt::detail::TaskHeader* task) noexcept {
    for (;;) {
      waiter_.waker = volt::detail::make_task_waker(task);
      waiter_.woken.store(false, std::memory_order_relaxed);  // published by the lock
      if (shared_->register_waiter(&waiter_, *seen_)) {
        queued_ = true;
        return true;
      }
      waiter_.waker.reset();
      if (look()) return false;
    }
  }
  // Queued: true if settled (and off the list).
  bool poll_queued() noexcept {
    // acquire: pairs with the drain's release store; it is done with us.
    if (waiter_.woken.load(std::memory_order_acquire)) {
      queued_ = false;
      return look();
    }
    const std::uint64_t state = shared_->state();
    if ((state & Shared::kVersionMask) == *seen_ && !(state & Shared::kClosed)) return false;
    leave();  // something new before the drain reached us
    return look();
  }
  void leave() noexcept {
    if (!queued_) return;
    queued_ = false;
    shared_->cancel(&waiter_);
  }
  // The task's readiness check (runs when it is polled).
  static bool ready_check(void* context) noexcept {
    WaitFor& self = *static_cast<WaitFor*>(context);
    if (self.queued_) {
      if (self.poll_queued()) return true;
      if (self.queued_) return false;  // still linked: wait for the drain
    } else if (!self.looked_) {
      if (self.look()) return true;  // the first look, after a budget yield
    }
    return !self.enqueue(volt::detail::tls_context.current_task);
  }

  Shared* shared_;
  std::uint64_t* seen_;  // the Receiver's
  F pred_;
  detail::Waiter waiter_;
  std::optional<Ref<T>> found_;  // the satisfying value, read-locked
  std::exception_ptr error_;     // pred threw
  bool looked_ = false;          // the first look is done
  bool closed_ = false;          // closed, and the last value failed pred
  bool queued_ = false;          // waiter_ linked, not yet seen unlinked
  bool yielding_ = false;        // budget spent: the first look is in ready_check
};

// A new channel holding `init` (version 0, seen by the receiver).
template <class T>
std::pair<Sender<T>, Receiver<T>> channel(T init) {
  auto* shared = new detail::Shared<T>(std::move(init));
  return {Sender<T>(shared), Receiver<T>(shared, 0)};
}

}  // namespace volt::watch

// Tokio's path (tokio::sync::watch).
namespace volt::sync {
namespace watch = volt::watch;
}  // namespace volt::sync
