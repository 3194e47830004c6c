/*
 * service.c - the service places of a multicast group (attr.service;
 * docs/multicast.md, "Service places"): one thread per CPU of the
 * process, pinned there and joined to the group's domain as a place, so
 * that members need not poll: the protocol (mcast.c) sends a member's
 * roles to the service place of its CPU, which runs the function for it.
 *
 * A service place waits for work as any place does (nemo_place_wait:
 * adaptive, poll then sleep), with a 10 ms deadline that only bounds how
 * long a stop takes to be seen.  Start: the threads are started one at a
 * time by the polling layer's service-thread start (nemo__service_run,
 * src/poll/service.h, which the progress thread and the watchdog use
 * too): it returns once the thread has joined the domain as a place, or
 * has failed to (then it is joined, and the error it recorded is
 * returned: the domain has no room, ENOSPC).  Stop: a flag, then each
 * thread is joined.  The polling layer's one-per-domain claim (its slot
 * in the domain) does not apply: a group has one service place per CPU,
 * and several groups may share a domain.
 */
#define _GNU_SOURCE
#include "mcast_internal.h"

#include "../platform/deadline.h"
#include "../poll/service.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

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
		atomic_store_explicit(&g->svc_failed, err, memory_order_relaxed);
		atomic_store_explicit(&g->svc_started, -1, memory_order_release);
		return NULL;
	}
	g->slot_of[nemo_place_index(id)] = a.slot;
	atomic_store_explicit(&g->svc_idx[a.slot], (int32_t)nemo_place_index(id), memory_order_relaxed);
	atomic_store_explicit(&g->svc_started, 1, memory_order_release);
	/* Wait for work as any place does (adaptive: poll, then sleep); the
	 * deadline only bounds how long a stop takes to be seen. */
	while (!atomic_load_explicit(&g->svc_stop, memory_order_acquire)) {
		struct timespec t;
		nemo__deadline_in(CLOCK_MONOTONIC, 10000000, &t);
		nemo_place_wait(&t, NULL);
	}
	nemo_place_leave();
	return NULL;
}

int nemo__mc_services_start(nemo_mcast_group *g)
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
	/* One at a time, through the polling layer's start (service.h): it
	 * returns once the thread has joined (svc_started 1), or has failed
	 * to (-1: it is joined, and svc_failed says why). */
	int started = 0;
	for (int k = 0; k < n; k++) {
		struct svc_arg *a = malloc(sizeof *a);
		if (!a) {
			atomic_store_explicit(&g->svc_failed, EAGAIN, memory_order_relaxed);
			break;
		}
		*a = (struct svc_arg){ g, k };
		atomic_store_explicit(&g->svc_started, 0, memory_order_relaxed);
		if (nemo__service_run(&g->svc_thread[k], service_main, a, &g->svc_started) != 0) {
			if (!atomic_load_explicit(&g->svc_failed, memory_order_relaxed)) {
				free(a);        /* no thread: pthread_create failed */
				atomic_store_explicit(&g->svc_failed, EAGAIN, memory_order_relaxed);
			}
			break;
		}
		started++;
	}
	g->nsvc = started;
	int err = atomic_load_explicit(&g->svc_failed, memory_order_relaxed);
	if (err)
		return NEMO__FAIL(err, "cannot start the %d service places (one per CPU): %s", n,
				  err == ENOSPC ? "the domain has no room for them (max_places)"
						: "a thread could not start or join");
	return 0;
}

void nemo__mc_services_stop(nemo_mcast_group *g)
{
	if (!g->svc_thread)
		return;
	atomic_store_explicit(&g->svc_stop, 1, memory_order_release);
	for (int k = 0; k < g->nsvc; k++)
		pthread_join(g->svc_thread[k], NULL);
	g->nsvc = 0;
}
