/*
 * nemo/mcast.h - acknowledged multicast to dynamic groups of places, over
 * static topologies (Flat, Tree, Diamond), with the SmAck, Help and Skip
 * mechanisms of Kuban, Rotta & Nolte, "Help Your Busy Neighbors: Dynamic
 * Multicasts over Static Topologies".
 *
 * A group is a set of places of one domain, changed at any time with
 * nemo_mcast_add / nemo_mcast_remove.  nemo_multicast runs a function
 * exactly once on every member, in the member's own place (in its
 * nemo_poll / nemo_place_wait, like an active message), and returns when
 * every member has finished it: the acknowledgment.  No interrupt and no
 * system call is needed where the members poll.
 *
 * How the message travels is the group's topology, built once over every
 * place index of the domain (static) or over the members only, rebuilt at
 * each change (dynamic):
 *   NEMO_MCAST_FLAT     the source sends to every member; the
 *                       acknowledgments are counted in one place;
 *   NEMO_MCAST_TREE     a balanced tree of `fanout` (default 2): each node
 *                       forwards to its children, then runs the function;
 *                       a counter beside it gathers its subtree;
 *   NEMO_MCAST_DIAMOND  diamond rings: a scatter node runs the function and
 *                       forwards, a gather node (a place too) waits for
 *                       its branches, runs the function and passes on.
 * and the mechanism, how a static topology serves a group that does not
 * fill it:
 *   NEMO_MCAST_SMACK    shared-memory acknowledgment: a gather node's
 *                       predecessors decrement its counter, and only the
 *                       last one sends it a message.  Every place of the
 *                       topology takes part (non-members forward without
 *                       running the function);
 *   NEMO_MCAST_HELP     SmAck, and nodes at non-member places are not
 *                       sent anything: the node before them does their part
 *                       (forwarding, gathering) itself;
 *   NEMO_MCAST_SKIP     Help, and a whole subgroup without a member is
 *                       skipped at once (member counts per subgroup, kept
 *                       up to date by every change).
 * docs/multicast.md has the node roles, the costs measured and the proofs.
 *
 * Exactly once: a place that is a member from the start of a multicast to
 * its end runs the function exactly once; a place that is not a member at
 * any time during it never runs it; a place whose membership changes
 * during it runs it at most once.  The multicast returns after every run.
 *
 * The members must poll (nemo_poll, nemo_place_wait, a progress thread,
 * interrupt mode: nemo/domain.h): a member that never looks at its queue
 * holds up every multicast it is in.
 */
#ifndef NEMO_MCAST_H
#define NEMO_MCAST_H

#include <nemo/domain.h>

#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A multicast group (opaque). */
typedef struct nemo_mcast_group nemo_mcast_group;
/** An asynchronous multicast in flight (opaque): nemo_mcast_test / _wait. */
typedef struct nemo_mcast nemo_mcast;

/** Topologies. */
typedef enum nemo_mcast_topology {
	NEMO_MCAST_TREE = 0,          /**< the default */
	NEMO_MCAST_FLAT = 1,
	NEMO_MCAST_DIAMOND = 2,
} nemo_mcast_topology;

/** Mechanisms. */
typedef enum nemo_mcast_mechanism {
	NEMO_MCAST_SKIP = 0,          /**< the default: Skip + Help + SmAck */
	NEMO_MCAST_SMACK = 1,
	NEMO_MCAST_HELP = 2,
} nemo_mcast_mechanism;

/** The largest fan-out of a tree or diamond. */
#define NEMO_MCAST_FANOUT_MAX 16u

/** Group parameters; zero fields take the defaults. */
typedef struct nemo_mcast_attr {
	nemo_mcast_topology topology; /**< NEMO_MCAST_TREE by default */
	nemo_mcast_mechanism mechanism; /**< NEMO_MCAST_SKIP by default */
	unsigned fanout;              /**< children of a tree or diamond node, 2..16 (0: 2) */
	bool dynamic;                 /**< the topology spans the members only, and is
	                                   rebuilt at every change (else it spans every
	                                   place index of the domain) */
	bool service;                 /**< deliver on service places: one per CPU of the
	                                   process, pinned, started with the group and
	                                   joined to its domain (which needs room for
	                                   them).  A member's function then runs on the
	                                   service place of its CPU (its pinned CPU, or,
	                                   unpinned, the CPU of the thread that added
	                                   itself), with self = the member: members need
	                                   not poll, and nothing interrupts them. */
	uint32_t action;              /**< the action id the group's messages use: one
	                                   the domain has no handler for (0: the highest
	                                   free one).  It stays taken after destroy. */
} nemo_mcast_attr;

/**
 * Create an empty group over domain d.
 * @param attr NULL for the defaults
 * @return 0 with *out set; EINVAL for NULL d or out, an unknown topology
 *         or mechanism, a fanout outside 2..16; EEXIST if attr->action
 *         has a handler already; ENOSPC if no action id is free, or
 *         (service) no room in the domain for the service places; ENOMEM;
 *         EIDRM.
 */
int nemo_mcast_group_create(nemo_domain *d, const nemo_mcast_attr *attr, nemo_mcast_group **out);

/**
 * Destroy a group with no multicast in flight.
 * @return 0; EINVAL for NULL; EBUSY while a multicast is in flight.
 */
int nemo_mcast_group_destroy(nemo_mcast_group *g);

/**
 * Make place p a member.  Any thread, at any time, also while multicasts
 * are in flight (see "Exactly once" above).
 * @return 0; EINVAL for NULL g, or (service) a service place or a place
 *         whose CPU is unknown; ESRCH if p is not a place of the group's
 *         domain now; EALREADY if p is a member already; ENOMEM (dynamic).
 */
int nemo_mcast_add(nemo_mcast_group *g, nemo_place_id p);

/**
 * Make place p a non-member.  A place that leaves its domain stays a
 * member until removed, and is skipped meanwhile (nothing reaches it).
 * @return 0; EINVAL for NULL g; ENOENT if p is not a member; ENOMEM
 *         (dynamic).
 */
int nemo_mcast_remove(nemo_mcast_group *g, nemo_place_id p);

/**
 * How many members g has now (*n), and up to cap of their ids.
 * @return 0; EINVAL for NULL g or n, or NULL ids with cap > 0.
 */
int nemo_mcast_members(nemo_mcast_group *g, nemo_place_id *ids, size_t cap, size_t *n);

/** The function a multicast runs on each member: self is the member. */
typedef void (*nemo_mcast_fn)(nemo_place_id self, uint64_t arg, void *ctx);

/** nemo_multicast flags */
enum {
	NEMO_MCAST_ASYNC = 1u << 0,   /**< return at once with a handle */
};

/**
 * Run fn(member, arg, ctx) exactly once on every member of g, each in its
 * own place (or, for a service group, on its CPU's service place), and
 * return when all have returned.  The calling thread must
 * be a place of g's domain; it serves its own queue while it waits (it
 * may be a member itself).  fn runs as an active-message handler: it may
 * send, and must not wait for other places.
 * With NEMO_MCAST_ASYNC, returns at once with *handle set: finish it with
 * nemo_mcast_wait, or nemo_mcast_test until it returns 0, from the same
 * thread.  An empty group completes at once.
 *
 * The multicast never waits to send: a message whose queue is full is
 * kept by the sending place and delivered as room appears (nemo/domain.h,
 * "Sends from handlers"; past overflow_max if need be, since a member
 * needs it to run).  It completes when every member reached has run fn:
 * a member that leaves the domain before its message could be queued is
 * skipped (its part of the topology is done by the sender), as one that
 * left earlier.  Should a message to a member that stays be impossible to
 * keep (out of memory), the multicast still completes, and returns
 * ENOMEM instead of 0: fn did not run on every member.
 * @return 0; EINVAL for NULL g or fn, unknown flags, ASYNC without a
 *         handle; ENOTCONN if the calling thread is not a place; EXDEV if
 *         it is a place of another domain; EDEADLK from inside a handler
 *         (a multicast waits); ENOMEM (its state could not be allocated,
 *         or a member could not be reached: above).
 */
int nemo_multicast(nemo_mcast_group *g, nemo_mcast_fn fn, void *ctx, uint64_t arg, unsigned flags,
		   nemo_mcast **handle);

/**
 * nemo_multicast, waiting no later than abstime (CLOCK_MONOTONIC; NULL:
 * no deadline).  When the deadline passes first the multicast goes on:
 * *handle receives it, to finish with nemo_mcast_wait or nemo_mcast_test
 * from the same thread (it is not released until then); on 0, *handle is
 * set to NULL.
 * @param flags 0 (NEMO_MCAST_ASYNC has no wait to bound: EINVAL)
 * @return as nemo_multicast; ETIMEDOUT with *handle set; EINVAL for a
 *         NULL handle or a malformed abstime.
 */
int nemo_multicast_timed(nemo_mcast_group *g, nemo_mcast_fn fn, void *ctx, uint64_t arg, unsigned flags,
			 const struct timespec *abstime, nemo_mcast **handle);

/**
 * Whether an asynchronous multicast has completed; polls the calling place
 * once.  On 0 the handle is released.
 * @return 0 (done, released); EBUSY (not yet); EINVAL for NULL; EPERM
 *         from a thread other than the one that started it; ENOMEM (done
 *         and released, but a member could not be reached: nemo_multicast).
 */
int nemo_mcast_test(nemo_mcast *h);

/**
 * Wait until an asynchronous multicast has completed, serving the calling
 * place meanwhile; on 0 the handle is released.
 * @param abstime CLOCK_MONOTONIC deadline, or NULL
 * @return 0 (released); ETIMEDOUT (the handle stays valid); EINVAL for
 *         NULL or a malformed abstime; EPERM from another thread; ENOMEM
 *         (released, but a member could not be reached: nemo_multicast).
 */
int nemo_mcast_wait(nemo_mcast *h, const struct timespec *abstime);

/** What a group has done. */
typedef struct nemo_mcast_counters {
	uint64_t multicasts;          /**< multicasts completed */
	uint64_t messages;            /**< messages sent for them */
	uint64_t helped;              /**< node roles done by another place (Help) */
	uint64_t skipped;             /**< subgroups skipped whole (Skip) */
	uint64_t runs;                /**< runs of the function */
	uint64_t changes;             /**< membership changes */
	uint64_t rebuilds;            /**< dynamic topologies built */
} nemo_mcast_counters;

/** @return 0; EINVAL for NULL arguments. */
int nemo_mcast_get_counters(nemo_mcast_group *g, nemo_mcast_counters *out);

#ifdef __cplusplus
}
#endif

#endif /* NEMO_MCAST_H */
