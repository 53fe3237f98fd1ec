// volt/channel/mpmc.hpp: the bounded multi-producer multi-consumer channel.
//
//   auto [tx, rx] = volt::mpmc::channel<Job>(64);
//   // producers (any number; Sender is copyable):
//   volt::SendResult<Job> sent = co_await tx.send(std::move(job));  // waits for room
//   // consumers (any number; Receiver is copyable):
//   while (std::optional<Job> job = co_await rx.recv()) run(*job);  // nullopt: closed, drained
//
//   // two-phase send: hold a slot, then send through it without waiting
//   volt::Expected<volt::mpmc::Permit<Job>> permit = co_await tx.reserve();
//   if (permit) (void)permit->send(make_job());      // or drop it: the slot goes back
//   auto three = co_await tx.reserve_many(3);          // Expected<PermitIterator<Job>>
//   // a batch per wake-up; 0: closed and drained
//   std::vector<Job> batch;
//   while (co_await rx.recv_many(batch, 64) != 0) { run_all(batch); batch.clear(); }
//   // a bounded send that hands the value back on timeout
//   volt::SendResult<Job> r = co_await tx.send_timeout(std::move(job), 100ms);
//   if (!r && r.error() == volt::errc::timed_out) retry_later(r.take_back());
//   co_await tx.closed();                              // every receiver is gone
//   std::size_t free = tx.capacity(), bound = tx.max_capacity();
//
// Guarantees:
//  - Every value sent is received exactly once, by one receiver. Values from
//    one sender arrive in the order it sent them.
//  - try_send / try_recv never wait and never lock: one CAS on the tail or
//    head plus the slot's sequence store (a Vyukov ring with per-slot
//    sequence numbers), and a flag load to see whether anyone waits.
//  - Waiting allocates nothing: the waiter lives in the Send / Recv
//    operation. Waiters are served oldest first.
//  - Fairness of senders, bounded: waiting senders are woken oldest first,
//    but a send that finds room takes it even while others wait (barging,
//    as async-channel's and crossbeam's), and one wake-up serves a batch:
//    while a woken sender has not yet retried, freeing more slots wakes
//    nobody else, and once it runs its sends fill every free slot without
//    locking. A woken sender whose retry finds no room (a barging send took
//    the slot) goes back to the front; after three such retries in a row
//    the senders' side turns strict (no barging, as Tokio's semaphore):
//    every freed slot then belongs to the oldest waiter, try_send() and a
//    new send()'s first attempt find the channel full while anyone waits,
//    until nobody waits. So no sender (or reserve_many waiting for n
//    slots) is overtaken indefinitely. (Strict all the time cost a task
//    switch and three lock hand-offs per value once the ring stayed full
//    with senders on two cores: 15 times slower.) Receivers may barge (a
//    try_recv can take a value a woken recv() was woken for).
//  - recv() is cancel-safe: a Recv destroyed while it waits (abort, timeout,
//    select) takes no value; if it had already been woken, the wake-up passes
//    to the next receiver. send() likewise: a Send destroyed while it waits
//    has sent nothing (its value is destroyed with it; use try_send to keep
//    it), and passes a wake-up on.
//  - An operation kept as a timeout's lvalue operand keeps its place when the
//    timeout fires; the same task may await it again.
//  - Closing: close() on either handle, or the last Sender destroyed: sends
//    fail with errc::closed (the value handed back); receivers take what is
//    left and then get std::nullopt (try_recv: errc::closed). The last
//    Receiver destroyed closes it too: a send fails at once, a waiting
//    sender is woken with errc::closed and its value back, and the values
//    still buffered are destroyed then, by that Receiver's destructor
//    (Tokio's rule), not when the last Sender goes.
//  - The channel is freed with its last handle.
//  - Two-phase send (reserve / try_reserve / reserve_many, Permit,
//    PermitIterator; contracts below): a permit holds a slot without
//    claiming a ring position, so receivers never wait on a reserved slot;
//    reserve() waits in the senders' FIFO queue; permit.send never waits.
//    While no permit is held, try_send / try_recv are as above (the held
//    slots are counted under the senders' lock, and the gate bit, set while
//    any slot is reserved, routes pushes there only then; the argument is
//    in volt/detail/channel_waiters.hpp, "Reservations").
//  - recv_many(out, limit): recv() for the first value, then up to limit - 1
//    more ready values, one wake-up; send_timeout(v, d): send() bounded in
//    time, the value handed back on timeout (errc::timed_out); closed():
//    waits without allocating until the channel is closed; capacity(): free
//    slots now (values and reserved slots subtracted; a snapshot under
//    concurrency), max_capacity(): the bound it was made with.
//
// Bad input:
//  - capacity 0 or above kMaxCapacity: throws volt::Error(errc::invalid_argument)
//    (there is no rendezvous channel; Tokio refuses 0 as well).
//  - reserve_many / try_reserve_many(n) with n > max_capacity():
//    errc::invalid_argument (it could never be satisfied; Tokio's rule).
//    n == 0: an empty PermitIterator at once.
//  - A moved-from Sender or Receiver behaves as one of a closed channel:
//    sends fail with errc::closed, receives return nullopt / errc::closed.
//  - recv_blocking / send_blocking on a runtime thread:
//    volt::Error(errc::blocking_in_runtime).
//  - An operation (Send, Recv) borrows its channel through the handle: the
//    handle must outlive it (as a Tokio future borrows its receiver). Only
//    the task that first awaited an operation may await it again.
//  - T's move constructor must be noexcept (checked at compile time): a
//    slot is claimed before the value moves, and cannot be given back.
//
// Ring: the slot for position p (p counts laps and indices without a
// division: stamp = lap * one_lap + index) holds a stamp. stamp == p: free for
// the send at p; stamp == p + 1: holds the value for the receive at p;
// a receive frees it with stamp = p + one_lap (the send one lap later).
// The tail word also holds the closed mark (mark_bit_) and the senders' gate
// (send_gate_bit_), both above every index, so one_lap = 4 * mark_bit_.
// Waiting: volt/detail/channel_waiters.hpp (the Dekker flags, the fast slots,
// the gate and grants, the ordering argument); tests/model/channel.pml
// checks it.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "volt/channel/send_result.hpp"
#include "volt/detail/blocking_wait.hpp"
#include "volt/detail/channel_waiters.hpp"
#include "volt/detail/spin_lock.hpp"
#include "volt/detail/spin_wait.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/error.hpp"
#include "volt/expected.hpp"
#include "volt/task/join_handle.hpp"
#include "volt/time/timeout.hpp"

namespace volt::mpmc {

template <class T>
class Sender;
template <class T>
class Receiver;

inline constexpr std::size_t kMaxCapacity = std::size_t{1} << 30;

namespace detail {

// kNotNow: full or empty. kDoneClosing (try_push only): pushed, but the
// channel was closed while this send was in flight: every receiver must be
// woken, not one (see try_push).
enum class RingResult { kDone, kDoneClosing, kNotNow, kClosed };

template <class T>
class Channel {
  // A slot is claimed (CAS) before the value is moved in or out: a throwing
  // move would leave it claimed and never published or freed, and the ring
  // stuck for good.
  static_assert(std::is_nothrow_move_constructible_v<T>,
                "mpmc::channel<T>: T's move constructor must be noexcept");

 public:
  explicit Channel(std::size_t capacity)
      : capacity_(capacity),
        mark_bit_(std::bit_ceil(capacity + 1)),
        send_gate_bit_(mark_bit_ * 2),
        one_lap_(mark_bit_ * 4),
        slots_(std::make_unique<Slot[]>(slot_count())) {
    for (std::size_t i = 0; i < capacity; ++i)
      slot_at(i).stamp.store(i, std::memory_order_relaxed);
    send_waiters_.set_gate(&tail_, send_gate_bit_, mark_bit_);
  }
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;
  ~Channel() {
    // No handle is left, so no operation is in flight: every claimed slot was
    // published, and the values between head and tail are still there.
    std::uint64_t head = head_.load(std::memory_order_relaxed);
    const std::uint64_t tail = tail_.load(std::memory_order_relaxed) & ~flags();
    while (head != tail) {
      slot_at(head & (mark_bit_ - 1)).value()->~T();
      head = next(head);
    }
  }

  // Moves `value` into the ring if there is room (only then). Not kGranted
  // (try_send, a first attempt): no room while the send gate is set, i.e.
  // while slots are reserved, or while the senders' side is strict (no
  // barging: a freed slot belongs to the oldest waiter; see
  // channel_waiters.hpp). kGranted: a woken sender holding a grant, or a
  // registrant's re-check, under the senders' lock; claims past the gate,
  // keeping it.
  template <bool kGranted = false>
  RingResult try_push(T& value, bool* gated = nullptr) noexcept {
    std::uint64_t word = tail_.load(std::memory_order_relaxed);
    int in_flight_spins = 0;
    volt::detail::ContentionBackoff contention;
    for (;;) {
      if (word & mark_bit_) return RingResult::kClosed;
      if (!kGranted && (word & send_gate_bit_)) {
        if (gated != nullptr) *gated = true;  // try_send decides whether to look again
        return RingResult::kNotNow;
      }
      const std::uint64_t tail = word & ~send_gate_bit_;
      if constexpr (kGranted) {
        // Past the gate, under the senders' lock (every granted push is):
        // leave room for the slots permits hold (channel_waiters.hpp,
        // "Reservations"). Nothing reserved: the check is skipped.
        const std::uint64_t reserved = send_waiters_.reserved();
        if (reserved != 0 && !room_for(tail, reserved + 1)) return RingResult::kNotNow;
      }
      Slot& slot = slot_at(tail & (mark_bit_ - 1));
      // seq_cst: R2 of the Dekker pair when this is a waiting sender's
      // re-check; otherwise an acquire (the receive that freed the slot
      // finished reading before its stamp store) that costs nothing more.
      const std::uint64_t stamp = slot.stamp.load(std::memory_order_seq_cst);
      if (stamp == tail) {
        // relaxed: the claim orders nothing; the slot's stamp carries the
        // value to the receiver. The CAS compares the whole word: it fails
        // if the gate was set (or the channel closed) since the load, and a
        // granted claim keeps the gate as it was.
        if (tail_.compare_exchange_weak(word, next(tail) | (word & send_gate_bit_),
                                        std::memory_order_relaxed, std::memory_order_relaxed)) {
          ::new (slot.storage) T(std::move(value));
          // seq_cst: publishes the value (release) and is C1 of the Dekker
          // pair: the receivers' wake_one() flag load comes after it in S.
          slot.stamp.store(tail + 1, std::memory_order_seq_cst);
          // Closed between our claim and this publish? close()'s wake_all
          // may then have run while this slot was in flight, and receivers
          // it woke found the head slot unwritten and queued again: one
          // wake_one would leave all but one of them waiting on a closed,
          // empty channel. seq_cst: either this load sees the mark, or
          // close()'s fetch_or follows our stamp store in the total order
          // and its wake_all lets everyone queued before it see the value.
          if (tail_.load(std::memory_order_seq_cst) & mark_bit_) return RingResult::kDoneClosing;
          return RingResult::kDone;
        }
        contention.once();
        continue;  // the word was reloaded by the failed CAS
      }
      if (stamp + one_lap_ == tail + 1) {
        // The slot still holds the previous lap's value. Full, unless a
        // receive has claimed it (head moved) and is reading it now.
        const std::uint64_t head = head_.load(std::memory_order_relaxed);
        if (head + one_lap_ == tail || ++in_flight_spins > kInFlightSpins)
          return RingResult::kNotNow;
        volt::detail::SpinLock::pause();
      } else if (stamp < tail) {
        // The previous lap's send at this slot has not published yet: the
        // ring is full until it does and a receive takes it.
        if (++in_flight_spins > kInFlightSpins) return RingResult::kNotNow;
      } else {
        // Beyond tail: another sender took this position since our load of
        // tail, a race lost as much as a failed claim.
        contention.once();
      }
      word = tail_.load(std::memory_order_relaxed);
    }
  }

  // A permit's send: claims the position its reservation kept room for
  // (lock-free, past the gate). The room is there (see room_for's
  // invariant), but the previous lap's receive at the tail slot may still
  // be reading it: spin until it has finished (it is a few instructions
  // from done unless its thread was preempted; SpinWait yields then).
  RingResult push_reserved(T& value) noexcept {
    volt::detail::SpinWait backoff;
    volt::detail::ContentionBackoff contention;
    std::uint64_t word = tail_.load(std::memory_order_relaxed);
    for (;;) {
      if (word & mark_bit_) return RingResult::kClosed;
      const std::uint64_t tail = word & ~send_gate_bit_;
      Slot& slot = slot_at(tail & (mark_bit_ - 1));
      // seq_cst: the acquire of the receive that freed the slot, as in
      // try_push (which also explains the orders below).
      const std::uint64_t stamp = slot.stamp.load(std::memory_order_seq_cst);
      if (stamp == tail) {
        if (tail_.compare_exchange_weak(word, next(tail) | (word & send_gate_bit_),
                                        std::memory_order_relaxed, std::memory_order_relaxed)) {
          ::new (slot.storage) T(std::move(value));
          // seq_cst: publishes the value, C1 of the receivers' Dekker pair.
          slot.stamp.store(tail + 1, std::memory_order_seq_cst);
          // seq_cst: the closing check of try_push.
          if (tail_.load(std::memory_order_seq_cst) & mark_bit_) return RingResult::kDoneClosing;
          return RingResult::kDone;
        }
        contention.once();
        continue;
      }
      // stamp + one_lap_ == tail + 1: a receive is still reading the slot
      // (the reservation rules out a full ring). Otherwise the tail moved.
      if (stamp + one_lap_ == tail + 1) backoff.once();
      word = tail_.load(std::memory_order_relaxed);
    }
  }

  // Permit::send: the value goes into the slot reserved for it; the
  // reservation ends either way (closed: the value handed back).
  SendResult<T> send_reserved(T& value) {
    const RingResult pushed = push_reserved(value);
    if (pushed == RingResult::kClosed) {
      send_waiters_.release_reserved(1);
      return SendResult<T>(errc::closed, std::move(value));
    }
    // After the claim (the reservation counted until the slot is taken);
    // wakes the oldest waiting sender, which a check made meanwhile may
    // have sent back to the queue (channel_waiters.hpp, "Reservations").
    send_waiters_.release_reserved(1);
    wake_receivers(pushed);
    return SendResult<T>();
  }

  // try_send's second look when its push met the gate: a granted push under
  // the senders' lock, which counts the reserved slots, unless the side is
  // strict and a sender waits (no barging then). So a held permit costs
  // try_send the lock, not its room.
  RingResult try_push_past_permits(T& value) noexcept {
    struct Attempt {
      Channel* channel;
      T* value;
      RingResult result = RingResult::kNotNow;
      static bool run(void* self) {
        auto& a = *static_cast<Attempt*>(self);
        a.result = a.channel->template try_push<true>(*a.value);
        return a.result != RingResult::kNotNow;
      }
    } attempt{this, &value};
    send_waiters_.attempt_behind_gate(&Attempt::run, &attempt);
    return attempt.result;
  }

  // try_reserve's attempt, with the gate set meanwhile (atomic with every
  // claim; not past waiting senders while the side is strict), see
  // ChannelWaiters::attempt_behind_gate.
  RingResult try_reserve(std::uint64_t n) noexcept {
    struct Attempt {
      Channel* channel;
      std::uint64_t n;
      RingResult result = RingResult::kNotNow;
      static bool run(void* self) {
        auto& a = *static_cast<Attempt*>(self);
        a.result = a.channel->reserve_locked(a.n);
        return a.result != RingResult::kNotNow;
      }
    } attempt{this, n};
    send_waiters_.attempt_behind_gate(&Attempt::run, &attempt);
    return attempt.result;
  }

  // Under the senders' lock (a re-check or an attempt of ChannelWaiters):
  // reserves n slots if the ring has room for them beyond those already
  // reserved. kClosed once the channel is closed.
  RingResult reserve_locked(std::uint64_t n) noexcept {
    // seq_cst: after R1 / the gate's fetch_or (as the push's re-check).
    const std::uint64_t word = tail_.load(std::memory_order_seq_cst);
    if (word & mark_bit_) return RingResult::kClosed;
    if (!room_for(word & ~send_gate_bit_, send_waiters_.reserved() + n)) return RingResult::kNotNow;
    send_waiters_.add_reserved_locked(n);
    return RingResult::kDone;
  }

  // Under the senders' lock, with the gate set: whether k values fit from
  // position `tail` on, i.e. the position k - 1 past it was freed by the
  // previous lap's receive, or is claimed by a receive still reading it
  // (tail - head + k <= capacity, head counting claimed receives). The
  // seq_cst stamp load is R2 of the senders' Dekker pair when this is a
  // re-check: the receive that freed that slot stored the stamp (C1) before
  // looking for waiters. Only permits' sends claim positions concurrently,
  // all below tail + reserved, so the slot looked at is not one of theirs.
  bool room_for(std::uint64_t tail, std::uint64_t k) const noexcept {
    if (k == 0) return true;
    if (k > capacity_) return false;
    const std::uint64_t p = position(tail) + (k - 1);
    const std::uint64_t stamp_free = (p / capacity_) * one_lap_ + p % capacity_;
    const std::uint64_t stamp = slot_at(p % capacity_).stamp.load(std::memory_order_seq_cst);
    if (stamp == stamp_free) return true;
    if (stamp + one_lap_ != stamp_free + 1) return false;
    // The previous lap's value, unless a receive has claimed it. relaxed: a
    // stale head only says "no room", and that receive wakes a waiter once
    // it has freed the slot.
    return position(head_.load(std::memory_order_relaxed)) + capacity_ > p;
  }

  // The last receiver is gone (closed): destroys every value still in the
  // ring at once (Tokio's rule) rather than with the last handle. A send
  // claimed before the close mark may still be writing its slot: wait for
  // it (nothing can claim after the mark).
  void drain() noexcept {
    volt::detail::SpinWait backoff;
    std::optional<T> value;
    for (;;) {
      switch (try_pop(value)) {
        case RingResult::kDone:
        case RingResult::kDoneClosing:
          value.reset();
          break;
        case RingResult::kNotNow:
          backoff.once();
          break;
        case RingResult::kClosed:
          return;
      }
    }
  }

  // Moves the oldest value into `out` if there is one.
  RingResult try_pop(std::optional<T>& out) noexcept {
    std::uint64_t head = head_.load(std::memory_order_relaxed);
    int in_flight_spins = 0;
    volt::detail::ContentionBackoff contention;
    for (;;) {
      Slot& slot = slot_at(head & (mark_bit_ - 1));
      // seq_cst: R2 of the Dekker pair in a waiting receiver's re-check, and
      // the acquire that makes the sender's value visible.
      const std::uint64_t stamp = slot.stamp.load(std::memory_order_seq_cst);
      if (stamp == head + 1) {
        if (head_.compare_exchange_weak(head, next(head), std::memory_order_relaxed,
                                        std::memory_order_relaxed)) {
          T* value = slot.value();
          out.emplace(std::move(*value));
          value->~T();
          // seq_cst: frees the slot for the sender one lap on (release: we
          // finished reading) and is C1 of the senders' Dekker pair.
          slot.stamp.store(head + one_lap_, std::memory_order_seq_cst);
          return RingResult::kDone;
        }
        contention.once();
        continue;
      }
      if (stamp == head) {
        // Nothing published here yet: empty, unless a send has claimed the
        // slot (tail moved) and is writing it now.
        const std::uint64_t tail = tail_.load(std::memory_order_seq_cst);
        if ((tail & ~flags()) == head)
          return (tail & mark_bit_) ? RingResult::kClosed : RingResult::kNotNow;
        if (++in_flight_spins > kInFlightSpins) return RingResult::kNotNow;
        volt::detail::SpinLock::pause();
      } else if (stamp < head) {
        // The previous lap's receive at this slot is still reading it, so
        // no send can have claimed head: tail == head. If the channel is
        // closed, nothing more will come (and nobody would wake us).
        const std::uint64_t tail = tail_.load(std::memory_order_seq_cst);
        if ((tail & mark_bit_) && (tail & ~flags()) == head) return RingResult::kClosed;
        if (++in_flight_spins > kInFlightSpins) return RingResult::kNotNow;
        volt::detail::SpinLock::pause();
      } else {
        // Beyond head + 1: another receiver took this position since our
        // load of head (a lost race, as a failed claim).
        contention.once();
      }
      head = head_.load(std::memory_order_relaxed);
    }
  }

  // True if this call closed it. Wakes every waiter on both sides: receivers
  // drain and then see kClosed; senders fail.
  bool close() noexcept {
    // seq_cst: a registrant's re-check (under its side's lock, taken by
    // wake_all below) sees the mark, or is queued before wake_all runs.
    const std::uint64_t before = tail_.fetch_or(mark_bit_, std::memory_order_seq_cst);
    if (before & mark_bit_) return false;
    recv_waiters_.wake_all();
    send_waiters_.wake_all();
    closed_waiters_.wake_all();
    return true;
  }
  bool is_closed() const noexcept { return tail_.load(std::memory_order_acquire) & mark_bit_; }
  // seq_cst: R2 of Sender::Closed's re-check (close()'s fetch_or is C1; its
  // wake_all takes the lock, so no flag is read: either the re-check, made
  // under that lock, sees the mark, or wake_all finds the waiter queued).
  bool is_closed_seq_cst() const noexcept {
    return tail_.load(std::memory_order_seq_cst) & mark_bit_;
  }

  std::size_t capacity() const noexcept { return capacity_; }
  // Free slots: capacity minus values in the ring minus reserved slots (a
  // snapshot under concurrency, as len()).
  std::size_t free_slots() const noexcept {
    const std::uint64_t used = len() + send_waiters_.reserved();
    return used >= capacity_ ? 0 : static_cast<std::size_t>(capacity_ - used);
  }
  std::size_t len() const noexcept {
    // Two loads: exact when nothing runs concurrently, a snapshot otherwise.
    const std::uint64_t tail = tail_.load(std::memory_order_acquire) & ~flags();
    const std::uint64_t head = head_.load(std::memory_order_acquire);
    const std::uint64_t t = position(tail);
    const std::uint64_t h = position(head);
    // head loaded after tail may have passed it (values taken meanwhile).
    if (h >= t) return 0;
    return t - h > capacity_ ? capacity_ : static_cast<std::size_t>(t - h);
  }

  // Whether the receive at head / the send at tail could proceed now
  // (seq_cst loads, as the re-checks). For the wake-up chain: see pass_on_*.
  bool value_at_head() const noexcept {
    const std::uint64_t head = head_.load(std::memory_order_seq_cst);
    return slot_at(head & (mark_bit_ - 1)).stamp.load(std::memory_order_seq_cst) == head + 1;
  }
  bool room_at_tail() const noexcept {
    // (The send gate is ignored: for the pass-on, which grants.)
    const std::uint64_t word = tail_.load(std::memory_order_seq_cst);
    const std::uint64_t tail = word & ~send_gate_bit_;
    return !(word & mark_bit_) &&
           slot_at(tail & (mark_bit_ - 1)).stamp.load(std::memory_order_seq_cst) == tail;
  }
  // A woken receiver that took a value may have used up a wake-up meant for
  // a later value: a woken receiver's retry that found the head slot still
  // being written (a send in flight) re-queues, absorbing the wake-up of a
  // value behind that slot; the in-flight send's own wake-up then covers two
  // values. So whoever is woken and takes one passes a wake-up on if another
  // value is ready. (Without this the 4 x 4 stress strands values in a full
  // ring while every receiver and sender waits.) Senders: the mirror image.
  void pass_on_after_woken_recv() noexcept {
    if (value_at_head()) recv_waiters_.wake_one();
  }
  void pass_on_after_woken_send() noexcept {
    if (room_at_tail()) send_waiters_.wake_one();
  }

  // After a push (kDone / kDoneClosing).
  void wake_receivers(RingResult pushed) noexcept {
    if (pushed == RingResult::kDoneClosing) {
      recv_waiters_.wake_all();
    } else {
      recv_waiters_.wake_one();
    }
  }

  volt::detail::ChannelWaiters& recv_waiters() noexcept { return recv_waiters_; }
  volt::detail::ChannelWaiters& send_waiters() noexcept { return send_waiters_; }
  volt::detail::ChannelWaiters& closed_waiters() noexcept { return closed_waiters_; }

  // Handles. refs_ counts both kinds; the channel is freed with the last.
  void add_sender() noexcept {
    senders_.fetch_add(1, std::memory_order_relaxed);  // a live handle exists: no race to zero
    refs_.fetch_add(1, std::memory_order_relaxed);
  }
  void add_receiver() noexcept {
    receivers_.fetch_add(1, std::memory_order_relaxed);
    refs_.fetch_add(1, std::memory_order_relaxed);
  }
  void drop_sender() noexcept {
    // acq_rel: the last sender's close follows every other sender's sends.
    if (senders_.fetch_sub(1, std::memory_order_acq_rel) == 1) close();
    drop_ref();
  }
  void drop_receiver() noexcept {
    if (receivers_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      close();
      drain();  // the values go now, not with the last sender (Tokio's rule)
    }
    drop_ref();
  }

 private:
  // A send or receive that finds its slot claimed by an operation of the
  // other side still writing or reading it spins this many times (that
  // operation is a few instructions from done if its thread runs) before
  // reporting full / empty; a waiting operation is woken when it finishes.
  static constexpr int kInFlightSpins = 32;

  struct Slot {
    std::atomic<std::uint64_t> stamp;
    alignas(T) unsigned char storage[sizeof(T)];
    T* value() noexcept { return std::launder(reinterpret_cast<T*>(storage)); }
  };

  // Consecutive indices live on different cache lines. The ring is cut into
  // blocks of L = 2^line_bits_ lines (up to kMaxBlockLines); within a
  // block, index i is slot (i % L) * kSlotsPerLine + i / L, so the slots
  // that share a line are L positions apart. Dense,
  // a sender and a receiver a few positions apart on two CPUs wrote one
  // line in turn, moving it between them at every value: channel_mpmc with
  // its eight tasks spread over two workers took 118-145 ns a value, 76-83
  // with this layout (the same as a slot per line, without the memory).
  // The block is a power of two: the index arithmetic is masks and shifts,
  // 1-2 ns on a send or receive; a block (16 KiB at most for 16-byte
  // slots) stays in the L1 cache while it is filled or drained. The ring's memory: capacity
  // rounded up to whole blocks (the blocks are no bigger than capacity
  // rounded up to a power of two); slots of a line or more stay dense.
  static constexpr std::size_t kSlotsPerLine =
      std::bit_ceil((std::size_t{64} + sizeof(Slot) - 1) / sizeof(Slot));
  static constexpr std::size_t kMaxBlockLines = 256;
  static unsigned block_line_bits(std::size_t capacity) noexcept {
    if constexpr (kSlotsPerLine == 1) return 0;
    const std::size_t lines = (capacity + kSlotsPerLine - 1) / kSlotsPerLine;
    return static_cast<unsigned>(std::countr_zero(std::min(std::bit_ceil(lines), kMaxBlockLines)));
  }
  std::size_t slot_count() const noexcept {
    const std::size_t block = block_mask_ + 1;
    return (capacity_ + block - 1) / block * block;
  }
  Slot& slot_at(std::uint64_t index) const noexcept {
    if constexpr (kSlotsPerLine == 1) {
      return slots_[index];
    } else {
      // The block's base | the line, from the low bits | the slot in the
      // line, from the bits above them. line_bits_ == 0 keeps index as is.
      return slots_[(index & ~block_mask_) | ((index & line_mask_) * kSlotsPerLine) |
                    ((index >> line_bits_) & (kSlotsPerLine - 1))];
    }
  }

  std::uint64_t flags() const noexcept { return mark_bit_ | send_gate_bit_; }
  std::uint64_t next(std::uint64_t position) const noexcept {
    // Within a lap the index grows by one; past the last index, the lap does.
    return (position & (mark_bit_ - 1)) + 1 < capacity_ ? position + 1
                                                        : (position & ~(one_lap_ - 1)) + one_lap_;
  }
  std::uint64_t position(std::uint64_t stamp) const noexcept {
    return (stamp / one_lap_) * capacity_ + (stamp & (mark_bit_ - 1));
  }
  void drop_ref() noexcept {
    // acq_rel: the last owner sees every other handle's writes before freeing.
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // Receivers CAS head_, senders tail_: each on its own cache line.
  alignas(64) std::atomic<std::uint64_t> head_{0};
  // | mark_bit_ once closed, | send_gate_bit_ while slots are reserved or
  // the senders' side is strict (ChannelWaiters)
  alignas(64) std::atomic<std::uint64_t> tail_{0};
  alignas(64) const std::size_t capacity_;
  const std::uint64_t mark_bit_;       // above every index; closed flag in tail_
  const std::uint64_t send_gate_bit_;  // the senders' gate in tail_ (ChannelWaiters)
  const std::uint64_t one_lap_;        // the stamp distance between laps
  // slot_at's block: 2^line_bits_ lines, line_mask_ = 2^line_bits_ - 1,
  // block_mask_ = the block's slots - 1.
  const unsigned line_bits_ = block_line_bits(capacity_);
  const std::uint64_t line_mask_ = (std::uint64_t{1} << line_bits_) - 1;
  const std::uint64_t block_mask_ = (std::uint64_t{kSlotsPerLine} << line_bits_) - 1;
  std::unique_ptr<Slot[]> slots_;
  std::atomic<std::uint32_t> senders_{1};
  std::atomic<std::uint32_t> receivers_{1};
  std::atomic<std::uint32_t> refs_{2};
  alignas(64) volt::detail::ChannelWaiters recv_waiters_;
  alignas(64) volt::detail::ChannelWaiters send_waiters_;
  // Sender::closed() waiters (not gated): woken by close().
  volt::detail::ChannelWaiters closed_waiters_;
};

}  // namespace detail

// One slot of a bounded channel, held for one value (Sender::reserve /
// try_reserve; Tokio's Permit).
//
//   volt::Expected<volt::mpmc::Permit<Job>> permit = co_await tx.reserve();  // waits for room
//   if (!permit) return;                      // errc::closed: nobody will receive
//   Job job = build_job();                    // the slot is ours meanwhile
//   volt::SendResult<Job> sent = permit->send(std::move(job));  // never waits, never full
//
// Guarantees:
//  - send(value) never waits for room and never fails for lack of it: the
//    slot was counted out of the ring's capacity when the permit was made.
//    It is lock-free but for a short critical section on the senders' spin
//    lock (the reservation count), and it may spin while the receive that
//    last used the slot finishes reading it. The value is delivered like a
//    try_send's (in the order of the sends, not of the reservations).
//  - Destroying an unused permit gives the slot back at once and wakes the
//    oldest waiting sender (send or reserve), which holds it from then.
//  - A held permit does not block receivers: the ring position is claimed
//    only by send (channel_waiters.hpp, "Reservations").
//  - Closing: send on a permit of a closed channel (close(), the last
//    Sender or the last Receiver gone) hands the value back with
//    errc::closed. (Tokio lets a permit still send after Receiver::close;
//    volt closes permits too, so a receiver that saw the end never misses a
//    value sent later.)
//  - A permit borrows its channel through the Sender it came from (as
//    Tokio's Permit<'_, T>): the Sender must outlive it.
//
// Bad input: send on a used or moved-from permit: errc::closed, the value
// handed back.
template <class T>
class [[nodiscard]] Permit {
 public:
  Permit() noexcept = default;
  Permit(Permit&& other) noexcept : channel_(std::exchange(other.channel_, nullptr)) {}
  Permit& operator=(Permit&& other) noexcept {
    if (this != &other) {
      release();
      channel_ = std::exchange(other.channel_, nullptr);
    }
    return *this;
  }
  Permit(const Permit&) = delete;
  Permit& operator=(const Permit&) = delete;
  ~Permit() { release(); }

  // Sends through the slot (consumes the permit).
  SendResult<T> send(T value) {
    detail::Channel<T>* channel = std::exchange(channel_, nullptr);
    if (channel == nullptr) return SendResult<T>(errc::closed, std::move(value));
    return channel->send_reserved(value);
  }
  // Whether it still holds a slot.
  explicit operator bool() const noexcept { return channel_ != nullptr; }

 private:
  template <class U>
  friend class Sender;
  template <class U>
  friend class PermitIterator;
  explicit Permit(detail::Channel<T>* channel) noexcept : channel_(channel) {}
  void release() noexcept {
    if (channel_ != nullptr) std::exchange(channel_, nullptr)->send_waiters().release_reserved(1);
  }
  detail::Channel<T>* channel_ = nullptr;
};

// n slots held at once (Sender::reserve_many / try_reserve_many; Tokio's
// PermitIterator). Each send(value) uses one (as Permit::send); next()
// hands one out as a Permit. The slots still held when it is destroyed are
// given back at once, waking as many waiting senders.
//
//   auto permits = co_await tx.reserve_many(3);          // Expected<PermitIterator<Job>>
//   if (permits) for (Job& j : batch) (void)permits->send(std::move(j));
//
// Bad input: send with no slot left (or moved-from): errc::full, the value
// handed back; next() with none left: an empty Permit. Borrows the Sender,
// as Permit. Closing: as Permit (errc::closed, value back, slot consumed).
template <class T>
class [[nodiscard]] PermitIterator {
 public:
  PermitIterator() noexcept = default;
  PermitIterator(PermitIterator&& other) noexcept
      : channel_(other.channel_), remaining_(std::exchange(other.remaining_, 0)) {}
  PermitIterator& operator=(PermitIterator&& other) noexcept {
    if (this != &other) {
      release();
      channel_ = other.channel_;
      remaining_ = std::exchange(other.remaining_, 0);
    }
    return *this;
  }
  PermitIterator(const PermitIterator&) = delete;
  PermitIterator& operator=(const PermitIterator&) = delete;
  ~PermitIterator() { release(); }

  // The slots still held.
  std::size_t len() const noexcept { return remaining_; }
  bool empty() const noexcept { return remaining_ == 0; }
  // Sends through one of the slots.
  SendResult<T> send(T value) {
    if (remaining_ == 0) return SendResult<T>(errc::full, std::move(value));
    --remaining_;
    return channel_->send_reserved(value);
  }
  // One slot as a Permit of its own (empty if none is left).
  Permit<T> next() noexcept {
    if (remaining_ == 0) return Permit<T>();
    --remaining_;
    return Permit<T>(channel_);
  }

 private:
  template <class U>
  friend class Sender;
  PermitIterator(detail::Channel<T>* channel, std::size_t n) noexcept
      : channel_(channel), remaining_(n) {}
  void release() noexcept {
    if (remaining_ != 0) channel_->send_waiters().release_reserved(std::exchange(remaining_, 0));
  }
  detail::Channel<T>* channel_ = nullptr;
  std::size_t remaining_ = 0;
};

// The sending side; copies are more senders of the same channel.
template <class T>
class Sender {
 public:
  Sender() noexcept = default;
  Sender(const Sender& other) noexcept : channel_(other.channel_) {
    if (channel_) channel_->add_sender();
  }
  Sender(Sender&& other) noexcept : channel_(std::exchange(other.channel_, nullptr)) {}
  Sender& operator=(Sender other) noexcept {
    std::swap(channel_, other.channel_);
    return *this;
  }
  ~Sender() {
    if (channel_) channel_->drop_sender();
  }

  // Sends now if there is room: delivered, or errc::full / errc::closed with
  // the value handed back.
  SendResult<T> try_send(T value) {
    if (!channel_) return SendResult<T>(errc::closed, std::move(value));
    bool gated = false;
    detail::RingResult pushed = channel_->try_push(value, &gated);
    // The gate is set (slots reserved, or the side strict): look again under
    // the lock, which counts the reserved slots and, while strict, lets no
    // send past a waiting one. (Found in review: reporting full whenever the
    // gate was set made try_send fail within milliseconds beside a
    // try_reserve loop on an empty 1024-slot channel.)
    if (pushed == detail::RingResult::kNotNow && gated)
      pushed = channel_->try_push_past_permits(value);
    switch (pushed) {
      case detail::RingResult::kDone:
      case detail::RingResult::kDoneClosing:
        channel_->wake_receivers(pushed);
        return SendResult<T>();
      case detail::RingResult::kNotNow:
        return SendResult<T>(errc::full, std::move(value));
      case detail::RingResult::kClosed:
        break;
    }
    return SendResult<T>(errc::closed, std::move(value));
  }

  // co_await tx.send(v): waits for room; SendResult<T> (errc::closed with
  // the value back if the channel closed first).
  class [[nodiscard]] Send {
   public:
    Send(detail::Channel<T>* channel, T&& value) : channel_(channel), value_(std::move(value)) {}
    Send(const Send&) = delete;
    Send& operator=(const Send&) = delete;
    // Before it is awaited only (e.g. moved into a timeout or select).
    Send(Send&& other) noexcept(std::is_nothrow_move_constructible_v<T>)
        : channel_(other.channel_), value_(std::move(other.value_)) {}
    ~Send() {
      if (phase_ == kQueued) {
        channel_->send_waiters().cancel(&waiter_);
      } else if (holds_grant_) {
        // Woken with a grant, its push found no room yet, and it was not
        // queued again: the grant passes on.
        channel_->send_waiters().drop_grant(&waiter_);
      }
    }

    bool await_ready() {
      if (phase_ == kQueued) return retry_if_notified();
      if (!channel_) {
        phase_ = kClosed;
        return true;
      }
      // The budget before the slot: a task whose budget is spent yields
      // holding nothing (see Semaphore::Acquire).
      if (!volt::detail::coop_try_consume()) {
        phase_ = kYielding;
        return false;
      }
      return attempt();
    }
    bool await_suspend(std::coroutine_handle<> self) {
      if (phase_ == kYielding) {
        volt::detail::yield_current(self, &ready_check, this);
        return true;
      }
      volt::detail::TaskHeader* task = volt::detail::suspend_current(self, &ready_check, this);
      // Re-awaited while queued (an lvalue operand of a timeout or select
      // that lost): it may have been woken meanwhile, with no poll left to
      // run the check (a select that yielded between asking and starting
      // it), so look now.
      if (phase_ == kQueued) return !check(task);
      return enqueue(task);
    }
    SendResult<T> await_resume() {
      const Phase phase = std::exchange(phase_, kStart);
      if (phase == kSent) return SendResult<T>();
      return SendResult<T>(errc::closed, std::move(value_));
    }

   private:
    friend class Sender;
    // SendTimeout, after the timeout fired with this operation unfinished
    // (an lvalue operand keeps its place): withdraws the wait (a grant it
    // was woken with passes on) and reports how it ended: sent (it may have
    // completed in the same poll), closed, or `why` with the value back.
    SendResult<T> withdraw(errc why) {
      if (phase_ == kQueued) {
        channel_->send_waiters().cancel(&waiter_);
      } else if (holds_grant_) {
        channel_->send_waiters().drop_grant(&waiter_);
      }
      holds_grant_ = false;
      const Phase phase = std::exchange(phase_, kStart);
      if (phase == kSent) return SendResult<T>();
      return SendResult<T>(phase == kClosed ? errc::closed : why, std::move(value_));
    }

    enum Phase : std::uint8_t { kStart, kYielding, kQueued, kSent, kClosed };
    // wake_receiver false: called as the re-check, under the send side's
    // lock; the receivers' lock must not be taken there (a receiver's
    // re-check holds that one and would take ours: lock-order inversion).
    // enqueue() wakes after the lock is released instead.
    // granted: past the send gate (see Channel::try_push).
    // Always inline: await_ready's call of it is the whole send when there
    // is room, and GCC kept it out of line (a call, and the spills of the
    // coroutine's registers around it: channel_mpmc at 1 worker took 13.9
    // ns a value, 12.2 with this and Recv::attempt inline; the benchmark
    // binary grew by 80 bytes).
    [[gnu::always_inline]] bool attempt(bool wake_receiver = true, bool granted = false) {
      const detail::RingResult pushed =
          granted ? channel_->template try_push<true>(value_) : channel_->try_push(value_);
      switch (pushed) {
        case detail::RingResult::kDone:
        case detail::RingResult::kDoneClosing:
          phase_ = kSent;
          pushed_ = pushed;
          if (wake_receiver) channel_->wake_receivers(pushed);
          return true;
        case detail::RingResult::kClosed:
          phase_ = kClosed;
          return true;
        case detail::RingResult::kNotNow:
          break;
      }
      phase_ = kStart;
      return false;
    }
    // True when it must wait (queued). A sender that holds a grant (woken,
    // its push found the slot still being read) goes back to the front.
    bool enqueue(volt::detail::TaskHeader* task) {
      waiter_.waker = volt::detail::make_task_waker(task);
      const bool regrant = std::exchange(holds_grant_, false);
      if (channel_->send_waiters().enqueue(&waiter_, &recheck, this, regrant)) {
        phase_ = kQueued;
        return true;
      }
      waiter_.waker = volt::detail::Waker();
      if (phase_ == kSent) {
        channel_->wake_receivers(pushed_);
        // The re-check of a woken sender ended its grant: pass on, as
        // after a woken success (ChannelWaiters::enqueue).
        if (regrant) channel_->pass_on_after_woken_send();
      }
      return false;
    }
    // The re-check under the senders' lock (while strict, only the oldest
    // sender's, see ChannelWaiters::enqueue) claims past the gate.
    static bool recheck(void* self) { return static_cast<Send*>(self)->attempt(false, true); }
    bool retry_if_notified() {
      if (!waiter_.notified()) return false;
      waiter_.state.store(volt::detail::ChannelWaiter::kIdle, std::memory_order_relaxed);
      // Woken with a grant: a slot freed for it (no try_send can take it).
      // The granted push runs under the senders' lock (ordered against
      // reservations, see channel_waiters.hpp), which ends the grant if the
      // push completed; the receivers are woken after the lock.
      if (!channel_->send_waiters().retry_granted(&waiter_, &recheck, this)) {
        holds_grant_ = true;  // re-queued at the front by enqueue()
        return false;
      }
      if (phase_ == kSent) {
        channel_->wake_receivers(pushed_);
        channel_->pass_on_after_woken_send();
      }
      return true;
    }
    // The ResumeSlot check (called out of line by the task's poll; the task
    // is current). await_suspend calls check() with the task it has, so no
    // thread_local is read inside the coroutine body.
    static bool ready_check(void* context) noexcept {
      return static_cast<Send*>(context)->check(volt::detail::tls_context.current_task);
    }
    bool check(volt::detail::TaskHeader* task) noexcept {
      Send& self = *this;
      switch (self.phase_) {
        case kQueued:
          if (self.retry_if_notified()) return true;
          if (self.phase_ == kQueued) return false;  // not woken yet
          break;                                     // woken, but full again: queue again
        case kYielding:
          if (self.attempt()) return true;
          break;
        default:
          return true;
      }
      return !self.enqueue(task);
    }

    detail::Channel<T>* channel_;
    T value_;
    volt::detail::ChannelWaiter waiter_;
    Phase phase_ = kStart;
    bool holds_grant_ = false;  // woken, push failed, not yet queued again
    detail::RingResult pushed_ = detail::RingResult::kDone;  // how kSent happened
  };
  Send send(T value) { return Send(channel_, std::move(value)); }

  // Blocks the calling (non-runtime) thread until there is room.
  SendResult<T> send_blocking(T value) {
    volt::detail::check_blocking_allowed("mpmc::Sender::send_blocking on a runtime thread");
    if (!channel_) return SendResult<T>(errc::closed, std::move(value));
    struct Attempt {
      detail::Channel<T>* channel;
      T* value;
      detail::RingResult result = detail::RingResult::kNotNow;
      // Not granted: the first try. Granted: the oldest registrant's
      // re-check, and the retry after a wake-up (see Send).
      static bool recheck(void* self) {
        auto& a = *static_cast<Attempt*>(self);
        a.result = a.channel->template try_push<true>(*a.value);
        return a.result != detail::RingResult::kNotNow;
      }
    } attempt{channel_, &value};
    attempt.result = channel_->try_push(value);
    bool woken = false;
    bool regrant = false;
    volt::detail::ChannelWaiter waiter;  // shared by every turn: it counts the regrants
    while (attempt.result == detail::RingResult::kNotNow) {
      waiter.waker = volt::detail::current_thread_waker();
      if (!channel_->send_waiters().enqueue(&waiter, &Attempt::recheck, &attempt, regrant)) break;
      while (!waiter.notified())
        volt::detail::park_current_thread();
      woken = true;
      // The granted retry, under the senders' lock (see Send).
      if (channel_->send_waiters().retry_granted(&waiter, &Attempt::recheck, &attempt)) break;
      regrant = true;  // no room yet: back to the front, keeping the turn
    }
    if (attempt.result == detail::RingResult::kClosed)
      return SendResult<T>(errc::closed, std::move(value));
    channel_->wake_receivers(attempt.result);
    if (woken) channel_->pass_on_after_woken_send();
    return SendResult<T>();
  }

  // co_await tx.send_timeout(v, 100ms): send() bounded in time; on timeout
  // the value is handed back, SendResult with errc::timed_out (unlike
  // timeout(d, tx.send(v)), which destroys it). A send that completes in
  // the same poll as the deadline wins. Not movable: await it where it is
  // made (or hold it as an lvalue). The timer lives in it; the wait is run
  // as a timeout's branch (volt/time/timeout.hpp: one recycled frame).
  class [[nodiscard]] SendTimeout {
   public:
    SendTimeout(detail::Channel<T>* channel, T&& value, Duration d)
        : send_(channel, std::move(value)), timeout_(send_, d) {}
    SendTimeout(const SendTimeout&) = delete;
    SendTimeout& operator=(const SendTimeout&) = delete;

    bool await_ready() { return timeout_.await_ready(); }
    bool await_suspend(std::coroutine_handle<> self) { return timeout_.await_suspend(self); }
    SendResult<T> await_resume() {
      Expected<SendResult<T>> done = timeout_.await_resume();
      if (done) return std::move(*done);
      return send_.withdraw(errc::timed_out);
    }

   private:
    Send send_;               // destroyed after timeout_ (declared first)
    Timeout<Send&> timeout_;  // holds send_ by reference
  };
  template <class Rep, class Period>
  SendTimeout send_timeout(T value, std::chrono::duration<Rep, Period> d) {
    return SendTimeout(channel_, std::move(value), volt::detail::saturate_ns(d));
  }

  // Two-phase send (Tokio's reserve): a Permit holds a slot until it sends
  // through it (never waiting) or is destroyed (the slot given back).
  //
  // try_reserve(): a Permit if there is a free slot now (while the senders'
  // side is strict, only if no sender waits, as try_send); errc::full, or
  // errc::closed.
  Expected<Permit<T>> try_reserve() {
    if (!channel_) return Expected<Permit<T>>(errc::closed);
    switch (channel_->try_reserve(1)) {
      case detail::RingResult::kDone:
        return Expected<Permit<T>>(Permit<T>(channel_));
      case detail::RingResult::kClosed:
        return Expected<Permit<T>>(errc::closed);
      default:
        return Expected<Permit<T>>(errc::full);
    }
  }
  // try_reserve_many(n): n slots at once, all or none. n > max_capacity():
  // errc::invalid_argument; n == 0: an empty PermitIterator (errc::closed if
  // closed).
  Expected<PermitIterator<T>> try_reserve_many(std::size_t n) {
    if (!channel_) return Expected<PermitIterator<T>>(errc::closed);
    if (n > channel_->capacity()) return Expected<PermitIterator<T>>(errc::invalid_argument);
    if (n == 0) {
      if (channel_->is_closed()) return Expected<PermitIterator<T>>(errc::closed);
      return Expected<PermitIterator<T>>(PermitIterator<T>());
    }
    switch (channel_->try_reserve(n)) {
      case detail::RingResult::kDone:
        return Expected<PermitIterator<T>>(PermitIterator<T>(channel_, n));
      case detail::RingResult::kClosed:
        return Expected<PermitIterator<T>>(errc::closed);
      default:
        return Expected<PermitIterator<T>>(errc::full);
    }
  }

  // co_await tx.reserve() / tx.reserve_many(n): waits for room as send()
  // does, in the same queue (woken oldest first, send or reserve; the
  // bounded barging of send()). Expected<Permit<T>> /
  // Expected<PermitIterator<T>>: errc::closed if the channel closes first;
  // reserve_many(n > max_capacity()): errc::invalid_argument at once (Tokio
  // refuses it too: it could never be satisfied); n == 0: an empty
  // PermitIterator at once. Cancel-safe: destroyed while waiting, it holds
  // nothing (a grant it was woken with passes on); destroyed after it
  // reserved but before the co_await resumed, it gives the slots back.
  // Waiting allocates nothing. A reserve_many that keeps finding fewer than
  // n slots free turns the side strict: it then holds back the senders
  // behind it until n slots are free (FIFO).
  template <bool kMany>
  class [[nodiscard]] ReserveOp {
   public:
    using Output = std::conditional_t<kMany, PermitIterator<T>, Permit<T>>;
    ReserveOp(detail::Channel<T>* channel, std::size_t n) noexcept : channel_(channel), n_(n) {}
    ReserveOp(const ReserveOp&) = delete;
    ReserveOp& operator=(const ReserveOp&) = delete;
    // Before it is awaited only (e.g. moved into a timeout or select).
    ReserveOp(ReserveOp&& other) noexcept : channel_(other.channel_), n_(other.n_) {}
    ~ReserveOp() {
      if (phase_ == kQueued) {
        channel_->send_waiters().cancel(&waiter_);
      } else if (holds_grant_) {
        channel_->send_waiters().drop_grant(&waiter_);
      } else if (phase_ == kReserved && n_ != 0) {
        channel_->send_waiters().release_reserved(n_);  // reserved, never resumed
      }
    }

    bool await_ready() {
      if (phase_ == kQueued) return retry_if_notified();
      if (!channel_) {
        phase_ = kClosed;
        return true;
      }
      if (n_ > channel_->capacity()) {
        phase_ = kInvalid;
        return true;
      }
      if (n_ == 0) {
        phase_ = channel_->is_closed() ? kClosed : kReserved;
        return true;
      }
      if (!volt::detail::coop_try_consume()) {
        phase_ = kYielding;
        return false;
      }
      return attempt();
    }
    bool await_suspend(std::coroutine_handle<> self) {
      if (phase_ == kYielding) {
        volt::detail::yield_current(self, &ready_check, this);
        return true;
      }
      volt::detail::TaskHeader* task = volt::detail::suspend_current(self, &ready_check, this);
      if (phase_ == kQueued) return !check(task);  // re-awaited while queued (see Send)
      return enqueue(task);
    }
    Expected<Output> await_resume() {
      const Phase phase = std::exchange(phase_, kStart);
      if (phase == kReserved) {
        if constexpr (kMany) {
          return Expected<Output>(PermitIterator<T>(channel_, n_));
        } else {
          return Expected<Output>(Permit<T>(channel_));
        }
      }
      return Expected<Output>(phase == kInvalid ? errc::invalid_argument : errc::closed);
    }

   private:
    enum Phase : std::uint8_t { kStart, kYielding, kQueued, kReserved, kClosed, kInvalid };
    bool finish(detail::RingResult reserved) noexcept {
      switch (reserved) {
        case detail::RingResult::kDone:
          phase_ = kReserved;
          return true;
        case detail::RingResult::kClosed:
          phase_ = kClosed;
          return true;
        default:
          phase_ = kStart;
          return false;
      }
    }
    // A first attempt (while strict, only as the oldest), see try_reserve.
    bool attempt() noexcept { return finish(channel_->try_reserve(n_)); }
    bool enqueue(volt::detail::TaskHeader* task) noexcept {
      waiter_.waker = volt::detail::make_task_waker(task);
      const bool regrant = std::exchange(holds_grant_, false);
      if (channel_->send_waiters().enqueue(&waiter_, &recheck, this, regrant, true)) {
        phase_ = kQueued;
        return true;
      }
      waiter_.waker = volt::detail::Waker();
      // A woken reserve's re-check ended its grant: pass on (see Send).
      if (regrant && phase_ == kReserved) channel_->pass_on_after_woken_send();
      return false;
    }
    // Under the senders' lock: a registrant's re-check (while strict, only
    // the oldest's), or the granted retry of a woken one.
    static bool recheck(void* self) noexcept {
      auto* op = static_cast<ReserveOp*>(self);
      return op->finish(op->channel_->reserve_locked(op->n_));
    }
    bool retry_if_notified() noexcept {
      if (!waiter_.notified()) return false;
      waiter_.state.store(volt::detail::ChannelWaiter::kIdle, std::memory_order_relaxed);
      if (!channel_->send_waiters().retry_granted(&waiter_, &recheck, this, true)) {
        holds_grant_ = true;  // re-queued at the front by enqueue()
        return false;
      }
      // As a woken send: more room may be left for the next waiter.
      if (phase_ == kReserved) channel_->pass_on_after_woken_send();
      return true;
    }
    static bool ready_check(void* context) noexcept {
      return static_cast<ReserveOp*>(context)->check(volt::detail::tls_context.current_task);
    }
    bool check(volt::detail::TaskHeader* task) noexcept {
      switch (phase_) {
        case kQueued:
          if (retry_if_notified()) return true;
          if (phase_ == kQueued) return false;  // not woken yet
          break;                                // woken, but no room: queue again
        case kYielding:
          if (attempt()) return true;
          break;
        default:
          return true;
      }
      return !enqueue(task);
    }

    detail::Channel<T>* channel_;
    std::size_t n_;
    volt::detail::ChannelWaiter waiter_;
    Phase phase_ = kStart;
    bool holds_grant_ = false;  // woken, no room yet, not yet queued again
  };
  using Reserve = ReserveOp<false>;
  using ReserveMany = ReserveOp<true>;
  Reserve reserve() noexcept { return Reserve(channel_, 1); }
  ReserveMany reserve_many(std::size_t n) noexcept { return ReserveMany(channel_, n); }

  // co_await tx.closed(): completes when the channel is closed, i.e. every
  // Receiver is gone (or close() was called, or every Sender is gone). At
  // once if it already is, or for a moved-from Sender. Waiting allocates
  // nothing; cancel-safe (destroyed while waiting, it just leaves the
  // queue). Borrows the Sender (which must outlive it).
  class [[nodiscard]] Closed {
   public:
    explicit Closed(detail::Channel<T>* channel) noexcept : channel_(channel) {}
    Closed(const Closed&) = delete;
    Closed& operator=(const Closed&) = delete;
    // Before it is awaited only.
    Closed(Closed&& other) noexcept : channel_(other.channel_) {}
    ~Closed() {
      if (phase_ == kQueued) channel_->closed_waiters().cancel(&waiter_);
    }

    bool await_ready() noexcept {
      if (phase_ == kQueued) return retry_if_notified();
      return !channel_ || channel_->is_closed_seq_cst();
    }
    bool await_suspend(std::coroutine_handle<> self) {
      volt::detail::TaskHeader* task = volt::detail::suspend_current(self, &ready_check, this);
      if (phase_ == kQueued) return !check(task);
      return enqueue(task);
    }
    void await_resume() noexcept { phase_ = kStart; }

   private:
    enum Phase : std::uint8_t { kStart, kQueued };
    bool enqueue(volt::detail::TaskHeader* task) noexcept {
      waiter_.waker = volt::detail::make_task_waker(task);
      if (channel_->closed_waiters().enqueue(&waiter_, &recheck, this)) {
        phase_ = kQueued;
        return true;
      }
      waiter_.waker = volt::detail::Waker();
      return false;
    }
    static bool recheck(void* self) noexcept {
      return static_cast<Closed*>(self)->channel_->is_closed_seq_cst();
    }
    // Only close() wakes these waiters (and a cancelled woken one passing
    // its wake-up on, which also happens only once closed).
    bool retry_if_notified() noexcept {
      if (!waiter_.notified()) return false;
      waiter_.state.store(volt::detail::ChannelWaiter::kIdle, std::memory_order_relaxed);
      phase_ = kStart;
      return true;
    }
    static bool ready_check(void* context) noexcept {
      return static_cast<Closed*>(context)->check(volt::detail::tls_context.current_task);
    }
    bool check(volt::detail::TaskHeader* task) noexcept {
      if (phase_ != kQueued) return true;
      if (retry_if_notified()) return true;
      (void)task;
      return false;
    }

    detail::Channel<T>* channel_;
    volt::detail::ChannelWaiter waiter_;
    Phase phase_ = kStart;
  };
  Closed closed() noexcept { return Closed(channel_); }

  // Closes the channel for every handle (see the contract at the top).
  void close() noexcept {
    if (channel_) channel_->close();
  }
  bool is_closed() const noexcept { return !channel_ || channel_->is_closed(); }
  // Free slots now: max_capacity() minus the values in the channel minus
  // the slots permits hold (Tokio's capacity()). A snapshot: exact when
  // nothing runs concurrently; 0 for a moved-from Sender.
  std::size_t capacity() const noexcept { return channel_ ? channel_->free_slots() : 0; }
  // The capacity the channel was made with.
  std::size_t max_capacity() const noexcept { return channel_ ? channel_->capacity() : 0; }
  bool same_channel(const Sender& other) const noexcept { return channel_ == other.channel_; }

 private:
  template <class U>
  friend std::pair<Sender<U>, Receiver<U>> channel(std::size_t);
  explicit Sender(detail::Channel<T>* channel) noexcept : channel_(channel) {}
  detail::Channel<T>* channel_ = nullptr;
};

// The receiving side; copies are more receivers of the same channel.
template <class T>
class Receiver {
 public:
  Receiver() noexcept = default;
  Receiver(const Receiver& other) noexcept : channel_(other.channel_) {
    if (channel_) channel_->add_receiver();
  }
  Receiver(Receiver&& other) noexcept : channel_(std::exchange(other.channel_, nullptr)) {}
  Receiver& operator=(Receiver other) noexcept {
    std::swap(channel_, other.channel_);
    return *this;
  }
  ~Receiver() {
    if (channel_) channel_->drop_receiver();
  }

  // The oldest value if there is one now; errc::empty, or errc::closed once
  // the channel is closed and drained.
  Expected<T> try_recv() {
    if (!channel_) return Expected<T>(errc::closed);
    std::optional<T> value;
    switch (channel_->try_pop(value)) {
      case detail::RingResult::kDone:
      case detail::RingResult::kDoneClosing:  // (from pushes only)
        channel_->send_waiters().wake_one();
        return Expected<T>(std::move(*value));
      case detail::RingResult::kNotNow:
        return Expected<T>(errc::empty);
      case detail::RingResult::kClosed:
        break;
    }
    return Expected<T>(errc::closed);
  }

  // co_await rx.recv(): the oldest value, waiting for one; std::nullopt once
  // the channel is closed and drained.
  class [[nodiscard]] Recv {
   public:
    explicit Recv(detail::Channel<T>* channel) noexcept : channel_(channel) {}
    Recv(const Recv&) = delete;
    Recv& operator=(const Recv&) = delete;
    // Before it is awaited only (e.g. moved into a timeout or select).
    Recv(Recv&& other) noexcept : channel_(other.channel_) {}
    ~Recv() {
      if (phase_ == kQueued) channel_->recv_waiters().cancel(&waiter_);
    }

    bool await_ready() {
      if (phase_ == kQueued) return retry_if_notified();
      if (!channel_) return true;
      if (!volt::detail::coop_try_consume()) {
        phase_ = kYielding;
        return false;
      }
      return attempt();
    }
    bool await_suspend(std::coroutine_handle<> self) {
      if (phase_ == kYielding) {
        volt::detail::yield_current(self, &ready_check, this);
        return true;
      }
      volt::detail::TaskHeader* task = volt::detail::suspend_current(self, &ready_check, this);
      // Re-awaited while queued (an lvalue operand of a timeout or select
      // that lost): it may have been woken meanwhile, with no poll left to
      // run the check (a select that yielded between asking and starting
      // it), so look now.
      if (phase_ == kQueued) return !check(task);
      return enqueue(task);
    }
    std::optional<T> await_resume() {
      phase_ = kStart;
      // The flag and the value read apart: try_pop has just written them
      // apart (8 + 1 bytes), and a 16-byte copy of the optional right
      // after stalls on store forwarding (a tenth of channel_mpmc's time
      // at 1 worker).
      if (!value_) return std::nullopt;
      std::optional<T> out(std::move(*value_));
      value_.reset();
      return out;
    }

   private:
    enum Phase : std::uint8_t { kStart, kYielding, kQueued, kDone };
    // wake_sender false: under the receive side's lock (see Send::attempt).
    // Always inline, as Send::attempt.
    [[gnu::always_inline]] bool attempt(bool wake_sender = true) {
      switch (channel_->try_pop(value_)) {
        case detail::RingResult::kDone:
        case detail::RingResult::kDoneClosing:  // (from pushes only)
          if (wake_sender) channel_->send_waiters().wake_one();
          [[fallthrough]];
        case detail::RingResult::kClosed:
          phase_ = kDone;
          return true;
        case detail::RingResult::kNotNow:
          break;
      }
      phase_ = kStart;
      return false;
    }
    bool enqueue(volt::detail::TaskHeader* task) {
      waiter_.waker = volt::detail::make_task_waker(task);
      if (channel_->recv_waiters().enqueue(&waiter_, &recheck, this)) {
        phase_ = kQueued;
        return true;
      }
      waiter_.waker = volt::detail::Waker();
      if (value_) channel_->send_waiters().wake_one();
      return false;
    }
    static bool recheck(void* self) { return static_cast<Recv*>(self)->attempt(false); }
    bool retry_if_notified() {
      if (!waiter_.notified()) return false;
      waiter_.state.store(volt::detail::ChannelWaiter::kIdle, std::memory_order_relaxed);
      if (!attempt()) return false;
      if (value_) channel_->pass_on_after_woken_recv();
      return true;
    }
    static bool ready_check(void* context) noexcept {
      return static_cast<Recv*>(context)->check(volt::detail::tls_context.current_task);
    }
    bool check(volt::detail::TaskHeader* task) noexcept {
      Recv& self = *this;
      switch (self.phase_) {
        case kQueued:
          if (self.retry_if_notified()) return true;
          if (self.phase_ == kQueued) return false;
          break;
        case kYielding:
          if (self.attempt()) return true;
          break;
        default:
          return true;
      }
      return !self.enqueue(task);
    }

    detail::Channel<T>* channel_;
    std::optional<T> value_;
    volt::detail::ChannelWaiter waiter_;
    Phase phase_ = kStart;
  };
  Recv recv() noexcept { return Recv(channel_); }

  // co_await rx.recv_many(out, limit): waits as recv() does for one value,
  // then appends it and up to limit - 1 more values available now to `out`,
  // in order, with one wake-up; returns how many it appended. 0: the channel
  // is closed and drained, or limit == 0 (at once). Tokio's recv_many.
  // Values move into `out` only when the co_await completes: a RecvMany
  // destroyed while waiting takes nothing (as Recv). Room for
  // min(limit, max_capacity()) more values is reserved in `out` before any
  // value is taken (so no value is lost to a throwing growth; a vector kept
  // across calls stops allocating); it may stop short of `limit` when more
  // values than that arrived meanwhile. `out` must outlive the operation.
  class [[nodiscard]] RecvMany {
   public:
    RecvMany(detail::Channel<T>* channel, std::vector<T>& out, std::size_t limit) noexcept
        : channel_(channel), recv_(channel), out_(&out), limit_(limit) {}
    RecvMany(const RecvMany&) = delete;
    RecvMany& operator=(const RecvMany&) = delete;
    // Before it is awaited only.
    RecvMany(RecvMany&& other) noexcept
        : channel_(other.channel_), recv_(other.channel_), out_(other.out_), limit_(other.limit_) {}

    bool await_ready() {
      if (limit_ == 0) return true;
      if (!reserved_ && channel_ != nullptr) {
        // Before anything is taken: a bad_alloc here loses nothing.
        const std::size_t room = limit_ < channel_->capacity() ? limit_ : channel_->capacity();
        out_->reserve(out_->size() + room);
        reserved_ = true;
      }
      return recv_.await_ready();
    }
    bool await_suspend(std::coroutine_handle<> self) { return recv_.await_suspend(self); }
    std::size_t await_resume() {
      if (limit_ == 0) return 0;
      reserved_ = false;
      std::optional<T> first = recv_.await_resume();
      if (!first) return 0;
      out_->push_back(std::move(*first));  // within the reserved room: no throw
      std::size_t taken = 1;
      std::optional<T> value;
      while (taken < limit_ && out_->size() < out_->capacity()) {
        const detail::RingResult popped = channel_->try_pop(value);
        if (popped != detail::RingResult::kDone && popped != detail::RingResult::kDoneClosing)
          break;
        out_->push_back(std::move(*value));
        value.reset();
        ++taken;
        channel_->send_waiters().wake_one();  // a slot freed, as try_recv
      }
      return taken;
    }

   private:
    detail::Channel<T>* channel_;
    Recv recv_;
    std::vector<T>* out_;
    std::size_t limit_;
    bool reserved_ = false;
  };
  RecvMany recv_many(std::vector<T>& out, std::size_t limit) noexcept {
    return RecvMany(channel_, out, limit);
  }

  // Blocks the calling (non-runtime) thread until a value arrives; nullopt
  // once the channel is closed and drained.
  std::optional<T> recv_blocking() {
    volt::detail::check_blocking_allowed("mpmc::Receiver::recv_blocking on a runtime thread");
    if (!channel_) return std::nullopt;
    std::optional<T> value;
    struct Attempt {
      detail::Channel<T>* channel;
      std::optional<T>* value;
      detail::RingResult result = detail::RingResult::kNotNow;
      static bool recheck(void* self) {
        auto& a = *static_cast<Attempt*>(self);
        a.result = a.channel->try_pop(*a.value);
        return a.result != detail::RingResult::kNotNow;
      }
    } attempt{channel_, &value};
    bool woken = false;
    for (;;) {
      if (Attempt::recheck(&attempt)) break;
      volt::detail::ChannelWaiter waiter;
      waiter.waker = volt::detail::current_thread_waker();
      if (!channel_->recv_waiters().enqueue(&waiter, &Attempt::recheck, &attempt)) break;
      while (!waiter.notified())
        volt::detail::park_current_thread();
      woken = true;
    }
    if (attempt.result == detail::RingResult::kDone) {
      channel_->send_waiters().wake_one();
      if (woken) channel_->pass_on_after_woken_recv();
    }
    return value;
  }

  // Closes the channel for every handle; values already sent stay receivable.
  void close() noexcept {
    if (channel_) channel_->close();
  }
  bool is_closed() const noexcept { return !channel_ || channel_->is_closed(); }
  // The number of values in the channel (a snapshot under concurrency).
  std::size_t len() const noexcept { return channel_ ? channel_->len() : 0; }
  bool is_empty() const noexcept { return len() == 0; }
  // As Sender's: free slots now (a snapshot), and the channel's capacity.
  std::size_t capacity() const noexcept { return channel_ ? channel_->free_slots() : 0; }
  std::size_t max_capacity() const noexcept { return channel_ ? channel_->capacity() : 0; }

 private:
  template <class U>
  friend std::pair<Sender<U>, Receiver<U>> channel(std::size_t);
  explicit Receiver(detail::Channel<T>* channel) noexcept : channel_(channel) {}
  detail::Channel<T>* channel_ = nullptr;
};

// A bounded channel holding up to `capacity` values.
template <class T>
std::pair<Sender<T>, Receiver<T>> channel(std::size_t capacity) {
  if (capacity == 0 || capacity > kMaxCapacity)
    throw Error(errc::invalid_argument, "mpmc::channel: capacity must be in [1, kMaxCapacity]");
  auto* shared = new detail::Channel<T>(capacity);
  return {Sender<T>(shared), Receiver<T>(shared)};
}

}  // namespace volt::mpmc
