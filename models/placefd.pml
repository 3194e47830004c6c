/*
 * placefd.pml - a place waiting in an event loop on its eventfd
 * (src/messaging/placewait.c, THE FILE DESCRIPTOR; kick.c, fd_kick).
 *
 * Two senders each send M messages: enqueue (S1), set their hint bit
 * unless it is set (S4), and if they set it, kick: a receiver that is
 * armed gets one eventfd write (F3: exchange(armed, 0) == 1 -> write,
 * then count the write).  The receiver loops as the documented event
 * loop does: block until the eventfd is readable (epoll_wait), then
 * nemo_poll: F4 disarm, F5 read back the counted writes and those of
 * kickers still in their bracket (fd_kickers > 0), drain (D2:
 * exchange the hint word, take what is queued), F1 arm, F2 re-check:
 * anything pending -> exchange(armed, 0), and if it was still ours, write
 * the eventfd itself.
 *
 * Checked: the receiver never blocks in epoll_wait with a message queued
 * and nobody left to write the eventfd (an invalid end state: the wait is
 * not an end label; the receiver ends only once it has taken all 2*M).
 * And the descriptor is never left readable after F5 by a write already
 * made (asserted at F5: no unit left behind, counted or not), so the loop
 * does not spin on it while a kicker that wrote is off the CPU before it
 * counted.  All operations are seq_cst in the C code; spin's
 * interleavings are sequentially consistent.
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
 */
#define M 2
#define N (2 * M)

byte q[2];          /* messages queued by each sender, not yet taken */
bit hint[2];        /* the receiver's hint word, one bit per sender */
bit armed;
byte efd;           /* the eventfd's counter */
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
	   efd++;
	   writes++
	:: else -> skip
	fi;
	kickers--
}

inline arm() {
	armed = 1;                                         /* F1 */
#ifndef BROKEN_NO_RECHECK
	if                                                 /* F2 */
	:: (hint[0] || hint[1] || q[0] || q[1]) ->
		atomic { was = armed; armed = 0 };
		if :: was -> efd++; writes++ :: else -> skip fi
	:: else -> skip
	fi
#endif
}

inline poll() {
	atomic { mine = armed; armed = 0 };                /* F4 */
#ifdef BROKEN_SKIP_READ
	if :: !mine && writes != rd -> rd = rd + efd; efd = 0 :: else -> skip fi;
#elif defined(BROKEN_COUNTED_ONLY)
	atomic {
		if :: writes != rd -> rd = rd + efd; efd = 0 :: else -> skip fi;
		assert(efd == 0)
	}
#else
	atomic {                                           /* F5 */
		if :: writes != rd || kickers > 0 -> rd = rd + efd; efd = 0 :: else -> skip fi;
		assert(efd == 0)
	}
#endif
	/* D2: exchange each hint bit, then take what is queued */
	hint[0] = 0; atomic { taken = taken + q[0]; q[0] = 0 };
	hint[1] = 0; atomic { taken = taken + q[1]; q[1] = 0 };
	arm()
}

proctype sender(bit me)
{
	byte i;
	for (i : 1 .. M) {
		q[me]++;                                   /* S1 */
		if                                         /* S4 */
		:: hint[me] == 1 -> skip                   /* set already: its setter kicked */
		:: else -> hint[me] = 1; kick()            /* S5 */
		fi
	}
	done++
}

proctype receiver()
{
	bit was;
	bit mine;
	arm();                                             /* nemo_place_fd */
	do
	:: taken == N -> break
	:: else ->
		(efd > 0);                                 /* epoll_wait: not an end state */
		poll()
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
