/*
 * preload_pool.c - an ordinary C thread pool (no nemo in it), run by ctest
 * plain (glibc: the reference) and under LD_PRELOAD=libnemo-preload.so
 * with the default policy and others.  It is the shape of most C thread
 * pools: more workers than CPUs, one bounded task queue under one mutex,
 * two condvars (not-empty for the workers, not-full for the producers),
 * and a broadcast to shut down.  Exit 0 only if every task's result was
 * recorded exactly once and is right.
 *
 *  1. fixed pool: FIXED_WORKERS workers, PRODUCERS producers submitting
 *     FIXED_TASKS tasks in all; workers wait with pthread_cond_wait; the
 *     shutdown is a flag and a pthread_cond_broadcast, after which the
 *     workers drain the queue and leave.
 *  2. resized pool: the same queue, while two producers keep it busy a
 *     resizer thread moves the pool through RESIZE_STEPS sizes from 1 to
 *     16 workers: growing starts threads, shrinking lowers the target and
 *     broadcasts, and the surplus workers leave on their own (and are
 *     joined).  The producers are let through in batches of RESIZE_EVERY
 *     tasks (a gate, a fourth condvar), and each resize comes halfway
 *     through a batch, so every resize finds the pool busy however the
 *     threads are scheduled.  These workers wait with
 *     pthread_cond_timedwait (a 1 ms idle tick, as pools that retire idle
 *     workers do), so timeouts race signals; the resizer waits for
 *     progress on a third condvar.
 *
 * A lost wake-up would hang: a watchdog thread (nanosleep, no condvar)
 * prints where the pool stands and ends the run with status 3 after
 * WATCHDOG_S, before ctest's own limit.  Nothing here asserts a time.
 *
 *   preload_pool [expect-interposed | expect-glibc]
 * expect-interposed: the pthread_cond_* calls must go to libnemo-preload;
 * expect-glibc: they must not.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define QUEUE_CAP 32
#define FIXED_WORKERS 12
#define PRODUCERS 4
#define FIXED_TASKS 32000
#define RESIZE_PRODUCERS 2
#define RESIZE_TASKS ((RESIZE_STEPS + 2) * RESIZE_EVERY)
#define RESIZE_STEPS 12
#define RESIZE_EVERY 1500         /* tasks let through per resize */
#define MAX_SLOTS 64
#define WATCHDOG_S 240

static int failures;
#define EXPECT(c)                                                                 \
	do {                                                                      \
		if (!(c)) {                                                       \
			failures++;                                               \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c);  \
		}                                                                 \
	} while (0)

/* ------------------------------------------------------------ the pool */

enum { SLOT_FREE, SLOT_RUNNING, SLOT_EXITED };

struct pool {
	pthread_mutex_t mu;
	pthread_cond_t not_empty, not_full, progress;
	pthread_cond_t gate;          /* resized pool: producers wait for `allowed` */
	long next, allowed;           /* resized pool: next task id, ids let through */
	uint32_t q[QUEUE_CAP];
	unsigned head, count;
	bool shutdown;
	bool timed;                   /* workers wait with a 1 ms timeout */
	int target, live;             /* workers wanted, workers running */
	long done, ntasks;
	long timeouts;                /* timed waits that timed out */
	long started, left_on_shrink;
	struct {
		pthread_t t;
		int state;
	} slot[MAX_SLOTS];
	/* results: written by the one worker that took the task */
	uint64_t *result;
	atomic_int *seen;
};

static struct pool *watched;      /* for the watchdog's report */
static atomic_bool finished;

static uint64_t work(uint32_t id)
{
	uint64_t x = id * 0x9E3779B97F4A7C15ull + 1;
	for (int i = 0; i < 48; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

static void deadline_in(struct timespec *ts, long ns)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_nsec += ns;
	while (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static void submit(struct pool *p, uint32_t id)
{
	pthread_mutex_lock(&p->mu);
	while (p->count == QUEUE_CAP)
		pthread_cond_wait(&p->not_full, &p->mu);
	p->q[(p->head + p->count) % QUEUE_CAP] = id;
	p->count++;
	pthread_cond_signal(&p->not_empty);
	pthread_mutex_unlock(&p->mu);
}

struct worker_arg {
	struct pool *p;
	int slot;
};

static void *worker(void *arg)
{
	struct worker_arg *wa = arg;
	struct pool *p = wa->p;
	int slot = wa->slot;
	free(wa);
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (p->count == 0 && !p->shutdown && p->live <= p->target) {
			if (p->timed) {
				struct timespec ts;
				deadline_in(&ts, 1000000);
				int rc = pthread_cond_timedwait(&p->not_empty, &p->mu, &ts);
				if (rc == ETIMEDOUT)
					p->timeouts++;
				else if (rc != 0) {
					fprintf(stderr, "pthread_cond_timedwait: %s\n", strerror(rc));
					failures++;
				}
			} else {
				pthread_cond_wait(&p->not_empty, &p->mu);
			}
		}
		if (p->live > p->target && !p->shutdown) {
			p->left_on_shrink++;
			break;                        /* the pool shrank: leave */
		}
		if (p->count == 0)
			break;                        /* shut down and drained */
		uint32_t id = p->q[p->head];
		p->head = (p->head + 1) % QUEUE_CAP;
		p->count--;
		pthread_cond_signal(&p->not_full);
		pthread_mutex_unlock(&p->mu);

		p->result[id] = work(id);
		atomic_fetch_add_explicit(&p->seen[id], 1, memory_order_relaxed);

		pthread_mutex_lock(&p->mu);
		p->done++;
		if (p->done % 100 == 0 || p->done == p->ntasks)
			pthread_cond_broadcast(&p->progress);
	}
	p->live--;
	p->slot[slot].state = SLOT_EXITED;
	pthread_cond_broadcast(&p->progress);
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* Start one worker; the caller holds p->mu. */
static void start_worker(struct pool *p)
{
	int s = 0;
	while (s < MAX_SLOTS && p->slot[s].state != SLOT_FREE)
		s++;
	if (s == MAX_SLOTS) {
		fprintf(stderr, "preload_pool: out of worker slots\n");
		exit(1);
	}
	struct worker_arg *wa = malloc(sizeof *wa);
	if (!wa)
		exit(1);
	wa->p = p;
	wa->slot = s;
	p->slot[s].state = SLOT_RUNNING;
	p->live++;
	p->started++;
	int err = pthread_create(&p->slot[s].t, NULL, worker, wa);
	if (err) {
		fprintf(stderr, "preload_pool: pthread_create: %s\n", strerror(err));
		exit(1);
	}
}

/* Join the workers that have left; the caller holds p->mu (dropped while
 * joining: a leaving worker takes it last). */
static void join_exited(struct pool *p)
{
	for (int s = 0; s < MAX_SLOTS; s++) {
		if (p->slot[s].state != SLOT_EXITED)
			continue;
		pthread_t t = p->slot[s].t;
		pthread_mutex_unlock(&p->mu);
		pthread_join(t, NULL);
		pthread_mutex_lock(&p->mu);
		p->slot[s].state = SLOT_FREE;
	}
}

static void pool_init(struct pool *p, long ntasks, bool timed)
{
	memset(p, 0, sizeof *p);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->not_empty, NULL);
	pthread_cond_init(&p->not_full, NULL);
	pthread_cond_init(&p->progress, NULL);
	pthread_cond_init(&p->gate, NULL);
	p->ntasks = ntasks;
	p->allowed = ntasks;
	p->timed = timed;
	p->result = calloc((size_t)ntasks, sizeof *p->result);
	p->seen = calloc((size_t)ntasks, sizeof *p->seen);
	if (!p->result || !p->seen)
		exit(1);
	watched = p;
}

/* Shut down: flag and broadcast; the workers drain the queue and leave. */
static void pool_shutdown(struct pool *p)
{
	pthread_mutex_lock(&p->mu);
	p->shutdown = true;
	pthread_cond_broadcast(&p->not_empty);
	while (p->live > 0)
		pthread_cond_wait(&p->progress, &p->mu);
	join_exited(p);
	pthread_mutex_unlock(&p->mu);
}

/* Every task exactly once, with the right result. */
static void pool_check(struct pool *p, const char *name)
{
	long missing = 0, twice = 0, wrong = 0;
	for (long i = 0; i < p->ntasks; i++) {
		int n = atomic_load(&p->seen[i]);
		missing += n == 0;
		twice += n > 1;
		wrong += n == 1 && p->result[i] != work((uint32_t)i);
	}
	EXPECT(missing == 0);
	EXPECT(twice == 0);
	EXPECT(wrong == 0);
	EXPECT(p->done == p->ntasks);
	EXPECT(p->count == 0);
	EXPECT(p->live == 0);
	if (missing || twice || wrong || p->done != p->ntasks)
		fprintf(stderr, "%s: %ld tasks: %ld missing, %ld done twice, %ld wrong, %ld counted done\n",
			name, p->ntasks, missing, twice, wrong, p->done);
	pthread_cond_destroy(&p->not_empty);
	pthread_cond_destroy(&p->not_full);
	pthread_cond_destroy(&p->progress);
	pthread_cond_destroy(&p->gate);
	pthread_mutex_destroy(&p->mu);
	free(p->result);
	free(p->seen);
}

struct producer_arg {
	struct pool *p;
	uint32_t first, n;
};

static void *producer(void *arg)
{
	struct producer_arg *a = arg;
	for (uint32_t i = 0; i < a->n; i++)
		submit(a->p, a->first + i);
	return NULL;
}

/* The resized pool's producers take the next id when the gate lets it
 * through, and queue it in the same critical section. */
static void *gated_producer(void *arg)
{
	struct pool *p = arg;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (p->next >= p->allowed && p->next < p->ntasks)
			pthread_cond_wait(&p->gate, &p->mu);
		if (p->next >= p->ntasks)
			break;
		uint32_t id = (uint32_t)p->next++;
		while (p->count == QUEUE_CAP)
			pthread_cond_wait(&p->not_full, &p->mu);
		p->q[(p->head + p->count) % QUEUE_CAP] = id;
		p->count++;
		pthread_cond_signal(&p->not_empty);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

static void start_producers(struct pool *p, int n, pthread_t *t, struct producer_arg *a)
{
	uint32_t per = (uint32_t)(p->ntasks / n);
	for (int i = 0; i < n; i++) {
		a[i] = (struct producer_arg){ p, per * (uint32_t)i,
					      i == n - 1 ? (uint32_t)p->ntasks - per * (uint32_t)i : per };
		if (pthread_create(&t[i], NULL, producer, &a[i]) != 0)
			exit(1);
	}
}

/* ------------------------------------------------------------ 1: fixed */

static void fixed_pool(void)
{
	static struct pool p;
	pool_init(&p, FIXED_TASKS, false);
	pthread_mutex_lock(&p.mu);
	p.target = FIXED_WORKERS;
	for (int i = 0; i < FIXED_WORKERS; i++)
		start_worker(&p);
	pthread_mutex_unlock(&p.mu);
	pthread_t prod[PRODUCERS];
	struct producer_arg pa[PRODUCERS];
	start_producers(&p, PRODUCERS, prod, pa);
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(prod[i], NULL);
	pool_shutdown(&p);
	EXPECT(p.started == FIXED_WORKERS);
	EXPECT(p.left_on_shrink == 0);
	pool_check(&p, "fixed pool");
	printf("fixed pool: %d workers, %d producers, %d tasks\n", FIXED_WORKERS, PRODUCERS, FIXED_TASKS);
}

/* ---------------------------------------------------------- 2: resized */

static const int sizes[RESIZE_STEPS] = { 16, 2, 10, 1, 14, 4, 8, 3, 12, 1, 16, 6 };

static void resized_pool(void)
{
	static struct pool p;
	pool_init(&p, RESIZE_TASKS, true);
	pthread_mutex_lock(&p.mu);
	p.allowed = RESIZE_EVERY;
	p.target = 4;
	for (int i = 0; i < 4; i++)
		start_worker(&p);
	pthread_mutex_unlock(&p.mu);
	pthread_t prod[RESIZE_PRODUCERS];
	for (int i = 0; i < RESIZE_PRODUCERS; i++)
		if (pthread_create(&prod[i], NULL, gated_producer, &p) != 0)
			exit(1);

	int steps = 0;
	pthread_mutex_lock(&p.mu);
	for (int s = 0; s < RESIZE_STEPS; s++) {
		/* Let the next batch through; resize halfway through this one,
		 * with the rest of it queued or on its way. */
		p.allowed += RESIZE_EVERY;
		pthread_cond_broadcast(&p.gate);
		long mark = (long)(s + 1) * RESIZE_EVERY - RESIZE_EVERY / 2;
		while (p.done < mark)
			pthread_cond_wait(&p.progress, &p.mu);
		p.target = sizes[s];
		while (p.live < p.target)
			start_worker(&p);
		pthread_cond_broadcast(&p.not_empty);   /* the surplus leaves */
		join_exited(&p);
		steps++;
	}
	p.allowed = p.ntasks;
	pthread_cond_broadcast(&p.gate);
	pthread_mutex_unlock(&p.mu);
	for (int i = 0; i < RESIZE_PRODUCERS; i++)
		pthread_join(prod[i], NULL);
	pool_shutdown(&p);
	/* The pool was really resized while busy: workers started after the
	 * first four, and workers left because it shrank. */
	EXPECT(steps == RESIZE_STEPS);
	EXPECT(p.started > 4);
	EXPECT(p.left_on_shrink > 0);
	pool_check(&p, "resized pool");
	printf("resized pool: %d resizes (1..16 workers), %ld workers started, %ld left on a shrink, "
	       "%d tasks, %ld idle timeouts\n",
	       steps, p.started, p.left_on_shrink, RESIZE_TASKS, p.timeouts);
}

/* ----------------------------------------------------------- watchdog */

static void *watchdog(void *arg)
{
	(void)arg;
	struct timespec step = { 0, 100 * 1000 * 1000 };
	for (int i = 0; i < WATCHDOG_S * 10; i++) {
		if (atomic_load(&finished))
			return NULL;
		nanosleep(&step, NULL);
	}
	struct pool *p = watched;
	/* Unlocked reads: the pool is stuck, and this is only a report. */
	fprintf(stderr, "preload_pool: STUCK after %d s (a lost wake-up?): %s pool, %ld of %ld tasks done, "
		"%u queued, %d workers live, target %d, shutdown %d\n", WATCHDOG_S,
		p && p->timed ? "resized" : "fixed", p ? p->done : 0, p ? p->ntasks : 0,
		p ? p->count : 0, p ? p->live : 0, p ? p->target : 0, p ? (int)p->shutdown : 0);
	_exit(3);
}

int main(int argc, char **argv)
{
	bool expect_nemo = argc > 1 && !strcmp(argv[1], "expect-interposed");
	bool expect_glibc = argc > 1 && !strcmp(argv[1], "expect-glibc");
	if (argc > 2 || (argc == 2 && !expect_nemo && !expect_glibc)) {
		fprintf(stderr, "usage: preload_pool [expect-interposed | expect-glibc]\n");
		return 2;
	}
	pthread_t wd;
	if (pthread_create(&wd, NULL, watchdog, NULL) != 0)
		return 1;
	fixed_pool();
	resized_pool();
	atomic_store(&finished, true);
	pthread_join(wd, NULL);

	Dl_info info;
	void *sym = dlsym(RTLD_DEFAULT, "pthread_cond_wait");
	bool interposed = sym && dladdr(sym, &info) && info.dli_fname &&
			  strstr(info.dli_fname, "nemo-preload");
	if (expect_nemo)
		EXPECT(interposed);
	if (expect_glibc)
		EXPECT(!interposed);
	const char *pol = getenv("NEMO_WAIT");
	printf("preload_pool: %s: interposed %s, NEMO_WAIT=%s\n", failures ? "FAILED" : "ok",
	       interposed ? "yes" : "no", pol ? pol : "(unset)");
	return failures ? 1 : 0;
}
