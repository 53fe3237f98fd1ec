// bench/sync_fast.cpp: Tier 1, the synchronisation fast paths (single
// thread, no runtime, non-waiting API); the same work as
// shared/bench/tokio/src/sync_fast.rs. Rows land as their primitives do:
// mutex and semaphore so far, the others with the rest of issue 4.
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

constexpr Bench kBenches[] = {
    plain_bench("mutex_try_lock", 1'000'000, mutex_try_lock),
    plain_bench("semaphore_try_acquire", 1'000'000, semaphore_try_acquire),
};

}  // namespace

std::span<const Bench> sync_fast_benches() {
  return kBenches;
}

}  // namespace volt_bench
