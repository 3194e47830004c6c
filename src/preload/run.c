/*
 * nemo-run - run an unmodified program under the interposer:
 *
 *   nemo-run [--policy P] [--stats[=FILE]] [--] CMD [ARGS...]
 *
 * It adds libnemo-preload.so to LD_PRELOAD (after what is already there)
 * and replaces itself with CMD, so CMD's exit status is nemo-run's.  The
 * library is found relative to nemo-run itself, never on a search path:
 * NEMO_BIN_TO_LIB from its folder (an installed prefix: bin -> lib, lib64
 * or lib/x86_64-linux-gnu, compiled in), else ../lib (the build tree, the
 * portable bundle).  --policy sets NEMO_WAIT (checked here, with the
 * library's own parser, so that a typo stops before the program runs);
 * --stats sets NEMO_STATS=1, --stats=FILE sets NEMO_STATS to FILE's
 * absolute path: at exit every process of CMD's tree then writes one line
 * of what the interposer and its waits did (src/preload/preload.c, STATS).
 *
 * Why a C program and not a shell script: it finds its own file through
 * /proc/self/exe whatever the symlinks, it validates the policy with
 * nemo_wait_policy_parse rather than a copy of its grammar, and it execs
 * the program directly (no shell in between, arguments passed untouched).
 *
 * Exit status: CMD's; 2 for bad usage; 1 when the interposer cannot be
 * found; 126 when CMD cannot be executed, 127 when it does not exist (as
 * a shell).
 */
#define _GNU_SOURCE
#include <nemo/platform.h>
#include <nemo/version.h>
#include <nemo/waiter.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef NEMO_BIN_TO_LIB
#define NEMO_BIN_TO_LIB "../lib"
#endif

#define PRELOAD_NAME "libnemo-preload.so"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: nemo-run [--policy P] [--stats[=FILE]] [--] CMD [ARGS...]\n"
		"Run CMD, unmodified, with nemo's interposer (libnemo-preload.so): its\n"
		"pthread_cond_* calls go to nemo_cond, its sem_*wait calls poll before they sleep.\n"
		"  --policy P      the wait policy (NEMO_WAIT): spin, block, hybrid, hybrid:NS,\n"
		"                  adaptive (the default: learns the cost of blocking)\n"
		"  --stats         at exit, each process prints one line on stderr: calls\n"
		"                  interposed, waits polled or slept, kicks issued or avoided\n"
		"  --stats=FILE    the same lines, appended to FILE\n"
		"  --print-library print the interposer's path and exit\n"
		"  --help, --version\n");
}

/* The interposer beside this program: its absolute path in out, or 0. */
static int find_preload(char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return 0;
	self[n] = 0;
	char *slash = strrchr(self, '/');
	if (!slash)
		return 0;
	*slash = 0;
	const char *rel[] = {NEMO_BIN_TO_LIB, "../lib"};
	for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
		char cand[PATH_MAX + 64];
		snprintf(cand, sizeof cand, "%s/%s/" PRELOAD_NAME, self, rel[i]);
		char real[PATH_MAX];
		if (access(cand, R_OK) == 0 && realpath(cand, real) && strlen(real) < len) {
			strcpy(out, real);
			return 1;
		}
	}
	fprintf(stderr, "nemo-run: cannot find " PRELOAD_NAME " in %s/%s or %s/../lib (a partial install?)\n",
		self, NEMO_BIN_TO_LIB, self);
	return 0;
}

/* LD_PRELOAD with lib added after what is there (once). */
static int add_preload(const char *lib)
{
	if (strpbrk(lib, " :")) {
		fprintf(stderr, "nemo-run: %s has a space or a colon in its path, which LD_PRELOAD cannot carry\n",
			lib);
		return 0;
	}
	const char *old = getenv("LD_PRELOAD");
	if (!old || !*old)
		return setenv("LD_PRELOAD", lib, 1) == 0;
	size_t ll = strlen(lib);
	for (const char *p = old; (p = strstr(p, lib)); p += ll)
		if ((p == old || p[-1] == ' ' || p[-1] == ':') && (p[ll] == 0 || p[ll] == ' ' || p[ll] == ':'))
			return 1;   /* already there: a nested nemo-run */
	size_t n = strlen(old) + ll + 2;
	char *v = malloc(n);
	if (!v)
		return 0;
	snprintf(v, n, "%s %s", old, lib);
	int ok = setenv("LD_PRELOAD", v, 1) == 0;
	free(v);
	return ok;
}

int main(int argc, char **argv)
{
	const char *policy = NULL, *stats = NULL;
	int print_lib = 0, i = 1;
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--")) {
			i++;
			break;
		} else if (!strcmp(a, "--policy") || !strcmp(a, "-p")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "nemo-run: %s needs a policy (spin, block, hybrid, hybrid:NS, adaptive)\n", a);
				return 2;
			}
			policy = argv[++i];
		} else if (!strncmp(a, "--policy=", 9)) {
			policy = a + 9;
		} else if (!strcmp(a, "--stats") || !strcmp(a, "-s")) {
			stats = "1";
		} else if (!strncmp(a, "--stats=", 8)) {
			stats = a + 8;
			if (!*stats) {
				fprintf(stderr, "nemo-run: --stats= needs a file name\n");
				return 2;
			}
		} else if (!strcmp(a, "--print-library")) {
			print_lib = 1;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--version")) {
			printf("nemo-run %s\n", NEMO_VERSION_STRING);
			return 0;
		} else if (a[0] == '-') {
			fprintf(stderr, "nemo-run: unknown option '%s'\n", a);
			usage(stderr);
			return 2;
		} else {
			break;   /* the command */
		}
	}
	if (policy) {
		nemo_wait_policy p;
		if (nemo_wait_policy_parse(policy, &p) != 0) {
			fprintf(stderr, "nemo-run: --policy: %s\n", nemo_last_error());
			return 2;
		}
	}
	char lib[PATH_MAX];
	if (!find_preload(lib, sizeof lib))
		return 1;
	if (print_lib) {
		printf("%s\n", lib);
		return 0;
	}
	if (i >= argc) {
		fprintf(stderr, "nemo-run: no command to run\n");
		usage(stderr);
		return 2;
	}
	if (stats && strcmp(stats, "1") != 0) {
		/* An absolute path: the program may change its directory. */
		char abs[PATH_MAX + 1];
		if (stats[0] != '/') {
			char cwd[PATH_MAX];
			if (!getcwd(cwd, sizeof cwd) ||
			    (size_t)snprintf(abs, sizeof abs, "%s/%s", cwd, stats) >= sizeof abs) {
				fprintf(stderr, "nemo-run: --stats=%s: cannot make it an absolute path\n", stats);
				return 2;
			}
			stats = abs;
		}
		if (setenv("NEMO_STATS", stats, 1) != 0)
			return 1;
	} else if (stats && setenv("NEMO_STATS", "1", 1) != 0) {
		return 1;
	}
	if (policy && setenv("NEMO_WAIT", policy, 1) != 0)
		return 1;
	if (!add_preload(lib))
		return 1;
	execvp(argv[i], &argv[i]);
	int err = errno;
	fprintf(stderr, "nemo-run: cannot run '%s': %s\n", argv[i], strerror(err));
	return err == ENOENT ? 127 : 126;
}
