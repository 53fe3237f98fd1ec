// bench/sync_fast.cpp: Tier 1, the synchronisation fast paths (single
// thread, no runtime, non-waiting API); the same work as
// shared/bench/tokio/src/sync_fast.rs. Rows land as their primitives do:
// semaphore_try_acquire now, the others with the rest of issue 4.
#include <cstdint>
#include <stdexcept>

#include "harness.hpp"

namespace volt_bench {
namespace {

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
    plain_bench("semaphore_try_acquire", 1'000'000, semaphore_try_acquire),
};

}  // namespace

std::span<const Bench> sync_fast_benches() {
  return kBenches;
}

}  // namespace volt_bench
