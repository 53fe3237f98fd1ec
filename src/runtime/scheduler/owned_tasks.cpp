#include "runtime/scheduler/owned_tasks.hpp"

namespace volt::detail {

std::uint64_t next_task_id() noexcept {
  // relaxed: ids only need to be unique, not ordered with anything. Block 0
  // is never handed out: id 0 means "no task" (JoinHandle::id).
  static std::atomic<std::uint64_t> next_block{1};
  thread_local std::uint64_t next = 0;
  thread_local std::uint64_t end = 0;
  if (next == end) {
    next = next_block.fetch_add(1, std::memory_order_relaxed) * kIdBlock;
    end = next + kIdBlock;
  }
  return next++;
}

bool OwnedTasks::bind(TaskHeader* task) noexcept {
  task->id = next_task_id();
  Shard& shard = shard_of(task);
  std::lock_guard lock(shard.mutex);
  if (shard.closed) return false;
  ++shard.bound;
  ++shard.linked;
  task->owned_prev = nullptr;
  task->owned_next = shard.head;
  if (shard.head) shard.head->owned_prev = task;
  shard.head = task;
  task->owned_linked = true;
  return true;
}

bool OwnedTasks::remove(TaskHeader* task) noexcept {
  Shard& shard = shard_of(task);
  std::lock_guard lock(shard.mutex);
  if (!task->owned_linked) return false;  // taken off by close_and_shutdown_all
  if (task->owned_prev) {
    task->owned_prev->owned_next = task->owned_next;
  } else {
    shard.head = task->owned_next;
  }
  if (task->owned_next) task->owned_next->owned_prev = task->owned_prev;
  task->owned_linked = false;
  --shard.linked;
  return true;
}

std::uint64_t OwnedTasks::sum(std::uint64_t Shard::*counter) const noexcept {
  std::uint64_t n = 0;
  for (const Shard& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    n += shard.*counter;
  }
  return n;
}

std::uint64_t OwnedTasks::live() const noexcept {
  return sum(&Shard::linked);
}
std::uint64_t OwnedTasks::spawned() const noexcept {
  return sum(&Shard::bound);
}

void OwnedTasks::close_and_shutdown_all() noexcept {
  for (Shard& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    shard.closed = true;
  }
  for (Shard& shard : shards_) {
    for (;;) {
      TaskHeader* task;
      {
        std::lock_guard lock(shard.mutex);
        task = shard.head;
        if (!task) break;
        shard.head = task->owned_next;
        if (shard.head) shard.head->owned_prev = nullptr;
        task->owned_linked = false;
        --shard.linked;
      }
      // Outside the lock: cancelling runs destructors that may wake or
      // complete other tasks, which call remove() on this shard.
      shutdown_task(task);
    }
  }
}

}  // namespace volt::detail
