// volt/runtime/runtime.hpp: Runtime, its Builder, and Handle.
//
// A Runtime owns a scheduler and the threads that run tasks on it.
//
// Flavours:
//  - multi-thread (default): N worker threads (default:
//    available_parallelism(), or VOLT_WORKER_THREADS when set) with
//    work stealing. block_on() spawns the task and the calling thread sleeps
//    until it completes; if work stays queued while every worker is stuck
//    in one poll for 10 ms, the sleeping thread helps run queued tasks.
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
//    worker threads, zero max_blocking_threads, a negative keep-alive,
//    start_paused on the multi-thread flavour, or a malformed
//    VOLT_WORKER_THREADS when the worker count is left to the default.
//  - spawn_blocking(fn, args...) runs fn(args...) on the blocking pool
//    (threads made on demand, at most max_blocking_threads, idle ones leave
//    after thread_keep_alive) and returns a JoinHandle for its result or
//    exception; see volt/task/spawn_blocking.hpp.
//  - An exception that escapes a spawned task (or spawn_blocking function)
//    whose JoinHandle is dropped goes to Builder::on_unhandled_exception's
//    hook, by default one line on stderr; see that method for the rule.
//  - Destroying the runtime shuts it down: workers stop after their current
//    poll, every task still alive (queued, waiting or never run) is cancelled
//    and its frame destroyed, and join handles report errc::runtime_shutdown.
//    shutdown_timeout(d) does the same but waits at most d for workers that are
//    inside a long poll; those finish in the background and clean up after
//    themselves. Blocking-pool work that has not started is cancelled
//    (errc::runtime_shutdown); running blocking work is waited for, within
//    the same bound d. Known limit: a file operation still in io_uring when
//    d runs out (a read of a pipe nobody writes) is never reaped, and it
//    keeps the runtime's memory and the file's descriptor for the rest of
//    the process.
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
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>

#include "volt/detail/blocking_wait.hpp"
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

// The task of spawn_blocking(fn, args...): fn and decayed copies of the
// arguments, invoked as std::invoke(fn, std::move(args)...). The closure is
// built here, in an ordinary function, where g++ 12 constructs and destroys
// its captures correctly (not in the caller's co_await statement).
template <class F, class... Args>
Task<std::invoke_result_t<std::decay_t<F>&, std::decay_t<Args>...>> blocking_task(F&& fn,
                                                                                  Args&&... args) {
  if constexpr (sizeof...(Args) == 0) {
    return run_blocking(std::decay_t<F>(std::forward<F>(fn)));
  } else {
    return run_blocking(
        [fn = std::decay_t<F>(std::forward<F>(fn)),
         ... args = std::decay_t<Args>(std::forward<Args>(args))]() mutable -> decltype(auto) {
          return std::invoke(fn, std::move(args)...);
        });
  }
}

template <class T>
JoinHandle<T> spawn_on(Scheduler* scheduler, Task<T>&& task) {
  if (!task) throw Error(errc::invalid_handle, "spawning an empty Task");
  TaskHeader* header = TaskCell<T>::create(std::move(task));
  scheduler->retain_for_task();  // the cell's reference, dropped at its deallocation
  header->scheduler = scheduler;
  scheduler->spawn(header);
  return JoinHandle<T>(header);
}
}  // namespace detail

// What Builder::on_unhandled_exception's hook receives: the exception of a
// task that nobody can observe any more.
struct UnhandledException {
  std::exception_ptr exception;  // never null
  std::uint64_t task_id = 0;     // the task's JoinHandle::id()
  bool blocking = false;         // a spawn_blocking function (else a spawned task)
};

// A cloneable reference to a runtime, usable from any thread.
class Handle {
 public:
  // The runtime of the calling thread; throws Error(errc::no_runtime) outside
  // any, and Error(errc::runtime_shutdown) on a thread (a blocking-pool job)
  // still running after its runtime's shutdown began.
  static Handle current();

  template <class T>
  JoinHandle<T> spawn(Task<T> task) const {
    return detail::spawn_on(detail::core_scheduler(*core_), std::move(task));
  }
  // Runs `fn(args...)` on the runtime's blocking pool (see
  // volt/task/spawn_blocking.hpp).
  template <class F, class... Args>
  JoinHandle<std::invoke_result_t<std::decay_t<F>&, std::decay_t<Args>...>> spawn_blocking(
      F&& fn, Args&&... args) const {
    return detail::spawn_on(
        detail::blocking_scheduler(*core_),
        detail::blocking_task(std::forward<F>(fn), std::forward<Args>(args)...));
  }
  template <class T>
  T block_on(Task<T> task) const;

  RuntimeStats stats() const;
  // Whether file operations use io_uring (see Builder::io_uring).
  bool uses_io_uring() const noexcept;

  // Enters the runtime on the calling thread until the guard is destroyed
  // (Tokio's Handle::enter): Handle::current(), volt::spawn and
  // spawn_blocking then reach this runtime from a plain thread, e.g. to
  // create and spawn from code that does not take a Handle. It does not run
  // tasks here, and blocking (block_on, join) stays allowed. Guards nest:
  // destroy them in the reverse order of their creation, on the thread that
  // made them. On a runtime's own thread (a worker, inside a task), that
  // runtime stays the current one.
  //
  //   volt::Runtime rt = volt::Runtime::Builder().build();
  //   {
  //     auto guard = rt.enter();
  //     auto h = volt::spawn(work());      // on rt
  //     h.join();
  //   }
  class EnterGuard;
  [[nodiscard]] EnterGuard enter() const;

  explicit Handle(std::shared_ptr<detail::RuntimeCore> core) noexcept : core_(std::move(core)) {}

 private:
  friend class Runtime;
  std::shared_ptr<detail::RuntimeCore> core_;
};

// The guard of Handle::enter() / Runtime::enter(): keeps the runtime's core
// alive (a Handle), and restores the thread's previously entered runtime when
// destroyed. Neither copyable nor movable (it belongs to one thread's scope).
class Handle::EnterGuard {
 public:
  ~EnterGuard();
  EnterGuard(const EnterGuard&) = delete;
  EnterGuard& operator=(const EnterGuard&) = delete;

 private:
  friend class Handle;
  explicit EnterGuard(Handle handle);
  Handle handle_;
  detail::Scheduler* previous_;
};

// How many CPUs this process may actually use: the CPUs in the calling
// thread's affinity mask (sched_getaffinity; `taskset`, a cpuset), bounded by
// the CPU quota of its cgroups (v2 `cpu.max`, v1 `cpu.cfs_quota_us`, the
// tightest of the process's cgroup and its ancestors), rounded down, at least
// 1. A container given "2 CPUs" on a 64-core host answers 2, where
// std::thread::hardware_concurrency() answers 64. Read afresh on each call
// (a few small file reads). The multi-thread runtime's default worker count.
std::size_t available_parallelism() noexcept;

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

    // Number of worker threads (multi-thread flavour). Default: the
    // environment variable VOLT_WORKER_THREADS if set (a whole number from 1
    // to 4096; anything else makes build() throw errc::invalid_argument), else
    // available_parallelism(): the CPUs this process may use, not the
    // machine's.
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
    // Whether files may use io_uring (default true). With false, or with the
    // environment variable VOLT_IO_URING=0, or when the kernel refuses
    // io_uring (probed when the runtime starts: ENOSYS, EPERM from the
    // kernel.io_uring_disabled sysctl or a seccomp filter, a missing
    // opcode), file operations that cannot complete on the calling thread
    // run on the blocking pool instead. Runtime::uses_io_uring() tells which.
    Builder& io_uring(bool allow) {
      io_uring_ = allow;
      return *this;
    }
    // Start with the clock paused (tests; current-thread flavour only). See
    // volt/time/clock.hpp.
    Builder& start_paused(bool paused) {
      start_paused_ = paused;
      return *this;
    }
    // Called once for every exception that escapes a spawned task or a
    // spawn_blocking function and that no JoinHandle can rethrow any more.
    //
    // The rule: the task finished with an exception, and its JoinHandle was
    // destroyed (or assigned over) without the outcome being taken, whether
    // before the task threw or after. An exception that `co_await handle` or
    // `handle.join()` rethrows is the caller's and never reported; a handle
    // that is alive is never reported, however long it lives. Aborted or
    // shut-down tasks end with no exception (errc::cancelled /
    // runtime_shutdown) and are not reported; abort() of a task that already
    // threw changes nothing, so its exception is reported when the handle goes.
    //
    // Where the hook runs:
    //  - handle dropped first, task throws later: on the thread that completes
    //    the task (a worker, a thread running tasks inside block_on or join(),
    //    or a blocking-pool thread), right after the task's frame is gone;
    //  - task threw first, handle dropped later: synchronously on the thread
    //    that destroys the handle, inside its destructor, which may be outside
    //    the runtime and may be after the Runtime was destroyed (the hook is
    //    kept alive for as long as any task cell of the runtime exists).
    // So the hook (one copy per runtime, shared by all its threads) may run on
    // several threads at once: it must be thread-safe.
    // It should be short and must not block (it holds up that worker), and it
    // must not wait for the runtime's shutdown. It may spawn tasks.
    //
    // If the hook throws, what it threw is caught and printed to stderr with
    // the task's id and exception; the worker carries on.
    //
    // Default (no hook, or an empty one): one line on stderr per exception,
    //   volt: unhandled exception in detached task 42: <what()>
    // ("detached spawn_blocking task" for a blocking function, "unknown
    // exception" when it does not derive from std::exception).
    //
    // Unlike Tokio's unhandled_panic, an exception a live JoinHandle will
    // deliver is not reported. Costs nothing unless an exception is dropped.
    //
    // Example:
    //
    //   std::atomic<int> failures{0};
    //   auto rt = volt::Runtime::Builder()
    //                 .on_unhandled_exception([&failures](const volt::UnhandledException& u) {
    //                   failures.fetch_add(1);
    //                   try {
    //                     std::rethrow_exception(u.exception);
    //                   } catch (const std::exception& e) {
    //                     log_error("task {} failed: {}", u.task_id, e.what());
    //                   } catch (...) {
    //                   }
    //                 })
    //                 .build();
    //   (void)rt.spawn(might_throw());   // detached: a throw reaches the hook
    Builder& on_unhandled_exception(std::function<void(const UnhandledException&)> hook) {
      on_unhandled_exception_ = std::move(hook);
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
    bool io_uring_ = true;
    std::function<void(const UnhandledException&)> on_unhandled_exception_;
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

  template <class F, class... Args>
  JoinHandle<std::invoke_result_t<std::decay_t<F>&, std::decay_t<Args>...>> spawn_blocking(
      F&& fn, Args&&... args) {
    return handle_.spawn_blocking(std::forward<F>(fn), std::forward<Args>(args)...);
  }
  Handle handle() const { return handle_; }
  RuntimeStats stats() const { return handle_.stats(); }
  bool uses_io_uring() const noexcept { return handle_.uses_io_uring(); }

  // Shuts down, waiting at most `timeout` for workers still inside a poll.
  // Idempotent; the runtime accepts no tasks afterwards.
  void shutdown_timeout(std::chrono::nanoseconds timeout);
  // Shuts down without waiting for anything (Tokio's shutdown_background):
  // shutdown_timeout(0). Idle workers leave and every task that is not being
  // polled is cancelled at once; a worker inside a long poll, a thread inside
  // block_in_place and running spawn_blocking work finish in the background
  // (they keep what they use alive) and clean up after themselves.
  void shutdown_background() { shutdown_timeout(std::chrono::nanoseconds::zero()); }

  // See Handle::enter().
  [[nodiscard]] Handle::EnterGuard enter() const { return handle_.enter(); }

 private:
  explicit Runtime(std::shared_ptr<detail::RuntimeCore> core);
  Handle handle_;
};

// Spawns on the runtime of the calling thread (inside a task, on a worker or
// a blocking-pool thread). Throws volt::Error(errc::no_runtime) elsewhere.
//
// Lambdas: `co_await volt::spawn(f([s] { ... }))` is miscompiled by g++ 12
// (the captures are destroyed twice; README, "Compiler issues"): name the
// lambda before that statement. And never spawn a capturing coroutine lambda
// called in place, `volt::spawn([s]() -> Task<int> { ... }())`: its body
// reads s from the closure, which is gone at the end of the statement while
// the task runs on (with any compiler); pass s as a parameter instead.
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
  detail::make_current_thread_parker();  // before the task can start
  return spawn(std::move(task)).join();
}

// Tokio's paths: volt::runtime::{Runtime, Builder, Handle} (tokio::runtime)
// and volt::task::spawn (tokio::task::spawn) name the declarations above.
namespace runtime {
using volt::Handle;
using volt::Runtime;
using Builder = volt::Runtime::Builder;
}  // namespace runtime
namespace task {
using volt::spawn;
}  // namespace task

}  // namespace volt
