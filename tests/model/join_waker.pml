/*
 * SPIN model of a spawned task's polls and completion against its
 * JoinHandle: the join-waker handshake (rule 3 of
 * include/volt/detail/task_state.hpp), waits withdrawn by an aborted awaiter
 * and registered again, the inline poll of a queued task by the thread that
 * awaits its JoinHandle (task_state.hpp's Inline polls and rule 5: one queue
 * entry, kept queued while the task is polled inline), the detached drop's
 * fast path, and the reference count up to the cell's deallocation, as
 * implemented in
 *   src/task/harness.cpp          poll_task(), end_poll()  (a worker's poll)
 *                                 complete()              (the completing poll)
 *                                 join_inline()           (the inline poll)
 *                                 join_handle_register()  (a wait begins)
 *                                 join_handle_withdraw()  (awaiter destroyed while waiting)
 *                                 join_handle_drop()      (handle destroyed / result taken)
 *   include/volt/task/join_handle.hpp   Awaiter (await_suspend, ~Awaiter), take()
 *   include/volt/detail/task_state.hpp  the transitions each of those makes
 *   include/volt/detail/task_header.hpp wake_by_val, make_task_waker, drop_reference
 *   src/runtime/scheduler/worker.hpp    take_local (take_queued: the entry taken back)
 *   include/volt/detail/task_cell.hpp   dealloc (the cell's destructor, the free)
 *
 * Each `atomic { }` block is one atomic RMW (CAS loop or fetch_*) or load of
 * the state word, or one plain access to the cell (join_waker, the output),
 * or one queue operation, with the ghost updates that describe it; SPIN
 * interleaves them sequentially consistently (memory orders are not
 * modelled). `state` holds the word's flags (kCancelled is not modelled: no
 * abort of the task, no shutdown), `refs` its reference count: 3 at spawn
 * (the queue entry, the JoinHandle, the owned-tasks list). `waker` is the
 * TaskHeader::join_waker field: 0 empty, k the waker of the JoinHandle's
 * k-th wait.
 *
 * Three processes:
 *  - Worker: pops the task's queue entry whenever one is queued (at any
 *    point), and makes transition_to_running: if the task is idle (and
 *    notified) it claims it and polls it; if it is running (polled inline) or
 *    complete it drops the entry's reference and clears kQueuedEntry.
 *  - Leaf: what the task's frame awaits (a channel, a timer), EVENTS times
 *    (default 2); its events happen at any points. A poll resumes the frame,
 *    which takes every event that happened: after EVENTS it finishes (the
 *    poll completes the task), else it registers the leaf's waker (a
 *    reference) unless one is registered, and the poll ends without
 *    completing. Each event takes the registered waker, if any, and wakes
 *    the task by value (transition_to_notified_by_val: kNotified during a
 *    poll, a new queue entry if idle, the reference dropped if already
 *    notified or complete). A poll whose readiness check fails (no new
 *    event) does nothing.
 *  - JoinHandle: awaits up to WAITS times (default 2). Each wait first
 *    nondeterministically tries an inline poll (join_inline; not at all when
 *    its preconditions fail): it (a) takes the queue entry back when one is
 *    queued (take_queued: the worker's LIFO slot or local tail; then an
 *    ordinary transition_to_running and poll, on this side, and no entry is
 *    left), or else (b) claims the task by transition_to_running_inline
 *    (idle and notified: adds kRunning, kQueuedEntry and a reference;
 *    kNotified and the entry stay queued). The inline poll ends like any poll
 *    (end_poll): completed -> complete() on this side, and the awaiter takes
 *    the output without a waker; not completed -> transition_to_idle (with
 *    kQueuedEntry: back to idle and notified, only the poll's reference
 *    dropped; entry popped meanwhile: re-queued, kOkNotified). Then, as
 *    before, the wait registers its waker and either runs to its wake-up or
 *    is withdrawn (its awaiting task aborted at any point: the withdrawal
 *    interleaves with every step of the others), after which the handle may
 *    be awaited again (a new waker) or dropped. It may also be dropped
 *    without awaiting (detached: the fast path when it applies).
 *
 * Checked:
 *  - no use after free: every access to the cell (state word, join_waker,
 *    output, a queue push) asserts the cell is not yet deallocated;
 *  - join_waker is touched only by its owner (rule 3): the JoinHandle side
 *    while kJoinWaker is clear, the task side while it is set (or after
 *    clearing it with the handle gone); the task side's wake finds a waker;
 *  - references: after every step that changes the count or the entries,
 *    `refs` equals the references held (ghost counts: queued entries,
 *    entries popped or taken back, entries being submitted, running polls,
 *    the JoinHandle, the owned list, the leaf's wakers): in particular a
 *    queued entry always holds one;
 *  - rule 5: at most one queue entry at any time (queued, popped, or being
 *    submitted), and, while the task is not complete, one exactly while it
 *    is kNotified and not kRunning, or kRunning with kQueuedEntry
 *    (-DNO_EXACT_ENTRY leaves out this second part); a popped entry that
 *    finds the task idle finds it notified (the code's check);
 *  - never two polls at once: a claim (transition_to_running or
 *    transition_to_running_inline) finds no poll in progress;
 *  - no leak: at the end the cell was deallocated exactly once, every waker
 *    stored was dropped exactly once (and none was left for the cell's
 *    destructor), the output was dropped exactly once and before the free;
 *    the fast path never drops the last reference (the code's check); a
 *    cell never freed leaves init blocked, an invalid end state;
 *  - no lost wake-up: a wait that is not withdrawn blocks until its waker is
 *    woken; if the wake were lost it would block for ever, an invalid end
 *    state SPIN reports (likewise a task left notified with no entry: it is
 *    never polled again). The output is read only after kComplete.
 *
 * Found by the model: join_handle_register's take-back (R2) and the
 * assignment dropping a waker left from a withdrawn wait (R3, waker != 0) are
 * unreachable: a wait is withdrawn either before completion (the waker comes
 * back, kJoinWaker cleared) or after it, and then the next await sees
 * kComplete and takes the result without registering. They are defensive.
 * So are, here, join_inline's outcomes kFailed and kDealloc of an entry
 * taken back (J4, J5): a queued entry of a task that is not idle exists
 * only while the inline poll runs (rule 5), which is on the taking thread
 * itself, or after that poll completed the task, and then the join took the
 * output. complete()'s wake (T4) never runs on the JoinHandle side (an
 * inline poll runs before the wait's waker is published), and
 * transition_to_idle never drops the last reference (E4: the owned list
 * keeps its own until complete(); only a shutdown, not modelled, takes it
 * earlier).
 *
 * Negative controls (each must be rejected):
 *  -DEAGER_WITHDRAW  withdraw drops the waker even when the task completed
 *                    and still owns it (kJoinWaker set): the race the
 *                    ownership rule exists for; the task side then wakes a
 *                    dropped waker.
 *  -DEARLY_DEALLOC   complete() drops its references right after publishing
 *                    kComplete, before waking the join waiter (a deallocation
 *                    too early): the handle can take the result and free the
 *                    cell while the task side still owns the waker it is
 *                    about to wake (SPIN: the cell freed with a waker in it,
 *                    and then touched).
 *  -DFAST_DROP_ANY   the detached-drop fast path ignores kComplete: a handle
 *                    dropped after completion leaves its waker and the
 *                    output undropped (SPIN: the cell freed with both in it).
 *  -DINLINE_CONSUMES_NOTIFIED  the inline claim clears kNotified like an
 *                    ordinary poll although the entry stays queued: the poll
 *                    ends idle and not notified with the entry still queued,
 *                    and the leaf's wake then submits a second entry (SPIN:
 *                    two queue entries).
 *  -DPOP_KEEPS_QUEUED_ENTRY  a popped entry that finds the task polled inline
 *                    drops its reference but leaves kQueuedEntry: the inline
 *                    poll then ends idle and notified with no entry left, so
 *                    no wake submits one and nothing polls the task again
 *                    (SPIN: a wait blocks for ever, an invalid end state).
 *  -DIDLE_IGNORES_QUEUED_ENTRY  transition_to_idle has no kQueuedEntry case:
 *                    an inline poll ending with its entry still queued finds
 *                    kNotified (the entry's) and re-queues the task as if
 *                    woken (SPIN: two queue entries).
 * The three are run with -DNO_EXACT_ENTRY, so that SPIN has to find the
 * consequence (a second entry, a lost wake-up) rather than the state that
 * leads to it; without it, the exact form of rule 5 rejects the first two
 * already at the transition that breaks it (the third also breaks the
 * at-most-one part at once).
 *
 * Step-to-line mapping:
 *   I   include/volt/detail/task_state.hpp:88  static constexpr Word kInitial = 3 * kRefOne | kNotified | kJoinInterest;
 *   P0  src/runtime/scheduler/worker.cpp:152  poll_task(task);
 *   P1  src/task/harness.cpp:134  switch (task->state.transition_to_running()) {
 *   P1  include/volt/detail/task_state.hpp:123  if (!(Snapshot{cur}.is_idle())) {
 *   P1  include/volt/detail/task_state.hpp:127  Word next = (cur - kRefOne) & ~kQueuedEntry;
 *   P1  include/volt/detail/task_state.hpp:131  check(cur & kNotified, cur, 
 *   P1  include/volt/detail/task_state.hpp:133  return (cur | kRunning) & ~kNotified;
 *   P2  src/task/harness.cpp:144  task->vtable->dealloc(task);
 *   B   src/task/harness.cpp:154  task->resume.poll();
 *   B   src/task/harness.cpp:110  if (check && !check(context)) return false;
 *   B   include/volt/detail/task_header.hpp:196  task->state.ref_inc();
 *   E1  src/task/harness.cpp:160  if (task->root.done()) {
 *   E1  src/task/harness.cpp:162  complete(task, 1);
 *   E2  src/task/harness.cpp:165  switch (task->state.transition_to_idle()) {
 *   E2  include/volt/detail/task_state.hpp:148  if (cur & kQueuedEntry) {
 *   E2  include/volt/detail/task_state.hpp:152  next = (next & ~kQueuedEntry) - kRefOne;
 *   E2  include/volt/detail/task_state.hpp:154  } else if (cur & kNotified) {
 *   E2  include/volt/detail/task_state.hpp:158  next -= kRefOne;
 *   E3  src/task/harness.cpp:169  task->scheduler->schedule_yield(task);
 *   E4  src/task/harness.cpp:172  task->vtable->dealloc(task);
 *   L1  src/task/harness.cpp:46  static_cast<TaskHeader*>(data)->wake_by_val();
 *   L1  include/volt/detail/task_header.hpp:172  switch (state.transition_to_notified_by_val()) {
 *   L1  include/volt/detail/task_state.hpp:209  return (cur | kNotified) - kRefOne;
 *   L1  include/volt/detail/task_state.hpp:212  Word next = cur - kRefOne;
 *   L1  include/volt/detail/task_state.hpp:216  action = ToNotified::kSubmit;
 *   L2  include/volt/detail/task_header.hpp:174  scheduler->schedule(this);
 *   L3  include/volt/detail/task_header.hpp:177  vtable->dealloc(this);
 *   T1  src/task/harness.cpp:61  if (task->scheduler->release(task)) ++refs;
 *   T2  src/task/harness.cpp:62  TaskState::Snapshot snapshot = task->state.transition_to_complete();
 *   T2  include/volt/detail/task_state.hpp:186  Word prev = word_.fetch_xor(kRunning | kComplete, std::memory_order_acq_rel);
 *   T3  src/task/harness.cpp:65  task->vtable->drop_output(task);
 *   T4  src/task/harness.cpp:72  task->join_waker.wake_by_ref();
 *   T5  src/task/harness.cpp:75  if (!task->state.unset_waker_after_complete().is_join_interested()) task->join_waker.reset();
 *   T5  include/volt/detail/task_state.hpp:301  Word prev = word_.fetch_and(~kJoinWaker, std::memory_order_acq_rel);
 *   T7  src/task/harness.cpp:78  if (task->state.transition_to_terminal(refs)) task->vtable->dealloc(task);
 *   T7  include/volt/detail/task_state.hpp:197  Word prev = word_.fetch_sub(count * kRefOne, std::memory_order_acq_rel);
 *   A1  include/volt/task/join_handle.hpp:145  return handle_.is_finished() && detail::coop_try_consume();
 *   A1  include/volt/task/join_handle.hpp:148  if (!handle_.task_->state.load().is_complete()) {
 *   J0  include/volt/task/join_handle.hpp:151  if (detail::join_inline(handle_.task_)) return false;
 *   J1  src/task/harness.cpp:221  if (!ctx.current_task || ctx.scheduler != task->scheduler) return false;
 *   J1  src/task/harness.cpp:222  if (tls_inline_depth >= kMaxInlineDepth || ctx.budget <= 0) return false;
 *   J2  src/task/harness.cpp:226  if (task->scheduler->take_queued(task)) {
 *   J2  src/runtime/scheduler/worker.hpp:93  if (lifo_ == task) {
 *   J2  src/runtime/scheduler/worker.hpp:97  return queue_.pop_back_if(task);
 *   J3  src/task/harness.cpp:229  if (!start_poll(task)) {
 *   J4  src/task/harness.cpp:230  return task->state.load().is_complete();
 *   J5  src/task/harness.cpp:228  Step 1 cannot free the cell: the JoinHandle holds a reference.
 *   J6  src/task/harness.cpp:232  } else if (!task->state.transition_to_running_inline()) {
 *   J6  include/volt/detail/task_state.hpp:175  if ((cur & (kLifecycleMask | kNotified | kCancelled | kQueuedEntry)) != kNotified)
 *   J6  include/volt/detail/task_state.hpp:177  next = (cur | kRunning | kQueuedEntry) + kRefOne;
 *   J7  src/task/harness.cpp:239  task->resume.poll();
 *   J7  src/task/harness.cpp:242  end_poll(task);
 *   J8  src/task/harness.cpp:243  return task->state.load().is_complete();
 *   R1  src/task/harness.cpp:303  TaskState::Snapshot snapshot = task->state.load();
 *   R2  src/task/harness.cpp:306  if (!task->state.unset_join_waker()) return false;  // completed meanwhile
 *   R3  src/task/harness.cpp:308  task->join_waker = std::move(waker);  // drops any waker left from before
 *   R4  src/task/harness.cpp:309  if (task->state.set_join_waker()) return true;
 *   R4  include/volt/detail/task_state.hpp:279  if (cur & kComplete) return false;
 *   R5  src/task/harness.cpp:310  task->join_waker.reset();  // completed before we published: still ours
 *   W   include/volt/task/join_handle.hpp:172  return static_cast<detail::TaskHeader*>(task)->state.load().is_complete();
 *   D0  include/volt/task/join_handle.hpp:140  if (registered_) detail::join_handle_withdraw(handle_.task_);
 *   D1  src/task/harness.cpp:315  if (task->state.unset_join_waker()) {
 *   D1  include/volt/detail/task_state.hpp:290  if (cur & kComplete) return false;
 *   D2  src/task/harness.cpp:316  task->join_waker.reset();
 *   D3  src/task/harness.cpp:322  if (!task->state.load().is_join_waker_set()) task->join_waker.reset();
 *   O1  include/volt/task/join_handle.hpp:194  if (output.kind() == Kind::kException) std::rethrow_exception(output.take_exception());
 *   O1  include/volt/task/join_handle.hpp:195  return output.get();
 *   F1  src/task/harness.cpp:295  if (task->state.drop_join_handle_fast()) return;
 *   F1  include/volt/detail/task_state.hpp:338  if (cur & (kComplete | kJoinWaker)) return false;
 *   F1  include/volt/detail/task_state.hpp:339  next = (cur & ~kJoinInterest) - kRefOne;
 *   G1  src/task/harness.cpp:296  TaskState::JoinHandleDropped dropped = task->state.transition_to_join_handle_dropped();
 *   G2  src/task/harness.cpp:297  if (dropped.drop_output) task->vtable->drop_output(task);
 *   G3  src/task/harness.cpp:298  if (dropped.drop_waker) task->join_waker.reset();
 *   G4  src/task/harness.cpp:299  task->drop_reference();
 *   G4  include/volt/detail/task_header.hpp:188  if (state.ref_dec()) vtable->dealloc(this);
 *   X   include/volt/detail/task_cell.hpp:72  frame_deallocate(cell, sizeof(TaskCell));
 */

#ifndef WAITS
#define WAITS 2
#endif
#ifndef EVENTS
#define EVENTS 2
#endif

#define COMPLETE 1
#define INTEREST 2
#define JWAKER   4
#define RUNNING  8
#define NOTIFIED 16
#define QENTRY   32

/* Outcomes of a transition, as the code's enums. */
#define OK      0
#define FAILED  1
#define SUBMIT  2
#define DEALLOC 3

byte state = INTEREST | NOTIFIED;  /* I */
byte refs = 3;            /* I: queue entry, JoinHandle, owned list */
bool freed = false;
byte waker = 0;           /* join_waker: 0 empty, else the wait that stored it */
byte stored = 0;          /* wakers ever stored */
byte dropped = 0;         /* wakers ever dropped */
byte output_drops = 0;
bool woken[WAITS + 1];    /* woken[k]: the k-th wait's waker was woken */
bool jh_done = false;
bool leaf_done = false;
byte fired = 0;           /* the leaf's events so far */
byte consumed = 0;        /* events the frame has taken (EVENTS: it finishes) */

/* Ghosts: who holds the references (their sum must be refs). */
byte q = 1;               /* queue entries queued */
byte held = 0;            /* entries popped or taken back, before their transition_to_running */
byte pend = 0;            /* entries submitted (kNotified set, reference theirs), not yet pushed */
byte pr = 0;              /* references of running polls (2 once complete() took the list's) */
byte jh = 1;              /* the JoinHandle's */
byte own = 1;             /* the owned list's */
byte lw = 0;              /* the leaf's waker's, registered */
byte lt = 0;              /* the leaf's waker's, taken by an event to wake */
byte polling = 0;         /* polls claimed and not yet ended (idle or complete) */

#define alive() assert(!freed)

#define entries (q + held + pend)
#ifdef NO_EXACT_ENTRY
#define exact() skip
#else
/* rule 5: one entry exactly while kNotified and not kRunning, or kRunning
 * with kQueuedEntry (a complete task may still have one queued). */
#define exact() \
  assert((state & COMPLETE) || \
         ((entries == 1) == \
          ((((state & NOTIFIED) != 0) && !(state & RUNNING)) || \
           (((state & RUNNING) != 0) && ((state & QENTRY) != 0)))))
#endif
#define inv() \
  assert(refs == entries + pr + jh + own + lw + lt); \
  assert(entries <= 1); \
  exact()

inline drop_waker() {
  assert(waker != 0);
  waker = 0;
  dropped++
}

/* X: the cell's destructor and free. Nothing may be left for ~Waker, and
 * the output was dropped by the protocol before. */
inline dealloc() {
  assert(!freed);
  assert(waker == 0);
  assert(output_drops == 1);
  assert(refs == 0);
  freed = true
}

/* P1 / J3: transition_to_running, by whoever holds a popped or taken-back
 * entry (held). */
inline to_running() {
  atomic {
    alive(); held--;
    if
    :: !(state & (RUNNING | COMPLETE)) ->
         assert(state & NOTIFIED);            /* the code's check */
         state = (state | RUNNING) & ~NOTIFIED;
         pr++;                                /* the entry's reference is the poll's */
         assert(polling == 0); polling++;
         act = OK
    :: else ->                                /* polled inline, or complete */
#ifdef POP_KEEPS_QUEUED_ENTRY
         refs--;
#else
         refs--; state = state & ~QENTRY;
#endif
         if :: refs == 0 -> act = DEALLOC :: else -> act = FAILED fi
    fi;
    inv()
  }
}

/* B: the poll. The frame is resumed if its leaf's readiness check passes
 * (or it has not started) and takes the events that happened; it finishes
 * after EVENTS, else it (re)registers its waker with the leaf. A poll whose
 * readiness check fails, its waker registered, does nothing. */
inline poll_body() {
  atomic {
    alive(); assert(state & RUNNING); assert(polling == 1);
    consumed = fired;
    if
    :: consumed == EVENTS -> done = true
    :: else ->
         done = false;
         if :: lw == 0 -> refs++; lw++ :: else -> skip fi  /* make_task_waker */
    fi;
    inv()
  }
}

/* T1..T7: complete(task, 1). */
inline complete_poll() {
  atomic {                                                /* T1, T2 */
    alive(); assert(state & RUNNING);
    own--; pr++;                                          /* T1: the list's reference */
    prev = state; state = (state & ~RUNNING) | COMPLETE;
    polling--;
    inv()
  };
#ifdef EARLY_DEALLOC
  atomic { alive(); assert(refs >= 2); refs = refs - 2; pr = pr - 2; last = (refs == 0); inv() };
  if :: last -> dealloc() :: else -> skip fi;
#endif
  if
  :: !(prev & INTEREST) ->
       atomic { alive(); output_drops++ }                 /* T3 */
  :: (prev & INTEREST) && (prev & JWAKER) ->
       atomic {                                           /* T4 */
         alive(); assert(state & JWAKER); assert(waker != 0);
         woken[waker] = true
       };
       atomic { alive(); prev = state; state = state & ~JWAKER };  /* T5 */
       if
       :: !(prev & INTEREST) ->                           /* T5: the handle left it to us */
            atomic { alive(); drop_waker() }
       :: else -> skip
       fi
  :: else -> skip
  fi;
#ifndef EARLY_DEALLOC
  atomic {                                                /* T7 */
    alive(); assert(refs >= 2); refs = refs - 2; pr = pr - 2; last = (refs == 0); inv()
  };
  if :: last -> dealloc() :: else -> skip fi;
#endif
  skip
}

/* E1..E4: end_poll. */
inline end_poll() {
  if
  :: done -> complete_poll()                              /* E1 */
  :: else ->
       atomic {                                           /* E2: transition_to_idle */
         alive(); assert(state & RUNNING);
         polling--;
#ifdef IDLE_IGNORES_QUEUED_ENTRY
         if
         :: false -> skip
#else
         if
         :: state & QENTRY ->                             /* inline, entry still queued */
              state = state & ~(RUNNING | QENTRY);
              refs--; pr--;
              if :: refs == 0 -> act = DEALLOC :: else -> act = OK fi
#endif
         :: !(state & QENTRY) && (state & NOTIFIED) ->    /* woken: re-queue */
              state = state & ~RUNNING;
              pr--; pend++;
              act = SUBMIT
         :: !(state & QENTRY) && !(state & NOTIFIED) ->
              state = state & ~RUNNING;
              refs--; pr--;
              if :: refs == 0 -> act = DEALLOC :: else -> act = OK fi
#ifdef IDLE_IGNORES_QUEUED_ENTRY
         :: (state & QENTRY) && (state & NOTIFIED) ->     /* taken for a wake-up */
              state = state & ~RUNNING;
              pr--; pend++;
              act = SUBMIT
         :: (state & QENTRY) && !(state & NOTIFIED) ->
              state = state & ~RUNNING;
              refs--; pr--;
              if :: refs == 0 -> act = DEALLOC :: else -> act = OK fi
#endif
         fi;
         inv()
       };
       if
       :: act == SUBMIT -> atomic { alive(); pend--; q++; inv() }  /* E3 */
       :: act == DEALLOC -> dealloc()                     /* E4 */
       :: else -> skip
       fi
  fi
}

proctype Worker() {
  byte prev;
  bool last;
  bool done;
  byte act;
end:
  do
  :: atomic { q > 0 -> q--; held++; inv() };             /* P0: pop */
     to_running();                                        /* P1 */
     if
     :: act == OK -> poll_body(); end_poll()              /* B, E */
     :: act == DEALLOC -> dealloc()                       /* P2 */
     :: else -> skip
     fi
  od
}

/* The leaf's events: each takes the registered waker, if any, and wakes it
 * by value. */
proctype Leaf() {
  bool fire;
  byte act;
  do
  :: fired < EVENTS ->
       atomic {                                           /* an event */
         fired++; fire = (lw > 0);
         if :: fire -> lw--; lt++ :: else -> skip fi;
         inv()
       };
       if
       :: fire ->
            atomic {                                      /* L1 */
              alive(); lt--;
              if
              :: state & RUNNING ->
                   state = state | NOTIFIED; refs--; act = OK
              :: !(state & RUNNING) && (state & (COMPLETE | NOTIFIED)) ->
                   refs--;
                   if :: refs == 0 -> act = DEALLOC :: else -> act = OK fi
              :: else ->
                   state = state | NOTIFIED; pend++; act = SUBMIT
              fi;
              inv()
            };
            if
            :: act == SUBMIT -> atomic { alive(); pend--; q++; inv() }  /* L2 */
            :: act == DEALLOC -> dealloc()                /* L3 */
            :: else -> skip
            fi
       :: else -> skip
       fi
  :: else -> break
  od;
  leaf_done = true
}

proctype JoinHandle() {
  byte k = 0;             /* waits begun */
  byte cur;
  bool ok;
  bool withdraw;
  bool dout;
  bool dw;
  bool last;
  byte prev;
  bool done;
  byte act;
  do
  :: k < WAITS ->
       k++;
       atomic { alive(); cur = state };                   /* A1 */
       if :: cur & COMPLETE -> goto take :: else -> skip fi;
       /* J0: join_inline */
       if
       :: skip                                            /* J1: preconditions fail */
       :: if                                              /* J2: take_queued */
          :: atomic { q > 0 -> q--; held++; inv() };
             to_running();                                /* J3 */
             if
             :: act == FAILED ->
                  atomic { alive(); cur = state };        /* J4 */
                  if :: cur & COMPLETE -> goto take :: else -> goto wait fi
             :: act == DEALLOC -> assert(false)           /* J5 */
             :: else -> skip
             fi
          :: atomic {                                     /* J6: transition_to_running_inline */
               alive();
               if
               :: (state & (RUNNING | COMPLETE | NOTIFIED | QENTRY)) == NOTIFIED ->
#ifdef INLINE_CONSUMES_NOTIFIED
                    state = (state | RUNNING | QENTRY) & ~NOTIFIED;
#else
                    state = state | RUNNING | QENTRY;
#endif
                    refs++; pr++;
                    assert(polling == 0); polling++;
                    act = OK
               :: else -> act = FAILED
               fi;
               inv()
             };
             if :: act == FAILED -> goto wait :: else -> skip fi
          fi;
          poll_body();                                    /* J7 */
          end_poll();
          atomic { alive(); cur = state };                /* J8 */
          if :: cur & COMPLETE -> goto take :: else -> skip fi
       fi;
wait:
       /* join_handle_register */
       atomic { alive(); cur = state };                   /* R1 */
       if
       :: cur & JWAKER ->
            atomic {                                      /* R2 */
              alive();
              if
              :: !(state & COMPLETE) && (state & JWAKER) -> state = state & ~JWAKER; ok = true
              :: else -> ok = false
              fi
            };
            if :: !ok -> goto take :: else -> skip fi
       :: else -> skip
       fi;
       atomic {                                           /* R3 */
         alive(); assert(!(state & JWAKER));
         if :: waker != 0 -> drop_waker() :: else -> skip fi;
         waker = k; stored++
       };
       atomic {                                           /* R4 */
         alive(); assert(!(state & JWAKER));
         if
         :: !(state & COMPLETE) -> state = state | JWAKER; ok = true
         :: else -> ok = false
         fi
       };
       if
       :: !ok ->
            atomic { alive(); assert(!(state & JWAKER)); drop_waker() };  /* R5 */
            goto take
       :: else -> skip
       fi;
       /* Registered. Will the awaiting task be aborted during this wait? */
       if
       :: withdraw = false
       :: withdraw = true
       fi;
       if
       :: !withdraw ->
            woken[k];                                     /* suspended until woken */
            atomic { alive(); assert(state & COMPLETE) }; /* W */
            goto take
       :: else -> skip
       fi;
       /* D0: ~Awaiter -> join_handle_withdraw */
       atomic {                                           /* D1 */
         alive();
         if
         :: !(state & COMPLETE) && (state & JWAKER) -> state = state & ~JWAKER; ok = true
         :: else -> ok = false
         fi
       };
       if
       :: ok -> atomic { alive(); assert(!(state & JWAKER)); drop_waker() }  /* D2 */
       :: else ->
#ifdef EAGER_WITHDRAW
            atomic { alive(); if :: waker != 0 -> drop_waker() :: else -> skip fi }
#else
            atomic { alive(); cur = state };              /* D3: load */
            if
            :: !(cur & JWAKER) ->                         /* D3: reset */
                 atomic {
                   alive(); assert(!(state & JWAKER));
                   if :: waker != 0 -> drop_waker() :: else -> skip fi
                 }
            :: else -> skip                               /* the task side owns it */
            fi
#endif
       fi
       /* the handle stays usable: await again, or drop it */
  :: true -> goto drop                                    /* detach */
  od;
take:
  atomic { alive(); assert(state & COMPLETE) };           /* O1 */
drop:
  /* join_handle_drop */
  atomic {                                                /* F1 */
    alive();
#ifdef FAST_DROP_ANY
    if
    :: !(state & JWAKER) ->
#else
    if
    :: !(state & (COMPLETE | JWAKER)) ->
#endif
         state = state & ~INTEREST;
         assert(refs > 1);                                /* not the last reference */
         refs--; jh--;
         ok = true
    :: else -> ok = false
    fi;
    inv()
  };
  if :: ok -> goto done_ :: else -> skip fi;
  atomic {                                                /* G1 */
    alive();
    cur = state;
    state = state & ~INTEREST;
    if
    :: !(cur & COMPLETE) -> state = state & ~JWAKER; dout = false; dw = true
    :: else -> dout = true; dw = !(cur & JWAKER)
    fi
  };
  if :: dout -> atomic { alive(); output_drops++ } :: else -> skip fi;  /* G2 */
  if
  :: dw ->                                                /* G3 */
       atomic {
         alive(); assert(!(state & JWAKER));
         if :: waker != 0 -> drop_waker() :: else -> skip fi
       }
  :: else -> skip
  fi;
  atomic { alive(); assert(refs >= 1); refs--; jh--; last = (refs == 0); inv() };  /* G4 */
  if :: last -> dealloc() :: else -> skip fi;
done_:
  jh_done = true
}

init {
  atomic { run Worker(); run Leaf(); run JoinHandle() };
  (jh_done && leaf_done && freed);
  assert(refs == 0);
  assert(waker == 0);
  assert(stored == dropped);
  assert(output_drops == 1)
}
