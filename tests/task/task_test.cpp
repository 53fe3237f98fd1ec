// Tests of volt::Task<T> (include/volt/task/task.hpp), awaited inside both
// runtime flavours: values, void, move-only and reference results, exceptions
// through await chains, constant stack over a million nested or sequential
// awaits, laziness (an unawaited Task never runs and destroying it destroys its
// parameters), the error of awaiting an empty Task, and frame recycling (no
// heap allocation per await once warm).
//
// This file is the volt_task_tests binary's only definer of the counting
// global operator new (test_support.hpp).
#define VOLT_TEST_DEFINE_COUNTING_NEW 1
#include "volt/task/task.hpp"

#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "test_support.hpp"
#include "volt/error.hpp"
#include "volt/runtime/runtime.hpp"
#include "volt/time/sleep.hpp"

namespace volt {
namespace {

using test::LifeCounters;
using test::RuntimeKind;
using test::Tracked;

class TaskTest : public ::testing::TestWithParam<RuntimeKind> {
 protected:
  Runtime rt_ = test::build_runtime(GetParam());
};

INSTANTIATE_TEST_SUITE_P(Runtimes, TaskTest,
                         ::testing::Values(RuntimeKind::kMultiThread, RuntimeKind::kCurrentThread),
                         [](const auto& info) { return test::runtime_kind_name(info.param); });

// ---- results ----

Task<int> answer() {
  co_return 42;
}
Task<int> twice() {
  co_return 2 * co_await answer();
}
Task<int> add(int a, int b) {
  co_return a + b;
}
Task<int> sum_of_three() {
  int x = co_await add(1, 2);
  int y = co_await add(x, 3);
  co_return co_await add(y, co_await twice());
}

TEST_P(TaskTest, ReturnsValuesThroughAwaitChains) {
  EXPECT_EQ(rt_.block_on(answer()), 42);
  EXPECT_EQ(rt_.block_on(twice()), 84);
  EXPECT_EQ(rt_.block_on(sum_of_three()), 1 + 2 + 3 + 84);
}

Task<void> store(int& out, int value) {
  out = value;
  co_return;
}
Task<int> store_then_read(int& slot) {
  co_await store(slot, 7);
  co_await store(slot, slot + 1);
  co_return slot;
}

TEST_P(TaskTest, VoidTasksRunToCompletion) {
  int slot = 0;
  rt_.block_on(store(slot, 5));
  EXPECT_EQ(slot, 5);
  EXPECT_EQ(rt_.block_on(store_then_read(slot)), 8);
  EXPECT_EQ(slot, 8);
}

Task<std::unique_ptr<int>> make_box(int value) {
  co_return std::make_unique<int>(value);
}
Task<std::unique_ptr<int>> add_to_box(int extra) {
  std::unique_ptr<int> box = co_await make_box(10);
  *box += extra;
  co_return box;
}

TEST_P(TaskTest, MoveOnlyResultsAreMovedOut) {
  std::unique_ptr<int> box = rt_.block_on(add_to_box(5));
  ASSERT_NE(box, nullptr);
  EXPECT_EQ(*box, 15);
}

Task<int&> pick(int& a, int& b, bool first) {
  co_return first ? a : b;
}
Task<int*> address_through_reference(int& a, int& b) {
  int& r = co_await pick(a, b, false);
  r = 99;  // writes the original object
  co_return &r;
}

TEST_P(TaskTest, ReferenceResultsReferToTheOriginalObject) {
  int a = 1, b = 2;
  int* p = rt_.block_on(address_through_reference(a, b));
  EXPECT_EQ(p, &b);
  EXPECT_EQ(b, 99);
  EXPECT_EQ(a, 1);
  // Also through a spawned task's output slot.
  int& r = rt_.block_on(pick(a, b, true));
  EXPECT_EQ(&r, &a);
}

// ---- exceptions ----

struct CustomError : std::runtime_error {
  explicit CustomError(int c) : std::runtime_error("custom"), code(c) {}
  int code;
};

Task<int> fail_at_depth(int depth) {
  if (depth == 0) throw CustomError(17);
  co_return 1 + co_await fail_at_depth(depth - 1);
}
Task<int> catch_in_the_middle() {
  try {
    co_return co_await fail_at_depth(5);
  } catch (const CustomError& e) {
    co_return 1000 + e.code;
  }
}
Task<void> void_thrower() {
  throw std::logic_error("void failed");
  co_return;
}
Task<int> rethrow_after_catch() {
  try {
    co_await void_thrower();
  } catch (const std::logic_error&) {
    throw CustomError(3);
  }
  co_return 0;
}

TEST_P(TaskTest, ExceptionsPropagateThroughAwaitChains) {
  EXPECT_EQ(rt_.block_on(catch_in_the_middle()), 1017);
  try {
    rt_.block_on(fail_at_depth(10));
    ADD_FAILURE() << "no exception";
  } catch (const CustomError& e) {
    EXPECT_EQ(e.code, 17);
  }
  EXPECT_THROW(rt_.block_on(void_thrower()), std::logic_error);
  try {
    rt_.block_on(rethrow_after_catch());
    ADD_FAILURE() << "no exception";
  } catch (const CustomError& e) {
    EXPECT_EQ(e.code, 3);
  }
  // The runtime is still usable afterwards.
  EXPECT_EQ(rt_.block_on(answer()), 42);
}

// ---- stack depth ----

Task<std::uint64_t> nest(std::uint64_t n) {
  if (n == 0) co_return 0;
  co_return 1 + co_await nest(n - 1);
}

TEST_P(TaskTest, MillionNestedAwaitsDoNotOverflowTheStack) {
  if (!test::kConstantStackAwaits)
    GTEST_SKIP() << "GCC without optimisation or with a sanitizer does not tail-call symmetric "
                    "transfer (see kConstantStackAwaits)";
  // Each level's frame is live until the innermost completes; symmetric
  // transfer must keep the stack flat on the way down and back up.
  const std::uint64_t depth = 1'000'000;
  EXPECT_EQ(rt_.block_on(nest(depth)), depth);
}

Task<int> one() {
  co_return 1;
}
Task<std::uint64_t> await_ready_children(std::uint64_t n) {
  std::uint64_t sum = 0;
  for (std::uint64_t i = 0; i < n; ++i)
    sum += co_await one();
  co_return sum;
}

TEST_P(TaskTest, MillionSequentialAwaitsOfReadyChildrenDoNotOverflowTheStack) {
  if (!test::kConstantStackAwaits)
    GTEST_SKIP() << "GCC without optimisation or with a sanitizer does not tail-call symmetric "
                    "transfer (see kConstantStackAwaits)";
  const std::uint64_t n = 1'000'000;
  EXPECT_EQ(rt_.block_on(await_ready_children(n)), n);
}

// ---- laziness and frame lifetime ----

Task<int> record_run(Tracked guard, bool& ran) {
  ran = true;
  co_return guard.value();
}

TEST(TaskLazinessTest, UnawaitedTaskNeverRunsAndItsDestructionDestroysItsParameters) {
  LifeCounters counters;
  bool ran = false;
  {
    Task<int> task = record_run(Tracked(counters, 5), ran);
    EXPECT_TRUE(static_cast<bool>(task));
    EXPECT_FALSE(ran);
    // The argument temporary is gone; the frame's copy of the parameter lives.
    EXPECT_EQ(counters.live(), 1);
  }
  EXPECT_FALSE(ran);
  EXPECT_EQ(counters.live(), 0);
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

TEST(TaskLazinessTest, MovedTaskOwnsTheFrameOnce) {
  LifeCounters counters;
  bool ran = false;
  {
    Task<int> a = record_run(Tracked(counters, 1), ran);
    Task<int> b = std::move(a);
    EXPECT_FALSE(static_cast<bool>(a));
    EXPECT_TRUE(static_cast<bool>(b));
    // Move-assigning over a live task destroys the frame it held.
    Task<int> c = record_run(Tracked(counters, 2), ran);
    EXPECT_EQ(counters.live(), 2);
    c = std::move(b);
    EXPECT_EQ(counters.live(), 1);
  }
  EXPECT_FALSE(ran);
  EXPECT_EQ(counters.live(), 0);
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

Task<int> create_without_awaiting(LifeCounters& counters, bool& ran) {
  { Task<int> unawaited = record_run(Tracked(counters, 3), ran); }
  co_return counters.live() == 0 ? 1 : 0;
}

TEST_P(TaskTest, TaskCreatedButNotAwaitedInsideATaskNeverRuns) {
  LifeCounters counters;
  bool ran = false;
  EXPECT_EQ(rt_.block_on(create_without_awaiting(counters, ran)), 1);
  EXPECT_FALSE(ran);
  EXPECT_EQ(counters.live(), 0);
}

TEST_P(TaskTest, AwaitedTaskRunsAndReleasesItsParameters) {
  LifeCounters counters;
  bool ran = false;
  EXPECT_EQ(rt_.block_on(record_run(Tracked(counters, 8), ran)), 8);
  EXPECT_TRUE(ran);
  EXPECT_EQ(counters.live(), 0);
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

// ---- empty tasks ----

Task<int> await_moved_from() {
  Task<int> task = answer();
  Task<int> other = std::move(task);
  bool invalid = false;
  try {
    (void)co_await task;  // moved from: empty
  } catch (const Error& e) {
    invalid = e.code() == errc::invalid_handle;
  }
  // The frame moved with `other`, which still runs normally.
  co_return invalid ? co_await other : -1;
}
Task<int> await_default_constructed() {
  Task<int> empty;
  try {
    co_await empty;
  } catch (const Error& e) {
    co_return e.code() == errc::invalid_handle ? 1 : -1;
  }
  co_return -2;
}
Task<int> await_empty_void() {
  Task<void> empty;
  try {
    co_await empty;
  } catch (const Error& e) {
    co_return e.code() == errc::invalid_handle ? 1 : -1;
  }
  co_return -2;
}

TEST_P(TaskTest, AwaitingAnEmptyTaskThrowsInvalidHandle) {
  EXPECT_EQ(rt_.block_on(await_moved_from()), 42);
  EXPECT_EQ(rt_.block_on(await_default_constructed()), 1);
  EXPECT_EQ(rt_.block_on(await_empty_void()), 1);
}

TEST_P(TaskTest, BlockOnAnEmptyTaskThrowsInvalidHandle) {
  try {
    rt_.block_on(Task<int>{});
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::invalid_handle);
  }
}

// ---- frame recycling ----

struct AllocationProbe {
  std::uint64_t allocations;
  std::uint64_t sum;
  bool same_thread;
};

// Counts the allocations of the awaiting thread only: with several workers,
// another worker may still be starting up (and allocating its own state) in
// the window, which says nothing about what an await costs. Awaiting a child
// that completes without suspending never leaves the thread; same_thread
// checks it, as the count would otherwise miss allocations made elsewhere.
Task<AllocationProbe> count_allocations_of_awaits(std::uint64_t n) {
  for (int i = 0; i < 1000; ++i)
    co_await one();  // warm-up: fill the frame pool
  const std::thread::id thread = std::this_thread::get_id();
  const std::uint64_t before = test::thread_heap_allocations();
  std::uint64_t sum = 0;
  for (std::uint64_t i = 0; i < n; ++i)
    sum += co_await one();
  const std::uint64_t after = test::thread_heap_allocations();
  co_return AllocationProbe{after - before, sum, thread == std::this_thread::get_id()};
}

TEST_P(TaskTest, AwaitingChildTasksDoesNotAllocateOnceWarm) {
  if (test::kFramePoolDisabled) GTEST_SKIP() << "frame pool disabled (AddressSanitizer)";
  {
    // The counter must really count, or the zero below would prove nothing.
    const std::uint64_t before = test::thread_heap_allocations();
    void* volatile probe = ::operator new(24);
    ::operator delete(probe);
    ASSERT_EQ(test::thread_heap_allocations() - before, 1u);
  }
  AllocationProbe probe = rt_.block_on(count_allocations_of_awaits(10'000));
  EXPECT_EQ(probe.sum, 10'000u);
  ASSERT_TRUE(probe.same_thread);
  EXPECT_EQ(probe.allocations, 0u);
}

// Counts what any thread allocates while the task sleeps.
Task<std::uint64_t> allocations_across_a_sleep() {
  const std::uint64_t before = test::heap_allocations();
  co_await volt::sleep(std::chrono::milliseconds(50));
  co_return test::heap_allocations() - before;
}

// Pins the calling thread to `cpu`.
void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(set), &set), 0);
}

// A thread's parker is made on its first blocking wait, with one allocation.
// block_on makes it before it spawns: made in join(), it fell inside the
// task's run on the worker, and allocation-counting tests, whose first
// block_on is the counted one, saw it (one in hundreds of runs, under load).
// Here the caller runs at SCHED_IDLE on the worker's CPU, so the worker the
// spawn wakes runs the task before the caller gets as far as join().
TEST(BlockOnAllocation, TheCallersParkerIsMadeBeforeTheTaskStarts) {
  if (test::kFramePoolDisabled) GTEST_SKIP() << "allocations are not counted (AddressSanitizer)";
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &allowed))
    ++cpu;
  Runtime rt = Runtime::Builder().worker_threads(1).on_thread_start([cpu] { pin_to(cpu); }).build();
  // Warm: the worker thread has started, the timer wheel has had a sleep.
  (void)rt.block_on(allocations_across_a_sleep());
  std::uint64_t during = ~std::uint64_t{0};
  std::thread fresh([&] {
    pin_to(cpu);
    sched_param idle{};
    ASSERT_EQ(pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle), 0);
    during = rt.block_on(allocations_across_a_sleep());
  });
  fresh.join();
  EXPECT_EQ(during, 0u) << "the fresh thread's parker was made while the task ran";
}

}  // namespace
}  // namespace volt
