/*
 * overflow.c - whether a send waits, is kept or fails: sends from handlers
 * never wait; what a full queue cannot take is kept by the sending place and
 * delivered in order (nemo/domain.h, "Sends from handlers").
 *
 * OVERFLOW
 *
 * Why.  A handler that waits for room runs other handlers meanwhile, and
 * those may wait in turn: the worker pool whose handlers reply to a
 * client that is busy sending tasks nests until the depth limit, and the
 * replies failed with EDEADLK (thousands of 100,000).  Alternatives
 * weighed: credits in every send (a shared counter per pair: a line
 * transfer per message, and the user still picks the window); a reply
 * slot reserved per request (the requester must know its replies in
 * advance; a handler may send anything, not only replies); refusing the
 * send (what failed).  Chosen: a handler never waits, and what does not
 * fit is kept by the sender, in order, in memory only it touches.
 *
 * The overflow of a place: an array of entries {dest id, kind (ring or
 * FIFO), meta, arg, payload} in send order, [ovf_head, ovf_tail), with
 * ovf_n not yet delivered, and per receiver index the counts out.ovf_ring
 * and out.ovf_nf.  Only the owner thread touches it: in its nemo calls,
 * or from the interrupt handler, which runs handlers only when the
 * thread is in no nemo call - so a flush pass and a push never overlap.
 * It is allocated with mmap (safe in a signal handler, unlike malloc),
 * grows by doubling, and squeezes out delivered entries when at least
 * half are delivered.
 *
 *   K1  a send in a handler (hdepth > 0), without NEMO_NONBLOCK: if
 *       nothing is kept for that receiver and queue, try the send with
 *       NEMO_NONBLOCK; EAGAIN (full, or G1 not yet possible) or something
 *       already kept -> append an entry (ENOBUFS at overflow_max), return
 *       0.  Later sends to the same queue append behind it: order.
 *   K2  flush (nemo__ovf_flush): one pass in order; each entry re-resolves
 *       its receiver (S0) and is sent with NEMO_NONBLOCK | NEMO_MORE; an
 *       EAGAIN marks that receiver's queue stuck for the rest of the pass
 *       (its later entries stay behind it); ESRCH (the receiver left) or
 *       ENOENT (a notification handler gone) drops the entry, counted in
 *       overflow_dropped, logged under NEMO_DEBUG, and - for a message
 *       - reported after the pass to its action's undelivered callback
 *       (nemo_action_set_undelivered), run on this place as a handler;
 *       then one publication (S4, S5) per receiver that got something.
 *       Run by nemo_poll, every try of nemo_place_wait, every round of a
 *       wait for room, the end of an interrupt, a progress-thread pass,
 *       and nemo_place_leave (which waits until everything is delivered
 *       or dropped, including what its final drain's handlers keep).
 *   K3  a send from outside a handler to a receiver with kept entries on
 *       that queue first waits for them (flush, serving its own queues).
 *   K4  ROOM KICKS: before the place stops calling nemo with entries
 *       still kept - it sleeps, an interrupt or a progress pass ends, its
 *       outermost nemo call returns - it asks each receiver it keeps
 *       entries for to kick it when that receiver frees room (RW1-RW3 of
 *       queue.c, THE WAIT FOR ROOM: link.room, the asymmetric barrier,
 *       one more flush; nemo__ovf_arm).  The receiver's drain then sets
 *       its hint bit at us and kicks us by our published state: a
 *       sleeping place wakes, an interrupt-mode place that computes gets
 *       a signal (whose handler flushes), a served place's progress
 *       thread runs, an event loop's descriptor turns readable.  So a
 *       place with kept entries may sleep, and a client never waits on
 *       held for longer than it takes the holder to be kicked.  A place
 *       that only polls (no interrupts, no progress thread, no waits)
 *       delivers at its next nemo call, as it handles messages.
 *
 * THE BACKPRESSURE.  Kept entries alone would only move the unbounded
 * queue: a client that sends 10^6 tasks and never waits leaves each
 * worker holding its share of the replies (the pool reached the default
 * bound, 65536, at 10^6 tasks).  So a place that keeps entries for r says
 * so: link(r <- s).held = 1 while out.ovf_ring + out.ovf_nf > 0 (a relaxed
 * store at the first entry and after the last; on the line r reads for
 * its own queue, so a client pays one load that hits its cache).  A send
 * from r to s outside a handler that finds held set waits as for a full
 * queue - draining its own queues, which makes room for the kept replies
 * - until s has delivered them.  The flag is a hint for a wait that
 * polls (no sleep depends on it), so relaxed order is enough.  In the
 * request/reply pattern this bounds what a worker keeps for a client by
 * what that client had queued to it: one ring of tasks.  Cycles cannot
 * deadlock: every place that waits on held serves its own queues, which
 * is what the holder needs to flush.  NEMO_NONBLOCK sends do not wait on
 * held: then only overflow_max bounds the overflow.
 *
 * What is not guaranteed: a kept send whose receiver leaves first is
 * dropped; its sender was told 0, as a receiver that left just after
 * taking a message would not have handled it either.  The drop reaches
 * the sender: counted (overflow_dropped), and reported to the action's
 * undelivered callback on the sending place (K2).  A receiver that waits
 * for held to clear is kicked when a drop clears it (nothing else would
 * reach it).
 *
 * models/overflow.pml checks K1-K4 with the leave: a reply kept during
 * the final drain is delivered, held never stays set, and a kept entry
 * never waits for a kick that cannot come; its broken variants (the
 * overflow freed before the final drain, no barrier at RW2, no ROOM
 * request before sleeping) fail.
 *
 */
#define _GNU_SOURCE
#include "messaging_internal.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>

/* ------------------------------------------------------------ overflow */

/* Room for one more entry: squeeze out delivered ones when at least half
 * are delivered, else double the array (mmap/mremap: system calls, safe
 * in the interrupt-mode signal handler, where malloc is not). */
static int ovf_room(nemo_place *me)
{
	if (me->ovf_tail < me->ovf_cap)
		return 0;
	if (me->ovf_cap && me->ovf_n <= me->ovf_cap / 2) {
		uint32_t k = 0;
		for (uint32_t i = me->ovf_head; i < me->ovf_tail; i++)
			if (me->ovf[i].kind != NEMO__OVF_DONE)
				me->ovf[k++] = me->ovf[i];
		me->ovf_head = 0;
		me->ovf_tail = k;
		return 0;
	}
	uint32_t cap = me->ovf_cap ? me->ovf_cap * 2 : 64;
	size_t old = (size_t)me->ovf_cap * sizeof *me->ovf, sz = (size_t)cap * sizeof *me->ovf;
	/* mmap, copy, munmap rather than mremap: ThreadSanitizer does not
	 * follow mremap, and a grown array is rare. */
	void *p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return ENOMEM;
	if (me->ovf) {
		memcpy(p, me->ovf, old);
		munmap(me->ovf, old);
	}
	me->ovf = p;
	me->ovf_cap = cap;
	return 0;
}

void nemo__ovf_free(nemo_place *me)
{
	if (me->ovf)
		munmap(me->ovf, (size_t)me->ovf_cap * sizeof *me->ovf);
	me->ovf = NULL;
	me->ovf_cap = me->ovf_head = me->ovf_tail = me->ovf_n = 0;
	nemo__fast_key_update(me);
}

/* Keep a send that found its queue full inside a handler (OVERFLOW). */
static int ovf_push(nemo_place *me, unsigned kind, nemo_place_id dest, uint32_t meta, uint64_t arg,
		    const void *payload, size_t len, unsigned flags)
{
	unsigned r = nemo_place_index(dest);
	nemo__out *o = &me->out_row[r];
	if (!(flags & NEMO__SEND_KEEP_ALL) && me->ovf_n >= me->d->ovf_max)
		return nemo__fail(ENOBUFS, "send", "the queue to place %#llx is full and this place's overflow "
				  "already holds %u sends (nemo_domain_attr.overflow_max): not queued",
				  (unsigned long long)dest, me->ovf_n);
	if (ovf_room(me))
		return nemo__fail(ENOMEM, "send", "the queue to place %#llx is full and the overflow cannot grow: "
				  "not queued", (unsigned long long)dest);
	NEMO__INVARIANT(me->hdepth > 0, "a send kept outside a handler");
	nemo__ovf_entry *e = &me->ovf[me->ovf_tail++];
	e->dest = dest;
	e->arg = arg;
	e->meta = meta;
	e->kind = (uint8_t)kind;
	e->len = (uint8_t)len;
	if (len)
		memcpy(e->payload, payload, len);
	if (me->ovf_n++ == 0)
		nemo__fast_key_update(me);    /* bound sends take the generic path now */
	if (!o->ovf_ring && !o->ovf_nf) {  /* tell r: its sends to us wait now */
		atomic_store_explicit(&nemo__link_of(me->d, r, me->idx)->held, 1, memory_order_relaxed);
		me->ovf_rmask[r / 64] |= 1ull << (r % 64);
	}
	if (kind == NEMO__OVF_RING)
		o->ovf_ring++;
	else
		o->ovf_nf++;
	NEMO__PCOUNT(me, c_overflowed);
	/* What is already in the ring must be heard of, to make room. */
	if (o->deferred && !(flags & NEMO_MORE))
		nemo__publish(me, r, false);
	return 0;
}

/* Outside a handler: deliver what the overflow holds for receiver r on
 * one queue, waiting for room as a blocking send does (NEMO_NONBLOCK:
 * EAGAIN if any is left). */
struct ovf_q {
	nemo_place *me;
	nemo__out *o;
	bool ring;
};

static bool ovf_q_empty(void *p)
{
	struct ovf_q *q = p;
	nemo__ovf_flush(q->me);
	return q->ring ? !q->o->ovf_ring : !q->o->ovf_nf;
}

static int ovf_wait_dest(nemo_place *me, nemo_place *dst, uint64_t st, unsigned r, unsigned flags, bool ring)
{
	struct ovf_q q = { me, &me->out_row[r], ring };
	if (ovf_q_empty(&q))
		return 0;
	int err = nemo__wait_room(me, dst, st, r, flags, ovf_q_empty, &q);
	if (err == ESRCH)
		nemo__ovf_flush(me);      /* drops what was kept for it, counted */
	return err;
}

/* Does r keep sends for us?  Then our sends to r wait until it has
 * delivered them (OVERFLOW, THE BACKPRESSURE). */
static inline bool held_by(nemo_place *me, unsigned r)
{
	return atomic_load_explicit(&me->link_row[r].held, memory_order_relaxed) != 0;
}

static bool not_held(void *p)
{
	struct ovf_q *q = p;
	return !held_by(q->me, (unsigned)(q->o - q->me->out_row));
}

/* Outside a handler, before a send to r: what we kept for r goes first;
 * and if r keeps sends for us, serve our queues until it has delivered
 * them.  NEMO_NONBLOCK: EAGAIN for the first, no wait for the second. */
static int send_slow_prelude(nemo_place *me, nemo_place *dst, uint64_t st, unsigned r, unsigned flags, bool ring)
{
	nemo__out *o = &me->out_row[r];
	if (ring ? o->ovf_ring : o->ovf_nf) {
		int err = ovf_wait_dest(me, dst, st, r, flags, ring);
		if (err)
			return err;
	}
	if (held_by(me, r) && !(flags & NEMO_NONBLOCK)) {
		struct ovf_q q = { me, o, ring };
		return nemo__wait_room(me, dst, st, r, flags, not_held, &q);
	}
	return 0;
}

static bool ovf_all_done(void *p)
{
	return nemo__ovf_flush(p) == 0;
}

void nemo__ovf_flush_all(nemo_place *me)
{
	if (!ovf_all_done(me))
		nemo__wait_room(me, NULL, 0, 0, 0, ovf_all_done, me);
}

void nemo__ovf_arm(nemo_place *me)
{
	/* RW1-RW3 until no new request is needed: a receiver that took our
	 * request (and kicked) since the last one made room, so look again. */
	while (me->ovf_n && nemo__ovf_ask(me)) {
		nemo__asym_heavy();
		nemo__ovf_flush(me);
	}
}

int nemo__msg_send_slow(nemo_place *me, nemo_place *dst, uint64_t st, nemo_place_id dest, uint32_t meta,
			uint64_t arg, const void *payload, size_t len, unsigned flags)
{
	unsigned r = nemo_place_index(dest);
	nemo__out *o = &me->out_row[r];
	if (!o->ovf_ring && !me->hdepth && !held_by(me, r))
		return nemo__ring_put(me, dst, st, dest, meta, arg, payload, len, flags);
	if (me->hdepth && !(flags & NEMO_NONBLOCK)) {
		/* In a handler: never wait (OVERFLOW). */
		if (!o->ovf_ring) {
			int err = nemo__ring_put(me, dst, st, dest, meta, arg, payload, len, flags | NEMO_NONBLOCK);
			if (err != EAGAIN)
				return err;
		}
		return ovf_push(me, NEMO__OVF_RING, dest, meta, arg, payload, len, flags);
	}
	int err = send_slow_prelude(me, dst, st, r, flags, true);
	return err ? err : nemo__ring_put(me, dst, st, dest, meta, arg, payload, len, flags);
}

int nemo__msg_send_batch(nemo_place *me, nemo_place *dst, uint64_t st, nemo_place_id dest, uint32_t meta,
			 const uint64_t *args, size_t n, unsigned flags, size_t *sent)
{
	unsigned r = nemo_place_index(dest);
	nemo__out *o = &me->out_row[r];
	if (__builtin_expect(!o->ovf_ring && !me->hdepth && !held_by(me, r), 1))
		return nemo__batch_put(me, dst, st, dest, meta, args, n, flags, sent);
	*sent = 0;
	if (me->hdepth && !(flags & NEMO_NONBLOCK)) {
		size_t k = 0;
		if (!o->ovf_ring) {
			int err = nemo__batch_put(me, dst, st, dest, meta, args, n, flags | NEMO_NONBLOCK, &k);
			if (err != EAGAIN) {
				*sent = k;
				return err;
			}
		}
		for (; k < n; k++) {
			int err = ovf_push(me, NEMO__OVF_RING, dest, meta, args[k], NULL, 0, flags | NEMO_MORE);
			if (err) {
				*sent = k;
				return err;
			}
		}
		if (o->deferred && !(flags & NEMO_MORE))
			nemo__publish(me, nemo_place_index(dest), flags & NEMO_PUSH);
		*sent = n;
		return 0;
	}
	int err = send_slow_prelude(me, dst, st, r, flags, true);
	return err ? err : nemo__batch_put(me, dst, st, dest, meta, args, n, flags, sent);
}

/* nemo_notify's send, with the overflow's rules (as nemo__msg_send). */
int nemo__notify_send(nemo_place *me, nemo_place_id dest, uint32_t chan, unsigned flags)
{
	unsigned r = nemo_place_index(dest);
	nemo__out *o = r < me->d->P ? &me->out_row[r] : NULL;
	if (__builtin_expect(!o || (!o->ovf_nf && !me->hdepth && !held_by(me, r)), 1))
		return nemo__notify_put(me, dest, chan, flags);
	if (me->hdepth && !(flags & NEMO_NONBLOCK)) {
		if (!o->ovf_nf) {
			int err = nemo__notify_put(me, dest, chan, flags | NEMO_NONBLOCK);
			if (err != EAGAIN)
				return err;
		}
		return ovf_push(me, NEMO__OVF_NF, dest, 0, chan, NULL, 0, flags);
	}
	uint64_t st;
	nemo_place *dst = nemo__dest(me->d, dest, &st);
	if (!dst)
		return nemo__notify_put(me, dest, chan, flags);   /* its ESRCH; and drop the kept ones */
	int err = send_slow_prelude(me, dst, st, r, flags, false);
	return err ? err : nemo__notify_put(me, dest, chan, flags);
}
