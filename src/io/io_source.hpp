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
// Lifetime: allocated by IoHandle::open, owned by the handle until reset(),
// which deregisters (epoll_ctl DEL, then the shutdown bit, then wakes every
// waiter), closes the descriptor and retires the source to the driver. The
// driver frees retired sources at its next turn, before epoll_wait: a turn in
// progress on another thread may still be dispatching an event for it, and
// no later epoll_wait can return it once the DEL has completed.
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
  static constexpr std::uint64_t ready_mask(Interest interest) noexcept {
    return interest == Interest::kRead ? (kReadable | kReadClosed | kError)
                                       : (kWritable | kWriteClosed | kError);
  }
  // What an EAGAIN clears (see above).
  static constexpr std::uint64_t clear_mask(Interest interest) noexcept {
    return ready_mask(interest);
  }

  IoSource(Driver& driver, Scheduler& scheduler, int fd) noexcept
      : driver_(driver), scheduler_(scheduler), fd_(fd) {}

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
    clear_bits(seen, interest == Interest::kRead ? kReadable : kWritable);
  }
  // Wakes the waiters that `bits` satisfies (all of them once shut down).
  void wake(std::uint64_t bits) noexcept;

  // Under lock_: links `waiter` unless the readiness it needs is already
  // there or the source is shut down. Returns whether it is (now) linked.
  bool register_waiter(IoWaiter& waiter, TaskHeader* task) noexcept;
  void withdraw(IoWaiter& waiter) noexcept;

  // IoHandle::reset: epoll DEL, shutdown bit, wake all, close, retire.
  void deregister_and_close() noexcept;

  int fd() const noexcept { return fd_; }
  Driver& driver() noexcept { return driver_; }
  Scheduler& scheduler() noexcept { return scheduler_; }

  IoSource* retired_next = nullptr;  // the driver's retired list (its lock)

 private:
  void clear_bits(std::uint64_t seen, std::uint64_t bits) noexcept;

  // Starts "ready both ways" at tick 0 (see io_operation.hpp).
  std::atomic<std::uint64_t> readiness_{kReadable | kWritable};
  SpinLock lock_;
  IntrusiveList<IoWaiter> waiters_;  // guarded by lock_
  Driver& driver_;
  Scheduler& scheduler_;
  const int fd_;
};

}  // namespace volt::detail
