/*
 * event.c - nemo_event: an event in one futex word.
 *
 * STATE
 *
 *   word   bit 0     SET: the event is set;
 *          bits 1-31 SLEEPERS: the number of waiters in (or entering) the
 *                    kernel, in units of 2.
 *   flags  manual-reset bit, the waiters' policy kind (bits 1-3) and a
 *          magic number (an uninitialised or destroyed event is refused
 *          with EINVAL, not misused).
 *   policy_ns  the HYBRID budget.
 *   kick_lo    the low 32 bits of the tick count at the last post that
 *          issued a FUTEX_WAKE (relaxed; not part of the protocol): a
 *          woken sleeper learns the wake-up latency from it (policy.c,
 *          THE COST OF BLOCKING).  32 bits of ticks span over a second;
 *          a sample that old is clamped anyway.
 *
 * Every change to `word` is an atomic RMW, so all of them fall into one
 * modification order; that order is the whole argument below.
 *
 * POST
 *   EP1 old := fetch_or(word, SET, seq_cst)
 *   EP2 if SLEEPERS(old) > 0: stamp kick_lo; futex_wake(word, auto ? 1 : all)
 *                                                                [kick issued]
 *       else nothing                                             [kick avoided]
 *
 * WAIT (through nemo__wait_loop, waiter layer)
 *   try_take      auto:   CAS(word: v|SET -> v) (consume);
 *                 manual: load(word, acquire) & SET.
 *   poll          the same, for the policy's budget.
 *   sleep_begin   ES1 v := fetch_add(word, 2, seq_cst) + 2   (count ourselves)
 *                 ES2 if v & SET: undo our count and take the event in one
 *                    CAS (auto: v -> (v-2) & ~SET; manual: v -> v-2); done.
 *                 ES3 else futex_wait(word, v)
 *   sleep_end     ES4 fetch_sub(word, 2)
 *
 * WHY NO POST IS LOST
 * ES1 and EP1 are RMWs on the same word.  If ES1 comes first in its
 * modification order, EP1 reads SLEEPERS >= 1 and wakes: a waiter that has
 * not yet slept finds word != v at ES3 (EP1 changed it) and returns at once;
 * one that sleeps is woken (futex compares and queues under the bucket
 * lock that FUTEX_WAKE takes).  If EP1 comes first, ES1 reads SET and the
 * waiter takes the event at ES2 without sleeping.  Any other change to the
 * word between ES1 and ES3 (another sleeper, a reset) also makes futex_wait
 * return at once; the loop then re-checks.  A woken auto-reset waiter may
 * find the event already taken by a poller; it sleeps again - the post
 * was consumed by someone, as auto-reset promises.
 *
 * models/event.pml checks this with spin (two waiters, two posters,
 * spurious wake-ups); it also shows why ES2's CAS must reload v on
 * failure, and that a post made of a load and a store loses posts.
 *
 * COST
 * A post to a polling waiter is one RMW on the line the waiter watches:
 * no syscall, no second line.  A waiter that never sleeps writes nothing
 * but its consuming CAS.
 */
#define _GNU_SOURCE
#include <nemo/event.h>

#include "../waiter/waiter_internal.h"

#include "../platform/fail.h"
#include "../platform/invariant.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#define EV_SET 1u
#define EV_SLEEPER 2u
#define EV_MAGIC 0x6e657600u          /* "nev\0" */
#define EV_MAGIC_MASK 0xffffff00u
#define EV_MANUAL 1u
#define EV_KIND_SHIFT 1
#define EV_KIND_MASK (7u << EV_KIND_SHIFT)

struct event_impl {
	_Atomic uint32_t word;
	uint32_t flags;
	uint32_t policy_ns;
	_Atomic uint32_t kick_lo;
};

_Static_assert(sizeof(struct event_impl) <= sizeof(nemo_event), "nemo_event too small");

static struct event_impl *impl(nemo_event *e)
{
	struct event_impl *x = (struct event_impl *)(void *)e;
	if (!e || (x->flags & EV_MAGIC_MASK) != EV_MAGIC)
		return NULL;
	return x;
}

/* The refusal of an e that impl() did not accept, under fn's name. */
__attribute__((cold, noinline)) static int not_an_event(const char *fn, const nemo_event *e)
{
	if (!e)
		return nemo__fail(EINVAL, fn, "e is NULL");
	return nemo__fail(EINVAL, fn, "e is not an initialised nemo_event (never initialised, "
			  "destroyed, or overwritten)");
}

static bool manual(const struct event_impl *x)
{
	return x->flags & EV_MANUAL;
}

int nemo_event_init(nemo_event *e, unsigned flags, const nemo_wait_policy *policy)
{
	unsigned unknown = flags & ~(unsigned)(NEMO_EVENT_MANUAL_RESET | NEMO_EVENT_INITIALLY_SET);
	if (!e)
		return NEMO__FAIL(EINVAL, "e is NULL");
	if (unknown)
		return NEMO__FAIL(EINVAL, "flags 0x%x: unknown bits 0x%x (NEMO_EVENT_MANUAL_RESET, "
				  "NEMO_EVENT_INITIALLY_SET)", flags, unknown);
	if (policy && (policy->kind < NEMO_WAIT_DEFAULT || policy->kind > NEMO_WAIT_ADAPTIVE))
		return NEMO__FAIL(EINVAL, "policy kind %d is not a nemo_wait_kind", (int)policy->kind);
	struct event_impl *x = (struct event_impl *)(void *)e;
	memset(e, 0, sizeof *e);
	atomic_init(&x->word, (flags & NEMO_EVENT_INITIALLY_SET) ? EV_SET : 0);
	uint32_t kind = policy ? (uint32_t)policy->kind : NEMO_WAIT_DEFAULT;
	x->flags = EV_MAGIC | ((flags & NEMO_EVENT_MANUAL_RESET) ? EV_MANUAL : 0) |
		   (kind << EV_KIND_SHIFT);
	x->policy_ns = policy ? policy->spin_ns : 0;
	return 0;
}

int nemo_event_destroy(nemo_event *e)
{
	struct event_impl *x = impl(e);
	if (!x)
		return not_an_event(__func__, e);
	uint32_t v = atomic_load_explicit(&x->word, memory_order_acquire);
	if (v >= EV_SLEEPER)
		return NEMO__FAIL(EBUSY, "%u waiter%s on the event (it stays usable)", v / EV_SLEEPER,
				  v / EV_SLEEPER == 1 ? " sleeps" : "s sleep");
	x->flags = 0;
	return 0;
}

int nemo_event_post(nemo_event *e)
{
	struct event_impl *x = impl(e);
	if (!x)
		return not_an_event(__func__, e);
	uint32_t old = atomic_fetch_or_explicit(&x->word, EV_SET, memory_order_seq_cst);  /* EP1 */
	if (old >= EV_SLEEPER) {                                                         /* EP2 */
		uint64_t t = nemo_ticks();
		atomic_store_explicit(&x->kick_lo, (uint32_t)t, memory_order_relaxed);
		nemo_futex_wake((uint32_t *)&x->word, manual(x) ? INT_MAX : 1, NEMO_FUTEX_PRIVATE, NULL);
		nemo__kick_done(t);
		nemo__count_kick(true);
	} else {
		nemo__count_kick(false);
	}
	return 0;
}

static bool ev_try_take(void *arg)
{
	struct event_impl *x = arg;
	uint32_t v = atomic_load_explicit(&x->word, memory_order_acquire);
	if (!(v & EV_SET))
		return false;
	if (manual(x))
		return true;
	while (v & EV_SET) {
		if (atomic_compare_exchange_weak_explicit(&x->word, &v, v & ~EV_SET,
							  memory_order_acquire, memory_order_acquire))
			return true;
	}
	return false;
}

static bool ev_sleep_begin(void *arg, uint32_t **word, uint32_t *val, uint32_t *bits)
{
	(void)bits;
	struct event_impl *x = arg;
	uint32_t v = atomic_fetch_add_explicit(&x->word, EV_SLEEPER, memory_order_seq_cst) + EV_SLEEPER; /* ES1 */
	NEMO__INVARIANT(v >= EV_SLEEPER, "the sleeper count wrapped (more than 2^31 sleepers?)");
	while (v & EV_SET) {                                                                           /* ES2 */
		uint32_t next = v - EV_SLEEPER;
		if (!manual(x))
			next &= ~EV_SET;
		if (atomic_compare_exchange_weak_explicit(&x->word, &v, next,
							  memory_order_acquire, memory_order_relaxed))
			return true;
	}
	*word = (uint32_t *)&x->word;                                                                  /* ES3 */
	*val = v;
	return false;
}

static void ev_sleep_end(void *arg)
{
	struct event_impl *x = arg;
	uint32_t old = atomic_fetch_sub_explicit(&x->word, EV_SLEEPER, memory_order_relaxed);         /* ES4 */
	(void)old;
	NEMO__INVARIANT(old >= EV_SLEEPER, "a sleeper leaves that did not count itself (ES1)");
}

/* The full stamp of the last kick, rebuilt from its low 32 bits: the
 * newest tick count at or before now with those bits. */
static uint64_t ev_kicked_at(void *arg)
{
	struct event_impl *x = arg;
	uint64_t now = nemo_ticks();
	uint32_t lo = atomic_load_explicit(&x->kick_lo, memory_order_relaxed);
	uint64_t t = (now & ~(uint64_t)UINT32_MAX) | lo;
	return t > now ? t - ((uint64_t)1 << 32) : t;
}

static const nemo__wait_ops event_ops = {
	.try_take = ev_try_take,
	.sleep_begin = ev_sleep_begin,
	.sleep_end = ev_sleep_end,
	.kicked_at = ev_kicked_at,
	.futex_flags = NEMO_FUTEX_PRIVATE,
};

/* nemo_event_timedwait, refusing under fn's name (the call the user made). */
static int event_wait(const char *fn, nemo_event *e, clockid_t clock, const struct timespec *abstime)
{
	struct event_impl *x = impl(e);
	if (!x)
		return not_an_event(fn, e);
	int err = nemo__check_deadline(fn, clock, abstime);
	if (err)
		return err;
	nemo_wait_policy p = { (nemo_wait_kind)((x->flags & EV_KIND_MASK) >> EV_KIND_SHIFT), x->policy_ns };
	/* The loop keeps this thread's history in its slot (an allocation
	 * failure only loses the history: the wait goes on). */
	(void)nemo_waiter_self();
	/* The kind was checked by init: the loop refuses nothing here. */
	return nemo__wait_loop(&event_ops, x, &p, clock, abstime, 0);
}

int nemo_event_timedwait(nemo_event *e, clockid_t clock, const struct timespec *abstime)
{
	return event_wait(__func__, e, clock, abstime);
}

int nemo_event_wait(nemo_event *e)
{
	return event_wait(__func__, e, CLOCK_MONOTONIC, NULL);
}

int nemo_event_trywait(nemo_event *e)
{
	struct event_impl *x = impl(e);
	if (!x)
		return not_an_event(__func__, e);
	return ev_try_take(x) ? 0 : EAGAIN;     /* not set: an outcome, no text */
}

int nemo_event_reset(nemo_event *e)
{
	struct event_impl *x = impl(e);
	if (!x)
		return not_an_event(__func__, e);
	atomic_fetch_and_explicit(&x->word, ~EV_SET, memory_order_release);
	return 0;
}
