/*
 * placewait.c - how a place looks at its queues: nemo_poll, nemo_place_wait
 * (the wait loop with the place's ops), and the event-loop descriptor.
 *
 * WAIT (r; nemo_place_wait with the ops below, through nemo__wait_loop,
 * the waiter layer's one decision of how long to poll)
 *
 *   W1  state := POLLING; poll: if nemo__pending() (any hint word, or a
 *       hot queue non-empty) then drain; return once something was handled.
 *   B1  seen := load(domain's bseq, seq_cst)
 *   W2  exchange(state, SLEEPING, seq_cst)
 *   W3  if nemo__pending() (seq_cst loads): state := RUNNING, drain.
 *   W4  futex_wait_bitset(bseq, seen, own bit): the waiter layer's SHARED
 *       WORD (a kick CASes state SLEEPING -> RUNNING, then bumps bseq and
 *       wakes the bit), so that a broadcast wakes all its sleepers with
 *       one syscall (nemo__kick_many)
 *   W5  state := RUNNING; drain; done if something was handled, else B1.
 *   W6  leaving the wait: store(state, RUNNING, seq_cst), and if the place
 *       handles messages on its own (interrupt mode, a descriptor, the
 *       progress thread), check nemo__pending() once more and drain
 *       (nemo__wait_leave, drain.c; the wait for room leaves the same way).
 *
 * (Why no wake-up is lost: drain.c, WHY NO WAKE-UP IS LOST.)
 *
 * DRIVEN WAITS (remote.h, the drive op)
 *
 * A place of a domain that a transport serves (a domain bound to MPI)
 * gets its remote messages through its ordinary calls.  While a
 * transport with a drive op is registered, nemo_poll drives it once
 * before it drains, and a wait drives it at the start, in every poll
 * round (try_take) and between slices of its sleep: the transport says
 * how long the place may sleep (*slice_ns; MPI has no descriptor to
 * sleep on, so the place that receives for the rank sleeps in slices of
 * a backoff, and every place in slices long enough to learn of a dead
 * peer).  A slice ends like a deadline (ETIMEDOUT from the wait loop),
 * and the wait goes on until its own deadline.  A local kick wakes the
 * place at once, as always.  A drive in a wait may end it with an error
 * (ECONNRESET: a peer the place talks to died).
 *
 * THE FILE DESCRIPTOR
 *
 * nemo_place_fd gives the place an eventfd (efd) for event loops.  The
 * place counts as waiting on it while fd_armed = 1: from the end of
 * nemo_place_fd or nemo_poll (and of nemo_place_wait, once the place has
 * a descriptor) until its next nemo_poll or nemo_place_wait, unless that
 * end found work and left the descriptor readable instead (F0).
 *
 *   F4  on entry to nemo_poll / nemo_place_wait: exchange(fd_armed, 0)
 *   --  the drain; it may grant streams (grant.c, G0: only while
 *       fd_armed = 0, so never in a drain inside the place's own send
 *       between polls while it is armed)
 *   F0  at the end, if nemo__pending() (seq_cst loads of the hint words
 *       and hot queues): the loop must come back at once: write the
 *       eventfd ourselves and fetch_add(fd_writes, 1, release), even if
 *       an unread write keeps it readable (an edge-triggered loop sees
 *       only a new write).  The grants stay, and the descriptor is not
 *       armed.  Otherwise:
 *   F7  (nemo_poll and nemo_place_wait's return) if senders hold stream
 *       grants: GR1-GR3 take them back (grant.c: their hint bits set),
 *       and drain again at once - the granted queues may hold messages
 *       sent without a hint - then F0 again.  Left to F2, those bits
 *       would bring the loop back for a round that finds nothing (after
 *       every stream, as test_fd saw).
 *   F5  if load(fd_writes, acquire) is ahead of fd_read (the writes read
 *       back so far), or load(fd_kickers, seq_cst) > 0 (a kicker may have
 *       written and not counted yet): read the eventfd and add its value
 *       to fd_read (fd_read may run ahead of fd_writes until the kicker
 *       counts)
 *   GR1-GR3 take any grants left back (grant.c: after nemo_place_fd's
 *       own arming, which has no F7), and count every stream as paused
 *   F1  arm: store(fd_armed, 1, seq_cst)
 *   F2  if nemo__pending(): if exchange(fd_armed, 0) == 1, write the
 *       eventfd ourselves and count it: the loop comes back at once
 *   F3  a kicker (kick.c; only after S4 set its hint bit, or NEMO_PUSH)
 *       that reads the place RUNNING with fd_armed = 1 (seq_cst):
 *       fetch_add(fd_kickers, 1); if exchange(fd_armed, 0) == 1: write
 *       the eventfd, then fetch_add(fd_writes, 1, release);
 *       fetch_sub(fd_kickers, 1, release)
 *   F6  leave: exchange(fd_armed, 0), wait until fd_kickers is 0, close
 *
 * A loop under a flood therefore pays epoll_wait and its own write per
 * round: the writes are read back only when a round ends with nothing
 * queued, and its senders keep their stream grants (no fence, hint or
 * kick per message) for as long as the flood lasts.
 *
 * No message is missed: S4;F3 and F1;F2 are the store-buffering pattern,
 * all seq_cst, so the kicker sees the place armed (and writes), or F2
 * sees the hint (and writes itself); a hint that was already set when S4
 * looked was set by a sender that went through F3 itself, or is seen by
 * F2.  A granted sender sets no hint and never kicks: its messages are
 * found because the place is in a nemo call, or left the descriptor
 * readable at F0 (the loop comes back and drains the granted queues,
 * which stay hot), or revoked the grant before F1 (GR3 sets the hint bit,
 * and F7's drain or F2 sees it).  Exactly one of the exchanges takes an arming, so a place gets at
 * most one write per arming.  The descriptor is not left readable for
 * nothing: a kicker makes its write inside its bracket (fd_kickers) and
 * counts it after, so every write F5 can find is counted or belongs to a
 * kicker still in its bracket, and F5 reads in either case (reading takes
 * all of it; with nothing there the read fails with EAGAIN, a wasted call
 * only while a kicker is between its increment and its exchange).  A
 * write made after F5 makes the descriptor readable, and the loop comes
 * back for it.  F6 against F3: a
 * kicker whose exchange took the arming incremented fd_kickers before,
 * and F6's exchange comes after it in fd_armed's order, so F6 waits for
 * that kicker's write before closing (a write to a closed, reused
 * descriptor would reach someone else's file).  models/placefd.pml checks
 * this with spin, grants included, and that F5 leaves no write behind
 * (and that arming without F2, F5 only when the flag was taken, F5 only
 * for counted writes - the last left the loop spinning empty while a
 * kicker that had written was preempted before its count -, F0 without
 * a readable descriptor, a grant while armed and an arming that keeps
 * its grants are caught; with F7, that a quiet poll after a stream
 * leaves the descriptor unreadable).  Cost: one write(2) for the sender when the
 * place is armed, none while it is inside nemo_poll or left readable;
 * the receiver pays epoll_wait and one write(2) per round that ends
 * with work queued, epoll_wait and one read(2) per round that does not.
 */
#define _GNU_SOURCE
#include "../platform/deadline.h"
#include "grant.h"
#include "messaging_internal.h"
#include "remote.h"

#include <errno.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* --------------------------------------------------------- poll, wait */

/* DRIVEN WAITS: the calling thread's wait drives its transport (set by
 * place_wait, saved around a handler's nested wait), and the error a
 * drive ended it with. */
static __thread bool drive_on __attribute__((tls_model("initial-exec")));
static __thread int drive_err __attribute__((tls_model("initial-exec")));

static inline bool drives(void)
{
	return atomic_load_explicit(&nemo__remote_drivers, memory_order_relaxed) != 0;
}

/* How many drains one nemo_poll of a place on its descriptor makes at most. */
#define FD_PASSES 4

int nemo_poll(unsigned *handled)
{
	nemo_place *me = nemo__place_self();
	if (!me)  /* a place of a shared domain's, or none (remote.h) */
		return nemo__remote_self(NEMO__SELF_POLL, &(nemo__remote_self_args){ .handled = handled }, __func__);
	nemo__busy_enter(me);
	bool fd = atomic_load_explicit(&me->efd, memory_order_relaxed) >= 0;
	if (fd)
		nemo__fd_disarm(me);
	unsigned n = 0;
	uint64_t slice;
	int rc = 0;
	if (drives()) {  /* DRIVEN WAITS: a poll reports a death as a wait does */
		int e = nemo__remote_drive(me->d, "nemo_poll", &n, &slice);
		if (e > 0)
			rc = e;
	}
	n += nemo__drain(me, NEMO_AM_CTX_POLL, false);
	/* A loop on the descriptor pays two system calls a round (its
	 * epoll_wait, our write at F0), each the cost of draining dozens of
	 * messages.  Under a stream the queues refill while we drain: drain
	 * again while something is pending, up to FD_PASSES passes, so that
	 * the system calls are paid once for up to four drains (docs/bench.md,
	 * third session). */
	for (unsigned pass = 1; fd && pass < FD_PASSES && nemo__pending(me); pass++)
		n += nemo__drain(me, NEMO_AM_CTX_POLL, false);
	if (me->ovf_n)
		nemo__ovf_flush(me);
	if (fd)
		n += nemo__fd_arm(me, true, NEMO_AM_CTX_POLL);
	nemo__busy_exit(me);
	if (handled)
		*handled = n;
	return rc;
}

/* ------------------------------------------------- the file descriptor */

void nemo__fd_disarm(nemo_place *me)
{
	atomic_exchange_explicit(&me->fd_armed, 0, memory_order_seq_cst);                 /* F4 */
}

/* F5: read back the writes we know of (a kicker counts its write after
 * making it, so each counted one is in the eventfd), and those a kicker
 * may have made without counting them yet: a kicker preempted between
 * its write and its count left the descriptor readable, and the loop
 * spun on it, empty, for the rest of the kicker's time off the CPU (98%
 * empty rounds with two senders on 2 vCPUs). */
static void fd_read_back(nemo_place *me)
{
	uint32_t w = atomic_load_explicit(&me->fd_writes, memory_order_acquire);
	if ((int32_t)(w - me->fd_read) > 0 || atomic_load_explicit(&me->fd_kickers, memory_order_seq_cst)) {
		uint64_t v;
		if (read(atomic_load_explicit(&me->efd, memory_order_relaxed), &v, sizeof v) == (ssize_t)sizeof v)
			me->fd_read += (uint32_t)v;
	}
}

/* Write the eventfd ourselves: something is waiting already. */
static void fd_self_write(nemo_place *me)
{
	uint64_t one = 1;
	if (write(atomic_load_explicit(&me->efd, memory_order_relaxed), &one, sizeof one) == (ssize_t)sizeof one)
		atomic_fetch_add_explicit(&me->fd_writes, 1, memory_order_release);
}

unsigned nemo__fd_arm(nemo_place *me, bool drain, nemo_am_context ctx)
{
	NEMO__INVARIANT(atomic_load_explicit(&me->efd, memory_order_relaxed) >= 0, "armed without a descriptor");
	unsigned n = 0;
	if (drain && me->grant_n && !nemo__pending(me)) {                                 /* F7 */
		nemo__grant_revoke_all(me);
		n = nemo__drain(me, ctx, false);
	}
	if (nemo__pending(me)) {                                                            /* F0 */
		/* Still streaming: the loop must come back at once, so we
		 * write the descriptor - even when a write not read back keeps
		 * it readable: an edge-triggered loop (EPOLLET, tokio) sees
		 * only a new write.  The loop looks at the granted queues when
		 * it comes back, so the grants stay (grant.c, G0), and the
		 * descriptor is not armed. */
		fd_self_write(me);
		return n;
	}
	fd_read_back(me);                                                                  /* F5 */
	nemo__grant_revoke(me);   /* the descriptor, not the queues, is watched now (grant.c) */
	nemo__grant_pause(me);    /* and the streams paused: they start counting again */
	atomic_store_explicit(&me->fd_armed, 1, memory_order_seq_cst);                    /* F1 */
	/* Kept sends need no self-write: their receivers kick us (a write,
	 * now that we are armed) when they free room (overflow.c, ROOM
	 * KICKS: the caller's busy exit asks them). */
	if (nemo__pending(me)) {                                                            /* F2 */
		/* Undo, and make the descriptor readable: the loop comes back. */
		if (atomic_exchange_explicit(&me->fd_armed, 0, memory_order_seq_cst))
			fd_self_write(me);
	}
	return n;
}

int nemo_place_fd(int *fd)
{
	nemo_place *me = nemo__place_self();
	if (!fd)
		return NEMO__FAIL(EINVAL, "fd is NULL");
	if (!me)  /* a place of a shared domain's, or none (remote.h) */
		return nemo__remote_self(NEMO__SELF_FD, &(nemo__remote_self_args){ .fd = fd }, __func__);
	int e = atomic_load_explicit(&me->efd, memory_order_relaxed);
	if (e < 0) {
		e = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (e < 0)
			return NEMO__FAIL(errno, "cannot create the place's eventfd");
		me->fd_read = atomic_load_explicit(&me->fd_writes, memory_order_relaxed);
		atomic_store_explicit(&me->efd, e, memory_order_release);
	}
	nemo__busy_enter(me);
	nemo__fd_arm(me, false, NEMO_AM_CTX_POLL);   /* no handler runs in nemo_place_fd */
	nemo__busy_exit(me);
	*fd = e;
	return 0;
}

void nemo__fd_close(nemo_place *me)
{
	int e = atomic_load_explicit(&me->efd, memory_order_relaxed);
	if (e < 0)
		return;
	atomic_exchange_explicit(&me->fd_armed, 0, memory_order_seq_cst);                 /* F6 */
	for (unsigned n = 1; atomic_load_explicit(&me->fd_kickers, memory_order_seq_cst); n++) {
		nemo_cpu_relax();
		if (n % 64 == 0)
			sched_yield();      /* a kicker preempted inside its bracket */
	}
	atomic_store_explicit(&me->efd, -1, memory_order_relaxed);
	close(e);
}

static bool place_try_take(void *arg)
{
	nemo_place *me = arg;
	/* The drain itself, not "pending, then drain": its empty checks
	 * cost as much as nemo__pending's, and a message found is handled
	 * without a second look. */
	unsigned n = 0;
	if (drive_on) {   /* DRIVEN WAITS */
		uint64_t slice;
		int e = nemo__remote_drive(me->d, me->wf_word ? "nemo_place_wait_for" : "nemo_place_wait", &n,
					   &slice);
		if (e > 0) {
			drive_err = e;
			return true;
		}
	}
	n += nemo__drain(me, NEMO_AM_CTX_WAIT, false);
	if (me->ovf_n)
		nemo__ovf_flush(me);
	me->handled += n;
	if (me->wf_word)         /* nemo_place_wait_for: done when the word moved */
		return __atomic_load_n(me->wf_word, __ATOMIC_ACQUIRE) != me->wf_old;
	return n > 0;
}

/* W3: anything for us?  (the hint words and hot queues, seq_cst.  Kept
 * sends do not forbid the sleep: nemo__ovf_arm asked their receivers to
 * kick us when they free room - overflow.c, ROOM KICKS - and such a kick
 * sets a hint bit like any sender's.) */
static bool place_pending(void *arg)
{
	nemo_place *me = arg;
	return nemo__pending(me);
}

static bool place_sleep_begin(void *arg, uint32_t **word, uint32_t *val, uint32_t *bits)
{
	nemo_place *me = arg;
	nemo_waiter *w = atomic_load_explicit(&me->waiter, memory_order_relaxed);
	/* Stop watching granted queues first (grant.c, THE STREAM GRANT):
	 * their senders send without hint or kick.  The revocation sets
	 * their hint bits, so W3 below finds them and the loop drains them
	 * once more before it sleeps. */
	nemo__grant_revoke(me);
	/* Kept sends: their receivers kick us when they free room. */
	if (me->ovf_n)
		nemo__ovf_arm(me);
	/* Sleep on the domain's word with our bit (waiter.c, SHARED WORD), so
	 * that a broadcast wakes every sleeping place with one call. */
	if (nemo__slot_sleep_begin(w, &me->d->bseq, place_pending, me, word, val, bits))    /* B1-W3 */
		return false;    /* pending: the futex_wait returns at once and try_take drains */
	NEMO__PCOUNT(me, c_sleeps);
	return false;                                                                      /* W4 */
}

static void place_sleep_end(void *arg)
{
	nemo_place *me = arg;
	nemo__slot_awake(atomic_load_explicit(&me->waiter, memory_order_relaxed));           /* W5 */
}

/* When the kick that woke us was issued (waiter.c stamps the slot before
 * its FUTEX_WAKE): the wait loop learns the wake-up latency from it
 * (policy.c, THE COST OF BLOCKING), so a program of places learns what
 * its own sleeps cost instead of keeping the start value. */
static uint64_t place_kicked_at(void *arg)
{
	nemo_place *me = arg;
	return nemo__slot_kicked_at(atomic_load_explicit(&me->waiter, memory_order_relaxed));
}

static const nemo__wait_ops place_ops = {
	.try_take = place_try_take,
	.sleep_begin = place_sleep_begin,
	.sleep_end = place_sleep_end,
	.kicked_at = place_kicked_at,
	.futex_flags = NEMO_FUTEX_PRIVATE,
};

/* WHO HAS A CPU OF ITS OWN (the waiter layer's NEMO__WAIT_OWNED: it
 * polls 4C instead of C, wait.c, A CPU OF ITS OWN): a place whose thread
 * may run on one CPU only, when no other active place of its domain may
 * run on that CPU only.  Pinning is the program's own statement that the
 * CPU is the place's; a count (no more places than CPUs) would not do:
 * the scheduler may stack two unpinned places on one CPU, where a long
 * poll only delays the other.  Each place publishes its one CPU (own_cpu,
 * relaxed) and reads its affinity and the others' CPUs again every
 * OWN_REREAD waits, since a program may re-pin a thread.  A stale answer
 * (a place pinned beside it since) costs at most OWN_REREAD waits of the
 * longer budget, shortened meanwhile by any preempted poll, and never a
 * lost wake-up: the budget decides how long to poll, not whether the
 * sleep is announced.  Not seen: threads that are not
 * places of this domain pinned to the same CPU - those are the program's
 * to place; a poll they preempt shortens the budget (wait.c). */
#define OWN_REREAD 4096

static bool place_owns_cpu(nemo_place *me)
{
	if (me->own_reread) {
		me->own_reread--;
		return me->owns_cpu;
	}
	me->own_reread = OWN_REREAD;
	int one = nemo__only_cpu();
	atomic_store_explicit(&me->own_cpu, one, memory_order_relaxed);
	bool alone = one >= 0;
	nemo_domain *d = me->d;
	for (unsigned i = 0; alone && i < d->P; i++) {
		nemo_place *x = &d->places[i];
		if (x != me && atomic_load_explicit(&x->own_cpu, memory_order_relaxed) == one &&
		    nemo__status_state(atomic_load_explicit(&x->status, memory_order_acquire)) == NEMO__ST_ACTIVE)
			alone = false;
	}
	me->owns_cpu = alone;
	return alone;
}

static int place_wait(nemo_place *me, const struct timespec *abstime, unsigned *handled,
		      const uint64_t *word, uint64_t old)
{
	int rc;
	nemo__busy_enter(me);
	const uint64_t *outer_word = me->wf_word;   /* a handler may wait too */
	uint64_t outer_old = me->wf_old;
	me->wf_word = word;
	me->wf_old = old;
	if (atomic_load_explicit(&me->efd, memory_order_relaxed) >= 0)
		nemo__fd_disarm(me);        /* it waits here now, not on its descriptor */
	unsigned outer = me->handled;   /* a handler may wait too: nest the count */
	me->handled = 0;
	nemo_waiter *w = atomic_load_explicit(&me->waiter, memory_order_relaxed);
	bool outer_drive = drive_on;
	int outer_err = drive_err;
	drive_err = 0;
	uint64_t slice = 0;
	const char *fn = word ? "nemo_place_wait_for" : "nemo_place_wait";
	/* DRIVEN WAITS: a death found by this first drive ends the wait too. */
	int first = drives() ? nemo__remote_drive(me->d, fn, &me->handled, &slice) : -1;
	drive_on = first >= 0;
	if (first > 0)
		drive_err = first;
	nemo__slot_polling(w);                                                             /* W1 */
	unsigned flags = place_owns_cpu(me) ? NEMO__WAIT_OWNED : 0;
	for (;;) {
		if (drive_on && (drive_err || (word ? __atomic_load_n(word, __ATOMIC_ACQUIRE) != old : me->handled > 0))) {
			rc = drive_err;   /* a drive between slices ran a handler, or ended the wait */
			break;
		}
		if (!slice) {
			rc = nemo__wait_loop(&place_ops, me, &me->policy, CLOCK_MONOTONIC, abstime, flags);
			break;
		}
		/* A slice of the sleep: until abstime or slice_ns from now. */
		struct timespec until;
		nemo__deadline_in(CLOCK_MONOTONIC, slice, &until);
		bool last = abstime && !nemo__ts_before(&until, abstime);
		rc = nemo__wait_loop(&place_ops, me, &me->policy, CLOCK_MONOTONIC, last ? abstime : &until, flags);
		if (rc != ETIMEDOUT || last)
			break;
		slice = 0;
		int e = nemo__remote_drive(me->d, fn, &me->handled, &slice);
		if (e > 0)
			drive_err = e;
		else if (e < 0)
			slice = 0;   /* unbound meanwhile: an ordinary wait from here */
		nemo__slot_polling(w);
	}
	if (drive_err)
		rc = drive_err;
	drive_on = outer_drive;
	drive_err = outer_err;
	me->handled += nemo__wait_leave(me, w);                                            /* W6 */
	if (atomic_load_explicit(&me->efd, memory_order_relaxed) >= 0)
		me->handled += nemo__fd_arm(me, true, NEMO_AM_CTX_WAIT);   /* back to its descriptor */
	unsigned n = me->handled;
	me->handled = outer + n;
	me->wf_word = outer_word;
	me->wf_old = outer_old;
	nemo__busy_exit(me);
	if (rc == ETIMEDOUT && n && !word)
		rc = 0;
	if (handled)
		*handled = n;
	return rc;
}

int nemo_place_wait(const struct timespec *abstime, unsigned *handled)
{
	nemo_place *me = nemo__place_self();
	int rc = nemo__check_deadline(__func__, CLOCK_MONOTONIC, abstime);
	if (!me)  /* a place of a shared domain's, or none (remote.h) */
		return rc ? rc : nemo__remote_self(NEMO__SELF_WAIT,
			&(nemo__remote_self_args){ .abstime = abstime, .handled = handled }, __func__);
	return rc ? rc : place_wait(me, abstime, handled, NULL, 0);
}

int nemo_place_wait_for(const uint64_t *word, uint64_t old, const struct timespec *abstime,
			unsigned *handled)
{
	nemo_place *me = nemo__place_self();
	if (!word)
		return NEMO__FAIL(EINVAL, "word is NULL");
	int rc = nemo__check_deadline(__func__, CLOCK_MONOTONIC, abstime);
	if (rc)
		return rc;
	if (!me)  /* a place of a shared domain's, or none (remote.h) */
		return nemo__remote_self(NEMO__SELF_WAIT_FOR, &(nemo__remote_self_args){ .word = word, .old = old,
					 .abstime = abstime, .handled = handled }, __func__);
	return place_wait(me, abstime, handled, word, old);
}
