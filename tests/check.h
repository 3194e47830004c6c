/*
 * check.h - the tiny assertion kit of nemo's C tests.
 *
 * CHECK(cond) records a failure with file:line and goes on; a test's main
 * returns check_exit() so ctest sees every failed check of a run, not
 * just the first.
 */
#ifndef NEMO_TEST_CHECK_H
#define NEMO_TEST_CHECK_H

/* in_ms needs POSIX clocks; tests that include this first get them. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Atomic: tests CHECK from several threads. */
static atomic_int check_failures;
static atomic_int check_count;

#define CHECK(cond)                                                             \
	do {                                                                    \
		check_count++;                                                  \
		if (!(cond)) {                                                  \
			check_failures++;                                       \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond);                               \
		}                                                               \
	} while (0)

#define CHECK_EQ_INT(a, b)                                                      \
	do {                                                                    \
		long long a_ = (long long)(a), b_ = (long long)(b);             \
		check_count++;                                                  \
		if (a_ != b_) {                                                 \
			check_failures++;                                       \
			fprintf(stderr, "%s:%d: check failed: %s == %s (%lld != %lld)\n", \
				__FILE__, __LINE__, #a, #b, a_, b_);            \
		}                                                               \
	} while (0)

#define CHECK_NEAR(a, b, tol)                                                   \
	do {                                                                    \
		double a_ = (a), b_ = (b);                                      \
		check_count++;                                                  \
		if (!(fabs(a_ - b_) <= (tol))) {                                \
			check_failures++;                                       \
			fprintf(stderr, "%s:%d: check failed: %s ~= %s (%.9g vs %.9g)\n", \
				__FILE__, __LINE__, #a, #b, a_, b_);            \
		}                                                               \
	} while (0)

/* An absolute deadline `ms` milliseconds from now on clock `clk`. */
static inline struct timespec in_ms(clockid_t clk, int ms)
{
	struct timespec t;
	clock_gettime(clk, &t);
	t.tv_nsec += (long)ms * 1000000L;
	while (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

static inline int check_exit(const char *name)
{
	fprintf(stderr, "%s: %d checks, %d failed\n", name, atomic_load(&check_count),
		atomic_load(&check_failures));
	return atomic_load(&check_failures) ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
