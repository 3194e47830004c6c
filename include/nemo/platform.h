/*
 * nemo/platform.h - the bottom layer of libnemo.
 *
 * What every other layer stands on: a cycle counter calibrated to
 * nanoseconds, a CPU relax hint, futex wrappers, thread pinning and the CPU
 * topology (through hwloc).  Nothing here knows about events or messages.
 *
 * Conventions (all of libnemo): functions return 0 on success or a positive
 * errno-style code; they never set errno as their way of reporting, and they
 * never abort on bad input.
 */
#ifndef NEMO_PLATFORM_H
#define NEMO_PLATFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* nemo's API uses POSIX clocks (clockid_t, CLOCK_MONOTONIC), which a
 * strict ISO C compile (-std=c11) hides unless the program asks for
 * POSIX before its first #include. */
#if !defined(CLOCK_MONOTONIC)
#error "nemo needs POSIX clocks: compile with -std=gnu11 (the default), or put #define _POSIX_C_SOURCE 200809L (or _GNU_SOURCE) before the first #include"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Cycle counter
 *
 * On x86-64 with an invariant TSC (constant rate, not stopped in idle
 * states: CPUID 0x80000007 EDX bit 8) the counter is the TSC, read with
 * rdtsc.  Elsewhere nemo falls back to clock_gettime(CLOCK_MONOTONIC) and a
 * "tick" is one nanosecond.  nemo_clock_init() picks the source and
 * calibrates the TSC against CLOCK_MONOTONIC_RAW; every other clock
 * function calls it on first use, so calling it yourself is only a way to
 * pay the calibration cost (about 20 ms) at a moment of your choosing.
 * ------------------------------------------------------------------------ */

/** Which counter nemo_ticks() reads. */
typedef enum nemo_clock_source {
	NEMO_CLOCK_TSC = 1,           /**< invariant TSC via rdtsc */
	NEMO_CLOCK_GETTIME = 2,       /**< clock_gettime(CLOCK_MONOTONIC), 1 tick = 1 ns */
} nemo_clock_source;

/** What nemo_clock_init() found and measured. */
typedef struct nemo_clock_info {
	nemo_clock_source source;     /**< the counter in use */
	double ticks_per_sec;         /**< calibrated frequency (1e9 for GETTIME) */
	double overhead_ns;           /**< cost of one nemo_ticks() call, median of many */
	double resolution_ns;         /**< smallest non-zero step between two reads */
	bool tsc_invariant;           /**< CPUID says the TSC is invariant */
} nemo_clock_info;

/**
 * Choose the clock source and calibrate it (once per process; thread-safe;
 * later calls return at once).  Honours the environment variable
 * NEMO_CLOCK=gettime to force the fallback.
 * @return 0, or ENOTSUP if no monotonic clock works at all.
 */
int nemo_clock_init(void);

/**
 * Copy the clock description into *out (initialising the clock if needed).
 * @return 0, or EINVAL if out is NULL.
 */
int nemo_clock_get_info(nemo_clock_info *out);

/** Internal: selected source, written once by nemo_clock_init(). Do not use. */
extern int nemo_clock_source__;
/** Internal: nanoseconds per tick, written once by nemo_clock_init(). Do not use. */
extern double nemo_clock_ns_per_tick__;

#if defined(__x86_64__) || defined(__i386__)
/** Raw TSC read with no ordering: cheapest; may execute early or late. */
static inline uint64_t nemo_rdtsc(void)
{
	uint32_t lo, hi;
	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}
#endif

/**
 * Current tick count, unordered (cheap; use for budgets and timeouts).
 * Call nemo_clock_init() once before the first use.
 */
static inline uint64_t nemo_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
	if (nemo_clock_source__ == NEMO_CLOCK_TSC)
		return nemo_rdtsc();
#endif
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/**
 * Tick count taken after every earlier instruction has completed and
 * before any later one starts (lfence; rdtsc; lfence).  Use it to stamp
 * "just before I signal" and "right after I woke" in measurements.
 */
static inline uint64_t nemo_ticks_ordered(void)
{
#if defined(__x86_64__) || defined(__i386__)
	if (nemo_clock_source__ == NEMO_CLOCK_TSC) {
		uint32_t lo, hi;
		__asm__ __volatile__("lfence\n\trdtsc\n\tlfence"
				     : "=a"(lo), "=d"(hi) : : "memory");
		return ((uint64_t)hi << 32) | lo;
	}
#endif
	return nemo_ticks();
}

/** Convert a tick difference to nanoseconds. */
static inline double nemo_ticks_to_ns(int64_t ticks)
{
	return (double)ticks * nemo_clock_ns_per_tick__;
}

/** Convert nanoseconds to ticks (rounded down, never negative; UINT64_MAX
 *  for spans too long to count, e.g. a deadline centuries away). */
static inline uint64_t nemo_ns_to_ticks(double ns)
{
	if (!(ns > 0))
		return 0;
	double t = ns / nemo_clock_ns_per_tick__;
	/* 2^64 as a double: converting anything at or above it is undefined
	 * (x86 yields 0 or 2^63, which made far deadlines expire at once). */
	if (!(t < 18446744073709551616.0))
		return UINT64_MAX;
	return (uint64_t)t;
}

/** Busy-wait for about ns nanoseconds (calibrated clock; no syscall). */
void nemo_spin_ns(double ns);

/* ------------------------------------------------------------------------
 * CPU relax
 * ------------------------------------------------------------------------ */

/** Spin-loop hint: lowers the cost of a poll loop for the sibling thread
 *  and for the memory system (x86 pause). */
static inline void nemo_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

/* ------------------------------------------------------------------------
 * Futex wrappers
 *
 * Thin, checked wrappers over futex(2).  NEMO_FUTEX_PRIVATE is for words
 * that only this process maps (cheaper: no shared hash lookup);
 * NEMO_FUTEX_SHARED for words in memory shared between processes.
 * A refused argument (EINVAL) leaves a text in nemo_last_error()
 * (nemo/nemo.h) naming it; what the kernel answers (EAGAIN, ETIMEDOUT,
 * EINTR, ...) is returned as it is, without one.  The CPU and topology
 * calls below, and nemo_clock_get_info, leave a text for every failure
 * they return.
 * ------------------------------------------------------------------------ */

/** Futex scope flags. */
enum {
	NEMO_FUTEX_PRIVATE = 0,       /**< word is private to this process */
	NEMO_FUTEX_SHARED = 1,        /**< word may be mapped by other processes */
};

/**
 * Sleep while *word == expected, until woken, the timeout passes, or a
 * signal arrives.
 * @param word     4-byte aligned futex word
 * @param expected value the caller last saw
 * @param timeout  relative timeout (CLOCK_MONOTONIC), or NULL for none
 * @param flags    NEMO_FUTEX_PRIVATE or NEMO_FUTEX_SHARED
 * @return 0 when woken (possibly spuriously), EAGAIN if *word != expected
 *         on entry, ETIMEDOUT, EINTR, or EINVAL for a NULL/misaligned word,
 *         an invalid timeout or unknown flags.
 */
int nemo_futex_wait(uint32_t *word, uint32_t expected,
		    const struct timespec *timeout, int flags);

/**
 * Like nemo_futex_wait() but with an absolute deadline on the given clock
 * (CLOCK_MONOTONIC or CLOCK_REALTIME; FUTEX_WAIT_BITSET).
 * @return as nemo_futex_wait(); EINVAL also for another clock.
 */
int nemo_futex_wait_until(uint32_t *word, uint32_t expected, clockid_t clock,
			  const struct timespec *deadline, int flags);

/**
 * nemo_futex_wait_until for waiters that share one word: sleep while
 * *word == expected, waking only for a nemo_futex_wake_bitset whose bits
 * intersect `bits` (FUTEX_WAIT_BITSET).
 * @return as nemo_futex_wait_until; EINVAL also for bits == 0.
 */
int nemo_futex_wait_bitset(uint32_t *word, uint32_t expected, uint32_t bits, clockid_t clock,
			   const struct timespec *deadline, int flags);

/** One word of nemo_futex_wait_any(). */
typedef struct nemo_futex_word {
	uint32_t *word;               /**< 4-byte aligned futex word */
	uint32_t expected;            /**< sleep only while *word == expected */
	int flags;                    /**< NEMO_FUTEX_PRIVATE or NEMO_FUTEX_SHARED */
} nemo_futex_word;

/** The most words one nemo_futex_wait_any() sleeps on. */
#define NEMO_FUTEX_WAIT_ANY_MAX 128

/**
 * Sleep on several words at once (futex_waitv, Linux 5.16): while every
 * words[i].word holds its expected value, until a nemo_futex_wake() on
 * any of them, the deadline, or a signal.  Words may mix private and
 * shared ones: a thread woken by a kicker of this process or by one of
 * another process that maps the word.
 * @param words    n words; each word's expected value is compared under
 *                 the kernel's lock, as nemo_futex_wait() compares one
 * @param n        1 .. NEMO_FUTEX_WAIT_ANY_MAX
 * @param clock    CLOCK_MONOTONIC or CLOCK_REALTIME (of the deadline)
 * @param deadline absolute deadline, or NULL for none
 * @param woken    if not NULL, receives the index of the word whose wake
 *                 ended the sleep (-1 for any other outcome)
 * @return 0 when woken (possibly spuriously), EAGAIN if some word did
 *         not hold its expected value on entry, ETIMEDOUT, EINTR, ENOSYS
 *         on a kernel without futex_waitv, or EINVAL for NULL words, n out
 *         of range, a NULL or misaligned word, unknown flags, another
 *         clock or an invalid deadline.
 */
int nemo_futex_wait_any(const nemo_futex_word *words, unsigned n, clockid_t clock,
			const struct timespec *deadline, int *woken);

/**
 * Wake at most n waiters sleeping on word whose bits intersect `bits`.
 * @return as nemo_futex_wake; EINVAL also for bits == 0.
 */
int nemo_futex_wake_bitset(uint32_t *word, int n, uint32_t bits, int flags, int *woken);

/**
 * Wake at most n waiters sleeping on word.
 * @param woken if not NULL, receives the number of waiters woken
 * @return 0, or EINVAL for a NULL/misaligned word, n < 1 or unknown flags.
 */
int nemo_futex_wake(uint32_t *word, int n, int flags, int *woken);

/* ------------------------------------------------------------------------
 * CPUs and pinning
 * ------------------------------------------------------------------------ */

/** Number of online CPUs (at least 1). */
int nemo_cpu_count(void);

/** CPU the calling thread runs on right now, or -1 if unknown. */
int nemo_cpu_current(void);

/**
 * Pin the calling thread to one CPU.
 * @return 0, EINVAL if cpu is negative or not online, or the error of
 *         sched_setaffinity (EPERM when a cgroup forbids that CPU).
 */
int nemo_pin_self(int cpu);

/**
 * Remove any pinning of the calling thread: allow every online CPU.
 * @return 0 or the error of sched_setaffinity.
 */
int nemo_unpin_self(void);

/** What the CPU says about virtualisation. */
typedef struct nemo_cpu_id {
	char model[128];              /**< model name ("AMD EPYC ...") */
	char hypervisor[16];          /**< hypervisor vendor ("KVM", ...) or "" */
	bool virtualized;             /**< CPUID hypervisor bit is set */
} nemo_cpu_id;

/**
 * Identify the CPU model and hypervisor.
 * @return 0, or EINVAL if out is NULL.
 */
int nemo_cpu_identify(nemo_cpu_id *out);

/* ------------------------------------------------------------------------
 * Topology (hwloc)
 * ------------------------------------------------------------------------ */

/** Opaque topology snapshot. */
typedef struct nemo_topo nemo_topo;

/** Where one CPU sits; hwloc logical indexes, -1 where unknown. */
typedef struct nemo_cpu_place {
	int cpu;                      /**< OS CPU number */
	int core;                     /**< core (SMT siblings share it) */
	int package;                  /**< socket */
	int numa;                     /**< NUMA node */
	int l2;                       /**< L2 cache instance */
	int l3;                       /**< L3 cache instance */
	int smt_siblings;             /**< hardware threads on this core (>= 1) */
} nemo_cpu_place;

/**
 * Discover the machine's topology (hwloc).
 * @return 0 with *out set, EINVAL if out is NULL, ENOMEM, or EIO if hwloc
 *         could not load the topology.
 */
int nemo_topo_load(nemo_topo **out);

/** Free a topology from nemo_topo_load() (NULL is accepted). */
void nemo_topo_free(nemo_topo *topo);

/** Number of CPUs (processing units) in the topology. */
int nemo_topo_cpus(const nemo_topo *topo);

/**
 * Describe the i-th CPU of the topology (0 <= i < nemo_topo_cpus()).
 * @return 0, or EINVAL for a NULL argument or i out of range.
 */
int nemo_topo_cpu(const nemo_topo *topo, int i, nemo_cpu_place *out);

/**
 * Distance class between two OS CPUs: 0 same CPU, 1 SMT siblings,
 * 2 share an L2, 3 share an L3, 4 same package, 5 same NUMA node, 6 apart.
 * @return 0 with *out set, EINVAL for unknown CPUs or NULL arguments.
 */
int nemo_topo_distance(const nemo_topo *topo, int cpu_a, int cpu_b, int *out);

/* ------------------------------------------------ version and errors */

/** Version of the library actually linked ("MAJOR.MINOR.PATCH"), which
 *  may differ from NEMO_VERSION_STRING seen at compile time. */
const char *nemo_version(void);

/**
 * Text for a code returned by a nemo function (0 or a positive errno
 * value); never NULL, thread-safe.
 */
const char *nemo_strerror(int code);

/**
 * Why the calling thread's last failed nemo call failed, in words: the
 * call, what was wrong (which argument, which state) and the code, e.g.
 * "nemo_am_sendv: action 7 has no handler in this domain (ENOENT)".
 * "" if no call of this thread has failed with such a text yet; a later
 * failure replaces it, a success leaves it.  Thread-local; never NULL.
 * With the environment variable NEMO_DEBUG=1, every such failure is also
 * written to stderr as it happens ("nemo: ..."), which finds the failing
 * call in a program that drops the code.  Covered: domains, places,
 * notifications and active messages (argument and state errors, and
 * ESRCH for a place that is not there); wait policies, waiter slots,
 * events and condition variables (nemo_cond, so also pthread_cond_*
 * under the interposer); and the platform calls' refused arguments
 * (futex wrappers, pinning, topology, clock).  Outcomes are not failures
 * and leave it alone: ETIMEDOUT from a timed wait, EAGAIN from a try-wait
 * or under NEMO_NONBLOCK, and the futex wrappers' EAGAIN and EINTR.
 */
const char *nemo_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* NEMO_PLATFORM_H */
