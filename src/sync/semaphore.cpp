// Semaphore: the waiting half (slow paths, release, cancel, close).
//
// Modes. A kFifo semaphore is always strict: the protocol below (I1-I3).
// A kBarging one (Mutex, RwLock) is relaxed until a waiter starves:
//   Relaxed: a release always credits the count lock-free; if waiters queue
//     and none is woken (kQueued set, kWoken clear, seen in the crediting
//     CAS), it takes the mutex and wakes the oldest to retry
//     (wake_oldest_locked: out of the queue, kWoken set, state | kRetryBit).
//     Meanwhile a running acquire may take the permits first (barging: a
//     lock released and retaken by running tasks costs no task switch; with
//     FIFO hand-off the releaser's next lock() queued behind the waiter it
//     woke, and every acquisition of mutex_contended at 4 workers cost one,
//     40 ns against 12). The woken waiter retries under the mutex (retry):
//     it drains what it needs, or what there is and queues again at the
//     front. R1: every credit made while waiters queue and none is woken
//     wakes one. R2: releases made while one is woken wake nobody, so a
//     served retry passes the wake-up on if the count holds permits, and a
//     withdrawn one (cancel) too. Only the oldest waiter holds a partial
//     grant: a registrant behind others (kQueued or kWoken) takes all it
//     needs or nothing, and no hand-off happens in relaxed mode (a release
//     that decided on strict mode and finds it over under the mutex
//     credits instead, release_locked). Two partial holders could wait for
//     each other for good.
//   Strict: a retry that fails (too few) kStrictAfter times in a row makes
//     its waiter starving: it sets kStrict as it queues again, at the
//     front, with the count drained to 0. From then on releases hand off as
//     in a kFifo semaphore, so it is served next; when its turn ends
//     (granted, closed, or withdrawn) its owner clears kStrict (end_strict).
//     A release wakes the oldest even when a running acquire has taken its
//     permits by the time it holds the mutex: that waiter was passed over,
//     and its failed retry is what counts it. So a waiter is passed over at
//     most kStrictAfter times in a row. tests/model/semaphore_barging.pml
//     checks the mode's protocol.
//
// State:
//   permits_  count << 4 | kStrict | kWoken | kQueued | kClosed (kWoken and
//             kStrict: barging mode only, set and cleared under mutex_, see
//             Modes). Lock-free try_take CASes the count down. A
//             release adds to it lock-free only while kQueued is clear (in
//             relaxed mode always: see Modes; the CAS fails if an acquirer
//             sets the bit meanwhile);
//             otherwise under mutex_, when it finds no waiter, clearing
//             kQueued in the same RMW. kQueued is set under mutex_ by an
//             acquirer about to queue, in the CAS that saw the count at 0.
//             So kQueued is set whenever a waiter is queued (it may stay set
//             a little longer: the next release clears it).
//   fast_     at most one waiter, the oldest queued one (invariant I2).
//             Stored only under mutex_; taken out lock-free by release()
//             (exchange) and cancel() (CAS), or under mutex_.
//   waiters_  the other queued waiters, oldest at the front; under mutex_.
//
// Invariants (checked by tests/model/semaphore.pml):
//   I1  no permit sits in the counter while a waiter is queued (fast_ or
//       list) once every release in progress has finished: a release either
//       hands permits to the oldest waiter or, finding none under the mutex,
//       credits the counter; and a waiter queues only under the mutex after
//       draining the counter and setting kQueued in the CAS that saw it
//       empty, so a lock-free credit (kQueued clear) is ordered before that
//       CAS (which then sees it) or fails. The reference's has_waiters flag was a
//       separate word read before a separate fetch_add, which let a waiter
//       queue in between (the model's HAS_WAITERS negative control).
//   I2  fast_, when set, holds the oldest queued waiter, so serving it first
//       keeps FIFO order: a waiter is stored there only when the list is
//       empty.
//   I3  a waiter in fast_ needs exactly one more permit, so the lock-free
//       tier always grants in full. The model found that a partially served
//       waiter held out of the slot (in neither place) can be overtaken, and
//       that putting it back needs the mutex and a drain of the counter;
//       with I3 that path does not exist.
//
// Where the reference's protocol (the reference design's, docs/design.md) loses a wake-up
// or a permit, and what this code does instead (the model's negative
// controls reproduce each one):
//   (a) release() swaps an empty fast slot; an acquirer then registers in the
//       slot under the mutex; release() takes the mutex, sees an empty list
//       and credits the counter: the permits float past a queued waiter.
//       Here release_locked() always takes the fast slot again under the
//       mutex before looking at the list.
//   (b) a partially served waiter is out of the slot while another release
//       finds slot and list empty and credits the counter; the waiter goes
//       back and starves. Here no partial grant happens outside the mutex
//       (I3).
//   (c) a waiter cancelled while a releaser holds it out of the slot is in
//       neither place; the reference's cancel "removes" it from the list and frees
//       it while the releaser still writes to it. Here cancel() finds it
//       neither linked nor finished under the mutex and waits (unlocks,
//       yields, retries) for that releaser to publish its completion.
//   (d) the reference's releaseToWaiters publishes a list waiter's completion
//       before unlinking it and copying its waker: the waiter may be freed
//       first. Here the waker is moved out and the waiter unlinked before
//       the publishing store.
//   FIFO: the reference registers a newcomer in an empty fast slot even when older
//   waiters are in the list, and release() serves the slot first: the
//   newcomer overtakes them. Here the slot is used only when the list is
//   empty (I2).
#include "volt/sync/semaphore.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "detail/thread_parker.hpp"
#include "volt/detail/spin_wait.hpp"
#include "volt/detail/wake_list.hpp"

namespace volt {

using detail::SemaphoreWaiter;

Semaphore::Semaphore(std::uint64_t permits, Fairness fairness)
    : barging_(fairness == Fairness::kBarging) {
  if (permits > kMaxPermits)
    throw Error(errc::invalid_argument, "Semaphore: more than kMaxPermits permits");
  permits_.store(permits << kCountShift, std::memory_order_relaxed);
}

Semaphore::~Semaphore() = default;

void Semaphore::release(std::uint64_t n) {
  if (n == 0) return;
  // Checked up front so that a bad call changes nothing. Racing releases may
  // still pass this check together; the count is then wrong only for a
  // program that overflows kMaxPermits concurrently, which no semaphore bound
  // can protect.
  const std::uint64_t available = available_permits();
  if (n > kMaxPermits || available > kMaxPermits - n)
    throw Error(errc::invalid_argument, "Semaphore::release: more than kMaxPermits permits");
  release_unchecked(n);
}

namespace {

// A returned permit takes the count past kMaxPermits: permits were added
// (add_permits/release) while it was out, so the count and the permits held
// together exceed the bound. Crediting it passed kMaxPermits, and a second
// round wrapped the 64-bit word (2^60 permits silently lost). Tokio panics
// here; a permit's destructor cannot throw, so this names the bound and
// aborts. Checked on the count the release's own CAS (or last look) read:
// no load of its own on the permit-drop path (a separate load cost 1.5-2 ns
// a try_lock/unlock); returns racing each other may pass it together, as
// release()'s check.
[[noreturn, gnu::cold, gnu::noinline]] void permit_overflow(std::uint64_t returned,
                                                            std::uint64_t count) noexcept {
  std::fprintf(stderr,
               "volt::Semaphore: returning %llu permits to a count of %llu passes "
               "kMaxPermits (%llu): more permits were added while they were held\n",
               static_cast<unsigned long long>(returned), static_cast<unsigned long long>(count),
               static_cast<unsigned long long>(Semaphore::kMaxPermits));
  std::abort();
}

}  // namespace

void Semaphore::release_unchecked(std::uint64_t n) noexcept {
  if (n == 0) return;
  // Tier 0: the count, lock-free, unless waiters queue in strict mode.
  // release: pairs with try_take's and the drain's acquire (what the
  // permits guarded is visible to the next holder). A failed CAS (relaxed:
  // only the bits are looked at) re-reads the word.
  std::uint64_t current = permits_.load(std::memory_order_relaxed);
  detail::ContentionBackoff contention;
  while (!(current & kQueued) || (barging_ && !(current & kStrict))) {
    if (permits_.compare_exchange_weak(current, current + (n << kCountShift),
                                       std::memory_order_release, std::memory_order_relaxed)) {
      if ((current >> kCountShift) + n > kMaxPermits) permit_overflow(n, current >> kCountShift);
      // Relaxed mode with waiters queued and none woken: wake the oldest to
      // retry (R1 in "Modes"). With one woken already, its retry passes
      // the wake-up on; with nobody queued there is nobody to wake.
      if ((current & (kQueued | kWoken)) == kQueued) {
        detail::WakeList wakes;
        mutex_.lock();
        wake_oldest_locked(wakes, /*released=*/true);
        mutex_.unlock();
      }
      return;
    }
    contention.once();  // another release or a take won the word
  }
  if ((current >> kCountShift) + n > kMaxPermits) permit_overflow(n, current >> kCountShift);
  // Tier 1: the fast slot, lock-free. A plain load first: with nobody
  // waiting (the common case) the exchange's cache-line write is wasted. A
  // waiter that registers after this load is found under the mutex in
  // release_locked (fix (a)). acq_rel on the exchange: acquire pairs with the
  // release store that put the waiter there (its fields are visible);
  // release orders our earlier writes before the slot is seen empty.
  SemaphoreWaiter* waiter = fast_.load(std::memory_order_relaxed) == nullptr
                                ? nullptr
                                : fast_.exchange(nullptr, std::memory_order_acq_rel);
  if (waiter) {
    // We own the waiter until we publish its completion. Only a waiter that
    // needs exactly one more permit is ever stored in the slot (I3), so any
    // release serves it in full: no partial grant happens outside the mutex.
    const std::uint64_t remaining = waiter->state.load(std::memory_order_relaxed);
    detail::Waker waker = std::move(waiter->waker);  // copy before publish
    // release: pairs with the owner's acquire in finished(); after this
    // store the waiter may be freed, so nothing below touches it.
    waiter->state.store(0, std::memory_order_release);
    waker.wake();
    n -= remaining;
    if (n == 0) return;
    mutex_.lock();
    release_locked(n);  // surplus: the next oldest waiters, then the count
    return;
  }
  // Tier 2: the mutex.
  mutex_.lock();
  release_locked(n);
}

void Semaphore::release_locked(std::uint64_t n) noexcept {
  detail::WakeList wakes;
  if (barging_ && !(permits_.load(std::memory_order_relaxed) & kStrict)) {
    // Strict mode ended after our look at the word (tier 0): release as
    // relaxed mode does. A hand-off now could give a partial grant to a
    // waiter behind the one woken to retry, which queues again at the front:
    // two waiters holding part of what they need, each waiting for the
    // other (the RwLock stress test hung so). release: as tier 0.
    permits_.fetch_add(n << kCountShift, std::memory_order_release);
    wake_oldest_locked(wakes, /*released=*/true);
    mutex_.unlock();
    wakes.wake_all();
    return;
  }
  while (n > 0) {
    // The fast slot first, again, under the mutex: a waiter may have
    // registered there after our lock-free exchange found it empty (fix (a)).
    // A load first: the slot is mostly empty here (later waiters are in the
    // list), and under the mutex nobody can fill it concurrently (stores
    // happen only under the mutex), so an empty load is final.
    SemaphoreWaiter* waiter = fast_.load(std::memory_order_relaxed) == nullptr
                                  ? nullptr
                                  : fast_.exchange(nullptr, std::memory_order_acq_rel);
    const bool from_fast = waiter != nullptr;
    if (!waiter) waiter = waiters_.front();
    if (!waiter) {
      // Nobody waits: the count, clearing kQueued in the same RMW so that
      // releases go lock-free again. Only mutex holders set or clear
      // kQueued, so the bit read here is still the bit when we add, and
      // subtracting it (bit 1, below the count) clears it without a borrow.
      // release: pairs with try_take's acquire.
      const std::uint64_t queued = permits_.load(std::memory_order_relaxed) & kQueued;
      permits_.fetch_add((n << kCountShift) - queued, std::memory_order_release);
      break;
    }
    const std::uint64_t remaining = waiter->state.load(std::memory_order_relaxed);
    if (n < remaining) {
      // Partial grant (a list waiter: a slot waiter needs 1, I3): it stays
      // the oldest, at the list's front.
      waiter->state.store(remaining - n, std::memory_order_relaxed);
      break;
    }
    if (!from_fast) waiters_.remove(waiter);
    n -= remaining;
    wakes.push(std::move(waiter->waker));  // copy before publish
    waiter->state.store(0, std::memory_order_release);
    if (wakes.full()) {
      mutex_.unlock();
      wakes.wake_all();
      mutex_.lock();
      if (barging_ && !(permits_.load(std::memory_order_relaxed) & kStrict)) {
        // Strict mode ended while the mutex was free (a waiter we served
        // ran end_strict): the rest goes as in relaxed mode, as at the top.
        // Handing it on could give a partial grant behind a waiter woken to
        // retry (tests/model/semaphore_barging.pml -DFLUSH found the hang).
        permits_.fetch_add(n << kCountShift, std::memory_order_release);
        wake_oldest_locked(wakes, /*released=*/true);
        break;
      }
    }
  }
  mutex_.unlock();
  wakes.wake_all();
}

void Semaphore::wake_oldest_locked(detail::WakeList& wakes, bool released) noexcept {
  // Under the mutex the bits cannot change (only mutex holders set or clear
  // kQueued, kWoken, kStrict and kClosed); the count can (lock-free credits
  // and takes). relaxed: the decision needs only the bits and whether the
  // count is 0; the woken waiter's retry reads the count again.
  const std::uint64_t current = permits_.load(std::memory_order_relaxed);
  if ((current & (kQueued | kWoken | kStrict | kClosed)) != kQueued) return;
  // A pass-on wakes only for permits in the count. A release wakes even if
  // a running acquire has taken its permits already: the oldest waiter was
  // passed over, and its failed retry is what counts that (kStrictAfter);
  // without it, acquirers trading the permits among themselves could keep
  // it waiting for ever.
  if (!released && (current >> kCountShift) == 0) return;
  SemaphoreWaiter* waiter = fast_.load(std::memory_order_relaxed) == nullptr
                                ? nullptr
                                : fast_.exchange(nullptr, std::memory_order_acq_rel);
  if (!waiter) waiter = waiters_.pop_front();
  const bool last = waiters_.empty() && fast_.load(std::memory_order_relaxed) == nullptr;
  if (!waiter) {
    // kQueued outlived the last waiter (served or withdrawn): clear it.
    permits_.fetch_and(~kQueued, std::memory_order_relaxed);
    return;
  }
  // Set kWoken, and clear kQueued if nobody is left: both bits are known
  // (under the mutex), so an XOR flips exactly them.
  permits_.fetch_xor(kWoken | (last ? kQueued : 0), std::memory_order_relaxed);
  const std::uint64_t needed = waiter->state.load(std::memory_order_relaxed);
  wakes.push(std::move(waiter->waker));  // before publishing (the owner may free it)
  // release: pairs with the owner's acquire in Acquire::settle (it finds the
  // waiter out of the queue and may retry at once).
  waiter->state.store(needed | SemaphoreWaiter::kRetryBit, std::memory_order_release);
}

Semaphore::AcquireResult Semaphore::retry(SemaphoreWaiter* waiter, detail::Waker waker) noexcept {
  detail::WakeList wakes;
  std::unique_lock lock(mutex_);
  // Ours alone: out of the queue since the wake-up, and kWoken stands for us.
  std::uint64_t still =
      waiter->state.load(std::memory_order_relaxed) & SemaphoreWaiter::kNeededMask;
  // acquire: pairs with the release that credited what we drain.
  std::uint64_t current = permits_.load(std::memory_order_acquire);
  bool queued_again = false;
  for (;;) {
    if (current & kClosed) {
      // close() finished every queued waiter; we were out of the queue. Our
      // wake-up ends here (nobody waits for a pass-on after close).
      if (queued_again) waiters_.remove(waiter);
      permits_.fetch_and(~kWoken, std::memory_order_relaxed);
      waiter->state.store(still | SemaphoreWaiter::kClosedBit, std::memory_order_relaxed);
      return AcquireResult::kClosed;
    }
    const std::uint64_t take = std::min(current >> kCountShift, still);
    if (take > 0) {
      // acquire: as above. The bits stay (kWoken still ours).
      if (permits_.compare_exchange_weak(current, current - (take << kCountShift),
                                         std::memory_order_acquire, std::memory_order_acquire))
        still -= take;
      if (still > 0) continue;
      // Served in full. Whatever the count still holds belongs to the next
      // waiter: releases made while kWoken was set woke nobody (R2).
      if (queued_again) waiters_.remove(waiter);
      waiter->failed_retries = 0;
      waiter->state.store(0, std::memory_order_relaxed);
      permits_.fetch_and(~kWoken, std::memory_order_relaxed);
      wake_oldest_locked(wakes, /*released=*/false);
      lock.unlock();
      return AcquireResult::kGranted;
    }
    // Too few: queue again, at the front (we are the oldest), never in the
    // fast slot (a stale strict release may still exchange it lock-free, and
    // must not find a waiter that is draining the count). The slot's waiter,
    // if any, is newer than us: it moves behind us in the list (I2).
    if (!queued_again) {
      if (SemaphoreWaiter* newer = fast_.load(std::memory_order_relaxed) == nullptr
                                       ? nullptr
                                       : fast_.exchange(nullptr, std::memory_order_acq_rel))
        waiters_.push_front(newer);
      waiters_.push_front(waiter);
      waiter->waker = std::move(waker);
      queued_again = true;
    }
    waiter->state.store(still, std::memory_order_relaxed);  // read under the mutex only
    // The count is 0 in `current`: queue in the CAS that saw it (as
    // acquire_locked), handing kWoken back and, starving, turning strict.
    const bool starving = waiter->failed_retries + 1 >= kStrictAfter;
    const std::uint64_t next = (current & ~kWoken) | kQueued | (starving ? kStrict : 0);
    if (permits_.compare_exchange_weak(current, next, std::memory_order_acquire,
                                       std::memory_order_acquire)) {
      ++waiter->failed_retries;
      waiter->starving = starving;
      return AcquireResult::kQueued;
    }
  }
}

void Semaphore::end_strict(SemaphoreWaiter* waiter) noexcept {
  detail::WakeList wakes;
  std::lock_guard guard(mutex_);
  waiter->starving = false;
  waiter->failed_retries = 0;
  permits_.fetch_and(~kStrict, std::memory_order_relaxed);
  // Strict mode left nothing in the count while waiters queued (I1), but a
  // release racing the switch may credit it now: whoever sees the relaxed
  // word wakes, and this covers a credit made before it.
  wake_oldest_locked(wakes, /*released=*/false);
}

Semaphore::AcquireResult Semaphore::acquire_locked(SemaphoreWaiter* waiter) noexcept {
  const std::uint64_t needed = waiter->requested;
  std::lock_guard guard(mutex_);
  // Lock before CAS: a release that could credit the counter needs the
  // mutex, so whatever it credited before we locked we drain now, and
  // whatever comes after finds us queued.
  std::uint64_t current = permits_.load(std::memory_order_acquire);
  std::uint64_t still = needed;
  while (still > 0) {
    if (current & kClosed) break;
    // With others waiting (queued, or woken to retry) only all we need or
    // nothing: a partial grant goes to the oldest waiter alone. Two waiters
    // each holding part of what they need could wait for each other for
    // good (the random-cancellation stress test hung so, 8 tasks on 2
    // permits, before this rule).
    const std::uint64_t count = current >> kCountShift;
    const std::uint64_t take = barging_ && (current & (kQueued | kWoken))
                                   ? (count >= still ? still : 0)
                                   : std::min(count, still);
    if (take == 0) {
      // We will queue. Mark it in the CAS that saw too few, so that a
      // release that has not credited yet either fails its lock-free CAS or
      // (relaxed mode) sees the bit and comes to the mutex (held by us),
      // where it finds us queued.
      if ((current & kQueued) ||
          permits_.compare_exchange_weak(current, current | kQueued, std::memory_order_acquire,
                                         std::memory_order_acquire))
        break;
      continue;
    }
    // acquire: pairs with the release that credited these permits.
    if (permits_.compare_exchange_weak(current, current - (take << kCountShift),
                                       std::memory_order_acquire, std::memory_order_acquire))
      still -= take;
  }
  if (current & kClosed) {
    // Closed: give back what we drained (it stays in the count).
    if (needed > still)
      permits_.fetch_add((needed - still) << kCountShift, std::memory_order_release);
    return AcquireResult::kClosed;
  }
  if (still == 0) return AcquireResult::kGranted;
  waiter->state.store(still, std::memory_order_relaxed);  // published below
  // The slot only for the oldest waiter (I2) and only if one permit will
  // finish it (I3).
  if (still == 1 && waiters_.empty() && fast_.load(std::memory_order_relaxed) == nullptr) {
    // release: pairs with the acquire exchange/CAS that takes it out.
    fast_.store(waiter, std::memory_order_release);
  } else {
    waiters_.push_back(waiter);
  }
  return AcquireResult::kQueued;
}

void Semaphore::cancel(SemaphoreWaiter* waiter) noexcept {
  const std::uint64_t requested = waiter->requested;
  detail::SpinWait backoff;
  for (;;) {
    SemaphoreWaiter* expected = waiter;
    // acq_rel: acquire sees the state written by whoever put it there.
    if (fast_.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel,
                                      std::memory_order_relaxed)) {
      // Ours again, never finished: give back the partial grant.
      const std::uint64_t still = waiter->state.load(std::memory_order_relaxed);
      release_unchecked(requested - (still & ~SemaphoreWaiter::kClosedBit));
      return;
    }
    mutex_.lock();
    const std::uint64_t s = waiter->state.load(std::memory_order_acquire);
    if (s & SemaphoreWaiter::kRetryBit) {
      // Woken to retry and withdrawn before it did: kWoken stands for us,
      // so the wake-up passes to the next oldest (R2 in "Modes").
      detail::WakeList wakes;
      permits_.fetch_and(~kWoken, std::memory_order_relaxed);
      wake_oldest_locked(wakes, /*released=*/false);
      mutex_.unlock();
      wakes.wake_all();
      release_unchecked(requested - (s & SemaphoreWaiter::kNeededMask));
      return;
    }
    if (s == 0 || (s & SemaphoreWaiter::kClosedBit) || waiter->linked) {
      if (waiter->linked) waiters_.remove(waiter);
      detail::WakeList wakes;
      if (waiter->starving) {
        // Its turn ends unserved: back to relaxed mode.
        waiter->starving = false;
        permits_.fetch_and(~kStrict, std::memory_order_relaxed);
        wake_oldest_locked(wakes, /*released=*/false);
      }
      mutex_.unlock();
      wakes.wake_all();
      // Granted in full but never taken, closed, or withdrawn from the list:
      // whatever was granted goes back (and may complete other waiters).
      release_unchecked(requested - (s & ~SemaphoreWaiter::kClosedBit));
      return;
    }
    mutex_.unlock();
    // Neither queued nor finished: a releaser took it out of the fast slot
    // and is serving it (fix (c)). It finishes or puts it back shortly
    // (unless its thread was preempted: the backoff then yields).
    backoff.once();
  }
}

void Semaphore::give_back_partial(SemaphoreWaiter* waiter) noexcept {
  const std::uint64_t still =
      waiter->state.load(std::memory_order_acquire) & SemaphoreWaiter::kNeededMask;
  release_unchecked(waiter->requested - still);
}

void Semaphore::close() noexcept {
  detail::WakeList wakes;
  std::unique_lock lock(mutex_);
  permits_.fetch_or(kClosed, std::memory_order_release);
  auto finish = [&](SemaphoreWaiter* waiter) {
    const std::uint64_t still = waiter->state.load(std::memory_order_relaxed);
    wakes.push(std::move(waiter->waker));
    waiter->state.store(still | SemaphoreWaiter::kClosedBit, std::memory_order_release);
    if (wakes.full()) {
      lock.unlock();
      wakes.wake_all();
      lock.lock();
    }
  };
  // A waiter a releaser holds out of the slot is being granted in full by
  // that releaser (I3): it completes normally.
  if (SemaphoreWaiter* waiter = fast_.exchange(nullptr, std::memory_order_acq_rel)) finish(waiter);
  while (SemaphoreWaiter* waiter = waiters_.pop_front())
    finish(waiter);
  lock.unlock();
  wakes.wake_all();
}

Expected<SemaphorePermit> Semaphore::acquire_blocking(std::uint64_t n) {
  if (detail::tls_context.scheduler)
    throw Error(errc::blocking_in_runtime, "Semaphore::acquire_blocking on a runtime thread");
  if (n > kMaxPermits) throw Error(errc::invalid_argument, "Semaphore: more than kMaxPermits");
  if (try_take(n)) return SemaphorePermit(this, n);  // n == 0 too: only while open
  detail::ThreadParker& parker = detail::ThreadParker::current();
  SemaphoreWaiter waiter;
  waiter.requested = n;
  waiter.waker = parker.waker();
  switch (acquire_locked(&waiter)) {
    case AcquireResult::kGranted:
      return SemaphorePermit(this, n);
    case AcquireResult::kClosed:
      return Expected<SemaphorePermit>(errc::closed);
    case AcquireResult::kQueued:
      break;
  }
  for (;;) {
    const std::uint64_t s = waiter.state.load(std::memory_order_acquire);
    if (s & SemaphoreWaiter::kRetryBit) {
      if (retry(&waiter, parker.waker()) != AcquireResult::kQueued) break;
      continue;
    }
    if (s == 0 || (s & SemaphoreWaiter::kClosedBit)) break;
    parker.park();
  }
  if (waiter.starving) end_strict(&waiter);
  if (waiter.state.load(std::memory_order_acquire) & SemaphoreWaiter::kClosedBit) {
    give_back_partial(&waiter);
    return Expected<SemaphorePermit>(errc::closed);
  }
  return SemaphorePermit(this, n);
}

std::uint64_t Semaphore::forget_permits(std::uint64_t n) noexcept {
  // A CAS loop on the count alone, like try_take but taking what there is
  // (up to n) and ignoring kClosed; the bits are left alone. It takes
  // nothing a waiter was given: grants, partial or full, go into the
  // waiter's state word, never through the count. It may take permits an
  // acquirer was about to drain (under the mutex, acquire_locked); that
  // acquirer then queues, as if a try_acquire had come first. It only ever
  // lowers the count, so I1 (no permit in the count while a waiter queues)
  // cannot be broken by it. relaxed: the permits taken go to nobody, so
  // there is nothing to publish or to see; being an RMW, the CAS continues
  // the release sequence of the release that credited the count, so a later
  // try_take (acquire) still synchronises with that releaser.
  std::uint64_t current = permits_.load(std::memory_order_relaxed);
  for (;;) {
    const std::uint64_t take = std::min(current >> kCountShift, n);
    if (take == 0) return 0;
    if (permits_.compare_exchange_weak(current, current - (take << kCountShift),
                                       std::memory_order_relaxed, std::memory_order_relaxed))
      return take;
  }
}

}  // namespace volt
