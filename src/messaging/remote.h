/*
 * remote.h - the messaging layer's one hook for places of other
 * processes (src/messaging/remote.c).  Internal: not installed.
 *
 * A place id whose two top bits are 10 names a place reached through a
 * transport registered from above; bit 61 says which: 0 MPI ranks
 * (src/mpi/), 1 shared domains of other processes (src/xproc/).  Local
 * ids never have them: a local id's high 48 bits are a generation,
 * which would need 2^47 joins of one index; and NEMO_PLACE_NONE /
 * NEMO_PLACE_ALL have the top bits 11.
 *
 * The hook is downward-legal: this layer holds a pointer per transport
 * to a table of functions that the upper layer registers
 * (nemo__remote_register) and never includes an upper layer's header.
 * The public sends call nemo__remote_am / nemo__remote_notify /
 * nemo__remote_broadcast as their first line when the destination is
 * remote (am.c: nemo_am_sendv, nemo_am_reply, nemo_am_broadcast;
 * notify.c: nemo_notify).  A thread that is not a place of this process
 * may still hold a place of a transport's (a shared domain's place):
 * the calls about the caller's own place (nemo_poll, nemo_place_wait,
 * nemo_notify_set_handler, nemo_am_broadcast to everyone) ask the
 * transports, in their "not a place" branch, through nemo__remote_self;
 * the fast paths pay nothing for it.
 *
 * A place of this process whose domain a transport serves (a domain
 * bound to MPI) has its ordinary waits and polls drive that transport:
 * nemo_poll, nemo_place_wait and nemo_place_wait_for call
 * nemo__remote_drive while a transport with a drive op is registered
 * (nemo__remote_drivers, one relaxed load otherwise), so that no
 * transport needs calls of its own to receive (placewait.c, DRIVEN
 * WAITS).
 */
#ifndef NEMO_MESSAGING_REMOTE_H
#define NEMO_MESSAGING_REMOTE_H

#include <nemo/domain.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/** Is id a remote place's (top bits 10)? */
static inline bool nemo__id_is_remote(nemo_place_id id)
{
	return (id >> 62) == 2u;
}

/** The transports, by bit 61 of a remote id. */
enum { NEMO__REMOTE_MPI = 0, NEMO__REMOTE_XPROC = 1, NEMO__REMOTE_N = 2 };

/** A remote id's transport. */
static inline unsigned nemo__remote_transport(nemo_place_id id)
{
	return (unsigned)(id >> 61) & 1u;
}

/** What the calling thread asks about its own place (nemo__remote_self). */
typedef enum nemo__remote_self_op {
	NEMO__SELF_POLL,                 /* nemo_poll(handled) */
	NEMO__SELF_WAIT,                 /* nemo_place_wait(abstime, handled) */
	NEMO__SELF_NOTIFY_HANDLER,       /* nemo_notify_set_handler(fn, ctx) */
	NEMO__SELF_BROADCAST,            /* nemo_am_broadcast(NULL, 0, ...) */
	NEMO__SELF_WAIT_FOR,             /* nemo_place_wait_for(word, old, abstime, handled) */
	NEMO__SELF_ID,                   /* nemo_place_self(): *id := the place's public id */
	NEMO__SELF_FD,                   /* nemo_place_fd(fd) */
} nemo__remote_self_op;

/** The arguments of a self call (the fields its op names). */
typedef struct nemo__remote_self_args {
	const struct timespec *abstime;
	unsigned *handled;
	void (*nfn)(void *ctx, nemo_place_id src, uint32_t chan);
	void *ctx;
	uint32_t id;
	uint64_t arg;
	const void *payload;
	size_t len;
	unsigned flags;
	size_t *sent;
	const uint64_t *word;            /* NEMO__SELF_WAIT_FOR */
	uint64_t old;
	nemo_place_id *self_id;          /* NEMO__SELF_ID */
	int *fd;                         /* NEMO__SELF_FD */
} nemo__remote_self_args;

/** What a transport does for the public calls. */
typedef struct nemo__remote_ops {
	/** nemo_am_sendv to a remote dest (tag non-NULL: nemo_am_reply with
	 *  that tag).  abstime (CLOCK_MONOTONIC, validated by the caller;
	 *  NULL: none) bounds a wait for room: ETIMEDOUT once it passed.
	 *  Returns as nemo_am_sendv / nemo_am_send_timed. */
	int (*am)(nemo_place_id dest, uint32_t id, uint64_t arg, const void *payload, size_t len,
		  unsigned flags, const uint64_t *tag, const struct timespec *abstime);
	/** nemo_notify to a remote dest, with the same deadline.  Returns as
	 *  nemo_notify / nemo_notify_timed. */
	int (*notify)(nemo_place_id dest, uint32_t chan, unsigned flags, const struct timespec *abstime);
	/** nemo_am_broadcast to a set of this transport's ids (NULL: not
	 *  offered; the set is then sent to one by one). */
	int (*broadcast)(const nemo_place_id *set, size_t n, uint32_t id, uint64_t arg, const void *payload,
			 size_t len, unsigned flags, size_t *sent);
	/** A call about the calling thread's own place, made by a thread
	 *  that is no place of this process: returns -1 if the thread holds
	 *  no place of this transport's either, else the call's result
	 *  (NULL: the transport has no places of its own). */
	int (*self)(nemo__remote_self_op op, const nemo__remote_self_args *a);
	/** nemo_dead_places for this transport's places that the calling
	 *  thread's places talk to: add the ids of those whose process or
	 *  rank died (latest first) into ids[*n..cap), *n += how many were
	 *  stored, *total += how many died in all (NULL: none of its places
	 *  can die).  Returns 0 or an error. */
	int (*dead)(nemo_place_id *ids, size_t cap, size_t *n, uint64_t *total);
	/** The ordinary calls of place me (the calling thread's, of domain
	 *  d) drive the transport: one progress pass if this thread is the
	 *  one that receives for d (*handled += the handlers it ran at once
	 *  on me), and *slice_ns := how long a wait of me may sleep before
	 *  it calls again (0: as long as it likes: it is woken as for local
	 *  messages).  report (the public call that asks - a wait or a
	 *  poll -, named in the error's text; NULL where no one could be
	 *  told): return ECONNRESET, once per death, if a peer that me talks
	 *  to died since me was last told.
	 *  Returns -1 when d is not this transport's (nothing done), 0, or
	 *  the error (NULL: the transport needs no driving). */
	int (*drive)(nemo_domain *d, const char *report, unsigned *handled, uint64_t *slice_ns);
} nemo__remote_ops;

/** Register transport t's table (NULL: none).  Returns the previous one. */
const nemo__remote_ops *nemo__remote_register(unsigned t, const nemo__remote_ops *ops);

/** The hooks: forward to dest's transport, or ESRCH when none is registered. */
int nemo__remote_am(nemo_place_id dest, uint32_t id, uint64_t arg, const void *payload, size_t len,
		    unsigned flags, const uint64_t *tag, const struct timespec *abstime);
int nemo__remote_notify(nemo_place_id dest, uint32_t chan, unsigned flags, const struct timespec *abstime);
/** nemo_am_broadcast whose set starts with a remote id: every id must be
 *  of that transport (else EINVAL). */
int nemo__remote_broadcast(const nemo_place_id *set, size_t n, uint32_t id, uint64_t arg,
			   const void *payload, size_t len, unsigned flags, size_t *sent);
/** A self call by a thread that is no place of this process: the first
 *  transport that knows the thread answers; else ENOTCONN with the text
 *  of the calls that have no place ("the calling thread is not a place");
 *  fn NULL: ENOTCONN bare (a query that is no failure). */
int nemo__remote_self(nemo__remote_self_op op, const nemo__remote_self_args *a, const char *fn);

/** How many registered transports have a drive op (relaxed: a hint; a
 *  transport registers before the first call that needs it). */
extern _Atomic unsigned nemo__remote_drivers;

/** The ordinary calls' drive (remote.h's drive op) over every transport
 *  with one: -1 if none serves d, else 0 or the first error; *handled
 *  and *slice_ns as the op says (the shortest slice). */
int nemo__remote_drive(nemo_domain *d, const char *report, unsigned *handled, uint64_t *slice_ns);

/** nemo_dead_places over every transport (remote.c). */
int nemo__remote_dead(nemo_place_id *ids, size_t cap, size_t *n, uint64_t *total);

#endif /* NEMO_MESSAGING_REMOTE_H */
