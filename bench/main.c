/*
 * main.c - nemo-bench: the suites it offers, and one run of one of them:
 * options (core/options.c), the run, the table on stdout, the JSON
 * document and the summary file (core/outfile.c), an interrupted run's
 * report.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const suite *const bench_suites[] = { &suite_unicast, &suite_broadcast, &suite_coherence,
				      &suite_policy, &suite_throughput, &suite_preload, &suite_syscost, &suite_app,
				      &suite_multicast, &suite_event_loop, &suite_request_reply, &suite_calibrate, NULL };

static double jnum(json_t *obj, const char *a, const char *b)
{
	json_t *x = json_object_get(obj, a);
	return json_number_value(b ? json_object_get(x, b) : x);
}

/* One row, for the list of what an interrupted run kept. */
static void row_label(json_t *r, char *buf, size_t len)
{
	json_t *mode = json_object_get(r, "mode"), *pol = json_object_get(r, "policy");
	const char *sc = json_string_value(mode ? mode : json_object_get(r, "scenario"));
	int n = snprintf(buf, len, "%s %s", json_string_value(json_object_get(r, "mechanism")), sc ? sc : "");
	if (json_is_string(pol) && (!sc || strcmp(sc, json_string_value(pol)) != 0) && n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, " %s", json_string_value(pol));
	if (json_object_get(r, "waiters") && n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, " K=%d", (int)jnum(r, "waiters", NULL));
	if (json_object_get(r, "gap_ns") && n >= 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, " gap %g us", jnum(r, "gap_ns", NULL) / 1000);
	if (json_object_get(r, "src_cpu") && n >= 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, " %d>%d", (int)jnum(r, "src_cpu", NULL),
			 (int)jnum(r, "dst_cpu", NULL));
}

/* An interrupted run: on stderr, what it kept and where it went. */
static void report_kept(const bench_opts *o, int sig, json_t *results)
{
	size_t n = json_array_size(results);
	fprintf(stderr, "nemo-bench: interrupted by %s: kept the %zu row%s measured so far (a row "
		"stopped early has fewer trials); the rest was not measured\n",
		interrupt_signal_name(sig), n, n == 1 ? "" : "s");
	if (!o->quiet) {
		size_t i;
		json_t *r;
		json_array_foreach(results, i, r) {
			if (i == 20) {
				fprintf(stderr, "  ... and %zu more\n", n - i);
				break;
			}
			char what[200];
			row_label(r, what, sizeof what);
			fprintf(stderr, "  %s: %lld %s\n", what,
				(long long)json_integer_value(json_object_get(r, "trials")),
				json_object_get(r, "mode") ? "rounds" :
				json_object_get(r, "msgs_per_s") ? "intervals" : "trials");
		}
	}
	for (int k = 0; k < OUT_COUNT; k++) {
		if (!bench_out[k].path)
			continue;
		if (strcmp(bench_out[k].path, "-") == 0)
			fprintf(stderr, "nemo-bench: %s -: written to standard output%s\n", bench_out[k].opt,
				k == OUT_JSON ? ", marked \"interrupted\": true" : "");
		else
			fprintf(stderr, "nemo-bench: %s %s: written%s\n", bench_out[k].opt, bench_out[k].path,
				k == OUT_JSON ? ", marked \"interrupted\": true" :
				summary_is_csv(bench_out[k].path) ? "" : ", marked interrupted");
	}
}

static void iso_now(char *buf, size_t len)
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(cmd, "--version")) {
		printf("nemo-bench %s\n", nemo_version());
		return 0;
	}
	if (!strcmp(cmd, "list")) {
		if (argc > 2)
			usage_error("list takes no arguments");
		list_all();
		return 0;
	}
	const suite *s = find_suite(cmd);
	if (!s)
		usage_error("unknown suite '%s' (see nemo-bench --help)", cmd);
	/* Before any output file exists (interrupt.c; out_open). */
	interrupt_install();
	atexit(tmp_remove_all);
	bench_opts o;
	parse_args(s, argc, argv, &o);

	int err = nemo_clock_init();
	if (err)
		fatal("no usable clock: %s", nemo_strerror(err));
	char started[32];
	iso_now(started, sizeof started);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	json_t *results = json_array();
	json_t *config = config_json(&o);
	s->run(&o, results, config);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double dur = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	/* Interrupted: the suite stopped early; what it measured is in results. */
	int sig = bench_interrupted();
	size_t kept = json_array_size(results);

	if (o.quiet || (sig && !kept))
		;                     /* no table (not even an empty one) */
	else if (s->print)
		s->print(results);
	else
		summary_print(s->name, results);
	if (sig && !kept) {
		/* Nothing to keep: leave every FILE as it was. */
		for (int i = 0; i < OUT_COUNT; i++)
			out_discard(&bench_out[i]);
		fprintf(stderr, "nemo-bench: interrupted by %s before any row was measured: nothing written",
			interrupt_signal_name(sig));
		for (int i = 0; i < OUT_COUNT; i++)
			if (bench_out[i].path && strcmp(bench_out[i].path, "-") != 0)
				fprintf(stderr, "; %s left as it was", bench_out[i].path);
		fputc('\n', stderr);
		interrupt_die(sig);
	}
	if (bench_out[OUT_JSON].f) {
		json_t *doc = json_pack("{s:s,s:s,s:s,s:s,s:f,s:b,s:o,s:O,s:O}",
			"tool", "nemo-bench", "version", nemo_version(), "suite", s->name,
			"started_at", started, "duration_s", dur, "interrupted", sig != 0,
			"machine", machine_json(), "config", config, "results", results);
		if (sig)
			json_object_set_new(doc, "interrupted_by", json_string(interrupt_signal_name(sig)));
		if (json_dumpf(doc, bench_out[OUT_JSON].f, JSON_INDENT(1) | JSON_REAL_PRECISION(10)) != 0 ||
		    fputc('\n', bench_out[OUT_JSON].f) == EOF)
			fatal("cannot write --json %s: %s", o.json_path, strerror(errno));
		out_commit(&bench_out[OUT_JSON]);
		json_decref(doc);
	}
	if (bench_out[OUT_SUMMARY].f) {
		summary_write(bench_out[OUT_SUMMARY].f, o.summary_path, s->name, results, sig);
		out_commit(&bench_out[OUT_SUMMARY]);
	}
	if (sig) {
		report_kept(&o, sig, results);
		interrupt_die(sig);
	}
	json_decref(config);
	json_decref(results);
	return 0;
}
