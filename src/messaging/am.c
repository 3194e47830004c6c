/*
 * am.c - active messages: the Action Descriptor Table (per domain), the
 * Action Lookup Tables (per place), and sends that name an action or an
 * event.  The transport is the messaging layer's ring (src/messaging/
 * drain.c, which also dispatches a drained message to its action); this
 * file fills the tables and names things.
 *
 * Tables.  adt[a] = {fn, ctx}: fn is published with release after ctx,
 * and never changes once set (actions live as long as the domain), so a
 * receiver that loads fn with acquire can call it with its ctx.
 * alt[p][e] = action + 1 (0: unmapped), written by place p itself,
 * read by senders.
 *
 * Where an event is resolved: at the sender, from the destination's ALT,
 * at the moment of the send.  So a send to an unmapped event fails at
 * once with ENOENT (instead of a message nobody can handle), and the
 * message carries the action to run; a remapping after the send does not
 * change what runs.  The meta word of the message (messaging_internal.h)
 * has the action (12 bits), the event + 1 (13 bits) and the payload
 * length (6 bits).
 */
#define _GNU_SOURCE
#include "messaging_internal.h"
#include "remote.h"

#include <errno.h>
#include <string.h>

int nemo_action_register(nemo_domain *d, uint32_t action, nemo_am_handler fn, void *ctx)
{
	int err = nemo__domain_check(d);
	if (err)
		return err;
	if (!fn)
		return NEMO__FAIL(EINVAL, "action %u: the handler is NULL", action);
	pthread_mutex_lock(&d->lock);
	if (atomic_load_explicit(&d->magic, memory_order_relaxed) != NEMO__DOMAIN_MAGIC)
		err = NEMO__FAIL(EIDRM, "the domain was destroyed");
	else if (action >= d->A)
		err = NEMO__FAIL(ERANGE, "action %u is out of range: the domain has max_actions %u", action, d->A);
	else if (atomic_load_explicit(&d->adt[action].fn, memory_order_relaxed))
		err = NEMO__FAIL(EEXIST, "action %u has a handler already", action);
	else {
		d->adt[action].ctx = ctx;
		atomic_store_explicit(&d->adt[action].fn, fn, memory_order_release);
	}
	pthread_mutex_unlock(&d->lock);
	return err;
}

int nemo_action_set_undelivered(nemo_domain *d, uint32_t action, nemo_am_undelivered fn, void *ctx)
{
	int err = nemo__domain_check(d);
	if (err)
		return err;
	pthread_mutex_lock(&d->lock);
	if (atomic_load_explicit(&d->magic, memory_order_relaxed) != NEMO__DOMAIN_MAGIC)
		err = NEMO__FAIL(EIDRM, "the domain was destroyed");
	else if (action >= d->A)
		err = NEMO__FAIL(ERANGE, "action %u is out of range: the domain has max_actions %u", action, d->A);
	else if (!atomic_load_explicit(&d->adt[action].fn, memory_order_relaxed))
		err = NEMO__FAIL(ENOENT, "action %u has no handler (nemo_action_register first)", action);
	else {
		/* ctx first: a report that loads this fn (acquire) sees it. */
		atomic_store_explicit(&d->adt[action].undelivered_ctx, ctx, memory_order_relaxed);
		atomic_store_explicit(&d->adt[action].undelivered, fn, memory_order_release);
	}
	pthread_mutex_unlock(&d->lock);
	return err;
}

static bool action_ok(struct nemo_domain *d, uint32_t action)
{
	return atomic_load_explicit(&d->adt[action].fn, memory_order_acquire) != NULL;
}

int nemo_am_event_map(uint32_t event, uint32_t action)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	struct nemo_domain *d = me->d;
	if (event >= d->E)
		return NEMO__FAIL(ERANGE, "event %u is out of range: the domain has max_events %u", event, d->E);
	_Atomic uint32_t *e = &nemo__alt_row(d, me->idx)[event];
	if (action == NEMO_AM_NO_EVENT) {
		atomic_store_explicit(e, 0, memory_order_release);
		return 0;
	}
	if (action >= d->A)
		return NEMO__FAIL(ERANGE, "action %u is out of range: the domain has max_actions %u", action, d->A);
	if (!action_ok(d, action))
		return NEMO__FAIL(ENOENT, "action %u has no handler in this domain (nemo_action_register)", action);
	atomic_store_explicit(e, action + 1, memory_order_release);
	return 0;
}

int nemo_am_event_lookup(nemo_place_id place, uint32_t event, uint32_t *action)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	if (!action)
		return NEMO__FAIL(EINVAL, "action is NULL");
	struct nemo_domain *d = me->d;
	uint64_t st;
	if (!nemo__dest(d, place, &st))
		return NEMO__FAIL(ESRCH, "place %#llx is not in the domain (never was, or left)",
				  (unsigned long long)place);
	if (event >= d->E)
		return NEMO__FAIL(ERANGE, "event %u is out of range: the domain has max_events %u", event, d->E);
	uint32_t v = atomic_load_explicit(&nemo__alt_row(d, nemo_place_index(place))[event],
					  memory_order_acquire);
	if (!v)
		return NEMO__FAIL(ENOENT, "event %u is not mapped at place %#llx", event, (unsigned long long)place);
	*action = v - 1;
	return 0;
}

static inline __attribute__((always_inline)) int
resolve(struct nemo_domain *d, nemo_place_id dest, uint32_t id, size_t len, uint32_t *meta,
	nemo_place **dst, uint64_t *st, const char *fn);

int nemo__am_resolve(struct nemo_domain *d, nemo_place_id dest, uint32_t id, size_t len, uint32_t *meta,
		     const char *fn)
{
	nemo_place *dst;
	uint64_t st;
	return resolve(d, dest, id, len, meta, &dst, &st, fn);
}

/* Validate and resolve id for dest: the destination (S0 of send.c),
 * its status word and the meta word, or an error.  Inlined, as send_one
 * below: a call per step cost the generic send 64 of its 350 instructions
 * (callgrind, tests/bound_cost.c) and one-send-per-message streams 16% of
 * their rate (nemo-am-each 33.8 against 40.2 M msg/s). */
static inline __attribute__((always_inline)) int
resolve(struct nemo_domain *d, nemo_place_id dest, uint32_t id, size_t len, uint32_t *meta,
	nemo_place **dst, uint64_t *st, const char *fn)
{
	if (!(*dst = nemo__dest(d, dest, st)))
		return nemo__fail(ESRCH, fn, "place %#llx is not in the domain (never was, or left)",
				  (unsigned long long)dest);
	uint32_t action, ev1 = 0;
	if (id & 0x80000000u) {
		uint32_t e = id & 0x7FFFFFFFu;
		if (e >= d->E)
			return nemo__fail(ERANGE, fn, "event %u is out of range: the domain has max_events %u", e, d->E);
		uint32_t v = atomic_load_explicit(&nemo__alt_row(d, nemo_place_index(dest))[e],
						  memory_order_acquire);
		if (!v) {
			/* Unmapped, or cleared by a new occupant's join (its
			 * clearing stores are releases after the old one's
			 * FREE): tell the two apart. */
			if (atomic_load_explicit(&(*dst)->status, memory_order_acquire) != *st)
				return nemo__fail(ESRCH, fn, "place %#llx left", (unsigned long long)dest);
			return nemo__fail(ENOENT, fn, "event %u is not mapped at place %#llx (nemo_am_event_map there)",
					  e, (unsigned long long)dest);
		}
		action = v - 1;
		ev1 = e + 1;
	} else {
		action = id;
		if (action >= d->A)
			return nemo__fail(ERANGE, fn, "action %u is out of range: the domain has max_actions %u",
					  action, d->A);
		if (!action_ok(d, action))
			return nemo__fail(ENOENT, fn, "action %u has no handler in this domain (nemo_action_register)",
					  action);
	}
	*meta = nemo__meta(action, ev1, (uint32_t)len);
	return 0;
}

int nemo__am_args_fail(const void *payload, size_t len, unsigned flags, const char *fn)
{
	int err = nemo__check_flags(flags, fn);
	if (err)
		return err;
	if (len > NEMO_AM_PAYLOAD_MAX)
		return nemo__fail(EMSGSIZE, fn, "payload of %zu bytes: at most %u fit in a message", len,
				  NEMO_AM_PAYLOAD_MAX);
	if (len && !payload)
		return nemo__fail(EINVAL, fn, "payload is NULL with len %zu", len);
	return 0;
}

/* Resolve and send one message with a checked payload (tagged: a reply's
 * NEMO__META_TAGGED, its tag the payload's first 8 bytes). */
static inline __attribute__((always_inline)) int
send_one(nemo_place *me, nemo_place_id dest, uint32_t id, uint64_t arg, const void *payload, size_t len,
	 unsigned flags, uint32_t tagged, const char *fn)
{
	nemo__busy_enter(me);
	uint32_t meta = 0;
	uint64_t st;
	nemo_place *dst;
	int err = resolve(me->d, dest, id, len, &meta, &dst, &st, fn);
	if (!err)
		err = nemo__msg_send(me, dst, st, dest, meta | tagged, arg, payload, len, flags);
	nemo__busy_exit(me);
	return err;
}

int nemo_am_sendv(nemo_place_id dest, uint32_t id, uint64_t arg, const void *payload,
		  size_t len, unsigned flags)
{
	if (nemo__id_is_remote(dest)) return nemo__remote_am(dest, id, arg, payload, len, flags, NULL, NULL);  /* remote.h */
	nemo_place *me = nemo__place_self();
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	int err = nemo__am_check_args(payload, len, flags, __func__);
	return err ? err : send_one(me, dest, id, arg, payload, len, flags, 0, __func__);
}


int nemo__am_sendv_flags(nemo_place_id dest, uint32_t id, uint64_t arg, const void *payload, size_t len,
			 unsigned flags)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	int err = nemo__am_check_args(payload, len, flags & NEMO__SEND_FLAGS, "nemo_am_sendv");
	return err ? err : send_one(me, dest, id, arg, payload, len, flags, 0, "nemo_am_sendv");
}

int nemo_am_sendv_timed(nemo_place_id dest, uint32_t id, uint64_t arg, const void *payload, size_t len,
			unsigned flags, const struct timespec *abstime)
{
	int err = nemo__check_deadline(__func__, CLOCK_MONOTONIC, abstime);
	if (err)
		return err;
	if (nemo__id_is_remote(dest)) return nemo__remote_am(dest, id, arg, payload, len, flags, NULL, abstime);  /* remote.h */
	nemo_place *me = nemo__place_self();
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	if ((err = nemo__am_check_args(payload, len, flags, __func__)))
		return err;
	/* The deadline reaches the wait for room through the place (overflow.c,
	 * nemo__wait_room), not through every put's arguments. */
	const struct timespec *outer = me->send_by;
	me->send_by = abstime;
	err = send_one(me, dest, id, arg, payload, len, flags, 0, __func__);
	me->send_by = outer;
	return err;
}

int nemo_am_send_timed(nemo_place_id dest, uint32_t id, uint64_t arg, unsigned flags,
		       const struct timespec *abstime)
{
	return nemo_am_sendv_timed(dest, id, arg, NULL, 0, flags, abstime);
}

int nemo_am_reply(const nemo_am_msg *req, uint32_t id, uint64_t arg, const void *payload, size_t len,
		  unsigned flags)
{
	if (req && nemo__id_is_remote(req->src)) return nemo__remote_am(req->src, id, arg, payload, len, flags, &req->arg, NULL);  /* remote.h */
	nemo_place *me = nemo__place_self();
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	if (!req)
		return NEMO__FAIL(EINVAL, "req is NULL");
	int err = nemo__am_check_args(payload, len, flags, __func__);
	if (err)
		return err;
	/* The request's arg travels first, as the reply's tag. */
	unsigned char buf[NEMO__WIRE_PAYLOAD_MAX];
	memcpy(buf, &req->arg, sizeof req->arg);
	if (len)
		memcpy(buf + sizeof req->arg, payload, len);
	return send_one(me, req->src, id, arg, buf, len + sizeof req->arg, flags, NEMO__META_TAGGED, __func__);
}

int nemo_domain_am_send(nemo_domain *d, nemo_place_id dest, uint32_t id, uint64_t arg, const void *payload,
			size_t len, unsigned flags)
{
	int err = nemo__place_adopt(d, __func__);
	return err ? err : nemo_am_sendv(dest, id, arg, payload, len, flags);
}

int nemo_am_send_batch(nemo_place_id dest, uint32_t id, const uint64_t *args, size_t n,
		       unsigned flags, size_t *sent)
{
	nemo_place *me = nemo__place_self();
	if (sent)
		*sent = 0;
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	if (n && !args)
		return NEMO__FAIL(EINVAL, "args is NULL with n %zu", n);
	int err = nemo__am_check_args(NULL, 0, flags, __func__);
	if (err)
		return err;
	nemo__busy_enter(me);
	uint32_t meta = 0;
	uint64_t st;
	nemo_place *dst;
	size_t k = 0;
	err = resolve(me->d, dest, id, 0, &meta, &dst, &st, __func__);
	if (!err && n)
		err = nemo__msg_send_batch(me, dst, st, dest, meta, args, n, flags, &k);
	nemo__busy_exit(me);
	if (sent)
		*sent = k;
	return err;
}

int nemo_am_broadcast(const nemo_place_id *set, size_t n, uint32_t id, uint64_t arg,
		      const void *payload, size_t len, unsigned flags, size_t *sent)
{
	nemo_place *me = nemo__place_self();
	if (sent)
		*sent = 0;
	if (set && n && nemo__id_is_remote(set[0]))  /* remote.h */
		return nemo__remote_broadcast(set, n, id, arg, payload, len, flags, sent);
	if (!me && !set && !n)  /* to everyone: a place of a shared domain's, or none (remote.h) */
		return nemo__remote_self(NEMO__SELF_BROADCAST, &(nemo__remote_self_args){ .id = id, .arg = arg,
					 .payload = payload, .len = len, .flags = flags, .sent = sent }, __func__);
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	if (!set && n)
		return NEMO__FAIL(EINVAL, "set is NULL with n %zu", n);
	int err = nemo__am_check_args(payload, len, flags, __func__);
	if (err)
		return err;
	struct nemo_domain *d = me->d;
	/* Every place but the caller, as of now. */
	nemo_place_id all[NEMO_PLACES_MAX];
	if (!set) {
		for (unsigned i = 0; i < d->P; i++) {
			if (i == me->idx)
				continue;
			uint64_t s = atomic_load_explicit(&d->places[i].status, memory_order_acquire);
			if (nemo__status_state(s) == NEMO__ST_ACTIVE)
				all[n++] = nemo__make_id(i, nemo__status_gen(s));
		}
		set = all;
	}
	nemo__busy_enter(me);
	/* Queue to everyone first, then wake everyone: the receivers start
	 * as close together as the kicks allow. */
	int first = 0;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t meta = 0;
		uint64_t st;
		nemo_place *dst;
		int e = resolve(d, set[i], id, len, &meta, &dst, &st, __func__);
		if (!e)
			e = nemo__msg_send(me, dst, st, set[i], meta, arg, payload, len, flags | NEMO_MORE);
		if (e) {
			if (!first)
				first = e;
			continue;
		}
		k++;
	}
	if (!(flags & NEMO_MORE)) {
		/* One publication for all: the sleepers among the receivers are
		 * woken by a single FUTEX_WAKE_BITSET (kick.c). */
		unsigned rs[NEMO_PLACES_MAX];
		size_t nr = 0;
		for (size_t i = 0; i < n && nr < NEMO_PLACES_MAX; i++) {
			unsigned r = nemo_place_index(set[i]);
			if (r < d->P && me->out_row[r].deferred) {
				me->out_row[r].deferred = 0;   /* a duplicate in set: once */
				rs[nr++] = r;
			}
		}
		nemo__publish_many(me, rs, nr, flags & NEMO_PUSH);
	}
	nemo__busy_exit(me);
	if (sent)
		*sent = k;
	return first;
}
