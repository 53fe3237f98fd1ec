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

volt::Task<void> rwlock_reader(volt::RwLock<std::uint64_t>* lock, std::uint64_t rounds) {
  for (std::uint64_t i = 0; i < rounds; ++i) {
    auto guard = co_await lock->read();
    black_box(*guard);
  }
}

volt::Task<void> rwlock_writer(volt::RwLock<std::uint64_t>* lock, std::uint64_t rounds) {
  for (std::uint64_t i = 0; i < rounds; ++i) {
    auto guard = co_await lock->write();
    ++*guard;
  }
}

// 4 reader tasks and 2 writer tasks, ops/6 acquisitions each; readers read
// the value, writers increment it.
volt::Task<Sample> rwlock_contended(std::uint64_t ops) {
  constexpr std::uint64_t kReaders = 4;
  constexpr std::uint64_t kTasks = kReaders + 2;
  Meter meter = Meter::start();
  auto lock = std::make_unique<volt::RwLock<std::uint64_t>>(0);
  std::array<volt::JoinHandle<void>, kTasks> tasks;
  std::uint64_t writes = 0;
  for (std::uint64_t i = 0; i < kTasks; ++i) {
    const std::uint64_t rounds = share(ops, kTasks, i);
    if (i < kReaders) {
      tasks[i] = volt::spawn(rwlock_reader(lock.get(), rounds));
    } else {
      tasks[i] = volt::spawn(rwlock_writer(lock.get(), rounds));
      writes += rounds;
    }
  }
  for (auto& task : tasks)
    co_await task;
  Sample sample = meter.stop();
  auto guard = co_await lock->read();
  if (*guard != writes) throw std::logic_error("rwlock_contended: lost increments");
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

volt::Task<void> barrier_worker(volt::Barrier* barrier, std::atomic<std::uint64_t>* leaders,
                                std::uint64_t generations) {
  for (std::uint64_t i = 0; i < generations; ++i)
    if ((co_await barrier->wait()).is_leader()) leaders->fetch_add(1, std::memory_order_relaxed);
}

// 4 tasks, each waits on the same 4-party barrier ops/4 times (ops/4
// generations; ns_per_op is per wait).
volt::Task<Sample> barrier_async(std::uint64_t ops) {
  constexpr std::uint64_t kTasks = 4;
  if (ops % kTasks != 0) throw std::logic_error("barrier_async: ops not a multiple of 4");
  const std::uint64_t generations = ops / kTasks;
  Meter meter = Meter::start();
  auto barrier = std::make_unique<volt::Barrier>(kTasks);
  std::atomic<std::uint64_t> leaders{0};
  std::array<volt::JoinHandle<void>, kTasks> tasks;
  for (auto& task : tasks)
    task = volt::spawn(barrier_worker(barrier.get(), &leaders, generations));
  for (auto& task : tasks)
    co_await task;
  Sample sample = meter.stop();
  if (leaders.load() != generations) throw std::logic_error("barrier_async: wrong leader count");
  co_return sample;
}

struct NotifyTurns {
  volt::Notify ping;
  volt::Notify pong;
};

volt::Task<void> notify_server(NotifyTurns* turns, std::uint64_t rounds) {
  for (std::uint64_t i = 0; i < rounds; ++i) {
    co_await turns->ping.notified();
    turns->pong.notify_one();
  }
}

volt::Task<void> notify_client(NotifyTurns* turns, std::uint64_t rounds) {
  for (std::uint64_t i = 0; i < rounds; ++i) {
    turns->ping.notify_one();
    co_await turns->pong.notified();
  }
}

// 2 tasks bounce a turn through two Notifys; one op is one round trip.
volt::Task<Sample> notify_pingpong(std::uint64_t ops) {
  Meter meter = Meter::start();
  auto turns = std::make_unique<NotifyTurns>();
  std::array<volt::JoinHandle<void>, 2> tasks;
  tasks[0] = volt::spawn(notify_server(turns.get(), ops));
  tasks[1] = volt::spawn(notify_client(turns.get(), ops));
  for (auto& task : tasks)
    co_await task;
  co_return meter.stop();
}

constexpr Bench kBenches[] = {
    task_bench("mutex_contended", 10'000, mutex_contended),
    task_bench("rwlock_contended", 10'000, rwlock_contended),
    task_bench("semaphore_contended", 10'000, semaphore_contended),
    task_bench("barrier_async", 10'000, barrier_async),
    task_bench("notify_pingpong", 10'000, notify_pingpong),
};

}  // namespace

std::span<const Bench> contended_benches() {
  return kBenches;
}

}  // namespace volt_bench
