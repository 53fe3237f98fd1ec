// bench/contended.cpp: Tier 3, async primitives under contention on a
// multi-thread runtime; the same work as the Tokio side's contended.rs.
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

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

volt::Task<void> oneshot_sender(volt::oneshot::Sender<std::uint64_t> tx, std::uint64_t value) {
  if (tx.send(value)) throw std::logic_error("oneshot_async: the parent is waiting");
  co_return;
}

// ops times, one after the other: spawn a task that sends on a oneshot, then
// await the receiver. The sender tasks are detached: awaiting the receiver
// is the op.
volt::Task<Sample> oneshot_async(std::uint64_t ops) {
  Meter meter = Meter::start();
  for (std::uint64_t value = 0; value < ops; ++value) {
    auto [tx, rx] = volt::oneshot::channel<std::uint64_t>();
    (void)volt::spawn(oneshot_sender(std::move(tx), value));  // detached
    const std::optional<std::uint64_t> received = co_await rx;
    if (received != value) throw std::logic_error("oneshot_async: the task sends before it ends");
  }
  co_return meter.stop();
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

volt::Task<void> mpmc_producer(volt::mpmc::Sender<std::uint64_t> tx, std::uint64_t count) {
  for (std::uint64_t value = 0; value < count; ++value) {
    volt::SendResult<std::uint64_t> sent = co_await tx.send(std::uint64_t{value});
    if (!sent) throw std::logic_error("channel: consumers are alive");
  }
}

volt::Task<std::uint64_t> mpmc_consumer(volt::mpmc::Receiver<std::uint64_t> rx) {
  std::uint64_t received = 0;
  for (;;) {
    std::optional<std::uint64_t> value = co_await rx.recv();
    if (!value) break;
    ++received;
  }
  co_return received;
}

// Bounded channel of capacity 1,000; 4 producers send ops/4 values each, 4
// consumers receive until the channel is closed and drained.
volt::Task<Sample> channel_mpmc(std::uint64_t ops) {
  constexpr std::uint64_t kProducers = 4;
  constexpr std::uint64_t kConsumers = 4;
  Meter meter = Meter::start();
  std::array<volt::JoinHandle<void>, kProducers> producers;
  std::array<volt::JoinHandle<std::uint64_t>, kConsumers> consumers;
  {
    auto [tx, rx] = volt::mpmc::channel<std::uint64_t>(1000);
    for (std::uint64_t i = 0; i < kProducers; ++i)
      producers[i] = volt::spawn(mpmc_producer(tx, share(ops, kProducers, i)));
    for (std::uint64_t i = 0; i < kConsumers; ++i)
      consumers[i] = volt::spawn(mpmc_consumer(rx));
  }  // only the producers' copies keep the channel open
  for (auto& producer : producers)
    co_await producer;
  std::uint64_t received = 0;
  for (auto& consumer : consumers)
    received += co_await consumer;
  Sample sample = meter.stop();
  if (received != ops) throw std::logic_error("channel_mpmc: lost values");
  co_return sample;
}

// channel_mpmc with two-phase sends: each producer waits for a Permit
// (reserve) and sends through it. Volt-only row (Tokio has reserve too, but
// the comparison harness has no such row).
volt::Task<void> mpmc_reserve_producer(volt::mpmc::Sender<std::uint64_t> tx, std::uint64_t count) {
  for (std::uint64_t value = 0; value < count; ++value) {
    volt::Expected<volt::mpmc::Permit<std::uint64_t>> permit = co_await tx.reserve();
    if (!permit) throw std::logic_error("channel: consumers are alive");
    if (!permit->send(std::uint64_t{value})) throw std::logic_error("channel: permit refused");
  }
}

volt::Task<Sample> channel_mpmc_reserve(std::uint64_t ops) {
  constexpr std::uint64_t kProducers = 4;
  constexpr std::uint64_t kConsumers = 4;
  Meter meter = Meter::start();
  std::array<volt::JoinHandle<void>, kProducers> producers;
  std::array<volt::JoinHandle<std::uint64_t>, kConsumers> consumers;
  {
    auto [tx, rx] = volt::mpmc::channel<std::uint64_t>(1000);
    for (std::uint64_t i = 0; i < kProducers; ++i)
      producers[i] = volt::spawn(mpmc_reserve_producer(tx, share(ops, kProducers, i)));
    for (std::uint64_t i = 0; i < kConsumers; ++i)
      consumers[i] = volt::spawn(mpmc_consumer(rx));
  }
  for (auto& producer : producers)
    co_await producer;
  std::uint64_t received = 0;
  for (auto& consumer : consumers)
    received += co_await consumer;
  Sample sample = meter.stop();
  if (received != ops) throw std::logic_error("channel_mpmc_reserve: lost values");
  co_return sample;
}

// channel_mpmc with batch receives: each consumer takes up to 64 values per
// wake-up (recv_many). Volt-only row.
volt::Task<std::uint64_t> mpmc_batch_consumer(volt::mpmc::Receiver<std::uint64_t> rx) {
  std::uint64_t received = 0;
  std::vector<std::uint64_t> batch;
  batch.reserve(64);
  for (;;) {
    batch.clear();
    const std::size_t n = co_await rx.recv_many(batch, 64);
    if (n == 0) break;
    received += n;
  }
  co_return received;
}

volt::Task<Sample> channel_mpmc_recv_many(std::uint64_t ops) {
  constexpr std::uint64_t kProducers = 4;
  constexpr std::uint64_t kConsumers = 4;
  Meter meter = Meter::start();
  std::array<volt::JoinHandle<void>, kProducers> producers;
  std::array<volt::JoinHandle<std::uint64_t>, kConsumers> consumers;
  {
    auto [tx, rx] = volt::mpmc::channel<std::uint64_t>(1000);
    for (std::uint64_t i = 0; i < kProducers; ++i)
      producers[i] = volt::spawn(mpmc_producer(tx, share(ops, kProducers, i)));
    for (std::uint64_t i = 0; i < kConsumers; ++i)
      consumers[i] = volt::spawn(mpmc_batch_consumer(rx));
  }
  for (auto& producer : producers)
    co_await producer;
  std::uint64_t received = 0;
  for (auto& consumer : consumers)
    received += co_await consumer;
  Sample sample = meter.stop();
  if (received != ops) throw std::logic_error("channel_mpmc_recv_many: lost values");
  co_return sample;
}

volt::Task<std::uint64_t> spsc_consumer(volt::mpmc::Receiver<std::uint64_t> rx) {
  std::uint64_t received = 0;
  for (;;) {
    std::optional<std::uint64_t> value = co_await rx.recv();
    if (!value) break;
    if (*value != received) throw std::logic_error("channel_spsc_async: out of order");
    ++received;
  }
  co_return received;
}

// 1 producer, 1 consumer, capacity 128.
volt::Task<Sample> channel_spsc_async(std::uint64_t ops) {
  Meter meter = Meter::start();
  volt::JoinHandle<void> producer;
  volt::JoinHandle<std::uint64_t> consumer;
  {
    auto [tx, rx] = volt::mpmc::channel<std::uint64_t>(128);
    producer = volt::spawn(mpmc_producer(std::move(tx), ops));
    consumer = volt::spawn(spsc_consumer(std::move(rx)));
  }
  co_await producer;
  const std::uint64_t received = co_await consumer;
  Sample sample = meter.stop();
  if (received != ops) throw std::logic_error("channel_spsc_async: lost values");
  co_return sample;
}

// ---- unbounded MPSC: one value per wake-up, or a batch (volt-only rows) ----

volt::Task<void> unbounded_producer(volt::mpsc::UnboundedSender<std::uint64_t> tx,
                                    std::uint64_t count) {
  for (std::uint64_t value = 0; value < count; ++value) {
    if (!tx.send(std::uint64_t{value})) throw std::logic_error("unbounded: the receiver is alive");
    if (value % 32 == 31) co_await volt::yield_now();  // let the receiver run meanwhile
  }
}

volt::Task<std::uint64_t> unbounded_consumer(volt::mpsc::UnboundedReceiver<std::uint64_t> rx,
                                             std::size_t batch_limit) {
  std::uint64_t received = 0;
  std::vector<std::uint64_t> batch;
  batch.reserve(batch_limit);
  for (;;) {
    if (batch_limit == 0) {
      std::optional<std::uint64_t> value = co_await rx.recv();
      if (!value) break;
      black_box(*value);
      ++received;
      continue;
    }
    batch.clear();
    const std::size_t n = co_await rx.recv_many(batch, batch_limit);
    if (n == 0) break;
    for (std::uint64_t value : batch)
      black_box(value);
    received += n;
  }
  co_return received;
}

// 4 producers (yielding every 32 sends), 1 consumer; batch_limit 0: recv(),
// otherwise recv_many(batch, batch_limit).
volt::Task<Sample> unbounded_mpsc(std::uint64_t ops, std::size_t batch_limit) {
  constexpr std::uint64_t kProducers = 4;
  Meter meter = Meter::start();
  std::array<volt::JoinHandle<void>, kProducers> producers;
  volt::JoinHandle<std::uint64_t> consumer;
  {
    auto [tx, rx] = volt::mpsc::unbounded_channel<std::uint64_t>();
    for (std::uint64_t i = 0; i < kProducers; ++i)
      producers[i] = volt::spawn(unbounded_producer(tx, share(ops, kProducers, i)));
    consumer = volt::spawn(unbounded_consumer(std::move(rx), batch_limit));
  }  // only the producers' copies keep the channel open
  for (auto& producer : producers)
    co_await producer;
  const std::uint64_t received = co_await consumer;
  Sample sample = meter.stop();
  if (received != ops) throw std::logic_error("unbounded_mpsc: lost values");
  co_return sample;
}

volt::Task<Sample> channel_unbounded_recv(std::uint64_t ops) {
  return unbounded_mpsc(ops, 0);
}
volt::Task<Sample> channel_unbounded_recv_many(std::uint64_t ops) {
  return unbounded_mpsc(ops, 64);
}

constexpr Bench kBenches[] = {
    task_bench("mutex_contended", 10'000, mutex_contended),
    task_bench("rwlock_contended", 10'000, rwlock_contended),
    task_bench("semaphore_contended", 10'000, semaphore_contended),
    task_bench("channel_mpmc", 10'000, channel_mpmc),
    task_bench("channel_mpmc_recv_many", 10'000, channel_mpmc_recv_many),
    task_bench("channel_mpmc_reserve", 10'000, channel_mpmc_reserve),
    task_bench("channel_spsc_async", 10'000, channel_spsc_async),
    task_bench("oneshot_async", 10'000, oneshot_async),
    task_bench("barrier_async", 10'000, barrier_async),
    task_bench("notify_pingpong", 10'000, notify_pingpong),
    task_bench("channel_unbounded_recv", 100'000, channel_unbounded_recv),
    task_bench("channel_unbounded_recv_many", 100'000, channel_unbounded_recv_many),
};

}  // namespace

std::span<const Bench> contended_benches() {
  return kBenches;
}

}  // namespace volt_bench
