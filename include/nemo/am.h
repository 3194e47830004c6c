/*
 * nemo/am.h - active messages: a message names the code that handles it.
 *
 * Two tables, as in the Nemo paper (Hale & Dinda, "An Evaluation of
 * Asynchronous Software Events on Modern Hardware"), made complete:
 *   - the Action Descriptor Table (ADT), one per domain, maps an action
 *     id to a handler and its context (nemo_action_register);
 *   - the Action Lookup Table (ALT), one per place, maps an event id to
 *     the action that place runs for it (nemo_am_event_map), so one event
 *     can mean different actions on different places.
 *
 * A message carries an action id, or an event id (NEMO_AM_EVENT(e)), a
 * 64-bit argument and up to NEMO_AM_PAYLOAD_MAX bytes of inline payload.
 * An event is resolved through the destination's ALT when it is sent.
 * The handler runs on the destination place's thread (nemo/domain.h:
 * where messages are handled): at its poll points, in its waits, or in
 * interrupt mode from a signal handler (then it must be
 * async-signal-safe; msg->context says which).
 *
 * Order: messages from one sender to one receiver are handled in the
 * order sent: each handler starts after the previous one's (a handler
 * that waits in a full-queue send serves later messages meanwhile).
 * Visibility: everything the sender wrote before nemo_am_send is visible
 * to the handler (release on enqueue, acquire on dequeue).
 *
 * Nothing is lost: a send returns 0 once the message is queued, and a
 * queued message is handled - by its receiver, or, if that receiver
 * leaves first, during its nemo_place_leave.  A send that races the leave
 * fails with ESRCH instead, and the message is not handled.  A send from
 * a handler never waits: if the ring is full the message is kept in the
 * sender's overflow and delivered in order as room appears (nemo/domain.h,
 * "Sends from handlers": its bound, and the one case it is dropped, which
 * is counted and reported to the sender: nemo_action_set_undelivered).
 *
 * Request and reply.  A handler answers with nemo_am_reply(msg, ...): it
 * goes to msg->src and carries the request's arg as its tag (msg->tag,
 * msg->is_reply at the requester), so a requester that numbers its
 * requests in arg matches replies without a table.  Replies are sent
 * from handlers, so they never fail because the requester's ring is full;
 * the requester may be a plain thread (nemo_domain_am_send joins it).
 *
 * Errors: ENOTCONN the caller is not a place; ENOBUFS a handler's send
 * found its ring full and its place's overflow at overflow_max; ESRCH no such destination
 * place; ERANGE an action or event id out of range; ENOENT an action
 * with no handler, or an event the destination has not mapped; EEXIST an
 * action registered twice; EMSGSIZE a payload over NEMO_AM_PAYLOAD_MAX;
 * EAGAIN a full ring with NEMO_NONBLOCK; EDEADLK a handler nested more
 * than 8 deep in full-queue waits; EIDRM a destroyed domain; EINVAL a
 * NULL or malformed argument.
 */
#ifndef NEMO_AM_H
#define NEMO_AM_H

#include <nemo/domain.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Largest inline payload of one message, in bytes. */
#define NEMO_AM_PAYLOAD_MAX 48u

/** Largest action and event tables (nemo_domain_attr). */
#define NEMO_AM_ACTIONS_MAX 4096u
#define NEMO_AM_EVENTS_MAX 4096u

/** The id of event e (as opposed to action e) in nemo_am_send. */
#define NEMO_AM_EVENT(e) (0x80000000u | (uint32_t)(e))

/** msg->event of a message sent by action id. */
#define NEMO_AM_NO_EVENT 0xFFFFFFFFu

/** Where a handler runs. */
typedef enum nemo_am_context {
	NEMO_AM_CTX_POLL = 0,         /**< in nemo_poll or nemo_place_leave, or deferred from
	                                   an interrupt that arrived during another nemo call
	                                   (run as that call returns, on the normal stack) */
	NEMO_AM_CTX_WAIT = 1,         /**< in nemo_place_wait, or in a send waiting for room */
	NEMO_AM_CTX_INTERRUPT = 2,    /**< in the interrupt-mode signal handler */
	NEMO_AM_CTX_PROGRESS = 3,     /**< on the domain's progress thread, for a place
	                                   that asked for it (nemo/poll.h) */
} nemo_am_context;

/** One message, as its handler sees it (valid during the call only). */
typedef struct nemo_am_msg {
	nemo_place_id src;            /**< the sender's exact id (it may have left
	                                   since: a reply then fails with ESRCH) */
	nemo_place_id dest;           /**< this place */
	uint32_t action;              /**< the action being run */
	uint32_t event;               /**< the event it was sent as, or NEMO_AM_NO_EVENT */
	uint64_t arg;                 /**< the sender's argument */
	const void *payload;          /**< inline payload (NULL if len is 0) */
	size_t len;                   /**< payload bytes */
	nemo_am_context context;      /**< where the handler runs */
	uint64_t tag;                 /**< a reply's tag: its request's arg (else 0) */
	bool is_reply;                /**< sent with nemo_am_reply */
	void *place_ctx;              /**< this place's context (nemo_place_set_context) */
} nemo_am_msg;

/** An action's handler. */
typedef void (*nemo_am_handler)(const nemo_am_msg *msg, void *ctx);

/**
 * Register action id `action` of domain d: fn(msg, ctx) runs for it.  An
 * action stays registered for the domain's life.  Any thread may
 * register, at any time.
 * @return 0; EINVAL for NULL d or fn; ERANGE for action >= max_actions;
 *         EEXIST if the action has a handler already; EIDRM.
 */
int nemo_action_register(nemo_domain *d, uint32_t action, nemo_am_handler fn, void *ctx);

/**
 * What a kept send reports when it cannot be delivered.  A send from a
 * handler that finds its queue full returns 0 and is kept in the sending
 * place's overflow (nemo/domain.h, "Sends from handlers"); if its receiver
 * leaves before the message could be queued to it, the message is dropped
 * and fn(msg, err, ctx) runs on the sending place, as a handler would
 * (its own sends never wait): msg->src is the sender (this place),
 * msg->dest the receiver that left, msg->action / arg / payload / tag /
 * is_reply as sent, msg->context the context of the call that found it,
 * err ESRCH.  The drop is also counted (overflow_dropped).  A message sent
 * by event id reports to the action it resolved to.  Notifications that
 * are dropped are counted only.
 */
typedef void (*nemo_am_undelivered)(const nemo_am_msg *msg, int err, void *ctx);

/**
 * Set (fn non-NULL) or clear (NULL) what action `action`'s undelivered
 * kept sends report (nemo_am_undelivered).  Any thread; set it before
 * the action's messages are sent (a report under way while it changes
 * may run the previous callback, or the new one with the previous ctx).
 * @return 0; EINVAL for NULL d; ERANGE for action >= max_actions; ENOENT
 *         if the action has no handler; EIDRM.
 */
int nemo_action_set_undelivered(nemo_domain *d, uint32_t action, nemo_am_undelivered fn, void *ctx);

/**
 * Map event `event` to `action` in the calling place's ALT (replacing any
 * earlier mapping).  action NEMO_AM_NO_EVENT unmaps it.
 * @return 0; ENOTCONN; ERANGE for an id out of range; ENOENT if the action
 *         has no handler.
 */
int nemo_am_event_map(uint32_t event, uint32_t action);

/**
 * The action place `place` runs for `event` (a snapshot).
 * @return 0 with *action set; ENOENT if unmapped; ESRCH; ERANGE; EINVAL;
 *         ENOTCONN if the caller is not a place.
 */
int nemo_am_event_lookup(nemo_place_id place, uint32_t event, uint32_t *action);

/**
 * Send an active message to dest: run action `id` (or, for
 * NEMO_AM_EVENT(e), the action dest maps e to) there with `arg`.
 * @param flags NEMO_PUSH, NEMO_NONBLOCK, NEMO_MORE (nemo/domain.h)
 * @return 0 once queued; or an error of the list above.
 */
int nemo_am_send(nemo_place_id dest, uint32_t id, uint64_t arg, unsigned flags);

/**
 * nemo_am_send with an inline payload of len bytes (copied; at most
 * NEMO_AM_PAYLOAD_MAX).
 */
int nemo_am_sendv(nemo_place_id dest, uint32_t id, uint64_t arg, const void *payload,
		  size_t len, unsigned flags);

/**
 * nemo_am_send with a deadline: a send that finds its queue full waits for
 * room as nemo_am_send does (it polls for its place's policy budget, then
 * sleeps until the receiver frees room, serving its own queues), but no
 * later than abstime (CLOCK_MONOTONIC; NULL: no deadline, as
 * nemo_am_send).  The same for every transport: a place of this process,
 * of a shared domain (nemo/xproc.h) or of another rank (nemo/mpi.h).
 * A send from a handler never waits (nemo/domain.h, "Sends from
 * handlers"), so its deadline does not matter there.
 * @return as nemo_am_send; ETIMEDOUT once abstime passed with no room
 *         (nothing queued); EINVAL for a malformed abstime.
 */
int nemo_am_send_timed(nemo_place_id dest, uint32_t id, uint64_t arg, unsigned flags,
		       const struct timespec *abstime);

/** nemo_am_sendv with a deadline, as nemo_am_send_timed. */
int nemo_am_sendv_timed(nemo_place_id dest, uint32_t id, uint64_t arg, const void *payload, size_t len,
			unsigned flags, const struct timespec *abstime);

/**
 * Reply to the message req (from its handler, or later from the same
 * place with a copy of it): nemo_am_sendv to req->src, running action
 * `id` (or event) there with `arg` and the payload; the handler there
 * sees msg->is_reply and msg->tag == req->arg.  The tag travels in the
 * ring (8 bytes: the reply takes one more slot than a send of the same
 * payload); the payload may still be NEMO_AM_PAYLOAD_MAX bytes.
 * @return as nemo_am_sendv (ESRCH: the requester left); EINVAL for a
 *         NULL req.
 */
int nemo_am_reply(const nemo_am_msg *req, uint32_t id, uint64_t arg, const void *payload, size_t len,
		  unsigned flags);

/**
 * nemo_am_sendv from any thread: a thread that is not a place joins d as
 * a place first, once (nemo/domain.h, "Sends from any thread"), and can
 * then wait for replies with nemo_place_wait; a place of d just sends.
 * @return as nemo_am_sendv; EXDEV if the caller is a place of another
 *         domain; the errors of nemo_place_join (ENOSPC: d is full).
 */
int nemo_domain_am_send(nemo_domain *d, nemo_place_id dest, uint32_t id, uint64_t arg, const void *payload,
			size_t len, unsigned flags);

/* ------------------------------------------------------------------------
 * Bound sends (curried, as Plan 9's fastwrite in Minnich, Floren & McKie,
 * "Using Currying and Process-Private System Calls to Break the
 * One-Microsecond System Call Barrier")
 * ------------------------------------------------------------------------ */

/** A binding of the calling place to one destination and action (or
 *  notification channel): opaque. */
typedef struct nemo_am_bound nemo_am_bound;

/**
 * Validate dest, id (action or NEMO_AM_EVENT(e), resolved now, as a send
 * would) and flags once; later nemo_am_send_bound calls skip all of it.
 * The binding belongs to the calling place: only its thread may use it,
 * while it stays the same place (after a leave, a bound send returns
 * ENOTCONN and touches nothing).  If dest leaves, the next bound send
 * fails with ESRCH (generation-checked, as any send): bind again.
 * @return 0 with *out set; the errors of nemo_am_send; ENOMEM.
 */
int nemo_am_bind(nemo_place_id dest, uint32_t id, unsigned flags, nemo_am_bound **out);

/**
 * nemo_am_send(dest, id, arg, flags) through a binding: the same
 * delivery, order, waits and errors, on the shortest path (docs/
 * messaging.md, "Bound sends", has its instruction count).
 * @return 0; ESRCH (dest left); ENOTCONN (not the binding place); EINVAL
 *         for a NULL binding; the errors of a send (EAGAIN, ENOBUFS...).
 */
int nemo_am_send_bound(nemo_am_bound *b, uint64_t arg);

/** nemo_notify's binding: dest and channel validated once.  @return as
 *  nemo_am_bind, and ERANGE for a channel above NEMO_NOTIFY_CHAN_MAX. */
int nemo_notify_bind(nemo_place_id dest, uint32_t chan, unsigned flags, nemo_am_bound **out);

/** nemo_notify through a notification binding.  @return as nemo_notify;
 *  ENOTCONN as nemo_am_send_bound; EINVAL for an active-message binding. */
int nemo_notify_bound(nemo_am_bound *b);

/** Free a binding (any time; NULL is EINVAL).  @return 0; EINVAL. */
int nemo_am_unbind(nemo_am_bound *b);

/* ------------------------------------------------------------------------
 * Private fast calls, set up by a control string
 * ------------------------------------------------------------------------ */

/** Slots of the calling thread's private table of bound calls. */
#define NEMO_FAST_SLOTS 16u

/**
 * Set up or remove a private fast call of the calling place by a command
 * in words (as Plan 9's ctl file in Minnich et al.), so that tools and scripts can set up a
 * program's fast paths:
 *   "bind am dest=D (action=A | event=E) slot=S [flags=F]"
 *   "bind notify dest=D chan=C slot=S [flags=F]"
 *   "unbind slot=S"
 * D is a place index of d (its current occupant) or a full place id (0x...);
 * numbers are decimal or 0x hex; F is push, more, nonblock joined by ','.
 * Binding a slot that holds a call replaces it.
 * @return 0; EINVAL for a malformed command (nemo_last_error() quotes the
 *         bad word); ERANGE for a slot, channel or id out of range; ENOENT
 *         for unbinding an empty slot; ENOTCONN, EXDEV (a place of another
 *         domain); ESRCH; and the errors of nemo_am_bind / nemo_notify_bind.
 */
int nemo_ctl(nemo_domain *d, const char *cmd);

/**
 * Call the fast call in slot `slot` of the calling thread's table:
 * nemo_am_send_bound(binding, arg), or nemo_notify_bound for a
 * notification binding (arg unused).
 * @return its result; ERANGE for a slot >= NEMO_FAST_SLOTS; ENOENT for an
 *         empty slot.
 */
int nemo_fast(unsigned slot, uint64_t arg);

/**
 * Send n messages to dest, all running action `id` (or event), with the
 * arguments args[0..n-1], in that order: one validation and one wake-up
 * for the lot (the fast path for streams; a polling receiver starts on
 * the first while later ones are still being written).  Equivalent to n
 * nemo_am_send calls, the last without NEMO_MORE (unless flags has it).
 * @param sent receives how many were queued, a prefix of args (may be NULL)
 * @return 0 if all n were queued; otherwise the error that stopped the
 *         batch (as nemo_am_send: ESRCH if dest left - the messages before
 *         *sent were delivered, the rest were not; EAGAIN with
 *         NEMO_NONBLOCK when the ring filled; ...); EINVAL for NULL args
 *         with n > 0.
 */
int nemo_am_send_batch(nemo_place_id dest, uint32_t id, const uint64_t *args, size_t n,
		       unsigned flags, size_t *sent);

/**
 * Send the same message to many places: to `set` (n ids), or, with set
 * NULL, to every place of the caller's domain but the caller.  Each
 * destination gets its own copy in its own ring; an event is resolved per
 * destination.  Wake-ups are issued after every message is queued, so
 * the receivers start as close together as the kernel allows.
 * @param sent receives how many places the message was queued to (may be NULL)
 * @return 0 if it reached them all; else the first error met (ESRCH,
 *         ENOENT...), having still sent to every other destination;
 *         EINVAL for a NULL set with n > 0.
 */
int nemo_am_broadcast(const nemo_place_id *set, size_t n, uint32_t id, uint64_t arg,
		      const void *payload, size_t len, unsigned flags, size_t *sent);

#ifdef __cplusplus
}
#endif

#endif /* NEMO_AM_H */
