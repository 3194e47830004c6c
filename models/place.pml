/*
 * place.pml - the protocols of the messaging layer that decide whether a
 * place sleeps, whether a message is delivered, and who sent it, checked
 * with spin:
 *   PV1 no lost wake-up: the receiver never ends blocked in futex_wait
 *       while a message that was (or will be) sent with result OK is
 *       still unconsumed;
 *   PV2 delivered xor failed on leave: every message is either handled
 *       by the receiver once and its send returned 0, or never handled
 *       and its send returned ESRCH - never handled-and-ESRCH, never
 *       0-and-unhandled, never handled twice;
 *   PV3 who sent it (-DGEN): the handler of every message names the
 *       occupant of the sender index that wrote it, although the index
 *       changes hands between two messages of one queue.
 * The protocol is written out in src/messaging/: send S0-S5 and WS1-WS2,
 * receive D1-D5 at the top of send.c and drain.c; wait W1-W6 and B1 at the top of
 * placewait.c; leave LV1-LV3 in domain.c, beside nemo_place_leave (WHY A
 * SEND RACING A LEAVE IS DELIVERED XOR FAILED).  The labels here are
 * theirs.
 *
 * THE MODEL
 *
 * One receiver place R and two senders A, B (sender(0), sender(1)),
 * each with its own queue to R: a FIFO of 2 entries, ent[3s], ent[3s+1]
 * (ent[3s+2] is a sentinel that stays EMPTY).  A sender sends 1 or 2
 * messages in a row (chosen by init: a lost wake-up of a lone message must
 * not be rescued by the kick of a second one); the queue never wraps.  R
 * reads queue s at its position rd[s] (in->head / in->nf_head).  R's hot
 * set (me->hot[]) starts as {A} (-DHOT0=0: empty, a fresh place) and
 * gains a sender when D2 finds messages from it (hot_add); NEMO__HOT = 4
 * means nothing is ever evicted here.  Memory is sequentially consistent
 * except for one thing that the asymmetric barrier is about: with -DLEAVE
 * a sender's entry store S1 either reaches memory at once or stays in the
 * sender's store buffer (x86-TSO; at most one store is ever pending:
 * pend[s]) past S3's status load, until the sender's next fence or locked
 * instruction (P, the retract's CAS) or the leaver's membarrier, which
 * makes every running thread pass a barrier.  So S3's load may overtake
 * S1, as it may in C now that S2 is no fence (-DFENCED: S2 is the
 * fallback's fence, and S1 reaches memory before S3).  The C
 * code uses seq_cst for S3, S4, S5, W2, W3's hint load, B1, D2, LV1 and
 * LV3; the relaxed stores of W1/W5 and the acquire loads of hot queues
 * only save or add work.  Each numbered step is one atomic step; where C
 * makes two atomic accesses in one step the model splits them (S3: the
 * status load, then the CAS; S4: the hint load, then fetch_or; pending():
 * the hint, then each hot queue), except S5's load + CAS, merged as in
 * slot.pml (a load of SLEEPING followed by a failing CAS acts as a load of
 * anything else).  Places sleep on the domain's shared word bseq, each
 * with its own bit (waiter.c, SHARED WORD; slot.pml -DSHARED): B1 reads
 * bseq before W2, W4 is futex_wait(bseq, seen), and a kick bumps bseq
 * after its CAS and then wakes.  The kernel's futex is `queued` (R is on
 * the futex queue of bseq with its bit) under one atomic step per futex
 * operation; futex_wait may return spuriously at most MAXSPUR times in
 * total.  Not modelled: NEMO_MORE / NEMO_PUSH, interrupt mode (W6,
 * signals), deadlines, full queues and drain budgets, the receiver tag
 * (S0/S3 compare the whole status word, which is FREE/ACTIVE/LEAVING of
 * one generation of R here).
 *
 * Ghost state, never read by the protocol: res[m] (NONE / PEND = written,
 * not decided / OK / FAIL), cons[m] (times R handled message m), consumed
 * (their sum), wr[m] (-DGEN: the generation that wrote m).  Asserted as
 * it happens: never handled twice, never handled after its send returned
 * FAIL, never retracted (FAIL) after it was handled, the handler's sender
 * is the writer (PV3).  Asserted by the watcher once nothing can move: R is
 * not asleep in futex_wait (PV1) and every message is settled - OK and
 * handled once, or FAIL and never handled (PV2; in the default
 * configuration, where every send is OK, also: all handled).  R blocked
 * in W4 is moreover an invalid end state on its own.
 *
 * MAPPING TO THE C CODE
 *
 * Sender (nemo__ring_put for the ring, nemo__notify_put for the FIFO, in
 * src/messaging/send.c, both ending in nemo__send_commit (S2-S5), the
 * inline commit of src/messaging/messaging_internal.h):
 *   S0  nemo__dest(): load(status) != ACTIVE of the id's generation -> ESRCH
 *   WS1 (-DGEN, claim(): the second occupant's first entry) wait until
 *       the first occupant's entry is given back: FIFO load(entry at
 *       nf_tail - 1) == 0; ring load(link->ack) == tail
 *   WS2 store(link's sender-generation word, own generation)
 *   S1  ring: payload, then the head slot's seq (store, release);
 *       FIFO: the entry word.  Into the store buffer (-DLEAVE), else
 *       straight to memory.  From then on R can see it.
 *   S2  no fence (THE ASYMMETRIC BARRIER); -DFENCED: the fallback's
 *       seq_cst fence, which empties the store buffer
 *   S3  load(status, seq_cst) != st -> retract(): (ring: load(ack) past
 *       the entry -> 0) CAS(seq / FIFO word: entry -> 0), a locked
 *       instruction; success: rewind the tail, ESRCH; failure: return 0
 *   P   nemo__send_commit(): atomic_thread_fence(seq_cst) (batches,
 *       broadcasts, nemo_flush and the overflow publish through
 *       nemo__publish() or nemo__publish_many() in send.c)
 *   S4  nemo__hint_test_set(): load(hint word, seq_cst) has bit s -> stop
 *       (kicks_skipped); else fetch_or(hint word, bit s, seq_cst)
 *   S5  nemo__kick() (src/messaging/kick.c) -> nemo__waiter_kick_issued():
 *       load(state) == SLEEPING and CAS(SLEEPING -> RUNNING); then bump
 *       bseq and FUTEX_WAKE_BITSET with R's bit (K1-K3 of waiter.c)
 * Receiver R:
 *   take(s)        drain_link(final = false): consume while the entry at
 *                  R's position is valid.  FIFO (default): load, store 0.
 *                  Ring (-DRING): load only, advance in->head, and
 *                  publish_ack() (link->ack := head) at the end.  -DGEN
 *                  splits the consumption into D3 (the load), D4 (the
 *                  load of the sender-generation word: the handler's
 *                  src) and D5 (the give-back: the FIFO's store of 0, the
 *                  ring's ack).
 *   final_take(s)  drain_link(final = true): consume by CAS(entry -> 0);
 *                  stop at an empty entry or a failed CAS
 *   drain()        nemo__drain(final = false): D1 take() of every hot
 *                  queue; D2 x := exchange(hint word, 0), take() of every
 *                  queue in x, hot_add() of those that had something
 *   pending()      nemo__pending(): hint word != 0, or a hot queue's entry
 *                  at R's position valid
 *   place_wait()   nemo_place_wait() through nemo__wait_loop() (wait.c):
 *     W1  state := POLLING; one poll = place_try_take(): pending() ->
 *         drain(); return if it handled something (more polls repeat it)
 *     B1  place_sleep_begin(): seen := load(bseq, seq_cst)
 *     W2  exchange(state, SLEEPING, seq_cst)
 *     W3  ... if pending(): state := RUNNING (undo); in C futex_wait then
 *         returns at once, the model skips it; then place_try_take()
 *     W4  futex_sleep(): futex_wait_bitset(bseq, seen, R's bit)
 *     W5  place_sleep_end(): state := RUNNING; place_try_take() (pending()
 *         -> drain()); handled -> return, else B1
 *   nemo_place_leave() (src/messaging/domain.c): LV1 store(status,
 *     LEAVING, seq_cst); membarrier (nemo__asym_heavy); LV2 nemo__drain
 *     (final = true): final_take() of every queue, passes until one
 *     handles nothing; LV3 store(status, FREE)
 *
 * CONFIGURATIONS (tests/check_models.sh)
 *
 *   (default)        status stays ACTIVE, every send returns 0; R calls
 *                    nemo_place_wait until it handled every message: PV1.
 *   -DLEAVE          R waits 0, 1 or 2 times (only while a message is
 *                    still to come: with none, a wait rightly blocks for
 *                    ever) and then leaves while the senders still send:
 *                    PV1 for the waits, PV2 for the leave, with buffered
 *                    entry stores and the leaver's barrier.
 *   -DLEAVE -DFENCED the fallback without membarrier: senders fence at S2,
 *                    the leaver does not call membarrier.
 *   -DRING           the ring's read-only consumption instead of the
 *                    FIFO's load-and-clear (matters for PV2 only).
 *                    It includes send.c's ack check (ACK_RECHECK): at
 *                    S3, after the status load found a change, the sender
 *                    first loads link->ack; if R's published position is
 *                    past its entry, R handled it: return 0, no CAS.
 *   -DGRANT          stream grants (grant.c, THE STREAM GRANT): each
 *                    drain may grant any hot queue (G1: grant |= bit);
 *                    a sender that finds its grant bit after S3 returns
 *                    0 at once (S4g), with no fence P, no hint and no
 *                    kick, so its entry may still sit in its store
 *                    buffer; before W2, R takes every grant back (GR1
 *                    grant := 0), membarrier (GR2, which empties every
 *                    store buffer), and sets the revoked senders' hint
 *                    bits (GR3).  Entry stores are buffered here in every
 *                    configuration, one per sender, drained in order, and
 *                    each sender's buffer empties on its own at some
 *                    point after its last send.  With -DLEAVE as well:
 *                    PV2 with grants.
 *   -DGEN            PV3: sender 0's index changes hands: occupant 1
 *                    writes its first message, leaves, and occupant 2
 *                    writes the second (after WS1 and WS2); sender 1 does
 *                    not run.  With -DRING: the ring's WS1 (ack == tail)
 *                    and D5 (the ack at the end of take()).
 *
 * WHY IT WORKS
 *
 * Sleep: S4;S5 and W2;W3 are the store-buffering pattern of waiter.c
 * (hint store, state load against state store, hint load): either W3
 * sees the hint bit, or S5 sees SLEEPING and kicks; its bump of bseq
 * follows its CAS, which follows W2, which follows B1, so W4 either finds
 * bseq changed or is queued before the wake.  A sender that finds its
 * bit already set skips the kick: only it sets that bit, its earlier
 * send set it and then kicked (S5), and R has not yet exchanged it away -
 * so R's next exchange (D2) comes after this send's S1, and drains it;
 * until then pending() is true and R does not sleep.  Hot queues only
 * add early finds.
 * Leave: S1;S3 and LV1;LV2 are the same pattern (entry store, status load
 * against status store, entry load).  The leaver's membarrier after LV1
 * puts every sender's pending entry store into memory: a sender whose S3
 * read ACTIVE read it before LV1, so its S1 was in its store buffer or
 * memory before the barrier, and LV2 (after the barrier) sees the entry
 * and takes it; a sender whose S3 sees the change races LV2 with its CAS
 * on the same word, and exactly one wins.
 * Grants: a sender that read its grant bit at S4g did so before GR1 (it
 * read 1), so GR2's barrier finds its entry store in its store buffer or
 * in memory and makes it visible before GR3; W3 then sees the hint bit
 * GR3 set (or the hot queue) and R drains instead of sleeping.  A sender
 * that reads the bit after GR1 reads 0 and does P-S5 as usual.
 * Who sent it: WS2 comes before S1 and D4 after D3, so D4 reads the word
 * of the entry's writer or a later one; the later occupant stores only
 * after WS1 saw the entry given back (D5), which follows D4.
 *
 * RING: A REAL BUG THIS MODEL FOUND (now -DRING -DBROKEN_NO_ACK)
 *
 * The ring consumer only reads: after a normal drain the head slot still
 * holds its valid seq.  So the retract CAS of S3 also wins against a
 * message R handled in a normal drain BEFORE it left.  spin's trail: B
 * sends (hint bit set); sender A writes its entry (steps S1, S2) and is
 * delayed; R waits: W1 finds the hint, D1 handles A's message from the
 * hot queue, D2 handles B's; R returns and leaves: LV1.  A resumes at
 * S3: status changed -> CAS(seq -> 0) succeeds -> ESRCH, but the handler
 * ran (and LV2, which starts at R's head, never looks at that slot again).
 * The same happens with an empty hot set (-DHOT0=0), via the hint.
 * Worse, in C the retract then rewinds o->tail below the receiver's
 * in->head (both carry over to the next occupant of the index), which
 * desynchronises that ring for good.  The FIFO is safe: its consumer
 * stores 0, so the sender's CAS fails and it returns 0.  The fix, now in
 * send.c and in -DRING here, is the ack check (R publishes ack at the
 * end of every drain_link, which is before LV1; a sender that saw LV1's
 * store sees that ack).  The rejected alternative was a FIFO-like store
 * of 0 into the head slot's seq on consumption: a consumer write per
 * message, where the ring is read-only on purpose.
 *
 * BROKEN VARIANTS (each must fail)
 *
 *   -DBROKEN_KICK_FIRST   S5's load of state before S4: B reads RUNNING;
 *                         R publishes SLEEPING and finds no hint; B sets
 *                         the hint and does not kick: R sleeps with B's
 *                         message queued (assertion !asleep).
 *   -DBROKEN_CHECK_FIRST  W3 before W2: R finds nothing pending; B sets
 *                         the hint and reads state != SLEEPING (no kick);
 *                         R then sleeps: the same lost wake-up.
 *   -DBROKEN_B1_LATE      B1 after W3: B's kick (CAS, bump, wake of
 *                         nobody) falls between W3 and B1, and R sleeps
 *                         on a bseq that has already moved past it.
 *   -DLEAVE -DBROKEN_NO_RECHECK   no S3: a sender that passed S0 before
 *                         LV1 writes its entry after LV2 last looked at its
 *                         queue and returns 0; nobody ever handles the
 *                         entry (assertion settled).
 *   -DLEAVE -DBROKEN_PLAIN_FINAL  LV2 takes an entry by a load and a store
 *                         instead of a CAS: the sender's retract CAS wins
 *                         in between, and the message is handled AND its
 *                         send returns ESRCH (assertion at the handling).
 *   -DLEAVE -DBROKEN_NO_BARRIER   neither S2's fence nor the leaver's
 *                         membarrier: S3 reads ACTIVE while S1 is still
 *                         buffered, LV2 finds nothing, the send returns 0
 *                         and its entry reaches memory after R has gone.
 *   -DGEN -DBROKEN_NO_GEN_WAIT    no WS1: the second occupant's WS2
 *                         overwrites the word before R's D4 of the first
 *                         occupant's message, which then names the wrong
 *                         sender (PV3).
 *   -DGEN -DRING -DBROKEN_LATE_D4 D4 after D5 (the word read after the
 *                         ack): WS1 passes, WS2 overwrites, D4 reads it.
 *   -DGRANT -DBROKEN_REVOKE_NO_BARRIER  the revocation without its
 *                         membarrier: a granted sender's S4g read the
 *                         grant while its entry was still buffered; R
 *                         revokes, finds nothing (W3), sleeps; the entry
 *                         lands and nobody kicks (assertion !asleep).
 */

#if defined(RING) && !defined(BROKEN_NO_ACK)
#define ACK_RECHECK
#endif
#if defined(LEAVE) && !defined(FENCED) && !defined(BROKEN_NO_BARRIER)
#define BARRIER          /* the leaver's membarrier after LV1 */
#endif
#if (defined(LEAVE) && !defined(FENCED)) || defined(GRANT)
#define SB               /* senders' entry stores may sit in a store buffer */
#endif

#ifndef MAXSPUR
#define MAXSPUR 1
#endif
#ifndef HOT0
#define HOT0 1           /* R's hot set at the start: A's queue */
#endif

#define RUNNING  0       /* waiter state */
#define POLLING  1
#define SLEEPING 2

#define FREE     0       /* place status (of the one generation modelled) */
#define ACTIVE   1
#define LEAVING  2

#define EMPTY    0       /* queue entry: 0 / a valid seq or FIFO word */
#define VALID    1

#define NONE     0       /* res[]: not attempted */
#define PEND     1       /* written, result not decided */
#define OK       2       /* the send returned 0 */
#define FAIL     3       /* the send returned ESRCH */

#define M(s, i)  ((s) * 3 + (i))        /* message i of sender s */
#define E(s, i)  ent[M(s, i)]           /* its queue entry */
#define BIT(s)   (1 << (s))             /* sender s's hint / hot bit */

byte status = ACTIVE;
byte state = RUNNING;    /* R's waiter slot state */
bit bmoved = 0;          /* the domain's shared word bseq moved since R's B1 read it */
byte hint = 0;           /* R's hint word */
bit ent[6];              /* queue s: ent[3s], ent[3s+1]; ent[3s+2] stays EMPTY */
byte rd[2];              /* R's read position in each queue (in->head) */
#ifdef RING
byte ack[2];             /* link->ack: the read position R published */
#endif
#ifdef SB
byte pend[2];            /* sender s's store buffer: entry i + 1 pending, or 0 */
#endif
#ifdef GRANT
byte grant = 0;          /* R's grant word: bit s, sender s may skip P-S5 */
#endif
#ifdef GEN
byte sgen;               /* queue 0's sender-generation word */
byte wr[2];              /* ghost: the generation that wrote message i of queue 0 */
#endif
byte hot = HOT0;         /* R's hot set (me->hot[]), R-private */
byte nmsg[2];            /* messages sender s sends (0, 1 or 2) */
byte res[6];             /* ghost: result of each send */
byte cons[6];            /* ghost: times R handled each message */
byte consumed = 0;       /* ghost: sum of cons[] */
bit queued = 0;          /* R sleeps in futex_wait */
byte spur = 0;

inline futex_wake() {
	atomic { if :: queued -> queued = 0 :: else -> skip fi }
}

/* ------------------------------------------------------ store buffer */

#ifdef SB
/* Sender s's pending store reaches memory (inside an atomic step). */
#define COMMIT(s) if :: pend[s] > 0 -> E(s, pend[s] - 1) = VALID; pend[s] = 0 :: else -> skip fi
#endif

/* ------------------------------------------------------------ sender */

/* S3 after the load of status found it changed: take the entry back. */
inline retract(s, i) {
#ifdef ACK_RECHECK
	if
	:: atomic { ack[s] > i -> res[M(s, i)] = OK;            /* R's head passed it */
	            assert(cons[M(s, i)] == 1) }
	:: else ->
#endif
	atomic {
#ifdef SB
		COMMIT(s);                               /* the CAS is a locked instruction */
#endif
		if
		:: E(s, i) == VALID ->                    /* CAS succeeded: ESRCH */
			E(s, i) = EMPTY; res[M(s, i)] = FAIL;
			assert(cons[M(s, i)] == 0)            /* never handled-and-FAIL */
		:: else ->                               /* CAS failed: LV2 took it */
			res[M(s, i)] = OK;
			assert(cons[M(s, i)] == 1)
		fi
	}
#ifdef ACK_RECHECK
	fi
#endif
}

proctype sender(byte s) {
	byte i = 0;
	bool stop;
#ifdef BROKEN_KICK_FIRST
	bool sl;
#endif
	do
	:: i < nmsg[s] ->
		/* S0 */
		atomic { if :: status != ACTIVE -> res[M(s, i)] = FAIL; stop = true :: else -> skip fi };
		if
		:: stop -> skip
		:: else ->
#ifdef GEN
			/* Sender 0's index: occupant 1 sends message 0, leaves;
			 * occupant 2 sends message 1, its first on the queue. */
			if
			:: i == 0 -> sgen = 1                         /* WS2 (WS1: a new domain) */
			:: else ->
#ifndef BROKEN_NO_GEN_WAIT
#ifdef RING
				ack[0] == 1;                          /* WS1: ack == tail */
#else
				E(0, 0) == EMPTY;                     /* WS1: entry nf_tail - 1 is 0 */
#endif
#endif
				sgen = 2                              /* WS2 */
			fi;
			wr[i] = i + 1;
#endif
#if defined(SB) && !defined(FENCED)
			atomic { COMMIT(s) };                         /* an earlier buffered entry first (FIFO) */
			if                                            /* S1 ... */
			:: atomic { E(s, i) = VALID; res[M(s, i)] = PEND }  /* ... in memory before S3 */
			:: atomic { pend[s] = i + 1; res[M(s, i)] = PEND }  /* ... still in the store buffer */
			fi;
#else
			atomic { E(s, i) = VALID; res[M(s, i)] = PEND };   /* S1 (-DFENCED: and S2) */
#endif
#ifndef BROKEN_NO_RECHECK
			if                                            /* S3: load status */
			:: status != ACTIVE -> retract(s, i); stop = true
			:: else -> skip
			fi
#endif
		fi;
		if
		:: stop -> skip
#ifdef GRANT
		:: !stop && (grant & BIT(s)) ->               /* S4g: granted: no P, S4, S5 */
			res[M(s, i)] = OK
#endif
		:: else ->
#ifdef SB
			atomic { COMMIT(s) };                       /* P: fence */
#endif
#ifdef BROKEN_KICK_FIRST
			sl = (state == SLEEPING);                   /* S5's load, too early */
#endif
			if                                          /* S4: load hint ... */
			:: (hint & BIT(s)) -> skip                  /* the bit's setter kicked */
			:: else ->
				hint = hint | BIT(s);               /* ... fetch_or */
				if                                  /* S5 */
#ifdef BROKEN_KICK_FIRST
				:: atomic { sl && state == SLEEPING -> state = RUNNING };
#else
				:: atomic { state == SLEEPING -> state = RUNNING };
#endif
				   bmoved = 1;                      /* bump the shared word ... */
				   futex_wake()                     /* ... and wake R's bit */
				:: else -> skip
				fi
			fi;
#ifdef BROKEN_KICK_FIRST
			sl = false;
#endif
			res[M(s, i)] = OK
		fi;
		stop = false;
		i++
	:: else -> break
	od;
#ifdef GRANT
	/* A store buffer empties on its own, some time later (nobody may
	 * count on when: that is what the revocation's membarrier is for). */
	atomic { COMMIT(s) }
#endif
}

/* ---------------------------------------------------------- receiver */

inline consume(s) {      /* R handles the entry at its position in queue s */
	cons[M(s, rd[s])]++;
	assert(cons[M(s, rd[s])] == 1);            /* never twice */
	assert(res[M(s, rd[s])] != FAIL);          /* never handled-and-FAIL */
	consumed++;
	handled++;
	rd[s]++
}

#ifdef GEN
inline consume_gen(s) {
#ifndef BROKEN_LATE_D4
	assert(who == wr[rd[s]]);                  /* PV3: the writer */
#endif
	consume(s)
}

/* D3, D4, D5 as separate steps: the handler's src is the word D4 read. */
inline take(s) {
	do
	:: E(s, rd[s]) == VALID ->                                  /* D3 */
#ifndef BROKEN_LATE_D4
		who = sgen;                                         /* D4 */
#endif
#ifdef RING
		consume_gen(s)                                      /* head++ */
#else
		atomic { E(s, rd[s]) = EMPTY; consume_gen(s) }     /* D5: store 0 */
#endif
	:: else -> break
	od;
#ifdef RING
	ack[s] = rd[s];                                             /* D5: publish_ack */
#endif
#ifdef BROKEN_LATE_D4
	who = sgen;                                                 /* D4, too late */
	assert(rd[s] == 0 || who == wr[rd[s] - 1]);
#endif
	who = 0
}

#else
inline take(s) {         /* drain_link(final = false) */
	do
#ifdef RING
	:: atomic { E(s, rd[s]) == VALID -> consume(s) }    /* load seq; head++ */
#else
	:: atomic { E(s, rd[s]) == VALID -> E(s, rd[s]) = EMPTY; consume(s) }  /* load; store 0 */
#endif
	:: else -> break
	od;
#ifdef RING
	ack[s] = rd[s];                                     /* publish_ack */
#endif
}
#endif

inline final_take(s) {   /* drain_link(final = true): LV2 of one queue */
	do
#ifdef BROKEN_PLAIN_FINAL
	:: E(s, rd[s]) == VALID ->                                     /* load ... */
		atomic {
#ifndef RING
			E(s, rd[s]) = EMPTY;                            /* ... store 0 */
#endif
			consume(s); got = true
		}
#else
	:: atomic { E(s, rd[s]) == VALID -> E(s, rd[s]) = EMPTY; consume(s); got = true }  /* CAS */
#endif
	:: else -> break     /* empty, or the CAS failed: the sender took it back */
	od;
#ifdef RING
	ack[s] = rd[s];
#endif
}

inline pending() {       /* nemo__pending -> p: the hint word, then the hot queues */
	p = (hint != 0);
	atomic { if :: !p && (hot & BIT(0)) -> p = (E(0, rd[0]) == VALID) :: else -> skip fi };
	atomic { if :: !p && (hot & BIT(1)) -> p = (E(1, rd[1]) == VALID) :: else -> skip fi }
}

inline drain() {         /* nemo__drain(final = false) */
	q = 0;                                                    /* D1 */
	do
	:: q < 2 ->
		if :: (hot & BIT(q)) -> take(q) :: else -> skip fi;
#ifdef GRANT
		if                                                /* G1: grant a hot queue, or not */
		:: (hot & BIT(q)) -> grant = grant | BIT(q)
		:: true -> skip
		fi;
#endif
		q++
	:: else -> q = 0; break
	od;
	atomic { x = hint; hint = 0 };                            /* D2: exchange */
	do
	:: q < 2 ->
		if
		:: (x & BIT(q)) ->
			n = handled;
			take(q);
			atomic { if :: handled > n -> hot = hot | BIT(q) :: else -> skip fi; n = 0 }  /* hot_add */
		:: else -> skip
		fi;
		q++
	:: else -> q = 0; x = 0; break
	od
}

inline place_wait() {    /* nemo_place_wait, no deadline */
	handled = 0;
	state = POLLING;                                          /* W1 */
	do
	::
		/* place_try_take: the poll of W1, and after W3 or W5 */
		pending();
		if :: p -> p = false; drain() :: else -> skip fi;
		if :: handled > 0 -> break :: else -> skip fi;
#ifdef GRANT
		/* GR1-GR3: take the grants back before W2 (nemo__grant_revoke) */
		if
		:: grant != 0 ->
			x = grant; grant = 0;                     /* GR1 */
#ifndef BROKEN_REVOKE_NO_BARRIER
			atomic { COMMIT(0); COMMIT(1) };          /* GR2: membarrier */
#endif
			hint = hint | x; x = 0                    /* GR3: look again */
		:: else -> skip
		fi;
#endif
#ifndef BROKEN_B1_LATE
		bmoved = 0;                                       /* B1: seen := bseq */
#endif
#ifdef BROKEN_CHECK_FIRST
		pending();                                        /* W3 too early */
		if :: !p -> state = SLEEPING :: else -> skip fi;  /* W2 */
#else
		state = SLEEPING;                                 /* W2 */
		pending();                                        /* W3 */
#endif
		if
		:: p -> p = false; state = RUNNING                /* W3: undo */
		:: else ->
#ifdef BROKEN_B1_LATE
			bmoved = 0;                               /* B1, too late */
#endif
			/* W4: futex_wait_bitset(bseq, seen), atomic check-and-queue */
			atomic { if :: !bmoved -> queued = 1 :: else -> skip fi };
			if
			:: queued == 0 -> skip                              /* woken (or EAGAIN) */
			:: atomic { queued == 1 && spur < MAXSPUR -> queued = 0; spur++ }  /* spurious */
			fi;
			state = RUNNING                               /* W5 */
		fi
	od
}

proctype receiver() {
	byte handled, x, n, q;
	bool p;
#ifdef GEN
	byte who;
#endif
#ifdef LEAVE
	bool got;
	byte w = 0;
	do
	:: w < 2 && consumed < nmsg[0] + nmsg[1] -> place_wait(); w++
	:: break
	od;
	status = LEAVING;                                         /* LV1 */
#ifdef BARRIER
	atomic { COMMIT(0); COMMIT(1) };   /* membarrier: every running thread passes a barrier */
#endif
	do                                                        /* LV2 */
	:: got = false;
	   do
	   :: q < 2 -> final_take(q); q++
	   :: else -> q = 0; break
	   od;
	   if :: got -> skip :: else -> break fi
	od;
	status = FREE                                             /* LV3 */
#else
	do
	:: consumed < nmsg[0] + nmsg[1] -> place_wait()
	:: else -> break
	od
#endif
}

/* ----------------------------------------------------------- the end */

#define SETTLED(s, i) \
	((i >= nmsg[s] && res[M(s, i)] == NONE && cons[M(s, i)] == 0) || \
	 (res[M(s, i)] == OK && cons[M(s, i)] == 1) || \
	 (res[M(s, i)] == FAIL && cons[M(s, i)] == 0))

/* Once nothing can move any more (every process ended, or the rest is
 * blocked): R is not asleep (PV1) and every message is settled (PV2). */
proctype watcher() {
	bool asleep, settled;
	timeout ->
	d_step {
		asleep = queued;
		settled = SETTLED(0, 0) && SETTLED(0, 1) && SETTLED(1, 0) && SETTLED(1, 1);
#ifndef LEAVE
		settled = settled && consumed == nmsg[0] + nmsg[1]
#endif
	};
	assert(!asleep);         /* PV1: a lost wake-up */
	assert(settled)          /* PV2 (and PV1: every OK message consumed) */
}

init {
	atomic {
#ifdef GEN
		nmsg[0] = 2;         /* one message of each occupant of sender 0's index */
		run receiver(); run sender(0); run watcher()
#else
		if :: nmsg[0] = 1 :: nmsg[0] = 2 fi;
		if :: nmsg[1] = 1 :: nmsg[1] = 2 fi;
		run receiver(); run sender(0); run sender(1); run watcher()
#endif
	}
}
