/*
 * test_adaptive.c - the adaptive policy's decisions, exactly: what each
 * history does to the plan (src/waiter/wait.c, THE HISTORY) and how the
 * cost of blocking follows its samples (src/waiter/policy.c, THE COST OF
 * BLOCKING).  Uses the library's internal header: these are the rules a
 * newcomer would change, and a change must show here.  No timing.
 */
#define _GNU_SOURCE
#include "waiter/slot.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(c)                                                                  \
	do {                                                                      \
		if (!(c)) {                                                       \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
			failures++;                                               \
		}                                                                 \
	} while (0)

static const nemo_wait_policy adaptive = { NEMO_WAIT_ADAPTIVE, 0 };

/* The plans read the calling thread's history (nemo__wait_me): the tests
 * set its fields, w below. */
static nemo__spin_plan plan(struct nemo__wait_hist *self)
{
	(void)self;
	return nemo__spin_plan_for(&adaptive, 0);
}

/* The same for a waiter with a CPU of its own (wait.c, A CPU OF ITS OWN). */
static nemo__spin_plan plan_owned(struct nemo__wait_hist *self)
{
	(void)self;
	return nemo__spin_plan_for(&adaptive, NEMO__WAIT_OWNED);
}

/* How many of 64 consecutive waits poll, each either not at all or for
 * `budget` ticks (checked), under the wait flags given. */
static unsigned polls_in_64(struct nemo__wait_hist *w, unsigned flags, uint64_t budget)
{
	uint64_t waits0 = atomic_load(&w->waits);
	unsigned polled = 0;
	for (uint64_t n = 0; n < 64; n++) {
		atomic_store(&w->waits, n);
		uint64_t t = nemo__spin_plan_for(&adaptive, flags).total;
		polled += t != 0;
		CHECK(t == 0 || t == budget);
	}
	atomic_store(&w->waits, waits0);
	return polled;
}

static int pin_to(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void unpin(const cpu_set_t *all)
{
	pthread_setaffinity_np(pthread_self(), sizeof *all, all);
}

/* Who released us, and from where. */
static void released(struct nemo__wait_hist *w, int rel_cpu, int my_cpu, bool slept)
{
	(void)w;
	nemo__learn_releaser(rel_cpu, my_cpu, slept);
}

static void test_same_cpu_score(struct nemo__wait_hist *w)
{
	w->same_cpu = 0;
	released(w, 3, 3, false);          /* polled, releaser on our CPU: +2 */
	CHECK(w->same_cpu == 2);
	released(w, 3, 3, true);           /* slept after polling: +2 */
	CHECK(w->same_cpu == 4);
	released(w, 3, 3, true);           /* slept without polling (score >= 4): nothing */
	CHECK(w->same_cpu == 4);
	released(w, 3, 3, false);          /* polled and still released here: +2 */
	CHECK(w->same_cpu == 6);
	for (int i = 0; i < 4; i++)
		released(w, 3, 3, false);
	CHECK(w->same_cpu == 8);           /* saturates */
	released(w, 1, 3, true);           /* another CPU: -1 */
	CHECK(w->same_cpu == 7);
	for (int i = 0; i < 20; i++)
		released(w, 1, 3, false);
	CHECK(w->same_cpu == 0);           /* floor */
	released(w, -1, 3, false);         /* releaser unknown: nothing */
	released(w, 3, -1, false);         /* our CPU unknown: nothing */
	CHECK(w->same_cpu == 0);
}

static void test_plans(struct nemo__wait_hist *w)
{
	cpu_set_t all;
	CHECK(pthread_getaffinity_np(pthread_self(), sizeof all, &all) == 0);
	uint64_t full = nemo_ns_to_ticks(nemo__block_cost_ns());

	w->long_waits = 0;
	w->same_cpu = 0;
	w->one_cpu = -1;
	nemo__spin_plan p = plan(w);
	CHECK(p.total == full && p.pure == full);

	/* Long waits: C / 8. */
	w->long_waits = 4;
	p = plan(w);
	CHECK(p.total == nemo_ns_to_ticks(nemo__block_cost_ns() / 8));
	w->long_waits = 3;
	CHECK(plan(w).total == full);
	/* At the ceiling (no poll paid lately) only one wait in 16 polls its
	 * C / 8 (a probe); just below it every wait does. */
	uint64_t eighth = nemo_ns_to_ticks(nemo__block_cost_ns() / 8);
	w->long_waits = 8;
	CHECK(polls_in_64(w, 0, eighth) == 4);
	w->long_waits = 7;
	CHECK(polls_in_64(w, 0, eighth) == 64);
	w->long_waits = 0;

	/* Releasers on our CPU stop polling only in a thread confined to one
	 * CPU; an unpinned thread keeps polling. */
	if (CPU_COUNT(&all) > 1) {
		w->one_cpu = -1;
		w->same_cpu = 8;
		CHECK(plan(w).total == full);
	} else {
		printf("test_adaptive: one CPU allowed: the unpinned case is not checked\n");
	}
	int cpu = -1;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &all)) {
			cpu = c;
			break;
		}
	CHECK(cpu >= 0 && pin_to(cpu) == 0);
	w->one_cpu = -1;                   /* read the new mask */
	w->same_cpu = 8;
	CHECK(plan(w).total == 0);
	w->same_cpu = 4;
	CHECK(plan(w).total == 0);
	w->same_cpu = 3;
	CHECK(plan(w).total == full);
	unpin(&all);
	w->one_cpu = -1;
	w->same_cpu = 0;

	/* A CPU of its own: 4C, shortened by the same history to an eighth
	 * of that (and probes at the ceiling); the same_cpu rule still
	 * stops a pinned waiter whose releasers run on its CPU. */
	uint64_t owned = nemo_ns_to_ticks(4 * nemo__block_cost_ns());
	w->long_waits = 0;
	w->same_cpu = 0;
	w->one_cpu = -1;
	p = plan_owned(w);
	CHECK(p.total == owned && p.pure == owned && p.window == owned);
	CHECK(p.total > full);
	w->long_waits = 4;
	CHECK(plan_owned(w).total == nemo_ns_to_ticks(4 * nemo__block_cost_ns() / 8));
	w->long_waits = 8;
	CHECK(polls_in_64(w, NEMO__WAIT_OWNED, nemo_ns_to_ticks(4 * nemo__block_cost_ns() / 8)) == 4);
	w->long_waits = 0;
	CHECK(cpu >= 0 && pin_to(cpu) == 0);
	w->one_cpu = -1;
	w->same_cpu = 4;
	CHECK(plan_owned(w).total == 0);
	w->same_cpu = 0;
	CHECK(plan_owned(w).total == owned);
	unpin(&all);
	w->one_cpu = -1;

	/* Fixed policies ignore the histories. */
	w->long_waits = 8;
	w->same_cpu = 8;
	nemo_wait_policy h = { NEMO_WAIT_HYBRID, 5000 };
	CHECK(nemo__spin_plan_for(&h, 0).total == nemo_ns_to_ticks(5000));
	CHECK(nemo__spin_plan_for(&h, NEMO__WAIT_OWNED).total == nemo_ns_to_ticks(5000));
	nemo_wait_policy b = { NEMO_WAIT_BLOCK, 0 };
	CHECK(nemo__spin_plan_for(&b, 0).total == 0);
	CHECK(nemo__spin_plan_for(&b, NEMO__WAIT_OWNED).total == 0);
	w->long_waits = 0;
	w->same_cpu = 0;
}

/* The latency estimate tracks the low band: down by a quarter of the
 * difference, up by 1/32. */
static void test_low_band(void)
{
	nemo_wait_calibration c;
	CHECK(nemo_wait_get_calibration(&c) == 0);
	for (int i = 0; i < 200; i++)
		nemo__learn_wake_latency(20000);
	CHECK(nemo_wait_get_calibration(&c) == 0);
	CHECK(fabs(c.block_wake_ns - 20000) <= 64);
	CHECK(c.samples >= 200);
	CHECK(strcmp(c.source, "learned") == 0);

	/* Run-queue delays: ten wake-ups of 1 ms move it up by 1/32 each. */
	double expect = c.block_wake_ns;
	for (int i = 0; i < 10; i++) {
		nemo__learn_wake_latency(1e6);
		expect += (1e6 - expect) / 32;
	}
	CHECK(nemo_wait_get_calibration(&c) == 0);
	CHECK(fabs(c.block_wake_ns - expect) <= 16);
	CHECK(c.block_wake_ns < 300000);   /* a plain 1/8 average would be near 740 us */

	/* One fast wake-up pulls it down by a quarter of the difference. */
	double before = c.block_wake_ns;
	nemo__learn_wake_latency(20000);
	CHECK(nemo_wait_get_calibration(&c) == 0);
	CHECK(fabs(c.block_wake_ns - (before - (before - 20000) / 4)) <= 4);

	/* Samples are clamped: nothing pushes the estimate past 1 ms. */
	for (int i = 0; i < 2000; i++)
		nemo__learn_wake_latency(1e9);
	CHECK(nemo_wait_get_calibration(&c) == 0);
	CHECK(c.block_wake_ns <= 1e6 + 1);
}

int main(void)
{
	nemo_waiter *w = nemo_waiter_self();
	if (!w) {
		fprintf(stderr, "test_adaptive: no waiter slot\n");
		return 1;
	}
	CHECK(nemo__wait_me == &w->hist);   /* the slot bound the thread's history */
	test_same_cpu_score(&w->hist);
	test_plans(&w->hist);
	test_low_band();
	if (failures) {
		fprintf(stderr, "test_adaptive: %d checks failed\n", failures);
		return 1;
	}
	printf("test_adaptive: ok\n");
	return 0;
}
