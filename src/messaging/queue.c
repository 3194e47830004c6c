/*
 * queue.c - the queues between places: how a send fills them (waiting
 * for room when one is full), and how a place finds and handles what is
 * queued to it.  How a place waits for it is in placewait.c.
 *
 * THE QUEUES
 *
 * For every ordered pair (sender index s, receiver index r) of a domain
 * there are two single-producer single-consumer queues
 * (messaging_internal.h).  They belong to the indexes, not to the places:
 * whichever place occupies s writes them and whichever occupies r reads
 * them, and the private positions (out[s][r] of the sender, in[r][s] of
 * the receiver) carry over from one occupant of an index to the next.
 *
 *   nf[16]   the notification FIFO of Barrelfish TN-9: 64-bit entries on
 *            two cache lines, 0 = empty, else chan << 32 | rtag << 1 | 1.
 *            s fills the entry at its private nf_tail if it is 0; r reads
 *            the entry at its private nf_head and writes 0 back.  An entry
 *            that is not 0 at nf_tail means the FIFO is full.  A poll's
 *            empty check reads only the line that holds nf_head.
 *   ring[R]  the active-message ring: 16-byte slots, a message is a head
 *            slot {seq, meta, arg} and ceil(len/12) payload slots, whose
 *            first word is 0.  A head is valid for position p iff its
 *            seq is rtag << 2 | lap(p) << 1 | 1, lap(p) = (p / R) & 1.
 *            The consumer only reads slots (Barrelfish UMP's epoch idea,
 *            with the lap as the epoch), and publishes how far it has read
 *            in the link's ack word on its own line; the sender reads ack
 *            only when its cached view says the ring is full.  So in
 *            steady state a message costs one line transfer per 4 slots
 *            and no shared index at all.
 *
 * rtag is the low 30 bits of the receiving occupant's generation: an
 * entry written for an earlier occupant of r does not match the current
 * one (WHY A LATE ENTRY REACHES NO LATER OCCUPANT).  Entries carry no
 * sender tag: the link's sender-generation words name the sender (WHO
 * SENT IT).
 *
 * One lap bit is enough.  The sender writes each position once per lap,
 * in order: a message its payload positions (first word 0) and then its
 * head, a batch one head per position.  The one rewrite is after a
 * retract (S3, below), which first CASes the head back to 0 and rewinds
 * the tail, so that those positions are written again in the same lap
 * (the retracted message's payload slots beyond the new message keep
 * their word 0).  The sender writes position p only when p - ack < R,
 * and ack never passes the receiver's head h.  So when the receiver looks
 * at position h, the slot holds the last write of position h - if the
 * sender got there: this lap's head, a payload word, a retracted 0 - or
 * else that of position h - R, the previous lap: a head with the other
 * lap bit, a payload word or 0 (or, in the first lap, a new domain's 0).
 * Only this lap's head for this receiver matches.  Positions are 32-bit
 * and wrap; R divides 2^32, so laps alternate across the wrap too.
 *
 * Each receiver has a hint bitmap, one bit per sender.  Only sender s
 * sets bit s (fetch_or); only r clears bits (exchange with 0).
 *
 * Each place publishes its state in its waiter slot (src/waiter):
 * RUNNING, POLLING (in nemo_place_wait, watching memory) or SLEEPING (in
 * futex_wait on the domain's shared word, or about to be), and its 64-bit
 * status word: gen << 2 | FREE / ACTIVE / LEAVING.
 *
 * SEND (s to r; nemo__ring_put, nemo__notify_put, send_commit, nemo__publish)
 *
 *   S0  st := load(r.status, acquire); not ACTIVE of the id's generation
 *       -> ESRCH, nothing written.
 *   G1  only before this occupant's first entry on the queue (WHO SENT
 *       IT): wait until its predecessors' entries there are given back.
 *   G2  store(link's sender-generation word, own generation, release).
 *   S1  write the entry; its seq / FIFO word last, with release: this is
 *       what makes everything s wrote before (G2 included) visible to r.
 *   S2  (no fence: see THE ASYMMETRIC BARRIER; a seq_cst fence where
 *       membarrier is not available)
 *   S3  if load(r.status) != st: r is leaving (or left).  A ring
 *       entry may have been read by an ordinary drain before the leave
 *       (reads leave the slot as it was): if load(link.ack, acquire) is
 *       past the entry, it was delivered -> 0.  Otherwise try to take the
 *       entry back, CAS(seq or FIFO word: entry -> 0).  Success: nobody
 *       consumed it and nobody will (no later occupant's rtag matches)
 *       -> ESRCH.  Failure: r's final drain consumed it -> 0, delivered;
 *       no kick needed.  (FIFO entries need no ack check: an ordinary
 *       drain writes 0 back, so the CAS fails.)
 *   -- with NEMO_MORE the send stops here; S4-S5 run at the next
 *      publishing send or nemo_flush.
 *   S4g load(r's grant word, relaxed) has bit s: r granted us its stream
 *       and watches our queue on every poll: stop, no P, S4 or S5 (THE
 *       STREAM GRANT, below).
 *   P   atomic_thread_fence(seq_cst): orders every entry written so far
 *       before the hint load (one fence per publication, not per entry).
 *       It halves a stream of unbatched sends; why it stays here and
 *       not on the receiver (a membarrier per sleep costs more): docs/
 *       fastpaths.md, "Why P stays on the sender".
 *   S4  if load(hint word, seq_cst) has bit s: stop.  Else
 *       fetch_or(hint word, bit s, seq_cst) and go on.  (A set bit was set
 *       by s itself, earlier, and r has not cleared it yet: r has not
 *       looked at s's queues since, and will; s already kicked then.)
 *   S5  kick (kick.c): load(r's waiter state, seq_cst) decides nothing,
 *       FUTEX_WAKE or signal.  NEMO_PUSH goes to S5 even when S4 stops.
 *
 * RECEIVE (r; nemo__drain)
 *
 *   D1  the hot queues (senders found non-empty recently): consume what
 *       is valid.  A polling receiver sees a hot sender's entry with one
 *       line transfer, before the sender has even set its hint bit.
 *   D2  for each hint word that is not 0: x := exchange(word, 0,
 *       seq_cst); drain every queue whose bit is in x.
 *   Consuming an entry (drain_link):
 *   D3  load(seq or FIFO word at the private head, acquire); stop unless
 *       it is valid for this position and this receiver;
 *   D4  load(the queue's sender-generation word, relaxed): the sender
 *       is make_id(s, that generation);
 *   D5  give the entry back: FIFO store(word, 0, release); ring: advance
 *       the private head, and store(ack, head, release) every R/4
 *       slots and at the end of the drain (the final drain first CASes
 *       each entry to 0, acq_rel, for S3's race).
 *   The entry is copied out and given back before the handler runs, so
 *   a handler may itself poll or wait without seeing its own message
 *   again, and may wait for room in a queue to the same sender.
 *
 * WHY NO WAKE-UP IS LOST
 *
 * S4;S5 and W2;W3 are the store-buffering pattern (as in waiter.c): s
 * stores the hint bit then loads state; r stores state then loads the
 * hint; all seq_cst.  One of the two loads sees the other's store: r sees
 * the bit and does not sleep, or s sees SLEEPING and wakes it (the
 * waiter layer's CAS, then its bump of bseq and FUTEX_WAKE_BITSET: B1
 * read bseq before W2, and the CAS follows W2, so W4 either finds bseq
 * changed and returns at once or sleeps before the bump and is woken by
 * its bit).  When S4 finds the bit already set, s skips S5:
 * that bit's own setting was followed by its own S5, and r clears it only
 * in D2, whose exchange reads s's set bit; then s's load at S4, which
 * read the bit before that exchange, precedes it in the seq_cst order,
 * so the entry written before the fence P is visible to D2's loads that
 * follow the exchange: r drains it.  W6 does the same for interrupt mode, where
 * RUNNING (not SLEEPING) is the state that needs a kick: a sender that
 * read POLLING does not signal, and the place sees its hint at W6.
 * models/place.pml checks this with spin, with the broken variants
 * "kick before hint", "check before publishing SLEEPING", "bseq read
 * after publishing SLEEPING".
 *
 * (The leave protocol, WHY A SEND RACING A LEAVE IS DELIVERED XOR FAILED,
 * is written beside its code, nemo_place_leave in domain.c; the wait,
 * W1-W6, beside nemo_place_wait in placewait.c; OVERFLOW, how a send
 * from a handler never waits, in overflow.c; interrupt deferral in irq.c.)
 *
 * WHO SENT IT
 *
 * Every entry of queue (s -> r) was written by an occupant of s, and the
 * occupants of s write it one after the other: an occupant leaves only
 * outside any send, and the next one joins after that.  Each queue has a
 * sender-generation word on the link's ack line (ring_sgen, nf_sgen):
 * the sender writes it once per occupant, the receiver reads it once per
 * entry from a line it writes itself (ack).  The sender keeps a private
 * copy of what its index last stored (out.ring_gen, out.nf_gen), so a
 * send compares two private words and goes on.  Only a new occupant's
 * first entry on the queue does G1 and G2:
 *
 *   G1  wait until every entry its predecessors wrote on the queue has
 *       been given back: ring: load(link.ack, acquire) == its tail;
 *       FIFO: load(entry at nf_tail - 1, acquire) == 0 (the receiver
 *       empties entries in order; a retract rewound nf_tail past its own
 *       entry).  It waits as a send waits for room in a full queue
 *       (wait_room: it serves its own queues meanwhile; NEMO_NONBLOCK
 *       gives EAGAIN; the receiver leaving gives ESRCH; counted in
 *       full_waits).  A handler run while it waits may claim the queue
 *       first: then it is claimed.
 *   G2  store(word, its generation, release).
 *
 * Why D4 reads the generation of the entry's writer W.  W stored the word
 * (G2) before the entry (S1, release) and D3 loaded the entry with
 * acquire, so G2 happens before D4, and D4 reads W's value or a later
 * one (coherence).  A later value is stored only by a later occupant at
 * its G2, after its G1 read the give-back (D5, release) of W's last entry
 * or of a later one: the ack only grows, the FIFO is emptied in order,
 * and each D5 is sequenced after the D4 of its entry and of every entry
 * before it.  So the D4 of each of W's entries happens before the later
 * G2 and cannot read it.  (The occupants of r continue each other's
 * positions: one's L3 and the next one's join, under the domain lock,
 * order the earlier one's D4s before the later one's D5s.)  Gen 0 never
 * occurs (domain.c skips it at the 48-bit wrap), so a new domain's zero
 * word names nobody and the first occupant's G1 finds ack == tail == 0.
 * The cost: nothing per entry for a place that keeps its index (the
 * receiver's extra load hits its own line); a new occupant waits at most
 * until the receiver has handled what the previous occupant sent there,
 * as if the queue were full.  models/place.pml -DGEN checks the handover
 * (and -DGEN -DBROKEN_NO_GEN_WAIT that without G1 a handler names the
 * wrong sender).
 *
 * WHY A LATE ENTRY REACHES NO LATER OCCUPANT
 *
 * A sender writes the rtag of the generation it read at S0.  If S3 reads
 * the same status, that occupant is still there and takes the entry
 * (above).  If not, the entry is retracted or was delivered - but
 * between S1 and the retract it sits at the receiver's head position,
 * where a later occupant of r may look (it continues the positions, and
 * the lap bit matches).  Its D3 rejects the entry because the rtag
 * differs, unless its generation equals the writer's modulo 2^30: index r
 * would have to be left and joined a multiple of 2^30 times (about 10^9)
 * while this one sender is stopped between S0 and S3.  Ids (48-bit
 * generations) repeat only after 2^48 joins of one index.
 *
 * THE ASYMMETRIC BARRIER
 *
 * S1;S3 against L1;L2 is again store-then-load on both sides, which
 * needs a full fence on both.  But senders send millions of times a
 * second and places leave rarely, so the fence is moved to the leaver:
 * after L1 it calls membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which
 * makes every running thread of the process pass a full barrier before
 * it returns (a thread that is not running is past one already: the
 * context switch).  A sender's S3 is then a plain load: if it read the
 * old status, it did so before its barrier point, and its entry store,
 * earlier in program order, was visible at that point, before L2 looks.
 * (liburcu's urcu-membarrier and folly's asymmetricHeavyBarrier use the
 * same trade.)  Measured on the 2-vCPU VM: the per-message seq_cst fence
 * cost the batched sender about two thirds of its throughput, because it
 * waits for the store to the line the consumer is reading.  Where
 * membarrier is unavailable (old kernel, seccomp) or NEMO_MEMBARRIER=0,
 * nemo__asym is false and every send fences at S2 instead.
 * models/place.pml -DLEAVE models the sender's entry store as buffered
 * (x86-TSO) until a fence, a locked instruction or the leaver's barrier.
 *
 * THE STREAM GRANT
 *
 * P-S5 make a stream of unbatched sends pay a full fence per message (it
 * waits for the entry's line, which the polling receiver has just read)
 * plus the hint RMW on a line the receiver keeps clearing: 45 M msg/s
 * against 100+ without (docs/messaging.md, "Stream grants").  But a
 * receiver that is polling a sender's queue on every poll anyway does
 * not need the hint or the kick.  So a receiver may grant a sender its
 * stream, and the sender then skips P, S4 and S5; the price moves to the
 * receiver, once per grant instead of once per message, the asymmetric
 * barrier's trade again:
 *
 *   grant word  grants[r][s / 64], bit s: written by r's thread only (and
 *               cleared by its leave); read by s at S4g.
 *   G0  r grants only while nothing but its own polls would notice a
 *       message: membarrier registered, interrupts off, no eventfd, not
 *       served by the progress thread, no delay stamps, fewer than
 *       NEMO__GRANT_MAX grants.
 *   G1  D1 counts each hot queue's stream (messages, reset after
 *       NEMO__GRANT_IDLE empty polls in a row); at grant_need messages:
 *       store(grant word | bit s, relaxed).  Granted queues stay hot
 *       (hot_add skips them), so every poll's D1 looks at them.
 *   S4g the sender, after S3 and a compiler barrier: load(grant word,
 *       relaxed) has bit s -> return 0 (no P, no S4, no S5).
 *   R1  before r stops looking at its queues - W2 (it sleeps), F1 (it
 *       arms its eventfd), turning interrupts on, being served - it
 *       stores 0 to its grant words (relaxed);
 *   R2  membarrier (nemo__asym_heavy);
 *   R3  fetch_or(its own hint words, the revoked bits): its next look
 *       (W3's pending check, F2's, the next drain) drains those queues.
 *
 * Why no wake-up is lost.  A send that skipped S5 read its bit before R1
 * (it read 1).  R2 makes every running thread of the process pass a full
 * barrier (a descheduled one passed one at its context switch): s passes
 * it after its entry store, since that store precedes the load that read
 * the bit, which precedes R1, which precedes R2.  So the entry is visible
 * to r after R2, and R3's bit makes W3 (or F2) find it before r sleeps
 * (or leaves its queues to its eventfd): r drains it instead.  A send
 * whose S4g comes after R1 reads 0 (the grant word's coherence order)
 * and does P-S5 as before.  A grant made while r runs costs no kick: a
 * running place in none of the modes G0 excludes is never kicked
 * anyway.  A leave needs no R1-R3: L1's membarrier already puts every
 * send's entry, granted or not, in front of L2 (THE ASYMMETRIC BARRIER).
 * models/place.pml -DGRANT checks this with buffered entry stores, and
 * -DGRANT -DBROKEN_REVOKE_NO_BARRIER that without R2 r sleeps on a
 * message.
 *
 * The cost, and the backoff.  A revocation is one membarrier: 0.1 us when
 * no other thread of the process runs, about 13 us on this VM when one
 * does (docs/fastpaths.md), and an interruption of every running thread.
 * So only long streams are granted (NEMO__GRANT_STREAK = 1024 messages),
 * and each revocation that followed fewer than NEMO__GRANT_PAYBACK
 * messages doubles the length the next grant waits for (up to
 * NEMO__GRANT_STREAK_MAX); one that paid resets it.  Request/response
 * traffic, where the receiver's polls find a message and then nothing
 * for a while, never builds a streak.  Counted in grants and
 * grant_revokes (nemo/domain.h).
 *
 * BACKPRESSURE
 *
 * A full ring or FIFO never drops: a blocking send from outside a
 * handler waits for room while draining the sender's own queues (so
 * cycles of full queues make progress); NEMO_NONBLOCK returns EAGAIN.  G1
 * waits the same way.  A send from a handler does not wait (overflow.c,
 * OVERFLOW).
 * (EDEADLK, for a handler nested more than 8 deep in such waits, is kept
 * as a guard; handlers no longer enter them.)
 */
#define _GNU_SOURCE
#include "messaging_internal.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The calling thread's place, or NULL (domain.c joins and leaves). */
__thread nemo_place *nemo__tls_place __attribute__((tls_model("initial-exec")));

/* ------------------------------------------------ the asymmetric barrier */

bool nemo__asym;
static pthread_once_t asym_once = PTHREAD_ONCE_INIT;

/* Register for MEMBARRIER_CMD_PRIVATE_EXPEDITED (THE ASYMMETRIC BARRIER
 * above).  NEMO_MEMBARRIER=0 turns it off (senders then fence), so the
 * tests can run both ways. */
static void asym_init(void)
{
	const char *env = getenv("NEMO_MEMBARRIER");
	if (env && strcmp(env, "0") == 0)
		return;
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
		nemo__asym = true;
}

void nemo__asym_heavy(void)
{
	if (nemo__asym && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
		return;
	/* Not registered, or it failed: senders fence at S2 only if
	 * nemo__asym is false, which it is in the first case; in the second
	 * (cannot happen once registered) a fence is the best we can do. */
	NEMO__FENCE();
}

void nemo__asym_setup(void)
{
	pthread_once(&asym_once, asym_init);
}


#define NEMO__SERVE_DEPTH_MAX 8
#define NEMO__PREFETCH_SLOTS 16     /* 4 lines ahead */

static inline uint32_t slots_for(size_t len)
{
	return 1u + (uint32_t)((len + 11) / 12);
}

/* ------------------------------------------------------------ lookup */

nemo_place *nemo__dest(struct nemo_domain *d, nemo_place_id id, uint64_t *st)
{
	unsigned idx = nemo_place_index(id);
	if (id == NEMO_PLACE_NONE || idx >= d->P)
		return NULL;
	nemo_place *p = &d->places[idx];
	uint64_t s = atomic_load_explicit(&p->status, memory_order_acquire);
	if (s != nemo__status(nemo__id_gen(id), NEMO__ST_ACTIVE))
		return NULL;
	*st = s;
	return p;
}

/* ----------------------------------------------------------- publish */

/* S4 for one destination (after the fence P): set our hint bit there
 * unless it is set already.  Returns whether S5 must follow: the bit was
 * clear (our queue turned non-empty since r last looked), or push. */
static inline __attribute__((always_inline)) bool hint_set(nemo_place *me, unsigned r, bool push)
{
	me->out_row[r].deferred = 0;
	return nemo__hint_test_set(me, nemo__hint_row(me->d, r) + me->idx / 64, 1ull << (me->idx % 64), push);
}

/* S4g for one destination: it grants us its stream (THE STREAM GRANT). */
static inline __attribute__((always_inline)) bool granted(nemo_place *me, unsigned r)
{
	if (!nemo__granted(nemo__grant_row(me->d, r) + me->idx / 64, 1ull << (me->idx % 64)))
		return false;
	me->out_row[r].deferred = 0;
	return true;
}

static inline __attribute__((always_inline)) void publish(nemo_place *me, unsigned r, bool push)
{
	if (granted(me, r))                                                  /* S4g */
		return;
	NEMO__FENCE();                                                       /* P */
	if (hint_set(me, r, push))                                           /* S4 */
		nemo__kick(me, &me->d->places[r]);                           /* S5 */
}

void nemo__publish(nemo_place *me, unsigned r, bool push)
{
	publish(me, r, push);
}

void nemo__publish_many(nemo_place *me, const unsigned *rs, size_t n, bool push)
{
	nemo_place *need[64];
	size_t nn = 0;
	bool fenced = false;
	for (size_t i = 0; i < n; i++) {
		if (granted(me, rs[i]))                                      /* S4g */
			continue;
		if (!fenced) {
			NEMO__FENCE();                                       /* P */
			fenced = true;
		}
		if (!hint_set(me, rs[i], push))                              /* S4 */
			continue;
		if (nn == sizeof need / sizeof need[0]) {
			nemo__kick_many(me, need, nn);
			nn = 0;
		}
		need[nn++] = &me->d->places[rs[i]];
	}
	nemo__kick_many(me, need, nn);                                       /* S5 */
}

/* ------------------------------------------------------- waiting room */

/*
 * THE WAIT FOR ROOM
 *
 * A send that finds its queue full (or still holding a previous
 * occupant's entries: WHO SENT IT), a send that waits for what the
 * overflow kept (overflow.c, K3 and THE BACKPRESSURE), and the leave's
 * delivery of its overflow all wait here: through the waiter layer's one
 * wait loop, with the place's own policy, so a waiting sender polls for
 * its budget and then sleeps like any waiting place.  While it polls it
 * serves its own queues (a handler may be what the receiver waits for:
 * cycles of full queues cannot deadlock) and delivers what its overflow
 * can.  Before it sleeps it asks the receiver to tell it of room:
 *
 *   RW1  store(link(r <- s).room, 1) (unless set), and the same for every
 *       receiver its overflow keeps sends for (nemo__ovf_arm)
 *   RW2  the asymmetric barrier's heavy side (membarrier; a fence where
 *       it is missing)
 *   RW3  look again: room now -> done, no sleep; a request taken
 *       meanwhile (a receiver kicked, and our look may have drained the
 *       hint bit of that kick) -> RW1 again
 *   RW4  sleep as a place sleeps (placewait.c, W2-W4: publish SLEEPING,
 *       re-check the hint words, futex_wait on the domain's word)
 *
 * and the receiver, after a drain of s's queues that consumed something
 * (drain_link, the end of every drain of a link):
 *
 *   RK1  store(ack, release) / FIFO entries given back (D5)
 *   RK2  compiler fence only (a seq_cst fence where membarrier is missing)
 *   RK3  load(link.room, relaxed): 0 -> done (the common case: one load
 *       of a line the receiver has just written)
 *   RK4  exchange(room, 0); P (fence); S4 on OUR hint bit at s; S5 kick s
 *
 * Why the sender does not sleep through the room it waits for: RW1;RW2;RW3
 * against RK1;RK2;RK3 is the store-buffering pattern made safe by the
 * asymmetric barrier (THE ASYMMETRIC BARRIER, below): if RK3 ran before
 * the barrier took effect on the receiver's CPU, so did RK1, and RW3 sees
 * the room; if after, RK3 sees RW1's flag.  Then RK4 wakes the sender exactly
 * as a sender wakes a receiver - the hint bit, then the kick chosen by the
 * sender's published state (sleeping: FUTEX_WAKE; its eventfd; the
 * progress thread; a signal in interrupt mode) - and RW4's re-check of the
 * hint words closes the last gap (queue.c, WHY NO WAKE-UP IS LOST).  The
 * hint bit names a queue that may be empty: the sender's drain finds
 * nothing there, which costs it one look.  The flag is per pair, so the
 * receiver kicks only the senders that asked, once per asking; a stale
 * flag (the sender found room by itself) costs one spurious kick.  The
 * receiver pays one relaxed load per drained link, on its own line; the
 * sender pays a membarrier only when it is about to sleep.
 * models/overflow.pml checks the handshake with the overflow's.
 */
struct room_wait {
	nemo_place *me;
	nemo_place *dst;              /* the receiver (NULL: the leave's overflow delivery) */
	uint64_t st;
	unsigned r;
	bool (*room)(void *);
	void *arg;
	int err;
	bool asked;                   /* RW1 was done for r */
};

static bool room_done(struct room_wait *w)
{
	if (w->room(w->arg)) {
		w->err = 0;
		return true;
	}
	if (w->dst && atomic_load_explicit(&w->dst->status, memory_order_acquire) != w->st) {
		w->err = nemo__fail(ESRCH, "send", "place index %u left while this send waited for room: "
				    "not delivered", w->r);
		return true;
	}
	return false;
}

/* Serve our own queues once, deliver what the overflow can, look again. */
static bool room_try_take(void *p)
{
	struct room_wait *w = p;
	if (room_done(w))
		return true;
	nemo_place *me = w->me;
	me->serve_depth++;
	nemo__drain(me, NEMO_AM_CTX_WAIT, false);
	me->serve_depth--;
	if (me->ovf_n)
		nemo__ovf_flush(me);
	return room_done(w);
}

/* RW4's re-check after SLEEPING is published (seq_cst loads). */
static bool room_pending(void *p)
{
	struct room_wait *w = p;
	return nemo__pending(w->me) || w->room(w->arg) ||
	       (w->dst && atomic_load_explicit(&w->dst->status, memory_order_seq_cst) != w->st);
}

static bool room_sleep_begin(void *p, uint32_t **word, uint32_t *val, uint32_t *bits)
{
	struct room_wait *w = p;
	nemo_place *me = w->me;
	/* Granted queues are not watched while we sleep (THE STREAM GRANT). */
	nemo__grant_revoke(me);
	/* RW1-RW3 until every request is still standing after the look: a
	 * receiver that took one (and kicked) made room, and our look may
	 * have drained the hint bit of its kick. */
	for (;;) {
		bool fresh = false;
		if (w->dst) {
			_Atomic uint32_t *f = &nemo__link_of(me->d, w->r, me->idx)->room;
			if (!atomic_load_explicit(f, memory_order_relaxed)) {
				atomic_store_explicit(f, 1, memory_order_relaxed);         /* RW1 */
				fresh = true;
			}
			w->asked = true;
		}
		fresh |= nemo__ovf_ask(me);                                                /* RW1 */
		if (!fresh)
			break;
		nemo__asym_heavy();                                                        /* RW2 */
		if (room_try_take(w))                                                      /* RW3 */
			return true;
	}
	nemo_waiter *sw = atomic_load_explicit(&me->waiter, memory_order_relaxed);
	if (nemo__slot_sleep_begin(sw, &me->d->bseq, room_pending, w, word, val, bits))     /* RW4 */
		return false;    /* pending: the futex_wait returns at once, try_take looks */
	NEMO__PCOUNT(me, c_sleeps);
	return false;
}

static void room_sleep_end(void *p)
{
	struct room_wait *w = p;
	nemo__slot_awake(atomic_load_explicit(&w->me->waiter, memory_order_relaxed));
}

static uint64_t room_kicked_at(void *p)
{
	struct room_wait *w = p;
	return nemo__slot_kicked_at(atomic_load_explicit(&w->me->waiter, memory_order_relaxed));
}

static const nemo__wait_ops room_ops = {
	.try_take = room_try_take,
	.sleep_begin = room_sleep_begin,
	.sleep_end = room_sleep_end,
	.kicked_at = room_kicked_at,
	.futex_flags = NEMO_FUTEX_PRIVATE,
};

/* The queue to dst is full (or still holds a previous occupant's
 * entries: WHO SENT IT): wait for room (THE WAIT FOR ROOM).  room(arg)
 * says whether there is room now.  dst NULL: no receiver to watch (the
 * leave's delivery of its overflow: room(arg) says when it is done).
 * Returns 0, ESRCH (dst is leaving: nothing more can reach it), EAGAIN
 * (NEMO_NONBLOCK), EDEADLK, ETIMEDOUT (me->send_by passed). */
int nemo__wait_room(nemo_place *me, nemo_place *dst, uint64_t st, unsigned r, unsigned flags,
		     bool (*room)(void *), void *arg)
{
	if (flags & NEMO_NONBLOCK)
		return EAGAIN;
	if (me->serve_depth >= NEMO__SERVE_DEPTH_MAX)
		return nemo__fail(EDEADLK, "send", "the queue to place index %u is full, and this send runs in a "
				  "handler nested %d deep in waits for room: it may not wait again", r, me->serve_depth);
	NEMO__PCOUNT(me, c_full_waits);
	/* Make sure r knows about what fills its queue (deferred sends). */
	if (dst)
		nemo__publish(me, r, false);
	struct room_wait w = { me, dst, st, r, room, arg, 0, false };
	nemo_waiter *sw = atomic_load_explicit(&me->waiter, memory_order_relaxed);
	nemo__slot_polling(sw);
	int rc = nemo__wait_loop(&room_ops, &w, &me->policy, CLOCK_MONOTONIC, me->send_by, 0);
	nemo__slot_running(sw);
	if (w.asked)   /* a flag the receiver did not take: no kick for nothing */
		atomic_store_explicit(&nemo__link_of(me->d, r, me->idx)->room, 0, memory_order_relaxed);
	if (rc == ETIMEDOUT)
		return ETIMEDOUT;   /* an outcome the caller asked for: bare (fail.h) */
	if (rc)
		return nemo__fail(rc, "send", "the wait for room in the queue to place index %u failed", r);
	return w.err;
}

/* ROOM KICKS (THE WAIT FOR ROOM, RK4): sender s asked to hear of room in
 * its queues to us: tell it as a sender tells a receiver. */
static __attribute__((noinline, cold)) void room_kick(nemo_place *me, nemo__link *lk, unsigned s)
{
	if (!atomic_exchange_explicit(&lk->room, 0, memory_order_relaxed))
		return;
	struct nemo_domain *d = me->d;
	nemo_place *snd = &d->places[s];
	if (nemo__status_state(atomic_load_explicit(&snd->status, memory_order_acquire)) == NEMO__ST_FREE)
		return;
	NEMO__FENCE();                                                                     /* P */
	if (nemo__hint_test_set(me, nemo__hint_row(d, s) + me->idx / 64, 1ull << (me->idx % 64), false))  /* S4 */
		nemo__kick(me, snd);                                                       /* S5 */
	NEMO__PCOUNT(me, c_room_kicks);
}

/* RK2-RK4 after a drain of s's queues that consumed something. */
static inline __attribute__((always_inline)) void room_made(nemo_place *me, nemo__link *lk, unsigned s)
{
	if (__builtin_expect(nemo__asym, 1))
		atomic_signal_fence(memory_order_seq_cst);                                 /* RK2 */
	else
		NEMO__FENCE();
	if (__builtin_expect(atomic_load_explicit(&lk->room, memory_order_relaxed) != 0, 0))   /* RK3 */
		room_kick(me, lk, s);                                                      /* RK4 */
}

/* ------------------------------------------- first send (WHO SENT IT) */

/* Before this occupant's first entry on a queue whose sender-generation
 * word names another: wait until that occupant's entries there are all
 * given back (G1), then store our generation (G2). */
struct idle {
	nemo__out *o;
	nemo__link *lk;
	uint64_t gen;
};

static bool ring_idle(void *p)
{
	struct idle *q = p;
	if (q->o->ring_gen == q->gen)
		return true;        /* a handler run while we waited claimed it */
	q->o->ack_seen = atomic_load_explicit(&q->lk->ack, memory_order_acquire);    /* G1 */
	return q->o->ack_seen == q->o->tail;
}

static bool nf_idle(void *p)
{
	struct idle *q = p;
	if (q->o->nf_gen == q->gen)
		return true;
	_Atomic uint64_t *e = &q->lk->nf[(q->o->nf_tail - 1) % NEMO_NOTIFY_FIFO_LEN];
	return atomic_load_explicit(e, memory_order_acquire) == 0;                   /* G1 */
}

/* Claim the ring (ring = true) or the FIFO of link lk for me: 0, or the
 * error of wait_room (EAGAIN, ESRCH, EDEADLK). */
static __attribute__((noinline)) int claim(nemo_place *me, nemo_place *dst, uint64_t st, unsigned r,
					   unsigned flags, nemo__out *o, nemo__link *lk, bool ring)
{
	struct idle q = { o, lk, me->gen };
	bool (*idle)(void *) = ring ? ring_idle : nf_idle;
	if (!idle(&q)) {
		int err = nemo__wait_room(me, dst, st, r, flags, idle, &q);
		if (err)
			return err;
	}
	if (ring && o->ring_gen != me->gen) {
		atomic_store_explicit(&lk->ring_sgen, me->gen, memory_order_release);     /* G2 */
		o->ring_gen = me->gen;
	} else if (!ring && o->nf_gen != me->gen) {
		atomic_store_explicit(&lk->nf_sgen, me->gen, memory_order_release);       /* G2 */
		o->nf_gen = me->gen;
	}
	return 0;
}

/* ---------------------------------------------------------- ring send */

struct ring_room {
	nemo__out *o;
	nemo__link *lk;
	uint32_t need, R;
};

static bool ring_has_room(void *p)
{
	struct ring_room *rr = p;
	rr->o->ack_seen = atomic_load_explicit(&rr->lk->ack, memory_order_acquire);
	return rr->o->tail + rr->need - rr->o->ack_seen <= rr->R;
}

/* S3 found the receiver leaving: take the ring entry with head hs and
 * seq, ending before position end, back if it was not delivered.  It was
 * delivered if the receiver's ack passed it (an ordinary drain read it:
 * every drain publishes ack before it returns, hence before L1, whose
 * store S3 has just seen), or if our CAS fails (the final drain took it).
 * Returns true when our CAS took it back: not delivered. */
bool nemo__ring_take_back(nemo__link *lk, nemo__slot *hs, uint32_t seq, uint32_t end)
{
	uint32_t ack = atomic_load_explicit(&lk->ack, memory_order_acquire);
	if ((int32_t)(ack - end) >= 0)
		return false;
	uint32_t exp = seq;
	return atomic_compare_exchange_strong_explicit(&hs->seq, &exp, 0, memory_order_acq_rel,
						       memory_order_acquire);
}


/* nemo__send_commit with our hint word at dest's index found here. */
static inline __attribute__((always_inline)) int
send_commit(nemo_place *me, nemo_place *dst, uint64_t st, nemo_place_id dest, unsigned flags,
	    _Atomic uint64_t *sent, bool (*take_back)(void *), void *arg, const char *fn)
{
	unsigned r = nemo_place_index(dest);
	return nemo__send_commit(me, dst, st, dest, flags, sent, take_back, arg, fn, &me->out_row[r],
				 nemo__hint_row(me->d, r) + me->idx / 64,
				 1ull << (me->idx % 64));
}

bool nemo__ring_back(void *arg)
{
	struct nemo__ring_back *b = arg;
	if (!nemo__ring_take_back(b->lk, b->hs, b->seq, b->end))
		return false;
	nemo__out_rewind(b->o, b->p);
	return true;
}

int nemo__ring_put(nemo_place *me, nemo_place *dst, uint64_t st, nemo_place_id dest, uint32_t meta,
		    uint64_t arg, const void *payload, size_t len, unsigned flags)
{
	struct nemo_domain *d = me->d;
	unsigned r = nemo_place_index(dest);
	nemo__out *o = &me->out_row[r];
	nemo__link *lk = nemo__link_of(d, r, me->idx);
	if (__builtin_expect(o->ring_gen != me->gen, 0)) {                  /* G1, G2 */
		int err = claim(me, dst, st, r, flags, o, lk, true);
		if (err)
			return err;
	}
	uint32_t need = slots_for(nemo__meta_len(meta));
	if (o->tail + need - o->ack_seen > d->R) {
		struct ring_room rr = { o, lk, need, d->R };
		if (!ring_has_room(&rr)) {
			int err = nemo__wait_room(me, dst, st, r, flags, ring_has_room, &rr);
			if (err)
				return err;
		}
	}
	/* S1: payload slots, then the head; its seq last, with release. */
	nemo__slot *ring = nemo__ring_of(d, r, me->idx);
	uint32_t mask = d->R - 1, p = o->tail;
	const unsigned char *src = payload;
	for (uint32_t k = 1; k < need; k++) {
		nemo__slot *ps = &ring[(p + k) & mask];
		size_t off = (size_t)(k - 1) * 12, n = len - off < 12 ? len - off : 12;
		atomic_store_explicit(&ps->seq, 0, memory_order_relaxed);
		memcpy((unsigned char *)ps + 4, src + off, n);
	}
	nemo__slot *hs = &ring[p & mask];
	/* Deferred sends (a stream) ask for the line they will write a few
	 * messages from now: the consumer read it a lap ago, so taking it
	 * back costs a round trip, which this overlaps with the messages in
	 * between.  A lone send does not: its one store is the whole point. */
	if (flags & NEMO_MORE)
		__builtin_prefetch(&ring[(p + NEMO__PREFETCH_SLOTS) & mask], 1);
	hs->meta = meta;
	hs->arg = arg;
	if (__builtin_expect(d->stamps != NULL, 0))         /* NEMO_DOMAIN_DELAYS */
		d->stamps[((size_t)r * d->P + me->idx) * d->R + (p & mask)] = nemo_ticks();
	uint32_t seq = nemo__slot_seq(p, d->Rbits, nemo__rtag(nemo__id_gen(dest)));
	atomic_store_explicit(&hs->seq, seq, memory_order_release);
	nemo__out_advance(me, o, p + need);
	NEMO__INVARIANT(o->tail - o->ack_seen <= d->R, "the ring holds more than R slots");
	struct nemo__ring_back b = { o, lk, hs, seq, p, p + need };
	return send_commit(me, dst, st, dest, flags, &me->c_am_sent, nemo__ring_back, &b, "send");
}

/* A batch of one-slot messages: S1 for each (room permitting), then one
 * S3 and one publication for the lot.  If S3 finds the receiver leaving,
 * the entries are settled in order: those its ack covers, or whose CAS
 * fails (its final drain took them), were delivered; from the first CAS
 * that succeeds on, none is (the final drain stops at the first entry it
 * cannot take, so the rest are ours to take back). */
static uint32_t batch_settle(nemo_place *me, nemo__slot *ring, uint32_t mask, nemo__link *lk,
			     uint32_t first, uint32_t end, uint32_t rtag, size_t *delivered)
{
	unsigned rb = me->d->Rbits;
	uint32_t p = first;
	while (p != end && !nemo__ring_take_back(lk, &ring[p & mask], nemo__slot_seq(p, rb, rtag), p + 1))
		p++;
	*delivered = p - first;
	/* The rest: ours to take back (their CASes cannot fail now). */
	for (uint32_t q = p; q != end; q++)
		nemo__ring_take_back(lk, &ring[q & mask], nemo__slot_seq(q, rb, rtag), q + 1);
	return p;           /* the new tail */
}

int nemo__batch_put(nemo_place *me, nemo_place *dst, uint64_t st, nemo_place_id dest, uint32_t meta,
		     const uint64_t *args, size_t n, unsigned flags, size_t *sent)
{
	struct nemo_domain *d = me->d;
	unsigned r = nemo_place_index(dest);
	nemo__out *o = &me->out_row[r];
	nemo__link *lk = nemo__link_of(d, r, me->idx);
	nemo__slot *ring = nemo__ring_of(d, r, me->idx);
	uint32_t mask = d->R - 1, rtag = nemo__rtag(nemo__id_gen(dest));
	unsigned rb = d->Rbits;
	size_t done = 0;
	int err = 0;
	if (__builtin_expect(o->ring_gen != me->gen, 0)) {                  /* G1, G2 */
		err = claim(me, dst, st, r, flags, o, lk, true);
		if (err) {
			*sent = 0;
			return err;
		}
	}
	while (done < n) {
		/* As many as fit now (at least one, after waiting if needed). */
		uint32_t room = d->R - (o->tail - o->ack_seen);
		if (!room) {
			o->ack_seen = atomic_load_explicit(&lk->ack, memory_order_acquire);
			room = d->R - (o->tail - o->ack_seen);
		}
		if (!room) {
			struct ring_room rr = { o, lk, 1, d->R };
			err = nemo__wait_room(me, dst, st, r, flags, ring_has_room, &rr);
			if (err)
				break;
			continue;
		}
		size_t chunk = n - done < room ? n - done : room;
		uint32_t first = o->tail, p = first;
		for (size_t i = 0; i < chunk; i++, p++) {                    /* S1 */
			nemo__slot *hs = &ring[p & mask];
			if (!(p % (NEMO__CACHELINE / sizeof *hs)))   /* once per line */
				__builtin_prefetch(&ring[(p + NEMO__PREFETCH_SLOTS) & mask], 1);
			hs->meta = meta;
			hs->arg = args[done + i];
			if (__builtin_expect(d->stamps != NULL, 0))
				d->stamps[((size_t)r * d->P + me->idx) * d->R + (p & mask)] = nemo_ticks();
			atomic_store_explicit(&hs->seq, nemo__slot_seq(p, rb, rtag), memory_order_release);
		}
		nemo__out_advance(me, o, p);
		if (!nemo__dest_still(dst, st)) {                            /* S2, S3 */
			size_t k;
			nemo__out_rewind(o, batch_settle(me, ring, mask, lk, first, p, rtag, &k));
			done += k;
			NEMO__PADD(me, c_am_sent, k);
			if (k < chunk)
				NEMO__PCOUNT(me, c_send_failures);
			err = k < chunk ? ESRCH : 0;
			if (err)
				break;
			continue;
		}
		NEMO__PADD(me, c_am_sent, chunk);
		done += chunk;
		o->deferred = 1;
	}
	if (o->deferred && !(flags & NEMO_MORE))
		nemo__publish(me, r, flags & NEMO_PUSH);                     /* S4, S5 */
	*sent = done;
	return err;
}

/* ------------------------------------------------------- notify send */

struct nf_room {
	nemo__out *o;
	nemo__link *lk;
};

/* S3 found the receiver leaving: take the FIFO entry back (CAS it to 0)
 * unless its final drain took it (then the CAS fails).  No ack check: an
 * ordinary drain writes 0 back. */
struct nf_back {
	nemo__out *o;
	_Atomic uint64_t *e;
	uint64_t v;
	uint32_t p;
};

static bool nf_back(void *arg)
{
	struct nf_back *b = arg;
	uint64_t exp = b->v;
	if (!atomic_compare_exchange_strong_explicit(b->e, &exp, 0, memory_order_acq_rel, memory_order_acquire))
		return false;
	b->o->nf_tail = b->p;
	return true;
}

static bool nf_has_room(void *p)
{
	struct nf_room *nr = p;
	_Atomic uint64_t *e = &nr->lk->nf[nr->o->nf_tail % NEMO_NOTIFY_FIFO_LEN];
	return atomic_load_explicit(e, memory_order_acquire) == 0;
}

int nemo__notify_put(nemo_place *me, nemo_place_id dest, uint32_t chan, unsigned flags)
{
	struct nemo_domain *d = me->d;
	uint64_t st;
	nemo_place *dst = nemo__dest(d, dest, &st);                          /* S0 */
	if (!dst)
		return nemo__fail(ESRCH, "nemo_notify", "place %#llx is not in the domain (never was, or left)",
				  (unsigned long long)dest);
	if (!atomic_load_explicit(&dst->nf_fn, memory_order_acquire)) {
		/* Absent, or cleared by a new occupant's join: which? */
		if (atomic_load_explicit(&dst->status, memory_order_acquire) != st)
			return nemo__fail(ESRCH, "nemo_notify", "place %#llx left", (unsigned long long)dest);
		return nemo__fail(ENOENT, "nemo_notify", "place %#llx has no notification handler "
				  "(nemo_notify_set_handler there)", (unsigned long long)dest);
	}
	unsigned r = nemo_place_index(dest);
	nemo__out *o = &me->out_row[r];
	nemo__link *lk = nemo__link_of(d, r, me->idx);
	if (__builtin_expect(o->nf_gen != me->gen, 0)) {                    /* G1, G2 */
		int err = claim(me, dst, st, r, flags, o, lk, false);
		if (err)
			return err;
	}
	struct nf_room nr = { o, lk };
	if (!nf_has_room(&nr)) {
		int err = nemo__wait_room(me, dst, st, r, flags, nf_has_room, &nr);
		if (err)
			return err;
	}
	/* The tail only now: handlers run while waiting may have notified
	 * this very receiver and taken the slot we looked at first. */
	uint32_t p = o->nf_tail;
	_Atomic uint64_t *e = &lk->nf[p % NEMO_NOTIFY_FIFO_LEN];
	uint64_t v = nemo__nf_entry(chan, nemo__rtag(nemo__id_gen(dest)));
	atomic_store_explicit(e, v, memory_order_release);                   /* S1 */
	o->nf_tail = p + 1;
	struct nf_back b = { o, e, v, p };
	return send_commit(me, dst, st, dest, flags, &me->c_nf_sent, nf_back, &b, "nemo_notify");
}

/* ------------------------------------------------------------ receive */

/* One notification delay of me, for NEMO_DOMAIN_DELAYS (owner only;
 * read by src/poll/delay.c): now - the sender's stamp into a power-of-two
 * histogram of nanoseconds. */
void nemo__delay_record(nemo_place *me, uint64_t enq)
{
	uint64_t now = nemo_ticks();
	uint64_t ns = now > enq ? (uint64_t)nemo_ticks_to_ns((int64_t)(now - enq)) : 0;
	unsigned k = ns ? 63u - (unsigned)__builtin_clzll(ns) : 0;
	if (k >= NEMO__DELAY_BUCKETS)
		k = NEMO__DELAY_BUCKETS - 1;
	NEMO__PCOUNT(me, dl_count);
	NEMO__PADD(me, dl_sum_ns, ns);
	NEMO__PCOUNT(me, dl_bucket[k]);
	if (ns > atomic_load_explicit(&me->dl_max_ns, memory_order_relaxed))
		atomic_store_explicit(&me->dl_max_ns, ns, memory_order_relaxed);
}


/* Run a drained message's action (the action table of am.c's
 * nemo_action_register): the fields of m that every message sets anew.
 * The caller has set the rest - deliver for each message, drain_link's
 * short loop once, since there they do not vary. */
static inline __attribute__((always_inline)) void run_action(nemo_place *me, const nemo__action *adt,
							      nemo_am_msg *m, nemo_place_id src, uint32_t meta,
							      uint64_t arg)
{
	uint32_t action = nemo__meta_action(meta), ev1 = nemo__meta_event1(meta);
	const nemo__action *a = &adt[action];
	nemo_am_handler fn = atomic_load_explicit(&a->fn, memory_order_acquire);
	m->src = src;
	m->action = action;
	m->event = ev1 ? ev1 - 1 : NEMO_AM_NO_EVENT;
	m->arg = arg;
	m->place_ctx = me->user_ctx;      /* a handler may change it */
	if (fn)   /* always set: a send checks it, and it is never cleared */
		fn(m, a->ctx);
}

/* A message of any kind: its payload, length and reply tag too, which
 * vary from one message to the next. */
static inline __attribute__((always_inline)) void deliver(nemo_place *me, const nemo__action *adt, nemo_am_msg *m,
							  nemo_place_id src, uint32_t meta, uint64_t arg,
							  const void *payload, size_t len)
{
	uint64_t tag = 0;
	bool reply = meta & NEMO__META_TAGGED;
	if (__builtin_expect(reply, 0)) {
		/* A reply: its first 8 payload bytes are the request's tag. */
		memcpy(&tag, payload, sizeof tag);
		payload = len > sizeof tag ? (const unsigned char *)payload + sizeof tag : NULL;
		len -= sizeof tag;
	}
	m->dest = me->id;
	m->payload = payload;
	m->len = len;
	m->tag = tag;
	m->is_reply = reply;
	run_action(me, adt, m, src, meta, arg);
}

void nemo__am_deliver(nemo_place *me, nemo_place_id src, uint32_t meta, uint64_t arg,
		      const void *payload, size_t len, nemo_am_context ctx)
{
	nemo_am_msg m = { .context = ctx };
	deliver(me, me->d->adt, &m, src, meta, arg, payload, len);
}


static bool is_granted(nemo_place *me, unsigned s)
{
	return atomic_load_explicit(&nemo__grant_row(me->d, me->idx)[s / 64], memory_order_relaxed) &
	       (1ull << (s % 64));
}

static void hot_add(nemo_place *me, unsigned s)
{
	for (unsigned i = 0; i < NEMO__HOT; i++)
		if (me->hot[i] == s)
			return;
	/* The next slot round the ring that holds no granted sender (G1:
	 * granted ones stay hot; at most NEMO__HOT - 1 are). */
	unsigned k = me->hot_next++ % NEMO__HOT;
	while (me->hot[k] < me->d->P && is_granted(me, me->hot[k]))
		k = me->hot_next++ % NEMO__HOT;
	me->hot[k] = s;
	me->in_row[s].streak = 0;
	me->in_row[s].idle = 0;
}

/* ------------------------------------------------- the stream grant */

/* May this place grant streams now (THE STREAM GRANT, G0)? */
static bool grant_allowed(nemo_place *me)
{
	return nemo__asym && me->grant_n < NEMO__GRANT_MAX &&
	       !atomic_load_explicit(&me->irq_on, memory_order_relaxed) &&
	       atomic_load_explicit(&me->efd, memory_order_relaxed) < 0 &&
	       !atomic_load_explicit(&me->delegated, memory_order_relaxed) && !me->d->stamps;
}

static uint64_t handled_count(nemo_place *me)
{
	return atomic_load_explicit(&me->c_am_handled, memory_order_relaxed) +
	       atomic_load_explicit(&me->c_nf_handled, memory_order_relaxed);
}

/* D1 found got entries on hot queue s: count the stream; grant it (G1)
 * once it is long enough. */
static void grant_note(nemo_place *me, unsigned s, unsigned got)
{
	nemo__in *in = &me->in_row[s];
	if (!got) {
		if (in->idle < NEMO__GRANT_IDLE && ++in->idle == NEMO__GRANT_IDLE)
			in->streak = 0;           /* a pause: the stream ended */
		return;
	}
	in->idle = 0;
	uint32_t k = in->streak + got;
	in->streak = (uint16_t)(k > UINT16_MAX ? UINT16_MAX : k);
	if (k < me->grant_need || is_granted(me, s) || !grant_allowed(me))
		return;
	_Atomic uint64_t *g = &nemo__grant_row(me->d, me->idx)[s / 64];
	atomic_store_explicit(g, atomic_load_explicit(g, memory_order_relaxed) | (1ull << (s % 64)),
			      memory_order_relaxed);                        /* G1 */
	if (!me->grant_n++)
		me->grant_from = handled_count(me);
	NEMO__PCOUNT(me, c_grants);
}

void nemo__grant_revoke_all(nemo_place *me)
{
	struct nemo_domain *d = me->d;
	_Atomic uint64_t *g = nemo__grant_row(d, me->idx), *h = nemo__hint_row(d, me->idx);
	uint64_t was[NEMO_PLACES_MAX / 64];
	for (unsigned w = 0; w < d->HW; w++) {
		was[w] = atomic_load_explicit(&g[w], memory_order_relaxed);
		if (was[w])
			atomic_store_explicit(&g[w], 0, memory_order_relaxed);   /* R1 */
	}
	nemo__asym_heavy();                                                  /* R2 */
	for (unsigned w = 0; w < d->HW; w++)
		if (was[w])
			atomic_fetch_or_explicit(&h[w], was[w], memory_order_relaxed);  /* R3 */
	/* Backoff: a grant that did not carry enough messages to pay for
	 * its barrier makes the next one wait for a longer stream. */
	uint64_t carried = handled_count(me) - me->grant_from;
	if (carried >= NEMO__GRANT_PAYBACK)
		me->grant_need = NEMO__GRANT_STREAK;
	else if (me->grant_need < NEMO__GRANT_STREAK_MAX)
		me->grant_need *= 2;
	me->grant_n = 0;
	for (unsigned i = 0; i < NEMO__HOT; i++)
		if (me->hot[i] < d->P)
			me->in_row[me->hot[i]].streak = 0;
	NEMO__PCOUNT(me, c_grant_revokes);
}

static void publish_ack(nemo__link *lk, nemo__in *in)
{
	if (in->acked != in->head) {
		in->acked = in->head;
		atomic_store_explicit(&lk->ack, in->head, memory_order_release);
	}
}

/* Drain the queues from sender s: at most `budget` entries unless final.
 * Sets *more if it stopped with entries left. */
static unsigned drain_link(nemo_place *me, unsigned s, nemo_am_context ctx, bool final,
			   unsigned budget, bool *more)
{
	struct nemo_domain *d = me->d;
	nemo__in *in = &me->in_row[s];
	nemo__link *lk = &me->link_row[s];
	nemo__slot *ring = me->ring_row + (size_t)s * d->R;
	uint32_t mask = d->R - 1;
	uint32_t g = nemo__rtag(me->gen);
	unsigned rb = d->Rbits;
	unsigned n = 0;

	/* Nothing there (the common case of a poll): two loads and out. */
	if (!final &&
	    atomic_load_explicit(&ring[in->head & mask].seq, memory_order_acquire) !=
		    nemo__slot_seq(in->head, rb, g) &&
	    !nemo__nf_match(atomic_load_explicit(&lk->nf[in->nf_head % NEMO_NOTIFY_FIFO_LEN],
						 memory_order_acquire), g))
		return 0;

	/* Notifications. */
	while (final || n < budget) {
		_Atomic uint64_t *e = &lk->nf[in->nf_head % NEMO_NOTIFY_FIFO_LEN];
		uint64_t v = atomic_load_explicit(e, memory_order_acquire);          /* D3 */
		if (!nemo__nf_match(v, g))
			break;
		/* Who wrote it: read before the entry is given back (WHO SENT IT). */
		uint64_t sg = atomic_load_explicit(&lk->nf_sgen, memory_order_relaxed);  /* D4 */
		if (final) {
			uint64_t exp = v;
			if (!atomic_compare_exchange_strong_explicit(e, &exp, 0, memory_order_acq_rel,
								     memory_order_acquire))
				break;    /* the sender took it back */
		} else {
			atomic_store_explicit(e, 0, memory_order_release);           /* D5 */
		}
		in->nf_head++;
		n++;
		NEMO__PCOUNT(me, c_nf_handled);
		nemo_notify_handler fn = atomic_load_explicit(&me->nf_fn, memory_order_acquire);
		void *fctx = atomic_load_explicit(&me->nf_ctx, memory_order_relaxed);
		if (fn) {
			me->hdepth++;
			fn(fctx, nemo__make_id(s, sg), nemo__nf_chan(v));
			me->hdepth--;
		}
	}

	/* Active messages.  The common ones - no payload, no reply tag, no
	 * delay stamp, an ordinary drain - take the short loop first: the
	 * same steps, fewer instructions (a stream's receiver is bound by
	 * them: docs/messaging.md, "Stream grants").  It fills the handler's
	 * record's constant fields once, and counts the handlers it runs in
	 * hdepth once for the loop (nothing between two of them looks).  The
	 * first message it does not take is left to the general loop. */
	nemo_am_msg m = { .context = ctx };
	const uint64_t *stamps = d->stamps;
	const nemo__action *adt = d->adt;
	uint32_t quarter = d->R / 4;
	uint64_t am = 0;             /* c_am_handled, added once at the end */
	if (!final && !stamps) {
		m.dest = me->id;
		me->hdepth++;
		while (n < budget) {
			uint32_t p = in->head;
			nemo__slot *hs = &ring[p & mask];
			uint32_t v = atomic_load_explicit(&hs->seq, memory_order_acquire);  /* D3 */
			if (v != nemo__slot_seq(p, rb, g))
				break;
			uint32_t meta = hs->meta;
			if (meta & (NEMO__META_TAGGED | NEMO__META_LEN_MASK))
				break;
			uint64_t sg = atomic_load_explicit(&lk->ring_sgen, memory_order_relaxed); /* D4 */
			uint64_t arg = hs->arg;
			in->head = p + 1;
			if (p + 1 - in->acked >= quarter)
				publish_ack(lk, in);                                 /* D5 */
			n++;
			am++;
			run_action(me, adt, &m, nemo__make_id(s, sg), meta, arg);
		}
		me->hdepth--;
	}
	while (final || n < budget) {
		uint32_t p = in->head;
		nemo__slot *hs = &ring[p & mask];
		uint32_t v = atomic_load_explicit(&hs->seq, memory_order_acquire);  /* D3 */
		if (v != nemo__slot_seq(p, rb, g))
			break;
		uint64_t sg = atomic_load_explicit(&lk->ring_sgen, memory_order_relaxed); /* D4 */
		if (final) {
			uint32_t exp = v;
			if (!atomic_compare_exchange_strong_explicit(&hs->seq, &exp, 0, memory_order_acq_rel,
								     memory_order_acquire))
				break;    /* the sender took it back */
		}
		uint32_t meta = hs->meta;
		uint64_t arg = hs->arg;
		uint64_t stamp = stamps ? stamps[((size_t)me->idx * d->P + s) * d->R + (p & mask)] : 0;
		uint32_t len = nemo__meta_len(meta);
		uint32_t need = slots_for(len);
		unsigned char buf[NEMO__WIRE_PAYLOAD_MAX];
		for (uint32_t k = 1; k < need; k++) {
			size_t off = (size_t)(k - 1) * 12, l = len - off < 12 ? len - off : 12;
			memcpy(buf + off, (unsigned char *)&ring[(p + k) & mask] + 4, l);
		}
		in->head = p + need;
		NEMO__INVARIANT(in->head - in->acked <= d->R, "the receiver read past what a ring can hold");
		/* Give the sender its room back before the handler runs: the
		 * handler may wait on a full queue to this very sender. */
		if (in->head - in->acked >= quarter)
			publish_ack(lk, in);
		n++;
		am++;
		if (stamp)
			nemo__delay_record(me, stamp);
		me->hdepth++;
		deliver(me, adt, &m, nemo__make_id(s, sg), meta, arg, len ? buf : NULL, len);
		me->hdepth--;
		NEMO__INVARIANT(me->hdepth >= 0, "handler depth below zero");
	}
	if (am)
		NEMO__PADD(me, c_am_handled, am);
	publish_ack(lk, in);                                                 /* RK1 */
	if (n)
		room_made(me, lk, s);                                        /* RK2-RK4 */
	if (!final && n >= budget)
		*more = true;
	return n;
}

unsigned nemo__drain(nemo_place *me, nemo_am_context ctx, bool final)
{
	struct nemo_domain *d = me->d;
	unsigned total = 0;
	bool more = false, any_left = false;
	/* Past L1 every drain consumes by CAS (domain.c, WHY A SEND RACING A
	 * LEAVE IS DELIVERED XOR FAILED), whoever asks: the leave's own
	 * waits for room, a handler of the final drain that waits. */
	if (__builtin_expect(me->leaving, 0))
		final = true;
	if (final) {
		/* L2: every queue, by CAS, until a pass finds nothing. */
		for (;;) {
			unsigned got = 0;
			for (unsigned s = 0; s < d->P; s++)
				got += drain_link(me, s, ctx, true, 0, &more);
			total += got;
			if (!got)
				return total;
		}
	}
	unsigned budget = d->R + NEMO_NOTIFY_FIFO_LEN;
	/* The watchdog's clock (src/poll/watchdog.c, W3): we are looking now.
	 * Cleared before the hint words are read, so a message whose sender
	 * started the clock after this is either taken below or starts it
	 * again (its bit is still set, or set anew). */
	if (__builtin_expect(atomic_load_explicit(&me->wd_since, memory_order_relaxed) != 0, 0))
		atomic_store_explicit(&me->wd_since, 0, memory_order_seq_cst);
	/* D1: the hot queues first: a polling receiver finds a hot sender's
	 * entry there before the sender's hint bit arrives. */
	for (unsigned i = 0; i < NEMO__HOT; i++) {
		unsigned s = me->hot[i];
		if (s < d->P) {
			unsigned got = drain_link(me, s, ctx, false, budget, &more);
			grant_note(me, s, got);
			total += got;
		}
	}
	/* D2: the hint words. */
	_Atomic uint64_t *row = nemo__hint_row(d, me->idx);
	for (unsigned w = 0; w < d->HW; w++) {
		if (!atomic_load_explicit(&row[w], memory_order_relaxed))
			continue;
		uint64_t x = atomic_exchange_explicit(&row[w], 0, memory_order_seq_cst);
		while (x) {
			unsigned b = (unsigned)__builtin_ctzll(x);
			x &= x - 1;
			unsigned s = w * 64 + b;
			bool left = false;
			unsigned got = drain_link(me, s, ctx, false, budget, &left);
			if (got)
				hot_add(me, s);
			if (left) {
				any_left = true;
				/* Stopped at the budget: keep s findable. */
				atomic_fetch_or_explicit(&row[w], 1ull << b, memory_order_relaxed);
			}
			total += got;
		}
	}
	if ((more || any_left) && atomic_load_explicit(&me->wd_ticks, memory_order_relaxed)) {
		/* Work left for later: its clock runs from now (W3). */
		uint64_t zero = 0, now = nemo_ticks();
		atomic_compare_exchange_strong_explicit(&me->wd_since, &zero, now ? now : 1, memory_order_seq_cst,
							memory_order_relaxed);
	}
	if (more) {
		/* A hot queue hit the budget: find it again next time. */
		for (unsigned i = 0; i < NEMO__HOT; i++) {
			unsigned s = me->hot[i];
			if (s < d->P)
				atomic_fetch_or_explicit(&row[s / 64], 1ull << (s % 64), memory_order_relaxed);
		}
	}
	return total;
}

bool nemo__pending(nemo_place *me)
{
	struct nemo_domain *d = me->d;
	uint32_t g = nemo__rtag(me->gen);
	/* Hot queues first: a stream's next entry is found with the one line
	 * transfer that brings it, before the sender's hint RMW (a second
	 * line, which it is writing at that moment) is even looked at. */
	for (unsigned i = 0; i < NEMO__HOT; i++) {
		unsigned s = me->hot[i];
		if (s >= d->P)
			continue;
		nemo__in *in = &me->in_row[s];
		nemo__slot *hs = &me->ring_row[(size_t)s * d->R + (in->head & (d->R - 1))];
		if (atomic_load_explicit(&hs->seq, memory_order_acquire) == nemo__slot_seq(in->head, d->Rbits, g))
			return true;
		uint64_t v = atomic_load_explicit(&me->link_row[s].nf[in->nf_head % NEMO_NOTIFY_FIFO_LEN],
						  memory_order_acquire);
		if (nemo__nf_match(v, g))
			return true;
	}
	_Atomic uint64_t *row = nemo__hint_row(d, me->idx);
	for (unsigned w = 0; w < d->HW; w++)
		if (atomic_load_explicit(&row[w], memory_order_seq_cst))
			return true;
	return false;
}

/* ------------------------ delivering kept sends (overflow.c, OVERFLOW) */

/* The overflow's delivery (overflow.c, OVERFLOW, keeps the sends): here,
 * beside the puts it calls, because every round of a wait for room
 * (THE WAIT FOR ROOM) flushes it. */

/* Entry e is settled for its receiver: delivered (DONE), or dropped
 * (DROPPED: its report is still to be made, ovf_report). */
static void ovf_done(nemo_place *me, nemo__ovf_entry *e, uint8_t kind)
{
	unsigned r = nemo_place_index(e->dest);
	nemo__out *o = &me->out_row[r];
	NEMO__INVARIANT(me->ovf_n > 0 && (e->kind == NEMO__OVF_RING ? o->ovf_ring : o->ovf_nf) > 0,
			"an overflow entry delivered twice, or counts out of step");
	if (e->kind == NEMO__OVF_RING)
		o->ovf_ring--;
	else
		o->ovf_nf--;
	if (!o->ovf_ring && !o->ovf_nf) {
		atomic_store_explicit(&nemo__link_of(me->d, r, me->idx)->held, 0, memory_order_relaxed);
		me->ovf_rmask[r / 64] &= ~(1ull << (r % 64));
	}
	e->kind = kind;
	if (--me->ovf_n == 0)
		nemo__fast_key_update(me);
	if (kind == NEMO__OVF_DROPPED)
		me->ovf_undelivered++;
}

bool nemo__ovf_ask(nemo_place *me)
{
	bool fresh = false;
	for (unsigned w = 0; w < NEMO_PLACES_MAX / 64; w++)
		for (uint64_t x = me->ovf_rmask[w]; x; x &= x - 1) {
			unsigned r = w * 64 + (unsigned)__builtin_ctzll(x);
			NEMO__INVARIANT(me->out_row[r].ovf_ring + me->out_row[r].ovf_nf > 0 &&
					atomic_load_explicit(&nemo__link_of(me->d, r, me->idx)->held, memory_order_relaxed),
					"a receiver in the overflow's mask with nothing kept for it, or without held");
			_Atomic uint32_t *f = &nemo__link_of(me->d, r, me->idx)->room;
			if (!atomic_load_explicit(f, memory_order_relaxed)) {
				atomic_store_explicit(f, 1, memory_order_relaxed);
				fresh = true;
			}
		}
	return fresh;
}

/* Wake place index r as a sender does (P, S4, S5): a receiver whose kept
 * sends were dropped may wait for held to clear (overflow.c). */
static void ovf_kick_idx(nemo_place *me, unsigned r)
{
	struct nemo_domain *d = me->d;
	NEMO__FENCE();                                                       /* P */
	if (nemo__hint_test_set(me, nemo__hint_row(d, r) + me->idx / 64, 1ull << (me->idx % 64), false))
		nemo__kick(me, &d->places[r]);
}

/* Report the DROPPED entries to their actions' undelivered callbacks
 * (nemo_action_set_undelivered), in order, each run as a handler of this
 * place (hdepth: its sends never wait).  A callback may send and be kept,
 * which may move the array: after each one, look again from the head. */
static void ovf_report(nemo_place *me)
{
	if (me->ovf_reporting)
		return;           /* a callback's own nemo call: the outer loop goes on */
	me->ovf_reporting = true;
	struct nemo_domain *d = me->d;
	while (me->ovf_undelivered) {
		uint32_t i = me->ovf_head;
		while (i < me->ovf_tail && me->ovf[i].kind != NEMO__OVF_DROPPED)
			i++;
		NEMO__INVARIANT(i < me->ovf_tail, "an undelivered entry counted but not in the overflow");
		if (i >= me->ovf_tail) {
			me->ovf_undelivered = 0;
			break;
		}
		nemo__ovf_entry e = me->ovf[i];
		me->ovf[i].kind = NEMO__OVF_DONE;
		me->ovf_undelivered--;
		while (me->ovf_head < me->ovf_tail && me->ovf[me->ovf_head].kind == NEMO__OVF_DONE)
			me->ovf_head++;
		if (me->ovf_head == me->ovf_tail)
			me->ovf_head = me->ovf_tail = 0;
		uint32_t action = nemo__meta_action(e.meta);
		nemo_am_undelivered fn = atomic_load_explicit(&d->adt[action].undelivered, memory_order_acquire);
		if (!fn)
			continue;
		void *ctx = atomic_load_explicit(&d->adt[action].undelivered_ctx, memory_order_relaxed);
		uint32_t ev1 = nemo__meta_event1(e.meta);
		nemo_am_msg m = { .src = me->id, .dest = e.dest, .action = action,
				  .event = ev1 ? ev1 - 1 : NEMO_AM_NO_EVENT, .arg = e.arg,
				  .context = me->in_irq ? NEMO_AM_CTX_INTERRUPT : NEMO_AM_CTX_POLL,
				  .place_ctx = me->user_ctx };
		const unsigned char *pl = e.payload;
		size_t len = e.len;
		if (e.meta & NEMO__META_TAGGED) {   /* a reply: its tag first (am.c) */
			memcpy(&m.tag, pl, sizeof m.tag);
			m.is_reply = true;
			pl += sizeof m.tag;
			len -= sizeof m.tag;
		}
		m.payload = len ? pl : NULL;
		m.len = len;
		me->hdepth++;
		fn(&m, ESRCH, ctx);
		me->hdepth--;
	}
	me->ovf_reporting = false;
}

uint32_t nemo__ovf_flush(nemo_place *me)
{
	if (!me->ovf_n) {
		if (__builtin_expect(me->ovf_undelivered != 0, 0))
			ovf_report(me);
		return 0;
	}
	struct nemo_domain *d = me->d;
	/* Receivers whose queue is still full in this pass: their later
	 * entries wait too (order).  And those we sent to (to publish). */
	uint64_t stuck_ring[NEMO_PLACES_MAX / 64] = { 0 }, stuck_nf[NEMO_PLACES_MAX / 64] = { 0 };
	uint64_t sent[NEMO_PLACES_MAX / 64] = { 0 };
	bool any = false;
	for (uint32_t i = me->ovf_head; i < me->ovf_tail && me->ovf_n; i++) {
		nemo__ovf_entry *e = &me->ovf[i];
		if (e->kind != NEMO__OVF_RING && e->kind != NEMO__OVF_NF)
			continue;
		unsigned r = nemo_place_index(e->dest);
		uint64_t *stuck = e->kind == NEMO__OVF_RING ? stuck_ring : stuck_nf, bit = 1ull << (r % 64);
		if (stuck[r / 64] & bit)
			continue;
		int err;
		if (e->kind == NEMO__OVF_RING) {
			uint64_t st;
			nemo_place *dst = nemo__dest(d, e->dest, &st);
			err = dst ? nemo__ring_put(me, dst, st, e->dest, e->meta, e->arg, e->len ? e->payload : NULL, e->len,
					     NEMO_NONBLOCK | NEMO_MORE)
				  : ESRCH;
		} else {
			err = nemo__notify_put(me, e->dest, (uint32_t)e->arg, NEMO_NONBLOCK | NEMO_MORE);
		}
		if (err == EAGAIN) {
			stuck[r / 64] |= bit;
			continue;
		}
		if (err) {
			/* The receiver left (or, for a notification, cleared its
			 * handler) after the send was kept: it cannot be
			 * delivered, and its sender has been told 0.  Count it,
			 * say so under NEMO_DEBUG, and report it to the action's
			 * undelivered callback after this pass (ovf_report). */
			NEMO__PCOUNT(me, c_ovf_dropped);
			nemo__fail(err, "overflow", "a kept %s to place %#llx could not be delivered: dropped "
				   "(counted in overflow_dropped)", e->kind == NEMO__OVF_RING ? "message" : "notification",
				   (unsigned long long)e->dest);
			bool was_held = me->out_row[r].ovf_ring + me->out_row[r].ovf_nf == 1;
			ovf_done(me, e, e->kind == NEMO__OVF_RING ? NEMO__OVF_DROPPED : NEMO__OVF_DONE);
			if (was_held)   /* r may wait for held to clear, and nothing reaches it */
				ovf_kick_idx(me, r);
			continue;
		}
		sent[r / 64] |= 1ull << (r % 64);
		any = true;
		ovf_done(me, e, NEMO__OVF_DONE);
	}
	while (me->ovf_head < me->ovf_tail && me->ovf[me->ovf_head].kind == NEMO__OVF_DONE)
		me->ovf_head++;
	if (me->ovf_head == me->ovf_tail)
		me->ovf_head = me->ovf_tail = 0;
	if (any) {
		unsigned rs[NEMO_PLACES_MAX];
		size_t n = 0;
		for (unsigned w = 0; w < NEMO_PLACES_MAX / 64; w++)
			for (uint64_t x = sent[w]; x; x &= x - 1) {
				unsigned r = w * 64 + (unsigned)__builtin_ctzll(x);
				if (me->out_row[r].deferred)
					rs[n++] = r;
			}
		nemo__publish_many(me, rs, n, false);
	}
	if (__builtin_expect(me->ovf_undelivered != 0, 0))
		ovf_report(me);
	NEMO__INVARIANT(me->ovf_n <= me->ovf_tail - me->ovf_head, "more kept sends counted than the overflow holds");
	return me->ovf_n;
}
