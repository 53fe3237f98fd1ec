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
// kMaxPooledSize go straight to ::operator new. Memory is retained up to a
// per-class depot bound and otherwise returned to the heap.
// Under AddressSanitizer (or with VOLT_NO_FRAME_POOL) pooling is off so that
// use-after-free and leaks of frames are reported.
#pragma once

#include <cstddef>

namespace volt::detail {

inline constexpr std::size_t kFrameSizeClass = 64;
inline constexpr std::size_t kMaxPooledSize = 2048;

void* frame_allocate(std::size_t size);
void frame_deallocate(void* block, std::size_t size) noexcept;

}  // namespace volt::detail
