// volt/detail/atomic_waker.hpp: one waker slot with one registrant and any
// number of wakers, lock-free (the single consumer's wait of a channel).
//
// The registrant (a channel's one receiver) arms the slot with its waker and
// disarms it when it stops waiting; any thread that made progress the
// registrant may wait for calls wake(), which takes the waker out and wakes
// it. Nobody ever waits for anybody: a registrant that finds a wake in
// progress is told so (kBusy) and treats itself as woken.
//
// No lost wake-up (a Dekker pair, store then load on both sides): the
// registrant re-checks its condition after arm() returned kArmed; a waker
// publishes its progress before it calls wake(). arm() ends, and wake()
// begins, with a store-load barrier (barrier() below), so in the barriers'
// total order one comes first: if the registrant's, the waker's load in
// wake() sees the slot armed (or a later state: another waker took it and
// wakes the registrant, or the registrant disarmed it itself); if the
// waker's, the registrant's re-check sees everything the waker wrote before
// calling wake().
//
// State (state_), with the only transitions:
//   kIdle    waker_ is empty or stale; only the registrant touches it.
//            kIdle -> kArmed (registrant, arm)
//   kArmed   waker_ holds the registrant's waker; it belongs to whoever
//            moves the state out of kArmed.
//            kArmed -> kWaking (a waker, CAS), kArmed -> kIdle (registrant,
//            CAS, in arm or disarm)
//   kWaking  a waker is moving waker_ out; nobody else touches it.
//            kWaking -> kIdle (that waker, a store, after the move and
//            before it wakes: copy before publish)
// Waiting allocates nothing (the waker is two words in the slot).
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

#include "volt/detail/waker.hpp"

#if defined(__SANITIZE_THREAD__)
#define VOLT_ATOMIC_WAKER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define VOLT_ATOMIC_WAKER_TSAN 1
#endif
#endif

namespace volt::detail {

class AtomicWaker {
 public:
  enum class [[nodiscard]] Arm{
      kArmed,  // the slot holds the new waker; a wake() will find it
      kBusy,   // a wake() is taking the previous waker: act as woken
  };

  AtomicWaker() noexcept = default;
  AtomicWaker(const AtomicWaker&) = delete;
  AtomicWaker& operator=(const AtomicWaker&) = delete;
  ~AtomicWaker() = default;  // drops an armed waker

  // Registrant only. Whether the slot is still armed (no wake() took it).
  // acquire: pairs with wake()'s release store of kIdle, so that a false
  // answer lets the registrant write waker_ (arm) after it.
  bool armed() const noexcept { return state_.load(std::memory_order_acquire) == kArmed; }

  // Registrant only. Puts `waker` in the slot (replacing an armed one).
  // After kArmed the caller re-checks its condition (the barrier is done).
  Arm arm(Waker waker) noexcept {
    // acquire: pairs with wake()'s release store of kIdle (it has finished
    // moving waker_ out before we write it).
    std::uint32_t state = state_.load(std::memory_order_acquire);
    // Armed (a spurious wake-up, or a re-arm for another task): take the old
    // waker back first. acquire, also on failure: as above; a failure leaves
    // in `state` what a waker made of it, kWaking or (finished) kIdle.
    if (state == kArmed && state_.compare_exchange_strong(state, kIdle, std::memory_order_acquire,
                                                          std::memory_order_acquire))
      state = kIdle;
    if (state != kIdle) return Arm::kBusy;
    waker_ = std::move(waker);  // kIdle: ours (the old one, if any, is dropped here)
    // release: pairs with wake()'s acquire CAS, which then reads the waker
    // we just wrote.
    state_.store(kArmed, std::memory_order_release);
    barrier();  // the registrant's half of the Dekker pair (see the top)
    return Arm::kArmed;
  }

  // Registrant only. Withdraws an armed waker (drops it); nothing if a
  // wake() took it already (that wake-up then arrives, spuriously).
  void disarm() noexcept {
    // relaxed pre-check: only the registrant arms, so kArmed cannot appear
    // behind our back, and a stale kArmed is caught by the CAS.
    std::uint32_t state = state_.load(std::memory_order_relaxed);
    if (state != kArmed) return;
    // acquire: waker_ was last written by us, but acquire keeps the drop
    // below the CAS that makes it ours again.
    if (state_.compare_exchange_strong(state, kIdle, std::memory_order_acquire,
                                       std::memory_order_relaxed))
      waker_.reset();
  }

  // Any thread, after publishing its progress. Wakes the armed waker, if
  // any, and disarms the slot.
  void wake() noexcept {
    barrier();  // the waker's half of the Dekker pair (see the top)
    // relaxed: ordered after our progress by the barrier.
    if (state_.load(std::memory_order_relaxed) != kArmed) return;
    std::uint32_t expected = kArmed;
    // acquire: pairs with arm()'s release store; the waker is visible.
    if (!state_.compare_exchange_strong(expected, kWaking, std::memory_order_acquire,
                                        std::memory_order_relaxed))
      return;                         // another waker took it, or the registrant withdrew it
    Waker waker = std::move(waker_);  // before publishing kIdle
    // release: pairs with arm()'s and armed()'s acquire loads; the
    // registrant may write waker_ from here on.
    state_.store(kIdle, std::memory_order_release);
    waker.wake();
  }

 private:
  // The store-load barrier of the Dekker pair: a seq_cst fence. Under
  // ThreadSanitizer, which does not model fences (GCC warns, -Wtsan), a
  // seq_cst RMW on state_ instead, which both sides pass: RMWs on one word
  // are totally ordered and the later one acquires the earlier one's
  // release, so one side still sees the other, in a way TSan can follow.
  void barrier() noexcept {
#ifdef VOLT_ATOMIC_WAKER_TSAN
    state_.fetch_add(0, std::memory_order_seq_cst);
#else
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
  }

  static constexpr std::uint32_t kIdle = 0;
  static constexpr std::uint32_t kArmed = 1;
  static constexpr std::uint32_t kWaking = 2;

  std::atomic<std::uint32_t> state_{kIdle};
  Waker waker_;  // see the state table
};

}  // namespace volt::detail
