/*
 * test_bound.c - bound sends (nemo/am.h, "Bound sends"): validated once,
 * delivered in order with generic sends, ESRCH once the destination
 * leaves, ENOTCONN for another thread or after the binder left, the
 * generic path (waits, overflow) when the ring is full or in a handler,
 * bound notifications; every error of the binding calls.  And the
 * generic send's curry (bound.c, THE GENERIC SEND CURRIES ITSELF): exact
 * counters, order with bound sends, the generic errors once its
 * destination left, a new occupant of either index, interrupt mode,
 * NEMO_MORE, events, handlers.
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

/* ------------------------------------------------------------ curry */

static atomic_ulong ev_got;

static void on_ev(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	(void)ctx;
	atomic_fetch_add(&ev_got, 1);
}

/* The generic send's curry: everything it must keep of the generic
 * path.  rx drains (the receiver thread above). */
static void test_curry(nemo_domain *d, struct rx *r)
{
	nemo_place_id rx = atomic_load(&r->id), me = nemo_place_self();
	nemo_domain_counters c0, c1;
	/* Counters exact after every send (a binding's lag by up to 64: one
	 * generic send settles them first). */
	uint64_t base = next_seq;
	CHECK_EQ_INT(nemo_am_sendv(rx, ACT_SEQ, base++, NULL, 0, 0), 0);
	CHECK_EQ_INT(nemo_domain_get_counters(d, &c0), 0);
	while (atomic_load(&got) < base)
		sched_yield();
	for (uint64_t i = 0; i < 1000; i++) {
		CHECK_EQ_INT(nemo_am_send(rx, ACT_SEQ, base + i, 0), 0);
		if (i % 97 == 0) {
			CHECK_EQ_INT(nemo_domain_get_counters(d, &c1), 0);
			CHECK_EQ_INT(c1.am_sent - c0.am_sent, i + 1);
		}
	}
	/* Curried and bound sends on one pair, in order, counted once each. */
	nemo_am_bound *b;
	CHECK_EQ_INT(nemo_am_bind(rx, ACT_SEQ, 0, &b), 0);
	for (uint64_t i = 1000; i < 5000; i++)
		CHECK_EQ_INT((i % 5) ? nemo_am_send(rx, ACT_SEQ, base + i, 0) : nemo_am_send_bound(b, base + i), 0);
	CHECK_EQ_INT(nemo_am_send(rx, ACT_SEQ, base + 5000, NEMO_MORE), 0);   /* NEMO_MORE: generic */
	CHECK_EQ_INT(nemo_am_send(rx, ACT_SEQ, base + 5001, NEMO_MORE), 0);
	CHECK_EQ_INT(nemo_flush(rx), 0);
	CHECK_EQ_INT(nemo_am_unbind(b), 0);
	CHECK_EQ_INT(nemo_am_send(rx, ACT_SEQ, base + 5002, 0), 0);   /* settles the binding's last ones */
	while (atomic_load(&got) < base + 5003)
		sched_yield();
	CHECK_EQ_INT(atomic_load(&bad), 0);
	CHECK_EQ_INT(nemo_domain_get_counters(d, &c1), 0);
	CHECK_EQ_INT(c1.am_sent - c0.am_sent, 5003);
	/* Events are not curried: a remapped event reaches its new action. */
	CHECK_EQ_INT(nemo_action_register(d, 3, on_ev, NULL), 0);
	CHECK_EQ_INT(nemo_am_event_map(9, 3), 0);
	for (int i = 0; i < 10; i++)
		CHECK_EQ_INT(nemo_am_send(me, NEMO_AM_EVENT(9), 0, 0), 0);
	CHECK_EQ_INT(nemo_am_event_map(9, ACT_SEQ), 0);
	next_seq = 777;
	CHECK_EQ_INT(nemo_am_send(me, NEMO_AM_EVENT(9), 777, 0), 0);
	unsigned h = 0;
	while (atomic_load(&ev_got) < 10 || atomic_load(&got) < base + 5004) {
		nemo_poll(&h);
		sched_yield();
	}
	CHECK_EQ_INT(atomic_load(&ev_got), 10);
	CHECK_EQ_INT(atomic_load(&bad), 0);
	/* In interrupt mode (the fast path brackets its stores). */
	CHECK_EQ_INT(nemo_place_set_interrupts(true), 0);
	next_seq = 0;
	uint64_t g0 = atomic_load(&got);
	for (uint64_t i = 0; i < 2000; i++)
		CHECK_EQ_INT(nemo_am_send(rx, ACT_SEQ, i, 0), 0);
	CHECK_EQ_INT(nemo_place_set_interrupts(false), 0);
	while (atomic_load(&got) < g0 + 2000)
		sched_yield();
	CHECK_EQ_INT(atomic_load(&bad), 0);
	next_seq = 2000;
}

/* The curry's destination leaves: the generic path's error, not the
 * binding's; and a curry made before our own leave is not used by the
 * index's next occupant. */
static void test_curry_gone(void)
{
	nemo_domain *d;
	nemo_domain_attr a = { .ring_slots = 16, .max_places = 2 };
	CHECK_EQ_INT(nemo_domain_create(&a, &d), 0);
	CHECK_EQ_INT(nemo_action_register(d, ACT_SEQ, on_seq, NULL), 0);
	struct rx r = { .d = d, .id = NEMO_PLACE_NONE };
	pthread_t t;
	pthread_create(&t, NULL, receiver, &r);
	while (atomic_load(&r.id) == NEMO_PLACE_NONE)
		sched_yield();
	nemo_place_id rx = atomic_load(&r.id);
	CHECK_EQ_INT(nemo_place_join(d, NULL, NULL), 0);
	next_seq = 0;
	uint64_t g0 = atomic_load(&got);
	for (uint64_t i = 0; i < 100; i++)
		CHECK_EQ_INT(nemo_am_send(rx, ACT_SEQ, i, 0), 0);
	while (atomic_load(&got) < g0 + 100)
		sched_yield();
	atomic_store(&r.leave_now, 1);
	pthread_join(t, NULL);
	CHECK_EQ_INT(nemo_am_send(rx, ACT_SEQ, 100, 0), ESRCH);
	CHECK(strstr(nemo_last_error(), "binding") == NULL);
	/* We leave and join again (the same record, a new generation). */
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_am_send(rx, ACT_SEQ, 100, 0), ENOTCONN);
	CHECK_EQ_INT(nemo_place_join(d, NULL, NULL), 0);
	CHECK_EQ_INT(nemo_am_send(rx, ACT_SEQ, 100, 0), ESRCH);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(d), 0);
	CHECK_EQ_INT(atomic_load(&bad), 0);
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

	test_curry(d, &r);

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
	test_curry_gone();
	return check_exit("test_bound");
}
