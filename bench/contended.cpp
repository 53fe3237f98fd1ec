// bench/contended.cpp: Tier 3, async primitives under contention on a
// multi-thread runtime; the same work as shared/bench/tokio/src/contended.rs.
// Rows land as their primitives do: mutex and semaphore so far.
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>

#include "harness.hpp"

namespace volt_bench {
namespace {

volt::Task<void> mutex_worker(volt::Mutex<std::uint64_t>* counter, std::uint64_t rounds) {
  for (std::uint64_t i = 0; i < rounds; ++i) {
    auto guard = co_await counter->lock();
    ++*guard;
  }
}

// 4 tasks; each does ops/4 times: lock, increment a shared counter, unlock.
volt::Task<Sample> mutex_contended(std::uint64_t ops) {
  constexpr std::uint64_t kTasks = 4;
  Meter meter = Meter::start();
  auto counter = std::make_unique<volt::Mutex<std::uint64_t>>(0);
  std::array<volt::JoinHandle<void>, kTasks> tasks;
  for (std::uint64_t i = 0; i < kTasks; ++i)
    tasks[i] = volt::spawn(mutex_worker(counter.get(), share(ops, kTasks, i)));
  for (auto& task : tasks)
    co_await task;
  Sample sample = meter.stop();
  auto guard = co_await counter->lock();
  if (*guard != ops) throw std::logic_error("mutex_contended: lost increments");
  co_return sample;
}

volt::Task<void> semaphore_worker(volt::Semaphore* semaphore, std::atomic<std::uint64_t>* hits,
                                  std::uint64_t rounds) {
  for (std::uint64_t i = 0; i < rounds; ++i) {
    volt::Expected<volt::SemaphorePermit> permit = co_await semaphore->acquire(1);
    if (!permit) throw std::logic_error("semaphore_contended: closed");
    hits->fetch_add(1, std::memory_order_relaxed);
  }  // the permit is released when it goes out of scope
}

// 8 tasks share a semaphore of 2 permits: acquire(1), increment an atomic,
// release (the permit dropped).
volt::Task<Sample> semaphore_contended(std::uint64_t ops) {
  constexpr std::uint64_t kTasks = 8;
  Meter meter = Meter::start();
  auto semaphore = std::make_unique<volt::Semaphore>(2);
  std::atomic<std::uint64_t> hits{0};
  std::array<volt::JoinHandle<void>, kTasks> tasks;
  for (std::uint64_t i = 0; i < kTasks; ++i)
    tasks[i] = volt::spawn(semaphore_worker(semaphore.get(), &hits, share(ops, kTasks, i)));
  for (auto& task : tasks)
    co_await task;
  Sample sample = meter.stop();
  if (hits.load() != ops) throw std::logic_error("semaphore_contended: lost acquisitions");
  co_return sample;
}

constexpr Bench kBenches[] = {
    task_bench("mutex_contended", 10'000, mutex_contended),
    task_bench("semaphore_contended", 10'000, semaphore_contended),
};

}  // namespace

std::span<const Bench> contended_benches() {
  return kBenches;
}

}  // namespace volt_bench
