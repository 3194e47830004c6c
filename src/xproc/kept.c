/*
 * kept.c - kept sends: a handler's send that finds its ring full is kept
 * by the sending place and delivered later, in order, as room appears -
 * the in-process overflow (src/messaging/overflow.c) across processes.
 *
 * Why.  A handler never waits (a handler that waits runs other handlers,
 * which may wait in turn), and a reply must not be lost while its
 * requester lives: a request/reply service with 500 requests in flight
 * lost 436 of 2.9 million replies when a handler's send to a full ring
 * returned EAGAIN.  So the send is kept in memory only the place's thread
 * touches (process-local, malloc'd), and the handler is told 0.
 *
 *   XK1 a send in a handler (depth > 0), without NEMO_XPROC_NONBLOCK: if
 *       nothing is kept for that receiver, try the ring (put); EAGAIN (full),
 *       or something kept already -> append an entry (ENOBUFS at
 *       overflow_max), return 0.  Later sends to the same receiver append
 *       behind it: order.  (NONBLOCK: EAGAIN, as in-process.)
 *   XK2 flush: one pass in order; each entry is put (which checks its
 *       receiver); EAGAIN marks that receiver stuck for the rest of the
 *       pass (its later entries stay behind it); ESRCH or ECONNRESET (it
 *       left or died) drops the entry: counted (overflow_dropped), logged
 *       under NEMO_DEBUG=1, and a death recorded (ring.c, PEER DEATH).
 *       Run by every poll, every round of every wait (sleep.c), and
 *       before a send to a receiver something is kept for (send.c).
 *   XK3 a send from outside a handler to a receiver with kept entries
 *       first waits until they are delivered (send.c, sleep.c XW_KEPT).
 *   XK4 ROOM REQUESTS.  At its first entry for a receiver, and again
 *       before the place sleeps (sleep.c: every sleep of every wait; fd.c:
 *       the arming of its descriptor; a receiver whose index was joined
 *       again had its mask cleared), it sets its bit in the room mask of
 *       each receiver it keeps entries for (XR1, a seq_cst RMW; room_ask),
 *       and its sleep's re-check XW3 looks at the slot its
 *       next entry to each such receiver goes to (seq_cst; kept_ready).
 *       The receiver's drain, having freed a slot (XC1, seq_cst), loads its
 *       mask (XC2, seq_cst) and kicks us.  This is the store-then-look pair
 *       of THE WAIT FOR ROOM (sleep.c): either XW3 sees XC1, or XC2 sees XR1
 *       and the kick sees SLEEPING (or FD_ARMED).  So a place with kept
 *       sends may sleep, and wakes to deliver them.  When nothing is
 *       kept for a receiver any more (and no send of ours waits for room
 *       there), the bit is cleared (XR3, seq_cst RMW) and that receiver
 *       is kicked (XR4, as XS2-XS3): it may wait for the bit to clear.
 *       models/xprockept.pml checks XK4, and -DHELD the release.
 *
 * THE BACKPRESSURE.  Kept entries alone would only move the unbounded
 * queue: a client that sends 10^6 requests and never waits leaves the
 * server holding its replies, up to overflow_max, and then ENOBUFS.  So a
 * blocking send from outside a handler to a place whose bit is set in
 * the sender's own room mask - that place keeps sends for it, or waits
 * for room in its ring to it - first waits, serving its own queues (which
 * makes that room), until the bit is clear (send.c; sleep.c XW_HELD).
 * The holder's XR3 then XR4 against the waiter's XW2 then XW3 (its own room
 * mask, seq_cst) is the store-then-look pair again, so the waiter does
 * not sleep past the release.  In the request/reply pattern this bounds
 * what a server keeps for a client by what that client had in flight.
 * NEMO_XPROC_NONBLOCK sends do not wait on it, nor sends to places of
 * the sender's own process (one thread may hold both: the holder would
 * never run while the sender waits; there only overflow_max bounds it).
 *
 * What is not guaranteed: a kept send whose receiver leaves or dies first
 * is dropped - its sender was told 0, as a receiver that left just after
 * taking a message would not have handled it either - and counted where
 * the sender sees it.  A place whose own place was reclaimed (EOWNERDEAD)
 * can deliver nothing: its leave drops what it keeps, counted.
 *
 * Memory: an array of entries (80 bytes each) [kept_head, kept_tail),
 * grown by doubling, squeezed when at least half its entries are
 * delivered; kept_n[d] and kept_mask per receiver index.
 */
#define _GNU_SOURCE

#include "segment.h"

#include "../platform/fail.h"

#include <errno.h>
#include <stdlib.h>

/* Room for one more entry: squeeze out delivered ones when at least
 * half are delivered, else double the array. */
static int kept_room(nemo_xproc_place *p)
{
	if (p->kept_tail < p->kept_cap)
		return 0;
	if (p->kept_cap && p->kept_all <= p->kept_cap / 2) {
		uint32_t k = 0;
		for (uint32_t i = p->kept_head; i < p->kept_tail; i++)
			if (!p->kept[i].done)
				p->kept[k++] = p->kept[i];
		p->kept_head = 0;
		p->kept_tail = k;
		return 0;
	}
	uint32_t cap = p->kept_cap ? p->kept_cap * 2 : 64;
	struct xp_kept *a = realloc(p->kept, (size_t)cap * sizeof *a);
	if (!a)
		return ENOMEM;
	p->kept = a;
	p->kept_cap = cap;
	return 0;
}

/* XR1 for every receiver we keep sends for or wait for room to (XK4), before
 * a sleep: idempotent, so a receiver whose index was joined again since
 * (the join clears its mask) hears of us too. */
void nemo__xp_room_ask(nemo_xproc_place *p)
{
	uint64_t want = p->kept_mask | (p->room_for >= 0 ? 1ull << p->room_for : 0);
	for (uint32_t d = 0; want; d++, want >>= 1)
		if (want & 1u)
			atomic_fetch_or_explicit(&place_at(p->x, d)->room, 1ull << p->idx, memory_order_seq_cst); /* XR1 */
	p->room_mine |= p->kept_mask | (p->room_for >= 0 ? 1ull << p->room_for : 0);
}

/* XR3, XR4: our bit in d's room mask, once neither a kept send nor a send
 * waiting for room needs it. */
void nemo__xp_room_update(nemo_xproc_place *p, uint32_t d)
{
	if (!(p->room_mine >> d & 1u) || p->kept_n[d] || p->room_for == (int)d)
		return;
	atomic_fetch_and_explicit(&place_at(p->x, d)->room, ~(1ull << p->idx), memory_order_seq_cst);  /* XR3 */
	p->room_mine &= ~(1ull << d);
	nemo__xp_kick_place(p->x, d);                                                       /* XR4 */
}

/* XK1: keep a send that found its ring full (or behind kept ones). */
int nemo__xp_keep(nemo_xproc_place *p, nemo_xproc_id dst, uint32_t kind, uint32_t code, uint64_t arg,
		  const void *payload, size_t len)
{
	nemo_xproc *x = p->x;
	uint32_t d = id_idx(dst);
	if (p->kept_all >= x->ovf_max)
		return nemo__fail(ENOBUFS, "send", "the ring to place %#x is full and this place already keeps %u "
				  "sends (overflow_max): not queued", dst, p->kept_all);
	if (kept_room(p))
		return nemo__fail(ENOMEM, "send", "the ring to place %#x is full and the kept sends cannot grow: "
				  "not queued", dst);
	struct xp_kept *e = &p->kept[p->kept_tail++];
	e->dst = dst;
	e->kind = (uint8_t)kind;
	e->done = 0;
	e->len = (uint16_t)len;
	e->code = code;
	e->arg = arg;
	if (len)
		memcpy(e->payload, payload, len);
	p->kept_all++;
	if (p->kept_n[d]++ == 0) {
		p->kept_mask |= 1ull << d;
		/* XR1 now, not only before a sleep: the receiver's sends to us
		 * wait from here on (THE BACKPRESSURE), also while we never
		 * sleep. */
		atomic_fetch_or_explicit(&place_at(x, d)->room, 1ull << p->idx, memory_order_seq_cst);
		p->room_mine |= 1ull << d;
	}
	if (d != p->idx)
		p->talk[d] = id_gen(dst);
	atomic_fetch_add_explicit(&x->overflowed, 1, memory_order_relaxed);
	return 0;
}

static void kept_done(nemo_xproc_place *p, struct xp_kept *e)
{
	uint32_t d = id_idx(e->dst);
	e->done = 1;
	p->kept_all--;
	if (--p->kept_n[d] == 0) {
		p->kept_mask &= ~(1ull << d);
		nemo__xp_room_update(p, d);
	}
}

static void kept_drop(nemo_xproc_place *p, struct xp_kept *e, int err)
{
	nemo_xproc *x = p->x;
	atomic_fetch_add_explicit(&x->overflow_dropped, 1, memory_order_relaxed);
	if (err == ECONNRESET)
		nemo__xp_record_death(p, id_idx(e->dst), id_gen(e->dst), false);
	nemo__fail(err, "kept send", "a kept %s from place %#x to place %#x could not be delivered (%s): dropped "
		   "(counted in overflow_dropped)", e->kind == K_NOTIFY ? "notification" : "message", p->id, e->dst,
		   err == ECONNRESET ? "its process died" : err == ESRCH ? "it left" :
		   err == EOWNERDEAD ? "this place was reclaimed" : "refused");
	kept_done(p, e);
}

/* XK2: one pass in order.  Returns how many stay kept. */
uint32_t nemo__xp_flush(nemo_xproc_place *p)
{
	if (!p->kept_all)
		return 0;
	uint64_t stuck = 0;
	for (uint32_t i = p->kept_head; i < p->kept_tail; i++) {
		struct xp_kept *e = &p->kept[i];
		uint32_t d = id_idx(e->dst);
		if (e->done || (stuck >> d & 1u))
			continue;
		int rc = nemo__xp_put(p, e->dst, e->kind, e->code, e->arg, e->payload, e->len, true);
		if (rc == EAGAIN) {
			stuck |= 1ull << d;
			continue;
		}
		if (rc == EOWNERDEAD)
			break;                   /* our place is gone: nothing can go (leave drops) */
		if (rc)
			kept_drop(p, e, rc);
		else
			kept_done(p, e);
	}
	while (p->kept_head < p->kept_tail && p->kept[p->kept_head].done)
		p->kept_head++;
	if (p->kept_head == p->kept_tail)
		p->kept_head = p->kept_tail = 0;
	return p->kept_all;
}

/* A place that can deliver nothing more (its leave, its place lost):
 * every entry dropped, counted, and its room bits cleared - unless its
 * index is someone else's now (OUR OWN PLACE), whose bits they are. */
void nemo__xp_kept_drop_all(nemo_xproc_place *p)
{
	bool ours = own_ok(p, memory_order_acquire);
	if (!ours)
		p->room_mine = 0;
	for (uint32_t i = p->kept_head; i < p->kept_tail; i++)
		if (!p->kept[i].done)
			kept_drop(p, &p->kept[i], EOWNERDEAD);
	free(p->kept);
	p->kept = NULL;
	p->kept_cap = p->kept_head = p->kept_tail = 0;
	p->room_for = -1;
	for (uint32_t d = 0; ours && d < p->x->nplaces; d++)
		nemo__xp_room_update(p, d);
}

/* XW3's part for kept sends (XK4): may one of them go now - the slot its
 * next entry takes is free, or its receiver's word changed (the flush
 * then drops what is kept for it)? */
bool nemo__xp_kept_ready(nemo_xproc_place *p, memory_order mo)
{
	uint64_t m = p->kept_mask;
	for (uint32_t d = 0; m; d++, m >>= 1) {
		if (!(m & 1u))
			continue;
		uint32_t w = atomic_load_explicit(&place_at(p->x, d)->word, mo);
		if (pw_state(w) != P_LIVE || pw_gen(w) != p->dgen[d] || nemo__xp_slot_free(p, d, mo))
			return true;
	}
	return false;
}

/* Anything a sleeping place must wake for, whatever it waits for (XW3):
 * a message, news of a death, its own word changed, a kept send that
 * may go.  mo: the loads' order (seq_cst in XW3). */
bool nemo__xp_wakeable(nemo_xproc_place *p, memory_order mo)
{
	return nemo__xp_pending(p, mo) || nemo__xp_death_news(p, mo) || !own_ok(p, mo) ||
	       nemo__xp_kept_ready(p, mo);
}
