/*
 * nemo/domain.h - domains and places: who can message whom, and where
 * messages are handled.
 *
 * A domain is a set of places.  A place is a thread that joined the
 * domain (nemo_place_join), pinned to a CPU or not.  Every place has, for
 * every other place, its own incoming queues (as in the Barrelfish
 * project's "Message Notifications", Barrelfish Technical Note 9): a
 * one-cache-line notification FIFO (nemo/notify.h) and a ring of active
 * messages (nemo/am.h).  Only the sender writes a queue's entries, so
 * senders never contend with each other; a receiver finds its non-empty
 * queues through a hint bitmap instead of scanning them all.
 *
 * Where messages are handled.  Always on the receiving place's own
 * thread, at one of these moments:
 *   - at its poll points: nemo_poll();
 *   - while it waits in nemo_place_wait() (it polls for its wait
 *     policy's budget, then sleeps in the kernel until a sender kicks it);
 *   - while it is blocked in a send whose queue is full (it serves its own
 *     incoming messages, so cycles of full queues cannot deadlock);
 *   - in interrupt mode, from a signal handler, when it is computing and
 *     not polling (nemo_place_set_interrupts; see "Interrupt mode" below);
 *   - when it leaves: nemo_place_leave() handles everything still queued.
 *
 * Whether a sender kicks (src/messaging/kick.c, the one place it is
 * decided): only when the sender's queue to that receiver turned
 * non-empty since the receiver last looked (its hint bit was clear), or
 * the sender passed NEMO_PUSH; and then according to the state the
 * receiver published: polling -> nothing (it will see the message);
 * sleeping -> one FUTEX_WAKE; waiting on its descriptor (nemo_place_fd)
 * -> one eventfd write; running with interrupts on -> a signal;
 * running without -> nothing (it sees the message at its next poll point).
 *
 * Identity.  A place is named by a nemo_place_id: its index in the domain
 * plus a 48-bit generation, so an id of a place that has left never
 * reaches a later occupant of the same index (sends to it fail with
 * ESRCH).  A handler learns the exact id of the place that sent its
 * message or notification, even if that place has left since and its
 * index has a new occupant (a reply then fails with ESRCH).  For that, a
 * new occupant's first send to a place, on each of the two queues
 * (active messages, notifications), waits until everything the index's
 * previous occupant sent there has been taken off the queue - as a send
 * waits for room in a full queue: serving its own queues meanwhile, or
 * EAGAIN with NEMO_NONBLOCK.  A thread is a place of at most one domain
 * at a time.
 *
 * Interrupt mode.  A place with interrupts on gets a signal (SIGURG by
 * default; nemo_domain_attr.irq_signal) when a message arrives while it is
 * running outside nemo.  The signal handler runs the message handlers
 * right there, on top of whatever the thread was doing.  So handlers that
 * can run in interrupt mode must be async-signal-safe: no malloc, no
 * stdio, no locks the interrupted code may hold; atomics, nemo sends and
 * notifies (they are safe here), and the functions of signal-safety(7)
 * are fine.  The interrupted code sees errno preserved.  While the
 * thread is inside any nemo messaging call (a send, nemo_poll, a wait) a
 * signal never runs handlers: it is remembered, and the messages are
 * handled when that call returns.  nemo_place_set_interrupts(false)
 * turns interrupts off for a critical section; turning them back on
 * handles whatever arrived meanwhile.  Once nemo_place_set_interrupts(false)
 * or nemo_place_leave() has returned, no signal from nemo reaches the
 * thread until interrupts are on again.
 *
 * System calls in interrupt mode.  The signal handler is installed with
 * SA_RESTART, so a blocking call that the signal interrupts behaves as
 * signal(7) says for such a handler - after the message handlers ran:
 *   - restarted (the caller sees nothing): read, readv, write, writev and
 *     ioctl on pipes, terminals and sockets; open of a FIFO; wait,
 *     waitpid, waitid; accept, connect, send*, recv* on sockets without
 *     a timeout; flock, fcntl F_SETLKW; mq_send / mq_receive; futex
 *     waits, so pthread_mutex_lock, pthread_cond_wait, sem_wait;
 *     getrandom; read of an inotify descriptor;
 *   - never restarted, failing with EINTR: poll, ppoll, select, pselect,
 *     epoll_wait, epoll_pwait; nanosleep and clock_nanosleep (with the
 *     time left in *rem), usleep; pause, sigsuspend, sigtimedwait,
 *     sigwaitinfo; semop, semtimedop, msgrcv, msgsnd; io_getevents;
 *     socket calls on a socket with SO_RCVTIMEO / SO_SNDTIMEO set; and
 *     sleep, which returns the seconds left instead.
 * Code that runs in interrupt mode must handle EINTR from the second
 * kind (retry, or sleep again for the time left), as any code with
 * signal handlers must, or turn interrupts off around such calls.
 *
 * Sends from handlers.  A handler never waits for room.  When its send
 * finds the queue full (or a previous occupant's entries still in it), the
 * message or notification is kept in the sending place's overflow, an
 * array of its own that only it touches, and the send returns 0; so does
 * every later send from that place to the same receiver on the same
 * queue until the overflow has drained (order is kept).  The overflow is
 * delivered, in order, as room appears: whenever the place polls, waits,
 * serves its queues in a blocking send, at the end of an interrupt or of
 * a progress-thread pass, and before a send from outside a handler to the
 * same receiver (which waits for it).  A place that stops calling nemo
 * with sends kept (it sleeps, its call returns, an interrupt ends) asks
 * their receivers to kick it when they free room, so it delivers them
 * then: asleep it wakes, an interrupt-mode place that computes gets a
 * signal, a served place's progress thread runs, an event loop's
 * descriptor turns readable (a place that only polls delivers at its next
 * nemo call).  nemo_place_leave delivers the overflow before the place
 * goes, waiting for room as a blocking send does, and so what the
 * handlers of its last drain keep too.  Bound:
 * nemo_domain_attr.overflow_max entries per place (default 65536, 80
 * bytes each: 5 MiB); a send beyond it fails with ENOBUFS and is not
 * queued.  A kept send whose receiver leaves before it could be delivered
 * is dropped - its sender had been told 0 - and the drop reaches the
 * sender: counted (overflow_dropped; with NEMO_DEBUG=1 each one is
 * logged), and a message is reported to its action's undelivered
 * callback on the sending place (nemo_action_set_undelivered, nemo/am.h).
 * So the usual request/reply pattern (workers reply from their handlers,
 * nemo_am_reply) needs no flow control written by the user.
 *
 * Sends that wait.  A send from outside a handler that finds its queue
 * full waits for room: it polls for its place's wait-policy budget,
 * serving its own queues (handlers run meanwhile), then sleeps until the
 * receiver frees room (the receiver's drain wakes it: no CPU is used
 * while it waits).  NEMO_NONBLOCK returns EAGAIN instead, and
 * nemo_am_send_timed / nemo_notify_timed (nemo/am.h, nemo/notify.h) give
 * up at a deadline with ETIMEDOUT.
 *
 * Sends from any thread.  nemo_domain_am_send and nemo_domain_notify work
 * in any thread: one that is not a place joins the domain as a place, once,
 * at its first such send (a nemo_place_join with default attributes: a
 * mutex, a table walk, about a microsecond) and stays one until it calls
 * nemo_place_leave or exits (then it leaves by itself).  Being a place, it
 * can wait for replies with nemo_place_wait and has an id to reply to.
 * It takes one of the domain's max_places while it is one.
 *
 * Event loops.  nemo_place_fd gives the place an eventfd that becomes
 * readable when the place has work, for epoll, poll, select, io_uring or
 * an event loop (libuv, GLib, Tokio).  From the return of nemo_place_fd or
 * nemo_poll until the place's next nemo_poll or nemo_place_wait, the place
 * counts as waiting on its descriptor: the first kick in that time writes
 * the eventfd (one write() syscall by the sender, and no more until the
 * place has polled again); messages that arrive while it is in nemo_poll
 * cost nothing more.  The loop: wait for the descriptor to be readable,
 * call nemo_poll (it reads the eventfd itself), repeat.  While messages
 * keep coming, one nemo_poll of such a place drains its queues up to four
 * times (a plain nemo_poll: once), so that the loop's system calls are
 * paid once for up to four queues' worth; this holds for places of this
 * process, an MPI rank's included, while a shared domain's place on its
 * descriptor drains once a call (nemo/xproc.h, its bridge thread).  A message queued
 * before the arming is seen by the arming itself, which then makes the
 * descriptor readable at once, so no message is missed between a
 * nemo_poll and the next epoll_wait.
 *
 * Errors (every function returns 0 or one of these; never a crash):
 *   EINVAL     a NULL or malformed argument
 *   EIDRM      the domain has been destroyed
 *   ENOTCONN   the calling thread is not a place (of that domain)
 *   EALREADY   the calling thread is already a place of a domain
 *   ENOSPC     the domain has no free place
 *   EBUSY      destroying a domain that still has places; leaving from
 *              inside a handler
 *   ESRCH      no such place: index out of range, never joined, or left
 *   ETIMEDOUT  a wait's deadline passed
 *   EXDEV      a send from any thread, by a place of another domain
 *   ENOBUFS    a handler's send found its queue full and the overflow at
 *              overflow_max
 * nemo_last_error() says which argument or which state, in words; with
 * NEMO_DEBUG=1 every failure is also written to stderr.
 */
#ifndef NEMO_DOMAIN_H
#define NEMO_DOMAIN_H

#include <nemo/waiter.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A domain (opaque). */
typedef struct nemo_domain nemo_domain;

/**
 * A place's name: its index in the domain (low 16 bits) and the
 * generation of that index (high 48 bits), which grows by one with each
 * join of the index.  Ids of different occupants differ unless the index
 * has been joined 2^48 times in between (at a join a microsecond, nine
 * years of joins of that one index).
 */
typedef uint64_t nemo_place_id;

/** No place (returned by nemo_place_self() outside a domain). */
#define NEMO_PLACE_NONE ((nemo_place_id)0xFFFFFFFFFFFFFFFFull)

/** The largest max_places of a domain. */
#define NEMO_PLACES_MAX 1024u

/** Index of a place in its domain (0 <= index < max_places). */
static inline unsigned nemo_place_index(nemo_place_id id)
{
	return (unsigned)(id & 0xFFFFu);
}

/** Domain parameters; zero fields take the defaults. */
typedef struct nemo_domain_attr {
	unsigned max_places;          /**< places at once, 1..1024 (0: 64) */
	unsigned ring_slots;          /**< slots of each sender->receiver message
	                                   ring, a power of two 8..32768 (0: 256).
	                                   A message takes 1 slot, plus 1 per 12
	                                   bytes of payload. */
	unsigned max_actions;         /**< action ids 0..max_actions-1, 1..4096 (0: 256) */
	unsigned max_events;          /**< event ids 0..max_events-1, 1..4096 (0: 256) */
	int irq_signal;               /**< interrupt-mode signal (0: SIGURG) */
	unsigned overflow_max;        /**< sends a place may keep in its overflow
	                                   ("Sends from handlers"), 1..2^24 (0: 65536) */
	unsigned flags;               /**< NEMO_DOMAIN_* */
} nemo_domain_attr;

/** nemo_domain_attr.flags */
enum {
	NEMO_DOMAIN_DELAYS = 1u << 0, /**< record each active message's notification delay
	                                   (enqueue to handler start) per place:
	                                   nemo_place_delays (nemo/poll.h) */
};

/** The largest nemo_domain_attr.overflow_max. */
#define NEMO_OVERFLOW_MAX (1u << 24)

/**
 * Create an empty domain.
 * @param attr NULL for the defaults
 * @return 0 with *out set; EINVAL for a NULL out or an attribute out of
 *         range (ring_slots not a power of two, an unusable signal);
 *         ENOMEM.
 */
int nemo_domain_create(const nemo_domain_attr *attr, nemo_domain **out);

/**
 * Destroy a domain that has no places.  Its memory is released, except a
 * small record that makes later calls with the same pointer fail with
 * EIDRM instead of touching freed memory.
 * @return 0; EINVAL for NULL; EBUSY while places remain; EIDRM if
 *         already destroyed.
 */
int nemo_domain_destroy(nemo_domain *d);

/** What a domain has done (sums over every place, past and present). */
typedef struct nemo_domain_counters {
	uint64_t am_sent;             /**< active messages enqueued (nemo_am_send_bound's are
	                                   added 64 at a time per destination, at the next other
	                                   send there, and at nemo_place_leave) */
	uint64_t am_handled;          /**< active-message handlers run */
	uint64_t notify_sent;         /**< notifications enqueued */
	uint64_t notify_handled;      /**< notification handlers run */
	uint64_t kicks_futex;         /**< kicks that made a FUTEX_WAKE */
	uint64_t kicks_signal;        /**< kicks that sent a signal (interrupt mode) */
	uint64_t kicks_avoided;       /**< kicks that found the receiver polling or running */
	uint64_t kicks_skipped;       /**< sends that needed no kick at all (hint already set) */
	uint64_t full_waits;          /**< sends that found their queue full and waited */
	uint64_t send_failures;       /**< sends that raced a leaving receiver and were returned (ESRCH) */
	uint64_t interrupts;          /**< signal handlers that ran message handlers */
	uint64_t sleeps;              /**< times a place slept in nemo_place_wait */
	uint64_t overflowed;          /**< handler sends kept in an overflow ("Sends from handlers") */
	uint64_t overflow_dropped;    /**< kept sends whose receiver left before delivery */
	uint64_t kicks_fd;            /**< kicks that wrote a place's eventfd (nemo_place_fd) */
	uint64_t poll_checks;         /**< threshold checks that polled (nemo/poll.h) */
	uint64_t kicks_deferred;      /**< signals left to the polling watchdog (nemo/poll.h) */
	uint64_t grants;              /**< streams granted by receivers: their sends then need no
	                                   fence, hint or kick, and count in no kicks_* counter
	                                   (docs/messaging.md, "Stream grants") */
	uint64_t grant_revokes;       /**< grants taken back (each one membarrier on the receiver) */
	uint64_t room_kicks;          /**< receivers that freed room in a queue and kicked its
	                                   sender, which waited for room or kept sends for them */
} nemo_domain_counters;

/**
 * Sum the counters of every place.  Each place updates its own counters
 * with relaxed stores: a monitoring snapshot, not a barrier.
 * @return 0, EINVAL for NULL arguments, EIDRM.
 */
int nemo_domain_get_counters(nemo_domain *d, nemo_domain_counters *out);

/* ------------------------------------------------------------------------
 * Places
 * ------------------------------------------------------------------------ */

/** nemo_place_attr.flags */
enum {
	NEMO_PLACE_PIN = 1u << 0,        /**< pin the thread to attr.cpu while it is a place.
	                                      A place pinned to a CPU no other place of its
	                                      domain is pinned to (by this flag or by the
	                                      program) has that CPU to itself: under the
	                                      adaptive policy its waits poll 4x as long
	                                      (nemo/waiter.h) */
	NEMO_PLACE_INTERRUPTS = 1u << 1, /**< start in interrupt mode */
};

/** Place parameters; zero fields take the defaults. */
typedef struct nemo_place_attr {
	unsigned flags;               /**< NEMO_PLACE_* */
	int cpu;                      /**< with NEMO_PLACE_PIN: the CPU */
	nemo_wait_policy policy;      /**< how nemo_place_wait waits (kind 0: the
	                                   thread's / NEMO_WAIT / adaptive) */
	void *context;                /**< the place's context (nemo_place_set_context) */
} nemo_place_attr;

/**
 * The calling thread joins d as a place.  Safe while other places run;
 * it can receive as soon as this returns.
 * @param attr NULL for the defaults
 * @param id   receives the place's id (may be NULL)
 * @return 0; EINVAL (bad flags or CPU); EIDRM; EALREADY if the thread is
 *         already a place; ENOSPC if d is full; the error of pinning;
 *         EBUSY if interrupt mode is asked for and the domain's signal has
 *         a handler that is not nemo's.
 */
int nemo_place_join(nemo_domain *d, const nemo_place_attr *attr, nemo_place_id *id);

/**
 * The calling thread leaves its domain.  Every message and notification
 * already queued to it is handled first, here; a send that races the
 * leave either reaches it before it goes or fails with ESRCH at the
 * sender - never both, never neither.  Sends it deferred with NEMO_MORE
 * are flushed.  Pinning is undone.  In interrupt mode, no signal from nemo
 * reaches the thread after this returns (as nemo_place_set_interrupts).
 * @return 0; ENOTCONN if the thread is not a place; EBUSY from inside a
 *         handler.
 */
int nemo_place_leave(void);

/**
 * Set the calling place's context: a pointer of the user's, given to
 * every active-message handler that runs on this place (msg->place_ctx),
 * so handlers shared by many places find their place's own state (a
 * worker's queue, its counters) without a lookup.
 * @return 0; ENOTCONN.
 */
int nemo_place_set_context(void *ctx);

/** The calling place's context, or NULL (also outside a place). */
void *nemo_place_context(void);

/**
 * Event-loop mode: *fd receives the place's eventfd, which becomes
 * readable when the place has work (see "Event loops" above).  Created at
 * the first call, owned by nemo: do not read, write or close it; it is
 * closed by nemo_place_leave.  The place is armed on return: put the
 * descriptor in epoll (level-triggered or edge-triggered: both work,
 * since a nemo_poll that leaves work queued writes it anew, and one that
 * leaves none reads it empty) and call nemo_poll whenever it is
 * readable.  nemo_place_wait may still be used; it re-arms on return.
 * @return 0; ENOTCONN; EINVAL for NULL fd; the errno of eventfd(2).
 */
int nemo_place_fd(int *fd);

/** The calling thread's place id (of this process's domain, or - for a
 *  thread that holds a place of a shared domain, nemo/xproc.h - that
 *  place's public id), or NEMO_PLACE_NONE. */
nemo_place_id nemo_place_self(void);

/**
 * Places that died - their process (a shared domain's place, nemo/xproc.h)
 * or their MPI rank (nemo/mpi.h) ended without leaving - among those the
 * calling thread's places talk to.  A send to such a place fails with
 * ECONNRESET, and a wait of a place that talks to it returns ECONNRESET
 * once when the death is found.  Places of this process cannot die apart
 * from it.
 * @param ids  receives up to cap of their ids, the latest death first
 * @param n    receives how many were stored
 * @param total receives (if not NULL) how many such deaths were seen in
 *             all: compare two readings to learn of a new one
 * @return 0; EINVAL for NULL n, or NULL ids with cap > 0.
 */
int nemo_dead_places(nemo_place_id *ids, size_t cap, size_t *n, uint64_t *total);

/** The calling thread's domain, or NULL. */
nemo_domain *nemo_place_domain(void);

/**
 * Is id a place of d right now?  (A snapshot: it may leave at once.)
 * @return 0 if it is; ESRCH if not; EINVAL; EIDRM.
 */
int nemo_place_check(nemo_domain *d, nemo_place_id id);

/**
 * Ids of the places of d right now, in index order.
 * @param ids receives at most cap ids (may be NULL if cap is 0)
 * @param n   receives how many places there are (may exceed cap)
 * @return 0, EINVAL, EIDRM.
 */
int nemo_domain_places(nemo_domain *d, nemo_place_id *ids, size_t cap, size_t *n);

/**
 * Handle everything queued to the calling place now, without waiting.
 * @param handled receives the number of handlers run (may be NULL)
 * @return 0; ENOTCONN if the thread is not a place; ECONNRESET once per
 *         death of a peer the place talks to (a place of another process
 *         or MPI rank: nemo_dead_places says which; *handled may be > 0),
 *         as a wait returns it; for a shared place, EBADMSG when only
 *         rejected messages were found (nemo/xproc.h).
 */
int nemo_poll(unsigned *handled);

/**
 * Wait until at least one message or notification has been handled, or
 * the deadline passes; polls for the place's policy budget, then sleeps.
 * @param abstime CLOCK_MONOTONIC deadline, or NULL for none
 * @param handled receives the number of handlers run (may be NULL)
 * @return 0 once something was handled; ETIMEDOUT; ENOTCONN; EINVAL for
 *         a malformed abstime.
 */
int nemo_place_wait(const struct timespec *abstime, unsigned *handled);

/**
 * Wait until *word != old: handle messages and notifications (as
 * nemo_place_wait does) and return once a handler - this place's, run
 * here or earlier - has changed the word, or the deadline passes.  The
 * word is read at the start, after every drain and before sleeping, so a
 * reply that the progress thread or an interrupt handled just before the
 * call is not waited for again (the gap of "loop: nemo_place_wait until
 * my reply came").  The word must be changed by this place's handlers
 * (a store from another thread does not wake the place).  It is read
 * with an acquire load: write it with an atomic store (a C11 atomic
 * object of the same size, or __atomic_store_n).
 * @return 0 once *word != old; ETIMEDOUT; ENOTCONN; EINVAL for a NULL
 *         word or a malformed abstime.
 */
int nemo_place_wait_for(const uint64_t *word, uint64_t old, const struct timespec *abstime,
			unsigned *handled);

/**
 * Set how the calling place waits in nemo_place_wait.
 * @return 0, EINVAL for NULL or an unknown kind, ENOTCONN.
 */
int nemo_place_set_policy(const nemo_wait_policy *p);

/**
 * Turn interrupt mode on or off for the calling place (see "Interrupt
 * mode" above).  Turning it on installs the domain's signal handler the
 * first time, then handles whatever arrived while it was off.  Turning it
 * off (around code that handlers must not interrupt, or around a call
 * that would fail with EINTR) guarantees that no signal from nemo lands
 * after it returns: it waits for senders that are signalling the place
 * at that moment, and takes a signal still on its way off the thread.
 * It costs no syscall unless a signal was sent to the place since
 * interrupts were last turned off (then three: mask, sigtimedwait, mask).
 * @return 0; ENOTCONN; EBUSY if the signal has a handler not nemo's.
 */
int nemo_place_set_interrupts(bool on);

/* ------------------------------------------------------------------------
 * Send flags, shared by nemo_notify and nemo_am_send
 * ------------------------------------------------------------------------ */
enum {
	NEMO_PUSH = 1u << 0,      /**< kick the receiver even if its queue was
	                               already non-empty (TN-9's PUSH) */
	NEMO_NONBLOCK = 1u << 1,  /**< a full queue returns EAGAIN instead of waiting */
	NEMO_MORE = 1u << 2,      /**< more sends follow: enqueue, but leave the
	                               hint and the kick to the next send to the
	                               same place without NEMO_MORE, or to
	                               nemo_flush (batching: a polling receiver
	                               still sees the message at once) */
};

/** nemo_flush(): every place with deferred sends.  (Like NEMO_PLACE_NONE,
 *  its index is beyond NEMO_PLACES_MAX: no place has this id.) */
#define NEMO_PLACE_ALL ((nemo_place_id)0xFFFFFFFFFFFFFFFEull)

/**
 * Publish the sends the calling place deferred with NEMO_MORE to dest
 * (or to every place: NEMO_PLACE_ALL): set the hint, kick if needed.
 * @return 0; ENOTCONN; ESRCH for an unknown dest.
 */
int nemo_flush(nemo_place_id dest);

#ifdef __cplusplus
}
#endif

#endif /* NEMO_DOMAIN_H */
