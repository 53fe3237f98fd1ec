// volt/task/block_in_place.hpp: run blocking code on the current worker
// thread, without stopping the runtime's other tasks (Tokio's
// tokio::task::block_in_place).
//
//   volt::Task<Report> handle(Request r) {
//     Parsed p = co_await read_request(r);
//     // CPU-heavy or blocking, and borrowing locals (which spawn_blocking
//     // could not, without copies):
//     Report report = volt::block_in_place([&] { return render(p); });
//     co_return report;
//   }
//
// On a worker of the multi-thread runtime, the worker's queue and role pass
// to a fresh thread before `fn` runs, so the tasks queued behind the caller
// keep running; the calling thread runs `fn`, then the rest of the calling
// task's poll (up to its next suspension), and then ends. So the call costs a
// thread start (tens of microseconds): for many short jobs, spawn_blocking's
// pool is cheaper.
//
// Guarantees:
//  - Returns fn()'s value, or rethrows its exception, on the calling thread.
//  - Inside fn the thread counts as the runtime's blocking thread, not as a
//    worker: Handle::current(), volt::spawn and spawn_blocking reach the
//    runtime, and blocking is allowed (JoinHandle::join, Handle::block_on:
//    `volt::block_in_place([&] { return h.block_on(fetch()); })`).
//  - Anywhere else that is not a worker (a plain thread, a blocking-pool
//    function, a thread in block_on helping the runtime, a call nested in
//    another block_in_place), fn just runs. On a worker of a runtime that is
//    shutting down, fn runs as an ordinary long poll (no hand-off; blocking
//    inside it is refused with errc::blocking_in_runtime).
//  - The runtime's shutdown waits for a thread still inside fn (or still
//    finishing the task's poll) as for a worker inside a long poll: at most
//    the shutdown bound (Runtime::shutdown_timeout), then it finishes in the
//    background. A thread that handed off is detached: nothing of it stays
//    once it has ended.
//
// Bad input:
//  - On the current-thread runtime (the one thread runs every task, so
//    blocking it stops them all; Tokio panics): throws
//    volt::Error(errc::blocking_in_runtime) without calling fn.
//  - If the fresh thread cannot be made (the system refuses: EAGAIN), throws
//    that std::system_error without calling fn (Tokio panics).
#pragma once

#include <functional>
#include <type_traits>
#include <utility>

#include "volt/detail/task_header.hpp"

namespace volt {

namespace detail {
// Hands the calling worker's role to a fresh thread (see above) and makes the
// thread a blocking one until destroyed; the destructor restores the task's
// context (current task, budget) without the worker. Not movable.
class BlockInPlaceScope {
 public:
  BlockInPlaceScope();  // src/runtime/block_in_place.cpp
  ~BlockInPlaceScope();
  BlockInPlaceScope(const BlockInPlaceScope&) = delete;
  BlockInPlaceScope& operator=(const BlockInPlaceScope&) = delete;

 private:
  ThreadContext saved_;
  void* kept_worker_;  // the thread's worker after the hand-off (nullptr: gone)
};
}  // namespace detail

template <class F>
std::invoke_result_t<F&&> block_in_place(F&& fn) {
  detail::BlockInPlaceScope scope;
  return std::invoke(std::forward<F>(fn));
}

namespace task {
using volt::block_in_place;
}  // namespace task

}  // namespace volt
