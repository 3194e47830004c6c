/*
 * nemo/poll.h - polling strategies: checks cheap enough to put anywhere.
 *
 * A place that computes handles its messages only where it polls (nemo/
 * domain.h, "Where messages are handled").  Polling often delays nothing
 * but costs a scan of the place's queues each time; polling rarely is
 * cheap but delays messages.  Perkovic & Keleher's answer ("Responsiveness
 * without Interrupts"), kept here: a
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

#include <nemo/domain.h>
#include <nemo/platform.h>

#include <stdbool.h>

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

/* ------------------------------------------------------------------------
 * The progress thread
 *
 * What MPI calls asynchronous progress: one thread per domain that
 * handles the messages of the places that ask for it
 * (nemo_place_set_progress), while those places compute and never poll.
 * Their handlers then run on the progress thread (msg->context is
 * NEMO_AM_CTX_PROGRESS; msg->place_ctx is still the place's context), one
 * at a time per place and never at the same time as one of that place's
 * own nemo calls: a served place's nemo calls and the progress thread's
 * drains exclude each other with a per-place lock (an uncontended
 * lock/unlock per nemo call while it is served).  A handler's sends go
 * out as the place it runs for.
 *
 * It runs at the normal priority: woken while every CPU computes, it
 * waits for the scheduler's next preemption point (milliseconds on a busy
 * machine: give it a CPU of its own, nemo_progress_pin, where latency
 * matters).  It polls before it sleeps, so a real-time priority would let
 * it starve the CPU it polls on (tried: the kernel's real-time throttling
 * then stalled the served places for up to a second).
 *
 * When nothing is queued to any served place it waits as any nemo wait
 * does (its policy: poll for its budget, then sleep in the kernel), and a
 * sender that finds a served place running kicks the progress thread
 * instead (src/messaging/kick.c): an idle domain burns no core.
 * ------------------------------------------------------------------------ */

/** A domain's progress thread (opaque). */
typedef struct nemo_progress nemo_progress;

/** Progress thread parameters; zero fields take the defaults. */
typedef struct nemo_progress_attr {
	int cpu;                      /**< pin it to this CPU; -1 (or cpu 0 with
	                                   pin 0): not pinned */
	int pin;                      /**< nonzero: pin to cpu */
	nemo_wait_policy policy;      /**< how it waits when idle (kind 0: adaptive) */
} nemo_progress_attr;

/**
 * Start domain d's progress thread (at most one per domain).  A domain
 * bound to MPI with NEMO_MPI_PROGRESS_THREAD or _WATCHDOG (nemo/mpi.h) is
 * served by the same thread: if the binding started it, this call returns that
 * thread (its policy stays the binding's; attr's pin applies), and it
 * runs until both nemo_progress_stop and nemo_mpi_finalize have run.
 * @return 0 with *out set; EINVAL for NULL arguments, a bad CPU or policy;
 *         EEXIST if d has one already (started by this call before);
 *         EIDRM; the error of pthread_create.
 */
int nemo_progress_start(nemo_domain *d, const nemo_progress_attr *attr, nemo_progress **out);

/**
 * Stop the progress thread and free it.  Places it served are served by
 * their own threads again from their next nemo call (their setting is
 * kept: nemo_progress_start again resumes it).  While an MPI binding of
 * the domain uses the thread (THREAD or WATCHDOG), the thread goes
 * on for the binding - and for the served places - until its finalize;
 * p must not be used after this call either way.  A handler the
 * progress thread runs cannot stop it (the thread would wait for itself):
 * that call fails with EDEADLK and changes nothing.
 * @return 0; EINVAL for NULL; EDEADLK on the progress thread itself.
 */
int nemo_progress_stop(nemo_progress *p);

/**
 * Pin the running progress thread to cpu (-1: undo the pinning).
 * @return 0; EINVAL for NULL or a CPU not available to the process.
 */
int nemo_progress_pin(nemo_progress *p, int cpu);

/** What a progress thread has done. */
typedef struct nemo_progress_counters {
	uint64_t drains;              /**< places drained that had something */
	uint64_t handled;             /**< handlers run */
	uint64_t sleeps;              /**< times it slept in the kernel */
	uint64_t cpu_ns;              /**< CPU time the progress thread has used */
	bool realtime;                /**< always false: a thread that polls must not run
	                                   at a real-time priority (it would starve the CPU
	                                   it polls on until the kernel throttles it) */
} nemo_progress_counters;

/** @return 0; EINVAL for NULL arguments. */
int nemo_progress_get_counters(nemo_progress *p, nemo_progress_counters *out);

/**
 * The calling place asks (on = true) the domain's progress thread to
 * handle its messages, or stops asking.  Allowed with or without a
 * progress thread running (the setting waits for one).  Turning it off
 * waits until the progress thread has finished with the place.
 * @return 0; ENOTCONN; EBUSY from inside a handler or with interrupt mode
 *         on (the two are exclusive: turn interrupts off first).
 */
int nemo_place_set_progress(bool on);

/* ------------------------------------------------------------------------
 * The polling watchdog
 *
 * Perkovic & Keleher's watchdog: a place in interrupt mode is interrupted
 * only when a message has waited for it longer than T; a message it
 * handles in time (at a poll, a threshold check, a wait) costs no signal.
 * One watchdog thread per domain watches the places that set a T
 * (nemo_place_set_watchdog).  A sender that finds such a place running
 * starts the place's clock instead of signalling it; any drain of the
 * place stops it; the watchdog signals the place when its clock passes T.
 *
 * Cost: while nothing is waiting the watchdog sleeps in the kernel with no
 * timer (an idle machine stays idle).  The first sender that starts a
 * clock while the watchdog sleeps wakes it (one FUTEX_WAKE, about 2 us of
 * that sender's time); while clocks run it sleeps until the earliest
 * deadline (timer slack 1 ns), so a message handled in time costs no
 * signal, no syscall for its sender, and the watchdog one wake-up per T
 * at most.  The interrupt itself costs what interrupt mode costs (a
 * tgkill and a signal handler, several microseconds).
 * ------------------------------------------------------------------------ */

/** A domain's polling watchdog (opaque). */
typedef struct nemo_watchdog nemo_watchdog;

/** Largest T: 1 s. */
#define NEMO_WATCHDOG_T_MAX_NS 1000000000ull

/**
 * Start domain d's watchdog (at most one per domain).
 * @return 0 with *out set; EINVAL for NULL; EEXIST if d has one; EIDRM;
 *         the error of pthread_create.
 */
int nemo_watchdog_start(nemo_domain *d, nemo_watchdog **out);

/** Stop and free it; places with a T are signalled at once again.
 *  @return 0; EINVAL for NULL. */
int nemo_watchdog_stop(nemo_watchdog *w);

/** What a watchdog has done. */
typedef struct nemo_watchdog_counters {
	uint64_t fired;               /**< places signalled because a message waited past T */
	uint64_t wakeups;             /**< times it woke (to check a deadline, or kicked) */
	uint64_t sleeps;              /**< times it slept with nothing waiting (no timer) */
	uint64_t cpu_ns;              /**< CPU time the watchdog thread has used */
	uint64_t spin_ns;             /**< of which spinning to deadlines (it wakes a little
	                                   before each, to fire on time) */
	uint64_t early_ns;            /**< how long before a deadline it wakes now: learned from
	                                   its own wake-ups' lateness, 10-30 us (src/poll/watchdog.c,
	                                   "HOW EARLY TO WAKE") */
	bool realtime;                /**< it runs at SCHED_FIFO priority 1, granted to root,
	                                   CAP_SYS_NICE or RLIMIT_RTPRIO >= 1: woken while every
	                                   CPU computes, it fires at once instead of at the
	                                   scheduler's next preemption point; it never polls */
	uint64_t late;                /**< firings NEMO_WATCHDOG_LATE_NS or more after their
	                                   deadline (T after the clock started): the watchdog's
	                                   own wake-up came later than `early_ns` allowed for */
	uint64_t late_max_ns;         /**< the latest firing's lateness after its deadline */
} nemo_watchdog_counters;

/** The lateness from which a firing counts in nemo_watchdog_counters.late. */
#define NEMO_WATCHDOG_LATE_NS 5000u

/** @return 0; EINVAL for NULL arguments. */
int nemo_watchdog_get_counters(nemo_watchdog *w, nemo_watchdog_counters *out);

/**
 * Put the calling place under the domain's watchdog with T = t_ns (0:
 * off - an interrupt-mode place is signalled at once, as without a
 * watchdog).  It matters only while interrupt mode is on and a watchdog
 * runs; without one, senders signal at once.
 * @return 0; ENOTCONN; EINVAL for t_ns above NEMO_WATCHDOG_T_MAX_NS.
 */
int nemo_place_set_watchdog(uint64_t t_ns);

/* ------------------------------------------------------------------------
 * Notification delays
 *
 * In a domain created with NEMO_DOMAIN_DELAYS (nemo/domain.h), every
 * active message's delay - from its enqueue to the start of its handler -
 * is added to its receiving place's histogram: Perkovic & Keleher's
 * measure of what a polling strategy costs the messages.  Notifications
 * (nemo_notify) are not measured.
 * ------------------------------------------------------------------------ */

/** Histogram buckets: bucket k counts delays of [2^k, 2^(k+1)) ns (bucket
 *  0 also 0 ns; the last everything from 2^47 ns up). */
#define NEMO_DELAY_BUCKETS 48

/** A place's notification delays since it joined. */
typedef struct nemo_delay_stats {
	uint64_t count;               /**< messages measured */
	uint64_t sum_ns;              /**< total delay */
	uint64_t max_ns;              /**< longest */
	uint64_t buckets[NEMO_DELAY_BUCKETS];
} nemo_delay_stats;

/**
 * A snapshot of place id's delays (any thread).
 * @return 0; EINVAL; EIDRM; ENOTSUP if d was created without
 *         NEMO_DOMAIN_DELAYS; ESRCH if id is not a place of d.
 */
int nemo_place_delays(nemo_domain *d, nemo_place_id id, nemo_delay_stats *out);

/**
 * The q-quantile (0..1) of s, as the upper edge of its bucket (within a
 * factor of 2 below; never above max_ns).
 * @return 0; EINVAL; ENOENT if s is empty.
 */
int nemo_delay_percentile(const nemo_delay_stats *s, double q, uint64_t *ns);

#ifdef __cplusplus
}
#endif

#endif /* NEMO_POLL_H */
