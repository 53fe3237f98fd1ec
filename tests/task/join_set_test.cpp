// Tests of volt::JoinSet<T> (include/volt/task/join_set.hpp), on the
// current-thread and the two-worker runtime:
//
//  - join_next() gives results in the order the tasks finished, std::nullopt
//    on an empty set; try_join_next() never waits; len()/is_empty();
//  - an exception escaping a task is rethrown by join_next and the set
//    carries on with the rest; void tasks; spawn_on(task, handle) from a
//    plain thread;
//  - cancel-safety: join_next cancelled by timeout and by select while tasks
//    finish on the other worker: every result is counted exactly once;
//  - abort_all(): every frame destroyed (a destructor counts them), each
//    task reported as errc::cancelled, one that finished first keeps its
//    value; destroying the set aborts and drops everything, also while tasks
//    are finishing on other workers; detach_all(): the tasks keep running;
//  - waiting allocates nothing (the counting operator new);
//  - stress: 10 000 tasks on two workers, each result once.
// Coroutines are free functions taking their state by pointer or value;
// awaited values are bound to a local before they are tested (GCC 12).
#define VOLT_TEST_DEFINE_COUNTING_NEW 1
#include "volt/task/join_set.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "test_support.hpp"
#include "time/time_test_support.hpp"
#include "volt/volt.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

class JoinSetTest : public ::testing::TestWithParam<Flavour> {};

INSTANTIATE_TEST_SUITE_P(Flavours, JoinSetTest, ::testing::Values(kMultiThread2, kCurrentThread),
                         FlavourName());

// Counts, in its destructor, that a frame holding it reached its end.
struct CountOnExit {
  std::atomic<int>* n;
  ~CountOnExit() { n->fetch_add(1); }
};

// Waits for its receiver, then returns `id`; `exited` counts the frame's end
// (after which the task's outcome is its value even if it is aborted: the
// poll that runs the end completes it).
Task<int> released(oneshot::Receiver<int> rx, int id, std::atomic<int>* exited) {
  CountOnExit on_exit{exited};
  std::optional<int> v = co_await rx;
  (void)v;
  co_return id;
}

// Holds `probe` in its frame and never finishes on its own.
Task<int> parked(Tracked probe, Notify* never) {
  co_await never->notified();
  co_return probe.value();
}

// Sleeps until `*counter` reaches `target`.
Task<void> wait_for_count(std::atomic<std::int64_t>* counter, std::int64_t target) {
  while (counter->load() < target)
    co_await volt::sleep(1ms);
}
Task<void> wait_for_int(std::atomic<int>* counter, int target) {
  while (counter->load() < target)
    co_await volt::sleep(1ms);
}

// ---- order, empty set, try_join_next ----

struct OrderOutcome {
  std::vector<int> one_at_a_time;
  std::vector<int> queued;
  bool empty_was_nullopt = false;
  bool try_on_running_was_nullopt = false;
  std::size_t len_before = 0;
  std::size_t len_after = 0;
};

Task<OrderOutcome> order_by_completion() {
  OrderOutcome out;
  JoinSet<int> set;
  std::optional<Expected<int>> none = co_await set.join_next();
  out.empty_was_nullopt = !none.has_value();

  // One at a time: each join_next gets exactly the task just released.
  std::atomic<int> exited{0};
  {
    std::vector<oneshot::Sender<int>> txs;
    for (int i = 0; i < 4; ++i) {
      auto [tx, rx] = oneshot::channel<int>();
      txs.push_back(std::move(tx));
      set.spawn(released(std::move(rx), i, &exited));
    }
    out.len_before = set.len();
    std::optional<Expected<int>> early = set.try_join_next();
    out.try_on_running_was_nullopt = !early.has_value();
    for (int id : {2, 0, 3, 1}) {
      (void)txs[static_cast<std::size_t>(id)].send(0);
      std::optional<Expected<int>> r = co_await set.join_next();
      out.one_at_a_time.push_back(r && *r ? **r : -1);
    }
  }
  // Queued: released in order 1, 3, 0, 2, each finished before the next is
  // released (its frame ended, then 50 ms for its completion to reach the
  // set: the completion runs right after, in the same poll, so only a
  // preempted worker needs the margin), then joined.
  {
    std::vector<oneshot::Sender<int>> txs;
    for (int i = 0; i < 4; ++i) {
      auto [tx, rx] = oneshot::channel<int>();
      txs.push_back(std::move(tx));
      set.spawn(released(std::move(rx), i, &exited));
    }
    int target = exited.load();
    for (int id : {1, 3, 0, 2}) {
      (void)txs[static_cast<std::size_t>(id)].send(0);
      co_await wait_for_int(&exited, ++target);
      co_await volt::sleep(50ms);
    }
    while (!set.is_empty()) {
      std::optional<Expected<int>> r = co_await set.join_next();
      out.queued.push_back(r && *r ? **r : -1);
    }
  }
  out.len_after = set.len();
  co_return out;
}

TEST_P(JoinSetTest, ResultsComeInCompletionOrder) {
  Runtime rt = make_runtime(GetParam());
  OrderOutcome out = run_in_runtime(rt, GetParam(), order_by_completion());
  EXPECT_TRUE(out.empty_was_nullopt);
  EXPECT_TRUE(out.try_on_running_was_nullopt);
  EXPECT_EQ(out.len_before, 4u);
  EXPECT_EQ(out.one_at_a_time, (std::vector<int>{2, 0, 3, 1}));
  EXPECT_EQ(out.queued, (std::vector<int>{1, 3, 0, 2}));
  EXPECT_EQ(out.len_after, 0u);
}

// ---- exceptions, void, spawn_on ----

Task<int> throws_after_yield() {
  co_await yield_now();
  throw std::runtime_error("task failed");
}

Task<void> count_up(std::atomic<int>* n) {
  co_await yield_now();
  n->fetch_add(1);
}

struct ExceptionOutcome {
  int thrown = 0;
  int values = 0;
  int sum = 0;
  int void_results = 0;
  int void_ran = 0;
};

Task<ExceptionOutcome> exceptions_and_void() {
  ExceptionOutcome out;
  JoinSet<int> set;
  set.spawn(throws_after_yield());
  for (int i = 1; i <= 5; ++i)
    set.spawn(square(i));
  while (!set.is_empty()) {
    try {
      std::optional<Expected<int>> r = co_await set.join_next();
      if (r && *r) {
        ++out.values;
        out.sum += **r;
      }
    } catch (const std::runtime_error&) {
      ++out.thrown;
    }
  }
  std::atomic<int> ran{0};
  JoinSet<void> voids;
  for (int i = 0; i < 3; ++i)
    voids.spawn(count_up(&ran));
  for (;;) {
    std::optional<Expected<void>> r = co_await voids.join_next();
    if (!r) break;
    if (r->has_value()) ++out.void_results;
  }
  out.void_ran = ran.load();
  co_return out;
}

TEST_P(JoinSetTest, ExceptionIsRethrownAndTheSetCarriesOn) {
  Runtime rt = make_runtime(GetParam());
  ExceptionOutcome out = run_in_runtime(rt, GetParam(), exceptions_and_void());
  EXPECT_EQ(out.thrown, 1);
  EXPECT_EQ(out.values, 5);
  EXPECT_EQ(out.sum, 1 + 4 + 9 + 16 + 25);
  EXPECT_EQ(out.void_results, 3);
  EXPECT_EQ(out.void_ran, 3);
}

Task<int> drain_sum(JoinSet<int> set) {
  int sum = 0;
  for (;;) {
    std::optional<Expected<int>> r = co_await set.join_next();
    if (!r) break;
    sum += r->value();
  }
  co_return sum;
}

TEST_P(JoinSetTest, SpawnOnAHandleFromAPlainThread) {
  Runtime rt = make_runtime(GetParam());
  JoinSet<int> set;
  for (int i = 1; i <= 10; ++i)
    set.spawn_on(square(i), rt.handle());
  EXPECT_EQ(set.len(), 10u);
  EXPECT_EQ(volt_error_of([&] { set.spawn(square(1)); }), code(errc::no_runtime));
  EXPECT_EQ(set.len(), 10u) << "a failed spawn left an entry";
  EXPECT_EQ(run_in_runtime(rt, GetParam(), drain_sum(std::move(set))), 385);
}

// ---- cancel-safety ----

Task<int> finish_soon(int id, int spins) {
  for (int i = 0; i < spins; ++i)
    co_await yield_now();
  if (id % 3 == 0) co_await volt::sleep(std::chrono::microseconds(100 * (id % 7)));
  co_return id;
}

struct CancelOutcome {
  std::vector<int> seen;  // how often each id was received
  int timed_out = 0;
  int lost_select = 0;
  int wrong = 0;
};

Task<CancelOutcome> join_next_cancelled_repeatedly(int n) {
  CancelOutcome out;
  out.seen.assign(static_cast<std::size_t>(n), 0);
  JoinSet<int> set;
  // First, cancellations that do not depend on timing: with only an
  // unfinished task in the set, a join_next under a timeout must time out
  // and one that loses a select to a yield must lose. The task, released
  // afterwards, must still be joined once (as id n - 1).
  std::atomic<int> exited{0};
  auto [gate, gate_rx] = oneshot::channel<int>();
  set.spawn(released(std::move(gate_rx), n - 1, &exited));
  Expected<std::optional<Expected<int>>> early =
      co_await volt::timeout(std::chrono::milliseconds(1), set.join_next());
  if (!early) ++out.timed_out;
  auto lost = co_await volt::select_biased(volt::yield_now(), set.join_next());
  if (lost.index() == 0) ++out.lost_select;
  (void)gate.send(0);
  for (int i = 0; i < n - 1; ++i)
    set.spawn(finish_soon(i, i % 5));
  int round = 0;
  while (!set.is_empty()) {
    ++round;
    std::optional<Expected<int>> got;
    if (round % 2 == 0) {
      // A timeout short enough to fire while tasks are finishing.
      Expected<std::optional<Expected<int>>> r =
          co_await volt::timeout(std::chrono::microseconds(20), set.join_next());
      if (!r) {
        ++out.timed_out;
        continue;
      }
      got = std::move(*r);
    } else {
      // A select that a yield often wins: join_next cancelled after it armed.
      auto r = co_await volt::select_biased(volt::yield_now(), set.join_next());
      if (r.index() == 0) {
        ++out.lost_select;
        continue;
      }
      got = std::move(std::get<1>(r));
    }
    if (!got || !*got) {
      ++out.wrong;
      continue;
    }
    const int id = **got;
    if (id < 0 || id >= n) {
      ++out.wrong;
      continue;
    }
    ++out.seen[static_cast<std::size_t>(id)];
  }
  co_return out;
}

TEST_P(JoinSetTest, JoinNextCancelledByTimeoutOrSelectLosesNothing) {
  Runtime rt = make_runtime(GetParam());
  const int n = static_cast<int>(scale(3000));
  CancelOutcome out = run_in_runtime(rt, GetParam(), join_next_cancelled_repeatedly(n));
  EXPECT_EQ(out.wrong, 0);
  int missing = 0, duplicated = 0;
  for (int c : out.seen) {
    if (c == 0) ++missing;
    if (c > 1) ++duplicated;
  }
  EXPECT_EQ(missing, 0);
  EXPECT_EQ(duplicated, 0);
  EXPECT_GE(out.timed_out, 1) << "the join_next on an unfinished set did not time out";
  EXPECT_GE(out.lost_select, 1)
      << "the join_next on an unfinished set won a select against a yield";
}

// ---- abort_all, destruction, detach_all ----

struct AbortOutcome {
  int cancelled = 0;
  int values = 0;
  int value = -1;
  std::size_t len = 0;
  std::int64_t live_after = -1;
};

Task<int> seven(std::atomic<int>* exited) {
  CountOnExit on_exit{exited};
  co_return 7 * 7;
}

Task<AbortOutcome> abort_all_tasks(LifeCounters* counters) {
  AbortOutcome out;
  Notify never;
  JoinSet<int> set;
  std::atomic<int> exited{0};
  set.spawn(seven(&exited));
  for (int i = 0; i < 8; ++i)
    set.spawn(parked(Tracked(*counters, i), &never));
  // The first task has finished (its outcome is its value from here on);
  // the others have had time to start and park.
  co_await wait_for_int(&exited, 1);
  co_await volt::sleep(5ms);
  set.abort_all();
  out.len = set.len();
  for (;;) {
    std::optional<Expected<int>> r = co_await set.join_next();
    if (!r) break;
    if (r->has_value()) {
      ++out.values;
      out.value = **r;
    } else if (r->error() == errc::cancelled) {
      ++out.cancelled;
    }
  }
  out.live_after = counters->live();
  co_return out;
}

TEST_P(JoinSetTest, AbortAllDestroysEveryFrameAndReportsCancelled) {
  Runtime rt = make_runtime(GetParam());
  LifeCounters counters;
  AbortOutcome out = run_in_runtime(rt, GetParam(), abort_all_tasks(&counters));
  EXPECT_EQ(out.len, 9u) << "abort_all took tasks out of the set";
  EXPECT_EQ(out.cancelled, 8);
  EXPECT_EQ(out.values, 1);
  EXPECT_EQ(out.value, 49);
  EXPECT_EQ(out.live_after, 0) << "an aborted task's frame was not destroyed";
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

Task<int> make_tracked_value(LifeCounters* counters, int v) {
  Tracked t(*counters, v);
  co_return t.value();
}

Task<std::int64_t> destroy_with_tasks_inside(LifeCounters* counters, Notify* never) {
  {
    JoinSet<int> set;
    for (int i = 0; i < 16; ++i)
      set.spawn(parked(Tracked(*counters, i), never));
    co_await volt::sleep(5ms);
    EXPECT_EQ(counters->live(), 16);
  }  // destroyed: every task aborted and dropped
  // The frames go when the runtime polls the aborted tasks.
  co_await wait_for_count(&counters->destroyed, counters->constructed.load());
  co_return counters->live();
}

TEST_P(JoinSetTest, DestructionAbortsEveryTask) {
  Runtime rt = make_runtime(GetParam());
  LifeCounters counters;
  Notify never;
  EXPECT_EQ(run_in_runtime(rt, GetParam(), destroy_with_tasks_inside(&counters, &never)), 0);
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

// Spawns and destroys sets whose tasks finish at that moment on the other
// worker (under TSan/ASan: the shared state's lifetime).
Task<int> destroy_while_finishing(int rounds, LifeCounters* counters) {
  int wrong = 0;
  for (int round = 0; round < rounds; ++round) {
    JoinSet<int> set;
    for (int i = 0; i < 4; ++i)
      set.spawn(finish_soon(i, round % 3));
    set.spawn(make_tracked_value(counters, round));
    if (round % 2 == 0) co_await yield_now();
    if (round % 4 == 1) {
      std::optional<Expected<int>> r = set.try_join_next();
      if (r && !*r) ++wrong;
    }
  }
  co_return wrong;
}

TEST_P(JoinSetTest, DestroyedWhileTasksFinishOnOtherWorkers) {
  Runtime rt = make_runtime(GetParam());
  LifeCounters counters;
  EXPECT_EQ(run_in_runtime(rt, GetParam(),
                           destroy_while_finishing(static_cast<int>(scale(2000)), &counters)),
            0);
  EXPECT_TRUE(wait_until([&] { return counters.live() == 0; }));
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

Task<void> wait_then_count(oneshot::Receiver<int> rx, std::atomic<int>* done) {
  std::optional<int> v = co_await rx;
  if (v) done->fetch_add(1);
}

struct DetachOutcome {
  std::size_t len_after_detach = 99;
  bool join_next_empty = false;
};

Task<DetachOutcome> detach_then_release(std::vector<oneshot::Sender<int>>* txs,
                                        std::atomic<int>* done, int n) {
  DetachOutcome out;
  JoinSet<void> set;
  for (int i = 0; i < n; ++i) {
    auto [tx, rx] = oneshot::channel<int>();
    txs->push_back(std::move(tx));
    set.spawn(wait_then_count(std::move(rx), done));
  }
  co_await volt::sleep(2ms);
  set.detach_all();
  out.len_after_detach = set.len();
  std::optional<Expected<void>> r = co_await set.join_next();
  out.join_next_empty = !r.has_value();
  co_return out;
}

TEST_P(JoinSetTest, DetachAllLeavesTheTasksRunning) {
  Runtime rt = make_runtime(GetParam());
  DriveInBackground drive(rt, GetParam());
  std::vector<oneshot::Sender<int>> txs;
  std::atomic<int> done{0};
  DetachOutcome out = run_in_runtime(rt, GetParam(), detach_then_release(&txs, &done, 8));
  EXPECT_EQ(out.len_after_detach, 0u);
  EXPECT_TRUE(out.join_next_empty);
  for (auto& tx : txs)
    (void)tx.send(1);
  EXPECT_TRUE(wait_until([&] { return done.load() == 8; })) << done.load();
}

// ---- allocation ----

Task<int> yield_then_return(int id) {
  co_await yield_now();
  co_await yield_now();
  co_return id;
}

struct AllocOutcome {
  std::uint64_t waiting_allocs = 0;
  int sum = 0;
};

Task<int> spawn_and_drain(JoinSet<int>* set, int n, std::uint64_t* waiting_allocs) {
  for (int i = 0; i < n; ++i)
    set->spawn(yield_then_return(i));
  const std::uint64_t before = heap_allocations();
  int sum = 0;
  for (;;) {
    std::optional<Expected<int>> r = co_await set->join_next();
    if (!r) break;
    sum += **r;
  }
  *waiting_allocs = heap_allocations() - before;
  co_return sum;
}

Task<AllocOutcome> count_join_next_allocations() {
  AllocOutcome out;
  JoinSet<int> set;
  std::uint64_t ignored = 0;
  (void)co_await spawn_and_drain(&set, 64, &ignored);  // warm-up: frame pools
  out.sum = co_await spawn_and_drain(&set, 64, &out.waiting_allocs);
  co_return out;
}

class JoinSetAllocationTest : public ::testing::TestWithParam<Flavour> {};

INSTANTIATE_TEST_SUITE_P(Flavours, JoinSetAllocationTest,
                         ::testing::Values(kMultiThread1, kCurrentThread), FlavourName());

TEST_P(JoinSetAllocationTest, WaitingInJoinNextDoesNotAllocate) {
  if (kFramePoolDisabled)
    GTEST_SKIP() << "frame pool disabled: the counting operator new is not installed";
  Runtime rt = make_runtime(GetParam());
  AllocOutcome out = run_in_runtime(rt, GetParam(), count_join_next_allocations());
  EXPECT_EQ(out.sum, 63 * 64 / 2);
  EXPECT_EQ(out.waiting_allocs, 0u);
}

// ---- stress ----

Task<int> small_job(int id) {
  if (id % 4 == 0) co_await yield_now();
  if (id % 97 == 0) co_await volt::sleep(std::chrono::microseconds(id % 500));
  co_return id;
}

Task<std::vector<int>> ten_thousand(int n) {
  std::vector<int> seen(static_cast<std::size_t>(n), 0);
  JoinSet<int> set;
  for (int i = 0; i < n; ++i) {
    set.spawn(small_job(i));
    // Join some while spawning, so both sides run at once.
    if (i % 8 == 7) {
      std::optional<Expected<int>> r = set.try_join_next();
      if (r) ++seen[static_cast<std::size_t>(r->value())];
    }
  }
  for (;;) {
    std::optional<Expected<int>> r = co_await set.join_next();
    if (!r) break;
    ++seen[static_cast<std::size_t>(r->value())];
  }
  co_return seen;
}

TEST(JoinSetStressTest, TenThousandTasksOnTwoWorkersEachJoinedOnce) {
  Runtime rt = make_runtime(kMultiThread2);
  const int n = static_cast<int>(scale(10000));
  std::vector<int> seen = run_in_runtime(rt, kMultiThread2, ten_thousand(n));
  int wrong = 0;
  for (int c : seen)
    if (c != 1) ++wrong;
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace volt::test
