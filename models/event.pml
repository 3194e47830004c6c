/*
 * event.pml - the event word of src/events/event.c (auto-reset), checked
 * with spin: no post is lost, the sleeper count stays exact, and each
 * wait consumes exactly one set state.
 *
 * Mapping (labels as in the essay of event.c):
 *   word = SET (bit 0) + 2 * sleepers.  Every change is one atomic step,
 *   as every change in C is an RMW.
 *   EP1 old = fetch_or(word, SET)       EP2 if sleepers(old) > 0: futex_wake(1)
 *   try_take: CAS(word: v|SET -> v)
 *   ES1 v = fetch_add(word, 2)
 *   ES2 while v & SET: CAS(v -> (v - 2) & ~SET): taken; a failed CAS
 *       reloads v (modelled: an earlier version of this model kept the
 *       stale v and spin found a lost post - which the C code avoids
 *       exactly by that reload)
 *   ES3 futex_wait(word, v): sleeps only if word == v (atomic with queueing)
 *   ES4 fetch_sub(word, 2)
 * Two waiters each wait once; two posters post once each, but only after
 * the previous post was consumed (`consumed`), so every post must release a
 * waiter: coalescing is legal for an event, and a model where posts may
 * coalesce could not tell a lost post from a coalesced one.  futex_wait
 * may wake spuriously at most MAXSPUR times in total.  -DBROKEN makes the
 * poster read the word and then set the bit in two steps (a load instead
 * of the RMW); spin must then find a lost post.
 */
#ifndef MAXSPUR
#define MAXSPUR 1
#endif
#define SET 1

byte word = 0;
bit q[2];                 /* q[i]: waiter i sleeps in futex_wait */
byte consumed = 0;
byte spur = 0;

/* FUTEX_WAKE(1): dequeue one sleeper, any of them. */
inline futex_wake_one() {
	atomic {
		if
		:: q[0] -> q[0] = 0
		:: q[1] -> q[1] = 0
		:: else -> skip
		fi
	}
}

proctype poster(byte n) {
	byte old;
	(consumed == n - 1);      /* the previous post was consumed */
#ifdef BROKEN
	old = word;               /* load ... */
	word = word | SET;        /* ... then set: not one RMW */
#else
	atomic { old = word; word = word | SET }     /* EP1 */
#endif
	if :: old >= 2 -> futex_wake_one()           /* EP2 */
	   :: else -> skip fi
}

proctype waiter(byte id) {
	byte v;
	bool mine;                /* on the futex queue */
	bool taken;
	do
	:: atomic { (word & SET) -> word = word & ~SET; consumed++; break }   /* try_take */
	:: else ->
		atomic { word = word + 2; v = word };                            /* ES1 */
		/* ES2: while (v & SET) CAS(word, &v, (v - 2) & ~SET); a failed CAS
		 * reloads v with the current word, as C11 compare_exchange does -
		 * the futex_wait below then compares against the fresh value. */
		taken = false;
		do
		:: atomic { (v & SET) && word == v -> word = (v - 2) & ~SET; consumed++; taken = true }; break
		:: atomic { (v & SET) && word != v -> v = word }
		:: !(v & SET) -> break
		od;
		if :: taken -> break :: else -> skip fi;
		atomic { if :: word == v -> q[id] = 1; mine = true :: else -> mine = false fi };  /* ES3 */
		if
		:: mine ->
			if
			:: atomic { q[id] == 0 -> mine = false }                                    /* woken */
			:: atomic { q[id] == 1 && spur < MAXSPUR -> q[id] = 0; spur++; mine = false } /* spurious */
			fi
		:: else -> skip
		fi;
		atomic { word = word - 2 }                                                    /* ES4 */
	od
}

/* When nothing can move any more: both posts consumed, no sleeper left
 * counted, the event clear.  A waiter stuck in futex_wait is an invalid
 * end state on its own. */
proctype watcher() {
	timeout -> assert(consumed == 2 && word == 0 && q[0] == 0 && q[1] == 0)
}

init {
	atomic { run waiter(0); run waiter(1); run poster(1); run poster(2); run watcher() }
}

