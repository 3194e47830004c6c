/*
 * mpi_internal.h - the MPI layer's shared structures and protocols
 * (nemo/mpi.h, docs/mpi.md).  Internal: not installed.  The layer is
 * five files along its protocols, each using only those before it:
 * peers.c (ids, dead ranks, what each place talked to, the bindings
 * table), record.c (a rank's window and queue), progress.c (the agent's
 * pass, the hand-over, the ordinary calls' drive, the binding's thread),
 * send.c (the remote sends), mpi.c (create, finalize, the public calls).
 *
 * THE WIRE.  One message per nemo send: struct wire (96 bytes), sent as
 * MPI_BYTE with tag NEMO_MPI_TAG on a duplicate of the user's
 * communicator.  It carries the sender's remote id, the destination's
 * remote id, arg, the action or event id as the sender named it, the
 * payload (a reply's tag first, as in the local ring) and the kind: AM,
 * NOTIFY or BYE (finalize).  Events are resolved at the destination rank
 * (the sender cannot read a remote place's table).  BYE goes with
 * MPI_Issend, so that it completes only once its rank has matched it:
 * a standard send may complete while the message still sits in the
 * sender's MPI, and a rank that freed the communicator and went on was
 * seen to deliver its BYE only after the others had given up on it.
 *
 * REMOTE IDS.  bits 63..61 = 100 (src/messaging/remote.h), 60..40 the
 * rank, 39..16 the low 24 bits of the place's generation (all ones: any
 * occupant, nemo_mpi_place), 15..0 the index.
 *
 * THE AGENT.  At most one thread at a time receives: it holds agent_lock
 * (taken with trylock everywhere, so a handler's send that would poll
 * nested inside a poll just skips it).  It keeps recv_depth receives
 * posted (MPI_ANY_SOURCE, one tag) and tests them in the order posted,
 * which is MPI's matching order: messages from one rank come out in the
 * order that rank sent them (MPI's non-overtaking rule), and each posted
 * receive completes once, so nothing is duplicated.  A message for the
 * agent's own place is handled at once; one for another place of the rank
 * is handed over: a local active message, the reserved action, whose arg
 * points at the receive slot.  The slot goes back to MPI only after the
 * destination's handler ran (slot->done, below).  A hand-over that finds
 * the local ring full (EAGAIN) waits at the head of a FIFO of its own,
 * and the agent takes nothing more from MPI until it went: per-pair order
 * is kept through the hand-over, at the price of head-of-line blocking
 * while one local place is slow.  A pass takes at most recv_depth
 * messages from MPI: a flood that arrives as fast as it is taken cannot
 * hold the pass, and the poll or wait that called it, forever.
 *
 * AGENTS AND ORDER.  The agent may change (the owner and the watchdog
 * thread; the progress thread and, in finalize, the owner), and a
 * message reaches its place by one of two paths: at once (the agent's own
 * place) or through the ring from the agent's place to it.  Rings from
 * different senders are drained in no fixed order, and the direct path
 * overtakes anything in a ring.  So the agent counts, per local index,
 * the slots handed to it and not yet done, and by which agent place: a
 * message for an index with slots outstanding through another path waits
 * (EAGAIN, the head of the pending FIFO) until they are done.
 *
 * THE LOCK-FREE HANDSHAKE: slot->done.  States of a slot (agent-only
 * field st): POSTED (MPI owns the buffer) -> RECEIVED -> HANDED (a local
 * place's ring holds a pointer to it) -> POSTED again.  While HANDED, the
 * destination's handler reads the wire, runs the user's handler, then
 * stores done = 1 with release; the agent loads done with acquire and
 * only then reposts the buffer (MPI_Irecv writes it).  The agent stores
 * done = 0 (relaxed) before the hand-over; the hand-over itself (the
 * local ring's publication, a release) orders that store and the wire's
 * contents before the handler's reads.  So MPI never overwrites a wire
 * that a handler still reads, and a slot whose done the agent missed is
 * seen at its next pass: nothing is lost, only reposted later.  The
 * handler touches neither the slot nor the binding after its done store,
 * except to kick a progress thread (THREAD): that kick is bracketed by
 * kicking (fetch_add before the done store, fetch_sub with release after
 * the kick), and finalize frees the binding only once it has seen every
 * slot back and kicking == 0 (acquire).
 *
 * SENDS: A RANK'S WINDOW AND QUEUE.  Every send to rank r goes through
 * r's peer record, under its lock (a leaf: only MPI is called inside it).
 * The record holds up to FLIGHT_MAX sends MPI has taken (MPI_Isend
 * posted, not yet complete; MPI owns their buffers, copies of the wire),
 * in posting order, and a FIFO of sends not yet given to MPI: kept by
 * handlers, or funneled by threads that may not call MPI.
 *   MS1 A send goes to MPI only when the FIFO is empty and the window has
 *       room.  Otherwise it is kept at the FIFO's tail (a handler's, up
 *       to DEFER_MAX: ENOBUFS; a thread's that may not call MPI, while
 *       the FIFO holds fewer than FUNNEL_MAX), or it waits (MS4), or it
 *       returns having sent nothing: EAGAIN under NEMO_NONBLOCK (a
 *       handler's NONBLOCK send too, as locally), ETIMEDOUT at its
 *       deadline, ESHUTDOWN once finalize began, ECONNRESET once r is
 *       dead.  So MPI gets r's sends in the order they entered the
 *       record, and MPI keeps that order: per-place order, never a
 *       duplicate (a send is posted once, or not at all).
 *   MS2 Whoever holds the lock and may call MPI first reaps (MPI_Test of
 *       the window, oldest first, stopping at the first incomplete; a
 *       completion rings r's doorbell) and moves the FIFO's head into
 *       the window while it has room.  The agent's pass does it for
 *       every rank with work (npending > 0): what handlers kept is sent
 *       by the binding's progress, in order.
 *   MS3 A handler never waits, and neither does NEMO_NONBLOCK.
 *   MS4 A blocking send that finds no room polls for SEND_SPIN_NS (each
 *       round reaps, serves its place's queues; the owner progresses
 *       MPI), then sleeps between rounds, SEND_NAP_MIN_NS doubling to
 *       SEND_NAP_MAX_NS, never past its deadline.  Room appears only
 *       when r drains and someone here calls MPI, so a long wait costs
 *       one round per nap, not a CPU.
 *   MS5 A dead rank's FIFO is dropped by the next holder of the lock,
 *       its window (MPI_Cancel, MPI_Request_free) by the next that may
 *       call MPI: counted in send_dropped (their senders were told 0),
 *       one NEMO_DEBUG line a batch.  A dropped window's buffers are
 *       never freed or reused (MPI may still read them).
 * fl_*, q_* change only under the lock.  busy (fl_n + q_n) is stored
 * under it and read without it (relaxed): the agent's scan skips idle
 * ranks by it, a hint (the lock orders the data).  npending counts the
 * ranks with busy > 0 (seq_cst RMWs, read by the progress thread's sleep
 * check DBT3 after its DBT1).
 *
 * THE BINDING'S LIFETIME: PINS.  A send finds its domain's binding in a
 * static table of BIND_MAX slots {d, m, pins} and uses it pinned:
 *   MP0 load d (acquire): not its domain -> next slot; load m (relaxed):
 *       NULL -> the binding is finalizing (ESHUTDOWN), next slot;
 *   MP1 fetch_add pins (seq_cst);  MP2  load m (seq_cst): NULL, or
 *       another domain's (the slot was reused) -> fetch_sub, next slot;
 *   MP3 the send; then fetch_sub pins (release).
 * nemo_mpi_finalize: MF1 closing = 1 (seq_cst: a send that reads it, also
 * one waiting for room, leaves with ESHUTDOWN, before its next MPI call);
 * it stops the binding's thread (which would only compete for MPI with
 * the sends finishing); MF2 store m = NULL (seq_cst); MF3 wait until a
 * load of pins (seq_cst) reads 0, napping.  Either MP2 reads NULL (the
 * sender never touches the binding), or MP2 precedes MF2 in the seq_cst
 * order, so MP1 precedes MF3, and MF3 waits for MP3, whose release orders the
 * sender's last access before everything finalize does next.  After MF2
 * no sender passes MP0 with this m, so MF3's wait ends.  From MF3 on only the owner uses the binding; at the end d is
 * cleared and the binding freed (a later send: ESRCH, the domain is not
 * bound).  Publication at create stores m, then d (release): MP0's
 * acquire of d sees m's contents.
 *
 * THE PROGRESS THREAD'S SLEEP (NEMO_MPI_PROGRESS_THREAD).  The thread is
 * the domain's progress thread, the poll layer's (src/poll/progress.c,
 * SOURCES): the binding is its source (thr_attach; the src_* ops of
 * progress.c), started by the binding if none runs.  MPI gives no
 * descriptor or futex to sleep on, so the thread cannot be woken by MPI
 * traffic.  It waits through the waiter layer's one wait loop
 * (nemo__wait_loop): it polls while traffic flows and for spin_ns after
 * (a HYBRID policy when the binding started it; none after a sleep that
 * found nothing), then sleeps - on its waiter slot and the doorbell at
 * once - with a timeout that doubles from 16 us up to idle_max_ns (the
 * source's slice, src_slice: a sleep that ends at it doubles it): a
 * message that arrives while it sleeps waits at most idle_max_ns; with
 * every peer able to ring its doorbell the timeout is long, a safety
 * net, unless sends wait in its ranks' records (npending), which need
 * its MPI calls to move: then the backoff.  Local kicks wake it at once:
 * a funneled send, a handler that finished a handed slot, finalize.
 * The doorbell is one published-state word, bell->state (RUNNING or
 * SLEEPING), and the kick is the waiter layer's (THE RAW WORD,
 * waiter.c: nemo__word_kick and nemo__word_sleep):
 *   thread:  DBT1 store(state, SLEEPING, seq_cst) and a fence (the
 *            progress thread's publication of its source's word); DBT3
 *            a last pass (src_pending: try_progress) and its own
 *            re-checks (seq_cst) -> store RUNNING, no sleep; DBT4
 *            futex_waitv on state == SLEEPING and its slot, with the
 *            slice as timeout; DBT5 exchange(state, RUNNING): it read
 *            RUNNING -> a kick woke it (src_slept counts it).  (Under
 *            WATCHDOG the thread has no doorbell: its slice wakes it.)
 *   kicker:  DBK1 its work (a FIFO push under its rank's lock, a done
 *            store, stop); DBK2 a seq_cst fence; DBK3 nemo__word_kick: load
 *            state (seq_cst), SLEEPING -> CAS it to RUNNING, and the one
 *            that wins makes the FUTEX_WAKE.
 *   ring (a rank of this host whose send to us MPI completed, record.c):
 *            DBR1 a seq_cst fence (MPI's writes of the message are plain
 *            stores); DBR2 nemo__word_kick, as DBK3, with shared flags.
 * DBK1;DBK2;DBK3 (or the message;DBR1;DBR2) against DBT1;DBT3 is the
 * store-buffering pattern with full fences: the kicker reads SLEEPING
 * (and wins the CAS or finds another kicker won it), or DBT3 sees its
 * work.  A CAS that lands between DBT3 and DBT4 leaves RUNNING in the
 * word, so DBT4's futex_wait returns at once.  Only the CAS's winner
 * wakes: a burst of kicks costs one FUTEX_WAKE.  models/doorbell.pml
 * checks this with x86 store buffers.  A lost kick would cost at most
 * one backoff period, never a message: the thread polls MPI after every
 * sleep.
 *
 * THE WATCHDOG (NEMO_MPI_PROGRESS_WATCHDOG).  The owner polls (threshold
 * checks, its sends, nemo_mpi_poll) and stamps last_progress; a thread
 * wakes every watchdog_ns and takes over one pass when the stamp is older
 * than that.  What it receives for the owner goes through the owner's
 * ring, so the owner's local strategy (polls, interrupts, the poll
 * layer's watchdog) decides when it runs.
 *
 * DEAD RANKS.  MPICH does not report a peer that exited (with
 * -disable-auto-cleanup a send to one blocks, or completes and is lost).
 * Every rank learns every rank's host, pid namespace, pid and start time
 * at create, and opens a reference to each peer of its host and pid
 * namespace once (src/platform/proc.h: a pidfd of the process that
 * started at that time), kept until finalize.  An agent or a sender asks
 * them every LIVE_CHECK_NS (one poll(2) each; one thread at a time,
 * live_lock, since a reference is not thread-safe).  A rank whose pid
 * another process has taken is dead all the same: the pidfd names the
 * rank's process, not the pid.  A rank on another host is declared dead
 * when a send to it stays incomplete in its window for peer_timeout_ns
 * (on this host the pidfd says it: a slow peer is not a dead one).
 * Sends to a dead rank fail with ECONNRESET (dead_sends).  The agent's
 * pass asks before it moves any record (MS2), so the record of a rank
 * found dead is dropped and counted (MS5), not handed to an MPI that may
 * complete sends to a dead process and lose them uncounted.  Asking
 * means knowing: live_check returns false while another thread's check
 * is under way (next_live is stored only once a check has marked what it
 * found), and then neither the pass nor a send hands anything to MPI for
 * a rank of this host - else a rank dead for longer than LIVE_CHECK_NS
 * could be sent its record while the checker that found it was preempted.
 *
 * FINALIZE'S BOUNDED WAIT.  After MF3 the owner drains every record, says
 * BYE to every live rank and receives until every live rank has said it.
 * It waits for each rank no longer than peer_timeout_ns: from the later
 * of its own BYE and the last message it received from that rank (a
 * rank that still sends is still finalizing), and, while draining, for a
 * send MPI does not complete - on this host too, where a live rank that
 * never finalizes would otherwise hold it forever.  Such a rank is given
 * up on (gave_up, owner-only): its record is dropped (send_dropped), and
 * finalize returns ETIMEDOUT, or ECONNRESET if some rank died.
 */
#ifndef NEMO_MPI_INTERNAL_H
#define NEMO_MPI_INTERNAL_H

#include <nemo/mpi.h>
#include <nemo/platform.h>

#include "../messaging/modes.h"
#include "../messaging/remote.h"
#include "../poll/service.h"
#include "../platform/fail.h"
#include "../platform/proc.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NEMO_MPI_TAG 0x6e6d
#define REMOTE_TAG (2ull << 62)
#define RANK_BITS 21u             /* bit 61 is the transport's (remote.h) */
#define RANK_MAX ((1u << RANK_BITS) - 1u)
#define GEN24 0xFFFFFFull
#define LIVE_CHECK_NS 50000000ull

/* A rank's record (SENDS, above). */
#define FLIGHT_MAX 16u            /* sends MPI holds, not yet complete */
#define FUNNEL_MAX 4096u          /* sends queued by threads that may not call MPI */
#define DEFER_MAX 65536u          /* sends kept in all (handlers' too), as overflow_max */
#define Q_FIRST 64u               /* the FIFO's first capacity; it doubles */
#define SEND_SPIN_NS 50000.0      /* MS4: a blocked send polls this long, */
#define SEND_NAP_MIN_NS 16000ull  /* then sleeps from this, */
#define SEND_NAP_MAX_NS 1000000ull /* doubling up to this */

enum { K_AM = 1, K_NOTIFY = 2, K_BYE = 3 };
enum { ST_POSTED = 0, ST_HANDED = 1, ST_PENDING = 2, ST_IDLE = 3 };

typedef struct wire {
	uint64_t src, dest, arg;
	uint32_t kind, id, len, tagged;
	unsigned char payload[NEMO__WIRE_PAYLOAD_MAX];
} wire;

static inline int wire_bytes(const wire *w)
{
	return (int)(offsetof(wire, payload) + w->len);
}

struct nemo_mpi;
typedef struct rslot {
	wire w;
	MPI_Request req;
	int st;                       /* agent only */
	unsigned di;                  /* HANDED: the local index it went to */
	_Atomic int done;             /* the handshake above */
	struct nemo_mpi *m;
} rslot;

/* A rank's doorbell: a page of shared memory that peers on its host map
 * (THE PROGRESS THREAD'S SLEEP).  state is the published state of the
 * rank's binding thread (NEMO_WAITER_RUNNING or NEMO_WAITER_SLEEPING),
 * and the futex word it sleeps on. */
typedef struct bell {
	_Atomic uint32_t state;
} bell;

/* A send MPI holds (MS2): the buffer is MPI's until req completes. */
typedef struct flight {
	wire w;
	MPI_Request req;
	uint64_t posted;              /* ticks */
} flight;

typedef struct peer {
	uint64_t host, pidns, start;
	int pid;
	bool local;                   /* same host and pid namespace: its pid tells its life */
	nemo__proc_ref proc;          /* local: opened at create (live_lock) */
	_Atomic int bye, dead;
	bool gave_up;                 /* finalize (owner only): not waited for any more */
	bell *bell;                   /* mapped when on this host (THREAD bindings) */
	uint64_t heard;               /* agent: ticks of the last message received from it */
	/* Sends to it (SENDS, above): under lock. */
	pthread_mutex_t lock;
	flight *fl;                   /* FLIGHT_MAX entries (mmap'd at first use) */
	unsigned fl_head, fl_n;
	bool fl_lost;                 /* a window dropped while MPI held it: never freed */
	wire *q;                      /* the FIFO: q_cap entries (mmap'd), q_n from q_head */
	unsigned q_head, q_n, q_cap;
	_Atomic unsigned busy;        /* fl_n + q_n */
	/* Its death, as the ordinary calls report it (DEAD RANKS). */
	_Atomic uint64_t dseq;        /* the death's number (1, 2, ...; 0 while it lives) */
	_Atomic uint64_t last_id;     /* the remote id of it that a place here last talked to */
	_Atomic uint64_t talk[NEMO_PLACES_MAX / 64];   /* local indices that talked to it */
	_Atomic uint64_t told[NEMO_PLACES_MAX / 64];   /* local indices told of its death: a send's
							 * ECONNRESET or a drive's report (once) */
} peer;

/* What a local place has been told (its own thread only; reset when its
 * index has a new occupant): deaths, and its wait's backoff. */
typedef struct prec {
	nemo_place_id id;
	uint64_t seen;                /* ndead when it was last told */
	uint64_t nap;                 /* the owner's slice: 16 us doubling to idle_max_ns */
} prec;

struct nemo_mpi {
	nemo_domain *d;
	MPI_Comm comm;
	int rank, size, level;
	unsigned slot;                /* its entry in bindings[] */
	nemo_mpi_progress prog;
	uint32_t action;
	nemo_place_id owner_id;
	pthread_t owner;
	uint64_t host, pidns;
	peer *peers;
	unsigned K;
	rslot *slots;
	unsigned *postq, post_head, post_n;    /* posted, in posting order */
	unsigned *pendq, pend_head, pend_n;    /* waiting to be handed over */
	unsigned handed_n, idle_n;             /* slots HANDED, slots IDLE (the reap's work) */
	unsigned out_n[NEMO_PLACES_MAX];       /* per local index: slots HANDED to it, */
	nemo_place_id out_by[NEMO_PLACES_MAX]; /* and the agent place that handed them */
	pthread_mutex_t agent_lock;
	pthread_mutex_t live_lock;             /* the proc references */
	pthread_mutex_t dead_lock;             /* numbers the deaths (a leaf) */
	_Atomic uint64_t ndead;                /* deaths so far (release after the dseq) */
	prec *precs;                           /* per local index (nemo__domain_places) */
	_Atomic uint64_t next_live;            /* ticks of the next liveness check */
	_Atomic int closing;
	_Atomic int bounded;                   /* finalize: W's timeout for every host */
	_Atomic unsigned npending;             /* ranks with busy > 0 */
	_Atomic unsigned kicking;              /* handed handlers between done and their kick */
	/* THREAD and WATCHDOG: the domain's progress thread serves the
	 * binding (pt); pt_thread is that thread, pt_on while it holds the
	 * binding's source */
	nemo_progress *pt;
	pthread_t pt_thread;
	nemo_place *pt_place;         /* its own place (the agent's) while pt_on */
	_Atomic bool pt_on;
	uint64_t thr_nap;             /* its last slice's backoff (src_slice) */
	int pt_join_err;              /* src_start's nemo_place_join failed */
	bell *bell;                   /* this rank's doorbell (shared memory, or bell_local) */
	bell bell_local;
	int bell_flags;               /* NEMO_FUTEX_SHARED when bell is shared memory */
	bool all_belled;              /* every other rank can ring us (same host, mapped) */
	uint64_t thr_cpu_ns;
	_Atomic uint64_t last_progress;        /* ticks */
	uint64_t check_due, threshold_ticks;
	nemo_mpi_attr attr;
	/* counters */
	_Atomic uint64_t c_sent, c_funneled, c_received, c_direct, c_handed, c_dropped, c_progress,
		c_sleeps, c_wakeups, c_takeovers, c_dead, c_deferred, c_send_dropped, c_dead_sends;
};

#define CADD(m, f) atomic_fetch_add_explicit(&(m)->f, 1, memory_order_relaxed)

/* MS4's rounds: poll for SEND_SPIN_NS from the first, then sleep between
 * rounds, doubling, never past abstime (compared, never subtracted: a
 * deadline 2^62 s away is a long one, not an overflow). */
/* The bindings table (PINS): one per domain, found from the sending
 * place's domain (peers.c). */
#define BIND_MAX 16
typedef struct bslot {
	_Atomic(nemo_domain *) d;
	nemo_mpi *_Atomic m;
	_Atomic unsigned pins;
} bslot;

typedef struct naps {
	uint64_t t0, nap_ns;
} naps;

static inline nemo_place_id rid(int rank, unsigned idx, uint64_t gen24)
{
	return REMOTE_TAG | ((uint64_t)rank << 40) | ((gen24 & GEN24) << 16) | idx;
}

static inline bool is_dead(const peer *p)
{
	return atomic_load_explicit(&p->dead, memory_order_relaxed) != 0;
}

/* Is the calling thread the domain's progress thread, serving the binding? */
static inline bool on_progress_thread(nemo_mpi *m)
{
	return atomic_load_explicit(&m->pt_on, memory_order_acquire) && pthread_equal(pthread_self(), m->pt_thread);
}

static inline bool is_agent_thread(nemo_mpi *m)
{
	if (m->prog == NEMO_MPI_PROGRESS_THREAD)
		return on_progress_thread(m);
	return pthread_equal(pthread_self(), m->owner);
}

/* May the calling thread call MPI? */
static inline bool may_call_mpi(nemo_mpi *m)
{
	return m->level == MPI_THREAD_MULTIPLE || is_agent_thread(m);
}

static inline double since_ns(uint64_t t)
{
	return nemo_ticks_to_ns((int64_t)(nemo_ticks() - t));
}

/* Is CLOCK_MONOTONIC past abstime (NULL: never)? */
static inline bool past(const struct timespec *abstime)
{
	if (!abstime)
		return false;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > abstime->tv_sec || (now.tv_sec == abstime->tv_sec && now.tv_nsec >= abstime->tv_nsec);
}

/* Across the layer's files; hidden: libnemo-mpi exports nemo_mpi_* only. */
#pragma GCC visibility push(hidden)

/* peers.c: ids, dead ranks, who talked to whom, the bindings (PINS;
 * bind_lock guards nbound and the slots' d) */
extern bslot bindings[BIND_MAX];
extern pthread_mutex_t bind_lock;
extern unsigned nbound;
nemo_mpi *pin(nemo_domain *d, unsigned *slot, bool *closing);
void unpin(unsigned slot);
bool bound_locked(nemo_domain *d);
nemo_place_id local_of(nemo_mpi *m, nemo_place_id r);
void mark_dead(nemo_mpi *m, int r);
prec *prec_of(nemo_mpi *m, const nemo_place *me);
void talk(nemo_mpi *m, const nemo_place *me, int r, nemo_place_id id);
bool talked(const nemo_mpi *m, int r, unsigned idx);
/* Place me was told of rank r's death (a send's ECONNRESET, a drive's
 * report): true if it had been told before. */
bool tell(nemo_mpi *m, const nemo_place *me, int r);
bool live_check(nemo_mpi *m);

/* record.c: a rank's record (SENDS: MS1-MS5), rings, naps */
void ring(nemo_mpi *m, int r);
void *pages(size_t bytes);
void settle(nemo_mpi *m, peer *p);
void drop_record(nemo_mpi *m, peer *p, int r, bool mpi);
unsigned reap(nemo_mpi *m, peer *p, int r);
int isend(nemo_mpi *m, peer *p, int r, const wire *w);
bool have_window(peer *p);
unsigned push(nemo_mpi *m, peer *p, int r, bool mpi);
int keep(peer *p, const wire *w);
void thr_kick(nemo_mpi *m);
void nap_round(naps *b, const struct timespec *abstime);

/* progress.c: the agent, the hand-over, the drive, the binding's thread */
unsigned try_progress(nemo_mpi *m);
int post(nemo_mpi *m, unsigned i);
void handed_handler(const nemo_am_msg *msg, void *ctx);
unsigned progress(nemo_mpi *m);
int op_drive(nemo_domain *d, const char *report, unsigned *handled, uint64_t *slice_ns);
int op_dead(nemo_place_id *ids, size_t cap, size_t *n, uint64_t *total);
int thr_attach(nemo_mpi *m);
int wd_attach(nemo_mpi *m);

/* send.c: the hook's sends */
int op_am(nemo_place_id dest, uint32_t id, uint64_t arg, const void *payload, size_t len,
	   unsigned flags, const uint64_t *tag, const struct timespec *abstime);
int op_notify(nemo_place_id dest, uint32_t chan, unsigned flags, const struct timespec *abstime);

#pragma GCC visibility pop

#endif /* NEMO_MPI_INTERNAL_H */
