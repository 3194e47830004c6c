/*
 * coherence.c - suite `coherence`: cache-line latency between ordered
 * pairs of CPUs, one-way (`spin`) and half round trip (`spin-rtt`): the
 * floor under every notification mechanism, per destination (the Nemo
 * paper's per-destination profile).
 *
 * Bounded in time on large machines: every ordered pair up to
 * COHERENCE_ALL_PAIRS_MAX_CPUS CPUs (4032 pairs at 64), a sample above
 * (from every CPU, a few CPUs of each topology distance class), and
 * unless --trials is given, fewer trials per pair the more pairs there
 * are (2000 up to 240 pairs, i.e. 16 CPUs; at least 200).  The JSON says
 * which pairs and how many trials.
 */
#define _GNU_SOURCE
#include "plan.h"
#include "unicast.h"

#include <stdlib.h>
#include <string.h>

/* Default trials per pair hold up to this many pairs; beyond, they shrink
 * in proportion, to no fewer than COH_MIN_TRIALS. */
#define COH_FULL_TRIAL_PAIRS 240
#define COH_MIN_TRIALS 200
/* Sampled pairs: per source CPU and distance class, this many receivers. */
#define COH_SAMPLE_PER_CLASS 2

static void coh_list(FILE *out)
{
	fprintf(out, "    %-20s [one-way] receiver polls a line; sender's store is the signal\n", "spin");
	fprintf(out, "    %-20s [round-trip] ping-pong on two lines; half the round trip\n", "spin-rtt");
}

static void coh_help(FILE *out)
{
	fprintf(out,
"Cache-line latency between ordered pairs of CPUs in --cpus (default: all),\n"
"one-way and round-trip, as a matrix of rows (src_cpu, dst_cpu); each row\n"
"has the pair's topology distance class.  Every pair up to %d CPUs; above,\n"
"a sample: from every CPU, %d CPUs of each distance class (--pairs all|sample\n"
"to choose).  Without --trials, %ld trials per pair up to %d pairs, fewer\n"
"beyond (in proportion, at least %d), so that 64 CPUs take well under a\n"
"minute.\n"
"Mechanisms:\n", COHERENCE_ALL_PAIRS_MAX_CPUS, COH_SAMPLE_PER_CLASS, suite_coherence.default_trials,
		COH_FULL_TRIAL_PAIRS, COH_MIN_TRIALS);
	coh_list(out);
}

static bool coh_has(const char *name)
{
	return strcmp(name, "spin") == 0 || strcmp(name, "spin-rtt") == 0;
}

static int topo_distance(int a, int b, void *ctx)
{
	(void)ctx;
	return bench_cpu_distance(a, b);
}

static void coh_run(const bench_opts *o, json_t *results, json_t *config)
{
	int *cpus = xcalloc(BENCH_MAX_CPUS, sizeof *cpus), n = 0;
	if (o->ncpus) {
		for (int i = 0; i < o->ncpus; i++) {
			bool seen = false;
			for (int j = 0; j < n; j++)
				seen |= cpus[j] == o->cpus[i];
			if (!seen)
				cpus[n++] = o->cpus[i];
		}
	} else {
		n = bench_usable_cpus(cpus, BENCH_MAX_CPUS);
	}
	if (n < 2)
		usage_error("the coherence suite needs at least two CPUs (have %d)", n);
	bool one = true, rtt = true;
	if (o->nmechs) {
		one = rtt = false;
		for (int i = 0; i < o->nmechs; i++) {
			one |= strcmp(o->mechs[i], "spin") == 0;
			rtt |= strcmp(o->mechs[i], "spin-rtt") == 0;
		}
	}

	/* The pairs. */
	bool sample = o->pairs == PAIRS_SAMPLE ||
		      (o->pairs == PAIRS_AUTO && n > COHERENCE_ALL_PAIRS_MAX_CPUS);
	size_t total = (size_t)n * (size_t)(n - 1);
	plan_pair *pairs = xcalloc(plan_pairs_max(n, !sample, COH_SAMPLE_PER_CLASS), sizeof *pairs);
	int np = plan_pairs(cpus, n, !sample, COH_SAMPLE_PER_CLASS, o->seed, topo_distance, NULL, pairs);

	/* Trials per pair. */
	bench_opts op = *o;
	if (!o->trials_set) {
		op.trials = plan_trials_per_pair(o->trials, np, COH_FULL_TRIAL_PAIRS, COH_MIN_TRIALS);
		long w = op.trials / 10 < 10 ? 10 : op.trials / 10;
		if (w < op.warmup)
			op.warmup = w;
	}
	bool scaled = op.trials < o->trials;

	json_t *cl = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(cl, json_integer(cpus[i]));
	json_object_set_new(config, "cpus", cl);
	json_object_set_new(config, "pairs", json_string(sample ? "sample" : "all"));
	json_object_set_new(config, "pairs_measured", json_integer(np));
	json_object_set_new(config, "pairs_total", json_integer((json_int_t)total));
	json_object_set_new(config, "trials", json_integer(op.trials));
	json_object_set_new(config, "warmup", json_integer(op.warmup));
	json_object_set_new(config, "trials_scaled", json_boolean(scaled));
	json_t *classes = json_array();
	for (int d = -1; d <= 6; d++) {
		int c = 0;
		for (int i = 0; i < np; i++)
			c += pairs[i].distance == d;
		if (c)
			json_array_append_new(classes, json_pack("{s:i,s:i}", "distance", d, "pairs", c));
	}
	json_object_set_new(config, "distance_classes", classes);
	if (sample || scaled)
		warn(o, "coherence: %s%d of %zu pairs, %ld trials each%s", sample ? "a sample: " : "",
		     np, total, op.trials, scaled ? " (fewer than the default: many pairs; --trials to choose)" : "");

	progress_begin(o, "coherence", (uint64_t)np * (uint64_t)(one + rtt) * (uint64_t)op.trials);
	/* An interrupted run (bench.h) stops between rows, and within one at
	 * a trial boundary. */
	for (int i = 0; i < np && !bench_interrupted(); i++) {
		for (int k = 0; k < 2 && !bench_interrupted(); k++) {
			if (!(k ? rtt : one))
				continue;
			const char *name = k ? "spin-rtt" : "spin";
			char why[200];
			size_t before = json_array_size(results);
			if (!unicast_row(&op, unicast_find(name), k ? SC_ROUND_TRIP : SC_ONE_WAY,
					 pairs[i].src, pairs[i].dst, results, why, sizeof why))
				fatal("%s: %s", name, why);
			if (json_array_size(results) > before)
				json_object_set_new(json_array_get(results, before), "distance",
						    json_integer(pairs[i].distance));
		}
	}
	progress_end();
	free(pairs);
	free(cpus);
}

const suite suite_coherence = {
	.name = "coherence",
	.summary = "cache-line one-way and round-trip latency between CPU pairs (all, or a sample on large machines)",
	.options = OPT_MECHS | OPT_CPUS | OPT_PAIRS | OPT_SUMMARY,
	.default_trials = 2000,
	.default_delay_min_us = 1,
	.default_delay_max_us = 3,
	.help = coh_help,
	.list = coh_list,
	.has_mechanism = coh_has,
	.run = coh_run,
};
