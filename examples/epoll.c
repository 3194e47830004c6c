/*
 * epoll.c - a place served from an epoll loop, beside an ordinary file
 * descriptor.
 *
 * The loop thread joins a domain, takes its place's descriptor with
 * nemo_place_fd() and waits in epoll_wait on it and on a pipe.  Producer
 * threads (plain threads: nemo_domain_notify joins them at their first
 * send) send it notifications; a timer thread writes to the pipe now and
 * then.  Whenever the place's descriptor is readable the loop calls
 * nemo_poll(), which runs the notification handler and re-arms.  The
 * loop ends once it has counted every notification.
 *
 *   epoll [NOTIFICATIONS [PRODUCERS]]     default 100000, 2
 *
 * Readiness is level-triggered here; EPOLLET works the same way, since
 * nemo_poll reads the descriptor empty.  The producers' kicks write the
 * eventfd only when the loop is (about to be) in epoll_wait: while it is
 * inside nemo_poll they cost no system call.
 */
#define _GNU_SOURCE
#include <nemo/nemo.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

static nemo_domain *dom;
static _Atomic nemo_place_id loop_id = NEMO_PLACE_NONE;
static unsigned long per_producer;
static unsigned long received;
static atomic_bool done;
static int pipefd[2];

static void on_notify(void *ctx, nemo_place_id src, uint32_t chan)
{
	(void)ctx;
	(void)src;
	(void)chan;
	received++;
}

static void *producer(void *p)
{
	(void)p;
	for (unsigned long i = 0; i < per_producer; i++) {
		int err = nemo_domain_notify(dom, atomic_load(&loop_id), (uint32_t)(i & 0xFFFF), 0);
		if (err) {
			fprintf(stderr, "epoll: notify: %s\n", nemo_last_error());
			exit(1);
		}
	}
	return NULL;     /* a thread that exits leaves the domain by itself */
}

static void *ticker(void *p)
{
	(void)p;
	while (!atomic_load(&done)) {
		if (write(pipefd[1], "t", 1) < 0)
			break;
		usleep(1000);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long total = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
	unsigned np = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 2;
	if (!np || np > 32 || total < np) {
		fprintf(stderr, "usage: epoll [NOTIFICATIONS [PRODUCERS (1..32)]]\n");
		return 2;
	}
	per_producer = total / np;
	total = per_producer * np;
	nemo_place_id me;
	int nfd;
	if (nemo_domain_create(NULL, &dom) || nemo_place_join(dom, NULL, &me) ||
	    nemo_notify_set_handler(on_notify, NULL) || nemo_place_fd(&nfd)) {
		fprintf(stderr, "epoll: setup: %s\n", nemo_last_error());
		return 1;
	}
	atomic_store(&loop_id, me);
	if (pipe(pipefd) != 0)
		return 1;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = nfd };
	epoll_ctl(ep, EPOLL_CTL_ADD, nfd, &ev);
	ev.data.fd = pipefd[0];
	epoll_ctl(ep, EPOLL_CTL_ADD, pipefd[0], &ev);

	pthread_t prod[32], tick;
	for (unsigned i = 0; i < np; i++)
		pthread_create(&prod[i], NULL, producer, NULL);
	pthread_create(&tick, NULL, ticker, NULL);

	unsigned long wakeups = 0, ticks = 0;
	while (received < total) {
		struct epoll_event out[2];
		int n = epoll_wait(ep, out, 2, 10000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "epoll: 10 s without an event at %lu of %lu\n", received, total);
			return 1;
		}
		for (int i = 0; i < n; i++) {
			if (out[i].data.fd == nfd) {
				wakeups++;
				nemo_poll(NULL);            /* runs on_notify; re-arms */
			} else {
				char buf[64];
				ssize_t k = read(pipefd[0], buf, sizeof buf);
				ticks += k > 0 ? (unsigned long)k : 0;
			}
		}
	}
	atomic_store(&done, true);
	for (unsigned i = 0; i < np; i++)
		pthread_join(prod[i], NULL);
	pthread_join(tick, NULL);
	nemo_domain_counters c;
	nemo_domain_get_counters(dom, &c);
	printf("epoll: %lu notifications from %u producers in %lu wake-ups of the place's descriptor "
	       "(%llu eventfd writes by senders), %lu pipe ticks beside them\n", received, np, wakeups,
	       (unsigned long long)c.kicks_fd, ticks);
	nemo_place_leave();
	nemo_domain_destroy(dom);
	close(ep);
	return received == total ? 0 : 1;
}
