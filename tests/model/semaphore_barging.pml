/*
 * SPIN model of the counting semaphore's barging mode
 * (Semaphore::Fairness::kBarging, barging_ == true: what Mutex and RwLock
 * use): released permits go to the count, the oldest waiter is woken to
 * retry (one at a time: kWoken), a running acquire may take the permits
 * first, and a waiter that fails STRICT_AFTER retries in a row turns the
 * semaphore strict (kStrict: the kFifo hand-off) until its turn ends. As
 * implemented in
 *   include/volt/sync/semaphore.hpp   try_take, Acquire (await_ready,
 *                                     register_waiter, settle, await_resume,
 *                                     ~Acquire)
 *   src/sync/semaphore.cpp            release_unchecked, release_locked,
 *                                     wake_oldest_locked, retry, end_strict,
 *                                     acquire_locked, cancel,
 *                                     give_back_partial, close (-DCLOSE),
 *                                     acquire_blocking (the same steps)
 * tests/model/semaphore.pml models the kFifo mode (barging_ false); its
 * conventions are kept here. Not modelled: the range checks of release(),
 * kMaxPermits, forget_permits, memory orders (SPIN interleaves sequentially
 * consistently).
 *
 * STRICT_AFTER is the model's kStrictAfter (3 in the code, -DSTRICT_AFTER=n
 * here, default 3). With one acquire per acquirer, a waiter is passed over
 * at most once per other acquirer, so the configurations use 1 or 2 to
 * reach strict mode (the code's 3 needs more acquirers than a search here
 * can afford: with four one-shot holders strict mode is not reached).
 *
 * State. The word permits_ (count << 4 | kStrict | kWoken | kQueued |
 * kClosed) is permits, strict, woken, queued, closed: every step that reads
 * or writes the word is one atomic step over all five. fast = fast_ (0 or a
 * waiter id); q[0..qlen) = waiters_, q[0] the oldest; mtx = mutex_ (a spin
 * lock: test-and-set). Per waiter i (acquirer i's SemaphoreWaiter): rem[i],
 * rbit[i], cbit[i] = its state word (permits still needed, kRetryBit,
 * kClosedBit; rem 0 and no bit = granted in full); linked[i], failed[i]
 * (failed_retries), starving[i]. Ghosts: freed[i] (its Acquire returned),
 * out[i] (a tier-1 releaser holds it out of the slot), got[p] (permits
 * acquirer p has: taken, or granted in part or in full), fl[p] (permits
 * process p is releasing or giving back and has not yet credited or handed
 * over), outcome[i], late[i] (its try_take saw kClosed), close_done.
 * Processes: Acq(i) acquires NEEDi (try_take, then acquire_locked, then the
 * wait with its retries; a holder (HOLD mask) then releases what it got, a
 * cancel-capable one (CANCEL mask) may be destroyed at any point of its
 * wait); Rel releases RELNi (release(), i.e. release_unchecked); Closer runs
 * close() once (-DCLOSE); monitor checks the invariants in every state.
 *
 * Atomicity. One step = one atomic instruction of the code (load, store,
 * exchange, CAS, fetch_add/and/or/xor) or one mutex-protected list
 * operation, as in semaphore.pml, with these foldings:
 *  - A CAS loop on the word is one step per outcome that matters: the CAS
 *    that succeeds, guarded by the value it succeeds on (so the loop's take
 *    is computed from the word it applies to), and the read (a load or a
 *    failed CAS) that sends the loop elsewhere. A CAS that fails changes
 *    nothing; a stale `current` after a successful CAS (retry, the drain)
 *    only makes the next CAS fail and re-read, or succeed on an equal word.
 *  - Accesses only the mutex holder can see (the list, `linked`, fields of
 *    a waiter it has taken out of the queue, kQueued/kWoken/kStrict/kClosed,
 *    which only mutex holders change) are folded into the adjacent step of
 *    the same critical section: L2 L4 L7 into L5/L8, L3_load into L3, WO_pop
 *    into WO_xor/WO_none, RT_push into RT_fast, RT_state into RT_cas,
 *    RT_served_remove and RT_served_state into RT_served, C2_remove into
 *    C2_test, RL_load into the lock before release_locked, K5 into K4.
 *  - A waiter's own state word, read or written by its owner while it holds
 *    the mutex in retry, and plain reads of a waiter a releaser owns (R2,
 *    the waker moves) share the next step.
 *  - A4 (the slot test) and A5 (the store or push): between them fast_ can
 *    only be emptied (only mutex holders fill it), and the list is private.
 *  - RT_zero (the read that saw a count of 0) and RT_fast (the slot
 *    exchange): what may come between them (a credit, a take, a tier-1 or
 *    cancel exchange emptying the slot) commutes with the exchange or
 *    leaves the read's value as it was, and a credit makes RT_cas fail.
 *  - The owner's read of its state word that sees kRetryBit (W_retry) is
 *    one step, RT_lock the next: only the owner clears the bit.
 *  - wake_oldest_locked's `last` (cpp WO_last): fast_ is always empty there
 *    (emptied by our exchange, or found empty, and only mutex holders fill
 *    it), so `last` is the list's emptiness, folded into WO_xor (asserted).
 *  - The WakeList is not modelled: a waiter's wake-up is the publishing
 *    store it waits on (the waker is moved out before it, and the list's
 *    destructor wakes what was not woken). Its flush when full (32 wakers:
 *    release_locked L9, close K6) is modelled by -DFLUSH and -DCLOSE_FLUSH,
 *    nondeterministically after any full grant, an over-approximation of
 *    the 33rd grant (see Results: -DFLUSH finds a hang).
 *  - Ghost updates (got, fl, out, mark) and locals (decisions on what the
 *    step just read) are folded into the step they describe.
 *
 * Model step -> code (hpp = include/volt/sync/semaphore.hpp, cpp =
 * src/sync/semaphore.cpp; the line numbers are in the mapping at the end of
 * this comment, checked by tests/model/check_lines.sh):
 *   T1   try_take (Acquire::await_ready, acquire_blocking's first try): one
 *        step, the CAS taking NEEDi if the count holds it and kClosed is
 *        clear, else the read that fails (barging: queued waiters are not
 *        looked at). The cooperative budget's yield and an interrupted
 *        await only delay steps (as semaphore.pml argues).
 *   A1   acquire_locked: lock (lock_guard), reached via register_waiter.
 *   A2   the drain: one step per successful CAS. With kQueued or kWoken in
 *        the word, all the registrant needs or nothing (A2_take); else
 *        min(count, still).
 *   A2q  the CAS that saw too few sets kQueued, or the word showed it: then
 *        queue.
 *   A2c  kClosed (stable under the mutex: seen at the first load or never,
 *        so nothing was drained; the give-back there is unreachable,
 *        asserted) -> unlock, errc::closed.
 *   A3   granted in full -> unlock.
 *   A4, A5  the slot if still == 1, the list empty and the slot empty
 *        (A5_fast), else push_back (A5_list); A6 unlock, wait.
 *   W    the wait (settle / acquire_blocking's loop): the state's load sees
 *        kRetryBit -> retry (W_retry), or 0 -> granted, or kClosedBit ->
 *        closed; then await_resume: end_strict if starving (RES_strict),
 *        give_back_partial if closed (RES_closed, G, G_release -> R0..).
 *   R0   release_unchecked tier 0: the CAS adding n while kQueued is clear
 *        or kStrict is clear (barging), or the read showing both (tier 1).
 *        If the word before the CAS had kQueued and not kWoken: R0_lock,
 *        wake_oldest_locked(released), R0_unlock.
 *   R1   tier 1: fast_.exchange (the code's load-then-exchange is an
 *        exchange); R2, R3 the slot waiter (needs 1, I3, asserted) granted:
 *        state store 0; surplus -> R3_surplus lock, release_locked.
 *   R9   tier 2: lock, release_locked.
 *   RL   release_locked, barging with kStrict clear under the mutex: RL_credit
 *        fetch_add, wake_oldest_locked(released), RL_unlock.
 *   L1..L10 release_locked in strict mode (the kFifo hand-off): L1 the slot
 *        exchange, L2 the list front, L3 nobody: credit and clear kQueued,
 *        L5 partial grant to the front (never to the slot waiter, asserted),
 *        L7/L8 full grant (unlink, store 0), L9 flush (-DFLUSH), L10 unlock.
 *   WO   wake_oldest_locked: WO_load (exactly kQueued of the four bits, and
 *        released or a count > 0), WO_fast (the slot first), WO_pop (else the
 *        list front), WO_none (nobody: clear kQueued) or WO_xor (set kWoken,
 *        clear kQueued if nobody is left), WO_pub (state = needed |
 *        kRetryBit; the waker moved out first).
 *   RT   retry, by the woken waiter's owner: RT_lock; RT_closed (kClosed:
 *        hand kWoken back, state |= kClosedBit); RT_take (CAS taking
 *        min(count, still)); RT_served (full: unlink if re-queued, state 0,
 *        clear kWoken), RT_pass (wake_oldest_locked(false): the pass-on),
 *        RT_unlock2; RT_fast/RT_push (count 0, first time: the slot waiter
 *        to the list front, itself in front of it); RT_cas (from the word
 *        with count 0: clear kWoken, set kQueued, set kStrict if
 *        failed_retries + 1 >= STRICT_AFTER; ++failed_retries, starving),
 *        RT_unlock; a failed RT_cas (a credit) goes back to RT_take.
 *   ES   end_strict: ES_lock, ES_clear (starving, failed_retries, kStrict),
 *        ES_wake (wake_oldest_locked(false)), unlock.
 *   C1, C2  cancel (~Acquire while queued_, D): C1 the slot CAS (the waiter
 *        back: give back its grant); C2 lock and state load: kRetryBit ->
 *        C2_woken_and (clear kWoken), C2_woken_pass, unlock, give back;
 *        granted/closed/linked -> C2_remove, if starving C2_strict (clear
 *        kStrict) and C2_strict_wake, unlock, give back (C2_give); else held
 *        by a tier-1 releaser: unlock, backoff (C2_retry), again.
 *   K1..K7  close: lock, fetch_or kClosed, the slot's waiter (K3), the list
 *        (K5), each finished with kClosedBit (K4), flush (K6, -DCLOSE_FLUSH),
 *        unlock (K7).
 *   acquire_blocking runs the same steps (B_try, B_register, B_wait,
 *   B_retry, B_done, B_strict, B_closed, B_give); it never cancels.
 *
 * Properties (the monitor asserts the invariants in every state, those about
 * waiters when the mutex is free; the processes assert the rest at the
 * steps):
 *  - Liveness (no lost wake-up, no deadlock): every Acquire and release
 *    returns; a waiter blocked at the end is an invalid end state. Keepers
 *    (not in HOLD) keep their permits; init asserts the supply covers them
 *    plus the largest holder's need. With -DCLOSE every waiter must still
 *    return (no supply bound).
 *  - Conservation, in every state: count + sum(got) + sum(fl) == supply;
 *    at the end count + held == supply. So never more permits are held (or
 *    granted in part) than exist: the mutual-exclusion bound.
 *  - No use-after-free: every access to a waiter by a releaser, a waker,
 *    close or a list operation asserts its Acquire has not returned and
 *    close has not finished it; an Acquire returns only when its waiter is
 *    in neither the slot nor the list, not woken, not held by a releaser,
 *    and not starving.
 *  - Only the oldest waiter holds a partial grant: whenever the mutex is
 *    free, at most one waiting waiter holds part of what it needs, and it is
 *    the one woken to retry, or (none woken) the slot's waiter, or (slot
 *    empty) the list's front. A waiter held out of the slot by a tier-1
 *    releaser, which grants it in full, is not counted.
 *  - kWoken iff exactly one waiter is woken to retry (kRetryBit published,
 *    not yet retried or withdrawn), whenever the mutex is free; at most one.
 *  - I0 (as semaphore.pml): a queued waiter implies kQueued (mutex free).
 *  - Strict mode: kStrict and kQueued imply a count of 0, in every state
 *    (stronger than "with waiters queued and no release in progress": a
 *    queued waiter implies kQueued by I0).
 *  - Bounded overtaking: while a starving waiter waits (starving, not yet
 *    granted, closed or withdrawn), nobody else takes permits (try_take, the
 *    drain, a retry) or is handed any (release_locked; tier 1, whose grant
 *    is decided at its exchange); and failed_retries never exceeds
 *    STRICT_AFTER (a waiter is passed over at most STRICT_AFTER times in a
 *    row).
 *  - Close: nobody queues after close; none queued once close returned; an
 *    acquire whose try_take saw kClosed never ends holding permits.
 *  - Asserted on the way: a slot waiter needs exactly one permit (I3); a
 *    woken waiter is never starving and never in the slot; kWoken is clear
 *    when wake_oldest_locked sets it; at the end nothing is left woken,
 *    strict, in the slot or the list, or in flight (kQueued may outlive the
 *    last waiter, as the code says).
 *
 * Results (tests/CMakeLists.txt runs these; states stored, and seconds
 * including the verifier's compile: gcc -O0, or PAN_OPT=fast where marked
 * [fast]). Verified, all properties above:
 *   verified                  -DACQ=2 -DREL=2 -DSTRICT_AFTER=1
 *                             7,387 states, 1.7 s
 *   mutex.cancel              -DACQ=4 -DHOLD=15 -DINIT=1 -DREL=0
 *                             -DSTRICT_AFTER=2 -DCANCEL=15 (Mutex: four
 *                             lock/unlock, each may be aborted while it
 *                             waits): 885,634 states, 3.5 s
 *   holders.cancel            -DACQ=3 -DREL=2 -DHOLD=7 -DSTRICT_AFTER=1
 *                             -DCANCEL=4 (stale strict releases, tier 1 and
 *                             slot hand-offs in strict mode): 1,001,585
 *                             states, 3.4 s
 *   holders.strict_after2     -DACQ=3 -DREL=2 -DHOLD=7 -DSTRICT_AFTER=2:
 *                             264,397 states, 2.0 s
 *   rwlock.cancel             -DACQ=3 -DNEED1=2 -DHOLD=7 -DREL=2
 *                             -DSTRICT_AFTER=1 -DCANCEL=7 (partial grants,
 *                             strict partial hand-off): 5,209,588 states,
 *                             12.5 s [fast]
 *   rwlock4                   -DACQ=4 -DNEED1=2 -DNEED2=2 -DHOLD=15 -DREL=2
 *                             -DSTRICT_AFTER=1 (the relaxed_handoff control
 *                             without its switch): 3,394,725 states, 12.0 s
 *                             [fast]
 *   rwlock4.cancel            -DACQ=4 -DNEED3=2 -DNEED4=2 -DHOLD=15 -DREL=2
 *                             -DSTRICT_AFTER=1 -DCANCEL=1: 8,550,486
 *                             states, 19.0 s [fast]
 *   close.rwlock.cancel       -DCLOSE -DACQ=3 -DNEED1=2 -DHOLD=7 -DREL=2
 *                             -DSTRICT_AFTER=1 -DCANCEL=5 (a retry finding
 *                             kClosed, a starving waiter closed, partial
 *                             give-backs): 15,092,710 states, 26.7 s [fast]
 *   close.mutex.cancel        -DCLOSE -DACQ=3 -DHOLD=7 -DINIT=1 -DREL=0
 *                             -DSTRICT_AFTER=1 -DCANCEL=7 -DCLOSE_FLUSH:
 *                             201,922 states, 2.3 s
 * Coverage (-DREACH_HIT=M_x, violated = reached): every marked step is
 * reached by at least one of these; by rwlock.cancel all but M_L8F, M_R3
 * (holders.cancel reaches them) and the close marks (close.rwlock.cancel
 * reaches M_RTC, M_CLSTARVE, M_CLPART). Not run in CI: close.rwlock.cancel
 * with -DCLOSE_FLUSH verifies too (27,637,733 states, 49 s [fast]).
 *
 * Negative controls (violated; what SPIN finds):
 *   no_pass_on        -DNO_PASS_ON -DACQ=2 -DREL=2: both acquirers queue;
 *     release 1 wakes the oldest; release 2 credits, and its wake-up finds
 *     one woken already (kWoken: R2, it wakes nobody); the retry takes one
 *     permit and passes nothing on: the other waiter sleeps with a permit
 *     in the count (invalid end state). 3,381 states, 1.6 s.
 *   no_pass_cancel    -DNO_PASS_CANCEL -DACQ=2 -DREL=2 -DCANCEL=1: the
 *     same with the woken waiter destroyed before it retries. 17,053
 *     states, 1.7 s.
 *   partial_behind    -DPARTIAL_BEHIND -DNO_PARTIAL_CHECK -DACQ=2 -DNEED1=2
 *     -DNEED2=2 -DHOLD=3 -DREL=2 (two writers of a 2-permit RwLock, two
 *     releases of 1): A drains 1 and queues (slot); release 1 wakes A;
 *     B drains the released permit although A is woken (no all-or-nothing)
 *     and queues; A retries, finds 0, queues again at the front: each holds
 *     1 of 2, nothing left to release: both wait for good (invalid end
 *     state; the random-cancellation stress hang). 406 states, 1.6 s.
 *   relaxed_handoff   -DRELAXED_HANDOFF -DNO_PARTIAL_CHECK -DACQ=4 -DNEED1=2
 *     -DNEED2=2 -DHOLD=15 -DREL=2 -DSTRICT_AFTER=1: C (needs 1) is woken
 *     and passed over by D (barging) and turns strict; D's release sees
 *     strict and heads for the mutex; a release hands C its permit; C ends
 *     strict mode and its release wakes writer B (retrier, out of the
 *     queue); D's release_locked hands its 1 permit to writer A, behind B;
 *     B takes the other permit, finds too few, queues again at the front:
 *     A and B each hold 1 of 2 (invalid end state; the RwLock stress hang).
 *     1,610,362 states, 4.8 s.
 *   relaxed_handoff.partial  the same with -DNO_LIVENESS instead: the
 *     monitor's partial-grant invariant fails at the hand-off to A (a
 *     partial holder behind the woken B). 1,610,354 states, 4.7 s.
 *   tier0_ignores_strict  -DTIER0_IGNORES_STRICT -DNO_MONITOR -DNO_LIVENESS
 *     -DACQ=3 -DREL=2 -DHOLD=7 -DSTRICT_AFTER=1: a release credits the
 *     count while a starving waiter waits and a newcomer's try_take takes
 *     it: the bounded-overtaking assertion fails (with the monitor, the
 *     strict-mode invariant fails first). 99,656 states, 1.9 s.
 * Checked by hand that the other invariants can fail: a served retry that
 * keeps kWoken fails the kWoken invariant; a re-queue CAS without kQueued
 * fails I0; a cancel that returns while a tier-1 releaser holds its waiter
 * loses the permit granted to it.
 *
 * A HANG IN THE CODE (-DFLUSH): release_locked's strict loop flushes its
 * WakeList when it is full (32 wakers: unlock, wake, lock) and then goes on
 * handing off without looking at kStrict again. In the unlocked window the
 * starving waiter (served among the 32) ends strict mode and a relaxed
 * release wakes the next waiter to retry; the resumed loop then gives a
 * partial grant to the waiter behind it, which is the relaxed_handoff hang
 * again. -DFLUSH lets the flush happen after any full grant (a stand-in for
 * the 33rd); SPIN finds (-DACQ=4 -DNEED2=2 -DNEED3=2 -DNEED4=2 -DHOLD=15
 * -DREL=1 -DRELN1=2 -DSTRICT_AFTER=1 -DFLUSH: a 2-permit RwLock, reader R
 * needing 1, writers W1 W2 W3 needing 2, a release of 2; partial-grant
 * invariant after 385,481 states, and with -DNO_PARTIAL_CHECK the hang):
 * R queues (slot); the release of 2 wakes R; W1 drains both (barging); W2,
 * W3 queue; R retries, finds 0, queues at the front, starving (strict);
 * W1's release of 2 goes to release_locked (strict), hands R its 1 and
 * flushes; R ends strict mode and releases its permit (relaxed: count 1,
 * wakes W2, the front, to retry); W1's loop resumes and hands its last
 * permit to W3 (partial, behind W2); W2 takes the count's 1 (partial),
 * queues again at the front, starving: W2 and W3 each hold 1 of 2, count 0,
 * nobody else holds any: both wait for good. Reaching it needs one strict
 * release of 33+ permits with 32+ waiters to serve (an RwLock writer's
 * release of max_reads, default 2^29 - 1, to queued readers). Fixed in the
 * code (2026-11-27, after this model found it): after the relock
 * release_locked re-reads kStrict and, relaxed, credits the rest and calls
 * wake_oldest_locked(released). The model does the same (L9_relock) unless
 * -DNO_FLUSH_RECHECK, which is the code as it was (negative control
 * flush_no_recheck.violated); the configuration above verifies with the fix
 * (570,793 states; CI: flush.verified), and rwlock4 with -DFLUSH too.
 *
 * Switches (protocol): -DCLOSE (a Closer process); -DFLUSH, -DCLOSE_FLUSH
 *   (the WakeList flushes, see Atomicity); -DNO_FLUSH_RECHECK (with
 *   -DFLUSH: the resumed loop does not re-read kStrict: the hang above,
 *   the code before the fix). Negative controls:
 *   -DPARTIAL_BEHIND      acquire_locked drains min(count, still) even with
 *                         kQueued or kWoken set (no all-or-nothing rule).
 *   -DRELAXED_HANDOFF     release_locked hands off even when kStrict is
 *                         clear (no relaxed credit + wake).
 *   -DNO_PASS_ON          a served retry does not call wake_oldest_locked.
 *   -DNO_PASS_CANCEL      cancel of a woken waiter does not pass the wake-up
 *                         on.
 *   -DTIER0_IGNORES_STRICT tier 0 credits the count in strict mode too.
 * Switches (configuration): ACQ (1..4) acquirers needing NEED1..NEED4
 *   (default 1); REL (0..2) releasers releasing RELN1, RELN2 (default 1);
 *   INIT initial permits; HOLD=mask: acquirer i releases what it got after
 *   acquiring if bit i-1 is set (a holder; else a keeper); CANCEL=mask:
 *   acquirer i may be destroyed while it waits; STRICT_AFTER.
 * Switches (checks): -DNO_MONITOR, -DNO_PARTIAL_CHECK (no partial-grant
 *   invariant: a control then shows its hang), -DNO_LIVENESS (a blocked
 *   waiter is a valid end state: assertions only), -DNO_UAF_CHECK,
 *   -DNO_OVERTAKE_CHECK, -DREACH_HIT=M_x (coverage: violated iff the marked
 *   step is reachable; the marks are listed below the header).
 *
 * Step-to-line mapping:
 *   T1_load  include/volt/sync/semaphore.hpp:514  std::uint64_t current = permits_.load(std::memory_order_acquire);
 *   T1_fail  include/volt/sync/semaphore.hpp:517  if ((current & kClosed) || (current >> kCountShift) < n) return false;
 *   T1  include/volt/sync/semaphore.hpp:520  if (permits_.compare_exchange_weak(current, current - (n << kCountShift),
 *   D  include/volt/sync/semaphore.hpp:311  if (queued_) semaphore_.cancel(&waiter_);
 *   T1_ready  include/volt/sync/semaphore.hpp:332  if (semaphore_.try_take(n_)) {
 *   RES_strict  include/volt/sync/semaphore.hpp:358  if (waiter_.starving) semaphore_.end_strict(&waiter_);
 *   RES_closed  include/volt/sync/semaphore.hpp:359  if (waiter_.state.load(std::memory_order_acquire) & detail::SemaphoreWaiter::kClosedBit) {
 *   G  include/volt/sync/semaphore.hpp:360  semaphore_.give_back_partial(&waiter_);
 *   REG  include/volt/sync/semaphore.hpp:376  switch (semaphore_.acquire_locked(&waiter_)) {
 *   W_check  include/volt/sync/semaphore.hpp:394  if (self.queued_) return self.settle();
 *   W  include/volt/sync/semaphore.hpp:406  const std::uint64_t s = waiter_.state.load(std::memory_order_acquire);
 *   W_done  include/volt/sync/semaphore.hpp:408  return s == 0 || (s & detail::SemaphoreWaiter::kClosedBit);
 *   W_retry  include/volt/sync/semaphore.hpp:409  return semaphore_.retry(&waiter_,
 *   R0_load  src/sync/semaphore.cpp:162  std::uint64_t current = permits_.load(std::memory_order_relaxed);
 *   R0_test  src/sync/semaphore.cpp:164  while (!(current & kQueued) || (barging_ && !(current & kStrict))) {
 *   R0  src/sync/semaphore.cpp:165  if (permits_.compare_exchange_weak(current, current + (n << kCountShift),
 *   R0_woke  src/sync/semaphore.cpp:171  if ((current & (kQueued | kWoken)) == kQueued) {
 *   R0_lock  src/sync/semaphore.cpp:173  mutex_.lock();
 *   R0_wake  src/sync/semaphore.cpp:174  wake_oldest_locked(wakes,
 *   R0_unlock  src/sync/semaphore.cpp:175  mutex_.unlock();
 *   R1  src/sync/semaphore.cpp:190  : fast_.exchange(nullptr, std::memory_order_acq_rel);
 *   R2  src/sync/semaphore.cpp:195  const std::uint64_t remaining = waiter->state.load(std::memory_order_relaxed);
 *   R3  src/sync/semaphore.cpp:199  waiter->state.store(0, std::memory_order_release);
 *   R3_surplus  src/sync/semaphore.cpp:203  mutex_.lock();
 *   R9  src/sync/semaphore.cpp:208  mutex_.lock();
 *   RL_load  src/sync/semaphore.cpp:214  if (barging_ && !(permits_.load(std::memory_order_relaxed) & kStrict)) {
 *   RL_credit  src/sync/semaphore.cpp:220  permits_.fetch_add(n << kCountShift, std::memory_order_release);
 *   RL_wake  src/sync/semaphore.cpp:221  wake_oldest_locked(wakes,
 *   RL_unlock  src/sync/semaphore.cpp:222  mutex_.unlock();
 *   L1  src/sync/semaphore.cpp:234  : fast_.exchange(nullptr, std::memory_order_acq_rel);
 *   L2  src/sync/semaphore.cpp:236  if (!waiter) waiter = waiters_.front();
 *   L3_load  src/sync/semaphore.cpp:243  const std::uint64_t queued = permits_.load(std::memory_order_relaxed) & kQueued;
 *   L3  src/sync/semaphore.cpp:244  permits_.fetch_add((n << kCountShift) - queued, std::memory_order_release);
 *   L4  src/sync/semaphore.cpp:247  const std::uint64_t remaining = waiter->state.load(std::memory_order_relaxed);
 *   L5  src/sync/semaphore.cpp:251  waiter->state.store(remaining - n, std::memory_order_relaxed);
 *   L7  src/sync/semaphore.cpp:254  if (!from_fast) waiters_.remove(waiter);
 *   L8  src/sync/semaphore.cpp:257  waiter->state.store(0, std::memory_order_release);
 *   L9  src/sync/semaphore.cpp:259  mutex_.unlock();
 *   L9_relock  src/sync/semaphore.cpp:261  mutex_.lock();
 *   L9_recheck  src/sync/semaphore.cpp:262  if (barging_ && !(permits_.load(std::memory_order_relaxed) & kStrict)) {
 *   L9_credit  src/sync/semaphore.cpp:267  permits_.fetch_add(n << kCountShift, std::memory_order_release);
 *   L10  src/sync/semaphore.cpp:273  mutex_.unlock();
 *   WO_load  src/sync/semaphore.cpp:282  const std::uint64_t current = permits_.load(std::memory_order_relaxed);
 *   WO_bits  src/sync/semaphore.cpp:283  if ((current & (kQueued | kWoken | kStrict | kClosed)) != kQueued) return;
 *   WO_count  src/sync/semaphore.cpp:289  if (!released && (current >> kCountShift) == 0) return;
 *   WO_fast  src/sync/semaphore.cpp:292  : fast_.exchange(nullptr, std::memory_order_acq_rel);
 *   WO_pop  src/sync/semaphore.cpp:293  if (!waiter) waiter = waiters_.pop_front();
 *   WO_last  src/sync/semaphore.cpp:294  const bool last = waiters_.empty() && fast_.load(std::memory_order_relaxed) == nullptr;
 *   WO_none  src/sync/semaphore.cpp:297  permits_.fetch_and(~kQueued, std::memory_order_relaxed);
 *   WO_xor  src/sync/semaphore.cpp:302  permits_.fetch_xor(kWoken | (last ? kQueued : 0), std::memory_order_relaxed);
 *   WO_pub  src/sync/semaphore.cpp:307  waiter->state.store(needed | SemaphoreWaiter::kRetryBit, std::memory_order_release);
 *   RT_lock  src/sync/semaphore.cpp:312  std::unique_lock lock(mutex_);
 *   RT_load  src/sync/semaphore.cpp:317  std::uint64_t current = permits_.load(std::memory_order_acquire);
 *   RT_closed  src/sync/semaphore.cpp:320  if (current & kClosed) {
 *   RT_closed_woken  src/sync/semaphore.cpp:324  permits_.fetch_and(~kWoken, std::memory_order_relaxed);
 *   RT_closed_state  src/sync/semaphore.cpp:325  waiter->state.store(still | SemaphoreWaiter::kClosedBit, std::memory_order_relaxed);
 *   RT_take  src/sync/semaphore.cpp:331  if (permits_.compare_exchange_weak(current, current - (take << kCountShift),
 *   RT_served_remove  src/sync/semaphore.cpp:337  if (queued_again) waiters_.remove(waiter);
 *   RT_served_state  src/sync/semaphore.cpp:339  waiter->state.store(0, std::memory_order_relaxed);
 *   RT_served  src/sync/semaphore.cpp:340  permits_.fetch_and(~kWoken, std::memory_order_relaxed);
 *   RT_pass  src/sync/semaphore.cpp:341  wake_oldest_locked(wakes,
 *   RT_unlock2  src/sync/semaphore.cpp:342  lock.unlock();
 *   RT_fast  src/sync/semaphore.cpp:352  : fast_.exchange(nullptr, std::memory_order_acq_rel))
 *   RT_push_newer  src/sync/semaphore.cpp:353  waiters_.push_front(newer);
 *   RT_push  src/sync/semaphore.cpp:354  waiters_.push_front(waiter);
 *   RT_state  src/sync/semaphore.cpp:358  waiter->state.store(still, std::memory_order_relaxed);
 *   RT_starving  src/sync/semaphore.cpp:361  const bool starving = waiter->failed_retries + 1 >= kStrictAfter;
 *   RT_cas  src/sync/semaphore.cpp:363  if (permits_.compare_exchange_weak(current, next, std::memory_order_acquire,
 *   RT_unlock  src/sync/semaphore.cpp:367  return AcquireResult::kQueued;
 *   ES_lock  src/sync/semaphore.cpp:374  std::lock_guard guard(mutex_);
 *   ES_clear  src/sync/semaphore.cpp:377  permits_.fetch_and(~kStrict, std::memory_order_relaxed);
 *   ES_wake  src/sync/semaphore.cpp:381  wake_oldest_locked(wakes,
 *   A1  src/sync/semaphore.cpp:386  std::lock_guard guard(mutex_);
 *   A2_load  src/sync/semaphore.cpp:390  std::uint64_t current = permits_.load(std::memory_order_acquire);
 *   A2c  src/sync/semaphore.cpp:393  if (current & kClosed) break;
 *   A2_take  src/sync/semaphore.cpp:400  const std::uint64_t take = barging_ && (current & (kQueued | kWoken))
 *   A2q  src/sync/semaphore.cpp:409  permits_.compare_exchange_weak(current, current | kQueued, std::memory_order_acquire,
 *   A2  src/sync/semaphore.cpp:415  if (permits_.compare_exchange_weak(current, current - (take << kCountShift),
 *   A2c_ret  src/sync/semaphore.cpp:423  return AcquireResult::kClosed;
 *   A3  src/sync/semaphore.cpp:425  if (still == 0) return AcquireResult::kGranted;
 *   A4  src/sync/semaphore.cpp:429  if (still == 1 && waiters_.empty() && fast_.load(std::memory_order_relaxed) == nullptr) {
 *   A5_fast  src/sync/semaphore.cpp:431  fast_.store(waiter, std::memory_order_release);
 *   A5_list  src/sync/semaphore.cpp:433  waiters_.push_back(waiter);
 *   A6  src/sync/semaphore.cpp:435  return AcquireResult::kQueued;
 *   C1  src/sync/semaphore.cpp:444  if (fast_.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel,
 *   C1_give  src/sync/semaphore.cpp:448  release_unchecked(requested - (still & ~SemaphoreWaiter::kClosedBit));
 *   C2  src/sync/semaphore.cpp:451  mutex_.lock();
 *   C2_load  src/sync/semaphore.cpp:452  const std::uint64_t s = waiter->state.load(std::memory_order_acquire);
 *   C2_woken  src/sync/semaphore.cpp:453  if (s & SemaphoreWaiter::kRetryBit) {
 *   C2_woken_and  src/sync/semaphore.cpp:457  permits_.fetch_and(~kWoken, std::memory_order_relaxed);
 *   C2_woken_pass  src/sync/semaphore.cpp:458  wake_oldest_locked(wakes,
 *   C2_woken_unlock  src/sync/semaphore.cpp:459  mutex_.unlock();
 *   C2_woken_give  src/sync/semaphore.cpp:461  release_unchecked(requested - (s & SemaphoreWaiter::kNeededMask));
 *   C2_test  src/sync/semaphore.cpp:464  if (s == 0 || (s & SemaphoreWaiter::kClosedBit) || waiter->linked) {
 *   C2_remove  src/sync/semaphore.cpp:465  if (waiter->linked) waiters_.remove(waiter);
 *   C2_strict  src/sync/semaphore.cpp:470  permits_.fetch_and(~kStrict, std::memory_order_relaxed);
 *   C2_strict_wake  src/sync/semaphore.cpp:471  wake_oldest_locked(wakes,
 *   C2_unlock  src/sync/semaphore.cpp:473  mutex_.unlock();
 *   C2_give  src/sync/semaphore.cpp:477  release_unchecked(requested - (s & ~SemaphoreWaiter::kClosedBit));
 *   C2_retry  src/sync/semaphore.cpp:480  mutex_.unlock();
 *   C2_backoff  src/sync/semaphore.cpp:484  backoff.once();
 *   G_load  src/sync/semaphore.cpp:490  waiter->state.load(std::memory_order_acquire) & SemaphoreWaiter::kNeededMask;
 *   G_release  src/sync/semaphore.cpp:491  release_unchecked(waiter->requested - still);
 *   K1  src/sync/semaphore.cpp:496  std::unique_lock lock(mutex_);
 *   K2  src/sync/semaphore.cpp:497  permits_.fetch_or(kClosed, std::memory_order_release);
 *   K4_load  src/sync/semaphore.cpp:499  const std::uint64_t still = waiter->state.load(std::memory_order_relaxed);
 *   K4  src/sync/semaphore.cpp:501  waiter->state.store(still | SemaphoreWaiter::kClosedBit, std::memory_order_release);
 *   K6  src/sync/semaphore.cpp:503  lock.unlock();
 *   K3  src/sync/semaphore.cpp:510  if (SemaphoreWaiter* waiter = fast_.exchange(nullptr, std::memory_order_acq_rel)) finish(waiter);
 *   K5  src/sync/semaphore.cpp:511  while (SemaphoreWaiter* waiter = waiters_.pop_front())
 *   K7  src/sync/semaphore.cpp:513  lock.unlock();
 *   B_try  src/sync/semaphore.cpp:521  if (try_take(n)) return SemaphorePermit(this, n);
 *   B_register  src/sync/semaphore.cpp:526  switch (acquire_locked(&waiter)) {
 *   B_wait  src/sync/semaphore.cpp:535  const std::uint64_t s = waiter.state.load(std::memory_order_acquire);
 *   B_retry  src/sync/semaphore.cpp:537  if (retry(&waiter, parker.waker()) != AcquireResult::kQueued) break;
 *   B_done  src/sync/semaphore.cpp:540  if (s == 0 || (s & SemaphoreWaiter::kClosedBit)) break;
 *   B_strict  src/sync/semaphore.cpp:543  if (waiter.starving) end_strict(&waiter);
 *   B_closed  src/sync/semaphore.cpp:544  if (waiter.state.load(std::memory_order_acquire) & SemaphoreWaiter::kClosedBit) {
 *   B_give  src/sync/semaphore.cpp:545  give_back_partial(&waiter);
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
#ifndef NEED4
#define NEED4 1
#endif
#ifndef RELN1
#define RELN1 1
#endif
#ifndef RELN2
#define RELN2 1
#endif
#ifndef STRICT_AFTER
#define STRICT_AFTER 3
#endif
#ifndef HOLD
#define HOLD 0
#endif
#ifdef CANCEL
#define CANCEL_MASK CANCEL
#else
#define CANCEL_MASK 0
#endif
#if ACQ < 1 || ACQ > 4 || REL < 0 || REL > 2
#error "ACQ is 1..4, REL is 0..2"
#endif
#ifdef CLOSE
#define OPEN (!closed)
#define CBIT(i) cbit[i]
#define LATE(i) late[i]
#define NCLOSE 1
#else
#define OPEN true
#define CBIT(i) false
#define LATE(i) false
#define NCLOSE 0
#endif

#define NEED(i) ((i) == 1 -> NEED1 : ((i) == 2 -> NEED2 : ((i) == 3 -> NEED3 : NEED4)))
#define RELN(i) ((i) == 1 -> RELN1 : RELN2)
#define HOLDS(i) ((HOLD >> ((i) - 1)) & 1)
#define CANCELS(i) ((CANCEL_MASK >> ((i) - 1)) & 1)
#define SUPPLY (INIT + (REL >= 1 -> RELN1 : 0) + (REL >= 2 -> RELN2 : 0))

#define HELD      1
#define CANCELLED 2
#define CLOSED    3

/* The permits_ word: count << 4 | kStrict | kWoken | kQueued | kClosed. Every
 * step that reads or writes it is one atomic step over all five. */
byte permits = INIT;
bool queued = false;
bool woken = false;
bool strict = false;
#ifdef CLOSE
bool closed = false;
bool cbit[5];           /* kClosedBit of waiter i's state */
bool late[5];           /* ghost: acquirer i's try_take saw kClosed */
bool close_done = false; /* ghost: close() returned */
#endif
bool mtx = false;       /* mutex_ (a spin lock: test-and-set) */
byte fast = 0;          /* fast_: 0 or a waiter id */
byte q[5];              /* waiters_: q[0] the oldest */
byte qlen = 0;
/* Per waiter i (acquirer i's SemaphoreWaiter, ids 1..ACQ): */
byte rem[5];            /* state: permits still needed (0 = granted) */
bool rbit[5];           /* state's kRetryBit: woken to retry, not retried */
bool linked[5];         /* in waiters_ */
bool freed[5];          /* ghost: its Acquire returned (memory gone) */
byte failed[5];         /* failed_retries */
bool starving[5];       /* starving */
byte outcome[5];
bool out[5];            /* ghost: held out of fast_ by a tier-1 releaser */
/* Ghost accounting, per process slot (acquirers 1..ACQ, releasers ACQ+1..):
 * got[p] = permits acquirer p has (taken or granted, partial or full);
 * fl[p] = permits p is releasing or giving back and has not yet credited
 * or handed over. Invariant: permits + sum(got) + sum(fl) == SUPPLY. */
byte got[7];
byte fl[7];
byte n_done = 0;
byte sc = 0;            /* scratch for list shifts, 0 between steps */

#define GSUM (got[1] + got[2] + got[3] + got[4] + got[5] + got[6])
#define FSUM (fl[1] + fl[2] + fl[3] + fl[4] + fl[5] + fl[6])
#define NRB (rbit[1] + rbit[2] + rbit[3] + rbit[4])

#ifdef NO_UAF_CHECK
#define touch(i) skip
#else
/* nobody but the owner touches a waiter once its Acquire returned or close
 * finished it */
#define touch(i) assert(!freed[i] && !CBIT(i))
#endif

/* Bounded overtaking: while a starving waiter waits, nobody else is given
 * permits (taken from the count or handed over). */
#define SW(i) (starving[i] && rem[i] > 0 && !CBIT(i))
#define NOT_SW(i, p) (!SW(i) || (i) == (p))
#ifdef NO_OVERTAKE_CHECK
#define no_overtake(p) skip
#else
#define no_overtake(p) assert(NOT_SW(1, p) && NOT_SW(2, p) && NOT_SW(3, p) && NOT_SW(4, p))
#endif

/* -DREACH_HIT=M_x (coverage, expect violated): the monitor fails once
 * step x ran (mark(M_x) records it in the ghost `hit`). */
#ifdef REACH_HIT
int hit = 0;
#define mark(b) hit = hit | (b)
#else
#define mark(b) skip
#endif
#define M_L5 1          /* strict hand-off, partial */
#define M_L8 2          /* strict hand-off, full, from the list */
#define M_R3 4          /* tier 1 grant in strict mode */
#define M_RL 8          /* release_locked relaxed (credit + wake) */
#define M_RTP 16        /* retry took part of what it needs */
#define M_STRICT 32     /* a retry turned the semaphore strict */
#define M_C2W 64        /* cancel of a woken waiter */
#define M_C2S 128       /* cancel of a starving waiter */
#define M_NONE 256      /* wake_oldest found nobody, cleared kQueued */
#define M_A2P 512       /* registrant drained part of what it needs */
#define M_L3 1024       /* strict release_locked found nobody, credited */
#define M_PASS 2048     /* a pass-on (wake_oldest_locked(false)) woke a waiter */
#define M_RTAGAIN 4096  /* a retry's requeue CAS failed, then took */
#define M_L8F 8192      /* strict hand-off, full, from the slot */
#define M_R1STALE 16384 /* tier 1 grant while relaxed (stale strict) */
#define M_RTC 32768     /* a retry found the semaphore closed */
#define M_CLSTARVE 65536 /* end_strict of a starving waiter finished by close */
#define M_CLPART 131072 /* a waiter finished by close gives back a partial grant */
#define M_C1 262144     /* cancel took its waiter back out of the slot */
#define M_C2HELD 524288 /* cancel found its waiter held by a tier-1 releaser */

inline lock() { atomic { !mtx -> mtx = true } }
inline unlock() { mtx = false }

/* List operations (mutex held). */
inline push_back_body(i) {
  touch(i); q[qlen] = i; qlen++; linked[i] = true
}
inline push_front_body(i) {
  touch(i);
  sc = qlen;
  do
  :: sc > 0 -> q[sc] = q[sc - 1]; sc--
  :: else -> break
  od;
  q[0] = i; qlen++; linked[i] = true
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

/* wake_oldest_locked(released), mutex held (WO_*). Local wo. */
inline wake_oldest(released) {
  if
  :: (queued && !woken && !strict && OPEN && (released || permits > 0)) ->  /* WO_load */
       atomic { wo = fast; fast = 0 };                                /* WO_fast */
       atomic {
         if
         :: wo == 0 && qlen > 0 -> wo = q[0]; unlink_body(wo)         /* WO_pop */
         :: else -> skip
         fi;
         if
         :: wo == 0 -> queued = false; mark(M_NONE)                   /* WO_none */
         :: else ->                                                   /* WO_xor */
              /* the bits are known under the mutex; fast_ is empty here
               * (we emptied it or found it empty, and only mutex holders
               * fill it), so `last` is waiters_.empty() */
              assert(queued && !woken && fast == 0);
              woken = true;
              if :: qlen == 0 -> queued = false :: else -> skip fi
         fi
       };
       if
       :: wo != 0 ->
            atomic {                                                  /* WO_pub */
              touch(wo); assert(!rbit[wo] && !starving[wo] && rem[wo] > 0);
              rbit[wo] = true; wo = 0; mark(released -> 0 : M_PASS)
            }
       :: else -> skip
       fi
  :: else -> skip
  fi
}

/* The lock before release_locked (R3_surplus, R9), with its load of
 * kStrict (RL_load) folded in: only mutex holders change
 * kStrict, so it reads the same anywhere inside the critical section. */
inline lock_rl() { atomic { !mtx -> mtx = true; st = strict } }

/* release_locked(n = fl[me]), mutex held; unlocks (RL_*, L*). */
inline release_locked() {
#ifndef RELAXED_HANDOFF
  if
  :: !st ->                                                           /* RL_relaxed */
       atomic { permits = permits + fl[me]; fl[me] = 0; mark(M_RL) }; /* RL_credit */
       wake_oldest(true);
       unlock()                                                       /* RL_unlock */
  :: else ->
#endif
     more = true;
     do
     :: !more -> break
     :: more ->
        atomic { x = fast; fast = 0; ff = (x != 0) };                 /* L1 */
        atomic {
          if :: x == 0 && qlen > 0 -> x = q[0] :: else -> skip fi;  /* L2 */
          if
          :: x == 0 ->                                                /* L3 */
               permits = permits + fl[me]; fl[me] = 0; queued = false; mark(M_L3)
          :: else ->
               touch(x); no_overtake(x); assert(!rbit[x]);
               if
               :: fl[me] < rem[x] ->                                  /* L4, L5 */
                    assert(!ff);            /* I3: a slot waiter needs 1 */
                    rem[x] = rem[x] - fl[me]; got[x] = got[x] + fl[me]; fl[me] = 0; mark(M_L5)
               :: else ->                                             /* L4, L7, L8 */
                    if :: !ff -> unlink_body(x) :: else -> skip fi;
                    got[x] = got[x] + rem[x]; fl[me] = fl[me] - rem[x]; rem[x] = 0;
                    mark(ff -> M_L8F : M_L8)
               fi
          fi;
          x = 0; ff = false; more = (fl[me] > 0)
        }
#ifdef FLUSH
        ;
        if
        :: more ->
             unlock();                                                /* L9 */
#ifndef NO_FLUSH_RECHECK
             /* the code: re-read kStrict after the relock; relaxed now ->
              * credit the rest and wake, as RL */
             atomic { !mtx -> mtx = true; st = strict };              /* L9_relock */
             if
             :: !st ->
                  atomic { permits = permits + fl[me]; fl[me] = 0; more = false };
                  wake_oldest(true)
             :: else -> skip
             fi
#else
             lock()                                                   /* L9_relock */
#endif
        :: true -> skip
        fi
#endif
     od;
     atomic { mtx = false; st = false }                               /* L10 */
#ifndef RELAXED_HANDOFF
  fi
#endif
}

/* release_unchecked(n = fl[me] + got[me]) (R*). A holder's permits
 * (got[me]) become the release's at R0. */
inline release() {
  atomic {                                                            /* R0 */
    fl[me] = fl[me] + got[me]; got[me] = 0;
    if
#ifdef TIER0_IGNORES_STRICT
    :: true ->                     /* negative control: credits in strict mode */
#else
    :: !queued || !strict ->       /* the CAS that succeeds */
#endif
         permits = permits + fl[me]; fl[me] = 0; wk = (queued && !woken); t1 = false
#ifndef TIER0_IGNORES_STRICT
    :: else -> t1 = true           /* the read that shows kQueued and kStrict */
#endif
    fi
  };
  if
  :: !t1 && wk ->
       atomic { !mtx -> mtx = true; wk = false };                     /* R0_lock */
       wake_oldest(true);
       unlock()                                                       /* R0_unlock */
  :: !t1 && !wk -> skip
  :: t1 ->
       atomic {                                                       /* R1 */
         w = fast; fast = 0; t1 = false;
         if :: w != 0 -> out[w] = true; no_overtake(w) :: else -> skip fi
       };
       if
       :: w != 0 ->
            atomic {                                                  /* R2, R3 */
              touch(w); assert(rem[w] == 1 && !rbit[w]);
              rem[w] = 0; got[w] = got[w] + 1; out[w] = false; fl[me] = fl[me] - 1; w = 0;
              mark(strict -> M_R3 : M_R1STALE); more = (fl[me] > 0)
            };
            if
            :: more -> more = false; lock_rl(); release_locked()      /* R3_surplus */
            :: else -> skip
            fi
       :: else -> lock_rl(); release_locked()                         /* R9 */
       fi
  fi
}

/* retry's requeue CAS (RT_cas): from the word with count 0 seen, to
 * (word & ~kWoken) | kQueued | (starving ? kStrict : 0). */
inline requeue_cas() {
  if
  :: atomic { permits == 0 ->                                         /* RT_cas */
       assert(woken && rbit[me] && !strict && linked[me]);
       rbit[me] = false;                   /* state.store(still): RT_state */
       woken = false; queued = true;
       if
       :: failed[me] + 1 >= STRICT_AFTER -> strict = true; starving[me] = true; mark(M_STRICT)
       :: else -> starving[me] = false
       fi;
       failed[me]++;
       assert(failed[me] <= STRICT_AFTER) };
     unlock(); break                                                  /* RT_unlock */
  :: permits > 0 -> skip                   /* the CAS fails: a credit */
  fi
}

/* retry(waiter), by the owner of a waiter woken to retry (RT_*).
 * Ends granted (rem 0), queued again, or closed (cbit). */
inline retry() {
  atomic { !mtx -> mtx = true; qa = false };                          /* RT_lock */
  do
#ifdef CLOSE
  :: atomic { closed ->                                               /* RT_closed */
       assert(!qa && woken && rbit[me]);   /* kClosed is stable under the mutex */
       woken = false; rbit[me] = false; cbit[me] = true; mark(M_RTC) };
     unlock(); break
#endif
  :: atomic { (OPEN && permits > 0) ->                                /* RT_take */
       no_overtake(me);
       x = (permits < rem[me] -> permits : rem[me]);
       permits = permits - x; rem[me] = rem[me] - x; got[me] = got[me] + x; x = 0;
       mark((rem[me] > 0 -> M_RTP : 0) | (qa -> M_RTAGAIN : 0)); more = (rem[me] == 0) };
     if
     :: more ->
          atomic {                                                    /* RT_served */
            if :: qa -> unlink_body(me) :: else -> skip fi;
            assert(woken && rbit[me] && !starving[me]);
            failed[me] = 0; rbit[me] = false; qa = false; more = false;
            woken = false
          };
#ifndef NO_PASS_ON
          wake_oldest(false);
#endif
          unlock(); break                                             /* RT_unlock2 */
     :: else -> skip
     fi
  :: atomic { (OPEN && permits == 0 && !qa) ->                        /* RT_zero */
       x = fast; fast = 0;                                            /* RT_fast */
       if :: x != 0 -> push_front_body(x) :: else -> skip fi;         /* RT_push */
       push_front_body(me); x = 0; qa = true };
     requeue_cas()
  :: (OPEN && permits == 0 && qa) -> requeue_cas()
  od
}

/* end_strict (ES_*). */
inline end_strict() {
  lock();                                                             /* ES_lock */
  atomic { starving[me] = false; failed[me] = 0; strict = false;      /* ES_clear */
#ifdef CLOSE
           if :: cbit[me] -> mark(M_CLSTARVE) :: else -> skip fi
#else
           skip
#endif
  };
  wake_oldest(false);
  unlock()                                                            /* ES_unlock */
}

proctype Acq(byte me) {
  byte w, x, wo, oc;
  bool ff, wk, qa, t1, st, more;

  /* T1 try_take */
  if
  :: atomic { (OPEN && permits >= NEED(me)) ->
       no_overtake(me);
       permits = permits - NEED(me); rem[me] = 0; got[me] = NEED(me); oc = HELD };
     goto acquired
#ifdef CLOSE
  :: atomic { (closed || permits < NEED(me)) -> late[me] = closed }  /* T1_closed */
#else
  :: else -> skip
#endif
  fi;

  /* acquire_locked */
  lock();                                                             /* A1 */
  do                                                                  /* A2 */
#ifdef PARTIAL_BEHIND
  :: atomic { (OPEN && rem[me] > 0 && permits > 0) ->
#else
  /* with kQueued or kWoken: all or nothing; else min(count, still) */
  :: atomic { (OPEN && rem[me] > 0 && ((queued || woken) -> permits >= rem[me] : permits > 0)) ->
#endif
       no_overtake(me);
       x = (permits < rem[me] -> permits : rem[me]);
       permits = permits - x; rem[me] = rem[me] - x; got[me] = got[me] + x; x = 0;
       mark(rem[me] > 0 -> M_A2P : 0); more = (rem[me] == 0) };
     if
     :: more ->                                                       /* A3 */
          atomic { assert(!LATE(me)); mtx = false; more = false; oc = HELD };
          goto acquired
     :: else -> skip
     fi
#ifdef PARTIAL_BEHIND
  :: atomic { (OPEN && rem[me] > 0 && permits == 0) -> queued = true }; break  /* A2q */
#else
  :: atomic { (OPEN && rem[me] > 0 && ((queued || woken) -> permits < rem[me] : permits == 0)) ->
       queued = true }; break                                         /* A2q */
#endif
#ifdef CLOSE
  :: atomic { closed ->                                               /* A2c, A2c_ret */
       /* kClosed is only set under the mutex: the first load saw it, and
        * nothing was drained: the give-back there is unreachable */
       assert(got[me] == 0); mtx = false; oc = CLOSED };
     goto finish
#endif
  od;
  atomic {                                                            /* A4, A5 */
    if
    :: (rem[me] == 1 && qlen == 0 && fast == 0) -> fast = me          /* A5_fast */
    :: else -> push_back_body(me)                                     /* A5_list */
    fi;
#ifdef CLOSE
    assert(!closed)         /* nobody queues after close (mutex still held) */
#else
    skip
#endif
  };
  unlock();                                                           /* A6 */

  /* Queued: wait until finished or woken to retry (settle), or be
   * destroyed while waiting (cancel-capable acquirers). */
#ifdef NO_LIVENESS
end_wait:
#endif
  do
  :: rbit[me] -> retry()                                              /* W_retry */
  :: atomic { (!rbit[me] && rem[me] == 0) ->                          /* W */
       assert(!LATE(me)); ff = starving[me]; oc = HELD }; break
#ifdef CLOSE
  :: atomic { (!rbit[me] && cbit[me]) ->                              /* W_closed */
       ff = starving[me]; oc = CLOSED }; break
#endif
  :: CANCELS(me) -> goto cancel                                       /* D */
  od;
  /* await_resume / acquire_blocking after the wait */
  if
  :: ff -> ff = false; end_strict()                                   /* RES_strict */
  :: else -> skip
  fi;
  if
  :: oc == HELD -> goto acquired
  :: else -> skip
  fi;
  /* closed: give_back_partial, requested - still (RES_closed, G) */
  atomic {
    assert(got[me] + rem[me] == NEED(me));
    more = (got[me] > 0);
    if :: more -> mark(M_CLPART) :: else -> skip fi
  };
  if
  :: more -> more = false; release()                                  /* G_release */
  :: else -> skip
  fi;
  goto finish;

cancel:
  do
  :: atomic {                                                         /* C1 */
       if
       :: fast == me ->
            assert(!starving[me] && !rbit[me] && rem[me] == 1);
            fast = 0; fl[me] = got[me]; got[me] = 0; t1 = true; mark(M_C1)
       :: else -> t1 = false
       fi };
     if
     :: t1 -> t1 = false; break
     :: else -> skip
     fi;
     lock();                                                          /* C2 */
     if
     :: atomic { rbit[me] ->                                          /* C2_woken */
          assert(woken && !starving[me] && got[me] + rem[me] == NEED(me));
          /* kWoken handed back; the state keeps kRetryBit but nobody
           * reads it again: the model clears the ghost */
          woken = false; rbit[me] = false; fl[me] = got[me]; got[me] = 0; mark(M_C2W) };
#ifndef NO_PASS_CANCEL
        wake_oldest(false);
#endif
        unlock(); break                                               /* C2_woken_unlock */
     :: atomic { (!rbit[me] && (rem[me] == 0 || CBIT(me) || linked[me])) ->  /* C2_test */
          assert(got[me] + rem[me] == NEED(me));
          if :: linked[me] -> unlink_body(me) :: else -> skip fi;     /* C2_remove */
          fl[me] = got[me]; got[me] = 0; ff = starving[me] };
        if
        :: ff ->
             atomic { starving[me] = false; strict = false; ff = false; mark(M_C2S) };  /* C2_strict */
             wake_oldest(false)
        :: else -> skip
        fi;
        unlock(); break                                               /* C2_unlock */
     :: atomic { (!rbit[me] && rem[me] > 0 && !CBIT(me) && !linked[me]) ->
          mtx = false; mark(M_C2HELD) }   /* C2_retry: held by a releaser */
     fi
  od;
  oc = CANCELLED;
  if
  :: fl[me] > 0 -> release()                                          /* C_give */
  :: else -> skip
  fi;
  goto finish;

acquired:
  if
  :: HOLDS(me) -> release()                                           /* H_release */
  :: else -> skip
  fi;
finish:
  /* the Acquire returns: its waiter is freed */
  atomic {
    assert(fast != me && !linked[me] && !rbit[me] && !out[me] && !starving[me]);
    assert(oc != HELD || rem[me] == 0);
    outcome[me] = oc; freed[me] = true; n_done++
  }
}

proctype Rel(byte me) {
  byte w, x, wo;
  bool ff, wk, t1, st, more;
  release();
  n_done++
}

#ifdef CLOSE
#ifdef CLOSE_FLUSH
#define close_flush if :: unlock(); lock() :: true -> skip fi        /* K6 */
#else
#define close_flush skip
#endif
/* close() (K1..K7) */
proctype Closer() {
  byte w;
  lock();                                                             /* K1 */
  closed = true;                                                      /* K2 */
  atomic { w = fast; fast = 0 };                                      /* K3 */
  if
  :: w != 0 -> atomic { touch(w); cbit[w] = true; w = 0 }; close_flush  /* K4 */
  :: else -> skip
  fi;
  do
  :: qlen > 0 ->
       d_step { w = q[0]; unlink_body(w); touch(w); cbit[w] = true; w = 0 };  /* K5, K4 */
       close_flush
  :: else -> break
  od;
  atomic { assert(fast == 0 && qlen == 0); mtx = false; close_done = true; n_done++ }  /* K7 */
}
#endif

#define PART(i) (got[i] > 0 && rem[i] > 0 && !out[i] && !CBIT(i))
/* the oldest waiter: the one woken to retry, else the slot's, else the
 * list's front */
#define OLDEST(i) (rbit[i] || (NRB == 0 && (fast == (i) || (fast == 0 && qlen > 0 && q[0] == (i)))))
#define PART_BAD(i) (PART(i) && !OLDEST(i))
#define QWAIT (fast != 0 || qlen > 0)

#define CONS_BAD (permits + GSUM + FSUM != SUPPLY)
#define STRICT_BAD (strict && queued && permits > 0)
#define I0_BAD (!mtx && QWAIT && !queued)
#define WOKEN_BAD (!mtx && (NRB > 1 || woken != (NRB == 1)))
#ifdef NO_PARTIAL_CHECK
#define PARTIAL_BAD false
#else
#define PARTIAL_BAD (!mtx && (PART(1) + PART(2) + PART(3) + PART(4) > 1 || \
                     PART_BAD(1) || PART_BAD(2) || PART_BAD(3) || PART_BAD(4)))
#endif
#ifdef CLOSE
#define CLOSE_BAD (close_done && QWAIT)
#else
#define CLOSE_BAD false
#endif
#ifdef REACH_HIT
#define REACHED (hit & (REACH_HIT))
#else
#define REACHED false
#endif

/* The invariants, checked in every state (those about waiters only when the
 * mutex is free: its holder may be between two steps of a list update). */
proctype monitor() {
end_monitor:
  atomic {
    (CONS_BAD || STRICT_BAD || I0_BAD || WOKEN_BAD || PARTIAL_BAD || CLOSE_BAD || REACHED) ->
      assert(!CONS_BAD);        /* conservation: count + held + in flight */
      assert(!STRICT_BAD);      /* strict mode: nothing in the count while queued */
      assert(!I0_BAD);          /* kQueued covers every queued waiter */
      assert(!WOKEN_BAD);       /* kWoken iff exactly one waiter woken to retry */
      assert(!PARTIAL_BAD);     /* only the oldest waiter holds a partial grant */
      assert(!CLOSE_BAD);       /* nobody queued once close returned */
      assert(!REACHED)          /* -DREACH_HIT: the step was reached */
  }
}

init {
  byte i, demand, hmax;
  atomic {
    i = 1;
    do
    :: i <= ACQ ->
         rem[i] = NEED(i);
         if
         :: HOLDS(i) -> if :: NEED(i) > hmax -> hmax = NEED(i) :: else -> skip fi
         :: else -> demand = demand + NEED(i)
         fi;
         run Acq(i); i++
    :: else -> break
    od;
    i = 1;
    do
    :: i <= REL -> fl[ACQ + i] = RELN(i); run Rel(ACQ + i); i++
    :: else -> break
    od;
#ifdef CLOSE
    run Closer();             /* close finishes every waiter: no demand bound */
#else
    assert(SUPPLY >= demand + hmax);
#endif
#ifndef NO_MONITOR
    run monitor();
#endif
    i = 0; demand = 0; hmax = 0
  };
#ifdef NO_LIVENESS
end_all:
#endif
  (n_done == ACQ + REL + NCLOSE);
  atomic {
    i = 1;
    do
    :: i <= ACQ ->
         assert(outcome[i] != 0 && !linked[i] && !rbit[i]);
         assert(((outcome[i] == HELD && !HOLDS(i)) -> (got[i] == NEED(i)) : (got[i] == 0)));
         i++
    :: else -> break
    od;
    assert(fast == 0 && qlen == 0 && !woken && !strict && FSUM == 0);
    assert(permits + GSUM == SUPPLY)
  }
}
