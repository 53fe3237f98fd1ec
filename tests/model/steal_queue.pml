/*
 * SPIN model of the worker's local run queue: the owner's pop_back_if
 * (taking back the task it pushed last) racing batch stealers, with the
 * owner's push_back_or_overflow and pop, as implemented in
 *   src/runtime/scheduler/steal_queue.hpp   push_back_or_overflow (with
 *                                           push_overflow), pop, pop_back_if,
 *                                           steal_half_into (the three
 *                                           phases of a steal)
 * The protocol is described at the top of that header ("Steal protocol (3
 * phases)", "Taking back the last slot").
 *
 * State. head_ is {hv, hs, hr} (version, steal, real), always read and
 * written as one word; tail_ is `tail`; buffer_ is buf[CAP] holding task ids
 * (1..NT; 0 = never written). Positions count modulo PMOD (2^16 in the
 * code; every position difference is taken modulo PMOD as the code's
 * uint16 casts do) and a slot is position % CAP. They start at START, near
 * the wrap, so that both the slot index and the positions wrap during the
 * run; PMOD is larger than the number of pushes, so a head value never
 * recurs while a stealer holds an old one (a recurrence needs 2^16 pops, and
 * no take-back, between a stealer's load and its CAS; not modelled).
 * Ghosts: got[k] (task k has been obtained), busy[slot] (claimed by a steal
 * that has not released it), lowered (pop_back_if between lowering tail and
 * returning).
 *
 * Processes. One Owner runs a fixed script (SCRIPT) of pushes, pops and
 * pop_back_ifs, then drains the queue with pop until it reports empty.
 * STEALERS stealers (default 2) each steal any number of times (STEALS=0,
 * the default: each may stop at any point) or exactly STEALS times. A
 * stealer's own queue is not modelled: every slot it copies counts as
 * obtained. The inject queue is a sink: every task pushed there (the
 * overflow's half plus the new task, or the new task alone) counts as
 * obtained.
 *
 * Atomicity. One step per atomic access of head_ or tail_ (a load, a store,
 * a CAS) and per plain slot access another thread can race with (the
 * owner's slot write in a push, a stealer's copy of one slot). Folded into
 * the adjacent step: the owner's loads of tail_ (its only writer) and its
 * reads of slots no stealer can reach (pop's read of the slot its CAS took,
 * push_overflow's reads of the half it claimed, pop_back_if's comparison
 * of the last slot), local arithmetic, ghost updates. A CAS is one step: it
 * succeeds and writes, or fails and reloads the expected value, as the code's
 * loops do. The release of phase 3 is one step setting steal := real: its
 * loop retries until its CAS succeeds, and a failed CAS only reloads head, so
 * the loop's effect is that of its successful CAS. A spurious failure of
 * compare_exchange_weak is a reload of an unchanged value: a stutter the
 * model's interleavings already contain. SPIN interleaves sequentially
 * consistently: the memory orders (acquire/release/acq_rel) are not checked
 * here, only the protocol under SC.
 *
 * Checked (assertions):
 *  - every pushed task is obtained exactly once in total, by the owner's pop
 *    or pop_back_if, by a stealer's copy, or through the inject queue: at
 *    every obtain the task is not yet obtained (none duplicated; a stealer
 *    never copies a slot the owner took back or popped) and is not 0 (a
 *    claim never reaches a slot that was never written); at the end every
 *    task was obtained (none lost);
 *  - the owner never writes a slot a stealer has claimed and not released
 *    (busy == 0), nor a slot whose task has not been obtained (lost);
 *  - after every change of head or tail: steal <= real <= tail (modulo PMOD)
 *    and tail - steal <= CAP (the length never exceeds the capacity); the
 *    only exception is pop_back_if's documented window (a claim took the
 *    last slot after the owner lowered tail): tail == real - 1, with the
 *    claim of that slot alone;
 *  - one stealer at a time: at its release, steal is still where its claim
 *    started;
 *  - at the end (every process done): all tasks obtained, steal == real ==
 *    tail, no slot claimed, no pop_back_if in progress.
 *
 * Scripts (the owner's operations; back(x) = pop_back_if(x)):
 *  SCRIPT=1 (default, NT=4)  push 1, push 2, back(2), back(1), push 3,
 *                            push 4, pop, back(4): take-backs with two tasks
 *                            and with one, a pop, reuse of the slots.
 *  SCRIPT=2 (NT=5)           push 1, push 2, push 3, back(3), push 4,
 *                            back(4), push 5: with -DCAP=2 the queue fills,
 *                            so push 3 overflows (push_overflow's CAS, which
 *                            keeps the version) or, during a steal, goes to
 *                            the inject queue alone; back(3) then finds
 *                            another task in the last slot (or, if a steal
 *                            made room first, races for 3 as usual).
 *  SCRIPT=3 (NT=3)           push 1, push 2, push 3, back(3), back(2),
 *                            back(1): take-backs at lengths 3, 2, 1, against
 *                            claims of 2 and of 1.
 *
 * Negative controls (each must be rejected):
 *  -DNO_VERSION_BUMP       pop_back_if's CAS keeps the version (writes head
 *                          back unchanged): a stealer that loaded head and
 *                          the old tail claims, after the owner's take-back,
 *                          the slot the owner took; real passes tail.
 *  -DLOWER_TAIL_AFTER_CAS  the owner lowers tail only after its CAS
 *                          succeeded: a stealer that loads the new head and
 *                          then the old tail claims the slot the owner took.
 *  -DNO_CAPACITY_GUARD     steal_half_into without the n > Capacity check: a
 *                          stealer that reads head and tail in the window
 *                          (tail == real - 1) takes the length for huge and
 *                          claims PMOD / 2 slots past tail.
 *  -DABANDON_RELEASE       phase 3 tries its CAS once with the value of its
 *                          claim and gives up if it fails (the reference's
 *                          behaviour): a take-back (the version) or a pop
 *                          during the copy makes it fail, steal stays
 *                          behind real for ever and the queue never becomes
 *                          idle again (the end state's steal == real).
 *
 * Switches: -DCAP=n (a power of two, 2 or 4), -DSTEALERS=n, -DSTEALS=n (0:
 * any number), -DSCRIPT=n, -DPMOD=n (a multiple of CAP, at least 2 CAP,
 * above NT), -DSTART=p.
 *
 * Not modelled: the stealer's own queue (steal_into's room check, the
 * copies' destination, the task it returns), the inject queue's inside and
 * its refusal at shutdown (push_or_drop), len / has_stealable /
 * remaining_slots, the width of the version (a byte here; 32 bits in the
 * code, so that it does not recur either).
 *
 * Step-to-line mapping:
 *   PU1  src/runtime/scheduler/steal_queue.hpp:84  std::uint64_t head = head_.load(std::memory_order_acquire);
 *   PU1  src/runtime/scheduler/steal_queue.hpp:87  std::uint16_t tail = tail_.load(std::memory_order_relaxed);
 *   PU2  src/runtime/scheduler/steal_queue.hpp:88  if (static_cast<std::uint16_t>(tail - steal) < Capacity) {
 *   PU2  src/runtime/scheduler/steal_queue.hpp:89  buffer_[tail & kMask] = task;
 *   PU3  src/runtime/scheduler/steal_queue.hpp:92  tail_.store(static_cast<std::uint16_t>(tail + 1), std::memory_order_release);
 *   PU4  src/runtime/scheduler/steal_queue.hpp:95  if (steal != real) {
 *   PU4  src/runtime/scheduler/steal_queue.hpp:97  push_or_drop(inject, task, task, 1);
 *   PU5  src/runtime/scheduler/steal_queue.hpp:100  if (push_overflow(task, head, inject)) return true;
 *   PU5  src/runtime/scheduler/steal_queue.hpp:219  if (!head_.compare_exchange_strong(expected, with(head, next_head, next_head),
 *   PU5  src/runtime/scheduler/steal_queue.hpp:223  TaskHeader* first = buffer_[real & kMask];
 *   PU5  src/runtime/scheduler/steal_queue.hpp:231  push_or_drop(inject, first, task, kHalf + 1);
 *   P1  src/runtime/scheduler/steal_queue.hpp:107  std::uint64_t head = head_.load(std::memory_order_acquire);
 *   P2  src/runtime/scheduler/steal_queue.hpp:112  if (real == tail) return nullptr;
 *   P3  src/runtime/scheduler/steal_queue.hpp:116  steal == real ? with(head, next_real, next_real)
 *   P3  src/runtime/scheduler/steal_queue.hpp:119  if (head_.compare_exchange_weak(head, next, std::memory_order_acq_rel,
 *   P3  src/runtime/scheduler/steal_queue.hpp:121  return buffer_[real & kMask];
 *   B1  src/runtime/scheduler/steal_queue.hpp:129  const std::uint16_t tail = tail_.load(std::memory_order_relaxed);
 *   B1  src/runtime/scheduler/steal_queue.hpp:130  std::uint64_t head = head_.load(std::memory_order_acquire);
 *   B1  src/runtime/scheduler/steal_queue.hpp:131  if (real_of(head) == tail) return false;
 *   B1  src/runtime/scheduler/steal_queue.hpp:133  if (buffer_[last & kMask] != task) return false;
 *   B2  src/runtime/scheduler/steal_queue.hpp:136  tail_.store(last, std::memory_order_relaxed);
 *   B3  src/runtime/scheduler/steal_queue.hpp:138  if (real_of(head) == tail) {
 *   B3  src/runtime/scheduler/steal_queue.hpp:141  tail_.store(tail, std::memory_order_release);
 *   B4  src/runtime/scheduler/steal_queue.hpp:146  if (head_.compare_exchange_weak(head, bump_version(head), std::memory_order_acq_rel,
 *   B4  src/runtime/scheduler/steal_queue.hpp:197  return head + (std::uint64_t{1} << 32);
 *   V  src/runtime/scheduler/steal_queue.hpp:194  return (head & ~std::uint64_t{0xFFFFFFFF}) | (std::uint64_t{steal} << 16) | real;
 *   S1  src/runtime/scheduler/steal_queue.hpp:236  std::uint64_t prev = head_.load(std::memory_order_acquire);
 *   S2  src/runtime/scheduler/steal_queue.hpp:243  if (steal != real) return 0;
 *   S3  src/runtime/scheduler/steal_queue.hpp:246  std::uint16_t tail = tail_.load(std::memory_order_acquire);
 *   S3  src/runtime/scheduler/steal_queue.hpp:247  n = static_cast<std::uint16_t>(tail - real);
 *   S3  src/runtime/scheduler/steal_queue.hpp:250  if (n > Capacity) return 0;
 *   S3  src/runtime/scheduler/steal_queue.hpp:251  n = static_cast<std::uint16_t>(n - n / 2);
 *   S4  src/runtime/scheduler/steal_queue.hpp:257  if (head_.compare_exchange_weak(prev, next, std::memory_order_acq_rel,
 *   S5  src/runtime/scheduler/steal_queue.hpp:264  buffer_[static_cast<std::uint16_t>(first + i) & kMask];
 *   S6  src/runtime/scheduler/steal_queue.hpp:271  if (head_.compare_exchange_weak(prev, with(prev, real, real), std::memory_order_acq_rel,
 *
 * V: pop's and push_overflow's new head values keep the version (with());
 * only pop_back_if changes it (B4).
 */

#ifndef CAP
#define CAP 4
#endif
#ifndef STEALERS
#define STEALERS 2
#endif
#ifndef STEALS
#define STEALS 0
#endif
#ifndef SCRIPT
#define SCRIPT 1
#endif

#ifndef PMOD
#define PMOD (4 * CAP)            /* positions wrap here (2^16 in the code) */
#endif
#ifndef START
#define START (PMOD - 2)          /* initial head and tail: near the wrap */
#endif
#define HALF (CAP / 2)
#define ADD(a, b) (((a) + (b)) % PMOD)
#define SUB(a, b) (((a) + PMOD - (b)) % PMOD)
#define SLOT(p) ((p) % CAP)

#if SCRIPT == 1
#define NT 4
#elif SCRIPT == 2
#define NT 5
#else
#define NT 3
#endif

/* head_ = {hv, hs, hr}: read and written together, one atomic step. */
byte hv;                  /* version */
byte hs;                  /* steal */
byte hr;                  /* real */
byte tail;                /* tail_ */
byte buf[CAP];            /* buffer_: task ids, 0 = never written */
bit got[NT + 1];          /* ghost: task k was obtained (pop, take-back, copy, inject) */
byte busy[CAP];           /* ghost: claimed by a steal not yet released */
bool lowered;             /* ghost: pop_back_if between lowering tail and returning */

/* Each task obtained once: a stealer never copies a slot the owner took
 * back or popped, nobody takes a task twice, and a claim never reaches a
 * slot that was never written. */
inline obtain(k) {
  assert(k != 0);
  assert(got[k] == 0);
  got[k] = 1
}

/* The queue's invariants after every change of head or tail: steal <= real
 * <= tail (cyclically) and tail - steal <= CAP; in pop_back_if's window
 * (lowered, a claim took the last slot) tail == real - 1 and the claim was
 * of that slot alone. */
inline check_inv() {
  if
  :: lowered && SUB(hr, tail) == 1 ->
     assert(SUB(hr, hs) <= 1)
  :: else ->
     assert(SUB(hr, hs) + SUB(tail, hr) <= CAP)
  fi
}

/* push_back_or_overflow(x) */
inline push(x) {
  do
  :: atomic { v = hv; s = hs; r = hr; t = tail };               /* PU1 */
     if
     :: atomic { SUB(t, s) < CAP ->                             /* PU2 */
          assert(busy[SLOT(t)] == 0);
          assert(buf[SLOT(t)] == 0 || got[buf[SLOT(t)]]);
          buf[SLOT(t)] = x };
        atomic { tail = ADD(t, 1); check_inv(); v = 0; s = 0; r = 0; t = 0 };   /* PU3 */
        break
     :: atomic { SUB(t, s) >= CAP && s != r ->                  /* PU4 */
          obtain(x); v = 0; s = 0; r = 0; t = 0 };
        break
     :: atomic { SUB(t, s) >= CAP && s == r ->                  /* PU5 */
          if
          :: hv == v && hs == s && hr == r ->
             hs = ADD(r, HALF); hr = hs; check_inv();
             i = 0;
             do
             :: i < HALF -> obtain(buf[SLOT(ADD(r, i))]); i++
             :: else -> i = 0; break
             od;
             obtain(x); ok = true
          :: else -> ok = false
          fi;
          v = 0; s = 0; r = 0; t = 0 };
        if
        :: ok -> ok = false; break
        :: else
        fi
     fi
  od
}

/* pop(); res = the task, 0 if empty */
inline pop() {
  atomic { v = hv; s = hs; r = hr };                            /* P1 */
  do
  :: atomic { r == tail -> res = 0; v = 0; s = 0; r = 0 };      /* P2 */
     break
  :: atomic { r != tail && hv == v && hs == s && hr == r ->     /* P3 */
       if
       :: s == r -> hs = ADD(r, 1)
       :: else
       fi;
       hr = ADD(r, 1); check_inv();
       res = buf[SLOT(r)]; obtain(res); v = 0; s = 0; r = 0 };
     break
  :: atomic { r != tail && !(hv == v && hs == s && hr == r) ->  /* P3 fails */
       v = hv; s = hs; r = hr }
  od
}

/* pop_back_if(x) */
inline back(x) {
  atomic { t = tail; v = hv; s = hs; r = hr;                    /* B1 */
    if
    :: r == t || buf[SLOT(SUB(t, 1))] != x ->
       ok = false; v = 0; s = 0; r = 0; t = 0
    :: else -> ok = true
    fi };
  if
  :: ok ->
#ifndef LOWER_TAIL_AFTER_CAS
     atomic { tail = SUB(t, 1); lowered = true; check_inv() };  /* B2 */
#endif
     do
     :: atomic { r == t ->                                      /* B3 */
          tail = t; lowered = false; check_inv();
          ok = false; v = 0; s = 0; r = 0 };
        break
     :: atomic { r != t && hv == v && hs == s && hr == r ->     /* B4 */
#ifndef NO_VERSION_BUMP
          hv = hv + 1;
#endif
          obtain(x); lowered = false; v = 0; s = 0; r = 0 };
        break
     :: atomic { r != t && !(hv == v && hs == s && hr == r) ->  /* B4 fails */
          v = hv; s = hs; r = hr }
     od;
#ifdef LOWER_TAIL_AFTER_CAS
     if
     :: ok -> atomic { tail = SUB(t, 1); check_inv() }          /* B2 late */
     :: else
     fi;
#endif
     ok = false; t = 0
  :: else
  fi
}

proctype Owner() {
  byte v, s, r, t, res, i;
  bool ok;
#if SCRIPT == 1
  push(1); push(2); back(2); back(1); push(3); push(4); pop(); back(4);
#elif SCRIPT == 2
  push(1); push(2); push(3); back(3); push(4); back(4); push(5);
#else
  push(1); push(2); push(3); back(3); back(2); back(1);
#endif
  do                                                            /* drain */
  :: pop();
     if
     :: res == 0 -> break
     :: else -> res = 0
     fi
  od
}

proctype Stealer() {
  byte v, s, r, t, n, first, i, k;
  bool ok;
#ifdef ABANDON_RELEASE
  byte cv;                  /* the version of the claim (its CAS's new value) */
#endif
  do
  :: STEALS > 0 && k == STEALS -> break
#if STEALS == 0
  :: break
#endif
  :: STEALS == 0 || k < STEALS ->
#if STEALS > 0
     k++;
#endif
     atomic { v = hv; s = hs; r = hr };                         /* S1 */
     do
     :: atomic { s != r -> n = 0 };                             /* S2 */
        break
     :: atomic { s == r -> t = tail; n = SUB(t, r);             /* S3 */
#ifndef NO_CAPACITY_GUARD
          if
          :: n > CAP -> n = 0
          :: else -> n = n - n / 2
          fi;
#else
          n = n - n / 2;
#endif
          t = 0 };
        if
        :: n == 0 -> break
        :: else ->
           atomic {                                             /* S4 */
             if
             :: hv == v && hs == s && hr == r ->
                hr = ADD(r, n); first = r; check_inv();
#ifdef ABANDON_RELEASE
                cv = hv;
#endif
                i = 0;
                do
                :: i < n -> busy[SLOT(ADD(r, i))]++; i++
                :: else -> i = 0; break
                od;
                ok = true
             :: else -> v = hv; s = hs; r = hr; ok = false
             fi };
           if
           :: ok -> ok = false; break
           :: else
           fi
        fi
     od;
     atomic { v = 0; s = 0; r = 0 };
     do
     :: atomic { i < n -> t = buf[SLOT(ADD(first, i))]; obtain(t); t = 0; i++ }   /* S5 */
     :: atomic { i == n -> i = 0 }; break
     od;
     if
     :: atomic { n > 0 ->                                       /* S6 */
          assert(hs == first);
#ifdef ABANDON_RELEASE
          if
          :: hv == cv && hr == ADD(first, n) -> hs = hr
          :: else                 /* gives up: steal stays behind */
          fi;
          cv = 0;
#else
          hs = hr;
#endif
          check_inv();
          do
          :: i < n -> busy[SLOT(ADD(first, i))]--; i++
          :: else -> i = 0; break
          od;
          n = 0; first = 0 }
     :: else
     fi
  od
}

init {
  byte i;
  atomic {
    assert(NT < PMOD && PMOD % CAP == 0 && PMOD >= 2 * CAP);
    hs = START; hr = START; tail = START;
    run Owner();
    i = 0;
    do
    :: i < STEALERS -> run Stealer(); i++
    :: else -> i = 0; break
    od
  };
  (_nr_pr == 1);
  /* Everything pushed was taken exactly once; the queue is empty and idle. */
  d_step {
    i = 1;
    do
    :: i <= NT -> assert(got[i]); i++
    :: else -> break
    od;
    assert(hs == hr && hr == tail && !lowered);
    i = 0;
    do
    :: i < CAP -> assert(busy[i] == 0); i++
    :: else -> break
    od
  }
}
