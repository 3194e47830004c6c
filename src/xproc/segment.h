/*
 * segment.h - the shared segment's records and the private handle, for
 * the files of src/xproc/ (internal: not installed).
 *
 * xproc.c's essay (THE SEGMENT) describes the tables; each protocol is
 * owned by one file, which opens with its essay:
 *
 *   publish.c  the segment file: built under no name, published whole
 *   procs.c    the process table: claim, liveness (platform/proc.h),
 *              reclaim of a dead process (XD1-XD4), kicks
 *   names.c    the name table: one code per name, whatever the timing
 *   ring.c     the rings: a slot, the put, the drain and its validation;
 *              whom a place talks to, and the deaths among them
 *   kept.c     kept sends: a handler's send that finds its ring full,
 *              delivered later in order; the room requests
 *   fd.c       the event-loop descriptor and its bridge thread
 *   sleep.c    the sleep (XW1-XW5) and every wait: for messages, for a
 *              word, for room, for kept sends; poll and wait
 *   send.c     whether a send waits, is kept or fails; the sends
 *   public.c   the process's registry of handles, public ids, the
 *              calling thread's places, the ordinary calls (remote.h)
 *   xproc.c    the segment, create / attach / detach, join / leave,
 *              handlers, counters
 *
 * The files form a DAG, each using only those listed above it (names.c
 * uses procs.c and publish.c; procs.c and publish.c use none).
 */
#ifndef NEMO_XPROC_SEGMENT_H
#define NEMO_XPROC_SEGMENT_H

#include <nemo/xproc.h>
#include <nemo/am.h>

#include "../platform/proc.h"
#include "../waiter/waiter_internal.h"   /* NEMO__CACHELINE */

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#define XP_MAGIC 0x6e656d6f78707231ull   /* "nemoxpr1" */
#define XP_VERSION 3u                     /* 3: two-line slots (48-byte payloads, replies too), a
                                             place's dead_gen, integer action ids */
#define LINE NEMO__CACHELINE
#define NAME_WORDS 6u

enum { P_FREE = 0, P_CLAIM = 1, P_LIVE = 2, P_DEAD = 3 };
enum { K_AM = 1, K_NOTIFY = 2, K_REPLY = 3 };   /* a reply's payload starts with its 8-byte tag */
#define TAG_LEN 8u
#define SLOT_PAYLOAD (NEMO_XPROC_PAYLOAD_MAX + TAG_LEN)   /* a reply's tag and payload */

/* A place's futex word (line A, wstate): the waiter layer's RUNNING,
 * POLLING, SLEEPING, and FD_ARMED - the place waits on its event-loop
 * descriptor, its bridge thread sleeping on the word (fd.c).  A kick
 * treats FD_ARMED as SLEEPING. */
#define XP_FD_ARMED 3u

/*
 * A process's identity in the segment (procs.c, THE WORD): pid in bits
 * 0-22 (the kernel's pids are below 2^22), bit 23 RECLAIM (a process
 * word only), the start time (clock ticks since boot, platform/proc.h)
 * in bits 24-63.  40 bits of ticks last 348 years at 100 per second.
 * 0 is no identity (a free slot).  A name slot's claim (names.c) is the
 * claimer's identity, never 0 nor NAME_READY.
 */
#define ID_PID_MASK 0x7FFFFFull
#define ID_RECLAIM (1ull << 23)
#define ID_START_SHIFT 24u
static inline uint64_t xp_ident(pid_t pid, uint64_t start)
{
	return start << ID_START_SHIFT | ((uint64_t)pid & ID_PID_MASK);
}
static inline pid_t ident_pid(uint64_t w) { return (pid_t)(w & ID_PID_MASK); }
static inline uint64_t ident_start(uint64_t w) { return w >> ID_START_SHIFT; }

struct seg_hdr {
	uint64_t magic;
	uint64_t size;
	uint32_t version, procs, places, slots, names, uid, gid, pad;
	_Alignas(LINE) _Atomic uint32_t deaths;
};

struct seg_proc {
	_Alignas(LINE) _Atomic uint64_t word;   /* 0 free; identity; identity | ID_RECLAIM */
};

struct seg_place {
	/* Line A, the receiver's: its futex word, and the senders that wait
	 * for room in their ring to it (bit s: place s; xproc.c, THE WAIT
	 * FOR ROOM). */
	_Alignas(LINE) _Atomic uint32_t wstate;
	_Atomic uint64_t room;
	/* Line B: gen:16 | owner:8 | state:8, the name, and the generation
	 * of the place's last death (stored by the reclaim's XD1: ring.c,
	 * PEER DEATH). */
	_Alignas(LINE) _Atomic uint32_t word;
	_Atomic uint32_t name[NAME_WORDS];
	_Atomic uint32_t dead_gen;
};

struct seg_name {
	_Alignas(LINE) _Atomic uint64_t state;  /* 0 free; a claimer's identity; NAME_READY */
	_Atomic uint32_t name[NAME_WORDS];
};
#define NAME_READY UINT64_MAX

struct seg_slot {
	_Alignas(LINE) _Atomic uint32_t seq;
	_Atomic uint32_t src, dst, code;
	_Atomic uint64_t arg;
	_Atomic uint32_t kindlen;
	_Atomic uint32_t payload[SLOT_PAYLOAD / 4];
};

_Static_assert(sizeof(struct seg_slot) == 2 * LINE, "a slot is two cache lines");
_Static_assert(SLOT_PAYLOAD % 4 == 0, "the payload is stored in words");
_Static_assert(sizeof(struct seg_place) == 2 * LINE, "a place is two lines");
_Static_assert(XP_FD_ARMED != NEMO_WAITER_RUNNING && XP_FD_ARMED != NEMO_WAITER_POLLING &&
	       XP_FD_ARMED != NEMO_WAITER_SLEEPING, "FD_ARMED is a state of its own");
_Static_assert(sizeof(struct seg_proc) == LINE, "a process record is one line");
_Static_assert(NEMO_XPROC_PLACES_MAX <= 64, "the room mask has a bit per place");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && sizeof(long long) == sizeof(uint64_t),
	       "a word shared between processes must be lock-free (no lock lives in the segment)");

static inline uint32_t pw_gen(uint32_t w) { return w >> 16; }
static inline uint32_t pw_owner(uint32_t w) { return (w >> 8) & 0xFFu; }
static inline uint32_t pw_state(uint32_t w) { return w & 0xFFu; }
static inline uint32_t pw_make(uint32_t gen, uint32_t owner, uint32_t st)
{
	return (gen & 0xFFFFu) << 16 | (owner & 0xFFu) << 8 | (st & 0xFFu);
}

/* Names (places, actions): [A-Za-z0-9._-], 1..max bytes, packed in 6
 * words. */
static inline bool name_ok(const char *s, size_t max)
{
	if (!s)
		return false;
	size_t n = 0;
	for (; s[n]; n++) {
		char c = s[n];
		if (n >= max || !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
				  c == '.' || c == '_' || c == '-'))
			return false;
	}
	return n > 0;
}

static inline void name_pack(const char *s, uint32_t out[NAME_WORDS])
{
	unsigned char b[NAME_WORDS * 4] = {0};
	memcpy(b, s, strlen(s));
	memcpy(out, b, sizeof b);
}

static inline void name_store(_Atomic uint32_t *dst, const char *s)
{
	uint32_t w[NAME_WORDS];
	name_pack(s, w);
	for (unsigned i = 0; i < NAME_WORDS; i++)
		atomic_store_explicit(&dst[i], w[i], memory_order_relaxed);
}

static inline bool name_eq(_Atomic uint32_t *src, const uint32_t w[NAME_WORDS])
{
	for (unsigned i = 0; i < NAME_WORDS; i++)
		if (atomic_load_explicit(&src[i], memory_order_relaxed) != w[i])
			return false;
	return true;
}

/* An action's handler in this process (xproc.c). */
struct handler {
	nemo_xproc_handler fn;
	nemo_am_handler afn;              /* of nemo/am.h's type */
	void *ctx;
	struct handler *retired_next;
};

/* A kept send (kept.c): a handler's send that found its ring full. */
struct xp_kept {
	nemo_xproc_id dst;
	uint8_t kind, done;
	uint16_t len;
	uint32_t code;
	uint64_t arg;
	unsigned char payload[SLOT_PAYLOAD];
};

#define XP_DEAD_KEEP 32u                  /* the latest deaths a place lists (ring.c) */

struct nemo_xproc_place {
	nemo_xproc *x;
	uint32_t idx, gen, id;
	bool joined;
	unsigned depth;                   /* handlers running (sends inside never wait) */
	unsigned busy;                    /* polls and waits running (fd.c: the outermost arms) */
	uint32_t deaths_seen;             /* the segment's deaths word when we last looked */
	nemo_wait_policy policy;
	nemo_xproc_notify_handler nfn;
	void *nctx;
	nemo_notify_handler pnfn;         /* nemo_notify_set_handler's (nemo/notify.h's type) */
	void *pnctx;
	uint32_t serial;                  /* unique in the process: the thread's entry names it */
	bool in_wait;                     /* handlers run from a wait (NEMO_AM_CTX_WAIT) */
	unsigned handled, rejected;       /* of the current drain round */
	const uint64_t *wf_word;          /* nemo_xproc_wait_for's word, and its old value */
	uint64_t wf_old;
	/* Per other place index: the generation we knew and our position. */
	uint32_t *dgen, *prod;            /* as a sender, to each index */
	uint32_t *sgen, *cons;            /* as a receiver, from each index */
	uint32_t *talk;                   /* the generation we talk to there (0: none; ring.c) */
	uint32_t *deadg;                  /* the generation whose death we recorded there */
	uint32_t *kept_n;                 /* kept sends to each index (kept.c) */
	/* Kept sends (kept.c): [kept_head, kept_tail) of kept_cap, kept_all not done. */
	struct xp_kept *kept;
	uint32_t kept_head, kept_tail, kept_cap, kept_all;
	uint64_t kept_mask;               /* indices with kept sends */
	uint64_t room_mine;               /* indices whose room mask holds our bit */
	int room_for;                     /* the index a send of ours waits for room to (-1: none) */
	/* Deaths of places we talk to (ring.c, PEER DEATH). */
	uint64_t dead_found, dead_told;
	struct { nemo_place_id id; uint64_t seq; } dead[XP_DEAD_KEEP];
	/* The event-loop descriptor (fd.c). */
	int efd;
	bool bridge_on;
	pthread_t bridge;
	_Atomic uint32_t fd_armed, fd_exit, fd_writes;
	uint32_t fd_read;
};

struct nemo_xproc {
	/* Private geometry: read once at attach, validated, never re-read. */
	uint32_t nprocs, nplaces, nslots, nnames;
	size_t size, off_procs, off_places, off_names, off_rings;
	unsigned char *base;
	int fd;
	uint32_t me;                      /* our process slot */
	uint32_t pid;
	uint64_t ident;                   /* our process word (xp_ident) */
	uint32_t ovf_max;                 /* kept sends per place */
	_Atomic(struct handler *) *handlers;  /* [NEMO_XPROC_ACTIONS_MAX + nnames] (xp_action) */
	_Atomic(struct handler *) retired;    /* records replaced since attach (freed at detach) */
	nemo_xproc_place **places;        /* [nplaces]: ours, or NULL */
	nemo__proc_ref *peers;            /* [nprocs]: a reference per peer slot (procs.c) */
	pthread_mutex_t peers_lock;       /* the references: any thread may check a peer */
	_Atomic uint64_t sent, received, kicks, unhandled, rejected, reclaimed, dropped;
	_Atomic uint64_t overflowed, overflow_dropped, send_failures, deaths;
	uint32_t hidx, hgen;              /* our entry in the process's registry (public ids) */
	uint32_t forkgen;                 /* fork_gen at attach: a child of fork holds a copy (inherited) */
	_Atomic uint64_t next_check;      /* ticks: when a poll, send or nemo_dead_places next asks
					   * every peer's process (procs.c, WHO ASKS) */
};

/* Where action `code`'s handler is kept (UINT32_MAX: no action has this
 * code): integer ids first, then the name table's codes. */
static inline uint32_t xp_action(const nemo_xproc *x, uint32_t code)
{
	if (code < NEMO_XPROC_ACTIONS_MAX)
		return code;
	if (code >= NEMO_XPROC_NAMED_BASE && code - NEMO_XPROC_NAMED_BASE < x->nnames)
		return NEMO_XPROC_ACTIONS_MAX + (code - NEMO_XPROC_NAMED_BASE);
	return UINT32_MAX;
}

/* Place ids (nemo_xproc_id): index in bits 0-7, generation in 8-23. */
static inline uint32_t id_make(uint32_t idx, uint32_t gen) { return (gen & 0xFFFFu) << 8 | (idx & 0xFFu); }
static inline uint32_t id_idx(uint32_t id) { return id & 0xFFu; }
static inline uint32_t id_gen(uint32_t id) { return (id >> 8) & 0xFFFFu; }
/* An id as id_make writes it: bits 24-31 clear and a generation (ids with
 * other bits would pass the index and generation checks and then be
 * rejected by the receiver, whose slot check compares the whole id). */
static inline bool id_ok(uint32_t id) { return (id >> 24) == 0 && id_gen(id) != 0; }

/* A public id (public.c): XID_TAG (bits 61-63: remote, transport 1;
 * remote.h; bits 56-60 zero), the handle's registry generation (40-55)
 * and index (32-39), the place's id in the segment (0-31). */
#define XID_TAG (5ull << 61)
static inline nemo_place_id xp_public_id(const nemo_xproc *x, nemo_xproc_id id)
{
	return XID_TAG | (uint64_t)(x->hgen & 0xFFFFu) << 40 | (uint64_t)x->hidx << 32 | id;
}

/* Addresses, from the private geometry only. */
static inline struct seg_hdr *hdr(nemo_xproc *x) { return (struct seg_hdr *)x->base; }
static inline struct seg_proc *proc_at(nemo_xproc *x, uint32_t k)
{
	return (struct seg_proc *)(x->base + x->off_procs) + k;
}
static inline struct seg_place *place_at(nemo_xproc *x, uint32_t i)
{
	return (struct seg_place *)(x->base + x->off_places) + i;
}
static inline struct seg_name *name_at(nemo_xproc *x, uint32_t i)
{
	return (struct seg_name *)(x->base + x->off_names) + i;
}
static inline struct seg_slot *ring_at(nemo_xproc *x, uint32_t s, uint32_t r)
{
	return (struct seg_slot *)(x->base + x->off_rings) + ((size_t)s * x->nplaces + r) * x->nslots;
}

/* A deadline (validated by the caller) in CLOCK_MONOTONIC ns, as the
 * in-process waits count it (src/waiter/wait.c, ticks_until): 0 for one
 * in the past, tv_sec < 0 included (it times out at once); UINT64_MAX
 * for none, or for one too far to count in 64 bits of ns (about 584
 * years: "never", saturated, no overflow). */
static inline uint64_t xp_deadline_ns(const struct timespec *t)
{
	if (!t)
		return UINT64_MAX;
	if (t->tv_sec < 0)
		return 0;
	if ((uint64_t)t->tv_sec >= UINT64_MAX / 1000000000u - 1)
		return UINT64_MAX;
	return (uint64_t)t->tv_sec * 1000000000u + (uint64_t)t->tv_nsec;
}

uint64_t nemo__xp_now_ns(void);

static inline void xp_ns_to_ts(uint64_t ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / 1000000000u);
	ts->tv_nsec = (long)(ns % 1000000000u);
}

/* OUR OWN PLACE (xproc.c): is p's word still the one its join published? */
static inline bool own_ok(nemo_xproc_place *p, memory_order mo)
{
	return atomic_load_explicit(&place_at(p->x, p->idx)->word, mo) == pw_make(p->gen, p->x->me, P_LIVE);
}

/* procs.c */
extern _Atomic uint32_t nemo__xp_fork_gen;   /* children of fork this process is (public.c) */
/* A handle this process got by fork, not by attach: its process slot and
 * places are the parent's, so nothing may act on them through it. */
static inline bool nemo__xp_inherited(const nemo_xproc *x)
{
	return x->forkgen != atomic_load_explicit(&nemo__xp_fork_gen, memory_order_relaxed);
}
int nemo__xp_claim_proc(nemo_xproc *x);
void nemo__xp_release_proc(nemo_xproc *x);
bool nemo__xp_check_proc(nemo_xproc *x, uint32_t k);
/* WHO ASKS (procs.c): every XP_CHECK_NS, the first poll, send or
 * nemo_dead_places of the handle asks every peer's process. */
#define XP_CHECK_NS 100000000ull
void nemo__xp_check_slow(nemo_xproc *x);
static inline void nemo__xp_check_due(nemo_xproc *x)
{
	if (__builtin_expect(nemo_ticks() >= atomic_load_explicit(&x->next_check, memory_order_relaxed), 0))
		nemo__xp_check_slow(x);
}
void nemo__xp_kick_place(nemo_xproc *x, uint32_t i);

/* ring.c */
extern _Thread_local nemo_xproc_place *nemo__xp_handling;   /* the place whose handler runs here */
int nemo__xp_own_lost(nemo_xproc_place *p, const char *fn);
bool nemo__xp_pending(nemo_xproc_place *p, memory_order mo);
void nemo__xp_drain(nemo_xproc_place *p);
int nemo__xp_put(nemo_xproc_place *p, nemo_xproc_id dst, uint32_t kind, uint32_t code, uint64_t arg,
		 const void *payload, size_t len, bool kick);
int nemo__xp_dest_state(nemo_xproc *x, nemo_xproc_id dst, uint32_t *owner);
bool nemo__xp_slot_free(nemo_xproc_place *p, uint32_t d, memory_order mo);
bool nemo__xp_death_news(nemo_xproc_place *p, memory_order mo);
void nemo__xp_death_scan(nemo_xproc_place *p);
bool nemo__xp_record_death(nemo_xproc_place *p, uint32_t i, uint32_t gen, bool told);
int nemo__xp_take_report(nemo_xproc_place *p);
size_t nemo__xp_dead_list(const nemo_xproc_place *p, nemo_place_id *ids, uint64_t *seqs, size_t cap);
void nemo__xp_ring_reset(nemo_xproc *x, uint32_t s, uint32_t r);
uint32_t nemo__xp_sent_unread(nemo_xproc *x, uint32_t i);

/* kept.c */
int nemo__xp_keep(nemo_xproc_place *p, nemo_xproc_id dst, uint32_t kind, uint32_t code, uint64_t arg,
		  const void *payload, size_t len);
uint32_t nemo__xp_flush(nemo_xproc_place *p);
void nemo__xp_kept_drop_all(nemo_xproc_place *p);
void nemo__xp_room_ask(nemo_xproc_place *p);
void nemo__xp_room_update(nemo_xproc_place *p, uint32_t d);
bool nemo__xp_kept_ready(nemo_xproc_place *p, memory_order mo);
bool nemo__xp_wakeable(nemo_xproc_place *p, memory_order mo);

/* fd.c */
int nemo__xp_fd(nemo_xproc_place *p, int *fd);
void nemo__xp_enter(nemo_xproc_place *p);
void nemo__xp_exit(nemo_xproc_place *p);
void nemo__xp_fd_close(nemo_xproc_place *p);

/* sleep.c */
int nemo__xp_wait(nemo_xproc_place *p, const struct timespec *abstime, unsigned *handled,
		  const uint64_t *word, uint64_t old, const char *fn);
enum { XW_ROOM, XW_HELD, XW_KEPT };
int nemo__xp_send_wait(nemo_xproc_place *p, int kind, nemo_xproc_id dst, uint64_t end);
int nemo__xp_kept_wait_all(nemo_xproc_place *p);

/* send.c */
int nemo__xp_send(nemo_xproc_place *p, nemo_xproc_id dst, uint32_t kind, uint32_t code, uint64_t arg,
		  const void *payload, size_t len, unsigned flags, bool kick, uint64_t end);
int nemo__xp_check_code(const nemo_xproc *x, uint32_t code, const void *payload, size_t len, const char *fn);
int nemo__xp_check_chan(uint32_t chan, const char *fn);
int nemo__xp_broadcast(nemo_xproc_place *p, const nemo_xproc_id *dsts, size_t n, uint32_t code,
		       uint64_t arg, const void *payload, size_t len, unsigned flags, size_t *sent);

/* public.c */
int nemo__xp_publish_handle(nemo_xproc *x, nemo_xproc **out);
void nemo__xp_registry_drop(nemo_xproc *x);
void nemo__xp_tls_adopt(nemo_xproc_place *p);
void nemo__xp_tls_forget(const nemo_xproc_place *p);

#define NEMO__XP_INHERITED()                                                                         \
	NEMO__FAIL(ENOTCONN, "the handle was inherited across fork: its places are the parent's "     \
		   "(nemo_xproc_attach again in the child)")

/* publish.c */
int nemo__xp_file_new(unsigned mode, size_t size, int *fd);
int nemo__xp_file_publish(int fd, const char *name);
bool nemo__xp_name_taken(const char *name);

/* The test hook (publish.c): when set, called at the named points - "create"
 * (the segment built, not yet named) and "name" (a name slot claimed, its
 * name not yet written) - so that a test can stop or kill a process
 * there.  NULL in every program but the tests (tests/test_xproc_life.c). */
extern void (*nemo__xproc_test_hook)(const char *where);

#endif
