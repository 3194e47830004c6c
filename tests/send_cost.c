/*
 * send_cost.c - instructions of one nemo_am_send and of one
 * nemo_am_send_bound, for callgrind (tests/test_send_cost.sh): a place
 * sending active messages to itself, polling after every 8 (the
 * generic send's curry and the bound send in their steady state, with
 * the drain that clears the hint bit between them).  Public API only.
 *
 *   send_cost N
 */
#define _GNU_SOURCE
#include <nemo/nemo.h>
#include <stdio.h>
#include <stdlib.h>
static void nop(const nemo_am_msg *m, void *ctx) { (void)m; (void)ctx; }
__attribute__((noinline)) void loop_generic(nemo_place_id dest, long n);
__attribute__((noinline)) void loop_bound(nemo_am_bound *b, long n);
__attribute__((noinline)) void loop_generic(nemo_place_id dest, long n)
{
	for (long i = 0; i < n; i++) {
		if (nemo_am_send(dest, 1, (uint64_t)i, 0)) abort();
		if (i % 8 == 7) nemo_poll(NULL);
	}
}
__attribute__((noinline)) void loop_bound(nemo_am_bound *b, long n)
{
	for (long i = 0; i < n; i++) {
		if (nemo_am_send_bound(b, (uint64_t)i)) abort();
		if (i % 8 == 7) nemo_poll(NULL);
	}
}
int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000;
	nemo_domain *d; nemo_place_id me;
	if (nemo_domain_create(NULL, &d) || nemo_action_register(d, 1, nop, NULL) || nemo_place_join(d, NULL, &me)) return 1;
	nemo_am_bound *b;
	if (nemo_am_bind(me, 1, 0, &b)) return 1;
	nemo_am_send(me, 1, 0, 0); nemo_am_send_bound(b, 0); nemo_poll(NULL);
	loop_generic(me, n);
	loop_bound(b, n);
	printf("send_cost: %ld generic and %ld bound sends\n", n, n);
	return 0;
}
