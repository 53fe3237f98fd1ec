// Worker: one thread of the multi-thread scheduler and the state only it
// touches (LIFO slot, tick, searching flag, adaptive interval), plus the two
// parts other threads reach: its StealQueue (thieves) and its Parker (wakers).
//
// Finding work, in order (the reference design, docs/design.md, with Tokio's fairness check):
//   0. every `global_interval` ticks, the inject queue first, so that a
//      worker busy with its own tasks still serves remote spawns and wakes;
//   1. the LIFO slot, at most kMaxLifoPolls times in a row, then its task is
//      flushed to the back of the local queue (visible to FIFO order and to
//      thieves);
//   2. the local queue (FIFO);
//   3. a batch from the inject queue (fair share: len / workers, 4..64);
//   4. steal half of another worker's queue (as a searcher; at most half of
//      the workers search), random start victim;
//   5. the inject queue once more;
//   6. park (see park()).
// Between 2 and 4, with I/O sources registered, a non-blocking poll of the
// driver (if no other thread holds it), then the local queue again.
//
// Polling the driver (beyond Tokio, which polls every 61 ticks and on park):
// a worker polls without blocking every kMaintenanceInterval polls, so a busy
// runtime still sees I/O and timers, and, while sockets are registered,
// whenever it runs out of local work. The events it harvests are usually the
// replies to the requests its own tasks just sent; taking them then is
// cheaper than stealing, and much cheaper than parking (idle-set updates,
// and a wake-up the other worker pays when it next finds work). On
// tcp_echo_conns (100 tasks over 2 workers) it costs about one epoll_wait per
// 19 task polls, cut context switches from about 15,000 to 3,000 per run and
// measured 9% faster; on tcp_echo_rtt the next round trip often starts
// without parking, its reply already in. Not without sockets: timers alone do
// not need it, and a CPU-bound runtime would pay a system call each time a
// worker runs dry.
// Deviation from the reference: inject batches go into the local StealQueue rather
// than a separate 32-slot buffer, so tasks fetched in a batch stay stealable
// by idle workers instead of waiting behind a busy one.
//
// Tunables: kMaxLifoPolls = 3 and the 128-poll maintenance period come from
// the reference (and Tokio); the interval bounds 8..255 and 1 ms target come from
// the reference's EWMA table.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "runtime/scheduler/parker.hpp"
#include "runtime/scheduler/steal_queue.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/runtime/stats.hpp"

namespace volt::detail {

class MultiThreadScheduler;

// A counter written by one thread and read by any: a relaxed load and store
// instead of an atomic read-modify-write on the hot path.
class OwnerCounter {
 public:
  void add(std::uint64_t n = 1) noexcept {
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::uint64_t get() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

class Worker {
 public:
  static constexpr std::uint32_t kMaxLifoPolls = 3;
  static constexpr std::uint32_t kMaintenanceInterval = 128;
  static constexpr std::uint32_t kMinGlobalInterval = 8;
  static constexpr std::uint32_t kMaxGlobalInterval = 255;
  static constexpr std::uint32_t kMinInjectBatch = 4;
  static constexpr std::uint32_t kMaxInjectBatch = 64;

  Worker(MultiThreadScheduler& scheduler, std::uint32_t index);

  // Thread body. Returns true after shutdown, having released its queued
  // tasks; false as soon as a poll returns in which the task handed this
  // worker to another thread (block_in_place: tls_context.worker no longer
  // names it), having touched none of its state since.
  bool run() noexcept;

  // Owner thread only (the scheduler checks). A woken task goes to the LIFO
  // slot (cache-hot, runs next); a yielded one to the back of the local queue.
  void schedule_local(TaskHeader* task, bool is_yield) noexcept;
  // Owner thread only. Takes `task` back if it sits in the LIFO slot or at the
  // tail of the local queue (a join of a task this worker spawned and nobody
  // has started: in a fork-join tree, almost every join); the caller gets the
  // entry's reference.
  bool take_local(TaskHeader* task) noexcept {
    if (lifo_ == task) {
      lifo_ = nullptr;
      return true;
    }
    return queue_.pop_back_if(task);
  }

  std::uint32_t index() const noexcept { return index_; }
  StealQueue& queue() noexcept { return queue_; }
  Parker& parker() noexcept { return parker_; }
  // Polls started so far (a snapshot from any thread: a worker whose count
  // does not move is inside one poll, or idle).
  std::uint64_t polls() const noexcept { return polled_.get(); }
  // A poll a join ran in place on this worker's thread (MultiThreadScheduler).
  void count_inline_poll() noexcept { polled_.add(); }
  std::thread& thread() noexcept { return thread_; }
  WorkerStats stats() const noexcept;

 private:
  TaskHeader* next_task() noexcept;
  TaskHeader* next_from_inject() noexcept;
  TaskHeader* steal_work() noexcept;
  // False if the poll handed this worker off (see run()).
  bool run_task(TaskHeader* task) noexcept;
  void maintenance() noexcept;
  // Non-blocking driver poll if the driver is free; false if another thread
  // holds it. Tasks it wakes go to our local queue (in_driver_).
  bool poll_driver() noexcept;
  void park() noexcept;
  void release_queued_tasks() noexcept;
  std::uint32_t next_random() noexcept;

  MultiThreadScheduler& scheduler_;
  const std::uint32_t index_;

  // Reached by thieves and wakers; on their own cache lines (inside).
  StealQueue queue_;
  alignas(64) Parker parker_;

  // Owner thread only.
  alignas(64) TaskHeader* lifo_ = nullptr;
  std::uint32_t lifo_polls_ = 0;
  std::uint32_t tick_ = 0;
  std::uint32_t polls_since_maintenance_ = 0;
  std::uint32_t global_interval_ = 20;  // the reference's default (50 us tasks)
  double avg_task_ns_ = 50'000.0;
  std::uint64_t batch_start_ns_ = 0;
  std::uint64_t rng_;
  bool is_searching_ = false;
  // Set while this thread polls or sleeps in the driver (park, poll_driver):
  // the wake-ups the driver issues here (timers, later I/O) go to the back of
  // our local queue, not the LIFO slot, and wake nobody one by one; we run
  // them as soon as the driver returns, and wake one sibling if there is more
  // than one (Tokio's should_notify_others), where thieves can take them.
  // Only this thread reads or writes it (the reference makes it atomic because its
  // spawnFromWorker may target another worker; ours never does).
  bool in_driver_ = false;

  // Written by the owner, read by stats().
  OwnerCounter polled_, lifo_hits_, steal_ops_, stolen_, parks_, batches_, overflows_;
  std::atomic<std::uint32_t> published_interval_{20};

  std::thread thread_;
};

}  // namespace volt::detail
