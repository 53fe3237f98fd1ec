// volt/task/yield_now.hpp: give the worker back for one trip through its queue.
//
// `co_await volt::yield_now()` suspends the current task and queues it behind
// the work already queued on its worker, so a task looping on yield_now cannot
// starve others. Must be awaited inside a runtime task; elsewhere it throws
// volt::Error(errc::no_runtime). Allocates nothing.
#pragma once

#include <coroutine>

#include "volt/task/join_handle.hpp"

namespace volt {

struct YieldNow {
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> self) { detail::yield_current(self); }
  void await_resume() const noexcept {}
};

inline YieldNow yield_now() noexcept {
  return {};
}

// Tokio's path (tokio::task::yield_now).
namespace task {
using volt::yield_now;
}  // namespace task

}  // namespace volt
