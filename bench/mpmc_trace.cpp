// volt_mpmc_trace: where channel_mpmc's tasks run, value by value.
//
// channel_mpmc (4 senders, 4 receivers, one bounded channel of capacity
// 1,000) runs in one of two modes per process at 2 or more workers: all
// tasks on one worker, or spread over several (docs/design.md, "Contention,
// measured"). This tool shows which: every task stamps each value it sends
// or receives with a cycle counter and its thread, and each iteration is
// summarised as
//   - ns a value (the iteration's wall time / values),
//   - runs: stretches of consecutive values one task handled on one thread
//     without a pause longer than kGapCycles (about one poll each),
//   - the share of the iteration's samples (one every kSampleCycles) in
//     which: one thread was busy with the channel; two or more threads
//     were sending and none receiving; receiving and none sending; or
//     some sending while others received (the pipelined mode).
//
//   volt_mpmc_trace [--workers N] [--iters N] [--ops N]
//
// Built on request (`--target volt_mpmc_trace`); x86-64 only (rdtsc). The
// stamps cost a few ns a value, so its times are not the benchmark's.
#include <x86intrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "volt/channel/mpmc.hpp"
#include "volt/volt.hpp"

namespace {

constexpr int kSenders = 4;
constexpr int kReceivers = 4;
constexpr std::uint64_t kGapCycles = 20'000;
constexpr std::uint64_t kSampleCycles = 200;

struct Stamp {
  std::uint64_t tsc;
  int thread;
};

std::atomic<int> next_thread{0};
thread_local int thread_index = -1;

// Out of line: inlined into a coroutine body, the thread-local's address
// could be kept across a suspension and read the previous thread's index
// after the task moved (see join_handle.hpp on GCC's cached TLS address).
[[gnu::noinline]] int this_thread() {
  if (thread_index < 0) thread_index = next_thread.fetch_add(1, std::memory_order_relaxed);
  return thread_index;
}

using Stamps = std::array<std::vector<Stamp>, kSenders + kReceivers>;

volt::Task<void> sender(volt::mpmc::Sender<std::uint64_t> tx, std::vector<Stamp>* stamps,
                        std::uint64_t count) {
  for (std::uint64_t value = 0; value < count; ++value) {
    // Named results, not awaits inside conditions (as the benchmark's own
    // tasks: g++ 12 mishandles temporaries there).
    volt::SendResult<std::uint64_t> sent = co_await tx.send(std::uint64_t{value});
    if (!sent) std::abort();
    stamps->push_back({__rdtsc(), this_thread()});
  }
}

volt::Task<void> receiver(volt::mpmc::Receiver<std::uint64_t> rx, std::vector<Stamp>* stamps) {
  for (;;) {
    std::optional<std::uint64_t> value = co_await rx.recv();
    if (!value) break;
    stamps->push_back({__rdtsc(), this_thread()});
  }
}

struct Iteration {
  double ns_per_value;
  std::uint64_t cycles;
};

volt::Task<Iteration> run_once(Stamps* stamps, std::uint64_t ops) {
  for (auto& task_stamps : *stamps) {
    task_stamps.clear();
    task_stamps.reserve(ops);
  }
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t start_tsc = __rdtsc();
  std::array<volt::JoinHandle<void>, kSenders + kReceivers> tasks;
  {
    auto [tx, rx] = volt::mpmc::channel<std::uint64_t>(1000);
    for (int i = 0; i < kSenders; ++i)
      tasks[i] = volt::spawn(sender(tx, &(*stamps)[i], ops / kSenders + (i < int(ops % kSenders))));
    for (int i = 0; i < kReceivers; ++i)
      tasks[kSenders + i] = volt::spawn(receiver(rx, &(*stamps)[kSenders + i]));
  }
  for (auto& task : tasks)
    co_await task;
  const std::uint64_t cycles = __rdtsc() - start_tsc;
  const double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  co_return Iteration{ns / static_cast<double>(ops), cycles};
}

struct Run {
  std::uint64_t first, last;
  int thread;
  bool sends;
};

void summarise(int iteration, const Iteration& it, const Stamps& stamps) {
  std::vector<Run> runs;
  for (int task = 0; task < kSenders + kReceivers; ++task) {
    const std::vector<Stamp>& s = stamps[task];
    for (std::size_t i = 0; i < s.size();) {
      std::size_t j = i;
      while (j + 1 < s.size() && s[j + 1].thread == s[i].thread &&
             s[j + 1].tsc - s[j].tsc < kGapCycles)
        ++j;
      runs.push_back({s[i].tsc, s[j].tsc, s[i].thread, task < kSenders});
      i = j + 1;
    }
  }
  std::uint64_t lo = UINT64_MAX, hi = 0;
  for (const Run& r : runs) {
    lo = std::min(lo, r.first);
    hi = std::max(hi, r.last);
  }
  // Per sample: which threads send, which receive (a thread counts once).
  std::uint64_t one = 0, sending = 0, receiving = 0, mixed = 0, samples = 0;
  std::vector<int> sends, receives;
  for (std::uint64_t t = lo; t <= hi; t += kSampleCycles) {
    sends.clear();
    receives.clear();
    for (const Run& r : runs)
      if (r.first <= t && t <= r.last) (r.sends ? sends : receives).push_back(r.thread);
    std::sort(sends.begin(), sends.end());
    sends.erase(std::unique(sends.begin(), sends.end()), sends.end());
    std::sort(receives.begin(), receives.end());
    receives.erase(std::unique(receives.begin(), receives.end()), receives.end());
    std::vector<int> busy = sends;
    busy.insert(busy.end(), receives.begin(), receives.end());
    std::sort(busy.begin(), busy.end());
    busy.erase(std::unique(busy.begin(), busy.end()), busy.end());
    ++samples;
    if (busy.size() <= 1) {
      ++one;
    } else if (receives.empty()) {
      ++sending;
    } else if (sends.empty()) {
      ++receiving;
    } else {
      ++mixed;
    }
  }
  auto pct = [&](std::uint64_t n) { return samples ? 100.0 * double(n) / double(samples) : 0.0; };
  std::printf(
      "%3d  %7.1f ns/value  %5zu runs   one thread %5.1f%%  all sending %5.1f%%  "
      "all receiving %5.1f%%  sending+receiving %5.1f%%\n",
      iteration, it.ns_per_value, runs.size(), pct(one), pct(sending), pct(receiving), pct(mixed));
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t workers = 2;
  int iters = 20;
  std::uint64_t ops = 10'000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--workers")) {
      workers = std::strtoul(argv[i + 1], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--iters")) {
      iters = std::atoi(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--ops")) {
      ops = std::strtoull(argv[i + 1], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: volt_mpmc_trace [--workers N] [--iters N] [--ops N]\n");
      return 2;
    }
  }
  if (workers == 0 || iters <= 0 || ops < kSenders) {
    std::fprintf(stderr, "volt_mpmc_trace: --workers >= 1, --iters >= 1, --ops >= %d\n", kSenders);
    return 2;
  }
  volt::Runtime runtime = volt::Runtime::Builder::multi_thread().worker_threads(workers).build();
  Stamps stamps;
  std::printf("channel_mpmc traced: %zu worker(s), %llu values an iteration\n", workers,
              static_cast<unsigned long long>(ops));
  for (int iteration = 0; iteration < iters; ++iteration) {
    const Iteration it = runtime.spawn(run_once(&stamps, ops)).join();
    summarise(iteration, it, stamps);
  }
  return 0;
}
