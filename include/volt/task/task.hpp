// volt/task/task.hpp: Task<T>, the lazy coroutine type of volt.
//
// A function returning Task<T> is a coroutine that does not start until it is
// awaited (co_await task) or spawned (volt::spawn(task)).
//
// Guarantees:
//  - Lazy: creating a Task runs nothing; destroying an unstarted Task destroys
//    its frame (running the destructors of its parameters).
//  - Symmetric transfer: awaiting a Task transfers control to it without
//    growing the stack, and its completion transfers straight back to the
//    awaiter, so arbitrarily long or deep chains of awaits run in constant
//    stack space, in every build mode (see tls_resume_next below).
//  - A Task runs inside a volt runtime: awaited by another Task, or spawned.
//    It cannot be resumed by hand or awaited from a foreign coroutine type.
//  - T may be void, a reference or a move-only type. An exception escaping the
//    coroutine is stored and rethrown from `co_await`.
//  - A Task is move-only and may be awaited once. Awaiting an empty (moved-from)
//    Task throws volt::Error(errc::invalid_handle).
//  - Frames come from volt's recycling frame allocator: steady-state creation
//    does not reach malloc.
//  - A Task runs on whichever thread resumes it; it has no thread affinity.
//
// Example:
//
//   volt::Task<int> answer() { co_return 42; }
//   volt::Task<int> twice() { co_return 2 * co_await answer(); }
#pragma once

#include <coroutine>
#include <exception>
#include <utility>

#include "volt/detail/frame_allocator.hpp"
#include "volt/detail/result.hpp"

namespace volt {

template <class T = void>
class Task;

namespace detail {

// Control transfer between awaiting tasks goes through a trampoline rather
// than through a handle returned from await_suspend: the poll loop
// (poll_task, src/task/harness.cpp) resumes the coroutine left here, until
// none is left. A returned handle is resumed by compiler-generated code that
// is a guaranteed tail call only when optimising without sanitizers (GCC 12
// at -O0, or with ASan/TSan, grows the stack by a frame per transfer and a
// million nested awaits overflow it); the trampoline keeps the stack flat in
// every build, for one thread-local write and read per transfer.
// Owned by the thread running the poll; empty between polls.
extern thread_local std::coroutine_handle<> tls_resume_next;

class TaskPromiseBase {
  struct FinalAwaiter {
    bool await_ready() const noexcept { return false; }
    template <class Promise>
    void await_suspend(std::coroutine_handle<Promise> self) noexcept {
      // Back to the awaiter. A spawned root has no continuation: the poll
      // loop finds nothing to resume and the poll ends.
      tls_resume_next = self.promise().continuation_;
    }
    void await_resume() const noexcept {}
  };

 public:
  std::suspend_always initial_suspend() const noexcept { return {}; }
  FinalAwaiter final_suspend() const noexcept { return {}; }

  static void* operator new(std::size_t size) { return frame_allocate(size); }
  static void operator delete(void* frame, std::size_t size) noexcept {
    frame_deallocate(frame, size);
  }

  void set_continuation(std::coroutine_handle<> continuation) noexcept {
    continuation_ = continuation;
  }

 private:
  std::coroutine_handle<> continuation_;
};

template <class T>
class TaskPromise final : public TaskPromiseBase {
 public:
  Task<T> get_return_object() noexcept;
  void unhandled_exception() noexcept { result_.set_exception(std::current_exception()); }
  template <class U>
  void return_value(U&& value) {
    result_.set_value(std::forward<U>(value));
  }
  Result<T>& result() noexcept { return result_; }

 private:
  Result<T> result_;
};

template <>
class TaskPromise<void> final : public TaskPromiseBase {
 public:
  Task<void> get_return_object() noexcept;
  void unhandled_exception() noexcept { result_.set_exception(std::current_exception()); }
  void return_void() noexcept { result_.set_value(); }
  Result<void>& result() noexcept { return result_; }

 private:
  Result<void> result_;
};

}  // namespace detail

template <class T>
class [[nodiscard]] Task {
 public:
  using promise_type = detail::TaskPromise<T>;
  using Handle = std::coroutine_handle<promise_type>;
  using value_type = T;

  Task() noexcept = default;
  explicit Task(Handle frame) noexcept : frame_(frame) {}
  Task(Task&& other) noexcept : frame_(std::exchange(other.frame_, {})) {}
  Task& operator=(Task&& other) noexcept {
    if (this != &other) {
      if (frame_) frame_.destroy();
      frame_ = std::exchange(other.frame_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() {
    if (frame_) frame_.destroy();
  }

  explicit operator bool() const noexcept { return static_cast<bool>(frame_); }

  // Gives up ownership of the frame (used by spawn).
  Handle release() noexcept { return std::exchange(frame_, {}); }

  class Awaiter {
   public:
    explicit Awaiter(Handle frame) noexcept : frame_(frame) {}
    bool await_ready() const noexcept { return !frame_ || frame_.done(); }
    void await_suspend(std::coroutine_handle<> awaiter) noexcept {
      frame_.promise().set_continuation(awaiter);
      detail::tls_resume_next = frame_;  // the poll loop starts the child next
    }
    T await_resume() {
      if (!frame_) throw Error(errc::invalid_handle, "awaiting an empty Task");
      return frame_.promise().result().get();
    }

   private:
    Handle frame_;
  };

  Awaiter operator co_await() & noexcept { return Awaiter(frame_); }
  Awaiter operator co_await() && noexcept { return Awaiter(frame_); }

 private:
  Handle frame_;
};

namespace detail {
template <class T>
Task<T> TaskPromise<T>::get_return_object() noexcept {
  return Task<T>(std::coroutine_handle<TaskPromise<T>>::from_promise(*this));
}
inline Task<void> TaskPromise<void>::get_return_object() noexcept {
  return Task<void>(std::coroutine_handle<TaskPromise<void>>::from_promise(*this));
}
}  // namespace detail

}  // namespace volt
