/*
 * topo.c - the topologies of acknowledged multicast (nemo/mcast.h) as
 * brackets, built from a sorted list of place indexes (topo.h).  Pure: no
 * threads, no messages, no group; the protocol that walks them is
 * mcast.c.
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
 * THE RULES A BUILD KEEPS (tests/test_mcast_topo.c checks them for every
 * kind, fan-out and 1..64 places): every place of L is the head or the
 * tail of exactly one bracket and home[] names it; every other index's
 * home is -1; each bracket but the root has one parent, which lists it
 * among its children exactly once, and parents are built before their
 * children (no cycle); a bracket has at most `fanout` children (Flat's
 * root: one per place); cnt0 is children + 1.  Cost: O(n) brackets and
 * child slots, one calloc each, O(P) for home[].
 */
#define _GNU_SOURCE
#include "topo.h"

#include <stdlib.h>

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

struct mc_topo *nemo__mc_topo_build(nemo_mcast_topology kind, unsigned fanout, unsigned P, const uint32_t *L,
				    uint32_t n)
{
	struct mc_topo *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	uint32_t cap = n + 2;
	t->b = calloc(cap, sizeof *t->b);
	t->kids = calloc(cap, sizeof *t->kids);
	t->home = malloc(P * sizeof *t->home);
	t->count = calloc(cap, sizeof *t->count);
	t->cnt0 = calloc(cap, sizeof *t->cnt0);
	if (!t->b || !t->kids || !t->home || !t->count || !t->cnt0) {
		topo_free(t);
		return NULL;
	}
	for (unsigned i = 0; i < P; i++)
		t->home[i] = -1;
	atomic_init(&t->refs, 1);
	t->fwd_first = kind == NEMO_MCAST_TREE;
	if (n) {
		struct build bb = { t, L, fanout, 0 };
		switch (kind) {
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

void nemo__mc_topo_put(struct mc_topo *t)
{
	if (t && atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1)
		topo_free(t);
}
