/*
 * poll.c - the threshold check's due path (nemo/poll.h).
 *
 * The check compares the raw cycle counter with one thread-local word,
 * nemo__poll_due, and calls here only when it is reached.  The word's
 * values:
 *   UINT64_MAX  never: the thread is not a place (the initial value; set
 *               again when a place leaves, by domain.c);
 *   0           decide here: a place that just joined or changed its
 *               threshold; or, where nemo_ticks() is not the TSC
 *               (NEMO_CLOCK=gettime, non-x86 on a slow clock), always -
 *               then every check comes here and compares the place's
 *               own deadline in nemo_ticks() units;
 *   t           the TSC tick at or after which the next check polls.
 * The thread alone reads and writes it (also from the interrupt signal
 * handler, which may run a check inside a handler: it is a plain word of
 * the thread, and a stale value only makes one check early or late).
 *
 * Cost when due: nemo_poll (a scan of the hot queues and the hint words,
 * then the handlers), one TSC read, a multiply.  Counted per place in
 * poll_checks / poll_check_handled.
 */
#define _GNU_SOURCE
#include <nemo/poll.h>

#include "../messaging/modes.h"

_Static_assert(NEMO__POLL_THRESHOLD_DEFAULT_NS == NEMO_POLL_THRESHOLD_DEFAULT_NS,
	       "messaging starts places at the documented default threshold");

#include <errno.h>

#define THRESHOLD_MAX_NS 10000000000ull     /* 10 s */

void nemo__poll_check_due(void)
{
	nemo_place *me = nemo__place_self();
	if (!me) {
		nemo__poll_due = UINT64_MAX;
		return;
	}
	struct nemo__poll_check *pc = nemo__place_poll_check(me);
	uint64_t now = nemo_ticks();
	bool tsc = nemo_clock_source__ == NEMO_CLOCK_TSC;
	if (!tsc && now < pc->next)
		return;                 /* not due: the slow clock's own compare */
	if (nemo__place_in_call(me)) {
		/* Inside a nemo call of this place (a handler run by a poll or a
		 * wait): its caller is polling already; do not nest. */
		return;
	}
	unsigned n = 0;
	nemo_poll(&n);
	nemo__place_count_poll_check(me, n);
	uint64_t next = nemo_ticks() + pc->thresh_ticks;
	pc->next = next;
	nemo__poll_due = tsc ? next : 0;
}

int nemo_poll_threshold_set(uint64_t ns)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	if (ns > THRESHOLD_MAX_NS)
		return NEMO__FAIL(EINVAL, "threshold %llu ns is above 10 s", (unsigned long long)ns);
	nemo_clock_init();
	struct nemo__poll_check *pc = nemo__place_poll_check(me);
	pc->thresh_ns = ns;
	pc->thresh_ticks = nemo_ns_to_ticks((double)ns);
	pc->next = 0;
	nemo__poll_due = 0;         /* the next check decides, with the new threshold */
	return 0;
}

int nemo_poll_threshold_get(uint64_t *ns)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	if (!ns)
		return NEMO__FAIL(EINVAL, "ns is NULL");
	*ns = nemo__place_poll_check(me)->thresh_ns;
	return 0;
}

int nemo_poll_check_counters(uint64_t *polls, uint64_t *handled)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	if (!polls || !handled)
		return NEMO__FAIL(EINVAL, "%s is NULL", polls ? "handled" : "polls");
	nemo__place_poll_check_counters(me, polls, handled);
	return 0;
}
