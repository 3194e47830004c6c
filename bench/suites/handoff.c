/*
 * handoff.c - nemo-handoff: an ordinary pthread program.  Two threads,
 * pinned to two CPUs, hand a token back and forth through one mutex and
 * one condition variable (pthread_cond_wait / pthread_cond_signal).
 *
 * It knows nothing of nemo: run it as is for glibc's condvar, and with
 *   LD_PRELOAD=build/lib/libnemo-preload.so NEMO_WAIT=hybrid
 * for nemo_cond.  It prints hand-offs per second and whether
 * pthread_cond_signal was interposed (found via dladdr).
 *
 *   nemo-handoff [--seconds S] [--cpus A,B] [--json] [--expect-interposed]
 *
 * It runs --seconds, and on past them until each thread had its turn at
 * least twice (on a loaded machine they may not have run at all yet; the
 * second turn is the one a wake-up must bring).
 *
 * Exit status: 0 if the token alternated correctly (and, with
 * --expect-interposed, the calls went to libnemo-preload.so); 1 if not;
 * 2 for bad usage.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long turn;                 /* even: thread 0's turn, odd: thread 1's */
static bool stop;
static long count[2];

struct arg {
	int id, cpu;
};

static void *player(void *p)
{
	struct arg *a = p;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(a->cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof set, &set);
	pthread_mutex_lock(&mu);
	for (;;) {
		while ((turn & 1) != a->id && !stop)
			pthread_cond_wait(&cv, &mu);
		if (stop)
			break;
		turn++;
		count[a->id]++;
		pthread_cond_signal(&cv);
	}
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
	return NULL;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double seconds = 1.0;
	int cpus[2] = { 0, 1 };
	bool json = false, expect = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
			seconds = atof(argv[++i]);
		} else if (!strcmp(argv[i], "--cpus") && i + 1 < argc) {
			if (sscanf(argv[++i], "%d,%d", &cpus[0], &cpus[1]) != 2) {
				fprintf(stderr, "nemo-handoff: --cpus wants A,B\n");
				return 2;
			}
		} else if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--expect-interposed")) {
			expect = true;
		} else {
			fprintf(stderr, "usage: nemo-handoff [--seconds S] [--cpus A,B] [--json] [--expect-interposed]\n");
			return 2;
		}
	}
	if (!(seconds > 0) || seconds > 3600) {
		fprintf(stderr, "nemo-handoff: --seconds must be in (0, 3600]\n");
		return 2;
	}
	pthread_t th[2];
	struct arg args[2] = { { 0, cpus[0] }, { 1, cpus[1] } };
	double t0 = now();
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, player, &args[i]);
	struct timespec d = { (time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9) };
	nanosleep(&d, NULL);
	/* On a loaded machine the two threads may not have run at all yet: a
	 * short run is not a failed one.  So the run goes on (1 ms at a time)
	 * until each thread had its turn twice: a thread's first turn may come
	 * without a wake-up (it started after the other's move), its second
	 * only after the other's pthread_cond_signal woke it from
	 * pthread_cond_wait.  If the condvar lost wake-ups, that never comes,
	 * and the caller's time limit ends the run. */
	pthread_mutex_lock(&mu);
	while (count[0] < 2 || count[1] < 2) {
		pthread_mutex_unlock(&mu);
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
		pthread_mutex_lock(&mu);
	}
	stop = true;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	double el = now() - t0;
	long total = count[0] + count[1];
	Dl_info info;
	const char *lib = "?";
	void *sym = dlsym(RTLD_DEFAULT, "pthread_cond_signal");
	if (sym && dladdr(sym, &info) && info.dli_fname)
		lib = strrchr(info.dli_fname, '/') ? strrchr(info.dli_fname, '/') + 1 : info.dli_fname;
	bool interposed = strstr(lib, "nemo-preload") != NULL;
	const char *pol = getenv("NEMO_WAIT");
	if (json)
		printf("{\"handoffs\":%ld,\"seconds\":%.3f,\"per_s\":%.0f,\"interposed\":%s,\"library\":\"%s\",\"nemo_wait\":\"%s\"}\n",
		       total, el, total / el, interposed ? "true" : "false", lib, pol ? pol : "");
	else
		printf("handoffs %ld in %.2f s: %.0f per second; pthread_cond_signal from %s (interposed: %s)\n",
		       total, el, total / el, lib, interposed ? "yes" : "no");
	/* The token alternates: the two counts differ by at most one. */
	if (expect && !interposed)
		return 1;
	return labs(count[0] - count[1]) <= 1 && total > 0 ? 0 : 1;
}
