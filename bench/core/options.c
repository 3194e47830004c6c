/*
 * options.c - nemo-bench's options: one table (opt_table: name, value,
 * the suites that take it, trial option or not, parser), the parser that
 * loops over it, and the --help of each suite, generated from the
 * suite's option set (OPT_* in bench.h).
 *
 * Every bad option ends in one line on stderr naming the problem and exit
 * status 2, before anything is measured.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
const suite *find_suite(const char *name)
{
	for (int i = 0; bench_suites[i]; i++)
		if (strcmp(bench_suites[i]->name, name) == 0)
			return bench_suites[i];
	return NULL;
}

static double default_seconds(const suite *s)
{
	return s->default_seconds > 0 ? s->default_seconds : 2;
}

static int default_rounds(const suite *s)
{
	return s->default_rounds > 0 ? s->default_rounds : 10;
}

void usage(FILE *out)
{
	fprintf(out,
"usage: nemo-bench SUITE [options]     measure (SUITE --help for its options)\n"
"       nemo-bench list                suites and their mechanisms\n"
"       nemo-bench --version | --help\n"
"Suites:\n");
	for (int i = 0; bench_suites[i]; i++)
		fprintf(out, "  %-12s %s\n", bench_suites[i]->name, bench_suites[i]->summary);
	fprintf(out, "Results: a summary table on stdout; --json FILE writes the document of\n"
		     "docs/bench-json.md, --summary FILE.md|FILE.csv the table.\n"
		     "Ctrl-C (SIGINT, SIGTERM, SIGHUP) stops the run at the next trial and keeps what\n"
		     "was measured, marked interrupted; a second one stops it at once.\n"
		     "Exit status: 0 ok, 1 run failed, 2 bad usage, 128+N interrupted by signal N\n"
		     "(130 for Ctrl-C).\n");
}

static void suite_help(const suite *s)
{
	printf("usage: nemo-bench %s [options]\n%s.\n\n", s->name, s->summary);
	s->help(stdout);
	printf("\nOptions:\n");
	if (s->options & OPT_MECHS)
		printf("  --mechanisms LIST|all  comma-separated mechanisms (default: all)\n");
	if (s->options & OPT_SCENARIOS)
		printf("  --scenarios LIST       comma-separated scenarios (default: each mechanism's all)\n");
	if (s->options & OPT_SECONDS) {
		if (s->options & OPT_BATCH)
			printf("  --seconds S            measured seconds per row, in %ld intervals (default %g, max 600)\n",
			       s->default_trials, default_seconds(s));
		else
			printf("  --seconds S            seconds each measured run lasts (default %g, max 600)\n",
			       default_seconds(s));
	} else {
		printf("  --trials N             measured trials per row (default %ld)\n", s->default_trials);
		printf("  --warmup N             unmeasured trials first (default: trials/10, 10..100)\n");
	}
	if (s->options & OPT_BATCH)
		printf("  --batch B              messages per batch: B-1 deferred sends, then one that\n"
		       "                         publishes them (1..4096, default 64)\n");
	if ((s->options & OPT_ROUNDS) && (s->options & OPT_SECONDS))
		printf("  --rounds N             N rounds, each of which runs every row once in turn, so\n"
		       "                         all rows span the same stretch of time (the host may\n"
		       "                         move vCPUs mid-run); default %d, 1..1000\n", default_rounds(s));
	else if (s->options & OPT_ROUNDS)
		printf("  --rounds N             split each row's trials into N rounds that cycle through\n"
		       "                         every row, so all rows span the same stretch of time\n"
		       "                         (the host may move vCPUs mid-run); default %d, 1..1000\n",
		       default_rounds(s));
	if (s->options & OPT_SRC_DST) {
		printf("  --src CPU              sender's CPU (default 0)\n");
		if (s->options & OPT_WAITERS)
			printf("  --waiters LIST         K values, one row each (max 256; default 1,2,4,8, and on\n"
			       "                         more than 8 CPUs the powers of 2 below CPUs-1 and CPUs-1)\n");
		else
			printf("  --dst CPU              receiver's CPU (default: nearest CPU on another core)\n");
	}
	if (s->options & OPT_POLICY)
		printf("  --policies LIST        wait policies: spin, block, hybrid[:NS], adaptive\n");
	if (s->options & OPT_GAPS)
		printf("  --gaps LIST            gaps in microseconds\n");
	if (s->options & OPT_PROFILE)
		printf("  --profile PATH         where to write the profile\n");
	if (s->options & OPT_CPUS)
		printf("  --cpus LIST            CPUs to use, e.g. 0,2,4-7 (default: all%s)\n",
		       (s->options & OPT_WAITERS) ? " but the sender's" : "");
	if (s->options & OPT_PAIRS)
		printf("  --pairs all|sample     every ordered pair of --cpus, or a sample covering each\n"
		       "                         topology distance class from each CPU (default: all up\n"
		       "                         to %d CPUs, sample above)\n", COHERENCE_ALL_PAIRS_MAX_CPUS);
	if (s->options & OPT_APP)
		printf("  --request-us N         us of work between two requests of a place (default %.0f)\n"
		       "  --threshold-us N       poll-check's polling threshold, us (default %.0f)\n",
		       s->default_delay_max_us, s->default_delay_min_us);
	if (!(s->options & OPT_SECONDS))
		printf("  --delay-us MIN[:MAX]   random busy delay before each signal (default %g:%g)%s\n",
		       s->default_delay_min_us, s->default_delay_max_us,
		       (s->options & OPT_POLL) ? ",\n                         blocked rows" : "");
	if (s->options & OPT_POLL) {
		printf("  --poll-delay-us MIN[:MAX]  the same for polling rows (default %g:%g)\n",
		       BENCH_POLL_DELAY_MIN_US, BENCH_POLL_DELAY_MAX_US);
		printf("  --poll-policy POLICY   nemo's waiters in polling rows: spin, hybrid[:NS] or\n"
		       "                         adaptive (default spin)\n");
	}
	printf("  --json FILE            write the JSON document (docs/bench-json.md): whole, or\n"
	       "                         not at all (a failed run leaves FILE as it was);\n"
	       "                         - for standard output (the table then goes to stderr)\n");
	if (s->options & OPT_SUMMARY)
		printf("  --summary FILE         write the summary table: FILE.md as Markdown, FILE.csv\n"
		       "                         as CSV (one line per row), - for Markdown on standard\n"
		       "                         output; whole or not at all, as --json\n");
	printf("  --samples DIR          write raw per-%s samples as CSV into DIR\n",
	       !(s->options & OPT_SECONDS) ? "trial" : (s->options & OPT_ROUNDS) ? "round" : "interval");
	if (!(s->options & OPT_SECONDS))
		printf("  --seed N               seed of the random delays (default fixed)\n");
	printf("  --quiet                no summary table, no progress bar, no warnings\n");
	printf("\nCtrl-C (or SIGTERM, SIGHUP) stops the run: the row being measured ends at the\n"
	       "next trial (it keeps the trials it has), no further row is measured, and the\n"
	       "table, --json and --summary get what was measured, the JSON document marked\n"
	       "\"interrupted\": true; nemo-bench then says on stderr what it kept and ends\n"
	       "with the signal (exit status 130 for Ctrl-C, 143 SIGTERM, 129 SIGHUP).  If\n"
	       "no row was measured yet, it writes nothing: FILE stays as it was.  A second\n"
	       "Ctrl-C stops it at once, every FILE as it was.%s\n",
	       !strcmp(s->name, "calibrate") ? "  calibrate finishes its one\n"
	       "measurement first, and then writes no profile." :
	       !strcmp(s->name, "preload") ? "  preload kills the running child (that\n"
	       "round of its row is lost)." :
	       !strcmp(s->name, "throughput") ? "  A throughput row ends at the end of the\n"
	       "interval under way, and keeps the intervals it has." : "");
}

void list_all(void)
{
	for (int i = 0; bench_suites[i]; i++) {
		printf("%s: %s\n", bench_suites[i]->name, bench_suites[i]->summary);
		bench_suites[i]->list(stdout);
	}
}

/* ------------------------------------------------------------ parsing */

static long parse_long(const char *opt, const char *s, long min, long max)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max) {
		if (min == 1)
			usage_error("%s must be a positive integer (at most %ld), not '%s'", opt, max, s);
		usage_error("%s must be an integer from %ld to %ld, not '%s'", opt, min, max, s);
	}
	return v;
}

static bool cpu_usable(int cpu)
{
	cpu_set_t set;
	if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof set, &set) != 0)
		return false;
	return CPU_ISSET(cpu, &set);
}

static int parse_cpu(const char *opt, const char *s)
{
	int cpu = (int)parse_long(opt, s, 0, INT_MAX);
	if (!cpu_usable(cpu))
		usage_error("%s %d: no such CPU available to this process (CPUs 0-%d)",
			    opt, cpu, nemo_cpu_count() - 1);
	return cpu;
}

/* Split a comma list into items; returns the count. */
static int split_list(const char *opt, char *s, const char **items, int max)
{
	int n = 0;
	for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
		if (n == max)
			usage_error("%s: more than %d items", opt, max);
		items[n++] = tok;
	}
	if (n == 0)
		usage_error("%s needs at least one item", opt);
	return n;
}

static double parse_seconds(const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v > 0) || v > 600)
		usage_error("--seconds must be a number of seconds above 0 and at most 600, not '%s'", s);
	return v;
}

static void parse_delay(const char *opt, const char *s, double *lo, double *hi)
{
	char *end;
	double a = strtod(s, &end), b = a;
	if (end != s && *end == ':') {
		const char *rest = end + 1;
		b = strtod(rest, &end);
		if (end == rest)
			end = (char *)s;   /* force the error below */
	}
	if (end == s || *end || !(a >= 0) || !(b >= a) || b > 1e6)
		usage_error("%s must be MIN or MIN:MAX microseconds with 0 <= MIN <= MAX <= 1e6, not '%s'",
			    opt, s);
	*lo = a;
	*hi = b;
}

/* --cpus: a comma list of CPUs and ranges A-B. */
static void parse_cpus(bench_opts *o, char *arg)
{
	int n = 0;
	char *save = NULL;
	if (!*arg)
		usage_error("--cpus needs at least one item");
	for (char *tok = strtok_r(arg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *dash = strchr(tok, '-');
		int a, b;
		if (dash && dash != tok) {
			*dash = 0;
			a = (int)parse_long("--cpus", tok, 0, CPU_SETSIZE - 1);
			b = (int)parse_long("--cpus", dash + 1, 0, CPU_SETSIZE - 1);
			if (b < a)
				usage_error("--cpus: range %d-%d runs backwards", a, b);
		} else {
			a = b = parse_cpu("--cpus", tok);
		}
		for (int c = a; c <= b; c++) {
			if (!cpu_usable(c))
				continue;      /* a range may span CPUs outside the mask */
			if (n == BENCH_MAX_CPUS)
				usage_error("--cpus: more than %d CPUs", BENCH_MAX_CPUS);
			o->cpus[n++] = c;
		}
	}
	if (n == 0)
		usage_error("--cpus: none of those CPUs is available to this process (CPUs 0-%d)",
			    nemo_cpu_count() - 1);
	o->ncpus = n;
}

static void mkdir_p(const char *dir)
{
	char *p = strdup(dir);
	if (!p)
		fatal("out of memory");
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, 0755) != 0 && errno != EEXIST)
			usage_error("--samples %s: cannot create %s: %s", dir, p, strerror(errno));
		*s = '/';
	}
	if (mkdir(p, 0755) != 0 && errno != EEXIST)
		usage_error("--samples %s: cannot create it: %s", dir, strerror(errno));
	struct stat st;
	if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))
		usage_error("--samples %s: not a directory", dir);
	free(p);
}

/* Nearest CPU to src on another core (different L2 if possible). */
static int default_dst(int src)
{
	nemo_topo *t;
	int best = -1, bestd = INT_MAX;
	bool have_topo = nemo_topo_load(&t) == 0;
	for (int c = 0; c < nemo_cpu_count(); c++) {
		if (c == src || !cpu_usable(c))
			continue;
		int d = 6;
		if (have_topo && nemo_topo_distance(t, src, c, &d) != 0)
			d = 6;
		int rank = d <= 1 ? 100 + d : d;   /* SMT siblings last */
		if (rank < bestd) {
			bestd = rank;
			best = c;
		}
	}
	if (have_topo)
		nemo_topo_free(t);
	return best;
}

static void check_option(const suite *s, unsigned need, const char *opt)
{
	if (!(s->options & need))
		usage_error("%s does not apply to suite %s (see nemo-bench %s --help)", opt, s->name, s->name);
}

/* The trial options, for the suites that count trials rather than run
 * for --seconds. */
static void check_trial_option(const suite *s, const char *opt)
{
	if (s->options & OPT_SECONDS)
		usage_error("%s does not apply to suite %s, which runs for --seconds (see nemo-bench %s --help)",
			    opt, s->name, s->name);
}

/*
 * The options: one row each - its name, whether it takes a value, the
 * OPT_* bit a suite must have to accept it (0: every suite), whether it
 * counts trials (refused by the suites that run for --seconds), and the
 * function that parses its value into bench_opts.  parse_args is a loop
 * over this table; a refusal names the option and the suite.
 */
typedef struct opt_def {
	const char *name;
	bool has_arg;
	unsigned need;
	bool trial;
	void (*parse)(const suite *s, bench_opts *o, char *arg);  /* may split arg in place */
} opt_def;

static void opt_mechs(const suite *s, bench_opts *o, char *arg)
{
	if (strcmp(arg, "all") == 0) {
		o->nmechs = 0;
		return;
	}
	o->nmechs = split_list("--mechanisms", arg, o->mechs, BENCH_MAX_LIST);
	for (int i = 0; i < o->nmechs; i++)
		if (!s->has_mechanism(o->mechs[i]))
			usage_error("unknown mechanism '%s' for suite %s (see nemo-bench list)", o->mechs[i], s->name);
}

static void opt_scenarios(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	const char *items[BENCH_MAX_LIST];
	int n = split_list("--scenarios", arg, items, BENCH_MAX_LIST);
	o->scenarios = 0;
	for (int i = 0; i < n; i++) {
		unsigned b = scenario_parse(items[i]);
		if (!b || b == SC_ONE_WAY || b == SC_ROUND_TRIP)
			usage_error("unknown scenario '%s' (polling, blocked, loaded, busy)", items[i]);
		o->scenarios |= b;
	}
}

static void opt_trials(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	o->trials = parse_long("--trials", arg, 1, 100000000);
	o->trials_set = true;
}

static void opt_warmup(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	o->warmup = parse_long("--warmup", arg, 0, 1000000);
}

static void opt_seconds(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	o->seconds = parse_seconds(arg);
}

static void opt_rounds(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	o->rounds = (int)parse_long("--rounds", arg, 1, 1000);
}

static void opt_request_us(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	o->delay_max_us = (double)parse_long("--request-us", arg, 1, 1000000);
}

static void opt_threshold_us(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	o->delay_min_us = (double)parse_long("--threshold-us", arg, 0, 10000000);
}

static void opt_batch(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	o->batch = parse_long("--batch", arg, 1, 4096);
}

static void opt_src(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	o->src = parse_cpu("--src", arg);
}

static void opt_dst(const suite *s, bench_opts *o, char *arg)
{
	if (s->options & OPT_WAITERS)
		usage_error("--dst does not apply to suite %s (use --cpus)", s->name);
	o->dst = parse_cpu("--dst", arg);
}

static void opt_waiters(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	const char *items[BENCH_MAX_LIST];
	int n = split_list("--waiters", arg, items, BENCH_MAX_LIST);
	for (int i = 0; i < n; i++)
		o->waiters[i] = (int)parse_long("--waiters", items[i], 1, 256);
	o->nwaiters = n;
}

static void opt_cpus(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	parse_cpus(o, arg);
}

static void opt_poll_delay(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	parse_delay("--poll-delay-us", arg, &o->poll_delay_min_us, &o->poll_delay_max_us);
}

static void opt_poll_policy(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	nemo_wait_policy p;
	if (nemo_wait_policy_parse(arg, &p) != 0 || p.kind == NEMO_WAIT_BLOCK)
		usage_error("--poll-policy must be spin, hybrid[:NS] or adaptive (a policy that polls), not '%s'", arg);
	o->poll_policy = p;
	o->poll_policy_name = arg;
}

static void opt_pairs(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	if (strcmp(arg, "all") == 0)
		o->pairs = PAIRS_ALL;
	else if (strcmp(arg, "sample") == 0)
		o->pairs = PAIRS_SAMPLE;
	else
		usage_error("--pairs must be all or sample, not '%s'", arg);
}

static void opt_delay(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	parse_delay("--delay-us", arg, &o->delay_min_us, &o->delay_max_us);
}

static void opt_policies(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	o->npolicies = split_list("--policies", arg, o->policies, BENCH_MAX_LIST);
	for (int i = 0; i < o->npolicies; i++) {
		nemo_wait_policy p;
		if (nemo_wait_policy_parse(o->policies[i], &p) != 0)
			usage_error("unknown policy '%s' (spin, block, hybrid[:NS], adaptive)", o->policies[i]);
	}
}

static void opt_gaps(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	const char *items[BENCH_MAX_LIST];
	int n = split_list("--gaps", arg, items, BENCH_MAX_LIST);
	for (int i = 0; i < n; i++) {
		char *end;
		double g = strtod(items[i], &end);
		if (end == items[i] || *end || !(g >= 0) || g > 1e6)
			usage_error("--gaps: '%s' is not a gap in microseconds (0..1e6)", items[i]);
		o->gaps_us[i] = g;
	}
	o->ngaps = n;
}

static void opt_profile(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	o->profile_path = arg;
}

static void opt_json(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	o->json_path = arg;
}

static void opt_summary(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	if (!summary_path_ok(arg))
		usage_error("--summary %s: the name must end in .md (Markdown) or .csv (CSV), "
			    "or be - (Markdown on standard output)", arg);
	o->summary_path = arg;
}

static void opt_samples(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	o->samples_dir = arg;
}

static void opt_seed(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	o->seed = (uint64_t)parse_long("--seed", arg, 0, LONG_MAX);
}

static void opt_quiet(const suite *s, bench_opts *o, char *arg)
{
	(void)s;
	(void)arg;
	o->quiet = true;
}

static void opt_help(const suite *s, bench_opts *o, char *arg)
{
	(void)o;
	(void)arg;
	suite_help(s);
	exit(0);
}

static const opt_def opt_table[] = {
	{ "mechanisms", true, OPT_MECHS, false, opt_mechs },
	{ "scenarios", true, OPT_SCENARIOS, false, opt_scenarios },
	{ "trials", true, 0, true, opt_trials },
	{ "warmup", true, 0, true, opt_warmup },
	{ "src", true, OPT_SRC_DST, false, opt_src },
	{ "dst", true, OPT_SRC_DST, false, opt_dst },
	{ "waiters", true, OPT_WAITERS, false, opt_waiters },
	{ "cpus", true, OPT_CPUS, false, opt_cpus },
	{ "delay-us", true, 0, true, opt_delay },
	{ "json", true, 0, false, opt_json },
	{ "samples", true, 0, false, opt_samples },
	{ "seed", true, 0, true, opt_seed },
	{ "quiet", false, 0, false, opt_quiet },
	{ "help", false, 0, false, opt_help },
	{ "policies", true, OPT_POLICY, false, opt_policies },
	{ "gaps", true, OPT_GAPS, false, opt_gaps },
	{ "profile", true, OPT_PROFILE, false, opt_profile },
	{ "seconds", true, OPT_SECONDS, false, opt_seconds },
	{ "batch", true, OPT_BATCH, false, opt_batch },
	{ "rounds", true, OPT_ROUNDS, false, opt_rounds },
	{ "poll-delay-us", true, OPT_POLL, false, opt_poll_delay },
	{ "poll-policy", true, OPT_POLL, false, opt_poll_policy },
	{ "pairs", true, OPT_PAIRS, false, opt_pairs },
	{ "summary", true, OPT_SUMMARY, false, opt_summary },
	{ "request-us", true, OPT_APP, false, opt_request_us },
	{ "threshold-us", true, OPT_APP, false, opt_threshold_us },
};
#define OPT_COUNT (sizeof opt_table / sizeof *opt_table)
#define OPT_VAL0 256      /* getopt_long's value of opt_table[0] */

void parse_args(const suite *s, int argc, char **argv, bench_opts *o)
{
	*o = (bench_opts){
		.suite = s->name, .trials = s->default_trials, .warmup = -1,
		.src = -1, .dst = -1,
		.delay_min_us = s->default_delay_min_us, .delay_max_us = s->default_delay_max_us,
		.seed = 0x6e656d6f62656e63ULL,
		.seconds = default_seconds(s), .batch = 64,
		.poll_delay_min_us = BENCH_POLL_DELAY_MIN_US, .poll_delay_max_us = BENCH_POLL_DELAY_MAX_US,
		.poll_policy = { NEMO_WAIT_SPIN, 0 }, .poll_policy_name = "spin",
	};
	struct option long_opts[OPT_COUNT + 1];
	for (size_t i = 0; i < OPT_COUNT; i++)
		long_opts[i] = (struct option){ opt_table[i].name, opt_table[i].has_arg ? required_argument : no_argument,
						NULL, OPT_VAL0 + (int)i };
	long_opts[OPT_COUNT] = (struct option){ NULL, 0, NULL, 0 };
	opterr = 0;
	optind = 2;
	int c;
	while ((c = getopt_long(argc, argv, ":h", long_opts, NULL)) != -1) {
		if (c == 'h')
			opt_help(s, o, NULL);
		if (c == ':')
			usage_error("option %s needs a value", argv[optind - 1]);
		if (c < OPT_VAL0 || c >= OPT_VAL0 + (int)OPT_COUNT)
			usage_error("unknown option '%s' for suite %s (see nemo-bench %s --help)",
				    argv[optind - 1], s->name, s->name);
		const opt_def *d = &opt_table[c - OPT_VAL0];
		char opt[40];
		snprintf(opt, sizeof opt, "--%s", d->name);
		if (d->need)
			check_option(s, d->need, opt);
		if (d->trial)
			check_trial_option(s, opt);
		d->parse(s, o, optarg);
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (!o->rounds)
		o->rounds = (s->options & OPT_ROUNDS) ? default_rounds(s) : 1;
	if (o->rounds > o->trials && !(s->options & (OPT_SECONDS | OPT_GROUPS)))
		o->rounds = (int)o->trials;    /* at least one trial per round */
	if (o->warmup < 0) {
		o->warmup = o->trials / 10;
		o->warmup = o->warmup < 10 ? 10 : o->warmup > 100 ? 100 : o->warmup;
	}
	if (s->options & OPT_SRC_DST) {
		if (o->src < 0)
			o->src = cpu_usable(0) ? 0 : sched_getcpu();
		if (!(s->options & OPT_WAITERS)) {
			if (o->dst < 0)
				o->dst = default_dst(o->src);
			if (o->dst < 0)
				usage_error("suite %s needs two CPUs; this process may use only one", s->name);
			if (o->dst == o->src)
				usage_error("--src and --dst are both CPU %d: the sender and the receiver need different CPUs", o->src);
		}
	}
	/* Open outputs now: a bad path is a usage error, not a lost run. */
	out_open_all(o);
	if (o->samples_dir)
		mkdir_p(o->samples_dir);
}

json_t *config_json(const bench_opts *o)
{
	json_t *mechs = json_array();
	for (int i = 0; i < o->nmechs; i++)
		json_array_append_new(mechs, json_string(o->mechs[i]));
	json_t *scen = json_array();
	for (int i = 0; i < SC_COUNT; i++)
		if (o->scenarios & (1u << i))
			json_array_append_new(scen, json_string(scenario_name(1u << i)));
	return json_pack("{s:I,s:I,s:o,s:o,s:i,s:i,s:[f,f],s:I,s:o}",
		"trials", (json_int_t)o->trials, "warmup", (json_int_t)o->warmup,
		"mechanisms", o->nmechs ? mechs : (json_decref(mechs), json_string("all")),
		"scenarios", o->scenarios ? scen : (json_decref(scen), json_string("all")),
		"src_cpu", o->src, "dst_cpu", o->dst,
		"delay_us", o->delay_min_us, o->delay_max_us,
		"seed", (json_int_t)o->seed,
		"samples_dir", o->samples_dir ? json_string(o->samples_dir) : json_null());
}
