// tests/test_support.hpp: helpers shared by volt's unit tests.
//
//  - Sanitizer detection and scale(n): stress loops keep their code paths under
//    ThreadSanitizer / AddressSanitizer but run a tenth of the iterations.
//  - kFramePoolDisabled: mirrors VOLT_FRAME_POOL_DISABLED in
//    src/detail/frame_allocator.cpp (pooling is off under ASan), for tests that
//    assert on recycling.
//  - A counting replacement of the global operator new/delete. It must be
//    defined in exactly one translation unit per test binary: that file defines
//    VOLT_TEST_DEFINE_COUNTING_NEW before including this header. It is not
//    installed when the frame pool is disabled (ASan keeps its own new/delete,
//    and the zero-allocation tests skip there).
//  - LifeCounters / Tracked: a value type that counts constructions and
//    destructions and detects a second destruction of the same object.
//  - RuntimeKind / build_runtime: the two runtime flavours, for tests run on
//    both.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <string>

#include "volt/runtime/runtime.hpp"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define VOLT_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define VOLT_TEST_SANITIZED 1
#endif
#endif

// The same conditions as src/detail/frame_allocator.cpp.
#if defined(__SANITIZE_ADDRESS__)
#define VOLT_TEST_FRAME_POOL_DISABLED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VOLT_TEST_FRAME_POOL_DISABLED 1
#endif
#endif
#if defined(VOLT_NO_FRAME_POOL)
#define VOLT_TEST_FRAME_POOL_DISABLED 1
#endif

namespace volt::test {

#ifdef VOLT_TEST_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

#ifdef VOLT_TEST_FRAME_POOL_DISABLED
inline constexpr bool kFramePoolDisabled = true;
#else
inline constexpr bool kFramePoolDisabled = false;
#endif

// Whether awaiting a Task runs in constant stack space. Transfers go through
// the poll loop's trampoline (task.hpp), so this holds in every build mode
// (it did not while they relied on the compiler's tail call, which GCC 12
// omits at -O0 and under ASan/TSan).
inline constexpr bool kConstantStackAwaits = true;

// Iteration count for a stress loop: n normally, n / 10 under a sanitizer.
constexpr std::size_t scale(std::size_t n) noexcept {
  return kSanitized ? n / 10 : n;
}

// Heap allocations made through the global operator new since the program
// started, by any thread. Only meaningful when the frame pool is enabled (the
// counting operator new is installed then).
inline std::atomic<std::uint64_t> heap_allocation_count{0};
inline std::uint64_t heap_allocations() noexcept {
  return heap_allocation_count.load(std::memory_order_relaxed);
}

// The same count, made by the calling thread only. A measurement of what one
// task's code allocates uses this one when other threads may allocate in the
// window for reasons of their own (a worker thread starting up, which under
// ThreadSanitizer can still be going on after the first task ran).
inline thread_local std::uint64_t thread_heap_allocation_count = 0;
inline std::uint64_t thread_heap_allocations() noexcept {
  return thread_heap_allocation_count;
}

inline void* counted_allocate(std::size_t size, std::size_t align) {
  heap_allocation_count.fetch_add(1, std::memory_order_relaxed);
  ++thread_heap_allocation_count;
  if (size == 0) size = 1;
  void* p = nullptr;
  if (align <= alignof(std::max_align_t)) {
    p = std::malloc(size);
  } else {
    std::size_t rounded = (size + align - 1) / align * align;
    p = std::aligned_alloc(align, rounded);
  }
  if (!p) throw std::bad_alloc();
  return p;
}

// Counts constructions and destructions of Tracked values; a destructor that
// finds its object already destroyed counts a double destruction.
struct LifeCounters {
  std::atomic<std::int64_t> constructed{0};
  std::atomic<std::int64_t> destroyed{0};
  std::atomic<std::int64_t> double_destroyed{0};
  std::int64_t live() const noexcept {
    return constructed.load(std::memory_order_acquire) - destroyed.load(std::memory_order_acquire);
  }
};

class Tracked {
 public:
  Tracked(LifeCounters& counters, int value) noexcept : counters_(&counters), value_(value) {
    counters_->constructed.fetch_add(1, std::memory_order_relaxed);
  }
  Tracked(const Tracked& other) noexcept : counters_(other.counters_), value_(other.value_) {
    counters_->constructed.fetch_add(1, std::memory_order_relaxed);
  }
  Tracked(Tracked&& other) noexcept : counters_(other.counters_), value_(other.value_) {
    other.value_ = kMovedFrom;
    counters_->constructed.fetch_add(1, std::memory_order_relaxed);
  }
  Tracked& operator=(const Tracked&) = delete;
  Tracked& operator=(Tracked&&) = delete;
  ~Tracked() {
    if (magic_ != kAlive) {
      counters_->double_destroyed.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    magic_ = kDead;
    // release: a test that reads the counters (acquire) after joining sees
    // every destruction that happened before.
    counters_->destroyed.fetch_add(1, std::memory_order_release);
  }

  int value() const noexcept { return value_; }
  static constexpr int kMovedFrom = -1;

 private:
  static constexpr std::uint32_t kAlive = 0xA11CE5EDu;
  static constexpr std::uint32_t kDead = 0xDEADBEEFu;
  LifeCounters* counters_;
  int value_;
  std::uint32_t magic_ = kAlive;
};

// The two runtime flavours a unit test runs on: multi-thread with two
// workers, or current-thread.
enum class RuntimeKind { kMultiThread, kCurrentThread };

inline Runtime build_runtime(RuntimeKind kind) {
  return kind == RuntimeKind::kMultiThread ? Runtime::Builder().worker_threads(2).build()
                                           : Runtime::Builder::current_thread().build();
}

// For INSTANTIATE_TEST_SUITE_P's name generator.
inline std::string runtime_kind_name(RuntimeKind kind) {
  return kind == RuntimeKind::kMultiThread ? "MultiThread" : "CurrentThread";
}

}  // namespace volt::test

#if defined(VOLT_TEST_DEFINE_COUNTING_NEW) && !defined(VOLT_TEST_FRAME_POOL_DISABLED)
// Every replaceable form, so that none falls back to a sanitizer runtime's
// operator new/delete that would not match ours.
void* operator new(std::size_t size) {
  return volt::test::counted_allocate(size, 0);
}
void* operator new[](std::size_t size) {
  return volt::test::counted_allocate(size, 0);
}
void* operator new(std::size_t size, std::align_val_t align) {
  return volt::test::counted_allocate(size, static_cast<std::size_t>(align));
}
void* operator new[](std::size_t size, std::align_val_t align) {
  return volt::test::counted_allocate(size, static_cast<std::size_t>(align));
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return volt::test::counted_allocate(size, 0);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return volt::test::counted_allocate(size, 0);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(std::size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  try {
    return volt::test::counted_allocate(size, static_cast<std::size_t>(align));
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  try {
    return volt::test::counted_allocate(size, static_cast<std::size_t>(align));
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}
#endif
