// volt/sync/rwlock.hpp: an async reader-writer lock that owns the value it
// protects.
//
//   volt::RwLock<Config> config;
//   {
//     auto reader = co_await config.read();    // shared: many at once
//     use(reader->port);
//   }
//   {
//     auto writer = co_await config.write();   // exclusive
//     writer->port = 8080;
//   }                                          // unlocked here
//
//   // At most 4 readers at once (Tokio's with_max_readers):
//   auto pool = volt::RwLock<Pool>::with_max_readers(Pool{}, 4);
//   auto shared = std::make_shared<volt::RwLock<Pool>>(volt::MaxReaders{4}, Pool{});
//   volt::OwnedRwLockReadGuard<Pool> r = co_await volt::RwLock<Pool>::read_owned(shared);
//
//   // A guard on part of the value (still holds the lock on all of it):
//   auto w = co_await config.write();
//   auto port = volt::RwLockWriteGuard<Config>::map(std::move(w),
//                                                   [](Config& c) -> int& { return c.port; });
//   auto read_port = std::move(port).downgrade();   // a read lock, still on the int
//
// Guarantees:
//  - A Semaphore of max_readers() permits (kMaxReaders unless chosen; the
//    reference design's, docs/design.md): a reader takes one, a writer takes
//    all of them. So it inherits the semaphore's properties: no allocation
//    to wait, a waiting read() or write() cancelled by destruction (abort,
//    timeout, select) with nothing lost; the barging mode of Mutex
//    (Semaphore::Fairness::kBarging): waiters are woken oldest first, a
//    running task may get in ahead of them, and one passed over 3 times in
//    a row is served next, in order.
//  - Writer priority, from partial grants: a queued writer (the oldest
//    waiter) drains the permits as readers return them, so a reader that
//    arrives after it finds none and waits behind it, however many readers
//    hold the lock, except when it comes between a return and the writer's
//    retry; a writer passed over so 3 times is served next. A steady
//    stream of readers cannot starve a writer.
//  - The guards are the only way to the value (const for readers); destroying
//    one unlocks. WriteGuard::downgrade() turns a write lock into a read lock
//    without letting a writer in between. A moved-from guard may only be
//    destroyed or assigned to.
//  - try_read()/try_write() never wait; read_blocking()/write_blocking() are
//    for plain threads (errc::blocking_in_runtime on a runtime thread).
//  - More than max_readers() simultaneous readers: the next one waits (as if
//    a writer held the lock) until one leaves. RwLock(MaxReaders{n}, args...)
//    and with_max_readers(value, n) choose n; n == 0 or n > kMaxReaders is
//    Error(errc::invalid_argument). (The count is a tagged first argument,
//    not a trailing one, so that it can never be taken for an argument of
//    T's constructor, as std::string(s, 3) would be.)
//  - Owned guards: read_owned()/write_owned() (and try_ forms) take a
//    std::shared_ptr<RwLock>; the operation and the guard hold a reference
//    (an OwnedSemaphorePermit aliasing the shared_ptr), so the lock lives
//    until the last of them is gone, also when the runtime destroys a task
//    holding one at shutdown. A null shared_ptr is
//    Error(errc::invalid_argument). A plain guard must not outlive its
//    RwLock.
//  - Mapping: ReadGuard::map(std::move(g), f), f(const T&) returning
//    const U&, and WriteGuard::map, f(T&) returning U&, give a guard on that
//    U holding the same lock; try_map(g, f) with f returning a pointer: null
//    gives nullopt and leaves g as it was (still locked), otherwise g is
//    consumed. If f throws, the guard keeps the lock. A mapped write guard
//    downgrades like any write guard (to a read guard on the same U). The
//    reference must point into what the lock protects (not checked).
//  - into_inner() (on an rvalue) moves the value out, get_mut() gives it
//    without locking: for a caller with exclusive access; a guard held at
//    the call is refused with Error(errc::invalid_argument) (a check of the
//    count, not a lock).
#pragma once

#include <coroutine>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "volt/sync/semaphore.hpp"

namespace volt {

template <class T>
class RwLock;

// The chosen maximum of simultaneous readers: RwLock(MaxReaders{n}, args...).
struct MaxReaders {
  std::uint64_t value;
};

// A shared lock, giving const T&. Permit: SemaphorePermit (RwLockReadGuard)
// or OwnedSemaphorePermit (OwnedRwLockReadGuard, keeps the lock alive).
template <class Permit, class T>
class [[nodiscard]] BasicRwLockReadGuard {
 public:
  BasicRwLockReadGuard(BasicRwLockReadGuard&&) noexcept = default;
  BasicRwLockReadGuard& operator=(BasicRwLockReadGuard&&) noexcept = default;
  const T& operator*() const noexcept { return *value_; }
  const T* operator->() const noexcept { return value_; }

  // The same read lock, giving f(value) (a const reference into the value).
  template <class F>
  static auto map(BasicRwLockReadGuard&& guard, F&& f) {
    using R = std::invoke_result_t<F&, const T&>;
    static_assert(std::is_lvalue_reference_v<R>, "RwLockReadGuard::map: f must return a reference");
    using U = std::remove_cvref_t<R>;
    const U& mapped = std::invoke(f, *guard.value_);
    return BasicRwLockReadGuard<Permit, U>(std::move(guard.permit_), std::addressof(mapped));
  }
  // As map, f returning a pointer: null gives nullopt and leaves guard as it
  // was.
  template <class F>
  static auto try_map(BasicRwLockReadGuard& guard, F&& f) {
    using R = std::invoke_result_t<F&, const T&>;
    static_assert(std::is_pointer_v<R>, "RwLockReadGuard::try_map: f must return a pointer");
    using U = std::remove_cv_t<std::remove_pointer_t<R>>;
    const U* mapped = std::invoke(f, *guard.value_);
    if (mapped == nullptr) return std::optional<BasicRwLockReadGuard<Permit, U>>();
    return std::optional<BasicRwLockReadGuard<Permit, U>>(
        BasicRwLockReadGuard<Permit, U>(std::move(guard.permit_), mapped));
  }

 private:
  template <class>
  friend class RwLock;
  template <class, class>
  friend class BasicRwLockReadGuard;
  template <class, class>
  friend class BasicRwLockWriteGuard;
  BasicRwLockReadGuard(Permit permit, const T* value) noexcept
      : permit_(std::move(permit)), value_(value) {}
  Permit permit_;  // one permit; unlocks when destroyed
  const T* value_;
};

// The exclusive lock, giving T&.
template <class Permit, class T>
class [[nodiscard]] BasicRwLockWriteGuard {
 public:
  BasicRwLockWriteGuard(BasicRwLockWriteGuard&&) noexcept = default;
  BasicRwLockWriteGuard& operator=(BasicRwLockWriteGuard&&) noexcept = default;
  T& operator*() const noexcept { return *value_; }
  T* operator->() const noexcept { return value_; }

  // Keeps one permit as a read lock and returns the others: readers queued
  // behind this writer may enter, a writer may not (it needs them all).
  // Consumes the guard. On a mapped guard, the read guard is on the same
  // part of the value.
  BasicRwLockReadGuard<Permit, T> downgrade() && {
    Permit read = permit_.split(1);
    permit_.reset();
    return BasicRwLockReadGuard<Permit, T>(std::move(read), value_);
  }

  // The same write lock, giving f(value) (a reference into the value).
  template <class F>
  static auto map(BasicRwLockWriteGuard&& guard, F&& f) {
    using R = std::invoke_result_t<F&, T&>;
    static_assert(std::is_lvalue_reference_v<R>,
                  "RwLockWriteGuard::map: f must return a reference");
    using U = std::remove_reference_t<R>;
    U& mapped = std::invoke(f, *guard.value_);
    return BasicRwLockWriteGuard<Permit, U>(std::move(guard.permit_), std::addressof(mapped));
  }
  // As map, f returning a pointer: null gives nullopt and leaves guard as it
  // was.
  template <class F>
  static auto try_map(BasicRwLockWriteGuard& guard, F&& f) {
    using R = std::invoke_result_t<F&, T&>;
    static_assert(std::is_pointer_v<R>, "RwLockWriteGuard::try_map: f must return a pointer");
    using U = std::remove_pointer_t<R>;
    U* mapped = std::invoke(f, *guard.value_);
    if (mapped == nullptr) return std::optional<BasicRwLockWriteGuard<Permit, U>>();
    return std::optional<BasicRwLockWriteGuard<Permit, U>>(
        BasicRwLockWriteGuard<Permit, U>(std::move(guard.permit_), mapped));
  }

 private:
  template <class>
  friend class RwLock;
  template <class, class>
  friend class BasicRwLockWriteGuard;
  BasicRwLockWriteGuard(Permit permit, T* value) noexcept
      : permit_(std::move(permit)), value_(value) {}
  Permit permit_;  // max_readers() permits; unlocks when destroyed
  T* value_;
};

template <class T>
using RwLockReadGuard = BasicRwLockReadGuard<SemaphorePermit, T>;
template <class T>
using RwLockWriteGuard = BasicRwLockWriteGuard<SemaphorePermit, T>;
template <class T>
using OwnedRwLockReadGuard = BasicRwLockReadGuard<OwnedSemaphorePermit, T>;
template <class T>
using OwnedRwLockWriteGuard = BasicRwLockWriteGuard<OwnedSemaphorePermit, T>;
// What map gives: the same types (a guard is a lock plus a reference).
template <class U>
using RwLockMappedWriteGuard = BasicRwLockWriteGuard<SemaphorePermit, U>;
template <class U>
using OwnedRwLockMappedWriteGuard = BasicRwLockWriteGuard<OwnedSemaphorePermit, U>;

namespace detail {
// Whether a constructor's arguments start with MaxReaders.
template <class... Args>
inline constexpr bool kStartsWithMaxReaders = false;
template <class First, class... Rest>
inline constexpr bool kStartsWithMaxReaders<First, Rest...> =
    std::is_same_v<std::remove_cvref_t<First>, MaxReaders>;
}  // namespace detail

template <class T>
class RwLock {
 public:
  // Tokio's bound (u32::MAX >> 3): far more readers than a program holds at
  // once, and a writer's acquire of all of them is one semaphore request.
  static constexpr std::uint64_t kMaxReaders = (std::uint64_t{1} << 29) - 1;

  using ReadGuard = RwLockReadGuard<T>;
  using WriteGuard = RwLockWriteGuard<T>;

  // kMaxReaders readers at most; T constructed from args.
  template <class... Args>
  requires(!detail::kStartsWithMaxReaders<Args...>) explicit RwLock(Args&&... args)
      : RwLock(MaxReaders{kMaxReaders}, std::forward<Args>(args)...) {}
  // At most max_reads.value readers at once; 0 or more than kMaxReaders
  // throws Error(errc::invalid_argument).
  template <class... Args>
  explicit RwLock(MaxReaders max_reads, Args&&... args)
      : max_reads_(checked_max(max_reads.value)),
        semaphore_(max_reads_, Semaphore::Fairness::kBarging),
        value_(std::forward<Args>(args)...) {}
  RwLock(const RwLock&) = delete;
  RwLock& operator=(const RwLock&) = delete;

  // Tokio's RwLock::with_max_readers(value, max_reads).
  static RwLock with_max_readers(T value, std::uint64_t max_reads) {
    return RwLock(MaxReaders{max_reads}, std::move(value));
  }

  std::uint64_t max_readers() const noexcept { return max_reads_; }

  class [[nodiscard]] Read {
   public:
    explicit Read(RwLock& lock) noexcept : lock_(lock), acquire_(lock.semaphore_.acquire(1)) {}
    bool await_ready() { return acquire_.await_ready(); }
    bool await_suspend(std::coroutine_handle<> self) { return acquire_.await_suspend(self); }
    // The semaphore is never closed: the permit is always there.
    ReadGuard await_resume() { return ReadGuard(acquire_.await_resume().value(), &lock_.value_); }

   private:
    RwLock& lock_;
    Semaphore::Acquire acquire_;
  };

  class [[nodiscard]] Write {
   public:
    explicit Write(RwLock& lock) noexcept
        : lock_(lock), acquire_(lock.semaphore_.acquire(lock.max_reads_)) {}
    bool await_ready() { return acquire_.await_ready(); }
    bool await_suspend(std::coroutine_handle<> self) { return acquire_.await_suspend(self); }
    WriteGuard await_resume() { return WriteGuard(acquire_.await_resume().value(), &lock_.value_); }

   private:
    RwLock& lock_;
    Semaphore::Acquire acquire_;
  };

  // read()/write() on a shared lock; co_await gives the owned guard. Holds a
  // reference to the lock from construction (inside its AcquireOwned).
  class [[nodiscard]] ReadOwned {
   public:
    bool await_ready() { return acquire_.await_ready(); }
    bool await_suspend(std::coroutine_handle<> self) { return acquire_.await_suspend(self); }
    OwnedRwLockReadGuard<T> await_resume() {
      return OwnedRwLockReadGuard<T>(acquire_.await_resume().value(), value_);
    }

   private:
    friend class RwLock;
    ReadOwned(std::shared_ptr<Semaphore> semaphore, const T* value)
        : acquire_(std::move(semaphore), 1), value_(value) {}
    Semaphore::AcquireOwned acquire_;
    const T* value_;
  };
  class [[nodiscard]] WriteOwned {
   public:
    bool await_ready() { return acquire_.await_ready(); }
    bool await_suspend(std::coroutine_handle<> self) { return acquire_.await_suspend(self); }
    OwnedRwLockWriteGuard<T> await_resume() {
      return OwnedRwLockWriteGuard<T>(acquire_.await_resume().value(), value_);
    }

   private:
    friend class RwLock;
    WriteOwned(std::shared_ptr<Semaphore> semaphore, std::uint64_t n, T* value)
        : acquire_(std::move(semaphore), n), value_(value) {}
    Semaphore::AcquireOwned acquire_;
    T* value_;
  };

  // Waits for a shared lock; co_await gives the ReadGuard.
  Read read() noexcept { return Read(*this); }
  // Waits for the exclusive lock; co_await gives the WriteGuard.
  Write write() noexcept { return Write(*this); }

  // Waits for a shared lock of *lock; co_await gives an
  // OwnedRwLockReadGuard<T>, which keeps the lock alive. Null:
  // Error(errc::invalid_argument).
  static ReadOwned read_owned(std::shared_ptr<RwLock> lock) {
    const T* value = lock ? &lock->value_ : nullptr;
    return ReadOwned(semaphore_of(std::move(lock)), value);
  }
  // Waits for the exclusive lock of *lock; co_await gives an
  // OwnedRwLockWriteGuard<T>. Null: Error(errc::invalid_argument).
  static WriteOwned write_owned(std::shared_ptr<RwLock> lock) {
    T* value = lock ? &lock->value_ : nullptr;
    const std::uint64_t n = lock ? lock->max_reads_ : 1;
    return WriteOwned(semaphore_of(std::move(lock)), n, value);
  }

  std::optional<ReadGuard> try_read() {
    std::optional<SemaphorePermit> permit = semaphore_.try_acquire(1);
    if (!permit) return std::nullopt;
    return ReadGuard(std::move(*permit), &value_);
  }
  std::optional<WriteGuard> try_write() {
    std::optional<SemaphorePermit> permit = semaphore_.try_acquire(max_reads_);
    if (!permit) return std::nullopt;
    return WriteGuard(std::move(*permit), &value_);
  }
  // try_read()/try_write() giving owned guards. Null:
  // Error(errc::invalid_argument).
  static std::optional<OwnedRwLockReadGuard<T>> try_read_owned(std::shared_ptr<RwLock> lock) {
    const T* value = lock ? &lock->value_ : nullptr;
    std::optional<OwnedSemaphorePermit> permit =
        Semaphore::try_acquire_owned(semaphore_of(std::move(lock)), 1);
    if (!permit) return std::nullopt;
    return OwnedRwLockReadGuard<T>(std::move(*permit), value);
  }
  static std::optional<OwnedRwLockWriteGuard<T>> try_write_owned(std::shared_ptr<RwLock> lock) {
    T* value = lock ? &lock->value_ : nullptr;
    const std::uint64_t n = lock ? lock->max_reads_ : 1;
    std::optional<OwnedSemaphorePermit> permit =
        Semaphore::try_acquire_owned(semaphore_of(std::move(lock)), n);
    if (!permit) return std::nullopt;
    return OwnedRwLockWriteGuard<T>(std::move(*permit), value);
  }

  ReadGuard read_blocking() { return ReadGuard(semaphore_.acquire_blocking(1).value(), &value_); }
  WriteGuard write_blocking() {
    return WriteGuard(semaphore_.acquire_blocking(max_reads_).value(), &value_);
  }

  // The value, for a caller with exclusive access (see the header).
  T& get_mut() {
    check_unlocked("RwLock::get_mut");
    return value_;
  }
  // Moves the value out of an unlocked lock (std::move(l).into_inner()).
  T into_inner() && {
    check_unlocked("RwLock::into_inner");
    return std::move(value_);
  }

 private:
  static std::uint64_t checked_max(std::uint64_t max_reads) {
    if (max_reads == 0 || max_reads > kMaxReaders)
      throw Error(errc::invalid_argument, "RwLock: max readers must be in [1, kMaxReaders]");
    return max_reads;
  }
  // The semaphore as a shared_ptr sharing ownership of the whole lock
  // (aliasing constructor). An empty pointer stays empty (refused by
  // AcquireOwned/try_acquire_owned).
  static std::shared_ptr<Semaphore> semaphore_of(std::shared_ptr<RwLock> lock) {
    if (!lock) return nullptr;
    Semaphore* semaphore = &lock->semaphore_;
    return std::shared_ptr<Semaphore>(std::move(lock), semaphore);
  }
  void check_unlocked(const char* what) const {
    // acquire (inside available_permits): pairs with the release of the last
    // guard's permits, so that holder's writes are visible.
    if (semaphore_.available_permits() != max_reads_)
      throw Error(errc::invalid_argument, std::string(what) + ": the lock is held");
  }

  std::uint64_t max_reads_;  // before semaphore_: initialised first
  Semaphore semaphore_;
  T value_;
};

// Tokio's paths (tokio::sync::RwLock and its guards).
namespace sync {
using volt::OwnedRwLockMappedWriteGuard;
using volt::OwnedRwLockReadGuard;
using volt::OwnedRwLockWriteGuard;
using volt::RwLock;
using volt::RwLockMappedWriteGuard;
using volt::RwLockReadGuard;
using volt::RwLockWriteGuard;
}  // namespace sync

}  // namespace volt
