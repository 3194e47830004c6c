/*
 * test_xproc.c - shared domains across processes (nemo/xproc.h).
 *
 *   test_xproc basic    create/attach, permissions, names, AM and notify
 *                       both ways, the errors of bad input
 *   test_xproc flood    3 sender processes and 1 receiver, 10^6 messages
 *                       in all: nothing lost, nothing duplicated, in order
 *                       per sender; and a blocked ping-pong (shared futex)
 *   test_xproc kill     kill -9 of a receiver and of a sender during a
 *                       flood: the survivors that talk to them get
 *                       ECONNRESET, none hangs;
 *                       a restarted process attaches and joins again
 *   test_xproc hostile  slots rewritten by hand (length, kind, code, dst,
 *                       src): rejected, counted, no handler runs, the ring
 *                       goes on; a scribbled header or a foreign file is
 *                       refused at attach (EPROTO)
 *   test_xproc threads  two places of one process on two threads (so that
 *                       ThreadSanitizer sees both sides of the protocol)
 *   test_xproc stale    a send that raced a leave and a rejoin wrote into the
 *                       reset ring: rejected, and the ring goes on
 *   test_xproc public   the in-process calls on shared places: nemo_am_sendv,
 *                       nemo_am_reply, nemo_notify, nemo_am_broadcast (to a
 *                       set and to everyone), nemo_place_wait, nemo_poll and
 *                       nemo_notify_set_handler in two child processes and
 *                       the parent, with handlers of nemo/am.h's type; and
 *                       their errors
 *
 * Every child has an alarm: a hang fails the test, never stalls it.
 * Nothing here asserts a time.  NEMO_STRESS_SCALE scales the counts
 * (the sanitizer builds run 0.1).
 */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/xproc.h>
#include <nemo/am.h>
#include <nemo/notify.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char seg[64];
static double scale = 1.0;

/* Coordination between the test's processes (not nemo's segment). */
struct shared {
	_Atomic uint64_t vic_received, b_sent;
	_Atomic int ready;
};
static struct shared *sh;

static void seg_name(const char *tag)
{
	snprintf(seg, sizeof seg, "nemo-test-xproc-%d-%s", (int)getpid(), tag);
}

static struct timespec deadline_ms(int ms)
{
	return in_ms(CLOCK_MONOTONIC, ms);
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

/* ------------------------------------------------------------------ */

struct rx_state {
	uint64_t count, bad;
	uint64_t next[NEMO_XPROC_PLACES_MAX];
	nemo_xproc_id last_src;
	uint32_t last_chan;
	unsigned char payload[NEMO_XPROC_PAYLOAD_MAX];
	uint32_t len;
	uint64_t arg;
};

static void on_count(void *ctx, nemo_xproc_place *p, const nemo_xproc_msg *m)
{
	(void)p;
	struct rx_state *r = ctx;
	unsigned s = m->src & 0xFFu;
	if (m->arg != r->next[s])
		r->bad++;
	r->next[s] = m->arg + 1;
	r->count++;
	r->last_src = m->src;
	r->arg = m->arg;
	r->len = m->len;
	memcpy(r->payload, m->payload, m->len);
}

static void on_notify(void *ctx, nemo_xproc_place *p, nemo_xproc_id src, uint32_t chan)
{
	(void)p;
	struct rx_state *r = ctx;
	r->last_src = src;
	r->last_chan = chan;
	r->count++;
}

/* Echo: send the message back to its sender with arg + 1. */
static void on_echo(void *ctx, nemo_xproc_place *p, const nemo_xproc_msg *m)
{
	uint32_t *code = ctx;
	int rc = nemo_xproc_send(p, m->src, *code, m->arg + 1, m->payload, m->len, 0);
	if (rc)
		fprintf(stderr, "echo: send: %d\n", rc);
}

static int wait_count(nemo_xproc_place *p, struct rx_state *r, uint64_t n)
{
	struct timespec dl = deadline_ms(30000);
	while (r->count < n) {
		int rc = nemo_xproc_wait(p, &dl, NULL);
		if (rc && rc != ECONNRESET)
			return rc;
	}
	return 0;
}

static void test_basic(void)
{
	seg_name("basic");
	nemo_xproc *x = NULL, *y = NULL;
	nemo_xproc_attr a = {.max_procs = 4, .max_places = 4, .ring_slots = 8, .max_names = 8};
	CHECK_EQ_INT(nemo_xproc_create(seg, &a, &x), 0);
	CHECK_EQ_INT(nemo_xproc_create(seg, &a, &y), EEXIST);
	CHECK_EQ_INT(nemo_xproc_create("bad/name", &a, &y), EINVAL);
	nemo_xproc_attr bad = {.ring_slots = 6};
	CHECK_EQ_INT(nemo_xproc_create("nemo-test-xproc-bad", &bad, &y), EINVAL);
	CHECK_EQ_INT(nemo_xproc_attach("nemo-test-xproc-absent", NULL, &y), ENOENT);
	char path[128];
	snprintf(path, sizeof path, "/dev/shm/%s", seg);
	struct stat st;
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
	/* Another owner than expected: refused. */
	nemo_xproc_attach_attr other = {.uid = geteuid() + 1, .gid = getegid(), .use_ids = 1};
	CHECK_EQ_INT(nemo_xproc_attach(seg, &other, &y), EACCES);

	nemo_xproc_place *p;
	nemo_xproc_id pid_, qid;
	CHECK_EQ_INT(nemo_xproc_join(x, "parent", &p, &pid_), 0);
	CHECK_EQ_INT(nemo_xproc_join(x, "parent", &p, &pid_), EEXIST);
	static struct rx_state r;
	uint32_t c_count, c_echo;
	CHECK_EQ_INT(nemo_xproc_handle(x, "count", on_count, &r), 0);
	CHECK_EQ_INT(nemo_xproc_name(x, "echo", &c_echo), 0);
	CHECK_EQ_INT(nemo_xproc_name(x, "count", &c_count), 0);
	CHECK(c_echo != c_count);
	CHECK_EQ_INT(nemo_xproc_set_notify(p, on_notify, &r), 0);
	CHECK_EQ_INT(nemo_xproc_send(p, pid_, c_count, 0, "x", NEMO_XPROC_PAYLOAD_MAX + 1, 0), EMSGSIZE);
	CHECK_EQ_INT(nemo_xproc_send(p, pid_, NEMO_XPROC_ACTIONS_MAX, 0, NULL, 0, 0), ERANGE);
	CHECK_EQ_INT(nemo_xproc_send(p, pid_, NEMO_XPROC_NAMED_BASE + 8, 0, NULL, 0, 0), ERANGE);
	CHECK_EQ_INT(nemo_xproc_send(p, 0, c_count, 0, NULL, 0, 0), ESRCH);
	CHECK_EQ_INT(nemo_xproc_send(p, pid_, c_count, 0, NULL, 0, 77), EINVAL);

	pid_t child = fork();
	if (child == 0) {
		alarm(60);
		nemo_xproc *cx;
		nemo_xproc_place *q;
		if (nemo_xproc_attach(seg, NULL, &cx))
			_exit(2);
		uint32_t code;
		if (nemo_xproc_handle(cx, "echo", on_echo, &code) || nemo_xproc_name(cx, "count", &code))
			_exit(3);
		if (nemo_xproc_join(cx, "child", &q, NULL))
			_exit(4);
		/* Echo until told to stop by a notification on channel 9. */
		static struct rx_state cr;
		nemo_xproc_set_notify(q, on_notify, &cr);
		while (cr.last_chan != 9) {
			struct timespec dl = deadline_ms(30000);
			int rc = nemo_xproc_wait(q, &dl, NULL);
			if (rc && rc != ECONNRESET)
				_exit(5);
		}
		if (nemo_xproc_notify(q, cr.last_src, 10, 0))
			_exit(6);
		nemo_xproc_detach(cx);
		_exit(0);
	}
	int tries = 0;
	while (nemo_xproc_find(x, "child", &qid) != 0 && tries++ < 30000)
		usleep(1000);
	CHECK_EQ_INT(nemo_xproc_place_check(x, qid), 0);
	r.next[qid & 0xFF] = 42;
	CHECK_EQ_INT(nemo_xproc_send(p, qid, c_echo, 41, "hello", 5, 0), 0);
	CHECK_EQ_INT(wait_count(p, &r, 1), 0);
	CHECK_EQ_INT(r.arg, 42);
	CHECK_EQ_INT(r.len, 5);
	CHECK(memcmp(r.payload, "hello", 5) == 0);
	CHECK_EQ_INT(r.last_src, qid);
	/* A full payload round trip. */
	unsigned char big[NEMO_XPROC_PAYLOAD_MAX];
	for (unsigned i = 0; i < sizeof big; i++)
		big[i] = (unsigned char)(i * 7 + 1);
	r.next[qid & 0xFF] = 100;
	CHECK_EQ_INT(nemo_xproc_send(p, qid, c_echo, 99, big, sizeof big, 0), 0);
	CHECK_EQ_INT(wait_count(p, &r, 2), 0);
	CHECK(r.len == sizeof big && memcmp(r.payload, big, sizeof big) == 0);
	CHECK_EQ_INT(r.bad, 0);
	CHECK_EQ_INT(nemo_xproc_notify(p, qid, 9, 0), 0);
	CHECK_EQ_INT(wait_count(p, &r, 3), 0);
	CHECK_EQ_INT(r.last_chan, 10);
	CHECK_EQ_INT(child_exit(child), 0);
	/* Detached: its place is free, a send to it fails. */
	CHECK_EQ_INT(nemo_xproc_send(p, qid, c_echo, 0, NULL, 0, 0), ESRCH);
	CHECK_EQ_INT(nemo_xproc_find(x, "child", &qid), ENOENT);
	nemo_xproc_counters c;
	CHECK_EQ_INT(nemo_xproc_get_counters(x, &c), 0);
	CHECK(c.sent == 3 && c.received == 3 && c.rejected == 0);
	CHECK_EQ_INT(nemo_xproc_leave(p), 0);
	CHECK_EQ_INT(nemo_xproc_unlink(seg), 0);
	CHECK_EQ_INT(nemo_xproc_detach(x), 0);
	CHECK_EQ_INT(nemo_xproc_attach(seg, NULL, &y), ENOENT);
}

/* ------------------------------------------------------------------ */

#define SENDERS 3

/* A child that sends: attach, join as `place`, look up the code of
 * `action` and the place named `peer`.  Nonzero if any step failed. */
static int sender_setup(const char *place, const char *action, const char *peer, nemo_xproc **cx,
			nemo_xproc_place **q, uint32_t *code, nemo_xproc_id *peer_id)
{
	return nemo_xproc_attach(seg, NULL, cx) || nemo_xproc_join(*cx, place, q, NULL) ||
	       nemo_xproc_name(*cx, action, code) || nemo_xproc_find(*cx, peer, peer_id);
}

static int sender_main(int i, uint64_t n, const char *dest)
{
	alarm(120);
	nemo_xproc *cx;
	nemo_xproc_place *q;
	char name[16];
	snprintf(name, sizeof name, "s%d", i);
	uint32_t code;
	nemo_xproc_id rx;
	if (sender_setup(name, "count", dest, &cx, &q, &code, &rx))
		return 2;
	for (uint64_t k = 0; k < n; k++) {
		int rc = nemo_xproc_send(q, rx, code, k, &k, sizeof k, 0);
		if (rc) {
			fprintf(stderr, "sender %d: send %llu: %d\n", i, (unsigned long long)k, rc);
			return 4;
		}
	}
	nemo_xproc_detach(cx);
	return 0;
}

static void on_pong(void *ctx, nemo_xproc_place *p, const nemo_xproc_msg *m)
{
	(void)p;
	uint64_t *last = ctx;
	*last = m->arg;
}

static void test_flood(void)
{
	seg_name("flood");
	nemo_xproc *x;
	CHECK_EQ_INT(nemo_xproc_create(seg, NULL, &x), 0);
	nemo_xproc_place *p;
	static struct rx_state r;
	CHECK_EQ_INT(nemo_xproc_join(x, "rx", &p, NULL), 0);
	CHECK_EQ_INT(nemo_xproc_handle(x, "count", on_count, &r), 0);
	uint64_t per = (uint64_t)(1000000 * scale / SENDERS) + 1;
	if (per < 1000)
		per = 1000;
	pid_t kids[SENDERS];
	for (int i = 0; i < SENDERS; i++) {
		kids[i] = fork();
		if (kids[i] == 0)
			_exit(sender_main(i, per, "rx"));
	}
	CHECK_EQ_INT(wait_count(p, &r, per * SENDERS), 0);
	for (int i = 0; i < SENDERS; i++)
		CHECK_EQ_INT(child_exit(kids[i]), 0);
	unsigned h = 0;
	CHECK(nemo_xproc_poll(p, &h) == 0 && h == 0);   /* nothing duplicated */
	CHECK_EQ_INT(r.count, per * SENDERS);
	CHECK_EQ_INT(r.bad, 0);
	uint64_t total = 0;
	for (unsigned s = 0; s < NEMO_XPROC_PLACES_MAX; s++)
		total += r.next[s];
	CHECK_EQ_INT(total, per * SENDERS);

	/* Blocked ping-pong: both sides sleep on their shared futexes. */
	nemo_wait_policy block = {.kind = NEMO_WAIT_BLOCK};
	CHECK_EQ_INT(nemo_xproc_set_policy(p, &block), 0);
	uint64_t rounds = (uint64_t)(20000 * scale);
	if (rounds < 200)
		rounds = 200;
	pid_t echo = fork();
	if (echo == 0) {
		alarm(120);
		nemo_xproc *cx;
		nemo_xproc_place *q;
		uint32_t code;
		if (nemo_xproc_attach(seg, NULL, &cx) || nemo_xproc_name(cx, "pong", &code) ||
		    nemo_xproc_handle(cx, "ping", on_echo, &code) || nemo_xproc_join(cx, "echo", &q, NULL))
			_exit(2);
		nemo_xproc_set_policy(q, &block);
		static struct rx_state stop;
		nemo_xproc_set_notify(q, on_notify, &stop);
		while (stop.count == 0) {
			struct timespec dl = deadline_ms(30000);
			int rc = nemo_xproc_wait(q, &dl, NULL);
			if (rc == ETIMEDOUT)
				_exit(0);   /* the parent is done */
			if (rc && rc != ECONNRESET)
				_exit(3);
		}
		nemo_xproc_detach(cx);
		_exit(0);
	}
	uint64_t last = 0;
	uint32_t ping;
	CHECK_EQ_INT(nemo_xproc_handle(x, "pong", on_pong, &last), 0);
	CHECK_EQ_INT(nemo_xproc_name(x, "ping", &ping), 0);
	nemo_xproc_id eid;
	int tries = 0;
	while (nemo_xproc_find(x, "echo", &eid) != 0 && tries++ < 30000)
		usleep(1000);
	uint64_t ok = 0;
	for (uint64_t k = 1; k <= rounds; k++) {
		if (nemo_xproc_send(p, eid, ping, 2 * k, NULL, 0, 0))
			break;
		struct timespec dl = deadline_ms(30000);
		while (last != 2 * k + 1)
			if (nemo_xproc_wait(p, &dl, NULL) == ETIMEDOUT)
				break;
		if (last != 2 * k + 1)
			break;
		ok++;
	}
	CHECK_EQ_INT(ok, rounds);
	nemo_xproc_counters c;
	nemo_xproc_get_counters(x, &c);
	printf("flood: %llu messages from %d processes; ping-pong %llu rounds, %llu kicks\n",
	       (unsigned long long)r.count, SENDERS, (unsigned long long)ok, (unsigned long long)c.kicks);
	CHECK_EQ_INT(nemo_xproc_notify(p, eid, 1, 0), 0);   /* stop */
	nemo_xproc_leave(p);
	CHECK_EQ_INT(child_exit(echo), 0);
	nemo_xproc_unlink(seg);
	nemo_xproc_detach(x);
}

/* ------------------------------------------------------------------ */

static void on_vic(void *ctx, nemo_xproc_place *p, const nemo_xproc_msg *m)
{
	(void)ctx;
	(void)p;
	(void)m;
	atomic_fetch_add(&sh->vic_received, 1);
}

static void test_kill(void)
{
	seg_name("kill");
	nemo_xproc *x;
	CHECK_EQ_INT(nemo_xproc_create(seg, NULL, &x), 0);
	nemo_xproc_place *p;
	static struct rx_state r;
	CHECK_EQ_INT(nemo_xproc_join(x, "rx", &p, NULL), 0);
	CHECK_EQ_INT(nemo_xproc_handle(x, "count", on_count, &r), 0);

	pid_t vic = fork();
	if (vic == 0) {   /* the victim receiver: drains until killed */
		alarm(120);
		nemo_xproc *cx;
		nemo_xproc_place *q;
		if (nemo_xproc_attach(seg, NULL, &cx) || nemo_xproc_handle(cx, "vic", on_vic, NULL) ||
		    nemo_xproc_join(cx, "vic", &q, NULL))
			_exit(2);
		atomic_fetch_add(&sh->ready, 1);
		for (;;)
			nemo_xproc_wait(q, NULL, NULL);
	}
	while (atomic_load(&sh->ready) < 1)
		usleep(1000);
	pid_t a = fork();
	if (a == 0) {   /* floods the victim until its sends fail: must be ECONNRESET */
		alarm(120);
		nemo_xproc *cx;
		nemo_xproc_place *q;
		uint32_t code;
		nemo_xproc_id v;
		if (sender_setup("a", "vic", "vic", &cx, &q, &code, &v))
			_exit(2);
		for (uint64_t k = 0;; k++) {
			int rc = nemo_xproc_send(q, v, code, k, NULL, 0, 0);
			if (rc == ECONNRESET)
				_exit(0);
			if (rc) {
				fprintf(stderr, "a: send: %d\n", rc);
				_exit(3);
			}
		}
	}
	pid_t b = fork();
	if (b == 0) {   /* floods the parent until killed */
		alarm(120);
		nemo_xproc *cx;
		nemo_xproc_place *q;
		uint32_t code;
		nemo_xproc_id rx;
		if (sender_setup("b", "count", "rx", &cx, &q, &code, &rx))
			_exit(2);
		for (uint64_t k = 0;; k++) {
			if (nemo_xproc_send(q, rx, code, k, NULL, 0, 0))
				_exit(3);
			atomic_store(&sh->b_sent, k + 1);
		}
	}
	/* Let both floods run, then kill the victim and the sender. */
	struct timespec dl = deadline_ms(30000);
	uint64_t goal = (uint64_t)(20000 * scale) + 100;
	while (r.count < goal || atomic_load(&sh->vic_received) < goal) {
		int rc = nemo_xproc_wait(p, &dl, NULL);
		if (rc == ETIMEDOUT)
			break;
	}
	CHECK(r.count >= goal);
	kill(vic, SIGKILL);
	kill(b, SIGKILL);
	/* The survivors: a's send fails with ECONNRESET; our wait reports it. */
	int deaths = 0;
	dl = deadline_ms(30000);
	while (deaths == 0) {
		int rc = nemo_xproc_wait(p, &dl, NULL);
		if (rc == ECONNRESET)
			deaths++;
		else if (rc == ETIMEDOUT)
			break;
	}
	CHECK(deaths > 0);
	CHECK_EQ_INT(child_exit(a), 0);
	CHECK_EQ_INT(child_exit(vic), 1000 + SIGKILL);
	CHECK_EQ_INT(child_exit(b), 1000 + SIGKILL);
	nemo_xproc_check(x);
	/* b's stream: in order, nothing duplicated, up to its death. */
	nemo_xproc_poll(p, NULL);
	CHECK_EQ_INT(r.bad, 0);
	CHECK(r.count >= atomic_load(&sh->b_sent) && r.count <= atomic_load(&sh->b_sent) + 1);
	nemo_xproc_id v;
	CHECK_EQ_INT(nemo_xproc_find(x, "vic", &v), ENOENT);   /* reclaimed */

	/* A restarted victim attaches and joins again, and talks to us. */
	pid_t again = fork();
	if (again == 0) {
		alarm(60);
		nemo_xproc *cx;
		nemo_xproc_place *q;
		uint32_t code;
		nemo_xproc_id rx;
		if (nemo_xproc_attach(seg, NULL, &cx) || nemo_xproc_join(cx, "vic", &q, NULL) ||
		    nemo_xproc_name(cx, "count", &code) || nemo_xproc_find(cx, "rx", &rx))
			_exit(2);
		if (nemo_xproc_send(q, rx, code, 0, NULL, 0, 0))
			_exit(3);
		nemo_xproc_detach(cx);
		_exit(0);
	}
	uint64_t before = r.count;
	dl = deadline_ms(30000);
	while (r.count == before)
		if (nemo_xproc_wait(p, &dl, NULL) == ETIMEDOUT)
			break;
	CHECK_EQ_INT(r.count, before + 1);
	CHECK_EQ_INT(r.bad, 0);
	CHECK_EQ_INT(child_exit(again), 0);
	nemo_xproc_unlink(seg);
	nemo_xproc_detach(x);
}

/* ------------------------------------------------------------------ */

/* A hostile peer's slots, made by hand: a message is sent, found in the
 * segment by its arg, and rewritten; the receiver must reject it (no
 * handler runs, EBADMSG, counted).  And a segment whose header is not
 * nemo's is refused at attach (EPROTO). */
#define MARK 0x6e656d6f0badf00dull

static int hostile_calls;
static void on_hostile(void *ctx, nemo_xproc_place *p, const nemo_xproc_msg *m)
{
	(void)ctx;
	(void)p;
	(void)m;
	hostile_calls++;
}

static unsigned char *map_seg(size_t *size)
{
	char path[128];
	snprintf(path, sizeof path, "/dev/shm/%s", seg);
	int fd = open(path, O_RDWR);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0)
		return NULL;
	*size = (size_t)st.st_size;
	unsigned char *b = mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return b == MAP_FAILED ? NULL : b;
}

/* The slot holding the last message sent with arg MARK: its arg field. */
static _Atomic uint64_t *find_mark(unsigned char *b, size_t size)
{
	for (size_t off = 0; off + 8 <= size; off += 8) {
		_Atomic uint64_t *w = (_Atomic uint64_t *)(b + off);
		if (atomic_load_explicit(w, memory_order_relaxed) == MARK)
			return w;
	}
	return NULL;
}

static void test_hostile(void)
{
	seg_name("hostile");
	nemo_xproc *x;
	nemo_xproc_attr a = {.max_procs = 2, .max_places = 2, .ring_slots = 4, .max_names = 4};
	CHECK_EQ_INT(nemo_xproc_create(seg, &a, &x), 0);
	nemo_xproc_place *p, *q;
	nemo_xproc_id qid;
	CHECK_EQ_INT(nemo_xproc_join(x, "p", &p, NULL), 0);
	CHECK_EQ_INT(nemo_xproc_join(x, "q", &q, &qid), 0);
	uint32_t code;
	CHECK_EQ_INT(nemo_xproc_handle(x, "h", on_hostile, NULL), 0);
	CHECK_EQ_INT(nemo_xproc_name(x, "h", &code), 0);
	size_t size = 0;
	unsigned char *b = map_seg(&size);
	CHECK(b != NULL);
	if (!b)
		return;
	/* Slot fields around arg (xproc.c, THE SEGMENT): seq src dst code
	 * [arg] kindlen payload.  Each case rewrites one of them. */
	for (int c = 0; c < 6; c++) {
		CHECK_EQ_INT(nemo_xproc_send(p, qid, code, MARK, "ok", 2, 0), 0);
		_Atomic uint64_t *arg = find_mark(b, size);
		CHECK(arg != NULL);
		if (!arg)
			break;
		_Atomic uint32_t *w = (_Atomic uint32_t *)arg;
		switch (c) {
		case 0: atomic_store(&w[2], 1u << 16 | 200); break;          /* len 200 */
		case 1: atomic_store(&w[2], 9u << 16 | 2); break;            /* unknown kind */
		case 2: atomic_store(&w[-1], 9999); break;                   /* code out of range */
		case 3: atomic_store(&w[-2], qid ^ 0x100); break;            /* dst: another generation */
		case 4: atomic_store(&w[-3], 0xFFFFFFFFu); break;            /* src: index 255 */
		case 5: atomic_store(&w[2], 2u << 16 | 4); break;            /* a notification with a payload */
		}
		atomic_store(arg, 0);   /* the next find must not meet this slot */
		unsigned h = 99;
		nemo_xproc_counters before, after;
		nemo_xproc_get_counters(x, &before);
		CHECK_EQ_INT(nemo_xproc_poll(q, &h), EBADMSG);
		CHECK_EQ_INT(h, 0);
		nemo_xproc_get_counters(x, &after);
		CHECK_EQ_INT(after.rejected, before.rejected + 1);
	}
	CHECK_EQ_INT(hostile_calls, 0);
	/* The ring is not stuck: a good message after the bad ones arrives. */
	CHECK_EQ_INT(nemo_xproc_send(p, qid, code, 1, NULL, 0, 0), 0);
	unsigned h = 0;
	CHECK_EQ_INT(nemo_xproc_poll(q, &h), 0);
	CHECK_EQ_INT(h, 1);
	CHECK_EQ_INT(hostile_calls, 1);
	/* A scribbled header: later attaches refuse it. */
	memset(b, 0x5a, 64);
	nemo_xproc *y;
	CHECK_EQ_INT(nemo_xproc_attach(seg, NULL, &y), EPROTO);
	/* The attached handle does not re-read the header: it still works. */
	CHECK_EQ_INT(nemo_xproc_send(p, qid, code, 2, NULL, 0, 0), 0);
	CHECK_EQ_INT(nemo_xproc_poll(q, &h), 0);
	CHECK_EQ_INT(h, 1);
	munmap(b, size);
	/* A file of the wrong size under a nemo name. */
	nemo_xproc_unlink(seg);
	char path[128];
	snprintf(path, sizeof path, "/dev/shm/%s", seg);
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	CHECK(fd >= 0);
	if (fd >= 0) {
		CHECK(write(fd, "nemo", 4) == 4);
		close(fd);
		CHECK_EQ_INT(nemo_xproc_attach(seg, NULL, &y), EPROTO);
		unlink(path);
	}
	nemo_xproc_detach(x);
}

/* A send that raced its destination's leave and a rejoin of the index
 * wrote into the reset ring at its old position (made here by hand:
 * the slot's seq says "filled at position 1", its dst the old
 * generation).  The new receiver rejects it; the sender, writing to the
 * new generation from position 0, steps over the slot when it gets
 * there instead of finding the ring full for ever. */
static void test_stale(void)
{
	seg_name("stale");
	nemo_xproc *x;
	nemo_xproc_attr a = {.max_procs = 2, .max_places = 2, .ring_slots = 4, .max_names = 4};
	CHECK_EQ_INT(nemo_xproc_create(seg, &a, &x), 0);
	nemo_xproc_place *p, *q;
	nemo_xproc_id qid, q2id;
	CHECK_EQ_INT(nemo_xproc_join(x, "p", &p, NULL), 0);
	CHECK_EQ_INT(nemo_xproc_join(x, "q", &q, &qid), 0);
	uint32_t code;
	CHECK_EQ_INT(nemo_xproc_handle(x, "h", on_hostile, NULL), 0);
	CHECK_EQ_INT(nemo_xproc_name(x, "h", &code), 0);
	unsigned h = 0;
	CHECK_EQ_INT(nemo_xproc_send(p, qid, code, 1, NULL, 0, 0), 0);       /* position 0 */
	CHECK_EQ_INT(nemo_xproc_poll(q, &h), 0);
	CHECK_EQ_INT(nemo_xproc_send(p, qid, code, MARK, NULL, 0, 0), 0);    /* position 1: its slot */
	size_t size = 0;
	unsigned char *b = map_seg(&size);
	_Atomic uint64_t *arg = b ? find_mark(b, size) : NULL;
	CHECK(arg != NULL);
	if (!arg)
		return;
	CHECK_EQ_INT(nemo_xproc_leave(q), 0);
	CHECK_EQ_INT(nemo_xproc_join(x, "q2", &q, &q2id), 0);                /* the same index, reset */
	CHECK(q2id != qid && (q2id & 0xFF) == (qid & 0xFF));
	_Atomic uint32_t *w = (_Atomic uint32_t *)arg;
	atomic_store(&w[-2], qid);                                           /* dst: the old generation */
	atomic_store(&w[-4], 2u);                                            /* seq: filled at position 1 */
	int calls = hostile_calls;
	nemo_xproc_counters before, after;
	nemo_xproc_get_counters(x, &before);
	for (int k = 0; k < 12; k++) {       /* three laps of the ring past the stale slot */
		CHECK_EQ_INT(nemo_xproc_send(p, q2id, code, 2, NULL, 0, NEMO_XPROC_NONBLOCK), 0);
		h = 0;
		nemo_xproc_poll(q, &h);
		CHECK_EQ_INT(h, 1);
	}
	nemo_xproc_get_counters(x, &after);
	CHECK_EQ_INT(after.rejected, before.rejected + 1);
	CHECK_EQ_INT(hostile_calls, calls + 12);
	munmap(b, size);
	nemo_xproc_unlink(seg);
	nemo_xproc_detach(x);
}

/* A domain of this process alone (2 processes, 4 names), its name
 * unlinked at once: the tests below need no attacher. */
static nemo_xproc *private_domain(const char *tag, unsigned places, unsigned slots)
{
	seg_name(tag);
	nemo_xproc_attr a = {.max_procs = 2, .max_places = places, .ring_slots = slots, .max_names = 4};
	nemo_xproc *x = NULL;
	CHECK_EQ_INT(nemo_xproc_create(seg, &a, &x), 0);
	nemo_xproc_unlink(seg);
	return x;
}

/* This process's handler for name, and the name's code. */
static uint32_t handled_name(nemo_xproc *x, const char *name, nemo_xproc_handler fn, void *ctx)
{
	uint32_t code = 0;
	CHECK_EQ_INT(nemo_xproc_handle(x, name, fn, ctx), 0);
	CHECK_EQ_INT(nemo_xproc_name(x, name, &code), 0);
	return code;
}

/* A receiver in the middle of draining a sender's ring runs a handler;
 * meanwhile the sender's index is left and joined again (here, by the
 * handler itself), and the new place sends.  The drain must not take the
 * new generation's slots at the old positions: every message of the new
 * sender is delivered once, in order, and the ring goes on. */
static nemo_xproc *rj_x;
static nemo_xproc_place *rj_a, *rj_b;
static nemo_xproc_id rj_rid, rj_aid, rj_bid;
static uint32_t rj_code;
static int rj_b_sent, rj_b_got, rj_b_next, rj_b_order_ok = 1, rj_first = 1;

static void on_rejoin(void *ctx, nemo_xproc_place *p, const nemo_xproc_msg *m)
{
	(void)ctx;
	(void)p;
	if (m->arg >= 100) {
		rj_b_order_ok &= m->arg - 100 == (uint64_t)rj_b_next;
		rj_b_next++;
		rj_b_got++;
		return;
	}
	if (!rj_first)
		return;
	rj_first = 0;
	CHECK_EQ_INT(nemo_xproc_leave(rj_a), 0);
	CHECK_EQ_INT(nemo_xproc_join(rj_x, "b", &rj_b, &rj_bid), 0);
	CHECK_EQ_INT(rj_bid & 0xFF, rj_aid & 0xFF);           /* A's index, a new generation */
	for (int i = 0; i < 5; i++)
		if (nemo_xproc_send(rj_b, rj_rid, rj_code, 100 + (uint64_t)rj_b_sent, NULL, 0, NEMO_XPROC_NONBLOCK) == 0)
			rj_b_sent++;
}

static void test_rejoin(void)
{
	/* Two places: B can only take A's index (with a free index whose
	 * sender's messages were all read, a join takes that one: below). */
	rj_x = private_domain("rejoin", 2, 8);
	nemo_xproc_place *r;
	CHECK_EQ_INT(nemo_xproc_join(rj_x, "r", &r, &rj_rid), 0);
	CHECK_EQ_INT(nemo_xproc_join(rj_x, "a", &rj_a, &rj_aid), 0);
	rj_code = handled_name(rj_x, "m", on_rejoin, NULL);
	for (int i = 0; i < 3; i++)
		CHECK_EQ_INT(nemo_xproc_send(rj_a, rj_rid, rj_code, (uint64_t)i, NULL, 0, NEMO_XPROC_NONBLOCK), 0);
	unsigned h;
	nemo_xproc_poll(r, &h);          /* A's first message; its handler swaps A for B */
	CHECK_EQ_INT(rj_b_sent, 5);
	for (int k = 0; k < 3; k++)
		nemo_xproc_poll(r, &h);
	/* The ring goes on: four laps more, each message polled at once. */
	for (int i = 0; i < 32; i++) {
		int rc = nemo_xproc_send(rj_b, rj_rid, rj_code, 100 + (uint64_t)rj_b_sent, NULL, 0, NEMO_XPROC_NONBLOCK);
		CHECK_EQ_INT(rc, 0);
		if (rc)
			break;
		rj_b_sent++;
		nemo_xproc_poll(r, &h);
	}
	nemo_xproc_poll(r, &h);
	CHECK_EQ_INT(rj_b_got, rj_b_sent);
	CHECK(rj_b_order_ok);
	nemo_xproc_counters c;
	CHECK_EQ_INT(nemo_xproc_get_counters(rj_x, &c), 0);
	CHECK_EQ_INT(c.rejected, 0);
	CHECK_EQ_INT(c.dropped, 2);      /* A's two unread messages, counted by B's join */
	CHECK_EQ_INT(nemo_xproc_detach(rj_x), 0);

	/* With a choice, a join leaves an index whose messages are unread
	 * alone: A's messages reach r after A left, from A's id. */
	nemo_xproc *x = private_domain("handover", 4, 8);
	nemo_xproc_place *pa, *pb;
	nemo_xproc_id aid, bid;
	CHECK_EQ_INT(nemo_xproc_join(x, "r", &r, &rj_rid), 0);
	CHECK_EQ_INT(nemo_xproc_join(x, "a", &pa, &aid), 0);
	uint32_t code = handled_name(x, "h", on_hostile, NULL);
	for (int i = 0; i < 3; i++)
		CHECK_EQ_INT(nemo_xproc_send(pa, rj_rid, code, (uint64_t)i, NULL, 0, 0), 0);
	CHECK_EQ_INT(nemo_xproc_leave(pa), 0);
	CHECK_EQ_INT(nemo_xproc_join(x, "b", &pb, &bid), 0);
	CHECK((bid & 0xFF) != (aid & 0xFF));
	CHECK_EQ_INT(nemo_xproc_send(pb, rj_rid, code, 3, NULL, 0, 0), 0);
	int calls = hostile_calls;
	h = 0;
	CHECK_EQ_INT(nemo_xproc_poll(r, &h), 0);
	CHECK_EQ_INT(h, 4);
	CHECK_EQ_INT(hostile_calls, calls + 4);
	/* Once they are read, A's index is taken again by the next join. */
	nemo_xproc_place *pc;
	nemo_xproc_id cid;
	CHECK_EQ_INT(nemo_xproc_join(x, "c", &pc, &cid), 0);
	CHECK_EQ_INT(cid & 0xFF, aid & 0xFF);
	CHECK_EQ_INT(nemo_xproc_get_counters(x, &c), 0);
	CHECK_EQ_INT(c.dropped, 0);
	CHECK_EQ_INT(nemo_xproc_detach(x), 0);
}

/* A blocking send that waits for room serves its own place meanwhile; a
 * handler there sends to the same destination (handlers never wait).
 * The waiting send must go on from where those sends left the ring, not
 * wait at a slot they filled: every message arrives, and no send hangs
 * (an alarm fails the test instead).  The receiver r takes its queue when
 * s's handler asks it to (or every millisecond), so that the handler's
 * sends take the room r makes, again and again, while s's own send waits. */
static nemo_xproc *ns_x;
static nemo_xproc_id ns_rid, ns_sid;
static uint32_t ns_data, ns_ping;
static _Atomic int ns_stop, ns_received, ns_inner, ns_go, ns_done;
static _Atomic(nemo_xproc_place *) ns_ready;

static void on_ns_data(void *ctx, nemo_xproc_place *p, const nemo_xproc_msg *m)
{
	(void)ctx;
	(void)m;
	atomic_fetch_add(&ns_received, 1);
	nemo_xproc_send(p, ns_sid, ns_ping, 0, NULL, 0, NEMO_XPROC_NONBLOCK);   /* r -> s */
}

static void on_ns_ping(void *ctx, nemo_xproc_place *p, const nemo_xproc_msg *m)
{
	(void)ctx;
	(void)m;
	if (atomic_load(&ns_inner) >= 2000)
		return;
	/* Let r empty its queue, then fill the room from this handler. */
	int g = atomic_fetch_add(&ns_go, 1) + 1;
	while (atomic_load(&ns_done) < g)
		sched_yield();
	while (atomic_load(&ns_inner) < 2000 && nemo_xproc_send(p, ns_rid, ns_data, 1, NULL, 0, NEMO_XPROC_NONBLOCK) == 0)
		atomic_fetch_add(&ns_inner, 1);
}

static void *ns_receiver(void *arg)
{
	(void)arg;
	nemo_xproc_place *r;
	if (nemo_xproc_join(ns_x, "r", &r, &ns_rid) != 0)
		return NULL;
	atomic_store(&ns_ready, r);
	unsigned h;
	int seen = 0;
	struct timespec last;
	clock_gettime(CLOCK_MONOTONIC, &last);
	while (!atomic_load(&ns_stop)) {
		int g = atomic_load(&ns_go);
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (g != seen || (now.tv_sec - last.tv_sec) * 1000000000L + now.tv_nsec - last.tv_nsec > 1000000) {
			do
				nemo_xproc_poll(r, &h);
			while (h);
			seen = g;
			last = now;
			atomic_store(&ns_done, g);
		} else {
			sched_yield();
		}
	}
	for (int i = 0; i < 50; i++) {
		nemo_xproc_poll(r, &h);
		usleep(1000);
	}
	return NULL;
}

static void test_nested(void)
{
	ns_x = private_domain("nested", 4, 4);
	ns_data = handled_name(ns_x, "data", on_ns_data, NULL);
	ns_ping = handled_name(ns_x, "ping", on_ns_ping, NULL);
	nemo_xproc_place *s;
	CHECK_EQ_INT(nemo_xproc_join(ns_x, "s", &s, &ns_sid), 0);
	pthread_t t;
	CHECK_EQ_INT(pthread_create(&t, NULL, ns_receiver, NULL), 0);
	while (!atomic_load(&ns_ready))
		usleep(1000);
	alarm(120);                      /* a hang is a failure */
	int outer = 0;
	for (int i = 0; i < 400; i++) {
		int rc = nemo_xproc_send(s, ns_rid, ns_data, 0, NULL, 0, 0);
		CHECK_EQ_INT(rc, 0);
		if (rc)
			break;
		outer++;
	}
	atomic_store(&ns_stop, 1);
	pthread_join(t, NULL);
	alarm(0);
	/* (s's last pings stay queued: handling them would send more.) */
	CHECK_EQ_INT(atomic_load(&ns_received), outer + atomic_load(&ns_inner));
	CHECK(atomic_load(&ns_inner) >= 8);   /* the handler filled the ring while s's send waited */
	CHECK_EQ_INT(nemo_xproc_detach(ns_x), 0);
}

/* Errors of the raw calls: an id with bits no id has, a channel above
 * NEMO_NOTIFY_CHAN_MAX (sent, or forged in the segment by a peer),
 * detach from a handler. */
static nemo_xproc *ap_x;
static int ap_detach_rc = -1, ap_notified;
static void on_ap_detach(void *ctx, nemo_xproc_place *p, const nemo_xproc_msg *m)
{
	(void)ctx;
	(void)p;
	(void)m;
	ap_detach_rc = nemo_xproc_detach(ap_x);
}
static void on_ap_note(void *ctx, nemo_xproc_place *p, nemo_xproc_id src, uint32_t chan)
{
	(void)ctx;
	(void)p;
	(void)src;
	CHECK(chan <= NEMO_NOTIFY_CHAN_MAX);
	ap_notified++;
}

static void test_api(void)
{
	seg_name("api");
	nemo_xproc_attr a = {.max_procs = 2, .max_places = 4, .ring_slots = 4, .max_names = 4};
	CHECK_EQ_INT(nemo_xproc_create(seg, &a, &ap_x), 0);
	nemo_xproc_place *r, *s;
	nemo_xproc_id rid, sid;
	uint32_t code;
	CHECK_EQ_INT(nemo_xproc_join(ap_x, "r", &r, &rid), 0);
	CHECK_EQ_INT(nemo_xproc_join(ap_x, "s", &s, &sid), 0);
	code = handled_name(ap_x, "m", on_ap_detach, NULL);
	CHECK_EQ_INT(nemo_xproc_set_notify(r, on_ap_note, NULL), 0);
	unsigned h = 0;
	/* Bits 24-31 set: no such place, said at once (not sent and dropped). */
	nemo_xproc_id odd = rid | 0x7F000000u;
	CHECK_EQ_INT(nemo_xproc_send(s, odd, code, 1, NULL, 0, 0), ESRCH);
	CHECK_EQ_INT(nemo_xproc_notify(s, odd, 1, 0), ESRCH);
	CHECK_EQ_INT(nemo_xproc_place_check(ap_x, odd), ESRCH);
	CHECK(nemo_xproc_place_id(ap_x, odd) == NEMO_PLACE_NONE);
	CHECK_EQ_INT(nemo_xproc_poll(r, &h), 0);
	CHECK_EQ_INT(h, 0);
	/* Channels: the bound holds for senders and against a forged slot. */
	CHECK_EQ_INT(nemo_xproc_notify(s, rid, NEMO_NOTIFY_CHAN_MAX + 1, 0), ERANGE);
	CHECK_EQ_INT(nemo_xproc_notify(s, rid, NEMO_NOTIFY_CHAN_MAX, 0), 0);
	CHECK_EQ_INT(nemo_xproc_poll(r, &h), 0);
	CHECK_EQ_INT(ap_notified, 1);
	CHECK_EQ_INT(nemo_xproc_notify(s, rid, MARK & 0xFFFF, 0), 0);     /* then forge its channel */
	size_t size = 0;
	unsigned char *b = map_seg(&size);
	int forged = 0;
	for (size_t off = 0; b && off + 64 <= size; off += 64) {
		_Atomic uint32_t *w = (_Atomic uint32_t *)(b + off);     /* seq, src, dst, code */
		if (atomic_load(&w[1]) == sid && atomic_load(&w[2]) == rid && atomic_load(&w[3]) == (MARK & 0xFFFF)) {
			atomic_store(&w[3], 0xFFFFFFF0u);
			forged++;
		}
	}
	CHECK_EQ_INT(forged, 1);
	nemo_xproc_counters c0, c1;
	nemo_xproc_get_counters(ap_x, &c0);
	CHECK_EQ_INT(nemo_xproc_poll(r, &h), EBADMSG);
	nemo_xproc_get_counters(ap_x, &c1);
	CHECK_EQ_INT(c1.rejected, c0.rejected + 1);
	CHECK_EQ_INT(ap_notified, 1);
	if (b)
		munmap(b, size);
	/* Detach from a handler: refused, and everything still works. */
	CHECK_EQ_INT(nemo_xproc_send(s, rid, code, 1, NULL, 0, 0), 0);
	CHECK_EQ_INT(nemo_xproc_poll(r, &h), 0);
	CHECK_EQ_INT(h, 1);
	CHECK_EQ_INT(ap_detach_rc, EBUSY);
	CHECK_EQ_INT(nemo_xproc_place_check(ap_x, rid), 0);
	nemo_xproc_unlink(seg);
	CHECK_EQ_INT(nemo_xproc_detach(ap_x), 0);
}

/* A child of fork holds copies of its parent's handle and places: every
 * call that would act for them says ENOTCONN, and a detach there frees
 * the child's copy only - the parent's places, its process slot and its
 * messages are untouched. */
static void test_inherit(void)
{
	seg_name("inherit");
	nemo_xproc *x;
	nemo_xproc_attr a = {.max_procs = 4, .max_places = 4, .ring_slots = 4, .max_names = 4};
	CHECK_EQ_INT(nemo_xproc_create(seg, &a, &x), 0);
	nemo_xproc_place *r, *s;
	nemo_xproc_id rid, sid;
	CHECK_EQ_INT(nemo_xproc_join(x, "r", &r, &rid), 0);
	CHECK_EQ_INT(nemo_xproc_join(x, "s", &s, &sid), 0);
	uint32_t code = handled_name(x, "h", on_hostile, NULL);
	CHECK_EQ_INT(nemo_xproc_send(s, rid, code, 1, NULL, 0, 0), 0);
	pid_t pid = fork();
	if (pid == 0) {
		alarm(60);
		int bad = 0;
		nemo_xproc_place *z;
		unsigned h;
		bad += nemo_xproc_send(s, rid, code, 2, NULL, 0, 0) != ENOTCONN;
		bad += nemo_xproc_notify(s, rid, 1, 0) != ENOTCONN;
		bad += nemo_xproc_poll(r, &h) != ENOTCONN;      /* the parent's message stays */
		bad += nemo_xproc_wait(r, NULL, &h) != ENOTCONN;
		bad += nemo_xproc_join(x, "z", &z, NULL) != ENOTCONN;
		bad += nemo_xproc_leave(s) != ENOTCONN;
		bad += nemo_xproc_detach(x) != 0;               /* the child's copy */
		/* The child may attach on its own. */
		nemo_xproc *y;
		nemo_xproc_place *c;
		nemo_xproc_id cid;
		bad += nemo_xproc_attach(seg, NULL, &y) != 0;
		bad += nemo_xproc_join(y, "c", &c, &cid) != 0;
		bad += (cid & 0xFF) == (rid & 0xFF) || (cid & 0xFF) == (sid & 0xFF);
		bad += nemo_xproc_send(c, rid, code, 3, NULL, 0, 0) != 0;
		bad += nemo_xproc_detach(y) != 0;
		_exit(bad);
	}
	CHECK_EQ_INT(child_exit(pid), 0);
	nemo_xproc_id f;
	CHECK_EQ_INT(nemo_xproc_find(x, "r", &f), 0);
	CHECK_EQ_INT(f, rid);
	CHECK_EQ_INT(nemo_xproc_place_check(x, rid), 0);
	CHECK_EQ_INT(nemo_xproc_place_check(x, sid), 0);
	int calls = hostile_calls;
	unsigned h = 0;
	CHECK_EQ_INT(nemo_xproc_poll(r, &h), 0);
	CHECK_EQ_INT(h, 2);                                  /* the parent's 1, the child's 3 */
	CHECK_EQ_INT(hostile_calls, calls + 2);
	CHECK_EQ_INT(nemo_xproc_send(s, rid, code, 4, NULL, 0, 0), 0);
	CHECK_EQ_INT(nemo_xproc_poll(r, &h), 0);
	CHECK_EQ_INT(h, 1);
	nemo_xproc_unlink(seg);
	CHECK_EQ_INT(nemo_xproc_detach(x), 0);
}

/* Handlers registered again while another thread's drain runs them: the
 * drain sees one registration or the other, never a handler with the
 * other's context (ThreadSanitizer sees both sides). */
static int rh_ctx1, rh_ctx2;
static _Atomic int rh_got, rh_torn;
static void on_rh1(void *ctx, nemo_xproc_place *p, const nemo_xproc_msg *m)
{
	(void)p;
	(void)m;
	atomic_fetch_add(&rh_got, 1);
	if (ctx != &rh_ctx1)
		atomic_fetch_add(&rh_torn, 1);
}
static void on_rh2(void *ctx, nemo_xproc_place *p, const nemo_xproc_msg *m)
{
	(void)p;
	(void)m;
	atomic_fetch_add(&rh_got, 1);
	if (ctx != &rh_ctx2)
		atomic_fetch_add(&rh_torn, 1);
}
static nemo_xproc *rh_x;
static nemo_xproc_id rh_rid;
static _Atomic int rh_ready, rh_n;
static void *rh_receiver(void *arg)
{
	(void)arg;
	nemo_xproc_place *r;
	if (nemo_xproc_join(rh_x, "r", &r, &rh_rid) != 0)
		return NULL;
	atomic_store(&rh_ready, 1);
	while (atomic_load(&rh_got) < atomic_load(&rh_n)) {
		unsigned h;
		struct timespec dl = deadline_ms(100);
		nemo_xproc_wait(r, &dl, &h);
	}
	return NULL;
}
static void test_rehandle(void)
{
	rh_x = private_domain("rehandle", 4, 16);
	uint32_t code = handled_name(rh_x, "m", on_rh1, &rh_ctx1);
	nemo_xproc_place *s;
	CHECK_EQ_INT(nemo_xproc_join(rh_x, "s", &s, NULL), 0);
	int n = (int)(20000 * scale) + 100;
	atomic_store(&rh_n, n);
	pthread_t t;
	CHECK_EQ_INT(pthread_create(&t, NULL, rh_receiver, NULL), 0);
	while (!atomic_load(&rh_ready))
		usleep(1000);
	alarm(120);
	for (int i = 0; i < n; i++) {
		CHECK_EQ_INT(nemo_xproc_send(s, rh_rid, code, (uint64_t)i, NULL, 0, 0), 0);
		if (i % 3 == 0)
			nemo_xproc_handle(rh_x, "m", (i / 3) % 2 ? on_rh2 : on_rh1, (i / 3) % 2 ? &rh_ctx2 : &rh_ctx1);
	}
	pthread_join(t, NULL);
	alarm(0);
	CHECK_EQ_INT(atomic_load(&rh_got), n);
	CHECK_EQ_INT(atomic_load(&rh_torn), 0);
	CHECK_EQ_INT(nemo_xproc_detach(rh_x), 0);
}

/* Two places of one process on two threads (ThreadSanitizer sees both
 * sides of the rings and the futex handshake here). */
static struct rx_state tr;
static nemo_xproc_place *tq;
static uint64_t tn;

static void *thread_rx(void *arg)
{
	(void)arg;
	nemo_wait_policy pol = {.kind = NEMO_WAIT_HYBRID, .spin_ns = 1000};
	nemo_xproc_set_policy(tq, &pol);
	struct timespec dl = deadline_ms(60000);
	while (tr.count < tn)
		if (nemo_xproc_wait(tq, &dl, NULL) == ETIMEDOUT)
			break;
	return NULL;
}

static void test_threads(void)
{
	seg_name("threads");
	nemo_xproc *x;
	CHECK_EQ_INT(nemo_xproc_create(seg, NULL, &x), 0);
	nemo_xproc_place *p;
	nemo_xproc_id qid;
	uint32_t code;
	CHECK_EQ_INT(nemo_xproc_join(x, "p", &p, NULL), 0);
	CHECK_EQ_INT(nemo_xproc_join(x, "q", &tq, &qid), 0);
	CHECK_EQ_INT(nemo_xproc_handle(x, "count", on_count, &tr), 0);
	CHECK_EQ_INT(nemo_xproc_name(x, "count", &code), 0);
	tn = (uint64_t)(100000 * scale) + 100;
	pthread_t t;
	pthread_create(&t, NULL, thread_rx, NULL);
	for (uint64_t k = 0; k < tn; k++)
		if (nemo_xproc_send(p, qid, code, k, &k, sizeof k, 0))
			break;
	pthread_join(t, NULL);
	CHECK_EQ_INT(tr.count, tn);
	CHECK_EQ_INT(tr.bad, 0);
	nemo_xproc_unlink(seg);
	nemo_xproc_detach(x);
}


/* ------------------------------------------------------------------ */
/* The public calls                                                    */
/* ------------------------------------------------------------------ */

struct pub_state {
	uint32_t c_reply, c_ack;
	uint64_t replies, acks, bad, bcasts;
	uint64_t want_tag;
	nemo_place_id want_src;
	bool stop;
};
static struct pub_state ps;

static void pub_on_echo(const nemo_am_msg *m, void *ctx)
{
	struct pub_state *s = ctx;
	if (m->is_reply || m->event != NEMO_AM_NO_EVENT || nemo_xproc_id_of(m->src) == 0 ||
	    m->context != NEMO_AM_CTX_WAIT)
		s->bad++;
	if (nemo_am_reply(m, s->c_reply, m->arg + 1, m->payload, m->len, 0))
		s->bad++;
}

static void pub_on_bcast(const nemo_am_msg *m, void *ctx)
{
	struct pub_state *s = ctx;
	s->bcasts++;
	if (nemo_am_send(m->src, s->c_ack, m->arg, 0))
		s->bad++;
}

static void pub_on_note(void *ctx, nemo_place_id src, uint32_t chan)
{
	struct pub_state *s = ctx;
	if (nemo_xproc_id_of(src) == 0)
		s->bad++;
	if (chan == 9)
		s->stop = true;
}

static void pub_on_reply(const nemo_am_msg *m, void *ctx)
{
	struct pub_state *s = ctx;
	if (!m->is_reply || m->tag != s->want_tag || m->arg != s->want_tag + 1 || m->len != 3 ||
	    memcmp(m->payload, "abc", 3) || m->src != s->want_src)
		s->bad++;
	s->replies++;
}

static void pub_on_ack(const nemo_am_msg *m, void *ctx)
{
	struct pub_state *s = ctx;
	(void)m;
	s->acks++;
}

static void pub_child(const char *name)
{
	alarm(120);
	nemo_xproc *cx;
	if (nemo_xproc_attach(seg, NULL, &cx))
		_exit(2);
	if (nemo_xproc_name(cx, "reply", &ps.c_reply) || nemo_xproc_name(cx, "ack", &ps.c_ack) ||
	    nemo_xproc_handle_am(cx, "echo", pub_on_echo, &ps) || nemo_xproc_handle_am(cx, "bcast", pub_on_bcast, &ps))
		_exit(3);
	nemo_xproc_place *q;
	if (nemo_xproc_join(cx, name, &q, NULL))
		_exit(4);
	if (nemo_notify_set_handler(pub_on_note, &ps))   /* the public call, on the shared place */
		_exit(5);
	while (!ps.stop) {
		struct timespec dl = deadline_ms(60000);
		int rc = nemo_place_wait(&dl, NULL);
		if (rc && rc != ECONNRESET)
			_exit(6);
	}
	nemo_xproc_detach(cx);
	_exit(ps.bad ? 7 : 0);
}

static void *pub_no_place(void *arg)
{
	nemo_place_id *dst = arg;
	CHECK_EQ_INT(nemo_am_send(*dst, 0, 0, 0), ENOTCONN);
	CHECK_EQ_INT(nemo_notify(*dst, 1, 0), ENOTCONN);
	CHECK_EQ_INT(nemo_poll(NULL), ENOTCONN);
	return NULL;
}

static int pub_wait(uint64_t *count, uint64_t want)
{
	while (*count < want) {
		struct timespec dl = deadline_ms(30000);
		int rc = nemo_place_wait(&dl, NULL);
		if (rc && rc != ECONNRESET)
			return rc;
	}
	return 0;
}

static void test_public(void)
{
	seg_name("public");
	nemo_xproc *x;
	CHECK_EQ_INT(nemo_xproc_create(seg, NULL, &x), 0);
	CHECK_EQ_INT(nemo_xproc_place_id(NULL, 0x101), NEMO_PLACE_NONE);
	CHECK_EQ_INT(nemo_xproc_id_of(5), 0);
	CHECK_EQ_INT(nemo_xproc_id_of(NEMO_PLACE_NONE), 0);
	uint32_t c_echo, c_bcast;
	CHECK_EQ_INT(nemo_xproc_name(x, "echo", &c_echo), 0);
	CHECK_EQ_INT(nemo_xproc_name(x, "bcast", &c_bcast), 0);
	CHECK_EQ_INT(nemo_xproc_handle_am(x, "reply", pub_on_reply, &ps), 0);
	CHECK_EQ_INT(nemo_xproc_handle_am(x, "ack", pub_on_ack, &ps), 0);
	/* Not a place yet: the public calls say so. */
	CHECK_EQ_INT(nemo_poll(NULL), ENOTCONN);
	nemo_xproc_place *p;
	nemo_xproc_id me;
	CHECK_EQ_INT(nemo_xproc_join(x, "parent", &p, &me), 0);
	CHECK_EQ_INT(nemo_xproc_id_of(nemo_xproc_place_id(x, me)), me);
	unsigned h = 99;
	CHECK_EQ_INT(nemo_poll(&h), 0);   /* the thread's shared place, nothing queued */
	CHECK_EQ_INT(h, 0);

	pid_t kids[2];
	const char *names[2] = {"c1", "c2"};
	for (int i = 0; i < 2; i++)
		if ((kids[i] = fork()) == 0)
			pub_child(names[i]);
	nemo_xproc_id xid[2];
	nemo_place_id pub[2];
	for (int i = 0; i < 2; i++) {
		int tries = 0;
		while (nemo_xproc_find(x, names[i], &xid[i]) != 0 && tries++ < 30000)
			usleep(1000);
		pub[i] = nemo_xproc_place_id(x, xid[i]);
		CHECK_EQ_INT(nemo_xproc_id_of(pub[i]), xid[i]);
	}
	/* The handlers are registered before the place joins: wait for
	 * nothing more.  Requests and replies, payload and tag. */
	uint64_t n = (uint64_t)(2000 * scale) + 10;
	for (uint64_t k = 0; k < n; k++) {
		int i = (int)(k & 1);
		ps.want_tag = k;
		ps.want_src = pub[i];
		if (nemo_am_sendv(pub[i], c_echo, k, "abc", 3, 0))
			break;
		if (pub_wait(&ps.replies, k + 1))
			break;
	}
	CHECK_EQ_INT(ps.replies, n);
	CHECK_EQ_INT(ps.bad, 0);
	/* Broadcast to everyone, then to a set: every child acks each. */
	size_t sent = 0;
	CHECK_EQ_INT(nemo_am_broadcast(NULL, 0, c_bcast, 5, NULL, 0, 0, &sent), 0);
	CHECK_EQ_INT(sent, 2);
	CHECK_EQ_INT(pub_wait(&ps.acks, 2), 0);
	CHECK_EQ_INT(nemo_am_broadcast(pub, 2, c_bcast, 6, "p", 1, NEMO_NONBLOCK, &sent), 0);
	CHECK_EQ_INT(sent, 2);
	CHECK_EQ_INT(pub_wait(&ps.acks, 4), 0);
	CHECK_EQ_INT(nemo_xproc_broadcast(p, xid, 2, c_bcast, 7, NULL, 0, 0, &sent), 0);
	CHECK_EQ_INT(sent, 2);
	CHECK_EQ_INT(pub_wait(&ps.acks, 6), 0);

	/* Bad input: specific errors, nothing sent. */
	char big[NEMO_XPROC_PAYLOAD_MAX + 1] = {0};
	CHECK_EQ_INT(nemo_am_sendv(pub[0], c_echo, 0, big, sizeof big, 0), EMSGSIZE);
	CHECK_EQ_INT(nemo_am_send(pub[0], NEMO_AM_EVENT(1), 0, 0), EINVAL);
	CHECK(strstr(nemo_last_error(), "events are not mapped") != NULL);
	CHECK_EQ_INT(nemo_am_send(pub[0], c_echo, 0, 0x100), EINVAL);
	CHECK_EQ_INT(nemo_notify(pub[0], NEMO_NOTIFY_CHAN_MAX + 1, 0), ERANGE);
	nemo_place_id mixed[2] = {pub[0], 5};
	CHECK_EQ_INT(nemo_am_broadcast(mixed, 2, c_bcast, 0, NULL, 0, 0, &sent), EINVAL);
	CHECK_EQ_INT(sent, 0);
	nemo_place_id gone = nemo_xproc_place_id(x, (xid[0] & 0xFF) | ((((xid[0] >> 8) + 7) & 0xFFFF) << 8));
	CHECK_EQ_INT(nemo_am_send(gone, c_echo, 0, 0), ESRCH);
	pthread_t t;
	pthread_create(&t, NULL, pub_no_place, &pub[0]);
	pthread_join(t, NULL);
	/* A child of fork holds copies of our handle and places: its public
	 * calls must not use them (a nemo_poll would drain our rings). */
	pid_t f = fork();
	if (f == 0) {
		alarm(30);
		int ok = nemo_poll(NULL) == ENOTCONN && nemo_am_send(pub[0], c_echo, 0, 0) == ESRCH;
		_exit(ok ? 0 : 1);
	}
	CHECK_EQ_INT(child_exit(f), 0);

	for (int i = 0; i < 2; i++)
		CHECK_EQ_INT(nemo_notify(pub[i], 9, 0), 0);
	for (int i = 0; i < 2; i++)
		CHECK_EQ_INT(child_exit(kids[i]), 0);
	CHECK_EQ_INT(ps.bad, 0);
	nemo_xproc_unlink(seg);
	CHECK_EQ_INT(nemo_xproc_detach(x), 0);
	/* The handle is gone: its ids name nothing. */
	CHECK_EQ_INT(nemo_am_send(pub[0], c_echo, 0, 0), ESRCH);
	CHECK_EQ_INT(nemo_poll(NULL), ENOTCONN);
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
	if (!strcmp(what, "basic") || !strcmp(what, "all"))
		test_basic();
	if (!strcmp(what, "flood") || !strcmp(what, "all"))
		test_flood();
	if (!strcmp(what, "kill") || !strcmp(what, "all"))
		test_kill();
	if (!strcmp(what, "hostile") || !strcmp(what, "all"))
		test_hostile();
	if (!strcmp(what, "threads") || !strcmp(what, "all"))
		test_threads();
	if (!strcmp(what, "stale") || !strcmp(what, "all"))
		test_stale();
	if (!strcmp(what, "public") || !strcmp(what, "all"))
		test_public();
	if (!strcmp(what, "rejoin") || !strcmp(what, "all"))
		test_rejoin();
	if (!strcmp(what, "nested") || !strcmp(what, "all"))
		test_nested();
	if (!strcmp(what, "api") || !strcmp(what, "all"))
		test_api();
	if (!strcmp(what, "inherit") || !strcmp(what, "all"))
		test_inherit();
	if (!strcmp(what, "rehandle") || !strcmp(what, "all"))
		test_rehandle();
	return check_exit("test_xproc");
}
