/*
 * bound.c - curried sends (seed 004, Plan 9's fastwrite): what does not
 * change between sends - the destination, the action, the flags - is
 * validated once, at nemo_am_bind / nemo_notify_bind, and each bound send
 * runs the ring's minimal path.
 *
 * What a binding keeps: the binding place (and its generation), the
 * destination's record and the status word it had (generation and
 * ACTIVE), the resolved meta word, the sender-side position and link of
 * the pair, the ring base, and the sequence tag of the receiver.
 *
 * What a bound send still does, and why:
 *   - checks that the caller is the binding place, still the same
 *     occupant (one thread-local load and two compares): a binding is
 *     the place's own, like its queues, and after it leaves the binding's
 *     pointers may name freed memory;
 *   - S0: the destination's status is still the bound one (one load of a
 *     line senders read anyway), else ESRCH;
 *   - takes the generic path (nemo_am_sendv's, with its waits and the
 *     overflow) whenever anything is out of the ordinary: a handler
 *     sending, a full ring, kept sends, a receiver holding kept sends for
 *     us, a served place, nested calls, delay stamps;
 *   - S1-S5 exactly as queue.c writes them (S3 with the same take-back).
 * What it skips: the thread-local place lookup through a call, flag and
 * payload checks, the destination lookup by id, the action lookup, the
 * meta encoding, the busy bookkeeping calls (done inline), and the
 * generic path's branches for payloads.  docs/messaging.md has the
 * callgrind count of both paths.
 */
#define _GNU_SOURCE
#include "messaging_internal.h"

#include <errno.h>
#include <stdlib.h>

struct nemo_am_bound {
	nemo_place *me;
	uint64_t gen;                 /* the binding occupant's generation */
	nemo_place *dst;
	uint64_t st;                  /* dst's status word at bind time */
	nemo_place_id dest;
	unsigned r;
	unsigned flags;
	uint32_t meta;                /* action, event + 1, length 0 (ring); channel (FIFO) */
	bool notify;
	nemo__out *o;
	nemo__link *lk;               /* the pair's link (ours -> dst) */
	_Atomic uint32_t *held;       /* dst keeps sends for us (overflow.c) */
	nemo__slot *ring;
	uint32_t mask, rbits, rtag;
	_Atomic uint64_t *hint;       /* our hint word at dst, and our bit in it */
	uint64_t bit;
};

static int stale(const char *fn)
{
	return nemo__fail(ENOTCONN, fn, "the calling thread is not the place that made this binding "
			  "(it left, or another thread calls)");
}

static int bind_common(nemo_place_id dest, unsigned flags, bool notify, uint32_t meta, nemo_am_bound **out,
		       const char *fn)
{
	nemo_place *me = nemo__place_self();
	struct nemo_domain *d = me->d;
	uint64_t st;
	nemo_place *dst = nemo__dest(d, dest, &st);
	if (!dst)
		return nemo__fail(ESRCH, fn, "place %#llx is not in the domain (never was, or left)",
				  (unsigned long long)dest);
	nemo_am_bound *b = calloc(1, sizeof *b);
	if (!b)
		return ENOMEM;
	unsigned r = nemo_place_index(dest);
	*b = (nemo_am_bound){
		.me = me, .gen = me->gen, .dst = dst, .st = st, .dest = dest, .r = r, .flags = flags,
		.meta = meta, .notify = notify, .o = &me->out_row[r], .lk = nemo__link_of(d, r, me->idx),
		.held = &me->link_row[r].held, .ring = nemo__ring_of(d, r, me->idx), .mask = d->R - 1,
		.rbits = d->Rbits, .rtag = nemo__rtag(nemo__id_gen(dest)),
		.hint = nemo__hint_row(d, r) + me->idx / 64, .bit = 1ull << (me->idx % 64),
	};
	*out = b;
	return 0;
}

/* What both binds check first: the caller, out, the flags. */
static int bind_check(unsigned flags, nemo_am_bound **out, nemo_place **me, const char *fn)
{
	if (!(*me = nemo__place_self()))
		return nemo__fail(ENOTCONN, fn, "the calling thread is not a place (nemo_place_join first)");
	if (!out)
		return nemo__fail(EINVAL, fn, "out is NULL");
	*out = NULL;
	return nemo__check_flags(flags, fn);
}

int nemo_am_bind(nemo_place_id dest, uint32_t id, unsigned flags, nemo_am_bound **out)
{
	nemo_place *me;
	uint32_t meta;
	int err = bind_check(flags, out, &me, __func__);
	if (!err)
		err = nemo__am_resolve(me->d, dest, id, 0, &meta, __func__);
	return err ? err : bind_common(dest, flags, false, meta, out, __func__);
}

int nemo_notify_bind(nemo_place_id dest, uint32_t chan, unsigned flags, nemo_am_bound **out)
{
	nemo_place *me;
	int err = bind_check(flags, out, &me, __func__);
	if (err)
		return err;
	if (chan > NEMO_NOTIFY_CHAN_MAX)
		return NEMO__FAIL(ERANGE, "channel %u is above %u", chan, NEMO_NOTIFY_CHAN_MAX);
	return bind_common(dest, flags, true, chan, out, __func__);
}

int nemo_am_unbind(nemo_am_bound *b)
{
	if (!b)
		return NEMO__FAIL(EINVAL, "the binding is NULL");
	free(b);
	return 0;
}

/* Everything out of the ordinary: the generic path. */
static __attribute__((noinline)) int slow(nemo_am_bound *b, nemo_place *me, uint64_t arg, const char *fn)
{
	int err;
	nemo__busy_enter(me);
	if (b->notify) {
		err = nemo__notify_send(me, b->dest, b->meta, b->flags);
	} else {
		uint64_t st;
		nemo_place *dst = nemo__dest(me->d, b->dest, &st);
		err = dst ? nemo__msg_send(me, dst, st, b->dest, b->meta, arg, NULL, 0, b->flags)
			  : nemo__fail(ESRCH, fn, "place %#llx left: the binding is spent",
				       (unsigned long long)b->dest);
	}
	nemo__busy_exit(me);
	return err;
}

int nemo_am_send_bound(nemo_am_bound *b, uint64_t arg)
{
	nemo_place *me = nemo__tls_place;
	if (__builtin_expect(!b || !me || me != b->me || me->gen != b->gen, 0))
		return b ? stale(__func__) : NEMO__FAIL(EINVAL, "the binding is NULL");
	nemo__out *o = b->o;
	struct nemo_domain *d = me->d;
	uint32_t p = o->tail;
	if (__builtin_expect(b->notify | me->hdepth | o->ovf_ring | (p + 1 - o->ack_seen > d->R) |
			     (o->ring_gen != me->gen) |
			     atomic_load_explicit(&me->busy, memory_order_relaxed) |
			     atomic_load_explicit(&me->delegated, memory_order_relaxed) |
			     atomic_load_explicit(b->held, memory_order_relaxed), 0) ||
	    d->stamps)
		return slow(b, me, arg, __func__);
	nemo_place *dst = b->dst;
	if (__builtin_expect(atomic_load_explicit(&dst->status, memory_order_acquire) != b->st, 0))   /* S0 */
		return nemo__fail(ESRCH, __func__, "place %#llx left: the binding is spent",
				  (unsigned long long)b->dest);
	/* E1 (irq.c) without nemo__busy_enter's tests: busy is 0 and the
	 * place is not served, checked above. */
	atomic_store_explicit(&me->busy, 1, memory_order_relaxed);
	atomic_signal_fence(memory_order_seq_cst);
	nemo__slot *hs = &b->ring[p & b->mask];                          /* S1 */
	hs->meta = b->meta;
	hs->arg = arg;
	uint32_t seq = nemo__slot_seq(p, b->rbits, b->rtag);
	atomic_store_explicit(&hs->seq, seq, memory_order_release);
	o->tail = p + 1;
	struct nemo__ring_back back = { o, b->lk, hs, seq, p, p + 1 };
	int err = nemo__send_commit(me, dst, b->st, b->dest, b->flags, &me->c_am_sent, nemo__ring_back, &back,
				    __func__, o, b->hint, b->bit);             /* S2-S5 */
	/* E2 (irq.c), for the same reason without nemo__busy_exit's tests. */
	atomic_signal_fence(memory_order_seq_cst);
	atomic_store_explicit(&me->busy, 0, memory_order_relaxed);
	atomic_signal_fence(memory_order_seq_cst);
	if (__builtin_expect(atomic_load_explicit(&me->irq_pending, memory_order_relaxed), 0)) {
		nemo__busy_enter(me);    /* what an interrupt deferred meanwhile */
		nemo__busy_exit(me);
	}
	return err;
}

bool nemo__bound_is_notify(const nemo_am_bound *b)
{
	return b->notify;
}

int nemo_notify_bound(nemo_am_bound *b)
{
	nemo_place *me = nemo__tls_place;
	if (__builtin_expect(!b || !me || me != b->me || me->gen != b->gen, 0))
		return b ? stale(__func__) : NEMO__FAIL(EINVAL, "the binding is NULL");
	if (!b->notify)
		return NEMO__FAIL(EINVAL, "the binding is an active message's (nemo_am_send_bound)");
	return slow(b, me, 0, __func__);
}
