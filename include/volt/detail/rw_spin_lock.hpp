// volt/detail/rw_spin_lock.hpp: RwSpinLock, a reader-writer lock for critical
// sections of a few instructions (reading or replacing a watch channel's
// value), where std::shared_mutex's cost is mostly its own bookkeeping.
//
// Taking either side uncontended is one CAS; giving it back one RMW. A writer
// that has to wait sets kWriterWaiting, which keeps new readers out, so a
// stream of short borrows cannot starve a send. Waiting spins with the CPU's
// pause hint and, after kSpinsBeforeYield looks (SpinLock's figure), yields
// the thread, so that a holder preempted on a 2-core machine gets to run.
//
// Satisfies SharedLockable (lock/try_lock/unlock, lock_shared/unlock_shared).
// Not recursive: a thread that holds it shared and asks for it exclusively
// (a borrow alive across its own send) spins forever.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "volt/detail/spin_lock.hpp"

namespace volt::detail {

class RwSpinLock {
 public:
  void lock_shared() noexcept {
    std::uint32_t state = state_.load(std::memory_order_relaxed);
    for (;;) {
      if (state & (kWriter | kWriterWaiting)) {
        spin_until([this] {
          return (state_.load(std::memory_order_relaxed) & (kWriter | kWriterWaiting)) == 0;
        });
        state = state_.load(std::memory_order_relaxed);
        continue;
      }
      // acquire: pairs with unlock()'s release; the last writer's changes
      // are visible to us. relaxed on failure: we only look at the bits.
      if (state_.compare_exchange_weak(state, state + kReader, std::memory_order_acquire,
                                       std::memory_order_relaxed))
        return;
    }
  }
  void unlock_shared() noexcept {
    // release: our reads are done before a writer that acquires after us
    // changes the value.
    state_.fetch_sub(kReader, std::memory_order_release);
  }

  bool try_lock() noexcept {
    std::uint32_t expected = 0;
    // acquire: pairs with unlock() and unlock_shared(): the last holders'
    // accesses come before ours.
    return state_.compare_exchange_strong(expected, kWriter, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }
  void lock() noexcept {
    if (try_lock()) return;
    std::uint32_t state = state_.load(std::memory_order_relaxed);
    for (;;) {
      if ((state & kWriter) == 0 && state < kReader) {
        // Free (perhaps with kWriterWaiting, ours or another writer's: the
        // CAS clears it; a writer still waiting sets it again). acquire: as
        // in try_lock.
        if (state_.compare_exchange_weak(state, kWriter, std::memory_order_acquire,
                                         std::memory_order_relaxed))
          return;
        continue;
      }
      if ((state & kWriterWaiting) == 0) {
        // relaxed: the bit only holds new readers back; nothing is published.
        if (!state_.compare_exchange_weak(state, state | kWriterWaiting, std::memory_order_relaxed,
                                          std::memory_order_relaxed))
          continue;
      }
      spin_until([this] {
        const std::uint32_t now = state_.load(std::memory_order_relaxed);
        return (now & kWriter) == 0 && now < kReader;
      });
      state = state_.load(std::memory_order_relaxed);
    }
  }
  void unlock() noexcept {
    // An RMW, not a store: a waiting writer may be setting kWriterWaiting.
    // release: pairs with the acquire of whoever takes it next.
    state_.fetch_sub(kWriter, std::memory_order_release);
  }

 private:
  // state_: reader count << 2 | kWriterWaiting | kWriter. Initial 0: free.
  static constexpr std::uint32_t kWriter = 1;
  static constexpr std::uint32_t kWriterWaiting = 2;
  static constexpr std::uint32_t kReader = 4;
  static constexpr int kSpinsBeforeYield = 128;

  template <class Done>
  static void spin_until(Done done) noexcept {
    int spins = 0;
    while (!done()) {
      if (++spins < kSpinsBeforeYield) {
        SpinLock::pause();
      } else {
        std::this_thread::yield();
        spins = 0;
      }
    }
  }

  std::atomic<std::uint32_t> state_{0};
};

}  // namespace volt::detail
