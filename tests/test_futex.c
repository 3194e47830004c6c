/* test_futex.c - the futex wrappers: every error path, and real wakes
 * between threads (run under ThreadSanitizer too). */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/nemo.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static void test_errors(void)
{
	_Alignas(8) uint32_t w[2] = { 0, 0 };
	struct timespec bad = { 0, 1000000000L }, neg = { -1, 0 };
	CHECK_EQ_INT(nemo_futex_wait(NULL, 0, NULL, NEMO_FUTEX_PRIVATE), EINVAL);
	CHECK_EQ_INT(nemo_futex_wait((uint32_t *)((char *)w + 1), 0, NULL, NEMO_FUTEX_PRIVATE), EINVAL);
	CHECK_EQ_INT(nemo_futex_wait(w, 0, &bad, NEMO_FUTEX_PRIVATE), EINVAL);
	CHECK_EQ_INT(nemo_futex_wait(w, 0, &neg, NEMO_FUTEX_PRIVATE), EINVAL);
	CHECK_EQ_INT(nemo_futex_wait(w, 0, NULL, 7), EINVAL);
	CHECK_EQ_INT(nemo_futex_wake(NULL, 1, NEMO_FUTEX_PRIVATE, NULL), EINVAL);
	CHECK_EQ_INT(nemo_futex_wake(w, 0, NEMO_FUTEX_PRIVATE, NULL), EINVAL);
	CHECK_EQ_INT(nemo_futex_wake(w, 1, 9, NULL), EINVAL);
	struct timespec ts = { 0, 0 };
	CHECK_EQ_INT(nemo_futex_wait_until(w, 0, CLOCK_PROCESS_CPUTIME_ID, &ts, NEMO_FUTEX_PRIVATE), EINVAL);
	/* value changed: EAGAIN, no sleep */
	w[0] = 5;
	CHECK_EQ_INT(nemo_futex_wait(w, 4, NULL, NEMO_FUTEX_PRIVATE), EAGAIN);
	CHECK_EQ_INT(nemo_futex_wait(w, 4, NULL, NEMO_FUTEX_SHARED), EAGAIN);
	/* timeouts */
	struct timespec short_to = { 0, 1000000 };
	CHECK_EQ_INT(nemo_futex_wait(w, 5, &short_to, NEMO_FUTEX_PRIVATE), ETIMEDOUT);
	struct timespec past = { 0, 1 };
	CHECK_EQ_INT(nemo_futex_wait_until(w, 5, CLOCK_MONOTONIC, &past, NEMO_FUTEX_PRIVATE), ETIMEDOUT);
	CHECK_EQ_INT(nemo_futex_wait_until(w, 5, CLOCK_REALTIME, &past, NEMO_FUTEX_SHARED), ETIMEDOUT);
	/* nobody to wake */
	int woken = -1;
	CHECK_EQ_INT(nemo_futex_wake(w, INT_MAX, NEMO_FUTEX_PRIVATE, &woken), 0);
	CHECK_EQ_INT(woken, 0);
}

/* Ping-pong: two threads hand a token back and forth through one word
 * 2000 times, sleeping in the kernel each time it is not theirs. */
static _Alignas(64) atomic_uint token;

static void pass(unsigned mine, unsigned next)
{
	unsigned v;
	while ((v = atomic_load_explicit(&token, memory_order_acquire)) != mine)
		nemo_futex_wait((uint32_t *)&token, v, NULL, NEMO_FUTEX_PRIVATE);
	atomic_store_explicit(&token, next, memory_order_release);
	nemo_futex_wake((uint32_t *)&token, 1, NEMO_FUTEX_PRIVATE, NULL);
}

enum { ROUNDS = 2000 };
static void *pong(void *p)
{
	(void)p;
	for (unsigned i = 0; i < ROUNDS; i++)
		pass(2 * i + 1, 2 * i + 2);
	return NULL;
}

static void test_pingpong(void)
{
	atomic_store(&token, 0);
	pthread_t th;
	pthread_create(&th, NULL, pong, NULL);
	for (unsigned i = 0; i < ROUNDS; i++)
		pass(2 * i, 2 * i + 1);
	pthread_join(th, NULL);
	CHECK_EQ_INT(atomic_load(&token), 2 * ROUNDS);
}

/* wake n: with 4 sleepers, waking 2 wakes exactly 2 (once all sleep). */
static _Alignas(64) atomic_uint gate;
static atomic_int released;
static void *sleeper(void *p)
{
	(void)p;
	while (atomic_load(&gate) == 0)
		nemo_futex_wait((uint32_t *)&gate, 0, NULL, NEMO_FUTEX_PRIVATE);
	atomic_fetch_add(&released, 1);
	return NULL;
}

static void test_wake_n(void)
{
	pthread_t th[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, sleeper, NULL);
	/* Wake everyone who sleeps until all four have gone past. */
	atomic_store(&gate, 1);
	int total = 0;
	while (atomic_load(&released) < 4) {
		int woken = 0;
		CHECK_EQ_INT(nemo_futex_wake((uint32_t *)&gate, 2, NEMO_FUTEX_PRIVATE, &woken), 0);
		CHECK(woken >= 0 && woken <= 2);
		total += woken;
		struct timespec d = { 0, 100000 };
		nanosleep(&d, NULL);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	CHECK(total <= 4);
}

/* nemo_futex_wait_any: its refusals, EAGAIN and a timeout, and a sleeper
 * on a private and a shared word that each word's wake ends, saying which
 * (the shared one in a MAP_SHARED page, as another process would map it). */
static _Alignas(64) atomic_uint any_priv;
static atomic_uint *any_shared;
static atomic_int any_round, any_done, any_rc[2], any_woken[2];

static void *any_sleeper(void *p)
{
	(void)p;
	for (int r = 0; r < 2; r++) {
		while (atomic_load(&any_round) != r)
			sched_yield();
		nemo_futex_word ws[2] = {
			{ (uint32_t *)&any_priv, 0, NEMO_FUTEX_PRIVATE },
			{ (uint32_t *)any_shared, 0, NEMO_FUTEX_SHARED },
		};
		int woken = -1, rc;
		/* Until a word is no longer 0: the kicker changes it before it
		 * wakes, so the wake-up cannot be lost (EAGAIN if it came first). */
		while ((rc = nemo_futex_wait_any(ws, 2, CLOCK_MONOTONIC, NULL, &woken)) != EAGAIN &&
		       atomic_load(&any_priv) == 0 && atomic_load(any_shared) == 0)
			CHECK(rc == 0 || rc == EINTR);
		atomic_store(&any_rc[r], rc);
		atomic_store(&any_woken[r], woken);
		atomic_store(&any_done, r + 1);
	}
	return NULL;
}

static void test_wait_any(void)
{
	_Alignas(8) uint32_t w[2] = { 3, 0 };
	struct timespec bad = { 0, 1000000000L }, past = { 0, 1 };
	nemo_futex_word ok[2] = { { &w[0], 3, NEMO_FUTEX_PRIVATE }, { &w[1], 0, NEMO_FUTEX_SHARED } };
	int woken = 7;
	CHECK_EQ_INT(nemo_futex_wait_any(NULL, 1, CLOCK_MONOTONIC, NULL, &woken), EINVAL);
	CHECK_EQ_INT(woken, -1);
	CHECK_EQ_INT(nemo_futex_wait_any(ok, 0, CLOCK_MONOTONIC, NULL, NULL), EINVAL);
	CHECK_EQ_INT(nemo_futex_wait_any(ok, NEMO_FUTEX_WAIT_ANY_MAX + 1, CLOCK_MONOTONIC, NULL, NULL), EINVAL);
	CHECK_EQ_INT(nemo_futex_wait_any(ok, 2, CLOCK_PROCESS_CPUTIME_ID, &past, NULL), EINVAL);
	CHECK_EQ_INT(nemo_futex_wait_any(ok, 2, CLOCK_MONOTONIC, &bad, NULL), EINVAL);
	nemo_futex_word badw[2] = { ok[0], { (uint32_t *)((char *)w + 1), 0, NEMO_FUTEX_PRIVATE } };
	CHECK_EQ_INT(nemo_futex_wait_any(badw, 2, CLOCK_MONOTONIC, &past, NULL), EINVAL);
	CHECK(strstr(nemo_last_error(), "aligned") != NULL);
	nemo_futex_word badf[1] = { { &w[0], 3, 5 } };
	CHECK_EQ_INT(nemo_futex_wait_any(badf, 1, CLOCK_MONOTONIC, &past, NULL), EINVAL);
	nemo_futex_word nullw[1] = { { NULL, 3, NEMO_FUTEX_PRIVATE } };
	CHECK_EQ_INT(nemo_futex_wait_any(nullw, 1, CLOCK_MONOTONIC, &past, NULL), EINVAL);
	/* A word that differs: EAGAIN, no sleep; a past deadline: ETIMEDOUT. */
	nemo_futex_word differ[2] = { ok[0], { &w[1], 9, NEMO_FUTEX_SHARED } };
	CHECK_EQ_INT(nemo_futex_wait_any(differ, 2, CLOCK_MONOTONIC, NULL, NULL), EAGAIN);
	CHECK_EQ_INT(nemo_futex_wait_any(ok, 2, CLOCK_MONOTONIC, &past, NULL), ETIMEDOUT);
	CHECK_EQ_INT(nemo_futex_wait_any(ok, 2, CLOCK_REALTIME, &past, NULL), ETIMEDOUT);
	struct timespec soon;
	clock_gettime(CLOCK_MONOTONIC, &soon);
	soon.tv_nsec += 2000000;
	if (soon.tv_nsec >= 1000000000L) {
		soon.tv_sec++;
		soon.tv_nsec -= 1000000000L;
	}
	CHECK_EQ_INT(nemo_futex_wait_any(ok, 2, CLOCK_MONOTONIC, &soon, &woken), ETIMEDOUT);
	CHECK_EQ_INT(woken, -1);

	/* Woken through each word in turn: the private one, then the shared. */
	any_shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(any_shared != MAP_FAILED);
	if (any_shared == MAP_FAILED)
		return;
	atomic_store(&any_round, -1);
	pthread_t t;
	pthread_create(&t, NULL, any_sleeper, NULL);
	for (int r = 0; r < 2; r++) {
		atomic_store(&any_priv, 0);
		atomic_store(any_shared, 0);
		atomic_store(&any_round, r);
		struct timespec d = { 0, 5000000 };     /* most likely asleep by then */
		nanosleep(&d, NULL);
		atomic_uint *which = r == 0 ? &any_priv : any_shared;
		atomic_store(which, 1);
		CHECK_EQ_INT(nemo_futex_wake((uint32_t *)which, 1, r == 0 ? NEMO_FUTEX_PRIVATE : NEMO_FUTEX_SHARED,
					     NULL), 0);
		while (atomic_load(&any_done) != r + 1)
			sched_yield();
		int rc = atomic_load(&any_rc[r]), wk = atomic_load(&any_woken[r]);
		CHECK(rc == 0 || rc == EAGAIN);
		if (rc == 0)
			CHECK_EQ_INT(wk, r);     /* the word that woke it, by index */
		else
			CHECK_EQ_INT(wk, -1);
	}
	pthread_join(t, NULL);
	munmap((void *)any_shared, 4096);
}

int main(void)
{
	test_errors();
	test_pingpong();
	test_wake_n();
	test_wait_any();
	return check_exit("test_futex");
}
