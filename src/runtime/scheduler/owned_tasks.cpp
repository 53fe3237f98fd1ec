#include "runtime/scheduler/owned_tasks.hpp"

namespace volt::detail {

bool OwnedTasks::bind(TaskHeader* task) noexcept {
  task->id = next_id_.fetch_add(1, std::memory_order_relaxed);
  Shard& shard = shard_of(task);
  std::lock_guard lock(shard.mutex);
  if (shard.closed) return false;
  task->owned_prev = nullptr;
  task->owned_next = shard.head;
  if (shard.head) shard.head->owned_prev = task;
  shard.head = task;
  task->owned_linked = true;
  live_.fetch_add(1, std::memory_order_relaxed);
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
  live_.fetch_sub(1, std::memory_order_relaxed);
  return true;
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
        live_.fetch_sub(1, std::memory_order_relaxed);
      }
      // Outside the lock: cancelling runs destructors that may wake or
      // complete other tasks, which call remove() on this shard.
      shutdown_task(task);
    }
  }
}

}  // namespace volt::detail
