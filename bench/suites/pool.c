/*
 * pool.c - nemo-pool: an ordinary thread pool, for the interposer (it
 * links no nemo at all).  One producer feeds W workers through a bounded
 * queue under one mutex and two condition variables: the workers wait on
 * not-empty, the producer on not-full (pthread_cond_wait, _signal), and a
 * flag and a pthread_cond_broadcast shut the pool down.  Each task is a
 * few hundred nanoseconds of arithmetic, so the rate is what the hand-offs
 * allow.  The threads are not pinned: there are more of them than CPUs,
 * as in most pools.
 *
 * Run it as is for glibc's condvar, and with
 *   LD_PRELOAD=build/lib/libnemo-preload.so
 * for nemo_cond.  It prints tasks per second and whether
 * pthread_cond_signal was interposed (found via dladdr).
 *
 *   nemo-pool [--seconds S] [--workers W] [--queue Q] [--json] [--expect-interposed]
 *
 * W defaults to twice the CPUs this process may use, Q to 64.  The rate
 * counts the tasks finished between two snapshots --seconds apart, taken
 * after a short warm-up (thread start-up is not counted).  At the end the
 * count, the sum and the sum of squares of the inputs the workers took
 * must equal those of the tasks submitted, or the run fails.
 *
 * Exit status: 0 if every task was done once with the right result (and,
 * with --expect-interposed, the calls went to libnemo-preload.so); 1 if
 * not; 2 for bad usage.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_WORKERS 1024
#define MAX_QUEUE 65536

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static uint64_t *queue;
static unsigned cap, head, count;
static bool shutdown_flag;
static atomic_bool stop;          /* the producer's: stop submitting */

/* Per worker, on its own cache line: tasks done (read by main while the
 * pool runs), the sums of the inputs it took and of their squares (the
 * check), and of its results (so that the work is not optimised away). */
struct worker {
	_Alignas(64) atomic_uint_fast64_t done;
	uint64_t sum, sq, out;
	pthread_t t;
};
static struct worker *workers;

static uint64_t submitted, submitted_sum, submitted_sq;

static uint64_t task(uint64_t x)
{
	for (int i = 0; i < 64; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	pthread_mutex_lock(&mu);
	for (;;) {
		while (count == 0 && !shutdown_flag)
			pthread_cond_wait(&not_empty, &mu);
		if (count == 0)
			break;                /* shut down, queue drained */
		uint64_t x = queue[head];
		head = (head + 1) % cap;
		count--;
		pthread_cond_signal(&not_full);
		pthread_mutex_unlock(&mu);
		w->sum += x;
		w->sq += x * x;
		w->out += task(x);
		atomic_fetch_add_explicit(&w->done, 1, memory_order_relaxed);
		pthread_mutex_lock(&mu);
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

static void *producer_main(void *arg)
{
	(void)arg;
	uint64_t x = 1;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		pthread_mutex_lock(&mu);
		while (count == cap)
			pthread_cond_wait(&not_full, &mu);
		queue[(head + count) % cap] = x;
		count++;
		pthread_cond_signal(&not_empty);
		pthread_mutex_unlock(&mu);
		submitted++;
		submitted_sum += x;
		submitted_sq += x * x;
		x++;
	}
	return NULL;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
	struct timespec d = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
	while (nanosleep(&d, &d) != 0)
		;
}

static uint64_t done_total(int n)
{
	uint64_t d = 0;
	for (int i = 0; i < n; i++)
		d += atomic_load_explicit(&workers[i].done, memory_order_relaxed);
	return d;
}

static long parse_pos(const char *opt, const char *s, long max)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (end == s || *end || v < 1 || v > max) {
		fprintf(stderr, "nemo-pool: %s must be an integer from 1 to %ld\n", opt, max);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	double seconds = 1.0;
	long nw = 0, q = 64;
	bool json = false, expect = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
			char *end;
			seconds = strtod(argv[++i], &end);
			if (*end || !(seconds > 0) || seconds > 3600) {
				fprintf(stderr, "nemo-pool: --seconds must be in (0, 3600]\n");
				return 2;
			}
		} else if (!strcmp(argv[i], "--workers") && i + 1 < argc) {
			nw = parse_pos("--workers", argv[++i], MAX_WORKERS);
		} else if (!strcmp(argv[i], "--queue") && i + 1 < argc) {
			q = parse_pos("--queue", argv[++i], MAX_QUEUE);
		} else if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--expect-interposed")) {
			expect = true;
		} else {
			fprintf(stderr, "usage: nemo-pool [--seconds S] [--workers W] [--queue Q] [--json] [--expect-interposed]\n");
			return 2;
		}
	}
	if (!nw) {
		cpu_set_t set;
		int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
		nw = 2 * (cpus > 0 ? cpus : 1);
		if (nw > MAX_WORKERS)
			nw = MAX_WORKERS;
	}
	int n = (int)nw;
	cap = (unsigned)q;
	queue = calloc(cap, sizeof *queue);
	workers = aligned_alloc(64, sizeof *workers * (size_t)n);
	if (!queue || !workers) {
		fprintf(stderr, "nemo-pool: out of memory\n");
		return 1;
	}
	memset(workers, 0, sizeof *workers * (size_t)n);
	for (int i = 0; i < n; i++)
		if (pthread_create(&workers[i].t, NULL, worker_main, &workers[i]) != 0) {
			fprintf(stderr, "nemo-pool: cannot start worker %d\n", i);
			return 1;
		}
	pthread_t prod;
	if (pthread_create(&prod, NULL, producer_main, NULL) != 0) {
		fprintf(stderr, "nemo-pool: cannot start the producer\n");
		return 1;
	}
	/* Warm-up: threads start, pages fault, the policy learns. */
	sleep_s(seconds / 10 < 0.1 ? seconds / 10 : 0.1);
	uint64_t d0 = done_total(n);
	double t0 = now();
	sleep_s(seconds);
	uint64_t d1 = done_total(n);
	double t1 = now();

	atomic_store(&stop, true);
	pthread_join(prod, NULL);
	pthread_mutex_lock(&mu);
	shutdown_flag = true;
	pthread_cond_broadcast(&not_empty);
	pthread_mutex_unlock(&mu);
	uint64_t done = 0, sum = 0, sq = 0, out = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(workers[i].t, NULL);
		done += atomic_load(&workers[i].done);
		sum += workers[i].sum;
		sq += workers[i].sq;
		out ^= workers[i].out;
	}
	/* Each task taken exactly once: the count, the sum and the sum of
	 * squares of the inputs all agree with what was submitted. */
	bool ok = done == submitted && sum == submitted_sum && sq == submitted_sq && count == 0;
	if (!ok)
		fprintf(stderr, "nemo-pool: %llu tasks submitted, %llu done; the sums %s (%llx)\n",
			(unsigned long long)submitted, (unsigned long long)done,
			sum == submitted_sum && sq == submitted_sq ? "agree" : "differ",
			(unsigned long long)out);

	double el = t1 - t0, rate = (double)(d1 - d0) / el;
	Dl_info info;
	const char *lib = "?";
	void *sym = dlsym(RTLD_DEFAULT, "pthread_cond_signal");
	if (sym && dladdr(sym, &info) && info.dli_fname)
		lib = strrchr(info.dli_fname, '/') ? strrchr(info.dli_fname, '/') + 1 : info.dli_fname;
	bool interposed = strstr(lib, "nemo-preload") != NULL;
	const char *pol = getenv("NEMO_WAIT");
	if (json)
		printf("{\"tasks\":%llu,\"seconds\":%.3f,\"per_s\":%.0f,\"workers\":%d,\"queue\":%u,"
		       "\"interposed\":%s,\"library\":\"%s\",\"nemo_wait\":\"%s\"}\n",
		       (unsigned long long)(d1 - d0), el, rate, n, cap, interposed ? "true" : "false", lib,
		       pol ? pol : "");
	else
		printf("tasks %llu in %.2f s: %.0f per second, %d workers, queue %u; "
		       "pthread_cond_signal from %s (interposed: %s)\n",
		       (unsigned long long)(d1 - d0), el, rate, n, cap, lib, interposed ? "yes" : "no");
	free(queue);
	free(workers);
	if (expect && !interposed)
		return 1;
	return ok ? 0 : 1;
}
