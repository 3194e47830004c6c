/*
 * nemo-bench-mpi - nemo domains over MPI, measured (docs/mpi.md).  Run
 * under mpiexec -n 2 (or more: ranks pair up, 0-1, 2-3, ...):
 *
 *   latency  raw MPI ping-pong (MPI_Send / MPI_Recv of 8 bytes, half the
 *            round trip: row mpi-pingpong) against a remote active message
 *            answered by nemo_am_reply (half the round trip: row
 *            nemo-am-remote, scenario polling: both owners poll with
 *            nemo_mpi_poll), in alternating blocks of the same run;
 *   idle     the CPU share of an idle binding's thread (progress thread,
 *            watchdog) over --idle-s seconds: rows nemo-mpi-idle;
 *   app      Perkovic & Keleher's application study across ranks: every rank
 *            computes and, every --app-period units, asks a random other
 *            rank for something and waits for the answer; the runtime
 *            (slowest rank) per progress strategy, relative to the best
 *            and to interrupt-style progress: rows nemo-mpi-app.
 *
 * Rows follow docs/bench-json.md (suite "mpi"); rank 0 writes the
 * document (--json FILE, or standard output) and a summary on stderr.
 * Options: --trials N (latency trials, default 20000), --quick,
 * --json FILE, --suites latency,idle,app, --idle-s S, --app-units N.
 */
#define _GNU_SOURCE
#include <nemo/mpi.h>
#include <nemo/platform.h>
#include <nemo/poll.h>
#include <nemo/version.h>

#include "../core/stats.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { A_PING = 1, A_STOP = 2, A_REQ = 3, A_REP = 4 };

static int rank, size, peer;
static nemo_domain *d;
static nemo_mpi *m;
static _Atomic uint64_t pong, stop, replies;

static void on_ping(const nemo_am_msg *msg, void *ctx)
{
	(void)ctx;
	nemo_am_reply(msg, A_PING, msg->arg, NULL, 0, 0);
}

static void on_pong_or_ping(const nemo_am_msg *msg, void *ctx)
{
	if (msg->is_reply)
		atomic_store_explicit(&pong, msg->tag + 1, memory_order_release);
	else
		on_ping(msg, ctx);
}

static void on_stop(const nemo_am_msg *msg, void *ctx)
{
	(void)msg;
	(void)ctx;
	atomic_store(&stop, 1);
}

static void on_req(const nemo_am_msg *msg, void *ctx)
{
	(void)ctx;
	nemo_am_reply(msg, A_REP, 0, NULL, 0, 0);
}

static void on_rep(const nemo_am_msg *msg, void *ctx)
{
	(void)msg;
	(void)ctx;
	atomic_fetch_add_explicit(&replies, 1, memory_order_release);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int bind(nemo_mpi_progress p)
{
	nemo_mpi_attr a = {.progress = p};
	int err = nemo_mpi_create(d, MPI_COMM_WORLD, &a, &m);
	if (err) {
		fprintf(stderr, "nemo-bench-mpi: rank %d: nemo_mpi_create: %s\n", rank, nemo_last_error());
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	return 0;
}

/* ---------------------------------------------------------------- JSON */

static FILE *js;
static int nrows;

static void json_stats(const char *name, double *v, size_t n)
{
	stats s;
	double cdf[STATS_CDF_POINTS];
	stats_compute(v, n, &s, cdf);
	fprintf(js, "\"%s\": {\"min\": %.1f, \"p50\": %.1f, \"p90\": %.1f, \"p99\": %.1f, \"max\": %.1f, "
		    "\"mean\": %.1f, \"stddev\": %.1f}, \"%s_cdf_ns\": [",
		name, s.min, s.p50, s.p90, s.p99, s.max, s.mean, s.stddev,
		strncmp(name, "latency", 7) ? name : "latency");
	for (int i = 0; i < STATS_CDF_POINTS; i++)
		fprintf(js, "%s%.1f", i ? ", " : "", cdf[i]);
	fprintf(js, "]");
}

static void row_begin(const char *mech, const char *scenario)
{
	fprintf(js, "%s\n    {\"mechanism\": \"%s\", \"scenario\": \"%s\"", nrows++ ? "," : "", mech, scenario);
}

/* ------------------------------------------------------------- latency */

#define BLOCK 500

static void latency(unsigned trials, double *p50_raw, double *p50_am)
{
	bool measurer = !(rank & 1) && peer < size;
	bool responder = (rank & 1) == 1;
	unsigned rounds = (trials + BLOCK - 1) / BLOCK;
	double *raw = calloc((size_t)rounds * BLOCK, sizeof *raw), *am = calloc((size_t)rounds * BLOCK, sizeof *am);
	size_t nraw = 0, nam = 0;
	nemo_place_id dest = 0;
	nemo_mpi_place(m, peer < size ? peer : rank, 0, &dest);
	MPI_Barrier(MPI_COMM_WORLD);
	for (unsigned r = 0; r < rounds + 1; r++) {   /* round 0: warm-up */
		/* Raw MPI ping-pong. */
		uint64_t x = 0;
		for (unsigned i = 0; i < BLOCK; i++) {
			if (measurer) {
				uint64_t t0 = nemo_ticks_ordered();
				MPI_Send(&x, 1, MPI_UINT64_T, peer, 7, MPI_COMM_WORLD);
				MPI_Recv(&x, 1, MPI_UINT64_T, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				uint64_t t1 = nemo_ticks_ordered();
				if (r)
					raw[nraw++] = nemo_ticks_to_ns((int64_t)(t1 - t0)) / 2;
			} else if (responder) {
				MPI_Recv(&x, 1, MPI_UINT64_T, rank - 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				MPI_Send(&x, 1, MPI_UINT64_T, rank - 1, 7, MPI_COMM_WORLD);
			}
		}
		/* nemo: an active message and its reply; both owners poll. */
		if (measurer) {
			for (unsigned i = 0; i < BLOCK; i++) {
				uint64_t want = (uint64_t)r * BLOCK + i + 1;
				uint64_t t0 = nemo_ticks_ordered();
				nemo_am_send(dest, A_PING, want - 1, 0);
				while (atomic_load_explicit(&pong, memory_order_acquire) != want)
					nemo_mpi_poll(m, NULL);
				uint64_t t1 = nemo_ticks_ordered();
				if (r)
					am[nam++] = nemo_ticks_to_ns((int64_t)(t1 - t0)) / 2;
			}
			nemo_am_send(dest, A_STOP, 0, 0);
		} else if (responder) {
			while (!atomic_load(&stop))
				nemo_mpi_poll(m, NULL);
			atomic_store(&stop, 0);
		}
		MPI_Barrier(MPI_COMM_WORLD);
	}
	*p50_raw = *p50_am = 0;
	for (int src = 0; src < size; src += 2) {
		if (src + 1 >= size)
			break;
		size_t n[2] = {nraw, nam};
		if (src != 0) {
			if (rank == src) {
				MPI_Send(n, 2, MPI_UINT64_T, 0, 9, MPI_COMM_WORLD);
				MPI_Send(raw, (int)nraw, MPI_DOUBLE, 0, 9, MPI_COMM_WORLD);
				MPI_Send(am, (int)nam, MPI_DOUBLE, 0, 9, MPI_COMM_WORLD);
			} else if (rank == 0) {
				MPI_Recv(n, 2, MPI_UINT64_T, src, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				MPI_Recv(raw, (int)n[0], MPI_DOUBLE, src, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				MPI_Recv(am, (int)n[1], MPI_DOUBLE, src, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			}
		}
		if (rank == 0) {
			stats sr, sa;
			double tmp[STATS_CDF_POINTS];
			const char *mech[2] = {"mpi-pingpong", "nemo-am-remote"};
			double *v[2] = {raw, am};
			for (int k = 0; k < 2; k++) {
				row_begin(mech[k], k ? "polling" : "blocking-recv");
				fprintf(js, ", \"src_rank\": %d, \"dst_rank\": %d, \"src_cpu\": -1, \"dst_cpu\": -1, "
					    "\"trials\": %zu, \"method\": \"half round trip\", \"bytes\": %d, ",
					src, src + 1, n[k], k ? 96 : 8);
				json_stats("latency_ns", v[k], n[k]);
				fprintf(js, "}");
			}
			stats_compute(raw, n[0], &sr, tmp);
			stats_compute(am, n[1], &sa, tmp);
			fprintf(stderr, "latency ranks %d-%d: mpi-pingpong p50 %.0f ns, nemo-am-remote p50 %.0f ns (%.2fx)\n",
				src, src + 1, sr.p50, sa.p50, sa.p50 / sr.p50);
			if (src == 0) {
				*p50_raw = sr.p50;
				*p50_am = sa.p50;
			}
		}
	}
	free(raw);
	free(am);
}

/* ---------------------------------------------------------------- idle */

static void idle(double secs)
{
	const nemo_mpi_progress ps[2] = {NEMO_MPI_PROGRESS_THREAD, NEMO_MPI_PROGRESS_WATCHDOG};
	const char *names[2] = {"thread", "watchdog"};
	for (int k = 0; k < 2; k++) {
		bind(ps[k]);
		struct timespec ts = {0, 100000000};
		nanosleep(&ts, NULL);   /* past the spin and the backoff's ramp */
		nemo_mpi_counters c0, c1;
		nemo_mpi_get_counters(m, &c0);
		double t0 = now_s();
		ts.tv_sec = (time_t)secs;
		ts.tv_nsec = (long)((secs - (double)(time_t)secs) * 1e9);
		nanosleep(&ts, NULL);
		nemo_mpi_get_counters(m, &c1);
		double wall = now_s() - t0;
		double pct = 100.0 * (double)(c1.thread_cpu_ns - c0.thread_cpu_ns) / (wall * 1e9);
		double wakes = (double)(c1.thread_sleeps - c0.thread_sleeps) / wall;
		double all[2] = {pct, wakes}, mx[2];
		MPI_Reduce(all, mx, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		if (rank == 0) {
			row_begin("nemo-mpi-idle", names[k]);
			fprintf(js, ", \"cpu_percent\": %.3f, \"wakeups_per_s\": %.0f, \"seconds\": %.2f}", mx[0], mx[1],
				wall);
			fprintf(stderr, "idle %s: the binding's thread used %.3f%% of a CPU, %.0f wake-ups/s (worst rank)\n",
				names[k], mx[0], mx[1]);
		}
		nemo_mpi_finalize(m);
	}
}

/* ----------------------------------------------------------------- app */

/* One unit of work, about unit_ns, with the strategy's check inside. */
static volatile uint64_t sink;
static uint64_t unit_ticks;

static void compute(int how)
{
	uint64_t end = nemo_ticks() + unit_ticks;
	uint64_t x = sink;
	while (nemo_ticks() < end) {
		for (int i = 0; i < 64; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
		if (how == 1)
			nemo_mpi_check(m);
		else if (how == 2)
			NEMO_POLL_CHECK();
	}
	sink = x;
}

typedef struct app_strategy {
	const char *name;
	nemo_mpi_progress prog;
	int check;          /* 0 none, 1 nemo_mpi_check, 2 NEMO_POLL_CHECK */
	bool irq;           /* the owner in interrupt mode */
} app_strategy;

static double app_run(const app_strategy *s, unsigned units, unsigned period)
{
	bind(s->prog);
	if (s->irq)
		nemo_place_set_interrupts(true);
	atomic_store(&replies, 0);
	unsigned seed = 12345u + (unsigned)rank * 77u;
	MPI_Barrier(MPI_COMM_WORLD);
	double t0 = now_s();
	uint64_t asked = 0;
	for (unsigned u = 0; u < units; u++) {
		compute(s->check);
		if (u % period == period - 1) {
			seed = seed * 1103515245u + 12345u;
			int to = (rank + 1 + (int)((seed >> 8) % (unsigned)(size - 1))) % size;
			nemo_place_id dest;
			nemo_mpi_place(m, to, 0, &dest);
			nemo_am_send(dest, A_REQ, 0, 0);
			asked++;
			double tw = now_s();
			bool told = false;
			uint64_t r;
			while ((r = atomic_load_explicit(&replies, memory_order_acquire)) < asked) {
				struct timespec dl;
				clock_gettime(CLOCK_MONOTONIC, &dl);
				dl.tv_sec += 1;
				nemo_mpi_wait_for(m, (const uint64_t *)&replies, r, &dl, NULL);
				if (!told && now_s() - tw > 5) {
					nemo_mpi_counters c;
					nemo_mpi_get_counters(m, &c);
					fprintf(stderr, "rank %d: %s: waiting 5 s for a reply from %d: sent %llu recv %llu direct %llu handed %llu dropped %llu funneled %llu\n",
						rank, s->name, to, (unsigned long long)c.sent, (unsigned long long)c.received,
						(unsigned long long)c.direct, (unsigned long long)c.handed, (unsigned long long)c.dropped, (unsigned long long)c.funneled);
					told = true;
				}
			}
		}
	}
	double mine = now_s() - t0, slowest = 0;
	/* Keep serving the others until everyone is done. */
	int done = 1, all = 0;
	MPI_Request q;
	MPI_Iallreduce(&done, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q);
	for (int f = 0; !f;) {
		nemo_mpi_poll(m, NULL);
		MPI_Test(&q, &f, MPI_STATUS_IGNORE);
	}
	MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	if (s->irq)
		nemo_place_set_interrupts(false);
	nemo_mpi_finalize(m);
	return slowest;
}

static void app(unsigned units)
{
	const app_strategy st[] = {
		{"send", NEMO_MPI_PROGRESS_SEND, 0, false},
		{"check", NEMO_MPI_PROGRESS_CHECK, 1, false},
		{"thread-check", NEMO_MPI_PROGRESS_THREAD, 2, false},
		{"watchdog", NEMO_MPI_PROGRESS_WATCHDOG, 1, true},
		{"thread-interrupt", NEMO_MPI_PROGRESS_THREAD, 0, true},
	};
	enum { NS = sizeof st / sizeof st[0] };
	const unsigned period = 20;   /* units between requests */
	unit_ticks = nemo_ns_to_ticks(5000.0);   /* 5 us of work per unit */
	double rt[NS];
	for (int k = 0; k < NS; k++)
		rt[k] = app_run(&st[k], units, period);
	double best = rt[0];
	for (int k = 1; k < NS; k++)
		if (rt[k] < best)
			best = rt[k];
	double irq = rt[NS - 1];
	if (rank == 0)
		for (int k = 0; k < NS; k++) {
			row_begin("nemo-mpi-app", st[k].name);
			fprintf(js, ", \"ranks\": %d, \"units\": %u, \"unit_ns\": 5000, \"period\": %u, \"runtime_s\": %.6f, "
				    "\"relative_to_best\": %.4f, \"relative_to_interrupt\": %.4f}",
				size, units, period, rt[k], rt[k] / best, rt[k] / irq);
			fprintf(stderr, "app %-16s %.4f s  %.3fx best  %.3fx interrupt-style\n", st[k].name, rt[k],
				rt[k] / best, rt[k] / irq);
		}
}

int main(int argc, char **argv)
{
	int got;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &got);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	peer = rank ^ 1;
	unsigned trials = 20000, units = 20000;
	double idle_s = 5;
	const char *json = NULL, *suites = "latency,idle,app";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick")) {
			trials = 2000;
			units = 2000;
			idle_s = 0.5;
		} else if (!strcmp(argv[i], "--trials") && i + 1 < argc) {
			trials = (unsigned)atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--app-units") && i + 1 < argc) {
			units = (unsigned)atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--idle-s") && i + 1 < argc) {
			idle_s = atof(argv[++i]);
		} else if (!strcmp(argv[i], "--json") && i + 1 < argc) {
			json = argv[++i];
		} else if (!strcmp(argv[i], "--suites") && i + 1 < argc) {
			suites = argv[++i];
		} else {
			if (rank == 0)
				fprintf(stderr, "usage: mpiexec -n 2 nemo-bench-mpi [--quick] [--trials N] [--app-units N] "
						"[--idle-s S] [--suites latency,idle,app] [--json FILE]\n");
			MPI_Finalize();
			return 2;
		}
	}
	if (size < 2 || got < MPI_THREAD_MULTIPLE || trials == 0 || units == 0) {
		if (rank == 0)
			fprintf(stderr, "nemo-bench-mpi: needs 2 ranks or more and MPI_THREAD_MULTIPLE (got %d ranks, level %d)\n",
				size, got);
		MPI_Finalize();
		return 2;
	}
	nemo_domain_attr da = {.max_places = 8};
	nemo_domain_create(&da, &d);
	nemo_action_register(d, A_PING, on_pong_or_ping, NULL);
	nemo_action_register(d, A_STOP, on_stop, NULL);
	nemo_action_register(d, A_REQ, on_req, NULL);
	nemo_action_register(d, A_REP, on_rep, NULL);
	nemo_place_join(d, NULL, NULL);   /* index 0 on every rank: the owner */

	char *buf = NULL;
	size_t blen = 0;
	js = rank == 0 ? open_memstream(&buf, &blen) : fopen("/dev/null", "w");
	double t0 = now_s();
	time_t wall = time(NULL);
	char started[32];
	strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", gmtime(&wall));
	double p50_raw = 0, p50_am = 0;
	if (strstr(suites, "latency")) {
		bind(NEMO_MPI_PROGRESS_SEND);
		latency(trials, &p50_raw, &p50_am);
		nemo_mpi_finalize(m);
	}
	if (strstr(suites, "idle"))
		idle(idle_s);
	if (strstr(suites, "app"))
		app(units);
	fclose(js);
	if (rank == 0) {
		static char ver[MPI_MAX_LIBRARY_VERSION_STRING];
		int vl;
		MPI_Get_library_version(ver, &vl);
		for (char *p = ver; *p; p++)
			if (*p == '\n' || *p == '"' || *p == '\t' || *p == '\\')
				*p = ' ';
		nemo_clock_info ci = {0};
		nemo_clock_get_info(&ci);
		FILE *out = json ? fopen(json, "w") : stdout;
		if (!out) {
			perror(json);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		fprintf(out,
			"{\"tool\": \"nemo-bench\", \"version\": \"%s\", \"suite\": \"mpi\", \"started_at\": \"%s\", "
			"\"duration_s\": %.3f, \"interrupted\": false,\n \"machine\": {\"cpus\": %ld, \"tsc_hz\": %.0f, "
			"\"mpi\": \"%.120s\"},\n \"config\": {\"trials\": %u, \"ranks\": %d, \"app_units\": %u, "
			"\"idle_s\": %.2f, \"suites\": \"%s\", \"p50_ratio\": %.4f},\n \"results\": [%s\n]}\n",
			NEMO_VERSION_STRING, started, now_s() - t0, sysconf(_SC_NPROCESSORS_ONLN), ci.ticks_per_sec, ver,
			trials, size, units, idle_s, suites, p50_raw > 0 ? p50_am / p50_raw : 0.0, buf ? buf : "");
		if (json)
			fclose(out);
		free(buf);
	}
	nemo_place_leave();
	nemo_domain_destroy(d);
	MPI_Finalize();
	return 0;
}
