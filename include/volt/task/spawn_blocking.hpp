// volt/task/spawn_blocking.hpp: run blocking code without blocking a worker.
//
//   auto h = volt::spawn_blocking([path] { return read_whole_file(path); });
//   std::string text = co_await h;   // or h.join() from a plain thread
//
//   std::string text = co_await volt::spawn_blocking(read_whole_file, path);
//
// The function runs on the runtime's blocking pool, a set of threads apart
// from the workers: made on demand up to Builder::max_blocking_threads
// (default 512; beyond it, work waits in FIFO order), each leaving after
// Builder::thread_keep_alive (default 10 s) without work.
//
// Guarantees:
//  - Returns a JoinHandle<R> (R = the function's result): awaitable from a
//    task, join()-able from any other thread, including another blocking
//    function. An exception thrown by the function is rethrown from it.
//  - spawn_blocking(fn, args...) runs std::invoke(fn, std::move(args)...) on
//    copies of fn and the arguments (decayed, as std::thread; pass std::ref
//    for a reference), made before spawn_blocking returns.
//  - g++ 12 (README, "Compiler issues"): never write a lambda with captures
//    inside the co_await expression, as `co_await volt::spawn_blocking([s] {
//    ... })`: GCC 12 destroys the captures twice (a double free). No
//    signature of spawn_blocking can prevent it: the fault is in the awaiting
//    coroutine's own code. Name the handle (as above) or the lambda first,
//    or pass the values as arguments:
//    `co_await volt::spawn_blocking(read_whole_file, path)`. Handle's and
//    Runtime's spawn_blocking take the same arguments, under the same rule.
//  - abort() cancels work that has not started (the handle then reports
//    errc::cancelled); a function already running is never interrupted.
//  - Inside the function, Handle::current() and volt::spawn() reach the
//    runtime, and blocking (join, Handle::block_on) is allowed.
//  - Shutdown: work not yet started is cancelled (errc::runtime_shutdown);
//    running work is waited for within the runtime's shutdown bound
//    (Runtime::shutdown_timeout), then left to finish in the background.
//    Spawning after shutdown returns a handle that reports
//    errc::runtime_shutdown; nothing runs.
//  - Outside a runtime (no task, worker or blocking thread on this thread),
//    throws volt::Error(errc::no_runtime); use Handle::spawn_blocking there.
//  - Costs one task cell and one frame (recycled) per call.
#pragma once

#include <type_traits>
#include <utility>

#include "volt/runtime/runtime.hpp"

namespace volt {

template <class F, class... Args>
JoinHandle<std::invoke_result_t<std::decay_t<F>&, std::decay_t<Args>...>> spawn_blocking(
    F&& fn, Args&&... args) {
  return detail::spawn_on(detail::current_blocking_scheduler(),
                          detail::blocking_task(std::forward<F>(fn), std::forward<Args>(args)...));
}

// Tokio's path (tokio::task::spawn_blocking).
namespace task {
using volt::spawn_blocking;
}  // namespace task

}  // namespace volt
