/*
 * queue.c - the queues between places, and how a place finds, handles and
 * waits for what is queued to it.
 *
 * THE QUEUES
 *
 * For every ordered pair (sender s, receiver r) of a domain there are two
 * single-producer single-consumer queues (messaging_internal.h):
 *
 *   nf[16]   the notification FIFO of Barrelfish TN-9: one cache line of
 *            32-bit entries, 0 = empty, else chan << 16 | stag << 8 |
 *            0x80 | rtag.
 *            s fills the entry at its private nf_tail if it is 0; r reads
 *            the entry at its private nf_head and writes 0 back.  An entry
 *            that is not 0 at nf_tail means the FIFO is full.
 *   ring[R]  the active-message ring: 16-byte slots, a message is a head
 *            slot {seq, meta, arg} and ceil(len/12) payload slots.  A
 *            head is valid for position p iff its seq is
 *            ((p & 0xFFFF) << 16 | stag << 8 | rtag << 1 | 1).  The
 *            consumer only
 *            reads slots (Barrelfish UMP's epoch idea, with the position
 *            as the epoch), and publishes how far it has read in the
 *            link's ack word on its own line; the sender reads ack only
 *            when its cached view says the ring is full.  So in steady
 *            state a message costs one line transfer per 4 slots and no
 *            shared index at all.
 *
 * rtag is the receiver's generation (7 bits): a late entry meant for an
 * earlier occupant of index r never matches the current one.  stag is
 * the sender's: a handler learns who sent the message even if the sender
 * has left since and its index has a new occupant (nemo__sender_id).
 *
 * Each receiver has a hint bitmap, one bit per sender.  Only sender s
 * sets bit s (fetch_or); only r clears bits (exchange with 0).
 *
 * Each place publishes its state in its waiter slot (src/waiter):
 * RUNNING, POLLING (in nemo_place_wait, watching memory) or SLEEPING (in
 * futex_wait on that word, or about to be), and its status word:
 * gen << 2 | FREE / ACTIVE / LEAVING.
 *
 * SEND (s to r; nemo__msg_send, notify_send, nemo__publish)
 *
 *   S0  st := load(r.status, acquire); not ACTIVE of the id's generation
 *       -> ESRCH, nothing written.
 *   S1  write the entry; its seq / FIFO word last, with release: this is
 *       what makes everything s wrote before visible to r's handler.
 *   S2  (no fence: see THE ASYMMETRIC BARRIER; a seq_cst fence where
 *       membarrier is not available)
 *   S3  if load(r.status) != st: r is leaving (or left).  A ring
 *       entry may have been read by an ordinary drain before the leave
 *       (reads leave the slot as it was): if load(link.ack, acquire) is
 *       past the entry, it was delivered -> 0.  Otherwise try to take the
 *       entry back, CAS(seq or FIFO word: entry -> 0).  Success: nobody
 *       consumed it and nobody will (tags differ from any later
 *       occupant's) -> ESRCH.  Failure: r's final drain consumed it ->
 *       0, delivered; no kick needed.  (FIFO entries need no ack check:
 *       an ordinary drain writes 0 back, so the CAS fails.)
 *   -- with NEMO_MORE the send stops here; S4-S5 run at the next
 *      publishing send or nemo_flush.
 *   P   atomic_thread_fence(seq_cst): orders every entry written so far
 *       before the hint load (one fence per publication, not per entry).
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
 *   Consuming copies the entry out and advances the private head (and
 *   publishes ack) before the handler runs, so a handler may itself poll
 *   or wait without seeing its own message again.
 *
 * WAIT (r; nemo_place_wait with the ops below, through nemo__wait_loop,
 * the waiter layer's one decision of how long to poll)
 *
 *   W1  state := POLLING; poll: if nemo__pending() (any hint word, or a
 *       hot queue non-empty) then drain; return once something was handled.
 *   W2  exchange(state, SLEEPING, seq_cst)
 *   W3  if nemo__pending() (seq_cst loads): state := RUNNING, drain.
 *   W4  futex_wait_bitset(domain's bseq, seen, own bit): the waiter
 *       layer's SHARED WORD (B1 reads bseq before W2; a kick CASes state,
 *       then bumps bseq and wakes the bit), so that a broadcast wakes all
 *       its sleepers with one syscall (nemo__kick_many)
 *   W5  state := RUNNING; drain; done if something was handled, else W2.
 *   W6  leaving the wait: store(state, RUNNING, seq_cst), and if interrupt
 *       mode is on, check nemo__pending() once more and drain.
 *
 * WHY NO WAKE-UP IS LOST
 *
 * S4;S5 and W2;W3 are the store-buffering pattern (as in waiter.c): s
 * stores the hint bit then loads state; r stores state then loads the
 * hint; all seq_cst.  One of the two loads sees the other's store: r sees
 * the bit and does not sleep, or s sees SLEEPING and wakes it (the
 * waiter layer's CAS + FUTEX_WAKE, whose kernel check makes a wake before
 * the sleep harmless).  When S4 finds the bit already set, s skips S5:
 * that bit's own setting was followed by its own S5, and r clears it only
 * in D2, whose exchange reads s's set bit; then s's load at S4, which
 * read the bit before that exchange, precedes it in the seq_cst order,
 * so the entry written before the fence P is visible to D2's loads that
 * follow the exchange: r drains it.  W6 does the same for interrupt mode, where
 * RUNNING (not SLEEPING) is the state that needs a kick: a sender that
 * read POLLING does not signal, and the place sees its hint at W6.
 * models/place.pml checks this with spin, with the broken variants
 * "kick before hint", "check before publishing SLEEPING".
 *
 * WHY A SEND RACING A LEAVE IS DELIVERED XOR FAILED
 *
 * nemo_place_leave: L1 status := LEAVING (seq_cst), then the asymmetric
 * barrier; L2 the final drain: every queue, consuming each entry by
 * CAS(entry -> 0) instead of a read, passes until one finds nothing;
 * L3 status := FREE.  A sender whose S3 read ACTIVE wrote its entry
 * before the barrier took effect on its CPU (below), so its entry is
 * visible to L2, which consumes it: delivered.  A sender whose S3 reads
 * otherwise races L2 with its own CAS on the same word: exactly one CAS
 * wins - consumed (the sender returns 0) or taken back (ESRCH).  Later
 * occupants never consume the taken-back entry: its tag is the old
 * generation's.  A ring entry read by an ordinary drain before L1 is not
 * retracted although its seq is still valid: every drain publishes ack
 * before it returns, hence before L1, and a sender that saw L1 (or
 * anything after it) sees that ack at S3.  models/place.pml -DLEAVE
 * checks this (-DRING, the read-only ring; spin found the retract of an
 * already-handled entry before the ack check was added), and that the
 * broken variants "no re-check at S3" (a message lost) and "plain reads
 * in the final drain" (handled and failed) are caught.
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
 *
 * BACKPRESSURE
 *
 * A full ring or FIFO never drops: a blocking send waits for room while
 * draining the sender's own queues (so cycles of full queues make
 * progress), up to 8 levels of handlers nested in such waits (then
 * EDEADLK); NEMO_NONBLOCK returns EAGAIN.
 */
#define _GNU_SOURCE
#include "messaging_internal.h"

#include <errno.h>
#include <sched.h>
#include <string.h>

#define NEMO__SERVE_DEPTH_MAX 8
#define NEMO__PREFETCH_SLOTS 16     /* 4 lines ahead */

static inline uint32_t slots_for(size_t len)
{
	return 1u + (uint32_t)((len + 11) / 12);
}

/* ------------------------------------------------------------ busy */

void nemo__busy_enter(nemo_place *me)
{
	int b = atomic_load_explicit(&me->busy, memory_order_relaxed);
	atomic_store_explicit(&me->busy, b + 1, memory_order_relaxed);
	atomic_signal_fence(memory_order_seq_cst);
}

void nemo__busy_exit(nemo_place *me)
{
	atomic_signal_fence(memory_order_seq_cst);
	int b = atomic_load_explicit(&me->busy, memory_order_relaxed) - 1;
	if (b > 0) {
		atomic_store_explicit(&me->busy, b, memory_order_relaxed);
		return;
	}
	/* Leaving the outermost call: run what an interrupt deferred.  The
	 * check after clearing busy closes the window in which a signal
	 * sees busy set but we have already looked at irq_pending. */
	for (;;) {
		/* A plain load first: a locked exchange on every send and poll
		 * costs more than the rest of a batched send. */
		if (atomic_load_explicit(&me->irq_pending, memory_order_relaxed) &&
		    atomic_exchange_explicit(&me->irq_pending, 0, memory_order_relaxed))
			nemo__drain(me, NEMO_AM_CTX_POLL, false);
		atomic_store_explicit(&me->busy, 0, memory_order_relaxed);
		atomic_signal_fence(memory_order_seq_cst);
		if (!atomic_load_explicit(&me->irq_pending, memory_order_relaxed))
			return;
		atomic_store_explicit(&me->busy, 1, memory_order_relaxed);
		atomic_signal_fence(memory_order_seq_cst);
	}
}

/* ------------------------------------------------------------ lookup */

nemo_place *nemo__dest(struct nemo_domain *d, nemo_place_id id, uint32_t *st)
{
	unsigned idx = nemo_place_index(id);
	if (id == NEMO_PLACE_NONE || idx >= d->P)
		return NULL;
	nemo_place *p = &d->places[idx];
	uint32_t s = atomic_load_explicit(&p->status, memory_order_acquire);
	if (s != nemo__status(nemo__id_gen(id), NEMO__ST_ACTIVE))
		return NULL;
	*st = s;
	return p;
}

/* ----------------------------------------------------------- publish */

/* S4 for one destination (after the fence P): set our hint bit there
 * unless it is set already.  Returns whether S5 must follow: the bit was
 * clear (our queue turned non-empty since r last looked), or push. */
static bool hint_set(nemo_place *me, unsigned r, bool push)
{
	me->out_row[r].deferred = 0;
	_Atomic uint64_t *w = nemo__hint_row(me->d, r) + me->idx / 64;
	uint64_t bit = 1ull << (me->idx % 64);
	if (atomic_load_explicit(w, memory_order_seq_cst) & bit) {
		if (!push)
			NEMO__PCOUNT(me, c_kicks_skipped);
		return push;
	}
	atomic_fetch_or_explicit(w, bit, memory_order_seq_cst);
	return true;
}

void nemo__publish(nemo_place *me, unsigned r, bool push)
{
	NEMO__FENCE();                                                       /* P */
	if (hint_set(me, r, push))                                           /* S4 */
		nemo__kick(me, &me->d->places[r]);                           /* S5 */
}

void nemo__publish_many(nemo_place *me, const unsigned *rs, size_t n, bool push)
{
	nemo_place *need[64];
	size_t nn = 0;
	NEMO__FENCE();                                                       /* P */
	for (size_t i = 0; i < n; i++) {
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

int nemo_flush(nemo_place_id dest)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return ENOTCONN;
	struct nemo_domain *d = me->d;
	int err = 0;
	nemo__busy_enter(me);
	if (dest == NEMO_PLACE_ALL) {
		for (unsigned r = 0; r < d->P; r++)
			if (nemo__out_of(d, me->idx, r)->deferred)
				nemo__publish(me, r, false);
	} else {
		uint32_t st;
		if (nemo__dest(d, dest, &st))
			nemo__publish(me, nemo_place_index(dest), false);
		else
			err = ESRCH;
	}
	nemo__busy_exit(me);
	return err;
}

/* ------------------------------------------------------- waiting room */

/* The queue to dst is full: wait for room, serving our own queues.
 * room(arg) says whether there is room now.  Returns 0, ESRCH (dst is
 * leaving: nothing more can reach it), EAGAIN, EDEADLK. */
static int wait_room(nemo_place *me, nemo_place *dst, uint32_t st, unsigned r, unsigned flags,
		     bool (*room)(void *), void *arg)
{
	if (flags & NEMO_NONBLOCK)
		return EAGAIN;
	if (me->serve_depth >= NEMO__SERVE_DEPTH_MAX)
		return EDEADLK;
	NEMO__PCOUNT(me, c_full_waits);
	/* Make sure r knows about what fills its queue (deferred sends). */
	nemo__publish(me, r, false);
	for (unsigned n = 1;; n++) {
		if (room(arg))
			return 0;
		if (atomic_load_explicit(&dst->status, memory_order_acquire) != st)
			return ESRCH;
		me->serve_depth++;
		nemo__drain(me, NEMO_AM_CTX_WAIT, false);
		me->serve_depth--;
		nemo_cpu_relax();
		/* Oversubscribed: the receiver may need this CPU to make room. */
		if (n % 64 == 0)
			sched_yield();
	}
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

/* S3 found the receiver leaving: was the ring entry with head hs and
 * seq, ending before position end, delivered?  Yes if the receiver's ack
 * passed it (an ordinary drain read it: every drain publishes ack before
 * it returns, hence before L1, whose store S3 has just seen), or if our
 * CAS fails (the final drain took it).  No if the CAS takes it back. */
static bool ring_delivered(nemo__link *lk, nemo__slot *hs, uint32_t seq, uint32_t end)
{
	uint32_t ack = atomic_load_explicit(&lk->ack, memory_order_acquire);
	if ((int32_t)(ack - end) >= 0)
		return true;
	uint32_t exp = seq;
	return !atomic_compare_exchange_strong_explicit(&hs->seq, &exp, 0, memory_order_acq_rel,
							memory_order_acquire);
}

int nemo__msg_send(nemo_place *me, nemo_place *dst, uint32_t st, nemo_place_id dest, uint32_t meta,
		   uint64_t arg, const void *payload, size_t len, unsigned flags)
{
	struct nemo_domain *d = me->d;
	unsigned r = nemo_place_index(dest);
	nemo__out *o = &me->out_row[r];
	nemo__link *lk = nemo__link_of(d, r, me->idx);
	uint32_t need = slots_for(len);
	if (o->tail + need - o->ack_seen > d->R) {
		struct ring_room rr = { o, lk, need, d->R };
		if (!ring_has_room(&rr)) {
			int err = wait_room(me, dst, st, r, flags, ring_has_room, &rr);
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
	uint32_t seq = nemo__slot_seq(p, nemo__gtag(nemo__id_gen(dest)), nemo__gtag(me->gen));
	atomic_store_explicit(&hs->seq, seq, memory_order_release);
	o->tail = p + need;
	if (!nemo__asym)
		NEMO__FENCE();                   /* S2 */
	if (atomic_load_explicit(&dst->status, memory_order_seq_cst) != st) { /* S3 */
		if (!ring_delivered(lk, hs, seq, p + need)) {
			o->tail = p;
			NEMO__PCOUNT(me, c_send_failures);
			return ESRCH;
		}
		NEMO__PCOUNT(me, c_am_sent);   /* read before, or taken by, the leave */
		return 0;
	}
	NEMO__PCOUNT(me, c_am_sent);
	if (flags & NEMO_MORE)
		o->deferred = 1;
	else
		nemo__publish(me, r, flags & NEMO_PUSH);                     /* S4, S5 */
	return 0;
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
	uint32_t stag = nemo__gtag(me->gen), p = first;
	while (p != end && ring_delivered(lk, &ring[p & mask], nemo__slot_seq(p, rtag, stag), p + 1))
		p++;
	*delivered = p - first;
	/* The rest: ours to take back (their CASes cannot fail now). */
	for (uint32_t q = p; q != end; q++)
		ring_delivered(lk, &ring[q & mask], nemo__slot_seq(q, rtag, stag), q + 1);
	return p;           /* the new tail */
}

int nemo__msg_send_batch(nemo_place *me, nemo_place *dst, uint32_t st, nemo_place_id dest, uint32_t meta,
			 const uint64_t *args, size_t n, unsigned flags, size_t *sent)
{
	struct nemo_domain *d = me->d;
	unsigned r = nemo_place_index(dest);
	nemo__out *o = &me->out_row[r];
	nemo__link *lk = nemo__link_of(d, r, me->idx);
	nemo__slot *ring = nemo__ring_of(d, r, me->idx);
	uint32_t mask = d->R - 1, rtag = nemo__gtag(nemo__id_gen(dest)), stag = nemo__gtag(me->gen);
	size_t done = 0;
	int err = 0;
	while (done < n) {
		/* As many as fit now (at least one, after waiting if needed). */
		uint32_t room = d->R - (o->tail - o->ack_seen);
		if (!room) {
			o->ack_seen = atomic_load_explicit(&lk->ack, memory_order_acquire);
			room = d->R - (o->tail - o->ack_seen);
		}
		if (!room) {
			struct ring_room rr = { o, lk, 1, d->R };
			err = wait_room(me, dst, st, r, flags, ring_has_room, &rr);
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
			atomic_store_explicit(&hs->seq, nemo__slot_seq(p, rtag, stag), memory_order_release);
		}
		o->tail = p;
		if (!nemo__asym)
			NEMO__FENCE();                                       /* S2 */
		if (atomic_load_explicit(&dst->status, memory_order_seq_cst) != st) { /* S3 */
			size_t k;
			o->tail = batch_settle(me, ring, mask, lk, first, p, rtag, &k);
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
	_Atomic uint32_t *e;
};

static bool nf_has_room(void *p)
{
	struct nf_room *nr = p;
	_Atomic uint32_t *e = &nr->lk->nf[nr->o->nf_tail % NEMO_NOTIFY_FIFO_LEN];
	return atomic_load_explicit(e, memory_order_acquire) == 0;
}

static int notify_send(nemo_place *me, nemo_place_id dest, uint32_t chan, unsigned flags)
{
	struct nemo_domain *d = me->d;
	uint32_t st;
	nemo_place *dst = nemo__dest(d, dest, &st);                          /* S0 */
	if (!dst)
		return ESRCH;
	if (!atomic_load_explicit(&dst->nf_fn, memory_order_acquire)) {
		/* Absent, or cleared by a new occupant's join: which? */
		if (atomic_load_explicit(&dst->status, memory_order_acquire) != st)
			return ESRCH;
		return ENOENT;
	}
	unsigned r = nemo_place_index(dest);
	nemo__out *o = &me->out_row[r];
	nemo__link *lk = nemo__link_of(d, r, me->idx);
	struct nf_room nr = { o, lk, NULL };
	if (!nf_has_room(&nr)) {
		int err = wait_room(me, dst, st, r, flags, nf_has_room, &nr);
		if (err)
			return err;
	}
	/* The tail only now: handlers run while waiting may have notified
	 * this very receiver and taken the slot we looked at first. */
	uint32_t p = o->nf_tail;
	nr.e = &lk->nf[p % NEMO_NOTIFY_FIFO_LEN];
	uint32_t v = nemo__nf_entry(chan, nemo__gtag(nemo__id_gen(dest)), nemo__gtag(me->gen));
	atomic_store_explicit(nr.e, v, memory_order_release);                /* S1 */
	o->nf_tail = p + 1;
	if (!nemo__asym)
		NEMO__FENCE();                   /* S2 */
	if (atomic_load_explicit(&dst->status, memory_order_seq_cst) != st) { /* S3 */
		uint32_t exp = v;
		if (atomic_compare_exchange_strong_explicit(nr.e, &exp, 0, memory_order_acq_rel,
							    memory_order_acquire)) {
			o->nf_tail = p;
			NEMO__PCOUNT(me, c_send_failures);
			return ESRCH;
		}
		NEMO__PCOUNT(me, c_nf_sent);
		return 0;
	}
	NEMO__PCOUNT(me, c_nf_sent);
	if (flags & NEMO_MORE)
		o->deferred = 1;
	else
		nemo__publish(me, r, flags & NEMO_PUSH);                     /* S4, S5 */
	return 0;
}

int nemo_notify(nemo_place_id dest, uint32_t chan, unsigned flags)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return ENOTCONN;
	if (flags & ~(unsigned)(NEMO_PUSH | NEMO_NONBLOCK | NEMO_MORE))
		return EINVAL;
	if (chan > NEMO_NOTIFY_CHAN_MAX)
		return ERANGE;
	nemo__busy_enter(me);
	int err = notify_send(me, dest, chan, flags);
	nemo__busy_exit(me);
	return err;
}

int nemo_notify_set_handler(nemo_notify_handler fn, void *ctx)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return ENOTCONN;
	/* Only this thread reads the pair, in a drain: a nemo call, so the
	 * interrupt handler cannot run one in between these two stores (it
	 * defers to busy_exit, which then runs the new handler).  Senders
	 * read fn only to refuse a place without one (ENOENT). */
	nemo__busy_enter(me);
	atomic_store_explicit(&me->nf_ctx, ctx, memory_order_relaxed);
	atomic_store_explicit(&me->nf_fn, fn, memory_order_release);
	nemo__busy_exit(me);
	return 0;
}

/* ------------------------------------------------------------ receive */

static void hot_add(nemo_place *me, unsigned s)
{
	for (unsigned i = 0; i < NEMO__HOT; i++)
		if (me->hot[i] == s)
			return;
	me->hot[me->hot_next++ % NEMO__HOT] = s;
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
	uint32_t g = nemo__gtag(me->gen);
	unsigned n = 0;

	/* Nothing there (the common case of a poll): two loads and out. */
	if (!final &&
	    !nemo__slot_match(atomic_load_explicit(&ring[in->head & mask].seq, memory_order_acquire),
			      in->head, g) &&
	    !nemo__nf_match(atomic_load_explicit(&lk->nf[in->nf_head % NEMO_NOTIFY_FIFO_LEN],
						 memory_order_acquire), g))
		return 0;

	/* Notifications. */
	while (final || n < budget) {
		_Atomic uint32_t *e = &lk->nf[in->nf_head % NEMO_NOTIFY_FIFO_LEN];
		uint32_t v = atomic_load_explicit(e, memory_order_acquire);
		if (!nemo__nf_match(v, g))
			break;
		if (final) {
			uint32_t exp = v;
			if (!atomic_compare_exchange_strong_explicit(e, &exp, 0, memory_order_acq_rel,
								     memory_order_acquire))
				break;    /* the sender took it back */
		} else {
			atomic_store_explicit(e, 0, memory_order_release);
		}
		in->nf_head++;
		n++;
		NEMO__PCOUNT(me, c_nf_handled);
		nemo_notify_handler fn = atomic_load_explicit(&me->nf_fn, memory_order_acquire);
		void *fctx = atomic_load_explicit(&me->nf_ctx, memory_order_relaxed);
		if (fn)
			fn(fctx, nemo__sender_id(d, s, nemo__entry_stag(v)), v >> 16);
	}

	/* Active messages. */
	while (final || n < budget) {
		uint32_t p = in->head;
		nemo__slot *hs = &ring[p & mask];
		uint32_t v = atomic_load_explicit(&hs->seq, memory_order_acquire);
		if (!nemo__slot_match(v, p, g))
			break;
		if (final) {
			uint32_t exp = v;
			if (!atomic_compare_exchange_strong_explicit(&hs->seq, &exp, 0, memory_order_acq_rel,
								     memory_order_acquire))
				break;    /* the sender took it back */
		}
		uint32_t meta = hs->meta;
		uint64_t arg = hs->arg;
		uint32_t len = meta >> 25;
		uint32_t need = slots_for(len);
		unsigned char buf[NEMO_AM_PAYLOAD_MAX];
		for (uint32_t k = 1; k < need; k++) {
			size_t off = (size_t)(k - 1) * 12, m = len - off < 12 ? len - off : 12;
			memcpy(buf + off, (unsigned char *)&ring[(p + k) & mask] + 4, m);
		}
		in->head = p + need;
		/* Give the sender its room back before the handler runs: the
		 * handler may wait on a full queue to this very sender. */
		if (in->head - in->acked >= d->R / 4)
			publish_ack(lk, in);
		n++;
		NEMO__PCOUNT(me, c_am_handled);
		nemo__deliver_fn fn = atomic_load_explicit(&d->deliver, memory_order_acquire);
		if (fn)
			fn(me, nemo__sender_id(d, s, nemo__entry_stag(v)), meta, arg, len ? buf : NULL, len, ctx);
	}
	publish_ack(lk, in);
	if (!final && n >= budget)
		*more = true;
	return n;
}

unsigned nemo__drain(nemo_place *me, nemo_am_context ctx, bool final)
{
	struct nemo_domain *d = me->d;
	unsigned total = 0;
	bool more = false;
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
	/* D1: the hot queues first: a polling receiver finds a hot sender's
	 * entry there before the sender's hint bit arrives. */
	for (unsigned i = 0; i < NEMO__HOT; i++) {
		unsigned s = me->hot[i];
		if (s < d->P)
			total += drain_link(me, s, ctx, false, budget, &more);
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
				/* Stopped at the budget: keep s findable. */
				atomic_fetch_or_explicit(&row[w], 1ull << b, memory_order_relaxed);
			}
			total += got;
		}
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
	uint32_t g = nemo__gtag(me->gen);
	/* Hot queues first: a stream's next entry is found with the one line
	 * transfer that brings it, before the sender's hint RMW (a second
	 * line, which it is writing at that moment) is even looked at. */
	for (unsigned i = 0; i < NEMO__HOT; i++) {
		unsigned s = me->hot[i];
		if (s >= d->P)
			continue;
		nemo__in *in = &me->in_row[s];
		nemo__slot *hs = &me->ring_row[(size_t)s * d->R + (in->head & (d->R - 1))];
		if (nemo__slot_match(atomic_load_explicit(&hs->seq, memory_order_acquire), in->head, g))
			return true;
		uint32_t v = atomic_load_explicit(&me->link_row[s].nf[in->nf_head % NEMO_NOTIFY_FIFO_LEN],
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

/* --------------------------------------------------------- poll, wait */

int nemo_poll(unsigned *handled)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return ENOTCONN;
	nemo__busy_enter(me);
	unsigned n = nemo__drain(me, NEMO_AM_CTX_POLL, false);
	nemo__busy_exit(me);
	if (handled)
		*handled = n;
	return 0;
}

static bool place_try_take(void *arg)
{
	nemo_place *me = arg;
	/* The drain itself, not "pending, then drain": its empty checks
	 * cost as much as nemo__pending's, and a message found is handled
	 * without a second look. */
	unsigned n = nemo__drain(me, NEMO_AM_CTX_WAIT, false);
	me->handled += n;
	return n > 0;
}

static bool place_sleep_begin(void *arg, uint32_t **word, uint32_t *val, uint32_t *bits)
{
	nemo_place *me = arg;
	nemo_waiter *w = atomic_load_explicit(&me->waiter, memory_order_relaxed);
	_Atomic uint32_t *bseq = &me->d->bseq;
	/* Sleep on the domain's word with our bit (waiter.c, SHARED WORD):
	 * set each time, since a handler may have waited on a nemo_cond in
	 * between and left bword NULL. */
	atomic_store_explicit(&w->bword, bseq, memory_order_relaxed);
	uint32_t seen = atomic_load_explicit(bseq, memory_order_seq_cst);                 /* B1 */
	atomic_exchange_explicit(&w->state, NEMO_WAITER_SLEEPING, memory_order_seq_cst);  /* W2 */
	if (nemo__pending(me)) {                                                           /* W3 */
		/* Undo; futex_wait then returns at once (state != SLEEPING)
		 * and the loop's try_take drains. */
		atomic_store_explicit(&w->state, NEMO_WAITER_RUNNING, memory_order_relaxed);
		*word = (uint32_t *)&w->state;
		*val = NEMO_WAITER_SLEEPING;
		return false;
	}
	NEMO__PCOUNT(me, c_sleeps);
	*word = (uint32_t *)bseq;                                                          /* B2 */
	*val = seen;
	*bits = w->bbit;
	return false;                                                                      /* W4 */
}

static void place_sleep_end(void *arg)
{
	nemo_place *me = arg;
	nemo_waiter *w = atomic_load_explicit(&me->waiter, memory_order_relaxed);
	atomic_store_explicit(&w->state, NEMO_WAITER_RUNNING, memory_order_relaxed);      /* W5 */
}

static const nemo__wait_ops place_ops = {
	.try_take = place_try_take,
	.sleep_begin = place_sleep_begin,
	.sleep_end = place_sleep_end,
	.futex_flags = NEMO_FUTEX_PRIVATE,
};

int nemo_place_wait(const struct timespec *abstime, unsigned *handled)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return ENOTCONN;
	int rc = nemo__check_deadline(CLOCK_MONOTONIC, abstime);
	if (rc)
		return rc;
	nemo__busy_enter(me);
	unsigned outer = me->handled;   /* a handler may wait too: nest the count */
	me->handled = 0;
	nemo_waiter *w = atomic_load_explicit(&me->waiter, memory_order_relaxed);
	atomic_store_explicit(&w->state, NEMO_WAITER_POLLING, memory_order_relaxed);      /* W1 */
	rc = nemo__wait_loop(&place_ops, me, &me->policy, CLOCK_MONOTONIC, abstime, 0);
	atomic_store_explicit(&w->bword, NULL, memory_order_relaxed);
	atomic_store_explicit(&w->state, NEMO_WAITER_RUNNING, memory_order_seq_cst);      /* W6 */
	if (atomic_load_explicit(&me->irq_on, memory_order_relaxed) && nemo__pending(me))
		me->handled += nemo__drain(me, NEMO_AM_CTX_WAIT, false);
	unsigned n = me->handled;
	me->handled = outer + n;
	nemo__busy_exit(me);
	if (rc == ETIMEDOUT && n)
		rc = 0;
	if (handled)
		*handled = n;
	return rc;
}
