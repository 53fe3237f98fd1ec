// Tests of the join that polls the awaited task in place (src/task/harness.cpp
// join_inline; include/volt/detail/task_state.hpp, "Inline polls"), on both
// runtime flavours.
//
// Covered: a join of a task nobody started runs it without a second poll of
// the awaiter; a fork-join tree stays depth first (the frames alive at once
// grow with its depth, not its width); a loop of spawn-and-join still yields
// every kCoopBudget joins; a task that waits during its inline poll, or
// yields there, is then awaited the ordinary way; an aborted task is not run
// in place; a task of another runtime runs on that runtime; a chain of
// spawn-and-await far deeper than the nesting limit; and aborts and runtime
// shutdown racing trees of inline polls (every frame destroyed, nothing
// leaked: run under the sanitizers in CI).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <thread>
#include <vector>

#include "runtime/runtime_support.hpp"
#include "test_support.hpp"
#include "volt/channel/oneshot.hpp"
#include "volt/error.hpp"
#include "volt/runtime/runtime.hpp"
#include "volt/task/join_handle.hpp"
#include "volt/task/task.hpp"
#include "volt/task/yield_now.hpp"
#include "volt/time/sleep.hpp"

namespace volt {
namespace {

using test::Flavour;
using test::FlavourName;
using test::kCurrentThread;
using test::kMultiThread1;
using test::kMultiThread2;
using test::kNotHung;
using test::LifeCounters;
using test::Tracked;

class JoinInline : public ::testing::TestWithParam<Flavour> {};

INSTANTIATE_TEST_SUITE_P(Flavours, JoinInline,
                         ::testing::Values(kMultiThread1, kMultiThread2, kCurrentThread),
                         FlavourName());

Task<int> identity(int x) {
  co_return x;
}

TEST_P(JoinInline, JoiningAnUnstartedTaskRunsItWithoutPollingTheAwaiterAgain) {
  Runtime rt = test::make_runtime(GetParam());
  constexpr int kJoins = 2000;
  const std::uint64_t before = rt.stats().total_polled;
  int sum = rt.block_on([]() -> Task<int> {
    int s = 0;
    for (int i = 0; i < kJoins; ++i)
      s += co_await spawn(identity(i));
    co_return s;
  }());
  EXPECT_EQ(sum, kJoins * (kJoins - 1) / 2);
  // Waiting for each child costs two queue polls per join (the child, then
  // the awaiter again). In place: none on a worker (the child is taken back
  // from the LIFO slot), one on the current-thread flavour (its entry is
  // popped and dropped), plus an ordinary wait every kCoopBudget joins.
  const std::uint64_t polls = rt.stats().total_polled - before;
  EXPECT_LT(polls, std::uint64_t{kJoins} * 3 / 2);
}

// Frames started and not yet finished, and the most at once.
struct Alive {
  std::atomic<int> now{0};
  std::atomic<int> peak{0};
  void enter() {
    const int n = now.fetch_add(1, std::memory_order_relaxed) + 1;
    int p = peak.load(std::memory_order_relaxed);
    while (n > p && !peak.compare_exchange_weak(p, n, std::memory_order_relaxed)) {
    }
  }
  void leave() { now.fetch_sub(1, std::memory_order_relaxed); }
};

Task<std::uint64_t> fib(int n, Alive* alive) {
  alive->enter();
  if (n < 2) {
    alive->leave();
    co_return static_cast<std::uint64_t>(n);
  }
  JoinHandle<std::uint64_t> first = spawn(fib(n - 1, alive));
  const std::uint64_t second = co_await fib(n - 2, alive);
  const std::uint64_t sum = co_await first + second;
  alive->leave();
  co_return sum;
}

TEST_P(JoinInline, AForkJoinTreeRunsDepthFirst) {
  Runtime rt = test::make_runtime(GetParam());
  Alive alive;
  // fib(22): 28,656 spawns, 57,313 frames, depth 22. Breadth first (every
  // join waiting while the oldest queued task runs next) kept 4,500 to 5,200
  // of them alive at once on a worker and 16,600 on the current-thread
  // flavour; depth first keeps a chain of about 22 per worker, plus the
  // chains a poll leaves behind when its budget runs out: measured 334-366
  // on a worker, 524 on the current-thread flavour (1,018 before it had a
  // LIFO slot and could take the newest entry back).
  std::uint64_t r = rt.block_on(fib(22, &alive));
  EXPECT_EQ(r, 17'711u);
  EXPECT_EQ(alive.now.load(), 0);
  std::printf("[ info     ] at most %d frames alive at once\n", alive.peak.load());
  EXPECT_LT(alive.peak.load(), 800) << "frames alive at once";
}

TEST_P(JoinInline, ALoopOfSpawnAndJoinStillYieldsEveryBudget) {
  // On one thread the watcher runs only when the loop lets it go; with two
  // workers it runs beside the loop and measures preemption, not the budget.
  if (!GetParam().current_thread && GetParam().workers > 1) GTEST_SKIP() << "one thread only";
  Runtime rt = test::make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    constexpr int kJoins = 3000;
    std::atomic<int> joins{0};
    std::atomic<bool> done{false};
    // Runs whenever the joining loop lets its worker go; records the longest
    // run of joins it had to wait through.
    JoinHandle<int> watcher =
        spawn([](std::atomic<int>* joins, std::atomic<bool>* done) -> Task<int> {
          int longest = 0;
          int last = joins->load();
          while (!done->load()) {
            const int now = joins->load();
            if (now - last > longest) longest = now - last;
            last = now;
            co_await yield_now();
          }
          co_return longest;
        }(&joins, &done));
    JoinHandle<void> loop =
        spawn([](std::atomic<int>* joins, std::atomic<bool>* done) -> Task<void> {
          for (int i = 0; i < kJoins; ++i) {
            (void)co_await spawn(identity(i));
            joins->fetch_add(1);
          }
          done->store(true);
        }(&joins, &done));
    co_await loop;
    const int longest = co_await watcher;
    // kCoopBudget (128) joins per poll of the loop (3,000 without the
    // budget: the whole loop in one poll). A poll that ran out ends in a join
    // that waits; the child's completion wakes the loop into the LIFO slot,
    // ahead of the watcher, so on a worker two polls may pass (measured 258).
    EXPECT_LE(longest, 2 * detail::kCoopBudget + 2) << "joins run in one stretch";
  }());
}

TEST_P(JoinInline, ATaskThatWaitsDuringItsInlinePollIsAwaitedTheOrdinaryWay) {
  Runtime rt = test::make_runtime(GetParam());
  int got = rt.block_on([]() -> Task<int> {
    auto [tx, rx] = oneshot::channel<int>();
    JoinHandle<int> child = spawn([](oneshot::Receiver<int> rx) -> Task<int> {
      std::optional<int> v = co_await rx;  // not sent yet: waits
      co_return v.value_or(-1) + 1;
    }(std::move(rx)));
    JoinHandle<void> sender = spawn([](oneshot::Sender<int> tx) -> Task<void> {
      co_await sleep(std::chrono::milliseconds(2));
      (void)tx.send(41);
    }(std::move(tx)));
    const int v = co_await child;
    co_await sender;
    co_return v;
  }());
  EXPECT_EQ(got, 42);
}

TEST_P(JoinInline, ATaskThatYieldsDuringItsInlinePollFinishesFromTheQueue) {
  Runtime rt = test::make_runtime(GetParam());
  int got = rt.block_on([]() -> Task<int> {
    int sum = 0;
    for (int round = 0; round < 200; ++round) {
      sum += co_await spawn([](int round) -> Task<int> {
        for (int i = 0; i < round % 4; ++i)
          co_await yield_now();
        co_return 1;
      }(round));
    }
    co_return sum;
  }());
  EXPECT_EQ(got, 200);
}

TEST_P(JoinInline, AnAbortedTaskIsCancelledNotRunInPlace) {
  Runtime rt = test::make_runtime(GetParam());
  rt.block_on([]() -> Task<void> {
    std::atomic<bool> ran{false};
    JoinHandle<void> child = spawn([](std::atomic<bool>* ran) -> Task<void> {
      ran->store(true);
      co_return;
    }(&ran));
    child.abort();
    std::optional<errc> error;
    try {
      co_await child;
    } catch (const Error& e) {
      error = static_cast<errc>(e.code().value());
    }
    EXPECT_EQ(error, errc::cancelled);
    EXPECT_FALSE(ran.load());
  }());
}

TEST_P(JoinInline, ATaskOfAnotherRuntimeRunsOnThatRuntime) {
  Runtime rt = test::make_runtime(GetParam());
  Runtime other = Runtime::Builder::multi_thread().worker_threads(1).build();
  Handle other_handle = other.handle();
  rt.block_on([](Handle other) -> Task<void> {
    for (int i = 0; i < 20; ++i) {
      const std::thread::id here = std::this_thread::get_id();
      JoinHandle<std::thread::id> child =
          other.spawn([]() -> Task<std::thread::id> { co_return std::this_thread::get_id(); }());
      const std::thread::id there = co_await child;
      EXPECT_NE(there, here) << "polled on the awaiting runtime's thread";
    }
  }(other_handle));
}

Task<int> chain(int depth) {
  if (depth == 0) co_return 0;
  co_return 1 + co_await spawn(chain(depth - 1));
}

TEST_P(JoinInline, AChainOfJoinsFarDeeperThanTheNestingLimit) {
  Runtime rt = test::make_runtime(GetParam());
  // Without a limit on nested inline polls, 20,000 levels would take the
  // stack's megabytes; below the limit, joins wait the ordinary way.
  const int depth = static_cast<int>(test::scale(20'000));
  EXPECT_EQ(rt.block_on(chain(depth)), depth);
}

// A tree whose leaves yield (so polls end and entries go stale in the
// queues) holding Tracked values in its frames.
Task<int> tracked_tree(int depth, LifeCounters* counters) {
  Tracked value(*counters, depth);
  if (depth == 0) {
    co_await yield_now();
    co_return 1;
  }
  JoinHandle<int> left = spawn(tracked_tree(depth - 1, counters));
  JoinHandle<int> right = spawn(tracked_tree(depth - 1, counters));
  const int r = co_await right;
  const int l = co_await left;
  co_return l + r + value.value() * 0;
}

TEST_P(JoinInline, AbortsRacingTreesOfInlinePollsLeakNothing) {
  LifeCounters counters;
  {
    Runtime rt = test::make_runtime(GetParam());
    int finished = 0, cancelled = 0;
    for (int round = 0; round < static_cast<int>(test::scale(60)) + 4; ++round) {
      JoinHandle<int> tree = rt.spawn(tracked_tree(9, &counters));
      // Abort at a different point of the tree's run each round.
      std::this_thread::sleep_for(std::chrono::microseconds(round * 37 % 700));
      tree.abort();
      try {
        EXPECT_EQ(tree.join(), 512);
        ++finished;
      } catch (const Error& e) {
        EXPECT_EQ(static_cast<errc>(e.code().value()), errc::cancelled);
        ++cancelled;
      }
    }
    std::printf("[ info     ] %d trees finished, %d cancelled\n", finished, cancelled);
  }
  // The runtime is gone: the detached subtrees of cancelled roots were
  // cancelled at shutdown. Every frame's Tracked was destroyed exactly once.
  EXPECT_EQ(counters.live(), 0);
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

TEST_P(JoinInline, ShutdownRacingTreesOfInlinePollsLeaksNothing) {
  LifeCounters counters;
  for (int round = 0; round < static_cast<int>(test::scale(40)) + 4; ++round) {
    {
      Runtime rt = test::make_runtime(GetParam());
      for (int t = 0; t < 3; ++t)
        (void)rt.spawn(tracked_tree(10, &counters));
      std::this_thread::sleep_for(std::chrono::microseconds(round * 53 % 900));
    }
    ASSERT_EQ(counters.live(), 0) << "round " << round;
  }
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

}  // namespace
}  // namespace volt
