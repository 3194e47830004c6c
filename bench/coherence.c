/*
 * coherence.c - suite `coherence`: cache-line latency between every
 * ordered pair of CPUs, one-way (`spin`) and half round trip (`spin-rtt`):
 * the floor under every notification mechanism, per destination (the
 * Nemo paper's per-destination profile).
 */
#define _GNU_SOURCE
#include "unicast.h"

#include <string.h>

static void coh_list(FILE *out)
{
	fprintf(out, "    %-20s [one-way] receiver polls a line; sender's store is the signal\n", "spin");
	fprintf(out, "    %-20s [round-trip] ping-pong on two lines; half the round trip\n", "spin-rtt");
}

static void coh_help(FILE *out)
{
	fprintf(out,
"Cache-line latency for every ordered pair of CPUs in --cpus (default: all),\n"
"one-way and round-trip, as a matrix of rows (src_cpu, dst_cpu).\n"
"Mechanisms:\n");
	coh_list(out);
}

static bool coh_has(const char *name)
{
	return strcmp(name, "spin") == 0 || strcmp(name, "spin-rtt") == 0;
}

static int coh_run(const bench_opts *o, json_t *results, json_t *config)
{
	int cpus[BENCH_MAX_LIST], n = 0;
	if (o->ncpus)
		for (int i = 0; i < o->ncpus; i++)
			cpus[n++] = o->cpus[i];
	else
		for (int c = 0; c < nemo_cpu_count() && n < BENCH_MAX_LIST; c++)
			cpus[n++] = c;
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
	json_t *cl = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(cl, json_integer(cpus[i]));
	json_object_set_new(config, "cpus", cl);
	uint64_t pairs = (uint64_t)n * (uint64_t)(n - 1);
	progress_begin(o, "coherence", pairs * (uint64_t)(one + rtt) * (uint64_t)o->trials);
	for (int a = 0; a < n; a++) {
		for (int b = 0; b < n; b++) {
			if (a == b)
				continue;
			char why[200];
			if (one && !unicast_row(o, unicast_find("spin"), SC_ONE_WAY, cpus[a], cpus[b],
						results, why, sizeof why))
				fatal("spin: %s", why);
			if (rtt && !unicast_row(o, unicast_find("spin-rtt"), SC_ROUND_TRIP, cpus[a],
						cpus[b], results, why, sizeof why))
				fatal("spin-rtt: %s", why);
		}
	}
	progress_end();
	return 0;
}

const suite suite_coherence = {
	.name = "coherence",
	.summary = "cache-line one-way and round-trip latency for every CPU pair",
	.options = OPT_MECHS | OPT_CPUS,
	.default_trials = 2000,
	.default_delay_min_us = 1,
	.default_delay_max_us = 3,
	.help = coh_help,
	.list = coh_list,
	.has_mechanism = coh_has,
	.run = coh_run,
};
