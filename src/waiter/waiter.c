/*
 * waiter.c - per-thread parking slots, the kick, and their handshake.
 *
 * THE SLOT
 *
 * Every thread that waits through nemo owns one slot (struct nemo_waiter,
 * slot.h).  Its first cache line holds the two words other
 * threads touch:
 *
 *   state  the futex word, and the published state of the owner:
 *            RUNNING   not waiting;
 *            POLLING   waiting and watching `token` (needs no kick);
 *            SLEEPING  waiting in the kernel on `state`, or about to.
 *          Written by the owner (any value) and by a kicker (only the
 *          transition SLEEPING -> RUNNING, by CAS).
 *   token  0 while the owner waits, 1 once someone released it.  Written
 *          to 0 by the owner (arm), to 1 by a releaser.
 *
 * Keeping both in one line means a release costs the releaser one line
 * transfer: it writes token and reads state in the same line.
 *
 * THE HANDSHAKE
 *
 * Owner W, in nemo__wait_loop with the slot ops below:
 *   W1  poll:   state := POLLING (relaxed: it only saves kicks, see below);
 *               repeat: if load(token, acquire) == 1 -> done.
 *   W2  sleep:  exchange(state, SLEEPING, seq_cst);
 *   W3          if load(token, seq_cst) == 1 -> state := RUNNING; done.
 *   W4          futex_wait(&state, SLEEPING)   -- sleeps only while state
 *               is still SLEEPING, atomically with the kernel's check;
 *   W5          state := RUNNING (relaxed); if load(token, acquire) == 1
 *               -> done; else back to W2 (spurious wake-up or timeout).
 *
 * Releaser R, in nemo_waiter_release:
 *   R1  store(token, 1, seq_cst)      -- also a release of R's earlier writes;
 *   R2  s := load(state, seq_cst)     (nemo_waiter_kick; the seq_cst
 *                                      store/load pair acts as the fence);
 *   R3  if s == SLEEPING and CAS(state, SLEEPING -> RUNNING):
 *           futex_wake(&state, 1)      -- "kick issued"
 *       else                           -- "kick avoided": W polls or runs,
 *                                         or another kicker won the CAS.
 *
 * WHY NO WAKE-UP IS LOST
 *
 * W2;W3 and R1;R2 are the store-buffering pattern: each side stores, then
 * loads what the other stored, all seq_cst.  In the single total order of
 * seq_cst operations one of the two stores comes first, so at least one
 * load sees the other's store:
 *   - W3 sees token == 1: W returns without sleeping.
 *   - R2 sees SLEEPING: R moves state to RUNNING and wakes the futex.  If
 *     W has not yet entered the kernel, W4's futex_wait compares state
 *     (now RUNNING) with SLEEPING and returns at once (EAGAIN); if W is
 *     asleep, the wake finds it, because the kernel checks the word and
 *     queues the sleeper under the same hash-bucket lock that FUTEX_WAKE
 *     takes.  Either way W reaches W5 and sees token == 1 (R1 precedes
 *     R2 which precedes the wake).
 * A failed CAS in R3 means state is no longer SLEEPING: W moved it (W5,
 * and then W checks token itself) or another kicker did (and wakes W).
 * POLLING never needs a kick: a poller loads token in a loop and sees R1
 * in bounded time (cache coherence), which is why W1's store is relaxed:
 * a kicker that reads a stale POLLING from before W2 cannot happen,
 * because W2 is an RMW ordered before W3 in seq_cst order, and R2 reads
 * a value no older than the last seq_cst write before it.
 *
 * models/slot.pml checks this handshake with spin: two concurrent
 * releasers, a stray kick landing on a reused slot, spurious wake-ups; a
 * broken variant (W3 before W2) is shown to lose a wake-up.
 *
 * THE RAW WORD
 *
 * The handshake does not need a slot: R2-R3 and W4 work on any 32-bit
 * word that holds a published state.  A layer whose sleeper cannot own a
 * slot - a place of a shared segment, whose state other processes read;
 * an MPI progress thread's doorbell; a descriptor's bridge - keeps its
 * state in such a word and kicks and sleeps through nemo__word_kick and
 * nemo__word_sleep (waiter_internal.h), with shared futex flags where
 * the word is in shared memory.  So the kick is written once, here, and
 * claim() below is the slot's case of it.
 *
 * SHARED WORD
 *
 * A slot queued on a nemo_cond sleeps on the condvar's word `bseq`, with
 * its own bit (FUTEX_WAIT_BITSET), instead of on `state`, so that a
 * broadcast can wake every sleeper with one FUTEX_WAKE.  (Sleeping on both
 * words with futex_waitv was measured and rejected: each woken waiter must
 * then also unqueue its second entry, and 8 waiters on one CPU reached the
 * last one 3.5-9% later than glibc; on bseq alone, 1-10% sooner.)
 *   B1  seen := load(bseq, seq_cst)                 -- before W2
 *   B2  futex_wait_bitset(bseq, seen, bit)          -- instead of W4
 * and a kick, after its CAS on state succeeded (R3):
 *   K1  read the slot's bseq and bit;  K2  fetch_add(bseq, 1, seq_cst);
 *   K3  futex_wake_bitset(bseq, all, bit).
 * A broadcast releases all tokens, then K2 and a FUTEX_WAKE of everyone.
 * Why no wake-up is lost: W2;W3 and R1;R2 still decide as above.  If the
 * kicker saw SLEEPING, its bump K2 comes after R2, R2 after W2, and W2
 * after B1: so B2 compares bseq against a value read before the bump -
 * either the bump has happened (the kernel returns at once) or the slot
 * sleeps on bseq before it, and K3 finds it by its bit.  Other sleepers on
 * bseq that share the bit, or that were about to sleep, wake spuriously
 * and go back (W5).  K1 comes after the CAS on purpose: read before, a
 * slot that meanwhile queued itself on another condvar would be marked
 * RUNNING by the CAS but woken on the old word - and the real releaser,
 * seeing RUNNING, would not wake it.  After the CAS the slot's bseq is
 * that of the wait that was SLEEPING, unless the slot has already left
 * that wait on its own, awake.  models/slot.pml -DSHARED checks this.
 * nemo__waiter_kick_many does R2, R3 and K1 for many slots, then K2 and
 * K3 once per shared word with the OR of the bits: one FUTEX_WAKE for a
 * whole broadcast (each slot's K2 still follows its own CAS).  Places of
 * a domain sleep on the domain's word this way (src/messaging/placewait.c).
 *
 * VISIBILITY
 *
 * Everything R wrote before R1 (a message, a broadcast's tree links) is
 * visible to W once W has loaded token == 1 with acquire or seq_cst.
 *
 * LIFETIME
 *
 * A releaser may still be inside R2/R3 after W has returned and reused its
 * slot for a new wait.  The late CAS/futex_wake can then only wake the new
 * wait spuriously (W5 sends it back to sleep).  Slots are therefore never
 * freed: an exiting thread's slot goes back to a pool for the next thread.
 */
#define _GNU_SOURCE
#include "slot.h"

#include "../platform/fail.h"
#include "../platform/invariant.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

_Atomic uint32_t nemo__fork_gen;
#if defined(__SANITIZE_THREAD__)
_Atomic uint32_t nemo__fence_word;
#endif

/* ----------------------------------------------------------------- pool */

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static nemo_waiter *pool_all;         /* every slot ever made */
static nemo_waiter *pool_free;        /* slots of exited threads */
static pthread_key_t pool_key;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static __thread nemo_waiter *tls_self __attribute__((tls_model("initial-exec")));

static void slot_exit(void *p)
{
	nemo_waiter *w = p;
	pthread_mutex_lock(&pool_lock);
	w->in_use = false;
	w->free_next = pool_free;
	pool_free = w;
	pthread_mutex_unlock(&pool_lock);
	tls_self = NULL;
	nemo__wait_bind(NULL);
}

static void after_fork_child(void)
{
	/* Only the forking thread survives: the pool lock may have been held
	 * by a thread that is gone. */
	pthread_mutex_init(&pool_lock, NULL);
	atomic_fetch_add_explicit(&nemo__fork_gen, 1, memory_order_relaxed);
}

static void pool_init(void)
{
	pthread_key_create(&pool_key, slot_exit);
	pthread_atfork(NULL, NULL, after_fork_child);
}

static nemo_waiter *slot_new(void)
{
	pthread_once(&pool_once, pool_init);
	pthread_mutex_lock(&pool_lock);
	nemo_waiter *w = pool_free;
	if (w) {
		pool_free = w->free_next;
	} else {
		w = aligned_alloc(NEMO__CACHELINE, NEMO__LINES(sizeof *w));
		if (w) {
			memset(w, 0, sizeof *w);
			w->bbit = 1u << (((uintptr_t)w / NEMO__CACHELINE) % 32);
			w->all_next = pool_all;
			pool_all = w;
		}
	}
	if (w) {
		w->in_use = true;
		atomic_store_explicit(&w->bword, NULL, memory_order_relaxed);
		atomic_store_explicit(&w->state, NEMO_WAITER_RUNNING, memory_order_relaxed);
	}
	pthread_mutex_unlock(&pool_lock);
	if (w)
		pthread_setspecific(pool_key, w);
	else
		nemo__fail(ENOMEM, "nemo_waiter_self", "cannot allocate the calling thread's slot "
			   "(%zu bytes)", (size_t)NEMO__LINES(sizeof *w));
	return w;
}

nemo_waiter *nemo_waiter_self(void)
{
	nemo_waiter *w = tls_self;
	if (__builtin_expect(w != NULL, 1))
		return w;
	w = tls_self = slot_new();
	if (w)
		nemo__wait_bind(&w->hist);   /* the thread's history starts afresh */
	return w;
}

nemo_waiter_state nemo_waiter_get_state(const nemo_waiter *w)
{
	return w ? (nemo_waiter_state)atomic_load_explicit(&w->state, memory_order_relaxed)
		 : NEMO_WAITER_RUNNING;
}

/* ----------------------------------------------------------- kick, release */

int nemo_waiter_arm(nemo_waiter *w)
{
	if (!w)
		return NEMO__FAIL(EINVAL, "w is NULL");
	atomic_store_explicit(&w->token, 0, memory_order_relaxed);
	atomic_store_explicit(&w->rel_cpu, -1, memory_order_relaxed);
	return 0;
}

void nemo__count_kick(bool issued)
{
	nemo_waiter *me = nemo_waiter_self();
	if (!me)
		return;
	if (issued)
		NEMO__COUNT(me, kicks_issued);
	else
		NEMO__COUNT(me, kicks_avoided);
}

/* R2 and R3 of the essay: if w sleeps, move it to RUNNING (only one
 * kicker's CAS wins) and return true; the caller then wakes it. */
/* R2 and R3's CAS on a raw word (THE RAW WORD): SLEEPING or `also` ->
 * RUNNING. */
static bool word_claim(_Atomic uint32_t *word, uint32_t also)
{
	uint32_t s = atomic_load_explicit(word, memory_order_seq_cst);                 /* R2 */
	return (s == NEMO_WAITER_SLEEPING || s == also) &&
	       atomic_compare_exchange_strong_explicit(word, &s, NEMO_WAITER_RUNNING,
						       memory_order_seq_cst, memory_order_relaxed);  /* R3 */
}

bool nemo__word_kick(_Atomic uint32_t *word, uint32_t also, int flags)
{
	if (!word_claim(word, also))
		return false;
	nemo_futex_wake((uint32_t *)word, 1, flags, NULL);
	return true;
}

void nemo__word_wake(_Atomic uint32_t *word, int n, int flags)
{
	nemo_futex_wake((uint32_t *)word, n, flags, NULL);
}

int nemo__word_sleep(_Atomic uint32_t *word, uint32_t val, const struct timespec *rel, int flags)
{
	int rc = nemo_futex_wait((uint32_t *)word, val, rel, flags);
	return rc == EAGAIN ? 0 : rc;
}

static bool claim(nemo_waiter *w)
{
	bool won = word_claim(&w->state, NEMO_WAITER_SLEEPING);
	nemo__count_kick(won);
	return won;
}

/* K2 and K3 for a shared word: one bump, one wake of the given bits. */
static void wake_shared(_Atomic uint32_t *bw, uint32_t bits)
{
	atomic_fetch_add_explicit(bw, 1, memory_order_seq_cst);                    /* K2 */
	nemo_futex_wake_bitset((uint32_t *)bw, INT_MAX, bits, NEMO_FUTEX_PRIVATE, NULL); /* K3 */
}

void nemo__kick_done(uint64_t stamp)
{
	nemo__learn_kick_cost(nemo_ticks_to_ns((int64_t)(nemo_ticks() - stamp)));
}

/* R2, R3 and the wake (K1-K3 for a slot on a shared word).  The slot is
 * stamped before the wake, so that its owner learns the wake-up latency
 * (policy.c, THE COST OF BLOCKING); the stamp is not part of the
 * handshake (relaxed, and read only after the owner was woken).
 * Returns true if it made a FUTEX_WAKE. */
static bool kick(nemo_waiter *w)
{
	if (!claim(w))
		return false;
	uint64_t t = nemo__kick_stamp(&w->kicked_at);
	_Atomic uint32_t *bw = atomic_load_explicit(&w->bword, memory_order_relaxed); /* K1 */
	if (bw)
		wake_shared(bw, w->bbit);
	else
		nemo_futex_wake((uint32_t *)&w->state, 1, NEMO_FUTEX_PRIVATE, NULL);
	nemo__kick_done(t);
	return true;
}

int nemo_waiter_kick(nemo_waiter *w)
{
	if (!w)
		return NEMO__FAIL(EINVAL, "w is NULL");
	/* The caller's earlier stores must be ordered before our read of
	 * state (R1 -> R2 of the essay, for a caller-made condition). */
	NEMO__FENCE();
	kick(w);
	return 0;
}

bool nemo__waiter_kick_issued(nemo_waiter *w)
{
	NEMO__FENCE();
	return kick(w);
}

size_t nemo__waiter_kick_many(nemo_waiter *const *ws, size_t n)
{
	enum { MAXW = 4 };
	_Atomic uint32_t *words[MAXW];
	uint32_t bits[MAXW];
	int nw = 0;
	size_t woken = 0;
	NEMO__FENCE();
	for (size_t i = 0; i < n; i++) {
		nemo_waiter *w = ws[i];
		if (!claim(w))
			continue;
		woken++;
		nemo__kick_stamp(&w->kicked_at);
		_Atomic uint32_t *bw = atomic_load_explicit(&w->bword, memory_order_relaxed); /* K1 */
		int k = 0;
		while (k < nw && words[k] != bw)
			k++;
		if (!bw || k == MAXW) {  /* its own word, or too many words: now */
			if (bw)
				wake_shared(bw, w->bbit);
			else
				nemo_futex_wake((uint32_t *)&w->state, 1, NEMO_FUTEX_PRIVATE, NULL);
			continue;
		}
		if (k == nw) {
			words[nw] = bw;
			bits[nw++] = 0;
		}
		bits[k] |= w->bbit;
	}
	/* K2, K3 once per word, after every CAS: each slot's bump still
	 * follows its own CAS, which is all the SHARED WORD handshake asks. */
	for (int k = 0; k < nw; k++)
		wake_shared(words[k], bits[k]);
	return woken;
}

void nemo__waiter_release_only(nemo_waiter *w, int cpu)
{
	/* The releaser's CPU first (relaxed): the owner reads it after it
	 * saw the token (wait.c, THE HISTORY). */
	atomic_store_explicit(&w->rel_cpu, cpu, memory_order_relaxed);
	atomic_store_explicit(&w->token, 1, memory_order_seq_cst);   /* R1 */
}

int nemo_waiter_release(nemo_waiter *w)
{
	if (!w)
		return NEMO__FAIL(EINVAL, "w is NULL");
	nemo__waiter_release_only(w, sched_getcpu());                /* R1 */
	kick(w);                                                     /* R2, R3 */
	return 0;
}

void nemo__waiter_await_release(nemo_waiter *w)
{
	while (atomic_load_explicit(&w->token, memory_order_acquire) != 1)
		nemo_cpu_relax();
}

void nemo__slot_share(nemo_waiter *w, _Atomic uint32_t *word)
{
	atomic_store_explicit(&w->bword, word, memory_order_relaxed);
}

/* ------------------------------------------------------------ slot waits */

static bool slot_try_take(void *arg)
{
	nemo_waiter *w = arg;
	return atomic_load_explicit(&w->token, memory_order_acquire) == 1;
}

/* ------------------------------------------------------- the handshake */

/*
 * THE HANDSHAKE, shared by every kind of waiter (waiter_internal.h): W1
 * polling; W2 exchange(state, SLEEPING, seq_cst) after B1, the read of a
 * shared word to sleep on; W3 the waiter's own re-check of its condition
 * (seq_cst loads: the token of a slot, the hint words of a place...),
 * against a kicker's store-then-load of the condition and the state
 * (WHY NO WAKE-UP IS LOST above; drain.c, WHY NO WAKE-UP IS LOST); W4
 * futex_wait; W5 RUNNING; W6 leaving.  Written once here: a waiter of
 * another layer brings only its condition.
 */
void nemo__slot_polling(nemo_waiter *w)
{
	atomic_store_explicit(&w->state, NEMO_WAITER_POLLING, memory_order_relaxed);     /* W1 */
}

bool nemo__slot_sleep_begin(nemo_waiter *w, _Atomic uint32_t *shared, bool (*pending)(void *), void *arg,
			    uint32_t **word, uint32_t *val, uint32_t *bits)
{
	atomic_store_explicit(&w->bword, shared, memory_order_relaxed);
	uint32_t seen = shared ? atomic_load_explicit(shared, memory_order_seq_cst) : 0;  /* B1 */
	uint32_t was = atomic_exchange_explicit(&w->state, NEMO_WAITER_SLEEPING, memory_order_seq_cst); /* W2 */
	(void)was;
	NEMO__INVARIANT(was != NEMO_WAITER_SLEEPING, "only its owner puts a slot to sleep, and it was awake");
	if (pending(arg)) {                                                              /* W3 */
		atomic_store_explicit(&w->state, NEMO_WAITER_RUNNING, memory_order_relaxed);
		*word = (uint32_t *)&w->state;      /* not SLEEPING now: a wait returns at once */
		*val = NEMO_WAITER_SLEEPING;
		return true;
	}
	*word = (uint32_t *)&w->state;
	*val = NEMO_WAITER_SLEEPING;
	if (shared) {                                                                    /* B2 */
		*word = (uint32_t *)shared;
		*val = seen;
		*bits = w->bbit;
	}
	return false;
}

void nemo__slot_awake(nemo_waiter *w)
{
	atomic_store_explicit(&w->state, NEMO_WAITER_RUNNING, memory_order_relaxed);    /* W5 */
}

void nemo__slot_running(nemo_waiter *w)
{
	atomic_store_explicit(&w->bword, NULL, memory_order_relaxed);
	atomic_store_explicit(&w->state, NEMO_WAITER_RUNNING, memory_order_seq_cst);    /* W6 */
}

uint32_t nemo__slot_state(nemo_waiter *w)
{
	return atomic_load_explicit(&w->state, memory_order_seq_cst);
}

static bool token_set(void *arg)
{
	nemo_waiter *w = arg;
	return atomic_load_explicit(&w->token, memory_order_seq_cst) == 1;
}

static bool slot_sleep_begin(void *arg, uint32_t **word, uint32_t *val, uint32_t *bits)
{
	nemo_waiter *w = arg;
	/* Queued on a condvar, the slot sleeps on the condvar's shared word
	 * (SHARED WORD above), which the queue put in bword. */
	return nemo__slot_sleep_begin(w, atomic_load_explicit(&w->bword, memory_order_relaxed), token_set, w,
				      word, val, bits);
}

static void slot_sleep_end(void *arg)
{
	nemo__slot_awake(arg);
}

uint64_t nemo__slot_kicked_at(nemo_waiter *w)
{
	return atomic_load_explicit(&w->kicked_at, memory_order_relaxed);
}

static uint64_t slot_kicked_at(void *arg)
{
	return nemo__slot_kicked_at(arg);
}

static const nemo__wait_ops slot_ops = {
	.try_take = slot_try_take,
	.sleep_begin = slot_sleep_begin,
	.sleep_end = slot_sleep_end,
	.kicked_at = slot_kicked_at,
	.futex_flags = NEMO_FUTEX_PRIVATE,
};

int nemo__waiter_wait_flags(nemo_waiter *w, const nemo_wait_policy *p, clockid_t clock,
			    const struct timespec *abstime, unsigned flags)
{
	int cpu = sched_getcpu();
	uint64_t slept = nemo__wait_sleeps();
	atomic_store_explicit(&w->state, NEMO_WAITER_POLLING, memory_order_relaxed);     /* W1 */
	int rc = nemo__wait_loop(&slot_ops, w, p, clock, abstime, flags);
	atomic_store_explicit(&w->state, NEMO_WAITER_RUNNING, memory_order_relaxed);
	if (rc == 0)
		nemo__learn_releaser(atomic_load_explicit(&w->rel_cpu, memory_order_relaxed), cpu,
				     nemo__wait_sleeps() != slept);
	return rc;
}

int nemo_waiter_wait(nemo_waiter *w, const nemo_wait_policy *p, clockid_t clock,
		     const struct timespec *abstime)
{
	if (!w)
		return NEMO__FAIL(EINVAL, "w is NULL");
	int err = nemo__check_deadline(__func__, clock, abstime);
	if (err)
		return err;
	int rc = nemo__waiter_wait_flags(w, p, clock, abstime, 0);
	/* The loop's only EINVAL: p's kind, found when the wait did not take
	 * at once (as before; a released slot returns 0 whatever p says). */
	if (__builtin_expect(rc == EINVAL, 0))
		return NEMO__FAIL(EINVAL, "policy kind %d is not a nemo_wait_kind", p ? (int)p->kind : 0);
	return rc;
}

/* ------------------------------------------------- foreign primitives */

int nemo_wait_foreign(bool (*try_take)(void *arg),
		      int (*block)(void *arg, clockid_t clock, const struct timespec *abstime),
		      void *arg, const nemo_wait_policy *p, clockid_t clock,
		      const struct timespec *abstime, unsigned flags)
{
	if (!try_take || !block)
		return NEMO__FAIL(EINVAL, "%s is NULL", !try_take ? "try_take" : "block");
	if (flags & ~(unsigned)(NEMO_WAIT_FOREIGN_EINTR | NEMO_WAIT_FOREIGN_CANCEL))
		return NEMO__FAIL(EINVAL, "flags 0x%x has bits that are not NEMO_WAIT_FOREIGN_*", flags);
	nemo_wait_policy pol;
	int err = nemo_wait_policy_resolve(p, &pol);     /* names a bad kind */
	if (err)
		return err;
	err = nemo__check_deadline(__func__, clock, abstime);
	if (err)
		return err;
	/* The thread's slot carries its wait history (wait.c, THE HISTORY):
	 * without one the adaptive policy polls its plain budget. */
	(void)nemo_waiter_self();
	nemo__wait_ops ops = { .try_take = try_take, .block = block };
	unsigned f = ((flags & NEMO_WAIT_FOREIGN_EINTR) ? NEMO__WAIT_EINTR : 0) |
		     ((flags & NEMO_WAIT_FOREIGN_CANCEL) ? NEMO__WAIT_CANCELLABLE : 0);
	if (flags & NEMO_WAIT_FOREIGN_CANCEL)
		pthread_testcancel();
	return nemo__wait_loop(&ops, arg, &pol, clock, abstime, f);
}

/* -------------------------------------------------------------- counters */

int nemo_waiter_get_counters(nemo_waiter_counters *out)
{
	if (!out)
		return NEMO__FAIL(EINVAL, "out is NULL");
	memset(out, 0, sizeof *out);
	pthread_once(&pool_once, pool_init);
	pthread_mutex_lock(&pool_lock);
	for (nemo_waiter *w = pool_all; w; w = w->all_next) {
		out->kicks_issued += atomic_load_explicit(&w->kicks_issued, memory_order_relaxed);
		out->kicks_avoided += atomic_load_explicit(&w->kicks_avoided, memory_order_relaxed);
		nemo__wait_hist_add(&w->hist, out);
	}
	pthread_mutex_unlock(&pool_lock);
	return 0;
}
