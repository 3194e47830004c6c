/*
 * wait.c - the one wait loop: poll for a budget, then sleep.
 *
 * Every blocking wait in nemo comes through nemo__wait_loop, so this is
 * the one place that decides whether to sleep, and how long to poll:
 *
 *   1. try once (the condition may already hold);
 *   2. poll, as nemo__spin_plan_for() says: a tight loop (pause, clock
 *      read every 4th) for `pure` ticks, then tight windows of `window`
 *      ticks, each after one sched_yield(), until `total` ticks;
 *   3. sleep: ops->sleep_begin publishes the sleep and re-checks (the
 *      handshake of waiter.c or event.c), futex_wait, ops->sleep_end, and
 *      try again; until taken or the deadline passes.
 *
 * THE PLANS
 *
 *   SPIN      tight for 1 ms, then a yield before every poll, forever.
 *   BLOCK     none: sleep at once.
 *   HYBRID    tight for spin_ns (the user's explicit budget), no yielding.
 *   ADAPTIVE  (the default) total = the cost of blocking, C, learned from
 *             this process's sleeps (policy.c, THE COST OF BLOCKING), or
 *             C / 8 while this thread's recent waits outlasted C or its
 *             tight polling was preempted (the history below); polled in
 *             tight windows of PURE_NS (4 us) with a yield between two
 *             windows.  On a process allowed only one CPU, a yield
 *             before every poll.
 *
 * Why a budget in time, not in iterations: an iteration's cost varies
 * tenfold between machines (pause is ~10 cycles on some cores and ~140 on
 * others); the cost of blocking is a time.  Polling for at most as long
 * as a block+wake costs bounds the waste at twice the better choice made
 * in hindsight (the classic ski-rental argument), whatever the gap; the
 * adaptive total never exceeds C.
 *
 * Why yield after a few microseconds.  A tight poll of a few microseconds
 * catches a partner running on another CPU (a hand-off round trip is
 * ~1 us here).  Past that, the thread we wait for may be runnable on
 * *our* CPU - an oversubscribed machine, or a woken thread placed next to
 * its waker, as CPython's GIL hand-off is - and a tight poll would keep
 * it off the CPU for the whole budget, then sleep, and be woken by it:
 * slower than never polling (measured: CPython's Lock hand-off under the
 * interposer fell to 0.65-0.77x glibc).  sched_yield() gives the CPU to
 * any runnable thread of this CPU and returns at once (~1 us here) when
 * there is none, so the yielding phase still notices the condition
 * without a wake-up, and never burns a CPU another thread wants.  But a
 * yield on a CPU that other busy threads want can cost a whole time slice
 * (milliseconds), where a sleeper's wake-up would preempt them: so a
 * yield after which the clock jumped by more than PREEMPT_NS ends the
 * poll phase at once (sleep now), and counts as a preemption in THE
 * HISTORY, which soon leaves no yielding phase at all (C / 8 < PURE_NS).
 * Rejected: reading the run queue length (/proc, getrusage: syscalls
 * costing more than the poll), and spinning only while the partner is
 * known to run (the kernel's mutex does that with the owner's on_cpu;
 * a condvar waiter does not know who will signal it).
 *
 * THE HISTORY (per thread, in its slot: long_waits, 0..8)
 *
 * A wait that ends while polling subtracts 2; one that lasted longer than
 * C (it would have slept anyway), or whose tight poll saw the clock jump
 * by more than PREEMPT_NS between two reads (it was preempted: its CPU is
 * wanted), adds 1 (2 if preempted).  From 4 on, the total is C / 8: long
 * gaps do not pay a full budget of polling each time, but a short one
 * that comes back is still caught, and two polled waits restore the full
 * budget.
 *
 * Failure cases (docs/events.md): a gap distribution just above C pays
 * up to C / 8 of polling per wait plus the sleep (the bound holds, the
 * win is lost); a waiter whose partner is runnable on another CPU's run
 * queue (oversubscribed) is not helped by yielding and polls for the
 * budget; the first waits of a process use the start value of C, which
 * can be off by a few times on machines unlike this one until the first
 * sleep is measured.
 *
 * Kick mode (NEMO__WAIT_BOOST): the thread runs at the lowest real-time
 * priority, so that when it is woken it preempts a busy normal thread on
 * its CPU at once instead of waiting for the scheduler (Nemo's "condvar +
 * IPI" for threads that act as a runtime's logical processors).  Where
 * real-time priority is not permitted (no CAP_SYS_NICE, RLIMIT_RTPRIO 0)
 * kick mode is a plain wait: the first EPERM is remembered per thread.
 * While it holds that priority, an adaptive poll is one tight window at
 * most: at real-time priority a poll keeps every normal thread of its
 * CPU off it, and its yields do not help them (found when concurrent
 * test processes stalled for seconds beside a kick-mode stress run).
 */
#define _GNU_SOURCE
#include "waiter_internal.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>

/* A deadline with a negative tv_sec is in the past, not malformed: the
 * wait times out (glibc's pthread_cond_timedwait and sem_timedwait do the
 * same; a loop that waits for ETIMEDOUT must get it).  Only tv_nsec out
 * of range, or another clock, is EINVAL. */
int nemo__check_deadline(clockid_t clock, const struct timespec *abstime)
{
	if (clock != CLOCK_MONOTONIC && clock != CLOCK_REALTIME)
		return EINVAL;
	if (abstime && (abstime->tv_nsec < 0 || abstime->tv_nsec >= 1000000000L))
		return EINVAL;
	return 0;
}

/* Ticks left until abstime on clock (0 if passed); UINT64_MAX if none,
 * or if it is too far away to count in ticks (centuries: as good as
 * none, and the kernel still gets the real deadline). */
static uint64_t ticks_until(clockid_t clock, const struct timespec *abstime)
{
	if (!abstime)
		return UINT64_MAX;
	if (abstime->tv_sec < 0)
		return 0;
	struct timespec now;
	clock_gettime(clock, &now);
	/* In double: exact enough, and no overflow for any time_t. */
	double ns = ((double)abstime->tv_sec - (double)now.tv_sec) * 1e9 +
		    (double)(abstime->tv_nsec - now.tv_nsec);
	return ns > 0 ? nemo_ns_to_ticks(ns) : 0;
}

/* a + b, saturating at UINT64_MAX ("never"). */
static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

#define PURE_NS 4000.0           /* tight polling before yielding (adaptive) */
#define SPIN_PURE_NS 1e6          /* SPIN: tight for 1 ms, then yielding */
#define PREEMPT_NS 50000.0        /* a clock jump this long while polling: preempted */
#define LONG_WAITS_SHORTEN 4      /* history at which the budget drops to C / 8 */

/* The CPUs this process may run on, read once: with one, a tight poll can
 * only keep the thread it waits for off the CPU. */
static int allowed_cpus(void)
{
	static _Atomic int n;
	int v = atomic_load_explicit(&n, memory_order_relaxed);
	if (!v) {
		cpu_set_t set;
		v = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 2;
		atomic_store_explicit(&n, v, memory_order_relaxed);
	}
	return v;
}

nemo__spin_plan nemo__spin_plan_for(const nemo_wait_policy *p, nemo_waiter *self)
{
	switch (p->kind) {
	case NEMO_WAIT_SPIN:
		return (nemo__spin_plan){ nemo_ns_to_ticks(SPIN_PURE_NS), 0, UINT64_MAX };
	case NEMO_WAIT_BLOCK:
		return (nemo__spin_plan){ 0, 0, 0 };
	case NEMO_WAIT_HYBRID: {
		uint64_t t = nemo_ns_to_ticks(p->spin_ns ? p->spin_ns : NEMO_WAIT_HYBRID_DEFAULT_NS);
		return (nemo__spin_plan){ t, t, t };
	}
	case NEMO_WAIT_ADAPTIVE:
	default: {
		double c = nemo__block_cost_ns();
		if (self && self->long_waits >= LONG_WAITS_SHORTEN)
			c /= 8;
		uint64_t w = allowed_cpus() > 1 ? nemo_ns_to_ticks(PURE_NS) : 0;
		uint64_t total = nemo_ns_to_ticks(c);
		/* A thread holding kick mode's real-time priority: one tight
		 * window at most.  Its yields would not reach normal threads
		 * (sched_yield only yields to its own priority), so a longer
		 * poll would keep every normal thread of its CPU off it. */
		if (self && self->boosted && total > w)
			total = w;
		return (nemo__spin_plan){ w, w, total };
	}
	}
}

/* The history (see THE HISTORY above). */
static void adapt_update(nemo_waiter *self, uint64_t waited_ticks, bool polled, bool preempted)
{
	if (!self)
		return;
	uint32_t h = self->long_waits;
	if (preempted)
		h += 2;
	else if (!polled && nemo_ticks_to_ns((int64_t)waited_ticks) > nemo__block_cost_ns())
		h += 1;
	else if (polled)
		h = h >= 2 ? h - 2 : 0;
	self->long_waits = h > 8 ? 8 : h;
}

/* Kick mode: SCHED_FIFO 1 from the first kick-mode sleep on, kept while
 * the thread goes on waiting in kick mode, dropped by its next wait that
 * is not in kick mode (or nemo__boost_leave).  Dropping it right after
 * each wake-up was measured and rejected: the drop is a syscall on the
 * critical path (+1-2 us here), and it lets the busy thread preempt the
 * woken one before it reaches its caller (tails of milliseconds).  Only a
 * thread under the normal policy is raised (checked once per thread: a
 * thread that is already real-time preempts anyway, and its policy is not
 * ours to touch). */
static void boost_enter(nemo_waiter *self)
{
	if (!self || self->boost < 0 || self->boosted)
		return;
	if (self->boost == 0) {
		int pol;
		struct sched_param cur;
		if (pthread_getschedparam(pthread_self(), &pol, &cur) != 0 || pol != SCHED_OTHER) {
			self->boost = -1;
			return;
		}
	}
	struct sched_param sp = { .sched_priority = 1 };
	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) != 0) {
		self->boost = -1;     /* not permitted here: stop trying */
		return;
	}
	self->boost = 1;
	self->boosted = true;
}

void nemo__boost_leave(void)
{
	nemo_waiter *self = nemo_waiter_self();
	if (!self || !self->boosted)
		return;
	struct sched_param sp = { .sched_priority = 0 };
	pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
	self->boosted = false;
}

static int futex_sleep(const nemo__wait_ops *ops, uint32_t *word, uint32_t val, uint32_t bits,
		       clockid_t clock, const struct timespec *abstime, unsigned flags)
{
	int rc, oldtype = 0;
	if (flags & NEMO__WAIT_CANCELLABLE)
		pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &oldtype);
	if (bits)
		rc = nemo_futex_wait_bitset(word, val, bits, clock, abstime, ops->futex_flags);
	else if (abstime)
		rc = nemo_futex_wait_until(word, val, clock, abstime, ops->futex_flags);
	else
		rc = nemo_futex_wait(word, val, NULL, ops->futex_flags);
	if (flags & NEMO__WAIT_CANCELLABLE)
		pthread_setcanceltype(oldtype, NULL);
	return rc;
}

/* The poll phase: 0 once taken, ETIMEDOUT at the deadline, EAGAIN when
 * the plan's time is up, or (adaptive only) when the CPU was lost for
 * long across a yield: sleep now.  *preempted: the CPU was lost for long
 * while polling. */
static int poll_phase(const nemo__wait_ops *ops, void *arg, nemo__spin_plan plan, uint64_t start,
		      uint64_t deadline, unsigned flags, bool adaptive, bool *preempted)
{
	uint64_t end = add_sat(start, plan.total), win_end = add_sat(start, plan.pure);
	uint64_t gap = nemo_ns_to_ticks(PREEMPT_NS), last = start;
	for (unsigned n = 1;; n++) {
		if (ops->try_take(arg))
			return 0;
		nemo_cpu_relax();
		/* A pause costs tens of cycles on some x86 cores: check the
		 * clock every 4th, or a 1 us budget overshoots by a
		 * microsecond or more (measured). */
		if (n % 4 && last < win_end)
			continue;
		uint64_t now = nemo_ticks();
		bool yielded = false;
		if (now >= win_end && now < end && now < deadline) {
			/* Window over: let a thread that wants this CPU run. */
			sched_yield();
			now = nemo_ticks();
			win_end = add_sat(now, plan.window);
			yielded = true;
			if ((flags & NEMO__WAIT_CANCELLABLE))
				pthread_testcancel();
		}
		if (now - last > gap) {
			/* We lost the CPU: preempted while polling tight, or a
			 * yield that let other threads run for long.  The CPU is
			 * wanted; a yield there costs a time slice, a sleep's
			 * wake-up would preempt instead. */
			*preempted = true;
			if (yielded && adaptive) {   /* SPIN never sleeps */
				if (ops->try_take(arg))
					return 0;
				return EAGAIN;      /* sleep now */
			}
		}
		last = now;
		if (now >= deadline)
			return ETIMEDOUT;
		if (now >= end)
			return EAGAIN;
		if ((flags & NEMO__WAIT_CANCELLABLE) && n % 1024 == 0)
			pthread_testcancel();
	}
}

int nemo__wait_loop(const nemo__wait_ops *ops, void *arg, const nemo_wait_policy *p,
		    clockid_t clock, const struct timespec *abstime, unsigned flags)
{
	nemo_waiter *self = nemo_waiter_self();
	if (self)
		NEMO__COUNT(self, waits);
	if (ops->try_take(arg)) {
		if (self)
			NEMO__COUNT(self, waits_polled);
		return 0;
	}
	nemo_clock_init();
	nemo_wait_policy pol;
	if (nemo_wait_policy_resolve(p, &pol) != 0)
		return EINVAL;
	bool adaptive = pol.kind == NEMO_WAIT_ADAPTIVE;
	uint64_t start = nemo_ticks();
	uint64_t left = ticks_until(clock, abstime);
	if (left == 0)
		return ETIMEDOUT;      /* already past: never sleep on it */
	uint64_t deadline = add_sat(start, left);

	/* Poll. */
	bool preempted = false;
	nemo__spin_plan plan = nemo__spin_plan_for(&pol, self);
	if (plan.total) {
		int rc = poll_phase(ops, arg, plan, start, deadline, flags, adaptive, &preempted);
		if (rc != EAGAIN) {
			if (rc == 0 && self)
				NEMO__COUNT(self, waits_polled);
			if (adaptive)
				adapt_update(self, nemo_ticks() - start, rc == 0, preempted);
			return rc;
		}
	}

	/* Sleep. */
	if (flags & NEMO__WAIT_BOOST)
		boost_enter(self);
	else if (self && self->boosted)
		nemo__boost_leave();
	int result;
	for (;;) {
		uint32_t *word, val, bits = 0;
		uint64_t slept_at = nemo_ticks();
		if (ops->sleep_begin(arg, &word, &val, &bits)) {
			result = 0;
			break;
		}
		if (self)
			NEMO__COUNT(self, sleeps);
		int rc = futex_sleep(ops, word, val, bits, clock, abstime, flags);
		ops->sleep_end(arg);
		if (ops->try_take(arg)) {
			/* Woken by a kick made after we published the sleep: what
			 * that wake-up cost is a sample of the cost of blocking. */
			uint64_t kicked = ops->kicked_at ? ops->kicked_at(arg) : 0;
			if (kicked > slept_at)
				nemo__learn_wake_latency(nemo_ticks_to_ns((int64_t)(nemo_ticks() - kicked)));
			result = 0;
			break;
		}
		/* A deadline in the past must not reach the kernel (it refuses
		 * negative times with EINVAL): check before sleeping again. */
		if (rc == ETIMEDOUT || (abstime && ticks_until(clock, abstime) == 0)) {
			result = ETIMEDOUT;
			break;
		}
	}
	if (adaptive)
		adapt_update(self, nemo_ticks() - start, false, preempted);
	return result;
}
