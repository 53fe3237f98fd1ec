// CancellationToken: the tree of nodes, cancel, detach, and the waiters.
//
// A node (detail::CancelNode) is shared by a token and its copies. Fields and
// who may touch them:
//   claimed    set once, under the node's lock, by the cancel that will mark
//              the node: its own cancel(), or an ancestor's walk that popped
//              it. Never cleared. Born-cancelled nodes are born claimed.
//   cancelled  set once, under the node's lock (release store), after
//              `claimed` and after every descendant's; read lock-free
//              (acquire) or under the lock (relaxed: the lock orders it).
//   parent     the node's lock guards it; changing it also needs the lock of
//              the parent it points to (so a thread holding the parent's lock
//              sees it stable).
//   link       (the IntrusiveLink base) membership in parent->children:
//              guarded by the parent's lock. A walk borrows it for its list
//              of claimed nodes, which are unattached (parent == null, so in
//              no children list; nothing links them anywhere again).
//   children   guarded by the node's lock. G is in N.children exactly when
//              G.parent == N (both changed together, under both locks).
//   waiters    guarded by the node's lock.
//   handles    CancellationToken copies and Cancelled operations; the last
//              to go detaches the node.
//   refs       memory: 1 for the handles together, 1 per child's parent
//              link, 1 for the parent's children list while linked (carried
//              over by a walk's list), plus short-lived ones (lock_parent).
//              The node is deleted at zero.
//
// Operations:
//   child_token  under the parent's lock: if claimed (being or already
//                cancelled), the child is born cancelled and unattached;
//                else linked into parent->children.
//   cancel(R)    Marked already: return (its subtree is marked too). Claimed
//                by another cancel (R's own, racing, or an ancestor's walk):
//                wait until R is marked, then return. Otherwise claim R, then
//                walk, one child C at a time, under R's lock then C's: pop C,
//                detach it (C.parent = null); if C is claimed (only its own
//                cancel can have claimed a node still attached: a walk
//                unattaches what it claims), unlock and wait until C is
//                marked; else claim C, adopt its children into R.children
//                (their parent becomes R) and push C on the front of the
//                walk's list. Unlock R between children. The subtree is
//                walked without recursion: grandchildren come back round as
//                R's children. When R.children is empty it stays empty (R is
//                claimed: no child joins it, and only this walk adopts into
//                it). Then, for each node of the list from the front (the
//                most recently claimed first, so descendants before
//                ancestors): under its lock mark it and complete its waiters
//                (wakers moved out, `fired` published, woken after the
//                unlock, in WakeList batches). R last.
//   detach(N)    the last handle of N goes. Under N's parent's lock and N's
//                (lock_parent): unlink N from its parent and hand N's
//                children to that parent (so the grandparent still cancels
//                them; a chain `t = t.child_token()` stays one link long).
//                With no parent (a root, or a node a walk claimed): N's
//                children become roots (nothing can cancel N any more; a
//                claimed node has none left).
//   waiters      register under the node's lock unless marked (a claimed
//                node's waiters are completed when it is marked); withdraw
//                (destroyed operation) unlinks under the lock if still
//                linked. Not linked means fired: the canceller unlinks and
//                publishes in one critical section.
//
// Descendants before ancestors: a node D is a descendant of a claimed X only
// if it was in X's subtree when X was claimed (X takes no children after). A
// walk claims D after X (D reaches the walk's children only once X's children
// were adopted) and so marks it before X; a D claimed by its own cancel is
// marked before the walk goes past it (the walk waits). The marks are release
// stores, and each waiter's acquire of D's mark precedes its own mark, so a
// thread that acquires X's mark sees D's.
//
// Waiting, and why it ends: a cancel waits only for a node claimed by another
// cancel, with no lock held. A plain cancel() caller that waits walks nothing
// and holds nothing. A walk waits only for a child claimed by that child's own
// cancel; waits between walks therefore go from a node to a newer one (a
// child is newer than its parent, see below), so they form no cycle, and
// every walk ends.
//
// Lock order, and why nothing deadlocks: a node's parent was created before
// it, and a node's ancestors only ever shrink (adoption replaces a parent by
// its parent; detaching clears it). So "X is or was an ancestor of Y" implies
// X is older than Y. Every blocking lock() is taken while holding only locks
// of nodes that are or were ancestors of the one being locked:
//   cancel: R, then its child C, then C's children (R -> C -> G);
//   detach: the parent P, then N, then N's children (P -> N -> G);
//   lock_parent's slow path: unlock N, lock P, relock N (P is N's former or
//   current parent).
// Blocking acquisitions therefore always go from older to newer nodes, a
// strict order: no cycle of waits. The one acquisition against it, taking
// N's parent while holding N, is a try_lock, which never waits. Waiter locks
// are the node locks themselves and never nest with anything else.
//
// Races considered:
//   - cancel(R) vs the last handle of a child C going: detach(C) holds C,
//     try_locks R (held by the canceller), unlocks C, waits for R. The
//     canceller detaches C (parent = null) and adopts C's children; detach(C)
//     then finds C.parent changed, retries with no parent, and finds C's
//     children gone. The walk's reference keeps C alive until C is marked.
//   - detach(C) under a claimed R whose walk is still going: C is still in
//     R.children, so the walk has not finished; the children C hands to R
//     are walked too. (A finished walk left R.children empty, and a claimed R
//     takes no new children.)
//   - cancel(R) vs cancel(C) for a child C: whoever claims C first has it
//     marked (C's own walk, or R's); the other waits until C is marked, so
//     both return with C's subtree marked.
//   - cancel(R) vs child_token(C): under C's lock, either before C is claimed
//     (the new child is linked and adopted into the walk) or after (born
//     cancelled).
//   - A node is deleted only detached and empty: its handles are gone, so
//     detach ran (no parent, children handed on) and nothing can add children
//     or make it a parent again (adoption picks the parent of a parent, and
//     it has no children).
//   - A node marked by its own cancel keeps its parent link (only an
//     ancestor's walk detaches it); a marked node's children list is empty.
#include "volt/sync/cancellation_token.hpp"

#include <mutex>
#include <thread>

#include "detail/thread_parker.hpp"
#include "volt/detail/wake_list.hpp"

namespace volt {

using detail::CancelNode;
using detail::CancelWaiter;

namespace {

void retain(CancelNode* node, std::size_t count = 1) noexcept {
  // relaxed: the caller holds a reference already, or a lock that keeps one
  // in place (a parent link under the child's lock); as shared_ptr's copy.
  if (count != 0) node->refs.fetch_add(count, std::memory_order_relaxed);
}

void release(CancelNode* node, std::size_t count = 1) noexcept {
  // acq_rel: the last holder must see every other holder's accesses before
  // deleting (the same argument as shared_ptr). Deleting takes no lock and
  // touches no other node (a node at zero is detached and empty).
  if (count != 0 && node->refs.fetch_sub(count, std::memory_order_acq_rel) == count) delete node;
}

// Precondition: node->lock held, node cancelled. Completes every waiter and
// unlocks. The lock may be dropped between batches: the node is cancelled,
// so no waiter joins, and a withdrawing one finds itself linked or fired.
void fire_waiters_and_unlock(CancelNode* node) noexcept {
  detail::WakeList wakes;
  while (CancelWaiter* waiter = node->waiters.pop_front()) {
    wakes.push(std::move(waiter->waker));  // copy before publish
    // release: pairs with the acquire in Cancelled::fired, withdraw and
    // cancelled_blocking; after this store the waiter may be freed.
    waiter->fired.store(true, std::memory_order_release);
    if (wakes.full()) {
      node->lock.unlock();
      wakes.wake_all();
      node->lock.lock();
    }
  }
  node->lock.unlock();
  wakes.wake_all();
}

void mark_cancelled(CancelNode* node) noexcept {
  // release: pairs with the acquire in CancelNode::is_cancelled and
  // wait_marked; the canceller's earlier writes, the marks of the node's
  // descendants among them, are visible to whoever sees the flag.
  node->cancelled.store(true, std::memory_order_release);
  // For a racing cancel() blocked in wait_marked. No system call when
  // nobody waits (libstdc++ counts waiters per address).
  node->cancelled.notify_all();
}

// `node` is claimed by another cancel: waits, holding no lock, until that
// cancel marks it (after its subtree). Each wait is for a walk that never
// waits for the waiter (see the top).
void wait_marked(CancelNode* node) noexcept {
  // acquire: pairs with the release store in mark_cancelled; the subtree's
  // marks, made before, are visible after. A short yield-spin covers the
  // common case (a small subtree); then block, so that a long walk on the
  // other thread does not cost a core, and a spinner of higher priority
  // cannot keep the walker off its CPU.
  for (int spins = 0; spins < 64; ++spins) {
    if (node->cancelled.load(std::memory_order_acquire)) return;
    std::this_thread::yield();
  }
  while (!node->cancelled.load(std::memory_order_acquire))
    node->cancelled.wait(false, std::memory_order_acquire);
}

// Precondition: node->lock held. Returns node's parent locked, with one extra
// reference for the caller to drop, and node still locked (re-taken if it had
// to be dropped); or nullptr if node has no parent.
CancelNode* lock_parent(CancelNode* node) noexcept {
  for (;;) {
    CancelNode* parent = node->parent;
    if (!parent) return nullptr;
    // node's link keeps parent alive while we hold node's lock; our own
    // reference keeps it alive across the unlock below.
    retain(parent);
    if (parent->lock.try_lock()) return parent;  // against the order, but never waits
    node->lock.unlock();
    parent->lock.lock();  // older than node: in order
    node->lock.lock();
    if (node->parent == parent) return parent;
    // Moved up or detached meanwhile: again, with the parent it has now.
    parent->lock.unlock();
    release(parent);
  }
}

// The last handle of `node` is gone (the handles' reference is still held by
// the caller).
// Preconditions: `from` and `to` locked, `to` an ancestor of `from` (the
// lock order: older to newer). Moves every child of `from` to `to`'s list
// (each child's lock taken in turn to repoint its parent link; the list's
// reference moves with it), takes `to`'s references for the new links, and
// returns how many moved: the old links' references on `from`, which the
// caller drops once it has unlocked.
std::size_t move_children(CancelNode* from, CancelNode* to) noexcept {
  std::size_t moved = 0;
  while (CancelNode* child = from->children.pop_front()) {
    child->lock.lock();
    child->parent = to;
    child->lock.unlock();
    to->children.push_back(child);
    ++moved;
  }
  retain(to, moved);
  return moved;
}

// Returns how many references on node the caller drops, together with the
// handles' one (one RMW, and no access to node after a release that could
// free it: GCC's -Wstringop-overflow under ASan flagged the second release).
[[nodiscard]] std::size_t detach(CancelNode* node) noexcept {
  node->lock.lock();
  std::size_t moved = 0;
  if (CancelNode* parent = lock_parent(node)) {
    parent->children.remove(node);  // the list's reference on node: dropped below
    node->parent = nullptr;         // node's reference on parent: dropped below
    // The parent takes node's children, so its cancel still reaches them.
    // (A claimed node has none left: see the top.)
    moved = move_children(node, parent);
    parent->lock.unlock();
    node->lock.unlock();
    release(parent, 2);  // node's link, lock_parent's reference
    return moved + 1;    // the moved children's links, the parent's list
  }
  // No parent: nothing can cancel node any more, so its children become
  // roots.
  while (CancelNode* child = node->children.pop_front()) {
    child->lock.lock();  // node -> child: in order
    child->parent = nullptr;
    child->lock.unlock();
    // The list's reference. Cannot be the last: a child still linked has a
    // handle, or its own detach is under way and holds the handles' reference.
    release(child);
    ++moved;
  }
  node->lock.unlock();
  return moved;  // the children's links
}

}  // namespace

namespace detail {

bool cancel_node_register(CancelNode* node, CancelWaiter* waiter) noexcept {
  std::lock_guard guard(node->lock);
  // relaxed: under the lock, after the canceller's store made under it.
  if (node->cancelled.load(std::memory_order_relaxed)) return false;
  node->waiters.push_back(waiter);
  return true;
}

void cancel_node_withdraw(CancelNode* node, CancelWaiter* waiter) noexcept {
  // acquire: pairs with the canceller's release store; seen true, the
  // canceller no longer touches the waiter.
  if (waiter->fired.load(std::memory_order_acquire)) return;
  std::lock_guard guard(node->lock);
  node->waiters.remove(waiter);  // not linked: fired meanwhile
}

CancelNodeCounts inspect(const CancellationToken& token) {
  CancelNode* node = token.node();
  std::lock_guard guard(node->lock);
  return {node->children.size(), node->waiters.size()};
}

}  // namespace detail

CancellationToken::CancellationToken() : node_(new CancelNode) {}

CancellationToken CancellationToken::child_token() const {
  CancelNode* parent = node();
  auto* child = new CancelNode;
  std::lock_guard guard(parent->lock);
  if (parent->claimed) {
    // Being or already cancelled: born cancelled and unattached (the walk
    // has taken, or will not look at, the parent's children). relaxed:
    // nobody else sees the child before the token is handed over (which
    // synchronises by itself).
    child->claimed = true;
    child->cancelled.store(true, std::memory_order_relaxed);
  } else {
    // relaxed: not yet shared.
    child->refs.store(2, std::memory_order_relaxed);  // the handles, the parent's list
    child->parent = parent;
    retain(parent);  // the child's link
    parent->children.push_back(child);
  }
  return CancellationToken(child);
}

void CancellationToken::drop_handle(CancelNode* node) noexcept {
  // acq_rel: the last handle's detach must see what the other handles did
  // (as shared_ptr's count).
  if (node->handles.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  release(node, detach(node) + 1);  // + the handles' reference
}

void CancellationToken::cancel_tree(CancelNode* root) noexcept {
  // The caller's handle keeps root (and its handles' reference) alive, so no
  // release below can free it.
  if (root->is_cancelled()) return;  // marked after its subtree: all done
  root->lock.lock();
  if (root->claimed) {
    root->lock.unlock();
    wait_marked(root);  // another cancel claimed it first and finishes it
    return;
  }
  root->claimed = true;

  // Claim the subtree. `claimed` holds each claimed node with the reference
  // its parent's list had, most recent first.
  detail::IntrusiveList<CancelNode> claimed;
  while (CancelNode* child = root->children.pop_front()) {
    // The list's reference on child is ours now.
    child->lock.lock();       // root -> child: in order
    child->parent = nullptr;  // its reference on root: dropped below
    if (child->claimed) {
      // Its own cancel is walking it (a walk unattaches what it claims):
      // wait for it, with no lock held, so that we return with it done.
      child->lock.unlock();
      root->lock.unlock();
      wait_marked(child);
      release(child);  // the list's reference
      release(root);   // child's link
      root->lock.lock();
      continue;
    }
    child->claimed = true;
    const std::size_t adopted = move_children(child, root);
    child->lock.unlock();
    claimed.push_front(child);  // unattached: its link is free
    root->lock.unlock();        // let others in between children
    release(child, adopted);    // the grandchildren's old links
    release(root);              // child's link
    root->lock.lock();
  }
  // root->children is empty and stays so (root is claimed: see the top).
  if (!claimed.empty()) {
    root->lock.unlock();
    // Descendants before ancestors: the most recently claimed first.
    while (CancelNode* node = claimed.pop_front()) {
      node->lock.lock();
      mark_cancelled(node);
      fire_waiters_and_unlock(node);
      release(node);  // the reference its parent's list had
    }
    root->lock.lock();
  }
  mark_cancelled(root);  // last: after every descendant
  fire_waiters_and_unlock(root);
}

void CancellationToken::cancelled_blocking() const {
  CancelNode* n = node();
  if (detail::tls_context.scheduler)
    throw Error(errc::blocking_in_runtime,
                "CancellationToken::cancelled_blocking on a runtime thread");
  if (n->is_cancelled()) return;
  detail::ThreadParker& parker = detail::ThreadParker::current();
  CancelWaiter waiter;
  waiter.waker = parker.waker();
  if (!detail::cancel_node_register(n, &waiter)) return;
  // acquire: pairs with the canceller's release store of `fired`.
  while (!waiter.fired.load(std::memory_order_acquire))
    parker.park();
}

}  // namespace volt
