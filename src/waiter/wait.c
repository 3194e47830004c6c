/*
 * wait.c - the one wait loop: poll for a budget, then sleep.
 *
 * Every blocking wait in nemo comes through nemo__wait_loop, so this is
 * the one place that decides whether to sleep, and how long to poll:
 *
 *   1. try once (the condition may already hold);
 *   2. poll, as nemo__spin_plan_for() says: a tight loop (pause, clock
 *      read every 4th) for `pure` ticks, then - SPIN only - a yield
 *      before every poll, until `total` ticks;
 *   3. sleep: ops->sleep_begin publishes the sleep and re-checks (the
 *      handshake of waiter.c or event.c), futex_wait (on two words at
 *      once for a waiter with two kinds of kickers: TWO WORDS below),
 *      ops->sleep_end, and try again; until taken or the deadline
 *      passes.  A wait in front
 *      of someone else's primitive (nemo_wait_foreign: a POSIX
 *      semaphore under the interposer) calls that primitive's blocking
 *      call instead, once (ops->block; INTERRUPTIBLE POLLS below).
 *
 * THE PLANS
 *
 *   SPIN      tight for 1 ms, then a yield before every poll, forever.
 *   BLOCK     none: sleep at once.
 *   HYBRID    tight for spin_ns (the user's explicit budget).
 *   ADAPTIVE  (the default) tight for the cost of blocking, C, learned
 *             from this process's own sleeps (policy.c, THE COST OF
 *             BLOCKING), or 4C for a waiter with a CPU of its own (A CPU
 *             OF ITS OWN below); an eighth of that while this thread's
 *             recent waits outlasted it or its polls were preempted, and
 *             only in one wait of 16 once no poll has paid for a while;
 *             nothing at all while its recent releasers ran on its own
 *             CPU (THE HISTORY below).
 *
 * Why a budget in time, not in iterations: an iteration's cost varies
 * tenfold between machines (pause is ~10 cycles on some cores and ~140 on
 * others); the cost of blocking is a time.  Polling for at most as long
 * as a block+wake costs bounds the waste at twice the better choice made
 * in hindsight (the classic ski-rental argument), whatever the gap; the
 * adaptive total never exceeds C (4C for a waiter with a CPU of
 * its own, which counts its polls as cheaper: A CPU OF ITS OWN).
 *
 * A CPU OF ITS OWN (NEMO__WAIT_OWNED; who has one is decided by the
 * caller: for places, placewait.c, place_owns_cpu - a place whose thread
 * is pinned to one CPU that no other place of its domain is pinned to)
 *
 * What a poll costs is what its CPU could have done meanwhile: for a
 * waiter that shares its CPU, the time of the threads it keeps off it,
 * which is why the budget is C.  A place that its program pinned to a
 * CPU of its own is that CPU's one client: while it waits, the CPU has
 * nothing else to run and would halt, and on a VM a halted vCPU is slow
 * to wake (20-30 us here, 150-300 us in some stretches; docs/polling.md).
 * So such a waiter polls for OWNED_FACTOR times C, and its history
 * judges its waits against that budget: the waste stays bounded (an
 * idle place polls 4C once per wait, then sleeps; waits that keep
 * outlasting 4C shorten it to C / 2 and then to probes, as below), and
 * a CPU that turns out to be wanted after all shows as preempted polls,
 * which shorten it too.  Measured with nemo-bench app on the 2-vCPU VM
 * (2 places pinned to the 2 vCPUs, each waiting 10-100 us for its
 * replies while serving the other's requests; C was 30-90 us there), in
 * three runs alternated with three of the budget C: the best polling
 * strategy in long loops took 0.83x interrupt mode's runtime instead of
 * 1.04-1.05x, watchdog-50us 1.26-1.30x instead of 1.45-1.50x, and its
 * p99 stayed within T plus interrupt mode's p99 in 27 of 27 rounds
 * instead of 25; interrupt mode's own runtime did not move (its replies
 * come within C).  docs/polling.md, "A place with a CPU of its own".
 * Rejected: polling without bound while the CPU is owned (NEMO_WAIT=spin
 * gave the same runtimes in that study, and an idle place would burn its
 * CPU forever); and owning by count (no more places than CPUs, unpinned):
 * the scheduler may put two of them on one CPU, where a long poll only
 * delays the other, and nothing in a place's wait learns where its
 * releasers ran (same_cpu below is learned by slot waits only).
 * Failure case: a CPU that is one hyperthread of a core shares that
 * core with its sibling, so a place polling there slows a place that
 * computes on the sibling (the poll's pause hints soften it; the budget
 * still bounds it at 4C per wait).  Not measured: this VM does not
 * expose its vCPUs' siblings.
 *
 * THE HISTORY (per thread: struct nemo__wait_hist, slot.h; this file owns it)
 *
 * Polling pays only if the thread we wait for runs elsewhere meanwhile.
 * Two scores, 0..8 each, decide when it cannot:
 *   long_waits  a wait that ends while polling subtracts 2; one that
 *               lasted longer than C (it would have slept anyway) adds 1;
 *               one whose poll saw the clock jump by more than PREEMPT_NS
 *               between two reads (it was preempted: its CPU is wanted)
 *               adds 2.  From 4 on, the budget is C / 8: long gaps do not
 *               pay a full budget each time, a short wait that comes back
 *               is still caught, two polled waits restore the budget.
 *               At 8 (the score's ceiling: no poll has paid lately) only
 *               one wait in PROBE_EVERY polls its C / 8, a probe; the
 *               others sleep at once.  A probe that pays brings the score
 *               down to 6 and every wait polls again.  Measured with
 *               CPython's GIL under the interposer on the 2-vCPU VM: about
 *               9,000 condvar waits a second, all but 0.5% ending in a
 *               sleep, each after 2.4 us of polling: 0.94-1.04x glibc's
 *               hand-off rate in four nemo-bench preload runs, against
 *               0.95-1.19x with the probes in four runs alternated with
 *               them (docs/events.md); the condvar hand-off and the pool
 *               did not move.
 *               A wait that slept in someone else's blocking call
 *               (nemo_wait_foreign: sem_wait under the interposer) is
 *               judged differently: its length includes its own wake-up,
 *               about C, and no kick stamp says when the condition came
 *               (a slot wait knows it).  So it adds 1 only past 2C; a
 *               shorter one - the condition came within about C, where a
 *               poll would have caught it - subtracts 1.  Without this,
 *               two CPython threads handing a threading.Lock back and
 *               forth settled, in about half the runs, where both slept:
 *               each one's wait was its partner's wake-up plus its own,
 *               so every wait counted as long and only the probes polled,
 *               too briefly to catch a partner's wake-up (median 0.83x
 *               glibc in such a run, 14-42x in the others; measured on
 *               the 2-vCPU VM).
 *   same_cpu    every release records the releaser's CPU in the slot
 *               (waiter.c); a released slot wait whose releaser ran on the
 *               CPU the waiter started on adds 2, unless the wait did not
 *               poll (then it gave its CPU away, and finding the releaser
 *               there says nothing); one released from another CPU
 *               subtracts 1.  From 4 on, a thread whose affinity allows
 *               one CPU only does not poll: its releaser needs that CPU to
 *               release it, so every polled microsecond only delays the
 *               release - a process confined to one CPU (a cpuset, taskset)
 *               running CPython, whose GIL hand-off always has the other
 *               thread waiting for the CPU, or a pool pinned there.
 *               Releases keep being observed while it sleeps, so polling
 *               resumes once its releasers run elsewhere.
 * Why only a thread confined to one CPU: an unpinned thread that finds
 * its releaser on its CPU has met a scheduling coincidence the balancer
 * undoes, not a constraint.  Applied to every thread, the rule turned
 * polling off in oversubscribed pools, where polled waits mostly do end
 * in time: nemo-pool (4 workers and a producer on 2 vCPUs) fell to
 * 0.78-0.98x glibc, against 1.5-1.6x with the rule confined.  (Reading
 * the affinity mask alone was rejected too: a thread pinned to one CPU
 * waiting for a thread pinned to another is exactly where polling wins.)
 * Measured on the 2-vCPU VM with CPython (threading.Lock hand-off, the
 * process pinned to one CPU): polling 2 us tight cost 0.55x glibc; not
 * polling, 1.0x.
 *
 * Rejected: yielding (sched_yield) between windows of polling instead.
 * It hands the CPU to a releaser on our CPU, but on a machine where any
 * other task is runnable, each yield gives that task a time slice: the
 * condvar hand-off of nemo-handoff fell from 1.3M to 0.28M per second
 * beside a light background load (2 runnable tasks).
 *
 * Failure cases (docs/events.md): a gap distribution just above C pays
 * up to C / 8 of polling per wait plus the sleep (the bound holds, the
 * win is lost); a releaser runnable behind another thread on *another*
 * CPU's run queue (oversubscription) is not seen by either score, and the
 * waiter polls its budget; the first waits of a process use the start
 * value of C, which can be off by a few times on machines unlike this
 * one until the first sleep is measured; events (nemo_event) do not
 * record their releaser's CPU, so only long_waits guides them.
 *
 * Kick mode (NEMO__WAIT_BOOST): the thread runs at the lowest real-time
 * priority, so that when it is woken it preempts a busy normal thread on
 * its CPU at once instead of waiting for the scheduler (Nemo's "condvar +
 * IPI" for threads that act as a runtime's logical processors).  Where
 * real-time priority is not permitted (no CAP_SYS_NICE, RLIMIT_RTPRIO 0)
 * kick mode is a plain wait: the first EPERM is remembered per thread.
 * While it holds that priority, an adaptive poll lasts 4 us at most: at
 * real-time priority a poll keeps every normal thread of its
 * CPU off it, and its yields do not help them (found when concurrent
 * test processes stalled for seconds beside a kick-mode stress run).
 */
#define _GNU_SOURCE
#include "../platform/deadline.h"
#include "slot.h"

#include "../platform/fail.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>

/* A deadline with a negative tv_sec is in the past, not malformed: the
 * wait times out (glibc's pthread_cond_timedwait and sem_timedwait do the
 * same; a loop that waits for ETIMEDOUT must get it).  Only tv_nsec out
 * of range, or another clock, is EINVAL. */
int nemo__check_deadline(const char *fn, clockid_t clock, const struct timespec *abstime)
{
	if (clock != CLOCK_MONOTONIC && clock != CLOCK_REALTIME)
		return nemo__fail(EINVAL, fn, "clock %d is neither CLOCK_MONOTONIC nor CLOCK_REALTIME",
				  (int)clock);
	if (abstime && (abstime->tv_nsec < 0 || abstime->tv_nsec >= 1000000000L))
		return nemo__fail(EINVAL, fn, "abstime's tv_nsec %ld is outside 0..999999999",
				  (long)abstime->tv_nsec);
	return 0;
}

/* Ticks left until abstime on clock (0 if passed); UINT64_MAX if none,
 * or if it is too far away to count in ticks (centuries: as good as
 * none, and the kernel still gets the real deadline). */
static uint64_t ticks_until(clockid_t clock, const struct timespec *abstime)
{
	if (!abstime)
		return UINT64_MAX;
	if (abstime->tv_sec < 0)
		return 0;
	struct timespec now;
	clock_gettime(clock, &now);
	/* In double: exact enough, and no overflow for any time_t. */
	double ns = ((double)abstime->tv_sec - (double)now.tv_sec) * 1e9 +
		    (double)(abstime->tv_nsec - now.tv_nsec);
	return ns > 0 ? nemo_ns_to_ticks(ns) : 0;
}

/* a + b, saturating at UINT64_MAX ("never"). */
static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

#define SPIN_PURE_NS 1e6          /* SPIN: tight for 1 ms, then yielding */
#define PREEMPT_NS 50000.0        /* a clock jump this long while polling: preempted */
#define SHORTEN_AT 4              /* long_waits from which the budget is C / 8 */
#define SAME_CPU_AT 4             /* same_cpu from which the thread does not poll */
#define LONG_MAX_SCORE 8          /* long_waits' ceiling: from here only probes poll */
#define PROBE_EVERY 16            /* at the ceiling, one wait in this many polls */
#define OWNED_FACTOR 4.0          /* A CPU OF ITS OWN: the budget in units of C */

/* The adaptive budget before the history shortens it (A CPU OF ITS OWN):
 * C, or OWNED_FACTOR C for a waiter with a CPU of its own. */
static double full_budget_ns(unsigned flags)
{
	double c = nemo__block_cost_ns();
	return (flags & NEMO__WAIT_OWNED) ? OWNED_FACTOR * c : c;
}

int nemo__only_cpu(void)
{
	cpu_set_t set;
	if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) != 0 || CPU_COUNT(&set) != 1)
		return -1;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			return c;
	return -1;
}

/* Whether the calling thread may run on one CPU only: read from its
 * affinity mask, again after every ONE_CPU_REREAD waits (a program may
 * re-pin a thread). */
#define ONE_CPU_REREAD 4096
static bool on_one_cpu(struct nemo__wait_hist *self)
{
	uint32_t n = (uint32_t)atomic_load_explicit(&self->waits, memory_order_relaxed);
	if (self->one_cpu < 0 || n - self->one_cpu_at >= ONE_CPU_REREAD) {
		self->one_cpu = nemo__only_cpu() >= 0;
		self->one_cpu_at = n;
	}
	return self->one_cpu == 1;
}

nemo__spin_plan nemo__spin_plan_for(const nemo_wait_policy *p, unsigned flags)
{
	struct nemo__wait_hist *self = nemo__wait_me;
	switch (p->kind) {
	case NEMO_WAIT_SPIN:
		return (nemo__spin_plan){ nemo_ns_to_ticks(SPIN_PURE_NS), 0, UINT64_MAX };
	case NEMO_WAIT_BLOCK:
		return (nemo__spin_plan){ 0, 0, 0 };
	case NEMO_WAIT_HYBRID: {
		uint64_t t = nemo_ns_to_ticks(p->spin_ns ? p->spin_ns : NEMO_WAIT_HYBRID_DEFAULT_NS);
		return (nemo__spin_plan){ t, t, t };
	}
	case NEMO_WAIT_ADAPTIVE:
	default: {
		if (self && self->same_cpu >= SAME_CPU_AT && on_one_cpu(self))
			return (nemo__spin_plan){ 0, 0, 0 };
		double c = full_budget_ns(flags);
		if (self && self->long_waits >= LONG_MAX_SCORE &&
		    atomic_load_explicit(&self->waits, memory_order_relaxed) % PROBE_EVERY != 0)
			return (nemo__spin_plan){ 0, 0, 0 };   /* no poll paid lately: only probes poll */
		if (self && self->long_waits >= SHORTEN_AT)
			c /= 8;
		/* A thread holding kick mode's real-time priority polls a few
		 * microseconds at most: at that priority a poll keeps every
		 * normal thread of its CPU off it. */
		if (self && self->boosted && c > 4000)
			c = 4000;
		uint64_t t = nemo_ns_to_ticks(c);
		return (nemo__spin_plan){ t, t, t };
	}
	}
}

__thread struct nemo__wait_hist *nemo__wait_me __attribute__((tls_model("initial-exec")));

void nemo__wait_bind(struct nemo__wait_hist *h)
{
	if (h) {
		h->long_waits = 0;
		h->same_cpu = 0;
		h->one_cpu = -1;
		h->boost = 0;
		h->boosted = false;
	}
	nemo__wait_me = h;
}

uint64_t nemo__wait_sleeps(void)
{
	struct nemo__wait_hist *h = nemo__wait_me;
	return h ? atomic_load_explicit(&h->sleeps, memory_order_relaxed) : 0;
}

void nemo__wait_hist_add(const struct nemo__wait_hist *h, nemo_waiter_counters *out)
{
	out->waits += atomic_load_explicit(&h->waits, memory_order_relaxed);
	out->waits_polled += atomic_load_explicit(&h->waits_polled, memory_order_relaxed);
	out->sleeps += atomic_load_explicit(&h->sleeps, memory_order_relaxed);
}

void nemo__learn_releaser(int rel, int cpu, bool slept)
{
	struct nemo__wait_hist *w = nemo__wait_me;
	if (!w || rel < 0 || cpu < 0)
		return;
	uint32_t h = w->same_cpu;
	if (rel == cpu) {
		if (slept && h >= SAME_CPU_AT)
			return;      /* it slept without polling: says nothing */
		h = h + 2 > 8 ? 8 : h + 2;
	} else {
		h = h ? h - 1 : 0;
	}
	w->same_cpu = h;
}

/* The history (see THE HISTORY above), judging the wait against the
 * budget in force, full_ns (C, or 4C: A CPU OF ITS OWN).  `foreign`: the
 * wait slept in someone else's blocking call (nemo_wait_foreign), judged
 * against 2C since its length includes its own wake-up. */
static void adapt_update(struct nemo__wait_hist *self, uint64_t waited_ticks, bool polled, bool preempted,
			 bool foreign, double full_ns)
{
	if (!self)
		return;
	uint32_t h = self->long_waits;
	if (preempted)
		h += 2;
	else if (polled)
		h = h >= 2 ? h - 2 : 0;
	else if (nemo_ticks_to_ns((int64_t)waited_ticks) > (foreign ? 2 : 1) * full_ns)
		h += 1;
	else if (foreign)
		h = h ? h - 1 : 0;
	self->long_waits = h > LONG_MAX_SCORE ? LONG_MAX_SCORE : h;
}

/* Kick mode: SCHED_FIFO 1 from the first kick-mode sleep on, kept while
 * the thread goes on waiting in kick mode, dropped by its next wait that
 * is not in kick mode (or nemo__boost_leave).  Dropping it right after
 * each wake-up was measured and rejected: the drop is a syscall on the
 * critical path (+1-2 us here), and it lets the busy thread preempt the
 * woken one before it reaches its caller (tails of milliseconds).  Only a
 * thread under the normal policy is raised (checked once per thread: a
 * thread that is already real-time preempts anyway, and its policy is not
 * ours to touch). */
static void boost_enter(struct nemo__wait_hist *self)
{
	if (!self || self->boost < 0 || self->boosted)
		return;
	if (self->boost == 0) {
		int pol;
		struct sched_param cur;
		if (pthread_getschedparam(pthread_self(), &pol, &cur) != 0 || pol != SCHED_OTHER) {
			self->boost = -1;
			return;
		}
	}
	struct sched_param sp = { .sched_priority = 1 };
	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) != 0) {
		self->boost = -1;     /* not permitted here: stop trying */
		return;
	}
	self->boost = 1;
	self->boosted = true;
}

void nemo__boost_leave(void)
{
	struct nemo__wait_hist *self = nemo__wait_me;
	if (!self || !self->boosted)
		return;
	struct sched_param sp = { .sched_priority = 0 };
	pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
	self->boosted = false;
}

/* TWO WORDS (ops->sleep_also): one futex_waitv on the word sleep_begin
 * named and the second one; either word's kick ends it.  Where the kernel
 * refuses futex_waitv - older than 5.16 (ENOSYS), or a seccomp filter
 * that answers EPERM for what it does not know - the waiter sleeps on the
 * first word alone, in slices of at most TWO_WORDS_FALLBACK_NS (never past
 * the caller's deadline), and a kick of the second word is seen at the
 * end of the slice (the loop's try_take), never lost: its kicker made the
 * condition true before it kicked. */
#define TWO_WORDS_FALLBACK_NS 1000000

static int sleep_two(const nemo__wait_ops *ops, uint32_t *word, uint32_t val, const nemo_futex_word *also,
		     clockid_t clock, const struct timespec *abstime)
{
	static _Atomic int no_waitv;
	if (!atomic_load_explicit(&no_waitv, memory_order_relaxed)) {
		nemo_futex_word ws[2] = { { word, val, ops->futex_flags }, *also };
		int rc = nemo_futex_wait_any(ws, 2, clock, abstime, NULL);
		if (rc != ENOSYS && rc != EPERM)
			return rc;
		atomic_store_explicit(&no_waitv, 1, memory_order_relaxed);
	}
	struct timespec cap;
	nemo__deadline_in(clock, TWO_WORDS_FALLBACK_NS, &cap);
	if (abstime && nemo__ts_before(abstime, &cap))
		cap = *abstime;
	int rc = nemo_futex_wait_until(word, val, clock, &cap, ops->futex_flags);
	return rc == ETIMEDOUT ? 0 : rc;    /* the loop checks the caller's deadline */
}

static int futex_sleep(const nemo__wait_ops *ops, uint32_t *word, uint32_t val, uint32_t bits,
		       const nemo_futex_word *also, clockid_t clock, const struct timespec *abstime,
		       unsigned flags)
{
	int rc, oldtype = 0;
	if (flags & NEMO__WAIT_CANCELLABLE)
		pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &oldtype);
	if (also)
		rc = sleep_two(ops, word, val, also, clock, abstime);
	else if (bits)
		rc = nemo_futex_wait_bitset(word, val, bits, clock, abstime, ops->futex_flags);
	else if (abstime)
		rc = nemo_futex_wait_until(word, val, clock, abstime, ops->futex_flags);
	else
		rc = nemo_futex_wait(word, val, NULL, ops->futex_flags);
	if (flags & NEMO__WAIT_CANCELLABLE)
		pthread_setcanceltype(oldtype, NULL);
	return rc;
}

/* INTERRUPTIBLE POLLS (NEMO__WAIT_EINTR: nemo_wait_foreign standing in
 * front of a blocking call that fails with EINTR, such as sem_wait).
 * Such a call returns EINTR when a signal handler runs while it blocks
 * - for an untimed wait only if the handler lacks SA_RESTART, for a
 * timed one whatever its flags (the kernel restarts a timed futex wait
 * only through a restart block, which glibc's timed waits turn into
 * EINTR) - and programs rely on it: CPython runs its signal handlers
 * (Ctrl-C: KeyboardInterrupt) when Lock.acquire's sem_wait returns
 * EINTR.  A handler that ran while we polled would leave the caller
 * blocked in the call afterwards, its EINTR lost.  So:
 *   - the poll runs with every asynchronous signal blocked (glibc keeps
 *     its own cancellation and set*id signals out of any mask);
 *   - never the synchronous ones, which a fault of the poll itself
 *     raises (SYNC_SIGNALS: SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP,
 *     SIGSYS): the kernel cannot defer a fault, so for a thread that
 *     blocks its signal it resets the handler and kills the process.
 *     The poll touches the caller's memory (sem_trywait on the
 *     semaphore), and a program may handle faults there (a protected
 *     page its SIGSEGV handler opens, a truncated file's SIGBUS): its
 *     handler must run, as it would in the blocking call;
 *   - such a handler may siglongjmp out of the poll, so the poll
 *     registers nothing that outlives it: no cleanup buffer, and no
 *     cancellation point inside it (pthread_testcancel before and after
 *     it instead; the window is short, below).  A jump to a sigsetjmp
 *     that saved the mask restores the program's mask; one that did not
 *     leaves the poll's (the asynchronous signals blocked), as any jump
 *     out of a handler leaves the mask it ran with;
 *   - it lasts at most EINTR_POLL_MAX_NS, whatever the policy (SPIN
 *     and a long HYBRID included), and never yields;
 *   - at its end, not taken, it asks the kernel which signals are
 *     pending: one the caller had not blocked, whose handler would have
 *     failed the call, ends the wait with EINTR once the mask is
 *     restored (its handler runs then); any other runs at the restore,
 *     and the wait goes on into the blocking call.  A synchronous
 *     signal is never pending (its handler ran at the fault, inside the
 *     poll, and the access was retried), and it does not fail the call:
 *     a fault in glibc's own sem_wait does not either.
 * Why not block nothing: nothing tells a poll that an asynchronous
 * handler ran on its thread meanwhile (no counter of delivered signals),
 * and its EINTR would be lost; only a blocked signal can be asked about.
 * Cost: two sigprocmask calls per wait that polls, and one sigpending
 * (plus a sigaction per pending signal) when the poll ends untaken.
 * What it cannot keep: a signal sent to the whole process (kill,
 * Ctrl-C) while we poll goes, as the kernel always does when the thread
 * it prefers blocks a signal, to another thread that does not; its
 * handler runs there, and this wait goes on into the blocking call.
 * The window is the poll: at most EINTR_POLL_MAX_NS, and one adaptive
 * budget C (microseconds) under the default policy. */
#define EINTR_POLL_MAX_NS 1e6

/* Whether a signal pending for us would have failed the blocking call
 * (timed: any handled signal; untimed: one without SA_RESTART). */
static bool eintr_pending(const sigset_t *caller_mask, bool timed)
{
	sigset_t pend;
	if (sigpending(&pend) != 0)
		return false;
	for (int s = 1; s < NSIG; s++) {
		if (sigismember(&pend, s) != 1 || sigismember(caller_mask, s) == 1)
			continue;
		struct sigaction sa;
		if (sigaction(s, NULL, &sa) != 0)
			continue;
		bool handled = (sa.sa_flags & SA_SIGINFO) ? sa.sa_sigaction != NULL
			       : (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN);
		if (handled && (timed || !(sa.sa_flags & SA_RESTART)))
			return true;
	}
	return false;
}

/* The poll phase: 0 once taken, ETIMEDOUT at the deadline, EAGAIN when
 * the plan's time is up, or (adaptive only) when the CPU was lost for
 * long across a yield: sleep now.  *preempted: the CPU was lost for
 * long while polling. */
static int poll_phase(const nemo__wait_ops *ops, void *arg, nemo__spin_plan plan, uint64_t start,
		      uint64_t deadline, unsigned flags, bool adaptive, bool *preempted)
{
	uint64_t end = add_sat(start, plan.total), win_end = add_sat(start, plan.pure);
	uint64_t gap = nemo_ns_to_ticks(PREEMPT_NS), last = start;
	for (unsigned n = 1;; n++) {
		if (ops->try_take(arg))
			return 0;
		nemo_cpu_relax();
		/* A pause costs tens of cycles on some x86 cores: check the
		 * clock every 4th, or a 1 us budget overshoots by a
		 * microsecond or more (measured). */
		if (n % 4 && last < win_end)
			continue;
		uint64_t now = nemo_ticks();
		bool yielded = false;
		if (now >= win_end && now < end && now < deadline) {
			/* Window over: let a thread that wants this CPU run. */
			sched_yield();
			now = nemo_ticks();
			win_end = add_sat(now, plan.window);
			yielded = true;
			if ((flags & NEMO__WAIT_CANCELLABLE))
				pthread_testcancel();
		}
		if (now - last > gap) {
			/* We lost the CPU: preempted while polling tight, or a
			 * yield that let other threads run for long.  The CPU is
			 * wanted; a yield there costs a time slice, a sleep's
			 * wake-up would preempt instead. */
			*preempted = true;
			if (yielded && adaptive) {   /* SPIN never sleeps */
				if (ops->try_take(arg))
					return 0;
				return EAGAIN;      /* sleep now */
			}
		}
		last = now;
		if (now >= deadline)
			return ETIMEDOUT;
		if (now >= end)
			return EAGAIN;
		if ((flags & NEMO__WAIT_CANCELLABLE) && n % 1024 == 0)
			pthread_testcancel();
	}
}

/* The signals a fault raises (INTERRUPTIBLE POLLS): never blocked. */
static const int SYNC_SIGNALS[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS };

/* The poll phase with the asynchronous signals blocked (INTERRUPTIBLE
 * POLLS): at most EINTR_POLL_MAX_NS, tight, no cancellation point inside
 * (a fault's handler may jump out of it), then EINTR if a pending signal
 * would have failed the call. */
static int poll_phase_masked(const nemo__wait_ops *ops, void *arg, nemo__spin_plan plan,
			     uint64_t start, uint64_t deadline, unsigned flags, bool timed,
			     bool *preempted)
{
	uint64_t cap = nemo_ns_to_ticks(EINTR_POLL_MAX_NS);
	if (plan.total > cap)
		plan.total = cap;
	plan.pure = plan.window = plan.total;
	unsigned pflags = flags & ~(unsigned)NEMO__WAIT_CANCELLABLE;
	sigset_t async, old;
	sigfillset(&async);
	for (size_t i = 0; i < sizeof SYNC_SIGNALS / sizeof SYNC_SIGNALS[0]; i++)
		sigdelset(&async, SYNC_SIGNALS[i]);
	if (flags & NEMO__WAIT_CANCELLABLE)
		pthread_testcancel();
	if (pthread_sigmask(SIG_BLOCK, &async, &old) != 0)
		return poll_phase(ops, arg, plan, start, deadline, pflags, false, preempted);
	int rc = poll_phase(ops, arg, plan, start, deadline, pflags, false, preempted);
	if (rc == EAGAIN && eintr_pending(&old, timed))
		rc = EINTR;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc == EAGAIN && (flags & NEMO__WAIT_CANCELLABLE))
		pthread_testcancel();           /* not once taken: that would lose the unit */
	return rc;
}

int nemo__wait_loop(const nemo__wait_ops *ops, void *arg, const nemo_wait_policy *p,
		    clockid_t clock, const struct timespec *abstime, unsigned flags)
{
	/* First, even on the path that takes at once: callers convert times
	 * after the wait (nemo_cond's relock plans its mutex poll), and a
	 * process's first wait may be one that found its signal there. */
	nemo_clock_init();
	nemo__learned_init();
	struct nemo__wait_hist *self = nemo__wait_me;   /* NULL: a thread without a slot */
	if (self)
		NEMO__COUNT(self, waits);
	if (ops->try_take(arg)) {
		if (self)
			NEMO__COUNT(self, waits_polled);
		return 0;
	}
	nemo_wait_policy pol;
	if (nemo__wait_policy_resolve(p, &pol) != 0)
		return EINVAL;      /* bare: the caller says why (fail.h) */
	bool adaptive = pol.kind == NEMO_WAIT_ADAPTIVE;
	uint64_t start = nemo_ticks();
	uint64_t left = ticks_until(clock, abstime);
	if (left == 0)
		return ETIMEDOUT;      /* already past: never sleep on it */
	uint64_t deadline = add_sat(start, left);

	/* Poll. */
	bool preempted = false;
	nemo__spin_plan plan = nemo__spin_plan_for(&pol, flags);
	if (plan.total) {
		int rc = (flags & NEMO__WAIT_EINTR)
			 ? poll_phase_masked(ops, arg, plan, start, deadline, flags, abstime != NULL, &preempted)
			 : poll_phase(ops, arg, plan, start, deadline, flags, adaptive, &preempted);
		if (rc != EAGAIN) {
			if (rc == 0 && self)
				NEMO__COUNT(self, waits_polled);
			if (adaptive)
				adapt_update(self, nemo_ticks() - start, rc == 0, preempted, false, full_budget_ns(flags));
			return rc;
		}
	}

	/* Sleep.  (nemo_wait_foreign never asks for kick mode, so a foreign
	 * sleep drops its priority here too.) */
	if (flags & NEMO__WAIT_BOOST)
		boost_enter(self);
	else if (self && self->boosted)
		nemo__boost_leave();
	/* Someone else's blocking call (nemo_wait_foreign): it sleeps, once. */
	if (ops->block) {
		if (self)
			NEMO__COUNT(self, sleeps);
		int rc = ops->block(arg, clock, abstime);
		if (adaptive)
			adapt_update(self, nemo_ticks() - start, false, preempted, true, full_budget_ns(flags));
		return rc;
	}
	int result;
	for (;;) {
		uint32_t *word, val, bits = 0;
		uint64_t slept_at = nemo_ticks();
		if (ops->sleep_begin(arg, &word, &val, &bits)) {
			result = 0;
			break;
		}
		if (self)
			NEMO__COUNT(self, sleeps);
		nemo_futex_word also;
		bool two = !bits && ops->sleep_also && ops->sleep_also(arg, &also);
		int rc = futex_sleep(ops, word, val, bits, two ? &also : NULL, clock, abstime, flags);
		ops->sleep_end(arg);
		if (ops->try_take(arg)) {
			/* Woken by a kick made after we published the sleep: what
			 * that wake-up cost is a sample of the cost of blocking. */
			uint64_t kicked = ops->kicked_at ? ops->kicked_at(arg) : 0;
			if (kicked > slept_at)
				nemo__learn_wake_latency(nemo_ticks_to_ns((int64_t)(nemo_ticks() - kicked)));
			result = 0;
			break;
		}
		/* A deadline in the past must not reach the kernel (it refuses
		 * negative times with EINVAL): check before sleeping again. */
		if (rc == ETIMEDOUT || (abstime && ticks_until(clock, abstime) == 0)) {
			result = ETIMEDOUT;
			break;
		}
	}
	if (adaptive)
		adapt_update(self, nemo_ticks() - start, false, preempted, false, full_budget_ns(flags));
	return result;
}
