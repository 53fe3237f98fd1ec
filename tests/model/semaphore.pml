/*
 * SPIN model of the counting semaphore's wait/wake protocol (permits word
 * with a kQueued bit, fast waiter slot, mutex-guarded FIFO list), as
 * implemented in
 *   include/volt/sync/semaphore.hpp   try_take (try_acquire), Acquire
 *   src/sync/semaphore.cpp            acquire_locked, release_unchecked
 *                                     (release), release_locked, cancel
 * and, under -DSEED / -DHAS_WAITERS, the seed's protocol
 * (seeds/semaphore-algorithm.txt, seeds/fast-waiter-slot.txt) as negative
 * controls. Not modelled: close() and the closed paths (kClosed, the
 * waiter's kClosedBit, give_back_partial), and the range check of release().
 *
 * State. permits = the count and queued = the kQueued bit: together the
 * word permits_ (count << 2 | kQueued | kClosed); every step that reads or
 * writes the word is one atomic step covering both. fast = 0 or a waiter id
 * (1..ACQ); q[0..qlen) = the list, q[0] the oldest; per waiter i: rem[i] =
 * its state word (permits still needed; 0 = complete, published),
 * linked[i] = in the list, freed[i] = its Acquire returned (the waiter's
 * memory is gone). outcome[i]: HELD (returned with its permits) or
 * CANCELLED (gave back all it had been granted). mtx = the mutex (a lock:
 * atomic test-and-set).
 *
 * Atomicity. One step = one atomic instruction of the code (load, store,
 * exchange, CAS, fetch_add) or one list operation under the mutex (only lock
 * holders see the list). Plain reads of a waiter the releaser owns (the
 * waker copy and the state load) share a step; local arithmetic is folded
 * into the adjacent step; ghost updates (in_rel, settled, wseq) are folded
 * into the step they describe. A CAS loop on the word is one step per
 * outcome that matters: a CAS that fails changes nothing and is retried
 * with the value it read, so the model has one step for the CAS that
 * succeeds, guarded by the value it succeeds on, and (R0, A2q) one step for
 * the read that sends the loop elsewhere. SPIN interleaves sequentially
 * consistently: memory orders are not checked here.
 *
 * Model step -> code (fixed protocol, the default). Line numbers: cpp as of
 * commit d6ff79d ("Semaphore: a kQueued bit in the permits word"), hpp as
 * of 2e8104f (its re-await fix added lines, no protocol step); hpp =
 * include/volt/sync/semaphore.hpp, cpp = src/sync/semaphore.cpp.
 *   T1  try_take, hpp 275-285: load (276) and CAS loop (281-282) taking the
 *       count down; the bits are left alone. Called from Acquire::await_ready
 *       (hpp 182) or, after a budget yield, from Acquire::ready_check
 *       (hpp 243); try_acquire (hpp 143) is the same step.
 *   A1  acquire_locked, cpp 182: lock mutex_ (std::lock_guard). Reached via
 *       Acquire::register_waiter (hpp 220-235, call at 223) from
 *       await_suspend (hpp 200) or ready_check (hpp 247).
 *   A2  acquire_locked, cpp 186-205: the drain loop (load 186), one step per
 *       successful CAS taking min(count, still) (cpp 201-204).
 *   A2q acquire_locked, cpp 190-199: count 0 and permits still needed: the
 *       CAS that saw the zero sets kQueued (cpp 195-198), or the word already
 *       showed kQueued (cpp 195): one step, then break. (A failed CAS,
 *       cpp 199 continue, saw a lock-free credit: the model's guard then
 *       sends the loop back to A2. An older `current` showing kQueued is
 *       still exact: with the mutex held nobody clears the bit, and while
 *       it is set nobody adds to the count.)
 *   A3  acquire_locked, cpp 212: granted in full -> return kGranted (the
 *       lock_guard unlocks).
 *   A4  acquire_locked, cpp 216: still == 1 && waiters_.empty() &&
 *       fast_.load() == nullptr ? (the state store of cpp 213 is the model's
 *       rem[me], already equal to still and not yet published)
 *   A5  acquire_locked, cpp 218 fast_.store(w) | cpp 220 waiters_.push_back(w)
 *   A6  acquire_locked, cpp 222: return kQueued (the lock_guard unlocks);
 *       register_waiter sets queued_ (hpp 225) and the Acquire waits for
 *       waiter_.finished() (hpp 241, ready_check; hpp 73-76).
 *   acquire_blocking (cpp 283-307) runs the same steps: T1 (287), A1..A6
 *   (292), then waits for finished() (300); it never cancels.
 *   R0  release_unchecked, cpp 100-105 (Tier 0): load (100) and CAS loop
 *       (101-104) adding n to the count while kQueued is clear: one step,
 *       either the CAS that succeeds (kQueued clear: return, cpp 104) or the
 *       read (load or failed CAS) that shows kQueued (leave the loop, on to
 *       R1). -DSPLIT_TIER0 splits it into a load of the bit and a separate
 *       fetch_add (negative control).
 *   R1  release_unchecked, cpp 112-114: w = fast_.exchange(nullptr) (the
 *       code loads first and skips the exchange when the slot is empty: the
 *       same as an exchange that finds it empty)
 *   R2  release_unchecked, cpp 119-120: remaining = w->state.load, waker
 *       moved out
 *   R3  release_unchecked, cpp 123: w->state.store(0) (publish; w not
 *       touched after), wake (124); surplus (125-129) -> lock (127),
 *       release_locked (128)
 *   R4  partial (only under -DFAST_ANY: by default a slot waiter needs one
 *       permit, so this path is unreachable, asserted, and absent from the
 *       code, cpp 116-118): lock; R5 drain loop (one step per CAS) into
 *       `still`, which with the kQueued bit ends like A2q (sets the bit when
 *       it sees the count at 0 with permits still needed: the model's own
 *       completion of a path the code does not have); R6
 *       w->state.store(still) (0 = publish and unlock); R7 newer =
 *       fast_.exchange(w); R8 waiters_.push_front(newer); unlock
 *   R9  release_unchecked, cpp 131-133 (Tier 2): slot empty -> lock (132),
 *       release_locked (133)
 *   L1  release_locked, cpp 144-146: x = fast_.exchange(nullptr) (the code
 *       loads first and skips the exchange when empty: under the mutex
 *       nobody fills it)
 *   L2  release_locked, cpp 148: else x = waiters_.front(); none (cpp 149)
 *       -> L3
 *   L3  release_locked, cpp 155-157, nobody waits: load the word's kQueued
 *       bit (155), then fetch_add((n << 2) - queued) (156): one RMW that
 *       credits the count and clears kQueued; break. Two steps; the model
 *       asserts the bit has not changed between them (cpp 151-153: only
 *       mutex holders set or clear it).
 *   L4  release_locked, cpp 159: remaining = x->state.load
 *   L5  release_locked, cpp 160-164, partial: x->state.store(remaining - n)
 *       (163); break. L6 (-DFAST_ANY only; the code has no partial grant
 *       from the slot, I3): if from fast, fast_.store(x); break
 *   L7  release_locked, cpp 166-168, full: waiters_.remove(x) if from the
 *       list (166), waker moved out (168); L8 x->state.store(0) (169);
 *       L9 wake list full (170-174): unlock, wake, lock (the model flushes
 *       nondeterministically after any full grant)
 *   L10 release_locked, cpp 176-177: unlock, wake_all
 *   C1  cancel, cpp 228-236: fast_.CAS(w -> nullptr) (230-231); success:
 *       state.load (233), give back requested - state via
 *       release_unchecked (234: R0..)
 *   C2  cancel, cpp 237-250: lock (237), state load (238); state == 0 or
 *       linked (239) -> remove if linked (240), unlock (241), give back
 *       requested - state via release_unchecked (244); otherwise unlock
 *       (247), yield (250), back to C1
 *   The Acquire's destructor (hpp 162-164) calls cancel() when it was queued
 *   and not resumed; a cancel-capable acquirer (CANCEL mask) may do so at
 *   any point while it waits, including after it was granted in full. A
 *   releaser (Rel) is release() (cpp 82-92, the range check not modelled)
 *   or SemaphorePermit::reset (hpp 304-308): both call release_unchecked.
 *   The kQueued bit is not cleared anywhere but L3 (it may stay set after
 *   the last waiter left by C1/C2 or was served: the next release clears it).
 *
 * The cooperative budget (commit 027886e): Acquire::await_ready (hpp
 * 166-187) checks coop_try_consume (178) before try_take (182); when the
 * budget is spent the task yields holding nothing and makes its first
 * attempt from ready_check (hpp 239-248: try_take at 243, then
 * register_waiter -> acquire_locked at 247). This changes only when the
 * owner runs T1 and A1..A6, not which shared steps it runs nor their order
 * (still T1, then A1..A6 if T1 fails); the model's interleavings already
 * allow any delay before T1, and an Acquire destroyed while yielding
 * (queued_ false: hpp 163 does not cancel) never touched the semaphore. So
 * the model needs nothing for it. Nor for a queued Acquire awaited again
 * after an interrupted timeout (hpp 170, 199): it only re-reads its own
 * state (the model's wait for rem[me] == 0) and registers nothing.
 *
 * Properties.
 *  - Liveness (no lost wake-up, no starvation): every Acquire and release
 *    returns. Acquirers keep what they get, and the configuration supplies
 *    at least the total demand (asserted), so a waiter blocked at the end
 *    is an invalid end state. `end` labels only where a process may stop.
 *  - Conservation (end): permits == INIT + released - held by HELD
 *    acquirers (cancelled ones give back full and partial grants).
 *  - No floating permits: monitor asserts, in every state where the mutex
 *    is free and no release is in progress (in_rel == 0; a cancel's give-
 *    back counts as a release), that a queued waiter (fast or list) implies
 *    permits == 0 (invariant I1). At the end no waiter is queued.
 *  - kQueued covers every queued waiter: monitor asserts in every state
 *    that a queued waiter (fast or list) implies queued (I0, default
 *    protocol; cpp 10-11), so a lock-free credit (R0) never passes a waiter.
 *  - No use-after-free: every access by a releaser (or by the list code) to
 *    waiter i asserts !freed[i]; when an Acquire returns, its waiter is in
 *    neither the fast slot nor the list.
 *  - -DCHECK_FIFO: strict FIFO. Waiters get an arrival number when they
 *    queue (A5). Whenever permits are granted to a waiter (R1: the grant is
 *    decided at the exchange, the releaser owns the waiter from then on; R5;
 *    L5/L8) no older waiter may still be waiting, and a newcomer (T1, A2)
 *    may take permits only when nobody waits.
 *
 * Result for the default protocol (configurations in tests/CMakeLists.txt):
 * verified with and without cancellation and with partial grants, including
 * the lock-free Tier 0 credit racing acquirers that drain and queue and
 * cancels whose give-backs go through Tier 0. Changes against the protocol
 * as first specified (the brief), both visible as switches:
 *  1. The partial put-back (R4..R8) drains the counter into the waiter under
 *     the mutex before putting it back (as src/sync/semaphore.cpp did).
 *     Without it (-DNO_PARTIAL_DRAIN) SPIN finds: R2 exchanges an empty
 *     slot; W registers in the slot; R1 takes W out for a partial grant;
 *     R2 locks, finds slot and list empty, credits the counter; R1 puts W
 *     back: W waits forever with permits in the counter.
 *  2. Strict FIFO (-DCHECK_FIFO) fails with partial grants: while a
 *     releaser holds a partially served waiter out of the slot (R1..R7) it
 *     is in neither place, so meanwhile a release that finds slot and list
 *     empty credits the counter and a newcomer takes those permits (T1/A2),
 *     or a newcomer registers in the empty slot and a concurrent release
 *     serves it (R1/L1), or a concurrent release serves the list front.
 *     No permit is lost and nobody starves: the held waiter goes back as
 *     the oldest. Adopted fix (the default; the code's invariant I3): store
 *     a waiter in the fast slot only when it needs exactly one more permit.
 *     Every lock-free service is then a full grant, the lock-free partial
 *     path is unreachable (asserted; the code no longer has it) and strict
 *     FIFO verifies. -DFAST_ANY restores the slot for any waiter (the
 *     partial put-back path, with its drain). With single-permit requests
 *     (Mutex) strict FIFO holds either way.
 * The kQueued bit (commit d6ff79d) makes the check "nobody queued" and the
 * lock-free credit one RMW on the word the acquirer's A2q also writes: a
 * credit either lands before A2q (which then fails its CAS and drains it)
 * or fails and goes to the waiters' tiers. -DSPLIT_TIER0 (the bit loaded,
 * then a separate fetch_add) is the seed's has_waiters race again: SPIN
 * finds R0 load (clear); the acquirer drains, sets the bit, queues; R0
 * fetch_add: the permit floats past the waiter, which waits forever.
 *
 * Switches (protocol):
 *   (none)            the fixed protocol as implemented (kQueued bit, Tier 0
 *                     CAS; drain on partial put-back included).
 *   -DSPLIT_TIER0     negative control: Tier 0 (R0) loads the bit and, if
 *                     clear, credits with a separate fetch_add (two steps).
 *   -DNO_PARTIAL_DRAIN the fixed protocol as first specified: the partial
 *                     put-back (R4..R8) does not drain the counter. Negative
 *                     control: a release that found slot and list empty while
 *                     the waiter was held credits the counter; the waiter
 *                     goes back and starves (I1 fails).
 *   -DFAST_ANY        fast slot for any oldest waiter, however many permits
 *                     it still needs (the code before I3; the default keeps
 *                     the slot for waiters needing exactly one more).
 *   -DSEED            the seed (no kQueued bit, no Tier 0): acquireWaitDirect
 *                     registers with CAS fast
 *                     0 -> w even when the list is not empty, else pushes
 *                     at the newest end; release serves the fast slot
 *                     lock-free (partial: store, CAS 0 -> w, else lock and
 *                     push at the newest end), releaseSurplus / tier 3 lock
 *                     and credit the counter if the list is empty, else
 *                     releaseToWaiters (oldest first; stores the state
 *                     BEFORE popBack and the waker copy); cancelAcquire
 *                     (complete -> return holding; CAS w -> 0; lock,
 *                     complete -> return holding; list.remove(w); give back
 *                     requested - state).
 *   -DSEED_SAFE_LIST  with SEED: releaseToWaiters pops and copies the waker
 *                     before the store (isolates the other seed bugs).
 *   -DSEED_REMOVE_CORRUPT with SEED: list.remove of a non-member clears the
 *                     list (std.DoublyLinkedList with null links); default:
 *                     remove of a non-member does nothing.
 *   -DHAS_WAITERS     the seed's earlier has_waiters hint (a separate flag,
 *                     no kQueued bit): release reads the flag and, if false,
 *                     fetch_adds without the mutex (a second step);
 *                     acquirers lock, drain, set the flag, push, unlock.
 * Switches (configuration): ACQ (1..3) acquirers needing NEED1..NEED3;
 *   REL (1..3) releasers releasing RELN1..RELN3 once; INIT initial permits;
 *   -DCANCEL=mask: acquirer i may cancel while waiting if bit i-1 is set
 *   (-DCANCEL = acquirer 1); -DLATE_RELEASE=k: releasers start once k
 *   acquirers have queued or been granted (isolates orderings).
 * Switches (checks): -DCHECK_FIFO; -DNO_MONITOR (no I0/I1 monitor: a float
 *   then shows as a deadlock, or at the end); -DNO_LIVENESS (a blocked waiter is a
 *   valid end state: assertions only); -DNO_UAF_CHECK; -DNO_FLUSH (no L9).
 */

#ifndef ACQ
#define ACQ 2
#endif
#ifndef REL
#define REL 2
#endif
#ifndef INIT
#define INIT 0
#endif
#ifndef NEED1
#define NEED1 1
#endif
#ifndef NEED2
#define NEED2 1
#endif
#ifndef NEED3
#define NEED3 1
#endif
#ifndef RELN1
#define RELN1 1
#endif
#ifndef RELN2
#define RELN2 1
#endif
#ifndef RELN3
#define RELN3 1
#endif
#ifdef CANCEL
#define CANCEL_MASK CANCEL
#else
#define CANCEL_MASK 0
#endif
#if defined(HAS_WAITERS) && defined(CANCEL)
#error "HAS_WAITERS models no cancellation"
#endif
/* QBIT: the kQueued bit in the permits word (the code as it is); the seed's
 * protocols (SEED, HAS_WAITERS) have no such bit. */
#if !defined(SEED) && !defined(HAS_WAITERS)
#define QBIT
#endif
#if defined(SPLIT_TIER0) && !defined(QBIT)
#error "SPLIT_TIER0 is a variant of the default protocol"
#endif

#define NEED(i) ((i) == 1 -> NEED1 : ((i) == 2 -> NEED2 : NEED3))
#define RELN(i) ((i) == 1 -> RELN1 : ((i) == 2 -> RELN2 : RELN3))

#define HELD      1
#define CANCELLED 2

byte permits = INIT;   /* the count: permits_ >> kCountShift */
#ifdef QBIT
bool queued = false;   /* kQueued: the same word as permits (steps that touch
                          both are one atomic step, as one RMW on permits_) */
#endif
byte fast = 0;
byte q[ACQ];
byte qlen = 0;
bool mtx = false;
byte rem[ACQ + 1];
bool linked[ACQ + 1];
bool freed[ACQ + 1];
byte outcome[ACQ + 1];
byte in_rel = 0;        /* ghost: releases (incl. give-backs) in progress */
byte n_done = 0;        /* ghost: processes finished */
byte settled = 0;       /* ghost: acquirers queued or granted */
byte sc = 0;            /* scratch for list shifts, always 0 between steps */
#ifdef HAS_WAITERS
bool has_waiters = false;
#endif

#ifdef CHECK_FIFO
byte wseq[ACQ + 1];     /* arrival number while waiting, 0 otherwise */
byte seqctr = 0;
/* j waits and arrived before i (i == 0: a newcomer, after everyone) */
#define OLDER(j, i) ((j) != (i) && wseq[j] != 0 && (wseq[i] == 0 || wseq[j] < wseq[i]))
#if ACQ == 1
#define fifo_grant(i) assert(!OLDER(1, i))
#elif ACQ == 2
#define fifo_grant(i) assert(!OLDER(1, i) && !OLDER(2, i))
#else
#define fifo_grant(i) assert(!OLDER(1, i) && !OLDER(2, i) && !OLDER(3, i))
#endif
#define fifo_reg(i) seqctr++; wseq[i] = seqctr
#define fifo_clear(i) wseq[i] = 0
#else
#define fifo_grant(i) skip
#define fifo_reg(i) skip
#define fifo_clear(i) skip
#endif

#ifdef NO_UAF_CHECK
#define touch(i) skip
#else
#define touch(i) assert(!freed[i])
#endif

inline lock() { atomic { !mtx -> mtx = true } }
inline unlock() { mtx = false }

/* List operations (mutex held): one step each. */
inline push_newest(i) {
  touch(i); q[qlen] = i; qlen++; linked[i] = true
}
inline push_oldest(i) {
  d_step {
    touch(i);
    sc = qlen;
    do
    :: sc > 0 -> q[sc] = q[sc - 1]; sc--
    :: else -> break
    od;
    q[0] = i; qlen++; linked[i] = true
  }
}
inline unlink_body(i) {
  touch(i);
  sc = 0;
  do
  :: q[sc] == i -> break
  :: else -> sc++
  od;
  do
  :: sc + 1 < qlen -> q[sc] = q[sc + 1]; sc++
  :: else -> break
  od;
  qlen--; q[qlen] = 0; linked[i] = false; sc = 0
}
inline unlink(i) { d_step { unlink_body(i) } }

/* R1 (both protocols): take the fast slot. Under CHECK_FIFO the grant is
 * decided here: the releaser owns w, nobody else changes rem[w]. */
inline take_fast_slot() {
  atomic {
    w = fast; fast = 0;
#ifndef QBIT
    in_rel++;
#endif
#ifdef CHECK_FIFO
    if
    :: w != 0 -> fifo_grant(w); if :: n >= rem[w] -> fifo_clear(w) :: else -> skip fi
    :: else -> skip
    fi
#endif
  }
}

/* ---- seed (-DSEED) ------------------------------------------------------- */

/* releaseToWaiters(n), mutex held; unlocks. */
inline seed_release_to_waiters() {
  do
  :: n == 0 -> break
  :: n > 0 && qlen == 0 -> break
  :: n > 0 && qlen > 0 ->
       atomic { x = q[0]; touch(x); r = rem[x] };               /* back(); state.load */
       if
       :: r == 0 -> unlink(x); atomic { touch(x); x = 0 }       /* popBack; collect waker */
       :: r > 0 && n >= r ->
#ifdef SEED_SAFE_LIST
            unlink(x);
            atomic { touch(x); fifo_grant(x); fifo_clear(x); rem[x] = 0; n = n - r; x = 0; r = 0 }
#else
            atomic { touch(x); fifo_grant(x); fifo_clear(x); rem[x] = 0; n = n - r; r = 0 };
            unlink(x);                                          /* popBack after the store */
            atomic { touch(x); x = 0 }                          /* collect waker */
#endif
       :: r > 0 && n < r ->
            atomic { touch(x); fifo_grant(x); rem[x] = r - n; n = 0; x = 0; r = 0 };
            break
       fi
  od;
  if
  :: n > 0 -> atomic { permits = permits + n; n = 0 }           /* fetchAdd(rem) */
  :: else -> skip
  fi;
  unlock()
}

/* releaseSurplus / tier 3, mutex held; unlocks. */
inline seed_locked() {
  if
  :: qlen == 0 -> atomic { permits = permits + n; n = 0 }; unlock()
  :: else -> seed_release_to_waiters()
  fi
}

inline seed_release() {
  take_fast_slot();                                             /* swap(0) */
  if
  :: w != 0 ->
       atomic { touch(w); r = rem[w] };                         /* copy waker; state.load */
       if
       :: n >= r ->
            atomic { touch(w); rem[w] = 0; n = n - r; w = 0; r = 0 };  /* state.store(0) */
            if
            :: n > 0 -> lock(); seed_locked()                   /* releaseSurplus */
            :: else -> skip
            fi
       :: else ->
            atomic { touch(w); rem[w] = r - n; n = 0; r = 0 };  /* state.store(rem - num) */
            atomic { if :: fast == 0 -> fast = w; ok = true :: else -> ok = false fi };
            if
            :: !ok -> lock(); atomic { push_newest(w) }; unlock()  /* pushFront */
            :: else -> skip
            fi
       fi
  :: else -> lock(); seed_locked()
  fi;
  atomic { in_rel--; w = 0; x = 0; r = 0; ok = false; ff = false }
}

/* ---- fixed protocol (default) -------------------------------------------- */

/* release_locked(n), mutex held; unlocks. */
inline release_locked() {
  do
  :: n == 0 -> break
  :: n > 0 ->
       atomic { x = fast; fast = 0 };                           /* L1 */
       if
       :: x != 0 -> ff = true
       :: else ->
            ff = false;
            if
            :: qlen > 0 -> x = q[0]                             /* L2 */
            :: else ->
#ifdef QBIT
                 qb = queued;                                   /* L3 load */
                 atomic {                                       /* L3 fetch_add */
                   assert(queued == qb);     /* only mutex holders change it */
                   permits = permits + n; n = 0; queued = false; qb = false
                 };
#else
                 atomic { permits = permits + n; n = 0 };       /* L3 */
#endif
                 break
            fi
       fi;
       atomic { touch(x); r = rem[x] };                         /* L4 */
       if
       :: n < r ->
#ifndef FAST_ANY
            assert(!ff);
#endif
            atomic { touch(x); fifo_grant(x); rem[x] = r - n; n = 0; r = 0 };  /* L5 */
            if :: ff -> fast = x :: else -> skip fi;            /* L6 */
            x = 0;
            break
       :: n >= r ->
            if :: !ff -> unlink(x) :: else -> skip fi;          /* L7 */
            atomic { touch(x); fifo_grant(x); fifo_clear(x); rem[x] = 0; n = n - r; x = 0; r = 0 };  /* L8 */
#ifndef NO_FLUSH
            if
            :: n > 0 -> unlock(); lock()                        /* L9 */
            :: true -> skip
            fi
#endif
       fi
  od;
#ifdef HAS_WAITERS
  if :: qlen == 0 -> has_waiters = false :: else -> skip fi;
#endif
  unlock()                                                      /* L10 */
}

inline fixed_release() {
#ifdef HAS_WAITERS
  atomic { in_rel++; ok = has_waiters };
  if
  :: !ok -> atomic { permits = permits + n; n = 0 }
  :: else -> lock(); release_locked()
  fi;
  atomic { in_rel--; w = 0; x = 0; r = 0; ok = false; ff = false }
#else
#ifdef QBIT
#ifdef SPLIT_TIER0
  /* negative control: the bit loaded, then a separate fetch_add */
  atomic { in_rel++; ok = !queued };                            /* R0 load */
  if
  :: ok -> atomic { permits = permits + n; n = 0; in_rel--; ok = false }  /* R0 fetch_add */
  :: else -> skip
  fi;
#else
  atomic {                                                      /* R0 */
    if
    :: !queued -> permits = permits + n; n = 0   /* CAS succeeds: done */
    :: else -> in_rel++                          /* sees kQueued: tier 1 */
    fi
  };
#endif
  if
  :: n == 0 -> skip
  :: else ->
#endif
  take_fast_slot();                                             /* R1 */
  if
  :: w != 0 ->
       atomic { touch(w); r = rem[w] };                         /* R2 */
       if
       :: n >= r ->
            atomic { touch(w); rem[w] = 0; n = n - r; w = 0; r = 0 };  /* R3 */
            if
            :: n > 0 -> lock(); release_locked()
            :: else -> skip
            fi
       :: else ->
#ifndef FAST_ANY
            assert(false);                  /* unreachable: fast waiters need 1 */
#endif
            lock();                                             /* R4 */
            r = r - n; n = 0;
#ifndef NO_PARTIAL_DRAIN
            do                                                  /* R5 */
            :: atomic { (r > 0 && permits > 0) -> fifo_grant(w);
                 if
                 :: permits >= r -> permits = permits - r; r = 0; fifo_clear(w)
                 :: else -> r = r - permits; permits = 0
                 fi }
#ifdef QBIT
            :: atomic { (r > 0 && permits == 0) -> queued = true }; break  /* as A2q */
            :: r == 0 -> break
#else
            :: (r == 0 || permits == 0) -> break
#endif
            od;
#endif
            atomic { touch(w); rem[w] = r; if :: r == 0 -> w = 0 :: else -> skip fi };  /* R6 */
            if
            :: w != 0 ->
                 atomic { x = fast; fast = w };                 /* R7 */
                 if :: x != 0 -> push_oldest(x) :: else -> skip fi  /* R8 */
            :: else -> skip
            fi;
            unlock()
       fi
  :: else -> lock(); release_locked()                           /* R9 */
  fi;
  atomic { in_rel--; w = 0; x = 0; r = 0; ok = false; ff = false }
#ifdef QBIT
  fi
#endif
#endif
}

#ifdef SEED
#define do_release seed_release
#else
#define do_release fixed_release
#endif

proctype Acq(byte me) {
  byte n, w, x, r;        /* locals of the give-back release() */
  bool ok, ff, qb;

  /* T1 try_take */
  if
  :: atomic { permits >= NEED(me) -> fifo_grant(0); permits = permits - NEED(me); rem[me] = 0; settled++ };
     goto acquired
  :: else -> skip
  fi;

  /* acquire_locked (seed: acquireWaitDirect) */
  lock();                                                       /* A1 */
  do                                                            /* A2 */
  :: atomic { (rem[me] > 0 && permits > 0) -> fifo_grant(0);
       if
       :: permits >= rem[me] -> permits = permits - rem[me]; rem[me] = 0
       :: else -> rem[me] = rem[me] - permits; permits = 0
       fi }
#ifdef QBIT
  :: atomic { (rem[me] > 0 && permits == 0) -> queued = true }; break  /* A2q */
  :: rem[me] == 0 -> break
#else
  :: (rem[me] == 0 || permits == 0) -> break
#endif
  od;
  if
  :: rem[me] == 0 -> atomic { mtx = false; settled++ }; goto acquired  /* A3 */
  :: else -> skip
  fi;
#if defined(HAS_WAITERS)
  has_waiters = true;
  atomic { fifo_reg(me); push_newest(me) };
#elif defined(SEED)
  atomic { if :: fast == 0 -> fast = me; ok = true; fifo_reg(me) :: else -> ok = false fi };  /* CAS 0 -> w */
  if
  :: !ok -> atomic { fifo_reg(me); push_newest(me) }           /* pushFront */
  :: else -> skip
  fi;
#else
  if                                                            /* A4 */
#ifndef FAST_ANY
  :: (fast == 0 && qlen == 0 && rem[me] == 1) -> atomic { fast = me; fifo_reg(me) }  /* A5 */
#else
  :: (fast == 0 && qlen == 0) -> atomic { fast = me; fifo_reg(me) }  /* A5 */
#endif
  :: else -> atomic { fifo_reg(me); push_newest(me) }          /* A5 */
  fi;
#endif
  atomic { mtx = false; settled++; ok = false };                /* A6 */

  /* wait until finished, or (cancel-capable) be destroyed while waiting */
#ifdef NO_LIVENESS
end_wait:
#endif
  if
  :: rem[me] == 0 -> goto acquired
#ifdef CANCEL
  :: ((CANCEL_MASK >> (me - 1)) & 1) -> goto cancel
#endif
  fi;

cancel:
#ifdef SEED
  if                                                            /* isComplete */
  :: rem[me] == 0 -> goto acquired
  :: else -> skip
  fi;
  atomic { if :: fast == me -> fast = 0; ok = true; fifo_clear(me) :: else -> ok = false fi };
  if
  :: ok -> n = NEED(me) - rem[me]; goto give_back
  :: else -> skip
  fi;
  lock();
  if
  :: rem[me] == 0 -> unlock(); goto acquired
  :: else -> skip
  fi;
  d_step {                                                      /* waiters.remove(w) */
    if
    :: linked[me] -> unlink_body(me)
#ifdef SEED_REMOVE_CORRUPT
    :: else ->
         do
         :: sc < qlen -> linked[q[sc]] = false; q[sc] = 0; sc++
         :: else -> break
         od;
         qlen = 0; sc = 0
#else
    :: else -> skip
#endif
    fi;
    fifo_clear(me)
  };
  n = NEED(me) - rem[me];
  unlock();
  goto give_back;
#else
  do
  :: atomic { if :: fast == me -> fast = 0; ok = true; fifo_clear(me) :: else -> ok = false fi };  /* C1 */
     if
     :: ok -> n = NEED(me) - rem[me]; break
     :: else -> skip
     fi;
     lock();                                                    /* C2 */
     if
     :: rem[me] == 0 -> unlock(); n = NEED(me); break
     :: rem[me] > 0 && linked[me] ->
          d_step { unlink_body(me); fifo_clear(me) }; n = NEED(me) - rem[me]; unlock(); break
     :: rem[me] > 0 && !linked[me] -> unlock()                 /* held by a releaser: yield, retry */
     fi
  od;
#endif

give_back:
  outcome[me] = CANCELLED;
  if
  :: n > 0 -> do_release()
  :: else -> skip
  fi;
  goto finish;

acquired:
  outcome[me] = HELD;
finish:
  /* the Acquire returns: its waiter is freed */
  atomic { assert(fast != me && !linked[me]); freed[me] = true; n_done++ }
}

proctype Rel(byte id) {
  byte n, w, x, r;
  bool ok, ff, qb;
#ifdef LATE_RELEASE
  atomic { settled >= LATE_RELEASE -> n = RELN(id) };
#else
  n = RELN(id);
#endif
  do_release();
  n_done++
}

#ifndef NO_MONITOR
/* I1: whenever the mutex is free and no release is in progress, a queued
 * waiter implies an empty counter. */
active proctype monitor() {
end_monitor:
  atomic {
    ((!mtx && in_rel == 0 && (fast != 0 || qlen > 0) && permits > 0)
#ifdef QBIT
     || ((fast != 0 || qlen > 0) && !queued)       /* I0 */
#endif
    ) -> assert(false)
  }
}
#endif

init {
  byte i, held, supply, demand;
  atomic {
    i = 1;
    do
    :: i <= ACQ -> rem[i] = NEED(i); demand = demand + NEED(i); run Acq(i); i++
    :: else -> break
    od;
    supply = INIT;
    i = 1;
    do
    :: i <= REL -> supply = supply + RELN(i); run Rel(i); i++
    :: else -> break
    od;
    assert(ACQ <= 3 && REL <= 3 && supply >= demand);
    i = 0
  };
#ifdef NO_LIVENESS
end_all:
#endif
  (n_done == ACQ + REL);
  atomic {
    held = 0;
    i = 1;
    do
    :: i <= ACQ ->
         assert(outcome[i] != 0 && !linked[i]);
         if :: outcome[i] == HELD -> held = held + NEED(i) :: else -> skip fi;
         i++
    :: else -> break
    od;
    assert(fast == 0 && qlen == 0);
    assert(permits + held == supply)
  }
}
