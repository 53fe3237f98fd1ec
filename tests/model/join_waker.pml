/*
 * SPIN model of the join-waker handshake between a completing task and its
 * JoinHandle (rule 3 of include/volt/detail/task_state.hpp), as implemented in
 *   src/task/harness.cpp: complete()               (task side)
 *                         join_handle_register()    (JoinHandle side)
 *                         join_handle_withdraw()    (awaiter destroyed while waiting)
 *                         join_handle_drop()        (handle destroyed / result taken)
 *   include/volt/detail/task_state.hpp: the transitions each of those makes.
 *
 * Each `atomic { }` block is one atomic RMW (CAS loop or fetch_*) on the state
 * word; `waker` models the TaskHeader::join_waker field (plain memory).
 *
 * Checked:
 *  - the completing side reads the waker only while it is set (no use of a
 *    waker the JoinHandle side already dropped: a use-after-free in the code);
 *  - every waker stored is dropped exactly once (no leak, no double drop);
 *  - the output is dropped exactly once;
 *  - a registered waiter that does not withdraw is woken.
 * The JoinHandle side nondeterministically registers or not, then either
 * waits for completion and takes the result, or withdraws (its awaiting task
 * was aborted), and finally drops the handle.
 *
 * Negative control -DEAGER_WITHDRAW: withdraw drops the waker even when the
 * task completed and still owns it (kJoinWaker set) - the race the ownership
 * rule exists for; SPIN must find the waker read after it was dropped.
 */

#define COMPLETE 1
#define INTEREST 2
#define JWAKER   4

byte state = INTEREST;
bool waker = false;       /* join_waker holds a waker */
byte stored = 0;          /* wakers ever stored */
byte dropped = 0;         /* wakers ever dropped */
byte output_drops = 0;
bool woken = false;
bool registered = false;
bool withdrew = false;
bool jh_done = false;
bool task_done = false;

inline drop_waker() {
  assert(waker);
  waker = false;
  dropped++
}

proctype Task() {
  byte prev;
  atomic { prev = state; state = state | COMPLETE };        /* transition_to_complete */
  if
  :: !(prev & INTEREST) -> output_drops++                    /* drop_output */
  :: (prev & INTEREST) && (prev & JWAKER) ->
       assert(waker);                                        /* join_waker.wake_by_ref() */
       woken = true;
       atomic { prev = state; state = state & ~JWAKER };     /* unset_waker_after_complete */
       if
       :: !(prev & INTEREST) -> drop_waker()                 /* handle gone: ours */
       :: else -> skip
       fi
  :: else -> skip
  fi;
  task_done = true
}

proctype JoinHandle() {
  byte cur;
  bool drop_output;
  bool drop_w;
  /* join_handle_register (optional) */
  if
  :: true ->
       waker = true; stored++;                               /* task->join_waker = waker */
       atomic {
         if
         :: !(state & COMPLETE) -> state = state | JWAKER; registered = true   /* set_join_waker */
         :: else -> skip
         fi
       };
       if
       :: !registered -> drop_waker()                        /* completed first: still ours */
       :: else -> skip
       fi
  :: true -> skip
  fi;
  /* wait for completion, or withdraw (the awaiting task was aborted) */
  if
  :: registered -> (state & COMPLETE)                        /* resumed after the wake */
  :: registered ->
       withdrew = true;
       atomic {                                              /* unset_join_waker */
         if
         :: !(state & COMPLETE) && (state & JWAKER) -> state = state & ~JWAKER; cur = 1
         :: else -> cur = 0
         fi
       };
       if
       :: cur == 1 -> drop_waker()
#ifdef EAGER_WITHDRAW
       :: cur == 0 -> if :: waker -> drop_waker() :: else -> skip fi
#else
       :: cur == 0 && !(state & JWAKER) -> if :: waker -> drop_waker() :: else -> skip fi
       :: cur == 0 && (state & JWAKER) -> skip               /* the task side owns it */
#endif
       fi
  :: !registered -> skip
  fi;
  /* join_handle_drop: transition_to_join_handle_dropped */
  atomic {
    cur = state;
    state = state & ~INTEREST;
    if
    :: !(cur & COMPLETE) -> state = state & ~JWAKER; drop_output = false; drop_w = true
    :: else -> drop_output = true; drop_w = !(cur & JWAKER)
    fi
  };
  if :: drop_output -> output_drops++ :: else -> skip fi;
  if :: drop_w && waker -> drop_waker() :: else -> skip fi;
  jh_done = true
}

init {
  atomic { run Task(); run JoinHandle() };
  (task_done && jh_done);
  assert(!waker);
  assert(stored == dropped);
  assert(output_drops == 1);
  assert(!registered || withdrew || woken)
}
