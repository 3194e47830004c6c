/* test_lifetime.c - regression tests for defects of the events and waiter
 * layers that an audit reproduced (each of these failed before its fix):
 *
 *   - destroy right after a broadcast (POSIX's own example, and what C++'s
 *     ~condition_variable does): the tree broadcast returned while deeper
 *     waiters were still to be woken, and their leaders then wrote into the
 *     freed condvar; timed waiters racing the broadcast took its lock after
 *     destroy had returned;
 *   - deadlines centuries away ({LONG_MAX, 0}, C++'s time_point::max())
 *     timed out at once (the ns-to-ticks conversion overflowed);
 *   - a negative tv_sec was EINVAL where glibc says ETIMEDOUT;
 *   - errno was overwritten by the futex calls inside a wait;
 *   - a waiter slot kept pointing at a condvar after an EPERM or a
 *     cancellation, so the thread's (or the slot's next owner's) next plain
 *     wait slept on, and was kicked through, that condvar's freed word.
 *
 * Under AddressSanitizer the condvars are freed at once, so any late
 * access is a heap-use-after-free report; in the plain build they are kept,
 * and a write after destroy shows as a changed byte.
 */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/nemo.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define FREE_AT_ONCE 1
#else
#define FREE_AT_ONCE 0
#endif

static double scale(void)
{
	const char *s = getenv("NEMO_STRESS_SCALE");
	double v = s ? atof(s) : 1.0;
	return v > 0 ? v : 1.0;
}

/* ------------------------------------------------ destroy after broadcast */

enum { K = 8 };

static struct {
	pthread_mutex_t m;
	nemo_cond *cur;               /* this round's condvar (under m) */
	int announced, released;      /* rounds (under m) */
	int entered;                  /* waiters that reached their wait (under m) */
	int rounds;
	bool timed;                   /* half the waiters use short timed waits */
	atomic_int bad_rc;
} L = { .m = PTHREAD_MUTEX_INITIALIZER };

static void *lifetime_waiter(void *arg)
{
	int me = (int)(intptr_t)arg;
	int ncpu = nemo_cpu_count();
	if (ncpu >= 2)
		nemo_pin_self(me % 2);   /* waiters on 2 CPUs: fan-out 1 makes a tree */
	for (int r = 1; r <= L.rounds; r++) {
		pthread_mutex_lock(&L.m);
		while (L.announced < r) {
			pthread_mutex_unlock(&L.m);
			sched_yield();
			pthread_mutex_lock(&L.m);
		}
		nemo_cond *c = L.cur;
		L.entered++;
		/* One deadline per round, 0-150 us away: some expire just as
		 * the broadcast detaches them; once it has passed, the waiter
		 * waits untimed (re-arming it in a loop would hog the mutex and
		 * starve the other threads under load). */
		struct timespec d;
		clock_gettime(CLOCK_REALTIME, &d);
		d.tv_nsec += (long)((me * 37 + r * 11) % 150) * 1000;
		if (d.tv_nsec >= 1000000000L) {
			d.tv_sec++;
			d.tv_nsec -= 1000000000L;
		}
		bool timed = L.timed && (me & 1);
		while (L.released < r) {
			int rc;
			if (timed) {
				rc = nemo_cond_timedwait(c, &L.m, &d);
				if (rc == ETIMEDOUT)
					timed = false;
				if (rc != 0 && rc != ETIMEDOUT)
					atomic_fetch_add(&L.bad_rc, 1);
			} else {
				rc = nemo_cond_wait(c, &L.m);
				if (rc != 0)
					atomic_fetch_add(&L.bad_rc, 1);
			}
		}
		pthread_mutex_unlock(&L.m);
	}
	return NULL;
}

static void test_destroy_after_broadcast(int rounds, bool timed, nemo_wait_kind kind)
{
	L.rounds = rounds;
	L.timed = timed;
	L.announced = L.released = L.entered = 0;
	atomic_store(&L.bad_rc, 0);
	pthread_t t[K];
	for (int i = 0; i < K; i++)
		pthread_create(&t[i], NULL, lifetime_waiter, (void *)(intptr_t)i);
	nemo_cond *kept[2] = { NULL, NULL };
	unsigned char snap[2][sizeof(nemo_cond)];
	int changed = 0;
	for (int r = 1; r <= rounds; r++) {
		nemo_cond *c = malloc(sizeof *c);
		CHECK_EQ_INT(nemo_cond_init(c, NULL), 0);
		CHECK_EQ_INT(nemo_cond_set_fanout(c, 1), 0);
		nemo_wait_policy p = { kind, 3000 };
		CHECK_EQ_INT(nemo_cond_set_policy(c, &p), 0);
		pthread_mutex_lock(&L.m);
		L.cur = c;
		L.announced = r;
		/* Every waiter queued (they enqueue before they unlock m). */
		while (L.entered < K * r) {
			pthread_mutex_unlock(&L.m);
			sched_yield();
			pthread_mutex_lock(&L.m);
		}
		L.released = r;
		CHECK_EQ_INT(nemo_cond_broadcast(c), 0);
		pthread_mutex_unlock(&L.m);
		/* Nobody is blocked any more: destroy must succeed, and after it
		 * nothing may touch c. */
		CHECK_EQ_INT(nemo_cond_destroy(c), 0);
		if (FREE_AT_ONCE) {
			free(c);
			continue;
		}
		/* Keep it two rounds and check that nobody wrote to it. */
		int k = r % 2;
		if (kept[k]) {
			if (memcmp(kept[k], snap[k], sizeof snap[k]) != 0)
				changed++;
			free(kept[k]);
		}
		kept[k] = c;
		memcpy(snap[k], c, sizeof snap[k]);
	}
	for (int i = 0; i < K; i++)
		pthread_join(t[i], NULL);
	for (int k = 0; k < 2; k++) {
		if (kept[k]) {
			if (memcmp(kept[k], snap[k], sizeof snap[k]) != 0)
				changed++;
			free(kept[k]);
		}
	}
	CHECK_EQ_INT(changed, 0);
	CHECK_EQ_INT(atomic_load(&L.bad_rc), 0);
}

/* Destroy waits for woken waiters, but never for blocked ones: EBUSY. */
static void *blocked_waiter(void *arg)
{
	nemo_cond *c = arg;
	pthread_mutex_lock(&L.m);
	L.entered++;
	while (!L.released)
		nemo_cond_wait(c, &L.m);
	pthread_mutex_unlock(&L.m);
	return NULL;
}

static void test_destroy_busy(void)
{
	nemo_cond c = NEMO_COND_INITIALIZER;
	L.entered = 0;
	L.released = 0;
	pthread_t t;
	pthread_create(&t, NULL, blocked_waiter, &c);
	pthread_mutex_lock(&L.m);
	while (!L.entered) {
		pthread_mutex_unlock(&L.m);
		sched_yield();
		pthread_mutex_lock(&L.m);
	}
	CHECK_EQ_INT(nemo_cond_destroy(&c), EBUSY);   /* and at once, no hang */
	L.released = 1;
	nemo_cond_signal(&c);
	pthread_mutex_unlock(&L.m);
	pthread_join(t, NULL);
	CHECK_EQ_INT(nemo_cond_destroy(&c), 0);
}

/* ------------------------------------------------------- far deadlines */

struct far {
	pthread_mutex_t m;
	nemo_cond c;
	int flag;
	int loops;
	struct timespec deadline;
	clockid_t clock;
	int rc_bad;
};

static void *far_waiter(void *arg)
{
	struct far *f = arg;
	pthread_mutex_lock(&f->m);
	while (!f->flag) {
		f->loops++;
		int rc = nemo_cond_clockwait(&f->c, &f->m, f->clock, &f->deadline);
		if (rc != 0)
			f->rc_bad++;
		if (f->loops > 1000)
			break;        /* the old busy loop: stop it, the checks fail */
	}
	pthread_mutex_unlock(&f->m);
	return NULL;
}

static void far_case(clockid_t clock, struct timespec deadline, nemo_wait_kind kind)
{
	struct far f = { .m = PTHREAD_MUTEX_INITIALIZER, .deadline = deadline, .clock = clock };
	nemo_cond_init(&f.c, NULL);
	nemo_wait_policy p = { kind, 2000 };
	nemo_cond_set_policy(&f.c, &p);
	pthread_t t;
	pthread_create(&t, NULL, far_waiter, &f);
	usleep(20000);
	pthread_mutex_lock(&f.m);
	f.flag = 1;
	nemo_cond_signal(&f.c);
	pthread_mutex_unlock(&f.m);
	pthread_join(t, NULL);
	/* One wait (none if the waiter started after the signal; two if it
	 * woke spuriously), never ETIMEDOUT. */
	CHECK(f.loops <= 3);
	CHECK_EQ_INT(f.rc_bad, 0);
	CHECK_EQ_INT(nemo_cond_destroy(&f.c), 0);
}

struct release_later {
	nemo_waiter *w;
	nemo_event *e;
	int ms;
};

static void *release_later(void *arg)
{
	struct release_later *r = arg;
	usleep((useconds_t)r->ms * 1000);
	if (r->w)
		nemo_waiter_release(r->w);
	if (r->e)
		nemo_event_post(r->e);
	return NULL;
}

static void test_far_deadlines(void)
{
	/* C++'s steady_clock::time_point::max(): INT64_MAX ns. */
	struct timespec cxx_max = { (time_t)(INT64_MAX / 1000000000), (long)(INT64_MAX % 1000000000) };
	struct timespec long_max = { (time_t)LONG_MAX, 0 };
	struct timespec far_ok = { (time_t)1 << 40, 0 };      /* ~35,000 years */
	nemo_wait_kind kinds[] = { NEMO_WAIT_BLOCK, NEMO_WAIT_HYBRID, NEMO_WAIT_ADAPTIVE };
	for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
		far_case(CLOCK_MONOTONIC, cxx_max, kinds[k]);
		far_case(CLOCK_REALTIME, cxx_max, kinds[k]);
		far_case(CLOCK_REALTIME, long_max, kinds[k]);
		far_case(CLOCK_MONOTONIC, far_ok, kinds[k]);
	}

	/* The waiter layer and nemo_event take the same deadlines. */
	nemo_waiter *w = nemo_waiter_self();
	nemo_waiter_arm(w);
	struct release_later rl = { w, NULL, 20 };
	pthread_t t;
	pthread_create(&t, NULL, release_later, &rl);
	nemo_wait_policy block = { NEMO_WAIT_BLOCK, 0 };
	CHECK_EQ_INT(nemo_waiter_wait(w, &block, CLOCK_MONOTONIC, &long_max), 0);
	pthread_join(t, NULL);

	nemo_event e;
	nemo_event_init(&e, 0, &block);
	struct release_later re = { NULL, &e, 20 };
	pthread_create(&t, NULL, release_later, &re);
	CHECK_EQ_INT(nemo_event_timedwait(&e, CLOCK_REALTIME, &cxx_max), 0);
	pthread_join(t, NULL);
	CHECK_EQ_INT(nemo_event_destroy(&e), 0);
}

/* ---------------------------------------------------- past and negative */

static void test_negative_deadlines(void)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	nemo_cond c = NEMO_COND_INITIALIZER;
	struct timespec neg = { -1, 0 }, negn = { -5, 999999999 }, zero = { 0, 0 };
	pthread_mutex_lock(&m);
	CHECK_EQ_INT(nemo_cond_timedwait(&c, &m, &neg), ETIMEDOUT);
	CHECK_EQ_INT(nemo_cond_timedwait(&c, &m, &negn), ETIMEDOUT);
	CHECK_EQ_INT(nemo_cond_timedwait(&c, &m, &zero), ETIMEDOUT);
	CHECK_EQ_INT(nemo_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &neg), ETIMEDOUT);
	/* The mutex is held again after each. */
	CHECK_EQ_INT(pthread_mutex_trylock(&m), EBUSY);
	/* tv_nsec out of range stays EINVAL, as in glibc. */
	struct timespec badn = { -1, 1000000000L };
	CHECK_EQ_INT(nemo_cond_timedwait(&c, &m, &badn), EINVAL);
	pthread_mutex_unlock(&m);
	CHECK_EQ_INT(nemo_cond_destroy(&c), 0);

	nemo_wait_policy pols[] = { { NEMO_WAIT_BLOCK, 0 }, { NEMO_WAIT_SPIN, 0 }, { NEMO_WAIT_ADAPTIVE, 0 } };
	for (size_t i = 0; i < 3; i++) {
		nemo_waiter *w = nemo_waiter_self();
		nemo_waiter_arm(w);
		CHECK_EQ_INT(nemo_waiter_wait(w, &pols[i], CLOCK_MONOTONIC, &neg), ETIMEDOUT);
		nemo_event e;
		nemo_event_init(&e, 0, &pols[i]);
		CHECK_EQ_INT(nemo_event_timedwait(&e, CLOCK_REALTIME, &neg), ETIMEDOUT);
		nemo_event_destroy(&e);
	}
}

/* ----------------------------------------------------------------- errno */

static void *signal_soon(void *arg)
{
	struct far *f = arg;
	usleep(5000);
	pthread_mutex_lock(&f->m);
	f->flag = 1;
	nemo_cond_signal(&f->c);
	pthread_mutex_unlock(&f->m);
	return NULL;
}

static void test_errno_kept(void)
{
	nemo_wait_policy block = { NEMO_WAIT_BLOCK, 0 };
	struct far f = { .m = PTHREAD_MUTEX_INITIALIZER };
	nemo_cond_init(&f.c, NULL);
	nemo_cond_set_policy(&f.c, &block);
	pthread_mutex_lock(&f.m);
	/* A timeout: the futex call fails with ETIMEDOUT inside. */
	errno = 4242;
	struct timespec d = in_ms(CLOCK_REALTIME, 3);
	CHECK_EQ_INT(nemo_cond_timedwait(&f.c, &f.m, &d), ETIMEDOUT);
	CHECK_EQ_INT(errno, 4242);
	/* A real sleep and wake (EAGAIN or a wake inside). */
	pthread_t t;
	pthread_create(&t, NULL, signal_soon, &f);
	errno = 4343;
	while (!f.flag)
		CHECK_EQ_INT(nemo_cond_wait(&f.c, &f.m), 0);
	CHECK_EQ_INT(errno, 4343);
	pthread_mutex_unlock(&f.m);
	pthread_join(t, NULL);
	errno = 4444;
	nemo_cond_signal(&f.c);
	nemo_cond_broadcast(&f.c);
	CHECK_EQ_INT(nemo_cond_destroy(&f.c), 0);
	CHECK_EQ_INT(errno, 4444);
	/* The futex wrappers themselves. */
	uint32_t word = 1;
	errno = 4545;
	CHECK_EQ_INT(nemo_futex_wait(&word, 2, NULL, NEMO_FUTEX_PRIVATE), EAGAIN);
	CHECK_EQ_INT(errno, 4545);
}

/* ------------------------------------- slots that outlive a condvar wait */

static pthread_mutex_t sm = PTHREAD_MUTEX_INITIALIZER;

/* Sleep on the own slot until released by another thread 10 ms later:
 * with a stale shared word, this reads (and is woken through) a freed
 * condvar. */
static void plain_wait_released_later(void)
{
	nemo_waiter *w = nemo_waiter_self();
	nemo_waiter_arm(w);
	struct release_later rl = { w, NULL, 10 };
	pthread_t t;
	pthread_create(&t, NULL, release_later, &rl);
	nemo_wait_policy block = { NEMO_WAIT_BLOCK, 0 };
	struct timespec d = in_ms(CLOCK_MONOTONIC, 10000);
	CHECK_EQ_INT(nemo_waiter_wait(w, &block, CLOCK_MONOTONIC, &d), 0);
	pthread_join(t, NULL);
}

static void test_slot_after_eperm(void)
{
#ifndef __SANITIZE_THREAD__   /* TSan reports the deliberate unowned unlock */
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_t em;
	pthread_mutex_init(&em, &ma);
	nemo_cond *c = malloc(sizeof *c);
	nemo_cond_init(c, NULL);
	CHECK_EQ_INT(nemo_cond_wait(c, &em), EPERM);
	CHECK_EQ_INT(nemo_cond_destroy(c), 0);
	memset(c, 0x5a, sizeof *c);
	free(c);
	plain_wait_released_later();
	pthread_mutex_destroy(&em);
#endif
}

static void unlock_sm(void *arg)
{
	pthread_mutex_unlock(arg);
}

static void *cancelled_waiter(void *arg)
{
	nemo_cond *c = arg;
	pthread_mutex_lock(&sm);
	pthread_cleanup_push(unlock_sm, &sm);
	for (;;)
		nemo_cond_wait(c, &sm);
	pthread_cleanup_pop(1);
	return NULL;
}

static void *plain_waiter_thread(void *arg)
{
	(void)arg;
	plain_wait_released_later();
	return NULL;
}

static void test_slot_after_cancel(void)
{
	nemo_cond *c = malloc(sizeof *c);
	nemo_cond_init(c, NULL);
	nemo_wait_policy block = { NEMO_WAIT_BLOCK, 0 };
	nemo_cond_set_policy(c, &block);
	pthread_t t;
	pthread_create(&t, NULL, cancelled_waiter, c);
	usleep(20000);                /* asleep in the wait */
	pthread_cancel(t);
	pthread_join(t, NULL);
	CHECK_EQ_INT(nemo_cond_destroy(c), 0);
	memset(c, 0x5a, sizeof *c);
	free(c);
	/* The cancelled thread's slot goes to the next thread. */
	pthread_create(&t, NULL, plain_waiter_thread, NULL);
	pthread_join(t, NULL);
}

int main(void)
{
	int rounds = (int)(300 * scale());
	if (rounds < 20)
		rounds = 20;
	test_destroy_after_broadcast(rounds, false, NEMO_WAIT_BLOCK);
	test_destroy_after_broadcast(rounds, false, NEMO_WAIT_HYBRID);
	test_destroy_after_broadcast(rounds, true, NEMO_WAIT_BLOCK);
	test_destroy_after_broadcast(rounds, true, NEMO_WAIT_ADAPTIVE);
	test_destroy_busy();
	test_far_deadlines();
	test_negative_deadlines();
	test_errno_kept();
	test_slot_after_eperm();
	test_slot_after_cancel();
	return check_exit("test_lifetime");
}
