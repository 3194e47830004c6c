/*
 * ring.c - the rings of a shared domain: a slot, the producer's put, the
 * consumer's drain and what it validates; and whom a place talks to, so
 * that it hears of those deaths, and only of those (PEER DEATH).
 *
 * A SLOT (segment.h) is two cache lines: seq, src, dst, code, arg (8
 * bytes), kind:16 | len:16, and 56 bytes of payload - 48 for a message,
 * or a reply's 8-byte tag and its 48.  Every field is an atomic accessed
 * with relaxed loads and stores except seq, whose orders are below: a
 * peer that rewrites a slot while we read it is then a well-defined (if
 * useless) program.  The consumer copies only the words len covers, so a
 * message of up to 36 bytes touches one line.
 *
 * THE RING (seq per slot, as Vyukov's bounded queue, single producer and
 * single consumer).  Slot k starts with seq = k.  The producer at
 * private position p: slot p & (R-1) is free iff its seq == p (acquire);
 * it writes the fields (relaxed), then XS1: seq = p + 1 (seq_cst), p++,
 * and XS2-XS3: the kick (procs.c: load the receiver's wstate, seq_cst, and
 * only if it published SLEEPING or FD_ARMED, CAS it to RUNNING and
 * FUTEX_WAKE).  The consumer at c: slot c & (R-1) is full iff seq == c + 1
 * (acquire, or seq_cst in a sleeper's re-check XW3, sleep.c); it copies
 * the fields into private memory, then XC1: seq = c + R (seq_cst), c++,
 * and XC2: load its own room mask (seq_cst) and kick the sender if its bit
 * is set (sleep.c, THE WAIT FOR ROOM; kept.c) - and only then validates
 * the copy and runs its handler.  The acquire of seq pairs with the
 * producer's seq store, so the fields are those written for this
 * position (unless a peer scribbles: then the copy fails validation, or
 * is a wrong but well-formed message).
 *
 * THE VALIDATION RULE, for slots (xproc.c states it for the segment):
 * the copy is handed to a handler only if src is the ring's sender at the
 * generation we expect, dst is our place's id, kind is known, len fits
 * (a message <= 48, a reply 8..56, a notification 0), and code is an
 * action (an integer id below NEMO_XPROC_ACTIONS_MAX or a name's code:
 * segment.h, xp_action) or a channel <= NEMO_NOTIFY_CHAN_MAX.  A slot
 * that fails is consumed, counted (rejected) and reported (EBADMSG).
 * A drain takes at most R slots of a ring per round.
 *
 * THE DRAIN AND A REJOINED SENDER.  A receiver draining a sender's ring
 * checks the sender's word after each slot's seq (acquire): if the index
 * was left and joined again meanwhile (a handler ran, or we were
 * preempted), the slot belongs to the new generation's positions, and it
 * stops; the next drain starts over from position 0 (sender_gen).  It
 * checks its own word the same way (xproc.c, OUR OWN PLACE): a joiner's
 * claim of our index precedes the seq stores of the senders that found
 * it LIVE, so a slot of the new owner's is never taken.
 *
 * STALE SLOTS.  A send whose destination check passed just before the
 * destination left and a new place joined at the same index may write
 * into the reset ring, at its old position k; the new receiver rejects it
 * (wrong dst generation) and frees the slot (seq = k + R).  The sender,
 * writing to the new generation from position 0, then finds at its
 * position k a slot already consumed (seq == k + R, which a sound ring
 * never shows a producer: the consumer never passes it) and steps over
 * it (skip_stale, at most one lap per call), so the ring goes on.
 *
 * PEER DEATH, as a place sees it.  A place talks to the places it has
 * sent to (a put or a kept send) or received from since it joined:
 * talk[i] holds the generation of index i's place it talks to (private,
 * one store per send or message).  A reclaim (procs.c) marks the dead
 * process's places DEAD (XD1: CAS of the place word, keeping its
 * generation; the winner then stores dead_gen = that generation), bumps
 * the segment's `deaths` (XD2, seq_cst) and kicks every sleeper (XD3).  A
 * place whose look at `deaths` (death_news; seq_cst in a sleeper's XW3)
 * sees a new value scans its talk set: index i's word DEAD at the
 * generation it talks to, or another generation there with dead_gen equal
 * to it (the index was joined again since: the joiner's CAS read DEAD,
 * so the winner's dead_gen store precedes that generation, and our
 * acquire load of `deaths` after XD2 sees it), is a death of a place we
 * talk to: recorded (record_death), once per (index, generation).  Any
 * other generation, or FREE at ours, is a place that left: forgotten
 * (its sends say ESRCH).  The scan first stores the `deaths` it read, so
 * a death after that read bumps the word again and is scanned again:
 * none is missed.  What one process's death costs a place that does not
 * talk to it: a wake-up and a scan of nplaces words, no return.  The one
 * death not told apart: an index that died, was joined again and died
 * again, all before the place looked, reads as the later death only
 * (dead_gen holds one generation): the earlier place reads as left.
 *
 * A recorded death is kept (the latest XP_DEAD_KEEP, for nemo_xproc_dead
 * and nemo_dead_places, with a process-wide sequence number that orders
 * them across places), counted (the handle's `deaths`), and reported once
 * by the place's next wait or poll (ECONNRESET; take_report) - unless a
 * send's own ECONNRESET reported it already (record_death's told).
 */
#define _GNU_SOURCE

#include "segment.h"

#include <nemo/notify.h>

#include "../platform/fail.h"

#include <errno.h>

_Thread_local nemo_xproc_place *nemo__xp_handling;

/* What a call on a place that is no longer ours returns. */
int nemo__xp_own_lost(nemo_xproc_place *p, const char *fn)
{
	uint32_t w = atomic_load_explicit(&place_at(p->x, p->idx)->word, memory_order_relaxed);
	return nemo__fail(EOWNERDEAD, fn, "place %#x is no longer this process's (pid %u): %s (its word is "
			  "%#x); detach, then attach and join again", p->id, p->x->pid,
			  pw_state(w) == P_DEAD && pw_gen(w) == p->gen
				  ? "another process took this one for dead and reclaimed it"
				  : "another place holds its index now, or the segment was rewritten", w);
}

/* ------------------------------------------------------------------ */
/* The consumer                                                        */
/* ------------------------------------------------------------------ */

/* The generation of sender index s as a receiver should expect it now
 * (0: no live sender there); resets our position on a change. */
static uint32_t sender_gen(nemo_xproc_place *p, uint32_t s, memory_order mo)
{
	uint32_t w = atomic_load_explicit(&place_at(p->x, s)->word, mo);
	uint32_t st = pw_state(w), g = pw_gen(w);
	if (st == P_CLAIM)
		return 0;                 /* rings being reset: look next time */
	if (g != p->sgen[s]) {
		p->sgen[s] = g;
		p->cons[s] = 0;
	}
	return g;
}

/* Is anything queued to p?  mo: the seq loads' order (seq_cst in XW3). */
bool nemo__xp_pending(nemo_xproc_place *p, memory_order mo)
{
	nemo_xproc *x = p->x;
	uint32_t mask = x->nslots - 1;
	for (uint32_t s = 0; s < x->nplaces; s++) {
		if (!sender_gen(p, s, mo))
			continue;
		struct seg_slot *sl = ring_at(x, s, p->idx) + (p->cons[s] & mask);
		if (atomic_load_explicit(&sl->seq, mo) == p->cons[s] + 1)
			return true;
	}
	return false;
}

static void deliver(nemo_xproc_place *p, const nemo_xproc_msg *m, uint32_t kind)
{
	nemo_xproc *x = p->x;
	nemo_xproc_place *outer = nemo__xp_handling;
	nemo__xp_handling = p;   /* a handler's public sends leave from this place (public.c) */
	p->depth++;
	if (kind == K_NOTIFY) {
		if (p->nfn)
			p->nfn(p->nctx, p, m->src, m->code);
		else if (p->pnfn)
			p->pnfn(p->pnctx, xp_public_id(x, m->src), m->code);
		else
			atomic_fetch_add_explicit(&x->unhandled, 1, memory_order_relaxed);
	} else {
		/* xp_action(m->code) < NEMO_XPROC_ACTIONS_MAX + nnames: validated. */
		const struct handler *hp = atomic_load_explicit(&x->handlers[xp_action(x, m->code)],
								 memory_order_acquire);
		/* Its three fields, not retired_next: that one is written when
		 * a newer registration retires the record. */
		struct handler h = { 0 };
		if (hp)
			h = (struct handler){ .fn = hp->fn, .afn = hp->afn, .ctx = hp->ctx };
		if (h.fn) {
			h.fn(h.ctx, p, m);
		} else if (h.afn) {
			nemo_am_msg am = {
				.src = xp_public_id(x, m->src), .dest = xp_public_id(x, m->dst), .action = m->code,
				.event = NEMO_AM_NO_EVENT, .arg = m->arg, .payload = m->len ? m->payload : NULL,
				.len = m->len, .context = p->in_wait ? NEMO_AM_CTX_WAIT : NEMO_AM_CTX_POLL,
				.tag = m->tag, .is_reply = m->is_reply, .place_ctx = NULL,
			};
			h.afn(&am, h.ctx);
		} else {
			atomic_fetch_add_explicit(&x->unhandled, 1, memory_order_relaxed);
		}
	}
	p->depth--;
	nemo__xp_handling = outer;
}

/* THE VALIDATION RULE on the private copy (kind, len and code; src and
 * dst are compared by the caller).  A reply's tag is moved out of the
 * payload, as its handler sees it. */
static bool slot_ok(nemo_xproc *x, nemo_xproc_msg *m, const unsigned char *raw, uint32_t *kind)
{
	switch (*kind) {
	case K_AM:
		if (m->len > NEMO_XPROC_PAYLOAD_MAX || xp_action(x, m->code) == UINT32_MAX)
			return false;
		memcpy(m->payload, raw, m->len);
		return true;
	case K_REPLY:
		if (m->len < TAG_LEN || m->len > SLOT_PAYLOAD || xp_action(x, m->code) == UINT32_MAX)
			return false;
		memcpy(&m->tag, raw, TAG_LEN);
		m->len -= TAG_LEN;
		memcpy(m->payload, raw + TAG_LEN, m->len);
		m->is_reply = true;
		*kind = K_AM;
		return true;
	case K_NOTIFY:
		return m->len == 0 && m->code <= NEMO_NOTIFY_CHAN_MAX;
	}
	return false;
}

/* Take what ring (s -> p) holds, at most one lap. */
static void drain_ring(nemo_xproc_place *p, uint32_t s, uint32_t sgen)
{
	nemo_xproc *x = p->x;
	uint32_t mask = x->nslots - 1;
	struct seg_slot *ring = ring_at(x, s, p->idx);
	for (uint32_t n = 0; n < x->nslots; n++) {
		uint32_t c = p->cons[s];
		struct seg_slot *sl = ring + (c & mask);
		if (atomic_load_explicit(&sl->seq, memory_order_acquire) != c + 1)
			return;
		/* Is the slot still sgen's?  (THE DRAIN AND A REJOINED SENDER:
		 * the rejoin's LIVE store precedes the new sender's seq store,
		 * which our acquire load read, so this load sees it.) */
		uint32_t sw = atomic_load_explicit(&place_at(x, s)->word, memory_order_acquire);
		if (pw_gen(sw) != sgen || pw_state(sw) == P_CLAIM)
			return;
		/* Is our index still ours?  (The same argument.) */
		if (!own_ok(p, memory_order_acquire))
			return;
		nemo_xproc_msg m;
		unsigned char raw[SLOT_PAYLOAD];
		m.src = atomic_load_explicit(&sl->src, memory_order_relaxed);
		m.dst = atomic_load_explicit(&sl->dst, memory_order_relaxed);
		m.code = atomic_load_explicit(&sl->code, memory_order_relaxed);
		m.arg = atomic_load_explicit(&sl->arg, memory_order_relaxed);
		uint32_t kl = atomic_load_explicit(&sl->kindlen, memory_order_relaxed);
		uint32_t kind = kl >> 16;
		m.len = kl & 0xFFFFu;
		uint32_t words = (m.len <= SLOT_PAYLOAD ? m.len + 3 : 0) / 4;   /* too long: rejected below */
		for (unsigned j = 0; j < words; j++) {
			uint32_t v = atomic_load_explicit(&sl->payload[j], memory_order_relaxed);
			memcpy(raw + 4 * j, &v, 4);
		}
		/* The slot is ours to free now: the copy is private.  Then the
		 * sender, if it waits for room, is kicked before any handler
		 * runs (sleep.c, THE WAIT FOR ROOM). */
		atomic_store_explicit(&sl->seq, c + x->nslots, memory_order_seq_cst);         /* XC1 */
		p->cons[s] = c + 1;
		if (atomic_load_explicit(&place_at(x, p->idx)->room, memory_order_seq_cst) >> s & 1u)  /* XC2 */
			nemo__xp_kick_place(x, s);                                          /* XS2-XS3 */
		m.tag = 0;
		m.is_reply = false;
		if (m.src != id_make(s, sgen) || m.dst != p->id || !slot_ok(x, &m, raw, &kind)) {
			p->rejected++;
			atomic_fetch_add_explicit(&x->rejected, 1, memory_order_relaxed);
			continue;
		}
		if (s != p->idx)
			p->talk[s] = sgen;
		atomic_fetch_add_explicit(&x->received, 1, memory_order_relaxed);
		p->handled++;
		deliver(p, &m, kind);
		if (!p->joined)
			return;
	}
}

void nemo__xp_drain(nemo_xproc_place *p)
{
	if (!own_ok(p, memory_order_relaxed))
		return;
	for (uint32_t s = 0; s < p->x->nplaces; s++) {
		uint32_t g = sender_gen(p, s, memory_order_acquire);
		if (g)
			drain_ring(p, s, g);
	}
}

/* ------------------------------------------------------------------ */
/* The producer                                                        */
/* ------------------------------------------------------------------ */

/* Is dst a live place we may write to?  0, ESRCH (it left, or another
 * generation holds its index), ECONNRESET (its process died), EBADMSG. */
int nemo__xp_dest_state(nemo_xproc *x, nemo_xproc_id dst, uint32_t *owner)
{
	uint32_t i = id_idx(dst);
	uint32_t w = atomic_load_explicit(&place_at(x, i)->word, memory_order_acquire);
	if (pw_gen(w) != id_gen(dst))
		return ESRCH;
	if (pw_state(w) == P_DEAD)
		return ECONNRESET;
	if (pw_state(w) != P_LIVE)
		return ESRCH;
	*owner = pw_owner(w);
	return *owner < x->nprocs ? 0 : EBADMSG;
}

/* The producer's slot at *pos, past any slot already consumed there
 * (STALE SLOTS).  At most one lap per call (*skipped). */
static struct seg_slot *skip_stale(nemo_xproc *x, struct seg_slot *ring, uint32_t *pos, uint32_t *skipped)
{
	struct seg_slot *sl = ring + (*pos & (x->nslots - 1));
	while (atomic_load_explicit(&sl->seq, memory_order_acquire) == *pos + x->nslots && *skipped < x->nslots) {
		++*pos;
		++*skipped;
		sl = ring + (*pos & (x->nslots - 1));
	}
	return sl;
}

/* Is the slot at our position in ring (p -> d) free?  mo: the seq load's
 * order (seq_cst in XW3). */
bool nemo__xp_slot_free(nemo_xproc_place *p, uint32_t d, memory_order mo)
{
	nemo_xproc *x = p->x;
	uint32_t skipped = 0;
	struct seg_slot *sl = skip_stale(x, ring_at(x, p->idx, d), &p->prod[d], &skipped);
	return atomic_load_explicit(&sl->seq, mo) == p->prod[d];
}

/* One slot to dst if its ring has room: 0 (written, XS1, and kicked if
 * kick), EAGAIN (full), ESRCH, ECONNRESET, EBADMSG, EOWNERDEAD.  The
 * caller checked dst's index and the payload. */
int nemo__xp_put(nemo_xproc_place *p, nemo_xproc_id dst, uint32_t kind, uint32_t code, uint64_t arg,
		 const void *payload, size_t len, bool kick)
{
	nemo_xproc *x = p->x;
	uint32_t d = id_idx(dst), owner = 0;
	if (!own_ok(p, memory_order_acquire))
		return nemo__xp_own_lost(p, "send");
	int rc = nemo__xp_dest_state(x, dst, &owner);
	if (rc)
		return rc;
	if (p->dgen[d] != id_gen(dst)) {
		p->dgen[d] = id_gen(dst);
		p->prod[d] = 0;
	}
	if (!nemo__xp_slot_free(p, d, memory_order_acquire))
		return EAGAIN;
	uint32_t pos = p->prod[d];
	struct seg_slot *sl = ring_at(x, p->idx, d) + (pos & (x->nslots - 1));
	atomic_store_explicit(&sl->src, p->id, memory_order_relaxed);
	atomic_store_explicit(&sl->dst, dst, memory_order_relaxed);
	atomic_store_explicit(&sl->code, code, memory_order_relaxed);
	atomic_store_explicit(&sl->arg, arg, memory_order_relaxed);
	atomic_store_explicit(&sl->kindlen, kind << 16 | (uint32_t)len, memory_order_relaxed);
	unsigned char buf[SLOT_PAYLOAD] = {0};
	if (len)
		memcpy(buf, payload, len);
	for (unsigned j = 0; j < (len + 3) / 4; j++) {
		uint32_t v;
		memcpy(&v, buf + 4 * j, 4);
		atomic_store_explicit(&sl->payload[j], v, memory_order_relaxed);
	}
	atomic_store_explicit(&sl->seq, pos + 1, memory_order_seq_cst);                   /* XS1 */
	p->prod[d] = pos + 1;
	if (d != p->idx)
		p->talk[d] = id_gen(dst);
	atomic_fetch_add_explicit(&x->sent, 1, memory_order_relaxed);
	if (kick)
		nemo__xp_kick_place(x, d);                                                          /* XS2-XS3 */
	return 0;
}

/* ------------------------------------------------------------------ */
/* PEER DEATH                                                          */
/* ------------------------------------------------------------------ */

static _Atomic uint64_t death_seq;      /* orders the records of every place of the process */

bool nemo__xp_death_news(nemo_xproc_place *p, memory_order mo)
{
	return atomic_load_explicit(&hdr(p->x)->deaths, mo) != p->deaths_seen;
}

/* Record the death of index i's place of generation gen, once; told: the
 * caller reports it (a send's ECONNRESET).  True if it was new. */
bool nemo__xp_record_death(nemo_xproc_place *p, uint32_t i, uint32_t gen, bool told)
{
	if (i >= p->x->nplaces || p->deadg[i] == gen)
		return false;
	p->deadg[i] = gen;
	if (p->talk[i] == gen)
		p->talk[i] = 0;
	unsigned k = (unsigned)(p->dead_found % XP_DEAD_KEEP);
	p->dead[k].id = xp_public_id(p->x, id_make(i, gen));
	p->dead[k].seq = atomic_fetch_add_explicit(&death_seq, 1, memory_order_relaxed) + 1;
	p->dead_found++;
	if (told)
		p->dead_told++;
	atomic_fetch_add_explicit(&p->x->deaths, 1, memory_order_relaxed);
	return true;
}

void nemo__xp_death_scan(nemo_xproc_place *p)
{
	nemo_xproc *x = p->x;
	p->deaths_seen = atomic_load_explicit(&hdr(x)->deaths, memory_order_acquire);
	for (uint32_t i = 0; i < x->nplaces; i++) {
		uint32_t g = p->talk[i];
		if (!g)
			continue;
		struct seg_place *pl = place_at(x, i);
		uint32_t w = atomic_load_explicit(&pl->word, memory_order_acquire);
		if (pw_gen(w) == g) {
			if (pw_state(w) == P_DEAD)
				nemo__xp_record_death(p, i, g, false);
			else if (pw_state(w) == P_FREE)
				p->talk[i] = 0;           /* it left */
		} else if (atomic_load_explicit(&pl->dead_gen, memory_order_relaxed) == g) {
			nemo__xp_record_death(p, i, g, false);
		} else {
			p->talk[i] = 0;                   /* it left; the index moved on */
		}
	}
}

/* A wait's or poll's report: ECONNRESET once per recorded death not yet
 * reported, else 0. */
int nemo__xp_take_report(nemo_xproc_place *p)
{
	if (p->dead_told == p->dead_found)
		return 0;
	p->dead_told++;
	return ECONNRESET;
}

/* The latest deaths p recorded, up to cap, latest first. */
size_t nemo__xp_dead_list(const nemo_xproc_place *p, nemo_place_id *ids, uint64_t *seqs, size_t cap)
{
	size_t n = 0;
	uint64_t have = p->dead_found < XP_DEAD_KEEP ? p->dead_found : XP_DEAD_KEEP;
	for (uint64_t k = 0; k < have && n < cap; k++) {
		unsigned at = (unsigned)((p->dead_found - 1 - k) % XP_DEAD_KEEP);
		ids[n] = p->dead[at].id;
		if (seqs)
			seqs[n] = p->dead[at].seq;
		n++;
	}
	return n;
}

int nemo_xproc_dead(nemo_xproc_place *p, nemo_xproc_id *ids, size_t cap, size_t *n, uint64_t *total)
{
	if (!p || !p->joined || !n || (cap && !ids))
		return NEMO__FAIL(EINVAL, "place is NULL or not joined, n is NULL, or ids is NULL with cap %zu", cap);
	if (!nemo__xp_inherited(p->x) && own_ok(p, memory_order_relaxed) &&
	    nemo__xp_death_news(p, memory_order_acquire))
		nemo__xp_death_scan(p);
	nemo_place_id pub[XP_DEAD_KEEP];
	size_t k = nemo__xp_dead_list(p, pub, NULL, cap < XP_DEAD_KEEP ? cap : XP_DEAD_KEEP);
	for (size_t i = 0; i < k; i++)
		ids[i] = (nemo_xproc_id)pub[i];
	*n = k;
	if (total)
		*total = p->dead_found;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Rings of an index being joined (xproc.c, JOIN AND LEAVE)             */
/* ------------------------------------------------------------------ */

/* Slots of ring (s -> r) written and not yet read: a written slot of
 * position p holds p + 1, a free or read one p or p + R, so a slot k is
 * unread iff seq - k = 1 (mod R).  Racy reads of a ring no one writes
 * (a free index's) or being read: a hint, not a count to rely on. */
static uint32_t ring_unread(nemo_xproc *x, uint32_t s, uint32_t r)
{
	struct seg_slot *ring = ring_at(x, s, r);
	uint32_t n = 0;
	for (uint32_t k = 0; k < x->nslots; k++)
		n += ((atomic_load_explicit(&ring[k].seq, memory_order_relaxed) - k) & (x->nslots - 1)) == 1;
	return n;
}

/* Messages index i sent that their receivers have not read. */
uint32_t nemo__xp_sent_unread(nemo_xproc *x, uint32_t i)
{
	uint32_t n = 0;
	for (uint32_t o = 0; o < x->nplaces; o++)
		if (o != i)
			n += ring_unread(x, i, o);
	return n;
}

void nemo__xp_ring_reset(nemo_xproc *x, uint32_t s, uint32_t r)
{
	struct seg_slot *ring = ring_at(x, s, r);
	for (uint32_t k = 0; k < x->nslots; k++)
		atomic_store_explicit(&ring[k].seq, k, memory_order_relaxed);
}
