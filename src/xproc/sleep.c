/*
 * sleep.c - how a shared place waits: the sleep on its shared futex word
 * (waiter.c's published-state handshake, as XW1-XW5 here), and every wait
 * built on it - for messages (nemo_xproc_wait, nemo_place_wait), for a
 * word (nemo_xproc_wait_for, nemo_place_wait_for), and a send's waits:
 * for room in a ring, for a holder to deliver what it keeps for us, for
 * our own kept sends to go - and nemo_xproc_poll.
 *
 * THE SLEEP.  The place polls by its policy (nemo__wait_loop), then:
 *
 *   XR1 for each receiver we keep sends for or wait for room to: our bit
 *       in its room mask (seq_cst RMW; kept.c, XK4)
 *   XW2 wstate = SLEEPING            exchange, seq_cst
 *   XW3 look (seq_cst loads): every ring into us; `deaths`; our own
 *       place word (xproc.c, OUR OWN PLACE); the slot the next kept send
 *       to each receiver takes, and that receiver's word (kept.c); and
 *       what a send's wait waits for (below)
 *       anything: wstate = RUNNING (relaxed), and do not sleep
 *   XW4 futex_wait(wstate, SLEEPING), shared, in slices (below)
 *   XW5 wstate = RUNNING             relaxed
 *
 *   XS1 seq = p + 1                  seq_cst store (ring.c)
 *   XS2 load wstate                  seq_cst
 *   XS3 if SLEEPING (or FD_ARMED: fd.c): CAS it to RUNNING (seq_cst),
 *       and the winner FUTEX_WAKEs (shared)
 *
 * Why no wake is lost: XS1 and XW2 are both seq_cst and each side then
 * reads the other's word (XS2, XW3) with seq_cst, so in the single total
 * order either XS1 precedes XW3 (the receiver sees the message and does
 * not sleep) or XW2 precedes XS2 (the sender sees SLEEPING and kicks).  A
 * kick that lands between XW3 and XW4 changed wstate, so XW4's futex_wait
 * returns at once (EAGAIN).  The same pair holds for every other thing
 * XW3 looks at: XD2 (`deaths`, seq_cst RMW) then XD3 (a kick of every
 * sleeper, procs.c); XL1 (a leaver's word, seq_cst CAS) then XL2 (a kick
 * of those in its room mask, xproc.c); XC1 then XC2 for room (below); XR3
 * then XR4 for a holder's release (kept.c).  models/xproc.pml checks it,
 * with two senders, spurious wake-ups and a death, and fails for the two
 * reorderings (XS2 before XS1; XW3 before XW2).
 *
 * THE WAIT FOR ROOM.  A blocking send that finds its slot taken (the
 * ring holds R unread messages) waits in the same sleep, on its OWN
 * place's wstate - so that it also wakes for messages to its place, which
 * it serves meanwhile (drain; handlers run, and their sends to the same
 * receiver go on from the ring's position, since every send of the place
 * uses its one private position) - having set its bit in the receiver's
 * room mask (XR1, at each sleep), and looks at its slot in XW3:
 *
 *   XC1 seq = c + R                  the consumer frees a slot, seq_cst
 *   XC2 load room(own line A)        seq_cst; bit s set: XS2-XS3 on place
 *                                    s's wstate (before the handler runs)
 *   XR3 room(d) &= ~bit(s)           seq_cst, when the wait ends (and no
 *                                    kept send needs the bit), then XR4:
 *                                    XS2-XS3 on d's wstate (kept.c)
 *
 * Why the sender is never left asleep with room: XR1, XW2 and XW3 against
 * XC1 and XC2 is the store-then-look of XS1-XS2 again (all seq_cst).  The
 * slot the sender waits for is freed by the consumer's very next XC1 (a
 * full ring: the consumer is exactly R behind).  If XW3 does not see that
 * XC1, XW3 precedes XC1 in the total order, so XR1 and XW2 precede XC2 and the
 * kick's XS2: the receiver sees the bit and its XS2 sees SLEEPING (or a
 * later store: the sender is awake).  Leave is the other way room can
 * come (the sender must give up: ESRCH): XL1 the leaver's CAS of its word
 * (seq_cst), XL2 it loads its room mask (seq_cst) and kicks each waiter,
 * against XW3's load of the receiver's word.  The receiver's death: XD1
 * precedes XD2 and XD3; and each 10 ms slice that passes checks the
 * receiver's process (procs.c, LIVENESS), so a receiver killed before
 * anyone reclaimed it is found within a slice (ECONNRESET).
 * models/xproc.pml -DROOM checks XR1-XR3/XC1-XC2 with spurious wake-ups, and
 * fails when XC2 comes before XC1 or the bit is published after XW3.
 *
 * A send's other waits (send.c says when): XW_HELD - the receiver keeps
 * sends for us or waits for room to us (its bit in our room mask), so we
 * serve until it clears the bit; XW3 loads our room mask, against its XR3
 * then XR4.  XW_KEPT - our own kept sends to the receiver (or all of them,
 * for nemo_xproc_leave) must go first: each round flushes them, and XW3
 * looks at their slots (kept.c).  Every send wait ends with the
 * receiver's word changing (ESRCH, ECONNRESET), our own place lost
 * (EOWNERDEAD) or its deadline (ETIMEDOUT, having queued nothing).
 *
 * SLICES AND DEADLINES.  A wait for messages sleeps in slices of at most
 * 100 ms and, after a slice that passed with nothing, looks for dead
 * peers (nemo_xproc_check): a death of a place we talk to then ends the
 * wait with ECONNRESET (ring.c, PEER DEATH) within about a slice of it,
 * however far its deadline.  A send's wait sleeps in slices of 10 ms and
 * checks its receiver's process after each; its poll phase runs once
 * (the place's policy: its budget), later slices sleep at once
 * (NEMO_WAIT_BLOCK), so a blocked send costs one wake-up per slice, not a
 * CPU.  Deadlines count as the in-process waits count them (segment.h,
 * xp_deadline_ns; src/waiter/wait.c): validated first (tv_nsec out of
 * range: EINVAL), one in the past - tv_sec < 0 included - times out at
 * once, one too far to count in 64 bits of ns is "never".  A deadline is
 * only looked at when there is something to wait for: a wait first
 * drains, a send with room sends.
 *
 * What a wait returns, in this order: EOWNERDEAD (our own place was
 * reclaimed); for a wait for a word, 0 once it moved; ECONNRESET once per
 * death of a place we talk to, not yet reported (handled may be > 0); 0
 * once a message was handled; EBADMSG when only rejected slots were
 * found; ETIMEDOUT.  nemo_xproc_poll returns the same without waiting.
 */
#define _GNU_SOURCE

#include "segment.h"

#include "../platform/fail.h"

#include <errno.h>

#define SLICE_NS 100000000ull             /* a sleeper looks for dead peers this often */
#define ROOM_SLICE_NS 10000000ull         /* a send waiting checks its receiver this often */

enum { XW_MSG = 10, XW_FOR = 11 };

struct xwait {
	nemo_xproc_place *p;
	int kind;                         /* XW_MSG, XW_FOR, or a send's: XW_ROOM, XW_HELD, XW_KEPT */
	nemo_xproc_id dst;                /* a send's receiver (XW_KEPT for all: 0) */
	uint32_t d, owner, dword;         /* its index, owner, and place word (LIVE) */
	unsigned h0, r0;                  /* handled and rejected at the start */
	int rc;                           /* why the wait ended (0: its condition) */
};

static inline bool is_send(const struct xwait *w)
{
	return w->kind < XW_MSG;
}

/* A send's condition. */
static bool send_cond(struct xwait *w, memory_order mo)
{
	nemo_xproc_place *p = w->p;
	switch (w->kind) {
	case XW_ROOM:
		return nemo__xp_slot_free(p, w->d, mo);
	case XW_HELD:
		return !(atomic_load_explicit(&place_at(p->x, p->idx)->room, mo) >> w->d & 1u);
	default:   /* XW_KEPT */
		return w->dst ? !p->kept_n[w->d] : !p->kept_all;
	}
}

/* A wait for messages or a word: done?  (The order of the essay.) */
static bool msg_done(struct xwait *w)
{
	nemo_xproc_place *p = w->p;
	if (!own_ok(p, memory_order_relaxed)) {
		w->rc = nemo__xp_own_lost(p, w->kind == XW_FOR ? "nemo_xproc_wait_for" : "nemo_xproc_wait");
		return true;
	}
	if (w->kind == XW_FOR && __atomic_load_n(p->wf_word, __ATOMIC_ACQUIRE) != p->wf_old) {
		w->rc = 0;
		return true;
	}
	if ((w->rc = nemo__xp_take_report(p)))
		return true;
	if (w->kind == XW_MSG && p->handled != w->h0)
		return true;
	if (p->rejected != w->r0) {
		w->rc = EBADMSG;
		return true;
	}
	return false;
}

static bool xw_try(void *arg)
{
	struct xwait *w = arg;
	nemo_xproc_place *p = w->p;
	if (is_send(w) && send_cond(w, memory_order_acquire))
		return true;
	nemo__xp_drain(p);
	nemo__xp_flush(p);
	if (nemo__xp_death_news(p, memory_order_acquire))
		nemo__xp_death_scan(p);
	if (!is_send(w))
		return msg_done(w);
	if (!own_ok(p, memory_order_relaxed)) {
		w->rc = nemo__xp_own_lost(p, "send");
		return true;
	}
	if (w->dst) {
		w->rc = nemo__xp_dest_state(p->x, w->dst, &w->owner);
		if (w->rc)
			return true;
		w->dword = pw_make(id_gen(w->dst), w->owner, P_LIVE);
	}
	return send_cond(w, memory_order_acquire);
}

static bool xw_sleep_begin(void *arg, uint32_t **word, uint32_t *val, uint32_t *bits)
{
	struct xwait *w = arg;
	nemo_xproc_place *p = w->p;
	nemo_xproc *x = p->x;
	nemo__xp_room_ask(p);                                                              /* XR1 */
	_Atomic uint32_t *ws = &place_at(x, p->idx)->wstate;
	atomic_exchange_explicit(ws, NEMO_WAITER_SLEEPING, memory_order_seq_cst);          /* XW2 */
	*word = (uint32_t *)ws;
	*val = NEMO_WAITER_SLEEPING;
	*bits = 0;
	bool wake = nemo__xp_wakeable(p, memory_order_seq_cst);                            /* XW3 */
	if (!wake && is_send(w))
		wake = send_cond(w, memory_order_seq_cst) ||
		       (w->dst && atomic_load_explicit(&place_at(x, w->d)->word, memory_order_seq_cst) != w->dword);
	if (wake)
		atomic_store_explicit(ws, NEMO_WAITER_RUNNING, memory_order_relaxed);   /* futex_wait returns at once */
	return false;
}

static void xw_sleep_end(void *arg)
{
	struct xwait *w = arg;
	atomic_store_explicit(&place_at(w->p->x, w->p->idx)->wstate, NEMO_WAITER_RUNNING,
			      memory_order_relaxed);                                       /* XW5 */
}

static const nemo__wait_ops xw_ops = {
	.try_take = xw_try,
	.sleep_begin = xw_sleep_begin,
	.sleep_end = xw_sleep_end,
	.futex_flags = NEMO_FUTEX_SHARED,
};

/* Slices until the condition, a reason to stop (w->rc), or the deadline
 * end (ns). */
static int xw_run(struct xwait *w, uint64_t end)
{
	nemo_xproc_place *p = w->p;
	nemo_xproc *x = p->x;
	_Atomic uint32_t *ws = &place_at(x, p->idx)->wstate;
	static const nemo_wait_policy block = { .kind = NEMO_WAIT_BLOCK };
	const nemo_wait_policy *pol = &p->policy;
	uint64_t slice_ns = is_send(w) ? ROOM_SLICE_NS : SLICE_NS;
	int rc;
	for (;;) {
		w->rc = 0;
		if (xw_try(w)) {
			rc = w->rc;
			break;
		}
		uint64_t now = nemo__xp_now_ns();
		if (now >= end) {
			rc = ETIMEDOUT;
			break;
		}
		uint64_t slice = end - now > slice_ns ? now + slice_ns : end;
		struct timespec ts;
		xp_ns_to_ts(slice, &ts);
		atomic_store_explicit(ws, NEMO_WAITER_POLLING, memory_order_relaxed);           /* XW1 */
		rc = nemo__wait_loop(&xw_ops, w, pol, CLOCK_MONOTONIC, &ts, 0);
		atomic_store_explicit(ws, NEMO_WAITER_RUNNING, memory_order_seq_cst);
		if (is_send(w))
			pol = &block;   /* the place's poll budget once: later slices sleep at once */
		if (rc == 0) {
			rc = w->rc;
			break;
		}
		if (rc != ETIMEDOUT)
			break;
		/* A slice passed with nothing: are the peers alive?  (A reclaim
		 * bumps `deaths` or turns the receiver's word DEAD: the next
		 * try sees it.) */
		if (is_send(w) && w->dst)
			nemo__xp_check_proc(x, w->owner);
		else
			nemo_xproc_check(x);
	}
	return rc;
}

/* ------------------------------------------------------------------ */
/* A send's waits                                                      */
/* ------------------------------------------------------------------ */

int nemo__xp_send_wait(nemo_xproc_place *p, int kind, nemo_xproc_id dst, uint64_t end)
{
	struct xwait w = { .p = p, .kind = kind, .dst = dst, .d = id_idx(dst) };
	if (dst && (w.rc = nemo__xp_dest_state(p->x, dst, &w.owner)))
		return w.rc;
	w.dword = pw_make(id_gen(dst), w.owner, P_LIVE);
	nemo__xp_enter(p);
	if (kind == XW_ROOM)
		p->room_for = (int)w.d;
	int rc = xw_run(&w, end);
	if (kind == XW_ROOM) {
		p->room_for = -1;
		nemo__xp_room_update(p, w.d);                                               /* XR3, XR4 */
	}
	nemo__xp_exit(p);
	return rc;
}

/* nemo_xproc_leave: until every kept send - those of the handlers run
 * meanwhile too - is delivered or dropped. */
int nemo__xp_kept_wait_all(nemo_xproc_place *p)
{
	if (!nemo__xp_flush(p))
		return 0;
	struct xwait w = { .p = p, .kind = XW_KEPT };
	nemo__xp_enter(p);
	int rc = xw_run(&w, UINT64_MAX);
	nemo__xp_exit(p);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Poll and wait                                                       */
/* ------------------------------------------------------------------ */

int nemo_xproc_poll(nemo_xproc_place *p, unsigned *handled)
{
	if (handled)
		*handled = 0;
	if (!p || !p->joined)
		return NEMO__FAIL(EINVAL, "place is NULL or not joined");
	if (nemo__xp_inherited(p->x))
		return NEMO__XP_INHERITED();
	if (!own_ok(p, memory_order_relaxed))
		return nemo__xp_own_lost(p, __func__);
	unsigned h0 = p->handled, r0 = p->rejected;
	nemo__xp_enter(p);
	nemo__xp_drain(p);
	nemo__xp_flush(p);
	nemo__xp_check_due(p->x);            /* procs.c, WHO ASKS */
	if (nemo__xp_death_news(p, memory_order_acquire))
		nemo__xp_death_scan(p);
	nemo__xp_exit(p);
	if (handled)
		*handled = p->handled - h0;
	int rc = nemo__xp_take_report(p);
	if (rc)
		return rc;
	if (p->rejected != r0 && p->handled == h0)
		return EBADMSG;
	return 0;
}

int nemo__xp_wait(nemo_xproc_place *p, const struct timespec *abstime, unsigned *handled,
		  const uint64_t *word, uint64_t old, const char *fn)
{
	if (handled)
		*handled = 0;
	if (!p || !p->joined)
		return nemo__fail(EINVAL, fn, "place is NULL or not joined");
	if (nemo__xp_inherited(p->x))
		return nemo__fail(ENOTCONN, fn, "the handle was inherited across fork: its places are the "
				  "parent's (nemo_xproc_attach again in the child)");
	int rc = nemo__check_deadline(fn, CLOCK_MONOTONIC, abstime);
	if (rc)
		return rc;
	struct xwait w = { .p = p, .kind = word ? XW_FOR : XW_MSG, .h0 = p->handled, .r0 = p->rejected };
	const uint64_t *outer_word = p->wf_word;   /* a handler may wait too */
	uint64_t outer_old = p->wf_old;
	bool was = p->in_wait;
	p->wf_word = word;
	p->wf_old = old;
	p->in_wait = true;
	nemo__xp_enter(p);
	rc = xw_run(&w, xp_deadline_ns(abstime));
	nemo__xp_exit(p);
	p->in_wait = was;
	p->wf_word = outer_word;
	p->wf_old = outer_old;
	if (handled)
		*handled = p->handled - w.h0;
	return rc;
}

int nemo_xproc_wait(nemo_xproc_place *p, const struct timespec *abstime, unsigned *handled)
{
	return nemo__xp_wait(p, abstime, handled, NULL, 0, __func__);
}

int nemo_xproc_wait_for(nemo_xproc_place *p, const uint64_t *word, uint64_t old, const struct timespec *abstime,
			unsigned *handled)
{
	if (!word) {
		if (handled)
			*handled = 0;
		return NEMO__FAIL(EINVAL, "word is NULL");
	}
	return nemo__xp_wait(p, abstime, handled, word, old, __func__);
}
