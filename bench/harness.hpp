// bench/harness.hpp: what a tier's file needs to define its benchmarks (the
// C++ counterpart of the Tokio side's harness.rs).
//
// Each tier lives in its own file (scheduler.cpp, later sync_fast.cpp,
// channels.cpp, ...) and defines one function returning its table of Bench
// rows in the specification's order; main.cpp lists the tiers in order (see
// kTiers there) and runs every row whose name matches --filter.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include <volt/volt.hpp>

#include "alloc_counter.hpp"

namespace volt_bench {

struct Config;
struct Record;

// The value, or a std::runtime_error naming what failed (the harness prints
// it and exits non-zero, as the Tokio side panics). For the tiers whose
// workloads call fallible operations (net, files, processes).
template <class T>
T expect(volt::Expected<T> result, const char* what) {
  if (!result) throw std::runtime_error(std::string(what) + ": " + result.error().message());
  return std::move(*result);
}
inline void expect(volt::Expected<void> result, const char* what) {
  if (!result) throw std::runtime_error(std::string(what) + ": " + result.error().message());
}

enum class Workload {
  // Runs on the calling (main) thread; no runtime exists (tiers 1 and 2).
  Plain,
  // Each iteration runs as a task spawned on a multi-thread runtime with
  // --workers workers (one runtime per benchmark, built before the warm-ups);
  // the task opens and closes its own Meter; the main thread join()s it.
  Task,
  // Drives a multi-thread runtime from the calling thread, outside the runtime.
  Outside,
  // Not iterated: the benchmark measures itself once (http_plaintext).
  Http,
};

using PlainFn = Sample (*)(std::uint64_t ops);
using TaskFn = volt::Task<Sample> (*)(std::uint64_t ops);
using OutsideFn = Sample (*)(volt::Runtime& runtime, std::uint64_t ops);
using HttpFn = Record (*)(const Config& config);

struct Bench {
  std::string_view name;
  // Ops of one iteration (before --quick divides them by 10).
  std::uint64_t ops;
  Workload workload;
  PlainFn plain = nullptr;
  TaskFn task = nullptr;
  OutsideFn outside = nullptr;
  HttpFn http = nullptr;
};

constexpr Bench plain_bench(std::string_view name, std::uint64_t ops, PlainFn fn) {
  return {name, ops, Workload::Plain, fn, nullptr, nullptr, nullptr};
}
constexpr Bench task_bench(std::string_view name, std::uint64_t ops, TaskFn fn) {
  return {name, ops, Workload::Task, nullptr, fn, nullptr, nullptr};
}
constexpr Bench outside_bench(std::string_view name, std::uint64_t ops, OutsideFn fn) {
  return {name, ops, Workload::Outside, nullptr, nullptr, fn, nullptr};
}
constexpr Bench http_bench(std::string_view name, HttpFn fn) {
  return {name, 0, Workload::Http, nullptr, nullptr, nullptr, fn};
}

struct Config {
  std::size_t workers = 1;
  std::string filter;  // run the benchmarks whose name contains it (empty: all)
  std::size_t iters = 10;
  std::size_t warmup = 5;
  bool quick = false;
  int port = -1;          // -1: a free loopback port
  int serve_http = -1;    // -1: run the suite
  std::uint64_t ops = 0;  // --ops: every benchmark's op count (0: its own)

  // The ops of one iteration: --ops if given, else the benchmark's own
  // count, / 10 with --quick.
  std::uint64_t scale(std::uint64_t own) const {
    if (ops != 0) return ops;
    return quick ? own / 10 : own;
  }
};

// One line of output.
struct Record {
  std::string_view name;
  bool rps = false;  // the figure is requests per second instead of ns_per_op
  double figure = 0;
  double allocs_per_op = 0;
  double bytes_per_op = 0;
  std::uint64_t ops = 0;
};

// Task `index`'s part of `total` ops split over `parts` tasks: as even as
// possible, the parts add up to `total`.
constexpr std::uint64_t share(std::uint64_t total, std::uint64_t parts, std::uint64_t index) {
  return total / parts + (index < total % parts ? 1 : 0);
}

// Keeps `value` alive and opaque to the optimiser (Rust's std::hint::black_box).
template <class T>
inline void black_box(const T& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

// ---- the tiers, in the specification's order (each defined in its file) ----
std::span<const Bench> sync_fast_benches();  // Tier 1, sync_fast.cpp
std::span<const Bench> channel_benches();    // Tier 2, channels.cpp
std::span<const Bench> contended_benches();  // Tier 3, contended.cpp
std::span<const Bench> scheduler_benches();  // Tier 4, scheduler.cpp
std::span<const Bench> time_benches();       // Tier 5, time.cpp
std::span<const Bench> net_benches();        // Tier 6, net.cpp
std::span<const Bench> file_benches();       // Tier 7, files.cpp
std::span<const Bench> process_benches();    // Tier 8, processes.cpp
std::span<const Bench> tls_benches();        // Tier 9, tls.cpp (with volt::tls only)
std::span<const Bench> forkjoin_benches();   // Tier 10, forkjoin.cpp

// Loopback helpers of the network tiers (net.cpp): a listener on
// 127.0.0.1:port (0: any), and a connected client/server pair through it,
// TCP_NODELAY on both ends.
volt::net::TcpListener loopback_listener(std::uint16_t port);
volt::Task<std::pair<volt::net::TcpStream, volt::net::TcpStream>> connected_pair(
    const volt::net::TcpListener& listener);

// http_plaintext's measurement for any server: `serve` runs on a runtime of
// config.workers workers (until aborted), wrk -t1 -c64 drives
// SCHEME://127.0.0.1:PORT/ (net.cpp).
using ServeFn = volt::Task<void> (*)(volt::net::TcpListener listener);
Record wrk_bench(const Config& config, std::string_view name, std::string_view scheme,
                 ServeFn serve);

// --serve-http PORT: serves http_plaintext's server on 127.0.0.1:PORT until
// the process is killed (net.cpp).
int serve_http(const Config& config);

}  // namespace volt_bench
