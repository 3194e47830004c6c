/*
 * nemo/poll.h - polling strategies: checks cheap enough to put anywhere.
 *
 * A place that computes handles its messages only where it polls (nemo/
 * domain.h, "Where messages are handled").  Polling often delays nothing
 * but costs a scan of the place's queues each time; polling rarely is
 * cheap but delays messages.  Perkovic & Keleher's answer, kept here: a
 * threshold check that reads the cycle counter and polls only when the
 * place's threshold has passed since its last poll.  Not due, it is a
 * handful of instructions (docs/polling.md has the callgrind count), so
 * it can go at every function entry or in every outer loop:
 *
 *   - in loops ("heur-t"): put NEMO_POLL_CHECK() in the loops that run
 *     long - the outermost loop whose one iteration takes about the
 *     threshold or less, so that no stretch of code runs much longer
 *     than the threshold without a check;
 *   - at function entry ("func-t"): compile the code with
 *     -finstrument-functions and link libnemo-instrument (pkg-config
 *     nemo-instrument), which makes every function entry a
 *     NEMO_POLL_CHECK() - no binary rewriting, no code changes.
 *
 * A check that is due runs nemo_poll(): the place's handlers run right
 * there, on the thread's own stack, as in any nemo_poll (so a check must
 * not be placed where a handler may not run: inside a handler's own
 * critical section, or holding a lock a handler takes).  In a thread that
 * is not a place the check never polls (its deadline is "never").
 */
#ifndef NEMO_POLL_H
#define NEMO_POLL_H

#include <nemo/platform.h>

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The threshold a place starts with: 5 us (the paper's 5000 cycles at
 *  1 GHz; about 10-15k cycles of a current core). */
#define NEMO_POLL_THRESHOLD_DEFAULT_NS 5000u

/**
 * Set the calling place's polling threshold: NEMO_POLL_CHECK() polls
 * when at least ns nanoseconds have passed since its last poll by a
 * check (0: every check polls).  Takes effect from the next check.
 * @return 0; ENOTCONN if the thread is not a place; EINVAL for ns above
 *         10 s (a threshold that long is no polling at all).
 */
int nemo_poll_threshold_set(uint64_t ns);

/**
 * The calling place's threshold in nanoseconds.
 * @return 0 with *ns set; ENOTCONN; EINVAL for NULL.
 */
int nemo_poll_threshold_get(uint64_t *ns);

/** Checks that polled, and the handlers they ran, on the calling place
 *  (since it joined).  @return 0; ENOTCONN; EINVAL for NULL. */
int nemo_poll_check_counters(uint64_t *polls, uint64_t *handled);

/** Internal: the tick at which the calling thread's next check polls
 *  (UINT64_MAX: never, outside a place; 0: decide in the slow path).
 *  Read by NEMO_POLL_CHECK; do not use. */
extern __thread uint64_t nemo__poll_due __attribute__((tls_model("initial-exec")));

/** Internal: the due path of NEMO_POLL_CHECK (polls, sets the next due
 *  tick).  Do not call. */
void nemo__poll_check_due(void);

/**
 * The threshold check: polls the calling place if its threshold has
 * passed since the last such poll; otherwise a cycle-counter read, a
 * thread-local load, a compare and a branch.
 */
#if defined(__x86_64__) || defined(__i386__)
#define NEMO_POLL_CHECK()                                                        \
	do {                                                                     \
		if (__builtin_expect(nemo_rdtsc() >= nemo__poll_due, 0))         \
			nemo__poll_check_due();                                  \
	} while (0)
#else
#define NEMO_POLL_CHECK()                                                        \
	do {                                                                     \
		if (__builtin_expect(nemo_ticks() >= nemo__poll_due, 0))         \
			nemo__poll_check_due();                                  \
	} while (0)
#endif

#ifdef __cplusplus
}
#endif

#endif /* NEMO_POLL_H */
