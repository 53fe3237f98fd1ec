// The cooperative budget (128 per poll): a task whose awaits keep completing
// at once is still made to yield, so it cannot starve the tasks queued
// behind it (the cooperative budget, docs/design.md).
#include <gtest/gtest.h>

#include <atomic>
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

INSTANTIATE_TEST_SUITE_P(Flavours, CoopBudgetTest, ::testing::Values(false, true),
                         [](const auto& info) {
                           return info.param ? "CurrentThread" : "OneWorker";
                         });

}  // namespace
