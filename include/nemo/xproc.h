/*
 * nemo/xproc.h - domains shared between processes: places in different
 * processes notify each other and send active messages through rings in
 * a named shared-memory segment, sleep on shared futexes with the
 * published-state handshake, and survive a peer that dies (kill -9
 * included) or scribbles over the segment.
 *
 * A place is a place, wherever it lives.  nemo_xproc_place_id turns a
 * place's id into a nemo_place_id, and the ordinary calls take it:
 * nemo_am_send, nemo_am_sendv, nemo_am_reply, nemo_notify and
 * nemo_am_broadcast send to it, from the calling thread's place in that
 * shared domain; and a thread that holds a shared place (and no place of
 * this process's own domains) runs its handlers with nemo_poll,
 * nemo_place_wait and nemo_place_wait_for, gets an event-loop descriptor
 * with nemo_place_fd, its id with nemo_place_self, and the places that
 * died under it with nemo_dead_places.  The nemo_xproc_* calls below do
 * the same with explicit places, from any thread.  The contract, as it
 * holds for a shared place (docs/xproc.md has the table for every
 * transport):
 *
 *   replies    A send from a handler never waits: one that finds its ring
 *              full is kept by the sending place, in order, and delivered
 *              as room appears (its receiver kicks it), before any later
 *              send of that place to the same receiver; nemo_xproc_leave
 *              delivers what is kept first.  So a reply is never lost
 *              while its requester lives.  A kept send whose receiver
 *              left or died is dropped and counted (overflow_dropped),
 *              and logged under NEMO_DEBUG=1.  Bound: overflow_max
 *              entries per place (ENOBUFS past it).
 *   waiting    nemo_place_wait, nemo_place_wait_for, nemo_poll,
 *              nemo_place_fd and nemo_place_self work on a shared place.
 *   death      A send to a place whose process died fails with
 *              ECONNRESET (ESRCH: it left); a wait or poll of a place that
 *              talks to it - has sent to it, received from it - returns
 *              ECONNRESET once per such death, within about 100 ms (a
 *              sleeper's slice; a poll, a send or nemo_dead_places asks
 *              the peers' processes at most every 100 ms too) however
 *              far its deadline, and a death elsewhere does not disturb
 *              it; nemo_dead_places (nemo/domain.h) and nemo_xproc_dead
 *              list the dead.
 *   payload    NEMO_XPROC_PAYLOAD_MAX (48) bytes, a reply's too.
 *   actions    Integer ids 0..NEMO_XPROC_ACTIONS_MAX-1, the program's, as
 *              in-process (nemo_xproc_handle_id, nemo_xproc_handle_am_id;
 *              nemo_am_send(dest, id, ...)); names are a convenience: the
 *              segment's name table gives a name a code of its own range,
 *              NEMO_XPROC_NAMED_BASE + its slot, the same in every
 *              process, so a name never collides with an integer id.
 *
 * What a transport cannot do the same: a message whose action has no
 * handler in the receiving process is counted there (unhandled), not
 * refused at the sender (in-process: ENOENT); events are not mapped
 * (send an action id); NEMO_PUSH and NEMO_MORE change nothing (every
 * send is published at once and kicks a receiver that sleeps); a
 * nemo_place_id of a shared place is valid in the process that made it
 * (tell other processes the nemo_xproc_id: nemo_xproc_id_of).
 *
 * The model is the in-process one: a place is owned by one thread at a
 * time, it receives through one ring per sending place, handlers run on
 * the receiving place's thread inside its poll or wait, and a sender
 * kicks the receiver only when the receiver published SLEEPING.
 *
 * docs/xproc.md has the segment layout, the threat model (what a peer
 * with write access to the segment can and cannot do to you), the
 * protocols and an example (examples/xproc.c).
 *
 * Identity.  A place id (nemo_xproc_id) is the place's index in the
 * segment and a generation: a place that leaves, or whose process dies,
 * gets a new generation when its index is reused, so a late send to the
 * old id fails rather than reaching the new occupant.
 *
 * Errors: 0 or a positive errno code, as everywhere in nemo, with
 * nemo_last_error() saying why for refusals.  The ones specific to this
 * layer:
 *   ECONNRESET  the destination's process died (kill -9, crash): the place
 *               was reclaimed.  A wait or poll returns it once per death
 *               of a place its place talks to.
 *   EOWNERDEAD  the caller's own place was reclaimed: another process
 *               took the caller's process for dead (only a hostile peer
 *               can make that happen).  Such a place touches nothing any
 *               more: detach, attach and join again.
 *   ESRCH       the destination place left (or never existed).
 *   ENOBUFS     a handler's send found its ring full and its place's
 *               overflow at overflow_max: not queued.
 *   EPROTO      the segment is not a nemo segment of this version, or
 *               its header disagrees with its size.
 *   EBADMSG     a record read from the segment failed validation (a
 *               corrupt or hostile peer): the operation did nothing else.
 *   EACCES      attach: the segment's owner or group is not the one
 *               expected (a name squatted by another user).
 *   EUSERS      attach: every process slot is taken.
 *   ENOSPC      join / name: every place or name slot is taken.
 *   EMFILE      create / attach: this process has 64 shared domains
 *               attached.
 *   ERANGE      an action code that is neither an integer id nor a
 *               name's code; a channel above NEMO_NOTIFY_CHAN_MAX.
 *
 * Changes (segment version 3).  A peer's death was EOWNERDEAD, and every
 * wait of every process returned it once after any death; it is
 * ECONNRESET now, for the places that talk to the dead one only, and
 * EOWNERDEAD means only "your own place was reclaimed".  A handler's send
 * to a full ring was EAGAIN (a reply could be lost); it is kept now.  The
 * payload grew from 36 bytes (28 for a reply) to 48 for both, and a slot
 * from one cache line to two.  A name's code was its slot; it is
 * NEMO_XPROC_NAMED_BASE + its slot now (programs that took codes from
 * nemo_xproc_name are unchanged), and integer ids below
 * NEMO_XPROC_ACTIONS_MAX are accepted.  An action code out of both
 * ranges was EINVAL; it is ERANGE, as in-process.  Programs compile
 * unchanged; a process of this version refuses a segment of version 2
 * (EPROTO).
 */
#ifndef NEMO_XPROC_H
#define NEMO_XPROC_H

#include <nemo/am.h>
#include <nemo/notify.h>   /* NEMO_NOTIFY_CHAN_MAX */
#include <nemo/waiter.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A process's handle on a shared domain (opaque, private memory). */
typedef struct nemo_xproc nemo_xproc;
/** A place of the calling process in a shared domain (opaque). */
typedef struct nemo_xproc_place nemo_xproc_place;
/** A place's id: index in bits 0-7, generation in bits 8-31; never 0. */
typedef uint32_t nemo_xproc_id;

/** Largest payload of an active message and of a reply, bytes (a slot is
 *  two cache lines: the payload and a reply's 8-byte tag fit). */
#define NEMO_XPROC_PAYLOAD_MAX 48u
/** Integer action ids are 0..NEMO_XPROC_ACTIONS_MAX-1 (as nemo/am.h's). */
#define NEMO_XPROC_ACTIONS_MAX 4096u
/** A name's code is NEMO_XPROC_NAMED_BASE + its slot in the name table
 *  (nemo_xproc_name): a range of its own, above every integer id. */
#define NEMO_XPROC_NAMED_BASE 0x10000u
/** Longest name (places, actions), bytes, without the terminating NUL. */
#define NEMO_XPROC_NAME_MAX 23u
/** Most processes, places and names a segment can be created with. */
#define NEMO_XPROC_PROCS_MAX 64u
#define NEMO_XPROC_PLACES_MAX 64u
#define NEMO_XPROC_NAMES_MAX 256u

/** How a shared domain is created.  Zero fields take the defaults. */
typedef struct nemo_xproc_attr {
	unsigned mode;         /**< permission bits of the segment (0: 0600) */
	unsigned max_procs;    /**< process slots (0: 16; at most NEMO_XPROC_PROCS_MAX) */
	unsigned max_places;   /**< place slots (0: 16; at most NEMO_XPROC_PLACES_MAX) */
	unsigned ring_slots;   /**< slots per ring, a power of two 2..4096 (0: 64) */
	unsigned max_names;    /**< name slots (0: 64; at most NEMO_XPROC_NAMES_MAX) */
	unsigned overflow_max; /**< sends a place of this process's handle may keep
	                            (the contract's "replies"), 1..2^24 (0: 65536) */
} nemo_xproc_attr;

/** Whom an attacher trusts as the segment's creator. */
typedef struct nemo_xproc_attach_attr {
	uid_t uid;             /**< the owner the segment must have (use_ids) */
	gid_t gid;             /**< the group it must have when it grants group access */
	int use_ids;           /**< 0: the caller's effective uid and gid */
	unsigned overflow_max; /**< as nemo_xproc_attr's, for this handle (0: 65536) */
} nemo_xproc_attach_attr;

/** An active message as its handler sees it (a private copy, validated). */
typedef struct nemo_xproc_msg {
	nemo_xproc_id src;     /**< the sending place */
	nemo_xproc_id dst;     /**< the receiving place (the caller's) */
	uint32_t code;         /**< the action: an integer id, or a name's code */
	uint64_t arg;
	uint32_t len;          /**< payload bytes, <= NEMO_XPROC_PAYLOAD_MAX */
	unsigned char payload[NEMO_XPROC_PAYLOAD_MAX];
	uint64_t tag;          /**< a reply's tag (its request's arg), else 0 */
	bool is_reply;         /**< sent with nemo_am_reply */
} nemo_xproc_msg;

/** An action's handler; runs on the receiving place's thread. */
typedef void (*nemo_xproc_handler)(void *ctx, nemo_xproc_place *p, const nemo_xproc_msg *m);
/** A place's notification handler: chan has news from src. */
typedef void (*nemo_xproc_notify_handler)(void *ctx, nemo_xproc_place *p, nemo_xproc_id src, uint32_t chan);

/** Flags of nemo_xproc_send / nemo_xproc_notify. */
enum {
	NEMO_XPROC_NONBLOCK = 1u << 0,  /**< a full ring returns EAGAIN instead of waiting */
};

/** Counters of one process's handle (relaxed reads). */
typedef struct nemo_xproc_counters {
	uint64_t sent, received, kicks, unhandled;
	uint64_t rejected;     /**< slots that failed validation (corrupt or hostile) */
	uint64_t reclaimed;    /**< dead processes this process reclaimed */
	/** unread messages of a departed place that this process's joins
	 *  dropped by taking its index (a join takes an index whose messages
	 *  have all been read while there is one) */
	uint64_t dropped;
	uint64_t overflowed;       /**< handler sends kept because their ring was full */
	uint64_t overflow_dropped; /**< kept sends whose receiver left or died first */
	uint64_t send_failures;    /**< sends that failed because their receiver left or died
	                                (ESRCH, ECONNRESET): the caller was told */
	uint64_t deaths;           /**< deaths of places that this process's places talked to */
} nemo_xproc_counters;

/**
 * Create the shared domain `name` (a POSIX shm name without the slash:
 * [A-Za-z0-9._-], at most 200 bytes, not . or ..) and attach the calling
 * process.  The segment is built unnamed and appears under the name
 * complete, or not at all: of processes that "create, else attach" at
 * once, one creates and the others find a valid header; a creator that
 * dies midway leaves the name free.
 * @return 0; EEXIST if it exists (or another process published it
 *         first); EINVAL for a bad name or attr; the errors of
 *         open(O_TMPFILE) in /dev/shm, ftruncate, mmap, linkat.
 */
int nemo_xproc_create(const char *name, const nemo_xproc_attr *attr, nemo_xproc **out);

/**
 * Attach the calling process to the existing shared domain `name`.
 * The segment's owner must be attr's uid (default: the caller's
 * effective uid), and if its mode grants group access, its group attr's
 * gid; its header must match its size.  Dead processes found in the
 * process table are reclaimed first.
 * @return 0; ENOENT; EACCES; EPROTO; EUSERS; EINVAL.
 */
int nemo_xproc_attach(const char *name, const nemo_xproc_attach_attr *attr, nemo_xproc **out);

/**
 * Detach: leave every place of this handle that is still joined, free
 * the process slot, unmap.  The handle is freed.  Places must not be in
 * use by other threads - nor the domain's ids in public calls
 * (nemo_am_send, nemo_notify... on a nemo_xproc_place_id) running on
 * other threads: detach frees what those calls read - and no handler of
 * its places may be running (EBUSY, nothing done).  In a child of fork, detaching a handle inherited from
 * the parent frees the child's copy only: the parent's places and
 * process slot are untouched.
 * @return 0; EBUSY (called from a handler of one of its places); EINVAL
 *         for NULL.
 */
int nemo_xproc_detach(nemo_xproc *x);

/** Remove the name (the segment lives on while attached). @return 0, ENOENT, EINVAL. */
int nemo_xproc_unlink(const char *name);

/**
 * Join a place, owned by the calling process and used by one thread at a
 * time.  name (may be NULL) lets other processes find it.
 * @return 0; ENOSPC (no free place slot); EEXIST (a live place has this
 *         name, or another joined under it meanwhile); EBADMSG (the slot
 *         was changed by another process while joining); EINVAL;
 *         ENOTCONN (x was inherited across fork: attach in the child).
 */
int nemo_xproc_join(nemo_xproc *x, const char *name, nemo_xproc_place **out, nemo_xproc_id *id);

/** Leave a place and free it.  What its handlers kept (sends that found
 *  their ring full) is delivered first, waiting for room as a blocking
 *  send does and serving the place's queues meanwhile - so what the
 *  handlers run then keep is delivered too; kept sends to places that left
 *  or died are dropped (overflow_dropped).  Messages still queued to it
 *  then are dropped unhandled (in-process, nemo_place_leave handles them:
 *  docs/xproc.md), and a send blocked on its full ring fails with ESRCH.  Not from one of its own handlers.  @return 0, EINVAL, EBUSY
 *  (in a handler), ENOTCONN (a place inherited across fork: the
 *  parent's). */
int nemo_xproc_leave(nemo_xproc_place *p);

/** The place's id. */
nemo_xproc_id nemo_xproc_self(const nemo_xproc_place *p);

/**
 * Find a live place by name.
 * @return 0; ENOENT; EINVAL.
 */
int nemo_xproc_find(nemo_xproc *x, const char *name, nemo_xproc_id *id);

/**
 * The code of `name` in the segment's name table, entered if new:
 * NEMO_XPROC_NAMED_BASE + the name's slot.  A
 * name has one code in every process: a call that meets the name's slot
 * being entered by another process waits for it as long as that process
 * lives, and takes the slot over if it died.
 * @return 0; ENOSPC (table full); EINVAL (bad name); EBADMSG (the table
 *         is corrupt); EBUSY (the process entering the slot is alive and
 *         has not finished after 10 s - stopped, or a hostile peer:
 *         nothing entered, try again).
 */
int nemo_xproc_name(nemo_xproc *x, const char *name, uint32_t *code);

/**
 * Handle action `name` in this process (all its places) with fn (NULL:
 * stop handling it).  Enters the name if new.
 * @return 0; the errors of nemo_xproc_name.
 */
int nemo_xproc_handle(nemo_xproc *x, const char *name, nemo_xproc_handler fn, void *ctx);

/**
 * nemo_xproc_handle with a handler of nemo/am.h's type (the same handler
 * can serve in-process places): msg->src and msg->dest are public ids
 * (nemo_xproc_place_id), msg->action the name's code, msg->event
 * NEMO_AM_NO_EVENT, msg->context NEMO_AM_CTX_WAIT or NEMO_AM_CTX_POLL,
 * msg->place_ctx NULL.  Replaces the name's nemo_xproc_handle handler.
 * @return 0; the errors of nemo_xproc_name.
 */
int nemo_xproc_handle_am(nemo_xproc *x, const char *name, nemo_am_handler fn, void *ctx);

/**
 * Handle action `id` in this process (all its places) with fn (NULL: stop
 * handling it), replacing its earlier handler of either kind.  id is an
 * integer id, 0..NEMO_XPROC_ACTIONS_MAX-1, which every process of the
 * program agrees on as it does in-process; or a name's code (from
 * nemo_xproc_name), which is nemo_xproc_handle by code.
 * @return 0; ERANGE for an id that is neither (a code of a name slot not
 *         entered, or above NEMO_XPROC_ACTIONS_MAX and below
 *         NEMO_XPROC_NAMED_BASE); EINVAL for a NULL x.
 */
int nemo_xproc_handle_id(nemo_xproc *x, uint32_t id, nemo_xproc_handler fn, void *ctx);

/** nemo_xproc_handle_id with a handler of nemo/am.h's type (as
 *  nemo_xproc_handle_am): msg->action is the id.  @return as
 *  nemo_xproc_handle_id. */
int nemo_xproc_handle_am_id(nemo_xproc *x, uint32_t id, nemo_am_handler fn, void *ctx);

/**
 * The nemo_place_id of place id of x's shared domain, for nemo_am_send,
 * nemo_notify, nemo_am_broadcast...  It names x's handle, so it is valid
 * in this process while x is attached (send the nemo_xproc_id to other
 * processes).  NEMO_PLACE_NONE for a NULL x or an id without generation.
 */
nemo_place_id nemo_xproc_place_id(const nemo_xproc *x, nemo_xproc_id id);

/** The nemo_xproc_id inside a nemo_place_id of nemo_xproc_place_id (0 for
 *  any other id): the id to tell other processes. */
nemo_xproc_id nemo_xproc_id_of(nemo_place_id id);

/** Set (NULL: clear) the place's notification handler. @return 0, EINVAL. */
int nemo_xproc_set_notify(nemo_xproc_place *p, nemo_xproc_notify_handler fn, void *ctx);

/** The place's wait policy (default: the thread's). @return 0, EINVAL. */
int nemo_xproc_set_policy(nemo_xproc_place *p, const nemo_wait_policy *pol);

/**
 * Send an active message from place p to place dst.  Blocking (flags 0):
 * a full ring waits for room - polling by p's policy, then asleep on p's
 * shared futex until dst's owner takes a message - while serving p's
 * own incoming messages, and fails with ECONNRESET once dst's process is
 * found dead (within 10 ms), ESRCH if dst leaves.  It first waits, so
 * serving, while dst holds sends kept for p (they go first: the requester
 * of a busy server makes room for its replies).  From inside a handler a
 * full ring does not wait: the message is kept by p and delivered in
 * order as room appears (see the contract above).  For a deadline, send
 * to nemo_xproc_place_id(x, dst) with nemo_am_send_timed (nemo/am.h).
 * @param code an integer id (< NEMO_XPROC_ACTIONS_MAX) or a name's code
 * @return 0 once in dst's ring (or kept, from a handler); ECONNRESET (dst's
 *         process died); EOWNERDEAD (p was reclaimed: another process
 *         took ours for dead); ESRCH (also for an id that no place ever
 *         had); EAGAIN (NONBLOCK: a full ring, or sends kept for dst not
 *         yet delivered); ENOBUFS (a handler's send, p's overflow at
 *         overflow_max); EMSGSIZE (len > NEMO_XPROC_PAYLOAD_MAX); ERANGE
 *         (a code of neither range); EINVAL; ENOTCONN (p was inherited
 *         across fork: its sends would be the parent's).
 */
int nemo_xproc_send(nemo_xproc_place *p, nemo_xproc_id dst, uint32_t code, uint64_t arg,
		    const void *payload, size_t len, unsigned flags);

/** Notify place dst that channel chan (0..NEMO_NOTIFY_CHAN_MAX) has news.
 *  @return as nemo_xproc_send; ERANGE for chan > NEMO_NOTIFY_CHAN_MAX.
 *  A receiver rejects (EBADMSG, counted in rejected) a slot whose channel
 *  a peer wrote above it. */
int nemo_xproc_notify(nemo_xproc_place *p, nemo_xproc_id dst, uint32_t chan, unsigned flags);

/**
 * Send one active message to many places: to set[0..n-1], or, with set
 * NULL, to every live place of the shared domain but p (in every
 * process).  Every message is queued first, then each receiver that
 * sleeps is woken (one FUTEX_WAKE on its own shared word), so the
 * receivers start as close together as the kernel allows.
 * @param sent how many places it was queued to (may be NULL)
 * @return 0 if it reached them all; else the first error met (ESRCH,
 *         ECONNRESET, EAGAIN...), having still sent to every other
 *         destination; EINVAL for a NULL set with n > 0, n over
 *         NEMO_XPROC_PLACES_MAX or bad flags; ERANGE for a bad code;
 *         EMSGSIZE.
 */
int nemo_xproc_broadcast(nemo_xproc_place *p, const nemo_xproc_id *set, size_t n, uint32_t code, uint64_t arg,
			 const void *payload, size_t len, unsigned flags, size_t *sent);

/**
 * Run the handlers of every message queued to p, and deliver what p
 * keeps where there is room now, without waiting.
 * @param handled if not NULL, how many messages were handled
 * @return 0; ECONNRESET once per death of a place p talks to (found since
 *         the last report; handled may be > 0); EOWNERDEAD (p was
 *         reclaimed); EBADMSG if the only slots found failed validation
 *         (consumed, counted); EINVAL; ENOTCONN (p was inherited across
 *         fork).
 */
int nemo_xproc_poll(nemo_xproc_place *p, unsigned *handled);

/**
 * Wait until a message arrives at p (polling, then sleeping on the
 * place's shared futex, by p's policy), run the handlers of what is
 * queued, return; what p keeps is delivered meanwhile.  A sleeper wakes
 * at least every 100 ms to look for dead peers: a place that p talks to
 * - p has sent to it or received from it since it joined - and whose
 * process died ends the wait with ECONNRESET (once per death); the
 * death of a process p does not talk to does not end it.
 * @param abstime CLOCK_MONOTONIC deadline, or NULL
 * @return 0 after handling at least one message; ETIMEDOUT; ECONNRESET
 *         (handled may be > 0); EOWNERDEAD (p was reclaimed); EBADMSG if
 *         the only slots found failed validation; EINVAL; ENOTCONN (p was
 *         inherited across fork).
 */
int nemo_xproc_wait(nemo_xproc_place *p, const struct timespec *abstime, unsigned *handled);

/**
 * nemo_xproc_wait until *word != old (nemo_place_wait_for, nemo/domain.h):
 * the word is read with an acquire load at the start, after every drain
 * and before sleeping, and is changed by p's handlers.
 * @return 0 once *word != old; ETIMEDOUT; ECONNRESET, EOWNERDEAD, EBADMSG
 *         as nemo_xproc_wait (the word is looked at first); EINVAL (also
 *         a NULL word); ENOTCONN.
 */
int nemo_xproc_wait_for(nemo_xproc_place *p, const uint64_t *word, uint64_t old, const struct timespec *abstime,
			unsigned *handled);

/**
 * An eventfd that becomes readable when p has work (nemo_place_fd,
 * nemo/domain.h): from this call or p's nemo_xproc_poll until p's next
 * poll or wait, p counts as waiting on it.  Senders in other processes
 * cannot write this process's eventfd: a thread of p's, started at the
 * first call and ended by nemo_xproc_leave, sleeps on p's shared futex
 * word while p is armed and writes the eventfd when a sender (or a death,
 * or a receiver that made room for a kept send) kicks it; it also looks
 * for dead peers every 100 ms.  The descriptor is p's until it leaves.
 * @return 0 with *fd set; EINVAL; ENOTCONN (inherited across fork); the
 *         errors of eventfd(2) and pthread_create.
 */
int nemo_xproc_fd(nemo_xproc_place *p, int *fd);

/**
 * The places that died under p: those p talked to (sent to, received
 * from) whose process died, latest first, as nemo_dead_places (which
 * covers the calling thread's places of every transport).
 * @param ids  receives up to cap of their ids
 * @param n    receives how many were stored
 * @param total receives (if not NULL) how many deaths p has seen in all
 * @return 0; EINVAL.
 */
int nemo_xproc_dead(nemo_xproc_place *p, nemo_xproc_id *ids, size_t cap, size_t *n, uint64_t *total);

/**
 * Look for dead processes now (one pidfd poll per attached peer) and
 * reclaim those found.
 * @return 0; EINVAL.
 */
int nemo_xproc_check(nemo_xproc *x);

/**
 * Whether place id is live: 0; ESRCH (left or never existed);
 * ECONNRESET (its process died; checks the owner's pidfd).
 */
int nemo_xproc_place_check(nemo_xproc *x, nemo_xproc_id id);

/** This handle's counters. @return 0, EINVAL. */
int nemo_xproc_get_counters(nemo_xproc *x, nemo_xproc_counters *out);

#ifdef __cplusplus
}
#endif

#endif /* NEMO_XPROC_H */
