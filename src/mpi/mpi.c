/*
 * mpi.c - a nemo domain that spans MPI ranks (nemo/mpi.h, docs/mpi.md).
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
 *   W1  A send goes to MPI only when the FIFO is empty and the window has
 *       room.  Otherwise it is kept at the FIFO's tail (a handler's, up
 *       to DEFER_MAX: ENOBUFS; a thread's that may not call MPI, while
 *       the FIFO holds fewer than FUNNEL_MAX), or it waits (W4), or it
 *       returns having sent nothing: EAGAIN under NEMO_NONBLOCK (a
 *       handler's NONBLOCK send too, as locally), ETIMEDOUT at its
 *       deadline, ESHUTDOWN once finalize began, ECONNRESET once r is
 *       dead.  So MPI gets r's sends in the order they entered the
 *       record, and MPI keeps that order: per-place order, never a
 *       duplicate (a send is posted once, or not at all).
 *   W2  Whoever holds the lock and may call MPI first reaps (MPI_Test of
 *       the window, oldest first, stopping at the first incomplete; a
 *       completion rings r's doorbell) and moves the FIFO's head into
 *       the window while it has room.  The agent's pass does it for
 *       every rank with work (npending > 0): what handlers kept is sent
 *       by the binding's progress, in order.
 *   W3  A handler never waits, and neither does NEMO_NONBLOCK.
 *   W4  A blocking send that finds no room polls for SEND_SPIN_NS (each
 *       round reaps, serves its place's queues; the owner progresses
 *       MPI), then sleeps between rounds, SEND_NAP_MIN_NS doubling to
 *       SEND_NAP_MAX_NS, never past its deadline.  Room appears only
 *       when r drains and someone here calls MPI, so a long wait costs
 *       one round per nap, not a CPU.
 *   W5  A dead rank's FIFO is dropped by the next holder of the lock,
 *       its window (MPI_Cancel, MPI_Request_free) by the next that may
 *       call MPI: counted in send_dropped (their senders were told 0),
 *       one NEMO_DEBUG line a batch.  A dropped window's buffers are
 *       never freed or reused (MPI may still read them).
 * fl_*, q_* change only under the lock.  busy (fl_n + q_n) is stored
 * under it and read without it (relaxed): the agent's scan skips idle
 * ranks by it, a hint (the lock orders the data).  npending counts the
 * ranks with busy > 0 (seq_cst RMWs, read by the progress thread's sleep
 * check T3 after its T1).
 *
 * THE BINDING'S LIFETIME: PINS.  A send finds its domain's binding in a
 * static table of BIND_MAX slots {d, m, pins} and uses it pinned:
 *   P0  load d (acquire): not its domain -> next slot; load m (relaxed):
 *       NULL -> the binding is finalizing (ESHUTDOWN), next slot;
 *   P1  fetch_add pins (seq_cst);  P2  load m (seq_cst): NULL, or
 *       another domain's (the slot was reused) -> fetch_sub, next slot;
 *   P3  the send; then fetch_sub pins (release).
 * nemo_mpi_finalize: F1 closing = 1 (seq_cst: a send that reads it, also
 * one waiting for room, leaves with ESHUTDOWN, before its next MPI call);
 * it stops the binding's thread (which would only compete for MPI with
 * the sends finishing); F2 store m = NULL (seq_cst); F3 wait until a
 * load of pins (seq_cst) reads 0, napping.  Either P2 reads NULL (the
 * sender never touches the binding), or P2 precedes F2 in the seq_cst
 * order, so P1 precedes F3, and F3 waits for P3, whose release orders the
 * sender's last access before everything finalize does next.  After F2
 * no sender passes P0 with this m, so F3's wait ends.  From F3 on only the owner uses the binding; at the end d is
 * cleared and the binding freed (a later send: ESRCH, the domain is not
 * bound).  Publication at create stores m, then d (release): P0's
 * acquire of d sees m's contents.
 *
 * THE PROGRESS THREAD'S SLEEP (NEMO_MPI_PROGRESS_THREAD).  MPI gives no
 * descriptor or futex to sleep on, so the thread cannot be woken by MPI
 * traffic.  It polls while traffic flows and for spin_ns after, then
 * sleeps with a timeout that doubles from 16 us up to idle_max_ns: a
 * message that arrives while it sleeps waits at most idle_max_ns; with
 * every peer able to ring its doorbell the timeout is long, a safety
 * net, unless sends wait in its ranks' records (npending), which need
 * its MPI calls to move: then the backoff.  Local kicks wake it at once:
 * a funneled send, a handler that finished a handed slot, finalize.  The
 * store-buffering handshake:
 *   thread:  T1 store sleeping = 1 (seq_cst); T2 s = load kick (seq_cst);
 *            T3 a last pass (try_progress) and stop (seq_cst) -> cancel;
 *            T4 futex_wait(kick, s, timeout); store sleeping = 0.
 *   kicker:  K1 its work (a FIFO push under its rank's lock, a done
 *            store, stop); K2 fetch_add kick (seq_cst); K3 load sleeping
 *            (seq_cst): 1 -> FUTEX_WAKE.
 * Either K3 sees T1 (and wakes, or T4 sees kick changed and does not
 * sleep), or K2 precedes T1 in the seq_cst order, so T2 reads the new
 * kick and T3 sees the work.  A lost kick would cost at most one backoff
 * period, never a message: the thread polls MPI after every sleep.
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
 * pass asks before it moves any record (W2), so the record of a rank
 * found dead is dropped and counted (W5), not handed to an MPI that may
 * complete sends to a dead process and lose them uncounted.
 *
 * FINALIZE'S BOUNDED WAIT.  After F3 the owner drains every record, says
 * BYE to every live rank and receives until every live rank has said it.
 * It waits for each rank no longer than peer_timeout_ns: from the later
 * of its own BYE and the last message it received from that rank (a
 * rank that still sends is still finalizing), and, while draining, for a
 * send MPI does not complete - on this host too, where a live rank that
 * never finalizes would otherwise hold it forever.  Such a rank is given
 * up on (gave_up, owner-only): its record is dropped (send_dropped), and
 * finalize returns ETIMEDOUT, or ECONNRESET if some rank died.
 */
#define _GNU_SOURCE
#include <nemo/mpi.h>
#include <nemo/platform.h>

#include "../messaging/messaging_internal.h"
#include "../messaging/remote.h"
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
#define SEND_SPIN_NS 50000.0      /* W4: a blocked send polls this long, */
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
 * (THE PROGRESS THREAD'S SLEEP).  kick is the futex word; sleeping is 1
 * while the rank's progress thread sleeps on it. */
typedef struct bell {
	_Atomic uint32_t kick;
	char pad[60];
	_Atomic uint32_t sleeping;
} bell;

/* A send MPI holds (W2): the buffer is MPI's until req completes. */
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
	prec *precs;                           /* per local index (d->P) */
	_Atomic uint64_t next_live;            /* ticks of the next liveness check */
	_Atomic int closing;
	_Atomic int bounded;                   /* finalize: W's timeout for every host */
	_Atomic unsigned npending;             /* ranks with busy > 0 */
	_Atomic unsigned kicking;              /* handed handlers between done and their kick */
	/* thread / watchdog */
	pthread_t thr;
	bool has_thr;
	_Atomic int stop, thr_state;   /* thr_state: 0 starting, 1 a place, -err */
	bell *bell;                   /* this rank's doorbell (shared memory, or bell_local) */
	bell bell_local;
	int bell_flags;               /* NEMO_FUTEX_SHARED when bell is shared memory */
	bool all_belled;              /* every other rank can ring us (same host, mapped) */
	uint64_t thr_cpu_ns;
	clockid_t thr_clock;
	_Atomic uint64_t last_progress;        /* ticks */
	uint64_t check_due, threshold_ticks;
	nemo_mpi_attr attr;
	/* counters */
	_Atomic uint64_t c_sent, c_funneled, c_received, c_direct, c_handed, c_dropped, c_progress,
		c_sleeps, c_wakeups, c_takeovers, c_dead, c_deferred, c_send_dropped, c_dead_sends;
};

#define CADD(m, f) atomic_fetch_add_explicit(&(m)->f, 1, memory_order_relaxed)

/* ------------------------------------------------------------------------
 * Bindings: one per domain, found from the sending place's domain, used
 * pinned (THE BINDING'S LIFETIME, above).
 * ------------------------------------------------------------------------ */

#define BIND_MAX 16
typedef struct bslot {
	_Atomic(nemo_domain *) d;
	nemo_mpi *_Atomic m;
	_Atomic unsigned pins;
} bslot;
static bslot bindings[BIND_MAX];
static pthread_mutex_t bind_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned nbound;

/* The binding of domain d, pinned (*slot: unpin it there), or NULL;
 * *closing: d's binding is finalizing. */
static nemo_mpi *pin(nemo_domain *d, unsigned *slot, bool *closing)
{
	*closing = false;
	for (unsigned i = 0; i < BIND_MAX; i++) {
		bslot *b = &bindings[i];
		if (atomic_load_explicit(&b->d, memory_order_acquire) != d)                  /* P0 */
			continue;
		if (!atomic_load_explicit(&b->m, memory_order_relaxed)) {
			*closing = true;
			continue;
		}
		atomic_fetch_add_explicit(&b->pins, 1, memory_order_seq_cst);                 /* P1 */
		nemo_mpi *m = atomic_load_explicit(&b->m, memory_order_seq_cst);              /* P2 */
		if (m && m->d == d) {
			*slot = i;
			return m;
		}
		atomic_fetch_sub_explicit(&b->pins, 1, memory_order_release);
		*closing |= !m;
	}
	return NULL;
}

static void unpin(unsigned slot)
{
	atomic_fetch_sub_explicit(&bindings[slot].pins, 1, memory_order_release);            /* P3 */
}

/* Is d bound (a binding published or finalizing)?  (bind_lock held) */
static bool bound_locked(nemo_domain *d)
{
	for (unsigned i = 0; i < BIND_MAX; i++)
		if (atomic_load_explicit(&bindings[i].d, memory_order_relaxed) == d)
			return true;
	return false;
}

static int op_am(nemo_place_id dest, uint32_t id, uint64_t arg, const void *payload, size_t len,
		 unsigned flags, const uint64_t *tag, const struct timespec *abstime);
static int op_notify(nemo_place_id dest, uint32_t chan, unsigned flags, const struct timespec *abstime);
static int op_drive(nemo_domain *d, bool report, unsigned *handled, uint64_t *slice_ns);
static int op_dead(nemo_place_id *ids, size_t cap, size_t *n, uint64_t *total);
static const nemo__remote_ops ops = {.am = op_am, .notify = op_notify, .drive = op_drive, .dead = op_dead};

/* ------------------------------------------------------------------------
 * Ids
 * ------------------------------------------------------------------------ */

static inline nemo_place_id rid(int rank, unsigned idx, uint64_t gen24)
{
	return REMOTE_TAG | ((uint64_t)rank << 40) | ((gen24 & GEN24) << 16) | idx;
}

int nemo_mpi_rank_of(nemo_place_id id)
{
	return nemo__id_is_remote(id) ? (int)((id >> 40) & RANK_MAX) : -1;
}

/* The local id that remote id r names now on this rank, or 0 (none). */
static nemo_place_id local_of(nemo_mpi *m, nemo_place_id r)
{
	unsigned idx = (unsigned)(r & 0xFFFFu);
	uint64_t g24 = (r >> 16) & GEN24;
	if (idx >= m->d->P)
		return 0;
	uint64_t s = atomic_load_explicit(&m->d->places[idx].status, memory_order_acquire);
	if (nemo__status_state(s) != NEMO__ST_ACTIVE)
		return 0;
	uint64_t gen = nemo__status_gen(s);
	if (g24 != GEN24 && (gen & GEN24) != g24)
		return 0;
	return nemo__make_id(idx, gen);
}

/* ------------------------------------------------------------------------
 * Liveness (DEAD RANKS, above)
 * ------------------------------------------------------------------------ */

static void mark_dead(nemo_mpi *m, int r)
{
	peer *p = &m->peers[r];
	if (atomic_load_explicit(&p->dead, memory_order_relaxed))
		return;
	/* Numbered under a lock, dseq before ndead (release): whoever reads
	 * ndead = k (acquire) reads every death up to k numbered. */
	pthread_mutex_lock(&m->dead_lock);
	if (!atomic_load_explicit(&p->dead, memory_order_relaxed)) {
		uint64_t k = atomic_load_explicit(&m->ndead, memory_order_relaxed) + 1;
		atomic_store_explicit(&p->dseq, k, memory_order_relaxed);
		atomic_store_explicit(&p->dead, 1, memory_order_relaxed);
		atomic_store_explicit(&m->ndead, k, memory_order_release);
		CADD(m, c_dead);
	}
	pthread_mutex_unlock(&m->dead_lock);
}

static inline bool is_dead(const peer *p)
{
	return atomic_load_explicit(&p->dead, memory_order_relaxed) != 0;
}

/* Place me's record (its own thread): a new occupant of the index starts
 * afresh, having talked to nobody. */
static prec *prec_of(nemo_mpi *m, const nemo_place *me)
{
	prec *q = &m->precs[me->idx];
	if (q->id != me->id) {
		q->id = me->id;
		q->seen = 0;
		q->nap = 0;
		for (int r = 0; r < m->size; r++)
			atomic_fetch_and_explicit(&m->peers[r].talk[me->idx / 64], ~(1ull << (me->idx % 64)),
						  memory_order_relaxed);
	}
	return q;
}

/* Place me talks to remote place id of rank r (a send to it, a message
 * from it): its death is news for me. */
static void talk(nemo_mpi *m, const nemo_place *me, int r, nemo_place_id id)
{
	if (r < 0 || r >= m->size || r == m->rank)
		return;
	prec_of(m, me);
	peer *p = &m->peers[r];
	uint64_t bit = 1ull << (me->idx % 64);
	if (!(atomic_load_explicit(&p->talk[me->idx / 64], memory_order_relaxed) & bit))
		atomic_fetch_or_explicit(&p->talk[me->idx / 64], bit, memory_order_relaxed);
	if (atomic_load_explicit(&p->last_id, memory_order_relaxed) != id)
		atomic_store_explicit(&p->last_id, id, memory_order_relaxed);
}

static bool talked(const nemo_mpi *m, int r, unsigned idx)
{
	return (atomic_load_explicit(&m->peers[r].talk[idx / 64], memory_order_relaxed) >> (idx % 64)) & 1u;
}

/* Ask the references of the peers on this host, every LIVE_CHECK_NS (any
 * thread; one at a time). */
static void live_check(nemo_mpi *m)
{
	uint64_t now = nemo_ticks(), due = atomic_load_explicit(&m->next_live, memory_order_relaxed);
	if (now < due || !atomic_compare_exchange_strong_explicit(&m->next_live, &due,
								   now + nemo_ns_to_ticks(LIVE_CHECK_NS),
								   memory_order_relaxed, memory_order_relaxed))
		return;
	if (pthread_mutex_trylock(&m->live_lock))
		return;
	for (int r = 0; r < m->size; r++) {
		peer *p = &m->peers[r];
		if (p->local && !is_dead(p) && nemo__proc_dead(&p->proc))
			mark_dead(m, r);
	}
	pthread_mutex_unlock(&m->live_lock);
}

/* ------------------------------------------------------------------------
 * Sends: a rank's window and FIFO (SENDS, above)
 * ------------------------------------------------------------------------ */

static void ring(nemo_mpi *m, int r);

static bool is_agent_thread(nemo_mpi *m)
{
	if (m->prog == NEMO_MPI_PROGRESS_THREAD)
		return m->has_thr && pthread_equal(pthread_self(), m->thr);
	return pthread_equal(pthread_self(), m->owner);
}

/* May the calling thread call MPI? */
static inline bool may_call_mpi(nemo_mpi *m)
{
	return m->level == MPI_THREAD_MULTIPLE || is_agent_thread(m);
}

static double since_ns(uint64_t t)
{
	return nemo_ticks_to_ns((int64_t)(nemo_ticks() - t));
}

/* Memory that may be taken in a handler run by a signal (interrupt
 * mode): mmap, as the local overflow does. */
static void *pages(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* busy and npending after a change of the record (lock held). */
static void settle(nemo_mpi *m, peer *p)
{
	unsigned b = p->fl_n + p->q_n, was = atomic_load_explicit(&p->busy, memory_order_relaxed);
	if (b == was)
		return;
	atomic_store_explicit(&p->busy, b, memory_order_relaxed);
	if (!was)
		atomic_fetch_add_explicit(&m->npending, 1, memory_order_seq_cst);
	else if (!b)
		atomic_fetch_sub_explicit(&m->npending, 1, memory_order_seq_cst);
}

/* W5: drop what the record of dead (or given-up) rank r holds: the FIFO
 * always, the window if this thread may call MPI.  Lock held. */
static void drop_record(nemo_mpi *m, peer *p, int r, bool mpi)
{
	unsigned n = 0;   /* the user's sends among them (not finalize's BYE) */
	for (unsigned i = 0; i < p->q_n; i++)
		n += p->q[(p->q_head + i) % p->q_cap].kind != K_BYE;
	p->q_head = p->q_n = 0;
	if (mpi && p->fl_n) {
		for (unsigned i = 0; i < p->fl_n; i++) {
			flight *f = &p->fl[(p->fl_head + i) % FLIGHT_MAX];
			MPI_Cancel(&f->req);
			MPI_Request_free(&f->req);
			n += f->w.kind != K_BYE;
		}
		p->fl_n = 0;
		p->fl_lost = true;
	}
	if (n) {
		atomic_fetch_add_explicit(&m->c_send_dropped, n, memory_order_relaxed);
		nemo__fail(ECONNRESET, "nemo_mpi", "%u sends to rank %d that had returned 0 were dropped: the rank %s "
			   "(counted in send_dropped)", n, r, is_dead(p) ? "died" : "was given up on in finalize");
	}
}

/* W2: test the window, oldest first; completed sends leave it.  Returns
 * how many completed.  Lock held, MPI allowed. */
static unsigned reap(nemo_mpi *m, peer *p, int r)
{
	unsigned k = 0;
	while (p->fl_n) {
		flight *f = &p->fl[p->fl_head];
		int flag = 0;
		if (MPI_Test(&f->req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
			mark_dead(m, r);
			break;
		}
		if (!flag) {
			/* Off this host nothing else can tell a dead rank from a
			 * slow one; on it the pid does, except in finalize
			 * (FINALIZE'S BOUNDED WAIT). */
			if (since_ns(f->posted) > (double)m->attr.peer_timeout_ns) {
				if (!p->local)
					mark_dead(m, r);
				else if (atomic_load_explicit(&m->bounded, memory_order_relaxed))
					p->gave_up = true;
			}
			break;
		}
		p->fl_head = (p->fl_head + 1) % FLIGHT_MAX;
		p->fl_n--;
		k++;
		ring(m, r);
	}
	return k;
}

/* Post wire w to rank r in the window (room checked by the caller).
 * Lock held, MPI allowed.  0, or ECONNRESET (MPI refused: r is dead). */
static int isend(nemo_mpi *m, peer *p, int r, const wire *w)
{
	flight *f = &p->fl[(p->fl_head + p->fl_n) % FLIGHT_MAX];
	memcpy(&f->w, w, (size_t)wire_bytes(w));
	/* BYE synchronously: it completes once r matched it (THE WIRE). */
	int (*send)(const void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request *) =
		w->kind == K_BYE ? MPI_Issend : MPI_Isend;
	if (send(&f->w, wire_bytes(&f->w), MPI_BYTE, r, NEMO_MPI_TAG, m->comm, &f->req) != MPI_SUCCESS) {
		mark_dead(m, r);
		return ECONNRESET;
	}
	f->posted = nemo_ticks();
	p->fl_n++;
	CADD(m, c_sent);
	return 0;
}

/* The window's buffers, at the first send to r (MPI or the
 * FIFO's first move).  Lock held. */
static bool have_window(peer *p)
{
	return p->fl || (p->fl = pages(FLIGHT_MAX * sizeof(flight))) != NULL;
}

/* W2 for rank r: reap, then move the FIFO's head into the window while
 * it has room; a dead or given-up rank's record is dropped (W5).  Lock
 * held.  Returns how much moved (completed or posted). */
static unsigned push(nemo_mpi *m, peer *p, int r, bool mpi)
{
	unsigned n = 0;
	if (mpi && p->fl_n)
		n += reap(m, p, r);
	if (mpi && p->q_n && !is_dead(p) && !p->gave_up && have_window(p)) {
		unsigned posted = 0;
		while (p->q_n && p->fl_n < FLIGHT_MAX && !isend(m, p, r, &p->q[p->q_head])) {
			p->q_head = (p->q_head + 1) % p->q_cap;
			p->q_n--;
			posted++;
		}
		if (posted)
			n += posted + reap(m, p, r);
	}
	if ((is_dead(p) || p->gave_up) && (p->q_n || (mpi && p->fl_n)))
		drop_record(m, p, r, mpi);
	settle(m, p);
	return n;
}

/* Keep w at the FIFO's tail (W1).  Lock held.  0, ENOBUFS, ENOMEM. */
static int keep(peer *p, const wire *w)
{
	if (p->q_n >= DEFER_MAX)
		return ENOBUFS;
	if (p->q_n == p->q_cap) {
		unsigned cap = p->q_cap ? p->q_cap * 2 : Q_FIRST;
		wire *q = pages(cap * sizeof(wire));
		if (!q)
			return ENOMEM;
		for (unsigned i = 0; i < p->q_n; i++)
			q[i] = p->q[(p->q_head + i) % p->q_cap];
		if (p->q)
			munmap(p->q, p->q_cap * sizeof(wire));
		p->q = q;
		p->q_cap = cap;
		p->q_head = 0;
	}
	memcpy(&p->q[(p->q_head + p->q_n) % p->q_cap], w, (size_t)wire_bytes(w));
	p->q_n++;
	return 0;
}

static void thr_kick(nemo_mpi *m)
{
	atomic_fetch_add_explicit(&m->bell->kick, 1, memory_order_seq_cst);                  /* K2 */
	if (atomic_load_explicit(&m->bell->sleeping, memory_order_seq_cst))                  /* K3 */
		nemo_futex_wake((uint32_t *)&m->bell->kick, 1, m->bell_flags, NULL);
}

/* After a send to rank r completed: ring r's doorbell if its progress
 * thread sleeps (R1 fence, R2 load sleeping, R3 kick and FUTEX_WAKE). */
static void ring(nemo_mpi *m, int r)
{
	bell *b = m->peers[r].bell;
	if (!b)
		return;
	atomic_thread_fence(memory_order_seq_cst);                                      /* R1 */
	if (atomic_load_explicit(&b->sleeping, memory_order_relaxed)) {                 /* R2 */
		atomic_fetch_add_explicit(&b->kick, 1, memory_order_seq_cst);           /* R3 */
		nemo_futex_wake((uint32_t *)&b->kick, 1, NEMO_FUTEX_SHARED, NULL);
	}
}

/* Is CLOCK_MONOTONIC past abstime (NULL: never)? */
static bool past(const struct timespec *abstime)
{
	if (!abstime)
		return false;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > abstime->tv_sec || (now.tv_sec == abstime->tv_sec && now.tv_nsec >= abstime->tv_nsec);
}

/* W4's rounds: poll for SEND_SPIN_NS from the first, then sleep between
 * rounds, doubling, never past abstime (compared, never subtracted: a
 * deadline 2^62 s away is a long one, not an overflow). */
typedef struct naps {
	uint64_t t0, nap_ns;
} naps;

static void nap_round(naps *b, const struct timespec *abstime)
{
	if (!b->t0) {
		b->t0 = nemo_ticks();
		return;
	}
	if (since_ns(b->t0) < SEND_SPIN_NS) {
		nemo_cpu_relax();
		return;
	}
	b->nap_ns = b->nap_ns ? b->nap_ns * 2 : SEND_NAP_MIN_NS;
	if (b->nap_ns > SEND_NAP_MAX_NS)
		b->nap_ns = SEND_NAP_MAX_NS;
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += (long)b->nap_ns;
	while (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	if (abstime && (abstime->tv_sec < until.tv_sec ||
			(abstime->tv_sec == until.tv_sec && abstime->tv_nsec < until.tv_nsec)))
		until = *abstime;
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
		;
}

static unsigned try_progress(nemo_mpi *m);

/* Send w to rank r (W1-W4).  me: the sending place. */
static int send_to(nemo_mpi *m, nemo_place *me, int r, const wire *w, unsigned flags,
		   const struct timespec *abstime, const char *fn)
{
	peer *p = &m->peers[r];
	bool mpi = may_call_mpi(m), handler = me->hdepth > 0;
	bool owner = pthread_equal(pthread_self(), m->owner);
	naps b = {0, 0};
	for (;;) {
		if (atomic_load_explicit(&m->closing, memory_order_seq_cst))
			return nemo__fail(ESHUTDOWN, fn, "this rank's binding is finalizing");
		int err = -1;          /* -1: no room */
		bool kept = false;
		pthread_mutex_lock(&p->lock);
		if (atomic_load_explicit(&m->closing, memory_order_seq_cst)) {
			/* Finalize waits for this send's pin: no MPI call now. */
			pthread_mutex_unlock(&p->lock);
			return nemo__fail(ESHUTDOWN, fn, "this rank's binding is finalizing");
		}
		if (!is_dead(p)) {
			push(m, p, r, mpi);
			if (mpi && !p->q_n && p->fl_n < FLIGHT_MAX && !is_dead(p)) {
				err = have_window(p) ? isend(m, p, r, w) : ENOMEM;
				if (!err)
					reap(m, p, r);
			} else if ((handler && !(flags & NEMO_NONBLOCK)) || (!mpi && p->q_n < FUNNEL_MAX)) {
				err = keep(p, w);
				kept = !err;
			}
			settle(m, p);
		}
		pthread_mutex_unlock(&p->lock);
		if (is_dead(p) && err != 0) {
			CADD(m, c_dead_sends);
			return nemo__fail(ECONNRESET, fn, "rank %d is dead", r);
		}
		if (err == 0) {
			if (kept) {
				if (handler)
					CADD(m, c_deferred);
				else
					CADD(m, c_funneled);
				if (!mpi && m->prog == NEMO_MPI_PROGRESS_THREAD)
					thr_kick(m);
			}
			return 0;
		}
		if (err == ENOBUFS)
			return nemo__fail(ENOBUFS, fn, "%u sends to rank %d are kept already (its window is full)",
					  DEFER_MAX, r);
		if (err > 0)
			return nemo__fail(err, fn, "no memory for rank %d's window or queue", r);
		if (flags & NEMO_NONBLOCK)
			return EAGAIN;   /* bare: flow control (fail.h) */
		if (past(abstime))
			return ETIMEDOUT;
		/* W4: serve while waiting.  The owner progresses MPI (its
		 * strategies have no other agent while it sends); every place
		 * runs its handlers, whose sends are kept, never waited for. */
		if (owner && m->prog != NEMO_MPI_PROGRESS_THREAD)
			try_progress(m);
		else
			live_check(m);
		nemo_poll(NULL);
		nap_round(&b, abstime);
	}
}

/* ------------------------------------------------------------------------
 * Receiving: the agent's pass
 * ------------------------------------------------------------------------ */

static int post(nemo_mpi *m, unsigned i)
{
	rslot *s = &m->slots[i];
	if (s->st == ST_IDLE)
		m->idle_n--;
	if (MPI_Irecv(&s->w, (int)sizeof s->w, MPI_BYTE, MPI_ANY_SOURCE, NEMO_MPI_TAG, m->comm, &s->req) !=
	    MPI_SUCCESS) {
		s->st = ST_IDLE;
		m->idle_n++;
		return EIO;
	}
	s->st = ST_POSTED;
	m->postq[(m->post_head + m->post_n++) % m->K] = i;
	return 0;
}

/* Run wire w's handler on the calling place (its own thread). */
static void deliver_here(nemo_mpi *m, nemo_place *me, const wire *w, nemo_am_context ctx)
{
	talk(m, me, nemo_mpi_rank_of(w->src), w->src);
	if (w->kind == K_AM) {
		uint32_t meta;
		if (nemo__am_resolve(me->d, me->id, w->id, w->len, &meta, "nemo_mpi (remote active message)")) {
			CADD(m, c_dropped);
			return;
		}
		nemo__am_deliver(me, w->src, meta | (w->tagged ? NEMO__META_TAGGED : 0), w->arg,
				 w->len ? w->payload : NULL, w->len, ctx);
	} else {
		nemo_notify_handler fn = atomic_load_explicit(&me->nf_fn, memory_order_acquire);
		if (!fn) {
			CADD(m, c_dropped);
			return;
		}
		fn(atomic_load_explicit(&me->nf_ctx, memory_order_relaxed), w->src, w->id);
	}
}

/* The reserved action: a handed slot, on its destination's thread.
 * Nothing of the slot or the binding is touched after the done store,
 * but the kick, bracketed by kicking (THE LOCK-FREE HANDSHAKE). */
static void handed_handler(const nemo_am_msg *msg, void *ctx)
{
	(void)ctx;
	rslot *s = (rslot *)(uintptr_t)msg->arg;
	nemo_mpi *m = s->m;
	deliver_here(m, nemo__place_self(), &s->w, msg->context);
	if (m->prog != NEMO_MPI_PROGRESS_THREAD) {
		atomic_store_explicit(&s->done, 1, memory_order_release);
		return;
	}
	atomic_fetch_add_explicit(&m->kicking, 1, memory_order_relaxed);
	atomic_store_explicit(&s->done, 1, memory_order_release);
	thr_kick(m);
	atomic_fetch_sub_explicit(&m->kicking, 1, memory_order_release);
}

/* Hand slot i to its local place: 0 (handed, dropped or done), EAGAIN. */
static int hand(nemo_mpi *m, unsigned i)
{
	rslot *s = &m->slots[i];
	nemo_place_id to = local_of(m, s->w.dest);
	if (!to) {
		CADD(m, c_dropped);
		return post(m, i), 0;
	}
	nemo_place *me = nemo__place_self();
	unsigned di = nemo_place_index(to);
	nemo_place_id via = me ? me->id : NEMO_PLACE_NONE;
	/* One path per destination at a time: while slots handed to it by
	 * one agent place are in its ring, neither another agent's ring nor
	 * the direct path may overtake them (AGENTS AND ORDER, above). */
	if (m->out_n[di] && (via == to || m->out_by[di] != via))
		return EAGAIN;
	if (me && me->id == to) {
		/* For the agent itself: handle it now, as a handler of a poll. */
		nemo__busy_enter(me);
		me->hdepth++;
		deliver_here(m, me, &s->w, NEMO_AM_CTX_POLL);
		me->hdepth--;
		nemo__busy_exit(me);
		CADD(m, c_direct);
		return post(m, i), 0;
	}
	atomic_store_explicit(&s->done, 0, memory_order_relaxed);
	int err = nemo_am_send(to, m->action, (uint64_t)(uintptr_t)s, NEMO_NONBLOCK);
	if (err == EAGAIN)
		return EAGAIN;
	if (err) {
		CADD(m, c_dropped);
		return post(m, i), 0;
	}
	s->st = ST_HANDED;
	s->di = di;
	m->handed_n++;
	m->out_n[di]++;
	m->out_by[di] = via;
	CADD(m, c_handed);
	return 0;
}

/* The ranks' records with work (W2): the agent's share of the sends.
 * Returns how much moved. */
static unsigned push_all(nemo_mpi *m)
{
	unsigned n = 0;
	if (!atomic_load_explicit(&m->npending, memory_order_seq_cst))
		return 0;
	for (int r = 0; r < m->size; r++) {
		peer *p = &m->peers[r];
		if (!atomic_load_explicit(&p->busy, memory_order_relaxed))
			continue;
		pthread_mutex_lock(&p->lock);
		n += push(m, p, r, true);
		pthread_mutex_unlock(&p->lock);
	}
	return n;
}

/* One pass of the agent (agent_lock held): sends, hand-overs, receives,
 * reposts.  Returns how much it did. */
static unsigned progress(nemo_mpi *m)
{
	unsigned n = 0;
	CADD(m, c_progress);
	uint64_t now = nemo_ticks();
	atomic_store_explicit(&m->last_progress, now, memory_order_relaxed);
	live_check(m);   /* first: a record of a rank found dead is dropped, not sent */
	n += push_all(m);
	while (m->pend_n) {
		if (hand(m, m->pendq[m->pend_head]) == EAGAIN)
			break;
		m->pend_head = (m->pend_head + 1) % m->K;
		m->pend_n--;
		n++;
	}
	/* At most K messages a pass: under a flood that MPI delivers as fast
	 * as we take it, one pass would never end, nor would its caller's
	 * loop (an owner's polls before finalize). */
	for (unsigned got = 0; !m->pend_n && m->post_n && got < m->K; got++) {
		unsigned i = m->postq[m->post_head];
		rslot *s = &m->slots[i];
		int flag = 0;
		MPI_Status st;
		if (MPI_Test(&s->req, &flag, &st) != MPI_SUCCESS || !flag)
			break;
		m->post_head = (m->post_head + 1) % m->K;
		m->post_n--;
		CADD(m, c_received);
		n++;
		if (st.MPI_SOURCE >= 0 && st.MPI_SOURCE < m->size)
			m->peers[st.MPI_SOURCE].heard = now;
		if (s->w.kind == K_BYE) {
			atomic_store_explicit(&m->peers[st.MPI_SOURCE].bye, 1, memory_order_relaxed);
			post(m, i);
			continue;
		}
		s->st = ST_PENDING;
		if (hand(m, i) == EAGAIN) {
			m->pendq[(m->pend_head + m->pend_n++) % m->K] = i;
			break;
		}
	}
	for (unsigned i = 0; (m->handed_n || m->idle_n) && i < m->K; i++) {
		rslot *s = &m->slots[i];
		if (s->st == ST_HANDED && atomic_load_explicit(&s->done, memory_order_acquire)) {
			m->out_n[s->di]--;
			m->handed_n--;
			post(m, i);
		} else if (s->st == ST_IDLE) {
			post(m, i);   /* an MPI_Irecv that failed: retry */
		}
	}
	return n;
}

/* A pass if nobody else is making one. */
static unsigned try_progress(nemo_mpi *m)
{
	if (pthread_mutex_trylock(&m->agent_lock))
		return 0;
	unsigned n = progress(m);
	pthread_mutex_unlock(&m->agent_lock);
	return n;
}

/* ------------------------------------------------------------------------
 * The sends (the messaging layer's hook calls these)
 * ------------------------------------------------------------------------ */

/* Checks shared by both sends: the binding (pinned on success: unpin
 * *slot) and the rank. */
static int route(nemo_place_id dest, nemo_place **mep, nemo_mpi **mp, unsigned *slot, int *rp, const char *fn)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return nemo__fail(ENOTCONN, fn, "the calling thread is not a place (nemo_place_join first)");
	bool closing;
	nemo_mpi *m = pin(me->d, slot, &closing);
	if (!m)
		return closing ? nemo__fail(ESHUTDOWN, fn, "this rank's binding is finalizing")
			       : nemo__fail(ESRCH, fn, "place %#llx is remote, and this domain is not bound to MPI",
					    (unsigned long long)dest);
	int r = nemo_mpi_rank_of(dest), err = 0;
	if (r >= m->size)
		err = nemo__fail(EHOSTUNREACH, fn, "rank %d of place %#llx is not in the communicator (size %d)", r,
				 (unsigned long long)dest, m->size);
	else if (atomic_load_explicit(&m->closing, memory_order_seq_cst))
		err = nemo__fail(ESHUTDOWN, fn, "this rank's binding is finalizing");
	else if (r != m->rank) {
		live_check(m);
		if (is_dead(&m->peers[r])) {
			CADD(m, c_dead_sends);
			err = nemo__fail(ECONNRESET, fn, "rank %d is dead", r);
		} else if (atomic_load_explicit(&m->peers[r].bye, memory_order_relaxed)) {
			/* Its places left, cleanly: as for a local place that left. */
			err = nemo__fail(ESRCH, fn, "place %#llx is gone: rank %d has finalized its binding",
					 (unsigned long long)dest, r);
		}
	}
	if (err) {
		unpin(*slot);
		return err;
	}
	*mep = me;
	*mp = m;
	*rp = r;
	return 0;
}

/* A remote send proper: inside a nemo call for interrupt mode (a signal
 * that comes while this thread is in MPI is deferred, so no handler
 * re-enters MPI), then poll at send: the owner progresses MPI after each
 * of its sends. */
static int send_wire(nemo_mpi *m, nemo_place *me, int r, const wire *w, unsigned flags,
		     const struct timespec *abstime, const char *fn)
{
	nemo__busy_enter(me);
	int err = send_to(m, me, r, w, flags, abstime, fn);
	if (!err && m->prog != NEMO_MPI_PROGRESS_THREAD && pthread_equal(pthread_self(), m->owner))
		try_progress(m);
	nemo__busy_exit(me);
	return err;
}

static int op_am(nemo_place_id dest, uint32_t id, uint64_t arg, const void *payload, size_t len,
		 unsigned flags, const uint64_t *tag, const struct timespec *abstime)
{
	const char *fn = tag ? "nemo_am_reply" : abstime ? "nemo_am_sendv_timed" : "nemo_am_sendv";
	nemo_place *me;
	nemo_mpi *m;
	unsigned slot;
	int r;
	int err = route(dest, &me, &m, &slot, &r, fn);
	if (err)
		return err;
	if ((err = nemo__am_check_args(payload, len, flags, fn)))
		goto out;
	if (id & 0x80000000u ? (id & 0x7FFFFFFFu) >= me->d->E : id >= me->d->A) {
		err = nemo__fail(ERANGE, fn, "id %#x is out of range of this domain's tables", id);
		goto out;
	}
	if (r == m->rank) {
		nemo_place_id to = local_of(m, dest);
		if (!to) {
			err = nemo__fail(ESRCH, fn, "place %#llx is not in the domain (never was, or left)",
					 (unsigned long long)dest);
		} else if (tag) {
			nemo_am_msg req = {.src = to, .arg = *tag};
			err = nemo_am_reply(&req, id, arg, payload, len, flags);
		} else {
			err = abstime ? nemo_am_sendv_timed(to, id, arg, payload, len, flags, abstime)
				      : nemo_am_sendv(to, id, arg, payload, len, flags);
		}
		goto out;
	}
	talk(m, me, r, dest);
	wire w = {.src = rid(m->rank, me->idx, nemo__id_gen(me->id)), .dest = dest, .arg = arg,
		  .kind = K_AM, .id = id, .len = (uint32_t)len, .tagged = tag != NULL};
	if (tag) {
		memcpy(w.payload, tag, sizeof *tag);
		w.len += sizeof *tag;
	}
	if (len)
		memcpy(w.payload + (tag ? sizeof *tag : 0), payload, len);
	err = send_wire(m, me, r, &w, flags, abstime, fn);
out:
	unpin(slot);
	return err;
}

static int op_notify(nemo_place_id dest, uint32_t chan, unsigned flags, const struct timespec *abstime)
{
	const char *fn = abstime ? "nemo_notify_timed" : "nemo_notify";
	nemo_place *me;
	nemo_mpi *m;
	unsigned slot;
	int r;
	int err = route(dest, &me, &m, &slot, &r, fn);
	if (err)
		return err;
	if ((err = nemo__check_flags(flags, fn)))
		goto out;
	if (chan > NEMO_NOTIFY_CHAN_MAX) {
		err = nemo__fail(ERANGE, fn, "channel %u is above %u", chan, NEMO_NOTIFY_CHAN_MAX);
		goto out;
	}
	if (r == m->rank) {
		nemo_place_id to = local_of(m, dest);
		if (!to)
			err = nemo__fail(ESRCH, fn, "place %#llx is not in the domain", (unsigned long long)dest);
		else
			err = abstime ? nemo_notify_timed(to, chan, flags, abstime) : nemo_notify(to, chan, flags);
		goto out;
	}
	talk(m, me, r, dest);
	wire w = {.src = rid(m->rank, me->idx, nemo__id_gen(me->id)), .dest = dest, .kind = K_NOTIFY, .id = chan};
	err = send_wire(m, me, r, &w, flags, abstime, fn);
out:
	unpin(slot);
	return err;
}

/* ------------------------------------------------------------------------
 * The ordinary calls: nemo_poll, nemo_place_wait, nemo_place_wait_for
 * drive the binding (remote.h's drive op; placewait.c, DRIVEN WAITS),
 * and nemo_dead_places asks it (the dead op)
 * ------------------------------------------------------------------------ */

#define SLICE_MIN_NS 16000ull            /* the owner's first slice of sleep */
#define SLICE_OTHER_NS (2 * LIVE_CHECK_NS) /* everyone else's: to learn of a death */

/* A place of d polls or waits.  The owner of a SEND / CHECK / WATCHDOG
 * binding is the one that receives: it makes a pass, and sleeps in
 * slices that double from SLICE_MIN_NS to idle_max_ns while nothing
 * comes (MPI cannot wake a sleeper).  The others are woken by the local
 * ring that the agent hands their messages through, and sleep in slices
 * of SLICE_OTHER_NS only to learn of deaths.  A wait (report) returns
 * ECONNRESET once per new death of a rank that the place talked to. */
static int op_drive(nemo_domain *d, bool report, unsigned *handled, uint64_t *slice_ns)
{
	unsigned slot;
	bool closing;
	nemo_mpi *m = pin(d, &slot, &closing);
	if (!m)
		return -1;
	nemo_place *me = nemo__place_self();
	int rc = 0;
	prec *q = prec_of(m, me);
	live_check(m);
	if (m->prog != NEMO_MPI_PROGRESS_THREAD && pthread_equal(pthread_self(), m->owner) &&
	    !atomic_load_explicit(&m->closing, memory_order_relaxed)) {
		uint64_t before = atomic_load_explicit(&m->c_direct, memory_order_relaxed);
		unsigned n = try_progress(m);   /* its direct deliveries are ours: we held the agent's lock */
		*handled += (unsigned)(atomic_load_explicit(&m->c_direct, memory_order_relaxed) - before);
		q->nap = n || !q->nap ? SLICE_MIN_NS : q->nap * 2;
		if (q->nap > m->attr.idle_max_ns)
			q->nap = m->attr.idle_max_ns;
		*slice_ns = q->nap;
	} else {
		*slice_ns = SLICE_OTHER_NS;
	}
	uint64_t k = atomic_load_explicit(&m->ndead, memory_order_acquire);
	if (report && k > q->seen) {
		for (int r = 0; r < m->size && !rc; r++)
			if (atomic_load_explicit(&m->peers[r].dseq, memory_order_relaxed) > q->seen &&
			    talked(m, r, me->idx))
				rc = nemo__fail(ECONNRESET, "nemo_place_wait", "rank %d, which this place talked to, died "
						"(nemo_dead_places)", r);
		q->seen = k;
	}
	unpin(slot);
	return rc;
}

/* nemo_dead_places for the calling thread's place: the dead ranks it
 * talked to, latest death first, each by the id of it last talked to. */
static int op_dead(nemo_place_id *ids, size_t cap, size_t *n, uint64_t *total)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return 0;
	unsigned slot;
	bool closing;
	nemo_mpi *m = pin(me->d, &slot, &closing);
	if (!m)
		return 0;
	live_check(m);
	prec_of(m, me);
	uint64_t below = UINT64_MAX;
	for (;;) {
		int best = -1;
		uint64_t bs = 0;
		for (int r = 0; r < m->size; r++) {
			uint64_t s = atomic_load_explicit(&m->peers[r].dseq, memory_order_acquire);
			if (s && s < below && s > bs && talked(m, r, me->idx)) {
				best = r;
				bs = s;
			}
		}
		if (best < 0)
			break;
		++*total;
		if (*n < cap)
			ids[(*n)++] = atomic_load_explicit(&m->peers[best].last_id, memory_order_relaxed);
		below = bs;
	}
	unpin(slot);
	return 0;
}

/* ------------------------------------------------------------------------
 * The binding's thread: progress thread or watchdog
 * ------------------------------------------------------------------------ */

static void *thr_main(void *arg)
{
	nemo_mpi *m = arg;
	int jerr = nemo_place_join(m->d, NULL, NULL);   /* a place: it hands messages over */
	atomic_store_explicit(&m->thr_state, jerr ? -jerr : 1, memory_order_release);
	if (jerr)
		return NULL;
	uint64_t last = nemo_ticks(), spin = nemo_ns_to_ticks((double)m->attr.spin_ns);
	uint64_t backoff = 0;
	while (!atomic_load_explicit(&m->stop, memory_order_acquire)) {
		if (m->prog == NEMO_MPI_PROGRESS_WATCHDOG) {
			uint32_t k = atomic_load_explicit(&m->bell->kick, memory_order_seq_cst);
			struct timespec ts = {0, (long)m->attr.watchdog_ns};
			if (m->attr.watchdog_ns >= 1000000000ull)
				ts = (struct timespec){1, 0};
			if (!atomic_load_explicit(&m->stop, memory_order_seq_cst))
				nemo_futex_wait((uint32_t *)&m->bell->kick, k, &ts, m->bell_flags);
			CADD(m, c_sleeps);
			uint64_t lp = atomic_load_explicit(&m->last_progress, memory_order_relaxed);
			if (nemo_ticks_to_ns((int64_t)(nemo_ticks() - lp)) >= (double)m->attr.watchdog_ns &&
			    try_progress(m))
				CADD(m, c_takeovers);
			nemo_poll(NULL);
			continue;
		}
		unsigned n = try_progress(m);
		nemo_poll(NULL);
		uint64_t now = nemo_ticks();
		if (n) {
			last = now;
			backoff = 0;
			continue;
		}
		if (now - last < spin) {
			nemo_cpu_relax();
			continue;
		}
		/* With every peer able to ring us, sleep long (the timeout is a
		 * safety net) unless sends wait in the records, which only our
		 * MPI calls move; else the backoff, up to idle_max_ns. */
		backoff = backoff ? backoff * 2 : 16000;
		if (backoff > m->attr.idle_max_ns)
			backoff = m->attr.idle_max_ns;
		bool waiting = atomic_load_explicit(&m->npending, memory_order_seq_cst) != 0;
		uint64_t nap = m->all_belled && !waiting ? 100000000ull : backoff;
		bell *b = m->bell;
		atomic_store_explicit(&b->sleeping, 1, memory_order_seq_cst);                  /* T1 */
		atomic_thread_fence(memory_order_seq_cst);   /* T1 before MPI's reads of T3 */
		uint32_t k = atomic_load_explicit(&b->kick, memory_order_seq_cst);             /* T2 */
		/* T3: a last look at MPI and the local work, after T1. */
		if (!try_progress(m) && !atomic_load_explicit(&m->stop, memory_order_seq_cst)) {
			struct timespec ts = {(time_t)(nap / 1000000000ull), (long)(nap % 1000000000ull)};
			nemo_futex_wait((uint32_t *)&b->kick, k, &ts, m->bell_flags);          /* T4 */
			CADD(m, c_sleeps);
			if (atomic_load_explicit(&b->kick, memory_order_relaxed) != k) {
				CADD(m, c_wakeups);
				backoff = 0;
			}
		} else {
			last = nemo_ticks();
		}
		atomic_store_explicit(&b->sleeping, 0, memory_order_relaxed);
	}
	struct timespec ts;
	clock_gettime(m->thr_clock, &ts);
	m->thr_cpu_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	nemo_place_leave();
	return NULL;
}

/* ------------------------------------------------------------------------
 * Public calls
 * ------------------------------------------------------------------------ */

static uint64_t host_hash(void)
{
	char h[256] = {0};
	gethostname(h, sizeof h - 1);
	uint64_t x = 1469598103934665603ull;
	for (const char *p = h; *p; p++)
		x = (x ^ (unsigned char)*p) * 1099511628211ull;
	return x;
}

/* This process's pid namespace (0: unknown): a pid names a process only
 * inside its namespace, so only peers of ours are checked by pid. */
static uint64_t pid_namespace(void)
{
	struct stat st;
	if (stat("/proc/self/ns/pid", &st))
		return 0;
	return ((uint64_t)st.st_dev << 32) ^ (uint64_t)st.st_ino;
}

/* THREAD bindings: every rank makes a doorbell page; peers on its host
 * map it.  Any failure leaves that peer without a bell (it is then
 * reached by the backoff only). */
static void bells_setup(nemo_mpi *m)
{
	static _Atomic unsigned seq;
	char name[64] = {0}, mine[80], theirs[80];
	if (m->rank == 0)
		snprintf(name, sizeof name, "/nemo-mpi-%d-%u-%llx", (int)getpid(), atomic_fetch_add(&seq, 1),
			 (unsigned long long)nemo_ticks());
	MPI_Bcast(name, sizeof name, MPI_CHAR, 0, m->comm);
	snprintf(mine, sizeof mine, "%s-%d", name, m->rank);
	int fd = shm_open(mine, O_CREAT | O_EXCL | O_RDWR, 0600);
	if (fd >= 0) {
		void *p = ftruncate(fd, sizeof(bell)) ? MAP_FAILED
						      : mmap(NULL, sizeof(bell), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
		if (p != MAP_FAILED) {
			m->bell = p;
			m->bell_flags = NEMO_FUTEX_SHARED;
		}
	}
	MPI_Barrier(m->comm);
	int all = m->bell != &m->bell_local, every = 0;
	for (int r = 0; r < m->size; r++) {
		if (r == m->rank)
			continue;
		if (m->peers[r].host != m->host) {
			all = 0;
			continue;
		}
		snprintf(theirs, sizeof theirs, "%s-%d", name, r);
		int f = shm_open(theirs, O_RDWR, 0);
		void *p = f < 0 ? MAP_FAILED : mmap(NULL, sizeof(bell), PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
		if (f >= 0)
			close(f);
		if (p == MAP_FAILED)
			all = 0;
		else
			m->peers[r].bell = p;
	}
	MPI_Barrier(m->comm);
	if (m->bell != &m->bell_local)
		shm_unlink(mine);
	MPI_Allreduce(&all, &every, 1, MPI_INT, MPI_LAND, m->comm);
	m->all_belled = every != 0;
}

static void free_binding(nemo_mpi *m)
{
	if (m->bell && m->bell != &m->bell_local)
		munmap(m->bell, sizeof(bell));
	for (int r = 0; m->peers && r < m->size; r++) {
		peer *p = &m->peers[r];
		if (p->bell)
			munmap(p->bell, sizeof(bell));
		if (p->fl && !p->fl_lost)
			munmap(p->fl, FLIGHT_MAX * sizeof(flight));
		if (p->q)
			munmap(p->q, p->q_cap * sizeof(wire));
		if (p->local)
			nemo__proc_close(&p->proc);
		pthread_mutex_destroy(&p->lock);
	}
	free(m->slots);
	free(m->postq);
	free(m->pendq);
	free(m->peers);
	pthread_mutex_destroy(&m->agent_lock);
	pthread_mutex_destroy(&m->live_lock);
	pthread_mutex_destroy(&m->dead_lock);
	free(m->precs);
	free(m);
}

int nemo_mpi_create(nemo_domain *d, MPI_Comm comm, const nemo_mpi_attr *attr, nemo_mpi **out)
{
	if (!d || !out)
		return NEMO__FAIL(EINVAL, "%s is NULL", d ? "out" : "d");
	int err = nemo__domain_check(d);
	if (err)
		return err;
	int inited = 0, fin = 0;
	MPI_Initialized(&inited);
	MPI_Finalized(&fin);
	if (!inited || fin)
		return NEMO__FAIL(EINVAL, "MPI is not initialised (MPI_Init_thread first) or already finalized");
	nemo_place *me = nemo__place_self();
	if (!me || me->d != d)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place of d (nemo_place_join first)");
	nemo_mpi_attr a = attr ? *attr : (nemo_mpi_attr){0};
	if ((unsigned)a.progress > NEMO_MPI_PROGRESS_WATCHDOG)
		return NEMO__FAIL(EINVAL, "progress %d is not a strategy", (int)a.progress);
	if (!a.action)
		a.action = d->A - 1;
	if (a.action >= d->A)
		return NEMO__FAIL(EINVAL, "action %u is out of range: the domain has max_actions %u", a.action, d->A);
	if (!a.recv_depth)
		a.recv_depth = 64;
	if (a.recv_depth < 4 || a.recv_depth > 4096)
		return NEMO__FAIL(EINVAL, "recv_depth %u is outside 4..4096", a.recv_depth);
	if (!a.threshold_ns)
		a.threshold_ns = 5000;
	if (!a.spin_ns)
		a.spin_ns = 50000;
	if (!a.idle_max_ns)
		a.idle_max_ns = 1000000;
	if (a.idle_max_ns < 10000 || a.idle_max_ns > 100000000)
		return NEMO__FAIL(EINVAL, "idle_max_ns %llu is outside 10 us..100 ms", (unsigned long long)a.idle_max_ns);
	if (!a.watchdog_ns)
		a.watchdog_ns = 1000000;
	if (a.watchdog_ns < 10000 || a.watchdog_ns > 1000000000)
		return NEMO__FAIL(EINVAL, "watchdog_ns %llu is outside 10 us..1 s", (unsigned long long)a.watchdog_ns);
	if (!a.peer_timeout_ns)
		a.peer_timeout_ns = 10000000000ull;
	int level = MPI_THREAD_SINGLE, is_main = 0;
	MPI_Query_thread(&level);
	MPI_Is_thread_main(&is_main);
	int need = a.progress == NEMO_MPI_PROGRESS_WATCHDOG ? MPI_THREAD_MULTIPLE
		   : a.progress == NEMO_MPI_PROGRESS_THREAD ? MPI_THREAD_SERIALIZED
		   : is_main ? MPI_THREAD_FUNNELED : MPI_THREAD_SERIALIZED;
	if (level < need)
		return NEMO__FAIL(EPROTONOSUPPORT, "progress %d needs MPI thread level %d; MPI granted %d",
				  (int)a.progress, need, level);
	pthread_mutex_lock(&bind_lock);
	bool bound = bound_locked(d);
	pthread_mutex_unlock(&bind_lock);
	if (bound)
		return NEMO__FAIL(EALREADY, "the domain is bound to MPI already");
	nemo_am_handler cur = atomic_load_explicit(&d->adt[a.action].fn, memory_order_acquire);
	if (cur && cur != handed_handler)
		return NEMO__FAIL(EEXIST, "the reserved action %u has a handler already (nemo_mpi_attr.action)",
				  a.action);
	if (!cur && (err = nemo_action_register(d, a.action, handed_handler, NULL)) && err != EEXIST)
		return err;

	nemo_mpi *m = calloc(1, sizeof *m);
	if (!m)
		return NEMO__FAIL(ENOMEM, "no memory for the binding");
	m->d = d;
	m->attr = a;
	m->prog = a.progress;
	m->action = a.action;
	m->level = level;
	m->owner = pthread_self();
	m->owner_id = me->id;
	m->K = a.recv_depth;
	m->host = host_hash();
	m->pidns = pid_namespace();
	pthread_mutex_init(&m->agent_lock, NULL);
	pthread_mutex_init(&m->live_lock, NULL);
	pthread_mutex_init(&m->dead_lock, NULL);
	if (MPI_Comm_dup(comm, &m->comm) != MPI_SUCCESS) {
		free_binding(m);
		return NEMO__FAIL(EIO, "MPI_Comm_dup failed");
	}
	MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
	MPI_Comm_rank(m->comm, &m->rank);
	MPI_Comm_size(m->comm, &m->size);
	m->slots = calloc(m->K, sizeof *m->slots);
	m->postq = calloc(m->K, sizeof *m->postq);
	m->pendq = calloc(m->K, sizeof *m->pendq);
	m->peers = calloc((size_t)m->size, sizeof *m->peers);
	m->precs = calloc(d->P, sizeof *m->precs);
	for (int r = 0; m->peers && r < m->size; r++)
		pthread_mutex_init(&m->peers[r].lock, NULL);
	uint64_t *ids = calloc((size_t)m->size * 4, sizeof *ids);
	if (!m->slots || !m->postq || !m->pendq || !m->peers || !m->precs || !ids || (unsigned)m->size > RANK_MAX) {
		MPI_Comm_free(&m->comm);
		free(ids);
		free_binding(m);
		return NEMO__FAIL(ENOMEM, "no memory for the binding");
	}
	/* Every rank's host, pid namespace, pid and start time; a reference
	 * to each peer whose pid we can ask about, opened once (DEAD RANKS). */
	uint64_t mine[4] = {m->host, m->pidns, (uint64_t)getpid(), nemo__proc_self_start()};
	MPI_Allgather(mine, 4, MPI_UINT64_T, ids, 4, MPI_UINT64_T, m->comm);
	for (int r = 0; r < m->size; r++) {
		peer *p = &m->peers[r];
		p->host = ids[4 * r];
		p->pidns = ids[4 * r + 1];
		p->pid = (int)ids[4 * r + 2];
		p->start = ids[4 * r + 3];
		p->local = r != m->rank && p->host == m->host && p->pidns == m->pidns && p->pid > 0;
		if (p->local)
			nemo__proc_open(&p->proc, p->pid, p->start);
	}
	free(ids);
	for (unsigned i = 0; i < m->K; i++) {
		m->slots[i].m = m;
		post(m, i);
	}
	m->bell = &m->bell_local;
	m->bell_flags = NEMO_FUTEX_PRIVATE;
	if (m->prog == NEMO_MPI_PROGRESS_THREAD)
		bells_setup(m);
	m->threshold_ticks = nemo_ns_to_ticks((double)a.threshold_ns);
	atomic_store_explicit(&m->last_progress, nemo_ticks(), memory_order_relaxed);

	pthread_mutex_lock(&bind_lock);
	unsigned slot = BIND_MAX;
	for (unsigned i = 0; i < BIND_MAX && slot == BIND_MAX; i++)
		if (!atomic_load_explicit(&bindings[i].d, memory_order_relaxed))
			slot = i;
	if (slot == BIND_MAX || bound_locked(d)) {
		pthread_mutex_unlock(&bind_lock);
		for (unsigned i = 0; i < m->K; i++)
			if (m->slots[i].st == ST_POSTED) {
				MPI_Cancel(&m->slots[i].req);
				MPI_Wait(&m->slots[i].req, MPI_STATUS_IGNORE);
			}
		MPI_Comm_free(&m->comm);
		free_binding(m);
		return NEMO__FAIL(EALREADY, "the domain is bound already, or %d domains are", BIND_MAX);
	}
	if (!nbound++)
		nemo__remote_register(NEMO__REMOTE_MPI, &ops);
	m->slot = slot;
	atomic_store_explicit(&bindings[slot].m, m, memory_order_release);                 /* m, then d */
	atomic_store_explicit(&bindings[slot].d, d, memory_order_release);
	pthread_mutex_unlock(&bind_lock);

	if (m->prog == NEMO_MPI_PROGRESS_THREAD || m->prog == NEMO_MPI_PROGRESS_WATCHDOG) {
		if ((err = pthread_create(&m->thr, NULL, thr_main, m))) {
			m->prog = NEMO_MPI_PROGRESS_SEND;
			nemo_mpi_finalize(m);
			return NEMO__FAIL(err, "pthread_create of the binding's thread failed");
		}
		int ts;
		while (!(ts = atomic_load_explicit(&m->thr_state, memory_order_acquire)))
			sched_yield();
		if (ts < 0) {
			pthread_join(m->thr, NULL);
			m->prog = NEMO_MPI_PROGRESS_SEND;
			nemo_mpi_finalize(m);
			return NEMO__FAIL(-ts, "the binding's thread could not join the domain (a place is needed)");
		}
		pthread_getcpuclockid(m->thr, &m->thr_clock);
		m->has_thr = true;
	}
	MPI_Barrier(m->comm);   /* every rank is bound before anyone sends */
	*out = m;
	return 0;
}

/* Say BYE to every rank still waited for (through its record, behind
 * what is queued for it).  Agent. */
static void say_bye(nemo_mpi *m)
{
	wire bye = {.kind = K_BYE};
	for (int r = 0; r < m->size; r++) {
		peer *p = &m->peers[r];
		if (r == m->rank || is_dead(p) || p->gave_up)
			continue;
		pthread_mutex_lock(&p->lock);
		push(m, p, r, true);
		if (!is_dead(p) && !p->gave_up) {
			if (!p->q_n && p->fl_n < FLIGHT_MAX && have_window(p))
				(void)isend(m, p, r, &bye);
			else
				(void)keep(p, &bye);
		}
		settle(m, p);
		pthread_mutex_unlock(&p->lock);
	}
}

/* Is everything of finalize done?  Gives up on ranks silent for
 * peer_timeout_ns since bye_at (FINALIZE'S BOUNDED WAIT).  Agent. */
static bool finalize_done(nemo_mpi *m, uint64_t bye_at)
{
	bool all = true;
	double limit = (double)m->attr.peer_timeout_ns;
	for (int r = 0; r < m->size; r++) {
		peer *p = &m->peers[r];
		if (r == m->rank || is_dead(p) || p->gave_up)
			continue;
		bool said = atomic_load_explicit(&p->bye, memory_order_relaxed) != 0;
		if (said && !atomic_load_explicit(&p->busy, memory_order_relaxed))
			continue;
		uint64_t from = p->heard > bye_at ? p->heard : bye_at;
		if (!said && since_ns(from) > limit) {
			p->gave_up = true;
			nemo__fail(ETIMEDOUT, "nemo_mpi_finalize", "rank %d said nothing for peer_timeout_ns (%llu ns): "
				   "not waited for any more", r, (unsigned long long)m->attr.peer_timeout_ns);
			continue;
		}
		all = false;
	}
	for (unsigned i = 0; i < m->K && all; i++)
		if (m->slots[i].st == ST_HANDED || m->slots[i].st == ST_PENDING)
			all = false;
	return all && !m->pend_n;
}

int nemo_mpi_finalize(nemo_mpi *m)
{
	if (!m)
		return NEMO__FAIL(EINVAL, "m is NULL");
	if (!pthread_equal(pthread_self(), m->owner))
		return NEMO__FAIL(EPERM, "only the thread that created the binding finalizes it");
	bslot *bs = &bindings[m->slot];
	atomic_store_explicit(&m->closing, 1, memory_order_seq_cst);                          /* F1 */
	/* The binding's thread first: it would only compete with the pinned
	 * sends for MPI's lock while they finish (a send that may not call
	 * MPI leaves at its next round anyway: closing). */
	if (m->has_thr) {
		atomic_store_explicit(&m->stop, 1, memory_order_seq_cst);
		thr_kick(m);
		pthread_join(m->thr, NULL);
		m->has_thr = false;
	}
	atomic_store_explicit(&bs->m, NULL, memory_order_seq_cst);                            /* F2 */
	naps b = {0, 0};
	while (atomic_load_explicit(&bs->pins, memory_order_seq_cst))                         /* F3 */
		nap_round(&b, NULL);   /* the CPU to the sends that finish */
	atomic_thread_fence(memory_order_acquire);
	/* The owner is the agent from here on, and nobody else sends. */
	atomic_store_explicit(&m->bounded, 1, memory_order_relaxed);
	nemo_place *me = nemo__place_self();
	if (me)
		nemo__busy_enter(me);   /* no interrupt-mode handler while we hold locks */
	pthread_mutex_lock(&m->agent_lock);
	/* Drain the records, then BYE behind them, then receive until every
	 * rank has said it (or is dead, or given up on). */
	b = (naps){0, 0};
	for (;;) {
		unsigned n = progress(m);
		if (me)
			nemo_poll(NULL);
		if (!atomic_load_explicit(&m->npending, memory_order_seq_cst))
			break;
		if (n)
			b = (naps){0, 0};
		nap_round(&b, NULL);
	}
	say_bye(m);
	uint64_t bye_at = nemo_ticks();
	b = (naps){0, 0};
	for (;;) {
		unsigned n = progress(m);
		if (me)
			nemo_poll(NULL);
		if (finalize_done(m, bye_at))
			break;
		if (n)
			b = (naps){0, 0};
		nap_round(&b, NULL);
	}
	pthread_mutex_unlock(&m->agent_lock);
	if (me)
		nemo__busy_exit(me);
	while (atomic_load_explicit(&m->kicking, memory_order_acquire))
		sched_yield();
	pthread_mutex_lock(&bind_lock);
	atomic_store_explicit(&bs->d, NULL, memory_order_release);
	if (!--nbound)
		nemo__remote_register(NEMO__REMOTE_MPI, NULL);
	pthread_mutex_unlock(&bind_lock);
	bool dead = false, gave_up = false;
	for (int r = 0; r < m->size; r++) {
		peer *p = &m->peers[r];
		dead |= is_dead(p);
		gave_up |= p->gave_up;
		if ((is_dead(p) || p->gave_up) && (p->q_n || p->fl_n))
			drop_record(m, p, r, true);
	}
	for (unsigned i = 0; i < m->K; i++)
		if (m->slots[i].st == ST_POSTED) {
			MPI_Cancel(&m->slots[i].req);
			if (!dead && !gave_up)
				MPI_Wait(&m->slots[i].req, MPI_STATUS_IGNORE);
			else
				MPI_Request_free(&m->slots[i].req);
		}
	if (!dead && !gave_up)
		MPI_Comm_free(&m->comm);
	unsigned long long timeout = (unsigned long long)m->attr.peer_timeout_ns;
	free_binding(m);
	if (dead)
		return NEMO__FAIL(ECONNRESET, "a rank died before it finalized");
	if (gave_up)
		return NEMO__FAIL(ETIMEDOUT, "a rank did not finalize within peer_timeout_ns (%llu ns)", timeout);
	return 0;
}

int nemo_mpi_rank(const nemo_mpi *m)
{
	return m ? m->rank : -1;
}

int nemo_mpi_size(const nemo_mpi *m)
{
	return m ? m->size : -1;
}

int nemo_mpi_thread_level(const nemo_mpi *m)
{
	return m ? m->level : -1;
}

int nemo_mpi_id(nemo_mpi *m, nemo_place_id local, nemo_place_id *out)
{
	if (!m || !out)
		return NEMO__FAIL(EINVAL, "%s is NULL", m ? "out" : "m");
	if (nemo__id_is_remote(local)) {
		*out = local;
		return 0;
	}
	uint64_t st;
	if (!nemo__dest(m->d, local, &st))
		return NEMO__FAIL(ESRCH, "place %#llx is not in the domain", (unsigned long long)local);
	*out = rid(m->rank, nemo_place_index(local), nemo__id_gen(local));
	return 0;
}

int nemo_mpi_place(nemo_mpi *m, int rank, unsigned index, nemo_place_id *out)
{
	if (!m || !out)
		return NEMO__FAIL(EINVAL, "%s is NULL", m ? "out" : "m");
	if (rank < 0 || rank >= m->size)
		return NEMO__FAIL(EHOSTUNREACH, "rank %d is not in the communicator (size %d)", rank, m->size);
	if (index >= NEMO_PLACES_MAX)
		return NEMO__FAIL(ESRCH, "index %u is above the largest %u", index, NEMO_PLACES_MAX - 1);
	*out = rid(rank, index, GEN24);
	return 0;
}

/* The ordinary poll drives the binding (op_drive): this is nemo_poll,
 * with the binding's checks. */
int nemo_mpi_poll(nemo_mpi *m, unsigned *handled)
{
	if (handled)
		*handled = 0;
	if (!m)
		return NEMO__FAIL(EINVAL, "m is NULL");
	nemo_place *me = nemo__place_self();
	if (!me || me->d != m->d)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place of the bound domain");
	bool owner = pthread_equal(pthread_self(), m->owner);
	int err = nemo_poll(handled);
	if (!owner && m->prog != NEMO_MPI_PROGRESS_THREAD)
		return NEMO__FAIL(EPERM, "only the owner progresses MPI with this strategy (nemo_poll was run)");
	return err;
}

void nemo_mpi_check(nemo_mpi *m)
{
	if (!m || (m->prog != NEMO_MPI_PROGRESS_CHECK && m->prog != NEMO_MPI_PROGRESS_WATCHDOG))
		return;
	uint64_t now = nemo_ticks();
	if (now < m->check_due || !pthread_equal(pthread_self(), m->owner))
		return;
	m->check_due = now + m->threshold_ticks;
	nemo_mpi_poll(m, NULL);
}

static int wait_args(nemo_mpi *m, const struct timespec *abstime, nemo_place **me)
{
	if (!m)
		return NEMO__FAIL(EINVAL, "m is NULL");
	if (abstime && (abstime->tv_nsec < 0 || abstime->tv_nsec >= 1000000000L))
		return NEMO__FAIL(EINVAL, "abstime has tv_nsec %ld", abstime->tv_nsec);
	*me = nemo__place_self();
	if (!*me || (*me)->d != m->d)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place of the bound domain");
	return 0;
}

int nemo_mpi_wait(nemo_mpi *m, const struct timespec *abstime, unsigned *handled)
{
	if (handled)
		*handled = 0;
	nemo_place *me = NULL;
	int err = wait_args(m, abstime, &me);
	if (err)
		return err;
	return nemo_place_wait(abstime, handled);   /* it drives the binding (op_drive) */
}

int nemo_mpi_wait_for(nemo_mpi *m, const uint64_t *word, uint64_t old, const struct timespec *abstime,
		      unsigned *handled)
{
	if (handled)
		*handled = 0;
	if (!word)
		return NEMO__FAIL(EINVAL, "word is NULL");
	nemo_place *me = NULL;
	int err = wait_args(m, abstime, &me);
	if (err)
		return err;
	return nemo_place_wait_for(word, old, abstime, handled);   /* it drives the binding */
}

int nemo_mpi_get_counters(nemo_mpi *m, nemo_mpi_counters *out)
{
	if (!m || !out)
		return NEMO__FAIL(EINVAL, "%s is NULL", m ? "out" : "m");
#define LD(f) atomic_load_explicit(&m->f, memory_order_relaxed)
	*out = (nemo_mpi_counters){
		.sent = LD(c_sent), .funneled = LD(c_funneled), .received = LD(c_received),
		.direct = LD(c_direct), .handed = LD(c_handed), .dropped = LD(c_dropped),
		.progress_calls = LD(c_progress), .thread_sleeps = LD(c_sleeps),
		.thread_wakeups = LD(c_wakeups), .watchdog_takeovers = LD(c_takeovers),
		.dead_ranks = LD(c_dead), .deferred = LD(c_deferred), .send_dropped = LD(c_send_dropped),
		.dead_sends = LD(c_dead_sends),
	};
#undef LD
	out->thread_cpu_ns = m->thr_cpu_ns;
	if (m->has_thr) {
		struct timespec ts;
		if (!clock_gettime(m->thr_clock, &ts))
			out->thread_cpu_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	}
	return 0;
}
