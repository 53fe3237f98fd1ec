/*
 * SPIN model of the multi-thread scheduler's sleep/wake protocol with the I/O
 * driver: IdleSet ("the last searcher must notify"), Worker::run / next_task /
 * steal_work / run_task / poll_driver / park, Parker (its four states, the
 * driver try-lock, the standby of "An unattended driver"), Driver::release's
 * hand-off and MultiThreadScheduler::hand_off_driver, as implemented in
 *   src/runtime/scheduler/idle_set.cpp     (worker_to_notify,
 *                                           try_become_searcher,
 *                                           transition_from_searching,
 *                                           transition_to_parked, unpark_self)
 *   src/runtime/scheduler/worker.cpp       (run, schedule_local, next_task,
 *                                           steal_work, run_task, poll_driver,
 *                                           park)
 *   src/runtime/scheduler/parker.cpp       (park, park_on_futex with the
 *                                           standby, park_on_driver, unpark)
 *   src/runtime/scheduler/multi_thread.cpp (schedule_remote, notify_parked,
 *                                           hand_off_driver, has_pending_work)
 *   src/io/driver.hpp, driver.cpp          (try_acquire, release, turns,
 *                                           held, claim_standby,
 *                                           give_up_standby, park, unpark)
 *   src/time/time_driver.cpp               (on_release: release's store)
 * I/O sources are registered throughout (has_io_sources() is true: the
 * standby and the hand-off exist only then; it counts sockets and, since the
 * file engine, io_uring operations in flight, whose completion is one more
 * readiness event to the driver: the same protocol). Timers are not modelled
 * (TimeDriver::on_release is false; it is where Driver::release stores
 * held_ false, inside the timer lock, which no step here takes), nor
 * shutdown, block_on helpers, the maintenance poll every 128 polls, the LIFO
 * poll cap (3: never reached with these few tasks) or queue overflow. Nor one worker alone: there
 * schedule_local's notification (notify_parked_from_worker) skips the idle
 * set, since the only worker is the caller and awake, and runs its own
 * queue before it parks; with the model's two workers the call is
 * notify_parked() itself.
 *
 * Work: the Pusher pushes PUSHES tasks into the inject queue
 * (schedule_remote); a running task may spawn (SPAWNS in all) into its
 * worker's LIFO slot (schedule_local, not a yield): the task it displaces
 * goes to the local queue and only then is somebody notified. The LIFO slot
 * is not stealable (has_pending_work does not see it). Inject batches take
 * the whole inject queue (kMinInjectBatch = 4 >= PUSHES): one task runs, the
 * rest go to the local queue. A steal takes half of the victim's queue,
 * rounded up: one runs, the rest go to the thief's queue.
 *
 * I/O: the Net process makes two readiness events arrive (ready in epoll).
 * Event 0 wakes task A, event 1 task B. The holder of the driver dispatches
 * them in a turn (Driver::park: epoll_wait, then turns_ store, then the
 * wakes); a woken task goes to the back of the holder's own local queue and
 * nobody is notified (schedule_local with in_driver_). The holder's blocking
 * wait (park(true)) returns on an event or a Driver::unpark (the eventfd
 * edge, drv_wake). A is the long task: its poll does not return until event
 * 1 has been dispatched (the test's 400 ms computation, during which data
 * arrives for B). Whether the worker that runs A ever sees event 1
 * dispatched depends on the other worker alone, so a run where the event
 * waits in epoll while the other worker sleeps is a deadlock. The order of
 * tasks within a local queue is not tracked: A is popped or stolen whenever
 * it is in the queue (a superset of the FIFO order).
 *
 * The standby (Parker::park_on_futex): a futex sleeper claims the role; its
 * timed wait may time out at any point (a nondeterministic step, the
 * kStandbyCheckNs timeout); a look compares turns with its previous look
 * (turned[me]: a turn was taken since), then reads held: held with no turn
 * counts a quiet look, and QUIET quiet looks (kStandbyQuietChecks = 2,
 * abstracted) give up the role; released with no turn takes the driver
 * over (CAS kParkedFutex -> kEmpty, give_up_standby, try_acquire,
 * park_on_driver, release).
 *
 * Property: no stall. A sleeping worker (futex or driver) may finish only
 * when the pusher is done, both events have been dispatched and every task
 * made runnable so far has run (then nothing can create more). A lost
 * wake-up (tasks queued while every worker sleeps) and an undispatched event
 * while the long task runs and the other worker sleeps both leave every
 * process blocked: SPIN reports an invalid end state. The standby's timed
 * look is always enabled, so a standby never blocks; it stops only after
 * QUIET quiet looks, and the stall is then caught in the state after it.
 *
 * Atomicity: each `atomic { }` block is one atomic instruction of the code (a
 * CAS, fetch_add, exchange or one queue operation); idle_lock is
 * IdleSet::mutex_. SPIN's interleaving semantics is sequentially consistent,
 * which is what the seq_cst fences in worker_to_notify and
 * transition_to_parked provide for the Dekker handshake between a pusher
 * (push; fence; read state) and a parking last searcher (decrement; fence;
 * re-check queues). The relaxed loads of turns_ and held_ by the standby and
 * the acquire load of standby_ in release() are modelled as SC loads: each
 * is a separate step.
 *
 * Configurations (tests/CMakeLists.txt registers the ones marked *):
 *   default           the code, with the long task (PUSHES=0).
 *                     * fix_give_up.verified
 *   -DNO_GIVE_UP_RECHECK  the standby as first written (ca93a1c): no look
 *                     at held_ after giving up, and a standby woken for work
 *                     hands nothing off. VIOLATED (* give_up_race.violated):
 *                     the standby reads held_ true (its last quiet look);
 *                     the holder then stores held_ false and reads standby_
 *                     still set (no hand-off) and runs A; the standby gives
 *                     up and sleeps without timeout. Event 1 waits in epoll
 *                     until the holder comes back. Found with QUIET=1 and
 *                     QUIET=2: only the last quiet look matters, so any
 *                     count has it too. The fix: after giving up, look at
 *                     held_ again and stay the standby if the driver was
 *                     released (seq_cst on both sides, the Dekker pair of
 *                     release()).
 *   -DNO_STANDBY      the code before ca93a1c: no standby, release() never
 *                     asks for a hand-off without timers. SPIN must find the
 *                     unattended driver: A runs on the worker that
 *                     dispatched it, event 1 waits in epoll, the other
 *                     worker sleeps on its futex. * no_standby.violated
 *   -DNO_IO           no event arrives (sources registered but idle: the
 *                     driver, hand-off and standby still run): the
 *                     no-lost-wake-up property with pushes and spawns.
 *                     * verified (-DPUSHES=2), more_tasks.verified
 *                     (-DPUSHES=2 -DSPAWNS=2)
 *   -DNO_RECHECK      removes the parking last searcher's re-check
 *                     (Worker::park: transition_to_parked && has_pending_work
 *                     then notify_parked); SPIN must find the lost wake-up.
 *                     * no_recheck.violated (-DNO_IO -DPUSHES=2)
 *   -DNO_LONG         A is an ordinary task.
 *   -DNO_FAIR         next_task without the inject-first fairness branch.
 *   -DPUSHES=n -DSPAWNS=n -DQUIET=n  sizes (n <= 4 pushes).
 * The I/O events together with pushes (e.g. -DPUSHES=1) verify
 * too but take 50-90 million states (80-155 s): not registered.
 *
 * A worker process here is a Worker object and its loop, not an OS thread:
 * block_in_place (MultiThreadScheduler::hand_off_worker) moves the loop to
 * a fresh thread between two polls (after run_task_call, before the next
 * step), and the old thread touches none of the worker state again, so every
 * step of the protocol still runs in one sequence per worker.
 *
 * Step-to-line mapping:
 *   push_inject          src/runtime/scheduler/multi_thread.cpp:143  if (!inject_.push(task)) {
 *   remote_notify        src/runtime/scheduler/multi_thread.cpp:147  notify_parked();
 *   notify_to_notify     src/runtime/scheduler/multi_thread.cpp:153  if (auto index = idle_.worker_to_notify()) {
 *   notify_unpark        src/runtime/scheduler/multi_thread.cpp:154  workers_[*index]->parker().unpark(driver_);
 *   should_notify        src/runtime/scheduler/idle_set.cpp:19  if (!should_notify(state_.load(std::memory_order_relaxed))) return std::nullopt;
 *   should_notify_lock   src/runtime/scheduler/idle_set.cpp:23  if (!should_notify(state_.load(std::memory_order_seq_cst))) return std::nullopt;
 *   claim_count          src/runtime/scheduler/idle_set.cpp:30  state_.fetch_add(kSearchingOne + kUnparkedOne, std::memory_order_seq_cst);
 *   claim_bit            src/runtime/scheduler/idle_set.cpp:33  parked_[w].store(bits & ~(std::uint64_t{1} << bit)
 *   become_searcher      src/runtime/scheduler/idle_set.cpp:44  if (state_.compare_exchange_weak(s, s + kSearchingOne
 *   from_searching       src/runtime/scheduler/idle_set.cpp:50  state_.fetch_sub(kSearchingOne, std::memory_order_seq_cst);
 *   to_parked_dec        src/runtime/scheduler/idle_set.cpp:57  std::uint64_t prev = state_.fetch_sub(dec, std::memory_order_seq_cst);
 *   to_parked_bit        src/runtime/scheduler/idle_set.cpp:59  word.store(word.load(std::memory_order_relaxed) | (std::uint64_t{1}
 *   unpark_self          src/runtime/scheduler/idle_set.cpp:73  state_.fetch_add(kUnparkedOne, std::memory_order_seq_cst);
 *   run_next_task        src/runtime/scheduler/worker.cpp:38  TaskHeader* task = next_task();
 *   run_poll_driver      src/runtime/scheduler/worker.cpp:41  if (!task && scheduler_.driver().has_io_sources() && poll_driver()) task = next_task();
 *   run_steal            src/runtime/scheduler/worker.cpp:42  if (!task) task = steal_work();
 *   run_task_call        src/runtime/scheduler/worker.cpp:44  if (!run_task(task)) {
 *   park                 src/runtime/scheduler/worker.cpp:192  void Worker::park() noexcept {
 *   local_in_driver      src/runtime/scheduler/worker.cpp:60  if (queue_.push_back_or_overflow(task, scheduler_.inject())) overflows_.add();
 *   local_lifo           src/runtime/scheduler/worker.cpp:68  TaskHeader* previous = std::exchange(lifo_, task);
 *   local_displaced      src/runtime/scheduler/worker.cpp:70  if (previous && queue_.push_back_or_overflow(previous
 *   local_notify         src/runtime/scheduler/worker.cpp:73  if (notify) scheduler_.notify_parked_from_worker();
 *   next_fair_inject     src/runtime/scheduler/worker.cpp:78  if (tick_ % global_interval_ == 0) {
 *   next_lifo            src/runtime/scheduler/worker.cpp:89  return std::exchange(lifo_, nullptr);
 *   next_local           src/runtime/scheduler/worker.cpp:96  if (TaskHeader* task = queue_.pop()) return task;
 *   inject_batch         src/runtime/scheduler/worker.cpp:108  TaskHeader* first = inject.pop_batch(n, &popped);
 *   steal_searcher       src/runtime/scheduler/worker.cpp:124  if (!idle.try_become_searcher()) return nullptr;
 *   steal_half           src/runtime/scheduler/worker.cpp:134  workers[victim]->queue_.steal_into(queue_, &stolen)
 *   steal_inject         src/runtime/scheduler/worker.cpp:141  return next_from_inject();
 *   run_from_searching   src/runtime/scheduler/worker.cpp:148  if (scheduler_.idle().transition_from_searching()) scheduler_.notify_parked();
 *   run_poll             src/runtime/scheduler/worker.cpp:152  poll_task(task);
 *   poll_acquire         src/runtime/scheduler/worker.cpp:182  if (!driver.try_acquire()) return false;
 *   poll_turn            src/runtime/scheduler/worker.cpp:184  driver.park(false);
 *   poll_release         src/runtime/scheduler/worker.cpp:186  const bool hand_off = driver.release();
 *   poll_share           src/runtime/scheduler/worker.cpp:187  if (queue_.len() > 1) scheduler_.notify_parked();
 *   poll_hand_off        src/runtime/scheduler/worker.cpp:188  if (hand_off) scheduler_.hand_off_driver(index_);
 *   park_to_parked       src/runtime/scheduler/worker.cpp:194  if (idle.transition_to_parked(index_, is_searching_) && scheduler_.has_pending_work()) {
 *   park_recheck_notify  src/runtime/scheduler/worker.cpp:197  scheduler_.notify_parked();
 *   park_parker          src/runtime/scheduler/worker.cpp:205  hand_off = parker_.park(scheduler_.driver());
 *   park_claimed         src/runtime/scheduler/worker.cpp:207  if (!idle.is_parked(index_)) {
 *   park_own_work        src/runtime/scheduler/worker.cpp:213  if (queue_.len() > 0 || lifo_ || !scheduler_.inject().is_empty()) {
 *   park_unpark_self     src/runtime/scheduler/worker.cpp:214  is_searching_ = !idle.unpark_self(index_);
 *   park_share           src/runtime/scheduler/worker.cpp:219  if (queue_.len() > 1 && !scheduler_.is_shutting_down()) scheduler_.notify_parked();
 *   park_hand_off        src/runtime/scheduler/worker.cpp:226  if (hand_off) scheduler_.hand_off_driver(index_);
 *   hand_off_is_parked   src/runtime/scheduler/multi_thread.cpp:191  if (idle_.is_parked(index)) {
 *   hand_off_unpark      src/runtime/scheduler/multi_thread.cpp:192  workers_[index]->parker().unpark(driver());
 *   pending_inject       src/runtime/scheduler/multi_thread.cpp:199  if (!inject_.is_empty()) return true;
 *   pending_stealable    src/runtime/scheduler/multi_thread.cpp:201  if (worker->queue().has_stealable()) return true;
 *   parker_acquire       src/runtime/scheduler/parker.cpp:22  if (driver.try_acquire()) {
 *   parker_on_driver     src/runtime/scheduler/parker.cpp:23  park_on_driver(driver);
 *   parker_release       src/runtime/scheduler/parker.cpp:24  return driver.release();
 *   parker_yields        src/runtime/scheduler/parker.cpp:26  if (io && consumed_after_yields()) return false;
 *   yields_cas           src/runtime/scheduler/parker.cpp:35  if (state_.compare_exchange_strong(expected, kEmpty, std::memory_order_acquire)) return true;
 *   futex_cas            src/runtime/scheduler/parker.cpp:43  if (!state_.compare_exchange_strong(expected, kParkedFutex
 *   futex_consume        src/runtime/scheduler/parker.cpp:45  state_.exchange(kEmpty, std::memory_order_acquire);
 *   standby_claim        src/runtime/scheduler/parker.cpp:50  bool standby = io && driver.claim_standby();
 *   standby_last_turns   src/runtime/scheduler/parker.cpp:51  std::uint32_t last_turns = driver.turns();
 *   standby_timed_wait   src/runtime/scheduler/parker.cpp:55  futex_wait_for(&state_, kParkedFutex, Driver::kStandbyCheckNs);
 *   futex_wait           src/runtime/scheduler/parker.cpp:57  futex_wait(&state_, kParkedFutex);
 *   futex_woken          src/runtime/scheduler/parker.cpp:60  if (state_.compare_exchange_strong(expected, kEmpty, std::memory_order_acquire)) break;
 *   look_turns           src/runtime/scheduler/parker.cpp:64  if (turns != last_turns) {
 *   look_held            src/runtime/scheduler/parker.cpp:69  if (driver.held()) {
 *   look_quiet           src/runtime/scheduler/parker.cpp:73  if (++quiet >= Driver::kStandbyQuietChecks) {
 *   look_give_up         src/runtime/scheduler/parker.cpp:74  driver.give_up_standby();
 *   look_recheck         src/runtime/scheduler/parker.cpp:79  if (!driver.held_after_give_up()) {
 *   take_leave_futex     src/runtime/scheduler/parker.cpp:91  if (!state_.compare_exchange_strong(expected, kEmpty, std::memory_order_acq_rel)) {
 *   take_give_up         src/runtime/scheduler/parker.cpp:95  driver.give_up_standby();
 *   take_acquire         src/runtime/scheduler/parker.cpp:96  if (driver.try_acquire()) {
 *   take_on_driver       src/runtime/scheduler/parker.cpp:98  park_on_driver(driver);
 *   take_release         src/runtime/scheduler/parker.cpp:99  return driver.release();
 *   take_refutex         src/runtime/scheduler/parker.cpp:104  if (!state_.compare_exchange_strong(expected, kParkedFutex
 *   take_reclaim         src/runtime/scheduler/parker.cpp:108  standby = driver.claim_standby();
 *   woken_give_up        src/runtime/scheduler/parker.cpp:116  driver.give_up_standby();
 *   woken_hand_off       src/runtime/scheduler/parker.cpp:117  return !driver.held_after_give_up();
 *   on_driver_cas        src/runtime/scheduler/parker.cpp:122  if (!state_.compare_exchange_strong(expected, kParkedDriver
 *   on_driver_park       src/runtime/scheduler/parker.cpp:126  driver.park(true);
 *   on_driver_empty      src/runtime/scheduler/parker.cpp:123  state_.exchange(kEmpty, std::memory_order_acquire);
 *   unpark_swap          src/runtime/scheduler/parker.cpp:134  switch (state_.exchange(kNotified, std::memory_order_release)) {
 *   unpark_driver        src/runtime/scheduler/parker.cpp:139  driver.unpark();
 *   drv_try_acquire      src/io/driver.hpp:79  if (held_.exchange(true, std::memory_order_acquire)) return false;
 *   drv_release_store    src/time/time_driver.cpp:174  held.store(false, std::memory_order_seq_cst);
 *   drv_release_standby  src/io/driver.hpp:101  return timers_pending || (has_io_sources() && !standby_.load
 *   drv_turns            src/io/driver.hpp:107  return turns_.load(std::memory_order_relaxed);
 *   drv_held             src/io/driver.hpp:108  bool held() const noexcept { return held_.load
 *   drv_claim_standby    src/io/driver.hpp:113  return !standby_.exchange(true, std::memory_order_acq_rel);
 *   drv_give_up_standby  src/io/driver.hpp:116  void give_up_standby() noexcept { standby_.store(false
 *   drv_epoll_wait       src/io/driver.cpp:95  int n = wait_for_events(epoll_fd_, events, kEventsPerTurn, timeout_ns);
 *   drv_turn_store       src/io/driver.cpp:97  turns_.store(tick_, std::memory_order_relaxed);
 *   drv_dispatch_wake    src/io/driver.cpp:121  if (source->set_readiness(bits, tick_)) source->wake(bits);
 *   drv_unpark_write     src/io/driver.cpp:184  if (::write(event_fd_, &one, sizeof one) < 0 && errno == EAGAIN) {
 *
 * Before ca93a1c (NO_STANDBY), Driver::release returned timers_pending only
 * and park_on_futex had no standby.
 */

#ifndef N
#define N 2
#endif
#ifndef PUSHES
#define PUSHES 0
#endif
#ifndef SPAWNS
#define SPAWNS 1
#endif
#ifndef QUIET
#define QUIET 1                 /* Driver::kStandbyQuietChecks (2; 1 checks the same) */
#endif

/* Parker::state_ */
#define EMPTY    0              /* kEmpty */
#define FUTEX    1              /* kParkedFutex */
#define DRIVER   2              /* kParkedDriver */
#define NOTIFIED 3              /* kNotified */

/* readiness events: ev[i] */
#define EV_NONE       0         /* not arrived */
#define EV_READY      1         /* ready in epoll */
#define EV_TAKEN      2         /* returned by epoll_wait, being dispatched */
#define EV_DISPATCHED 3         /* its task woken (queued) */

byte inject = 0;            /* InjectQueue length */
byte lq[N];                 /* StealQueue length of each worker */
bool aq[N];                 /* task A is in that StealQueue */
bool lifo[N];               /* Worker::lifo_ (not stealable) */
byte searching = 0;         /* IdleSet state: num_searching */
byte unparked = N;          /* IdleSet state: num_unparked */
bool parked[N];             /* IdleSet::parked_ bitmap */
bool idle_lock = false;     /* IdleSet::mutex_ */
byte ps[N];                 /* Parker::state_ */
bool held = false;          /* Driver::held_ */
bool standby = false;       /* Driver::standby_ */
bool turned = false;        /* Driver::turns_ != the standby's last_turns */
bool drv_wake = false;      /* eventfd edge pending (Driver::unpark) */
byte ev[2];                 /* readiness events 0 (task A) and 1 (task B) */
byte spawns_left = SPAWNS;
bool pusher_done = false;
byte consumed = 0;
byte created = 0;           /* tasks made runnable so far */

#define all_done (pusher_done && ev[0] == EV_DISPATCHED && ev[1] == EV_DISPATCHED && consumed == created)

inline lock() { atomic { !idle_lock -> idle_lock = true } }
inline unlock() { idle_lock = false }

/* Parker::unpark: swap to kNotified; a holder asleep in the driver is woken
 * through the eventfd (Driver::unpark); a futex sleeper by futex_wake (its
 * wait below is enabled by the state change). */
inline unpark(t) {
  atomic { old = ps[t]; ps[t] = NOTIFIED };
  if
  :: (old == DRIVER) -> atomic { drv_wake = true; old = 0 }
  :: else -> old = 0
  fi
}

/* MultiThreadScheduler::notify_parked: IdleSet::worker_to_notify, then
 * Parker::unpark on the claimed worker. */
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
                 atomic { unlock(); v = w; w = 0 };
                 unpark(v);
                 v = 0
            :: else -> atomic { unlock(); w = 0 }
            fi
       :: else -> unlock()
       fi
  :: else -> skip
  fi
}

/* MultiThreadScheduler::hand_off_driver(me): the next worker whose bit is
 * set is unparked without being claimed. */
inline hand_off_driver() {
  w = 1;
  do
  :: (w < N) ->
       if
       :: parked[(me + w) % N] -> atomic { v = (me + w) % N; w = 0 }; unpark(v); v = 0; break
       :: else -> w++
       fi
  :: (w >= N) -> w = 0; break
  od
}

/* Worker::next_task: (0) sometimes the inject queue first, (1) the LIFO
 * slot, (2) the local queue, (3) an inject batch. */
inline inject_batch() {
  atomic {
    if
    :: (inject > 0) -> lq[me] = lq[me] + inject - 1; inject = 0; got = true
    :: else -> skip
    fi
  }
}
inline next_task() {
  got = false; is_a = false;
#ifndef NO_FAIR
  if
  :: inject_batch()                             /* tick_ % global_interval_ == 0 */
  :: skip
  fi;
#endif
  if
  :: (!got && lifo[me]) -> lifo[me] = false; got = true
  :: else -> skip
  fi;
  if
  :: (!got) ->
       atomic {
         if
         :: aq[me] -> lq[me]--; aq[me] = false; is_a = true; got = true
         :: (lq[me] > aq[me]) -> lq[me]--; got = true
         :: (lq[me] == 0) -> skip
         fi
       }
  :: else -> skip
  fi;
  if
  :: (!got) -> inject_batch()
  :: else -> skip
  fi
}

/* Driver::park: epoll_wait (the blocking one waits for an event or the
 * eventfd edge), the turns_ store, then the wakes of the dispatched tasks
 * into the holder's local queue (schedule_local with in_driver_). */
inline epoll_take() {
  c0 = (ev[0] == EV_READY); c1 = (ev[1] == EV_READY);
  if :: c0 -> ev[0] = EV_TAKEN :: else -> skip fi;
  if :: c1 -> ev[1] = EV_TAKEN :: else -> skip fi;
  drv_wake = false
}
inline turn_and_dispatch() {
  turned = standby;   /* turns_ store; only the standby reads it (see Worker) */
  d_step {
    if :: c0 -> lq[me]++; aq[me] = true; created++; ev[0] = EV_DISPATCHED :: else -> skip fi;
    if :: c1 -> lq[me]++; created++; ev[1] = EV_DISPATCHED :: else -> skip fi;
    c0 = false; c1 = false
  }
}

/* Driver::release: store held_ false, then read standby_. */
inline release() {
  held = false;
#ifdef NO_STANDBY
  hand_off = false
#else
  hand_off = !standby
#endif
}

proctype Pusher() {
  byte w;
  byte v;
  byte old;
  byte i = 0;
  do
  :: (i < PUSHES) ->
       atomic { inject++; created++ }   /* InjectQueue::push */
       notify_parked();                  /* schedule_remote */
       i++
  :: (i == PUSHES) -> break
  od;
  pusher_done = true
}

/* The peer: data arrives for A, then for B. */
proctype Net() {
  ev[0] = EV_READY;
  ev[1] = EV_READY
}

proctype Worker(byte me) {
  bool is_searching = false;
  bool was_last;
  bool got;
  bool is_a;
  bool gotdrv;
  bool hand_off;
  bool sb = false;           /* park_on_futex's `standby` */
  bool c0;
  bool c1;
  byte quiet;
  byte w;
  byte v;
  byte old;
  byte n;

top:
  /* Worker::run */
  next_task();
  if :: got -> goto run_task :: else -> skip fi;

  /* poll_driver */
  atomic { if :: !held -> held = true; gotdrv = true :: else -> gotdrv = false fi };
  if
  :: gotdrv ->
       atomic { epoll_take(); gotdrv = false };               /* park(false): no wait */
       turn_and_dispatch();
       release();
       if :: (lq[me] > 1) -> notify_parked() :: else -> skip fi;
       if :: hand_off -> hand_off = false; hand_off_driver() :: else -> skip fi;
       next_task();
       if :: got -> goto run_task :: else -> skip fi
  :: else -> skip
  fi;

  /* steal_work: become a searcher (at most half of the workers) */
  if
  :: (!is_searching) ->
       atomic { if :: (2 * searching < N) -> searching++; is_searching = true :: else -> skip fi }
  :: else -> skip
  fi;
  if
  :: is_searching ->
       v = 1;
       do
       :: (v < N) ->
            /* steal_into: half of the victim's queue, rounded up */
            atomic {
              if
              :: (lq[(me + v) % N] > 0) ->
                   n = lq[(me + v) % N] - lq[(me + v) % N] / 2;
                   lq[(me + v) % N] = lq[(me + v) % N] - n;
                   lq[me] = lq[me] + n - 1;
                   got = true; n = 0;
                   if
                   :: aq[(me + v) % N] ->
                        if
                        :: is_a = true; aq[(me + v) % N] = false            /* A runs */
                        :: (n > 1) -> aq[(me + v) % N] = false; aq[me] = true /* A moves */
                        :: (lq[(me + v) % N] > 0) -> skip                    /* A stays */
                        fi
                   :: else -> skip
                   fi
              :: else -> skip
              fi
            };
            if :: got -> break :: else -> v++ fi
       :: (v == N) -> break
       od;
       /* one more look at the inject queue */
       if
       :: (!got) -> v = 0; inject_batch()
       :: else -> v = 0
       fi
  :: else -> skip
  fi;
  if :: got -> goto run_task :: else -> goto park fi;

run_task:
  got = false;
  if
  :: is_searching ->                      /* transition_from_searching */
       is_searching = false;
       atomic { was_last = (searching == 1); searching-- };
       if :: was_last -> was_last = false; notify_parked() :: else -> skip fi
  :: else -> skip
  fi;
#ifndef NO_LONG
  /* the long task: its poll returns only once event 1 has been dispatched */
  if :: is_a -> (ev[1] == EV_DISPATCHED) :: else -> skip fi;
#endif
  atomic { consumed++; if :: is_a -> is_a = false; goto top :: else -> skip fi };
  /* the task may wake/spawn another (schedule_local: the LIFO slot) */
  if
  :: atomic { (spawns_left > 0) -> spawns_left--; created++; old = lifo[me]; lifo[me] = true };
     if
     :: (old) -> atomic { lq[me]++; old = 0 }; notify_parked()   /* the displaced task */
     :: else -> skip
     fi
  :: skip
  fi;
  goto top;

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
#ifndef NO_RECHECK
  /* the last searcher re-checks every queue (has_pending_work) */
  if
  :: was_last ->
       was_last = false; v = 0; got = false;
       do
       :: (v < N) -> if :: (lq[v] > 0) -> got = true :: else -> skip fi; v++
       :: (v == N) -> v = 0; break
       od;
       if :: (got || inject > 0) -> got = false; notify_parked() :: else -> skip fi
  :: else -> skip
  fi;
#endif
  is_searching = false;

park_loop:
  /* Parker::park (I/O sources registered) */
  hand_off = false;
  atomic { if :: !held -> held = true; goto on_driver :: else -> skip fi };
  /* consumed_after_yields */
  atomic { if :: (ps[me] == NOTIFIED) -> ps[me] = EMPTY; goto park_woke :: else -> skip fi };
  /* park_on_futex */
  atomic {
    if
    :: (ps[me] == EMPTY) -> ps[me] = FUTEX
    :: else -> ps[me] = EMPTY; goto park_woke
    fi
  };
#ifndef NO_STANDBY
  atomic { sb = !standby; standby = true };     /* claim_standby */
  if :: sb -> turned = false :: else -> skip fi; /* last_turns = turns() */
#endif

futex_wait:
  if
  :: atomic { (ps[me] == NOTIFIED) -> ps[me] = EMPTY }; goto futex_woken
  :: atomic { (sb && ps[me] == FUTEX) -> skip }     /* the timed wait times out */
  :: all_done -> goto finished
  fi;
  /* the standby's look */
  atomic {
    if
    :: turned -> turned = false; quiet = 0; goto futex_wait
    :: else -> skip
    fi
  };
  if
  :: held ->
       quiet++;
       if
       :: (quiet >= QUIET) ->
            atomic { standby = false; sb = false; quiet = 0 };
#ifndef NO_GIVE_UP_RECHECK
            /* look at held_ again after giving up (seq_cst store, then
             * load: the Dekker pair of release()'s store of held_ and load
             * of standby_); if the holder left meanwhile it may not have
             * seen the give-up: stay the standby. */
            if
            :: !held -> atomic { sb = !standby; standby = true };
                        if :: sb -> turned = false :: else -> skip fi
            :: else -> skip
            fi
#else
            skip
#endif
       :: else -> skip
       fi;
       goto futex_wait
  :: else -> skip
  fi;
  /* released, no turn: take the driver over */
  atomic {
    if
    :: (ps[me] == FUTEX) -> ps[me] = EMPTY
    :: else -> ps[me] = EMPTY; goto futex_woken
    fi
  };
  atomic { standby = false; sb = false; quiet = 0 };
  atomic { if :: !held -> held = true; goto on_driver :: else -> skip fi };
  /* someone else took it first: sleep again */
  atomic {
    if
    :: (ps[me] == EMPTY) -> ps[me] = FUTEX
    :: else -> ps[me] = EMPTY; goto park_woke
    fi
  };
  atomic { sb = !standby; standby = true };
  if :: sb -> turned = false :: else -> skip fi;
  goto futex_wait;

futex_woken:
  if
  :: sb ->
       atomic { standby = false; sb = false; quiet = 0 };
#ifndef NO_GIVE_UP_RECHECK
       /* woken for work: a holder that left meanwhile may have counted on
        * the standby; hand the driver off then (park_on_futex's return) */
       hand_off = !held
#else
       skip
#endif
  :: else -> skip
  fi;
  goto park_woke;

on_driver:
  /* Parker::park_on_driver */
  atomic {
    if
    :: (ps[me] == EMPTY) -> ps[me] = DRIVER
    :: else -> ps[me] = EMPTY; goto driver_left
    fi
  };
  if
  :: atomic { (drv_wake || ev[0] == EV_READY || ev[1] == EV_READY) -> epoll_take() }
  :: all_done -> goto finished
  fi;
  turn_and_dispatch();
  ps[me] = EMPTY;

driver_left:
  release();

park_woke:
  /* back in Worker::park */
  if
  :: (!parked[me]) -> is_searching = true; goto park_exit   /* claimed by a waker */
  :: else -> skip
  fi;
  /* woken without a claim: work of our own? */
  if
  :: (lq[me] > 0 || lifo[me] || inject > 0) ->
       lock();                                             /* unpark_self */
       if
       :: parked[me] -> atomic { unparked++ }; parked[me] = false; is_searching = false
       :: else -> is_searching = true
       fi;
       unlock()
  :: else -> goto park_loop
  fi;

park_exit:
  if :: (lq[me] > 1) -> notify_parked() :: else -> skip fi;
  if :: hand_off -> hand_off = false; hand_off_driver() :: else -> skip fi;
  goto top;

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
    run Pusher();
#ifdef NO_IO
    ev[0] = EV_DISPATCHED; ev[1] = EV_DISPATCHED
#else
    run Net()
#endif
  }
}
