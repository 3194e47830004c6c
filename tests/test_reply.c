/*
 * test_reply.c - request/reply that cannot lose a reply (nemo/domain.h,
 * "Sends from handlers"; nemo/am.h, "Request and reply").
 *
 *   pool        the worker pool a user writes first: more workers than
 *               CPUs, default ring sizes, no flow control; the main place
 *               sends NEMO_POOL_TASKS (default 10^6) tasks round-robin and
 *               each worker replies from its handler with nemo_am_reply.
 *               Every reply must arrive exactly once, with its tag and
 *               result, and nothing may hang.
 *   plain       the same from a thread that never joins: it sends with
 *               nemo_domain_am_send and waits for its replies.
 *   order       sends kept in a handler's overflow arrive in order, also
 *               when the place sends again from outside a handler, and
 *               notifications too.
 *   bound       a full overflow fails with ENOBUFS and queues nothing.
 *   dropped     kept sends to a receiver that left are counted.
 *   errors      nemo_am_reply, nemo_domain_am_send: their errors.
 *
 * A watchdog turns a hang into a failure with a message.
 */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/nemo.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { ACT_TASK = 1, ACT_RESULT = 2, ACT_SEQ = 3, ACT_KEEP = 4, ACT_SPAM = 5 };

static uint64_t f(uint64_t x)
{
	return x * 2654435761u + 7;
}

/* ------------------------------------------------------------ watchdog */

static const char *volatile phase = "start";

static void on_alarm(int sig)
{
	(void)sig;
	char buf[200];
	int n = snprintf(buf, sizeof buf, "test_reply: no progress for 100 s in phase '%s': hang\n", phase);
	if (n > 0) {
		ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
		(void)w;
	}
	_exit(1);
}

/* ---------------------------------------------------------------- pool */

struct worker {
	pthread_t t;
	nemo_domain *d;
	nemo_place_id id;
	atomic_int ready;
	uint64_t tasks;            /* handled by this worker (its own place_ctx) */
	atomic_int reply_errors;
};

static atomic_int stop_workers;

static void on_task(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	struct worker *w = m->place_ctx;
	w->tasks++;
	int err = nemo_am_reply(m, ACT_RESULT, f(m->arg), NULL, 0, 0);
	if (err) {
		if (atomic_fetch_add(&w->reply_errors, 1) < 5)
			fprintf(stderr, "reply failed: %s (%s)\n", strerror(err), nemo_last_error());
	}
}

static void *worker_main(void *p)
{
	struct worker *w = p;
	nemo_place_attr a = { .context = w };
	CHECK_EQ_INT(nemo_place_join(w->d, &a, &w->id), 0);
	CHECK(nemo_place_context() == w);
	atomic_store(&w->ready, 1);
	while (!atomic_load(&stop_workers)) {
		struct timespec dl = in_ms(CLOCK_MONOTONIC, 50);
		int rc = nemo_place_wait(&dl, NULL);
		CHECK(rc == 0 || rc == ETIMEDOUT);
	}
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

struct results {
	size_t n;
	unsigned char *seen;       /* times each task's reply arrived */
	atomic_size_t got;
	atomic_size_t bad;         /* wrong result, missing tag, unknown tag */
};

static void on_result(const nemo_am_msg *m, void *ctx)
{
	struct results *r = ctx;
	if (!m->is_reply || m->tag >= r->n || m->arg != f(m->tag)) {
		if (atomic_fetch_add(&r->bad, 1) < 5)
			fprintf(stderr, "bad reply: is_reply %d tag %llu arg %llu\n", m->is_reply,
				(unsigned long long)m->tag, (unsigned long long)m->arg);
		return;
	}
	if (r->seen[m->tag] < 255)
		r->seen[m->tag]++;
	atomic_fetch_add(&r->got, 1);
}

/* Wait (as a place) until r->got reaches n, re-arming the watchdog while
 * replies come in. */
static void wait_all(struct results *r)
{
	size_t last = 0;
	while (atomic_load(&r->got) < r->n) {
		struct timespec dl = in_ms(CLOCK_MONOTONIC, 200);
		int rc = nemo_place_wait(&dl, NULL);
		CHECK(rc == 0 || rc == ETIMEDOUT);
		size_t g = atomic_load(&r->got);
		if (g != last) {
			last = g;
			alarm(100);
		}
	}
}

static void check_results(struct results *r, const char *what)
{
	size_t lost = 0, dup = 0;
	for (size_t i = 0; i < r->n; i++) {
		lost += r->seen[i] == 0;
		dup += r->seen[i] > 1;
	}
	if (lost || dup)
		fprintf(stderr, "%s: %zu replies lost, %zu duplicated\n", what, lost, dup);
	CHECK_EQ_INT(lost, 0);
	CHECK_EQ_INT(dup, 0);
	CHECK_EQ_INT(atomic_load(&r->bad), 0);
}

static void test_pool(size_t ntasks)
{
	phase = "pool";
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned nw = (unsigned)(ncpu > 0 ? ncpu : 2) * 2 + 1;   /* more workers than CPUs */
	if (nw > 33)
		nw = 33;
	nemo_domain *d;
	CHECK_EQ_INT(nemo_domain_create(NULL, &d), 0);    /* default ring sizes */
	struct results res = { .n = ntasks, .seen = calloc(ntasks, 1) };
	CHECK_EQ_INT(nemo_action_register(d, ACT_TASK, on_task, NULL), 0);
	CHECK_EQ_INT(nemo_action_register(d, ACT_RESULT, on_result, &res), 0);
	nemo_place_id me;
	CHECK_EQ_INT(nemo_place_join(d, NULL, &me), 0);
	struct worker *ws = calloc(nw, sizeof *ws);
	atomic_store(&stop_workers, 0);
	for (unsigned i = 0; i < nw; i++) {
		ws[i].d = d;
		pthread_create(&ws[i].t, NULL, worker_main, &ws[i]);
	}
	for (unsigned i = 0; i < nw; i++)
		while (!atomic_load(&ws[i].ready))
			sched_yield();
	alarm(100);
	for (size_t k = 0; k < ntasks; k++) {
		int err = nemo_am_send(ws[k % nw].id, ACT_TASK, k, 0);
		if (err) {
			fprintf(stderr, "task %zu: %s (%s)\n", k, strerror(err), nemo_last_error());
			CHECK_EQ_INT(err, 0);
			break;
		}
		if (k % 4096 == 0)
			alarm(100);
	}
	wait_all(&res);
	check_results(&res, "pool");
	atomic_store(&stop_workers, 1);
	uint64_t handled = 0;
	int rerr = 0;
	for (unsigned i = 0; i < nw; i++) {
		pthread_join(ws[i].t, NULL);
		handled += ws[i].tasks;
		rerr += atomic_load(&ws[i].reply_errors);
	}
	CHECK_EQ_INT(handled, ntasks);
	CHECK_EQ_INT(rerr, 0);
	nemo_domain_counters c;
	CHECK_EQ_INT(nemo_domain_get_counters(d, &c), 0);
	CHECK_EQ_INT(c.overflow_dropped, 0);
	CHECK_EQ_INT(c.am_sent, 2 * ntasks);
	CHECK_EQ_INT(c.am_handled, 2 * ntasks);
	printf("pool: %zu tasks, %u workers on %ld CPUs: every reply once; %llu replies went through an overflow, "
	       "%llu full waits\n", ntasks, nw, ncpu, (unsigned long long)c.overflowed,
	       (unsigned long long)c.full_waits);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(d), 0);
	free(ws);
	free(res.seen);
}

/* --------------------------------------------------------------- plain */

struct plain {
	nemo_domain *d;
	nemo_place_id worker;
	size_t n;
	struct results *res;
	nemo_place_id self;
};

static void *plain_main(void *p)
{
	struct plain *pl = p;
	CHECK(nemo_place_self() == NEMO_PLACE_NONE);
	for (size_t k = 0; k < pl->n; k++) {
		int err = nemo_domain_am_send(pl->d, pl->worker, ACT_TASK, k, NULL, 0, 0);
		if (err) {
			fprintf(stderr, "plain send %zu: %s\n", k, nemo_last_error());
			CHECK_EQ_INT(err, 0);
			break;
		}
		/* Sends that complete are progress (as in the pool phase): the
		 * watchdog fired here once under ThreadSanitizer on a machine
		 * running ten threads per CPU, while every send still went
		 * through, a blocked send at a time. */
		if (k % 4096 == 0)
			alarm(100);
	}
	pl->self = nemo_place_self();     /* it joined at the first send */
	CHECK(pl->self != NEMO_PLACE_NONE);
	wait_all(pl->res);
	return NULL;                      /* and leaves as it exits */
}

static void test_plain(void)
{
	phase = "plain";
	nemo_domain *d;
	CHECK_EQ_INT(nemo_domain_create(NULL, &d), 0);
	struct results res = { .n = 100000 };
	res.seen = calloc(res.n, 1);
	CHECK_EQ_INT(nemo_action_register(d, ACT_TASK, on_task, NULL), 0);
	CHECK_EQ_INT(nemo_action_register(d, ACT_RESULT, on_result, &res), 0);
	struct worker w = { .d = d };
	atomic_store(&stop_workers, 0);
	pthread_create(&w.t, NULL, worker_main, &w);
	while (!atomic_load(&w.ready))
		sched_yield();
	alarm(100);
	struct plain pl = { d, w.id, res.n, &res, 0 };
	pthread_t t;
	pthread_create(&t, NULL, plain_main, &pl);
	pthread_join(t, NULL);
	check_results(&res, "plain");
	/* It left when it exited: its id is gone. */
	CHECK_EQ_INT(nemo_place_check(d, pl.self), ESRCH);
	atomic_store(&stop_workers, 1);
	pthread_join(w.t, NULL);
	CHECK_EQ_INT(nemo_domain_destroy(d), 0);
	free(res.seen);
}

/* --------------------------------------------------------------- order */

/* The receiver checks that values from each sender come in order. */
static uint64_t seq_next, nf_next;
static atomic_int seq_bad;

static void on_seq(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	if (m->arg != seq_next) {
		if (atomic_fetch_add(&seq_bad, 1) < 5)
			fprintf(stderr, "order: got %llu, expected %llu\n", (unsigned long long)m->arg,
				(unsigned long long)seq_next);
		seq_next = m->arg;
	}
	seq_next++;
	if (m->len) {
		uint64_t v;
		memcpy(&v, m->payload, sizeof v);
		if (v != ~m->arg)
			atomic_fetch_add(&seq_bad, 1);
	}
}

static void on_nf(void *ctx, nemo_place_id src, uint32_t chan)
{
	(void)ctx;
	(void)src;
	if (chan != (nf_next & 0xFFFF))
		atomic_fetch_add(&seq_bad, 1);
	nf_next++;
}

/* The keeper's handler: sends `arg` messages (and notifications) to the
 * sink, whose ring and FIFO are small and which is not draining yet. */
static nemo_place_id sink_id;
static uint64_t sent_seq;
static atomic_int keep_err;

static void on_keep(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	for (uint64_t i = 0; i < m->arg; i++) {
		uint64_t v = ~sent_seq;
		int e1 = nemo_am_sendv(sink_id, ACT_SEQ, sent_seq, &v, (sent_seq & 1) ? sizeof v : 0, 0);
		int e2 = nemo_notify(sink_id, (uint32_t)(sent_seq & 0xFFFF), 0);
		if (e1 || e2) {
			atomic_fetch_add(&keep_err, 1);
			fprintf(stderr, "keep: %s\n", nemo_last_error());
		}
		sent_seq++;
	}
}

struct order {
	nemo_domain *d;
	atomic_int phase;          /* 1: sink joined; 2: may drain */
	atomic_int done;
	uint64_t total;
};

static void *sink_main(void *p)
{
	struct order *o = p;
	CHECK_EQ_INT(nemo_place_join(o->d, NULL, &sink_id), 0);
	CHECK_EQ_INT(nemo_notify_set_handler(on_nf, NULL), 0);
	atomic_store(&o->phase, 1);
	while (atomic_load(&o->phase) < 2)
		sched_yield();
	while (seq_next < o->total || nf_next < o->total) {
		struct timespec dl = in_ms(CLOCK_MONOTONIC, 100);
		nemo_place_wait(&dl, NULL);
	}
	atomic_store(&o->done, 1);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void test_order(void)
{
	phase = "order";
	seq_next = nf_next = sent_seq = 0;
	atomic_store(&seq_bad, 0);
	nemo_domain *d;
	nemo_domain_attr da = { .ring_slots = 8 };
	CHECK_EQ_INT(nemo_domain_create(&da, &d), 0);
	CHECK_EQ_INT(nemo_action_register(d, ACT_SEQ, on_seq, NULL), 0);
	CHECK_EQ_INT(nemo_action_register(d, ACT_KEEP, on_keep, NULL), 0);
	struct order o = { .d = d };
	pthread_t t;
	pthread_create(&t, NULL, sink_main, &o);
	while (atomic_load(&o.phase) < 1)
		sched_yield();
	alarm(100);
	nemo_place_id me;
	CHECK_EQ_INT(nemo_place_join(d, NULL, &me), 0);
	/* A message to ourselves whose handler sends 200 to the idle sink:
	 * the ring (8 slots) and FIFO (16) fill, the rest is kept. */
	CHECK_EQ_INT(nemo_am_send(me, ACT_KEEP, 200, 0), 0);
	unsigned h = 0;
	CHECK_EQ_INT(nemo_poll(&h), 0);
	CHECK_EQ_INT(h, 1);
	CHECK_EQ_INT(atomic_load(&keep_err), 0);
	nemo_domain_counters c;
	CHECK_EQ_INT(nemo_domain_get_counters(d, &c), 0);
	CHECK(c.overflowed > 150);
	/* Sends from outside a handler queue behind the kept ones: this
	 * one waits until they are delivered (the sink drains now). */
	o.total = 300;
	atomic_store(&o.phase, 2);
	for (uint64_t i = 0; i < 100; i++) {
		uint64_t v = ~sent_seq;
		CHECK_EQ_INT(nemo_am_sendv(sink_id, ACT_SEQ, sent_seq, &v, (sent_seq & 1) ? sizeof v : 0, 0), 0);
		CHECK_EQ_INT(nemo_notify(sink_id, (uint32_t)(sent_seq & 0xFFFF), 0), 0);
		sent_seq++;
	}
	while (!atomic_load(&o.done)) {
		struct timespec dl = in_ms(CLOCK_MONOTONIC, 50);
		nemo_place_wait(&dl, NULL);
	}
	pthread_join(t, NULL);
	CHECK_EQ_INT(atomic_load(&seq_bad), 0);
	CHECK_EQ_INT(seq_next, 300);
	CHECK_EQ_INT(nf_next, 300);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(d), 0);
}

/* ------------------------------------------------------ bound, dropped */

static atomic_int spam_ok, spam_nobufs, spam_other;

static void on_spam(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	for (uint64_t i = 0; i < m->arg; i++) {
		int e = nemo_am_send(sink_id, ACT_SEQ, i, 0);
		if (!e)
			atomic_fetch_add(&spam_ok, 1);
		else if (e == ENOBUFS)
			atomic_fetch_add(&spam_nobufs, 1);
		else
			atomic_fetch_add(&spam_other, 1);
	}
}

struct idle_sink {
	nemo_domain *d;
	atomic_int joined, go;
	unsigned handled;
};

static void *idle_sink_main(void *p)
{
	struct idle_sink *s = p;
	CHECK_EQ_INT(nemo_place_join(s->d, NULL, &sink_id), 0);
	atomic_store(&s->joined, 1);
	while (!atomic_load(&s->go))
		sched_yield();
	CHECK_EQ_INT(nemo_poll(&s->handled), 0);   /* what fits in its ring */
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void test_bound_and_dropped(void)
{
	phase = "bound";
	nemo_domain *d;
	nemo_domain_attr da = { .ring_slots = 8, .overflow_max = 5 };
	CHECK_EQ_INT(nemo_domain_create(&da, &d), 0);
	CHECK_EQ_INT(nemo_action_register(d, ACT_SEQ, on_seq, NULL), 0);
	CHECK_EQ_INT(nemo_action_register(d, ACT_SPAM, on_spam, NULL), 0);
	struct idle_sink s = { .d = d };
	pthread_t t;
	pthread_create(&t, NULL, idle_sink_main, &s);
	while (!atomic_load(&s.joined))
		sched_yield();
	nemo_place_id me;
	CHECK_EQ_INT(nemo_place_join(d, NULL, &me), 0);
	seq_next = 0;
	CHECK_EQ_INT(nemo_am_send(me, ACT_SPAM, 20, 0), 0);
	CHECK_EQ_INT(nemo_poll(NULL), 0);
	/* 8 in the ring, 5 kept, 7 refused. */
	CHECK_EQ_INT(atomic_load(&spam_ok), 13);
	CHECK_EQ_INT(atomic_load(&spam_nobufs), 7);
	CHECK_EQ_INT(atomic_load(&spam_other), 0);
	/* The sink takes its 8 and leaves; the 5 kept can no longer be
	 * delivered: dropped, and counted, at our next flush. */
	atomic_store(&s.go, 1);
	pthread_join(t, NULL);
	CHECK_EQ_INT(s.handled, 8);
	CHECK_EQ_INT(nemo_poll(NULL), 0);
	nemo_domain_counters c;
	CHECK_EQ_INT(nemo_domain_get_counters(d, &c), 0);
	CHECK_EQ_INT(c.overflowed, 5);
	CHECK_EQ_INT(c.overflow_dropped, 5);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(d), 0);

	/* overflow_max out of range */
	nemo_domain_attr bad = { .overflow_max = NEMO_OVERFLOW_MAX + 1 };
	CHECK_EQ_INT(nemo_domain_create(&bad, &d), EINVAL);
	CHECK(strstr(nemo_last_error(), "overflow_max") != NULL);
}

/* -------------------------------------------------------------- errors */

static void *other_domain_sender(void *p)
{
	nemo_domain **ds = p;
	CHECK_EQ_INT(nemo_place_join(ds[0], NULL, NULL), 0);
	CHECK_EQ_INT(nemo_domain_am_send(ds[1], 0, ACT_SEQ, 0, NULL, 0, 0), EXDEV);
	CHECK_EQ_INT(nemo_domain_notify(ds[1], 0, 0, 0), EXDEV);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void test_errors(void)
{
	phase = "errors";
	CHECK_EQ_INT(nemo_am_reply(NULL, ACT_SEQ, 0, NULL, 0, 0), ENOTCONN);
	CHECK_EQ_INT(nemo_domain_am_send(NULL, 0, ACT_SEQ, 0, NULL, 0, 0), EINVAL);
	CHECK_EQ_INT(nemo_domain_notify(NULL, 0, 0, 0), EINVAL);
	CHECK(nemo_place_context() == NULL);
	CHECK_EQ_INT(nemo_place_set_context(&stop_workers), ENOTCONN);
	int fd;
	CHECK_EQ_INT(nemo_place_fd(&fd), ENOTCONN);
	nemo_domain *ds[2];
	CHECK_EQ_INT(nemo_domain_create(NULL, &ds[0]), 0);
	CHECK_EQ_INT(nemo_domain_create(NULL, &ds[1]), 0);
	pthread_t t;
	pthread_create(&t, NULL, other_domain_sender, ds);
	pthread_join(t, NULL);
	nemo_place_id me;
	CHECK_EQ_INT(nemo_place_join(ds[0], NULL, &me), 0);
	CHECK_EQ_INT(nemo_am_reply(NULL, ACT_SEQ, 0, NULL, 0, 0), EINVAL);
	nemo_am_msg fake = { .src = me + (1ull << 16) };   /* a later generation: never joined */
	CHECK_EQ_INT(nemo_am_reply(&fake, ACT_SEQ, 0, NULL, 0, 0), ESRCH);
	fake.src = me;
	CHECK_EQ_INT(nemo_am_reply(&fake, ACT_SEQ, 0, NULL, NEMO_AM_PAYLOAD_MAX + 1, 0), EMSGSIZE);
	CHECK_EQ_INT(nemo_am_reply(&fake, ACT_SEQ, 0, NULL, 0, 0), ENOENT);   /* unregistered */
	CHECK_EQ_INT(nemo_place_set_context(&stop_workers), 0);
	CHECK(nemo_place_context() == (void *)&stop_workers);
	CHECK_EQ_INT(nemo_place_fd(NULL), EINVAL);
	/* A place of d sends with nemo_domain_am_send as with nemo_am_sendv. */
	CHECK_EQ_INT(nemo_domain_am_send(ds[0], me, ACT_SEQ, 0, NULL, 0, 0), ENOENT);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(ds[0]), 0);
	CHECK_EQ_INT(nemo_domain_destroy(ds[1]), 0);
}

int main(void)
{
	signal(SIGALRM, on_alarm);
	size_t ntasks = 1000000;
	const char *e = getenv("NEMO_POOL_TASKS");
	if (e && *e)
		ntasks = strtoull(e, NULL, 10);
	test_errors();
	test_bound_and_dropped();
	test_order();
	test_plain();
	test_pool(ntasks);
	alarm(0);
	return check_exit("test_reply");
}
