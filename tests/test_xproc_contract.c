/*
 * test_xproc_contract.c - a place is a place, wherever it lives: the
 * in-process contract holds for places of a shared domain (nemo/xproc.h,
 * "The contract"), through the ordinary calls.
 *
 *   service       a request/reply service across processes (a server, two
 *                 clients, rings of 8, up to 500 requests in flight, 48-byte
 *                 payloads both ways, integer action ids): every reply
 *                 arrives, in order, intact; a burst that fills the
 *                 requester's ring is kept by the server (exactly the
 *                 overflow) and delivered
 *   backpressure  a client that sends thousands of requests without waiting
 *                 to a server that may keep 16: every reply arrives (the
 *                 client serves while the server holds its replies)
 *   order         a handler's kept sends reach their receiver before a later
 *                 send of the same place from outside a handler
 *   leave         nemo_xproc_leave delivers what its handlers kept, and what
 *                 the handlers that its wait for room runs keep too
 *   ids           integer ids across processes, names beside them, and the
 *                 errors of codes of neither range
 *   waits         nemo_place_self, nemo_poll, nemo_place_wait and
 *                 nemo_place_wait_for on a shared place
 *   fd            nemo_place_fd on a shared place in an epoll loop: every
 *                 message of a cross-process ping-pong wakes it; a peer's
 *                 death makes it readable and nemo_poll says ECONNRESET
 *   death         a waiter blocked on a reply from a process that is killed
 *                 returns ECONNRESET long before its deadline, and
 *                 nemo_dead_places lists the dead place; sends to it say
 *                 ECONNRESET (to one that left, ESRCH), counted; the death
 *                 of a process it does not talk to does not end a wait;
 *                 replies kept for a requester that dies are dropped and
 *                 counted
 *   pollonly      a place that only polls, or only sends, learns of its
 *                 peer's death too: nemo_poll says ECONNRESET, a send to it
 *                 fails with ECONNRESET, nemo_dead_places names it (before
 *                 2026-11-28 such a place never asked: its sends returned
 *                 0 and were lost)
 *
 * Every child has an alarm: a hang fails the test, never stalls it.
 * Nothing here asserts a time: "promptly" is "before a deadline of a
 * minute", whose passing would fail the check.  NEMO_STRESS_SCALE scales
 * the counts (the sanitizer builds run 0.1).
 */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/xproc.h>
#include <nemo/am.h>
#include <nemo/notify.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

enum { ID_REQ = 1, ID_REP = 2, ID_QUIT = 3, ID_DATA = 6, ID_POKE = 7, ID_ANSWER = 8, ID_SILENT = 9 };
#define RING 8u

static char seg[80];
static double scale = 1.0;

/* Coordination between the test's processes (not nemo's segment). */
struct shared {
	_Atomic uint64_t handled, bad, overflowed, dropped, sent;
	_Atomic int ready, quits, go;
};
static struct shared *sh;

static void seg_name(const char *tag)
{
	snprintf(seg, sizeof seg, "nemo-test-xcontract-%d-%s", (int)getpid(), tag);
}

static int child_exit(pid_t pid)
{
	int st = 0;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	if (WIFSIGNALED(st))
		return 1000 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

static struct timespec deadline_ms(int ms)
{
	return in_ms(CLOCK_MONOTONIC, ms);
}

/* Wait (a millisecond at a time, at most 60 s) until *v >= want. */
static bool await64(_Atomic uint64_t *v, uint64_t want)
{
	for (int i = 0; i < 60000 && atomic_load(v) < want; i++)
		usleep(1000);
	return atomic_load(v) >= want;
}

static bool await_int(_Atomic int *v, int want)
{
	for (int i = 0; i < 60000 && atomic_load(v) < want; i++)
		usleep(1000);
	return atomic_load(v) >= want;
}

static nemo_xproc *make_domain(const char *tag, unsigned places)
{
	seg_name(tag);
	nemo_xproc_attr a = {.max_procs = 8, .max_places = places, .ring_slots = RING, .max_names = 8};
	nemo_xproc *x = NULL;
	CHECK_EQ_INT(nemo_xproc_create(seg, &a, &x), 0);
	return x;
}

/* The public id of the place named `name`, found within a minute. */
static nemo_place_id find_place(nemo_xproc *x, const char *name)
{
	nemo_xproc_id id = 0;
	for (int i = 0; i < 60000 && nemo_xproc_find(x, name, &id) != 0; i++)
		usleep(1000);
	return nemo_xproc_place_id(x, id);
}

static unsigned char pat(uint64_t seq, unsigned i)
{
	return (unsigned char)(seq * 7 + i * 13 + 1);
}

/* ------------------------------------------------------------------ */
/* The server: replies to ID_REQ from its handler, 48 bytes each way    */
/* ------------------------------------------------------------------ */

static void srv_on_req(const nemo_am_msg *m, void *ctx)
{
	nemo_xproc *x = ctx;
	bool ok = m->len == NEMO_XPROC_PAYLOAD_MAX && m->action == ID_REQ && !m->is_reply;
	const unsigned char *in = m->payload;
	unsigned char out[NEMO_XPROC_PAYLOAD_MAX];
	for (unsigned i = 0; i < NEMO_XPROC_PAYLOAD_MAX; i++) {
		ok &= m->len == NEMO_XPROC_PAYLOAD_MAX && in[i] == pat(m->arg, i);
		out[i] = (unsigned char)~pat(m->arg, i);
	}
	if (!ok)
		atomic_fetch_add(&sh->bad, 1);
	int rc = nemo_am_reply(m, ID_REP, m->arg * 3, out, sizeof out, 0);
	if (rc) {
		fprintf(stderr, "server: reply %llu: %s\n", (unsigned long long)m->arg, nemo_last_error());
		atomic_fetch_add(&sh->bad, 1);
	}
	nemo_xproc_counters c;
	nemo_xproc_get_counters(x, &c);
	atomic_store(&sh->overflowed, c.overflowed);
	atomic_fetch_add(&sh->handled, 1);
}

static void srv_on_quit(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	(void)ctx;
	atomic_fetch_add(&sh->quits, 1);
}

/* A server process for `clients` clients: attach (a handle that may keep
 * ovf_max sends), serve until each sent ID_QUIT, leave. */
static int server_main(int clients, unsigned ovf_max)
{
	alarm(300);
	nemo_xproc *x;
	nemo_xproc_place *p;
	nemo_xproc_attach_attr aa = {.overflow_max = ovf_max};
	if (nemo_xproc_attach(seg, &aa, &x) || nemo_xproc_handle_am_id(x, ID_REQ, srv_on_req, x) ||
	    nemo_xproc_handle_am_id(x, ID_QUIT, srv_on_quit, NULL) || nemo_xproc_join(x, "srv", &p, NULL))
		return 2;
	atomic_fetch_add(&sh->ready, 1);
	while (atomic_load(&sh->quits) < clients) {
		struct timespec dl = deadline_ms(60000);
		int rc = nemo_place_wait(&dl, NULL);
		if (rc) {
			fprintf(stderr, "server: wait: %d %s\n", rc, nemo_last_error());
			return 3;
		}
	}
	nemo_xproc_counters c;
	nemo_xproc_get_counters(x, &c);
	atomic_store(&sh->dropped, c.overflow_dropped);
	return nemo_xproc_detach(x) ? 4 : 0;
}

/* ------------------------------------------------------------------ */
/* A client                                                            */
/* ------------------------------------------------------------------ */

struct client {
	uint64_t got, next, bad;
};

static void cl_on_rep(const nemo_am_msg *m, void *ctx)
{
	struct client *c = ctx;
	bool ok = m->is_reply && m->action == ID_REP && m->tag == c->next && m->arg == c->next * 3 &&
		  m->len == NEMO_XPROC_PAYLOAD_MAX;
	const unsigned char *in = m->payload;
	for (unsigned i = 0; ok && i < NEMO_XPROC_PAYLOAD_MAX; i++)
		ok = in[i] == (unsigned char)~pat(m->tag, i);
	if (!ok)
		c->bad++;
	c->next = m->tag + 1;
	c->got++;
}

static int send_req(nemo_place_id srv, uint64_t seq, unsigned flags)
{
	unsigned char buf[NEMO_XPROC_PAYLOAD_MAX];
	for (unsigned i = 0; i < sizeof buf; i++)
		buf[i] = pat(seq, i);
	return nemo_am_sendv(srv, ID_REQ, seq, buf, sizeof buf, flags);
}

/* Requests first..first+n-1 with up to `window` in flight; every reply
 * back.  0, or what failed. */
static int client_run(nemo_place_id srv, struct client *c, uint64_t first, uint64_t n, uint64_t window)
{
	uint64_t sent = 0, base = c->got;
	while (c->got - base < n) {
		while (sent < n && sent - (c->got - base) < window) {
			int rc = send_req(srv, first + sent, 0);
			if (rc) {
				fprintf(stderr, "client: send: %s\n", nemo_last_error());
				return 10 + rc;
			}
			sent++;
		}
		struct timespec dl = deadline_ms(60000);
		int rc = nemo_place_wait(&dl, NULL);
		if (rc) {
			fprintf(stderr, "client: wait: %d after %llu of %llu replies\n", rc,
				(unsigned long long)(c->got - base), (unsigned long long)n);
			return 100 + rc;
		}
	}
	return 0;
}

static int client_main(const char *name, uint64_t n, uint64_t window)
{
	alarm(300);
	nemo_xproc *x;
	nemo_xproc_place *p;
	static struct client c;
	if (nemo_xproc_attach(seg, NULL, &x) || nemo_xproc_handle_am_id(x, ID_REP, cl_on_rep, &c) ||
	    nemo_xproc_join(x, name, &p, NULL))
		return 2;
	nemo_place_id srv = find_place(x, "srv");
	int rc = client_run(srv, &c, 0, n, window);
	if (!rc && (c.got != n || c.bad))
		rc = 3;
	nemo_am_send(srv, ID_QUIT, 0, 0);
	nemo_xproc_detach(x);
	return rc;
}

static void test_service(void)
{
	nemo_xproc *x = make_domain("service", 8);
	pid_t srv = fork();
	if (srv == 0)
		_exit(server_main(2, 0));
	static struct client c;
	nemo_xproc_place *p;
	CHECK_EQ_INT(nemo_xproc_handle_am_id(x, ID_REP, cl_on_rep, &c), 0);
	CHECK_EQ_INT(nemo_xproc_join(x, "parent", &p, NULL), 0);
	CHECK(await_int(&sh->ready, 1));
	nemo_place_id s = find_place(x, "srv");
	alarm(300);

	/* 1. A burst of RING requests, all answered into our ring (full: we do
	 * not drain), then RING more without waiting (NONBLOCK: no
	 * backpressure): the server keeps every one of their replies. */
	for (uint64_t k = 0; k < RING; k++)
		CHECK_EQ_INT(send_req(s, k, NEMO_NONBLOCK), 0);
	CHECK(await64(&sh->handled, RING));
	for (uint64_t k = RING; k < 2 * RING; k++)
		CHECK_EQ_INT(send_req(s, k, NEMO_NONBLOCK), 0);
	CHECK(await64(&sh->handled, 2 * RING));
	CHECK_EQ_INT(atomic_load(&sh->overflowed), RING);     /* the whole second burst was kept */
	while (c.got < 2 * RING) {
		struct timespec dl = deadline_ms(60000);
		int rc = nemo_place_wait(&dl, NULL);
		CHECK_EQ_INT(rc, 0);
		if (rc)
			break;
	}
	CHECK_EQ_INT(c.got, 2 * RING);
	CHECK_EQ_INT(c.bad, 0);

	/* 2. Two clients, 500 requests in flight each. */
	uint64_t n = (uint64_t)(20000 * scale) + 500;
	pid_t other = fork();
	if (other == 0)
		_exit(client_main("c2", n, 500));
	CHECK_EQ_INT(client_run(s, &c, 2 * RING, n, 500), 0);
	CHECK_EQ_INT(c.got, 2 * RING + n);
	CHECK_EQ_INT(c.bad, 0);
	CHECK_EQ_INT(nemo_am_send(s, ID_QUIT, 0, 0), 0);
	CHECK_EQ_INT(child_exit(other), 0);
	CHECK_EQ_INT(child_exit(srv), 0);
	CHECK_EQ_INT(atomic_load(&sh->bad), 0);
	CHECK_EQ_INT(atomic_load(&sh->dropped), 0);
	printf("service: %llu replies to each of 2 clients, %llu kept by the server\n",
	       (unsigned long long)c.got, (unsigned long long)atomic_load(&sh->overflowed));
	alarm(0);
	nemo_xproc_unlink(seg);
	CHECK_EQ_INT(nemo_xproc_detach(x), 0);
}

/* A client that never waits: its blocking sends serve its place while
 * the server keeps replies for it, so the server's 16 are enough. */
static void test_backpressure(void)
{
	nemo_xproc *x = make_domain("backpressure", 4);
	pid_t srv = fork();
	if (srv == 0)
		_exit(server_main(1, 16));
	static struct client c;
	nemo_xproc_place *p;
	CHECK_EQ_INT(nemo_xproc_handle_am_id(x, ID_REP, cl_on_rep, &c), 0);
	CHECK_EQ_INT(nemo_xproc_join(x, "parent", &p, NULL), 0);
	CHECK(await_int(&sh->ready, 1));
	nemo_place_id s = find_place(x, "srv");
	alarm(300);
	uint64_t n = (uint64_t)(50000 * scale) + 1000;
	for (uint64_t k = 0; k < n; k++) {
		int rc = send_req(s, k, 0);
		CHECK_EQ_INT(rc, 0);
		if (rc)
			break;
	}
	while (c.got < n) {
		struct timespec dl = deadline_ms(60000);
		if (nemo_place_wait(&dl, NULL))
			break;
	}
	CHECK_EQ_INT(c.got, n);
	CHECK_EQ_INT(c.bad, 0);
	CHECK_EQ_INT(nemo_am_send(s, ID_QUIT, 0, 0), 0);
	CHECK_EQ_INT(child_exit(srv), 0);
	CHECK_EQ_INT(atomic_load(&sh->bad), 0);               /* no ENOBUFS: nothing lost */
	printf("backpressure: %llu replies; the server kept %llu in all, 16 at most at once\n", (unsigned long long)c.got,
	       (unsigned long long)atomic_load(&sh->overflowed));
	alarm(0);
	nemo_xproc_unlink(seg);
	CHECK_EQ_INT(nemo_xproc_detach(x), 0);
}

/* ------------------------------------------------------------------ */
/* Order and leave: two places of one process on two threads            */
/* ------------------------------------------------------------------ */

static nemo_xproc *ol_x;
static nemo_xproc_id ol_a, ol_b;
static _Atomic int ol_go, ol_ready, ol_done, ol_poked;
static _Atomic uint64_t ol_got, ol_last, ol_disorder;
static uint64_t ol_want;
static uint64_t ol_next_arg;

static void ol_on_data(void *ctx, nemo_xproc_place *p, const nemo_xproc_msg *m)
{
	(void)ctx;
	(void)p;
	if (m->arg != atomic_load(&ol_last) + 1)
		atomic_fetch_add(&ol_disorder, 1);
	atomic_store(&ol_last, m->arg);
	atomic_fetch_add(&ol_got, 1);
}

/* On A: send `arg` messages to B from this handler (RING fit, the rest
 * are kept). */
static void ol_on_poke(void *ctx, nemo_xproc_place *p, const nemo_xproc_msg *m)
{
	(void)ctx;
	for (uint64_t k = 0; k < m->arg; k++)
		if (nemo_xproc_send(p, ol_b, ID_DATA, ++ol_next_arg, NULL, 0, 0))
			atomic_fetch_add(&ol_disorder, 1000);
	atomic_fetch_add(&ol_poked, 1);
}

/* B: pokes A `pokes` times (asking for `each` messages each), then drains
 * until it has ol_want messages. */
static void *ol_receiver(void *arg)
{
	int pokes = (int)(intptr_t)arg;
	nemo_xproc_place *b;
	if (nemo_xproc_join(ol_x, "b", &b, &ol_b))
		return NULL;
	atomic_store(&ol_ready, 1);
	while (!atomic_load(&ol_go))
		usleep(1000);
	for (int i = 0; i < pokes; i++)
		if (nemo_xproc_send(b, ol_a, ID_POKE, 3, NULL, 0, NEMO_XPROC_NONBLOCK))
			atomic_fetch_add(&ol_disorder, 1000);
	atomic_store(&ol_go, 2);
	/* Not a slot freed before A's pokes ran: only A's wait to deliver what
	 * it keeps can run them (A's thread is in nemo_xproc_leave). */
	if (pokes)
		await_int(&ol_poked, pokes + 1);
	while (atomic_load(&ol_got) < ol_want) {
		struct timespec dl = deadline_ms(60000);
		if (nemo_xproc_wait(b, &dl, NULL))
			break;
	}
	while (!atomic_load(&ol_done))
		usleep(1000);
	nemo_xproc_leave(b);
	return NULL;
}

static void ol_setup(const char *tag, int pokes, uint64_t want, nemo_xproc_place **a, pthread_t *t)
{
	seg_name(tag);
	nemo_xproc_attr at = {.max_procs = 2, .max_places = 4, .ring_slots = 4, .max_names = 4};
	CHECK_EQ_INT(nemo_xproc_create(seg, &at, &ol_x), 0);
	nemo_xproc_unlink(seg);
	atomic_store(&ol_go, 0);
	atomic_store(&ol_ready, 0);
	atomic_store(&ol_done, 0);
	atomic_store(&ol_poked, 0);
	atomic_store(&ol_got, 0);
	atomic_store(&ol_last, 0);
	atomic_store(&ol_disorder, 0);
	ol_next_arg = 0;
	ol_want = want;
	CHECK_EQ_INT(nemo_xproc_handle_id(ol_x, ID_DATA, ol_on_data, NULL), 0);
	CHECK_EQ_INT(nemo_xproc_handle_id(ol_x, ID_POKE, ol_on_poke, NULL), 0);
	CHECK_EQ_INT(nemo_xproc_join(ol_x, "a", a, &ol_a), 0);
	CHECK_EQ_INT(pthread_create(t, NULL, ol_receiver, (void *)(intptr_t)pokes), 0);
	while (!atomic_load(&ol_ready))
		usleep(1000);
}

/* A's handler keeps 6 of 10 (B's ring holds 4 and B does not drain yet);
 * then A sends the 11th from outside a handler: it must come after them. */
static void test_order(void)
{
	nemo_xproc_place *a;
	pthread_t t;
	ol_setup("order", 0, 11, &a, &t);
	alarm(120);
	CHECK_EQ_INT(nemo_xproc_send(a, ol_a, ID_POKE, 10, NULL, 0, 0), 0);   /* to A itself */
	unsigned h = 0;
	CHECK_EQ_INT(nemo_xproc_poll(a, &h), 0);
	CHECK_EQ_INT(h, 1);
	nemo_xproc_counters c;
	nemo_xproc_get_counters(ol_x, &c);
	CHECK_EQ_INT(c.overflowed, 6);
	atomic_store(&ol_go, 1);
	CHECK_EQ_INT(nemo_xproc_send(a, ol_b, ID_DATA, ++ol_next_arg, NULL, 0, 0), 0);
	for (int i = 0; i < 60000 && atomic_load(&ol_got) < 11; i++) {
		nemo_xproc_poll(a, &h);      /* delivers what A may still keep */
		usleep(1000);
	}
	CHECK_EQ_INT(atomic_load(&ol_got), 11);
	CHECK_EQ_INT(atomic_load(&ol_last), 11);
	CHECK_EQ_INT(atomic_load(&ol_disorder), 0);
	atomic_store(&ol_done, 1);
	pthread_join(t, NULL);
	alarm(0);
	CHECK_EQ_INT(nemo_xproc_detach(ol_x), 0);
}

/* A keeps 6 of 10; B then pokes A 4 times (3 messages each) and drains;
 * A leaves: its wait to deliver the 6 serves A's queue, so the pokes'
 * handlers run, and what they keep goes too: all 22, in order. */
static void test_leave(void)
{
	nemo_xproc_place *a;
	pthread_t t;
	ol_setup("leave", 4, 22, &a, &t);
	alarm(120);
	CHECK_EQ_INT(nemo_xproc_send(a, ol_a, ID_POKE, 10, NULL, 0, 0), 0);
	unsigned h = 0;
	CHECK_EQ_INT(nemo_xproc_poll(a, &h), 0);
	atomic_store(&ol_go, 1);
	while (atomic_load(&ol_go) != 2)     /* B's pokes are queued to A */
		usleep(1000);
	CHECK_EQ_INT(nemo_xproc_leave(a), 0);
	nemo_xproc_counters c;
	nemo_xproc_get_counters(ol_x, &c);
	CHECK(c.overflowed >= 6);
	CHECK_EQ_INT(c.overflow_dropped, 0);
	while (atomic_load(&ol_got) < 22 && atomic_load(&ol_disorder) == 0)
		usleep(1000);
	CHECK_EQ_INT(atomic_load(&ol_got), 22);
	CHECK_EQ_INT(atomic_load(&ol_last), 22);
	CHECK_EQ_INT(atomic_load(&ol_disorder), 0);
	atomic_store(&ol_done, 1);
	pthread_join(t, NULL);
	alarm(0);
	CHECK_EQ_INT(nemo_xproc_detach(ol_x), 0);
}

/* ------------------------------------------------------------------ */
/* Integer ids and names                                               */
/* ------------------------------------------------------------------ */

/* The child answers what it saw: the action as the arg, the arg as the
 * tag (a reply). */
static void ids_on_any(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	if (nemo_am_reply(m, ID_ANSWER, m->action, NULL, 0, 0))
		atomic_fetch_add(&sh->bad, 1);
}

static uint64_t ids_seen[4];
static int ids_n;
static void ids_on_answer(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	if (ids_n < 4)
		ids_seen[ids_n++] = m->arg;
}

static void test_ids(void)
{
	nemo_xproc *x = make_domain("ids", 4);
	pid_t kid = fork();
	if (kid == 0) {
		alarm(120);
		nemo_xproc *cx;
		nemo_xproc_place *q;
		if (nemo_xproc_attach(seg, NULL, &cx) || nemo_xproc_handle_am_id(cx, ID_POKE, ids_on_any, NULL) ||
		    nemo_xproc_handle_am(cx, "poke", ids_on_any, NULL) || nemo_xproc_join(cx, "kid", &q, NULL))
			_exit(2);
		atomic_store(&sh->ready, 1);
		while (!atomic_load(&sh->go)) {
			struct timespec dl = deadline_ms(100);
			int rc = nemo_place_wait(&dl, NULL);
			if (rc && rc != ETIMEDOUT)
				_exit(3);
		}
		_exit(nemo_xproc_detach(cx) ? 4 : 0);
	}
	nemo_xproc_place *p;
	uint32_t named;
	CHECK_EQ_INT(nemo_xproc_handle_am_id(x, ID_ANSWER, ids_on_answer, NULL), 0);
	CHECK_EQ_INT(nemo_xproc_join(x, "parent", &p, NULL), 0);
	CHECK(await_int(&sh->ready, 1));
	CHECK_EQ_INT(nemo_xproc_name(x, "poke", &named), 0);
	CHECK(named >= NEMO_XPROC_NAMED_BASE && named < NEMO_XPROC_NAMED_BASE + 8);
	nemo_place_id k = find_place(x, "kid");
	/* The same action number as an integer and a name: two actions. */
	CHECK_EQ_INT(nemo_am_send(k, ID_POKE, 1, 0), 0);
	CHECK_EQ_INT(nemo_am_send(k, named, 2, 0), 0);
	while (ids_n < 2) {
		struct timespec dl = deadline_ms(60000);
		if (nemo_place_wait(&dl, NULL))
			break;
	}
	CHECK_EQ_INT(ids_n, 2);
	CHECK_EQ_INT(ids_seen[0], ID_POKE);
	CHECK_EQ_INT(ids_seen[1], named);
	/* Codes of neither range, and events. */
	CHECK_EQ_INT(nemo_am_send(k, NEMO_XPROC_ACTIONS_MAX, 0, 0), ERANGE);
	CHECK_EQ_INT(nemo_am_send(k, NEMO_XPROC_NAMED_BASE + 8, 0, 0), ERANGE);
	CHECK_EQ_INT(nemo_am_send(k, NEMO_AM_EVENT(1), 0, 0), EINVAL);
	CHECK_EQ_INT(nemo_xproc_handle_id(x, NEMO_XPROC_ACTIONS_MAX, NULL, NULL), ERANGE);
	CHECK_EQ_INT(nemo_xproc_handle_id(x, NEMO_XPROC_NAMED_BASE - 1, NULL, NULL), ERANGE);
	uint32_t unentered = named == NEMO_XPROC_NAMED_BASE ? named + 1 : NEMO_XPROC_NAMED_BASE;
	CHECK_EQ_INT(nemo_xproc_handle_id(x, unentered, NULL, NULL), ERANGE);
	CHECK_EQ_INT(nemo_xproc_handle_am_id(x, named, ids_on_answer, NULL), 0);   /* a name's code is an id */
	CHECK_EQ_INT(nemo_xproc_handle_id(NULL, 1, NULL, NULL), EINVAL);
	atomic_store(&sh->go, 1);
	CHECK_EQ_INT(child_exit(kid), 0);
	CHECK_EQ_INT(atomic_load(&sh->bad), 0);
	nemo_xproc_unlink(seg);
	CHECK_EQ_INT(nemo_xproc_detach(x), 0);
}

/* ------------------------------------------------------------------ */
/* The ordinary waits on a shared place                                */
/* ------------------------------------------------------------------ */

static void echo_on_req(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	if (nemo_am_reply(m, ID_REP, m->arg, m->payload, m->len, 0))
		atomic_fetch_add(&sh->bad, 1);
}

/* An echo server: replies to ID_REQ until go is set. */
static int echo_main(void)
{
	alarm(120);
	nemo_xproc *cx;
	nemo_xproc_place *q;
	if (nemo_xproc_attach(seg, NULL, &cx) || nemo_xproc_handle_am_id(cx, ID_REQ, echo_on_req, NULL) ||
	    nemo_xproc_join(cx, "echo", &q, NULL))
		return 2;
	atomic_store(&sh->ready, 1);
	while (!atomic_load(&sh->go)) {
		struct timespec dl = deadline_ms(100);
		int rc = nemo_place_wait(&dl, NULL);
		if (rc && rc != ETIMEDOUT)
			return 3;
	}
	return nemo_xproc_detach(cx) ? 4 : 0;
}

static uint64_t wf_word;             /* nemo_place_wait_for's word: __atomic stores */
static void wf_on_rep(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	__atomic_store_n(&wf_word, m->tag, __ATOMIC_RELEASE);
}

static void test_waits(void)
{
	nemo_xproc *x = make_domain("waits", 4);
	pid_t kid = fork();
	if (kid == 0)
		_exit(echo_main());
	CHECK_EQ_INT(nemo_xproc_handle_am_id(x, ID_REP, wf_on_rep, NULL), 0);
	CHECK(nemo_place_self() == NEMO_PLACE_NONE);
	nemo_xproc_place *p;
	nemo_xproc_id me;
	CHECK_EQ_INT(nemo_xproc_join(x, "parent", &p, &me), 0);
	CHECK(nemo_place_self() == nemo_xproc_place_id(x, me));
	unsigned h = 99;
	CHECK_EQ_INT(nemo_poll(&h), 0);
	CHECK_EQ_INT(h, 0);
	CHECK(await_int(&sh->ready, 1));
	nemo_place_id e = find_place(x, "echo");
	alarm(120);
	uint64_t rounds = (uint64_t)(2000 * scale) + 20;
	for (uint64_t k = 1; k <= rounds; k++) {
		CHECK_EQ_INT(nemo_am_send(e, ID_REQ, k, 0), 0);
		struct timespec dl = deadline_ms(60000);
		int rc = k & 1 ? nemo_place_wait_for(&wf_word, k - 1, &dl, NULL)
			       : nemo_xproc_wait_for(p, &wf_word, k - 1, &dl, NULL);
		CHECK_EQ_INT(rc, 0);
		CHECK_EQ_INT(__atomic_load_n(&wf_word, __ATOMIC_ACQUIRE), k);
		if (rc || __atomic_load_n(&wf_word, __ATOMIC_ACQUIRE) != k)
			break;
	}
	/* The word moved already: at once; nothing more comes: its deadline. */
	struct timespec past = {.tv_sec = -1};
	CHECK_EQ_INT(nemo_place_wait_for(&wf_word, 0, &past, NULL), 0);
	CHECK_EQ_INT(nemo_place_wait_for(&wf_word, rounds, &past, NULL), ETIMEDOUT);
	CHECK_EQ_INT(nemo_place_wait_for(NULL, 0, NULL, NULL), EINVAL);
	/* nemo_place_wait: one reply, handled. */
	CHECK_EQ_INT(nemo_am_send(e, ID_REQ, rounds + 1, 0), 0);
	struct timespec dl = deadline_ms(60000);
	h = 0;
	CHECK_EQ_INT(nemo_place_wait(&dl, &h), 0);
	CHECK_EQ_INT(h, 1);
	CHECK_EQ_INT(__atomic_load_n(&wf_word, __ATOMIC_ACQUIRE), rounds + 1);
	atomic_store(&sh->go, 1);
	CHECK_EQ_INT(child_exit(kid), 0);
	CHECK_EQ_INT(atomic_load(&sh->bad), 0);
	alarm(0);
	nemo_xproc_unlink(seg);
	CHECK_EQ_INT(nemo_xproc_detach(x), 0);
	CHECK(nemo_place_self() == NEMO_PLACE_NONE);
}

/* ------------------------------------------------------------------ */
/* The descriptor                                                      */
/* ------------------------------------------------------------------ */

static uint64_t fd_got;
static void fd_on_data(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	fd_got++;
	if (nemo_am_reply(m, ID_REP, m->arg, NULL, 0, 0))   /* the pinger's next */
		atomic_fetch_add(&sh->bad, 1);
}

static void pinger_on_rep(const nemo_am_msg *m, void *ctx)
{
	uint64_t *last = ctx;
	*last = m->tag;
}

/* Sends `rounds` messages to "parent", each once the previous was
 * answered; with rounds 0, sends one and waits to be killed. */
static int pinger_main(uint64_t rounds)
{
	alarm(120);
	nemo_xproc *cx;
	nemo_xproc_place *q;
	static uint64_t last;
	if (nemo_xproc_attach(seg, NULL, &cx) || nemo_xproc_handle_am_id(cx, ID_REP, pinger_on_rep, &last) ||
	    nemo_xproc_join(cx, "pinger", &q, NULL))
		return 2;
	nemo_place_id par = find_place(cx, "parent");
	if (!rounds) {
		if (nemo_am_send(par, ID_DATA, 1, 0))
			return 3;
		for (;;)
			pause();
	}
	for (uint64_t k = 1; k <= rounds; k++) {
		if (nemo_am_send(par, ID_DATA, k, 0))
			return 4;
		struct timespec dl = deadline_ms(60000);
		if (nemo_place_wait_for(&last, k - 1, &dl, NULL))
			return 5;
	}
	return nemo_xproc_detach(cx) ? 6 : 0;
}

/* One epoll_wait (a minute at most), then nemo_poll: its result. */
static int fd_round(int ep, unsigned *h)
{
	struct epoll_event ev;
	int n = epoll_wait(ep, &ev, 1, 60000);
	if (n != 1)
		return -1;
	return nemo_poll(h);
}

static void test_fd(void)
{
	nemo_xproc *x = make_domain("fd", 4);
	CHECK_EQ_INT(nemo_xproc_handle_am_id(x, ID_DATA, fd_on_data, NULL), 0);
	int fd = -1;
	CHECK_EQ_INT(nemo_place_fd(&fd), ENOTCONN);
	nemo_xproc_place *p;
	CHECK_EQ_INT(nemo_xproc_join(x, "parent", &p, NULL), 0);
	CHECK_EQ_INT(nemo_place_fd(NULL), EINVAL);
	CHECK_EQ_INT(nemo_place_fd(&fd), 0);
	CHECK(fd >= 0);
	int fd2 = -1;
	CHECK_EQ_INT(nemo_xproc_fd(p, &fd2), 0);
	CHECK_EQ_INT(fd2, fd);                            /* one descriptor per place */
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN};
	CHECK_EQ_INT(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
	alarm(120);
	uint64_t rounds = (uint64_t)(3000 * scale) + 30;
	pid_t kid = fork();
	if (kid == 0)
		_exit(pinger_main(rounds));
	while (fd_got < rounds) {
		unsigned h = 0;
		int rc = fd_round(ep, &h);
		CHECK_EQ_INT(rc, 0);
		if (rc)
			break;
	}
	CHECK_EQ_INT(fd_got, rounds);
	CHECK_EQ_INT(child_exit(kid), 0);

	/* A peer that dies: its message is handled, then it is killed, and
	 * the descriptor turns readable for its death. */
	fd_got = 0;
	kid = fork();
	if (kid == 0)
		_exit(pinger_main(0));
	while (fd_got < 1) {
		unsigned h = 0;
		int rc = fd_round(ep, &h);
		CHECK_EQ_INT(rc, 0);
		if (rc)
			break;
	}
	kill(kid, SIGKILL);
	CHECK_EQ_INT(child_exit(kid), 1000 + SIGKILL);
	int rc = 0;
	for (int i = 0; i < 100 && rc == 0; i++) {   /* spurious readiness is allowed: look again */
		unsigned h = 0;
		rc = fd_round(ep, &h);
	}
	CHECK_EQ_INT(rc, ECONNRESET);
	nemo_place_id dead[4];
	size_t n = 0;
	uint64_t total = 0;
	CHECK_EQ_INT(nemo_dead_places(dead, 4, &n, &total), 0);
	CHECK_EQ_INT(n, 1);
	CHECK_EQ_INT(total, 1);
	close(ep);
	CHECK_EQ_INT(nemo_xproc_leave(p), 0);           /* ends the bridge */
	alarm(0);
	CHECK_EQ_INT(atomic_load(&sh->bad), 0);
	nemo_xproc_unlink(seg);
	CHECK_EQ_INT(nemo_xproc_detach(x), 0);
}

/* ------------------------------------------------------------------ */
/* Death                                                               */
/* ------------------------------------------------------------------ */

static void silent_on_req(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	(void)ctx;
	atomic_store(&sh->go, 1);   /* got it; never answers */
}

/* A place that joins as `name`, handles ID_SILENT without answering,
 * and waits to be killed. */
static int idle_main(const char *name)
{
	alarm(120);
	nemo_xproc *cx;
	nemo_xproc_place *q;
	if (nemo_xproc_attach(seg, NULL, &cx) || nemo_xproc_handle_am_id(cx, ID_SILENT, silent_on_req, NULL) ||
	    nemo_xproc_join(cx, name, &q, NULL))
		return 2;
	atomic_fetch_add(&sh->ready, 1);
	for (;;) {
		struct timespec dl = deadline_ms(1000);
		nemo_place_wait(&dl, NULL);
	}
}

static pid_t killer_victim;
static void *killer(void *arg)
{
	(void)arg;
	await_int(&sh->go, 1);
	kill(killer_victim, SIGKILL);
	return NULL;
}

static void test_death(void)
{
	nemo_xproc *x = make_domain("death", 8);
	nemo_xproc_place *p;
	nemo_xproc_id me;
	CHECK_EQ_INT(nemo_xproc_handle_am_id(x, ID_REP, wf_on_rep, NULL), 0);
	CHECK_EQ_INT(nemo_xproc_join(x, "parent", &p, &me), 0);
	pid_t srv = fork();
	if (srv == 0)
		_exit(idle_main("srv"));
	pid_t other = fork();
	if (other == 0)
		_exit(idle_main("other"));
	CHECK(await_int(&sh->ready, 2));
	nemo_place_id s = find_place(x, "srv"), o = find_place(x, "other");
	alarm(120);

	/* 1. Blocked on a reply from a process that is killed meanwhile. */
	killer_victim = srv;
	pthread_t t;
	CHECK_EQ_INT(pthread_create(&t, NULL, killer, NULL), 0);
	__atomic_store_n(&wf_word, 0, __ATOMIC_RELEASE);
	CHECK_EQ_INT(nemo_am_send(s, ID_SILENT, 1, 0), 0);
	struct timespec dl = deadline_ms(60000), t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = nemo_place_wait_for(&wf_word, 0, &dl, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK_EQ_INT(rc, ECONNRESET);                    /* not ETIMEDOUT, a minute later */
	printf("death: the waiter learned of its server's death %.3f s into its wait\n",
	       (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
	pthread_join(t, NULL);
	CHECK_EQ_INT(child_exit(srv), 1000 + SIGKILL);
	nemo_place_id dead[4];
	size_t n = 0;
	uint64_t total = 0;
	CHECK_EQ_INT(nemo_dead_places(dead, 4, &n, &total), 0);
	CHECK_EQ_INT(n, 1);
	CHECK(dead[0] == s);
	CHECK_EQ_INT(total, 1);
	nemo_xproc_id raw[4];
	CHECK_EQ_INT(nemo_xproc_dead(p, raw, 4, &n, &total), 0);
	CHECK_EQ_INT(n, 1);
	CHECK_EQ_INT(raw[0], nemo_xproc_id_of(s));
	CHECK_EQ_INT(nemo_dead_places(NULL, 0, &n, &total), 0);
	CHECK_EQ_INT(n, 0);
	CHECK_EQ_INT(total, 1);
	CHECK_EQ_INT(nemo_dead_places(dead, 4, NULL, NULL), EINVAL);
	/* Reported once; sends to it say ECONNRESET, counted. */
	struct timespec past = {.tv_sec = -1};
	CHECK_EQ_INT(nemo_place_wait(&past, NULL), ETIMEDOUT);
	nemo_xproc_counters c0, c1;
	nemo_xproc_get_counters(x, &c0);
	CHECK_EQ_INT(c0.deaths, 1);
	CHECK_EQ_INT(nemo_am_send(s, ID_SILENT, 2, 0), ECONNRESET);
	CHECK_EQ_INT(nemo_xproc_place_check(x, nemo_xproc_id_of(s)), ECONNRESET);
	nemo_xproc_get_counters(x, &c1);
	CHECK_EQ_INT(c1.send_failures, c0.send_failures + 1);
	CHECK_EQ_INT(nemo_place_wait(&past, NULL), ETIMEDOUT);   /* the send's return reported it */

	/* 2. A process we do not talk to dies: a wait is not disturbed (its
	 * slices' checks reclaim it meanwhile). */
	kill(other, SIGKILL);
	CHECK_EQ_INT(child_exit(other), 1000 + SIGKILL);
	nemo_xproc_get_counters(x, &c0);
	dl = deadline_ms(300);
	CHECK_EQ_INT(nemo_place_wait(&dl, NULL), ETIMEDOUT);
	nemo_xproc_get_counters(x, &c1);
	/* Our wait's checks reclaimed it (and may have finished the reclaim of
	 * the server, if "other" was killed in the middle of doing it): */
	CHECK(c1.reclaimed > c0.reclaimed);
	nemo_xproc_id oid;
	CHECK_EQ_INT(nemo_xproc_find(x, "other", &oid), ENOENT);
	CHECK_EQ_INT(c1.deaths, c0.deaths);
	CHECK_EQ_INT(nemo_xproc_place_check(x, nemo_xproc_id_of(o)), ECONNRESET);
	CHECK_EQ_INT(nemo_dead_places(dead, 4, &n, &total), 0);
	CHECK_EQ_INT(total, 1);

	/* 3. A place that left: ESRCH, counted as well. */
	nemo_xproc_place *gone;
	nemo_xproc_id gid;
	CHECK_EQ_INT(nemo_xproc_join(x, "gone", &gone, &gid), 0);
	CHECK_EQ_INT(nemo_xproc_leave(gone), 0);
	nemo_xproc_get_counters(x, &c0);
	CHECK_EQ_INT(nemo_xproc_send(p, gid, ID_SILENT, 0, NULL, 0, 0), ESRCH);
	nemo_xproc_get_counters(x, &c1);
	CHECK_EQ_INT(c1.send_failures, c0.send_failures + 1);
	alarm(0);
	nemo_xproc_unlink(seg);
	CHECK_EQ_INT(nemo_xproc_detach(x), 0);
}

/* Replies kept for a requester that dies are dropped and counted, and
 * the server hears of the death: the requester sends 3 * RING requests
 * without waiting and is killed before it reads a reply. */
static void dr_on_req(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	if (nemo_am_reply(m, ID_REP, 0, NULL, 0, 0))
		atomic_fetch_add(&sh->bad, 1);
	atomic_fetch_add(&sh->handled, 1);
}

static void test_dropped(void)
{
	nemo_xproc *x = make_domain("dropped", 4);
	nemo_xproc_place *p;
	CHECK_EQ_INT(nemo_xproc_handle_am_id(x, ID_REQ, dr_on_req, NULL), 0);
	CHECK_EQ_INT(nemo_xproc_join(x, "srv", &p, NULL), 0);
	pid_t kid = fork();
	if (kid == 0) {
		alarm(120);
		nemo_xproc *cx;
		nemo_xproc_place *q;
		if (nemo_xproc_attach(seg, NULL, &cx) || nemo_xproc_join(cx, "req", &q, NULL))
			_exit(2);
		nemo_place_id s = find_place(cx, "srv");
		for (uint64_t k = 0; k < 3 * RING; k++) {
			int rc;
			while ((rc = nemo_am_send(s, ID_REQ, k, NEMO_NONBLOCK)) == EAGAIN)
				usleep(100);
			if (rc)
				_exit(3);
			atomic_fetch_add(&sh->sent, 1);
		}
		for (;;)
			pause();
	}
	alarm(120);
	while (atomic_load(&sh->handled) < 3 * RING) {
		struct timespec dl = deadline_ms(60000);
		int rc = nemo_place_wait(&dl, NULL);
		CHECK_EQ_INT(rc, 0);
		if (rc)
			break;
	}
	nemo_xproc_counters c;
	nemo_xproc_get_counters(x, &c);
	CHECK_EQ_INT(c.overflowed, 2 * RING);            /* the requester's ring holds RING */
	kill(kid, SIGKILL);
	CHECK_EQ_INT(child_exit(kid), 1000 + SIGKILL);
	struct timespec dl = deadline_ms(60000);
	CHECK_EQ_INT(nemo_place_wait(&dl, NULL), ECONNRESET);
	nemo_xproc_get_counters(x, &c);
	CHECK_EQ_INT(c.overflow_dropped, 2 * RING);
	nemo_place_id dead[2];
	size_t n = 0;
	CHECK_EQ_INT(nemo_dead_places(dead, 2, &n, NULL), 0);
	CHECK_EQ_INT(n, 1);
	CHECK_EQ_INT(atomic_load(&sh->bad), 0);
	alarm(0);
	nemo_xproc_unlink(seg);
	CHECK_EQ_INT(nemo_xproc_detach(x), 0);
}

/* pollonly: one peer killed while we only poll, another while we only
 * send to it. */
static void test_pollonly(void)
{
	nemo_xproc *x = make_domain("pollonly", 8);
	nemo_xproc_place *p;
	CHECK_EQ_INT(nemo_xproc_join(x, "parent", &p, NULL), 0);
	pid_t a = fork();
	if (a == 0)
		_exit(idle_main("a"));
	pid_t b = fork();
	if (b == 0)
		_exit(idle_main("b"));
	CHECK(await_int(&sh->ready, 2));
	nemo_place_id pa = find_place(x, "a"), pb = find_place(x, "b");
	alarm(120);

	/* 1. Only nemo_poll: it reports the death of a place we sent to. */
	CHECK_EQ_INT(nemo_am_send(pa, ID_SILENT, 1, 0), 0);
	CHECK(await_int(&sh->go, 1));
	kill(a, SIGKILL);
	CHECK_EQ_INT(child_exit(a), 1000 + SIGKILL);
	struct timespec dl = deadline_ms(60000), now;
	int rc = 0;
	for (;;) {
		unsigned h;
		rc = nemo_poll(&h);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (rc || now.tv_sec > dl.tv_sec)
			break;
		usleep(1000);
	}
	CHECK_EQ_INT(rc, ECONNRESET);                    /* not 0 for a minute */
	nemo_place_id dead[4];
	size_t n = 0;
	uint64_t total = 0;
	CHECK_EQ_INT(nemo_dead_places(dead, 4, &n, &total), 0);
	CHECK_EQ_INT(n, 1);
	CHECK(dead[0] == pa);
	CHECK_EQ_INT(nemo_am_send(pa, ID_SILENT, 2, 0), ECONNRESET);

	/* 2. Only sends: they fail once the receiver is dead, within the
	 * ring's room (a NONBLOCK send to a dead ring that filled would say
	 * EAGAIN for ever); nemo_dead_places then names it. */
	atomic_store(&sh->go, 0);
	CHECK_EQ_INT(nemo_am_send(pb, ID_SILENT, 1, 0), 0);
	CHECK(await_int(&sh->go, 1));
	kill(b, SIGKILL);
	CHECK_EQ_INT(child_exit(b), 1000 + SIGKILL);
	dl = deadline_ms(60000);
	uint64_t sent = 0;
	for (;;) {
		rc = nemo_am_send(pb, ID_SILENT, 3, NEMO_NONBLOCK);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((rc && rc != EAGAIN) || now.tv_sec > dl.tv_sec)
			break;
		sent += rc == 0;
		usleep(1000);
	}
	CHECK_EQ_INT(rc, ECONNRESET);
	printf("pollonly: %llu sends to the dead receiver returned 0 before one said ECONNRESET\n",
	       (unsigned long long)sent);
	CHECK_EQ_INT(nemo_dead_places(dead, 4, &n, &total), 0);
	CHECK_EQ_INT(n, 2);
	CHECK(dead[0] == pb && dead[1] == pa);
	alarm(0);
	nemo_xproc_unlink(seg);
	CHECK_EQ_INT(nemo_xproc_detach(x), 0);
}

int main(int argc, char **argv)
{
	const char *sc = getenv("NEMO_STRESS_SCALE");
	if (sc && atof(sc) > 0)
		scale = atof(sc);
	sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	const char *what = argc > 1 ? argv[1] : "all";
	static const struct { const char *name; void (*fn)(void); } parts[] = {
		{ "service", test_service }, { "backpressure", test_backpressure }, { "order", test_order },
		{ "leave", test_leave }, { "ids", test_ids }, { "waits", test_waits }, { "fd", test_fd },
		{ "death", test_death }, { "dropped", test_dropped }, { "pollonly", test_pollonly },
	};
	for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
		if (strcmp(what, "all") && strcmp(what, parts[i].name))
			continue;
		memset(sh, 0, sizeof *sh);
		parts[i].fn();
	}
	return check_exit("test_xproc_contract");
}
