/*
 * test_placewait.c - what a place's waits tell the adaptive policy
 * (src/messaging/placewait.c):
 *   - who has a CPU of its own (place_owns_cpu; what it changes:
 *     src/waiter/wait.c, A CPU OF ITS OWN): a place whose thread is
 *     pinned to one CPU that no other active place of its domain is
 *     pinned to.  The library's internal header reads the decision; the
 *     waits time out at once.
 *   - a place woken from a sleep by a message teaches the wake-up latency
 *     (policy.c, THE COST OF BLOCKING): the calibration's sample count
 *     grows.  No time is asserted.
 *   - the event-loop descriptor is not left readable by a kicker that
 *     wrote it and has not counted its write yet (THE FILE DESCRIPTOR,
 *     F5): the loop spun on it, empty, while such a kicker was off the
 *     CPU.  The kicker's steps are made by hand, with the place's fields.
 */
#define _GNU_SOURCE
#include "messaging/messaging_internal.h"

#include "check.h"

#include <poll.h>
#include <pthread.h>
#include <unistd.h>
#include <sched.h>
#include <string.h>

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

/* Phases 0-5, with barrier waits 1-5 between them (not protocol steps):
 *   0  a joins pinned to cpu_a: its own.  c joins unpinned: never.
 *   1  b joins pinned to cpu_a: not its own (a is pinned there).
 *   2  a, reading again: not its own any more.
 *   3  b moves to cpu_b: its own.
 *   4  a, reading again: its own again; then a leaves, still pinned.
 *   5  b moves back to cpu_a: its own (a place that left does not count). */
static void *thread_a(void *arg)
{
	(void)arg;
	pin(cpu_a);
	CHECK(nemo_place_join(dom, NULL, NULL) == 0);
	CHECK(wait_once());                     /* phase 0 */
	pthread_barrier_wait(&bar);             /* barrier 1 */
	pthread_barrier_wait(&bar);             /* barrier 2 */
	CHECK(!wait_once());                    /* phase 2 */
	pthread_barrier_wait(&bar);             /* barrier 3 */
	pthread_barrier_wait(&bar);             /* barrier 4 */
	CHECK(wait_once());                     /* phase 4 */
	CHECK(nemo_place_leave() == 0);
	pthread_barrier_wait(&bar);             /* barrier 5 */
	return NULL;
}

static void *thread_b(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&bar);             /* barrier 1 */
	pin(cpu_a);
	CHECK(nemo_place_join(dom, NULL, NULL) == 0);
	CHECK(!wait_once());                    /* phase 1 */
	pthread_barrier_wait(&bar);             /* barrier 2 */
	pthread_barrier_wait(&bar);             /* barrier 3 */
	pin(cpu_b);
	CHECK(wait_once());                     /* phase 3 */
	pthread_barrier_wait(&bar);             /* barrier 4 */
	pthread_barrier_wait(&bar);             /* barrier 5 */
	pin(cpu_a);
	CHECK(wait_once());                     /* phase 5 */
	CHECK(nemo_place_leave() == 0);
	return NULL;
}

static void *thread_c(void *arg)
{
	(void)arg;
	unpin();
	CHECK(nemo_place_join(dom, NULL, NULL) == 0);
	CHECK(!wait_once());                    /* phase 0 */
	for (int i = 0; i < 5; i++)
		pthread_barrier_wait(&bar);     /* barriers 1-5 */
	CHECK(!wait_once());                    /* phase 5: still unpinned */
	CHECK(nemo_place_leave() == 0);
	return NULL;
}

/* A place that sleeps at once (policy block) and is woken by messages
 * from the main thread (a place too), which sleeps 20 ms before each: a kick of a
 * sleeping place stamps its slot, and the woken place learns from it.
 * Tried up to 20 times (a kick that finds the place not asleep yet, on a
 * loaded machine, teaches nothing). */
static nemo_domain *dom2;
static _Atomic uint64_t handled_n;
static _Atomic nemo_place_id sleeper_id;
static _Atomic int sleeper_stop;

static void on_msg(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	(void)ctx;
	atomic_fetch_add(&handled_n, 1);
}

static void *sleeper(void *arg)
{
	(void)arg;
	nemo_place_attr a = { .policy = { NEMO_WAIT_BLOCK, 0 } };
	nemo_place_id id;
	CHECK(nemo_place_join(dom2, &a, &id) == 0);
	atomic_store(&sleeper_id, id);
	while (!atomic_load(&sleeper_stop)) {
		struct timespec dl = in_ms(CLOCK_MONOTONIC, 1000);
		int rc = nemo_place_wait(&dl, NULL);
		CHECK(rc == 0 || rc == ETIMEDOUT);
	}
	CHECK(nemo_place_leave() == 0);
	return NULL;
}

static void test_sleep_teaches(void)
{
	nemo_domain_attr da = { .max_places = 4 };
	CHECK(nemo_domain_create(&da, &dom2) == 0);
	CHECK(nemo_action_register(dom2, 1, on_msg, NULL) == 0);
	atomic_store(&sleeper_id, NEMO_PLACE_NONE);
	pthread_t t;
	pthread_create(&t, NULL, sleeper, NULL);
	while (atomic_load(&sleeper_id) == NEMO_PLACE_NONE)
		sched_yield();
	CHECK(nemo_place_join(dom2, NULL, NULL) == 0);   /* the sender */
	nemo_wait_calibration c0, c1;
	CHECK(nemo_wait_get_calibration(&c0) == 0);
	bool learned = false;
	for (int i = 0; i < 20 && !learned; i++) {
		struct timespec pause = { 0, 20 * 1000 * 1000 };
		nanosleep(&pause, NULL);
		uint64_t before = atomic_load(&handled_n);
		int err = nemo_am_send(atomic_load(&sleeper_id), 1, 0, 0);
		CHECK(err == 0);
		if (err) {
			fprintf(stderr, "test_placewait: send: %s\n", nemo_last_error());
			break;
		}
		while (atomic_load(&handled_n) == before)
			sched_yield();
		CHECK(nemo_wait_get_calibration(&c1) == 0);
		learned = c1.samples > c0.samples;
	}
	CHECK(learned);
	CHECK(strcmp(c1.source, "learned") == 0);
	atomic_store(&sleeper_stop, 1);
	CHECK(nemo_am_send(atomic_load(&sleeper_id), 1, 0, 0) == 0);
	pthread_join(t, NULL);
	CHECK(nemo_place_leave() == 0);
	CHECK(nemo_domain_destroy(dom2) == 0);
}

static bool readable(int fd)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	return poll(&pf, 1, 0) == 1;
}

static void test_fd_uncounted(void)
{
	nemo_domain *d;
	CHECK(nemo_domain_create(NULL, &d) == 0);
	CHECK(nemo_place_join(d, NULL, NULL) == 0);
	int fd = -1;
	CHECK(nemo_place_fd(&fd) == 0);
	nemo_place *me = nemo__place_self();
	CHECK(!readable(fd));
	/* A kicker (kick.c, fd_kick) that took the arming and wrote, then
	 * lost the CPU before it counted its write. */
	atomic_fetch_add(&me->fd_kickers, 1);
	CHECK(atomic_exchange(&me->fd_armed, 0) == 1);
	uint64_t one = 1;
	CHECK(write(fd, &one, sizeof one) == (ssize_t)sizeof one);
	CHECK(readable(fd));
	unsigned h = 9;
	CHECK(nemo_poll(&h) == 0);
	CHECK(h == 0);
	CHECK(!readable(fd));            /* read back, though not counted yet */
	/* The kicker counts and leaves its bracket: nothing more to read. */
	atomic_fetch_add(&me->fd_writes, 1);
	atomic_fetch_sub(&me->fd_kickers, 1);
	CHECK(nemo_poll(&h) == 0);
	CHECK(!readable(fd));
	CHECK(nemo_place_leave() == 0);
	CHECK(nemo_domain_destroy(d) == 0);
}

int main(void)
{
	test_fd_uncounted();
	test_sleep_teaches();
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
		printf("test_placewait: one CPU allowed: who owns a CPU is not checked\n");
		return check_exit("test_placewait");
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
	return check_exit("test_placewait");
}
