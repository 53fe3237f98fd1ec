// volt/time/timeout.hpp: bound how long an operation may take.
//
//   volt::Expected<int> r = co_await volt::timeout(100ms, handle);
//   if (!r) { /* r.error() == volt::errc::timed_out; the wait was cancelled */ }
//
// `timeout(d, op)` / `timeout_at(deadline, op)` wrap anything awaitable (a
// Task, a JoinHandle, a oneshot receiver, a Sleep, yield_now(), ...).
//
// Guarantees:
//  - Returns Expected<T> (T: what `co_await op` returns): the value if the
//    operation completed first, errc::timed_out if the deadline came first.
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
#include "volt/detail/task_header.hpp"
#include "volt/detail/timer_node.hpp"
#include "volt/expected.hpp"
#include "volt/time/clock.hpp"
#include "volt/time/sleep.hpp"

namespace volt {

namespace detail {

template <class T>
inline constexpr bool kIsTask = false;
template <class T>
inline constexpr bool kIsTask<Task<T>> = true;

// What `co_await a` would await: a.operator co_await(), operator
// co_await(a), or `a` itself.
template <class A>
decltype(auto) get_awaiter(A&& a) {
  if constexpr (requires { std::forward<A>(a).operator co_await(); }) {
    return std::forward<A>(a).operator co_await();
  } else if constexpr (requires { operator co_await(std::forward<A>(a)); }) {
    return operator co_await(std::forward<A>(a));
  } else {
    return std::forward<A>(a);
  }
}

}  // namespace detail

template <class Op>
class [[nodiscard]] Timeout {
  // `Op` is `X&` for an lvalue operand (held by reference), `X` otherwise
  // (moved in, owned, destroyed when the co_await completes).
  static constexpr bool kOwnsOp = !std::is_reference_v<Op>;
  using OpType = std::remove_reference_t<Op>;
  using Got = decltype(detail::get_awaiter(std::declval<OpType&>()));
  static constexpr bool kAwaiterIsRef = std::is_reference_v<Got>;
  using Awaiter = std::remove_reference_t<Got>;

 public:
  using Value = decltype(std::declval<Awaiter&>().await_resume());

  Timeout(Op&& op, Instant deadline) : deadline_(deadline), has_deadline_(true) {
    hold(std::forward<Op>(op));
  }
  Timeout(Op&& op, Duration d) : duration_(d) { hold(std::forward<Op>(op)); }
  // Only before it is awaited (as when a Timeout is itself the operand of
  // another timeout); moving an awaited Timeout is a contract violation.
  Timeout(Timeout&& other) noexcept(
      !kOwnsOp ||
      std::is_nothrow_move_constructible_v<OpType>) requires(!kOwnsOp ||
                                                             std::is_move_constructible_v<OpType>)
      : deadline_(other.deadline_), duration_(other.duration_), has_deadline_(other.has_deadline_) {
    if (other.awaiter_ || other.finished_) std::terminate();
    hold(std::forward<Op>(other.op()));
  }
  Timeout(const Timeout&) = delete;
  Timeout& operator=(const Timeout&) = delete;
  Timeout& operator=(Timeout&&) = delete;
  ~Timeout() { finish(); }

  bool await_ready() {
    if (finished_) throw Error(errc::invalid_handle, "a Timeout can be awaited once");
    if (awaiter_) {
      // Awaited again after an interrupted wait (the co_await that held it
      // was cancelled, say by an outer timeout): carry on where it stopped,
      // same operation, same deadline. Only the task that started it may: the
      // operation's wakers are that task's.
      if (detail::current_task_or_throw() != owner_)
        throw Error(errc::invalid_handle, "an interrupted Timeout resumed by another task");
      return false;
    }
    if constexpr (kAwaiterIsRef) {
      awaiter_ = &detail::get_awaiter(op());
    } else {
      awaiter_ = ::new (static_cast<void*>(awaiter_storage_)) Awaiter(detail::get_awaiter(op()));
    }
    return awaiter_->await_ready();  // ready: no timer at all
  }

  bool await_suspend(std::coroutine_handle<> self) {
    if (!branch_.started()) {
      owner_ = detail::current_task_or_throw();
      // The operation's await_ready just said no: the branch skips it.
      if (branch_.start(detail::await_in_branch(awaiter_, /*known_not_ready=*/true)))
        return false;  // ready now
    } else if (branch_.step()) {
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
    branch_.step();
    return false;
  }

  Expected<Value> await_resume() {
    // Whatever happens (a value, an exception, a timeout), the operation and
    // everything it registered are gone when the co_await completes.
    struct Finish {
      Timeout* t;
      ~Finish() { t->finish(); }
    } finish_after{this};
    if (!branch_.started()) {
      // Ready in await_ready: the operation's own await_resume.
      if constexpr (std::is_void_v<Value>) {
        awaiter_->await_resume();
        return Expected<void>();
      } else {
        return Expected<Value>(awaiter_->await_resume());
      }
    }
    if (branch_.done()) {
      if constexpr (std::is_void_v<Value>) {
        branch_.result();
        return Expected<void>();
      } else {
        return Expected<Value>(branch_.result());
      }
    }
    return Expected<Value>(errc::timed_out);  // finish() cancels the operation
  }

 private:
  // The task's readiness check: resume when the operation finished (stepping
  // it if its leaf is ready) or the timer fired.
  static bool poll(void* self) noexcept {
    auto* t = static_cast<Timeout*>(self);
    if (t->branch_.step()) return true;
    return t->timer_.fired();
  }

  void hold(Op&& op) {
    if constexpr (kOwnsOp) {
      ::new (static_cast<void*>(op_storage_)) OpType(std::move(op));
    } else {
      op_ = &op;
    }
  }
  OpType& op() noexcept {
    if constexpr (kOwnsOp) {
      return *std::launder(reinterpret_cast<OpType*>(op_storage_));
    } else {
      return *op_;
    }
  }

  // Cancels and destroys in dependency order: the branch (which points at
  // the awaiter), the timer, the awaiter, then an owned operand. Idempotent.
  void finish() noexcept {
    if (finished_) return;
    finished_ = true;
    if constexpr (!kOwnsOp && detail::kIsTask<OpType>) {
      // A Task passed by reference and interrupted: its chain was suspended
      // inside our branch, which is going away, so it can never be resumed
      // correctly. Destroy it; awaiting it again reports invalid_handle.
      if (branch_.started() && !branch_.done()) op() = OpType();
    } else if constexpr (!kOwnsOp && requires(OpType & o) { o.interrupted(); }) {
      // An operation that runs a coroutine chain of its own (e.g.
      // OnceCell::get_or_init) is told, for the same reason: it cancels
      // that chain, and awaiting it again starts over.
      if (branch_.started() && !branch_.done()) op().interrupted();
    }
    branch_.reset();
    timer_.cancel();
    if constexpr (!kAwaiterIsRef) {
      if (awaiter_) awaiter_->~Awaiter();
    }
    awaiter_ = nullptr;
    if constexpr (kOwnsOp) op().~OpType();
  }

  alignas(OpType) unsigned char op_storage_[kOwnsOp ? sizeof(OpType) : 1];
  OpType* op_ = nullptr;  // the operand when held by reference
  Awaiter* awaiter_ = nullptr;
  alignas(Awaiter) unsigned char awaiter_storage_[kAwaiterIsRef ? 1 : sizeof(Awaiter)];
  detail::Branch<Value> branch_;
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

}  // namespace volt
