/*
 * modes.c - the narrow interface of modes.h: what the receiver modes of
 * the layers above (the progress thread, the watchdog, delays, threshold
 * checks) read and write of a place and its domain, so that nemo_place's
 * layout stays this layer's.  Each function is the access it replaces,
 * with the same memory order; the protocols they take part in are
 * written out where they were (src/poll/progress.c, THE LOOP and PT1-PT3;
 * src/poll/watchdog.c, WD1-WD6).
 */
#define _GNU_SOURCE
#include "messaging_internal.h"

#include <pthread.h>

unsigned nemo__domain_places(const struct nemo_domain *d)
{
	return d->P;
}

nemo_place *nemo__domain_place(struct nemo_domain *d, unsigned i)
{
	return &d->places[i];
}

bool nemo__domain_delays(const struct nemo_domain *d)
{
	return (d->flags & NEMO_DOMAIN_DELAYS) != 0;
}

static void **service_slot(struct nemo_domain *d, enum nemo__service which)
{
	return which == NEMO__SERVICE_PROGRESS ? &d->progress : &d->watchdog;
}

void *nemo__domain_service(struct nemo_domain *d, enum nemo__service which)
{
	pthread_mutex_lock(&d->lock);
	void *self = *service_slot(d, which);
	pthread_mutex_unlock(&d->lock);
	return self;
}

int nemo__domain_service_claim(struct nemo_domain *d, enum nemo__service which, void *self)
{
	int err = 0;
	void **slot = service_slot(d, which);
	pthread_mutex_lock(&d->lock);
	if (*slot)
		err = EEXIST;
	else
		*slot = self;
	pthread_mutex_unlock(&d->lock);
	return err;
}

void nemo__domain_service_unclaim(struct nemo_domain *d, enum nemo__service which)
{
	void **slot = service_slot(d, which);
	pthread_mutex_lock(&d->lock);
	*slot = NULL;
	pthread_mutex_unlock(&d->lock);
}

void nemo__domain_set_progress_waiter(struct nemo_domain *d, nemo_waiter *w)
{
	atomic_store_explicit(&d->prog_w, w, memory_order_seq_cst);
}

nemo_waiter *nemo__domain_progress_waiter(struct nemo_domain *d)
{
	return atomic_load_explicit(&d->prog_w, memory_order_acquire);
}

void nemo__domain_set_watchdog_waiter(struct nemo_domain *d, nemo_waiter *w)
{
	atomic_store_explicit(&d->wd_w, w, memory_order_seq_cst);
}

/* PT2 (src/poll/progress.c): hint words only - a sender sets its bit
 * before it kicks, and a set bit stays until a drain. */
bool nemo__domain_progress_pending(struct nemo_domain *d)
{
	for (unsigned i = 0; i < d->P; i++) {
		nemo_place *x = &d->places[i];
		if (!atomic_load_explicit(&x->delegated, memory_order_seq_cst))
			continue;
		_Atomic uint64_t *row = nemo__hint_row(d, i);
		for (unsigned w = 0; w < d->HW; w++)
			if (atomic_load_explicit(&row[w], memory_order_seq_cst))
				return true;
	}
	return false;
}

struct nemo_domain *nemo__place_domain(const nemo_place *p)
{
	return p->d;
}

bool nemo__place_active(const nemo_place *p)
{
	return nemo__status_state(atomic_load_explicit(&p->status, memory_order_acquire)) == NEMO__ST_ACTIVE;
}

bool nemo__place_delegated(const nemo_place *p)
{
	return atomic_load_explicit(&p->delegated, memory_order_relaxed) != 0;
}

bool nemo__place_irq_on(const nemo_place *p)
{
	return atomic_load_explicit(&p->irq_on, memory_order_relaxed) != 0;
}

bool nemo__place_in_call(nemo_place *p)
{
	return nemo__in_call(p);
}

/* THE LOOP of src/poll/progress.c, for one place. */
unsigned nemo__place_serve(nemo_place *x)
{
	if (!nemo__place_delegated(x) || !nemo__place_active(x))
		return 0;
	if (pthread_mutex_trylock(&x->plock) != 0)
		return 0;     /* its own thread is in a nemo call: it drains */
	unsigned n = 0;
	if (nemo__place_delegated(x) && nemo__place_active(x)) {
		/* The thread's own place, if a transport's pass needs one
		 * (src/poll/progress.c, SOURCES): x for the drain, then back. */
		nemo_place *own = nemo__tls_place;
		NEMO__INVARIANT(own != x, "a place serves itself");
		nemo__tls_place = x;
		nemo__holds_plock = true;      /* handlers' nemo calls: locked already */
		atomic_store_explicit(&x->busy, 1, memory_order_relaxed);
		n = nemo__drain(x, NEMO_AM_CTX_PROGRESS, false);
		if (x->ovf_n) {
			/* Kept sends: delivered now, or a kick (of this thread,
			 * the place being served) when room for them appears
			 * (overflow.c, ROOM KICKS). */
			nemo__ovf_flush(x);
			nemo__ovf_arm(x);
		}
		atomic_store_explicit(&x->busy, 0, memory_order_relaxed);
		nemo__holds_plock = false;
		nemo__tls_place = own;
	}
	pthread_mutex_unlock(&x->plock);
	return n;
}

void nemo__place_set_served(nemo_place *me, bool on)
{
	if (on)
		nemo__grant_revoke(me);   /* granted senders would not wake the progress thread */
	pthread_mutex_lock(&me->plock);
	nemo__place_set_delegated(me, on);
	pthread_mutex_unlock(&me->plock);
}

uint64_t nemo__place_wd_since(nemo_place *p)
{
	return atomic_load_explicit(&p->wd_since, memory_order_seq_cst);
}

bool nemo__place_wd_since_clear(nemo_place *p, uint64_t s)
{
	return atomic_compare_exchange_strong_explicit(&p->wd_since, &s, 0, memory_order_seq_cst,
						       memory_order_relaxed);
}

uint64_t nemo__place_wd_since_take(nemo_place *p)
{
	return atomic_exchange_explicit(&p->wd_since, 0, memory_order_seq_cst);
}

uint64_t nemo__place_wd_ticks(const nemo_place *p)
{
	return atomic_load_explicit(&p->wd_ticks, memory_order_relaxed);
}

void nemo__place_set_wd_ticks(nemo_place *me, uint64_t t)
{
	atomic_store_explicit(&me->wd_ticks, t, memory_order_seq_cst);
}

void nemo__place_delays_read(const nemo_place *p, uint64_t *count, uint64_t *sum_ns, uint64_t *max_ns,
			     uint64_t *buckets)
{
	*count = atomic_load_explicit(&p->dl_count, memory_order_relaxed);
	*sum_ns = atomic_load_explicit(&p->dl_sum_ns, memory_order_relaxed);
	*max_ns = atomic_load_explicit(&p->dl_max_ns, memory_order_relaxed);
	for (unsigned k = 0; k < NEMO__DELAY_BUCKETS; k++)
		buckets[k] = atomic_load_explicit(&p->dl_bucket[k], memory_order_relaxed);
}

struct nemo__poll_check *nemo__place_poll_check(nemo_place *me)
{
	return &me->pc;
}

void nemo__place_count_poll_check(nemo_place *me, unsigned n)
{
	NEMO__PCOUNT(me, c_poll_checks);
	NEMO__PADD(me, c_poll_check_handled, n);
}

void nemo__place_poll_check_counters(const nemo_place *p, uint64_t *polls, uint64_t *handled)
{
	*polls = atomic_load_explicit(&p->c_poll_checks, memory_order_relaxed);
	*handled = atomic_load_explicit(&p->c_poll_check_handled, memory_order_relaxed);
}

nemo_place_id nemo__domain_place_id(struct nemo_domain *d, unsigned idx)
{
	uint64_t s = atomic_load_explicit(&d->places[idx].status, memory_order_acquire);
	if (nemo__status_state(s) != NEMO__ST_ACTIVE)
		return NEMO_PLACE_NONE;
	return nemo__make_id(idx, nemo__status_gen(s));
}

unsigned nemo__domain_actions(const struct nemo_domain *d)
{
	return d->A;
}

int nemo__place_cpu(const nemo_place *p)
{
	return p->cpu;
}

int nemo__place_hdepth(const nemo_place *me)
{
	return me->hdepth;
}

int nemo__am_send_kept(nemo_place *me, nemo_place_id to, uint32_t id, uint64_t arg, const void *payload,
		       size_t len)
{
	me->hdepth++;           /* as a handler: never waits */
	int err = nemo__am_sendv_flags(to, id, arg, payload, len, NEMO__SEND_KEEP_ALL);
	me->hdepth--;
	return err;
}

nemo_place_id nemo__place_id(const nemo_place *p)
{
	return p->id;
}

unsigned nemo__place_idx(const nemo_place *p)
{
	return p->idx;
}

unsigned nemo__domain_events(const struct nemo_domain *d)
{
	return d->E;
}

nemo_am_handler nemo__domain_action_handler(struct nemo_domain *d, uint32_t id)
{
	return atomic_load_explicit(&d->adt[id].fn, memory_order_acquire);
}

void nemo__place_busy_enter(nemo_place *me)
{
	nemo__busy_enter(me);
}

void nemo__place_busy_exit(nemo_place *me)
{
	nemo__busy_exit(me);
}

void nemo__place_handler_enter(nemo_place *me)
{
	nemo__busy_enter(me);
	me->hdepth++;
}

void nemo__place_handler_exit(nemo_place *me)
{
	me->hdepth--;
	nemo__busy_exit(me);
}

int nemo__am_deliver_remote(nemo_place *me, nemo_place_id src, uint32_t id, bool tagged, uint64_t arg,
			    const void *payload, size_t len, nemo_am_context ctx)
{
	uint32_t meta;
	int err = nemo__am_resolve(me->d, me->id, id, len, &meta, "nemo_mpi (remote active message)");
	if (err)
		return err;
	nemo__am_deliver(me, src, meta | (tagged ? NEMO__META_TAGGED : 0), arg, payload, len, ctx);
	return 0;
}

int nemo__notify_deliver_remote(nemo_place *me, nemo_place_id src, uint32_t chan)
{
	nemo_notify_handler fn = atomic_load_explicit(&me->nf_fn, memory_order_acquire);
	if (!fn)
		return ENOENT;
	fn(atomic_load_explicit(&me->nf_ctx, memory_order_relaxed), src, chan);
	return 0;
}
