/*
 * names.c - the name table of a shared domain: a name has one code in
 * every process, whatever the timing.
 *
 * THE TABLE.  names[M]: state (64 bits) and the name (6 words).  Open
 * addressing with linear probing from the name's hash; a slot is never
 * freed.  The name's code is NEMO_XPROC_NAMED_BASE + its slot: above
 * every integer action id, so a name never collides with one.  Its state
 * goes
 *
 *   0 (free) --CAS--> I (claimed by the process of identity I: pid and
 *   start time, segment.h) --store--> NAME_READY (the name is written)
 *
 *   N1  CAS state 0 -> I                 acq_rel
 *   N2  the name's words                 relaxed stores
 *   N3  state = NAME_READY               seq_cst store (a release)
 *
 * and a prober reads state with acquire, so a READY slot's name is the
 * one written before N3.  Two processes entering the same name probe the
 * same slots in the same order, and neither passes a slot before it is
 * READY: the first slot either finds free is the one both meet, one wins
 * N1, and the other waits for N3 and finds the name there.  So a name
 * gets one code.
 *
 * WAITING FOR A CLAIMER.  A prober that meets a claim waits for it - a
 * claim is N2 and N3, a few stores - however long the claimer takes:
 * it never passes a claimed slot on a timeout (that would give the name
 * a second code if the claimer was only slow: preempted, stopped).  It
 * takes the slot over only from a claimer that is dead, as the one
 * liveness check of nemo says (platform/proc.h: a reference opened for
 * the claim's identity, a pidfd kept; a claim whose pid was reused is
 * dead by its start time): CAS I -> our identity, then N2 and N3 as
 * ours.  Two probers that find the claimer dead race that CAS; the loser
 * waits for the winner.  The wait spins briefly, then sleeps in growing
 * naps of at most 10 ms, checking the claimer each time.
 *
 * A claimer alive and not done after NAME_WAIT_NS (stopped in a
 * debugger, or a hostile peer that wrote a live process's identity) ends
 * the call with EBUSY, having entered nothing: a call never waits
 * without bound (THE VALIDATION RULE), and the name still has one code
 * when the caller tries again.
 */
#define _GNU_SOURCE

#include "segment.h"

#include "../platform/fail.h"

#include <nemo/platform.h>   /* nemo_cpu_relax */

#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NAME_WAIT_NS 10000000000ull       /* a live claimer not done after this: EBUSY */
#define NAP_MAX_NS 10000000L              /* the longest nap between two looks at a claimer */

static uint32_t name_hash(const uint32_t w[NAME_WORDS])
{
	uint32_t h = 2166136261u;
	for (unsigned i = 0; i < NAME_WORDS; i++)
		h = (h ^ w[i]) * 16777619u;
	return h;
}

/* N2, N3: the slot is ours (claimed by N1, or taken over). */
static void name_write(struct seg_name *n, const uint32_t w[NAME_WORDS])
{
	if (nemo__xproc_test_hook)
		nemo__xproc_test_hook("name");
	for (unsigned j = 0; j < NAME_WORDS; j++)
		atomic_store_explicit(&n->name[j], w[j], memory_order_relaxed);             /* N2 */
	atomic_store_explicit(&n->state, NAME_READY, memory_order_seq_cst);              /* N3 */
}

/* Settle slot n for the name w: 0 if the slot is (now) the name's;
 * ENOENT if it holds another name; EBUSY (with its text) if a live
 * claimer did not finish within NAME_WAIT_NS. */
static int settle(struct seg_name *n, uint32_t i, const uint32_t w[NAME_WORDS])
{
	/* The calling process's identity, not the handle's: a child of fork
	 * may enter names through its copy of its parent's handle. */
	uint64_t me = xp_ident(getpid(), nemo__proc_self_start());
	uint64_t st = atomic_load_explicit(&n->state, memory_order_acquire);
	nemo__proc_ref claimer = { .pid = 0, .fd = -1, .start = 0, .dead = true };
	uint64_t claimer_of = 0, give_up = 0;
	long nap = 0;
	int rc;
	for (unsigned spin = 0;; spin++) {
		if (st == 0) {
			if (atomic_compare_exchange_strong_explicit(&n->state, &st, me, memory_order_acq_rel,
								    memory_order_acquire)) {    /* N1 */
				name_write(n, w);
				rc = 0;
				break;
			}
			continue;
		}
		if (st == NAME_READY) {
			rc = name_eq(n->name, w) ? 0 : ENOENT;
			break;
		}
		/* Claimed by identity st: its process alive? */
		if (claimer_of != st) {
			nemo__proc_close(&claimer);
			nemo__proc_open(&claimer, ident_pid(st), ident_start(st));
			claimer_of = st;
		}
		if (nemo__proc_dead(&claimer)) {
			if (atomic_compare_exchange_strong_explicit(&n->state, &st, me, memory_order_acq_rel,
								    memory_order_acquire)) {    /* take over */
				name_write(n, w);
				rc = 0;
				break;
			}
			continue;
		}
		if (spin < 64) {
			nemo_cpu_relax();
		} else {
			uint64_t now = nemo__xp_now_ns();
			if (!give_up)
				give_up = now + NAME_WAIT_NS;
			if (now >= give_up) {
				rc = nemo__fail(EBUSY, "nemo_xproc_name", "name slot %u is being entered by process "
						"%d, which is alive and not done after %llu s (stopped, or a hostile "
						"peer): nothing entered, try again", i, (int)ident_pid(st),
						NAME_WAIT_NS / 1000000000ull);
				break;
			}
			nap = nap ? (nap * 2 < NAP_MAX_NS ? nap * 2 : NAP_MAX_NS) : 20000;
			struct timespec ts = { 0, nap };
			nanosleep(&ts, NULL);
		}
		st = atomic_load_explicit(&n->state, memory_order_acquire);
	}
	nemo__proc_close(&claimer);
	return rc;
}

int nemo_xproc_name(nemo_xproc *x, const char *name, uint32_t *code)
{
	if (!x || !code || !name_ok(name, NEMO_XPROC_NAME_MAX))
		return NEMO__FAIL(EINVAL, "NULL handle or code, or name not 1-%u of [A-Za-z0-9._-]",
				  NEMO_XPROC_NAME_MAX);
	uint32_t w[NAME_WORDS];
	name_pack(name, w);
	uint32_t h = name_hash(w);
	for (uint32_t k = 0; k < x->nnames; k++) {
		uint32_t i = (h + k) % x->nnames;
		int rc = settle(name_at(x, i), i, w);
		if (rc == 0)
			*code = NEMO_XPROC_NAMED_BASE + i;   /* a range of its own (segment.h, xp_action) */
		if (rc != ENOENT)
			return rc;
	}
	return NEMO__FAIL(ENOSPC, "no slot of the %u names is free for '%s'", x->nnames, name);
}
