/*
 * progress.c - a domain's progress thread (nemo/poll.h): it handles the
 * messages of the places that ask for it while they compute.
 *
 * STATES.  Per place: delegated (0/1, set by the place itself under its
 * plock) and plock, a mutex held by whoever consumes the place's queues
 * or sends as it: the place's own thread for the length of each of its
 * nemo calls while delegated (nemo__busy_enter/exit: messaging_internal.h
 * and irq.c), or the progress thread while it drains the place.
 * Interrupt mode is excluded (a signal handler cannot take the lock), and
 * so is being served while in a handler.  Per domain: prog_w, the
 * progress thread's waiter slot (RUNNING, POLLING, SLEEPING), published
 * while the thread runs.
 *
 * THE LOOP.  try_take: for every index whose place is ACTIVE and
 * delegated, trylock its plock (busy: its own thread is in a nemo call
 * and handles its own messages; skip it); under the lock re-check
 * delegated, become the place for the drain (the thread-local place
 * pointer, so handlers' sends go out as it), drain it with context
 * NEMO_AM_CTX_PROGRESS, deliver its overflow, and unlock.  Something
 * handled: loop.  Else wait through the waiter layer's loop with the
 * thread's policy: poll (try_take again) for its budget, then sleep:
 *
 *   P1  exchange(state, SLEEPING, seq_cst)
 *   P2  for every delegated place: any hint word non-zero (seq_cst load)
 *       -> cancel (state RUNNING) and drain
 *   P3  futex_wait(state, SLEEPING)
 *
 * A sender (kick.c): S4 sets its hint bit at r with a seq_cst RMW, then
 * reads r's waiter state; RUNNING and r.delegated (seq_cst loads) ->
 * kick prog_w: the waiter layer's CAS SLEEPING -> RUNNING and FUTEX_WAKE.
 *
 * WHY NO WAKE-UP IS LOST.  S4;kick against P1;P2 is the store-buffering
 * pattern, all seq_cst: the sender sees SLEEPING (and wakes it) or P2
 * sees the hint bit (and does not sleep).  A sender that finds its bit
 * set already skips the kick; the bit stays set until the place is
 * drained, and P2 sees it.  A place that turns delegated sets the flag
 * before its next message can be missed: a sender that read delegated =
 * 0 sees the place RUNNING and does what it does for any running place
 * (nothing, or a signal: excluded); the place's own next nemo call then
 * drains as before, and the progress thread's next pass finds the hint.
 * So a delegated place's message waits at most until the progress
 * thread's current pass ends or, if it sleeps, until its kick.  Places
 * the progress thread cannot lock are in a nemo call of their own, which
 * handles their queues.  (This is the place protocol of placewait.c,
 * WAIT, with the progress thread as the waiter of many places: models/
 * place.pml covers one; the hint re-check at P2 covers each.)
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
	unsigned total = 0;
	for (unsigned i = 0; i < d->P; i++) {
		nemo_place *x = &d->places[i];
		if (!atomic_load_explicit(&x->delegated, memory_order_relaxed) ||
		    nemo__status_state(atomic_load_explicit(&x->status, memory_order_acquire)) != NEMO__ST_ACTIVE)
			continue;
		if (pthread_mutex_trylock(&x->plock) != 0)
			continue;     /* its own thread is in a nemo call: it drains */
		if (atomic_load_explicit(&x->delegated, memory_order_relaxed) &&
		    nemo__status_state(atomic_load_explicit(&x->status, memory_order_acquire)) == NEMO__ST_ACTIVE) {
			NEMO__INVARIANT(!nemo__tls_place, "the progress thread is a place itself");
			nemo__tls_place = x;
			nemo__holds_plock = true;      /* handlers' nemo calls: locked already */
			atomic_store_explicit(&x->busy, 1, memory_order_relaxed);
			unsigned n = nemo__drain(x, NEMO_AM_CTX_PROGRESS, false);
			if (x->ovf_n) {
				/* Kept sends: delivered now, or a kick (of this
				 * thread, the place being served) when room for
				 * them appears (overflow.c, ROOM KICKS). */
				nemo__ovf_flush(x);
				nemo__ovf_arm(x);
			}
			atomic_store_explicit(&x->busy, 0, memory_order_relaxed);
			nemo__holds_plock = false;
			nemo__tls_place = NULL;
			if (n) {
				atomic_fetch_add_explicit(&p->drains, 1, memory_order_relaxed);
				atomic_fetch_add_explicit(&p->handled, n, memory_order_relaxed);
				total += n;
			}
		}
		pthread_mutex_unlock(&x->plock);
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

/* P2: anything for a delegated place?  (Hint words only: a sender sets
 * its bit before it kicks, and a set bit stays until a drain.)  Or stop. */
static bool prog_pending(void *arg)
{
	struct nemo_progress *p = arg;
	if (atomic_load_explicit(&p->stop, memory_order_seq_cst))
		return true;
	struct nemo_domain *d = p->d;
	for (unsigned i = 0; i < d->P; i++) {
		nemo_place *x = &d->places[i];
		if (!atomic_load_explicit(&x->delegated, memory_order_seq_cst))
			continue;
		_Atomic uint64_t *row = nemo__hint_row(d, i);
		for (unsigned w = 0; w < d->HW; w++)
			if (atomic_load_explicit(&row[w], memory_order_seq_cst))
				return true;
	}
	return false;
}

static bool prog_sleep_begin(void *arg, uint32_t **word, uint32_t *val, uint32_t *bits)
{
	struct nemo_progress *p = arg;
	nemo_waiter *w = atomic_load_explicit(&p->w, memory_order_relaxed);
	if (nemo__slot_sleep_begin(w, NULL, prog_pending, p, word, val, bits))             /* P1, P2 */
		return prog_try_take(p) || true;
	atomic_fetch_add_explicit(&p->sleeps, 1, memory_order_relaxed);
	return false;                                                                      /* P3 */
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
	atomic_store_explicit(&p->d->prog_w, w, memory_order_release);
	atomic_store_explicit(&p->started, 1, memory_order_release);
	while (!atomic_load_explicit(&p->stop, memory_order_acquire)) {
		if (pass(p))
			continue;
		nemo__slot_polling(w);
		nemo__wait_loop(&prog_ops, p, &p->policy, CLOCK_MONOTONIC, NULL, 0);
		nemo__slot_running(w);
	}
	atomic_store_explicit(&p->d->prog_w, NULL, memory_order_release);
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
	if ((err = nemo__service_claim(d, &d->progress, p, "progress thread", __func__))) {
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
		nemo__service_unclaim(d, &d->progress);
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
	nemo__service_unclaim(p->d, &p->d->progress);
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
	if (nemo__in_call(me))
		return NEMO__FAIL(EBUSY, "called from inside a handler or another nemo call of this place");
	if (on && atomic_load_explicit(&me->irq_on, memory_order_relaxed))
		return NEMO__FAIL(EBUSY, "interrupt mode is on: turn it off first (the two are exclusive)");
	if (on)
		nemo__grant_revoke(me);   /* granted senders would not wake the progress thread */
	pthread_mutex_lock(&me->plock);
	nemo__place_set_delegated(me, on);
	pthread_mutex_unlock(&me->plock);
	if (on) {
		/* What is already queued: the progress thread's next pass sees
		 * the hints; wake it in case it sleeps. */
		nemo_waiter *w = atomic_load_explicit(&me->d->prog_w, memory_order_acquire);
		if (w)
			nemo__waiter_kick_issued(w);
	}
	return 0;
}
