/*
 * doorbell.pml - the MPI progress thread's sleep and its doorbell
 * (src/mpi/mpi_internal.h, THE PROGRESS THREAD'S SLEEP: DBT1-DBT5, DBK1-DBK3;
 * src/mpi/record.c, thr_kick and ring: DBR1-DBR2; src/mpi/progress.c, the
 * source's ops; the domain's progress thread that runs them,
 * src/poll/progress.c, SOURCES; src/waiter/waiter.c, THE RAW WORD),
 * checked with spin.  The thread also sleeps on its own waiter slot
 * (futex_waitv of both words): a kick of the slot is, for the doorbell,
 * one more spurious return (-DMAXSPUR):
 *
 *   DBV1 no work is slept through: the run never ends with the progress
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
 * work) and, finding nothing, publishes SLEEPING in its bell's state
 * word and sleeps on it.  NL local kickers each push one piece of work
 * for P (DBK1) and kick (DBK2, DBK3); NR remote ranks of the same host each
 * send P one message, whose MPI send completes (the message is in B's
 * MPI queue, in shared memory) and then ring B's doorbell (DBR1, DBR2).  P
 * handles what it finds (the ghost `got`) and stops once it has all of
 * it.  The spin phase (spin_ns of polling before the sleep) and the
 * backoff are the same as one more pass, and are not modelled; nor are
 * peers of other hosts (no bell: the timeout is what bounds their delay,
 * by design).  In THREAD mode only P takes agent_lock (and finalize,
 * after stop), so DBT3's try_progress always looks.  -DMAXSPUR=n: up to n
 * spurious returns of the futex_wait.
 * What the ring relies on from MPI: a send that MPI_Test reports
 * complete to a rank of this host has its message where B's next MPI
 * call finds it (an eager send in B's shared queue; a rendezvous send
 * matched by B already).  An MPI that completed a send still buffered on
 * the sender's side would leave the message to P's timeout: a delay, not
 * a loss, and outside the model.
 *
 * Memory: x86-TSO for the stores the handshake is about: a kicker's DBK1
 * (its FIFO push and the unlock of its rank's lock: plain stores and a
 * release) and the remote rank's message (MPI's writes into the shared
 * queue, whatever they are) may sit in their writer's store buffer past
 * its next loads; a buffer empties at any time (the tso process), or at
 * its writer's fence (DBK2, DBR1).  P's DBT1 is a seq_cst store and a fence
 * (its buffer empties at once), its loads see memory.  The futex is
 * modelled as the kernel does it: DBT4 blocks only if state still holds
 * SLEEPING, atomically; a FUTEX_WAKE wakes P only if P is blocked then,
 * and is lost otherwise.
 *
 * MAPPING TO THE C CODE
 *
 *   P, the progress thread with the binding's source (src_pass,
 *     src_pending of src/mpi/progress.c; src/poll/progress.c): n =
 *     try_progress (the look: take every
 *     piece of work in memory); n -> again; else DBT1 store(state,
 *     SLEEPING, seq_cst) and the fence; DBT3 try_progress again: found ->
 *     skip the sleep; else DBT4 nemo__word_sleep(state, SLEEPING):
 *     FUTEX_WAIT; DBT5 state = RUNNING
 *   local kicker, send_to's funneled send (send.c) and the handed slot's
 *     done (progress.c), finalize's stop (mpi.c): DBK1 its work (buffered);
 *     thr_kick (record.c): DBK2 seq_cst fence; DBK3 nemo__word_kick (the
 *     waiter layer's THE RAW WORD): load state; SLEEPING -> CAS it to
 *     RUNNING, and the winner makes the FUTEX_WAKE
 *   remote rank: its MPI send to B (the message written into B's queue:
 *     buffered); reap (record.c) finds it complete (MPI_Test) and calls
 *     ring: DBR1 seq_cst fence; DBR2 nemo__word_kick, as DBK3
 *
 * BROKEN VARIANTS (tests/check_models.sh: each must fail)
 *
 *   -DBROKEN_LOOK_FIRST      P makes its last look (DBT3) before publishing
 *                            SLEEPING (DBT1): a kicker between the two reads
 *                            RUNNING and does nothing, and P sleeps
 *   -DBROKEN_DBK3_FIRST        the kicker reads the state before its fence
 *                            (DBK3 before DBK2): its push may still be in its
 *                            store buffer when it reads RUNNING, and DBT3
 *                            misses it
 *   -DBROKEN_NO_DBR1           ring without DBR1's fence: the message may
 *                            still be in the remote rank's store buffer
 *                            when DBR2 reads RUNNING
 *   -DBROKEN_NO_CAS          a kick that reads SLEEPING wakes without
 *                            claiming the word: a FUTEX_WAKE between P's
 *                            DBT3 and DBT4 is lost, and DBT4 blocks on SLEEPING
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
bit lbuf[NL];         /* kicker i's DBK1 still in its store buffer */
bit rbuf[NR];         /* remote rank j's message still in its store buffer */
#define RUNNING 0
#define SLEEPING 2
byte state = RUNNING; /* bell->state, the published state and futex word */
bit blocked = 0;      /* P is blocked in FUTEX_WAIT on state */
byte got = 0;         /* ghost: pieces of work P took */
byte spur = 0;

/* FUTEX_WAKE(state, 1): wakes P only if it is blocked now. */
inline futex_wake() {
	atomic { if :: blocked -> blocked = 0 :: else -> skip fi }
}

/* nemo__word_kick: SLEEPING -> RUNNING by CAS; its winner wakes. */
inline word_kick() {
#ifdef BROKEN_NO_CAS
	if :: state == SLEEPING -> futex_wake() :: else -> skip fi
#else
	atomic { if :: state == SLEEPING -> state = RUNNING; won = 1 :: else -> won = 0 fi };
	if :: won -> futex_wake() :: else -> skip fi
#endif
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
	byte n;
	do
	:: got == N -> break
	:: else ->
		look(n);
		if
		:: n > 0 -> skip                                 /* work: pass again */
		:: else ->
#ifdef BROKEN_LOOK_FIRST
			look(n);                                 /* DBT3, too early */
			state = SLEEPING;                        /* DBT1 */
#else
			state = SLEEPING;                        /* DBT1: store, fence */
			look(n);                                 /* DBT3 */
#endif
			if
			:: n > 0 || got == N -> skip
			:: else ->
				atomic { if :: state == SLEEPING -> blocked = 1 :: else -> skip fi };  /* DBT4 */
				if
				:: !blocked -> skip                       /* woken, or kicked before */
				:: atomic { blocked && spur < MAXSPUR -> blocked = 0; spur++ }
				fi
			fi;
			state = RUNNING                          /* DBT5 */
		fi
	od
}

proctype kicker(byte i)
{
	bit won;
	lbuf[i] = 1;                                             /* DBK1 (buffered) */
#ifdef BROKEN_DBK3_FIRST
	word_kick();                                             /* DBK3, too early */
	atomic { l_flush(i) };                                   /* DBK2 */
#else
	atomic { l_flush(i) };                                   /* DBK2: fence */
	word_kick();                                             /* DBK3 */
#endif
}

proctype remote(byte j)
{
	bit won;
	rbuf[j] = 1;                                             /* MPI's write of the message */
	/* the send completes: reap's MPI_Test, then ring */
#ifndef BROKEN_NO_DBR1
	atomic { r_flush(j) };                                   /* DBR1: fence */
#endif
	word_kick()                                              /* DBR2 */
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
