/*
 * test_delays.c - notification delays (NEMO_DOMAIN_DELAYS, nemo/poll.h):
 * every active message is counted once in its receiver's histogram, and a
 * receiver that polls only after sleeping 2 ms sees delays of at least
 * 2 ms (a lower bound: no load can make it shorter); errors.
 */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/nemo.h>

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

static void nop(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	(void)ctx;
}

static atomic_int sent;

static void *sender(void *p)
{
	nemo_domain *d = ((void **)p)[0];
	nemo_place_id rx = *(nemo_place_id *)((void **)p)[1];
	for (int i = 0; i < 100; i++)
		CHECK_EQ_INT(nemo_domain_am_send(d, rx, 1, (uint64_t)i, NULL, 0, 0), 0);
	uint64_t args[50] = { 0 };
	size_t k;
	CHECK_EQ_INT(nemo_am_send_batch(rx, 1, args, 50, 0, &k), 0);
	atomic_store(&sent, 1);
	return NULL;
}

int main(void)
{
	nemo_domain *d;
	nemo_domain_attr bad = { .flags = 0x10 };
	CHECK_EQ_INT(nemo_domain_create(&bad, &d), EINVAL);
	CHECK_EQ_INT(nemo_domain_create(NULL, &d), 0);
	nemo_place_id me;
	CHECK_EQ_INT(nemo_place_join(d, NULL, &me), 0);
	nemo_delay_stats s;
	CHECK_EQ_INT(nemo_place_delays(d, me, &s), ENOTSUP);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(d), 0);

	nemo_domain_attr a = { .flags = NEMO_DOMAIN_DELAYS };
	CHECK_EQ_INT(nemo_domain_create(&a, &d), 0);
	CHECK_EQ_INT(nemo_action_register(d, 1, nop, NULL), 0);
	CHECK_EQ_INT(nemo_place_join(d, NULL, &me), 0);
	CHECK_EQ_INT(nemo_place_delays(d, me, NULL), EINVAL);
	CHECK_EQ_INT(nemo_place_delays(d, me + (1ull << 16), &s), ESRCH);
	CHECK_EQ_INT(nemo_place_delays(d, me, &s), 0);
	CHECK_EQ_INT(s.count, 0);
	uint64_t q;
	CHECK_EQ_INT(nemo_delay_percentile(&s, 0.5, &q), ENOENT);
	CHECK_EQ_INT(nemo_delay_percentile(&s, 1.5, &q), EINVAL);

	void *args[2] = { d, &me };
	pthread_t t;
	pthread_create(&t, NULL, sender, args);
	pthread_join(t, NULL);
	struct timespec two = { 0, 2000000 };
	nanosleep(&two, NULL);
	unsigned h = 0, total = 0;
	while (total < 150) {
		CHECK_EQ_INT(nemo_poll(&h), 0);
		total += h;
	}
	CHECK_EQ_INT(nemo_place_delays(d, me, &s), 0);
	CHECK_EQ_INT(s.count, 150);
	CHECK(s.max_ns >= 2000000);
	CHECK(s.sum_ns >= 150ull * 2000000);
	uint64_t n = 0;
	for (unsigned k = 0; k < NEMO_DELAY_BUCKETS; k++)
		n += s.buckets[k];
	CHECK_EQ_INT(n, 150);
	CHECK_EQ_INT(nemo_delay_percentile(&s, 0.5, &q), 0);
	CHECK(q >= 1048576 && q <= s.max_ns);     /* the 2 ms bucket or above */
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(d), 0);
	return check_exit("test_delays");
}
