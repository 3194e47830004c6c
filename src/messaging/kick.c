/*
 * kick.c - the one place where the messaging layer decides how to make a
 * receiving place notice its queues.
 *
 * A sender gets here only when the decision to kick at all has been made
 * at S4 (nemo__hint_test_set, messaging_internal.h; called by
 * nemo__send_commit for a single send, and by send.c's nemo__publish /
 * nemo__publish_many for the rest): its hint bit at the receiver was
 * clear, so its queue turned non-empty since the receiver last looked, or
 * the sender asked for NEMO_PUSH.  What remains is how, and that depends on
 * the state the receiver published in its waiter slot:
 *
 *   POLLING   nothing: it is watching its hint words and hot queues, and
 *             the sender's stores reach it in a cache-line transfer;
 *   SLEEPING  one FUTEX_WAKE, through the waiter layer's kick (its
 *             CAS makes sure only one kicker pays the syscall); places
 *             sleep on their domain's shared word with their own bit, so
 *             nemo__kick_many (broadcasts) wakes every sleeper with one
 *             FUTEX_WAKE_BITSET instead of one syscall each;
 *   RUNNING   armed on its eventfd (nemo_place_fd; placewait.c, THE FILE
 *             DESCRIPTOR): one write to it, by the kicker whose exchange
 *             takes the arming;
 *             else served by the domain's progress thread (src/poll/
 *             progress.c): the progress thread's kick, a FUTEX_WAKE if it
 *             sleeps;
 *             else with interrupt mode on and a polling watchdog (src/poll/
 *             watchdog.c): nothing now - the watchdog signals it if the
 *             message is still waiting after T;
 *             else with interrupt mode on: a signal (tgkill), the user-space
 *             stand-in for the Nemo paper's IPI; its handler runs the
 *             message handlers on top of whatever the place computes.
 *             Without interrupt mode: nothing; the place handles the
 *             message at its next poll point or wait.
 *
 * Why the order of the two reads is safe: state is read with seq_cst
 * after the hint RMW (send.c, S4), and a place moving RUNNING ->
 * POLLING -> RUNNING re-checks its hints after each seq_cst publication
 * (placewait.c, W1/W6), so a sender that reads a stale POLLING misses
 * nothing: the place sees the hint on its way out of the wait.
 *
 * STALE SIGNALS
 *
 * A signal must not reach a thread once it has stopped being a place in
 * interrupt mode (nemo_place_leave, nemo_place_set_interrupts(false)): it
 * would interrupt whatever the thread does next - a nanosleep returns
 * EINTR.  A kicker decides from irq_on and then calls tgkill, and in
 * between the place may clear irq_on and return.  So a kicker brackets
 * the decision and the tgkill (irq_kick):
 *
 *   IK0 load(dst.irq_on, seq_cst) == 0: nothing (no RMW for places that
 *       are not in interrupt mode; turning it on re-checks the hints, W6
 *       of placewait.c, so this is the old decision)
 *   IK1 fetch_add(dst.irq_kickers, 1, seq_cst)
 *   IK2 if load(dst.irq_on, seq_cst): tid := load(dst.tid, relaxed);
 *       tgkill(tid); fetch_add(dst.irq_sent, 1, relaxed)
 *   IK3 fetch_sub(dst.irq_kickers, 1, release)
 *
 * and the place, turning interrupts off (nemo__irq_quiesce):
 *
 *   Q1  store(irq_on, 0, seq_cst)
 *   Q2  spin until load(irq_kickers, seq_cst) == 0
 *   Q3  n := load(irq_sent); if n differs from the last Q3's: block the
 *       signal, take every pending instance (sigtimedwait with a zero
 *       timeout: real-time signals queue), restore the mask; and mark
 *       irq_pending if it took one
 *
 * IK1;IK2 against Q1;Q2 is the store-buffering pattern, all four seq_cst:
 * if IK2 reads the irq_on = 1 that Q1 overwrote, IK2 precedes Q1 in the
 * single total order, so IK1 precedes Q2, which sees the kicker (or a
 * later value of the counter, none of which is 0 before this kicker's
 * IK3) and waits for IK3.  IK3 comes after tgkill returned, and by then the
 * kernel has queued the signal at the thread (or delivered it, to a
 * handler that found interrupts off and only marked irq_pending), so Q3
 * finds it.  A kicker whose IK1 comes after Q2's read reads irq_on = 0 at
 * IK2 - or the 1 of a later turning-on, whose signals are that period's.
 * Q2's acquire read of the last IK3 (the counter's RMWs form one release
 * sequence) makes every irq_sent increment before it visible, so Q3
 * compares against every signal of the period that just ended; when none
 * was sent since the last Q3, turning interrupts off costs no syscall.
 * join stores tid before irq_on (release), so an IK2 that reads a new
 * occupant's irq_on signals the new occupant's thread.  The RMWs cost a
 * line transfer next to a tgkill of microseconds.
 *
 * Counters: kicks_futex, kicks_signal and kicks_avoided of the sender's
 * place.  The cost of each (measured on the 2-vCPU VM of docs/messaging.md):
 * nothing ~0, a FUTEX_WAKE of a sleeper ~2 us of the sender's time, a
 * tgkill to a running vCPU ~2-3 us.
 */
#define _GNU_SOURCE
#include "messaging_internal.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

bool nemo__irq_signal(nemo_place *dst)
{
	bool sent = false;
	atomic_fetch_add_explicit(&dst->irq_kickers, 1, memory_order_seq_cst);           /* IK1 */
	if (atomic_load_explicit(&dst->irq_on, memory_order_seq_cst)) {                  /* IK2 */
		pid_t tid = atomic_load_explicit(&dst->tid, memory_order_relaxed);
		syscall(SYS_tgkill, getpid(), tid, dst->d->sig);
		atomic_fetch_add_explicit(&dst->irq_sent, 1, memory_order_relaxed);
		sent = true;
	}
	atomic_fetch_sub_explicit(&dst->irq_kickers, 1, memory_order_release);           /* IK3 */
	return sent;
}

/* IK1-IK3: signal dst, which IK0 found in interrupt mode. */
static void irq_kick(nemo_place *me, nemo_place *dst)
{
	if (nemo__irq_signal(dst))
		NEMO__PCOUNT(me, c_kicks_signal);
	else
		NEMO__PCOUNT(me, c_kicks_avoided);
}

/* WD1-WD2 (src/poll/watchdog.c, THE WATCHDOG): dst runs in interrupt mode
 * under a watchdog: instead of a signal now, start its clock (if no
 * message of it is waiting already) and make sure the watchdog is awake. */
static void wd_defer(nemo_place *me, nemo_place *dst, nemo_waiter *ww)
{
	uint64_t zero = 0, now = nemo_ticks();
	NEMO__PCOUNT(me, c_kicks_deferred);
	/* seq_cst: after S4's RMW, against the drain's WD3 store then D2 load
	 * (models/watchdog.pml, -DWEAK_SEND). */
	if (atomic_load_explicit(&dst->wd_since, memory_order_seq_cst) ||
	    !atomic_compare_exchange_strong_explicit(&dst->wd_since, &zero, now ? now : 1,
						     memory_order_seq_cst, memory_order_relaxed))  /* WD1 */
		return;       /* its clock runs already: that sender woke the watchdog */
	if (!atomic_load_explicit(&me->d->wd_w, memory_order_seq_cst)) {
		/* WD6: the watchdog stopped meanwhile: signal now ourselves. */
		if (atomic_exchange_explicit(&dst->wd_since, 0, memory_order_seq_cst))
			irq_kick(me, dst);
		return;
	}
	if (nemo__waiter_kick_issued(ww))                                                  /* WD2 */
		NEMO__PCOUNT(me, c_kicks_futex);
}

void nemo__irq_quiesce(nemo_place *me)
{
	/* Q1 was the caller's. */
	for (unsigned n = 1; atomic_load_explicit(&me->irq_kickers, memory_order_seq_cst); n++) { /* Q2 */
		nemo_cpu_relax();
		if (n % 64 == 0)
			sched_yield();      /* a kicker preempted inside its bracket */
	}
	uint32_t sent = atomic_load_explicit(&me->irq_sent, memory_order_relaxed);           /* Q3 */
	if (sent == me->irq_sent_seen)
		return;
	me->irq_sent_seen = sent;
	int saved = errno;
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, me->d->sig);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	const struct timespec zero = { 0, 0 };
	bool took = false;
	for (;;) {
		int got = sigtimedwait(&set, NULL, &zero);
		if (got == me->d->sig)
			took = true;
		else if (got < 0 && errno != EINTR)
			break;      /* EAGAIN: none left */
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* Its messages wait for the next poll, or for interrupts on again. */
	if (took)
		atomic_store_explicit(&me->irq_pending, 1, memory_order_relaxed);
	errno = saved;
}

/* F3 (placewait.c, THE FILE DESCRIPTOR): dst is armed on its eventfd.
 * True if this call took the arming and wrote. */
static bool fd_write_once(nemo_place *dst)
{
	bool took = false;
	atomic_fetch_add_explicit(&dst->fd_kickers, 1, memory_order_seq_cst);
	if (atomic_exchange_explicit(&dst->fd_armed, 0, memory_order_seq_cst)) {
		uint64_t one = 1;
		if (write(atomic_load_explicit(&dst->efd, memory_order_relaxed), &one, sizeof one) ==
		    (ssize_t)sizeof one)
			atomic_fetch_add_explicit(&dst->fd_writes, 1, memory_order_release);
		took = true;
	}
	atomic_fetch_sub_explicit(&dst->fd_kickers, 1, memory_order_release);
	return took;
}

static void fd_kick(nemo_place *me, nemo_place *dst)
{
	if (fd_write_once(dst))
		NEMO__PCOUNT(me, c_kicks_fd);
	else
		NEMO__PCOUNT(me, c_kicks_avoided);   /* another kicker wrote it, or it woke */
}

void nemo__place_wake(nemo_place *p)
{
	/* Armed on its descriptor: the loop comes back (F3, with no hint:
	 * its nemo_poll finds nothing queued, reads the write back and
	 * reports what the transport says).  Else its waiter, if asleep. */
	if (atomic_load_explicit(&p->fd_armed, memory_order_seq_cst) && fd_write_once(p))
		return;
	nemo_waiter *w = atomic_load_explicit(&p->waiter, memory_order_acquire);
	if (w)
		nemo__waiter_kick_issued(w);
}

void nemo__kick(nemo_place *me, nemo_place *dst)
{
	nemo_waiter *w = atomic_load_explicit(&dst->waiter, memory_order_acquire);
	if (!w)
		return;
	uint32_t s = nemo__slot_state(w);
	if (s == NEMO_WAITER_RUNNING) {
		if (atomic_load_explicit(&dst->wd_ticks, memory_order_relaxed) &&
		    atomic_load_explicit(&dst->irq_on, memory_order_seq_cst)) {
			nemo_waiter *ww = atomic_load_explicit(&me->d->wd_w, memory_order_acquire);
			if (ww) {
				wd_defer(me, dst, ww);
				return;
			}
		}
		if (atomic_load_explicit(&dst->fd_armed, memory_order_seq_cst)) {
			fd_kick(me, dst);
			return;
		}
		if (atomic_load_explicit(&dst->delegated, memory_order_seq_cst)) {
			/* Served by the progress thread (src/poll/progress.c). */
			nemo_waiter *pw = atomic_load_explicit(&me->d->prog_w, memory_order_acquire);
			if (pw && nemo__waiter_kick_issued(pw))
				NEMO__PCOUNT(me, c_kicks_futex);
			else
				NEMO__PCOUNT(me, c_kicks_avoided);
			return;
		}
		if (atomic_load_explicit(&dst->irq_on, memory_order_seq_cst))                /* IK0 */
			irq_kick(me, dst);
		else
			NEMO__PCOUNT(me, c_kicks_avoided);
		return;
	}
	/* POLLING: nothing to do, and no fence to pay for it (the caller's
	 * publication already ordered its stores before this read). */
	if (s == NEMO_WAITER_SLEEPING && nemo__waiter_kick_issued(w))
		NEMO__PCOUNT(me, c_kicks_futex);
	else
		NEMO__PCOUNT(me, c_kicks_avoided);
}

/* Wake the slots that looked asleep; count them as the counters say:
 * woken ones as FUTEX_WAKEs (kicks_futex), the others as avoided. */
static void kick_sleepers(nemo_place *me, nemo_waiter *const *ws, size_t n)
{
	if (!n)
		return;
	size_t k = nemo__waiter_kick_many(ws, n);
	NEMO__PADD(me, c_kicks_futex, k);
	NEMO__PADD(me, c_kicks_avoided, n - k);
}

void nemo__kick_many(nemo_place *me, nemo_place *const *dsts, size_t n)
{
	nemo_waiter *sleepers[64];
	size_t ns = 0;
	for (size_t i = 0; i < n; i++) {
		nemo_place *dst = dsts[i];
		nemo_waiter *w = atomic_load_explicit(&dst->waiter, memory_order_acquire);
		if (!w)
			continue;
		uint32_t s = nemo__slot_state(w);
		if (s == NEMO_WAITER_RUNNING) {
			nemo__kick(me, dst);         /* signal or nothing, as for one */
			continue;
		}
		if (ns == sizeof sleepers / sizeof sleepers[0]) {
			kick_sleepers(me, sleepers, ns);
			ns = 0;
		}
		sleepers[ns++] = w;
	}
	/* One FUTEX_WAKE_BITSET on the domain's word for every sleeper. */
	kick_sleepers(me, sleepers, ns);
}
