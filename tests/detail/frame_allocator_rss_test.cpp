// The frame allocator returns a burst's memory
// (include/volt/detail/frame_allocator.hpp, "Retention").
//
// A runtime runs a burst of 1,000,000 spawned tasks, all in flight at once
// (every join handle is kept until the last spawn), then goes idle. The
// resident set must fall back to within kSlackBytes of what it was before the
// burst once the allocator's idle period has passed. Before the retention
// policy the depot kept 65,536 blocks of every class the burst used (the
// task cells' and the frames' classes) for ever, and those pinned the heap.
//
// Under a sanitizer the burst is a tenth (the allocator's paths are the same,
// and the sanitizers' own heaps make RSS a weak measure); under
// AddressSanitizer the pool is off and only the workload runs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "test_support.hpp"
#include "volt/detail/frame_allocator.hpp"
#include "volt/volt.hpp"

namespace volt::detail {
namespace {

std::size_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

Task<std::uint64_t> payload(std::uint64_t i) {
  co_return i;
}

// Spawns `count` tasks, keeping every handle until all are spawned, then
// joins them in order.
Task<std::uint64_t> burst(std::size_t count) {
  std::vector<JoinHandle<std::uint64_t>> handles;
  handles.reserve(count);
  for (std::size_t i = 0; i < count; ++i)
    handles.push_back(spawn(payload(i)));
  std::uint64_t sum = 0;
  for (auto& h : handles)
    sum += co_await h;
  co_return sum;
}

TEST(FrameAllocatorRssTest, MillionTaskBurstIsReturnedWhenIdle) {
  const std::size_t kTasks = test::scale(1'000'000);
  // Generous: the trimmed pool keeps a floor of 128 blocks per class and each
  // thread's lists (a few hundred KiB). The old depot kept 65,536 blocks of
  // each class the burst used (~20 MiB here), and those pinned glibc's pages:
  // the whole burst, ~200 MiB, stayed resident.
  constexpr std::size_t kSlackBytes = std::size_t{8} << 20;
  Runtime rt = Runtime::Builder().worker_threads(2).build();
  // Warm-up: threads, queues and caches exist before the first measurement.
  EXPECT_EQ(rt.block_on(burst(10'000)), 10'000ull * 9'999 / 2);
  const std::size_t before = resident_bytes();
  ASSERT_GT(before, 0u);

  EXPECT_EQ(rt.block_on(burst(kTasks)), std::uint64_t{kTasks} * (kTasks - 1) / 2);
  const std::size_t peak = resident_bytes();

  // The runtime stays up and idle; poll until the memory is back, for up to
  // a few times the allocator's idle period. Under a sanitizer the memory
  // figures mean little: wait long enough for the trimmer to run twice (so
  // ThreadSanitizer sees it at work) and only report.
  std::size_t after = resident_bytes();
  if (test::kSanitized) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3 * kFrameTrimPeriodMs));
    after = resident_bytes();
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (!test::kSanitized && after > before + kSlackBytes &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    after = resident_bytes();
  }
  std::printf("RSS before %zu KiB, after the burst %zu KiB, idle %zu KiB (%zu tasks)\n",
              before >> 10, peak >> 10, after >> 10, kTasks);
  if (test::kSanitized) return;  // the sanitizers' heaps keep what they like
  EXPECT_LE(after, before + kSlackBytes)
      << "RSS before " << (before >> 10) << " KiB, after " << (after >> 10) << " KiB";
}

}  // namespace
}  // namespace volt::detail
