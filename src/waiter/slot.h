/*
 * slot.h - the layout of a thread's parking slot, private to src/waiter/.
 *
 * No other layer includes it: events, messaging and polling reach a slot
 * only through the functions of waiter_internal.h (the handshake,
 * release, kick, the shared word), so the one place where a slot's state
 * changes is waiter.c.  tests/check_layers.py fails the build's tests if
 * a file of src/ outside src/waiter/ includes this header.  The one file
 * outside src/waiter/ that does is a test: tests/test_adaptive.c, a
 * white-box test of the wait history (struct nemo__wait_hist below),
 * which check_layers.py does not scan.
 */
#ifndef NEMO_WAITER_SLOT_H
#define NEMO_WAITER_SLOT_H

#include "waiter_internal.h"

/*
 * A thread's wait history and wait counters.  wait.c owns every field:
 * it reads and writes them for the calling thread only (through
 * nemo__wait_me, bound by waiter.c when the thread gets its slot).  The
 * record lives inside the slot only so that the counters outlive the
 * thread (slots are pooled, never freed) and nemo_waiter_get_counters can
 * sum them; waiter.c never interprets it.
 */
struct nemo__wait_hist {
	/* Counters: owner-written (relaxed load and store, no RMW), read by
	 * nemo_waiter_get_counters with relaxed loads. */
	_Atomic uint64_t waits, waits_polled, sleeps;
	uint32_t long_waits;          /* adaptive history: 0..8 (wait.c, THE HISTORY) */
	uint32_t same_cpu;            /* adaptive history: releasers on our CPU, 0..8 */
	uint32_t one_cpu_at;          /* waits count when one_cpu was read */
	int8_t one_cpu;               /* affinity is a single CPU: -1 unknown, 0, 1 */
	int boost;                    /* kick mode: 0 untried, 1 works, -1 not permitted */
	bool boosted;                 /* running at the kick-mode priority now */
};

/* One thread's parking slot.  The first cache line is the one kickers
 * touch (state and token together, so a release costs one line
 * transfer); the rest is written by the owner. */
struct nemo_waiter {
	_Alignas(NEMO__CACHELINE) _Atomic uint32_t state;  /* nemo_waiter_state; the futex word */
	_Atomic uint32_t token;       /* 0 armed, 1 released */
	/* Ticks when a kicker last issued a FUTEX_WAKE for this slot (written
	 * just before the wake; the woken owner learns the wake-up latency
	 * from it: policy.c, THE COST OF BLOCKING). */
	_Atomic uint64_t kicked_at;
	/* The CPU the releaser ran on (written before the token, read by the
	 * owner after it saw the token): a releaser that had to run on the
	 * waiter's own CPU means polling there only delayed it (wait.c,
	 * THE HISTORY). */
	_Atomic int32_t rel_cpu;

	/* The owner's line.  A kicker reads it only after its CAS claimed a
	 * sleeping slot, so the owner's writes here cost a released poller
	 * nothing: the owner clears bword on its way out of every condvar
	 * wait, and in the first line that store had to take the line back
	 * from the releaser that had just written the token.
	 *
	 * The word shared with other waiters to sleep on instead of state, or
	 * NULL (waiter.c, SHARED WORD; set by nemo__slot_share).  Atomic
	 * (relaxed): a late kicker may read it while the owner clears it; the
	 * ordering that matters comes from the CAS on state. */
	_Alignas(NEMO__CACHELINE) _Atomic(_Atomic uint32_t *) bword;
	uint32_t bbit;                /* this slot's bit on bword; fixed at creation */
	/* Kicker-side counters of the owner thread (it counts its own kicks:
	 * relaxed load and store). */
	_Atomic uint64_t kicks_issued, kicks_avoided;
	struct nemo__wait_hist hist;  /* wait.c's; see above */

	/* Pool bookkeeping, under the pool lock. */
	struct nemo_waiter *all_next, *free_next;
	bool in_use;
};

/* The calling thread's wait history, or NULL before it has a slot (set by
 * waiter.c through nemo__wait_bind; wait.c's variable). */
extern __thread struct nemo__wait_hist *nemo__wait_me __attribute__((tls_model("initial-exec")));

/* Bind the calling thread's history (a fresh slot's, reset to "nothing
 * learnt"; counters kept), or unbind it (NULL, at thread exit). */
void nemo__wait_bind(struct nemo__wait_hist *h);

/* Add h's counters to *out (nemo_waiter_get_counters, under the pool
 * lock; relaxed loads). */
void nemo__wait_hist_add(const struct nemo__wait_hist *h, nemo_waiter_counters *out);

#endif
