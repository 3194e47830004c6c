/*
 * deadline.h - absolute deadlines as struct timespec (internal): the one
 * way the layers above turn "ns from now" into a deadline and compare
 * two of them.
 */
#ifndef NEMO_PLATFORM_DEADLINE_H
#define NEMO_PLATFORM_DEADLINE_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* *out := the time on `clock` ns from now. */
static inline void nemo__deadline_in(clockid_t clock, uint64_t ns, struct timespec *out)
{
	clock_gettime(clock, out);
	out->tv_sec += (time_t)(ns / 1000000000ull);
	out->tv_nsec += (long)(ns % 1000000000ull);
	if (out->tv_nsec >= 1000000000L) {
		out->tv_sec++;
		out->tv_nsec -= 1000000000L;
	}
}

/* Is a strictly before b? */
static inline bool nemo__ts_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

#endif
