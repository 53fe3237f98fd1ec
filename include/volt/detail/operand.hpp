// volt/detail/operand.hpp: one operation held by a combinator that waits on
// it in a branch (timeout, select): what `co_await op` would await, where the
// operation lives (moved in, or referenced), how it is tried, run, finished
// and cancelled.
//
// The life of a HeldOperand:
//   probe()   builds the awaiter (once) and asks its await_ready. Ready: the
//             winner's value comes from the awaiter itself (take()); no branch.
//   start()   runs the awaiter as a branch (detail::Branch, one Task frame
//             from the frame pool) that skips the await_ready just asked.
//   step()    resumes the branch if its leaf is ready (the combinator's task
//             check calls it). True once the branch has finished.
//   take()    the outcome (value or exception) of a finished operation.
//   finish()  cancels and destroys everything, in dependency order. An
//             lvalue operand is the caller's and survives, except that a Task
//             interrupted inside the branch is destroyed (its frame cannot be
//             resumed anywhere else) and an operation with an `interrupted()`
//             member is told (it cancels the coroutine it runs).
//
// Must be probed and run inside a runtime task (a probe that is ready may run
// outside one).
#pragma once

#include <exception>
#include <new>
#include <type_traits>
#include <utility>

#include "volt/detail/branch.hpp"
#include "volt/task/task.hpp"

namespace volt::detail {

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

template <class Op>
class HeldOperand {
  // `Op` is `X&` for an lvalue operand (held by reference), `X` otherwise
  // (moved in, owned, destroyed by finish()).
  static constexpr bool kOwnsOp = !std::is_reference_v<Op>;
  using OpType = std::remove_reference_t<Op>;
  using Got = decltype(get_awaiter(std::declval<OpType&>()));
  static constexpr bool kAwaiterIsRef = std::is_reference_v<Got>;
  using Awaiter = std::remove_reference_t<Got>;

 public:
  using Value = decltype(std::declval<Awaiter&>().await_resume());

  explicit HeldOperand(Op&& op) { hold(std::forward<Op>(op)); }
  // Only before probe(): afterwards the awaiter (and maybe a branch) points
  // into it. Moving a probed or finished operand terminates.
  HeldOperand(HeldOperand&& other) noexcept(
      !kOwnsOp ||
      std::is_nothrow_move_constructible_v<OpType>) requires(!kOwnsOp ||
                                                             std::is_move_constructible_v<OpType>) {
    if (other.probed() || other.finished_) std::terminate();
    hold(std::forward<Op>(other.op()));
  }
  HeldOperand(const HeldOperand&) = delete;
  HeldOperand& operator=(const HeldOperand&) = delete;
  HeldOperand& operator=(HeldOperand&&) = delete;
  ~HeldOperand() { finish(); }

  bool probed() const noexcept { return awaiter_ != nullptr; }
  bool started() const noexcept { return branch_.started(); }
  bool done() const noexcept { return branch_.done(); }

  // The operation's await_ready (building its awaiter the first time).
  bool probe() {
    if constexpr (kAwaiterIsRef) {
      awaiter_ = &get_awaiter(op());
    } else {
      awaiter_ = ::new (static_cast<void*>(awaiter_storage_)) Awaiter(get_awaiter(op()));
    }
    return awaiter_->await_ready();
  }
  // Precondition: probe() said not ready. Runs the branch until its first
  // suspension; true if it already finished.
  bool start() {
    // The operation's await_ready just said no: the branch skips it.
    return branch_.start(await_in_branch(awaiter_, /*known_not_ready=*/true));
  }
  // False, doing nothing, if the branch never started (its frame's
  // allocation threw).
  bool step() noexcept { return branch_.started() && branch_.step(); }

  // Precondition: probe() said ready, or the branch finished. The value, or
  // the operation's exception rethrown.
  Value take() {
    if (!branch_.started()) return awaiter_->await_resume();
    return branch_.result();
  }

  // Cancels (if still running) and destroys in dependency order: the branch
  // (which points at the awaiter), the awaiter, then an owned operand.
  // Idempotent.
  void finish() noexcept {
    if (finished_) return;
    finished_ = true;
    const bool interrupted = branch_.started() && !branch_.done();
    if constexpr (!kOwnsOp && kIsTask<OpType>) {
      // A Task passed by reference and interrupted: its chain was suspended
      // inside our branch, which is going away, so it can never be resumed
      // correctly. Destroy it; awaiting it again reports invalid_handle.
      if (interrupted) op() = OpType();
    } else if constexpr (!kOwnsOp && requires(OpType & o) { o.interrupted(); }) {
      // An operation that runs a coroutine chain of its own (e.g.
      // OnceCell::get_or_init) is told, for the same reason: it cancels
      // that chain, and awaiting it again starts over.
      if (interrupted) op().interrupted();
    }
    branch_.reset();
    if constexpr (!kAwaiterIsRef) {
      if (awaiter_) awaiter_->~Awaiter();
    }
    awaiter_ = nullptr;
    if constexpr (kOwnsOp) op().~OpType();
  }

 private:
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

  alignas(OpType) unsigned char op_storage_[kOwnsOp ? sizeof(OpType) : 1];
  OpType* op_ = nullptr;  // the operand when held by reference
  Awaiter* awaiter_ = nullptr;
  alignas(Awaiter) unsigned char awaiter_storage_[kAwaiterIsRef ? 1 : sizeof(Awaiter)];
  Branch<Value> branch_;
  bool finished_ = false;
};

}  // namespace volt::detail
