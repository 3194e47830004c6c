/*
 * pollcheck_cost.c - the not-due cost of NEMO_POLL_CHECK(), for
 * callgrind (tests/test_pollcheck_cost.sh): a place with a 10 s threshold
 * runs N checks in checks_loop(); callgrind counts that function's
 * instructions only.  Uses nothing but the API of nemo/poll.h.
 *
 *   pollcheck_cost N
 */
#define _GNU_SOURCE
#include <nemo/nemo.h>

#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) void checks_loop(long n);

__attribute__((noinline)) void checks_loop(long n)
{
	for (long i = 0; i < n; i++)
		NEMO_POLL_CHECK();
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	nemo_domain *d;
	if (nemo_domain_create(NULL, &d) || nemo_place_join(d, NULL, NULL) ||
	    nemo_poll_threshold_set(10000000000ull)) {
		fprintf(stderr, "pollcheck_cost: %s\n", nemo_last_error());
		return 1;
	}
	NEMO_POLL_CHECK();       /* the first check decides and sets the deadline */
	checks_loop(n);
	uint64_t polls, handled;
	nemo_poll_check_counters(&polls, &handled);
	printf("pollcheck_cost: %ld checks, %llu polled\n", n, (unsigned long long)polls);
	nemo_place_leave();
	nemo_domain_destroy(d);
	return polls == 1 ? 0 : 1;
}
