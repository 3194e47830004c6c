/*
 * summary.c - --summary FILE: the summary table as Markdown (FILE.md, or
 * - for standard output) or CSV (FILE.csv).
 *
 * The same columns as the table nemo-bench prints on stdout at the end
 * (summary_print, print_throughput, print_broadcast, at the end of this
 * file; preload.c's pre_print), one line per row, plus each row's trials (an interrupted
 * run keeps rows of fewer trials than asked) and, for the policy suite,
 * its repeat.  CSV splits what the table packs into one cell (src>dst,
 * K* for oversubscribed, 1.02x) into plain values, and puts the broadcast
 * suite's one-way rows in the same table, with the columns they have.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <string.h>
#include <strings.h>
#include <stdarg.h>
#include <stdlib.h>

enum { IN_MD = 1, IN_CSV = 2, IN_ALL = 3 };

typedef struct tcol {
	const char *head;             /* Markdown header, as the table's */
	const char *csv;              /* CSV header */
	bool left;                    /* text: left-aligned */
	unsigned in;                  /* IN_MD, IN_CSV */
} tcol;

#define TMAX_COLS 24

typedef struct tpart {
	const char *caption;          /* Markdown: a line before the table, or NULL */
	int ncols;
	tcol cols[TMAX_COLS];
	char **cells;                 /* row-major, ncols a row */
	size_t ncells, cap;
} tpart;

typedef struct table {
	int nparts;
	tpart part[2];
	char *notes[4];               /* Markdown: paragraphs after the tables */
	int nnotes;
} table;

static tpart *part_new(table *t, const char *caption)
{
	tpart *p = &t->part[t->nparts++];
	*p = (tpart){ .caption = caption };
	return p;
}

static void col(tpart *p, const char *head, const char *csv, bool left, unsigned in)
{
	if (p->ncols == TMAX_COLS)
		fatal("summary: too many columns");
	p->cols[p->ncols++] = (tcol){ head, csv, left, in };
}

/* The next cell of the row being filled (cells fill rows in column order). */
static void cell(tpart *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cell(tpart *p, const char *fmt, ...)
{
	if (p->ncells == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 64;
		p->cells = realloc(p->cells, p->cap * sizeof *p->cells);
		if (!p->cells)
			fatal("out of memory");
	}
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&p->cells[p->ncells], fmt, ap) < 0)
		fatal("out of memory");
	va_end(ap);
	p->ncells++;
}

static void note(table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(table *t, const char *fmt, ...)
{
	if (t->nnotes == (int)(sizeof t->notes / sizeof t->notes[0]))
		return;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&t->notes[t->nnotes], fmt, ap) < 0)
		fatal("out of memory");
	va_end(ap);
	t->nnotes++;
}

static void table_free(table *t)
{
	for (int i = 0; i < t->nparts; i++) {
		for (size_t c = 0; c < t->part[i].ncells; c++)
			free(t->part[i].cells[c]);
		free(t->part[i].cells);
	}
	for (int i = 0; i < t->nnotes; i++)
		free(t->notes[i]);
}

/* ------------------------------------------------------------ rows */

static json_t *jget(json_t *obj, const char *a, const char *b)
{
	json_t *x = json_object_get(obj, a);
	return b ? json_object_get(x, b) : x;
}

static double jnum(json_t *obj, const char *a, const char *b)
{
	return json_number_value(jget(obj, a, b));
}

static const char *jstr(json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));
	return s ? s : "-";
}

/* src>dst in Markdown, src_cpu and dst_cpu in CSV. */
static void cols_pair(tpart *p)
{
	col(p, "src>dst", NULL, false, IN_MD);
	col(p, NULL, "src_cpu", false, IN_CSV);
	col(p, NULL, "dst_cpu", false, IN_CSV);
}

static void cells_pair(tpart *p, json_t *r)
{
	int src = (int)jnum(r, "src_cpu", NULL), dst = (int)jnum(r, "dst_cpu", NULL);
	cell(p, "%d>%d", src, dst);
	cell(p, "%d", src);
	cell(p, "%d", dst);
}

/* unicast, coherence, policy: as print_summary. */
static void latency_table(table *t, json_t *results)
{
	json_t *first = json_array_get(results, 0);
	bool gaps = json_object_get(first, "gap_ns") != NULL;
	bool repeats = json_object_get(first, "repeat") != NULL;
	tpart *p = part_new(t, NULL);
	col(p, "mechanism", "mechanism", true, IN_ALL);
	col(p, "scenario", "scenario", true, IN_ALL);
	cols_pair(p);
	if (gaps)
		col(p, "gap us", "gap_us", false, IN_ALL);
	if (repeats)
		col(p, "repeat", "repeat", false, IN_ALL);
	col(p, "trials", "trials", false, IN_ALL);
	col(p, "p50 ns", "p50_ns", false, IN_ALL);
	col(p, "p99 ns", "p99_ns", false, IN_ALL);
	col(p, "send p50", "send_p50_ns", false, IN_ALL);
	col(p, "max ns", "max_ns", false, IN_ALL);
	col(p, "ctx/tr", "ctx_switches_per_trial", false, IN_ALL);
	col(p, "probe", "probe_ns", false, IN_ALL);
	size_t i;
	json_t *r;
	json_array_foreach(results, i, r) {
		cell(p, "%s", jstr(r, "mechanism"));
		cell(p, "%s", jstr(r, "scenario"));
		cells_pair(p, r);
		if (gaps)
			cell(p, "%g", jnum(r, "gap_ns", NULL) / 1000);
		if (repeats)
			cell(p, "%d", (int)jnum(r, "repeat", NULL));
		cell(p, "%lld", (long long)json_integer_value(json_object_get(r, "trials")));
		cell(p, "%.0f", jnum(r, "latency_ns", "p50"));
		cell(p, "%.0f", jnum(r, "latency_ns", "p99"));
		cell(p, "%.0f", jnum(r, "sender_ns", "p50"));
		cell(p, "%.0f", jnum(r, "latency_ns", "max"));
		cell(p, "%.2f", jnum(r, "ctx_switches_per_trial", NULL));
		cell(p, "%.0f", jnum(r, "coherence_probe_ns", "before"));
	}
}

/* throughput: as print_throughput. */
static void throughput_table(table *t, json_t *results)
{
	tpart *p = part_new(t, NULL);
	col(p, "mechanism", "mechanism", true, IN_ALL);
	cols_pair(p);
	col(p, "batch", "batch", false, IN_ALL);
	col(p, "trials", "trials", false, IN_ALL);
	col(p, "p50 Mmsg/s", "p50_mmsg_per_s", false, IN_ALL);
	col(p, "min", "min_mmsg_per_s", false, IN_ALL);
	col(p, "max", "max_mmsg_per_s", false, IN_ALL);
	col(p, "kicks/msg", "kicks_per_msg", false, IN_ALL);
	size_t i;
	json_t *r;
	json_array_foreach(results, i, r) {
		cell(p, "%s", jstr(r, "mechanism"));
		cells_pair(p, r);
		cell(p, "%d", (int)jnum(r, "batch", NULL));
		cell(p, "%lld", (long long)json_integer_value(json_object_get(r, "trials")));
		cell(p, "%.2f", jnum(r, "msgs_per_s_stats", "p50") / 1e6);
		cell(p, "%.2f", jnum(r, "msgs_per_s_stats", "min") / 1e6);
		cell(p, "%.2f", jnum(r, "msgs_per_s_stats", "max") / 1e6);
		cell(p, "%.4f", jnum(r, "kicks_per_msg", NULL));
	}
}

/* broadcast: as print_broadcast, its one-way rows a second table. */
static void broadcast_table(table *t, json_t *results)
{
	tpart *p = part_new(t, NULL);
	col(p, "mechanism", "mechanism", true, IN_ALL);
	col(p, "scenario", "scenario", true, IN_ALL);
	col(p, "policy", "policy", true, IN_ALL);
	col(p, "src", "src_cpu", false, IN_ALL);
	col(p, NULL, "dst_cpu", false, IN_CSV);
	col(p, "K", NULL, false, IN_MD);
	col(p, NULL, "waiters", false, IN_CSV);
	col(p, NULL, "oversubscribed", false, IN_CSV);
	col(p, "trials", "trials", false, IN_ALL);
	col(p, "first p50", "first_p50_ns", false, IN_ALL);
	col(p, "last p50", "last_p50_ns", false, IN_ALL);
	col(p, "last p99", "last_p99_ns", false, IN_ALL);
	col(p, "send p50", "send_p50_ns", false, IN_ALL);
	col(p, "ctx/tr", "ctx_switches_per_trial", false, IN_ALL);
	col(p, "x1way", "x1way", false, IN_ALL);
	col(p, "probe", "probe_ns", false, IN_ALL);
	size_t i;
	json_t *r;
	bool oversub = false, oneway = false;
	json_array_foreach(results, i, r) {
		if (!json_object_get(r, "waiters")) {
			oneway = true;
			continue;
		}
		bool over = json_is_true(json_object_get(r, "oversubscribed"));
		oversub |= over;
		int k = (int)jnum(r, "waiters", NULL);
		json_t *ow = json_object_get(r, "one_way_spin_p50_ns");
		bool ratio = json_is_number(ow) && json_number_value(ow) > 0;
		cell(p, "%s", jstr(r, "mechanism"));
		cell(p, "%s", jstr(r, "scenario"));
		cell(p, "%s", jstr(r, "policy"));
		cell(p, "%d", (int)jnum(r, "src_cpu", NULL));
		cell(p, "%d", (int)jnum(r, "dst_cpu", NULL));
		cell(p, "%d%s", k, over ? "\\*" : "");
		cell(p, "%d", k);
		cell(p, "%s", over ? "true" : "false");
		cell(p, "%lld", (long long)json_integer_value(json_object_get(r, "trials")));
		cell(p, "%.0f", jnum(r, "first_ns", "p50"));
		cell(p, "%.0f", jnum(r, "last_ns", "p50"));
		cell(p, "%.0f", jnum(r, "last_ns", "p99"));
		cell(p, "%.0f", jnum(r, "sender_ns", "p50"));
		cell(p, "%.2f", jnum(r, "ctx_switches_per_trial", NULL));
		if (ratio)
			cell(p, "%.1f", jnum(r, "last_ns", "p50") / json_number_value(ow));
		else
			cell(p, "-");
		cell(p, "%.0f", jnum(r, "coherence_probe_ns", "before"));
	}
	if (oversub)
		note(t, "\\* oversubscribed: some waiters share a CPU with another thread of the row");
	if (!oneway)
		return;
	p = part_new(t, "One-way spin, sender > waiter CPU (x1way = last p50 / the largest of these p50 "
		     "over the row's waiter CPUs):");
	col(p, NULL, "mechanism", true, IN_CSV);
	col(p, NULL, "scenario", true, IN_CSV);
	cols_pair(p);
	col(p, "trials", "trials", false, IN_ALL);
	col(p, "p50 ns", "p50_ns", false, IN_ALL);
	col(p, "p99 ns", "p99_ns", false, IN_ALL);
	json_array_foreach(results, i, r) {
		if (json_object_get(r, "waiters"))
			continue;
		cell(p, "%s", jstr(r, "mechanism"));
		cell(p, "%s", jstr(r, "scenario"));
		cells_pair(p, r);
		cell(p, "%lld", (long long)json_integer_value(json_object_get(r, "trials")));
		cell(p, "%.0f", jnum(r, "latency_ns", "p50"));
		cell(p, "%.0f", jnum(r, "latency_ns", "p99"));
	}
}

/* preload: as pre_print. */
static void preload_table(table *t, json_t *results)
{
	tpart *p = part_new(t, NULL);
	col(p, "program", "program", true, IN_ALL);
	col(p, "mode", "mode", true, IN_ALL);
	col(p, "trials", "trials", false, IN_ALL);
	col(p, "p50 per s", "p50_per_s", false, IN_ALL);
	col(p, "vs glibc", NULL, false, IN_MD);
	col(p, NULL, "vs_glibc", false, IN_CSV);
	col(p, "min per s", "min_per_s", false, IN_ALL);
	col(p, "max per s", "max_per_s", false, IN_ALL);
	col(p, "interposed", NULL, true, IN_MD);
	col(p, NULL, "interposed", true, IN_CSV);
	col(p, "unit", "unit", true, IN_ALL);
	size_t i;
	json_t *r;
	json_array_foreach(results, i, r) {
		json_t *ratio = json_object_get(r, "ratio_vs_glibc");
		bool ip = json_is_true(json_object_get(r, "interposed"));
		cell(p, "%s", jstr(r, "mechanism"));
		cell(p, "%s", jstr(r, "mode"));
		cell(p, "%lld", (long long)json_integer_value(json_object_get(r, "trials")));
		cell(p, "%.0f", jnum(r, "rate_per_s", NULL));
		if (json_is_number(ratio)) {
			cell(p, "%.2fx", json_number_value(ratio));
			cell(p, "%.4f", json_number_value(ratio));
		} else {
			cell(p, "-");
			cell(p, "-");
		}
		cell(p, "%.0f", jnum(r, "rate_per_s_stats", "min"));
		cell(p, "%.0f", jnum(r, "rate_per_s_stats", "max"));
		cell(p, "%s", ip ? "yes" : "no");
		cell(p, "%s", ip ? "true" : "false");
		cell(p, "%s", jstr(r, "unit"));
	}
	note(t, "p50, min, max over rounds; vs glibc = this row's p50 / the same program's glibc p50, in "
		"this run (above 1.00x: faster under the interposer).  nemo-default: preloaded, no "
		"NEMO_WAIT, no calibration profile; nemo-POLICY: NEMO_WAIT=POLICY.");
}

/* ---------------------------------------------------------- writers */

static void md_cell(FILE *f, const char *s)
{
	fputc(' ', f);
	for (; *s; s++) {
		if (*s == '|')
			fputc('\\', f);
		fputc(*s == '\n' ? ' ' : *s, f);
	}
	fputs(" |", f);
}

static void write_md(FILE *f, const table *t, int interrupted_by)
{
	for (int k = 0; k < t->nparts; k++) {
		const tpart *p = &t->part[k];
		if (k)
			fputc('\n', f);
		if (p->caption)
			fprintf(f, "%s\n\n", p->caption);
		fputc('|', f);
		for (int c = 0; c < p->ncols; c++)
			if (p->cols[c].in & IN_MD)
				md_cell(f, p->cols[c].head);
		fputs("\n|", f);
		for (int c = 0; c < p->ncols; c++)
			if (p->cols[c].in & IN_MD)
				fputs(p->cols[c].left ? " --- |" : " ---: |", f);
		fputc('\n', f);
		for (size_t at = 0; at + (size_t)p->ncols <= p->ncells; at += (size_t)p->ncols) {
			fputc('|', f);
			for (int c = 0; c < p->ncols; c++)
				if (p->cols[c].in & IN_MD)
					md_cell(f, p->cells[at + (size_t)c]);
			fputc('\n', f);
		}
	}
	for (int i = 0; i < t->nnotes; i++)
		fprintf(f, "\n%s\n", t->notes[i]);
	if (interrupted_by)
		fprintf(f, "\n**Interrupted by %s**: only the rows above were measured, and a row may have "
			"fewer trials than were asked for (its trials column says how many).\n",
			interrupt_signal_name(interrupted_by));
}

/* One value; the table's "-" (none) is an empty one. */
static void csv_cell(FILE *f, const char *s, bool first)
{
	if (!first)
		fputc(',', f);
	if (!strcmp(s, "-"))
		return;
	if (!strpbrk(s, ",\"\n\r")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

/* One table: the CSV columns of every part, by name, in order of first
 * appearance; a part's row leaves the others' columns empty. */
static void write_csv(FILE *f, const table *t)
{
	const char *names[2 * TMAX_COLS];
	int n = 0;
	for (int k = 0; k < t->nparts; k++)
		for (int c = 0; c < t->part[k].ncols; c++) {
			const tcol *tc = &t->part[k].cols[c];
			if (!(tc->in & IN_CSV))
				continue;
			bool seen = false;
			for (int j = 0; j < n && !seen; j++)
				seen = strcmp(names[j], tc->csv) == 0;
			if (!seen)
				names[n++] = tc->csv;
		}
	for (int j = 0; j < n; j++)
		csv_cell(f, names[j], j == 0);
	fputc('\n', f);
	for (int k = 0; k < t->nparts; k++) {
		const tpart *p = &t->part[k];
		for (size_t at = 0; at + (size_t)p->ncols <= p->ncells; at += (size_t)p->ncols) {
			for (int j = 0; j < n; j++) {
				const char *v = "";
				for (int c = 0; c < p->ncols; c++)
					if ((p->cols[c].in & IN_CSV) && strcmp(p->cols[c].csv, names[j]) == 0)
						v = p->cells[at + (size_t)c];
				csv_cell(f, v, j == 0);
			}
			fputc('\n', f);
		}
	}
}

bool summary_is_csv(const char *path)
{
	size_t n = strlen(path);
	return n > 4 && strcasecmp(path + n - 4, ".csv") == 0;
}

bool summary_path_ok(const char *path)
{
	size_t n = strlen(path);
	return strcmp(path, "-") == 0 || summary_is_csv(path) || (n > 3 && strcasecmp(path + n - 3, ".md") == 0);
}

void summary_write(FILE *f, const char *path, const char *suite_name, json_t *results, int interrupted_by)
{
	table t = { 0 };
	if (strcmp(suite_name, "throughput") == 0)
		throughput_table(&t, results);
	else if (strcmp(suite_name, "broadcast") == 0)
		broadcast_table(&t, results);
	else if (strcmp(suite_name, "preload") == 0)
		preload_table(&t, results);
	else
		latency_table(&t, results);
	if (summary_is_csv(path))
		write_csv(f, &t);
	else
		write_md(f, &t, interrupted_by);
	table_free(&t);
}

/* ------------------------------------------------------ the table on stdout */

/* Throughput rows: rates in millions of messages per second. */
static void print_throughput(json_t *results)
{
	printf("%-20s %7s %6s %12s %10s %10s %10s\n", "mechanism", "src>dst", "batch",
	       "p50 Mmsg/s", "min", "max", "kicks/msg");
	size_t i;
	json_t *r;
	json_array_foreach(results, i, r) {
		char pair[16];
		snprintf(pair, sizeof pair, "%d>%d", (int)jnum(r, "src_cpu", NULL), (int)jnum(r, "dst_cpu", NULL));
		printf("%-20s %7s %6d %12.2f %10.2f %10.2f %10.4f\n",
		       json_string_value(json_object_get(r, "mechanism")), pair,
		       (int)jnum(r, "batch", NULL),
		       jnum(r, "msgs_per_s_stats", "p50") / 1e6, jnum(r, "msgs_per_s_stats", "min") / 1e6,
		       jnum(r, "msgs_per_s_stats", "max") / 1e6, jnum(r, "kicks_per_msg", NULL));
	}
}

/* Broadcast rows: first and last waiter; then the one-way spin rows. */
static void print_broadcast(json_t *results)
{
	printf("%-14s %-8s %-13s %5s %4s %9s %9s %9s %9s %6s %6s %6s\n", "mechanism", "scenario",
	       "policy", "src", "K", "first p50", "last p50", "last p99", "send p50", "ctx/tr",
	       "x1way", "probe");
	size_t i;
	json_t *r;
	bool oversub = false, oneway = false;
	json_array_foreach(results, i, r) {
		if (!json_object_get(r, "waiters")) {
			oneway = true;
			continue;
		}
		char k[12], ratio[12] = "-";
		bool over = json_is_true(json_object_get(r, "oversubscribed"));
		oversub |= over;
		snprintf(k, sizeof k, "%d%s", (int)jnum(r, "waiters", NULL), over ? "*" : "");
		json_t *ow = json_object_get(r, "one_way_spin_p50_ns");
		if (json_is_number(ow) && json_number_value(ow) > 0)
			snprintf(ratio, sizeof ratio, "%.1f", jnum(r, "last_ns", "p50") / json_number_value(ow));
		const char *pol = json_string_value(json_object_get(r, "policy"));
		printf("%-14s %-8s %-13s %5d %4s %9.0f %9.0f %9.0f %9.0f %6.2f %6s %6.0f\n",
		       json_string_value(json_object_get(r, "mechanism")),
		       json_string_value(json_object_get(r, "scenario")), pol ? pol : "-",
		       (int)jnum(r, "src_cpu", NULL), k,
		       jnum(r, "first_ns", "p50"), jnum(r, "last_ns", "p50"), jnum(r, "last_ns", "p99"),
		       jnum(r, "sender_ns", "p50"), jnum(r, "ctx_switches_per_trial", NULL), ratio,
		       jnum(r, "coherence_probe_ns", "before"));
	}
	if (oversub)
		printf("* oversubscribed: some waiters share a CPU with another thread of the row\n");
	if (!oneway)
		return;
	printf("one-way spin, sender > waiter CPU (x1way = last p50 / the largest of these p50 over the row's waiter CPUs):\n");
	json_array_foreach(results, i, r) {
		if (json_object_get(r, "waiters"))
			continue;
		printf("  %4d>%-4d p50 %6.0f  p99 %6.0f\n", (int)jnum(r, "src_cpu", NULL),
		       (int)jnum(r, "dst_cpu", NULL), jnum(r, "latency_ns", "p50"),
		       jnum(r, "latency_ns", "p99"));
	}
}

void summary_print(const char *suite_name, json_t *results)
{
	if (strcmp(suite_name, "throughput") == 0) {
		print_throughput(results);
		return;
	}
	if (strcmp(suite_name, "broadcast") == 0) {
		print_broadcast(results);
		return;
	}
	/* Nothing measured in rows (calibrate): no table. */
	if (!json_array_size(results))
		return;
	/* Rows of the policy suite differ by gap: show it. */
	bool gaps = json_object_get(json_array_get(results, 0), "gap_ns") != NULL;
	printf("%-20s %-10s %7s %8s %10s %10s %10s %10s %6s %7s\n", "mechanism", "scenario",
	       "src>dst", gaps ? "gap us" : "", "p50 ns", "p99 ns", "send p50", "max ns", "ctx/tr", "probe");
	size_t i;
	json_t *r;
	json_array_foreach(results, i, r) {
		char pair[16], gap[16] = "";
		snprintf(pair, sizeof pair, "%d>%d", (int)jnum(r, "src_cpu", NULL), (int)jnum(r, "dst_cpu", NULL));
		if (gaps)
			snprintf(gap, sizeof gap, "%g", jnum(r, "gap_ns", NULL) / 1000);
		printf("%-20s %-10s %7s %8s %10.0f %10.0f %10.0f %10.0f %6.2f %7.0f\n",
		       json_string_value(json_object_get(r, "mechanism")),
		       json_string_value(json_object_get(r, "scenario")), pair, gap,
		       jnum(r, "latency_ns", "p50"), jnum(r, "latency_ns", "p99"),
		       jnum(r, "sender_ns", "p50"), jnum(r, "latency_ns", "max"),
		       jnum(r, "ctx_switches_per_trial", NULL),
		       jnum(r, "coherence_probe_ns", "before"));
	}
}
