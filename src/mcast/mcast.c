/*
 * mcast.c - acknowledged multicast to dynamic groups (nemo/mcast.h) over
 * static topologies, on the messaging layer's active messages.
 *
 * THE TOPOLOGY
 *
 * A topology is a tree of brackets.  A bracket b has a head place (its
 * scatter node: it forwards the message to b's child brackets), optionally
 * a tail place (its gather node, a place that runs the function once all
 * of b's children are done: Diamond), and otherwise a support gather: a
 * counter that a place hosts (Tree: the head's own place; Flat: the
 * source).  Every place of the topology is the head or the tail of exactly
 * one bracket (`home`).  Leaves are center nodes: a head and no children.
 *
 *   Flat     root: support head and gather, hosted by the source; one leaf
 *            per place.
 *   Tree     bracket(L) = head L[0], support gather hosted by L[0],
 *            children: the rest of L in `fanout` contiguous parts.  The
 *            head forwards first, then runs the function (forwarding
 *            first shortens the longest path).
 *   Diamond  bracket(L) = head L[0], tail L[n-1], children: the places
 *            in between in `fanout` parts; one place: a leaf; two: head
 *            and tail.  The head runs the function before it forwards,
 *            and the tail runs it after every branch arrived, so that
 *            the gather doubles as the acknowledgment.
 * Static topologies span every place index of the domain; dynamic ones
 * the members only, sorted, rebuilt at each change.
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
 * overflow_max if need be (NEMO__SEND_KEEP_ALL: a member needs the
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
 *
 * MEMBERSHIP
 *
 * Changes take the group's lock: member[idx] and member_id[idx] (flag
 * stored with release after the id), the member counts of every bracket
 * from the place's home to the root (static; relaxed atomic adds: Skip
 * reads them as hints, see above), or a rebuilt topology (dynamic).  A
 * multicast reads them without the lock; it takes the lock only to take a
 * reference to the current topology.
 */
#define _GNU_SOURCE
#include <nemo/mcast.h>

#include "../messaging/messaging_internal.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define HOST_SOURCE (-2)
#define OP_ENTER 1u
#define OP_COMPLETE 2u
#define OP_DONE 3u
#define OP_SHIFT 28
#define BR_MASK ((1u << OP_SHIFT) - 1)

struct mc_br {
	int32_t head, tail;           /* place indexes, or -1 */
	int32_t host;                 /* support gather's place, HOST_SOURCE, or -1 (tail gathers) */
	int32_t parent;               /* bracket, -1 at the root */
	uint32_t kid0, nkids;         /* children: kids[kid0 .. kid0 + nkids) */
};

struct mc_topo {
	_Atomic long refs;
	uint32_t nb, root;            /* nb == 0: no place (an empty dynamic group) */
	bool fwd_first;               /* Tree: forward, then run */
	struct mc_br *b;
	uint32_t *kids;
	int32_t *home;                /* [P]: the bracket a place heads or tails, or -1 */
	_Atomic uint32_t *count;      /* [nb]: members in the bracket (static) */
	uint32_t *cnt0;               /* [nb]: children + 1 */
};

struct mc_stat {
	_Alignas(NEMO__CACHELINE) _Atomic uint64_t messages, helped, skipped, runs;
};

struct nemo_mcast_group {
	nemo_domain *d;
	uint32_t action;
	nemo_mcast_topology kind;
	nemo_mcast_mechanism mech;
	unsigned fanout;
	bool dynamic;
	unsigned P;
	pthread_mutex_t lock;
	_Atomic(struct mc_topo *) topo;
	_Atomic uint8_t *member;      /* [P] */
	_Atomic uint64_t *member_id;  /* [P] */
	size_t nmembers;              /* under lock */
	_Atomic uint64_t in_flight, multicasts, changes, rebuilds;
	struct mc_stat *stat;         /* [P]: written by the place of that index */
	/* Service mode (docs/multicast.md, "Service places"): one place per
	 * CPU. */
	bool service;
	int nsvc;                     /* service places */
	int *svc_cpu;                 /* [nsvc]: its CPU */
	_Atomic int32_t *svc_idx;     /* [nsvc]: its place index (-1 until joined) */
	int32_t *slot_of;             /* [P]: place index -> service slot, or -1 */
	_Atomic int32_t *member_slot; /* [P]: a member's service slot */
	_Atomic uint32_t *svc_members;/* [nsvc]: members on that CPU */
	_Atomic uint64_t *last_run;   /* [P]: the multicast a member last ran for */
	pthread_t *svc_thread;
	_Atomic int svc_up, svc_stop, svc_failed;
	_Atomic uint64_t seq;         /* multicasts started */
};

struct nemo_mcast {
	nemo_mcast_group *g;
	struct mc_topo *t;
	uint64_t seq;                 /* this multicast's number (service mode) */
	nemo_mcast_fn fn;
	void *ctx;
	uint64_t arg;
	nemo_place_id src;
	pthread_t owner;
	_Atomic int err;              /* a member may not have run (SENDS THAT RETURNED 0) */
	_Alignas(NEMO__CACHELINE) uint64_t done;   /* atomic builtins: nemo_place_wait_for's word */
	_Alignas(NEMO__CACHELINE) _Atomic uint32_t cnt[];
};

/* The place doing a role, for one multicast. */
struct ex {
	struct nemo_mcast *m;
	unsigned self;                /* its index */
	nemo_place_id self_id;
};

/* ------------------------------------------------------------ building */

struct build {
	struct mc_topo *t;
	const uint32_t *L;
	unsigned fanout;
	uint32_t nk;
};

static int32_t new_br(struct build *bb, int32_t head, int32_t tail, int32_t host, int32_t parent)
{
	struct mc_topo *t = bb->t;
	int32_t i = (int32_t)t->nb++;
	t->b[i] = (struct mc_br){ head, tail, host, parent, 0, 0 };
	if (head >= 0)
		t->home[head] = i;
	if (tail >= 0)
		t->home[tail] = i;
	return i;
}

/* Reserve n child slots of bracket b (before the children are built: the
 * recursion reserves slots of its own). */
static void reserve_kids(struct build *bb, int32_t b, uint32_t n)
{
	bb->t->b[b].kid0 = bb->nk;
	bb->t->b[b].nkids = n;
	bb->nk += n;
}

typedef int32_t (*build_fn)(struct build *, uint32_t lo, uint32_t hi, int32_t parent);

/* Split L[lo, hi) into b's children, as equal as can be. */
static void split(struct build *bb, int32_t b, uint32_t lo, uint32_t hi, build_fn f)
{
	uint32_t n = hi - lo, k = n < bb->fanout ? n : bb->fanout;
	reserve_kids(bb, b, k);
	uint32_t at = lo;
	for (uint32_t i = 0; i < k; i++) {
		uint32_t len = n / k + (i < n % k ? 1 : 0);
		int32_t c = f(bb, at, at + len, b);
		bb->t->kids[bb->t->b[b].kid0 + i] = (uint32_t)c;
		at += len;
	}
}

static int32_t build_tree(struct build *bb, uint32_t lo, uint32_t hi, int32_t parent)
{
	int32_t p = (int32_t)bb->L[lo];
	int32_t b = new_br(bb, p, -1, p, parent);
	if (hi - lo > 1)
		split(bb, b, lo + 1, hi, build_tree);
	return b;
}

static int32_t build_diamond(struct build *bb, uint32_t lo, uint32_t hi, int32_t parent)
{
	uint32_t n = hi - lo;
	if (n == 1)
		return new_br(bb, (int32_t)bb->L[lo], -1, -1, parent);
	int32_t b = new_br(bb, (int32_t)bb->L[lo], (int32_t)bb->L[hi - 1], -1, parent);
	if (n > 2)
		split(bb, b, lo + 1, hi - 1, build_diamond);
	return b;
}

static void topo_free(struct mc_topo *t)
{
	if (!t)
		return;
	free(t->b);
	free(t->kids);
	free(t->home);
	free((void *)t->count);
	free(t->cnt0);
	free(t);
}

/* A topology over the n places L (sorted indexes < P); NULL: ENOMEM. */
static struct mc_topo *topo_build(const nemo_mcast_group *g, const uint32_t *L, uint32_t n)
{
	struct mc_topo *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	uint32_t cap = n + 2;
	t->b = calloc(cap, sizeof *t->b);
	t->kids = calloc(cap, sizeof *t->kids);
	t->home = malloc(g->P * sizeof *t->home);
	t->count = calloc(cap, sizeof *t->count);
	t->cnt0 = calloc(cap, sizeof *t->cnt0);
	if (!t->b || !t->kids || !t->home || !t->count || !t->cnt0) {
		topo_free(t);
		return NULL;
	}
	for (unsigned i = 0; i < g->P; i++)
		t->home[i] = -1;
	atomic_init(&t->refs, 1);
	t->fwd_first = g->kind == NEMO_MCAST_TREE;
	if (n) {
		struct build bb = { t, L, g->fanout, 0 };
		switch (g->kind) {
		case NEMO_MCAST_FLAT: {
			int32_t r = new_br(&bb, -1, -1, HOST_SOURCE, -1);
			reserve_kids(&bb, r, n);
			for (uint32_t i = 0; i < n; i++)
				t->kids[i] = (uint32_t)new_br(&bb, (int32_t)L[i], -1, -1, r);
			t->root = (uint32_t)r;
			break;
		}
		case NEMO_MCAST_DIAMOND:
			t->root = (uint32_t)build_diamond(&bb, 0, n, -1);
			break;
		case NEMO_MCAST_TREE:
		default:
			t->root = (uint32_t)build_tree(&bb, 0, n, -1);
			break;
		}
	}
	for (uint32_t i = 0; i < t->nb; i++)
		t->cnt0[i] = t->b[i].nkids + 1;
	return t;
}

static void topo_put(struct mc_topo *t)
{
	if (t && atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1)
		topo_free(t);
}

/* The topology's nodes now, as sorted place indexes (under the lock):
 * the members, or (service mode) the service places of CPUs with members
 * (all of them: static). */
static uint32_t nodes_now(const nemo_mcast_group *g, uint32_t *L, bool all)
{
	uint32_t n = 0;
	for (unsigned i = 0; i < g->P; i++) {
		if (g->service) {
			int32_t s = g->slot_of[i];
			if (s >= 0 && (all || atomic_load_explicit(&g->svc_members[s], memory_order_relaxed)))
				L[n++] = i;
		} else if (all || atomic_load_explicit(&g->member[i], memory_order_relaxed)) {
			L[n++] = i;
		}
	}
	return n;
}

/* Dynamic: a topology over the members now replaces the current one
 * (under the lock).  ENOMEM leaves the old one. */
static int rebuild(nemo_mcast_group *g)
{
	uint32_t *L = malloc(g->P * sizeof *L);
	if (!L)
		return ENOMEM;
	struct mc_topo *t = topo_build(g, L, nodes_now(g, L, false));
	free(L);
	if (!t)
		return ENOMEM;
	struct mc_topo *old = atomic_exchange_explicit(&g->topo, t, memory_order_acq_rel);
	topo_put(old);
	atomic_fetch_add_explicit(&g->rebuilds, 1, memory_order_relaxed);
	return 0;
}

/* ----------------------------------------------------------- membership */

static bool is_member(const nemo_mcast_group *g, unsigned idx)
{
	return atomic_load_explicit(&g->member[idx], memory_order_acquire) != 0;
}

/* Whether the topology node at place index idx serves a member: the
 * member itself, or (service mode) the service place of a CPU that has
 * members. */
static bool node_member(const nemo_mcast_group *g, unsigned idx)
{
	if (!g->service)
		return is_member(g, idx);
	int32_t s = g->slot_of[idx];
	return s >= 0 && atomic_load_explicit(&g->svc_members[s], memory_order_acquire) != 0;
}

/* Static: add delta to the member count of every bracket containing idx. */
static void count_path(nemo_mcast_group *g, unsigned idx, int delta)
{
	struct mc_topo *t = atomic_load_explicit(&g->topo, memory_order_relaxed);
	for (int32_t b = t->home[idx]; b >= 0; b = t->b[b].parent)
		atomic_fetch_add_explicit(&t->count[b], (uint32_t)delta, memory_order_relaxed);
}

/* The current id of the place at idx, or NEMO_PLACE_NONE. */
static nemo_place_id place_at(const nemo_mcast_group *g, unsigned idx)
{
	struct nemo_domain *d = g->d;
	uint64_t s = atomic_load_explicit(&d->places[idx].status, memory_order_acquire);
	if (nemo__status_state(s) != NEMO__ST_ACTIVE)
		return NEMO_PLACE_NONE;
	return nemo__make_id(idx, nemo__status_gen(s));
}

/* A topology node (place index idx) gained (+1) or lost (-1) its last
 * member: rebuild (dynamic) or update the subgroup counts (static).
 * Under the lock. */
static int node_changed(nemo_mcast_group *g, unsigned idx, int delta)
{
	if (g->dynamic)
		return rebuild(g);
	count_path(g, idx, delta);
	return 0;
}

/* Service mode: the slot of the CPU that serves place p. */
static int32_t slot_for(const nemo_mcast_group *g, nemo_place_id p)
{
	int cpu = g->d->places[nemo_place_index(p)].cpu;
	if (cpu < 0 && p == nemo_place_self())
		cpu = sched_getcpu();
	for (int s = 0; cpu >= 0 && s < g->nsvc; s++)
		if (g->svc_cpu[s] == cpu)
			return s;
	return -1;
}

int nemo_mcast_add(nemo_mcast_group *g, nemo_place_id p)
{
	if (!g)
		return NEMO__FAIL(EINVAL, "g is NULL");
	unsigned idx = nemo_place_index(p);
	if (p == NEMO_PLACE_NONE || idx >= g->P || place_at(g, idx) != p)
		return NEMO__FAIL(ESRCH, "place %#llx is not a place of the group's domain now",
				  (unsigned long long)p);
	int32_t slot = -1;
	if (g->service) {
		if (g->slot_of[idx] >= 0)
			return NEMO__FAIL(EINVAL, "place %#llx is one of the group's service places",
					  (unsigned long long)p);
		slot = slot_for(g, p);
		if (slot < 0)
			return NEMO__FAIL(EINVAL, "the CPU of place %#llx is unknown or has no service place: "
					  "pin it (NEMO_PLACE_PIN), or add it from its own thread",
					  (unsigned long long)p);
	}
	pthread_mutex_lock(&g->lock);
	int err = 0;
	if (is_member(g, idx)) {
		if (atomic_load_explicit(&g->member_id[idx], memory_order_relaxed) == p) {
			pthread_mutex_unlock(&g->lock);
			return NEMO__FAIL(EALREADY, "place %#llx is a member already", (unsigned long long)p);
		}
		/* A previous occupant of the index, never removed: p takes over
		 * its membership (counts unchanged). */
		atomic_store_explicit(&g->member_id[idx], p, memory_order_release);
	} else {
		atomic_store_explicit(&g->member_id[idx], p, memory_order_relaxed);
		if (g->service)
			atomic_store_explicit(&g->member_slot[idx], slot, memory_order_relaxed);
		atomic_store_explicit(&g->member[idx], 1, memory_order_release);
		g->nmembers++;
		if (!g->service)
			err = node_changed(g, idx, +1);
		else if (atomic_fetch_add_explicit(&g->svc_members[slot], 1, memory_order_acq_rel) == 0)
			err = node_changed(g, (unsigned)atomic_load_explicit(&g->svc_idx[slot], memory_order_relaxed), +1);
		if (err) {
			if (g->service)
				atomic_fetch_sub_explicit(&g->svc_members[slot], 1, memory_order_relaxed);
			atomic_store_explicit(&g->member[idx], 0, memory_order_release);
			g->nmembers--;
		}
	}
	if (!err)
		atomic_fetch_add_explicit(&g->changes, 1, memory_order_relaxed);
	pthread_mutex_unlock(&g->lock);
	return err ? NEMO__FAIL(err, "cannot build the group's new topology") : 0;
}

int nemo_mcast_remove(nemo_mcast_group *g, nemo_place_id p)
{
	if (!g)
		return NEMO__FAIL(EINVAL, "g is NULL");
	unsigned idx = nemo_place_index(p);
	if (p == NEMO_PLACE_NONE || idx >= g->P)
		return NEMO__FAIL(ENOENT, "place %#llx is not a member", (unsigned long long)p);
	pthread_mutex_lock(&g->lock);
	if (!is_member(g, idx) || atomic_load_explicit(&g->member_id[idx], memory_order_relaxed) != p) {
		pthread_mutex_unlock(&g->lock);
		return NEMO__FAIL(ENOENT, "place %#llx is not a member", (unsigned long long)p);
	}
	atomic_store_explicit(&g->member[idx], 0, memory_order_release);
	g->nmembers--;
	int err = 0;
	int32_t slot = g->service ? atomic_load_explicit(&g->member_slot[idx], memory_order_relaxed) : -1;
	if (!g->service)
		err = node_changed(g, idx, -1);
	else if (atomic_fetch_sub_explicit(&g->svc_members[slot], 1, memory_order_acq_rel) == 1)
		err = node_changed(g, (unsigned)atomic_load_explicit(&g->svc_idx[slot], memory_order_relaxed), -1);
	if (err) {
		if (g->service)
			atomic_fetch_add_explicit(&g->svc_members[slot], 1, memory_order_relaxed);
		atomic_store_explicit(&g->member[idx], 1, memory_order_release);
		g->nmembers++;
	} else {
		atomic_fetch_add_explicit(&g->changes, 1, memory_order_relaxed);
	}
	pthread_mutex_unlock(&g->lock);
	return err ? NEMO__FAIL(err, "cannot build the group's new topology") : 0;
}

int nemo_mcast_members(nemo_mcast_group *g, nemo_place_id *ids, size_t cap, size_t *n)
{
	if (!g || !n || (cap && !ids))
		return NEMO__FAIL(EINVAL, "%s", !g ? "g is NULL" : !n ? "n is NULL" : "ids is NULL with cap > 0");
	pthread_mutex_lock(&g->lock);
	size_t k = 0;
	for (unsigned i = 0; i < g->P; i++) {
		if (!is_member(g, i))
			continue;
		if (k < cap)
			ids[k] = atomic_load_explicit(&g->member_id[i], memory_order_relaxed);
		k++;
	}
	pthread_mutex_unlock(&g->lock);
	*n = k;
	return 0;
}

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
	nemo_place *me = nemo__place_self();
	me->hdepth++;
	int err = nemo__am_sendv_flags(to, g->action, (uint64_t)(uintptr_t)m, &w, sizeof w, NEMO__SEND_KEEP_ALL);
	me->hdepth--;
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

static void on_message(const nemo_am_msg *msg, void *ctx)
{
	(void)ctx;
	struct nemo_mcast *m = (struct nemo_mcast *)(uintptr_t)msg->arg;
	uint32_t w;
	if (msg->len != sizeof w)
		return;
	memcpy(&w, msg->payload, sizeof w);
	struct ex ex = { m, nemo_place_index(msg->dest), msg->dest };
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

/* A kept message whose place left before it could be queued (SENDS THAT
 * RETURNED 0): do its role here, as send_op's callers do for a send that
 * failed at once.  Runs on the sending place, as a handler. */
static void on_undelivered(const nemo_am_msg *msg, int err, void *ctx)
{
	(void)err;
	(void)ctx;
	struct nemo_mcast *m = (struct nemo_mcast *)(uintptr_t)msg->arg;
	uint32_t w;
	if (msg->len != sizeof w)
		return;
	memcpy(&w, msg->payload, sizeof w);
	struct ex ex = { m, nemo_place_index(msg->src), msg->src };
	switch (w >> OP_SHIFT) {
	case OP_ENTER:
		enter(&ex, w & BR_MASK);
		break;
	case OP_COMPLETE:
		complete(&ex, w & BR_MASK);
		break;
	case OP_DONE:   /* the source left: nobody waits, but say it is done */
		__atomic_store_n(&m->done, 1, __ATOMIC_RELEASE);
		break;
	default:
		break;
	}
}

/* ------------------------------------------------------ service places */

struct svc_arg {
	nemo_mcast_group *g;
	int slot;
};

static void *service_main(void *p)
{
	struct svc_arg a = *(struct svc_arg *)p;
	free(p);
	nemo_mcast_group *g = a.g;
	nemo_place_attr pa = { .flags = NEMO_PLACE_PIN, .cpu = g->svc_cpu[a.slot] };
	nemo_place_id id;
	int err = nemo_place_join(g->d, &pa, &id);
	if (err) {
		atomic_store_explicit(&g->svc_failed, err, memory_order_release);
		atomic_fetch_add_explicit(&g->svc_up, 1, memory_order_release);
		return NULL;
	}
	g->slot_of[nemo_place_index(id)] = a.slot;
	atomic_store_explicit(&g->svc_idx[a.slot], (int32_t)nemo_place_index(id), memory_order_relaxed);
	atomic_fetch_add_explicit(&g->svc_up, 1, memory_order_release);
	/* Wait for work as any place does (adaptive: poll, then sleep); the
	 * deadline only bounds how long a stop takes to be seen. */
	while (!atomic_load_explicit(&g->svc_stop, memory_order_acquire)) {
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		t.tv_nsec += 10000000;
		if (t.tv_nsec >= 1000000000) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000;
		}
		nemo_place_wait(&t, NULL);
	}
	nemo_place_leave();
	return NULL;
}

/* One service place per CPU this process may run on, each pinned there
 * and joined to the group's domain; returns once all have joined. */
static int services_start(nemo_mcast_group *g)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) != 0)
		return NEMO__FAIL(errno, "cannot read this process's CPUs (sched_getaffinity)");
	int n = CPU_COUNT(&set);
	g->svc_cpu = calloc((size_t)n, sizeof *g->svc_cpu);
	g->svc_idx = calloc((size_t)n, sizeof *g->svc_idx);
	g->slot_of = malloc(g->P * sizeof *g->slot_of);
	g->member_slot = calloc(g->P, sizeof *g->member_slot);
	g->svc_members = calloc((size_t)n, sizeof *g->svc_members);
	g->last_run = calloc(g->P, sizeof *g->last_run);
	g->svc_thread = calloc((size_t)n, sizeof *g->svc_thread);
	if (!g->svc_cpu || !g->svc_idx || !g->slot_of || !g->member_slot || !g->svc_members || !g->last_run ||
	    !g->svc_thread)
		return NEMO__FAIL(ENOMEM, "cannot allocate the service places' tables");
	for (unsigned i = 0; i < g->P; i++)
		g->slot_of[i] = -1;
	for (int c = 0, k = 0; c < CPU_SETSIZE && k < n; c++)
		if (CPU_ISSET(c, &set))
			g->svc_cpu[k++] = c;
	int started = 0;
	for (int k = 0; k < n; k++) {
		struct svc_arg *a = malloc(sizeof *a);
		if (a)
			*a = (struct svc_arg){ g, k };
		if (!a || pthread_create(&g->svc_thread[k], NULL, service_main, a) != 0) {
			free(a);
			atomic_store(&g->svc_failed, EAGAIN);
			break;
		}
		started++;
	}
	g->nsvc = started;
	while (atomic_load_explicit(&g->svc_up, memory_order_acquire) < started)
		sched_yield();
	int err = atomic_load_explicit(&g->svc_failed, memory_order_acquire);
	if (err)
		return NEMO__FAIL(err, "cannot start the %d service places (one per CPU): %s", n,
				  err == ENOSPC ? "the domain has no room for them (max_places)"
						: "a thread could not start or join");
	return 0;
}

static void services_stop(nemo_mcast_group *g)
{
	if (!g->svc_thread)
		return;
	atomic_store_explicit(&g->svc_stop, 1, memory_order_release);
	for (int k = 0; k < g->nsvc; k++)
		pthread_join(g->svc_thread[k], NULL);
	g->nsvc = 0;
}

/* -------------------------------------------------------------- groups */

static void services_stop(nemo_mcast_group *g);

static void group_free(nemo_mcast_group *g)
{
	services_stop(g);
	free(g->svc_cpu);
	free((void *)g->svc_idx);
	free(g->slot_of);
	free((void *)g->member_slot);
	free((void *)g->svc_members);
	free((void *)g->last_run);
	free(g->svc_thread);
	topo_put(atomic_load_explicit(&g->topo, memory_order_relaxed));
	pthread_mutex_destroy(&g->lock);
	free((void *)g->member);
	free((void *)g->member_id);
	free(g->stat);
	free(g);
}

int nemo_mcast_group_create(nemo_domain *d, const nemo_mcast_attr *attr, nemo_mcast_group **out)
{
	if (!out)
		return NEMO__FAIL(EINVAL, "out is NULL");
	*out = NULL;
	int err = nemo__domain_check(d);
	if (err)
		return err;
	nemo_mcast_attr a = attr ? *attr : (nemo_mcast_attr){ 0 };
	if ((unsigned)a.topology > NEMO_MCAST_DIAMOND)
		return NEMO__FAIL(EINVAL, "topology %d is not a nemo_mcast_topology", (int)a.topology);
	if ((unsigned)a.mechanism > NEMO_MCAST_HELP)
		return NEMO__FAIL(EINVAL, "mechanism %d is not a nemo_mcast_mechanism", (int)a.mechanism);
	if (a.fanout == 0)
		a.fanout = 2;
	if (a.fanout < 2 || a.fanout > NEMO_MCAST_FANOUT_MAX)
		return NEMO__FAIL(EINVAL, "fanout %u is outside 2..%u", a.fanout, NEMO_MCAST_FANOUT_MAX);
	nemo_mcast_group *g = calloc(1, sizeof *g);
	if (!g)
		return NEMO__FAIL(ENOMEM, "cannot allocate the group");
	g->d = d;
	g->kind = a.topology;
	g->mech = a.mechanism;
	g->fanout = a.fanout;
	g->dynamic = a.dynamic;
	g->P = d->P;
	g->service = a.service;
	pthread_mutex_init(&g->lock, NULL);
	g->member = calloc(g->P, sizeof *g->member);
	g->member_id = calloc(g->P, sizeof *g->member_id);
	g->stat = aligned_alloc(NEMO__CACHELINE, NEMO__LINES(g->P * sizeof *g->stat));
	if (!g->member || !g->member_id || !g->stat) {
		group_free(g);
		return NEMO__FAIL(ENOMEM, "cannot allocate the group (%u places)", d->P);
	}
	memset(g->stat, 0, g->P * sizeof *g->stat);
	/* The action: the one asked for, or the highest free one. */
	if (a.action) {
		err = nemo_action_register(d, a.action, on_message, g);
	} else {
		err = ENOSPC;
		for (uint32_t id = d->A; id-- > 1 && err;) {
			err = nemo_action_register(d, id, on_message, g);
			if (err == EEXIST)
				err = ENOSPC;
			else if (!err)
				a.action = id;
			else
				break;
		}
		if (err == ENOSPC)
			nemo__fail(ENOSPC, "nemo_mcast_group_create", "every action id of the domain has a handler");
	}
	if (err) {
		group_free(g);
		return err;        /* nemo_action_register's text */
	}
	g->action = a.action;
	if ((err = nemo_action_set_undelivered(d, a.action, on_undelivered, g)) != 0) {
		group_free(g);
		return err;
	}
	if (g->service && (err = services_start(g)) != 0) {
		group_free(g);
		return err;        /* services_start's text */
	}
	uint32_t *L = malloc(g->P * sizeof *L);
	struct mc_topo *t = L ? topo_build(g, L, g->dynamic ? 0 : nodes_now(g, L, true)) : NULL;
	free(L);
	atomic_init(&g->topo, t);
	if (!t) {
		group_free(g);
		return NEMO__FAIL(ENOMEM, "cannot allocate the group's topology (%u places)", d->P);
	}
	g->action = a.action;
	*out = g;
	return 0;
}

int nemo_mcast_group_destroy(nemo_mcast_group *g)
{
	if (!g)
		return NEMO__FAIL(EINVAL, "g is NULL");
	uint64_t n = atomic_load_explicit(&g->in_flight, memory_order_acquire);
	if (n)
		return NEMO__FAIL(EBUSY, "%llu multicast%s in flight", (unsigned long long)n, n == 1 ? " is" : "s are");
	group_free(g);
	return 0;
}

int nemo_mcast_get_counters(nemo_mcast_group *g, nemo_mcast_counters *out)
{
	if (!g || !out)
		return NEMO__FAIL(EINVAL, "%s is NULL", g ? "out" : "g");
	memset(out, 0, sizeof *out);
	out->multicasts = atomic_load_explicit(&g->multicasts, memory_order_relaxed);
	out->changes = atomic_load_explicit(&g->changes, memory_order_relaxed);
	out->rebuilds = atomic_load_explicit(&g->rebuilds, memory_order_relaxed);
	for (unsigned i = 0; i < g->P; i++) {
		out->messages += atomic_load_explicit(&g->stat[i].messages, memory_order_relaxed);
		out->helped += atomic_load_explicit(&g->stat[i].helped, memory_order_relaxed);
		out->skipped += atomic_load_explicit(&g->stat[i].skipped, memory_order_relaxed);
		out->runs += atomic_load_explicit(&g->stat[i].runs, memory_order_relaxed);
	}
	return 0;
}

/* ---------------------------------------------------------- multicasts */

static void mcast_release(struct nemo_mcast *m)
{
	nemo_mcast_group *g = m->g;
	topo_put(m->t);
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
	if (me->d != g->d)
		return nemo__fail(EXDEV, fname, "the calling place belongs to another domain than the group");
	if (!(flags & NEMO_MCAST_ASYNC) && me->hdepth)
		return nemo__fail(EDEADLK, fname, "a multicast waits, and this is a handler (use NEMO_MCAST_ASYNC)");
	pthread_mutex_lock(&g->lock);
	struct mc_topo *t = atomic_load_explicit(&g->topo, memory_order_relaxed);
	atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
	pthread_mutex_unlock(&g->lock);
	size_t sz = sizeof(struct nemo_mcast) + (size_t)t->nb * sizeof(_Atomic uint32_t);
	struct nemo_mcast *m = aligned_alloc(NEMO__CACHELINE, NEMO__LINES(sz));
	if (!m) {
		topo_put(t);
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
