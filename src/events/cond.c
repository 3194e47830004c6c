/*
 * cond.c - nemo_cond: pthread_cond_t semantics over per-thread slots.
 *
 * LAYOUT (48 bytes, the size of pthread_cond_t; all-zero = initialised)
 *
 *   0  lock      internal spin lock: 0 free, else (fork generation << 1) | 1
 *   4  gen       fork generation of the queue's contents
 *   8  head      FIFO of waiting threads' records (struct cond_node), by ->next
 *  16  tail
 *  24  spin_ns   wait policy budget (HYBRID)
 *  28  policy    wait policy kind (0 = default)
 *  32  nwaiting  slots in the queue
 *  36  flags     bit 0: process-shared - glibc's bit at glibc's offset; nemo
 *                never sets it, so the interposer can tell a condvar that
 *                glibc initialised as process-shared; bit 1: CLOCK_MONOTONIC
 *                (glibc's bit, too); bit 2: kick mode; bits 8-12: the
 *                broadcast tree's fan-out (0: no tree, flat)
 *  40  bseq      the word queued waiters sleep on (each with its own bit):
 *                a kick bumps it and wakes one bit; a flat broadcast bumps
 *                it and wakes every sleeper with one FUTEX_WAKE
 *  44  wrefs     waiter references: (count << 1) | DESTROY.  count is the
 *                number of waits that may still touch the condvar (from
 *                their enqueue to their last access, before they re-lock
 *                the mutex); DESTROY is set by a destroy that waits for
 *                count to reach 0.  Also a futex word (destroy sleeps on it).
 *
 * The lock protects head, tail, nwaiting, gen and each queued record's
 * `next`.  It is held for a few instructions and never across
 * a syscall.
 *
 * THE RECORD
 *
 * Each waiting thread is queued through its own struct cond_node, a
 * thread-local record this file owns: the queue and tree links, the CPU
 * it queued on, whether a broadcast released it, and its slot (the
 * waiter layer's, reached only through waiter_internal.h: arm, wait,
 * release, kick, the shared word).  A releaser touches a record only
 * before the release store (R1) that lets its owner return: it reads the
 * record's links and slot, writes `by_broadcast`, then releases the slot;
 * after R1 it touches only the slot, which the waiter layer never frees.
 * So a record is never touched after its thread could have left the
 * wait, and a thread-local record is safe even for a thread that exits
 * right after it.
 *
 * LIFETIME (destroy after broadcast)
 *
 * POSIX lets a thread destroy a condvar as soon as no thread is blocked
 * on it, e.g. right after a broadcast returned, or after being woken by
 * one; C++'s ~condition_variable does exactly that.  But a woken waiter
 * still touches the condvar after the broadcast returned: a timed-out
 * waiter takes the lock to leave the queue, a sleeping one reads `bseq`
 * (B1 of waiter.c) or is woken on it, and a tree leader wakes its child
 * groups through `bseq` (below) - the broadcast returns before the deeper
 * waiters have even been released.  So each wait holds a reference:
 *   V1  under the lock, with its enqueue: wrefs += 2 (relaxed: the lock
 *       orders it with destroy's read);
 *   V2  after its last access (queue left or released, children kicked):
 *       old := fetch_sub(wrefs, 2, release); if old == 2|DESTROY,
 *       futex_wake(wrefs, all).
 * and destroy:
 *   X1  lock; if nwaiting != 0: unlock, EBUSY (blocked waiters: nothing
 *       to wait for that is bounded);
 *   X2  v := fetch_or(wrefs, DESTROY, acquire); unlock;
 *   X3  while v >> 1 != 0: futex_wait(wrefs, v); v := load(wrefs, acquire).
 * Why destroy cannot return while a waiter may still touch the condvar:
 * every reference is taken (V1) before destroy's X1 under the same lock,
 * or belongs to a wait that started after destroy (undefined use, as in
 * POSIX).  X3 returns only after reading count 0, i.e. after every V2's
 * fetch_sub in modification order; each V2 follows its wait's last access
 * in program order and is a release, read by X3's acquire.  No wake-up
 * of destroy is lost: the V2 that makes the count 0 sees DESTROY (X2
 * precedes it in wrefs' modification order, or X3 reads 0 at once) and
 * wakes; futex_wait compares the word under the kernel's lock.  The wake
 * in V2 may reach memory that destroy's caller has already freed: a
 * FUTEX_WAKE on a private word never reads or writes it (glibc does the
 * same).  Signal and broadcast themselves hold no reference: POSIX
 * requires them to have returned before destroy, and they touch the
 * condvar only before they return.  models/cond.pml checks V1-V2 and
 * X1-X3 with a tree broadcast, timed waiters and a broken variant.
 *
 * WAIT
 *   arm own slot (token := 0); lock; enqueue; unlock; unlock the mutex;
 *   wait on the slot (nemo__waiter_wait_flags: poll, then sleep - the
 *   handshake of src/waiter/waiter.c); then:
 *     - timed out: lock; if still queued, dequeue and return ETIMEDOUT;
 *       else a signal/broadcast dequeued us and its token store is in
 *       flight: wait for it and return 0 (the signal is not lost);
 *     - kick our broadcast children (below);
 *     - re-acquire the mutex, polling it briefly under polling policies
 *       (the signaller usually still holds it for a few more ns).
 *
 * SIGNAL   if the queue looks empty (acquire load of head), return: any
 *   waiter that entered before this call under the same mutex is visible
 *   (its enqueue happens before its mutex unlock, which happens before our
 *   lock of that mutex).  Else lock; dequeue the head; unlock; release it
 *   (token := 1, then kick only if it sleeps).
 *
 * BROADCAST  lock; detach the whole queue; unlock.  Then, by default
 *   (flat): store every waiter's token - reading each link before the
 *   store that lets its owner return and queue itself again - then one
 *   nemo__waiter_kick_many over them (waiter.c): each sleeping slot is
 *   claimed by its own CAS, and all of them are woken with one bump of
 *   `bseq` and one FUTEX_WAKE_BITSET; polling waiters are released by
 *   their token store alone, and when every waiter polls there is no
 *   syscall at all.  Queued slots sleep on `bseq`, each with its own bit,
 *   so a signal wakes just its waiter (waiter.c, SHARED WORD).  Waiters
 *   are released 32 at a time (one wake per 32).
 *
 *   With a fan-out set (nemo_cond_set_fanout), a tree over CPU groups
 *   instead, when the waiters sit on more CPUs than the fan-out:
 *   1. Group the waiters by the CPU each was on when it queued itself.
 *   2. Build a tree over the groups, breadth-first in order of first
 *      appearance: the broadcaster has `fanout` child groups, and so does
 *      the first waiter (the leader) of every group.
 *   3. Release (token, then kick if asleep) every member of the
 *      broadcaster's child groups; each leader, once awake, releases every
 *      member of its child groups before its wait returns.  A member is
 *      released only by its group's parent, which reads the member's group
 *      link before releasing it: a released member may return and queue
 *      itself again at once, and a newer broadcast rewrites its links
 *      (ThreadSanitizer caught an earlier version that stored every token
 *      up front, so that a leader could follow a rewritten chain and skip
 *      members: a lost wake-up).  The broadcast returns before the deeper
 *      waiters are released: LIFETIME above keeps destroy safe.
 *   Why flat is the default: the tree was the Nemo paper's idea of waking
 *   in parallel, each FUTEX_WAKE issued to another CPU.  Measured on a
 *   16-core KVM guest (Sapphire Rapids), last waiter p50 at K = 15: tree
 *   47-57 us, glibc's condvar 32-33 us, one futex wake-all 16-20 us,
 *   nemo-am's one FUTEX_WAKE_BITSET 25-31 us; the tree's waiters switched
 *   context 1.7-1.8 times per wake (woken, then asleep again on the
 *   mutex).  The kernel already wakes a whole futex queue in one call, and
 *   a tree only adds a wake-up latency per level.  On 2 vCPUs, 8 waiters
 *   on one CPU: tree 34 us, a loop of 8 FUTEX_WAKEs 38 us, glibc 31 us,
 *   one wake of the shared word 28-31 us.  The woken waiters then take
 *   the mutex one after another; relock() polls it (tight, then yielding)
 *   instead of sleeping on it, which is what removes the second context
 *   switch.
 *
 * CANCELLATION  the sleep runs with asynchronous cancellation enabled (the
 *   futex syscall only), and the poll calls pthread_testcancel.  The
 *   cleanup handler leaves the queue, or - if it had been released - kicks
 *   its children and passes a consumed signal on, then re-locks the mutex
 *   before the user's cleanup handlers run.
 *
 * FORK  the child has one thread.  A lock or a queue stamped with an
 *   older fork generation belongs to threads that no longer exist: the
 *   lock is taken over and the queue emptied.
 */
#define _GNU_SOURCE
#include <nemo/event.h>

#include "../waiter/waiter_internal.h"

#include "../platform/fail.h"
#include "../platform/invariant.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <string.h>

#define CF_PSHARED 1u
#define CF_MONOTONIC 2u
#define CF_KICK 4u
#define CF_FANOUT_SHIFT 8
#define CF_FANOUT_MASK (0x1fu << CF_FANOUT_SHIFT)
#define WREF_DESTROY 1u
#define WREF_ONE 2u

/* A waiting thread's record (THE RECORD above), in two lines.  The first
 * is the releasers': they read it, and a broadcast writes `gnext` and
 * `by_broadcast` in it; the owner writes it when it queues itself and
 * reads it again only on a wait's slow paths (timeout, cancellation).
 * The second is the owner's: it reads `nkids` on the way out of every
 * wait, and only a tree broadcast writes there.  So a released waiter's
 * way out touches no line its releaser wrote - the token's line aside -
 * and a signal writes nothing here at all (each write of a releaser into
 * a line its waiter reads next costs that waiter a line transfer; a
 * `queued` flag that every signal and broadcast cleared was one).  A flat
 * broadcast writes one line per waiter, the one it reads anyway. */
struct cond_node {
	nemo_waiter *w;               /* the thread's slot */
	struct cond_node *next;       /* queue link (under the lock); group list in a broadcast */
	struct cond_node *gnext;      /* next member of the same CPU group (broadcast) */
	int cpu;                      /* CPU it was on when it queued itself */
	/* The release came from a broadcast: written by the releaser before
	 * R1 (relaxed), read by the owner only when it abandons a wait. */
	_Atomic uint32_t by_broadcast;
	/* Child groups a tree broadcast gave it: 0 whenever the record is
	 * queued (the owner clears it before it queues itself and when it
	 * has woken them), so a flat broadcast never writes here. */
	_Alignas(NEMO__CACHELINE) int nkids;
	struct cond_node *kids[NEMO_COND_MAX_FANOUT];
};

static __thread _Alignas(NEMO__CACHELINE) struct cond_node cond_self;

struct cond_impl {
	_Atomic uint32_t lock;
	uint32_t gen;
	_Atomic(struct cond_node *) head;
	struct cond_node *tail;
	uint32_t spin_ns;
	uint32_t policy;
	uint32_t nwaiting;
	uint32_t flags;
	_Atomic uint32_t bseq;
	_Atomic uint32_t wrefs;
};

_Static_assert(sizeof(struct cond_impl) == sizeof(nemo_cond), "nemo_cond layout");
_Static_assert(sizeof(nemo_cond) == sizeof(pthread_cond_t), "nemo_cond must match pthread_cond_t");
_Static_assert(offsetof(struct cond_impl, flags) == 36, "flags must sit where glibc keeps __wrefs");

static struct cond_impl *impl(nemo_cond *c)
{
	return (struct cond_impl *)(void *)c;
}

/* The condvar behind cv, or NULL if cv is NULL or was initialised by glibc
 * as process-shared (the interposer routes those; here they are EINVAL). */
static struct cond_impl *checked(nemo_cond *cv)
{
	if (!cv || (impl(cv)->flags & CF_PSHARED))
		return NULL;
	return impl(cv);
}

/* The refusal of a cv that checked() did not accept, under fn's name. */
__attribute__((cold, noinline)) static int not_a_cond(const char *fn, nemo_cond *cv)
{
	if (!cv)
		return nemo__fail(EINVAL, fn, "c is NULL");
	return nemo__fail(EINVAL, fn, "c was initialised by glibc as process-shared, which nemo_cond "
			  "does not serve (the interposer hands such condition variables to glibc)");
}

/* ------------------------------------------------------------------ lock */

static void cond_lock(struct cond_impl *c)
{
	uint32_t gen = atomic_load_explicit(&nemo__fork_gen, memory_order_relaxed) & 0x7fffffffu;
	uint32_t mine = (gen << 1) | 1u;
	for (unsigned n = 0;; n++) {
		uint32_t v = 0;
		if (atomic_compare_exchange_weak_explicit(&c->lock, &v, mine,
							  memory_order_acquire, memory_order_relaxed))
			break;
		/* Held by a thread from before a fork: it does not exist here. */
		if (v != 0 && (v >> 1) != gen &&
		    atomic_compare_exchange_strong_explicit(&c->lock, &v, mine,
							    memory_order_acquire, memory_order_relaxed))
			break;
		if (n < 100)
			nemo_cpu_relax();
		else
			sched_yield();
	}
	if (c->gen != gen) {
		atomic_store_explicit(&c->head, NULL, memory_order_relaxed);
		c->tail = NULL;
		c->nwaiting = 0;
		/* References of threads that do not exist in this process. */
		atomic_store_explicit(&c->wrefs, 0, memory_order_relaxed);
		c->gen = gen;
	}
}

static void cond_unlock(struct cond_impl *c)
{
	atomic_store_explicit(&c->lock, 0, memory_order_release);
}

/* ----------------------------------------------------------- attributes */

int nemo_cond_init(nemo_cond *cv, const pthread_condattr_t *attr)
{
	if (!cv)
		return NEMO__FAIL(EINVAL, "c is NULL");
	uint32_t flags = 0;
	if (attr) {
		int pshared = PTHREAD_PROCESS_PRIVATE;
		clockid_t clk = CLOCK_REALTIME;
		if (pthread_condattr_getpshared(attr, &pshared) != 0 ||
		    pthread_condattr_getclock(attr, &clk) != 0)
			return NEMO__FAIL(EINVAL, "attr is not an initialised pthread_condattr_t");
		if (pshared == PTHREAD_PROCESS_SHARED)
			return NEMO__FAIL(ENOTSUP, "attr is PTHREAD_PROCESS_SHARED: nemo_cond serves "
					  "process-private condition variables only");
		if (clk == CLOCK_MONOTONIC)
			flags |= CF_MONOTONIC;
	}
	memset(cv, 0, sizeof *cv);
	impl(cv)->flags = flags;
	return 0;
}

int nemo_cond_destroy(nemo_cond *cv)
{
	struct cond_impl *c = checked(cv);
	if (!c)
		return not_a_cond(__func__, cv);
	cond_lock(c);                                                         /* X1 */
	if (c->nwaiting != 0) {
		uint32_t n = c->nwaiting;
		cond_unlock(c);
		return NEMO__FAIL(EBUSY, "%u waiter%s still queued (nothing changed: c stays usable)", n,
				  n == 1 ? " is" : "s are");
	}
	uint32_t v = atomic_fetch_or_explicit(&c->wrefs, WREF_DESTROY, memory_order_acquire) |
		     WREF_DESTROY;                                         /* X2 */
	cond_unlock(c);
	while (v >> 1) {                                                      /* X3 */
		nemo_futex_wait((uint32_t *)&c->wrefs, v, NULL, NEMO_FUTEX_PRIVATE);
		v = atomic_load_explicit(&c->wrefs, memory_order_acquire);
	}
	/* Leave the object as a zeroed reference count: re-initialising it
	 * (or reusing it as all-zero) starts clean. */
	atomic_store_explicit(&c->wrefs, 0, memory_order_relaxed);
	return 0;
}

/* V2: this wait is done with the condvar. */
static void wref_put(struct cond_impl *c)
{
	uint32_t old = atomic_fetch_sub_explicit(&c->wrefs, WREF_ONE, memory_order_release);
	NEMO__INVARIANT(old >= WREF_ONE, "a wait drops a reference it did not take (V1-V2)");
	if (old == (WREF_ONE | WREF_DESTROY))
		nemo_futex_wake((uint32_t *)&c->wrefs, INT_MAX, NEMO_FUTEX_PRIVATE, NULL);
}

int nemo_cond_set_policy(nemo_cond *cv, const nemo_wait_policy *p)
{
	if (!cv)
		return NEMO__FAIL(EINVAL, "c is NULL");
	if (p && (p->kind < NEMO_WAIT_DEFAULT || p->kind > NEMO_WAIT_ADAPTIVE))
		return NEMO__FAIL(EINVAL, "policy kind %d is not a nemo_wait_kind", (int)p->kind);
	impl(cv)->policy = p ? (uint32_t)p->kind : 0;
	impl(cv)->spin_ns = p ? p->spin_ns : 0;
	return 0;
}

int nemo_cond_set_kick(nemo_cond *cv, bool on)
{
	if (!cv)
		return NEMO__FAIL(EINVAL, "c is NULL");
	if (on)
		impl(cv)->flags |= CF_KICK;
	else
		impl(cv)->flags &= ~CF_KICK;
	return 0;
}

int nemo_cond_set_fanout(nemo_cond *cv, int fanout)
{
	if (!cv)
		return NEMO__FAIL(EINVAL, "c is NULL");
	if (fanout < 0 || fanout > NEMO_COND_MAX_FANOUT)
		return NEMO__FAIL(EINVAL, "fanout %d is outside 0..%d (0: no tree)", fanout,
				  NEMO_COND_MAX_FANOUT);
	struct cond_impl *c = impl(cv);
	c->flags = (c->flags & ~CF_FANOUT_MASK) | ((uint32_t)fanout << CF_FANOUT_SHIFT);
	return 0;
}

/* The tree's fan-out, or 0: flat (the default). */
static int fanout_of(const struct cond_impl *c)
{
	return (int)((c->flags & CF_FANOUT_MASK) >> CF_FANOUT_SHIFT);
}

/* ------------------------------------------------------------ the queue */

static void enqueue(struct cond_impl *c, struct cond_node *w)
{
	w->next = NULL;
	w->cpu = sched_getcpu();
	nemo__slot_share(w->w, &c->bseq);
	if (c->tail)
		c->tail->next = w;
	else
		atomic_store_explicit(&c->head, w, memory_order_release);
	c->tail = w;
	c->nwaiting++;
}

static struct cond_node *dequeue_head(struct cond_impl *c)
{
	struct cond_node *w = atomic_load_explicit(&c->head, memory_order_relaxed);
	if (!w)
		return NULL;
	atomic_store_explicit(&c->head, w->next, memory_order_relaxed);
	if (!w->next)
		c->tail = NULL;
	NEMO__INVARIANT(c->nwaiting > 0, "a queued record is not counted in nwaiting");
	c->nwaiting--;
	return w;
}

/* Leave the queue if still in it (true); else a releaser dequeued us: wait
 * for its token store, which is in flight (false).  Whether we are still
 * queued is found by walking the queue under the lock, not kept in a flag:
 * a flag would be one more store of every releaser into our record
 * (THE RECORD), and only a timed-out or cancelled wait needs the answer. */
static bool leave_queue(struct cond_impl *c, struct cond_node *w)
{
	cond_lock(c);
	struct cond_node *prev = NULL, *p = atomic_load_explicit(&c->head, memory_order_relaxed);
	while (p && p != w) {
		prev = p;
		p = p->next;
	}
	bool was = p == w;
	if (was) {
		if (prev)
			prev->next = w->next;
		else
			atomic_store_explicit(&c->head, w->next, memory_order_relaxed);
		if (c->tail == w)
			c->tail = prev;
		c->nwaiting--;
	}
	cond_unlock(c);
	if (!was)
		nemo__waiter_await_release(w->w);
	return was;
}

/* Release every member of one CPU group: token, then a kick only if it
 * sleeps.  Each link is read before the release that lets its owner
 * return and queue itself again (rewriting it): until its release, a
 * member cannot move, so the chain is stable while we walk it. */
static void release_group(struct cond_node *head)
{
	for (struct cond_node *m = head, *next; m; m = next) {
		next = m->gnext;
		nemo_waiter *slot = m->w;
		atomic_store_explicit(&m->by_broadcast, 1, memory_order_relaxed);
		nemo_waiter_release(slot);
	}
}

/* The child groups a broadcast gave us: release all their members. */
static void wake_kids(struct cond_node *w)
{
	int n = w->nkids;
	w->nkids = 0;
	for (int i = 0; i < n; i++)
		release_group(w->kids[i]);
}

/* --------------------------------------------------------------- waiting */

static void policy_of(const struct cond_impl *c, nemo_wait_policy *out)
{
	nemo_wait_policy p = { (nemo_wait_kind)c->policy, c->spin_ns };
	if (nemo__wait_policy_resolve(&p, out) != 0)
		*out = (nemo_wait_policy){ NEMO_WAIT_ADAPTIVE, 0 };
}

/* Re-acquire the mutex.  Under a polling policy, poll it first, as the
 * wait itself polls (wait.c, THE PLANS; at most 50 us): the signaller
 * typically unlocks it a few hundred ns after our release, and sleeping
 * on it would cost a full block+wake.  It always follows a wait loop,
 * which has initialised the clock that the plan's ticks need. */
static int relock(pthread_mutex_t *m, const nemo_wait_policy *p)
{
	nemo__spin_plan plan = nemo__spin_plan_for(p, 0);
	uint64_t cap = nemo_ns_to_ticks(50000);
	if (plan.total) {
		uint64_t start = nemo_ticks();
		uint64_t end = start + (plan.total < cap ? plan.total : cap);
		uint64_t win_end = start + plan.pure;
		for (;;) {
			int err = pthread_mutex_trylock(m);
			if (err != EBUSY)
				return err;
			uint64_t now = nemo_ticks();
			if (now >= end)
				break;
			if (now >= win_end) {
				sched_yield();
				win_end = nemo_ticks() + plan.window;
			} else {
				for (int i = 0; i < 16; i++)
					nemo_cpu_relax();
			}
		}
	}
	return pthread_mutex_lock(m);
}

struct cancel_ctx {
	struct cond_impl *c;
	pthread_mutex_t *m;
	struct cond_node *w;
	bool kick;
};

/* A wait that ends before its sleep (the mutex would not unlock) or
 * during it (cancelled): leave the queue, or - if a signal or broadcast
 * already took us out of it - do what the releaser expects of a woken
 * waiter: kick our broadcast children and pass on a consumed signal.
 * Then drop the reference (V2).  The slot stops naming the condvar. */
static void abandon(struct cond_impl *c, struct cond_node *w)
{
	nemo__slot_share(w->w, NULL);
	if (!leave_queue(c, w)) {
		wake_kids(w);
		/* We consumed a signal meant for a waiter: pass it on. */
		if (!atomic_load_explicit(&w->by_broadcast, memory_order_relaxed))
			nemo_cond_signal((nemo_cond *)(void *)c);
	}
	wref_put(c);
}

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
/* Cancellation left the frames of the wait (the loop, the futex call)
 * without running their epilogues, so their red zones are still poisoned
 * below our stack pointer.  GCC 12's AddressSanitizer then reports its own
 * write into that dead area when the unwinding goes on
 * (__asan_handle_no_return -> sigaltstack: google/sanitizers#1399), a
 * false report whose place depends on the frames' layout.  Unpoison the
 * dead area (shadow memory only; nothing there is live). */
static void unpoison_dead_frames(void)
{
	char *sp = __builtin_frame_address(0);
	__asan_unpoison_memory_region(sp - 16384, 16384);
}
#else
static void unpoison_dead_frames(void)
{
}
#endif

static void on_cancel(void *arg)
{
	struct cancel_ctx *x = arg;
	unpoison_dead_frames();
	if (x->kick)
		nemo__boost_leave();   /* cleanup handlers run at normal priority */
	nemo__slot_awake(x->w->w);
	abandon(x->c, x->w);
	pthread_mutex_lock(x->m);
}

/* The mutex would not lock again after the wait (fn: the call made). */
__attribute__((cold, noinline)) static int relock_failed(const char *fn, int err)
{
	if (err == EOWNERDEAD)
		return nemo__fail(err, fn, "m's owner died: m is locked again, and its state must be made "
				  "consistent (pthread_mutex_consistent)");
	return nemo__fail(err, fn, "m could not be locked again after the wait (pthread_mutex_lock)");
}

/* nemo_cond_clockwait, refusing under fn's name (the call the user made). */
static int cond_wait(const char *fn, nemo_cond *cv, pthread_mutex_t *m, clockid_t clock,
		     const struct timespec *abstime)
{
	struct cond_impl *c = checked(cv);
	if (!c)
		return not_a_cond(fn, cv);
	if (!m)
		return nemo__fail(EINVAL, fn, "m is NULL");
	int err = nemo__check_deadline(fn, clock, abstime);
	if (err)
		return err;
	pthread_testcancel();
	struct cond_node *w = &cond_self;
	/* The slot is used from this local after the release: the record's
	 * first line is the releaser's then (THE RECORD). */
	nemo_waiter *self = nemo_waiter_self();
	if (!self)
		return nemo__fail(ENOMEM, fn, "cannot allocate the calling thread's slot");
	w->w = self;
	nemo_wait_policy pol;
	policy_of(c, &pol);
	bool kick = c->flags & CF_KICK;

	nemo_waiter_arm(self);
	atomic_store_explicit(&w->by_broadcast, 0, memory_order_relaxed);
	w->nkids = 0;
	cond_lock(c);
	enqueue(c, w);
	atomic_fetch_add_explicit(&c->wrefs, WREF_ONE, memory_order_relaxed);  /* V1 */
	cond_unlock(c);
	err = pthread_mutex_unlock(m);
	if (err) {
		abandon(c, w);
		return nemo__fail(err, fn, "m could not be unlocked (does the calling thread hold it?): "
				  "nothing waited");
	}

	struct cancel_ctx ctx = { c, m, w, kick };
	int rc;
	pthread_cleanup_push(on_cancel, &ctx);
	rc = nemo__waiter_wait_flags(self, &pol, clock, abstime,
				     NEMO__WAIT_CANCELLABLE | (kick ? NEMO__WAIT_BOOST : 0));
	pthread_cleanup_pop(0);
	/* Later plain waits of this slot sleep on state. */
	nemo__slot_share(self, NULL);
	if (rc == ETIMEDOUT && !leave_queue(c, w))
		rc = 0;          /* released while timing out: the wake-up counts */
	wake_kids(w);
	wref_put(c);     /* V2: the condvar may be destroyed from here on */
	err = relock(m, &pol);
	if (__builtin_expect(err != 0, 0))
		return relock_failed(fn, err);
	return rc;           /* ETIMEDOUT is an outcome: no text (fail.h) */
}

int nemo_cond_clockwait(nemo_cond *cv, pthread_mutex_t *m, clockid_t clock,
			const struct timespec *abstime)
{
	return cond_wait(__func__, cv, m, clock, abstime);
}

int nemo_cond_timedwait(nemo_cond *cv, pthread_mutex_t *m, const struct timespec *abstime)
{
	if (!cv)
		return NEMO__FAIL(EINVAL, "c is NULL");
	if (!abstime)
		return NEMO__FAIL(EINVAL, "abstime is NULL (nemo_cond_wait waits without a deadline)");
	clockid_t clk = (impl(cv)->flags & CF_MONOTONIC) ? CLOCK_MONOTONIC : CLOCK_REALTIME;
	return cond_wait(__func__, cv, m, clk, abstime);
}

int nemo_cond_wait(nemo_cond *cv, pthread_mutex_t *m)
{
	return cond_wait(__func__, cv, m, CLOCK_MONOTONIC, NULL);
}

/* ------------------------------------------------------------ releasing */

/* The start of a signal or broadcast (fn): NULL with *err set for a cv
 * that checked() refuses, NULL with *err 0 when the queue looks empty
 * (SIGNAL above: nothing to release), else the condvar, locked. */
static struct cond_impl *release_begin(const char *fn, nemo_cond *cv, int *err)
{
	*err = 0;
	struct cond_impl *c = checked(cv);
	if (!c) {
		*err = not_a_cond(fn, cv);
		return NULL;
	}
	if (!atomic_load_explicit(&c->head, memory_order_acquire))
		return NULL;
	cond_lock(c);
	return c;
}

int nemo_cond_signal(nemo_cond *cv)
{
	int err;
	struct cond_impl *c = release_begin(__func__, cv, &err);
	if (!c)
		return err;
	struct cond_node *w = dequeue_head(c);
	cond_unlock(c);
	if (w) {
		/* by_broadcast stays the 0 its owner stored before it queued
		 * itself: no write to the record, which the owner's CPU holds
		 * (the store cost a second line transfer, +30 ns a signal).
		 * The slot's address is loaded from the record, a line transfer
		 * before the token's.  Releasing sooner (the record inside the
		 * slot, its address by arithmetic) made the polled one-way
		 * hand-off 75 ns faster and the condvar ping-pong of
		 * nemo-handoff 20-25% slower: the waiter, released sooner,
		 * drops its reference (V2, an RMW on the condvar's line) while
		 * this thread, back in nemo_cond_wait, queues itself on that
		 * line (docs/events.md, "Release timing"). */
		nemo_waiter *slot = w->w;   /* read before R1: the record may go after it */
		nemo_waiter_release(slot);
	}
	return 0;
}

/* The flat broadcast over groups (linked by `next`) of members (linked
 * by `gnext`): tokens, then one nemo__waiter_kick_many per 32 waiters. */
static void broadcast_flat(struct cond_node *groups)
{
	enum { CHUNK = 32 };
	nemo_waiter *ws[CHUNK];
	struct cond_node *g = groups, *m = groups;
	while (m) {
		size_t n = 0;
		/* Collect (reading every link) before releasing any of them. */
		while (m && n < CHUNK) {
			ws[n++] = m->w;
			atomic_store_explicit(&m->by_broadcast, 1, memory_order_relaxed);
			if (m->gnext) {
				m = m->gnext;
			} else {
				g = g->next;
				m = g;
			}
		}
		int cpu = sched_getcpu();
		for (size_t i = 0; i < n; i++)
			nemo__waiter_release_only(ws[i], cpu);                     /* R1 */
		nemo__waiter_kick_many(ws, n);                               /* R2, R3, K1-K3 */
	}
}

int nemo_cond_broadcast(nemo_cond *cv)
{
	int err;
	struct cond_impl *c = release_begin(__func__, cv, &err);
	if (!c)
		return err;
	struct cond_node *list = atomic_load_explicit(&c->head, memory_order_relaxed);
	atomic_store_explicit(&c->head, NULL, memory_order_relaxed);
	c->tail = NULL;
	c->nwaiting = 0;
	cond_unlock(c);
	if (!list)
		return 0;

	int fan = fanout_of(c);
	if (!fan) {
		/* Flat: one group of everyone, in queue order. */
		for (struct cond_node *w = list; w; w = w->next) {
			NEMO__INVARIANT(w->nkids == 0, "a queued record has no child groups");
			w->gnext = w->next;
		}
		list->next = NULL;
		broadcast_flat(list);
		return 0;
	}

	/* 1. Groups by CPU, in order of first appearance (heads linked by
	 * `next` reused as the group list once detached; members by gnext). */
	struct cond_node *groups = NULL, *gtail = NULL;
	for (struct cond_node *w = list, *next; w; w = next) {
		next = w->next;
		NEMO__INVARIANT(w->nkids == 0, "a queued record has no child groups");
		w->gnext = NULL;
		struct cond_node *g = groups;
		while (g && g->cpu != w->cpu)
			g = g->next;
		if (g) {                        /* append to its group */
			struct cond_node *t = g;
			while (t->gnext)
				t = t->gnext;
			t->gnext = w;
		} else {                        /* a new group, w leads it */
			w->next = NULL;
			if (gtail)
				gtail->next = w;
			else
				groups = w;
			gtail = w;
		}
	}
	int ngroups = 0;
	for (struct cond_node *g = groups; g; g = g->next)
		ngroups++;
	if (ngroups <= fan) {
		broadcast_flat(groups);   /* nothing to parallelise */
		return 0;
	}
	/* 2. The tree over groups, breadth-first: `parent` trails behind. */
	struct cond_node *root[NEMO_COND_MAX_FANOUT];
	int nroot = 0;
	struct cond_node *parent = NULL;
	for (struct cond_node *g = groups; g; g = g->next) {
		if (!parent && nroot < fan) {
			root[nroot++] = g;
			continue;
		}
		if (!parent)
			parent = groups;
		if (parent->nkids == fan)
			parent = parent->next;
		parent->kids[parent->nkids++] = g;
	}
	/* 3. Release the broadcaster's child groups; their leaders release
	 * theirs (wake_kids), and so on down the tree. */
	for (int i = 0; i < nroot; i++)
		release_group(root[i]);
	return 0;
}
