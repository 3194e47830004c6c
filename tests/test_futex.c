/* test_futex.c - the futex wrappers: every error path, and real wakes
 * between threads (run under ThreadSanitizer too). */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/nemo.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
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

int main(void)
{
	test_errors();
	test_pingpong();
	test_wake_n();
	return check_exit("test_futex");
}
