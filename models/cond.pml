/*
 * cond.pml - the lifetime of a nemo_cond (src/events/cond.c, LIFETIME):
 * after a broadcast returns, a thread may destroy the condvar and free its
 * memory; no waiter may touch it after that, although the broadcast
 * returns before the deeper waiters of its tree are even released, and
 * timed waiters race it.  Checked with spin:
 *   CV1 no access to the condvar after destroy returned (every access of a
 *       waiter or of the broadcaster asserts !freed);
 *   CV2 destroy returns (an invalid end state if it waits forever), and
 *       every waiter returns, released or timed out;
 *   CV3 a waiter that the broadcast took off the queue is released exactly
 *       by its parent (never returns unreleased);
 *   CV4 no access to a waiter's record after its wait returned: a
 *       releaser reads a record's links and writes its by_broadcast
 *       before the token store that lets the waiter return, never after
 *       (cond.c, THE RECORD).  The record (struct cond_node) is
 *       thread-local: once the wait has returned, the thread's next wait
 *       queues it again, and after the thread exits it is gone.
 *
 * THE MODEL
 *
 * N = 3 waiters on 3 CPUs with fan-out 1: the broadcast's tree is a chain
 * over the waiters it detached, in queue order (cond.c, BROADCAST 1-3):
 * the broadcaster releases the first, each one releases the next one after
 * it woke (wake_kids).  -DFLAT instead models the flat broadcast (waiters
 * on no more CPUs than the fan-out): every token, then the bump and wake
 * of the shared word.  Waiter i:
 *   V1  under the lock: enqueue, wrefs += 1
 *   wait: until its token is set; while waiting it may read the shared
 *       word (B1, an access) any number of times, and - if timed (TIMED,
 *       waiters 0 and 2) - it may time out: under the lock, leave the queue
 *       if still in it (ETIMEDOUT, no children), else wait for the token
 *       its releaser is about to store (released while timing out);
 *   wake_kids: release its child (token, then the kick's bump of the
 *       shared word, an access);
 *   V2  wrefs -= 1 (the last access).
 * The broadcaster (main) waits until every waiter has done V1, then under
 * the lock detaches the queue and links the chain (the links are written
 * before any token, as in C), releases the chain's head (token, bump), and
 * returns.  Then it destroys: X1 under the lock, nwaiting must be 0 (every
 * waiter was queued before the broadcast, and none waits again); X2 set
 * DESTROY; X3 wait until wrefs == 0; then the memory is freed.
 * Memory is sequentially consistent (the lock and the seq_cst tokens and
 * RMWs of the C code give the orders used here); the lock is an atomic
 * block.  Signals, cancellation and futex details are slot.pml's.
 *
 * Broken variants that spin must catch:
 *   -DBROKEN_NOREF       destroy does not wait for references (the code
 *                        before this model): a late access (CV1);
 *   -DBROKEN_EARLY_PUT   a waiter drops its reference before it kicks its
 *                        child: a late access (CV1);
 *   -DBROKEN_LATE_REC    a releaser writes by_broadcast (or reads the next
 *                        link) after the token store: a record touched
 *                        after its wait may have returned (CV4).
 */
#ifndef N
#define N 3
#endif
#define NONE 255

bit queued[N];
bit token[N];
byte kid[N];              /* the child a waiter must release (NONE: none) */
byte nwaiting = 0;
byte wrefs = 0;
byte entered = 0;
bit destroying = 0;
bit freed = 0;
byte done = 0;
bit gone[N];              /* waiter i's wait returned: its record may be reused */

inline access() { assert(!freed) }
inline rec(k) { assert(!gone[k]) }   /* touch waiter k's record */

inline release(k) {
#ifndef BROKEN_LATE_REC
	rec(k);                /* by_broadcast, the group link: before R1 */
	token[k] = 1;          /* the releaser's token store */
#else
	token[k] = 1;
	rec(k);
#endif
	access()               /* its kick bumps the shared word */
}

proctype waiter(byte i) {
	bit timedout = 0;
	atomic { access(); queued[i] = 1; nwaiting++; wrefs++; entered++ };   /* V1 */
	do
	:: token[i] == 1 -> break
	:: access()                                              /* B1: reads bseq */
#ifdef TIMED
	:: (i % 2 == 0) ->                                       /* timeout */
		atomic {
			access();
			if
			:: queued[i] -> queued[i] = 0; nwaiting--; timedout = 1
			:: else -> skip
			fi
		};
		if
		:: timedout -> break
		:: else -> token[i] == 1; break                  /* released: wait for it */
		fi
#endif
	od;
#ifdef BROKEN_EARLY_PUT
	atomic { access(); wrefs-- };
#endif
	if
	:: !timedout && kid[i] != NONE -> release(kid[i])       /* wake_kids */
	:: else -> skip
	fi;
	assert(timedout || token[i] == 1);                       /* CV3 */
#ifndef BROKEN_EARLY_PUT
	atomic { access(); wrefs-- };                            /* V2 */
#endif
	gone[i] = 1;                         /* the record may be queued again: CV4 */
	done++
}

init {
	byte i, prev, head;
	i = 0;
	do
	:: i < N -> kid[i] = NONE; i++
	:: else -> break
	od;
	atomic {
		i = 0;
		do
		:: i < N -> run waiter(i); i++
		:: else -> break
		od
	};
	entered == N;                        /* every waiter queued (or timed out) */
	/* broadcast: detach and link under the lock */
	atomic {
		access();
		head = NONE;
		prev = NONE;
		i = 0;
		do
		:: i < N ->
			if
			:: queued[i] ->
				rec(i);                  /* its links, under the lock */
				queued[i] = 0;
				nwaiting--;
				if
				:: head == NONE -> head = i
				:: else -> kid[prev] = i
				fi;
				prev = i
			:: else -> skip
			fi;
			i++
		:: else -> break
		od
	};
#ifdef FLAT
	/* every token (each link read before the store that frees its
	 * owner; the flat broadcast gives nobody children), then one bump
	 * and wake of the shared word */
	i = head;
	do
#ifndef BROKEN_LATE_REC
	:: i != NONE -> rec(i); prev = kid[i]; kid[i] = NONE; token[i] = 1; i = prev
#else
	:: i != NONE -> token[i] = 1; rec(i); prev = kid[i]; kid[i] = NONE; i = prev
#endif
	:: else -> break
	od;
	access();
#else
	if
	:: head != NONE -> release(head)
	:: else -> skip
	fi;
#endif
	/* broadcast returned; destroy */
	atomic { access(); assert(nwaiting == 0); destroying = 1 };   /* X1, X2 */
#ifndef BROKEN_NOREF
	wrefs == 0;                                                  /* X3 */
#endif
	freed = 1;
	done == N                            /* CV2: every waiter returns */
}
