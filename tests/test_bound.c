/*
 * test_bound.c - bound sends (nemo/am.h, "Bound sends"): validated once,
 * delivered in order with generic sends, ESRCH once the destination
 * leaves, ENOTCONN for another thread or after the binder left, the
 * generic path (waits, overflow) when the ring is full or in a handler,
 * bound notifications; every error of the binding calls.
 */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/nemo.h>

#include <errno.h>
#include <pthread.h>
#include <string.h>

enum { ACT_SEQ = 1, ACT_FWD = 2 };

static uint64_t next_seq;
static atomic_ulong bad, got, nf_got;
static nemo_am_bound *fwd_bound;      /* used inside a handler */

static void on_seq(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	if (m->arg != next_seq)
		atomic_fetch_add(&bad, 1);
	next_seq = m->arg + 1;
	atomic_fetch_add(&got, 1);
}

static void on_nf(void *ctx, nemo_place_id src, uint32_t chan)
{
	(void)ctx;
	(void)src;
	if (chan != 7)
		atomic_fetch_add(&bad, 1);
	atomic_fetch_add(&nf_got, 1);
}

struct rx {
	nemo_domain *d;
	_Atomic nemo_place_id id;
	atomic_int stop, leave_now;
};

static void *receiver(void *p)
{
	struct rx *r = p;
	nemo_place_id id;
	CHECK_EQ_INT(nemo_place_join(r->d, NULL, &id), 0);
	CHECK_EQ_INT(nemo_notify_set_handler(on_nf, NULL), 0);
	atomic_store(&r->id, id);
	while (!atomic_load(&r->stop) && !atomic_load(&r->leave_now)) {
		struct timespec dl = in_ms(CLOCK_MONOTONIC, 20);
		nemo_place_wait(&dl, NULL);
	}
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void *other_thread(void *p)
{
	CHECK_EQ_INT(nemo_am_send_bound(p, 1), ENOTCONN);
	return NULL;
}

/* A handler that forwards with a bound send: the generic path's rules
 * (never waits; kept if full) apply. */
static void on_fwd(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	CHECK_EQ_INT(nemo_am_send_bound(fwd_bound, m->arg), 0);
}

int main(void)
{
	nemo_am_bound *b = NULL;
	CHECK_EQ_INT(nemo_am_bind(0, ACT_SEQ, 0, &b), ENOTCONN);
	CHECK_EQ_INT(nemo_am_send_bound(NULL, 0), EINVAL);
	CHECK_EQ_INT(nemo_am_unbind(NULL), EINVAL);

	nemo_domain *d;
	nemo_domain_attr a = { .ring_slots = 16 };
	CHECK_EQ_INT(nemo_domain_create(&a, &d), 0);
	CHECK_EQ_INT(nemo_action_register(d, ACT_SEQ, on_seq, NULL), 0);
	CHECK_EQ_INT(nemo_action_register(d, ACT_FWD, on_fwd, NULL), 0);
	struct rx r = { .d = d, .id = NEMO_PLACE_NONE };
	pthread_t t;
	pthread_create(&t, NULL, receiver, &r);
	while (atomic_load(&r.id) == NEMO_PLACE_NONE)
		sched_yield();
	nemo_place_id rx = atomic_load(&r.id), me;
	CHECK_EQ_INT(nemo_place_join(d, NULL, &me), 0);

	CHECK_EQ_INT(nemo_am_bind(rx, ACT_SEQ, 0, NULL), EINVAL);
	CHECK_EQ_INT(nemo_am_bind(rx, ACT_SEQ, 0x40, &b), EINVAL);
	CHECK_EQ_INT(nemo_am_bind(rx, 99, 0, &b), ENOENT);
	CHECK_EQ_INT(nemo_am_bind(rx, 5000, 0, &b), ERANGE);
	CHECK_EQ_INT(nemo_am_bind(rx + (1ull << 16), ACT_SEQ, 0, &b), ESRCH);
	CHECK_EQ_INT(nemo_notify_bind(rx, 70000, 0, &b), ERANGE);
	CHECK(b == NULL);

	/* Bound and generic sends interleaved, through a 16-slot ring (the
	 * bound path falls back to the generic one when it is full). */
	CHECK_EQ_INT(nemo_am_bind(rx, ACT_SEQ, 0, &b), 0);
	for (uint64_t i = 0; i < 100000; i++) {
		int e = (i % 3) ? nemo_am_send_bound(b, i) : nemo_am_send(rx, ACT_SEQ, i, 0);
		if (e) {
			CHECK_EQ_INT(e, 0);
			break;
		}
	}
	while (atomic_load(&got) < 100000)
		sched_yield();
	CHECK_EQ_INT(atomic_load(&bad), 0);
	pthread_t o;
	pthread_create(&o, NULL, other_thread, b);
	pthread_join(o, NULL);

	/* Bound notifications. */
	nemo_am_bound *nb;
	CHECK_EQ_INT(nemo_notify_bind(rx, 7, 0, &nb), 0);
	CHECK_EQ_INT(nemo_notify_bound(b), EINVAL);
	for (int i = 0; i < 1000; i++)
		CHECK_EQ_INT(nemo_notify_bound(nb), 0);
	while (atomic_load(&nf_got) < 1000)
		sched_yield();

	/* From a handler: a message to ourselves forwards 2000 times to rx. */
	CHECK_EQ_INT(nemo_am_bind(rx, ACT_SEQ, 0, &fwd_bound), 0);
	for (uint64_t i = 100000; i < 102000; i++)
		CHECK_EQ_INT(nemo_am_send(me, ACT_FWD, i, 0), 0);
	while (atomic_load(&got) < 102000) {
		nemo_poll(NULL);
		sched_yield();
	}
	CHECK_EQ_INT(atomic_load(&bad), 0);

	/* The destination leaves: the next bound send fails cleanly. */
	atomic_store(&r.leave_now, 1);
	pthread_join(t, NULL);
	CHECK_EQ_INT(nemo_am_send_bound(b, 1), ESRCH);
	CHECK_EQ_INT(nemo_notify_bound(nb), ESRCH);
	CHECK(strstr(nemo_last_error(), "left") != NULL);

	/* The binder leaves: its bindings are spent, and touch nothing. */
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_am_send_bound(b, 1), ENOTCONN);
	CHECK_EQ_INT(nemo_am_unbind(b), 0);
	CHECK_EQ_INT(nemo_am_unbind(nb), 0);
	CHECK_EQ_INT(nemo_am_unbind(fwd_bound), 0);
	CHECK_EQ_INT(nemo_domain_destroy(d), 0);
	return check_exit("test_bound");
}
