/*
 * xprockept.pml - kept sends of a shared-domain place (src/xproc/kept.c,
 * XK4 ROOM REQUESTS and THE BACKPRESSURE), checked with spin: a place that
 * keeps a send for a receiver whose ring is full may sleep, and is woken
 * when the receiver frees room; a sender waiting for a holder to release
 * it (XW_HELD) is woken by the release.
 *
 * Default: place P keeps one send for receiver R, whose ring (one slot)
 * holds an unread message.
 *   P   XK1 kept = 1; XR1 want = 1 (its bit in R's room mask, seq_cst RMW,
 *       at the first kept entry);
 *       its wait for messages: try = the flush (room -> XS1, kept = 0);
 *       XW2 pws = SLEEPING; XW3 the slot of its kept entry free? ->
 *       pws = RUNNING, retry; XW4 futex_wait(pws, SLEEPING) (at most
 *       MAXSPUR spurious wake-ups); XW5 pws = RUNNING
 *   R   takes its two messages: XC1 ringfull = 0 (seq_cst), XC2 load want
 *       and, if set, XS2-XS3 on P's word
 * An invalid end state is R blocked for its second message while P
 * sleeps with the message kept.  Broken variants:
 *   -DBROKEN_NO_ASK    P never sets its bit (R cannot know to kick it)
 *   -DBROKEN_NO_LOOK   P's XW3 does not look at the kept entry's slot
 *
 * -DHELD: a sender S whose blocking send waits for holder H's bit in its
 * own room mask to clear (sleep.c, XW_HELD).
 *   S   try: bit clear -> done; XW2 sws = SLEEPING; XW3 bit clear? ->
 *       sws = RUNNING; XW4; XW5
 *   H   delivered what it kept: XR3 held = 0 (seq_cst RMW); XR4 XS2-XS3 on
 *       S's word
 * An invalid end state is S asleep with the bit clear.  Broken variants:
 *   -DHELD -DBROKEN_HELD_NO_KICK     no XR4
 *   -DHELD -DBROKEN_HELD_KICK_FIRST  XR4 before XR3
 *
 * Every access is seq_cst in the C code (the model is sequentially
 * consistent).
 */
#define RUNNING  0
#define SLEEPING 2
#ifndef MAXSPUR
#define MAXSPUR 1
#endif

#ifndef HELD

byte pws = RUNNING;
bit pq = 0;          /* P in futex_wait */
byte pspur = 0;
bit ringfull = 1;    /* ring P -> R: its one slot holds an unread message */
bit want = 0;        /* P's bit in R's room mask */
bit kept = 0;
byte taken = 0;

inline kickp() {
	if
	:: atomic { pws == SLEEPING -> pws = RUNNING };            /* XS2 + XS3 CAS */
	   atomic { if :: pq -> pq = 0 :: else -> skip fi }       /* FUTEX_WAKE */
	:: else -> skip
	fi
}

active proctype P() {
	kept = 1;                                                /* XK1 */
#ifndef BROKEN_NO_ASK
	want = 1;                                                /* XR1 */
#endif
	do
	:: kept == 0 -> break
	:: else ->
		/* try: the flush */
		atomic { if :: !ringfull -> ringfull = 1; kept = 0 :: else -> skip fi };
		if
		:: kept == 0 -> want = 0; break                          /* XR3 */
		:: else -> skip
		fi;
		pws = SLEEPING;                                      /* XW2 */
		if
#ifndef BROKEN_NO_LOOK
		:: !ringfull -> pws = RUNNING                        /* XW3: the kept slot is free */
#endif
		:: else ->
			atomic { if :: pws == SLEEPING -> pq = 1 :: else -> skip fi };   /* XW4 */
			if
			:: pq == 0 -> skip
			:: atomic { pq == 1 && pspur < MAXSPUR -> pq = 0; pspur++ }
			fi;
			pws = RUNNING                                    /* XW5 */
		fi
	od
}

active proctype R() {
	do
	:: taken == 2 -> break
	:: else ->
		ringfull == 1;                                       /* a message to take */
		ringfull = 0;                                        /* XC1 */
		if :: want -> kickp() :: else -> skip fi;         /* XC2, XS2-XS3 */
		taken++
	od
}

#else /* HELD */

byte sws = RUNNING;
bit sq = 0;
byte sspur = 0;
bit held = 1;        /* H's bit in S's room mask */

inline kicks() {
	if
	:: atomic { sws == SLEEPING -> sws = RUNNING };
	   atomic { if :: sq -> sq = 0 :: else -> skip fi }
	:: else -> skip
	fi
}

active proctype S() {
	do
	:: held == 0 -> break                                    /* try */
	:: else ->
		sws = SLEEPING;                                      /* XW2 */
		if
		:: held == 0 -> sws = RUNNING                        /* XW3 */
		:: else ->
			atomic { if :: sws == SLEEPING -> sq = 1 :: else -> skip fi };   /* XW4 */
			if
			:: sq == 0 -> skip
			:: atomic { sq == 1 && sspur < MAXSPUR -> sq = 0; sspur++ }
			fi;
			sws = RUNNING                                    /* XW5 */
		fi
	od
}

active proctype H() {
#if defined(BROKEN_HELD_NO_KICK)
	held = 0                                                 /* XR3 only */
#elif defined(BROKEN_HELD_KICK_FIRST)
	kicks();                                                 /* XR4 */
	held = 0                                                 /* XR3 */
#else
	held = 0;                                                /* XR3 */
	kicks()                                                  /* XR4 */
#endif
}

#endif /* HELD */
