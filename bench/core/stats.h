/*
 * stats.h - summary statistics of latency samples (nemo-bench).
 */
#ifndef NEMO_BENCH_STATS_H
#define NEMO_BENCH_STATS_H

#include <stddef.h>

/** The STATS object of docs/bench-json.md. */
typedef struct stats {
	double min, p50, p90, p99, max, mean, stddev;
} stats;

/** Number of points in a CDF array: percentiles 0, 1, ..., 100. */
#define STATS_CDF_POINTS 101

/**
 * Percentile p (0..100) of n sorted values, linear interpolation between
 * closest ranks (numpy's default): rank = p/100 * (n-1).  n must be > 0.
 */
double stats_percentile_sorted(const double *sorted, size_t n, double p);

/**
 * Sort v (n > 0 values) in place and fill *out; if cdf is not NULL, also
 * fill cdf[0..100] with the percentiles 0..100.
 */
void stats_compute(double *v, size_t n, stats *out, double *cdf);

/** Median of n values (sorts v in place); 0 when n == 0. */
double stats_median(double *v, size_t n);

/** Population standard deviation of n values (not modified); 0 when n < 2. */
double stats_stddev(const double *v, size_t n);

#endif
