/*
 * policy.c - wait policies: parsing, per-thread and environment defaults,
 * and what the adaptive policy knows about the cost of blocking.
 *
 * THE COST OF BLOCKING (what the adaptive budget is; wait.c spends it)
 *
 * Blocking costs a waiter the latency from the waker's FUTEX_WAKE to
 * the sleeper running again, plus the CPU time of the two syscalls and
 * context switches.  The adaptive policy learns both on the job, from
 * the sleeps that really happen in this process, with no set-up:
 *   lat   each kick that issues a FUTEX_WAKE stamps the slot (or event)
 *         first (waiter.c, kick(); event.c, EP2); a sleeper that was woken
 *         by it measures now - stamp: the wake-up latency it really got;
 *   wake  the kicker times its own FUTEX_WAKE syscall (a lower bound on
 *         each side's CPU cost, which we count twice: the sleeper pays a
 *         syscall and a switch too).
 * cost = lat + 2 * wake, process-wide, kept in relaxed atomics: a lost
 * update only skips a sample.  wake is a moving average (1/8 per
 * sample).  lat tracks the low band of the samples: one below the
 * estimate pulls it down by a quarter of the difference, one above pushes
 * it up by 1/32.  A sleeper woken onto a busy CPU also waits its turn in
 * the run queue, but that wait is not what sleeping costs: had it polled
 * instead, it would have held a CPU another thread was queued for.  With
 * a plain average, the oversubscribed nemo-pool learned 60-80 us and
 * polled that long; with the low band, 25-45 us.
 * Samples are clamped to 0.2 us .. 1 ms, so neither a stamp from the
 * wrong kick nor a sleeper that waited for a busy CPU can push the budget
 * out of that range.  Until the first sample the cost is a start value:
 * the profile written by `nemo-bench calibrate` if there is one (an
 * optional refinement, read once), else 12 us + 2 * 2 us = 16 us - low
 * enough that a wrong guess wastes little before the first real sleep
 * replaces it, high enough that a hand-off of a few microseconds spins.
 *
 * Rejected: measuring the cost at the first adaptive wait with two probe
 * threads (the earlier design).  It stalled that wait ~5 ms, created
 * threads inside the user's process, and measured the wrong thing when
 * the caller was pinned (the probes inherited its one-CPU affinity: 850
 * ns instead of 22-41 us on a 16-core VM), which made the default the
 * worst policy for hand-offs.
 */
#define _GNU_SOURCE
#include "waiter_internal.h"

#include "../platform/fail.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A refusal: with a text under fn's name, or (fn NULL: an internal
 * caller, for which it is an ordinary result) the bare code. */
#define REFUSE(fn, code, ...) ((fn) ? nemo__fail((code), (fn), __VA_ARGS__) : (code))

/* ---------------------------------------------------------------- parse */

/* nemo_wait_policy_parse, saying why under fn's name (NULL: bare, for
 * NEMO_WAIT, which env_load reports itself). */
static int parse(const char *fn, const char *text, nemo_wait_policy *out)
{
	if (!text || !out)
		return REFUSE(fn, EINVAL, "%s is NULL", !text ? "text" : "out");
	nemo_wait_policy p = { 0, 0 };
	if (strcmp(text, "spin") == 0) {
		p.kind = NEMO_WAIT_SPIN;
	} else if (strcmp(text, "block") == 0) {
		p.kind = NEMO_WAIT_BLOCK;
	} else if (strcmp(text, "adaptive") == 0) {
		p.kind = NEMO_WAIT_ADAPTIVE;
	} else if (strcmp(text, "hybrid") == 0) {
		p.kind = NEMO_WAIT_HYBRID;
		p.spin_ns = NEMO_WAIT_HYBRID_DEFAULT_NS;
	} else if (strncmp(text, "hybrid:", 7) == 0) {
		char *end;
		errno = 0;
		unsigned long ns = strtoul(text + 7, &end, 10);
		if ((errno && errno != ERANGE) || end == text + 7 || *end || text[7] == '-')
			return REFUSE(fn, EINVAL, "hybrid budget '%.40s' is not a number of nanoseconds "
				      "(hybrid:NS, NS from 1 to 1000000000)", text + 7);
		if (ns == 0)
			return REFUSE(fn, EINVAL, "a hybrid budget of 0 ns (hybrid:NS wants NS from 1 "
				      "to 1000000000; plain hybrid is %u)", NEMO_WAIT_HYBRID_DEFAULT_NS);
		if (errno || ns > 1000000000ul)
			return REFUSE(fn, EINVAL, "hybrid budget %.40s ns is above 1 s (1000000000)", text + 7);
		p.kind = NEMO_WAIT_HYBRID;
		p.spin_ns = (uint32_t)ns;
	} else {
		return REFUSE(fn, EINVAL, "unknown policy '%.40s' (spin, block, hybrid, hybrid:NS, adaptive)",
			      text);
	}
	*out = p;
	return 0;
}

int nemo_wait_policy_parse(const char *text, nemo_wait_policy *out)
{
	return parse(__func__, text, out);
}

int nemo_wait_policy_format(const nemo_wait_policy *p, char *buf, size_t len)
{
	if (!p || !buf)
		return NEMO__FAIL(EINVAL, "%s is NULL", !p ? "p" : "buf");
	int n;
	switch (p->kind) {
	case NEMO_WAIT_SPIN: n = snprintf(buf, len, "spin"); break;
	case NEMO_WAIT_BLOCK: n = snprintf(buf, len, "block"); break;
	case NEMO_WAIT_ADAPTIVE: n = snprintf(buf, len, "adaptive"); break;
	case NEMO_WAIT_DEFAULT: n = snprintf(buf, len, "default"); break;
	case NEMO_WAIT_HYBRID:
		n = snprintf(buf, len, "hybrid:%u", p->spin_ns ? p->spin_ns : NEMO_WAIT_HYBRID_DEFAULT_NS);
		break;
	default:
		return NEMO__FAIL(EINVAL, "policy kind %d is not a nemo_wait_kind", (int)p->kind);
	}
	if (n < 0 || (size_t)n >= len)
		return NEMO__FAIL(ERANGE, "buf of %zu bytes is too small: the policy takes %d with its NUL",
				  len, n + 1);
	return 0;
}

/* ------------------------------------------------------------- defaults */

static __thread nemo_wait_policy tls_policy __attribute__((tls_model("initial-exec")));
static nemo_wait_policy env_policy = { NEMO_WAIT_ADAPTIVE, 0 };
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static void env_load(void)
{
	const char *s = getenv("NEMO_WAIT");
	if (!s || !*s)
		return;
	if (parse(NULL, s, &env_policy) != 0) {
		fprintf(stderr, "nemo: ignoring NEMO_WAIT=%s (want spin, block, hybrid[:NS] or adaptive)\n", s);
		env_policy = (nemo_wait_policy){ NEMO_WAIT_ADAPTIVE, 0 };
	}
}

static bool kind_ok(nemo_wait_kind k)
{
	return k >= NEMO_WAIT_DEFAULT && k <= NEMO_WAIT_ADAPTIVE;
}

int nemo__wait_policy_resolve(const nemo_wait_policy *p, nemo_wait_policy *out)
{
	if (!out || (p && !kind_ok(p->kind)))
		return EINVAL;
	if (p && p->kind != NEMO_WAIT_DEFAULT) {
		*out = *p;
		return 0;
	}
	if (tls_policy.kind != NEMO_WAIT_DEFAULT) {
		*out = tls_policy;
		return 0;
	}
	pthread_once(&env_once, env_load);
	*out = env_policy;
	return 0;
}

int nemo_wait_policy_resolve(const nemo_wait_policy *p, nemo_wait_policy *out)
{
	if (!out)
		return NEMO__FAIL(EINVAL, "out is NULL");
	if (p && !kind_ok(p->kind))
		return NEMO__FAIL(EINVAL, "policy kind %d is not a nemo_wait_kind", (int)p->kind);
	return nemo__wait_policy_resolve(p, out);
}

int nemo_wait_set_thread_policy(const nemo_wait_policy *p)
{
	if (p && !kind_ok(p->kind))
		return NEMO__FAIL(EINVAL, "policy kind %d is not a nemo_wait_kind", (int)p->kind);
	tls_policy = p ? *p : (nemo_wait_policy){ NEMO_WAIT_DEFAULT, 0 };
	return 0;
}

/* ---------------------------------------------------------- calibration */

#define START_LAT_NS 12000.0
#define START_WAKE_NS 2000.0
#define SAMPLE_MIN_NS 200.0
#define SAMPLE_MAX_NS 1000000.0

static struct {
	_Atomic uint32_t lat_ns;      /* wake-up latency, moving average */
	_Atomic uint32_t wake_ns;     /* a kicker's FUTEX_WAKE, moving average */
	_Atomic uint32_t samples;     /* latency samples taken (saturating) */
	const char *start;            /* "profile" or "default" */
} learned;
static pthread_once_t learned_once = PTHREAD_ONCE_INIT;
/* Set once learned_init has run: the learning calls check it instead of
 * calling pthread_once, because they run in kickers, and a kicker may be
 * an interrupt-mode handler (a signal handler), where neither
 * pthread_once nor the profile's fopen is allowed.  Every kick that
 * learns woke a sleeper, and every sleeper has passed nemo__learned_init
 * (wait.c) first, so no sample is lost that way but the odd one racing
 * the very first sleep of the process. */
static _Atomic bool learned_ready;

/* nemo_wait_profile_path, saying why under fn's name (NULL: bare, for
 * profile_read, to which no profile is an ordinary result). */
static int profile_path(const char *fn, char *buf, size_t len)
{
	const char *p = getenv("NEMO_PROFILE");
	int n;
	if (p && *p) {
		n = snprintf(buf, len, "%s", p);
	} else if ((p = getenv("XDG_CACHE_HOME")) && *p) {
		n = snprintf(buf, len, "%s/nemo/profile", p);
	} else if ((p = getenv("HOME")) && *p) {
		n = snprintf(buf, len, "%s/.cache/nemo/profile", p);
	} else {
		return REFUSE(fn, ENOENT, "none of NEMO_PROFILE, XDG_CACHE_HOME and HOME is set");
	}
	if (n < 0 || (size_t)n >= len)
		return REFUSE(fn, ERANGE, "buf of %zu bytes is too small: the path takes %d with its NUL",
			      len, n + 1);
	return 0;
}

int nemo_wait_profile_path(char *buf, size_t len)
{
	return profile_path(__func__, buf, len);
}

static bool profile_read(double *ns, double *cpu)
{
	char path[PATH_MAX];
	if (profile_path(NULL, path, sizeof path) != 0)
		return false;
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	char line[256];
	bool ok = false;
	while (fgets(line, sizeof line, f)) {
		double v;
		if (sscanf(line, "block_wake_ns %lf", &v) == 1 && v > 0 && v < 1e9) {
			*ns = v;
			ok = true;
		}
		if (sscanf(line, "block_cpu_ns %lf", &v) == 1 && v >= 0 && v < 1e9)
			*cpu = v;
	}
	fclose(f);
	return ok;
}

static void mkdirs_for(const char *path)
{
	char *p = strdup(path);
	if (!p)
		return;
	for (char *s = p + 1; *s; s++) {
		if (*s == '/') {
			*s = 0;
			mkdir(p, 0755);
			*s = '/';
		}
	}
	free(p);
}

int nemo_wait_profile_write(const char *path, double block_wake_ns, double block_cpu_ns)
{
	if (!(block_wake_ns > 0) || block_wake_ns >= 1e9)
		return NEMO__FAIL(EINVAL, "block_wake_ns %g is not a latency (want > 0 and < 1e9)",
				  block_wake_ns);
	if (!(block_cpu_ns >= 0) || block_cpu_ns >= 1e9)
		return NEMO__FAIL(EINVAL, "block_cpu_ns %g is not a CPU time (want >= 0 and < 1e9)",
				  block_cpu_ns);
	char def[PATH_MAX];
	if (!path) {
		int err = profile_path(NULL, def, sizeof def);
		if (err == ENOENT)
			return NEMO__FAIL(err, "path is NULL and there is no default location: none of "
					  "NEMO_PROFILE, XDG_CACHE_HOME and HOME is set");
		if (err)
			return NEMO__FAIL(err, "path is NULL and the default location is longer than "
					  "PATH_MAX (%d)", PATH_MAX);
		path = def;
		mkdirs_for(path);
	}
	FILE *f = fopen(path, "w");
	if (!f) {
		int err = errno;
		return NEMO__FAIL(err, "cannot open '%.160s' for writing", path);
	}
	fprintf(f, "# nemo wait profile, written by nemo-bench calibrate\n"
		   "# futex sleep + wake-up on this machine: one-way latency and the\n"
		   "# sleeper's CPU time, in ns; the adaptive spin budget is their sum\n"
		   "block_wake_ns %.0f\nblock_cpu_ns %.0f\n", block_wake_ns, block_cpu_ns);
	if (fclose(f) != 0) {
		int err = errno;
		return NEMO__FAIL(err, "cannot write '%.160s'", path);
	}
	return 0;
}

/* --- measurement -------------------------------------------------------
 * Two new threads, pinned to two CPUs (the caller's own affinity is not
 * touched).  Each round the sleeper announces it waits and sleeps on a
 * futex; the waker waits 20 us (so the sleeper is really asleep), stamps
 * and wakes it; the sleeper stamps on return.  Wake latency = median of
 * the differences; the sleeper's CPU cost = its CPU time / rounds (it does
 * nothing else).  The sum is what blocking costs a waiter.
 */
struct wake_probe {
	_Alignas(NEMO__CACHELINE) _Atomic uint32_t word;
	_Alignas(NEMO__CACHELINE) _Atomic uint32_t ready;
	_Alignas(NEMO__CACHELINE) _Atomic uint64_t stamp;
	int rounds, cpu_sleeper, cpu_waker;
	double *lat;
	double cpu_ns;
};

static double thread_cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *probe_sleeper(void *arg)
{
	struct wake_probe *p = arg;
	if (p->cpu_sleeper >= 0)
		nemo_pin_self(p->cpu_sleeper);
	double cpu0 = thread_cpu_now();
	for (uint32_t i = 1; i <= (uint32_t)p->rounds; i++) {
		atomic_store_explicit(&p->ready, i, memory_order_release);
		uint32_t v;
		while ((v = atomic_load_explicit(&p->word, memory_order_acquire)) != i)
			nemo_futex_wait((uint32_t *)&p->word, v, NULL, NEMO_FUTEX_PRIVATE);
		uint64_t now = nemo_ticks_ordered();
		p->lat[i - 1] = nemo_ticks_to_ns((int64_t)(now - atomic_load_explicit(&p->stamp, memory_order_relaxed)));
	}
	p->cpu_ns = (thread_cpu_now() - cpu0) / p->rounds;
	return NULL;
}

static void *probe_waker(void *arg)
{
	struct wake_probe *p = arg;
	if (p->cpu_waker >= 0)
		nemo_pin_self(p->cpu_waker);
	for (uint32_t i = 1; i <= (uint32_t)p->rounds; i++) {
		while (atomic_load_explicit(&p->ready, memory_order_acquire) != i)
			nemo_cpu_relax();
		nemo_spin_ns(20000);
		atomic_store_explicit(&p->stamp, nemo_ticks_ordered(), memory_order_relaxed);
		atomic_store_explicit(&p->word, i, memory_order_release);
		nemo_futex_wake((uint32_t *)&p->word, 1, NEMO_FUTEX_PRIVATE, NULL);
	}
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Two CPUs this process may use, or -1s. */
static void two_cpus(int *a, int *b)
{
	cpu_set_t set;
	*a = *b = -1;
	if (sched_getaffinity(0, sizeof set, &set) != 0)
		return;
	for (int c = 0; c < CPU_SETSIZE && *b < 0; c++) {
		if (!CPU_ISSET(c, &set))
			continue;
		if (*a < 0)
			*a = c;
		else
			*b = c;
	}
	if (*b < 0)
		*a = -1;
}

int nemo_wait_measure(int rounds, int cpu_a, int cpu_b, double *wake_ns, double *cpu_ns)
{
	int ncpu = nemo_cpu_count();
	if (rounds < 10)
		return NEMO__FAIL(EINVAL, "rounds %d: at least 10", rounds);
	if (!wake_ns)
		return NEMO__FAIL(EINVAL, "wake_ns is NULL");
	if (cpu_a >= ncpu || cpu_b >= ncpu)
		return NEMO__FAIL(EINVAL, "%s %d is not a CPU: %d are online (0..%d; negative: any)",
				  cpu_a >= ncpu ? "cpu_a" : "cpu_b", cpu_a >= ncpu ? cpu_a : cpu_b, ncpu,
				  ncpu - 1);
	if (cpu_a < 0 || cpu_b < 0)
		two_cpus(&cpu_a, &cpu_b);
	nemo_clock_init();
	struct wake_probe *p = aligned_alloc(NEMO__CACHELINE, NEMO__LINES(sizeof *p));
	double *lat = calloc((size_t)rounds, sizeof *lat);
	if (!p || !lat) {
		free(p);
		free(lat);
		return NEMO__FAIL(ENOMEM, "cannot allocate the samples of %d rounds", rounds);
	}
	memset(p, 0, sizeof *p);
	p->rounds = rounds;
	p->cpu_waker = cpu_a;
	p->cpu_sleeper = cpu_b;
	p->lat = lat;
	pthread_t ts, tw;
	int err = pthread_create(&ts, NULL, probe_sleeper, p);
	if (!err) {
		err = pthread_create(&tw, NULL, probe_waker, p);
		if (err) {           /* release the sleeper: it waits for round 1 */
			atomic_store(&p->word, (uint32_t)rounds);
			p->rounds = 0;
		} else {
			pthread_join(tw, NULL);
		}
		pthread_join(ts, NULL);
	}
	if (!err) {
		int skip = rounds / 10;   /* warm-up */
		qsort(lat + skip, (size_t)(rounds - skip), sizeof *lat, cmp_double);
		*wake_ns = lat[skip + (rounds - skip) / 2];
		if (cpu_ns)
			*cpu_ns = p->cpu_ns;
	}
	free(lat);
	free(p);
	if (err)
		return NEMO__FAIL(err, "cannot create the two probe threads (pthread_create)");
	return 0;
}

static void learned_init(void)
{
	double lat = 0, cpu = 2 * START_WAKE_NS;
	if (profile_read(&lat, &cpu)) {
		learned.start = "profile";
	} else {
		lat = START_LAT_NS;
		cpu = 2 * START_WAKE_NS;
		learned.start = "default";
	}
	atomic_store_explicit(&learned.lat_ns, (uint32_t)lat, memory_order_relaxed);
	atomic_store_explicit(&learned.wake_ns, (uint32_t)(cpu / 2), memory_order_relaxed);
	atomic_store_explicit(&learned_ready, true, memory_order_release);
}

void nemo__learned_init(void)
{
	pthread_once(&learned_once, learned_init);
}

static double clamp_sample(double ns)
{
	return ns < SAMPLE_MIN_NS ? SAMPLE_MIN_NS : ns > SAMPLE_MAX_NS ? SAMPLE_MAX_NS : ns;
}

/* avg += (sample - avg) / 8, on a relaxed word (racing updates may lose
 * one sample, never corrupt the average). */
static void ewma(_Atomic uint32_t *avg, double sample)
{
	double a = (double)atomic_load_explicit(avg, memory_order_relaxed);
	a += (clamp_sample(sample) - a) / 8;
	atomic_store_explicit(avg, (uint32_t)a, memory_order_relaxed);
}

/* The latency's low band: a sample below the estimate pulls it down by a
 * quarter of the difference, one above pushes it up by 1/32 (THE COST OF
 * BLOCKING above). */
static void low_band(_Atomic uint32_t *est, double sample)
{
	double a = (double)atomic_load_explicit(est, memory_order_relaxed);
	double x = clamp_sample(sample);
	a += (x - a) / (x < a ? 4 : 32);
	atomic_store_explicit(est, (uint32_t)a, memory_order_relaxed);
}

void nemo__learn_wake_latency(double ns)
{
	if (!atomic_load_explicit(&learned_ready, memory_order_acquire))
		return;
	low_band(&learned.lat_ns, ns);
	uint32_t n = atomic_load_explicit(&learned.samples, memory_order_relaxed);
	if (n < UINT32_MAX)
		atomic_store_explicit(&learned.samples, n + 1, memory_order_relaxed);
}

void nemo__learn_kick_cost(double ns)
{
	if (!atomic_load_explicit(&learned_ready, memory_order_acquire))
		return;      /* maybe a signal handler: no pthread_once here */
	ewma(&learned.wake_ns, ns);
}

double nemo__block_cost_ns(void)
{
	pthread_once(&learned_once, learned_init);
	return (double)atomic_load_explicit(&learned.lat_ns, memory_order_relaxed) +
	       2.0 * (double)atomic_load_explicit(&learned.wake_ns, memory_order_relaxed);
}

int nemo_wait_get_calibration(nemo_wait_calibration *out)
{
	if (!out)
		return NEMO__FAIL(EINVAL, "out is NULL");
	pthread_once(&learned_once, learned_init);
	out->block_wake_ns = (double)atomic_load_explicit(&learned.lat_ns, memory_order_relaxed);
	out->block_cpu_ns = 2.0 * (double)atomic_load_explicit(&learned.wake_ns, memory_order_relaxed);
	out->budget_ns = out->block_wake_ns + out->block_cpu_ns;
	out->samples = atomic_load_explicit(&learned.samples, memory_order_relaxed);
	out->source = out->samples ? "learned" : learned.start;
	return 0;
}
