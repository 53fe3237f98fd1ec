/*
 * SPIN model of the counting semaphore's wait/wake protocol (permits word
 * with a kQueued bit, fast waiter slot, mutex-guarded FIFO list), as
 * implemented in
 *   include/volt/sync/semaphore.hpp   try_take (try_acquire), Acquire
 *   src/sync/semaphore.cpp            acquire_locked, release_unchecked
 *                                     (release), release_locked, cancel,
 *                                     close (-DCLOSE), give_back_partial
 * in its kFifo mode (Semaphore::Fairness::kFifo, barging_ false: every
 * barging-only branch of the code is skipped, and the kWoken and kStrict
 * bits of the word stay clear; the word is now count << 4 with them, the
 * model's step atomicity unchanged). The kBarging mode (Mutex, RwLock) is
 * tests/model/semaphore_barging.pml. Under -DSEED / -DHAS_WAITERS, this
 * model runs the reference's protocol
 * (the reference design's semaphore and fast waiter slot, docs/design.md) as negative
 * controls. Not modelled: the range check of release(), kMaxPermits.
 *
 * State. permits = the count and queued = the kQueued bit: together the
 * word permits_ (count << 4 | kQueued | kClosed); every step that reads or
 * writes the word is one atomic step covering both. fast = 0 or a waiter id
 * (1..ACQ); q[0..qlen) = the list, q[0] the oldest; per waiter i: rem[i] =
 * its state word (permits still needed; 0 = complete, published),
 * linked[i] = in the list, freed[i] = its Acquire returned (the waiter's
 * memory is gone). outcome[i]: HELD (returned with its permits) or
 * CANCELLED (gave back all it had been granted) or CLOSED (finished by
 * close, or refused by a closed semaphore; gave back its partial grant).
 * Under -DCLOSE: closed = the kClosed bit of the word (one atomic step with
 * permits and queued, like them), cbit[i] = the kClosedBit of waiter i's
 * state word (rem[i] keeps the rest), close_done = ghost: close() returned.
 * mtx = the mutex (a lock: atomic test-and-set).
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
 * Model step -> code (fixed protocol, the default). Line numbers as of
 * commit f42ae09 (the cancel's SpinWait); since then the hpp lines moved
 * (owned permits, merge, forget_permits were added above and inside the
 * class): the mapping block at the end of this comment is current, the hpp
 * numbers in this prose are f42ae09's. F (forget_permits, cpp) is new:
 *   F   forget_permits, cpp 328: the CAS taking min(count, n) out of the
 *       count, the bits left alone (-DFORGET runs it, then gives back).
 * The rest: hpp = include/volt/sync/
 * semaphore.hpp, cpp = src/sync/semaphore.cpp. The checked subset is the
 * step-to-line mapping at the end of this comment
 * (tests/model/check_lines.sh).
 *   T1  try_take, hpp 275-285: load (276), the closed/count test (278:
 *       closed or too few -> fail) and CAS loop (281-282) taking the count
 *       down; the bits are left alone. Called from Acquire::await_ready
 *       (hpp 182) or, after a budget yield, from Acquire::ready_check
 *       (hpp 243); try_acquire (hpp 143) is the same step.
 *   A1  acquire_locked, cpp 183: lock mutex_ (std::lock_guard). Reached via
 *       Acquire::register_waiter (hpp 220-235, call at 223) from
 *       await_suspend (hpp 200) or ready_check (hpp 247).
 *   A2c acquire_locked, cpp 190 and 207-211: the word shows kClosed: break,
 *       return kClosed (register_waiter, hpp 230-232: the Acquire returns
 *       errc::closed). kClosed changes only under the mutex (close, K2), so
 *       it is seen at the first load (cpp 187) or never: the give-back of
 *       cpp 209-210 is unreachable (the model asserts it drained nothing).
 *   A2  acquire_locked, cpp 187-206: the drain loop (load 187), one step per
 *       successful CAS taking min(count, still) (cpp 203-205).
 *   A2q acquire_locked, cpp 192-200: count 0 and permits still needed: the
 *       CAS that saw the zero sets kQueued (cpp 196-199), or the word already
 *       showed kQueued (cpp 196): one step, then break. (A failed CAS,
 *       cpp 200 continue, saw a lock-free credit: the model's guard then
 *       sends the loop back to A2. An older `current` showing kQueued is
 *       still exact: with the mutex held nobody clears the bit, and while
 *       it is set nobody adds to the count.)
 *   A3  acquire_locked, cpp 213: granted in full -> return kGranted (the
 *       lock_guard unlocks).
 *   A4  acquire_locked, cpp 217: still == 1 && waiters_.empty() &&
 *       fast_.load() == nullptr ? (the state store of cpp 214 is the model's
 *       rem[me], already equal to still and not yet published)
 *   A5  acquire_locked, cpp 219 fast_.store(w) | cpp 221 waiters_.push_back(w)
 *       (the model asserts kClosed is clear: nobody queues after close)
 *   A6  acquire_locked, cpp 223: return kQueued (the lock_guard unlocks);
 *       register_waiter sets queued_ (hpp 225) and the Acquire waits for
 *       waiter_.finished() (hpp 241, ready_check; hpp 73-76: state 0 or
 *       kClosedBit).
 *   W   the wait: finished() (hpp 74) sees 0 -> HELD (await_resume,
 *       hpp 210), or sees kClosedBit -> W_closed: await_resume (hpp 206-208)
 *       calls give_back_partial (cpp 257-261: load the state without the
 *       bit, release_unchecked(requested - still): R0..) and returns
 *       errc::closed; the model's outcome CLOSED.
 *   acquire_blocking (cpp 286-310) runs the same steps: T1 (290), A1..A6
 *   (295; kClosed at 298-299), then waits for finished() (303) and, closed,
 *   gives back the partial grant (305-307); it never cancels.
 *   R0  release_unchecked, cpp 101-106 (Tier 0): load (101) and CAS loop
 *       (102-105) adding n to the count while kQueued is clear: one step,
 *       either the CAS that succeeds (kQueued clear: return, cpp 105) or the
 *       read (load or failed CAS) that shows kQueued (leave the loop, on to
 *       R1). -DSPLIT_TIER0 splits it into a load of the bit and a separate
 *       fetch_add (negative control). kClosed does not matter here: after
 *       close a release still credits (the count is what permits held
 *       after close come back to).
 *   R1  release_unchecked, cpp 113-115: w = fast_.exchange(nullptr) (the
 *       code loads first and skips the exchange when the slot is empty: the
 *       same as an exchange that finds it empty)
 *   R2  release_unchecked, cpp 120-121: remaining = w->state.load, waker
 *       moved out
 *   R3  release_unchecked, cpp 124: w->state.store(0) (publish; w not
 *       touched after), wake (125); surplus (126-130) -> lock (128),
 *       release_locked (129)
 *   R4  partial (only under -DFAST_ANY: by default a slot waiter needs one
 *       permit, so this path is unreachable, asserted, and absent from the
 *       code, cpp 117-119): lock; R5 drain loop (one step per CAS) into
 *       `still`, which with the kQueued bit ends like A2q (sets the bit when
 *       it sees the count at 0 with permits still needed: the model's own
 *       completion of a path the code does not have); R6
 *       w->state.store(still) (0 = publish and unlock); R7 newer =
 *       fast_.exchange(w); R8 waiters_.push_front(newer); unlock
 *   R9  release_unchecked, cpp 132-134 (Tier 2): slot empty -> lock (133),
 *       release_locked (134)
 *   L1  release_locked, cpp 145-147: x = fast_.exchange(nullptr) (the code
 *       loads first and skips the exchange when empty: under the mutex
 *       nobody fills it)
 *   L2  release_locked, cpp 149: else x = waiters_.front(); none (cpp 150)
 *       -> L3
 *   L3  release_locked, cpp 156-158, nobody waits: load the word's kQueued
 *       bit (156), then fetch_add((n << 2) - queued) (157): one RMW that
 *       credits the count and clears kQueued; break. Two steps; the model
 *       asserts the bit has not changed between them (cpp 152-154: only
 *       mutex holders set or clear it).
 *   L4  release_locked, cpp 160: remaining = x->state.load
 *   L5  release_locked, cpp 161-165, partial: x->state.store(remaining - n)
 *       (164); break. L6 (-DFAST_ANY only; the code has no partial grant
 *       from the slot, I3): if from fast, fast_.store(x); break
 *   L7  release_locked, cpp 167-169: waiters_.remove(x) if from the list
 *       (167), waker moved out (169); L8 x->state.store(0) (170);
 *       L9 wake list full (171-175): unlock, wake, lock (the model flushes
 *       nondeterministically after any full grant)
 *   L10 release_locked, cpp 177-178: unlock, wake_all
 *   C1  cancel, cpp 229-238: fast_.CAS(w -> nullptr) (232-233); success:
 *       state.load (235), give back requested - state via
 *       release_unchecked (236: R0..)
 *   C2  cancel, cpp 239-253: lock (239), state load (240); state == 0, or
 *       kClosedBit, or linked (241) -> remove if linked (242), unlock (243),
 *       give back requested - (state without kClosedBit) via
 *       release_unchecked (246); otherwise unlock (249), SpinWait::once
 *       (253; include/volt/detail/spin_wait.hpp 34-41: a pause, or a yield
 *       once 128 pauses are spent: no shared state, so the model's plain
 *       retry covers both), back to C1
 *   K1..K7 close (cpp 263-284), the Closer process (-DCLOSE):
 *   K1  lock (265, std::unique_lock)
 *   K2  permits_.fetch_or(kClosed) (266): the model's closed = true
 *   K3  w = fast_.exchange(nullptr) (279); if one was there, K4 on it. A
 *       waiter a releaser holds out of the slot (R1..R3) is not seen: the
 *       releaser grants it in full (I3).
 *   K4  finish (267-276): state load (268) and waker moved out (269), plain
 *       accesses of a waiter close owns, folded into the store
 *       w->state.store(still | kClosedBit) (270): the model's cbit[w]
 *       (rem[w] keeps still); after it w is not touched
 *   K5  waiters_.pop_front() (280), then K4 on it
 *   K6  wake list full (271-275): unlock, wake, lock (the model flushes
 *       nondeterministically after any K4, as L9)
 *   K7  unlock (282), wake_all (283)
 *   The Acquire's destructor (hpp 162-164) calls cancel() when it was queued
 *   and not resumed; a cancel-capable acquirer (CANCEL mask) may do so at
 *   any point while it waits, including after it was granted in full or
 *   finished as closed (then C2 gives back its partial grant). A
 *   releaser (Rel) is release() (cpp 83-93, the range check not modelled)
 *   or SemaphorePermit::reset (hpp 304-308): both call release_unchecked.
 *   The kQueued bit is not cleared anywhere but L3 (it may stay set after
 *   the last waiter left by C1/C2 or was served, or after close: the next
 *   release clears it).
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
 *  - Close (-DCLOSE; a Closer process runs close() once, at any point):
 *    after close no waiter sleeps forever (the liveness check above, now
 *    without the demand bound: the configuration may supply fewer permits
 *    than the acquirers need, and every waiter must still return); nobody
 *    queues once kClosed is set (A5 asserts it); when close returns the
 *    slot and the list are empty (K7 asserts it, and the monitor in every
 *    later state); no releaser touches a waiter once close finished it
 *    (every releaser access asserts !cbit); an acquire whose try_take
 *    already saw kClosed never ends HELD (ghost late[i]); conservation at
 *    the end includes CLOSED waiters' give-backs and releases after close
 *    (no permit lost or duplicated: permits == INIT + released - held).
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
 * Close (-DCLOSE): verified with partial grants (a list waiter served in
 * part, then finished by close, gives its grant back: to the count, or, if
 * close has not reached the rest yet (K6), to the waiters behind it),
 * cancellation racing close (a finished-as-closed waiter cancelled before it
 * resumed gives back through C2), a releaser holding the slot waiter across
 * close (it completes HELD), Tier 0 credits after close, and strict FIFO.
 * Negative controls: -DCLOSE_SKIP_FAST (close leaves the fast slot alone:
 * its waiter sleeps forever when no release comes) and
 * -DCLOSED_DROP_PARTIAL (a waiter finished by close returns without giving
 * back its partial grant: conservation fails).
 * The kQueued bit (commit d6ff79d) makes the check "nobody queued" and the
 * lock-free credit one RMW on the word the acquirer's A2q also writes: a
 * credit either lands before A2q (which then fails its CAS and drains it)
 * or fails and goes to the waiters' tiers. -DSPLIT_TIER0 (the bit loaded,
 * then a separate fetch_add) is the reference's has_waiters race again: SPIN
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
 *   -DSEED            the reference (no kQueued bit, no Tier 0): acquireWaitDirect
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
 *                     before the store (isolates the other reference bugs).
 *   -DSEED_REMOVE_CORRUPT with SEED: list.remove of a non-member clears the
 *                     list (std.DoublyLinkedList with null links); default:
 *                     remove of a non-member does nothing.
 *   -DHAS_WAITERS     the reference's earlier has_waiters hint (a separate flag,
 *                     no kQueued bit): release reads the flag and, if false,
 *                     fetch_adds without the mutex (a second step);
 *                     acquirers lock, drain, set the flag, push, unlock.
 *   -DCLOSE           a Closer process: close() once (K1..K7).
 *   -DCLOSE_SKIP_FAST with CLOSE, negative control: close skips K3 (the
 *                     fast slot's waiter is not finished).
 *   -DCLOSED_DROP_PARTIAL with CLOSE, negative control: a waiter finished
 *                     as closed (W_closed) does not give back its grant.
 *   -DFORGET=k        a Forgetter process: forget_permits(k) (F: takes
 *                     min(count, k)), then release() of what it took.
 *   -DFORGET_NO_GIVEBACK with FORGET, negative control: the permits taken
 *                     are not given back; SPIN must see a waiter stranded
 *                     or the count short (shows the F step is live).
 * Switches (configuration): ACQ (1..3) acquirers needing NEED1..NEED3;
 *   REL (0..3) releasers releasing RELN1..RELN3 once; INIT initial permits;
 *   -DCANCEL=mask: acquirer i may cancel while waiting if bit i-1 is set
 *   (-DCANCEL = acquirer 1); -DLATE_RELEASE=k: releasers start once k
 *   acquirers have queued or been granted (isolates orderings).
 * Switches (checks): -DCHECK_FIFO; -DNO_MONITOR (no I0/I1 monitor: a float
 *   then shows as a deadlock, or at the end); -DNO_LIVENESS (a blocked waiter is a
 *   valid end state: assertions only); -DNO_UAF_CHECK; -DNO_FLUSH (no L9,
 *   no K6).
 *
 * Step-to-line mapping:
 *   T1  include/volt/sync/semaphore.hpp:514  std::uint64_t current = permits_.load(std::memory_order_acquire);
 *   T1_closed  include/volt/sync/semaphore.hpp:517  if ((current & kClosed) || (current >> kCountShift) < n) return false;
 *   T1_cas  include/volt/sync/semaphore.hpp:520  if (permits_.compare_exchange_weak(current, current - (n << kCountShift),
 *   A1  src/sync/semaphore.cpp:374  std::lock_guard guard(mutex_);
 *   A2_load  src/sync/semaphore.cpp:390  std::uint64_t current = permits_.load(std::memory_order_acquire);
 *   A2c  src/sync/semaphore.cpp:393  if (current & kClosed) break;
 *   A2q  src/sync/semaphore.cpp:409  permits_.compare_exchange_weak(current, current | kQueued, std::memory_order_acquire,
 *   A2  src/sync/semaphore.cpp:415  if (permits_.compare_exchange_weak(current, current - (take << kCountShift),
 *   A2c_give  src/sync/semaphore.cpp:422  permits_.fetch_add((needed - still) << kCountShift, std::memory_order_release);
 *   A2c_ret  src/sync/semaphore.cpp:423  return AcquireResult::kClosed;
 *   A3  src/sync/semaphore.cpp:425  if (still == 0) return AcquireResult::kGranted;
 *   A4  src/sync/semaphore.cpp:429  if (still == 1 && waiters_.empty() && fast_.load(std::memory_order_relaxed) == nullptr) {
 *   A5_fast  src/sync/semaphore.cpp:431  fast_.store(waiter, std::memory_order_release);
 *   A5_list  src/sync/semaphore.cpp:433  waiters_.push_back(waiter);
 *   A6  src/sync/semaphore.cpp:435  return AcquireResult::kQueued;
 *   W  include/volt/sync/semaphore.hpp:128  const std::uint64_t s = state.load(std::memory_order_acquire);
 *   W_closed  include/volt/sync/semaphore.hpp:359  if (waiter_.state.load(std::memory_order_acquire) & detail::SemaphoreWaiter::kClosedBit) {
 *   W_giveback  include/volt/sync/semaphore.hpp:360  semaphore_.give_back_partial(&waiter_);
 *   G_load  src/sync/semaphore.cpp:490  waiter->state.load(std::memory_order_acquire) & SemaphoreWaiter::kNeededMask;
 *   G_release  src/sync/semaphore.cpp:491  release_unchecked(waiter->requested - still);
 *   B_wait  src/sync/semaphore.cpp:540  if (s == 0 || (s & SemaphoreWaiter::kClosedBit)) break;
 *   B_closed  src/sync/semaphore.cpp:544  if (waiter.state.load(std::memory_order_acquire) & SemaphoreWaiter::kClosedBit) {
 *   R0_load  src/sync/semaphore.cpp:162  std::uint64_t current = permits_.load(std::memory_order_relaxed);
 *   R0  src/sync/semaphore.cpp:165  if (permits_.compare_exchange_weak(current, current + (n << kCountShift),
 *   R1  src/sync/semaphore.cpp:190  : fast_.exchange(nullptr, std::memory_order_acq_rel);
 *   R2  src/sync/semaphore.cpp:195  const std::uint64_t remaining = waiter->state.load(std::memory_order_relaxed);
 *   R3  src/sync/semaphore.cpp:199  waiter->state.store(0, std::memory_order_release);
 *   R3_surplus  src/sync/semaphore.cpp:203  mutex_.lock();
 *   R9  src/sync/semaphore.cpp:208  mutex_.lock();
 *   L1  src/sync/semaphore.cpp:234  : fast_.exchange(nullptr, std::memory_order_acq_rel);
 *   L2  src/sync/semaphore.cpp:236  if (!waiter) waiter = waiters_.front();
 *   L3_load  src/sync/semaphore.cpp:243  const std::uint64_t queued = permits_.load(std::memory_order_relaxed) & kQueued;
 *   L3  src/sync/semaphore.cpp:244  permits_.fetch_add((n << kCountShift) - queued, std::memory_order_release);
 *   L4  src/sync/semaphore.cpp:247  const std::uint64_t remaining = waiter->state.load(std::memory_order_relaxed);
 *   L5  src/sync/semaphore.cpp:251  waiter->state.store(remaining - n, std::memory_order_relaxed);
 *   L7  src/sync/semaphore.cpp:254  if (!from_fast) waiters_.remove(waiter);
 *   L8  src/sync/semaphore.cpp:257  waiter->state.store(0, std::memory_order_release);
 *   L9  src/sync/semaphore.cpp:259  mutex_.unlock();
 *   L10  src/sync/semaphore.cpp:273  mutex_.unlock();
 *   D  include/volt/sync/semaphore.hpp:311  if (queued_) semaphore_.cancel(&waiter_);
 *   C1  src/sync/semaphore.cpp:444  if (fast_.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel,
 *   C1_give  src/sync/semaphore.cpp:448  release_unchecked(requested - (still & ~SemaphoreWaiter::kClosedBit));
 *   C2  src/sync/semaphore.cpp:451  mutex_.lock();
 *   C2_load  src/sync/semaphore.cpp:452  const std::uint64_t s = waiter->state.load(std::memory_order_acquire);
 *   C2_test  src/sync/semaphore.cpp:464  if (s == 0 || (s & SemaphoreWaiter::kClosedBit) || waiter->linked) {
 *   C2_remove  src/sync/semaphore.cpp:465  if (waiter->linked) waiters_.remove(waiter);
 *   C2_give  src/sync/semaphore.cpp:477  release_unchecked(requested - (s & ~SemaphoreWaiter::kClosedBit));
 *   C2_retry  src/sync/semaphore.cpp:484  backoff.once();
 *   C2_spin  include/volt/detail/spin_wait.hpp:37  SpinLock::pause();
 *   C2_yield  include/volt/detail/spin_wait.hpp:39  std::this_thread::yield();
 *   K1  src/sync/semaphore.cpp:496  std::unique_lock lock(mutex_);
 *   K2  src/sync/semaphore.cpp:497  permits_.fetch_or(kClosed, std::memory_order_release);
 *   K4_load  src/sync/semaphore.cpp:499  const std::uint64_t still = waiter->state.load(std::memory_order_relaxed);
 *   K4  src/sync/semaphore.cpp:501  waiter->state.store(still | SemaphoreWaiter::kClosedBit, std::memory_order_release);
 *   K6  src/sync/semaphore.cpp:503  lock.unlock();
 *   K3  src/sync/semaphore.cpp:510  if (SemaphoreWaiter* waiter = fast_.exchange(nullptr, std::memory_order_acq_rel)) finish(waiter);
 *   K5  src/sync/semaphore.cpp:511  while (SemaphoreWaiter* waiter = waiters_.pop_front())
 *   K7  src/sync/semaphore.cpp:513  lock.unlock();
 *   F  src/sync/semaphore.cpp:567  if (permits_.compare_exchange_weak(current, current - (take << kCountShift),
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
/* QBIT: the kQueued bit in the permits word (the code as it is); the reference's
 * protocols (SEED, HAS_WAITERS) have no such bit. */
#if !defined(SEED) && !defined(HAS_WAITERS)
#define QBIT
#endif
#if defined(SPLIT_TIER0) && !defined(QBIT)
#error "SPLIT_TIER0 is a variant of the default protocol"
#endif
#if defined(CLOSE) && (!defined(QBIT) || defined(FAST_ANY))
#error "CLOSE models the code's protocol (close has no partial put-back R4..R8)"
#endif
#if (defined(CLOSE_SKIP_FAST) || defined(CLOSED_DROP_PARTIAL)) && !defined(CLOSE)
#error "CLOSE_SKIP_FAST and CLOSED_DROP_PARTIAL need CLOSE"
#endif
#if defined(FORGET) && !defined(QBIT)
#error "FORGET models the code's protocol"
#endif
#if defined(FORGET_NO_GIVEBACK) && !defined(FORGET)
#error "FORGET_NO_GIVEBACK needs FORGET"
#endif
#ifdef FORGET
#define NFORGET 1
#else
#define NFORGET 0
#endif
#ifdef CLOSE
#define OPEN (!closed)
#define NCLOSE 1
#else
#define OPEN true
#define NCLOSE 0
#endif

#define NEED(i) ((i) == 1 -> NEED1 : ((i) == 2 -> NEED2 : NEED3))
#define RELN(i) ((i) == 1 -> RELN1 : ((i) == 2 -> RELN2 : RELN3))

#define HELD      1
#define CANCELLED 2
#define CLOSED    3

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
#ifdef CLOSE
bool closed = false;    /* kClosed: the same word as permits and queued */
bool cbit[ACQ + 1];     /* kClosedBit in waiter i's state (rem[i]: the rest) */
bool late[ACQ + 1];     /* ghost: acquirer i's try_take saw kClosed */
bool close_done = false; /* ghost: close() returned */
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
#elif defined(CLOSE)
/* once close finished a waiter (cbit), only its owner touches it */
#define touch(i) assert(!freed[i] && !cbit[i])
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
  :: atomic { (OPEN && permits >= NEED(me)) -> fifo_grant(0); permits = permits - NEED(me); rem[me] = 0; settled++ };
     goto acquired
#ifdef CLOSE
  :: atomic { (closed || permits < NEED(me)) -> late[me] = closed }  /* T1_closed: fails */
#else
  :: else -> skip
#endif
  fi;

  /* acquire_locked (reference: acquireWaitDirect) */
  lock();                                                       /* A1 */
  do                                                            /* A2 */
  :: atomic { (OPEN && rem[me] > 0 && permits > 0) -> fifo_grant(0);
       if
       :: permits >= rem[me] -> permits = permits - rem[me]; rem[me] = 0
       :: else -> rem[me] = rem[me] - permits; permits = 0
       fi }
#ifdef QBIT
  :: atomic { (OPEN && rem[me] > 0 && permits == 0) -> queued = true }; break  /* A2q */
  :: rem[me] == 0 -> break
#ifdef CLOSE
  :: closed -> break                                            /* A2c */
#endif
#else
  :: (rem[me] == 0 || permits == 0) -> break
#endif
  od;
  if
  :: rem[me] == 0 -> atomic { mtx = false; settled++ }; goto acquired  /* A3 */
#ifdef CLOSE
  :: closed ->
       /* A2c: kClosed is only set under the mutex, so the first load saw
        * it and nothing was drained (cpp 209-210 unreachable) */
       atomic { assert(rem[me] == NEED(me)); mtx = false; settled++ };  /* A2c_ret */
       n = 0; goto closed_out
#endif
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
#ifdef CLOSE
  assert(!closed);          /* nobody queues after close (mutex still held) */
#endif
#endif
  atomic { mtx = false; settled++; ok = false };                /* A6 */

  /* wait until finished, or (cancel-capable) be destroyed while waiting */
#ifdef NO_LIVENESS
end_wait:
#endif
  if
  :: rem[me] == 0 -> goto acquired                              /* W */
#ifdef CLOSE
  :: cbit[me] -> goto closed_wait                               /* W_closed */
#endif
#ifdef CANCEL
  :: ((CANCEL_MASK >> (me - 1)) & 1) -> goto cancel             /* D */
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
     if                                                         /* C2_load, C2_test */
     :: rem[me] == 0 -> unlock(); n = NEED(me); break
#ifdef CLOSE
     :: rem[me] > 0 && cbit[me] -> n = NEED(me) - rem[me]; unlock(); break  /* finished by close */
#endif
     :: rem[me] > 0 && linked[me] ->
          d_step { unlink_body(me); fifo_clear(me) }; n = NEED(me) - rem[me]; unlock(); break
#ifdef CLOSE
     :: rem[me] > 0 && !linked[me] && !cbit[me] -> unlock()    /* held by a releaser: C2_retry */
#else
     :: rem[me] > 0 && !linked[me] -> unlock()                 /* held by a releaser: C2_retry */
#endif
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

#ifdef CLOSE
closed_wait:
  /* await_resume / acquire_blocking: give_back_partial (G_load, G_release) */
#ifdef CLOSED_DROP_PARTIAL
  n = 0;                    /* negative control: the partial grant is dropped */
#else
  n = NEED(me) - rem[me];
#endif
closed_out:
  outcome[me] = CLOSED;
  if
  :: n > 0 -> do_release()
  :: else -> skip
  fi;
  goto finish;
#endif

acquired:
#ifdef CLOSE
  assert(!late[me]);        /* an acquire that saw kClosed never succeeds */
#endif
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

#ifdef CLOSE
/* close(): K1..K7 */
#ifdef NO_FLUSH
#define close_flush skip
#else
#define close_flush if :: unlock(); lock() :: true -> skip fi   /* K6 */
#endif
proctype Closer() {
  byte w;
  lock();                                                       /* K1 */
  closed = true;                                                /* K2 */
#ifndef CLOSE_SKIP_FAST
  atomic { w = fast; fast = 0; fifo_clear(w) };                 /* K3 */
  if
  :: w != 0 -> atomic { touch(w); cbit[w] = true; w = 0 };      /* K4 */
       close_flush
  :: else -> skip
  fi;
#endif
  do
  :: qlen > 0 ->
       d_step { w = q[0]; unlink_body(w); fifo_clear(w) };      /* K5 */
       atomic { touch(w); cbit[w] = true; w = 0 };              /* K4 */
       close_flush
  :: else -> break
  od;
#ifdef CLOSE_SKIP_FAST
  atomic { assert(qlen == 0); mtx = false; close_done = true }; /* K7 */
#else
  atomic { assert(fast == 0 && qlen == 0); mtx = false; close_done = true };  /* K7 */
#endif
  n_done++
}
#endif

#ifdef FORGET
/* forget_permits(FORGET): F, one CAS taking min(count, FORGET) out of the
 * count (the kQueued and kClosed bits untouched, so no guard on them); then,
 * unless -DFORGET_NO_GIVEBACK, the same number given back through release()
 * (as tokio_parity_test's race does with add_permits), so the supply still
 * covers the demand and every waiter must still be served. */
proctype Forgetter() {
  byte n, w, x, r;
  bool ok, ff, qb;
  atomic { n = (permits < FORGET -> permits : FORGET); permits = permits - n };  /* F */
#ifndef FORGET_NO_GIVEBACK
  if
  :: n > 0 -> do_release()
  :: else -> skip
  fi;
#endif
  n_done++
}
#endif

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
#ifdef CLOSE
     || (close_done && (fast != 0 || qlen > 0))    /* nobody queued after close */
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
#ifdef FORGET
    run Forgetter();
#endif
#ifdef CLOSE
    run Closer();           /* close finishes every waiter: no demand bound */
    assert(ACQ <= 3 && REL <= 3);
#else
    assert(ACQ <= 3 && REL <= 3 && supply >= demand);
#endif
    i = 0
  };
#ifdef NO_LIVENESS
end_all:
#endif
  (n_done == ACQ + REL + NCLOSE + NFORGET);
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
