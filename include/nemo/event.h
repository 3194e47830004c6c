/*
 * nemo/event.h - events: nemo_event (an eventcount-style flag) and
 * nemo_cond (a drop-in for pthread_cond_t).
 *
 * Both wait through the waiter layer (nemo/waiter.h): they poll for the
 * policy's budget, then sleep; a post or signal issues a FUTEX_WAKE only
 * when someone sleeps.
 *
 * Errors: every call returns 0 or a positive errno code (errno itself is
 * never changed).  When it refuses - a NULL or uninitialised object, an
 * unknown flag or policy kind, a malformed deadline, a destroy while
 * threads wait, a mutex it cannot unlock - nemo_last_error() (nemo/nemo.h)
 * says which argument, which value or which state, in words, for the
 * calling thread ("nemo_cond_destroy: 2 waiters are still queued (nothing
 * changed: c stays usable) (EBUSY)"), and NEMO_DEBUG=1 writes the same line
 * to stderr; under the interposer that includes the program's own
 * pthread_cond_* calls.  ETIMEDOUT from a timed wait and EAGAIN from
 * nemo_event_trywait are outcomes, not failures: they leave the text
 * alone, as does every success.
 */
#ifndef NEMO_EVENT_H
#define NEMO_EVENT_H

#include <nemo/waiter.h>

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * nemo_event
 *
 * A flag that threads wait for.  Auto-reset: each wait consumes the flag,
 * so one post releases one waiter (posts to a set event coalesce, as with
 * a Win32 event: an event is a state, not a count).  Manual-reset: a post
 * releases every waiter, and waits return at once until reset.
 *
 * The whole event is one 32-bit futex word (set bit + count of sleepers),
 * so a post is one atomic RMW on the waiters' cache line, plus a
 * FUTEX_WAKE only when a waiter sleeps.  Layout is private; the size is
 * part of the ABI so events can be embedded.
 * ------------------------------------------------------------------------ */

/** An event (16 bytes; initialise with nemo_event_init). */
typedef struct nemo_event {
	uint32_t opaque__[4];
} nemo_event;

/** nemo_event_init() flags. */
enum {
	NEMO_EVENT_AUTO_RESET = 0,    /**< a wait consumes the post (default) */
	NEMO_EVENT_MANUAL_RESET = 1,  /**< a post releases all until nemo_event_reset */
	NEMO_EVENT_INITIALLY_SET = 2, /**< start in the set state */
};

/**
 * Initialise an event.
 * @param policy how waiters wait (NULL: NEMO_WAIT_DEFAULT, resolved at
 *               each wait from the thread's policy or NEMO_WAIT)
 * @return 0, or EINVAL for NULL e, unknown flags or a bad policy kind.
 */
int nemo_event_init(nemo_event *e, unsigned flags, const nemo_wait_policy *policy);

/**
 * Destroy an event.
 * @return 0, EBUSY if a thread sleeps on it (it stays usable; the text
 *         gives how many), EINVAL if not initialised.
 */
int nemo_event_destroy(nemo_event *e);

/**
 * Set the event, waking a sleeping waiter (auto-reset) or all of them
 * (manual-reset).  Never blocks; makes no syscall unless a waiter sleeps.
 * Everything the caller wrote before is visible to the waiter it releases.
 * @return 0, or EINVAL if e is not an initialised event.
 */
int nemo_event_post(nemo_event *e);

/**
 * Wait until the event is set (and consume it, if auto-reset).
 * @return 0, or EINVAL if e is not an initialised event.
 */
int nemo_event_wait(nemo_event *e);

/**
 * Like nemo_event_wait with an absolute deadline on clock
 * (CLOCK_MONOTONIC or CLOCK_REALTIME).
 * @return 0, ETIMEDOUT (no text), or EINVAL (bad event, clock or abstime;
 *         nemo_last_error() says which).
 */
int nemo_event_timedwait(nemo_event *e, clockid_t clock, const struct timespec *abstime);

/**
 * Take the event if it is set, without waiting.
 * @return 0 if it was set (now consumed, if auto-reset), EAGAIN if not
 *         (no text: an outcome), EINVAL if e is not an initialised event.
 */
int nemo_event_trywait(nemo_event *e);

/**
 * Clear the event.
 * @return 0, or EINVAL if e is not an initialised event.
 */
int nemo_event_reset(nemo_event *e);

/* ------------------------------------------------------------------------
 * nemo_cond - the semantics of pthread_cond_t, so code can switch by
 * renaming (and LD_PRELOAD=libnemo-preload.so switches it without that).
 *
 *  - An all-zero nemo_cond is a valid, initialised condition variable
 *    (NEMO_COND_INITIALIZER), like PTHREAD_COND_INITIALIZER.
 *  - Waits use a pthread_mutex_t; spurious wake-ups are possible, lost
 *    wake-ups are not.  A wait is a cancellation point: a cancelled waiter
 *    re-acquires the mutex before its cleanup handlers run, and passes on
 *    a signal it had consumed.
 *  - Each waiter parks on its own slot (nemo_waiter), so a signal wakes
 *    exactly the thread it dequeued, with no syscall if it polls.
 *  - Broadcast releases every waiter by one store each (pollers need
 *    nothing more), then wakes all the sleepers among them with one
 *    FUTEX_WAKE_BITSET (none if every waiter polls).  A tree over CPU
 *    groups is available on request (nemo_cond_set_fanout); measured on
 *    16 cores it lost to the single wake (docs/events.md).
 *  - Kick mode (Nemo's "condvar + IPI"): a thread that waits in kick mode
 *    runs at the lowest real-time priority (SCHED_FIFO 1) from its first
 *    such wait until its next wait that is not in kick mode, so its
 *    wake-up preempts a busy normal thread on its CPU at once.  Meant for
 *    threads that act as a runtime's logical processors; a kick-mode
 *    waiter should not spin for long (use policy block or a small hybrid
 *    budget).  Where real-time priority is not permitted, a plain wait.
 *  - Process-shared condition variables are not supported by nemo_cond
 *    (ENOTSUP); the interposer hands them to glibc.
 * ------------------------------------------------------------------------ */

/** A condition variable: 48 bytes, the size of pthread_cond_t. */
typedef struct nemo_cond {
	uint64_t opaque__[6];
} nemo_cond;

/** Static initialiser (all zeroes): default policy, no kick, flat broadcast. */
#define NEMO_COND_INITIALIZER { { 0, 0, 0, 0, 0, 0 } }

/** Largest broadcast fan-out. */
#define NEMO_COND_MAX_FANOUT 16

/**
 * Initialise a condition variable.
 * @param attr NULL, or attributes whose clock (CLOCK_REALTIME or
 *             CLOCK_MONOTONIC) is used by nemo_cond_timedwait.
 * @return 0, EINVAL for NULL c, ENOTSUP for PTHREAD_PROCESS_SHARED.
 */
int nemo_cond_init(nemo_cond *c, const pthread_condattr_t *attr);

/**
 * Destroy a condition variable.  As POSIX allows, this may be called as
 * soon as no thread is blocked on c - e.g. right after a broadcast, or by
 * a waiter that was just woken - and c's memory may be freed when it
 * returns: destroy first waits (briefly) until every woken waiter has
 * stopped touching c, as glibc's does.  Signals and broadcasts on c must
 * have returned before (POSIX).
 * @return 0, EBUSY at once while a thread is still blocked on c (nothing
 *         changes; c stays usable; the text gives how many), EINVAL for
 *         NULL c.
 */
int nemo_cond_destroy(nemo_cond *c);

/**
 * Set the wait policy of c's waiters (NULL: NEMO_WAIT_DEFAULT).
 * @return 0, or EINVAL for NULL c or a bad kind.
 */
int nemo_cond_set_policy(nemo_cond *c, const nemo_wait_policy *policy);

/**
 * Turn kick mode on or off (see above).
 * @return 0, or EINVAL for NULL c.
 */
int nemo_cond_set_kick(nemo_cond *c, bool on);

/**
 * Broadcast in a tree over CPU groups with this fan-out
 * (1..NEMO_COND_MAX_FANOUT) whenever the waiters sit on more CPUs than
 * that: the broadcaster wakes `fanout` groups and each group's first
 * waiter, once awake, wakes its own child groups.  Off by default (one
 * wake of all sleepers is faster on the machines measured so far);
 * 0 turns it off again.
 * @return 0, or EINVAL for NULL c or an out-of-range fan-out.
 */
int nemo_cond_set_fanout(nemo_cond *c, int fanout);

/**
 * Atomically release m and wait for a signal, then re-acquire m.
 * @return 0 (possibly spuriously), the error of pthread_mutex_unlock (e.g.
 *         EPERM for an error-checking mutex the caller does not own; nothing
 *         waited), the error of re-locking m after the wait (e.g. EOWNERDEAD
 *         for a robust mutex: m is held), ENOMEM if the thread's slot cannot
 *         be allocated, or EINVAL for NULL c/m; nemo_last_error() says which.
 */
int nemo_cond_wait(nemo_cond *c, pthread_mutex_t *m);

/**
 * nemo_cond_wait with an absolute deadline on c's clock.  A deadline in
 * the past (a negative tv_sec included) times out at once, with m held
 * again; one too far away to represent (C++'s time_point::max(),
 * {LONG_MAX, 0}) waits like no deadline.  errno is never changed.
 * @return as nemo_cond_wait, ETIMEDOUT (no text: an outcome), or EINVAL
 *         for a tv_nsec outside 0..999999999 or a NULL abstime.
 */
int nemo_cond_timedwait(nemo_cond *c, pthread_mutex_t *m, const struct timespec *abstime);

/**
 * nemo_cond_wait with an absolute deadline on the given clock (as
 * pthread_cond_clockwait).
 * @return as nemo_cond_timedwait; EINVAL for a clock other than
 *         CLOCK_MONOTONIC or CLOCK_REALTIME.
 */
int nemo_cond_clockwait(nemo_cond *c, pthread_mutex_t *m, clockid_t clock,
			const struct timespec *abstime);

/**
 * Wake the longest-waiting waiter, if any.
 * @return 0, or EINVAL for NULL c.
 */
int nemo_cond_signal(nemo_cond *c);

/**
 * Wake every waiter (see above).
 * @return 0, or EINVAL for NULL c.
 */
int nemo_cond_broadcast(nemo_cond *c);

#ifdef __cplusplus
}
#endif

#endif /* NEMO_EVENT_H */
