// Frame allocator: per-thread free lists per size class + a global depot.
//
// Block layout while free: word 0 links blocks of one list; in a batch held by
// the depot, word 1 of the batch's first block links to the next batch.
//
// Flow of a block:
//   allocate: local list -> (empty) one batch from the depot -> ::operator new
//   free:     local list -> (local list reached kLocalCap) kBatch blocks move to
//             the depot as one batch -> (depot full) freed to the heap
// kBatch = 64 and kLocalCap = 2 * kBatch are a guess sized so that one depot
// lock is amortised over 64 spawns; kDepotMaxBatches bounds retained memory
// (1024 batches x 64 blocks: 65,536 blocks per class).
#include "volt/detail/frame_allocator.hpp"

#include <array>
#include <cstdint>
#include <mutex>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define VOLT_FRAME_POOL_DISABLED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VOLT_FRAME_POOL_DISABLED 1
#endif
#endif
#if defined(VOLT_NO_FRAME_POOL)
#define VOLT_FRAME_POOL_DISABLED 1
#endif

namespace volt::detail {

#ifndef VOLT_FRAME_POOL_DISABLED
namespace {

constexpr std::size_t kNumClasses = kMaxPooledSize / kFrameSizeClass;
constexpr std::size_t kBatch = 64;
constexpr std::size_t kLocalCap = 2 * kBatch;
constexpr std::size_t kDepotMaxBatches = 1024;

struct FreeBlock {
  FreeBlock* next;          // next block in this list / batch
  FreeBlock* next_batch;    // depot only: next batch (valid in a batch's first block)
  std::size_t batch_count;  // depot only: blocks in this batch (first block)
};
static_assert(sizeof(FreeBlock) <= kFrameSizeClass);

constexpr std::size_t class_index(std::size_t size) {
  return (size - 1) / kFrameSizeClass;
}
constexpr std::size_t class_size(std::size_t index) {
  return (index + 1) * kFrameSizeClass;
}

// Process-wide store of full batches, one stack per class. Never destroyed:
// threads may still free blocks while static destructors run.
class Depot {
 public:
  // Returns the first block of a list of batch_count blocks, or nullptr.
  FreeBlock* take(std::size_t index) {
    std::lock_guard lock(classes_[index].mutex);
    auto& c = classes_[index];
    FreeBlock* batch = c.batches;
    if (batch) {
      c.batches = batch->next_batch;
      --c.count;
    }
    return batch;
  }
  // Takes ownership of a list of batch->batch_count (<= kBatch) blocks;
  // returns false when full.
  bool give(std::size_t index, FreeBlock* batch) {
    std::lock_guard lock(classes_[index].mutex);
    auto& c = classes_[index];
    if (c.count >= kDepotMaxBatches) return false;
    batch->next_batch = c.batches;
    c.batches = batch;
    ++c.count;
    return true;
  }

 private:
  struct alignas(64) Class {
    std::mutex mutex;
    FreeBlock* batches = nullptr;  // guarded by mutex
    std::size_t count = 0;         // guarded by mutex
  };
  std::array<Class, kNumClasses> classes_{};
};

Depot& depot() {
  static Depot* const instance = new Depot();  // intentionally leaked, see Depot
  return *instance;
}

void free_list_to_heap(FreeBlock* block) {
  while (block) {
    FreeBlock* next = block->next;
    ::operator delete(static_cast<void*>(block));
    block = next;
  }
}

// Per-thread lists. Trivially constructible and destructible so that access
// needs no TLS guard; the flush at thread exit is registered separately the
// first time the thread keeps a block.
struct LocalCache {
  std::array<FreeBlock*, kNumClasses> heads;
  std::array<std::uint32_t, kNumClasses> counts;
  bool flush_registered;
};
thread_local LocalCache tls_cache{};

void flush_local_cache() {
  for (std::size_t i = 0; i < kNumClasses; ++i) {
    FreeBlock* list = tls_cache.heads[i];
    tls_cache.heads[i] = nullptr;
    tls_cache.counts[i] = 0;
    while (list) {
      // Cut up to kBatch blocks off the front and hand them to the depot.
      FreeBlock* batch = list;
      FreeBlock* tail = list;
      std::size_t n = 1;
      for (; n < kBatch && tail->next; ++n)
        tail = tail->next;
      list = tail->next;
      tail->next = nullptr;
      batch->batch_count = n;
      if (!depot().give(i, batch)) free_list_to_heap(batch);
    }
  }
}

struct FlushAtThreadExit {
  ~FlushAtThreadExit() { flush_local_cache(); }
};

void register_flush() {
  if (!tls_cache.flush_registered) {
    tls_cache.flush_registered = true;
    thread_local FlushAtThreadExit flusher;
    (void)flusher;
  }
}

[[gnu::noinline]] void* allocate_slow(std::size_t index) {
  register_flush();
  if (FreeBlock* batch = depot().take(index)) {
    // Keep all but the first. (Batches spilled in steady state are full;
    // those flushed at thread exit may be shorter.)
    tls_cache.heads[index] = batch->next;
    tls_cache.counts[index] = static_cast<std::uint32_t>(batch->batch_count - 1);
    return batch;
  }
  return ::operator new(class_size(index));
}

[[gnu::noinline]] void spill_to_depot(std::size_t index) {
  register_flush();
  FreeBlock* batch = tls_cache.heads[index];
  FreeBlock* tail = batch;
  for (std::size_t n = 1; n < kBatch; ++n)
    tail = tail->next;
  tls_cache.heads[index] = tail->next;
  tls_cache.counts[index] -= kBatch;
  tail->next = nullptr;
  batch->batch_count = kBatch;
  if (!depot().give(index, batch)) free_list_to_heap(batch);
}

}  // namespace
#endif

#ifdef VOLT_FRAME_POOL_DISABLED

void* frame_allocate(std::size_t size) {
  return ::operator new(size);
}
void frame_deallocate(void* block, std::size_t) noexcept {
  ::operator delete(block);
}

#else

void* frame_allocate(std::size_t size) {
  if (size > kMaxPooledSize || size == 0) return ::operator new(size);
  const std::size_t index = class_index(size);
  FreeBlock* block = tls_cache.heads[index];
  if (block) {
    tls_cache.heads[index] = block->next;
    --tls_cache.counts[index];
    return block;
  }
  return allocate_slow(index);
}

void frame_deallocate(void* block, std::size_t size) noexcept {
  if (size > kMaxPooledSize || size == 0) {
    ::operator delete(block);
    return;
  }
  const std::size_t index = class_index(size);
  // The first block a thread keeps must be flushed when the thread exits,
  // or a thread that only ever frees a few blocks would leak them.
  if (!tls_cache.flush_registered) [[unlikely]]
    register_flush();
  auto* node = static_cast<FreeBlock*>(block);
  node->next = tls_cache.heads[index];
  tls_cache.heads[index] = node;
  if (++tls_cache.counts[index] >= kLocalCap) spill_to_depot(index);
}

#endif

}  // namespace volt::detail
