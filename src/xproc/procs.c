/*
 * procs.c - the process table of a shared domain: who is attached, who
 * died, and the reclaim of a dead process's places.
 *
 * THE WORD.  procs[k].word (64 bits, one cache line per slot) is 0 for a
 * free slot, else the identity of the process in it - pid and start time
 * (segment.h, xp_ident) - with bit ID_RECLAIM set while it is being
 * reclaimed.  A process takes a free slot with one CAS 0 -> identity
 * (seq_cst), so the slot never holds a pid without its start time, and
 * a CAS that expects one identity can never succeed on another: a
 * reclaimer that read a dead process's word does not take the word of a
 * process that got the same pid and the freed slot since (the pid alone
 * would be an ABA).  Detach frees the slot with a CAS identity -> 0.
 *
 * LIVENESS (src/platform/proc.h, the one check of nemo).  Each handle
 * keeps, per peer slot, a reference opened once per (pid, start) read
 * from the word and kept while the word names that identity: a pidfd
 * taken after the start time was matched (O1, O2), so that the death of
 * that very process is decided by the pidfd (O3) whatever happens to its
 * pid afterwards.  A word that names another identity (the slot changed
 * hands) gets a new reference: nothing learned about the old process is
 * applied to the new one.  Hence:
 *   - a process whose pid was reused after it died is dead (the reused
 *     pid's start time differs, or the pidfd kept from before is
 *     readable);
 *   - a live process is never taken for dead: its reference was opened
 *     for its own identity, and its pidfd is not readable while it runs.
 * A check is one poll(2) on the kept pidfd, under the handle's
 * peers_lock: any thread of the process may check (places of several
 * threads; fd.c's bridge threads).  Our own slot is never checked.  (A pid reused within the clock tick of the dead process's
 * start would carry the same identity; the kernel hands pids out in
 * order, so that takes pid_max forks within one tick.)
 *
 * THE RECLAIM, by whoever wins the CAS identity -> identity | RECLAIM
 * of a process found dead (anyone may redo it later, every step is
 * idempotent; a checker that finds RECLAIM set helps if it too finds
 * the process dead):
 *
 *   XD1 every place owned by k, CLAIM or LIVE: CAS word -> DEAD (same
 *       gen); the CAS's winner then stores dead_gen = gen (relaxed: XD2's
 *       RMW publishes it; ring.c, PEER DEATH, says who reads it)
 *   XD2 deaths += 1 (seq_cst RMW)
 *   XD3 every place that sleeps (SLEEPING, or FD_ARMED: fd.c): CAS it to
 *       RUNNING and wake (XS2-XS3)
 *   XD4 procs[k].word: CAS identity | RECLAIM -> 0: the slot is free
 *
 * XD2 before XD3 is the store-then-look of sleep.c's XS1-XS2: a waiter's XW3
 * reads `deaths` (and its own place word, and a room waiter its
 * destination's), so it either sees the bump (or the DEAD of XD1, which
 * precedes XD2) or is kicked by XD3.  XD3 kicks every sleeping place, not
 * only the LIVE ones: a place of a live process that another process
 * took for dead (a hostile peer can make one) is DEAD after XD1, and its
 * owner must learn it from its own word (xproc.c, OUR OWN PLACE).
 */
#define _GNU_SOURCE

#include "segment.h"

#include "../platform/fail.h"


#include <errno.h>
#include <time.h>
#include <unistd.h>

_Atomic uint32_t nemo__xp_fork_gen;

uint64_t nemo__xp_now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Take a free process slot: one CAS 0 -> our identity (THE WORD). */
int nemo__xp_claim_proc(nemo_xproc *x)
{
	for (uint32_t k = 0; k < x->nprocs; k++) {
		uint64_t zero = 0;
		if (atomic_compare_exchange_strong_explicit(&proc_at(x, k)->word, &zero, x->ident,
							    memory_order_seq_cst, memory_order_relaxed)) {
			x->me = k;
			return 0;
		}
	}
	return EUSERS;
}

/* Detach: free our slot, if it is still ours (a process taken for dead
 * had it reclaimed, and another may hold it now). */
void nemo__xp_release_proc(nemo_xproc *x)
{
	uint64_t w = x->ident;
	if (x->me < x->nprocs)
		atomic_compare_exchange_strong_explicit(&proc_at(x, x->me)->word, &w, 0, memory_order_seq_cst,
							memory_order_relaxed);
}

/* Is the process named by word w (slot k) gone?  LIVENESS: the slot's
 * reference is kept while the word names the same identity. */
static bool proc_dead(nemo_xproc *x, uint32_t k, uint64_t w)
{
	pid_t pid = ident_pid(w);
	uint64_t start = ident_start(w);
	nemo__proc_ref *r = &x->peers[k];
	pthread_mutex_lock(&x->peers_lock);      /* places of several threads, and fd.c's bridges */
	if (!nemo__proc_is(r, pid, start)) {
		nemo__proc_close(r);
		nemo__proc_open(r, pid, start);   /* pid 0 (a scribbled word): EINVAL, and dead */
	}
	bool dead = nemo__proc_dead(r);
	pthread_mutex_unlock(&x->peers_lock);
	return dead;
}

void nemo__xp_kick_place(nemo_xproc *x, uint32_t i)
{
	_Atomic uint32_t *ws = &place_at(x, i)->wstate;
	/* XS2 (seq_cst load), XS3 (CAS SLEEPING or FD_ARMED -> RUNNING, wake):
	 * the waiter layer's kick on a raw word (waiter.c, THE RAW WORD). */
	if (nemo__word_kick(ws, XP_FD_ARMED, NEMO_FUTEX_SHARED))
		atomic_fetch_add_explicit(&x->kicks, 1, memory_order_relaxed);
}

/* XD1-XD4 for proc slot k, whose word is (identity | RECLAIM): idempotent. */
static void reclaim(nemo_xproc *x, uint32_t k, uint64_t word)
{
	_Atomic uint64_t *kw = &proc_at(x, k)->word;
	for (uint32_t i = 0; i < x->nplaces; i++) {                                        /* XD1 */
		_Atomic uint32_t *pw = &place_at(x, i)->word;
		uint32_t w = atomic_load_explicit(pw, memory_order_acquire);
		/* A helper may come late: another reclaimer finished (XD4) and
		 * a new process took slot k and joined.  Its places' words
		 * follow its claim of k, so a place word of its, read here,
		 * is followed by a proc word that is not ours any more: stop.
		 * (A place read before that has an older generation, and the
		 * new owner's join changed it: the CAS below fails.) */
		if (atomic_load_explicit(kw, memory_order_seq_cst) != word)
			return;
		if (pw_owner(w) == k && (pw_state(w) == P_LIVE || pw_state(w) == P_CLAIM) &&
		    atomic_compare_exchange_strong_explicit(pw, &w, pw_make(pw_gen(w), 0, P_DEAD),
							    memory_order_seq_cst, memory_order_relaxed))
			atomic_store_explicit(&place_at(x, i)->dead_gen, pw_gen(w), memory_order_relaxed);  /* XD1' */
	}
	atomic_fetch_add_explicit(&hdr(x)->deaths, 1, memory_order_seq_cst);              /* XD2 */
	for (uint32_t i = 0; i < x->nplaces; i++)                                          /* XD3 */
		nemo__xp_kick_place(x, i);
	atomic_compare_exchange_strong_explicit(kw, &word, 0, memory_order_seq_cst,
						memory_order_relaxed);                         /* XD4 */
	atomic_fetch_add_explicit(&x->reclaimed, 1, memory_order_relaxed);
}

/* Check proc slot k; reclaim it if its process is dead.  True if the
 * process that was in the slot when we looked is dead. */
bool nemo__xp_check_proc(nemo_xproc *x, uint32_t k)
{
	_Atomic uint64_t *kw = &proc_at(x, k)->word;
	uint64_t w = atomic_load_explicit(kw, memory_order_acquire);
	if (w == 0 || k == x->me || !proc_dead(x, k, w))
		return false;
	if (w & ID_RECLAIM) {
		/* Someone is reclaiming it (or died doing so): help. */
		reclaim(x, k, w);
		return true;
	}
	if (atomic_compare_exchange_strong_explicit(kw, &w, w | ID_RECLAIM, memory_order_seq_cst,
						    memory_order_relaxed))
		reclaim(x, k, w | ID_RECLAIM);
	return true;
}

/* WHO ASKS.  A sleeper asks after each slice that passed with nothing
 * (sleep.c), nemo_xproc_check when called.  A place that only polls, or
 * only sends, would never ask: its peer's death went unnoticed - sends
 * to it returned 0 and were lost, nemo_dead_places listed nothing - for
 * as long as it ran.  So nemo_xproc_poll, each send and nemo_dead_places
 * ask too, at most every XP_CHECK_NS per handle: one tick read and
 * compare each (nemo__xp_check_due), and the thread that wins the CAS of
 * next_check does the check. */
void nemo__xp_check_slow(nemo_xproc *x)
{
	uint64_t due = atomic_load_explicit(&x->next_check, memory_order_relaxed), now = nemo_ticks();
	if (now < due || !atomic_compare_exchange_strong_explicit(&x->next_check, &due,
								  now + nemo_ns_to_ticks((double)XP_CHECK_NS),
								  memory_order_relaxed, memory_order_relaxed))
		return;   /* not due, or another thread asks */
	for (uint32_t k = 0; k < x->nprocs; k++)
		nemo__xp_check_proc(x, k);
}

int nemo_xproc_check(nemo_xproc *x)
{
	if (!x)
		return NEMO__FAIL(EINVAL, "handle is NULL");
	if (nemo__xp_inherited(x))   /* its peers_lock may have been held across fork */
		return NEMO__XP_INHERITED();
	for (uint32_t k = 0; k < x->nprocs; k++)
		nemo__xp_check_proc(x, k);
	return 0;
}
