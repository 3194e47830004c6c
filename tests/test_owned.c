/*
 * test_owned.c - who has a CPU of its own (src/messaging/placewait.c,
 * place_owns_cpu; what it changes: src/waiter/wait.c, A CPU OF ITS OWN):
 * a place whose thread is pinned to one CPU that no other active place
 * of its domain is pinned to.  Uses the library's internal header to
 * read the decision; no timing (the waits time out at once).
 */
#define _GNU_SOURCE
#include "messaging/messaging_internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int failures;
#define CHECK(c)                                                                  \
	do {                                                                      \
		if (!(c)) {                                                       \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
			failures++;                                               \
		}                                                                 \
	} while (0)

static nemo_domain *dom;
static pthread_barrier_t bar;
static int cpu_a, cpu_b;

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	CHECK(pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0);
}

static void unpin(void)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu_a, &set);
	CPU_SET(cpu_b, &set);
	CHECK(pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0);
}

/* One wait that times out at once, reading the affinity again first (as
 * every OWN_REREAD waits); returns what the place decided. */
static bool wait_once(void)
{
	nemo_place *me = nemo__place_self();
	me->own_reread = 0;
	struct timespec past = { 0, 0 };
	CHECK(nemo_place_wait(&past, NULL) == ETIMEDOUT);
	return me->owns_cpu;
}

/* Phases P0..P5, with the barrier B1..B5 between them:
 *   P0  a joins pinned to cpu_a: its own.  c joins unpinned: never.
 *   P1  b joins pinned to cpu_a: not its own (a is pinned there).
 *   P2  a, reading again: not its own any more.
 *   P3  b moves to cpu_b: its own.
 *   P4  a, reading again: its own again; then a leaves, still pinned.
 *   P5  b moves back to cpu_a: its own (a place that left does not count). */
static void *thread_a(void *arg)
{
	(void)arg;
	pin(cpu_a);
	CHECK(nemo_place_join(dom, NULL, NULL) == 0);
	CHECK(wait_once());                     /* P0 */
	pthread_barrier_wait(&bar);             /* B1 */
	pthread_barrier_wait(&bar);             /* B2 */
	CHECK(!wait_once());                    /* P2 */
	pthread_barrier_wait(&bar);             /* B3 */
	pthread_barrier_wait(&bar);             /* B4 */
	CHECK(wait_once());                     /* P4 */
	CHECK(nemo_place_leave() == 0);
	pthread_barrier_wait(&bar);             /* B5 */
	return NULL;
}

static void *thread_b(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&bar);             /* B1 */
	pin(cpu_a);
	CHECK(nemo_place_join(dom, NULL, NULL) == 0);
	CHECK(!wait_once());                    /* P1 */
	pthread_barrier_wait(&bar);             /* B2 */
	pthread_barrier_wait(&bar);             /* B3 */
	pin(cpu_b);
	CHECK(wait_once());                     /* P3 */
	pthread_barrier_wait(&bar);             /* B4 */
	pthread_barrier_wait(&bar);             /* B5 */
	pin(cpu_a);
	CHECK(wait_once());                     /* P5 */
	CHECK(nemo_place_leave() == 0);
	return NULL;
}

static void *thread_c(void *arg)
{
	(void)arg;
	unpin();
	CHECK(nemo_place_join(dom, NULL, NULL) == 0);
	CHECK(!wait_once());                    /* P0 */
	for (int i = 0; i < 5; i++)
		pthread_barrier_wait(&bar);     /* B1..B5 */
	CHECK(!wait_once());                    /* P5: still unpinned */
	CHECK(nemo_place_leave() == 0);
	return NULL;
}

int main(void)
{
	cpu_set_t all;
	CHECK(sched_getaffinity(0, sizeof all, &all) == 0);
	cpu_a = cpu_b = -1;
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (!CPU_ISSET(c, &all))
			continue;
		if (cpu_a < 0)
			cpu_a = c;
		else if (cpu_b < 0)
			cpu_b = c;
	}
	if (cpu_b < 0) {
		printf("test_owned: one CPU allowed: skipped\n");
		return 0;
	}
	nemo_domain_attr da = { .max_places = 4 };
	CHECK(nemo_domain_create(&da, &dom) == 0);
	CHECK(pthread_barrier_init(&bar, NULL, 3) == 0);
	pthread_t t[3];
	pthread_create(&t[0], NULL, thread_a, NULL);
	pthread_create(&t[1], NULL, thread_b, NULL);
	pthread_create(&t[2], NULL, thread_c, NULL);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&bar);
	CHECK(nemo_domain_destroy(dom) == 0);
	if (failures) {
		fprintf(stderr, "test_owned: %d checks failed\n", failures);
		return 1;
	}
	printf("test_owned: ok\n");
	return 0;
}
