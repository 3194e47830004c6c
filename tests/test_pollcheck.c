/*
 * test_pollcheck.c - threshold checks (nemo/poll.h): a place that only
 * computes, with NEMO_POLL_CHECK() in its loop, handles every message
 * sent to it; a check that is not due does not poll; a check in a thread
 * that is not a place, or inside a handler, never polls; bad values are
 * errors.
 */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/nemo.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { ACT_HIT = 1, ACT_NESTED = 2 };
#define MSGS 20000u

static atomic_uint hits;
static atomic_uint ctx_bad;

static void on_hit(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	if (m->context != NEMO_AM_CTX_POLL)
		atomic_fetch_add(&ctx_bad, 1);
	atomic_fetch_add(&hits, 1);
}

/* A check inside a handler must not poll again (its caller polls). */
static void on_nested(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	(void)ctx;
	uint64_t p0, h0, p1, h1;
	nemo_poll_check_counters(&p0, &h0);
	for (int i = 0; i < 100; i++)
		NEMO_POLL_CHECK();
	nemo_poll_check_counters(&p1, &h1);
	CHECK_EQ_INT(p1, p0);
}

struct shared {
	nemo_domain *d;
	_Atomic nemo_place_id rx;
};

static void *sender(void *p)
{
	struct shared *s = p;
	CHECK_EQ_INT(nemo_place_join(s->d, NULL, NULL), 0);
	for (unsigned i = 0; i < MSGS; i++)
		CHECK_EQ_INT(nemo_am_send(atomic_load(&s->rx), ACT_HIT, i, 0), 0);
	CHECK_EQ_INT(nemo_am_send(atomic_load(&s->rx), ACT_NESTED, 0, 0), 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static volatile uint64_t sink;

int main(void)
{
	/* Not a place: a no-op, and the calls say so. */
	for (int i = 0; i < 1000; i++)
		NEMO_POLL_CHECK();
	uint64_t v = 0, v2 = 0;
	CHECK_EQ_INT(nemo_poll_threshold_set(1000), ENOTCONN);
	CHECK_EQ_INT(nemo_poll_threshold_get(&v), ENOTCONN);
	CHECK_EQ_INT(nemo_poll_check_counters(&v, &v2), ENOTCONN);

	struct shared s;
	CHECK_EQ_INT(nemo_domain_create(NULL, &s.d), 0);
	CHECK_EQ_INT(nemo_action_register(s.d, ACT_HIT, on_hit, NULL), 0);
	CHECK_EQ_INT(nemo_action_register(s.d, ACT_NESTED, on_nested, NULL), 0);
	nemo_place_id rx;
	CHECK_EQ_INT(nemo_place_join(s.d, NULL, &rx), 0);
	atomic_store(&s.rx, rx);
	CHECK_EQ_INT(nemo_poll_threshold_get(&v), 0);
	CHECK_EQ_INT(v, NEMO_POLL_THRESHOLD_DEFAULT_NS);
	CHECK_EQ_INT(nemo_poll_threshold_get(NULL), EINVAL);
	CHECK_EQ_INT(nemo_poll_threshold_set(10000000001ull), EINVAL);
	CHECK(strstr(nemo_last_error(), "above 10 s") != NULL);
	CHECK_EQ_INT(nemo_poll_check_counters(NULL, &v), EINVAL);

	/* Not due: a 10 s threshold, a million checks right after a poll. */
	CHECK_EQ_INT(nemo_poll_threshold_set(10000000000ull), 0);
	NEMO_POLL_CHECK();          /* decides: polls once, sets the deadline */
	uint64_t p0, h0, p1, h1;
	CHECK_EQ_INT(nemo_poll_check_counters(&p0, &h0), 0);
	for (int i = 0; i < 1000000; i++)
		NEMO_POLL_CHECK();
	CHECK_EQ_INT(nemo_poll_check_counters(&p1, &h1), 0);
	CHECK_EQ_INT(p1, p0);

	/* Computing with checks in the loop (threshold 2 us): every message
	 * is handled by a check, none by anything else. */
	CHECK_EQ_INT(nemo_poll_threshold_set(2000), 0);
	pthread_t t;
	pthread_create(&t, NULL, sender, &s);
	for (uint64_t i = 0; atomic_load(&hits) < MSGS; i++) {
		sink = sink * 31 + i;       /* "work" */
		NEMO_POLL_CHECK();
	}
	pthread_join(t, NULL);
	while (!nemo_poll_check_counters(&p1, &h1) && h1 - h0 < MSGS + 1)
		NEMO_POLL_CHECK();          /* the nested-check message */
	CHECK_EQ_INT(atomic_load(&hits), MSGS);
	CHECK_EQ_INT(atomic_load(&ctx_bad), 0);
	CHECK_EQ_INT(h1 - h0, MSGS + 1);
	CHECK(p1 > p0);
	nemo_domain_counters c;
	CHECK_EQ_INT(nemo_domain_get_counters(s.d, &c), 0);
	CHECK_EQ_INT(c.poll_checks, p1);
	printf("pollcheck: %u messages handled by %llu polling checks\n", MSGS, (unsigned long long)(p1 - p0));
	CHECK_EQ_INT(nemo_place_leave(), 0);
	/* Left: a no-op again. */
	for (int i = 0; i < 1000; i++)
		NEMO_POLL_CHECK();
	CHECK_EQ_INT(nemo_domain_destroy(s.d), 0);
	return check_exit("test_pollcheck");
}
