#include "runtime/blocking/blocking_pool.hpp"

#include <pthread.h>
#include <sched.h>

#include <system_error>
#include <thread>

#include "detail/thread_parker.hpp"
#include "io/driver.hpp"
#include "volt/detail/spin_lock.hpp"
#include "volt/task/join_handle.hpp"

namespace volt::detail {

namespace {
// The pool whose thread this is (a blocking function shutting its own runtime
// down must not wait for itself).
thread_local BlockingPool* tls_pool = nullptr;
// The job this thread is running (null between jobs, and on every other
// thread), and whether it already counts in its pool's finishing_.
thread_local const TaskHeader* tls_job = nullptr;
thread_local bool tls_finishing = false;
}  // namespace

void blocking_job_finishing() noexcept {
  BlockingPool* pool = tls_pool;
  if (pool == nullptr || tls_job == nullptr || tls_finishing) return;
  const std::lock_guard lock(pool->mutex_);
  ++pool->finishing_;
  tls_finishing = true;
}

void blocking_job_completing(const TaskHeader* task) noexcept {
  // Only the job this thread runs: a pool thread also completes other tasks
  // (those a blocking function runs through a current-thread runtime's
  // block_on), and counting itself finishing then would leave the job's own
  // next spawn waiting for it.
  if (task == tls_job) blocking_job_finishing();
}

BlockingPool::BlockingPool(BlockingPoolConfig config, Scheduler* runtime, Driver& driver)
    : config_(std::move(config)), runtime_(runtime), driver_(driver) {}

void BlockingPool::job_done() noexcept {
  // seq_cst, for two partners. in_flight()'s seq_cst load (the paused
  // clock's auto-advance) reads 0 only after the job's completion and the
  // wake-ups it issued (the release half). And a Dekker pair with that
  // runtime, which pauses the clock (seq_cst store) and then reads
  // in_flight(): either it sees 0 or we see the pause and unpark it.
  if (in_flight_.fetch_sub(1, std::memory_order_seq_cst) == 1 && driver_.time().is_paused_seq_cst())
    driver_.unpark();
}

void BlockingPool::spawn(TaskHeader* task) noexcept {
  // Of the three initial references, the owned list's is not used here (the
  // queue is the only list a blocking task is on); see MultiThreadScheduler.
  (void)task->state.ref_dec();  // not the last: the JoinHandle's remains
  enqueue(task);
}

void BlockingPool::schedule(TaskHeader* task) noexcept {
  // A blocking task never suspends, so it is only woken while queued or
  // running (no submit). Kept correct for completeness: queue it again.
  enqueue(task);
}

void BlockingPool::enqueue(TaskHeader* task) noexcept {
  std::unique_lock lock(mutex_);
  if (shutdown_) {
    // Shut down: cancel it (runtime_shutdown); consumes the queue reference.
    lock.unlock();
    shutdown_task(task);
    return;
  }
  in_flight_.fetch_add(1, std::memory_order_seq_cst);
  task->queue_next = nullptr;
  if (tail_) {
    tail_->queue_next = task;
  } else {
    head_ = task;
  }
  tail_ = task;
  ++queued_;
  has_work_.store(true, std::memory_order_relaxed);
  // A spinning thread takes the first job (it locks and pops once it sees
  // has_work_, or finds the job under the lock when its spin ends).
  if (queued_ <= spinning_) return;
  if (queued_ == 1) spin_worthwhile_ = std::chrono::steady_clock::now() - last_done_ < kSpinWindow;
  if (idle_ > 0) {
    --idle_;
    ++notify_;
    lock.unlock();
    work_cv_.notify_one();
    return;
  }
  // Nobody idle: a thread completing its job will look in a moment.
  if (queued_ <= spinning_ + finishing_) return;
  if (threads_ >= config_.max_threads) return;  // waits for a busy thread
  ++threads_;
  ++alive_;
  const std::uint64_t id = next_thread_id_++;
  lock.unlock();
  // Both references are the thread's, released when it exits.
  retain();
  runtime_->retain();
  try {
    std::thread([this, id] {
      std::string name = config_.thread_name + "-blk" + std::to_string(id);
      if (name.size() > 15) name.resize(15);  // the kernel's limit
      ::pthread_setname_np(::pthread_self(), name.c_str());
      run_thread();
    }).detach();
  } catch (const std::system_error&) {
    // No thread (resource limits). Work already queued still runs on the
    // threads that exist; with none left, cancel it rather than hang.
    release_reference();
    runtime_->release_reference();
    TaskHeader* orphans = nullptr;
    lock.lock();
    if (--alive_ <= 1) exit_cv_.notify_all();
    if (--threads_ == 0) {
      orphans = head_;
      head_ = tail_ = nullptr;
      queued_ = 0;
      has_work_.store(false, std::memory_order_relaxed);  // a hint; the lock orders it
    }
    lock.unlock();
    cancel_jobs(orphans);
  }
}

void BlockingPool::cancel_jobs(TaskHeader* list) noexcept {
  while (list) {
    TaskHeader* next = list->queue_next;
    shutdown_task(list);  // consumes the queue reference
    job_done();
    list = next;
  }
}

TaskHeader* BlockingPool::pop_locked() noexcept {
  TaskHeader* task = head_;
  if (task) {
    head_ = task->queue_next;
    if (!head_) {
      tail_ = nullptr;
      has_work_.store(false, std::memory_order_relaxed);
    }
    --queued_;
  }
  return task;
}

void BlockingPool::run_thread() noexcept {
  tls_context.entered = runtime_;
  tls_pool = this;
  if (config_.on_thread_start) config_.on_thread_start();
  std::unique_lock lock(mutex_);
  for (;;) {
    while (TaskHeader* task = pop_locked()) {
      lock.unlock();
      tls_job = task;
      poll_task(task);
      tls_job = nullptr;
      job_done();
      const auto done = std::chrono::steady_clock::now();
      lock.lock();
      last_done_ = done;
      if (tls_finishing) {
        --finishing_;
        tls_finishing = false;
      }
    }
    if (shutdown_) break;
    if (spin_worthwhile_ && spinning_ == 0) {
      spinning_ = 1;
      lock.unlock();
      spin_for_work(std::chrono::steady_clock::now() + kSpinWindow);
      lock.lock();
      spinning_ = 0;
      // A job queued while we spun counted on us (queued_ <= spinning_): it
      // is in the queue now, whether or not the spin saw it.
      if (head_) continue;
      if (shutdown_) break;
    }
    // Idle: wait for a claim, shutdown, or the keep-alive to run out.
    ++idle_;
    // Saturated: a keep-alive of nanoseconds::max() means "stay for good".
    const auto now = std::chrono::steady_clock::now();
    const auto deadline = std::chrono::steady_clock::time_point::max() - now < config_.keep_alive
                              ? std::chrono::steady_clock::time_point::max()
                              : now + config_.keep_alive;
    bool claimed = false;
    for (;;) {
      if (notify_ > 0) {
        --notify_;  // the spawner already took us off idle_
        claimed = true;
        break;
      }
      if (shutdown_) {
        --idle_;
        break;
      }
      if (work_cv_.wait_until(lock, deadline) == std::cv_status::timeout && notify_ == 0 &&
          !shutdown_) {
        --idle_;
        break;
      }
    }
    if (!claimed && !shutdown_ && !head_) break;  // keep-alive ran out
  }
  --threads_;  // decided to leave: no longer counted for new work
  lock.unlock();
  if (config_.on_thread_stop) config_.on_thread_stop();
  tls_context.entered = nullptr;
  tls_pool = nullptr;
  lock.lock();
  if (--alive_ <= 1) exit_cv_.notify_all();  // 1: a blocking function may be waiting
  lock.unlock();
  Scheduler* runtime = runtime_;
  release_reference();  // may free the pool: nothing of `this` after this line
  runtime->release_reference();
}

void BlockingPool::spin_for_work(std::chrono::steady_clock::time_point until) const noexcept {
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      if (has_work_.load(std::memory_order_relaxed)) return;
      SpinLock::pause();
    }
    if (std::chrono::steady_clock::now() >= until) return;
    // Another thread runnable on this CPU (the task that would queue our
    // next job, when the two share it) runs first.
    ::sched_yield();
  }
}

void BlockingPool::block_until_complete(TaskHeader* task) {
  ThreadParker& parker = ThreadParker::current();
  if (!join_handle_register(task, parker.waker())) return;  // already complete
  while (!task->state.load().is_complete())
    parker.park();
}

bool BlockingPool::shutdown(std::chrono::nanoseconds timeout) noexcept {
  TaskHeader* queued;
  {
    std::lock_guard lock(mutex_);
    if (!shutdown_) {
      shutdown_ = true;
      // release: pairs with the acquire in is_shutting_down().
      shutting_down_.store(true, std::memory_order_release);
    }
    queued = head_;
    head_ = tail_ = nullptr;
    queued_ = 0;
    has_work_.store(false, std::memory_order_relaxed);  // a hint; the lock orders it
  }
  work_cv_.notify_all();
  cancel_jobs(queued);  // work that never started: its handle reports runtime_shutdown
  std::unique_lock lock(mutex_);
  // Called from one of our own threads (a blocking function dropped the
  // last Runtime): wait for the others only.
  const std::uint32_t self = tls_pool == this ? 1 : 0;
  auto exited = [&] { return alive_ <= self; };
  if (timeout >= std::chrono::hours(24 * 365)) {
    exit_cv_.wait(lock, exited);  // "forever": now() + max would overflow
    return true;
  }
  return exit_cv_.wait_for(lock, timeout, exited);
}

BlockingPoolStats BlockingPool::stats() const {
  std::lock_guard lock(mutex_);
  BlockingPoolStats s;
  s.threads = threads_;
  // A spinning thread is idle too, unless a queued job already counts on it.
  s.idle_threads = idle_ + (spinning_ > queued_ ? spinning_ - queued_ : 0);
  s.queue_depth = queued_;
  return s;
}

}  // namespace volt::detail
