/*
 * functrace.c - "func-t": this file is compiled with
 * -finstrument-functions and linked with libnemo-instrument, so every
 * function entry below is a threshold check.  A place that only calls
 * small functions in a loop - and never calls nemo itself - handles
 * every message sent to it.
 */
#define _GNU_SOURCE
#include <nemo/nemo.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#define MSGS 5000u

static atomic_uint hits;
static _Atomic nemo_place_id rx = NEMO_PLACE_NONE;
static nemo_domain *d;

static void on_hit(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	(void)ctx;
	atomic_fetch_add(&hits, 1);
}

__attribute__((noinline)) static unsigned long step(unsigned long x)
{
	return x * 6364136223846793005ul + 1442695040888963407ul;
}

static void *sender(void *p)
{
	(void)p;
	while (atomic_load(&rx) == NEMO_PLACE_NONE)
		;
	for (unsigned i = 0; i < MSGS; i++)
		if (nemo_domain_am_send(d, atomic_load(&rx), 1, i, NULL, 0, 0))
			return NULL;
	return NULL;
}

int main(void)
{
	nemo_place_id me;
	if (nemo_domain_create(NULL, &d) || nemo_action_register(d, 1, on_hit, NULL) ||
	    nemo_place_join(d, NULL, &me) || nemo_poll_threshold_set(1000))
		return 1;
	atomic_store(&rx, me);
	pthread_t t;
	pthread_create(&t, NULL, sender, NULL);
	volatile unsigned long x = 1;
	while (atomic_load(&hits) < MSGS)
		x = step(x);         /* each call's entry is a check */
	pthread_join(t, NULL);
	nemo_domain_counters c;
	nemo_domain_get_counters(d, &c);
	printf("functrace: %u messages handled at function entries (%llu polling checks)\n", atomic_load(&hits),
	       (unsigned long long)c.poll_checks);
	nemo_place_leave();
	nemo_domain_destroy(d);
	return (atomic_load(&hits) == MSGS && c.poll_checks > 0) ? 0 : 1;
}
