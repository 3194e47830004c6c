/*
 * unicast.h - the unicast row runner, which the unicast, broadcast
 * (one-way spin rows), coherence and policy suites share.
 *
 * It measures the unicast role of a mechanism (mech.h): the receiver
 * announces `ready = seq` and calls rx_wait(c, 0, seq); the sender sees
 * the announcement, waits the random delay, stamps t_send, calls
 * signal(c, seq), stamps again.
 */
#ifndef NEMO_BENCH_UNICAST_H
#define NEMO_BENCH_UNICAST_H

#include "mech.h"

/** The mechanism called name that plays the unicast role, or NULL. */
static inline const bench_mech *unicast_find(const char *name)
{
	return mech_find(ROLE_UNICAST, name);
}

/**
 * Measure one row: mechanism m in scenario sc (SC_*; SC_LOADED adds the
 * busy neighbour on dst) from CPU src to CPU dst, o->trials trials, and
 * append it to results.  Returns false if the mechanism cannot run here,
 * with the reason in why.  An interrupted run may append a row of fewer
 * trials, or none (check the size of results).
 */
bool unicast_row(const bench_opts *o, const bench_mech *m, unsigned sc, int src, int dst,
		 json_t *results, char *why, size_t whylen);

/** unicast_row with the receiver's wait policy forced (kind != DEFAULT),
 *  a label (the row's scenario; the row also gets "policy") and a tag
 *  that makes its samples file name unique. */
bool unicast_row_policy(const bench_opts *o, const bench_mech *m, unsigned sc, int src, int dst,
			const nemo_wait_policy *pol, const char *label, const char *tag,
			json_t *results, char *why, size_t whylen);

/* One row's measurements, gathered over one or more rounds (--rounds):
 * uc_acc_init, uc_measure once per round, uc_emit, uc_acc_free. */
typedef struct uc_acc {
	const bench_mech *m;
	unsigned sc;
	double *lat, *snd;            /* room for the row's trials each */
	long n;                       /* filled so far */
	double ctx, vctx, cpu_ns;     /* sums weighted by trials */
	double probe_before, probe_after;   /* first round's, last round's */
	bool failed;
} uc_acc;

/** An empty row of m in scenario sc, with room for `trials` trials. */
void uc_acc_init(uc_acc *acc, const bench_mech *m, unsigned sc, long trials);

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

#endif
