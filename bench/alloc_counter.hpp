// bench/alloc_counter.hpp: allocation counting and the measurement window
// (the C++ counterpart of the Tokio side's alloc.rs).
//
// alloc_counter.cpp replaces every global operator new / new[] (plain,
// nothrow, aligned, aligned + nothrow) and the matching operator delete
// forms. Each allocation adds 1 to a call counter and its requested size to a
// byte counter, with relaxed atomics, on every thread (the runtime's workers
// included). Frees are not counted, as on the Tokio side.
//
// malloc is not wrapped: volt's runtime allocates only through ::operator new
// (its frame allocator falls back to ::operator new, std containers and
// std::make_shared go through std::allocator), so counting operator new sees
// every allocation the runtime makes. Should the runtime ever call malloc
// directly, wrap malloc/calloc/realloc here too (the spec asks for it).
//
// A Meter reads the clock and the counters when a timed iteration starts and
// again when it stops; the difference is one Sample.
//
// Debugging aid: with VOLT_BENCH_ALLOC_TRACE=N in the environment, the first N
// allocations inside each open measurement window print a backtrace on stderr
// (window number, size, frames; the binary exports its symbols so the frames
// are named, or resolve them with addr2line). Tracing slows the window down:
// use it to find *where* allocations come from, not for figures.
#pragma once

#include <chrono>
#include <cstdint>

namespace volt_bench {

struct AllocCounts {
  std::uint64_t allocs;
  std::uint64_t bytes;
};

// The counters now (all threads, since the process started).
AllocCounts alloc_counts() noexcept;

// What one timed iteration measured.
struct Sample {
  std::chrono::nanoseconds elapsed{0};
  std::uint64_t allocs = 0;
  std::uint64_t bytes = 0;
};

// An open measurement window: Meter::start() ... work ... meter.stop().
class Meter {
 public:
  static Meter start() noexcept;
  Sample stop() noexcept;

 private:
  Meter() = default;
  AllocCounts counts_{};
  std::chrono::steady_clock::time_point started_{};
};

}  // namespace volt_bench
