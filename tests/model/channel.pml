/*
 * SPIN model of the bounded channel's wait/wake protocol: the Vyukov ring
 * (claim by CAS, publish by the slot's stamp), the Dekker flags, the fast
 * slots and FIFO lists of both sides, re-registration of a woken operation
 * that finds the ring not ready, the wake-up chain after a woken operation
 * succeeds, cancellation passing a wake-up on, and the senders' gate and
 * grants (no barging). As implemented in
 *   include/volt/channel/mpmc.hpp        Channel::try_push / try_pop,
 *                                        pass_on_after_woken_*, Send / Recv
 *                                        (attempt, enqueue, retry_if_notified)
 *                                        push_reserved, reserve_locked,
 *                                        room_for, send_reserved
 *   include/volt/detail/channel_waiters.hpp, src/channel/channel_waiters.cpp
 *                                        wake_one, enqueue, cancel,
 *                                        try_as_oldest, release_reserved,
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
 * Senders are gated (no barging, a655a79, 4c10c6f): while a sender is
 * queued or holds a grant, the gate bit of the tail word is set and an
 * ungranted push (try_send, a first attempt) reports full; a slot freed
 * while senders wait is granted to the oldest (wake_one under the lock,
 * grants++); a registrant re-checks only when it is the oldest (nobody
 * queued, no grant) or the channel is closed (the gate's fetch_or returns
 * the mark); a granted push that finds no room re-queues at the front
 * (regrant), one destroyed holding a grant passes it on (drop_grant). The
 * Dekker flag goes with the queue, the gate with the queue and the grants
 * (clear_flag_if_empty). Asserted in try_push: an ungranted claim happens
 * only when no sender is queued and no grant is outstanding (no barging;
 * negative control NO_GATE). NO_CLOSED_RECHECK: a registrant that is not
 * the oldest never re-checks, even after close() (the hang 4c10c6f fixed:
 * woken senders still hold grants, the late registrant waits forever).
 * REAWAIT=n: a queued operation interrupted (a timeout's lvalue operand)
 * and awaited again, keeping its place, n times in total.
 * A woken sender's granted retry runs under the senders' lock
 * (retry_granted), which ends its grant when the push completes.
 *
 * PERMIT=n: producer 1 is a permit user (Sender::reserve + Permit::send,
 * volt/detail/channel_waiters.hpp "Reservations"): `reserved` counts held
 * slots under the senders' lock, the gate stays set while it is non-zero,
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
 *   P_gate  include/volt/channel/mpmc.hpp:178  if (!kGranted && (word & send_gate_bit_)) {
 *   P_claim  include/volt/channel/mpmc.hpp:200  if (tail_.compare_exchange_weak(word, next(tail) | (word & send_gate_bit_),
 *   P_C1  include/volt/channel/mpmc.hpp:205  slot.stamp.store(tail + 1, std::memory_order_seq_cst);
 *   P_closing  include/volt/channel/mpmc.hpp:213  if (tail_.load(std::memory_order_seq_cst) & mark_bit_) return RingResult::kDoneClosing;
 *   G_claim  include/volt/channel/mpmc.hpp:396  if (head_.compare_exchange_weak(head, next(head), std::memory_order_relaxed,
 *   G_C1  include/volt/channel/mpmc.hpp:403  slot.stamp.store(head + one_lap_, std::memory_order_seq_cst);
 *   G_empty  include/volt/channel/mpmc.hpp:412  if ((tail & ~flags()) == head)
 *   G_behind_read  include/volt/channel/mpmc.hpp:421  if ((tail & mark_bit_) && (tail & ~flags()) == head) return RingResult::kClosed;
 *   closer_mark  include/volt/channel/mpmc.hpp:435  tail_.fetch_or(mark_bit_, std::memory_order_seq_cst);
 *   closer_recv  include/volt/channel/mpmc.hpp:437  recv_waiters_.wake_all();
 *   closer_send  include/volt/channel/mpmc.hpp:438  send_waiters_.wake_all();
 *   pass_recv  include/volt/channel/mpmc.hpp:489  if (value_at_head()) recv_waiters_.wake_one();
 *   pass_send  include/volt/channel/mpmc.hpp:492  if (room_at_tail()) send_waiters_.wake_one();
 *   wake_all_closing  include/volt/channel/mpmc.hpp:497  if (pushed == RingResult::kDoneClosing) {
 *   S_drop_grant  include/volt/channel/mpmc.hpp:759  channel_->send_waiters().drop_grant();
 *   S_wake_recv  include/volt/channel/mpmc.hpp:828  if (wake_receiver) channel_->wake_receivers(pushed);
 *   S_regrant  include/volt/channel/mpmc.hpp:843  const bool regrant = std::exchange(holds_grant_, false);
 *   S_retry  include/volt/channel/mpmc.hpp:862  if (!channel_->send_waiters().retry_granted(&recheck, this)) {
 *   S_retry_wake  include/volt/channel/mpmc.hpp:867  channel_->wake_receivers(pushed_);
 *   S_pass_on  include/volt/channel/mpmc.hpp:868  channel_->pass_on_after_woken_send();
 *   R_wake_send  include/volt/channel/mpmc.hpp:1317  if (wake_sender) channel_->send_waiters().wake_one();
 *   R_pass_on  include/volt/channel/mpmc.hpp:1343  if (value_) channel_->pass_on_after_woken_recv();
 *   C2  include/volt/detail/channel_waiters.hpp:129  if (waiting_.load(std::memory_order_seq_cst)) wake_one_slow();
 *   E_regrant  src/channel/channel_waiters.cpp:15  if (regrant) --granted_;
 *   E_R1  src/channel/channel_waiters.cpp:18  waiting_.store(true, std::memory_order_seq_cst);
 *   E_gate  src/channel/channel_waiters.cpp:24  gate_word_->fetch_or(gate_bit_, std::memory_order_seq_cst);
 *   E_oldest  src/channel/channel_waiters.cpp:31  oldest = regrant || (word & closed_bit_) ||
 *   E_R2  src/channel/channel_waiters.cpp:34  if (oldest && recheck(context)) {
 *   E_fast  src/channel/channel_waiters.cpp:45  fast_.compare_exchange_strong(empty, waiter, std::memory_order_release,
 *   E_front  src/channel/channel_waiters.cpp:53  list_.push_front(waiter);
 *   E_back  src/channel/channel_waiters.cpp:55  list_.push_back(waiter);
 *   W_lockfree  src/channel/channel_waiters.cpp:73  if (gate_word_ == nullptr) waiter = fast_.exchange(nullptr, std::memory_order_acquire);
 *   W_grant  src/channel/channel_waiters.cpp:79  if (waiter != nullptr && gate_word_ != nullptr) ++granted_;
 *   retry_done  src/channel/channel_waiters.cpp:189  --granted_;
 *   drop_grant  src/channel/channel_waiters.cpp:104  if (waiter != nullptr) ++granted_;
 *   X_cancel_fast  src/channel/channel_waiters.cpp:121  if (fast_.compare_exchange_strong(expected, nullptr, std::memory_order_relaxed) ||
 *   X_wait_waker  src/channel/channel_waiters.cpp:137  while (waiter->state.load(std::memory_order_acquire) != ChannelWaiter::kNotified)
 *   X_pass  src/channel/channel_waiters.cpp:145  drop_grant();
 *   A_grant  src/channel/channel_waiters.cpp:158  if (gate_word_ != nullptr) ++granted_;
 *   clear_flag  src/channel/channel_waiters.cpp:225  waiting_.store(false, std::memory_order_relaxed);
 *   gate_reserved  src/channel/channel_waiters.cpp:226  if (granted_ != 0 || reserved_.load(std::memory_order_relaxed) != 0) return;
 *   clear_gate  src/channel/channel_waiters.cpp:230  gate_word_->fetch_and(~gate_bit_, std::memory_order_relaxed);
 *   K_account  include/volt/channel/mpmc.hpp:188  if (reserved != 0 && !room_for(tail, reserved + 1)) return RingResult::kNotNow;
 *   K_room  include/volt/channel/mpmc.hpp:357  if (stamp + one_lap_ != stamp_free + 1) return false;
 *   K_reserve  include/volt/channel/mpmc.hpp:338  send_waiters_.add_reserved_locked(n);
 *   K_push_spin  include/volt/channel/mpmc.hpp:264  if (stamp + one_lap_ == tail + 1) backoff.once();
 *   K_used  include/volt/channel/mpmc.hpp:280  send_waiters_.release_reserved(1);
 *   K_oldest  src/channel/channel_waiters.cpp:179  const bool done = oldest && attempt(context);
 *   K_release  src/channel/channel_waiters.cpp:199  reserved_.store(reserved_.load(std::memory_order_relaxed) - n, std::memory_order_relaxed);
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
 * -DREAWAIT=n, -DFLAG_KEEPS_GRANTS (the flag cleared only once no grant is
 * outstanding either, as a655a79; also correct, one lock per receive more),
 * -DPERMIT=n (see above), negative controls -DNO_ACCOUNTING, -DNO_USED_WAKE,
 * -DRELAXED_DEKKER, -DNO_PASS_ON (no wake-up chain after a
 * woken success), -DNO_PASS_CANCEL (a cancelled woken waiter drops its
 * wake-up), -DNO_CLOSING_WAKE_ALL, -DNO_CLOSED_BEHIND_READ, -DNO_GATE,
 * -DNO_CLOSED_RECHECK (see above).
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
bit gate = 0;        /* the senders' gate: a bit of the tail word */
byte grants = 0;     /* woken senders holding a grant (under lk[SEND]) */
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

/* clear_flag_if_empty, lock held: the flag goes with the queue; the
 * senders' gate with the queue and the grants (FLAG_KEEPS_GRANTS: the flag
 * too waits for the grants, as a655a79 had it) */
inline clear_if_empty(q) {
  if
  :: qlen[q] == 0 && fast[q] == 0 ->
#ifdef FLAG_KEEPS_GRANTS
     if :: q == RECV || grants == 0 -> flag[q] = 0 :: else -> skip fi;
#else
     flag[q] = 0;
#endif
     if :: q == SEND && grants == 0 && RESERVED == 0 -> gate = 0 :: else -> skip fi
  :: else -> skip
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
     clear_if_empty(q);
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
        clear_if_empty(q);
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
#ifndef NO_GATE
     :: !c && g && !granted -> break               /* senders wait: full */
#endif
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
             /* no barging: an ungranted claim only when no sender waits */
             assert(granted || (qlen[SEND] == 0 && fast[SEND] == 0 && grants == 0 &&
                                RESERVED == 0))
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
  clear_if_empty(q);
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

/* ChannelWaiters::drop_grant: a woken sender gives its grant up unused. */
inline drop_grant() {
  lock(SEND);
  grants--;
  pop_oldest(SEND);
  if :: w != 0 -> grants++; state[w] = NOTIFIED :: else -> skip fi;
  clear_if_empty(SEND);
  unlock(SEND);
  w = 0; k = 0
}

/* ChannelWaiters::enqueue with the operation's attempt as the re-check. */
inline enqueue(q, me, queued, regrant, rsv) {
  lock(q);
  if :: regrant -> grants-- :: else -> skip fi;
  flag[q] = 1;                                     /* R1 */
  res = NOTNOW;
  if
  :: q == RECV -> try_pop(res)                     /* R2: the re-check */
  :: q == SEND ->
     atomic { gate = 1; c = closed };              /* fetch_or: with R1, before R2 */
#ifdef NO_CLOSED_RECHECK
     c = 0;
#endif
     if
     :: regrant || c || (grants == 0 && qlen[q] == 0 && fast[q] == 0) ->
#ifdef PERMIT
        if
        :: rsv -> reserve_locked(res)              /* a reserve's re-check */
        :: else -> try_push(res, 1)
        fi
#else
        try_push(res, 1)                           /* the oldest: granted re-check */
#endif
     :: else -> skip
     fi
  fi;
  if
  :: res != NOTNOW -> clear_if_empty(q); unlock(q); queued = 0
  :: else ->
     state[me] = QUEUED;
     if
     :: qlen[q] == 0 && fast[q] == 0 -> fast[q] = me
     :: (qlen[q] != 0 || fast[q] != 0) && regrant -> /* back to the front */
        if :: fast[q] != 0 -> list_push_front(q, fast[q]); fast[q] = 0 :: else -> skip fi;
        list_push_front(q, me)
     :: (qlen[q] != 0 || fast[q] != 0) && !regrant -> list_push(q, me)
     fi;
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
     :: claimed -> claimed = 0; state[me] = IDLE; clear_if_empty(q); unlock(q)
     :: !claimed && k < qlen[q] ->
        list_remove_at(q, k); state[me] = IDLE; clear_if_empty(q); unlock(q)
     :: !claimed && k >= qlen[q] ->
        /* a waker took it from the fast slot and has not published yet
         * (receivers only: the senders' waker holds the lock) */
        unlock(q);
        (state[me] == NOTIFIED);
        state[me] = IDLE;
#ifndef NO_PASS_CANCEL
        if
        :: q == SEND -> drop_grant()
        :: else -> wake_one(q, flag[q])
        fi
#endif
     fi
  :: else ->
     unlock(q);
     state[me] = IDLE;
#ifndef NO_PASS_CANCEL
     if
     :: q == SEND -> drop_grant()                  /* the grant passes on */
     :: else -> wake_one(q, flag[q])               /* woken, never retried: pass it on */
     fi
#else
     if :: q == SEND -> lock(q); grants--; clear_if_empty(q); unlock(q) :: else -> skip fi
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
        if :: res != NOTNOW -> grants--; clear_if_empty(SEND) :: else -> skip fi;
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
           atomic { cancels-- }; drop_grant(); regrant = 0
        :: true ->
           enqueue(SEND, me, queued, regrant, 0); regrant = 0;
           if
           :: !queued && res == CLOSED -> break
           :: !queued && res != CLOSED ->
              wake_receivers(res, flag[RECV]); sent++; atomic { sent_total++ }
           :: queued ->
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
  clear_if_empty(SEND);
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
     lock(SEND);                                   /* try_as_oldest */
     atomic { gate = 1; c = closed };
     res = NOTNOW;
     if
     :: c || (grants == 0 && qlen[SEND] == 0 && fast[SEND] == 0) -> reserve_locked(res)
     :: else -> skip
     fi;
     clear_if_empty(SEND);
     unlock(SEND);
     do
     :: res != NOTNOW -> break
     :: else ->
        enqueue(SEND, me, queued, regrant, 1); regrant = 0;
        if
        :: !queued -> skip                         /* the re-check completed it */
        :: queued ->
           (state[me] == NOTIFIED); state[me] = IDLE;
           lock(SEND);                             /* retry_granted */
           reserve_locked(res);
           if :: res != NOTNOW -> grants--; clear_if_empty(SEND) :: else -> regrant = 1 fi;
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
           lock(SEND); reserved--; clear_if_empty(SEND); unlock(SEND);
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
