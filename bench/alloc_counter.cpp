// bench/alloc_counter.cpp: the counting global operator new / delete and the
// Meter. See alloc_counter.hpp for what is counted and why malloc is not.
#include "alloc_counter.hpp"

#include <execinfo.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

namespace volt_bench {
namespace {

// Both counters share one cache line: they are always updated together.
struct alignas(64) Counters {
  std::atomic<std::uint64_t> allocs{0};
  std::atomic<std::uint64_t> bytes{0};
};
constinit Counters counters;

// ---- VOLT_BENCH_ALLOC_TRACE ----
// trace_limit is read from the environment once, by the first Meter::start()
// (never from inside operator new: getenv there would run before main).
constinit std::atomic<long> trace_limit{0};      // 0: tracing off
constinit std::atomic<bool> window_open{false};  // a Meter is running
constinit std::atomic<long> window_number{0};
constinit std::atomic<long> traced_in_window{0};
thread_local bool in_tracer = false;  // no recursion from backtrace()

[[gnu::noinline]] void trace(std::size_t size) noexcept {
  if (in_tracer) return;
  const long n = traced_in_window.fetch_add(1, std::memory_order_relaxed);
  if (n >= trace_limit.load(std::memory_order_relaxed)) return;
  in_tracer = true;
  char line[128];
  int len =
      std::snprintf(line, sizeof line, "--- alloc trace: window %ld, allocation %ld, %zu bytes\n",
                    window_number.load(std::memory_order_relaxed), n + 1, size);
  if (len > 0) (void)!::write(STDERR_FILENO, line, static_cast<std::size_t>(len));
  void* frames[32];
  int depth = ::backtrace(frames, 32);
  ::backtrace_symbols_fd(frames, depth, STDERR_FILENO);
  in_tracer = false;
}

inline void record(std::size_t size) noexcept {
  counters.allocs.fetch_add(1, std::memory_order_relaxed);
  counters.bytes.fetch_add(size, std::memory_order_relaxed);
  if (window_open.load(std::memory_order_relaxed)) [[unlikely]]
    trace(size);
}

void* allocate(std::size_t size) {
  record(size);
  if (size == 0) size = 1;  // operator new never returns null or a shared block
  for (;;) {
    if (void* block = std::malloc(size)) return block;
    std::new_handler handler = std::get_new_handler();
    if (!handler) throw std::bad_alloc();
    handler();
  }
}

void* allocate_aligned(std::size_t size, std::align_val_t align) {
  record(size);
  const auto alignment = static_cast<std::size_t>(align);
  if (size == 0) size = 1;
  for (;;) {
    void* block = nullptr;
    if (::posix_memalign(&block, alignment < sizeof(void*) ? sizeof(void*) : alignment, size) == 0)
      return block;
    std::new_handler handler = std::get_new_handler();
    if (!handler) throw std::bad_alloc();
    handler();
  }
}

}  // namespace

AllocCounts alloc_counts() noexcept {
  return {counters.allocs.load(std::memory_order_relaxed),
          counters.bytes.load(std::memory_order_relaxed)};
}

Meter Meter::start() noexcept {
  static const bool tracing = [] {
    const char* env = std::getenv("VOLT_BENCH_ALLOC_TRACE");
    long limit = env ? std::strtol(env, nullptr, 10) : 0;
    trace_limit.store(limit > 0 ? limit : 0, std::memory_order_relaxed);
    return limit > 0;
  }();
  if (tracing) {
    window_number.fetch_add(1, std::memory_order_relaxed);
    traced_in_window.store(0, std::memory_order_relaxed);
    window_open.store(true, std::memory_order_seq_cst);
  }
  Meter meter;
  meter.counts_ = alloc_counts();
  meter.started_ = std::chrono::steady_clock::now();
  return meter;
}

Sample Meter::stop() noexcept {
  const auto elapsed = std::chrono::steady_clock::now() - started_;
  const AllocCounts now = alloc_counts();
  window_open.store(false, std::memory_order_seq_cst);
  return {std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed),
          now.allocs - counts_.allocs, now.bytes - counts_.bytes};
}

}  // namespace volt_bench

// ---- the replaced global allocation functions ----
// Every form the standard lets a program replace. The unsized/sized/nothrow
// delete forms all free with std::free (posix_memalign memory included).

void* operator new(std::size_t size) {
  return volt_bench::allocate(size);
}
void* operator new[](std::size_t size) {
  return volt_bench::allocate(size);
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return volt_bench::allocate(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return volt_bench::allocate(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(std::size_t size, std::align_val_t align) {
  return volt_bench::allocate_aligned(size, align);
}
void* operator new[](std::size_t size, std::align_val_t align) {
  return volt_bench::allocate_aligned(size, align);
}
void* operator new(std::size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  try {
    return volt_bench::allocate_aligned(size, align);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  try {
    return volt_bench::allocate_aligned(size, align);
  } catch (...) {
    return nullptr;
  }
}

void operator delete(void* block) noexcept {
  std::free(block);
}
void operator delete[](void* block) noexcept {
  std::free(block);
}
void operator delete(void* block, std::size_t) noexcept {
  std::free(block);
}
void operator delete[](void* block, std::size_t) noexcept {
  std::free(block);
}
void operator delete(void* block, const std::nothrow_t&) noexcept {
  std::free(block);
}
void operator delete[](void* block, const std::nothrow_t&) noexcept {
  std::free(block);
}
void operator delete(void* block, std::align_val_t) noexcept {
  std::free(block);
}
void operator delete[](void* block, std::align_val_t) noexcept {
  std::free(block);
}
void operator delete(void* block, std::size_t, std::align_val_t) noexcept {
  std::free(block);
}
void operator delete[](void* block, std::size_t, std::align_val_t) noexcept {
  std::free(block);
}
void operator delete(void* block, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(block);
}
void operator delete[](void* block, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(block);
}
