// Driver: the epoll instance that the one idle worker blocks in.
//
// Beyond the reference (which parks every idle worker on a futex with a 10 ms
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

// Something other than a socket whose descriptor becomes readable when it
// has completions to deliver (the io_uring file engine's ring). The driver
// calls reap() on the thread that holds it, after epoll reported the
// descriptor, like a socket's readiness.
class CompletionSource {
 public:
  virtual void reap() noexcept = 0;

 protected:
  ~CompletionSource() = default;
};

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
    // on_release stores held_ false inside the timer lock's critical section
    // that marks the driver unattended (a timer registered just after then
    // finds the driver free; see TimeDriver::on_release), that is:
    //   held_.store(false, std::memory_order_seq_cst);
    // seq_cst, that store and the load below: a Dekker pair with the
    // standby's give-up (give_up_standby, then held_after_give_up). Either we
    // see the standby gone and hand the driver off, or the standby sees the
    // driver released and stays the standby; with weaker orders both could
    // miss (the standby's last quiet look saw the driver held, we read
    // standby_ as still set, it gave up: nobody watched; found by SPIN,
    // park_protocol.pml -DNO_GIVE_UP_RECHECK). The store is also the release
    // that pairs with try_acquire's acquire.
    const bool timers_pending = time_.on_release(held_);
    return timers_pending || (has_io_sources() && !standby_.load(std::memory_order_seq_cst));
  }

  // For the standby (Parker). relaxed, all three: they are hints about
  // progress; a stale value delays a take-over by one period, and taking
  // the driver goes through try_acquire, which orders the holders.
  std::uint32_t turns() const noexcept { return turns_.load(std::memory_order_relaxed); }
  bool held() const noexcept { return held_.load(std::memory_order_relaxed); }
  // True if the caller is now the standby (there is at most one).
  bool claim_standby() noexcept {
    // acq_rel: pairs with give_up_standby's store; an RMW so two sleepers
    // cannot both become the standby.
    return !standby_.exchange(true, std::memory_order_acq_rel);
  }
  // seq_cst: the other half of release()'s Dekker pair (see there).
  void give_up_standby() noexcept { standby_.store(false, std::memory_order_seq_cst); }
  // After give_up_standby(): whether the driver is still held. false means a
  // holder left it and may have read standby_ before the give-up: the caller
  // must stay the standby (claim_standby again).
  bool held_after_give_up() const noexcept { return held_.load(std::memory_order_seq_cst); }
  // 10 ms, not 1: while the driver is attended (a busy server) every look
  // finds a turn and is pure cost, a wake-up that on a loaded machine
  // preempts a busy thread. At 1 ms, http_plaintext at 2 and 4 workers read
  // 1.02-1.04 of Tokio's time (inverse requests per second), at 10 ms
  // 0.99-1.01 (paired runs, one sitting; about 10-25 % fewer context
  // switches). The price: an event behind a long poll waits up to about two
  // periods, 20 ms (Tokio: until the poll ends). Two quiet looks: an idle
  // standby stops after 20 ms (16 looks of 1 ms took 16).
  static constexpr std::int64_t kStandbyCheckNs = 10'000'000;
  static constexpr int kStandbyQuietChecks = 2;

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
  // Registers `fd` (edge-triggered, readable) so that a park that sees it
  // readable calls source->reap(). For the file engine, once, before any
  // operation; unwatch_completions before the source goes.
  std::error_code watch_completions(int fd, CompletionSource* source) noexcept;
  void unwatch_completions(int fd) noexcept;
  // Operations in flight on a completion source count as registered I/O
  // sources for has_io_sources(), so an unattended driver gets a standby
  // while the kernel works for a task (see "An unattended driver").
  void add_pending(std::int64_t delta) noexcept {
    // relaxed: see add().
    sources_.fetch_add(static_cast<std::uint64_t>(delta), std::memory_order_relaxed);
  }
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
