// Tests of volt::Mutex<T> (include/volt/sync/mutex.hpp): mutual exclusion
// under contention (a plain, non-atomic counter: ThreadSanitizer reports
// any overlap), try_lock, the blocking form, a lock wait cancelled by a
// timeout, and no heap allocation while contended tasks wait.
#define VOLT_TEST_DEFINE_COUNTING_NEW
#include <array>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/runtime_support.hpp"
#include "volt/sync/mutex.hpp"
#include "volt/time/timeout.hpp"

namespace volt::test {
namespace {

using namespace std::chrono_literals;

class MutexTest : public ::testing::TestWithParam<Flavour> {};
INSTANTIATE_TEST_SUITE_P(Flavours, MutexTest,
                         ::testing::Values(kMultiThread1, kMultiThread2, kCurrentThread),
                         FlavourName());

struct Counter {
  std::uint64_t value = 0;  // deliberately not atomic
  int holders = 0;
};

Task<void> increment(Mutex<Counter>* mutex, std::uint64_t rounds, std::atomic<int>* overlaps) {
  for (std::uint64_t i = 0; i < rounds; ++i) {
    auto guard = co_await mutex->lock();
    if (++guard->holders != 1) overlaps->fetch_add(1);
    ++guard->value;
    if (i % 16 == 0) co_await volt::yield_now();  // hold it across a suspension
    --guard->holders;
  }
}

TEST_P(MutexTest, ContendedIncrementsAreMutuallyExclusive) {
  Runtime rt = make_runtime(GetParam());
  Mutex<Counter> mutex;
  std::atomic<int> overlaps{0};
  const std::uint64_t rounds = scale(20'000);
  std::vector<JoinHandle<void>> hs;
  for (int t = 0; t < 8; ++t)
    hs.push_back(rt.spawn(increment(&mutex, rounds, &overlaps)));
  for (auto& h : hs)
    h.join();
  EXPECT_EQ(overlaps.load(), 0);
  auto guard = mutex.lock_blocking();
  EXPECT_EQ(guard->value, 8 * rounds);
}

TEST(MutexBasics, TryLockAndBlockingLock) {
  Mutex<int> mutex(5);
  auto a = mutex.try_lock();
  ASSERT_TRUE(a);
  EXPECT_EQ(**a, 5);
  EXPECT_FALSE(mutex.try_lock());
  std::atomic<bool> got{false};
  std::thread t([&] {
    auto g = mutex.lock_blocking();
    *g = 6;
    got.store(true);
  });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(got.load());
  a.reset();  // unlock: the blocked thread gets it
  t.join();
  EXPECT_TRUE(got.load());
  auto b = mutex.try_lock();
  ASSERT_TRUE(b);
  EXPECT_EQ(**b, 6);
}

Task<int> lock_with_timeout(Mutex<int>* mutex) {
  Expected<Mutex<int>::Guard> g = co_await volt::timeout(20ms, mutex->lock());
  co_return g ? 1 : 0;
}

TEST_P(MutexTest, LockWaitCancelledByATimeoutLosesNothing) {
  Runtime rt = make_runtime(GetParam());
  Mutex<int> mutex(0);
  {
    auto held = mutex.lock_blocking();
    EXPECT_EQ(rt.block_on(lock_with_timeout(&mutex)), 0);
  }
  // The cancelled wait left nothing behind: the lock is free.
  EXPECT_TRUE(mutex.try_lock());
}

// Contended waiting allocates nothing once tasks and frames are recycled.
Task<std::uint64_t> contended_allocations(Mutex<Counter>* mutex) {
  std::atomic<int> overlaps{0};
  auto round = [&]() -> Task<void> {
    std::array<JoinHandle<void>, 8> hs;
    for (auto& h : hs)
      h = volt::spawn(increment(mutex, 200, &overlaps));
    for (auto& h : hs)
      co_await h;
  };
  co_await round();  // warm-up: frame pools and task cells
  const std::uint64_t before = heap_allocations();
  co_await round();
  co_return heap_allocations() - before;
}

TEST(MutexAllocation, ContendedWaitingDoesNotAllocate) {
  if (kFramePoolDisabled) GTEST_SKIP() << "frame pool disabled (ASan)";
  Runtime rt = Runtime::Builder().worker_threads(1).build();
  Mutex<Counter> mutex;
  // Tasks hold the lock across a yield every 16 rounds, so the others queue.
  EXPECT_EQ(rt.block_on(contended_allocations(&mutex)), 0u);
}

}  // namespace
}  // namespace volt::test
