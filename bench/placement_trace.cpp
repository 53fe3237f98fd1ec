// volt_placement_trace: which workers an iteration of a contended benchmark
// ran on, and which steals put it there.
//
// The contended rows (semaphore_contended, channel_mpmc, mutex_contended)
// run each iteration either with all their tasks on one worker or spread
// over several, and the spread iterations take several times longer
// (docs/benchmarks.md, "Last measured"). This tool runs one of those
// workloads iteration by iteration on a multi-thread runtime and prints,
// per iteration, its time an operation and, per worker, the RuntimeStats
// deltas that tell the two modes apart: polls, successful steals, tasks
// those steals moved, and parks.
//
//   volt_placement_trace [--workers N] [--iters N] [--ops N]
//                        [semaphore|channel|mutex]
//
// Built on request (`--target volt_placement_trace`). The workloads are
// those of bench/contended.cpp, written out again so that this tool needs
// nothing of the benchmark harness.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "volt/channel/mpmc.hpp"
#include "volt/sync/mutex.hpp"
#include "volt/sync/semaphore.hpp"
#include "volt/volt.hpp"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTasks = 8;  // semaphore: 8 tasks; channel: 4 senders + 4 receivers
constexpr int kMutexTasks = 4;

volt::Task<void> semaphore_task(volt::Semaphore* semaphore, std::uint64_t rounds) {
  for (std::uint64_t i = 0; i < rounds; ++i) {
    volt::Expected<volt::SemaphorePermit> permit = co_await semaphore->acquire(1);
    if (!permit) std::abort();
  }
}

volt::Task<void> mutex_task(volt::Mutex<std::uint64_t>* mutex, std::uint64_t rounds) {
  for (std::uint64_t i = 0; i < rounds; ++i) {
    auto guard = co_await mutex->lock();
    ++*guard;
  }
}

// The awaited values are bound to variables first: g++ 12 miscompiles a
// co_await in a condition of a coroutine without local variables (README,
// "Compiler issues (GCC 12)").
volt::Task<void> sender(volt::mpmc::Sender<std::uint64_t> tx, std::uint64_t count) {
  for (std::uint64_t value = 0; value < count; ++value) {
    volt::SendResult<std::uint64_t> sent = co_await tx.send(std::uint64_t{value});
    if (!sent) std::abort();
  }
}

volt::Task<void> receiver(volt::mpmc::Receiver<std::uint64_t> rx) {
  for (;;) {
    std::optional<std::uint64_t> value = co_await rx.recv();
    if (!value) break;
  }
}

// One iteration; returns its time an operation in ns.
volt::Task<double> iteration(std::string_view workload, std::uint64_t ops) {
  const Clock::time_point start = Clock::now();
  if (workload == "semaphore") {
    volt::Semaphore semaphore(2);
    std::array<volt::JoinHandle<void>, kTasks> tasks;
    for (auto& t : tasks)
      t = volt::spawn(semaphore_task(&semaphore, ops / kTasks));
    for (auto& t : tasks)
      co_await t;
  } else if (workload == "mutex") {
    volt::Mutex<std::uint64_t> mutex(0);
    std::array<volt::JoinHandle<void>, kMutexTasks> tasks;
    for (auto& t : tasks)
      t = volt::spawn(mutex_task(&mutex, ops / kMutexTasks));
    for (auto& t : tasks)
      co_await t;
  } else {
    std::array<volt::JoinHandle<void>, kTasks> tasks;
    {
      auto [tx, rx] = volt::mpmc::channel<std::uint64_t>(1000);
      for (int i = 0; i < kTasks / 2; ++i)
        tasks[i] = volt::spawn(sender(tx, ops / (kTasks / 2)));
      for (int i = kTasks / 2; i < kTasks; ++i)
        tasks[i] = volt::spawn(receiver(rx));
    }  // only the senders' copies keep the channel open
    for (auto& t : tasks)
      co_await t;
  }
  co_return std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
      static_cast<double>(ops);
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t workers = 2;
  int iters = 15;
  std::uint64_t ops = 10'000;
  std::string_view workload = "semaphore";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--workers" && i + 1 < argc) {
      workers = std::strtoul(argv[++i], nullptr, 10);
    } else if (arg == "--iters" && i + 1 < argc) {
      iters = std::atoi(argv[++i]);
    } else if (arg == "--ops" && i + 1 < argc) {
      ops = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "semaphore" || arg == "channel" || arg == "mutex") {
      workload = arg;
    } else {
      std::fprintf(stderr,
                   "usage: volt_placement_trace [--workers N] [--iters N] [--ops N] "
                   "[semaphore|channel|mutex]\n");
      return 2;
    }
  }
  if (workers == 0 || iters <= 0 || ops < kTasks) {
    std::fprintf(stderr,
                 "volt_placement_trace: --workers and --iters must be positive, "
                 "--ops at least 8\n");
    return 2;
  }
  volt::Runtime rt = volt::Runtime::Builder().worker_threads(workers).build();
  std::printf("%.*s, %zu worker(s), %llu operations an iteration\n",
              static_cast<int>(workload.size()), workload.data(), workers,
              static_cast<unsigned long long>(ops));
  std::printf("iter  ns/op | per worker: polls/steals/tasks stolen/parks\n");
  volt::RuntimeStats before = rt.stats();
  for (int it = 0; it < iters; ++it) {
    const double ns = rt.block_on(iteration(workload, ops));
    const volt::RuntimeStats after = rt.stats();
    std::printf("%4d %6.1f |", it, ns);
    for (std::size_t w = 0; w < after.workers.size(); ++w) {
      const volt::WorkerStats& a = after.workers[w];
      const volt::WorkerStats& b = before.workers[w];
      std::printf(" %5llu/%llu/%llu/%llu",
                  static_cast<unsigned long long>(a.tasks_polled - b.tasks_polled),
                  static_cast<unsigned long long>(a.steal_operations - b.steal_operations),
                  static_cast<unsigned long long>(a.tasks_stolen - b.tasks_stolen),
                  static_cast<unsigned long long>(a.times_parked - b.times_parked));
    }
    std::printf("\n");
    before = after;
  }
  return 0;
}
