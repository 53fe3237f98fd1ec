// volt/runtime/runtime.hpp: Runtime, its Builder, and Handle.
//
// A Runtime owns a scheduler and the threads that run tasks on it.
//
// Flavours:
//  - multi-thread (default): N worker threads (default: the CPU count) with
//    work stealing. block_on() spawns the task and the calling thread sleeps
//    until it completes; if work is queued while every worker is busy, the
//    sleeping thread is woken to help run queued tasks.
//  - current-thread: no threads of its own; tasks run on the thread inside
//    block_on(), one at a time. Tasks spawned from elsewhere wait until some
//    thread calls block_on().
//
// Guarantees and errors:
//  - spawn() may be called from any thread. After shutdown began, the task is
//    not run: its frame is destroyed and its handle reports
//    errc::runtime_shutdown.
//  - block_on() from a thread that is running tasks of any volt runtime throws
//    volt::Error(errc::blocking_in_runtime) (it would block that worker).
//  - Builder::build() throws volt::Error(errc::invalid_argument) for zero
//    worker threads, zero max_blocking_threads, a negative keep-alive, or
//    start_paused on the multi-thread flavour.
//  - spawn_blocking(fn) runs fn on the blocking pool (threads made on demand,
//    at most max_blocking_threads, idle ones leave after thread_keep_alive)
//    and returns a JoinHandle for its result or exception; see
//    volt/task/spawn_blocking.hpp.
//  - Destroying the runtime shuts it down: workers stop after their current
//    poll, every task still alive (queued, waiting or never run) is cancelled
//    and its frame destroyed, and join handles report errc::runtime_shutdown.
//    shutdown_timeout(d) does the same but waits at most d for workers that are
//    inside a long poll; those finish in the background and clean up after
//    themselves. Blocking-pool work that has not started is cancelled
//    (errc::runtime_shutdown); running blocking work is waited for, within
//    the same bound d.
//
// Example:
//
//   volt::Runtime rt = volt::Runtime::Builder().worker_threads(4).build();
//   int n = rt.block_on([]() -> volt::Task<int> {
//     auto h = volt::spawn(work());
//     co_return co_await h;
//   }());
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>

#include "volt/detail/task_cell.hpp"
#include "volt/error.hpp"
#include "volt/runtime/stats.hpp"
#include "volt/task/join_handle.hpp"
#include "volt/task/task.hpp"

namespace volt {

namespace detail {
class RuntimeCore;  // src/runtime/runtime_core.hpp
Scheduler* core_scheduler(RuntimeCore& core) noexcept;
Scheduler* blocking_scheduler(RuntimeCore& core) noexcept;
// The blocking pool of the calling thread's runtime; throws Error(no_runtime).
Scheduler* current_blocking_scheduler();
// The runtime the calling thread runs tasks for or has entered, or nullptr.
inline Scheduler* current_scheduler() noexcept {
  return tls_context.scheduler ? tls_context.scheduler : tls_context.entered;
}

// The one-poll task a blocking function runs in. The function is moved into
// the frame; its result or exception becomes the task's output.
template <class F>
Task<std::invoke_result_t<F&>> run_blocking(F fn) {
  if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
    fn();
    co_return;
  } else {
    co_return fn();
  }
}

template <class T>
JoinHandle<T> spawn_on(Scheduler* scheduler, Task<T>&& task) {
  if (!task) throw Error(errc::invalid_handle, "spawning an empty Task");
  TaskHeader* header = TaskCell<T>::create(std::move(task));
  scheduler->retain();  // the cell's reference, dropped at its deallocation
  header->scheduler = scheduler;
  scheduler->spawn(header);
  return JoinHandle<T>(header);
}
}  // namespace detail

// A cloneable reference to a runtime, usable from any thread.
class Handle {
 public:
  // The runtime of the calling thread; throws Error(errc::no_runtime) outside.
  static Handle current();

  template <class T>
  JoinHandle<T> spawn(Task<T> task) const {
    return detail::spawn_on(detail::core_scheduler(*core_), std::move(task));
  }
  // Runs `fn()` on the runtime's blocking pool.
  template <class F>
  JoinHandle<std::invoke_result_t<std::decay_t<F>&>> spawn_blocking(F&& fn) const {
    return detail::spawn_on(detail::blocking_scheduler(*core_),
                            detail::run_blocking(std::decay_t<F>(std::forward<F>(fn))));
  }
  template <class T>
  T block_on(Task<T> task) const;

  RuntimeStats stats() const;

  explicit Handle(std::shared_ptr<detail::RuntimeCore> core) noexcept : core_(std::move(core)) {}

 private:
  friend class Runtime;
  std::shared_ptr<detail::RuntimeCore> core_;
};

class Runtime {
 public:
  class Builder {
   public:
    Builder() = default;
    static Builder multi_thread() { return Builder(); }
    static Builder current_thread() {
      Builder b;
      b.current_thread_ = true;
      return b;
    }

    // Number of worker threads (multi-thread flavour). Default: CPU count.
    Builder& worker_threads(std::size_t n) {
      worker_threads_ = n;
      worker_threads_set_ = true;
      return *this;
    }
    // Worker threads are named "<name>-<index>" (truncated to 15 bytes).
    Builder& thread_name(std::string name) {
      thread_name_ = std::move(name);
      return *this;
    }
    // Called on each worker thread when it starts / before it exits.
    Builder& on_thread_start(std::function<void()> hook) {
      on_thread_start_ = std::move(hook);
      return *this;
    }
    Builder& on_thread_stop(std::function<void()> hook) {
      on_thread_stop_ = std::move(hook);
      return *this;
    }
    // Most blocking-pool threads alive at once (default 512); more work waits.
    Builder& max_blocking_threads(std::size_t n) {
      max_blocking_threads_ = n;
      return *this;
    }
    // How long an idle blocking-pool thread waits for work before it exits
    // (default 10 s).
    Builder& thread_keep_alive(std::chrono::nanoseconds d) {
      keep_alive_ = d;
      return *this;
    }
    // Start with the clock paused (tests; current-thread flavour only). See
    // volt/time/clock.hpp.
    Builder& start_paused(bool paused) {
      start_paused_ = paused;
      return *this;
    }

    Runtime build() const;

   private:
    friend class detail::RuntimeCore;
    bool current_thread_ = false;
    bool worker_threads_set_ = false;
    std::size_t worker_threads_ = 0;
    std::string thread_name_ = "volt-worker";
    std::function<void()> on_thread_start_;
    std::function<void()> on_thread_stop_;
    std::size_t max_blocking_threads_ = 512;
    std::chrono::nanoseconds keep_alive_ = std::chrono::seconds(10);
    bool start_paused_ = false;
  };

  Runtime(Runtime&&) noexcept = default;
  Runtime& operator=(Runtime&&) noexcept;
  ~Runtime();

  template <class T>
  JoinHandle<T> spawn(Task<T> task) {
    return handle_.spawn(std::move(task));
  }
  // Runs `task` to completion and returns its value (or rethrows).
  template <class T>
  T block_on(Task<T> task) {
    return handle_.block_on(std::move(task));
  }

  template <class F>
  JoinHandle<std::invoke_result_t<std::decay_t<F>&>> spawn_blocking(F&& fn) {
    return handle_.spawn_blocking(std::forward<F>(fn));
  }
  Handle handle() const { return handle_; }
  RuntimeStats stats() const { return handle_.stats(); }

  // Shuts down, waiting at most `timeout` for workers still inside a poll.
  // Idempotent; the runtime accepts no tasks afterwards.
  void shutdown_timeout(std::chrono::nanoseconds timeout);

 private:
  explicit Runtime(std::shared_ptr<detail::RuntimeCore> core);
  Handle handle_;
};

// Spawns on the runtime of the calling thread (inside a task, on a worker or
// a blocking-pool thread). Throws volt::Error(errc::no_runtime) elsewhere.
template <class T>
JoinHandle<T> spawn(Task<T> task) {
  detail::Scheduler* scheduler = detail::current_scheduler();
  if (!scheduler) throw Error(errc::no_runtime, "volt::spawn outside a runtime");
  return detail::spawn_on(scheduler, std::move(task));
}

template <class T>
T Handle::block_on(Task<T> task) const {
  // join() refuses runtime threads; check first so the task is not spawned.
  if (detail::tls_context.scheduler)
    throw Error(errc::blocking_in_runtime, "block_on called on a runtime thread");
  return spawn(std::move(task)).join();
}

}  // namespace volt
