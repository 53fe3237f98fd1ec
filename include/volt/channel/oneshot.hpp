// volt/channel/oneshot.hpp: a channel for exactly one value.
//
//   auto [tx, rx] = volt::oneshot::channel<int>();
//   volt::spawn(producer(std::move(tx)));      // ... tx.send(42);
//   std::optional<int> v = co_await rx;         // nullopt: sender dropped
//
//   // The sender can learn that nobody wants the value any more:
//   co_await tx.closed();        // (sender) the receiver was dropped or closed
//   rx.close();                  // (receiver) refuse it: tx.send(v) hands v back
//
// Guarantees:
//  - One allocation per channel (the shared state, from the recycling frame
//    allocator: none in steady state); waiting allocates nothing.
//  - send() never waits. It returns std::nullopt on success, or hands the
//    value back if the receiver is already gone.
//  - `co_await rx` waits for the value and returns it, or std::nullopt if the
//    sender was dropped without sending. It may be awaited again after a
//    cancelled wait (its task aborted); once it returned, it is consumed and
//    further awaits return std::nullopt.
//  - try_recv() never waits: the value if it is there (consuming it),
//    otherwise std::nullopt; is_closed() then tells "sender gone" from "not yet".
//  - Receiver::close(): no value is accepted any more; a later send() hands
//    its value back, and the sender's closed() completes. A value sent before
//    the close stays receivable (try_recv, co_await), as in Tokio. After the
//    close, `co_await rx` never waits: that value, or std::nullopt.
//  - Receiver::is_terminated(): nothing more will come from this receiver:
//    its value was taken, or none can arrive (sender gone or close() called)
//    and none is there. (Tokio's turns true once the receiver has observed
//    that; this one as soon as it is certain.) is_empty(): no value is there
//    to take now (none sent yet, or already taken). is_closed(): no value
//    can arrive any more (sender gone, value sent, or close() called).
//  - Sender::closed() (co_await, void) completes once the receiver is
//    dropped or called close(), at once if it already has. One closed()
//    operation of a sender waits at a time (a second one awaited while the
//    first still waits throws volt::Error(errc::invalid_handle)); it must be
//    destroyed before its sender sends or is destroyed. Waiting allocates
//    nothing; destroying the operation withdraws its waker. is_closed(): the
//    same condition, without waiting.
//  - Sender and Receiver may live on different threads; each is one owner's.
//
// Protocol (one atomic word, `state_`):
//   kValueSet   the value slot is written (release by send)
//   kTxClosed   the sender is gone (after sending or without sending)
//   kRxClosed   the receiver is gone
//   kRxWaker    rx_waker holds a waker and belongs to the sending side
//   kTxWaker    tx_waker holds a waker (the sender's closed()) and belongs
//               to the receiving side
// kValueSet is never set once kRxClosed is (send decides both with one CAS),
// so a value is either receivable or handed back, never both.
// The receiver writes rx_waker only while kRxWaker is clear and no value or
// close has been published, then sets kRxWaker (release). The sender, after
// publishing kValueSet / kTxClosed with an acq_rel RMW, takes rx_waker and
// wakes it iff the previous state had kRxWaker (exactly one of send() and
// close_tx() does: kTxClosed is set once). A wait that ends any other way (its
// awaiter destroyed: the task aborted, a timeout or select that fired)
// withdraws: it clears kRxWaker with a CAS that fails if the sender completed
// first, and on success drops the waker itself; on failure the sender owns
// the waker and drops it when it wakes it. The sender's closed() is the
// mirror image: it writes tx_waker and sets kTxWaker (release) while kRxClosed
// is clear; close_rx's acq_rel RMW that sets kRxClosed takes and wakes it
// iff kTxWaker was set and kRxClosed was not (kRxClosed is set once); a
// destroyed closed() withdraws with a CAS that fails if kRxClosed came first.
// So no waker outlives its wait (a
// waker keeps its task's cell and scheduler alive). Whoever drops the last of
// the two references frees the state (and a value never received).
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <new>
#include <optional>
#include <utility>

#include "volt/detail/frame_allocator.hpp"
#include "volt/detail/task_header.hpp"
#include "volt/detail/waker.hpp"
#include "volt/error.hpp"
#include "volt/task/join_handle.hpp"

namespace volt::oneshot {

template <class T>
class Sender;
template <class T>
class Receiver;

namespace detail {

template <class T>
class Shared {
 public:
  static constexpr std::uint32_t kValueSet = 1;
  static constexpr std::uint32_t kTxClosed = 2;
  static constexpr std::uint32_t kRxClosed = 4;
  static constexpr std::uint32_t kRxWaker = 8;
  static constexpr std::uint32_t kTxWaker = 16;

  static Shared* create() { return ::new (volt::detail::frame_allocate(sizeof(Shared))) Shared(); }
  void release() noexcept {
    // acq_rel: the last owner sees the other's writes (the value) before freeing.
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      this->~Shared();
      volt::detail::frame_deallocate(this, sizeof(Shared));
    }
  }

  std::optional<T> send(T&& value) {
    ::new (static_cast<void*>(&storage_)) T(std::move(value));
    std::uint32_t prev = state_.load(std::memory_order_relaxed);
    // One CAS decides: the value is published (kValueSet) only if the
    // receiver has not closed; kTxClosed either way. acq_rel: release
    // publishes the value to the receiver's acquire; acquire makes the
    // receiver's waker (written before its release of kRxWaker) visible.
    // relaxed on failure: the loop only recomputes from the new bits.
    while (!state_.compare_exchange_weak(
        prev, prev | ((prev & kRxClosed) ? kTxClosed : kValueSet | kTxClosed),
        std::memory_order_acq_rel, std::memory_order_relaxed)) {
    }
    std::optional<T> back;
    if (prev & kRxClosed) {
      // The receiver is gone or closed and will never take it (kValueSet
      // stays clear): the value goes back.
      back.emplace(std::move(*slot()));
      slot()->~T();
    }
    if (prev & kRxWaker) take_waker().wake();
    return back;
  }

  void close_tx() noexcept {
    std::uint32_t prev = state_.fetch_or(kTxClosed, std::memory_order_acq_rel);
    if ((prev & kRxWaker) && !(prev & kTxClosed)) take_waker().wake();
  }

  // The receiver is dropped, or calls close() (idempotent).
  void close_rx() noexcept {
    // acq_rel: acquire makes the sender's tx_waker (written before its
    // release of kTxWaker) visible; release orders the receiver's earlier
    // accesses before a sender that sees kRxClosed.
    const std::uint32_t prev = state_.fetch_or(kRxClosed, std::memory_order_acq_rel);
    if ((prev & kTxWaker) && !(prev & kRxClosed)) take_tx_waker().wake();
  }

  // The receiver's wait is over: a value, the sender gone, or closed.
  bool is_complete() const noexcept {
    return state_.load(std::memory_order_acquire) & (kValueSet | kTxClosed | kRxClosed);
  }
  // Receiver: a value is there, not yet taken.
  bool has_value() const noexcept {
    return (state_.load(std::memory_order_acquire) & kValueSet) && !taken_;
  }
  // Receiver: taken, or nothing there and nothing can come.
  bool is_terminated() const noexcept {
    const std::uint32_t s = state_.load(std::memory_order_acquire);
    if (s & kValueSet) return taken_;
    return s & (kTxClosed | kRxClosed);
  }
  bool is_tx_closed() const noexcept { return state_.load(std::memory_order_acquire) & kTxClosed; }
  bool is_rx_closed() const noexcept { return state_.load(std::memory_order_acquire) & kRxClosed; }

  // Receiver: takes the value if it is there.
  std::optional<T> take() {
    std::uint32_t s = state_.load(std::memory_order_acquire);
    if (!(s & kValueSet) || taken_) return std::nullopt;
    taken_ = true;
    std::optional<T> value(std::move(*slot()));
    return value;
  }

  // Receiver: publishes `waker`. False if the value or close came first.
  // Precondition: no registration of this receiver is outstanding (the one
  // awaiter that registered withdraws before another registers).
  bool register_waker(volt::detail::Waker waker) noexcept {
    std::uint32_t s = state_.load(std::memory_order_acquire);
    if (s & (kValueSet | kTxClosed | kRxClosed)) return false;
    rx_waker_ = std::move(waker);
    s = state_.load(std::memory_order_relaxed);
    do {
      if (s & (kValueSet | kTxClosed | kRxClosed)) {
        // Never published (kRxWaker unset): the sender never reads the slot,
        // so drop the waker here, or it would hold the task (and its
        // scheduler) until the state is freed.
        rx_waker_ = volt::detail::Waker();
        return false;
      }
      // release: the sender's acquire RMW sees the waker we just wrote.
    } while (!state_.compare_exchange_weak(s, s | kRxWaker, std::memory_order_release,
                                           std::memory_order_relaxed));
    return true;
  }

  // Receiver, when the wait that registered ends without being woken (its
  // awaiter destroyed): takes the waker back unless the sender already
  // completed, in which case the sender takes and wakes it (see the top).
  void withdraw_waker() noexcept {
    std::uint32_t s = state_.load(std::memory_order_relaxed);
    do {
      if (!(s & kRxWaker) || (s & (kValueSet | kTxClosed))) return;
      // relaxed: success means the sender's RMW (send / close_tx) has not
      // happened yet, and it will then see kRxWaker clear and never read
      // rx_waker_; nothing it wrote is read here.
    } while (!state_.compare_exchange_weak(s, s & ~kRxWaker, std::memory_order_relaxed,
                                           std::memory_order_relaxed));
    rx_waker_ = volt::detail::Waker();
  }

  // ---- the sender's closed() (the mirror of the receiver's wait) ----

  // Sender: whether a closed() of this sender is registered and waiting.
  // relaxed: only the sender sets kTxWaker, so its own thread reads its own
  // writes; a concurrent kRxClosed only makes the answer "not waiting".
  bool tx_waiting() const noexcept {
    const std::uint32_t s = state_.load(std::memory_order_relaxed);
    return (s & kTxWaker) && !(s & kRxClosed);
  }
  // Sender: publishes `waker` for closed(). False if the receiver already
  // closed. Precondition: no registration of this sender is outstanding.
  bool register_tx_waker(volt::detail::Waker waker) noexcept {
    std::uint32_t s = state_.load(std::memory_order_acquire);
    if (s & kRxClosed) return false;
    tx_waker_ = std::move(waker);
    s = state_.load(std::memory_order_relaxed);
    do {
      if (s & kRxClosed) {
        tx_waker_ = volt::detail::Waker();  // never published: as in register_waker
        return false;
      }
      // release: close_rx's acquire RMW sees the waker we just wrote.
    } while (!state_.compare_exchange_weak(s, s | kTxWaker, std::memory_order_release,
                                           std::memory_order_relaxed));
    return true;
  }
  // Sender: a registered closed() ends without its wake-up (destroyed).
  // Takes the waker back unless close_rx already took it to wake it.
  void withdraw_tx_waker() noexcept {
    std::uint32_t s = state_.load(std::memory_order_relaxed);
    do {
      if (!(s & kTxWaker) || (s & kRxClosed)) return;
      // relaxed: success means close_rx has not run its RMW yet and will
      // find kTxWaker clear; nothing it wrote is read here.
    } while (!state_.compare_exchange_weak(s, s & ~kTxWaker, std::memory_order_relaxed,
                                           std::memory_order_relaxed));
    tx_waker_ = volt::detail::Waker();
  }

 private:
  Shared() = default;
  ~Shared() {
    if ((state_.load(std::memory_order_relaxed) & kValueSet)) slot()->~T();
  }
  T* slot() noexcept { return std::launder(reinterpret_cast<T*>(&storage_)); }
  // Sender, after an RMW that found kRxWaker: the receiver no longer writes
  // rx_waker_ (it saw the completion, or withdraw_waker's CAS fails).
  volt::detail::Waker take_waker() noexcept { return std::move(rx_waker_); }
  // close_rx, after its RMW found kTxWaker (and no earlier kRxClosed): the
  // sender no longer writes tx_waker_ (withdraw_tx_waker's CAS fails).
  volt::detail::Waker take_tx_waker() noexcept { return std::move(tx_waker_); }

  std::atomic<std::uint32_t> state_{0};
  std::atomic<std::uint32_t> refs_{2};
  bool taken_ = false;  // receiver only
  volt::detail::Waker rx_waker_;
  volt::detail::Waker tx_waker_;
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace detail

template <class T>
class Sender {
 public:
  Sender() noexcept = default;
  Sender(Sender&& o) noexcept : shared_(std::exchange(o.shared_, nullptr)) {}
  Sender& operator=(Sender&& o) noexcept {
    if (this != &o) {
      reset();
      shared_ = std::exchange(o.shared_, nullptr);
    }
    return *this;
  }
  ~Sender() { reset(); }

  // Sends the value (consuming the sender). Returns std::nullopt on success,
  // the value back if the receiver is gone or this sender is empty.
  [[nodiscard("the value comes back if the receiver is gone")]] std::optional<T> send(T value) {
    if (!shared_) return std::optional<T>(std::move(value));
    // If T's move constructor throws inside, nothing was sent: the sender
    // is dropped (reset) and the exception propagates.
    std::optional<T> back = shared_->send(std::move(value));
    shared_->release();
    shared_ = nullptr;
    return back;
  }
  // The receiver is gone or called close(): send() would hand the value back.
  bool is_closed() const noexcept { return !shared_ || shared_->is_rx_closed(); }

  class Closed;
  // co_await completes (void) once the receiver is dropped or closed (see
  // the header contract).
  Closed closed() noexcept { return Closed(shared_); }

 private:
  template <class U>
  friend std::pair<Sender<U>, Receiver<U>> channel();
  explicit Sender(detail::Shared<T>* s) noexcept : shared_(s) {}
  void reset() noexcept {
    if (auto* shared = std::exchange(shared_, nullptr)) {
      shared->close_tx();
      shared->release();
    }
  }
  detail::Shared<T>* shared_ = nullptr;
};

// The closed() operation of a Sender.
template <class T>
class [[nodiscard]] Sender<T>::Closed {
 public:
  Closed(const Closed&) = delete;
  Closed& operator=(const Closed&) = delete;
  // Before it is awaited only (e.g. moved into a timeout or select).
  Closed(Closed&& other) noexcept : shared_(other.shared_) {}
  // A wait that ends without its wake-up withdraws its waker.
  ~Closed() {
    if (registered_) shared_->withdraw_tx_waker();
  }
  bool await_ready() {
    if (!shared_) return true;
    if (!registered_ && shared_->tx_waiting())
      throw Error(errc::invalid_handle, "oneshot::Sender::closed: another closed() still waits");
    return shared_->is_rx_closed() && volt::detail::coop_try_consume();
  }
  bool await_suspend(std::coroutine_handle<> self) {
    if (!shared_->is_rx_closed()) {
      volt::detail::TaskHeader* task = volt::detail::suspend_current(self, &ready, shared_);
      // Awaited again after an interrupted wait: the waker registered then
      // names this task.
      if (registered_) return true;
      registered_ = shared_->register_tx_waker(volt::detail::make_task_waker(task));
      if (registered_) return true;
    }
    if (volt::detail::coop_try_consume()) return false;
    volt::detail::yield_current(self);
    return true;
  }
  void await_resume() noexcept {}

 private:
  friend class Sender;
  explicit Closed(detail::Shared<T>* shared) noexcept : shared_(shared) {}
  static bool ready(void* shared) noexcept {
    return static_cast<detail::Shared<T>*>(shared)->is_rx_closed();
  }
  detail::Shared<T>* shared_;
  bool registered_ = false;
};

template <class T>
class Receiver {
 public:
  Receiver() noexcept = default;
  Receiver(Receiver&& o) noexcept : shared_(std::exchange(o.shared_, nullptr)) {}
  Receiver& operator=(Receiver&& o) noexcept {
    if (this != &o) {
      reset();
      shared_ = std::exchange(o.shared_, nullptr);
    }
    return *this;
  }
  ~Receiver() { reset(); }

  std::optional<T> try_recv() { return shared_ ? shared_->take() : std::nullopt; }
  // True when no value can arrive any more (sender gone or done, or
  // close() called).
  bool is_closed() const noexcept {
    return !shared_ || shared_->is_tx_closed() || shared_->is_rx_closed();
  }
  // Refuses the value: a later send() hands it back; the sender's closed()
  // completes. A value already sent stays receivable. Idempotent.
  void close() noexcept {
    if (shared_) shared_->close_rx();
  }
  // Nothing more will come from this receiver: the value was taken, or none
  // is there and none can arrive. An empty handle is terminated.
  bool is_terminated() const noexcept { return !shared_ || shared_->is_terminated(); }
  // No value is there to take now (not sent yet, or taken).
  bool is_empty() const noexcept { return !shared_ || !shared_->has_value(); }

  class Awaiter {
   public:
    explicit Awaiter(detail::Shared<T>* shared) noexcept : shared_(shared) {}
    Awaiter(const Awaiter&) = delete;
    Awaiter& operator=(const Awaiter&) = delete;
    // Before it is awaited only (e.g. moved into a timeout or select).
    Awaiter(Awaiter&& other) noexcept : shared_(other.shared_) {}
    // A wait that ends without a wake-up (the task aborted, a timeout or
    // select that fired) withdraws its waker.
    ~Awaiter() {
      if (registered_) shared_->withdraw_waker();
    }
    bool await_ready() const noexcept {
      return !shared_ || (shared_->is_complete() && volt::detail::coop_try_consume());
    }
    bool await_suspend(std::coroutine_handle<> self) {
      if (!shared_->is_complete()) {
        volt::detail::TaskHeader* task = volt::detail::suspend_current(self, &ready, shared_);
        // Awaited again after an interrupted wait (an lvalue operand of a
        // timeout that fired): the waker registered then names this task.
        if (registered_) return true;
        registered_ = shared_->register_waker(volt::detail::make_task_waker(task));
        if (registered_) return true;
      }
      if (volt::detail::coop_try_consume()) return false;
      volt::detail::yield_current(self);
      return true;
    }
    std::optional<T> await_resume() { return shared_ ? shared_->take() : std::nullopt; }

   private:
    static bool ready(void* shared) noexcept {
      return static_cast<detail::Shared<T>*>(shared)->is_complete();
    }
    detail::Shared<T>* shared_;
    bool registered_ = false;
  };
  Awaiter operator co_await() & noexcept { return Awaiter(shared_); }
  Awaiter operator co_await() && noexcept { return Awaiter(shared_); }

 private:
  template <class U>
  friend std::pair<Sender<U>, Receiver<U>> channel();
  explicit Receiver(detail::Shared<T>* s) noexcept : shared_(s) {}
  void reset() noexcept {
    if (auto* shared = std::exchange(shared_, nullptr)) {
      shared->close_rx();
      shared->release();
    }
  }
  detail::Shared<T>* shared_ = nullptr;
};

template <class T>
std::pair<Sender<T>, Receiver<T>> channel() {
  auto* shared = detail::Shared<T>::create();
  return {Sender<T>(shared), Receiver<T>(shared)};
}

}  // namespace volt::oneshot

// Tokio's path (tokio::sync::oneshot).
namespace volt::sync {
namespace oneshot = volt::oneshot;
}  // namespace volt::sync
