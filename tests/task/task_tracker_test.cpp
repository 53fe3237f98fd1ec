// Tests of volt::TaskTracker (include/volt/task/task_tracker.hpp), on the
// current-thread and the two-worker runtime:
//
//  - len() counts spawned, tracked and token-held tasks; a tracked Task
//    destroyed unstarted, an aborted spawned one and a finished one all stop
//    counting when their frame goes;
//  - wait() completes only once the tracker is closed and empty: not while
//    open, not while a task lives; at once when already done; close() and
//    reopen() report the previous state; copies share the tracker;
//  - stress: tasks ending on two workers while waits are made: every wait
//    completes, and sees every task's effect.
// Coroutines are free functions taking their state by pointer or value;
// awaited values are bound to a local before they are tested (GCC 12).
#include "volt/task/task_tracker.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "test_support.hpp"
#include "time/time_test_support.hpp"
#include "volt/volt.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

class TaskTrackerTest : public ::testing::TestWithParam<Flavour> {};

INSTANTIATE_TEST_SUITE_P(Flavours, TaskTrackerTest,
                         ::testing::Values(kMultiThread2, kCurrentThread), FlavourName());

Task<int> wait_then(oneshot::Receiver<int> rx, std::atomic<int>* done) {
  std::optional<int> v = co_await rx;
  done->fetch_add(1);
  co_return v.value_or(-1);
}

Task<int> parked(Notify* never) {
  co_await never->notified();
  co_return 0;
}

// Whether `tracker.wait()` completes within `d`.
Task<bool> waits_within(TaskTracker tracker, std::chrono::milliseconds d) {
  Expected<void> r = co_await volt::timeout(d, tracker.wait());
  co_return r.has_value();
}

struct CountOutcome {
  std::size_t after_spawn = 0;
  std::size_t after_unstarted_dropped = 0;
  std::size_t after_abort = 0;
  std::size_t with_token = 0;
  bool waited_while_open = true;
  bool waited_while_live = true;
  bool first_close = false;
  bool second_close = true;
  bool waited_when_done = false;
  int done = 0;
  std::size_t at_end = 99;
  bool reopened = false;
  bool waited_after_reopen = true;
};

Task<CountOutcome> count_and_wait() {
  CountOutcome out;
  TaskTracker tracker;
  std::atomic<int> done{0};
  std::vector<oneshot::Sender<int>> txs;
  std::vector<JoinHandle<int>> handles;
  for (int i = 0; i < 4; ++i) {
    auto [tx, rx] = oneshot::channel<int>();
    txs.push_back(std::move(tx));
    handles.push_back(tracker.spawn(wait_then(std::move(rx), &done)));
  }
  out.after_spawn = tracker.len();
  {
    Notify never;
    Task<int> unstarted = tracker.track(parked(&never));
    (void)unstarted;
  }
  out.after_unstarted_dropped = tracker.len();
  Notify never;
  JoinHandle<int> aborted = tracker.spawn(parked(&never));
  co_await volt::sleep(2ms);
  aborted.abort();
  co_await volt::sleep(2ms);
  // The abort ran (the frame is destroyed when the runtime polls it).
  for (int i = 0; i < 1000 && tracker.len() != 4; ++i)
    co_await volt::sleep(1ms);
  out.after_abort = tracker.len();
  {
    TaskTrackerToken token = tracker.token();
    out.with_token = tracker.len();
  }

  out.waited_while_open = co_await waits_within(tracker, 5ms);
  out.first_close = tracker.close();
  out.second_close = tracker.close();
  out.waited_while_live = co_await waits_within(tracker, 5ms);
  // A wait made now, completed by the last task's end.
  TaskTracker copy = tracker;
  JoinHandle<bool> waiter = volt::spawn(waits_within(copy, 10s));
  for (auto& tx : txs)
    (void)tx.send(1);
  out.waited_when_done = co_await waiter;
  out.done = done.load();
  out.at_end = tracker.len();
  for (auto& h : handles)
    (void)co_await h;
  out.reopened = tracker.reopen();
  out.waited_after_reopen = co_await waits_within(tracker, 2ms);
  co_return out;
}

TEST_P(TaskTrackerTest, CountsTasksAndWaitsForClosedAndEmpty) {
  Runtime rt = make_runtime(GetParam());
  CountOutcome out = run_in_runtime(rt, GetParam(), count_and_wait());
  EXPECT_EQ(out.after_spawn, 4u);
  EXPECT_EQ(out.after_unstarted_dropped, 4u) << "an unstarted tracked Task was not uncounted";
  EXPECT_EQ(out.after_abort, 4u) << "an aborted task was not uncounted";
  EXPECT_EQ(out.with_token, 5u);
  EXPECT_FALSE(out.waited_while_open);
  EXPECT_TRUE(out.first_close);
  EXPECT_FALSE(out.second_close);
  EXPECT_FALSE(out.waited_while_live);
  EXPECT_TRUE(out.waited_when_done);
  EXPECT_EQ(out.done, 4) << "wait() completed before every task ended";
  EXPECT_EQ(out.at_end, 0u);
  EXPECT_TRUE(out.reopened);
  EXPECT_FALSE(out.waited_after_reopen);
}

Task<bool> closed_empty_waits_at_once() {
  TaskTracker tracker;
  tracker.close();
  Expected<void> r = co_await volt::timeout(0ms, tracker.wait());
  co_return r.has_value();
}

TEST_P(TaskTrackerTest, ClosedAndEmptyCompletesAtOnce) {
  Runtime rt = make_runtime(GetParam());
  EXPECT_TRUE(run_in_runtime(rt, GetParam(), closed_empty_waits_at_once()));
}

// ---- stress ----

Task<void> short_job(int i, std::atomic<int>* done) {
  if (i % 2 == 0) co_await yield_now();
  done->fetch_add(1);
}

// Each round: n tasks, a waiter spawned partway, close, wait; the waits
// must see every task's effect.
Task<int> rounds_of_wait(int rounds, int n) {
  int wrong = 0;
  for (int r = 0; r < rounds; ++r) {
    TaskTracker tracker;
    std::atomic<int> done{0};
    JoinHandle<bool> early;
    for (int i = 0; i < n; ++i) {
      (void)tracker.spawn(short_job(i, &done));
      if (i == n / 2) early = volt::spawn(waits_within(tracker, 10s));
    }
    tracker.close();
    co_await tracker.wait();
    if (done.load() != n) ++wrong;
    bool early_done = co_await early;
    if (!early_done) ++wrong;
  }
  co_return wrong;
}

TEST(TaskTrackerStressTest, EveryWaitSeesEveryTaskOnTwoWorkers) {
  Runtime rt = make_runtime(kMultiThread2);
  EXPECT_EQ(run_in_runtime(rt, kMultiThread2, rounds_of_wait(static_cast<int>(scale(300)), 64)), 0);
}

}  // namespace
}  // namespace volt::test
