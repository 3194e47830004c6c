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
 * SOURCES.  A transport may hand the thread a source (service.h): MPI's
 * binding under NEMO_MPI_PROGRESS_THREAD, so that a domain has one
 * progress thread whoever asked for it (nemo_progress_start, or the
 * binding; users counts both, and the last to leave stops it).  The
 * source gives a pass, a re-check, how long the thread may sleep, and a
 * published-state word that its producers kick (the MPI doorbell, in
 * memory other ranks of the host map: waiter.c, THE RAW WORD).
 *   SRC1 the requester (its SOURCE use counted under starts, so the
 *        thread outlives the request; the request itself outside it):
 *        src_req, then store(src_op, ATTACH or DETACH, seq_cst) and kick
 *        prog_w; it sleeps on src_op until the thread answers.
 *   SRC2 the thread, at the top of its loop (its try_take and PT2 see
 *        src_op and end the wait): runs the source's start or stop on
 *        itself (MPI's joins or leaves a place: it hands messages over),
 *        stores src_err, then src_op := NONE (release) and wakes it.
 * While a source is held, every pass makes the source's pass too, and
 * the sleep is
 *   SRC3 store(word, SLEEPING, seq_cst) and a fence, before PT1;
 *   SRC4 the source's re-check, after PT2's (its loads after SRC3);
 *   SRC5 PT3 on both words at once (futex_waitv: the waiter layer's
 *        TWO WORDS, wait.c), the slot's private word and the source's;
 *   SRC6 exchange(word, RUNNING) after it: RUNNING read -> a kick
 *        claimed it (the source counts it).
 * SRC3;SRC4 against a producer's work;fence;kick is the store-buffering
 * pattern the slot's PT1;PT2 is (and the doorbell's, models/doorbell.pml):
 * the producer claims SLEEPING and wakes the thread, or SRC4 sees the
 * work.  A kick of either word ends SRC5; a kick that lands between the
 * re-checks and SRC5 changed its word, so futex_waitv returns at once.
 * The thread sleeps at most the source's slice (MPI gives no wake-up for
 * a message of another host: a backoff), and after a sleep that the
 * slice ended with nothing to do it sleeps again at once (BLOCK).
 *
 * COST.  A served place pays an uncontended mutex lock and unlock per
 * nemo call; senders pay what they pay to kick a sleeping place (a
 * FUTEX_WAKE of the progress thread, once per sleep); the progress
 * thread's pass reads the status, delegated and hint words of every
 * index.
 */
#define _GNU_SOURCE
#include <nemo/poll.h>

#include "../platform/deadline.h"
#include "service.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

enum { USER = 1, SOURCE = 2 };                 /* who uses the thread (users) */
enum { SRC_NONE, SRC_ATTACH, SRC_DETACH };      /* a request to the thread (src_op) */

struct nemo_progress {
	struct nemo_domain *d;
	pthread_t thread;
	nemo_wait_policy policy;
	_Atomic int stop;
	_Atomic(nemo_waiter *) w;
	_Atomic int started;          /* 1 once the thread runs, -1 if it failed */
	_Atomic uint64_t drains, handled, sleeps;
	bool realtime;                /* running at SCHED_FIFO 1 */
	unsigned users;               /* USER | SOURCE, under starts */
	/* SOURCES: the request (src_req, then src_op; the answer src_err,
	 * then src_op back to SRC_NONE) and, the thread's own, src. */
	_Atomic uint32_t src_op;
	nemo__progress_source src_req;
	int src_err;
	const nemo__progress_source *src;   /* &src_cur while one is attached */
	nemo__progress_source src_cur;
};

/* The lookup of a domain's thread and its users (starts, stops, and the
 * bookkeeping of attaches and detaches, whose requests to the thread are
 * made outside it). */
static pthread_mutex_t starts = PTHREAD_MUTEX_INITIALIZER;

/* One pass over the delegated places, and the source's: what was handled. */
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
	if (p->src)
		total += p->src->pass(p->src->arg);
	return total;
}

/* On the thread: take or drop the source the request names (SRC2). */
static void src_apply(struct nemo_progress *p)
{
	uint32_t op = atomic_load_explicit(&p->src_op, memory_order_acquire);   /* src_req's stores */
	if (op == SRC_ATTACH) {
		p->src_err = p->src_req.start ? p->src_req.start(p->src_req.arg) : 0;
		if (!p->src_err) {
			p->src_cur = p->src_req;
			p->src = &p->src_cur;
		}
	} else if (op == SRC_DETACH && p->src) {
		if (p->src->stop)
			p->src->stop(p->src->arg);
		p->src = NULL;
	}
	atomic_store_explicit(&p->src_op, SRC_NONE, memory_order_release);              /* SRC2 */
	nemo__word_wake(&p->src_op, 1, NEMO_FUTEX_PRIVATE);
}

static bool prog_try_take(void *arg)
{
	struct nemo_progress *p = arg;
	if (atomic_load_explicit(&p->stop, memory_order_acquire) ||
	    atomic_load_explicit(&p->src_op, memory_order_acquire))
		return true;
	return pass(p) > 0;
}

/* PT2: anything for a delegated place?  (Hint words only: a sender sets
 * its bit before it kicks, and a set bit stays until a drain.)  The
 * source's re-check (SRC4), a request about the source, or stop. */
static bool prog_pending(void *arg)
{
	struct nemo_progress *p = arg;
	if (atomic_load_explicit(&p->stop, memory_order_seq_cst) ||
	    atomic_load_explicit(&p->src_op, memory_order_seq_cst))
		return true;
	if (nemo__domain_progress_pending(p->d))
		return true;
	return p->src && p->src->pending(p->src->arg);
}

static bool prog_sleep_begin(void *arg, uint32_t **word, uint32_t *val, uint32_t *bits)
{
	struct nemo_progress *p = arg;
	nemo_waiter *w = atomic_load_explicit(&p->w, memory_order_relaxed);
	const nemo__progress_source *s = p->src;
	if (s && s->word) {
		atomic_store_explicit(s->word, NEMO_WAITER_SLEEPING, memory_order_seq_cst);     /* SRC3 */
		NEMO__FENCE();          /* SRC3 before the source's reads at SRC4 */
	}
	if (nemo__slot_sleep_begin(w, NULL, prog_pending, p, word, val, bits)) {            /* PT1, PT2 */
		if (s && s->word)
			atomic_store_explicit(s->word, NEMO_WAITER_RUNNING, memory_order_relaxed);
		return prog_try_take(p) || true;
	}
	atomic_fetch_add_explicit(&p->sleeps, 1, memory_order_relaxed);
	return false;                                                                      /* PT3 */
}

/* PT3 sleeps on the source's word too (SRC5). */
static bool prog_sleep_also(void *arg, nemo_futex_word *also)
{
	struct nemo_progress *p = arg;
	const nemo__progress_source *s = p->src;
	if (!s || !s->word)
		return false;
	*also = (nemo_futex_word){ (uint32_t *)s->word, NEMO_WAITER_SLEEPING, s->word_flags };
	return true;
}

static void prog_sleep_end(void *arg)
{
	struct nemo_progress *p = arg;
	nemo__slot_awake(atomic_load_explicit(&p->w, memory_order_relaxed));
	const nemo__progress_source *s = p->src;
	if (s) {
		bool kicked = s->word &&
			      atomic_exchange_explicit(s->word, NEMO_WAITER_RUNNING, memory_order_relaxed) ==
				      NEMO_WAITER_RUNNING;                                         /* SRC6 */
		if (s->slept)
			s->slept(s->arg, kicked);
	}
}

static const nemo__wait_ops prog_ops = {
	.try_take = prog_try_take,
	.sleep_begin = prog_sleep_begin,
	.sleep_end = prog_sleep_end,
	.sleep_also = prog_sleep_also,
	.futex_flags = NEMO_FUTEX_PRIVATE,
};

/* The progress thread this thread is (NULL on every other thread): a
 * handler it runs may not stop it (nemo_progress_stop: EDEADLK). */
static _Thread_local struct nemo_progress *running;

static void *prog_main(void *arg)
{
	struct nemo_progress *p = arg;
	running = p;
	nemo_waiter *w = nemo_waiter_self();
	if (!w) {
		atomic_store_explicit(&p->started, -1, memory_order_release);
		return NULL;
	}
	nemo__slot_running(w);
	atomic_store_explicit(&p->w, w, memory_order_relaxed);
	nemo__domain_set_progress_waiter(p->d, w);
	atomic_store_explicit(&p->started, 1, memory_order_release);
	/* After a sleep that a source's slice ended with nothing to do:
	 * sleep again at once (the source's slice backs off). */
	static const nemo_wait_policy again = { .kind = NEMO_WAIT_BLOCK };
	bool idle = false;
	while (!atomic_load_explicit(&p->stop, memory_order_acquire)) {
		if (atomic_load_explicit(&p->src_op, memory_order_acquire))
			src_apply(p);
		if (pass(p)) {
			idle = false;
			continue;
		}
		struct timespec dl;
		uint64_t slice = p->src && p->src->slice_ns ? p->src->slice_ns(p->src->arg, idle) : 0;
		if (slice)
			nemo__deadline_in(CLOCK_MONOTONIC, slice, &dl);
		nemo__slot_polling(w);
		int rc = nemo__wait_loop(&prog_ops, p, idle ? &again : &p->policy, CLOCK_MONOTONIC,
					 slice ? &dl : NULL, 0);
		nemo__slot_running(w);
		idle = rc == ETIMEDOUT;
	}
	if (p->src && p->src->stop)
		p->src->stop(p->src->arg);
	p->src = NULL;
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

/* Start d's thread (starts held).  fn: the public call that asks. */
static int start_locked(nemo_domain *d, const nemo_progress_attr *attr, nemo_progress **out, const char *fn)
{
	nemo_progress_attr a = attr ? *attr : (nemo_progress_attr){ 0 };
	if (a.policy.kind < NEMO_WAIT_DEFAULT || a.policy.kind > NEMO_WAIT_ADAPTIVE)
		return nemo__fail(EINVAL, fn, "policy kind %d is not a nemo_wait_kind", (int)a.policy.kind);
	if (a.pin && (a.cpu < 0 || a.cpu >= CPU_SETSIZE))
		return nemo__fail(EINVAL, fn, "cpu %d is out of range", a.cpu);
	struct nemo_progress *p = calloc(1, sizeof *p);
	if (!p)
		return ENOMEM;
	p->d = d;
	p->policy = a.policy;
	int err = nemo__service_claim(d, NEMO__SERVICE_PROGRESS, p, "progress thread", fn);
	if (!err) {
		err = nemo__service_run(&p->thread, prog_main, p, &p->started);
		if (!err && a.pin && pin_thread(p->thread, a.cpu) != 0) {
			atomic_store(&p->stop, 1);
			nemo__waiter_kick_issued(atomic_load_explicit(&p->w, memory_order_acquire));
			pthread_join(p->thread, NULL);
			err = nemo__fail(EINVAL, fn, "cannot pin the progress thread to cpu %d", a.cpu);
		}
		if (err)
			nemo__service_unclaim(d, NEMO__SERVICE_PROGRESS);
	}
	if (err) {
		free(p);
		return err;
	}
	*out = p;
	return 0;
}

/* Stop p's thread and free it (starts held, no users left). */
static void stop_locked(struct nemo_progress *p)
{
	atomic_store_explicit(&p->stop, 1, memory_order_seq_cst);
	nemo_waiter *w = atomic_load_explicit(&p->w, memory_order_acquire);
	if (w)
		nemo__waiter_kick_issued(w);
	pthread_join(p->thread, NULL);
	nemo__service_unclaim(p->d, NEMO__SERVICE_PROGRESS);
	free(p);
}

/* SRC1: ask the thread to take or drop a source and wait until it has:
 * its answer.  The store of src_op and the kick's read of the slot
 * against PT1-PT2's publication and read of src_op: the thread sees the
 * request, or is woken (the handshake of waiter.c).  The requester sleeps
 * on src_op while it holds the request (SRC2 changes it, then wakes). */
static int src_request(struct nemo_progress *p, uint32_t op, const nemo__progress_source *s)
{
	if (s)
		p->src_req = *s;
	p->src_err = 0;
	atomic_store_explicit(&p->src_op, op, memory_order_seq_cst);                     /* SRC1 */
	nemo__waiter_kick_issued(atomic_load_explicit(&p->w, memory_order_acquire));
	while (atomic_load_explicit(&p->src_op, memory_order_acquire) == op)
		nemo__word_sleep(&p->src_op, op, NULL, NEMO_FUTEX_PRIVATE);
	return p->src_err;
}

int nemo_progress_start(nemo_domain *d, const nemo_progress_attr *attr, nemo_progress **out)
{
	if (!out)
		return NEMO__FAIL(EINVAL, "out is NULL");
	int err = nemo__domain_check(d);
	if (err)
		return err;
	if (attr && (attr->policy.kind < NEMO_WAIT_DEFAULT || attr->policy.kind > NEMO_WAIT_ADAPTIVE))
		return NEMO__FAIL(EINVAL, "policy kind %d is not a nemo_wait_kind", (int)attr->policy.kind);
	pthread_mutex_lock(&starts);
	struct nemo_progress *p = nemo__domain_service(d, NEMO__SERVICE_PROGRESS);
	if (p && !(p->users & USER)) {
		/* A source's thread (an MPI binding's): the caller shares it.
		 * Its policy stays; a pin asked for applies. */
		if (attr && attr->pin && (attr->cpu < 0 || attr->cpu >= CPU_SETSIZE || pin_thread(p->thread, attr->cpu)))
			err = NEMO__FAIL(EINVAL, "cannot pin the progress thread to cpu %d", attr->cpu);
		else {
			p->users |= USER;
			*out = p;
		}
	} else if (!(err = start_locked(d, attr, &p, __func__))) {
		p->users = USER;
		*out = p;
	}
	pthread_mutex_unlock(&starts);
	return err;
}

int nemo_progress_stop(nemo_progress *p)
{
	if (!p)
		return NEMO__FAIL(EINVAL, "the progress thread is NULL");
	if (running == p)
		return NEMO__FAIL(EDEADLK, "called by the progress thread itself (a handler it runs): it "
				  "cannot end and free itself; stop it from another thread");
	pthread_mutex_lock(&starts);
	p->users &= ~(unsigned)USER;
	if (!p->users)
		stop_locked(p);
	pthread_mutex_unlock(&starts);
	return 0;
}

int nemo__progress_attach(nemo_domain *d, const nemo__progress_source *s, const nemo_progress_attr *attr,
			  nemo_progress **out, const char *fn)
{
	pthread_mutex_lock(&starts);
	int err = 0;
	struct nemo_progress *p = nemo__domain_service(d, NEMO__SERVICE_PROGRESS);
	if (p && (p->users & SOURCE))
		err = nemo__fail(EEXIST, fn, "the domain's progress thread serves a transport already");
	else if (!p)
		err = start_locked(d, attr, &p, fn);
	if (!err)
		p->users |= SOURCE;    /* held: nobody stops the thread meanwhile */
	pthread_mutex_unlock(&starts);
	if (err)
		return err;
	/* The request is answered by the thread: not under starts, which a
	 * handler the thread runs meanwhile may need. */
	if (!(err = src_request(p, SRC_ATTACH, s))) {
		*out = p;
		return 0;
	}
	pthread_mutex_lock(&starts);
	p->users &= ~(unsigned)SOURCE;
	if (!p->users)
		stop_locked(p);
	pthread_mutex_unlock(&starts);
	return err;
}

void nemo__progress_detach(nemo_progress *p)
{
	src_request(p, SRC_DETACH, NULL);   /* p lives on: SOURCE is still among its users */
	pthread_mutex_lock(&starts);
	p->users &= ~(unsigned)SOURCE;
	if (!p->users)
		stop_locked(p);
	pthread_mutex_unlock(&starts);
}

uint64_t nemo__progress_cpu_ns(nemo_progress *p)
{
	return nemo__thread_cpu_ns(p->thread);
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
