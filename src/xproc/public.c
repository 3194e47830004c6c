/*
 * public.c - the ordinary calls on shared places: the process's registry
 * of attached handles, public ids, the places each thread holds, and the
 * transport table that messaging's remote hook calls (remote.h).
 *
 * THE PUBLIC CALLS.  A shared place's nemo_place_id (nemo_xproc_place_id)
 * carries the remote tag 101 (remote.h: remote, transport 1), the
 * handle's registry index and generation, and the place's id in the
 * segment (segment.h, xp_public_id).  A public send to it resolves the
 * handle through the registry (an index and a generation: an id of a
 * detached handle names nothing, never a freed pointer) and sends from
 * the calling thread's place in that domain: the place whose handler is
 * running on the thread, if it is of that domain (so a reply leaves from
 * the place the request came to), else the thread's latest place there.
 * Each thread keeps integers only (struct tls_place), checked against
 * the registry and the handle's own table before use.  A thread that is
 * no place of this process's own domains reaches its shared places with
 * the calls about its own place (remote.h's self op): nemo_poll polls
 * them all; nemo_place_wait, nemo_place_wait_for, nemo_place_fd,
 * nemo_place_self and nemo_am_broadcast(NULL, ...) act on its latest
 * one; nemo_notify_set_handler sets every one's; nemo_dead_places lists
 * the deaths all of them saw (remote.h's dead op: merged by the
 * process-wide order of their records, latest first, each id once).
 *
 * FORK.  In a child of fork every handle is the parent's (its process
 * slot, its places' rings): the child must attach again (docs/xproc.md),
 * and its public calls must not reach the copies - a nemo_poll there
 * would drain the parent's rings.  So the child forgets every registry
 * entry (the forking thread's own entries then name nothing), and its
 * raw calls on the copies see them inherited (procs.c, fork_gen).
 */
#define _GNU_SOURCE

#include "segment.h"

#include <nemo/notify.h>

#include "../messaging/modes.h"   /* nemo__check_flags */
#include "../messaging/remote.h"
#include "../platform/fail.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#define XP_HANDLES 64u                    /* shared domains attached at once, per process */
#define XP_THREAD_PLACES 8u               /* places one thread reaches through the public calls */

static struct {
	_Atomic(nemo_xproc *) x;
	_Atomic uint32_t gen;             /* bumped at attach and at detach; 1..0xFFFF */
} registry[XP_HANDLES];
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static const nemo__remote_ops xp_remote_ops;
_Static_assert(NEMO_XPROC_PLACES_MAX <= 64, "a broadcast keeps its destinations in a 64-bit mask");

struct tls_place {
	uint32_t hgen, serial;            /* serial 0: a free entry */
	uint16_t hidx, pidx;
	uint32_t order;                   /* the latest join is the thread's own place */
};
static _Thread_local struct tls_place tls_places[XP_THREAD_PLACES];
static _Thread_local uint32_t tls_order;

static bool public_is_xproc(nemo_place_id id)
{
	return (id >> 56) == (XID_TAG >> 56);
}

static uint32_t public_hidx(nemo_place_id id)
{
	return (uint32_t)(id >> 32) & 0xFFu;
}

static uint32_t public_hgen(nemo_place_id id)
{
	return (uint32_t)(id >> 40) & 0xFFFFu;
}

/* The attached handle an id names: the same for two ids of one handle. */
static uint32_t public_handle(nemo_place_id id)
{
	return (uint32_t)(id >> 32);
}

/* The handle an entry or a public id names, if still attached. */
static nemo_xproc *registry_get(uint32_t hidx, uint32_t hgen)
{
	if (hidx >= XP_HANDLES || hgen != atomic_load_explicit(&registry[hidx].gen, memory_order_acquire))
		return NULL;
	return atomic_load_explicit(&registry[hidx].x, memory_order_acquire);
}

void nemo__xp_registry_drop(nemo_xproc *x)
{
	if (x->hgen == 0)
		return;
	pthread_mutex_lock(&registry_lock);
	atomic_store_explicit(&registry[x->hidx].x, NULL, memory_order_release);
	uint32_t g = (x->hgen + 1) & 0xFFFFu;
	atomic_store_explicit(&registry[x->hidx].gen, g ? g : 1, memory_order_release);
	pthread_mutex_unlock(&registry_lock);
}

/* The place this thread's entry names, if it is still the one joined. */
static nemo_xproc_place *tls_place(const struct tls_place *t, nemo_xproc *x)
{
	if (!x || t->pidx >= x->nplaces)
		return NULL;
	nemo_xproc_place *p = x->places[t->pidx];
	return p && p->serial == t->serial && p->joined ? p : NULL;
}

static nemo_xproc_place *tls_resolve(const struct tls_place *t)
{
	return t->serial ? tls_place(t, registry_get(t->hidx, t->hgen)) : NULL;
}

/* The joining thread reaches p through the public calls: its entry for
 * p's handle, else a free or stale one.  All taken: p still works
 * through nemo_xproc_*. */
void nemo__xp_tls_adopt(nemo_xproc_place *p)
{
	struct tls_place *use = NULL;
	for (unsigned i = 0; i < XP_THREAD_PLACES; i++) {
		struct tls_place *t = &tls_places[i];
		if (t->serial && t->hidx == p->x->hidx && t->hgen == p->x->hgen) {
			use = t;
			break;
		}
		if (!use && (!t->serial || !tls_resolve(t)))
			use = t;
	}
	if (use)
		*use = (struct tls_place){ p->x->hgen, p->serial, (uint16_t)p->x->hidx, (uint16_t)p->idx, ++tls_order };
}

void nemo__xp_tls_forget(const nemo_xproc_place *p)
{
	for (unsigned i = 0; i < XP_THREAD_PLACES; i++)
		if (tls_places[i].serial == p->serial)
			tls_places[i].serial = 0;
}

/* The calling thread's place in x: the one whose handler runs here, else
 * its entry's. */
static nemo_xproc_place *tls_place_in(nemo_xproc *x)
{
	nemo_xproc_place *h = nemo__xp_handling;
	if (h && h->x == x && h->joined)
		return h;
	for (unsigned i = 0; i < XP_THREAD_PLACES; i++) {
		const struct tls_place *t = &tls_places[i];
		if (t->serial && t->hidx == x->hidx && t->hgen == x->hgen)
			return tls_place(t, x);
	}
	return NULL;
}

static void registry_fork_child(void)
{
	atomic_fetch_add_explicit(&nemo__xp_fork_gen, 1, memory_order_relaxed);
	for (uint32_t i = 0; i < XP_HANDLES; i++) {
		if (!atomic_load_explicit(&registry[i].x, memory_order_relaxed))
			continue;
		atomic_store_explicit(&registry[i].x, NULL, memory_order_relaxed);
		uint32_t g = (atomic_load_explicit(&registry[i].gen, memory_order_relaxed) + 1) & 0xFFFFu;
		atomic_store_explicit(&registry[i].gen, g ? g : 1, memory_order_relaxed);
	}
	pthread_mutex_init(&registry_lock, NULL);
}

static void registry_once(void)
{
	pthread_atfork(NULL, NULL, registry_fork_child);
	nemo__remote_register(NEMO__REMOTE_XPROC, &xp_remote_ops);
}

/* The end of create and attach: an entry in the registry, then the
 * handle is the caller's.  EMFILE when every entry is taken (the caller
 * frees the handle). */
int nemo__xp_publish_handle(nemo_xproc *x, nemo_xproc **out)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, registry_once);
	pthread_mutex_lock(&registry_lock);
	for (uint32_t i = 0; i < XP_HANDLES; i++) {
		if (atomic_load_explicit(&registry[i].x, memory_order_relaxed))
			continue;
		uint32_t g = (atomic_load_explicit(&registry[i].gen, memory_order_relaxed) + 1) & 0xFFFFu;
		x->hidx = i;
		x->hgen = g ? g : 1;
		atomic_store_explicit(&registry[i].x, x, memory_order_release);
		atomic_store_explicit(&registry[i].gen, x->hgen, memory_order_release);
		pthread_mutex_unlock(&registry_lock);
		*out = x;
		return 0;
	}
	pthread_mutex_unlock(&registry_lock);
	return NEMO__FAIL(EMFILE, "this process has %u shared domains attached already", XP_HANDLES);
}

nemo_place_id nemo_xproc_place_id(const nemo_xproc *x, nemo_xproc_id id)
{
	return x && id_ok(id) ? xp_public_id(x, id) : NEMO_PLACE_NONE;
}

nemo_xproc_id nemo_xproc_id_of(nemo_place_id id)
{
	return public_is_xproc(id) ? (nemo_xproc_id)id : 0;
}

/* ------------------------------------------------------------------ */
/* The transport's table (remote.h)                                    */
/* ------------------------------------------------------------------ */

static int flags_of(unsigned flags, unsigned *out, const char *fn)
{
	int rc = nemo__check_flags(flags, fn);   /* the in-process sends' flags */
	if (rc)
		return rc;
	/* NEMO_PUSH and NEMO_MORE ask about the receiver's polling hint,
	 * which a shared domain has not: every send is published at once
	 * and kicks a receiver that published SLEEPING. */
	*out = flags & NEMO_NONBLOCK ? NEMO_XPROC_NONBLOCK : 0;
	return 0;
}

/* The start of every public send to dest: its flags, and the calling
 * thread's place in dest's shared domain. */
static int begin_send(nemo_place_id dest, unsigned flags, nemo_xproc_place **p, unsigned *xf, const char *fn)
{
	int rc = flags_of(flags, xf, fn);
	if (rc)
		return rc;
	nemo_xproc *x = public_is_xproc(dest) ? registry_get(public_hidx(dest), public_hgen(dest)) : NULL;
	if (!x)
		return nemo__fail(ESRCH, fn, "place %#llx: its shared domain is not attached (detached, or "
				  "not an id of nemo_xproc_place_id)", (unsigned long long)dest);
	*p = tls_place_in(x);
	if (!*p)
		return nemo__fail(ENOTCONN, fn, "the calling thread has no place in the shared domain of place "
				  "%#llx (nemo_xproc_join first)", (unsigned long long)dest);
	return 0;
}

static int xp_am(nemo_place_id dest, uint32_t code, uint64_t arg, const void *payload, size_t len,
		 unsigned flags, const uint64_t *tag, const struct timespec *abstime)
{
	const char *fn = tag ? "nemo_am_reply" : "nemo_am_sendv";
	uint64_t end = xp_deadline_ns(abstime);
	nemo_xproc_place *p = NULL;
	unsigned xf = 0;
	int rc = begin_send(dest, flags, &p, &xf, fn);
	if (!rc)
		rc = nemo__xp_check_code(p->x, code, payload, len, fn);
	if (rc)
		return rc;
	if (!tag)
		return nemo__xp_send(p, (nemo_xproc_id)dest, K_AM, code, arg, payload, len, xf, true, end);
	unsigned char buf[SLOT_PAYLOAD];
	memcpy(buf, tag, TAG_LEN);
	if (len)
		memcpy(buf + TAG_LEN, payload, len);
	return nemo__xp_send(p, (nemo_xproc_id)dest, K_REPLY, code, arg, buf, len + TAG_LEN, xf, true, end);
}

static int xp_notify(nemo_place_id dest, uint32_t chan, unsigned flags, const struct timespec *abstime)
{
	nemo_xproc_place *p = NULL;
	unsigned xf = 0;
	int rc = begin_send(dest, flags, &p, &xf, "nemo_notify");
	if (!rc)
		rc = nemo__xp_check_chan(chan, "nemo_notify");
	return rc ? rc : nemo__xp_send(p, (nemo_xproc_id)dest, K_NOTIFY, chan, 0, NULL, 0, xf, true,
				       xp_deadline_ns(abstime));
}

static int xp_broadcast(const nemo_place_id *set, size_t n, uint32_t code, uint64_t arg, const void *payload,
			size_t len, unsigned flags, size_t *sent)
{
	nemo_xproc_place *p = NULL;
	unsigned xf = 0;
	int rc = begin_send(set[0], flags, &p, &xf, "nemo_am_broadcast");
	if (!rc && n > NEMO_XPROC_PLACES_MAX)
		rc = nemo__fail(EINVAL, "nemo_am_broadcast", "n %zu: a set has at most %u places", n,
				NEMO_XPROC_PLACES_MAX);
	if (!rc)
		rc = nemo__xp_check_code(p->x, code, payload, len, "nemo_am_broadcast");
	if (rc)
		return rc;
	nemo_xproc_id ids[NEMO_XPROC_PLACES_MAX];
	for (size_t i = 0; i < n; i++) {
		if (public_handle(set[i]) != public_handle(set[0]))
			return nemo__fail(EINVAL, "nemo_am_broadcast", "set[%zu] = %#llx is of another shared domain "
					  "than set[0]", i, (unsigned long long)set[i]);
		ids[i] = (nemo_xproc_id)set[i];
	}
	return nemo__xp_broadcast(p, ids, n, code, arg, payload, len, xf, sent);
}

/* The calling thread's shared places (up to XP_THREAD_PLACES) and the
 * latest of them; 0 when it holds none. */
static unsigned thread_places(nemo_xproc_place **mine, nemo_xproc_place **last)
{
	unsigned n = 0;
	uint32_t best = 0;
	*last = NULL;
	for (unsigned i = 0; i < XP_THREAD_PLACES; i++) {
		nemo_xproc_place *p = tls_resolve(&tls_places[i]);
		if (!p)
			continue;
		mine[n++] = p;
		if (!*last || tls_places[i].order - best < 0x80000000u) {
			*last = p;
			best = tls_places[i].order;
		}
	}
	return n;
}

/* A call about the thread's own place from a thread that is no place of
 * this process (remote.h): -1 when it holds none of ours either. */
static int xp_self(nemo__remote_self_op op, const nemo__remote_self_args *a)
{
	nemo_xproc_place *mine[XP_THREAD_PLACES], *last;
	unsigned n = thread_places(mine, &last);
	if (!n)
		return -1;
	switch (op) {
	case NEMO__SELF_ID:
		*a->self_id = xp_public_id(last->x, last->id);
		return 0;
	case NEMO__SELF_WAIT_FOR:
		return nemo__xp_wait(last, a->abstime, a->handled, a->word, a->old, "nemo_place_wait_for");
	case NEMO__SELF_FD:
		if (!own_ok(last, memory_order_relaxed))
			return nemo__xp_own_lost(last, "nemo_place_fd");
		return nemo__xp_fd(last, a->fd);
	case NEMO__SELF_POLL: {
		unsigned total = 0;
		int first = 0;
		for (unsigned i = 0; i < n; i++) {
			unsigned h = 0;
			int rc = nemo_xproc_poll(mine[i], &h);
			total += h;
			if (rc && !first)
				first = rc;
		}
		if (a->handled)
			*a->handled = total;
		return first;
	}
	case NEMO__SELF_WAIT:
		return nemo__xp_wait(last, a->abstime, a->handled, NULL, 0, "nemo_place_wait");
	case NEMO__SELF_NOTIFY_HANDLER:
		for (unsigned i = 0; i < n; i++) {
			mine[i]->nfn = NULL;
			mine[i]->pnfn = a->nfn;
			mine[i]->pnctx = a->ctx;
		}
		return 0;
	case NEMO__SELF_BROADCAST: {
		unsigned xf = 0;
		int rc = flags_of(a->flags, &xf, "nemo_am_broadcast");
		if (!rc)
			rc = nemo__xp_check_code(last->x, a->id, a->payload, a->len, "nemo_am_broadcast");
		return rc ? rc : nemo__xp_broadcast(last, NULL, 0, a->id, a->arg, a->payload, a->len, xf, a->sent);
	}
	}
	return -1;
}

/* nemo_dead_places for the calling thread's shared places: their records
 * merged, latest first, each id once. */
static int xp_dead(nemo_place_id *ids, size_t cap, size_t *n, uint64_t *total)
{
	nemo_xproc_place *mine[XP_THREAD_PLACES], *last;
	unsigned k = thread_places(mine, &last);
	nemo_place_id all[XP_THREAD_PLACES * XP_DEAD_KEEP];
	uint64_t seq[XP_THREAD_PLACES * XP_DEAD_KEEP];
	size_t m = 0;
	for (unsigned i = 0; i < k; i++) {
		nemo_xproc_place *p = mine[i];
		if (nemo__xp_inherited(p->x) || !own_ok(p, memory_order_relaxed))
			goto listed;
		nemo__xp_check_due(p->x);             /* procs.c, WHO ASKS */
		if (nemo__xp_death_news(p, memory_order_acquire))
			nemo__xp_death_scan(p);
	listed:
		m += nemo__xp_dead_list(p, all + m, seq + m, XP_DEAD_KEEP);
		*total += p->dead_found;
	}
	while (*n < cap) {                    /* the latest not yet stored, each id once */
		size_t best = m;
		for (size_t i = 0; i < m; i++)
			if (seq[i] && (best == m || seq[i] > seq[best]))
				best = i;
		if (best == m)
			break;
		bool dup = false;
		for (size_t j = 0; j < *n && !dup; j++)
			dup = ids[j] == all[best];
		if (!dup)
			ids[(*n)++] = all[best];
		seq[best] = 0;
	}
	return 0;
}

static const nemo__remote_ops xp_remote_ops = {
	.am = xp_am, .notify = xp_notify, .broadcast = xp_broadcast, .self = xp_self, .dead = xp_dead,
};
