/*
 * SPIN model of the bounded channel's wait/wake protocol: the Vyukov ring
 * (claim by CAS, publish by the slot's stamp), the Dekker flags, the fast
 * slots and FIFO lists of both sides, re-registration of a woken operation
 * that finds the ring not ready, the wake-up chain after a woken operation
 * succeeds, and cancellation passing a wake-up on. As implemented in
 *   include/volt/channel/mpmc.hpp        Channel::try_push / try_pop,
 *                                        pass_on_after_woken_*, Send / Recv
 *                                        (attempt, enqueue, retry_if_notified)
 *   include/volt/detail/channel_waiters.hpp, src/channel/channel_waiters.cpp
 *                                        wake_one, enqueue, cancel
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
 * negative controls -DRELAXED_DEKKER, -DNO_PASS_ON (no wake-up chain after a
 * woken success), -DNO_PASS_CANCEL (a cancelled woken waiter drops its
 * wake-up), -DNO_CLOSING_WAKE_ALL, -DNO_CLOSED_BEHIND_READ (see above).
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
byte sent_total = 0;
bit closed = 0;

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

/* clear_flag_if_empty, lock held */
inline clear_if_empty(q) {
  if
  :: qlen[q] == 0 && fast[q] == 0 -> flag[q] = 0
  :: else -> skip
  fi
}

/* ChannelWaiters::wake_one. `seen` is the flag value the caller read: the
 * flag load (C2) right here, or, under RELAXED_DEKKER, the value it read
 * before its publishing store. */
inline wake_one(q, seen) {
  if
  :: seen ->
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

/* Channel::try_push. `pre` = the receivers' flag as read before the
 * publishing store (RELAXED_DEKKER only). The closed mark is a bit of the
 * tail word: (tail, closed) are read and CASed together. DONE_CLOSING: the
 * mark was set between the claim and the publish (the load after it). */
inline try_push(res) {
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
  t = 0; s = 0; c = 0
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
  :: atomic { w = fast[q]; fast[q] = 0 };
     if
     :: w == 0 && qlen[q] > 0 -> k = 0; list_at(q, k, w); list_remove_at(q, k)
     :: else -> skip
     fi;
     if
     :: w != 0 -> state[w] = NOTIFIED
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

/* ChannelWaiters::enqueue with the operation's attempt as the re-check. */
inline enqueue(q, me, queued) {
  lock(q);
  flag[q] = 1;                                     /* R1 */
  if
  :: q == RECV -> try_pop(res)                     /* R2: the re-check */
  :: else -> try_push(res)
  fi;
  if
  :: res != NOTNOW -> clear_if_empty(q); unlock(q); queued = 0
  :: else ->
     state[me] = QUEUED;
     if
     :: qlen[q] == 0 && fast[q] == 0 -> fast[q] = me
     :: else -> list_push(q, me)
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
        /* a waker took it from the fast slot and has not published yet */
        unlock(q);
        (state[me] == NOTIFIED);
        state[me] = IDLE;
#ifndef NO_PASS_CANCEL
        wake_one(q, flag[q])
#endif
     fi
  :: else ->
     unlock(q);
     state[me] = IDLE;
#ifndef NO_PASS_CANCEL
     wake_one(q, flag[q])                          /* woken, never retried: pass it on */
#endif
  fi;
  w = 0; k = 0
}

/* Producer `me`: NV sends, or until the channel is closed. */
proctype producer(byte me) {
  byte sent = 0, res, t, h, s, w, k;
  bit claimed, pre, queued, woken, c;
  do
  :: sent == NV -> break
  :: else ->
     try_push(res);
     if
     :: res == DONE || res == DONE_CLOSING ->
        wake_receivers(res, SEEN(RECV));
#ifndef NO_PASS_ON
        if
        :: woken ->                                /* pass_on_after_woken_send */
           t = tail; s = stamp[t % CAP];
           if :: s == 2 * t -> wake_one(SEND, flag[SEND]) :: else -> skip fi;
           t = 0; s = 0
        :: else -> skip
        fi;
#endif
        woken = 0; sent++; atomic { sent_total++ }
     :: res == CLOSED -> break
     :: res == NOTNOW ->
        enqueue(SEND, me, queued);
        if
        :: !queued && res == CLOSED -> break
        :: !queued && res != CLOSED ->
           wake_receivers(res, flag[RECV]); woken = 0; sent++; atomic { sent_total++ }
        :: queued ->
           if
           :: state[me] == NOTIFIED -> state[me] = IDLE; woken = 1
           :: atomic { cancels > 0 -> cancels-- }; cancel(SEND, me); woken = 0
           fi
        fi
     fi
  od
}

/* Consumer `me`: QUOTA values, or (CLOSE) until the channel is closed and
 * drained. */
proctype consumer(byte me) {
  byte got = 0, res, t, h, s, w, k;
  bit claimed, pre, queued, woken, c;
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
        enqueue(RECV, me, queued);
        if
        :: !queued && res == CLOSED -> break
        :: !queued && res == DONE ->
           wake_one(SEND, flag[SEND]); woken = 0; got++; atomic { received++ }
        :: queued ->
           if
           :: state[me] == NOTIFIED -> state[me] = IDLE; woken = 1
           :: atomic { cancels > 0 -> cancels-- }; cancel(RECV, me); woken = 0
           fi
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
