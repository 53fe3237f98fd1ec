// volt/task/join_set.hpp: JoinSet<T>, a collection of spawned tasks whose
// results are taken in the order the tasks finish (Tokio's JoinSet).
//
//   volt::JoinSet<int> set;
//   for (int i = 0; i < 10; ++i) set.spawn(fetch(i));
//   while (std::optional<volt::Expected<int>> r = co_await set.join_next()) {
//     if (*r) use(**r);                       // the value of the next task to finish
//     else log(r->error());                   // errc::cancelled (aborted), errc::runtime_shutdown
//   }
//   // Or take the first few and abort the rest:
//   std::optional<volt::Expected<int>> first = co_await set.join_next();
//   set.abort_all();                          // the others report errc::cancelled
//
// Guarantees:
//  - spawn(task) spawns on the current runtime (errc::no_runtime outside
//    one), spawn_on(task, handle) on `handle`'s; the task runs as any spawned
//    task (in parallel across workers) and stays in the set until its result
//    is taken.
//  - join_next() completes with the result of a task that has finished, in
//    the order they finished (the first to finish is taken first), waiting if
//    none has; with std::nullopt at once if the set is empty. The result is
//    the task's value in an Expected, or an error in it: errc::cancelled if
//    the task was aborted (abort_all), errc::runtime_shutdown if its runtime
//    shut down first (JoinHandle's codes). An exception that escaped the task
//    is rethrown from the co_await, as JoinHandle's co_await does; the task
//    has left the set then and the next join_next() carries on with the rest.
//    try_join_next() is the same without waiting: std::nullopt when no task
//    has finished yet (or the set is empty).
//  - Cancel-safe: destroying a join_next() before it completed (an outer
//    timeout, a select that another operand won, the awaiting task aborted)
//    takes nothing out of the set; every finished task's result stays there
//    for the next join_next().
//  - Waiting allocates nothing (the waker lives in the set); spawn allocates
//    the task (as volt::spawn) and one small entry, both from volt's
//    recycling frame allocator (none in steady state).
//  - abort_all() aborts every task in the set (JoinHandle::abort: each frame
//    is destroyed at its next suspension point); they stay in the set and
//    join_next() reports each as errc::cancelled, or its value if it finished
//    before the abort reached it.
//  - detach_all() empties the set; its tasks keep running, as with dropped
//    JoinHandles (an exception escaping one goes to the runtime's
//    on_unhandled_exception hook).
//  - Destroying the set (or assigning over it) aborts every task still in it
//    and detaches them: their frames are destroyed by the runtime soon after,
//    wherever they are suspended, and nothing they finish with is kept.
//  - len() counts the tasks in the set, running or finished and not yet
//    taken; is_empty() is len() == 0.
//  - Tasks finish on any worker; the set's state shared with them is
//    reference-counted, so the set may be destroyed while tasks are finishing
//    elsewhere (see src/task/join_set.cpp for who keeps what alive).
// Preconditions (undefined behaviour otherwise): a JoinSet is not
// synchronised: one task (or thread) uses it at a time, and at most one
// join_next() of it is being awaited at a time; the set outlives its
// join_next() operations and is moved only while none exists.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <utility>

#include "volt/detail/atomic_waker.hpp"
#include "volt/detail/intrusive_list.hpp"
#include "volt/detail/spin_lock.hpp"
#include "volt/detail/task_cell.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/expected.hpp"
#include "volt/runtime/runtime.hpp"
#include "volt/task/join_handle.hpp"
#include "volt/task/task.hpp"

namespace volt {

namespace detail {

class JoinSetCore;

// One task of a JoinSet. The IntrusiveLink is its place in the set's list of
// every entry (owner only); ready_prev/ready_next its place in the list of
// finished tasks (guarded by the core's lock).
struct JoinSetEntry : IntrusiveLink {
  // Where the entry is, as the completing side sees it (guarded by the
  // core's lock). kRunning -> kReady (the task finished: in the ready list)
  // -> kGone (its result taken), or kRunning/kReady -> kGone (detached).
  enum class Place : std::uint8_t { kRunning, kReady, kGone };

  JoinSetCore* core;                   // immutable; the entry holds a reference on it
  TaskHeader* task = nullptr;          // the set's JoinHandle reference; owner only
  JoinSetEntry* ready_prev = nullptr;  // guarded by the core's lock
  JoinSetEntry* ready_next = nullptr;  // guarded by the core's lock
  Place place = Place::kRunning;       // guarded by the core's lock
  // One for the set while the entry is in it, one per copy of its join
  // waker (registered with the task). The last one frees the entry.
  std::atomic<std::uint32_t> refs{1};

  explicit JoinSetEntry(JoinSetCore* c) noexcept : core(c) {}
};

// The state a JoinSet shares with the completions of its tasks
// (src/task/join_set.cpp has the protocol and the lifetimes).
class JoinSetCore {
 public:
  static JoinSetCore* create();
  JoinSetCore(const JoinSetCore&) = delete;
  JoinSetCore& operator=(const JoinSetCore&) = delete;

  // Drops the set's reference (the entries hold their own).
  void release() noexcept;

  // ---- owner (the JoinSet's user) only ----

  // A new entry for a task about to be spawned (may throw std::bad_alloc,
  // before anything is spawned).
  JoinSetEntry* new_entry();
  // An entry whose spawn failed.
  void discard(JoinSetEntry* entry) noexcept;
  // Adds the spawned task (its JoinHandle's reference) under `entry` and
  // registers the entry's waker as its join waker.
  void insert(JoinSetEntry* entry, TaskHeader* task) noexcept;
  // The oldest finished task, out of the set (its JoinHandle reference: the
  // caller takes the output and drops it), or nullptr.
  TaskHeader* pop_ready() noexcept;
  void abort_all() noexcept;
  void detach_all() noexcept;
  std::size_t len() const noexcept { return all_.size(); }

  // Whether a finished task waits in the ready list. acquire: pairs with the
  // release increment in finish() (the entry linked before it is visible).
  bool has_ready() const noexcept { return ready_count_.load(std::memory_order_acquire) != 0; }

  // The waiting join_next()'s waker (`who` names it, so that one never
  // withdraws another's), as the receiver of an unbounded channel.
  bool armed_for(const void* who) const noexcept { return armed_by_ == who && waker_.armed(); }
  AtomicWaker::Arm arm_for(const void* who, Waker waker) noexcept {
    const AtomicWaker::Arm armed = waker_.arm(std::move(waker));
    armed_by_ = armed == AtomicWaker::Arm::kArmed ? who : nullptr;
    return armed;
  }
  void disarm_for(const void* who) noexcept {
    if (armed_by_ != who) return;
    armed_by_ = nullptr;
    waker_.disarm();
  }

  // ---- the completing side (any thread), through the entry's waker ----

  // The entry's task finished: into the ready list, wake the waiter.
  void finish(JoinSetEntry* entry) noexcept;
  // Drops one reference of `entry`; the last frees it.
  static void release_entry(JoinSetEntry* entry) noexcept;

 private:
  JoinSetCore() noexcept = default;
  ~JoinSetCore() = default;
  // Unlinks `entry` from the ready list and marks it kGone.
  void remove_locked(JoinSetEntry* entry) noexcept;

  // One for the JoinSet, one per entry alive. The last frees the core.
  std::atomic<std::uint64_t> refs_{1};
  IntrusiveList<JoinSetEntry> all_;  // every entry in the set; owner only
  SpinLock lock_;
  JoinSetEntry* ready_head_ = nullptr;  // guarded by lock_; oldest first
  JoinSetEntry* ready_tail_ = nullptr;  // guarded by lock_
  // Entries in the ready list: written under lock_, read lock-free by the
  // waiting join_next()'s readiness check.
  std::atomic<std::size_t> ready_count_{0};
  AtomicWaker waker_;
  const void* armed_by_ = nullptr;  // owner only
};

}  // namespace detail

template <class T>
class JoinSet {
 public:
  class JoinNext;

  JoinSet() noexcept = default;
  JoinSet(JoinSet&& other) noexcept : core_(std::exchange(other.core_, nullptr)) {}
  JoinSet& operator=(JoinSet&& other) noexcept {
    if (this != &other) {
      reset();
      core_ = std::exchange(other.core_, nullptr);
    }
    return *this;
  }
  JoinSet(const JoinSet&) = delete;
  JoinSet& operator=(const JoinSet&) = delete;
  ~JoinSet() { reset(); }

  // Spawns `task` on the current runtime into the set.
  void spawn(Task<T> task) {
    add([&task] { return volt::spawn(std::move(task)); });
  }
  // Spawns `task` on `handle`'s runtime into the set.
  void spawn_on(Task<T> task, const Handle& handle) {
    add([&task, &handle] { return handle.spawn(std::move(task)); });
  }

  // co_await: the result of the next task to finish (see the header).
  JoinNext join_next() noexcept { return JoinNext(this); }

  // The result of a finished task, or std::nullopt if none has finished.
  std::optional<Expected<T>> try_join_next() {
    detail::TaskHeader* task = core_ ? core_->pop_ready() : nullptr;
    if (!task) return std::nullopt;
    return take(task);
  }

  void abort_all() noexcept {
    if (core_) core_->abort_all();
  }
  void detach_all() noexcept {
    if (core_) core_->detach_all();
  }
  std::size_t len() const noexcept { return core_ ? core_->len() : 0; }
  bool is_empty() const noexcept { return len() == 0; }

 private:
  template <class SpawnFn>
  void add(SpawnFn spawn_fn) {
    if (!core_) core_ = detail::JoinSetCore::create();
    detail::JoinSetEntry* entry = core_->new_entry();
    JoinHandle<T> handle;
    try {
      handle = spawn_fn();
    } catch (...) {
      core_->discard(entry);
      throw;
    }
    core_->insert(entry, handle.release());
  }

  // The finished task's outcome; drops the set's reference to it.
  static Expected<T> take(detail::TaskHeader* task) {
    detail::Result<T>& output = detail::TaskCell<T>::from(task)->output;
    struct Release {
      detail::TaskHeader* task;
      ~Release() { detail::join_handle_drop(task); }
    } release{task};
    using Kind = typename detail::Result<T>::Kind;
    switch (output.kind()) {
      case Kind::kException:
        // Taken out first, so the release does not report it as unhandled.
        std::rethrow_exception(output.take_exception());
      case Kind::kError:
        return Expected<T>(output.error());
      case Kind::kValue:
        if constexpr (std::is_void_v<T>) {
          return Expected<T>();
        } else {
          return Expected<T>(std::in_place, output.get());
        }
      case Kind::kEmpty:
        break;
    }
    throw Error(errc::invalid_handle, "a JoinSet task finished without an outcome");
  }

  void reset() noexcept {
    if (detail::JoinSetCore* core = std::exchange(core_, nullptr)) {
      core->abort_all();
      core->detach_all();
      core->release();
    }
  }

  detail::JoinSetCore* core_ = nullptr;  // created by the first spawn
};

// The join_next() operation: co_await gives std::optional<Expected<T>>.
// Nothing is taken before await_resume, so destroying it loses nothing.
template <class T>
class [[nodiscard]] JoinSet<T>::JoinNext {
 public:
  // Only before it is awaited (e.g. moved into a timeout or a select).
  JoinNext(JoinNext&& other) noexcept : set_(other.set_) {}
  JoinNext(const JoinNext&) = delete;
  JoinNext& operator=(const JoinNext&) = delete;
  JoinNext& operator=(JoinNext&&) = delete;
  ~JoinNext() { disarm(); }

  bool await_ready() {
    detail::JoinSetCore* core = set_->core_;
    if (!core || core->len() == 0) return true;  // empty: std::nullopt
    // Awaited again after an interrupted wait: no new budget unit, and the
    // waker armed then is kept.
    if (waiting_) return core->has_ready();
    // The budget before the result: a task whose budget is spent yields
    // holding nothing, and looks again from the check.
    if (!detail::coop_try_consume()) {
      yielding_ = true;
      return false;
    }
    return core->has_ready();
  }
  bool await_suspend(std::coroutine_handle<> self) {
    if (yielding_) {
      yielding_ = false;
      detail::yield_current(self, &ready_check, this);
      return true;
    }
    detail::TaskHeader* task = detail::suspend_current(self, &ready_check, this);
    return must_wait(task);
  }
  std::optional<Expected<T>> await_resume() {
    disarm();
    return set_->try_join_next();
  }

 private:
  friend class JoinSet;
  explicit JoinNext(JoinSet* set) noexcept : set_(set) {}

  // Arms the set's waker for `task` (unless this JoinNext's is still armed),
  // then re-checks: a task finishing in between either is seen here or finds
  // the waker armed (AtomicWaker's Dekker pair). True if the task must wait.
  bool must_wait(detail::TaskHeader* task) noexcept {
    detail::JoinSetCore& core = *set_->core_;
    waiting_ = true;
    if (!core.armed_for(this) &&
        core.arm_for(this, detail::make_task_waker(task)) == detail::AtomicWaker::Arm::kBusy) {
      // A completion is waking the previous waker right now: act as woken.
      // We hold the task (it is being polled), so this only marks it to be
      // polled again, which runs ready_check.
      task->wake_by_ref();
      return true;
    }
    return !core.has_ready();
  }

  void disarm() noexcept {
    if (!waiting_) return;
    waiting_ = false;
    set_->core_->disarm_for(this);
  }

  // The task's readiness check (runs when it is polled): resume if a task
  // has finished; otherwise (re-)arm and stay.
  static bool ready_check(void* context) noexcept {
    JoinNext& self = *static_cast<JoinNext*>(context);
    if (self.set_->core_->has_ready()) return true;
    return !self.must_wait(detail::tls_context.current_task);
  }

  JoinSet* set_;
  bool waiting_ = false;   // armed (or tried to) and not yet resumed
  bool yielding_ = false;  // budget spent: the first look is in ready_check
};

// Tokio's path (tokio::task::JoinSet).
namespace task {
using volt::JoinSet;
}  // namespace task

}  // namespace volt
