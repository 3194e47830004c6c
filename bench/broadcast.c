/*
 * broadcast.c - suite `broadcast`: one sender wakes K waiters at once.
 *
 * Each waiter stamps its own wake-up, so every broadcast yields K
 * latencies: the first and last waiter's, and their standard deviation
 * (the synchrony sigma of the Nemo paper's broadcast CDFs).
 */
#define _GNU_SOURCE
#include "broadcast.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ baselines */

struct bcv {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned value;
};

static int bcv_setup(bc_ctx *c)
{
	struct bcv *s = xcalloc(1, sizeof *s);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	c->priv = s;
	return 0;
}

static void bcv_teardown(bc_ctx *c)
{
	struct bcv *s = c->priv;
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

static uint64_t bcv_wait(bc_ctx *c, int w, unsigned gen)
{
	struct bcv *s = c->priv;
	(void)w;
	pthread_mutex_lock(&s->mu);
	while (s->value != gen)
		pthread_cond_wait(&s->cv, &s->mu);
	uint64_t t = nemo_ticks_ordered();
	pthread_mutex_unlock(&s->mu);
	return t;
}

static void bcv_broadcast(bc_ctx *c, unsigned gen)
{
	struct bcv *s = c->priv;
	pthread_mutex_lock(&s->mu);
	s->value = gen;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

static const bc_mech bc_condvar = {
	.name = "condvar",
	.summary = "pthread_cond_broadcast (glibc) to K waiters in pthread_cond_wait",
	.setup = bcv_setup,
	.teardown = bcv_teardown,
	.rx_wait = bcv_wait,
	.tx_broadcast = bcv_broadcast,
};

static uint64_t bfx_wait(bc_ctx *c, int w, unsigned gen)
{
	unsigned v;
	(void)w;
	while ((v = atomic_load_explicit(&c->word, memory_order_acquire)) != gen)
		nemo_futex_wait((uint32_t *)&c->word, v, NULL, NEMO_FUTEX_PRIVATE);
	return 0;
}

static void bfx_broadcast(bc_ctx *c, unsigned gen)
{
	atomic_store_explicit(&c->word, gen, memory_order_release);
	nemo_futex_wake((uint32_t *)&c->word, INT_MAX, NEMO_FUTEX_PRIVATE, NULL);
}

static const bc_mech bc_futex = {
	.name = "futex",
	.summary = "FUTEX_WAKE of all K waiters sleeping on one word",
	.rx_wait = bfx_wait,
	.tx_broadcast = bfx_broadcast,
};

const bc_mech *const bc_baselines[] = { &bc_condvar, &bc_futex, NULL };

static const bc_mech *const *const bc_tables[] = { bc_baselines, bc_events, bc_messaging };

#define FOR_EACH_BC(m)                                                         \
	for (size_t t_ = 0; t_ < sizeof bc_tables / sizeof bc_tables[0]; t_++)  \
		for (const bc_mech *const *p_ = bc_tables[t_]; (m = *p_) != NULL; p_++)

static const bc_mech *find_bc(const char *name)
{
	const bc_mech *m;
	FOR_EACH_BC(m)
		if (strcmp(m->name, name) == 0)
			return m;
	return NULL;
}

static bool bc_has(const char *name)
{
	return find_bc(name) != NULL;
}

static void bc_list(FILE *out)
{
	const bc_mech *m;
	FOR_EACH_BC(m)
		fprintf(out, "    %-20s [blocked] %s\n", m->name, m->summary);
}

static void bc_help(FILE *out)
{
	fprintf(out,
"One sender wakes K waiters (--waiters K or a list, default 1,2,4,8).\n"
"Waiters are pinned round-robin to --cpus (default: every CPU but the\n"
"sender's; with too few CPUs they share).  Every waiter stamps its own\n"
"wake-up: rows report first_ns, last_ns and spread_ns (stddev of the K\n"
"wake times of one broadcast) over all broadcasts.\n"
"Mechanisms:\n");
	bc_list(out);
}

/* -------------------------------------------------------------- one row */

struct bc_run {
	const bc_mech *m;
	bc_ctx *c;
	long total, warmup;
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
	bc_ctx *c = r->c;
	int K = c->waiters, w = a->w;
	long v0 = 0, t0 = 0, v1, t1;
	double cpu0 = 0;
	/* Before the first `ready`: the sender broadcasts only once every
	 * waiter has announced generation 1, so all of them are set up. */
	if (r->m->rx_init)
		r->m->rx_init(c, w);
	for (long i = 0; i < r->total; i++) {
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
	}
	r->cpu[w] = thread_cpu_ns() - cpu0;
	thread_ctx_switches(&v1, &t1);
	long n = r->total - r->warmup;
	r->cpu[w] /= (double)n;
	r->vctx[w] = (double)(v1 - v0) / (double)n;
	r->ctx[w] = (double)(t1 - t0) / (double)n;
	if (r->m->rx_fini)
		r->m->rx_fini(c, w);
	atomic_store_explicit(&c->slot[w].ready, (unsigned)r->total + 1, memory_order_release);
	return NULL;
}

static void wait_all(bc_ctx *c, unsigned gen, const char *name)
{
	for (int w = 0; w < c->waiters; w++)
		wait_until_eq(&c->slot[w].ready, gen, BENCH_STUCK_S, name);
}

static void *bc_sender(void *p)
{
	struct bc_run *r = p;
	bc_ctx *c = r->c;
	uint64_t rng = r->seed | 1;
	if (r->m->tx_init)
		r->m->tx_init(c);
	for (long i = 0; i < r->total; i++) {
		unsigned gen = (unsigned)i + 1;
		wait_all(c, gen, r->m->name);
		random_delay(&rng, r->dmin, r->dmax);
		uint64_t t0 = nemo_ticks_ordered();
		atomic_store_explicit(&c->t_send, t0, memory_order_release);
		r->m->tx_broadcast(c, gen);
		uint64_t t1 = nemo_ticks_ordered();
		if (i >= r->warmup) {
			r->snd[i - r->warmup] = nemo_ticks_to_ns((int64_t)(t1 - t0));
			progress_add(1);
		}
	}
	wait_all(c, (unsigned)r->total + 1, r->m->name);
	if (r->m->tx_fini)
		r->m->tx_fini(c);
	return NULL;
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

static bool bc_row(const bench_opts *o, const bc_mech *m, int K, const int *cpus,
		   json_t *results, char *why, size_t whylen)
{
	bc_ctx *c = xaligned(sizeof *c);
	bc_slot *slot = xaligned(sizeof *slot * (size_t)K);
	if (!c || !slot)
		fatal("out of memory");
	memset(c, 0, sizeof *c);
	memset(slot, 0, sizeof *slot * (size_t)K);
	c->waiters = K;
	c->slot = slot;
	if (m->setup && m->setup(c) != 0) {
		snprintf(why, whylen, "%s", c->why[0] ? c->why : "setup failed");
		free(slot);
		free(c);
		return false;
	}
	long trials = o->trials;
	struct bc_run r = {
		.m = m, .c = c, .total = trials + o->warmup, .warmup = o->warmup,
		.lat = xcalloc((size_t)trials * (size_t)K, sizeof(double)),
		.snd = xcalloc((size_t)trials, sizeof(double)),
		.ctx = xcalloc((size_t)K, sizeof(double)),
		.vctx = xcalloc((size_t)K, sizeof(double)),
		.cpu = xcalloc((size_t)K, sizeof(double)),
		.dmin = o->delay_min_us, .dmax = o->delay_max_us,
		.seed = o->seed ^ (uint64_t)K ^ (uint64_t)(uintptr_t)m,
	};
	row out = { .mechanism = m->name, .scenario = "blocked", .src = o->src,
		    .dst = cpus[0], .trials = trials, .waiters = K, .waiter_cpus = cpus };
	out.probe_before = coherence_probe(o->src, cpus[0], 1000);
	pthread_t *th = xcalloc((size_t)K + 1, sizeof *th);
	struct bc_waiter_arg *args = xcalloc((size_t)K, sizeof *args);
	for (int w = 0; w < K; w++) {
		args[w] = (struct bc_waiter_arg){ &r, w };
		thread_start_pinned(&th[w], cpus[w], bc_waiter, &args[w]);
	}
	thread_start_pinned(&th[K], o->src, bc_sender, &r);
	progress_join(th, K + 1);
	out.probe_after = coherence_probe(o->src, cpus[0], 1000);
	if (m->teardown)
		m->teardown(c);

	per_broadcast(&out, r.lat, trials, K);
	out.lat_waiter = xcalloc((size_t)trials * (size_t)K, sizeof(int));
	for (size_t i = 0; i < (size_t)trials * (size_t)K; i++)
		out.lat_waiter[i] = (int)(i % (size_t)K);
	for (int w = 0; w < K; w++) {
		out.ctx += r.ctx[w] / K;
		out.vctx += r.vctx[w] / K;
		out.cpu_ns += r.cpu[w] / K;
	}
	out.lat_ns = r.lat;
	out.nlat = (size_t)trials * (size_t)K;
	out.send_ns = r.snd;
	row_emit(o, &out, results);

	free(out.first_ns);
	free(out.last_ns);
	free(out.spread_ns);
	free(out.lat_waiter);
	free(r.lat);
	free(r.snd);
	free(r.ctx);
	free(r.vctx);
	free(r.cpu);
	free(th);
	free(args);
	free(slot);
	free(c);
	return true;
}

/* Waiter CPUs: --cpus round-robin, else every CPU but the sender's. */
static void waiter_cpus(const bench_opts *o, int K, int *out)
{
	int pool[BENCH_MAX_LIST], n = 0;
	if (o->ncpus) {
		for (int i = 0; i < o->ncpus; i++)
			pool[n++] = o->cpus[i];
	} else {
		for (int c = 0; c < nemo_cpu_count() && n < BENCH_MAX_LIST; c++)
			if (c != o->src)
				pool[n++] = c;
		if (n == 0)
			pool[n++] = o->src;
	}
	for (int w = 0; w < K; w++)
		out[w] = pool[w % n];
}

static int bc_run(const bench_opts *o, json_t *results, json_t *config)
{
	const bc_mech *sel[BENCH_MAX_LIST];
	int n = 0;
	if (o->nmechs) {
		for (int i = 0; i < o->nmechs; i++)
			sel[n++] = find_bc(o->mechs[i]);
	} else {
		const bc_mech *m;
		FOR_EACH_BC(m)
			if (n < BENCH_MAX_LIST)
				sel[n++] = m;
	}
	int ks_default[] = { 1, 2, 4, 8 };
	const int *ks = o->nwaiters ? o->waiters : ks_default;
	int nk = o->nwaiters ? o->nwaiters : 4;
	uint64_t units = 0;
	for (int k = 0; k < nk; k++)
		units += (uint64_t)n * (uint64_t)o->trials;
	progress_begin(o, "broadcast", units);
	json_t *skipped = json_array();
	json_t *kl = json_array();
	for (int k = 0; k < nk; k++)
		json_array_append_new(kl, json_integer(ks[k]));
	json_object_set_new(config, "waiters", kl);
	for (int i = 0; i < n; i++) {
		for (int k = 0; k < nk; k++) {
			int cpus[BENCH_MAX_LIST * 4];
			waiter_cpus(o, ks[k], cpus);
			char why[200];
			if (bc_row(o, sel[i], ks[k], cpus, results, why, sizeof why))
				continue;
			mechanism_unavailable(o, sel[i]->name, why, skipped);
			break;
		}
	}
	progress_end();
	json_object_set_new(config, "skipped", skipped);
	return 0;
}

const suite suite_broadcast = {
	.name = "broadcast",
	.summary = "one sender wakes K waiters; first/last waiter latency and spread",
	.options = OPT_MECHS | OPT_SRC_DST | OPT_WAITERS | OPT_CPUS,
	.default_trials = 2000,
	.default_delay_min_us = 20,
	.default_delay_max_us = 50,
	.help = bc_help,
	.list = bc_list,
	.has_mechanism = bc_has,
	.run = bc_run,
};
