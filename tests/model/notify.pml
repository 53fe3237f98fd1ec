/*
 * SPIN model of Notify's protocol (the state word with its phase and
 * notify_waiters() count, the spin lock, the FIFO waiter ring, the guarded
 * ring of notify_waiters(), cancellation), as implemented in
 *   include/volt/sync/notify.hpp   notified, try_store_permit (notify_one,
 *                                  notify_last), try_take_permit, Notified
 *                                  (enable, await_*, destructor)
 *   src/sync/notify.cpp            notify_slow, notify_locked,
 *                                  notify_waiters, register_waiter, cancel
 * Not modelled: the waker itself (a task suspends with the readiness check
 * `woken`, i.e. it waits until its `notification` is set: the model's wait;
 * waking after unlocking has no effect on the shared state), the cooperative
 * budget (only delays a poll), moves of a Notified, notified_blocking (the
 * same steps as an await: P1, R1..R3, wait) and memory orders (SPIN
 * interleaves sequentially consistently).
 *
 * State. phase (EMPTY / WAITING / NOTIFIED) and calls (the notify_waiters()
 * count) are the word state_; every step that reads or writes the word is
 * one atomic step covering both. A second permit cannot be represented: the
 * permit is phase == NOTIFIED, so "at most one permit" holds by construction
 * and the model counts the notify_one calls that found one (merged). lk =
 * lock_ (test-and-set). Rings: where[i] = 0 (in no ring: next == nullptr),
 * 1 (waiters_), 2 + k (the guarded ring of notify_waiters() process k);
 * seq[i] = arrival number, so a ring's oldest is its smallest seq (the
 * guarded ring keeps the order: ring_move_all). notif[i] = the waiter's
 * `notification` (NONE / ONE / LAST / ALL); created[i] = created_calls_.
 *
 * Atomicity. One step = one atomic instruction (load, store, CAS that
 * succeeds, fetch_add) or one ring operation under lock_ (only lock holders
 * see the rings); ghost updates are folded into the step they describe. A
 * CAS loop (transition(), T0) is one step per outcome: a failed
 * CAS changes nothing and is retried with what it read. Plain stores of the
 * word under the lock from WAITING are exact as one step with the load
 * before them: no lock-free transition starts from WAITING.
 *
 * Model steps (each maps to the code lines listed below; hpp =
 * include/volt/sync/notify.hpp, cpp = src/sync/notify.cpp).
 *   N0  notified(): created = calls (acquire load).
 *   P1  try_take_permit (from await_ready via try_complete_lock_free, from
 *       enable, or from attempt_after_yield after a budget yield: the budget
 *       is taken before the attempt, so the yield only delays P1): one step:
 *       count changed -> kBroadcast (done, the permit left alone); NOTIFIED
 *       -> EMPTY (kTaken, done); else kNothing.
 *   R1  register_waiter: lock_.lock() (from await_suspend, enable or
 *       attempt_after_yield).
 *   R2  register_waiter (state kInit): the load and, if the count is
 *       unchanged, the CAS loop: count changed -> done; NOTIFIED -> EMPTY:
 *       done; EMPTY -> WAITING, or WAITING already: queue at the newest end.
 *       One step: the count only changes under lock_, which we hold, and the
 *       ring push is under lock_. -DNO_RECHECK: phase = WAITING by a plain
 *       store, no CAS (negative control (a)).
 *   R3  register_waiter: unlock (on each of its three exits).
 *   W   the wait: woken / notified_now (await_ready, the readiness check,
 *       await_resume): notif[me] != NONE -> done.
 *   Q1  (-DREPOLL=mask) a poll while registered: enable() kRegistered
 *       (notified_now lock-free = W, then register_waiter), or a spurious
 *       wake re-polling. register_waiter kRegistered path: lock + load,
 *       notification set -> done, count changed -> ring_unlink (from
 *       whichever ring) and done, else keep waiting; unlock. Lock, one step,
 *       unlock.
 *   C1  (-DCANCEL=mask) ~Notified -> cancel: load notification; ALL ->
 *       return.
 *   C2  cancel: lock; one step: kind = notification; if linked, unlink, and
 *       if waiters_ is now empty and the phase WAITING store EMPTY.
 *   C3  cancel: kind ONE/LAST -> notify_locked (NL1..NL3) (I5).
 *       -DDROP_CANCEL: skip it (negative control (b)). C4 unlock.
 *   T0  transition(): the one CAS loop; one step per outcome (a failed CAS
 *       changes nothing and is retried with what it read).
 *   T1  notify_one / notify_last -> try_store_permit: EMPTY|NOTIFIED ->
 *       NOTIFIED, done; WAITING -> notify_slow.
 *   S1  notify_slow: lock.  S2 unlock (the wake after it has no shared
 *       effect).
 *   NL1 notify_locked: try_store_permit again (the last waiter may have
 *       left): EMPTY|NOTIFIED -> NOTIFIED, return.
 *   NL2 notify_locked: ring_pop oldest (LAST: newest) of waiters_, waker
 *       moved out, and if waiters_ is now empty the store WAITING -> EMPTY.
 *   NL3 notify_locked: notification = ONE / LAST (release); the notifier
 *       touches the waiter no more.
 *   A1  notify_waiters: lock.
 *   A2  notify_waiters: load; not WAITING -> fetch_add of the count, then
 *       unlock; WAITING -> store count+1 | EMPTY and ring_move_all onto the
 *       guarded ring: one step (I4). -DNW_SPLIT: the ring moves and EMPTY in
 *       one critical section, the count is bumped in a second one after
 *       unlock/lock (negative control (c)).
 *   A3  notify_waiters: ring_pop oldest of the guarded ring (none left ->
 *       A5), waker moved out.
 *   A4  notify_waiters: notification = ALL. Then, nondeterministically (the
 *       WakeList full): unlock, lock.
 *   A5  notify_waiters: unlock.
 *
 * Step-to-line mapping:
 *   N0  include/volt/sync/notify.hpp:358  return Notified(*this, calls(state_.load(std::memory_order_acquire)));
 *   P1  include/volt/sync/notify.hpp:258  return try_complete_lock_free();
 *   P1  include/volt/sync/notify.hpp:236  if (try_complete_lock_free()) return true;
 *   P1  include/volt/sync/notify.hpp:323  if (n.try_complete_lock_free()) return true;
 *   P1  include/volt/sync/notify.hpp:304  if (notify_->try_take_permit(created_calls_) == Take::kNothing) return false;
 *   P1  include/volt/sync/notify.hpp:190  if (calls(s) != created_calls || phase(s) != kNotified) return false;
 *   P1  include/volt/sync/notify.hpp:191  *next = with_phase(s, kEmpty);
 *   T0  include/volt/sync/notify.hpp:159  if (state_.compare_exchange_weak(current, replacement, success, std::memory_order_acquire))
 *   R1  include/volt/sync/notify.hpp:279  if (notify_->register_waiter(*this, detail::make_task_waker(task))) return true;
 *   R1  src/sync/notify.cpp:156  lock_.lock();
 *   R2  src/sync/notify.cpp:159  const std::uint64_t current = state_.load(std::memory_order_acquire);
 *   R2  src/sync/notify.cpp:161  if (calls(current) != notified.created_calls_) {
 *   R2  src/sync/notify.cpp:171  if (phase(s) == kWaiting) return false;  // already queued behind others
 *   R2  src/sync/notify.cpp:172  *next = with_phase(s, phase(s) == kEmpty ? kWaiting : kEmpty);
 *   R2  src/sync/notify.cpp:176  if (t.changed && phase(t.seen) == kNotified) {
 *   R2  src/sync/notify.cpp:182  ring_push_back(waiters_, &waiter);
 *   R3  src/sync/notify.cpp:162  lock_.unlock();
 *   R3  src/sync/notify.cpp:177  lock_.unlock();
 *   R3  src/sync/notify.cpp:184  lock_.unlock();
 *   W   include/volt/sync/notify.hpp:263  return woken(&waiter_) && detail::coop_try_consume();
 *   W   include/volt/sync/notify.hpp:289  if (state_ == kRegistered) notified_now();
 *   W   include/volt/sync/notify.hpp:312  if (waiter_.notification.load(std::memory_order_acquire) == detail::NotifyKind::kNone)
 *   W   include/volt/sync/notify.hpp:338  std::memory_order_acquire) != detail::NotifyKind::kNone;
 *   Q1  include/volt/sync/notify.hpp:239  if (notified_now()) return true;
 *   Q1  include/volt/sync/notify.hpp:242  return !notify_->register_waiter(*this, detail::Waker());
 *   Q1  src/sync/notify.cpp:189  if (waiter.notification.load(std::memory_order_relaxed) != NotifyKind::kNone) {
 *   Q1  src/sync/notify.cpp:194  if (calls(current) != notified.created_calls_) {
 *   Q1  src/sync/notify.cpp:197  ring_unlink(&waiter);
 *   Q1  src/sync/notify.cpp:204  lock_.unlock();
 *   C1  include/volt/sync/notify.hpp:227  if (state_ == kRegistered) notify_->cancel(*this);
 *   C1  src/sync/notify.cpp:212  if (waiter.notification.load(std::memory_order_acquire) == NotifyKind::kAll) return;
 *   C2  src/sync/notify.cpp:215  lock_.lock();
 *   C2  src/sync/notify.cpp:217  const NotifyKind kind = waiter.notification.load(std::memory_order_relaxed);
 *   C2  src/sync/notify.cpp:218  if (waiter.next != nullptr) {
 *   C2  src/sync/notify.cpp:220  ring_unlink(&waiter);
 *   C2  src/sync/notify.cpp:222  if (ring_empty(waiters_) && phase(current) == kWaiting) {
 *   C2  src/sync/notify.cpp:225  state_.store(with_phase(current, kEmpty), std::memory_order_release);
 *   C3  src/sync/notify.cpp:229  if (kind == NotifyKind::kOne || kind == NotifyKind::kLast) {
 *   C3  src/sync/notify.cpp:231  next = notify_locked(kind == NotifyKind::kLast);
 *   C4  src/sync/notify.cpp:233  lock_.unlock();
 *   T1  include/volt/sync/notify.hpp:105  if (try_store_permit()) return;
 *   T1  include/volt/sync/notify.hpp:110  if (try_store_permit()) return;
 *   T1  include/volt/sync/notify.hpp:174  if (phase(s) == kWaiting) return false;
 *   T1  include/volt/sync/notify.hpp:175  *next = with_phase(s, kNotified);
 *   S1  src/sync/notify.cpp:87  lock_.lock();
 *   S2  src/sync/notify.cpp:89  lock_.unlock();
 *   NL1 src/sync/notify.cpp:96  if (try_store_permit()) return {};
 *   NL2 src/sync/notify.cpp:98  NotifyWaiter* waiter = ring_pop(waiters_, newest);
 *   NL2 src/sync/notify.cpp:99  detail::Waker waker = std::move(waiter->waker);  // before publishing (I3)
 *   NL2 src/sync/notify.cpp:100  if (ring_empty(waiters_)) {
 *   NL2 src/sync/notify.cpp:107  state_.store(with_phase(state_.load(std::memory_order_relaxed), kEmpty),
 *   NL3 src/sync/notify.cpp:112  waiter->notification.store(newest ? NotifyKind::kLast : NotifyKind::kOne,
 *   A1  src/sync/notify.cpp:118  lock_.lock();
 *   A2  src/sync/notify.cpp:119  const std::uint64_t current = state_.load(std::memory_order_relaxed);
 *   A2  src/sync/notify.cpp:120  if (phase(current) != kWaiting) {
 *   A2  src/sync/notify.cpp:126  state_.fetch_add(kOneCall, std::memory_order_release);
 *   A2  src/sync/notify.cpp:127  lock_.unlock();
 *   A2  src/sync/notify.cpp:133  state_.store(with_phase(current + kOneCall, kEmpty), std::memory_order_release);
 *   A2  src/sync/notify.cpp:135  ring_move_all(waiters_, guarded);
 *   A3  src/sync/notify.cpp:137  while (NotifyWaiter* waiter = ring_pop(guarded,
 *   A3  src/sync/notify.cpp:138  wakes.push(std::move(waiter->waker));  // before publishing (I3)
 *   A4  src/sync/notify.cpp:140  waiter->notification.store(NotifyKind::kAll, std::memory_order_release);
 *   A4  src/sync/notify.cpp:141  if (wakes.full()) {
 *   A4  src/sync/notify.cpp:144  lock_.unlock();
 *   A4  src/sync/notify.cpp:146  lock_.lock();
 *   A5  src/sync/notify.cpp:149  lock_.unlock();
 *   I1  src/sync/notify.cpp:21  I1  Under lock_, phase == WAITING exactly when waiters_ is not empty.
 *
 * Properties.
 *  - I1 (the header of notify.cpp): asserted on every lock acquisition: phase == WAITING
 *    exactly when waiters_ is non-empty. NL2 asserts waiters_ is non-empty.
 *  - No use-after-free: a notifier never pops or stores to a waiter whose
 *    Notified is gone (freed[]); a finished Notified is in no ring.
 *  - notify_waiters covers exactly the Notifieds created before it: A4
 *    asserts created < calls for every waiter it completes (and a Notified
 *    completed by the count saw the count change, by construction).
 *  - At quiescence (the end, or every process done or blocked: `timeout`),
 *    init asserts:
 *    . every Notified created before some notify_waiters() call (created <
 *      calls) is done (property 2); a blocked one is in waiters_, not
 *      completed, and then phase == WAITING (no permit next to a waiter);
 *    . no lost notify_one: ONE + LAST == consumed + merged + (phase ==
 *      NOTIFIED), where consumed counts Notifieds that returned on a
 *      ONE/LAST notification or took the permit, merged the notify_one
 *      calls (including cancels passing one on) that found the permit
 *      already stored. A ONE chosen for a cancelled waiter must therefore
 *      reach another waiter or the permit (property 4).
 *    Blocked waiters are valid end states here (end_wait) because permits
 *    coalesce: two notify_one calls before anyone waits leave one permit,
 *    and the second waiter rightly waits forever.
 *  - -DGATED: strict liveness by valid end states. Notifier k (k = 1 ..
 *    ONE + LAST) starts only once k waiters have queued or finished, so a
 *    notification never meets a stored permit; with ONE + LAST >= WAIT
 *    every Notified must return (W is not an end state, init waits for
 *    everyone).
 *
 * Result (configurations in tests/CMakeLists.txt, model.notify.*): the
 * protocol as implemented verifies, with notify_one / notify_last,
 * cancellation (including of a waiter already chosen), re-polls and one or
 * two notify_waiters calls; SPIN found no issue in the code. The negative
 * controls fail: -DNO_RECHECK (a notify_one stores the permit between a
 * waiter's P1 and its R2; R2's plain store of WAITING overwrites it: that
 * waiter waits forever, the notification is unaccounted), -DDROP_CANCEL (a
 * waiter chosen by NL3 is destroyed; its ONE vanishes), -DNW_SPLIT (a
 * Notified created before the bump registers into waiters_ after the ring
 * moved: the bump covers it, nothing completes it).
 *
 * Switches (configuration): WAIT (1..3) waiters; ONE notify_one callers;
 *   LAST notify_last callers; NW (0..2) notify_waiters callers;
 *   -DCANCEL=mask: waiter i may be destroyed while registered if bit i-1 is
 *   set; -DREPOLL=mask: waiter i may re-poll once while registered; -DGATED.
 * Switches (negative controls): -DNO_RECHECK, -DDROP_CANCEL, -DNW_SPLIT.
 */

#ifndef WAIT
#define WAIT 2
#endif
#ifndef ONE
#define ONE 2
#endif
#ifndef LAST
#define LAST 0
#endif
#ifndef NW
#define NW 0
#endif
#ifdef CANCEL
#define CANCEL_MASK CANCEL
#else
#define CANCEL_MASK 0
#endif
#ifdef REPOLL
#define REPOLL_MASK REPOLL
#else
#define REPOLL_MASK 0
#endif

#define EMPTY    0
#define WAITING  1
#define NOTIFIED 2

#define K_NONE 0
#define K_ONE  1
#define K_LAST 2
#define K_ALL  3

/* how a Notified completed */
#define H_TAKEN 1   /* took the permit */
#define H_BCAST 2   /* saw the count changed */
#define H_NOTIF 3   /* a notifier completed it (notif[me]) */

byte phase = EMPTY;
byte calls = 0;
bool lk = false;
byte where[WAIT + 1];
byte seq[WAIT + 1];
byte seqctr = 0;
byte mainlen = 0;       /* waiters_ length */
byte notif[WAIT + 1];
byte created[WAIT + 1];
bool done[WAIT + 1];    /* freed: the Notified is gone */
byte consumed = 0;      /* ghost: ONE/LAST notifications and permits used */
byte merged = 0;        /* ghost: permit stores that found the permit */
byte settled = 0;       /* ghost: waiters queued or finished */
byte n_done = 0;        /* ghost: processes finished */
byte sc = 0;            /* scratch, 0 between steps */

inline lock() {
  atomic { !lk -> lk = true; assert((phase == WAITING) == (mainlen > 0)) }  /* I1 */
}
inline unlock() { lk = false }

/* w = oldest (or newest) of ring r, unlinked; 0 if r is empty. */
inline pop(r, nw, w) {
  w = 0; sc = WAIT;
  do
  :: sc > 0 ->
       if
       :: where[sc] == r && (w == 0 || (nw && seq[sc] > seq[w]) || (!nw && seq[sc] < seq[w])) -> w = sc
       :: else -> skip
       fi;
       sc--
  :: else -> break
  od;
  sc = 0;
  if
  :: w != 0 ->
       assert(!done[w]);
       if :: r == 1 -> mainlen-- :: else -> skip fi;
       where[w] = 0
  :: else -> skip
  fi
}

inline unlink_me() {
  if :: where[me] == 1 -> mainlen-- :: else -> skip fi;
  where[me] = 0
}

/* try_store_permit: EMPTY|NOTIFIED -> NOTIFIED (ok), or WAITING (!ok). */
inline store_permit() {
  atomic {
    if
    :: phase != WAITING ->
         if :: phase == NOTIFIED -> merged++ :: else -> skip fi;
         phase = NOTIFIED; ok = true
    :: else -> ok = false
    fi
  }
}

/* notify_locked(newest), lock held. */
inline notify_locked(nw) {
  store_permit();                                              /* NL1 */
  if
  :: !ok ->
       atomic {                                                /* NL2 */
         assert(mainlen > 0);
         pop(1, nw, w);
         assert(w != 0);
         if :: mainlen == 0 -> phase = EMPTY :: else -> skip fi
       };
       atomic { assert(!done[w]); notif[w] = (nw -> K_LAST : K_ONE); w = 0 }  /* NL3 */
  :: else -> skip
  fi
}

proctype Waiter(byte me) {
  byte how = 0, kind = 0, w = 0;
  bool ok;
  created[me] = calls;                                         /* N0 */
  atomic {                                                     /* P1 */
    if
    :: calls != created[me] -> how = H_BCAST
    :: calls == created[me] && phase == NOTIFIED -> phase = EMPTY; how = H_TAKEN
    :: else -> skip
    fi
  };
  if :: how != 0 -> settled++; goto complete :: else -> skip fi;
  lock();                                                      /* R1 */
  atomic {                                                     /* R2 */
    if
    :: calls != created[me] -> how = H_BCAST
    :: else ->
#ifdef NO_RECHECK
         phase = WAITING;
#else
         if
         :: phase == NOTIFIED -> phase = EMPTY; how = H_TAKEN
         :: phase == EMPTY -> phase = WAITING
         :: phase == WAITING -> skip
         fi;
#endif
         if
         :: how == 0 -> where[me] = 1; mainlen++; seqctr++; seq[me] = seqctr
         :: else -> skip
         fi
    fi;
    settled++
  };
  unlock();                                                    /* R3 */
  if :: how != 0 -> goto complete :: else -> skip fi;

  /* registered: wait for a notification, re-poll, or be destroyed */
  ok = ((REPOLL_MASK >> (me - 1)) & 1);
#ifndef GATED
end_wait:
#endif
  do
  :: notif[me] != K_NONE -> how = H_NOTIF; goto complete      /* W */
  :: ok ->                                                     /* Q1 */
       ok = false;
       lock();
       atomic {
         if
         :: notif[me] != K_NONE -> how = H_NOTIF
         :: notif[me] == K_NONE && calls != created[me] -> unlink_me(); how = H_BCAST
         :: else -> skip
         fi
       };
       unlock();
       if :: how != 0 -> goto complete :: else -> skip fi
  :: ((CANCEL_MASK >> (me - 1)) & 1) -> goto cancel
  od;

cancel:
  if                                                           /* C1 */
  :: notif[me] == K_ALL -> goto gone
  :: else -> skip
  fi;
  lock();
  atomic {                                                     /* C2 */
    kind = notif[me];
    if
    :: where[me] != 0 ->
         assert(kind == K_NONE);
         unlink_me();
         if :: mainlen == 0 && phase == WAITING -> phase = EMPTY :: else -> skip fi
    :: else -> skip
    fi
  };
  if                                                           /* C3 */
  :: kind == K_ONE || kind == K_LAST ->
#ifndef DROP_CANCEL
       notify_locked(kind == K_LAST)
#else
       skip
#endif
  :: else -> skip
  fi;
  unlock();                                                    /* C4 */
  goto gone;

complete:
  atomic {
    if
    :: how == H_TAKEN -> consumed++
    :: how == H_BCAST -> assert(created[me] < calls)
    :: how == H_NOTIF ->
         if :: notif[me] == K_ALL -> skip :: else -> consumed++ fi
    fi
  };
gone:
  atomic { assert(where[me] == 0); done[me] = true; n_done++ }
}

/* notify_one (newest = false) or notify_last (newest = true); gate = k. */
proctype Notifier(byte gate; bool newest) {
  byte w = 0;
  bool ok;
#ifdef GATED
  settled >= gate;
#endif
  store_permit();                                              /* T1 */
  if
  :: !ok ->
       lock();                                                 /* S1 */
       notify_locked(newest);
       unlock()                                                /* S2 */
  :: else -> skip
  fi;
  n_done++
}

proctype NotifyWaiters(byte k) {
  byte w = 0;
  lock();                                                      /* A1 */
  atomic {                                                     /* A2 */
    if
    :: phase != WAITING -> calls++; w = 0
    :: else ->
#ifndef NW_SPLIT
         calls++;
#endif
         phase = EMPTY;
         sc = 1;
         do
         :: sc <= WAIT -> if :: where[sc] == 1 -> where[sc] = 2 + k :: else -> skip fi; sc++
         :: else -> break
         od;
         sc = 0; mainlen = 0; w = 1
    fi
  };
  if
  :: w == 0 -> unlock()                                        /* A2: unlock */
  :: else ->
#ifdef NW_SPLIT
       unlock();
       lock();
       calls++;
#endif
       do
       :: atomic { pop(2 + k, false, w) };                     /* A3 */
          if
          :: w == 0 -> break
          :: else -> skip
          fi;
          atomic { assert(!done[w] && created[w] < calls); notif[w] = K_ALL; w = 0 };  /* A4 */
          if
          :: skip
          :: unlock(); lock()                                  /* wakes.full() */
          fi
       od;
       unlock()                                                /* A5 */
  fi;
  n_done++
}

init {
  byte i, blocked;
  atomic {
    assert(WAIT >= 1 && WAIT <= 3 && NW <= 2);
#ifdef GATED
    assert(ONE + LAST >= WAIT);
#endif
    i = 1;
    do
    :: i <= WAIT -> run Waiter(i); i++
    :: else -> break
    od;
    i = 1;
    do
    :: i <= ONE + LAST -> run Notifier(i, i > ONE); i++
    :: else -> break
    od;
    i = 0;
    do
    :: i < NW -> run NotifyWaiters(i); i++
    :: else -> break
    od;
    i = 0
  };
#ifdef GATED
  (n_done == WAIT + ONE + LAST + NW);
#else
  timeout;
#endif
  d_step {
    assert(!lk);
    blocked = 0;
    i = 1;
    do
    :: i <= WAIT ->
         if
         :: !done[i] ->
              assert(where[i] == 1 && notif[i] == K_NONE && created[i] == calls);
              blocked++
         :: else -> skip
         fi;
         i++
    :: else -> break
    od;
    assert(n_done + blocked == WAIT + ONE + LAST + NW);
    assert(blocked == 0 || phase == WAITING);
    assert(ONE + LAST == consumed + merged + (phase == NOTIFIED -> 1 : 0));
    i = 0
  }
}
