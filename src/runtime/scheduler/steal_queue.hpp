// StealQueue: a worker's bounded local run queue (reference: WorkStealQueue).
//
// One owner thread pushes at the tail and pops at the head (and may take
// back the task it pushed last, pop_back_if); any thread may steal half of
// the queue into its own. Capacity is a power of two (256 in the runtime, 4
// in tests so that wrap-around and overflow run constantly).
//
// Layout: `head_` packs a 32-bit version and two 16-bit positions,
// {version (high), steal, real (low)}; `tail_` is 16 bits. Positions count
// forever and wrap at 2^16; a slot is `position & kMask` (Capacity divides
// 2^16, so wrapping is seamless).
//   - real:  next slot the owner pops, and where stealers start claiming.
//   - steal: first slot a stealer may still be reading. steal == real when no
//            steal is in progress; steal != real while a stealer copies.
//   - The owner may write slot `tail` only if tail - steal < Capacity, so a
//     slot being copied by a stealer is never overwritten.
//   - version: changed only by pop_back_if, so that a stealer's claim computed
//     from a `tail` read before the owner took its last slot back fails.
//
// Steal protocol (3 phases):
//   1. claim: CAS head {s, r} -> {s, r + n} (only if s == r: one stealer at a
//      time). Slots [r, r + n) now belong to the stealer, and the owner's pop
//      skips them.
//   2. copy: the stealer copies those n slots into its own queue.
//   3. release: CAS head {s, r'} -> {r', r'}, retried until it succeeds (the
//      owner may keep popping and move r'). The reference abandons the steal when
//      this CAS fails; that would leave `steal` behind forever and shrink the
//      queue, so we retry: the stealer already owns its copy.
// Overflow: when the owner finds the queue full and no steal in progress, it
// claims half (CAS head {r, r} -> {r + N/2, r + N/2}) and moves those tasks plus
// the new one to the inject queue in one batch (one lock for N/2 + 1 tasks).
// If a steal is in progress, the queue is about to have room, so the new task
// alone goes to the inject queue.
//
// Taking back the last slot (pop_back_if, the owner; a join that polls the
// task it spawned last in place): the owner first lowers `tail` (relaxed),
// then CASes head to the same positions with the version + 1 (acq_rel),
// retrying while stealers claim meanwhile. The slot `tail - 1` was
// the owner's iff, in the head value the CAS replaced, real < tail: every
// claim is a CAS on head, so each one is either in the value the owner's CAS
// compared against (then real shows whether it reached the slot), or fails
// because it compared against an older version, or read head after the
// owner's CAS, which its acquire load synchronises with, and so reads the
// lowered tail and cannot reach the slot. A claim that took the slot (it read
// the old tail when one task was left) wins: the owner restores `tail`. In
// that window tail < real; a stealer that reads such a pair sees a length
// above Capacity and treats the queue as empty.
//
// Slots are plain pointers: every slot access is ordered by head_/tail_ (the
// owner's release store of tail_ publishes a slot to stealers' acquire load;
// a stealer's release CAS in phase 3 hands slots back to the owner's acquire
// load of head_ before it overwrites them).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "runtime/scheduler/inject_queue.hpp"
#include "volt/detail/task_header.hpp"

namespace volt::detail {

template <std::uint32_t Capacity>
class BasicStealQueue {
  static_assert(Capacity >= 2 && (Capacity & (Capacity - 1)) == 0 && Capacity <= (1u << 15),
                "capacity must be a power of two that divides 2^16 with room to spare");

 public:
  static constexpr std::uint32_t kCapacity = Capacity;
  static constexpr std::uint32_t kMask = Capacity - 1;

  BasicStealQueue() = default;
  BasicStealQueue(const BasicStealQueue&) = delete;
  BasicStealQueue& operator=(const BasicStealQueue&) = delete;

  // Owner only. Returns true if the queue overflowed into `inject`. If
  // `inject` refuses (closed at shutdown), the tasks' references are dropped.
  bool push_back_or_overflow(TaskHeader* task, InjectQueue& inject) noexcept {
    for (;;) {
      // acquire: pairs with a stealer's release in phase 3, so the slots it
      // handed back are no longer being read when we overwrite them.
      std::uint64_t head = head_.load(std::memory_order_acquire);
      std::uint16_t steal = steal_of(head);
      std::uint16_t real = real_of(head);
      std::uint16_t tail = tail_.load(std::memory_order_relaxed);  // we are its only writer
      if (static_cast<std::uint16_t>(tail - steal) < Capacity) {
        buffer_[tail & kMask] = task;
        // release: pairs with the acquire load of tail_ in steal_half_into /
        // len(): the slot is written before it becomes visible.
        tail_.store(static_cast<std::uint16_t>(tail + 1), std::memory_order_release);
        return false;
      }
      if (steal != real) {
        // A stealer is copying and will free half the queue; don't wait.
        push_or_drop(inject, task, task, 1);
        return true;
      }
      if (push_overflow(task, head, inject)) return true;
      // A stealer claimed tasks between our load and CAS: there is room now.
    }
  }

  // Owner only.
  TaskHeader* pop() noexcept {
    std::uint64_t head = head_.load(std::memory_order_acquire);
    for (;;) {
      std::uint16_t steal = steal_of(head);
      std::uint16_t real = real_of(head);
      std::uint16_t tail = tail_.load(std::memory_order_relaxed);
      if (real == tail) return nullptr;
      std::uint16_t next_real = static_cast<std::uint16_t>(real + 1);
      // No steal in progress: both halves move together.
      std::uint64_t next =
          steal == real ? with(head, next_real, next_real) : with(head, steal, next_real);
      // acq_rel: acquire pairs with stealers' claims; release orders our pop
      // before a stealer's next claim reads `real`.
      if (head_.compare_exchange_weak(head, next, std::memory_order_acq_rel,
                                      std::memory_order_acquire))
        return buffer_[real & kMask];
    }
  }

  // Owner only. Takes the task pushed last back out of the queue if it is
  // `task` and no stealer has claimed it (see "Taking back the last slot");
  // the caller then holds its entry's reference.
  bool pop_back_if(TaskHeader* task) noexcept {
    const std::uint16_t tail = tail_.load(std::memory_order_relaxed);  // ours
    std::uint64_t head = head_.load(std::memory_order_acquire);
    if (real_of(head) == tail) return false;
    const std::uint16_t last = static_cast<std::uint16_t>(tail - 1);
    if (buffer_[last & kMask] != task) return false;
    // relaxed: the CAS below publishes it (release) to every stealer that
    // reads its head value.
    tail_.store(last, std::memory_order_relaxed);
    for (;;) {
      if (real_of(head) == tail) {
        // A stealer that read the old tail claimed the slot: it is theirs.
        // release: as a push's store; the slots below are unchanged.
        tail_.store(tail, std::memory_order_release);
        return false;
      }
      // acq_rel: release publishes the lowered tail to stealers that load
      // this head value (acquire); acquire pairs with claims before it.
      if (head_.compare_exchange_weak(head, bump_version(head), std::memory_order_acq_rel,
                                      std::memory_order_acquire))
        return true;
    }
  }

  // Any thread except this queue's owner; `dst` must be the caller's own
  // queue. Moves about half of this queue into `dst` and returns one of the
  // moved tasks to run directly (nullptr if nothing was stolen).
  TaskHeader* steal_into(BasicStealQueue& dst, std::uint32_t* stolen = nullptr) noexcept {
    std::uint16_t dst_tail = dst.tail_.load(std::memory_order_relaxed);  // dst is ours
    std::uint16_t dst_steal = steal_of(dst.head_.load(std::memory_order_acquire));
    // Steal only into a queue at most half full, so the copy always fits.
    if (static_cast<std::uint16_t>(dst_tail - dst_steal) > Capacity / 2) return nullptr;
    std::uint16_t n = steal_half_into(dst, dst_tail);
    if (n == 0) return nullptr;
    if (stolen) *stolen = n;
    --n;
    TaskHeader* task = dst.buffer_[static_cast<std::uint16_t>(dst_tail + n) & kMask];
    // release: pairs with the acquire load of tail_ by thieves of `dst`.
    if (n > 0) dst.tail_.store(static_cast<std::uint16_t>(dst_tail + n), std::memory_order_release);
    return task;
  }

  // Tasks in the queue, including any claimed by an in-progress steal. Exact
  // for the owner; a snapshot for others.
  std::uint32_t len() const noexcept {
    std::uint64_t head = head_.load(std::memory_order_acquire);
    std::uint16_t tail = tail_.load(std::memory_order_acquire);
    return static_cast<std::uint16_t>(tail - steal_of(head));
  }
  // Tasks a thief could take right now (not counting in-progress steals).
  bool has_stealable() const noexcept {
    std::uint64_t head = head_.load(std::memory_order_acquire);
    std::uint16_t tail = tail_.load(std::memory_order_acquire);
    return real_of(head) != tail;
  }
  std::uint32_t remaining_slots() const noexcept { return Capacity - len(); }

 private:
  static std::uint16_t steal_of(std::uint64_t head) noexcept {
    return static_cast<std::uint16_t>(head >> 16);
  }
  static std::uint16_t real_of(std::uint64_t head) noexcept {
    return static_cast<std::uint16_t>(head);
  }
  // `head` with new positions, its version kept.
  static std::uint64_t with(std::uint64_t head, std::uint16_t steal, std::uint16_t real) noexcept {
    return (head & ~std::uint64_t{0xFFFFFFFF}) | (std::uint64_t{steal} << 16) | real;
  }
  static std::uint64_t bump_version(std::uint64_t head) noexcept {
    return head + (std::uint64_t{1} << 32);  // wraps within the word
  }

  static void push_or_drop(InjectQueue& inject, TaskHeader* first, TaskHeader* last,
                           std::size_t count) noexcept {
    if (inject.push_batch(first, last, count)) return;
    // Shut down: nobody will run these; release the queue entries' references.
    while (first) {
      TaskHeader* next = first->queue_next;
      first->drop_reference();
      first = next;
    }
  }

  // `head` is the value read with steal == real.
  bool push_overflow(TaskHeader* task, std::uint64_t head, InjectQueue& inject) noexcept {
    constexpr std::uint16_t kHalf = Capacity / 2;
    const std::uint16_t real = real_of(head);
    std::uint64_t expected = head;
    std::uint16_t next_head = static_cast<std::uint16_t>(real + kHalf);
    // acq_rel: acquire orders our reads of the claimed slots after any steal
    // that freed them; release publishes the new head to stealers.
    if (!head_.compare_exchange_strong(expected, with(head, next_head, next_head),
                                       std::memory_order_acq_rel, std::memory_order_acquire))
      return false;
    // Slots [real, real + kHalf) are ours alone now; chain them and the new task.
    TaskHeader* first = buffer_[real & kMask];
    TaskHeader* prev = first;
    for (std::uint16_t i = 1; i < kHalf; ++i) {
      TaskHeader* t = buffer_[static_cast<std::uint16_t>(real + i) & kMask];
      prev->queue_next = t;
      prev = t;
    }
    prev->queue_next = task;
    push_or_drop(inject, first, task, kHalf + 1);
    return true;
  }

  std::uint16_t steal_half_into(BasicStealQueue& dst, std::uint16_t dst_tail) noexcept {
    std::uint64_t prev = head_.load(std::memory_order_acquire);
    std::uint64_t next;
    std::uint16_t n;
    std::uint16_t first;
    for (;;) {
      std::uint16_t steal = steal_of(prev);
      std::uint16_t real = real_of(prev);
      if (steal != real) return 0;  // another thief is at work
      // acquire: pairs with the owner's release store of tail_: the slots up
      // to tail are written.
      std::uint16_t tail = tail_.load(std::memory_order_acquire);
      n = static_cast<std::uint16_t>(tail - real);
      // Above Capacity: tail < real, the owner's pop_back_if lost the last
      // slot to a claim and has not restored tail yet. Nothing to take.
      if (n > Capacity) return 0;
      n = static_cast<std::uint16_t>(n - n / 2);  // half, rounded up
      if (n == 0) return 0;
      first = real;
      next = with(prev, steal, static_cast<std::uint16_t>(real + n));
      // Phase 1, claim. acq_rel: acquire orders our slot reads after the
      // claim; release tells the owner's pop that these slots are taken.
      if (head_.compare_exchange_weak(prev, next, std::memory_order_acq_rel,
                                      std::memory_order_acquire))
        break;
    }
    // Phase 2, copy.
    for (std::uint16_t i = 0; i < n; ++i) {
      dst.buffer_[static_cast<std::uint16_t>(dst_tail + i) & kMask] =
          buffer_[static_cast<std::uint16_t>(first + i) & kMask];
    }
    // Phase 3, release the claimed range. release: pairs with the owner's
    // acquire load of head_ before it reuses these slots.
    prev = next;
    for (;;) {
      std::uint16_t real = real_of(prev);
      if (head_.compare_exchange_weak(prev, with(prev, real, real), std::memory_order_acq_rel,
                                      std::memory_order_acquire))
        return n;
    }
  }

  alignas(64) std::atomic<std::uint64_t> head_{0};
  alignas(64) std::atomic<std::uint16_t> tail_{0};
  alignas(64) std::array<TaskHeader*, Capacity> buffer_{};
};

using StealQueue = BasicStealQueue<256>;

}  // namespace volt::detail
