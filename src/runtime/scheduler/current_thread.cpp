#include "runtime/scheduler/current_thread.hpp"

#include <algorithm>
#include <utility>

#include "detail/store_load_barrier.hpp"
#include "fs/engine.hpp"

#include "volt/task/join_handle.hpp"

namespace volt::detail {

CurrentThreadScheduler::CurrentThreadScheduler(RuntimeConfig config)
    : RuntimeCore(std::move(config)) {}

CurrentThreadScheduler::~CurrentThreadScheduler() = default;

void CurrentThreadScheduler::spawn(TaskHeader* task) noexcept {
  if (!owned_.bind(task)) {
    (void)task->state.ref_dec();  // the unused owned-list reference; see multi_thread.cpp
    shutdown_task(task);
    return;
  }
  // The JoinHandle's reference. A spawn goes to the FIFO: tasks spawned by
  // one task start in the order they were spawned.
  schedule_task(task, /*caller_holds_reference=*/true, /*to_lifo=*/false);
}

void CurrentThreadScheduler::schedule(TaskHeader* task) noexcept {
  // A wake by one of our tasks takes the LIFO slot; one by the driver (I/O,
  // timers: many at once, in the order they became ready) keeps FIFO order
  // (push_local reads in_driver_: the core holder's, like the queues).
  schedule_task(task, false, /*to_lifo=*/true);
}

void CurrentThreadScheduler::schedule_yield(TaskHeader* task) noexcept {
  schedule_task(task, false, /*to_lifo=*/false);
}

void CurrentThreadScheduler::park_driver(bool block) noexcept {
  in_driver_ = true;
  driver_.park(block);
  in_driver_ = false;
}

void CurrentThreadScheduler::schedule_task(TaskHeader* task, bool caller_holds_reference,
                                           bool to_lifo) noexcept {
  ThreadContext& ctx = tls_context;
  if (ctx.scheduler == this && ctx.worker == this) {
    push_local(task, to_lifo);
    return;
  }
  // A reference of our own, unless the caller holds one, keeps the task's
  // cell, and through it this scheduler, alive while we wake the driver after
  // the push handed the caller's reference to the queue (see
  // MultiThreadScheduler::schedule_remote).
  if (!caller_holds_reference) task->state.ref_inc();
  if (!inject_.push(task)) {
    task->drop_reference();  // the queue's: shut down
  } else {
    // The pusher's side of the handshake in current_thread.hpp.
    store_load_barrier(parking_);
    if (parking_.load(std::memory_order_relaxed)) driver_.unpark();
  }
  if (!caller_holds_reference) task->drop_reference();  // may free the cell, then us
}

void CurrentThreadScheduler::push_local(TaskHeader* task, bool to_lifo) noexcept {
  if (to_lifo && !in_driver_ && !tls_context.in_order_wakes) task = std::exchange(lifo_, task);
  if (task) push_fifo(task);
}

void CurrentThreadScheduler::push_fifo(TaskHeader* task) noexcept {
  if (ring_tail_ - ring_head_ == kRingCapacity) {
    // Full: the older half moves to the overflow list, behind what it holds
    // (older still), so the ring keeps the newest entries for take_queued.
    for (std::uint32_t i = 0; i < kRingCapacity / 2; ++i) {
      TaskHeader* old = ring_[ring_head_++ % kRingCapacity];
      old->queue_next = nullptr;
      if (overflow_tail_) {
        overflow_tail_->queue_next = old;
      } else {
        overflow_head_ = old;
      }
      overflow_tail_ = old;
    }
  }
  ring_[ring_tail_++ % kRingCapacity] = task;
}

TaskHeader* CurrentThreadScheduler::pop_fifo() noexcept {
  // The overflow list holds the oldest entries (see push_fifo).
  if (TaskHeader* task = overflow_head_) {
    overflow_head_ = task->queue_next;
    if (!overflow_head_) overflow_tail_ = nullptr;
    return task;
  }
  if (ring_head_ != ring_tail_) return ring_[ring_head_++ % kRingCapacity];
  return nullptr;
}

bool CurrentThreadScheduler::take_queued(TaskHeader* task) noexcept {
  // Only the core holder touches the run queue. Only the newest entries:
  // the LIFO slot's, or the FIFO's last (always in the ring).
  const ThreadContext& ctx = tls_context;
  if (ctx.scheduler != this || ctx.worker != this) return false;
  if (lifo_ == task) {
    lifo_ = nullptr;
    return true;
  }
  if (ring_head_ == ring_tail_) return false;
  if (ring_[(ring_tail_ - 1) % kRingCapacity] != task) return false;
  --ring_tail_;
  return true;
}

TaskHeader* CurrentThreadScheduler::next_task() noexcept {
  if (++tick_ % kInjectInterval == 0) {
    if (TaskHeader* task = inject_.pop()) {
      lifo_polls_ = 0;
      return task;
    }
  }
  if (lifo_) {
    if (lifo_polls_ < kMaxLifoPolls) {
      ++lifo_polls_;
      return std::exchange(lifo_, nullptr);
    }
    push_fifo(std::exchange(lifo_, nullptr));
  }
  lifo_polls_ = 0;
  if (TaskHeader* task = pop_fifo()) return task;
  return inject_.pop();
}

void CurrentThreadScheduler::drive_until_complete(TaskHeader* target) noexcept {
  ThreadContext saved = tls_context;
  tls_context.scheduler = this;
  tls_context.worker = this;
  while (!target->state.load().is_complete() && !is_shutting_down()) {
    if (TaskHeader* task = next_task()) {
      polled_.fetch_add(1, std::memory_order_relaxed);
      poll_task(task);
      // Busy: still see I/O and fire due timers now and then.
      if (tick_ % kDriverInterval == 0) park_driver(false);
      continue;
    }
    if (driver_.time().is_paused()) {
      // Ready I/O and due timers first; then, if still idle and no blocking
      // work or file operation on the ring might wake us, only timers can:
      // jump to the next one. (A ring completion wakes the driver's park
      // below through the ring's descriptor in the epoll set.)
      park_driver(false);
      if (has_local_work()) continue;
      // (The timers it fires wake in deadline order: fire_until sets
      // ThreadContext::in_order_wakes.)
      if (blocking().in_flight() == 0 && (files() == nullptr || files()->in_flight() == 0) &&
          driver_.time().advance_to_next_deadline())
        continue;
    }
    // Nothing runnable: sleep in the driver until a remote wake-up or the
    // next timer.
    parking_.store(1, std::memory_order_seq_cst);
    store_load_barrier(parking_);
    if (inject_.is_empty() && !is_shutting_down()) {
      parks_.fetch_add(1, std::memory_order_relaxed);
      park_driver(true);
    }
    parking_.store(0, std::memory_order_relaxed);
  }
  tls_context = saved;
}

void CurrentThreadScheduler::block_until_complete(TaskHeader* task) {
  ThreadParker& parker = ThreadParker::current();
  if (!join_handle_register(task, parker.waker())) return;  // already complete
  auto drive = [&] {
    drive_until_complete(task);
    // Shut down while we drove: the queues are ours to release.
    if (is_shutting_down()) drain_queues();
    release_core();
  };
  for (;;) {
    if (task->state.load().is_complete()) return;
    // During shutdown nobody drives: shutdown() cancels the task, which wakes us.
    if (!is_shutting_down() && core_.try_lock()) {
      drive();
      continue;
    }
    {
      std::lock_guard lock(waiters_mutex_);
      parker.retain();
      waiters_.push_back(&parker);
    }
    // The holder may have left between our try_lock and registering; if not,
    // its release_core() finds us on the list and wakes us.
    bool took_core = !is_shutting_down() && core_.try_lock();
    if (!took_core && !task->state.load().is_complete()) parker.park();
    {
      std::lock_guard lock(waiters_mutex_);
      auto it = std::find(waiters_.begin(), waiters_.end(), &parker);
      if (it != waiters_.end()) {
        waiters_.erase(it);
        parker.release();
      }
    }
    if (took_core) drive();
  }
}

void CurrentThreadScheduler::release_core() noexcept {
  core_.unlock();
  std::vector<ThreadParker*> waiters;
  {
    std::lock_guard lock(waiters_mutex_);
    waiters.swap(waiters_);
  }
  for (ThreadParker* waiter : waiters) {
    waiter->unpark();
    waiter->release();
  }
}

void CurrentThreadScheduler::drain_queues() noexcept {
  if (lifo_) std::exchange(lifo_, nullptr)->drop_reference();
  while (TaskHeader* task = pop_fifo())
    task->drop_reference();
  while (TaskHeader* task = inject_.pop())
    task->drop_reference();
}

void CurrentThreadScheduler::shutdown(std::chrono::nanoseconds timeout) noexcept {
  if (shutting_down_.exchange(true, std::memory_order_acq_rel)) return;
  const bool forever = timeout >= std::chrono::hours(24 * 365);
  const auto deadline = forever ? std::chrono::steady_clock::time_point::max()
                                : std::chrono::steady_clock::now() + timeout;
  inject_.close();
  driver_.unpark();
  // Wait for a thread still driving (inside a poll) to leave the core.
  bool have_core;
  if (tls_context.scheduler == this && tls_context.worker == this) {
    // Shut down from inside one of our tasks: this thread holds the core, and
    // its drive loop releases the queues when it sees the flag.
    have_core = false;
  } else {
    have_core = core_.try_lock_for(timeout);
  }
  owned_.close_and_shutdown_all();
  if (have_core) {
    drain_queues();
    release_core();
  }
  shutdown_blocking(deadline);
}

RuntimeStats CurrentThreadScheduler::stats() const {
  RuntimeStats s;
  s.num_workers = 1;
  s.total_spawned = owned_.spawned();
  s.live_tasks = owned_.live();
  s.total_polled = polled_.load(std::memory_order_relaxed);
  s.total_parked = parks_.load(std::memory_order_relaxed);
  s.inject_queue_depth = inject_.len();
  fill_stats(s);
  return s;
}

std::shared_ptr<RuntimeCore> make_current_thread_core(RuntimeConfig config) {
  return RuntimeCore::share(new CurrentThreadScheduler(std::move(config)));
}

}  // namespace volt::detail
