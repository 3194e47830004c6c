/*
 * delay.c - notification delays (nemo/poll.h): with NEMO_DOMAIN_DELAYS a
 * sender stamps each active message with nemo_ticks() (an array beside
 * the rings, written before the slot's release store, read after its
 * acquire load and before the slot is given back), and the receiver, as
 * the handler is about to start, adds now - stamp to its place's
 * histogram: count, sum, max and 48 power-of-two buckets of nanoseconds.
 * The receiving thread alone writes its place's counters (relaxed stores,
 * no RMW); readers take a snapshot.  Cost: a TSC read and an 8-byte store
 * on a line of its own per message for the sender, a TSC read, a load and
 * a few counter updates for the receiver (docs/polling.md).
 */
#define _GNU_SOURCE
#include <nemo/poll.h>

#include "../messaging/modes.h"

#include <errno.h>
#include <string.h>

/* The receiver's side, nemo__delay_record, is in the messaging layer
 * (src/messaging/drain.c, beside the drain that calls it): this file
 * only reads what it recorded. */
_Static_assert(NEMO__DELAY_BUCKETS == NEMO_DELAY_BUCKETS, "messaging's histogram matches nemo_delay_stats");

int nemo_place_delays(nemo_domain *d, nemo_place_id id, nemo_delay_stats *out)
{
	int err = nemo__domain_check(d);
	if (err)
		return err;
	if (!out)
		return NEMO__FAIL(EINVAL, "out is NULL");
	if (!nemo__domain_delays(d))
		return NEMO__FAIL(ENOTSUP, "the domain was created without NEMO_DOMAIN_DELAYS");
	uint64_t st;
	nemo_place *p = nemo__dest(d, id, &st);
	if (!p)
		return NEMO__FAIL(ESRCH, "place %#llx is not in the domain (never was, or left)",
				  (unsigned long long)id);
	memset(out, 0, sizeof *out);
	nemo__place_delays_read(p, &out->count, &out->sum_ns, &out->max_ns, out->buckets);
	return 0;
}

int nemo_delay_percentile(const nemo_delay_stats *s, double q, uint64_t *ns)
{
	if (!s || !ns)
		return NEMO__FAIL(EINVAL, "%s is NULL", s ? "ns" : "the stats");
	if (!(q >= 0 && q <= 1))
		return NEMO__FAIL(EINVAL, "q %g is not in [0, 1]", q);
	uint64_t n = 0;
	for (unsigned k = 0; k < NEMO_DELAY_BUCKETS; k++)
		n += s->buckets[k];
	if (!n)
		return NEMO__FAIL(ENOENT, "no delay recorded yet");
	uint64_t want = (uint64_t)(q * (double)n + 0.5), acc = 0;
	if (want < 1)
		want = 1;
	for (unsigned k = 0; k < NEMO_DELAY_BUCKETS; k++) {
		acc += s->buckets[k];
		if (acc >= want) {
			uint64_t hi = k >= 63 ? UINT64_MAX : (2ull << k) - 1;
			*ns = hi < s->max_ns ? hi : s->max_ns;
			return 0;
		}
	}
	*ns = s->max_ns;
	return 0;
}
