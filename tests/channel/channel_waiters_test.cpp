// ChannelWaiters::cancel waiting for a waker that holds the waiter
// (volt/detail/channel_waiters.hpp, src/channel/channel_waiters.cpp).
//
// A waker that took a waiter out of the fast slot publishes kNotified a few
// instructions later; cancel() waits for that store. If the waker's thread is
// preempted in between, a canceller that only pauses burns its time slice
// before the waker can run again. Here the "waker" is a thread on the
// canceller's CPU (both pinned to it), busy and so runnable but not running
// when cancel() starts (as a preempted thread): cancel()
// must give it the CPU promptly (SpinWait yields after a bounded spin),
// rather than spin until the scheduler preempts it (a tick, a millisecond or
// more).
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "volt/detail/channel_waiters.hpp"

namespace volt::detail {
namespace {

bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

TEST(ChannelWaitersTest, CancelYieldsToAPreemptedWakerOnItsCpu) {
  cpu_set_t original;
  ASSERT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(original), &original), 0);
  const int cpu = sched_getcpu();
  ASSERT_GE(cpu, 0);
  ASSERT_TRUE(pin_to(cpu));
  auto fastest = std::chrono::steady_clock::duration::max();
  for (int trial = 0; trial < 20; ++trial) {
    ChannelWaiters waiters;
    ChannelWaiter waiter;
    // As a waker leaves it after taking it out of the fast slot: kQueued,
    // in neither the slot nor the list.
    waiter.state.store(ChannelWaiter::kQueued, std::memory_order_relaxed);
    std::atomic<bool> pinned{false};
    std::atomic<bool> ready{false};
    std::atomic<bool> go{false};
    std::thread waker([&] {
      pinned.store(pin_to(cpu), std::memory_order_relaxed);
      // release: pairs with the acquire load below (pinned is visible).
      ready.store(true, std::memory_order_release);
      // Busy, as a thread preempted in the middle of its work: it runs again
      // only when the canceller gives up the CPU. acquire: pairs with the
      // release store of go (nothing else is read after it).
      while (!go.load(std::memory_order_acquire)) {
      }
      // release: the canceller's acquire load in cancel() sees it.
      waiter.state.store(ChannelWaiter::kNotified, std::memory_order_release);
    });
    while (!ready.load(std::memory_order_acquire))
      std::this_thread::yield();
    // release: pairs with the waker's acquire load.
    go.store(true, std::memory_order_release);
    const auto start = std::chrono::steady_clock::now();
    waiters.cancel(&waiter);
    fastest = std::min(fastest, std::chrono::steady_clock::now() - start);
    waker.join();
    ASSERT_TRUE(pinned.load(std::memory_order_acquire));
    EXPECT_EQ(waiter.state.load(std::memory_order_relaxed), ChannelWaiter::kIdle);
  }
  pthread_setaffinity_np(pthread_self(), sizeof(original), &original);
  // Yielding after the bounded spin lets the waker run within microseconds;
  // a pure spin waits for preemption (about a scheduler tick).
  EXPECT_LT(fastest, std::chrono::microseconds(500))
      << "fastest cancel took "
      << std::chrono::duration_cast<std::chrono::microseconds>(fastest).count() << " us";
}

}  // namespace
}  // namespace volt::detail
