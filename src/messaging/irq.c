/*
 * irq.c - interrupt mode on the receiving side: the signal handler, and
 * the deferral that keeps it from running handlers inside a nemo call.
 *
 * INTERRUPT DEFERRAL
 *
 * A place in interrupt mode gets a signal when a message arrives while it
 * runs (kick.c).  The handler may run the message handlers right there -
 * but not while the thread is inside a nemo call of its own place: the
 * drain, a send's S1-S5, the overflow and the hot list are owner-private
 * state that the interrupted call is in the middle of changing.  So:
 *
 *   busy        the nesting depth of nemo calls of the place (owner
 *               only: the thread and its signal handler, which runs on
 *               the same thread, so plain relaxed accesses with signal
 *               fences are enough: no other thread reads it, except the
 *               progress thread under the place's plock)
 *   irq_pending a signal arrived while busy (or with interrupts off)
 *
 *   E1  busy_enter: busy := busy + 1; signal fence
 *   E2  busy_exit of the outermost call: if irq_pending: exchange it to 0
 *       and drain; busy := 0; signal fence; re-check irq_pending: set ->
 *       busy := 1 and go round again
 *   H1  the handler: busy or irq_on 0 -> irq_pending := 1, return;
 *       else busy := 1, drain until nothing is pending, deliver the
 *       overflow, busy := 0
 *
 * Why no signal's messages are stranded: a signal that lands before E2's
 * busy := 0 sets irq_pending (H1) and E2's re-check, after the store,
 * sees it; one that lands after finds busy 0 and drains itself.  The
 * signal fences keep the compiler from moving the stores across those
 * points (the handler interrupts the same thread, so no hardware fence
 * is needed).  A place that turns interrupts off takes a pending signal
 * off the thread (kick.c, STALE SIGNALS) and leaves irq_pending for its
 * next call.  A served place (src/poll/progress.c) takes its plock in E1
 * and releases it in E2; interrupt mode and being served exclude each
 * other, so H1 never needs the lock.
 */
#define _GNU_SOURCE
#include "messaging_internal.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

/* ------------------------------------------------------------ busy */

/* The calling thread holds the plock of the place it acts as (a
 * delegated place in a nemo call, or the progress thread draining it:
 * src/poll/progress.c). */
__thread bool nemo__holds_plock __attribute__((tls_model("initial-exec")));
#define holds_plock nemo__holds_plock

void nemo__busy_lock(nemo_place *me)
{
	pthread_mutex_lock(&me->plock);
	holds_plock = true;
}

void nemo__busy_exit_slow(nemo_place *me)
{
	atomic_signal_fence(memory_order_seq_cst);
	int b = atomic_load_explicit(&me->busy, memory_order_relaxed) - 1;
	NEMO__INVARIANT(b >= 0, "busy_exit without its busy_enter");
	NEMO__INVARIANT(!atomic_load_explicit(&me->delegated, memory_order_relaxed) || nemo__holds_plock,
			"a served place's nemo call runs without its plock");
	if (b > 0) {
		atomic_store_explicit(&me->busy, b, memory_order_relaxed);
		return;
	}
	/* Leaving the outermost call with sends kept: ask for a kick when
	 * room for them appears (overflow.c, ROOM KICKS); busy still holds
	 * off the interrupt handler. */
	if (me->ovf_n)
		nemo__ovf_arm(me);
	/* Leaving the outermost call: run what an interrupt deferred.  The
	 * check after clearing busy closes the window in which a signal
	 * sees busy set but we have already looked at irq_pending. */
	for (;;) {
		/* A plain load first: a locked exchange on every send and poll
		 * costs more than the rest of a batched send. */
		if (atomic_load_explicit(&me->irq_pending, memory_order_relaxed) &&
		    atomic_exchange_explicit(&me->irq_pending, 0, memory_order_relaxed))
			nemo__drain(me, NEMO_AM_CTX_POLL, false);
		atomic_store_explicit(&me->busy, 0, memory_order_relaxed);
		atomic_signal_fence(memory_order_seq_cst);
		if (!atomic_load_explicit(&me->irq_pending, memory_order_relaxed)) {
			if (__builtin_expect(holds_plock, 0)) {
				holds_plock = false;
				pthread_mutex_unlock(&me->plock);
			}
			return;
		}
		atomic_store_explicit(&me->busy, 1, memory_order_relaxed);
		atomic_signal_fence(memory_order_seq_cst);
	}
}

/* ------------------------------------------------------ interrupt mode */

/* The signal handler: run the handlers now, unless the thread is inside
 * a nemo call or has interrupts off - then remember, and the call's exit
 * (nemo__busy_exit) or nemo_place_set_interrupts(true) runs them. */
static void irq_handler(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	(void)uc;
	nemo_place *me = nemo__tls_place;
	if (!me)
		return;
	int saved = errno;
	if (atomic_load_explicit(&me->busy, memory_order_relaxed) ||
	    !atomic_load_explicit(&me->irq_on, memory_order_relaxed)) {
		atomic_store_explicit(&me->irq_pending, 1, memory_order_relaxed);
		errno = saved;
		return;
	}
	atomic_store_explicit(&me->busy, 1, memory_order_relaxed);
	atomic_signal_fence(memory_order_seq_cst);
	NEMO__PCOUNT(me, c_interrupts);
	/* Until nothing is left: a sender that found its hint bit set will
	 * not signal again, so what remains queued must be handled now. */
	while (nemo__drain(me, NEMO_AM_CTX_INTERRUPT, false) || nemo__pending(me))
		;
	if (me->ovf_n) {
		/* What its handlers kept (overflow.c, OVERFLOW), and a kick when
		 * room for the rest appears: the thread goes back to computing. */
		me->in_irq = true;
		nemo__ovf_flush(me);
		nemo__ovf_arm(me);
		me->in_irq = false;
	}
	atomic_signal_fence(memory_order_seq_cst);
	atomic_store_explicit(&me->busy, 0, memory_order_relaxed);
	errno = saved;
}

static pthread_mutex_t irq_lock = PTHREAD_MUTEX_INITIALIZER;

int nemo__irq_install(int sig)
{
	int err = 0;
	pthread_mutex_lock(&irq_lock);
	struct sigaction old;
	if (sigaction(sig, NULL, &old) != 0) {
		err = errno;
	} else if ((old.sa_flags & SA_SIGINFO) && old.sa_sigaction == irq_handler) {
		err = 0;      /* installed already */
	} else if (!(old.sa_flags & SA_SIGINFO) &&
		   (old.sa_handler == SIG_DFL || old.sa_handler == SIG_IGN)) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = irq_handler;
		sa.sa_flags = SA_SIGINFO | SA_RESTART;
		sigemptyset(&sa.sa_mask);
		if (sigaction(sig, &sa, NULL) != 0)
			err = errno;
	} else {
		err = EBUSY;  /* someone else's handler: not ours to replace */
	}
	pthread_mutex_unlock(&irq_lock);
	return err;
}

int nemo_place_set_interrupts(bool on)
{
	nemo_place *me = nemo__tls_place;
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	if (!on) {
		atomic_store_explicit(&me->irq_on, 0, memory_order_seq_cst);       /* Q1 */
		nemo__irq_quiesce(me);      /* no signal from now on (kick.c) */
		return 0;
	}
	if (atomic_load_explicit(&me->delegated, memory_order_relaxed))
		return NEMO__FAIL(EBUSY, "the place is served by the progress thread (nemo_place_set_progress(false) first)");
	int err = nemo__irq_install(me->d->sig);
	if (err)
		return err;
	/* Make sure the signal is not blocked in this thread. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, me->d->sig);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	/* Granted senders would not signal (grant.c, THE STREAM GRANT). */
	nemo__grant_revoke(me);
	atomic_store_explicit(&me->irq_on, 1, memory_order_seq_cst);
	/* What arrived while interrupts were off (a sender that saw them off
	 * did not signal): the same store/load pattern as W6 of
	 * placewait.c. */
	nemo__busy_enter(me);
	if (nemo__pending(me) || atomic_exchange_explicit(&me->irq_pending, 0, memory_order_relaxed))
		nemo__drain(me, NEMO_AM_CTX_POLL, false);
	nemo__busy_exit(me);
	return 0;
}
