/*
 * unicast.c - suite `unicast`: one-way wake latency and sender cost of
 * one sender and one receiver on two CPUs, for every mechanism and
 * scenario asked for.  The method is in bench.h, mech.h and unicast.h.
 */
#define _GNU_SOURCE
#include "unicast.h"
#include "xproc.h"

#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static bool uc_has(const char *name)
{
	return unicast_find(name) != NULL || xproc_scenarios(name) != 0;
}

static void uc_list(FILE *out)
{
	mech_list(ROLE_UNICAST, out);
	/* The cross-process rows (suites/xproc.c): run when named. */
	for (int i = 0; xproc_mechs[i]; i++) {
		unsigned s = xproc_scenarios(xproc_mechs[i]);
		fprintf(out, "    %-20s [%s%s%s] cross-process (only when named in --mechanisms)\n", xproc_mechs[i],
			(s & SC_POLLING) ? "polling" : "", (s & SC_POLLING) && (s & SC_BLOCKED) ? "," : "",
			(s & SC_BLOCKED) ? "blocked" : "");
	}
}

static void uc_help(FILE *out)
{
	fprintf(out,
"One-way wake latency, Nemo method: the receiver announces it is about to\n"
"wait; the sender waits a random delay (--delay-us), reads the cycle counter,\n"
"signals; the receiver reads the cycle counter right after it wakes.\n"
"Scenarios: polling (receiver watches memory), blocked (asleep in the kernel),\n"
"loaded (asleep; a busy thread shares its CPU), busy (computing, not watching).\n"
"Mechanisms [scenarios]:\n");
	uc_list(out);
}

/* --------------------------------------------------------------- one row */

struct uc_run {
	const mech_wake *m;           /* the mechanism's unicast hooks */
	const char *name;
	mech_ctx *c;
	long total, warmup;
	long measured;                /* sender: trials measured (fewer if interrupted) */
	double *lat, *snd;
	double ctx, vctx, cpu_ns;
	double dmin, dmax;
	uint64_t seed;
};

static void *uc_receiver(void *p)
{
	struct uc_run *r = p;
	mech_ctx *c = r->c;
	pthread_setname_np(pthread_self(), "bench-receiver");   /* top -H, tests */
	c->rx_tid = (pid_t)syscall(SYS_gettid);
	if (r->m->rx_init)
		r->m->rx_init(c, 0);
	long v0 = 0, t0 = 0, v1, t1;
	double cpu0 = 0;
	long i = 0;
	for (; i < r->total; i++) {
		unsigned seq = (unsigned)i + 1;
		if (i == r->warmup) {
			thread_ctx_switches(&v0, &t0);
			cpu0 = thread_cpu_ns();
		}
		atomic_store_explicit(&c->ready, seq, memory_order_release);
		uint64_t stamp = r->m->rx_wait(c, 0, seq);
		if (!stamp)
			stamp = nemo_ticks_ordered();
		uint64_t sent = atomic_load_explicit(&c->t_send, memory_order_acquire);
		if (i >= r->warmup && !r->m->sender_measures)
			r->lat[i - r->warmup] = nemo_ticks_to_ns((int64_t)(stamp - sent));
		/* The sender made this trial the last (interrupted). */
		if (atomic_load_explicit(&c->last, memory_order_acquire) == seq) {
			i++;
			break;
		}
	}
	long n = i - r->warmup;       /* trials measured */
	if (n > 0) {
		r->cpu_ns = (thread_cpu_ns() - cpu0) / (double)n;
		thread_ctx_switches(&v1, &t1);
		r->vctx = (double)(v1 - v0) / (double)n;
		r->ctx = (double)(t1 - t0) / (double)n;
	}
	if (r->m->rx_fini)
		r->m->rx_fini(c, 0);
	atomic_store_explicit(&c->ready, (unsigned)i + 1, memory_order_release);
	return NULL;
}

static void *uc_sender(void *p)
{
	struct uc_run *r = p;
	mech_ctx *c = r->c;
	uint64_t rng = r->seed | 1;
	/* In top -H; and a test that sees it knows that a row is under way. */
	pthread_setname_np(pthread_self(), "bench-sender");
	if (r->m->tx_init)
		r->m->tx_init(c);
	long i = 0;
	for (; i < r->total; i++) {
		unsigned seq = (unsigned)i + 1;
		wait_until_eq(&c->ready, seq, BENCH_STUCK_S, r->name);
		/* Interrupted: this trial, a whole one, is the row's last; the
		 * receiver learns it when it wakes. */
		bool last = bench_stop_requested();
		if (last)
			atomic_store_explicit(&c->last, seq, memory_order_release);
		random_delay(&rng, r->dmin, r->dmax);
		uint64_t t0 = nemo_ticks_ordered();
		atomic_store_explicit(&c->t_send, t0, memory_order_release);
		r->m->signal(c, seq);
		uint64_t t1 = nemo_ticks_ordered();
		if (r->m->tx_after)
			r->m->tx_after(c, seq);
		if (i >= r->warmup) {
			double ns = nemo_ticks_to_ns((int64_t)(t1 - t0));
			r->snd[i - r->warmup] = ns;
			if (r->m->sender_measures)
				r->lat[i - r->warmup] = ns / 2;
			progress_add(1);
		}
		if (last) {
			i++;
			break;
		}
	}
	r->measured = i > r->warmup ? i - r->warmup : 0;
	wait_until_eq(&c->ready, (unsigned)i + 1, BENCH_STUCK_S, r->name);
	if (r->m->tx_fini)
		r->m->tx_fini(c);
	return NULL;
}

bool unicast_row(const bench_opts *o, const bench_mech *m, unsigned sc, int src, int dst,
		 json_t *results, char *why, size_t whylen)
{
	return unicast_row_policy(o, m, sc, src, dst, NULL, NULL, NULL, results, why, whylen);
}

bool uc_measure(const bench_opts *o, uc_acc *acc, int src, int dst,
		const nemo_wait_policy *pol, long trials, char *why, size_t whylen)
{
	const mech_wake *m = &acc->m->unicast;
	unsigned sc = acc->sc;
	mech_ctx *c = xaligned(sizeof *c);
	memset(c, 0, sizeof *c);
	c->scenario = sc;
	c->waiters = 1;
	c->pid = getpid();
	/* nemo's receivers: the row's policy if it forces one, else spin
	 * when polling and block otherwise (mech.h). */
	if (pol && pol->kind != NEMO_WAIT_DEFAULT)
		c->policy = *pol;
	else
		c->policy = (nemo_wait_policy){ sc == SC_POLLING ? NEMO_WAIT_SPIN : NEMO_WAIT_BLOCK, 0 };
	if (m->setup && m->setup(c) != 0) {
		snprintf(why, whylen, "%s", c->why[0] ? c->why : "setup failed");
		free(c);
		return false;
	}
	struct uc_run r = {
		.m = m, .name = acc->m->name, .c = c, .total = trials + o->warmup, .warmup = o->warmup,
		.lat = acc->lat + acc->n,
		.snd = acc->snd + acc->n,
		.dmin = o->delay_min_us, .dmax = o->delay_max_us,
		.seed = o->seed ^ ((uint64_t)sc << 32) ^ (uint64_t)(uintptr_t)acc->m ^ (uint64_t)acc->n,
	};
	double before = coherence_probe(src, dst, 1000);
	if (acc->n == 0)
		acc->probe_before = before;
	busy_thread busy;
	if (sc == SC_LOADED)
		busy_start(&busy, dst);
	pthread_t th[2];
	thread_start_pinned(&th[0], dst, uc_receiver, &r);
	thread_start_pinned(&th[1], src, uc_sender, &r);
	progress_join(th, 2);
	if (sc == SC_LOADED)
		busy_stop(&busy);
	acc->probe_after = coherence_probe(src, dst, 1000);
	if (m->teardown)
		m->teardown(c);
	free(c);
	/* All of them, unless the run was interrupted. */
	long got = r.measured;
	acc->ctx += r.ctx * (double)got;
	acc->vctx += r.vctx * (double)got;
	acc->cpu_ns += r.cpu_ns * (double)got;
	acc->n += got;
	return true;
}

void uc_emit(const bench_opts *o, uc_acc *acc, int src, int dst,
	     const nemo_wait_policy *pol, const char *label, const char *tag, json_t *results)
{
	if (acc->n == 0)
		return;               /* interrupted before its first trial */
	row out = { .mechanism = acc->m->name, .scenario = label ? label : scenario_name(acc->sc),
		    .tag = tag, .src = src, .dst = dst, .trials = acc->n };
	out.probe_before = acc->probe_before;
	out.probe_after = acc->probe_after;
	out.lat_ns = acc->lat;
	out.nlat = (size_t)acc->n;
	out.send_ns = acc->snd;
	out.ctx = acc->ctx / (double)acc->n;
	out.vctx = acc->vctx / (double)acc->n;
	out.cpu_ns = acc->cpu_ns / (double)acc->n;
	row_emit(o, &out, results);
	if (pol) {
		char name[32];
		nemo_wait_policy_format(pol, name, sizeof name);
		json_t *j = json_array_get(results, json_array_size(results) - 1);
		json_object_set_new(j, "policy", json_string(name));
	}
}

void uc_acc_init(uc_acc *acc, const bench_mech *m, unsigned sc, long trials)
{
	*acc = (uc_acc){ .m = m, .sc = sc,
				.lat = xcalloc((size_t)trials, sizeof(double)),
				.snd = xcalloc((size_t)trials, sizeof(double)) };
}

void uc_acc_free(uc_acc *acc)
{
	free(acc->lat);
	free(acc->snd);
}

bool unicast_row_policy(const bench_opts *o, const bench_mech *m, unsigned sc, int src, int dst,
			const nemo_wait_policy *pol, const char *label, const char *tag,
			json_t *results, char *why, size_t whylen)
{
	uc_acc acc;
	uc_acc_init(&acc, m, sc, o->trials);
	bool ok = uc_measure(o, &acc, src, dst, pol, o->trials, why, whylen);
	if (ok)
		uc_emit(o, &acc, src, dst, pol, label, tag, results);
	uc_acc_free(&acc);
	return ok;
}

static unsigned row_scenarios(const bench_opts *o, const bench_mech *m)
{
	return o->scenarios ? (m->unicast.scenarios & o->scenarios) : m->unicast.scenarios;
}

/*
 * The rows, interleaved: each row's trials are split into o->rounds
 * rounds, and every round runs a share of every row in turn.  So every
 * row's samples come from the same stretch of the run, and when the host
 * moves the vCPUs (the coherence floor jumps between about 30, 60 and
 * 240 ns here), all rows see the move alike: ratios between rows of one
 * run stay meaningful.
 */
static void uc_run(const bench_opts *o, json_t *results, json_t *config)
{
	const bench_mech *sel[BENCH_MAX_LIST * 2];
	const char *xsel[BENCH_MAX_LIST];
	int n = 0, nx = 0;
	if (o->nmechs) {
		/* Cross-process mechanisms (suites/xproc.c) run only when named:
		 * each row forks its receiver. */
		for (int i = 0; i < o->nmechs; i++)
			if (unicast_find(o->mechs[i]))
				sel[n++] = unicast_find(o->mechs[i]);
			else
				xsel[nx++] = o->mechs[i];
	} else {
		n = mech_all(ROLE_UNICAST, sel, BENCH_MAX_LIST * 2);
	}
	/* The rows, in output order. */
	uc_acc *rows = xcalloc((size_t)n * SC_COUNT, sizeof *rows);
	int nrows = 0;
	for (int i = 0; i < n; i++) {
		unsigned s = row_scenarios(o, sel[i]);
		for (int b = 0; b < SC_COUNT; b++)
			if (s & (1u << b))
				uc_acc_init(&rows[nrows++], sel[i], 1u << b, o->trials);
	}
	xproc_acc *xrows = xcalloc((size_t)nx * 2 + 1, sizeof *xrows);
	bool *xfailed = xcalloc((size_t)nx * 2 + 1, sizeof *xfailed);
	int nxrows = 0;
	for (int i = 0; i < nx; i++) {
		unsigned s = xproc_scenarios(xsel[i]);
		s = o->scenarios ? (s & o->scenarios) : s;
		if (!s)     /* named (xsel holds only named ones) */
			warn(o, "mechanism %s has none of the requested scenarios; skipped", xsel[i]);
		for (unsigned b = SC_POLLING; b <= SC_BLOCKED; b <<= 1)
			if (s & b)
				xproc_acc_init(&xrows[nxrows++], xsel[i], b, o->trials);
	}
	/* Nothing to measure is an error before anything else is said. */
	if (!nrows && !nxrows)
		usage_error("no mechanism supports the requested scenarios (see `nemo-bench list`)");
	for (int i = 0; i < n; i++)
		if (o->nmechs && !row_scenarios(o, sel[i]))
			warn(o, "mechanism %s has none of the requested scenarios; skipped", sel[i]->name);
	json_t *skipped = json_array();
	progress_begin(o, "unicast", (uint64_t)(nrows + nxrows) * (uint64_t)o->trials);
	for (int k = 0; k < o->rounds && !bench_interrupted(); k++) {
		long share = o->trials / o->rounds + (k < o->trials % o->rounds ? 1 : 0);
		for (int i = 0; i < nrows && !bench_interrupted(); i++) {
			if (rows[i].failed || !share)
				continue;
			char why[200];
			if (uc_measure(o, &rows[i], o->src, o->dst, NULL, share, why, sizeof why))
				continue;
			/* It cannot run here: none of its rows will. */
			mechanism_unavailable(o, rows[i].m->name, why, skipped);
			for (int j = 0; j < nrows; j++)
				if (rows[j].m == rows[i].m)
					rows[j].failed = true;
		}
		/* The cross-process rows take their turn in the same round. */
		for (int i = 0; i < nxrows && !bench_interrupted(); i++) {
			if (xfailed[i] || !share)
				continue;
			char why[200];
			if (xproc_measure(o, &xrows[i], o->src, o->dst, share, why, sizeof why))
				continue;
			mechanism_unavailable(o, xrows[i].name, why, skipped);
			for (int j = 0; j < nxrows; j++)
				if (!strcmp(xrows[j].name, xrows[i].name))
					xfailed[j] = true;
		}
	}
	progress_end();
	for (int i = 0; i < nrows; i++) {
		if (!rows[i].failed)
			uc_emit(o, &rows[i], o->src, o->dst, NULL, NULL, NULL, results);
		uc_acc_free(&rows[i]);
	}
	free(rows);
	for (int i = 0; i < nxrows; i++) {
		if (!xfailed[i])
			xproc_emit(o, &xrows[i], o->src, o->dst, results);
		xproc_acc_free(&xrows[i]);
	}
	free(xrows);
	free(xfailed);
	json_object_set_new(config, "skipped", skipped);
	json_object_set_new(config, "rounds", json_integer(o->rounds));
}

const suite suite_unicast = {
	.name = "unicast",
	.summary = "one-way wake latency and sender cost, one sender and one receiver",
	.options = OPT_MECHS | OPT_SCENARIOS | OPT_SRC_DST | OPT_ROUNDS | OPT_SUMMARY,
	.default_trials = 5000,
	.default_delay_min_us = 20,
	.default_delay_max_us = 50,
	.help = uc_help,
	.list = uc_list,
	.has_mechanism = uc_has,
	.run = uc_run,
};
