// bench/scheduler.cpp: Tier 4, the scheduler (workloads after Tokio's own
// rt_multi_threaded benchmarks; the same work as
// the Tokio side's scheduler.rs). Each iteration is timed whole, from
// the first spawn to the completion signal or the last join.
//
// Where Tokio uses tokio::sync::Notify for a completion signal, volt has no
// Notify yet: a volt::oneshot channel stands in. Its sender is used by exactly
// one party (the task that counts down to zero, or the end of the chain) and
// the waiting task does `co_await receiver`; like Notify::notify_one storing a
// permit, a send before the receiver waits is not lost.
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

// The payload of the oneshot channels: the signal carries no data (`()` in Rust).
struct Unit {};

// ---- spawn_many_local ----

// Counts finished tasks down; the last one wakes the task that waits. One per
// iteration (Tokio: Arc<Countdown> with a Notify).
class Countdown {
 public:
  Countdown(std::uint64_t count, volt::oneshot::Sender<Unit> finished)
      : remaining_(count), finished_(std::move(finished)) {}

  void count_down() {
    // Only the task that takes the count to zero touches the sender.
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) (void)finished_.send(Unit{});
  }

 private:
  std::atomic<std::uint64_t> remaining_;
  volt::oneshot::Sender<Unit> finished_;
};

volt::Task<void> count_down(std::shared_ptr<Countdown> countdown) {
  countdown->count_down();
  co_return;
}

// One task, running on a worker, spawns `ops` trivial tasks; each decrements
// a counter and the last one signals completion.
volt::Task<Sample> spawn_many_local(std::uint64_t ops) {
  Meter meter = Meter::start();
  auto [finished_tx, finished_rx] = volt::oneshot::channel<Unit>();
  auto countdown = std::make_shared<Countdown>(ops, std::move(finished_tx));
  for (std::uint64_t i = 0; i < ops; ++i)
    (void)volt::spawn(count_down(countdown));  // detached
  co_await finished_rx;
  co_return meter.stop();
}

// ---- spawn_many_remote ----

// The same countdown for a waiter that is a plain thread. Tokio's waiter
// thread::park()s until the last task unpark()s it; here the main thread
// waits on a 32-bit atomic (C++20 atomic wait/notify: a futex on Linux) and
// the last task sets it and notifies.
class Latch {
 public:
  explicit Latch(std::uint64_t count) : remaining_(count) {}

  void count_down() {
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      unparked_.store(1, std::memory_order_release);
      unparked_.notify_one();
    }
  }
  void wait() {
    while (remaining_.load(std::memory_order_acquire) != 0)
      unparked_.wait(0, std::memory_order_acquire);
  }

 private:
  std::atomic<std::uint64_t> remaining_;
  std::atomic<std::uint32_t> unparked_{0};
};

volt::Task<void> latch_count_down(std::shared_ptr<Latch> latch) {
  latch->count_down();
  co_return;
}

// Like spawn_many_local, but the tasks are spawned from a thread outside the
// runtime (the benchmark's main thread), which then waits until the last task
// wakes it.
Sample spawn_many_remote(volt::Runtime& runtime, std::uint64_t ops) {
  Meter meter = Meter::start();
  auto latch = std::make_shared<Latch>(ops);
  for (std::uint64_t i = 0; i < ops; ++i)
    (void)runtime.spawn(latch_count_down(latch));  // detached
  latch->wait();
  return meter.stop();
}

// ---- spawn_await ----

volt::Task<std::uint64_t> return_value(std::uint64_t value) {
  co_return value;
}

// Inside one task, serially: spawn a trivial task returning an int and await
// its join handle.
volt::Task<Sample> spawn_await(std::uint64_t ops) {
  Meter meter = Meter::start();
  for (std::uint64_t value = 0; value < ops; ++value) {
    std::uint64_t returned = co_await volt::spawn(return_value(value));
    black_box(returned);
  }
  co_return meter.stop();
}

// ---- yield_many ----

volt::Task<void> yielder(std::uint64_t yields) {
  for (std::uint64_t i = 0; i < yields; ++i)
    co_await volt::yield_now();
}

// 200 tasks each yield ops / 200 times (1,000 in a full run); ns_per_op is per yield.
volt::Task<Sample> yield_many(std::uint64_t ops) {
  constexpr std::uint64_t kTasks = 200;
  const std::uint64_t yields = ops / kTasks;
  Meter meter = Meter::start();
  std::vector<volt::JoinHandle<void>> tasks;  // Tokio: one Vec, collected
  tasks.reserve(kTasks);
  for (std::uint64_t i = 0; i < kTasks; ++i)
    tasks.push_back(volt::spawn(yielder(yields)));
  for (auto& task : tasks)
    co_await task;
  co_return meter.stop();
}

// ---- ping_pong ----

// The awaited values go into named locals on purpose: GCC 12.2 miscompiles a
// coroutine whose body declares no local variable and has a co_await inside an
// if/while condition (`if (!co_await rx) ...`): the frame is laid out 8 bytes
// off from the handle, so resuming it re-runs the initial suspend and the body
// never runs (it also writes past the frame). Fixed in later GCC releases;
// clang is not affected.
volt::Task<void> pinger(volt::oneshot::Sender<Unit> ping_tx,
                        volt::oneshot::Receiver<Unit> pong_rx) {
  if (ping_tx.send(Unit{})) throw std::logic_error("ping_pong: the ponger is gone");
  std::optional<Unit> pong = co_await pong_rx;
  if (!pong) throw std::logic_error("ping_pong: the ponger did not answer");
}

volt::Task<void> ponger(volt::oneshot::Receiver<Unit> ping_rx,
                        volt::oneshot::Sender<Unit> pong_tx) {
  std::optional<Unit> ping = co_await ping_rx;
  if (!ping) throw std::logic_error("ping_pong: the pinger did not send");
  if (pong_tx.send(Unit{})) throw std::logic_error("ping_pong: the pinger is gone");
}

// One op: two tasks exchange one message each way over two oneshots; wait for both.
volt::Task<void> exchange() {
  auto [ping_tx, ping_rx] = volt::oneshot::channel<Unit>();
  auto [pong_tx, pong_rx] = volt::oneshot::channel<Unit>();
  auto pinger_task = volt::spawn(pinger(std::move(ping_tx), std::move(pong_rx)));
  auto ponger_task = volt::spawn(ponger(std::move(ping_rx), std::move(pong_tx)));
  co_await pinger_task;
  co_await ponger_task;
}

volt::Task<void> lane(std::uint64_t rounds) {
  for (std::uint64_t i = 0; i < rounds; ++i)
    co_await volt::spawn(exchange());
}

// 4 lanes each run their share of the ops one after the other (one op: spawn
// an exchange task and await it), so 4 exchanges are in flight at once.
volt::Task<Sample> ping_pong(std::uint64_t ops) {
  constexpr std::uint64_t kLanes = 4;
  Meter meter = Meter::start();
  std::array<volt::JoinHandle<void>, kLanes> lanes{
      volt::spawn(lane(share(ops, kLanes, 0))), volt::spawn(lane(share(ops, kLanes, 1))),
      volt::spawn(lane(share(ops, kLanes, 2))), volt::spawn(lane(share(ops, kLanes, 3)))};
  for (auto& lane_task : lanes)
    co_await lane_task;
  co_return meter.stop();
}

// ---- chained_spawn ----

void spawn_chain(std::uint64_t remaining, volt::oneshot::Sender<Unit> done);

volt::Task<void> chain_link(std::uint64_t remaining, volt::oneshot::Sender<Unit> done) {
  spawn_chain(remaining, std::move(done));
  co_return;
}

// The completion sender moves down the chain (Tokio moves its Arc<Notify>).
void spawn_chain(std::uint64_t remaining, volt::oneshot::Sender<Unit> done) {
  if (remaining == 0) {
    (void)done.send(Unit{});
  } else {
    (void)volt::spawn(chain_link(remaining - 1, std::move(done)));  // detached
  }
}

// A task spawns the next task, which spawns the next, to depth `ops`; the
// last one signals completion.
volt::Task<Sample> chained_spawn(std::uint64_t ops) {
  Meter meter = Meter::start();
  auto [done_tx, done_rx] = volt::oneshot::channel<Unit>();
  spawn_chain(ops, std::move(done_tx));
  co_await done_rx;
  co_return meter.stop();
}

constexpr std::array kBenches{
    task_bench("spawn_many_local", 10'000, spawn_many_local),
    outside_bench("spawn_many_remote", 10'000, spawn_many_remote),
    task_bench("spawn_await", 10'000, spawn_await),
    task_bench("yield_many", 200 * 1'000, yield_many),
    task_bench("ping_pong", 1'000, ping_pong),
    task_bench("chained_spawn", 1'000, chained_spawn),
};

}  // namespace

std::span<const Bench> scheduler_benches() {
  return kBenches;
}

}  // namespace volt_bench
