/*
 * topo.h - the multicast's topologies as brackets: the structure that
 * topo.c builds from a sorted list of place indexes, and that the
 * protocol (mcast.c) walks.  Pure: no threads, no messages, no group
 * (THE TOPOLOGY in topo.c); tests/test_mcast_topo.c checks it alone.
 */
#ifndef NEMO_MCAST_TOPO_H
#define NEMO_MCAST_TOPO_H

#include <nemo/mcast.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define HOST_SOURCE (-2)

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

/* A topology of the given kind over the n places L (sorted indexes < P),
 * with reference count 1; NULL: ENOMEM.  n == 0 gives one with no
 * bracket (an empty dynamic group). */
struct mc_topo *nemo__mc_topo_build(nemo_mcast_topology kind, unsigned fanout, unsigned P, const uint32_t *L,
				    uint32_t n);

/* Drop a reference (NULL: nothing); the last one frees the topology. */
void nemo__mc_topo_put(struct mc_topo *t);

#endif
