// volt/channel/mpmc.hpp: the bounded multi-producer multi-consumer channel.
//
//   auto [tx, rx] = volt::mpmc::channel<Job>(64);
//   // producers (any number; Sender is copyable):
//   volt::SendResult<Job> sent = co_await tx.send(std::move(job));  // waits for room
//   // consumers (any number; Receiver is copyable):
//   while (std::optional<Job> job = co_await rx.recv()) run(*job);  // nullopt: closed, drained
//
// Guarantees:
//  - Every value sent is received exactly once, by one receiver. Values from
//    one sender arrive in the order it sent them.
//  - try_send / try_recv never wait and never lock: one CAS on the tail or
//    head plus the slot's sequence store (a Vyukov ring with per-slot
//    sequence numbers), and a flag load to see whether anyone waits.
//  - Waiting allocates nothing: the waiter lives in the Send / Recv
//    operation. Waiters are served oldest first.
//  - Fairness of senders (no barging, as Tokio's): a slot freed while a
//    send() waits belongs to the oldest waiting sender, which is woken
//    holding it; while any sender waits (or holds such a slot), try_send()
//    and a new send()'s first attempt find the channel full. So a send that
//    started after a send() had queued never delivers before it. The
//    lock-free path is unchanged when no sender waits (the gate is a bit of
//    the tail word the claim CASes anyway). Receivers may barge (a try_recv
//    can take a value a woken recv() was woken for).
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
//    Receiver destroyed closes it too: a send fails at once.
//  - The channel is freed with its last handle, with any values still in it.
//
// Bad input:
//  - capacity 0 or above kMaxCapacity: throws volt::Error(errc::invalid_argument)
//    (there is no rendezvous channel; Tokio refuses 0 as well).
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

#include <atomic>
#include <bit>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include "volt/channel/send_result.hpp"
#include "volt/detail/blocking_wait.hpp"
#include "volt/detail/channel_waiters.hpp"
#include "volt/detail/spin_lock.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/error.hpp"
#include "volt/expected.hpp"
#include "volt/task/join_handle.hpp"

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
        slots_(std::make_unique<Slot[]>(capacity)) {
    for (std::size_t i = 0; i < capacity; ++i)
      slots_[i].stamp.store(i, std::memory_order_relaxed);
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
      slots_[head & (mark_bit_ - 1)].value()->~T();
      head = next(head);
    }
  }

  // Moves `value` into the ring if there is room (only then). Not kGranted
  // (try_send, a first attempt): no room while the send gate is set, i.e.
  // while senders wait or hold a grant (no barging: a freed slot is theirs).
  // kGranted: a woken sender holding a grant, or the oldest registrant's
  // re-check under the senders' lock; claims past the gate, keeping it.
  template <bool kGranted = false>
  RingResult try_push(T& value) noexcept {
    std::uint64_t word = tail_.load(std::memory_order_relaxed);
    int in_flight_spins = 0;
    for (;;) {
      if (word & mark_bit_) return RingResult::kClosed;
      if (!kGranted && (word & send_gate_bit_)) return RingResult::kNotNow;
      const std::uint64_t tail = word & ~send_gate_bit_;
      Slot& slot = slots_[tail & (mark_bit_ - 1)];
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
        continue;  // the word was reloaded by the failed CAS
      }
      if (stamp + one_lap_ == tail + 1) {
        // The slot still holds the previous lap's value. Full, unless a
        // receive has claimed it (head moved) and is reading it now.
        const std::uint64_t head = head_.load(std::memory_order_relaxed);
        if (head + one_lap_ == tail || ++in_flight_spins > kInFlightSpins)
          return RingResult::kNotNow;
        volt::detail::SpinLock::pause();
      } else if (stamp < tail && ++in_flight_spins > kInFlightSpins) {
        // The previous lap's send at this slot has not published yet: the
        // ring is full until it does and a receive takes it.
        return RingResult::kNotNow;
      }
      // (stamp beyond tail: another sender took tail; reload it.)
      word = tail_.load(std::memory_order_relaxed);
    }
  }

  // Moves the oldest value into `out` if there is one.
  RingResult try_pop(std::optional<T>& out) noexcept {
    std::uint64_t head = head_.load(std::memory_order_relaxed);
    int in_flight_spins = 0;
    for (;;) {
      Slot& slot = slots_[head & (mark_bit_ - 1)];
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
      }
      // (stamp beyond head + 1: another receiver took head; reload it.)
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
    return true;
  }
  bool is_closed() const noexcept { return tail_.load(std::memory_order_acquire) & mark_bit_; }

  std::size_t capacity() const noexcept { return capacity_; }
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
    return slots_[head & (mark_bit_ - 1)].stamp.load(std::memory_order_seq_cst) == head + 1;
  }
  bool room_at_tail() const noexcept {
    // (The send gate is ignored: for the pass-on, which grants.)
    const std::uint64_t word = tail_.load(std::memory_order_seq_cst);
    const std::uint64_t tail = word & ~send_gate_bit_;
    return !(word & mark_bit_) &&
           slots_[tail & (mark_bit_ - 1)].stamp.load(std::memory_order_seq_cst) == tail;
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
    if (receivers_.fetch_sub(1, std::memory_order_acq_rel) == 1) close();
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
  // | mark_bit_ once closed, | send_gate_bit_ while senders wait
  alignas(64) std::atomic<std::uint64_t> tail_{0};
  alignas(64) const std::size_t capacity_;
  const std::uint64_t mark_bit_;       // above every index; closed flag in tail_
  const std::uint64_t send_gate_bit_;  // the senders' gate in tail_ (ChannelWaiters)
  const std::uint64_t one_lap_;        // the stamp distance between laps
  std::unique_ptr<Slot[]> slots_;
  std::atomic<std::uint32_t> senders_{1};
  std::atomic<std::uint32_t> receivers_{1};
  std::atomic<std::uint32_t> refs_{2};
  alignas(64) volt::detail::ChannelWaiters recv_waiters_;
  alignas(64) volt::detail::ChannelWaiters send_waiters_;
};

}  // namespace detail

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
    switch (const detail::RingResult pushed = channel_->try_push(value)) {
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
        channel_->send_waiters().drop_grant();
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
    enum Phase : std::uint8_t { kStart, kYielding, kQueued, kSent, kClosed };
    // wake_receiver false: called as the re-check, under the send side's
    // lock; the receivers' lock must not be taken there (a receiver's
    // re-check holds that one and would take ours: lock-order inversion).
    // enqueue() wakes after the lock is released instead.
    // granted: past the send gate (see Channel::try_push).
    bool attempt(bool wake_receiver = true, bool granted = false) {
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
      if (phase_ == kSent) channel_->wake_receivers(pushed_);
      return false;
    }
    // The re-check under the senders' lock runs only for the oldest sender
    // (ChannelWaiters::enqueue), so it claims past the gate it just set.
    static bool recheck(void* self) { return static_cast<Send*>(self)->attempt(false, true); }
    bool retry_if_notified() {
      if (!waiter_.notified()) return false;
      waiter_.state.store(volt::detail::ChannelWaiter::kIdle, std::memory_order_relaxed);
      // Woken with a grant: a slot freed for it (no try_send can take it).
      if (!attempt(true, true)) {
        holds_grant_ = true;  // re-queued at the front by enqueue()
        return false;
      }
      channel_->send_waiters().grant_done();
      if (phase_ == kSent) channel_->pass_on_after_woken_send();
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
    while (attempt.result == detail::RingResult::kNotNow) {
      volt::detail::ChannelWaiter waiter;
      waiter.waker = volt::detail::current_thread_waker();
      if (!channel_->send_waiters().enqueue(&waiter, &Attempt::recheck, &attempt, regrant)) break;
      while (!waiter.notified())
        volt::detail::park_current_thread();
      woken = true;
      if (Attempt::recheck(&attempt)) {
        channel_->send_waiters().grant_done();
        break;
      }
      regrant = true;  // no room yet: back to the front, keeping the turn
    }
    if (attempt.result == detail::RingResult::kClosed)
      return SendResult<T>(errc::closed, std::move(value));
    channel_->wake_receivers(attempt.result);
    if (woken) channel_->pass_on_after_woken_send();
    return SendResult<T>();
  }

  // Closes the channel for every handle (see the contract at the top).
  void close() noexcept {
    if (channel_) channel_->close();
  }
  bool is_closed() const noexcept { return !channel_ || channel_->is_closed(); }
  std::size_t capacity() const noexcept { return channel_ ? channel_->capacity() : 0; }
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
      return std::exchange(value_, std::nullopt);
    }

   private:
    enum Phase : std::uint8_t { kStart, kYielding, kQueued, kDone };
    // wake_sender false: under the receive side's lock (see Send::attempt).
    bool attempt(bool wake_sender = true) {
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
  std::size_t capacity() const noexcept { return channel_ ? channel_->capacity() : 0; }

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
