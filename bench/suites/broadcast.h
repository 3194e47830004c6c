/*
 * broadcast.h - the mechanism interface of the broadcast suite: one
 * sender wakes K waiters; every waiter stamps its own wake-up.
 *
 * The harness (broadcast.c) owns the method, as unicast.h's: each waiter
 * announces `slot[w].ready = gen` and calls rx_wait(w, gen); the sender
 * sees every announcement, calls tx_prepare(gen) if any, waits the random
 * delay of the row's scenario, stamps t_send, calls tx_broadcast(gen),
 * stamps again.  A mechanism only has to make every rx_wait(w, gen)
 * return once tx_broadcast(gen) has been called, and never before.
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
	/* Set by the sender before the broadcast it makes the row's last
	 * (the run was interrupted); 0 until then. */
	atomic_uint last_gen;
	int waiters;
	bc_slot *slot;                /* one per waiter */
	unsigned scenario;            /* SC_POLLING or SC_BLOCKED */
	/* How nemo's waiters wait: policy block in `blocked` rows, the
	 * --poll-policy (spin by default) in `polling` rows. */
	nemo_wait_policy policy;
	/* Some waiter shares its CPU with another thread of the row
	 * (oversubscribed): a mechanism that polls must let the others run. */
	bool shared_cpu;
	void *priv;
	char why[160];
} bc_ctx;

typedef struct bc_mech {
	const char *name;
	const char *summary;
	unsigned scenarios;           /* SC_POLLING and/or SC_BLOCKED */
	bool nemo_policy;             /* waiters wait with c->policy: rows say which */
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
	/** Sender, off the clock: every waiter has announced gen, i.e. has
	 *  returned from its wait for gen - 1 (optional). */
	void (*tx_prepare)(bc_ctx *c, unsigned gen);
	/** Wake every waiter of generation gen. */
	void (*tx_broadcast)(bc_ctx *c, unsigned gen);
} bc_mech;

extern const bc_mech *const bc_baselines[];
extern const bc_mech *const bc_events[];   /* mech_events.c */
extern const bc_mech *const bc_messaging[];   /* mech_messaging.c */

#endif
