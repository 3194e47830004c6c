/*
 * xprocfd.pml - a shared-domain place's event-loop descriptor
 * (src/xproc/fd.c), checked with spin: while the place waits on its
 * eventfd, a message from another process makes the descriptor readable
 * - through the bridge thread that sleeps on the place's shared futex
 * word - and at most one write is made per arming.
 *
 *   owner   arm: XA0 token = 1; XA1 ws = FD_ARMED; XA2 a message queued? ->
 *           take the token (exchange) and, if taken, CAS ws FD_ARMED ->
 *           RUNNING (and FUTEX_WAKE the bridge, which may have queued on
 *           the word already) and write the eventfd; (XA3: the bridge's private wake
 *           is the guard `token == 1` of XB1)
 *           once, optionally, a poll or a wait before the event loop:
 *           XF4 disarm, then drain, or sleep on ws itself (XW2 SLEEPING, XW3
 *           a message? XW4 futex_wait, XW5), then arm again
 *           the loop: blocks until the eventfd is readable; XF4 disarm
 *           (exchange the token; if taken, CAS ws FD_ARMED -> RUNNING and
 *           FUTEX_WAKE), XF5 read the eventfd, drain; if nothing came, arm
 *           again and loop
 *   bridge  XB1 wait for token == 1; XB2 while ws == FD_ARMED:
 *           futex_wait(ws, FD_ARMED) (queues only if the value holds; at
 *           most MAXSPUR spurious wake-ups in all); XB3 exchange the token:
 *           taken -> write the eventfd
 *   sender  XS1 msg = 1; XS2 load ws; XS3 SLEEPING or FD_ARMED -> CAS to
 *           RUNNING and FUTEX_WAKE one waiter of ws (the owner or the
 *           bridge, whichever spin picks if both were queued)
 *
 * An invalid end state is the owner blocked on its descriptor with the
 * message queued and the descriptor not readable, or asleep on ws with
 * the message queued.  The assertion: no more writes than armings (each
 * arming's token is taken by one exchange, and only its taker writes).
 * Broken variants:
 *   -DBROKEN_NO_CHECK           arm without XA2
 *   -DBROKEN_KICK_SLEEPING_ONLY a kick ignores FD_ARMED
 *   -DBROKEN_NO_TOKEN           the bridge writes without taking the token
 *   -DBROKEN_UNDO_NO_WAKE       XA2's undo leaves the bridge queued on ws
 *                               (spin found this one in the first C code)
 *   -DBROKEN_DISARM_NO_WAKE     XF4 leaves the bridge queued on ws: a kick
 *                               for the owner's own sleep may wake it
 *                               instead (the owner then sleeps on)
 *
 * Every access is seq_cst in the C code (the model is sequentially
 * consistent).
 */
#define RUNNING  0
#define SLEEPING 2
#define FDARMED  3
#ifndef MAXSPUR
#define MAXSPUR 1
#endif

byte ws = RUNNING;
bit token = 0;
bit bq = 0;          /* the bridge queued on ws */
bit oq = 0;          /* the owner queued on ws */
byte spur = 0;
bit msg = 0;         /* a message queued to the place */
byte efd = 0;        /* the eventfd's counter */
byte armings = 0;    /* XA0s so far */
byte writes = 0;     /* eventfd writes so far */
bit got = 0;         /* the owner handled the message */

inline wake_one() {
	atomic {
		if
		:: bq -> bq = 0
		:: oq -> oq = 0
		:: else -> skip
		fi
	}
}

/* Each arming's token is taken once, and only its taker writes: never
 * more writes than armings (a write may land in a later arming than the
 * one whose token it took: fd.c says why that is harmless). */
inline efd_write() {
	atomic { efd++; writes++; assert(writes <= armings) }
}

inline arm() {
	atomic { token = 1; armings++ };                         /* XA0 */
	ws = FDARMED;                                            /* XA1 */
#ifndef BROKEN_NO_CHECK
	if
	:: msg ->                                                /* XA2 */
		if
		:: atomic { token == 1 -> token = 0 };
#ifdef BROKEN_UNDO_NO_WAKE
		   atomic { if :: ws == FDARMED -> ws = RUNNING :: else -> skip fi };
#else
		   if
		   :: atomic { ws == FDARMED -> ws = RUNNING }; wake_one()
		   :: else -> skip
		   fi;
#endif
		   efd_write()
		:: atomic { token == 0 -> skip }
		fi
	:: else -> skip
	fi
#endif
}

inline disarm() {
	if
	:: atomic { token == 1 -> token = 0 };                   /* XF4 */
#ifdef BROKEN_DISARM_NO_WAKE
	   atomic { if :: ws == FDARMED -> ws = RUNNING :: else -> skip fi }
#else
	   if
	   :: atomic { ws == FDARMED -> ws = RUNNING }; wake_one()
	   :: else -> skip
	   fi
#endif
	:: atomic { token == 0 -> skip }
	fi;
	efd = 0                                                  /* XF5 */
}

inline drain() {
	atomic { if :: msg -> msg = 0; got = 1 :: else -> skip fi }
}

active proctype sender() {
	msg = 1;                                                 /* XS1 */
	if                                                       /* XS2, XS3 */
#ifdef BROKEN_KICK_SLEEPING_ONLY
	:: atomic { ws == SLEEPING -> ws = RUNNING }; wake_one()
#else
	:: atomic { (ws == SLEEPING || ws == FDARMED) -> ws = RUNNING }; wake_one()
#endif
	:: else -> skip
	fi
}

active proctype bridge() {
	bit tok;
end:
	do
	:: token == 1 ->                                         /* XB1 */
		do                                                   /* XB2 */
		:: ws == FDARMED ->
			atomic { if :: ws == FDARMED -> bq = 1 :: else -> skip fi };
			if
			:: bq == 0 -> skip
			:: atomic { bq == 1 && spur < MAXSPUR -> bq = 0; spur++ }
			fi
		:: else -> break
		od;
#ifdef BROKEN_NO_TOKEN
		efd_write()
#else
		atomic { if :: token == 1 -> token = 0; tok = 1 :: else -> tok = 0 fi };   /* XB3 */
		if :: tok -> efd_write() :: else -> skip fi
#endif
	od
}

active proctype owner() {
	arm();
	if
	:: skip                                                  /* straight to the loop */
	:: disarm(); drain(); arm()                              /* a poll */
	:: disarm();                                             /* a wait */
		ws = SLEEPING;                                       /* XW2 */
		if
		:: msg -> ws = RUNNING                               /* XW3 */
		:: else ->
			atomic { if :: ws == SLEEPING -> oq = 1 :: else -> skip fi };   /* XW4 */
			if
			:: oq == 0 -> skip
			:: atomic { oq == 1 && spur < MAXSPUR -> oq = 0; spur++ }
			fi;
			ws = RUNNING                                     /* XW5 */
		fi;
		drain();
		arm()
	fi;
	do
	:: got -> break
	:: else ->
		efd > 0;                                             /* epoll_wait */
		disarm();
		drain();
		if
		:: got -> break
		:: else -> arm()
		fi
	od;
	disarm()                                                 /* the leave (fd_close): XF4 */
}
