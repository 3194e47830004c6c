/*
 * mcast.c - acknowledged multicast to dynamic groups (nemo/mcast.h) over
 * static topologies, on the messaging layer's active messages: the
 * protocol (roles, sends, completion counting, kept and undelivered role
 * messages, the multicast calls).  The topologies it walks are topo.c's
 * brackets (THE TOPOLOGY there); groups and membership are group.c's;
 * the service places' threads are service.c's.
 *
 * THE ROLES (one multicast m; `ex` is the place executing, `self`)
 *
 *   enter(b)      [at b's head] (Diamond, Flat: run the function if
 *                 self is a member), dispatch_enter(c) for each child c,
 *                 (Tree: run it now), arrive(b).
 *   arrive(b)     fetch_sub(cnt[b], 1, acq_rel); the one that takes it
 *                 to 0 does dispatch_complete(b).  cnt[b] starts at
 *                 children + 1 (the head's own arrival).  This is SmAck:
 *                 a gather learns of its predecessors through shared
 *                 memory, and hears one message, from the last.
 *   complete(b)   [at b's gather] run the function at b's tail (if a
 *                 member), then arrive(parent(b)); at the root: finish.
 *   finish        the source's `done` := 1, by the source's own place (a
 *                 DONE message, or its own store when it runs the root's
 *                 gather itself).
 * dispatch_enter(c) and dispatch_complete(b) decide where a role runs: at
 * the node's place, through an active message (ENTER c / COMPLETE b),
 * unless it is the executing place itself, or (Help, Skip) the node's
 * place is not a member: then the executing place does the role inline
 * (a support gather is always combined inline under Help: tree
 * combining); and (Skip) a child bracket whose member count is 0 is not
 * entered at all: arrive(b) on its behalf.  A send to a place that left
 * its domain also falls back to inline.
 *
 * SENDS THAT RETURNED 0.  A role's message is sent as a handler sends
 * (the source's dispatch too): it never waits, and what does not fit is
 * kept in the sending place's overflow (nemo/domain.h), past
 * overflow_max if need be (nemo__am_send_kept: a member needs the
 * message to run, and a multicast sends at most one per bracket).  A
 * kept message is delivered later, or - its place left first - dropped,
 * and then reported to this layer's undelivered callback on the sending
 * place (on_undelivered), which does the role inline, as a send that
 * failed at once does.  So every role is done exactly once whatever
 * happens to its message, and the multicast completes.  A send that
 * fails for another reason (the overflow cannot grow: ENOMEM) also falls
 * back to inline so that the multicast completes, but the place it was
 * for may be a member that never runs the function: the multicast
 * records the error and returns it (nemo_mcast_wait), never 0.
 *
 * WHY EXACTLY ONCE, AND WHY IT COMPLETES
 *
 * Each bracket is entered once: only its parent's enter dispatches it (or
 * skips it, which is arriving on its behalf), and the root only by the
 * source.  Each place is the head or tail of one bracket, and the function
 * runs only when the role executes at that very place and the place is a
 * member then (a role done inline for another place never runs it; the
 * membership test reads the flag, then the id it was added with).  So a
 * place runs it at most once; a member throughout is never helped (the
 * membership test at dispatch sees it), never skipped (its brackets'
 * counts stay >= 1 while it is a member), and its messages reach it (it
 * is in the domain: else it could not have been added and not removed -
 * a place that left is skipped, as the header says): it runs exactly
 * once.  Completion: every bracket's counter receives exactly children + 1
 * arrivals (one per child, whether it ran, was helped or was skipped, and
 * the head's), so exactly one arrival takes it to 0 and completes it; the
 * root's completion comes after every other's.  The acq_rel decrements
 * chain every run of the function before the last arrival at the root,
 * which happens before DONE is sent, which the source's place handles
 * before `done` reads 1 (the messaging layer's release/acquire).
 * models/mcast.pml checks the counting with spin (tests/check_models.sh):
 * every fate of a role message above, Tree and Diamond; it rejects a
 * dropped kept message left unreported, and sends counted instead of
 * runs.
 *
 * LIFETIME
 *
 * A multicast's state (`struct nemo_mcast`) is freed by the source after
 * it read done == 1.  Every other place's last access to it is its last
 * arrive (the fetch_sub that did not reach 0, or the chain to DONE), which
 * precedes the root's completion: nothing touches it after done.  A send
 * of COMPLETE or DONE may itself be what ends the multicast, so nothing of
 * it (nor of its group, which the user may then destroy) is touched after
 * such a send: send_op counts its message before it sends.  (The first
 * version counted after the send; test_mcast crashed at once.)  A
 * topology is reference-counted: the group holds one reference for the
 * current topology, every multicast one for the topology it started on;
 * a dynamic rebuild swaps in a new one and drops the group's reference to
 * the old, which goes when its last multicast ends.
 */
#define _GNU_SOURCE
#include "mcast_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------- the roles */

#define STAT(ex, f) NEMO__COUNT(&(ex)->m->g->stat[(ex)->self], f)

static void enter(struct ex *ex, uint32_t b);
static void complete(struct ex *ex, uint32_t b);

/* Run the function if idx is the executing place and a member (THE
 * ROLES: a role done inline for another place never runs it). */
static void run_at(struct ex *ex, int32_t idx)
{
	nemo_mcast_group *g = ex->m->g;
	if (g->service) {
		/* A service place runs the function for every member on its
		 * CPU, each at most once per multicast (a member moved to
		 * another CPU during it is not run twice). */
		int32_t s = idx >= 0 && (unsigned)idx == ex->self ? g->slot_of[idx] : -1;
		if (s < 0 || !atomic_load_explicit(&g->svc_members[s], memory_order_acquire))
			return;
		for (unsigned i = 0; i < g->P; i++) {
			if (atomic_load_explicit(&g->member_slot[i], memory_order_relaxed) != s || !is_member(g, i))
				continue;
			if (atomic_exchange_explicit(&g->last_run[i], ex->m->seq, memory_order_relaxed) == ex->m->seq)
				continue;
			ex->m->fn(atomic_load_explicit(&g->member_id[i], memory_order_relaxed), ex->m->arg, ex->m->ctx);
			STAT(ex, runs);
		}
		return;
	}
	if (idx < 0 || (unsigned)idx != ex->self || !is_member(g, (unsigned)idx) ||
	    atomic_load_explicit(&g->member_id[idx], memory_order_relaxed) != ex->self_id)
		return;
	ex->m->fn(ex->self_id, ex->m->arg, ex->m->ctx);
	STAT(ex, runs);
}

/* Send op for bracket b to the place at idx; false if it cannot reach it
 * (it left, or is not there): the caller does the role itself. */
static bool send_op(struct ex *ex, uint32_t op, uint32_t b, unsigned idx)
{
	nemo_mcast_group *g = ex->m->g;
	nemo_place_id to = !g->service && is_member(g, idx)
				   ? atomic_load_explicit(&g->member_id[idx], memory_order_relaxed)
				   : place_at(g, idx);
	if (to == NEMO_PLACE_NONE)
		return false;
	uint32_t w = op << OP_SHIFT | b;
	/* Counted first: a COMPLETE or DONE may end the multicast, and then
	 * neither m nor its group may be touched (LIFETIME). */
	struct mc_stat *st = &g->stat[ex->self];
	NEMO__COUNT(st, messages);
	struct nemo_mcast *m = ex->m;
	/* As a handler: never waits; kept, past overflow_max if need be. */
	int err = nemo__am_send_kept(nemo__place_self(), to, g->action, (uint64_t)(uintptr_t)m, &w, sizeof w);
	if (err) {
		atomic_store_explicit(&st->messages, atomic_load_explicit(&st->messages, memory_order_relaxed) - 1,
				      memory_order_relaxed);
		if (err != ESRCH) {
			/* Not a departure: the place may be a member that stays
			 * and now never runs fn.  Say so, and make the
			 * multicast say so (SENDS THAT RETURNED 0). */
			int zero = 0;
			atomic_compare_exchange_strong_explicit(&m->err, &zero, err, memory_order_relaxed,
								memory_order_relaxed);
			nemo__fail(err, "nemo_multicast", "a message to place %#llx failed: its part is done "
				   "by place index %u instead, and the multicast reports it", (unsigned long long)to,
				   ex->self);
		}
		return false;
	}
	return true;
}

static void finish(struct ex *ex)
{
	struct nemo_mcast *m = ex->m;
	if (ex->self_id == m->src || !send_op(ex, OP_DONE, 0, nemo_place_index(m->src)))
		__atomic_store_n(&m->done, 1, __ATOMIC_RELEASE);
	/* (A source that has left cannot be told: its handle is gone with it.) */
}

static void arrive(struct ex *ex, int32_t b)
{
	if (b < 0) {
		finish(ex);
		return;
	}
	if (atomic_fetch_sub_explicit(&ex->m->cnt[b], 1, memory_order_acq_rel) != 1)
		return;
	const struct mc_br *br = &ex->m->t->b[b];
	nemo_mcast_group *g = ex->m->g;
	int32_t at = br->tail >= 0 ? br->tail : br->host == HOST_SOURCE ? (int32_t)nemo_place_index(ex->m->src)
									: br->host;
	if (at < 0 || (unsigned)at == ex->self) {
		complete(ex, (uint32_t)b);
	} else if (g->mech != NEMO_MCAST_SMACK && (br->tail < 0 || !node_member(g, (unsigned)at))) {
		if (br->tail >= 0)
			STAT(ex, helped);
		complete(ex, (uint32_t)b);          /* Help: tree combining */
	} else if (!send_op(ex, OP_COMPLETE, (uint32_t)b, (unsigned)at)) {
		complete(ex, (uint32_t)b);
	}
}

static void dispatch_enter(struct ex *ex, uint32_t c)
{
	const struct mc_topo *t = ex->m->t;
	nemo_mcast_group *g = ex->m->g;
	int32_t h = t->b[c].head;
	if (h < 0 || (unsigned)h == ex->self) {
		enter(ex, c);
		return;
	}
	if (g->mech != NEMO_MCAST_SMACK && !node_member(g, (unsigned)h)) {
		if (g->mech == NEMO_MCAST_SKIP && !g->dynamic &&
		    atomic_load_explicit(&t->count[c], memory_order_relaxed) == 0) {
			STAT(ex, skipped);
			arrive(ex, t->b[c].parent);   /* the whole subgroup, at once */
			return;
		}
		STAT(ex, helped);
		enter(ex, c);
		return;
	}
	if (!send_op(ex, OP_ENTER, c, (unsigned)h))
		enter(ex, c);
}

static void enter(struct ex *ex, uint32_t b)
{
	const struct mc_topo *t = ex->m->t;
	const struct mc_br *br = &t->b[b];
	if (!t->fwd_first)
		run_at(ex, br->head);
	for (uint32_t i = 0; i < br->nkids; i++)
		dispatch_enter(ex, t->kids[br->kid0 + i]);
	if (t->fwd_first)
		run_at(ex, br->head);
	arrive(ex, (int32_t)b);
}

static void complete(struct ex *ex, uint32_t b)
{
	const struct mc_br *br = &ex->m->t->b[b];
	run_at(ex, br->tail);
	arrive(ex, br->parent);
}

/* Do the role a role message names, as the place `at` (OP_DONE: the
 * source is done, or - from an undelivered report - left: nobody waits,
 * but say it is done). */
static void run_role(const nemo_am_msg *msg, nemo_place_id at)
{
	struct nemo_mcast *m = (struct nemo_mcast *)(uintptr_t)msg->arg;
	uint32_t w;
	if (msg->len != sizeof w)
		return;
	memcpy(&w, msg->payload, sizeof w);
	struct ex ex = { m, nemo_place_index(at), at };
	switch (w >> OP_SHIFT) {
	case OP_ENTER:
		enter(&ex, w & BR_MASK);
		break;
	case OP_COMPLETE:
		complete(&ex, w & BR_MASK);
		break;
	case OP_DONE:
		__atomic_store_n(&m->done, 1, __ATOMIC_RELEASE);
		break;
	default:
		break;
	}
}

void nemo__mc_on_message(const nemo_am_msg *msg, void *ctx)
{
	(void)ctx;
	run_role(msg, msg->dest);
}

/* A kept message whose place left before it could be queued (SENDS THAT
 * RETURNED 0): do its role here, as send_op's callers do for a send that
 * failed at once.  Runs on the sending place, as a handler. */
void nemo__mc_on_undelivered(const nemo_am_msg *msg, int err, void *ctx)
{
	(void)err;
	(void)ctx;
	run_role(msg, msg->src);
}

/* ---------------------------------------------------------- multicasts */

static void mcast_release(struct nemo_mcast *m)
{
	nemo_mcast_group *g = m->g;
	nemo__mc_topo_put(m->t);
	free(m);
	atomic_fetch_add_explicit(&g->multicasts, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&g->in_flight, 1, memory_order_release);
}

static bool mcast_done(struct nemo_mcast *m)
{
	return __atomic_load_n(&m->done, __ATOMIC_ACQUIRE) != 0;
}

/* Release a completed multicast: 0, or the error it recorded (SENDS THAT
 * RETURNED 0) with its text for fn. */
static int mcast_finish(struct nemo_mcast *m, const char *fn)
{
	int err = atomic_load_explicit(&m->err, memory_order_relaxed);
	mcast_release(m);
	if (err)
		return nemo__fail(err, fn, "the multicast completed, but a message to a member could not be sent "
				  "or kept (%s): that member may not have run the function",
				  err == ENOMEM ? "out of memory" : "see NEMO_DEBUG=1");
	return 0;
}

static int mcast_start(nemo_mcast_group *g, nemo_mcast_fn fn, void *ctx, uint64_t arg, unsigned flags,
		       nemo_mcast **handle, struct nemo_mcast **out, const char *fname)
{
	if (!g || !fn)
		return nemo__fail(EINVAL, fname, "%s is NULL", g ? "fn" : "g");
	if (flags & ~(unsigned)NEMO_MCAST_ASYNC)
		return nemo__fail(EINVAL, fname, "flags 0x%x: unknown bits (NEMO_MCAST_ASYNC)", flags);
	if ((flags & NEMO_MCAST_ASYNC) && !handle)
		return nemo__fail(EINVAL, fname, "NEMO_MCAST_ASYNC without a handle");
	nemo_place *me = nemo__place_self();
	if (!me)
		return nemo__fail(ENOTCONN, fname, "the calling thread is not a place (nemo_place_join first)");
	if (nemo__place_domain(me) != g->d)
		return nemo__fail(EXDEV, fname, "the calling place belongs to another domain than the group");
	if (!(flags & NEMO_MCAST_ASYNC) && nemo__place_hdepth(me))
		return nemo__fail(EDEADLK, fname, "a multicast waits, and this is a handler (use NEMO_MCAST_ASYNC)");
	pthread_mutex_lock(&g->lock);
	struct mc_topo *t = atomic_load_explicit(&g->topo, memory_order_relaxed);
	atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
	pthread_mutex_unlock(&g->lock);
	size_t sz = sizeof(struct nemo_mcast) + (size_t)t->nb * sizeof(_Atomic uint32_t);
	struct nemo_mcast *m = aligned_alloc(NEMO__CACHELINE, NEMO__LINES(sz));
	if (!m) {
		nemo__mc_topo_put(t);
		return nemo__fail(ENOMEM, fname, "cannot allocate the multicast's state (%zu bytes)", sz);
	}
	atomic_fetch_add_explicit(&g->in_flight, 1, memory_order_relaxed);
	*m = (struct nemo_mcast){ .g = g, .t = t, .fn = fn, .ctx = ctx, .arg = arg,
				  .seq = atomic_fetch_add_explicit(&g->seq, 1, memory_order_relaxed) + 1,
				  .src = nemo_place_self(), .owner = pthread_self(), .done = 0 };
	for (uint32_t i = 0; i < t->nb; i++)
		atomic_init(&m->cnt[i], t->cnt0[i]);
	atomic_init(&m->err, 0);
	struct ex ex = { m, nemo_place_index(m->src), m->src };
	if (t->nb == 0)
		finish(&ex);        /* no member: done */
	else
		dispatch_enter(&ex, t->root);
	*out = m;
	return 0;
}

int nemo_multicast(nemo_mcast_group *g, nemo_mcast_fn fn, void *ctx, uint64_t arg, unsigned flags,
		   nemo_mcast **handle)
{
	struct nemo_mcast *m;
	int err = mcast_start(g, fn, ctx, arg, flags, handle, &m, __func__);
	if (err)
		return err;
	if (flags & NEMO_MCAST_ASYNC) {
		*handle = m;
		return 0;
	}
	while (!mcast_done(m))
		nemo_place_wait_for(&m->done, 0, NULL, NULL);
	return mcast_finish(m, __func__);
}

int nemo_multicast_timed(nemo_mcast_group *g, nemo_mcast_fn fn, void *ctx, uint64_t arg, unsigned flags,
			 const struct timespec *abstime, nemo_mcast **handle)
{
	if (!handle)
		return NEMO__FAIL(EINVAL, "handle is NULL: a multicast whose deadline passes goes on, and is "
				  "finished through it");
	*handle = NULL;
	if (flags & NEMO_MCAST_ASYNC)
		return NEMO__FAIL(EINVAL, "NEMO_MCAST_ASYNC: an asynchronous multicast has no wait to bound "
				  "(nemo_mcast_wait takes a deadline)");
	int err = nemo__check_deadline(__func__, CLOCK_MONOTONIC, abstime);
	if (err)
		return err;
	struct nemo_mcast *m;
	if ((err = mcast_start(g, fn, ctx, arg, flags, handle, &m, __func__)) != 0)
		return err;
	while (!mcast_done(m)) {
		err = nemo_place_wait_for(&m->done, 0, abstime, NULL);
		if (err == ETIMEDOUT && !mcast_done(m)) {
			*handle = m;
			return ETIMEDOUT;
		}
	}
	return mcast_finish(m, __func__);
}

int nemo_mcast_test(nemo_mcast *h)
{
	if (!h)
		return NEMO__FAIL(EINVAL, "the handle is NULL");
	if (!pthread_equal(h->owner, pthread_self()))
		return NEMO__FAIL(EPERM, "the multicast was started by another thread, whose place completes it");
	if (!mcast_done(h))
		nemo_poll(NULL);
	if (!mcast_done(h))
		return EBUSY;        /* an outcome: no text (fail.h) */
	return mcast_finish(h, __func__);
}

int nemo_mcast_wait(nemo_mcast *h, const struct timespec *abstime)
{
	if (!h)
		return NEMO__FAIL(EINVAL, "the handle is NULL");
	if (!pthread_equal(h->owner, pthread_self()))
		return NEMO__FAIL(EPERM, "the multicast was started by another thread, whose place completes it");
	int bad = nemo__check_deadline(__func__, CLOCK_MONOTONIC, abstime);
	if (bad)
		return bad;
	while (!mcast_done(h)) {
		int err = nemo_place_wait_for(&h->done, 0, abstime, NULL);
		if (err == ETIMEDOUT)
			return ETIMEDOUT;
		if (err)
			return err;     /* its text (EINVAL: a malformed abstime) */
	}
	return mcast_finish(h, __func__);
}
