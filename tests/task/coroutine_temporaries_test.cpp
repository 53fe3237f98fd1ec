// tests/task/coroutine_temporaries_test.cpp: the forms README's "Compiler
// issues (GCC 12)" recommends, so that no volt change makes them unsafe.
//
// g++ 12.2 miscompiles four shapes of coroutine code (README): a temporary
// built in place (a lambda's captures, a braced aggregate, the operands of
// `?:`) in a full-expression with a co_await is destroyed twice; a braced
// list that makes a std::initializer_list there does not compile; a
// coroutine without local variables that awaits in a condition never runs
// its body. The tests below run the safe forms, with values whose second
// destruction shows (Tracked counts it, and a long std::string is a double
// free under ASan). The hazardous forms themselves are correct C++: they
// run last, compiled only by clang.
#include <gtest/gtest.h>

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "test_support.hpp"
#include "volt/runtime/runtime.hpp"
#include "volt/task/join_handle.hpp"
#include "volt/task/spawn_blocking.hpp"
#include "volt/task/task.hpp"
#include "volt/task/yield_now.hpp"

namespace volt {
namespace {

using test::LifeCounters;
using test::RuntimeKind;
using test::Tracked;

class CoroutineTemporariesTest : public ::testing::TestWithParam<RuntimeKind> {
 protected:
  LifeCounters counters_;  // outlives the runtime
  Runtime rt_ = test::build_runtime(GetParam());
  void TearDown() override {
    EXPECT_EQ(counters_.live(), 0);
    EXPECT_EQ(counters_.double_destroyed.load(), 0);
  }
};

INSTANTIATE_TEST_SUITE_P(Runtimes, CoroutineTemporariesTest,
                         ::testing::Values(RuntimeKind::kMultiThread, RuntimeKind::kCurrentThread),
                         [](const auto& info) { return test::runtime_kind_name(info.param); });

// Longer than std::string's small buffer: destroying a copy twice is a
// double free.
std::string long_text() {
  return std::string(64, 'x');
}

std::size_t length_of(const std::string& s) {
  return s.size();
}

Task<std::size_t> length_later(std::string s) {
  co_await yield_now();
  co_return s.size();
}

template <class F>
Task<std::size_t> call_later(F f) {
  co_await yield_now();
  co_return f();
}

// ---- a lambda with captures: named before the co_await ----

Task<std::size_t> blocking_handle_named(LifeCounters* counters) {
  std::string text = long_text();
  auto shared = std::make_shared<int>(1);
  JoinHandle<std::size_t> handle = spawn_blocking([text, shared, tracked = Tracked(*counters, 2)] {
    return text.size() + static_cast<std::size_t>(*shared + tracked.value());
  });
  std::size_t n = co_await handle;
  // The function and its captures are gone once the handle reports.
  EXPECT_EQ(shared.use_count(), 1);
  co_return n;
}

TEST_P(CoroutineTemporariesTest, SpawnBlockingWithTheHandleNamedFirst) {
  EXPECT_EQ(rt_.block_on(blocking_handle_named(&counters_)), 67u);
}

Task<std::size_t> blocking_lambda_named(LifeCounters* counters) {
  std::string text = long_text();
  auto shared = std::make_shared<int>(1);
  auto fn = [text, shared, tracked = Tracked(*counters, 2)] {
    return text.size() + static_cast<std::size_t>(*shared + tracked.value());
  };
  std::size_t n = co_await spawn_blocking(std::move(fn));
  EXPECT_EQ(shared.use_count(), 1);
  co_return n;
}

TEST_P(CoroutineTemporariesTest, SpawnBlockingWithTheLambdaNamedFirst) {
  EXPECT_EQ(rt_.block_on(blocking_lambda_named(&counters_)), 67u);
}

// ---- spawn_blocking(fn, args...): the values as arguments, no capture ----

Task<std::size_t> blocking_arguments(LifeCounters* counters) {
  std::string text = long_text();
  auto shared = std::make_shared<int>(1);
  Tracked tracked(*counters, 2);
  // One expression, no closure built in this frame: safe under g++ 12.
  std::size_t n = co_await spawn_blocking(
      [](const std::string& s, std::shared_ptr<int> p, const Tracked& t, std::unique_ptr<int> u) {
        return s.size() + static_cast<std::size_t>(*p + t.value() + *u);
      },
      text, shared, tracked, std::make_unique<int>(3));
  EXPECT_EQ(shared.use_count(), 1);
  EXPECT_EQ(text, long_text());  // copied, not moved from
  n += co_await spawn_blocking(length_of, long_text());
  co_return n;
}

TEST_P(CoroutineTemporariesTest, SpawnBlockingTakesTheValuesAsArguments) {
  EXPECT_EQ(rt_.block_on(blocking_arguments(&counters_)), 70u + 64u);
}

struct Counter {
  std::size_t base;
  std::size_t add(std::string s) const { return base + s.size(); }
};

Task<std::size_t> blocking_argument_kinds() {
  Counter counter{100};
  std::size_t n = co_await spawn_blocking(&Counter::add, &counter, long_text());  // member
  std::size_t out = 0;
  co_await spawn_blocking([](std::size_t& o, std::string s) { o = s.size(); }, std::ref(out),
                          long_text());  // a reference, void result
  co_return n + out;
}

TEST_P(CoroutineTemporariesTest, SpawnBlockingArgumentsInvokeAsStdInvoke) {
  EXPECT_EQ(rt_.block_on(blocking_argument_kinds()), 164u + 64u);
}

Task<std::size_t> handle_blocking_arguments() {
  std::string text = long_text();
  co_return co_await Handle::current().spawn_blocking(length_of, text);
}

TEST_P(CoroutineTemporariesTest, HandleAndRuntimeSpawnBlockingTakeArgumentsToo) {
  EXPECT_EQ(rt_.block_on(handle_blocking_arguments()), 64u);
  auto shared = std::make_shared<int>(5);
  JoinHandle<int> h =
      rt_.spawn_blocking([](std::shared_ptr<int> p, int k) { return *p + k; }, shared, 2);
  EXPECT_EQ(h.join(), 7);
  EXPECT_EQ(shared.use_count(), 1);
}

// ---- spawn(f(lambda)): the lambda named first ----

Task<std::size_t> spawn_lambda_named(LifeCounters* counters) {
  auto shared = std::make_shared<std::string>(long_text());
  auto fn = [shared, tracked = Tracked(*counters, 1)] {
    return shared->size() + static_cast<std::size_t>(tracked.value());
  };
  std::size_t n = co_await spawn(call_later(std::move(fn)));
  EXPECT_EQ(shared.use_count(), 1);
  co_return n;
}

TEST_P(CoroutineTemporariesTest, SpawnOfATaskTakingANamedLambda) {
  EXPECT_EQ(rt_.block_on(spawn_lambda_named(&counters_)), 65u);
}

// ---- `?:` choosing a Task (or any class value): chosen before the co_await ----

Task<int> one() {
  co_return 1;
}
Task<int> two() {
  co_await yield_now();
  co_return 2;
}

Task<int> conditional_task_named(bool first) {
  Task<int> chosen = first ? one() : two();
  int n = co_await std::move(chosen);
  if (first) {
    n += 10 * co_await one();
  } else {
    n += 10 * co_await two();
  }
  co_return n;
}

TEST_P(CoroutineTemporariesTest, ConditionalTaskChosenBeforeTheAwait) {
  EXPECT_EQ(rt_.block_on(conditional_task_named(true)), 11);
  EXPECT_EQ(rt_.block_on(conditional_task_named(false)), 22);
}

// ---- braced lists and aggregates: named before the co_await ----

Task<std::size_t> total_length(std::vector<std::string> parts) {
  co_await yield_now();
  std::size_t n = 0;
  for (const std::string& s : parts)
    n += s.size();
  co_return n;
}

struct Labelled {  // an aggregate with a member that owns memory
  std::string label;
  int weight;
};

Task<std::size_t> weigh(Labelled item) {
  co_await yield_now();
  co_return item.label.size() + static_cast<std::size_t>(item.weight);
}

Task<std::size_t> lists_and_aggregates_named() {
  std::vector<std::string> parts{long_text(), long_text()};
  std::size_t n = co_await total_length(std::move(parts));
  Labelled item{long_text(), 1};
  n += co_await weigh(std::move(item));
  // Awaited first, then listed (not `std::vector<...> v{co_await ..., ...}`).
  std::size_t a = co_await length_later(long_text());
  std::size_t b = co_await length_later(long_text());
  std::vector<std::size_t> lengths{a, b};
  n += lengths[0] + lengths[1];
  co_return n;
}

TEST_P(CoroutineTemporariesTest, BracedListsAndAggregatesNamedBeforeTheAwait) {
  EXPECT_EQ(rt_.block_on(lists_and_aggregates_named()), 128u + 65u + 128u);
}

// ---- a co_await in a condition: the value bound to a variable first ----

Task<bool> later(bool v) {
  co_await yield_now();
  co_return v;
}

int body_runs = 0;  // written only by the task that block_on runs

// Its only local is the awaited value (without it, g++ 12 skips the body).
Task<int> branch_on_awaited(bool v) {
  bool got = co_await later(v);
  ++body_runs;
  if (got) co_return 1;
  co_return 2;
}

TEST_P(CoroutineTemporariesTest, ConditionOnAValueBoundFirst) {
  body_runs = 0;
  EXPECT_EQ(rt_.block_on(branch_on_awaited(true)), 1);
  EXPECT_EQ(rt_.block_on(branch_on_awaited(false)), 2);
  EXPECT_EQ(body_runs, 2);
}

// ---- the hazardous forms: correct C++, miscompiled by g++ 12 ----

#if defined(__clang__)
// (clang 14 with -fsanitize=undefined cannot assemble this file, nor any
// coroutine template instantiated with a function pointer such as
// spawn_blocking(length_of, ...): "Cannot represent a difference across
// sections"; -fno-sanitize=function avoids it. CI's sanitizer builds use g++.)
Task<std::size_t> lambda_in_the_await(LifeCounters* counters) {
  std::string text = long_text();
  std::size_t n = co_await spawn_blocking([text, tracked = Tracked(*counters, 1)] {
    return text.size() + static_cast<std::size_t>(tracked.value());
  });
  n += co_await spawn(call_later([text] { return text.size(); }));
  co_return n;
}

Task<std::size_t> conditional_in_the_await(bool first) {
  std::string text = long_text();
  co_return co_await (first ? length_later(text) : length_later(text + "!"));
}

Task<std::size_t> braces_in_the_await() {
  std::string text = long_text();
  std::size_t n = co_await total_length({text, text});
  n += co_await weigh(Labelled{text, 1});
  co_return n;
}

Task<std::size_t> awaits_in_a_braced_list() {
  std::vector<std::size_t> lengths{co_await length_later(long_text()),
                                   co_await length_later(long_text())};
  co_return lengths[0] + lengths[1];
}

Task<int> awaits_in_conditions_without_locals(bool v) {
  if (co_await later(v)) co_return 1;
  while (!co_await later(true)) {
  }
  co_return 2;
}

TEST_P(CoroutineTemporariesTest, HazardousFormsAreCorrectUnderClang) {
  EXPECT_EQ(rt_.block_on(lambda_in_the_await(&counters_)), 65u + 64u);
  EXPECT_EQ(rt_.block_on(conditional_in_the_await(true)), 64u);
  EXPECT_EQ(rt_.block_on(conditional_in_the_await(false)), 65u);
  EXPECT_EQ(rt_.block_on(braces_in_the_await()), 128u + 65u);
  EXPECT_EQ(rt_.block_on(awaits_in_a_braced_list()), 128u);
  EXPECT_EQ(rt_.block_on(awaits_in_conditions_without_locals(true)), 1);
  EXPECT_EQ(rt_.block_on(awaits_in_conditions_without_locals(false)), 2);
}
#endif

}  // namespace
}  // namespace volt
