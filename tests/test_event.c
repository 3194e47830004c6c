/* test_event.c - nemo_event: every call's errors, auto- and manual-reset
 * semantics, timeouts on both clocks, visibility, destroy while busy. */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/nemo.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

static void test_errors(void)
{
	nemo_event e;
	memset(&e, 0, sizeof e);       /* never initialised */
	CHECK_EQ_INT(nemo_event_post(&e), EINVAL);
	CHECK_EQ_INT(nemo_event_wait(&e), EINVAL);
	CHECK_EQ_INT(nemo_event_trywait(&e), EINVAL);
	CHECK_EQ_INT(nemo_event_reset(&e), EINVAL);
	CHECK_EQ_INT(nemo_event_destroy(&e), EINVAL);
	CHECK_EQ_INT(nemo_event_post(NULL), EINVAL);
	CHECK_EQ_INT(nemo_event_init(NULL, 0, NULL), EINVAL);
	CHECK_EQ_INT(nemo_event_init(&e, 0x100, NULL), EINVAL);
	nemo_wait_policy bad = { (nemo_wait_kind)9, 0 };
	CHECK_EQ_INT(nemo_event_init(&e, 0, &bad), EINVAL);
	CHECK_EQ_INT(nemo_event_init(&e, 0, NULL), 0);
	struct timespec t = { 0, 1000000000L };
	CHECK_EQ_INT(nemo_event_timedwait(&e, CLOCK_MONOTONIC, &t), EINVAL);
	t.tv_nsec = 0;
	CHECK_EQ_INT(nemo_event_timedwait(&e, CLOCK_THREAD_CPUTIME_ID, &t), EINVAL);
	CHECK_EQ_INT(nemo_event_destroy(&e), 0);
	CHECK_EQ_INT(nemo_event_post(&e), EINVAL);   /* destroyed */
}

static void test_auto_reset(void)
{
	nemo_event e;
	nemo_wait_policy pols[] = { { NEMO_WAIT_SPIN, 0 }, { NEMO_WAIT_BLOCK, 0 },
				    { NEMO_WAIT_HYBRID, 500 }, { NEMO_WAIT_ADAPTIVE, 0 } };
	for (int i = 0; i < 4; i++) {
		CHECK_EQ_INT(nemo_event_init(&e, NEMO_EVENT_AUTO_RESET, &pols[i]), 0);
		CHECK_EQ_INT(nemo_event_trywait(&e), EAGAIN);
		CHECK_EQ_INT(nemo_event_post(&e), 0);
		CHECK_EQ_INT(nemo_event_post(&e), 0);    /* coalesces */
		CHECK_EQ_INT(nemo_event_trywait(&e), 0);
		CHECK_EQ_INT(nemo_event_trywait(&e), EAGAIN);
		nemo_event_post(&e);
		CHECK_EQ_INT(nemo_event_wait(&e), 0);    /* set: no wait */
		struct timespec d = in_ms(CLOCK_MONOTONIC, 3);
		CHECK_EQ_INT(nemo_event_timedwait(&e, CLOCK_MONOTONIC, &d), ETIMEDOUT);
		d = in_ms(CLOCK_REALTIME, 3);
		CHECK_EQ_INT(nemo_event_timedwait(&e, CLOCK_REALTIME, &d), ETIMEDOUT);
		nemo_event_post(&e);
		CHECK_EQ_INT(nemo_event_reset(&e), 0);
		CHECK_EQ_INT(nemo_event_trywait(&e), EAGAIN);
		CHECK_EQ_INT(nemo_event_destroy(&e), 0);
	}
	CHECK_EQ_INT(nemo_event_init(&e, NEMO_EVENT_INITIALLY_SET, NULL), 0);
	CHECK_EQ_INT(nemo_event_trywait(&e), 0);
	CHECK_EQ_INT(nemo_event_trywait(&e), EAGAIN);
}

/* Manual reset: one post releases every sleeper, then stays set. */
static nemo_event manual;
static atomic_int released;
static int payload;
static int seen[8];

static void *manual_waiter(void *p)
{
	int i = (int)(intptr_t)p;
	CHECK_EQ_INT(nemo_event_wait(&manual), 0);
	seen[i] = payload;
	atomic_fetch_add(&released, 1);
	return NULL;
}

static void test_manual_reset(void)
{
	nemo_wait_policy blk = { NEMO_WAIT_BLOCK, 0 };
	CHECK_EQ_INT(nemo_event_init(&manual, NEMO_EVENT_MANUAL_RESET, &blk), 0);
	pthread_t th[8];
	nemo_waiter_counters c0, c1;
	CHECK_EQ_INT(nemo_waiter_get_counters(&c0), 0);
	for (int i = 0; i < 8; i++)
		pthread_create(&th[i], NULL, manual_waiter, (void *)(intptr_t)i);
	/* Until all eight sleep: a sleep is counted once the sleeper is in
	 * the event's word (as test_errors.c), so destroy must see them.  A
	 * sleep of 20 ms was no handshake: on a loaded machine a waiter had
	 * not yet arrived, destroy succeeded and the event was gone. */
	do {
		usleep(1000);
		nemo_waiter_get_counters(&c1);
	} while (c1.sleeps - c0.sleeps < 8);
	/* Sleepers make destroy refuse (the event stays usable). */
	CHECK_EQ_INT(nemo_event_destroy(&manual), EBUSY);
	payload = 4242;
	CHECK_EQ_INT(nemo_event_post(&manual), 0);
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	CHECK_EQ_INT(atomic_load(&released), 8);
	for (int i = 0; i < 8; i++)
		CHECK_EQ_INT(seen[i], 4242);
	CHECK_EQ_INT(nemo_event_trywait(&manual), 0);   /* still set */
	CHECK_EQ_INT(nemo_event_trywait(&manual), 0);
	nemo_event_reset(&manual);
	CHECK_EQ_INT(nemo_event_trywait(&manual), EAGAIN);
	CHECK_EQ_INT(nemo_event_destroy(&manual), 0);
}

/* Auto reset: K posts to K sleepers release each exactly once. */
static nemo_event autoev;
static atomic_int auto_done;

static void *auto_waiter(void *p)
{
	(void)p;
	CHECK_EQ_INT(nemo_event_wait(&autoev), 0);
	atomic_fetch_add(&auto_done, 1);
	return NULL;
}

static void test_auto_one_each(void)
{
	nemo_wait_policy blk = { NEMO_WAIT_BLOCK, 0 };
	nemo_event_init(&autoev, 0, &blk);
	pthread_t th[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, auto_waiter, NULL);
	for (int i = 1; i <= 4; i++) {
		/* Post only when the previous one was taken, so none coalesce. */
		nemo_event_post(&autoev);
		while (atomic_load(&auto_done) < i)
			usleep(100);
		usleep(1000);
		CHECK_EQ_INT(atomic_load(&auto_done), i);   /* one post, one waiter */
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	CHECK_EQ_INT(nemo_event_destroy(&autoev), 0);
}

int main(void)
{
	nemo_clock_init();
	test_errors();
	test_auto_reset();
	test_manual_reset();
	test_auto_one_each();
	return check_exit("test_event");
}
