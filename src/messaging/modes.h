/*
 * modes.h - what a receiver mode of a layer above needs of a place and
 * of its domain: the polling layer's progress thread, watchdog, delay
 * histogram and threshold checks (src/poll/), and the layers above that
 * act as a place (src/mcast, src/xproc, src/mpi).  Internal: not
 * installed.
 *
 * nemo_place and struct nemo_domain are incomplete types here: their
 * layout, and the protocols over it, are the messaging layer's own
 * (messaging_internal.h, which no file outside src/messaging includes:
 * tests/check_layers.py).  Everything a mode reads or writes of them is a
 * function below, defined in src/messaging/modes.c unless named
 * otherwise; none is on a sender's per-message path.  The drain and the
 * pending test stay direct calls (nemo__drain / nemo__pending are what
 * nemo__place_serve and nemo__domain_progress_pending call).
 */
#ifndef NEMO_MESSAGING_MODES_H
#define NEMO_MESSAGING_MODES_H

#include <nemo/am.h>
#include <nemo/domain.h>
#include <nemo/notify.h>

#include "../platform/fail.h"
#include "../platform/invariant.h"
#include "../waiter/waiter_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nemo_place nemo_place;
struct nemo_domain;

/* Buckets of the notification-delay histogram: NEMO_DELAY_BUCKETS of
 * nemo/poll.h, a layer above (src/poll/delay.c asserts they match). */
#define NEMO__DELAY_BUCKETS 48
/* A place's poll-check threshold until nemo_poll_threshold_set: the
 * NEMO_POLL_THRESHOLD_DEFAULT_NS of nemo/poll.h (src/poll/poll.c asserts). */
#define NEMO__POLL_THRESHOLD_DEFAULT_NS 5000u

/* Place ids (nemo/domain.h): index in the low 16 bits, generation in the
 * high 48.  Generations start at 1 and skip 0 when they wrap (after 2^48
 * joins of one index), so 0 can mean "no occupant yet" (messaging_internal.h). */
#define NEMO__IDX_BITS 16
#define NEMO__GEN_MASK 0xFFFFFFFFFFFFull
static inline nemo_place_id nemo__make_id(unsigned idx, uint64_t gen)
{
	return ((gen & NEMO__GEN_MASK) << NEMO__IDX_BITS) | idx;
}
static inline uint64_t nemo__id_gen(nemo_place_id id)
{
	return id >> NEMO__IDX_BITS;
}

/* The largest payload the ring carries: a user's NEMO_AM_PAYLOAD_MAX plus
 * a reply's 8-byte tag (also the MPI layer's wire format). */
#define NEMO__WIRE_PAYLOAD_MAX (NEMO_AM_PAYLOAD_MAX + 8u)

/* ------------------------------------------------------------ the caller */

/* The calling thread's place (NULL if none).  Readable from the
 * interrupt signal handler (initial-exec TLS); inline: every send and
 * poll starts here (send.c defines it). */
extern __thread nemo_place *nemo__tls_place __attribute__((tls_model("initial-exec")));
static inline nemo_place *nemo__place_self(void)
{
	return nemo__tls_place;
}

/* The calling thread's next threshold-check tick (nemo/poll.h; defined in
 * domain.c, which resets it at join and leave: the place's lifecycle). */
extern __thread uint64_t nemo__poll_due __attribute__((tls_model("initial-exec")));

/* Check a live domain: 0, or EINVAL (NULL) / EIDRM with the reason
 * recorded for fn (the public call; domain.c). */
int nemo__domain_check_in(const struct nemo_domain *d, const char *fn);
#define nemo__domain_check(d) nemo__domain_check_in((d), __func__)

/* The destination place of id, if id names an active place of d:
 * returns it and its status word in *st; NULL if not (ESRCH; send.c). */
nemo_place *nemo__dest(struct nemo_domain *d, nemo_place_id id, uint64_t *st);

/* ------------------------------------------------------------ the domain */

/* Its number of indexes (P) and the place of index i < P (whatever its
 * state: nemo__place_active says). */
unsigned nemo__domain_places(const struct nemo_domain *d);
nemo_place *nemo__domain_place(struct nemo_domain *d, unsigned i);
/* Created with NEMO_DOMAIN_DELAYS? */
bool nemo__domain_delays(const struct nemo_domain *d);

/* A domain's service threads, one of each (src/poll/service.c): claim the
 * slot for self under the domain's lock (0, or EEXIST: taken), give it
 * back.  nemo_domain_destroy refuses a domain whose slots are taken. */
enum nemo__service { NEMO__SERVICE_PROGRESS, NEMO__SERVICE_WATCHDOG };
int nemo__domain_service_claim(struct nemo_domain *d, enum nemo__service which, void *self);
void nemo__domain_service_unclaim(struct nemo_domain *d, enum nemo__service which);
/* Who holds slot which (NULL: nobody), read under the domain's lock. */
void *nemo__domain_service(struct nemo_domain *d, enum nemo__service which);

/* The progress thread's waiter slot while one runs (NULL: none): kick.c
 * kicks it for served places that are RUNNING (src/poll/progress.c).
 * Set: a seq_cst store; read: acquire. */
void nemo__domain_set_progress_waiter(struct nemo_domain *d, nemo_waiter *w);
nemo_waiter *nemo__domain_progress_waiter(struct nemo_domain *d);
/* The watchdog's (src/poll/watchdog.c, WD2 and WD6): a seq_cst store. */
void nemo__domain_set_watchdog_waiter(struct nemo_domain *d, nemo_waiter *w);

/* PT2 of src/poll/progress.c: is any hint word of a served place non-zero
 * (seq_cst loads of delegated, then of the hint words)? */
bool nemo__domain_progress_pending(struct nemo_domain *d);

/* ------------------------------------------------------------- a place */

/* Its domain (set at join). */
struct nemo_domain *nemo__place_domain(const nemo_place *p);
/* Its status is ACTIVE (an acquire load). */
bool nemo__place_active(const nemo_place *p);
/* Served by the progress thread (delegated; a relaxed load). */
bool nemo__place_delegated(const nemo_place *p);
/* Interrupt mode is on (irq_on; a relaxed load). */
bool nemo__place_irq_on(const nemo_place *p);
/* Wake p if it waits - on its descriptor (an eventfd write, F3 of
 * placewait.c) or asleep in a wait (its waiter slot's kick: SLEEPING ->
 * RUNNING and a FUTEX_WAKE); nothing if it runs or polls - so that it
 * looks again at a transport's news, such as a dead peer that its drive
 * reports (remote.h).  Any thread (kick.c). */
void nemo__place_wake(nemo_place *p);
/* Is the calling thread inside a nemo call or a handler of p
 * (messaging_internal.h's nemo__in_call, out of line)? */
bool nemo__place_in_call(nemo_place *p);

/* THE LOOP of src/poll/progress.c for one place, by the progress thread:
 * skip it unless it is ACTIVE and delegated; trylock its plock (busy: its
 * own thread is in a nemo call and drains itself: 0); under the lock
 * re-check both, act as the place (the thread-local place and the
 * lock-holder flag, busy 1), drain it with NEMO_AM_CTX_PROGRESS, deliver
 * its overflow (overflow.c, ROOM KICKS), and unlock.  Returns the number
 * of messages handled. */
unsigned nemo__place_serve(nemo_place *p);
/* nemo_place_set_progress's switch, on the place's own thread (checked
 * by the caller: not in a call, interrupt mode off when on): on revokes
 * its stream grants first (grant.c: granted senders would not wake the
 * progress thread), then sets delegated under its plock. */
void nemo__place_set_served(nemo_place *me, bool on);

/* THE WATCHDOG (src/poll/watchdog.c).  wd_since: the tick since which a
 * message has waited (0: none): a seq_cst load; clear it if it is still
 * s (CAS s -> 0, seq_cst: true if cleared); take it (exchange with 0,
 * seq_cst).  wd_ticks: T in ticks (0: not watched), read relaxed,
 * written seq_cst by the place itself. */
uint64_t nemo__place_wd_since(nemo_place *p);
bool nemo__place_wd_since_clear(nemo_place *p, uint64_t s);
uint64_t nemo__place_wd_since_take(nemo_place *p);
uint64_t nemo__place_wd_ticks(const nemo_place *p);
void nemo__place_set_wd_ticks(nemo_place *me, uint64_t t);
/* Signal p now if it is in interrupt mode (IK1-IK3 of kick.c), for a
 * thread that is not a place (the watchdog): true if a signal was sent
 * (kick.c). */
bool nemo__irq_signal(nemo_place *dst);

/* Notification delays (src/poll/delay.c; recorded by drain.c): a relaxed
 * snapshot of p's histogram, buckets[NEMO__DELAY_BUCKETS]. */
void nemo__place_delays_read(const nemo_place *p, uint64_t *count, uint64_t *sum_ns, uint64_t *max_ns,
			     uint64_t *buckets);

/* Threshold checks (src/poll/poll.c): the place's threshold, and the tick
 * after which its next check polls (in nemo_ticks() units).  Owner only;
 * domain.c resets them at join. */
struct nemo__poll_check {
	uint64_t thresh_ns, thresh_ticks, next;
};
struct nemo__poll_check *nemo__place_poll_check(nemo_place *me);
/* Count one check that handled n (owner only), and read the counts. */
void nemo__place_count_poll_check(nemo_place *me, unsigned n);
void nemo__place_poll_check_counters(const nemo_place *p, uint64_t *polls, uint64_t *handled);

/* ------------------------------------- the layers that act as a place */

/* The send flags every send accepts: 0, or EINVAL with the text for fn
 * (inline: every send checks them; also the xproc and MPI layers'). */
#define NEMO__SEND_FLAGS ((unsigned)(NEMO_PUSH | NEMO_NONBLOCK | NEMO_MORE))
static inline int nemo__check_flags(unsigned flags, const char *fn)
{
	if (__builtin_expect(!(flags & ~NEMO__SEND_FLAGS), 1))
		return 0;
	return nemo__fail(EINVAL, fn, "flags 0x%x: unknown bits 0x%x (NEMO_PUSH, NEMO_NONBLOCK, NEMO_MORE)", flags,
			  flags & ~NEMO__SEND_FLAGS);
}

/* An active message's flags, payload and length as every send checks them
 * (am.c; also the MPI layer's remote sends): 0, or the error with the text
 * for fn. */
int nemo__am_args_fail(const void *payload, size_t len, unsigned flags, const char *fn);
static inline int nemo__am_check_args(const void *payload, size_t len, unsigned flags, const char *fn)
{
	if (__builtin_expect(!(flags & ~NEMO__SEND_FLAGS) && len <= NEMO_AM_PAYLOAD_MAX && (payload || !len), 1))
		return 0;
	return nemo__am_args_fail(payload, len, flags, fn);   /* out of line: the error's text */
}

/* The id of the place at index idx < P if it is ACTIVE (an acquire load
 * of its status), else NEMO_PLACE_NONE (src/mcast: a node's place). */
nemo_place_id nemo__domain_place_id(struct nemo_domain *d, unsigned idx);
/* Action ids of the domain: 0 < id < nemo__domain_actions(d). */
unsigned nemo__domain_actions(const struct nemo_domain *d);
/* The CPU p is pinned to, or -1 (a plain read: src/mcast's service mode
 * reads the domain's other places). */
int nemo__place_cpu(const nemo_place *p);
/* Handlers running on me's thread now (owner only): 0 outside one. */
int nemo__place_hdepth(const nemo_place *me);
/* Send an active message from me to the local place to as a handler
 * sends (src/mcast's role messages): it never waits, and what does not
 * fit is kept in me's overflow, past overflow_max if need be
 * (NEMO__SEND_KEEP_ALL of messaging_internal.h; overflow.c).  Returns 0
 * or the error of nemo_am_sendv. */
int nemo__am_send_kept(nemo_place *me, nemo_place_id to, uint32_t id, uint64_t arg, const void *payload,
		       size_t len);

/* Its id and index (owner-private words, set at join: the calling
 * thread's own place, or one it serves). */
nemo_place_id nemo__place_id(const nemo_place *p);
unsigned nemo__place_idx(const nemo_place *p);
/* Event ids of the domain: 0 <= event < nemo__domain_events(d). */
unsigned nemo__domain_events(const struct nemo_domain *d);
/* The handler registered for action id < nemo__domain_actions(d), or NULL
 * (an acquire load; am.c's table). */
nemo_am_handler nemo__domain_action_handler(struct nemo_domain *d, uint32_t id);

/* Enter / leave a nemo call on the caller's own place (irq.c, INTERRUPT
 * DEFERRAL, E1 and E2: messaging_internal.h's nemo__busy_enter/exit, out
 * of line), and the same around work done as a handler of a poll
 * (hdepth too: its sends never wait). */
void nemo__place_busy_enter(nemo_place *me);
void nemo__place_busy_exit(nemo_place *me);
void nemo__place_handler_enter(nemo_place *me);
void nemo__place_handler_exit(nemo_place *me);

/* Deliver a message that came from another process or rank (a
 * transport's: src/mpi) to me, on its own thread: an active message -
 * id (action or NEMO_AM_EVENT | event) resolved for me with len payload
 * bytes (tagged: the first 8 are a reply's request tag), then its handler
 * run with context ctx - or a notification (chan) to me's notification
 * handler.  0, or the error that dropped it (the resolve's; ENOENT: no
 * notification handler). */
int nemo__am_deliver_remote(nemo_place *me, nemo_place_id src, uint32_t id, bool tagged, uint64_t arg,
			    const void *payload, size_t len, nemo_am_context ctx);
int nemo__notify_deliver_remote(nemo_place *me, nemo_place_id src, uint32_t chan);

#endif
