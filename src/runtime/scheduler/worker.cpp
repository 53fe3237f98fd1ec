#include "runtime/scheduler/worker.hpp"

#include <algorithm>
#include <chrono>

#include "runtime/scheduler/multi_thread.hpp"

namespace volt::detail {
namespace {

std::uint64_t now_ns() noexcept {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

constexpr double kTargetLatencyNs = 1'000'000.0;  // reference: 1 ms between inject checks
constexpr double kEwmaWeight = 0.1;               // reference: new = 0.1 * sample + 0.9 * old

}  // namespace

Worker::Worker(MultiThreadScheduler& scheduler, std::uint32_t index)
    : scheduler_(scheduler), index_(index), rng_(0x9E3779B97F4A7C15ull * (index + 1)) {}

std::uint32_t Worker::next_random() noexcept {
  // xorshift64 (the reference's choice); only picks a first steal victim.
  rng_ ^= rng_ << 13;
  rng_ ^= rng_ >> 7;
  rng_ ^= rng_ << 17;
  return static_cast<std::uint32_t>(rng_ >> 32);
}

bool Worker::run() noexcept {
  tls_context.scheduler = &scheduler_;
  tls_context.worker = this;
  batch_start_ns_ = now_ns();
  while (!scheduler_.is_shutting_down()) {
    TaskHeader* task = next_task();
    // Out of local work: harvest I/O before stealing or parking (see
    // "Polling the driver" in worker.hpp).
    if (!task && scheduler_.driver().has_io_sources() && poll_driver()) task = next_task();
    if (!task) task = steal_work();
    if (task) {
      if (!run_task(task)) {
        tls_context.scheduler = nullptr;
        return false;  // handed off: another thread runs this loop now
      }
      continue;
    }
    park();
  }
  release_queued_tasks();
  tls_context.worker = nullptr;
  tls_context.scheduler = nullptr;
  return true;
}

void Worker::schedule_local(TaskHeader* task, bool is_yield) noexcept {
  if (in_driver_) {
    if (queue_.push_back_or_overflow(task, scheduler_.inject())) overflows_.add();
    return;
  }
  bool notify;
  if (is_yield) {
    if (queue_.push_back_or_overflow(task, scheduler_.inject())) overflows_.add();
    notify = true;
  } else {
    TaskHeader* previous = std::exchange(lifo_, task);
    notify = previous != nullptr;
    if (previous && queue_.push_back_or_overflow(previous, scheduler_.inject())) overflows_.add();
  }
  // Work others could steal appeared: wake a sleeper if nobody is searching.
  if (notify) scheduler_.notify_parked_from_worker();
}

TaskHeader* Worker::next_task() noexcept {
  // 0. Fairness: the inject queue first, every global_interval_ ticks.
  if (tick_ % global_interval_ == 0) {
    if (TaskHeader* task = next_from_inject()) {
      lifo_polls_ = 0;
      return task;
    }
  }
  // 1. LIFO slot, capped.
  if (lifo_) {
    if (lifo_polls_ < kMaxLifoPolls) {
      ++lifo_polls_;
      lifo_hits_.add();
      return std::exchange(lifo_, nullptr);
    }
    if (queue_.push_back_or_overflow(std::exchange(lifo_, nullptr), scheduler_.inject()))
      overflows_.add();
  }
  lifo_polls_ = 0;
  // 2. Local queue, 3. inject batch.
  if (TaskHeader* task = queue_.pop()) return task;
  return next_from_inject();
}

TaskHeader* Worker::next_from_inject() noexcept {
  InjectQueue& inject = scheduler_.inject();
  std::size_t len = inject.len();
  if (len == 0) return nullptr;
  // Fair share: leave the rest to the other workers.
  std::size_t n = std::max<std::size_t>(kMinInjectBatch, len / scheduler_.num_workers());
  n = std::min<std::size_t>({n, len, kMaxInjectBatch, std::size_t{queue_.remaining_slots()} + 1});
  std::size_t popped = 0;
  TaskHeader* first = inject.pop_batch(n, &popped);
  if (!first) return nullptr;
  batches_.add();
  // The rest go to the local queue, where thieves can still reach them. They
  // fit: n - 1 <= remaining_slots().
  for (TaskHeader* task = first->queue_next; task;) {
    TaskHeader* next = task->queue_next;
    (void)queue_.push_back_or_overflow(task, inject);
    task = next;
  }
  return first;
}

TaskHeader* Worker::steal_work() noexcept {
  IdleSet& idle = scheduler_.idle();
  if (!is_searching_) {
    if (!idle.try_become_searcher()) return nullptr;
    is_searching_ = true;
  }
  auto& workers = scheduler_.workers();
  const std::uint32_t n = static_cast<std::uint32_t>(workers.size());
  const std::uint32_t start = n > 1 ? next_random() % n : 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    std::uint32_t victim = (start + i) % n;
    if (victim == index_) continue;
    std::uint32_t stolen = 0;
    if (TaskHeader* task = workers[victim]->queue_.steal_into(queue_, &stolen)) {
      steal_ops_.add();
      stolen_.add(stolen);
      return task;
    }
  }
  // 5. One more look at the inject queue before parking.
  return next_from_inject();
}

bool Worker::run_task(TaskHeader* task) noexcept {
  if (is_searching_) {
    is_searching_ = false;
    // The last searcher to find work wakes another: there may be more.
    if (scheduler_.idle().transition_from_searching()) scheduler_.notify_parked();
  }
  ++tick_;
  polled_.add();
  poll_task(task);
  // block_in_place inside the poll gave this worker to a fresh thread, which
  // may already be running its loop: touch nothing of it. (One TLS load per
  // poll.)
  if (tls_context.worker != this) [[unlikely]]
    return false;
  if (++polls_since_maintenance_ >= kMaintenanceInterval) maintenance();
  return true;
}

void Worker::maintenance() noexcept {
  // EWMA of the time per poll over the last kMaintenanceInterval polls sets
  // how often the inject queue is checked ahead of local work: short tasks
  // allow rare checks, long ones need frequent checks to bound latency.
  std::uint64_t now = now_ns();
  double sample = static_cast<double>(now - batch_start_ns_) / polls_since_maintenance_;
  avg_task_ns_ = kEwmaWeight * sample + (1.0 - kEwmaWeight) * avg_task_ns_;
  double interval = kTargetLatencyNs / std::max(avg_task_ns_, 1.0);
  global_interval_ = static_cast<std::uint32_t>(
      std::clamp(interval, double{kMinGlobalInterval}, double{kMaxGlobalInterval}));
  published_interval_.store(global_interval_, std::memory_order_relaxed);
  batch_start_ns_ = now;
  polls_since_maintenance_ = 0;
  // A busy runtime must still see I/O and fire timers when no idle worker
  // holds the driver.
  poll_driver();
}

bool Worker::poll_driver() noexcept {
  Driver& driver = scheduler_.driver();
  if (!driver.try_acquire()) return false;
  in_driver_ = true;
  driver.park(false);
  in_driver_ = false;
  const bool hand_off = driver.release();
  if (queue_.len() > 1) scheduler_.notify_parked();
  if (hand_off) scheduler_.hand_off_driver(index_);
  return true;
}

void Worker::park() noexcept {
  IdleSet& idle = scheduler_.idle();
  if (idle.transition_to_parked(index_, is_searching_) && scheduler_.has_pending_work()) {
    // We were the last searcher and work arrived meanwhile: make sure someone
    // (possibly us, via our own bit) goes after it.
    scheduler_.notify_parked();
  }
  is_searching_ = false;
  parks_.add();
  bool hand_off = false;
  for (;;) {
    if (scheduler_.is_shutting_down()) break;
    in_driver_ = true;
    hand_off = parker_.park(scheduler_.driver());
    in_driver_ = false;
    if (!idle.is_parked(index_)) {
      // Claimed by a waker, which counted us as a searcher.
      is_searching_ = true;
      break;
    }
    // Woken without a claim: the driver had events, or a spurious wake-up.
    if (queue_.len() > 0 || lifo_ || !scheduler_.inject().is_empty()) {
      is_searching_ = !idle.unpark_self(index_);
      break;
    }
  }
  // Woken with more than one task of our own (timers fired): share them.
  if (queue_.len() > 1 && !scheduler_.is_shutting_down()) scheduler_.notify_parked();
  // We leave the driver to run tasks. Workers that parked while we held it
  // sleep on their futex, where no timer deadline reaches them: if timers are
  // pending, wake one so that it takes the driver over (otherwise a timer
  // would wait for our next park or maintenance poll, however long our tasks
  // run, while a worker sits idle). The same with I/O sources registered and
  // no standby watching the driver (driver.hpp, "An unattended driver").
  if (hand_off) scheduler_.hand_off_driver(index_);
  // Restart the EWMA window: parked time is not task time.
  batch_start_ns_ = now_ns();
  polls_since_maintenance_ = 0;
}

void Worker::release_queued_tasks() noexcept {
  // Shutdown: the queues' references. The owned list cancels the tasks.
  if (lifo_) std::exchange(lifo_, nullptr)->drop_reference();
  while (TaskHeader* task = queue_.pop())
    task->drop_reference();
}

WorkerStats Worker::stats() const noexcept {
  WorkerStats s;
  s.tasks_polled = polled_.get();
  s.lifo_hits = lifo_hits_.get();
  s.steal_operations = steal_ops_.get();
  s.tasks_stolen = stolen_.get();
  s.times_parked = parks_.get();
  s.global_batch_fetches = batches_.get();
  s.overflows = overflows_.get();
  s.local_queue_depth = queue_.len();
  s.global_queue_interval = published_interval_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace volt::detail
