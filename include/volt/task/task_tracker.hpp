// volt/task/task_tracker.hpp: TaskTracker, a count of live tasks that can be
// closed and waited for (Tokio's tokio_util::task::TaskTracker): what a
// graceful shutdown waits on.
//
//   volt::TaskTracker tracker;
//   for (;;) {
//     auto conn = co_await listener.accept();
//     if (!conn) break;
//     (void)tracker.spawn(serve(std::move(conn->first)));   // counted until its frame is gone
//   }
//   tracker.close();                 // no more tasks are expected
//   co_await tracker.wait();         // every tracked task has ended
//
// Guarantees:
//  - track(task) returns a Task that runs `task` and counts as live from the
//    call until its frame is destroyed: when it completes, or is destroyed
//    unstarted, cancelled by timeout/select or aborted. spawn(task) /
//    spawn_on(task, handle) spawn track(task) and return its JoinHandle.
//    token() counts anything else (a TaskTrackerToken, live until destroyed).
//  - len() is the number of live tracked tasks and tokens; is_empty() is
//    len() == 0.
//  - close() marks the tracker closed (true if it was open); reopen() undoes
//    it (true if it was closed). Neither affects tracking: a closed tracker
//    still tracks new tasks, closing only decides when wait() completes.
//  - wait() completes once the tracker is closed and empty: at once if it
//    is when wait() is called, else at the first moment after that call at
//    which it becomes so (a task tracked or a reopen() later does not undo a
//    wait that was completed by then). Waiting allocates nothing (the waiter
//    lives in the Wait object, a Notify waiter); cancelling it is destroying
//    it.
//  - Counting costs one atomic add when a task is tracked and one atomic
//    subtraction when it ends (plus the waiters' wake-up when that ends the
//    wait), and one reference count each on the shared state.
//  - TaskTracker is a handle: copies share one tracker (Tokio's clone), which
//    lives as long as any copy, tracked task or token does; every operation
//    may be called from any thread.
//  - Must be awaited (wait()) inside a runtime task.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "volt/runtime/runtime.hpp"
#include "volt/sync/notify.hpp"
#include "volt/task/join_handle.hpp"
#include "volt/task/task.hpp"

namespace volt {

namespace detail {

// The state all copies of a TaskTracker, its tokens and tracked tasks share.
//
// state_: bit 0 kClosed; bits 1..63 the number of live tasks and tokens
// (kTaskOne each). "Closed and empty" is state_ == kClosed: whoever makes it
// so (the last task ending on a closed tracker, or close() on an empty one)
// calls notify_waiters(), which completes every Notified made before, i.e.
// every wait() that found the tracker not done (wait() makes its Notified
// before it loads state_; see TaskTracker::wait).
class TaskTrackerState {
 public:
  static constexpr std::uint64_t kClosed = 1;
  static constexpr std::uint64_t kTaskOne = 2;

  static TaskTrackerState* create();
  void retain() noexcept {
    // relaxed: the caller holds a reference (as shared_ptr's copy).
    refs_.fetch_add(1, std::memory_order_relaxed);
  }
  void release() noexcept {
    // acq_rel: the last holder sees every other holder's accesses before it
    // deletes (the same argument as shared_ptr).
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) destroy();
  }

  void add_task() noexcept {
    // relaxed: the count is only compared with zero by the last release;
    // nothing is published by starting to count.
    state_.fetch_add(kTaskOne, std::memory_order_relaxed);
  }
  void remove_task() noexcept {
    // release: what the task did happens before a wait() that sees the
    // tracker done (its acquire load, or notify_waiters' release/acquire).
    // acquire: close()'s bit, set by another thread, is seen with its count.
    if (state_.fetch_sub(kTaskOne, std::memory_order_acq_rel) == (kTaskOne | kClosed))
      notify_.notify_waiters();
  }
  bool close() noexcept;
  bool reopen() noexcept;

  // acquire: pairs with remove_task's release (see there).
  std::uint64_t load() const noexcept { return state_.load(std::memory_order_acquire); }
  Notify& notify() noexcept { return notify_; }

 private:
  TaskTrackerState() noexcept = default;
  ~TaskTrackerState() = default;
  void destroy() noexcept;

  std::atomic<std::uint64_t> state_{0};
  std::atomic<std::uint64_t> refs_{1};
  Notify notify_;
};

}  // namespace detail

// Counts one live task (or anything else) of a TaskTracker until destroyed.
class TaskTrackerToken {
 public:
  TaskTrackerToken(TaskTrackerToken&& other) noexcept
      : state_(std::exchange(other.state_, nullptr)) {}
  TaskTrackerToken& operator=(TaskTrackerToken&& other) noexcept {
    if (this != &other) {
      reset();
      state_ = std::exchange(other.state_, nullptr);
    }
    return *this;
  }
  TaskTrackerToken(const TaskTrackerToken&) = delete;
  TaskTrackerToken& operator=(const TaskTrackerToken&) = delete;
  ~TaskTrackerToken() { reset(); }

 private:
  friend class TaskTracker;
  explicit TaskTrackerToken(detail::TaskTrackerState* state) noexcept : state_(state) {
    state_->retain();
    state_->add_task();
  }
  void reset() noexcept {
    if (detail::TaskTrackerState* s = std::exchange(state_, nullptr)) {
      s->remove_task();
      s->release();
    }
  }

  detail::TaskTrackerState* state_;
};

class TaskTracker {
 public:
  class Wait;

  TaskTracker() : state_(detail::TaskTrackerState::create()) {}
  TaskTracker(const TaskTracker& other) noexcept : state_(other.state_) { state_->retain(); }
  TaskTracker& operator=(const TaskTracker& other) noexcept {
    other.state_->retain();
    state_->release();
    state_ = other.state_;
    return *this;
  }
  ~TaskTracker() { state_->release(); }

  // `task`, counted as live until its frame is destroyed.
  template <class T>
  Task<T> track(Task<T> task) {
    return tracked(std::move(task), token());
  }
  // Spawns track(task) on the current runtime / on `handle`'s.
  template <class T>
  JoinHandle<T> spawn(Task<T> task) {
    return volt::spawn(track(std::move(task)));
  }
  template <class T>
  JoinHandle<T> spawn_on(Task<T> task, const Handle& handle) {
    return handle.spawn(track(std::move(task)));
  }
  // A token that counts as a live task until destroyed.
  TaskTrackerToken token() noexcept { return TaskTrackerToken(state_); }

  bool close() noexcept { return state_->close(); }
  bool reopen() noexcept { return state_->reopen(); }
  bool is_closed() const noexcept {
    return (state_->load() & detail::TaskTrackerState::kClosed) != 0;
  }
  std::size_t len() const noexcept {
    return static_cast<std::size_t>(state_->load() / detail::TaskTrackerState::kTaskOne);
  }
  bool is_empty() const noexcept { return len() == 0; }

  // co_await: completes once the tracker is closed and empty (see above).
  Wait wait() const noexcept;

 private:
  template <class T>
  static Task<T> tracked(Task<T> task, [[maybe_unused]] TaskTrackerToken token) {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(task);
      co_return;
    } else {
      co_return co_await std::move(task);
    }
  }

  detail::TaskTrackerState* state_;  // never null
};

// The wait() operation. Holds its Notify waiter (no allocation) and a
// reference to the tracker's state.
class [[nodiscard]] TaskTracker::Wait {
 public:
  // Only before it is awaited (e.g. moved into a timeout).
  Wait(Wait&& other) noexcept
      : tracker_(other.tracker_), notified_(std::move(other.notified_)), done_(other.done_) {}
  Wait(const Wait&) = delete;
  Wait& operator=(const Wait&) = delete;
  Wait& operator=(Wait&&) = delete;
  ~Wait() = default;

  bool await_ready() { return done_ || notified_.await_ready(); }
  bool await_suspend(std::coroutine_handle<> self) { return notified_.await_suspend(self); }
  void await_resume() noexcept {
    if (!done_) notified_.await_resume();
  }

 private:
  friend class TaskTracker;
  Wait(const TaskTracker& tracker, Notify::Notified notified, bool done) noexcept
      : tracker_(tracker), notified_(std::move(notified)), done_(done) {}

  TaskTracker tracker_;  // keeps the Notify alive
  Notify::Notified notified_;
  bool done_;
};

inline TaskTracker::Wait TaskTracker::wait() const noexcept {
  // The Notified first, then the state: a task ending in between is seen by
  // the load, or its notify_waiters() completes this Notified (made before
  // it; see notify.hpp, notified()'s acquire).
  Notify::Notified notified = state_->notify().notified();
  const bool done = state_->load() == detail::TaskTrackerState::kClosed;
  return Wait(*this, std::move(notified), done);
}

}  // namespace volt
