// bench/sync_fast.cpp: Tier 1, the synchronisation fast paths (single
// thread, no runtime, non-waiting API); the same work as
// the Tokio side's sync_fast.rs. Rows land as their primitives do:
// mutex and semaphore first, the others as their primitives landed.
#include <cstdint>
#include <stdexcept>

#include "harness.hpp"

namespace volt_bench {
namespace {

// try_lock succeeds, then unlock (the guard dropped).
Sample mutex_try_lock(std::uint64_t ops) {
  volt::Mutex<std::uint64_t> mutex(0);
  Meter meter = Meter::start();
  for (std::uint64_t i = 0; i < ops; ++i) {
    auto guard = mutex.try_lock();
    if (!guard) throw std::logic_error("mutex_try_lock: locked");
    black_box(**guard);
  }
  return meter.stop();
}

// try_read succeeds, then unlock (the guard dropped).
Sample rwlock_try_read(std::uint64_t ops) {
  volt::RwLock<std::uint64_t> lock(0);
  Meter meter = Meter::start();
  for (std::uint64_t i = 0; i < ops; ++i) {
    auto guard = lock.try_read();
    if (!guard) throw std::logic_error("rwlock_try_read: locked");
    black_box(**guard);
  }
  return meter.stop();
}

// try_write succeeds, then unlock (the guard dropped).
Sample rwlock_try_write(std::uint64_t ops) {
  volt::RwLock<std::uint64_t> lock(0);
  Meter meter = Meter::start();
  for (std::uint64_t i = 0; i < ops; ++i) {
    auto guard = lock.try_write();
    if (!guard) throw std::logic_error("rwlock_try_write: locked");
    black_box(**guard);
  }
  return meter.stop();
}

// try_acquire(1) succeeds, then the permit is released (guard dropped).
Sample semaphore_try_acquire(std::uint64_t ops) {
  volt::Semaphore semaphore(1);
  Meter meter = Meter::start();
  for (std::uint64_t i = 0; i < ops; ++i) {
    std::optional<volt::SemaphorePermit> permit = semaphore.try_acquire(1);
    if (!permit) throw std::logic_error("semaphore_try_acquire: no permit");
    black_box(permit->permits());
  }
  return meter.stop();
}

// get() on an initialised cell; the value is read and kept alive. As
// Tokio's black_box(&cell): the cell's address passes through an opaque
// register each time, so the flag and the value are loaded every iteration.
// (A black_box with a memory clobber instead made the compiler reload the
// flag from its stack slot, a loop this AMD core ran at 1 or 2.7 cycles an
// iteration depending on the process's stack address.)
Sample oncecell_get(std::uint64_t ops) {
  volt::OnceCell<std::uint64_t> cell;
  if (!cell.set(42)) throw std::logic_error("oncecell_get: fresh cell refused a value");
  volt::OnceCell<std::uint64_t>* cell_ptr = &cell;
  Meter meter = Meter::start();
  for (std::uint64_t i = 0; i < ops; ++i) {
    asm volatile("" : "+r"(cell_ptr));
    const std::uint64_t* value = cell_ptr->get();
    if (!value) throw std::logic_error("oncecell_get: not initialised");
    std::uint64_t v = *value;
    asm volatile("" : : "r"(v));
  }
  return meter.stop();
}

// A fresh cell, set(value), get().
Sample oncecell_set(std::uint64_t ops) {
  Meter meter = Meter::start();
  for (std::uint64_t value = 0; value < ops; ++value) {
    volt::OnceCell<std::uint64_t> cell;
    if (!cell.set(value)) throw std::logic_error("oncecell_set: fresh cell refused a value");
    black_box(cell.get());
  }
  return meter.stop();
}

// notify_one() with no waiter stores the permit; a non-waiting poll of a new
// Notified (enable(), Tokio's `enable`) consumes it.
Sample notify_one_permit(std::uint64_t ops) {
  volt::Notify notify;
  Meter meter = Meter::start();
  for (std::uint64_t i = 0; i < ops; ++i) {
    notify.notify_one();
    volt::Notify::Notified notified = notify.notified();
    if (!notified.enable()) throw std::logic_error("notify_one_permit: permit not consumed");
  }
  return meter.stop();
}

constexpr Bench kBenches[] = {
    plain_bench("mutex_try_lock", 1'000'000, mutex_try_lock),
    plain_bench("rwlock_try_read", 1'000'000, rwlock_try_read),
    plain_bench("rwlock_try_write", 1'000'000, rwlock_try_write),
    plain_bench("semaphore_try_acquire", 1'000'000, semaphore_try_acquire),
    plain_bench("oncecell_get", 1'000'000, oncecell_get),
    plain_bench("oncecell_set", 1'000'000, oncecell_set),
    plain_bench("notify_one_permit", 1'000'000, notify_one_permit),
};

}  // namespace

std::span<const Bench> sync_fast_benches() {
  return kBenches;
}

}  // namespace volt_bench
