/*
 * broadcast.h - the mechanism interface of the broadcast suite: one
 * sender wakes K waiters; every waiter stamps its own wake-up.
 */
#ifndef NEMO_BENCH_BROADCAST_H
#define NEMO_BENCH_BROADCAST_H

#include "bench.h"

typedef struct bc_slot {
	_Alignas(BENCH_CACHELINE) atomic_uint ready;  /* waiter w: about to wait for gen */
} bc_slot;

typedef struct bc_ctx {
	_Alignas(BENCH_CACHELINE) atomic_uint word;   /* generation / futex word */
	_Alignas(BENCH_CACHELINE) _Atomic uint64_t t_send;
	int waiters;
	bc_slot *slot;                /* one per waiter */
	void *priv;
	char why[160];
} bc_ctx;

typedef struct bc_mech {
	const char *name;
	const char *summary;
	int (*setup)(bc_ctx *c);      /* 0 or errno with c->why set */
	void (*teardown)(bc_ctx *c);
	/** Waiter w's thread, before its first wait / after its last, before
	 *  it announces it is done (optional). */
	void (*rx_init)(bc_ctx *c, int w);
	void (*rx_fini)(bc_ctx *c, int w);
	/** Sender thread, before the first broadcast / after every waiter
	 *  announced it is done (optional). */
	void (*tx_init)(bc_ctx *c);
	void (*tx_fini)(bc_ctx *c);
	/** Waiter w waits for generation gen; returns its wake stamp or 0. */
	uint64_t (*rx_wait)(bc_ctx *c, int w, unsigned gen);
	/** Wake every waiter of generation gen. */
	void (*tx_broadcast)(bc_ctx *c, unsigned gen);
} bc_mech;

extern const bc_mech *const bc_baselines[];
extern const bc_mech *const bc_events[];   /* mech_events.c */
extern const bc_mech *const bc_messaging[];   /* mech_messaging.c */

#endif
