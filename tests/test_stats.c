/* test_stats.c - nemo-bench's statistics against values computed with
 * numpy (np.percentile default 'linear', np.std population). */
#include "check.h"
#include "stats.h"

static void test_known_data(void)
{
	double d[] = { 15, 20, 35, 40, 50, 3, 7, 1000, 12.5, 8 };
	stats s;
	double cdf[STATS_CDF_POINTS];
	stats_compute(d, 10, &s, cdf);
	CHECK_NEAR(s.min, 3.0, 1e-12);
	CHECK_NEAR(s.max, 1000.0, 1e-12);
	CHECK_NEAR(s.p50, 17.5, 1e-9);
	CHECK_NEAR(s.p90, 145.0, 1e-9);
	CHECK_NEAR(s.p99, 914.5, 1e-9);
	CHECK_NEAR(s.mean, 119.05, 1e-9);
	CHECK_NEAR(s.stddev, 294.02367676770524, 1e-9);
	CHECK_NEAR(cdf[0], 3.0, 1e-12);
	CHECK_NEAR(cdf[37], 13.325, 1e-9);
	CHECK_NEAR(cdf[100], 1000.0, 1e-12);
	for (int i = 1; i < STATS_CDF_POINTS; i++)
		CHECK(cdf[i] >= cdf[i - 1]);
	/* stats_compute sorts in place */
	for (int i = 1; i < 10; i++)
		CHECK(d[i] >= d[i - 1]);
}

static void test_ramp(void)
{
	double e[100];
	for (int i = 0; i < 100; i++)
		e[99 - i] = i + 1;   /* reversed: sorting matters */
	stats s;
	stats_compute(e, 100, &s, NULL);
	CHECK_NEAR(s.p50, 50.5, 1e-9);
	CHECK_NEAR(s.p90, 90.1, 1e-9);
	CHECK_NEAR(s.p99, 99.01, 1e-9);
	CHECK_NEAR(s.stddev, 28.86607004772212, 1e-9);
}

static void test_edges(void)
{
	double one[] = { 42 };
	stats s;
	stats_compute(one, 1, &s, NULL);
	CHECK_NEAR(s.min, 42, 0);
	CHECK_NEAR(s.p99, 42, 0);
	CHECK_NEAR(s.stddev, 0, 0);
	double same[] = { 7, 7, 7, 7 };
	CHECK_NEAR(stats_stddev(same, 4), 0, 1e-12);
	double none[1];
	CHECK_NEAR(stats_median(none, 0), 0, 0);
	double two[] = { 5, 1 };
	CHECK_NEAR(stats_median(two, 2), 3, 1e-12);
	/* Welford keeps precision on large, close values (cycle counts). */
	double big[] = { 1e12 + 1, 1e12 + 2, 1e12 + 3 };
	CHECK_NEAR(stats_stddev(big, 3), 0.816496580927726, 1e-6);
	/* negative values (clock skew between CPUs) are kept, not clamped */
	double neg[] = { -5, 5 };
	stats_compute(neg, 2, &s, NULL);
	CHECK_NEAR(s.min, -5, 0);
	CHECK_NEAR(s.p50, 0, 1e-12);
}

int main(void)
{
	test_known_data();
	test_ramp();
	test_edges();
	return check_exit("test_stats");
}
