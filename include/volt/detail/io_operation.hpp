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
// Initial readiness is "ready both ways": the first operation on a new socket
// tries its system call at once instead of waiting for the driver to report
// what epoll's edge-triggered registration already knows.
#pragma once

#include <coroutine>
#include <cstdint>

#include "volt/detail/intrusive_list.hpp"
#include "volt/detail/waker.hpp"
#include "volt/error.hpp"

namespace volt::detail {

class IoSource;

// Directions an operation waits for.
enum class Interest : std::uint8_t { kRead = 1, kWrite = 2 };

// A descriptor registered with the current runtime's driver, owned: the
// destructor deregisters and closes it. Holds a reference on the runtime's
// scheduler, so the driver outlives every registration, even one whose
// socket outlives its Runtime object.
class IoHandle {
 public:
  IoHandle() noexcept = default;
  // Takes ownership of `fd` (closed on failure too) and registers it with
  // the current runtime. Errors: errc::no_runtime outside a runtime, or the
  // system error of epoll_ctl (e.g. ENOMEM).
  static std::error_code open(int fd, IoHandle& out) noexcept;
  // The same, with the runtime of `sibling` (an accepted connection joins
  // its listener's runtime, whichever thread awaits the accept).
  static std::error_code open_like(int fd, const IoHandle& sibling, IoHandle& out) noexcept;
  IoHandle(IoHandle&& other) noexcept;
  IoHandle& operator=(IoHandle&& other) noexcept;
  IoHandle(const IoHandle&) = delete;
  IoHandle& operator=(const IoHandle&) = delete;
  ~IoHandle() { reset(); }

  int fd() const noexcept { return fd_; }
  IoSource* source() const noexcept { return source_; }
  explicit operator bool() const noexcept { return source_ != nullptr; }
  // Deregisters and closes now (idempotent). Operations still waiting on it
  // (from another task, through a split half) complete with errc::closed.
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

// For the try_ forms: the registration's readiness word before a system
// call, and the clear after its EAGAIN (tick-checked, see IoSource).
std::uint64_t io_readiness(const IoHandle& handle) noexcept;
void io_clear_readiness(const IoHandle& handle, std::uint64_t seen, Interest interest) noexcept;

// The part of an IoOperation the registration links into its wait list.
struct IoWaiter : IntrusiveLink {
  Waker waker;
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
  enum class Step : std::uint8_t { kDone, kDoneDrained, kWouldBlock };
  using StepFn = Step (*)(IoOperation& self) noexcept;

  IoOperation(const IoHandle& handle, Interest interest, StepFn step) noexcept
      : source_(handle.source()), step_(step) {
    waiter_.interest = interest;
  }
  // Only before it is awaited (a timeout or select takes its operand by move).
  IoOperation(IoOperation&& other) noexcept
      : source_(other.source_), step_(other.step_), closed_(other.closed_) {
    waiter_.interest = other.waiter_.interest;
  }
  IoOperation(const IoOperation&) = delete;
  IoOperation& operator=(const IoOperation&) = delete;
  IoOperation& operator=(IoOperation&&) = delete;
  ~IoOperation() {
    if (registered_) withdraw();
  }

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

 private:
  bool start() noexcept;
  bool attempt() noexcept;
  bool must_wait(struct TaskHeader* task) noexcept;
  void withdraw() noexcept;
  static bool ready_check(void* context) noexcept;

  IoSource* source_;
  StepFn step_;
  IoWaiter waiter_;
  bool closed_ = false;
  bool yielding_ = false;
  // Owner-only: the waiter was linked by this operation and may still be
  // (the driver unlinks it under the registration's lock when it wakes it,
  // so only a look under that lock says whether it still is).
  bool registered_ = false;
};

}  // namespace volt::detail
