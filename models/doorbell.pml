/*
 * doorbell.pml - the MPI progress thread's sleep and its doorbell
 * (src/mpi/mpi_internal.h, THE PROGRESS THREAD'S SLEEP: T1-T4, K1-K3;
 * src/mpi/record.c, thr_kick and ring: R1-R3; src/mpi/progress.c,
 * thr_main), checked with spin:
 *
 *   V1  no work is slept through: the run never ends with the progress
 *       thread blocked in its futex_wait while work it must do - a local
 *       kicker's (a funneled send, a handed slot done, a stop) or a
 *       message a rank of this host sent it through MPI - waits and no
 *       wake is coming (an invalid end state: the thread blocked).  The
 *       sleep's timeout is only a safety net (a message could wait
 *       idle_max_ns, 100 ms with every peer belled), so the model's sleep
 *       has none.
 *
 * THE MODEL
 *
 * The progress thread P of rank B polls (try_progress: MPI and the local
 * work) and, finding nothing, sleeps on its bell's kick word.  NL local
 * kickers each push one piece of work for P (K1) and kick (K2, K3); NR
 * remote ranks of the same host each send P one message, whose MPI send
 * completes (the message is in B's MPI queue, in shared memory) and then
 * ring B's doorbell (R1-R3).  P handles what it finds (the ghost `got`)
 * and stops once it has all of it.  The spin phase (spin_ns of polling
 * before the sleep) and the backoff are the same as one more pass, and
 * are not modelled; nor are peers of other hosts (no bell: the timeout is
 * what bounds their delay, by design).  In THREAD mode only P takes
 * agent_lock (and finalize, after stop), so T3's try_progress always
 * looks.  -DMAXSPUR=n: up to n spurious returns of the futex_wait.
 * What the ring relies on from MPI: a send that MPI_Test reports
 * complete to a rank of this host has its message where B's next MPI
 * call finds it (an eager send in B's shared queue; a rendezvous send
 * matched by B already).  An MPI that completed a send still buffered on
 * the sender's side would leave the message to P's timeout: a delay, not
 * a loss, and outside the model.
 *
 * Memory: x86-TSO for the stores the handshake is about: a kicker's K1
 * (its FIFO push and the unlock of its rank's lock: plain stores and a
 * release) and the remote rank's message (MPI's writes into the shared
 * queue, whatever they are) may sit in their writer's store buffer past
 * its next loads; a buffer empties at any time (the tso process), at its
 * writer's next locked instruction (K2's fetch_add) or fence (R1).  P's
 * T1 is a seq_cst store and a fence (its buffer empties at once), its
 * loads see memory.  The futex is modelled as the kernel does it: T4
 * blocks only if kick still equals T2's value, atomically; a FUTEX_WAKE
 * wakes P only if P is blocked then, and is lost otherwise.
 *
 * MAPPING TO THE C CODE
 *
 *   P, thr_main (progress.c): n = try_progress (the look: take every
 *     piece of work in memory); n -> again; else T1 store sleeping = 1
 *     (seq_cst) and the fence; T2 k = load kick (seq_cst); T3 try_progress
 *     again: found -> skip the sleep; else T4 nemo__word_sleep(kick, k):
 *     FUTEX_WAIT; then store sleeping = 0 (relaxed)
 *   local kicker, send_to's funneled send (send.c) and the handed slot's
 *     done (progress.c), finalize's stop (mpi.c): K1 its work (buffered);
 *     thr_kick (record.c): K2 fetch_add(kick, 1, seq_cst); K3
 *     load(sleeping, seq_cst): 1 -> FUTEX_WAKE
 *   remote rank: its MPI send to B (the message written into B's queue:
 *     buffered); reap (record.c) finds it complete (MPI_Test) and calls
 *     ring: R1 seq_cst fence; R2 load(sleeping, relaxed): 1 -> R3
 *     fetch_add(kick, 1, seq_cst) and FUTEX_WAKE
 *
 * BROKEN VARIANTS (tests/check_models.sh: each must fail)
 *
 *   -DBROKEN_LOOK_FIRST      P makes its last look (T3) before publishing
 *                            sleeping (T1): a kicker between the two
 *                            reads sleeping = 0, bumps kick before T2, and
 *                            P blocks on the new value
 *   -DBROKEN_K3_FIRST        the kicker reads sleeping before its bump
 *                            (K3 before K2): its push may still be in its
 *                            store buffer when it reads 0, and T3 misses it
 *   -DBROKEN_NO_R1           ring without R1's fence: the message may
 *                            still be in the remote rank's store buffer
 *                            when R2 reads sleeping = 0
 *   -DBROKEN_RING_NO_BUMP    R3 wakes without bumping kick: a FUTEX_WAKE
 *                            between P's T2 and T4 is lost, and T4 blocks
 */

#ifndef NL
#define NL 1
#endif
#ifndef NR
#define NR 1
#endif
#ifndef MAXSPUR
#define MAXSPUR 0
#endif
#define N (NL + NR)
#if NL < 1 || NL > 2 || NR < 1 || NR > 2
#error NL and NR: 1 or 2
#endif

byte lq = 0;          /* local work in memory (the funneled FIFOs, done slots, stop) */
byte rq = 0;          /* messages in B's MPI queue, in memory */
bit lbuf[NL];         /* kicker i's K1 still in its store buffer */
bit rbuf[NR];         /* remote rank j's message still in its store buffer */
bit sleeping = 0;     /* bell->sleeping */
byte kick = 0;        /* bell->kick, the futex word */
bit blocked = 0;      /* P is blocked in FUTEX_WAIT on kick */
byte got = 0;         /* ghost: pieces of work P took */
byte spur = 0;

/* FUTEX_WAKE(kick, 1): wakes P only if it is blocked now. */
inline futex_wake() {
	atomic { if :: blocked -> blocked = 0 :: else -> skip fi }
}

inline l_flush(i) {
	if :: lbuf[i] -> lbuf[i] = 0; lq++ :: else -> skip fi
}

inline r_flush(j) {
	if :: rbuf[j] -> rbuf[j] = 0; rq++ :: else -> skip fi
}

/* try_progress: everything in memory. */
inline look(n) {
	atomic { n = lq + rq; got = got + n; lq = 0; rq = 0 }
}

proctype thread()
{
	byte n, k;
	do
	:: got == N -> break
	:: else ->
		look(n);
		if
		:: n > 0 -> skip                                 /* work: pass again */
		:: else ->
#ifdef BROKEN_LOOK_FIRST
			look(n);                                 /* T3, too early */
			sleeping = 1;                            /* T1 */
			k = kick;                                /* T2 */
#else
			sleeping = 1;                            /* T1: store, fence */
			k = kick;                                /* T2 */
			look(n);                                 /* T3 */
#endif
			if
			:: n > 0 || got == N -> skip
			:: else ->
				atomic { if :: kick == k -> blocked = 1 :: else -> skip fi };  /* T4 */
				if
				:: !blocked -> skip                       /* woken, or kick changed */
				:: atomic { blocked && spur < MAXSPUR -> blocked = 0; spur++ }
				fi
			fi;
			sleeping = 0
		fi
	od
}

proctype kicker(byte i)
{
	bit s;
	lbuf[i] = 1;                                             /* K1 (buffered) */
#ifdef BROKEN_K3_FIRST
	s = sleeping;                                            /* K3, too early */
	atomic { l_flush(i); kick++ };                           /* K2 */
#else
	atomic { l_flush(i); kick++ };                           /* K2: locked */
	s = sleeping;                                            /* K3 */
#endif
	if
	:: s -> futex_wake()
	:: else -> skip
	fi
}

proctype remote(byte j)
{
	rbuf[j] = 1;                                             /* MPI's write of the message */
	/* the send completes: reap's MPI_Test, then ring */
#ifndef BROKEN_NO_R1
	atomic { r_flush(j) };                                   /* R1: fence */
#endif
	if
	:: sleeping ->                                           /* R2 */
#ifndef BROKEN_RING_NO_BUMP
		atomic { r_flush(j); kick++ };                   /* R3: fetch_add */
#endif
		futex_wake()
	:: else -> skip
	fi
}

/* The store buffers drain on their own at any time. */
active proctype tso()
{
end:
	do
	:: atomic { lbuf[0] -> l_flush(0) }
#if NL > 1
	:: atomic { lbuf[1] -> l_flush(1) }
#endif
	:: atomic { rbuf[0] -> r_flush(0) }
#if NR > 1
	:: atomic { rbuf[1] -> r_flush(1) }
#endif
	od
}

init {
	byte i;
	atomic {
		run thread();
		i = 0;
		do :: i < NL -> run kicker(i); i++ :: else -> break od;
		i = 0;
		do :: i < NR -> run remote(i); i++ :: else -> break od
	}
}
