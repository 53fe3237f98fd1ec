// volt/detail/channel_waiters.hpp: the operations waiting on one side of a
// bounded channel (receivers waiting for a value, or senders waiting for
// room), and the protocol that keeps a wake-up from being lost between the
// lock-free ring and the waiters.
//
// The ring (volt/channel/mpmc.hpp) is lock-free; waiting is not. A waiter
// registers under `lock_` in one of two places: the fast slot (`fast_`, only
// when nobody else waits, so it always holds the oldest waiter) or the FIFO
// list. The side that changes the ring (a send that published a value, a
// receive that freed a slot) calls wake_one(), which takes the fast slot's
// waiter with one exchange, without the lock, or else the list's oldest under
// the lock. The woken operation retries the ring rather than being handed
// anything, so a woken operation that is destroyed before it retries loses
// nothing: it passes its wake-up on (cancel()).
//
// Dekker flags. wake_one() must not take the lock on every send, so it first
// reads `waiting_`, which a registrant sets before it re-checks the ring:
//
//   registrant (under lock_)              ring changer
//   R1 waiting_.store(true, seq_cst)      C1 stamp.store(published, seq_cst)
//   R2 re-check the ring (seq_cst loads)  C2 waiting_.load(seq_cst)
//
// All four are seq_cst, so they sit in one total order S. If C2 reads false,
// C2 precedes R1 in S, so C1 precedes R2 and the re-check sees the change
// (and the registrant does not wait). If C2 reads true, the changer goes on
// to wake a waiter, taking the lock if the fast slot is empty, which orders
// it after any registration in progress. This is a store followed by a load
// of a different location on each side: with release stores and acquire
// loads both loads may read the old values (the reordering x86 store buffers
// and ARM both perform) and both sides miss each other, the lost wake-up the
// reference design's Zig channel hit on ARM64. tests/model/channel.pml checks the
// protocol and rejects the acquire/release variant (RELAXED_DEKKER).
//
// `waiting_` is written only under lock_. Ungated: it is cleared only when
// the fast slot and the list are both empty, so whenever a waiter is queued
// it is true (a stale true after the last waiter left only costs one lock).
// Gated: at every release of the lock it equals "a waiter is queued, and
// the mode is strict or no grant is outstanding" (update_flags).
//
// Gated (the senders' side of mpmc, set_gate()) runs in one of two modes.
//
// Relaxed (the usual one): a send that finds room takes it, even while
// other senders wait (barging, as async-channel's or crossbeam's), and the
// wake-ups are coalesced: a slot freed while senders wait wakes the oldest
// with a grant (counted in granted_, under the lock), and while any grant is
// outstanding `waiting_` reads false even though senders are queued, so the
// receives that free more slots meanwhile take no lock and wake nobody. The
// woken sender retries (retry_granted, under the lock), and from then on
// its sends take every free slot lock-free until the ring is full again: a
// wake-up moves a batch, not one value. (Without this, a full ring with
// senders on both cores cost a lock hand-off and a task switch per value:
// channel_mpmc at 2 workers 370 ns a value, against 25 ns on one worker.)
// Whoever ends the last grant raises `waiting_` again if senders are queued
// (update_flags, R1) and then looks for room (the pass-on, R2), against the
// receive's C1 (its slot freed) and C2 (`waiting_` read): either the receive
// sees the flag and wakes, or the pass-on sees the room and wakes. A
// registrant raises the flag itself (R1) only when no grant is outstanding,
// and always re-checks the ring; one that queues behind an outstanding
// grant is woken by that grant's end.
//
// Strict (no barging, as Tokio's semaphore): entered when a woken sender's
// granted retry has found no room kStrictAfter times in a row (running
// senders took every slot freed for it; a reserve_many waiting for n slots
// would otherwise wait as long as single sends keep coming): that waiter is
// starving. Left when no waiter is starving any more: a starving waiter's
// turn ends when it is served (its granted retry or re-check completes) or
// withdrawn (cancel, drop_grant), which end_turn() counts. (Until 2026-11
// strict mode lasted until nobody waited and no grant was outstanding; on a
// ring kept full by senders on two cores that never came, and channel_mpmc
// at 2 workers ran 1 time in 3 in strict mode for good: a grant, a task
// switch and two lock hand-offs per value, 120-660 ns a value against
// 63-70 ns.) While strict, a gate bit is set
// in the ring's tail word, and a push that is not granted (try_send, a
// first attempt) fails with "full" (its claiming CAS reads the tail word, so
// the bit and the claim are one atomic decision); every freed slot is
// granted to the oldest waiter (`waiting_` stays true while any is queued);
// a registrant re-checks only when it is the oldest (nobody queued, no grant
// outstanding) or the channel is closed (no grant will come; the re-check
// reports closed). So a waiting sender's granted retry fails at most
// kStrictAfter times before it is served in order.
// The gate is also set while slots are reserved (below). A woken sender
// retries with its grant under the lock (retry_granted, which ends the grant
// if the push completed or found the channel closed; under the lock so that
// it is ordered against reservations, below), or re-queues at the front
// releasing it (enqueue with regrant: its push found no room, e.g. taken by
// a barging send or the slot still being read), raising the flag and
// re-checking as the oldest; if that re-check completes, it passes a
// wake-up on like a woken success. One destroyed while holding a grant
// passes it to the next waiter (cancel / drop_grant).
//
// Reservations (gated side only: mpmc's Sender::reserve, Permit). A permit
// holds a slot without claiming a ring position (a claimed position must be
// published promptly, or every receive behind it stalls). `reserved_` counts
// the slots permits hold, and the gate stays set while it is non-zero (in
// either mode), so no ungranted push claims while a permit is held: the
// try_send / try_recv fast path is untouched while no permit is held and
// the mode is relaxed (the gate bit is clear). While the gate is set every
// claim is one of: (a) a granted push or a registrant's re-check, made
// under lock_ after checking that the ring has room for it plus every
// reserved slot (Channel::room_for), (b) a reservation, made under lock_
// after the same check, or (c) a permit's own send, lock-free, which uses
// the slot its reservation counted and ends the reservation (under lock_)
// only after its claim, so a check in between counts that slot twice (the
// safe side). An ungranted push that loaded the tail word before the gate
// was set fails its CAS (the gate's fetch_or changed the word). Hence, with
// head the receives' claim index: tail - head + reserved <= capacity at
// every point, and a permit's send always finds its slot free, or claimed by
// a receive still reading it (a few instructions from done: it spins).
// A reservation given back unused (release_reserved) wakes up to that many
// waiting senders with grants. One used by its permit's send ends the same
// way (release_reserved(1), after the claim), waking the oldest waiter too
// although the slot is now taken: a granted retry made between the claim
// and the end of the reservation counted that slot twice, may have found no
// room that way and re-queued, and nothing else would wake it (the receive
// of the value may already have run and granted it). A waiter woken with no
// room re-queues at the front (regrant). tests/model/channel.pml -DPERMIT
// found that lost wake-up when the used reservation woke nobody.
#pragma once

#include <atomic>
#include <cstdint>

#include "volt/detail/intrusive_list.hpp"
#include "volt/detail/spin_lock.hpp"
#include "volt/detail/waker.hpp"

namespace volt::detail {

// One waiting channel operation, living inside the operation object.
//   kIdle      not registered (the owner may reuse or destroy it)
//   kQueued    in the fast slot or the list, or taken out of the fast slot by
//              a waker that has not yet published kNotified
//   kNotified  taken out and woken: the owner retries the ring
// The waker is moved out before kNotified is published (release); after that
// store the waking thread never touches the waiter (its owner may free it).
struct ChannelWaiter : IntrusiveLink {
  enum : std::uint32_t { kIdle = 0, kQueued = 1, kNotified = 2 };
  std::atomic<std::uint32_t> state{kIdle};
  // Gated: how many granted retries in a row found no room (under lock_;
  // kStrictAfter of them make this waiter starving and the side strict
  // until its turn ends, see the top).
  std::uint32_t regrants = 0;
  Waker waker;
  // acquire: pairs with the waker's release store of kNotified.
  bool notified() const noexcept { return state.load(std::memory_order_acquire) == kNotified; }
};

class ChannelWaiters {
 public:
  ChannelWaiters() noexcept = default;
  ChannelWaiters(const ChannelWaiters&) = delete;
  ChannelWaiters& operator=(const ChannelWaiters&) = delete;

  // Called after the ring changed (C1 above was this thread's last seq_cst
  // store): wakes the oldest waiter, if any.
  void wake_one() noexcept {
    // seq_cst: C2 of the Dekker pair (see the top of this file).
    if (waiting_.load(std::memory_order_seq_cst)) wake_one_slow();
  }

  // Registers `waiter` (whose waker the caller set) unless `recheck(context)`,
  // run under the lock after the flag is raised, completes the operation.
  // True: queued (kQueued); false: recheck completed it, nothing queued.
  // recheck runs under this side's lock: it must not wake the other side
  // (whose re-checks hold that side's lock and would wake this one); the
  // caller wakes after enqueue returns.
  // regrant (gated): the caller was woken with a grant and its granted push
  // found no room (taken by a barging send, or a receive still reading the
  // slot): it goes back to the front of the queue, releasing the grant, and
  // re-checks first; if that re-check completes the operation, the caller
  // passes a wake-up on as after a woken success (see the top).
  // reserves (gated): the re-check reserves slots (Channel::reserve_locked),
  // so it runs with the gate set, in either mode (see "Reservations").
  bool enqueue(ChannelWaiter* waiter, bool (*recheck)(void*), void* context, bool regrant = false,
               bool reserves = false) noexcept;

  // Gated only: a woken operation (its waiter `waiter`) gives up its grant
  // unused (destroyed before retrying): the grant passes to the next waiter.
  void drop_grant(ChannelWaiter* waiter) noexcept;

  // Makes this side gated (see the top): `bit` of `*word` is set while the
  // side is strict or slots are reserved; `closed_bit` of it marks the
  // channel closed (a strict registrant then re-checks even if it is not
  // the oldest: no grant will come). Before any use.
  void set_gate(std::atomic<std::uint64_t>* word, std::uint64_t bit,
                std::uint64_t closed_bit) noexcept {
    gate_word_ = word;
    gate_bit_ = bit;
    closed_bit_ = closed_bit;
  }

  // The operation owning `waiter` (kQueued or kNotified) is being destroyed
  // or is giving up: withdraws it, and if it had been woken, passes the
  // wake-up on to the next waiter (what it was woken for may be unclaimed).
  void cancel(ChannelWaiter* waiter) noexcept;

  // Wakes every waiter (close()).
  void wake_all() noexcept;

  // Gated only. Runs `attempt(context)` under the lock with the gate set
  // (so no ungranted push can claim meanwhile): a first attempt that must be
  // atomic with the gate (try_reserve, try_send past a reservation). While
  // strict, only if the caller would be the oldest (nobody queued, no grant
  // outstanding) or the channel is closed (no barging then). True if the
  // attempt completed the operation.
  bool attempt_behind_gate(bool (*attempt)(void*), void* context) noexcept;
  // Gated only: a woken operation's retry with its grant, made under the
  // lock (so it is ordered against every reservation); on success (true) the
  // grant ends. On false the caller still holds the grant
  // and re-queues with regrant, or drops it. reserves: as enqueue's.
  bool retry_granted(ChannelWaiter* waiter, bool (*attempt)(void*), void* context,
                     bool reserves = false) noexcept;
  // Gated only. The number of reserved slots: exact under the lock (the
  // re-checks and attempts above run there), a snapshot elsewhere.
  std::uint64_t reserved() const noexcept {
    // relaxed: written only under lock_; readers under lock_ are ordered by
    // it, others (capacity()) want a snapshot.
    return reserved_.load(std::memory_order_relaxed);
  }
  // Gated, lock held (inside an attempt or re-check): n more reserved.
  void add_reserved_locked(std::uint64_t n) noexcept {
    reserved_.store(reserved_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  // Gated only: n reservations end (a dropped permit, or one whose send has
  // claimed its ring position, see the top): wakes up to n of the oldest
  // waiters, each with a grant.
  void release_reserved(std::uint64_t n) noexcept;
  // Gated: granted retries in a row that find no room before the side
  // turns strict (see the top). A sender woken by a pass-on often finds the
  // slot already taken by the sender that passed it on (still running), so
  // one failed retry is no sign of starvation. Measured on channel_mpmc at 2
  // workers (4 senders, 4 receivers, a full ring), with strict mode lasting
  // for the starving waiter's turn: with 3, 0.018 polls a value and 60-70
  // ns, the same as with no bound.
  static constexpr std::uint32_t kStrictAfter = 3;

 private:
  void wake_one_slow() noexcept;
  // lock_ held: sets waiting_ to "a waiter is queued, and (gated) the side
  // is strict or no grant is outstanding", and clears the gate bit when the
  // side is relaxed and nothing is reserved. Raising waiting_ here (the end
  // of the last grant, in retry_granted) is R1 of a pass-on: the caller
  // looks for room after it (see the top).
  void update_flags() noexcept;
  // lock_ held: takes the oldest waiter out (fast slot first), or nullptr.
  ChannelWaiter* pop_oldest() noexcept;
  // Gated, lock_ held: `waiter`'s turn is over (served, or withdrawn with
  // its grant or its place passed on): if it was starving, one fewer is,
  // and the side is relaxed again once none is. Its regrants restart.
  void end_turn(ChannelWaiter* waiter) noexcept {
    if (waiter->regrants >= kStrictAfter) --starving_;
    waiter->regrants = 0;
  }
  bool strict() const noexcept { return starving_ != 0; }

  std::atomic<bool> waiting_{false};
  // Written by registrants under lock_ (only when list_ is empty); emptied
  // by wakers with an exchange, under lock_ or not, and by cancel under it.
  std::atomic<ChannelWaiter*> fast_{nullptr};
  SpinLock lock_;
  IntrusiveList<ChannelWaiter> list_;  // guarded by lock_; front is oldest
  // Gated only (set_gate): the gate, and the number of woken waiters that
  // hold a grant and have not ended it (guarded by lock_).
  std::atomic<std::uint64_t>* gate_word_ = nullptr;
  std::uint64_t gate_bit_ = 0;
  std::uint64_t closed_bit_ = 0;
  std::uint32_t granted_ = 0;
  // Gated only, guarded by lock_: waiters queued or holding a grant whose
  // regrants reached kStrictAfter; the side is strict while any is (see the
  // top). Each is queued or holds a grant, so this is 0 whenever nobody
  // waits and no grant is outstanding.
  std::uint32_t starving_ = 0;
  // Gated only: slots held by permits (see the top). Written under lock_.
  std::atomic<std::uint64_t> reserved_{0};
};

}  // namespace volt::detail
