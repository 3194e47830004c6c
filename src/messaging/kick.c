/*
 * kick.c - the one place where the messaging layer decides how to make a
 * receiving place notice its queues.
 *
 * A sender gets here only when the decision to kick at all has been made
 * in queue.c (nemo__publish): its hint bit at the receiver was clear, so
 * its queue turned non-empty since the receiver last looked, or the
 * sender asked for NEMO_PUSH.  What remains is how, and that depends on
 * the state the receiver published in its waiter slot:
 *
 *   POLLING   nothing: it is watching its hint words and hot queues, and
 *             the sender's stores reach it in a cache-line transfer;
 *   SLEEPING  one FUTEX_WAKE, through the waiter layer's kick (its
 *             CAS makes sure only one kicker pays the syscall); places
 *             sleep on their domain's shared word with their own bit, so
 *             nemo__kick_many (broadcasts) wakes every sleeper with one
 *             FUTEX_WAKE_BITSET instead of one syscall each;
 *   RUNNING   with interrupt mode on: a signal (tgkill), the user-space
 *             stand-in for the Nemo paper's IPI; its handler runs the
 *             message handlers on top of whatever the place computes.
 *             Without interrupt mode: nothing; the place handles the
 *             message at its next poll point or wait.
 *
 * Why the order of the two reads is safe: state is read with seq_cst
 * after the hint RMW (queue.c, S4), and a place moving RUNNING ->
 * POLLING -> RUNNING re-checks its hints after each seq_cst publication
 * (queue.c, W1/W6), so a sender that reads a stale POLLING misses nothing:
 * the place sees the hint on its way out of the wait.
 *
 * Counters: kicks_futex, kicks_signal and kicks_avoided of the sender's
 * place.  The cost of each (measured on the 2-vCPU VM of docs/messaging.md):
 * nothing ~0, a FUTEX_WAKE of a sleeper ~2 us of the sender's time, a
 * tgkill to a running vCPU ~2-3 us.
 */
#define _GNU_SOURCE
#include "messaging_internal.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

void nemo__kick(nemo_place *me, nemo_place *dst)
{
	nemo_waiter *w = atomic_load_explicit(&dst->waiter, memory_order_acquire);
	if (!w)
		return;
	uint32_t s = atomic_load_explicit(&w->state, memory_order_seq_cst);
	if (s == NEMO_WAITER_RUNNING) {
		if (atomic_load_explicit(&dst->irq_on, memory_order_seq_cst)) {
			pid_t tid = atomic_load_explicit(&dst->tid, memory_order_relaxed);
			/* A stale tid (the occupant left and exited) fails with
			 * ESRCH, or reaches another thread of this process whose
			 * handler finds no place and returns: both harmless. */
			syscall(SYS_tgkill, getpid(), tid, me->d->sig);
			NEMO__PCOUNT(me, c_kicks_signal);
		} else {
			NEMO__PCOUNT(me, c_kicks_avoided);
		}
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
		uint32_t s = atomic_load_explicit(&w->state, memory_order_seq_cst);
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
