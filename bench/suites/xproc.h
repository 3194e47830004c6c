/*
 * xproc.h - cross-process unicast rows (sender and receiver in different
 * processes): nemo's shared domains (nemo/xproc.h) and the baselines a
 * multi-process program uses today.
 *
 *   nemo-am-xproc       an active message to a place of a shared domain,
 *                       waiting in nemo_xproc_wait; latency to handler entry
 *   nemo-event-xproc    a notification to such a place (nemo_xproc_notify)
 *                       [polling, blocked]
 *   futex-xproc         a shared futex word (FUTEX_WAKE without PRIVATE)
 *   eventfd-xproc       an eventfd inherited across fork
 *   pipe-xproc          a pipe, one byte per signal
 *   unix-socket-xproc   a Unix stream socket pair, one byte per signal
 *                       [blocked]
 *
 * The method is unicast's (docs/architecture.md, nemo-bench): the
 * receiver, a child process pinned to dst, announces ready = seq and
 * waits; the sender, this process pinned to src, sees it, waits the
 * random delay, stamps, signals, stamps again; the receiver stamps on
 * wake-up (nemo rows: at handler entry) into a shared page.  Rows are
 * the unicast rows of docs/bench-json.md (row_emit).
 */
#ifndef NEMO_BENCH_XPROC_H
#define NEMO_BENCH_XPROC_H

#include "bench.h"

/** The mechanisms, NULL-terminated. */
extern const char *const xproc_mechs[];

/** SC_* scenarios mechanism name runs in, 0 if it is not one of these. */
unsigned xproc_scenarios(const char *name);

/** One row's measurements over one or more rounds, as uc_acc. */
typedef struct xproc_acc {
	const char *name;
	unsigned sc;
	double *lat, *snd;            /* room for the row's trials each */
	long n;                       /* filled so far */
	double ctx, vctx, cpu_ns;     /* receiver's, sums weighted by trials */
	double probe_before, probe_after;
} xproc_acc;

/** An empty row of mechanism name in scenario sc, room for `trials`. */
void xproc_acc_init(xproc_acc *a, const char *name, unsigned sc, long trials);

/**
 * Measure `trials` more trials (after o->warmup unmeasured ones) from
 * CPU src (this process) to CPU dst (a forked receiver), appended to a.
 * False, with the reason in why, if it cannot run here or the receiver
 * failed (then nothing is appended).
 */
bool xproc_measure(const bench_opts *o, xproc_acc *a, int src, int dst, long trials, char *why,
		   size_t whylen);

/** Append a's row to results (row_emit); nothing if it has no trials. */
void xproc_emit(const bench_opts *o, xproc_acc *a, int src, int dst, json_t *results);

void xproc_acc_free(xproc_acc *a);

/**
 * All of it at once: measure mechanism name in scenario sc (SC_POLLING or SC_BLOCKED) from
 * CPU src (this process) to CPU dst (a forked receiver), o->warmup + o->trials
 * trials, and append its row to results.  False, with the reason in why,
 * if it cannot run here (or the receiver failed).
 */
bool xproc_row(const bench_opts *o, const char *name, unsigned sc, int src, int dst, json_t *results,
	       char *why, size_t whylen);

#endif
