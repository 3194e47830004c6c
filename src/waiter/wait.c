/*
 * wait.c - the one wait loop: poll for a budget, then sleep.
 *
 * Every blocking wait in nemo comes through nemo__wait_loop, so this is
 * the one place that decides whether to sleep:
 *
 *   1. try once (the condition may already hold);
 *   2. poll for the policy's budget (SPIN: forever, yielding the CPU after
 *      1 ms so oversubscribed threads still progress; BLOCK: zero; HYBRID:
 *      its spin_ns; ADAPTIVE: the calibrated cost of blocking - wake
 *      latency + the sleeper's CPU time - or an eighth of it while most
 *      recent waits outlasted it, so that long gaps do not pay a full
 *      budget of spinning every time);
 *   3. sleep: ops->sleep_begin publishes the sleep and re-checks (the
 *      handshake of waiter.c or event.c), futex_wait, ops->sleep_end, and
 *      try again; until taken or the deadline passes.
 *
 * Why a budget in time, not in iterations: an iteration's cost varies
 * tenfold between machines (pause is ~10 cycles on some cores and ~140 on
 * others); the cost of blocking is a time.  Spinning for as long as a
 * block+wake costs bounds the waste at twice the better choice made in
 * hindsight (the classic ski-rental argument), whatever the gap.
 *
 * Kick mode (NEMO__WAIT_BOOST): the thread runs at the lowest real-time
 * priority, so that when it is woken it preempts a busy normal thread on
 * its CPU at once instead of waiting for the scheduler (Nemo's "condvar +
 * IPI" for threads that act as a runtime's logical processors).  Where
 * real-time priority is not permitted (no CAP_SYS_NICE, RLIMIT_RTPRIO 0)
 * kick mode is a plain wait: the first EPERM is remembered per thread.
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

uint64_t nemo__spin_budget_ticks(const nemo_wait_policy *p, nemo_waiter *self)
{
	switch (p->kind) {
	case NEMO_WAIT_SPIN:
		return UINT64_MAX;
	case NEMO_WAIT_BLOCK:
		return 0;
	case NEMO_WAIT_HYBRID:
		return nemo_ns_to_ticks(p->spin_ns ? p->spin_ns : NEMO_WAIT_HYBRID_DEFAULT_NS);
	case NEMO_WAIT_ADAPTIVE:
	default: {
		double b = nemo__block_cost_ns();
		if (self && self->long_waits >= 4)
			b /= 8;
		return nemo_ns_to_ticks(b);
	}
	}
}

/* Adaptive history: a saturating count of recent waits that outlasted the
 * full budget (they would have slept anyway). */
static void adapt_update(nemo_waiter *self, uint64_t waited_ticks)
{
	if (!self)
		return;
	bool long_wait = nemo_ticks_to_ns((int64_t)waited_ticks) > nemo__block_cost_ns();
	if (long_wait) {
		if (self->long_waits < 8)
			self->long_waits++;
	} else {
		self->long_waits = self->long_waits >= 2 ? self->long_waits - 2 : 0;
	}
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
	uint64_t start = nemo_ticks();
	uint64_t budget = nemo__spin_budget_ticks(&pol, self);
	uint64_t left = ticks_until(clock, abstime);
	if (left == 0)
		return ETIMEDOUT;      /* already past: never sleep on it */
	uint64_t deadline = add_sat(start, left);
	uint64_t spin_end = add_sat(start, budget);
	uint64_t yield_after = add_sat(start, nemo_ns_to_ticks(1e6));

	/* Poll. */
	if (budget) {
		for (unsigned n = 1;; n++) {
			if (ops->try_take(arg)) {
				if (self)
					NEMO__COUNT(self, waits_polled);
				if (pol.kind == NEMO_WAIT_ADAPTIVE)
					adapt_update(self, nemo_ticks() - start);
				return 0;
			}
			nemo_cpu_relax();
			/* A pause costs tens of cycles on some x86 cores: check the
			 * clock every 4th, or a 1 us budget overshoots by a
			 * microsecond or more (measured). */
			if (n % 4)
				continue;
			uint64_t now = nemo_ticks();
			if (now >= deadline)
				return ETIMEDOUT;
			if (now >= spin_end)
				break;
			if (budget == UINT64_MAX && now >= yield_after)
				sched_yield();
			if ((flags & NEMO__WAIT_CANCELLABLE) && n % 1024 == 0)
				pthread_testcancel();
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
		if (ops->sleep_begin(arg, &word, &val, &bits)) {
			result = 0;
			break;
		}
		if (self)
			NEMO__COUNT(self, sleeps);
		int rc = futex_sleep(ops, word, val, bits, clock, abstime, flags);
		ops->sleep_end(arg);
		if (ops->try_take(arg)) {
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
	if (pol.kind == NEMO_WAIT_ADAPTIVE)
		adapt_update(self, nemo_ticks() - start);
	return result;
}
