// volt/detail/frame_allocator.hpp: recycling allocator for coroutine frames and
// task cells.
//
// Every Task<T> frame and every spawned task's cell is allocated here. Blocks
// are grouped in size classes of 64 bytes up to kMaxPooledSize; each thread
// keeps a free list per class, and surplus moves in batches through a global
// depot, so a block freed on another worker (the usual case: tasks migrate)
// comes back to whichever thread allocates next without touching malloc.
// In steady state, spawn + complete performs no heap allocation.
//
// Guarantees: thread-safe (any thread may free any block); sizes above
// kMaxPooledSize go straight to ::operator new.
//
// Retention (what the pool keeps, and for how long):
//   - Per thread: at most 2 * kFrameLocalBatch blocks per class; they move to
//     the depot when the thread exits. Not trimmed otherwise.
//   - Depot, while in use: at most kFrameDepotMaxBatches batches of
//     kFrameLocalBatch blocks per class, and at most kFrameDepotMaxBytesPerClass
//     bytes of blocks per class (classes of 512 bytes and more reach the byte
//     bound first). A batch freed beyond that goes to the heap at once.
//   - Depot, when idle: blocks above kFrameDepotFloorBlocks per class that no
//     allocation needed for a whole trim period (kFrameTrimPeriodMs) go back
//     to the heap at the end of the next period, i.e. between one and two
//     periods after they were last needed. A class in steady use keeps what
//     it cycles through.
//   - The heap: once at least 1 MiB of pooled blocks went to the heap (an
//     overflowing depot or trimming) and a whole period passed without an
//     overflow, malloc_trim(0) gives glibc's free pages back to the system
//     (blocks are scattered, so glibc would otherwise keep every page a
//     retained block ever sat near). Other C libraries: their own policy.
//   - The work above runs on a detached thread (volt-frame-trim, every
//     signal blocked) that the pool starts when a class's depot first goes
//     above its floor; it wakes once per period and exits when every class
//     is back at its floor. The fast paths never wait for it. After a burst
//     of 1,000,000 tasks the process's resident set returns to within a few
//     MiB of its pre-burst size within about a second
//     (tests/detail/frame_allocator_rss_test.cpp).
// Under AddressSanitizer (or with VOLT_NO_FRAME_POOL) pooling is off so that
// use-after-free and leaks of frames are reported.
#pragma once

#include <cstddef>

namespace volt::detail {

inline constexpr std::size_t kFrameSizeClass = 64;
inline constexpr std::size_t kMaxPooledSize = 2048;

// Retention bounds (see above).
inline constexpr std::size_t kFrameLocalBatch = 64;
inline constexpr std::size_t kFrameDepotMaxBatches = 1024;
inline constexpr std::size_t kFrameDepotMaxBytesPerClass = std::size_t{32} << 20;
inline constexpr std::size_t kFrameDepotFloorBlocks = 2 * kFrameLocalBatch;
inline constexpr unsigned kFrameTrimPeriodMs = 250;

void* frame_allocate(std::size_t size);
void frame_deallocate(void* block, std::size_t size) noexcept;

}  // namespace volt::detail
