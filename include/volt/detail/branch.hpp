// volt/detail/branch.hpp: a chain of coroutines run inside the current task's
// poll, beside others: what lets one task wait on several operations at once
// (timeout: an operation and a timer; later select: any number).
//
// A Branch owns a root coroutine (a Task frame) and a ResumeSlot. start() and
// step() run the chain with the branch's slot as the thread's current slot,
// so a leaf that suspends in it records itself there (not in the task's slot)
// and registers the task's waker. The combinator records a check of its own
// in the task's slot that steps its branches; a wake-up from any branch's leaf
// re-polls the task, which runs the check, which resumes only the branch whose
// leaf is ready (every leaf carries a readiness check; see ResumeSlot).
//
// Cancellation is destruction: destroying the Branch destroys the root frame
// wherever it is suspended, which runs the destructors of what it awaits.
//
// Must be started inside a task's poll (an await_suspend or a check).
#pragma once

#include <coroutine>
#include <utility>

#include "volt/detail/task_header.hpp"
#include "volt/task/task.hpp"

namespace volt::detail {

// Awaits the awaiter it points to (which lives elsewhere, in the combinator),
// so a branch can run an arbitrary awaiter without moving it.
template <class Awaiter>
struct AwaiterRef {
  Awaiter* awaiter;
  bool known_not_ready;  // the combinator just asked await_ready: skip it
  bool await_ready() { return !known_not_ready && awaiter->await_ready(); }
  template <class Promise>
  auto await_suspend(std::coroutine_handle<Promise> self) {
    return awaiter->await_suspend(self);
  }
  decltype(auto) await_resume() { return awaiter->await_resume(); }
};

// The root of a branch that awaits `*awaiter`; its Task holds the outcome.
template <class Awaiter>
Task<decltype(std::declval<Awaiter&>().await_resume())> await_in_branch(
    Awaiter* awaiter, bool known_not_ready = false) {
  using R = decltype(std::declval<Awaiter&>().await_resume());
  if constexpr (std::is_void_v<R>) {
    co_await AwaiterRef<Awaiter>{awaiter, known_not_ready};
    co_return;
  } else {
    co_return co_await AwaiterRef<Awaiter>{awaiter, known_not_ready};
  }
}

template <class T>
class Branch {
 public:
  Branch() noexcept = default;
  Branch(const Branch&) = delete;
  Branch& operator=(const Branch&) = delete;

  // Runs `root` until its first suspension. True if it already finished.
  bool start(Task<T> root) noexcept {
    reset();
    frame_ = root.release();
    slot_.point = frame_;
    slot_.check = nullptr;
    slot_.poll();
    return frame_.done();
  }
  // Resumes the chain if its leaf is ready. True once it has finished.
  bool step() noexcept {
    if (!frame_.done()) slot_.poll();
    return frame_.done();
  }
  bool started() const noexcept { return static_cast<bool>(frame_); }
  bool done() const noexcept { return frame_ && frame_.done(); }
  // Precondition: done(). The root's value, or its exception rethrown.
  decltype(auto) result() { return frame_.promise().result().get(); }
  // Destroys the chain wherever it is suspended (cancellation).
  void reset() noexcept {
    if (frame_) std::exchange(frame_, {}).destroy();
  }
  ~Branch() { reset(); }

 private:
  typename Task<T>::Handle frame_;  // owned
  ResumeSlot slot_;
};

}  // namespace volt::detail
