/*
 * bench.h - shared pieces of nemo-bench: options, result rows, output,
 * the pinned-thread harness, progress.
 *
 * Measurement method (docs/bench-json.md; docs/architecture.md, "nemo-bench"): the sender stamps
 * the cycle counter just before it signals and publishes the stamp; the
 * receiver stamps right after it wakes; the difference is one sample.  To
 * make blocking real, the sender first waits until the receiver announced
 * that it is about to wait, then busy-waits a random 20-50 us, then
 * signals.  The unicast and broadcast harnesses (suites/unicast.c,
 * suites/broadcast.c) follow this; the mechanisms themselves are defined
 * once each, in mechs/, behind one interface (mech.h).
 */
#ifndef NEMO_BENCH_H
#define NEMO_BENCH_H

#include <nemo/nemo.h>

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "stats.h"

#define BENCH_MAX_LIST 64
#define BENCH_MAX_CPUS 1024           /* --cpus entries; CPUs a suite can use */
#define BENCH_CACHELINE 64

/* Exit statuses. */
enum { EXIT_USAGE = 2 };

/* ------------------------------------------------------------------ */
/* Scenarios: what the receiver is doing when the signal is sent.      */
/* ------------------------------------------------------------------ */
enum scenario {
	SC_POLLING = 1u << 0,   /* watching memory */
	SC_BLOCKED = 1u << 1,   /* asleep in the kernel */
	SC_LOADED = 1u << 2,    /* asleep, a busy thread shares its CPU */
	SC_BUSY = 1u << 3,      /* computing, not watching */
	SC_ONE_WAY = 1u << 4,   /* coherence suite */
	SC_ROUND_TRIP = 1u << 5,
};
#define SC_COUNT 6

const char *scenario_name(unsigned sc);
/** Parse one scenario name; returns its bit or 0. */
unsigned scenario_parse(const char *name);

/* ------------------------------------------------------------------ */
/* Options                                                             */
/* ------------------------------------------------------------------ */
typedef struct bench_opts {
	const char *suite;
	const char *mechs[BENCH_MAX_LIST];
	int nmechs;                   /* 0: all of the suite's mechanisms */
	unsigned scenarios;           /* 0: every scenario a mechanism supports */
	long trials;
	bool trials_set;              /* --trials given (else the suite's default) */
	long warmup;
	int src, dst;                 /* -1: choose */
	int waiters[BENCH_MAX_LIST];  /* broadcast K values */
	int nwaiters;
	int cpus[BENCH_MAX_CPUS];     /* broadcast waiter CPUs / coherence CPU set */
	int ncpus;
	double delay_min_us, delay_max_us;
	double poll_delay_min_us, poll_delay_max_us;  /* broadcast: delay of polling rows */
	nemo_wait_policy poll_policy; /* broadcast: nemo's waiters in polling rows */
	const char *poll_policy_name;
	int pairs;                    /* coherence: PAIRS_AUTO, PAIRS_ALL, PAIRS_SAMPLE */
	const char *policies[BENCH_MAX_LIST];   /* policy suite; preload: extra modes */
	int npolicies;
	double gaps_us[BENCH_MAX_LIST];
	int ngaps;
	const char *profile_path;     /* calibrate */
	int rounds;                   /* unicast, broadcast, preload: rows interleaved in this many rounds */
	double seconds;               /* throughput: measured seconds; preload: per child run */
	long batch;                   /* throughput: messages per batch */
	const char *json_path;        /* --json (options.c opens it at parse time: */
	const char *summary_path;     /* --summary    unwritable = usage error) */
	const char *samples_dir;
	bool quiet;
	uint64_t seed;
} bench_opts;

/** What a suite accepts beyond the common options. */
enum {
	OPT_WAITERS = 1u << 0,
	OPT_CPUS = 1u << 1,
	OPT_SRC_DST = 1u << 2,
	OPT_SCENARIOS = 1u << 3,
	OPT_MECHS = 1u << 4,
	OPT_POLICY = 1u << 5,         /* --policies */
	OPT_PROFILE = 1u << 6,        /* --profile */
	OPT_SECONDS = 1u << 7,        /* --seconds; such a suite runs for a time,
	                                 so --trials, --warmup, --delay-us, --seed do not apply */
	OPT_ROUNDS = 1u << 8,         /* --rounds: rows interleaved in rounds */
	OPT_BATCH = 1u << 9,          /* --batch */
	OPT_GAPS = 1u << 10,          /* --gaps */
	OPT_POLL = 1u << 11,          /* --poll-delay-us, --poll-policy (broadcast) */
	OPT_PAIRS = 1u << 12,         /* --pairs (coherence) */
	OPT_SUMMARY = 1u << 13,       /* --summary: the suite has a summary table */
	OPT_APP = 1u << 14,           /* --request-us, --threshold-us (app: in delay_max_us, delay_min_us) */
	OPT_GROUPS = 1u << 15,        /* --rounds counts random groups, each of --trials
	                                 multicasts (multicast): not capped by --trials */
};

/** Broadcast: the random delay before a signal to polling waiters, us. */
#define BENCH_POLL_DELAY_MIN_US 0.3
#define BENCH_POLL_DELAY_MAX_US 2.0

/** Coherence: every ordered pair by default up to this many CPUs. */
#define COHERENCE_ALL_PAIRS_MAX_CPUS 64

/** --pairs */
enum { PAIRS_AUTO = 0, PAIRS_ALL = 1, PAIRS_SAMPLE = 2 };

/** A suite: its name, its defaults and its runner. */
typedef struct suite {
	const char *name;
	const char *summary;
	unsigned options;             /* OPT_* accepted */
	long default_trials;
	double default_delay_min_us, default_delay_max_us;
	void (*help)(FILE *out);      /* suite-specific part of --help */
	void (*list)(FILE *out);      /* mechanisms for `nemo-bench list` */
	/** Is name one of this suite's mechanisms? */
	bool (*has_mechanism)(const char *name);
	void (*run)(const bench_opts *o, json_t *results, json_t *config);
	/** The summary table on stdout, if the suite has its own (else summary_print). */
	void (*print)(json_t *results);
	double default_seconds;       /* --seconds (OPT_SECONDS); 0: 2 */
	int default_rounds;           /* --rounds (OPT_ROUNDS); 0: 10 */
} suite;

extern const suite suite_unicast, suite_broadcast, suite_coherence, suite_policy, suite_calibrate,
	suite_throughput, suite_preload, suite_syscost, suite_app, suite_multicast, suite_event_loop,
	suite_request_reply;

/** Print "nemo-bench: <msg>" and exit with status 2 (bad usage). */
_Noreturn void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/** Print "nemo-bench: <msg>" and exit with status 1 (run failed). */
_Noreturn void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/**
 * A mechanism cannot run here (reason why): fatal if the user named it,
 * else a warning and an entry {mechanism, reason} in skipped.
 */
void mechanism_unavailable(const bench_opts *o, const char *name, const char *why, json_t *skipped);

/** Print "nemo-bench: warning: <msg>" unless quiet. */
void warn(const bench_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------------ */
/* Result rows                                                         */
/* ------------------------------------------------------------------ */
typedef struct row {
	const char *mechanism;
	const char *scenario;
	int src, dst;
	long trials;
	double *lat_ns;               /* trials (unicast) or trials*waiters (broadcast) */
	size_t nlat;
	double *send_ns;              /* trials */
	double ctx, vctx;             /* context switches per trial */
	double cpu_ns;                /* receiver's CPU time per trial, ns */
	const char *tag;              /* extra part of the samples file name, or NULL */
	double probe_before, probe_after;
	/* broadcast only (waiters > 0) */
	int waiters;
	const int *waiter_cpus;
	int *lat_waiter;              /* waiter index of each lat_ns[] entry */
	double *first_ns, *last_ns, *spread_ns;   /* trials each */
} row;

/* Warn when a row's coherence probe moved more than 2x between its start
 * and its end (the host moved the vCPUs mid-row). */
void probe_check(const bench_opts *o, const char *what, double before, double after);

/**
 * Turn a measured row into its JSON object (computing STATS and CDFs),
 * write its raw samples to o->samples_dir if set, and append it to
 * results.  The sample arrays are sorted in the process.  Warns as
 * probe_check does.
 */
void row_emit(const bench_opts *o, row *r, json_t *results);

/** STATS of v (n > 0 values, sorted in place) as its JSON object. */
json_t *stats_object(double *v, size_t n);
/** The STATS object of already computed stats. */
json_t *stats_json(const stats *s);

/**
 * Create the raw-samples file `name` in o->samples_dir (fatal if it cannot
 * be created) for a suite that writes its own CSV.  Returns it open, with
 * *rel set to the samples_file value (the path relative to the JSON
 * file's folder; free it); NULL and *rel NULL without --samples.
 */
FILE *samples_create(const bench_opts *o, const char *name, char **rel);

/** The machine object of docs/bench-json.md. */
json_t *machine_json(void);

/* --summary FILE (summary.c): the summary table as Markdown or CSV. */
/** FILE ends in .md or .csv (any case), or is - (Markdown on stdout). */
bool summary_path_ok(const char *path);
bool summary_is_csv(const char *path);
/** Write the summary table of the suite's results to f: CSV if path ends
 *  in .csv, else Markdown, which says so when interrupted_by (a signal). */
void summary_write(FILE *f, const char *path, const char *suite_name, json_t *results,
		   int interrupted_by);

/* ------------------------------------------------------------------ */
/* Harness                                                             */
/* ------------------------------------------------------------------ */

/* ------------------------------------------------------------------ */
/* Interruption (interrupt.c; docs/bench-json.md "Interrupted runs")  */
/* ------------------------------------------------------------------ */
/*
 * The first SIGINT, SIGTERM or SIGHUP asks the run to stop: every suite
 * ends the row it is measuring at the next trial boundary (a row keeps
 * the trials it has; one with none is left out), measures no further
 * row, and returns; main.c then writes what was kept, marked
 * "interrupted", and ends the process with the signal.  A second signal
 * ends it at once, leaving every output FILE as it was.
 */

/** Install the handlers (before any output file is opened). */
void interrupt_install(void);
/** The three signals, as a set (to block them). */
void interrupt_sigset(sigset_t *set);
/**
 * Main thread only: the signal that interrupted the run, or 0.  It also
 * publishes the request to the measuring threads (bench_stop_requested),
 * so a main thread that waits calls it now and then (progress_join does).
 */
int bench_interrupted(void);
/** Any thread: has the run been asked to stop?  One relaxed load. */
bool bench_stop_requested(void);
/** "SIGINT", "SIGTERM", "SIGHUP". */
const char *interrupt_signal_name(int sig);
/** Temporary files (and the preload suite's empty folder) that a second
 *  signal removes; path NULL: none. */
enum { INTERRUPT_TMP_JSON, INTERRUPT_TMP_SUMMARY, INTERRUPT_TMP_DIR, INTERRUPT_TMP_SLOTS };
void interrupt_tmp_set(int slot, const char *path);
/** preload: the running child, which a second signal kills (0: none). */
void interrupt_child_set(pid_t pid);
/** End the process with sig (its default action: status 128 + sig). */
_Noreturn void interrupt_die(int sig);

/** Start a thread with the three signals blocked, so that only the main
 *  thread takes them (fatal if it cannot). */
void bench_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

/** Start a thread pinned to cpu (it pins itself first; a failure to pin
 *  is fatal, with the CPU named), as bench_thread_start. */
void thread_start_pinned(pthread_t *t, int cpu, void *(*fn)(void *), void *arg);

/**
 * A background thread that burns CPU on `cpu` until stopped (the `loaded`
 * scenario).  busy_stop() joins it.
 */
typedef struct busy_thread {
	pthread_t t;
	atomic_bool stop;
	int cpu;
} busy_thread;
void busy_start(busy_thread *b, int cpu);
void busy_stop(busy_thread *b);

/** The CPUs this process may run on (its affinity mask), ascending, into
 *  out (at most max); returns how many. */
int bench_usable_cpus(int *out, int max);

/**
 * Topology distance class of two CPUs, as nemo_topo_distance: 0 same CPU,
 * 1 SMT siblings, 2 share an L2, 3 share an L3, 4 same package, 5 same
 * NUMA node, 6 apart; -1 when the topology is unknown.  The topology is
 * loaded once, on first use (call from one thread).
 */
int bench_cpu_distance(int cpu_a, int cpu_b);

/** Core of a CPU (hwloc logical index; SMT siblings share it), or -1. */
int bench_cpu_core(int cpu);

/** Median one-way cache-line latency a<->b (half round trip), in ns. */
double coherence_probe(int cpu_a, int cpu_b, int rounds);

/** Receiver's context switches so far: voluntary and total. */
void thread_ctx_switches(long *voluntary, long *total);

/** CPU time the calling thread has used, in ns. */
double thread_cpu_ns(void);

/** Small per-thread PRNG (xorshift64*). */
static inline uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/** Busy-wait a random time in [min_us, max_us] (the method's pre-signal delay). */
void random_delay(uint64_t *rng, double min_us, double max_us);

/**
 * Spin until *word == want, giving up (fatal, naming what) after
 * `timeout_s` seconds: a lost wake ends the run with an error, never a hang.
 */
void wait_until_eq(const atomic_uint *word, unsigned want, double timeout_s, const char *what);

/** Watchdog for a waiting loop: the seconds after which a run is declared stuck. */
#define BENCH_STUCK_S 20.0

/* ------------------------------------------------------------------ */
/* Progress on stderr (terminal only, runs longer than one second).   */
/* ------------------------------------------------------------------ */
void progress_begin(const bench_opts *o, const char *what, uint64_t total_units);
void progress_add(uint64_t units);         /* any thread; relaxed atomic add */
/** Redraw the bar (a loop that waits on something else than threads). */
void progress_tick(void);
/** Join the threads while redrawing the bar every 100 ms. */
void progress_join(pthread_t *threads, int n);
void progress_end(void);

/** Allocate zeroed memory or die with "out of memory". */
void *xcalloc(size_t n, size_t size);

/** Allocate zeroed memory on its own cache lines (C11 aligned_alloc wants
 *  a size that is a multiple of the alignment: rounded up here), or die. */
void *xaligned(size_t size);

#endif
