// CurrentThreadScheduler: the current-thread flavour (Tokio's
// new_current_thread): no threads of its own; tasks run on the thread inside
// block_on (the "core holder"), one at a time.
//
// - Run queue: a LIFO slot and a FIFO, touched only by the core holder; wakes
//   and spawns from the holder's own tasks go there without any atomic
//   operation. A wake by one of the holder's tasks takes the LIFO slot (as
//   on a worker, worker.hpp) and pushes its previous occupant to the FIFO;
//   spawns, yields and the driver's wakes go to the FIFO (so tasks start in
//   the order they were spawned, and timers and I/O wake in the order they
//   became ready); the slot is polled at most kMaxLifoPolls times in a row.
//   The slot keeps a fork-join tree depth first: a parent woken by its last
//   child runs next, not after every subtree queued before it (fib(30):
//   63 MiB peak and 1.7x the time without it).
// - The FIFO's newest entries sit in a ring of kRingCapacity, so that a join
//   can take the newest back (take_queued, as a worker takes from the tail of
//   its queue). A push to a full ring moves its older half to an overflow
//   list (linked through queue_next), which therefore always holds the
//   oldest entries and is popped first: FIFO order holds, and nothing
//   allocates.
// - Wakes and spawns from other threads go to an InjectQueue; the holder takes
//   from it every kInjectInterval polls (fairness) and whenever its own queue
//   is empty.
// - When both are empty the holder blocks in the driver (epoll_wait). A remote
//   pusher writes the eventfd only if the holder says it is parking
//   (parking_), with a Dekker handshake: the holder stores parking_ = true,
//   fences, re-checks the inject queue; the pusher pushes, fences, reads
//   parking_. Either the holder sees the task or the pusher sees the flag.
// - Timers: the holder fires due timers whenever it parks, and polls the
//   driver every kDriverInterval polls while busy (Tokio's event_interval).
//   With a paused clock, an idle holder with no blocking work in flight jumps
//   the clock to the next timer instead of sleeping (auto-advance).
// - Several threads may call block_on at once: one holds the core (a mutex,
//   try-locked), the others wait on their join handle; when the holder leaves
//   it wakes them so that one of them takes over driving.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "detail/thread_parker.hpp"
#include "runtime/runtime_core.hpp"
#include "runtime/scheduler/inject_queue.hpp"
#include "runtime/scheduler/owned_tasks.hpp"

namespace volt::detail {

class CurrentThreadScheduler final : public RuntimeCore {
 public:
  static constexpr std::uint32_t kInjectInterval = 31;  // Tokio's global_queue_interval default
  static constexpr std::uint32_t kDriverInterval = 61;  // Tokio's event_interval default

  explicit CurrentThreadScheduler(RuntimeConfig config);
  ~CurrentThreadScheduler() override;

  void spawn(TaskHeader* task) noexcept override;
  void schedule(TaskHeader* task) noexcept override;
  void schedule_yield(TaskHeader* task) noexcept override;
  bool take_queued(TaskHeader* task) noexcept override;
  void count_inline_poll() noexcept override { polled_.fetch_add(1, std::memory_order_relaxed); }
  bool release(TaskHeader* task) noexcept override { return owned_.remove(task); }
  void block_until_complete(TaskHeader* task) override;
  bool is_shutting_down() const noexcept override {
    return shutting_down_.load(std::memory_order_acquire);  // pairs with shutdown()
  }

  void start() override {}
  void shutdown(std::chrono::nanoseconds timeout) noexcept override;
  RuntimeStats stats() const override;

 private:
  void drive_until_complete(TaskHeader* task) noexcept;
  TaskHeader* next_task() noexcept;
  // See MultiThreadScheduler::schedule_remote for `caller_holds_reference`.
  void schedule_task(TaskHeader* task, bool caller_holds_reference, bool to_lifo) noexcept;
  void push_local(TaskHeader* task, bool to_lifo) noexcept;
  void park_driver(bool block) noexcept;  // driver_.park with in_driver_ set
  void push_fifo(TaskHeader* task) noexcept;
  TaskHeader* pop_fifo() noexcept;
  void release_core() noexcept;
  void drain_queues() noexcept;

  bool has_local_work() const noexcept {
    return lifo_ != nullptr || ring_head_ != ring_tail_ || overflow_head_ != nullptr ||
           !inject_.is_empty();
  }

  InjectQueue inject_;
  OwnedTasks owned_;
  std::atomic<bool> shutting_down_{false};
  std::atomic<std::uint32_t> parking_{0};  // 1 while the core holder sleeps; see above
  std::atomic<std::uint64_t> polled_{0};   // statistics; relaxed
  std::atomic<std::uint64_t> parks_{0};    // statistics; relaxed

  // The core: whoever holds it drives the scheduler. A flag under a mutex and
  // condition variable rather than std::timed_mutex: shutdown needs a timed
  // acquire, and ThreadSanitizer does not intercept the pthread_mutex_clocklock
  // that timed_mutex::try_lock_for uses (llvm/llvm-project#62623).
  class CoreLock {
   public:
    bool try_lock() noexcept {
      std::lock_guard lock(mutex_);
      if (held_) return false;
      held_ = true;
      return true;
    }
    // Waits until free, at most `timeout` (>= a year: no limit).
    bool try_lock_for(std::chrono::nanoseconds timeout) {
      std::unique_lock lock(mutex_);
      auto is_free = [&] { return !held_; };
      if (timeout >= std::chrono::hours(24 * 365)) {
        freed_.wait(lock, is_free);  // now() + max would overflow
      } else if (!freed_.wait_for(lock, timeout, is_free)) {
        return false;
      }
      held_ = true;
      return true;
    }
    void unlock() noexcept {
      {
        std::lock_guard lock(mutex_);
        held_ = false;
      }
      freed_.notify_all();
    }

   private:
    std::mutex mutex_;
    std::condition_variable freed_;
    bool held_ = false;  // guarded by mutex_
  };
  CoreLock core_;
  // The run queue (see the top), core holder only: ring_[head % cap] is the
  // oldest entry, ring_[(tail - 1) % cap] the newest; the indices only grow.
  static constexpr std::uint32_t kRingCapacity = 256;
  static constexpr std::uint32_t kMaxLifoPolls = 3;  // the worker's cap
  TaskHeader* lifo_ = nullptr;
  std::uint32_t lifo_polls_ = 0;
  bool in_driver_ = false;  // core holder only: inside driver_.park, whose wakes keep FIFO order
  TaskHeader* ring_[kRingCapacity];
  std::uint32_t ring_head_ = 0;
  std::uint32_t ring_tail_ = 0;
  TaskHeader* overflow_head_ = nullptr;
  TaskHeader* overflow_tail_ = nullptr;
  std::uint32_t tick_ = 0;  // core holder only

  std::mutex waiters_mutex_;
  std::vector<ThreadParker*> waiters_;  // guarded by waiters_mutex_; each retained
};

}  // namespace volt::detail
