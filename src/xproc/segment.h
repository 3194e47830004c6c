/*
 * segment.h - the shared segment's records and the private handle, for
 * the files of src/xproc/ (internal: not installed).
 *
 * xproc.c's essay (THE SEGMENT) describes the tables; each protocol is
 * owned by one file, which opens with its essay:
 *
 *   publish.c  the segment file: built under no name, published whole
 *   procs.c    the process table: claim, liveness (platform/proc.h),
 *              reclaim of a dead process (D1-D4), kicks
 *   names.c    the name table: one code per name, whatever the timing
 *   xproc.c    places, rings, the sleep, sends and the wait for room,
 *              the public calls
 *
 * The files form a DAG: xproc.c uses the three others, names.c uses
 * procs.c and publish.c (the test hook), procs.c and publish.c use none.
 */
#ifndef NEMO_XPROC_SEGMENT_H
#define NEMO_XPROC_SEGMENT_H

#include <nemo/xproc.h>
#include <nemo/am.h>

#include "../platform/proc.h"
#include "../waiter/waiter_internal.h"   /* NEMO__CACHELINE */

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#define XP_MAGIC 0x6e656d6f78707231ull   /* "nemoxpr1" */
#define XP_VERSION 2u                     /* 2: 64-bit process and name words, the room mask */
#define LINE NEMO__CACHELINE
#define NAME_WORDS 6u

enum { P_FREE = 0, P_CLAIM = 1, P_LIVE = 2, P_DEAD = 3 };
enum { K_AM = 1, K_NOTIFY = 2, K_REPLY = 3 };   /* a reply's payload starts with its 8-byte tag */
#define TAG_LEN 8u

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
	/* Line B: gen:16 | owner:8 | state:8, and the name. */
	_Alignas(LINE) _Atomic uint32_t word;
	_Atomic uint32_t name[NAME_WORDS];
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
	_Atomic uint32_t payload[NEMO_XPROC_PAYLOAD_MAX / 4];
};

_Static_assert(sizeof(struct seg_slot) == LINE, "a slot is one cache line");
_Static_assert(sizeof(struct seg_place) == 2 * LINE, "a place is two lines");
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

/* A name's handler in this process (xproc.c). */
struct handler {
	nemo_xproc_handler fn;
	nemo_am_handler afn;              /* nemo_xproc_handle_am: nemo/am.h's type */
	void *ctx;
	struct handler *retired_next;
};

struct nemo_xproc_place {
	nemo_xproc *x;
	uint32_t idx, gen, id;
	bool joined;
	unsigned depth;                   /* handlers running (sends inside never wait) */
	uint32_t deaths_seen;
	nemo_wait_policy policy;
	nemo_xproc_notify_handler nfn;
	void *nctx;
	nemo_notify_handler pnfn;         /* nemo_notify_set_handler's (nemo/notify.h's type) */
	void *pnctx;
	uint32_t serial;                  /* unique in the process: the thread's entry names it */
	bool in_wait;                     /* handlers run from nemo_xproc_wait (NEMO_AM_CTX_WAIT) */
	unsigned handled, rejected;       /* of the current drain round */
	/* Per other place index: the generation we knew and our position. */
	uint32_t *dgen, *prod;            /* as a sender, to each index */
	uint32_t *sgen, *cons;            /* as a receiver, from each index */
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
	_Atomic(struct handler *) *handlers;  /* [nnames]: NULL, or the name's record */
	_Atomic(struct handler *) retired;    /* records replaced since attach (freed at detach) */
	nemo_xproc_place **places;        /* [nplaces]: ours, or NULL */
	nemo__proc_ref *peers;            /* [nprocs]: a reference per peer slot (procs.c) */
	_Atomic uint64_t sent, received, kicks, unhandled, rejected, reclaimed, dropped;
	uint32_t hidx, hgen;              /* our entry in the process's registry (public ids) */
	uint32_t forkgen;                 /* fork_gen at attach: a child of fork holds a copy (inherited) */
};

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

/* procs.c */
int nemo__xp_claim_proc(nemo_xproc *x);
void nemo__xp_release_proc(nemo_xproc *x);
bool nemo__xp_check_proc(nemo_xproc *x, uint32_t k);
void nemo__xp_kick_place(nemo_xproc *x, uint32_t i);

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
