/*
 * cli.h - the command line of nemo-bench, which main.c puts together:
 * the suites it offers (main.c), their options (options.c: one table, the
 * parser, and --help generated from the suites' option sets), the output
 * files (outfile.c) and the table on stdout (summary.c).
 */
#ifndef NEMO_BENCH_CLI_H
#define NEMO_BENCH_CLI_H

#include "bench.h"

/** Every suite, in --help's order, NULL-terminated (main.c). */
extern const suite *const bench_suites[];

/* options.c */
/** The suite called name, or NULL. */
const suite *find_suite(const char *name);
/** nemo-bench --help. */
void usage(FILE *out);
/** nemo-bench list: every suite and its mechanisms. */
void list_all(void);
/** The options of suite s (argv[2] on) into o, with the suite's defaults;
 *  a bad option is a usage error.  Opens --json and --summary (outfile.c). */
void parse_args(const suite *s, int argc, char **argv, bench_opts *o);
/** The config object of docs/bench-json.md. */
json_t *config_json(const bench_opts *o);

/* outfile.c: --json FILE and --summary FILE, whole or not at all. */
typedef struct outfile {
	const char *opt;              /* "--json", "--summary" */
	const char *path;             /* NULL: not asked for */
	FILE *f;
	int slot;                     /* of its temporary file in tmp_paths */
} outfile;

enum { OUT_JSON = INTERRUPT_TMP_JSON, OUT_SUMMARY = INTERRUPT_TMP_SUMMARY, OUT_COUNT };
extern outfile bench_out[OUT_COUNT];

/** Open o's --json and --summary (a bad path is a usage error). */
void out_open_all(const bench_opts *o);
/** Complete the file: flush it to disk, then put it in place. */
void out_commit(outfile *o);
/** Nothing to write: FILE stays as it was. */
void out_discard(outfile *o);
/** Remove the temporary files (atexit). */
void tmp_remove_all(void);

/* summary.c */
/** The summary table on stdout of a suite that has no print of its own. */
void summary_print(const char *suite_name, json_t *results);

#endif
