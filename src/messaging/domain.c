/*
 * domain.c - domains and places: creation, joining, leaving, destruction
 * and counters.  (Interrupt mode's signal handler is in irq.c.)
 *
 * Lifetimes.  Everything a sender may touch while sending (the place
 * records, hint words, queues) is allocated when the domain is created
 * and freed only when it is destroyed, which requires that no place is
 * left - and only places send.  A place record is reused by the next
 * occupant of its index with the next generation: senders compare the
 * status word (generation and state) before and after enqueueing
 * (send.c, S0 and S3), and entries carry the receiver's generation tag,
 * so nothing meant for one occupant ever reaches the next.
 *
 * A destroyed domain keeps its small header, marked dead, so that a stale
 * pointer gives EIDRM instead of a use after free.  Big arrays are mapped
 * with MAP_NORESERVE: a domain of 64 places with 256-slot rings reserves
 * 16 MiB of address space but touches only the pages its pairs use.
 */
#define _GNU_SOURCE
#include "messaging_internal.h"
#include "remote.h"


#include <errno.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* NEMO_POLL_CHECK's deadline (src/poll/poll.c): never, outside a place. */
__thread uint64_t nemo__poll_due __attribute__((tls_model("initial-exec"))) = UINT64_MAX;
#define tls_place nemo__tls_place

nemo_place_id nemo_place_self(void)
{
	nemo_place *me = tls_place;
	if (me)
		return me->id;
	/* A place of a shared domain's (remote.h), or none. */
	nemo_place_id id = NEMO_PLACE_NONE;
	if (nemo__remote_self(NEMO__SELF_ID, &(nemo__remote_self_args){ .self_id = &id }, NULL) != 0)
		return NEMO_PLACE_NONE;
	return id;
}

int nemo_dead_places(nemo_place_id *ids, size_t cap, size_t *n, uint64_t *total)
{
	if (!n || (cap && !ids))
		return NEMO__FAIL(EINVAL, "%s", !n ? "n is NULL" : "ids is NULL with cap > 0");
	*n = 0;
	uint64_t t = 0;
	int rc = nemo__remote_dead(ids, cap, n, &t);
	if (total)
		*total = t;
	return rc;
}

nemo_domain *nemo_place_domain(void)
{
	nemo_place *me = tls_place;
	return me ? me->d : NULL;
}

int nemo__domain_check_in(const struct nemo_domain *d, const char *fn)
{
	if (!d)
		return nemo__fail(EINVAL, fn, "the domain is NULL");
	uint32_t m = atomic_load_explicit(&d->magic, memory_order_acquire);
	if (m == NEMO__DOMAIN_DEAD)
		return nemo__fail(EIDRM, fn, "the domain was destroyed");
	return m == NEMO__DOMAIN_MAGIC ? 0 : nemo__fail(EINVAL, fn, "not a nemo domain (uninitialised or corrupted)");
}

/* ----------------------------------------------------------- memory */

static void *big_alloc(size_t size)
{
	void *p = mmap(NULL, size ? size : 1, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void big_free(void *p, size_t size)
{
	if (p)
		munmap(p, size ? size : 1);
}

/* Sizes of the arrays of a domain. */
struct sizes {
	size_t places, hints, links, rings, out, in, adt, alt, stamps;
};

static struct sizes sizes_of(const struct nemo_domain *d)
{
	size_t P = d->P, pairs = P * P;
	return (struct sizes){
		.places = P * sizeof(nemo_place),
		.hints = 2 * P * d->hw_stride * sizeof(uint64_t),   /* hints, then grants */
		.links = pairs * sizeof(nemo__link),
		.rings = pairs * d->R * sizeof(nemo__slot),
		.out = pairs * sizeof(nemo__out),
		.in = pairs * sizeof(nemo__in),
		.adt = (size_t)d->A * sizeof(nemo__action),
		.alt = P * d->E * sizeof(uint32_t),
		.stamps = (d->flags & NEMO_DOMAIN_DELAYS) ? pairs * d->R * sizeof(uint64_t) : 0,
	};
}

static void free_arrays(struct nemo_domain *d)
{
	struct sizes z = sizes_of(d);
	big_free(d->places, z.places);
	big_free((void *)d->hints, z.hints);
	big_free(d->links, z.links);
	big_free(d->rings, z.rings);
	big_free(d->out, z.out);
	big_free(d->in, z.in);
	big_free(d->adt, z.adt);
	big_free((void *)d->alt, z.alt);
	if (d->stamps)
		big_free(d->stamps, z.stamps);
	d->stamps = NULL;
	d->places = NULL;
	d->hints = NULL;
	d->links = NULL;
	d->rings = NULL;
	d->out = NULL;
	d->in = NULL;
	d->adt = NULL;
	d->alt = NULL;
}

/* ----------------------------------------------------------- domains */

static bool signal_usable(int sig)
{
	/* Not the ones the kernel or the C library own, nor SIGKILL/SIGSTOP. */
	if (sig <= 0 || sig >= SIGRTMAX + 1)
		return false;
	return sig != SIGKILL && sig != SIGSTOP && sig != SIGSEGV && sig != SIGBUS &&
	       sig != SIGFPE && sig != SIGILL && sig != SIGABRT && !(sig >= 32 && sig < SIGRTMIN);
}

int nemo_domain_create(const nemo_domain_attr *attr, nemo_domain **out)
{
	if (!out)
		return NEMO__FAIL(EINVAL, "out is NULL");
	nemo__asym_setup();
	nemo_domain_attr a = attr ? *attr : (nemo_domain_attr){ 0 };
	if (!a.max_places)
		a.max_places = 64;
	if (!a.ring_slots)
		a.ring_slots = 256;
	if (!a.max_actions)
		a.max_actions = 256;
	if (!a.max_events)
		a.max_events = 256;
	if (!a.irq_signal)
		a.irq_signal = SIGURG;
	if (!a.overflow_max)
		a.overflow_max = 65536;
	if (a.flags & ~(unsigned)NEMO_DOMAIN_DELAYS)
		return NEMO__FAIL(EINVAL, "flags 0x%x: unknown bits 0x%x (NEMO_DOMAIN_DELAYS)", a.flags,
				  a.flags & ~(unsigned)NEMO_DOMAIN_DELAYS);
	if (a.overflow_max > NEMO_OVERFLOW_MAX)
		return NEMO__FAIL(EINVAL, "overflow_max %u is above %u", a.overflow_max, NEMO_OVERFLOW_MAX);
	if (a.max_places > NEMO_PLACES_MAX)
		return NEMO__FAIL(EINVAL, "max_places %u is above %u", a.max_places, NEMO_PLACES_MAX);
	if (a.ring_slots < 8 || a.ring_slots > 32768 || (a.ring_slots & (a.ring_slots - 1)))
		return NEMO__FAIL(EINVAL, "ring_slots %u is not a power of two from 8 to 32768", a.ring_slots);
	if (a.max_actions > NEMO_AM_ACTIONS_MAX)
		return NEMO__FAIL(EINVAL, "max_actions %u is above %u", a.max_actions, NEMO_AM_ACTIONS_MAX);
	if (a.max_events > NEMO_AM_EVENTS_MAX)
		return NEMO__FAIL(EINVAL, "max_events %u is above %u", a.max_events, NEMO_AM_EVENTS_MAX);
	if (!signal_usable(a.irq_signal))
		return NEMO__FAIL(EINVAL, "irq_signal %d cannot be used (SIGKILL, SIGSTOP, a fault signal, "
					  "or a number glibc reserves)", a.irq_signal);

	struct nemo_domain *d = aligned_alloc(NEMO__CACHELINE, NEMO__LINES(sizeof *d));
	if (!d)
		return ENOMEM;
	memset(d, 0, sizeof *d);
	pthread_mutex_init(&d->lock, NULL);
	d->P = a.max_places;
	d->R = a.ring_slots;
	d->Rbits = (unsigned)__builtin_ctz(a.ring_slots);
	d->A = a.max_actions;
	d->E = a.max_events;
	d->sig = a.irq_signal;
	d->ovf_max = a.overflow_max;
	d->flags = a.flags;
	d->HW = (d->P + 63) / 64;
	d->hw_stride = (d->HW + 7) / 8 * 8;        /* whole cache lines per receiver */
	d->grant_off = (size_t)d->P * d->hw_stride;
	struct sizes z = sizes_of(d);
	d->places = big_alloc(z.places);
	d->hints = big_alloc(z.hints);
	d->links = big_alloc(z.links);
	d->rings = big_alloc(z.rings);
	d->out = big_alloc(z.out);
	d->in = big_alloc(z.in);
	d->adt = big_alloc(z.adt);
	d->alt = big_alloc(z.alt);
	if (z.stamps)
		d->stamps = big_alloc(z.stamps);
	if (!d->places || !d->hints || !d->links || !d->rings || !d->out || !d->in || !d->adt || !d->alt ||
	    (z.stamps && !d->stamps)) {
		free_arrays(d);
		pthread_mutex_destroy(&d->lock);
		free(d);
		return ENOMEM;
	}
	/* Zero pages are a valid empty state: every status FREE with
	 * generation 0, every queue empty, every table unmapped. */
	for (unsigned i = 0; i < d->P; i++) {
		d->places[i].idx = i;
		d->places[i].d = d;
		atomic_store_explicit(&d->places[i].efd, -1, memory_order_relaxed);
		pthread_mutex_init(&d->places[i].plock, NULL);
	}
	atomic_store_explicit(&d->magic, NEMO__DOMAIN_MAGIC, memory_order_release);
	*out = d;
	return 0;
}

/* Headers of destroyed domains (about 200 bytes each). */
static pthread_mutex_t dead_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nemo_domain *dead_domains;

int nemo_domain_destroy(nemo_domain *d)
{
	int err = nemo__domain_check(d);
	if (err)
		return err;
	pthread_mutex_lock(&d->lock);
	if (atomic_load_explicit(&d->magic, memory_order_relaxed) != NEMO__DOMAIN_MAGIC) {
		pthread_mutex_unlock(&d->lock);
		return NEMO__FAIL(EIDRM, "the domain was destroyed already");
	}
	if (d->nplaces) {
		unsigned n = d->nplaces;
		pthread_mutex_unlock(&d->lock);
		return NEMO__FAIL(EBUSY, "%u places are still joined: each must leave first", n);
	}
	if (d->progress || d->watchdog) {
		pthread_mutex_unlock(&d->lock);
		return NEMO__FAIL(EBUSY, "its %s still runs (%s first)", d->progress ? "progress thread" : "watchdog",
				  d->progress ? "nemo_progress_stop" : "nemo_watchdog_stop");
	}
	atomic_store_explicit(&d->magic, NEMO__DOMAIN_DEAD, memory_order_release);
	free_arrays(d);
	pthread_mutex_unlock(&d->lock);
	/* The header stays (see the top of this file), on a list so that it
	 * stays reachable: kept on purpose, not leaked. */
	pthread_mutex_lock(&dead_lock);
	d->dead_next = dead_domains;
	dead_domains = d;
	pthread_mutex_unlock(&dead_lock);
	return 0;
}

int nemo_domain_get_counters(nemo_domain *d, nemo_domain_counters *out)
{
	int err = nemo__domain_check(d);
	if (err)
		return err;
	if (!out)
		return NEMO__FAIL(EINVAL, "out is NULL");
	memset(out, 0, sizeof *out);
	pthread_mutex_lock(&d->lock);
	if (d->places) {
		for (unsigned i = 0; i < d->P; i++) {
			nemo_place *p = &d->places[i];
#define SUM(f, c) out->f += atomic_load_explicit(&p->c, memory_order_relaxed)
			SUM(am_sent, c_am_sent);
			SUM(am_handled, c_am_handled);
			SUM(notify_sent, c_nf_sent);
			SUM(notify_handled, c_nf_handled);
			SUM(kicks_futex, c_kicks_futex);
			SUM(kicks_signal, c_kicks_signal);
			SUM(kicks_avoided, c_kicks_avoided);
			SUM(kicks_skipped, c_kicks_skipped);
			SUM(grants, c_grants);
			SUM(grant_revokes, c_grant_revokes);
			SUM(room_kicks, c_room_kicks);
			SUM(full_waits, c_full_waits);
			SUM(send_failures, c_send_failures);
			SUM(interrupts, c_interrupts);
			SUM(sleeps, c_sleeps);
			SUM(overflowed, c_overflowed);
			SUM(overflow_dropped, c_ovf_dropped);
			SUM(kicks_fd, c_kicks_fd);
			SUM(poll_checks, c_poll_checks);
			SUM(kicks_deferred, c_kicks_deferred);
#undef SUM
		}
	}
	pthread_mutex_unlock(&d->lock);
	return 0;
}

int nemo_place_check(nemo_domain *d, nemo_place_id id)
{
	int err = nemo__domain_check(d);
	if (err)
		return err;
	uint64_t st;
	return nemo__dest(d, id, &st) ? 0 : ESRCH;
}

int nemo_domain_places(nemo_domain *d, nemo_place_id *ids, size_t cap, size_t *n)
{
	int err = nemo__domain_check(d);
	if (err)
		return err;
	if (!n || (cap && !ids))
		return NEMO__FAIL(EINVAL, !n ? "n is NULL" : "ids is NULL with cap %zu", cap);
	size_t k = 0;
	pthread_mutex_lock(&d->lock);
	if (d->places) {
		for (unsigned i = 0; i < d->P; i++) {
			uint64_t s = atomic_load_explicit(&d->places[i].status, memory_order_acquire);
			if (nemo__status_state(s) != NEMO__ST_ACTIVE)
				continue;
			if (k < cap)
				ids[k] = nemo__make_id(i, nemo__status_gen(s));
			k++;
		}
	}
	pthread_mutex_unlock(&d->lock);
	*n = k;
	return 0;
}

/* ------------------------------------------------------------- places */

static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

/* A thread that exits while a place leaves first: its queued messages
 * are handled, not stranded. */
static void place_thread_exit(void *p)
{
	(void)p;
	if (tls_place) {
		atomic_store_explicit(&tls_place->busy, 0, memory_order_relaxed);
		nemo_place_leave();
	}
}

static void exit_key_init(void)
{
	pthread_key_create(&exit_key, place_thread_exit);
}

int nemo_place_set_policy(const nemo_wait_policy *p)
{
	nemo_place *me = tls_place;
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	if (!p)
		return NEMO__FAIL(EINVAL, "the policy is NULL");
	if (p->kind < NEMO_WAIT_DEFAULT || p->kind > NEMO_WAIT_ADAPTIVE)
		return NEMO__FAIL(EINVAL, "policy kind %d is not a nemo_wait_kind", (int)p->kind);
	me->policy = *p;
	return 0;
}

int nemo_place_join(nemo_domain *d, const nemo_place_attr *attr, nemo_place_id *id)
{
	int err = nemo__domain_check(d);
	if (err)
		return err;
	nemo_place_attr a = attr ? *attr : (nemo_place_attr){ 0 };
	if (a.flags & ~(unsigned)(NEMO_PLACE_PIN | NEMO_PLACE_INTERRUPTS))
		return NEMO__FAIL(EINVAL, "flags 0x%x: unknown bits 0x%x (NEMO_PLACE_PIN, NEMO_PLACE_INTERRUPTS)",
				  a.flags, a.flags & ~(unsigned)(NEMO_PLACE_PIN | NEMO_PLACE_INTERRUPTS));
	if (a.policy.kind < NEMO_WAIT_DEFAULT || a.policy.kind > NEMO_WAIT_ADAPTIVE)
		return NEMO__FAIL(EINVAL, "policy kind %d is not a nemo_wait_kind", (int)a.policy.kind);
	if (tls_place)
		return NEMO__FAIL(EALREADY, "the calling thread is already a place (%#llx)",
				  (unsigned long long)nemo_place_self());
	nemo_waiter *w = nemo_waiter_self();
	if (!w)
		return ENOMEM;
	if (a.flags & NEMO_PLACE_INTERRUPTS) {
		err = nemo__irq_install(d->sig);
		if (err)
			return NEMO__FAIL(err, "interrupt mode: signal %d has a handler that is not nemo's", d->sig);
	}
	pthread_once(&exit_once, exit_key_init);

	cpu_set_t old;
	bool pinned = false;
	if (a.flags & NEMO_PLACE_PIN) {
		if (a.cpu < 0)
			return NEMO__FAIL(EINVAL, "NEMO_PLACE_PIN with cpu %d", a.cpu);
		if (sched_getaffinity(0, sizeof old, &old) != 0)
			return NEMO__FAIL(errno, "cannot read the thread's affinity");
		err = nemo_pin_self(a.cpu);
		if (err)
			return NEMO__FAIL(err, "cannot pin to cpu %d (not online, or not allowed to this process)", a.cpu);
		pinned = true;
	}

	pthread_mutex_lock(&d->lock);
	if (atomic_load_explicit(&d->magic, memory_order_relaxed) != NEMO__DOMAIN_MAGIC) {
		err = EIDRM;
	} else {
		err = ENOSPC;
		for (unsigned i = 0; i < d->P; i++) {
			nemo_place *p = &d->places[i];
			uint64_t s = atomic_load_explicit(&p->status, memory_order_relaxed);
			if (nemo__status_state(s) != NEMO__ST_FREE)
				continue;
			/* The next generation; 0 is skipped at the wrap (2^48
			 * joins), so that a sender-generation word of 0 names
			 * no occupant. */
			uint64_t gen = (nemo__status_gen(s) + 1) & NEMO__GEN_MASK;
			if (!gen)
				gen = 1;
			p->gen = gen;
			p->id = nemo__make_id(i, gen);
			atomic_store_explicit(&p->busy, 0, memory_order_relaxed);
			atomic_store_explicit(&p->irq_pending, 0, memory_order_relaxed);
			p->serve_depth = 0;
			p->hdepth = 0;
			p->wf_word = NULL;
			p->user_ctx = a.context;
			p->guest = false;
			p->pc.thresh_ns = NEMO__POLL_THRESHOLD_DEFAULT_NS;
			p->pc.thresh_ticks = 0;     /* set below, with the clock */
			p->pc.next = 0;
			atomic_store_explicit(&p->wd_ticks, 0, memory_order_relaxed);
			atomic_store_explicit(&p->wd_since, 0, memory_order_relaxed);
			atomic_store_explicit(&p->delegated, 0, memory_order_relaxed);
			atomic_store_explicit(&p->dl_count, 0, memory_order_relaxed);
			atomic_store_explicit(&p->dl_sum_ns, 0, memory_order_relaxed);
			atomic_store_explicit(&p->dl_max_ns, 0, memory_order_relaxed);
			for (unsigned k = 0; k < 48; k++)
				atomic_store_explicit(&p->dl_bucket[k], 0, memory_order_relaxed);
			p->ovf = NULL;
			p->ovf_head = p->ovf_tail = p->ovf_cap = p->ovf_n = 0;
			p->ovf_undelivered = 0;
			p->ovf_reporting = false;
			memset(p->ovf_rmask, 0, sizeof p->ovf_rmask);
			p->leaving = false;
			p->in_irq = false;
			p->send_by = NULL;
			/* An empty curry (bound.c): its key matches no send that
			 * could be curried, and should a user's odd key match it,
			 * fast() finds gen 0 and always_slow, and reads only
			 * memory of this place. */
			memset(&p->curry, 0, sizeof p->curry);
			p->curry.dest = NEMO_PLACE_NONE;
			p->curry.id = UINT32_MAX;
			p->curry.always_slow = p->curry.base_slow = true;
			p->curry.o = &d->out[(size_t)i * d->P];
			p->curry.held = &d->links[(size_t)i * d->P].held;
			p->curry_miss.dest = NEMO_PLACE_NONE;
			nemo__fast_key_update(p);
			atomic_store_explicit(&p->efd, -1, memory_order_relaxed);
			atomic_store_explicit(&p->fd_armed, 0, memory_order_relaxed);
			for (unsigned h = 0; h < NEMO__HOT; h++)
				p->hot[h] = d->P;
			p->hot_next = 0;
			p->grant_n = 0;
			p->grant_need = NEMO__GRANT_STREAK;
			p->policy = a.policy;
			p->handled = 0;
			p->in_row = nemo__in_of(d, i, 0);
			p->link_row = nemo__link_of(d, i, 0);
			p->ring_row = nemo__ring_of(d, i, 0);
			p->out_row = nemo__out_of(d, i, 0);
			p->pinned = pinned;
			p->cpu = pinned ? a.cpu : -1;
			atomic_store_explicit(&p->own_cpu, -1, memory_order_relaxed);
			p->owns_cpu = false;
			p->own_reread = 0;      /* read at its first wait */
			if (pinned) {
				memcpy(p->old_mask, &old, sizeof old < sizeof p->old_mask ? sizeof old : sizeof p->old_mask);
				p->old_mask_len = sizeof old < sizeof p->old_mask ? sizeof old : sizeof p->old_mask;
			}
			_Atomic uint64_t *row = nemo__hint_row(d, i);
			for (unsigned k = 0; k < d->HW; k++)
				atomic_store_explicit(&row[k], 0, memory_order_relaxed);
			/* Releases: a sender that reads a cleared entry also
			 * sees the old occupant's FREE (am.c, resolve). */
			_Atomic uint32_t *alt = nemo__alt_row(d, i);
			for (unsigned k = 0; k < d->E; k++)
				if (atomic_load_explicit(&alt[k], memory_order_relaxed))
					atomic_store_explicit(&alt[k], 0, memory_order_release);
			atomic_store_explicit(&p->nf_fn, NULL, memory_order_release);
			atomic_store_explicit(&p->nf_ctx, NULL, memory_order_relaxed);
			atomic_store_explicit(&p->waiter, w, memory_order_relaxed);
			p->irq_sent_seen = atomic_load_explicit(&p->irq_sent, memory_order_relaxed);
			/* tid before irq_on: a kicker that reads this irq_on
			 * signals this thread (kick.c, STALE SIGNALS). */
			atomic_store_explicit(&p->tid, (pid_t)syscall(SYS_gettid), memory_order_relaxed);
			atomic_store_explicit(&p->irq_on, (a.flags & NEMO_PLACE_INTERRUPTS) ? 1u : 0u,
					      memory_order_release);
			/* Publish: from here on senders may enqueue. */
			atomic_store_explicit(&p->status, nemo__status(gen, NEMO__ST_ACTIVE), memory_order_seq_cst);
			d->nplaces++;
			tls_place = p;
			if (id)
				*id = p->id;
			err = 0;
			break;
		}
	}
	pthread_mutex_unlock(&d->lock);
	if (err) {
		if (pinned)
			sched_setaffinity(0, sizeof old, &old);
		return err;
	}
	pthread_setspecific(exit_key, d);
	nemo_clock_init();
	tls_place->pc.thresh_ticks = nemo_ns_to_ticks((double)NEMO__POLL_THRESHOLD_DEFAULT_NS);
	nemo__poll_due = 0;         /* the first threshold check decides */
	if (a.flags & NEMO_PLACE_INTERRUPTS) {
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, d->sig);
		pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	}
	return 0;
}

/*
 * WHY A SEND RACING A LEAVE IS DELIVERED XOR FAILED
 *
 * nemo_place_leave: LV1 status := LEAVING (seq_cst), then the asymmetric
 * barrier; LV2 the final drain: every queue, consuming each entry by
 * CAS(entry -> 0) instead of a read, passes until one finds nothing;
 * LV3 status := FREE.  A sender whose S3 read ACTIVE wrote its entry
 * before the barrier took effect on its CPU (below), so its entry is
 * visible to LV2, which consumes it: delivered.  A sender whose S3 reads
 * otherwise races LV2 with its own CAS on the same word: exactly one CAS
 * wins - consumed (the sender returns 0) or taken back (ESRCH).  Later
 * occupants never consume the taken-back entry: its rtag is the old
 * generation's.  A ring entry read by an ordinary drain before LV1 is not
 * retracted although its seq is still valid: every drain publishes ack
 * before it returns, hence before LV1, and a sender that saw LV1 (or
 * anything after it) sees that ack at S3.  models/place.pml -DLEAVE
 * checks this (-DRING, the read-only ring; spin found the retract of an
 * already-handled entry before the ack check was added), and that the
 * broken variants "no re-check at S3" (a message lost), "plain reads in
 * the final drain" (handled and failed) and "no barrier after LV1" (a
 * message lost) are caught.
 */
int nemo_place_leave(void)
{
	nemo_place *me = tls_place;
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place");
	if (nemo__in_call(me))
		return NEMO__FAIL(EBUSY, "called from inside a handler or another nemo call of this place");
	struct nemo_domain *d = me->d;
	if (atomic_load_explicit(&me->delegated, memory_order_relaxed)) {
		/* No longer served by the progress thread (src/poll/progress.c):
		 * wait for it to finish with us, then drain ourselves. */
		pthread_mutex_lock(&me->plock);
		nemo__place_set_delegated(me, false);
		pthread_mutex_unlock(&me->plock);
	}
	nemo__busy_enter(me);
	/* Kept sends first (overflow.c, OVERFLOW): delivered, waiting for
	 * room as a blocking send does, or dropped and counted if their
	 * receiver left. */
	nemo__ovf_flush_all(me);
	nemo__fd_close(me);         /* no kicker writes it once we are gone */
	NEMO__INVARIANT(atomic_load_explicit(&me->status, memory_order_relaxed) == nemo__status(me->gen, NEMO__ST_ACTIVE),
			"a leaving place is not ACTIVE (FREE -> ACTIVE -> LEAVING -> FREE)");
	atomic_store_explicit(&me->irq_on, 0, memory_order_seq_cst);           /* Q1 */
	nemo__irq_quiesce(me);      /* no signal reaches the thread once we are gone */
	atomic_store_explicit(&me->status, nemo__status(me->gen, NEMO__ST_LEAVING),
			      memory_order_seq_cst);                        /* LV1 */
	me->leaving = true;       /* every drain from here on is final (drain.c) */
	nemo__asym_heavy();       /* every sender's S3 now sees LV1, or LV2 its entry */
	/* LV2: the final drain, and what its handlers kept (a reply into a
	 * full queue) delivered before we go - waiting for room with final
	 * drains - until neither is left (overflow.c, OVERFLOW, OV2). */
	for (;;) {
		unsigned got = nemo__drain(me, NEMO_AM_CTX_POLL, true);    /* LV2 */
		if (!got && !me->ovf_n)
			break;
		nemo__ovf_flush_all(me);
	}
	nemo__ovf_free(me);
	/* Deferred sends (ours and our handlers'): their receivers must hear
	 * of them. */
	for (unsigned r = 0; r < d->P; r++) {
		nemo__out *o = nemo__out_of(d, me->idx, r);
		nemo__out_settle(me, o);   /* bound sends not yet counted (bound.c) */
		if (o->deferred)
			nemo__publish(me, r, false);
		/* Nothing kept for r is left, so nothing may hold r's sends to
		 * this index (its next occupant's) or ask r for room. */
		NEMO__INVARIANT(!atomic_load_explicit(&nemo__link_of(d, r, me->idx)->held, memory_order_relaxed),
				"held still set by a place that leaves with an empty overflow");
		atomic_store_explicit(&nemo__link_of(d, r, me->idx)->held, 0, memory_order_relaxed);
		atomic_store_explicit(&nemo__link_of(d, r, me->idx)->room, 0, memory_order_relaxed);
	}
	NEMO__INVARIANT(me->ovf_n == 0 && !me->ovf && !me->ovf_undelivered,
			"the overflow was not emptied before the leave");
	_Atomic uint64_t *row = nemo__hint_row(d, me->idx), *grow = nemo__grant_row(d, me->idx);
	for (unsigned k = 0; k < d->HW; k++) {
		atomic_store_explicit(&row[k], 0, memory_order_relaxed);
		/* Grants need no revocation here: LV1's barrier covers every
		 * send to this occupant, granted or not (THE STREAM GRANT). */
		atomic_store_explicit(&grow[k], 0, memory_order_relaxed);
	}
	me->grant_n = 0;
	/* From LV3 on the record belongs to the next occupant: take what we
	 * still need now, and stop being its owner first (a late signal then
	 * finds no place). */
	bool pinned = me->pinned;
	cpu_set_t old;
	if (pinned)
		memcpy(&old, me->old_mask, me->old_mask_len);
	uint64_t gen = me->gen;
	me->fast_key = 0;
	tls_place = NULL;
	nemo__poll_due = UINT64_MAX;
	atomic_signal_fence(memory_order_seq_cst);
	pthread_mutex_lock(&d->lock);
	NEMO__INVARIANT(atomic_load_explicit(&me->status, memory_order_relaxed) == nemo__status(gen, NEMO__ST_LEAVING),
			"a place becomes FREE only from LEAVING, by its leaving thread (LV1-LV3)");
	atomic_store_explicit(&me->status, nemo__status(gen, NEMO__ST_FREE),
			      memory_order_seq_cst);                        /* LV3 */
	d->nplaces--;
	pthread_mutex_unlock(&d->lock);
	if (pinned)
		sched_setaffinity(0, sizeof old, &old);
	pthread_setspecific(exit_key, NULL);
	return 0;
}

int nemo_place_set_context(void *ctx)
{
	nemo_place *me = tls_place;
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	/* A nemo call of the place: excludes the progress thread's drains
	 * (which read the context for their handlers) and the interrupt
	 * handler's. */
	nemo__busy_enter(me);
	me->user_ctx = ctx;
	nemo__busy_exit(me);
	return 0;
}

void *nemo_place_context(void)
{
	nemo_place *me = tls_place;
	return me ? me->user_ctx : NULL;
}

int nemo__place_adopt(struct nemo_domain *d, const char *fn)
{
	nemo_place *me = tls_place;
	if (me) {
		if (me->d == d)
			return 0;
		int err = nemo__domain_check_in(d, fn);
		return err ? err : nemo__fail(EXDEV, fn, "the calling thread is a place of another domain");
	}
	int err = nemo__domain_check_in(d, fn);
	if (err)
		return err;
	err = nemo_place_join(d, NULL, NULL);
	if (err)
		return nemo__fail(err, fn, "the calling thread could not join the domain to send (%s)",
				  err == ENOSPC ? "it has no free place" : "see nemo_place_join");
	tls_place->guest = true;
	return 0;
}

int nemo__test_set_gen(nemo_domain *d, unsigned idx, uint64_t gen)
{
	int err = nemo__domain_check(d);
	if (err)
		return err;
	pthread_mutex_lock(&d->lock);
	if (atomic_load_explicit(&d->magic, memory_order_relaxed) != NEMO__DOMAIN_MAGIC)
		err = EIDRM;
	else if (idx >= d->P)
		err = EINVAL;
	else if (nemo__status_state(atomic_load_explicit(&d->places[idx].status, memory_order_relaxed)) != NEMO__ST_FREE)
		err = EBUSY;
	else
		atomic_store_explicit(&d->places[idx].status, nemo__status(gen, NEMO__ST_FREE),
				      memory_order_seq_cst);
	pthread_mutex_unlock(&d->lock);
	return err;
}
