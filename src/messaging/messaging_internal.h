/*
 * messaging_internal.h - the messaging layer's structures (places, queues,
 * and the active messages they carry: am.c), private to src/messaging/:
 * the layers above (src/poll, src/mcast, src/xproc, src/mpi) see a place
 * through the functions of modes.h, and the transports through remote.h
 * (tests/check_layers.py, rule 5).
 *
 * Memory of a domain with P places (all allocated at creation):
 *
 *   places[P]          one struct nemo_place per index, reused by later
 *                      occupants of the index (so the sender-side and
 *                      receiver-side positions below carry over)
 *   hints[P][HW]       each receiver's hint bitmap, HW = ceil(P/64) words,
 *                      on cache lines of its own
 *   grants[P][HW]      each receiver's stream grants, bit s: sender s may
 *                      skip P-S5 (grant.c, THE STREAM GRANT); the same
 *                      geometry, right after the hints (grant_off words
 *                      from a hint word to the grant word of the pair)
 *   links[r*P + s]     the queues from sender s to receiver r: the
 *                      notification FIFO (two lines) and the ring's ack
 *                      word with the two sender-generation words (one
 *                      line), receiver-major as in TN-9's per-core
 *                      notification pages
 *   rings[(r*P+s)*R]   the message ring from s to r: R 16-byte slots
 *   out[s][r], in[r][s] sender-private and receiver-private positions
 *   adt[A], alt[P][E]  the active-message tables (am.c)
 *
 * The protocol over these is written out at the top of send.c (the
 * queues and the send), drain.c (receive), grant.c (stream grants),
 * overflow.c (kept sends and the wait for room) and placewait.c (wait),
 * and in domain.c beside nemo_place_leave (leave).
 */
#ifndef NEMO_MESSAGING_INTERNAL_H
#define NEMO_MESSAGING_INTERNAL_H

#include <nemo/am.h>
#include <nemo/domain.h>
#include <nemo/notify.h>

#include "../platform/asym.h"
#include "../platform/fail.h"
#include "../platform/invariant.h"
#include "../waiter/waiter_internal.h"
/* What the layers above may use of a place (the receiver modes' narrow
 * interface): the caller's place, nemo__dest, the delay and threshold
 * constants. */
#include "modes.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

/* ------------------------------------------------------------- encoding */

/* Place ids (nemo__make_id, nemo__id_gen: index and generation): modes.h. */

/* A place's status word: generation << 2 | state. */
enum { NEMO__ST_FREE = 0, NEMO__ST_ACTIVE = 1, NEMO__ST_LEAVING = 2 };
static inline uint64_t nemo__status(uint64_t gen, unsigned st)
{
	return ((gen & NEMO__GEN_MASK) << 2) | st;
}
static inline unsigned nemo__status_state(uint64_t status)
{
	return (unsigned)(status & 3u);
}
static inline uint64_t nemo__status_gen(uint64_t status)
{
	return status >> 2;
}

/* The receiver tag of queue entries: the low 30 bits of the receiving
 * occupant's generation (send.c, WHY A LATE ENTRY REACHES NO LATER
 * OCCUPANT, for the bound this leaves). */
#define NEMO__RTAG_MASK 0x3FFFFFFFu
static inline uint32_t nemo__rtag(uint64_t gen)
{
	return (uint32_t)gen & NEMO__RTAG_MASK;
}

/* Ring slot head word for position pos of a ring of 2^rbits slots, for
 * receiver tag rtag: bit 0 = 1 (valid: a payload slot's word 0, and a
 * consumed or retracted head, is 0), bit 1 the parity of the position's
 * lap (pos >> rbits), bits 2-31 rtag.  The slot of position pos holds
 * this lap's head, the previous lap's (written R positions back), or 0
 * (send.c, THE QUEUES), so one lap bit tells them apart. */
static inline uint32_t nemo__slot_seq(uint32_t pos, unsigned rbits, uint32_t rtag)
{
	return (rtag << 2) | (((pos >> rbits) & 1u) << 1) | 1u;
}

/* Notification FIFO entry (64 bits): bit 0 = 1 (never 0), bits 1-30 the
 * receiver tag, bits 32-47 the channel. */
static inline uint64_t nemo__nf_entry(uint32_t chan, uint32_t rtag)
{
	return ((uint64_t)chan << 32) | ((uint64_t)rtag << 1) | 1u;
}
static inline bool nemo__nf_match(uint64_t v, uint32_t rtag)
{
	return (uint32_t)v == ((rtag << 1) | 1u);
}
static inline uint32_t nemo__nf_chan(uint64_t v)
{
	return (uint32_t)(v >> 32) & 0xFFFFu;
}

/* Ring slots a message of len payload bytes takes: its head, and one
 * per 12 bytes of payload. */
static inline uint32_t nemo__slots_for(size_t len)
{
	return 1u + (uint32_t)((len + 11) / 12);
}

/* Message meta word: action (12 bits), event + 1 (13 bits), length (6),
 * and bit 31: the first 8 payload bytes are a reply's request tag (am.c). */
#define NEMO__META_TAGGED 0x80000000u
#define NEMO__META_LEN_MASK (0x3Fu << 25)
static inline uint32_t nemo__meta(uint32_t action, uint32_t event_plus1, uint32_t len)
{
	return action | (event_plus1 << 12) | (len << 25);
}
static inline uint32_t nemo__meta_len(uint32_t meta)
{
	return (meta >> 25) & 0x3Fu;
}
static inline uint32_t nemo__meta_action(uint32_t meta)
{
	return meta & 0xFFFu;
}
static inline uint32_t nemo__meta_event1(uint32_t meta)   /* event + 1, 0: none */
{
	return (meta >> 12) & 0x1FFFu;
}

/* NEMO__WIRE_PAYLOAD_MAX (the largest payload the ring carries): modes.h. */

/* ------------------------------------------------------------ structures */

/* One 16-byte ring slot.  A message is a head slot (seq, meta, arg)
 * followed by ceil(len/12) payload slots (word 0 zero, 12 bytes). */
typedef struct nemo__slot {
	_Atomic uint32_t seq;
	uint32_t meta;
	uint64_t arg;
} nemo__slot;

/* The queues of one sender->receiver pair (besides its ring). */
typedef struct nemo__link {
	/* The notification FIFO: two lines of 64-bit entries. */
	_Alignas(NEMO__CACHELINE) _Atomic uint64_t nf[NEMO_NOTIFY_FIFO_LEN];
	/* The receiver's line: it writes ack, and reads the sender
	 * generations once per entry; the sender writes those only before
	 * its first entry on the queue (send.c, WHO SENT IT). */
	_Alignas(NEMO__CACHELINE) _Atomic uint32_t ack;  /* ring position the receiver has consumed */
	_Atomic uint64_t ring_sgen;   /* generation of the occupant of s that wrote the ring's entries */
	_Atomic uint64_t nf_sgen;     /* the same for the FIFO's */
	/* 1 while s keeps sends for r in its overflow (overflow.c, OVERFLOW):
	 * then r's own sends to s wait until they are delivered. */
	_Atomic uint32_t held;
	/* 1 while s asks r to tell it of room in these queues: s waits for
	 * room (overflow.c, THE WAIT FOR ROOM) or keeps sends for r (overflow.c,
	 * ROOM KICKS).  r's drain that consumed something clears it and
	 * kicks s. */
	_Atomic uint32_t room;
} nemo__link;

/* Sender-private state of one link (in the sender's row; it carries
 * over to the next occupant of the sender's index). */
typedef struct nemo__out {
	uint32_t tail;                /* next ring position to write */
	uint32_t ack_seen;            /* last ack read: room = R - (tail - ack_seen) */
	uint32_t nf_tail;             /* next notification FIFO position */
	uint32_t deferred;            /* NEMO_MORE sends not yet published */
	uint64_t ring_gen, nf_gen;    /* what this index last stored to link->ring_sgen, nf_sgen */
	uint32_t ovf_ring, ovf_nf;    /* entries for this receiver in the sender's overflow
	                                 (overflow.c, OVERFLOW): later sends queue behind them */
	uint32_t mark;                /* [mark, tail): bound sends not yet in c_am_sent
	                                 (nemo__out_settle); kept only once bound is set */
	uint32_t bound;               /* a binding was ever made on this pair (bound.c) */
} nemo__out;

/* One send kept in a place's overflow (overflow.c, OVERFLOW). */
typedef struct nemo__ovf_entry {
	nemo_place_id dest;           /* the exact receiver */
	uint64_t arg;                 /* ring: the argument; notification: the channel */
	uint32_t meta;                /* ring: the meta word */
	uint8_t kind;                 /* NEMO__OVF_* */
	uint8_t len;                  /* payload bytes */
	unsigned char payload[NEMO_AM_PAYLOAD_MAX + 8];
} nemo__ovf_entry;
/* DONE: delivered, or dropped and reported; DROPPED: dropped, its report
 * (the action's undelivered callback) not yet made (overflow.c). */
enum { NEMO__OVF_DONE = 0, NEMO__OVF_RING = 1, NEMO__OVF_NF = 2, NEMO__OVF_DROPPED = 3 };

/* Receiver-private state of one link (in the receiver's row). */
typedef struct nemo__in {
	uint32_t head;                /* next ring position to read */
	uint32_t acked;               /* last position published to link->ack */
	uint32_t nf_head;             /* next notification FIFO position */
	uint16_t streak;              /* messages of the current stream (THE STREAM GRANT) */
	uint16_t idle;                /* empty hot polls since its last message */
} nemo__in;

#define NEMO__HOT 4               /* senders a polling receiver watches directly */
/* THE STREAM GRANT (grant.c): at most this many granted senders (a
 * subset of the hot ones, which keeps a hot slot free to rotate); a
 * stream is granted after grant_need messages with fewer than
 * NEMO__GRANT_IDLE empty hot polls between two of them; grant_need
 * starts at NEMO__GRANT_STREAK and doubles (to NEMO__GRANT_STREAK_MAX)
 * after each revocation that followed fewer than NEMO__GRANT_PAYBACK
 * messages. */
#define NEMO__GRANT_MAX (NEMO__HOT - 1)
#define NEMO__GRANT_IDLE 64u
#define NEMO__GRANT_STREAK 1024u
#define NEMO__GRANT_STREAK_MAX 32768u
#define NEMO__GRANT_PAYBACK 65536u

struct nemo_domain;

/* A binding (bound.c): what a curried send keeps.  Also each place's
 * curry, the binding its generic nemo_am_send makes of the last
 * (destination, action, flags) it sent to (bound.c, THE GENERIC SEND
 * CURRIES ITSELF). */
struct nemo_am_bound {
	struct nemo_place *me;
	uint64_t gen;                 /* the binding occupant's generation */
	struct nemo_place *dst;
	uint64_t st;                  /* dst's status word at bind time */
	nemo_place_id dest;
	uint32_t id;                  /* the action id it was made for (the curry's key) */
	unsigned r;
	unsigned flags;
	uint32_t meta;                /* action, event + 1, length 0 (ring); channel (FIFO) */
	bool notify;
	bool curry;                   /* a place's curry: counts each send (c_am_sent) as the generic path does */
	bool base_slow;               /* a notification's, NEMO_MORE, delay stamps, or no membarrier
	                                 (S2 would fence): the generic path, always */
	bool always_slow;             /* base_slow, or the pair's queue not yet claimed by this
	                                 occupant (WHO SENT IT, WS1): cleared once it is */
	uint64_t fast_gen;            /* gen, or 0 (no generation) while always_slow: the fast
	                                 path's one compare for both */
	nemo__out *o;
	nemo__link *lk;               /* the pair's link (ours -> dst) */
	_Atomic uint32_t *held;       /* dst keeps sends for us (overflow.c) */
	nemo__slot *ring;
	uint32_t mask, lapshift;      /* lapshift: rbits - 1 (the lap bit to bit 1 of seq) */
	uint32_t seq0;                /* the head seq of an even lap (nemo__slot_seq); odd: | 2 */
	_Atomic uint64_t *hint;       /* our hint word at dst, and our bit in it */
	uint64_t bit;
	_Atomic uint64_t *grant;      /* dst's grant word with our bit (grant.c, THE STREAM GRANT) */
};

/* One index of a domain. */
typedef struct nemo_place {
	/* Read by senders; written at join/leave and mode changes. */
	_Alignas(NEMO__CACHELINE) _Atomic uint64_t status;  /* nemo__status() */
	_Atomic uint32_t irq_on;      /* interrupt mode: senders may signal */
	_Atomic(nemo_waiter *) waiter;/* the occupant's parking slot (published state) */
	_Atomic pid_t tid;            /* the occupant's thread, for tgkill */
	_Atomic(nemo_notify_handler) nf_fn;
	void *_Atomic nf_ctx;
	/* Event-loop mode (placewait.c, THE FILE DESCRIPTOR): the place's
	 * eventfd (-1: none), and 1 while it is armed, i.e. the place counts
	 * as waiting on it and the next kick writes it. */
	_Atomic int efd;
	_Atomic uint32_t fd_armed;
	/* Served by the domain's progress thread (src/poll/progress.c):
	 * then every consumer of this place - its own thread in a nemo call,
	 * or the progress thread - holds plock. */
	_Atomic int delegated;
	/* The polling watchdog (src/poll/watchdog.c): T in ticks (0: off),
	 * read by senders that find the place running in interrupt mode. */
	_Atomic uint64_t wd_ticks;

	/* Interrupt-mode kickers between their read of irq_on and the end
	 * of their tgkill, and the signals sent (kick.c, STALE SIGNALS):
	 * RMWs of kickers, on a line of their own. */
	_Alignas(NEMO__CACHELINE) _Atomic uint32_t irq_kickers;
	_Atomic uint32_t irq_sent;
	/* The same bracket for kickers that write the eventfd, and the
	 * writes made (placewait.c, THE FILE DESCRIPTOR). */
	_Atomic uint32_t fd_kickers;
	_Atomic uint32_t fd_writes;
	/* The tick since which a message has waited for the watchdog's T
	 * (0: none): CAS 0 -> now by the sender that deferred its signal,
	 * cleared by a drain and by the watchdog when it fires. */
	_Atomic uint64_t wd_since;

	pthread_mutex_t plock;

	/* Owner-private (the occupant's thread and its signal handler). */
	_Alignas(NEMO__CACHELINE) struct nemo_domain *d;
	unsigned idx;
	uint64_t gen;
	nemo_place_id id;
	_Atomic int busy;             /* nesting depth of nemo calls: signals defer */
	_Atomic int irq_pending;      /* a signal arrived while busy */
	uint32_t irq_sent_seen;       /* irq_sent at the last nemo__irq_quiesce */
	int serve_depth;              /* handlers nested in full-queue waits */
	unsigned hot[NEMO__HOT];      /* senders recently found non-empty (P: none) */
	unsigned hot_next;
	unsigned grant_n;             /* senders granted now (grant.c, THE STREAM GRANT) */
	unsigned grant_need;          /* messages of a stream before it is granted */
	uint64_t grant_from;          /* handled count when the first grant was made */
	nemo_wait_policy policy;
	bool pinned;
	int cpu;                      /* the CPU it is pinned to, or -1 (read by src/mcast) */
	/* A CPU of its own (placewait.c, place_owns_cpu): the one CPU its
	 * thread's affinity allows, or -1 (read by the domain's other places,
	 * relaxed); whether no other place is pinned there; waits until the
	 * affinity is read again. */
	_Atomic int own_cpu;
	bool owns_cpu;
	unsigned own_reread;
	unsigned char old_mask[128];  /* affinity before pinning (cpu_set_t) */
	size_t old_mask_len;
	unsigned handled;             /* handlers run in the current poll/wait */
	const uint64_t *wf_word;      /* nemo_place_wait_for's word (read with __atomic_load_n), or NULL */
	uint64_t wf_old;              /* ... and the value it waits to see change */
	int hdepth;                   /* handlers running on this thread now (nested) */
	void *user_ctx;               /* nemo_place_set_context: passed to handlers */
	struct nemo_am_bound curry;   /* nemo_am_send's last resolution (bound.c); gen 0: empty */
	/* gen while a bound send may take its fast path as far as the place
	 * is concerned: not served by the progress thread and nothing kept in
	 * its overflow; else 0.  One compare with a binding's fast_gen
	 * (bound.c) covers the three.  Written where they change
	 * (nemo__fast_key_update). */
	uint64_t fast_key;
	struct {                      /* the last key that missed it (bound.c) */
		nemo_place_id dest;
		uint32_t id;
		unsigned flags;
	} curry_miss;
	const struct timespec *send_by; /* the deadline of the send in progress (nemo_am_send_timed,
	                                   nemo_notify_timed; NULL: none), read by nemo__wait_room */
	bool guest;                   /* joined by a send from a plain thread */
	uint32_t fd_read;             /* eventfd writes read back */
	/* Threshold checks (src/poll/poll.c, through nemo__place_poll_check
	 * of modes.h): the threshold, and the tick after which the next
	 * check polls (in nemo_ticks() units). */
	struct nemo__poll_check pc;
	/* The overflow (overflow.c, OVERFLOW): an array of ovf_cap entries
	 * (mmap'd: it may grow in a signal handler), live ones in
	 * [ovf_head, ovf_tail), ovf_n of them not yet delivered. */
	nemo__ovf_entry *ovf;
	uint32_t ovf_head, ovf_tail, ovf_cap, ovf_n;
	uint32_t ovf_undelivered;     /* DROPPED entries whose report is still to be made */
	bool ovf_reporting;           /* the reports are running (no nested run) */
	uint64_t ovf_rmask[NEMO_PLACES_MAX / 64];  /* receivers with kept entries */
	bool leaving;                 /* past LV1 (domain.c): every drain is final */
	bool in_irq;                  /* the interrupt handler runs on this place now (irq.c) */
	/* This index's rows as a receiver (set at join): the queues from
	 * sender s are in_row[s], link_row[s], ring_row + s * R. */
	nemo__in *in_row;
	nemo__link *link_row;
	nemo__slot *ring_row;
	nemo__out *out_row;           /* as a sender: out_row[r] */

	/* Counters: written by the owner only (relaxed), summed by readers. */
	_Alignas(NEMO__CACHELINE) _Atomic uint64_t c_am_sent, c_am_handled, c_nf_sent, c_nf_handled;
	_Atomic uint64_t c_kicks_futex, c_kicks_signal, c_kicks_avoided, c_kicks_skipped;
	_Atomic uint64_t c_full_waits, c_send_failures, c_interrupts, c_sleeps;
	_Atomic uint64_t c_overflowed, c_ovf_dropped, c_kicks_fd;
	_Atomic uint64_t c_poll_checks, c_poll_check_handled, c_kicks_deferred;
	_Atomic uint64_t c_grants, c_grant_revokes;
	_Atomic uint64_t c_room_kicks;

	/* Notification delays (NEMO_DOMAIN_DELAYS; src/poll/delay.c): owner
	 * writes, relaxed; bucket k counts delays in [2^k, 2^(k+1)) ns. */
	_Alignas(NEMO__CACHELINE) _Atomic uint64_t dl_count, dl_sum_ns, dl_max_ns;
	_Atomic uint64_t dl_bucket[NEMO__DELAY_BUCKETS];
} nemo_place;

/* An action of the ADT (am.c), and what its kept sends report when they
 * cannot be delivered (nemo_action_set_undelivered; overflow.c). */
typedef struct nemo__action {
	_Atomic(nemo_am_handler) fn;
	void *ctx;
	_Atomic(nemo_am_undelivered) undelivered;
	void *_Atomic undelivered_ctx;
} nemo__action;

/* Resolve id (action or NEMO_AM_EVENT) for dest into a meta word with
 * payload length len, checking the destination, range and handler (am.c):
 * 0 or the error of nemo_am_sendv. */
int nemo__am_resolve(struct nemo_domain *d, nemo_place_id dest, uint32_t id, size_t len, uint32_t *meta,
		     const char *fn);

/* nemo_am_sendv with internal flags (NEMO__SEND_KEEP_ALL: nemo__am_send_kept;
 * am.c): a local dest only, no check of the flags. */
int nemo__am_sendv_flags(nemo_place_id dest, uint32_t id, uint64_t arg, const void *payload, size_t len,
			 unsigned flags);

/* Is a binding a notification's (bound.c)? */
bool nemo__bound_is_notify(const nemo_am_bound *b);

/* Run one ring message's action (drain.c, beside the drain; the tables
 * are filled by am.c): the ring's payload format is the active
 * message's, and its dispatch is part of this layer. */
void nemo__am_deliver(nemo_place *me, nemo_place_id src, uint32_t meta, uint64_t arg,
		      const void *payload, size_t len, nemo_am_context ctx);

#define NEMO__DOMAIN_MAGIC 0x6e656d6fu   /* "nemo" */
#define NEMO__DOMAIN_DEAD 0x64656164u    /* "dead" */

struct nemo_domain {
	_Atomic uint32_t magic;
	pthread_mutex_t lock;         /* join, leave, destroy, registration */
	unsigned P, R, HW, A, E;
	unsigned Rbits;               /* R = 2^Rbits */
	unsigned ovf_max;             /* overflow entries per place (overflow.c, OVERFLOW) */
	unsigned flags;               /* NEMO_DOMAIN_* */
	/* NEMO_DOMAIN_DELAYS: the enqueue tick of each ring slot, beside the
	 * rings ([(r*P+s)*R + pos]); NULL otherwise. */
	uint64_t *stamps;
	int sig;
	unsigned nplaces;

	nemo_place *places;
	_Atomic uint64_t *hints;      /* [P][HW_LINE], then the grants [P][HW_LINE] */
	unsigned hw_stride;           /* words per receiver row (whole lines) */
	size_t grant_off;             /* P * hw_stride: from a hint word to its grant word */
	nemo__link *links;
	nemo__slot *rings;
	nemo__out *out;
	nemo__in *in;
	nemo__action *adt;
	_Atomic uint32_t *alt;        /* [P][E]: action + 1, 0 unmapped */
	/* The progress thread's waiter slot while one runs (src/poll/
	 * progress.c): kicked for delegated places that are RUNNING. */
	_Atomic(nemo_waiter *) prog_w;
	/* The watchdog's waiter slot while one runs (src/poll/watchdog.c). */
	_Atomic(nemo_waiter *) wd_w;
	void *watchdog;               /* the nemo_watchdog of this domain, or NULL */
	void *progress;               /* the nemo_progress of this domain, or NULL */
	struct nemo_domain *dead_next;/* destroyed domains (domain.c) */
	/* The word every place sleeps on, each with its slot's bit (the
	 * waiter layer's SHARED WORD): a broadcast wakes all sleepers with
	 * one FUTEX_WAKE_BITSET.  Its own line: kickers bump it. */
	_Alignas(NEMO__CACHELINE) _Atomic uint32_t bseq;
};

/* ---------------------------------------------------------- accessors */

static inline nemo__link *nemo__link_of(struct nemo_domain *d, unsigned r, unsigned s)
{
	return &d->links[(size_t)r * d->P + s];
}
static inline nemo__slot *nemo__ring_of(struct nemo_domain *d, unsigned r, unsigned s)
{
	return &d->rings[((size_t)r * d->P + s) * d->R];
}
static inline nemo__out *nemo__out_of(struct nemo_domain *d, unsigned s, unsigned r)
{
	return &d->out[(size_t)s * d->P + r];
}
static inline nemo__in *nemo__in_of(struct nemo_domain *d, unsigned r, unsigned s)
{
	return &d->in[(size_t)r * d->P + s];
}
static inline _Atomic uint64_t *nemo__hint_row(struct nemo_domain *d, unsigned r)
{
	return &d->hints[(size_t)r * d->hw_stride];
}
/* Receiver r's grant words (THE STREAM GRANT, grant.c). */
static inline _Atomic uint64_t *nemo__grant_row(struct nemo_domain *d, unsigned r)
{
	return nemo__hint_row(d, r) + d->grant_off;
}

static inline _Atomic uint32_t *nemo__alt_row(struct nemo_domain *d, unsigned p)
{
	return &d->alt[(size_t)p * d->E];
}

/* Recompute me->fast_key after gen, delegated or ovf_n changed (owner). */
static inline void nemo__fast_key_update(struct nemo_place *me)
{
	me->fast_key = (me->ovf_n || atomic_load_explicit(&me->delegated, memory_order_relaxed)) ? 0 : me->gen;
}

/* Served by the progress thread or not (src/poll/progress.c, under the
 * place's plock): the flag, and the fast paths it turns off. */
static inline void nemo__place_set_delegated(struct nemo_place *me, bool on)
{
	atomic_store_explicit(&me->delegated, on ? 1 : 0, memory_order_seq_cst);
	nemo__fast_key_update(me);
}

/* Owner-only counter update (relaxed load + store, no RMW). */
#define NEMO__PADD(p, field, n) \
	atomic_store_explicit(&(p)->field, \
		atomic_load_explicit(&(p)->field, memory_order_relaxed) + (n), memory_order_relaxed)
#define NEMO__PCOUNT(p, field) NEMO__PADD(p, field, 1)
/* The same through a pointer to the counter. */
#define NEMO__PADD1(ctr) \
	atomic_store_explicit((ctr), atomic_load_explicit((ctr), memory_order_relaxed) + 1, memory_order_relaxed)

/* Count the bound sends of [o->mark, o->tail) in c_am_sent (bound.c
 * leaves them uncounted: one store fewer per message, which a stream
 * sender pays dearly).  On a pair with o->bound set, every other writer
 * of o->tail settles first and sets mark to its new tail (pairs never
 * bound skip that store: it is as dear to them); the leave settles every
 * pair. */
#define NEMO__BOUND_SETTLE 64u        /* the bound path settles every this many */
static inline void nemo__out_settle(nemo_place *me, nemo__out *o)
{
	if (o->bound && o->tail != o->mark) {
		NEMO__PADD(me, c_am_sent, o->tail - o->mark);
		o->mark = o->tail;
	}
}

/* A generic put moves the tail to end past its own entries (counted by
 * their send): settle the bound sends before them, and keep mark there. */
static inline void nemo__out_advance(nemo_place *me, nemo__out *o, uint32_t end)
{
	nemo__out_settle(me, o);
	if (__builtin_expect(o->bound, 0))
		o->mark = end;
	o->tail = end;
}

/* A take-back rewinds the tail to to: mark never stays past it. */
static inline void nemo__out_rewind(nemo__out *o, uint32_t to)
{
	o->tail = to;
	if ((int32_t)(o->mark - to) > 0)
		o->mark = to;
}

/* S4 at our hint word w (bit: ours) of a receiver, after the fence P
 * (send.c, SEND): set the bit unless it is set already.  Returns whether
 * S5 (the kick) must follow: the bit was clear, or push. */
static inline bool nemo__hint_test_set(nemo_place *me, _Atomic uint64_t *w, uint64_t bit, bool push)
{
	if (atomic_load_explicit(w, memory_order_seq_cst) & bit) {
		if (!push)
			NEMO__PCOUNT(me, c_kicks_skipped);
		return push;
	}
	atomic_fetch_or_explicit(w, bit, memory_order_seq_cst);
	return true;
}

/* S4g (grant.c, THE STREAM GRANT), in place of P-S5: does the receiver
 * whose grant word is g grant us (bit) its stream?  Then it watches our
 * queue until it revokes, and the entry needs no fence, hint or kick.  A
 * plain load after a compiler barrier: the receiver's revocation pays
 * for the missing fence with a membarrier.  (A grant word is grant_off
 * words past the hint word of the same pair.) */
static inline __attribute__((always_inline)) bool nemo__granted(_Atomic uint64_t *g, uint64_t bit)
{
	atomic_signal_fence(memory_order_seq_cst);
	return atomic_load_explicit(g, memory_order_relaxed) & bit;
}

/* Internal, never a user's (the public calls refuse it): a handler's send
 * that does not fit is kept even past overflow_max (the multicast layer's
 * messages, which a member needs to run its function: src/mcast). */
#define NEMO__SEND_KEEP_ALL (1u << 31)

/* The send flags every send accepts (NEMO__SEND_FLAGS, nemo__check_flags):
 * modes.h. */

/* nemo__am_check_args (an active message's flags, payload and length as
 * every send checks them): modes.h. */

/* The calling thread's place (nemo__place_self) and the check of a live
 * domain (nemo__domain_check): modes.h. */

/* Enter / leave a nemo call on the caller's own place (irq.c, INTERRUPT
 * DEFERRAL, E1 and E2): while busy, the interrupt handler defers; leaving
 * the outermost call handles what it deferred.  Inline: every send and
 * poll starts and ends here; the rare parts are out of line. */

/* True while the calling thread holds the plock of the place it acts as
 * (irq.c; src/poll/progress.c sets it around its drains). */
extern __thread bool nemo__holds_plock __attribute__((tls_model("initial-exec")));
void nemo__busy_lock(nemo_place *me);           /* a served place: take its plock */
void nemo__busy_exit_slow(nemo_place *me);      /* E2 with work to do */

static inline void nemo__busy_enter(nemo_place *me)
{
	/* Served by the progress thread: exclude it for this call.  Decided
	 * before busy is read: while the progress thread drains us it holds
	 * the lock and has busy set, so busy says nothing about our nesting
	 * (the lock-holder flag does). */
	if (__builtin_expect(atomic_load_explicit(&me->delegated, memory_order_relaxed), 0) && !nemo__holds_plock)
		nemo__busy_lock(me);
	int b = atomic_load_explicit(&me->busy, memory_order_relaxed);
	atomic_store_explicit(&me->busy, b + 1, memory_order_relaxed);
	atomic_signal_fence(memory_order_seq_cst);
}

static inline void nemo__busy_exit(nemo_place *me)
{
	atomic_signal_fence(memory_order_seq_cst);
	int b = atomic_load_explicit(&me->busy, memory_order_relaxed);
	if (__builtin_expect(b > 1, 0)) {
		atomic_store_explicit(&me->busy, b - 1, memory_order_relaxed);
		return;
	}
	if (__builtin_expect(b == 1 && !nemo__holds_plock && !me->ovf_n &&
			     !atomic_load_explicit(&me->irq_pending, memory_order_relaxed), 1)) {
		atomic_store_explicit(&me->busy, 0, memory_order_relaxed);
		atomic_signal_fence(memory_order_seq_cst);
		if (__builtin_expect(!atomic_load_explicit(&me->irq_pending, memory_order_relaxed), 1))
			return;
		atomic_store_explicit(&me->busy, 1, memory_order_relaxed);  /* a signal came: E2's loop */
		atomic_signal_fence(memory_order_seq_cst);
	}
	nemo__busy_exit_slow(me);
}

/* Is the calling thread inside a nemo call or a handler of place me (for
 * the calls that may not nest: leave, set_progress)?  busy alone cannot
 * say for a place the progress thread serves: its drains set busy too
 * (the handlers' nemo calls must see it), while the place's own thread
 * may be outside any call.  But while delegated, every nemo call of the
 * place's own thread and every drain hold the place's plock, and only
 * the place's own thread writes delegated.  (Found by nemo-bench app:
 * served places failed to leave with EBUSY while being drained.) */
static inline bool nemo__in_call(nemo_place *me)
{
	if (atomic_load_explicit(&me->delegated, memory_order_relaxed))
		return nemo__holds_plock;
	return atomic_load_explicit(&me->busy, memory_order_relaxed) != 0;
}
void nemo__busy_exit(nemo_place *me);

/* nemo__dest (S0: the destination place of an id): modes.h. */



/* The raw puts (send.c): S0-S5 for one entry, or a batch; they never
 * wait: EAGAIN when the queue is full or still holds a previous
 * occupant's entries (a batch: with *sent the prefix that fit).  The
 * overflow's rules and the waits are nemo__msg_send / nemo__msg_send_batch
 * / nemo__notify_send's (overflow.c). */
int nemo__ring_put(nemo_place *me, nemo_place *dst, uint64_t st, nemo_place_id dest, uint32_t meta,
		   uint64_t arg, const void *payload, size_t len, unsigned flags);
int nemo__batch_put(nemo_place *me, nemo_place *dst, uint64_t st, nemo_place_id dest, uint32_t meta,
		    const uint64_t *args, size_t n, unsigned flags, size_t *sent);
int nemo__notify_put(nemo_place *me, nemo_place_id dest, uint32_t chan, unsigned flags);

/*
 * Enqueue one ring message from me to dest (busy held by the caller).
 * dst and st: from nemo__dest(dest) (S0).  meta from nemo__meta();
 * payload of len <= NEMO_AM_PAYLOAD_MAX.  Returns 0, ESRCH, EAGAIN,
 * EDEADLK.
 */
int nemo__msg_send_slow(nemo_place *me, nemo_place *dst, uint64_t st, nemo_place_id dest, uint32_t meta,
			uint64_t arg, const void *payload, size_t len, unsigned flags);
/* The overflow's rules (overflow.c) in one inline test: nothing kept for
 * dest, not in a handler, dest keeps nothing for us -> the raw put. */
static inline int nemo__msg_send(nemo_place *me, nemo_place *dst, uint64_t st, nemo_place_id dest, uint32_t meta,
				 uint64_t arg, const void *payload, size_t len, unsigned flags)
{
	unsigned r = nemo_place_index(dest);
	if (__builtin_expect(!me->out_row[r].ovf_ring && !me->hdepth &&
			     !atomic_load_explicit(&me->link_row[r].held, memory_order_relaxed), 1)) {
		int err = nemo__ring_put(me, dst, st, dest, meta, arg, payload, len, flags);
		if (__builtin_expect(err != EAGAIN, 1) || (flags & NEMO_NONBLOCK))
			return err;
	}
	return nemo__msg_send_slow(me, dst, st, dest, meta, arg, payload, len, flags);
}
/* nemo_notify's send, with the overflow's rules (overflow.c). */
int nemo__notify_send(nemo_place *me, nemo_place_id dest, uint32_t chan, unsigned flags);

/* S3 found the receiver leaving: take the ring entry (head hs, seq,
 * ending before position end) back unless it was delivered; true when
 * taken back (send.c). */
bool nemo__ring_take_back(nemo__link *lk, nemo__slot *hs, uint32_t seq, uint32_t end);

/* The raw puts' EAGAIN (a full queue, or one still holding a previous
 * occupant's entries) turned into a wait (overflow.c, THE WAIT FOR ROOM),
 * unless NEMO_NONBLOCK: what a send from outside a handler does. */
int nemo__ring_put_wait(nemo_place *me, nemo_place *dst, uint64_t st, nemo_place_id dest, uint32_t meta,
			uint64_t arg, const void *payload, size_t len, unsigned flags);

/* RW1 of THE WAIT FOR ROOM for the overflow (overflow.c): ask every
 * receiver we keep sends for to tell us of room (link.room); true when a
 * flag was newly set (then the asymmetric barrier must follow before we
 * look at their queues again). */
bool nemo__ovf_ask(nemo_place *me);

/* Before the place stops calling nemo with kept sends (a sleep, the end
 * of an interrupt, of a progress pass, of its outermost call): make sure
 * room for them will kick it (overflow.c, ROOM KICKS): RW1, RW2, and the
 * overflow delivered once more. */
void nemo__ovf_arm(nemo_place *me);

/* Enqueue n one-slot messages (same meta, args[i]) from me to dest, as
 * nemo__msg_send does one: returns 0 or the error that stopped it, with
 * *sent the number queued (a prefix). */
int nemo__msg_send_batch(nemo_place *me, nemo_place *dst, uint64_t st, nemo_place_id dest, uint32_t meta,
			 const uint64_t *args, size_t n, unsigned flags, size_t *sent);

/* Publish deferred sends to one destination index (hint + kick). */
void nemo__publish(nemo_place *me, unsigned dst_idx, bool push);

/* The one kick decision (kick.c): make dst notice its queues now. */
void nemo__kick(nemo_place *me, nemo_place *dst);

/* S3 found the receiver leaving, for a ring entry: take it back unless it
 * was delivered, and rewind the sender's tail if it was taken (send.c). */
struct nemo__ring_back {
	nemo__out *o;
	nemo__link *lk;
	nemo__slot *hs;
	uint32_t seq, p, end;
};
bool nemo__ring_back(void *arg);

/*
 * S2-S3: after writing entries to dst (S1), is dst still the occupant the
 * send resolved (status == st)?  The fence S2 only where the asymmetric
 * barrier is not registered (src/platform/asym.c).  false: it is leaving; the caller
 * settles its entries (take them back, or find them taken).  The one
 * place both single and batched sends make this check.
 */
static inline __attribute__((always_inline)) bool nemo__dest_still(nemo_place *dst, uint64_t st)
{
	if (!nemo__asym)
		NEMO__FENCE();                                               /* S2 */
	return atomic_load_explicit(&dst->status, memory_order_seq_cst) == st; /* S3 */
}

/*
 * S2-S5, the commit every single send ends with, after its entry is
 * written (S1): send.c's puts and the bound send (bound.c).  If S3 finds
 * the receiver leaving, take_back(arg) decides (true: the entry was taken
 * back, rewinding the sender's position -> ESRCH; false: the receiver
 * took it -> 0, no kick needed).  *sent counts the entry (c_am_sent or
 * c_nf_sent of me).  o: our side of the pair; hint and bit: our hint
 * word and bit at dst (S4).
 */
static inline __attribute__((always_inline)) int
nemo__send_commit(nemo_place *me, nemo_place *dst, uint64_t st, nemo_place_id dest, unsigned flags,
		  _Atomic uint64_t *sent, bool (*take_back)(void *), void *arg, const char *fn,
		  nemo__out *o, _Atomic uint64_t *hint, uint64_t bit)
{
	if (!nemo__dest_still(dst, st)) {                                   /* S2, S3 */
		if (take_back(arg)) {
			NEMO__PCOUNT(me, c_send_failures);
			return nemo__fail(ESRCH, fn, "place %#llx left during the send: not delivered",
					  (unsigned long long)dest);
		}
		NEMO__PADD1(sent);     /* read before, or taken by, the leave */
		return 0;
	}
	NEMO__PADD1(sent);
	if (flags & NEMO_MORE) {
		o->deferred = 1;
		return 0;
	}
	o->deferred = 0;
	if (nemo__granted(hint + me->d->grant_off, bit))                    /* S4g */
		return 0;
	NEMO__FENCE();                                                       /* P */
	if (nemo__hint_test_set(me, hint, bit, flags & NEMO_PUSH))          /* S4 */
		nemo__kick(me, dst);                                         /* S5 */
	return 0;
}

/* nemo__irq_signal (IK1-IK3 for a thread that is not a place): modes.h. */

/* Interrupts of me were just turned off (irq_on := 0, seq_cst): wait
 * until no kicker that saw them on is still sending its signal, and take
 * the signal off the thread if one may be pending (kick.c, STALE
 * SIGNALS).  On the place's own thread. */
void nemo__irq_quiesce(nemo_place *me);

/* The same for many destinations, with one futex call for all the
 * sleepers among them (kick.c). */
void nemo__kick_many(nemo_place *me, nemo_place *const *dsts, size_t n);

/* Publish to many destination indexes (S4 for each, then one
 * nemo__kick_many for those that need a kick). */
void nemo__publish_many(nemo_place *me, const unsigned *rs, size_t n, bool push);

/* The overflow (overflow.c, OVERFLOW): try to deliver what is kept,
 * without waiting (busy held; overflow.c); returns
 * how many entries are left.  And release its memory (overflow.c; leave,
 * after the last flush). */
uint32_t nemo__ovf_flush(nemo_place *me);
void nemo__ovf_free(nemo_place *me);

/* Deliver every kept entry, waiting for room as a blocking send does
 * (leave: busy held, not in a handler).  Entries whose receiver left are
 * dropped and counted. */
void nemo__ovf_flush_all(nemo_place *me);

/* Event-loop mode (placewait.c, THE FILE DESCRIPTOR): disarm on entry to a
 * poll or wait, arm on the way out of nemo_poll (drain: take the grants
 * back first and drain what they held with context ctx; returns the
 * messages that drain handled). */
void nemo__fd_disarm(nemo_place *me);
unsigned nemo__fd_arm(nemo_place *me, bool drain, nemo_am_context ctx);
/* Leave: disarm, wait out the kickers that may write it, close it. */
void nemo__fd_close(nemo_place *me);

/* Handle what is queued to me (busy held).  final: the leave's last
 * drain (every link, consuming by CAS).  Returns the number handled. */
unsigned nemo__drain(nemo_place *me, nemo_am_context ctx, bool final);

/* THE STREAM GRANT (grant.c): before the place stops watching its
 * granted queues - before it sleeps, arms its eventfd, turns interrupts
 * on or is served by the progress thread - take every grant back (one
 * membarrier) and set their hint bits, so that it looks at them again
 * first.  Its own thread only. */
void nemo__grant_revoke_all(nemo_place *me);
static inline void nemo__grant_revoke(nemo_place *me)
{
	if (__builtin_expect(me->grant_n != 0, 0))
		nemo__grant_revoke_all(me);
}

/* Is anything queued to me?  (hint words, hot links) */
bool nemo__pending(nemo_place *me);
/* W6 of placewait.c (drain.c): leave a wait of me on its slot w (state RUNNING),
 * and drain what a kick during it announced if me handles messages on its
 * own (interrupt mode, a descriptor, the progress thread); the count. */
unsigned nemo__wait_leave(nemo_place *me, nemo_waiter *w);

/* A plain thread that sends to d (nemo_domain_am_send, nemo_domain_notify)
 * joins it as a guest place, once (domain.c): 0; EXDEV if the thread is a
 * place of another domain; the errors of nemo_place_join. */
int nemo__place_adopt(struct nemo_domain *d, const char *fn);

/* nemo__poll_due, the calling thread's next threshold-check tick: modes.h. */

/* Record one notification delay of me (drain.c; owner only). */
void nemo__delay_record(nemo_place *me, uint64_t enq_ticks);

/* Signal handler install (irq.c). */
int nemo__irq_install(int sig);

/* Test-only (domain.c): give the free index idx of d the generation gen,
 * so that its next occupant gets gen + 1, as if 2^30 or 2^48 joins had
 * happened.  Returns 0, EINVAL (idx out of range), EBUSY (occupied),
 * EIDRM.  tests/test_messaging.c declares it too. */
int nemo__test_set_gen(nemo_domain *d, unsigned idx, uint64_t gen);

#endif
