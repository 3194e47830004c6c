/*
 * grant.h - the hot set and THE STREAM GRANT (grant.c has the essay):
 * what the drain does on every poll, inline; the revocation is in
 * grant.c.  Internal to src/messaging.
 */
#ifndef NEMO_MESSAGING_GRANT_H
#define NEMO_MESSAGING_GRANT_H

#include "messaging_internal.h"

/* Is sender s granted our stream (its bit in our grant words)? */
static inline bool nemo__is_granted(nemo_place *me, unsigned s)
{
	return atomic_load_explicit(&nemo__grant_row(me->d, me->idx)[s / 64], memory_order_relaxed) &
	       (1ull << (s % 64));
}

/* Sender s was found non-empty: watch it directly on every poll (D1). */
static inline void nemo__hot_add(nemo_place *me, unsigned s)
{
	for (unsigned i = 0; i < NEMO__HOT; i++)
		if (me->hot[i] == s)
			return;
	/* The next slot round the ring that holds no granted sender (G1:
	 * granted ones stay hot; at most NEMO__HOT - 1 are). */
	unsigned k = me->hot_next++ % NEMO__HOT;
	while (me->hot[k] < me->d->P && nemo__is_granted(me, me->hot[k]))
		k = me->hot_next++ % NEMO__HOT;
	me->hot[k] = s;
	me->in_row[s].streak = 0;
	me->in_row[s].idle = 0;
}

/* May this place grant streams now (THE STREAM GRANT, G0)? */
static inline bool nemo__grant_allowed(nemo_place *me)
{
	return nemo__asym && me->grant_n < NEMO__GRANT_MAX &&
	       !atomic_load_explicit(&me->irq_on, memory_order_relaxed) &&
	       !atomic_load_explicit(&me->fd_armed, memory_order_relaxed) &&
	       !atomic_load_explicit(&me->delegated, memory_order_relaxed) && !me->d->stamps;
}

/* The place stops looking at its queues until a kick (it arms its
 * descriptor): every stream it counted has paused, as after
 * NEMO__GRANT_IDLE empty polls. */
static inline void nemo__grant_pause(nemo_place *me)
{
	for (unsigned i = 0; i < NEMO__HOT; i++)
		if (me->hot[i] < me->d->P)
			me->in_row[me->hot[i]].streak = 0;
}

/* Messages and notifications handled so far (a grant's payback). */
static inline uint64_t nemo__handled_count(nemo_place *me)
{
	return atomic_load_explicit(&me->c_am_handled, memory_order_relaxed) +
	       atomic_load_explicit(&me->c_nf_handled, memory_order_relaxed);
}

/* D1 found got entries on hot queue s: count the stream; grant it (G1)
 * once it is long enough. */
static inline void nemo__grant_note(nemo_place *me, unsigned s, unsigned got)
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
	if (k < me->grant_need || nemo__is_granted(me, s) || !nemo__grant_allowed(me))
		return;
	_Atomic uint64_t *g = &nemo__grant_row(me->d, me->idx)[s / 64];
	atomic_store_explicit(g, atomic_load_explicit(g, memory_order_relaxed) | (1ull << (s % 64)),
			      memory_order_relaxed);                        /* G1 */
	if (!me->grant_n++)
		me->grant_from = nemo__handled_count(me);
	NEMO__PCOUNT(me, c_grants);
}

#endif
