/* test_clock.c - the cycle counter: source, calibration, monotonicity,
 * conversions.  It compares the counter with CLOCK_MONOTONIC (a ratio of
 * two clocks, with generous bounds), never the speed of anything. */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/nemo.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void test_info(void)
{
	CHECK_EQ_INT(nemo_clock_init(), 0);
	CHECK_EQ_INT(nemo_clock_init(), 0);     /* idempotent */
	nemo_clock_info ci;
	CHECK_EQ_INT(nemo_clock_get_info(&ci), 0);
	CHECK_EQ_INT(nemo_clock_get_info(NULL), EINVAL);
	const char *env = getenv("NEMO_CLOCK");
	if (env && strcmp(env, "gettime") == 0) {
		CHECK_EQ_INT(ci.source, NEMO_CLOCK_GETTIME);
		CHECK_NEAR(ci.ticks_per_sec, 1e9, 0);
	} else {
		CHECK(ci.source == NEMO_CLOCK_TSC || ci.source == NEMO_CLOCK_GETTIME);
		if (ci.tsc_invariant)
			CHECK_EQ_INT(ci.source, NEMO_CLOCK_TSC);
	}
	/* plausible: 100 MHz .. 10 GHz */
	CHECK(ci.ticks_per_sec >= 1e8 && ci.ticks_per_sec <= 1e10);
	CHECK(ci.overhead_ns >= 0 && ci.overhead_ns < 1e6);
	CHECK(ci.resolution_ns > 0 && ci.resolution_ns < 1e6);
	printf("clock: %s, %.6f GHz, read %.1f ns, resolution %.2f ns\n",
	       ci.source == NEMO_CLOCK_TSC ? "tsc" : "clock_gettime",
	       ci.ticks_per_sec / 1e9, ci.overhead_ns, ci.resolution_ns);
}

static void test_monotonic(void)
{
	uint64_t prev = nemo_ticks();
	int backwards = 0;
	for (int i = 0; i < 1000000; i++) {
		uint64_t t = (i & 1) ? nemo_ticks() : nemo_ticks_ordered();
		backwards += t < prev;
		prev = t;
	}
	CHECK_EQ_INT(backwards, 0);
}

/* Against CLOCK_MONOTONIC over 50 ms: the converted tick count must agree
 * within 2% (calibration error is ppm; the slack absorbs preemption). */
static void test_rate(void)
{
	for (int attempt = 0; attempt < 3; attempt++) {
		double m0 = mono_ns();
		uint64_t t0 = nemo_ticks_ordered();
		struct timespec d = { 0, 50 * 1000 * 1000 };
		nanosleep(&d, NULL);
		uint64_t t1 = nemo_ticks_ordered();
		double m1 = mono_ns();
		double ratio = nemo_ticks_to_ns((int64_t)(t1 - t0)) / (m1 - m0);
		if (ratio > 0.98 && ratio < 1.02) {
			CHECK(1);
			return;
		}
		fprintf(stderr, "rate ratio %.4f, retrying\n", ratio);
	}
	CHECK(!"tick rate disagrees with CLOCK_MONOTONIC by more than 2% three times");
}

static void test_conversions(void)
{
	CHECK_EQ_INT(nemo_ns_to_ticks(-5), 0);
	CHECK_EQ_INT(nemo_ns_to_ticks(0), 0);
	uint64_t t = nemo_ns_to_ticks(1e6);
	CHECK_NEAR(nemo_ticks_to_ns((int64_t)t), 1e6, 1.0);
	CHECK(nemo_ticks_to_ns(-100) < 0);
	/* nemo_spin_ns waits at least what it was asked */
	uint64_t a = nemo_ticks();
	nemo_spin_ns(20000);
	CHECK(nemo_ticks_to_ns((int64_t)(nemo_ticks() - a)) >= 20000 * 0.999);
}

/* Stamps taken on one CPU and read on another must be comparable: the
 * method of nemo-bench relies on it.  A stamp handed over through memory
 * can never be later than the receiver's own clock by more than a skew
 * bound (5 us is far above any synchronised TSC). */
static _Atomic uint64_t handed;
static void *stamp_on_other_cpu(void *p)
{
	(void)p;
	nemo_pin_self(1);
	for (int i = 0; i < 1000; i++) {
		uint64_t t = nemo_ticks_ordered();
		__atomic_store_n(&handed, t, __ATOMIC_RELEASE);
		nemo_spin_ns(2000);
	}
	return NULL;
}

static void test_cross_cpu(void)
{
	if (nemo_cpu_count() < 2) {
		printf("test_cross_cpu: SKIPPED: one CPU, no cross-CPU stamp to compare\n");
		return;
	}
	nemo_pin_self(0);
	pthread_t th;
	pthread_create(&th, NULL, stamp_on_other_cpu, NULL);
	double worst = 0;
	for (int i = 0; i < 5000; i++) {
		uint64_t seen = __atomic_load_n(&handed, __ATOMIC_ACQUIRE);
		uint64_t now = nemo_ticks_ordered();
		if (seen && seen > now) {
			double ahead = nemo_ticks_to_ns((int64_t)(seen - now));
			if (ahead > worst)
				worst = ahead;
		}
		nemo_spin_ns(400);
	}
	pthread_join(th, NULL);
	nemo_unpin_self();
	printf("worst cross-CPU skew seen: %.0f ns\n", worst);
	CHECK(worst < 5000);
}

int main(void)
{
	test_info();
	test_monotonic();
	test_rate();
	test_conversions();
	test_cross_cpu();
	return check_exit("test_clock");
}
