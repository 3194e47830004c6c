/*
 * waiter_internal.h - what the waiter layer shares with the layers above
 * it (events, messaging), but not with users.
 */
#ifndef NEMO_WAITER_INTERNAL_H
#define NEMO_WAITER_INTERNAL_H

#include <nemo/waiter.h>

#include <stdatomic.h>

#define NEMO__CACHELINE 64

/* Size rounded up to whole cache lines (C11 aligned_alloc requires a
 * multiple of the alignment). */
#define NEMO__LINES(n) (((n) + NEMO__CACHELINE - 1) / NEMO__CACHELINE * NEMO__CACHELINE)

/* struct nemo_waiter, the slot, is private to this folder (slot.h): the
 * layers above reach it only through the functions below. */


/* A full (seq_cst) fence.  ThreadSanitizer does not model
 * atomic_thread_fence, and GCC rejects it there when optimising
 * (-Wtsan): under TSan the fence is a seq_cst RMW on a dummy word, which
 * is a full barrier on the hardware and an operation TSan understands. */
#if defined(__SANITIZE_THREAD__)
extern _Atomic uint32_t nemo__fence_word;
#define NEMO__FENCE() ((void)atomic_fetch_add_explicit(&nemo__fence_word, 0, memory_order_seq_cst))
#else
#define NEMO__FENCE() atomic_thread_fence(memory_order_seq_cst)
#endif

/* Counter bump by the owner thread: a relaxed load and store, no RMW. */
#define NEMO__COUNT(w, field) \
	atomic_store_explicit(&(w)->field, \
		atomic_load_explicit(&(w)->field, memory_order_relaxed) + 1, memory_order_relaxed)

/* Incremented in the child after fork(): state owned by threads that no
 * longer exist (queue locks, queued slots) is recognised by an old
 * generation. */
extern _Atomic uint32_t nemo__fork_gen;

/* How a waiting object plugs into the one wait loop. */
typedef struct nemo__wait_ops {
	/* The condition holds: take it (consume, for consuming waits) and
	 * return true. */
	bool (*try_take)(void *arg);
	/* Publish "I am about to sleep", then re-check.  Return true if the
	 * condition holds (taken, publication undone); else set *word and
	 * *val for futex_wait - and *bits, to sleep on a word shared with
	 * other waiters (FUTEX_WAIT_BITSET; left 0 otherwise) - and return
	 * false. */
	bool (*sleep_begin)(void *arg, uint32_t **word, uint32_t *val, uint32_t *bits);
	/* Undo the publication once futex_wait has returned. */
	void (*sleep_end)(void *arg);
	/* Optional: a second word to sleep on besides the one sleep_begin
	 * named, for a waiter that two kinds of kickers wake (the progress
	 * thread: its slot, and a transport's doorbell that other processes
	 * ring).  Called after sleep_begin returned false, which published
	 * SLEEPING on both words before its re-check; true fills *also and
	 * the loop sleeps on both (futex_waitv, wait.c, TWO WORDS); false:
	 * one word this time.  Not with *bits. */
	bool (*sleep_also)(void *arg, nemo_futex_word *also);
	/* Optional: the tick stamp of the last kick that issued a FUTEX_WAKE
	 * for this waiter (0 if unknown), so that the adaptive policy learns
	 * what a wake-up costs (policy.c, THE COST OF BLOCKING). */
	uint64_t (*kicked_at)(void *arg);
	/* Optional: someone else's blocking call (nemo_wait_foreign).  Set,
	 * it replaces the sleep: called once when the poll phase ends
	 * without the condition, it waits in that other primitive and
	 * returns 0 (taken) or a positive errno value, which the loop
	 * returns; sleep_begin and sleep_end are then unused. */
	int (*block)(void *arg, clockid_t clock, const struct timespec *abstime);
	int futex_flags;              /* NEMO_FUTEX_PRIVATE / _SHARED */
} nemo__wait_ops;

enum {
	NEMO__WAIT_CANCELLABLE = 1u << 0,  /* a pthread cancellation point */
	NEMO__WAIT_BOOST = 1u << 1,        /* kick mode: real-time priority while asleep */
	NEMO__WAIT_EINTR = 1u << 2,        /* nemo_wait_foreign's NEMO_WAIT_FOREIGN_EINTR */
	NEMO__WAIT_OWNED = 1u << 3,        /* the waiter has a CPU of its own (wait.c, A CPU OF ITS OWN) */
};

/*
 * The one place where a waiter decides how long to poll and when to
 * sleep (src/waiter/wait.c).  Returns 0 once ops->try_take succeeded,
 * ETIMEDOUT, or EINVAL for a policy of unknown kind (bare: the caller
 * says why); with ops->block, also what it returned, and with
 * NEMO__WAIT_EINTR, EINTR (a signal handler ran while it polled).  The caller has validated clock and abstime, and the calling
 * thread has its slot (nemo_waiter_self(): the loop keeps that thread's
 * history and counters in it; without one it waits with neither).
 */
int nemo__wait_loop(const nemo__wait_ops *ops, void *arg, const nemo_wait_policy *p,
		    clockid_t clock, const struct timespec *abstime, unsigned flags);

/* nemo_waiter_wait with the loop's flags (NEMO__WAIT_*), for layers
 * above; the caller has validated clock and abstime. */
int nemo__waiter_wait_flags(nemo_waiter *w, const nemo_wait_policy *p, clockid_t clock,
			    const struct timespec *abstime, unsigned flags);

/* How a waiter spends its poll phase (wait.c, THE PLANS), in ticks: poll
 * in a tight loop for `pure`, then in tight windows of `window` with one
 * sched_yield() before each (window 0: a yield before every poll), until
 * `total` (UINT64_MAX: forever) has passed since the start. */
typedef struct nemo__spin_plan {
	uint64_t pure, window, total;
} nemo__spin_plan;

/* The poll phase of a resolved policy for the calling thread (its
 * history, wait.c, shapes the adaptive plan); flags: the loop's
 * NEMO__WAIT_* (NEMO__WAIT_OWNED lengthens the adaptive budget). */
nemo__spin_plan nemo__spin_plan_for(const nemo_wait_policy *resolved, unsigned flags);

/* The one CPU the calling thread's affinity allows, or -1 (several, or
 * unreadable): one pthread_getaffinity_np; callers cache it (wait.c's
 * history, placewait.c's place_owns_cpu). */
int nemo__only_cpu(void);

/*
 * The slot handshake (waiter.c, THE HANDSHAKE): the only way the layers
 * above change or read a slot's published state.  A waiter of any kind
 * (a slot of the events layer, a place, the progress thread, the
 * watchdog) goes POLLING -> (SLEEPING -> RUNNING)* -> RUNNING through
 * these, and a kicker reads the state with nemo__slot_state.
 */
/* W1: polling (relaxed: a kicker that reads a stale RUNNING or SLEEPING
 * errs on the side of a kick). */
void nemo__slot_polling(nemo_waiter *w);
/* W2-W3: publish SLEEPING (seq_cst exchange) - after reading `shared`,
 * the word shared with other waiters to sleep on, if any (B1) - then ask
 * pending(arg) (its loads seq_cst).  Pending: back to RUNNING, return
 * true, and *word / *val name the slot's own state and SLEEPING, so that
 * a futex_wait on them returns at once.  Else return false with *word,
 * *val, *bits to sleep on: the shared word with the value read and the
 * slot's bit, or the slot's own state word. */
bool nemo__slot_sleep_begin(nemo_waiter *w, _Atomic uint32_t *shared, bool (*pending)(void *), void *arg,
			    uint32_t **word, uint32_t *val, uint32_t *bits);
/* W5: back from futex_wait (or a cancelled sleep): RUNNING, relaxed. */
void nemo__slot_awake(nemo_waiter *w);
/* When a kicker last issued a FUTEX_WAKE for w (ticks; 0: never), for
 * the wait loop's kicked_at op of a layer that sleeps on w's handshake. */
uint64_t nemo__slot_kicked_at(nemo_waiter *w);
/* W6: leaving a wait: no shared word, RUNNING with seq_cst (the caller's
 * re-check after it, if any, is ordered after the store). */
void nemo__slot_running(nemo_waiter *w);
/* The published state, as a kicker reads it (seq_cst). */
uint32_t nemo__slot_state(nemo_waiter *w);

/* Sleep on a word shared with other waiters instead of the slot's own
 * state (waiter.c, SHARED WORD), or on state again (NULL).  Only the
 * owner calls it, between waits or before its handshake's W2; a queue
 * that wants one wake-up to reach many slots (nemo_cond's bseq) sets it
 * when the slot joins the queue. */
void nemo__slot_share(nemo_waiter *w, _Atomic uint32_t *word);

/*
 * THE RAW WORD (waiter.c): the published-state kick and sleep on a bare
 * 32-bit word, for a layer whose sleeper's state lives in memory a slot
 * cannot (a shared segment's place, shared across processes; an MPI
 * progress thread's doorbell; a descriptor's bridge).  The same
 * handshake as a slot's (waiter.c, THE HANDSHAKE): the sleeper publishes
 * SLEEPING (seq_cst), re-checks its condition, sleeps while the word
 * still holds what it published; a kicker makes its condition true,
 * then claims the word (seq_cst load, CAS to RUNNING) and wakes it.
 * flags: NEMO_FUTEX_PRIVATE or NEMO_FUTEX_SHARED (a word in memory
 * other processes map).  These are the only futex calls of the layers
 * above events (tests/check_layers.py).
 */
/* R2-R3 on a raw word: if it holds SLEEPING or `also` (a second sleeping
 * state of the caller's protocol; SLEEPING again if none), CAS it to
 * RUNNING and FUTEX_WAKE one sleeper.  True if this call won the CAS
 * (and woke). */
bool nemo__word_kick(_Atomic uint32_t *word, uint32_t also, int flags);
/* A FUTEX_WAKE of up to n sleepers on word with no claim: for a word
 * whose state the caller already changed (a teardown, a flag that is
 * not a published state). */
void nemo__word_wake(_Atomic uint32_t *word, int n, int flags);
/* W4 on a raw word: sleep while *word == val, at most rel (NULL: no
 * limit).  0 (woken, or the word differed), ETIMEDOUT, EINTR. */
int nemo__word_sleep(_Atomic uint32_t *word, uint32_t val, const struct timespec *rel, int flags);

/* R1 alone: record the releaser's CPU (`cpu`) and store the token, with
 * no kick.  The caller kicks afterwards - nemo__waiter_kick_many over a
 * batch of released slots - and reads nothing of the slot's owner after
 * the store (the owner may return and queue the slot again at once). */
void nemo__waiter_release_only(nemo_waiter *w, int cpu);

/* Wait (spinning) until w's token is set: for an owner that learnt under
 * its queue's lock that a releaser already took it out of the queue, so
 * the release store is in flight and arrives within instructions. */
void nemo__waiter_await_release(nemo_waiter *w);

/* Count a kick of the calling thread: one that had to FUTEX_WAKE
 * (issued) or one that found its target awake (avoided), for
 * nemo_waiter_get_counters.  For a layer with its own futex word
 * (nemo_event). */
void nemo__count_kick(bool issued);

/* nemo_waiter_kick for layers above: returns true if it had to make a
 * FUTEX_WAKE (the target slept), false if the target was awake. */
bool nemo__waiter_kick_issued(nemo_waiter *w);

/* Kick many slots with few syscalls: each sleeping slot is moved to
 * RUNNING by its own CAS; those on a shared word (bword) are woken by one
 * bump and one FUTEX_WAKE_BITSET per word, the others one FUTEX_WAKE
 * each.  Returns how many slots were asleep (woken). */
size_t nemo__waiter_kick_many(nemo_waiter *const *ws, size_t n);

/* Drop the kick-mode boost, if this thread holds it (back to SCHED_OTHER). */
void nemo__boost_leave(void);

/* What blocking costs a waiter, ns (policy.c, THE COST OF BLOCKING): the
 * adaptive budget. */
double nemo__block_cost_ns(void);

/* Samples for it: a woken sleeper's measured wake-up latency, and a
 * kicker's FUTEX_WAKE syscall time. */
void nemo__learn_wake_latency(double ns);
/* Read the profile (or the start values) once: every wait that may sleep
 * calls it first; never from a signal handler. */
void nemo__learned_init(void);
void nemo__learn_kick_cost(double ns);

/* Stamp "a FUTEX_WAKE is issued now" into *at and return the stamp;
 * nemo__kick_done(stamp) then learns the kicker's syscall cost. */
static inline uint64_t nemo__kick_stamp(_Atomic uint64_t *at)
{
	uint64_t t = nemo_ticks();
	atomic_store_explicit(at, t, memory_order_relaxed);
	return t;
}
void nemo__kick_done(uint64_t stamp);

/* Waiter side: the wait of the calling thread that started on CPU `cpu`
 * was released by a thread on CPU `rel_cpu` (-1: unknown); learn whether
 * its releaser ran there too (wait.c, THE HISTORY).  slept: the wait
 * went to sleep before it was released. */
void nemo__learn_releaser(int rel_cpu, int cpu, bool slept);

/* How many times the calling thread's waits went to sleep so far (0
 * before it has a slot): a caller compares two readings to learn whether
 * one wait slept. */
uint64_t nemo__wait_sleeps(void);

/* Validate an absolute deadline: NULL ok; EINVAL if malformed or the
 * clock is neither CLOCK_MONOTONIC nor CLOCK_REALTIME, with the text of
 * a failure of fn, the public call that was given it (fail.h). */
int nemo__check_deadline(const char *fn, clockid_t clock, const struct timespec *abstime);

/* nemo_wait_policy_resolve without a text (a refusal inside a wait is
 * its caller's to explain): 0, or EINVAL for NULL out or a bad kind. */
int nemo__wait_policy_resolve(const nemo_wait_policy *p, nemo_wait_policy *out);

#endif
