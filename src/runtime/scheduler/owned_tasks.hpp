// OwnedTasks: every live task of one runtime, so that shutdown can cancel the
// ones that no queue holds (waiting on something that will never happen).
//
// The reference's reference implementation has no such list and leaks every idle
// task at shutdown. Here each task is linked in at spawn (bind) and unlinked
// when it completes (remove), each holding one reference while linked.
//
// Sharded intrusive doubly-linked lists (links in TaskHeader) with one mutex
// per shard (a SpinLock: the critical sections are a few pointer writes).
// The shard is chosen by the block of ids the task's id came from, and each
// thread draws its ids in blocks of kIdBlock: a thread's spawns go to one
// shard at a time, and two threads' to different shards, so that a shard's
// line (and the neighbouring task headers a link or unlink writes) stays in
// the cache of the core that spawns there. (By id alone, consecutive spawns
// cycled through every shard, and two workers bounced all 32 lines between
// them: OwnedTasks::bind and remove were 11% of fork_nqueens at 2 workers.)
// close() refuses further binds; close_and_shutdown_all() takes every task
// off and hands it to shutdown_task.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>

#include "volt/detail/spin_lock.hpp"

#include "volt/detail/task_header.hpp"

namespace volt::detail {

// Ids a thread draws at a time (next_task_id), and OwnedTasks' unit of
// sharding. A guess: one shared RMW per 256 spawns.
inline constexpr std::uint64_t kIdBlock = 256;

class OwnedTasks {
 public:
  OwnedTasks() = default;
  OwnedTasks(const OwnedTasks&) = delete;
  OwnedTasks& operator=(const OwnedTasks&) = delete;

  // Assigns the task its id and links it. False if closed (not linked).
  [[nodiscard]] bool bind(TaskHeader* task) noexcept;
  // True if the task was linked (the caller drops the list's reference).
  [[nodiscard]] bool remove(TaskHeader* task) noexcept;
  // Refuses further binds, then unlinks every task and calls shutdown_task on
  // it (handing over the list's reference).
  void close_and_shutdown_all() noexcept;

  // Statistics: tasks linked now (sums the shards under their locks), and
  // tasks ever bound.
  std::uint64_t live() const noexcept;
  std::uint64_t spawned() const noexcept;

 private:
  static constexpr std::size_t kShards = 32;  // a guess: > workers on common machines
  struct alignas(64) Shard {
    mutable SpinLock mutex;
    TaskHeader* head = nullptr;  // guarded by mutex
    std::uint64_t linked = 0;    // guarded by mutex
    std::uint64_t bound = 0;     // guarded by mutex
    bool closed = false;         // guarded by mutex
  };
  Shard& shard_of(const TaskHeader* task) noexcept {
    return shards_[(task->id / kIdBlock) % kShards];
  }
  std::uint64_t sum(std::uint64_t Shard::*counter) const noexcept;

  std::array<Shard, kShards> shards_;
};

// Process-unique task ids, handed to each thread in blocks of kIdBlock
// (aligned: a block's ids share id / kIdBlock) so that spawning does not
// contend on one counter.
std::uint64_t next_task_id() noexcept;

}  // namespace volt::detail
