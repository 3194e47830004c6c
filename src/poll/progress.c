/*
 * progress.c - a domain's progress thread (nemo/poll.h): it handles the
 * messages of the places that ask for it while they compute.
 *
 * STATES.  Per place: delegated (0/1, set by the place itself under its
 * plock) and plock, a mutex held by whoever consumes the place's queues
 * or sends as it: the place's own thread for the length of each of its
 * nemo calls while delegated (nemo__busy_enter/exit of the messaging
 * layer: irq.c), or the progress thread while it drains the place.  This
 * layer sees neither field: nemo__place_set_served sets delegated under
 * plock, nemo__place_delegated reads it, and nemo__place_serve takes the
 * lock for a drain (src/messaging/modes.h).
 * Interrupt mode is excluded (a signal handler cannot take the lock), and
 * so is being served while in a handler.  Per domain: prog_w, the
 * progress thread's waiter slot (RUNNING, POLLING, SLEEPING), published
 * while the thread runs (nemo__domain_set_progress_waiter).
 *
 * THE LOOP.  try_take: for every index, nemo__place_serve (modes.h): if
 * its place is ACTIVE and delegated, trylock its plock (busy: its own
 * thread is in a nemo call and handles its own messages; skip it); under
 * the lock re-check delegated, become the place for the drain (the
 * thread-local place pointer, so handlers' sends go out as it), drain it
 * with context NEMO_AM_CTX_PROGRESS, deliver its overflow, and unlock.  Something
 * handled: loop.  Else wait through the waiter layer's loop with the
 * thread's policy: poll (try_take again) for its budget, then sleep:
 *
 *   PT1 exchange(state, SLEEPING, seq_cst)
 *   PT2 for every delegated place: any hint word non-zero (seq_cst load;
 *       nemo__domain_progress_pending) -> cancel (state RUNNING) and drain
 *   PT3 futex_wait(state, SLEEPING)
 *
 * A sender (kick.c): S4 sets its hint bit at r with a seq_cst RMW, then
 * reads r's waiter state; RUNNING and r.delegated (seq_cst loads) ->
 * kick prog_w: the waiter layer's CAS SLEEPING -> RUNNING and FUTEX_WAKE.
 *
 * WHY NO WAKE-UP IS LOST.  S4;kick against PT1;PT2 is the store-buffering
 * pattern, all seq_cst: the sender sees SLEEPING (and wakes it) or PT2
 * sees the hint bit (and does not sleep).  A sender that finds its bit
 * set already skips the kick; the bit stays set until the place is
 * drained, and PT2 sees it.  A drain that stops at its budget sets bits
 * again itself, with no sender behind them: the place's own nemo call
 * may do so after PT2, so such a drain of a delegated place kicks the
 * progress thread as a sender would (drain.c, end of nemo__drain;
 * test_progress hung without it: a bit set, the thread asleep).  A place
 * that turns delegated sets the flag before its next message can be
 * missed: a sender that read delegated = 0 sees the place RUNNING and
 * does what it does for any running place (nothing, or a signal:
 * excluded); the place's own next nemo call then drains as before,
 * and the progress thread's next pass finds the hint.  So a delegated
 * place's message waits at most until the progress thread's current
 * pass ends or, if it sleeps, until its kick.  Places
 * the progress thread cannot lock are in a nemo call of their own, which
 * handles their queues.  (This is the place protocol of placewait.c,
 * WAIT, with the progress thread as the waiter of many places: models/
 * place.pml covers one; the hint re-check at PT2 covers each.)
 *
 * COST.  A served place pays an uncontended mutex lock and unlock per
 * nemo call; senders pay what they pay to kick a sleeping place (a
 * FUTEX_WAKE of the progress thread, once per sleep); the progress
 * thread's pass reads the status, delegated and hint words of every
 * index.
 */
#define _GNU_SOURCE
#include <nemo/poll.h>

#include "service.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

struct nemo_progress {
	struct nemo_domain *d;
	pthread_t thread;
	nemo_wait_policy policy;
	_Atomic int stop;
	_Atomic(nemo_waiter *) w;
	_Atomic int started;          /* 1 once the thread runs, -1 if it failed */
	_Atomic uint64_t drains, handled, sleeps;
	bool realtime;                /* running at SCHED_FIFO 1 */
};

/* One pass over the delegated places: what was handled. */
static unsigned pass(struct nemo_progress *p)
{
	struct nemo_domain *d = p->d;
	unsigned total = 0, np = nemo__domain_places(d);
	for (unsigned i = 0; i < np; i++) {
		/* Skipped unless ACTIVE and delegated, or while its own thread
		 * is in a nemo call (then it drains); else drained under its
		 * plock, with its overflow (modes.h). */
		unsigned n = nemo__place_serve(nemo__domain_place(d, i));
		if (n) {
			atomic_fetch_add_explicit(&p->drains, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&p->handled, n, memory_order_relaxed);
			total += n;
		}
	}
	return total;
}

static bool prog_try_take(void *arg)
{
	struct nemo_progress *p = arg;
	if (atomic_load_explicit(&p->stop, memory_order_acquire))
		return true;
	return pass(p) > 0;
}

/* PT2: anything for a delegated place?  (Hint words only: a sender sets
 * its bit before it kicks, and a set bit stays until a drain.)  Or stop. */
static bool prog_pending(void *arg)
{
	struct nemo_progress *p = arg;
	if (atomic_load_explicit(&p->stop, memory_order_seq_cst))
		return true;
	return nemo__domain_progress_pending(p->d);
}

static bool prog_sleep_begin(void *arg, uint32_t **word, uint32_t *val, uint32_t *bits)
{
	struct nemo_progress *p = arg;
	nemo_waiter *w = atomic_load_explicit(&p->w, memory_order_relaxed);
	if (nemo__slot_sleep_begin(w, NULL, prog_pending, p, word, val, bits))             /* PT1, PT2 */
		return prog_try_take(p) || true;
	atomic_fetch_add_explicit(&p->sleeps, 1, memory_order_relaxed);
	return false;                                                                      /* PT3 */
}

static void prog_sleep_end(void *arg)
{
	struct nemo_progress *p = arg;
	nemo__slot_awake(atomic_load_explicit(&p->w, memory_order_relaxed));
}

static const nemo__wait_ops prog_ops = {
	.try_take = prog_try_take,
	.sleep_begin = prog_sleep_begin,
	.sleep_end = prog_sleep_end,
	.futex_flags = NEMO_FUTEX_PRIVATE,
};

static void *prog_main(void *arg)
{
	struct nemo_progress *p = arg;
	nemo_waiter *w = nemo_waiter_self();
	if (!w) {
		atomic_store_explicit(&p->started, -1, memory_order_release);
		return NULL;
	}
	nemo__slot_running(w);
	atomic_store_explicit(&p->w, w, memory_order_relaxed);
	nemo__domain_set_progress_waiter(p->d, w);
	atomic_store_explicit(&p->started, 1, memory_order_release);
	while (!atomic_load_explicit(&p->stop, memory_order_acquire)) {
		if (pass(p))
			continue;
		nemo__slot_polling(w);
		nemo__wait_loop(&prog_ops, p, &p->policy, CLOCK_MONOTONIC, NULL, 0);
		nemo__slot_running(w);
	}
	nemo__domain_set_progress_waiter(p->d, NULL);
	return NULL;
}

static int pin_thread(pthread_t t, int cpu)
{
	cpu_set_t set;
	if (cpu < 0) {
		if (sched_getaffinity(0, sizeof set, &set) != 0)   /* the process's CPUs */
			return errno;
	} else {
		if (cpu >= CPU_SETSIZE)
			return EINVAL;
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
	}
	return pthread_setaffinity_np(t, sizeof set, &set);
}

int nemo_progress_start(nemo_domain *d, const nemo_progress_attr *attr, nemo_progress **out)
{
	if (!out)
		return NEMO__FAIL(EINVAL, "out is NULL");
	int err = nemo__domain_check(d);
	if (err)
		return err;
	nemo_progress_attr a = attr ? *attr : (nemo_progress_attr){ 0 };
	if (a.policy.kind < NEMO_WAIT_DEFAULT || a.policy.kind > NEMO_WAIT_ADAPTIVE)
		return NEMO__FAIL(EINVAL, "policy kind %d is not a nemo_wait_kind", (int)a.policy.kind);
	if (a.pin && (a.cpu < 0 || a.cpu >= CPU_SETSIZE))
		return NEMO__FAIL(EINVAL, "cpu %d is out of range", a.cpu);
	struct nemo_progress *p = calloc(1, sizeof *p);
	if (!p)
		return ENOMEM;
	p->d = d;
	p->policy = a.policy;
	if ((err = nemo__service_claim(d, NEMO__SERVICE_PROGRESS, p, "progress thread", __func__))) {
		free(p);
		return err;
	}
	err = nemo__service_run(&p->thread, prog_main, p, &p->started);
	if (!err && a.pin && pin_thread(p->thread, a.cpu) != 0) {
		atomic_store(&p->stop, 1);
		nemo__waiter_kick_issued(atomic_load_explicit(&p->w, memory_order_acquire));
		pthread_join(p->thread, NULL);
		err = NEMO__FAIL(EINVAL, "cannot pin the progress thread to cpu %d", a.cpu);
	}
	if (err) {
		nemo__service_unclaim(d, NEMO__SERVICE_PROGRESS);
		free(p);
		return err;
	}
	*out = p;
	return 0;
}

int nemo_progress_stop(nemo_progress *p)
{
	if (!p)
		return NEMO__FAIL(EINVAL, "the progress thread is NULL");
	atomic_store_explicit(&p->stop, 1, memory_order_seq_cst);
	nemo_waiter *w = atomic_load_explicit(&p->w, memory_order_acquire);
	if (w)
		nemo__waiter_kick_issued(w);
	pthread_join(p->thread, NULL);
	nemo__service_unclaim(p->d, NEMO__SERVICE_PROGRESS);
	free(p);
	return 0;
}

int nemo_progress_pin(nemo_progress *p, int cpu)
{
	if (!p)
		return NEMO__FAIL(EINVAL, "the progress thread is NULL");
	int err = pin_thread(p->thread, cpu);
	return err ? NEMO__FAIL(EINVAL, "cannot pin the progress thread to cpu %d", cpu) : 0;
}

int nemo_progress_get_counters(nemo_progress *p, nemo_progress_counters *out)
{
	if (!p || !out)
		return NEMO__FAIL(EINVAL, "%s is NULL", p ? "out" : "the progress thread");
	out->drains = atomic_load_explicit(&p->drains, memory_order_relaxed);
	out->handled = atomic_load_explicit(&p->handled, memory_order_relaxed);
	out->sleeps = atomic_load_explicit(&p->sleeps, memory_order_relaxed);
	out->cpu_ns = nemo__thread_cpu_ns(p->thread);
	out->realtime = p->realtime;
	return 0;
}

int nemo_place_set_progress(bool on)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	if (nemo__place_in_call(me))
		return NEMO__FAIL(EBUSY, "called from inside a handler or another nemo call of this place");
	if (on && nemo__place_irq_on(me))
		return NEMO__FAIL(EBUSY, "interrupt mode is on: turn it off first (the two are exclusive)");
	/* Grants revoked first when on (granted senders would not wake the
	 * progress thread), then delegated set under the place's plock. */
	nemo__place_set_served(me, on);
	if (on) {
		/* What is already queued: the progress thread's next pass sees
		 * the hints; wake it in case it sleeps. */
		nemo_waiter *w = nemo__domain_progress_waiter(nemo__place_domain(me));
		if (w)
			nemo__waiter_kick_issued(w);
	}
	return 0;
}
