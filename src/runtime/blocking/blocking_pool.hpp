// BlockingPool: threads for work that blocks (spawn_blocking).
//
// A blocking task is an ordinary task cell (so JoinHandle, abort, exceptions
// and the completion protocol are the ones of every task) whose scheduler is
// this pool: its Task runs the user's function in one poll that never
// suspends. The pool is its own Scheduler so that the task's lifetime
// reference, wake-ups and joins route here, not to the workers.
//
// Threads (Tokio's blocking pool shape):
//  - Created on demand: a spawn that finds no idle thread starts one, up to
//    max_threads; beyond that, work waits in the FIFO queue.
//  - An idle thread waits on the condition variable for keep_alive, then
//    exits. A spawn that finds an idle thread claims it (idle_ -= 1,
//    notify_ += 1, notify_one): a wake-up is counted, so a spurious or
//    timed-out return of a thread that was not claimed is told apart from a
//    claim, and no claim is lost to a thread that timed out meanwhile.
//  - A thread that runs out of work first spins for a moment (kSpinWindow)
//    before it sleeps, if the work before came back that quickly: a task
//    that runs blocking jobs one after another (fs::write in a loop) then
//    hands each to a thread that is still awake, instead of paying a futex
//    wake and the wake-up of an idle CPU (30-40 us on this project's VMs)
//    for each. At most one thread spins at a time, and only while the gaps
//    between its jobs stay under the window, so a pool whose work is sparse
//    sleeps at once. A spinning thread counts as claimed by the first job
//    queued while it spins (spinning_): that job wakes nobody.
//  - So does a thread that finished its job and is only waking the job's
//    awaiter (finishing_, from blocking_job_finishing()), when no thread is
//    idle: the awaiter often spawns the next job at once, and a thread
//    started for it would find it already taken by this one, which is back
//    a moment later. Only the wake-up may be left: no user code runs on the
//    thread after it reports (a result or capture destructor, or an
//    unhandled-exception hook, that waits for a job it spawns would wait for
//    itself), so the report is made in the task's completion, after its
//    frame and the function are destroyed and only if a JoinHandle waits.
//  - Each thread holds a lifetime reference on the pool and on its runtime,
//    and marks the runtime as entered (Handle::current() works inside the
//    function, and blocking on a JoinHandle is allowed there).
//
// Shutdown: queued work that has not started is cancelled (its handle reports
// errc::runtime_shutdown); work that is running finishes; shutdown() waits for
// the threads at most `timeout` (the runtime's shutdown_timeout), and threads
// still running after it finish in the background. Spawning after shutdown
// cancels the task at once with errc::runtime_shutdown.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "runtime/unhandled_exception.hpp"
#include "volt/detail/task_header.hpp"

namespace volt::detail {

// Called on a blocking-pool thread when only waking the job's awaiter is
// left (the file engine's job, before it completes its operation): the pool
// may then hand this thread the next job instead of starting another.
// Elsewhere, between jobs, and a second time for the same job, it does
// nothing.
void blocking_job_finishing() noexcept;
// complete() (src/task/harness.cpp), just before it wakes a JoinHandle's
// awaiter: blocking_job_finishing() if `task` is the job this thread runs.
void blocking_job_completing(const TaskHeader* task) noexcept;

struct BlockingPoolConfig {
  std::uint32_t max_threads = 512;
  std::chrono::nanoseconds keep_alive = std::chrono::seconds(10);
  std::string thread_name;
  std::function<void()> on_thread_start;
  std::function<void()> on_thread_stop;
  // The runtime's Builder::on_unhandled_exception hook (null: print).
  SharedUnhandledExceptionHook on_unhandled_exception;
};

struct BlockingPoolStats {
  std::uint64_t threads = 0;       // alive (running work or idle)
  std::uint64_t idle_threads = 0;  // waiting for work
  std::uint64_t queue_depth = 0;   // spawned, not yet started
};

class Driver;

class BlockingPool final : public Scheduler {
 public:
  // `runtime` is the runtime the threads enter; it must outlive the pool's
  // owner reference (each thread also holds a reference on it). `driver` is
  // that runtime's driver: when the last job in flight ends while its clock
  // is paused, the driver is unparked so the runtime re-considers
  // auto-advance (it does not advance while blocking work is in flight).
  BlockingPool(BlockingPoolConfig config, Scheduler* runtime, Driver& driver);

  // Scheduler
  void spawn(TaskHeader* task) noexcept override;
  void schedule(TaskHeader* task) noexcept override;
  void schedule_yield(TaskHeader* task) noexcept override { schedule(task); }
  bool release(TaskHeader*) noexcept override { return false; }  // no owned list
  void block_until_complete(TaskHeader* task) override;
  bool is_shutting_down() const noexcept override {
    return shutting_down_.load(std::memory_order_acquire);  // pairs with shutdown()
  }
  void unhandled_exception(TaskHeader* task, std::exception_ptr e) noexcept override {
    deliver_unhandled_exception(config_.on_unhandled_exception.get(), task->id, true, std::move(e));
  }

  // Cancels queued work, then waits at most `timeout` for running work.
  // Idempotent. Returns true if every thread exited.
  bool shutdown(std::chrono::nanoseconds timeout) noexcept;
  BlockingPoolStats stats() const;
  // Queued plus running tasks (auto-advance of a paused clock waits for 0).
  // seq_cst: see job_done().
  std::uint64_t in_flight() const noexcept { return in_flight_.load(std::memory_order_seq_cst); }

 private:
  ~BlockingPool() override = default;
  void enqueue(TaskHeader* task) noexcept;
  friend void blocking_job_finishing() noexcept;
  void run_thread() noexcept;
  TaskHeader* pop_locked() noexcept;
  // Spins (without the lock) until has_work_ or `until`.
  void spin_for_work(std::chrono::steady_clock::time_point until) const noexcept;

  void job_done() noexcept;
  // Cancels a detached queue_next chain of jobs that never started.
  void cancel_jobs(TaskHeader* list) noexcept;

  const BlockingPoolConfig config_;
  Scheduler* const runtime_;
  Driver& driver_;
  std::atomic<bool> shutting_down_{false};
  // Queued + running. seq_cst (job_done's Dekker pair with a paused clock);
  // a reader that sees 0 also sees the completed jobs' effects.
  std::atomic<std::uint64_t> in_flight_{0};

  mutable std::mutex mutex_;
  std::condition_variable work_cv_;  // idle threads wait here
  std::condition_variable exit_cv_;  // shutdown waits here for threads_ == 0
  TaskHeader* head_ = nullptr;       // guarded by mutex_; FIFO via queue_next
  TaskHeader* tail_ = nullptr;       // guarded by mutex_
  std::uint64_t queued_ = 0;         // guarded by mutex_
  // Threads counted against max_threads: a thread leaving on keep-alive stops
  // counting the moment it decides (under the lock), so a spawn right after
  // starts a new thread instead of queueing behind one that will not look.
  std::uint32_t threads_ = 0;  // guarded by mutex_
  // Threads not yet finished (shutdown waits for these, less its own thread
  // when a blocking function shuts its runtime down).
  std::uint32_t alive_ = 0;           // guarded by mutex_
  std::uint32_t idle_ = 0;            // guarded by mutex_; idle and unclaimed
  std::uint32_t notify_ = 0;          // guarded by mutex_; claims not yet taken
  std::uint64_t next_thread_id_ = 0;  // guarded by mutex_
  bool shutdown_ = false;             // guarded by mutex_

  // Spin before sleeping (see the top). Tokio's threads sleep at once.
  static constexpr std::chrono::nanoseconds kSpinWindow = std::chrono::microseconds(100);
  // 0 or 1: a thread spinning for work, which the first job queued meanwhile
  // relies on instead of waking or starting a thread.
  std::uint32_t spinning_ = 0;  // guarded by mutex_
  // Threads between blocking_job_finishing() and their next look at the
  // queue (each counts itself once: tls_finishing in the .cpp).
  std::uint32_t finishing_ = 0;  // guarded by mutex_
  // When a job last finished, and whether the job queued after it came
  // within kSpinWindow of that (judged by enqueue() when it found nobody
  // spinning; a job a spinner takes keeps it true). Pool-wide, not per
  // thread: with several threads the one that finished last is rarely the
  // one woken next.
  std::chrono::steady_clock::time_point last_done_;  // guarded by mutex_
  bool spin_worthwhile_ = true;                      // guarded by mutex_
  // A hint that the queue is not empty, read by the spinning thread without
  // the lock. relaxed: the job itself is taken under mutex_, which orders
  // it; a stale false only makes the spinner look once more, a stale true
  // makes it take the lock and find out.
  std::atomic<bool> has_work_{false};
};

}  // namespace volt::detail
