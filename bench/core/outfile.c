/*
 * outfile.c - nemo-bench's output files, --json FILE and --summary FILE.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * --json FILE and --summary FILE: each is written to a temporary file
 * beside FILE (FILE.tmp.XXXXXX), flushed to disk and renamed over FILE
 * only once it is complete, so FILE is never empty or partial.  A run
 * that fails leaves an existing FILE as it was, and so does a run
 * interrupted before any row was measured; an interrupted run that
 * measured rows writes them, marked interrupted (interrupt.c; a second
 * signal ends it at once, FILE as it was).  The temporary file is removed
 * on the way out.  `-` writes to standard output instead (one of the two
 * only), and everything else nemo-bench prints there (the summary table)
 * goes to standard error.
 */
static char tmp_paths[OUT_COUNT][PATH_MAX];   /* "" when none */
static const char *stdout_taken;  /* the option that writes to stdout */
outfile bench_out[OUT_COUNT];

static void tmp_remove(int slot)
{
	if (tmp_paths[slot][0]) {
		interrupt_tmp_set(slot, NULL);
		unlink(tmp_paths[slot]);
	}
	tmp_paths[slot][0] = 0;
}

void tmp_remove_all(void)
{
	for (int i = 0; i < OUT_COUNT; i++)
		tmp_remove(i);
}

static void out_open(outfile *o)
{
	if (!strcmp(o->path, "-")) {
		if (stdout_taken)
			usage_error("%s - and %s - cannot both write to standard output", stdout_taken, o->opt);
		stdout_taken = o->opt;
		int fd = dup(STDOUT_FILENO);
		if (fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0 || !(o->f = fdopen(fd, "w")))
			usage_error("%s -: cannot use standard output: %s", o->opt, strerror(errno));
		return;
	}
	struct stat st;
	if (stat(o->path, &st) == 0 && S_ISDIR(st.st_mode))
		usage_error("cannot write %s %s: it is a directory", o->opt, o->path);
	char *tmp = tmp_paths[o->slot];
	int n = snprintf(tmp, PATH_MAX, "%s.tmp.XXXXXX", o->path);
	if (n < 0 || n >= PATH_MAX) {
		tmp[0] = 0;
		usage_error("cannot write %s %s: the path is too long", o->opt, o->path);
	}
	/* The handlers are in place (main): a signal from here on finds the
	 * name to remove, or stops the run before anything is measured. */
	int fd = mkstemp(tmp);
	if (fd < 0) {
		int e = errno;
		tmp[0] = 0;
		usage_error("cannot write %s %s: %s", o->opt, o->path, strerror(e));
	}
	interrupt_tmp_set(o->slot, tmp);
	/* mkstemp makes it 0600; a results file is as readable as any other. */
	mode_t mask = umask(0);
	umask(mask);
	if (fchmod(fd, 0666 & ~mask) != 0 || !(o->f = fdopen(fd, "w")))
		usage_error("cannot write %s %s: %s", o->opt, o->path, strerror(errno));
}

void out_commit(outfile *o)
{
	char *tmp = tmp_paths[o->slot];
	if (fflush(o->f) != 0 || (tmp[0] && fsync(fileno(o->f)) != 0) || fclose(o->f) != 0)
		fatal("cannot write %s %s: %s", o->opt, o->path, strerror(errno));
	o->f = NULL;
	if (tmp[0]) {
		if (rename(tmp, o->path) != 0)
			fatal("cannot write %s %s: %s", o->opt, o->path, strerror(errno));
		interrupt_tmp_set(o->slot, NULL);
		tmp[0] = 0;
	}
}

void out_discard(outfile *o)
{
	if (!o->f)
		return;
	fclose(o->f);
	o->f = NULL;
	tmp_remove(o->slot);
}

void out_open_all(const bench_opts *o)
{
	bench_out[OUT_JSON] = (outfile){ .opt = "--json", .path = o->json_path, .slot = OUT_JSON };
	bench_out[OUT_SUMMARY] = (outfile){ .opt = "--summary", .path = o->summary_path, .slot = OUT_SUMMARY };
	for (int i = 0; i < OUT_COUNT; i++)
		if (bench_out[i].path)
			out_open(&bench_out[i]);
}
