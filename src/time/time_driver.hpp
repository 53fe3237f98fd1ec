// TimeDriver: the runtime's timers: a TimerWheel behind a lock, the clock
// (real or paused), and the hand-off to whoever sleeps in the I/O driver.
//
// Who does what:
//  - Any thread registers and cancels timers (TimerNode::arm / cancel), each
//    a short critical section on `lock_`.
//  - The driver's holder (the one idle worker in epoll_wait, or a busy
//    worker's maintenance poll) asks for its timeout (park_timeout_ns), sleeps,
//    then fires what came due (process).
//  - A registration earlier than the deadline the holder sleeps until must
//    wake it: park_timeout_ns records that deadline in sleeping_until_ under
//    the lock, and a registration that beats it (also under the lock) returns
//    kEarliest so the caller writes the driver's eventfd. When nobody sleeps,
//    sleeping_until_ is 0 and no registration wakes anybody: the next holder
//    computes its timeout under the same lock and sees every entry.
//  - Nobody may hold the driver at all (multi-thread: every worker busy, or
//    idle ones asleep on their futex because another held it a moment ago).
//    Driver::release() records that (on_release, which also frees the driver
//    in that critical section) and reports whether timers
//    are pending, so the releasing worker hands the driver to a parked
//    sibling; if none are, the first registration afterwards returns
//    kUnattended (once) and the registering thread asks for that hand-off.
//
// Firing: entries come off the wheel in deadline order under the lock; each
// one's waker is moved into a local batch and the node marked kFired (release;
// see timer_node.hpp); wakers are invoked after the lock is released, never
// under it. When a batch is full, the remaining due entries wait in the
// `pending_` list (still kRegistered, still cancellable under the lock) and are
// fired in the next batch.
//
// Ticks are milliseconds since origin_ (the driver's creation). A deadline
// becomes the first tick at or after it (rounded up) and fires once the
// clock's tick (rounded down) reaches it: never early, at most 1 ms late plus
// the time to notice.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>

#include "time/timer_wheel.hpp"
#include "volt/detail/spin_lock.hpp"
#include "volt/detail/timer_node.hpp"
#include "volt/time/clock.hpp"

namespace volt::detail {

class TimeDriver {
 public:
  explicit TimeDriver(bool start_paused) noexcept;
  ~TimeDriver();
  TimeDriver(const TimeDriver&) = delete;
  TimeDriver& operator=(const TimeDriver&) = delete;

  Instant now() const noexcept;

  enum class Registered { kDue, kQueued, kEarliest, kUnattended };
  // `node` must be kIdle or kRegistered with this driver. kDue: the deadline
  // is already reached; the node is kFired and `waker` was not taken.
  Registered insert(TimerNode& node, Instant deadline, Waker& waker) noexcept;
  void remove(TimerNode& node) noexcept;

  // Driver holder: how long it may sleep in epoll (ns; -1: no timer), and
  // records that deadline so that earlier registrations wake it. A paused
  // clock never gives a timeout: it does not move while the holder sleeps.
  std::int64_t park_timeout_ns() noexcept;
  // The driver was acquired / is being released (Driver::try_acquire /
  // release; the current-thread flavour never calls them: its core holder
  // always comes back to the driver). on_release stores `held` false (the
  // driver's try-lock; seq_cst, see Driver::release) inside the same critical
  // section that decides "no timers, so the next registration asks for a
  // hand-off", and returns whether timers are pending (the caller must then
  // hand the driver off). Inside, so that a registration that takes
  // kUnattended comes after the store: the sleeper it wakes finds the driver
  // free. With the store after the section, that sleeper could find the
  // driver still held, sleep again, and the releaser, which saw no timers,
  // hand off to nobody: the timer waited for some worker's next park.
  void on_acquire() noexcept;
  bool on_release(std::atomic<bool>& held) noexcept;
  // Fires every timer due at now(). Any thread (callers serialise through the
  // driver's ownership, but concurrent calls are safe). Returns how many fired.
  // `after_park`: the holder is back from a blocking park, so nobody sleeps
  // on a deadline any more (in the same critical section).
  std::size_t process(bool after_park = false) noexcept;

  // Paused clock (see volt/time/clock.hpp).
  bool is_paused() const noexcept { return paused_.load(std::memory_order_relaxed); }
  // For the blocking pool's "last job done" check (see BlockingPool::job_done).
  bool is_paused_seq_cst() const noexcept { return paused_.load(std::memory_order_seq_cst); }
  void pause() noexcept;
  void resume() noexcept;
  // Moves the paused clock forward by `d`, or to the next deadline if that
  // comes first and `to_next_deadline`; fires what came due. Returns whether
  // the clock moved.
  void advance(Duration d) noexcept;
  // Auto-advance: jumps a paused clock to the next deadline and fires it.
  // False if there is no timer.
  bool advance_to_next_deadline() noexcept;

  std::uint64_t active_timers() const noexcept;
  std::uint64_t fired_timers() const noexcept { return fired_.load(std::memory_order_relaxed); }

 private:
  std::uint64_t deadline_tick(Instant deadline) const noexcept;
  // The instant tick `tick` starts at; nullopt past what Instant can hold.
  std::optional<Instant> tick_start(std::uint64_t tick) const noexcept;
  std::uint64_t now_tick(Instant now) const noexcept;
  Instant now_locked() const noexcept;  // lock_ held
  std::size_t fire_until(std::uint64_t tick) noexcept;
  void link_pending(TimerEntry* entry) noexcept;
  void unlink_pending(TimerEntry* entry) noexcept;

  static constexpr std::uint8_t kPendingLevel = 0xff;  // TimerEntry::level of a pending entry
  // TimerEntry::level of a registration at Instant::max() (a saturated
  // duration): it can never fire, so it is kept out of the wheel (a paused
  // clock's auto-advance would otherwise run to it).
  static constexpr std::uint8_t kNeverLevel = 0xfe;

  const Instant origin_;
  mutable SpinLock lock_;
  TimerWheel wheel_;                    // guarded by lock_
  TimerEntry* pending_ = nullptr;       // guarded by lock_; due, not yet fired (FIFO)
  TimerEntry* pending_tail_ = nullptr;  // guarded by lock_
  std::uint64_t pending_count_ = 0;     // guarded by lock_
  std::uint64_t never_count_ = 0;       // guarded by lock_; registrations at kNeverLevel
  std::uint64_t sleeping_until_ = 0;    // guarded by lock_; tick, 0: nobody sleeps
  // Nobody holds the driver and no hand-off was asked for since (see above).
  // Written under lock_ by on_release and insert; on_acquire clears it
  // without the lock (relaxed): a registration racing an acquire may then ask
  // for a hand-off nobody needs, a harmless spurious wake-up. Acquire and
  // release of the driver are ordered by Driver::held_, so a new holder's
  // clear never precedes the previous holder's on_release.
  std::atomic<bool> unattended_{false};
  std::atomic<std::uint64_t> fired_{0};  // statistics; relaxed

  // Paused clock: now = base_ + (paused ? 0 : steady_clock::now() - unfrozen_).
  // Only the fast-path flag is read without the lock; it is set before any
  // pause takes effect and never cleared (a resumed clock keeps its offset).
  std::atomic<bool> paused_{false};
  std::atomic<bool> virtual_{false};  // the clock was ever paused
  Instant base_{};                    // guarded by lock_
  Instant unfrozen_{};                // guarded by lock_
};

}  // namespace volt::detail
