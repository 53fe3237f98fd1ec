// Tests of volt::CancellationToken (include/volt/sync/cancellation_token.hpp,
// src/sync/cancellation_token.cpp): cancel wakes every waiter, an already
// cancelled token is ready at once, the tree (children cancelled with their
// parent and not the other way round, born-cancelled children, deep and
// re-parented trees, dropped children unlinked), cancelled() inside a
// timeout, one cancelled() kept across timeouts (registered once, re-awaited
// only by its task, immediate after completion), cancelled() of a temporary
// child token, the drop guard, the blocking form, bad input, stresses (cancel
// racing child creation and destruction, timeout loops racing the cancel,
// descendants cancelled before their ancestors, concurrent cancels of a node
// and its ancestor; run under TSan in CI), and no heap allocation while tasks
// wait.
#include <atomic>
#include <chrono>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/runtime_support.hpp"
#include "volt/detail/wake_list.hpp"
#include "volt/sync/cancellation_token.hpp"
#include "volt/time/sleep.hpp"
#include "volt/time/timeout.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

class CancellationTokenTest : public ::testing::TestWithParam<Flavour> {};
INSTANTIATE_TEST_SUITE_P(Flavours, CancellationTokenTest,
                         ::testing::Values(kMultiThread1, kMultiThread2, kCurrentThread),
                         FlavourName());

// Runs the runtime (a current-thread one only runs tasks inside block_on)
// until `pred` holds.
template <class Pred>
bool drive_until(Runtime& rt, Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + kNotHung;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    rt.block_on([]() -> Task<void> { co_await volt::yield_now(); }());
  }
  return true;
}

Task<void> wait_cancelled(CancellationToken token, std::atomic<int>* woken) {
  co_await token.cancelled();
  woken->fetch_add(1);
}

TEST_P(CancellationTokenTest, CancelWakesEveryWaiter) {
  Runtime rt = make_runtime(GetParam());
  CancellationToken token;
  std::atomic<int> woken{0};
  // More waiters than one WakeList batch.
  const int kWaiters = 3 * static_cast<int>(detail::WakeList::kCapacity) + 7;
  std::vector<JoinHandle<void>> hs;
  for (int i = 0; i < kWaiters; ++i)
    hs.push_back(rt.spawn(wait_cancelled(token, &woken)));
  ASSERT_TRUE(
      drive_until(rt, [&] { return detail::inspect(token).waiters == std::size_t(kWaiters); }));
  EXPECT_EQ(woken.load(), 0);
  EXPECT_FALSE(token.is_cancelled());
  token.cancel();
  EXPECT_TRUE(token.is_cancelled());
  for (auto& h : hs)
    h.join();
  EXPECT_EQ(woken.load(), kWaiters);
  EXPECT_EQ(detail::inspect(token).waiters, 0u);
  token.cancel();  // a second cancel is harmless
  EXPECT_TRUE(token.is_cancelled());
}

TEST_P(CancellationTokenTest, AnAlreadyCancelledTokenIsReadyAtOnce) {
  Runtime rt = make_runtime(GetParam());
  CancellationToken token;
  token.cancel();
  auto body = [](CancellationToken* t) -> Task<int> {
    for (int i = 0; i < 1000; ++i)  // past the coop budget: yields, never hangs
      co_await t->cancelled();
    co_return 1;
  };
  EXPECT_EQ(rt.block_on(body(&token)), 1);
  EXPECT_EQ(detail::inspect(token).waiters, 0u);
}

// ---- the tree ----

TEST_P(CancellationTokenTest, ChildrenAreCancelledWithTheirParent) {
  Runtime rt = make_runtime(GetParam());
  CancellationToken parent;
  CancellationToken a = parent.child_token();
  CancellationToken b = parent.child_token();
  CancellationToken a1 = a.child_token();
  std::atomic<int> woken{0};
  std::vector<JoinHandle<void>> hs;
  for (CancellationToken* t : {&parent, &a, &b, &a1})
    hs.push_back(rt.spawn(wait_cancelled(*t, &woken)));
  EXPECT_EQ(detail::inspect(parent).children, 2u);
  ASSERT_TRUE(drive_until(rt, [&] { return detail::inspect(a1).waiters == 1; }));
  parent.cancel();
  for (CancellationToken* t : {&parent, &a, &b, &a1})
    EXPECT_TRUE(t->is_cancelled());
  for (auto& h : hs)
    h.join();
  EXPECT_EQ(woken.load(), 4);
  EXPECT_EQ(detail::inspect(parent).children, 0u) << "a cancel detaches the subtree";
}

TEST(CancellationTokenTree, CancellingAChildLeavesItsParentAndSiblings) {
  CancellationToken parent;
  CancellationToken a = parent.child_token();
  CancellationToken b = parent.child_token();
  CancellationToken a1 = a.child_token();
  a.cancel();
  EXPECT_TRUE(a.is_cancelled());
  EXPECT_TRUE(a1.is_cancelled());
  EXPECT_FALSE(parent.is_cancelled());
  EXPECT_FALSE(b.is_cancelled());
  parent.cancel();
  EXPECT_TRUE(b.is_cancelled());
}

TEST(CancellationTokenTree, CopiesShareOneToken) {
  CancellationToken a;
  CancellationToken b = a;
  CancellationToken child = b.child_token();
  EXPECT_EQ(detail::inspect(a).children, 1u);
  b.cancel();
  EXPECT_TRUE(a.is_cancelled());
  EXPECT_TRUE(child.is_cancelled());
}

TEST(CancellationTokenTree, AChildOfACancelledTokenIsBornCancelled) {
  CancellationToken parent;
  parent.cancel();
  CancellationToken child = parent.child_token();
  EXPECT_TRUE(child.is_cancelled());
  EXPECT_TRUE(child.child_token().is_cancelled());
  EXPECT_EQ(detail::inspect(parent).children, 0u);
}

TEST(CancellationTokenTree, DroppedChildrenAreUnlinked) {
  CancellationToken parent;
  for (int i = 0; i < 10'000; ++i) {
    CancellationToken child = parent.child_token();
    CancellationToken grandchild = child.child_token();
    EXPECT_EQ(detail::inspect(parent).children, 1u);
  }
  EXPECT_EQ(detail::inspect(parent).children, 0u) << "dead children accumulate";
  CancellationToken kept = parent.child_token();
  {
    CancellationToken copy = kept;  // dropping a copy is not dropping the token
  }
  EXPECT_EQ(detail::inspect(parent).children, 1u);
}

TEST(CancellationTokenTree, ADroppedParentHandsItsChildrenToTheGrandparent) {
  CancellationToken root;
  std::optional<CancellationToken> middle(root.child_token());
  CancellationToken leaf = middle->child_token();
  middle.reset();  // the last handle of the middle node
  EXPECT_EQ(detail::inspect(root).children, 1u) << "the leaf moves up";
  root.cancel();
  EXPECT_TRUE(leaf.is_cancelled()) << "the grandparent must still reach the leaf";
}

TEST(CancellationTokenTree, AChainOfReplacedTokensStaysShort) {
  CancellationToken root;
  CancellationToken t = root.child_token();
  for (int i = 0; i < 100'000; ++i) {
    t = t.child_token();  // the old t's last handle goes: its child moves up
    ASSERT_EQ(detail::inspect(root).children, 1u);
  }
  root.cancel();
  EXPECT_TRUE(t.is_cancelled());
}

TEST(CancellationTokenTree, ADroppedRootsChildrenBecomeRoots) {
  std::optional<CancellationToken> root(std::in_place);
  CancellationToken child = root->child_token();
  CancellationToken grandchild = child.child_token();
  root.reset();
  EXPECT_FALSE(child.is_cancelled());
  child.cancel();
  EXPECT_TRUE(grandchild.is_cancelled());
}

TEST(CancellationTokenTree, DeepAndWideTreesCancelWithoutRecursion) {
  // A chain far deeper than the stack would allow a recursive walk.
  CancellationToken root;
  std::vector<CancellationToken> chain;
  chain.reserve(200'000);
  chain.push_back(root.child_token());
  for (int i = 1; i < 200'000; ++i)
    chain.push_back(chain.back().child_token());
  // And a wide level under one node.
  std::vector<CancellationToken> wide;
  for (int i = 0; i < 10'000; ++i)
    wide.push_back(chain[100].child_token());
  root.cancel();
  for (const CancellationToken& t : chain)
    ASSERT_TRUE(t.is_cancelled());
  for (const CancellationToken& t : wide)
    ASSERT_TRUE(t.is_cancelled());
  // Dropping a deep uncancelled chain from the root down does not recurse
  // either.
  std::vector<CancellationToken> chain2;
  chain2.push_back(CancellationToken());
  for (int i = 1; i < 200'000; ++i)
    chain2.push_back(chain2.back().child_token());
  chain2.clear();
}

// ---- timeout, drop guard, blocking form, bad input ----

Task<int> cancelled_with_timeout(CancellationToken* token, std::chrono::milliseconds d) {
  Expected<void> r = co_await volt::timeout(d, token->cancelled());
  co_return r ? 1 : 0;
}

Task<void> cancel_later(CancellationToken token, std::chrono::milliseconds d) {
  co_await volt::sleep(d);
  token.cancel();
}

TEST_P(CancellationTokenTest, CancelledInsideATimeout) {
  Runtime rt = make_runtime(GetParam());
  CancellationToken token;
  EXPECT_EQ(rt.block_on(cancelled_with_timeout(&token, 10ms)), 0);
  EXPECT_EQ(detail::inspect(token).waiters, 0u) << "the timed-out wait left its waiter behind";
  auto canceller = rt.spawn(cancel_later(token, 5ms));
  EXPECT_EQ(rt.block_on(cancelled_with_timeout(&token, 10s)), 1);
  canceller.join();
  EXPECT_EQ(rt.block_on(cancelled_with_timeout(&token, 0ms)), 1) << "ready beats the deadline";
}

// One cancelled() kept across timeouts (an lvalue operand stays registered,
// as Tokio's `&mut fut` in a select loop): each re-await keeps the single
// registration, the cancel completes it, and awaiting it once more after it
// completed is immediate.
Task<int> timeouts_then_cancel(CancellationToken* token) {
  CancellationToken::Cancelled c = token->cancelled();
  for (int i = 0; i < 3; ++i) {
    Expected<void> r = co_await volt::timeout(2ms, c);
    if (r) co_return -1;
    if (detail::inspect(*token).waiters != 1) co_return -2;  // registered once
  }
  JoinHandle<void> canceller = volt::spawn(cancel_later(*token, 2ms));
  co_await c;  // the same registration, completed by the cancel
  co_await canceller;
  if (detail::inspect(*token).waiters != 0) co_return -3;
  co_await c;  // completed: at once
  Expected<void> again = co_await volt::timeout(0ms, c);
  co_return again ? 1 : -4;
}

TEST_P(CancellationTokenTest, ACancelledKeptAcrossTimeoutsRegistersOnce) {
  Runtime rt = make_runtime(GetParam());
  CancellationToken token;
  EXPECT_EQ(rt.block_on(timeouts_then_cancel(&token)), 1);
  EXPECT_EQ(detail::inspect(token).waiters, 0u);
}

// A queued operation holds its task's waker: another task may not pick it up.
TEST_P(CancellationTokenTest, OnlyTheFirstTaskMayReawaitAQueuedCancelled) {
  Runtime rt = make_runtime(GetParam());
  CancellationToken token;
  CancellationToken::Cancelled c = token.cancelled();
  auto first = [](CancellationToken::Cancelled* op) -> Task<int> {
    co_return (co_await volt::timeout(1ms, *op)) ? 1 : 0;
  };
  auto other = [](CancellationToken::Cancelled* op) -> Task<std::error_code> {
    std::error_code ec;
    try {
      co_await *op;
    } catch (const Error& e) {
      ec = e.code();
    }
    co_return ec;
  };
  EXPECT_EQ(rt.block_on(first(&c)), 0);  // timed out, still queued
  EXPECT_EQ(rt.block_on(other(&c)), code(errc::invalid_handle));
  EXPECT_EQ(detail::inspect(token).waiters, 1u);
  token.cancel();
  EXPECT_EQ(rt.block_on(other(&c)), std::error_code()) << "completed: anyone may see it";
}

// `tok.child_token().cancelled()`: the operation keeps the temporary child
// alive and attached, so the parent's cancel still reaches it.
Task<int> cancelled_of_a_temporary_child(CancellationToken* token) {
  auto c = token->child_token().cancelled();
  JoinHandle<void> canceller = volt::spawn(cancel_later(*token, 2ms));
  Expected<void> r = co_await volt::timeout(kNotHung, c);
  co_await canceller;
  co_return r ? 1 : 0;
}

TEST_P(CancellationTokenTest, CancelledOfATemporaryChildToken) {
  Runtime rt = make_runtime(GetParam());
  CancellationToken token;
  EXPECT_EQ(rt.block_on(cancelled_of_a_temporary_child(&token)), 1);
  EXPECT_EQ(detail::inspect(token).children, 0u);
  // Of a cancelled token: born cancelled, ready.
  EXPECT_EQ(rt.block_on([](CancellationToken* t) -> Task<int> {
    auto c = t->child_token().cancelled();
    co_await c;
    co_return 1;
  }(&token)),
            1);
  CancellationToken live;
  {
    auto c = live.child_token().cancelled();
    EXPECT_EQ(detail::inspect(live).children, 1u) << "the operation keeps the child attached";
  }
  EXPECT_EQ(detail::inspect(live).children, 0u) << "unlinked when the operation goes";
}

TEST(CancellationTokenGuard, CancelsWhenDroppedUnlessDisarmed) {
  CancellationToken token;
  { auto guard = token.drop_guard(); }
  EXPECT_TRUE(token.is_cancelled());

  CancellationToken other;
  std::optional<CancellationToken> back;
  {
    auto guard = other.drop_guard();
    back = guard.disarm();
  }
  EXPECT_FALSE(other.is_cancelled());
  back->cancel();
  EXPECT_TRUE(other.is_cancelled());
}

TEST(CancellationTokenBlocking, PlainThreadsWaitAndRuntimeThreadsAreRefused) {
  CancellationToken token;
  CancellationToken child = token.child_token();
  std::atomic<bool> woken{false};
  std::thread t([&] {
    child.cancelled_blocking();
    woken.store(true);
  });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(woken.load());
  token.cancel();
  t.join();
  EXPECT_TRUE(woken.load());
  child.cancelled_blocking();  // already cancelled: returns at once

  Runtime rt = Runtime::Builder().worker_threads(1).build();
  auto h = rt.spawn([](CancellationToken* tk) -> Task<std::error_code> {
    co_return volt_error_of([&] { tk->cancelled_blocking(); });
  }(&token));
  EXPECT_EQ(h.join(), code(errc::blocking_in_runtime));
}

TEST(CancellationTokenBasics, AMovedFromTokenIsRefused) {
  CancellationToken a;
  CancellationToken b = std::move(a);
  EXPECT_EQ(volt_error_of([&] { (void)a.is_cancelled(); }), code(errc::invalid_handle));
  EXPECT_EQ(volt_error_of([&] { a.cancel(); }), code(errc::invalid_handle));
  EXPECT_EQ(volt_error_of([&] { (void)a.child_token(); }), code(errc::invalid_handle));
  EXPECT_EQ(volt_error_of([&] { (void)a.cancelled(); }), code(errc::invalid_handle));
  EXPECT_EQ(volt_error_of([&] { (void)a.drop_guard(); }), code(errc::invalid_handle));
  a = b;  // assignable again
  a.cancel();
  EXPECT_TRUE(b.is_cancelled());
}

// ---- stress: cancel races child creation, destruction and waiting ----

Task<void> wait_child(CancellationToken child, std::atomic<int>* woken) {
  co_await child.cancelled();
  woken->fetch_add(1);
}

TEST(CancellationTokenStress, CancelRacesChildCreationAndDestruction) {
  Runtime rt = Runtime::Builder().worker_threads(2).build();
  const int rounds = static_cast<int>(scale(300));
  for (int round = 0; round < rounds; ++round) {
    CancellationToken root;
    CancellationToken mid = root.child_token();
    std::atomic<bool> stop{false};
    std::atomic<int> violations{0};
    std::atomic<int> woken{0};
    std::atomic<int> spawned{0};
    std::vector<JoinHandle<void>> waiters;
    std::mutex waiters_mutex;
    auto churn = [&](std::uint64_t seed) {
      std::mt19937_64 rng(seed);
      std::vector<CancellationToken> kept;
      while (!stop.load()) {
        const CancellationToken& from = rng() % 2 ? root : mid;
        const bool was_cancelled = from.is_cancelled();
        CancellationToken child = from.child_token();
        if (was_cancelled && !child.is_cancelled()) violations.fetch_add(1);
        CancellationToken grandchild = child.child_token();
        switch (rng() % 4) {
          case 0:
            kept.push_back(std::move(grandchild));
            break;
          case 1: {
            std::lock_guard lock(waiters_mutex);
            waiters.push_back(rt.spawn(wait_child(grandchild, &woken)));
            spawned.fetch_add(1);
            break;
          }
          case 2:
            if (!kept.empty()) kept.erase(kept.begin() + static_cast<long>(rng() % kept.size()));
            break;
          default:
            break;  // dropped at once: unlinks, moves the grandchild up
        }
        if (kept.size() > 64) kept.erase(kept.begin());
      }
      // After the cancel: everything still held is cancelled.
      for (const CancellationToken& t : kept)
        if (!t.is_cancelled()) violations.fetch_add(1);
    };
    std::thread a(churn, 1000 + round);
    std::thread b(churn, 2000 + round);
    std::this_thread::sleep_for(std::chrono::microseconds(200 + round % 7 * 100));
    if (round % 2) mid.cancel();
    root.cancel();
    stop.store(true);
    a.join();
    b.join();
    EXPECT_TRUE(mid.is_cancelled());
    for (auto& h : waiters)
      h.join();  // every waiter was woken: would hang otherwise
    EXPECT_EQ(woken.load(), spawned.load());
    EXPECT_EQ(violations.load(), 0) << "round " << round;
    EXPECT_EQ(detail::inspect(root).children, 0u);
  }
}

// Cancelling children and dropping them while the parent is cancelled, from
// tasks on several workers.
TEST(CancellationTokenStress, ConcurrentCancelsOfParentAndChildren) {
  Runtime rt = Runtime::Builder().worker_threads(2).build();
  const int rounds = static_cast<int>(scale(2'000));
  for (int round = 0; round < rounds; ++round) {
    CancellationToken root;
    std::vector<CancellationToken> children;
    for (int i = 0; i < 8; ++i)
      children.push_back(root.child_token().child_token());  // middle dropped: moved up
    // Tokens whose only handles are these: dropped (detached) during the
    // cancels, some with children of their own to hand up.
    std::vector<CancellationToken> unwatched;
    std::vector<CancellationToken> unwatched_leaves;
    for (int i = 0; i < 8; ++i) {
      unwatched.push_back(root.child_token());
      if (i % 2) unwatched_leaves.push_back(unwatched.back().child_token());
    }
    std::atomic<int> woken{0};
    std::vector<JoinHandle<void>> hs;
    for (auto& c : children)
      hs.push_back(rt.spawn(wait_cancelled(c, &woken)));
    auto canceller = [](CancellationToken t) -> Task<void> {
      t.cancel();
      co_return;
    };
    auto c1 = rt.spawn(canceller(children[round % 8]));
    auto c2 = rt.spawn(canceller(root));
    children.clear();  // the tokens' last handles go while the cancels run
    unwatched.clear();
    c1.join();
    c2.join();
    for (const CancellationToken& t : unwatched_leaves)
      EXPECT_TRUE(t.is_cancelled());
    for (auto& h : hs)
      h.join();
    EXPECT_EQ(woken.load(), 8);
    EXPECT_EQ(detail::inspect(root).children, 0u);
  }
}

// A loop of timeouts over one cancelled() races the cancel from another
// thread: the re-awaits never register twice nor touch the waker outside the
// lock (TSan), and the loop ends.
TEST(CancellationTokenStress, TimeoutLoopsOverOneCancelledRaceTheCancel) {
  Runtime rt = Runtime::Builder().worker_threads(2).build();
  const int rounds = static_cast<int>(scale(1'000));
  for (int round = 0; round < rounds; ++round) {
    CancellationToken token;
    auto looper = [](CancellationToken* t, std::uint64_t seed) -> Task<int> {
      std::mt19937_64 rng(seed);
      CancellationToken::Cancelled c = t->cancelled();
      int timeouts = 0;
      while (!co_await volt::timeout(std::chrono::microseconds(rng() % 40), c))
        ++timeouts;
      co_return timeouts;
    };
    auto h = rt.spawn(looper(&token, 7 + round));
    std::this_thread::sleep_for(std::chrono::microseconds(round % 5 * 60));
    token.cancel();
    EXPECT_GE(h.join(), 0);
    EXPECT_EQ(detail::inspect(token).waiters, 0u);
  }
}

// A node's descendants are cancelled before it: a task woken by the parent's
// cancelled() finds the whole subtree cancelled (the subtree is wide so that
// the walk takes a while).
TEST(CancellationTokenStress, WokenParentWaitersSeeTheWholeSubtreeCancelled) {
  Runtime rt = Runtime::Builder().worker_threads(2).build();
  const int rounds = static_cast<int>(scale(200));
  for (int round = 0; round < rounds; ++round) {
    CancellationToken parent;
    std::vector<CancellationToken> subtree;
    for (int i = 0; i < 64; ++i) {
      subtree.push_back(parent.child_token());
      subtree.push_back(subtree.back().child_token());
      subtree.push_back(subtree.back().child_token());
    }
    auto watcher = [](CancellationToken* p, std::vector<CancellationToken>* all) -> Task<int> {
      co_await p->cancelled();
      int missed = 0;
      for (const CancellationToken& t : *all)
        missed += t.is_cancelled() ? 0 : 1;
      co_return missed;
    };
    std::vector<JoinHandle<int>> hs;
    for (int w = 0; w < 2; ++w)
      hs.push_back(rt.spawn(watcher(&parent, &subtree)));
    ASSERT_TRUE(wait_until([&] { return detail::inspect(parent).waiters == 2; }));
    parent.cancel();
    for (auto& h : hs)
      ASSERT_EQ(h.join(), 0) << "round " << round << ": woken before a descendant was cancelled";
  }
}

// The same seen through is_cancelled(): a thread that sees the parent
// cancelled sees every descendant cancelled.
TEST(CancellationTokenStress, SeeingATokenCancelledMeansItsSubtreeIs) {
  const int rounds = static_cast<int>(scale(200));
  for (int round = 0; round < rounds; ++round) {
    CancellationToken parent;
    std::vector<CancellationToken> subtree;
    for (int i = 0; i < 64; ++i) {
      subtree.push_back(parent.child_token());
      subtree.push_back(subtree.back().child_token());
    }
    std::atomic<bool> ready{false};
    int missed = 0;
    std::thread watcher([&] {
      ready.store(true);
      while (!parent.is_cancelled()) {
      }
      for (const CancellationToken& t : subtree)
        missed += t.is_cancelled() ? 0 : 1;
    });
    while (!ready.load()) {
    }
    parent.cancel();
    watcher.join();
    ASSERT_EQ(missed, 0) << "round " << round;
  }
}

// cancel() of a middle node racing cancel() of its ancestor: each returns only
// once the middle node's whole subtree is cancelled, whoever walks it.
TEST(CancellationTokenStress, ConcurrentCancelsOfANodeAndItsAncestorBothFinish) {
  const int rounds = static_cast<int>(scale(2'000));
  for (int round = 0; round < rounds; ++round) {
    CancellationToken root;
    CancellationToken mid = root.child_token();
    std::vector<CancellationToken> below;  // mid's descendants
    for (int i = 0; i < 16; ++i) {
      below.push_back(mid.child_token());
      CancellationToken child = below.back();
      below.push_back(child.child_token());
      below.push_back(below.back().child_token());
    }
    std::atomic<int> go{0};
    auto missed_after = [&](CancellationToken* t) {
      go.fetch_add(1);
      while (go.load() < 2) {
      }
      t->cancel();
      int missed = 0;
      for (const CancellationToken& b : below)
        missed += b.is_cancelled() ? 0 : 1;
      return missed;
    };
    int missed_root = 0;
    std::thread a([&] { missed_root = missed_after(round % 2 ? &root : &mid); });
    const int missed_mid = missed_after(round % 2 ? &mid : &root);
    a.join();
    ASSERT_EQ(missed_root, 0) << "round " << round;
    ASSERT_EQ(missed_mid, 0) << "round " << round;
  }
}

// ---- allocation ----

Task<std::uint64_t> waiting_allocations(CancellationToken* parent) {
  constexpr int kTasks = 8;
  std::vector<JoinHandle<void>> hs;
  hs.reserve(kTasks);
  std::atomic<int> woken{0};
  auto round = [&](CancellationToken token) -> Task<void> {
    for (int t = 0; t < kTasks; ++t)
      hs.push_back(volt::spawn(wait_cancelled(token, &woken)));
    co_await volt::sleep(1ms);  // they all wait
    token.cancel();
    for (auto& h : hs)
      co_await h;
    hs.clear();
  };
  // Two warm-up rounds: a join that polls a task in place leaves its queue
  // entry (and with it the task's cell) until the worker pops it, which may
  // be after the next round spawned, so the pools reach their steady size
  // in the second round.
  co_await round(parent->child_token());  // warm-up: frame pools, task cells, the timer
  co_await round(parent->child_token());
  CancellationToken token = parent->child_token();  // one allocation, outside the count
  const std::uint64_t before = heap_allocations();
  co_await round(token);
  co_return heap_allocations() - before;
}

TEST(CancellationTokenAllocation, WaitingDoesNotAllocate) {
  if (kFramePoolDisabled) GTEST_SKIP() << "frame pool disabled (ASan)";
  Runtime rt = Runtime::Builder().worker_threads(1).build();
  CancellationToken parent;
  EXPECT_EQ(rt.block_on(waiting_allocations(&parent)), 0u);
}

}  // namespace
}  // namespace volt::test
