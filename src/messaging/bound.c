/*
 * bound.c - curried sends (Minnich, Floren & McKie, "Currying and
 * process-private system calls": Plan 9's fastwrite): what does not
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
 *   - S1-S5 exactly as send.c writes them (S3 with the same take-back),
 *     S4g included: a receiver that granted the stream (grant.c, THE
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
#include "remote.h"

#include <errno.h>
#include <stdlib.h>


static int stale(const char *fn)
{
	return nemo__fail(ENOTCONN, fn, "the calling thread is not the place that made this binding "
			  "(it left, or another thread calls)");
}

/* Fill binding b of the calling place me for dst (status st). */
static void bind_fill(nemo_am_bound *b, nemo_place *me, nemo_place *dst, uint64_t st, nemo_place_id dest,
		      uint32_t id, unsigned flags, bool notify, uint32_t meta, bool curry)
{
	struct nemo_domain *d = me->d;
	unsigned r = nemo_place_index(dest);
	nemo__out *o = &me->out_row[r];
	uint32_t rtag = nemo__rtag(nemo__id_gen(dest));
	/* A binding's NEMO_MORE goes the generic way (a curry takes each
	 * send's own: curry is true there). */
	bool base_slow = notify || d->stamps || !nemo__asym || (!curry && (flags & NEMO_MORE));
	*b = (nemo_am_bound){
		.me = me, .gen = me->gen, .dst = dst, .st = st, .dest = dest, .id = id, .r = r, .flags = flags,
		.meta = meta, .notify = notify, .curry = curry, .o = o, .lk = nemo__link_of(d, r, me->idx),
		.held = &me->link_row[r].held, .ring = nemo__ring_of(d, r, me->idx), .mask = d->R - 1,
		.lapshift = d->Rbits - 1, .seq0 = nemo__slot_seq(0, d->Rbits, rtag),
		.hint = nemo__hint_row(d, r) + me->idx / 64, .bit = 1ull << (me->idx % 64),
		.grant = nemo__grant_row(d, r) + me->idx / 64,
		.base_slow = base_slow, .always_slow = base_slow || o->ring_gen != me->gen,
	};
	b->fast_gen = b->always_slow ? 0 : b->gen;
}

static int bind_common(nemo_place_id dest, unsigned flags, bool notify, uint32_t meta, nemo_am_bound **out,
		       const char *fn)
{
	nemo_place *me = nemo__place_self();
	uint64_t st;
	nemo_place *dst = nemo__dest(me->d, dest, &st);
	if (!dst)
		return nemo__fail(ESRCH, fn, "place %#llx is not in the domain (never was, or left)",
				  (unsigned long long)dest);
	nemo_am_bound *b = calloc(1, sizeof *b);
	if (!b)
		return ENOMEM;
	nemo__out *o = &me->out_row[nemo_place_index(dest)];
	if (!o->bound) {
		/* From now on the pair's other sends keep mark (nemo__out_settle):
		 * nothing is uncounted yet. */
		o->mark = o->tail;
		o->bound = 1;
	}
	bind_fill(b, me, dst, st, dest, 0, flags, notify, meta, false);
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
	/* The queue is claimed now (WHO SENT IT): the fast path may take it. */
	if (!err && b->always_slow && !b->base_slow && b->o->ring_gen == b->gen) {
		b->always_slow = false;
		b->fast_gen = b->gen;
	}
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

/* A curry's send at position p was delivered: count it as the generic
 * path counts (nemo__out_advance: the bound sends before it first). */
static inline __attribute__((always_inline)) void curry_count(nemo_place *me, nemo__out *o, uint32_t p)
{
	if (__builtin_expect(o->bound, 0)) {
		/* The bound sends of [mark, p) first, then ours: mark past it. */
		NEMO__PADD(me, c_am_sent, p - o->mark + 1);
		o->mark = p + 1;
		return;
	}
	NEMO__PCOUNT(me, c_am_sent);
}

/* S3 found the destination leaving after S1 (send.c, SEND): take the
 * entry back unless it was delivered. */
static __attribute__((noinline, cold)) int raced(nemo_am_bound *b, nemo_place *me, nemo__slot *hs, uint32_t seq,
						 uint32_t p)
{
	struct nemo__ring_back back = { b->o, b->lk, hs, seq, p, p + 1 };
	if (nemo__ring_back(&back)) {
		NEMO__PCOUNT(me, c_send_failures);
		return nemo__fail(ESRCH, b->curry ? "nemo_am_send" : "nemo_am_send_bound",
				  "place %#llx left during the send: not delivered", (unsigned long long)b->dest);
	}
	/* Read before, or taken by, the leave: a binding's is counted with
	 * [mark, tail), a curry's now. */
	if (b->curry)
		curry_count(me, b->o, p);
	return 0;
}

/* P-S5 when the receiver does not grant the stream; the send's result. */
static __attribute__((noinline)) int publish(nemo_am_bound *b, nemo_place *me, unsigned flags)
{
	NEMO__FENCE();                                                       /* P */
	if (nemo__hint_test_set(me, b->hint, b->bit, flags & NEMO_PUSH))    /* S4 */
		nemo__kick(me, b->dst);                                      /* S5 */
	return 0;
}

/* S1-S5 of a bound send whose checks and S0 passed (fast(), below). */
static inline __attribute__((always_inline)) int put(nemo_am_bound *b, nemo_place *me, uint64_t arg,
						     nemo__out *o, uint32_t p, const bool curry, unsigned flags)
{
	nemo__slot *hs = &b->ring[p & b->mask];                          /* S1 */
	hs->meta = b->meta;
	hs->arg = arg;
	uint32_t seq = b->seq0 | ((p >> b->lapshift) & 2u);             /* the lap bit */
	atomic_store_explicit(&hs->seq, seq, memory_order_release);
	o->tail = p + 1;
	/* S2 is no fence: base_slow sends everything through the generic
	 * path where membarrier is missing. */
	if (__builtin_expect(atomic_load_explicit(&b->dst->status, memory_order_seq_cst) != b->st, 0))   /* S3 */
		return raced(b, me, hs, seq, p);
	if (curry)
		curry_count(me, o, p);
	else if (p + 1 - o->mark >= NEMO__BOUND_SETTLE)
		/* Counted later, NEMO__BOUND_SETTLE at a time (nemo__out_settle):
		 * a counter store per message cost a stream a fifth of its rate. */
		nemo__out_settle(me, o);
	if (flags & NEMO_MORE) {
		o->deferred = 1;     /* S4-S5 at the next publishing send or nemo_flush */
		return 0;
	}
	/* Publish.  (A NEMO_MORE send before it may have left o->deferred
	 * set: this publication covers its entry too, and the flag's next
	 * reader publishes once more, which costs it one hint load.) */
	atomic_signal_fence(memory_order_seq_cst);
	if (!nemo__granted(b->grant, b->bit))                                /* S4g */
		return publish(b, me, curry ? flags : b->flags);             /* P-S5 */
	return 0;
}

static int send_and_curry(nemo_place *me, nemo_place_id dest, uint32_t id, uint64_t arg, unsigned flags);
/* What sends b's send at position p the generic way, busy aside (the
 * caller's own test: fast() reads it, fast_irq sets it): a new occupant,
 * a served or keeping place (fast_key), a full ring, a receiver keeping
 * sends for us (held). */
static inline __attribute__((always_inline)) bool off_fast(const nemo_am_bound *b, const nemo_place *me,
							   const nemo__out *o, uint32_t p)
{
	return (me->fast_key != b->fast_gen) | (p - o->ack_seen > b->mask) |
	       (atomic_load_explicit(b->held, memory_order_relaxed) != 0);
}


/* A curry that cannot take the fast path: the generic send, with the
 * send's own flags. */
static __attribute__((noinline)) int curry_slow(nemo_am_bound *c, nemo_place *me, uint64_t arg, unsigned flags)
{
	return send_and_curry(me, c->dest, c->id, arg, flags);
}

/*
 * fast() in interrupt mode: E1 and E2 of irq.c around the checks and
 * put(), without nemo__busy_enter's tests (the place is not served,
 * checked).  With interrupts off the signal handler touches nothing but
 * irq_pending (H1), which the next nemo call handles, and only this
 * thread turns them on: so only here does a bound send store busy (a
 * stream's sender waits on its store buffer: docs/messaging.md, "Stream
 * grants").
 *
 * Everything the send reads of its pair - the tail, ack_seen, held,
 * fast_key - is read after busy is set: a signal that lands before
 * then runs handlers whose replies go the generic way and move the
 * same tail.  A position read before the store would be written twice:
 * the handler's message overwritten, and the receiver, which had taken
 * it, never sees ours (two places waiting for each other's reply, for
 * good).
 */
static __attribute__((noinline)) int fast_irq(nemo_am_bound *b, nemo_place *me, uint64_t arg, const bool curry,
					      unsigned flags)
{
	if (atomic_load_explicit(&me->busy, memory_order_relaxed) != 0)   /* nested: a handler's send */
		return curry ? curry_slow(b, me, arg, flags) : slow(b, me, arg, "nemo_am_send_bound");
	atomic_store_explicit(&me->busy, 1, memory_order_relaxed);
	atomic_signal_fence(memory_order_seq_cst);
	nemo__out *o = b->o;
	uint32_t p = o->tail;
	int err = 0;
	bool go_slow = off_fast(b, me, o, p);
	bool gone = !go_slow && atomic_load_explicit(&b->dst->status, memory_order_acquire) != b->st;   /* S0 */
	if (!go_slow && !gone)
		err = curry ? put(b, me, arg, o, p, true, flags) : put(b, me, arg, o, p, false, flags);
	atomic_signal_fence(memory_order_seq_cst);
	atomic_store_explicit(&me->busy, 0, memory_order_relaxed);
	atomic_signal_fence(memory_order_seq_cst);
	if (__builtin_expect(atomic_load_explicit(&me->irq_pending, memory_order_relaxed), 0)) {
		nemo__busy_enter(me);    /* what an interrupt deferred meanwhile */
		nemo__busy_exit(me);
	}
	if (go_slow || gone)
		return curry ? curry_slow(b, me, arg, flags)
			     : go_slow ? slow(b, me, arg, "nemo_am_send_bound") : spent(b, "nemo_am_send_bound");
	return err;
}



/*
 * The fast path: one test for everything out of the ordinary (a new
 * occupant of the calling thread's index, a queue not yet claimed, a
 * notification binding or delay stamps, kept sends, a full ring, a
 * nested call - a handler's send included -, a served place, a receiver
 * keeping sends for us), then S0, S1, S3 and - unless the receiver
 * granted the stream (grant.c, THE STREAM GRANT) - P-S5 out of line.
 * Every rare outcome is a tail call of a function out of line, so the
 * common one is a straight line that keeps nothing across a call.
 */
static inline __attribute__((always_inline)) int fast(nemo_am_bound *b, nemo_place *me, uint64_t arg,
						      const bool curry, unsigned flags)
{
	/* Interrupt mode reads the pair only once busy is set (fast_irq). */
	if (__builtin_expect(atomic_load_explicit(&me->irq_on, memory_order_relaxed), 0))
		return fast_irq(b, me, arg, curry, flags);
	nemo__out *o = b->o;
	uint32_t p = o->tail;
	/* fast_key (messaging_internal.h) is 0 while the place is served or
	 * keeps sends, and fast_gen 0 while the binding must go the generic
	 * way: one compare for the place's generation and all four. */
	if (__builtin_expect(off_fast(b, me, o, p) |
			     (atomic_load_explicit(&me->busy, memory_order_relaxed) != 0), 0))
		return curry ? curry_slow(b, me, arg, flags) : slow(b, me, arg, "nemo_am_send_bound");
	if (__builtin_expect(atomic_load_explicit(&b->dst->status, memory_order_acquire) != b->st, 0))   /* S0 */
		return curry ? curry_slow(b, me, arg, flags) : spent(b, "nemo_am_send_bound");
	return put(b, me, arg, o, p, curry, flags);
}

int nemo_am_send_bound(nemo_am_bound *b, uint64_t arg)
{
	nemo_place *me = nemo__tls_place;
	if (__builtin_expect(!b || me != b->me, 0))     /* b->me is never NULL */
		return refused(b, __func__);
	return fast(b, me, arg, false, 0);   /* its flags: NEMO_MORE goes slow, NEMO_PUSH is publish's */
}

/* The flags a curried send takes from each call, not from its key. */
#define CURRY_PER_SEND ((unsigned)(NEMO_MORE | NEMO_PUSH))

/*
 * THE GENERIC SEND CURRIES ITSELF
 *
 * A program that calls nemo_am_send again and again sends to the same
 * destination with the same action and flags far more often than not -
 * a client to its server, a stage to the next, a worker back to its
 * client.  So each place keeps a binding of its last (destination,
 * action, flags), its curry, made by the generic path after a send that
 * succeeded, and nemo_am_send compares the three words and runs the
 * bound send's fast path (fast(), above) on a match.  Everything fast()
 * sends through the generic path (a full ring, a handler's send that may
 * have to be kept, kept sends, a receiver keeping ours, a served or
 * nested call, delay stamps) falls back to it here too, and
 * so do a receiver that left (its generic send says why) and a new
 * occupant of our index (the generation check).  Actions cannot be
 * unregistered and a destination's id names one occupant, so a curry
 * that matches is still the resolution the generic path would compute;
 * events are not curried (their action is the destination's ALT's, which
 * may change between sends).  Unlike a user's binding, the curry counts
 * each send in am_sent as the generic path does.  NEMO_MORE and
 * NEMO_PUSH are not part of the key: each send brings its own (a stream
 * that defers all but every 64th send stays curried).  A key is curried at
 * its second send in a row, so a place that sends round the houses pays
 * three compares a send and no refill; docs/messaging.md has the counts.
 */
static __attribute__((noinline)) int send_and_curry(nemo_place *me, nemo_place_id dest, uint32_t id,
						    uint64_t arg, unsigned flags)
{
	int err = nemo_am_sendv(dest, id, arg, NULL, 0, flags);
	if (err || !me || nemo__id_is_remote(dest) || (id & 0x80000000u))
		return err;
	/* A served place is drained by the progress thread, whose handlers
	 * move hdepth under the place's lock: its sends are never curried
	 * (fast_key is 0 while served), and hdepth is not ours to read. */
	if (atomic_load_explicit(&me->delegated, memory_order_relaxed))
		return 0;
	if (atomic_load_explicit(&me->busy, memory_order_relaxed) || me->hdepth)
		return 0;    /* a handler's send: leave the caller's curry be */
	if (me->curry_miss.dest != dest || me->curry_miss.id != id ||
	    ((me->curry_miss.flags ^ flags) & ~CURRY_PER_SEND)) {
		me->curry_miss.dest = dest;
		me->curry_miss.id = id;
		me->curry_miss.flags = flags;
		return 0;
	}
	uint64_t st;
	nemo_place *dst = nemo__dest(me->d, dest, &st);
	if (!dst)
		return 0;
	/* The same meta word the generic path made: an action, no payload. */
	bind_fill(&me->curry, me, dst, st, dest, id, flags, false, nemo__meta(id, 0, 0), true);
	return 0;
}

int nemo_am_send(nemo_place_id dest, uint32_t id, uint64_t arg, unsigned flags)
{
	nemo_place *me = nemo__tls_place;
	if (__builtin_expect(me != NULL, 1)) {
		nemo_am_bound *c = &me->curry;
		/* NEMO_MORE and NEMO_PUSH are the send's own, not the key's:
		 * a stream that defers all but every 64th send stays curried. */
		if (__builtin_expect(((c->dest ^ dest) | (c->id ^ id) | ((c->flags ^ flags) & ~CURRY_PER_SEND)) == 0, 1))
			return fast(c, me, arg, true, flags);
	}
	return send_and_curry(me, dest, id, arg, flags);
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
