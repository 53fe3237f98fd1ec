// volt/task/spawn_blocking.hpp: run blocking code without blocking a worker.
//
//   auto h = volt::spawn_blocking([path] { return read_whole_file(path); });
//   std::string text = co_await h;   // or h.join() from a plain thread
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

template <class F>
JoinHandle<std::invoke_result_t<std::decay_t<F>&>> spawn_blocking(F&& fn) {
  return detail::spawn_on(detail::current_blocking_scheduler(),
                          detail::run_blocking(std::decay_t<F>(std::forward<F>(fn))));
}

}  // namespace volt
