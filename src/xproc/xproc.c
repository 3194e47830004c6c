/*
 * xproc.c - shared domains: places in different processes, rings in a
 * named shared-memory segment, shared futexes, peer death, and a segment
 * that a hostile peer cannot turn into memory corruption.
 *
 * The folder's files (segment.h has the map): publish.c makes the
 * segment appear under its name whole; procs.c owns the process table,
 * liveness and the reclaim of a dead process (D1-D4); names.c the name
 * table.  This file owns the rings, the two sleeps (a receiver's, and a
 * sender's wait for room) and the public calls.
 *
 * THE SEGMENT.  Four tables, at offsets computed from the geometry
 * (procs P, places N, ring slots R, names M), each record on its own
 * cache line(s):
 *
 *   header   magic, version, size, P N R M, creator uid/gid; and `deaths`
 *            (line 1), bumped once per reclaimed process
 *   procs[P]     word (64 bits: 0 free, else the process's pid and start
 *                time, and RECLAIM while it is being reclaimed; procs.c)
 *   places[N]    line A: wstate (the futex word: RUNNING, POLLING,
 *                SLEEPING), room (bit s: place s waits for room in its
 *                ring to this one); line B: word (gen:16 | owner:8 |
 *                state:8; states FREE, CLAIM, LIVE, DEAD), name (6 words)
 *   names[M]     state (0 free, a claimer's identity, READY), name (names.c)
 *   rings[N][N]  ring (s, r): R slots of one cache line each, written by
 *                place s's owner and read by place r's owner
 *
 * A slot: seq, src, dst, code, arg (8 bytes), kind:16 | len:16, payload
 * (36 bytes).  Every field is an atomic accessed with relaxed loads and
 * stores except seq, whose orders are below: a peer that rewrites a slot
 * while we read it is then a well-defined (if useless) program.
 *
 * THE VALIDATION RULE.  The segment holds no pointer, and nothing read
 * from it is trusted.  The geometry is read once, at attach, checked
 * against the segment's size (fstat) and the limits, and copied into the
 * private handle; every offset is computed from the private copy, never
 * read again.  Every value read from the segment afterwards is either
 * compared with a value we expect (a seq, a place word, an id) or, if it
 * is an index or length, checked against the private geometry before it
 * is used (code < M, len <= 36, kind known, src and dst the ring's
 * places, owner < P).  Positions in a ring are private (prod, cons) and
 * reduced with the private mask.  Every loop is bounded by the private
 * geometry (a drain takes at most R slots of a ring per round; a scan
 * visits each record once), and every sleep has a deadline (waits sleep
 * in slices of at most 100 ms, a send waiting for room in slices of
 * 10 ms; the one wait on another process's progress, a name being
 * entered, ends with EBUSY after 10 s: names.c).  A slot that fails
 * validation is consumed, counted (rejected) and reported (EBADMSG): it
 * is never handed to a handler.
 *
 * DEADLINES count as the in-process waits count them (src/waiter/wait.c,
 * ticks_until; segment.h, xp_deadline_ns): validated first (tv_nsec out
 * of range: EINVAL), a deadline in the past - tv_sec < 0 included - times
 * out at once, and one too far to count in 64 bits of ns is "never".  No
 * product overflows.  This holds for nemo_xproc_wait (and nemo_place_wait
 * on a shared place, which comes here) and for the timed sends
 * (nemo_am_send_timed, nemo_am_sendv_timed, nemo_notify_timed: their
 * wait for room).  A deadline is only looked at when there is something
 * to wait for: a wait first drains, a send with room sends.
 *
 * THE RING (seq per slot, as Vyukov's bounded queue, single producer and
 * single consumer).  Slot k starts with seq = k.  The producer at
 * private position p: slot p & (R-1) is free iff its seq == p (acquire);
 * it writes the fields (relaxed), then S1: seq = p + 1 (seq_cst), p++.
 * The consumer at c: slot c & (R-1) is full iff seq == c + 1 (acquire,
 * or seq_cst in the re-check W3); it copies the fields into private
 * memory, then C1: seq = c + R (seq_cst), c++, and C2 (THE WAIT FOR
 * ROOM), and only then validates the copy and runs its handler.  The
 * acquire of seq pairs with the producer's seq store, so the fields are
 * those written for this position (unless a peer scribbles: then the
 * copy fails validation, or is a wrong but well-formed message).
 *
 * THE SLEEP (the published-state handshake of waiter.c, on a shared
 * futex).  The receiver polls by its policy (nemo__wait_loop), then:
 *
 *   W2  wstate = SLEEPING            exchange, seq_cst
 *   W3  look at every ring into r    seq loads, seq_cst; `deaths`; our
 *                                    own place word (OUR OWN PLACE)
 *       anything: wstate = RUNNING (relaxed), and do not sleep
 *   W4  futex_wait(wstate, SLEEPING), shared, deadline <= 100 ms
 *   W5  wstate = RUNNING             relaxed
 *
 *   S1  seq = p + 1                  seq_cst store
 *   S2  load wstate                  seq_cst
 *   S3  if SLEEPING: CAS SLEEPING -> RUNNING (seq_cst), and the winner
 *       FUTEX_WAKEs (shared)
 *
 * Why no wake is lost: S1 and W2 are both seq_cst and each side then
 * reads the other's word (S2, W3) with seq_cst, so in the single total
 * order either S1 precedes W3 (the receiver sees the message and does
 * not sleep) or W2 precedes S2 (the sender sees SLEEPING and kicks).  A
 * kick that lands between W3 and W4 changed wstate, so W4's futex_wait
 * returns at once (EAGAIN).  models/xproc.pml checks this, with two
 * senders, spurious wake-ups and a death, and fails for the two
 * reorderings (S2 before S1; W3 before W2).
 *
 * THE WAIT FOR ROOM.  A blocking send that finds its slot taken (the
 * ring holds R unread messages) waits through the same wait loop, on its
 * OWN place's wstate - so that it also wakes for messages to its place,
 * which it serves meanwhile (drain), and for deaths:
 *
 *   R1  room(d) |= bit(s)            seq_cst RMW on the receiver's line A,
 *                                    once, when the wait begins
 *   W1-W5 as above, the condition being: the slot at our position is
 *       free (W3: its seq loaded seq_cst), or a message to us, or
 *       `deaths` moved, or the receiver's place word is not the LIVE one
 *       we send to, or our own place word changed
 *   R3  room(d) &= ~bit(s)           relaxed, when the wait ends
 *
 *   C1  seq = c + R                  the consumer frees a slot, seq_cst
 *   C2  load room(own line A)        seq_cst; bit s set: S2-S3 on place
 *                                    s's wstate (before the handler runs)
 *
 * Why the sender is never left asleep with room: R1, W2 and W3 against
 * C1 and C2 is the store-then-look of S1-S2 again (all seq_cst).  The
 * slot the sender waits for is freed by the consumer's very next C1 (a
 * full ring: the consumer is exactly R behind).  If W3 does not see that
 * C1, W3 precedes C1 in the total order, so R1 and W2 precede C2 and the
 * kick's S2: the receiver sees the bit (only the sender clears it, at
 * R3, after its wait) and its S2 sees SLEEPING (or a later store: the
 * sender is awake).  Leave is the other way room can come (the sender
 * must give up: ESRCH): L1 the leaver's CAS of its word (seq_cst), L2 it
 * loads its room mask (seq_cst) and kicks each waiter, against W3's load
 * of the receiver's word.  The receiver's death: D1 precedes D3, which
 * kicks every sleeping place (procs.c); and each 10 ms slice that passes
 * checks the receiver's process (procs.c, LIVENESS), so a receiver
 * killed before anyone reclaimed it is found within a slice.
 * models/xproc.pml -DROOM checks R1-R3/C1-C2 with spurious wake-ups, and
 * fails when C2 comes before C1 or the bit is published after W3.
 * The poll phase runs once per send (the place's policy: its budget);
 * later slices sleep at once (NEMO_WAIT_BLOCK), so a blocked send costs
 * one wake-up per slice, not a CPU.  NEMO_XPROC_NONBLOCK (NEMO_NONBLOCK)
 * returns EAGAIN at once, and so does a send from a handler (handlers
 * never wait); a send past its deadline returns ETIMEDOUT having queued
 * nothing.  Cost on the receiving side: C1 is a seq_cst store instead of
 * a release, and C2 one load of the receiver's own line, per consumed
 * slot; a kick only while a sender waits.  A peer can set room bits:
 * spurious kicks, which the waiter layer tolerates.
 *
 * OUR OWN PLACE.  A live process can find its place reclaimed: another
 * process took it for dead (only a hostile peer can make that happen
 * since procs.c's identity words), or the index was joined again after
 * that.  Its rings are then someone else's, or about to be reset for
 * someone else: a send into them would be rejected and could put the
 * new owner's ring out of step (a stale slot a lap ahead of its
 * producer), a drain would take the new owner's messages.  So every
 * send, poll and wait compares our place word with (our gen, our slot,
 * LIVE) first and returns EOWNERDEAD, with a text saying so, when it
 * differs; a drain compares it again after each slot's seq (acquire):
 * a joiner's claim of our index precedes the seq stores of the senders
 * that found it LIVE, so a slot of the new owner's is never taken.  The
 * check before a send's write is a load of our own line B; a reclaim
 * between it and the write can put one stale slot into the reset ring
 * (JOIN AND LEAVE: the new receiver rejects it, the producer steps over
 * it) - one per send, and the next send fails.  D3 kicks every sleeping
 * place, DEAD ones included, and W3 reads our word, so a sleeper learns
 * it at once.  The cure is the caller's: detach, attach and join again.
 *
 * PEER DEATH (procs.c has the rules).  A peer is dead when the one
 * liveness check of nemo (platform/proc.h), asked about the identity in
 * its process word, says so: a pid reused by another process is not
 * taken for the peer, and a live process is not taken for a dead one
 * that had its pid.  Checks run at attach, in nemo_xproc_check, in a
 * send that waits for room (every slice), and in a wait whose slice
 * ended.  D2 (deaths += 1) before D3 (kick every sleeping place) is the
 * same store-then-look as S1-S2: a waiter's W3 reads `deaths`, so it
 * either sees the bump or is kicked by D3 (the model's death process).
 * A waiter then returns EOWNERDEAD (once per bump); a send to a DEAD
 * place returns EOWNERDEAD; a send waiting for room in a ring to a place
 * whose owner is found dead reclaims it and returns EOWNERDEAD.  Rings
 * to and from a DEAD place are reset by the next join of its index,
 * which bumps the generation, so that a restarted process can attach
 * and join again.
 *
 * JOIN AND LEAVE.  Join: CAS word (FREE or DEAD, gen g) -> (g+1, me,
 * CLAIM) - of an index whose rings out hold nothing unread if there is
 * one, else of any (the unread are counted in `dropped`); reset the rings
 * into and out of the index (seq of slot k = k), its room mask, and its
 * bit in every other place's room mask (a waiter that died waiting
 * left it); wstate = RUNNING; name; word = (g+1, me, LIVE) (seq_cst);
 * then, if another LIVE place has the same name, leave again (EEXIST).
 * Senders check the destination's word (LIVE, their generation) before
 * they write, and reset their private position when the generation they
 * knew changed; receivers do the same for each sender's index.  Leave:
 * L1 CAS (g, me, LIVE) -> (g, 0, FREE), L2 kick the senders waiting for
 * room (above).  A send whose check passed just
 * before its destination left and a new place joined at the same index
 * may write into the reset ring, at its old position k; the new receiver
 * rejects it when it gets there (wrong dst generation) and frees the
 * slot (seq = k + R).  The sender, now writing to the new generation
 * from position 0, then finds at its position k a slot already consumed
 * (seq == k + R, which a sound ring never shows a producer: the consumer
 * never passes it) and steps over it, so the ring goes on.  Generations
 * are 16 bits.  A receiver draining a sender's ring checks the sender's
 * word after each slot's seq (acquire): if the index was joined again
 * meanwhile (a handler ran, or it was preempted), the slot belongs to the
 * new generation's positions, and it stops; the next drain starts over
 * from position 0 (sender_gen).  A blocking send that waits for room runs
 * its own place's handlers, which may send to the same destination
 * without waiting: they start at the waiting send's position, and the
 * waiting send then goes on from theirs.
 */
#define _GNU_SOURCE

#include "segment.h"

#include <nemo/notify.h>

#include "../messaging/messaging_internal.h"   /* nemo__check_flags */
#include "../messaging/remote.h"
#include "../platform/fail.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SLICE_NS 100000000ull             /* a sleeper looks for dead peers this often */
#define ROOM_SLICE_NS 10000000ull         /* a send waiting for room checks its receiver this often */

static inline uint32_t id_make(uint32_t idx, uint32_t gen) { return (gen & 0xFFFFu) << 8 | (idx & 0xFFu); }
static inline uint32_t id_idx(uint32_t id) { return id & 0xFFu; }
static inline uint32_t id_gen(uint32_t id) { return (id >> 8) & 0xFFFFu; }
/* An id as id_make writes it: bits 24-31 clear and a generation (ids with
 * other bits would pass the index and generation checks and then be
 * rejected by the receiver, whose slot check compares the whole id). */
static inline bool id_ok(uint32_t id) { return (id >> 24) == 0 && id_gen(id) != 0; }

/* ------------------------------------------------------------------ */
/* Public ids: the registry of this process's handles, and each thread's */
/* places (THE PUBLIC CALLS, above)                                     */
/* ------------------------------------------------------------------ */

#define XP_HANDLES 64u                    /* shared domains attached at once, per process */
#define XP_THREAD_PLACES 8u               /* places one thread reaches through the public calls */
#define XID_TAG (5ull << 61)              /* 101: remote (remote.h), transport 1 */

static struct {
	_Atomic(nemo_xproc *) x;
	_Atomic uint32_t gen;             /* bumped at attach and at detach; 1..0xFFFF */
} registry[XP_HANDLES];
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint32_t place_serial;
static const nemo__remote_ops xp_remote_ops;
_Static_assert(NEMO_XPROC_PLACES_MAX <= 64, "a broadcast keeps its destinations in a 64-bit mask");

/* What a thread holds: integers only, checked against the registry and
 * the handle's own table before use, so an entry that outlived its
 * place or its handle names nothing (never a freed pointer). */
struct tls_place {
	uint32_t hgen, serial;            /* serial 0: a free entry */
	uint16_t hidx, pidx;
	uint32_t order;                   /* the latest join is the thread's own place */
};
static _Thread_local struct tls_place tls_places[XP_THREAD_PLACES];
static _Thread_local uint32_t tls_order;

/* A public id: XID_TAG (bits 61-63, 56-60 zero), the handle's generation
 * (40-55) and index (32-39), the place's id in the segment (0-31).  The
 * encoder and its decoders, the only code that knows the layout. */
static nemo_place_id public_id(const nemo_xproc *x, nemo_xproc_id id)
{
	return XID_TAG | (uint64_t)(x->hgen & 0xFFFFu) << 40 | (uint64_t)x->hidx << 32 | id;
}

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

static void registry_drop(nemo_xproc *x)
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
static void tls_adopt(nemo_xproc_place *p)
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

static void tls_forget(const nemo_xproc_place *p)
{
	for (unsigned i = 0; i < XP_THREAD_PLACES; i++)
		if (tls_places[i].serial == p->serial)
			tls_places[i].serial = 0;
}

/* The calling thread's place in x. */
static nemo_xproc_place *tls_place_in(nemo_xproc *x)
{
	for (unsigned i = 0; i < XP_THREAD_PLACES; i++) {
		const struct tls_place *t = &tls_places[i];
		if (t->serial && t->hidx == x->hidx && t->hgen == x->hgen)
			return tls_place(t, x);
	}
	return NULL;
}

static _Atomic uint32_t fork_gen;       /* children of fork this process is (registry_fork_child) */

/* A handle this process got by fork, not by attach: its process slot and
 * places are the parent's, so nothing may act on them through it. */
static inline bool inherited(const nemo_xproc *x)
{
	return x->forkgen != atomic_load_explicit(&fork_gen, memory_order_relaxed);
}

#define NEMO__XP_INHERITED()                                                                         \
	NEMO__FAIL(ENOTCONN, "the handle was inherited across fork: its places are the parent's "     \
		   "(nemo_xproc_attach again in the child)")

/* In a child of fork every handle is the parent's (its process slot,
 * its places' rings): the child must attach again (docs/xproc.md), and
 * its public calls must not reach the copies - a nemo_poll there would
 * drain the parent's rings.  So the child forgets every entry (the
 * forking thread's own entries then name nothing), and its raw calls on
 * the copies see them inherited (fork_gen). */
static void registry_fork_child(void)
{
	atomic_fetch_add_explicit(&fork_gen, 1, memory_order_relaxed);
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
 * handle is the caller's. */
static int publish_handle(nemo_xproc *x, nemo_xproc **out)
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
	nemo_xproc_detach(x);
	return NEMO__FAIL(EMFILE, "this process has %u shared domains attached already", XP_HANDLES);
}

/* ------------------------------------------------------------------ */
/* Layout and time                                                     */
/* ------------------------------------------------------------------ */

static void layout(uint32_t procs, uint32_t places, uint32_t slots, uint32_t names, size_t *op, size_t *ol,
		   size_t *on, size_t *orr, size_t *size)
{
	*op = sizeof(struct seg_hdr);
	*ol = *op + (size_t)procs * sizeof(struct seg_proc);
	*on = *ol + (size_t)places * sizeof(struct seg_place);
	*orr = *on + (size_t)names * sizeof(struct seg_name);
	*size = *orr + (size_t)places * places * slots * sizeof(struct seg_slot);
}

static void ns_to_ts(uint64_t ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / 1000000000u);
	ts->tv_nsec = (long)(ns % 1000000000u);
}

/* ------------------------------------------------------------------ */
/* Create, attach, detach                                              */
/* ------------------------------------------------------------------ */

static int shm_path(const char *name, char *buf, size_t cap)
{
	if (!name_ok(name, 200) || !strcmp(name, ".") || !strcmp(name, ".."))
		return EINVAL;
	snprintf(buf, cap, "/%s", name);
	return 0;
}

static int handle_alloc(nemo_xproc *x)
{
	x->handlers = calloc(x->nnames, sizeof *x->handlers);
	x->places = calloc(x->nplaces, sizeof *x->places);
	x->peers = malloc(x->nprocs * sizeof *x->peers);
	if (!x->handlers || !x->places || !x->peers)
		return ENOMEM;
	for (uint32_t k = 0; k < x->nprocs; k++)
		x->peers[k] = (nemo__proc_ref){ .pid = 0, .fd = -1, .start = 0, .dead = true };
	x->pid = (uint32_t)getpid();
	x->ident = xp_ident(getpid(), nemo__proc_self_start());
	x->me = UINT32_MAX;
	x->forkgen = atomic_load_explicit(&fork_gen, memory_order_relaxed);
	return 0;
}

static void handle_free(nemo_xproc *x)
{
	if (!x)
		return;
	if (x->peers)
		for (uint32_t k = 0; k < x->nprocs; k++)
			nemo__proc_close(&x->peers[k]);
	if (x->base)
		munmap(x->base, x->size);
	if (x->fd >= 0)
		close(x->fd);
	if (x->handlers)
		for (uint32_t i = 0; i < x->nnames; i++)
			free(atomic_load_explicit(&x->handlers[i], memory_order_relaxed));
	for (struct handler *h = atomic_load_explicit(&x->retired, memory_order_relaxed), *n; h; h = n) {
		n = h->retired_next;
		free(h);
	}
	free(x->handlers);
	free(x->places);
	free(x->peers);
	free(x);
}

/* Create: the segment is built in a file with no name and published
 * whole (publish.c, THE PUBLICATION). */
int nemo_xproc_create(const char *name, const nemo_xproc_attr *attr, nemo_xproc **out)
{
	char path[256];
	if (!out)
		return NEMO__FAIL(EINVAL, "out is NULL");
	*out = NULL;
	if (shm_path(name, path, sizeof path))
		return NEMO__FAIL(EINVAL, "name '%s' is not 1-200 of [A-Za-z0-9._-] (nor . or ..)",
				  name ? name : "(null)");
	nemo_xproc_attr a = attr ? *attr : (nemo_xproc_attr){0};
	if (!a.mode)
		a.mode = 0600;
	if (!a.max_procs)
		a.max_procs = 16;
	if (!a.max_places)
		a.max_places = 16;
	if (!a.ring_slots)
		a.ring_slots = 64;
	if (!a.max_names)
		a.max_names = 64;
	if (a.mode & ~0777u)
		return NEMO__FAIL(EINVAL, "mode %o has bits beyond 0777", a.mode);
	if (a.max_procs > NEMO_XPROC_PROCS_MAX || a.max_places > NEMO_XPROC_PLACES_MAX ||
	    a.max_names > NEMO_XPROC_NAMES_MAX)
		return NEMO__FAIL(EINVAL, "procs %u, places %u or names %u above the limits (%u, %u, %u)",
				  a.max_procs, a.max_places, a.max_names, NEMO_XPROC_PROCS_MAX,
				  NEMO_XPROC_PLACES_MAX, NEMO_XPROC_NAMES_MAX);
	if (a.ring_slots < 2 || a.ring_slots > 4096 || (a.ring_slots & (a.ring_slots - 1)))
		return NEMO__FAIL(EINVAL, "ring_slots %u is not a power of two in 2..4096", a.ring_slots);
	if (nemo__xp_name_taken(name))
		return NEMO__FAIL(EEXIST, "shared domain '%s' exists (attach it, or nemo_xproc_unlink it)", name);

	nemo_xproc *x = calloc(1, sizeof *x);
	if (!x)
		return NEMO__FAIL(ENOMEM, "cannot allocate the handle");
	x->fd = -1;
	x->nprocs = a.max_procs;
	x->nplaces = a.max_places;
	x->nslots = a.ring_slots;
	x->nnames = a.max_names;
	layout(x->nprocs, x->nplaces, x->nslots, x->nnames, &x->off_procs, &x->off_places, &x->off_names,
	       &x->off_rings, &x->size);
	int rc = handle_alloc(x);
	if (rc) {
		handle_free(x);
		return NEMO__FAIL(rc, "cannot allocate the handle's tables");
	}
	if ((rc = nemo__xp_file_new(a.mode, x->size, &x->fd))) {
		handle_free(x);
		return NEMO__FAIL(rc, "cannot make an unnamed file of %zu bytes in /dev/shm (O_TMPFILE)", x->size);
	}
	x->base = mmap(NULL, x->size, PROT_READ | PROT_WRITE, MAP_SHARED, x->fd, 0);
	if (x->base == MAP_FAILED) {
		rc = errno;
		x->base = NULL;
		handle_free(x);
		return NEMO__FAIL(rc, "cannot map the segment of '%s'", path);
	}
	/* The segment is zero: every proc, place and name is free.  Rings
	 * start with seq k in slot k. */
	for (uint32_t s = 0; s < x->nplaces; s++)
		for (uint32_t r = 0; r < x->nplaces; r++) {
			struct seg_slot *ring = ring_at(x, s, r);
			for (uint32_t k = 0; k < x->nslots; k++)
				atomic_store_explicit(&ring[k].seq, k, memory_order_relaxed);
		}
	if (nemo__xproc_test_hook)
		nemo__xproc_test_hook("create");
	struct seg_hdr *h = hdr(x);
	h->size = x->size;
	h->version = XP_VERSION;
	h->procs = x->nprocs;
	h->places = x->nplaces;
	h->slots = x->nslots;
	h->names = x->nnames;
	h->uid = (uint32_t)geteuid();
	h->gid = (uint32_t)getegid();
	h->magic = XP_MAGIC;
	nemo__xp_claim_proc(x);
	/* An entry in the registry before the name: once the name exists
	 * others may attach, and nothing may undo the create then. */
	nemo_xproc *mine = NULL;
	if ((rc = publish_handle(x, &mine)))
		return rc;
	if ((rc = nemo__xp_file_publish(x->fd, name))) {
		registry_drop(x);
		handle_free(x);
		return NEMO__FAIL(rc, rc == EEXIST ? "shared domain '%s' exists (another process created it "
				  "meanwhile: attach it)" : "cannot publish the segment as /dev/shm/%s", name);
	}
	*out = mine;
	return 0;
}

int nemo_xproc_attach(const char *name, const nemo_xproc_attach_attr *attr, nemo_xproc **out)
{
	char path[256];
	if (!out)
		return NEMO__FAIL(EINVAL, "out is NULL");
	*out = NULL;
	if (shm_path(name, path, sizeof path))
		return NEMO__FAIL(EINVAL, "name '%s' is not 1-200 of [A-Za-z0-9._-] (nor . or ..)",
				  name ? name : "(null)");
	uid_t uid = attr && attr->use_ids ? attr->uid : geteuid();
	gid_t gid = attr && attr->use_ids ? attr->gid : getegid();
	int fd = shm_open(path, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0) {
		int e = errno;
		return NEMO__FAIL(e, "shm_open('%s') failed", path);
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return NEMO__FAIL(e, "cannot stat '%s'", path);
	}
	if (st.st_uid != uid || ((st.st_mode & 0070) && st.st_gid != gid)) {
		close(fd);
		return NEMO__FAIL(EACCES, "'%s' belongs to uid %u gid %u, not the expected %u/%u", path,
				  (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)uid, (unsigned)gid);
	}
	if ((size_t)st.st_size < sizeof(struct seg_hdr)) {
		close(fd);
		return NEMO__FAIL(EPROTO, "'%s' is %lld bytes: not a nemo segment", path, (long long)st.st_size);
	}
	struct seg_hdr h;
	if (pread(fd, &h, offsetof(struct seg_hdr, deaths), 0) != (ssize_t)offsetof(struct seg_hdr, deaths)) {
		close(fd);
		return NEMO__FAIL(EPROTO, "cannot read the header of '%s'", path);
	}
	size_t op, ol, on, orr, size = 0;
	bool ok = h.magic == XP_MAGIC && h.version == XP_VERSION && h.procs >= 1 &&
		  h.procs <= NEMO_XPROC_PROCS_MAX && h.places >= 1 && h.places <= NEMO_XPROC_PLACES_MAX &&
		  h.names >= 1 && h.names <= NEMO_XPROC_NAMES_MAX && h.slots >= 2 && h.slots <= 4096 &&
		  !(h.slots & (h.slots - 1)) && h.uid == (uint32_t)st.st_uid;
	if (ok) {
		layout(h.procs, h.places, h.slots, h.names, &op, &ol, &on, &orr, &size);
		ok = h.size == size && (size_t)st.st_size == size;
	}
	if (!ok) {
		close(fd);
		return NEMO__FAIL(EPROTO, "'%s' has no valid nemo header of version %u for its %lld bytes", path,
				  XP_VERSION, (long long)st.st_size);
	}
	nemo_xproc *x = calloc(1, sizeof *x);
	if (!x) {
		close(fd);
		return NEMO__FAIL(ENOMEM, "cannot allocate the handle");
	}
	x->fd = fd;
	x->nprocs = h.procs;
	x->nplaces = h.places;
	x->nslots = h.slots;
	x->nnames = h.names;
	x->size = size;
	x->off_procs = op;
	x->off_places = ol;
	x->off_names = on;
	x->off_rings = orr;
	int rc = handle_alloc(x);
	if (rc) {
		handle_free(x);
		return NEMO__FAIL(rc, "cannot allocate the handle's tables");
	}
	x->base = mmap(NULL, x->size, PROT_READ | PROT_WRITE, MAP_SHARED, x->fd, 0);
	if (x->base == MAP_FAILED) {
		rc = errno;
		x->base = NULL;
		handle_free(x);
		return NEMO__FAIL(rc, "cannot map '%s'", path);
	}
	for (uint32_t k = 0; k < x->nprocs; k++)   /* dead processes first: their slots come free */
		nemo__xp_check_proc(x, k);
	if (nemo__xp_claim_proc(x)) {
		handle_free(x);
		return NEMO__FAIL(EUSERS, "every one of the %u process slots of '%s' is taken", h.procs, path);
	}
	return publish_handle(x, out);
}

/* The private memory of a place (leave, and detach of an inherited handle). */
static void place_free(nemo_xproc_place *p)
{
	p->x->places[p->idx] = NULL;
	tls_forget(p);
	free(p->dgen);
	free(p);
}

int nemo_xproc_detach(nemo_xproc *x)
{
	if (!x)
		return NEMO__FAIL(EINVAL, "handle is NULL");
	if (inherited(x)) {
		/* The child's copy: free it, and leave the parent's places
		 * and process slot (and the registry entry, which the fork
		 * handler cleared and which may name the child's own handle
		 * now) alone. */
		for (uint32_t i = 0; i < x->nplaces; i++)
			if (x->places[i])
				place_free(x->places[i]);
		handle_free(x);
		return 0;
	}
	for (uint32_t i = 0; i < x->nplaces; i++)
		if (x->places[i] && x->places[i]->depth)
			return NEMO__FAIL(EBUSY, "place %#x is running a handler: detach after it returns",
					  x->places[i]->id);
	for (uint32_t i = 0; i < x->nplaces; i++)
		if (x->places[i])
			nemo_xproc_leave(x->places[i]);
	nemo__xp_release_proc(x);
	registry_drop(x);
	handle_free(x);
	return 0;
}

int nemo_xproc_unlink(const char *name)
{
	char path[256];
	if (shm_path(name, path, sizeof path))
		return NEMO__FAIL(EINVAL, "name '%s' is not 1-200 of [A-Za-z0-9._-] (nor . or ..)",
				  name ? name : "(null)");
	if (shm_unlink(path) != 0) {
		int e = errno;
		return NEMO__FAIL(e, "shm_unlink('%s') failed", path);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Places                                                              */
/* ------------------------------------------------------------------ */

/* Slots of ring (s -> r) written and not yet read: a written slot of
 * position p holds p + 1, a free or read one p or p + R, so a slot k is
 * unread iff seq - k = 1 (mod R).  Racy reads of a ring no one writes
 * (a free index's) or being read: a hint, not a count to rely on. */
static uint32_t ring_unread(nemo_xproc *x, uint32_t s, uint32_t r)
{
	struct seg_slot *ring = ring_at(x, s, r);
	uint32_t n = 0;
	for (uint32_t k = 0; k < x->nslots; k++)
		n += ((atomic_load_explicit(&ring[k].seq, memory_order_relaxed) - k) & (x->nslots - 1)) == 1;
	return n;
}

/* Messages index i sent that their receivers have not read. */
static uint32_t sent_unread(nemo_xproc *x, uint32_t i)
{
	uint32_t n = 0;
	for (uint32_t o = 0; o < x->nplaces; o++)
		if (o != i)
			n += ring_unread(x, i, o);
	return n;
}

static void ring_reset(nemo_xproc *x, uint32_t s, uint32_t r)
{
	struct seg_slot *ring = ring_at(x, s, r);
	for (uint32_t k = 0; k < x->nslots; k++)
		atomic_store_explicit(&ring[k].seq, k, memory_order_relaxed);
}

int nemo_xproc_find(nemo_xproc *x, const char *name, nemo_xproc_id *id)
{
	if (!x || !id || !name_ok(name, NEMO_XPROC_NAME_MAX))
		return NEMO__FAIL(EINVAL, "NULL handle or id, or name not 1-%u of [A-Za-z0-9._-]",
				  NEMO_XPROC_NAME_MAX);
	uint32_t w[NAME_WORDS];
	name_pack(name, w);
	for (uint32_t i = 0; i < x->nplaces; i++) {
		struct seg_place *pl = place_at(x, i);
		uint32_t pw = atomic_load_explicit(&pl->word, memory_order_acquire);
		if (pw_state(pw) == P_LIVE && name_eq(pl->name, w) &&
		    atomic_load_explicit(&pl->word, memory_order_acquire) == pw) {
			*id = id_make(i, pw_gen(pw));
			return 0;
		}
	}
	return ENOENT;
}

int nemo_xproc_join(nemo_xproc *x, const char *name, nemo_xproc_place **out, nemo_xproc_id *id)
{
	if (!x || !out)
		return NEMO__FAIL(EINVAL, "handle or out is NULL");
	if (inherited(x))
		return NEMO__XP_INHERITED();
	if (name && !name_ok(name, NEMO_XPROC_NAME_MAX))
		return NEMO__FAIL(EINVAL, "place name is not 1-%u of [A-Za-z0-9._-]", NEMO_XPROC_NAME_MAX);
	nemo_xproc_id other;
	if (name && nemo_xproc_find(x, name, &other) == 0)
		return NEMO__FAIL(EEXIST, "a live place is named '%s'", name);
	nemo_xproc_place *p = calloc(1, sizeof *p);
	uint32_t *arr = calloc(4 * (size_t)x->nplaces, sizeof *arr);
	if (!p || !arr) {
		free(p);
		free(arr);
		return NEMO__FAIL(ENOMEM, "cannot allocate the place");
	}
	p->dgen = arr;
	p->prod = arr + x->nplaces;
	p->sgen = arr + 2 * x->nplaces;
	p->cons = arr + 3 * x->nplaces;
	p->x = x;
	/* Which index: first pass, only those whose departed occupant's
	 * messages have all been read (its receivers may still be draining
	 * them: taking the index resets its rings); second pass, any. */
	for (uint32_t t = 0; t < 2 * x->nplaces; t++) {
		uint32_t i = t % x->nplaces;
		struct seg_place *pl = place_at(x, i);
		uint32_t w = atomic_load_explicit(&pl->word, memory_order_acquire);
		if (pw_state(w) != P_FREE && pw_state(w) != P_DEAD)
			continue;
		if (t < x->nplaces && sent_unread(x, i))
			continue;
		uint32_t gen = (pw_gen(w) + 1) & 0xFFFFu;
		if (gen == 0)
			gen = 1;
		if (!atomic_compare_exchange_strong_explicit(&pl->word, &w, pw_make(gen, x->me, P_CLAIM),
							     memory_order_seq_cst, memory_order_relaxed))
			continue;
		/* (The first pass took an index with nothing unread; after
		 * the CAS nobody writes its rings out, so that stays true.) */
		uint32_t lost = t < x->nplaces ? 0 : sent_unread(x, i);
		if (lost)
			atomic_fetch_add_explicit(&x->dropped, lost, memory_order_relaxed);
		for (uint32_t o = 0; o < x->nplaces; o++) {
			ring_reset(x, o, i);
			ring_reset(x, i, o);
			/* A waiter for room of index i's last occupant that died
			 * waiting left its bit: nobody waits there now. */
			if (o != i)
				atomic_fetch_and_explicit(&place_at(x, o)->room, ~(1ull << i), memory_order_relaxed);
		}
		atomic_store_explicit(&pl->room, 0, memory_order_relaxed);
		atomic_store_explicit(&pl->wstate, NEMO_WAITER_RUNNING, memory_order_relaxed);
		if (name)
			name_store(pl->name, name);
		else
			name_store(pl->name, ".");
		p->idx = i;
		p->gen = gen;
		p->id = id_make(i, gen);
		p->deaths_seen = atomic_load_explicit(&hdr(x)->deaths, memory_order_relaxed);
		p->joined = true;
		p->serial = atomic_fetch_add_explicit(&place_serial, 1, memory_order_relaxed) + 1;
		x->places[i] = p;
		uint32_t c = pw_make(gen, x->me, P_CLAIM);
		if (!atomic_compare_exchange_strong_explicit(&pl->word, &c, pw_make(gen, x->me, P_LIVE),
							     memory_order_seq_cst, memory_order_relaxed)) {
			/* Reclaimed under us (we were taken for dead) or scribbled. */
			x->places[i] = NULL;
			free(arr);
			free(p);
			return NEMO__FAIL(EBADMSG, "place %u was changed by another process while joining", i);
		}
		/* Another place that went LIVE under the same name meanwhile:
		 * both published (seq_cst) before they look, so at least one
		 * sees the other, and whoever sees one backs out. */
		if (name) {
			uint32_t nw[NAME_WORDS];
			name_pack(name, nw);
			for (uint32_t o = 0; o < x->nplaces; o++) {
				struct seg_place *op = place_at(x, o);
				if (o != i && pw_state(atomic_load_explicit(&op->word, memory_order_seq_cst)) == P_LIVE &&
				    name_eq(op->name, nw)) {
					nemo_xproc_leave(p);
					return NEMO__FAIL(EEXIST, "a live place is named '%s'", name);
				}
			}
		}
		*out = p;
		if (id)
			*id = p->id;
		tls_adopt(p);
		return 0;
	}
	free(arr);
	free(p);
	return NEMO__FAIL(ENOSPC, "every one of the %u places is taken", x->nplaces);
}

int nemo_xproc_leave(nemo_xproc_place *p)
{
	if (!p || !p->joined)
		return NEMO__FAIL(EINVAL, "place is NULL or not joined");
	if (p->depth)
		return NEMO__FAIL(EBUSY, "place %#x is running a handler", p->id);
	nemo_xproc *x = p->x;
	if (inherited(x))
		return NEMO__XP_INHERITED();
	uint32_t w = pw_make(p->gen, x->me, P_LIVE);
	atomic_compare_exchange_strong_explicit(&place_at(x, p->idx)->word, &w, pw_make(p->gen, 0, P_FREE),
						memory_order_seq_cst, memory_order_relaxed);          /* L1 */
	/* L2: the senders that wait for room in a ring to us learn that we
	 * left (THE WAIT FOR ROOM). */
	uint64_t room = atomic_load_explicit(&place_at(x, p->idx)->room, memory_order_seq_cst);
	for (uint32_t s = 0; s < x->nplaces; s++)
		if (room >> s & 1u)
			nemo__xp_kick_place(x, s);
	place_free(p);
	return 0;
}

nemo_xproc_id nemo_xproc_self(const nemo_xproc_place *p)
{
	return p ? p->id : 0;
}

int nemo_xproc_set_notify(nemo_xproc_place *p, nemo_xproc_notify_handler fn, void *ctx)
{
	if (!p)
		return NEMO__FAIL(EINVAL, "place is NULL");
	p->nfn = fn;
	p->nctx = ctx;
	return 0;
}

int nemo_xproc_set_policy(nemo_xproc_place *p, const nemo_wait_policy *pol)
{
	if (!p || !pol)
		return NEMO__FAIL(EINVAL, "place or policy is NULL");
	nemo_wait_policy r;
	if (nemo__wait_policy_resolve(pol, &r))
		return NEMO__FAIL(EINVAL, "unknown policy kind %d", (int)pol->kind);
	p->policy = *pol;
	return 0;
}

int nemo_xproc_place_check(nemo_xproc *x, nemo_xproc_id id)
{
	if (!x)
		return NEMO__FAIL(EINVAL, "handle is NULL");
	uint32_t i = id_idx(id);
	if (i >= x->nplaces || !id_ok(id))
		return ESRCH;
	uint32_t w = atomic_load_explicit(&place_at(x, i)->word, memory_order_acquire);
	if (pw_gen(w) != id_gen(id))
		return ESRCH;
	if (pw_state(w) == P_DEAD)
		return EOWNERDEAD;
	if (pw_state(w) != P_LIVE)
		return ESRCH;
	uint32_t k = pw_owner(w);
	if (k >= x->nprocs)
		return EBADMSG;
	if (nemo__xp_check_proc(x, k))
		return EOWNERDEAD;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Names and handlers                                                  */
/* ------------------------------------------------------------------ */

/* The name table (nemo_xproc_name) is names.c's. */

/* The name's handler in this process: one of the two kinds (or none). */
static int set_handler(nemo_xproc *x, const char *name, nemo_xproc_handler fn, nemo_am_handler afn, void *ctx)
{
	uint32_t code;
	int rc = nemo_xproc_name(x, name, &code);
	if (rc)
		return rc;
	struct handler *h = malloc(sizeof *h);
	if (!h)
		return NEMO__FAIL(ENOMEM, "no memory for the handler of '%s'", name);
	*h = (struct handler){ .fn = fn, .afn = afn, .ctx = ctx };
	struct handler *old = atomic_exchange_explicit(&x->handlers[code], h, memory_order_acq_rel);
	if (old) {
		old->retired_next = atomic_load_explicit(&x->retired, memory_order_relaxed);
		while (!atomic_compare_exchange_weak_explicit(&x->retired, &old->retired_next, old,
							      memory_order_release, memory_order_relaxed))
			;
	}
	return 0;
}

int nemo_xproc_handle(nemo_xproc *x, const char *name, nemo_xproc_handler fn, void *ctx)
{
	return set_handler(x, name, fn, NULL, ctx);
}

int nemo_xproc_handle_am(nemo_xproc *x, const char *name, nemo_am_handler fn, void *ctx)
{
	return set_handler(x, name, NULL, fn, ctx);
}

int nemo_xproc_get_counters(nemo_xproc *x, nemo_xproc_counters *out)
{
	if (!x || !out)
		return NEMO__FAIL(EINVAL, "handle or out is NULL");
	out->sent = atomic_load_explicit(&x->sent, memory_order_relaxed);
	out->received = atomic_load_explicit(&x->received, memory_order_relaxed);
	out->kicks = atomic_load_explicit(&x->kicks, memory_order_relaxed);
	out->unhandled = atomic_load_explicit(&x->unhandled, memory_order_relaxed);
	out->rejected = atomic_load_explicit(&x->rejected, memory_order_relaxed);
	out->dropped = atomic_load_explicit(&x->dropped, memory_order_relaxed);
	out->reclaimed = atomic_load_explicit(&x->reclaimed, memory_order_relaxed);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Drain                                                               */
/* ------------------------------------------------------------------ */

/* OUR OWN PLACE: is p's word still the one its join published?  Not if
 * another process took ours for dead and reclaimed it, or a peer
 * rewrote it, or another place has joined the index since. */
static inline bool own_ok(nemo_xproc_place *p, memory_order mo)
{
	return atomic_load_explicit(&place_at(p->x, p->idx)->word, mo) == pw_make(p->gen, p->x->me, P_LIVE);
}

/* What a call on a place that is no longer ours returns. */
static int own_lost(nemo_xproc_place *p, const char *fn)
{
	uint32_t w = atomic_load_explicit(&place_at(p->x, p->idx)->word, memory_order_relaxed);
	return nemo__fail(EOWNERDEAD, fn, "place %#x is no longer this process's (pid %u): %s (its word is "
			  "%#x); detach, then attach and join again", p->id, p->x->pid,
			  pw_state(w) == P_DEAD && pw_gen(w) == p->gen
				  ? "another process took this one for dead and reclaimed it"
				  : "another place holds its index now, or the segment was rewritten", w);
}

/* The generation of sender index s as a receiver should expect it now
 * (0: no live sender there); resets our position on a change. */
static uint32_t sender_gen(nemo_xproc_place *p, uint32_t s, memory_order mo)
{
	uint32_t w = atomic_load_explicit(&place_at(p->x, s)->word, mo);
	uint32_t st = pw_state(w), g = pw_gen(w);
	if (st == P_CLAIM)
		return 0;                 /* rings being reset: look next time */
	if (g != p->sgen[s]) {
		p->sgen[s] = g;
		p->cons[s] = 0;
	}
	return g;
}

/* Is anything queued to p?  mo: the seq loads' order (seq_cst in W3). */
static bool pending(nemo_xproc_place *p, memory_order mo)
{
	nemo_xproc *x = p->x;
	uint32_t mask = x->nslots - 1;
	for (uint32_t s = 0; s < x->nplaces; s++) {
		if (!sender_gen(p, s, mo))
			continue;
		struct seg_slot *sl = ring_at(x, s, p->idx) + (p->cons[s] & mask);
		if (atomic_load_explicit(&sl->seq, mo) == p->cons[s] + 1)
			return true;
	}
	return false;
}

static void deliver(nemo_xproc_place *p, const nemo_xproc_msg *m, uint32_t kind)
{
	nemo_xproc *x = p->x;
	p->depth++;
	if (kind == K_NOTIFY) {
		if (p->nfn)
			p->nfn(p->nctx, p, m->src, m->code);
		else if (p->pnfn)
			p->pnfn(p->pnctx, public_id(x, m->src), m->code);
		else
			atomic_fetch_add_explicit(&x->unhandled, 1, memory_order_relaxed);
	} else {
		/* m->code < nnames: validated. */
		const struct handler *hp = atomic_load_explicit(&x->handlers[m->code], memory_order_acquire);
		/* Its three fields, not retired_next: that one is written when
		 * a newer registration retires the record. */
		struct handler h = { 0 };
		if (hp)
			h = (struct handler){ .fn = hp->fn, .afn = hp->afn, .ctx = hp->ctx };
		if (h.fn) {
			h.fn(h.ctx, p, m);
		} else if (h.afn) {
			nemo_am_msg am = {
				.src = public_id(x, m->src), .dest = public_id(x, m->dst), .action = m->code,
				.event = NEMO_AM_NO_EVENT, .arg = m->arg, .payload = m->len ? m->payload : NULL,
				.len = m->len, .context = p->in_wait ? NEMO_AM_CTX_WAIT : NEMO_AM_CTX_POLL,
				.tag = m->tag, .is_reply = m->is_reply, .place_ctx = NULL,
			};
			h.afn(&am, h.ctx);
		} else {
			atomic_fetch_add_explicit(&x->unhandled, 1, memory_order_relaxed);
		}
	}
	p->depth--;
}

/* Take what ring (s -> p) holds, at most one lap. */
static void drain_ring(nemo_xproc_place *p, uint32_t s, uint32_t sgen)
{
	nemo_xproc *x = p->x;
	uint32_t mask = x->nslots - 1;
	struct seg_slot *ring = ring_at(x, s, p->idx);
	for (uint32_t n = 0; n < x->nslots; n++) {
		uint32_t c = p->cons[s];
		struct seg_slot *sl = ring + (c & mask);
		if (atomic_load_explicit(&sl->seq, memory_order_acquire) != c + 1)
			return;
		/* Is the slot still sgen's?  A handler run below, or a
		 * preemption, may have let the sender's index leave and be
		 * joined again: the join reset the ring, and the new sender
		 * writes from position 0, so a slot valid at c is the new
		 * generation's.  Its seq store follows the joiner's LIVE
		 * store (release), and our acquire load of seq read it, so this
		 * load sees the new generation: leave the slot to the next
		 * drain, which resets cons (sender_gen). */
		uint32_t sw = atomic_load_explicit(&place_at(x, s)->word, memory_order_acquire);
		if (pw_gen(sw) != sgen || pw_state(sw) == P_CLAIM)
			return;
		/* Is our index still ours (OUR OWN PLACE)?  The same argument:
		 * if another place joined it, its claim precedes the seq we
		 * read, and we must not take its messages. */
		if (!own_ok(p, memory_order_acquire))
			return;
		nemo_xproc_msg m;
		m.src = atomic_load_explicit(&sl->src, memory_order_relaxed);
		m.dst = atomic_load_explicit(&sl->dst, memory_order_relaxed);
		m.code = atomic_load_explicit(&sl->code, memory_order_relaxed);
		m.arg = atomic_load_explicit(&sl->arg, memory_order_relaxed);
		uint32_t kl = atomic_load_explicit(&sl->kindlen, memory_order_relaxed);
		uint32_t kind = kl >> 16;
		m.len = kl & 0xFFFFu;
		for (unsigned j = 0; j < NEMO_XPROC_PAYLOAD_MAX / 4; j++) {
			uint32_t v = atomic_load_explicit(&sl->payload[j], memory_order_relaxed);
			memcpy(m.payload + 4 * j, &v, 4);
		}
		/* The slot is ours to free now: the copy is private.  Then the
		 * sender, if it waits for room, is kicked before any handler
		 * runs (THE WAIT FOR ROOM). */
		atomic_store_explicit(&sl->seq, c + x->nslots, memory_order_seq_cst);         /* C1 */
		p->cons[s] = c + 1;
		if (atomic_load_explicit(&place_at(x, p->idx)->room, memory_order_seq_cst) >> s & 1u)  /* C2 */
			nemo__xp_kick_place(x, s);                                          /* S2-S3 */
		/* THE VALIDATION RULE, on the private copy. */
		bool ok = m.src == id_make(s, sgen) && m.dst == p->id && m.len <= NEMO_XPROC_PAYLOAD_MAX &&
			  ((kind == K_AM && m.code < x->nnames) ||
			   (kind == K_NOTIFY && m.len == 0 && m.code <= NEMO_NOTIFY_CHAN_MAX) ||
			   (kind == K_REPLY && m.code < x->nnames && m.len >= TAG_LEN));
		m.tag = 0;
		m.is_reply = kind == K_REPLY;
		if (ok && m.is_reply) {   /* the tag, then the payload: as a reply's handler sees it */
			memcpy(&m.tag, m.payload, TAG_LEN);
			m.len -= TAG_LEN;
			memmove(m.payload, m.payload + TAG_LEN, m.len);
			kind = K_AM;
		}
		if (!ok) {
			p->rejected++;
			atomic_fetch_add_explicit(&x->rejected, 1, memory_order_relaxed);
			continue;
		}
		atomic_fetch_add_explicit(&x->received, 1, memory_order_relaxed);
		p->handled++;
		deliver(p, &m, kind);
		if (!p->joined)
			return;
	}
}

static void drain(nemo_xproc_place *p)
{
	if (!own_ok(p, memory_order_relaxed))
		return;
	for (uint32_t s = 0; s < p->x->nplaces; s++) {
		uint32_t g = sender_gen(p, s, memory_order_acquire);
		if (g)
			drain_ring(p, s, g);
	}
}

static bool death_news(nemo_xproc_place *p)
{
	return atomic_load_explicit(&hdr(p->x)->deaths, memory_order_seq_cst) != p->deaths_seen;
}

int nemo_xproc_poll(nemo_xproc_place *p, unsigned *handled)
{
	if (handled)
		*handled = 0;
	if (!p || !p->joined)
		return NEMO__FAIL(EINVAL, "place is NULL or not joined");
	if (inherited(p->x))
		return NEMO__XP_INHERITED();
	if (!own_ok(p, memory_order_relaxed))
		return own_lost(p, __func__);
	unsigned h0 = p->handled, r0 = p->rejected;
	drain(p);
	if (handled)
		*handled = p->handled - h0;
	if (death_news(p)) {
		p->deaths_seen = atomic_load_explicit(&hdr(p->x)->deaths, memory_order_relaxed);
		return EOWNERDEAD;
	}
	if (p->rejected != r0 && p->handled == h0)
		return EBADMSG;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Wait (W1-W5 above, through the one wait loop)                        */
/* ------------------------------------------------------------------ */

static bool xp_try_take(void *arg)
{
	nemo_xproc_place *p = arg;
	unsigned h0 = p->handled, r0 = p->rejected;
	drain(p);
	return p->handled != h0 || p->rejected != r0 || death_news(p) || !own_ok(p, memory_order_relaxed);
}

static bool xp_sleep_begin(void *arg, uint32_t **word, uint32_t *val, uint32_t *bits)
{
	nemo_xproc_place *p = arg;
	_Atomic uint32_t *ws = &place_at(p->x, p->idx)->wstate;
	atomic_exchange_explicit(ws, NEMO_WAITER_SLEEPING, memory_order_seq_cst);          /* W2 */
	*word = (uint32_t *)ws;
	*bits = 0;
	if (pending(p, memory_order_seq_cst) || death_news(p) || !own_ok(p, memory_order_seq_cst)) {   /* W3 */
		atomic_store_explicit(ws, NEMO_WAITER_RUNNING, memory_order_relaxed);
		*val = NEMO_WAITER_SLEEPING;   /* the word is RUNNING: futex_wait returns at once */
		return false;
	}
	*val = NEMO_WAITER_SLEEPING;                                                        /* W4 */
	return false;
}

static void xp_sleep_end(void *arg)
{
	nemo_xproc_place *p = arg;
	atomic_store_explicit(&place_at(p->x, p->idx)->wstate, NEMO_WAITER_RUNNING,
			      memory_order_relaxed);                                       /* W5 */
}

static const nemo__wait_ops xp_ops = {
	.try_take = xp_try_take,
	.sleep_begin = xp_sleep_begin,
	.sleep_end = xp_sleep_end,
	.futex_flags = NEMO_FUTEX_SHARED,
};

int nemo_xproc_wait(nemo_xproc_place *p, const struct timespec *abstime, unsigned *handled)
{
	if (handled)
		*handled = 0;
	if (!p || !p->joined)
		return NEMO__FAIL(EINVAL, "place is NULL or not joined");
	if (inherited(p->x))
		return NEMO__XP_INHERITED();
	int rc = nemo__check_deadline("nemo_xproc_wait", CLOCK_MONOTONIC, abstime);
	if (rc)
		return rc;
	nemo_xproc *x = p->x;
	uint64_t end = xp_deadline_ns(abstime);
	unsigned h0 = p->handled, r0 = p->rejected;
	bool was = p->in_wait;
	p->in_wait = true;
	for (;;) {
		drain(p);
		if (!own_ok(p, memory_order_relaxed)) {
			rc = own_lost(p, "nemo_xproc_wait");
			break;
		}
		if (death_news(p)) {
			p->deaths_seen = atomic_load_explicit(&hdr(x)->deaths, memory_order_relaxed);
			rc = EOWNERDEAD;
			break;
		}
		if (p->handled != h0) {
			rc = 0;
			break;
		}
		if (p->rejected != r0) {
			rc = EBADMSG;
			break;
		}
		uint64_t now = nemo__xp_now_ns();
		if (now >= end) {
			rc = ETIMEDOUT;
			break;
		}
		uint64_t slice = end - now > SLICE_NS ? now + SLICE_NS : end;
		struct timespec ts;
		ns_to_ts(slice, &ts);
		atomic_store_explicit(&place_at(x, p->idx)->wstate, NEMO_WAITER_POLLING,
				      memory_order_relaxed);                               /* W1 */
		rc = nemo__wait_loop(&xp_ops, p, &p->policy, CLOCK_MONOTONIC, &ts, 0);
		atomic_store_explicit(&place_at(x, p->idx)->wstate, NEMO_WAITER_RUNNING,
				      memory_order_seq_cst);
		if (rc == ETIMEDOUT)
			nemo_xproc_check(x);   /* a slice passed with nothing: are the peers alive? */
		else if (rc && rc != ETIMEDOUT)
			break;
	}
	p->in_wait = was;
	if (handled)
		*handled = p->handled - h0;
	return rc;
}

/* ------------------------------------------------------------------ */
/* Send (S1-S3)                                                        */
/* ------------------------------------------------------------------ */

/* Is dst a live place we may write to?  0, ESRCH, EOWNERDEAD, EBADMSG. */
static int dest_state(nemo_xproc *x, nemo_xproc_id dst, uint32_t *owner)
{
	uint32_t i = id_idx(dst);
	uint32_t w = atomic_load_explicit(&place_at(x, i)->word, memory_order_acquire);
	if (pw_gen(w) != id_gen(dst))
		return ESRCH;
	if (pw_state(w) == P_DEAD)
		return EOWNERDEAD;
	if (pw_state(w) != P_LIVE)
		return ESRCH;
	*owner = pw_owner(w);
	return *owner < x->nprocs ? 0 : EBADMSG;
}

/* The producer's slot at *pos, past any slot already consumed there
 * (seq == pos + R): a stale send of ours that raced a leave and a rejoin
 * wrote it (JOIN AND LEAVE, above); in a sound ring the consumer never
 * passes the producer.  At most one lap per send (*skipped). */
static struct seg_slot *skip_stale(nemo_xproc *x, struct seg_slot *ring, uint32_t *pos, uint32_t *skipped)
{
	struct seg_slot *sl = ring + (*pos & (x->nslots - 1));
	while (atomic_load_explicit(&sl->seq, memory_order_acquire) == *pos + x->nslots && *skipped < x->nslots) {
		++*pos;
		++*skipped;
		sl = ring + (*pos & (x->nslots - 1));
	}
	return sl;
}

/* A notification's channel: 0, or ERANGE with the text for fn. */
static int check_chan(uint32_t chan, const char *fn)
{
	return chan > NEMO_NOTIFY_CHAN_MAX
		       ? nemo__fail(ERANGE, fn, "channel %u is above %u (NEMO_NOTIFY_CHAN_MAX)", chan,
				    NEMO_NOTIFY_CHAN_MAX)
		       : 0;
}

/* ------------------------------------------------------------------ */
/* The wait for room (R1-R3 above, through the one wait loop)          */
/* ------------------------------------------------------------------ */

/* A send waiting for room in ring (p -> d): where it stands. */
struct room {
	nemo_xproc_place *p;
	nemo_xproc_id dst;
	uint32_t d, owner, dword;         /* dst's index, owner and place word (LIVE) */
	uint32_t pos, skipped, deaths;
	struct seg_slot *ring, *sl;
	int rc;                           /* why the wait ended without room (0: room) */
};

/* Is the slot at our position free?  (Past stale slots: skip_stale.) */
static bool room_free(struct room *r, memory_order mo)
{
	r->sl = skip_stale(r->p->x, r->ring, &r->pos, &r->skipped);
	return atomic_load_explicit(&r->sl->seq, mo) == r->pos;
}

static bool room_try(void *arg)
{
	struct room *r = arg;
	nemo_xproc_place *p = r->p;
	nemo_xproc *x = p->x;
	if (room_free(r, memory_order_acquire))
		return true;
	/* Serve our own queues.  The handlers drain runs may send to d too
	 * (they do not wait): they go on from our position, and we from
	 * theirs, or we would wait at a slot they filled. */
	p->prod[r->d] = r->pos;
	drain(p);
	if (p->dgen[r->d] == id_gen(r->dst) && p->prod[r->d] != r->pos) {
		r->pos = p->prod[r->d];
		r->skipped = 0;
	}
	r->deaths = atomic_load_explicit(&hdr(x)->deaths, memory_order_relaxed);
	if (!own_ok(p, memory_order_relaxed))
		r->rc = own_lost(p, "send");
	else if (!(r->rc = dest_state(x, r->dst, &r->owner)))
		r->dword = pw_make(id_gen(r->dst), r->owner, P_LIVE);
	return r->rc || room_free(r, memory_order_acquire);
}

static bool room_sleep_begin(void *arg, uint32_t **word, uint32_t *val, uint32_t *bits)
{
	struct room *r = arg;
	nemo_xproc *x = r->p->x;
	_Atomic uint32_t *ws = &place_at(x, r->p->idx)->wstate;
	atomic_exchange_explicit(ws, NEMO_WAITER_SLEEPING, memory_order_seq_cst);          /* W2 */
	*word = (uint32_t *)ws;
	*bits = 0;
	*val = NEMO_WAITER_SLEEPING;
	if (room_free(r, memory_order_seq_cst) || pending(r->p, memory_order_seq_cst) ||  /* W3 */
	    atomic_load_explicit(&hdr(x)->deaths, memory_order_seq_cst) != r->deaths ||
	    atomic_load_explicit(&place_at(x, r->d)->word, memory_order_seq_cst) != r->dword ||
	    !own_ok(r->p, memory_order_seq_cst))
		atomic_store_explicit(ws, NEMO_WAITER_RUNNING, memory_order_relaxed);   /* futex_wait returns at once */
	return false;
}

static void room_sleep_end(void *arg)
{
	struct room *r = arg;
	atomic_store_explicit(&place_at(r->p->x, r->p->idx)->wstate, NEMO_WAITER_RUNNING,
			      memory_order_relaxed);                                       /* W5 */
}

static const nemo__wait_ops room_ops = {
	.try_take = room_try,
	.sleep_begin = room_sleep_begin,
	.sleep_end = room_sleep_end,
	.futex_flags = NEMO_FUTEX_SHARED,
};

/* Wait until the slot at r->pos is free (0), the deadline end (ns)
 * passes (ETIMEDOUT), or the send cannot go on (r->rc's code, or
 * EOWNERDEAD: the receiver's process was found dead). */
static int room_wait(struct room *r, uint64_t end)
{
	nemo_xproc_place *p = r->p;
	nemo_xproc *x = p->x;
	_Atomic uint64_t *want = &place_at(x, r->d)->room;
	_Atomic uint32_t *ws = &place_at(x, p->idx)->wstate;
	uint64_t bit = 1ull << p->idx;
	static const nemo_wait_policy block = { .kind = NEMO_WAIT_BLOCK };
	const nemo_wait_policy *pol = &p->policy;
	r->dword = pw_make(id_gen(r->dst), r->owner, P_LIVE);
	r->deaths = atomic_load_explicit(&hdr(x)->deaths, memory_order_relaxed);
	atomic_fetch_or_explicit(want, bit, memory_order_seq_cst);                        /* R1 */
	int rc;
	for (;;) {
		uint64_t now = nemo__xp_now_ns();
		if (now >= end) {
			rc = ETIMEDOUT;
			break;
		}
		uint64_t slice = end - now > ROOM_SLICE_NS ? now + ROOM_SLICE_NS : end;
		struct timespec ts;
		ns_to_ts(slice, &ts);
		r->rc = 0;
		atomic_store_explicit(ws, NEMO_WAITER_POLLING, memory_order_relaxed);           /* W1 */
		rc = nemo__wait_loop(&room_ops, r, pol, CLOCK_MONOTONIC, &ts, 0);
		atomic_store_explicit(ws, NEMO_WAITER_RUNNING, memory_order_seq_cst);
		pol = &block;   /* the place's poll budget once: later slices sleep at once */
		if (rc == 0) {
			rc = r->rc;
			break;
		}
		if (rc != ETIMEDOUT)
			break;
		if (nemo__xp_check_proc(x, r->owner)) {   /* a slice passed: is the receiver alive? */
			rc = EOWNERDEAD;
			break;
		}
	}
	atomic_fetch_and_explicit(want, ~bit, memory_order_relaxed);                      /* R3 */
	return rc;
}

/* The send of one slot to dst, waiting for room until end (ns; UINT64_MAX:
 * none) unless flags say NONBLOCK. */
static int send_slot(nemo_xproc_place *p, nemo_xproc_id dst, uint32_t kind, uint32_t code, uint64_t arg,
		     const void *payload, size_t len, unsigned flags, bool kick, uint64_t end)
{
	nemo_xproc *x = p->x;
	uint32_t d = id_idx(dst), owner = 0;
	if (__builtin_expect(inherited(x), 0))
		return NEMO__XP_INHERITED();
	if (d >= x->nplaces || !id_ok(dst))
		return NEMO__FAIL(ESRCH, "place id %#x is not a place of this domain", dst);
	if (!own_ok(p, memory_order_acquire))
		return own_lost(p, "send");
	int rc = dest_state(x, dst, &owner);
	if (rc)
		return rc;
	if (p->dgen[d] != id_gen(dst)) {
		p->dgen[d] = id_gen(dst);
		p->prod[d] = 0;
	}
	struct seg_slot *ring = ring_at(x, p->idx, d);
	uint32_t pos = p->prod[d], skipped = 0;
	struct seg_slot *sl = skip_stale(x, ring, &pos, &skipped);
	if (atomic_load_explicit(&sl->seq, memory_order_acquire) != pos) {
		/* Full: wait for room (or fail), serving our own queues. */
		if ((flags & NEMO_XPROC_NONBLOCK) || p->depth) {
			p->prod[d] = pos;
			return EAGAIN;
		}
		struct room r = { .p = p, .dst = dst, .d = d, .owner = owner, .pos = pos, .skipped = skipped,
				  .ring = ring, .sl = sl };
		rc = room_wait(&r, end);
		if (p->dgen[d] == id_gen(dst))
			p->prod[d] = r.pos;
		if (rc)
			return rc;
		pos = r.pos;
		sl = r.sl;
	}
	atomic_store_explicit(&sl->src, p->id, memory_order_relaxed);
	atomic_store_explicit(&sl->dst, dst, memory_order_relaxed);
	atomic_store_explicit(&sl->code, code, memory_order_relaxed);
	atomic_store_explicit(&sl->arg, arg, memory_order_relaxed);
	atomic_store_explicit(&sl->kindlen, kind << 16 | (uint32_t)len, memory_order_relaxed);
	unsigned char buf[NEMO_XPROC_PAYLOAD_MAX] = {0};
	if (len)
		memcpy(buf, payload, len);
	for (unsigned j = 0; j < (len + 3) / 4; j++) {
		uint32_t v;
		memcpy(&v, buf + 4 * j, 4);
		atomic_store_explicit(&sl->payload[j], v, memory_order_relaxed);
	}
	atomic_store_explicit(&sl->seq, pos + 1, memory_order_seq_cst);                   /* S1 */
	p->prod[d] = pos + 1;
	atomic_fetch_add_explicit(&x->sent, 1, memory_order_relaxed);
	if (kick)
		nemo__xp_kick_place(x, d);                                                          /* S2-S3 */
	return 0;
}

int nemo_xproc_send(nemo_xproc_place *p, nemo_xproc_id dst, uint32_t code, uint64_t arg,
		    const void *payload, size_t len, unsigned flags)
{
	if (!p || !p->joined)
		return NEMO__FAIL(EINVAL, "place is NULL or not joined");
	if (flags & ~(unsigned)NEMO_XPROC_NONBLOCK)
		return NEMO__FAIL(EINVAL, "unknown flags %#x", flags);
	if (len > NEMO_XPROC_PAYLOAD_MAX)
		return NEMO__FAIL(EMSGSIZE, "payload of %zu bytes (at most %u)", len, NEMO_XPROC_PAYLOAD_MAX);
	if (len && !payload)
		return NEMO__FAIL(EINVAL, "payload is NULL with len %zu", len);
	if (code >= p->x->nnames)
		return NEMO__FAIL(EINVAL, "code %u is not a name of this domain (%u names)", code, p->x->nnames);
	return send_slot(p, dst, K_AM, code, arg, payload, len, flags, true, UINT64_MAX);
}

int nemo_xproc_notify(nemo_xproc_place *p, nemo_xproc_id dst, uint32_t chan, unsigned flags)
{
	if (!p || !p->joined)
		return NEMO__FAIL(EINVAL, "place is NULL or not joined");
	if (flags & ~(unsigned)NEMO_XPROC_NONBLOCK)
		return NEMO__FAIL(EINVAL, "unknown flags %#x", flags);
	int rc = check_chan(chan, __func__);
	return rc ? rc : send_slot(p, dst, K_NOTIFY, chan, 0, NULL, 0, flags, true, UINT64_MAX);
}

/* ------------------------------------------------------------------ */
/* Broadcast: queue to every destination, then kick the sleepers        */
/* ------------------------------------------------------------------ */

static int check_am_args(const nemo_xproc *x, uint32_t code, const void *payload, size_t len, size_t max,
			 const char *fn)
{
	if (len > max)
		return nemo__fail(EMSGSIZE, fn, "payload of %zu bytes (at most %zu across processes)", len, max);
	if (len && !payload)
		return nemo__fail(EINVAL, fn, "payload is NULL with len %zu", len);
	if (code >= x->nnames)
		return nemo__fail(EINVAL, fn, "code %u is not a name of this shared domain (%u names; "
				  "events are not mapped across processes)", code, x->nnames);
	return 0;
}

/* To dsts[0..n-1] (every live place but p's when dsts is NULL). */
static int broadcast(nemo_xproc_place *p, const nemo_xproc_id *dsts, size_t n, uint32_t code, uint64_t arg,
		     const void *payload, size_t len, unsigned flags, size_t *sent)
{
	nemo_xproc *x = p->x;
	nemo_xproc_id all[NEMO_XPROC_PLACES_MAX];
	if (!dsts) {
		n = 0;
		for (uint32_t i = 0; i < x->nplaces; i++) {
			uint32_t w = atomic_load_explicit(&place_at(x, i)->word, memory_order_acquire);
			if (i != p->idx && pw_state(w) == P_LIVE)
				all[n++] = id_make(i, pw_gen(w));
		}
		dsts = all;
	}
	uint64_t queued = 0;                  /* by index: nplaces <= 64 */
	int first = 0;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		int e = send_slot(p, dsts[i], K_AM, code, arg, payload, len, flags, false, UINT64_MAX);
		if (e) {
			if (!first)
				first = e;
			continue;
		}
		queued |= 1ull << id_idx(dsts[i]);   /* < nplaces: send_slot checked it */
		k++;
	}
	/* One look at each receiver's wstate, after every slot is out: the
	 * receivers that sleep are woken as close together as FUTEX_WAKEs
	 * one after the other allow (a place's futex is its own word). */
	for (uint32_t i = 0; i < x->nplaces; i++)
		if (queued >> i & 1u)
			nemo__xp_kick_place(x, i);                                              /* S2-S3 */
	if (sent)
		*sent = k;
	return first ? nemo__fail(first, "nemo_xproc_broadcast", "sent to %zu of %zu places", k, n) : 0;
}

int nemo_xproc_broadcast(nemo_xproc_place *p, const nemo_xproc_id *set, size_t n, uint32_t code, uint64_t arg,
			 const void *payload, size_t len, unsigned flags, size_t *sent)
{
	if (sent)
		*sent = 0;
	if (!p || !p->joined)
		return NEMO__FAIL(EINVAL, "place is NULL or not joined");
	if (flags & ~(unsigned)NEMO_XPROC_NONBLOCK)
		return NEMO__FAIL(EINVAL, "unknown flags %#x", flags);
	if (!set && n)
		return NEMO__FAIL(EINVAL, "set is NULL with n %zu", n);
	if (n > NEMO_XPROC_PLACES_MAX)
		return NEMO__FAIL(EINVAL, "n %zu: a set has at most %u places", n, NEMO_XPROC_PLACES_MAX);
	int rc = check_am_args(p->x, code, payload, len, NEMO_XPROC_PAYLOAD_MAX, __func__);
	return rc ? rc : broadcast(p, set, n, code, arg, payload, len, flags, sent);
}

/* ------------------------------------------------------------------ */
/* The public calls (nemo/am.h, nemo/notify.h) on public ids            */
/* ------------------------------------------------------------------ */

nemo_place_id nemo_xproc_place_id(const nemo_xproc *x, nemo_xproc_id id)
{
	return x && id_ok(id) ? public_id(x, id) : NEMO_PLACE_NONE;
}

nemo_xproc_id nemo_xproc_id_of(nemo_place_id id)
{
	return public_is_xproc(id) ? (nemo_xproc_id)id : 0;
}

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
		rc = check_am_args(p->x, code, payload, len, NEMO_XPROC_PAYLOAD_MAX - (tag ? TAG_LEN : 0), fn);
	if (rc)
		return rc;
	if (!tag)
		return send_slot(p, (nemo_xproc_id)dest, K_AM, code, arg, payload, len, xf, true, end);
	unsigned char buf[NEMO_XPROC_PAYLOAD_MAX];
	memcpy(buf, tag, TAG_LEN);
	if (len)
		memcpy(buf + TAG_LEN, payload, len);
	return send_slot(p, (nemo_xproc_id)dest, K_REPLY, code, arg, buf, len + TAG_LEN, xf, true, end);
}

static int xp_notify(nemo_place_id dest, uint32_t chan, unsigned flags, const struct timespec *abstime)
{
	nemo_xproc_place *p = NULL;
	unsigned xf = 0;
	int rc = begin_send(dest, flags, &p, &xf, "nemo_notify");
	if (!rc)
		rc = check_chan(chan, "nemo_notify");
	return rc ? rc : send_slot(p, (nemo_xproc_id)dest, K_NOTIFY, chan, 0, NULL, 0, xf, true, xp_deadline_ns(abstime));
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
		rc = check_am_args(p->x, code, payload, len, NEMO_XPROC_PAYLOAD_MAX, "nemo_am_broadcast");
	if (rc)
		return rc;
	nemo_xproc_id ids[NEMO_XPROC_PLACES_MAX];
	for (size_t i = 0; i < n; i++) {
		if (public_handle(set[i]) != public_handle(set[0]))
			return nemo__fail(EINVAL, "nemo_am_broadcast", "set[%zu] = %#llx is of another shared domain "
					  "than set[0]", i, (unsigned long long)set[i]);
		ids[i] = (nemo_xproc_id)set[i];
	}
	return broadcast(p, ids, n, code, arg, payload, len, xf, sent);
}

/* A call about the thread's own place from a thread that is no place of
 * this process (remote.h): -1 when it holds none of ours either. */
static int xp_self(nemo__remote_self_op op, const nemo__remote_self_args *a)
{
	nemo_xproc_place *mine[XP_THREAD_PLACES], *last = NULL;
	unsigned n = 0;
	uint32_t best = 0;
	for (unsigned i = 0; i < XP_THREAD_PLACES; i++) {
		nemo_xproc_place *p = tls_resolve(&tls_places[i]);
		if (!p)
			continue;
		mine[n++] = p;
		if (!last || tls_places[i].order - best < 0x80000000u) {
			last = p;
			best = tls_places[i].order;
		}
	}
	if (!n)
		return -1;
	switch (op) {
	case NEMO__SELF_ID:
		*a->self_id = public_id(last->x, last->id);
		return 0;
	case NEMO__SELF_WAIT_FOR:
	case NEMO__SELF_FD:
		return nemo__fail(ENOTSUP, op == NEMO__SELF_FD ? "nemo_place_fd" : "nemo_place_wait_for",
				  "not offered for a shared domain's place yet (nemo_xproc_wait)");
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
		return nemo_xproc_wait(last, a->abstime, a->handled);
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
			rc = check_am_args(last->x, a->id, a->payload, a->len, NEMO_XPROC_PAYLOAD_MAX, "nemo_am_broadcast");
		return rc ? rc : broadcast(last, NULL, 0, a->id, a->arg, a->payload, a->len, xf, a->sent);
	}
	}
	return -1;
}

static const nemo__remote_ops xp_remote_ops = {
	.am = xp_am, .notify = xp_notify, .broadcast = xp_broadcast, .self = xp_self,
};
