/*
 * unicast.h - the mechanism interface of the unicast suite.
 *
 * A mechanism is a handful of callbacks around one shared context.  The
 * harness (unicast.c) owns the method: the receiver announces `ready = seq`
 * and calls rx_wait(seq); the sender sees the announcement, waits the
 * random delay, stamps t_send, calls tx_signal(seq), stamps again.  A
 * mechanism only has to make rx_wait(seq) return once tx_signal(seq) has
 * been called, and never before.
 */
#ifndef NEMO_BENCH_UNICAST_H
#define NEMO_BENCH_UNICAST_H

#include "bench.h"

#include <sys/types.h>

typedef struct uc_ctx {
	/* Harness words, each on its own cache line. */
	_Alignas(BENCH_CACHELINE) atomic_uint ready;   /* receiver: about to wait for seq */
	_Alignas(BENCH_CACHELINE) _Atomic uint64_t t_send; /* sender's stamp */
	/* Set by the sender before the trial it makes the row's last (the
	 * run was interrupted: bench_stop_requested); 0 until then. */
	atomic_uint last_seq;
	/* Mechanism words. */
	_Alignas(BENCH_CACHELINE) atomic_uint word;    /* flag / futex word */
	_Alignas(BENCH_CACHELINE) atomic_uint word2;   /* second line (ping-pong reply) */
	_Alignas(BENCH_CACHELINE) atomic_uint sent_seq; /* what the signal carries */
	atomic_uint handled;                           /* receiver-local (signal handler) */
	uint64_t handler_stamp;
	unsigned scenario;            /* SC_* of this row */
	nemo_wait_policy policy;      /* receiver's policy when the row sets one (policy suite) */
	pid_t rx_tid;                 /* receiver's thread id (for tgkill) */
	pid_t pid;
	void *priv;                   /* mechanism-private state */
	char why[160];                /* setup failure reason */
} uc_ctx;

typedef struct uc_mech {
	const char *name;
	const char *summary;
	unsigned scenarios;           /* SC_* this mechanism can be measured in */
	/** Main thread, before the threads start; 0 or errno with c->why set. */
	int (*setup)(uc_ctx *c);
	void (*teardown)(uc_ctx *c);
	/** Receiver thread, before the first trial / after the last (optional). */
	void (*rx_init)(uc_ctx *c);
	void (*rx_fini)(uc_ctx *c);
	/** Sender thread, before the first trial / after the last (optional). */
	void (*tx_init)(uc_ctx *c);
	void (*tx_fini)(uc_ctx *c);
	/** Wait for signal seq; return the wake stamp (ticks) or 0 to let the
	 *  harness stamp right after the return. */
	uint64_t (*rx_wait)(uc_ctx *c, unsigned seq);
	/** Deliver signal seq. */
	void (*tx_signal)(uc_ctx *c, unsigned seq);
	/** After the sender's second stamp (reap completions...; optional). */
	void (*tx_after)(uc_ctx *c, unsigned seq);
	/** The sender measures the latency itself: half of its own
	 *  stamp-to-stamp time (round-trip mechanisms). */
	bool sender_measures;
} uc_mech;

/** The mechanism called name, or NULL. */
const uc_mech *unicast_find(const char *name);

/**
 * Measure one row: mechanism m in scenario sc (SC_*; SC_LOADED adds the
 * busy neighbour on dst) from CPU src to CPU dst, o->trials trials, and
 * append it to results.  Returns false if the mechanism cannot run here,
 * with the reason in why.  An interrupted run may append a row of fewer
 * trials, or none (check the size of results).
 */
bool unicast_row(const bench_opts *o, const uc_mech *m, unsigned sc, int src, int dst,
		 json_t *results, char *why, size_t whylen);

/** unicast_row with the receiver's wait policy forced (kind != DEFAULT),
 *  a label (the row's scenario; the row also gets "policy") and a tag
 *  that makes its samples file name unique. */
bool unicast_row_policy(const bench_opts *o, const uc_mech *m, unsigned sc, int src, int dst,
			const nemo_wait_policy *pol, const char *label, const char *tag,
			json_t *results, char *why, size_t whylen);

/* One row's measurements, gathered over one or more rounds (--rounds):
 * uc_acc_init, uc_measure once per round, uc_emit, uc_acc_free. */
typedef struct uc_acc {
	const uc_mech *m;
	unsigned sc;
	double *lat, *snd;            /* room for the row's trials each */
	long n;                       /* filled so far */
	double ctx, vctx, cpu_ns;     /* sums weighted by trials */
	double probe_before, probe_after;   /* first round's, last round's */
	bool failed;
} uc_acc;

/** An empty row of m in scenario sc, with room for `trials` trials. */
void uc_acc_init(uc_acc *acc, const uc_mech *m, unsigned sc, long trials);

/**
 * Measure `trials` more trials (after o->warmup unmeasured ones) of acc's
 * mechanism from CPU src to CPU dst, appended to acc; the delay before
 * each signal is o->delay_*.  Returns false if the mechanism cannot run
 * here, with the reason in why.  An interrupted run (bench.h) ends it
 * early, at a trial boundary: acc->n then grew by fewer, maybe none.
 */
bool uc_measure(const bench_opts *o, uc_acc *acc, int src, int dst,
		const nemo_wait_policy *pol, long trials, char *why, size_t whylen);

/** Append acc's row to results (as unicast_row_policy's label, tag);
 *  nothing if it has no trials (an interrupted run). */
void uc_emit(const bench_opts *o, uc_acc *acc, int src, int dst,
	     const nemo_wait_policy *pol, const char *label, const char *tag, json_t *results);

void uc_acc_free(uc_acc *acc);

/** The baseline mechanisms (mech_baseline.c), NULL-terminated. */
extern const uc_mech *const uc_baselines[];
/** The events layer's mechanisms and ck-ec (mech_events.c). */
extern const uc_mech *const uc_events[];
/** The messaging layers' mechanisms (mech_messaging.c). */
extern const uc_mech *const uc_messaging[];

#endif
