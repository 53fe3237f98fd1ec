// volt/time/timeout.hpp: bound how long an operation may take.
//
//   volt::Expected<int> r = co_await volt::timeout(100ms, handle);
//   if (!r) { /* r.error() == volt::errc::timed_out; the wait was cancelled */ }
//   // volt::time::timeout / timeout_at / Timeout: the same, Tokio's path.
//   // An operand that returns an Expected gives Expected<Expected<U>>:
//   volt::Expected<volt::SemaphorePermit> p =
//       (co_await volt::time::timeout(10ms, sem.acquire())).flatten();  // outer error first
//
// `timeout(d, op)` / `timeout_at(deadline, op)` wrap anything awaitable (a
// Task, a JoinHandle, a oneshot receiver, a Sleep, yield_now(), ...).
//
// Guarantees:
//  - Returns Expected<T> (T: what `co_await op` returns): the value if the
//    operation completed first, errc::timed_out if the deadline came first.
//    T may itself be an Expected (sem.acquire(), a TcpStream connect, ...):
//    then `.flatten()` (volt/expected.hpp) gives one Expected, the timeout's
//    error first, else the operation's result.
//    An exception from the operation propagates out of the co_await.
//  - The operation is tried first: one that is ready at once returns its value
//    without reading the clock or registering a timer (0 allocations).
//    Otherwise the operation runs as a branch of the awaiting task beside the
//    timer (volt/detail/branch.hpp); a Task operand runs inside the awaiting
//    task, it is not spawned.
//  - On timeout the operation is cancelled by destruction, where it is
//    suspended: a Task operand's frame is destroyed (its destructors run); a
//    JoinHandle's wait is withdrawn and the handle stays usable (the task keeps
//    running). Nothing registered by the operation outlives the co_await.
//  - An operation that becomes ready in the same poll as the deadline wins.
//  - timeout(d, op) counts d from the first await. d <= 0: the operation gets
//    one try, then times out. Huge d saturates ("no deadline").
//  - The operand is held by reference if it is an lvalue, else moved in and
//    destroyed when the co_await completes (so the result must not refer into
//    it). An lvalue operand is the caller's: a Sleep stays registered (as
//    Tokio's `&mut sleep` in a select loop), a JoinHandle's wait is withdrawn
//    (the handle stays usable); a Task that timed out is destroyed (awaiting
//    it again throws errc::invalid_handle: its frame was suspended inside the
//    timeout and cannot be resumed elsewhere); an operation with an
//    `interrupted()` member (OnceCell::get_or_init) is told, and cancels the
//    coroutine it was running.
//  - A Timeout may be moved only before it is awaited, and awaited once; if
//    that wait is interrupted (the awaiting co_await itself cancelled, e.g. by
//    an outer timeout) the same task may await it again and it carries on
//    with the same operation and deadline. Otherwise re-awaiting throws
//    errc::invalid_handle.
//  - Allocation: the branch is one Task frame from the recycling frame
//    allocator (none in steady state); the timer lives in the Timeout.
//  - Must be awaited inside a runtime task.
#pragma once

#include <chrono>
#include <coroutine>
#include <exception>
#include <new>
#include <type_traits>
#include <utility>

#include "volt/detail/branch.hpp"
#include "volt/detail/operand.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/detail/timer_node.hpp"
#include "volt/expected.hpp"
#include "volt/time/clock.hpp"
#include "volt/time/sleep.hpp"

namespace volt {

template <class Op>
class [[nodiscard]] Timeout {
  // The operand (`Op` is `X&` for an lvalue, held by reference; `X`
  // otherwise, moved in), its awaiter and its branch: detail/operand.hpp.
  using Operand = detail::HeldOperand<Op>;

 public:
  using Value = typename Operand::Value;

  Timeout(Op&& op, Instant deadline)
      : operand_(std::forward<Op>(op)), deadline_(deadline), has_deadline_(true) {}
  Timeout(Op&& op, Duration d) : operand_(std::forward<Op>(op)), duration_(d) {}
  // Only before it is awaited (as when a Timeout is itself the operand of
  // another timeout); moving an awaited Timeout is a contract violation.
  Timeout(Timeout&& other) noexcept(std::is_nothrow_move_constructible_v<Operand>) requires(
      std::is_move_constructible_v<Operand>)
      : operand_(std::move(other.operand_)),
        deadline_(other.deadline_),
        duration_(other.duration_),
        has_deadline_(other.has_deadline_) {}
  Timeout(const Timeout&) = delete;
  Timeout& operator=(const Timeout&) = delete;
  Timeout& operator=(Timeout&&) = delete;
  ~Timeout() { finish(); }

  bool await_ready() {
    if (finished_) throw Error(errc::invalid_handle, "a Timeout can be awaited once");
    if (operand_.probed()) {
      // Awaited again after an interrupted wait (the co_await that held it
      // was cancelled, say by an outer timeout): carry on where it stopped,
      // same operation, same deadline. Only the task that started it may: the
      // operation's wakers are that task's.
      if (detail::current_task_or_throw() != owner_)
        throw Error(errc::invalid_handle, "an interrupted Timeout resumed by another task");
      return false;
    }
    return operand_.probe();  // ready: no timer at all
  }

  bool await_suspend(std::coroutine_handle<> self) {
    if (!operand_.started()) {
      owner_ = detail::current_task_or_throw();
      if (operand_.start()) return false;  // ready now
    } else if (operand_.step()) {
      return false;  // re-awaited, and the operation finished meanwhile
    }
    if (!has_deadline_) {
      if (duration_ <= Duration::zero()) return false;  // one try only: timed out
      deadline_ = detail::saturating_add(time::now(), duration_);
      has_deadline_ = true;
    }
    detail::TaskHeader* task = detail::suspend_current(self, &poll, this);
    if (timer_.arm(deadline_, detail::make_task_waker(task))) return true;
    // The deadline is already due (timeout_at in the past). The operation
    // wins a tie: one more look at it, then timed out.
    operand_.step();
    return false;
  }

  Expected<Value> await_resume() {
    // Whatever happens (a value, an exception, a timeout), the operation and
    // everything it registered are gone when the co_await completes.
    struct Finish {
      Timeout* t;
      ~Finish() { t->finish(); }
    } finish_after{this};
    // Ready in await_ready (the operation's own await_resume), or its branch
    // finished; otherwise timed out, and finish() cancels the operation.
    if (operand_.started() && !operand_.done()) return Expected<Value>(errc::timed_out);
    if constexpr (std::is_void_v<Value>) {
      operand_.take();
      return Expected<void>();
    } else {
      return Expected<Value>(operand_.take());
    }
  }

 private:
  // The task's readiness check: resume when the operation finished (stepping
  // it if its leaf is ready) or the timer fired.
  static bool poll(void* self) noexcept {
    auto* t = static_cast<Timeout*>(self);
    if (t->operand_.step()) return true;
    return t->timer_.fired();
  }

  // Cancels and destroys: the operation (its branch, awaiter and an owned
  // operand; an lvalue Task or an operation with interrupted() is told, see
  // detail/operand.hpp), then the timer. Idempotent.
  void finish() noexcept {
    if (finished_) return;
    finished_ = true;
    operand_.finish();
    timer_.cancel();
  }

  Operand operand_;
  detail::TimerNode timer_;
  Instant deadline_{};
  Duration duration_{};
  bool has_deadline_ = false;
  bool finished_ = false;
  detail::TaskHeader* owner_ = nullptr;  // the task that started the operation
};

template <class Rep, class Period, class Op>
Timeout<Op> timeout(std::chrono::duration<Rep, Period> d, Op&& op) {
  return Timeout<Op>(std::forward<Op>(op), detail::saturate_ns(d));
}

template <class Op>
Timeout<Op> timeout_at(Instant deadline, Op&& op) {
  return Timeout<Op>(std::forward<Op>(op), deadline);
}

// Tokio's paths (tokio::time::timeout): the same declarations.
namespace time {
using volt::Timeout;
using volt::timeout;
using volt::timeout_at;
}  // namespace time

}  // namespace volt
