/*
 * bound_cost.c - instructions of one generic nemo_am_send against one
 * nemo_am_send_bound, for callgrind (tests/test_bound_cost.sh).  Two idle
 * receivers with rings larger than N take N messages each, so neither
 * path waits and both skip the kick after the first (the hint bit stays
 * set): the steady state of a stream.  Uses only the public API.
 *
 *   bound_cost N
 */
#define _GNU_SOURCE
#include <nemo/nemo.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static void nop(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	(void)ctx;
}

static nemo_domain *d;
static _Atomic nemo_place_id ids[2] = { NEMO_PLACE_NONE, NEMO_PLACE_NONE };
static atomic_int done;

static void *idle_rx(void *p)
{
	int i = (int)(long)p;
	nemo_place_id id;
	if (nemo_place_join(d, NULL, &id))
		return NULL;
	atomic_store(&ids[i], id);
	while (!atomic_load(&done))
		;                    /* running, not polling: senders do not kick */
	nemo_place_leave();
	return NULL;
}

__attribute__((noinline)) void loop_generic(nemo_place_id dest, long n);
__attribute__((noinline)) void loop_bound(nemo_am_bound *b, long n);

__attribute__((noinline)) void loop_generic(nemo_place_id dest, long n)
{
	for (long i = 0; i < n; i++)
		if (nemo_am_send(dest, 1, (uint64_t)i, 0))
			abort();
}

__attribute__((noinline)) void loop_bound(nemo_am_bound *b, long n)
{
	for (long i = 0; i < n; i++)
		if (nemo_am_send_bound(b, (uint64_t)i))
			abort();
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 20000;
	nemo_domain_attr a = { .ring_slots = 32768, .max_places = 4 };
	if (getenv("NEMO_COST_DELAYS"))           /* the cost of NEMO_DOMAIN_DELAYS (docs/polling.md) */
		a.flags = NEMO_DOMAIN_DELAYS;
	if (n >= 32768 || nemo_domain_create(&a, &d) || nemo_action_register(d, 1, nop, NULL))
		return 1;
	pthread_t t[2];
	for (long i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, idle_rx, (void *)i);
	while (atomic_load(&ids[0]) == NEMO_PLACE_NONE || atomic_load(&ids[1]) == NEMO_PLACE_NONE)
		;
	if (nemo_place_join(d, NULL, NULL))
		return 1;
	nemo_am_bound *b;
	if (nemo_am_bind(atomic_load(&ids[1]), 1, 0, &b))
		return 1;
	/* The first send of each path pays the first-send handshake and the
	 * kick: outside the counted loops. */
	nemo_am_send(atomic_load(&ids[0]), 1, 0, 0);
	nemo_am_send_bound(b, 0);
	loop_generic(atomic_load(&ids[0]), n);
	loop_bound(b, n);
	nemo_am_unbind(b);
	atomic_store(&done, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	nemo_place_leave();
	nemo_domain_destroy(d);
	printf("bound_cost: %ld generic and %ld bound sends\n", n, n);
	return 0;
}
