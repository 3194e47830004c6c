/*
 * test_watchdog.c - the polling watchdog (nemo/poll.h): a message to a
 * place that computes without polling is handled by an interrupt, never
 * before T has passed since it was sent; messages handled in time by the
 * place's own checks cost no signal; a flood to a place that never polls
 * is handled in full; an idle watchdog sleeps; bad values are errors.
 * (The only time compared is a lower bound - the watchdog cannot fire
 * before T - which no load can break.)
 */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/nemo.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum { ACT_STAMP = 1, ACT_COUNT = 2 };

static atomic_ulong stamped, counted, early, ctx_not_irq;
/* The most any stamped message waited beyond T, in ticks: a bound on the
 * watchdog's own lateness, since it fires after the send and before the
 * handler starts, and its clock starts after the stamp. */
static atomic_ulong excess_max;
static atomic_int mode;              /* 0 compute without polling; 1 compute with checks;
                                      * 8 compute on, last stall counted; 9 leave */
/* The watched thread's loop count: it stands still while the thread's
 * signal handler runs (the handler interrupts that thread), so a change
 * after a message was handled says the handler has returned. */
static atomic_ulong loops;
/* Section 3's allowance for firing: each stretch in which the watched
 * thread made no check for T/2 or longer (descheduled by a loaded
 * machine) may let a clock run to T, once per T it lasts, plus one. */
static atomic_ulong stall_allowance;
static atomic_int stalls_counted;    /* it saw mode 8 and counted its last stretch */
static uint64_t t_ticks;
static _Atomic nemo_place_id xid = NEMO_PLACE_NONE;

static void on_stamp(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	uint64_t now = nemo_ticks();
	if (now - m->arg < t_ticks)
		atomic_fetch_add(&early, 1);
	else if (now - m->arg - t_ticks > atomic_load(&excess_max))
		atomic_store(&excess_max, now - m->arg - t_ticks);
	if (m->context != NEMO_AM_CTX_INTERRUPT)
		atomic_fetch_add(&ctx_not_irq, 1);
	atomic_fetch_add(&stamped, 1);
}

static void on_count(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	(void)ctx;
	atomic_fetch_add(&counted, 1);
}

static void *watched(void *p)
{
	nemo_domain *d = p;
	nemo_place_id id;
	nemo_place_attr a = { .flags = NEMO_PLACE_INTERRUPTS };
	CHECK_EQ_INT(nemo_place_join(d, &a, &id), 0);
	CHECK_EQ_INT(nemo_place_set_watchdog(20000000), 0);       /* 20 ms */
	CHECK_EQ_INT(nemo_poll_threshold_set(20000), 0);          /* checks: 20 us */
	atomic_store(&xid, id);
	volatile uint64_t sink = 0;
	uint64_t half_t = t_ticks / 2, last = nemo_ticks();
	for (uint64_t i = 0;; i++) {
		int m = atomic_load_explicit(&mode, memory_order_relaxed);
		if (m == 9)
			break;
		sink += i;
		atomic_store_explicit(&loops, i, memory_order_relaxed);
		if (m == 1 || (m == 8 && !atomic_load_explicit(&stalls_counted, memory_order_relaxed))) {
			if (m == 1)
				NEMO_POLL_CHECK();
			uint64_t now = nemo_ticks();
			if (now - last >= half_t)
				atomic_fetch_add_explicit(&stall_allowance, (now - last) / t_ticks + 1,
							  memory_order_relaxed);
			last = now;
			if (m == 8)
				atomic_store(&stalls_counted, 1);
		} else {
			last = nemo_ticks();
		}
	}
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(void)
{
	nemo_clock_init();
	t_ticks = nemo_ns_to_ticks(20e6);
	nemo_domain *d;
	CHECK_EQ_INT(nemo_domain_create(NULL, &d), 0);
	CHECK_EQ_INT(nemo_action_register(d, ACT_STAMP, on_stamp, NULL), 0);
	CHECK_EQ_INT(nemo_action_register(d, ACT_COUNT, on_count, NULL), 0);

	nemo_watchdog *w = NULL, *w2 = NULL;
	CHECK_EQ_INT(nemo_watchdog_start(d, NULL), EINVAL);
	CHECK_EQ_INT(nemo_watchdog_start(NULL, &w), EINVAL);
	CHECK_EQ_INT(nemo_watchdog_stop(NULL), EINVAL);
	CHECK_EQ_INT(nemo_place_set_watchdog(1000), ENOTCONN);
	CHECK_EQ_INT(nemo_watchdog_start(d, &w), 0);
	CHECK_EQ_INT(nemo_watchdog_start(d, &w2), EEXIST);

	pthread_t t;
	pthread_create(&t, NULL, watched, d);
	nemo_place_id me;
	CHECK_EQ_INT(nemo_place_join(d, NULL, &me), 0);
	CHECK_EQ_INT(nemo_place_set_watchdog(NEMO_WATCHDOG_T_MAX_NS + 1), EINVAL);
	while (atomic_load(&xid) == NEMO_PLACE_NONE)
		sched_yield();
	nemo_place_id x = atomic_load(&xid);

	/* 1. It never polls: each message is handled by an interrupt, not
	 *    before T.  The next message goes only after the handler that
	 *    took this one has returned: a handler drains until nothing is
	 *    pending (irq.c, H1), so a message sent while it still runs is
	 *    rightly taken at once, before T, without the watchdog. */
	for (int i = 0; i < 5; i++) {
		CHECK_EQ_INT(nemo_am_send(x, ACT_STAMP, nemo_ticks(), 0), 0);
		while (atomic_load(&stamped) < (unsigned long)i + 1)
			sched_yield();
		unsigned long l = atomic_load(&loops);
		while (atomic_load(&loops) == l)
			sched_yield();
	}
	CHECK_EQ_INT(atomic_load(&early), 0);
	CHECK_EQ_INT(atomic_load(&ctx_not_irq), 0);
	nemo_watchdog_counters wc;
	CHECK_EQ_INT(nemo_watchdog_get_counters(w, &wc), 0);
	CHECK(wc.fired >= 5);
	/* It wakes early by what it learned, within its bounds.  (Its spin
	 * is wall time and its cpu_ns CPU time: a spin the host interrupts
	 * counts in one and not the other, so they are not compared.) */
	CHECK(wc.early_ns >= 10000 && wc.early_ns <= 30000);
	/* Its lateness is counted, and no firing is later than the latest
	 * handler (+1 us for the tick conversions). */
	CHECK(wc.late <= wc.fired);
	CHECK(wc.late_max_ns <= (uint64_t)nemo_ticks_to_ns((int64_t)atomic_load(&excess_max)) + 1000);
	CHECK(wc.late == 0 || wc.late_max_ns >= NEMO_WATCHDOG_LATE_NS);

	/* 2. A flood to it, still never polling: all handled. */
	for (unsigned i = 0; i < 20000; i++)
		CHECK_EQ_INT(nemo_am_send(x, ACT_COUNT, i, 0), 0);
	while (atomic_load(&counted) < 20000)
		sched_yield();

	/* 3. It checks every 20 us: messages handled in time cost no signal. */
	atomic_store(&mode, 1);
	nemo_domain_counters c0, c1;
	CHECK_EQ_INT(nemo_domain_get_counters(d, &c0), 0);
	nemo_watchdog_counters w0, w1;
	nemo_watchdog_get_counters(w, &w0);
	struct timespec gap = { 0, 200000 };
	for (unsigned i = 0; i < 500; i++) {
		CHECK_EQ_INT(nemo_am_send(x, ACT_COUNT, i, 0), 0);
		nanosleep(&gap, NULL);
	}
	while (atomic_load(&counted) < 20500)
		sched_yield();
	CHECK_EQ_INT(nemo_domain_get_counters(d, &c1), 0);
	nemo_watchdog_get_counters(w, &w1);
	/* Stop counting stalls, once it has counted the stretch it may be in
	 * now (a fire counted above may have come in it); it computes on. */
	atomic_store(&mode, 8);
	while (!atomic_load(&stalls_counted))
		sched_yield();
	unsigned long allowance = atomic_load(&stall_allowance);
	printf("watchdog: 5 interrupts past T (20 ms); a 20000-message flood handled; 500 messages to a "
	       "place checking every 20 us: %llu signals, %llu deferred kicks, %llu fired (stalls of the "
	       "watched thread allowed %lu)\n",
	       (unsigned long long)(c1.kicks_signal - c0.kicks_signal),
	       (unsigned long long)(c1.kicks_deferred - c0.kicks_deferred),
	       (unsigned long long)(w1.fired - w0.fired), allowance);
	CHECK_EQ_INT(c1.kicks_signal - c0.kicks_signal, 0);
	/* With T = 20 ms and a check every 20 us, a clock runs to T only if
	 * the watched thread made no check for that long: a loaded machine's
	 * stall of it, which it counted. */
	CHECK(w1.fired - w0.fired <= allowance);
	CHECK(c1.kicks_deferred - c0.kicks_deferred > 0);

	/* 4. Idle: the watchdog sleeps with no timer. */
	atomic_store(&mode, 9);
	pthread_join(t, NULL);
	/* Its last deadline (at most T after the last message) may still
	 * come in the first window if a loaded machine delays it: measure
	 * up to three windows of half a second, and judge the quietest.  A
	 * watchdog that keeps a timer wakes in every one. */
	struct timespec quarter = { 0, 250000000 };
	nanosleep(&quarter, NULL);
	double cpu0 = 0, cpu1 = 0;
	for (int round = 0; round < 3; round++) {
		nemo_watchdog_get_counters(w, &w0);
		cpu0 = cpu_s();
		nanosleep(&quarter, NULL);
		nanosleep(&quarter, NULL);
		cpu1 = cpu_s();
		nemo_watchdog_get_counters(w, &w1);
		if (w1.wakeups == w0.wakeups && w1.cpu_ns - w0.cpu_ns < 5000000 && cpu1 - cpu0 < 0.05)
			break;
	}
	printf("watchdog idle 0.5 s: the process used %.2f ms of CPU, the watchdog %.3f ms; %llu wake-ups "
	       "(real-time priority: %s)\n", (cpu1 - cpu0) * 1e3, (double)(w1.cpu_ns - w0.cpu_ns) / 1e6,
	       (unsigned long long)(w1.wakeups - w0.wakeups), w1.realtime ? "yes" : "no");
	CHECK(w1.cpu_ns - w0.cpu_ns < 5000000);     /* < 1% of the idle half second */
	CHECK(cpu1 - cpu0 < 0.05);
	CHECK_EQ_INT(w1.wakeups - w0.wakeups, 0);

	CHECK_EQ_INT(nemo_domain_destroy(d), EBUSY);
	CHECK_EQ_INT(nemo_watchdog_stop(w), 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(d), 0);
	return check_exit("test_watchdog");
}
