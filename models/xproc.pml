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
 *             XW2 wstate = SLEEPING (seq_cst exchange)
 *             XW3 any msg[s] or deaths != seen -> wstate = RUNNING, retry
 *             XW4 futex_wait(wstate, SLEEPING): atomic check-and-queue,
 *                then block until woken, or a spurious wake-up (at most
 *                MAXSPUR: unbounded ones would hide a lost wake)
 *             XW5 wstate = RUNNING
 *   sender s  XS1 msg[s] = 1 (the slot's seq store, seq_cst)
 *             XS2 load wstate; XS3 CAS SLEEPING -> RUNNING and FUTEX_WAKE
 *   reclaim   (-DDEATH) sender 1 dies before or after its send; then
 *             XD2 deaths++ (seq_cst), XD3 kick as XS2-XS3
 * Memory is sequentially consistent: every access above is seq_cst in
 * the C code (the field stores before XS1 are relaxed and ordered by XS1's
 * release, which the model folds into XS1).
 *
 * Broken variants that spin must catch (an invalid end state: the
 * receiver asleep for ever):
 *   -DBROKEN_KICK_FIRST   the sender reads wstate before XS1
 *   -DBROKEN_CHECK_FIRST  the receiver re-checks (XW3) before XW2
 *   -DDEATH -DBROKEN_DEATH_KICK_FIRST   the reclaimer kicks before XD2
 *
 * -DROOM checks the other sleep instead (xproc.c, THE WAIT FOR ROOM): a
 * sender that finds its ring full sleeps on its own place's futex word
 * until the receiver frees a slot.  The ring has one slot, full at the
 * start; the sender sends SENDS messages, waiting for room before each;
 * the receiver takes SENDS + 1.
 *   sender    XR1 want = 1 (its bit in the receiver's room mask, seq_cst RMW)
 *             try: room -> done; XW2 swstate = SLEEPING; XW3 room? ->
 *             swstate = RUNNING, retry; XW4 futex_wait; XW5 swstate = RUNNING
 *             XR3 want = 0; XS1 ringfull = 1 (its message)
 *   receiver  XC1 ringfull = 0 (the slot's seq, seq_cst); XC2 load want,
 *             and if set, XS2-XS3 on the sender's word
 * An invalid end state is the sender asleep with room in its ring (the
 * receiver then blocks for ever on an empty ring).  Broken variants:
 *   -DROOM -DBROKEN_ROOM_CHECK_FIRST  the receiver reads want before XC1
 *   -DROOM -DBROKEN_ROOM_WANT_LATE    the sender publishes want after its
 *                                     XW3 re-check (per sleep)
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
	:: atomic { wstate == SLEEPING -> wstate = RUNNING };   /* XS2 + XS3 CAS */
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
	atomic { msg[s] = 1; sent++ };                          /* XS1 */
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
	atomic { msg[s] = 1; sent++ };                          /* XS1 */
	kick();                                                  /* XS2, XS3 */
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
	deaths++;                                                /* XD2 */
	kick();                                                  /* XD3 */
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
		wstate = SLEEPING;                                   /* XW2 */
#else
		wstate = SLEEPING;                                   /* XW2 */
		if
		:: msg[0] || msg[1] || deaths != seen -> wstate = RUNNING; goto again   /* XW3 */
		:: else -> skip
		fi;
#endif
		atomic { if :: wstate == SLEEPING -> queued = 1 :: else -> skip fi };   /* XW4 */
		if
		:: queued == 0 -> skip
		:: atomic { queued == 1 && spur < MAXSPUR -> queued = 0; spur++ }
		fi;
		wstate = RUNNING;                                    /* XW5 */
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
	:: atomic { swstate == SLEEPING -> swstate = RUNNING };  /* XS2 + XS3 CAS */
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
			want = 1;                                    /* XR1 */
#endif
			do
			:: !ringfull -> break                            /* try: room */
			:: else ->
				swstate = SLEEPING;                      /* XW2 */
				if
				:: !ringfull -> swstate = RUNNING            /* XW3: room, do not sleep */
				:: else ->
#ifdef BROKEN_ROOM_WANT_LATE
					want = 1;
#endif
					atomic { if :: swstate == SLEEPING -> squeued = 1 :: else -> skip fi };  /* XW4 */
					if
					:: squeued == 0 -> skip
					:: atomic { squeued == 1 && sspur < MAXSPUR -> squeued = 0; sspur++ }
					fi;
					swstate = RUNNING                    /* XW5 */
				fi
			od;
			want = 0                                     /* XR3 */
		:: else -> skip
		fi;
		ringfull = 1;                                        /* XS1: the message */
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
		ringfull = 0;                                        /* XC1 */
		if :: want -> skick() :: else -> skip fi;         /* XC2, XS2-XS3 */
#endif
		taken++
	od
}

init {
	atomic { run room_sender(); run room_receiver() }
}
#endif /* ROOM */
