/*
 * stats.c - percentiles, mean and standard deviation.
 */
#include "stats.h"

#include <math.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double stats_percentile_sorted(const double *s, size_t n, double p)
{
	if (p <= 0)
		return s[0];
	if (p >= 100)
		return s[n - 1];
	double rank = p / 100.0 * (double)(n - 1);
	size_t lo = (size_t)rank;
	double frac = rank - (double)lo;
	if (lo + 1 >= n)
		return s[n - 1];
	return s[lo] + (s[lo + 1] - s[lo]) * frac;
}

/* Mean and population stddev; Welford's update keeps precision with
 * large, close values (cycle counts). */
static void mean_stddev(const double *v, size_t n, double *mean, double *sd)
{
	double m = 0, m2 = 0;
	for (size_t i = 0; i < n; i++) {
		double d = v[i] - m;
		m += d / (double)(i + 1);
		m2 += d * (v[i] - m);
	}
	*mean = m;
	*sd = n > 1 ? sqrt(m2 / (double)n) : 0;
}

double stats_stddev(const double *v, size_t n)
{
	double m, sd;
	mean_stddev(v, n, &m, &sd);
	return sd;
}

void stats_compute(double *v, size_t n, stats *out, double *cdf)
{
	qsort(v, n, sizeof *v, cmp_double);
	out->min = v[0];
	out->max = v[n - 1];
	out->p50 = stats_percentile_sorted(v, n, 50);
	out->p90 = stats_percentile_sorted(v, n, 90);
	out->p99 = stats_percentile_sorted(v, n, 99);
	mean_stddev(v, n, &out->mean, &out->stddev);
	if (cdf)
		for (int i = 0; i < STATS_CDF_POINTS; i++)
			cdf[i] = stats_percentile_sorted(v, n, i);
}

double stats_median(double *v, size_t n)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof *v, cmp_double);
	return stats_percentile_sorted(v, n, 50);
}
