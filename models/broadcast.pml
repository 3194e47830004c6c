/*
 * broadcast.pml - the flat broadcast of nemo_cond (src/events/cond.c,
 * BROADCAST) through nemo__waiter_kick_many (src/waiter/waiter.c), checked
 * with spin: no waiter is left asleep, and a broadcast to waiters that all
 * poll makes no FUTEX_WAKE.
 *
 * Two waiter slots queued on one condvar sleep on its shared word `bseq`,
 * each with its own bit (waiter.c, SHARED WORD).  The broadcaster, having
 * detached both:
 *   R1  token[i] := 1 for both (seq_cst stores);
 *   F   a full fence (NEMO__FENCE at the top of kick_many);
 *   R2/R3 for each: load(state) == SLEEPING and CAS(SLEEPING -> RUNNING)
 *       -> claimed[i] (and the slot's bit joins the wake);
 *   K2  if anything was claimed: fetch_add(bseq, 1);
 *   K3  FUTEX_WAKE_BITSET(bseq, all, OR of the claimed bits).
 * A waiter (nemo__wait_loop with the slot ops):
 *   B1 seen := bseq; W2 state := SLEEPING; W3 token == 1 -> RUNNING, done;
 *   B2 futex_wait_bitset(bseq, seen, bit): atomically, sleep only while
 *      bseq == seen; woken when a wake's bits include its bit (or
 *      spuriously, at most MAXSPUR times in all);
 *   W5 state := RUNNING; token == 1 -> done; else back to B1.
 * Optionally (-DPOLL) waiter 0 never sleeps: it polls its token (W1), so
 * the broadcaster must claim nobody and skip K2/K3 when waiter 1 polls too
 * (-DPOLL -DPOLL1): asserted through `wakes`.
 *
 * Memory is sequentially consistent (every access named above is seq_cst
 * in C, or ordered by the fence); the kernel's futex is `queued[i]` under
 * one atomic step per futex operation.
 *
 * Broken variants that spin must catch:
 *   -DBROKEN_ONE_BIT   the wake carries only the first claimed slot's bit
 *                      (a lost wake-up: invalid end state);
 *   -DBROKEN_NO_FENCE  the claims read state before the tokens are stored
 *                      (loads hoisted above R1: a lost wake-up);
 *   -DPOLL -DPOLL1 -DBROKEN_ALWAYS_WAKE  the wake made whatever the
 *                      states (the code before kick_many): a syscall for
 *                      waiters that all poll.
 */
#define RUNNING  0
#define POLLING  1
#define SLEEPING 2
#ifndef MAXSPUR
#define MAXSPUR 1
#endif

byte state[2];
bit token[2];
bit queued[2];
byte bseq = 0;
byte spur = 0;
byte done = 0;
byte wakes = 0;          /* FUTEX_WAKEs the broadcaster made */

proctype waiter(byte i) {
	byte seen;
#ifdef POLL
#ifdef POLL1
#define POLLERS(i) (i == 0 || i == 1)
#else
#define POLLERS(i) (i == 0)
#endif
	if
	:: POLLERS(i) ->
		state[i] = POLLING;                                  /* W1 */
		token[i] == 1;
		state[i] = RUNNING;
		goto out
	:: else -> skip
	fi;
#endif
	do
	::
		seen = bseq;                                         /* B1 */
		state[i] = SLEEPING;                                 /* W2 */
		if :: token[i] == 1 -> state[i] = RUNNING; break :: else -> skip fi;   /* W3 */
		atomic { if :: bseq == seen -> queued[i] = 1 :: else -> skip fi };    /* B2 */
		if
		:: queued[i] == 0 -> skip
		:: atomic { queued[i] == 1 && spur < MAXSPUR -> queued[i] = 0; spur++ }
		fi;
		state[i] = RUNNING;                                  /* W5 */
		if :: token[i] == 1 -> break :: else -> skip fi
	od;
out:
	assert(token[i] == 1);
	done++
}

proctype broadcaster() {
	bit claimed0 = 0, claimed1 = 0;
#ifdef BROKEN_NO_FENCE
	/* the claims' loads of state, hoisted above the token stores */
	byte s0 = state[0], s1 = state[1];
	token[0] = 1;
	token[1] = 1;
	if :: s0 == SLEEPING -> atomic { if :: state[0] == SLEEPING -> state[0] = RUNNING; claimed0 = 1 :: else -> skip fi } :: else -> skip fi;
	if :: s1 == SLEEPING -> atomic { if :: state[1] == SLEEPING -> state[1] = RUNNING; claimed1 = 1 :: else -> skip fi } :: else -> skip fi;
#else
	token[0] = 1;                                                /* R1 */
	token[1] = 1;
	atomic { if :: state[0] == SLEEPING -> state[0] = RUNNING; claimed0 = 1 :: else -> skip fi };   /* R2, R3 */
	atomic { if :: state[1] == SLEEPING -> state[1] = RUNNING; claimed1 = 1 :: else -> skip fi };
#endif
#ifdef BROKEN_ALWAYS_WAKE
	claimed0 = 1;            /* the old flat broadcast: a wake whatever the states */
#endif
	if
	:: claimed0 || claimed1 ->
		bseq++;                                              /* K2 */
		atomic {                                             /* K3 */
			wakes++;
#ifdef BROKEN_ONE_BIT
			if
			:: claimed0 -> queued[0] = 0
			:: else -> queued[1] = 0
			fi
#else
			if :: claimed0 -> queued[0] = 0 :: else -> skip fi;
			if :: claimed1 -> queued[1] = 0 :: else -> skip fi
#endif
		}
	:: else -> skip
	fi
}

init {
	atomic { run waiter(0); run waiter(1); run broadcaster() };
	done == 2;
#if defined(POLL) && defined(POLL1)
	assert(wakes == 0);               /* all polled: no syscall */
#endif
	skip
}
