/*
 * broadcast.c - suite `broadcast`: one sender wakes K waiters at once.
 *
 * Each waiter stamps its own wake-up, so every broadcast yields K
 * latencies: the first and last waiter's, and their standard deviation
 * (the synchrony sigma of the Nemo paper's broadcast CDFs).
 *
 * Scenarios: `blocked` (the waiters sleep in the kernel: the sender
 * waits 20-50 us after the last announcement) and `polling` (they are
 * still within their spin budget: a few hundred ns to 2 us).  Rows are
 * interleaved in rounds (--rounds) as unicast's, and the one-way spin
 * latency from the sender to every waiter CPU is measured in the same
 * rounds, so "last waiter vs. one cache-line transfer" is judged within
 * one run.
 *
 * It measures the broadcast role of a mechanism (mech.h): each waiter
 * announces `slot[w].ready = gen` and calls rx_wait(c, w, gen); the
 * sender sees every announcement, calls prepare(c, gen) if any, waits the
 * random delay of the row's scenario, stamps t_send, calls signal(c, gen),
 * stamps again.
 */
#define _GNU_SOURCE
#include "plan.h"
#include "unicast.h"

#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

static bool bc_has(const char *name)
{
	return mech_find(ROLE_BROADCAST, name) != NULL;
}

static void bc_list(FILE *out)
{
	mech_list(ROLE_BROADCAST, out);
}

static void bc_help(FILE *out)
{
	fprintf(out,
"One sender wakes K waiters (--waiters K or a list).  Waiters take --cpus\n"
"round-robin (default: every CPU but the sender's, each waiter on its own\n"
"core first, nearest to the sender first); a row where two of its threads\n"
"share a CPU is marked oversubscribed.  Every waiter stamps its own\n"
"wake-up: rows report first_ns, last_ns and spread_ns (stddev of the K\n"
"wake times of one broadcast) over all broadcasts.\n"
"Scenarios: blocked (waiters asleep in the kernel: the sender waits\n"
"--delay-us after the last waiter announced it is about to wait) and\n"
"polling (still within their spin budget: --poll-delay-us; nemo's waiters\n"
"use --poll-policy).  Oversubscribed polling rows run only for K given\n"
"with --waiters.  The one-way spin latency from the sender to every\n"
"waiter CPU is measured in the same rounds (rows `spin`, `one-way`).\n"
"Mechanisms [scenarios]:\n");
	bc_list(out);
}

/* -------------------------------------------------------------- one row */

/* One row's measurements, gathered over the rounds. */
struct bc_acc {
	const bench_mech *m;
	unsigned sc;
	int K;
	int *cpus;                    /* K: waiter w's CPU */
	bool oversubscribed;
	double *lat;                  /* trials * K, [trial][waiter] */
	double *snd;                  /* trials */
	long n;                       /* trials filled so far */
	double ctx, vctx, cpu;        /* per-trial means over waiters, weighted by trials */
	double probe_before, probe_after;
	bool failed;
};

/* One round of one row: what its threads share. */
struct bc_run {
	const mech_wake *m;           /* the mechanism's broadcast hooks */
	const char *name;
	mech_ctx *c;
	long total, warmup;
	long measured;                /* sender: broadcasts measured (fewer if interrupted) */
	double *lat;                  /* trials * K, [trial][waiter] */
	double *snd;
	double *ctx, *vctx, *cpu;     /* per waiter */
	double dmin, dmax;
	uint64_t seed;
};

struct bc_waiter_arg {
	struct bc_run *r;
	int w;
};

static void *bc_waiter(void *p)
{
	struct bc_waiter_arg *a = p;
	struct bc_run *r = a->r;
	mech_ctx *c = r->c;
	pthread_setname_np(pthread_self(), "bench-waiter");
	int K = c->waiters, w = a->w;
	long v0 = 0, t0 = 0, v1, t1;
	double cpu0 = 0;
	/* Before the first `ready`: the sender broadcasts only once every
	 * waiter has announced generation 1, so all of them are set up. */
	if (r->m->rx_init)
		r->m->rx_init(c, w);
	long i = 0;
	for (; i < r->total; i++) {
		unsigned gen = (unsigned)i + 1;
		if (i == r->warmup) {
			thread_ctx_switches(&v0, &t0);
			cpu0 = thread_cpu_ns();
		}
		atomic_store_explicit(&c->slot[w].ready, gen, memory_order_release);
		uint64_t stamp = r->m->rx_wait(c, w, gen);
		if (!stamp)
			stamp = nemo_ticks_ordered();
		uint64_t sent = atomic_load_explicit(&c->t_send, memory_order_acquire);
		if (i >= r->warmup)
			r->lat[(size_t)(i - r->warmup) * (size_t)K + (size_t)w] =
				nemo_ticks_to_ns((int64_t)(stamp - sent));
		/* The sender made this broadcast the last (interrupted). */
		if (atomic_load_explicit(&c->last, memory_order_acquire) == gen) {
			i++;
			break;
		}
	}
	long n = i - r->warmup;       /* broadcasts measured */
	if (n > 0) {
		r->cpu[w] = (thread_cpu_ns() - cpu0) / (double)n;
		thread_ctx_switches(&v1, &t1);
		r->vctx[w] = (double)(v1 - v0) / (double)n;
		r->ctx[w] = (double)(t1 - t0) / (double)n;
	}
	if (r->m->rx_fini)
		r->m->rx_fini(c, w);
	atomic_store_explicit(&c->slot[w].ready, (unsigned)i + 1, memory_order_release);
	return NULL;
}

static void wait_all(mech_ctx *c, unsigned gen, const char *name)
{
	for (int w = 0; w < c->waiters; w++)
		wait_until_eq(&c->slot[w].ready, gen, BENCH_STUCK_S, name);
}

static void *bc_sender(void *p)
{
	struct bc_run *r = p;
	mech_ctx *c = r->c;
	uint64_t rng = r->seed | 1;
	pthread_setname_np(pthread_self(), "bench-sender");
	if (r->m->tx_init)
		r->m->tx_init(c);
	long i = 0;
	for (; i < r->total; i++) {
		unsigned gen = (unsigned)i + 1;
		wait_all(c, gen, r->name);
		/* Interrupted: this broadcast, a whole one, is the row's last;
		 * every waiter learns it when it wakes. */
		bool last = bench_stop_requested();
		if (last)
			atomic_store_explicit(&c->last, gen, memory_order_release);
		if (r->m->prepare)
			r->m->prepare(c, gen);
		random_delay(&rng, r->dmin, r->dmax);
		uint64_t t0 = nemo_ticks_ordered();
		atomic_store_explicit(&c->t_send, t0, memory_order_release);
		r->m->signal(c, gen);
		uint64_t t1 = nemo_ticks_ordered();
		if (i >= r->warmup) {
			r->snd[i - r->warmup] = nemo_ticks_to_ns((int64_t)(t1 - t0));
			progress_add(1);
		}
		if (last) {
			i++;
			break;
		}
	}
	r->measured = i > r->warmup ? i - r->warmup : 0;
	wait_all(c, (unsigned)i + 1, r->name);
	if (r->m->tx_fini)
		r->m->tx_fini(c);
	return NULL;
}

/* Measure `trials` more broadcasts of row a (after o->warmup unmeasured
 * ones), appended; false if the mechanism cannot run here (why set). */
static bool bc_measure(const bench_opts *o, struct bc_acc *a, long trials, int round,
		       char *why, size_t whylen)
{
	const mech_wake *m = &a->m->broadcast;
	int K = a->K;
	mech_ctx *c = xaligned(sizeof *c);
	mech_slot *slot = xaligned(sizeof *slot * (size_t)K);
	c->waiters = K;
	c->slot = slot;
	c->scenario = a->sc;
	c->policy = a->sc == SC_POLLING ? o->poll_policy : (nemo_wait_policy){ NEMO_WAIT_BLOCK, 0 };
	c->shared_cpu = a->oversubscribed;
	if (m->setup && m->setup(c) != 0) {
		snprintf(why, whylen, "%s", c->why[0] ? c->why : "setup failed");
		free(slot);
		free(c);
		return false;
	}
	bool polling = a->sc == SC_POLLING;
	struct bc_run r = {
		.m = m, .name = a->m->name, .c = c, .total = trials + o->warmup, .warmup = o->warmup,
		.lat = a->lat + (size_t)a->n * (size_t)K,
		.snd = a->snd + a->n,
		.ctx = xcalloc((size_t)K, sizeof(double)),
		.vctx = xcalloc((size_t)K, sizeof(double)),
		.cpu = xcalloc((size_t)K, sizeof(double)),
		.dmin = polling ? o->poll_delay_min_us : o->delay_min_us,
		.dmax = polling ? o->poll_delay_max_us : o->delay_max_us,
		.seed = o->seed ^ (uint64_t)K ^ ((uint64_t)a->sc << 32) ^ (uint64_t)(uintptr_t)a->m ^
			((uint64_t)round * 0x9e3779b97f4a7c15ULL),
	};
	double before = coherence_probe(o->src, a->cpus[0], 1000);
	if (a->n == 0)
		a->probe_before = before;
	pthread_t *th = xcalloc((size_t)K + 1, sizeof *th);
	struct bc_waiter_arg *args = xcalloc((size_t)K, sizeof *args);
	for (int w = 0; w < K; w++) {
		args[w] = (struct bc_waiter_arg){ &r, w };
		thread_start_pinned(&th[w], a->cpus[w], bc_waiter, &args[w]);
	}
	thread_start_pinned(&th[K], o->src, bc_sender, &r);
	progress_join(th, K + 1);
	a->probe_after = coherence_probe(o->src, a->cpus[0], 1000);
	if (m->teardown)
		m->teardown(c);
	/* All of them, unless the run was interrupted. */
	long got = r.measured;
	for (int w = 0; w < K; w++) {
		a->ctx += r.ctx[w] / K * (double)got;
		a->vctx += r.vctx[w] / K * (double)got;
		a->cpu += r.cpu[w] / K * (double)got;
	}
	a->n += got;
	free(r.ctx);
	free(r.vctx);
	free(r.cpu);
	free(th);
	free(args);
	free(slot);
	free(c);
	return true;
}

/* First, last and spread of every broadcast, from the [trial][waiter] matrix. */
static void per_broadcast(row *out, const double *lat, long trials, int K)
{
	out->first_ns = xcalloc((size_t)trials, sizeof(double));
	out->last_ns = xcalloc((size_t)trials, sizeof(double));
	out->spread_ns = xcalloc((size_t)trials, sizeof(double));
	for (long t = 0; t < trials; t++) {
		const double *v = lat + (size_t)t * (size_t)K;
		double lo = v[0], hi = v[0];
		for (int w = 1; w < K; w++) {
			if (v[w] < lo)
				lo = v[w];
			if (v[w] > hi)
				hi = v[w];
		}
		out->first_ns[t] = lo;
		out->last_ns[t] = hi;
		out->spread_ns[t] = stats_stddev(v, (size_t)K);
	}
}

/* The one-way spin rows: sender -> each waiter CPU, and their medians. */
struct oneway {
	int n;
	int *cpu;
	uc_acc *acc;
	double *p50;
};

static double oneway_p50_for(const struct oneway *ow, int cpu)
{
	for (int i = 0; i < ow->n; i++)
		if (ow->cpu[i] == cpu)
			return ow->p50[i];
	return -1;
}

static void bc_emit(const bench_opts *o, struct bc_acc *a, const struct oneway *ow, json_t *results)
{
	int K = a->K;
	long trials = a->n;
	row out = { .mechanism = a->m->name, .scenario = scenario_name(a->sc), .src = o->src,
		    .dst = a->cpus[0], .trials = trials, .waiters = K, .waiter_cpus = a->cpus };
	out.probe_before = a->probe_before;
	out.probe_after = a->probe_after;
	per_broadcast(&out, a->lat, trials, K);
	out.lat_waiter = xcalloc((size_t)trials * (size_t)K, sizeof(int));
	for (size_t i = 0; i < (size_t)trials * (size_t)K; i++)
		out.lat_waiter[i] = (int)(i % (size_t)K);
	out.ctx = a->ctx / (double)trials;
	out.vctx = a->vctx / (double)trials;
	out.cpu_ns = a->cpu / (double)trials;
	out.lat_ns = a->lat;
	out.nlat = (size_t)trials * (size_t)K;
	out.send_ns = a->snd;
	row_emit(o, &out, results);
	json_t *j = json_array_get(results, json_array_size(results) - 1);
	if (a->m->broadcast.nemo_policy) {
		nemo_wait_policy pol = a->sc == SC_POLLING ? o->poll_policy
							    : (nemo_wait_policy){ NEMO_WAIT_BLOCK, 0 };
		char name[32];
		nemo_wait_policy_format(&pol, name, sizeof name);
		json_object_set_new(j, "policy", json_string(name));
	}
	json_object_set_new(j, "oversubscribed", json_boolean(a->oversubscribed));
	/* The floor of the last waiter: the slowest one-way transfer to any
	 * of the row's waiter CPUs (unknown if an interrupted run did not
	 * measure them all). */
	double floor = -1;
	for (int w = 0; w < K; w++) {
		if (a->cpus[w] == o->src)
			continue;
		double p = oneway_p50_for(ow, a->cpus[w]);
		if (p < 0) {
			floor = -1;
			break;
		}
		if (p > floor)
			floor = p;
	}
	json_object_set_new(j, "one_way_spin_p50_ns", floor > 0 ? json_real(floor) : json_null());
	free(out.first_ns);
	free(out.last_ns);
	free(out.spread_ns);
	free(out.lat_waiter);
}

/* ------------------------------------------------------- waiter CPUs, K */

/*
 * The order in which waiters take CPUs: --cpus as given; else every CPU
 * this process may use but the sender's, in plan_waiter_order's order (a
 * core of their own first, nearest to the sender first, then by number).
 * Returns the count (at least 1: with no other CPU, the sender's own).
 */
static int waiter_order(const bench_opts *o, int *order)
{
	if (o->ncpus) {
		memcpy(order, o->cpus, sizeof *order * (size_t)o->ncpus);
		return o->ncpus;
	}
	int *all = xcalloc(BENCH_MAX_CPUS, sizeof *all);
	int nall = bench_usable_cpus(all, BENCH_MAX_CPUS), n = 0;
	int *dist = xcalloc((size_t)nall, sizeof *dist), *core = xcalloc((size_t)nall, sizeof *core);
	int *cand = xcalloc((size_t)nall, sizeof *cand);
	for (int i = 0; i < nall; i++) {
		if (all[i] == o->src)
			continue;
		cand[n] = all[i];
		dist[n] = bench_cpu_distance(o->src, all[i]);
		core[n] = bench_cpu_core(all[i]);
		n++;
	}
	if (n == 0)
		order[n++] = o->src;
	else
		plan_waiter_order(n, cand, dist, core, bench_cpu_core(o->src), order);
	free(all);
	free(dist);
	free(core);
	free(cand);
	return n;
}

/* Distinct CPUs of order[0..n) other than the sender's. */
static int distinct_waiter_cpus(const int *order, int n, int src)
{
	int d = 0;
	for (int i = 0; i < n; i++) {
		bool seen = order[i] == src;
		for (int j = 0; j < i && !seen; j++)
			seen = order[j] == order[i];
		d += !seen;
	}
	return d;
}

/* Does some CPU run two threads of the row (the sender and K waiters)? */
static bool is_oversubscribed(const int *cpus, int K, int src)
{
	for (int i = 0; i < K; i++) {
		if (cpus[i] == src)
			return true;
		for (int j = 0; j < i; j++)
			if (cpus[j] == cpus[i])
				return true;
	}
	return false;
}

/* --------------------------------------------------------------- suite */

static unsigned row_scenarios(const bench_opts *o, const bench_mech *m)
{
	return o->scenarios ? (m->broadcast.scenarios & o->scenarios) : m->broadcast.scenarios;
}

static void bc_run(const bench_opts *o, json_t *results, json_t *config)
{
	const bench_mech *sel[BENCH_MAX_LIST];
	int n = 0;
	if (o->nmechs) {
		for (int i = 0; i < o->nmechs; i++)
			sel[n++] = mech_find(ROLE_BROADCAST, o->mechs[i]);
	} else {
		n = mech_all(ROLE_BROADCAST, sel, BENCH_MAX_LIST);
	}
	int *order = xcalloc(BENCH_MAX_CPUS, sizeof *order);
	int norder = waiter_order(o, order);
	int P = distinct_waiter_cpus(order, norder, o->src);
	int ks_default[BENCH_MAX_LIST];
	const int *ks = o->nwaiters ? o->waiters : ks_default;
	int nk = o->nwaiters ? o->nwaiters : plan_default_ks(P, ks_default, BENCH_MAX_LIST);

	/* The rows, in output order: mechanism, scenario, K. */
	bool any_scenario = false;
	for (int i = 0; i < n; i++)
		any_scenario |= row_scenarios(o, sel[i]) != 0;
	/* Nothing to measure is an error before anything else is said. */
	if (!any_scenario)
		usage_error("no mechanism supports the requested scenarios (see `nemo-bench list`)");
	struct bc_acc *rows = xcalloc((size_t)n * 2 * (size_t)nk, sizeof *rows);
	int nrows = 0;
	json_t *not_run = json_array();
	bool warned_over[BENCH_MAX_LIST] = { false };
	for (int i = 0; i < n; i++) {
		unsigned s = row_scenarios(o, sel[i]);
		if (!s && o->nmechs)
			warn(o, "mechanism %s has none of the requested scenarios; skipped", sel[i]->name);
		for (unsigned sc = SC_POLLING; sc <= SC_BLOCKED; sc <<= 1) {
			if (!(s & sc))
				continue;
			for (int k = 0; k < nk; k++) {
				int K = ks[k];
				int *cpus = xcalloc((size_t)K, sizeof *cpus);
				for (int w = 0; w < K; w++)
					cpus[w] = order[w % norder];
				bool over = is_oversubscribed(cpus, K, o->src);
				/* Waiters that share a CPU cannot all poll: such a
				 * row runs only when K was asked for. */
				if (sc == SC_POLLING && over && !o->nwaiters) {
					free(cpus);
					bool said = false;   /* for an earlier mechanism */
					size_t j;
					json_t *x;
					json_array_foreach(not_run, j, x)
						said |= json_integer_value(json_object_get(x, "waiters")) == K;
					if (said)
						continue;
					char why[160];
					snprintf(why, sizeof why, "%d waiters on %d CPU%s besides the sender's "
						 "cannot all poll (ask for it with --waiters)", K, P, P == 1 ? "" : "s");
					warn(o, "polling, K=%d: not run: %s", K, why);
					json_array_append_new(not_run, json_pack("{s:s,s:i,s:s}", "scenario",
						"polling", "waiters", K, "reason", why));
					continue;
				}
				if (sc == SC_POLLING && over && !warned_over[k]) {
					warned_over[k] = true;
					warn(o, "polling, K=%d: the waiters share CPUs (%d besides the sender's), so "
						"they take turns and each broadcast waits for the scheduler: slow, and "
						"marked oversubscribed", K, P);
				}
				rows[nrows++] = (struct bc_acc){
					.m = sel[i], .sc = sc, .K = K, .cpus = cpus, .oversubscribed = over,
					.lat = xcalloc((size_t)o->trials * (size_t)K, sizeof(double)),
					.snd = xcalloc((size_t)o->trials, sizeof(double)),
				};
			}
		}
	}

	/* One-way spin rows: the sender to every CPU a waiter runs on. */
	struct oneway ow = { 0 };
	ow.cpu = xcalloc((size_t)norder, sizeof *ow.cpu);
	for (int i = 0; i < nrows; i++)
		for (int w = 0; w < rows[i].K; w++) {
			int cpu = rows[i].cpus[w];
			bool seen = cpu == o->src;
			for (int j = 0; j < ow.n && !seen; j++)
				seen = ow.cpu[j] == cpu;
			if (!seen)
				ow.cpu[ow.n++] = cpu;
		}
	ow.acc = xcalloc((size_t)ow.n + 1, sizeof *ow.acc);
	ow.p50 = xcalloc((size_t)ow.n + 1, sizeof *ow.p50);
	const bench_mech *spin = unicast_find("spin");
	for (int i = 0; i < ow.n; i++)
		uc_acc_init(&ow.acc[i], spin, SC_ONE_WAY, o->trials);
	/* The one-way rows wait the polling rows' delay: the receiver polls. */
	bench_opts oo = *o;
	oo.delay_min_us = o->poll_delay_min_us;
	oo.delay_max_us = o->poll_delay_max_us;

	json_t *skipped = json_array();
	progress_begin(o, "broadcast", (uint64_t)(nrows + ow.n) * (uint64_t)o->trials);
	for (int k = 0; k < o->rounds && !bench_interrupted(); k++) {
		long share = o->trials / o->rounds + (k < o->trials % o->rounds ? 1 : 0);
		if (!share)
			continue;
		for (int i = 0; i < nrows && !bench_interrupted(); i++) {
			if (rows[i].failed)
				continue;
			char why[200];
			if (bc_measure(o, &rows[i], share, k, why, sizeof why))
				continue;
			/* It cannot run here, at this K: nor at any larger one. */
			mechanism_unavailable(o, rows[i].m->name, why, skipped);
			for (int j = 0; j < nrows; j++)
				if (rows[j].m == rows[i].m && rows[j].K >= rows[i].K)
					rows[j].failed = true;
		}
		for (int i = 0; i < ow.n && !bench_interrupted(); i++) {
			char why[200];
			if (!uc_measure(&oo, &ow.acc[i], o->src, ow.cpu[i], NULL, share, why, sizeof why))
				fatal("spin: %s", why);
		}
	}
	progress_end();
	for (int i = 0; i < ow.n; i++) {
		if (!ow.acc[i].n) {
			ow.p50[i] = -1;       /* interrupted before it */
			continue;
		}
		double *tmp = xcalloc((size_t)ow.acc[i].n, sizeof *tmp);
		memcpy(tmp, ow.acc[i].lat, sizeof *tmp * (size_t)ow.acc[i].n);
		ow.p50[i] = stats_median(tmp, (size_t)ow.acc[i].n);
		free(tmp);
	}
	for (int i = 0; i < nrows; i++) {
		if (!rows[i].failed && rows[i].n)
			bc_emit(o, &rows[i], &ow, results);
		free(rows[i].cpus);
		free(rows[i].lat);
		free(rows[i].snd);
	}
	for (int i = 0; i < ow.n; i++) {
		if (ow.acc[i].n) {
			uc_emit(&oo, &ow.acc[i], o->src, ow.cpu[i], NULL, NULL, NULL, results);
			json_t *j = json_array_get(results, json_array_size(results) - 1);
			json_object_set_new(j, "distance", json_integer(bench_cpu_distance(o->src, ow.cpu[i])));
		}
		uc_acc_free(&ow.acc[i]);
	}

	json_t *kl = json_array();
	for (int k = 0; k < nk; k++)
		json_array_append_new(kl, json_integer(ks[k]));
	json_t *ol = json_array();
	for (int i = 0; i < norder; i++)
		json_array_append_new(ol, json_integer(order[i]));
	char pol[32];
	nemo_wait_policy_format(&o->poll_policy, pol, sizeof pol);
	json_object_set_new(config, "waiters", kl);
	json_object_set_new(config, "waiter_cpu_order", ol);
	json_object_set_new(config, "rounds", json_integer(o->rounds));
	json_object_set_new(config, "poll_delay_us",
			    json_pack("[f,f]", o->poll_delay_min_us, o->poll_delay_max_us));
	json_object_set_new(config, "poll_policy", json_string(pol));
	json_object_set_new(config, "skipped", skipped);
	json_object_set_new(config, "not_run", not_run);
	free(rows);
	free(ow.cpu);
	free(ow.acc);
	free(ow.p50);
	free(order);
}

const suite suite_broadcast = {
	.name = "broadcast",
	.summary = "one sender wakes K waiters; first/last waiter latency and spread",
	.options = OPT_MECHS | OPT_SCENARIOS | OPT_SRC_DST | OPT_WAITERS | OPT_CPUS | OPT_ROUNDS |
		   OPT_POLL | OPT_SUMMARY,
	.default_trials = 2000,
	.default_delay_min_us = 20,
	.default_delay_max_us = 50,
	.help = bc_help,
	.list = bc_list,
	.has_mechanism = bc_has,
	.run = bc_run,
};
