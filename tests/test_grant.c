/*
 * test_grant.c - stream grants (src/messaging/grant.c, THE STREAM GRANT):
 * a receiver that keeps finding a sender's stream grants it, so that the
 * sender's sends need no fence, hint or kick; before the receiver stops
 * watching - it sleeps in nemo_place_wait, or turns to its eventfd - it
 * takes the grant back, and nothing sent meanwhile is lost or late:
 *
 *   - a stream of bound sends is granted (counters.grants), every message
 *     arrives in order;
 *   - the receiver then sleeps (the grant is revoked: grant_revokes), and
 *     one more message wakes it (a kick, which a granted send would not
 *     have made);
 *   - the same with generic sends, and with the receiver turning to its
 *     eventfd instead of sleeping: the next message makes it readable;
 *   - bursts of random length with random pauses for a second, the
 *     receiver in nemo_place_wait (spinning, then sleeping, revoking what
 *     it granted): every message arrives, in order, and no wait runs into
 *     its deadline while a message is queued (a lost wake-up).
 *
 * A stream is granted only where membarrier works (NEMO_MEMBARRIER=0
 * turns it off: then the test checks that nothing was granted).  Timing is
 * never asserted: the receiver polls only once PACE messages are waiting
 * (or the stream is over), so every poll of a stream finds messages and
 * the grant's condition (1024 messages with no pause of 64 empty polls)
 * holds however slow either side runs - a sanitizer, a loaded machine.
 */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/nemo.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

enum { ACT = 1, STREAM = 20000, PACE = 128 };

static atomic_ulong got, bad;
static uint64_t expect;            /* receiver-private: the next arg */

static void on_msg(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	if (m->arg != expect)
		atomic_fetch_add(&bad, 1);
	expect = m->arg + 1;
	atomic_fetch_add(&got, 1);
}

struct shared {
	nemo_domain *d;
	_Atomic nemo_place_id rx;
	atomic_ulong target;           /* messages the receiver polls for */
	atomic_ulong sent;             /* messages sent so far */
	atomic_int flush;              /* 1 outside a stream: poll whatever is there */
	atomic_int phase;              /* 1: poll to target; 2: wait (sleep); 3: eventfd; 9: leave */
	atomic_int parked;             /* the receiver is in its phase-2 wait, or armed its eventfd */
	int mode;                      /* 0: bound sends, 1: generic sends */
};

static bool granted_off(void)
{
	const char *e = getenv("NEMO_MEMBARRIER");
	return e && !strcmp(e, "0");
}

static void *receiver(void *p)
{
	struct shared *s = p;
	nemo_place_id id;
	CHECK_EQ_INT(nemo_place_join(s->d, NULL, &id), 0);
	atomic_store(&s->rx, id);
	for (;;) {
		int ph = atomic_load(&s->phase);
		if (ph == 9)
			break;
		if (ph == 1 || atomic_load(&got) >= atomic_load(&s->target)) {
			if (!atomic_load(&s->flush) && atomic_load(&s->sent) - atomic_load(&got) < PACE)
				continue;                   /* the stream's next batch: PACE waiting */
			CHECK_EQ_INT(nemo_poll(NULL), 0);   /* a polling receiver: streams get granted */
			continue;
		}
		if (ph == 2) {
			/* Sleep until the last message: the revocation comes first. */
			atomic_store(&s->parked, 1);
			struct timespec dl = in_ms(CLOCK_MONOTONIC, 10000);
			while (atomic_load(&got) < atomic_load(&s->target))
				if (nemo_place_wait(&dl, NULL) == ETIMEDOUT)
					break;
			CHECK(atomic_load(&got) >= atomic_load(&s->target));   /* woken: not lost */
			atomic_store(&s->parked, 0);
		} else if (ph == 3) {
			int fd;
			CHECK_EQ_INT(nemo_place_fd(&fd), 0);   /* armed: the revocation comes first */
			atomic_store(&s->parked, 1);
			struct pollfd pf = { .fd = fd, .events = POLLIN };
			while (atomic_load(&got) < atomic_load(&s->target)) {
				int r = poll(&pf, 1, 10000);
				CHECK(r == 1);                  /* readable: not lost */
				if (r != 1)
					break;
				CHECK_EQ_INT(nemo_poll(NULL), 0);
			}
			atomic_store(&s->parked, 0);
		}
	}
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static uint64_t next_arg;

static void send_one(struct shared *s, nemo_am_bound *b)
{
	int err = s->mode == 0 ? nemo_am_send_bound(b, next_arg) : nemo_am_send(atomic_load(&s->rx), ACT, next_arg, 0);
	CHECK_EQ_INT(err, 0);
	next_arg++;
	atomic_store(&s->sent, next_arg);
}

static void counters(nemo_domain *d, nemo_domain_counters *c)
{
	CHECK_EQ_INT(nemo_domain_get_counters(d, c), 0);
}

/* One stream, paced: the receiver polls batches of PACE. */
static void stream(struct shared *s, nemo_am_bound *b)
{
	nemo_domain_counters c0, c;
	counters(s->d, &c0);
	atomic_store(&s->target, next_arg + STREAM);
	atomic_store(&s->flush, 0);
	for (int i = 0; i < STREAM; i++)
		send_one(s, b);
	atomic_store(&s->flush, 1);
	while (atomic_load(&got) < next_arg)
		;
	counters(s->d, &c);
	CHECK_EQ_INT(atomic_load(&bad), 0);
	if (granted_off())
		CHECK_EQ_INT(c.grants, c0.grants);
	else
		CHECK(c.grants > c0.grants);
}

/* The receiver stops watching (phase 2 or 3), then one more message. */
static void park_then_send(struct shared *s, nemo_am_bound *b, int phase)
{
	nemo_domain_counters c0, c;
	counters(s->d, &c0);
	atomic_store(&s->target, next_arg + 1);
	atomic_store(&s->phase, phase);
	while (!atomic_load(&s->parked))
		;
	if (phase == 2)                   /* until it sleeps: then it has revoked */
		for (;;) {
			counters(s->d, &c);
			if (c.sleeps > c0.sleeps)
				break;
			struct timespec ms = { 0, 1000000 };
			nanosleep(&ms, NULL);
		}
	send_one(s, b);
	while (atomic_load(&s->parked))
		;
	CHECK_EQ_INT(atomic_load(&got), next_arg);
	counters(s->d, &c);
	if (!granted_off() && phase == 2)
		CHECK(c.grant_revokes > c0.grant_revokes);   /* the grant of stream() */
	atomic_store(&s->phase, 1);
}

/* Both parts: a domain with on_msg, a receiver thread rx_main(arg) that
 * publishes its id in *rx, and the calling thread joined as the sender;
 * mode 0 returns its binding to the receiver (bound sends), 1 NULL. */
static nemo_am_bound *start(nemo_domain **d, void *(*rx_main)(void *), void *arg, _Atomic nemo_place_id *rx,
			    int mode, pthread_t *t)
{
	CHECK_EQ_INT(nemo_domain_create(NULL, d), 0);
	CHECK_EQ_INT(nemo_action_register(*d, ACT, on_msg, NULL), 0);
	atomic_store(&got, 0);
	atomic_store(&bad, 0);
	expect = next_arg = 0;
	pthread_create(t, NULL, rx_main, arg);
	while (!atomic_load(rx))
		;
	CHECK_EQ_INT(nemo_place_join(*d, NULL, NULL), 0);
	nemo_am_bound *b = NULL;
	if (mode == 0)
		CHECK_EQ_INT(nemo_am_bind(atomic_load(rx), ACT, 0, &b), 0);
	return b;
}

static void run(int mode)
{
	struct shared s = { .phase = 1, .mode = mode, .flush = 1 };
	pthread_t t;
	nemo_am_bound *b = start(&s.d, receiver, &s, &s.rx, mode, &t);
	stream(&s, b);
	park_then_send(&s, b, 2);        /* sleeps: revoked, then kicked */
	stream(&s, b);                   /* granted again */
	park_then_send(&s, b, 3);        /* its eventfd: revoked, then written */
	for (int i = 0; i < 1000; i++)   /* event-loop mode grants nothing: kicks */
		send_one(&s, b);
	atomic_store(&s.target, next_arg);
	while (atomic_load(&got) < next_arg)
		;
	CHECK_EQ_INT(atomic_load(&bad), 0);
	atomic_store(&s.phase, 9);
	pthread_join(t, NULL);
	if (b)
		CHECK_EQ_INT(nemo_am_unbind(b), 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	nemo_domain_counters c;
	counters(s.d, &c);
	CHECK_EQ_INT(c.am_sent, next_arg);   /* bound sends settled at the leave */
	CHECK_EQ_INT(c.am_handled, next_arg);
	CHECK_EQ_INT(nemo_domain_destroy(s.d), 0);
}

/* ------------------------------------------------------------- bursts */

struct burst {
	nemo_domain *d;
	_Atomic nemo_place_id rx;
	atomic_ulong sent;
	atomic_int done;
};

static void *burst_rx(void *p)
{
	struct burst *s = p;
	nemo_place_id id;
	CHECK_EQ_INT(nemo_place_join(s->d, NULL, &id), 0);
	atomic_store(&s->rx, id);
	while (!atomic_load(&s->done) || atomic_load(&got) < atomic_load(&s->sent)) {
		struct timespec dl = in_ms(CLOCK_MONOTONIC, 10000);
		unsigned long before = atomic_load(&s->sent);
		if (nemo_place_wait(&dl, NULL) == ETIMEDOUT)
			CHECK(atomic_load(&got) >= before);    /* sent before the wait, never woken */
	}
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void bursts(int mode)
{
	struct burst s = { 0 };
	pthread_t t;
	nemo_am_bound *b = start(&s.d, burst_rx, &s, &s.rx, mode, &t);
	unsigned seed = 12345u + (unsigned)mode;
	uint64_t v = 0;
	struct timespec end = in_ms(CLOCK_MONOTONIC, 1000), now;
	do {
		int n = 200 + rand_r(&seed) % 6000;
		for (int i = 0; i < n; i++, v++) {
			int err = mode == 0 ? nemo_am_send_bound(b, v) : nemo_am_send(atomic_load(&s.rx), ACT, v, 0);
			CHECK_EQ_INT(err, 0);
			atomic_store(&s.sent, v + 1);
		}
		if (rand_r(&seed) % 4) {          /* a pause: long enough, at times, for a sleep */
			struct timespec ps = { 0, (long)(rand_r(&seed) % 300) * 1000 };
			nanosleep(&ps, NULL);
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (now.tv_sec < end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec < end.tv_nsec));
	atomic_store(&s.done, 1);
	nemo_domain_counters c;
	if (b)
		CHECK_EQ_INT(nemo_am_unbind(b), 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	pthread_join(t, NULL);
	CHECK_EQ_INT(atomic_load(&got), v);
	CHECK_EQ_INT(atomic_load(&bad), 0);
	CHECK_EQ_INT(nemo_domain_get_counters(s.d, &c), 0);
	CHECK_EQ_INT(c.am_sent, v);
	CHECK(c.grant_revokes <= c.grants);
	printf("bursts (%s sends): %llu messages, %llu grants, %llu revocations, %llu sleeps\n",
	       mode == 0 ? "bound" : "generic", (unsigned long long)v, (unsigned long long)c.grants,
	       (unsigned long long)c.grant_revokes, (unsigned long long)c.sleeps);
	CHECK_EQ_INT(nemo_domain_destroy(s.d), 0);
}

int main(void)
{
	run(0);
	run(1);
	bursts(0);
	bursts(1);
	return check_exit("test_grant");
}
