/*
 * nemo/waiter.h - parking slots with a published state, the kick, and wait
 * policies.
 *
 * This layer decides two things, each in one place:
 *
 *   - whether to kick (nemo_waiter_kick, src/waiter/waiter.c).  A waiter
 *     publishes what it is doing: RUNNING, POLLING (it watches memory) or
 *     SLEEPING (it is in, or about to enter, futex_wait on its slot).  A
 *     kick does the least that works: nothing unless the target sleeps, and
 *     then one FUTEX_WAKE.  The store the poller watches is the
 *     notification.
 *
 *   - whether to sleep, and when (nemo__wait_loop, src/waiter/wait.c):
 *     the policy gives a spin budget in nanoseconds; past it, the waiter
 *     publishes SLEEPING, re-checks, and sleeps.
 *
 * The handshake that makes "no wake is ever lost" true is written out at
 * the top of src/waiter/waiter.c and checked by models/slot.pml (spin).
 *
 * Policies (nemo_wait_policy), per object, per thread, or by environment:
 *
 *   NEMO_WAIT=spin          never sleep (yields the CPU after 1 ms of spinning
 *                           so oversubscribed threads still make progress)
 *   NEMO_WAIT=block         sleep at once
 *   NEMO_WAIT=hybrid[:NS]   spin NS nanoseconds (default 20000), then sleep
 *   NEMO_WAIT=adaptive      the default: poll in a tight loop for at most
 *                           what blocking costs, C (learned from this
 *                           process's own sleeps), then sleep; an eighth of
 *                           that while recent waits outlasted it or the
 *                           spinner was preempted.  A place pinned to a CPU
 *                           that no other place of its domain is pinned to
 *                           polls its waits (nemo_place_wait) for 4C: that
 *                           CPU has nothing else to run meanwhile
 *
 * The adaptive policy needs no set-up: it learns the cost of blocking
 * from the wake-ups that really happen (the kicker stamps, the woken
 * sleeper measures), starting from 16 us, or from the profile that
 * `nemo-bench calibrate` writes ($NEMO_PROFILE, else
 * $XDG_CACHE_HOME/nemo/profile, else ~/.cache/nemo/profile) if there is
 * one.  docs/events.md has the rule, its bound and its failure cases.
 *
 * Errors: every call below returns 0 or a positive errno code.  When it
 * refuses - a NULL or malformed argument, an unknown kind, a profile it
 * cannot write - nemo_last_error() (nemo/nemo.h) says which argument and
 * which value, in words, for the calling thread ("nemo_wait_policy_parse:
 * unknown policy 'spinn' (spin, block, hybrid, hybrid:NS, adaptive)
 * (EINVAL)"), and NEMO_DEBUG=1 writes the same line to stderr.  ETIMEDOUT
 * from a wait is an outcome, not a failure: it leaves the text alone.
 */
#ifndef NEMO_WAITER_H
#define NEMO_WAITER_H

#include <nemo/platform.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Wait policies
 * ------------------------------------------------------------------------ */

/** How a waiter spends the time until its condition holds. */
typedef enum nemo_wait_kind {
	NEMO_WAIT_DEFAULT = 0,        /**< the thread's policy, else NEMO_WAIT, else adaptive */
	NEMO_WAIT_SPIN = 1,           /**< poll until the condition holds */
	NEMO_WAIT_BLOCK = 2,          /**< sleep in the kernel at once */
	NEMO_WAIT_HYBRID = 3,         /**< poll spin_ns nanoseconds, then sleep */
	NEMO_WAIT_ADAPTIVE = 4,       /**< poll a calibrated, history-adjusted budget, then sleep */
} nemo_wait_kind;

/** A wait policy: a kind and, for HYBRID, the spin budget. */
typedef struct nemo_wait_policy {
	nemo_wait_kind kind;
	uint32_t spin_ns;             /**< HYBRID budget in ns (0: 20000); ignored otherwise */
} nemo_wait_policy;

/** Default spin budget of NEMO_WAIT_HYBRID, in ns. */
#define NEMO_WAIT_HYBRID_DEFAULT_NS 20000u

/**
 * Parse "spin", "block", "hybrid", "hybrid:NS" or "adaptive".
 * @return 0, or EINVAL (out unchanged) for anything else, a budget of 0
 *         or above 1 s, or NULL arguments; nemo_last_error() quotes the
 *         text it could not read.
 */
int nemo_wait_policy_parse(const char *text, nemo_wait_policy *out);

/**
 * Write a policy in the form nemo_wait_policy_parse() reads.
 * @return 0, EINVAL for NULL/unknown kind, ERANGE if len is too small
 *         (nemo_last_error() gives the length needed).
 */
int nemo_wait_policy_format(const nemo_wait_policy *p, char *buf, size_t len);

/**
 * Resolve NEMO_WAIT_DEFAULT: the calling thread's policy if set, else the
 * environment variable NEMO_WAIT (read once per process; an unparsable
 * value is ignored with one message on stderr), else adaptive.  Any other
 * kind is copied unchanged.
 * @return 0, or EINVAL for NULL arguments or an unknown kind.
 */
int nemo_wait_policy_resolve(const nemo_wait_policy *p, nemo_wait_policy *out);

/**
 * Set the calling thread's policy, used where an object asks for
 * NEMO_WAIT_DEFAULT.  NULL or kind NEMO_WAIT_DEFAULT clears it.
 * @return 0, or EINVAL for an unknown kind.
 */
int nemo_wait_set_thread_policy(const nemo_wait_policy *p);

/** What the adaptive policy knows about the cost of blocking, now. */
typedef struct nemo_wait_calibration {
	double block_wake_ns;         /**< wake-up latency of a sleeper (learned moving average) */
	double block_cpu_ns;          /**< CPU time of a sleep + wake-up (both sides' syscalls) */
	double budget_ns;             /**< the full adaptive spin budget: their sum */
	const char *source;           /**< "learned" once a sleep was measured in this process,
	                                   else where the start value came from: "profile"
	                                   or "default" */
	uint32_t samples;             /**< wake-ups measured so far (saturating) */
} nemo_wait_calibration;

/**
 * The adaptive policy's current estimate (reads the profile, if any, on
 * first use; never measures, never creates threads).
 * @return 0, or EINVAL for NULL.
 */
int nemo_wait_get_calibration(nemo_wait_calibration *out);

/**
 * Measure what blocking costs now, without installing it (nemo-bench
 * calibrate uses it to write a profile): two new threads
 * (a waker pinned to cpu_a, a sleeper to cpu_b; either negative: the first
 * two CPUs this process may use), `rounds` futex wake-ups of a sleeper.
 * @param wake_ns receives the median one-way wake latency
 * @param cpu_ns  if not NULL, receives the sleeper's CPU time per round
 * @return 0, EINVAL for rounds < 10, NULL wake_ns or CPUs out of range,
 *         ENOMEM, or the error of pthread_create (nemo_last_error() says
 *         which).
 */
int nemo_wait_measure(int rounds, int cpu_a, int cpu_b, double *wake_ns, double *cpu_ns);

/**
 * Write a profile file: the start value of later processes' adaptive
 * policy, before they have measured sleeps of their own.  path NULL:
 * the default location (creating its folder).
 * @return 0, EINVAL for a non-positive latency or negative CPU time,
 *         ENOENT/ERANGE if path is NULL and no default path can be formed
 *         (as nemo_wait_profile_path), or the error of the write
 *         (nemo_last_error() names the file).
 */
int nemo_wait_profile_write(const char *path, double block_wake_ns, double block_cpu_ns);

/**
 * The profile path in force: $NEMO_PROFILE, $XDG_CACHE_HOME/nemo/profile
 * or $HOME/.cache/nemo/profile.
 * @return 0, ENOENT if none can be formed, ERANGE if len is too small.
 */
int nemo_wait_profile_path(char *buf, size_t len);

/* ------------------------------------------------------------------------
 * Parking slots
 * ------------------------------------------------------------------------ */

/** One thread's parking slot (opaque). */
typedef struct nemo_waiter nemo_waiter;

/** Published states of a waiter. */
typedef enum nemo_waiter_state {
	NEMO_WAITER_RUNNING = 0,      /**< not waiting */
	NEMO_WAITER_POLLING = 1,      /**< waiting, watching memory: needs no kick */
	NEMO_WAITER_SLEEPING = 2,     /**< waiting in the kernel: a kick must FUTEX_WAKE */
} nemo_waiter_state;

/**
 * The calling thread's slot, created on first use and recycled when the
 * thread exits.  Slot memory is never returned to the system, so a late
 * kick to a slot whose thread has gone is harmless (a spurious wake-up of
 * whoever owns it next).
 * @return the slot, or NULL if memory for it could not be allocated
 *         (nemo_last_error() then says so, with ENOMEM).
 */
nemo_waiter *nemo_waiter_self(void);

/** The state w has published (a snapshot). */
nemo_waiter_state nemo_waiter_get_state(const nemo_waiter *w);

/**
 * Arm w for one wait: clear its token.  Only w's own thread calls it,
 * before it makes itself findable by kickers (e.g. before enqueueing w).
 * @return 0, or EINVAL for NULL.
 */
int nemo_waiter_arm(nemo_waiter *w);

/**
 * Release w: set its token, then kick it if (and only if) it sleeps.
 * Anything the caller wrote before is visible to w once its wait returns.
 * @return 0, or EINVAL for NULL.
 */
int nemo_waiter_release(nemo_waiter *w);

/**
 * Make sure w re-checks its condition now: after the caller has changed
 * what w waits for, issue a FUTEX_WAKE if w sleeps, nothing otherwise.
 * Contains the full fence that orders the caller's earlier stores before
 * its read of w's state (see the essay in src/waiter/waiter.c).
 * @return 0, or EINVAL for NULL.
 */
int nemo_waiter_kick(nemo_waiter *w);

/**
 * Wait until w's token is set (by nemo_waiter_release) or the deadline
 * passes, under policy p (NULL: the default policy).
 * @param clock   CLOCK_MONOTONIC or CLOCK_REALTIME, for abstime
 * @param abstime absolute deadline, or NULL for none.  A deadline in the
 *                past (negative tv_sec included) times out at once; one
 *                too far away to count in ticks (centuries) is no
 *                deadline.  Every waiting call of nemo takes deadlines so.
 * @return 0 once released, ETIMEDOUT (no text: an outcome), or EINVAL
 *         for a NULL w, a tv_nsec outside 0..999999999, another clock, or
 *         (found only when the wait does not return at once) a policy of
 *         unknown kind; nemo_last_error() says which.
 */
int nemo_waiter_wait(nemo_waiter *w, const nemo_wait_policy *p, clockid_t clock,
		     const struct timespec *abstime);

/* ------------------------------------------------------------------------
 * Someone else's primitive
 * ------------------------------------------------------------------------ */

/** Flags of nemo_wait_foreign. */
enum {
	/** Fail like an interruptible system call: a signal that arrives
	 *  while nemo polls, and whose handler was installed without
	 *  SA_RESTART (for a wait with a deadline: any handler), ends the
	 *  wait with EINTR once its handler has run - what the blocking
	 *  call would have done had it been asleep.  The poll then runs
	 *  with the asynchronous signals blocked, for at most 1 ms whatever
	 *  the policy, and costs two sigprocmask calls (and a sigpending if
	 *  it ends untaken).  The signals of a fault (SIGSEGV, SIGBUS,
	 *  SIGFPE, SIGILL, SIGTRAP, SIGSYS) are never blocked: a fault of
	 *  try_take reaches the program's handler, which may return or
	 *  siglongjmp out (the poll registers nothing that outlives it).  A
	 *  signal sent to the whole process meanwhile may be taken by
	 *  another thread, as the kernel does for any thread that blocks
	 *  it. */
	NEMO_WAIT_FOREIGN_EINTR = 1u << 0,
	/** A cancellation point: pthread_testcancel on entry and while
	 *  polling (the blocking call is expected to be one itself). */
	NEMO_WAIT_FOREIGN_CANCEL = 1u << 1,
};

/**
 * Wait for a condition that something other than nemo signals - a POSIX
 * semaphore, a pipe, another library's lock - with nemo's poll phase in
 * front of that primitive's own blocking call.  This is how the
 * interposer (libnemo-preload.so) makes sem_wait poll before it sleeps.
 *
 * try_take(arg) is tried at once, then polled for as long as policy p
 * says (NULL: the default policy; the same plans and history as every
 * nemo wait, src/waiter/wait.c).  It must take the condition (consume
 * it: sem_trywait, not a look at the value) and return true, or return
 * false having changed nothing.  If the poll phase ends without it,
 * block(arg, clock, abstime) is called once, with this call's deadline:
 * it waits in the other primitive and returns 0 once it took the
 * condition, or a positive errno value, which is returned as it is.
 * Under NEMO_WAIT_BLOCK, block is called after the first try.  The
 * waker needs no nemo call: whatever wakes the primitive's sleepers
 * (sem_post) also ends the poll, since try_take sees its effect.
 *
 * @param clock   CLOCK_MONOTONIC or CLOCK_REALTIME, for abstime
 * @param abstime absolute deadline, or NULL for none (as nemo_waiter_wait)
 * @param flags   0 or NEMO_WAIT_FOREIGN_* (EINTR, CANCEL)
 * @return 0 once taken; ETIMEDOUT if the deadline passed while polling
 *         (block is not called then); EINTR (NEMO_WAIT_FOREIGN_EINTR); what
 *         block returned; or EINVAL for a NULL try_take or block, unknown
 *         flags, a bad clock or tv_nsec, or a policy of unknown kind
 *         (nemo_last_error() says which).
 */
int nemo_wait_foreign(bool (*try_take)(void *arg),
		      int (*block)(void *arg, clockid_t clock, const struct timespec *abstime),
		      void *arg, const nemo_wait_policy *p, clockid_t clock,
		      const struct timespec *abstime, unsigned flags);

/** Process-wide counters (sums over every thread, past and present). */
typedef struct nemo_waiter_counters {
	uint64_t kicks_issued;        /**< kicks that made a FUTEX_WAKE */
	uint64_t kicks_avoided;       /**< kicks that found the target awake: no syscall */
	uint64_t waits;               /**< waits started */
	uint64_t waits_polled;        /**< waits that ended without sleeping */
	uint64_t sleeps;              /**< futex sleeps entered */
} nemo_waiter_counters;

/**
 * Sum the counters of every thread into *out.  Each thread updates its own
 * counters without atomics; the sum is a consistent-enough snapshot for
 * monitoring, not a barrier.
 * @return 0, or EINVAL for NULL.
 */
int nemo_waiter_get_counters(nemo_waiter_counters *out);

#ifdef __cplusplus
}
#endif

#endif /* NEMO_WAITER_H */
