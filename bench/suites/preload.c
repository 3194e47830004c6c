/*
 * preload.c - suite `preload`: what the interposer (libnemo-preload.so)
 * does to real programs.  Each program is an ordinary process that knows
 * nothing of nemo; the suite runs it plain (glibc's condvar) and preloaded,
 * in one run, and compares their rates.
 *
 * Programs (the suite's mechanisms):
 *   condvar-handoff  nemo-handoff --json: two threads, pinned to --src and
 *                    --dst, hand a token through one mutex and one condvar;
 *                    rate: hand-offs per second.
 *   python-handoff   `python3 -c PROGRAM`: two CPython threads hand a token
 *                    through two threading.Locks; rate: round trips per
 *                    second.  threading.Lock is a semaphore (sem_wait,
 *                    which the interposer makes poll first), and every
 *                    switch goes through the GIL, a mutex and two condvars
 *                    (pthread_cond_timedwait in 5 ms intervals, then a
 *                    forced switch).
 *                    python3 is looked up on PATH; without it the program
 *                    is skipped (mechanism_unavailable).
 *   pool             nemo-pool --json: one producer feeds 2x CPUs workers
 *                    through a bounded queue, one mutex and two condvars;
 *                    rate: tasks per second.
 *
 * Modes (how each child runs):
 *   glibc            no LD_PRELOAD at all;
 *   nemo-default     LD_PRELOAD=libnemo-preload.so, no NEMO_WAIT and no
 *                    calibration profile (NEMO_PROFILE unset, XDG_CACHE_HOME
 *                    on an empty temporary folder): what a user gets;
 *   nemo-POLICY      the same with NEMO_WAIT=POLICY, one mode for each of
 *                    --policies.
 * The children get nemo-bench's environment less LD_PRELOAD, NEMO_WAIT,
 * NEMO_PROFILE and XDG_CACHE_HOME, plus what their mode sets.  Each child
 * reports, in one JSON line, its rate and whether pthread_cond_* reached
 * libnemo-preload (interposed); a child whose report contradicts its mode,
 * that fails its own checks, or that does not end in time ends the run
 * with an error.
 *
 * Rounds: every round runs each (program, mode) once, for --seconds each,
 * in turn; odd rounds in the reverse order, so that a slow drift of the
 * machine (or the host moving the vCPUs) weighs on every row alike.  A
 * row's rate is the median over rounds; every round's rate is kept.
 *
 * The programs are found beside nemo-bench itself (/proc/self/exe): the
 * executables in its folder, the library in NEMO_BIN_TO_LIB (the install's
 * relative path from bindir to libdir, compiled in) or ../lib.  The build
 * tree (build/bin, build/lib), an install (PREFIX/bin, PREFIX/LIBDIR) and
 * the portable bundle (bin, lib) all have that layout.
 */
#define _GNU_SOURCE
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef NEMO_BIN_TO_LIB
#define NEMO_BIN_TO_LIB "../lib"
#endif

extern char **environ;

enum { PR_HANDOFF, PR_PYTHON, PR_POOL, PR_COUNT };

static const struct program {
	const char *name;
	const char *unit;             /* what rate_per_s counts */
	const char *what;
} programs[PR_COUNT] = {
	[PR_HANDOFF] = { "condvar-handoff", "hand-offs",
			 "nemo-handoff: two pinned threads, one mutex, one condvar" },
	[PR_PYTHON] = { "python-handoff", "round trips",
			"python3: two threads, two threading.Locks (semaphores) and the GIL's condvars" },
	[PR_POOL] = { "pool", "tasks",
		      "nemo-pool: one producer, 2x CPUs workers, one mutex, two condvars" },
};

/*
 * The CPython program: two threads hand a token through two Locks, as
 * binary semaphores, for argv[1] seconds after a short warm-up.  Whoever
 * sees the stop passes the token once more and leaves, so both leave.  The
 * turns must alternate (the counts differ by at most one).
 */
static const char python_program[] =
	"import json, os, sys, threading, time\n"
	"seconds = float(sys.argv[1])\n"
	"a, b = threading.Lock(), threading.Lock()\n"
	"b.acquire()\n"
	"stop = False\n"
	"count = [0, 0]\n"
	"def player(mine, other, i):\n"
	"    n = 0\n"
	"    while True:\n"
	"        mine.acquire()\n"
	"        if stop:\n"
	"            other.release()\n"
	"            return\n"
	"        n += 1\n"
	"        count[i] = n\n"
	"        other.release()\n"
	"ts = [threading.Thread(target=player, args=(a, b, 0)),\n"
	"      threading.Thread(target=player, args=(b, a, 1))]\n"
	"for t in ts:\n"
	"    t.start()\n"
	"time.sleep(min(0.1, seconds / 10))\n"
	"c0, t0 = count[1], time.monotonic()\n"
	"time.sleep(seconds)\n"
	"c1, t1 = count[1], time.monotonic()\n"
	"stop = True\n"
	"for t in ts:\n"
	"    t.join()\n"
	"with open('/proc/self/maps') as f:\n"
	"    lib = next((l.split()[-1] for l in f if 'libnemo-preload' in l), '')\n"
	"print(json.dumps({'round_trips': c1 - c0, 'seconds': t1 - t0, 'per_s': (c1 - c0) / (t1 - t0),\n"
	"                  'interposed': bool(lib), 'library': os.path.basename(lib),\n"
	"                  'nemo_wait': os.environ.get('NEMO_WAIT', ''),\n"
	"                  'python': sys.version.split()[0]}))\n"
	"sys.exit(0 if 0 <= count[0] - count[1] <= 1 else 1)\n";

static void pre_list(FILE *out)
{
	for (int i = 0; i < PR_COUNT; i++)
		fprintf(out, "    %-20s [glibc, nemo-default, nemo-POLICY] %s\n", programs[i].name,
			programs[i].what);
}

static void pre_help(FILE *out)
{
	fprintf(out,
"Runs ordinary programs plain (glibc) and under LD_PRELOAD=libnemo-preload.so,\n"
"in one run, and compares their rates:\n");
	for (int i = 0; i < PR_COUNT; i++)
		fprintf(out, "  %-16s %s; %s per second\n", programs[i].name, programs[i].what,
			programs[i].unit);
	fprintf(out,
"Modes: glibc (no preload); nemo-default (preloaded, no NEMO_WAIT, no\n"
"calibration profile: what a user gets); and nemo-POLICY for each of\n"
"--policies (NEMO_WAIT=POLICY).  Each child runs --seconds (default 1).  Rows\n"
"are interleaved: each of --rounds rounds (default 5) runs every (program,\n"
"mode) once in turn.  A row's rate is the median over rounds; ratio = that\n"
"median / the same program's glibc median of this run.  The programs are\n"
"found beside nemo-bench (bin/nemo-handoff, bin/nemo-pool, lib/libnemo-preload.so);\n"
"python3 on PATH (python-handoff is skipped without it).  --src and --dst are\n"
"the CPUs of condvar-handoff's two threads; the others are not pinned.\n");
}

static bool pre_has(const char *name)
{
	for (int i = 0; i < PR_COUNT; i++)
		if (strcmp(name, programs[i].name) == 0)
			return true;
	return false;
}

/* ------------------------------------------------------------ finding */

/* The folder of the running nemo-bench. */
static void self_dir(char *dir, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", dir, len - 1);
	if (n <= 0)
		fatal("cannot read /proc/self/exe: %s", strerror(errno));
	dir[n] = 0;
	char *slash = strrchr(dir, '/');
	if (!slash)
		fatal("/proc/self/exe is not a path: %s", dir);
	*slash = 0;
}

/* dir/rel/name if it is a file (executable if exec); its real path in out. */
static bool try_path(const char *dir, const char *rel, const char *name, bool exec, char *out,
		     char *tried, size_t tried_len)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s%s%s/%s", dir, *rel ? "/" : "", rel, name);
	size_t t = strlen(tried);
	snprintf(tried + t, tried_len - t, "%s%s", t ? ", " : "", p);
	struct stat st;
	if (stat(p, &st) != 0 || !S_ISREG(st.st_mode) || access(p, exec ? X_OK : R_OK) != 0)
		return false;
	return realpath(p, out) != NULL;
}

static void find_beside(const char *dir, const char *name, bool exec, char *out)
{
	char tried[3 * PATH_MAX] = "";
	if (exec) {
		if (try_path(dir, "", name, true, out, tried, sizeof tried))
			return;
	} else {
		if (try_path(dir, NEMO_BIN_TO_LIB, name, false, out, tried, sizeof tried))
			return;
		if (strcmp(NEMO_BIN_TO_LIB, "../lib") != 0 &&
		    try_path(dir, "../lib", name, false, out, tried, sizeof tried))
			return;
	}
	fatal("cannot find %s beside nemo-bench (looked for %s); it is built and installed with "
	      "nemo-bench (build/bin and build/lib, PREFIX/bin and PREFIX/lib, the bundle's bin and lib)",
	      name, tried);
}

/* python3 on PATH, as execvp would find it; false if there is none. */
static bool find_python(char *out, size_t len)
{
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	char *copy = strdup(path);
	if (!copy)
		fatal("out of memory");
	bool found = false;
	char *save = NULL;
	for (char *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
		char p[PATH_MAX];
		snprintf(p, sizeof p, "%s/python3", *d ? d : ".");
		struct stat st;
		if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0) {
			snprintf(out, len, "%s", p);
			found = true;
		}
	}
	free(copy);
	return found;
}

/* -------------------------------------------------------------- modes */

typedef struct mode {
	char name[80];
	const char *nemo_wait;        /* NULL: unset */
	bool preload;
} mode;

/* nemo-bench's environment less what the modes set, plus the mode's. */
static char **child_env(const mode *m, const char *lib, const char *cache)
{
	size_t n = 0;
	while (environ[n])
		n++;
	char **env = xcalloc(n + 4, sizeof *env);
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		const char *e = environ[i];
		if (!strncmp(e, "LD_PRELOAD=", 11) || !strncmp(e, "NEMO_WAIT=", 10) ||
		    !strncmp(e, "NEMO_PROFILE=", 13) || !strncmp(e, "XDG_CACHE_HOME=", 15))
			continue;
		env[k++] = strdup(e);
	}
	if (asprintf(&env[k++], "XDG_CACHE_HOME=%s", cache) < 0 ||
	    (m->preload && asprintf(&env[k++], "LD_PRELOAD=%s", lib) < 0) ||
	    (m->nemo_wait && asprintf(&env[k++], "NEMO_WAIT=%s", m->nemo_wait) < 0))
		fatal("out of memory");
	for (size_t i = 0; i < k; i++)
		if (!env[i])
			fatal("out of memory");
	return env;
}

static void free_env(char **env)
{
	for (size_t i = 0; env[i]; i++)
		free(env[i]);
	free(env);
}

/* ------------------------------------------------------------ a child */

static double mono_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Kill the child and reap it. */
static void kill_child(pid_t pid)
{
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	interrupt_child_set(0);
}

/*
 * Run argv with env, its stdout into a buffer (its stderr is ours), and
 * return its last line parsed as JSON.  Fatal, naming what, if it cannot
 * start, fails, prints no JSON, or runs past limit_s (then it is killed).
 *
 * The child starts with SIGINT, SIGTERM and SIGHUP blocked, so that a
 * Ctrl-C at the terminal (which signals the whole process group) reaches
 * nemo-bench alone; nemo-bench then kills the child, reaps it, and
 * returns NULL: an interrupted run (bench.h) keeps the rounds before.  A
 * second signal kills it from the handler (interrupt.c).  No child
 * outlives nemo-bench, but for a SIGKILL of nemo-bench itself (the child
 * then ends after its --seconds).
 */
static json_t *run_child(char *const argv[], char *const env[], const char *what, double limit_s)
{
	int fd[2];
	if (pipe2(fd, O_CLOEXEC) != 0)
		fatal("pipe: %s", strerror(errno));
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd[1], STDOUT_FILENO);
	posix_spawnattr_t attr;
	posix_spawnattr_init(&attr);
	sigset_t sigs, old;
	interrupt_sigset(&sigs);
	posix_spawnattr_setsigmask(&attr, &sigs);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
	/* The pid is where the handler finds it before a signal can come. */
	pthread_sigmask(SIG_BLOCK, &sigs, &old);
	pid_t pid;
	int err = posix_spawn(&pid, argv[0], &fa, &attr, argv, env);
	if (!err)
		interrupt_child_set(pid);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	close(fd[1]);
	if (err)
		fatal("%s: cannot run %s: %s", what, argv[0], strerror(err));
	size_t cap = 4096, len = 0;
	char *out = xcalloc(cap, 1);
	double deadline = mono_s() + limit_s;
	for (;;) {
		struct pollfd p = { .fd = fd[0], .events = POLLIN };
		int r = poll(&p, 1, 100);
		progress_tick();
		if (bench_interrupted()) {
			kill_child(pid);
			close(fd[0]);
			free(out);
			return NULL;
		}
		if (r < 0 && errno != EINTR)
			fatal("poll: %s", strerror(errno));
		if (r > 0) {
			if (len + 1024 > cap) {
				cap *= 2;
				out = realloc(out, cap);
				if (!out)
					fatal("out of memory");
			}
			ssize_t got = read(fd[0], out + len, cap - len - 1);
			if (got < 0 && errno != EINTR)
				fatal("%s: reading its output: %s", what, strerror(errno));
			if (got == 0)
				break;
			if (got > 0)
				len += (size_t)got;
		}
		if (mono_s() > deadline) {
			kill_child(pid);
			fatal("%s did not end within %.0f s (a lost wake-up?); killed it", what, limit_s);
		}
	}
	close(fd[0]);
	out[len] = 0;
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			fatal("waitpid: %s", strerror(errno));
	interrupt_child_set(0);
	if (WIFSIGNALED(status))
		fatal("%s was killed by signal %d (%s); its output: %s", what, WTERMSIG(status),
		      strsignal(WTERMSIG(status)), out);
	if (WEXITSTATUS(status) != 0)
		fatal("%s failed (exit status %d): its checks did not hold, or it could not run; "
		      "its output: %s", what, WEXITSTATUS(status), out);
	/* The last non-empty line is the report. */
	while (len && (out[len - 1] == '\n' || out[len - 1] == ' '))
		out[--len] = 0;
	char *line = strrchr(out, '\n');
	line = line ? line + 1 : out;
	json_error_t jerr;
	json_t *rep = json_loads(line, 0, &jerr);
	if (!rep || !json_is_object(rep) || !json_is_number(json_object_get(rep, "per_s")) ||
	    !json_is_boolean(json_object_get(rep, "interposed")))
		fatal("%s printed no report (a JSON line with per_s and interposed): %s", what, out);
	free(out);
	return rep;
}

/* --------------------------------------------------------------- rows */

static char *fmt_seconds(double v)
{
	char *s;
	if (asprintf(&s, "%g", v) < 0)
		fatal("out of memory");
	return s;
}

/* Is the named program selected (all when no --mechanisms)? Its order. */
static int selected(const bench_opts *o, int prog)
{
	if (!o->nmechs)
		return prog;
	for (int i = 0; i < o->nmechs; i++)
		if (strcmp(o->mechs[i], programs[prog].name) == 0)
			return i;
	return -1;
}

static void pre_write_samples(const bench_opts *o, const char *prog, const char *mname,
			      const double *rates, const int *order, int rounds, json_t *j)
{
	char name[200], *rel = NULL;
	snprintf(name, sizeof name, "preload-%s-%s.csv", prog, mname);
	FILE *f = samples_create(o, name, &rel);
	if (f) {
		fprintf(f, "round,order,rate_per_s\n");
		for (int r = 0; r < rounds; r++)
			fprintf(f, "%d,%d,%.3f\n", r, order[r], rates[r]);
		if (fclose(f) != 0)
			fatal("cannot write samples to %s/%s: %s", o->samples_dir, name, strerror(errno));
	}
	json_object_set_new(j, "samples_file", rel ? json_string(rel) : json_null());
	free(rel);
}

static char tmp_cache[PATH_MAX];

static void remove_cache(void)
{
	interrupt_tmp_set(INTERRUPT_TMP_DIR, NULL);
	if (tmp_cache[0] && rmdir(tmp_cache) != 0)
		fprintf(stderr, "nemo-bench: warning: cannot remove %s: %s (a child wrote into its "
			"XDG_CACHE_HOME)\n", tmp_cache, strerror(errno));
	tmp_cache[0] = 0;
}

static void pre_run(const bench_opts *o, json_t *results, json_t *config)
{
	/* Programs, in --mechanisms order. */
	int progs[PR_COUNT], np = 0;
	for (int pos = 0; pos < (o->nmechs ? o->nmechs : PR_COUNT); pos++)
		for (int p = 0; p < PR_COUNT; p++)
			if (selected(o, p) == pos) {
				bool dup = false;
				for (int i = 0; i < np; i++)
					dup |= progs[i] == p;
				if (!dup)
					progs[np++] = p;
			}

	char dir[PATH_MAX], lib[PATH_MAX], handoff[PATH_MAX], pool[PATH_MAX], python[PATH_MAX] = "";
	self_dir(dir, sizeof dir);
	find_beside(dir, "libnemo-preload.so", false, lib);
	json_t *skipped = json_array();
	int keep = 0;
	for (int i = 0; i < np; i++) {
		if (progs[i] == PR_HANDOFF)
			find_beside(dir, "nemo-handoff", true, handoff);
		if (progs[i] == PR_POOL)
			find_beside(dir, "nemo-pool", true, pool);
		if (progs[i] == PR_PYTHON && !find_python(python, sizeof python)) {
			mechanism_unavailable(o, programs[PR_PYTHON].name,
					      "no python3 on PATH (the program runs as python3 -c)", skipped);
			continue;
		}
		progs[keep++] = progs[i];
	}
	np = keep;

	/* Modes: glibc, nemo-default, nemo-POLICY... */
	int nm = 2 + o->npolicies;
	mode *modes = xcalloc((size_t)nm, sizeof *modes);
	snprintf(modes[0].name, sizeof modes[0].name, "glibc");
	snprintf(modes[1].name, sizeof modes[1].name, "nemo-default");
	modes[1].preload = true;
	for (int i = 0; i < o->npolicies; i++) {
		snprintf(modes[2 + i].name, sizeof modes[2 + i].name, "nemo-%s", o->policies[i]);
		modes[2 + i].nemo_wait = o->policies[i];
		modes[2 + i].preload = true;
	}

	/* An empty cache folder: no calibration profile is found there. */
	const char *tmpdir = getenv("TMPDIR");
	snprintf(tmp_cache, sizeof tmp_cache, "%s/nemo-bench-preload-XXXXXX",
		 tmpdir && *tmpdir ? tmpdir : "/tmp");
	if (!mkdtemp(tmp_cache))
		fatal("cannot create a temporary folder %s: %s", tmp_cache, strerror(errno));
	atexit(remove_cache);
	interrupt_tmp_set(INTERRUPT_TMP_DIR, tmp_cache);   /* a second Ctrl-C removes it too */

	cpu_set_t set;
	int ncpu = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : nemo_cpu_count();
	int workers = 2 * (ncpu > 0 ? ncpu : 1);
	char *secs = fmt_seconds(o->seconds);
	char cpus[32], wstr[16];
	snprintf(cpus, sizeof cpus, "%d,%d", o->src, o->dst);
	snprintf(wstr, sizeof wstr, "%d", workers);
	char *argv_of[PR_COUNT][10] = {
		[PR_HANDOFF] = { handoff, "--seconds", secs, "--cpus", cpus, "--json", NULL },
		[PR_PYTHON] = { python, "-c", (char *)python_program, secs, NULL },
		[PR_POOL] = { pool, "--seconds", secs, "--workers", wstr, "--json", NULL },
	};
	/* What the JSON says was run (the Python program by its name). */
	const char *shown[PR_COUNT] = { "nemo-handoff", "python3 -c <python-handoff program>", "nemo-pool" };

	json_object_del(config, "warmup");
	json_object_del(config, "delay_us");
	json_object_del(config, "seed");
	json_object_del(config, "scenarios");
	json_object_set_new(config, "trials", json_integer(o->rounds));
	json_object_set_new(config, "rounds", json_integer(o->rounds));
	json_object_set_new(config, "seconds", json_real(o->seconds));
	json_t *jm = json_array(), *jp = json_array();
	for (int m = 0; m < nm; m++)
		json_array_append_new(jm, json_string(modes[m].name));
	for (int i = 0; i < np; i++)
		json_array_append_new(jp, json_string(programs[progs[i]].name));
	json_object_set_new(config, "modes", jm);
	json_object_set_new(config, "programs", jp);
	json_object_set_new(config, "preload_library", json_string(lib));
	json_object_set_new(config, "pool_workers", json_integer(workers));
	json_object_set_new(config, "python", python[0] ? json_string(python) : json_null());
	json_object_set_new(config, "skipped", skipped);

	/* The runs: rounds x (program, mode), serpentine.  Row ri's rounds
	 * so far: rate[ri * rounds + 0 .. done[ri]) (all rounds, unless the
	 * run was interrupted: bench.h). */
	int nrow = np * nm;
	double *rate = xcalloc((size_t)(nrow * o->rounds), sizeof *rate);
	int *order = xcalloc((size_t)(nrow * o->rounds), sizeof *order);
	int *done = xcalloc((size_t)nrow, sizeof *done);
	json_t **last = xcalloc((size_t)nrow, sizeof *last);
	char ***envs = xcalloc((size_t)nm, sizeof *envs);
	for (int m = 0; m < nm; m++)
		envs[m] = child_env(&modes[m], lib, tmp_cache);
	double limit = 3 * o->seconds + 60;
	progress_begin(o, "preload", (uint64_t)(nrow * o->rounds));
	for (int r = 0; r < o->rounds && !bench_interrupted(); r++) {
		for (int k = 0; k < nrow && !bench_interrupted(); k++) {
			int ri = r % 2 ? nrow - 1 - k : k;
			int p = progs[ri / nm], m = ri % nm;
			char what[160];
			snprintf(what, sizeof what, "%s (%s, round %d)", programs[p].name, modes[m].name, r + 1);
			json_t *rep = run_child(argv_of[p], envs[m], what, limit);
			if (!rep)
				break;        /* interrupted: this round of it is lost */
			bool ip = json_is_true(json_object_get(rep, "interposed"));
			if (ip != modes[m].preload)
				fatal("%s: the child says pthread_cond_* %s libnemo-preload, but this mode %s it%s",
				      what, ip ? "went to" : "did not go to",
				      modes[m].preload ? "preloads" : "does not preload",
				      modes[m].preload ? " (did the loader refuse LD_PRELOAD?)" : "");
			rate[ri * o->rounds + done[ri]] = json_number_value(json_object_get(rep, "per_s"));
			order[ri * o->rounds + done[ri]] = k;
			done[ri]++;
			json_decref(last[ri]);
			last[ri] = rep;
			progress_add(1);
		}
	}
	progress_end();

	/* Rows, program by program, glibc first. */
	for (int i = 0; i < np; i++) {
		int p = progs[i];
		double base = 0;
		for (int m = 0; m < nm; m++) {
			int ri = i * nm + m, n = done[ri];
			if (!n)
				continue;     /* interrupted before its first round */
			double *v = &rate[ri * o->rounds];
			double *sorted = xcalloc((size_t)n, sizeof *sorted);
			memcpy(sorted, v, sizeof *sorted * (size_t)n);
			json_t *st = stats_object(sorted, (size_t)n);
			free(sorted);
			double p50 = json_number_value(json_object_get(st, "p50"));
			if (m == 0)
				base = p50;
			json_t *per = json_array();
			for (int r = 0; r < n; r++)
				json_array_append_new(per, json_real(v[r]));
			char cmd[256];
			if (p == PR_HANDOFF)
				snprintf(cmd, sizeof cmd, "%s --seconds %s --cpus %s --json", shown[p], secs, cpus);
			else if (p == PR_POOL)
				snprintf(cmd, sizeof cmd, "%s --seconds %s --workers %s --json", shown[p], secs, wstr);
			else
				snprintf(cmd, sizeof cmd, "%s %s", shown[p], secs);
			json_t *j = json_pack("{s:s,s:s,s:o,s:b,s:s,s:s,s:f,s:i,s:f,s:o,s:o,s:o,s:b,s:O}",
				"mechanism", programs[p].name, "mode", modes[m].name,
				"nemo_wait", modes[m].nemo_wait ? json_string(modes[m].nemo_wait) : json_null(),
				"preloaded", modes[m].preload, "unit", programs[p].unit, "command", cmd,
				"seconds", o->seconds, "trials", n, "rate_per_s", p50,
				"rate_per_s_stats", st, "rate_per_s_rounds", per,
				"ratio_vs_glibc", base > 0 ? json_real(p50 / base) : json_null(),
				"interposed", modes[m].preload, "report", last[ri]);
			if (!j)
				fatal("cannot make a preload row");
			pre_write_samples(o, programs[p].name, modes[m].name, v, &order[ri * o->rounds],
					  n, j);
			json_array_append_new(results, j);
		}
	}
	for (int m = 0; m < nm; m++)
		free_env(envs[m]);
	for (int k = 0; k < nrow; k++)
		json_decref(last[k]);
	free(envs);
	free(last);
	free(rate);
	free(order);
	free(done);
	free(modes);
	free(secs);
	remove_cache();
}

/* ------------------------------------------------------------- table */

static void pre_print(json_t *results)
{
	printf("%-16s %-18s %14s %9s %14s %14s %-10s %s\n", "program", "mode", "p50 per s",
	       "vs glibc", "min per s", "max per s", "interposed", "unit");
	size_t i;
	json_t *r;
	json_array_foreach(results, i, r) {
		json_t *st = json_object_get(r, "rate_per_s_stats");
		json_t *ratio = json_object_get(r, "ratio_vs_glibc");
		char rs[32] = "-";
		if (json_is_number(ratio))
			snprintf(rs, sizeof rs, "%.2fx", json_number_value(ratio));
		printf("%-16s %-18s %14.0f %9s %14.0f %14.0f %-10s %s\n",
		       json_string_value(json_object_get(r, "mechanism")),
		       json_string_value(json_object_get(r, "mode")),
		       json_number_value(json_object_get(r, "rate_per_s")), rs,
		       json_number_value(json_object_get(st, "min")),
		       json_number_value(json_object_get(st, "max")),
		       json_is_true(json_object_get(r, "interposed")) ? "yes" : "no",
		       json_string_value(json_object_get(r, "unit")));
	}
	if (json_array_size(results))
		printf("p50, min, max over rounds; vs glibc = this row's p50 / the same program's glibc p50,\n"
		       "in this run (above 1.00x: faster under the interposer).  nemo-default: preloaded,\n"
		       "no NEMO_WAIT, no calibration profile; nemo-POLICY: NEMO_WAIT=POLICY.\n");
}

const suite suite_preload = {
	.name = "preload",
	.summary = "what the condvar interposer does to real programs (glibc vs preloaded)",
	.options = OPT_MECHS | OPT_SRC_DST | OPT_SECONDS | OPT_ROUNDS | OPT_POLICY | OPT_SUMMARY,
	.default_trials = 5,
	.default_delay_min_us = 0,
	.default_delay_max_us = 0,
	.help = pre_help,
	.list = pre_list,
	.has_mechanism = pre_has,
	.run = pre_run,
	.print = pre_print,
	.default_seconds = 1,
	.default_rounds = 5,
};
