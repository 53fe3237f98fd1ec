// volt/detail/io_operation.hpp: how a socket operation waits for readiness.
//
// Every descriptor a socket owns is registered once with its runtime's driver
// (IoHandle). The registration (IoSource, src/io/io_source.hpp) keeps the
// descriptor's readiness as the driver last saw it, edge-triggered, plus the
// operations waiting for it. An operation (IoOperation, the base of every
// socket awaitable) runs like this:
//
//   1. Budget: one unit of the task's cooperative budget, taken before the
//      system call, so a socket that is always ready cannot starve the worker
//      (a spent budget yields first and makes the attempt when polled again).
//   2. If the registration says ready for the operation's direction, try the
//      system call (`step`). EAGAIN clears that readiness, but only if the
//      driver has not set it again since it was read (the tick, see
//      IoSource), and the operation looks again.
//   3. Not ready: register the waiter (which lives inside the operation: no
//      allocation) under the registration's lock, re-checking readiness there,
//      and suspend. The driver's wake-up runs the task's readiness check,
//      which tries again from 2 without resuming the coroutine if the
//      readiness turns out stale.
//
// Destroying a suspended operation withdraws its waiter (cancellation by
// drop, as everywhere in volt); it has done at most the system calls whose
// results it reported (a write_all cancelled mid-way has written a prefix).
//
// Closing under an operation: every operation holds a use of the
// registration from its construction to its destruction. A close() from
// another task wakes it, and it completes with errc::closed; the descriptor
// stays open (so its number cannot be handed to another socket) until the
// last such use ends, and an operation started after the close never makes
// its system call.
//
// Initial readiness is "ready both ways": the first operation on a new socket
// tries its system call at once instead of waiting for the driver to report
// what epoll's edge-triggered registration already knows.
#pragma once

#include <coroutine>
#include <cstdint>
#include <utility>

#include "volt/detail/intrusive_list.hpp"
#include "volt/detail/waker.hpp"
#include "volt/error.hpp"

namespace volt::detail {

class IoSource;

// Directions an operation waits for: a bit set. kBoth (either direction)
// is for readiness waits that make no system call (net::ReadyEvents); an
// operation whose step can say kWouldBlock must wait for one direction, so
// that its EAGAIN clears only that direction's readiness.
enum class Interest : std::uint8_t { kRead = 1, kWrite = 2, kBoth = 3 };

// A descriptor registered with the current runtime's driver, owned: the
// destructor closes it. Holds a reference on the runtime's scheduler, so the
// driver outlives every registration, even one whose socket outlives its
// Runtime object.
//
// Thread safety: close() and every const member may be called from any
// number of tasks at once (a socket shared through split halves); moving,
// assigning and destroying follow the usual rule (nobody else may use the
// object meanwhile). After close(), operations still in flight complete with
// errc::closed and never touch the descriptor number again (see
// src/io/io_source.hpp, "Lifetime").
class IoHandle {
 public:
  IoHandle() noexcept = default;
  // Takes ownership of `fd` (closed on failure too) and registers it with
  // the current runtime. Errors: errc::no_runtime outside a runtime, or the
  // system error of epoll_ctl (e.g. ENOMEM).
  static std::error_code open(int fd, IoHandle& out) noexcept;
  // The same, with the runtime of `sibling` (an accepted connection joins
  // its listener's runtime, whichever thread awaits the accept); the current
  // runtime's if `sibling` is null.
  static std::error_code open_like(int fd, IoSource* sibling, IoHandle& out) noexcept;
  static std::error_code open_like(int fd, const IoHandle& sibling, IoHandle& out) noexcept {
    return open_like(fd, sibling.source(), out);
  }
  IoHandle(IoHandle&& other) noexcept;
  IoHandle& operator=(IoHandle&& other) noexcept;
  IoHandle(const IoHandle&) = delete;
  IoHandle& operator=(const IoHandle&) = delete;
  ~IoHandle() { reset(); }

  // The descriptor as registered, for code that holds a use of it (an
  // IoOperation, an IoUse) or owns it exclusively (a socket being set up).
  // Anything else must go through IoUse: after a close() by another task
  // the number may belong to another file.
  int fd() const noexcept { return fd_; }
  // The descriptor, or -1 once closed (the user-facing native_handle()).
  int native_handle() const noexcept;
  IoSource* source() const noexcept { return source_; }
  // Registered and not closed.
  bool is_open() const noexcept;
  explicit operator bool() const noexcept { return is_open(); }
  // Closes now (idempotent, any thread): operations waiting on it, or
  // starting later, complete with errc::closed. The descriptor itself is
  // closed once no operation is inside a system call on it (at once, unless
  // another task's operation is between its start and its end).
  void close() const noexcept;
  // Closes, and lets go of the registration (the handle becomes empty).
  void reset() noexcept;

  // Whether the descriptor reports, with each read, how many bytes are left
  // in its receive queue (a TCP socket with TCP_INQ set: see
  // enable_queue_hint in src/net/socket_util.hpp). Set by the socket's maker
  // before the handle is shared.
  bool reports_queue() const noexcept { return reports_queue_; }
  void set_reports_queue(bool on) noexcept { reports_queue_ = on; }

 private:
  IoSource* source_ = nullptr;
  int fd_ = -1;
  bool reports_queue_ = false;
};

// A use of a handle's descriptor for one synchronous call (the try_ forms,
// socket options, addresses): while it lives the descriptor number cannot be
// closed under it. fd() is -1 if the handle is empty or closed (report
// errc::closed then).
class IoUse {
 public:
  explicit IoUse(const IoHandle& handle) noexcept;
  ~IoUse();
  IoUse(const IoUse&) = delete;
  IoUse& operator=(const IoUse&) = delete;

  int fd() const noexcept { return fd_; }
  // The registration's readiness word before a system call, and the clear
  // after its EAGAIN (tick-checked, see IoSource).
  std::uint64_t readiness() const noexcept;
  void clear_readiness(std::uint64_t seen, Interest interest) const noexcept;

 private:
  IoSource* source_;
  int fd_ = -1;
};

// The part of an IoOperation the registration links into its wait list.
struct IoWaiter : IntrusiveLink {
  Waker waker;
  struct TaskHeader* task = nullptr;  // whose waker it is (under the lock)
  Interest interest = Interest::kRead;
};

// Base of socket awaitables. A derived operation supplies `step`, the system
// call, which either finishes the operation (result stored in the derived
// object, errors included) or reports that the descriptor would block.
class IoOperation {
 public:
  // kDoneDrained: finished, and the system call showed the direction
  // exhausted (a read shorter than its buffer drained the receive queue; a
  // write shorter than its buffer filled the send queue), so the readiness
  // is cleared as after an EAGAIN and the next operation waits for the
  // driver instead of paying for a system call that would say EAGAIN.
  //
  // kRetryLater: the step armed a wake-up of its own (accept's back-off
  // timer, with current_task_waker()); the operation waits for the task to
  // be woken and then calls the step again, whatever the readiness says.
  enum class Step : std::uint8_t { kDone, kDoneDrained, kWouldBlock, kRetryLater };
  using StepFn = Step (*)(IoOperation& self) noexcept;

  // Takes a use of the handle's registration, held until destruction.
  IoOperation(const IoHandle& handle, Interest interest, StepFn step) noexcept;
  // Only before it is awaited (a timeout or select takes its operand by
  // move): the use moves with it.
  IoOperation(IoOperation&& other) noexcept
      : source_(std::exchange(other.source_, nullptr)),
        step_(other.step_),
        fd_(other.fd_),
        closed_(other.closed_) {
    waiter_.interest = other.waiter_.interest;
  }
  IoOperation(const IoOperation&) = delete;
  IoOperation& operator=(const IoOperation&) = delete;
  IoOperation& operator=(IoOperation&&) = delete;
  ~IoOperation();

  bool await_ready() noexcept { return start(); }
  bool await_suspend(std::coroutine_handle<> self);

 protected:
  // The registration was shut down (or the handle was empty): the derived
  // await_resume reports errc::closed.
  bool closed() const noexcept { return closed_; }
  // For await_resume: withdraws a waiter left queued when the operation
  // completed without being woken through it.
  void finish() noexcept {
    if (registered_) withdraw();
  }
  // The descriptor, valid for system calls made from `step` (the use held
  // since construction keeps the number from being closed and reused).
  int fd() const noexcept { return fd_; }
  // The registration (null for an empty handle); alive while this is.
  IoSource* source() const noexcept { return source_; }
  // For a step that arms its own wake-up (kRetryLater): a waker of the task
  // being polled (a step runs only inside its task's poll).
  static Waker current_task_waker() noexcept;

 private:
  bool start() noexcept;
  bool attempt() noexcept;
  bool must_wait(struct TaskHeader* task) noexcept;
  void withdraw() noexcept;
  static bool ready_check(void* context) noexcept;

  IoSource* source_;
  StepFn step_;
  int fd_;
  IoWaiter waiter_;
  bool closed_ = false;
  bool yielding_ = false;
  bool retry_later_ = false;  // the last step said kRetryLater
  // Owner-only: the waiter was linked by this operation and may still be
  // (the driver unlinks it under the registration's lock when it wakes it,
  // so only a look under that lock says whether it still is).
  bool registered_ = false;
};

}  // namespace volt::detail
