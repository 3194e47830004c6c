/*
 * send.c - whether a send to a shared place waits, is kept or fails, and
 * the raw sends (nemo_xproc_send, nemo_xproc_notify, nemo_xproc_broadcast).
 * The public sends (public.c) come here too.
 *
 * One send to dst (index d), in this order:
 *
 *   1. from outside a handler, blocking, to a place of another process: if
 *      d keeps sends for us or waits for room to us (its bit in our room
 *      mask: kept.c, THE BACKPRESSURE), serve our queues until it clears
 *      the bit (sleep.c, XW_HELD).  Not for places of our own process: a
 *      thread may hold two places, and the one it waits for would then
 *      never run; there only overflow_max bounds what is kept;
 *   2. if we keep sends for d (kept.c), flush; if some stay: from a
 *      handler, keep this one behind them (order: XK1); NONBLOCK, EAGAIN;
 *      else wait until they are delivered (XW_KEPT, XK3), then go on;
 *   3. put it in the ring (ring.c); full: from a handler, keep it (XK1);
 *      NONBLOCK, EAGAIN; else wait for room (XW_ROOM), then put again.
 *
 * So a handler never waits, nothing of a place's overtakes what it kept
 * for the same receiver, and a blocking send always serves its own
 * place while it waits.  A send that fails because its receiver left or
 * died (ESRCH, ECONNRESET) is counted (send_failures); ECONNRESET records
 * the death (ring.c, PEER DEATH), reported by this return.
 *
 * Actions: an integer id below NEMO_XPROC_ACTIONS_MAX, or a name's code
 * (NEMO_XPROC_NAMED_BASE + its slot, of a name this segment has room
 * for); anything else is ERANGE, as an action id out of range is
 * in-process.  An event id (NEMO_AM_EVENT) is EINVAL: events are not
 * mapped across processes.
 */
#define _GNU_SOURCE

#include "segment.h"

#include <nemo/notify.h>

#include "../platform/fail.h"

#include <errno.h>

int nemo__xp_send(nemo_xproc_place *p, nemo_xproc_id dst, uint32_t kind, uint32_t code, uint64_t arg,
		  const void *payload, size_t len, unsigned flags, bool kick, uint64_t end)
{
	nemo_xproc *x = p->x;
	uint32_t d = id_idx(dst);
	if (__builtin_expect(nemo__xp_inherited(x), 0))
		return NEMO__XP_INHERITED();
	if (d >= x->nplaces || !id_ok(dst))
		return nemo__fail(ESRCH, "send", "place id %#x is not a place of this domain", dst);
	nemo__xp_check_due(x);                  /* procs.c, WHO ASKS: a dead receiver's word turns DEAD */
	bool nb = flags & NEMO_XPROC_NONBLOCK, wait = !nb && !p->depth;
	int rc = 0;
	uint32_t dw = atomic_load_explicit(&place_at(x, d)->word, memory_order_relaxed);
	if (wait && pw_owner(dw) != x->me &&
	    (atomic_load_explicit(&place_at(x, p->idx)->room, memory_order_relaxed) >> d & 1u))     /* 1 */
		rc = nemo__xp_send_wait(p, XW_HELD, dst, end);
	while (!rc) {
		if (p->kept_n[d] && nemo__xp_flush(p) && p->kept_n[d]) {                        /* 2 */
			if (p->depth && !nb)
				return nemo__xp_keep(p, dst, kind, code, arg, payload, len);
			if (!wait)
				return EAGAIN;
			rc = nemo__xp_send_wait(p, XW_KEPT, dst, end);
			continue;
		}
		rc = nemo__xp_put(p, dst, kind, code, arg, payload, len, kick);                 /* 3 */
		if (rc != EAGAIN)
			break;
		if (p->depth && !nb)
			return nemo__xp_keep(p, dst, kind, code, arg, payload, len);
		if (!wait)
			return EAGAIN;
		rc = nemo__xp_send_wait(p, XW_ROOM, dst, end);
	}
	if (rc == ESRCH || rc == ECONNRESET) {
		atomic_fetch_add_explicit(&x->send_failures, 1, memory_order_relaxed);
		if (rc == ECONNRESET)
			nemo__xp_record_death(p, d, id_gen(dst), true);
	}
	return rc;
}

/* An action's code and payload: 0, or the error with the text for fn. */
int nemo__xp_check_code(const nemo_xproc *x, uint32_t code, const void *payload, size_t len, const char *fn)
{
	if (len > NEMO_XPROC_PAYLOAD_MAX)
		return nemo__fail(EMSGSIZE, fn, "payload of %zu bytes (at most %u across processes)", len,
				  NEMO_XPROC_PAYLOAD_MAX);
	if (len && !payload)
		return nemo__fail(EINVAL, fn, "payload is NULL with len %zu", len);
	if (code & NEMO_AM_EVENT(0))
		return nemo__fail(EINVAL, fn, "%#x is an event id: events are not mapped across processes "
				  "(send an action id)", code);
	if (xp_action(x, code) == UINT32_MAX)
		return nemo__fail(ERANGE, fn, "action %u is neither an integer id (below %u) nor a name's code "
				  "(%u + its slot, below %u)", code, NEMO_XPROC_ACTIONS_MAX, NEMO_XPROC_NAMED_BASE,
				  NEMO_XPROC_NAMED_BASE + x->nnames);
	return 0;
}

/* A notification's channel: 0, or ERANGE with the text for fn. */
int nemo__xp_check_chan(uint32_t chan, const char *fn)
{
	return chan > NEMO_NOTIFY_CHAN_MAX
		       ? nemo__fail(ERANGE, fn, "channel %u is above %u (NEMO_NOTIFY_CHAN_MAX)", chan,
				    NEMO_NOTIFY_CHAN_MAX)
		       : 0;
}

int nemo_xproc_send(nemo_xproc_place *p, nemo_xproc_id dst, uint32_t code, uint64_t arg,
		    const void *payload, size_t len, unsigned flags)
{
	if (!p || !p->joined)
		return NEMO__FAIL(EINVAL, "place is NULL or not joined");
	if (flags & ~(unsigned)NEMO_XPROC_NONBLOCK)
		return NEMO__FAIL(EINVAL, "unknown flags %#x", flags);
	int rc = nemo__xp_check_code(p->x, code, payload, len, __func__);
	return rc ? rc : nemo__xp_send(p, dst, K_AM, code, arg, payload, len, flags, true, UINT64_MAX);
}

int nemo_xproc_notify(nemo_xproc_place *p, nemo_xproc_id dst, uint32_t chan, unsigned flags)
{
	if (!p || !p->joined)
		return NEMO__FAIL(EINVAL, "place is NULL or not joined");
	if (flags & ~(unsigned)NEMO_XPROC_NONBLOCK)
		return NEMO__FAIL(EINVAL, "unknown flags %#x", flags);
	int rc = nemo__xp_check_chan(chan, __func__);
	return rc ? rc : nemo__xp_send(p, dst, K_NOTIFY, chan, 0, NULL, 0, flags, true, UINT64_MAX);
}

/* ------------------------------------------------------------------ */
/* Broadcast: queue to every destination, then kick the sleepers        */
/* ------------------------------------------------------------------ */

/* To dsts[0..n-1] (every live place but p's when dsts is NULL). */
int nemo__xp_broadcast(nemo_xproc_place *p, const nemo_xproc_id *dsts, size_t n, uint32_t code,
		       uint64_t arg, const void *payload, size_t len, unsigned flags, size_t *sent)
{
	nemo_xproc *x = p->x;
	nemo_xproc_id all[NEMO_XPROC_PLACES_MAX];
	if (!dsts) {
		n = 0;
		for (uint32_t i = 0; i < x->nplaces; i++) {
			uint32_t w = atomic_load_explicit(&place_at(x, i)->word, memory_order_acquire);
			if (i != p->idx && pw_state(w) == P_LIVE)
				all[n++] = id_make(i, pw_gen(w));
		}
		dsts = all;
	}
	uint64_t queued = 0;                  /* by index: nplaces <= 64 */
	int first = 0;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		int e = nemo__xp_send(p, dsts[i], K_AM, code, arg, payload, len, flags, false, UINT64_MAX);
		if (e) {
			if (!first)
				first = e;
			continue;
		}
		queued |= 1ull << id_idx(dsts[i]);   /* < nplaces: the send checked it */
		k++;
	}
	/* One look at each receiver's wstate, after every slot is out: the
	 * receivers that sleep are woken as close together as FUTEX_WAKEs
	 * one after the other allow (a place's futex is its own word). */
	for (uint32_t i = 0; i < x->nplaces; i++)
		if (queued >> i & 1u)
			nemo__xp_kick_place(x, i);                                              /* XS2-XS3 */
	if (sent)
		*sent = k;
	return first ? nemo__fail(first, "nemo_xproc_broadcast", "sent to %zu of %zu places", k, n) : 0;
}

int nemo_xproc_broadcast(nemo_xproc_place *p, const nemo_xproc_id *set, size_t n, uint32_t code, uint64_t arg,
			 const void *payload, size_t len, unsigned flags, size_t *sent)
{
	if (sent)
		*sent = 0;
	if (!p || !p->joined)
		return NEMO__FAIL(EINVAL, "place is NULL or not joined");
	if (flags & ~(unsigned)NEMO_XPROC_NONBLOCK)
		return NEMO__FAIL(EINVAL, "unknown flags %#x", flags);
	if (!set && n)
		return NEMO__FAIL(EINVAL, "set is NULL with n %zu", n);
	if (n > NEMO_XPROC_PLACES_MAX)
		return NEMO__FAIL(EINVAL, "n %zu: a set has at most %u places", n, NEMO_XPROC_PLACES_MAX);
	int rc = nemo__xp_check_code(p->x, code, payload, len, __func__);
	return rc ? rc : nemo__xp_broadcast(p, set, n, code, arg, payload, len, flags, sent);
}
