// Tests of volt::OnceCell (include/volt/sync/once_cell.hpp): get/set without
// waiting, get_or_init with many concurrent callers running the initialiser
// exactly once, the turn passing on after an initialiser throws or is
// cancelled, get_or_try_init, values that are move-only or not
// default-constructible, the value's lifetime, and waiting without heap
// allocation.
#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/runtime_support.hpp"
#include "volt/sync/once_cell.hpp"
#include "volt/time/sleep.hpp"
#include "volt/time/timeout.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

class OnceCellTest : public ::testing::TestWithParam<Flavour> {};
INSTANTIATE_TEST_SUITE_P(Flavours, OnceCellTest,
                         ::testing::Values(kMultiThread2, kMultiThread4, kCurrentThread),
                         FlavourName());

// Move-only and without a default constructor.
struct Token {
  explicit Token(int v) : p(std::make_unique<int>(v)) {}
  std::unique_ptr<int> p;
};

// ---- never-waiting API ----

TEST(OnceCellBasics, EmptyCellHasNoValue) {
  OnceCell<int> cell;
  EXPECT_FALSE(cell.initialized());
  EXPECT_EQ(cell.get(), nullptr);
  EXPECT_EQ(cell.get_mut(), nullptr);
  EXPECT_FALSE(cell.take().has_value());
}

TEST(OnceCellBasics, SetThenGet) {
  OnceCell<int> cell;
  auto r = cell.set(42);
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(cell.initialized());
  ASSERT_NE(cell.get(), nullptr);
  EXPECT_EQ(*cell.get(), 42);
  *cell.get_mut() = 43;
  EXPECT_EQ(*cell.get(), 43);
  EXPECT_THROW((void)r.rejected(), std::bad_optional_access);
}

TEST(OnceCellBasics, SecondSetFailsAndHandsTheValueBack) {
  OnceCell<Token> cell;
  ASSERT_TRUE(cell.set(Token(1)));
  Token second(2);
  int* const second_address = second.p.get();
  auto r = cell.set(std::move(second));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.is_already_initialized());
  EXPECT_EQ(r.error(), OnceCellSetError::kAlreadyInitialized);
  Token back = std::move(r).rejected();
  EXPECT_EQ(back.p.get(), second_address) << "the very value passed in comes back";
  EXPECT_EQ(*cell.get()->p, 1) << "the first value is untouched";
}

TEST(OnceCellBasics, ConstructedFromAValueIsInitialised) {
  OnceCell<Token> cell(Token(5));
  ASSERT_NE(cell.get(), nullptr);
  EXPECT_EQ(*cell.get()->p, 5);
  auto r = cell.set(Token(6));
  EXPECT_TRUE(r.is_already_initialized());
  OnceCell<Token> in_place(std::in_place, 7);
  EXPECT_EQ(*in_place.get()->p, 7);
}

TEST(OnceCellBasics, TakeEmptiesTheCellForANewValue) {
  OnceCell<Token> cell(Token(1));
  std::optional<Token> taken = cell.take();
  ASSERT_TRUE(taken);
  EXPECT_EQ(*taken->p, 1);
  EXPECT_FALSE(cell.initialized());
  EXPECT_EQ(cell.get(), nullptr);
  // The cell is usable again, with a fresh initialisation permit.
  ASSERT_TRUE(cell.set(Token(2)));
  EXPECT_EQ(*cell.get()->p, 2);
  Runtime rt = Runtime::Builder::current_thread().build();
  (void)cell.take();
  const int v = rt.block_on([](OnceCell<Token>* c) -> Task<int> {
    const Token& t = co_await c->get_or_init([]() -> Task<Token> { co_return Token(3); });
    co_return *t.p;
  }(&cell));
  EXPECT_EQ(v, 3);
}

TEST(OnceCellBasics, ValueIsDestroyedExactlyOnce) {
  LifeCounters counters;
  { OnceCell<Tracked> empty; }
  EXPECT_EQ(counters.constructed.load(), 0);
  {
    OnceCell<Tracked> cell;
    ASSERT_TRUE(cell.set(Tracked(counters, 1)));
    {
      auto refused = cell.set(Tracked(counters, 2));
      ASSERT_FALSE(refused);
      EXPECT_EQ(refused.rejected().value(), 2);
    }  // the refused value dies with its result
    EXPECT_EQ(counters.live(), 1);
  }
  EXPECT_EQ(counters.live(), 0);
  {
    OnceCell<Tracked> cell(Tracked(counters, 3));
    std::optional<Tracked> taken = cell.take();
    EXPECT_EQ(counters.live(), 1);  // only the taken copy
  }
  {
    Runtime rt = Runtime::Builder().worker_threads(2).build();
    OnceCell<Tracked> cell;
    const int v = rt.block_on([](OnceCell<Tracked>* c, LifeCounters* lc) -> Task<int> {
      const Tracked& t =
          co_await c->get_or_init([lc]() -> Task<Tracked> { co_return Tracked(*lc, 4); });
      co_return t.value();
    }(&cell, &counters));
    EXPECT_EQ(v, 4);
    EXPECT_EQ(counters.live(), 1);
  }
  EXPECT_EQ(counters.live(), 0);
  EXPECT_EQ(counters.double_destroyed.load(), 0);
}

// ---- get_or_init ----

Task<int> counted_init(std::atomic<int>* runs, int value, int yields) {
  runs->fetch_add(1);
  for (int i = 0; i < yields; ++i)
    co_await volt::yield_now();  // others arrive and wait meanwhile
  co_return value;
}

Task<const int*> init_or_get(OnceCell<int>* cell, std::atomic<int>* runs, int value) {
  const int& v = co_await cell->get_or_init([=] { return counted_init(runs, value, 3); });
  co_return &v;
}

// One round: 64 callers on a fresh cell; returns how many initialisers ran
// and checks that every caller saw the cell's one value.
Task<int> concurrent_round(OnceCell<int>* cell, int callers) {
  std::atomic<int> runs{0};
  std::vector<JoinHandle<const int*>> hs;
  hs.reserve(callers);
  for (int i = 0; i < callers; ++i)
    hs.push_back(volt::spawn(init_or_get(cell, &runs, 1000 + i)));
  std::vector<const int*> seen;
  for (auto& h : hs)
    seen.push_back(co_await h);
  const int* value = cell->get();
  EXPECT_NE(value, nullptr);
  if (value) {
    EXPECT_GE(*value, 1000);
    EXPECT_LT(*value, 1000 + callers);
  }
  for (const int* p : seen)
    EXPECT_EQ(p, value) << "every caller returns the cell's one value";
  co_return runs.load();
}

TEST_P(OnceCellTest, ConcurrentCallersRunTheInitialiserExactlyOnce) {
  Runtime rt = make_runtime(GetParam());
  const std::size_t rounds = scale(200);
  for (std::size_t round = 0; round < rounds; ++round) {
    auto cell = std::make_unique<OnceCell<int>>();
    ASSERT_EQ(rt.block_on(concurrent_round(cell.get(), 64)), 1) << "round " << round;
  }
}

TEST_P(OnceCellTest, InitialisedCellReturnsWithoutRunningF) {
  Runtime rt = make_runtime(GetParam());
  OnceCell<int> cell(9);
  std::atomic<int> runs{0};
  const int* p = rt.block_on(init_or_get(&cell, &runs, 1));
  EXPECT_EQ(p, cell.get());
  EXPECT_EQ(*p, 9);
  EXPECT_EQ(runs.load(), 0);
}

// An initialiser that signals it holds the permit, waits to be told to go on,
// then returns `value` or throws.
struct Gate {
  std::atomic<bool> started{false};
  std::atomic<bool> go{false};
};

Task<int> gated_init(Gate* gate, int value, bool fail) {
  gate->started.store(true);
  while (!gate->go.load())
    co_await volt::sleep(1ms);
  if (fail) throw std::runtime_error("initialiser failed");
  co_return value;
}

// 0: returned `expect`; 1: threw; 2: returned something else.
Task<int> call_gated(OnceCell<int>* cell, Gate* gate, int value, bool fail, int expect) {
  try {
    const int& v = co_await cell->get_or_init([=] { return gated_init(gate, value, fail); });
    co_return v == expect ? 0 : 2;
  } catch (const std::runtime_error&) {
    co_return 1;
  }
}

Task<void> wait_started(Gate* gate) {
  while (!gate->started.load())
    co_await volt::sleep(1ms);
}

// The scenarios below run as one driver task (so they work on the
// current-thread runtime too) and check with EXPECT_*.

Task<void> set_while_initialising(OnceCell<int>* cell) {
  Gate gate;
  auto initialiser = volt::spawn(call_gated(cell, &gate, 1, false, 1));
  co_await wait_started(&gate);
  auto r = cell->set(2);
  EXPECT_TRUE(r.is_initializing());
  EXPECT_EQ(r.rejected(), 2);
  EXPECT_EQ(cell->get(), nullptr);
  gate.go.store(true);
  EXPECT_EQ(co_await initialiser, 0);
  EXPECT_TRUE(cell->set(3).is_already_initialized());
}

TEST_P(OnceCellTest, SetWhileAnInitialiserRunsFailsWithInitializing) {
  Runtime rt = make_runtime(GetParam());
  OnceCell<int> cell;
  rt.block_on(set_while_initialising(&cell));
  ASSERT_NE(cell.get(), nullptr);
  EXPECT_EQ(*cell.get(), 1);
}

Task<void> throw_then_take_over(OnceCell<int>* cell) {
  Gate first_gate;
  Gate second_gate;
  second_gate.go.store(true);
  auto first = volt::spawn(call_gated(cell, &first_gate, 1, /*fail=*/true, 1));
  co_await wait_started(&first_gate);
  // Queued behind the failing initialiser.
  auto second = volt::spawn(call_gated(cell, &second_gate, 2, false, 2));
  co_await volt::sleep(10ms);
  EXPECT_FALSE(second_gate.started.load()) << "two initialisers ran at once";
  first_gate.go.store(true);
  EXPECT_EQ(co_await first, 1) << "the exception reaches the caller whose f threw";
  EXPECT_EQ(co_await second, 0) << "the waiting caller ran its own initialiser";
  EXPECT_TRUE(second_gate.started.load());
}

TEST_P(OnceCellTest, ThrowingInitialiserPassesTheTurnToTheNextCaller) {
  Runtime rt = make_runtime(GetParam());
  OnceCell<int> cell;
  rt.block_on(throw_then_take_over(&cell));
  ASSERT_NE(cell.get(), nullptr);
  EXPECT_EQ(*cell.get(), 2);
  // With nobody waiting, a failed initialiser leaves the cell to later callers.
  OnceCell<int> lone;
  Gate fail_gate;
  fail_gate.go.store(true);
  EXPECT_EQ(rt.block_on(call_gated(&lone, &fail_gate, 1, true, 1)), 1);
  EXPECT_EQ(lone.get(), nullptr);
  EXPECT_TRUE(lone.set(4));
}

// An initialiser that never finishes on its own; its frame holds a probe.
Task<int> endless_init(Tracked probe, Gate* gate) {
  gate->started.store(true);
  co_await volt::sleep(std::chrono::hours(1));
  co_return probe.value();
}

Task<bool> init_with_timeout(OnceCell<int>* cell, Gate* gate, LifeCounters* counters) {
  Expected<const int&> r = co_await volt::timeout(
      30ms, cell->get_or_init([=] { return endless_init(Tracked(*counters, 1), gate); }));
  co_return !r && r.error() == code(errc::timed_out);
}

Task<void> cancel_then_take_over(OnceCell<int>* cell, LifeCounters* counters) {
  Gate endless;
  Gate waiter_gate;
  waiter_gate.go.store(true);
  auto cancelled = volt::spawn(init_with_timeout(cell, &endless, counters));
  co_await wait_started(&endless);
  auto waiter = volt::spawn(call_gated(cell, &waiter_gate, 5, false, 5));
  EXPECT_TRUE(co_await cancelled) << "the initialiser's call timed out";
  EXPECT_EQ(co_await waiter, 0) << "the waiter took over and initialised";
}

TEST_P(OnceCellTest, CancelledInitialiserPassesTheTurnOn) {
  Runtime rt = make_runtime(GetParam());
  LifeCounters counters;
  OnceCell<int> cell;
  rt.block_on(cancel_then_take_over(&cell, &counters));
  ASSERT_NE(cell.get(), nullptr);
  EXPECT_EQ(*cell.get(), 5);
  EXPECT_GT(counters.constructed.load(), 0) << "the initialiser's frame held a probe";
  EXPECT_EQ(counters.live(), 0) << "the cancelled initialiser's frame was destroyed";

  // Cancelled with nobody waiting: a later caller initialises.
  OnceCell<int> lone;
  Gate endless;
  EXPECT_TRUE(rt.block_on(init_with_timeout(&lone, &endless, &counters)));
  EXPECT_EQ(lone.get(), nullptr);
  std::atomic<int> runs{0};
  EXPECT_EQ(*rt.block_on(init_or_get(&lone, &runs, 6)), 6);
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(counters.live(), 0);
}

// The operation kept by the caller (an lvalue operand of timeout): when the
// wait expires its initialiser is cancelled at once, so the turn passes on
// instead of staying with a frame nobody can resume; awaiting it again
// starts over and finds the value.
Task<int> lvalue_operation_times_out(OnceCell<int>* cell, LifeCounters* counters) {
  Gate endless;
  auto op = cell->get_or_init([&] { return endless_init(Tracked(*counters, 1), &endless); });
  Expected<const int&> first = co_await volt::timeout(20ms, op);
  EXPECT_FALSE(first);
  EXPECT_EQ(counters->live(), 0) << "the interrupted initialiser's frame is still alive";
  std::atomic<int> runs{0};
  // Another caller gets the turn (before the fix it waited for ever).
  const int* other = co_await init_or_get(cell, &runs, 8);
  EXPECT_EQ(runs.load(), 1);
  const int& again = co_await op;  // starts over: the cell is set
  EXPECT_EQ(&again, other);
  co_return again;
}

TEST_P(OnceCellTest, AnInterruptedLvalueOperationGivesUpItsTurn) {
  Runtime rt = make_runtime(GetParam());
  LifeCounters counters;
  OnceCell<int> cell;
  EXPECT_EQ(rt.block_on(lvalue_operation_times_out(&cell, &counters)), 8);
  EXPECT_EQ(counters.live(), 0);
}

Task<void> waiter_gives_up(OnceCell<int>* cell) {
  Gate gate;
  auto initialiser = volt::spawn(call_gated(cell, &gate, 1, false, 1));
  co_await wait_started(&gate);
  // A waiter gives up; the initialiser still publishes to the others.
  std::atomic<int> runs{0};
  Expected<const int&> r =
      co_await volt::timeout(10ms, cell->get_or_init([&] { return counted_init(&runs, 2, 0); }));
  EXPECT_FALSE(r);
  auto later = volt::spawn(init_or_get(cell, &runs, 3));
  co_await volt::sleep(5ms);
  gate.go.store(true);
  EXPECT_EQ(co_await initialiser, 0);
  EXPECT_EQ(*co_await later, 1);
  EXPECT_EQ(runs.load(), 0) << "no waiter ran its initialiser";
}

TEST_P(OnceCellTest, WaiterCancelledByTimeoutLeavesTheQueueIntact) {
  Runtime rt = make_runtime(GetParam());
  OnceCell<int> cell;
  rt.block_on(waiter_gives_up(&cell));
  EXPECT_EQ(*cell.get(), 1);
}

TEST_P(OnceCellTest, MoveOnlyValueWithoutDefaultConstructor) {
  Runtime rt = make_runtime(GetParam());
  OnceCell<Token> cell;
  const int v = rt.block_on([](OnceCell<Token>* c) -> Task<int> {
    const Token& t = co_await c->get_or_init([]() -> Task<Token> {
      co_await volt::yield_now();
      co_return Token(11);
    });
    co_return *t.p;
  }(&cell));
  EXPECT_EQ(v, 11);
  EXPECT_TRUE(cell.set(Token(12)).is_already_initialized());
}

// ---- get_or_try_init ----

Task<Expected<int>> fallible_init(std::atomic<int>* runs, bool fail) {
  runs->fetch_add(1);
  co_await volt::yield_now();
  if (fail) co_return errc::invalid_argument;
  co_return 21;
}

TEST_P(OnceCellTest, TryInitErrorLeavesTheCellEmpty) {
  Runtime rt = make_runtime(GetParam());
  OnceCell<int> cell;
  std::atomic<int> runs{0};
  auto attempt = [](OnceCell<int>* c, std::atomic<int>* n, bool fail) -> Task<std::error_code> {
    Expected<const int&> r = co_await c->get_or_try_init([=] { return fallible_init(n, fail); });
    if (!r) co_return r.error();
    co_return *r == 21 ? std::error_code() : code(errc::closed);
  };
  EXPECT_EQ(rt.block_on(attempt(&cell, &runs, true)), code(errc::invalid_argument));
  EXPECT_EQ(cell.get(), nullptr);
  EXPECT_EQ(rt.block_on(attempt(&cell, &runs, false)), std::error_code());
  EXPECT_EQ(*cell.get(), 21);
  EXPECT_EQ(rt.block_on(attempt(&cell, &runs, true)), std::error_code())
      << "set already: f is not called";
  EXPECT_EQ(runs.load(), 2);
}

// ---- stress: random failures and cancellations ----

struct ChurnState {
  std::atomic<int> inside{0};      // initialisers running now
  std::atomic<int> overlaps{0};    // an initialiser found another running
  std::atomic<int> started{0};     // initialisers that began
  std::atomic<int> threw{0};       // initialisers that threw
  std::atomic<int> succeeded{0};   // initialisers that returned a value
  std::atomic<int> completed{0};   // callers that got a value
  std::atomic<int> mismatched{0};  // ... that was not the cell's value
};

// Leaves `inside` when the frame goes, however it goes (done, thrown,
// destroyed by a timeout).
struct Inside {
  ChurnState* s;
  ~Inside() { s->inside.fetch_sub(1); }
};

Task<int> churn_init(ChurnState* s, int value, bool fail, bool slow) {
  s->started.fetch_add(1);
  if (s->inside.fetch_add(1) != 0) s->overlaps.fetch_add(1);
  Inside inside{s};
  if (slow) {
    co_await volt::sleep(300us);
  } else {
    co_await volt::yield_now();
  }
  if (fail) {
    s->threw.fetch_add(1);
    throw std::runtime_error("churn");
  }
  s->succeeded.fetch_add(1);
  co_return value;
}

Task<void> churn_caller(OnceCell<int>* cell, ChurnState* s, std::uint64_t seed, int id) {
  std::mt19937_64 rng(seed);
  const bool fail = rng() % 4 == 0;
  const bool slow = rng() % 4 == 0;
  const bool bounded = rng() % 3 == 0;
  const auto limit = std::chrono::microseconds(rng() % 2 == 0 ? 0 : 200);
  auto op = cell->get_or_init([=] { return churn_init(s, id, fail, slow); });
  const int* got = nullptr;
  try {
    if (bounded) {
      Expected<const int&> r = co_await volt::timeout(limit, std::move(op));
      if (r) got = &*r;
    } else {
      got = &co_await op;
    }
  } catch (const std::runtime_error&) {
  }
  if (got) {
    s->completed.fetch_add(1);
    if (got != cell->get()) s->mismatched.fetch_add(1);
  }
}

Task<void> churn_round(OnceCell<int>* cell, ChurnState* s, std::uint64_t seed) {
  std::vector<JoinHandle<void>> hs;
  hs.reserve(16);
  for (int i = 0; i < 16; ++i)
    hs.push_back(volt::spawn(churn_caller(cell, s, seed * 100 + i, i)));
  for (auto& h : hs)
    co_await h;
}

TEST_P(OnceCellTest, RandomFailuresAndCancellationsKeepOneInitialiserAtATime) {
  Runtime rt = make_runtime(GetParam());
  const std::size_t rounds = scale(300);
  int initialised = 0;
  int threw = 0;
  int cancelled = 0;  // initialisers whose frame was destroyed mid-way
  for (std::size_t round = 0; round < rounds; ++round) {
    auto cell = std::make_unique<OnceCell<int>>();
    ChurnState s;
    rt.block_on(churn_round(cell.get(), &s, round));
    ASSERT_EQ(s.overlaps.load(), 0) << "two initialisers ran at once, round " << round;
    ASSERT_EQ(s.inside.load(), 0);
    ASSERT_EQ(s.mismatched.load(), 0) << "a caller got a value that is not the cell's";
    ASSERT_LE(s.succeeded.load(), 1) << "round " << round;
    ASSERT_EQ(s.succeeded.load() == 1, cell->initialized()) << "round " << round;
    ASSERT_TRUE(s.completed.load() == 0 || cell->initialized());
    initialised += cell->initialized() ? 1 : 0;
    threw += s.threw.load();
    cancelled += s.started.load() - s.succeeded.load() - s.threw.load();
  }
  EXPECT_GT(initialised, 0);
  // The scenario is exercised: turns passed on after both kinds of failure.
  EXPECT_GT(threw, 0);
  EXPECT_GT(cancelled, 0);
}

// ---- allocation ----

// Waiting for the initialiser allocates nothing once frames and task cells
// are recycled: a round is 8 callers on one worker, the first initialising
// while the other 7 queue on the cell.
Task<std::uint64_t> waiting_allocations(OnceCell<int>* cells) {
  std::atomic<int> runs{0};
  auto round = [&](OnceCell<int>* cell) -> Task<void> {
    std::vector<JoinHandle<const int*>> hs;
    hs.reserve(8);
    for (int t = 0; t < 8; ++t)
      hs.push_back(volt::spawn(init_or_get(cell, &runs, t)));
    for (auto& h : hs)
      (void)co_await h;
  };
  // Two warm-up rounds: a join that polls a task in place leaves its queue
  // entry (and with it the task's cell) until the worker pops it, which may
  // be after the next round spawned, so the pools reach their steady size
  // in the second round.
  co_await round(&cells[0]);  // warm-up: frame pools and task cells
  co_await round(&cells[1]);
  const std::uint64_t before = heap_allocations();
  co_await round(&cells[2]);
  co_return heap_allocations() - before;
}

TEST(OnceCellAllocation, WaitingForTheInitialiserDoesNotAllocate) {
  if (kFramePoolDisabled) GTEST_SKIP() << "frame pool disabled (ASan)";
  Runtime rt = Runtime::Builder().worker_threads(1).build();
  OnceCell<int> cells[3];
  // One vector of 8 join handles per round is the only allocation.
  EXPECT_LE(rt.block_on(waiting_allocations(cells)), 1u);
  EXPECT_NE(cells[2].get(), nullptr);
}

}  // namespace
}  // namespace volt::test
