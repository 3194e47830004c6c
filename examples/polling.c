/*
 * polling.c - three ways to serve messages while computing (nemo/poll.h):
 *
 *   check      NEMO_POLL_CHECK() in the compute loop: it polls only when
 *              the place's threshold (here 5 us) has passed since its last
 *              poll, and costs a few instructions otherwise;
 *   progress   the domain's progress thread handles the place's messages
 *              while the place computes without any nemo call;
 *   watchdog   interrupt mode under the polling watchdog: the place is
 *              signalled only when a message has waited longer than T
 *              (here 200 us); it polls now and then by itself too.
 *
 * A client sends REQUESTS requests to the computing place with
 * nemo_domain_am_send and waits for each reply (the handler answers with
 * nemo_am_reply).  Each strategy prints how the requests were served.
 *
 *   polling [REQUESTS]     default 2000
 */
#define _POSIX_C_SOURCE 200809L   /* clock_gettime, clockid_t: see <nemo/platform.h> */
#include <nemo/nemo.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ACT_REQ, ACT_REP };
enum { CHECK, PROGRESS, WATCHDOG };
static const char *const names[] = { "check", "progress", "watchdog" };

static nemo_domain *dom;
static _Atomic nemo_place_id worker = NEMO_PLACE_NONE;
static atomic_bool stop;
static unsigned long replies;
static atomic_ulong served_by_progress, served_by_interrupt, served_by_poll;

static void on_req(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	if (m->context == NEMO_AM_CTX_PROGRESS)
		atomic_fetch_add_explicit(&served_by_progress, 1, memory_order_relaxed);
	else if (m->context == NEMO_AM_CTX_INTERRUPT)
		atomic_fetch_add_explicit(&served_by_interrupt, 1, memory_order_relaxed);
	else
		atomic_fetch_add_explicit(&served_by_poll, 1, memory_order_relaxed);
	nemo_am_reply(m, ACT_REP, m->arg * 2, NULL, 0, 0);   /* async-signal-safe */
}

static void on_rep(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	if (m->arg == m->tag * 2)
		replies++;
}

static void *compute(void *p)
{
	int how = (int)(long)p;
	nemo_place_attr a = { .flags = how == WATCHDOG ? NEMO_PLACE_INTERRUPTS : 0 };
	nemo_place_id id;
	if (nemo_place_join(dom, &a, &id)) {
		fprintf(stderr, "polling: join: %s\n", nemo_last_error());
		exit(1);
	}
	if (how == PROGRESS)
		nemo_place_set_progress(true);
	if (how == WATCHDOG)
		nemo_place_set_watchdog(200 * 1000);
	atomic_store(&worker, id);
	volatile double x = 1;
	for (unsigned long i = 0; !atomic_load_explicit(&stop, memory_order_relaxed); i++) {
		x = x * 1.0000001 + 1e-9;             /* the computation */
		if (how == CHECK)
			NEMO_POLL_CHECK();
		else if (how == WATCHDOG && i % (1u << 20) == 0)
			NEMO_POLL_CHECK();            /* rarely: the watchdog covers the rest */
	}
	nemo_place_leave();
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 2000;
	if (!n) {
		fprintf(stderr, "usage: polling [REQUESTS]\n");
		return 2;
	}
	int bad = 0;
	for (int how = CHECK; how <= WATCHDOG; how++) {
		nemo_progress *pt = NULL;
		nemo_watchdog *wd = NULL;
		if (nemo_domain_create(NULL, &dom) || nemo_action_register(dom, ACT_REQ, on_req, NULL) ||
		    nemo_action_register(dom, ACT_REP, on_rep, NULL) ||
		    (how == PROGRESS && nemo_progress_start(dom, NULL, &pt)) ||
		    (how == WATCHDOG && nemo_watchdog_start(dom, &wd))) {
			fprintf(stderr, "polling: setup: %s\n", nemo_last_error());
			return 1;
		}
		atomic_store(&stop, false);
		atomic_store(&worker, NEMO_PLACE_NONE);
		atomic_store(&served_by_progress, 0);
		atomic_store(&served_by_interrupt, 0);
		atomic_store(&served_by_poll, 0);
		replies = 0;
		pthread_t t;
		pthread_create(&t, NULL, compute, (void *)(long)how);
		while (atomic_load(&worker) == NEMO_PLACE_NONE)
			;
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (unsigned long k = 0; k < n; k++) {
			unsigned long want = replies + 1;
			if (nemo_domain_am_send(dom, atomic_load(&worker), ACT_REQ, k, NULL, 0, 0)) {
				fprintf(stderr, "polling: send: %s\n", nemo_last_error());
				return 1;
			}
			while (replies < want)
				nemo_place_wait(NULL, NULL);     /* the reply */
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		atomic_store(&stop, true);
		pthread_join(t, NULL);
		double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / 1e3 / (double)n;
		printf("polling %-8s %lu requests, %.1f us per round trip: %lu served at checks/polls, %lu by the "
		       "progress thread, %lu in interrupts\n", names[how], n, us,
		       (unsigned long)atomic_load(&served_by_poll), (unsigned long)atomic_load(&served_by_progress),
		       (unsigned long)atomic_load(&served_by_interrupt));
		bad |= replies != n;
		nemo_place_leave();                      /* the client joined at its first send */
		if (pt)
			nemo_progress_stop(pt);
		if (wd)
			nemo_watchdog_stop(wd);
		nemo_domain_destroy(dom);
	}
	return bad;
}
