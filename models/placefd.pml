/*
 * placefd.pml - a place waiting in an event loop on its eventfd
 * (src/messaging/placewait.c, THE FILE DESCRIPTOR; kick.c, fd_kick;
 * grant.c, THE STREAM GRANT, as an event loop's place keeps it).
 *
 * Two senders each send M messages: enqueue (S1); unless the receiver
 * granted them its stream (S4g), set their hint bit unless it is set
 * (S4), and if they set it, kick: a receiver that is armed gets one
 * eventfd write (F3: exchange(armed, 0) == 1 -> write, then count the
 * write).  The receiver loops as the documented event loop does: block
 * until the eventfd is readable (epoll_wait), then nemo_poll: F4 disarm,
 * drain (D2: exchange the hint word, take what is queued; G1: it may
 * grant a sender its stream, the descriptor being disarmed), then arm:
 * F7 (not at nemo_place_fd's arming) nothing pending but grants held ->
 * GR1/GR3 take them back and drain again; F0 anything pending -> write the descriptor (edge-triggered loops see
 * only new writes), keep the grants, done; else
 * F5 read back the counted writes and those of kickers still in their
 * bracket (fd_kickers > 0), GR1/GR3 take the grants back and set their
 * hint bits (GR2's barrier is sequential consistency here), F1 arm, F2
 * re-check: anything pending -> exchange(armed, 0), and if it was still
 * ours, write the eventfd itself.
 *
 * With -DEDGE the loop is edge-triggered (EPOLLET, as tokio's): it wakes
 * only for a write made since it last woke.
 *
 * Checked: the receiver never blocks in epoll_wait with a message queued
 * and nobody left to write the eventfd (an invalid end state: the wait is
 * not an end label; the receiver ends only once it has taken all 2*M).
 * And a quiet poll leaves the descriptor unreadable (asserted at F5 and
 * at the end, after one poll: no unit left behind, counted or not, and
 * no write for the grants' hint bits), so the loop does not
 * spin on it while a kicker that wrote is off the CPU before it counted.
 * All operations are seq_cst in the C code; spin's interleavings are
 * sequentially consistent.
 *
 * Broken variants that spin must reject:
 *   -DBROKEN_NO_RECHECK   arm without F2 (a message queued before the
 *                         arming, whose sender saw the receiver unarmed)
 *   -DBROKEN_SKIP_READ    F5 reads only when the disarm found the armed
 *                         flag taken (a write whose count arrives late
 *                         is never read: the loop spins - here: a
 *                         counted write is left unread at the end)
 *   -DBROKEN_COUNTED_ONLY F5 reads only when counted writes are ahead
 *                         (the code before 2026-11-27: a kicker between
 *                         its write and its count left the descriptor
 *                         readable, and the loop spun empty)
 *   -DBROKEN_F0_UNREADABLE F0 keeps the grants but writes nothing (a
 *                         granted message, no kick, no write)
 *   -DEDGE -DBROKEN_F0_IF_UNREAD  F0 writes only when no write is
 *                         unread (the descriptor is readable anyway): an
 *                         edge-triggered loop (-DEDGE: it wakes for a new
 *                         write only) never comes back
 *   -DBROKEN_GRANT_ARMED  a grant made while the descriptor is armed (by
 *                         a drain inside the place's own send, which the
 *                         receiver here makes between polls)
 *   -DBROKEN_NO_REVOKE    arm without taking the grants back
 *   -DBROKEN_NO_F7        arm after a stream without F7: the grants'
 *                         hint bits (GR3) are left to F2, which writes
 *                         the descriptor, and the quiet poll leaves it
 *                         readable for a round that finds nothing
 */
#define M 2
#define N (2 * M)

byte q[2];          /* messages queued by each sender, not yet taken */
bit hint[2];        /* the receiver's hint word, one bit per sender */
bit g[2];           /* the receiver's grant word, one bit per sender */
bit armed;
byte efd;           /* the eventfd's counter */
bit edge;           /* a write since the loop's last wake-up (EPOLLET) */
byte writes;        /* fd_writes: writes counted */
byte rd;            /* fd_read: writes read back */
byte taken;
byte done;          /* senders finished */
byte kickers;       /* fd_kickers: kickers between their bracket's ends */

inline kick() {
	/* F3 in its bracket */
	kickers++;
	if
	:: atomic { armed == 1 -> armed = 0 };
	   efd++; edge = 1;
	   writes++
	:: else -> skip
	fi;
	kickers--
}

inline grant() {
	/* G1, G0: only while the descriptor is disarmed */
#ifdef BROKEN_GRANT_ARMED
	if :: g[0] = 1 :: g[1] = 1 :: skip fi
#else
	if :: armed == 0 -> g[0] = 1 :: armed == 0 -> g[1] = 1 :: skip fi
#endif
}

inline arm(f7) {
#ifndef BROKEN_NO_F7
	if                                                 /* F7 */
	:: f7 && (g[0] || g[1]) && !(hint[0] || hint[1] || q[0] || q[1]) ->
		if :: g[0] -> g[0] = 0; hint[0] = 1 :: else -> skip fi;   /* GR1, GR3 */
		if :: g[1] -> g[1] = 0; hint[1] = 1 :: else -> skip fi;
		before = taken;
		hint[0] = 0; atomic { taken = taken + q[0]; q[0] = 0 };
		hint[1] = 0; atomic { taken = taken + q[1]; q[1] = 0 };
		if :: taken != before -> grant() :: else -> skip fi
	:: else -> skip
	fi;
#endif
	if                                                 /* F0 */
	:: (hint[0] || hint[1] || q[0] || q[1]) ->
#ifdef BROKEN_F0_IF_UNREAD
		if :: writes == rd -> efd++; edge = 1; writes++ :: else -> skip fi
#elif !defined(BROKEN_F0_UNREADABLE)
		efd++; edge = 1; writes++
#else
		skip
#endif
	:: else ->
		atomic {                                   /* F5 */
#ifdef BROKEN_SKIP_READ
			if :: !mine && writes != rd -> rd = rd + efd; efd = 0 :: else -> skip fi
#elif defined(BROKEN_COUNTED_ONLY)
			if :: writes != rd -> rd = rd + efd; efd = 0 :: else -> skip fi;
			assert(efd == 0)
#else
			if :: writes != rd || kickers > 0 -> rd = rd + efd; efd = 0 :: else -> skip fi;
			assert(efd == 0)
#endif
		};
#ifndef BROKEN_NO_REVOKE
		if :: g[0] -> g[0] = 0; hint[0] = 1 :: else -> skip fi;   /* GR1, GR3 */
		if :: g[1] -> g[1] = 0; hint[1] = 1 :: else -> skip fi;
#endif
		armed = 1;                                 /* F1 */
#ifndef BROKEN_NO_RECHECK
		if                                         /* F2 */
		:: (hint[0] || hint[1] || q[0] || q[1]) ->
			atomic { was = armed; armed = 0 };
			if :: was -> efd++; edge = 1; writes++ :: else -> skip fi
		:: else -> skip
		fi
#endif
	fi
}

inline poll() {
	atomic { mine = armed; armed = 0 };                /* F4 */
	/* D2: exchange each hint bit, then take what is queued */
	before = taken;
	hint[0] = 0; atomic { taken = taken + q[0]; q[0] = 0 };
	hint[1] = 0; atomic { taken = taken + q[1]; q[1] = 0 };
	if :: taken != before -> grant() :: else -> skip fi;   /* streams only */
	arm(1)
}

proctype sender(bit me)
{
	byte i;
	for (i : 1 .. M) {
		q[me]++;                                   /* S1 */
		if
		:: g[me] == 1 -> skip                      /* S4g: granted */
		:: else ->
			if                                 /* S4 */
			:: hint[me] == 1 -> skip           /* set already: its setter kicked */
			:: else -> hint[me] = 1; kick()    /* S5 */
			fi
		fi
	}
	done++
}

proctype receiver()
{
	bit was;
	bit mine;
	byte before;
	byte nested;
	mine = 0;
	arm(0);                                            /* nemo_place_fd: no F7 */
	do
	:: taken == N -> break
	:: else ->
#ifdef EDGE
		atomic { edge == 1 -> edge = 0 };          /* epoll_wait, EPOLLET */
#else
		(efd > 0);                                 /* epoll_wait: not an end state */
#endif
		poll()
	:: nested < 2 ->
		/* A drain inside the place's own send, between polls:
		 * armed or not, it takes what is queued, and may count a
		 * stream (G1 refuses while armed). */
		nested++;
		before = taken;
		hint[0] = 0; atomic { taken = taken + q[0]; q[0] = 0 };
		hint[1] = 0; atomic { taken = taken + q[1]; q[1] = 0 };
		if :: taken != before -> grant() :: else -> skip fi
	od;
	/* Quiet now: one more poll must leave the descriptor unreadable,
	 * or the event loop would spin on it forever. */
	(done == 2);
	poll();
	assert(efd == 0)
}

init {
	atomic {
		run sender(0);
		run sender(1);
		run receiver()
	}
}
