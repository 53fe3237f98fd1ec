// Tests of volt::spawn and volt::JoinHandle<T> (include/volt/task/join_handle.hpp),
// plus yield_now and join_all, on both runtime flavours.
//
// Covered: results by co_await and by join(), join() refused on a runtime
// thread, is_finished(), abort before the first poll and while suspended (the
// frame and whatever it awaits are destroyed; the handle reports cancelled),
// abort of a finished task, exceptions through co_await and join(), empty
// handles, detaching by dropping the handle, yield_now fairness, and join_all
// over a pack and over a vector (including a failing task: the others still
// complete).
#include "volt/task/join_handle.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include "test_support.hpp"
#include "volt/channel/oneshot.hpp"
#include "volt/error.hpp"
#include "volt/runtime/runtime.hpp"
#include "volt/task/join_all.hpp"
#include "volt/task/spawn_blocking.hpp"
#include "volt/task/task.hpp"
#include "volt/task/yield_now.hpp"

namespace volt {
namespace {

using test::LifeCounters;
using test::RuntimeKind;
using test::Tracked;

class JoinHandleTest : public ::testing::TestWithParam<RuntimeKind> {
 protected:
  Runtime rt_ = test::build_runtime(GetParam());
};

INSTANTIATE_TEST_SUITE_P(Runtimes, JoinHandleTest,
                         ::testing::Values(RuntimeKind::kMultiThread, RuntimeKind::kCurrentThread),
                         [](const auto& info) { return test::runtime_kind_name(info.param); });

// A generous bound for "eventually": only a hang reaches it.
constexpr auto kNotHung = std::chrono::seconds(20);

// The errc carried by the volt::Error that `f` throws (or nullopt).
template <class F>
std::optional<errc> error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return static_cast<errc>(e.code().value());
  }
  return std::nullopt;
}

Task<int> square(int x) {
  co_return x* x;
}

Task<int> spawn_and_await(int x) {
  JoinHandle<int> handle = spawn(square(x));
  EXPECT_TRUE(handle.valid());
  EXPECT_NE(handle.id(), 0u);
  co_return co_await handle;
}

TEST_P(JoinHandleTest, AwaitReturnsTheSpawnedTasksValue) {
  EXPECT_EQ(rt_.block_on(spawn_and_await(7)), 49);
}

TEST_P(JoinHandleTest, JoinFromTheMainThreadReturnsTheValue) {
  JoinHandle<int> handle = rt_.spawn(square(9));
  EXPECT_EQ(handle.join(), 81);
  EXPECT_FALSE(handle.valid());  // consumed
}

TEST_P(JoinHandleTest, SpawnedTasksHaveDistinctIds) {
  JoinHandle<int> a = rt_.spawn(square(1));
  JoinHandle<int> b = rt_.spawn(square(2));
  EXPECT_NE(a.id(), b.id());
  EXPECT_EQ(a.join() + b.join(), 5);
  EXPECT_EQ(a.id(), 0u);  // empty after join
}

Task<int> join_inside_runtime() {
  JoinHandle<int> handle = spawn(square(4));
  std::optional<errc> code = error_of([&] { (void)handle.join(); });
  EXPECT_EQ(code, errc::blocking_in_runtime);
  // The refused join left the handle usable.
  EXPECT_TRUE(handle.valid());
  co_return co_await handle;
}

TEST_P(JoinHandleTest, JoinOnARuntimeThreadThrowsBlockingInRuntime) {
  EXPECT_EQ(rt_.block_on(join_inside_runtime()), 16);
}

Task<int> block_on_inside_runtime(Runtime* rt) {
  std::optional<errc> code = error_of([&] { (void)rt->block_on(square(2)); });
  co_return code == errc::blocking_in_runtime ? 1 : 0;
}

TEST_P(JoinHandleTest, BlockOnInsideATaskThrowsBlockingInRuntime) {
  EXPECT_EQ(rt_.block_on(block_on_inside_runtime(&rt_)), 1);
}

TEST(JoinHandleNoRuntimeTest, SpawnOutsideARuntimeThrowsNoRuntime) {
  std::optional<errc> code = error_of([] { (void)spawn(square(1)); });
  EXPECT_EQ(code, errc::no_runtime);
}

// ---- is_finished ----

Task<int> wait_for_value(oneshot::Receiver<int> rx) {
  std::optional<int> v = co_await rx;
  co_return v.value_or(-1);
}

TEST_P(JoinHandleTest, IsFinishedTurnsTrueOnlyWhenTheTaskCompletes) {
  auto [tx, rx] = oneshot::channel<int>();
  JoinHandle<int> handle = rt_.spawn(wait_for_value(std::move(rx)));
  EXPECT_FALSE(handle.is_finished());
  if (GetParam() == RuntimeKind::kMultiThread) {
    // Give the workers a chance to run it: it must stay unfinished.
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_FALSE(handle.is_finished());
  }
  EXPECT_EQ(tx.send(5), std::nullopt);
  if (GetParam() == RuntimeKind::kMultiThread) {
    const auto deadline = std::chrono::steady_clock::now() + kNotHung;
    while (!handle.is_finished() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    EXPECT_TRUE(handle.is_finished());
  }
  EXPECT_EQ(handle.join(), 5);
  EXPECT_FALSE(handle.is_finished());  // an empty handle
}

// ---- abort ----

Task<int> record_run(Tracked guard, std::atomic<bool>* ran) {
  ran->store(true);
  co_return guard.value();
}

TEST(JoinHandleAbortTest, AbortBeforeFirstPollDestroysTheFrameWithoutRunningIt) {
  // Current-thread: nothing runs until somebody drives the runtime, so the
  // abort certainly comes first.
  Runtime rt = Runtime::Builder::current_thread().build();
  LifeCounters counters;
  std::atomic<bool> ran{false};
  JoinHandle<int> handle = rt.spawn(record_run(Tracked(counters, 1), &ran));
  EXPECT_EQ(counters.live(), 1);  // the frame's parameter
  handle.abort();
  EXPECT_EQ(error_of([&] { (void)handle.join(); }), errc::cancelled);
  EXPECT_FALSE(ran.load());
  EXPECT_EQ(counters.live(), 0);
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

Task<int> spawn_abort_await(LifeCounters* counters, std::atomic<bool>* ran) {
  JoinHandle<int> handle = spawn(record_run(Tracked(*counters, 2), ran));
  handle.abort();  // we occupy the only worker: it has not run
  std::optional<errc> code;
  try {
    (void)co_await handle;
  } catch (const Error& e) {
    code = static_cast<errc>(e.code().value());
  }
  co_return code == errc::cancelled ? 1 : 0;
}

TEST(JoinHandleAbortTest, AbortBeforeFirstPollFromInsideASingleWorkerRuntime) {
  Runtime rt = Runtime::Builder().worker_threads(1).build();
  LifeCounters counters;
  std::atomic<bool> ran{false};
  EXPECT_EQ(rt.block_on(spawn_abort_await(&counters, &ran)), 1);
  EXPECT_FALSE(ran.load());
  EXPECT_EQ(counters.live(), 0);
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

// Suspends on a receiver that never gets a value. Its locals (the receiver,
// a Tracked guard) live in the frame until it is destroyed.
Task<int> wait_forever(oneshot::Receiver<int> rx, Tracked guard, std::atomic<bool>* started) {
  started->store(true);
  std::optional<int> v = co_await rx;
  co_return v.value_or(-1) + guard.value();
}

Task<int> abort_while_suspended(LifeCounters* counters, oneshot::Sender<int>* tx_out) {
  auto [tx, rx] = oneshot::channel<int>();
  std::atomic<bool> started{false};
  JoinHandle<int> handle = spawn(wait_forever(std::move(rx), Tracked(*counters, 3), &started));
  // Let it run up to its suspension point.
  while (!started.load())
    co_await yield_now();
  for (int i = 0; i < 10; ++i)
    co_await yield_now();
  EXPECT_FALSE(handle.is_finished());
  EXPECT_FALSE(tx.is_closed());  // the receiver is alive in the suspended frame
  handle.abort();
  std::optional<errc> code;
  try {
    (void)co_await handle;
  } catch (const Error& e) {
    code = static_cast<errc>(e.code().value());
  }
  // Destroying the frame destroyed the receiver it awaited.
  EXPECT_TRUE(tx.is_closed());
  *tx_out = std::move(tx);
  co_return code == errc::cancelled ? 1 : 0;
}

TEST_P(JoinHandleTest, AbortWhileSuspendedDestroysTheFrameAndWhatItAwaits) {
  LifeCounters counters;
  oneshot::Sender<int> tx;
  EXPECT_EQ(rt_.block_on(abort_while_suspended(&counters, &tx)), 1);
  EXPECT_EQ(counters.live(), 0);
  EXPECT_EQ(counters.double_destroyed.load(), 0);
  // The value comes back: nobody will ever receive it.
  EXPECT_EQ(tx.send(1), std::optional<int>(1));
}

TEST_P(JoinHandleTest, AbortFromTheMainThreadWhileSuspended) {
  LifeCounters counters;
  auto [tx, rx] = oneshot::channel<int>();
  std::atomic<bool> started{false};
  JoinHandle<int> handle = rt_.spawn(wait_forever(std::move(rx), Tracked(counters, 4), &started));
  if (GetParam() == RuntimeKind::kMultiThread) {
    const auto deadline = std::chrono::steady_clock::now() + kNotHung;
    while (!started.load() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    ASSERT_TRUE(started.load());
  }
  handle.abort();
  EXPECT_EQ(error_of([&] { (void)handle.join(); }), errc::cancelled);
  EXPECT_TRUE(tx.is_closed());
  EXPECT_EQ(counters.live(), 0);
}

Task<int> abort_finished_task() {
  JoinHandle<int> handle = spawn(square(6));
  while (!handle.is_finished())
    co_await yield_now();
  handle.abort();
  handle.abort();
  co_return co_await handle;
}

TEST_P(JoinHandleTest, AbortingAFinishedTaskDoesNothing) {
  EXPECT_EQ(rt_.block_on(abort_finished_task()), 36);
}

TEST_P(JoinHandleTest, AbortingTwiceBeforeItRunsReportsCancelledOnce) {
  auto [tx, rx] = oneshot::channel<int>();
  std::atomic<bool> started{false};
  LifeCounters counters;
  JoinHandle<int> handle = rt_.spawn(wait_forever(std::move(rx), Tracked(counters, 0), &started));
  handle.abort();
  handle.abort();
  EXPECT_EQ(error_of([&] { (void)handle.join(); }), errc::cancelled);
  EXPECT_EQ(counters.live(), 0);
}

Task<int> await_handle_by_pointer(JoinHandle<int>* handle, std::atomic<bool>* waiting) {
  waiting->store(true);
  co_return co_await *handle;
}

Task<int> abort_a_task_waiting_on_a_handle() {
  auto [tx, rx] = oneshot::channel<int>();
  JoinHandle<int> target = spawn(wait_for_value(std::move(rx)));
  std::atomic<bool> waiting{false};
  JoinHandle<int> waiter = spawn(await_handle_by_pointer(&target, &waiting));
  while (!waiting.load())
    co_await yield_now();
  for (int i = 0; i < 5; ++i)
    co_await yield_now();
  waiter.abort();
  int cancelled = 0;
  try {
    co_await waiter;
  } catch (const Error& e) {
    cancelled = e.code() == errc::cancelled;
  }
  // The aborted waiter withdrew its wait; the handle is still usable.
  EXPECT_TRUE(target.valid());
  EXPECT_EQ(tx.send(9), std::nullopt);
  co_return cancelled * 1000 + co_await target;
}

TEST_P(JoinHandleTest, AbortedAwaiterWithdrawsItsWaitAndTheHandleStaysUsable) {
  EXPECT_EQ(rt_.block_on(abort_a_task_waiting_on_a_handle()), 1009);
}

Task<int> yield_then_return(Tracked guard, int yields) {
  for (int i = 0; i < yields; ++i)
    co_await yield_now();
  co_return guard.value();
}

struct AbortTally {
  int values = 0;
  int cancelled = 0;
  int wrong = 0;
};

Task<AbortTally> spawn_and_abort_at_random(LifeCounters* counters, int n) {
  std::vector<JoinHandle<int>> handles;
  std::uint64_t rng = 0x9E3779B97F4A7C15ull;
  auto next = [&](std::uint64_t bound) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return static_cast<int>(rng % bound);
  };
  for (int i = 0; i < n; ++i) {
    handles.push_back(spawn(yield_then_return(Tracked(*counters, i), next(8))));
    // Abort an earlier task now and then: it may be queued, running on the
    // other worker, suspended in a yield, or already finished.
    if (next(3) == 0)
      handles[static_cast<std::size_t>(next(static_cast<std::uint64_t>(i + 1)))].abort();
    if (next(16) == 0) co_await yield_now();
  }
  AbortTally tally;
  for (int i = 0; i < n; ++i) {
    try {
      const int value = co_await handles[static_cast<std::size_t>(i)];
      if (value == i) {
        ++tally.values;
      } else {
        ++tally.wrong;
      }
    } catch (const Error& e) {
      if (e.code() == errc::cancelled) {
        ++tally.cancelled;
      } else {
        ++tally.wrong;
      }
    }
  }
  co_return tally;
}

TEST_P(JoinHandleTest, AbortsRacingWithPollsEitherCancelOrLetTheValueThrough) {
  const int n = static_cast<int>(test::scale(20'000));
  LifeCounters counters;
  AbortTally tally = rt_.block_on(spawn_and_abort_at_random(&counters, n));
  EXPECT_EQ(tally.wrong, 0);
  EXPECT_EQ(tally.values + tally.cancelled, n);
  EXPECT_GT(tally.cancelled, 0);  // aborts of not-yet-finished tasks happened
  // Every frame (and its Tracked parameter) was destroyed exactly once.
  EXPECT_EQ(counters.live(), 0);
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

// ---- exceptions ----

struct TaskFailure : std::runtime_error {
  explicit TaskFailure(int c) : std::runtime_error("task failure"), code(c) {}
  int code;
};

Task<int> fail_after_yield(int c) {
  co_await yield_now();
  throw TaskFailure(c);
}

Task<int> await_failure() {
  JoinHandle<int> handle = spawn(fail_after_yield(11));
  try {
    co_await handle;
  } catch (const TaskFailure& e) {
    co_return e.code;
  }
  co_return -1;
}

TEST_P(JoinHandleTest, ExceptionEscapingATaskIsRethrownByAwait) {
  EXPECT_EQ(rt_.block_on(await_failure()), 11);
}

TEST_P(JoinHandleTest, ExceptionEscapingATaskIsRethrownByJoin) {
  JoinHandle<int> handle = rt_.spawn(fail_after_yield(12));
  try {
    (void)handle.join();
    ADD_FAILURE() << "no exception";
  } catch (const TaskFailure& e) {
    EXPECT_EQ(e.code, 12);
  }
  EXPECT_FALSE(handle.valid());
}

// ---- empty handles ----

Task<int> await_empty_handles() {
  int invalid = 0;
  JoinHandle<int> handle = spawn(square(3));
  JoinHandle<int> moved = std::move(handle);
  try {
    co_await handle;  // moved from
  } catch (const Error& e) {
    if (e.code() == errc::invalid_handle) ++invalid;
  }
  const int value = co_await moved;
  try {
    co_await moved;  // already joined
  } catch (const Error& e) {
    if (e.code() == errc::invalid_handle) ++invalid;
  }
  JoinHandle<void> never;
  try {
    co_await never;  // default-constructed
  } catch (const Error& e) {
    if (e.code() == errc::invalid_handle) ++invalid;
  }
  co_return invalid * 100 + value;
}

TEST_P(JoinHandleTest, AwaitingAnEmptyHandleThrowsInvalidHandle) {
  EXPECT_EQ(rt_.block_on(await_empty_handles()), 309);
}

TEST_P(JoinHandleTest, JoiningAnEmptyHandleThrowsInvalidHandle) {
  JoinHandle<int> handle = rt_.spawn(square(2));
  EXPECT_EQ(handle.join(), 4);
  EXPECT_EQ(error_of([&] { (void)handle.join(); }), errc::invalid_handle);
  JoinHandle<int> never;
  EXPECT_EQ(error_of([&] { (void)never.join(); }), errc::invalid_handle);
  EXPECT_FALSE(never.is_finished());
  never.abort();  // harmless on an empty handle
}

// ---- detaching ----

Task<void> send_after_yields(oneshot::Sender<int> tx, int value) {
  for (int i = 0; i < 5; ++i)
    co_await yield_now();
  (void)tx.send(value);
}

Task<int> detach_then_wait(oneshot::Receiver<int> rx) {
  std::optional<int> v = co_await rx;
  co_return v.value_or(-1);
}

TEST_P(JoinHandleTest, DroppingTheHandleDetachesTheTask) {
  auto [tx, rx] = oneshot::channel<int>();
  {
    JoinHandle<void> handle = rt_.spawn(send_after_yields(std::move(tx), 77));
  }  // dropped before it could have finished (current-thread: before it ran)
  EXPECT_EQ(rt_.block_on(detach_then_wait(std::move(rx))), 77);
}

Task<int> detach_from_inside() {
  auto [tx, rx] = oneshot::channel<int>();
  { JoinHandle<void> handle = spawn(send_after_yields(std::move(tx), 78)); }
  std::optional<int> v = co_await rx;
  co_return v.value_or(-1);
}

TEST_P(JoinHandleTest, DroppingTheHandleInsideATaskDetaches) {
  EXPECT_EQ(rt_.block_on(detach_from_inside()), 78);
}

// ---- yield_now ----

Task<int> yield_until(std::atomic<bool>* flag, int limit) {
  int yields = 0;
  while (!flag->load() && yields < limit) {
    co_await yield_now();
    ++yields;
  }
  co_return yields;
}
Task<void> raise(std::atomic<bool>* flag) {
  flag->store(true);
  co_return;
}

Task<int> yielding_task_lets_another_run() {
  std::atomic<bool> flag{false};
  JoinHandle<int> spinner = spawn(yield_until(&flag, 1'000'000));
  JoinHandle<void> raiser = spawn(raise(&flag));
  co_await raiser;
  co_return co_await spinner;
}

TEST(YieldNowTest, YieldingTaskLetsAQueuedTaskRunOnASingleThread) {
  for (bool current_thread : {true, false}) {
    Runtime rt = current_thread ? Runtime::Builder::current_thread().build()
                                : Runtime::Builder().worker_threads(1).build();
    // Both tasks share one thread: the spinner sees the flag only if its
    // yields let the other task run; a yield goes behind queued work, so a
    // handful of yields suffice.
    int yields = rt.block_on(yielding_task_lets_another_run());
    EXPECT_LE(yields, 10) << (current_thread ? "current-thread" : "one worker");
  }
}

Task<int> count_while_other_counts(std::atomic<int>* mine, std::atomic<int>* other, int n) {
  int other_at_first_yield = -1;
  for (int i = 0; i < n; ++i) {
    mine->fetch_add(1);
    co_await yield_now();
    if (i == n / 2) other_at_first_yield = other->load();
  }
  co_return other_at_first_yield;
}

struct SeenCounts {
  int a_saw;
  int b_saw;
};

Task<SeenCounts> two_yield_loops() {
  std::atomic<int> a{0}, b{0};
  JoinHandle<int> ha = spawn(count_while_other_counts(&a, &b, 1000));
  JoinHandle<int> hb = spawn(count_while_other_counts(&b, &a, 1000));
  int a_saw = co_await ha;
  int b_saw = co_await hb;
  co_return SeenCounts{a_saw, b_saw};
}

TEST(YieldNowTest, TwoYieldingLoopsOnOneThreadInterleave) {
  Runtime rt = Runtime::Builder::current_thread().build();
  auto [a_saw, b_saw] = rt.block_on(two_yield_loops());
  // Halfway through its loop, each has seen the other make progress:
  // neither ran its 1000 yields back to back.
  EXPECT_GE(a_saw, 400);
  EXPECT_GE(b_saw, 400);
}

// ---- join_all ----

Task<void> set_after_yields(std::atomic<int>* counter, int yields) {
  for (int i = 0; i < yields; ++i)
    co_await yield_now();
  counter->fetch_add(1);
}
Task<std::string> greet(std::string who) {
  co_await yield_now();
  co_return "hello " + who;
}

Task<int> join_all_values() {
  auto [a, b, c] = co_await join_all(square(1), square(2), square(3));
  co_return a * 100 + b * 10 + c;
}

TEST_P(JoinHandleTest, JoinAllReturnsValuesInArgumentOrder) {
  EXPECT_EQ(rt_.block_on(join_all_values()), 149);
}

Task<int> join_all_void(std::atomic<int>* counter) {
  auto result = co_await join_all(set_after_yields(counter, 3), set_after_yields(counter, 1),
                                  set_after_yields(counter, 0));
  static_assert(
      std::is_same_v<decltype(result), std::tuple<std::monostate, std::monostate, std::monostate>>);
  co_return counter->load();
}

TEST_P(JoinHandleTest, JoinAllOfVoidTasksWaitsForAll) {
  std::atomic<int> counter{0};
  EXPECT_EQ(rt_.block_on(join_all_void(&counter)), 3);
}

Task<std::string> join_all_mixed(std::atomic<int>* counter) {
  auto [n, nothing, text] =
      co_await join_all(square(5), set_after_yields(counter, 2), greet("volt"));
  static_assert(std::is_same_v<decltype(nothing), std::monostate>);
  co_return std::to_string(n) + " " + text + " " + std::to_string(counter->load());
}

TEST_P(JoinHandleTest, JoinAllOfMixedTasks) {
  std::atomic<int> counter{0};
  EXPECT_EQ(rt_.block_on(join_all_mixed(&counter)), "25 hello volt 1");
}

Task<int> join_all_with_failure(std::atomic<int>* counter) {
  try {
    co_await join_all(set_after_yields(counter, 5), fail_after_yield(21),
                      set_after_yields(counter, 20), fail_after_yield(22));
  } catch (const TaskFailure& e) {
    // The first failure in argument order, after every task finished.
    co_return e.code * 10 + counter->load();
  }
  co_return -1;
}

TEST_P(JoinHandleTest, JoinAllRethrowsTheFirstFailureAfterTheOthersComplete) {
  std::atomic<int> counter{0};
  EXPECT_EQ(rt_.block_on(join_all_with_failure(&counter)), 212);
}

Task<std::vector<int>> join_all_vector(int n) {
  std::vector<Task<int>> tasks;
  for (int i = 0; i < n; ++i)
    tasks.push_back(square(i));
  co_return co_await join_all(std::move(tasks));
}

TEST_P(JoinHandleTest, JoinAllOfAVectorReturnsValuesInInputOrder) {
  std::vector<int> values = rt_.block_on(join_all_vector(100));
  ASSERT_EQ(values.size(), 100u);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(values[i], i * i);
  EXPECT_TRUE(rt_.block_on(join_all_vector(0)).empty());
}

Task<void> fail_void_after_yield(int c) {
  co_await yield_now();
  throw TaskFailure(c);
}

Task<int> join_all_vector_with_failure(std::atomic<int>* counter) {
  std::vector<Task<void>> tasks;
  for (int i = 0; i < 10; ++i)
    tasks.push_back(set_after_yields(counter, i));
  tasks.push_back(fail_void_after_yield(4));
  for (int i = 0; i < 10; ++i)
    tasks.push_back(set_after_yields(counter, i));
  try {
    co_await join_all(std::move(tasks));
  } catch (const TaskFailure& e) {
    co_return e.code * 100 + counter->load();
  }
  co_return -1;
}

TEST_P(JoinHandleTest, JoinAllOfAVectorPropagatesAFailureAfterTheOthersComplete) {
  std::atomic<int> counter{0};
  EXPECT_EQ(rt_.block_on(join_all_vector_with_failure(&counter)), 420);
}

// ---- Tokio's paths: volt::task::{spawn, spawn_blocking, yield_now, JoinHandle}
// and volt::runtime::{Runtime, Builder, Handle} ----

static_assert(std::is_same_v<runtime::Runtime, Runtime>);
static_assert(std::is_same_v<runtime::Builder, Runtime::Builder>);
static_assert(std::is_same_v<runtime::Handle, Handle>);
static_assert(std::is_same_v<task::JoinHandle<int>, JoinHandle<int>>);

Task<int> seven() {
  co_return 7;
}

Task<int> spawn_by_tokio_paths() {
  task::JoinHandle<int> spawned = task::spawn(seven());
  co_await task::yield_now();
  task::JoinHandle<int> blocking = task::spawn_blocking([] { return 35; });
  const int a = co_await spawned;
  const int b = co_await blocking;
  co_return a + b;
}

TEST(TaskTokioPaths, TaskAndRuntimeNamesAreTheTopLevelOnes) {
  runtime::Runtime rt = runtime::Builder::multi_thread().worker_threads(2).build();
  EXPECT_EQ(rt.block_on(spawn_by_tokio_paths()), 42);
  runtime::Runtime current = runtime::Builder::current_thread().build();
  EXPECT_EQ(current.block_on(spawn_by_tokio_paths()), 42);
}

}  // namespace
}  // namespace volt
