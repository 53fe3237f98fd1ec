// volt/signal/signal.hpp: Unix signals as awaitable streams (Tokio's
// tokio::signal::unix::signal and tokio::signal::ctrl_c).
//
//   volt::signal::Signal term = volt::signal::signal(SIGTERM);
//   for (;;) {
//     co_await term.recv();          // one or more SIGTERMs since the last recv
//     begin_graceful_shutdown();
//   }
//
//   co_await volt::signal::ctrl_c();  // the next SIGINT after the call
//
// Guarantees:
//  - signal(signum) returns a stream of the deliveries of `signum`. A
//    delivery counts for a Signal if its handler ran after the Signal was
//    created (or, for the first Signal of a signal number, after the call
//    began: nothing arriving while the handler is installed is lost).
//    co_await s.recv() completes when at least one such delivery happened
//    since the Signal was created or since its previous recv completed;
//    deliveries in between coalesce into that one completion (as Tokio's).
//    Standard signals that are pending together are also merged by the
//    kernel; real-time signals are not.
//  - Any number of Signal objects, for the same or different signals, in any
//    number of tasks, runtimes and plain threads: each sees every delivery
//    made after its creation. A Signal created after a delivery does not see
//    it.
//  - recv() is a leaf awaitable: waiting allocates nothing (the waiter lives
//    in the Recv, i.e. in the awaiting coroutine frame). It charges the
//    task's cooperative budget like the other primitives.
//  - Cancellation is destruction (timeout, select, abort): a recv that did
//    not complete marks nothing seen, so a delivery that arrived meanwhile is
//    reported by the next recv. A Recv interrupted by a timeout may be
//    awaited again by the same task (it stays registered in between).
//  - recv_blocking() waits on a plain thread (errc::blocking_in_runtime on a
//    runtime thread); try_recv() polls without waiting.
//  - ctrl_c() is an awaitable for the next SIGINT after the call: a Signal
//    made at the call, awaited once.
//
// Mechanism (src/signal/signal.cpp has the argument): the first Signal for a
// number installs, once per process and never removed (as Tokio), a
// sigaction handler (SA_RESTART) that bumps a per-signal delivery counter and
// writes a byte to a self-pipe. A "volt-signal" thread reads the pipe and
// wakes the waiters of every signal whose counter moved. Consequences the
// caller must know:
//  - Once installed, the handler stays: after every Signal is gone, a SIGINT
//    or SIGTERM no longer terminates the process, it is only counted. A
//    handler installed earlier by someone else (sigaction) is replaced and
//    not chained; one installed later replaces volt's (volt then sees
//    nothing).
//  - Nothing is installed for SIGPIPE unless signal(SIGPIPE) is asked for
//    (sockets never raise it: they send with MSG_NOSIGNAL).
//  - A child made by fork() inherits the handler but not the dispatcher
//    thread: Signals are for the process that made them (as Tokio's).
//
// Bad input: signal() throws volt::Error(errc::invalid_argument) for a number
// outside 1..NSIG-1, for signals that cannot be caught (SIGKILL, SIGSTOP), for
// the synchronous fault signals whose handler returning would re-run the
// faulting instruction forever (SIGSEGV, SIGBUS, SIGFPE, SIGILL), and for the
// numbers the C library reserves (sigaction refuses them, e.g. glibc's 32 and
// 33). If the self-pipe or the thread cannot be created it throws
// std::system_error with the OS error; nothing is installed and a later call
// tries again. recv()/recv_blocking()/try_recv() on an empty (moved-from or
// default-constructed) Signal throw volt::Error(errc::invalid_handle).
//
// Preconditions (undefined behaviour otherwise): the Signal outlives its
// Recv; one recv of a Signal at a time; a Recv is moved only before it is
// awaited (moving one that is registered terminates).
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <utility>

#include "volt/detail/waker.hpp"

namespace volt::signal {

namespace detail {

// A link of a signal's waiter ring (src/signal/signal.cpp), circular around a
// sentinel; next == nullptr means "in no ring". Guarded by the signal's lock.
struct SignalLink {
  SignalLink* prev = nullptr;
  SignalLink* next = nullptr;
};

// One waiting recv (task or plain thread).
struct SignalWaiter : SignalLink {
  volt::detail::Waker waker;  // guarded by the signal's lock while linked
  std::uint64_t seen = 0;     // the count it waits to pass; set before linking
  // Set once by the dispatcher, after it unlinked the waiter and took its
  // waker (release), read lock-free by the owner (acquire): the dispatcher
  // touches the waiter no more after the store.
  std::atomic<bool> woken{false};
};

}  // namespace detail

class Signal {
 public:
  class Recv;

  // An empty Signal (receives nothing; recv() throws errc::invalid_handle).
  Signal() noexcept = default;
  Signal(Signal&& other) noexcept : signum_(std::exchange(other.signum_, 0)), seen_(other.seen_) {}
  Signal& operator=(Signal&& other) noexcept {
    signum_ = std::exchange(other.signum_, 0);
    seen_ = other.seen_;
    return *this;
  }
  Signal(const Signal&) = delete;
  Signal& operator=(const Signal&) = delete;
  ~Signal() = default;  // nothing to release: the handler stays installed

  // The signal number; 0 for an empty Signal.
  int signum() const noexcept { return signum_; }

  // Waits for a delivery newer than the seen ones and marks all seen.
  // co_await gives void.
  Recv recv() noexcept;
  // The same on a plain thread (errc::blocking_in_runtime on a runtime one).
  void recv_blocking();
  // True (and every delivery marked seen) if one is pending; never waits.
  bool try_recv();

 private:
  friend Signal signal(int signum);
  Signal(int signum, std::uint64_t seen) noexcept : signum_(signum), seen_(seen) {}

  int signum_ = 0;
  std::uint64_t seen_ = 0;  // the delivery count last seen
};

// The recv() operation: co_await gives void. Implemented out of line (it
// reads the runtime's thread-local context, which must not be inlined into
// coroutine bodies).
class [[nodiscard]] Signal::Recv {
 public:
  // Only before it is awaited (e.g. moved into a timeout).
  Recv(Recv&& other) noexcept;
  Recv(const Recv&) = delete;
  Recv& operator=(const Recv&) = delete;
  Recv& operator=(Recv&&) = delete;
  // Cancellation: leave the waiter ring; nothing was marked seen.
  ~Recv();

  bool await_ready();
  bool await_suspend(std::coroutine_handle<> self);
  void await_resume() noexcept;

 private:
  friend class Signal;
  explicit Recv(Signal* signal) noexcept : signal_(signal) {}

  bool ready_now() const noexcept;
  bool enqueue(volt::detail::Waker waker) noexcept;
  bool poll_queued() noexcept;
  void leave() noexcept;
  static bool ready_check(void* context) noexcept;

  Signal* signal_;
  detail::SignalWaiter waiter_;
  bool queued_ = false;    // waiter_ was linked and we have not seen it unlinked
  bool yielding_ = false;  // budget spent: the first look is in ready_check
};

inline Signal::Recv Signal::recv() noexcept {
  return Recv(this);
}

// A stream of the deliveries of `signum` (see the header contract). Throws
// volt::Error(errc::invalid_argument) for a number that cannot be handled,
// std::system_error if the self-pipe or the dispatcher thread cannot be made.
Signal signal(int signum);

// The awaitable ctrl_c() returns: completes at the first SIGINT after it was
// made. Awaited once (a second await waits for the SIGINT after that).
class [[nodiscard]] CtrlC {
 public:
  explicit CtrlC(Signal sigint) noexcept : signal_(std::move(sigint)) {}
  Signal::Recv operator co_await() noexcept { return signal_.recv(); }
  // For a plain thread.
  void wait_blocking() { signal_.recv_blocking(); }

 private:
  Signal signal_;
};

// The next SIGINT after this call. Installing SIGINT's handler may throw as
// signal() does (std::system_error only: SIGINT is always valid).
CtrlC ctrl_c();

}  // namespace volt::signal
