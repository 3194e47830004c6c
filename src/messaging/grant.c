/*
 * grant.c - stream grants: a receiver that polls a long stream lets its
 * sender skip the fence, hint and kick of every send (P-S5 of send.c),
 * and takes the grant back - one membarrier - before it stops looking.
 * The per-poll steps (G0, G1, the hot set) are inline in grant.h; the
 * revocation (GR1-GR3) is here.
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
 *       message: membarrier registered, interrupts off, its eventfd (if
 *       any) not armed, not served by the progress thread, no delay
 *       stamps, fewer than NEMO__GRANT_MAX grants.
 *   G1  D1 counts each hot queue's stream (messages, reset after
 *       NEMO__GRANT_IDLE empty polls in a row); at grant_need messages:
 *       store(grant word | bit s, relaxed).  Granted queues stay hot
 *       (hot_add skips them), so every poll's D1 looks at them.
 *   S4g the sender, after S3 and a compiler barrier: load(grant word,
 *       relaxed) has bit s -> return 0 (no P, no S4, no S5).
 *   GR1 before r stops looking at its queues - W2 (it sleeps), F1 (it
 *       arms its eventfd; not at F0, where it leaves the descriptor
 *       readable and its loop comes back to look: placewait.c), turning
 *       interrupts on, being served - it stores 0 to its grant words
 *       (relaxed);
 *   GR2 membarrier (nemo__asym_heavy);
 *   GR3 fetch_or(its own hint words, the revoked bits): its next look
 *       (W3's pending check, F2's, the next drain) drains those queues.
 *
 * Why no wake-up is lost.  A send that skipped S5 read its bit before GR1
 * (it read 1).  GR2 makes every running thread of the process pass a full
 * barrier (a descheduled one passed one at its context switch): s passes
 * it after its entry store, since that store precedes the load that read
 * the bit, which precedes GR1, which precedes GR2.  So the entry is visible
 * to r after GR2, and GR3's bit makes W3 (or F2) find it before r sleeps
 * (or leaves its queues to its eventfd): r drains it instead.  A send
 * whose S4g comes after GR1 reads 0 (the grant word's coherence order)
 * and does P-S5 as before.  A grant made while r runs costs no kick: a
 * running place in none of the modes G0 excludes is never kicked
 * anyway.  A leave needs no GR1-GR3: LV1's membarrier already puts every
 * send's entry, granted or not, in front of LV2 (THE ASYMMETRIC BARRIER).
 * models/place.pml -DGRANT checks this with buffered entry stores, and
 * -DGRANT -DBROKEN_REVOKE_NO_BARRIER that without GR2 r sleeps on a
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
 */
#define _GNU_SOURCE
#include "grant.h"

void nemo__grant_revoke_all(nemo_place *me)
{
	struct nemo_domain *d = me->d;
	_Atomic uint64_t *g = nemo__grant_row(d, me->idx), *h = nemo__hint_row(d, me->idx);
	uint64_t was[NEMO_PLACES_MAX / 64];
	for (unsigned w = 0; w < d->HW; w++) {
		was[w] = atomic_load_explicit(&g[w], memory_order_relaxed);
		if (was[w])
			atomic_store_explicit(&g[w], 0, memory_order_relaxed);   /* GR1 */
	}
	nemo__asym_heavy();                                                  /* GR2 */
	for (unsigned w = 0; w < d->HW; w++)
		if (was[w])
			atomic_fetch_or_explicit(&h[w], was[w], memory_order_relaxed);  /* GR3 */
	/* Backoff: a grant that did not carry enough messages to pay for
	 * its barrier makes the next one wait for a longer stream. */
	uint64_t carried = nemo__handled_count(me) - me->grant_from;
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
