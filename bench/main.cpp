// bench/main.cpp: volt's side of docs/benchmarks.md. The command line, the
// iteration loop and the JSON-lines output (the C++ counterpart of
// the Tokio side (main.rs, harness.rs): same flags, same measurement
// rules, same output format).
//
// One JSON object per benchmark on stdout, in the specification's order;
// progress on stderr.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "harness.hpp"

namespace volt_bench {
namespace {

constexpr const char* kUsage =
    "usage: volt_bench [--workers N] [--filter SUBSTR] [--iters N] [--warmup N] [--quick] [--ops "
    "N]\n"
    "                  [--port PORT]\n"
    "       volt_bench --serve-http PORT [--workers N]\n"
    "\n"
    "  --workers N        worker threads of the multi-thread runtime (default: number of CPUs)\n"
    "  --filter SUBSTR    run only the benchmarks whose name contains SUBSTR\n"
    "                     (=NAME: only the benchmark called NAME)\n"
    "  --iters N          timed iterations (default 10)\n"
    "  --warmup N         untimed warm-up iterations (default 5)\n"
    "  --quick            iters 3, warmup 1, ops divided by 10 (smoke runs);\n"
    "                     an explicit --iters/--warmup still wins\n"
    "  --ops N            ops per iteration for every selected benchmark instead of its own\n"
    "                     count (e.g. --filter fork_fib --ops 3524577 builds fib(32))\n"
    "  --port PORT        port for http_plaintext's server (default: a free loopback port)\n"
    "  --serve-http PORT  only serve the http_plaintext server on 127.0.0.1:PORT, until killed\n"
    "\n"
    "One JSON object per benchmark is written to stdout; progress goes to stderr.";

// The tiers in the specification's order. A tier added later (its own file,
// its function declared in harness.hpp) goes into its place here.
using TierFn = std::span<const Bench> (*)();
constexpr TierFn kTiers[] = {
    sync_fast_benches,  // Tier 1: sync fast path
    channel_benches,    // Tier 2: channels
    contended_benches,  // Tier 3: async, multi-task
    scheduler_benches,  // Tier 4: scheduler
    time_benches,       // Tier 5: time
    net_benches,        // Tier 6: network
    file_benches,       // Tier 7: files
    process_benches,    // Tier 8: child processes
#ifdef VOLT_BENCH_TLS
    tls_benches,  // Tier 9: TLS
#endif
    forkjoin_benches,  // Tier 10: fork-join
};

struct UsageError {
  std::string message;  // empty: --help (print the usage, exit 0)
};

template <class T>
T number(std::string_view flag, std::string_view text) {
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size())
    throw UsageError{std::string(flag) + ": `" + std::string(text) + "` is not a valid number"};
  return value;
}

std::size_t positive(std::string_view flag, std::string_view text) {
  auto n = number<std::size_t>(flag, text);
  if (n == 0) throw UsageError{std::string(flag) + " must be at least 1"};
  return n;
}

std::size_t cpu_count() {
  // Like Rust's available_parallelism: the CPUs this process may run on.
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<std::size_t>(n);
  }
  unsigned n = std::thread::hardware_concurrency();
  return n ? n : 1;
}

Config parse(int argc, char** argv) {
  std::optional<std::size_t> workers, iters, warmup;
  Config config;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    // Accept both `--flag value` and `--flag=value`.
    std::string_view flag = arg;
    std::optional<std::string_view> inline_value;
    if (auto eq = arg.find('='); eq != std::string_view::npos && arg.starts_with("--")) {
      flag = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
    }
    auto value = [&]() -> std::string_view {
      if (inline_value) return *inline_value;
      if (i + 1 >= argc) throw UsageError{std::string(flag) + " needs a value"};
      return argv[++i];
    };
    if (flag == "--workers") {
      workers = positive(flag, value());
    } else if (flag == "--filter") {
      config.filter = std::string(value());
    } else if (flag == "--iters") {
      iters = positive(flag, value());
    } else if (flag == "--warmup") {
      warmup = number<std::size_t>(flag, value());
    } else if (flag == "--ops") {
      config.ops = positive(flag, value());
    } else if (flag == "--port") {
      config.port = number<std::uint16_t>(flag, value());
    } else if (flag == "--serve-http") {
      config.serve_http = number<std::uint16_t>(flag, value());
    } else if (flag == "--quick" && !inline_value) {
      config.quick = true;
    } else if (flag == "-h" || flag == "--help") {
      throw UsageError{};
    } else {
      throw UsageError{"unknown argument `" + std::string(arg) + "`"};
    }
  }
  config.workers = workers.value_or(cpu_count());
  config.iters = iters.value_or(config.quick ? 3 : 10);
  config.warmup = warmup.value_or(config.quick ? 1 : 5);
  return config;
}

// Up to six decimals, trailing zeros trimmed, always with a fractional part (`0.0`).
std::string json_number(double x) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.6f", x);
  std::string text = buffer;
  while (!text.empty() && text.back() == '0')
    text.pop_back();
  if (!text.empty() && text.back() == '.') text.push_back('0');
  return text;
}

// Field order as in the specification:
// {"name":..,"ns_per_op":..,"allocs_per_op":..,"bytes_per_op":..,"ops":..}
std::string to_json(const Record& r) {
  std::string out = "{\"name\":\"";
  out += r.name;
  out += "\",\"";
  out += r.rps ? "rps" : "ns_per_op";
  out += "\":" + json_number(r.figure);
  out += ",\"allocs_per_op\":" + json_number(r.allocs_per_op);
  out += ",\"bytes_per_op\":" + json_number(r.bytes_per_op);
  out += ",\"ops\":" + std::to_string(r.ops) + "}";
  return out;
}

// The middle value; for an even count, the mean of the two middle values.
double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2.0;
}

// VOLT_BENCH_STATS=1: the runtime's counters after the last iteration (all
// warm-up and timed iterations together), on stderr. A debugging aid for
// reading a figure (steals, parks, inject-queue traffic); off by default.
// VOLT_BENCH_ITER_STATS=1: per iteration (warm-ups included), its ns an op
// and each worker's polls/steals/tasks stolen/parks, on stderr: tells
// apart iterations whose tasks met on one worker from those spread over
// several (how tls_bulk's slow iterations were found).
void print_stats(std::string_view name, const volt::RuntimeStats& s) {
  std::fprintf(stderr,
               "\n[stats %.*s] spawned=%llu polled=%llu stolen=%llu parked=%llu "
               "remote_schedules=%llu inject_depth=%llu live=%llu\n",
               static_cast<int>(name.size()), name.data(),
               static_cast<unsigned long long>(s.total_spawned),
               static_cast<unsigned long long>(s.total_polled),
               static_cast<unsigned long long>(s.total_stolen),
               static_cast<unsigned long long>(s.total_parked),
               static_cast<unsigned long long>(s.remote_schedules),
               static_cast<unsigned long long>(s.inject_queue_depth),
               static_cast<unsigned long long>(s.live_tasks));
  for (std::size_t i = 0; i < s.workers.size(); ++i) {
    const volt::WorkerStats& w = s.workers[i];
    std::fprintf(stderr,
                 "  worker %zu: polled=%llu lifo_hits=%llu steals=%llu stolen=%llu parked=%llu "
                 "global_batches=%llu overflows=%llu\n",
                 i, static_cast<unsigned long long>(w.tasks_polled),
                 static_cast<unsigned long long>(w.lifo_hits),
                 static_cast<unsigned long long>(w.steal_operations),
                 static_cast<unsigned long long>(w.tasks_stolen),
                 static_cast<unsigned long long>(w.times_parked),
                 static_cast<unsigned long long>(w.global_batch_fetches),
                 static_cast<unsigned long long>(w.overflows));
  }
}

// Runs one iteration of a Task workload: spawns it on the runtime and blocks
// in JoinHandle::join(), as Tokio's side does with block_on(spawn(..)). The
// waiting thread only runs queued tasks itself when it is woken as a helper
// (every worker busy with work queued); otherwise it sleeps until the task
// completes.
Sample run_as_task(volt::Runtime& runtime, TaskFn run, std::uint64_t ops) {
  return runtime.spawn(run(ops)).join();
}

// Runs warmup + iters iterations; ns_per_op is the median over the timed
// iterations of elapsed / ops, the allocation figures come from the last one.
Record measure(const Bench& bench, const Config& config) {
  const std::uint64_t ops = config.scale(bench.ops);
  // One runtime per benchmark, built before the warm-ups and destroyed after
  // the last iteration; its start-up is never inside a window.
  std::optional<volt::Runtime> runtime;
  if (bench.workload == Workload::Task || bench.workload == Workload::Outside)
    runtime.emplace(volt::Runtime::Builder::multi_thread().worker_threads(config.workers).build());

  std::vector<double> ns_per_op;
  ns_per_op.reserve(config.iters);
  Sample last;
  const bool per_iteration = runtime && std::getenv("VOLT_BENCH_ITER_STATS") != nullptr;
  volt::RuntimeStats before;
  if (per_iteration) before = runtime->stats();
  for (std::size_t iteration = 0; iteration < config.warmup + config.iters; ++iteration) {
    Sample sample;
    switch (bench.workload) {
      case Workload::Plain:
        sample = bench.plain(ops);
        break;
      case Workload::Task:
        sample = run_as_task(*runtime, bench.task, ops);
        break;
      case Workload::Outside:
        sample = bench.outside(*runtime, ops);
        break;
      case Workload::Http:
        std::abort();  // not iterated: main() calls bench.http
    }
    if (per_iteration) {
      const volt::RuntimeStats after = runtime->stats();
      std::fprintf(stderr, "%3zu %9.1f |", iteration,
                   static_cast<double>(sample.elapsed.count()) / static_cast<double>(ops));
      for (std::size_t w = 0; w < after.workers.size(); ++w) {
        const volt::WorkerStats& a = after.workers[w];
        const volt::WorkerStats& b = before.workers[w];
        std::fprintf(stderr, " %6llu/%llu/%llu/%llu",
                     static_cast<unsigned long long>(a.tasks_polled - b.tasks_polled),
                     static_cast<unsigned long long>(a.steal_operations - b.steal_operations),
                     static_cast<unsigned long long>(a.tasks_stolen - b.tasks_stolen),
                     static_cast<unsigned long long>(a.times_parked - b.times_parked));
      }
      std::fprintf(stderr, " | blocked-thread polls %llu\n",
                   static_cast<unsigned long long>(after.blocked_thread_polls -
                                                   before.blocked_thread_polls));
      before = after;
    }
    if (iteration >= config.warmup) {
      ns_per_op.push_back(static_cast<double>(sample.elapsed.count()) / static_cast<double>(ops));
      last = sample;
    }
  }

  if (runtime && std::getenv("VOLT_BENCH_STATS")) print_stats(bench.name, runtime->stats());

  Record record;
  record.name = bench.name;
  record.figure = median(std::move(ns_per_op));
  record.allocs_per_op = static_cast<double>(last.allocs) / static_cast<double>(ops);
  record.bytes_per_op = static_cast<double>(last.bytes) / static_cast<double>(ops);
  record.ops = ops;
  return record;
}

int run(int argc, char** argv) {
  Config config;
  try {
    config = parse(argc, argv);
  } catch (const UsageError& error) {
    if (error.message.empty()) {
      std::printf("%s\n", kUsage);
      return 0;
    }
    std::fprintf(stderr, "error: %s\n\n%s\n", error.message.c_str(), kUsage);
    return 2;
  }

  if (config.serve_http >= 0) return serve_http(config);

  std::fprintf(stderr, "volt_bench: %zu worker(s), %zu iteration(s) after %zu warm-up%s\n",
               config.workers, config.iters, config.warmup, config.quick ? ", quick" : "");
  for (TierFn tier : kTiers) {
    for (const Bench& bench : tier()) {
      const std::string_view filter = config.filter;
      const bool exact = filter.starts_with('=');
      if (exact ? bench.name != filter.substr(1)
                : bench.name.find(filter) == std::string_view::npos)
        continue;
      std::fprintf(stderr, "%-24.*s", static_cast<int>(bench.name.size()), bench.name.data());
      auto started = std::chrono::steady_clock::now();
      Record record =
          bench.workload == Workload::Http ? bench.http(config) : measure(bench, config);
      std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - started;
      std::fprintf(stderr, " done in %.2fms\n", took.count());
      std::printf("%s\n", to_json(record).c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace volt_bench

int main(int argc, char** argv) {
  try {
    return volt_bench::run(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "\nvolt_bench: benchmark failed: %s\n", error.what());
    return 1;
  }
}
