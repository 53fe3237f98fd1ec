/*
 * SPIN model of the I/O readiness protocol: edge-triggered epoll, the
 * registration's readiness word with its tick, and a reading operation that
 * waits for it. As implemented in
 *   src/io/driver.cpp:     Driver::park             (the driver's turn)
 *   src/io/io_source.cpp:  IoSource::set_readiness  (D2: stamp bits + tick)
 *                          IoSource::wake           (D3: wake matching waiters)
 *                          IoSource::clear_readiness(O4: clear iff tick unchanged)
 *                          IoSource::register_waiter(O5: re-check under the lock)
 *                          IoOperation::attempt / ready_check / await_suspend
 *
 * Processes:
 *  - peer: sends MSGS messages; each arrival adds to the socket's receive
 *    queue and, edge-triggered, queues one epoll event (the kernel queues the
 *    descriptor on the ready list on every arrival; one epoll_wait reports it
 *    once however many arrivals it stands for).
 *  - driver: each turn takes the queued event (epoll_wait), increments the
 *    tick, stamps readiness (D2), then takes the lock and wakes a registered
 *    waiter (D3).
 *  - reader: operation after operation until it has every message. Each
 *    attempt reads the readiness word (O1); if readable, makes the system
 *    call (O2): data -> takes it all; EAGAIN -> clear (O4) and look again.
 *    Not readable: register under the lock, re-checking readiness there
 *    (O5), and sleep until woken (O6).
 *
 * Checked: no invalid end state, i.e. the reader never sleeps forever while
 * a message it has not taken sits in the socket (a lost wake-up), and the
 * reader takes exactly MSGS messages.
 *
 * Negative controls (SPIN must find the lost wake-up):
 *  -DNO_TICK     O4 clears readiness whatever the tick: an edge the driver
 *                stamped after O1 but before O4 is erased, though the EAGAIN
 *                at O2 predates the data it announces.
 *  -DNO_RECHECK  O5 links the waiter without re-checking readiness under the
 *                lock: a stamp+wake that ran between O1 and O5 is missed.
 */

#ifndef MSGS
#define MSGS 2
#endif

byte data = 0;        /* bytes (messages) in the receive queue */
bool edge = false;    /* an event is on epoll's ready list */
bool readable = false;
byte tick = 0;        /* the tick stamped with the last readiness */
byte driver_tick = 0;
bool lock = false;
bool waiting = false; /* the reader's waiter is linked */
bool woken = false;
byte received = 0;

inline acquire() { atomic { !lock -> lock = true } }
inline release() { lock = false }

active proctype peer() {
  byte i = 0;
  do
  :: i < MSGS -> atomic { data++; edge = true }; i++
  :: else -> break
  od
}

active proctype driver() {
  do
  :: atomic { edge -> edge = false };
     driver_tick++;
     atomic { readable = true; tick = driver_tick };           /* D2 */
     acquire();                                                  /* D3 */
     if
     :: waiting -> waiting = false; woken = true
     :: else -> skip
     fi;
     release()
  :: received == MSGS -> break
  od
}

active proctype reader() {
  bool seen_readable;
  byte seen_tick;
attempt:
  if
  :: received == MSGS -> goto done
  :: else -> skip
  fi;
  atomic { seen_readable = readable; seen_tick = tick };         /* O1 */
  if
  :: seen_readable ->
     if                                                          /* O2 */
     :: atomic { data > 0 -> received = received + data; data = 0 }; goto attempt
     :: data == 0 ->                                             /* EAGAIN */
        /* the clear is a separate step: the peer and the driver may run
           between the system call and it */
#ifdef NO_TICK
        readable = false;                                        /* O4 */
#else
        atomic {                                                 /* O4 */
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
#ifdef NO_RECHECK
  waiting = true;
  release();
#else
  if
  :: readable -> release(); goto attempt
  :: else -> waiting = true; release()
  fi;
#endif
  woken;                                                         /* O6 */
  woken = false;
  goto attempt;
done:
  assert(received == MSGS && data == 0)
}
