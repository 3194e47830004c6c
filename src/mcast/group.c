/*
 * group.c - multicast groups (nemo/mcast.h): create, destroy, counters,
 * and membership; each change builds a new topology (topo.c) or updates
 * the member counts of the current one.  The protocol that reads them is
 * mcast.c.
 *
 * MEMBERSHIP
 *
 * Changes take the group's lock: member[idx] and member_id[idx] (flag
 * stored with release after the id), the member counts of every bracket
 * from the place's home to the root (static; relaxed atomic adds: Skip
 * reads them as hints: mcast.c, THE ROLES), or a rebuilt topology
 * (dynamic).  A multicast reads them without the lock; it takes the lock
 * only to take a reference to the current topology.
 */
#define _GNU_SOURCE
#include "mcast_internal.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

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
	struct mc_topo *t = nemo__mc_topo_build(g->kind, g->fanout, g->P, L, nodes_now(g, L, false));
	free(L);
	if (!t)
		return ENOMEM;
	struct mc_topo *old = atomic_exchange_explicit(&g->topo, t, memory_order_acq_rel);
	nemo__mc_topo_put(old);
	atomic_fetch_add_explicit(&g->rebuilds, 1, memory_order_relaxed);
	return 0;
}


/* Static: add delta to the member count of every bracket containing idx. */
static void count_path(nemo_mcast_group *g, unsigned idx, int delta)
{
	struct mc_topo *t = atomic_load_explicit(&g->topo, memory_order_relaxed);
	for (int32_t b = t->home[idx]; b >= 0; b = t->b[b].parent)
		atomic_fetch_add_explicit(&t->count[b], (uint32_t)delta, memory_order_relaxed);
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
	int cpu = nemo__place_cpu(nemo__domain_place(g->d, nemo_place_index(p)));
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

/* -------------------------------------------------------------- groups */

static void group_free(nemo_mcast_group *g)
{
	nemo__mc_services_stop(g);
	free(g->svc_cpu);
	free((void *)g->svc_idx);
	free(g->slot_of);
	free((void *)g->member_slot);
	free((void *)g->svc_members);
	free((void *)g->last_run);
	free(g->svc_thread);
	nemo__mc_topo_put(atomic_load_explicit(&g->topo, memory_order_relaxed));
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
	g->P = nemo__domain_places(d);
	g->service = a.service;
	pthread_mutex_init(&g->lock, NULL);
	g->member = calloc(g->P, sizeof *g->member);
	g->member_id = calloc(g->P, sizeof *g->member_id);
	g->stat = aligned_alloc(NEMO__CACHELINE, NEMO__LINES(g->P * sizeof *g->stat));
	if (!g->member || !g->member_id || !g->stat) {
		group_free(g);
		return NEMO__FAIL(ENOMEM, "cannot allocate the group (%u places)", nemo__domain_places(d));
	}
	memset(g->stat, 0, g->P * sizeof *g->stat);
	/* The action: the one asked for, or the highest free one. */
	if (a.action) {
		err = nemo_action_register(d, a.action, nemo__mc_on_message, g);
	} else {
		err = ENOSPC;
		for (uint32_t id = nemo__domain_actions(d); id-- > 1 && err;) {
			err = nemo_action_register(d, id, nemo__mc_on_message, g);
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
	if ((err = nemo_action_set_undelivered(d, a.action, nemo__mc_on_undelivered, g)) != 0) {
		group_free(g);
		return err;
	}
	if (g->service && (err = nemo__mc_services_start(g)) != 0) {
		group_free(g);
		return err;        /* nemo__mc_services_start's text */
	}
	uint32_t *L = malloc(g->P * sizeof *L);
	struct mc_topo *t =
		L ? nemo__mc_topo_build(g->kind, g->fanout, g->P, L, g->dynamic ? 0 : nodes_now(g, L, true)) : NULL;
	free(L);
	atomic_init(&g->topo, t);
	if (!t) {
		group_free(g);
		return NEMO__FAIL(ENOMEM, "cannot allocate the group's topology (%u places)", nemo__domain_places(d));
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
