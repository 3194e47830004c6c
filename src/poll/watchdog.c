/*
 * watchdog.c - the polling watchdog (nemo/poll.h): a place in interrupt
 * mode is signalled only when a message has waited for it longer than T.
 *
 * THE WATCHDOG
 *
 * State per place: wd_ticks (T in ticks, 0: not watched; written by the
 * place, read by senders) and wd_since (the tick since which a message
 * has waited, 0: none).  Per domain: wd_w, the watchdog thread's waiter
 * slot (RUNNING, SLEEPING), published while it runs.  This layer reaches
 * them through src/messaging/modes.h: nemo__place_wd_since (load),
 * nemo__place_wd_since_clear (CAS s -> 0), nemo__place_wd_since_take
 * (exchange), nemo__place_wd_ticks / nemo__place_set_wd_ticks, and
 * nemo__domain_set_watchdog_waiter (wd_w).
 *
 *   WD1 a sender whose kick finds the place RUNNING, with interrupt mode on
 *       and wd_ticks set, while a watchdog runs (kick.c, wd_defer): no
 *       signal; CAS(wd_since, 0 -> now, seq_cst).  If it set the clock:
 *   WD2 kick wd_w (the waiter layer's kick: a FUTEX_WAKE only if the
 *       watchdog sleeps).  A sender that finds the clock running already
 *       does nothing: the one that started it did WD2.
 *   WD3 every drain of the place (drain.c, nemo__drain) first stores
 *       wd_since := 0 (seq_cst, only if set), then reads its hint words;
 *       a drain that leaves work (its budget) starts the clock itself.
 *   WD4 the watchdog's pass: for every watched, active place with
 *       s = wd_since != 0, and `now` read after s: if now - s >= T
 *       (never for s > now): CAS(wd_since, s -> 0) and, if
 *       that succeeded, signal the place (kick.c's IK1-IK3: only if
 *       interrupt mode is still on); else note s + T as a deadline.
 *   WD5 no deadline: exchange(state, SLEEPING, seq_cst), re-read every
 *       watched place's wd_since (seq_cst); any set -> RUNNING, pass
 *       again; else futex_wait(state, SLEEPING) with no timeout.
 *       A deadline: sleep until `early` before the earliest (timer
 *       slack 1 ns; HOW EARLY TO WAKE, below), on a word that
 *       nemo_watchdog_stop wakes, then spin to it.
 *
 *   WD6 stopping: the thread clears wd_w (seq_cst) and exits; then every
 *       running clock is taken (exchange, seq_cst) and its place
 *       signalled.  A sender that started a clock re-reads wd_w (seq_cst)
 *       after its CAS and, finding it NULL, takes its clock back and
 *       signals itself: store-buffering again, so one of the two signals
 *       (both, at worst: a spurious signal).  A place that turns its T
 *       to 0 while a sender defers to it: the pass treats a running clock
 *       with T 0 as expired.
 *
 * WHY NO MESSAGE WAITS FOREVER.  A message m to a watched place r whose
 * sender's S4 found its hint bit clear reaches WD1 (or, if r was polling
 * or sleeping, the ordinary kick).  After WD1 either the clock runs from a
 * tick no later than m's enqueue, or it was running already from an
 * earlier tick.  The clock is cleared only by WD3 - a drain that reads the
 * hint words after the clear, so it takes m if m's bit was set before
 * (the ordinary argument of drain.c), and otherwise m's sender reaches WD1
 * after the clear and starts it again - or by WD4, which signals r, whose
 * handler drains.  A sender whose bit was already set relies on the
 * sender that set it: the bit stays set until a drain (WD3) exchanges it,
 * and that drain takes m.  The watchdog cannot sleep through a running
 * clock: WD1;WD2 and WD5 are the store-buffering pattern (the CAS, then the
 * load of its state; its exchange, then the loads of the clocks), so WD5
 * sees the clock or WD2 sees SLEEPING and wakes it.  A clock that runs
 * although its message was taken (the sender's WD1 came after the drain
 * that took it) costs one spurious signal at most: the handler finds
 * nothing.  So every message is handled by a poll of r's own or by a
 * signal at most T (plus the watchdog's wake-up and the signal's delivery)
 * after it was queued.
 */
#define _GNU_SOURCE
#include <nemo/poll.h>

#include "service.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/prctl.h>

/* TRIED AND REJECTED: FIRING FROM THE PLACE'S CPU.  A signal to a thread
 * that runs on another CPU travels as an inter-processor interrupt; sent
 * from the thread's own CPU it is delivered when the sender gets off it.
 * On the 2-vCPU VM of docs/polling.md, from the tgkill to the handler's
 * start took 17-18 us at the median (30-40 us at p99) across vCPUs,
 * against 3 us (7 us) on the same one, and the watchdog fired across in
 * 45% of its firings (wherever the scheduler woke it).  A version that
 * moved the watchdog (sched_setaffinity) to the CPU the place last ran on
 * before each timed sleep, when the deadline left time for the move,
 * fired 99% of its signals locally (handler start p99 13 us instead of
 * 28 us), and watchdog-50us's pooled p99 went from 81-88 us (median 85)
 * to 69-95 us (median 76) at --request-us 200.  But a move is itself an
 * IPI and two context switches (24 us median, 52 us p99 there), made for
 * most deadlines: at the study's default rate (a request every 50 us)
 * watchdog-50us took 1.63-1.81x interrupt mode's runtime instead of
 * 1.40-1.56x, and check-watchdog-50us in long loops 1.60-1.71x instead
 * of 1.42x, while the rounds that missed the bound missed it as often:
 * their tails are requests to places asleep in their own reply waits,
 * which no firing touches (docs/polling.md).  Nine microseconds of p99
 * were not worth 15-20% of the places' throughput. */

/* HOW EARLY TO WAKE.  The watchdog sleeps until `early` before a
 * deadline and spins the rest, so that the signal leaves at T and not at
 * T plus its own wake-up.  That wake-up depends on the machine's state:
 * on an idle VM the timer must wake a halted vCPU (20-30 us here), while
 * on a busy one - the case the watchdog exists for: places computing
 * without polling - it preempts a running thread within a few
 * microseconds.  A fixed 30 us spent 30 us of a CPU per deferred message
 * on a busy 2-vCPU machine, taken from the places it serves.  So
 * `early` is learned: after each timed sleep it becomes the larger of
 * the lateness just seen (plus a margin) and 31/32 of its last value: it
 * jumps up at once when wake-ups get slow and decays over about thirty
 * wake-ups when they get fast.  Bounds: EARLY_MIN_NS..EARLY_MAX_NS, and
 * it starts at the maximum.  The floor (10 us) and the margin (4 us)
 * leave room for a busy VM's timer jitter: with 2-5 us and 1-2 us the
 * runtimes were the same, and the watchdog's delays missed their bound
 * (T plus interrupt mode's p99) in 4-5 of 27 rounds against 1-3 of 27
 * with the fixed 30 us; with these values, 1 of 27.  This is the one
 * place where the watchdog's spin is decided (docs/architecture.md). */
#define EARLY_MAX_NS 30000.0
#define EARLY_MIN_NS 10000.0
#define EARLY_MARGIN_NS 4000.0

static double next_early(double early, double late_ns)
{
	double e = late_ns + EARLY_MARGIN_NS;
	if (e < early * 0.96875)
		e = early * 0.96875;
	return e < EARLY_MIN_NS ? EARLY_MIN_NS : e > EARLY_MAX_NS ? EARLY_MAX_NS : e;
}

struct nemo_watchdog {
	struct nemo_domain *d;
	pthread_t thread;
	_Atomic int stop;
	_Atomic uint32_t stop_word;   /* its timed sleeps wait on this */
	_Atomic(nemo_waiter *) w;
	_Atomic int started;
	_Atomic uint64_t fired, wakeups, sleeps, spin_ns;
	_Atomic uint64_t early_ns;    /* HOW EARLY TO WAKE, now */
	_Atomic uint64_t late, late_max_ns;  /* firings after their deadline (WD4) */
	bool realtime;                /* running at SCHED_FIFO 1 */
};

/* How late a firing was after its deadline (the tick at which it decided
 * to fire, minus s + T): what `early` failed to cover, i.e. a wake-up of the watchdog
 * slower than it had learned - on a VM typically a timer that had to wake
 * a halted vCPU (docs/polling.md).  Only the watchdog thread writes. */
static void note_late(struct nemo_watchdog *g, uint64_t late_ticks)
{
	uint64_t ns = (uint64_t)nemo_ticks_to_ns((int64_t)late_ticks);
	if (ns >= NEMO_WATCHDOG_LATE_NS)
		NEMO__COUNT(g, late);
	if (ns > atomic_load_explicit(&g->late_max_ns, memory_order_relaxed))
		atomic_store_explicit(&g->late_max_ns, ns, memory_order_relaxed);
}

/* WD4: one pass; returns the earliest deadline, UINT64_MAX for none. */
static uint64_t pass(struct nemo_watchdog *g)
{
	struct nemo_domain *d = g->d;
	uint64_t next = UINT64_MAX;
	unsigned np = nemo__domain_places(d);
	for (unsigned i = 0; i < np; i++) {
		nemo_place *x = nemo__domain_place(d, i);
		uint64_t s = nemo__place_wd_since(x);
		if (!s)
			continue;
		/* The time is read after the clock: one read per pass let a
		 * clock that a sender started during the pass (after that read,
		 * while earlier places were signalled) look older than the
		 * pass - now - s wrapped - and fire at once, before T.  The
		 * test now >= s stays for CPUs whose counters differ slightly. */
		uint64_t now = nemo_ticks();
		/* T 0: the place turned its watchdog off after a sender had
		 * deferred to it: signal now. */
		uint64_t t = nemo__place_wd_ticks(x);
		if (!nemo__place_active(x)) {
			nemo__place_wd_since_clear(x, s);
			continue;
		}
		if (now >= s && now - s >= t) {
			if (nemo__place_wd_since_clear(x, s) && nemo__irq_signal(x)) {
				atomic_fetch_add_explicit(&g->fired, 1, memory_order_relaxed);
				note_late(g, now - (s + t));   /* when it decided: the tgkill is the signal's cost */
			}
		} else if (s + t < next) {
			next = s + t;
		}
	}
	return next;
}

/* WD5: anything waiting?  (seq_cst loads, after publishing SLEEPING)  Or
 * stop. */
static bool any_clock(void *arg)
{
	struct nemo_watchdog *g = arg;
	if (atomic_load_explicit(&g->stop, memory_order_seq_cst))
		return true;
	struct nemo_domain *d = g->d;
	unsigned np = nemo__domain_places(d);
	for (unsigned i = 0; i < np; i++) {
		if (nemo__place_wd_since(nemo__domain_place(d, i)))
			return true;
	}
	return false;
}

static void *wd_main(void *arg)
{
	struct nemo_watchdog *g = arg;
	nemo_waiter *w = nemo_waiter_self();
	if (!w) {
		atomic_store_explicit(&g->started, -1, memory_order_release);
		return NULL;
	}
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);   /* T may be tens of microseconds */
	g->realtime = nemo__service_realtime();  /* fire on time on a busy machine */
	nemo__slot_running(w);
	atomic_store_explicit(&g->w, w, memory_order_relaxed);
	nemo__domain_set_watchdog_waiter(g->d, w);
	atomic_store_explicit(&g->started, 1, memory_order_release);
	double early_ns = EARLY_MAX_NS;
	atomic_store_explicit(&g->early_ns, (uint64_t)early_ns, memory_order_relaxed);
	while (!atomic_load_explicit(&g->stop, memory_order_acquire)) {
		uint64_t next = pass(g);
		if (next == UINT64_MAX) {
			uint32_t *word, val, bits = 0;
			if (nemo__slot_sleep_begin(w, NULL, any_clock, g, &word, &val, &bits))         /* WD5 */
				continue;
			atomic_fetch_add_explicit(&g->sleeps, 1, memory_order_relaxed);
			nemo__word_sleep((_Atomic uint32_t *)word, val, NULL, NEMO_FUTEX_PRIVATE);
			nemo__slot_awake(w);
		} else {
			/* Sleep until `early` before the deadline, then spin the
			 * rest (HOW EARLY TO WAKE, above). */
			uint64_t now = nemo_ticks(), early = nemo_ns_to_ticks(early_ns);
			if (next > now + early) {
				uint64_t target = next - early;
				double ns = nemo_ticks_to_ns((int64_t)(target - now));
				struct timespec rel = { (time_t)(ns / 1e9), (long)(ns - (double)(time_t)(ns / 1e9) * 1e9) };
				if (rel.tv_nsec < 0 || rel.tv_nsec >= 1000000000)
					rel.tv_nsec = 0;
				if (nemo__word_sleep(&g->stop_word, 0, &rel, NEMO_FUTEX_PRIVATE) == ETIMEDOUT) {
					uint64_t woke = nemo_ticks();
					early_ns = next_early(early_ns, woke > target ? nemo_ticks_to_ns((int64_t)(woke - target)) : 0);
					atomic_store_explicit(&g->early_ns, (uint64_t)early_ns, memory_order_relaxed);
				}
			}
			uint64_t spin0 = nemo_ticks();
			while (nemo_ticks() < next && !atomic_load_explicit(&g->stop, memory_order_relaxed))
				nemo_cpu_relax();
			uint64_t spun = nemo_ticks() - spin0;
			atomic_fetch_add_explicit(&g->spin_ns, (uint64_t)nemo_ticks_to_ns((int64_t)spun), memory_order_relaxed);
		}
		atomic_fetch_add_explicit(&g->wakeups, 1, memory_order_relaxed);
	}
	nemo__domain_set_watchdog_waiter(g->d, NULL);                     /* WD6 */
	return NULL;
}

int nemo_watchdog_start(nemo_domain *d, nemo_watchdog **out)
{
	if (!out)
		return NEMO__FAIL(EINVAL, "out is NULL");
	int err = nemo__domain_check(d);
	if (err)
		return err;
	nemo_clock_init();
	struct nemo_watchdog *g = calloc(1, sizeof *g);
	if (!g)
		return ENOMEM;
	g->d = d;
	if ((err = nemo__service_claim(d, NEMO__SERVICE_WATCHDOG, g, "watchdog", __func__))) {
		free(g);
		return err;
	}
	if ((err = nemo__service_run(&g->thread, wd_main, g, &g->started))) {
		nemo__service_unclaim(d, NEMO__SERVICE_WATCHDOG);
		free(g);
		return err;
	}
	*out = g;
	return 0;
}

int nemo_watchdog_stop(nemo_watchdog *g)
{
	if (!g)
		return NEMO__FAIL(EINVAL, "the watchdog is NULL");
	atomic_store_explicit(&g->stop, 1, memory_order_seq_cst);
	atomic_store_explicit(&g->stop_word, 1, memory_order_seq_cst);
	nemo__word_wake(&g->stop_word, 1, NEMO_FUTEX_PRIVATE);
	nemo_waiter *w = atomic_load_explicit(&g->w, memory_order_acquire);
	if (w)
		nemo__waiter_kick_issued(w);
	pthread_join(g->thread, NULL);
	/* Clocks left running: their places are signalled by their next
	 * senders at once from now on; signal those waiting now. */
	struct nemo_domain *d = g->d;
	unsigned np = nemo__domain_places(d);
	for (unsigned i = 0; i < np; i++) {
		nemo_place *x = nemo__domain_place(d, i);
		uint64_t s = nemo__place_wd_since_take(x);
		if (s && nemo__place_active(x))
			nemo__irq_signal(x);
	}
	nemo__service_unclaim(d, NEMO__SERVICE_WATCHDOG);
	free(g);
	return 0;
}

int nemo_watchdog_get_counters(nemo_watchdog *g, nemo_watchdog_counters *out)
{
	if (!g || !out)
		return NEMO__FAIL(EINVAL, "%s is NULL", g ? "out" : "the watchdog");
	out->fired = atomic_load_explicit(&g->fired, memory_order_relaxed);
	out->wakeups = atomic_load_explicit(&g->wakeups, memory_order_relaxed);
	out->sleeps = atomic_load_explicit(&g->sleeps, memory_order_relaxed);
	out->cpu_ns = nemo__thread_cpu_ns(g->thread);
	out->spin_ns = atomic_load_explicit(&g->spin_ns, memory_order_relaxed);
	out->early_ns = atomic_load_explicit(&g->early_ns, memory_order_relaxed);
	out->realtime = g->realtime;
	out->late = atomic_load_explicit(&g->late, memory_order_relaxed);
	out->late_max_ns = atomic_load_explicit(&g->late_max_ns, memory_order_relaxed);
	return 0;
}

int nemo_place_set_watchdog(uint64_t t_ns)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	if (t_ns > NEMO_WATCHDOG_T_MAX_NS)
		return NEMO__FAIL(EINVAL, "T of %llu ns is above 1 s", (unsigned long long)t_ns);
	nemo_clock_init();
	uint64_t t = t_ns ? nemo_ns_to_ticks((double)t_ns) : 0;
	nemo__place_set_wd_ticks(me, t_ns && !t ? 1 : t);
	return 0;
}
