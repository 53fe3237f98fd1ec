// IoSource: one descriptor's registration with the driver (Tokio's
// ScheduledIo): its readiness as the driver last saw it, and the operations
// waiting for it.
//
// The readiness word (one atomic std::uint64_t):
//
//   bits 0..7   readiness: kReadable, kWritable, kReadClosed, kWriteClosed,
//               kError
//   bits 8..39  tick: the driver's turn that last set readiness
//   bit  63     shutdown: deregistered; every operation fails with
//               errc::closed and no waiter is accepted any more
//
// Why the tick. An operation reads the word (tick t), tries its system call,
// gets EAGAIN and clears its direction's readiness. If the driver set that
// readiness again in between (a new edge: more data arrived after the call
// looked), clearing it would lose the edge for good: epoll's edge-triggered
// mode reports each edge once. So clear_readiness() clears only if the tick
// is still t; otherwise the operation simply tries again.
//
// What EAGAIN clears: everything that let this direction proceed, the
// closed and error bits included. Those normally never need clearing (once
// the peer hung up, reads return 0 or the error, never EAGAIN), but a socket
// registered before it was connected or listening reports EPOLLHUP, and a
// stale hang-up that was never cleared would make every later operation
// retry its system call forever. The system call's EAGAIN is the authority.
// (The sockets also register only once connected or listening, so the
// stale hang-up is not reported in the first place.)
//
// Waiters: an intrusive FIFO under `lock_`. The driver sets readiness first,
// then takes the lock to collect the waiters it satisfies; a registrant takes
// the lock, then re-checks readiness before linking itself. Whichever takes
// the lock second sees the other's write (the lock orders them), so a
// readiness change and a registration can never miss each other.
//
// Lifetime and the descriptor: who may touch what, when (the close race).
//
// A socket can be closed by one task while another waits in, or is about to
// start, an operation on it (through a split half, or a shared reference).
// Two things must then hold: the operation never reads freed memory, and it
// never makes a system call on the descriptor NUMBER once it may have been
// closed: the kernel hands the lowest free number to the next socket(2) or
// accept(2), so a stale read would return another connection's bytes.
//
// So the descriptor is closed only when no operation is inside its use of
// it, and the memory is freed only when nobody can reach it (as Go's
// poll.FD does with its reference-counted fdMutex). One atomic word, `life_`:
//
//   bits 0..31  uses: operations (and try_ calls) that hold a use; each
//               takes one before it reads the readiness or makes a system
//               call, and gives it back when it is destroyed (IoOperation)
//               or returns (IoUse)
//   kHandleRef  the IoHandle still points here (cleared by drop_handle)
//   kClosing    close() was called: a use begun from now on reports
//               errc::closed and never touches the descriptor
//   kDeregistered  the closer finished: epoll DEL, kShutdown, every waiter
//               woken; the descriptor may be closed once uses are 0
//   kFdClosed   the descriptor was closed (by the transition that set it)
//
// Every change is one RMW on `life_` (transition()), and the two actions
// follow from the change alone, so each happens exactly once:
//   - close the descriptor: the transition that sets kFdClosed, which is the
//     first to see uses == 0 with kDeregistered. A use begun before kClosing
//     keeps the number open until it ends; one begun after it never uses it.
//   - free: the transition into "dead" (uses == 0, no kHandleRef,
//     kFdClosed). After kHandleRef is gone no use can begin (uses are taken
//     through the handle), so "dead" is final. The source is retired to the
//     driver, which frees it at its next turn, before epoll_wait: a turn in
//     progress on another thread may still be dispatching an event for it,
//     and no later epoll_wait can return it once the DEL has completed.
// The closer is elected by setting kClosing; a second close() returns at
// once. The epoll DEL happens before kDeregistered, so before the number can
// be closed and reused (a DEL after that could remove another socket's
// registration). The protocol is checked with SPIN in
// tests/model/io_readiness.pml (processes closer, reader, user).
#pragma once

#include <atomic>
#include <cstdint>

#include "volt/detail/intrusive_list.hpp"
#include "volt/detail/io_operation.hpp"
#include "volt/detail/spin_lock.hpp"

namespace volt::detail {

class Driver;
class Scheduler;

class IoSource {
 public:
  static constexpr std::uint64_t kReadable = 1;
  static constexpr std::uint64_t kWritable = 2;
  static constexpr std::uint64_t kReadClosed = 4;
  static constexpr std::uint64_t kWriteClosed = 8;
  static constexpr std::uint64_t kError = 16;
  static constexpr std::uint64_t kReadinessMask = 0xff;
  static constexpr int kTickShift = 8;
  static constexpr std::uint64_t kTickMask = 0xffff'ffffULL << kTickShift;
  static constexpr std::uint64_t kShutdown = 1ULL << 63;

  // Readiness bits that let an operation of this direction proceed (a closed
  // direction or an error makes the system call return at once).
  // Interest is a bit set: kBoth is satisfied by either direction's bits.
  // (A table: one load on the operations' hot path, as the old ternary.)
  static constexpr std::uint64_t ready_mask(Interest interest) noexcept {
    constexpr std::uint64_t kRead = kReadable | kReadClosed | kError;
    constexpr std::uint64_t kWrite = kWritable | kWriteClosed | kError;
    constexpr std::uint64_t kMasks[4] = {0, kRead, kWrite, kRead | kWrite};
    return kMasks[static_cast<std::uint8_t>(interest) & 3];
  }
  // What an EAGAIN clears (see above).
  static constexpr std::uint64_t clear_mask(Interest interest) noexcept {
    return ready_mask(interest);
  }

  // `life_` (see above).
  static constexpr std::uint64_t kUseMask = 0xffff'ffffULL;
  static constexpr std::uint64_t kHandleRef = 1ULL << 32;
  static constexpr std::uint64_t kClosing = 1ULL << 33;
  static constexpr std::uint64_t kDeregistered = 1ULL << 34;
  static constexpr std::uint64_t kFdClosed = 1ULL << 35;

  IoSource(Driver& driver, Scheduler& scheduler, int fd) noexcept
      : driver_(driver), scheduler_(scheduler), fd_(fd) {}

  // Takes a use. True if the descriptor may be used until end_use(); false
  // if the source is closing (the caller reports errc::closed, touches
  // nothing, and still calls end_use()).
  bool begin_use() noexcept {
    // acquire: pairs with the release half of the closer's kClosing RMW (the
    // closer's earlier writes are not needed, but a use that sees kClosing
    // must see it as part of one total order with the closer's transitions:
    // RMWs on one word are, whatever the order argument). The decision needs
    // only that order: this add precedes the closer's kDeregistered
    // transition (which then sees uses > 0 and leaves the descriptor open)
    // or follows its kClosing (and returns false).
    const std::uint64_t before = life_.fetch_add(1, std::memory_order_acquire);
    return (before & kClosing) == 0;
  }
  // Gives a use back; the last one after a close closes the descriptor and,
  // with the handle gone, frees the source.
  void end_use() noexcept;
  // Whether close() was called (for native_handle and operator bool).
  bool closing() const noexcept {
    // acquire: pairs with the closer's acq_rel RMW; a caller that sees the
    // bit sees the socket as closed (nothing else is read through it).
    return (life_.load(std::memory_order_acquire) & kClosing) != 0;
  }

  // Any thread, idempotent: epoll DEL, shutdown bit, wake every waiter; the
  // descriptor is closed now, or by the last use still in flight.
  void close() noexcept;
  // The handle lets go (after close()): frees the source now if no use is
  // in flight, else the last use does.
  void drop_handle() noexcept;

  // acquire: pairs with the acq_rel RMWs below; an operation that sees a
  // readiness bit sees what the driver did before setting it (nothing it
  // needs, but the kShutdown bit must be seen with the waiter list's state
  // the deregistering thread left: that is ordered by the lock anyway).
  std::uint64_t readiness() const noexcept { return readiness_.load(std::memory_order_acquire); }

  // Before the descriptor is added to the epoll set (see the definition).
  void publish() noexcept;
  // Driver only: ORs `bits` in and stamps `tick`. Returns false if shut down.
  bool set_readiness(std::uint64_t bits, std::uint32_t tick) noexcept;
  // Clears `interest`'s readiness (clear_mask) if the tick is still the one
  // in `seen` (see above).
  void clear_readiness(std::uint64_t seen, Interest interest) noexcept {
    clear_bits(seen, clear_mask(interest));
  }
  // After a short read or write (Step::kDoneDrained): clears only the plain
  // readable/writable bit. A hang-up may have arrived with the last bytes;
  // its closed bit must stay so the next read sees the end of stream.
  void clear_drained(std::uint64_t seen, Interest interest) noexcept {
    clear_bits(seen, ready_mask(interest) & (kReadable | kWritable));
  }
  // Wakes the waiters that `bits` satisfies (all of them once shut down).
  void wake(std::uint64_t bits) noexcept;

  // Under lock_: links `waiter` unless the readiness it needs is already
  // there or the source is shut down. Returns whether it is (now) linked.
  // A waiter still linked from an earlier wait (an operation re-awaited
  // after its timeout fired) takes `task`'s waker if another task awaits it
  // now: the wake-up must reach whoever waits, not the first awaiter.
  bool register_waiter(IoWaiter& waiter, TaskHeader* task) noexcept;
  void withdraw(IoWaiter& waiter) noexcept;

  int fd() const noexcept { return fd_; }
  Driver& driver() noexcept { return driver_; }
  Scheduler& scheduler() noexcept { return scheduler_; }

  IoSource* retired_next = nullptr;  // the driver's retired list (its lock)

 private:
  void clear_bits(std::uint64_t seen, std::uint64_t bits) noexcept;
  // One RMW of life_ from `change(current)` (see "Lifetime" above), then
  // the actions it entails: closing the descriptor, retiring the source.
  template <class Change>
  void transition(Change change) noexcept;

  // Starts "ready both ways" at tick 0 (see io_operation.hpp).
  std::atomic<std::uint64_t> readiness_{kReadable | kWritable};
  SpinLock lock_;
  IntrusiveList<IoWaiter> waiters_;  // guarded by lock_
  // Starts with the handle's reference and no use.
  std::atomic<std::uint64_t> life_{kHandleRef};
  Driver& driver_;
  Scheduler& scheduler_;
  const int fd_;
};

}  // namespace volt::detail
