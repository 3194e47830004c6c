/*
 * output.c - the JSON document of docs/bench-json.md (through jansson)
 * and the raw-sample CSV files.
 */
#define _GNU_SOURCE
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

json_t *stats_json(const stats *s)
{
	return json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f}",
			 "min", s->min, "p50", s->p50, "p90", s->p90, "p99", s->p99,
			 "max", s->max, "mean", s->mean, "stddev", s->stddev);
}

json_t *stats_object(double *v, size_t n)
{
	stats s;
	stats_compute(v, n, &s, NULL);
	return stats_json(&s);
}

static json_t *cdf_json(const double *cdf)
{
	json_t *a = json_array();
	for (int i = 0; i < STATS_CDF_POINTS; i++)
		json_array_append_new(a, json_real(cdf[i]));
	return a;
}

/* Add "<name>" STATS and "<cdf_name>" CDF of v (sorted in place) to obj. */
static void add_distribution(json_t *obj, const char *name, const char *cdf_name,
			     double *v, size_t n)
{
	stats s;
	double cdf[STATS_CDF_POINTS];
	stats_compute(v, n, &s, cdf);
	json_object_set_new(obj, name, stats_json(&s));
	json_object_set_new(obj, cdf_name, cdf_json(cdf));
}

static json_t *topology_json(void)
{
	json_t *a = json_array();
	nemo_topo *t;
	if (nemo_topo_load(&t) != 0)
		return a;
	for (int i = 0; i < nemo_topo_cpus(t); i++) {
		nemo_cpu_place p;
		nemo_topo_cpu(t, i, &p);
		json_array_append_new(a, json_pack("{s:i,s:i,s:i,s:i,s:i,s:i}",
			"cpu", p.cpu, "core", p.core, "package", p.package,
			"numa", p.numa, "l2", p.l2, "l3", p.l3));
	}
	nemo_topo_free(t);
	return a;
}

json_t *machine_json(void)
{
	nemo_cpu_id id;
	nemo_clock_info ci;
	struct utsname u;
	nemo_cpu_identify(&id);
	nemo_clock_get_info(&ci);
	uname(&u);
	return json_pack("{s:s,s:i,s:f,s:s,s:f,s:f,s:s,s:b,s:o,s:o}",
		"cpu_model", id.model,
		"cpus", nemo_cpu_count(),
		"tsc_hz", ci.ticks_per_sec,
		"clock_source", ci.source == NEMO_CLOCK_TSC ? "tsc" : "clock_gettime",
		"clock_overhead_ns", ci.overhead_ns,
		"clock_resolution_ns", ci.resolution_ns,
		"kernel", u.release,
		"virtualized", id.virtualized,
		"hypervisor", id.hypervisor[0] ? json_string(id.hypervisor) : json_null(),
		"topology", topology_json());
}

/* Raw samples before sorting; returns the file name (relative) or NULL. */
static char *write_samples(const bench_opts *o, const char *suite_name, const row *r)
{
	if (!o->samples_dir)
		return NULL;
	char *name = NULL, *path = NULL;
	char kpart[64] = "";
	if (r->waiters)
		snprintf(kpart, sizeof kpart, "-k%d", r->waiters);
	else if (r->tag)
		snprintf(kpart, sizeof kpart, "-%s", r->tag);
	if (asprintf(&name, "%s-%s-%s-%d-%d%s.csv", suite_name, r->mechanism, r->scenario,
		     r->src, r->dst, kpart) < 0 ||
	    asprintf(&path, "%s/%s", o->samples_dir, name) < 0)
		fatal("out of memory");
	FILE *f = fopen(path, "w");
	if (!f)
		fatal("cannot write samples to %s: %s", path, strerror(errno));
	if (r->waiters) {
		fprintf(f, "trial,waiter,cpu,latency_ns,sender_ns\n");
		for (size_t i = 0; i < r->nlat; i++) {
			long trial = (long)(i / (size_t)r->waiters);
			int w = r->lat_waiter[i];
			fprintf(f, "%ld,%d,%d,%.1f,%.1f\n", trial, w, r->waiter_cpus[w],
				r->lat_ns[i], r->send_ns[trial]);
		}
	} else {
		fprintf(f, "trial,latency_ns,sender_ns\n");
		for (long i = 0; i < r->trials; i++)
			fprintf(f, "%ld,%.1f,%.1f\n", i, r->lat_ns[i], r->send_ns[i]);
	}
	if (fclose(f) != 0)
		fatal("cannot write samples to %s: %s", path, strerror(errno));
	free(path);
	return name;
}

/* The JSON file sits next to (or above) the samples folder: make the
 * samples path relative to the JSON file's folder when we can. */
static char *relative_samples_path(const bench_opts *o, const char *name)
{
	char *out = NULL;
	char *jdir = NULL;
	if (o->json_path && strcmp(o->json_path, "-") != 0) {
		/* The folder the JSON file will be renamed into (it need not
		 * exist yet: nemo-bench writes a temporary file first). */
		char *dir = strdup(o->json_path);
		if (!dir)
			fatal("out of memory");
		char *slash = strrchr(dir, '/');
		if (slash == dir)
			dir[1] = 0;
		else if (slash)
			*slash = 0;
		jdir = realpath(slash ? dir : ".", NULL);
		free(dir);
	}
	char *sdir = realpath(o->samples_dir, NULL);
	const char *rel = sdir;
	if (jdir && sdir) {
		size_t n = strlen(jdir);
		if (strncmp(sdir, jdir, n) == 0 && sdir[n] == '/')
			rel = sdir + n + 1;
		else if (strcmp(sdir, jdir) == 0)
			rel = ".";
	}
	if (asprintf(&out, "%s/%s", rel ? rel : o->samples_dir, name) < 0)
		fatal("out of memory");
	free(jdir);
	free(sdir);
	return out;
}

FILE *samples_create(const bench_opts *o, const char *name, char **rel)
{
	*rel = NULL;
	if (!o->samples_dir)
		return NULL;
	char *path = NULL;
	if (asprintf(&path, "%s/%s", o->samples_dir, name) < 0)
		fatal("out of memory");
	FILE *f = fopen(path, "w");
	if (!f)
		fatal("cannot write samples to %s: %s", path, strerror(errno));
	free(path);
	*rel = relative_samples_path(o, name);
	return f;
}

void probe_check(const bench_opts *o, const char *what, double before, double after)
{
	double lo = fmin(before, after), hi = fmax(before, after);
	if (lo > 0 && hi > 2 * lo)
		warn(o, "%s: the coherence probe moved from %.0f to %.0f ns during the row (the host moved "
			"the vCPUs): compare this row only with rows measured at the same probe", what, before, after);
}

void row_emit(const bench_opts *o, row *r, json_t *results)
{
	char what[160];
	snprintf(what, sizeof what, "%s %s %d>%d%s%s", r->mechanism, r->scenario, r->src, r->dst,
		 r->tag ? " " : "", r->tag ? r->tag : "");
	probe_check(o, what, r->probe_before, r->probe_after);
	char *sname = write_samples(o, o->suite, r);
	json_t *j = json_pack("{s:s,s:s,s:i,s:i,s:I}",
		"mechanism", r->mechanism, "scenario", r->scenario,
		"src_cpu", r->src, "dst_cpu", r->dst, "trials", (json_int_t)r->trials);
	add_distribution(j, "latency_ns", "latency_cdf_ns", r->lat_ns, r->nlat);
	add_distribution(j, "sender_ns", "sender_cdf_ns", r->send_ns, (size_t)r->trials);
	json_object_set_new(j, "ctx_switches_per_trial", json_real(r->ctx));
	json_object_set_new(j, "voluntary_ctx_switches_per_trial", json_real(r->vctx));
	json_object_set_new(j, "cpu_ns_per_event", json_real(r->cpu_ns));
	json_object_set_new(j, "coherence_probe_ns",
		json_pack("{s:f,s:f}", "before", r->probe_before, "after", r->probe_after));
	if (sname) {
		char *rel = relative_samples_path(o, sname);
		json_object_set_new(j, "samples_file", json_string(rel));
		free(rel);
		free(sname);
	} else {
		json_object_set_new(j, "samples_file", json_null());
	}
	if (r->waiters) {
		json_t *cpus = json_array();
		for (int i = 0; i < r->waiters; i++)
			json_array_append_new(cpus, json_integer(r->waiter_cpus[i]));
		json_object_set_new(j, "waiters", json_integer(r->waiters));
		json_object_set_new(j, "waiter_cpus", cpus);
		add_distribution(j, "first_ns", "first_cdf_ns", r->first_ns, (size_t)r->trials);
		add_distribution(j, "last_ns", "last_cdf_ns", r->last_ns, (size_t)r->trials);
		add_distribution(j, "spread_ns", "spread_cdf_ns", r->spread_ns, (size_t)r->trials);
	}
	json_array_append_new(results, j);
}
