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
 *   OV1 a send in a handler (hdepth > 0), without NEMO_NONBLOCK: if
 *       nothing is kept for that receiver and queue, try the send with
 *       NEMO_NONBLOCK; EAGAIN (full, or WS1 not yet possible) or something
 *       already kept -> append an entry (ENOBUFS at overflow_max), return
 *       0.  Later sends to the same queue append behind it: order.
 *   OV2 flush (nemo__ovf_flush): one pass in order; each entry re-resolves
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
 *   OV3 a send from outside a handler to a receiver with kept entries on
 *       that queue first waits for them (flush, serving its own queues).
 *   OV4 ROOM KICKS: before the place stops calling nemo with entries
 *       still kept - it sleeps, an interrupt or a progress pass ends, its
 *       outermost nemo call returns - it asks each receiver it keeps
 *       entries for to kick it when that receiver frees room (RW1-RW3 of
 *       overflow.c, THE WAIT FOR ROOM: link.room, the asymmetric barrier,
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
 * undelivered callback on the sending place (OV2).  A receiver that waits
 * for held to clear is kicked when a drop clears it (nothing else would
 * reach it).
 *
 * models/overflow.pml checks OV1-OV4 with the leave: a reply kept during
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

#define NEMO__SERVE_DEPTH_MAX 8    /* handlers nested in waits for room (EDEADLK beyond) */

/* --------------------------------------------------- the wait for room */

/*
* BACKPRESSURE (the queues')
 *
 * A full ring or FIFO never drops: a blocking send from outside a
 * handler waits for room while draining the sender's own queues (so
 * cycles of full queues make progress); NEMO_NONBLOCK returns EAGAIN.  WS1
 * waits the same way (THE WAIT FOR ROOM, below).  A send from a handler does not wait (overflow.c,
 * OVERFLOW).
 * (EDEADLK, for a handler nested more than 8 deep in such waits, is kept
 * as a guard; handlers no longer enter them.)
 *
 * THE WAIT FOR ROOM
 *
 * A put that finds its queue full (or still holding a previous
 * occupant's entries: send.c, WHO SENT IT) answers EAGAIN; a send from
 * outside a handler then waits here, and so do a send that waits for
 * what the overflow kept (OV3 and THE BACKPRESSURE, above) and the leave's
 * delivery of its overflow.  What it waits for is an attempt - the put
 * itself, with NEMO_NONBLOCK, or a flush - that answers EAGAIN until it
 * is done.  It waits through the waiter layer's one
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
 *   RW5  leave as a place's wait leaves (placewait.c, W6): a sender that
 *       found us SLEEPING woke us and set its hint bit, and no one will
 *       signal, write our descriptor or tell the progress thread of that
 *       message - so a place that handles messages on its own drains it
 *       before the send returns
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
 * asymmetric barrier (src/platform/asym.c): if RK3 ran before
 * the barrier took effect on the receiver's CPU, so did RK1, and RW3 sees
 * the room; if after, RK3 sees RW1's flag.  Then RK4 wakes the sender exactly
 * as a sender wakes a receiver - the hint bit, then the kick chosen by the
 * sender's published state (sleeping: FUTEX_WAKE; its eventfd; the
 * progress thread; a signal in interrupt mode) - and RW4's re-check of the
 * hint words closes the last gap (drain.c, WHY NO WAKE-UP IS LOST).  The
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
	int (*attempt)(void *);       /* 0 or an error: done; EAGAIN: not yet */
	void *arg;
	int err;
	bool asked;                   /* RW1 was done for r */
};

static bool room_done(struct room_wait *w)
{
	int err = w->attempt(w->arg);
	if (err != EAGAIN) {
		w->err = err;
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

/* RW4's re-check after SLEEPING is published (seq_cst loads): our hint
 * words - a room kick sets one - and the receiver's status. */
static bool room_pending(void *p)
{
	struct room_wait *w = p;
	return nemo__pending(w->me) ||
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

/* THE WAIT FOR ROOM: until attempt(arg) answers other than EAGAIN (its
 * answer is returned), for a queue to dst (status st, index r).  dst
 * NULL: no receiver to watch (the leave's delivery of its overflow).
 * Also ESRCH (dst is leaving: nothing more can reach it), EAGAIN
 * (NEMO_NONBLOCK), EDEADLK, ETIMEDOUT (me->send_by passed). */
static int wait_room(nemo_place *me, nemo_place *dst, uint64_t st, unsigned r, unsigned flags,
		     int (*attempt)(void *), void *arg)
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
	struct room_wait w = { me, dst, st, r, attempt, arg, 0, false };
	nemo_waiter *sw = atomic_load_explicit(&me->waiter, memory_order_relaxed);
	nemo__slot_polling(sw);
	int rc = nemo__wait_loop(&room_ops, &w, &me->policy, CLOCK_MONOTONIC, me->send_by, 0);
	nemo__wait_leave(me, sw);   /* W6: what woke us may be a request, not room */
	if (w.asked)   /* a flag the receiver did not take: no kick for nothing */
		atomic_store_explicit(&nemo__link_of(me->d, r, me->idx)->room, 0, memory_order_relaxed);
	if (rc == ETIMEDOUT)
		return ETIMEDOUT;   /* an outcome the caller asked for: bare (fail.h) */
	if (rc)
		return nemo__fail(rc, "send", "the wait for room in the queue to place index %u failed", r);
	return w.err;
}

/* ---------------------------------------------- delivering kept sends */

/* The overflow's delivery (OV2), and its reports. */

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

/* ------------------------------------------------- sends that may wait */

/* One entry, by the raw put (send.c); while it finds no room and the
 * caller may wait, THE WAIT FOR ROOM with the put as its attempt. */
struct ring_try {
	nemo_place *me, *dst;
	uint64_t st;
	nemo_place_id dest;
	uint32_t meta;
	uint64_t arg;
	const void *payload;
	size_t len;
	unsigned flags;
};

static int ring_try(void *p)
{
	struct ring_try *t = p;
	return nemo__ring_put(t->me, t->dst, t->st, t->dest, t->meta, t->arg, t->payload, t->len, t->flags);
}

int nemo__ring_put_wait(nemo_place *me, nemo_place *dst, uint64_t st, nemo_place_id dest, uint32_t meta,
			uint64_t arg, const void *payload, size_t len, unsigned flags)
{
	int err = nemo__ring_put(me, dst, st, dest, meta, arg, payload, len, flags);
	if (err != EAGAIN || (flags & NEMO_NONBLOCK))
		return err;
	struct ring_try t = { me, dst, st, dest, meta, arg, payload, len, flags };
	return wait_room(me, dst, st, nemo_place_index(dest), flags, ring_try, &t);
}

struct nf_try {
	nemo_place *me;
	nemo_place_id dest;
	uint32_t chan;
	unsigned flags;
};

static int nf_try(void *p)
{
	struct nf_try *t = p;
	return nemo__notify_put(t->me, t->dest, t->chan, t->flags);
}

static int notify_put_wait(nemo_place *me, nemo_place_id dest, uint32_t chan, unsigned flags)
{
	int err = nemo__notify_put(me, dest, chan, flags);
	if (err != EAGAIN || (flags & NEMO_NONBLOCK))
		return err;
	uint64_t st;
	nemo_place *dst = nemo__dest(me->d, dest, &st);
	if (!dst)
		return nemo__notify_put(me, dest, chan, flags);   /* its ESRCH */
	struct nf_try t = { me, dest, chan, flags };
	return wait_room(me, dst, st, nemo_place_index(dest), flags, nf_try, &t);
}

/* A batch: what fits, then wait for room for the next one, and so on. */
struct room_for_one {
	nemo_place *me;
	nemo__out *o;
	nemo__link *lk;
	uint32_t R;
};

static int ring_room_one(void *p)
{
	struct room_for_one *q = p;
	if (q->o->ring_gen != q->me->gen)           /* WS1: claimed by our next put */
		return atomic_load_explicit(&q->lk->ack, memory_order_acquire) == q->o->tail ? 0 : EAGAIN;
	q->o->ack_seen = atomic_load_explicit(&q->lk->ack, memory_order_acquire);
	return q->o->tail - q->o->ack_seen < q->R ? 0 : EAGAIN;
}

static int batch_put_wait(nemo_place *me, nemo_place *dst, uint64_t st, nemo_place_id dest, uint32_t meta,
			  const uint64_t *args, size_t n, unsigned flags, size_t *sent)
{
	unsigned r = nemo_place_index(dest);
	size_t done = 0;
	for (;;) {
		size_t k = 0;
		int err = nemo__batch_put(me, dst, st, dest, meta, args + done, n - done, flags, &k);
		done += k;
		if (err != EAGAIN || (flags & NEMO_NONBLOCK) || done == n) {
			*sent = done;
			return done == n && err == EAGAIN ? 0 : err;
		}
		struct room_for_one q = { me, &me->out_row[r], nemo__link_of(me->d, r, me->idx), me->d->R };
		if ((err = wait_room(me, dst, st, r, flags, ring_room_one, &q)) != 0) {
			*sent = done;
			return err;
		}
	}
}

/* Outside a handler: deliver what the overflow holds for receiver r on
 * one queue, waiting for room as a blocking send does (NEMO_NONBLOCK:
 * EAGAIN if any is left). */
struct ovf_q {
	nemo_place *me;
	nemo__out *o;
	bool ring;
};

static int ovf_q_empty(void *p)
{
	struct ovf_q *q = p;
	nemo__ovf_flush(q->me);
	return (q->ring ? q->o->ovf_ring : q->o->ovf_nf) ? EAGAIN : 0;
}

static int ovf_wait_dest(nemo_place *me, nemo_place *dst, uint64_t st, unsigned r, unsigned flags, bool ring)
{
	struct ovf_q q = { me, &me->out_row[r], ring };
	if (!ovf_q_empty(&q))
		return 0;
	int err = wait_room(me, dst, st, r, flags, ovf_q_empty, &q);
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

static int not_held(void *p)
{
	struct ovf_q *q = p;
	return held_by(q->me, (unsigned)(q->o - q->me->out_row)) ? EAGAIN : 0;
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
		return wait_room(me, dst, st, r, flags, not_held, &q);
	}
	return 0;
}

static int ovf_all_done(void *p)
{
	return nemo__ovf_flush(p) ? EAGAIN : 0;
}

void nemo__ovf_flush_all(nemo_place *me)
{
	if (ovf_all_done(me))
		wait_room(me, NULL, 0, 0, 0, ovf_all_done, me);
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
		return nemo__ring_put_wait(me, dst, st, dest, meta, arg, payload, len, flags);
	if (me->hdepth && !(flags & NEMO_NONBLOCK)) {
		/* In a handler: never wait (OVERFLOW). */
		if (!o->ovf_ring) {
			int err = nemo__ring_put(me, dst, st, dest, meta, arg, payload, len, flags);
			if (err != EAGAIN)
				return err;
		}
		return ovf_push(me, NEMO__OVF_RING, dest, meta, arg, payload, len, flags);
	}
	int err = send_slow_prelude(me, dst, st, r, flags, true);
	return err ? err : nemo__ring_put_wait(me, dst, st, dest, meta, arg, payload, len, flags);
}

int nemo__msg_send_batch(nemo_place *me, nemo_place *dst, uint64_t st, nemo_place_id dest, uint32_t meta,
			 const uint64_t *args, size_t n, unsigned flags, size_t *sent)
{
	unsigned r = nemo_place_index(dest);
	nemo__out *o = &me->out_row[r];
	if (__builtin_expect(!o->ovf_ring && !me->hdepth && !held_by(me, r), 1))
		return batch_put_wait(me, dst, st, dest, meta, args, n, flags, sent);
	*sent = 0;
	if (me->hdepth && !(flags & NEMO_NONBLOCK)) {
		size_t k = 0;
		if (!o->ovf_ring) {
			int err = nemo__batch_put(me, dst, st, dest, meta, args, n, flags, &k);
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
	return err ? err : batch_put_wait(me, dst, st, dest, meta, args, n, flags, sent);
}

/* nemo_notify's send, with the overflow's rules (as nemo__msg_send). */
int nemo__notify_send(nemo_place *me, nemo_place_id dest, uint32_t chan, unsigned flags)
{
	unsigned r = nemo_place_index(dest);
	nemo__out *o = r < me->d->P ? &me->out_row[r] : NULL;
	if (__builtin_expect(!o || (!o->ovf_nf && !me->hdepth && !held_by(me, r)), 1))
		return notify_put_wait(me, dest, chan, flags);
	if (me->hdepth && !(flags & NEMO_NONBLOCK)) {
		if (!o->ovf_nf) {
			int err = nemo__notify_put(me, dest, chan, flags);
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
	return err ? err : notify_put_wait(me, dest, chan, flags);
}
