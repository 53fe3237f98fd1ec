#include "runtime/scheduler/multi_thread.hpp"

#include <chrono>

#include <pthread.h>

#include <cstdio>

#include "detail/thread_parker.hpp"
#include "volt/task/join_handle.hpp"

namespace volt::detail {

MultiThreadScheduler::MultiThreadScheduler(RuntimeConfig config)
    : RuntimeCore(std::move(config)), idle_(config_.worker_threads) {
  workers_.reserve(config_.worker_threads);
  for (std::uint32_t i = 0; i < config_.worker_threads; ++i)
    workers_.push_back(std::make_unique<Worker>(*this, i));
}

MultiThreadScheduler::~MultiThreadScheduler() {
  // Reached only after shutdown() (the Runtime calls it) and after every
  // worker thread dropped its reference, so no thread is left to join.
  for (auto& worker : workers_) {
    if (worker->thread().joinable()) worker->thread().detach();
  }
}

void MultiThreadScheduler::start() {
  for (std::uint32_t i = 0; i < workers_.size(); ++i)
    workers_[i]->thread() = make_worker_thread(workers_[i].get(), i);
}

std::thread MultiThreadScheduler::make_worker_thread(Worker* worker, std::uint32_t index) {
  return std::thread([core = shared_from_this(), this, worker, index] {
    std::string name = config_.thread_name + "-" + std::to_string(index);
    if (name.size() > 15) name.resize(15);  // the kernel's limit
    ::pthread_setname_np(::pthread_self(), name.c_str());
    // Task references in advance (task_credit.cpp): this thread's spawns
    // and deallocations then take no RMW on the shared lifetime count.
    Scheduler::adopt_task_credit(this);
    if (config_.on_thread_start) config_.on_thread_start();
    const bool kept_worker = worker->run();
    if (config_.on_thread_stop) config_.on_thread_stop();
    if (kept_worker) {
      worker_exited();
    } else {
      retired_thread_exited();  // block_in_place: another thread runs the worker
    }
    // Before `core`: what the thread holds goes back while the owners'
    // reference is still there (a cell freed later on this thread, by a
    // thread-local's destructor, releases its reference the shared way).
    Scheduler::return_task_credit();
    // `core` may be the last reference: it goes when this lambda returns.
  });
}

void MultiThreadScheduler::worker_exited() noexcept {
  std::lock_guard lock(exit_mutex_);
  ++workers_exited_;
  exit_cv_.notify_all();
}

void MultiThreadScheduler::retired_thread_exited() noexcept {
  std::lock_guard lock(exit_mutex_);
  --retired_live_;
  exit_cv_.notify_all();
}

namespace {
// The scheduler whose worker this thread handed off (block_in_place), if
// any: the thread is then one of its retired threads until it ends.
thread_local const MultiThreadScheduler* tls_retired_from = nullptr;
}  // namespace

void MultiThreadScheduler::hand_off_worker() {
  ThreadContext& ctx = tls_context;
  if (ctx.scheduler != this || !ctx.worker) return;  // a helper thread: no worker to pass on
  auto* worker = static_cast<Worker*>(ctx.worker);
  {
    std::lock_guard lock(exit_mutex_);
    if (shutdown_done_) return;  // the loop ends after this poll anyway
    // May throw std::system_error (no thread to be had): nothing changed.
    std::thread next = make_worker_thread(worker, worker->index());
    // From here the new thread owns the worker's loop state (the LIFO slot,
    // tick, searching flag...): this thread touches none of it again.
    // std::thread's start synchronizes-with the new thread's first step, so
    // it sees every write this thread made to that state before.
    // This thread is detached, not kept for a join: a server calling
    // block_in_place per request would otherwise keep every ended thread's
    // stack mapped until shutdown. Shutdown waits for it through
    // retired_live_ (its lambda holds the core, so nothing it uses goes
    // first), as for a worker stuck in a poll.
    worker->thread().detach();
    worker->thread() = std::move(next);
    ++retired_live_;
  }
  tls_retired_from = this;
  ctx.worker = nullptr;  // what Worker::run checks after the poll
}

void MultiThreadScheduler::spawn(TaskHeader* task) noexcept {
  if (!owned_.bind(task)) {
    // Shut down. Of the three initial references, the owned list's is never
    // used; shutdown_task consumes the queue entry's as the list's would be.
    (void)task->state.ref_dec();  // not the last: the JoinHandle's remains
    shutdown_task(task);
    return;
  }
  schedule_task(task, false, /*caller_holds_reference=*/true);  // the JoinHandle's
}

void MultiThreadScheduler::schedule(TaskHeader* task) noexcept {
  schedule_task(task, false, false);
}

void MultiThreadScheduler::schedule_yield(TaskHeader* task) noexcept {
  schedule_task(task, true, false);
}

void MultiThreadScheduler::schedule_task(TaskHeader* task, bool is_yield,
                                         bool caller_holds_reference) noexcept {
  ThreadContext& ctx = tls_context;
  if (ctx.scheduler == this && ctx.worker) {
    static_cast<Worker*>(ctx.worker)->schedule_local(task, is_yield);
  } else {
    schedule_remote(task, caller_holds_reference);
  }
}

void MultiThreadScheduler::schedule_remote(TaskHeader* task, bool caller_holds_reference) noexcept {
  // The push hands the caller's reference to the queue. From then on a worker
  // may run the task to completion and its last owner free this scheduler
  // (its driver's eventfd included) while we still wake a worker below. A
  // caller that holds no other reference (a consuming wake from the signal
  // thread, the blocking pool, another runtime) gets one here, which keeps the
  // task's cell, and through it the scheduler (one lifetime reference per
  // cell), alive until we are done. TSan found it once the driver stopped
  // reading the eventfd, a read that had ordered the wake-up before the
  // worker's exit by accident. A spawn skips it (two atomics, 6-9% of
  // spawn_many_remote): its JoinHandle's reference already does this.
  if (!caller_holds_reference) task->state.ref_inc();
  if (!inject_.push(task)) {
    task->drop_reference();  // the queue's: shut down, nobody will run it
  } else {
    remote_schedules_.fetch_add(1, std::memory_order_relaxed);
    notify_parked();
  }
  if (!caller_holds_reference) task->drop_reference();  // may free the cell, then us
}

void MultiThreadScheduler::notify_parked() noexcept {
  if (auto index = idle_.worker_to_notify()) {
    workers_[*index]->parker().unpark(driver_);
    return;
  }
  offer_to_helper();
}

void MultiThreadScheduler::notify_parked_from_worker() noexcept {
  // The only worker is the caller, and it is awake: nobody to wake, so no
  // store-load barrier of the idle set's handshake (a sixth of yield_many's
  // time at 1 worker). Its push went to its own queue, which it runs before
  // parking; a helper still gets its look at the inject queue.
  if (num_workers() == 1) {
    offer_to_helper();
    return;
  }
  notify_parked();
}

void MultiThreadScheduler::offer_to_helper() noexcept {
  // No sleeper to wake. If nobody is searching either (every worker is busy)
  // and a thread blocked in block_on/join offered to help, hand it the queued
  // work. relaxed: a helper that registers just after this check only misses
  // a chance to help; the workers still take the work (no wake-up is owed).
  if (num_helpers_.load(std::memory_order_relaxed) != 0 && idle_.num_searching() == 0 &&
      !inject_.is_empty())
    wake_helper();
}

void MultiThreadScheduler::hand_off_driver(std::uint32_t from) noexcept {
  // Racy by design: a worker claimed or woken meanwhile just gets a spurious
  // wake-up (it re-checks and parks again), and one that parks after this
  // scan finds the driver free and takes it itself.
  // `from` == num_workers(): from a non-worker (an unattended registration).
  const std::uint32_t n = num_workers();
  for (std::uint32_t i = 1; i <= n; ++i) {
    const std::uint32_t index = (from + i) % n;
    if (index == from) continue;
    if (idle_.is_parked(index)) {
      workers_[index]->parker().unpark(driver());
      return;
    }
  }
}

bool MultiThreadScheduler::has_pending_work() const noexcept {
  if (!inject_.is_empty()) return true;
  for (auto& worker : workers_) {
    if (worker->queue().has_stealable()) return true;
  }
  return false;
}

bool MultiThreadScheduler::take_queued(TaskHeader* task) noexcept {
  ThreadContext& ctx = tls_context;
  if (ctx.scheduler != this || !ctx.worker) return false;
  return static_cast<Worker*>(ctx.worker)->take_local(task);
}

void MultiThreadScheduler::count_inline_poll() noexcept {
  // On a worker: its own counter (this thread is its one writer). Else a
  // blocked thread helping (blocked_thread_polls).
  if (tls_context.scheduler == this && tls_context.worker) {
    static_cast<Worker*>(tls_context.worker)->count_inline_poll();
  } else {
    helper_polls_.fetch_add(1, std::memory_order_relaxed);
  }
}

void MultiThreadScheduler::block_until_complete(TaskHeader* task) {
  ThreadParker& parker = ThreadParker::current();
  if (!join_handle_register(task, parker.waker())) return;  // already complete
  BlockedHelper helper{&parker};
  while (!task->state.load().is_complete()) {
    {
      std::lock_guard lock(helpers_mutex_);
      helper.claimed = false;
      helper.prev = nullptr;
      helper.next = helpers_;
      if (helpers_) helpers_->prev = &helper;
      helpers_ = &helper;
      num_helpers_.fetch_add(1, std::memory_order_relaxed);
    }
    // Woken by the task's completion (join waker) or by wake_helper().
    if (!task->state.load().is_complete()) parker.park();
    bool claimed;
    {
      std::lock_guard lock(helpers_mutex_);
      claimed = helper.claimed;
      if (!claimed) {
        if (helper.prev) {
          helper.prev->next = helper.next;
        } else {
          helpers_ = helper.next;
        }
        if (helper.next) helper.next->prev = helper.prev;
        num_helpers_.fetch_sub(1, std::memory_order_relaxed);
      }
    }
    if (!claimed) continue;
    // A push found every worker busy with work queued. Busy is not stuck:
    // a worker running short polls takes that work within microseconds, and
    // this thread running it meanwhile turns the workers' fast paths into
    // remote ones (what a task polled here spawns or wakes goes through the
    // inject queue and a futex; measured at 1 worker: spawn_many_local 289 ns
    // a spawn with help, 134 without; fork_fib 393 against 222). So help
    // only when the workers are stuck: none began a poll for kStuckAfterNs.
    if (!workers_stuck(parker, task)) continue;
    // Every worker is stuck in one poll and work is queued: run it here
    // (reference: blockOnComplete) until the queue is empty or our task is
    // done.
    tls_context.scheduler = this;
    while (!task->state.load().is_complete()) {
      TaskHeader* queued = inject_.pop();
      if (!queued) break;
      helper_polls_.fetch_add(1, std::memory_order_relaxed);
      poll_task(queued);
    }
    tls_context.scheduler = nullptr;
  }
}

bool MultiThreadScheduler::workers_stuck(ThreadParker& parker, TaskHeader* task) noexcept {
  // Not registered as a helper while it watches: pushes meanwhile do not
  // wake it again (at most one futex wake per watch, not one per push).
  // The counts only grow: an unchanged sum means no worker began a poll.
  // Relaxed reads (Worker::polls) are enough: the answer is a heuristic,
  // and a stale one only brings help 10 ms early or late; the queued work
  // is taken by a worker either way.
  auto polls = [this] {
    std::uint64_t sum = 0;
    for (auto& worker : workers_)
      sum += worker->polls();
    return sum;
  };
  const std::uint64_t before = polls();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(kStuckAfterNs);
  for (;;) {
    if (task->state.load().is_complete()) return false;
    const std::int64_t left = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  deadline - std::chrono::steady_clock::now())
                                  .count();
    if (left <= 0) break;
    // Woken early: our task completed (checked above), or a stray wake-up.
    parker.park_for(left);
  }
  if (inject_.is_empty() || polls() != before) return false;
  // A sleeping worker is not stuck (a push wakes it).
  for (std::uint32_t i = 0; i < num_workers(); ++i)
    if (idle_.is_parked(i)) return false;
  return true;
}

void MultiThreadScheduler::wake_helper() noexcept {
  ThreadParker* parker = nullptr;
  {
    std::lock_guard lock(helpers_mutex_);
    BlockedHelper* helper = helpers_;
    if (!helper) return;
    helpers_ = helper->next;
    if (helpers_) helpers_->prev = nullptr;
    helper->claimed = true;
    num_helpers_.fetch_sub(1, std::memory_order_relaxed);
    // The helper may return (freeing its BlockedHelper) and its thread may
    // even exit as soon as we unlock: hold a reference on the parker.
    parker = helper->parker;
    parker->retain();
  }
  parker->unpark();
  parker->release();
}

void MultiThreadScheduler::shutdown(std::chrono::nanoseconds timeout) noexcept {
  {
    std::lock_guard lock(exit_mutex_);
    if (shutdown_done_) return;
    shutdown_done_ = true;
  }
  // One bound for the workers and the blocking pool together.
  const bool forever = timeout >= std::chrono::hours(24 * 365);
  const auto deadline = forever ? std::chrono::steady_clock::time_point::max()
                                : std::chrono::steady_clock::now() + timeout;
  // release: pairs with the acquire in is_shutting_down().
  shutting_down_.store(true, std::memory_order_release);
  inject_.close();
  for (auto& worker : workers_)
    worker->parker().unpark(driver_);

  const bool on_own_worker = tls_context.scheduler == this && tls_context.worker;
  const std::uint32_t expected = num_workers() - (on_own_worker ? 1 : 0);
  // Threads that handed their worker off (block_in_place) and have not ended:
  // waited for like workers, except this one if it is one of them (shut down
  // from inside block_in_place's fn or the rest of that poll).
  const std::uint32_t retired_self = tls_retired_from == this ? 1 : 0;
  bool all_exited;
  {
    std::unique_lock lock(exit_mutex_);
    auto exited = [&] { return workers_exited_ >= expected && retired_live_ <= retired_self; };
    if (forever) {
      exit_cv_.wait(lock, exited);  // now() + max would overflow
      all_exited = true;
    } else {
      all_exited = exit_cv_.wait_until(lock, deadline, exited);
    }
  }
  for (auto& worker : workers_) {
    std::thread& thread = worker->thread();
    if (!thread.joinable()) continue;
    if (thread.get_id() == std::this_thread::get_id()) {
      thread.detach();  // shut down from inside a task: we cannot join ourselves
    } else if (all_exited) {
      thread.join();
    } else {
      thread.detach();  // stuck in a poll; it cleans up after itself on exit
    }
  }
  owned_.close_and_shutdown_all();
  std::size_t popped;
  while (TaskHeader* task = inject_.pop_batch(64, &popped)) {
    while (task) {
      TaskHeader* next = task->queue_next;
      task->drop_reference();
      task = next;
    }
  }
  shutdown_blocking(deadline);
}

RuntimeStats MultiThreadScheduler::stats() const {
  RuntimeStats s;
  s.num_workers = workers_.size();
  s.total_spawned = owned_.spawned();
  s.live_tasks = owned_.live();
  s.remote_schedules = remote_schedules_.load(std::memory_order_relaxed);
  s.inject_queue_depth = inject_.len();
  s.blocked_thread_polls = helper_polls_.load(std::memory_order_relaxed);
  fill_stats(s);
  s.total_polled = s.blocked_thread_polls;
  for (const auto& worker : workers_) {
    WorkerStats w = worker->stats();
    s.total_polled += w.tasks_polled;
    s.total_stolen += w.tasks_stolen;
    s.total_parked += w.times_parked;
    s.workers.push_back(w);
  }
  return s;
}

std::shared_ptr<RuntimeCore> make_multi_thread_core(RuntimeConfig config) {
  return RuntimeCore::share(new MultiThreadScheduler(std::move(config)));
}

}  // namespace volt::detail
