// Parker: how one worker sleeps and is woken.
//
// State machine (one atomic word):
//   kEmpty        awake, no pending notification
//   kParkedFutex  asleep in futex_wait on the word
//   kParkedDriver asleep in the driver (epoll_wait), as the driver's holder
//   kNotified     a wake-up is pending; the next park() consumes it at once
//
//   park:   kNotified -> kEmpty (return at once)
//           kEmpty -> kParkedDriver (if the driver could be acquired) or
//           kParkedFutex, sleep, then swap to kEmpty
//           the standby (driver.hpp, "An unattended driver"):
//           kParkedFutex -> kEmpty -> kParkedDriver when it takes over an
//           unattended driver (each step a CAS: an unpark in between leaves
//           kNotified, consumed as a wake-up)
//   unpark: swap to kNotified; if the previous state was a parked one, wake
//           that sleeper (futex_wake, or the driver's eventfd)
// unpark uses an unconditional swap rather than a CAS so it never loops and
// never misses a concurrent park: whatever the state was, kNotified is left
// behind for the parker to consume, and the previous value says how to wake.
#pragma once

#include <atomic>
#include <cstdint>

#include "io/driver.hpp"

namespace volt::detail {

class Parker {
 public:
  // Sleeps until unpark() (spurious returns are possible; callers re-check).
  // If the driver is free, sleeps in it (until the next timer deadline at
  // most, firing due timers on the way out). Returns true if it left the
  // driver with timers pending (Driver::release): the caller hands it off.
  [[nodiscard]] bool park(Driver& driver) noexcept;
  void unpark(Driver& driver) noexcept;

 private:
  enum : std::uint32_t { kEmpty = 0, kParkedFutex = 1, kParkedDriver = 2, kNotified = 3 };
  static constexpr int kYieldsBeforeSleep = 3;
  // Yields up to kYieldsBeforeSleep times; true if a notification arrived
  // meanwhile (consumed).
  bool consumed_after_yields() noexcept;
  // Returns what park() returns: true after a standby's take-over (from
  // release()), or when a standby woken for work leaves the driver
  // unattended (the caller hands it off).
  bool park_on_futex(Driver& driver, bool io) noexcept;
  void park_on_driver(Driver& driver) noexcept;

  std::atomic<std::uint32_t> state_{kEmpty};

 public:
  // Times this worker, as the standby, took over an unattended driver
  // (relaxed: a statistic, read by tests).
  std::uint64_t takeovers() const noexcept { return takeovers_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> takeovers_{0};
};

}  // namespace volt::detail
