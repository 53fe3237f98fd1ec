// volt/channel/unbounded.hpp: a multi-producer single-consumer channel
// without a capacity (Tokio's mpsc::unbounded_channel).
//
//   auto [tx, rx] = volt::mpsc::unbounded_channel<Job>();
//   volt::spawn(worker(tx));                     // senders are copied (cloned)
//   if (!tx.send(job)) { /* errc::closed: nobody will receive; r.take_back() */ }
//   while (std::optional<Job> job = co_await rx.recv()) run(*job);
//   // nullopt: every sender is gone (or rx.close() was called), all drained
//   std::vector<Job> batch;                     // or a batch per wake-up:
//   while (std::size_t n = co_await rx.recv_many(batch, 64)) { run_all(batch); batch.clear(); }
//   co_await tx.closed();                        // (a producer) the receiver is gone
//
// Guarantees:
//  - send() never waits and never fails for lack of room. It fails, handing
//    the value back in the SendResult (errc::closed), once the receiver is
//    gone or close() was called; a value it accepted is received, unless the
//    receiver is dropped first (then it is destroyed with the channel).
//  - FIFO per sender: values sent by one sender (or by one thread through
//    several senders) are received in the order sent. Values of different
//    senders are received in the order their sends claimed a slot.
//  - recv() (co_await) gives the next value, waiting if there is none, or
//    std::nullopt once the channel is closed (every sender gone, or close())
//    and everything sent before has been received. It is cancel-safe: a Recv
//    destroyed while it waits (abort, timeout, select) has taken nothing, so
//    no value is lost. An lvalue Recv interrupted by a timeout may be awaited
//    again by the same task; it keeps its registration.
//  - recv_many(out, limit) (co_await gives std::size_t) waits as recv() does,
//    then appends to `out` up to `limit` values that are ready, in order,
//    with one wake-up; 0 once the channel is closed and drained, and 0 at
//    once for limit == 0. Cancel-safe as recv(): values move into `out` only
//    when it completes. If appending throws (allocation, T's move), the
//    exception propagates and the value being appended stays in the channel.
//  - Sender::closed() (co_await, void) completes once the receiver is gone
//    or called close(): at once if it already has. Any number of senders may
//    wait at once; waiting allocates nothing; a destroyed wait is withdrawn.
//  - try_recv() never waits: the value, or errc::empty (open, nothing ready),
//    or errc::closed (closed and drained). A send running concurrently on
//    another thread may not be visible to try_recv until it has finished.
//  - recv_blocking() is recv() for plain threads; on a runtime thread it
//    throws volt::Error(errc::blocking_in_runtime).
//  - close(): later sends fail; what was sent before stays receivable, then
//    recv() gives std::nullopt. Dropping the receiver closes the channel and
//    destroys the values still in it.
//  - Allocation: the channel is one allocation; values are stored in blocks
//    of 32 slots, one allocation per block (from the recycling frame pool),
//    never one per message. The receiver keeps up to two emptied blocks
//    linked ahead of the senders for reuse, so steady-state send/recv does
//    not allocate. Waiting allocates nothing.
//  - Senders never take a lock: a send is one fetch_add (claiming a slot),
//    the value's move, a release store, a fence and a load.
//  - Bad input: a default-constructed or moved-from handle is closed:
//    send() hands the value back with errc::closed, recv()/recv_blocking()
//    give std::nullopt, recv_many() gives 0, closed() completes at once,
//    try_recv() gives errc::closed, is_closed() is true. If T's move
//    constructor throws inside send(), the exception propagates and nothing
//    is delivered (the claimed slot is skipped). Running out of memory for
//    a new block terminates (a claimed slot cannot be given back).
// Preconditions (undefined behaviour otherwise): the receiver is used by one
// thread at a time and outlives its Recv / RecvMany operations (one waits at
// a time); an interrupted one is awaited again only by the task that first
// awaited it. A Closed operation does not outlive the sender that made it.
//
// Protocol (the implementation's top comment, below, has the argument):
// senders claim slot numbers with one fetch_add on `tail_` (whose low bit is
// the closed flag) and publish a slot with a per-slot ready flag; the single
// receiver reads slots in order. The receiver's wait is a one-slot
// AtomicWaker with a store-load barrier on each side (Dekker).
#pragma once

#include <atomic>
#include <cassert>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "volt/channel/send_result.hpp"
#include "volt/detail/atomic_waker.hpp"
#include "volt/detail/blocking_wait.hpp"
#include "volt/detail/closed_event.hpp"
#include "volt/detail/frame_allocator.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/detail/waker.hpp"
#include "volt/error.hpp"
#include "volt/expected.hpp"
#include "volt/task/join_handle.hpp"

namespace volt::mpsc {

template <class T>
class UnboundedSender;
template <class T>
class UnboundedReceiver;

namespace detail {

// ---- the protocol ----
//
// Slots. Slot i (i = 0, 1, 2, ...) lives in the block whose `start` is
// i - i % kBlockSlots. Blocks form a singly linked list, oldest first:
//   free_head_ -> ... -> head_block_ -> ... -> tail_block_ -> ... -> end
// (receiver-owned)      (receiver reads)      (senders start)   (spares)
//
// Sending: one fetch_add on tail_ claims slot number tail_ >> 1 (bit 0 is
// kClosed; a claim whose old value has it fails and claims nothing usable).
// The sender walks from tail_block_ to the block of its slot, linking a new
// block at the end where the list stops (or using one linked by someone
// else), moves the value in and stores the slot's ready flag (release).
// Then AtomicWaker::wake() (W1).
//
// Receiving: the receiver reads slot head_: ready flag acquire-loaded; value
// moved out. It owns head_, head_block_, free_head_ and the blocks before
// head_block_. Empty: tail_ shows kClosed and head_ reached the bound
// (closed_at_ if the receiver closed, else the claim count: with every
// sender gone nobody claims any more) -> closed; otherwise empty.
//
// Invariants:
//   B1  tail_block_ never passes a block with an unpublished slot: a sender
//       moves tail_block_ from B to B.next only if every ready flag of B is
//       set. A sender's slot is unpublished until it has found its block,
//       so the tail_block_ it loads (after claiming) is at or before it.
//   B2  A block is recycled (or freed) only when no sender can still be
//       walking it. The sender that moved tail_block_ past B records in
//       B.released_at the claim count after that move, read with an RMW
//       (tail_.fetch_add(0), release). A sender walking B loaded
//       tail_block_ <= B, so before the move; it claimed before that load;
//       had its claim (an acquire RMW) come after the release RMW in tail_'s
//       order, it would synchronise with it and its load would see the
//       move. So its slot number is below released_at. The receiver recycles
//       B only once head_ >= released_at, i.e. after acquiring that slot's
//       ready flag, which the sender stores after its walk.
//   B3  Recycled blocks are appended at the end of the list (CAS on the last
//       next pointer, release: their reset flags and new start go with it),
//       at most kMaxSpareWalk links past tail_block_, else freed. The
//       receiver is the only one that recycles or frees a linked block, and
//       never one at or after tail_block_ (those are not released).
//   W1  No lost wake-up: the receiver arms its waker (AtomicWaker::arm ends
//       with a store-load barrier), then re-reads slot head_ (its ready flag,
//       or the next pointer leading to its block) and tail_. A sender stores
//       the ready flag (and the last sender's drop sets kClosed), then calls
//       AtomicWaker::wake (which starts with the barrier and then loads the
//       waker state). In the barriers' total order one comes first: if the
//       receiver's, the sender's load sees the armed waker (or a later state:
//       another sender is waking it); if the sender's, the receiver's reads
//       see the flag, the link and the closed bit (all happen before the
//       sender's barrier).
inline constexpr std::size_t kBlockSlots = 32;  // Tokio's block size; a guess
static_assert((kBlockSlots & (kBlockSlots - 1)) == 0);
// How far past tail_block_ the receiver links a recycled block before it
// frees it instead: two spare blocks absorb steady traffic; more would keep
// a burst's memory for a burst that may not recur (a guess).
inline constexpr int kMaxSpareWalk = 2;

enum : std::uint8_t {
  kSlotEmpty = 0,    // not published yet (or recycled)
  kSlotValue = 1,    // holds a value
  kSlotSkipped = 2,  // claimed by a send whose move constructor threw
};

inline constexpr std::uint64_t kNotReleased = ~std::uint64_t{0};

template <class T>
struct Block {
  // Index of slot 0. Written while the block is private (new, or being
  // recycled), published by the release CAS that links it.
  std::uint64_t start = 0;
  std::atomic<Block*> next{nullptr};
  // kNotReleased, or the claim count when tail_block_ moved past (B2).
  std::atomic<std::uint64_t> released_at{kNotReleased};
  // Release store by the sender of the slot, acquire load by the receiver.
  std::atomic<std::uint8_t> ready[kBlockSlots]{};
  alignas(T) unsigned char storage[kBlockSlots][sizeof(T)];

  T* slot(std::size_t i) noexcept { return std::launder(reinterpret_cast<T*>(storage[i])); }
  // Every slot published (B1). relaxed: only the flags' values matter here;
  // the receiver acquires each flag itself before it recycles the block.
  bool is_final() const noexcept {
    for (const auto& flag : ready)
      if (flag.load(std::memory_order_relaxed) == kSlotEmpty) return false;
    return true;
  }

  static Block* allocate(std::uint64_t start) noexcept {
    // noexcept: a sender that claimed a slot cannot give it back, so running
    // out of memory here terminates.
    Block* block;
    if constexpr (alignof(Block) > __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
      block = new Block;
    } else {
      block = ::new (volt::detail::frame_allocate(sizeof(Block))) Block;
    }
    block->start = start;
    return block;
  }
  static void free(Block* block) noexcept {
    if constexpr (alignof(Block) > __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
      delete block;
    } else {
      block->~Block();
      volt::detail::frame_deallocate(block, sizeof(Block));
    }
  }
};

// The shared state: one per channel, freed by the last handle.
template <class T>
class Chan {
 public:
  enum class Peek { kValue, kEmpty, kClosed };

  Chan() : head_block_(Block<T>::allocate(0)) {
    free_head_ = head_block_;
    tail_block_.store(head_block_, std::memory_order_relaxed);
  }
  Chan(const Chan&) = delete;
  Chan& operator=(const Chan&) = delete;
  ~Chan() {
    // Last handle gone: every send has finished. Destroy what was never
    // received, free every block (spares too).
    Block<T>* block = free_head_;
    while (block) {
      for (std::size_t i = 0; i < kBlockSlots; ++i) {
        if (block->start + i >= head_ &&
            block->ready[i].load(std::memory_order_relaxed) == kSlotValue)
          block->slot(i)->~T();
      }
      Block<T>* next = block->next.load(std::memory_order_relaxed);
      Block<T>::free(block);
      block = next;
    }
  }

  // ---- references: each sender and the receiver hold one ----
  void retain() noexcept {
    // relaxed: the caller already holds a reference.
    refs_.fetch_add(1, std::memory_order_relaxed);
  }
  void release() noexcept {
    // acq_rel: the last holder sees every other holder's writes (the values
    // it destroys) before freeing, as shared_ptr.
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  void add_sender() noexcept {
    // relaxed: the caller is a sender, so the count cannot reach zero now.
    senders_.fetch_add(1, std::memory_order_relaxed);
  }
  void drop_sender() noexcept {
    // acq_rel: the last sender's kClosed must come after every other
    // sender's sends (their ready flags), which their decrements release.
    if (senders_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    // release: pairs with the receiver's acquire load of tail_ (empty_state):
    // seeing kClosed, it sees every slot published before.
    tail_.fetch_or(kClosed, std::memory_order_release);
    rx_waker_.wake();  // after the store: W1
  }

  // ---- senders ----

  // Delivers `value` (moving from it), or returns false, leaving it alone,
  // if the channel is closed.
  bool push(T& value) {
    // acquire: the claim must synchronise with a release fetch_add(0) it
    // follows (B2). No data is published by it.
    const std::uint64_t claimed = tail_.fetch_add(kClaimOne, std::memory_order_acquire);
    if (claimed & kClosed) return false;
    const std::uint64_t index = claimed >> kClaimShift;
    Block<T>* block = find_block(index);
    const std::size_t i = index % kBlockSlots;
    try {
      ::new (static_cast<void*>(block->storage[i])) T(std::move(value));
    } catch (...) {
      publish(block, i, kSlotSkipped);  // the receiver steps over it
      throw;
    }
    publish(block, i, kSlotValue);
    return true;
  }

  bool closed() const noexcept {
    // acquire: pairs with the release that set kClosed (nothing is read
    // after it, but a caller may act on "closed").
    return tail_.load(std::memory_order_acquire) & kClosed;
  }

  // ---- the receiver (one thread at a time) ----

  // What slot head_ holds. Skips slots whose send threw.
  Peek peek() noexcept {
    for (;;) {
      Block<T>* block = head_block_;
      if (head_ - block->start == kBlockSlots) {
        // acquire: pairs with the release CAS that linked it (start, reset
        // flags).
        Block<T>* next = block->next.load(std::memory_order_acquire);
        if (!next) return empty_state();
        head_block_ = next;
        reclaim();
        continue;
      }
      // acquire: pairs with the sender's release store (publish): the value.
      const std::uint8_t ready = block->ready[head_ % kBlockSlots].load(std::memory_order_acquire);
      if (ready == kSlotValue) return Peek::kValue;
      if (ready == kSlotEmpty) return empty_state();
      ++head_;  // kSlotSkipped
    }
  }

  // Precondition: peek() == kValue. Appends the value to `out`; if that
  // throws (allocation, T's move), the value stays in the channel.
  void take_into(std::vector<T>& out) {
    T* slot = head_block_->slot(head_ % kBlockSlots);
    out.push_back(std::move(*slot));
    slot->~T();
    ++head_;
    if (free_head_ != head_block_) reclaim();
  }

  // Precondition: peek() == kValue.
  T take() {
    T* slot = head_block_->slot(head_ % kBlockSlots);
    T value(std::move(*slot));
    slot->~T();
    ++head_;
    if (free_head_ != head_block_) reclaim();
    return value;
  }

  void close_rx() noexcept {
    if (rx_closed_) return;
    // relaxed: the bound comes from this RMW's own result (a claim ordered
    // after it sees kClosed and fails; one before it is below the bound).
    // Nothing is published.
    closed_at_ = tail_.fetch_or(kClosed, std::memory_order_relaxed) >> kClaimShift;
    rx_closed_ = true;
    // After the fetch_or: the senders' closed() waits read kClosed under the
    // event's lock, which orders them against this (closed_event.hpp).
    rx_gone_.notify_all();
  }

  // The senders' closed(): completes once kClosed is set. While a sender
  // lives only the receiver sets it (the last sender's drop sets it too, but
  // then no sender is left to wait).
  volt::detail::ClosedWait closed_wait() noexcept {
    return volt::detail::ClosedWait(&rx_gone_, &closed_condition, this);
  }

  // Destroys every value published so far (the receiver is going away),
  // in place: nothing is moved, so nothing can throw.
  void drain() noexcept {
    while (peek() == Peek::kValue) {
      head_block_->slot(head_ % kBlockSlots)->~T();
      ++head_;
    }
  }

  std::size_t len() const noexcept {
    // relaxed: a snapshot count; nothing is read through it.
    const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    std::uint64_t bound = tail >> kClaimShift;
    if (rx_closed_ && closed_at_ < bound) bound = closed_at_;
    return bound > head_ ? static_cast<std::size_t>(bound - head_) : 0;
  }

  // ---- the receiver's waker; `who` names the operation that waits (a
  // Recv, or recv_blocking) so that one never withdraws another's ----

  // Whether `who` armed the waker and no sender has taken it since.
  bool armed_for(const void* who) const noexcept { return armed_by_ == who && rx_waker_.armed(); }
  // Arms the waker for `who`. On kArmed the caller re-checks (W1).
  volt::detail::AtomicWaker::Arm arm_for(const void* who, volt::detail::Waker waker) noexcept {
    const volt::detail::AtomicWaker::Arm armed = rx_waker_.arm(std::move(waker));
    armed_by_ = armed == volt::detail::AtomicWaker::Arm::kArmed ? who : nullptr;
    return armed;
  }
  // Withdraws the waker if `who` armed it.
  void disarm_for(const void* who) noexcept {
    if (armed_by_ != who) return;
    armed_by_ = nullptr;
    rx_waker_.disarm();
  }

 private:
  static constexpr std::uint64_t kClosed = 1;
  static constexpr int kClaimShift = 1;
  static constexpr std::uint64_t kClaimOne = std::uint64_t{1} << kClaimShift;

  void publish(Block<T>* block, std::size_t i, std::uint8_t state) noexcept {
    // release: pairs with the receiver's acquire load in peek(). From here
    // on the block may be recycled: not touched again.
    block->ready[i].store(state, std::memory_order_release);
    rx_waker_.wake();  // after the store: W1
  }

  // The block of slot `index`, walking (and growing the list) from
  // tail_block_, and moving tail_block_ past complete blocks (B1, B2).
  Block<T>* find_block(std::uint64_t index) noexcept {
    const std::uint64_t start = index - index % kBlockSlots;
    // acquire: pairs with the release CAS that moved it (the block's start).
    Block<T>* block = tail_block_.load(std::memory_order_acquire);
    bool advancing = true;  // still at tail_block_, moving it along
    while (block->start != start) {
      // acquire: pairs with the release CAS that linked the next block.
      Block<T>* next = block->next.load(std::memory_order_acquire);
      if (!next) next = grow(block);
      if (advancing && block->is_final()) {
        Block<T>* expected = block;
        // release: pairs with find_block's acquire load (next's start).
        if (tail_block_.compare_exchange_strong(expected, next, std::memory_order_release,
                                                std::memory_order_relaxed)) {
          // release RMW: a claim ordered after it synchronises with it (B2).
          const std::uint64_t claims = tail_.fetch_add(0, std::memory_order_release) >> kClaimShift;
          // release: pairs with reclaim()'s acquire load.
          block->released_at.store(claims, std::memory_order_release);
        } else {
          advancing = false;  // someone else moves it
        }
      } else {
        advancing = false;
      }
      block = next;
    }
    return block;
  }

  // Links a new block after `block`, the last one. Returns the block that
  // follows `block` (ours, or the one another thread linked first).
  Block<T>* grow(Block<T>* block) noexcept {
    Block<T>* fresh = Block<T>::allocate(block->start + kBlockSlots);
    Block<T>* expected = nullptr;
    // acq_rel: release publishes fresh's fields to the acquire loads of
    // next; acquire (also on failure) makes the winner's block readable.
    if (block->next.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel,
                                            std::memory_order_acquire))
      return fresh;
    append(expected, fresh);  // a spare for later, or freed
    return expected;
  }

  // Links `spare` (private) at the end of the list, at most kMaxSpareWalk
  // links past `from`; frees it if the list is already that long.
  void append(Block<T>* from, Block<T>* spare) noexcept {
    Block<T>* last = from;
    int walked = 0;
    for (;;) {
      // acquire: pairs with the release CAS that linked it.
      Block<T>* next = last->next.load(std::memory_order_acquire);
      while (next) {
        if (++walked > kMaxSpareWalk) {
          Block<T>::free(spare);
          return;
        }
        last = next;
        next = last->next.load(std::memory_order_acquire);
      }
      spare->start = last->start + kBlockSlots;
      Block<T>* expected = nullptr;
      // release: publishes spare's start and reset fields (B3); acquire on
      // failure: the winner's block is walked next.
      if (last->next.compare_exchange_strong(expected, spare, std::memory_order_release,
                                             std::memory_order_acquire))
        return;
    }
  }

  Peek empty_state() const noexcept {
    // acquire: pairs with the last sender's release fetch_or (drop_sender).
    const std::uint64_t tail = tail_.load(std::memory_order_acquire);
    if (!(tail & kClosed)) return Peek::kEmpty;
    const std::uint64_t bound = rx_closed_ ? closed_at_ : tail >> kClaimShift;
    return head_ >= bound ? Peek::kClosed : Peek::kEmpty;
  }

  // Recycles the fully read blocks before head_block_ that no sender can
  // still be walking (B2).
  void reclaim() noexcept {
    while (free_head_ != head_block_) {
      Block<T>* block = free_head_;
      // acquire: pairs with the release store in find_block.
      const std::uint64_t released = block->released_at.load(std::memory_order_acquire);
      if (released == kNotReleased || released > head_) return;
      // relaxed: we followed this link (acquire) when head_ moved on.
      free_head_ = block->next.load(std::memory_order_relaxed);
      // Private again: reset it (the relaxed stores travel with append's
      // release CAS).
      block->next.store(nullptr, std::memory_order_relaxed);
      block->released_at.store(kNotReleased, std::memory_order_relaxed);
      for (auto& flag : block->ready)
        flag.store(kSlotEmpty, std::memory_order_relaxed);
      // acquire: pairs with the release CAS that moved tail_block_.
      append(tail_block_.load(std::memory_order_acquire), block);
    }
  }

  // ---- sender side (every send writes tail_) ----
  // Claim count << 1 | kClosed. Initial 0: open, nothing claimed.
  alignas(64) std::atomic<std::uint64_t> tail_{0};
  std::atomic<Block<T>*> tail_block_{nullptr};

  // ---- receiver side (owned by the receiver) ----
  alignas(64) Block<T>* head_block_;  // the block of slot head_ (or the one before it)
  std::uint64_t head_ = 0;            // the next slot to read
  Block<T>* free_head_;               // oldest block not yet recycled
  std::uint64_t closed_at_ = 0;       // claim count at close_rx()
  bool rx_closed_ = false;
  const void* armed_by_ = nullptr;  // who armed rx_waker_ (see arm_for)

  static bool closed_condition(const void* chan) noexcept {
    return static_cast<const Chan*>(chan)->closed();
  }

  // ---- the receiver's waker: read by every send ----
  alignas(64) volt::detail::AtomicWaker rx_waker_;

  // ---- handles ----
  alignas(64) std::atomic<std::size_t> refs_{2};  // the first sender, the receiver
  std::atomic<std::size_t> senders_{1};
  // Senders waiting in closed(); notified by close_rx (rarely touched).
  volt::detail::ClosedEvent rx_gone_;
};

}  // namespace detail

template <class T>
class UnboundedSender {
 public:
  // A closed handle (see the header contract).
  UnboundedSender() noexcept = default;
  // A clone: another sender of the same channel.
  UnboundedSender(const UnboundedSender& other) noexcept : chan_(other.chan_) {
    if (chan_) {
      chan_->retain();
      chan_->add_sender();
    }
  }
  UnboundedSender(UnboundedSender&& other) noexcept : chan_(std::exchange(other.chan_, nullptr)) {}
  UnboundedSender& operator=(UnboundedSender other) noexcept {
    std::swap(chan_, other.chan_);
    return *this;
  }
  ~UnboundedSender() { reset(); }

  // Queues `value`; never waits. errc::closed, with the value handed back, if
  // the receiver is gone or closed the channel (or this handle is empty).
  SendResult<T> send(T value) {
    if (chan_ && chan_->push(value)) return SendResult<T>();
    return SendResult<T>(errc::closed, std::move(value));
  }

  // True once send() fails: the receiver is gone or closed the channel.
  bool is_closed() const noexcept { return !chan_ || chan_->closed(); }

  // co_await completes (void) once the receiver is gone or has called
  // close(), at once if it already has (or this handle is empty). Waiting
  // allocates nothing; destroying the operation withdraws it. It must not
  // outlive this sender.
  //   co_await tx.closed();  // nobody will read what we produce: stop
  using Closed = volt::detail::ClosedWait;
  Closed closed() noexcept {
    return chan_ ? chan_->closed_wait() : Closed(nullptr, nullptr, nullptr);
  }

 private:
  template <class U>
  friend std::pair<UnboundedSender<U>, UnboundedReceiver<U>> unbounded_channel();
  explicit UnboundedSender(detail::Chan<T>* chan) noexcept : chan_(chan) {}
  void reset() noexcept {
    if (detail::Chan<T>* chan = std::exchange(chan_, nullptr)) {
      chan->drop_sender();
      chan->release();
    }
  }

  detail::Chan<T>* chan_ = nullptr;
};

template <class T>
class UnboundedReceiver {
  using Chan = detail::Chan<T>;
  using Peek = typename Chan::Peek;

 public:
  class Recv;
  class RecvMany;

  // A closed handle (see the header contract).
  UnboundedReceiver() noexcept = default;
  UnboundedReceiver(UnboundedReceiver&& other) noexcept
      : chan_(std::exchange(other.chan_, nullptr)) {}
  UnboundedReceiver& operator=(UnboundedReceiver&& other) noexcept {
    if (this != &other) {
      reset();
      chan_ = std::exchange(other.chan_, nullptr);
    }
    return *this;
  }
  UnboundedReceiver(const UnboundedReceiver&) = delete;
  UnboundedReceiver& operator=(const UnboundedReceiver&) = delete;
  ~UnboundedReceiver() { reset(); }

  // The next value; co_await gives std::optional<T> (nullopt: closed and
  // drained). See the header contract.
  Recv recv() noexcept { return Recv(chan_); }

  // Waits as recv() does for at least one value, then appends up to `limit`
  // of the values ready to `out`, with one wake-up; co_await gives how many
  // (std::size_t). 0 means closed and drained, or limit == 0 (returned at
  // once, without waiting or looking). Cancel-safe: values move into `out`
  // only when the operation completes; one destroyed earlier took nothing.
  // `out` must outlive the operation; what it held before is kept.
  RecvMany recv_many(std::vector<T>& out, std::size_t limit) noexcept {
    return RecvMany(chan_, out, limit);
  }

  // The next value if one is ready; errc::empty or errc::closed otherwise.
  Expected<T> try_recv() {
    if (!chan_) return Expected<T>(errc::closed);
    switch (chan_->peek()) {
      case Peek::kValue:
        return Expected<T>(chan_->take());
      case Peek::kEmpty:
        return Expected<T>(errc::empty);
      case Peek::kClosed:
        break;
    }
    return Expected<T>(errc::closed);
  }

  // recv() for a plain thread: blocks it until a value or the close.
  // Throws volt::Error(errc::blocking_in_runtime) on a runtime thread.
  std::optional<T> recv_blocking();

  // Later sends fail; values already sent stay receivable.
  void close() noexcept {
    if (chan_) chan_->close_rx();
  }
  // Closed by close() or by the last sender's drop (values may remain).
  bool is_closed() const noexcept { return !chan_ || chan_->closed(); }
  // Values sent and not yet received (counting sends still in progress).
  std::size_t len() const noexcept { return chan_ ? chan_->len() : 0; }
  bool is_empty() const noexcept { return len() == 0; }

 private:
  template <class U>
  friend std::pair<UnboundedSender<U>, UnboundedReceiver<U>> unbounded_channel();
  explicit UnboundedReceiver(Chan* chan) noexcept : chan_(chan) {}
  void reset() noexcept {
    if (Chan* chan = std::exchange(chan_, nullptr)) {
      chan->close_rx();
      chan->drain();
      chan->release();
    }
  }

  Chan* chan_ = nullptr;
};

namespace detail {

// The waiting shared by Recv and RecvMany: co_await waits until slot head_
// holds a value or the channel is closed and drained; the derived class's
// await_resume takes what it wants. Nothing is taken before await_resume, so
// a destroyed operation has taken nothing (it only withdraws its waker).
template <class T>
class RecvWait {
  using Peek = typename Chan<T>::Peek;

 public:
  RecvWait(const RecvWait&) = delete;
  RecvWait& operator=(const RecvWait&) = delete;
  RecvWait& operator=(RecvWait&&) = delete;

  bool await_ready() {
    if (!chan_) return true;
    // Awaited again after an interrupted wait: no new budget unit, and the
    // waker armed then is kept (arm_and_recheck).
    if (waiting_) return chan_->peek() != Peek::kEmpty;
    // The budget before the value: a task whose budget is spent yields
    // holding nothing, and looks again from the check.
    if (!volt::detail::coop_try_consume()) {
      yielding_ = true;
      return false;
    }
    return chan_->peek() != Peek::kEmpty;
  }
  bool await_suspend(std::coroutine_handle<> self) {
    if (yielding_) {
      yielding_ = false;
      volt::detail::yield_current(self, &ready_check, this);
      return true;
    }
    volt::detail::TaskHeader* task = volt::detail::suspend_current(self, &ready_check, this);
    return must_wait(task);
  }

 protected:
  explicit RecvWait(Chan<T>* chan) noexcept : chan_(chan) {}
  // Only before it is awaited (e.g. moved into a timeout).
  RecvWait(RecvWait&& other) noexcept : chan_(other.chan_) {}
  // Cancellation: nothing was taken; only the waker is withdrawn.
  ~RecvWait() { disarm(); }

  // await_resume's first step: the wait is over (a value or the close is
  // there: every path to await_resume saw one, and only this receiver
  // takes values).
  void disarm() noexcept {
    if (!waiting_) return;
    waiting_ = false;
    chan_->disarm_for(this);
  }

  Chan<T>* chan_;

 private:
  // Arms the receiver's waker for `task` (unless this operation's is still
  // armed), then re-checks (W1). True if the task must wait.
  bool must_wait(volt::detail::TaskHeader* task) noexcept {
    Chan<T>& chan = *chan_;
    waiting_ = true;
    if (!chan.armed_for(this) && chan.arm_for(this, volt::detail::make_task_waker(task)) ==
                                     volt::detail::AtomicWaker::Arm::kBusy) {
      // A sender is waking the previous waker right now: act as woken. We
      // hold the task (it is being polled), so this only marks it to be
      // polled again, which runs ready_check.
      task->wake_by_ref();
      return true;
    }
    return chan.peek() == Peek::kEmpty;  // the re-check after arming (W1)
  }

  // The task's readiness check (runs when it is polled): resume if a value
  // or the close is there; otherwise (re-)arm and stay.
  static bool ready_check(void* context) noexcept {
    RecvWait& self = *static_cast<RecvWait*>(context);
    if (self.chan_->peek() != Peek::kEmpty) return true;
    return !self.must_wait(volt::detail::tls_context.current_task);
  }

  bool waiting_ = false;   // armed (or tried to) and not yet resumed
  bool yielding_ = false;  // budget spent: the first look is in ready_check
};

}  // namespace detail

// The recv() operation: co_await gives std::optional<T>.
template <class T>
class [[nodiscard]] UnboundedReceiver<T>::Recv : public detail::RecvWait<T> {
 public:
  // Only before it is awaited (e.g. moved into a timeout).
  Recv(Recv&& other) noexcept = default;

  std::optional<T> await_resume() {
    if (!this->chan_) return std::nullopt;
    this->disarm();
    const Peek state = this->chan_->peek();
    // Never kEmpty here: every path to this point saw a value or the close,
    // and only this receiver takes values.
    assert(state != Peek::kEmpty);
    if (state == Peek::kValue) return std::optional<T>(this->chan_->take());
    return std::nullopt;
  }

 private:
  friend class UnboundedReceiver;
  explicit Recv(Chan* chan) noexcept : detail::RecvWait<T>(chan) {}
};

// The recv_many() operation: co_await gives the number of values appended.
template <class T>
class [[nodiscard]] UnboundedReceiver<T>::RecvMany : public detail::RecvWait<T> {
 public:
  // Only before it is awaited (e.g. moved into a timeout).
  RecvMany(RecvMany&& other) noexcept = default;

  bool await_ready() {
    if (limit_ == 0) return true;  // asks for nothing: 0 at once
    return detail::RecvWait<T>::await_ready();
  }
  std::size_t await_resume() {
    if (!this->chan_ || limit_ == 0) return 0;
    this->disarm();
    Chan& chan = *this->chan_;
    // One reservation for what is there now (at most limit_), so that the
    // loop below does not reallocate on the way. If it throws, nothing was
    // taken.
    const std::size_t ready = chan.len();
    out_->reserve(out_->size() + (ready < limit_ ? ready : limit_));
    std::size_t taken = 0;
    // The first peek is never kEmpty (see Recv::await_resume); the loop
    // stops at the first slot not published yet, or at limit_.
    while (taken < limit_ && chan.peek() == Peek::kValue) {
      chan.take_into(*out_);
      ++taken;
    }
    return taken;
  }

 private:
  friend class UnboundedReceiver;
  RecvMany(Chan* chan, std::vector<T>& out, std::size_t limit) noexcept
      : detail::RecvWait<T>(chan), out_(&out), limit_(limit) {}

  std::vector<T>* out_;
  std::size_t limit_;
};

template <class T>
std::optional<T> UnboundedReceiver<T>::recv_blocking() {
  if (!chan_) return std::nullopt;
  volt::detail::check_blocking_allowed("UnboundedReceiver::recv_blocking on a runtime thread");
  Chan& chan = *chan_;
  // Marks the waker as armed by this call (any unique address will do).
  const void* const self = &chan;
  for (;;) {
    const Peek state = chan.peek();
    if (state != Peek::kEmpty) {
      chan.disarm_for(self);
      if (state == Peek::kValue) return std::optional<T>(chan.take());
      return std::nullopt;
    }
    if (chan.arm_for(self, volt::detail::current_thread_waker()) ==
        volt::detail::AtomicWaker::Arm::kBusy) {
      // A sender is in the middle of waking an old waker: look again soon.
      std::this_thread::yield();
      continue;
    }
    // The re-check after arming (W1), then sleep until a sender wakes us.
    if (chan.peek() == Peek::kEmpty) volt::detail::park_current_thread();
  }
}

// A new channel: one sender (copy it for more) and the receiver.
template <class T>
std::pair<UnboundedSender<T>, UnboundedReceiver<T>> unbounded_channel() {
  static_assert(std::is_move_constructible_v<T>, "values are moved through the channel");
  auto* chan = new detail::Chan<T>();
  return {UnboundedSender<T>(chan), UnboundedReceiver<T>(chan)};
}

}  // namespace volt::mpsc
