// volt::signal: the process-wide handler, the self-pipe, the dispatcher
// thread, and the waiting half of Signal::Recv / recv_blocking.
//
// State (all of it static, trivially destructible, never freed: the handler
// and the detached dispatcher may run while the process exits):
//   g_slots[s].deliveries  how many times the handler ran for s. Incremented
//                          only by the handler (lock-free, async-signal-safe).
//   g_slots[s].installed   s's handler is installed; set once, under
//                          g_install_mutex, after the ring sentinel is made.
//   g_slots[s].lock/waiters
//                          the ring of waiting recvs of s (SignalWaiter,
//                          living in the Recv or on a blocked thread's stack).
//   g_slots[s].dispatched  the count the dispatcher last woke waiters for;
//                          dispatcher thread only.
//   g_write_fd             the pipe's non-blocking write end, for the handler.
//
// A Signal holds (signum, seen). It is ready when deliveries != seen;
// completing a recv sets seen = deliveries (the coalescing).
//
// Invariants:
//   P1  The handler increments the counter and then writes a byte. The
//       dispatcher blocks in read() and, after every read that returns,
//       loads every installed counter. A byte written after an increment is
//       read before the next scan, so every increment is followed by a scan
//       that sees it (the pipe is the synchronisation: write() and read() on
//       it are ordered by the kernel's pipe lock, and a syscall is a full
//       barrier). If the pipe is full the write fails and is dropped: the
//       unread bytes already guarantee a scan after this increment.
//   P2  No lost wake-up: a waiter links itself (register_waiter) only after
//       finding deliveries == seen under its signal's lock; the dispatcher
//       loads deliveries (v) before taking that lock to wake the waiters with
//       seen < v. If the waiter's critical section comes first, the
//       dispatcher finds it linked and wakes it (if v > seen), or v == seen
//       and P1 promises a later scan for the delivery it waits for. If the
//       dispatcher's comes first, its load of v happens before the waiter's
//       load (lock release -> acquire), so the waiter sees at least v: if
//       v > seen it does not wait; if v == seen, P1 again.
//   P3  The dispatcher unlinks a waiter and moves its waker out before the
//       release store of `woken`, all under the lock, and does not touch it
//       after: the owner may see the store lock-free and free the waiter.
//       A waiter destroyed (cancelled) unlinks itself under the lock from
//       whichever ring it is in (its signal's, or the dispatcher's local one)
//       and is then unknown to the dispatcher; a wake-up it had already been
//       given is at worst a spurious wake of its task (harmless).
//   P4  The dispatcher wakes only waiters with seen < v, so a woken waiter is
//       always ready (counters never go back; 2^64 deliveries do not occur).
//       A task's readiness check still re-checks and re-registers.
//   P5  The first Signal of a number samples the counter before installing
//       the handler: every delivery the new handler counts is after that
//       sample, so a signal arriving between sigaction() and the first recv
//       is reported by that recv.
#include "volt/signal/signal.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstddef>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include "detail/waiter_ring.hpp"
#include "volt/detail/blocking_wait.hpp"
#include "volt/detail/spin_lock.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/detail/wake_list.hpp"
#include "volt/error.hpp"
#include "volt/task/join_handle.hpp"

namespace volt::signal {

using detail::SignalLink;
using detail::SignalWaiter;
using volt::detail::ring_empty;
using volt::detail::ring_push_back;
using volt::detail::ring_unlink;

namespace {

// The handler's state must be lock-free atomics: it runs between any two
// instructions of any thread, including one holding any lock.
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic<int>::is_always_lock_free);

struct Slot {
  std::atomic<std::uint64_t> deliveries{0};
  std::atomic<bool> installed{false};
  volt::detail::SpinLock lock;
  SignalLink waiters;            // ring sentinel, made self-linked at install
  std::uint64_t dispatched = 0;  // dispatcher thread only
};

constinit Slot g_slots[NSIG];
constinit std::atomic<int> g_write_fd{-1};

// Serialises installation (pipe, thread, sigaction); never taken by the
// handler or the dispatcher.
constinit std::mutex g_install_mutex;
int g_read_fd = -1;                 // guarded by g_install_mutex until handed to the thread
bool g_dispatcher_started = false;  // guarded by g_install_mutex

extern "C" void volt_signal_handler(int signum) {
  // write() may set errno; the interrupted code must not see it change.
  const int saved_errno = errno;
  // release: pairs with the acquire loads of the counter (the dispatcher's
  // scan, a recv's readiness check): what the interrupted thread wrote before
  // the signal (say, a flag set before raise()) is visible to whoever sees
  // this delivery. The lost-wake-up argument itself rests on the pipe (P1).
  g_slots[signum].deliveries.fetch_add(1, std::memory_order_release);
  // acquire: pairs with the release store in start_dispatcher(), made
  // before sigaction() installed this handler (the syscall already orders
  // them in practice; the pair says so in the language's terms).
  const int fd = g_write_fd.load(std::memory_order_acquire);
  if (fd >= 0) {
    const char byte = static_cast<char>(signum);
    // EAGAIN (pipe full) is fine: see P1. Nothing else can fail here.
    [[maybe_unused]] const ssize_t written = ::write(fd, &byte, 1);
  }
  errno = saved_errno;
}

bool catchable(int signum) noexcept {
  if (signum <= 0 || signum >= NSIG) return false;
  switch (signum) {
    case SIGKILL:
    case SIGSTOP:  // cannot be caught
    case SIGSEGV:
    case SIGBUS:
    case SIGFPE:
    case SIGILL:  // a returning handler re-runs the faulting instruction
      return false;
    default:
      return true;
  }
}

std::uint64_t deliveries(int signum) noexcept {
  // acquire: pairs with the handler's release increment.
  return g_slots[signum].deliveries.load(std::memory_order_acquire);
}

// Links `waiter` (waiting to see more than `seen` deliveries of `signum`)
// with `waker`, unless a delivery is already there. True if it must wait.
bool register_waiter(int signum, SignalWaiter* waiter, std::uint64_t seen,
                     volt::detail::Waker waker) noexcept {
  Slot& slot = g_slots[signum];
  std::lock_guard guard(slot.lock);
  if (deliveries(signum) != seen) return false;  // the re-check under the lock (P2)
  waiter->seen = seen;
  waiter->waker = std::move(waker);
  // relaxed: published to the dispatcher by the lock; the owner's own
  // earlier read is its own.
  waiter->woken.store(false, std::memory_order_relaxed);
  ring_push_back(slot.waiters, waiter);
  return true;
}

// Unlinks `waiter` if it is still in a ring (P3).
void cancel_waiter(int signum, SignalWaiter* waiter) noexcept {
  volt::detail::Waker unused;  // dropped after the lock, as every waker
  {
    std::lock_guard guard(g_slots[signum].lock);
    if (waiter->next != nullptr) ring_unlink(static_cast<SignalLink*>(waiter));
    unused = std::move(waiter->waker);  // empty if the dispatcher took it
  }
}

// Wakes every waiter of `slot` that waits to pass a count below `count`
// (P4). The matching waiters move onto a local ring in one critical section,
// then are woken in batches, unlocking to wake (never wake under the lock).
void wake_waiters(Slot& slot, std::uint64_t count) noexcept {
  SignalLink ready;
  ready.prev = ready.next = &ready;
  {
    std::lock_guard guard(slot.lock);
    for (SignalLink* link = slot.waiters.next; link != &slot.waiters;) {
      SignalLink* next = link->next;
      if (static_cast<SignalWaiter*>(link)->seen < count) {
        ring_unlink(link);
        ring_push_back(ready, link);
      }
      link = next;
    }
  }
  for (;;) {
    volt::detail::WakeList wakers;
    bool more = false;
    {
      std::lock_guard guard(slot.lock);
      while (!ring_empty(ready) && !wakers.full()) {
        auto* waiter = static_cast<SignalWaiter*>(ready.next);
        ring_unlink(static_cast<SignalLink*>(waiter));
        wakers.push(std::move(waiter->waker));
        // release: pairs with the owner's acquire load of `woken`; after
        // this store the waiter may be gone (P3).
        waiter->woken.store(true, std::memory_order_release);
      }
      more = !ring_empty(ready);
    }
    wakers.wake_all();
    if (!more) return;
  }
}

void dispatch(int read_fd) noexcept {
  ::pthread_setname_np(::pthread_self(), "volt-signal");
  char buffer[128];
  for (;;) {
    const ssize_t n = ::read(read_fd, buffer, sizeof buffer);
    if (n < 0 && errno != EINTR) return;  // cannot happen: the fd is ours, never closed
    if (n == 0) return;                   // nor this: the write end is never closed
    // Every return (even EINTR, harmlessly) scans every installed signal.
    for (int s = 1; s < NSIG; ++s) {
      Slot& slot = g_slots[s];
      // acquire: pairs with the release store in install(); the ring
      // sentinel is made.
      if (!slot.installed.load(std::memory_order_acquire)) continue;
      const std::uint64_t count = deliveries(s);
      if (count == slot.dispatched) continue;
      slot.dispatched = count;
      wake_waiters(slot, count);
    }
  }
}

// Makes the self-pipe and starts the dispatcher, once. Under g_install_mutex.
void start_dispatcher() {
  if (g_dispatcher_started) return;
  if (g_read_fd < 0) {
    int fds[2];
    // Only the write end is non-blocking (the handler must never block);
    // the dispatcher blocks in read(). Both close on exec.
    if (::pipe2(fds, O_CLOEXEC) != 0)
      throw std::system_error(errno, std::generic_category(), "volt::signal: pipe2");
    if (::fcntl(fds[1], F_SETFL, O_NONBLOCK) != 0) {
      const int err = errno;
      ::close(fds[0]);
      ::close(fds[1]);
      throw std::system_error(err, std::generic_category(), "volt::signal: fcntl");
    }
    g_read_fd = fds[0];
    // release: pairs with the handler's acquire load.
    g_write_fd.store(fds[1], std::memory_order_release);
  }
  // Detached: it never ends, and joining at exit would need a way to wake
  // it that the handler's pipe does not give. Its state is static and
  // trivially destructible, so exit() does not pull anything from under it.
  // A failure to start it throws std::system_error; the pipe is kept for
  // the next attempt.
  std::thread(dispatch, g_read_fd).detach();
  g_dispatcher_started = true;
}

void install(int signum) {
  Slot& slot = g_slots[signum];
  std::lock_guard guard(g_install_mutex);
  if (slot.installed.load(std::memory_order_relaxed)) return;  // under the mutex
  start_dispatcher();
  slot.waiters.prev = slot.waiters.next = &slot.waiters;
  struct sigaction action = {};
  action.sa_handler = &volt_signal_handler;
  // SA_RESTART: interrupted system calls of other code resume instead of
  // failing with EINTR. Not SA_RESETHAND: every delivery is counted.
  action.sa_flags = SA_RESTART;
  ::sigemptyset(&action.sa_mask);
  if (::sigaction(signum, &action, nullptr) != 0) {
    const int err = errno;
    if (err == EINVAL)
      throw Error(errc::invalid_argument,
                  "volt::signal::signal: signal " + std::to_string(signum) + " cannot be handled");
    throw std::system_error(err, std::generic_category(), "volt::signal: sigaction");
  }
  // release: pairs with the dispatcher's acquire load (the sentinel).
  slot.installed.store(true, std::memory_order_release);
}

void check_handle(int signum) {
  if (signum == 0) throw Error(errc::invalid_handle, "volt::signal::Signal: empty handle");
}

}  // namespace

Signal signal(int signum) {
  if (!catchable(signum))
    throw Error(errc::invalid_argument,
                "volt::signal::signal: signal " + std::to_string(signum) + " cannot be handled");
  // P5: sample first, then install. Once installed, the order is immaterial.
  const std::uint64_t seen = deliveries(signum);
  // acquire: pairs with install()'s release store; a Signal made on another
  // thread after installation then skips the mutex.
  if (!g_slots[signum].installed.load(std::memory_order_acquire)) install(signum);
  return Signal(signum, seen);
}

CtrlC ctrl_c() {
  return CtrlC(signal(SIGINT));
}

bool Signal::try_recv() {
  check_handle(signum_);
  const std::uint64_t now = deliveries(signum_);
  if (now == seen_) return false;
  seen_ = now;
  return true;
}

void Signal::recv_blocking() {
  check_handle(signum_);
  volt::detail::check_blocking_allowed("volt::signal::Signal::recv_blocking");
  SignalWaiter waiter;
  if (register_waiter(signum_, &waiter, seen_, volt::detail::current_thread_waker())) {
    for (;;) {
      volt::detail::park_current_thread();
      // acquire: pairs with the dispatcher's release store (P3).
      if (waiter.woken.load(std::memory_order_acquire)) break;
      // A spurious return of the parker, or a wake-up left over from an
      // earlier wait of this thread: still linked unless ready.
      if (deliveries(signum_) != seen_) {
        cancel_waiter(signum_, &waiter);
        break;
      }
    }
  }
  seen_ = deliveries(signum_);
}

// ---- Signal::Recv ----

Signal::Recv::Recv(Recv&& other) noexcept : signal_(other.signal_) {
  if (other.queued_) std::terminate();  // a linked waiter cannot move
}

Signal::Recv::~Recv() {
  leave();
}

bool Signal::Recv::ready_now() const noexcept {
  return deliveries(signal_->signum_) != signal_->seen_;
}

bool Signal::Recv::await_ready() {
  check_handle(signal_->signum_);
  // Awaited again after an interrupted wait: no new budget unit, and the
  // registration is kept (await_suspend).
  if (queued_) return poll_queued();
  // The budget before marking anything seen: a task whose budget is spent
  // yields first and looks again from the check.
  if (!volt::detail::coop_try_consume()) {
    yielding_ = true;
    return false;
  }
  return ready_now();
}

bool Signal::Recv::await_suspend(std::coroutine_handle<> self) {
  if (yielding_) {
    yielding_ = false;
    volt::detail::yield_current(self, &ready_check, this);
    return true;
  }
  volt::detail::TaskHeader* task = volt::detail::suspend_current(self, &ready_check, this);
  // Still queued from an interrupted await: its waker names this task (only
  // that task may await it again).
  if (queued_) return true;
  return enqueue(volt::detail::make_task_waker(task));
}

void Signal::Recv::await_resume() noexcept {
  leave();
  // Every path here saw deliveries != seen; take all of them (coalescing).
  signal_->seen_ = deliveries(signal_->signum_);
}

bool Signal::Recv::enqueue(volt::detail::Waker waker) noexcept {
  if (!register_waiter(signal_->signum_, &waiter_, signal_->seen_, std::move(waker))) return false;
  queued_ = true;
  return true;
}

// Queued: true if we may resume (no longer linked then).
bool Signal::Recv::poll_queued() noexcept {
  // acquire: pairs with the dispatcher's release store; it is done with us.
  if (waiter_.woken.load(std::memory_order_acquire)) {
    queued_ = false;
    return ready_now();  // always true by P4; checked all the same
  }
  if (!ready_now()) return false;
  leave();  // a delivery the dispatcher has not reached yet: go now
  return true;
}

void Signal::Recv::leave() noexcept {
  if (!queued_) return;
  queued_ = false;
  cancel_waiter(signal_->signum_, &waiter_);
}

// The task's readiness check (runs when the task is polled).
bool Signal::Recv::ready_check(void* context) noexcept {
  Recv& self = *static_cast<Recv*>(context);
  if (self.queued_) {
    if (self.poll_queued()) return true;
    if (self.queued_) return false;  // still linked: wait for the dispatcher
  } else if (self.ready_now()) {
    return true;  // first look after a budget yield
  }
  return !self.enqueue(volt::detail::make_task_waker(volt::detail::tls_context.current_task));
}

}  // namespace volt::signal
