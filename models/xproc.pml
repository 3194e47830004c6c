/*
 * xproc.pml - the sleep of a shared-domain place (src/xproc/xproc.c,
 * THE SLEEP and PEER DEATH), checked with spin: a receiver that sleeps
 * on its shared futex is never left asleep with a message queued, nor
 * after a peer's death was published, with no timeout to rescue it (the
 * C code's 100 ms slices are a second line of defence, not the proof).
 *
 * Mapping to the C code:
 *   receiver  try_take: drain both rings (msg[s] -> 0, got++), and return
 *             on death news (deaths != seen);
 *             W2 wstate = SLEEPING (seq_cst exchange)
 *             W3 any msg[s] or deaths != seen -> wstate = RUNNING, retry
 *             W4 futex_wait(wstate, SLEEPING): atomic check-and-queue,
 *                then block until woken, or a spurious wake-up (at most
 *                MAXSPUR: unbounded ones would hide a lost wake)
 *             W5 wstate = RUNNING
 *   sender s  S1 msg[s] = 1 (the slot's seq store, seq_cst)
 *             S2 load wstate; S3 CAS SLEEPING -> RUNNING and FUTEX_WAKE
 *   reclaim   (-DDEATH) sender 1 dies before or after its send; then
 *             D2 deaths++ (seq_cst), D3 kick as S2-S3
 * Memory is sequentially consistent: every access above is seq_cst in
 * the C code (the field stores before S1 are relaxed and ordered by S1's
 * release, which the model folds into S1).
 *
 * Broken variants that spin must catch (an invalid end state: the
 * receiver asleep for ever):
 *   -DBROKEN_KICK_FIRST   the sender reads wstate before S1
 *   -DBROKEN_CHECK_FIRST  the receiver re-checks (W3) before W2
 *   -DDEATH -DBROKEN_DEATH_KICK_FIRST   the reclaimer kicks before D2
 *
 * -DROOM checks the other sleep instead (xproc.c, THE WAIT FOR ROOM): a
 * sender that finds its ring full sleeps on its own place's futex word
 * until the receiver frees a slot.  The ring has one slot, full at the
 * start; the sender sends SENDS messages, waiting for room before each;
 * the receiver takes SENDS + 1.
 *   sender    R1 want = 1 (its bit in the receiver's room mask, seq_cst RMW)
 *             try: room -> done; W2 swstate = SLEEPING; W3 room? ->
 *             swstate = RUNNING, retry; W4 futex_wait; W5 swstate = RUNNING
 *             R3 want = 0; S1 ringfull = 1 (its message)
 *   receiver  C1 ringfull = 0 (the slot's seq, seq_cst); C2 load want,
 *             and if set, S2-S3 on the sender's word
 * An invalid end state is the sender asleep with room in its ring (the
 * receiver then blocks for ever on an empty ring).  Broken variants:
 *   -DROOM -DBROKEN_ROOM_CHECK_FIRST  the receiver reads want before C1
 *   -DROOM -DBROKEN_ROOM_WANT_LATE    the sender publishes want after its
 *                                     W3 re-check (per sleep)
 */
#define RUNNING  0
#define SLEEPING 2
#ifndef MAXSPUR
#define MAXSPUR 1
#endif

byte wstate = RUNNING;
bit msg[2];
bit queued = 0;
byte spur = 0;
byte got = 0;
byte sent = 0;
byte deaths = 0;
bit dead = 0;

inline kick() {
	if
	:: atomic { wstate == SLEEPING -> wstate = RUNNING };   /* S2 + S3 CAS */
	   atomic { if :: queued -> queued = 0 :: else -> skip fi }   /* FUTEX_WAKE */
	:: else -> skip
	fi
}

proctype sender(byte s) {
#ifdef DEATH
	if
	:: s == 1 -> goto die      /* killed before it could send */
	:: else -> skip
	fi;
#endif
#ifdef BROKEN_KICK_FIRST
	byte w = wstate;
	atomic { msg[s] = 1; sent++ };                          /* S1 */
	if
	:: w == SLEEPING ->
		if
		:: atomic { wstate == SLEEPING -> wstate = RUNNING };
		   atomic { if :: queued -> queued = 0 :: else -> skip fi }
		:: else -> skip
		fi
	:: else -> skip
	fi;
#else
	atomic { msg[s] = 1; sent++ };                          /* S1 */
	kick();                                                  /* S2, S3 */
#endif
#ifdef DEATH
die:
	if :: s == 1 -> dead = 1 :: else -> skip fi
#endif
}

#ifdef DEATH
proctype reclaimer() {
	dead == 1;
#ifdef BROKEN_DEATH_KICK_FIRST
	kick();
	deaths++;
#else
	deaths++;                                                /* D2 */
	kick();                                                  /* D3 */
#endif
}
#endif

#ifndef ROOM
active proctype receiver() {
	byte seen = 0;
	bit death_seen = 0;
	do
	:: got == 2 -> break
	:: else ->
		/* try_take: the drain */
		if :: msg[0] -> msg[0] = 0; got++ :: else -> skip fi;
		if :: msg[1] -> msg[1] = 0; got++ :: else -> skip fi;
		if :: deaths != seen -> death_seen = 1; break :: else -> skip fi;
		if
		:: got == 2 -> break
		:: else -> skip
		fi;
#ifdef BROKEN_CHECK_FIRST
		if
		:: msg[0] || msg[1] || deaths != seen -> goto again
		:: else -> skip
		fi;
		wstate = SLEEPING;                                   /* W2 */
#else
		wstate = SLEEPING;                                   /* W2 */
		if
		:: msg[0] || msg[1] || deaths != seen -> wstate = RUNNING; goto again   /* W3 */
		:: else -> skip
		fi;
#endif
		atomic { if :: wstate == SLEEPING -> queued = 1 :: else -> skip fi };   /* W4 */
		if
		:: queued == 0 -> skip
		:: atomic { queued == 1 && spur < MAXSPUR -> queued = 0; spur++ }
		fi;
		wstate = RUNNING;                                    /* W5 */
again:
		skip
	od;
	/* Every message sent was taken, or the death was reported. */
	assert(death_seen || got == sent)
}

init {
	atomic {
		run sender(0); run sender(1);
#ifdef DEATH
		run reclaimer()
#endif
	}
}
#else /* ROOM */

#ifndef SENDS
#define SENDS 2
#endif

byte swstate = RUNNING;
bit ringfull = 1;        /* the ring's one slot */
bit want = 0;        /* the sender's bit in the receiver's room mask */
bit squeued = 0;     /* the sender is in futex_wait */
byte sspur = 0;
byte taken = 0;

inline skick() {
	if
	:: atomic { swstate == SLEEPING -> swstate = RUNNING };  /* S2 + S3 CAS */
	   atomic { if :: squeued -> squeued = 0 :: else -> skip fi }   /* FUTEX_WAKE */
	:: else -> skip
	fi
}

proctype room_sender() {
	byte n = 0;
	do
	:: n == SENDS -> break
	:: else ->
		if
		:: ringfull ->
#ifndef BROKEN_ROOM_WANT_LATE
			want = 1;                                    /* R1 */
#endif
			do
			:: !ringfull -> break                            /* try: room */
			:: else ->
				swstate = SLEEPING;                      /* W2 */
				if
				:: !ringfull -> swstate = RUNNING            /* W3: room, do not sleep */
				:: else ->
#ifdef BROKEN_ROOM_WANT_LATE
					want = 1;
#endif
					atomic { if :: swstate == SLEEPING -> squeued = 1 :: else -> skip fi };  /* W4 */
					if
					:: squeued == 0 -> skip
					:: atomic { squeued == 1 && sspur < MAXSPUR -> squeued = 0; sspur++ }
					fi;
					swstate = RUNNING                    /* W5 */
				fi
			od;
			want = 0                                     /* R3 */
		:: else -> skip
		fi;
		ringfull = 1;                                        /* S1: the message */
		n++
	od
}

proctype room_receiver() {
	do
	:: taken == SENDS + 1 -> break
	:: else ->
		ringfull == 1;                                       /* a message to take */
#ifdef BROKEN_ROOM_CHECK_FIRST
		if
		:: want -> ringfull = 0; skick()
		:: else -> ringfull = 0
		fi;
#else
		ringfull = 0;                                        /* C1 */
		if :: want -> skick() :: else -> skip fi;         /* C2, S2-S3 */
#endif
		taken++
	od
}

init {
	atomic { run room_sender(); run room_receiver() }
}
#endif /* ROOM */
