/*
 * app.c - the `app` suite: the study of Perkovic & Keleher ("Responsiveness
 * without Interrupts") on real threads.  P places compute a fixed amount of work in loops of a given
 * shape and, every --request-us of work, send a request (an active
 * message) to a random other place and block until it is served - the
 * paper's DSM pattern: the requester waits for the reply in
 * nemo_place_wait, serving others' requests meanwhile.  What differs from
 * row to row is where the places handle requests while they compute: the
 * strategy (the row's mechanism).
 *
 *   poll-send        nowhere: only while waiting for their own replies
 *                    (the paper's base)
 *   poll-check       NEMO_POLL_CHECK() in the loop that belongs to the
 *                    shape (threshold: --threshold-us, default 5)
 *   progress-thread  the domain's progress thread serves them
 *   watchdog-50us,   interrupt mode under the polling watchdog, T = 50 us
 *   watchdog-1ms     or 1 ms, and no checks in the loops
 *   check-watchdog-50us  both: the checks of poll-check, and the watchdog
 *                    (T = 50 us) for a request the checks leave waiting
 *                    (the paper's combination: polling, with interrupts
 *                    only for late messages)
 *   check-watchdog-10us  the same with T = 10 us: where the checks are far
 *                    apart (long loops), a late request waits 10 us
 *                    before its signal instead of 50
 *   interrupt        interrupt mode: a signal for every request
 *   threads          2P places on the CPUs (more places than CPUs), poll-send
 *
 * Requests come at random points of the work, --request-us apart on
 * average, so that places do not stay in step.
 *
 * Shapes (where a check can go): short - a check after every unit of work
 * (~1 us); nested - in the outer loop of a nest, every 10 units; long -
 * in one long loop whose body is 100 units.
 *
 * Per request, the notification delay: from the send (its tick travels in
 * arg) to the start of its handler, exact, per place.  Per row: runtime_s
 * (from the start until every place has done its work and had its own
 * requests served), the delays' STATS, a log-spaced histogram of delays
 * (8 bins per decade from 100 ns: counts and the delay summed in each, for
 * the share of the total delay by delay length), signals sent, polling
 * checks, and what the progress thread handled.
 */
#define _GNU_SOURCE
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum strategy { ST_POLL_SEND, ST_POLL_CHECK, ST_PROGRESS, ST_WD50, ST_WD1MS, ST_CHECK_WD50, ST_CHECK_WD10, ST_INTERRUPT,
		ST_THREADS };
enum shape { SH_SHORT, SH_NESTED, SH_LONG, SH_COUNT };

static const char *const shape_names[SH_COUNT] = { "short", "nested", "long" };
static const unsigned shape_every[SH_COUNT] = { 1, 10, 100 };   /* units between check points */

typedef struct app_mech {
	const char *name;
	enum strategy st;
	const char *summary;
} app_mech;

static const app_mech app_mechs[] = {
	{ "poll-send", ST_POLL_SEND, "requests served only while a place waits for its own reply (the base)" },
	{ "poll-check", ST_POLL_CHECK, "NEMO_POLL_CHECK() at the shape's check points (threshold --threshold-us)" },
	{ "progress-thread", ST_PROGRESS, "the domain's progress thread serves the places (nemo_place_set_progress)" },
	{ "watchdog-50us", ST_WD50, "interrupt mode under the polling watchdog, T = 50 us" },
	{ "watchdog-1ms", ST_WD1MS, "interrupt mode under the polling watchdog, T = 1 ms" },
	{ "check-watchdog-50us", ST_CHECK_WD50,
	  "poll-check's checks, and the polling watchdog (T = 50 us) for the requests they leave waiting" },
	{ "check-watchdog-10us", ST_CHECK_WD10,
	  "poll-check's checks, and the polling watchdog (T = 10 us) for the requests they leave waiting" },
	{ "interrupt", ST_INTERRUPT, "interrupt mode: a signal for every request" },
	{ "threads", ST_THREADS, "2P places on the P CPUs (more places than CPUs), poll-send" },
};
#define APP_N (sizeof app_mechs / sizeof app_mechs[0])

/* Defaults (also the options' meaning: docs/bench-json.md, app rows). */
#define WORK_MS 100.0                 /* compute per place */
#define REQUEST_US 50.0               /* compute between two requests of a place */
#define THRESHOLD_US 5.0
#define HIST_LO_NS 100.0
#define HIST_PER_DECADE 8
#define HIST_BINS (HIST_PER_DECADE * 8)   /* 100 ns .. 10 s */

enum { ACT_REQ = 1, ACT_REP = 2 };

static uint64_t unit_iters;           /* loop iterations of one ~1 us unit */
static volatile uint64_t unit_sink;

static void unit(void)
{
	uint64_t x = unit_sink;
	for (uint64_t i = 0; i < unit_iters; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	unit_sink = x;
}

static void calibrate_unit(void)
{
	if (unit_iters)
		return;
	unit_iters = 1000;
	for (;;) {
		uint64_t t0 = nemo_ticks_ordered();
		unit();
		double ns = nemo_ticks_to_ns((int64_t)(nemo_ticks_ordered() - t0));
		if (ns > 5000 || unit_iters > (1u << 30))
			break;
		unit_iters *= 2;
	}
	/* Now one unit takes > 5 us: scale to 1 us (best of a few). */
	double best = 1e18;
	for (int k = 0; k < 5; k++) {
		uint64_t t0 = nemo_ticks_ordered();
		unit();
		double ns = nemo_ticks_to_ns((int64_t)(nemo_ticks_ordered() - t0));
		if (ns < best)
			best = ns;
	}
	unit_iters = (uint64_t)((double)unit_iters * 1000.0 / best);
	if (!unit_iters)
		unit_iters = 1;
}

struct app_run;

struct app_place {
	struct app_run *run;
	int index, cpu;
	nemo_place_id id;
	double *delays;               /* requests this place served */
	size_t ndelays, cap;
	_Atomic uint64_t reply_tag;   /* the tag of the last reply received */
	uint64_t rng;
	double finish_s;
	pthread_t t;
};

struct app_run {
	const bench_opts *o;
	const app_mech *m;
	enum shape shape;
	nemo_domain *d;
	int nplaces;
	struct app_place *pl;
	nemo_place_id ids[BENCH_MAX_CPUS * 2];
	atomic_uint joined, go, done;
	uint64_t units, every_req;    /* per place: work units, units between requests */
	double t0;
};

/* A CLOCK_MONOTONIC deadline ms milliseconds from now. */
static struct timespec in_ms(long ms)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += ms / 1000;
	t.tv_nsec += (ms % 1000) * 1000000;
	if (t.tv_nsec >= 1000000000) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000;
	}
	return t;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Handlers (may run in a signal handler: interrupt mode; only
 * async-signal-safe work: array stores and a send). */
static void on_req(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	struct app_place *p = m->place_ctx;
	uint64_t now = nemo_ticks();
	if (p->ndelays < p->cap)
		p->delays[p->ndelays++] = now > m->arg ? nemo_ticks_to_ns((int64_t)(now - m->arg)) : 0;
	nemo_am_reply(m, ACT_REP, 0, NULL, 0, 0);
}

static void on_rep(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	struct app_place *p = m->place_ctx;
	atomic_store_explicit(&p->reply_tag, m->tag, memory_order_release);
}

/* Wait until a reply arrives (reply_tag moves from `before`), serving
 * others' requests meanwhile; a lost reply ends the run, never hangs it. */
static void await_reply(struct app_place *p, uint64_t before)
{
	double start = now_s();
	while (atomic_load_explicit(&p->reply_tag, memory_order_acquire) == before) {
		struct timespec dl = in_ms(50);
		int rc = nemo_place_wait(&dl, NULL);
		if (rc && rc != ETIMEDOUT)
			fatal("app %s: nemo_place_wait: %s", p->run->m->name, nemo_last_error());
		if (now_s() - start > BENCH_STUCK_S)
			fatal("app %s/%s: place %d waited %.0f s for a reply: stuck", p->run->m->name,
			      shape_names[p->run->shape], p->index, BENCH_STUCK_S);
	}
}

/* The strategy's watchdog T in microseconds, or 0 (no watchdog). */
static uint64_t watchdog_t_us(enum strategy st)
{
	switch (st) {
	case ST_WD50:
	case ST_CHECK_WD50:
		return 50;
	case ST_CHECK_WD10:
		return 10;
	case ST_WD1MS:
		return 1000;
	default:
		return 0;
	}
}

static void *place_main(void *arg)
{
	struct app_place *p = arg;
	struct app_run *r = p->run;
	enum strategy st = r->m->st;
	nemo_place_attr a = { .context = p };
	bool checks = st == ST_POLL_CHECK || st == ST_CHECK_WD50 || st == ST_CHECK_WD10;
	if (watchdog_t_us(st) || st == ST_INTERRUPT)
		a.flags |= NEMO_PLACE_INTERRUPTS;
	int err = nemo_place_join(r->d, &a, &p->id);
	if (err)
		fatal("app %s: join: %s", r->m->name, nemo_last_error());
	if (checks)
		nemo_poll_threshold_set((uint64_t)(r->o->delay_min_us * 1000));
	if (st == ST_PROGRESS)
		nemo_place_set_progress(true);
	if (watchdog_t_us(st))
		nemo_place_set_watchdog(watchdog_t_us(st) * 1000);
	r->ids[p->index] = p->id;
	atomic_fetch_add(&r->joined, 1);
	while (!atomic_load_explicit(&r->go, memory_order_acquire))
		nemo_cpu_relax();
	unsigned every = shape_every[r->shape];
	/* Requests at random points, every_req units apart on average
	 * (uniform in 1 .. 2 every_req - 1): places that started together
	 * must not stay in step, or every request would find its target
	 * already waiting for a reply of its own. */
	uint64_t next_req = 1 + rng_next(&p->rng) % (2 * r->every_req - 1);
	for (uint64_t u = 0; u < r->units;) {
		/* One check-point's worth of work (the shape's inner loop). */
		for (unsigned k = 0; k < every && u < r->units; k++, u++) {
			unit();
			if (u + 1 == next_req) {
				next_req += 1 + rng_next(&p->rng) % (2 * r->every_req - 1);
				/* A request to a random other place; block until served. */
				int to = (int)(rng_next(&p->rng) % (uint64_t)(r->nplaces - 1));
				if (to >= p->index)
					to++;
				/* The send's tick travels in arg; its reply's tag is that
				 * tick, so any new tag is this request's reply. */
				uint64_t before = atomic_load_explicit(&p->reply_tag, memory_order_acquire);
				err = nemo_am_send(r->ids[to], ACT_REQ, nemo_ticks(), 0);
				if (err)
					fatal("app %s: request: %s", r->m->name, nemo_last_error());
				await_reply(p, before);
			}
			if (bench_stop_requested())
				break;
		}
		if (checks)
			NEMO_POLL_CHECK();
		if (bench_stop_requested())
			break;
	}
	p->finish_s = now_s();
	atomic_fetch_add(&r->done, 1);
	/* Keep serving until every place is done. */
	while (atomic_load_explicit(&r->done, memory_order_acquire) < (unsigned)r->nplaces) {
		struct timespec dl = in_ms(10);
		nemo_place_wait(&dl, NULL);
	}
	if (st == ST_PROGRESS)
		nemo_place_set_progress(false);
	nemo_place_leave();
	return NULL;
}

/* A run's delays per strategy and shape, pooled over its rounds.  A
 * round's p99 rests on its 10-40 latest requests, so a stretch that the
 * host takes from one row decides it; the rounds are interleaved, so
 * pooled they span the same stretches of time for every strategy.  The
 * pooled p99s carry the study's verdict on the watchdog's bound (p99 at
 * most T plus interrupt mode's p99): config.pooled, and the table. */
struct pool {
	double *v;
	size_t n, cap;
	int rounds;
};
static struct pool pools[APP_N][SH_COUNT];
static json_t *pooled_for_print;      /* config.pooled, for app_print */

static void pool_add(const app_mech *m, enum shape shape, const double *v, size_t n)
{
	struct pool *p = &pools[m - app_mechs][shape];
	if (p->n + n > p->cap) {
		p->cap = (p->n + n) * 2;
		p->v = realloc(p->v, p->cap * sizeof(double));
		if (!p->v)
			fatal("app: out of memory pooling delays");
	}
	memcpy(p->v + p->n, v, n * sizeof(double));
	p->n += n;
	p->rounds++;
}

/* config.pooled: one entry per strategy and shape measured. */
static json_t *pooled_json(void)
{
	json_t *out = json_array();
	for (int sh = 0; sh < SH_COUNT; sh++) {
		stats ist = { 0 };
		struct pool *ip = NULL;
		for (size_t i = 0; i < APP_N; i++)
			if (app_mechs[i].st == ST_INTERRUPT && pools[i][sh].n)
				ip = &pools[i][sh];
		if (ip)
			stats_compute(ip->v, ip->n, &ist, NULL);
		for (size_t i = 0; i < APP_N; i++) {
			struct pool *p = &pools[i][sh];
			if (!p->n)
				continue;
			stats st;
			stats_compute(p->v, p->n, &st, NULL);
			json_t *e = json_pack("{s:s,s:s,s:i,s:I,s:o}", "mechanism", app_mechs[i].name, "shape",
					      shape_names[sh], "rounds", p->rounds, "requests", (json_int_t)p->n,
					      "delay_ns", stats_json(&st));
			uint64_t t = watchdog_t_us(app_mechs[i].st) * 1000;
			json_object_set_new(e, "watchdog_t_ns", t ? json_integer((json_int_t)t) : json_null());
			bool judged = t && ip;
			json_object_set_new(e, "bound_ns", judged ? json_real((double)t + ist.p99) : json_null());
			json_object_set_new(e, "within_bound", judged ? json_boolean(st.p99 <= (double)t + ist.p99)
								     : json_null());
			json_array_append_new(out, e);
			free(p->v);
			*p = (struct pool){ 0 };
		}
	}
	return out;
}

static void hist(const double *v, size_t n, json_t *jrow)
{
	json_t *edges = json_array(), *counts = json_array(), *sums = json_array();
	uint64_t c[HIST_BINS + 2] = { 0 };
	double s[HIST_BINS + 2] = { 0 };
	for (size_t i = 0; i < n; i++) {
		int b = v[i] < HIST_LO_NS ? 0 : 1 + (int)floor(log10(v[i] / HIST_LO_NS) * HIST_PER_DECADE);
		if (b > HIST_BINS + 1)
			b = HIST_BINS + 1;
		c[b]++;
		s[b] += v[i];
	}
	/* bin 0: below 100 ns; bin k: [lo*10^((k-1)/8), lo*10^(k/8)); last: above 10 s */
	for (int k = 0; k <= HIST_BINS + 1; k++) {
		double hi = k == HIST_BINS + 1 ? INFINITY : HIST_LO_NS * pow(10, (double)k / HIST_PER_DECADE);
		json_array_append_new(edges, isinf(hi) ? json_null() : json_real(hi));
		json_array_append_new(counts, json_integer((json_int_t)c[k]));
		json_array_append_new(sums, json_real(s[k]));
	}
	json_object_set_new(jrow, "delay_hist", json_pack("{s:o,s:o,s:o}", "upper_edges_ns", edges, "counts", counts,
							 "sum_ns", sums));
}


/* --samples: every request's delay of one row, as CSV (place, delay_ns),
 * so that a run's rounds can be pooled; the row's samples_file. */
static void write_samples(const bench_opts *o, const app_mech *m, enum shape shape, int round,
			  const struct app_run *r, json_t *jrow)
{
	char name[128], *rel = NULL;
	snprintf(name, sizeof name, "app-%s-%s-r%d.csv", m->name, shape_names[shape], round);
	FILE *f = samples_create(o, name, &rel);
	if (f) {
		fprintf(f, "place,delay_ns\n");
		for (int i = 0; i < r->nplaces; i++)
			for (size_t k = 0; k < r->pl[i].ndelays; k++)
				fprintf(f, "%d,%.17g\n", i, r->pl[i].delays[k]);
		if (fclose(f) != 0)
			fatal("cannot write samples to %s/%s: %s", o->samples_dir, name, strerror(errno));
	}
	json_object_set_new(jrow, "samples_file", rel ? json_string(rel) : json_null());
	free(rel);
}

static bool app_row(const bench_opts *o, const app_mech *m, enum shape shape, int round, const int *cpus,
		    int ncpus, json_t *results, char *why, size_t whylen)
{
	struct app_run r = { .o = o, .m = m, .shape = shape };
	r.nplaces = m->st == ST_THREADS ? 2 * ncpus : ncpus;
	if (r.nplaces < 2)
		r.nplaces = 2;
	r.units = (uint64_t)(o->seconds * 1e6);     /* --work-ms via --seconds: units of 1 us */
	r.every_req = (uint64_t)(o->delay_max_us > 0 ? o->delay_max_us : REQUEST_US);
	if (r.every_req < 1)
		r.every_req = 1;
	nemo_domain_attr da = { .max_places = (unsigned)r.nplaces + 2 };
	int err = nemo_domain_create(&da, &r.d);
	if (!err)
		err = nemo_action_register(r.d, ACT_REQ, on_req, NULL);
	if (!err)
		err = nemo_action_register(r.d, ACT_REP, on_rep, NULL);
	nemo_progress *pt = NULL;
	nemo_watchdog *wd = NULL;
	if (!err && m->st == ST_PROGRESS)
		err = nemo_progress_start(r.d, NULL, &pt);
	if (!err && watchdog_t_us(m->st))
		err = nemo_watchdog_start(r.d, &wd);
	if (err) {
		snprintf(why, whylen, "%s", nemo_last_error());
		if (r.d)
			nemo_domain_destroy(r.d);
		return false;
	}
	r.pl = xcalloc((size_t)r.nplaces, sizeof *r.pl);
	size_t cap = (size_t)(r.units / r.every_req + 16) * 4;
	for (int i = 0; i < r.nplaces; i++) {
		struct app_place *p = &r.pl[i];
		p->run = &r;
		p->index = i;
		p->cpu = cpus[i % ncpus];
		p->cap = cap;
		p->delays = xcalloc(cap, sizeof(double));
		p->rng = o->seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(i + 1));
		if (m->st == ST_THREADS)
			bench_thread_start(&p->t, place_main, p);
		else
			thread_start_pinned(&p->t, p->cpu, place_main, p);
	}
	while (atomic_load(&r.joined) < (unsigned)r.nplaces)
		sched_yield();
	nemo_domain_counters c0, c1;
	nemo_domain_get_counters(r.d, &c0);
	nemo_watchdog_counters w0 = { 0 }, w1 = { 0 };
	if (wd)
		nemo_watchdog_get_counters(wd, &w0);
	r.t0 = now_s();
	atomic_store_explicit(&r.go, 1, memory_order_release);
	pthread_t ts[BENCH_MAX_CPUS * 2];
	for (int i = 0; i < r.nplaces; i++)
		ts[i] = r.pl[i].t;
	progress_join(ts, r.nplaces);
	nemo_domain_get_counters(r.d, &c1);
	if (wd)
		nemo_watchdog_get_counters(wd, &w1);
	nemo_progress_counters pc = { 0 };
	if (pt)
		nemo_progress_get_counters(pt, &pc);
	double end = 0;
	size_t n = 0;
	for (int i = 0; i < r.nplaces; i++) {
		if (r.pl[i].finish_s > end)
			end = r.pl[i].finish_s;
		n += r.pl[i].ndelays;
	}
	double *all = xcalloc(n ? n : 1, sizeof(double));
	size_t k = 0;
	for (int i = 0; i < r.nplaces; i++) {
		memcpy(all + k, r.pl[i].delays, r.pl[i].ndelays * sizeof(double));
		k += r.pl[i].ndelays;
	}
	json_t *jrow = NULL;
	if (n) {
		pool_add(m, shape, all, n);
		jrow = json_pack("{s:s,s:s,s:i,s:i,s:i,s:f,s:I}", "mechanism", m->name, "shape", shape_names[shape],
				 "round", round, "places", r.nplaces, "cpus", ncpus, "runtime_s", end - r.t0,
				 "requests", (json_int_t)n);
		write_samples(o, m, shape, round, &r, jrow);
	}
	for (int i = 0; i < r.nplaces; i++)
		free(r.pl[i].delays);
	if (jrow) {
		hist(all, n, jrow);
		json_object_set_new(jrow, "delay_ns", stats_object(all, n));
		json_object_set_new(jrow, "interrupts", json_integer((json_int_t)(c1.kicks_signal - c0.kicks_signal +
										   w1.fired - w0.fired)));
		json_object_set_new(jrow, "polls", json_integer((json_int_t)(c1.poll_checks - c0.poll_checks)));
		json_object_set_new(jrow, "progress_handled", pt ? json_integer((json_int_t)pc.handled) : json_null());
		json_object_set_new(jrow, "watchdog_cpu_ns",
				    wd ? json_integer((json_int_t)(w1.cpu_ns - w0.cpu_ns)) : json_null());
		json_object_set_new(jrow, "watchdog_spin_ns",
				    wd ? json_integer((json_int_t)(w1.spin_ns - w0.spin_ns)) : json_null());
		json_object_set_new(jrow, "watchdog_late",
				    wd ? json_integer((json_int_t)(w1.late - w0.late)) : json_null());
		/* The watchdog is started per row: its maximum is the row's. */
		json_object_set_new(jrow, "watchdog_late_max_ns",
				    wd ? json_integer((json_int_t)w1.late_max_ns) : json_null());
		json_array_append_new(results, jrow);
	}
	free(all);
	free(r.pl);
	if (pt)
		nemo_progress_stop(pt);
	if (wd)
		nemo_watchdog_stop(wd);
	nemo_domain_destroy(r.d);
	return true;
}

static const app_mech *app_find(const char *name)
{
	for (size_t i = 0; i < APP_N; i++)
		if (!strcmp(app_mechs[i].name, name))
			return &app_mechs[i];
	return NULL;
}

static bool app_has(const char *name)
{
	return app_find(name) != NULL;
}

static void app_list(FILE *out)
{
	for (size_t i = 0; i < APP_N; i++)
		fprintf(out, "    %-18s %s\n", app_mechs[i].name, app_mechs[i].summary);
}

static void app_help(FILE *out)
{
	fprintf(out,
"Perkovic & Keleher's study (Responsiveness without Interrupts) on real\n"
"threads: P places (the usable CPUs) each compute\n"
"--seconds of work (default %.1f) in ~1 us units, and every --request-us of\n"
"work (default %.0f) send a request to a random other place and block until\n"
"it is served (poll-check: threshold --threshold-us, default %.0f).  One row\n"
"per strategy, shape (short, nested, long: where a check can go) and round,\n"
"interleaved over --rounds (default 3).  Rows: runtime_s for the fixed work,\n"
"delay_ns (send to handler start), delay_hist, interrupts, polls.  Then each\n"
"strategy's delays pooled over the rounds, with the watchdog's bound (p99\n"
"at most T plus interrupt mode's p99) judged on them: config.pooled in the\n"
"JSON.\n",
		WORK_MS / 1000, REQUEST_US, THRESHOLD_US);
}

static void app_run_suite(const bench_opts *o, json_t *results, json_t *config)
{
	calibrate_unit();
	int cpus[BENCH_MAX_CPUS];
	int ncpus = bench_usable_cpus(cpus, BENCH_MAX_CPUS);
	if (ncpus > BENCH_MAX_CPUS / 2)
		ncpus = BENCH_MAX_CPUS / 2;
	const app_mech *sel[APP_N * BENCH_MAX_LIST];
	size_t n = 0;
	if (o->nmechs)
		for (int i = 0; i < o->nmechs; i++)
			sel[n++] = app_find(o->mechs[i]);
	else
		for (size_t i = 0; i < APP_N; i++)
			sel[n++] = &app_mechs[i];
	json_object_del(config, "scenarios");
	json_object_set_new(config, "work_s", json_real(o->seconds));
	json_object_set_new(config, "request_every_us", json_real(o->delay_max_us));
	json_object_set_new(config, "threshold_us", json_real(o->delay_min_us));
	json_object_set_new(config, "unit_iterations", json_integer((json_int_t)unit_iters));
	json_object_set_new(config, "rounds", json_integer(o->rounds));
	json_t *skipped = json_array();
	progress_begin(o, "app", (uint64_t)o->rounds * n * SH_COUNT);
	for (int round = 0; round < o->rounds && !bench_interrupted(); round++)
		for (int sh = 0; sh < SH_COUNT && !bench_interrupted(); sh++)
			for (size_t i = 0; i < n && !bench_interrupted(); i++) {
				char why[200];
				if (!app_row(o, sel[i], (enum shape)sh, round, cpus, ncpus, results, why, sizeof why) && round == 0 &&
				    sh == 0)
					mechanism_unavailable(o, sel[i]->name, why, skipped);
				progress_add(1);
			}
	progress_end();
	json_object_set_new(config, "skipped", skipped);
	pooled_for_print = pooled_json();
	json_object_set_new(config, "pooled", pooled_for_print);
}

static void app_print(json_t *results)
{
	printf("%-16s %-7s %6s %10s %10s %10s %10s %8s %8s\n", "mechanism", "shape", "places", "runtime ms",
	       "delay p50", "delay p99", "delay max", "signals", "polls");
	size_t i;
	json_t *jr;
	json_array_foreach(results, i, jr) {
		json_t *dl = json_object_get(jr, "delay_ns");
		printf("%-16s %-7s %6lld %10.1f %8.1fus %8.1fus %8.1fus %8lld %8lld\n",
		       json_string_value(json_object_get(jr, "mechanism")), json_string_value(json_object_get(jr, "shape")),
		       (long long)json_integer_value(json_object_get(jr, "places")),
		       json_real_value(json_object_get(jr, "runtime_s")) * 1e3,
		       json_real_value(json_object_get(dl, "p50")) / 1e3, json_real_value(json_object_get(dl, "p99")) / 1e3,
		       json_real_value(json_object_get(dl, "max")) / 1e3,
		       (long long)json_integer_value(json_object_get(jr, "interrupts")),
		       (long long)json_integer_value(json_object_get(jr, "polls")));
	}
	if (!pooled_for_print || !json_array_size(pooled_for_print))
		return;
	printf("\nPooled over the rounds (the watchdog's bound: p99 <= T + interrupt's p99, same shape):\n");
	printf("%-19s %-7s %6s %8s %10s %10s  %s\n", "mechanism", "shape", "rounds", "requests", "delay p50",
	       "delay p99", "bound");
	json_array_foreach(pooled_for_print, i, jr) {
		json_t *dl = json_object_get(jr, "delay_ns"), *b = json_object_get(jr, "bound_ns");
		char bound[64] = "";
		if (json_is_number(b))
			snprintf(bound, sizeof bound, "%.1fus %s", json_number_value(b) / 1e3,
				 json_is_true(json_object_get(jr, "within_bound")) ? "within" : "ABOVE");
		printf("%-19s %-7s %6lld %8lld %8.1fus %8.1fus  %s\n", json_string_value(json_object_get(jr, "mechanism")),
		       json_string_value(json_object_get(jr, "shape")),
		       (long long)json_integer_value(json_object_get(jr, "rounds")),
		       (long long)json_integer_value(json_object_get(jr, "requests")),
		       json_real_value(json_object_get(dl, "p50")) / 1e3, json_real_value(json_object_get(dl, "p99")) / 1e3,
		       bound);
	}
}

const suite suite_app = {
	.name = "app",
	.summary = "Perkovic & Keleher's study: places that compute and serve each other's requests, per polling strategy",
	.options = OPT_MECHS | OPT_ROUNDS | OPT_SECONDS | OPT_APP,
	.default_trials = 1,
	.default_delay_min_us = THRESHOLD_US,
	.default_delay_max_us = REQUEST_US,
	.help = app_help,
	.list = app_list,
	.has_mechanism = app_has,
	.run = app_run_suite,
	.print = app_print,
	.default_seconds = WORK_MS / 1000,
	.default_rounds = 3,
};
