/*
 * nemo/mpi.h - a nemo domain that spans MPI ranks (built when CMake finds
 * MPICH; library libnemo-mpi, pkg-config nemo-mpi).  docs/mpi.md is the
 * page for MPI users.
 *
 * Each rank keeps its own nemo domain (nemo/domain.h); nemo_mpi_create
 * binds it to a communicator.  From then on a place of another rank has
 * an id like any place (a "remote id": rank, index, generation), and the
 * ordinary calls reach it: nemo_am_send, nemo_am_sendv, nemo_am_reply
 * (a handler's msg->src is the remote id of the sender, so replies just
 * work) and nemo_notify.  Handlers run on the destination place's thread,
 * at the same moments as for local messages (its polls, waits, threshold
 * checks, interrupts, the poll layer's progress thread).  The ordinary
 * calls receive: nemo_poll, nemo_place_wait and nemo_place_wait_for
 * drive MPI under every strategy (the owner of a SEND / CHECK / WATCHDOG
 * binding progresses MPI in them; asleep in a wait, it looks every
 * 16 us doubling to idle_max_ns, since MPI cannot wake it); the
 * nemo_mpi_poll / nemo_mpi_wait / nemo_mpi_wait_for below are those
 * calls with the binding's checks.
 *
 * Guarantees.  Messages from one place to one remote place are handled
 * in the order sent, each exactly once (MPI's non-overtaking order on one
 * communicator and tag, then the destination's local ring).  Payloads up
 * to NEMO_AM_PAYLOAD_MAX, as locally.  A send returns 0 once MPI took
 * the message, or once it is queued for the binding to send (below);
 * errors that only the destination rank can see (the place left, an
 * action without a handler there) drop the message there and count it
 * (nemo_mpi_counters.dropped): check ids with a request and its reply
 * where that matters.  nemo_am_send_batch, nemo_am_broadcast and the
 * bound sends (nemo_am_bind) take local ids only (ESRCH for a remote
 * one).
 *
 * Flow control, as locally.  MPI holds at most 16 sends to a rank that
 * it has not completed (the rank's window; it completes them as the rank
 * takes them).  A send that finds the window full:
 *   - with NEMO_NONBLOCK returns EAGAIN at once, having sent nothing;
 *   - from a handler never waits: it is kept, in order, in the rank's
 *     queue (at most 65536 kept: ENOBUFS) and sent by the binding's
 *     progress as the window empties (nemo_mpi_counters.deferred); a
 *     handler's NEMO_NONBLOCK send is EAGAIN, as locally;
 *   - otherwise waits for room: it polls for a while, serving its place's
 *     queues (the owner also progresses MPI), then sleeps between tries,
 *     up to 1 ms, so that a sender blocked on a rank that takes nothing
 *     costs little CPU; nemo_am_send_timed / nemo_am_sendv_timed /
 *     nemo_notify_timed return ETIMEDOUT at their deadline (at once if it
 *     has passed), having sent nothing.
 * Sends from a thread that may not call MPI (a thread level below
 * MPI_THREAD_MULTIPLE) are queued for the agent (funneled): EAGAIN or a
 * wait only when 4096 wait already for that rank.
 *
 * Who calls MPI ("the agent").  Messages are received by one thread at a
 * time: the thread that created the binding (its "owner" place), the
 * domain's progress thread (THREAD; WATCHDOG when the owner is late), as the progress
 * strategy says.  The agent hands a message for another place of its rank
 * to that place's local ring (one local active message, the reserved
 * action nemo_mpi_attr.action); a message for itself it handles at once.
 * Sends: with MPI_THREAD_MULTIPLE every place calls MPI itself; with a
 * lower level, sends from places other than the agent are queued to the
 * agent (funneled), which sends them at its next progress.
 *
 * Progress strategies (nemo_mpi_attr.progress), chosen per binding at run
 * time:
 *   NEMO_MPI_PROGRESS_SEND     the owner progresses MPI in its polls and
 *                              waits (nemo_poll, nemo_place_wait,
 *                              nemo_place_wait_for, nemo_mpi_*) and at
 *                              each of its remote sends;
 *                              MPI_THREAD_FUNNELED suffices;
 *   NEMO_MPI_PROGRESS_CHECK    the same, and nemo_mpi_check() - a
 *                              threshold check to put in loops - polls
 *                              when threshold_ns has passed (Perkovic &
 *                              Keleher, "Responsiveness without
 *                              Interrupts");
 *   NEMO_MPI_PROGRESS_THREAD   the domain's progress thread (nemo/poll.h:
 *                              the one nemo_progress_start runs, started
 *                              here if none runs): it polls MPI while there
 *                              is traffic, then backs off (spin, then
 *                              futex sleeps that double up to idle_max_ns),
 *                              and local kicks (funneled sends, shutdown)
 *                              wake it at once; MPI_THREAD_FUNNELED is
 *                              enough (it is the only thread in MPI) or
 *                              MULTIPLE (places send themselves);
 *   NEMO_MPI_PROGRESS_WATCHDOG the owner polls as with CHECK; the
 *                              domain's progress thread (nemo/poll.h, as
 *                              for THREAD) wakes every watchdog_ns and,
 *                              if the owner has not progressed MPI for
 *                              that long, progresses it itself; needs
 *                              MPI_THREAD_MULTIPLE.
 *
 * Errors (0 or one of these; never a crash or a hang):
 *   EINVAL       a NULL or malformed argument
 *   EPROTONOSUPPORT the strategy needs a thread level MPI did not grant
 *   EALREADY     the domain is bound already, or the caller is not its place
 *   ENOTCONN     the caller is not a place of a bound domain
 *   EHOSTUNREACH a remote id whose rank is not in the communicator
 *   ESRCH        the place left: its rank has finalized its binding
 *                (cleanly; as a local place that left); also any remote
 *                id once our nemo_mpi_finalize has returned (the domain
 *                is not bound)
 *   ESHUTDOWN    our binding is finalizing
 *   ECONNRESET   the destination rank died (its process is gone, even if
 *                its pid now names another process; or, on another host,
 *                a send to it did not complete within peer_timeout_ns);
 *                counted in nemo_mpi_counters.dead_sends.  A wait
 *                (nemo_place_wait, nemo_place_wait_for, nemo_mpi_wait*)
 *                of a place that talked to that rank (sent to it or got
 *                a message from it) returns ECONNRESET once per such
 *                death, when it is found (at the latest about 100
 *                ms after); and
 *                nemo_dead_places (nemo/domain.h) lists the dead ranks
 *                the calling place talked to, each by the id of its
 *                place last talked to
 *   EAGAIN       NEMO_NONBLOCK and the rank's window full (flow control)
 *   ETIMEDOUT    a timed send's deadline passed with the window full
 *   ENOBUFS      a handler's send with 65536 sends kept for that rank
 *   EPERM        a call only the owner may make
 *   and those of the local calls (EMSGSIZE, ERANGE, ENOENT...).
 */
#ifndef NEMO_MPI_H
#define NEMO_MPI_H

#include <nemo/am.h>
#include <nemo/domain.h>
#include <nemo/notify.h>

#include <mpi.h>

#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A domain bound to an MPI communicator (opaque). */
typedef struct nemo_mpi nemo_mpi;

/** nemo_mpi_attr.progress */
typedef enum nemo_mpi_progress {
	NEMO_MPI_PROGRESS_SEND = 0,
	NEMO_MPI_PROGRESS_CHECK = 1,
	NEMO_MPI_PROGRESS_THREAD = 2,
	NEMO_MPI_PROGRESS_WATCHDOG = 3,
} nemo_mpi_progress;

/** Binding parameters; zero fields take the defaults. */
typedef struct nemo_mpi_attr {
	nemo_mpi_progress progress;   /**< the progress strategy (0: SEND) */
	uint32_t action;              /**< the reserved action that hands remote messages to
	                                   local places (0: max_actions - 1 of the domain; it
	                                   must not have a handler yet) */
	unsigned recv_depth;          /**< receives kept posted, 4..4096 (0: 64) */
	uint64_t threshold_ns;        /**< CHECK, WATCHDOG: nemo_mpi_check's threshold (0: 5 us) */
	uint64_t spin_ns;             /**< THREAD: how long it polls after the last traffic
	                                   before it starts sleeping (0: 50 us) */
	uint64_t idle_max_ns;         /**< THREAD: the longest sleep of the backoff, 10 us..100 ms
	                                   (0: 1 ms): the worst extra delay of a message that
	                                   arrives while the thread sleeps */
	uint64_t watchdog_ns;         /**< WATCHDOG: its period T, 10 us..1 s (0: 1 ms) */
	uint64_t peer_timeout_ns;     /**< a send to a rank on another host that MPI has not
	                                   completed after this long declares that rank dead
	                                   (0: 10 s); a rank on this host is dead when its
	                                   process is.  Also nemo_mpi_finalize's bound, on every
	                                   host: how long it waits for a rank that sends it
	                                   nothing and has not finalized */
} nemo_mpi_attr;

/**
 * Bind domain d to communicator comm.  Collective over comm: every rank
 * calls it, from a place of its domain (the binding's owner), with the
 * same progress strategy.  The communicator is duplicated; MPI must be
 * initialised (MPI_Init_thread; see the levels above).  Remote ids of
 * this rank's places are valid on every rank from the return.  While
 * its collectives run, the domain is not bound yet: a remote send made
 * meanwhile by another place of d fails with ESRCH, and makes no MPI
 * call that could hold up the owner's.
 * @return 0 with *out set; EINVAL (NULL, attribute out of range, MPI not
 *         initialised); ENOTCONN if the caller is not a place of d;
 *         EALREADY if d is bound; EPROTONOSUPPORT; EEXIST if the reserved
 *         action has a handler; ENOMEM; EIO for an MPI error.
 */
int nemo_mpi_create(nemo_domain *d, MPI_Comm comm, const nemo_mpi_attr *attr, nemo_mpi **out);

/**
 * Unbind and free.  Collective over the communicator, called by the
 * owner.  It stops new remote sends (ESHUTDOWN; a send of another place
 * that is under way, or waiting for room, finishes or fails with
 * ESHUTDOWN before the binding is touched: sending while the owner
 * finalizes is safe; no other call may use m from the call on), sends
 * what is queued, tells every rank, and goes on receiving and handing
 * over messages until every live rank has said the same: every message
 * sent before a rank's nemo_mpi_finalize is handled (places that get
 * messages must poll or leave meanwhile; leaving drops what was still to
 * come, counted).  A dead rank is not waited for, and a rank that sends
 * nothing and has not finalized is waited for at most peer_timeout_ns,
 * on every host (then it is given up on: what was queued for it is
 * dropped, counted in send_dropped).  Call it before MPI_Finalize.
 * @return 0; EINVAL for NULL; EPERM if the caller is not the owner;
 *         ECONNRESET if some rank died; ETIMEDOUT if some live rank was
 *         given up on.  In both error cases the duplicated communicator
 *         is not freed (its state is unknown).
 */
int nemo_mpi_finalize(nemo_mpi *m);

/** This rank, and the communicator's size. */
int nemo_mpi_rank(const nemo_mpi *m);
int nemo_mpi_size(const nemo_mpi *m);

/**
 * The remote id of local place `local` of this rank (to hand to other
 * ranks), or of a remote id unchanged.
 * @return 0 with *out set; EINVAL; ESRCH if local is not a place now.
 */
int nemo_mpi_id(nemo_mpi *m, nemo_place_id local, nemo_place_id *out);

/**
 * The id of whichever place occupies index `index` of rank `rank` when a
 * message arrives there (the SPMD convention: "place i of every rank"),
 * without its generation (no protection against a new occupant).
 * @return 0 with *out set; EINVAL; EHOSTUNREACH for a rank out of range;
 *         ESRCH for an index out of range.
 */
int nemo_mpi_place(nemo_mpi *m, int rank, unsigned index, nemo_place_id *out);

/** The rank of a remote id, or -1 if id is not one. */
int nemo_mpi_rank_of(nemo_place_id id);

/**
 * nemo_poll, with the binding's checks: the owner of a SEND / CHECK /
 * WATCHDOG binding progresses MPI in it (any place's nemo_poll does the
 * same); with a THREAD binding, any place just polls.
 * @param handled receives the handlers run here (may be NULL)
 * @return 0; EINVAL; ENOTCONN; EPERM for a place other than the owner
 *         of a SEND / CHECK / WATCHDOG binding (it just nemo_polls: use
 *         nemo_poll there).
 */
int nemo_mpi_poll(nemo_mpi *m, unsigned *handled);

/**
 * nemo_place_wait, with the binding's checks: wait until at least one
 * handler ran on the calling place (remote or local messages), or the
 * deadline (CLOCK_MONOTONIC) passes.  The owner of a SEND / CHECK /
 * WATCHDOG binding progresses MPI while it waits (MPI has no descriptor
 * to sleep on: it sleeps in slices of 16 us doubling to idle_max_ns);
 * the other places sleep until a local kick (looking every 100 ms for
 * a dead rank).
 * @return 0; ETIMEDOUT; EINVAL; ENOTCONN; ECONNRESET once per death of a
 *         rank the place talked to (nemo_dead_places says which).
 */
int nemo_mpi_wait(nemo_mpi *m, const struct timespec *abstime, unsigned *handled);

/**
 * Wait until *word != old (as nemo_place_wait_for, nemo/domain.h): the
 * word is read at the start and after every poll, so a reply that an
 * interrupt or the progress thread handled just before the call is not
 * waited for again.  Write the word from this place's handlers with an
 * atomic store.
 * It is nemo_place_wait_for with the binding's checks (it drives MPI as
 * nemo_mpi_wait does).
 * @return 0 once *word != old; ETIMEDOUT; EINVAL (NULL m or word, a
 *         malformed abstime); ENOTCONN; ECONNRESET once per death of a
 *         rank the place talked to.
 */
int nemo_mpi_wait_for(nemo_mpi *m, const uint64_t *word, uint64_t old, const struct timespec *abstime,
		      unsigned *handled);

/**
 * The threshold check of NEMO_MPI_PROGRESS_CHECK and WATCHDOG: polls
 * (nemo_mpi_poll) when threshold_ns has passed since the owner last
 * progressed MPI; otherwise a clock read and a compare.  A no-op on
 * other threads and other strategies.
 */
void nemo_mpi_check(nemo_mpi *m);

/** What a binding has done. */
typedef struct nemo_mpi_counters {
	uint64_t sent;                /**< messages given to MPI */
	uint64_t funneled;            /**< sends queued to the agent (no MPI_THREAD_MULTIPLE) */
	uint64_t received;            /**< messages received from MPI */
	uint64_t direct;              /**< handled at once by the agent (for itself) */
	uint64_t handed;              /**< handed to another local place's ring */
	uint64_t dropped;             /**< dropped here: the place left, no handler... */
	uint64_t progress_calls;      /**< progress passes (any agent) */
	uint64_t thread_sleeps;       /**< THREAD: futex sleeps of the backoff */
	uint64_t thread_wakeups;      /**< THREAD: sleeps ended by a local kick */
	uint64_t watchdog_takeovers;  /**< WATCHDOG: passes the progress thread took over */
	uint64_t thread_cpu_ns;       /**< CPU time of the binding's thread: the domain's progress thread
					   (THREAD; also what it spent on served places), the watchdog */
	uint64_t dead_ranks;          /**< ranks found dead */
	uint64_t deferred;            /**< sends from handlers kept in their rank's queue (its
	                                   window was full), sent later by the binding's progress */
	uint64_t send_dropped;        /**< sends that had returned 0 but that MPI never delivered:
	                                   kept, funneled or not completed when their rank died
	                                   (each batch logged under NEMO_DEBUG) */
	uint64_t dead_sends;          /**< sends refused with ECONNRESET (the rank was dead) */
} nemo_mpi_counters;

/** @return 0; EINVAL for NULL arguments. */
int nemo_mpi_get_counters(nemo_mpi *m, nemo_mpi_counters *out);

/** The thread level MPI granted (MPI_Query_thread, read at create). */
int nemo_mpi_thread_level(const nemo_mpi *m);

#ifdef __cplusplus
}
#endif

#endif /* NEMO_MPI_H */
