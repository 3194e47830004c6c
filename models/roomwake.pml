/*
 * roomwake.pml - a send that waits for room, woken by a request rather
 * than by the room (src/messaging/overflow.c, THE WAIT FOR ROOM, RW5;
 * src/messaging/placewait.c, W6), checked with spin:
 *
 *   RWV1 the request is handled: the run never ends with the peer waiting
 *       for its reply while the request sits in the sender's queue and
 *       nothing will make the sender look (an invalid end state).
 *
 * THE MODEL
 *
 * A place S sends to its peer C into a ring of one slot that C has not
 * drained: S's blocking send waits for room.  C sends S one request (S4
 * hint bit at S, S5 a kick chosen by S's published state), then drains
 * S's ring, which makes the room (RK1; RK3/RK4: S asked, so C sets its
 * hint bit at S - already set by the request: no second kick) and waits
 * for the reply.  After its send returns S computes and makes no nemo
 * call: the request is handled only if the mode's kick runs a drain.
 * Modes: interrupt mode (default: a kick of a RUNNING place is a signal
 * whose handler drains), -DPROGRESS (the progress thread drains a served
 * place it is told of) and -DFD (an event loop drains when its descriptor
 * is written); all three are the same in the model - the kick of a
 * RUNNING place runs a drain, the kick of a SLEEPING place only wakes the
 * thread, and the kick of a POLLING place does nothing.
 *
 * Memory is sequentially consistent: every load and store below is
 * seq_cst or an RMW in the C code, except RW1's store, which the
 * membarrier of RW2 orders (models/overflow.pml checks that handshake
 * with store buffers); here it is one step.
 *
 * MAPPING TO THE C CODE
 *
 *   S  wait_room: state := POLLING (nemo__slot_polling); the wait loop's
 *      try_take (room_try_take: the put, else the drain - exchange the
 *      hint word, handle - and the put again); room_sleep_begin: RW1
 *      room := 1, RW3 try_take, RW4 state := SLEEPING, re-check the hint
 *      words (W3), futex_wait until a kick moves the state off SLEEPING;
 *      RW5 (nemo__wait_leave): state := RUNNING, hint set -> drain
 *   C  the request's S4-S5 (send.c, kick.c), then drain_link of S's ring:
 *      ack, RK3 load room, RK4 exchange it and S4-S5 at S
 *
 * BROKEN VARIANT (tests/check_models.sh: must fail)
 *
 *   -DBROKEN_NO_RW5  the wait for room leaves with state := RUNNING only
 *                    (the code before W6 was shared): the request stays
 *                    queued behind a set hint bit that stops every later
 *                    sender's kick
 */

#define RUNNING 0
#define POLLING 1
#define SLEEPING 2

byte state_S = RUNNING;
bit hint_S = 0;       /* C's hint bit at S */
bit req = 0;          /* the request sits in S's queue from C */
bit handled = 0;      /* ghost: S ran the request's handler */
bit room_ack = 0;     /* C drained S's ring: room for S's send */
bit room_flag = 0;    /* link(C <- S).room: S asked to be told of room */
bit sent = 0;         /* S's send put its entry */
bit run_drain = 0;    /* a kick of a RUNNING S: its mode drains (signal, progress thread, descriptor) */

/* S's drain: D2's exchange of the hint word, then the queue. */
inline s_drain() {
	atomic { hint_S = 0 };
	atomic {
		if
		:: req -> req = 0; handled = 1
		:: else -> skip
		fi
	}
}

/* S5 at S, by S's published state. */
inline kick_S() {
	if
	:: state_S == SLEEPING -> state_S = RUNNING       /* FUTEX_WAKE */
	:: state_S == RUNNING -> run_drain = 1             /* tgkill / progress / eventfd */
	:: else -> skip                                    /* POLLING: it looks itself */
	fi
}

/* try_take: the put, else serve the own queues and put again. */
inline try_take() {
	if
	:: room_ack -> sent = 1
	:: else ->
		s_drain();
		if
		:: room_ack -> sent = 1
		:: else -> skip
		fi
	fi
}

proctype S()
{
	state_S = POLLING;                                 /* nemo__slot_polling */
	do
	:: sent -> break
	:: else ->
		try_take();                                 /* the poll phase */
		if
		:: sent -> break
		:: else -> skip
		fi;
		room_flag = 1;                              /* RW1 (RW2 orders it) */
		try_take();                                 /* RW3 */
		if
		:: sent -> break
		:: else -> skip
		fi;
		atomic {                                    /* RW4: W2, W3 */
			state_S = SLEEPING;
			if
			:: hint_S -> state_S = POLLING
			:: else -> skip
			fi
		};
		(state_S != SLEEPING);                      /* W4: until kicked */
		state_S = POLLING
	od;
	/* Leaving the wait. */
	atomic {
		state_S = RUNNING;
#ifndef BROKEN_NO_RW5
		if
		:: hint_S -> run_drain = 1                  /* RW5: drain before returning */
		:: else -> skip
		fi
#endif
	};
	/* Computing: only the mode's drain runs handlers. */
end:
	do
	:: atomic { run_drain -> run_drain = 0 }; s_drain()
	od
}

proctype C()
{
	/* The request: S1, then S4 and S5. */
	req = 1;
	atomic {
		if
		:: !hint_S -> hint_S = 1; kick_S()
		:: else -> skip
		fi
	};
	/* The drain of S's ring: RK1, RK3, RK4. */
	room_ack = 1;
	atomic {
		if
		:: room_flag -> room_flag = 0;
			if
			:: !hint_S -> hint_S = 1; kick_S()
			:: else -> skip
			fi
		:: else -> skip
		fi
	};
	/* Wait for the reply (the place's own wait: W1-W6 of placewait.c). */
	handled;
	assert(handled)
}

init {
	atomic {
		run S();
		run C()
	}
}
