// volt/task/join_handle.hpp: JoinHandle<T>, the owner's view of a spawned task.
//
// Returned by volt::spawn / Runtime::spawn / Handle::spawn.
//
// Guarantees:
//  - `co_await handle` (inside a task) suspends until the task completes and
//    returns its value, rethrows the exception that escaped it, or throws
//    volt::Error with errc::cancelled (aborted) or errc::runtime_shutdown (the
//    runtime shut down first). The handle is consumed: awaiting it again, or
//    awaiting a moved-from handle, throws volt::Error(errc::invalid_handle).
//    Waiting allocates nothing. If the awaiting task is itself aborted, the
//    wait is withdrawn and the handle stays usable.
//  - If the task is queued and not running (typically: spawned and not
//    started yet), `co_await` polls it in place, on the awaiting thread and
//    inside the awaiting task's poll, instead of waiting for a worker to get
//    to it; a fork-join tree then runs depth first. It spends the awaiting
//    poll's cooperative budget, so a loop of spawn-and-join still yields
//    every 128 joins; tasks of another runtime, aborted tasks, and nesting
//    deeper than 64 such polls on one thread are awaited the ordinary way.
//  - `join()` does the same from a thread outside the runtime, blocking it;
//    on a runtime thread it throws volt::Error(errc::blocking_in_runtime).
//  - `abort()` asks the task to stop: its frame is destroyed at its next
//    suspension point (or before it first runs), running the destructors of
//    whatever it awaits, and the handle then reports errc::cancelled. Aborting
//    a finished task does nothing.
//  - Destroying the handle detaches the task; it keeps running. An exception
//    that escapes a detached task (before or after the handle was dropped)
//    goes to the runtime's Builder::on_unhandled_exception hook, by default
//    one line on stderr; an exception `co_await` / `join()` rethrows does not.
//  - Every operation may be called from any thread; a handle itself is not
//    synchronised (one owner at a time).
//
// Example:
//
//   auto handle = volt::spawn(compute(7));
//   int value = co_await handle;   // or handle.join() outside the runtime
#pragma once

#include <cstdint>
#include <exception>
#include <utility>

#include "volt/detail/task_cell.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/error.hpp"

namespace volt {

namespace detail {
// Type-independent JoinHandle operations (src/task/join.cpp).
void join_handle_drop(TaskHeader* task) noexcept;
// Registers `waker` as the join waiter. Returns false if `task` has completed
// (the caller must not wait).
bool join_handle_register(TaskHeader* task, Waker waker);
void join_handle_withdraw(TaskHeader* task) noexcept;
void join_handle_abort(TaskHeader* task) noexcept;
void join_handle_block(TaskHeader* task);
// Polls `task` on this thread, inside the awaiting task's poll, if it is
// queued and not running (task_state.hpp, "Inline polls"). Returns whether it
// completed (false also when it could not be claimed: not queued, running,
// another runtime's, inline polls nested too deep, or no budget left).
bool join_inline(TaskHeader* task) noexcept;
// Consumes a cooperative-budget unit; false when the poll's budget is spent.
// Inline: channels and sync primitives call it on every operation that
// completes at once. Only a poll installs a positive budget (outside every
// task it is 0), so a positive one is the current task's to spend; the
// rest (spent, or no task) is decided out of line.
bool coop_try_consume_slow() noexcept;
inline bool coop_try_consume() noexcept {
  ThreadContext* ctx = this_thread_context();
  if (ctx->budget > 0) [[likely]] {
    --ctx->budget;
    return true;
  }
  return coop_try_consume_slow();
}
// Whether the current task's poll has no budget left, without spending any.
// Out of line: a thread_local read inline in a coroutine body can use an
// address computed before the coroutine moved to another thread (UBSan once
// caught it as a null ThreadContext); coop_try_consume, hot enough to be
// inline, reads it through this_thread_context() instead.
bool coop_budget_spent() noexcept;
// Suspends the current task for one trip through its scheduler's queue.
void yield_current(std::coroutine_handle<> suspended);
// The same, with a ResumeSlot check that runs when the task is polled again:
// a leaf that yields before trying (its budget spent) makes its first
// attempt there, and, if it must wait, registers from there.
void yield_current(std::coroutine_handle<> suspended, bool (*check)(void*) noexcept, void* context);
}  // namespace detail

template <class T>
class [[nodiscard]] JoinHandle {
 public:
  JoinHandle() noexcept = default;
  explicit JoinHandle(detail::TaskHeader* task) noexcept : task_(task) {}
  JoinHandle(JoinHandle&& other) noexcept : task_(std::exchange(other.task_, nullptr)) {}
  JoinHandle& operator=(JoinHandle&& other) noexcept {
    if (this != &other) {
      reset();
      task_ = std::exchange(other.task_, nullptr);
    }
    return *this;
  }
  JoinHandle(const JoinHandle&) = delete;
  JoinHandle& operator=(const JoinHandle&) = delete;
  ~JoinHandle() { reset(); }

  // True while the handle refers to a task whose result has not been taken.
  bool valid() const noexcept { return task_ != nullptr; }
  explicit operator bool() const noexcept { return valid(); }

  // True once the task has completed (with a value, an exception or
  // cancellation). False for an empty handle.
  bool is_finished() const noexcept { return task_ && task_->state.load().is_complete(); }

  // A process-unique id of the task (0 for an empty handle).
  std::uint64_t id() const noexcept { return task_ ? task_->id : 0; }

  // Gives up the handle's reference to the task without dropping it, leaving
  // the handle empty (used by JoinSet, which keeps the reference itself).
  detail::TaskHeader* release() noexcept { return std::exchange(task_, nullptr); }

  void abort() noexcept {
    if (task_) detail::join_handle_abort(task_);
  }

  // Blocks the calling (non-runtime) thread until the task completes.
  T join() {
    if (!task_) throw Error(errc::invalid_handle, "joining an empty JoinHandle");
    detail::join_handle_block(task_);
    return take();
  }

  class Awaiter {
   public:
    explicit Awaiter(JoinHandle& handle) noexcept : handle_(handle) {}
    Awaiter(const Awaiter&) = delete;
    Awaiter& operator=(const Awaiter&) = delete;
    ~Awaiter() {
      if (registered_) detail::join_handle_withdraw(handle_.task_);
    }

    bool await_ready() const noexcept {
      if (!handle_.task_) return true;  // await_resume reports invalid_handle
      return handle_.is_finished() && detail::coop_try_consume();
    }
    bool await_suspend(std::coroutine_handle<> self) {
      if (!handle_.task_->state.load().is_complete()) {
        // Not started yet (or woken and queued): run it here rather than wait
        // for a worker to get to it. A fork-join tree then runs depth first.
        if (detail::join_inline(handle_.task_)) return false;
        detail::TaskHeader* current = detail::suspend_current(self, &is_complete, handle_.task_);
        if (detail::join_handle_register(handle_.task_, detail::make_task_waker(current))) {
          registered_ = true;
          return true;
        }
        // Completed while registering: fall through to the ready path.
      }
      // Ready, but this poll's budget is spent: go round the queue once first.
      if (detail::coop_try_consume()) return false;
      detail::yield_current(self);
      return true;
    }
    T await_resume() {
      registered_ = false;  // completion consumed the registration (rule 3)
      if (!handle_.task_) throw Error(errc::invalid_handle, "awaiting an empty JoinHandle");
      return handle_.take();
    }

   private:
    static bool is_complete(void* task) noexcept {
      return static_cast<detail::TaskHeader*>(task)->state.load().is_complete();
    }

    JoinHandle& handle_;
    bool registered_ = false;
  };

  Awaiter operator co_await() & noexcept { return Awaiter(*this); }
  Awaiter operator co_await() && noexcept { return Awaiter(*this); }

 private:
  // Precondition: the task completed. Moves the outcome out, empties the handle.
  T take() {
    detail::TaskHeader* task = std::exchange(task_, nullptr);
    auto& output = detail::TaskCell<T>::from(task)->output;
    struct Release {
      detail::TaskHeader* task;
      ~Release() { detail::join_handle_drop(task); }
    } release{task};
    // An exception is consumed here (rethrown to the caller), so the release
    // does not find it in the slot and report it as unhandled.
    using Kind = typename detail::Result<T>::Kind;
    if (output.kind() == Kind::kException) std::rethrow_exception(output.take_exception());
    return output.get();
  }

  void reset() noexcept {
    if (task_) detail::join_handle_drop(std::exchange(task_, nullptr));
  }

  detail::TaskHeader* task_ = nullptr;
};

// Tokio's path (tokio::task::JoinHandle).
namespace task {
using volt::JoinHandle;
}  // namespace task

}  // namespace volt
