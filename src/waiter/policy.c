/*
 * policy.c - wait policies: parsing, per-thread and environment defaults,
 * and the calibration behind the adaptive policy.
 *
 * The adaptive budget is the measured cost of one futex block + wake-up
 * between two CPUs (the one-way latency from FUTEX_WAKE to the sleeper
 * running).  Spinning that long before sleeping costs at most twice what
 * the better of "spin" and "sleep" would have cost in hindsight.  Where
 * the number comes from, in order: a profile file (written by
 * `nemo-bench calibrate`), a measurement made once per process (~200
 * wakes, ~2 ms), or 20 us if neither works (one CPU).
 */
#define _GNU_SOURCE
#include "waiter_internal.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------- parse */

int nemo_wait_policy_parse(const char *text, nemo_wait_policy *out)
{
	if (!text || !out)
		return EINVAL;
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
		if (errno || end == text + 7 || *end || ns == 0 || ns > 1000000000ul || text[7] == '-')
			return EINVAL;
		p.kind = NEMO_WAIT_HYBRID;
		p.spin_ns = (uint32_t)ns;
	} else {
		return EINVAL;
	}
	*out = p;
	return 0;
}

int nemo_wait_policy_format(const nemo_wait_policy *p, char *buf, size_t len)
{
	if (!p || !buf)
		return EINVAL;
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
		return EINVAL;
	}
	return n < 0 || (size_t)n >= len ? ERANGE : 0;
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
	if (nemo_wait_policy_parse(s, &env_policy) != 0) {
		fprintf(stderr, "nemo: ignoring NEMO_WAIT=%s (want spin, block, hybrid[:NS] or adaptive)\n", s);
		env_policy = (nemo_wait_policy){ NEMO_WAIT_ADAPTIVE, 0 };
	}
}

static bool kind_ok(nemo_wait_kind k)
{
	return k >= NEMO_WAIT_DEFAULT && k <= NEMO_WAIT_ADAPTIVE;
}

int nemo_wait_policy_resolve(const nemo_wait_policy *p, nemo_wait_policy *out)
{
	if (!out)
		return EINVAL;
	if (p && !kind_ok(p->kind))
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

int nemo_wait_set_thread_policy(const nemo_wait_policy *p)
{
	if (p && !kind_ok(p->kind))
		return EINVAL;
	tls_policy = p ? *p : (nemo_wait_policy){ NEMO_WAIT_DEFAULT, 0 };
	return 0;
}

/* ---------------------------------------------------------- calibration */

static struct {
	double block_wake_ns;
	const char *source;
} calib;
static pthread_once_t calib_once = PTHREAD_ONCE_INIT;

#define CALIB_DEFAULT_NS 20000.0

int nemo_wait_profile_path(char *buf, size_t len)
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
		return ENOENT;
	}
	return n < 0 || (size_t)n >= len ? ERANGE : 0;
}

static bool profile_read(double *ns)
{
	char path[PATH_MAX];
	if (nemo_wait_profile_path(path, sizeof path) != 0)
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

int nemo_wait_profile_write(const char *path, double block_wake_ns)
{
	if (!(block_wake_ns > 0) || block_wake_ns >= 1e9)
		return EINVAL;
	char def[PATH_MAX];
	if (!path) {
		int err = nemo_wait_profile_path(def, sizeof def);
		if (err)
			return err;
		path = def;
		mkdirs_for(path);
	}
	FILE *f = fopen(path, "w");
	if (!f)
		return errno;
	fprintf(f, "# nemo wait profile, written by nemo-bench calibrate\n"
		   "# one-way cost of a futex sleep + wake-up on this machine, in ns\n"
		   "block_wake_ns %.0f\n", block_wake_ns);
	if (fclose(f) != 0)
		return errno;
	return 0;
}

/* --- measurement: a futex ping-pong, one wake at a time ---------------- */

struct pingpong {
	_Alignas(NEMO__CACHELINE) _Atomic uint32_t word;
	_Alignas(NEMO__CACHELINE) _Atomic uint64_t stamp;
	int rounds, cpu;
	double *lat;
};

static void pp_wait(struct pingpong *pp, uint32_t want)
{
	uint32_t v;
	while ((v = atomic_load_explicit(&pp->word, memory_order_acquire)) != want)
		nemo_futex_wait((uint32_t *)&pp->word, v, NULL, NEMO_FUTEX_PRIVATE);
}

static void pp_post(struct pingpong *pp, uint32_t v)
{
	atomic_store_explicit(&pp->stamp, nemo_ticks_ordered(), memory_order_relaxed);
	atomic_store_explicit(&pp->word, v, memory_order_release);
	nemo_futex_wake((uint32_t *)&pp->word, 1, NEMO_FUTEX_PRIVATE, NULL);
}

static void *pp_echo(void *arg)
{
	struct pingpong *pp = arg;
	if (pp->cpu >= 0)
		nemo_pin_self(pp->cpu);
	for (int i = 0; i < pp->rounds; i++) {
		pp_wait(pp, 2u * (uint32_t)i + 1);
		/* Let the other side fall asleep before waking it. */
		nemo_spin_ns(20000);
		pp_post(pp, 2u * (uint32_t)i + 2);
	}
	return NULL;
}

int nemo_wait_measure(int rounds, int cpu_a, int cpu_b, double *out)
{
	if (rounds < 10 || !out || cpu_a >= nemo_cpu_count() || cpu_b >= nemo_cpu_count())
		return EINVAL;
	nemo_clock_init();
	struct pingpong *pp = aligned_alloc(NEMO__CACHELINE, sizeof *pp);
	double *lat = calloc((size_t)rounds, sizeof *lat);
	if (!pp || !lat) {
		free(pp);
		free(lat);
		return ENOMEM;
	}
	memset(pp, 0, sizeof *pp);
	pp->rounds = rounds;
	pp->cpu = cpu_a >= 0 && cpu_b >= 0 ? cpu_b : -1;
	pp->lat = lat;
	pthread_t th;
	int err = pthread_create(&th, NULL, pp_echo, pp);
	if (err) {
		free(pp);
		free(lat);
		return err;
	}
	cpu_set_t old;
	bool pinned = cpu_a >= 0 && cpu_b >= 0 &&
		      sched_getaffinity(0, sizeof old, &old) == 0 && nemo_pin_self(cpu_a) == 0;
	for (int i = 0; i < rounds; i++) {
		nemo_spin_ns(20000);
		pp_post(pp, 2u * (uint32_t)i + 1);
		pp_wait(pp, 2u * (uint32_t)i + 2);
		uint64_t now = nemo_ticks_ordered();
		lat[i] = nemo_ticks_to_ns((int64_t)(now - atomic_load_explicit(&pp->stamp, memory_order_relaxed)));
	}
	pthread_join(th, NULL);
	if (pinned)
		sched_setaffinity(0, sizeof old, &old);
	/* median, skipping the first tenth (warm-up) */
	int skip = rounds / 10, n = rounds - skip;
	double *v = lat + skip;
	for (int i = 1; i < n; i++)      /* insertion sort: n is small */
		for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
			double t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	*out = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	free(lat);
	free(pp);
	return 0;
}

static void calib_load(void)
{
	double ns;
	if (profile_read(&ns)) {
		calib.block_wake_ns = ns;
		calib.source = "profile";
	} else if (nemo_cpu_count() >= 2 && nemo_wait_measure(100, -1, -1, &ns) == 0 && ns > 0) {
		calib.block_wake_ns = ns;
		calib.source = "measured";
	} else {
		calib.block_wake_ns = CALIB_DEFAULT_NS;
		calib.source = "default";
	}
}

double nemo__block_wake_ns(void)
{
	pthread_once(&calib_once, calib_load);
	return calib.block_wake_ns;
}

int nemo_wait_get_calibration(nemo_wait_calibration *out)
{
	if (!out)
		return EINVAL;
	out->block_wake_ns = nemo__block_wake_ns();
	out->budget_ns = out->block_wake_ns;
	out->source = calib.source;
	return 0;
}
