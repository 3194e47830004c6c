/*
 * test_errors.c - a failed call says why: nemo_last_error() names the
 * call, what was wrong and the code, per thread; a success leaves it.
 * Run again with NEMO_DEBUG=1 (ctest: errors.debug), where every such
 * failure is also one line on stderr.  Covers the messaging and
 * active-message layers, then the waiter layer, events, condition
 * variables and the platform calls; outcomes (ETIMEDOUT, EAGAIN) and
 * successes must leave the text as it was.
 */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/nemo.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static int says(const char *needle)
{
	const char *t = nemo_last_error();
	if (strstr(t, needle))
		return 1;
	fprintf(stderr, "nemo_last_error() is \"%s\", wanted it to contain \"%s\"\n", t, needle);
	return 0;
}

/* The text as it was before a call that must not change it. */
static char before[400];

static void remember(void)
{
	snprintf(before, sizeof before, "%s", nemo_last_error());
}

static int kept(void)
{
	if (strcmp(before, nemo_last_error()) == 0)
		return 1;
	fprintf(stderr, "nemo_last_error() changed from \"%s\" to \"%s\"\n", before, nemo_last_error());
	return 0;
}

static void nop(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	(void)ctx;
}

static void *other_thread(void *arg)
{
	(void)arg;
	/* Thread-local: this thread has failed nothing yet. */
	CHECK(strcmp(nemo_last_error(), "") == 0);
	CHECK_EQ_INT(nemo_am_send(1, 0, 0, 0), ENOTCONN);
	CHECK(says("nemo_am_sendv: the calling thread is not a place"));
	return NULL;
}

/* ------------------------------------------------------------ waiters */

static void waiter_texts(void)
{
	nemo_wait_policy p = { NEMO_WAIT_BLOCK, 0 };
	CHECK_EQ_INT(nemo_wait_policy_parse("spinn", &p), EINVAL);
	CHECK(says("nemo_wait_policy_parse: unknown policy 'spinn' (spin, block, hybrid"));
	CHECK(says("(EINVAL)"));
	CHECK_EQ_INT(p.kind, NEMO_WAIT_BLOCK);            /* out unchanged, as before */
	CHECK_EQ_INT(nemo_wait_policy_parse("hybrid:0", &p), EINVAL);
	CHECK(says("nemo_wait_policy_parse: a hybrid budget of 0 ns"));
	CHECK_EQ_INT(nemo_wait_policy_parse("hybrid:2000000000", &p), EINVAL);
	CHECK(says("hybrid budget 2000000000 ns is above 1 s"));
	CHECK_EQ_INT(nemo_wait_policy_parse("hybrid:99999999999999999999999", &p), EINVAL);
	CHECK(says("is above 1 s"));
	CHECK_EQ_INT(nemo_wait_policy_parse("hybrid:12us", &p), EINVAL);
	CHECK(says("hybrid budget '12us' is not a number of nanoseconds"));
	CHECK_EQ_INT(nemo_wait_policy_parse("hybrid:-5", &p), EINVAL);
	CHECK(says("hybrid budget '-5' is not a number"));
	CHECK_EQ_INT(nemo_wait_policy_parse(NULL, &p), EINVAL);
	CHECK(says("nemo_wait_policy_parse: text is NULL"));
	CHECK_EQ_INT(nemo_wait_policy_parse("spin", NULL), EINVAL);
	CHECK(says("nemo_wait_policy_parse: out is NULL"));
	remember();
	CHECK_EQ_INT(nemo_wait_policy_parse("hybrid:500", &p), 0);
	CHECK(kept());

	char buf[16];
	nemo_wait_policy bad = { (nemo_wait_kind)9, 0 };
	CHECK_EQ_INT(nemo_wait_policy_format(&bad, buf, sizeof buf), EINVAL);
	CHECK(says("nemo_wait_policy_format: policy kind 9 is not a nemo_wait_kind"));
	nemo_wait_policy ad = { NEMO_WAIT_ADAPTIVE, 0 };
	CHECK_EQ_INT(nemo_wait_policy_format(&ad, buf, 3), ERANGE);
	CHECK(says("nemo_wait_policy_format: buf of 3 bytes is too small: the policy takes 9 with its NUL (ERANGE)"));
	CHECK_EQ_INT(nemo_wait_policy_format(NULL, buf, sizeof buf), EINVAL);
	CHECK(says("nemo_wait_policy_format: p is NULL"));
	remember();
	CHECK_EQ_INT(nemo_wait_policy_format(&ad, buf, sizeof buf), 0);
	CHECK(kept());

	nemo_wait_policy r;
	CHECK_EQ_INT(nemo_wait_policy_resolve(&bad, &r), EINVAL);
	CHECK(says("nemo_wait_policy_resolve: policy kind 9"));
	CHECK_EQ_INT(nemo_wait_policy_resolve(NULL, NULL), EINVAL);
	CHECK(says("nemo_wait_policy_resolve: out is NULL"));
	nemo_wait_policy neg = { (nemo_wait_kind)-1, 0 };
	CHECK_EQ_INT(nemo_wait_set_thread_policy(&neg), EINVAL);
	CHECK(says("nemo_wait_set_thread_policy: policy kind -1 is not a nemo_wait_kind"));
	remember();
	CHECK_EQ_INT(nemo_wait_policy_resolve(NULL, &r), 0);
	CHECK_EQ_INT(nemo_wait_set_thread_policy(NULL), 0);
	CHECK(kept());

	CHECK_EQ_INT(nemo_wait_get_calibration(NULL), EINVAL);
	CHECK(says("nemo_wait_get_calibration: out is NULL"));
	double ns;
	CHECK_EQ_INT(nemo_wait_measure(5, -1, -1, &ns, NULL), EINVAL);
	CHECK(says("nemo_wait_measure: rounds 5: at least 10"));
	CHECK_EQ_INT(nemo_wait_measure(20, -1, -1, NULL, NULL), EINVAL);
	CHECK(says("nemo_wait_measure: wake_ns is NULL"));
	CHECK_EQ_INT(nemo_wait_measure(20, 0, 5000, &ns, NULL), EINVAL);
	CHECK(says("nemo_wait_measure: cpu_b 5000 is not a CPU"));

	CHECK_EQ_INT(nemo_wait_profile_write("/nonexistent-dir/p", -1, 0), EINVAL);
	CHECK(says("nemo_wait_profile_write: block_wake_ns -1 is not a latency"));
	CHECK_EQ_INT(nemo_wait_profile_write("/nonexistent-dir/p", 1000, -3), EINVAL);
	CHECK(says("block_cpu_ns -3 is not a CPU time"));
	CHECK_EQ_INT(nemo_wait_profile_write("/nonexistent-dir/p", 1000, 0), ENOENT);
	CHECK(says("nemo_wait_profile_write: cannot open '/nonexistent-dir/p' for writing (ENOENT)"));

	/* The path's environment: set it, then take it away. */
	char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
	char *xdg = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
	char *prof = getenv("NEMO_PROFILE") ? strdup(getenv("NEMO_PROFILE")) : NULL;
	char path[64];
	setenv("NEMO_PROFILE", "/tmp/nemo-test-errors/profile", 1);
	CHECK_EQ_INT(nemo_wait_profile_path(path, 8), ERANGE);
	CHECK(says("nemo_wait_profile_path: buf of 8 bytes is too small: the path takes 30 with its NUL"));
	remember();
	CHECK_EQ_INT(nemo_wait_profile_path(path, sizeof path), 0);
	CHECK(kept());
	unsetenv("NEMO_PROFILE");
	unsetenv("XDG_CACHE_HOME");
	unsetenv("HOME");
	CHECK_EQ_INT(nemo_wait_profile_path(path, sizeof path), ENOENT);
	CHECK(says("nemo_wait_profile_path: none of NEMO_PROFILE, XDG_CACHE_HOME and HOME is set (ENOENT)"));
	CHECK_EQ_INT(nemo_wait_profile_write(NULL, 1000, 0), ENOENT);
	CHECK(says("nemo_wait_profile_write: path is NULL and there is no default location"));
	if (home)
		setenv("HOME", home, 1);
	if (xdg)
		setenv("XDG_CACHE_HOME", xdg, 1);
	if (prof)
		setenv("NEMO_PROFILE", prof, 1);
	free(home);
	free(xdg);
	free(prof);

	CHECK_EQ_INT(nemo_waiter_arm(NULL), EINVAL);
	CHECK(says("nemo_waiter_arm: w is NULL"));
	CHECK_EQ_INT(nemo_waiter_release(NULL), EINVAL);
	CHECK(says("nemo_waiter_release: w is NULL"));
	CHECK_EQ_INT(nemo_waiter_kick(NULL), EINVAL);
	CHECK(says("nemo_waiter_kick: w is NULL"));
	CHECK_EQ_INT(nemo_waiter_wait(NULL, NULL, CLOCK_MONOTONIC, NULL), EINVAL);
	CHECK(says("nemo_waiter_wait: w is NULL"));
	CHECK_EQ_INT(nemo_waiter_get_counters(NULL), EINVAL);
	CHECK(says("nemo_waiter_get_counters: out is NULL"));

	nemo_waiter *w = nemo_waiter_self();
	CHECK(w != NULL);
	CHECK_EQ_INT(nemo_waiter_arm(w), 0);
	CHECK_EQ_INT(nemo_waiter_wait(w, NULL, CLOCK_PROCESS_CPUTIME_ID, NULL), EINVAL);
	CHECK(says("nemo_waiter_wait: clock 2 is neither CLOCK_MONOTONIC nor CLOCK_REALTIME"));
	struct timespec odd = { 0, 1000000000L };
	CHECK_EQ_INT(nemo_waiter_wait(w, NULL, CLOCK_MONOTONIC, &odd), EINVAL);
	CHECK(says("nemo_waiter_wait: abstime's tv_nsec 1000000000 is outside 0..999999999"));
	/* Not released: the loop meets the bad kind (and returns at once). */
	CHECK_EQ_INT(nemo_waiter_wait(w, &bad, CLOCK_MONOTONIC, NULL), EINVAL);
	CHECK(says("nemo_waiter_wait: policy kind 9 is not a nemo_wait_kind"));
	/* A timeout is an outcome; a release a success: neither writes. */
	remember();
	struct timespec past = { 0, 0 };
	CHECK_EQ_INT(nemo_waiter_wait(w, NULL, CLOCK_MONOTONIC, &past), ETIMEDOUT);
	CHECK_EQ_INT(nemo_waiter_release(w), 0);
	CHECK_EQ_INT(nemo_waiter_wait(w, NULL, CLOCK_MONOTONIC, NULL), 0);
	CHECK_EQ_INT(nemo_waiter_kick(w), 0);
	nemo_waiter_counters cnt;
	CHECK_EQ_INT(nemo_waiter_get_counters(&cnt), 0);
	CHECK(kept());
}

/* ------------------------------------------------------------- events */

static void *event_sleeper(void *arg)
{
	CHECK_EQ_INT(nemo_event_wait(arg), 0);
	return NULL;
}

static void event_texts(void)
{
	nemo_event e;
	nemo_wait_policy bad = { (nemo_wait_kind)7, 0 };
	CHECK_EQ_INT(nemo_event_init(NULL, 0, NULL), EINVAL);
	CHECK(says("nemo_event_init: e is NULL"));
	CHECK_EQ_INT(nemo_event_init(&e, 0x10 | NEMO_EVENT_MANUAL_RESET, NULL), EINVAL);
	CHECK(says("nemo_event_init: flags 0x11: unknown bits 0x10 (NEMO_EVENT_MANUAL_RESET"));
	CHECK_EQ_INT(nemo_event_init(&e, 0, &bad), EINVAL);
	CHECK(says("nemo_event_init: policy kind 7 is not a nemo_wait_kind"));

	memset(&e, 0, sizeof e);     /* never initialised */
	CHECK_EQ_INT(nemo_event_post(&e), EINVAL);
	CHECK(says("nemo_event_post: e is not an initialised nemo_event"));
	CHECK_EQ_INT(nemo_event_wait(&e), EINVAL);
	CHECK(says("nemo_event_wait: e is not an initialised nemo_event"));
	CHECK_EQ_INT(nemo_event_timedwait(&e, CLOCK_MONOTONIC, NULL), EINVAL);
	CHECK(says("nemo_event_timedwait: e is not an initialised"));
	CHECK_EQ_INT(nemo_event_trywait(&e), EINVAL);
	CHECK(says("nemo_event_trywait: e is not an initialised"));
	CHECK_EQ_INT(nemo_event_reset(&e), EINVAL);
	CHECK(says("nemo_event_reset: e is not an initialised"));
	CHECK_EQ_INT(nemo_event_destroy(&e), EINVAL);
	CHECK(says("nemo_event_destroy: e is not an initialised"));
	CHECK_EQ_INT(nemo_event_post(NULL), EINVAL);
	CHECK(says("nemo_event_post: e is NULL"));

	nemo_wait_policy block = { NEMO_WAIT_BLOCK, 0 };
	CHECK_EQ_INT(nemo_event_init(&e, 0, &block), 0);
	CHECK_EQ_INT(nemo_event_timedwait(&e, CLOCK_THREAD_CPUTIME_ID, NULL), EINVAL);
	CHECK(says("nemo_event_timedwait: clock 3 is neither"));
	struct timespec odd = { 1, -1 };
	CHECK_EQ_INT(nemo_event_timedwait(&e, CLOCK_REALTIME, &odd), EINVAL);
	CHECK(says("nemo_event_timedwait: abstime's tv_nsec -1 is outside"));
	remember();
	struct timespec past = { -5, 0 };
	CHECK_EQ_INT(nemo_event_trywait(&e), EAGAIN);          /* outcomes */
	CHECK_EQ_INT(nemo_event_timedwait(&e, CLOCK_MONOTONIC, &past), ETIMEDOUT);
	CHECK_EQ_INT(nemo_event_post(&e), 0);                  /* successes */
	CHECK_EQ_INT(nemo_event_wait(&e), 0);
	CHECK_EQ_INT(nemo_event_reset(&e), 0);
	CHECK(kept());

	/* Destroy while a waiter sleeps: EBUSY, with how many. */
	nemo_waiter_counters c0, c1;
	CHECK_EQ_INT(nemo_waiter_get_counters(&c0), 0);
	pthread_t t;
	CHECK_EQ_INT(pthread_create(&t, NULL, event_sleeper, &e), 0);
	do {
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
		nemo_waiter_get_counters(&c1);
	} while (c1.sleeps == c0.sleeps);   /* its sleep is counted once it is in */
	CHECK_EQ_INT(nemo_event_destroy(&e), EBUSY);
	CHECK(says("nemo_event_destroy: 1 waiter sleeps on the event (it stays usable) (EBUSY)"));
	CHECK_EQ_INT(nemo_event_post(&e), 0);
	pthread_join(t, NULL);
	remember();
	CHECK_EQ_INT(nemo_event_destroy(&e), 0);
	CHECK(kept());
}

/* ---------------------------------------------------- condition variables */

struct cond_waiter {
	nemo_cond *c;
	pthread_mutex_t *m;
	int queued;
};

static void *cond_sleeper(void *arg)
{
	struct cond_waiter *x = arg;
	pthread_mutex_lock(x->m);
	x->queued = 1;           /* read under m: once the main thread holds m, we are queued */
	CHECK_EQ_INT(nemo_cond_wait(x->c, x->m), 0);
	pthread_mutex_unlock(x->m);
	return NULL;
}

static void cond_texts(void)
{
	nemo_cond c = NEMO_COND_INITIALIZER;
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	CHECK_EQ_INT(nemo_cond_init(NULL, NULL), EINVAL);
	CHECK(says("nemo_cond_init: c is NULL"));
	CHECK_EQ_INT(nemo_cond_init(&c, &a), ENOTSUP);
	CHECK(says("nemo_cond_init: attr is PTHREAD_PROCESS_SHARED"));
	CHECK(says("(EOPNOTSUPP)"));                     /* ENOTSUP's name on Linux */

	/* A condvar glibc initialised as process-shared is not nemo's. */
	pthread_cond_t g;
	CHECK_EQ_INT(pthread_cond_init(&g, &a), 0);
	nemo_cond *gc = (nemo_cond *)(void *)&g;
	CHECK_EQ_INT(nemo_cond_signal(gc), EINVAL);
	CHECK(says("nemo_cond_signal: c was initialised by glibc as process-shared"));
	CHECK_EQ_INT(nemo_cond_broadcast(gc), EINVAL);
	CHECK(says("nemo_cond_broadcast: c was initialised by glibc"));
	CHECK_EQ_INT(nemo_cond_destroy(gc), EINVAL);
	CHECK(says("nemo_cond_destroy: c was initialised by glibc"));
	pthread_cond_destroy(&g);
	pthread_condattr_destroy(&a);

	nemo_wait_policy bad = { (nemo_wait_kind)5, 0 };
	CHECK_EQ_INT(nemo_cond_set_policy(NULL, NULL), EINVAL);
	CHECK(says("nemo_cond_set_policy: c is NULL"));
	CHECK_EQ_INT(nemo_cond_set_policy(&c, &bad), EINVAL);
	CHECK(says("nemo_cond_set_policy: policy kind 5 is not a nemo_wait_kind"));
	CHECK_EQ_INT(nemo_cond_set_kick(NULL, true), EINVAL);
	CHECK(says("nemo_cond_set_kick: c is NULL"));
	CHECK_EQ_INT(nemo_cond_set_fanout(&c, 17), EINVAL);
	CHECK(says("nemo_cond_set_fanout: fanout 17 is outside 0..16"));
	CHECK_EQ_INT(nemo_cond_set_fanout(NULL, 2), EINVAL);
	CHECK(says("nemo_cond_set_fanout: c is NULL"));
	CHECK_EQ_INT(nemo_cond_signal(NULL), EINVAL);
	CHECK(says("nemo_cond_signal: c is NULL"));
	CHECK_EQ_INT(nemo_cond_broadcast(NULL), EINVAL);
	CHECK(says("nemo_cond_broadcast: c is NULL"));
	CHECK_EQ_INT(nemo_cond_destroy(NULL), EINVAL);
	CHECK(says("nemo_cond_destroy: c is NULL"));

	/* The waits refuse under the name that was called. */
	struct timespec odd = { 0, 1000000000L }, past = { 0, 0 };
	CHECK_EQ_INT(nemo_cond_wait(NULL, &m), EINVAL);
	CHECK(says("nemo_cond_wait: c is NULL"));
	CHECK_EQ_INT(nemo_cond_wait(&c, NULL), EINVAL);
	CHECK(says("nemo_cond_wait: m is NULL"));
	CHECK_EQ_INT(nemo_cond_timedwait(&c, &m, NULL), EINVAL);
	CHECK(says("nemo_cond_timedwait: abstime is NULL"));
	CHECK_EQ_INT(nemo_cond_timedwait(NULL, &m, &past), EINVAL);
	CHECK(says("nemo_cond_timedwait: c is NULL"));
	CHECK_EQ_INT(nemo_cond_timedwait(&c, NULL, &past), EINVAL);
	CHECK(says("nemo_cond_timedwait: m is NULL"));
	pthread_mutex_lock(&m);
	CHECK_EQ_INT(nemo_cond_timedwait(&c, &m, &odd), EINVAL);
	CHECK(says("nemo_cond_timedwait: abstime's tv_nsec 1000000000 is outside 0..999999999"));
	CHECK_EQ_INT(nemo_cond_clockwait(&c, &m, CLOCK_PROCESS_CPUTIME_ID, &past), EINVAL);
	CHECK(says("nemo_cond_clockwait: clock 2 is neither CLOCK_MONOTONIC nor CLOCK_REALTIME"));
	/* errno is never changed, by a refusal either. */
	errno = 4321;
	CHECK_EQ_INT(nemo_cond_wait(&c, NULL), EINVAL);
	CHECK_EQ_INT(errno, 4321);
	remember();
	CHECK_EQ_INT(nemo_cond_timedwait(&c, &m, &past), ETIMEDOUT);   /* an outcome */
	CHECK_EQ_INT(nemo_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &past), ETIMEDOUT);
	CHECK_EQ_INT(nemo_cond_signal(&c), 0);
	CHECK_EQ_INT(nemo_cond_broadcast(&c), 0);
	CHECK(kept());
	pthread_mutex_unlock(&m);

	/* An error-checking mutex the caller does not hold: nothing waits.
	 * (Not under ThreadSanitizer, which reports the deliberate unlock of an
	 * unlocked mutex as the misuse it is, before glibc refuses it.) */
#if !defined(__SANITIZE_THREAD__)
	pthread_mutexattr_t ma;
	pthread_mutex_t em;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&em, &ma);
	CHECK_EQ_INT(nemo_cond_wait(&c, &em), EPERM);
	CHECK(says("nemo_cond_wait: m could not be unlocked (does the calling thread hold it?)"));
	CHECK(says("(EPERM)"));
	pthread_mutex_destroy(&em);
	pthread_mutexattr_destroy(&ma);
#endif

	/* Destroy while a thread waits: EBUSY, with how many; c stays usable. */
	struct cond_waiter x = { &c, &m, 0 };
	pthread_t t;
	CHECK_EQ_INT(pthread_create(&t, NULL, cond_sleeper, &x), 0);
	for (;;) {
		pthread_mutex_lock(&m);
		if (x.queued)
			break;
		pthread_mutex_unlock(&m);
		sched_yield();
	}
	CHECK_EQ_INT(nemo_cond_destroy(&c), EBUSY);
	CHECK(says("nemo_cond_destroy: 1 waiter is still queued (nothing changed: c stays usable) (EBUSY)"));
	CHECK_EQ_INT(nemo_cond_signal(&c), 0);
	pthread_mutex_unlock(&m);
	pthread_join(t, NULL);
	remember();
	CHECK_EQ_INT(nemo_cond_destroy(&c), 0);
	CHECK_EQ_INT(nemo_cond_init(&c, NULL), 0);
	CHECK_EQ_INT(nemo_cond_set_fanout(&c, 4), 0);
	CHECK_EQ_INT(nemo_cond_set_kick(&c, false), 0);
	CHECK_EQ_INT(nemo_cond_set_policy(&c, NULL), 0);
	CHECK_EQ_INT(nemo_cond_destroy(&c), 0);
	CHECK(kept());
}

/* ----------------------------------------------------------- platform */

static void platform_texts(void)
{
	uint32_t words[2] = { 0, 0 };
	uint32_t *odd_word = (uint32_t *)(void *)((char *)words + 1);
	struct timespec neg = { -1, 0 };
	CHECK_EQ_INT(nemo_futex_wait(NULL, 0, NULL, NEMO_FUTEX_PRIVATE), EINVAL);
	CHECK(says("nemo_futex_wait: word is NULL"));
	CHECK_EQ_INT(nemo_futex_wait(odd_word, 0, NULL, NEMO_FUTEX_PRIVATE), EINVAL);
	CHECK(says("is not 4-byte aligned"));
	CHECK_EQ_INT(nemo_futex_wait(words, 0, &neg, NEMO_FUTEX_PRIVATE), EINVAL);
	CHECK(says("nemo_futex_wait: timeout {-1 s, 0 ns} is not a valid time"));
	CHECK_EQ_INT(nemo_futex_wait(words, 0, NULL, 7), EINVAL);
	CHECK(says("nemo_futex_wait: flags 7: want NEMO_FUTEX_PRIVATE (0) or NEMO_FUTEX_SHARED (1)"));
	CHECK_EQ_INT(nemo_futex_wait_until(words, 0, CLOCK_PROCESS_CPUTIME_ID, NULL, NEMO_FUTEX_PRIVATE), EINVAL);
	CHECK(says("nemo_futex_wait_until: clock 2 is neither"));
	CHECK_EQ_INT(nemo_futex_wait_bitset(words, 0, 0, CLOCK_MONOTONIC, NULL, NEMO_FUTEX_PRIVATE), EINVAL);
	CHECK(says("nemo_futex_wait_bitset: bits is 0"));
	CHECK_EQ_INT(nemo_futex_wake(words, 0, NEMO_FUTEX_PRIVATE, NULL), EINVAL);
	CHECK(says("nemo_futex_wake: n 0: wake at least 1"));
	CHECK_EQ_INT(nemo_futex_wake_bitset(words, 1, 0, NEMO_FUTEX_PRIVATE, NULL), EINVAL);
	CHECK(says("nemo_futex_wake_bitset: bits is 0"));
	CHECK_EQ_INT(nemo_futex_wake_bitset(NULL, 1, 1, NEMO_FUTEX_PRIVATE, NULL), EINVAL);
	CHECK(says("nemo_futex_wake_bitset: word is NULL"));
	/* The kernel's answers are outcomes: no text. */
	remember();
	struct timespec zero = { 0, 0 };
	CHECK_EQ_INT(nemo_futex_wait(words, 1, NULL, NEMO_FUTEX_PRIVATE), EAGAIN);
	CHECK_EQ_INT(nemo_futex_wait(words, 0, &zero, NEMO_FUTEX_PRIVATE), ETIMEDOUT);
	CHECK_EQ_INT(nemo_futex_wake(words, 1, NEMO_FUTEX_PRIVATE, NULL), 0);
	CHECK(kept());

	CHECK_EQ_INT(nemo_pin_self(-1), EINVAL);
	CHECK(says("nemo_pin_self: cpu -1 is out of range"));
	CHECK_EQ_INT(nemo_pin_self(1000), EINVAL);
	CHECK(says("nemo_pin_self: cpu 1000 is not online"));
	CHECK_EQ_INT(nemo_cpu_identify(NULL), EINVAL);
	CHECK(says("nemo_cpu_identify: out is NULL"));
	CHECK_EQ_INT(nemo_clock_get_info(NULL), EINVAL);
	CHECK(says("nemo_clock_get_info: out is NULL"));

	CHECK_EQ_INT(nemo_topo_load(NULL), EINVAL);
	CHECK(says("nemo_topo_load: out is NULL"));
	nemo_cpu_place pl;
	int d;
	CHECK_EQ_INT(nemo_topo_cpu(NULL, 0, &pl), EINVAL);
	CHECK(says("nemo_topo_cpu: topo is NULL"));
	CHECK_EQ_INT(nemo_topo_distance(NULL, 0, 0, &d), EINVAL);
	CHECK(says("nemo_topo_distance: topo is NULL"));
	nemo_topo *topo;
	if (nemo_topo_load(&topo) == 0) {
		int n = nemo_topo_cpus(topo);
		char want[64];
		snprintf(want, sizeof want, "nemo_topo_cpu: i %d is outside 0..%d", n, n - 1);
		CHECK_EQ_INT(nemo_topo_cpu(topo, n, &pl), EINVAL);
		CHECK(says(want));
		remember();
		CHECK_EQ_INT(nemo_topo_cpu(topo, 0, &pl), 0);
		CHECK_EQ_INT(nemo_topo_distance(topo, pl.cpu, pl.cpu, &d), 0);
		CHECK(kept());
		CHECK_EQ_INT(nemo_topo_distance(topo, pl.cpu, 5000, &d), EINVAL);
		CHECK(says("nemo_topo_distance: cpu_b 5000 is not a CPU of the topology"));
		nemo_topo_free(topo);
	}
}

int main(void)
{
	CHECK(nemo_last_error() != NULL);
	CHECK(strcmp(nemo_last_error(), "") == 0);

	nemo_domain *d;
	nemo_domain_attr bad = { .ring_slots = 100 };
	CHECK_EQ_INT(nemo_domain_create(&bad, &d), EINVAL);
	CHECK(says("nemo_domain_create: ring_slots 100 is not a power of two from 8 to 32768 (EINVAL)"));
	bad = (nemo_domain_attr){ .max_places = 5000 };
	CHECK_EQ_INT(nemo_domain_create(&bad, &d), EINVAL);
	CHECK(says("max_places 5000 is above"));

	nemo_domain_attr a = { .max_actions = 16, .max_events = 8 };
	CHECK_EQ_INT(nemo_domain_create(&a, &d), 0);
	CHECK(says("max_places 5000"));               /* a success leaves it */

	/* The three: a bad pin CPU, a bad flag, an unknown action -
	 * each its own text, where errno's text was the same or misleading. */
	nemo_place_attr pa = { .flags = NEMO_PLACE_PIN, .cpu = 4000 };
	CHECK_EQ_INT(nemo_place_join(d, &pa, NULL), EINVAL);
	CHECK(says("nemo_place_join: cannot pin to cpu 4000"));
	pa = (nemo_place_attr){ .flags = 0x40 };
	CHECK_EQ_INT(nemo_place_join(d, &pa, NULL), EINVAL);
	CHECK(says("nemo_place_join: flags 0x40: unknown bits 0x40"));

	nemo_place_id me;
	CHECK_EQ_INT(nemo_place_join(d, NULL, &me), 0);
	CHECK_EQ_INT(nemo_place_join(d, NULL, NULL), EALREADY);
	CHECK(says("already a place"));
	CHECK_EQ_INT(nemo_am_send(me, 7, 0, 0), ENOENT);
	CHECK(says("nemo_am_sendv: action 7 has no handler in this domain (nemo_action_register) (ENOENT)"));
	CHECK_EQ_INT(nemo_am_send(me, 16, 0, 0), ERANGE);
	CHECK(says("action 16 is out of range: the domain has max_actions 16 (ERANGE)"));
	CHECK_EQ_INT(nemo_am_send(me, 0, 0, 0x100), EINVAL);
	CHECK(says("flags 0x100: unknown bits 0x100"));
	char big[64] = { 0 };
	CHECK_EQ_INT(nemo_action_register(d, 0, nop, NULL), 0);
	CHECK_EQ_INT(nemo_am_sendv(me, 0, 0, big, sizeof big, 0), EMSGSIZE);
	CHECK(says("payload of 64 bytes"));
	CHECK_EQ_INT(nemo_action_register(d, 0, nop, NULL), EEXIST);
	CHECK(says("nemo_action_register: action 0 has a handler already (EEXIST)"));
	CHECK_EQ_INT(nemo_am_send(me, NEMO_AM_EVENT(3), 0, 0), ENOENT);
	CHECK(says("event 3 is not mapped at place"));
	CHECK_EQ_INT(nemo_am_send(((nemo_place_id)77 << 16 | 40), 0, 0, 0), ESRCH);
	CHECK(says("is not in the domain"));
	CHECK_EQ_INT(nemo_notify(me, 0, 0), ENOENT);
	CHECK(says("nemo_notify: place"));
	CHECK(says("has no notification handler"));
	CHECK_EQ_INT(nemo_notify(me, 1u << 20, 0), ERANGE);
	CHECK(says("channel 1048576 is above"));
	CHECK_EQ_INT(nemo_domain_destroy(d), EBUSY);
	CHECK(says("nemo_domain_destroy: 1 places are still joined"));
	/* The code is kept as it was: only the text is new. */
	errno = 1234;
	CHECK_EQ_INT(nemo_am_send(me, 7, 0, 0), ENOENT);
	CHECK_EQ_INT(errno, 1234);

	pthread_t t;
	CHECK_EQ_INT(pthread_create(&t, NULL, other_thread, NULL), 0);
	pthread_join(t, NULL);
	CHECK(says("nemo_am_sendv: action 7"));   /* ours, not the other thread's */

	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_place_leave(), ENOTCONN);
	CHECK(says("nemo_place_leave: the calling thread is not a place"));
	CHECK_EQ_INT(nemo_domain_destroy(d), 0);
	CHECK_EQ_INT(nemo_place_join(d, NULL, NULL), EIDRM);
	CHECK(says("nemo_place_join: the domain was destroyed (EIDRM)"));

	waiter_texts();
	event_texts();
	cond_texts();
	platform_texts();
	return check_exit("test_errors");
}
