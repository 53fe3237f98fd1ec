#include "runtime/scheduler/parker.hpp"

#include <thread>

#include "volt/detail/futex.hpp"

namespace volt::detail {

bool Parker::park(Driver& driver) noexcept {
  // A wake-up often follows within microseconds (a burst of remote spawns).
  // Yielding a few times first lets it land while we are still kEmpty, so
  // neither side makes a futex or eventfd system call. 3, measured on
  // spawn_many_remote.
  //
  // Not before the driver while I/O sources are registered: then the likely
  // wake-up is an I/O event, which the yields cannot see (it is already
  // queued in epoll, or about to be) and epoll_wait returns at once for.
  // The yields measured as 6 sched_yield calls per tcp_echo_rtt round trip
  // and a quarter of its time.
  const bool io = driver.has_io_sources();
  if (!io && consumed_after_yields()) return false;
  if (driver.try_acquire()) {
    park_on_driver(driver);
    return driver.release();
  }
  if (io && consumed_after_yields()) return false;
  return park_on_futex(driver, io);
}

bool Parker::consumed_after_yields() noexcept {
  for (int i = 0; i < kYieldsBeforeSleep; ++i) {
    // acquire: pairs with the release swap in unpark(), so whatever the waker
    // published (queued tasks, claim of this worker) is visible once we return.
    std::uint32_t expected = kNotified;
    if (state_.compare_exchange_strong(expected, kEmpty, std::memory_order_acquire)) return true;
    std::this_thread::yield();
  }
  return false;
}

bool Parker::park_on_futex(Driver& driver, bool io) noexcept {
  std::uint32_t expected = kEmpty;
  if (!state_.compare_exchange_strong(expected, kParkedFutex, std::memory_order_acq_rel)) {
    // Only unpark() changes the state under us: it is kNotified. Consume it.
    state_.exchange(kEmpty, std::memory_order_acquire);
    return false;
  }
  // The standby (driver.hpp, "An unattended driver"): only while I/O
  // sources are registered, and only one sleeper at a time.
  bool standby = io && driver.claim_standby();
  std::uint32_t last_turns = driver.turns();
  int quiet = 0;
  for (;;) {
    if (standby) {
      futex_wait_for(&state_, kParkedFutex, Driver::kStandbyCheckNs);
    } else {
      futex_wait(&state_, kParkedFutex);
    }
    expected = kNotified;
    if (state_.compare_exchange_strong(expected, kEmpty, std::memory_order_acquire)) break;
    // Still kParkedFutex: a spurious return, or the standby's timeout.
    if (!standby) continue;
    const std::uint32_t turns = driver.turns();
    if (turns != last_turns) {  // someone took a turn since our last look
      last_turns = turns;
      quiet = 0;
      continue;
    }
    if (driver.held()) {
      // Held with no turn: its holder sleeps in epoll_wait, the runtime is
      // idle. Stop the timed looks; the holder will hand the driver off
      // when it leaves (release() sees no standby).
      if (++quiet >= Driver::kStandbyQuietChecks) {
        driver.give_up_standby();
        standby = false;
        // A holder that left between our look and the give-up may have read
        // the standby as present and not handed the driver off: look again
        // (the Dekker pair of Driver::release).
        if (!driver.held_after_give_up()) {
          standby = driver.claim_standby();
          last_turns = driver.turns();
          quiet = 0;
        }
      }
      continue;
    }
    // Released, and no turn for a whole period: its last holder is busy
    // running tasks. Take the driver over. Leave kParkedFutex first (an
    // unpark meanwhile left kNotified: consume it and return as woken).
    expected = kParkedFutex;
    if (!state_.compare_exchange_strong(expected, kEmpty, std::memory_order_acq_rel)) {
      state_.exchange(kEmpty, std::memory_order_acquire);
      break;
    }
    driver.give_up_standby();
    if (driver.try_acquire()) {
      takeovers_.fetch_add(1, std::memory_order_relaxed);
      park_on_driver(driver);
      return driver.release();
    }
    // Someone else took it first: the driver is attended. Sleep again,
    // standby if the role is still free.
    expected = kEmpty;
    if (!state_.compare_exchange_strong(expected, kParkedFutex, std::memory_order_acq_rel)) {
      state_.exchange(kEmpty, std::memory_order_acquire);
      return false;
    }
    standby = driver.claim_standby();
    last_turns = driver.turns();
    quiet = 0;
  }
  if (!standby) return false;
  // Claimed for work: stop watching. A holder that left meanwhile may have
  // counted on us (see above): then ask our caller to hand the driver to
  // another sleeper.
  driver.give_up_standby();
  return !driver.held_after_give_up();
}

void Parker::park_on_driver(Driver& driver) noexcept {
  std::uint32_t expected = kEmpty;
  if (!state_.compare_exchange_strong(expected, kParkedDriver, std::memory_order_acq_rel)) {
    state_.exchange(kEmpty, std::memory_order_acquire);
    return;
  }
  driver.park(true);
  // Woken by unpark (kNotified), by an event or the timeout (kParkedDriver):
  // either way we are awake now and consume any pending notification.
  state_.exchange(kEmpty, std::memory_order_acquire);
}

void Parker::unpark(Driver& driver) noexcept {
  // release: pairs with the acquire in park(); see there.
  switch (state_.exchange(kNotified, std::memory_order_release)) {
    case kParkedFutex:
      futex_wake(&state_, 1);
      break;
    case kParkedDriver:
      driver.unpark();
      break;
    default:
      break;
  }
}

}  // namespace volt::detail
