// volt/detail/spin_wait.hpp: SpinWait, the backoff for waiting on another
// thread that is a few instructions from a store we need (a waker that took a
// waiter out of a lock-free slot and is about to publish it, a reader about to
// leave a slot).
//
// The other thread normally finishes within a few pause instructions, so the
// first looks only pause; but it may have been preempted, and a waiter that
// kept spinning would burn its time slice (on a 2-core machine, possibly the
// one the preempted thread needs). After kPausesBeforeYield looks, each look
// yields the CPU instead. The figure is SpinLock's (spin_lock.hpp): a guess
// sized to cover a few instructions plus a cache miss.
//
// Every spin-wait of the channel and sync code uses it:
//   ChannelWaiters::cancel (src/channel/channel_waiters.cpp),
//   Semaphore::cancel (src/sync/semaphore.cpp),
//   broadcast's Slot::write (volt/channel/broadcast.hpp).
//
//   SpinWait backoff;
//   while (!done()) backoff.once();
#pragma once

#include <thread>

#include "volt/detail/spin_lock.hpp"

namespace volt::detail {

class SpinWait {
 public:
  static constexpr int kPausesBeforeYield = 128;

  // One look that found the condition false: pause, or yield once the pauses
  // are used up.
  void once() noexcept {
    if (pauses_ < kPausesBeforeYield) {
      ++pauses_;
      SpinLock::pause();
    } else {
      std::this_thread::yield();
    }
  }
  // Whether the next once() yields (the wait has outlasted the pauses).
  bool yielding() const noexcept { return pauses_ >= kPausesBeforeYield; }

 private:
  int pauses_ = 0;
};

// ContentionBackoff: the wait after losing a race for a contended word (a
// compare-exchange that failed because another thread's succeeded): twice as
// many pauses after each loss, 1 to kMaxPauses. Without it the losers retry
// at once and pull the word's cache line away from the winner after each of
// its operations; with it the winner's core keeps the line for a few of its
// next ones (crossbeam's ArrayQueue backs off the same way). It never
// yields: a lost race means the winner ran, so nothing waits on a preempted
// thread here (SpinWait is for that).
class ContentionBackoff {
 public:
  static constexpr int kMaxPauses = 32;

  void once() noexcept {
    for (int i = 0; i < pauses_; ++i)
      SpinLock::pause();
    if (pauses_ < kMaxPauses) pauses_ *= 2;
  }

 private:
  int pauses_ = 1;
};

}  // namespace volt::detail
