// volt/detail/spin_lock.hpp: SpinLock, a lock for critical sections of a few instructions (linking
// a task into a list), where std::mutex's cost is mostly its own bookkeeping.
//
// Measured on chained_spawn: pthread_mutex_lock/unlock were ~11% of the
// profile for the two OwnedTasks critical sections per task; this lock is an
// exchange to take and a plain release store to give back. Under contention
// it spins with a pause instruction, and after kSpinsBeforeYield failed looks
// (a guess sized to cover a critical section plus a cache miss) yields the
// CPU, so a holder that was preempted gets to run on a 2-core machine.
//
// Satisfies Lockable (lock/try_lock/unlock), so std::lock_guard works.
#pragma once

#include <atomic>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace volt::detail {

class SpinLock {
 public:
  void lock() noexcept {
    // acquire: pairs with the release in unlock(); the previous holder's
    // writes in the critical section are visible to us.
    while (locked_.exchange(true, std::memory_order_acquire)) {
      int spins = 0;
      // Wait on a plain load so the cache line is not bounced by writes.
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < kSpinsBeforeYield) {
          pause();
        } else {
          std::this_thread::yield();
          spins = 0;
        }
      }
    }
  }
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

  // The CPU's spin-wait hint (also for other short bounded spins).
  static void pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

 private:
  static constexpr int kSpinsBeforeYield = 128;
  std::atomic<bool> locked_{false};
};

}  // namespace volt::detail
