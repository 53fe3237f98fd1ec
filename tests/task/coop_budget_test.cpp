// The cooperative budget (128 per poll): a task whose awaits keep completing
// at once is still made to yield, so it cannot starve the tasks queued
// behind it (the cooperative budget, docs/design.md).
#include <gtest/gtest.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "volt/volt.hpp"

namespace {

constexpr int kReadyAwaits = 1000;
constexpr int kBudget = 128;  // volt::detail::kCoopBudget

volt::Task<void> set_flag(std::atomic<bool>& flag) {
  flag.store(true);
  co_return;
}

// Awaits kReadyAwaits receivers that all have their value already; returns
// how many had completed when `other` ran (-1: never, during the loop).
volt::Task<int> greedy_loop(std::atomic<bool>& other_ran) {
  std::vector<volt::oneshot::Receiver<int>> ready;
  for (int i = 0; i < kReadyAwaits; ++i) {
    auto [tx, rx] = volt::oneshot::channel<int>();
    EXPECT_FALSE(tx.send(i).has_value());
    ready.push_back(std::move(rx));
  }
  // Queued behind us; it can only run when this task gives the thread back.
  auto other = volt::spawn(set_flag(other_ran));
  int seen_at = -1;
  for (int i = 0; i < kReadyAwaits; ++i) {
    std::optional<int> v = co_await ready[static_cast<std::size_t>(i)];
    EXPECT_EQ(v, i);
    if (seen_at < 0 && other_ran.load()) seen_at = i;
  }
  co_await other;
  co_return seen_at;
}

class CoopBudgetTest : public ::testing::TestWithParam<bool> {};

TEST_P(CoopBudgetTest, ReadyAwaitsYieldOncePerBudget) {
  volt::Runtime rt = GetParam() ? volt::Runtime::Builder::current_thread().build()
                                : volt::Runtime::Builder().worker_threads(1).build();
  std::atomic<bool> other_ran{false};
  int seen_at = rt.block_on(greedy_loop(other_ran));
  // The other task ran during the loop, and no later than one budget in
  // (the poll started with a full budget of 128 and the loop's awaits each
  // spend one; the budget may have been partly spent before the loop).
  ASSERT_GE(seen_at, 1);
  EXPECT_LE(seen_at, kBudget + 1);
}

// The thread's context and identity as that thread sees them now: called
// through volatile pointers, so that the compiler can neither inline them
// nor treat them as pure (clang at -O2 reuses a pthread_self() from before
// a suspension), and nothing computed earlier can stand in for them.
volt::detail::ThreadContext* context_here() {
  return &volt::detail::tls_context;
}
pid_t thread_here() {
  return static_cast<pid_t>(::syscall(SYS_gettid));
}
volt::detail::ThreadContext* (*volatile context_out_of_line)() = &context_here;
pid_t (*volatile current_thread_id)() = &thread_here;

// Holds its worker until `resumed` (or 1 s, so that nothing can hang).
volt::Task<void> hold_the_worker(const std::atomic<bool>* resumed) {
  for (int i = 0; i < 10'000 && !resumed->load(); ++i)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  co_return;
}

// Spends budget, then moves to the other worker: it queues a task that holds
// this worker until it has resumed (in the LIFO slot, so it runs next) and
// yields behind it (the yield wakes the other worker, which steals it).
// Counts the resumptions on another thread and checks, each time, that the
// context it spends budget in is the one of the thread it is on.
volt::Task<int> hop_between_workers(int rounds) {
  int moves = 0;
  // Where the compiler first computes the context (a cached address would
  // be this one).
  EXPECT_EQ(volt::detail::this_thread_context(), context_out_of_line());
  for (int i = 0; i < rounds; ++i) {
    auto [tx, rx] = volt::oneshot::channel<int>();
    EXPECT_FALSE(tx.send(i).has_value());
    const std::optional<int> got = co_await rx;  // ready: spends budget here
    EXPECT_EQ(got, i);
    EXPECT_EQ(volt::detail::this_thread_context(), context_out_of_line());
    const pid_t before = current_thread_id();
    std::atomic<bool> resumed{false};
    volt::JoinHandle<void> holder = volt::spawn(hold_the_worker(&resumed));
    co_await volt::yield_now();
    resumed.store(true);
    EXPECT_EQ(volt::detail::this_thread_context(), context_out_of_line());
    EXPECT_TRUE(volt::detail::coop_try_consume());  // a fresh poll has budget
    if (current_thread_id() != before) ++moves;
    // Woken by the holder's end, on the worker it held (usually: back).
    co_await holder;
  }
  co_return moves;
}

// The budget is read through a thread-local. Inlined into a coroutine body,
// a thread-local's address may be computed once and reused after the
// coroutine resumed on another thread (clang 14 at -O2 did it with
// pthread_self(), which glibc declares pure): spending budget would then
// write another worker's context. this_thread_context() re-reads the thread
// pointer. (A plain `&tls_context` passed this test with g++ 12 and clang 14
// too: it guards the property, and catches a compiler that does cache.)
TEST(CoopBudget, IsSpentOnTheThreadATaskResumedOn) {
  volt::Runtime rt = volt::Runtime::Builder().worker_threads(2).build();
  const int moves = rt.block_on([]() -> volt::Task<int> {
    co_return co_await volt::spawn(hop_between_workers(50));  // on a worker
  }());
  // Otherwise the test checked nothing (each round moves unless the other
  // worker took a whole second to wake, or the LIFO slot was capped).
  EXPECT_GT(moves, 25);
}

INSTANTIATE_TEST_SUITE_P(Flavours, CoopBudgetTest, ::testing::Values(false, true),
                         [](const auto& info) {
                           return info.param ? "CurrentThread" : "OneWorker";
                         });

}  // namespace
