/*
 * stress_events.c - many waiters and signallers, oversubscribed (more
 * threads than CPUs), random delays, every wait policy:
 *
 *   1. queue      producers and consumers over a bounded ring with two
 *                 nemo_conds; signal and broadcast mixed; timed waits with
 *                 short random deadlines racing the signals.  Checks: every
 *                 item consumed exactly once, each producer's items in order.
 *   2. doorbell   an auto-reset nemo_event in front of a token counter
 *                 (posts coalesce, so consumers re-check).  Checks: every
 *                 token consumed, every consumer exits.
 *   3. broadcast  waiters follow a generation counter that a broadcaster
 *                 bumps; fan-outs 1, 2, 4, 16, kick mode once.  Checks:
 *                 every waiter reaches the last generation.
 *
 * A watchdog ends the run with a message if nothing progresses for 20 s:
 * a lost wake-up fails the test, it never hangs it.  NEMO_STRESS_SCALE
 * (default 1) scales the counts (0.05 under the sanitizers).
 */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/nemo.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_ulong progress;
static atomic_bool finished;
static const char *current = "start";

static void *watchdog(void *p)
{
	(void)p;
	unsigned long last = atomic_load(&progress);
	int idle = 0;
	while (!atomic_load(&finished)) {
		sleep(1);
		unsigned long now = atomic_load(&progress);
		idle = now == last ? idle + 1 : 0;
		last = now;
		if (idle >= 20) {
			fprintf(stderr, "stress: no progress for 20 s in %s (progress %lu): a lost wake-up\n",
				current, now);
			_exit(1);
		}
	}
	return NULL;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void jitter(uint64_t *s)
{
	unsigned n = (unsigned)(rnd(s) % 64);
	for (volatile unsigned i = 0; i < n * 8; i++)
		;
}

static struct timespec soon(uint64_t *s)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_nsec += (long)(rnd(s) % 200000);     /* up to 200 us */
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

static double scale = 1.0;

static long scaled(long n, long min)
{
	long v = (long)((double)n * scale);
	return v < min ? min : v;
}

/* ------------------------------------------------------------ 1. queue */
#define RING 16
#define QP 3
#define QC 3

static struct {
	pthread_mutex_t m;
	nemo_cond not_empty, not_full;
	uint64_t ring[RING];
	int head, count;
	int producers_left;
	long per_producer;
	atomic_uchar *seen;           /* [producer * per_producer + seq] */
	long consumed;
} q;

static void *q_producer(void *p)
{
	int id = (int)(intptr_t)p;
	uint64_t s = 0x9e3779b97f4a7c15ULL * (uint64_t)(id + 1);
	for (long i = 0; i < q.per_producer; i++) {
		jitter(&s);
		pthread_mutex_lock(&q.m);
		while (q.count == RING) {
			if (rnd(&s) & 1) {
				struct timespec t = soon(&s);
				int e = nemo_cond_timedwait(&q.not_full, &q.m, &t);
				CHECK(e == 0 || e == ETIMEDOUT);
			} else {
				CHECK_EQ_INT(nemo_cond_wait(&q.not_full, &q.m), 0);
			}
		}
		q.ring[(q.head + q.count) % RING] = ((uint64_t)id << 32) | (uint64_t)i;
		q.count++;
		if (rnd(&s) % 8 == 0)
			nemo_cond_broadcast(&q.not_empty);
		else
			nemo_cond_signal(&q.not_empty);
		pthread_mutex_unlock(&q.m);
	}
	pthread_mutex_lock(&q.m);
	q.producers_left--;
	nemo_cond_broadcast(&q.not_empty);
	pthread_mutex_unlock(&q.m);
	return NULL;
}

static void *q_consumer(void *p)
{
	uint64_t s = 0xdeadbeefULL + (uint64_t)(intptr_t)p;
	long last[QP];
	for (int i = 0; i < QP; i++)
		last[i] = -1;
	for (;;) {
		pthread_mutex_lock(&q.m);
		while (q.count == 0 && q.producers_left > 0) {
			if (rnd(&s) & 1) {
				struct timespec t = soon(&s);
				int e = nemo_cond_timedwait(&q.not_empty, &q.m, &t);
				CHECK(e == 0 || e == ETIMEDOUT);
			} else {
				CHECK_EQ_INT(nemo_cond_wait(&q.not_empty, &q.m), 0);
			}
		}
		if (q.count == 0) {
			pthread_mutex_unlock(&q.m);
			return NULL;
		}
		uint64_t item = q.ring[q.head];
		q.head = (q.head + 1) % RING;
		q.count--;
		q.consumed++;
		nemo_cond_signal(&q.not_full);
		pthread_mutex_unlock(&q.m);
		int prod = (int)(item >> 32);
		long seq = (long)(item & 0xffffffffu);
		CHECK(seq > last[prod]);       /* each producer's items in order */
		last[prod] = seq;
		CHECK_EQ_INT(atomic_fetch_add(&q.seen[(long)prod * q.per_producer + seq], 1), 0);
		atomic_fetch_add_explicit(&progress, 1, memory_order_relaxed);
		jitter(&s);
	}
}

static void run_queue(const nemo_wait_policy *pol, long per_producer)
{
	memset(&q, 0, sizeof q);
	pthread_mutex_init(&q.m, NULL);
	nemo_cond_init(&q.not_empty, NULL);
	nemo_cond_init(&q.not_full, NULL);
	nemo_cond_set_policy(&q.not_empty, pol);
	nemo_cond_set_policy(&q.not_full, pol);
	q.producers_left = QP;
	q.per_producer = per_producer;
	q.seen = calloc((size_t)(QP * per_producer), 1);
	pthread_t th[QP + QC];
	for (int i = 0; i < QC; i++)
		pthread_create(&th[QP + i], NULL, q_consumer, (void *)(intptr_t)i);
	for (int i = 0; i < QP; i++)
		pthread_create(&th[i], NULL, q_producer, (void *)(intptr_t)i);
	for (int i = 0; i < QP + QC; i++)
		pthread_join(th[i], NULL);
	CHECK_EQ_INT(q.consumed, QP * per_producer);
	long missing = 0;
	for (long i = 0; i < QP * per_producer; i++)
		missing += atomic_load(&q.seen[i]) != 1;
	CHECK_EQ_INT(missing, 0);
	CHECK_EQ_INT(nemo_cond_destroy(&q.not_empty), 0);
	CHECK_EQ_INT(nemo_cond_destroy(&q.not_full), 0);
	free(q.seen);
}

/* --------------------------------------------------------- 2. doorbell */
#define DP 3
#define DC 4

static struct {
	nemo_event bell;
	atomic_long tokens;           /* available */
	atomic_long taken;
	long total;
	atomic_int producing;
} d;

static void *d_producer(void *p)
{
	uint64_t s = 77 + (uint64_t)(intptr_t)p;
	long n = d.total / DP;
	for (long i = 0; i < n; i++) {
		atomic_fetch_add(&d.tokens, 1);
		CHECK_EQ_INT(nemo_event_post(&d.bell), 0);
		jitter(&s);
	}
	atomic_fetch_sub(&d.producing, 1);
	nemo_event_post(&d.bell);
	return NULL;
}

static bool take_token(void)
{
	long t = atomic_load(&d.tokens);
	while (t > 0)
		if (atomic_compare_exchange_weak(&d.tokens, &t, t - 1))
			return true;
	return false;
}

static void *d_consumer(void *p)
{
	uint64_t s = 99 + (uint64_t)(intptr_t)p;
	for (;;) {
		if (take_token()) {
			atomic_fetch_add(&d.taken, 1);
			atomic_fetch_add_explicit(&progress, 1, memory_order_relaxed);
			jitter(&s);
			continue;
		}
		if (atomic_load(&d.producing) == 0 && atomic_load(&d.tokens) == 0)
			break;
		if (rnd(&s) & 1) {
			struct timespec t;
			clock_gettime(CLOCK_MONOTONIC, &t);
			t.tv_nsec += 100000;
			if (t.tv_nsec >= 1000000000L) {
				t.tv_sec++;
				t.tv_nsec -= 1000000000L;
			}
			int e = nemo_event_timedwait(&d.bell, CLOCK_MONOTONIC, &t);
			CHECK(e == 0 || e == ETIMEDOUT);
		} else {
			CHECK_EQ_INT(nemo_event_wait(&d.bell), 0);
		}
		/* Posts coalesce: pass the bell on while tokens remain. */
		if (atomic_load(&d.tokens) > 1)
			nemo_event_post(&d.bell);
	}
	nemo_event_post(&d.bell);          /* wake the next one to exit */
	return NULL;
}

static void run_doorbell(const nemo_wait_policy *pol, long total)
{
	memset(&d, 0, sizeof d);
	nemo_event_init(&d.bell, NEMO_EVENT_AUTO_RESET, pol);
	d.total = total / DP * DP;
	atomic_store(&d.producing, DP);
	pthread_t th[DP + DC];
	for (int i = 0; i < DC; i++)
		pthread_create(&th[DP + i], NULL, d_consumer, (void *)(intptr_t)i);
	for (int i = 0; i < DP; i++)
		pthread_create(&th[i], NULL, d_producer, (void *)(intptr_t)i);
	for (int i = 0; i < DP + DC; i++)
		pthread_join(th[i], NULL);
	CHECK_EQ_INT(atomic_load(&d.taken), d.total);
	CHECK_EQ_INT(atomic_load(&d.tokens), 0);
	nemo_event_reset(&d.bell);
	CHECK_EQ_INT(nemo_event_destroy(&d.bell), 0);
}

/* -------------------------------------------------------- 3. broadcast */
#define BW 6

static struct {
	pthread_mutex_t m;
	nemo_cond c;
	long gen, last;
	int reached;
} b;

static void *b_waiter(void *p)
{
	uint64_t s = 5 + (uint64_t)(intptr_t)p;
	pthread_mutex_lock(&b.m);
	long seen = 0;
	while (seen < b.last) {
		while (b.gen == seen)
			CHECK_EQ_INT(nemo_cond_wait(&b.c, &b.m), 0);
		CHECK(b.gen > seen);
		seen = b.gen;
		atomic_fetch_add_explicit(&progress, 1, memory_order_relaxed);
		if (rnd(&s) % 4 == 0) {        /* sometimes late for the next round */
			pthread_mutex_unlock(&b.m);
			jitter(&s);
			pthread_mutex_lock(&b.m);
		}
	}
	b.reached++;
	pthread_mutex_unlock(&b.m);
	return NULL;
}

/* Kick mode alternates between the flat broadcast and a tree. */
static int f_kick(int i)
{
	return i % 2 ? 2 : 0;
}

static void run_broadcast(const nemo_wait_policy *pol, int fanout, bool kick, long rounds)
{
	memset(&b, 0, sizeof b);
	pthread_mutex_init(&b.m, NULL);
	nemo_cond_init(&b.c, NULL);
	nemo_cond_set_policy(&b.c, pol);
	nemo_cond_set_fanout(&b.c, fanout);
	nemo_cond_set_kick(&b.c, kick);
	b.last = rounds;
	pthread_t th[BW];
	for (int i = 0; i < BW; i++)
		pthread_create(&th[i], NULL, b_waiter, (void *)(intptr_t)i);
	uint64_t s = 3;
	for (long r = 1; r <= rounds; r++) {
		pthread_mutex_lock(&b.m);
		b.gen = r;
		nemo_cond_broadcast(&b.c);
		pthread_mutex_unlock(&b.m);
		jitter(&s);
		if (r % 64 == 0)
			usleep(50);                 /* let sleepers fall asleep */
	}
	for (int i = 0; i < BW; i++)
		pthread_join(th[i], NULL);
	CHECK_EQ_INT(b.reached, BW);
	CHECK_EQ_INT(nemo_cond_destroy(&b.c), 0);
}

/* ------------------------------------------------------------------ main */

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(void)
{
	const char *sc = getenv("NEMO_STRESS_SCALE");
	if (sc && atof(sc) > 0)
		scale = atof(sc);
	nemo_clock_init();
	pthread_t wd;
	pthread_create(&wd, NULL, watchdog, NULL);
	struct {
		const char *name;
		nemo_wait_policy pol;
		double weight;          /* block handoffs cost ~10 us: fewer */
	} pols[] = {
		{ "spin", { NEMO_WAIT_SPIN, 0 }, 0.5 },
		{ "block", { NEMO_WAIT_BLOCK, 0 }, 0.5 },
		{ "hybrid:2000", { NEMO_WAIT_HYBRID, 2000 }, 1.0 },
		{ "adaptive", { NEMO_WAIT_ADAPTIVE, 0 }, 1.0 },
	};
	long total = 0;
	for (int i = 0; i < 4; i++) {
		double t0 = now_s();
		nemo_waiter_counters c0, c1;
		nemo_waiter_get_counters(&c0);
		long items = scaled((long)(1200000 * pols[i].weight), 300);
		current = "queue";
		run_queue(&pols[i].pol, items);
		long tokens = scaled((long)(2400000 * pols[i].weight), 600);
		current = "doorbell";
		run_doorbell(&pols[i].pol, tokens);
		long rounds = scaled((long)(40000 * pols[i].weight), 40);
		current = "broadcast";
		int fans[] = { 0, 1, 2, 16 };              /* 0: flat, the default */
		for (int f = 0; f < 4; f++)
			run_broadcast(&pols[i].pol, fans[f], false, rounds / 4);
		if (pols[i].pol.kind != NEMO_WAIT_SPIN)   /* kick mode: RT priority, no spinning */
			run_broadcast(&pols[i].pol, f_kick(i), true, rounds / 4);
		long events = 3 * items + tokens + rounds * BW * 2;
		total += events;
		nemo_waiter_get_counters(&c1);
		unsigned long long sleeps = c1.sleeps - c0.sleeps, issued = c1.kicks_issued - c0.kicks_issued;
		printf("stress %-12s ~%ld events in %.2f s: %llu waits, %llu sleeps, %llu kicks issued, %llu avoided\n",
		       pols[i].name, events, now_s() - t0, (unsigned long long)(c1.waits - c0.waits), sleeps,
		       issued, (unsigned long long)(c1.kicks_avoided - c0.kicks_avoided));
		/* The wake-up paths were really exercised: threads slept and were
		 * woken by FUTEX_WAKE, not only by polling. */
		if (pols[i].pol.kind == NEMO_WAIT_BLOCK) {
			CHECK(sleeps > 1000);
			CHECK(issued > 1000);
		}
		fflush(stdout);
	}
	atomic_store(&finished, true);
	pthread_join(wd, NULL);
	printf("stress: ~%ld events in all\n", total);
	return check_exit("stress_events");
}
