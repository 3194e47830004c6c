/*
 * overflow.pml - the overflow of a place (src/messaging/overflow.c) and
 * the wait for room (src/messaging/overflow.c, THE WAIT FOR ROOM), checked
 * with spin: what a handler kept is delivered, and a place holding kept
 * sends never sleeps (or computes) through the room that would let it
 * deliver them.
 *
 *   OVV1 no lost room kick: the run never ends with the worker asleep (or
 *       computing, -DIRQ) while it keeps replies and the client waits for
 *       them (an invalid end state: both blocked);
 *   OVV2 nothing kept is lost, also through a leave (-DLEAVE): the client
 *       handles every reply once, and the worker ends with an empty
 *       overflow and held cleared (asserted at its end).
 *
 * THE MODEL
 *
 * A client C has sent NREQ requests to a worker W; W's handlers reply,
 * into a ring to C of CAP slots that C does not drain at first, so the
 * first CAP replies go into the ring and the rest are kept (OV1: kept,
 * held := 1).  Then W waits with kept sends (nemo_place_wait, or the
 * leave's delivery of its overflow with -DLEAVE, or - -DIRQ - it goes
 * back to computing in interrupt mode), and C drains its ring and waits
 * (as a place: sleeps when it finds nothing) until it has every reply.
 *
 * Memory: sequentially consistent but for the two stores the handshake is
 * about, which may sit in their writer's store buffer (x86-TSO) past the
 * writer's next load: C's ack store (RK1 of THE WAIT FOR ROOM: the drain's
 * give-back) and W's request store (RW1: link.room := 1).  A buffer
 * empties at any time (the tso process), at its writer's next locked
 * instruction or fence, and at W's membarrier (RW2), which makes every
 * running thread pass a full barrier.  Everything else is one atomic step:
 * seq_cst RMWs and loads in the C code.
 *
 * MAPPING TO THE C CODE
 *
 *   W, a handler's reply (overflow.c, nemo__msg_send_slow, OV1): room in
 *     the ring (tail - ack < CAP) and nothing kept before it -> the put
 *     (S1) and its publication (P, S4 hint at C, S5 kick C); else kept++,
 *     held := 1
 *   flush() nemo__ovf_flush (overflow.c, OV2): while kept and room (W loads
 *     ack): deliver the oldest; held := 0 with the last; publish
 *   arm() nemo__ovf_arm (overflow.c, OV4 ROOM KICKS) and RW1-RW3 of
 *     room_sleep_begin (overflow.c): while kept: a request standing (room
 *     seen set, in memory or W's own buffer) -> done; else RW1 room := 1
 *     (buffered), RW2 membarrier (both buffers empty), RW3 a look as the
 *     wait's try_take looks: the drain (which exchanges W's hint word,
 *     taking the bit of a room kick made meanwhile) and flush()
 *   W's wait: try_take (the drain's exchange of its hint word, flush()),
 *     then sleep_begin: arm(), W2 state := SLEEPING (an xchg: W's buffer
 *     empties), W3 hint bit from C set -> RUNNING, look again; else W4
 *     blocked until a kick moves state off SLEEPING
 *   C's drain of W's ring (drain.c, drain_link and room_made): consume
 *     (D3-D5: got++), RK1 ack := rd (buffered), RK2 a compiler fence only
 *     (-DFENCED: the fallback's fence, C's buffer empties), RK3 load room:
 *     set -> RK4 exchange(room, 0) (locked: C's buffer empties), P, S4 our
 *     hint bit at W (skip if set), S5 kick W
 *   C's wait: the place's W1-W4 against W's S4-S5 (placewait.c)
 *   -DIRQ: W computes after arm(); a kick of a running W in interrupt
 *     mode is a signal (kick.c), whose handler drains, flushes and arms
 *     (irq.c)
 *   -DLEAVE: W leaves instead of waiting: LV1, the barrier, LV2 the final
 *     drain runs the handlers (whose replies are kept as above), then the
 *     overflow's delivery waits as above (domain.c, nemo_place_leave)
 *
 * BROKEN VARIANTS (tests/check_models.sh: each must fail)
 *
 *   -DBROKEN_NO_ASK      W sleeps with kept replies without asking C to
 *                        tell it of room (the place wait before room
 *                        kicks, had it slept instead of yielding)
 *   -DBROKEN_NO_BARRIER  no membarrier at RW2: C's RK3 reads room = 0
 *                        while W's RW3 reads the old ack
 *   -DBROKEN_NO_REASK    RW3 found room and delivered, but a request taken
 *                        meanwhile is not made again (a bug test_reply's
 *                        order phase found while this was written)
 *   -DLEAVE -DBROKEN_FREE_EARLY  the leave delivers and frees its overflow
 *                        before its final drain, whose handlers then keep
 *                        replies nobody delivers
 */

#ifndef CAP
#define CAP 1
#endif
#ifndef NREQ
#define NREQ 3
#endif
#define RUNNING 0
#define SLEEPING 1
#define NONE 255

byte wr = 0;          /* replies in the ring so far (W's tail) */
byte ack_mem = 0;     /* C's consumed position, in memory */
byte ack_buf = NONE;  /* C's ack store still in its store buffer */
byte rd = 0;          /* C's head (private) */
bit room = 0;         /* link(C <- W).room, in memory */
bit room_buf = 0;     /* W's store room := 1 still in its store buffer */
bit hint_W = 0;       /* C's hint bit at W (a room kick's) */
bit hint_C = 0;       /* W's hint bit at C (replies) */
byte state_W = RUNNING;
byte state_C = RUNNING;
bit sig = 0;          /* -DIRQ: a signal pending at W */
byte kept = 0;        /* W's overflow */
bit held = 0;
byte reqs = NREQ;     /* requests not yet handled by W */
byte got = 0;         /* ghost: replies C handled */
bit lost = 0;         /* ghost (-DBROKEN_FREE_EARLY): kept replies nobody will deliver */

inline c_flush() {
	if
	:: ack_buf != NONE -> ack_mem = ack_buf; ack_buf = NONE
	:: else -> skip
	fi
}

inline w_flush() {
	if
	:: room_buf -> room = 1; room_buf = 0
	:: else -> skip
	fi
}

/* P, S4, S5 of W's publication to C. */
inline publish_C() {
	atomic { w_flush() };                                  /* P */
	atomic {
		if
		:: !hint_C -> hint_C = 1;                     /* S4 */
			if                                     /* S5 */
			:: state_C == SLEEPING -> state_C = RUNNING
			:: else -> skip
			fi
		:: else -> skip
		fi
	}
}

/* OV1 of the overflow: a handler's reply. */
inline reply() {
	if
	:: kept == 0 && wr - ack_mem < CAP -> wr++; publish_C()
	:: else -> kept++; held = 1
	fi
}

/* OV2: deliver what fits, in order. */
inline flush() {
	do
	:: atomic { kept > 0 && wr - ack_mem < CAP -> wr++; kept--;
		if
		:: kept == 0 -> held = 0
		:: else -> skip
		fi };
		publish_C()
	:: else -> break
	od
}

/* OV4 / RW1-RW3: make sure room will kick W. */
inline arm() {
#ifdef BROKEN_NO_ASK
	skip
#else
	do
	:: kept == 0 -> break
	:: kept > 0 && (room || room_buf) -> break            /* a request stands */
	:: kept > 0 && !room && !room_buf ->
		room_buf = 1;                                  /* RW1 */
#ifndef BROKEN_NO_BARRIER
		atomic { w_flush(); c_flush() };               /* RW2: membarrier */
#endif
		atomic { hint_W = 0 };                         /* RW3: room_try_take's drain, */
		flush();                                       /* and its flush */
#ifdef BROKEN_NO_REASK
		break
#endif
	od
#endif
}

/* W's wait with kept sends: poll once, then sleep (W1-W5). */
inline w_wait() {
	do
	:: kept == 0 -> break
	:: else ->
		atomic { hint_W = 0 };                         /* the drain's exchange */
		flush();
		if
		:: kept == 0 -> break
		:: else -> skip
		fi;
#ifdef IRQ
		/* Back to computing: armed at the end of the interrupt; a kick
		 * is a signal, whose handler runs this loop again. */
		arm();
		if
		:: kept == 0 -> break
		:: else -> skip
		fi;
		sig;                                           /* computing until signalled */
		sig = 0
#else
		arm();
		if
		:: kept == 0 -> break
		:: else -> skip
		fi;
		atomic { w_flush(); state_W = SLEEPING };      /* W2 (xchg) */
		if
		:: hint_W -> state_W = RUNNING                 /* W3: pending */
		:: else -> state_W != SLEEPING                 /* W4: until kicked */
		fi
#endif
	od
}

proctype worker()
{
#ifdef LEAVE
	/* LV1, membarrier, then LV2: the final drain runs the handlers. */
#ifdef BROKEN_FREE_EARLY
	/* The old order: the overflow was delivered and freed before LV2. */
	do
	:: reqs > 0 -> reqs--; reply()
	:: else -> break
	od;
	if
	:: kept > 0 -> lost = 1; kept = 0       /* in an array nobody flushes */
	:: else -> skip
	fi;
#else
	do
	:: reqs > 0 -> reqs--; reply()
	:: else -> break
	od;
	w_wait();                                      /* the overflow, delivered */
#endif
#else
	/* A poll runs the handlers; then the place waits with kept sends. */
	do
	:: reqs > 0 -> reqs--; reply()
	:: else -> break
	od;
	w_wait();
#endif
	assert(kept == 0 && !held)                     /* OVV2 */
}

proctype client()
{
	do
	:: got == NREQ -> break
	:: got < NREQ ->
		atomic { hint_C = 0 };                         /* D2's exchange */
		if
		:: rd < wr ->                                   /* D3-D5 */
			rd++;
			got++;
			ack_buf = rd;                          /* RK1 (buffered) */
#ifdef FENCED
			atomic { c_flush() };                  /* RK2 where membarrier is missing */
#endif
			if
			:: room ->                             /* RK3 */
				atomic { c_flush(); room = 0 };    /* RK4: exchange */
				atomic { c_flush() };              /* P */
				atomic {
					if
					:: !hint_W -> hint_W = 1;  /* S4 */
#ifdef IRQ
						sig = 1            /* S5: a signal to a running place */
#else
						if                 /* S5 */
						:: state_W == SLEEPING -> state_W = RUNNING
						:: else -> skip
						fi
#endif
					:: else -> skip
					fi
				}
			:: else -> skip
			fi
		:: else ->                                      /* nothing: sleep */
			atomic { c_flush(); state_C = SLEEPING };  /* W2 */
			if
			:: hint_C || rd < wr -> state_C = RUNNING  /* W3 */
			:: else -> state_C != SLEEPING             /* W4 */
			fi
		fi
	od;
	assert(got == NREQ && !lost)                           /* OVV2 */
}

/* The store buffers drain on their own at any time. */
active proctype tso()
{
end:
	do
	:: atomic { ack_buf != NONE -> c_flush() }
	:: atomic { room_buf -> w_flush() }
	od
}

init {
	atomic {
		run worker();
		run client()
	}
}
