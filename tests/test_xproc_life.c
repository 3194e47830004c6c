/*
 * test_xproc_life.c - a shared domain's processes live and die, its
 * names and segment are made, its sends and waits end (nemo/xproc.h;
 * docs/xproc.md).  White-box: it sets the test hook of src/xproc/ and
 * writes a place word of the segment as a hostile peer would.
 *
 *   test_xproc_life reuse      a dead peer whose pid another process took
 *                              is reclaimed (with a reference kept from
 *                              before, and with one opened after); a live
 *                              peer that got a dead peer's pid and process
 *                              slot is never reclaimed (real pid reuse,
 *                              tests/pidreuse.h)
 *   test_xproc_life reclaimed  a live process whose place was reclaimed:
 *                              its sends, polls and waits return EOWNERDEAD
 *                              and touch nothing, and the process that
 *                              takes the index gets every message
 *   test_xproc_life deadline   deadlines in the past (tv_sec < 0) time out,
 *                              deadlines too far to count never do: in
 *                              nemo_xproc_wait, nemo_place_wait and the
 *                              timed sends (nemo_am_send_timed, ...)
 *   test_xproc_life create     two processes doing "create, else attach" at
 *                              once, many rounds: one creates, one attaches,
 *                              never EPROTO; a creator killed mid-create
 *                              leaves the name free
 *   test_xproc_life names      a name claimer stopped mid-claim: the name
 *                              keeps one code; a claimer killed mid-claim
 *                              is taken over
 *   test_xproc_life room       a blocking send to a place that stops
 *                              draining sleeps (under 10% of a CPU) and
 *                              completes when it drains; it ends with
 *                              ESRCH when the receiver leaves, ECONNRESET
 *                              when its process is killed
 *
 * Every child has an alarm: a hang fails the test, never stalls it.
 * Nothing here asserts a time (the CPU share of a blocked send is a
 * share, with a generous bound).
 */
#define _GNU_SOURCE
#include "check.h"
#include "pidreuse.h"

#include <nemo/xproc.h>
#include <nemo/am.h>
#include <nemo/notify.h>

#include "platform/proc.h"
#include "xproc/segment.h"   /* nemo__xproc_test_hook */

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
#include <time.h>
#include <unistd.h>

static char seg[80];
static double scale = 1.0;

/* Coordination between the test's processes (not nemo's segment). */
struct shared {
	_Atomic int ready, go, stop, done;
	_Atomic int rc[8];
	_Atomic uint32_t code[4];
	_Atomic uint64_t count;
	_Atomic int res[2];
};
static struct shared *sh;

static void seg_name(const char *tag)
{
	snprintf(seg, sizeof seg, "nemo-test-xlife-%d-%s", (int)getpid(), tag);
}

static int child_exit(pid_t pid)
{
	int st = 0;
	pid_t w;
	do
		w = waitpid(pid, &st, 0);
	while (w < 0 && errno == EINTR);
	if (w != pid) {
		fprintf(stderr, "waitpid(%d): %s\n", (int)pid, strerror(errno));
		return -1;
	}
	if (WIFSIGNALED(st))
		return 1000 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

static struct timespec deadline_ms(int ms)
{
	return in_ms(CLOCK_MONOTONIC, ms);
}

/* Wait (sleeping a millisecond at a time, at most 60 s) until *flag >= v. */
static bool await(_Atomic int *flag, int v)
{
	for (int i = 0; i < 60000 && atomic_load(flag) < v; i++)
		usleep(1000);
	return atomic_load(flag) >= v;
}

static double mono_s(clockid_t clk)
{
	struct timespec t;
	clock_gettime(clk, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

struct rx {
	_Atomic uint64_t count, bad, next;
};

static void on_count(void *ctx, nemo_xproc_place *p, const nemo_xproc_msg *m)
{
	(void)p;
	struct rx *r = ctx;
	if (m->arg != atomic_load(&r->next))
		atomic_fetch_add(&r->bad, 1);
	atomic_store(&r->next, m->arg + 1);
	atomic_fetch_add(&r->count, 1);
}

/* ------------------------------------------------------------------ */
/* reuse                                                               */
/* ------------------------------------------------------------------ */

static int sleeper(void *arg)
{
	(void)arg;
	alarm(120);
	for (;;)
		pause();
	return 0;
}

/* A peer: attach, join `name`, say so, and live until killed. */
static int peer_main(void *arg)
{
	const char *name = arg;
	alarm(120);
	nemo_xproc *cx;
	nemo_xproc_place *q;
	if (nemo_xproc_attach(seg, NULL, &cx) || nemo_xproc_join(cx, name, &q, NULL))
		return 2;
	atomic_fetch_add(&sh->ready, 1);
	for (;;)
		pause();
	return 0;
}

static pid_t peer(const char *name)
{
	int before = atomic_load(&sh->ready);
	pid_t c = fork();
	if (c == 0)
		_exit(peer_main((void *)name));
	CHECK(await(&sh->ready, before + 1));
	return c;
}

/* The live peer that gets a dead peer's pid and slot: attach, join "w",
 * then answer one message with a send of its own. */
static struct rx w_rx;
static int live_main(void *arg)
{
	(void)arg;
	alarm(120);
	nemo_xproc *cx;
	nemo_xproc_place *q;
	uint32_t code;
	nemo_xproc_id parent;
	if (nemo_xproc_attach(seg, NULL, &cx) || nemo_xproc_handle(cx, "m", on_count, &w_rx) ||
	    nemo_xproc_join(cx, "w", &q, NULL) || nemo_xproc_find(cx, "parent", &parent) ||
	    nemo_xproc_name(cx, "m", &code))
		return 2;
	atomic_fetch_add(&sh->ready, 1);
	struct timespec dl = deadline_ms(60000);
	while (atomic_load(&w_rx.count) == 0) {
		int rc = nemo_xproc_wait(q, &dl, NULL);
		if (rc && rc != ECONNRESET)
			return 3;
	}
	if (nemo_xproc_send(q, parent, code, 0, NULL, 0, 0))
		return 4;
	await(&sh->stop, 1);
	nemo_xproc_detach(cx);
	return 0;
}

/* Kill and reap c (its pid is free afterwards), and let a clock tick
 * pass, so that the next process's start time differs. */
static void kill_reap(pid_t c)
{
	kill(c, SIGKILL);
	CHECK_EQ_INT(child_exit(c), 1000 + SIGKILL);
	usleep(30000);
}

static void test_reuse(void)
{
	seg_name("reuse");
	nemo_xproc_attr a = {.max_procs = 4, .max_places = 4, .ring_slots = 4, .max_names = 4};
	nemo_xproc *x;
	CHECK_EQ_INT(nemo_xproc_create(seg, &a, &x), 0);
	nemo_xproc_place *p;
	static struct rx r;
	CHECK_EQ_INT(nemo_xproc_join(x, "parent", &p, NULL), 0);
	CHECK_EQ_INT(nemo_xproc_handle(x, "m", on_count, &r), 0);
	nemo_xproc_counters c0, c1;
	nemo_xproc_id id;
	int reused = 0;

	/* 1. A dead peer whose pid was taken before anyone looked at it:
	 * the reference opened now is of the new process, whose start
	 * time is not the peer's. */
	pid_t v = peer("v1");
	CHECK_EQ_INT(nemo_xproc_find(x, "v1", &id), 0);
	kill_reap(v);
	pid_t n = pidreuse_fork(v, sleeper, NULL);
	CHECK(n > 0);
	if (n == v) {
		reused++;
		CHECK_EQ_INT(nemo_xproc_place_check(x, id), ECONNRESET);
		CHECK_EQ_INT(nemo_xproc_find(x, "v1", &id), ENOENT);
	}
	if (n > 0)
		kill_reap(n);
	nemo_xproc_check(x);

	/* 2. The same, with a reference kept from while the peer lived. */
	v = peer("v2");
	CHECK_EQ_INT(nemo_xproc_find(x, "v2", &id), 0);
	CHECK_EQ_INT(nemo_xproc_place_check(x, id), 0);
	kill_reap(v);
	n = pidreuse_fork(v, sleeper, NULL);
	CHECK(n > 0);
	if (n == v) {
		reused++;
		CHECK_EQ_INT(nemo_xproc_place_check(x, id), ECONNRESET);
		CHECK_EQ_INT(nemo_xproc_find(x, "v2", &id), ENOENT);
	}
	if (n > 0)
		kill_reap(n);
	nemo_xproc_check(x);

	/* 3. A live peer that got a dead peer's pid and its process slot
	 * (the lowest free one): never reclaimed, by a handle that knew the
	 * dead one nor by one attached afterwards; it sends and receives. */
	v = peer("v3");
	CHECK_EQ_INT(nemo_xproc_find(x, "v3", &id), 0);
	CHECK_EQ_INT(nemo_xproc_place_check(x, id), 0);
	kill_reap(v);
	nemo_xproc_check(x);                     /* v3 reclaimed: its slot is free */
	CHECK_EQ_INT(nemo_xproc_find(x, "v3", &id), ENOENT);
	int before = atomic_load(&sh->ready);
	n = pidreuse_fork(v, live_main, NULL);
	CHECK(n > 0);
	CHECK(await(&sh->ready, before + 1));
	if (n == v)
		reused++;
	CHECK_EQ_INT(nemo_xproc_get_counters(x, &c0), 0);
	for (int i = 0; i < 5; i++)
		CHECK_EQ_INT(nemo_xproc_check(x), 0);
	CHECK_EQ_INT(nemo_xproc_find(x, "w", &id), 0);
	CHECK_EQ_INT(nemo_xproc_place_check(x, id), 0);
	nemo_xproc *y;
	CHECK_EQ_INT(nemo_xproc_attach(seg, NULL, &y), 0);   /* fresh references */
	CHECK_EQ_INT(nemo_xproc_place_check(y, id), 0);
	CHECK_EQ_INT(nemo_xproc_detach(y), 0);
	CHECK_EQ_INT(nemo_xproc_get_counters(x, &c1), 0);
	CHECK_EQ_INT(c1.reclaimed, c0.reclaimed);
	uint32_t code;
	CHECK_EQ_INT(nemo_xproc_name(x, "m", &code), 0);
	CHECK_EQ_INT(nemo_xproc_send(p, id, code, 0, NULL, 0, 0), 0);
	struct timespec dl = deadline_ms(30000);
	while (atomic_load(&r.count) == 0 && nemo_xproc_wait(p, &dl, NULL) != ETIMEDOUT)
		;
	CHECK_EQ_INT(atomic_load(&r.count), 1);
	atomic_store(&sh->stop, 1);
	if (n > 0)
		CHECK_EQ_INT(child_exit(n), 0);
	printf("reuse: %d of 3 pids reused%s\n", reused, reused < 3 ? " (the others were taken: not checked)" : "");
	nemo_xproc_unlink(seg);
	CHECK_EQ_INT(nemo_xproc_detach(x), 0);
}

/* ------------------------------------------------------------------ */
/* reclaimed                                                           */
/* ------------------------------------------------------------------ */

/* The segment's layout (docs/xproc.md): the header is two lines, a
 * process record one, a place two - its word first on the second. */
static _Atomic uint32_t *place_word(unsigned char *b, unsigned procs, uint32_t idx)
{
	return (_Atomic uint32_t *)(b + 128 + 64 * (size_t)procs + 128 * (size_t)idx + 64);
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

/* B: joins "b", then, once its place was reclaimed, polls and waits,
 * and once another process took its index, sends (recording what they
 * return), and goes on polling and sending until told to stop - as a
 * process that does not know it was taken for dead would. */
static int b_main(void)
{
	alarm(120);
	nemo_xproc *cx;
	nemo_xproc_place *q;
	uint32_t code;
	nemo_xproc_id r;
	if (nemo_xproc_attach(seg, NULL, &cx) || nemo_xproc_join(cx, "b", &q, NULL) ||
	    nemo_xproc_name(cx, "m", &code) || nemo_xproc_find(cx, "r", &r))
		return 2;
	atomic_store(&sh->ready, 1);
	await(&sh->go, 1);
	unsigned h;
	atomic_store(&sh->rc[1], nemo_xproc_poll(q, &h));
	struct timespec dl = deadline_ms(50);
	atomic_store(&sh->rc[2], nemo_xproc_wait(q, &dl, &h));
	atomic_store(&sh->rc[3], strstr(nemo_last_error(), "reclaimed") != NULL);
	atomic_store(&sh->done, 1);
	await(&sh->go, 2);              /* C has taken the index */
	atomic_store(&sh->rc[0], nemo_xproc_send(q, r, code, 1000, NULL, 0, 0));
	atomic_store(&sh->done, 2);
	int sent = 0;
	while (!atomic_load(&sh->stop)) {
		nemo_xproc_poll(q, &h);
		sent += nemo_xproc_send(q, r, code, 1000, NULL, 0, NEMO_XPROC_NONBLOCK) == 0;
	}
	atomic_store(&sh->rc[4], sent);
	return 0;
}

/* C: joins "c" (B's index: the only one free), takes n messages, then
 * sends n (each with a deadline, so that a ring that never makes room
 * again fails the send instead of hanging it). */
static struct rx c_rx;
static int c_main(uint64_t n)
{
	alarm(120);
	nemo_xproc *cx;
	nemo_xproc_place *q;
	uint32_t code;
	nemo_xproc_id r;
	if (nemo_xproc_attach(seg, NULL, &cx) || nemo_xproc_handle(cx, "m", on_count, &c_rx) ||
	    nemo_xproc_join(cx, "c", &q, NULL) || nemo_xproc_name(cx, "m", &code) || nemo_xproc_find(cx, "r", &r))
		return 2;
	atomic_store(&sh->ready, 2);
	struct timespec dl = deadline_ms(20000);
	while (atomic_load(&c_rx.count) < n) {
		int rc = nemo_xproc_wait(q, &dl, NULL);
		if (rc == ETIMEDOUT)
			break;
	}
	atomic_store(&sh->count, atomic_load(&c_rx.count));
	atomic_fetch_add(&sh->rc[5], (int)atomic_load(&c_rx.bad));
	nemo_place_id pr = nemo_xproc_place_id(cx, r);
	uint64_t k = 0;
	for (; k < n; k++) {
		struct timespec sdl = deadline_ms(10000);
		int rc = nemo_am_send_timed(pr, code, k, 0, &sdl);
		if (rc) {
			fprintf(stderr, "reclaimed: C: send %llu: %d\n", (unsigned long long)k, rc);
			break;
		}
	}
	atomic_store(&sh->rc[6], (int)k);
	await(&sh->stop, 1);
	nemo_xproc_detach(cx);
	return 0;
}

static void test_reclaimed(void)
{
	seg_name("reclaimed");
	const unsigned procs = 4;
	nemo_xproc_attr a = {.max_procs = procs, .max_places = 2, .ring_slots = 4, .max_names = 4};
	nemo_xproc *x;
	CHECK_EQ_INT(nemo_xproc_create(seg, &a, &x), 0);
	nemo_xproc_place *p;
	nemo_xproc_id rid, bid, cid;
	CHECK_EQ_INT(nemo_xproc_join(x, "r", &p, &rid), 0);
	static struct rx r;
	CHECK_EQ_INT(nemo_xproc_handle(x, "m", on_count, &r), 0);
	uint32_t code;
	CHECK_EQ_INT(nemo_xproc_name(x, "m", &code), 0);
	pid_t b = fork();
	if (b == 0)
		_exit(b_main());
	CHECK(await(&sh->ready, 1));
	CHECK_EQ_INT(nemo_xproc_find(x, "b", &bid), 0);
	/* Reclaimed as a process taken for dead has it (XD1): DEAD, the
	 * same generation, no owner. */
	size_t size = 0;
	unsigned char *seg_b = map_seg(&size);
	CHECK(seg_b != NULL);
	if (!seg_b)
		return;
	_Atomic uint32_t *bw = place_word(seg_b, procs, bid & 0xFF);
	CHECK_EQ_INT(atomic_load(bw) >> 16, bid >> 8);
	atomic_store(bw, (bid >> 8) << 16 | 3u);
	CHECK_EQ_INT(nemo_xproc_find(x, "b", &bid), ENOENT);
	atomic_store(&sh->go, 1);
	CHECK(await(&sh->done, 1));
	CHECK_EQ_INT(atomic_load(&sh->rc[1]), EOWNERDEAD);    /* its poll */
	CHECK_EQ_INT(atomic_load(&sh->rc[2]), EOWNERDEAD);    /* its wait */
	CHECK_EQ_INT(atomic_load(&sh->rc[3]), 1);             /* the text says why */
	/* C takes B's index while B polls and sends on: C gets every
	 * message, and every message C sends arrives, in order (B takes
	 * none of C's, and sends nothing into the ring C now writes). */
	uint64_t n = (uint64_t)(400 * scale) + 40;
	pid_t c = fork();
	if (c == 0)
		_exit(c_main(n));
	CHECK(await(&sh->ready, 2));
	CHECK_EQ_INT(nemo_xproc_find(x, "c", &cid), 0);
	CHECK_EQ_INT(cid & 0xFF, bid & 0xFF);
	atomic_store(&sh->go, 2);
	CHECK(await(&sh->done, 2));
	CHECK_EQ_INT(atomic_load(&sh->rc[0]), EOWNERDEAD);    /* its send */
	nemo_place_id pc = nemo_xproc_place_id(x, cid);
	uint64_t ok = 0;
	for (uint64_t k = 0; k < n; k++) {
		struct timespec dl = deadline_ms(10000);
		int rc = nemo_am_send_timed(pc, code, k, 0, &dl);
		if (rc) {
			fprintf(stderr, "reclaimed: send %llu to C: %d\n", (unsigned long long)k, rc);
			break;
		}
		ok++;
		nemo_xproc_poll(p, NULL);
	}
	CHECK_EQ_INT(ok, n);
	struct timespec dl = deadline_ms(30000);
	while (atomic_load(&r.count) < n && nemo_xproc_wait(p, &dl, NULL) != ETIMEDOUT)
		;
	atomic_store(&sh->stop, 1);
	CHECK_EQ_INT(child_exit(c), 0);
	CHECK_EQ_INT(atomic_load(&sh->count), n);             /* C got ours */
	CHECK_EQ_INT(atomic_load(&sh->rc[5]), 0);
	CHECK_EQ_INT(atomic_load(&sh->rc[6]), n);             /* C sent its own */
	CHECK_EQ_INT(child_exit(b), 0);
	CHECK_EQ_INT(atomic_load(&sh->rc[4]), 0);             /* no send of B's went out */
	nemo_xproc_poll(p, NULL);
	CHECK_EQ_INT(atomic_load(&r.count), n);               /* C's, once each, in order */
	CHECK_EQ_INT(atomic_load(&r.bad), 0);
	munmap(seg_b, size);
	nemo_xproc_unlink(seg);
	CHECK_EQ_INT(nemo_xproc_detach(x), 0);
}

/* ------------------------------------------------------------------ */
/* deadline                                                            */
/* ------------------------------------------------------------------ */

static nemo_xproc *dl_x;
static nemo_xproc_id dl_rid;
static uint32_t dl_code;
static _Atomic int dl_phase, dl_sent;
static _Atomic int dl_rc[8];

static const struct timespec past = { -1, 0 };
static const struct timespec never = { (time_t)1 << 62, 0 };

/* The other place: when main waits (phase 1, 2), one message after a
 * while; then (phase 3) the timed sends to a ring it fills. */
static void *dl_sender(void *arg)
{
	(void)arg;
	nemo_xproc_place *s;
	if (nemo_xproc_join(dl_x, "s", &s, NULL))
		return NULL;
	nemo_place_id pr = nemo_xproc_place_id(dl_x, dl_rid);
	for (int phase = 1; phase <= 2; phase++) {
		if (!await(&dl_phase, phase))
			return NULL;
		usleep(20000);
		nemo_xproc_send(s, dl_rid, dl_code, 0, NULL, 0, 0);
	}
	if (!await(&dl_phase, 3))
		return NULL;
	int n = 0;
	while (nemo_xproc_send(s, dl_rid, dl_code, 0, NULL, 0, NEMO_XPROC_NONBLOCK) == 0)
		n++;
	struct timespec soon = deadline_ms(50), bad = { 0, 1000000000L };
	dl_rc[0] = nemo_am_send_timed(pr, dl_code, 0, 0, &past);
	dl_rc[1] = nemo_am_sendv_timed(pr, dl_code, 0, "x", 1, 0, &soon);
	dl_rc[2] = nemo_notify_timed(pr, 1, 0, &past);
	dl_rc[3] = nemo_am_send_timed(pr, dl_code, 0, NEMO_NONBLOCK, &never);
	dl_rc[4] = nemo_am_send_timed(pr, dl_code, 0, 0, &bad);
	atomic_store(&dl_sent, n);
	atomic_store(&dl_phase, 4);
	dl_rc[5] = nemo_am_send_timed(pr, dl_code, 0, 0, &never);   /* waits until main drains */
	atomic_store(&dl_phase, 5);
	return NULL;
}

static void test_deadline(void)
{
	seg_name("deadline");
	nemo_xproc_attr a = {.max_procs = 2, .max_places = 2, .ring_slots = 4, .max_names = 4};
	CHECK_EQ_INT(nemo_xproc_create(seg, &a, &dl_x), 0);
	nemo_xproc_unlink(seg);
	static struct rx r;
	CHECK_EQ_INT(nemo_xproc_handle(dl_x, "m", on_count, &r), 0);
	CHECK_EQ_INT(nemo_xproc_name(dl_x, "m", &dl_code), 0);
	nemo_xproc_place *p;
	CHECK_EQ_INT(nemo_xproc_join(dl_x, "r", &p, &dl_rid), 0);
	pthread_t t;
	CHECK_EQ_INT(pthread_create(&t, NULL, dl_sender, NULL), 0);
	alarm(60);   /* a wait that never ends fails the test */
	unsigned h = 9;
	/* In the past: at once, the raw wait and the public one. */
	CHECK_EQ_INT(nemo_xproc_wait(p, &past, &h), ETIMEDOUT);
	CHECK_EQ_INT(h, 0);
	CHECK_EQ_INT(nemo_place_wait(&past, &h), ETIMEDOUT);
	struct timespec bad = { 1, -1 };
	CHECK_EQ_INT(nemo_xproc_wait(p, &bad, &h), EINVAL);
	/* Too far to count: never times out; the message ends it. */
	atomic_store(&dl_phase, 1);
	CHECK_EQ_INT(nemo_xproc_wait(p, &never, &h), 0);
	CHECK_EQ_INT(h, 1);
	atomic_store(&dl_phase, 2);
	CHECK_EQ_INT(nemo_place_wait(&never, &h), 0);
	CHECK_EQ_INT(h, 1);
	/* The timed sends to our ring, which we do not drain. */
	atomic_store(&dl_phase, 3);
	CHECK(await(&dl_phase, 4));
	CHECK_EQ_INT(atomic_load(&dl_sent), 4);
	CHECK_EQ_INT(dl_rc[0], ETIMEDOUT);
	CHECK_EQ_INT(dl_rc[1], ETIMEDOUT);
	CHECK_EQ_INT(dl_rc[2], ETIMEDOUT);
	CHECK_EQ_INT(dl_rc[3], EAGAIN);
	CHECK_EQ_INT(dl_rc[4], EINVAL);
	usleep(50000);                  /* the far send waits (it must not time out) */
	CHECK_EQ_INT(atomic_load(&dl_phase), 4);
	while (atomic_load(&dl_phase) < 5 || atomic_load(&r.count) < 2 + 4 + 1) {
		struct timespec dl = deadline_ms(100);
		nemo_xproc_wait(p, &dl, NULL);
	}
	pthread_join(t, NULL);
	alarm(0);
	CHECK_EQ_INT(dl_rc[5], 0);
	nemo_xproc_poll(p, NULL);
	/* 2 from phases 1-2, the 4 that filled the ring, the far one: none
	 * of the sends that timed out was queued. */
	CHECK_EQ_INT(atomic_load(&r.count), 2 + 4 + 1);
	CHECK_EQ_INT(nemo_xproc_detach(dl_x), 0);
}

/* ------------------------------------------------------------------ */
/* create                                                              */
/* ------------------------------------------------------------------ */

/* One of two racers: create, else attach; 0 created, 1 attached, else
 * 100 + the error. */
static int racer(int i, int round)
{
	alarm(60);
	nemo_xproc_attr a = {.max_procs = 4, .max_places = 4, .ring_slots = 64, .max_names = 8};
	nemo_xproc *x = NULL;
	atomic_fetch_add(&sh->ready, 1);
	while (atomic_load(&sh->go) != round)
		;
	int rc = nemo_xproc_create(seg, &a, &x), res = 0;
	if (rc == EEXIST) {
		rc = nemo_xproc_attach(seg, NULL, &x);
		res = 1;
	}
	if (rc)
		res = 100 + rc;
	atomic_store(&sh->res[i], res);
	if (x)
		nemo_xproc_detach(x);
	return 0;
}

static void on_create_hook(const char *where)
{
	if (!strcmp(where, "create")) {
		atomic_store(&sh->done, 1);
		for (;;)
			pause();
	}
}

static void test_create(void)
{
	int rounds = (int)(200 * scale) + 20, eproto = 0, bad = 0;
	for (int round = 1; round <= rounds; round++) {
		char tag[32];
		snprintf(tag, sizeof tag, "race%d", round);
		seg_name(tag);
		atomic_store(&sh->ready, 0);
		atomic_store(&sh->res[0], -1);
		atomic_store(&sh->res[1], -1);
		pid_t k[2];
		for (int i = 0; i < 2; i++)
			if ((k[i] = fork()) == 0)
				_exit(racer(i, round));
		CHECK(await(&sh->ready, 2));
		atomic_store(&sh->go, round);
		for (int i = 0; i < 2; i++)
			CHECK_EQ_INT(child_exit(k[i]), 0);
		int r0 = atomic_load(&sh->res[0]), r1 = atomic_load(&sh->res[1]);
		eproto += r0 == 100 + EPROTO || r1 == 100 + EPROTO;
		bad += !((r0 == 0 && r1 == 1) || (r0 == 1 && r1 == 0));
		if (r0 >= 100 || r1 >= 100)
			fprintf(stderr, "create: round %d: %d %d\n", round, r0, r1);
		nemo_xproc_unlink(seg);
	}
	CHECK_EQ_INT(eproto, 0);
	CHECK_EQ_INT(bad, 0);
	printf("create: %d rounds of create-else-attach, %d with EPROTO, %d without one creator and one attacher\n",
	       rounds, eproto, bad);

	/* A creator killed mid-create: the name never appeared; create
	 * and attach work afterwards. */
	seg_name("killed");
	atomic_store(&sh->done, 0);
	pid_t c = fork();
	if (c == 0) {
		alarm(60);
		nemo__xproc_test_hook = on_create_hook;
		nemo_xproc *cx;
		nemo_xproc_create(seg, NULL, &cx);
		_exit(3);
	}
	CHECK(await(&sh->done, 1));
	nemo_xproc *x = NULL, *y = NULL;
	CHECK_EQ_INT(nemo_xproc_attach(seg, NULL, &y), ENOENT);
	kill(c, SIGKILL);
	CHECK_EQ_INT(child_exit(c), 1000 + SIGKILL);
	CHECK_EQ_INT(nemo_xproc_create(seg, NULL, &x), 0);
	pid_t d = fork();
	if (d == 0) {
		alarm(60);
		nemo_xproc *dx;
		_exit(nemo_xproc_attach(seg, NULL, &dx) == 0 && nemo_xproc_detach(dx) == 0 ? 0 : 1);
	}
	CHECK_EQ_INT(child_exit(d), 0);
	nemo_xproc_unlink(seg);
	if (x)
		CHECK_EQ_INT(nemo_xproc_detach(x), 0);
}

/* ------------------------------------------------------------------ */
/* names                                                               */
/* ------------------------------------------------------------------ */

static void on_name_hook(const char *where)
{
	if (!strcmp(where, "name")) {
		atomic_store(&sh->done, 1);
		raise(SIGSTOP);
	}
}

/* Enter `name`, stopping in the middle of the claim when `stop`. */
static int namer(const char *name, int slot, bool stop)
{
	alarm(120);
	nemo_xproc *cx;
	if (nemo_xproc_attach(seg, NULL, &cx))
		return 2;
	if (stop)
		nemo__xproc_test_hook = on_name_hook;
	atomic_fetch_add(&sh->ready, 1);
	uint32_t code = 0;
	int rc = nemo_xproc_name(cx, name, &code);
	atomic_store(&sh->code[slot], code);
	atomic_store(&sh->rc[slot], rc);
	nemo_xproc_detach(cx);
	return rc ? 3 : 0;
}

/* Wait until process c stops (it raised SIGSTOP). */
static bool stopped(pid_t c)
{
	int st = 0;
	return waitpid(c, &st, WUNTRACED) == c && WIFSTOPPED(st);
}

static void test_names(void)
{
	seg_name("names");
	nemo_xproc_attr a = {.max_procs = 8, .max_places = 2, .ring_slots = 2, .max_names = 16};
	nemo_xproc *x;
	CHECK_EQ_INT(nemo_xproc_create(seg, &a, &x), 0);

	/* 1. The claimer stops after its claim, before the name is written;
	 * another process enters the same name meanwhile.  It must wait
	 * for the claimer, not enter the name a second time. */
	atomic_store(&sh->done, 0);
	atomic_store(&sh->ready, 0);
	atomic_store(&sh->rc[1], -1);
	pid_t a1 = fork();
	if (a1 == 0)
		_exit(namer("contested", 0, true));
	CHECK(stopped(a1));
	CHECK_EQ_INT(atomic_load(&sh->done), 1);
	pid_t b1 = fork();
	if (b1 == 0)
		_exit(namer("contested", 1, false));
	CHECK(await(&sh->ready, 2));
	usleep(200000);                       /* far past a claim's few stores */
	CHECK_EQ_INT(atomic_load(&sh->rc[1]), -1);   /* still waiting for the stopped claimer */
	kill(a1, SIGCONT);
	CHECK_EQ_INT(child_exit(a1), 0);
	CHECK_EQ_INT(child_exit(b1), 0);
	uint32_t mine;
	CHECK_EQ_INT(nemo_xproc_name(x, "contested", &mine), 0);
	CHECK_EQ_INT(atomic_load(&sh->code[0]), mine);
	CHECK_EQ_INT(atomic_load(&sh->code[1]), mine);

	/* 2. The claimer dies there: the slot is taken over, and the name
	 * has one code for everyone after. */
	atomic_store(&sh->done, 0);
	pid_t a2 = fork();
	if (a2 == 0)
		_exit(namer("orphan", 2, true));
	CHECK(stopped(a2));
	kill(a2, SIGKILL);
	CHECK_EQ_INT(child_exit(a2), 1000 + SIGKILL);
	alarm(60);
	CHECK_EQ_INT(nemo_xproc_name(x, "orphan", &mine), 0);
	pid_t b2 = fork();
	if (b2 == 0)
		_exit(namer("orphan", 3, false));
	CHECK_EQ_INT(child_exit(b2), 0);
	alarm(0);
	CHECK_EQ_INT(atomic_load(&sh->code[3]), mine);
	uint32_t again;
	CHECK_EQ_INT(nemo_xproc_name(x, "contested", &again), 0);
	CHECK(again != mine);
	nemo_xproc_unlink(seg);
	CHECK_EQ_INT(nemo_xproc_detach(x), 0);
}

/* ------------------------------------------------------------------ */
/* room                                                                */
/* ------------------------------------------------------------------ */

static nemo_xproc *rm_x;
static nemo_xproc_id rm_rid;
static _Atomic int rm_phase;
static struct rx rm_rx;

/* The receiver thread: joins, then (phase 1) stops draining for about a
 * second while the main thread's send blocks, then drains; (phase 2)
 * (phase 4) leaves while the main thread's next send blocks. */
static void *rm_receiver(void *arg)
{
	(void)arg;
	nemo_xproc_place *r;
	if (nemo_xproc_join(rm_x, "r", &r, &rm_rid))
		return NULL;
	atomic_store(&rm_phase, 1);
	if (!await(&rm_phase, 2))
		return NULL;
	usleep(1000000);
	while (atomic_load(&rm_rx.count) < 5) {
		struct timespec dl = deadline_ms(1000);
		nemo_xproc_wait(r, &dl, NULL);
	}
	atomic_store(&rm_phase, 3);
	if (!await(&rm_phase, 4))
		return NULL;
	usleep(100000);
	nemo_xproc_leave(r);
	return NULL;
}

static void *killer(void *arg)
{
	pid_t *c = arg;
	usleep(200000);
	kill(*c, SIGKILL);
	return NULL;
}

static void test_room(void)
{
	seg_name("room");
	nemo_xproc_attr a = {.max_procs = 4, .max_places = 4, .ring_slots = 4, .max_names = 4};
	CHECK_EQ_INT(nemo_xproc_create(seg, &a, &rm_x), 0);
	uint32_t code;
	CHECK_EQ_INT(nemo_xproc_handle(rm_x, "m", on_count, &rm_rx), 0);
	CHECK_EQ_INT(nemo_xproc_name(rm_x, "m", &code), 0);
	nemo_xproc_place *s;
	CHECK_EQ_INT(nemo_xproc_join(rm_x, "s", &s, NULL), 0);
	pthread_t t;
	CHECK_EQ_INT(pthread_create(&t, NULL, rm_receiver, NULL), 0);
	CHECK(await(&rm_phase, 1));
	alarm(120);
	int n = 0;
	while (nemo_xproc_send(s, rm_rid, code, (uint64_t)n, NULL, 0, NEMO_XPROC_NONBLOCK) == 0)
		n++;
	CHECK_EQ_INT(n, 4);
	/* 1. Blocked for about a second: it sleeps, then completes. */
	atomic_store(&rm_phase, 2);
	double w0 = mono_s(CLOCK_MONOTONIC), c0 = mono_s(CLOCK_THREAD_CPUTIME_ID);
	CHECK_EQ_INT(nemo_xproc_send(s, rm_rid, code, 4, NULL, 0, 0), 0);
	double w1 = mono_s(CLOCK_MONOTONIC), c1 = mono_s(CLOCK_THREAD_CPUTIME_ID);
	printf("room: blocked %.3f s, on the CPU %.4f s (%.2f%%)\n", w1 - w0, c1 - c0,
	       100.0 * (c1 - c0) / (w1 - w0));
	CHECK(c1 - c0 < 0.1 * (w1 - w0));
	/* 2. Blocked again; the receiver leaves: ESRCH, nothing queued. */
	CHECK(await(&rm_phase, 3));
	while (nemo_xproc_send(s, rm_rid, code, (uint64_t)n, NULL, 0, NEMO_XPROC_NONBLOCK) == 0)
		n++;
	atomic_store(&rm_phase, 4);
	CHECK_EQ_INT(nemo_xproc_send(s, rm_rid, code, 99, NULL, 0, 0), ESRCH);
	pthread_join(t, NULL);
	CHECK_EQ_INT(atomic_load(&rm_rx.count), 5);
	CHECK_EQ_INT(atomic_load(&rm_rx.bad), 0);

	/* 3. Blocked on a receiver in another process, which is killed. */
	atomic_store(&sh->ready, 0);
	pid_t c = fork();
	if (c == 0) {
		alarm(120);
		nemo_xproc *cx;
		nemo_xproc_place *q;
		if (nemo_xproc_attach(seg, NULL, &cx) || nemo_xproc_join(cx, "v", &q, NULL))
			_exit(2);
		atomic_store(&sh->ready, 1);
		for (;;)
			pause();
	}
	CHECK(await(&sh->ready, 1));
	nemo_xproc_id vid;
	CHECK_EQ_INT(nemo_xproc_find(rm_x, "v", &vid), 0);
	while (nemo_xproc_send(s, vid, code, 0, NULL, 0, NEMO_XPROC_NONBLOCK) == 0)
		;
	pthread_t k;
	CHECK_EQ_INT(pthread_create(&k, NULL, killer, &c), 0);
	CHECK_EQ_INT(nemo_xproc_send(s, vid, code, 0, NULL, 0, 0), ECONNRESET);
	pthread_join(k, NULL);
	CHECK_EQ_INT(child_exit(c), 1000 + SIGKILL);
	alarm(0);
	nemo_xproc_unlink(seg);
	CHECK_EQ_INT(nemo_xproc_detach(rm_x), 0);
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
		{ "reuse", test_reuse }, { "reclaimed", test_reclaimed }, { "deadline", test_deadline },
		{ "create", test_create }, { "names", test_names }, { "room", test_room },
	};
	for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
		if (strcmp(what, "all") && strcmp(what, parts[i].name))
			continue;
		memset(sh, 0, sizeof *sh);
		parts[i].fn();
	}
	return check_exit("test_xproc_life");
}
