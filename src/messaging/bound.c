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
 *   - S1-S5 exactly as queue.c writes them (S3 with the same take-back),
 *     S4g included: a receiver that granted the stream (queue.c, THE
 *     STREAM GRANT) spares it P-S5.
 * What it does differently: it counts its sends in c_am_sent 64 at a
 * time (nemo__out_settle), and sets the interrupt-deferral flag only in
 * interrupt mode (a store per message each, which a stream pays for).
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
	uint32_t mask, rbits;
	uint32_t seq[2];              /* the head seq for an even and an odd lap (nemo__slot_seq) */
	_Atomic uint64_t *hint;       /* our hint word at dst, and our bit in it */
	uint64_t bit;
	_Atomic uint64_t *grant;      /* dst's grant word with our bit (queue.c, THE STREAM GRANT) */
	bool always_slow;             /* a notification's, NEMO_MORE, delay stamps, or no
	                                 membarrier (S2 would fence): the generic path */
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
	nemo__out *o = &me->out_row[r];
	uint32_t rtag = nemo__rtag(nemo__id_gen(dest));
	if (!o->bound) {
		/* From now on the pair's other sends keep mark (nemo__out_settle):
		 * nothing is uncounted yet. */
		o->mark = o->tail;
		o->bound = 1;
	}
	*b = (nemo_am_bound){
		.me = me, .gen = me->gen, .dst = dst, .st = st, .dest = dest, .r = r, .flags = flags,
		.meta = meta, .notify = notify, .o = o, .lk = nemo__link_of(d, r, me->idx),
		.held = &me->link_row[r].held, .ring = nemo__ring_of(d, r, me->idx), .mask = d->R - 1,
		.rbits = d->Rbits,
		.hint = nemo__hint_row(d, r) + me->idx / 64, .bit = 1ull << (me->idx % 64),
		.grant = nemo__grant_row(d, r) + me->idx / 64,
		.seq = { nemo__slot_seq(0, d->Rbits, rtag), nemo__slot_seq(d->R, d->Rbits, rtag) },
		.always_slow = notify || d->stamps || (flags & NEMO_MORE) || !nemo__asym,
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
	if (me->gen != b->gen)
		return stale(fn);
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

/* The first checks failed: say which. */
static __attribute__((noinline, cold)) int refused(nemo_am_bound *b, const char *fn)
{
	return b ? stale(fn) : nemo__fail(EINVAL, fn, "the binding is NULL");
}

/* S0 found the destination gone. */
static __attribute__((noinline, cold)) int spent(nemo_am_bound *b, const char *fn)
{
	return nemo__fail(ESRCH, fn, "place %#llx left: the binding is spent", (unsigned long long)b->dest);
}

/* S3 found the destination leaving after S1 (queue.c, SEND): take the
 * entry back unless it was delivered. */
static __attribute__((noinline, cold)) int raced(nemo_am_bound *b, nemo_place *me, nemo__slot *hs, uint32_t seq,
						 uint32_t p, const char *fn)
{
	struct nemo__ring_back back = { b->o, b->lk, hs, seq, p, p + 1 };
	if (nemo__ring_back(&back)) {
		NEMO__PCOUNT(me, c_send_failures);
		return nemo__fail(ESRCH, fn, "place %#llx left during the send: not delivered",
				  (unsigned long long)b->dest);
	}
	return 0;    /* read before, or taken by, the leave: counted with [mark, tail) */
}

/* P-S5 when the receiver does not grant the stream. */
static __attribute__((noinline)) void publish(nemo_am_bound *b, nemo_place *me)
{
	NEMO__FENCE();                                                       /* P */
	if (nemo__hint_test_set(me, b->hint, b->bit, b->flags & NEMO_PUSH))  /* S4 */
		nemo__kick(me, b->dst);                                      /* S5 */
}

/*
 * The fast path: one test for everything out of the ordinary (a new
 * occupant of the calling thread's index, a queue not yet claimed, a
 * notification binding or delay stamps, a handler sending, kept sends,
 * a full ring, a nested call, a served place, a receiver keeping sends
 * for us), then S0, S1, S3 and - unless the receiver granted the stream
 * (queue.c, THE STREAM GRANT) - P-S5 out of line.  The rare outcomes
 * are cold functions, so the common one is a straight line.
 */
int nemo_am_send_bound(nemo_am_bound *b, uint64_t arg)
{
	nemo_place *me = nemo__tls_place;
	if (__builtin_expect(!b || me != b->me, 0))     /* b->me is never NULL */
		return refused(b, __func__);
	nemo__out *o = b->o;
	uint32_t p = o->tail;
	if (__builtin_expect(((me->gen ^ b->gen) | (o->ring_gen ^ b->gen)) != 0 ||
			     (b->always_slow | (me->hdepth != 0) | (o->ovf_ring != 0) | (p - o->ack_seen > b->mask) |
			      (atomic_load_explicit(&me->busy, memory_order_relaxed) != 0) |
			      (atomic_load_explicit(&me->delegated, memory_order_relaxed) != 0) |
			      (atomic_load_explicit(b->held, memory_order_relaxed) != 0)), 0))
		return slow(b, me, arg, __func__);
	nemo_place *dst = b->dst;
	if (__builtin_expect(atomic_load_explicit(&dst->status, memory_order_acquire) != b->st, 0))   /* S0 */
		return spent(b, __func__);
	/* E1 (irq.c) without nemo__busy_enter's tests (busy is 0 and the
	 * place is not served, checked above), and only in interrupt mode:
	 * with interrupts off the signal handler touches nothing but
	 * irq_pending (H1), which the next nemo call handles, and only this
	 * thread turns them on.  Fewer stores matter here: a stream's sender
	 * waits on its store buffer (docs/messaging.md, "Stream grants"). */
	bool irq = atomic_load_explicit(&me->irq_on, memory_order_relaxed);
	if (irq) {
		atomic_store_explicit(&me->busy, 1, memory_order_relaxed);
		atomic_signal_fence(memory_order_seq_cst);
	}
	nemo__slot *hs = &b->ring[p & b->mask];                          /* S1 */
	hs->meta = b->meta;
	hs->arg = arg;
	uint32_t seq = b->seq[(p >> b->rbits) & 1u];
	atomic_store_explicit(&hs->seq, seq, memory_order_release);
	o->tail = p + 1;
	int err = 0;
	/* S2 is no fence: always_slow sends everything through the generic
	 * path where membarrier is missing. */
	if (__builtin_expect(atomic_load_explicit(&dst->status, memory_order_seq_cst) != b->st, 0)) { /* S3 */
		err = raced(b, me, hs, seq, p, __func__);
	} else {
		/* Counted later, NEMO__BOUND_SETTLE at a time (nemo__out_settle):
		 * a counter store per message cost a stream a fifth of its rate. */
		if (p + 1 - o->mark >= NEMO__BOUND_SETTLE)
			nemo__out_settle(me, o);
		/* Not NEMO_MORE (always_slow): publish. */
		if (o->deferred)
			o->deferred = 0;
		atomic_signal_fence(memory_order_seq_cst);
		if (!nemo__granted(b->grant, b->bit))                          /* S4g */
			publish(b, me);                                      /* P-S5 */
	}
	if (irq) {
		/* E2 (irq.c), for the same reason without nemo__busy_exit's tests. */
		atomic_signal_fence(memory_order_seq_cst);
		atomic_store_explicit(&me->busy, 0, memory_order_relaxed);
		atomic_signal_fence(memory_order_seq_cst);
		if (__builtin_expect(atomic_load_explicit(&me->irq_pending, memory_order_relaxed), 0)) {
			nemo__busy_enter(me);    /* what an interrupt deferred meanwhile */
			nemo__busy_exit(me);
		}
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
		return refused(b, __func__);
	if (!b->notify)
		return NEMO__FAIL(EINVAL, "the binding is an active message's (nemo_am_send_bound)");
	return slow(b, me, 0, __func__);
}
