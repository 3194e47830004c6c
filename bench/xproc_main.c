/*
 * xproc_main.c - nemo-bench-xproc: the cross-process unicast rows
 * (xproc.h) until they are wired into `nemo-bench unicast`; the same
 * method and the same JSON document (docs/bench-json.md, suite
 * "unicast"), with the in-process `spin` row measured in the same run as
 * the polled reference.
 *
 *   nemo-bench-xproc [--trials N] [--warmup N] [--rounds R] [--src CPU]
 *                    [--dst CPU] [--mechs a,b,...] [--scenarios polling,blocked]
 *                    [--delay-us MIN,MAX] [--json FILE]
 *
 * Rows are interleaved in R rounds (default 5) of N/R trials each, so
 * that every row spans the same stretch of time; each row gathers its
 * rounds' samples (xproc_acc, as uc_acc).
 */
#define _GNU_SOURCE
#include "bench.h"
#include "unicast.h"
#include "xproc.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(void)
{
	fprintf(stderr, "usage: nemo-bench-xproc [--trials N] [--warmup N] [--rounds R] [--src CPU] [--dst CPU]\n"
			"       [--mechs a,b,...] [--scenarios polling,blocked] [--delay-us MIN,MAX] [--json FILE]\n"
			"mechanisms: spin (in-process reference)");
	for (int i = 0; xproc_mechs[i]; i++)
		fprintf(stderr, ", %s", xproc_mechs[i]);
	fputc('\n', stderr);
	exit(EXIT_USAGE);
}

int main(int argc, char **argv)
{
	static bench_opts o;
	o.trials = 2000;
	o.warmup = 100;
	o.src = -1;
	o.dst = -1;
	o.delay_min_us = 20;
	o.delay_max_us = 50;
	o.rounds = 5;
	o.seed = (uint64_t)time(NULL);
	o.quiet = true;
	const char *json_path = NULL;
	const char *mechs = NULL;
	unsigned scen = SC_POLLING | SC_BLOCKED;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--trials"))
			o.trials = atol(v);
		else if (!strcmp(a, "--warmup"))
			o.warmup = atol(v);
		else if (!strcmp(a, "--rounds"))
			o.rounds = atoi(v);
		else if (!strcmp(a, "--src"))
			o.src = atoi(v);
		else if (!strcmp(a, "--dst"))
			o.dst = atoi(v);
		else if (!strcmp(a, "--mechs"))
			mechs = v;
		else if (!strcmp(a, "--json"))
			json_path = v;
		else if (!strcmp(a, "--delay-us")) {
			if (sscanf(v, "%lf,%lf", &o.delay_min_us, &o.delay_max_us) != 2)
				usage();
		} else if (!strcmp(a, "--scenarios")) {
			scen = 0;
			char *dup = strdup(v), *save = NULL;
			for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save))
				scen |= scenario_parse(t);
			free(dup);
		} else
			usage();
	}
	if (o.trials < 1 || o.rounds < 1 || o.rounds > o.trials || scen == 0)
		usage();
	nemo_clock_init();
	int cpus[BENCH_MAX_CPUS];
	int n = bench_usable_cpus(cpus, BENCH_MAX_CPUS);
	if (n < 2) {
		fprintf(stderr, "nemo-bench-xproc: needs 2 usable CPUs\n");
		return 1;
	}
	if (o.src < 0)
		o.src = cpus[0];
	if (o.dst < 0)
		o.dst = cpus[1];

	/* The rows: spin (polling) and the xproc mechanisms. */
	const char *names[16];
	unsigned scs[16];
	int nrows = 0;
	char *list = strdup(mechs ? mechs : "spin,nemo-am-xproc,nemo-event-xproc,futex-xproc,eventfd-xproc,pipe-xproc,unix-socket-xproc");
	char *save = NULL;
	for (char *t = strtok_r(list, ",", &save); t && nrows < 14; t = strtok_r(NULL, ",", &save)) {
		unsigned s = !strcmp(t, "spin") ? SC_POLLING : xproc_scenarios(t);
		if (!s) {
			fprintf(stderr, "nemo-bench-xproc: unknown mechanism '%s'\n", t);
			usage();
		}
		for (unsigned b = SC_POLLING; b <= SC_BLOCKED; b <<= 1)
			if ((s & b & scen) && nrows < 14) {
				names[nrows] = t;
				scs[nrows++] = b;
			}
	}
	json_t *results = json_array();
	struct timespec t0;
	clock_gettime(CLOCK_REALTIME, &t0);
	char started[32];
	strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t0.tv_sec));
	double start = (double)nemo_ticks();

	/* Rounds: each row measures trials/rounds at a time, the rows of a
	 * round one after the other, so that all rows span the same time. */
	long share = o.trials / o.rounds;
	xproc_acc *xa = calloc((size_t)nrows, sizeof *xa);
	uc_acc *spin = calloc((size_t)nrows, sizeof *spin);
	for (int i = 0; i < nrows; i++) {
		if (!strcmp(names[i], "spin"))
			uc_acc_init(&spin[i], unicast_find("spin"), SC_POLLING, o.trials);
		else
			xproc_acc_init(&xa[i], names[i], scs[i], o.trials);
	}
	int failed = 0;
	for (int r = 0; r < o.rounds; r++)
		for (int i = 0; i < nrows; i++) {
			char why[256] = "";
			long t = r == o.rounds - 1 ? o.trials - share * (o.rounds - 1) : share;
			bool ok = !strcmp(names[i], "spin")
				? uc_measure(&o, &spin[i], o.src, o.dst, NULL, t, why, sizeof why)
				: xproc_measure(&o, &xa[i], o.src, o.dst, t, why, sizeof why);
			if (!ok) {
				fprintf(stderr, "nemo-bench-xproc: %s %s: %s\n", names[i], scenario_name(scs[i]), why);
				failed++;
			}
		}
	for (int i = 0; i < nrows; i++) {
		if (!strcmp(names[i], "spin")) {
			uc_emit(&o, &spin[i], o.src, o.dst, NULL, NULL, NULL, results);
			uc_acc_free(&spin[i]);
		} else {
			xproc_emit(&o, &xa[i], o.src, o.dst, results);
			xproc_acc_free(&xa[i]);
		}
	}
	double dur = nemo_ticks_to_ns((int64_t)((double)nemo_ticks() - start)) * 1e-9;
	json_t *config = json_pack("{s:I,s:I,s:i,s:i,s:i,s:[f,f]}", "trials", (json_int_t)o.trials, "warmup",
				   (json_int_t)o.warmup, "rounds", o.rounds, "src", o.src, "dst", o.dst,
				   "delay_us", o.delay_min_us, o.delay_max_us);
	json_t *doc = json_pack("{s:s,s:s,s:s,s:s,s:f,s:b,s:o,s:o,s:O}", "tool", "nemo-bench", "version",
				nemo_version(), "suite", "unicast", "started_at", started, "duration_s", dur,
				"interrupted", 0, "machine", machine_json(), "config", config, "results", results);
	/* The table. */
	printf("%-20s %-8s %6s %10s %10s %10s\n", "mechanism", "scenario", "trials", "p50 ns", "p90 ns", "p99 ns");
	size_t k;
	json_t *row_j;
	json_array_foreach(results, k, row_j) {
		json_t *l = json_object_get(row_j, "latency_ns");
		printf("%-20s %-8s %6lld %10.0f %10.0f %10.0f\n", json_string_value(json_object_get(row_j, "mechanism")),
		       json_string_value(json_object_get(row_j, "scenario")),
		       (long long)json_integer_value(json_object_get(row_j, "trials")),
		       json_real_value(json_object_get(l, "p50")), json_real_value(json_object_get(l, "p90")),
		       json_real_value(json_object_get(l, "p99")));
	}
	if (json_path && json_dump_file(doc, json_path, JSON_INDENT(1) | JSON_REAL_PRECISION(10)) != 0) {
		fprintf(stderr, "nemo-bench-xproc: cannot write %s\n", json_path);
		failed++;
	}
	json_decref(doc);
	json_decref(results);
	free(xa);
	free(spin);
	free(list);
	return failed ? 1 : 0;
}
