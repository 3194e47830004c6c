/*
 * slot.pml - the parking-slot handshake of src/waiter/waiter.c, checked
 * with spin: no wake-up is lost, and a wait never returns unreleased.
 *
 * Mapping to the C code (labels as in the essay of waiter.c):
 *   W2  atomic_exchange(state, SLEEPING)          waiter: state = SLEEPING
 *   W3  load(token) == 1 -> return                waiter: token == 1 -> ...
 *   W4  futex_wait(&state, SLEEPING)              atomic check-and-queue,
 *       then block until woken - or a spurious wake-up (bounded here by
 *       MAXSPUR: unbounded spurious wake-ups would hide a lost wake);
 *   W5  state = RUNNING; load(token)              then loop to W2
 *   R1  store(token, 1)                           releaser
 *   R2  load(state)                               releaser
 *   R3  CAS(state, SLEEPING -> RUNNING); futex_wake(&state, 1)
 * Two releasers run concurrently with one waiter that waits twice (the
 * second wait models slot reuse: a late kick from the first wait's second
 * releaser must not break it).  The polling phase (W1) only reads token,
 * so it is folded into W3.  Memory is sequentially consistent: the C code
 * uses seq_cst for W2, W3, R1, R2 and R3, and the argument needs nothing
 * weaker.  The kernel's futex is modelled by `queued` (the waiter is on the
 * futex queue) under one atomic step per futex operation, as the kernel's
 * hash-bucket lock makes it.
 *
 * -DSHARED models a slot queued on a nemo_cond (waiter.c, SHARED WORD):
 * it sleeps on the condvar's shared word `bseq` (B1: read it before W2;
 * B2: futex_wait(bseq, seen)); a kick, after its CAS, bumps bseq and wakes
 * the sleepers on it (K2, K3).  The second wait sleeps on another
 * condvar's word (cw = 2), so a stray kick from the first wait that reads
 * the slot's word must read it after its CAS (K1) - -DSHARED -DK1EARLY
 * reads it before, and spin must find the lost wake-up that causes.
 *
 * -DBROKEN moves W3 before W2 (check, then publish): spin must then find a
 * lost wake-up (an invalid end state), which shows the model can fail.
 */
#define RUNNING  0
#define SLEEPING 2
#ifndef MAXSPUR
#define MAXSPUR 1
#endif

byte state = RUNNING;
bit token = 0;
bit queued = 0;          /* the waiter sleeps in futex_wait */
byte round = 0;          /* which wait the releasers release */
byte spur = 0;
byte returned = 0;       /* waits completed */
#ifdef SHARED
byte bseq[3];            /* shared words of condvars 1 and 2 */
byte cw = 0;             /* the condvar the slot is queued on now */
byte qon = 0;            /* the word the slot sleeps on (futex queue) */
#endif

inline futex_wake() {
	atomic { if :: queued -> queued = 0 :: else -> skip fi }
}

#ifdef SHARED
inline kick() {
	byte kw;
#ifdef K1EARLY
	kw = cw;                                            /* K1 too early */
#endif
	if
	:: atomic { state == SLEEPING -> state = RUNNING };   /* R2 + CAS */
#ifndef K1EARLY
	   kw = cw;                                          /* K1 */
#endif
	   bseq[kw]++;                                       /* K2 */
	   atomic { if :: queued && qon == kw -> queued = 0 :: else -> skip fi }   /* K3 */
	:: else -> skip
	fi
}
#else
inline kick() {
	if
	:: atomic { state == SLEEPING -> state = RUNNING };   /* R2 + CAS */
	   futex_wake()
	:: else -> skip                                      /* kick avoided */
	fi
}
#endif

proctype releaser(byte r) {
	/* Release wait r once the waiter armed it.  A releaser that comes late
	 * (wait r is over) finds nothing to release, but may still kick: the
	 * stray kick of waiter.c's LIFETIME paragraph, landing on a later
	 * wait. */
	if
	:: atomic { round == r -> token = 1 }        /* R1 */
	:: round > r -> skip
	fi;
	kick()                                       /* R2, R3 */
}

active proctype waiter() {
	byte w = 1;
#ifdef SHARED
	byte seen;
#endif
	do
	:: w <= 2 ->
#ifdef SHARED
		cw = w;                              /* queued on condvar w */
#endif
		atomic { token = 0; round = w };     /* arm, then become findable */
		do
		::
#ifdef SHARED
			seen = bseq[cw];                                /* B1 */
#endif
#ifdef BROKEN
			if :: token == 1 -> break :: else -> skip fi;   /* W3 too early */
			state = SLEEPING;                               /* W2 */
#else
			state = SLEEPING;                               /* W2 */
			if :: token == 1 -> state = RUNNING; break :: else -> skip fi;  /* W3 */
#endif
#ifdef SHARED
			/* B2: futex_wait(bseq[cw], seen), atomic check-and-queue */
			atomic { if :: bseq[cw] == seen -> queued = 1; qon = cw :: else -> skip fi };
#else
			/* W4: futex_wait(&state, SLEEPING), atomic check-and-queue */
			atomic { if :: state == SLEEPING -> queued = 1 :: else -> skip fi };
#endif
			if
			:: queued == 0 -> skip                               /* woken (or EAGAIN) */
			:: atomic { queued == 1 && spur < MAXSPUR -> queued = 0; spur++ }  /* spurious */
			fi;
			state = RUNNING;                                     /* W5 */
			if :: token == 1 -> break :: else -> skip fi
		od;
		assert(token == 1);           /* never returns unreleased */
		returned++;
		w++
	:: else -> break
	od
}

init {
	atomic {
		run releaser(1); run releaser(1);    /* two concurrent releasers of wait 1 */
		run releaser(2)
	}
}
