/*
 * preload_prog.c - an ordinary pthread program (no nemo in it) run under
 * LD_PRELOAD=libnemo-preload.so by ctest.  It exercises what real
 * programs do with condition variables and exits 0 only if every case
 * behaved as POSIX says:
 *   - PTHREAD_COND_INITIALIZER, signal and broadcast to several waiters;
 *   - the clock attribute (a monotonic timed wait);
 *   - a process-shared condvar in shared memory, used across fork()
 *     (handed to glibc by the interposer);
 *   - fork() of a process whose condvar has a waiter;
 *   - cancellation of a waiter (mutex re-acquired in cleanup);
 *   - timed-wait errors (EINVAL, ETIMEDOUT).
 * argv[1] == "expect-interposed" also checks that the calls really went
 * to libnemo-preload.so.
 */
#define _GNU_SOURCE
#include "check.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failures;   /* (check.h supplies only in_ms here) */
#define EXPECT(c) do { if (!(c)) { failures++; fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); } } while (0)

/* ---- static initializer, signal, broadcast ---- */
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int gen, woke, items;

static void *gen_waiter(void *p)
{
	(void)p;
	pthread_mutex_lock(&m);
	while (gen == 0)     /* not "changes from what I saw": a late thread would hang */
		pthread_cond_wait(&c, &m);
	woke++;
	pthread_mutex_unlock(&m);
	return NULL;
}

static void *item_waiter(void *p)
{
	(void)p;
	pthread_mutex_lock(&m);
	while (items == 0)
		pthread_cond_wait(&c, &m);
	items--;
	woke++;
	pthread_mutex_unlock(&m);
	return NULL;
}

static void basic(void)
{
	pthread_t th[6];
	for (int i = 0; i < 6; i++)
		pthread_create(&th[i], NULL, gen_waiter, NULL);
	usleep(20000);
	pthread_mutex_lock(&m);
	gen++;
	pthread_cond_broadcast(&c);
	pthread_mutex_unlock(&m);
	for (int i = 0; i < 6; i++)
		pthread_join(th[i], NULL);
	EXPECT(woke == 6);
	woke = 0;
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, item_waiter, NULL);
	for (int i = 0; i < 4; i++) {
		pthread_mutex_lock(&m);
		items++;
		pthread_cond_signal(&c);
		pthread_mutex_unlock(&m);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	EXPECT(woke == 4 && items == 0);
}

/* ---- clock attribute and timed-wait errors ---- */
static void clocks(void)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_t mc;
	EXPECT(pthread_cond_init(&mc, &a) == 0);
	pthread_mutex_lock(&m);
	struct timespec d = in_ms(CLOCK_MONOTONIC, 5);
	EXPECT(pthread_cond_timedwait(&mc, &m, &d) == ETIMEDOUT);
	struct timespec bad = { 0, 2000000000L };
	EXPECT(pthread_cond_timedwait(&mc, &m, &bad) == EINVAL);
	d = in_ms(CLOCK_REALTIME, 5);
	EXPECT(pthread_cond_clockwait(&mc, &m, CLOCK_REALTIME, &d) == ETIMEDOUT);
	pthread_mutex_unlock(&m);
	EXPECT(pthread_cond_destroy(&mc) == 0);
	pthread_condattr_destroy(&a);
}

/* ---- process-shared condvar across fork ---- */
struct shm {
	pthread_mutex_t m;
	pthread_cond_t c;
	int ready, go;
};

static void pshared(void)
{
	struct shm *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	EXPECT(s != MAP_FAILED);
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(&s->m, &ma);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
	EXPECT(pthread_cond_init(&s->c, &ca) == 0);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		pthread_mutex_lock(&s->m);
		s->ready = 1;
		pthread_cond_broadcast(&s->c);
		while (!s->go)
			pthread_cond_wait(&s->c, &s->m);
		pthread_mutex_unlock(&s->m);
		_exit(0);
	}
	pthread_mutex_lock(&s->m);
	while (!s->ready)
		pthread_cond_wait(&s->c, &s->m);
	s->go = 1;
	pthread_cond_broadcast(&s->c);
	pthread_mutex_unlock(&s->m);
	int st = -1;
	waitpid(pid, &st, 0);
	EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	EXPECT(pthread_cond_destroy(&s->c) == 0);
	munmap(s, sizeof *s);
}

/* ---- fork while a thread waits ---- */
static void forked(void)
{
	gen = 0;
	woke = 0;
	pthread_t th;
	pthread_create(&th, NULL, gen_waiter, NULL);
	usleep(20000);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		pthread_t t2;
		pthread_create(&t2, NULL, gen_waiter, NULL);
		usleep(20000);
		pthread_mutex_lock(&m);
		gen++;
		pthread_cond_signal(&c);
		pthread_mutex_unlock(&m);
		struct timespec d = in_ms(CLOCK_REALTIME, 5000);
		_exit(pthread_timedjoin_np(t2, NULL, &d) == 0 && woke == 1 ? 0 : 1);
	}
	int st = -1;
	waitpid(pid, &st, 0);
	EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	pthread_mutex_lock(&m);
	gen++;
	pthread_cond_signal(&c);
	pthread_mutex_unlock(&m);
	pthread_join(th, NULL);
	EXPECT(woke == 1);
}

/* ---- cancellation ---- */
static pthread_mutex_t em;
static pthread_cond_t ec = PTHREAD_COND_INITIALIZER;
static int owned_in_cleanup = -1;

static void cleanup(void *p)
{
	(void)p;
	owned_in_cleanup = pthread_mutex_unlock(&em) == 0;
}

static void *cancelled(void *p)
{
	(void)p;
	pthread_mutex_lock(&em);
	pthread_cleanup_push(cleanup, NULL);
	for (;;)
		pthread_cond_wait(&ec, &em);
	pthread_cleanup_pop(1);
	return NULL;
}

static void cancellation(void)
{
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&em, &ma);
	pthread_t th;
	pthread_create(&th, NULL, cancelled, NULL);
	usleep(20000);
	pthread_cancel(th);
	void *ret = NULL;
	pthread_join(th, &ret);
	EXPECT(ret == PTHREAD_CANCELED);
	EXPECT(owned_in_cleanup == 1);
	EXPECT(pthread_cond_destroy(&ec) == 0);
}

int main(int argc, char **argv)
{
	basic();
	clocks();
	pshared();
	forked();
	cancellation();
	Dl_info info;
	void *sym = dlsym(RTLD_DEFAULT, "pthread_cond_wait");
	bool interposed = sym && dladdr(sym, &info) && info.dli_fname &&
			  strstr(info.dli_fname, "nemo-preload");
	if (argc > 1 && !strcmp(argv[1], "expect-interposed"))
		EXPECT(interposed);
	printf("preload_prog: interposed %s, %d failures\n", interposed ? "yes" : "no", failures);
	return failures ? 1 : 0;
}
