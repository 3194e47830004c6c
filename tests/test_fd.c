/*
 * test_fd.c - a place waiting in an epoll loop on nemo_place_fd()
 * (nemo/domain.h, "Event loops"; placewait.c, THE FILE DESCRIPTOR).
 *
 * A flood of active messages and notifications from a place, from a plain
 * thread (nemo_domain_am_send, nemo_domain_notify) and in batches reaches
 * a receiver that only ever waits in epoll_wait and calls nemo_poll when
 * its descriptor is readable: every message must arrive (an epoll_wait
 * that times out with messages missing is the failure), level- and
 * edge-triggered.  When everything has been polled the descriptor is not
 * readable; nemo_place_wait re-arms it; leaving closes it.
 */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/nemo.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

enum { ACT_COUNT = 1 };
#define FLOOD 100000u

static atomic_ulong got_am, got_nf;

static void on_msg(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	(void)ctx;
	atomic_fetch_add_explicit(&got_am, 1, memory_order_relaxed);
}

static void on_nf(void *ctx, nemo_place_id src, uint32_t chan)
{
	(void)ctx;
	(void)src;
	(void)chan;
	atomic_fetch_add_explicit(&got_nf, 1, memory_order_relaxed);
}

struct shared {
	nemo_domain *d;
	nemo_place_id rx;
	atomic_int ready;
	atomic_int senders_done;
	bool edge;
	unsigned long want_am, want_nf;
};

static void *receiver(void *p)
{
	struct shared *s = p;
	CHECK_EQ_INT(nemo_place_join(s->d, NULL, &s->rx), 0);
	CHECK_EQ_INT(nemo_notify_set_handler(on_nf, NULL), 0);
	int fd = -1;
	CHECK_EQ_INT(nemo_place_fd(&fd), 0);
	int fd2 = -1;
	CHECK_EQ_INT(nemo_place_fd(&fd2), 0);     /* the same one */
	CHECK_EQ_INT(fd2, fd);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN | (s->edge ? EPOLLET : 0) };
	CHECK_EQ_INT(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);
	atomic_store(&s->ready, 1);
	unsigned long wakes = 0;
	while (atomic_load(&got_am) < s->want_am || atomic_load(&got_nf) < s->want_nf) {
		struct epoll_event out;
		int n = epoll_wait(ep, &out, 1, 20000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0) {
			fprintf(stderr, "epoll loop (%s): 20 s without readiness, %lu/%lu messages and %lu/%lu "
				"notifications: a message was missed\n", s->edge ? "edge" : "level",
				atomic_load(&got_am), s->want_am, atomic_load(&got_nf), s->want_nf);
			CHECK(n > 0);
			break;
		}
		wakes++;
		CHECK_EQ_INT(nemo_poll(NULL), 0);
	}
	/* Quiet: after one more poll the descriptor is not readable. */
	while (!atomic_load(&s->senders_done))
		sched_yield();
	CHECK_EQ_INT(nemo_poll(NULL), 0);
	struct epoll_event out;
	CHECK_EQ_INT(epoll_wait(ep, &out, 1, 0), 0);
	/* nemo_place_wait leaves the loop's mode and re-arms on return. */
	struct timespec dl = in_ms(CLOCK_MONOTONIC, 1);
	CHECK_EQ_INT(nemo_place_wait(&dl, NULL), ETIMEDOUT);
	CHECK_EQ_INT(epoll_wait(ep, &out, 1, 0), 0);
	printf("epoll loop (%s): %lu messages, %lu notifications in %lu wake-ups\n", s->edge ? "edge" : "level",
	       atomic_load(&got_am), atomic_load(&got_nf), wakes);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	/* The descriptor is closed by the leave. */
	CHECK(fcntl(fd, F_GETFD) < 0 && errno == EBADF);
	close(ep);
	return NULL;
}

/* A place: single sends, then batches. */
static void *place_sender(void *p)
{
	struct shared *s = p;
	CHECK_EQ_INT(nemo_place_join(s->d, NULL, NULL), 0);
	for (unsigned i = 0; i < FLOOD / 2; i++)
		CHECK_EQ_INT(nemo_am_send(s->rx, ACT_COUNT, i, (i % 7 == 0) ? NEMO_MORE : 0), 0);
	CHECK_EQ_INT(nemo_flush(NEMO_PLACE_ALL), 0);
	uint64_t args[64] = { 0 };
	for (unsigned i = 0; i < FLOOD / 2; i += 64) {
		size_t sent = 0;
		CHECK_EQ_INT(nemo_am_send_batch(s->rx, ACT_COUNT, args, 64, 0, &sent), 0);
		CHECK_EQ_INT(sent, 64);
	}
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

/* A plain thread: it joins at its first send and leaves as it exits. */
static void *plain_sender(void *p)
{
	struct shared *s = p;
	for (unsigned i = 0; i < FLOOD / 2; i++) {
		CHECK_EQ_INT(nemo_domain_am_send(s->d, s->rx, ACT_COUNT, i, NULL, 0, 0), 0);
		CHECK_EQ_INT(nemo_domain_notify(s->d, s->rx, i & 0xFFFF, 0), 0);
	}
	return NULL;
}

static void flood(bool edge)
{
	atomic_store(&got_am, 0);
	atomic_store(&got_nf, 0);
	struct shared s = { .edge = edge };
	CHECK_EQ_INT(nemo_domain_create(NULL, &s.d), 0);
	CHECK_EQ_INT(nemo_action_register(s.d, ACT_COUNT, on_msg, NULL), 0);
	s.want_am = FLOOD / 2 + (FLOOD / 2 + 63) / 64 * 64 + FLOOD / 2;
	s.want_nf = FLOOD / 2;
	pthread_t r, a, b;
	pthread_create(&r, NULL, receiver, &s);
	while (!atomic_load(&s.ready))
		sched_yield();
	pthread_create(&a, NULL, place_sender, &s);
	pthread_create(&b, NULL, plain_sender, &s);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	atomic_store(&s.senders_done, 1);
	pthread_join(r, NULL);
	CHECK_EQ_INT(atomic_load(&got_am), s.want_am);
	CHECK_EQ_INT(atomic_load(&got_nf), s.want_nf);
	nemo_domain_counters c;
	CHECK_EQ_INT(nemo_domain_get_counters(s.d, &c), 0);
	CHECK(c.kicks_fd > 0);
	/* The receiver never slept in nemo, only in epoll: the only futex
	 * wakes are of senders that waited for room and were kicked when the
	 * receiver freed it (room_kicks). */
	CHECK(c.kicks_futex <= c.room_kicks);
	printf("  kicks: %llu eventfd writes, %llu avoided, %llu skipped; %llu stream grants, %llu revoked\n",
	       (unsigned long long)c.kicks_fd, (unsigned long long)c.kicks_avoided,
	       (unsigned long long)c.kicks_skipped, (unsigned long long)c.grants,
	       (unsigned long long)c.grant_revokes);
	CHECK_EQ_INT(nemo_domain_destroy(s.d), 0);
}

/* A stream that refills the queues while they drain: a chain of active
 * messages, each handler sending the next to its own place.  One
 * nemo_poll of a plain place drains its queues once (the chain stops at
 * the drain's budget, the ring's slots and the notification FIFO); one of
 * a place on its descriptor drains them up to four times (FD_PASSES,
 * placewait.c), so a loop pays its system calls once for more work. */
enum { ACT_CHAIN = 2 };
static unsigned chain_left;

static void on_chain(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	(void)ctx;
	if (chain_left && --chain_left)
		CHECK_EQ_INT(nemo_am_send(nemo_place_self(), ACT_CHAIN, 0, NEMO_NONBLOCK), 0);
}

static void chain_passes(void)
{
	nemo_domain *d;
	nemo_domain_attr da = { .max_places = 2, .ring_slots = 64 };
	CHECK_EQ_INT(nemo_domain_create(&da, &d), 0);
	CHECK_EQ_INT(nemo_action_register(d, ACT_CHAIN, on_chain, NULL), 0);
	CHECK_EQ_INT(nemo_place_join(d, NULL, NULL), 0);
	unsigned h_plain = 0, h_fd = 0, h_rest = 0;
	chain_left = 100000;
	CHECK_EQ_INT(nemo_am_send(nemo_place_self(), ACT_CHAIN, 0, 0), 0);
	CHECK_EQ_INT(nemo_poll(&h_plain), 0);
	int fd;
	CHECK_EQ_INT(nemo_place_fd(&fd), 0);    /* arming sees the chain: readable */
	CHECK_EQ_INT(nemo_poll(&h_fd), 0);
	/* One drain takes a queue's budget (the ring's slots and the
	 * FIFO's) at most twice (its hot look, then its hint bit); the
	 * passes after the first take what the handlers queued meanwhile. */
	CHECK(h_plain >= 1 && h_plain <= 2 * (64 + 64));
	CHECK(h_fd > 2 * h_plain && h_fd <= 8 * h_plain);
	if (!(h_fd > 2 * h_plain && h_fd <= 8 * h_plain))
		fprintf(stderr, "test_fd: one nemo_poll handled %u (plain) and %u (on its descriptor)\n", h_plain,
			h_fd);
	while (chain_left) {
		unsigned h = 0;
		CHECK_EQ_INT(nemo_poll(&h), 0);
		if (!h)
			break;
		h_rest += h;
	}
	CHECK_EQ_INT(chain_left, 0);
	CHECK_EQ_INT(h_plain + h_fd + h_rest, 100000);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(d), 0);
}

int main(void)
{
	flood(false);
	flood(true);
	chain_passes();
	return check_exit("test_fd");
}
