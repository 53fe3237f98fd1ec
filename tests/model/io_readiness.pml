/*
 * SPIN model of the I/O readiness protocol and of closing a socket under its
 * operations: edge-triggered epoll, the registration's readiness word with
 * its tick, several operations waiting on one registration, the clear after
 * EAGAIN and after a short read, and the close race (the registration's
 * life word: uses, closing, deregistered, descriptor closed, handle ref; the
 * driver's deferred free). As implemented in src/io/io_source.cpp,
 * src/io/io_source.hpp and src/io/driver.cpp (mapping below).
 *
 * Processes:
 *  - peer: sends MSGS messages; each arrival adds to the socket's receive
 *    queue and, edge-triggered, queues one epoll event (the kernel queues the
 *    descriptor on the ready list on every arrival; one epoll_wait reports it
 *    once however many arrivals it stands for). No event once deregistered.
 *  - driver: each turn first frees the retired registration (F), then takes
 *    the queued event (W, epoll_wait), then, in a separate step, stamps
 *    readiness with the new tick unless shut down (D2), then takes the lock
 *    and wakes every waiter it satisfies (D3). A registration retired
 *    between W and D2 is still dispatched: that is why F frees only at the
 *    next turn.
 *  - reader(i), READERS of them (several waiters on one registration):
 *    operation after operation. Each takes a use (O0, begin_use: closed if
 *    kClosing), reads the readiness word (O1); shut down -> errc::closed;
 *    readable -> system call (O2): data -> takes it all, a short read, and
 *    clears the readable bit if the tick is unchanged (O3, clear_drained);
 *    EAGAIN -> clears if the tick is unchanged (O4) and looks again. Not
 *    readable: register under the lock re-checking readiness (O5), sleep
 *    until woken (O6). The operation ends by withdrawing under the lock if
 *    still linked and giving its use back (O7, end_use).
 *  - closer (with -DCLOSE): close() then drop of the handle: elect (C1,
 *    kClosing), epoll DEL (C2), kShutdown (C3), wake all under the lock
 *    (C4), kDeregistered (C5, closes the descriptor if no use is in flight),
 *    then clears kHandleRef (C6, frees if nothing is left).
 *
 * Every transition of the life word is one atomic step computing the
 * actions it entails (close the descriptor; retire the registration); the
 * actions themselves are later, separate steps, as in
 * IoSource::transition.
 *
 * Checked:
 *  - no invalid end state: no reader sleeps forever (a lost wake-up, or a
 *    close that does not wake it);
 *  - without CLOSE, the readers take exactly MSGS messages;
 *  - no access to the registration after it is freed (assert !freed at
 *    every access: O1, O3, O4, O5, O7, D2, D3);
 *  - no system call on the descriptor after it is closed (assert at O2): a
 *    stale call would reach whatever file got the number next;
 *  - the descriptor is closed exactly once, and by the end it is closed and
 *    the registration freed (no leak).
 *
 * Negative controls (SPIN must find an error):
 *  -DNO_TICK      O4 clears readiness whatever the tick: an edge stamped
 *                 after O1 but before O4 is erased (lost wake-up).
 *  -DNO_RECHECK   O5 links the waiter without re-checking readiness under
 *                 the lock: a stamp+wake between O1 and O5 is missed.
 *  -DCLOSE -DEARLY_FREE   the code before the fix: close() closes the
 *                 descriptor and retires the registration at once, uses or
 *                 not; a driver turn then frees it under a woken reader.
 *  -DCLOSE -DCLOSE_FD_NOW  memory by reference count, but close() closes
 *                 the descriptor at once: a reader's system call in flight
 *                 reaches the closed (reusable) number.
 *
 * Interest::kBoth (ready(Interest), both directions at once) is not modelled:
 * its operation never reports would-block, so it never reaches O3, and at O5
 * its mask is the union of the two modelled ones (ready_mask, a table since
 * kBoth, gives kRead and kWrite exactly the bits the modelled steps use).
 *
 * Step-to-line mapping:
 *   F   src/io/driver.cpp:92  free_retired();
 *   W   src/io/driver.cpp:95  int n = wait_for_events(epoll_fd_, events, kEventsPerTurn, timeout_ns);
 *   D2  src/io/driver.cpp:121  if (source->set_readiness(bits, tick_)) source->wake(bits);
 *   D3  src/io/io_source.cpp:65  lock_.lock();
 *   O0  src/io/io_source.cpp:281  if (source_ && !source_->begin_use()) closed_ = true;
 *   O1  src/io/io_source.cpp:308  const std::uint64_t state = source_->readiness();
 *   O2  src/io/io_source.cpp:317  switch (step_(*this)) {
 *   O3  src/io/io_source.cpp:321  source_->clear_drained(state, waiter_.interest);
 *   O4  src/io/io_source.cpp:329  source_->clear_readiness(state, waiter_.interest);
 *   O5  src/io/io_source.cpp:96  if (state & ready_mask(waiter.interest)) return false;
 *   O7  src/io/io_source.cpp:287  source_->end_use();
 *   C1  src/io/io_source.cpp:154  if (life_.fetch_or(kClosing, std::memory_order_acq_rel) & kClosing) return;
 *   C2  src/io/io_source.cpp:157  driver_.remove(fd_);
 *   C3  src/io/io_source.cpp:159  readiness_.fetch_or(kShutdown, std::memory_order_acq_rel);
 *   C4  src/io/io_source.cpp:160  wake(kShutdown);
 *   C5  src/io/io_source.cpp:161  transition([](std::uint64_t v) { return v | kDeregistered; });
 *   C6  src/io/io_source.cpp:166  transition([](std::uint64_t v) { return v & ~kHandleRef; });
 *   T   src/io/io_source.cpp:131  if ((next & kUseMask) == 0 && (next & kDeregistered)) next |= kFdClosed;
 */

#ifndef MSGS
#define MSGS 2
#endif
#ifndef READERS
#define READERS 2
#endif

byte data = 0;        /* bytes (messages) in the receive queue */
bool edge = false;    /* an event is on epoll's ready list */
bool readable = false;
bool shutdown = false; /* kShutdown in the readiness word */
byte tick = 0;        /* the tick stamped with the last readiness */
byte driver_tick = 0;
bool lock = false;
bool waiting[READERS];
bool woken[READERS];
byte received = 0;
byte readers_done = 0;
bool closer_done = false;

/* The life word (IoSource::life_) and what follows from it. */
byte uses = 0;
bool handle_ref = true;
bool closing = false;
bool deregistered = false;
bool fd_closed = false;   /* kFdClosed: claimed by one transition */
bool fd_really_closed = false; /* the ::close itself (a later step) */
bool in_epoll = true;
bool retired = false;
bool freed = false;

inline acquire() { atomic { !lock -> lock = true } }
inline release() { lock = false }

/* The actions a transition claimed, done after it (IoSource::transition). */
#define DEAD (uses == 0 && !handle_ref && fd_closed)

active proctype peer() {
  byte i = 0;
  do
  :: i < MSGS -> atomic { data++; if :: in_epoll -> edge = true :: else -> skip fi }; i++
  :: else -> break
  od
}

active proctype driver() {
  bool event;
  byte w;
  do
  :: atomic { retired && !freed -> freed = true }                /* F (a turn's start) */
  :: atomic { edge && in_epoll -> edge = false; event = true };  /* W */
     driver_tick++;
     assert(!freed);
     atomic {                                                    /* D2 */
       if
       :: !shutdown -> readable = true; tick = driver_tick
       :: else -> event = false
       fi
     };
     if
     :: event ->
        acquire();                                               /* D3 */
        assert(!freed);
        w = 0;
        do
        :: w < READERS -> if :: waiting[w] -> waiting[w] = false; woken[w] = true :: else -> skip fi; w++
        :: else -> break
        od;
        release()
     :: else -> skip
     fi;
     event = false
  :: readers_done == READERS && closer_done -> break
  od;
  atomic { if :: retired -> freed = true :: else -> skip fi };   /* a last turn / ~Driver */
#ifdef CLOSE
  assert(fd_really_closed && freed)                              /* no leak */
#endif
}

/* One transition of life_ giving a use back, then its actions. */
inline end_use() {
  atomic {                                                       /* O7 */
    assert(!freed && uses > 0);
    was_dead = DEAD;
    uses--;
    claim_fd = (uses == 0 && deregistered && !fd_closed);
    if :: claim_fd -> fd_closed = true :: else -> skip fi;
    claim_free = (DEAD && !was_dead)
  };
  if :: claim_fd -> assert(!fd_really_closed); fd_really_closed = true :: else -> skip fi;
  if :: claim_free -> retired = true :: else -> skip fi
}

proctype reader(byte me) {
  bool seen_readable;
  bool seen_shutdown;
  byte seen_tick;
  bool op_closed;
  bool was_dead;
  bool claim_fd;
  bool claim_free;
new_op:
#ifndef CLOSE
  if
  :: received == MSGS -> goto done
  :: else -> skip
  fi;
#endif
  /* Operations are made through the handle, so none begins after it is
     dropped (the socket's destruction follows every use of it made by
     construction, by the usual C++ rule): the reader stops there. */
  atomic {                                                       /* O0 */
    if
    :: handle_ref -> uses++; op_closed = closing
    :: else -> goto done
    fi
  };
  if
  :: op_closed -> goto end_op
  :: else -> skip
  fi;
attempt:
#ifndef CLOSE
  if
  :: received == MSGS -> goto end_op
  :: else -> skip
  fi;
#endif
  atomic {                                                       /* O1 */
    assert(!freed);
    seen_readable = readable; seen_tick = tick; seen_shutdown = shutdown
  };
  if
  :: seen_shutdown -> op_closed = true; goto end_op
  :: !seen_shutdown && seen_readable ->
     assert(!fd_really_closed);                                  /* O2 */
     if
     :: atomic { data > 0 -> received = received + data; data = 0 };
        /* a short read drained the queue: O3, a separate step */
        atomic {
          assert(!freed);
          if :: tick == seen_tick -> readable = false :: else -> skip fi
        };
        goto end_op
     :: data == 0 ->                                             /* EAGAIN */
#ifdef NO_TICK
        readable = false;                                        /* O4 */
#else
        atomic {                                                 /* O4 */
          assert(!freed);
          if
          :: tick == seen_tick -> readable = false
          :: else -> skip
          fi
        };
#endif
        goto attempt
     fi
  :: else -> skip
  fi;
  acquire();                                                     /* O5 */
  assert(!freed);
#ifdef NO_RECHECK
  waiting[me] = true;
  release();
#else
  if
  :: readable || shutdown -> release(); goto attempt
  :: else -> waiting[me] = true; release()
  fi;
#endif
#ifdef CLOSE
  woken[me];                                                     /* O6 */
#else
  /* Without a closer a reader may stay linked once the messages are all
     taken (by the other reader): it is then withdrawn, as a destroyed
     operation's waiter is. */
  if
  :: woken[me]
  :: received == MSGS -> skip
  fi;
#endif
  woken[me] = false;
  goto attempt;
end_op:
  acquire();                                                     /* withdraw */
  assert(!freed);
  waiting[me] = false;
  release();
  end_use();
#ifdef CLOSE
  if
  :: op_closed -> goto done
  :: else -> goto new_op
  fi;
#else
  goto new_op;
#endif
done:
  atomic { readers_done++ }
}

#ifdef CLOSE
active proctype closer() {
  bool elected;
  bool was_dead;
  bool claim_fd;
  bool claim_free;
  byte w;
  atomic { elected = !closing; closing = true };                 /* C1 */
  if
  :: elected ->
#ifdef EARLY_FREE
     /* Before the fix: DEL, shutdown, wake, close(fd), retire, at once. */
     in_epoll = false;
     shutdown = true;
     acquire();
     w = 0;
     do
     :: w < READERS -> if :: waiting[w] -> waiting[w] = false; woken[w] = true :: else -> skip fi; w++
     :: else -> break
     od;
     release();
     fd_closed = true; fd_really_closed = true;
     retired = true;
     goto out
#else
     in_epoll = false;                                           /* C2 */
     shutdown = true;                                            /* C3 */
     acquire();                                                  /* C4 */
     w = 0;
     do
     :: w < READERS -> if :: waiting[w] -> waiting[w] = false; woken[w] = true :: else -> skip fi; w++
     :: else -> break
     od;
     release();
#ifdef CLOSE_FD_NOW
     fd_really_closed = true;
     atomic { deregistered = true; fd_closed = true };
#else
     atomic {                                                    /* C5 */
       was_dead = DEAD;
       deregistered = true;
       claim_fd = (uses == 0 && !fd_closed);
       if :: claim_fd -> fd_closed = true :: else -> skip fi;
       claim_free = (DEAD && !was_dead)
     };
     if :: claim_fd -> assert(!fd_really_closed); fd_really_closed = true :: else -> skip fi;
     if :: claim_free -> retired = true :: else -> skip fi;
#endif
#endif
  :: else -> skip
  fi;
  atomic {                                                       /* C6 */
    was_dead = DEAD;
    handle_ref = false;
    claim_free = (DEAD && !was_dead)
  };
  if :: claim_free -> retired = true :: else -> skip fi;
out:
  closer_done = true
}
#endif

init {
  byte i = 0;
  atomic {
#ifndef CLOSE
    closer_done = true;
#endif
    do
    :: i < READERS -> run reader(i); i++
    :: else -> break
    od
  }
}
