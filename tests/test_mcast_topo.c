/*
 * test_mcast_topo.c - the multicast's topology builder alone
 * (src/mcast/topo.c, THE RULES A BUILD KEEPS): no domain, no thread, no
 * message.  For every kind (Flat, Tree, Diamond), several fan-outs, and
 * 0..64 places - contiguous indexes (a static topology) and scattered
 * ones (a dynamic topology over some members) - it checks that:
 *
 *   - a walk from the root reaches every bracket exactly once (so no
 *     cycle, and nothing unreachable), and every place of L exactly once,
 *     as a head or a tail; no other index appears, and home[] names the
 *     bracket of each place (-1 for the others);
 *   - parents and children agree, the root alone has no parent;
 *   - fan-out: at most `fanout` children per bracket (Flat's root: one per
 *     place, its leaves none); child slots inside the kids array;
 *   - cnt0 = children + 1, hosts and tails as the kind says, fwd_first for
 *     Tree only, and a reference count of 1 that nemo__mc_topo_put drops.
 */
#include "check.h"

#include "mcast/topo.h"

#include <stdint.h>
#include <string.h>

#define NMAX 64
#define PMAX (3 * NMAX + 8)

static const char *kind_name[] = { "flat", "tree", "diamond" };

/* One build over the n places L (sorted indexes < P), checked. */
static void check_one(nemo_mcast_topology kind, unsigned fanout, unsigned P, const uint32_t *L, uint32_t n)
{
	struct mc_topo *t = nemo__mc_topo_build(kind, fanout, P, L, n);
	CHECK(t != NULL);
	if (!t)
		return;
	int before = atomic_load(&check_failures);
	CHECK_EQ_INT(atomic_load(&t->refs), 1);
	CHECK_EQ_INT(t->fwd_first, kind == NEMO_MCAST_TREE);
	if (n == 0) {
		CHECK_EQ_INT(t->nb, 0);
		for (unsigned i = 0; i < P; i++)
			CHECK_EQ_INT(t->home[i], -1);
		nemo__mc_topo_put(t);
		return;
	}
	uint32_t cap = n + 2;   /* topo.c allocates n + 2 brackets and child slots */
	CHECK(t->nb >= 1 && t->nb <= cap);
	CHECK(t->root < t->nb);
	if (!(t->nb >= 1 && t->nb <= cap && t->root < t->nb)) {
		nemo__mc_topo_put(t);
		return;
	}
	/* Structure of each bracket. */
	for (uint32_t b = 0; b < t->nb; b++) {
		const struct mc_br *br = &t->b[b];
		CHECK_EQ_INT(t->cnt0[b], br->nkids + 1);
		CHECK(br->kid0 + br->nkids <= cap);
		CHECK_EQ_INT(br->parent < 0, b == t->root);
		bool flat_root = kind == NEMO_MCAST_FLAT && b == t->root;
		if (flat_root) {
			CHECK_EQ_INT(br->nkids, n);
			CHECK_EQ_INT(br->head, -1);
			CHECK_EQ_INT(br->tail, -1);
			CHECK_EQ_INT(br->host, HOST_SOURCE);
		} else {
			CHECK(br->nkids <= fanout);
			CHECK(br->head >= 0 && (unsigned)br->head < P);
			if (kind == NEMO_MCAST_FLAT) {
				CHECK_EQ_INT(br->nkids, 0);
				CHECK_EQ_INT(br->host, -1);
				CHECK_EQ_INT(br->tail, -1);
			} else if (kind == NEMO_MCAST_TREE) {
				CHECK_EQ_INT(br->host, br->head);
				CHECK_EQ_INT(br->tail, -1);
			} else {
				CHECK_EQ_INT(br->host, -1);
				/* A leaf (one place) has no tail; any other has one, and
				 * children only if it spans more than two places. */
				CHECK(br->tail != br->head);
				if (br->tail < 0)
					CHECK_EQ_INT(br->nkids, 0);
			}
		}
		for (uint32_t i = 0; i < br->nkids && br->kid0 + i < cap; i++) {
			uint32_t c = t->kids[br->kid0 + i];
			CHECK(c < t->nb);
			if (c < t->nb)
				CHECK_EQ_INT(t->b[c].parent, (int32_t)b);
		}
	}
	/* The walk from the root: every bracket once, every place once. */
	uint32_t seen_br[2 * NMAX + 4] = { 0 };
	uint32_t seen_place[PMAX] = { 0 };
	uint32_t stack[2 * NMAX + 4], sp = 0, steps = 0;
	stack[sp++] = t->root;
	while (sp && steps <= t->nb) {
		uint32_t b = stack[--sp];
		steps++;
		if (seen_br[b]++)
			continue;   /* a second visit: counted, not walked again */
		const struct mc_br *br = &t->b[b];
		if (br->head >= 0 && (unsigned)br->head < P)
			seen_place[br->head]++;
		if (br->tail >= 0 && (unsigned)br->tail < P)
			seen_place[br->tail]++;
		for (uint32_t i = 0; i < br->nkids && br->kid0 + i < cap; i++) {
			uint32_t c = t->kids[br->kid0 + i];
			if (c < t->nb && sp < sizeof stack / sizeof *stack)
				stack[sp++] = c;
		}
	}
	CHECK_EQ_INT(sp, 0);
	for (uint32_t b = 0; b < t->nb; b++)
		CHECK_EQ_INT(seen_br[b], 1);
	uint32_t in_l[PMAX] = { 0 };
	for (uint32_t i = 0; i < n; i++)
		in_l[L[i]] = 1;
	for (unsigned i = 0; i < P; i++) {
		CHECK_EQ_INT(seen_place[i], in_l[i]);
		if (!in_l[i]) {
			CHECK_EQ_INT(t->home[i], -1);
			continue;
		}
		int32_t h = t->home[i];
		CHECK(h >= 0 && (uint32_t)h < t->nb);
		if (h >= 0 && (uint32_t)h < t->nb)
			CHECK(t->b[h].head == (int32_t)i || t->b[h].tail == (int32_t)i);
	}
	if (atomic_load(&check_failures) != before)
		fprintf(stderr, "  (in the %s topology, fan-out %u, %u places of %u)\n", kind_name[kind], fanout, n, P);
	nemo__mc_topo_put(t);
}

int main(void)
{
	static const unsigned fanouts[] = { 2, 3, 4, 8, NEMO_MCAST_FANOUT_MAX };
	uint32_t L[NMAX];
	unsigned builds = 0;
	for (int kind = NEMO_MCAST_FLAT; kind <= NEMO_MCAST_DIAMOND; kind++) {
		for (size_t f = 0; f < sizeof fanouts / sizeof *fanouts; f++) {
			for (uint32_t n = 0; n <= NMAX; n++) {
				/* Static: every index of a domain of n places. */
				for (uint32_t i = 0; i < n; i++)
					L[i] = i;
				check_one((nemo_mcast_topology)kind, fanouts[f], n ? n : 1, L, n);
				/* Dynamic: n members scattered over a larger domain. */
				for (uint32_t i = 0; i < n; i++)
					L[i] = 3 * i + 1 + (i % 2);
				check_one((nemo_mcast_topology)kind, fanouts[f], PMAX, L, n);
				builds += 2;
			}
		}
	}
	printf("test_mcast_topo: %u builds (flat, tree, diamond x fan-outs 2..%u x 0..%u places)\n", builds,
	       NEMO_MCAST_FANOUT_MAX, NMAX);
	return check_exit("test_mcast_topo");
}
