/*
 * SPIN model of a spawned task's completion against its JoinHandle: the
 * join-waker handshake (rule 3 of include/volt/detail/task_state.hpp), waits
 * withdrawn by an aborted awaiter and registered again, the detached drop's
 * fast path, and the reference count up to the cell's deallocation, as
 * implemented in
 *   src/task/harness.cpp          complete()              (task side)
 *                                 join_handle_register()  (a wait begins)
 *                                 join_handle_withdraw()  (awaiter destroyed while waiting)
 *                                 join_handle_drop()      (handle destroyed / result taken)
 *   include/volt/task/join_handle.hpp   Awaiter (await_suspend, ~Awaiter), take()
 *   include/volt/detail/task_state.hpp  the transitions each of those makes
 *   include/volt/detail/task_cell.hpp   dealloc (the cell's destructor, the free)
 *
 * Each `atomic { }` block is one atomic RMW (CAS loop or fetch_*) or load of
 * the state word, or one plain access to the cell (join_waker, the output),
 * with the ghost updates that describe it; SPIN interleaves them sequentially
 * consistently (memory orders are not modelled). `waker` is the TaskHeader::
 * join_waker field: 0 empty, k the waker of the JoinHandle's k-th wait.
 * `refs` is the word's reference count: 3 at spawn (the queue entry the
 * completing poll consumes, the JoinHandle, the owned-tasks list).
 *
 * The task side is one poll that completes the task (complete(task, 1)
 * after the owned list let go of it). The JoinHandle side awaits up to WAITS
 * times (default 2); each wait nondeterministically either runs to its
 * wake-up or is withdrawn (its awaiting task aborted at any point: the
 * withdrawal interleaves with every step of the task side), after which the
 * handle may be awaited again (a new waker) or dropped. It may also be dropped
 * without awaiting (detached: the fast path when it applies).
 *
 * Checked:
 *  - no use after free: every access to the cell (state word, join_waker,
 *    output) asserts the cell is not yet deallocated;
 *  - join_waker is touched only by its owner (rule 3): the JoinHandle side
 *    while kJoinWaker is clear, the task side while it is set (or after
 *    clearing it with the handle gone); the task side's wake finds a waker;
 *  - no leak: at the end the cell was deallocated exactly once, every waker
 *    stored was dropped exactly once (and none was left for the cell's
 *    destructor), the output was dropped exactly once and before the free;
 *    the fast path never drops the last reference (the code's check);
 *  - no lost wake-up: a wait that is not withdrawn blocks until its waker is
 *    woken; if the wake were lost it would block for ever, an invalid end
 *    state SPIN reports. The output is read only after kComplete.
 *
 * Found by the model: join_handle_register's take-back (R2) and the
 * assignment dropping a waker left from a withdrawn wait (R3, waker != 0) are
 * unreachable: a wait is withdrawn either before completion (the waker comes
 * back, kJoinWaker cleared) or after it, and then the next await sees
 * kComplete and takes the result without registering. They are defensive.
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
 *
 * Step-to-line mapping:
 *   T1  src/task/harness.cpp:52  if (task->scheduler->release(task)) ++refs;
 *   T2  src/task/harness.cpp:53  TaskState::Snapshot snapshot = task->state.transition_to_complete();
 *   T2  include/volt/detail/task_state.hpp:138  Word prev = word_.fetch_xor(kRunning | kComplete, std::memory_order_acq_rel);
 *   T3  src/task/harness.cpp:56  task->vtable->drop_output(task);
 *   T4  src/task/harness.cpp:58  task->join_waker.wake_by_ref();
 *   T5  src/task/harness.cpp:61  if (!task->state.unset_waker_after_complete().is_join_interested()) task->join_waker.reset();
 *   T5  include/volt/detail/task_state.hpp:253  Word prev = word_.fetch_and(~kJoinWaker, std::memory_order_acq_rel);
 *   T7  src/task/harness.cpp:63  if (task->state.transition_to_terminal(refs)) task->vtable->dealloc(task);
 *   T7  include/volt/detail/task_state.hpp:149  Word prev = word_.fetch_sub(count * kRefOne, std::memory_order_acq_rel);
 *   A1  include/volt/task/join_handle.hpp:120  return handle_.is_finished() && detail::coop_try_consume();
 *   A1  include/volt/task/join_handle.hpp:123  if (!handle_.task_->state.load().is_complete()) {
 *   R1  src/task/harness.cpp:208  TaskState::Snapshot snapshot = task->state.load();
 *   R2  src/task/harness.cpp:211  if (!task->state.unset_join_waker()) return false;  // completed meanwhile
 *   R3  src/task/harness.cpp:213  task->join_waker = std::move(waker);  // drops any waker left from before
 *   R4  src/task/harness.cpp:214  if (task->state.set_join_waker()) return true;
 *   R4  include/volt/detail/task_state.hpp:231  if (cur & kComplete) return false;
 *   R5  src/task/harness.cpp:215  task->join_waker.reset();  // completed before we published: still ours
 *   W   include/volt/task/join_handle.hpp:144  return static_cast<detail::TaskHeader*>(task)->state.load().is_complete();
 *   D0  include/volt/task/join_handle.hpp:115  if (registered_) detail::join_handle_withdraw(handle_.task_);
 *   D1  src/task/harness.cpp:220  if (task->state.unset_join_waker()) {
 *   D1  include/volt/detail/task_state.hpp:242  if (cur & kComplete) return false;
 *   D2  src/task/harness.cpp:221  task->join_waker.reset();
 *   D3  src/task/harness.cpp:227  if (!task->state.load().is_join_waker_set()) task->join_waker.reset();
 *   O1  include/volt/task/join_handle.hpp:166  if (output.kind() == Kind::kException) std::rethrow_exception(output.take_exception());
 *   O1  include/volt/task/join_handle.hpp:167  return output.get();
 *   F1  src/task/harness.cpp:200  if (task->state.drop_join_handle_fast()) return;
 *   F1  include/volt/detail/task_state.hpp:290  if (cur & (kComplete | kJoinWaker)) return false;
 *   F1  include/volt/detail/task_state.hpp:291  next = (cur & ~kJoinInterest) - kRefOne;
 *   G1  src/task/harness.cpp:201  TaskState::JoinHandleDropped dropped = task->state.transition_to_join_handle_dropped();
 *   G2  src/task/harness.cpp:202  if (dropped.drop_output) task->vtable->drop_output(task);
 *   G3  src/task/harness.cpp:203  if (dropped.drop_waker) task->join_waker.reset();
 *   G4  src/task/harness.cpp:204  task->drop_reference();
 *   G4  include/volt/detail/task_header.hpp:156  if (state.ref_dec()) vtable->dealloc(this);
 *   X   include/volt/detail/task_cell.hpp:72  frame_deallocate(cell, sizeof(TaskCell));
 *   I   include/volt/detail/task_state.hpp:64  static constexpr Word kInitial = 3 * kRefOne | kNotified | kJoinInterest;
 */

#ifndef WAITS
#define WAITS 2
#endif

#define COMPLETE 1
#define INTEREST 2
#define JWAKER   4

byte state = INTEREST;
byte refs = 3;            /* I: queue entry (the poll), JoinHandle, owned list */
bool freed = false;
byte waker = 0;           /* join_waker: 0 empty, else the wait that stored it */
byte stored = 0;          /* wakers ever stored */
byte dropped = 0;         /* wakers ever dropped */
byte output_drops = 0;
bool woken[WAITS + 1];    /* woken[k]: the k-th wait's waker was woken */
bool jh_done = false;
bool task_done = false;

#define alive() assert(!freed)

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
  freed = true
}

proctype Task() {
  byte prev;
  bool last;
  /* T1: the owned list lets go of the task: complete() drops 2 references. */
  atomic { alive(); prev = state; state = state | COMPLETE };   /* T2 */
#ifdef EARLY_DEALLOC
  atomic { alive(); assert(refs >= 2); refs = refs - 2; last = (refs == 0) };
  if :: last -> dealloc() :: else -> skip fi;
#endif
  if
  :: !(prev & INTEREST) ->
       atomic { alive(); output_drops++ }                       /* T3 */
  :: (prev & INTEREST) && (prev & JWAKER) ->
       atomic {                                                 /* T4 */
         alive(); assert(state & JWAKER); assert(waker != 0);
         woken[waker] = true
       };
       atomic { alive(); prev = state; state = state & ~JWAKER };  /* T5 */
       if
       :: !(prev & INTEREST) ->                                 /* T5: the handle left it to us */
            atomic { alive(); drop_waker() }
       :: else -> skip
       fi
  :: else -> skip
  fi;
#ifndef EARLY_DEALLOC
  atomic { alive(); assert(refs >= 2); refs = refs - 2; last = (refs == 0) };  /* T7 */
  if :: last -> dealloc() :: else -> skip fi;
#endif
  task_done = true
}

proctype JoinHandle() {
  byte k = 0;             /* waits begun */
  byte cur;
  bool ok;
  bool withdraw;
  bool dout;
  bool dw;
  bool last;
  do
  :: k < WAITS ->
       k++;
       atomic { alive(); cur = state };                         /* A1 */
       if :: cur & COMPLETE -> goto take :: else -> skip fi;
       /* join_handle_register */
       atomic { alive(); cur = state };                         /* R1 */
       if
       :: cur & JWAKER ->
            atomic {                                            /* R2 */
              alive();
              if
              :: !(state & COMPLETE) && (state & JWAKER) -> state = state & ~JWAKER; ok = true
              :: else -> ok = false
              fi
            };
            if :: !ok -> goto take :: else -> skip fi
       :: else -> skip
       fi;
       atomic {                                                 /* R3 */
         alive(); assert(!(state & JWAKER));
         if :: waker != 0 -> drop_waker() :: else -> skip fi;
         waker = k; stored++
       };
       atomic {                                                 /* R4 */
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
            woken[k];                                           /* suspended until woken */
            atomic { alive(); assert(state & COMPLETE) };       /* W */
            goto take
       :: else -> skip
       fi;
       /* D0: ~Awaiter -> join_handle_withdraw */
       atomic {                                                 /* D1 */
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
            atomic { alive(); cur = state };                    /* D3: load */
            if
            :: !(cur & JWAKER) ->                               /* D3: reset */
                 atomic {
                   alive(); assert(!(state & JWAKER));
                   if :: waker != 0 -> drop_waker() :: else -> skip fi
                 }
            :: else -> skip                                     /* the task side owns it */
            fi
#endif
       fi
       /* the handle stays usable: await again, or drop it */
  :: true -> goto drop                                          /* detach */
  od;
take:
  atomic { alive(); assert(state & COMPLETE) };                 /* O1 */
drop:
  /* join_handle_drop */
  atomic {                                                      /* F1 */
    alive();
#ifdef FAST_DROP_ANY
    if
    :: !(state & JWAKER) ->
#else
    if
    :: !(state & (COMPLETE | JWAKER)) ->
#endif
         state = state & ~INTEREST;
         assert(refs > 1);                                      /* not the last reference */
         refs--;
         ok = true
    :: else -> ok = false
    fi
  };
  if :: ok -> goto done :: else -> skip fi;
  atomic {                                                      /* G1 */
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
  :: dw ->                                                      /* G3 */
       atomic {
         alive(); assert(!(state & JWAKER));
         if :: waker != 0 -> drop_waker() :: else -> skip fi
       }
  :: else -> skip
  fi;
  atomic { alive(); assert(refs >= 1); refs--; last = (refs == 0) };  /* G4 */
  if :: last -> dealloc() :: else -> skip fi;
done:
  jh_done = true
}

init {
  atomic { run Task(); run JoinHandle() };
  (task_done && jh_done);
  assert(freed);
  assert(refs == 0);
  assert(waker == 0);
  assert(stored == dropped);
  assert(output_drops == 1)
}
