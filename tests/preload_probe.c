/*
 * preload_probe.c - an ordinary pthread program (no nemo in it) that
 * probes the corners where nemo's interposer once differed from glibc.
 * ctest runs it plain (glibc: the reference) and under
 * LD_PRELOAD=libnemo-preload.so with the default policy and others; every
 * run must pass the same checks:
 *   - a deadline centuries away (C++'s time_point::max(), {LONG_MAX, 0})
 *     waits until signalled: one wait, not a busy loop of instant
 *     timeouts (C++'s cv.wait_until(lk, max, pred) spun at 100% CPU);
 *   - a deadline with a negative tv_sec is ETIMEDOUT (glibc), and the
 *     mutex is held again;
 *   - errno is not touched by waits, timeouts, signal, broadcast, destroy;
 *   - destroy right after broadcast, then free (POSIX's own example, and
 *     ~condition_variable): no write into the freed condvar afterwards,
 *     with timed waiters racing the broadcast (a changed byte in a kept
 *     copy is a late write);
 *   - threads that time out while others are signalled lose no signal.
 * argv[1] == "expect-interposed" also checks that the calls really went
 * to libnemo-preload.so.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int failures;
#define EXPECT(c) do { if (!(c)) { failures++; fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); } } while (0)

/* --------------------------------------------------------- far deadlines */

struct far {
	pthread_mutex_t m;
	pthread_cond_t c;
	int flag, loops, bad;
	clockid_t clock;
	struct timespec deadline;
	bool use_clockwait;
};

static void *far_waiter(void *arg)
{
	struct far *f = arg;
	pthread_mutex_lock(&f->m);
	while (!f->flag && f->loops < 100000) {
		f->loops++;
		int rc = f->use_clockwait ? pthread_cond_clockwait(&f->c, &f->m, f->clock, &f->deadline)
					  : pthread_cond_timedwait(&f->c, &f->m, &f->deadline);
		if (rc != 0)
			f->bad++;
	}
	pthread_mutex_unlock(&f->m);
	return NULL;
}

static void far_case(bool clockwait, clockid_t clock, struct timespec deadline)
{
	struct far f = { .m = PTHREAD_MUTEX_INITIALIZER, .c = PTHREAD_COND_INITIALIZER,
			 .clock = clock, .deadline = deadline, .use_clockwait = clockwait };
	pthread_t t;
	pthread_create(&t, NULL, far_waiter, &f);
	usleep(30000);
	pthread_mutex_lock(&f.m);
	f.flag = 1;
	pthread_cond_signal(&f.c);
	pthread_mutex_unlock(&f.m);
	pthread_join(t, NULL);
	EXPECT(f.loops <= 3);
	EXPECT(f.bad == 0);
	if (f.loops > 3 || f.bad)
		fprintf(stderr, "  far deadline {%lld, %ld} clock %d: %d waits, %d early returns\n",
			(long long)deadline.tv_sec, deadline.tv_nsec, (int)clock, f.loops, f.bad);
	pthread_cond_destroy(&f.c);
}

static void far_deadlines(void)
{
	struct timespec cxx_max = { (time_t)(INT64_MAX / 1000000000), (long)(INT64_MAX % 1000000000) };
	struct timespec long_max = { (time_t)LONG_MAX, 0 };
	far_case(true, CLOCK_MONOTONIC, cxx_max);
	far_case(true, CLOCK_REALTIME, cxx_max);
	far_case(false, CLOCK_REALTIME, long_max);
	far_case(false, CLOCK_REALTIME, cxx_max);
}

/* ------------------------------------------------------ negative, errno */

static void negative_and_errno(void)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t c = PTHREAD_COND_INITIALIZER;
	struct timespec neg = { -1, 0 };
	pthread_mutex_lock(&m);
	errno = 4711;
	EXPECT(pthread_cond_timedwait(&c, &m, &neg) == ETIMEDOUT);
	EXPECT(pthread_mutex_trylock(&m) == EBUSY);      /* held again */
	EXPECT(pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &neg) == ETIMEDOUT);
	struct timespec soon;
	clock_gettime(CLOCK_REALTIME, &soon);
	soon.tv_nsec += 2000000;
	if (soon.tv_nsec >= 1000000000L) {
		soon.tv_sec++;
		soon.tv_nsec -= 1000000000L;
	}
	EXPECT(pthread_cond_timedwait(&c, &m, &soon) == ETIMEDOUT);
	pthread_mutex_unlock(&m);
	pthread_cond_signal(&c);
	pthread_cond_broadcast(&c);
	pthread_cond_destroy(&c);
	EXPECT(errno == 4711);
}

/* --------------------------------------------- destroy after broadcast */

enum { K = 6 };

static struct {
	pthread_mutex_t m;
	pthread_cond_t *cur;
	int announced, released, entered, rounds;
} L = { .m = PTHREAD_MUTEX_INITIALIZER };

static void *lifetime_waiter(void *arg)
{
	int me = (int)(intptr_t)arg;
	for (int r = 1; r <= L.rounds; r++) {
		pthread_mutex_lock(&L.m);
		while (L.announced < r) {
			pthread_mutex_unlock(&L.m);
			sched_yield();
			pthread_mutex_lock(&L.m);
		}
		pthread_cond_t *c = L.cur;
		L.entered++;
		/* One deadline per round (see test_lifetime.c). */
		struct timespec d;
		clock_gettime(CLOCK_REALTIME, &d);
		d.tv_nsec += (long)((me * 37 + r * 11) % 150) * 1000;
		if (d.tv_nsec >= 1000000000L) {
			d.tv_sec++;
			d.tv_nsec -= 1000000000L;
		}
		bool timed = me & 1;
		while (L.released < r) {
			if (timed) {
				int rc = pthread_cond_timedwait(c, &L.m, &d);
				EXPECT(rc == 0 || rc == ETIMEDOUT);
				if (rc == ETIMEDOUT)
					timed = false;
			} else {
				EXPECT(pthread_cond_wait(c, &L.m) == 0);
			}
		}
		pthread_mutex_unlock(&L.m);
	}
	return NULL;
}

static void destroy_after_broadcast(void)
{
	L.rounds = 150;
	pthread_t t[K];
	for (int i = 0; i < K; i++)
		pthread_create(&t[i], NULL, lifetime_waiter, (void *)(intptr_t)i);
	pthread_cond_t *kept = NULL;
	unsigned char snap[sizeof(pthread_cond_t)];
	int changed = 0;
	for (int r = 1; r <= L.rounds; r++) {
		pthread_cond_t *c = malloc(sizeof *c);
		pthread_cond_init(c, NULL);
		pthread_mutex_lock(&L.m);
		L.cur = c;
		L.announced = r;
		while (L.entered < K * r) {
			pthread_mutex_unlock(&L.m);
			sched_yield();
			pthread_mutex_lock(&L.m);
		}
		L.released = r;
		pthread_cond_broadcast(c);
		pthread_mutex_unlock(&L.m);
		EXPECT(pthread_cond_destroy(c) == 0);
		if (kept) {
			if (memcmp(kept, snap, sizeof snap) != 0)
				changed++;
			free(kept);
		}
		kept = c;
		memcpy(snap, c, sizeof snap);
	}
	for (int i = 0; i < K; i++)
		pthread_join(t[i], NULL);
	if (memcmp(kept, snap, sizeof snap) != 0)
		changed++;
	free(kept);
	EXPECT(changed == 0);
	if (changed)
		fprintf(stderr, "  %d condvars written after destroy\n", changed);
}

int main(int argc, char **argv)
{
	far_deadlines();
	negative_and_errno();
	destroy_after_broadcast();
	Dl_info info;
	void *sym = dlsym(RTLD_DEFAULT, "pthread_cond_wait");
	bool interposed = sym && dladdr(sym, &info) && info.dli_fname &&
			  strstr(info.dli_fname, "nemo-preload");
	if (argc > 1 && !strcmp(argv[1], "expect-interposed"))
		EXPECT(interposed);
	printf("preload_probe: interposed %s, %d failures\n", interposed ? "yes" : "no", failures);
	return failures ? 1 : 0;
}
