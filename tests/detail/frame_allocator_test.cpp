// Tests of volt::detail::frame_allocate / frame_deallocate
// (include/volt/detail/frame_allocator.hpp, src/detail/frame_allocator.cpp).
//
// Checks that blocks are distinct and fully writable in every size class,
// that freed blocks come back (on the same thread, and through the depot when
// another thread freed them), that sizes beyond the pool work, that many
// threads can allocate and free at once without blocks being handed out twice
// (contents are stamped and re-checked), and that steady-state allocation does
// not reach the heap. The recycling assertions need the pool, which is off
// under AddressSanitizer; they skip there.
//
// This file is the volt_detail_tests binary's only definer of the counting
// global operator new.
#define VOLT_TEST_DEFINE_COUNTING_NEW 1
#include "volt/detail/frame_allocator.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <unordered_set>
#include <vector>

#include "test_support.hpp"

namespace volt::detail {
namespace {

// Every byte of a block gets a pattern derived from a stamp, so that two
// owners of one block (or a block overlapping another) are detected.
void fill(void* block, std::size_t size, std::uint8_t stamp) {
  std::memset(block, stamp, size);
}
bool holds(const void* block, std::size_t size, std::uint8_t stamp) {
  const auto* bytes = static_cast<const std::uint8_t*>(block);
  return std::all_of(bytes, bytes + size, [&](std::uint8_t b) { return b == stamp; });
}

// One representative request size per class, plus the class boundaries.
std::vector<std::size_t> sizes_of_every_class() {
  std::vector<std::size_t> sizes;
  for (std::size_t limit = kFrameSizeClass; limit <= kMaxPooledSize; limit += kFrameSizeClass) {
    sizes.push_back(limit - kFrameSizeClass + 1);  // smallest request of the class
    sizes.push_back(limit);                        // largest request of the class
  }
  return sizes;
}

TEST(FrameAllocatorTest, BlocksOfEveryClassAreDistinctAndWritable) {
  constexpr int kPerSize = 300;  // more than a local list holds, so the depot is used too
  for (std::size_t size : sizes_of_every_class()) {
    std::vector<void*> blocks;
    for (int i = 0; i < kPerSize; ++i) {
      void* b = frame_allocate(size);
      ASSERT_NE(b, nullptr);
      fill(b, size, static_cast<std::uint8_t>(i));
      blocks.push_back(b);
    }
    std::set<void*> unique(blocks.begin(), blocks.end());
    EXPECT_EQ(unique.size(), blocks.size()) << "size " << size;
    // Blocks of one class must not overlap: each still holds its own stamp.
    for (int i = 0; i < kPerSize; ++i)
      EXPECT_TRUE(holds(blocks[i], size, static_cast<std::uint8_t>(i))) << "size " << size;
    // Coroutine frames need the default new alignment.
    for (void* b : blocks)
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b) % __STDCPP_DEFAULT_NEW_ALIGNMENT__, 0u);
    for (void* b : blocks)
      frame_deallocate(b, size);
  }
}

TEST(FrameAllocatorTest, FreedBlockIsReusedByTheSameThread) {
  if (test::kFramePoolDisabled) GTEST_SKIP() << "frame pool disabled (AddressSanitizer)";
  for (std::size_t size : sizes_of_every_class()) {
    void* a = frame_allocate(size);
    frame_deallocate(a, size);
    void* b = frame_allocate(size);
    EXPECT_EQ(a, b) << "size " << size;
    // Any size of the same class takes the same block.
    frame_deallocate(b, size);
    const std::size_t other = (size - 1) / kFrameSizeClass * kFrameSizeClass + 1;
    void* c = frame_allocate(other);
    EXPECT_EQ(a, c) << "size " << size << " vs " << other;
    frame_deallocate(c, other);
  }
}

// A thread that frees blocks it did not allocate, then exits: its blocks reach
// the depot and the next thread that needs blocks of that class gets exactly
// those back. Checked both for a thread that freed many blocks (it reached the
// depot while running) and for one that freed only a few (they can only
// reach the depot through the flush at thread exit).
void expect_blocks_freed_on_exiting_thread_are_reused(std::size_t size, int count) {
  std::vector<void*> blocks;
  for (int i = 0; i < count; ++i)
    blocks.push_back(frame_allocate(size));
  std::thread freer([&] {
    for (void* b : blocks)
      frame_deallocate(b, size);
  });
  freer.join();
  std::vector<void*> reused;
  std::thread allocator([&] {
    for (int i = 0; i < count; ++i)
      reused.push_back(frame_allocate(size));
  });
  allocator.join();
  std::unordered_set<void*> freed_set(blocks.begin(), blocks.end());
  std::unordered_set<void*> reused_set(reused.begin(), reused.end());
  EXPECT_EQ(reused_set.size(), reused.size()) << "a block was handed out twice";
  EXPECT_EQ(freed_set, reused_set)
      << count << " blocks of size " << size << " freed on an exiting thread were not reused";
  for (void* b : reused)
    frame_deallocate(b, size);
}

TEST(FrameAllocatorTest, ManyBlocksFreedOnAnotherThreadAreReusable) {
  if (test::kFramePoolDisabled) GTEST_SKIP() << "frame pool disabled (AddressSanitizer)";
  // 256 = two spills to the depot while running plus a flush at exit.
  expect_blocks_freed_on_exiting_thread_are_reused(320, 256);
}

TEST(FrameAllocatorTest, FewBlocksFreedOnAnotherThreadAreReusable) {
  if (test::kFramePoolDisabled) GTEST_SKIP() << "frame pool disabled (AddressSanitizer)";
  // Fewer than a local list holds: the thread never spills, only its exit
  // can hand the blocks on.
  expect_blocks_freed_on_exiting_thread_are_reused(448, 10);
}

TEST(FrameAllocatorTest, BlocksFreedOnAnotherThreadAreUsableMemory) {
  constexpr std::size_t kSize = 96;
  constexpr int kCount = 500;
  std::vector<void*> blocks;
  for (int i = 0; i < kCount; ++i) {
    blocks.push_back(frame_allocate(kSize));
    fill(blocks.back(), kSize, 0x5A);
  }
  std::thread([&] {
    for (void* b : blocks) {
      EXPECT_TRUE(holds(b, kSize, 0x5A));
      frame_deallocate(b, kSize);
    }
  }).join();
  std::vector<void*> again;
  for (int i = 0; i < kCount; ++i) {
    again.push_back(frame_allocate(kSize));
    fill(again.back(), kSize, static_cast<std::uint8_t>(i));
  }
  for (int i = 0; i < kCount; ++i)
    EXPECT_TRUE(holds(again[i], kSize, static_cast<std::uint8_t>(i)));
  EXPECT_EQ(std::set<void*>(again.begin(), again.end()).size(), again.size());
  for (void* b : again)
    frame_deallocate(b, kSize);
}

TEST(FrameAllocatorTest, SizesAboveThePoolAndZeroWork) {
  for (std::size_t size : {kMaxPooledSize + 1, kMaxPooledSize + kFrameSizeClass,
                           std::size_t{64} << 10, std::size_t{1} << 20}) {
    std::vector<void*> blocks;
    for (int i = 0; i < 4; ++i) {
      void* b = frame_allocate(size);
      ASSERT_NE(b, nullptr);
      fill(b, size, static_cast<std::uint8_t>(i + 1));
      blocks.push_back(b);
    }
    for (int i = 0; i < 4; ++i)
      EXPECT_TRUE(holds(blocks[i], size, static_cast<std::uint8_t>(i + 1))) << "size " << size;
    for (void* b : blocks)
      frame_deallocate(b, size);
  }
  void* z = frame_allocate(0);
  EXPECT_NE(z, nullptr);
  frame_deallocate(z, 0);
}

TEST(FrameAllocatorTest, SizesAboveThePoolGoToTheHeapEachTime) {
  if (test::kFramePoolDisabled) GTEST_SKIP() << "counting operator new not installed under ASan";
  const std::uint64_t before = test::heap_allocations();
  for (int i = 0; i < 10; ++i)
    frame_deallocate(frame_allocate(kMaxPooledSize + 1), kMaxPooledSize + 1);
  EXPECT_EQ(test::heap_allocations() - before, 10u);
}

TEST(FrameAllocatorTest, SteadyStateAllocationDoesNotReachTheHeap) {
  if (test::kFramePoolDisabled) GTEST_SKIP() << "frame pool disabled (AddressSanitizer)";
  // The counter must really count, or the zero below would prove nothing.
  {
    const std::uint64_t before = test::heap_allocations();
    void* volatile probe = ::operator new(24);
    ::operator delete(probe);
    ASSERT_EQ(test::heap_allocations() - before, 1u);
  }
  constexpr int kFrames = 10'000;
  const std::size_t sizes[] = {64, 128, 520, kMaxPooledSize};
  std::vector<void*> blocks;
  blocks.reserve(kFrames);
  auto round = [&](std::size_t size) {
    for (int i = 0; i < kFrames; ++i)
      blocks.push_back(frame_allocate(size));
    for (void* b : blocks)
      frame_deallocate(b, size);
    blocks.clear();
    // And the one-at-a-time pattern of a loop awaiting child tasks.
    for (int i = 0; i < kFrames; ++i)
      frame_deallocate(frame_allocate(size), size);
  };
  for (std::size_t size : sizes)
    round(size);  // warm-up
  const std::uint64_t before = test::heap_allocations();
  for (std::size_t size : sizes)
    round(size);
  EXPECT_EQ(test::heap_allocations() - before, 0u);
}

// Threads allocate blocks of random classes, stamp them with their own id,
// pass half of them to a neighbour to free (cross-thread frees), and check
// that every block still holds its stamp when freed.
TEST(FrameAllocatorStressTest, ConcurrentAllocateAndFreeKeepBlocksExclusive) {
  constexpr int kThreads = 4;
  const std::size_t kRounds = test::scale(200);
  constexpr int kPerRound = 200;

  struct Mailbox {
    std::mutex mutex;
    std::vector<std::pair<void*, std::size_t>> blocks;  // guarded by mutex
  };
  std::vector<Mailbox> mailboxes(kThreads);
  std::atomic<int> corrupted{0};
  std::atomic<int> finished{0};

  auto body = [&](int self) {
    std::uint64_t rng = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(self + 1);
    auto next = [&] {
      rng ^= rng << 13;
      rng ^= rng >> 7;
      rng ^= rng << 17;
      return rng;
    };
    const auto stamp = static_cast<std::uint8_t>(0x10 + self);
    std::vector<std::pair<void*, std::size_t>> mine;
    for (std::size_t r = 0; r < kRounds; ++r) {
      for (int i = 0; i < kPerRound; ++i) {
        std::size_t size = 1 + next() % (kMaxPooledSize + 256);  // some above the pool
        void* b = frame_allocate(size);
        fill(b, size, stamp);
        mine.emplace_back(b, size);
      }
      // Free every other block here, hand the rest to the next thread.
      std::vector<std::pair<void*, std::size_t>> give;
      for (std::size_t i = 0; i < mine.size(); ++i) {
        auto [b, size] = mine[i];
        if (!holds(b, size, stamp)) corrupted.fetch_add(1);
        if (i % 2 == 0) {
          frame_deallocate(b, size);
        } else {
          give.emplace_back(b, size);
        }
      }
      mine.clear();
      {
        Mailbox& box = mailboxes[(self + 1) % kThreads];
        std::lock_guard lock(box.mutex);
        box.blocks.insert(box.blocks.end(), give.begin(), give.end());
      }
      // Free what others handed to us; their stamps must be intact.
      std::vector<std::pair<void*, std::size_t>> received;
      {
        std::lock_guard lock(mailboxes[self].mutex);
        received.swap(mailboxes[self].blocks);
      }
      const auto sender_stamp = static_cast<std::uint8_t>(0x10 + (self + kThreads - 1) % kThreads);
      for (auto [b, size] : received) {
        if (!holds(b, size, sender_stamp)) corrupted.fetch_add(1);
        frame_deallocate(b, size);
      }
    }
    finished.fetch_add(1);
  };

  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back(body, i);
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(corrupted.load(), 0);
  EXPECT_EQ(finished.load(), kThreads);
  // Blocks still in mailboxes (sent after the receiver's last round).
  for (int self = 0; self < kThreads; ++self) {
    const auto sender_stamp = static_cast<std::uint8_t>(0x10 + (self + kThreads - 1) % kThreads);
    for (auto [b, size] : mailboxes[self].blocks) {
      EXPECT_TRUE(holds(b, size, sender_stamp));
      frame_deallocate(b, size);
    }
  }
}

}  // namespace
}  // namespace volt::detail
