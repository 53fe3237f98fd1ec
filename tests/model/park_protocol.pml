/*
 * SPIN model of the multi-thread scheduler's sleep/wake protocol: IdleSet
 * ("the last searcher must notify"), Worker::park / steal_work / run_task and
 * Parker, as implemented in
 *   src/runtime/scheduler/idle_set.cpp   (worker_to_notify, try_become_searcher,
 *                                         transition_from_searching,
 *                                         transition_to_parked, unpark_self)
 *   src/runtime/scheduler/worker.cpp     (next_task, steal_work, run_task, park)
 *   src/runtime/scheduler/parker.cpp     (park / unpark: kNotified token)
 *   src/runtime/scheduler/multi_thread.cpp (schedule_remote, has_pending_work)
 *
 * Property: no lost wake-up. Tasks arrive from outside (the Pusher: inject
 * queue) and from running tasks (spawns into the runner's local queue). A
 * sleeping worker may finish only when the pusher is done and every task
 * created so far has been run (then nothing can create more). If a run leaves
 * tasks queued while every worker sleeps, all processes block and SPIN
 * reports an invalid end state.
 *
 * Atomicity: each `atomic { }` block is one atomic instruction of the code (a
 * CAS, fetch_add, exchange or one queue operation under the queue's lock);
 * idle_lock is IdleSet::mutex_. SPIN's interleaving semantics is sequentially
 * consistent, which is what the seq_cst fences in worker_to_notify and
 * transition_to_parked provide for the Dekker handshake between a pusher
 * (push; fence; read state) and a parking last searcher (decrement; fence;
 * re-check queues).
 *
 * Negative control: -DNO_RECHECK removes the parking last searcher's re-check
 * (Worker::park: `if (transition_to_parked(...) && has_pending_work())
 * notify_parked()`); SPIN must then find the lost wake-up.
 */

#ifndef N
#define N 2
#endif
#ifndef PUSHES
#define PUSHES 2
#endif
#ifndef SPAWNS
#define SPAWNS 1
#endif

byte inject = 0;            /* InjectQueue length */
byte lq[N];              /* StealQueue + LIFO slot of each worker */
byte searching = 0;         /* IdleSet state: num_searching */
byte unparked = N;          /* IdleSet state: num_unparked */
bool parked[N];             /* IdleSet::parked_ bitmap */
bool notified[N];           /* Parker state == kNotified */
bool idle_lock = false;     /* IdleSet::mutex_ */
byte spawns_left = SPAWNS;
bool pusher_done = false;
byte consumed = 0;
byte created = 0;            /* tasks pushed or spawned so far */

inline lock() { atomic { !idle_lock -> idle_lock = true } }
inline unlock() { idle_lock = false }

/* IdleSet::worker_to_notify, then Parker::unpark on the claimed worker. */
inline notify_parked() {
  if
  :: (searching == 0 && unparked < N) ->        /* fence; state_.load */
       lock();
       if
       :: (searching == 0 && unparked < N) ->   /* re-check under the lock */
            w = 0;
            do                                  /* countr_zero of the bitmap */
            :: (w < N && !parked[w]) -> w++
            :: (w == N || parked[w]) -> break
            od;
            if
            :: (w < N) ->
                 atomic { searching++; unparked++ };  /* fetch_add */
                 parked[w] = false;                  /* release store of the bitmap */
                 unlock();
                 notified[w] = true                  /* Parker::unpark: exchange(kNotified) */
            :: else -> unlock()
            fi
       :: else -> unlock()
       fi
  :: else -> skip
  fi
}

proctype Pusher() {
  byte w;
  byte i = 0;
  do
  :: (i < PUSHES) ->
       atomic { inject++; created++ }   /* InjectQueue::push */
       notify_parked();     /* schedule_remote */
       i++
  :: (i == PUSHES) -> break
  od;
  pusher_done = true
}

proctype Worker(byte me) {
  bool is_searching = false;
  bool was_last;
  bool got;
  byte w;
  byte v;

next_task:
  got = false;
  /* next_task: own LIFO/local queue, then an inject batch */
  atomic { if :: (lq[me] > 0) -> lq[me]--; got = true :: else -> skip fi };
  if
  :: (!got) -> atomic { if :: (inject > 0) -> inject--; got = true :: else -> skip fi }
  :: else -> skip
  fi;
  if :: got -> goto run_task :: else -> skip fi;

  /* steal_work: become a searcher (at most half of the workers) */
  if
  :: (!is_searching) ->
       atomic { if :: (2 * searching < N) -> searching++; is_searching = true :: else -> skip fi }
  :: else -> skip
  fi;
  if
  :: is_searching ->
       v = 0;
       do
       :: (v < N) ->
            atomic { if :: (v != me && lq[v] > 0) -> lq[v]--; got = true :: else -> skip fi };
            if :: got -> break :: else -> v++ fi
       :: (v == N) -> break
       od;
       /* one more look at the inject queue */
       if
       :: (!got) -> atomic { if :: (inject > 0) -> inject--; got = true :: else -> skip fi }
       :: else -> skip
       fi
  :: else -> skip
  fi;
  if :: got -> goto run_task :: else -> goto park fi;

run_task:
  if
  :: is_searching ->                      /* transition_from_searching */
       is_searching = false;
       atomic { was_last = (searching == 1); searching-- };
       if :: was_last -> notify_parked() :: else -> skip fi
  :: else -> skip
  fi;
  atomic { consumed++ };
  /* the task may spawn another into this worker's queue (schedule_local) */
  if
  :: atomic { (spawns_left > 0) -> spawns_left--; lq[me]++; created++ }; notify_parked()
  :: skip
  fi;
  goto next_task;

park:
  /* IdleSet::transition_to_parked */
  lock();
  atomic {
    was_last = (is_searching && searching == 1);
    unparked--;
    if :: is_searching -> searching-- :: else -> skip fi
  };
  parked[me] = true;
  unlock();
  is_searching = false;
#ifndef NO_RECHECK
  /* the last searcher re-checks every queue (has_pending_work) */
  if
  :: was_last ->
       v = 0; got = false;
       do
       :: (v < N) -> if :: (lq[v] > 0) -> got = true :: else -> skip fi; v++
       :: (v == N) -> break
       od;
       if :: (got || inject > 0) -> notify_parked() :: else -> skip fi
  :: else -> skip
  fi;
#endif

sleep:
  /* Parker::park: consume kNotified, or finish when all work is done */
  if
  :: atomic { notified[me] -> notified[me] = false }
  :: (pusher_done && consumed == created) -> goto finished
  fi;
  if
  :: (!parked[me]) -> is_searching = true; goto next_task   /* claimed by a waker */
  :: else ->
       /* woken without a claim (the driver saw events): work of our own? */
       if
       :: (inject > 0) ->
            lock();                                       /* unpark_self */
            if
            :: parked[me] -> atomic { unparked++ }; parked[me] = false; is_searching = false
            :: else -> is_searching = true
            fi;
            unlock();
            goto next_task
       :: else -> goto sleep
       fi
  fi;

finished:
  skip
}

init {
  byte i;
  atomic {
    i = 0;
    do
    :: (i < N) -> run Worker(i); i++
    :: (i == N) -> break
    od;
    run Pusher()
  }
}
