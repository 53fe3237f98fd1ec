// Driver: the epoll instance that the one idle worker blocks in.
//
// Beyond the seed (which parks every idle worker on a futex with a 10 ms
// timeout and polls I/O from every worker with a try-lock), the first worker to
// go idle acquires the driver and blocks in epoll_wait with the next timer
// deadline as its timeout; the other idle workers park on their futex. Waking
// the driver's holder is a write to an eventfd registered with the epoll set.
// An idle runtime therefore makes no system calls at all, and a readiness
// event or a timer is seen when it happens, not at the next 10 ms tick.
//
// Ownership: acquire()/release() is a try-lock; only the holder calls park().
// unpark() may be called from any thread at any time; an unpark that arrives
// while nobody is in epoll_wait leaves the eventfd's edge on epoll's ready
// list, so the next park returns at once (a harmless spurious wake-up, never
// a lost one).
//
// Timers: the driver owns the TimeDriver. A blocking park sleeps until the
// next timer deadline (TimeDriver::park_timeout_ms, which also arranges for an
// earlier registration to write the eventfd), and every park, blocking or
// not, fires the timers that came due before returning. So whoever holds the
// driver also runs the timer wheel, and a busy runtime's maintenance poll
// (park(false)) keeps timers firing when no worker is idle.
//
// An unattended driver. A holder that leaves the driver to run tasks may be
// away for as long as its tasks run (a 400 ms computation), and readiness
// events then wait in epoll while a sibling sleeps on its futex. So, while
// I/O sources are registered, one futex sleeper is the standby (Parker):
// it sleeps with a kStandbyCheckNs timeout and, when it finds the driver
// released and no turn taken since its previous look, takes the driver and
// blocks in it. An event is then dispatched within about two periods of its
// arrival whatever the other workers run. When the driver has been held with
// no turn for kStandbyQuietChecks looks (its holder is asleep in epoll_wait:
// the runtime is idle), the standby gives up the role and sleeps
// indefinitely, so an idle runtime makes no wake-ups; release() then reports
// that the leaving holder must hand the driver to a sleeper, as for timers.
// Nothing of this runs without registered I/O sources (a CPU-bound runtime
// pays no timed wake-ups), and while it runs the standby costs one timed
// futex return per period on a core that would otherwise be idle.
//
// I/O: every socket's descriptor is registered once (IoSource, io_source.hpp),
// edge-triggered for both directions; epoll_event.data.ptr is its IoSource
// (nullptr tags the wake-up eventfd). Each park is one turn with its own
// tick, stamped into the readiness it sets (see IoSource for why).
#pragma once

#include <atomic>
#include <cstdint>
#include <system_error>

#include "time/time_driver.hpp"
#include "volt/detail/spin_lock.hpp"

namespace volt::detail {

class IoSource;

class Driver {
 public:
  explicit Driver(bool start_paused = false);
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // acquire: pairs with the release in release(): the new holder sees what the
  // previous holder did with the driver's state.
  bool try_acquire() noexcept {
    if (held_.exchange(true, std::memory_order_acquire)) return false;
    time_.on_acquire();
    return true;
  }
  // Returns true if the caller must hand the driver to a sleeping worker,
  // since it will not come back soon: timers are pending (see TimeDriver), or
  // I/O sources are registered and no standby watches the driver (see "An
  // unattended driver").
  [[nodiscard]] bool release() noexcept {
    const bool timers_pending = time_.on_release();
    held_.store(false, std::memory_order_release);
    // acquire: pairs with the release in give_up_standby(); a stale true
    // only delays the hand-off until the standby's next look.
    return timers_pending || (has_io_sources() && !standby_.load(std::memory_order_acquire));
  }

  // For the standby (Parker). relaxed, all three: they are hints about
  // progress; a stale value delays a take-over by one period, and taking
  // the driver goes through try_acquire, which orders the holders.
  std::uint32_t turns() const noexcept { return turns_.load(std::memory_order_relaxed); }
  bool held() const noexcept { return held_.load(std::memory_order_relaxed); }
  // True if the caller is now the standby (there is at most one).
  bool claim_standby() noexcept {
    // acq_rel: pairs with give_up_standby's release; an RMW so two sleepers
    // cannot both become the standby.
    return !standby_.exchange(true, std::memory_order_acq_rel);
  }
  void give_up_standby() noexcept { standby_.store(false, std::memory_order_release); }
  static constexpr std::int64_t kStandbyCheckNs = 1'000'000;
  static constexpr int kStandbyQuietChecks = 16;

  // Holder only. With `block`, sleeps until unparked, an event, or the next
  // timer deadline; without, only polls. Then dispatches whatever became
  // ready and fires due timers.
  void park(bool block) noexcept;

  // Any thread. Makes the current or next park() return.
  void unpark() noexcept;

  TimeDriver& time() noexcept { return time_; }

  // Any thread. epoll_ctl ADD of the source's descriptor (edge-triggered,
  // readable, writable, peer hang-up).
  std::error_code add(IoSource& source) noexcept;
  // Any thread. epoll_ctl DEL: once it returns, no later epoll_wait reports
  // the descriptor.
  void remove(int fd) noexcept;
  // Whether any I/O source is registered (a heuristic for the parker: see
  // Parker::park). relaxed: a stale answer only costs some latency once.
  bool has_io_sources() const noexcept { return sources_.load(std::memory_order_relaxed) != 0; }
  // Any thread, after remove(). The source is freed at the next turn (an
  // event for it may be being dispatched right now by the holder).
  void retire(IoSource* source) noexcept;

 private:
  void free_retired() noexcept;

  TimeDriver time_;
  int epoll_fd_ = -1;
  int event_fd_ = -1;
  std::atomic<bool> held_{false};
  // Holder only (held_'s acquire/release orders successive holders).
  std::uint32_t tick_ = 0;
  // tick_, published for the standby (a hint: see turns()).
  std::atomic<std::uint32_t> turns_{0};
  std::atomic<bool> standby_{false};
  std::atomic<std::uint64_t> sources_{0};  // registered I/O sources
  SpinLock retired_lock_;
  IoSource* retired_ = nullptr;  // guarded by retired_lock_
};

}  // namespace volt::detail
