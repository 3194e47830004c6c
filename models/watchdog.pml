/*
 * watchdog.pml - the polling watchdog (src/poll/watchdog.c, THE WATCHDOG,
 * WD1-WD6; src/messaging/kick.c, wd_defer; src/messaging/drain.c, WD3),
 * checked with spin: a message to a place that computes in interrupt
 * mode under a watchdog is deferred (no signal now), never forgotten.
 *
 *   WDV1 no message waits forever: the run never ends with the place
 *       computing (waiting for a signal) while a message of it is queued,
 *       no clock running for it or the clock's signal lost, and the
 *       watchdog asleep (an invalid end state: the place blocked, the
 *       watchdog at its end label);
 *   WDV2 the same across nemo_watchdog_stop (-DSTOP): a sender that
 *       started a clock while the watchdog stopped signals the place
 *       itself (WD6), or the stop takes the clock and signals; a message
 *       deferred to a watchdog that is gone is still handled.
 *
 * THE MODEL
 *
 * A place R runs with interrupt mode on and a watchdog T set, and
 * computes: it makes no nemo call but POLLS polls of its own (default
 * 1, at any time), and otherwise handles its messages only when a signal
 * comes (its handler drains).  NS senders send it NM messages each, on
 * links of their own (a queue and a hint bit at R per sender).  Each
 * finds R RUNNING, so its kick (if its S4 set the hint bit) defers to the
 * watchdog: it starts R's clock (wd_since) and kicks the watchdog, whose
 * pass signals R when the clock has run T.  Time is abstract: a clock
 * value is a fresh tick (the ghost `tick`, so that the pass's CAS fails
 * on a clock restarted since its load), and a clock the pass finds
 * expires at once - a pass that finds it young sleeps with a deadline
 * and passes again, which is the same as a pass delayed, as the
 * interleavings are.  The deadline's timed sleep is not the WD5 sleep and
 * is not modelled.  The drain's budget (a drain that leaves work starts
 * the clock itself), T set to 0 meanwhile, interrupt mode turned off and
 * a place that sleeps (place.pml's kick of a SLEEPING place) are left
 * out.  -DSTOP: a thread calls nemo_watchdog_stop at any time.
 *
 * Memory: sequentially consistent.  Every access of the handshakes is
 * seq_cst or an RMW in the C code (the clock's CAS, exchange and clear,
 * WD5's exchange of the watchdog's state and its loads of the clocks, the
 * re-read of wd_w, the hint words' fetch_or and exchange; WD2's kick
 * fences before it reads the watchdog's state), but for three relaxed
 * loads: the drain's look at wd_since before its store (drain.c, WD3: a
 * clock it fails to clear costs a spurious signal at most), and two that
 * the model takes as SC only on x86-64: the drain's look at the hint
 * word before its exchange (drain.c, D2) and the sender's look at
 * wd_since before its CAS (kick.c, WD1) - see NOTE ON THE RELAXED LOADS
 * at the end of this essay.
 *
 * MAPPING TO THE C CODE
 *
 *   sender i, one message: the entry (S1-S3: q[i]++), S4 fetch_or of its
 *     hint bit at R (send.c): set already -> done (the sender that set it
 *     kicked); else nemo__kick (kick.c): R RUNNING, wd_ticks and irq_on
 *     set, ww = load(d->wd_w): NULL -> irq_kick (sig := 1); else wd_defer:
 *       WD1 load wd_since != 0 -> done; CAS(wd_since, 0 -> now) fails ->
 *           done (its clock runs already: that sender woke the watchdog)
 *       WD6 re-load wd_w: NULL -> exchange(wd_since, 0), non-zero -> sig
 *       WD2 nemo__waiter_kick_issued(ww): SLEEPING -> RUNNING (the claim
 *           and FUTEX_WAKE in one step: the futex word is the state)
 *   R: do: a pending signal -> its handler, or one of its own polls:
 *     nemo__drain: WD3 wd_since != 0 -> store 0, then D2 per hint word:
 *     exchange(bit, 0), set -> drain_link (takes the whole queue)
 *   the watchdog, wd_main: while !stop: pass() (WD4): s = wd_since; s ->
 *     CAS(wd_since, s -> 0) and, if it succeeded, nemo__irq_signal
 *     (sig := 1); then WD5 nemo__slot_sleep_begin: exchange(state,
 *     SLEEPING), any_clock (stop or any wd_since) -> RUNNING, pass again;
 *     else futex_wait(state, SLEEPING); nemo__slot_awake.  Out of the
 *     loop: WD6 nemo__domain_set_watchdog_waiter(NULL)
 *   the stopper (-DSTOP), nemo_watchdog_stop: stop := 1; kick the
 *     watchdog's waiter; pthread_join; every clock taken (exchange) and
 *     its place signalled
 *
 * BROKEN VARIANTS (tests/check_models.sh: each must fail)
 *
 *   -DBROKEN_NO_WD2           the sender that starts a clock does not kick
 *                            the watchdog: it sleeps through the clock
 *   -DBROKEN_CLEAR_LATE      the drain clears wd_since after reading the
 *                            hint words: a message whose sender started
 *                            (or found) the clock between the two is left
 *                            with no clock
 *   -DBROKEN_NO_WD5_RECHECK   the watchdog sleeps without re-reading the
 *                            clocks after publishing SLEEPING: a clock
 *                            started while it passed, whose WD2 found it
 *                            RUNNING, is slept through
 *   -DSTOP -DBROKEN_NO_WD6    the sender does not re-read wd_w after its
 *                            CAS: a clock started after the stop's take is
 *                            never fired
 *   -DSTOP -DBROKEN_NO_TAKE  the stop does not take the running clocks: a
 *                            clock whose sender's WD6 re-read came before
 *                            the watchdog cleared wd_w is never fired
 *
 * NOTE ON THE RELAXED LOADS (-DWEAK_DRAIN, -DWEAK_SEND).  The drain's
 * clear (WD3: store wd_since := 0, then read the hint words) and a
 * deferring sender (S4's fetch_or of its hint bit, then its look at
 * wd_since) are the store-buffering pattern: each must see the other's
 * write.  The drain's read of the hint word (drain.c, D2: the load before
 * the exchange) and the sender's look at wd_since (kick.c, wd_defer: the
 * load before the CAS) were relaxed loads after a seq_cst store or RMW,
 * correct on x86-64 (the store is an xchg, the RMW locked: full
 * barriers) but not under C11 alone or on ARMv8, where a plain ldr after
 * an stlr, or after an ldaxr/stlxr loop, may be satisfied first.  This
 * model found it (2026-11-28); both loads are seq_cst now (the same mov
 * on x86-64).  The variants keep the relaxed loads, where either load
 * may read an old value:
 *   -DWEAK_DRAIN  the drain's load of the hint word is satisfied before
 *                 WD3: it misses the bit of a sender that then found the
 *                 clock still running (started by the other sender's
 *                 message) and returned; WD3 clears that clock; the
 *                 message waits with no clock
 *   -DWEAK_SEND   the sender's look at wd_since is satisfied before S4:
 *                 it sees a clock that the watchdog then fires, and the
 *                 signal's drain misses the bit S4 sets after it
 * Spin finds both runs (-DWEAK_RELAXED: both at once), so they are
 * must-fail entries, documenting why the two loads must stay seq_cst.
 */

#ifndef NS
#define NS 2
#endif
#ifndef NM
#define NM 1
#endif
#ifndef POLLS
#define POLLS 1
#endif
#define N (NS * NM)
#ifdef WEAK_RELAXED
#define WEAK_DRAIN
#define WEAK_SEND
#endif
#define RUNNING 0
#define SLEEPING 1

byte q[NS];           /* entries queued on sender i's link to R */
bit h[NS];            /* sender i's hint bit at R */
byte since = 0;       /* R's wd_since: 0 none, else the tick it started */
byte tick = 0;        /* ghost time: the last tick a clock started at */
bit sig = 0;          /* a signal pending at R */
bit wd_w = 1;         /* d->wd_w != NULL: the watchdog runs */
byte wstate = RUNNING;/* the watchdog's waiter slot */
bit stop = 0;
bit wd_gone = 0;      /* the watchdog thread exited (pthread_join returns) */
byte got = 0;         /* ghost: messages R handled */

/* irq_kick: a signal to R (interrupt mode stays on). */
inline signal_R() {
	sig = 1
}

/* nemo__drain (drain.c): WD3, then D2 for each link. */
inline drain() {
	byte i, t;
#ifdef WEAK_DRAIN
	/* D2's relaxed load of the hint word, satisfied before WD3's store. */
	atomic { i = 0; t = 0; do :: i < NS -> t = t | h[i]; i++ :: else -> break od };
	pre = t;
#endif
#ifndef BROKEN_CLEAR_LATE
	atomic { if :: since != 0 -> since = 0 :: else -> skip fi };   /* WD3 */
#endif
	i = 0;
	do
#ifdef WEAK_DRAIN
	:: i < NS && !pre -> i++                                  /* the word looked clear */
	:: i < NS && pre ->
#else
	:: i < NS ->
#endif
		atomic { t = h[i]; h[i] = 0 };                        /* D2: exchange */
		if
		:: t -> atomic { got = got + q[i]; q[i] = 0 }         /* drain_link */
		:: else -> skip
		fi;
		i++
	:: else -> break
	od;
#ifdef BROKEN_CLEAR_LATE
	atomic { if :: since != 0 -> since = 0 :: else -> skip fi };
#endif
	skip
}

proctype sender(byte me)
{
	byte m = 0, s;
	bit set, ww;
	do
	:: m == NM -> break
	:: m < NM ->
		m++;
		atomic { q[me]++ };                                   /* S1-S3 */
#ifdef WEAK_SEND
		s = since;             /* WD1's relaxed load, satisfied before S4's store */
#endif
		atomic { set = !h[me]; h[me] = 1 };                   /* S4: fetch_or */
		if
		:: !set -> skip                                        /* its setter kicked */
		:: set ->
			ww = wd_w;                                     /* kick.c: load wd_w */
			if
			:: !ww -> signal_R()                           /* no watchdog: irq_kick */
			:: ww ->
				if
#ifdef WEAK_SEND
				:: s != 0 -> skip                      /* WD1: an old clock */
#else
				:: since != 0 -> skip                  /* WD1: clock runs */
#endif
				:: else ->
					atomic {                       /* WD1: CAS(0 -> now) */
						if
						:: since == 0 -> tick++; since = tick; set = 1
						:: else -> set = 0
						fi
					};
					if
					:: !set -> skip
					:: set ->
#ifndef BROKEN_NO_WD6
						if
						:: !wd_w ->            /* WD6: stopped meanwhile */
							atomic { s = since; since = 0 };
							if
							:: s != 0 -> signal_R()
							:: else -> skip
							fi
						:: else ->
#endif
#ifndef BROKEN_NO_WD2
							atomic {       /* WD2: kick the watchdog */
								if
								:: wstate == SLEEPING -> wstate = RUNNING
								:: else -> skip
								fi
							}
#else
							skip
#endif
#ifndef BROKEN_NO_WD6
						fi
#endif
					fi
				fi
			fi
		fi
	od
}

proctype place()
{
	byte polls = POLLS;
	bit pre;
	do
	:: got == N -> break
	:: got < N && sig -> sig = 0; drain()                       /* the handler */
	:: got < N && polls > 0 -> polls--; drain()                /* its own poll */
	od
}

proctype watchdog()
{
	byte s;
	do
	:: stop -> break
	:: else ->
		/* WD4: the pass (the clock expires when the pass finds it). */
		s = since;
		if
		:: s != 0 ->
			atomic {
				if
				:: since == s -> since = 0; signal_R()    /* CAS, nemo__irq_signal */
				:: else -> skip
				fi
			}
		:: else -> skip
		fi;
		/* WD5: no deadline. */
		wstate = SLEEPING;                                    /* exchange */
#ifndef BROKEN_NO_WD5_RECHECK
		if
		:: stop || since != 0 -> wstate = RUNNING             /* any_clock */
		:: else ->
#endif
end:			wstate != SLEEPING;                           /* futex_wait */
			wstate = RUNNING                               /* nemo__slot_awake */
#ifndef BROKEN_NO_WD5_RECHECK
		fi
#endif
	od;
	wd_w = 0;                                                     /* WD6 */
	wd_gone = 1
}

#ifdef STOP
proctype stopper()
{
	byte s;
	stop = 1;
	atomic {                                                      /* kick g->w */
		if
		:: wstate == SLEEPING -> wstate = RUNNING
		:: else -> skip
		fi
	};
	wd_gone;                                                      /* pthread_join */
#ifndef BROKEN_NO_TAKE
	atomic { s = since; since = 0 };                              /* take */
	if
	:: s != 0 -> signal_R()
	:: else -> skip
	fi
#endif
}
#endif

init {
	byte i;
	atomic {
		i = 0;
		do
		:: i < NS -> run sender(i); i++
		:: else -> break
		od;
		run place();
		run watchdog();
#ifdef STOP
		run stopper()
#endif
	}
}
