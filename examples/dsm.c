/*
 * dsm.c - places that compute and serve each other's requests: the
 * pattern of a distributed shared memory (as in Perkovic & Keleher,
 * "Responsiveness without Interrupts"), with threshold checks.
 *
 * PLACES threads join a domain.  Each owns a "page" of values and
 * computes; every so often it needs a value from another place's page, so
 * it sends that place a request and waits for the reply.  While it
 * waits, nemo_place_wait serves the requests of others.  While it
 * computes, NEMO_POLL_CHECK() in the outer loop serves them: a check
 * costs a few instructions and polls only when the threshold (5 us by
 * default) has passed since its last poll, so a request waits at most
 * about that long for a computing place.  Without the checks, a request
 * to a computing place would wait until that place next waits for a reply
 * of its own - and its requester with it.
 *
 *   dsm [PLACES [REQUESTS]]       default: the CPUs (at least 2) places,
 *                                 2000 requests each
 *
 * Prints the runtime and the notification delay (from a request's send to
 * the start of its handler) p50 and p99; checks every reply's value and
 * that every request was served once.  Exit status 0 when all is right.
 */
#define _POSIX_C_SOURCE 200809L   /* clock_gettime: see <nemo/platform.h> */
#include <nemo/nemo.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ACT_READ, ACT_VALUE, ACT_DONE };

#define PAGE 1024                 /* values per page */
#define WORK_UNITS 20000          /* compute between two requests (a few tens of us) */
#define OUTER 64                  /* units per outer-loop iteration: the check goes there */

struct place {
	pthread_t thread;
	int index;
	nemo_place_id id;
	uint64_t page[PAGE];          /* what it owns: page[i] = value(index, i) */
	unsigned long served;         /* requests its handler served */
	/* its own requests */
	unsigned long asked, wrong;
	uint64_t want_tag, got_tag, got_value;
	uint64_t *delay_ticks;        /* one per request */
	uint64_t sink;
};

static nemo_domain *dom;
static struct place *places;
static int nplaces;
static unsigned long nrequests;
static atomic_int ready, finished;
static atomic_bool go;

static uint64_t value(int owner, unsigned i)
{
	return (uint64_t)owner * 1000003u + i * 7u + 1;
}

/* At the owner: the value asked for, and how long the request waited
 * (its sender's stamp is the payload). */
static void on_read(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	uint64_t now = nemo_ticks(), sent;
	memcpy(&sent, m->payload, sizeof sent);
	struct place *me = m->place_ctx;
	me->served++;
	/* arg: 1 + the index + PAGE x the request number (a tag unique per request) */
	uint64_t reply[2] = { me->page[(m->arg - 1) % PAGE], now > sent ? now - sent : 0 };
	if (nemo_am_reply(m, ACT_VALUE, 0, reply, sizeof reply, 0) != 0)
		fprintf(stderr, "dsm: reply: %s\n", nemo_last_error());
}

/* At the requester: the value and the delay its request waited. */
static void on_value(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	struct place *me = m->place_ctx;
	uint64_t reply[2];
	memcpy(reply, m->payload, sizeof reply);
	me->got_value = reply[0];
	me->delay_ticks[me->asked - 1] = reply[1];
	me->got_tag = m->tag;         /* the request's arg: which value it asked for */
}

static void on_done(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	(void)ctx;                    /* only wakes a place waiting for the end */
}

/* Wait in slices of 1 ms: the wait serves others' requests, and a reply
 * handled just before it started does not leave it asleep for long. */
static void wait_a_while(void)
{
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_nsec += 1000000;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	int err = nemo_place_wait(&dl, NULL);
	if (err && err != ETIMEDOUT) {
		fprintf(stderr, "dsm: nemo_place_wait: %s\n", nemo_last_error());
		exit(1);
	}
}

/* The computation: OUTER units per outer iteration, a check in each. */
static uint64_t compute(uint64_t x, unsigned units)
{
	for (unsigned i = 0; i < units / OUTER; i++) {
		for (unsigned k = 0; k < OUTER; k++)
			x = (x * 6364136223846793005ull + 1442695040888963407ull) ^ (x >> 29);
		NEMO_POLL_CHECK();
	}
	return x;
}

static void *run(void *arg)
{
	struct place *me = arg;
	nemo_place_attr pa = { .context = me };
	if (nemo_place_join(dom, &pa, &me->id) != 0) {
		fprintf(stderr, "dsm: join: %s\n", nemo_last_error());
		exit(1);
	}
	for (unsigned i = 0; i < PAGE; i++)
		me->page[i] = value(me->index, i);
	atomic_fetch_add(&ready, 1);
	while (!atomic_load(&go))
		sched_yield();        /* everyone joined: the ids are published */
	uint64_t x = (uint64_t)me->index + 1, rng = x * 0x9E3779B97F4A7C15ull;
	for (unsigned long r = 0; r < nrequests; r++) {
		x = compute(x, WORK_UNITS);
		rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
		int owner = (me->index + 1 + (int)(rng % (uint64_t)(nplaces - 1))) % nplaces;
		unsigned i = (unsigned)(rng >> 32) % PAGE;
		uint64_t stamp = nemo_ticks();
		me->want_tag = i + 1 + (uint64_t)r * PAGE;   /* a new tag each time */
		me->asked++;
		if (nemo_am_sendv(places[owner].id, ACT_READ, me->want_tag, &stamp, sizeof stamp, 0) != 0) {
			fprintf(stderr, "dsm: send: %s\n", nemo_last_error());
			exit(1);
		}
		while (me->got_tag != me->want_tag)
			wait_a_while();
		if (me->got_value != value(owner, i))
			me->wrong++;
	}
	me->sink = x;
	/* The end: serve the others until they are all done too. */
	if (atomic_fetch_add(&finished, 1) + 1 == nplaces)
		nemo_am_broadcast(NULL, 0, ACT_DONE, 0, NULL, 0, 0, NULL);
	while (atomic_load(&finished) < nplaces)
		wait_a_while();
	nemo_place_leave();
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	nplaces = argc > 1 ? atoi(argv[1]) : nemo_cpu_count();
	if (nplaces < 2)
		nplaces = 2;
	nrequests = argc > 2 ? strtoul(argv[2], NULL, 10) : 2000;
	if (nemo_clock_init() != 0 || nemo_domain_create(NULL, &dom) != 0 ||
	    nemo_action_register(dom, ACT_READ, on_read, NULL) != 0 ||
	    nemo_action_register(dom, ACT_VALUE, on_value, NULL) != 0 ||
	    nemo_action_register(dom, ACT_DONE, on_done, NULL) != 0) {
		fprintf(stderr, "dsm: set-up: %s\n", nemo_last_error());
		return 1;
	}
	places = calloc((size_t)nplaces, sizeof *places);
	for (int p = 0; p < nplaces; p++) {
		places[p].index = p;
		places[p].delay_ticks = calloc(nrequests ? nrequests : 1, sizeof(uint64_t));
		pthread_create(&places[p].thread, NULL, run, &places[p]);
	}
	while (atomic_load(&ready) < nplaces)
		sched_yield();
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	atomic_store(&go, true);
	for (int p = 0; p < nplaces; p++)
		pthread_join(places[p].thread, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);

	/* Every request served once, every value right. */
	unsigned long served = 0, asked = 0, wrong = 0;
	size_t n = 0;
	uint64_t *all = calloc((size_t)nplaces * (nrequests ? nrequests : 1), sizeof *all);
	for (int p = 0; p < nplaces; p++) {
		served += places[p].served;
		asked += places[p].asked;
		wrong += places[p].wrong;
		for (unsigned long r = 0; r < places[p].asked; r++)
			all[n++] = places[p].delay_ticks[r];
	}
	nemo_domain_counters c;
	nemo_domain_get_counters(dom, &c);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	qsort(all, n, sizeof *all, cmp_u64);
	double p50 = n ? nemo_ticks_to_ns((int64_t)all[n / 2]) : 0;
	double p99 = n ? nemo_ticks_to_ns((int64_t)all[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1]) : 0;
	printf("dsm: %d places, %lu requests in %.3f s; notification delay p50 %.1f us, p99 %.1f us; "
	       "%llu threshold checks polled\n", nplaces, asked, secs, p50 / 1000, p99 / 1000,
	       (unsigned long long)c.poll_checks);
	int rc = 0;
	if (asked != (unsigned long)nplaces * nrequests || served != asked) {
		fprintf(stderr, "dsm: %lu requests asked, %lu served, %lu planned\n", asked, served,
			(unsigned long)nplaces * nrequests);
		rc = 1;
	}
	if (wrong) {
		fprintf(stderr, "dsm: %lu replies carried a wrong value\n", wrong);
		rc = 1;
	}
	for (int p = 0; p < nplaces; p++)
		free(places[p].delay_ticks);
	free(places);
	free(all);
	if (nemo_domain_destroy(dom) != 0)
		rc = 1;
	return rc;
}
