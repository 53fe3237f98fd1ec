// InjectQueue: the scheduler's global FIFO of runnable tasks.
//
// Receives tasks spawned or woken from outside the workers, the overflow of a
// full local queue (in batches of half its capacity), and yields from threads
// that are not workers. Workers take from it in batches (pop_batch), so the
// lock is amortised over many tasks.
//
// An intrusive singly-linked list through TaskHeader::queue_next (no
// allocation per push) under a SpinLock, with the length mirrored in an
// atomic so that the hot "is there anything?" checks never take the lock.
//
// Why a SpinLock: every critical section is a few pointer writes. A push
// links one chain at the tail; a pop that wants at least what is queued
// detaches the whole list without reading a task (the common case when a
// worker keeps up with its spawners); only a pop of part of a longer list
// walks it, up to kMaxInjectBatch cold task headers. With std::mutex, a
// thread spawning into a 1-worker runtime from outside blocked in the
// kernel whenever it met the worker's pop, and each unlock was a futex
// wake: about 20 % of spawn_many_remote's profile when the two ran side by
// side on two CPUs. Detaching without a walk and spinning instead took that
// mode from 400-450 to 330-370 ns a spawn (alternated runs; docs/
// benchmarks.md). SpinLock yields the CPU after a bounded spin, so a
// preempted holder still gets to run when threads outnumber CPUs (the same
// lock guards OwnedTasks' shards, which every spawner also takes).
//
// After close(), pushes are refused (the caller drops the entry's reference):
// that is how wake-ups arriving after shutdown release their tasks.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>

#include "volt/detail/spin_lock.hpp"
#include "volt/detail/task_header.hpp"

namespace volt::detail {

class InjectQueue {
 public:
  InjectQueue() = default;
  InjectQueue(const InjectQueue&) = delete;
  InjectQueue& operator=(const InjectQueue&) = delete;

  // False if closed: the task was not queued and the caller keeps the reference.
  [[nodiscard]] bool push(TaskHeader* task) noexcept { return push_batch(task, task, 1); }

  // Pushes the chain first..last (linked through queue_next), `count` tasks.
  [[nodiscard]] bool push_batch(TaskHeader* first, TaskHeader* last, std::size_t count) noexcept;

  TaskHeader* pop() noexcept;

  // Pops up to `max` tasks as a chain linked through queue_next (last link
  // null); returns the first, count in `*popped`.
  TaskHeader* pop_batch(std::size_t max, std::size_t* popped) noexcept;

  // relaxed: a hint. Callers that must not miss a concurrent push (the parking
  // protocol) issue a seq_cst fence before reading it; see IdleSet.
  std::size_t len() const noexcept { return len_.load(std::memory_order_relaxed); }
  bool is_empty() const noexcept { return len() == 0; }

  void close() noexcept;
  bool is_closed() const noexcept;

 private:
  mutable SpinLock mutex_;
  TaskHeader* head_ = nullptr;  // guarded by mutex_
  TaskHeader* tail_ = nullptr;  // guarded by mutex_
  bool closed_ = false;         // guarded by mutex_
  // Written only under mutex_; read without it as a hint (see len()).
  alignas(64) std::atomic<std::size_t> len_{0};
};

}  // namespace volt::detail
