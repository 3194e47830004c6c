/*
 * nemo/notify.h - notifications: "channel C has news for you", as in the
 * Barrelfish project's "Message Notifications" (Barrelfish Technical Note 9,
 * ETH Zurich).
 *
 * Each receiving place has, for each sending place, a FIFO of sixteen
 * 64-bit entries (two cache lines), each a channel id with the
 * receiver's generation tag, or empty.  Only the sender fills entries
 * and only the receiver empties them.
 * nemo_notify(dest, chan, flags) appends chan to the caller's FIFO at
 * dest and kicks dest only if its queues from the caller turned non-empty
 * and dest is not polling (nemo/domain.h: whether a sender kicks).  The
 * receiving place's notification handler runs once per notification, in
 * the order sent, on the receiving place's thread (nemo/domain.h: where
 * messages are handled).
 *
 * A full FIFO is backpressure, never loss: a blocking nemo_notify waits
 * for room while serving the caller's own incoming messages; with
 * NEMO_NONBLOCK it returns EAGAIN.  Inside a handler it never waits: the
 * notification is kept in the place's overflow and delivered later, in
 * order (nemo/domain.h, "Sends from handlers").
 *
 * Order: notifications from one sender to one receiver are handled in the
 * order sent.  Between a notification and an active message from the
 * same sender there is no order (they travel in separate queues).
 * Visibility: whatever the sender wrote before nemo_notify is visible to
 * the handler.
 */
#ifndef NEMO_NOTIFY_H
#define NEMO_NOTIFY_H

#include <nemo/domain.h>

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Largest channel id (16 bits; an entry also carries the receiver's
 *  generation tag, so that a late entry does not reach a later occupant
 *  of the receiver's index). */
#define NEMO_NOTIFY_CHAN_MAX 0xFFFFu

/** Entries in one sender->receiver notification FIFO (one cache line). */
#define NEMO_NOTIFY_FIFO_LEN 16u

/** A receiving place's notification handler: src is the exact id of
 *  the place that sent the notification, even if it has left since (see
 *  nemo/domain.h, "Identity"). */
typedef void (*nemo_notify_handler)(void *ctx, nemo_place_id src, uint32_t chan);

/**
 * Set (or clear, with NULL) the calling place's notification handler.
 * Notifications to a place without one fail at the sender with ENOENT.
 * The handler and its context change together: every notification is
 * handled by one handler with that handler's own ctx, also in interrupt
 * mode when the signal arrives during this call (it is then handled as
 * the call returns, by the new handler).
 * @return 0, ENOTCONN.
 */
int nemo_notify_set_handler(nemo_notify_handler fn, void *ctx);

/**
 * Notify place dest that channel chan has news.
 * @param flags NEMO_PUSH, NEMO_NONBLOCK, NEMO_MORE (nemo/domain.h)
 * @return 0 once queued; ENOTCONN if the caller is not a place; ESRCH if
 *         dest is not a place of the caller's domain (or left before the
 *         notification could reach it); ENOENT if dest has no notification
 *         handler; ERANGE for chan > NEMO_NOTIFY_CHAN_MAX; EINVAL for
 *         unknown flags; EAGAIN with NEMO_NONBLOCK when the FIFO is full;
 *         EDEADLK if a handler nested more than 8 deep in full-queue
 *         waits would have to wait again.
 */
int nemo_notify(nemo_place_id dest, uint32_t chan, unsigned flags);

/**
 * nemo_notify with a deadline for its wait for room in a full FIFO, as
 * nemo_am_send_timed (nemo/am.h): no later than abstime (CLOCK_MONOTONIC;
 * NULL: none).
 * @return as nemo_notify; ETIMEDOUT once abstime passed with the FIFO
 *         still full (nothing queued); EINVAL for a malformed abstime.
 */
int nemo_notify_timed(nemo_place_id dest, uint32_t chan, unsigned flags, const struct timespec *abstime);

/**
 * nemo_notify from any thread: a thread that is not a place joins d as a
 * place first, once (nemo/domain.h, "Sends from any thread"); a place of
 * d just notifies.
 * @return as nemo_notify; EXDEV if the caller is a place of another
 *         domain; the errors of nemo_place_join (ENOSPC: d is full).
 */
int nemo_domain_notify(nemo_domain *d, nemo_place_id dest, uint32_t chan, unsigned flags);

#ifdef __cplusplus
}
#endif

#endif /* NEMO_NOTIFY_H */
