/*
 * test_kept.c - a send that returned 0 is delivered, or its failure
 * reaches its sender (issue 30's defects, one phase each; each failed
 * before its fix):
 *
 *   leave-reply  a worker whose final drain (nemo_place_leave) replies
 *                into a full queue: every reply arrives, none is
 *                dropped, and held is not left set for the index's next
 *                occupant
 *   irq-worker   a worker in interrupt mode that computes after it
 *                kept replies: the client gets them without waiting for
 *                the computation (its drain kicks the worker)
 *   progress     the same for a worker served by the progress thread
 *   blocked      a blocking send to a place that stops draining sleeps
 *                (a small share of a CPU), timed sends return ETIMEDOUT,
 *                and the send completes once the receiver drains
 *   room-wake    a place in interrupt mode, served by the progress
 *                thread, or on an event loop's descriptor, woken from
 *                its wait for room by a request: the request is handled
 *                after the send returns, with no further nemo call
 *   wait-kept    nemo_place_wait sleeps while the place keeps sends
 *   undelivered  a kept reply whose requester left is reported to the
 *                action's undelivered callback, and counted
 *   mcast-leave  a multicast whose message was kept completes when the
 *                member leaves before it could be queued
 *   mcast-nobufs a multicast forwarded from a handler whose overflow is
 *                at overflow_max still reaches the member
 *   mcast-timed  nemo_multicast_timed: ETIMEDOUT with a handle, then done
 *   context      nemo_place_set_context against the progress thread's
 *                drain (ThreadSanitizer)
 *
 * No time is asserted.  Waits that could hang have a generous deadline
 * whose passing is a failed check (a defect), not a timing.
 */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/nemo.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { ACT_REQ = 1, ACT_REPLY = 2, ACT_FILL = 3, ACT_KEEP1 = 4, ACT_NOP = 5 };

static const char *phase = "start";

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "test_kept: no progress: hang in phase ";
	ssize_t rc = write(2, msg, sizeof msg - 1);
	rc = write(2, phase, strlen(phase));
	rc = write(2, "\n", 1);
	(void)rc;
	_exit(1);
}

static double thread_cpu_ms(pthread_t t)
{
	clockid_t c;
	struct timespec ts;
	if (pthread_getcpuclockid(t, &c) || clock_gettime(c, &ts))
		return -1;
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The stress scale: the sanitizer builds run slower. */
static int hang_ms(void)
{
	return 20000;
}

/* Wait (as a place) until *v reaches want or the hang deadline passes. */
static bool wait_count(atomic_int *v, int want)
{
	double end = now_ms() + hang_ms();
	while (atomic_load(v) < want) {
		if (now_ms() > end)
			return false;
		struct timespec dl = in_ms(CLOCK_MONOTONIC, 20);
		nemo_place_wait(&dl, NULL);
	}
	return true;
}

/* ------------------------------------------------------------ handlers */

static atomic_int replies, reply_errs;

static void on_req(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	uint64_t v = m->arg * 3;
	if (nemo_am_reply(m, ACT_REPLY, m->arg, &v, sizeof v, 0) != 0)
		atomic_fetch_add(&reply_errs, 1);
}

static void on_reply(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	uint64_t v = 0;
	if (m->len == sizeof v)
		memcpy(&v, m->payload, sizeof v);
	if (!m->is_reply || v != m->tag * 3)
		atomic_fetch_add(&reply_errs, 1);
	atomic_fetch_add(&replies, 1);
}

static void on_nop(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	(void)ctx;
}

static nemo_domain *new_domain(unsigned ring, unsigned ovf_max)
{
	nemo_domain *d = NULL;
	nemo_domain_attr a = { .max_places = 8, .ring_slots = ring, .overflow_max = ovf_max };
	CHECK_EQ_INT(nemo_domain_create(&a, &d), 0);
	CHECK_EQ_INT(nemo_action_register(d, ACT_REQ, on_req, NULL), 0);
	CHECK_EQ_INT(nemo_action_register(d, ACT_REPLY, on_reply, NULL), 0);
	CHECK_EQ_INT(nemo_action_register(d, ACT_NOP, on_nop, NULL), 0);
	return d;
}

/* --------------------------------------------------------- leave-reply */

struct lr {
	nemo_domain *d;
	nemo_place_id worker;
	atomic_int joined, requests_in, left, rejoined, done;
	int leave_rc;
};

static void *lr_worker(void *p)
{
	struct lr *s = p;
	CHECK_EQ_INT(nemo_place_join(s->d, NULL, &s->worker), 0);
	atomic_store(&s->joined, 1);
	while (!atomic_load(&s->requests_in))
		sched_yield();
	/* Never polled: the final drain runs all 8 requests, whose replies
	 * (2 slots each) overflow the client's 8-slot ring. */
	s->leave_rc = nemo_place_leave();
	atomic_store(&s->left, 1);
	/* The same index again (a domain of 2 places in use): the client's
	 * sends to it must not wait on a held flag left behind. */
	CHECK_EQ_INT(nemo_place_join(s->d, NULL, &s->worker), 0);
	atomic_store(&s->rejoined, 1);
	while (!atomic_load(&s->done)) {
		struct timespec dl = in_ms(CLOCK_MONOTONIC, 20);
		nemo_place_wait(&dl, NULL);
	}
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void test_leave_reply(void)
{
	phase = "leave-reply";
	atomic_store(&replies, 0);
	atomic_store(&reply_errs, 0);
	struct lr s = { .d = new_domain(8, 0) };
	CHECK_EQ_INT(nemo_place_join(s.d, NULL, NULL), 0);
	pthread_t t;
	pthread_create(&t, NULL, lr_worker, &s);
	while (!atomic_load(&s.joined))
		sched_yield();
	for (uint64_t i = 0; i < 8; i++)
		CHECK_EQ_INT(nemo_am_send(s.worker, ACT_REQ, i, 0), 0);
	atomic_store(&s.requests_in, 1);
	/* Let the worker's leave reach its wait for room before we drain. */
	usleep(50000);
	CHECK(wait_count(&replies, 8));
	double end = now_ms() + hang_ms();
	while (!atomic_load(&s.left) && now_ms() < end) {
		struct timespec dl = in_ms(CLOCK_MONOTONIC, 20);
		nemo_place_wait(&dl, NULL);
	}
	CHECK(atomic_load(&s.left));
	CHECK_EQ_INT(s.leave_rc, 0);
	while (!atomic_load(&s.rejoined))
		sched_yield();
	/* A blocking send to the index's next occupant completes. */
	struct timespec dl = in_ms(CLOCK_MONOTONIC, hang_ms());
	for (int i = 0; i < 20; i++)
		CHECK_EQ_INT(nemo_am_send_timed(s.worker, ACT_NOP, 0, 0, &dl), 0);
	nemo_domain_counters c;
	CHECK_EQ_INT(nemo_domain_get_counters(s.d, &c), 0);
	CHECK(c.overflowed >= 1);            /* the case was reached */
	CHECK_EQ_INT(c.overflow_dropped, 0);
	CHECK_EQ_INT(atomic_load(&replies), 8);
	CHECK_EQ_INT(atomic_load(&reply_errs), 0);
	atomic_store(&s.done, 1);
	pthread_join(t, NULL);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(s.d), 0);
}

/* ------------------------------------------- irq-worker and progress */

struct cw {
	nemo_domain *d;
	nemo_place_id worker;
	bool progress;
	atomic_int joined, stop;
};

static void *cw_worker(void *p)
{
	struct cw *s = p;
	nemo_place_attr a = { .flags = s->progress ? 0 : NEMO_PLACE_INTERRUPTS };
	CHECK_EQ_INT(nemo_place_join(s->d, &a, &s->worker), 0);
	if (s->progress)
		CHECK_EQ_INT(nemo_place_set_progress(true), 0);
	atomic_store(&s->joined, 1);
	/* Compute, with no nemo call, until the client is done: requests
	 * are handled from the signal (or by the progress thread). */
	volatile unsigned long x = 0;
	while (!atomic_load(&s->stop))
		x++;
	if (s->progress)
		CHECK_EQ_INT(nemo_place_set_progress(false), 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void computing_worker(bool progress)
{
	phase = progress ? "progress" : "irq-worker";
	atomic_store(&replies, 0);
	atomic_store(&reply_errs, 0);
	struct cw s = { .d = new_domain(8, 0), .progress = progress };
	nemo_progress *pt = NULL;
	if (progress)
		CHECK_EQ_INT(nemo_progress_start(s.d, NULL, &pt), 0);
	CHECK_EQ_INT(nemo_place_join(s.d, NULL, NULL), 0);
	pthread_t t;
	pthread_create(&t, NULL, cw_worker, &s);
	while (!atomic_load(&s.joined))
		sched_yield();
	/* 8 requests without draining: the replies (2 slots each) fill our
	 * 8-slot ring and the worker keeps the rest. */
	for (uint64_t i = 0; i < 8; i++)
		CHECK_EQ_INT(nemo_am_send(s.worker, ACT_REQ, i, 0), 0);
	usleep(50000);
	/* Now drain: the worker computes on, and must be kicked to deliver
	 * what it kept.  Then a second round, sent blocking. */
	CHECK(wait_count(&replies, 8));
	for (uint64_t i = 8; i < 40; i++)
		CHECK_EQ_INT(nemo_am_send(s.worker, ACT_REQ, i, 0), 0);
	CHECK(wait_count(&replies, 40));
	CHECK_EQ_INT(atomic_load(&reply_errs), 0);
	nemo_domain_counters c;
	CHECK_EQ_INT(nemo_domain_get_counters(s.d, &c), 0);
	CHECK(c.overflowed >= 1);
	CHECK_EQ_INT(c.overflow_dropped, 0);
	atomic_store(&s.stop, 1);
	pthread_join(t, NULL);
	if (pt)
		CHECK_EQ_INT(nemo_progress_stop(pt), 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(s.d), 0);
}

/* ------------------------------------------------------------- blocked */

struct bl {
	nemo_domain *d;
	nemo_place_id rx;
	atomic_int joined, drain, stop;
	atomic_int sent, send_rc;
};

static atomic_int nf_got;

static void on_nf(void *ctx, nemo_place_id src, uint32_t chan)
{
	(void)ctx;
	(void)src;
	(void)chan;
	atomic_fetch_add(&nf_got, 1);
}

static void *bl_receiver(void *p)
{
	struct bl *s = p;
	CHECK_EQ_INT(nemo_place_join(s->d, NULL, &s->rx), 0);
	CHECK_EQ_INT(nemo_notify_set_handler(on_nf, NULL), 0);
	atomic_store(&s->joined, 1);
	while (!atomic_load(&s->drain))
		usleep(1000);        /* stopped draining: no nemo call */
	while (!atomic_load(&s->stop)) {
		struct timespec dl = in_ms(CLOCK_MONOTONIC, 20);
		nemo_place_wait(&dl, NULL);
	}
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void *bl_sender(void *p)
{
	struct bl *s = p;
	CHECK_EQ_INT(nemo_place_join(s->d, NULL, NULL), 0);
	/* Fill the ring, then one blocking send that must wait. */
	int rc = 0;
	while ((rc = nemo_am_send(s->rx, ACT_NOP, 0, NEMO_NONBLOCK)) == 0)
		;
	CHECK_EQ_INT(rc, EAGAIN);
	/* Timed: the deadline passes, nothing queued. */
	struct timespec dl = in_ms(CLOCK_MONOTONIC, 30);
	CHECK_EQ_INT(nemo_am_send_timed(s->rx, ACT_NOP, 0, 0, &dl), ETIMEDOUT);
	struct timespec past = { 0, 0 };
	CHECK_EQ_INT(nemo_am_send_timed(s->rx, ACT_NOP, 0, 0, &past), ETIMEDOUT);
	struct timespec bad = { 0, 1000000000L };
	CHECK_EQ_INT(nemo_am_send_timed(s->rx, ACT_NOP, 0, 0, &bad), EINVAL);
	/* The same for a full notification FIFO. */
	while ((rc = nemo_notify(s->rx, 1, NEMO_NONBLOCK)) == 0)
		;
	CHECK_EQ_INT(rc, EAGAIN);
	dl = in_ms(CLOCK_MONOTONIC, 30);
	CHECK_EQ_INT(nemo_notify_timed(s->rx, 1, 0, &dl), ETIMEDOUT);
	atomic_store(&s->sent, 1);
	atomic_store(&s->send_rc, nemo_am_send(s->rx, ACT_NOP, 0, 0));     /* waits */
	/* A far deadline saturates: it waits, and completes. */
	struct timespec far = { (time_t)1 << 62, 0 };
	CHECK_EQ_INT(nemo_notify_timed(s->rx, 2, 0, &far), 0);
	atomic_store(&s->sent, 2);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void test_blocked(void)
{
	phase = "blocked";
	atomic_store(&nf_got, 0);
	struct bl s = { .d = new_domain(8, 0) };
	atomic_store(&s.send_rc, -1);
	pthread_t rt, st;
	pthread_create(&rt, NULL, bl_receiver, &s);
	while (!atomic_load(&s.joined))
		sched_yield();
	pthread_create(&st, NULL, bl_sender, &s);
	while (!atomic_load(&s.sent))
		usleep(1000);
	usleep(100000);              /* past any poll budget */
	double c0 = thread_cpu_ms(st), t0 = now_ms();
	usleep(500000);
	double c1 = thread_cpu_ms(st), t1 = now_ms();
	double share = (c1 - c0) / (t1 - t0);
	printf("blocked: a waiting sender used %.1f%% of a CPU over %.0f ms\n", share * 100, t1 - t0);
	CHECK(atomic_load(&s.sent) == 1);   /* still waiting */
	CHECK(share < 0.10);
	atomic_store(&s.drain, 1);
	double end = now_ms() + hang_ms();
	while (atomic_load(&s.sent) < 2 && now_ms() < end)
		usleep(1000);
	CHECK_EQ_INT(atomic_load(&s.sent), 2);
	CHECK_EQ_INT(atomic_load(&s.send_rc), 0);
	pthread_join(st, NULL);
	atomic_store(&s.stop, 1);
	pthread_join(rt, NULL);
	nemo_domain_counters c;
	CHECK_EQ_INT(nemo_domain_get_counters(s.d, &c), 0);
	CHECK(c.room_kicks >= 1);
	CHECK_EQ_INT(atomic_load(&nf_got), NEMO_NOTIFY_FIFO_LEN + 1);
	CHECK_EQ_INT(nemo_domain_destroy(s.d), 0);
}

/* ----------------------------------------------------------- room-wake */

/* A place that handles messages on its own (interrupt mode, the progress
 * thread, an event loop's descriptor) blocks in a send to a full queue
 * and sleeps; its peer sends it a request - the kick wakes the sleeper,
 * as the place is SLEEPING - and then drains, which makes the room the
 * send waited for.  The send returns, and the place computes (or its
 * loop watches the descriptor): the request must still be handled
 * without another nemo call.  The wait for room used to return with the
 * request's hint bit set and nothing told of it - no signal, no
 * descriptor write, no progress kick - so the reply never came. */
enum rw_mode { RW_IRQ, RW_PROGRESS, RW_FD };
static const char *const rw_names[] = { "room-wake irq", "room-wake progress", "room-wake fd" };

struct rw {
	nemo_domain *d;
	enum rw_mode mode;
	nemo_place_id sender;
	nemo_place_id peer;
	atomic_int joined, filled, sent, stop;
	int send_rc;
};

static void *rw_sender(void *p)
{
	struct rw *s = p;
	nemo_place_attr a = { .flags = s->mode == RW_IRQ ? NEMO_PLACE_INTERRUPTS : 0 };
	CHECK_EQ_INT(nemo_place_join(s->d, &a, &s->sender), 0);
	int fd = -1;
	if (s->mode == RW_PROGRESS)
		CHECK_EQ_INT(nemo_place_set_progress(true), 0);
	if (s->mode == RW_FD)
		CHECK_EQ_INT(nemo_place_fd(&fd), 0);
	atomic_store(&s->joined, 1);
	while (nemo_am_send(s->peer, ACT_NOP, 0, NEMO_NONBLOCK) == 0)
		;
	atomic_store(&s->filled, 1);
	s->send_rc = nemo_am_send(s->peer, ACT_NOP, 0, 0);      /* waits for room, sleeps */
	atomic_store(&s->sent, 1);
	/* No nemo call from here on but what the mode makes: the signal's
	 * handler, the progress thread's drain, or the loop's nemo_poll
	 * when the descriptor turns readable. */
	uint64_t v = 1;
	while (!atomic_load(&s->stop)) {
		if (s->mode == RW_FD) {
			struct pollfd pfd = { .fd = fd, .events = POLLIN };
			if (poll(&pfd, 1, 20) == 1)
				nemo_poll(NULL);
			continue;
		}
		for (int k = 0; k < 256; k++)
			v = v * 6364136223846793005ULL + 1;
		__asm__ __volatile__("" : "+r"(v));
	}
	if (s->mode == RW_PROGRESS)
		CHECK_EQ_INT(nemo_place_set_progress(false), 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void test_room_wake(enum rw_mode mode)
{
	phase = rw_names[mode];
	atomic_store(&replies, 0);
	atomic_store(&reply_errs, 0);
	struct rw s = { .d = new_domain(8, 0), .mode = mode };
	CHECK_EQ_INT(nemo_place_join(s.d, NULL, &s.peer), 0);
	pthread_t t;
	pthread_create(&t, NULL, rw_sender, &s);
	while (!atomic_load(&s.filled))
		usleep(1000);
	/* Until the blocked send sleeps (past its poll budget). */
	double end = now_ms() + hang_ms();
	nemo_domain_counters c;
	do {
		usleep(1000);
		CHECK_EQ_INT(nemo_domain_get_counters(s.d, &c), 0);
	} while (c.sleeps == 0 && now_ms() < end);
	CHECK(c.sleeps >= 1);
	usleep(5000);
	CHECK_EQ_INT(atomic_load(&s.sent), 0);
	/* The request wakes it; the drain that follows makes its room. */
	CHECK_EQ_INT(nemo_am_send(s.sender, ACT_REQ, 7, 0), 0);
	unsigned h = 0;
	CHECK_EQ_INT(nemo_poll(&h), 0);
	CHECK(wait_count(&replies, 1));
	/* The reply may come from the wait for room's own drain, before the
	 * send returns: the send completes too (its room was made). */
	end = now_ms() + hang_ms();
	while (!atomic_load(&s.sent) && now_ms() < end)
		usleep(1000);
	CHECK_EQ_INT(atomic_load(&s.sent), 1);
	atomic_store(&s.stop, 1);
	pthread_join(t, NULL);
	CHECK_EQ_INT(s.send_rc, 0);
	CHECK_EQ_INT(atomic_load(&reply_errs), 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(s.d), 0);
}

/* ----------------------------------------------------------- wait-kept */

/* The worker keeps replies for a client that does not drain, then waits:
 * it must sleep, not spin (it used to yield in a loop). */
struct wk {
	nemo_domain *d;
	nemo_place_id worker;
	atomic_int joined, kept, waited, drain;
	double cpu_share;
};

static void *wk_worker(void *p)
{
	struct wk *s = p;
	CHECK_EQ_INT(nemo_place_join(s->d, NULL, &s->worker), 0);
	atomic_store(&s->joined, 1);
	/* Handle the 8 requests: 4 replies fit, 4 are kept. */
	while (!atomic_load(&s->kept)) {
		unsigned h = 0;
		nemo_poll(&h);
		nemo_domain_counters c;
		nemo_domain_get_counters(s->d, &c);
		if (c.overflowed >= 4)
			atomic_store(&s->kept, 1);
	}
	pthread_t me = pthread_self();
	double c0 = thread_cpu_ms(me), t0 = now_ms();
	struct timespec dl = in_ms(CLOCK_MONOTONIC, 400);
	nemo_place_wait(&dl, NULL);
	double c1 = thread_cpu_ms(me), t1 = now_ms();
	s->cpu_share = (c1 - c0) / (t1 - t0);
	atomic_store(&s->waited, 1);
	while (!atomic_load(&s->drain))
		usleep(1000);
	CHECK_EQ_INT(nemo_place_leave(), 0);   /* delivers the rest */
	return NULL;
}

static void test_wait_kept(void)
{
	phase = "wait-kept";
	atomic_store(&replies, 0);
	atomic_store(&reply_errs, 0);
	struct wk s = { .d = new_domain(8, 0) };
	CHECK_EQ_INT(nemo_place_join(s.d, NULL, NULL), 0);
	pthread_t t;
	pthread_create(&t, NULL, wk_worker, &s);
	while (!atomic_load(&s.joined))
		sched_yield();
	for (uint64_t i = 0; i < 8; i++)
		CHECK_EQ_INT(nemo_am_send(s.worker, ACT_REQ, i, 0), 0);
	while (!atomic_load(&s.waited))
		usleep(1000);
	printf("wait-kept: a waiting place with kept sends used %.1f%% of a CPU\n", s.cpu_share * 100);
	CHECK(s.cpu_share < 0.10);
	atomic_store(&s.drain, 1);
	CHECK(wait_count(&replies, 8));
	pthread_join(t, NULL);
	CHECK_EQ_INT(atomic_load(&reply_errs), 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(s.d), 0);
}

/* --------------------------------------------------------- undelivered */

static atomic_int undelivered, undelivered_bad;
static nemo_place_id und_client;

static void on_undelivered(const nemo_am_msg *m, int err, void *ctx)
{
	uint64_t v = 0;
	if (m->len == sizeof v)
		memcpy(&v, m->payload, sizeof v);
	if (err != ESRCH || ctx != &undelivered || m->dest != und_client || m->src != nemo_place_self() ||
	    m->action != ACT_REPLY || !m->is_reply || v != m->tag * 3)
		atomic_fetch_add(&undelivered_bad, 1);
	atomic_fetch_add(&undelivered, 1);
}

struct ud {
	nemo_domain *d;
	nemo_place_id worker;
	atomic_int joined, client_left, done;
};

static void *ud_client(void *p)
{
	struct ud *s = p;
	CHECK_EQ_INT(nemo_place_join(s->d, NULL, &und_client), 0);
	for (uint64_t i = 0; i < 8; i++)
		CHECK_EQ_INT(nemo_am_send(s->worker, ACT_REQ, i, 0), 0);
	/* Wait for the worker to keep some, then leave without draining
	 * (the leave's final drain takes what is in the ring). */
	double end = now_ms() + hang_ms();
	for (;;) {
		nemo_domain_counters c;
		nemo_domain_get_counters(s->d, &c);
		if (c.overflowed >= 4 || now_ms() > end)
			break;
		usleep(1000);
	}
	CHECK_EQ_INT(nemo_place_leave(), 0);
	atomic_store(&s->client_left, 1);
	return NULL;
}

static void test_undelivered(void)
{
	phase = "undelivered";
	atomic_store(&undelivered, 0);
	atomic_store(&undelivered_bad, 0);
	atomic_store(&replies, 0);
	struct ud s = { .d = new_domain(8, 0) };
	CHECK_EQ_INT(nemo_action_set_undelivered(s.d, ACT_REPLY, on_undelivered, &undelivered), 0);
	CHECK_EQ_INT(nemo_action_set_undelivered(s.d, 99, on_undelivered, NULL), ENOENT);
	CHECK_EQ_INT(nemo_action_set_undelivered(s.d, 100000, on_undelivered, NULL), ERANGE);
	CHECK_EQ_INT(nemo_action_set_undelivered(NULL, ACT_REPLY, on_undelivered, NULL), EINVAL);
	CHECK_EQ_INT(nemo_place_join(s.d, NULL, &s.worker), 0);
	pthread_t t;
	pthread_create(&t, NULL, ud_client, &s);
	double end = now_ms() + hang_ms();
	while (!atomic_load(&s.client_left) && now_ms() < end)
		nemo_poll(NULL);
	CHECK(atomic_load(&s.client_left));
	nemo_poll(NULL);                      /* the flush finds the client gone */
	pthread_join(t, NULL);
	nemo_domain_counters c;
	CHECK_EQ_INT(nemo_domain_get_counters(s.d, &c), 0);
	/* The client's final drain took what was in its ring; every kept
	 * reply is either delivered or reported, never both, never neither. */
	CHECK(c.overflowed >= 1);
	CHECK_EQ_INT(c.overflow_dropped, (uint64_t)atomic_load(&undelivered));
	CHECK_EQ_INT((uint64_t)atomic_load(&undelivered) + (uint64_t)atomic_load(&replies), 8);
	CHECK(atomic_load(&undelivered) >= 1);
	CHECK_EQ_INT(atomic_load(&undelivered_bad), 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(s.d), 0);
}

/* --------------------------------------------------- multicast phases */

static atomic_int runs;

static void mc_fn(nemo_place_id self, uint64_t arg, void *ctx)
{
	(void)self;
	(void)arg;
	(void)ctx;
	atomic_fetch_add(&runs, 1);
}

struct mm {
	nemo_domain *d;
	nemo_mcast_group *g;
	nemo_place_id id[3];
	atomic_int joined, go, leave, stop, filled;
	int kind;              /* phase-specific */
};

/* mcast-leave: a member that never drains, then leaves. */
static void *ml_member(void *p)
{
	struct mm *s = p;
	CHECK_EQ_INT(nemo_place_join(s->d, NULL, &s->id[1]), 0);
	atomic_fetch_add(&s->joined, 1);
	while (!atomic_load(&s->leave))
		usleep(1000);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void test_mcast_leave(nemo_mcast_topology topo, nemo_mcast_mechanism mech)
{
	phase = "mcast-leave";
	atomic_store(&runs, 0);
	struct mm s = { .d = new_domain(8, 0) };
	CHECK_EQ_INT(nemo_place_join(s.d, NULL, &s.id[0]), 0);
	pthread_t t;
	pthread_create(&t, NULL, ml_member, &s);
	while (atomic_load(&s.joined) < 1)
		sched_yield();
	nemo_mcast_attr ga = { .topology = topo, .mechanism = mech, .dynamic = true };
	CHECK_EQ_INT(nemo_mcast_group_create(s.d, &ga, &s.g), 0);
	CHECK_EQ_INT(nemo_mcast_add(s.g, s.id[1]), 0);
	/* Fill our ring to the member: the multicast's message is kept. */
	while (nemo_am_send(s.id[1], ACT_NOP, 0, NEMO_NONBLOCK) == 0)
		;
	nemo_mcast *h = NULL;
	CHECK_EQ_INT(nemo_multicast(s.g, mc_fn, NULL, 7, NEMO_MCAST_ASYNC, &h), 0);
	nemo_domain_counters c;
	CHECK_EQ_INT(nemo_domain_get_counters(s.d, &c), 0);
	CHECK(c.overflowed >= 1);
	/* The member leaves before the message could be queued to it. */
	atomic_store(&s.leave, 1);
	pthread_join(t, NULL);
	struct timespec dl = in_ms(CLOCK_MONOTONIC, hang_ms());
	CHECK_EQ_INT(nemo_mcast_wait(h, &dl), 0);
	CHECK_EQ_INT(atomic_load(&runs), 0);  /* it left: skipped */
	CHECK_EQ_INT(nemo_domain_get_counters(s.d, &c), 0);
	CHECK(c.overflow_dropped >= 1);
	CHECK_EQ_INT(nemo_mcast_group_destroy(s.g), 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(s.d), 0);
}

/* mcast-nobufs: the tree's root A forwards to B from its handler, with
 * its ring to B full and its overflow at overflow_max (1). */
static struct mm *nb;

static void on_keep1(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	(void)ctx;
	/* A handler's send into the full ring: kept (the overflow's one). */
	CHECK_EQ_INT(nemo_am_send(nb->id[2], ACT_NOP, 0, 0), 0);
}

static void *nb_a(void *p)
{
	struct mm *s = p;
	CHECK_EQ_INT(nemo_place_join(s->d, NULL, &s->id[1]), 0);
	atomic_fetch_add(&s->joined, 1);
	while (atomic_load(&s->joined) < 2)
		sched_yield();
	while (nemo_am_send(s->id[2], ACT_NOP, 0, NEMO_NONBLOCK) == 0)
		;
	CHECK_EQ_INT(nemo_am_send(s->id[1], ACT_KEEP1, 0, 0), 0);
	nemo_poll(NULL);
	atomic_store(&s->filled, 1);
	while (!atomic_load(&s->stop)) {
		struct timespec dl = in_ms(CLOCK_MONOTONIC, 20);
		nemo_place_wait(&dl, NULL);
	}
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void *nb_b(void *p)
{
	struct mm *s = p;
	CHECK_EQ_INT(nemo_place_join(s->d, NULL, &s->id[2]), 0);
	atomic_fetch_add(&s->joined, 1);
	while (!atomic_load(&s->go))
		usleep(1000);        /* not draining until the multicast is out */
	while (!atomic_load(&s->stop)) {
		struct timespec dl = in_ms(CLOCK_MONOTONIC, 20);
		nemo_place_wait(&dl, NULL);
	}
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void test_mcast_nobufs(void)
{
	phase = "mcast-nobufs";
	atomic_store(&runs, 0);
	struct mm s = { .d = new_domain(8, 1) };
	nb = &s;
	CHECK_EQ_INT(nemo_action_register(s.d, ACT_KEEP1, on_keep1, NULL), 0);
	CHECK_EQ_INT(nemo_place_join(s.d, NULL, &s.id[0]), 0);
	/* A joins first: the lower index, the tree's root. */
	pthread_t a, b;
	pthread_create(&a, NULL, nb_a, &s);
	while (atomic_load(&s.joined) < 1)
		sched_yield();
	pthread_create(&b, NULL, nb_b, &s);
	while (!atomic_load(&s.filled))
		sched_yield();
	nemo_domain_counters c;
	CHECK_EQ_INT(nemo_domain_get_counters(s.d, &c), 0);
	CHECK_EQ_INT(c.overflowed, 1);       /* A's overflow is at its bound */
	/* Members A < B: a tree rooted at A, which forwards to B. */
	nemo_mcast_attr ga = { .topology = NEMO_MCAST_TREE, .dynamic = true };
	CHECK_EQ_INT(nemo_mcast_group_create(s.d, &ga, &s.g), 0);
	CHECK_EQ_INT(nemo_mcast_add(s.g, s.id[1]), 0);
	CHECK_EQ_INT(nemo_mcast_add(s.g, s.id[2]), 0);
	nemo_mcast *h = NULL;
	CHECK_EQ_INT(nemo_multicast(s.g, mc_fn, NULL, 0, NEMO_MCAST_ASYNC, &h), 0);
	usleep(50000);               /* A forwards while B's ring is full */
	atomic_store(&s.go, 1);
	struct timespec dl = in_ms(CLOCK_MONOTONIC, hang_ms());
	CHECK_EQ_INT(nemo_mcast_wait(h, &dl), 0);
	CHECK_EQ_INT(atomic_load(&runs), 2);  /* both ran: B was not skipped */
	atomic_store(&s.stop, 1);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	CHECK_EQ_INT(nemo_mcast_group_destroy(s.g), 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(s.d), 0);
}

/* mcast-timed: a member that does not poll yet. */
static void test_mcast_timed(void)
{
	phase = "mcast-timed";
	atomic_store(&runs, 0);
	struct mm s = { .d = new_domain(0, 0) };
	CHECK_EQ_INT(nemo_place_join(s.d, NULL, &s.id[0]), 0);
	pthread_t b;
	pthread_create(&b, NULL, nb_b, &s);   /* id[2], drains once go */
	while (atomic_load(&s.joined) < 1)
		sched_yield();
	nemo_mcast_attr ga = { .topology = NEMO_MCAST_FLAT };
	CHECK_EQ_INT(nemo_mcast_group_create(s.d, &ga, &s.g), 0);
	CHECK_EQ_INT(nemo_mcast_add(s.g, s.id[2]), 0);
	nemo_mcast *h = (nemo_mcast *)&s;
	struct timespec dl = in_ms(CLOCK_MONOTONIC, 30);
	CHECK_EQ_INT(nemo_multicast_timed(s.g, mc_fn, NULL, 0, 0, &dl, NULL), EINVAL);
	CHECK_EQ_INT(nemo_multicast_timed(s.g, mc_fn, NULL, 0, NEMO_MCAST_ASYNC, &dl, &h), EINVAL);
	CHECK(h == NULL);
	CHECK_EQ_INT(nemo_multicast_timed(s.g, mc_fn, NULL, 0, 0, &dl, &h), ETIMEDOUT);
	CHECK(h != NULL);
	CHECK_EQ_INT(nemo_mcast_group_destroy(s.g), EBUSY);
	atomic_store(&s.go, 1);
	dl = in_ms(CLOCK_MONOTONIC, hang_ms());
	CHECK_EQ_INT(nemo_mcast_wait(h, &dl), 0);
	CHECK_EQ_INT(atomic_load(&runs), 1);
	/* And one that completes within its deadline. */
	nemo_mcast *h2 = (nemo_mcast *)&s;
	CHECK_EQ_INT(nemo_multicast_timed(s.g, mc_fn, NULL, 0, 0, &dl, &h2), 0);
	CHECK(h2 == NULL);
	CHECK_EQ_INT(atomic_load(&runs), 2);
	atomic_store(&s.stop, 1);
	pthread_join(b, NULL);
	CHECK_EQ_INT(nemo_mcast_group_destroy(s.g), 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(s.d), 0);
}

/* ------------------------------------------------------------- context */

static atomic_int ctx_bad;

static void on_ctx(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	if (m->place_ctx != (void *)1 && m->place_ctx != (void *)2)
		atomic_fetch_add(&ctx_bad, 1);
}

struct cx {
	nemo_domain *d;
	nemo_place_id served;
	atomic_int joined, stop;
};

static void *cx_served(void *p)
{
	struct cx *s = p;
	nemo_place_attr a = { .context = (void *)1 };
	CHECK_EQ_INT(nemo_place_join(s->d, &a, &s->served), 0);
	CHECK_EQ_INT(nemo_place_set_progress(true), 0);
	atomic_store(&s->joined, 1);
	for (unsigned i = 0; !atomic_load(&s->stop); i++)
		CHECK_EQ_INT(nemo_place_set_context((void *)(uintptr_t)(1 + (i & 1))), 0);
	CHECK_EQ_INT(nemo_place_set_progress(false), 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void test_context(void)
{
	phase = "context";
	atomic_store(&ctx_bad, 0);
	struct cx s = { .d = new_domain(0, 0) };
	CHECK_EQ_INT(nemo_action_register(s.d, 6, on_ctx, NULL), 0);
	nemo_progress *pt;
	CHECK_EQ_INT(nemo_progress_start(s.d, NULL, &pt), 0);
	CHECK_EQ_INT(nemo_place_join(s.d, NULL, NULL), 0);
	pthread_t t;
	pthread_create(&t, NULL, cx_served, &s);
	while (!atomic_load(&s.joined))
		sched_yield();
	for (int i = 0; i < 2000; i++)
		CHECK_EQ_INT(nemo_am_send(s.served, 6, (uint64_t)i, 0), 0);
	usleep(20000);
	atomic_store(&s.stop, 1);
	pthread_join(t, NULL);
	CHECK_EQ_INT(atomic_load(&ctx_bad), 0);
	CHECK_EQ_INT(nemo_progress_stop(pt), 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(s.d), 0);
}

int main(void)
{
	signal(SIGALRM, on_alarm);
	alarm(200);
	test_leave_reply();
	computing_worker(false);
	computing_worker(true);
	test_blocked();
	test_room_wake(RW_IRQ);
	test_room_wake(RW_PROGRESS);
	test_room_wake(RW_FD);
	test_wait_kept();
	test_undelivered();
	test_mcast_leave(NEMO_MCAST_FLAT, NEMO_MCAST_SMACK);
	test_mcast_leave(NEMO_MCAST_TREE, NEMO_MCAST_HELP);
	test_mcast_nobufs();
	test_mcast_timed();
	test_context();
	return check_exit("test_kept");
}
