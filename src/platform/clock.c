/*
 * clock.c - the cycle counter and its calibration.
 *
 * Decision made here, once per process: which counter nemo_ticks() reads.
 * The TSC is used only when CPUID says it is invariant (its rate does not
 * follow the core clock and it keeps counting in idle states); otherwise,
 * or with NEMO_CLOCK=gettime, the fallback is CLOCK_MONOTONIC in ns.
 *
 * Calibration: take (CLOCK_MONOTONIC_RAW, TSC) pairs 250 us apart, the
 * second after a busy wait.  Each pair is the best of several tries
 * bracketed by two clock reads, keeping the try with the narrowest
 * bracket, so a preemption inside one try does not skew the result (a
 * preemption between the pairs does not matter: both clocks keep
 * running).  With brackets of 30-100 ns that is a frequency error below
 * 4e-4: 16 ns on a 40 us wake-up, far below the noise of any latency this
 * library measures, and under 0.1% of a spin budget.  It runs once per
 * process, at the first wait or clock use, so it must be short: it was
 * 25 ms (a few ppm), which every program under the interposer paid at its
 * first condvar wait.
 */
#define _GNU_SOURCE
#include <nemo/platform.h>

#include "fail.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

int nemo_clock_source__ = 0;
double nemo_clock_ns_per_tick__ = 1.0;

static nemo_clock_info g_info;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_init_err;

static uint64_t mono_raw_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool tsc_is_invariant(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned a, b, c, d;
	if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
		return false;
	__get_cpuid(0x80000007u, &a, &b, &c, &d);
	return (d >> 8) & 1u;
#else
	return false;
#endif
}

#if defined(__x86_64__) || defined(__i386__)
/* One (ns, tsc) pair, the narrowest-bracketed of 32 tries. */
static void paired_read(uint64_t *ns, uint64_t *tsc)
{
	uint64_t best = UINT64_MAX;
	*ns = 0;   /* set by the first try (b - a < UINT64_MAX); -O3 cannot see that */
	*tsc = 0;
	for (int i = 0; i < 32; i++) {
		uint64_t a = mono_raw_ns();
		uint64_t t = nemo_rdtsc();
		uint64_t b = mono_raw_ns();
		if (b - a < best) {
			best = b - a;
			*ns = a + (b - a) / 2;
			*tsc = t;
		}
	}
}

static double calibrate_tsc(void)
{
	uint64_t ns0, t0, ns1, t1;
	paired_read(&ns0, &t0);
	while (mono_raw_ns() - ns0 < 250 * 1000)
		nemo_cpu_relax();
	paired_read(&ns1, &t1);
	if (ns1 <= ns0 || t1 <= t0)
		return 0;
	return (double)(t1 - t0) * 1e9 / (double)(ns1 - ns0);
}
#endif

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* Median read-to-read cost and smallest non-zero step, in ticks. */
static void measure_reads(double *overhead, double *resolution)
{
	enum { N = 1024 };
	static uint64_t d[N];
	uint64_t prev = nemo_ticks(), minstep = UINT64_MAX;
	for (int i = 0; i < N; i++) {
		uint64_t t = nemo_ticks();
		d[i] = t - prev;
		if (d[i] != 0 && d[i] < minstep)
			minstep = d[i];
		prev = t;
	}
	qsort(d, N, sizeof d[0], cmp_u64);
	*overhead = (double)d[N / 2];
	*resolution = minstep == UINT64_MAX ? 0 : (double)minstep;
}

static void clock_init_once(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
		g_init_err = ENOTSUP;
		return;
	}
	g_info.tsc_invariant = tsc_is_invariant();
	const char *env = getenv("NEMO_CLOCK");
	bool force_gettime = env && strcmp(env, "gettime") == 0;
	double hz = 0;
#if defined(__x86_64__) || defined(__i386__)
	if (g_info.tsc_invariant && !force_gettime)
		hz = calibrate_tsc();
#endif
	if (hz > 1e6) {
		g_info.source = NEMO_CLOCK_TSC;
		g_info.ticks_per_sec = hz;
	} else {
		g_info.source = NEMO_CLOCK_GETTIME;
		g_info.ticks_per_sec = 1e9;
	}
	nemo_clock_ns_per_tick__ = 1e9 / g_info.ticks_per_sec;
	__atomic_store_n(&nemo_clock_source__, (int)g_info.source, __ATOMIC_RELEASE);

	double over, res;
	measure_reads(&over, &res);
	g_info.overhead_ns = over * nemo_clock_ns_per_tick__;
	g_info.resolution_ns = res * nemo_clock_ns_per_tick__;
}

int nemo_clock_init(void)
{
	pthread_once(&g_once, clock_init_once);
	return g_init_err;
}

int nemo_clock_get_info(nemo_clock_info *out)
{
	if (!out)
		return NEMO__FAIL(EINVAL, "out is NULL");
	int err = nemo_clock_init();
	if (err)
		return NEMO__FAIL(err, "no monotonic clock works here (clock_gettime(CLOCK_MONOTONIC) failed)");
	*out = g_info;
	return 0;
}

void nemo_spin_ns(double ns)
{
	nemo_clock_init();
	uint64_t end = nemo_ticks() + nemo_ns_to_ticks(ns);
	while (nemo_ticks() < end)
		nemo_cpu_relax();
}
