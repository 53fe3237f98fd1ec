// volt/sync/cancellation_token.hpp: a shared cancel flag, with waiters and a
// tree of child tokens.
//
//   volt::CancellationToken token;                 // a new root
//   volt::CancellationToken child = token.child_token();
//   // in a task:
//   co_await child.cancelled();                    // waits for a cancel()
//   // elsewhere:
//   token.cancel();                                // cancels token and child
//   auto guard = token.drop_guard();               // cancels when destroyed
//   // runs an operation until it completes or the token is cancelled:
//   // (rx: an mpsc::Receiver<Job>; recv() gives std::optional<Job>)
//   std::optional<std::optional<Job>> v = co_await token.run_until_cancelled(rx.recv());
//   if (!v) { /* cancelled first: the recv was withdrawn, no value lost */ }
//   std::unordered_set<volt::CancellationToken> seen{token};  // == and hash
//
// Guarantees:
//  - A token is a handle: copies share one node (reference counted; one
//    allocation per token created by the constructor or child_token(), none
//    per copy or wait). Tokens may be used from any thread.
//  - cancel() sets the flag once for good and wakes every waiter; it
//    cancels every descendant token (children created from this token or
//    its copies, their children, ...). When it returns, this token and every
//    descendant attached to it at the call are cancelled, also when cancel()
//    calls of the same token or of related ones race: a cancel() that finds
//    the token already being cancelled by another (its own, or an ancestor's)
//    waits for that one to finish, and a walk that meets a descendant whose
//    own cancel() is under way waits for it. The wait yields the thread a
//    few times, then blocks (an atomic wait), and lasts as long as the other
//    cancel()'s walk of that subtree; a walk only ever waits for walks of
//    its own descendants, never the other way, so every wait ends. (A walk
//    runs no user code: wakers only queue tasks. A waker that called
//    cancel() or destroyed a DropGuard would wait for its own walk.) Waiters
//    of a descendant that another cancel() is walking may still be being
//    woken when this one returns; they are marked, and will be woken.
//  - Descendants are cancelled before their ancestors: a thread that sees a
//    token cancelled (is_cancelled() true, or its cancelled() completed) sees
//    every descendant it had cancelled too. Waiters of a token are woken only
//    after it is marked, so after its whole subtree is.
//  - is_cancelled() is lock-free. Everything a thread did before cancel() is
//    visible to a thread that saw is_cancelled() true or whose cancelled()
//    completed.
//  - child_token() of a cancelled token, or of one a cancel() is already
//    walking, is born cancelled. Dropping a child (its last copy) unlinks it
//    from its parent: a long-lived parent does not accumulate dead children.
//    Dropping every copy of a parent while children live hands its children
//    to its own parent (they are still cancelled by the grandparent), or, for
//    a root, makes them roots (nothing can cancel the parent any more).
//  - cancelled() returns an operation that completes once the token is
//    cancelled (at once if it already is). It holds a handle on the token,
//    like a copy, so `auto c = tok.child_token().cancelled(); co_await c;` is
//    fine (the child stays attached: cancelling tok completes it). Waiting
//    allocates nothing: the waiter lives in the operation. It is cancelled by
//    destruction (timeout, select, abort): the waiter is unlinked and nothing
//    is left behind. Awaiting it again: after it completed, it completes at
//    once; if a wait was interrupted while it still waited (an lvalue operand
//    of a timeout that fired: it stays registered, like Tokio's `&mut fut` in
//    a select loop), the same task may await it again and it keeps its one
//    registration. cancelled_blocking() is its form for plain threads
//    (errc::blocking_in_runtime on a runtime thread).
//  - drop_guard() gives a DropGuard that cancels the token when destroyed,
//    unless disarm()ed (which gives the token back).
//  - run_until_cancelled(op) returns a Task<std::optional<V>> (V: what
//    `co_await op` gives, void as std::monostate, T& as
//    std::reference_wrapper<T>) that awaits op and the token's cancelled()
//    together, as select_biased(cancelled(), op) (volt/task/select.hpp),
//    checking the token first (Tokio's): nullopt if the token is or becomes
//    cancelled first, op's result otherwise. The op is moved into the Task;
//    when cancellation wins, op is cancelled by destruction before the
//    co_await returns (a waiting recv/acquire is withdrawn and gives back
//    what it had been handed), and so it is when the Task itself is
//    destroyed while waiting. The Task holds a copy of the token, so the
//    token it was called on may go first. One Task frame (from the
//    recycling frame allocator) per call; waiting allocates nothing more.
//    An exception from op propagates.
//  - a == b when a and b share one node (a is a copy of b, or of a copy of
//    b, ...); a child is not equal to its parent. std::hash agrees with ==.
//    Moved-from tokens compare equal to each other (empty), unequal to any
//    other; comparing and hashing never throw.
//  - Bad input: a moved-from token is empty; any use of it other than
//    destruction or assignment throws Error(errc::invalid_handle). A
//    cancelled() operation may be moved only before it is awaited; awaiting a
//    moved-from one, or re-awaiting one that still waits from a task other
//    than the one that first awaited it (its waker is that task's), throws
//    Error(errc::invalid_handle).
//
// Protocol (src/sync/cancellation_token.cpp has the argument): each node has
// a spin lock guarding its parent link, its children list, its waiters and
// its `claimed` flag. Lock order: a node's lock is acquired blocking only
// while holding locks of nodes created before it (its ancestors, then or
// formerly); the only acquisition against that order is a try_lock. Cancel
// claims the node, then claims its subtree without recursion by adopting
// grandchildren (waiting, with no lock held, for subtrees another cancel
// claimed first), then marks the claimed nodes descendants first, each
// followed by waking its waiters outside the locks, the node itself last.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <functional>
#include <optional>
#include <utility>

#include "volt/detail/intrusive_list.hpp"
#include "volt/detail/spin_lock.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/detail/waker.hpp"
#include "volt/error.hpp"
#include "volt/task/join_handle.hpp"
#include "volt/task/select.hpp"
#include "volt/task/task.hpp"

namespace volt {

class CancellationToken;

namespace detail {

// One waiting cancelled(). Links and `waker` are guarded by the node's lock;
// `fired` is the completion, stored last (release) by the canceller after it
// unlinked the waiter and moved the waker out, read (acquire) by the owner.
struct CancelWaiter : IntrusiveLink {
  std::atomic<bool> fired{false};
  Waker waker;
};

// The shared state of a token and its copies. The IntrusiveLink is its
// membership in its parent's `children`, guarded by the parent's lock.
//
// The IntrusiveLink is also borrowed by a cancel walking the node: a node it
// claimed is unattached (parent null, so in no children list) and sits in the
// walk's own list until the walk marks it.
struct CancelNode : IntrusiveLink {
  // Set once, under `lock`, with a release store, after every descendant's;
  // read lock-free (acquire).
  std::atomic<bool> cancelled{false};
  // CancellationToken handles. The last one to go detaches the node.
  std::atomic<std::size_t> handles{1};
  // Memory references: one for all the handles together, one from each
  // child's `parent` link, one from the parent's `children` list while
  // linked, plus short-lived ones taken by the tree code. Freed at zero,
  // which happens only when the node is detached and empty.
  std::atomic<std::size_t> refs{1};
  SpinLock lock;
  // Guarded by lock. Set once, before `cancelled`, by the cancel that will
  // mark the node (its own, or an ancestor's walking it); never cleared.
  bool claimed = false;
  CancelNode* parent = nullptr;         // guarded by lock (and the parent's lock to change)
  IntrusiveList<CancelNode> children;   // guarded by lock; each holds a reference
  IntrusiveList<CancelWaiter> waiters;  // guarded by lock

  bool is_cancelled() const noexcept {
    // acquire: pairs with the release store in cancel (src): what the
    // canceller did before is visible.
    return cancelled.load(std::memory_order_acquire);
  }
};

// Links `waiter` (whose waker is set) unless the node is cancelled. True if
// linked.
bool cancel_node_register(CancelNode* node, CancelWaiter* waiter) noexcept;
// Unlinks a waiter whose operation is destroyed, if still linked.
void cancel_node_withdraw(CancelNode* node, CancelWaiter* waiter) noexcept;

// For tests: the node's linked children and waiters, read under its lock.
struct CancelNodeCounts {
  std::size_t children = 0;
  std::size_t waiters = 0;
};
CancelNodeCounts inspect(const CancellationToken& token);

// What run_until_cancelled(op) gives when op completes: op's co_await
// result as select's variant holds it.
template <class Op>
using UntilCancelledValue = typename SelectAlternative<typename HeldOperand<Op>::Value>::type;

template <class Op>
Task<std::optional<UntilCancelledValue<Op>>> run_until_cancelled(CancellationToken token, Op op);

}  // namespace detail

class CancellationToken {
 public:
  // A new root token (one allocation).
  CancellationToken();
  CancellationToken(const CancellationToken& other) noexcept : node_(other.node_) { add_handle(); }
  CancellationToken(CancellationToken&& other) noexcept
      : node_(std::exchange(other.node_, nullptr)) {}
  CancellationToken& operator=(const CancellationToken& other) noexcept {
    CancellationToken copy(other);
    std::swap(node_, copy.node_);
    return *this;
  }
  CancellationToken& operator=(CancellationToken&& other) noexcept {
    CancellationToken taken(std::move(other));
    std::swap(node_, taken.node_);
    return *this;
  }
  ~CancellationToken() {
    if (node_) drop_handle(node_);
  }

  // Cancels this token and its descendants (descendants first), wakes their
  // waiters.
  void cancel() { cancel_tree(node()); }
  bool is_cancelled() const { return node()->is_cancelled(); }
  // A token cancelled when this one is (born cancelled if this one is).
  CancellationToken child_token() const;

  class [[nodiscard]] Cancelled {
   public:
    Cancelled(const Cancelled&) = delete;
    Cancelled& operator=(const Cancelled&) = delete;
    // Before it is awaited only (e.g. moved into a timeout).
    // Before it is awaited only (e.g. moved into a timeout): a registered
    // waiter cannot move (the token's list points at it).
    Cancelled(Cancelled&& other) noexcept : node_(std::exchange(other.node_, nullptr)) {
      if (other.queued_) std::terminate();
    }
    ~Cancelled() {
      if (!node_) return;
      if (queued_) detail::cancel_node_withdraw(node_, &waiter_);
      drop_handle(node_);
    }

    bool await_ready() {
      if (!node_) throw Error(errc::invalid_handle, "CancellationToken::Cancelled: moved from");
      if (queued_) {
        // Awaited again after its first wait was interrupted (or after it
        // completed). Fired: complete at once.
        if (fired(&waiter_)) return true;
        // Still registered, with the first task's waker: only that task may
        // carry on (another would never be woken).
        if (detail::current_task_or_throw() != owner_)
          throw Error(errc::invalid_handle,
                      "CancellationToken::Cancelled: queued for another task");
        return false;
      }
      return node_->is_cancelled() && detail::coop_try_consume();
    }
    bool await_suspend(std::coroutine_handle<> self) {
      if (queued_) {
        // Keep the one registration: its waker already targets this task
        // (await_ready checked), and the waker and links belong to the node's
        // lock, so they are not touched here. Only where to resume changes.
        // A cancel firing after the check below leaves the task notified; the
        // poll that follows runs the check, which passes.
        detail::suspend_current(self, &fired, &waiter_);
        return !fired(&waiter_);
      }
      if (!node_->is_cancelled()) {
        detail::TaskHeader* task = detail::suspend_current(self, &fired, &waiter_);
        waiter_.waker = detail::make_task_waker(task);
        if (detail::cancel_node_register(node_, &waiter_)) {
          queued_ = true;
          owner_ = task;
          return true;
        }
        waiter_.waker.reset();  // cancelled meanwhile
      }
      // Ready, but this poll's budget is spent: go round the queue once first.
      if (detail::coop_try_consume()) return false;
      detail::yield_current(self);
      return true;
    }
    void await_resume() noexcept {}

   private:
    friend class CancellationToken;
    // Takes a handle on `node` (which the caller's handle keeps alive).
    explicit Cancelled(detail::CancelNode* node) noexcept : node_(node) {
      // relaxed: as a token copy (add_handle).
      node_->handles.fetch_add(1, std::memory_order_relaxed);
    }
    static bool fired(void* waiter) noexcept {
      // acquire: pairs with the canceller's release store of `fired`.
      return static_cast<detail::CancelWaiter*>(waiter)->fired.load(std::memory_order_acquire);
    }
    detail::CancelNode* node_;  // one handle; null once moved from
    detail::CancelWaiter waiter_;
    // waiter_ was linked into the node (and stays queued_ after it fired: the
    // operation is then complete).
    bool queued_ = false;
    detail::TaskHeader* owner_ = nullptr;  // the task whose waker waiter_ holds
  };

  // Completes once this token is cancelled. Holds a handle on the token.
  Cancelled cancelled() const { return Cancelled(node()); }
  // Blocks the calling (non-runtime) thread until this token is cancelled.
  void cancelled_blocking() const;

  // Cancels the token it holds when destroyed, unless disarmed.
  class DropGuard;

  // A guard holding a copy of this token.
  DropGuard drop_guard() const;

  // Awaits op until it completes (its result) or this token is cancelled
  // (nullopt; op is destroyed, withdrawing it). See the header.
  //   auto r = co_await token.run_until_cancelled(sem.acquire());
  //   if (!r) co_return;            // cancelled: no permit taken
  template <class Op>
  Task<std::optional<detail::UntilCancelledValue<Op>>> run_until_cancelled(Op op) const {
    return detail::run_until_cancelled(CancellationToken(*this).checked(), std::move(op));
  }

  // Tokens are equal when they share one node (copies of each other).
  friend bool operator==(const CancellationToken& a, const CancellationToken& b) noexcept {
    return a.node_ == b.node_;
  }

 private:
  friend struct std::hash<CancellationToken>;
  friend detail::CancelNodeCounts detail::inspect(const CancellationToken& token);
  explicit CancellationToken(detail::CancelNode* node) noexcept : node_(node) {}

  detail::CancelNode* node() const {
    if (!node_) throw Error(errc::invalid_handle, "CancellationToken: moved from");
    return node_;
  }
  CancellationToken checked() && {
    (void)node();
    return std::move(*this);
  }
  void add_handle() noexcept {
    // relaxed: the copied-from handle keeps the node alive (as shared_ptr).
    if (node_) node_->handles.fetch_add(1, std::memory_order_relaxed);
  }
  static void drop_handle(detail::CancelNode* node) noexcept;
  static void cancel_tree(detail::CancelNode* node) noexcept;

  detail::CancelNode* node_;
};

class [[nodiscard]] CancellationToken::DropGuard {
 public:
  explicit DropGuard(CancellationToken token) noexcept : token_(std::move(token)) {}
  DropGuard(DropGuard&&) noexcept = default;
  DropGuard& operator=(DropGuard&& other) noexcept {
    if (this != &other) {
      fire();
      token_ = std::move(other.token_);
    }
    return *this;
  }
  ~DropGuard() { fire(); }
  // Gives the token back; the guard no longer cancels it.
  CancellationToken disarm() noexcept { return std::move(token_); }

 private:
  void fire() noexcept {
    if (token_.node_) cancel_tree(token_.node_);
  }
  CancellationToken token_;
};

inline CancellationToken::DropGuard CancellationToken::drop_guard() const {
  return DropGuard(CancellationToken(*this).checked());
}

namespace detail {
// A coroutine, not a member: it owns a copy of the token (the one it was
// called on may go first) and the operand (destroyed with the frame).
template <class Op>
Task<std::optional<UntilCancelledValue<Op>>> run_until_cancelled(CancellationToken token, Op op) {
  // Biased: the token first, as Tokio's. The loser is destroyed inside the
  // Select before the co_await returns.
  auto result = co_await select_biased(token.cancelled(), std::move(op));
  if (result.index() == 0) co_return std::nullopt;
  co_return std::optional<UntilCancelledValue<Op>>(std::in_place, std::move(std::get<1>(result)));
}
}  // namespace detail

// The path of tokio_util's (tokio_util::sync::CancellationToken).
namespace sync {
using volt::CancellationToken;
}  // namespace sync

}  // namespace volt

// Tokens hash by node, as == compares them.
template <>
struct std::hash<volt::CancellationToken> {
  std::size_t operator()(const volt::CancellationToken& token) const noexcept {
    return std::hash<const void*>()(token.node_);
  }
};
