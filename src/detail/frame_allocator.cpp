// Frame allocator: per-thread free lists per size class + a global depot, and
// a trimmer thread that hands idle depot memory back to the system.
//
// Block layout while free: word 0 links blocks of one list; in a batch held by
// the depot, word 1 of the batch's first block links to the next batch.
//
// Flow of a block:
//   allocate: local list -> (empty) one batch from the depot -> ::operator new
//   free:     local list -> (local list reached kLocalCap) kBatch blocks move to
//             the depot as one batch -> (depot full) freed to the heap
// kBatch = 64 and kLocalCap = 2 * kBatch are a guess sized so that one depot
// lock is amortised over 64 spawns. The fast paths (frame_allocate and
// frame_deallocate while the local list has room) touch only thread-local
// data; everything below happens once per kBatch blocks at most.
//
// Retention (the header's contract):
//   - A class's depot holds at most depot_max_batches(index) batches (32 MiB
//     of blocks, and never more than 1024 batches); a batch beyond that goes
//     to the heap.
//   - Above kDepotFloorBatches, batches that no allocation needed for a whole
//     trim period are freed: each class records the lowest batch count it
//     reached since the trimmer's last tick ("low"); the bottom low batches of
//     its stack (a LIFO, so the ones nobody took) sat idle through the whole
//     period, and the trimmer frees all of them but the floor.
//   - Freed blocks are scattered over the heap, so glibc keeps the pages that
//     hold them; when at least kHeapTrimBytes went to the heap (from the depot
//     being full or from trimming) and nothing overflowed during the last
//     period, the trimmer calls malloc_trim(0), which returns every free page.
//   - The trimmer is a detached thread started by the first batch that takes
//     a class's depot above its floor; it ticks every kTrimPeriod and exits
//     when every class is at or below its floor and nothing is owed to
//     malloc_trim. Created with pthread_create, not std::thread: starting it
//     performs no operator new (tests count those). Named volt-frame-trim,
//     with every signal blocked.
//   - Per-thread lists are not trimmed: at most kLocalCap blocks per class per
//     thread, handed to the depot when the thread exits.
#include "volt/detail/frame_allocator.hpp"

#include <pthread.h>
#include <signal.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <new>
#include <thread>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

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
constexpr std::size_t kBatch = kFrameLocalBatch;
constexpr std::size_t kLocalCap = 2 * kBatch;
constexpr std::size_t kDepotFloorBatches = kFrameDepotFloorBlocks / kBatch;
constexpr auto kTrimPeriod = std::chrono::milliseconds(kFrameTrimPeriodMs);
constexpr std::size_t kHeapTrimBytes = std::size_t{1} << 20;

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
constexpr std::size_t depot_max_batches(std::size_t index) {
  const std::size_t by_bytes = kFrameDepotMaxBytesPerClass / (kBatch * class_size(index));
  return by_bytes < kFrameDepotMaxBatches ? by_bytes : kFrameDepotMaxBatches;
}
static_assert(depot_max_batches(kNumClasses - 1) > kDepotFloorBatches);

// Bytes of pooled blocks freed to the heap since the program started (a
// statistic for the trimmer's malloc_trim decision; nothing else is ordered
// by it, so every access is relaxed).
std::atomic<std::uint64_t> heap_freed_bytes{0};

void free_list_to_heap(FreeBlock* block, std::size_t index) {
  std::uint64_t bytes = 0;
  while (block) {
    FreeBlock* next = block->next;
    ::operator delete(static_cast<void*>(block));
    bytes += class_size(index);
    block = next;
  }
  heap_freed_bytes.fetch_add(bytes, std::memory_order_relaxed);  // statistic, no partner
}

// Process-wide store of full batches, one stack per class. Never destroyed:
// threads (the trimmer among them) may still use it while static destructors
// run.
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
      if (c.count < c.low) c.low = c.count;
    }
    return batch;
  }
  // Takes ownership of a list of batch->batch_count (<= kBatch) blocks;
  // returns false when full. *above_floor: whether the class now holds more
  // than the floor (so the trimmer has work).
  bool give(std::size_t index, FreeBlock* batch, bool* above_floor) {
    std::lock_guard lock(classes_[index].mutex);
    auto& c = classes_[index];
    *above_floor = c.count >= kDepotFloorBatches;
    if (c.count >= depot_max_batches(index)) return false;
    batch->next_batch = c.batches;
    c.batches = batch;
    ++c.count;
    return true;
  }
  // The trimmer's tick for one class: detaches the batches that stayed at the
  // bottom of the stack since the last tick, all but the floor, and starts
  // the next period. Returns them linked by next_batch.
  FreeBlock* take_idle(std::size_t index) {
    std::lock_guard lock(classes_[index].mutex);
    auto& c = classes_[index];
    const std::size_t idle = c.low < c.count ? c.low : c.count;
    FreeBlock* released = nullptr;
    if (idle > kDepotFloorBatches) {
      const std::size_t keep = c.count - (idle - kDepotFloorBatches);
      if (keep == 0) {
        released = c.batches;
        c.batches = nullptr;
      } else {
        FreeBlock* last_kept = c.batches;
        for (std::size_t i = 1; i < keep; ++i)
          last_kept = last_kept->next_batch;
        released = last_kept->next_batch;
        last_kept->next_batch = nullptr;
      }
      c.count = keep;
    }
    c.low = c.count;
    return released;
  }
  bool at_floor() {
    for (std::size_t i = 0; i < kNumClasses; ++i) {
      std::lock_guard lock(classes_[i].mutex);
      if (classes_[i].count > kDepotFloorBatches) return false;
    }
    return true;
  }

 private:
  struct alignas(64) Class {
    std::mutex mutex;
    FreeBlock* batches = nullptr;  // guarded by mutex
    std::size_t count = 0;         // guarded by mutex
    std::size_t low = 0;           // guarded by mutex: lowest count since the last tick
  };
  std::array<Class, kNumClasses> classes_{};
};

Depot& depot() {
  static Depot* const instance = new Depot();  // intentionally leaked, see Depot
  return *instance;
}

// ---- the trimmer ----

// Whether a trimmer thread runs (or is being started). Set by the exchange in
// start_trimmer, cleared by the trimmer as it exits (or by a failed start).
std::atomic<bool> trimmer_running{false};
// The trimmer's own state, carried from one trimmer thread to the next: only
// the thread that owns trimmer_running touches it (handed over by the
// release store in trimmer_main / acquire exchange in start_trimmer).
struct TrimmerState {
  std::uint64_t seen = 0;        // heap_freed_bytes at the end of the last tick
  std::uint64_t trimmed_at = 0;  // heap_freed_bytes at the last malloc_trim
};
TrimmerState trimmer_state;

// One tick. Returns whether the trimmer still has work.
bool trim_tick() {
  TrimmerState& s = trimmer_state;
  // Quiet: no batch overflowed to the heap during the period just ended.
  const bool quiet =
      heap_freed_bytes.load(std::memory_order_relaxed) == s.seen;  // statistic, no partner
  for (std::size_t i = 0; i < kNumClasses; ++i) {
    FreeBlock* batch = depot().take_idle(i);
    while (batch) {
      FreeBlock* next = batch->next_batch;
      free_list_to_heap(batch, i);
      batch = next;
    }
  }
  const std::uint64_t freed = heap_freed_bytes.load(std::memory_order_relaxed);  // statistic
  if (quiet && freed - s.trimmed_at >= kHeapTrimBytes) {
#if defined(__GLIBC__)
    ::malloc_trim(0);
#endif
    s.trimmed_at = freed;
  }
  s.seen = freed;
  return !depot().at_floor() || freed - s.trimmed_at >= kHeapTrimBytes;
}

constexpr const char kTrimmerName[] = "volt-frame-trim";  // 15 characters: the limit

void* trimmer_main(void*) {
  // The creator names us too; naming ourselves first narrows the moment in
  // which we carry the creating worker's name (tests count worker names).
  ::pthread_setname_np(::pthread_self(), kTrimmerName);
  for (;;) {
    std::this_thread::sleep_for(kTrimPeriod);
    if (trim_tick()) continue;
    // Nothing left to do. A give that took a class above its floor while we
    // still looked like running did not start a trimmer: clear the flag, then
    // look again. The class mutexes order the two: either at_floor() below
    // sees that give's batch, or the give's check comes after our store.
    // Release: hands trimmer_state to the next trimmer (partner: the acq_rel
    // exchange in start_trimmer).
    trimmer_running.store(false, std::memory_order_release);
    if (depot().at_floor()) return nullptr;
    // Acq_rel: if we win the flag back, we own trimmer_state again (partner:
    // our own release store above, or a failed start's store in start_trimmer).
    if (trimmer_running.exchange(true, std::memory_order_acq_rel)) return nullptr;
  }
}

void start_trimmer() noexcept {
  // Relaxed: a hint only. A true that is already stale comes from a trimmer
  // that is exiting, and that trimmer looks at the depot again after clearing
  // the flag (see trimmer_main); the class mutex orders that look with our give.
  if (trimmer_running.load(std::memory_order_relaxed)) return;
  // Acq_rel: the winner owns trimmer_state (partner: the release store in
  // trimmer_main, or the one below).
  if (trimmer_running.exchange(true, std::memory_order_acq_rel)) return;
  pthread_attr_t attr;
  bool started = false;
  if (::pthread_attr_init(&attr) == 0) {
    ::pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    // Every signal blocked in the trimmer (it inherits the mask): a
    // process-directed signal goes to a thread of the application's.
    sigset_t all;
    sigset_t saved;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &saved);
    pthread_t thread;
    started = ::pthread_create(&thread, &attr, &trimmer_main, nullptr) == 0;
    ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
    ::pthread_attr_destroy(&attr);
    if (started) ::pthread_setname_np(thread, kTrimmerName);
  }
  // Release: hands trimmer_state back (partner: the exchanges above and in
  // trimmer_main). A later give tries again.
  if (!started) trimmer_running.store(false, std::memory_order_release);
}

// Gives a batch to the depot, or to the heap when the depot is full.
void give_batch(std::size_t index, FreeBlock* batch) {
  bool above_floor = false;
  if (!depot().give(index, batch, &above_floor)) free_list_to_heap(batch, index);
  if (above_floor) start_trimmer();
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
      give_batch(i, batch);
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
  give_batch(index, batch);
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
