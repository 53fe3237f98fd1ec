// Tests of volt::Expected<T> (include/volt/expected.hpp): the accessors and
// the members taken from C++23's std::expected (value_or, error_or, and_then,
// transform, or_else, transform_error), each on its value and error paths,
// with the value category f receives, for a copyable, a move-only, a
// reference and a void T; flatten() and volt::flatten, including on what
// `timeout(d, sem.acquire())` returns on a runtime (timed out, acquired,
// closed).
#include "volt/expected.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#include "test_support.hpp"
#include "volt/error.hpp"
#include "volt/runtime/runtime.hpp"
#include "volt/sync/semaphore.hpp"
#include "volt/task/task.hpp"
#include "volt/time/timeout.hpp"

namespace volt {
namespace {

using namespace std::chrono_literals;
using test::RuntimeKind;

using Ptr = std::unique_ptr<int>;

// Which overload of a callable the monadic members picked: tells the value
// category and constness f received.
enum class Cat { kLvalue, kConstLvalue, kRvalue, kConstRvalue };
struct Probe {
  Cat operator()(int&) const { return Cat::kLvalue; }
  Cat operator()(const int&) const { return Cat::kConstLvalue; }
  Cat operator()(int&&) const { return Cat::kRvalue; }
  Cat operator()(const int&&) const { return Cat::kConstRvalue; }
};
struct ProbeExpected {
  template <class V>
  Expected<Cat> operator()(V&& v) const {
    return Probe{}(std::forward<V>(v));
  }
};

std::error_code code(errc e) {
  return make_error_code(e);
}

// ---- accessors ----

TEST(Expected, AccessorsOnValueAndError) {
  Expected<int> v = 7;
  ASSERT_TRUE(v.has_value());
  EXPECT_TRUE(static_cast<bool>(v));
  EXPECT_EQ(v.value(), 7);
  EXPECT_EQ(*v, 7);
  EXPECT_EQ(v.error(), std::error_code());
  const Expected<int>& cv = v;
  EXPECT_EQ(cv.value(), 7);
  EXPECT_EQ(*cv, 7);
  static_assert(std::is_same_v<decltype(cv.value()), const int&>);
  static_assert(std::is_same_v<decltype(*cv), const int&>);

  Expected<int> e = errc::timed_out;
  EXPECT_FALSE(e.has_value());
  EXPECT_EQ(e.error(), code(errc::timed_out));
  try {
    (void)e.value();
    ADD_FAILURE() << "value() of an error must throw";
  } catch (const std::system_error& ex) {
    EXPECT_EQ(ex.code(), code(errc::timed_out));
  }
  const Expected<int>& ce = e;
  EXPECT_THROW((void)ce.value(), std::system_error);

  Expected<std::string> s = std::string("abc");
  const Expected<std::string>& cs = s;
  EXPECT_EQ(cs->size(), 3u);
  static_assert(std::is_same_v<decltype(cs.operator->()), const std::string*>);
}

TEST(Expected, InPlaceConstructsTheValueEvenFromAnErrorCode) {
  Expected<std::string> s(std::in_place, 3u, 'x');
  EXPECT_EQ(*s, "xxx");
  // The outer Expected holds a value: an inner Expected holding the error.
  Expected<Expected<int>> nested(std::in_place, errc::closed);
  ASSERT_TRUE(nested.has_value());
  EXPECT_EQ(nested->error(), code(errc::closed));
  // Without in_place the code is the outer error.
  Expected<Expected<int>> outer = errc::closed;
  EXPECT_FALSE(outer.has_value());
  Expected<void> ok(std::in_place);
  EXPECT_TRUE(ok);
}

// ---- value_or / error_or ----

TEST(Expected, ValueOr) {
  Expected<int> v = 7;
  Expected<int> e = errc::timed_out;
  EXPECT_EQ(v.value_or(0), 7);
  EXPECT_EQ(e.value_or(0), 0);
  EXPECT_EQ(std::as_const(e).value_or(3L), 3);
  EXPECT_EQ(Expected<int>(errc::closed).value_or(5), 5);

  Expected<std::string> s = std::string("value");
  EXPECT_EQ(s.value_or("fallback"), "value");
  EXPECT_EQ(Expected<std::string>(errc::closed).value_or("fallback"), "fallback");
}

TEST(Expected, ValueOrMoveOnlyFromAnRvalue) {
  Expected<Ptr> v = std::make_unique<int>(4);
  Ptr p = std::move(v).value_or(nullptr);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, 4);
  Ptr q = Expected<Ptr>(errc::closed).value_or(std::make_unique<int>(9));
  ASSERT_TRUE(q);
  EXPECT_EQ(*q, 9);
}

TEST(Expected, ValueOrOfAReference) {
  int x = 1;
  int fallback = 2;
  Expected<int&> v = x;
  Expected<int&> e = errc::closed;
  int& a = v.value_or(fallback);
  int& b = e.value_or(fallback);
  EXPECT_EQ(&a, &x);
  EXPECT_EQ(&b, &fallback);
}

TEST(Expected, ErrorOr) {
  Expected<int> v = 7;
  Expected<int> e = errc::timed_out;
  EXPECT_EQ(v.error_or(errc::closed), code(errc::closed));
  EXPECT_EQ(v.error_or(std::error_code()), std::error_code());
  EXPECT_EQ(e.error_or(errc::closed), code(errc::timed_out));
  EXPECT_EQ(Expected<void>().error_or(errc::closed), code(errc::closed));
  EXPECT_EQ(Expected<void>(errc::empty).error_or(errc::closed), code(errc::empty));
}

// ---- and_then ----

TEST(Expected, AndThenPassesTheValueWithItsCategory) {
  Expected<int> v = 7;
  const Expected<int> cv = 7;
  EXPECT_EQ(*v.and_then(ProbeExpected{}), Cat::kLvalue);
  EXPECT_EQ(*cv.and_then(ProbeExpected{}), Cat::kConstLvalue);
  EXPECT_EQ(*std::move(v).and_then(ProbeExpected{}), Cat::kRvalue);
  EXPECT_EQ(*std::move(cv).and_then(ProbeExpected{}), Cat::kConstRvalue);
}

TEST(Expected, AndThenChangesTheType) {
  auto half = [](int x) -> Expected<std::string> {
    if (x % 2 != 0) return errc::invalid_argument;
    return std::to_string(x / 2);
  };
  Expected<std::string> a = Expected<int>(8).and_then(half);
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, "4");
  Expected<std::string> b = Expected<int>(7).and_then(half);
  EXPECT_EQ(b.error(), code(errc::invalid_argument));
  // Chained: the first error stops the chain.
  auto twice = [](const std::string& s) -> Expected<std::size_t> { return s.size() * 2; };
  EXPECT_EQ(*Expected<int>(200).and_then(half).and_then(twice), 6u);
  EXPECT_EQ(Expected<int>(7).and_then(half).and_then(twice).error(), code(errc::invalid_argument));
}

TEST(Expected, AndThenOnAnErrorDoesNotCallF) {
  int calls = 0;
  Expected<int> e = errc::timed_out;
  Expected<void> r = e.and_then([&](int) -> Expected<void> {
    ++calls;
    return {};
  });
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(r.error(), code(errc::timed_out));
}

TEST(Expected, AndThenMovesAMoveOnlyValue) {
  Expected<Ptr> v = std::make_unique<int>(3);
  Expected<int> r = std::move(v).and_then([](Ptr p) -> Expected<int> { return *p + 1; });
  EXPECT_EQ(*r, 4);
  EXPECT_FALSE(*v) << "moved into f";
  // An lvalue passes by reference: nothing moves.
  Expected<Ptr> w = std::make_unique<int>(5);
  Expected<int> s = w.and_then([](Ptr& p) -> Expected<int> { return *p; });
  EXPECT_EQ(*s, 5);
  EXPECT_TRUE(*w);
}

TEST(Expected, AndThenOfVoid) {
  int calls = 0;
  auto next = [&]() -> Expected<int> {
    ++calls;
    return 42;
  };
  EXPECT_EQ(*Expected<void>().and_then(next), 42);
  EXPECT_EQ(Expected<void>(errc::closed).and_then(next).error(), code(errc::closed));
  EXPECT_EQ(calls, 1);
}

// ---- transform ----

TEST(Expected, TransformMapsTheValue) {
  Expected<int> v = 21;
  Expected<std::string> s = v.transform([](int x) { return std::to_string(x * 2); });
  auto halve = [](int x) { return x * 0.5; };
  static_assert(std::is_same_v<decltype(v.transform(halve)), Expected<double>>);
  EXPECT_EQ(*s, "42");
  EXPECT_EQ(Expected<int>(errc::timed_out).transform([](int x) { return x; }).error(),
            code(errc::timed_out));
  const Expected<int> cv = 1;
  EXPECT_EQ(*v.transform(Probe{}), Cat::kLvalue);
  EXPECT_EQ(*cv.transform(Probe{}), Cat::kConstLvalue);
  EXPECT_EQ(*std::move(v).transform(Probe{}), Cat::kRvalue);
  EXPECT_EQ(*std::move(cv).transform(Probe{}), Cat::kConstRvalue);
}

TEST(Expected, TransformToVoidGivesExpectedVoid) {
  int seen = 0;
  Expected<int> v = 5;
  auto r = v.transform([&](int x) { seen = x; });
  static_assert(std::is_same_v<decltype(r), Expected<void>>);
  EXPECT_TRUE(r);
  EXPECT_EQ(seen, 5);
  Expected<void> e = Expected<int>(errc::closed).transform([&](int) { seen = -1; });
  EXPECT_EQ(e.error(), code(errc::closed));
  EXPECT_EQ(seen, 5);
}

TEST(Expected, TransformMoveOnly) {
  Expected<Ptr> v = std::make_unique<int>(6);
  Expected<Ptr> doubled = std::move(v).transform([](Ptr p) {
    *p *= 2;
    return p;
  });
  EXPECT_EQ(**doubled, 12);
  Expected<int> read = doubled.transform([](const Ptr& p) { return *p; });
  EXPECT_EQ(*read, 12);
  EXPECT_TRUE(*doubled);
}

TEST(Expected, TransformKeepsLvalueReferencesAndDecaysRvalueOnes) {
  struct Pair {
    int a = 1;
    int b = 2;
  };
  Pair pair;
  Expected<Pair&> ref = pair;
  auto field = ref.transform([](Pair& p) -> int& { return p.b; });
  static_assert(std::is_same_v<decltype(field), Expected<int&>>);
  EXPECT_EQ(&*field, &pair.b);
  Expected<Ptr> v = std::make_unique<int>(1);
  auto moved = std::move(v).transform([](Ptr&& p) -> Ptr&& { return std::move(p); });
  static_assert(std::is_same_v<decltype(moved), Expected<Ptr>>);
  EXPECT_EQ(**moved, 1);
}

TEST(Expected, TransformOfVoid) {
  EXPECT_EQ(*Expected<void>().transform([] { return 3; }), 3);
  EXPECT_EQ(Expected<void>(errc::empty).transform([] { return 3; }).error(), code(errc::empty));
  auto r = Expected<void>().transform([] {});
  static_assert(std::is_same_v<decltype(r), Expected<void>>);
  EXPECT_TRUE(r);
}

// ---- or_else ----

TEST(Expected, OrElseRecoversFromAnError) {
  std::error_code seen;
  auto recover = [&](std::error_code ec) -> Expected<int> {
    seen = ec;
    if (ec == errc::timed_out) return 0;
    return ec;
  };
  Expected<int> e = errc::timed_out;
  EXPECT_EQ(*e.or_else(recover), 0);
  EXPECT_EQ(seen, code(errc::timed_out));
  EXPECT_EQ(Expected<int>(errc::closed).or_else(recover).error(), code(errc::closed));
  seen = {};
  Expected<int> v = 7;
  EXPECT_EQ(*v.or_else(recover), 7);
  EXPECT_EQ(*std::as_const(v).or_else(recover), 7);
  EXPECT_EQ(seen, std::error_code()) << "not called with a value";
}

TEST(Expected, OrElseMoveOnly) {
  Expected<Ptr> v = std::make_unique<int>(1);
  Expected<Ptr> kept =
      std::move(v).or_else([](std::error_code) -> Expected<Ptr> { return nullptr; });
  EXPECT_EQ(**kept, 1);
  Expected<Ptr> made = Expected<Ptr>(errc::closed).or_else([](std::error_code) -> Expected<Ptr> {
    return std::make_unique<int>(2);
  });
  EXPECT_EQ(**made, 2);
}

TEST(Expected, OrElseOfAReferenceAndOfVoid) {
  int x = 1;
  int y = 2;
  Expected<int&> v = x;
  Expected<int&> e = errc::closed;
  auto other = [&](std::error_code) -> Expected<int&> { return y; };
  EXPECT_EQ(&*v.or_else(other), &x);
  EXPECT_EQ(&*e.or_else(other), &y);

  int calls = 0;
  auto retry = [&](std::error_code ec) -> Expected<void> {
    ++calls;
    return ec == errc::empty ? Expected<void>() : Expected<void>(ec);
  };
  EXPECT_TRUE(Expected<void>(errc::empty).or_else(retry));
  EXPECT_EQ(Expected<void>(errc::closed).or_else(retry).error(), code(errc::closed));
  EXPECT_TRUE(Expected<void>().or_else(retry));
  EXPECT_EQ(calls, 2);
}

// ---- transform_error ----

TEST(Expected, TransformErrorMapsTheCode) {
  auto to_std = [](std::error_code ec) -> std::error_code {
    if (ec == errc::timed_out) return std::make_error_code(std::errc::timed_out);
    return ec;
  };
  Expected<int> e = errc::timed_out;
  EXPECT_EQ(e.transform_error(to_std).error(), std::make_error_code(std::errc::timed_out));
  Expected<int> v = 3;
  EXPECT_EQ(*v.transform_error(to_std), 3);
  // f may return an errc.
  EXPECT_EQ(Expected<std::string>(errc::empty)
                .transform_error([](std::error_code) { return errc::closed; })
                .error(),
            code(errc::closed));
  Expected<Ptr> p = std::make_unique<int>(8);
  EXPECT_EQ(**std::move(p).transform_error(to_std), 8);
  EXPECT_EQ(Expected<void>(errc::timed_out).transform_error(to_std).error(),
            std::make_error_code(std::errc::timed_out));
  EXPECT_TRUE(Expected<void>().transform_error(to_std));
}

// ---- flatten ----

TEST(Expected, FlattenTakesTheOuterErrorFirst) {
  Expected<Expected<int>> outer_error = errc::timed_out;
  EXPECT_EQ(outer_error.flatten().error(), code(errc::timed_out));
  Expected<Expected<int>> inner_error(std::in_place, errc::closed);
  EXPECT_EQ(inner_error.flatten().error(), code(errc::closed));
  Expected<Expected<int>> value = Expected<int>(5);
  EXPECT_EQ(*value.flatten(), 5);
  EXPECT_EQ(*flatten(value), 5);
  static_assert(std::is_same_v<decltype(flatten(value)), Expected<int>>);
  // One level only.
  Expected<Expected<Expected<int>>> deep = Expected<Expected<int>>(Expected<int>(1));
  static_assert(std::is_same_v<decltype(deep.flatten()), Expected<Expected<int>>>);
  EXPECT_EQ(*deep.flatten().flatten(), 1);
}

TEST(Expected, FlattenVoidAndMoveOnly) {
  Expected<Expected<void>> ok = Expected<void>();
  EXPECT_TRUE(flatten(ok));
  Expected<Expected<void>> inner(std::in_place, errc::closed);
  EXPECT_EQ(inner.flatten().error(), code(errc::closed));

  Expected<Expected<Ptr>> p = Expected<Ptr>(std::make_unique<int>(2));
  Expected<Ptr> flat = std::move(p).flatten();
  EXPECT_EQ(**flat, 2);
  Expected<Expected<Ptr>> q = Expected<Ptr>(std::make_unique<int>(3));
  EXPECT_EQ(**flatten(std::move(q)), 3);
}

// ---- flatten of a real timeout(d, sem.acquire()) ----

class ExpectedOnRuntime : public ::testing::TestWithParam<RuntimeKind> {
 protected:
  Runtime rt_ = test::build_runtime(GetParam());
};

INSTANTIATE_TEST_SUITE_P(Runtimes, ExpectedOnRuntime,
                         ::testing::Values(RuntimeKind::kMultiThread, RuntimeKind::kCurrentThread),
                         [](const auto& info) { return test::runtime_kind_name(info.param); });

Task<Expected<SemaphorePermit>> acquire_within(Semaphore* sem, std::chrono::milliseconds limit) {
  Expected<Expected<SemaphorePermit>> nested = co_await volt::timeout(limit, sem->acquire());
  co_return std::move(nested).flatten();
}

TEST_P(ExpectedOnRuntime, FlattenOfATimedOutAcquire) {
  Semaphore sem(0);
  Expected<SemaphorePermit> p = rt_.block_on(acquire_within(&sem, 5ms));
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error(), code(errc::timed_out));
  EXPECT_EQ(sem.available_permits(), 0u);
}

TEST_P(ExpectedOnRuntime, FlattenOfAnAcquiredPermit) {
  Semaphore sem(1);
  Expected<SemaphorePermit> p = rt_.block_on(acquire_within(&sem, 10s));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->permits(), 1u);
  EXPECT_EQ(sem.available_permits(), 0u);
  p = errc::closed;  // the permit goes back
  EXPECT_EQ(sem.available_permits(), 1u);
}

TEST_P(ExpectedOnRuntime, FlattenOfAClosedSemaphoreGivesTheInnerError) {
  Semaphore sem(0);
  sem.close();
  Expected<SemaphorePermit> p = rt_.block_on(acquire_within(&sem, 10s));
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error(), code(errc::closed));
}

TEST_P(ExpectedOnRuntime, MonadicChainOnATimeout) {
  Semaphore sem(2);
  auto permits = [](const SemaphorePermit& permit) { return permit.permits(); };
  std::uint64_t n = rt_.block_on(acquire_within(&sem, 10s)).transform(permits).value_or(0);
  EXPECT_EQ(n, 1u);
  Semaphore none(0);
  std::uint64_t m = rt_.block_on(acquire_within(&none, 1ms)).transform(permits).value_or(0);
  EXPECT_EQ(m, 0u);
}

}  // namespace
}  // namespace volt
