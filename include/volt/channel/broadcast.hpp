// volt/channel/broadcast.hpp: a multi-producer, multi-consumer channel in
// which every receiver sees every value (Tokio's tokio::sync::broadcast).
//
//   auto [tx, rx] = volt::broadcast::channel<Event>(64);
//   volt::broadcast::Receiver<Event> other = tx.subscribe();  // values sent from now on
//   tx.send(Event{...});                                        // never waits
//   for (;;) {
//     volt::broadcast::RecvResult<Event> r = co_await rx.recv();
//     if (r) handle(*r);
//     else if (r.error() == volt::errc::lagged) log_missed(r.missed());  // carry on
//     else break;                                   // errc::closed: senders gone, drained
//   }
//
// Guarantees:
//  - Every receiver gets a copy of every value sent after it was subscribed,
//    in the order the sends took the channel's lock (so values of one sender
//    in the order it sent them), unless it falls behind (lag, below).
//  - Capacity: channel<T>(n) keeps the newest bit_ceil(n) values (n rounded
//    up to a power of two, as Tokio does); capacity() says how many. A send
//    never waits: when the ring is full it overwrites the oldest value.
//  - Lag: a receiver that is more than capacity() values behind the newest
//    has lost values. Its next receive returns errc::lagged with missed() ==
//    the exact number it lost (every value sent while it was subscribed and
//    that it never saw), and moves it to the oldest value still kept; the
//    receives after that continue from there. For every receiver,
//    values received + sum of missed() == values sent while it was
//    subscribed (once it has drained the channel).
//  - Closing: when the last Sender is destroyed, receivers first receive
//    what is left (and any lag), then errc::closed. When the last Receiver
//    is destroyed, send() fails with errc::closed and hands the value back
//    (a later subscribe() makes sends succeed again).
//  - A value is destroyed once every receiver that had to see it has taken
//    it (the last one takes it by move, the others get copies), or when it
//    is overwritten, or with the channel. T must be copy constructible and
//    nothrow move constructible (send moves the value into its slot under
//    the lock). A copy constructor that throws propagates out of try_recv /
//    recv with nothing consumed.
//  - try_recv() and send() never wait. try_recv() of an available value is
//    lock-free (two RMWs on the value's slot); send() takes a spin lock.
//    Waiting allocates nothing: the waiter lives in the Recv operation.
//  - Every waiting receiver is woken by each send (and by the close): a
//    Recv that is woken retries, it is not handed a value, so recv() is
//    cancel-safe: a Recv destroyed at any point (abort, timeout, select)
//    has consumed nothing; the receiver's position is unchanged. A Recv held
//    by reference in a timeout that expired keeps its place; the same task
//    may await it again (it is not registered twice). A Recv may be awaited
//    again after it completed: it receives the next value.
//  - recv() must be awaited in a runtime task; recv_blocking() is for plain
//    threads (errc::blocking_in_runtime on a runtime thread). Sender and
//    Receiver handles may be used from any thread, each by one at a time.
//
// Results (RecvResult<T>, the same shape as Expected<T> plus missed()):
//  - a value; errc::empty (try_recv only: nothing new, senders alive);
//    errc::lagged with missed() = n; errc::closed. recv() never gives empty.
//
// Handles:
//  - Sender is copyable (another sender of the same channel). send(v) ->
//    SendResult<T>; subscribe(); receiver_count(); len() (values in the ring
//    that a receiver alive when they were sent has not read yet: Tokio's
//    Sender::len); is_empty(); capacity(); closed() (co_await: completes
//    when no receiver is left; `co_await tx.closed();`).
//  - Receiver is movable and copyable: a copy is a new receiver at the same
//    position (it will receive the same values the original has not read
//    yet; making it costs one RMW per such value, under the lock). Tokio's
//    Receiver has no Clone, only resubscribe().
//    resubscribe() gives a new receiver that sees only later values.
//    Dropping a receiver counts the values it never read as read (O(its
//    unread values), outside the lock).
//    len(): values sent that this receiver has not received (may exceed the
//    capacity when it lags).
//
// Bad input:
//  - channel<T>(0) or channel<T>(n > kMaxCapacity): volt::Error(
//    errc::invalid_argument). More than kMaxReceivers receivers at once
//    (subscribe, copy, resubscribe): volt::Error(errc::invalid_argument).
//  - A moved-from (or default-constructed) Sender: send fails with
//    errc::closed and the value back, subscribe() gives a moved-from
//    Receiver, receiver_count() == len() == capacity() == 0. A moved-from
//    Receiver: try_recv / recv / recv_blocking give errc::closed, len() == 0.
//    A moved-from Sender's closed() completes at once.
// Preconditions (undefined behaviour otherwise): a Recv does not outlive its
// Receiver, the Receiver is not moved while a Recv of it waits, and one
// Receiver has one Recv waiting at a time; a closed() operation does not
// outlive its Sender. Positions are 64-bit counters:
// 2^64 sends wrap them.
//
// Protocol (the argument in full is in the comments of detail::Slot and
// detail::Core below, and src/channel/broadcast.cpp):
//  - A ring of capacity() slots; slot p & mask holds the value sent at
//    position p, with its position and `state`: a writing bit, a count of
//    readers inside the slot, and the number of receivers that still have to
//    read it. A receiver enters a slot with one fetch_add, checks the
//    position, copies (or, as the last one, moves) the value, and leaves
//    with one fetch_sub that also counts it as read. A send (under the
//    channel's spin lock, which orders sends) sets the writing bit, waits for
//    the readers inside to leave, replaces the value, and clears the bit.
//  - The lock also guards the send position (tail), the receiver count, the
//    closed flag and the waiter ring. Whatever a receiver cannot settle from
//    its slot (empty, lagged, closed, a send in progress) it settles under
//    the lock, where no send can run.
#pragma once

#include <atomic>
#include <bit>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <optional>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>

#include "volt/channel/send_result.hpp"
#include "volt/detail/blocking_wait.hpp"
#include "volt/detail/closed_event.hpp"
#include "volt/detail/spin_lock.hpp"
#include "volt/detail/spin_wait.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/detail/waker.hpp"
#include "volt/error.hpp"
#include "volt/task/join_handle.hpp"

namespace volt::broadcast {

template <class T>
class Sender;
template <class T>
class Receiver;

// Largest capacity channel() accepts (before rounding up, which keeps it).
inline constexpr std::size_t kMaxCapacity = std::size_t{1} << 30;
// Most receivers alive at once (the per-slot count of receivers still to
// read a value is 32 bits wide).
inline constexpr std::uint64_t kMaxReceivers = (std::uint64_t{1} << 32) - 1;

namespace detail {
template <class T>
class Shared;
}

// The outcome of a receive: a value, or why there is none (errc::empty,
// errc::lagged with missed(), errc::closed).
template <class T>
class [[nodiscard]] RecvResult {
 public:
  explicit RecvResult(T value) : value_(std::in_place, std::move(value)) {}
  // Precondition: why != errc::lagged (use lagged()).
  explicit RecvResult(errc why) noexcept : error_(why) {}
  static RecvResult lagged(std::uint64_t missed) noexcept {
    RecvResult r(errc::lagged);
    r.missed_ = missed;
    return r;
  }

  bool has_value() const noexcept { return value_.has_value(); }
  explicit operator bool() const noexcept { return has_value(); }
  // Why there is no value; a zero code when there is one.
  std::error_code error() const noexcept {
    return value_ ? std::error_code() : make_error_code(error_);
  }
  // How many values this receiver lost when error() == errc::lagged; 0 otherwise.
  std::uint64_t missed() const noexcept { return value_ ? 0 : missed_; }

  // The value; throws std::system_error(error()) if there is none.
  T& value() & {
    check();
    return *value_;
  }
  const T& value() const& {
    check();
    return *value_;
  }
  T value() && {
    check();
    return std::move(*value_);
  }
  T& operator*() & noexcept { return *value_; }
  const T& operator*() const& noexcept { return *value_; }
  T* operator->() noexcept { return &*value_; }
  const T* operator->() const noexcept { return &*value_; }

 private:
  friend class Receiver<T>;
  friend class detail::Shared<T>;
  RecvResult() noexcept = default;  // errc::empty, filled in by a receive
  void check() const {
    if (!value_) throw std::system_error(make_error_code(error_));
  }
  bool is_empty() const noexcept { return !value_ && error_ == errc::empty; }

  std::optional<T> value_;
  errc error_ = errc::empty;
  std::uint64_t missed_ = 0;  // meaningful when error_ == errc::lagged
};

namespace detail {

// ---- waiting receivers (the non-template half; src/channel/broadcast.cpp) ----

// A link of the waiter ring. Circular around a sentinel (Core's, or a send's
// local one while it wakes in batches), so a waiter unlinks itself knowing
// only its node. Guarded by Core::lock; next == nullptr means "in no ring".
struct WaiterLink {
  WaiterLink* prev = nullptr;
  WaiterLink* next = nullptr;
};

// One waiting receive (inside a Recv, or on recv_blocking's stack).
struct Waiter : WaiterLink {
  volt::detail::Waker waker;  // guarded by Core::lock while linked
  // Set by the send or close that unlinked the waiter, after it moved the
  // waker out; its last touch of the waiter (release store). The owner's
  // acquire loads pair with it: true means "unlinked, retry the channel".
  std::atomic<bool> woken{false};
};

// What the channel's spin lock guards, and the waiting it serves.
class Core {
 public:
  Core() noexcept { waiters_.prev = waiters_.next = &waiters_; }
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  volt::detail::SpinLock lock;
  std::uint64_t tail = 0;       // guarded by lock: the position the next send writes
  std::uint64_t receivers = 0;  // guarded by lock: live Receivers
  bool closed = false;          // guarded by lock: the last Sender is gone

  bool has_waiters_locked() const noexcept { return waiters_.next != &waiters_; }
  // lock held: completes every queued waiter (woken = true), waking them
  // after unlocking, in WakeList-sized batches; returns unlocked.
  void wake_all_and_unlock() noexcept;
  // Queues `waiter` for the receiver at `next` with `waker`, unless there
  // is already something for it (next != tail) or the channel is closed.
  // True if queued. The waker is dropped after unlocking when not queued.
  bool enqueue(Waiter& waiter, volt::detail::Waker waker, std::uint64_t next) noexcept;
  // A queued waiter's owner gives up (the Recv is destroyed): unlinks it
  // unless a send already did.
  void cancel(Waiter& waiter) noexcept;
  // The last Sender is gone: closed = true, and every waiter is woken.
  void close() noexcept;

 private:
  WaiterLink waiters_;  // sentinel; guarded by lock
};

// ---- one slot of the ring ----
//
// `state` (all changes are RMWs, so an acquire RMW or load synchronises with
// every earlier release RMW on it: the RMWs form one release sequence):
//   bit 0       kWriting: a send is replacing the value (set and cleared by
//               the send, which holds Core::lock throughout)
//   bits 1-31   readers inside the slot (entered, not yet left)
//   bits 32-63  remaining: receivers that still have to read the value at
//               `pos` (set by the send to Core::receivers; -1 for each
//               receiver that reads it or is dropped unread; +1 for a
//               Receiver copy made while the value is unread by the original)
// Initial value 0: no value, nobody inside, nobody to read.
//
// Invariants:
//   S1 A receiver whose position is p reads the slot only while it is
//      inside (readers > 0 counts it) and kWriting was clear when it entered
//      and pos == p; a send replaces pos and the value only while kWriting is
//      set and no reader is inside. So a reader never sees a value being
//      replaced.
//   S2 A receiver at position p <= pos of a slot holding pos is counted in
//      its `remaining` exactly once until it reads it, is dropped, or the
//      value is overwritten (which starts a fresh count). Subscriptions take
//      the position Core::tail under the lock, so every receiver alive at a
//      send is at or before it; a copy adds itself to each unread value.
//   S3 Hence remaining == 1 seen on entry means the entering receiver is the
//      only one left to read this value: nobody else will read it, so it
//      moves it out and destroys it. Otherwise it copies; the reader whose
//      leaving RMW takes remaining from 1 to 0 without having moved makes
//      sure the value is destroyed (destroy_unread()). `engaged` says
//      whether the storage holds a value; it is written only by the send
//      (exclusive) or by the single receiver S3 designates.
template <class T>
class Slot {
 public:
  static constexpr std::uint64_t kWriting = 1;
  static constexpr std::uint64_t kOneReader = 2;
  static constexpr std::uint64_t kReadersMask = 0xFFFF'FFFEu;
  static constexpr int kRemainingShift = 32;
  static constexpr std::uint64_t kOneRemaining = std::uint64_t{1} << kRemainingShift;
  static_assert((kReadersMask & kWriting) == 0 && (kReadersMask & kOneRemaining) == 0);

  static constexpr std::uint64_t readers(std::uint64_t s) noexcept {
    return (s & kReadersMask) >> 1;
  }
  static constexpr std::uint64_t remaining(std::uint64_t s) noexcept {
    return s >> kRemainingShift;
  }

  explicit Slot(std::uint64_t initial_pos) noexcept : pos_(initial_pos) {}
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;
  ~Slot() {
    if (engaged_) value()->~T();
  }

  // The position this slot was last written for. relaxed: a hint outside
  // the slot (see read()); inside, entering gives the ordering (S1), and
  // under Core::lock the lock does.
  std::uint64_t pos() const noexcept { return pos_.load(std::memory_order_relaxed); }

  // Receives the value at position `want` into `out` if this slot holds it
  // and no send is replacing it. False (nothing changed) otherwise: the
  // caller settles it under Core::lock. May throw from T's copy
  // constructor, with nothing consumed.
  bool read(std::uint64_t want, std::optional<T>& out) {
    // A position check before entering: the empty and lagged cases (pos !=
    // want) cost no RMW. A stale value only sends us to the locked path.
    if (pos() != want) return false;
    const std::uint64_t s = enter();
    if ((s & kWriting) || pos() != want) {
      leave(0);
      return false;
    }
    if (remaining(s) == 1) {
      // The last receiver to read it (S3): take it by move. nothrow.
      out.emplace(std::move(*value()));
      value()->~T();
      engaged_ = false;
      leave(kOneRemaining);
      return true;
    }
    struct LeaveOnThrow {
      Slot* slot;
      ~LeaveOnThrow() {
        if (slot) slot->leave(0);  // the copy threw: leave it unread
      }
    } guard{this};
    out.emplace(*value());
    guard.slot = nullptr;
    if (remaining(leave(kOneRemaining)) == 1) destroy_unread(want);
    return true;
  }

  // A receiver at `want` that will never read it (dropped): counts it as
  // read, destroying the value if it was the last one to read it.
  void discard(std::uint64_t want) noexcept {
    if (pos() != want) return;
    const std::uint64_t s = enter();
    if ((s & kWriting) || pos() != want) {
      leave(0);  // overwritten (or being): the send drops the value
      return;
    }
    const bool last = remaining(s) == 1;
    if (last) {
      value()->~T();
      engaged_ = false;
    }
    if (remaining(leave(kOneRemaining)) == 1 && !last) destroy_unread(want);
  }

  // Core::lock held, and a receiver copy at a position <= pos is being made
  // (S2). relaxed: remaining is only a count; the RMW cannot lose another
  // reader's update, and the readers' own RMWs order their accesses.
  void add_reader() noexcept { state_.fetch_add(kOneRemaining, std::memory_order_relaxed); }

  // Core::lock held (so no other send runs): replaces the value with
  // `incoming` for position `position`, to be read by `receivers` receivers.
  void write(std::uint64_t position, T& incoming, std::uint64_t receivers) noexcept {
    // acquire: pairs with the release of each reader's leave(), so their
    // reads of the old value and pos happen before we replace them (S1).
    std::uint64_t s = state_.fetch_or(kWriting, std::memory_order_acquire);
    volt::detail::SpinWait backoff;
    while (readers(s) != 0) {
      // Readers inside are copying a value (bounded work), or entered after
      // the bit and are about to leave. The backoff yields once the pauses
      // are used up, so that a preempted reader on this core gets to finish.
      backoff.once();
      s = state_.load(std::memory_order_acquire);  // acquire: as for the fetch_or
    }
    // readers == 0 with kWriting set: nobody reads and nobody enters for
    // good (S1), and `remaining` cannot change (only readers inside and
    // copies under Core::lock change it).
    if (engaged_) value()->~T();  // a lagging receiver never read it
    ::new (static_cast<void*>(storage_)) T(std::move(incoming));
    engaged_ = true;
    pos_.store(position, std::memory_order_relaxed);  // published by the RMW below
    // One RMW sets remaining to `receivers` and clears kWriting, leaving the
    // reader count alone (readers that saw kWriting are backing out).
    // release: pairs with enter()'s acquire; a reader that enters after it
    // sees the new value, pos and engaged_.
    state_.fetch_add(((receivers - remaining(s)) << kRemainingShift) - kWriting,
                     std::memory_order_release);
  }

  // The count of receivers still to read (Sender::len). relaxed: a count
  // reported to the caller, ordering nothing.
  std::uint64_t remaining_now() const noexcept {
    return remaining(state_.load(std::memory_order_relaxed));
  }

 private:
  std::uint64_t enter() noexcept {
    // acquire: pairs with write()'s release RMW (we see the value it wrote)
    // and with earlier readers' release leave() (S3: the last reader moves
    // or destroys the value only after every other read of it).
    return state_.fetch_add(kOneReader, std::memory_order_acquire);
  }
  // Leaves, counting the value as read when `read` is kOneRemaining.
  // Returns the state before. acq_rel: release pairs with write()'s acquire
  // (our reads happen before the value is replaced) and with later readers'
  // enter(); acquire, for the reader that takes remaining to 0, pairs with
  // the other readers' release (their copies happen before our destroy).
  std::uint64_t leave(std::uint64_t read) noexcept {
    return state_.fetch_sub(kOneReader + read, std::memory_order_acq_rel);
  }
  // Our leave() took remaining from 1 to 0 after a copy: another reader
  // that entered with remaining > 1 read it too, and none moved it out (S3).
  // Destroy it unless a send is replacing it (it destroys it then).
  void destroy_unread(std::uint64_t want) noexcept {
    const std::uint64_t s = enter();
    if (!(s & kWriting) && pos() == want && remaining(s) == 0 && engaged_) {
      value()->~T();
      engaged_ = false;
    }
    leave(0);
  }
  T* value() noexcept { return std::launder(reinterpret_cast<T*>(storage_)); }

  std::atomic<std::uint64_t> state_{0};
  // Written only by write() (relaxed, published by its release RMW).
  std::atomic<std::uint64_t> pos_;
  bool engaged_ = false;  // see S3 for who may touch it
  alignas(T) unsigned char storage_[sizeof(T)];
};

// The channel: Core (on its own cache line: sends write it), the handle
// counts, and the ring, allocated as one block with the slots after it.
template <class T>
class Shared {
 public:
  static Shared* create(std::size_t requested) {
    if (requested == 0 || requested > kMaxCapacity)
      throw Error(errc::invalid_argument, "broadcast::channel: capacity must be 1..kMaxCapacity");
    const std::size_t capacity = std::bit_ceil(requested);
    void* memory = ::operator new(slots_offset() + capacity * sizeof(Slot<T>), kAlign);
    return ::new (memory) Shared(capacity);
  }

  std::size_t capacity() const noexcept { return mask_ + 1; }
  Slot<T>& slot(std::uint64_t position) noexcept {
    return slots()[static_cast<std::size_t>(position & mask_)];
  }

  // ---- handle counts ----
  void retain() noexcept {
    // relaxed: the caller holds a reference already (as shared_ptr).
    refs_.fetch_add(1, std::memory_order_relaxed);
  }
  void release() noexcept {
    // acq_rel: the last owner sees every other owner's accesses before
    // freeing (the shared_ptr argument).
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      this->~Shared();
      ::operator delete(static_cast<void*>(this), kAlign);
    }
  }
  void add_sender() noexcept {
    // relaxed: a live Sender is being copied, so the count is not 0 and
    // cannot reach 0 meanwhile.
    senders_.fetch_add(1, std::memory_order_relaxed);
    retain();
  }
  void drop_sender() noexcept {
    // acq_rel: the last Sender's RMW acquires every other Sender's release
    // (their sends happen before the close it makes, so no value can
    // follow errc::closed).
    if (senders_.fetch_sub(1, std::memory_order_acq_rel) == 1) core_.close();
    release();
  }

  // A new receiver at the send position (subscribe, resubscribe).
  std::uint64_t add_receiver() {
    core_.lock.lock();
    if (core_.receivers == kMaxReceivers) {
      core_.lock.unlock();
      throw Error(errc::invalid_argument, "broadcast: more than kMaxReceivers receivers");
    }
    ++core_.receivers;
    const std::uint64_t next = core_.tail;
    core_.lock.unlock();
    retain();
    return next;
  }
  // A copy of the receiver at `next`: counted in every unread value (S2).
  void copy_receiver(std::uint64_t next) {
    core_.lock.lock();
    if (core_.receivers == kMaxReceivers) {
      core_.lock.unlock();
      throw Error(errc::invalid_argument, "broadcast: more than kMaxReceivers receivers");
    }
    ++core_.receivers;
    for (std::uint64_t p = oldest_kept(next); p != core_.tail; ++p)
      slot(p).add_reader();
    core_.lock.unlock();
    retain();
  }
  // The receiver at `next` is gone: not counted by later sends, and every
  // value it was counted in and did not read is counted as read.
  void drop_receiver(std::uint64_t next) noexcept {
    core_.lock.lock();
    const bool last = --core_.receivers == 0;
    const std::uint64_t until = core_.tail;
    const std::uint64_t from = oldest_kept(next);
    core_.lock.unlock();
    // Outside the lock (values may be destroyed here). The lock made every
    // send before `until` visible; sends after it do not count us, and a
    // value they overwrite meanwhile is skipped (discard checks pos).
    for (std::uint64_t p = from; p != until; ++p)
      slot(p).discard(p);
    // After the count reached 0 (under Core::lock, which the waiters'
    // condition takes too): the senders' closed() (closed_event.hpp's
    // argument). Before release(): our reference keeps the event alive.
    if (last) rx_gone_.notify_all();
    release();
  }

  // The senders' closed(): completes once no receiver is left (a later
  // subscribe() makes a woken wait wait again, as Tokio's loop does).
  volt::detail::ClosedWait closed_wait() noexcept {
    return volt::detail::ClosedWait(&rx_gone_, &no_receivers, this);
  }

  // Hands `value` to every receiver. False (value untouched) if none.
  bool send(T& value) noexcept {
    core_.lock.lock();
    if (core_.receivers == 0) {
      core_.lock.unlock();
      return false;
    }
    const std::uint64_t position = core_.tail;
    slot(position).write(position, value, core_.receivers);
    core_.tail = position + 1;
    if (core_.has_waiters_locked()) {
      core_.wake_all_and_unlock();
    } else {
      core_.lock.unlock();
    }
    return true;
  }

  // Receives into `result` for the receiver at `next` (advancing it).
  void recv(std::uint64_t& next, RecvResult<T>& result) {
    if (slot(next).read(next, result.value_)) {
      ++next;
      return;
    }
    recv_locked(next, result);
  }

  // Whether a receive at `next` can complete now; a lock-free hint (false
  // may still be ready: Core::enqueue decides under the lock).
  bool probably_ready(std::uint64_t next) noexcept { return slot(next).pos() == next; }

  std::uint64_t receiver_count() noexcept {
    core_.lock.lock();
    const std::uint64_t n = core_.receivers;
    core_.lock.unlock();
    return n;
  }
  // Values still to be read by some receiver alive when they were sent
  // (Tokio's Sender::len). In ring order from the oldest slot, `remaining`
  // never decreases (receivers read in order, a subscription counts only
  // later values, a copy counts a suffix), so the first slot with
  // remaining > 0 is found by bisection.
  std::size_t queued() noexcept {
    core_.lock.lock();
    const std::uint64_t base = core_.tail;  // slot(base) is the oldest
    std::size_t low = 0;
    std::size_t high = capacity();
    while (low < high) {
      const std::size_t mid = low + (high - low) / 2;
      if (slot(base + mid).remaining_now() == 0) {
        low = mid + 1;
      } else {
        high = mid;
      }
    }
    core_.lock.unlock();
    return capacity() - low;
  }
  std::uint64_t unread(std::uint64_t next) noexcept {
    core_.lock.lock();
    const std::uint64_t n = core_.tail - next;
    core_.lock.unlock();
    return n;
  }

  Core& core() noexcept { return core_; }

 private:
  static constexpr std::size_t kAlignBytes = alignof(Slot<T>) > 64 ? alignof(Slot<T>) : 64;
  static constexpr std::align_val_t kAlign{kAlignBytes};
  static constexpr std::size_t slots_offset() noexcept {
    return (sizeof(Shared) + alignof(Slot<T>) - 1) / alignof(Slot<T>) * alignof(Slot<T>);
  }

  explicit Shared(std::size_t capacity) noexcept : mask_(capacity - 1) {
    core_.receivers = 1;  // the channel's first Receiver
    // Slot i first holds position i. Its initial pos, i - capacity (mod
    // 2^64), is one lap before: never a position a receiver waits for.
    for (std::size_t i = 0; i < capacity; ++i)
      ::new (static_cast<void*>(slots() + i)) Slot<T>(static_cast<std::uint64_t>(i) - capacity);
  }
  ~Shared() {
    for (std::size_t i = 0; i < capacity(); ++i)
      slots()[i].~Slot<T>();
  }
  Slot<T>* slots() noexcept {
    return std::launder(
        reinterpret_cast<Slot<T>*>(reinterpret_cast<unsigned char*>(this) + slots_offset()));
  }

  // Core::lock held: the oldest position still in the ring for a receiver
  // at `next` (later than next if it lags).
  std::uint64_t oldest_kept(std::uint64_t next) const noexcept {
    const std::uint64_t tail = core_.tail;
    return tail - next > mask_ + 1 ? tail - (mask_ + 1) : next;
  }

  // The receive that read() could not settle: under the lock no send runs,
  // so the slot of a position in [tail - capacity, tail) holds it.
  void recv_locked(std::uint64_t& next, RecvResult<T>& result) {
    core_.lock.lock();
    const std::uint64_t tail = core_.tail;
    if (next == tail) {
      result.error_ = core_.closed ? errc::closed : errc::empty;
      core_.lock.unlock();
      return;
    }
    if (tail - next > capacity()) {
      // Lagged: everything before tail - capacity was overwritten.
      const std::uint64_t oldest = tail - capacity();
      result.error_ = errc::lagged;
      result.missed_ = oldest - next;
      next = oldest;
      core_.lock.unlock();
      return;
    }
    struct Unlock {
      Core* core;
      ~Unlock() { core->lock.unlock(); }  // also when the copy throws
    } unlock{&core_};
    // Sent after read() looked (or a send was replacing the slot's previous
    // value then): it is there now, and cannot be replaced while we hold
    // the lock. read() cannot fail here.
    if (slot(next).read(next, result.value_)) ++next;
  }

  static bool no_receivers(const void* shared) noexcept {
    // The count is guarded by Core::lock; taking it is the condition's read.
    return const_cast<Shared*>(static_cast<const Shared*>(shared))->receiver_count() == 0;
  }

  const std::uint64_t mask_;  // capacity - 1
  // Senders + Receivers; the block is freed with the last.
  std::atomic<std::uint64_t> refs_{2};
  std::atomic<std::uint64_t> senders_{1};
  alignas(64) Core core_;
  // Senders waiting in closed(); notified by the last receiver's drop.
  volt::detail::ClosedEvent rx_gone_;
};

}  // namespace detail

template <class T>
class Sender {
  static_assert(std::is_copy_constructible_v<T>, "broadcast values are copied to each receiver");
  static_assert(std::is_nothrow_move_constructible_v<T>,
                "broadcast::send moves the value into its slot under the channel's lock");

 public:
  Sender() noexcept = default;  // as a moved-from Sender
  Sender(const Sender& other) noexcept : shared_(other.shared_) {
    if (shared_) shared_->add_sender();
  }
  Sender(Sender&& other) noexcept : shared_(std::exchange(other.shared_, nullptr)) {}
  Sender& operator=(const Sender& other) noexcept {
    if (this != &other) *this = Sender(other);
    return *this;
  }
  Sender& operator=(Sender&& other) noexcept {
    if (this != &other) {
      reset();
      shared_ = std::exchange(other.shared_, nullptr);
    }
    return *this;
  }
  ~Sender() { reset(); }

  // Hands a copy of `value` to every receiver (overwriting the oldest value
  // if the ring is full). Fails with errc::closed and the value back when
  // there is no receiver (or this Sender is moved-from). Never waits.
  SendResult<T> send(T value) {
    if (shared_ && shared_->send(value)) return SendResult<T>();
    return SendResult<T>(errc::closed, std::move(value));
  }

  // A receiver of the values sent after this call.
  Receiver<T> subscribe() {
    if (!shared_) return Receiver<T>();
    return Receiver<T>(shared_, shared_->add_receiver());
  }

  std::uint64_t receiver_count() const noexcept { return shared_ ? shared_->receiver_count() : 0; }
  // Values in the ring not yet read by every receiver that was alive when
  // they were sent (an overwritten value no longer counts).
  std::size_t len() const noexcept { return shared_ ? shared_->queued() : 0; }
  bool is_empty() const noexcept { return len() == 0; }
  // The ring's size: the requested capacity rounded up to a power of two.
  std::size_t capacity() const noexcept { return shared_ ? shared_->capacity() : 0; }

  // co_await completes (void) once no receiver is left, at once if none is
  // (or this Sender is moved-from). Woken by the last receiver's drop, it
  // checks again: if a receiver was subscribed meanwhile it goes on waiting
  // (Tokio's). Any number of senders may wait; waiting allocates nothing; a
  // destroyed wait is withdrawn. It must not outlive this Sender.
  //   co_await tx.closed();  // nobody listens any more: stop producing
  using Closed = volt::detail::ClosedWait;
  Closed closed() noexcept {
    return shared_ ? shared_->closed_wait() : Closed(nullptr, nullptr, nullptr);
  }

 private:
  template <class U>
  friend std::pair<Sender<U>, Receiver<U>> channel(std::size_t capacity);
  explicit Sender(detail::Shared<T>* shared) noexcept : shared_(shared) {}
  void reset() noexcept {
    if (auto* shared = std::exchange(shared_, nullptr)) shared->drop_sender();
  }

  detail::Shared<T>* shared_ = nullptr;
};

template <class T>
class Receiver {
 public:
  class Recv;

  Receiver() noexcept = default;  // as a moved-from Receiver
  // A new receiver at this one's position (it receives what this one has
  // not yet read, and later values).
  Receiver(const Receiver& other) : shared_(other.shared_), next_(other.next_) {
    if (shared_) shared_->copy_receiver(next_);
  }
  Receiver(Receiver&& other) noexcept
      : shared_(std::exchange(other.shared_, nullptr)), next_(other.next_) {}
  Receiver& operator=(const Receiver& other) {
    if (this != &other) *this = Receiver(other);
    return *this;
  }
  Receiver& operator=(Receiver&& other) noexcept {
    if (this != &other) {
      reset();
      shared_ = std::exchange(other.shared_, nullptr);
      next_ = other.next_;
    }
    return *this;
  }
  ~Receiver() { reset(); }

  // A new receiver of the values sent after this call.
  Receiver resubscribe() const {
    if (!shared_) return Receiver();
    return Receiver(shared_, shared_->add_receiver());
  }

  // The next value, or errc::empty / errc::lagged (missed()) / errc::closed.
  // Never waits.
  RecvResult<T> try_recv() {
    RecvResult<T> result;
    if (!shared_) {
      result.error_ = errc::closed;
    } else {
      shared_->recv(next_, result);
    }
    return result;
  }

  // co_await gives RecvResult<T>: a value, errc::lagged or errc::closed.
  Recv recv() noexcept { return Recv(*this); }

  // Blocks the calling (non-runtime) thread for the next value, lag or close.
  RecvResult<T> recv_blocking() {
    volt::detail::check_blocking_allowed("broadcast::Receiver::recv_blocking on a runtime thread");
    for (;;) {
      RecvResult<T> result = try_recv();
      if (!result.is_empty()) return result;
      detail::Waiter waiter;
      if (!shared_->core().enqueue(waiter, volt::detail::current_thread_waker(), next_)) continue;
      // acquire: pairs with the waking send's release store of `woken`.
      while (!waiter.woken.load(std::memory_order_acquire))
        volt::detail::park_current_thread();
    }
  }

  // Values sent that this receiver has not received (more than the
  // capacity when it lags).
  std::uint64_t len() const noexcept { return shared_ ? shared_->unread(next_) : 0; }
  bool is_empty() const noexcept { return len() == 0; }

 private:
  friend class Sender<T>;
  template <class U>
  friend std::pair<Sender<U>, Receiver<U>> channel(std::size_t capacity);
  Receiver(detail::Shared<T>* shared, std::uint64_t next) noexcept : shared_(shared), next_(next) {}
  void reset() noexcept {
    if (auto* shared = std::exchange(shared_, nullptr)) shared->drop_receiver(next_);
  }

  detail::Shared<T>* shared_ = nullptr;
  std::uint64_t next_ = 0;  // the position of the next value to receive
};

// The operation of Receiver::recv(). Holds its waiter; cancelled by
// destruction. May be moved only while not queued (before it is awaited).
template <class T>
class [[nodiscard]] Receiver<T>::Recv {
 public:
  explicit Recv(Receiver& receiver) noexcept : receiver_(&receiver) {}
  Recv(Recv&& other) noexcept : receiver_(other.receiver_) {
    if (other.core_) std::terminate();  // a queued waiter cannot move
  }
  Recv(const Recv&) = delete;
  Recv& operator=(const Recv&) = delete;
  Recv& operator=(Recv&&) = delete;
  ~Recv() {
    // acquire: pairs with the waking send's release store; once woken, the
    // send has unlinked the waiter and no longer touches it.
    if (core_ && !waiter_.woken.load(std::memory_order_acquire)) core_->cancel(waiter_);
  }

  bool await_ready() {
    if (core_) {
      // Awaited again while queued (an lvalue operand of a timeout that
      // expired): keep the place; if a send woke it meanwhile, go on.
      if (!waiter_.woken.load(std::memory_order_acquire)) return false;  // acquire: as in ~Recv
      core_ = nullptr;
    }
    if (!receiver_->shared_) return true;  // moved-from: closed
    // The budget before taking a value: a task whose budget is spent yields
    // having taken nothing, and makes its first attempt from ready_check.
    yielding_ = !volt::detail::coop_try_consume();
    if (yielding_) return false;
    return receiver_->shared_->probably_ready(receiver_->next_);
  }
  bool await_suspend(std::coroutine_handle<> self) {
    if (yielding_) {
      volt::detail::yield_current(self, &ready_check, this);
      return true;
    }
    volt::detail::TaskHeader* task = volt::detail::suspend_current(self, &ready_check, this);
    // Still queued from an interrupted await: the waker names this task
    // (only the task that first awaited may await again), and a send that
    // wakes it now leaves the task notified, so the check passes.
    if (core_) return true;
    return enqueue(volt::detail::make_task_waker(task));
  }
  // After a wake-up the value (or lag, or close) is there: a send or close
  // woke us, after we queued at the send position, and only this Recv
  // advances the receiver.
  RecvResult<T> await_resume() {
    core_ = nullptr;  // resumed from waiting: woken, hence unlinked
    return receiver_->try_recv();
  }

 private:
  // Queues the waiter unless the receive can complete now. True if queued.
  bool enqueue(volt::detail::Waker waker) noexcept {
    detail::Core& core = receiver_->shared_->core();
    // relaxed: only this Recv reads it until it is queued (the lock
    // publishes the store with the link).
    waiter_.woken.store(false, std::memory_order_relaxed);
    if (!core.enqueue(waiter_, std::move(waker), receiver_->next_)) return false;
    core_ = &core;
    return true;
  }
  // The readiness check (ResumeSlot): once queued, whether a send woke us;
  // after a budget yield, the first attempt (the task is current, so it can
  // queue itself).
  static bool ready_check(void* context) noexcept {
    Recv& self = *static_cast<Recv*>(context);
    if (self.core_) return self.waiter_.woken.load(std::memory_order_acquire);  // as in ~Recv
    if (!self.yielding_) return true;
    self.yielding_ = false;
    if (self.receiver_->shared_->probably_ready(self.receiver_->next_)) return true;
    return !self.enqueue(volt::detail::make_task_waker(volt::detail::tls_context.current_task));
  }

  Receiver* receiver_;
  detail::Waiter waiter_;
  detail::Core* core_ = nullptr;  // set while waiter_ is queued (or woken, not yet seen)
  bool yielding_ = false;
};

// A channel keeping the newest bit_ceil(capacity) values, with one Sender and
// one Receiver. Throws volt::Error(errc::invalid_argument) for capacity 0 or
// above kMaxCapacity.
template <class T>
std::pair<Sender<T>, Receiver<T>> channel(std::size_t capacity) {
  auto* shared = detail::Shared<T>::create(capacity);
  return {Sender<T>(shared), Receiver<T>(shared, 0)};
}

}  // namespace volt::broadcast

// Tokio's path (tokio::sync::broadcast).
namespace volt::sync {
namespace broadcast = volt::broadcast;
}  // namespace volt::sync
