// volt/sync/once_cell.hpp: a value set at most once, with async
// initialisation that runs exactly one initialiser at a time.
//
//   volt::OnceCell<Config> config;                       // empty
//   auto load = [path]() -> volt::Task<Config> { co_return co_await load_config(path); };
//   const Config& c = co_await config.get_or_init(load);  // load named first (g++ 12:
//                                                         // README, "Compiler issues")
//   if (const Config* p = config.get()) { ... }          // never waits
//   auto r = config.set(Config{});                       // never waits
//   if (!r) { Config back = std::move(r).rejected(); }   // refused: handed back
//
// Guarantees:
//  - get() is lock-free: one acquire load of the state flag. It returns the
//    value only once it is fully constructed (published with release).
//  - set(v) never waits. It fails, handing v back inside the result, if the
//    cell already holds a value (OnceCellSetError::kAlreadyInitialized) or an
//    initialiser is running right now (kInitializing).
//  - get_or_init(f): if the cell is empty, f() (which returns an awaitable,
//    typically a Task<T>, whose result constructs the T) runs in the awaiting
//    task, and its value is stored and returned. At most one initialiser runs
//    at a time; concurrent callers wait (in FIFO order) and return the value
//    it stored without running their own f. co_await gives const T&.
//  - An initialiser that throws, or whose get_or_init is cancelled (the
//    awaiting frame destroyed: abort, timeout, select), leaves the cell empty
//    and passes the turn to the next waiting caller, which runs its own f.
//    The exception propagates out of that one co_await only.
//  - get_or_try_init(f): the same, with f's awaitable yielding Expected<T>;
//    an error leaves the cell empty (the next caller tries) and is returned
//    as Expected<const T&>.
//  - Waiting allocates nothing beyond the operation's slow-path frame, which
//    comes from the recycling frame allocator (none in steady state); the
//    waiter lives in that frame. A call that finds the cell set allocates
//    nothing and does not wait (or yield).
//  - A waiter resumes on whichever worker polls its task after the
//    initialiser published the value (no thread affinity).
//  - T need not be default-constructible or copyable (move-constructible is
//    enough for set and take). The destructor destroys the value, if any,
//    once.
//
// Preconditions (breach is undefined behaviour): the cell outlives every
// operation on it (no get_or_init may be in flight at destruction);
// get_mut() and take() need exclusive access (no concurrent operation of any
// kind, as Rust's &mut self). An initialiser must not await get_or_init on
// its own cell (it would wait for itself, as in Tokio). The reference
// get_or_init gives stays valid until the cell is destroyed or take()n. The
// cell is neither copyable nor movable: the waiters point into it.
//
// Bad input: rejected() on a successful set's result throws
// std::bad_optional_access.
//
// Protocol (Tokio's): a Semaphore with one permit is the initialisation
// lock; `initialized_` is the published flag. Holding the permit is the
// right to construct the value. Publishing constructs T, stores the flag
// (release), closes the semaphore, and forgets the permit: every waiting and
// later acquire then fails with errc::closed, which means "initialised".
// An initialiser that does not publish drops its permit, which the
// semaphore hands to the oldest waiter. Invariants:
//   I1  the value is constructed iff initialized_ is true; it is written
//       only by the permit holder, before the flag's release store, and never
//       again (until take(), which has exclusive access).
//   I2  the semaphore is closed only after initialized_ is true, so a waiter
//       that sees errc::closed sees the value (close's release store of the
//       waiter's state, or the closed bit, pairs with the waiter's acquire
//       load, and the flag store is sequenced before close).
//   I3  no permit is ever released after publication (it is forgotten), so
//       nobody else can ever hold the right to construct.
#pragma once

#include <atomic>
#include <coroutine>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "volt/expected.hpp"
#include "volt/sync/semaphore.hpp"
#include "volt/task/task.hpp"

namespace volt {

// Why OnceCell::set refused its value: kAlreadyInitialized, the cell holds a
// value; kInitializing, an initialiser holds the permit right now.
enum class [[nodiscard]] OnceCellSetError{kAlreadyInitialized, kInitializing};

// The outcome of OnceCell::set: the value was stored, or it is handed back
// with the reason.
template <class T>
class [[nodiscard]] OnceCellSetResult {
 public:
  OnceCellSetResult() noexcept = default;  // stored
  OnceCellSetResult(T rejected, OnceCellSetError error)
      : rejected_(std::in_place, std::move(rejected)), error_(error) {}

  bool ok() const noexcept { return !rejected_.has_value(); }
  explicit operator bool() const noexcept { return ok(); }
  // Why the value was refused; meaningful only when !ok().
  OnceCellSetError error() const noexcept { return error_; }
  bool is_already_initialized() const noexcept {
    return !ok() && error_ == OnceCellSetError::kAlreadyInitialized;
  }
  bool is_initializing() const noexcept {
    return !ok() && error_ == OnceCellSetError::kInitializing;
  }
  // The refused value. Throws std::bad_optional_access when ok().
  T& rejected() & { return rejected_.value(); }
  T rejected() && { return std::move(rejected_.value()); }

 private:
  std::optional<T> rejected_;  // engaged iff refused
  OnceCellSetError error_ = OnceCellSetError::kAlreadyInitialized;
};

template <class T>
class OnceCell {
  static_assert(std::is_object_v<T> && !std::is_array_v<T> && std::is_destructible_v<T>,
                "OnceCell<T>: T must be a destructible non-array object type");

 public:
  using SetError = OnceCellSetError;
  using SetResult = OnceCellSetResult<T>;

  OnceCell() noexcept : semaphore_(1) {}
  // A cell that starts out initialised with `value`.
  explicit OnceCell(T value) : OnceCell(std::in_place, std::move(value)) {}
  template <class... Args>
  explicit OnceCell(std::in_place_t, Args&&... args) : semaphore_(0) {
    std::construct_at(std::addressof(storage_.value), std::forward<Args>(args)...);
    // relaxed: nothing else can see the cell before its constructor returns;
    // whatever hands it to other threads orders this store for them.
    initialized_.store(true, std::memory_order_relaxed);
    semaphore_.close();  // I2: acquirers must see "initialised"
  }
  OnceCell(const OnceCell&) = delete;
  OnceCell& operator=(const OnceCell&) = delete;
  ~OnceCell() {
    // relaxed: destruction must not race any use (precondition), so the
    // caller's own synchronisation already ordered the publication before us.
    if (initialized_.load(std::memory_order_relaxed))
      std::destroy_at(std::addressof(storage_.value));
  }

  bool initialized() const noexcept {
    // acquire: pairs with the release store in publish(); seeing true means
    // the value's construction is visible.
    return initialized_.load(std::memory_order_acquire);
  }

  // The value, or nullptr if not (yet) initialised. Never waits.
  const T* get() const noexcept { return initialized() ? std::addressof(storage_.value) : nullptr; }
  // Mutable access. Precondition: exclusive access to the cell.
  T* get_mut() noexcept { return initialized() ? std::addressof(storage_.value) : nullptr; }

  // Stores `value` if the cell is empty and no initialiser is running;
  // otherwise hands it back in the result. Never waits.
  SetResult set(T value) {
    if (initialized()) return SetResult(std::move(value), SetError::kAlreadyInitialized);
    std::optional<SemaphorePermit> permit = semaphore_.try_acquire(1);
    if (!permit) {
      // Closed (published: I2) or the permit is held by an initialiser. The
      // two are told apart by a second look, which is also a true answer at
      // its own moment if that initialiser published in between.
      return SetResult(std::move(value), semaphore_.is_closed() ? SetError::kAlreadyInitialized
                                                                : SetError::kInitializing);
    }
    publish(std::move(value), *permit);
    return SetResult();
  }

  // Moves the value out and leaves the cell empty (ready to be initialised
  // again). Precondition: exclusive access to the cell.
  std::optional<T> take() {
    if (!initialized_.load(std::memory_order_relaxed)) return std::nullopt;  // exclusive: relaxed
    std::optional<T> out(std::in_place, std::move(storage_.value));
    std::destroy_at(std::addressof(storage_.value));
    initialized_.store(false, std::memory_order_relaxed);  // exclusive: nobody to order with
    // A closed semaphore cannot reopen: build a fresh one with the permit.
    // Nobody waits on it (exclusive access), so nothing points into it.
    std::destroy_at(std::addressof(semaphore_));
    std::construct_at(std::addressof(semaphore_), 1);
    return out;
  }

  template <class F>
  class GetOrInit;
  template <class F>
  class GetOrTryInit;

  // co_await gives const T&: the value, initialised by f() if the cell was
  // empty. f: a callable with no arguments returning an awaitable whose
  // result constructs a T.
  template <class F>
  GetOrInit<std::decay_t<F>> get_or_init(F&& f) {
    return GetOrInit<std::decay_t<F>>(*this, std::forward<F>(f));
  }
  // co_await gives Expected<const T&>: as get_or_init, but f's awaitable
  // yields Expected<T> and an error is returned, leaving the cell empty.
  template <class F>
  GetOrTryInit<std::decay_t<F>> get_or_try_init(F&& f) {
    return GetOrTryInit<std::decay_t<F>>(*this, std::forward<F>(f));
  }

 private:
  // Precondition: initialised.
  const T& value_unchecked() const noexcept { return storage_.value; }

  // Precondition: `permit` is the semaphore's one permit (the right to
  // construct, I1). Constructs the value and publishes it; if construction
  // throws, nothing is published and the permit goes back when its owner
  // drops it.
  template <class U>
  const T& publish(U&& value, SemaphorePermit& permit) {
    std::construct_at(std::addressof(storage_.value), std::forward<U>(value));
    // release: pairs with the acquire load in initialized(); the value's
    // construction above is visible to whoever sees true.
    initialized_.store(true, std::memory_order_release);
    semaphore_.close();  // wakes every waiter with errc::closed (I2)
    permit.forget();     // I3: the permit never returns
    return storage_.value;
  }

  // The slow path of get_or_init: take the initialisation permit, or learn
  // (errc::closed) that someone published. `f` lives in the GetOrInit that
  // owns this frame, so it outlives the frame.
  template <class F>
  Task<const T&> initialize(F& f) {
    Expected<SemaphorePermit> permit = co_await semaphore_.acquire(1);
    if (!permit) co_return value_unchecked();  // closed: published (I2)
    // Cancelled (frame destroyed) or throwing anywhere below: `permit` is
    // dropped and the semaphore hands it to the oldest waiter.
    co_return publish(co_await std::move(f)(), *permit);
  }
  template <class F>
  Task<Expected<const T&>> try_initialize(F& f) {
    Expected<SemaphorePermit> permit = co_await semaphore_.acquire(1);
    if (!permit) co_return value_unchecked();  // closed: published (I2)
    auto result = co_await std::move(f)();
    if (!result) co_return result.error();  // permit dropped: the next caller tries
    co_return publish(std::move(*result), *permit);
  }

  // The value, constructed in place; a union so that T needs no default
  // constructor and is destroyed only when initialised.
  union Storage {
    Storage() noexcept {}
    ~Storage() {}
    T value;
  };

  // The state word. false: no value (initial, and again after take()); true:
  // the value is constructed (I1). The only concurrent transition is
  // false -> true, by the permit holder in publish() (release store); the
  // others (constructor, take) happen with exclusive access. Read by every
  // get(): the flag and the value share a cache line, apart from the
  // semaphore's (Semaphore aligns its words to 64 bytes), which waiters and
  // initialisers write.
  std::atomic<bool> initialized_{false};
  Storage storage_;
  Semaphore semaphore_;  // one permit: the right to initialise
};

// The operation get_or_init returns. Movable only before it is awaited (e.g.
// into volt::timeout). Destroying it while it waits or initialises cancels
// that call (see the class contract).
template <class T>
template <class F>
class [[nodiscard]] OnceCell<T>::GetOrInit {
 public:
  GetOrInit(OnceCell& cell, F f) : cell_(&cell), f_(std::move(f)) {}
  GetOrInit(GetOrInit&& other) noexcept(std::is_nothrow_move_constructible_v<F>)
      : cell_(other.cell_), f_(std::move(other.f_)) {}
  GetOrInit(const GetOrInit&) = delete;
  GetOrInit& operator=(const GetOrInit&) = delete;

  // Set already: no frame, no wait. A frame left from an interrupted await
  // (see interrupted()) is cancelled first: awaiting again starts over.
  bool await_ready() noexcept {
    slow_ = {};
    return cell_->initialized();
  }
  void await_suspend(std::coroutine_handle<> self) {
    slow_ = cell_->initialize(f_);
    slow_.operator co_await().await_suspend(self);  // the poll loop runs it next
  }
  const T& await_resume() {
    if (!slow_) return cell_->value_unchecked();
    return slow_.operator co_await().await_resume();  // rethrows f's exception
  }

  // An lvalue operand of volt::timeout whose wait expired (Timeout calls
  // this): the slow path's frame was suspended inside the timeout's branch,
  // which is going away, so it is cancelled now (passing the turn to the
  // next caller, if it held it) rather than left holding it.
  void interrupted() noexcept { slow_ = {}; }

 private:
  OnceCell* cell_;
  F f_;                  // declared before slow_: outlives the frame using it
  Task<const T&> slow_;  // owned: destroying it cancels the call
};

template <class T>
template <class F>
class [[nodiscard]] OnceCell<T>::GetOrTryInit {
 public:
  GetOrTryInit(OnceCell& cell, F f) : cell_(&cell), f_(std::move(f)) {}
  GetOrTryInit(GetOrTryInit&& other) noexcept(std::is_nothrow_move_constructible_v<F>)
      : cell_(other.cell_), f_(std::move(other.f_)) {}
  GetOrTryInit(const GetOrTryInit&) = delete;
  GetOrTryInit& operator=(const GetOrTryInit&) = delete;

  bool await_ready() noexcept {
    slow_ = {};  // as GetOrInit's
    return cell_->initialized();
  }
  void await_suspend(std::coroutine_handle<> self) {
    slow_ = cell_->try_initialize(f_);
    slow_.operator co_await().await_suspend(self);
  }
  Expected<const T&> await_resume() {
    if (!slow_) return cell_->value_unchecked();
    return slow_.operator co_await().await_resume();
  }

  void interrupted() noexcept { slow_ = {}; }  // as GetOrInit's

 private:
  OnceCell* cell_;
  F f_;
  Task<Expected<const T&>> slow_;
};

// Tokio's path (tokio::sync::OnceCell).
namespace sync {
using volt::OnceCell;
}  // namespace sync

}  // namespace volt
