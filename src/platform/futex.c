/*
 * futex.c - checked wrappers over futex(2).
 *
 * The raw syscall reports through errno and accepts anything; these
 * wrappers validate their arguments first (a NULL or misaligned word makes
 * the kernel return EFAULT/EINVAL only sometimes) and return the error
 * code instead of setting errno.  errno itself is left as the caller had
 * it: these run inside interposed pthread_cond_* calls, which glibc
 * implements without touching errno, and programs rely on that.
 *
 * A refused argument gives a text (fail.h); what the kernel answers does
 * not: EAGAIN, ETIMEDOUT and EINTR are outcomes a wait loop expects.
 */
#define _GNU_SOURCE
#include <nemo/platform.h>

#include "fail.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

static int op_flags(int flags, int *out)
{
	if (flags == NEMO_FUTEX_PRIVATE)
		*out = FUTEX_PRIVATE_FLAG;
	else if (flags == NEMO_FUTEX_SHARED)
		*out = 0;
	else
		return EINVAL;
	return 0;
}

static bool bad_word(const uint32_t *word)
{
	return word == NULL || ((uintptr_t)word & 3u) != 0;
}

static bool bad_timespec(const struct timespec *ts)
{
	return ts && (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000L);
}

/* Which of word, the time ts (named tsname) and flags fn refused, in
 * words; only called once the quick checks above failed. */
__attribute__((cold, noinline)) static int refuse(const char *fn, const uint32_t *word,
						  const struct timespec *ts, const char *tsname, int flags)
{
	int pf;
	if (!word)
		return nemo__fail(EINVAL, fn, "word is NULL");
	if (bad_word(word))
		return nemo__fail(EINVAL, fn, "word %p is not 4-byte aligned", (const void *)word);
	if (bad_timespec(ts))
		return nemo__fail(EINVAL, fn, "%s {%lld s, %ld ns} is not a valid time (tv_sec >= 0, "
				  "tv_nsec 0..999999999)", tsname, (long long)ts->tv_sec, (long)ts->tv_nsec);
	if (op_flags(flags, &pf))
		return nemo__fail(EINVAL, fn, "flags %d: want NEMO_FUTEX_PRIVATE (0) or NEMO_FUTEX_SHARED (1)",
				  flags);
	return EINVAL;     /* not reached: the caller found one of these */
}

/* The futex syscall, with errno kept as it was: returns the result and
 * puts the syscall's error code (0 on success) in *err. */
static long futex_call(uint32_t *word, int op, uint32_t val, const struct timespec *ts,
		       uint32_t val3, int *err)
{
	int saved = errno;
	long rc = syscall(SYS_futex, word, op, val, ts, NULL, val3);
	*err = rc < 0 ? (errno ? errno : EINVAL) : 0;
	errno = saved;
	return rc;
}

int nemo_futex_wait(uint32_t *word, uint32_t expected,
		    const struct timespec *timeout, int flags)
{
	int pf;
	if (bad_word(word) || bad_timespec(timeout) || op_flags(flags, &pf))
		return refuse(__func__, word, timeout, "timeout", flags);
	int err;
	futex_call(word, FUTEX_WAIT | pf, expected, timeout, 0, &err);
	return err;
}

/* nemo_futex_wait_bitset, refusing under fn's name (the call made). */
static int wait_bitset(const char *fn, uint32_t *word, uint32_t expected, uint32_t bits,
		       clockid_t clock, const struct timespec *deadline, int flags)
{
	int pf;
	if (bad_word(word) || bad_timespec(deadline) || op_flags(flags, &pf))
		return refuse(fn, word, deadline, "deadline", flags);
	if (bits == 0)
		return nemo__fail(EINVAL, fn, "bits is 0: no wake-up could match");
	if (clock == CLOCK_REALTIME)
		pf |= FUTEX_CLOCK_REALTIME;
	else if (clock != CLOCK_MONOTONIC)
		return nemo__fail(EINVAL, fn, "clock %d is neither CLOCK_MONOTONIC nor CLOCK_REALTIME",
				  (int)clock);
	int err;
	futex_call(word, FUTEX_WAIT_BITSET | pf, expected, deadline, bits, &err);
	return err;
}

int nemo_futex_wait_bitset(uint32_t *word, uint32_t expected, uint32_t bits, clockid_t clock,
			   const struct timespec *deadline, int flags)
{
	return wait_bitset(__func__, word, expected, bits, clock, deadline, flags);
}

int nemo_futex_wait_until(uint32_t *word, uint32_t expected, clockid_t clock,
			  const struct timespec *deadline, int flags)
{
	return wait_bitset(__func__, word, expected, FUTEX_BITSET_MATCH_ANY, clock, deadline, flags);
}

int nemo_futex_wake_bitset(uint32_t *word, int n, uint32_t bits, int flags, int *woken)
{
	int pf;
	if (bad_word(word) || op_flags(flags, &pf))
		return refuse(__func__, word, NULL, NULL, flags);
	if (n < 1)
		return NEMO__FAIL(EINVAL, "n %d: wake at least 1", n);
	if (bits == 0)
		return NEMO__FAIL(EINVAL, "bits is 0: no waiter could match");
	int err;
	long rc = futex_call(word, FUTEX_WAKE_BITSET | pf, (uint32_t)n, NULL, bits, &err);
	if (err)
		return err;
	if (woken)
		*woken = (int)rc;
	return 0;
}

int nemo_futex_wake(uint32_t *word, int n, int flags, int *woken)
{
	int pf;
	if (bad_word(word) || op_flags(flags, &pf))
		return refuse(__func__, word, NULL, NULL, flags);
	if (n < 1)
		return NEMO__FAIL(EINVAL, "n %d: wake at least 1", n);
	int err;
	long rc = futex_call(word, FUTEX_WAKE | pf, (uint32_t)n, NULL, 0, &err);
	if (err)
		return err;
	if (woken)
		*woken = (int)rc;
	return 0;
}

/* futex_waitv: one struct per word (FUTEX_32, and FUTEX_PRIVATE_FLAG for
 * a private word), an absolute deadline on the clock named by the last
 * argument.  The kernel answers the index of the word that woke it. */
int nemo_futex_wait_any(const nemo_futex_word *words, unsigned n, clockid_t clock,
			const struct timespec *deadline, int *woken)
{
	if (woken)
		*woken = -1;
	if (!words)
		return NEMO__FAIL(EINVAL, "words is NULL");
	if (n < 1 || n > NEMO_FUTEX_WAIT_ANY_MAX)
		return NEMO__FAIL(EINVAL, "n %u: want 1..%d words", n, NEMO_FUTEX_WAIT_ANY_MAX);
	if (clock != CLOCK_MONOTONIC && clock != CLOCK_REALTIME)
		return NEMO__FAIL(EINVAL, "clock %d is neither CLOCK_MONOTONIC nor CLOCK_REALTIME", (int)clock);
	struct futex_waitv v[NEMO_FUTEX_WAIT_ANY_MAX];
	for (unsigned i = 0; i < n; i++) {
		int pf;
		if (bad_word(words[i].word) || bad_timespec(deadline) || op_flags(words[i].flags, &pf))
			return refuse(__func__, words[i].word, deadline, "deadline", words[i].flags);
		v[i] = (struct futex_waitv){ .val = words[i].expected,
					     .uaddr = (uint64_t)(uintptr_t)words[i].word,
					     .flags = FUTEX_32 | (unsigned)pf };
	}
	int saved = errno;
	long rc = syscall(SYS_futex_waitv, v, n, 0, deadline, clock);
	int err = rc < 0 ? (errno ? errno : EINVAL) : 0;
	errno = saved;
	if (!err && woken)
		*woken = (int)rc;
	return err;
}
