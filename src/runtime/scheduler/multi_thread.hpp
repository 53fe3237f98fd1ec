// MultiThreadScheduler: the work-stealing scheduler (the reference design, docs/design.md),
// owner of the workers, the inject queue, the idle set, the owned-task list
// and the driver. Worker-local policy lives in worker.hpp; this file routes
// tasks to queues and runs start-up and shutdown.
//
// Routing a runnable task:
//   - on one of our workers (TLS), not parking: that worker's LIFO slot (a
//     wake or spawn) or the back of its local queue (a yield);
//   - anywhere else: the inject queue, then wake a sleeper if nobody searches.
//
// Shutdown (shutdown()):
//   1. set shutting_down_, close the inject queue (later pushes release their
//      task instead), unpark every worker;
//   2. each worker finishes its current poll, leaves its loop and releases the
//      references its LIFO slot and local queue hold;
//   3. once the workers have exited (or the timeout passed), close the owned
//      list and cancel every task on it: idle tasks are claimed and their
//      frames destroyed here; a task still running on a stuck worker is
//      marked cancelled and its worker destroys it when the poll returns;
//   4. release whatever is left in the inject queue.
//
// Threads blocked in block_on / JoinHandle::join (reference: blockOnComplete) wait
// on their join waker and register as helpers. When work is pushed while no
// worker sleeps or searches (every worker is busy), notify_parked() wakes one
// helper. Busy is not stuck: the helper watches for kStuckAfterNs (10 ms),
// unregistered, and only if no worker began a poll meanwhile (each is inside
// one long poll) and work is still queued, it runs inject-queue tasks until
// the queue is empty or its own task completes. A helper never takes work
// that an idle or merely busy worker would have taken, so work is not pulled
// off the workers' LIFO/local fast paths.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "detail/thread_parker.hpp"
#include "runtime/runtime_core.hpp"
#include "runtime/scheduler/idle_set.hpp"
#include "runtime/scheduler/inject_queue.hpp"
#include "runtime/scheduler/owned_tasks.hpp"
#include "runtime/scheduler/worker.hpp"

namespace volt::detail {

class MultiThreadScheduler final : public RuntimeCore {
 public:
  explicit MultiThreadScheduler(RuntimeConfig config);
  ~MultiThreadScheduler() override;

  // Scheduler
  void spawn(TaskHeader* task) noexcept override;
  void schedule(TaskHeader* task) noexcept override;
  void schedule_yield(TaskHeader* task) noexcept override;
  bool take_queued(TaskHeader* task) noexcept override;
  void count_inline_poll() noexcept override;
  bool release(TaskHeader* task) noexcept override { return owned_.remove(task); }
  void block_until_complete(TaskHeader* task) override;
  bool is_shutting_down() const noexcept override {
    // acquire: pairs with the release in shutdown(); workers leaving their
    // loop see everything shutdown() did before setting the flag.
    return shutting_down_.load(std::memory_order_acquire);
  }

  // RuntimeCore
  void start() override;
  void shutdown(std::chrono::nanoseconds timeout) noexcept override;
  RuntimeStats stats() const override;

  // For workers. `caller_holds_reference`: the caller keeps a reference of
  // its own on the task through the call (a spawn's JoinHandle), so the task's
  // cell, and through it this scheduler, outlives the call anyway; otherwise
  // (a consuming wake) the call takes one of its own, see the definition.
  void schedule_remote(TaskHeader* task, bool caller_holds_reference) noexcept;
  void notify_parked() noexcept;
  // notify_parked() for a worker's own push (its local queue): with one
  // worker there is nobody to wake, see the definition.
  void notify_parked_from_worker() noexcept;
  // True if any queue holds work a searcher could take (the last searcher's
  // re-check before it sleeps).
  bool has_pending_work() const noexcept;
  InjectQueue& inject() noexcept { return inject_; }
  IdleSet& idle() noexcept { return idle_; }
  std::vector<std::unique_ptr<Worker>>& workers() noexcept { return workers_; }
  std::uint32_t num_workers() const noexcept { return static_cast<std::uint32_t>(workers_.size()); }
  void worker_exited() noexcept;
  // Wakes (without claiming) a parked worker other than `from`, so that it
  // re-parks in the driver that `from` just left.
  void hand_off_driver(std::uint32_t from) noexcept;
  // RuntimeCore: a timer was registered while nobody holds the driver.
  void on_unattended_timer() noexcept override { hand_off_driver(num_workers()); }
  // RuntimeCore: block_in_place. On a worker thread (inside a poll), starts a
  // fresh thread that continues the worker's loop, and clears
  // tls_context.worker: the calling thread is no longer the worker, and leaves
  // the loop once the poll returns (Worker::run). Elsewhere, or if shutting
  // down: nothing (fn runs in place). Throws std::system_error if the thread
  // cannot be made, having changed nothing.
  void hand_off_worker() override;

 private:
  void schedule_task(TaskHeader* task, bool is_yield, bool caller_holds_reference) noexcept;
  // The thread that runs worker `index` (at start, or after a hand-off).
  std::thread make_worker_thread(Worker* worker, std::uint32_t index);
  // A thread that handed its worker off (block_in_place) ended.
  void retired_thread_exited() noexcept;
  void wake_helper() noexcept;
  // wake_helper() if a thread offers help, nobody searches and the inject
  // queue holds work (notify_parked() found no sleeper to wake).
  void offer_to_helper() noexcept;
  // A woken helper's watch: sleeps kStuckAfterNs (or until `task`
  // completes), then true if work is still queued and no worker began a
  // poll meanwhile or went to sleep.
  bool workers_stuck(ThreadParker& parker, TaskHeader* task) noexcept;
  static constexpr std::int64_t kStuckAfterNs = 10'000'000;

  // A thread blocked in block_until_complete, offering to run queued work.
  struct BlockedHelper {
    ThreadParker* parker;
    BlockedHelper* prev = nullptr;  // guarded by helpers_mutex_
    BlockedHelper* next = nullptr;  // guarded by helpers_mutex_
    bool claimed = false;           // guarded by helpers_mutex_
  };

  InjectQueue inject_;
  IdleSet idle_;
  OwnedTasks owned_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<bool> shutting_down_{false};
  std::atomic<std::uint64_t> remote_schedules_{0};  // statistics; relaxed
  std::atomic<std::uint64_t> helper_polls_{0};      // statistics; relaxed

  std::mutex helpers_mutex_;
  BlockedHelper* helpers_ = nullptr;  // guarded by helpers_mutex_
  // The list's length, for the lock-free check in notify_parked().
  std::atomic<std::uint32_t> num_helpers_{0};

  std::mutex exit_mutex_;
  std::condition_variable exit_cv_;
  std::uint32_t workers_exited_ = 0;  // guarded by exit_mutex_
  bool shutdown_done_ = false;        // guarded by exit_mutex_
  // block_in_place: each Worker's thread() is the thread running its loop now
  // (guarded by exit_mutex_ while a hand-off can happen: hand-offs stop once
  // shutdown_done_ is set, so shutdown() then reads them unlocked). A thread
  // that handed its worker off is detached and counts in retired_live_ until
  // it ends; shutdown waits for those too.
  std::uint32_t retired_live_ = 0;  // guarded by exit_mutex_
};

}  // namespace volt::detail
