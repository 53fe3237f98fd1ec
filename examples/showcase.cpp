// volt showcase: the first program to run.
//
// Spawns many thousands of tasks across the workers (a fan-out of fan-outs),
// awaits their join handles, shows an exception and a cancellation travelling
// through join handles, and prints what happened and the runtime's statistics.
//
//   ./build/release/examples/volt_showcase [tasks] [workers]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "volt/volt.hpp"

namespace {

// A little CPU work, so that tasks are worth stealing.
volt::Task<std::uint64_t> collatz_steps(std::uint64_t n) {
  std::uint64_t steps = 0;
  while (n != 1) {
    n = (n % 2) ? 3 * n + 1 : n / 2;
    ++steps;
  }
  co_return steps;
}

// Each batch spawns its own children and awaits them: tasks spawned from a
// worker go to its LIFO slot and are stolen by idle workers.
volt::Task<std::uint64_t> batch(std::uint64_t first, std::uint64_t count) {
  std::vector<volt::JoinHandle<std::uint64_t>> children;
  children.reserve(count);
  for (std::uint64_t n = first; n < first + count; ++n)
    children.push_back(volt::spawn(collatz_steps(n)));
  std::uint64_t total = 0;
  for (auto& child : children)
    total += co_await child;
  co_return total;
}

volt::Task<int> fails() {
  co_await volt::yield_now();
  throw std::runtime_error("this task failed on purpose");
}

volt::Task<void> waits_forever(volt::oneshot::Receiver<int> never) {
  (void)co_await never;
}

volt::Task<std::uint64_t> main_task(std::uint64_t tasks) {
  constexpr std::uint64_t kBatch = 1000;
  std::vector<volt::JoinHandle<std::uint64_t>> batches;
  for (std::uint64_t first = 1; first <= tasks; first += kBatch)
    batches.push_back(volt::spawn(batch(first, std::min(kBatch, tasks - first + 1))));
  std::uint64_t total = 0;
  for (auto& b : batches)
    total += co_await b;

  // An exception escaping a task reaches whoever awaits it.
  try {
    co_await volt::spawn(fails());
  } catch (const std::runtime_error& e) {
    std::printf("  caught from a task:   %s\n", e.what());
  }
  // Aborting a task destroys its frame where it waits; its handle says so.
  auto [tx, rx] = volt::oneshot::channel<int>();
  auto stuck = volt::spawn(waits_forever(std::move(rx)));
  co_await volt::yield_now();
  stuck.abort();
  try {
    co_await stuck;
  } catch (const volt::Error& e) {
    std::printf("  aborted task reports: %s\n", e.what());
  }
  co_return total;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t tasks = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 200'000;
  auto builder = volt::Runtime::Builder().thread_name("showcase");
  if (argc > 2) builder.worker_threads(std::strtoul(argv[2], nullptr, 10));
  volt::Runtime rt = builder.build();

  std::printf("volt showcase: %llu tasks\n", static_cast<unsigned long long>(tasks));
  auto start = std::chrono::steady_clock::now();
  std::uint64_t total = rt.block_on(main_task(tasks));
  auto elapsed =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start);
  std::printf("  Collatz steps of 1..%llu: %llu (%.1f ms)\n",
              static_cast<unsigned long long>(tasks), static_cast<unsigned long long>(total),
              elapsed.count());

  volt::RuntimeStats stats = rt.stats();
  std::printf(
      "\nruntime: %zu workers, %llu tasks spawned, %llu polls (%llu by the main thread "
      "while it waited in block_on), %llu stolen, %llu parks, %llu still alive\n",
      stats.num_workers, static_cast<unsigned long long>(stats.total_spawned),
      static_cast<unsigned long long>(stats.total_polled),
      static_cast<unsigned long long>(stats.blocked_thread_polls),
      static_cast<unsigned long long>(stats.total_stolen),
      static_cast<unsigned long long>(stats.total_parked),
      static_cast<unsigned long long>(stats.live_tasks));
  std::printf("%-8s %10s %10s %8s %8s %8s %9s %9s\n", "worker", "polled", "lifo hits", "steals",
              "stolen", "parked", "inject b.", "interval");
  for (std::size_t i = 0; i < stats.workers.size(); ++i) {
    const volt::WorkerStats& w = stats.workers[i];
    std::printf("%-8zu %10llu %10llu %8llu %8llu %8llu %9llu %9u\n", i,
                static_cast<unsigned long long>(w.tasks_polled),
                static_cast<unsigned long long>(w.lifo_hits),
                static_cast<unsigned long long>(w.steal_operations),
                static_cast<unsigned long long>(w.tasks_stolen),
                static_cast<unsigned long long>(w.times_parked),
                static_cast<unsigned long long>(w.global_batch_fetches), w.global_queue_interval);
  }
  return 0;
}
