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
//
// Guarantees:
//  - A token is a handle: copies share one node (reference counted; one
//    allocation per token created by the constructor or child_token(), none
//    per copy or wait). Tokens may be used from any thread.
//  - cancel() sets the flag once for good and wakes every waiter; it
//    cancels every descendant token (children created from this token or
//    its copies, their children, ...). When it returns, this token and every
//    descendant attached to it at the call are cancelled, unless another
//    cancel() of the same node was already under way (that one finishes the
//    job). Cancelling a child leaves its parent and siblings alone.
//  - is_cancelled() is lock-free. Everything a thread did before cancel() is
//    visible to a thread that saw is_cancelled() true or whose cancelled()
//    completed.
//  - child_token() of a cancelled token is born cancelled. Dropping a child
//    (its last copy) unlinks it from its parent: a long-lived parent does not
//    accumulate dead children. Dropping every copy of a parent while children
//    live hands its children to its own parent (they are still cancelled by
//    the grandparent), or, for a root, makes them roots (nothing can cancel
//    the parent any more).
//  - cancelled() returns an operation that completes once the token is
//    cancelled (at once if it already is). Waiting allocates nothing: the
//    waiter lives in the operation. It is cancelled by destruction (timeout,
//    select, abort): the waiter is unlinked and nothing is left behind. It
//    borrows the token: the token must outlive the operation.
//    cancelled_blocking() is its form for plain threads
//    (errc::blocking_in_runtime on a runtime thread).
//  - drop_guard() gives a DropGuard that cancels the token when destroyed,
//    unless disarm()ed (which gives the token back).
//  - Bad input: a moved-from token is empty; any use of it other than
//    destruction or assignment throws Error(errc::invalid_handle).
//
// Protocol (src/sync/cancellation_token.cpp has the argument): each node has
// a spin lock guarding its parent link, its children list and its waiters.
// Lock order: a node's lock is acquired blocking only while holding locks of
// nodes created before it (its ancestors, then or formerly); the only
// acquisition against that order is a try_lock. Cancel walks the subtree
// without recursion by adopting grandchildren, and wakes outside the locks.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <utility>

#include "volt/detail/intrusive_list.hpp"
#include "volt/detail/spin_lock.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/detail/waker.hpp"
#include "volt/error.hpp"
#include "volt/task/join_handle.hpp"

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
struct CancelNode : IntrusiveLink {
  // Set once, under `lock`, with a release store; read lock-free (acquire).
  std::atomic<bool> cancelled{false};
  // CancellationToken handles. The last one to go detaches the node.
  std::atomic<std::size_t> handles{1};
  // Memory references: one for all the handles together, one from each
  // child's `parent` link, one from the parent's `children` list while
  // linked, plus short-lived ones taken by the tree code. Freed at zero,
  // which happens only when the node is detached and empty.
  std::atomic<std::size_t> refs{1};
  SpinLock lock;
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

  // Cancels this token and its descendants, wakes their waiters.
  void cancel() { cancel_tree(node()); }
  bool is_cancelled() const { return node()->is_cancelled(); }
  // A token cancelled when this one is (born cancelled if this one is).
  CancellationToken child_token() const;

  class [[nodiscard]] Cancelled {
   public:
    explicit Cancelled(detail::CancelNode* node) noexcept : node_(node) {}
    Cancelled(const Cancelled&) = delete;
    Cancelled& operator=(const Cancelled&) = delete;
    // Before it is awaited only (e.g. moved into a timeout).
    Cancelled(Cancelled&& other) noexcept : node_(other.node_) {}
    ~Cancelled() {
      if (queued_) detail::cancel_node_withdraw(node_, &waiter_);
    }

    bool await_ready() { return node_->is_cancelled() && detail::coop_try_consume(); }
    bool await_suspend(std::coroutine_handle<> self) {
      if (!node_->is_cancelled()) {
        detail::TaskHeader* task = detail::suspend_current(self, &fired, &waiter_);
        waiter_.waker = detail::make_task_waker(task);
        if (detail::cancel_node_register(node_, &waiter_)) {
          queued_ = true;
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
    static bool fired(void* waiter) noexcept {
      // acquire: pairs with the canceller's release store of `fired`.
      return static_cast<detail::CancelWaiter*>(waiter)->fired.load(std::memory_order_acquire);
    }
    detail::CancelNode* node_;
    detail::CancelWaiter waiter_;
    bool queued_ = false;  // waiter_ was linked into the node
  };

  // Completes once this token is cancelled. Borrows the token.
  Cancelled cancelled() const { return Cancelled(node()); }
  // Blocks the calling (non-runtime) thread until this token is cancelled.
  void cancelled_blocking() const;

  // Cancels the token it holds when destroyed, unless disarmed.
  class DropGuard;

  // A guard holding a copy of this token.
  DropGuard drop_guard() const;

 private:
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

}  // namespace volt
