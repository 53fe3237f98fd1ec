// Tests of volt::Barrier (include/volt/sync/barrier.hpp,
// src/sync/barrier.cpp): exactly one leader per generation, generations kept
// apart under contention (exact per-generation counts, run under TSan in CI),
// n == 1, Barrier(0), generations larger than a WakeList batch, cancellation
// withdrawing the arrival (also under random timeouts), re-awaiting one Wait
// (after completion: the same result at once; while queued after a timeout:
// one arrival, only by its task; timeout loops racing the release), the
// blocking form, and no heap allocation while tasks wait.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/runtime_support.hpp"
#include "volt/detail/wake_list.hpp"
#include "volt/sync/barrier.hpp"
#include "volt/time/sleep.hpp"
#include "volt/time/timeout.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

class BarrierTest : public ::testing::TestWithParam<Flavour> {};
INSTANTIATE_TEST_SUITE_P(Flavours, BarrierTest,
                         ::testing::Values(kMultiThread1, kMultiThread2, kMultiThread4,
                                           kCurrentThread),
                         FlavourName());

TEST(BarrierBasics, ZeroPartiesIsRefused) {
  EXPECT_EQ(volt_error_of([] { Barrier b(0); }), code(errc::invalid_argument));
  Barrier one(1);
  EXPECT_EQ(one.parties(), 1u);
}

// ---- generations under contention ----

// Per generation: how many arrived, how many were released, how many led.
struct GenerationCounts {
  explicit GenerationCounts(std::size_t generations)
      : arrived(generations), released(generations), leaders(generations) {}
  std::vector<std::atomic<std::uint32_t>> arrived;
  std::vector<std::atomic<std::uint32_t>> released;
  std::vector<std::atomic<std::uint32_t>> leaders;
  std::atomic<std::uint32_t> early{0};  // released before its generation was full
};

Task<void> run_generations(Barrier* barrier, GenerationCounts* counts, std::size_t generations,
                           std::uint64_t seed) {
  const std::uint32_t n = static_cast<std::uint32_t>(barrier->parties());
  std::mt19937_64 rng(seed);
  for (std::size_t g = 0; g < generations; ++g) {
    counts->arrived[g].fetch_add(1);
    BarrierWaitResult r = co_await barrier->wait();
    // Everyone of generation g arrived before anyone of it was released, and
    // nobody of g+1 is counted here (they count into g+1).
    if (counts->arrived[g].load() != n) counts->early.fetch_add(1);
    counts->released[g].fetch_add(1);
    if (r.is_leader()) counts->leaders[g].fetch_add(1);
    if (rng() % 8 == 0) co_await volt::yield_now();  // vary the interleaving
  }
}

void check_generations(const GenerationCounts& counts, std::size_t generations, std::uint32_t n) {
  EXPECT_EQ(counts.early.load(), 0u) << "a caller was released before its generation was full";
  for (std::size_t g = 0; g < generations; ++g) {
    ASSERT_EQ(counts.arrived[g].load(), n) << "generation " << g;
    ASSERT_EQ(counts.released[g].load(), n) << "generation " << g;
    ASSERT_EQ(counts.leaders[g].load(), 1u) << "generation " << g << ": leaders";
  }
}

TEST_P(BarrierTest, EveryGenerationReleasesAllItsCallersWithExactlyOneLeader) {
  Runtime rt = make_runtime(GetParam());
  for (std::uint32_t n : {2u, 4u, 7u}) {
    Barrier barrier(n);
    const std::size_t generations = scale(20'000);
    GenerationCounts counts(generations);
    std::vector<JoinHandle<void>> hs;
    for (std::uint32_t t = 0; t < n; ++t)
      hs.push_back(rt.spawn(run_generations(&barrier, &counts, generations, 77 + t)));
    for (auto& h : hs)
      h.join();
    check_generations(counts, generations, n);
  }
}

// `rounds` waits, counting leaders and passes. (Only with exactly n such tasks
// on an n-party barrier: with more, fast tasks may finish and strand a slow
// one in a generation that can no longer fill.)
Task<void> wait_many(Barrier* barrier, std::size_t rounds, std::atomic<std::uint64_t>* leaders,
                     std::atomic<std::uint64_t>* passed) {
  for (std::size_t i = 0; i < rounds; ++i) {
    if ((co_await barrier->wait()).is_leader()) leaders->fetch_add(1);
    passed->fetch_add(1);
  }
}

TEST_P(BarrierTest, OnePartyMeansEveryCallerLeadsAtOnce) {
  Runtime rt = make_runtime(GetParam());
  Barrier barrier(1);
  auto body = [](Barrier* b) -> Task<int> {
    int leaders = 0;
    for (int i = 0; i < 1000; ++i)
      leaders += (co_await b->wait()).is_leader() ? 1 : 0;
    co_return leaders;
  };
  EXPECT_EQ(rt.block_on(body(&barrier)), 1000);
}

// A generation larger than a WakeList batch is released in several batches;
// every waiter of it goes, none of the next.
TEST_P(BarrierTest, GenerationsLargerThanAWakeBatch) {
  Runtime rt = make_runtime(GetParam());
  constexpr std::uint32_t kParties = 3 * detail::WakeList::kCapacity + 5;
  Barrier barrier(kParties);
  const std::size_t generations = 20;
  GenerationCounts counts(generations);
  std::vector<JoinHandle<void>> hs;
  for (std::uint32_t t = 0; t < kParties; ++t)
    hs.push_back(rt.spawn(run_generations(&barrier, &counts, generations, 5 + t)));
  for (auto& h : hs)
    h.join();
  check_generations(counts, generations, kParties);
}

// ---- cancellation ----

Task<int> wait_with_timeout(Barrier* barrier, std::chrono::milliseconds d) {
  Expected<BarrierWaitResult> r = co_await volt::timeout(d, barrier->wait());
  co_return r ? 1 : 0;
}

Task<bool> wait_once(Barrier* barrier) {
  co_return (co_await barrier->wait()).is_leader();
}

TEST_P(BarrierTest, ACancelledWaiterWithdrawsItsArrival) {
  Runtime rt = make_runtime(GetParam());
  Barrier barrier(3);
  // One arrival that times out: it must not count any more.
  EXPECT_EQ(rt.block_on(wait_with_timeout(&barrier, 10ms)), 0);
  auto b = rt.spawn(wait_once(&barrier));
  auto c = rt.spawn(wait_once(&barrier));
  // Had the cancelled arrival stayed counted, c's arrival would have
  // completed the generation.
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(b.is_finished());
  EXPECT_FALSE(c.is_finished());
  // The third arrival completes it and leads.
  EXPECT_TRUE(rt.block_on(wait_once(&barrier)));
  EXPECT_FALSE(b.join());
  EXPECT_FALSE(c.join());
}

Task<void> hold_at_barrier(Barrier* barrier, std::atomic<int>* passed) {
  co_await barrier->wait();
  passed->fetch_add(1);
}

TEST_P(BarrierTest, AnAbortedWaiterWithdrawsItsArrival) {
  Runtime rt = make_runtime(GetParam());
  Barrier barrier(2);
  std::atomic<int> passed{0};
  auto first = rt.spawn(hold_at_barrier(&barrier, &passed));
  ASSERT_TRUE(wait_until([&] { return rt.stats().live_tasks == 1; }));
  std::this_thread::sleep_for(10ms);
  first.abort();
  EXPECT_EQ(volt_error_of([&] { first.join(); }), code(errc::cancelled));
  // The barrier is empty again: two fresh arrivals make a generation, one
  // alone does not.
  auto second = rt.spawn(wait_once(&barrier));
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(second.is_finished());
  EXPECT_TRUE(rt.block_on(wait_once(&barrier)));
  EXPECT_FALSE(second.join());
  EXPECT_EQ(passed.load(), 0);
}

// Random timeouts race with completions. Afterwards the count must be back at
// zero: n - 1 fresh arrivals wait, the n-th leads.
Task<void> churn(Barrier* barrier, std::size_t ops, std::uint64_t seed,
                 std::atomic<std::uint64_t>* leaders, std::atomic<std::uint64_t>* passed) {
  std::mt19937_64 rng(seed);
  for (std::size_t i = 0; i < ops; ++i) {
    Expected<BarrierWaitResult> r =
        co_await volt::timeout(std::chrono::microseconds(rng() % 300), barrier->wait());
    if (r) {
      passed->fetch_add(1);
      if (r->is_leader()) leaders->fetch_add(1);
    }
  }
}

TEST_P(BarrierTest, RandomCancellationKeepsTheCountExact) {
  Runtime rt = make_runtime(GetParam());
  constexpr std::size_t kParties = 3;
  Barrier barrier(kParties);
  std::atomic<std::uint64_t> leaders{0};
  std::atomic<std::uint64_t> passed{0};
  const std::size_t ops = scale(3'000);
  std::vector<JoinHandle<void>> hs;
  for (std::size_t t = 0; t < 5; ++t)
    hs.push_back(rt.spawn(churn(&barrier, ops, 99 + t, &leaders, &passed)));
  for (auto& h : hs)
    h.join();
  // A released waiter may still lose to its timeout; a leader never waits.
  EXPECT_LE(passed.load(), leaders.load() * kParties);
  EXPECT_GE(passed.load(), leaders.load());
  std::vector<JoinHandle<bool>> probes;
  for (std::size_t i = 0; i + 1 < kParties; ++i)
    probes.push_back(rt.spawn(wait_once(&barrier)));
  std::this_thread::sleep_for(30ms);
  for (auto& p : probes)
    EXPECT_FALSE(p.is_finished()) << "a withdrawn arrival stayed counted";
  EXPECT_TRUE(rt.block_on(wait_once(&barrier))) << "the count was off";
  for (auto& p : probes)
    EXPECT_FALSE(p.join());
}

// After the re-await tests: the barrier's count is back at zero (n == 2): a
// fresh arrival waits, the next one completes the generation and leads.
void expect_empty_two_party_barrier(Runtime& rt, Barrier* barrier) {
  auto probe = rt.spawn(wait_once(barrier));
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(probe.is_finished()) << "an arrival too many stayed counted";
  EXPECT_TRUE(rt.block_on(wait_once(barrier))) << "the count was off";
  EXPECT_FALSE(probe.join());
}

// A completed Wait awaited again gives the same result at once (as a
// completed future) and does not arrive again. `lead`: whether this task's
// arrival is the one that completes the generation.
Task<int> reawait_after_completion(Barrier* barrier, bool lead) {
  auto w = barrier->wait();
  JoinHandle<bool> partner = volt::spawn(wait_once(barrier));
  if (lead) co_await volt::sleep(5ms);  // the partner arrives first
  BarrierWaitResult first = co_await w;
  const bool partner_led = co_await partner;
  if (first.is_leader() == partner_led) co_return -1;
  Expected<BarrierWaitResult> again = co_await volt::timeout(0ms, w);  // ready at once
  if (!again || again->is_leader() != first.is_leader()) co_return -2;
  BarrierWaitResult third = co_await w;
  if (third.is_leader() != first.is_leader()) co_return -3;
  co_return 1;
}

TEST_P(BarrierTest, ACompletedWaitReawaitedGivesTheSameResultAtOnce) {
  Runtime rt = make_runtime(GetParam());
  Barrier barrier(2);
  for (bool lead : {false, true}) {
    EXPECT_EQ(rt.block_on(reawait_after_completion(&barrier, lead)), 1) << "lead " << lead;
    expect_empty_two_party_barrier(rt, &barrier);
  }
}

// One Wait kept across timeouts (an lvalue operand stays registered, as
// Tokio's `&mut fut` in a select loop): it arrives once, and the partner's
// arrival completes the generation with it.
Task<int> timeouts_then_release(Barrier* barrier) {
  auto w = barrier->wait();
  for (int i = 0; i < 3; ++i) {
    Expected<BarrierWaitResult> r = co_await volt::timeout(2ms, w);
    if (r) co_return -1;  // a second arrival of ours would have completed it
  }
  JoinHandle<bool> partner = volt::spawn(wait_once(barrier));
  BarrierWaitResult mine = co_await w;
  const bool partner_led = co_await partner;
  if (mine.is_leader() || !partner_led) co_return -2;
  co_return 1;
}

TEST_P(BarrierTest, AWaitKeptAcrossTimeoutsArrivesOnce) {
  Runtime rt = make_runtime(GetParam());
  Barrier barrier(2);
  EXPECT_EQ(rt.block_on(timeouts_then_release(&barrier)), 1);
  expect_empty_two_party_barrier(rt, &barrier);
}

// A queued Wait holds its task's waker: another task may not pick it up.
TEST_P(BarrierTest, OnlyTheFirstTaskMayReawaitAQueuedWait) {
  Runtime rt = make_runtime(GetParam());
  Barrier barrier(2);
  {
    Barrier::Wait w = barrier.wait();
    auto first = [](Barrier::Wait* op) -> Task<int> {
      co_return (co_await volt::timeout(1ms, *op)) ? 1 : 0;
    };
    auto other = [](Barrier::Wait* op) -> Task<std::error_code> {
      std::error_code ec;
      try {
        (void)co_await *op;
      } catch (const Error& e) {
        ec = e.code();
      }
      co_return ec;
    };
    EXPECT_EQ(rt.block_on(first(&w)), 0);  // timed out, still queued
    EXPECT_EQ(rt.block_on(other(&w)), code(errc::invalid_handle));
  }  // withdrawn
  expect_empty_two_party_barrier(rt, &barrier);
}

// ---- blocking form ----

TEST(BarrierBlocking, PlainThreadsAndTasksMeet) {
  Barrier barrier(3);
  Runtime rt = Runtime::Builder().worker_threads(1).build();
  std::atomic<int> leaders{0};
  std::thread t([&] {
    if (barrier.wait_blocking().is_leader()) leaders.fetch_add(1);
  });
  auto task = rt.spawn(wait_once(&barrier));
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(task.is_finished());
  if (barrier.wait_blocking().is_leader()) leaders.fetch_add(1);
  t.join();
  if (task.join()) leaders.fetch_add(1);
  EXPECT_EQ(leaders.load(), 1);

  auto h = rt.spawn([](Barrier* b) -> Task<std::error_code> {
    co_return volt_error_of([&] { (void)b->wait_blocking(); });
  }(&barrier));
  EXPECT_EQ(h.join(), code(errc::blocking_in_runtime));
}

// A loop of timeouts over one Wait races the partner's arrival from another
// worker: one arrival per Wait, one leader per generation, and the re-awaits
// never touch the waker outside the lock (TSan).
TEST(BarrierStress, TimeoutLoopsOverOneWaitRaceTheRelease) {
  Runtime rt = Runtime::Builder().worker_threads(2).build();
  Barrier barrier(2);
  const int rounds = static_cast<int>(scale(1'000));
  for (int round = 0; round < rounds; ++round) {
    auto looper = [](Barrier* b, std::uint64_t seed) -> Task<bool> {
      std::mt19937_64 rng(seed);
      auto w = b->wait();
      for (;;) {
        Expected<BarrierWaitResult> r =
            co_await volt::timeout(std::chrono::microseconds(rng() % 40), w);
        if (r) co_return r->is_leader();
      }
    };
    auto partner = [](Barrier* b, int spins) -> Task<bool> {
      for (int i = 0; i < spins; ++i)
        co_await volt::yield_now();
      co_return (co_await b->wait()).is_leader();
    };
    auto a = rt.spawn(looper(&barrier, 11 + round));
    auto b = rt.spawn(partner(&barrier, round % 7 * 20));
    const bool a_led = a.join();
    const bool b_led = b.join();
    ASSERT_NE(a_led, b_led) << "round " << round << ": exactly one leader";
  }
  expect_empty_two_party_barrier(rt, &barrier);
}

// ---- allocation ----

Task<std::uint64_t> waiting_allocations(Barrier* barrier) {
  constexpr std::size_t kTasks = 4;
  std::vector<JoinHandle<void>> hs;
  hs.reserve(kTasks);
  std::atomic<std::uint64_t> leaders{0};
  std::atomic<std::uint64_t> passed{0};
  auto round = [&]() -> Task<void> {
    for (std::size_t t = 0; t < kTasks; ++t)
      hs.push_back(volt::spawn(wait_many(barrier, 200, &leaders, &passed)));
    for (auto& h : hs)
      co_await h;
    hs.clear();
  };
  // Two warm-up rounds: a join that polls a task in place leaves its queue
  // entry (and with it the task's cell) until the worker pops it, which may
  // be after the next round spawned, so the pools reach their steady size
  // in the second round.
  co_await round();  // warm-up: frame pools and task cells
  co_await round();
  const std::uint64_t before = heap_allocations();
  co_await round();
  co_return heap_allocations() - before;
}

TEST(BarrierAllocation, WaitingDoesNotAllocate) {
  if (kFramePoolDisabled) GTEST_SKIP() << "frame pool disabled (ASan)";
  Runtime rt = Runtime::Builder().worker_threads(1).build();
  Barrier barrier(4);
  EXPECT_EQ(rt.block_on(waiting_allocations(&barrier)), 0u);
}

}  // namespace
}  // namespace volt::test
