/*
 * futex.c - checked wrappers over futex(2).
 *
 * The raw syscall reports through errno and accepts anything; these
 * wrappers validate their arguments first (a NULL or misaligned word makes
 * the kernel return EFAULT/EINVAL only sometimes) and return the error
 * code instead of setting errno.
 */
#define _GNU_SOURCE
#include <nemo/platform.h>

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

static int wait_result(long rc)
{
	if (rc == 0)
		return 0;
	switch (errno) {
	case EAGAIN:
	case ETIMEDOUT:
	case EINTR:
		return errno;
	default:
		return errno ? errno : EINVAL;
	}
}

int nemo_futex_wait(uint32_t *word, uint32_t expected,
		    const struct timespec *timeout, int flags)
{
	int pf;
	if (bad_word(word) || bad_timespec(timeout) || op_flags(flags, &pf))
		return EINVAL;
	long rc = syscall(SYS_futex, word, FUTEX_WAIT | pf, expected, timeout, NULL, 0);
	return wait_result(rc);
}

int nemo_futex_wait_bitset(uint32_t *word, uint32_t expected, uint32_t bits, clockid_t clock,
			   const struct timespec *deadline, int flags)
{
	int pf;
	if (bad_word(word) || bad_timespec(deadline) || op_flags(flags, &pf) || bits == 0)
		return EINVAL;
	if (clock == CLOCK_REALTIME)
		pf |= FUTEX_CLOCK_REALTIME;
	else if (clock != CLOCK_MONOTONIC)
		return EINVAL;
	long rc = syscall(SYS_futex, word, FUTEX_WAIT_BITSET | pf, expected, deadline, NULL, bits);
	return wait_result(rc);
}

int nemo_futex_wait_until(uint32_t *word, uint32_t expected, clockid_t clock,
			  const struct timespec *deadline, int flags)
{
	return nemo_futex_wait_bitset(word, expected, FUTEX_BITSET_MATCH_ANY, clock, deadline, flags);
}

int nemo_futex_wake_bitset(uint32_t *word, int n, uint32_t bits, int flags, int *woken)
{
	int pf;
	if (bad_word(word) || n < 1 || op_flags(flags, &pf) || bits == 0)
		return EINVAL;
	long rc = syscall(SYS_futex, word, FUTEX_WAKE_BITSET | pf, n, NULL, NULL, bits);
	if (rc < 0)
		return errno ? errno : EINVAL;
	if (woken)
		*woken = (int)rc;
	return 0;
}

int nemo_futex_wake(uint32_t *word, int n, int flags, int *woken)
{
	int pf;
	if (bad_word(word) || n < 1 || op_flags(flags, &pf))
		return EINVAL;
	long rc = syscall(SYS_futex, word, FUTEX_WAKE | pf, n, NULL, NULL, 0);
	if (rc < 0)
		return errno ? errno : EINVAL;
	if (woken)
		*woken = (int)rc;
	return 0;
}

