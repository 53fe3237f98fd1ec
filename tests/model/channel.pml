/*
 * SPIN model of the bounded channel's wait/wake protocol: the Vyukov ring
 * (claim by CAS, publish by the slot's stamp), the Dekker flags, the fast
 * slots and FIFO lists of both sides, re-registration of a woken operation
 * that finds the ring not ready, the wake-up chain after a woken operation
 * succeeds, cancellation passing a wake-up on, and the senders' two modes
 * (relaxed: barging, coalesced wake-ups; strict: the gate, no barging). As
 * implemented in
 *   include/volt/channel/mpmc.hpp        Channel::try_push / try_pop,
 *                                        pass_on_after_woken_*, Send / Recv
 *                                        (attempt, enqueue, retry_if_notified)
 *                                        push_reserved, reserve_locked,
 *                                        room_for, send_reserved
 *   include/volt/detail/channel_waiters.hpp, src/channel/channel_waiters.cpp
 *                                        wake_one, enqueue, cancel,
 *                                        attempt_behind_gate, release_reserved,
 *                                        retry_granted, drop_grant, wake_all
 *
 * Property: no lost wake-up, i.e. no deadlock. Producer p sends NV values;
 * consumers take QUOTA values each, the quotas adding up to what is sent. A
 * consumer that has its quota stops, so every value must reach a consumer
 * still wanting one. An operation that waits blocks on its waiter's state
 * becoming NOTIFIED; if a wake-up is lost, every process ends up blocked
 * with values (or room) in the ring: SPIN reports an invalid end state.
 * Also asserted: head <= tail <= head + CAP, and exactly the values sent
 * were received.
 *
 * With -DCLOSE a closer process sets the closed mark (a bit of the tail
 * word) and wakes both sides at any point; consumers then receive until
 * they see the channel closed and drained, producers send until refused, and
 * the end state requires received == sent. Closing is not "wake everyone,
 * done": a send claimed before the mark and published after close()'s
 * wake_all, with receivers re-queued behind its slot, must wake them all
 * (DONE_CLOSING; negative control NO_CLOSING_WAKE_ALL), and a receive behind
 * a slot the previous lap's receive still reads must see the mark
 * (NO_CLOSED_BEHIND_READ).
 *
 * Senders (volt/detail/channel_waiters.hpp, "Gated"): a slot freed while a
 * sender waits is granted to the oldest (wake_one under the lock,
 * grants++). Relaxed mode (strict = 0): an ungranted push (try_send, a
 * first attempt) claims whenever there is room (barging), the senders' flag
 * is down while a grant is outstanding (coalesced: receives that free more
 * slots wake nobody), whoever ends the last grant with senders queued
 * raises it and looks for room (update_flags, then the pass-on), and a
 * registrant raises it only when no grant is outstanding and always
 * re-checks. A granted push that finds no room re-queues at the front
 * (regrant); STRICT_AFTER failed retries in a row by one waiter make the
 * side strict (the original gated protocol, a655a79, 4c10c6f): the gate
 * bit of the tail word is set and an ungranted push reports full, the flag
 * goes with the queue, a registrant re-checks only when it is the oldest
 * (nobody queued, no grant) or the channel is closed (the gate's fetch_or
 * returns the mark); that waiter is starving, and strict mode ends, and
 * the gate clears unless slots are reserved, when no waiter is starving any
 * more: a starving waiter's turn ends when its granted retry or re-check
 * completes or it is withdrawn (end_turn; asserted: a starving waiter is
 * always queued or holds a grant, and a fresh registration's count is 0).
 * (Strict mode used to end only when nobody waited and no grant was
 * outstanding, which a ring kept full never reached.) Negative control
 * NO_RETRY_END_TURN: a served retry does not end the turn (the side would
 * stay strict for good; the assertions catch the stale count). One destroyed
 * holding a grant passes it on (drop_grant). Asserted in try_push: an
 * ungranted claim happens only while the side is relaxed and nothing is
 * reserved. Negative control NO_GRANT_END_RAISE: the end of the last grant
 * does not raise the flag (senders queued behind it wait forever).
 * ALWAYS_STRICT: strict from the start and for good (the gate set), the
 * original gated protocol alone. NO_CLOSED_RECHECK (run with ALWAYS_STRICT,
 * where the search reaches it in seconds): a strict registrant that is not
 * the oldest never re-checks, even after close() (the hang 4c10c6f fixed:
 * woken senders still hold grants, the late registrant waits forever).
 * NO_REGRANT_PASS drops the pass-on after a regrant's re-check completes;
 * the configurations run here do not need it (a receive that follows the
 * pushed value wakes the next sender), so it is no control, only a switch.
 * REAWAIT=n: a queued operation interrupted (a timeout's lvalue operand)
 * and awaited again, keeping its place, n times in total.
 * A woken sender's granted retry runs under the senders' lock
 * (retry_granted), which ends its grant when the push completes.
 *
 * PERMIT=n: producer 1 is a permit user (Sender::reserve + Permit::send,
 * volt/detail/channel_waiters.hpp "Reservations"): `reserved` counts held
 * slots under the senders' lock, the gate stays set while it is non-zero
 * (and is set, in either mode, around every reservation's check and count:
 * the first attempt, the re-check and the woken retry; NO_RESERVE_GATE sets
 * it for the re-check and retry only while strict, and a barging push takes
 * the slot between the check and the count),
 * a reservation and every granted push check room for themselves plus the
 * reserved slots (room_for), the permit's send claims lock-free and then
 * ends its reservation waking the oldest waiter (release_reserved); up to n
 * permits are dropped unused (release_reserved). Asserted in push_reserved:
 * the permit's slot is free or being read, never a full ring. Negative
 * controls: NO_ACCOUNTING (granted pushes ignore the reserved slots: the
 * permit finds the ring full), NO_USED_WAKE (a used reservation ends
 * waking nobody: a sender whose retry counted the slot twice waits forever;
 * the lost wake-up this model found in the first version).
 *
 * Step-to-line mapping:
 *   P_gate  include/volt/channel/mpmc.hpp:189  if (!kGranted && (word & send_gate_bit_)) {
 *   P_claim  include/volt/channel/mpmc.hpp:211  if (tail_.compare_exchange_weak(word, next(tail) | (word & send_gate_bit_),
 *   P_C1  include/volt/channel/mpmc.hpp:216  slot.stamp.store(tail + 1, std::memory_order_seq_cst);
 *   P_closing  include/volt/channel/mpmc.hpp:224  if (tail_.load(std::memory_order_seq_cst) & mark_bit_) return RingResult::kDoneClosing;
 *   G_claim  include/volt/channel/mpmc.hpp:406  if (head_.compare_exchange_weak(head, next(head), std::memory_order_relaxed,
 *   G_C1  include/volt/channel/mpmc.hpp:413  slot.stamp.store(head + one_lap_, std::memory_order_seq_cst);
 *   G_empty  include/volt/channel/mpmc.hpp:423  if ((tail & ~flags()) == head)
 *   G_behind_read  include/volt/channel/mpmc.hpp:432  if ((tail & mark_bit_) && (tail & ~flags()) == head) return RingResult::kClosed;
 *   closer_mark  include/volt/channel/mpmc.hpp:449  tail_.fetch_or(mark_bit_, std::memory_order_seq_cst);
 *   closer_recv  include/volt/channel/mpmc.hpp:451  recv_waiters_.wake_all();
 *   closer_send  include/volt/channel/mpmc.hpp:452  send_waiters_.wake_all();
 *   pass_recv  include/volt/channel/mpmc.hpp:503  if (value_at_head()) recv_waiters_.wake_one();
 *   pass_send  include/volt/channel/mpmc.hpp:506  if (room_at_tail()) send_waiters_.wake_one();
 *   wake_all_closing  include/volt/channel/mpmc.hpp:511  if (pushed == RingResult::kDoneClosing) {
 *   S_drop_grant  include/volt/channel/mpmc.hpp:815  channel_->send_waiters().drop_grant(&waiter_);
 *   S_wake_recv  include/volt/channel/mpmc.hpp:889  if (wake_receiver) channel_->wake_receivers(pushed);
 *   S_regrant  include/volt/channel/mpmc.hpp:904  const bool regrant = std::exchange(holds_grant_, false);
 *   S_retry  include/volt/channel/mpmc.hpp:928  if (!channel_->send_waiters().retry_granted(&waiter_, &recheck, this)) {
 *   S_retry_wake  include/volt/channel/mpmc.hpp:933  channel_->wake_receivers(pushed_);
 *   S_pass_on  include/volt/channel/mpmc.hpp:934  channel_->pass_on_after_woken_send();
 *   R_wake_send  include/volt/channel/mpmc.hpp:1395  if (wake_sender) channel_->send_waiters().wake_one();
 *   R_pass_on  include/volt/channel/mpmc.hpp:1421  if (value_) channel_->pass_on_after_woken_recv();
 *   C2  include/volt/detail/channel_waiters.hpp:158  if (waiting_.load(std::memory_order_seq_cst)) wake_one_slow();
 *   E_regrant  src/channel/channel_waiters.cpp:20  if (++waiter->regrants == kStrictAfter) ++starving_;
 *   E_R1  src/channel/channel_waiters.cpp:29  waiting_.store(true, std::memory_order_seq_cst);
 *   E_gate  src/channel/channel_waiters.cpp:37  const std::uint64_t word = gate_word_->fetch_or(gate_bit_, std::memory_order_seq_cst);
 *   E_oldest  src/channel/channel_waiters.cpp:45  oldest = regrant || (word & closed_bit_) ||
 *   E_R2  src/channel/channel_waiters.cpp:49  if (oldest && recheck(context)) {
 *   E_fast  src/channel/channel_waiters.cpp:61  fast_.compare_exchange_strong(empty, waiter, std::memory_order_release,
 *   E_front  src/channel/channel_waiters.cpp:69  list_.push_front(waiter);
 *   E_back  src/channel/channel_waiters.cpp:71  list_.push_back(waiter);
 *   W_lockfree  src/channel/channel_waiters.cpp:90  if (gate_word_ == nullptr) waiter = fast_.exchange(nullptr, std::memory_order_acquire);
 *   W_grant  src/channel/channel_waiters.cpp:96  if (waiter != nullptr && gate_word_ != nullptr) ++granted_;
 *   retry_done  src/channel/channel_waiters.cpp:211  if (done) {
 *   drop_grant  src/channel/channel_waiters.cpp:122  if (waiter != nullptr) ++granted_;
 *   X_cancel_fast  src/channel/channel_waiters.cpp:139  if (fast_.compare_exchange_strong(expected, nullptr, std::memory_order_relaxed) ||
 *   X_wait_waker  src/channel/channel_waiters.cpp:156  while (waiter->state.load(std::memory_order_acquire) != ChannelWaiter::kNotified)
 *   X_pass  src/channel/channel_waiters.cpp:164  drop_grant(waiter);
 *   A_grant  src/channel/channel_waiters.cpp:177  if (gate_word_ != nullptr) ++granted_;
 *   clear_flag  src/channel/channel_waiters.cpp:254  waiting_.store(false, std::memory_order_relaxed);
 *   gate_reserved  src/channel/channel_waiters.cpp:256  if (gate_word_ == nullptr || strict() || reserved_.load(std::memory_order_relaxed) != 0) return;
 *   clear_gate  src/channel/channel_waiters.cpp:263  gate_word_->fetch_and(~gate_bit_, std::memory_order_relaxed);
 *   K_account  include/volt/channel/mpmc.hpp:199  if (reserved != 0 && !room_for(tail, reserved + 1)) return RingResult::kNotNow;
 *   K_room  include/volt/channel/mpmc.hpp:366  if (stamp + one_lap_ != stamp_free + 1) return false;
 *   K_reserve  include/volt/channel/mpmc.hpp:347  send_waiters_.add_reserved_locked(n);
 *   K_push_spin  include/volt/channel/mpmc.hpp:281  if (stamp + one_lap_ == tail + 1) backoff.once();
 *   K_used  include/volt/channel/mpmc.hpp:291  send_waiters_.release_reserved(1);
 *   K_oldest  src/channel/channel_waiters.cpp:197  !strict() || (word & closed_bit_) ||
 *   K_release  src/channel/channel_waiters.cpp:223  reserved_.store(reserved_.load(std::memory_order_relaxed) - n, std::memory_order_relaxed);
 *   E_R1_cond  src/channel/channel_waiters.cpp:26  if (!gated || strict() || granted_ == 0) {
 *   E_gate_when  src/channel/channel_waiters.cpp:32  if (gated && (strict() || reserves)) {
 *   E_flags  src/channel/channel_waiters.cpp:74  update_flags();  // the gate, if a reservation's re-check set it for nothing
 *   retry_gate  src/channel/channel_waiters.cpp:209  if (reserves) gate_word_->fetch_or(gate_bit_, std::memory_order_seq_cst);
 *   T_end_turn  include/volt/detail/channel_waiters.hpp:251  if (waiter->regrants >= kStrictAfter) --starving_;
 *   E_end_turn  src/channel/channel_waiters.cpp:50  if (gated) end_turn(waiter);
 *   retry_end_turn  src/channel/channel_waiters.cpp:213  end_turn(waiter);
 *   X_end_turn  src/channel/channel_waiters.cpp:143  if (gate_word_ != nullptr) end_turn(waiter);
 *   drop_end_turn  src/channel/channel_waiters.cpp:120  end_turn(gone);
 *   F_want  src/channel/channel_waiters.cpp:245  if (queued && (gate_word_ == nullptr || strict() || granted_ == 0)) {
 *   F_raise  src/channel/channel_waiters.cpp:249  if (!waiting_.load(std::memory_order_relaxed)) waiting_.store(true, std::memory_order_seq_cst);
 *   S_regrant_pass  include/volt/channel/mpmc.hpp:914  if (regrant) channel_->pass_on_after_woken_send();
 *   K_regrant_pass  include/volt/channel/mpmc.hpp:1171  if (regrant && phase_ == kReserved) channel_->pass_on_after_woken_send();
 *   K_retry_gate  include/volt/channel/mpmc.hpp:1183  if (!channel_->send_waiters().retry_granted(&waiter_, &recheck, this, true)) {
 *
 * Not modelled: the value
 * itself (only positions), the waker (a woken task re-polls and runs the
 * ResumeSlot check = the model's retry), the budget yield (a delay), the
 * bounded spin on an in-flight slot (the model reports kNotNow at once; a
 * spin that sees the in-flight operation finish is an interleaving where the
 * load came later). Positions are absolute (slot = pos % CAP); the stamp
 * of position p is 2p when the slot is free for the send at p and 2p + 1 when
 * it holds the value for the receive at p (freeing it writes 2(p + CAP)). The
 * code's lap/index stamps (lap distance one_lap > capacity + 1) map onto
 * these keeping order and distinctness; stamps of p and p + 1 alone would
 * collide at CAP = 1 (value at p = free at p + 1).
 * SPIN interleaves sequentially consistently: that is what the seq_cst
 * stamp stores, stamp loads and flag accesses give. The negative control
 * RELAXED_DEKKER models what acquire/release would permit instead: the
 * flag load of the side that changed the ring is satisfied before its
 * publishing store (a store buffer), i.e. moved above it.
 *
 * Switches: -DCAP=n -DNP=n -DNC=n -DNV=n (values per producer) -DQUOTA=n
 * (values per consumer; NC*QUOTA must equal NP*NV), -DCANCEL=n (waits that
 * may be cancelled, in total), -DCLOSE (a closer; QUOTA is then ignored),
 * -DREAWAIT=n, -DSTRICT_AFTER=n (default 3, the code's kStrictAfter),
 * -DALWAYS_STRICT,
 * -DNO_REGRANT_PASS, -DPERMIT=n (see above), negative controls
 * -DNO_ACCOUNTING, -DNO_USED_WAKE, -DNO_RESERVE_GATE, -DNO_GRANT_END_RAISE,
 * -DRELAXED_DEKKER, -DNO_PASS_ON (no wake-up chain after a
 * woken success), -DNO_PASS_CANCEL (a cancelled woken waiter drops its
 * wake-up), -DNO_CLOSING_WAKE_ALL, -DNO_CLOSED_BEHIND_READ,
 * -DNO_CLOSED_RECHECK, -DNO_RETRY_END_TURN (see above).
 */

#ifndef CAP
#define CAP 2
#endif
#ifndef NP
#define NP 2
#endif
#ifndef NC
#define NC 2
#endif
#ifndef NV
#define NV 1
#endif
#ifndef QUOTA
#define QUOTA 1
#endif
#ifndef CANCEL
#define CANCEL 0
#endif
#ifndef REAWAIT
#define REAWAIT 0
#endif
#ifndef STRICT_AFTER
#define STRICT_AFTER 3
#endif

#define NW (NP + NC + 1)  /* waiter ids 1..NP+NC; 0 = none */
#define RECV 0            /* receivers waiting for values */
#define SEND 1            /* senders waiting for room */
#define MAXW 4            /* list capacity per side */

#define IDLE 0
#define QUEUED 1
#define NOTIFIED 2

#define NOTNOW 0
#define DONE 1
#define CLOSED 2
#define DONE_CLOSING 3

byte head = 0;
byte tail = 0;
byte stamp[CAP];
byte received = 0;
byte cancels = CANCEL;
byte reawaits = REAWAIT;
byte sent_total = 0;
bit closed = 0;
#ifdef ALWAYS_STRICT
bit gate = 1;        /* the senders' gate: a bit of the tail word */
#else
bit gate = 0;        /* the senders' gate: a bit of the tail word */
#endif
byte grants = 0;     /* woken senders holding a grant (under lk[SEND]) */
#ifdef ALWAYS_STRICT
bit strict = 1;      /* the senders' side is strict (under lk[SEND]) */
#else
bit strict = 0;      /* the senders' side is strict (under lk[SEND]) */
#endif
byte regrants[NW];   /* per waiter: granted retries in a row that found no room */
byte starving = 0;   /* waiters whose regrants reached STRICT_AFTER and whose
                        turn has not ended (under lk[SEND]); strict while > 0 */
#ifdef PERMIT
byte reserved = 0;   /* slots held by permits (under lk[SEND]) */
byte drops = PERMIT; /* permits the permit user may drop unused */
#define RESERVED reserved
#else
#define RESERVED 0
#endif

/* per side: the Dekker flag, the fast slot, the lock, the FIFO list */
bit flag[2];
byte fast[2];
bit lk[2];
byte list0[MAXW];
byte list1[MAXW];
byte qlen[2];
byte state[NW];

inline lock(q) { atomic { lk[q] == 0 -> lk[q] = 1 } }
inline unlock(q) { lk[q] = 0 }

inline list_push(q, w) {
  if
  :: q == RECV -> list0[qlen[q]] = w
  :: else -> list1[qlen[q]] = w
  fi;
  qlen[q]++
}
/* inserts w at the front (senders' list only: the regrant) */
inline list_push_front(q, w) {
  k = qlen[q];
  do
  :: k > 0 -> list1[k] = list1[k - 1]; k--
  :: else -> break
  od;
  list1[0] = w;
  qlen[q]++;
  k = 0
}
/* removes the element at index k, shifting the rest (order kept) */
inline list_remove_at(q, k) {
  do
  :: k + 1 < qlen[q] ->
     if
     :: q == RECV -> list0[k] = list0[k + 1]
     :: else -> list1[k] = list1[k + 1]
     fi;
     k++
  :: else -> break
  od;
  qlen[q]--
}
inline list_at(q, k, out) {
  if
  :: q == RECV -> out = list0[k]
  :: else -> out = list1[k]
  fi
}

/* update_flags, lock held. Receivers: the flag goes with the queue.
 * Senders: strict mode ends when nobody waits and no grant is outstanding;
 * the flag is "queued, and strict or no grant outstanding" (relaxed mode
 * coalesces: while a grant is outstanding the flag is down); the gate is
 * cleared when the side is relaxed and nothing is reserved. Raising the flag
 * here happens only where the last grant ended with senders queued; the
 * caller then looks for room (the pass-on). NO_GRANT_END_RAISE: the flag is
 * never raised here (lowered or kept only). */
inline update_flags(q) {
  if
  :: q == SEND ->
     /* a starving waiter is queued or holds a grant (end_turn's claim) */
     assert(qlen[q] != 0 || fast[q] != 0 || grants != 0 || starving == 0);
     if
     :: (qlen[q] != 0 || fast[q] != 0) && (strict || grants == 0) ->
#ifndef NO_GRANT_END_RAISE
        flag[q] = 1
#else
        skip
#endif
     :: else -> flag[q] = 0
     fi;
     if :: !strict && RESERVED == 0 -> gate = 0 :: else -> skip fi
  :: else ->
     if :: qlen[q] == 0 && fast[q] == 0 -> flag[q] = 0 :: else -> skip fi
  fi
}

/* pop_oldest, lock held: the fast slot, else the list's front */
inline pop_oldest(q) {
  atomic { w = fast[q]; fast[q] = 0 };
  if
  :: w == 0 && qlen[q] > 0 -> k = 0; list_at(q, k, w); list_remove_at(q, k)
  :: else -> skip
  fi
}

/* ChannelWaiters::wake_one. `seen` is the flag value the caller read: the
 * flag load (C2) right here, or, under RELAXED_DEKKER, the value it read
 * before its publishing store. */
inline wake_one(q, seen) {
  if
  :: seen && q == SEND ->                          /* gated: under the lock, a grant */
     lock(q);
     pop_oldest(q);
     if :: w != 0 -> grants++ :: else -> skip fi;
     update_flags(q);
     if :: w != 0 -> state[w] = NOTIFIED :: else -> skip fi;
     unlock(q)
  :: seen && q == RECV ->
     atomic { w = fast[q]; fast[q] = 0 };          /* lock-free exchange */
     if
     :: w != 0 -> state[w] = NOTIFIED               /* waker moved, then published */
     :: else ->
        lock(q);
        atomic { w = fast[q]; fast[q] = 0 };
        if
        :: w == 0 && qlen[q] > 0 -> k = 0; list_at(q, k, w); list_remove_at(q, k)
        :: else -> skip
        fi;
        update_flags(q);
        if
        :: w != 0 -> state[w] = NOTIFIED
        :: else -> skip
        fi;
        unlock(q)
     fi
  :: else -> skip
  fi;
  w = 0; k = 0
}

#ifdef PERMIT
/* Channel::room_for: k more values fit from position tt on: the position
 * k - 1 past it was freed by the previous lap's receive, or is claimed by a
 * receive still reading it. */
inline room_for(tt, kk) {
#ifdef ROOM_TAIL_ONLY
  p = tt;  /* control: a look at the tail slot only, ignoring kk */
#else
  p = tt + kk - 1;
#endif
  s = stamp[p % CAP];
  room = (kk <= CAP) && (s == 2 * p || (p >= CAP && s == 2 * (p - CAP) + 1 && head + CAP > p));
  p = 0; s = 0
}

/* Channel::reserve_locked, under lk[SEND]. */
inline reserve_locked(res) {
  atomic { t = tail; c = closed };
  if
  :: c -> res = CLOSED
  :: else ->
     room_for(t, reserved + 1);
     if :: room -> reserved++; res = DONE :: else -> res = NOTNOW fi
  fi;
  t = 0; c = 0; room = 0
}
#endif

/* Channel::try_push. `pre` = the receivers' flag as read before the
 * publishing store (RELAXED_DEKKER only). The closed mark is a bit of the
 * tail word: (tail, closed) are read and CASed together. DONE_CLOSING: the
 * mark was set between the claim and the publish (the load after it). */
inline try_push(res, granted) {
  res = NOTNOW;
  do
  :: atomic { t = tail; c = closed; g = gate };
     if
     :: c -> res = CLOSED; break
     :: !c && g && !granted -> break               /* gated: full */
     :: else -> skip
     fi;
#ifdef PERMIT
     /* a granted push (under the lock) leaves room for the reserved slots */
     if
#ifndef NO_ACCOUNTING
     :: granted && reserved != 0 ->
        room_for(t, reserved + 1);
        if :: !room -> break :: else -> skip fi
#endif
     :: else -> skip
     fi;
#endif
     s = stamp[t % CAP];
     if
     :: s == 2 * t ->
        atomic {
          if
          :: tail == t && !closed && gate == g -> tail = t + 1; claimed = 1;
             /* an ungranted claim only while the side is relaxed (no
              * barging while strict) and nothing is reserved */
             assert(granted || (!strict && RESERVED == 0))
          :: else -> claimed = 0
          fi
        };
        if
        :: claimed ->
#ifdef RELAXED_DEKKER
           pre = flag[RECV];
#endif
           stamp[t % CAP] = 2 * t + 1;             /* publish: C1 */
           res = DONE; claimed = 0;
#ifndef NO_CLOSING_WAKE_ALL
           if :: closed -> res = DONE_CLOSING :: else -> skip fi;
#endif
           break
        :: else -> skip                            /* CAS lost: retry */
        fi
     :: s < 2 * t -> break                         /* full, or a receive in flight */
     :: s > 2 * t -> skip                          /* stale tail: retry */
     fi
  od;
  t = 0; s = 0; c = 0; g = 0
}

inline try_pop(res) {
  res = NOTNOW;
  do
  :: h = head;
     s = stamp[h % CAP];
     if
     :: s == 2 * h + 1 ->
        atomic {
          if
          :: head == h -> head = h + 1; claimed = 1
          :: else -> claimed = 0
          fi
        };
        if
        :: claimed ->
#ifdef RELAXED_DEKKER
           pre = flag[SEND];
#endif
           stamp[h % CAP] = 2 * (h + CAP);         /* free the slot: C1 */
           res = DONE; claimed = 0; break
        :: else -> skip
        fi
     :: s == 2 * h ->                              /* empty, or a send in flight */
        atomic { t = tail; c = closed };
        if
        :: t == h && c -> res = CLOSED
        :: else -> skip
        fi;
        break
     :: s < 2 * h ->                               /* the previous lap's receive still reads */
#ifndef NO_CLOSED_BEHIND_READ
        atomic { t = tail; c = closed };
        if
        :: t == h && c -> res = CLOSED
        :: else -> skip
        fi;
#endif
        break
     :: s > 2 * h + 1 -> skip                      /* stale head: retry */
     fi
  od;
  h = 0; s = 0; t = 0; c = 0
}

/* Channel::close: the mark, then every waiter of both sides. */
inline wake_all(q) {
  lock(q);
  do
  :: pop_oldest(q);
     if
     :: w != 0 && q == SEND -> grants++; state[w] = NOTIFIED
     :: w != 0 && q == RECV -> state[w] = NOTIFIED
     :: else -> break
     fi
  od;
  update_flags(q);
  unlock(q);
  w = 0; k = 0
}

inline wake_receivers(res, seen) {
  if
  :: res == DONE_CLOSING -> wake_all(RECV)
  :: else -> wake_one(RECV, seen)
  fi
}

#ifdef RELAXED_DEKKER
#define SEEN(q) pre
#else
#define SEEN(q) flag[q]
#endif

/* ChannelWaiters::end_turn, lk[SEND] held: the sender's turn is over
 * (served or withdrawn); if it was starving, one fewer is, and the side is
 * relaxed again once none is. */
inline end_turn(me) {
  if
  :: regrants[me] >= STRICT_AFTER ->
     starving--;
#ifndef ALWAYS_STRICT
     if :: starving == 0 -> strict = 0 :: else -> skip fi
#else
     skip
#endif
  :: else -> skip
  fi;
  regrants[me] = 0
}

/* ChannelWaiters::drop_grant: a woken sender gives its grant up unused. */
inline drop_grant(me) {
  lock(SEND);
  grants--;
  end_turn(me);
  pop_oldest(SEND);
  if :: w != 0 -> grants++; state[w] = NOTIFIED :: else -> skip fi;
  update_flags(SEND);
  unlock(SEND);
  w = 0; k = 0
}

/* ChannelWaiters::enqueue with the operation's attempt as the re-check. A
 * regrant counts the waiter's failed granted retries; STRICT_AFTER of them
 * make the side strict (strict_ and the gate's fetch_or are one step here:
 * the code sets both under the lock, and an ungranted claim between them
 * reads neither strict_ nor a set bit, so it is the same as one just
 * before). A registrant raises the flag (R1) unless the side is relaxed
 * and a grant is outstanding (that grant's end raises it). Relaxed: it
 * always re-checks; strict: only as the oldest, or once closed. */
inline enqueue(q, me, queued, regrant, rsv) {
  lock(q);
  if
  :: q == SEND && regrant ->
     grants--; regrants[me]++;
     if
     :: regrants[me] == STRICT_AFTER -> atomic { starving++; strict = 1; gate = 1 }
     :: else -> skip
     fi
  :: q == SEND && !regrant -> assert(regrants[me] == 0)  /* every turn ended in end_turn */
  :: else -> skip
  fi;
  if
  :: q == RECV || strict || grants == 0 -> flag[q] = 1   /* R1 */
  :: else -> skip
  fi;
  res = NOTNOW;
  if
  :: q == RECV -> try_pop(res)                     /* R2: the re-check */
  :: q == SEND ->
     c = 0; g = 1;                                 /* g: may re-check */
     if
     :: strict || rsv ->
        /* fetch_or: with R1, before R2; a reservation's re-check needs it
         * in either mode (NO_RESERVE_GATE: only while strict) */
#ifdef NO_RESERVE_GATE
        if :: strict -> atomic { gate = 1; c = closed } :: else -> c = closed fi;
#else
        atomic { gate = 1; c = closed };
#endif
#ifdef NO_CLOSED_RECHECK
        c = 0;
#endif
        if
        :: !strict || regrant || c || (grants == 0 && qlen[q] == 0 && fast[q] == 0) -> skip
        :: else -> g = 0
        fi
     :: else -> skip
     fi;
     if
     :: g ->
#ifdef PERMIT
        if
        :: rsv -> reserve_locked(res)              /* a reserve's re-check */
        :: else -> try_push(res, 1)
        fi
#else
        try_push(res, 1)                           /* a granted re-check */
#endif
     :: else -> skip
     fi;
     c = 0; g = 0
  fi;
  if
  :: res != NOTNOW ->
     if :: q == SEND -> end_turn(me) :: else -> skip fi;
     update_flags(q); unlock(q); queued = 0
  :: else ->
     state[me] = QUEUED;
     if
     :: qlen[q] == 0 && fast[q] == 0 -> fast[q] = me
     :: (qlen[q] != 0 || fast[q] != 0) && regrant -> /* back to the front */
        if :: fast[q] != 0 -> list_push_front(q, fast[q]); fast[q] = 0 :: else -> skip fi;
        list_push_front(q, me)
     :: (qlen[q] != 0 || fast[q] != 0) && !regrant -> list_push(q, me)
     fi;
     update_flags(q);                              /* the gate, if set for nothing */
     unlock(q);
     queued = 1
  fi
}

/* ChannelWaiters::cancel: the operation is destroyed while registered. */
inline cancel(q, me) {
  lock(q);
  if
  :: state[me] == QUEUED ->
     k = 0;
     do
     :: k < qlen[q] -> list_at(q, k, w); if :: w == me -> break :: else -> k++ fi
     :: else -> break
     od;
     /* the CAS fast_: me -> nullptr, one step (a waker's exchange may
      * race it: lock-free) */
     atomic {
       if
       :: fast[q] == me -> fast[q] = 0; claimed = 1
       :: else -> claimed = 0
       fi
     };
     if
     :: claimed ->
        claimed = 0; state[me] = IDLE;
        if :: q == SEND -> end_turn(me) :: else -> skip fi;
        update_flags(q); unlock(q)
     :: !claimed && k < qlen[q] ->
        list_remove_at(q, k); state[me] = IDLE;
        if :: q == SEND -> end_turn(me) :: else -> skip fi;
        update_flags(q); unlock(q)
     :: !claimed && k >= qlen[q] ->
        /* a waker took it from the fast slot and has not published yet
         * (receivers only: the senders' waker holds the lock) */
        unlock(q);
        (state[me] == NOTIFIED);
        state[me] = IDLE;
#ifndef NO_PASS_CANCEL
        if
        :: q == SEND -> drop_grant(me)
        :: else -> wake_one(q, flag[q])
        fi
#endif
     fi
  :: else ->
     unlock(q);
     state[me] = IDLE;
#ifndef NO_PASS_CANCEL
     if
     :: q == SEND -> drop_grant(me)                /* the grant passes on */
     :: else -> wake_one(q, flag[q])               /* woken, never retried: pass it on */
     fi
#else
     if :: q == SEND -> lock(q); grants--; end_turn(me); update_flags(q); unlock(q) :: else -> skip fi
#endif
  fi;
  w = 0; k = 0
}

/* Producer `me`: NV sends, or until the channel is closed. A woken sender
 * retries with its grant (retry_if_notified); a granted push that finds no
 * room re-queues at the front (regrant). A queued send may be interrupted
 * (a timeout that fired) and awaited again, keeping its place (REAWAIT). */
proctype producer(byte me) {
  byte sent = 0, res, t, h, s, w, k;
  bit claimed, pre, queued, woken, c, g, regrant;
#ifdef PERMIT
  byte p;
  bit room;
#endif
  do
  :: sent == NV -> break
  :: else ->
     if
     :: woken ->                                   /* retry_granted: under the lock, */
        lock(SEND);                                /* ending the grant if it completes */
        try_push(res, 1);
#ifndef NO_RETRY_END_TURN
        if :: res != NOTNOW -> grants--; end_turn(me) :: else -> skip fi;
#else
        if :: res != NOTNOW -> grants-- :: else -> skip fi;
#endif
        update_flags(SEND);
        unlock(SEND)
     :: else -> try_push(res, 0)
     fi;
     if
     :: res == DONE || res == DONE_CLOSING ->
        wake_receivers(res, SEEN(RECV));           /* in attempt(), or after the lock */
#ifndef NO_PASS_ON
        if
        :: woken ->                                /* pass_on_after_woken_send */
           atomic { t = tail; c = closed }; s = stamp[t % CAP];
           if :: !c && s == 2 * t -> wake_one(SEND, flag[SEND]) :: else -> skip fi;
           t = 0; s = 0; c = 0
        :: else -> skip
        fi;
#endif
        woken = 0; sent++; atomic { sent_total++ }
     :: res == CLOSED -> break
     :: res == NOTNOW ->
        regrant = woken; woken = 0;
        if
        :: regrant && cancels > 0 ->               /* destroyed holding the grant */
           atomic { cancels-- }; drop_grant(me); regrant = 0
        :: true ->
           enqueue(SEND, me, queued, regrant, 0);
           if
           :: !queued && res == CLOSED -> break
           :: !queued && res != CLOSED ->
              wake_receivers(res, flag[RECV]);
#ifndef NO_REGRANT_PASS
              if
              :: regrant ->                        /* the re-check ended a grant: pass on */
                 atomic { t = tail; c = closed }; s = stamp[t % CAP];
                 if :: !c && s == 2 * t -> wake_one(SEND, flag[SEND]) :: else -> skip fi;
                 t = 0; s = 0; c = 0
              :: else -> skip
              fi;
#endif
              regrant = 0; sent++; atomic { sent_total++ }
           :: queued ->
              regrant = 0;
              do
              :: state[me] == NOTIFIED -> state[me] = IDLE; woken = 1; break
              :: atomic { reawaits > 0 -> reawaits-- }  /* interrupted, awaited again */
              :: atomic { cancels > 0 -> cancels-- }; cancel(SEND, me); break
              od
           fi
        fi
     fi
  od
}

#ifdef PERMIT
/* ChannelWaiters::release_reserved(1): a permit given back unused; the
 * slot goes to the oldest waiter, with a grant. */
inline release_reserved() {
  lock(SEND);
  reserved--;
  pop_oldest(SEND);
  if :: w != 0 -> grants++; state[w] = NOTIFIED :: else -> skip fi;
  update_flags(SEND);
  unlock(SEND);
  w = 0; k = 0
}

/* Channel::push_reserved: the permit's claim, lock-free, past the gate. The
 * reservation guarantees the slot at the tail is free, or being read by a
 * receive that has claimed it (then it spins: retries): asserted. */
inline push_reserved(res) {
  res = NOTNOW;
  do
  :: atomic { t = tail; c = closed };
     if
     :: c -> res = CLOSED; break
     :: else -> skip
     fi;
     s = stamp[t % CAP];
     if
     :: s == 2 * t ->
        atomic {
          if
          :: tail == t && !closed -> tail = t + 1; claimed = 1
          :: else -> claimed = 0
          fi
        };
        if
        :: claimed ->
           stamp[t % CAP] = 2 * t + 1;             /* publish: C1 */
           res = DONE; claimed = 0;
           if :: closed -> res = DONE_CLOSING :: else -> skip fi;
           break
        :: else -> skip
        fi
     :: s != 2 * t ->
        /* stale tail, or a receive still reading the slot; never a full ring */
        assert(tail != t || (t >= CAP && s == 2 * (t - CAP) + 1 && head + CAP > t))
     fi
  od;
  t = 0; s = 0; c = 0
}

/* The permit user (-DPERMIT=n, in place of producer 1): each value goes
 * through reserve() (a first attempt as the oldest, try_as_oldest; else
 * queued with the senders, re-checking with reserve_locked, retrying under
 * the lock when woken, re-queued at the front without room) and then
 * permit.send (push_reserved, then the reservation ends under the lock).
 * Up to n permits are dropped unused instead (release_reserved), the value
 * then going through the next reserve. */
proctype permit_user(byte me) {
  byte sent = 0, res, t, h, s, w, k, p;
  bit claimed, pre, queued, woken, c, g, regrant, room;
  do
  :: sent == NV -> break
  :: else ->
     regrant = 0;
     lock(SEND);                                   /* attempt_behind_gate */
     atomic { gate = 1; c = closed };
     res = NOTNOW;
     if
     :: c || !strict || (grants == 0 && qlen[SEND] == 0 && fast[SEND] == 0) -> reserve_locked(res)
     :: else -> skip
     fi;
     update_flags(SEND);
     unlock(SEND);
     do
     :: res != NOTNOW -> break
     :: else ->
        enqueue(SEND, me, queued, regrant, 1);
        if
        :: !queued ->                              /* the re-check completed it */
#ifndef NO_REGRANT_PASS
           if
           :: regrant && res == DONE ->            /* it ended a grant: pass on */
              atomic { t = tail; c = closed }; s = stamp[t % CAP];
              if :: !c && s == 2 * t -> wake_one(SEND, flag[SEND]) :: else -> skip fi;
              t = 0; s = 0; c = 0
           :: else -> skip
           fi;
#endif
           regrant = 0
        :: queued ->
           regrant = 0;
           (state[me] == NOTIFIED); state[me] = IDLE;
           lock(SEND);                             /* retry_granted, behind the gate */
#ifndef NO_RESERVE_GATE
           gate = 1;
#endif
           reserve_locked(res);
           if :: res != NOTNOW -> grants--; end_turn(me) :: else -> regrant = 1 fi;
           update_flags(SEND);
           unlock(SEND);
#ifndef NO_PASS_ON
           if
           :: res == DONE ->                       /* pass_on_after_woken_send */
              atomic { t = tail; c = closed }; s = stamp[t % CAP];
              if :: !c && s == 2 * t -> wake_one(SEND, flag[SEND]) :: else -> skip fi;
              t = 0; s = 0; c = 0
           :: else -> skip
           fi
#endif
        fi
     od;
     if
     :: res == CLOSED -> break
     :: else -> skip
     fi;
     if
     :: drops > 0 -> drops--; release_reserved()   /* dropped unused */
     :: true ->
        push_reserved(res);
        if
        :: res == CLOSED -> release_reserved(); break
        :: else ->
#ifdef NO_USED_WAKE
           lock(SEND); reserved--; update_flags(SEND); unlock(SEND);
#else
           release_reserved();                     /* the reservation ends, waking */
#endif
           wake_receivers(res, SEEN(RECV));
           sent++; atomic { sent_total++ }
        fi
     fi
  od
}
#endif

/* Consumer `me`: QUOTA values, or (CLOSE) until the channel is closed and
 * drained. */
proctype consumer(byte me) {
  byte got = 0, res, t, h, s, w, k;
  bit claimed, pre, queued, woken, c, g;
#ifdef PERMIT
  byte p;
  bit room;
#endif
  do
#ifndef CLOSE
  :: got == QUOTA -> break
#endif
  :: else ->
     try_pop(res);
     if
     :: res == DONE ->
        wake_one(SEND, SEEN(SEND));
#ifndef NO_PASS_ON
        if
        :: woken ->                                /* pass_on_after_woken_recv */
           h = head; s = stamp[h % CAP];
           if :: s == 2 * h + 1 -> wake_one(RECV, flag[RECV]) :: else -> skip fi;
           h = 0; s = 0
        :: else -> skip
        fi;
#endif
        woken = 0; got++; atomic { received++ }
     :: res == CLOSED -> break
     :: res == NOTNOW ->
        enqueue(RECV, me, queued, 0, 0);
        if
        :: !queued && res == CLOSED -> break
        :: !queued && res == DONE ->
           wake_one(SEND, flag[SEND]); woken = 0; got++; atomic { received++ }
        :: queued ->
           woken = 0;
           do
           :: state[me] == NOTIFIED -> state[me] = IDLE; woken = 1; break
           :: atomic { reawaits > 0 -> reawaits-- }  /* interrupted, awaited again */
           :: atomic { cancels > 0 -> cancels-- }; cancel(RECV, me); break
           od
        fi
     fi
  od
}

#ifdef CLOSE
/* close() from any handle, at any point. */
proctype closer() {
  byte w, k;
  closed = 1;                                      /* fetch_or of the mark */
  wake_all(RECV);
  wake_all(SEND)
}
#endif

/* The ring never holds more than CAP values nor fewer than none. */
active proctype invariants() {
endinv:
  do
  :: atomic { !(head <= tail && tail <= head + CAP) -> assert(false) }
  od
}

init {
  byte i;
#ifndef CLOSE
  assert(NC * QUOTA == NP * NV);
#endif
  atomic {
    i = 0;
    do
    :: i < CAP -> stamp[i] = 2 * i; i++
    :: else -> break
    od;
    i = 1;
#ifdef PERMIT
    run permit_user(i); i++;
#endif
    do
    :: i <= NP -> run producer(i); i++
    :: else -> break
    od;
    do
    :: i <= NP + NC -> run consumer(i); i++
    :: else -> break
    od;
#ifdef CLOSE
    run closer();
#endif
  };
  /* every process has finished: everything sent was received */
  (_nr_pr == 2);
  assert(received == sent_total);
#ifndef CLOSE
  assert(received == NP * NV);
#endif
  assert(head == tail)
}
