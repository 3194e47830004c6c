/*
 * drain.c - how a place finds and handles what is queued to it: the hot
 * queues and the hint words (D1, D2), consuming an entry (D3-D5), the
 * dispatch to its action, the final drain of a leave, and - once a drain
 * of a sender's queues consumed something - the room kick of a sender
 * that asked for it (RK1-RK4 of overflow.c, THE WAIT FOR ROOM).  The
 * queues themselves and the sends: send.c.
 *
 * RECEIVE (r; nemo__drain)
 *
 *   D1  the hot queues (senders found non-empty recently): consume what
 *       is valid.  A polling receiver sees a hot sender's entry with one
 *       line transfer, before the sender has even set its hint bit.
 *   D2  for each hint word that is not 0: x := exchange(word, 0,
 *       seq_cst); drain every queue whose bit is in x.
 *   Consuming an entry (drain_link):
 *   D3  load(seq or FIFO word at the private head, acquire); stop unless
 *       it is valid for this position and this receiver;
 *   D4  load(the queue's sender-generation word, relaxed): the sender
 *       is make_id(s, that generation);
 *   D5  give the entry back: FIFO store(word, 0, release); ring: advance
 *       the private head, and store(ack, head, release) every R/4
 *       slots and at the end of the drain (the final drain first CASes
 *       each entry to 0, acq_rel, for S3's race).
 *   The entry is copied out and given back before the handler runs, so
 *   a handler may itself poll or wait without seeing its own message
 *   again, and may wait for room in a queue to the same sender.
 *
 * WHY NO WAKE-UP IS LOST
 *
 * S4;S5 and W2;W3 are the store-buffering pattern (as in waiter.c): s
 * stores the hint bit then loads state; r stores state then loads the
 * hint; all seq_cst.  One of the two loads sees the other's store: r sees
 * the bit and does not sleep, or s sees SLEEPING and wakes it (the
 * waiter layer's CAS, then its bump of bseq and FUTEX_WAKE_BITSET: B1
 * read bseq before W2, and the CAS follows W2, so W4 either finds bseq
 * changed and returns at once or sleeps before the bump and is woken by
 * its bit).  When S4 finds the bit already set, s skips S5:
 * that bit's own setting was followed by its own S5, and r clears it only
 * in D2, whose exchange reads s's set bit; then s's load at S4, which
 * read the bit before that exchange, precedes it in the seq_cst order,
 * so the entry written before the fence P is visible to D2's loads that
 * follow the exchange: r drains it.  W6 does the same for a place that
 * handles messages on its own - interrupt mode, a descriptor, the
 * progress thread - where RUNNING (not SLEEPING) is the state whose kick
 * reaches the handling: a sender that read POLLING or SLEEPING does not
 * signal (or write, or tell the progress thread), and the place sees its
 * hint at W6.  Every wait on the place's slot leaves through W6 - the
 * wait for room too (overflow.c, RW5).
 * models/place.pml checks this with spin, with the broken variants
 * "kick before hint", "check before publishing SLEEPING", "bseq read
 * after publishing SLEEPING".
 *
 */
#define _GNU_SOURCE
#include "grant.h"

#include <errno.h>
#include <string.h>

/* One notification delay of me, for NEMO_DOMAIN_DELAYS (owner only;
 * read by src/poll/delay.c): now - the sender's stamp into a power-of-two
 * histogram of nanoseconds. */
void nemo__delay_record(nemo_place *me, uint64_t enq)
{
	uint64_t now = nemo_ticks();
	uint64_t ns = now > enq ? (uint64_t)nemo_ticks_to_ns((int64_t)(now - enq)) : 0;
	unsigned k = ns ? 63u - (unsigned)__builtin_clzll(ns) : 0;
	if (k >= NEMO__DELAY_BUCKETS)
		k = NEMO__DELAY_BUCKETS - 1;
	NEMO__PCOUNT(me, dl_count);
	NEMO__PADD(me, dl_sum_ns, ns);
	NEMO__PCOUNT(me, dl_bucket[k]);
	if (ns > atomic_load_explicit(&me->dl_max_ns, memory_order_relaxed))
		atomic_store_explicit(&me->dl_max_ns, ns, memory_order_relaxed);
}


/* Run a drained message's action (the action table of am.c's
 * nemo_action_register): the fields of m that every message sets anew.
 * The caller has set the rest - deliver for each message, drain_link's
 * short loop once, since there they do not vary. */
static inline __attribute__((always_inline)) void run_action(nemo_place *me, const nemo__action *adt,
							      nemo_am_msg *m, nemo_place_id src, uint32_t meta,
							      uint64_t arg)
{
	uint32_t action = nemo__meta_action(meta), ev1 = nemo__meta_event1(meta);
	const nemo__action *a = &adt[action];
	nemo_am_handler fn = atomic_load_explicit(&a->fn, memory_order_acquire);
	m->src = src;
	m->action = action;
	m->event = ev1 ? ev1 - 1 : NEMO_AM_NO_EVENT;
	m->arg = arg;
	m->place_ctx = me->user_ctx;      /* a handler may change it */
	if (fn)   /* always set: a send checks it, and it is never cleared */
		fn(m, a->ctx);
}

/* A message of any kind: its payload, length and reply tag too, which
 * vary from one message to the next. */
static inline __attribute__((always_inline)) void deliver(nemo_place *me, const nemo__action *adt, nemo_am_msg *m,
							  nemo_place_id src, uint32_t meta, uint64_t arg,
							  const void *payload, size_t len)
{
	uint64_t tag = 0;
	bool reply = meta & NEMO__META_TAGGED;
	if (__builtin_expect(reply, 0)) {
		/* A reply: its first 8 payload bytes are the request's tag. */
		memcpy(&tag, payload, sizeof tag);
		payload = len > sizeof tag ? (const unsigned char *)payload + sizeof tag : NULL;
		len -= sizeof tag;
	}
	m->dest = me->id;
	m->payload = payload;
	m->len = len;
	m->tag = tag;
	m->is_reply = reply;
	run_action(me, adt, m, src, meta, arg);
}

void nemo__am_deliver(nemo_place *me, nemo_place_id src, uint32_t meta, uint64_t arg,
		      const void *payload, size_t len, nemo_am_context ctx)
{
	nemo_am_msg m = { .context = ctx };
	deliver(me, me->d->adt, &m, src, meta, arg, payload, len);
}

/* ROOM KICKS (THE WAIT FOR ROOM, RK4): sender s asked to hear of room in
 * its queues to us: tell it as a sender tells a receiver. */
static __attribute__((noinline, cold)) void room_kick(nemo_place *me, nemo__link *lk, unsigned s)
{
	if (!atomic_exchange_explicit(&lk->room, 0, memory_order_relaxed))
		return;
	struct nemo_domain *d = me->d;
	nemo_place *snd = &d->places[s];
	if (nemo__status_state(atomic_load_explicit(&snd->status, memory_order_acquire)) == NEMO__ST_FREE)
		return;
	NEMO__FENCE();                                                                     /* P */
	if (nemo__hint_test_set(me, nemo__hint_row(d, s) + me->idx / 64, 1ull << (me->idx % 64), false))  /* S4 */
		nemo__kick(me, snd);                                                       /* S5 */
	NEMO__PCOUNT(me, c_room_kicks);
}

/* RK2-RK4 after a drain of s's queues that consumed something. */
static inline __attribute__((always_inline)) void room_made(nemo_place *me, nemo__link *lk, unsigned s)
{
	if (__builtin_expect(nemo__asym, 1))
		atomic_signal_fence(memory_order_seq_cst);                                 /* RK2 */
	else
		NEMO__FENCE();
	if (__builtin_expect(atomic_load_explicit(&lk->room, memory_order_relaxed) != 0, 0))   /* RK3 */
		room_kick(me, lk, s);                                                      /* RK4 */
}

static void publish_ack(nemo__link *lk, nemo__in *in)
{
	if (in->acked != in->head) {
		in->acked = in->head;
		atomic_store_explicit(&lk->ack, in->head, memory_order_release);
	}
}

/* Drain the queues from sender s: at most `budget` entries unless final.
 * Sets *more if it stopped with entries left. */
static unsigned drain_link(nemo_place *me, unsigned s, nemo_am_context ctx, bool final,
			   unsigned budget, bool *more)
{
	struct nemo_domain *d = me->d;
	nemo__in *in = &me->in_row[s];
	nemo__link *lk = &me->link_row[s];
	nemo__slot *ring = me->ring_row + (size_t)s * d->R;
	uint32_t mask = d->R - 1;
	uint32_t g = nemo__rtag(me->gen);
	unsigned rb = d->Rbits;
	unsigned n = 0;

	/* Nothing there (the common case of a poll): two loads and out. */
	if (!final &&
	    atomic_load_explicit(&ring[in->head & mask].seq, memory_order_acquire) !=
		    nemo__slot_seq(in->head, rb, g) &&
	    !nemo__nf_match(atomic_load_explicit(&lk->nf[in->nf_head % NEMO_NOTIFY_FIFO_LEN],
						 memory_order_acquire), g))
		return 0;

	/* Notifications. */
	while (final || n < budget) {
		_Atomic uint64_t *e = &lk->nf[in->nf_head % NEMO_NOTIFY_FIFO_LEN];
		uint64_t v = atomic_load_explicit(e, memory_order_acquire);          /* D3 */
		if (!nemo__nf_match(v, g))
			break;
		/* Who wrote it: read before the entry is given back (WHO SENT IT). */
		uint64_t sg = atomic_load_explicit(&lk->nf_sgen, memory_order_relaxed);  /* D4 */
		if (final) {
			uint64_t exp = v;
			if (!atomic_compare_exchange_strong_explicit(e, &exp, 0, memory_order_acq_rel,
								     memory_order_acquire))
				break;    /* the sender took it back */
		} else {
			atomic_store_explicit(e, 0, memory_order_release);           /* D5 */
		}
		in->nf_head++;
		n++;
		NEMO__PCOUNT(me, c_nf_handled);
		nemo_notify_handler fn = atomic_load_explicit(&me->nf_fn, memory_order_acquire);
		void *fctx = atomic_load_explicit(&me->nf_ctx, memory_order_relaxed);
		if (fn) {
			me->hdepth++;
			fn(fctx, nemo__make_id(s, sg), nemo__nf_chan(v));
			me->hdepth--;
		}
	}

	/* Active messages.  The common ones - no payload, no reply tag, no
	 * delay stamp, an ordinary drain - take the short loop first: the
	 * same steps, fewer instructions (a stream's receiver is bound by
	 * them: docs/messaging.md, "Stream grants").  It fills the handler's
	 * record's constant fields once, and counts the handlers it runs in
	 * hdepth once for the loop (nothing between two of them looks).  The
	 * first message it does not take is left to the general loop. */
	nemo_am_msg m = { .context = ctx };
	const uint64_t *stamps = d->stamps;
	const nemo__action *adt = d->adt;
	uint32_t quarter = d->R / 4;
	uint64_t am = 0;             /* c_am_handled, added once at the end */
	if (!final && !stamps) {
		m.dest = me->id;
		me->hdepth++;
		while (n < budget) {
			uint32_t p = in->head;
			nemo__slot *hs = &ring[p & mask];
			uint32_t v = atomic_load_explicit(&hs->seq, memory_order_acquire);  /* D3 */
			if (v != nemo__slot_seq(p, rb, g))
				break;
			uint32_t meta = hs->meta;
			if (meta & (NEMO__META_TAGGED | NEMO__META_LEN_MASK))
				break;
			uint64_t sg = atomic_load_explicit(&lk->ring_sgen, memory_order_relaxed); /* D4 */
			uint64_t arg = hs->arg;
			in->head = p + 1;
			if (p + 1 - in->acked >= quarter)
				publish_ack(lk, in);                                 /* D5 */
			n++;
			am++;
			run_action(me, adt, &m, nemo__make_id(s, sg), meta, arg);
		}
		me->hdepth--;
	}
	while (final || n < budget) {
		uint32_t p = in->head;
		nemo__slot *hs = &ring[p & mask];
		uint32_t v = atomic_load_explicit(&hs->seq, memory_order_acquire);  /* D3 */
		if (v != nemo__slot_seq(p, rb, g))
			break;
		uint64_t sg = atomic_load_explicit(&lk->ring_sgen, memory_order_relaxed); /* D4 */
		if (final) {
			uint32_t exp = v;
			if (!atomic_compare_exchange_strong_explicit(&hs->seq, &exp, 0, memory_order_acq_rel,
								     memory_order_acquire))
				break;    /* the sender took it back */
		}
		uint32_t meta = hs->meta;
		uint64_t arg = hs->arg;
		uint64_t stamp = stamps ? stamps[((size_t)me->idx * d->P + s) * d->R + (p & mask)] : 0;
		uint32_t len = nemo__meta_len(meta);
		uint32_t need = nemo__slots_for(len);
		unsigned char buf[NEMO__WIRE_PAYLOAD_MAX];
		for (uint32_t k = 1; k < need; k++) {
			size_t off = (size_t)(k - 1) * 12, l = len - off < 12 ? len - off : 12;
			memcpy(buf + off, (unsigned char *)&ring[(p + k) & mask] + 4, l);
		}
		in->head = p + need;
		NEMO__INVARIANT(in->head - in->acked <= d->R, "the receiver read past what a ring can hold");
		/* Give the sender its room back before the handler runs: the
		 * handler may wait on a full queue to this very sender. */
		if (in->head - in->acked >= quarter)
			publish_ack(lk, in);
		n++;
		am++;
		if (stamp)
			nemo__delay_record(me, stamp);
		me->hdepth++;
		deliver(me, adt, &m, nemo__make_id(s, sg), meta, arg, len ? buf : NULL, len);
		me->hdepth--;
		NEMO__INVARIANT(me->hdepth >= 0, "handler depth below zero");
	}
	if (am)
		NEMO__PADD(me, c_am_handled, am);
	publish_ack(lk, in);                                                 /* RK1 */
	if (n)
		room_made(me, lk, s);                                        /* RK2-RK4 */
	if (!final && n >= budget)
		*more = true;
	return n;
}

unsigned nemo__drain(nemo_place *me, nemo_am_context ctx, bool final)
{
	struct nemo_domain *d = me->d;
	unsigned total = 0;
	bool more = false, any_left = false;
	/* Past LV1 every drain consumes by CAS (domain.c, WHY A SEND RACING A
	 * LEAVE IS DELIVERED XOR FAILED), whoever asks: the leave's own
	 * waits for room, a handler of the final drain that waits. */
	if (__builtin_expect(me->leaving, 0))
		final = true;
	if (final) {
		/* LV2: every queue, by CAS, until a pass finds nothing. */
		for (;;) {
			unsigned got = 0;
			for (unsigned s = 0; s < d->P; s++)
				got += drain_link(me, s, ctx, true, 0, &more);
			total += got;
			if (!got)
				return total;
		}
	}
	unsigned budget = d->R + NEMO_NOTIFY_FIFO_LEN;
	/* The watchdog's clock (src/poll/watchdog.c, WD3): we are looking now.
	 * Cleared before the hint words are read, so a message whose sender
	 * started the clock after this is either taken below or starts it
	 * again (its bit is still set, or set anew). */
	if (__builtin_expect(atomic_load_explicit(&me->wd_since, memory_order_relaxed) != 0, 0))
		atomic_store_explicit(&me->wd_since, 0, memory_order_seq_cst);
	/* D1: the hot queues first: a polling receiver finds a hot sender's
	 * entry there before the sender's hint bit arrives. */
	for (unsigned i = 0; i < NEMO__HOT; i++) {
		unsigned s = me->hot[i];
		if (s < d->P) {
			unsigned got = drain_link(me, s, ctx, false, budget, &more);
			nemo__grant_note(me, s, got);
			total += got;
		}
	}
	/* D2: the hint words. */
	_Atomic uint64_t *row = nemo__hint_row(d, me->idx);
	for (unsigned w = 0; w < d->HW; w++) {
		/* seq_cst, not relaxed: after WD3's store above, this load and a
		 * deferring sender's S4 then WD1 (kick.c) are the store-buffering
		 * pattern (models/watchdog.pml, -DWEAK_DRAIN); on x86-64 it is
		 * the same mov. */
		if (!atomic_load_explicit(&row[w], memory_order_seq_cst))
			continue;
		uint64_t x = atomic_exchange_explicit(&row[w], 0, memory_order_seq_cst);
		while (x) {
			unsigned b = (unsigned)__builtin_ctzll(x);
			x &= x - 1;
			unsigned s = w * 64 + b;
			bool left = false;
			unsigned got = drain_link(me, s, ctx, false, budget, &left);
			if (got)
				nemo__hot_add(me, s);
			if (left) {
				any_left = true;
				/* Stopped at the budget: keep s findable. */
				atomic_fetch_or_explicit(&row[w], 1ull << b, memory_order_relaxed);
			}
			total += got;
		}
	}
	if ((more || any_left) && atomic_load_explicit(&me->wd_ticks, memory_order_relaxed)) {
		/* Work left for later: its clock runs from now (WD3). */
		uint64_t zero = 0, now = nemo_ticks();
		atomic_compare_exchange_strong_explicit(&me->wd_since, &zero, now ? now : 1, memory_order_seq_cst,
							memory_order_relaxed);
	}
	if (more) {
		/* A hot queue hit the budget: find it again next time. */
		for (unsigned i = 0; i < NEMO__HOT; i++) {
			unsigned s = me->hot[i];
			if (s < d->P)
				atomic_fetch_or_explicit(&row[s / 64], 1ull << (s % 64), memory_order_relaxed);
		}
	}
	if ((more || any_left) && atomic_load_explicit(&me->delegated, memory_order_relaxed)) {
		/* A served place's bits set again above, by no sender: the
		 * progress thread may be asleep past its PT2, and a sender that
		 * finds its bit set skips the kick (src/poll/progress.c, WHY NO
		 * WAKE-UP IS LOST).  Its own thread's drain (a nemo call of the
		 * place) would leave them until its next nemo call, which may
		 * never come: kick the progress thread as a sender would (the
		 * fence in the kick orders the re-sets before the state read,
		 * against PT1;PT2).  Found by test_progress: a place that stopped
		 * polling right after such a drain hung with its hint bit set
		 * and the progress thread asleep. */
		nemo_waiter *pw = atomic_load_explicit(&d->prog_w, memory_order_acquire);
		if (pw)
			nemo__waiter_kick_issued(pw);
	}
	return total;
}

bool nemo__pending(nemo_place *me)
{
	struct nemo_domain *d = me->d;
	uint32_t g = nemo__rtag(me->gen);
	/* Hot queues first: a stream's next entry is found with the one line
	 * transfer that brings it, before the sender's hint RMW (a second
	 * line, which it is writing at that moment) is even looked at. */
	for (unsigned i = 0; i < NEMO__HOT; i++) {
		unsigned s = me->hot[i];
		if (s >= d->P)
			continue;
		nemo__in *in = &me->in_row[s];
		nemo__slot *hs = &me->ring_row[(size_t)s * d->R + (in->head & (d->R - 1))];
		if (atomic_load_explicit(&hs->seq, memory_order_acquire) == nemo__slot_seq(in->head, d->Rbits, g))
			return true;
		uint64_t v = atomic_load_explicit(&me->link_row[s].nf[in->nf_head % NEMO_NOTIFY_FIFO_LEN],
						  memory_order_acquire);
		if (nemo__nf_match(v, g))
			return true;
	}
	_Atomic uint64_t *row = nemo__hint_row(d, me->idx);
	for (unsigned w = 0; w < d->HW; w++)
		if (atomic_load_explicit(&row[w], memory_order_seq_cst))
			return true;
	return false;
}

/*
 * W6, for every wait of a place on its own slot (placewait.c's, and the
 * wait for room: overflow.c): leave the wait, and drain what a kick
 * during it announced, unless the place's handlers run only when it
 * polls.  A sender that read POLLING or SLEEPING set its hint bit and
 * woke the thread at most - it did not signal, write the descriptor or
 * tell the progress thread, and the bit now keeps every later sender
 * from kicking.  A place that handles its messages on its own (interrupt
 * mode, a descriptor an event loop watches, the progress thread) would
 * otherwise leave with messages that nobody is told of: a wait for room
 * that found its room returned with the request that woke it still
 * queued, and the place computed on in interrupt mode while its client
 * waited for good.  The store of RUNNING and the hint loads are seq_cst:
 * the store-buffering pattern against S4;S5 (drain.c, WHY NO WAKE-UP IS
 * LOST), so a sender that comes after reads RUNNING and kicks by the
 * mode.  A place that only polls keeps its bits for its next poll.
 * Returns the messages handled.
 */
unsigned nemo__wait_leave(nemo_place *me, nemo_waiter *w)
{
	nemo__slot_running(w);
	if ((atomic_load_explicit(&me->irq_on, memory_order_relaxed) ||
	     atomic_load_explicit(&me->delegated, memory_order_relaxed) ||
	     atomic_load_explicit(&me->efd, memory_order_relaxed) >= 0) && nemo__pending(me))
		return nemo__drain(me, NEMO_AM_CTX_WAIT, false);
	return 0;
}
