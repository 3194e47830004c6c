/*
 * mcast_internal.h - what the files of src/mcast/ share (internal).
 *
 *   topo.c     the topologies as brackets (topo.h): pure
 *   service.c  the service places' threads (docs/multicast.md)
 *   mcast.c    the protocol: roles, sends, completion, multicasts
 *   group.c    groups and membership (the public group calls)
 *
 * Each file uses only those listed before it (tests/check_layers.py).
 */
#ifndef NEMO_MCAST_INTERNAL_H
#define NEMO_MCAST_INTERNAL_H

#include <nemo/mcast.h>

#include "../messaging/modes.h"
#include "topo.h"

#include <pthread.h>

#define OP_ENTER 1u
#define OP_COMPLETE 2u
#define OP_DONE 3u
#define OP_SHIFT 28
#define BR_MASK ((1u << OP_SHIFT) - 1)

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
	_Atomic int svc_started, svc_stop, svc_failed;  /* svc_started: nemo__service_run's flag */
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

/* ----------------------------------------------------------- membership */

static inline bool is_member(const nemo_mcast_group *g, unsigned idx)
{
	return atomic_load_explicit(&g->member[idx], memory_order_acquire) != 0;
}

/* Whether the topology node at place index idx serves a member: the
 * member itself, or (service mode) the service place of a CPU that has
 * members. */
static inline bool node_member(const nemo_mcast_group *g, unsigned idx)
{
	if (!g->service)
		return is_member(g, idx);
	int32_t s = g->slot_of[idx];
	return s >= 0 && atomic_load_explicit(&g->svc_members[s], memory_order_acquire) != 0;
}

/* The current id of the place at idx, or NEMO_PLACE_NONE. */
static inline nemo_place_id place_at(const nemo_mcast_group *g, unsigned idx)
{
	return nemo__domain_place_id(g->d, idx);
}

/* ------------------------------------------------- service.c, mcast.c */

/* One service place per CPU this process may run on, each pinned there
 * and joined to the group's domain; returns once all have joined. */
int nemo__mc_services_start(nemo_mcast_group *g);

/* Stop and join the service places (none started: nothing). */
void nemo__mc_services_stop(nemo_mcast_group *g);

/* The group's action handler, and its undelivered callback (mcast.c). */
void nemo__mc_on_message(const nemo_am_msg *msg, void *ctx);
void nemo__mc_on_undelivered(const nemo_am_msg *msg, int err, void *ctx);

#endif
