// Tests of volt::Barrier (include/volt/sync/barrier.hpp,
// src/sync/barrier.cpp): exactly one leader per generation, generations kept
// apart under contention (exact per-generation counts, run under TSan in CI),
// n == 1, Barrier(0), generations larger than a WakeList batch, cancellation
// withdrawing the arrival (also under random timeouts), the blocking form,
// and no heap allocation while tasks wait.
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
  co_await round();  // warm-up: frame pools and task cells
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
