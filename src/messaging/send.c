/*
 * send.c - the queues between places and how a send fills them: the
 * puts of one entry (nemo__ring_put, nemo__notify_put) and of a batch
 * (nemo__batch_put), their commit (S2-S5), the first send's handshake,
 * the take-back of an entry that raced a leave, and the publication of
 * deferred sends.  The puts never wait: a full queue (or one still
 * holding a predecessor's entries) answers EAGAIN, and the callers in
 * overflow.c wait for room or keep the send.  How a place finds and
 * handles what is queued to it is drain.c; how it waits, placewait.c.
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
 *   WS1 only before this occupant's first entry on the queue (WHO SENT
 *       IT): wait until its predecessors' entries there are given back.
 *   WS2 store(link's sender-generation word, own generation, release).
 *   S1  write the entry; its seq / FIFO word last, with release: this is
 *       what makes everything s wrote before (WS2 included) visible to r.
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
 * first entry on the queue does WS1 and WS2:
 *
 *   WS1 wait until every entry its predecessors wrote on the queue has
 *       been given back: ring: load(link.ack, acquire) == its tail;
 *       FIFO: load(entry at nf_tail - 1, acquire) == 0 (the receiver
 *       empties entries in order; a retract rewound nf_tail past its own
 *       entry).  Until then the put answers EAGAIN, and its caller waits
 *       as for room in a full queue (overflow.c, THE WAIT FOR ROOM: it
 *       serves its own queues meanwhile; NEMO_NONBLOCK gives EAGAIN; the
 *       receiver leaving gives ESRCH; counted in full_waits).  A handler
 *       run while it waits may claim the queue first: then it is
 *       claimed.
 *   WS2 store(word, its generation, release).
 *
 * Why D4 reads the generation of the entry's writer W.  W stored the word
 * (WS2) before the entry (S1, release) and D3 loaded the entry with
 * acquire, so WS2 happens before D4, and D4 reads W's value or a later
 * one (coherence).  A later value is stored only by a later occupant at
 * its WS2, after its WS1 read the give-back (D5, release) of W's last entry
 * or of a later one: the ack only grows, the FIFO is emptied in order,
 * and each D5 is sequenced after the D4 of its entry and of every entry
 * before it.  So the D4 of each of W's entries happens before the later
 * WS2 and cannot read it.  (The occupants of r continue each other's
 * positions: one's LV3 and the next one's join, under the domain lock,
 * order the earlier one's D4s before the later one's D5s.)  Gen 0 never
 * occurs (domain.c skips it at the 48-bit wrap), so a new domain's zero
 * word names nobody and the first occupant's WS1 finds ack == tail == 0.
 * The cost: nothing per entry for a place that keeps its index (the
 * receiver's extra load hits its own line); a new occupant waits at most
 * until the receiver has handled what the previous occupant sent there,
 * as if the queue were full.  models/place.pml -DGEN checks the handover
 * (and -DGEN -DBROKEN_NO_GEN_WAIT that without WS1 a handler names the
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
 *
 * (How a place receives, D1-D5, and why no wake-up is lost: drain.c.
 * The leave protocol, WHY A SEND RACING A LEAVE IS DELIVERED XOR FAILED,
 * is written beside its code, nemo_place_leave in domain.c; the wait,
 * W1-W6, beside nemo_place_wait in placewait.c; OVERFLOW, how a send
 * from a handler never waits, and THE WAIT FOR ROOM in overflow.c;
 * interrupt deferral in irq.c; THE STREAM GRANT in grant.c; the
 * asymmetric barrier in src/platform/asym.c.)
 */
#define _GNU_SOURCE
#include "messaging_internal.h"

#include <errno.h>
#include <string.h>

/* The calling thread's place, or NULL (domain.c joins and leaves). */
__thread nemo_place *nemo__tls_place __attribute__((tls_model("initial-exec")));

#define NEMO__PREFETCH_SLOTS 16     /* 4 lines ahead */

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

/* ------------------------------------------- first send (WHO SENT IT) */

/* Before this occupant's first entry on a queue whose sender-generation
 * word names another: its predecessors' entries there must all be given
 * back (WS1) - else EAGAIN, and the caller waits as for room - then store
 * our generation (WS2). */
struct idle {
	nemo__out *o;
	nemo__link *lk;
	uint64_t gen;
};

static bool ring_idle(void *p)
{
	struct idle *q = p;
	if (q->o->ring_gen == q->gen)
		return true;
	q->o->ack_seen = atomic_load_explicit(&q->lk->ack, memory_order_acquire);    /* WS1 */
	return q->o->ack_seen == q->o->tail;
}

static bool nf_idle(void *p)
{
	struct idle *q = p;
	if (q->o->nf_gen == q->gen)
		return true;
	_Atomic uint64_t *e = &q->lk->nf[(q->o->nf_tail - 1) % NEMO_NOTIFY_FIFO_LEN];
	return atomic_load_explicit(e, memory_order_acquire) == 0;                   /* WS1 */
}

/* Claim the ring (ring = true) or the FIFO of link lk for me: 0, or
 * EAGAIN while a predecessor's entries are still there (WS1). */
static __attribute__((noinline)) int claim(nemo_place *me, nemo__out *o, nemo__link *lk, bool ring)
{
	struct idle q = { o, lk, me->gen };
	if (!(ring ? ring_idle : nf_idle)(&q))
		return EAGAIN;
	if (ring && o->ring_gen != me->gen) {
		atomic_store_explicit(&lk->ring_sgen, me->gen, memory_order_release);     /* WS2 */
		o->ring_gen = me->gen;
	} else if (!ring && o->nf_gen != me->gen) {
		atomic_store_explicit(&lk->nf_sgen, me->gen, memory_order_release);       /* WS2 */
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
 * every drain publishes ack before it returns, hence before LV1, whose
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
	if (__builtin_expect(o->ring_gen != me->gen, 0)) {                  /* WS1, WS2 */
		int err = claim(me, o, lk, true);
		if (err)
			return err;
	}
	uint32_t need = nemo__slots_for(nemo__meta_len(meta));
	if (o->tail + need - o->ack_seen > d->R) {
		struct ring_room rr = { o, lk, need, d->R };
		if (!ring_has_room(&rr))
			return EAGAIN;      /* full: the caller waits (overflow.c) */
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
	if (__builtin_expect(o->ring_gen != me->gen, 0)) {                  /* WS1, WS2 */
		err = claim(me, o, lk, true);
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
			err = EAGAIN;       /* full: the caller waits (overflow.c) */
			break;
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
	if (__builtin_expect(o->nf_gen != me->gen, 0)) {                    /* WS1, WS2 */
		int err = claim(me, o, lk, false);
		if (err)
			return err;
	}
	struct nf_room nr = { o, lk };
	if (!nf_has_room(&nr))
		return EAGAIN;              /* full: the caller waits (overflow.c) */
	uint32_t p = o->nf_tail;
	_Atomic uint64_t *e = &lk->nf[p % NEMO_NOTIFY_FIFO_LEN];
	uint64_t v = nemo__nf_entry(chan, nemo__rtag(nemo__id_gen(dest)));
	atomic_store_explicit(e, v, memory_order_release);                   /* S1 */
	o->nf_tail = p + 1;
	struct nf_back b = { o, e, v, p };
	return send_commit(me, dst, st, dest, flags, &me->c_nf_sent, nf_back, &b, "nemo_notify");
}
