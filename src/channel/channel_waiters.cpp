// The slow paths of ChannelWaiters (volt/detail/channel_waiters.hpp has the
// protocol and the Dekker argument; tests/model/channel.pml checks it).
#include "volt/detail/channel_waiters.hpp"

#include <utility>

#include "volt/detail/spin_wait.hpp"
#include "volt/detail/wake_list.hpp"

namespace volt::detail {

bool ChannelWaiters::enqueue(ChannelWaiter* waiter, bool (*recheck)(void*), void* context,
                             bool regrant, bool reserves) noexcept {
  lock_.lock();
  if (regrant) {
    --granted_;
    // A granted retry that found no room: kStrictAfter in a row make this
    // waiter starving, and barging stops until its turn ends (see the top
    // of channel_waiters.hpp).
    if (++waiter->regrants == kStrictAfter) ++starving_;
  }
  const bool gated = gate_word_ != nullptr;
  // Relaxed mode with a grant outstanding: the flag stays down (coalesced
  // wake-ups); the grant's end raises it and looks for room, after this
  // registration (both under the lock).
  if (!gated || strict() || granted_ == 0) {
    // seq_cst: R1 of the Dekker pair; the re-check's seq_cst loads (R2)
    // come after it in the single total order.
    waiting_.store(true, std::memory_order_seq_cst);
  }
  bool oldest = true;
  if (gated && (strict() || reserves)) {
    // seq_cst: ordered against every claim of the tail word (a RMW on the
    // same word: a try_send's CAS either precedes it or fails), and before
    // the re-check's loads like R1. A reservation needs it in either mode:
    // no ungranted claim may come between its room check and its count.
    const std::uint64_t word = gate_word_->fetch_or(gate_bit_, std::memory_order_seq_cst);
    // Someone older waits or holds a grant: a slot freed now is theirs, and
    // this waiter's turn comes through them (a grant, or a woken sender's
    // pass-on). Unless the channel is closed: close()'s wake_all has then
    // run (it takes this lock after marking the word; the fetch_or above
    // follows its mark in the word's modification order), no grant will
    // come, and the re-check reports closed.
    if (strict()) {
      oldest = regrant || (word & closed_bit_) ||
               (granted_ == 0 && list_.empty() && fast_.load(std::memory_order_relaxed) == nullptr);
    }
  }
  if (oldest && recheck(context)) {
    if (gated) end_turn(waiter);
    update_flags();
    lock_.unlock();
    return false;
  }
  waiter->state.store(ChannelWaiter::kQueued, std::memory_order_relaxed);
  // The fast slot only when nobody waits, so it holds the oldest waiter and
  // waking it first keeps the order FIFO.
  ChannelWaiter* empty = nullptr;
  // release: pairs with the lock-free exchange in wake_one_slow(), which
  // then sees the waker and state written above.
  if (!list_.empty() || !fast_.compare_exchange_strong(empty, waiter, std::memory_order_release,
                                                       std::memory_order_relaxed)) {
    if (regrant) {
      // Back to the front: it was the oldest when it was granted. A waiter
      // in the fast slot (gated: touched only under the lock) is the next
      // oldest; it goes to the list right behind.
      ChannelWaiter* younger = fast_.exchange(nullptr, std::memory_order_relaxed);
      if (younger != nullptr) list_.push_front(younger);
      list_.push_front(waiter);
    } else {
      list_.push_back(waiter);
    }
  }
  update_flags();  // the gate, if a reservation's re-check set it for nothing
  lock_.unlock();
  return true;
}

ChannelWaiter* ChannelWaiters::pop_oldest() noexcept {
  // acquire: pairs with enqueue's release CAS (the waiter's waker).
  ChannelWaiter* waiter = fast_.exchange(nullptr, std::memory_order_acquire);
  if (waiter == nullptr) waiter = list_.pop_front();
  return waiter;
}

void ChannelWaiters::wake_one_slow() noexcept {
  ChannelWaiter* waiter = nullptr;
  // Gated: a grant is counted under the lock, so no lock-free take.
  // acquire: pairs with enqueue's release CAS (the waiter's waker).
  if (gate_word_ == nullptr) waiter = fast_.exchange(nullptr, std::memory_order_acquire);
  if (waiter == nullptr) {
    lock_.lock();
    // Under the lock: a registrant that raised the flag has finished, so a
    // waiter it put in the fast slot is seen here.
    waiter = pop_oldest();
    if (waiter != nullptr && gate_word_ != nullptr) ++granted_;
    update_flags();
    if (waiter == nullptr) {
      lock_.unlock();
      return;
    }
    Waker waker = std::move(waiter->waker);
    // release: the owner's acquire in notified(); last touch of the waiter.
    waiter->state.store(ChannelWaiter::kNotified, std::memory_order_release);
    lock_.unlock();
    waker.wake();
    return;
  }
  // Taken out of the fast slot without the lock: this thread owns it until
  // the store below (cancel() waits for that store; see there).
  Waker waker = std::move(waiter->waker);
  // release: the owner's acquire in notified(); last touch of the waiter.
  waiter->state.store(ChannelWaiter::kNotified, std::memory_order_release);
  waker.wake();
}

void ChannelWaiters::drop_grant(ChannelWaiter* gone) noexcept {
  lock_.lock();
  --granted_;
  end_turn(gone);
  ChannelWaiter* waiter = pop_oldest();
  if (waiter != nullptr) ++granted_;
  update_flags();
  if (waiter == nullptr) {
    lock_.unlock();
    return;
  }
  Waker waker = std::move(waiter->waker);
  // release: the owner's acquire in notified(); last touch of the waiter.
  waiter->state.store(ChannelWaiter::kNotified, std::memory_order_release);
  lock_.unlock();
  waker.wake();
}

void ChannelWaiters::cancel(ChannelWaiter* waiter) noexcept {
  lock_.lock();
  if (waiter->state.load(std::memory_order_acquire) == ChannelWaiter::kQueued) {
    ChannelWaiter* expected = waiter;
    if (fast_.compare_exchange_strong(expected, nullptr, std::memory_order_relaxed) ||
        list_.remove(waiter)) {
      waiter->state.store(ChannelWaiter::kIdle, std::memory_order_relaxed);
      waiter->waker = Waker();
      if (gate_word_ != nullptr) end_turn(waiter);
      update_flags();
      lock_.unlock();
      return;
    }
    // Neither in the slot nor in the list, yet kQueued: a waker took it out
    // of the fast slot and is about to publish kNotified, touching it. Wait
    // for that store (a few instructions away unless the waker's thread was
    // preempted, hence the yielding backoff; the waker takes no lock on that
    // path, so waiting here cannot deadlock). acquire: pairs with the
    // waker's release store of kNotified, its last touch of the waiter.
    lock_.unlock();
    SpinWait backoff;
    while (waiter->state.load(std::memory_order_acquire) != ChannelWaiter::kNotified)
      backoff.once();
  } else {
    lock_.unlock();
  }
  // Woken but never retried: pass the wake-up (gated: the grant) on.
  waiter->state.store(ChannelWaiter::kIdle, std::memory_order_relaxed);
  if (gate_word_ != nullptr) {
    drop_grant(waiter);
  } else {
    wake_one();
  }
}

void ChannelWaiters::wake_all() noexcept {
  WakeList wakes;
  lock_.lock();
  for (;;) {
    ChannelWaiter* waiter = pop_oldest();
    if (waiter == nullptr) break;
    // Gated: each woken sender holds a grant until its push reports closed.
    if (gate_word_ != nullptr) ++granted_;
    wakes.push(std::move(waiter->waker));
    waiter->state.store(ChannelWaiter::kNotified, std::memory_order_release);
    if (wakes.full()) {
      lock_.unlock();
      wakes.wake_all();
      lock_.lock();
    }
  }
  update_flags();
  lock_.unlock();
}

bool ChannelWaiters::attempt_behind_gate(bool (*attempt)(void*), void* context) noexcept {
  lock_.lock();
  // seq_cst: as enqueue's gate: ordered against every claim of the tail word
  // (an ungranted claim either precedes it, and the attempt's loads see it,
  // or fails its CAS), and before the attempt's seq_cst loads.
  const std::uint64_t word = gate_word_->fetch_or(gate_bit_, std::memory_order_seq_cst);
  const bool may =
      !strict() || (word & closed_bit_) ||
      (granted_ == 0 && list_.empty() && fast_.load(std::memory_order_relaxed) == nullptr);
  const bool done = may && attempt(context);
  update_flags();
  lock_.unlock();
  return done;
}

bool ChannelWaiters::retry_granted(ChannelWaiter* waiter, bool (*attempt)(void*), void* context,
                                   bool reserves) noexcept {
  lock_.lock();
  // seq_cst: as in enqueue (a reservation behind the gate).
  if (reserves) gate_word_->fetch_or(gate_bit_, std::memory_order_seq_cst);
  const bool done = attempt(context);
  if (done) {
    --granted_;
    end_turn(waiter);
  }
  update_flags();
  lock_.unlock();
  return done;
}

void ChannelWaiters::release_reserved(std::uint64_t n) noexcept {
  WakeList wakes;
  lock_.lock();
  reserved_.store(reserved_.load(std::memory_order_relaxed) - n, std::memory_order_relaxed);
  // The freed slots go to the oldest waiters, as a slot a receive frees.
  for (; n > 0; --n) {
    ChannelWaiter* waiter = pop_oldest();
    if (waiter == nullptr) break;
    ++granted_;
    wakes.push(std::move(waiter->waker));
    // release: the owner's acquire in notified(); last touch of the waiter.
    waiter->state.store(ChannelWaiter::kNotified, std::memory_order_release);
    if (wakes.full()) {
      lock_.unlock();
      wakes.wake_all();
      lock_.lock();
    }
  }
  update_flags();
  lock_.unlock();
  wakes.wake_all();
}

void ChannelWaiters::update_flags() noexcept {
  const bool queued = !list_.empty() || fast_.load(std::memory_order_relaxed) != nullptr;
  if (queued && (gate_word_ == nullptr || strict() || granted_ == 0)) {
    // Raised only where the last grant ended with waiters queued (otherwise
    // already up: see the invariant at the top). seq_cst: R1 of the pass-on
    // that the caller runs after the lock (its room check is R2).
    if (!waiting_.load(std::memory_order_relaxed)) waiting_.store(true, std::memory_order_seq_cst);
  } else {
    // Relaxed: every store to waiting_ is made under lock_, so the lock
    // orders them; a registrant's later seq_cst store of true follows this
    // one.
    waiting_.store(false, std::memory_order_relaxed);
  }
  if (gate_word_ == nullptr || strict() || reserved_.load(std::memory_order_relaxed) != 0) return;
  // relaxed: the bit only gates claims; a push that then claims reads the
  // slot's stamp with its own seq_cst load, which orders what it needs, and
  // every set of the bit is made under lock_ after this. The load first:
  // in relaxed mode the bit is usually clear, and a RMW would bounce the
  // tail word's line for nothing.
  if (gate_word_->load(std::memory_order_relaxed) & gate_bit_)
    gate_word_->fetch_and(~gate_bit_, std::memory_order_relaxed);
}

}  // namespace volt::detail
