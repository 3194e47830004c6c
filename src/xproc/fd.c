/*
 * fd.c - a shared place's event-loop descriptor (nemo_place_fd,
 * nemo_xproc_fd): an eventfd that becomes readable when the place has
 * work, although its senders live in other processes.
 *
 * Why a bridge thread.  An in-process kicker writes the receiver's
 * eventfd (placewait.c, THE FILE DESCRIPTOR); a process cannot write
 * another's eventfd (no shared descriptor, and pidfd_getfd needs ptrace
 * rights).  What senders of every process can reach is the place's
 * shared futex word, wstate, which they already kick.  So each place
 * that has a descriptor has a thread of its own process, the bridge,
 * that sleeps on wstate while the place waits on its descriptor, and
 * writes the eventfd when woken.  Alternatives weighed: a named FIFO or
 * socket per place that senders write (a system call per send, always,
 * and a file the sender opens); futex_waitv for one bridge per process
 * (Linux 5.16); a poll of the rings from the event loop (a CPU).  Cost of
 * the bridge: a thread per place with a descriptor, one FUTEX_WAKE of it
 * per arming, and a wake-up of it and an eventfd write per kick.
 *
 * THE ARMING.  From the end of nemo_place_fd or of the place's outermost
 * poll or wait until the start of its next one (nemo__xp_enter/exit),
 * the place is armed: it counts as waiting on its descriptor.
 *
 *   XA0 fd_armed = 1                         seq_cst (the arming's token)
 *   XA1 wstate = FD_ARMED                    seq_cst exchange
 *   XA2 look at everything a sleeper looks at (XW3: messages, `deaths`,
 *       our own word, kept sends that may go; seq_cst), after XR1 for the
 *       kept sends (kept.c, XK4): anything -> if exchange(fd_armed, 0) == 1,
 *       CAS wstate FD_ARMED -> RUNNING, and if that succeeded FUTEX_WAKE
 *       it (the bridge, woken by XA0 already, may have queued on the word
 *       since XA1), and write the eventfd ourselves
 *   XA3 FUTEX_WAKE the bridge (private, on fd_armed)
 *
 *   bridge  XB1  sleep until fd_armed == 1 (private futex) or fd_exit
 *           XB2 while wstate == FD_ARMED: futex_wait(wstate, FD_ARMED),
 *               shared, in slices of 100 ms; after each slice that ends
 *               with no kick, nemo_xproc_check (a reclaim kicks us: XD3)
 *           XB3 wstate left FD_ARMED: if exchange(fd_armed, 0) == 1, write
 *               the eventfd, then fd_writes += 1 (release); back to XB1
 *
 *   kick    XS2 load wstate (seq_cst); XS3 if SLEEPING or FD_ARMED: CAS it
 *           to RUNNING and FUTEX_WAKE (procs.c, every kick: a sender's,
 *           a receiver's XC2 for room, a reclaim's XD3, a holder's XR4)
 *
 *   disarm  XF4 if exchange(fd_armed, 0) == 1: CAS wstate FD_ARMED ->
 *           RUNNING, and if that succeeded FUTEX_WAKE it (shared)
 *           XF5 if fd_writes (acquire) is ahead of fd_read: read the
 *           eventfd, add what it held to fd_read
 *
 * No message is missed.  A message's XS1 and the kick's XS2 against XA1 and
 * XA2 is the store-then-look pair of THE SLEEP (sleep.c), all seq_cst: XA2
 * sees the message (and the place writes its own descriptor), or XS2 sees
 * FD_ARMED and the kicker moves the word to RUNNING and wakes.  The
 * bridge is then either queued on the word (woken) or about to call
 * futex_wait, which returns at once since the word is not FD_ARMED; XB3
 * sees the word moved and takes the token - unless the owner took it
 * first (XF4, or XA2's undo), and then the owner is inside a call that
 * drains.  A kick for room (a kept send) or a death is one more kick.
 *
 * Each arming is taken by one exchange of fd_armed (XA2, XB3 or XF4), so a
 * place gets at most one write per arming.  The bridge may take the token
 * of a later arming than the one whose kick it saw (the owner disarmed
 * and armed again meanwhile): the write then comes early, the loop comes
 * back once with nothing to do, and the later arming's kick finds no
 * bridge to write - harmless, since the descriptor is readable already
 * and stays so until the owner's next XF5.  XF5 reads only writes counted
 * (a write is counted after it is made), so the descriptor is not left
 * readable for nothing; a write made and not yet counted is read by the
 * next disarm.
 *
 * Sharing the word.  The owner sleeps on wstate too (every wait of
 * sleep.c), with the value SLEEPING; the bridge with FD_ARMED.  A
 * futex_wait queues only while the word holds the value given, and the
 * word leaves FD_ARMED only by a kick, XA2's undo or XF4 - each of which
 * wakes - so the owner and the bridge are never queued on the word
 * together, and a kick's FUTEX_WAKE of one waiter wakes the right one.
 * models/xprocfd.pml checks XA0-XA3, XB1-XB3, XF4 and the kick, with a message
 * and a poll or a wait of the owner's own racing them, and fails without
 * XA2, when a kick ignores FD_ARMED, when the bridge writes without the
 * token, and when XA2's undo or XF4 does not wake the bridge (the first
 * version of this file missed XA2's wake: spin found it).
 *
 * The end (nemo__xp_fd_close, from nemo_xproc_leave): XF4, fd_exit = 1,
 * wake the bridge on both words, join it, close the descriptor.
 */
#define _GNU_SOURCE

#include "segment.h"

#include "../platform/fail.h"

#include <nemo/platform.h>

#include <errno.h>
#include <limits.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define BRIDGE_SLICE_NS 100000000L        /* an armed place looks for dead peers this often */

static void fd_write(nemo_xproc_place *p)
{
	uint64_t one = 1;
	if (write(p->efd, &one, sizeof one) == (ssize_t)sizeof one)
		atomic_fetch_add_explicit(&p->fd_writes, 1, memory_order_release);
}

static void *bridge(void *arg)
{
	nemo_xproc_place *p = arg;
	_Atomic uint32_t *ws = &place_at(p->x, p->idx)->wstate;
	for (;;) {
		while (!atomic_load_explicit(&p->fd_exit, memory_order_acquire) &&
		       !atomic_load_explicit(&p->fd_armed, memory_order_seq_cst))                 /* XB1 */
			nemo__word_sleep(&p->fd_armed, 0, NULL, NEMO_FUTEX_PRIVATE);
		if (atomic_load_explicit(&p->fd_exit, memory_order_acquire))
			return NULL;
		while (atomic_load_explicit(ws, memory_order_seq_cst) == XP_FD_ARMED &&
		       !atomic_load_explicit(&p->fd_exit, memory_order_acquire)) {               /* XB2 */
			struct timespec slice = { 0, BRIDGE_SLICE_NS };
			if (nemo__word_sleep(ws, XP_FD_ARMED, &slice, NEMO_FUTEX_SHARED) == ETIMEDOUT)
				nemo_xproc_check(p->x);
		}
		if (atomic_exchange_explicit(&p->fd_armed, 0, memory_order_seq_cst))             /* XB3 */
			fd_write(p);
	}
}

static void fd_arm(nemo_xproc_place *p)
{
	_Atomic uint32_t *ws = &place_at(p->x, p->idx)->wstate;
	nemo__xp_room_ask(p);                            /* XR1 for kept sends (kept.c, XK4) */
	atomic_store_explicit(&p->fd_armed, 1, memory_order_seq_cst);                     /* XA0 */
	atomic_exchange_explicit(ws, XP_FD_ARMED, memory_order_seq_cst);                  /* XA1 */
	if (nemo__xp_wakeable(p, memory_order_seq_cst) &&
	    atomic_exchange_explicit(&p->fd_armed, 0, memory_order_seq_cst)) {            /* XA2 */
		nemo__word_kick(ws, XP_FD_ARMED, NEMO_FUTEX_SHARED);   /* the bridge may be queued */
		fd_write(p);
	}
	nemo__word_wake(&p->fd_armed, 1, NEMO_FUTEX_PRIVATE);                               /* XA3 */
}

static void fd_disarm(nemo_xproc_place *p)
{
	_Atomic uint32_t *ws = &place_at(p->x, p->idx)->wstate;
	if (atomic_exchange_explicit(&p->fd_armed, 0, memory_order_seq_cst)) {            /* XF4 */
		nemo__word_kick(ws, XP_FD_ARMED, NEMO_FUTEX_SHARED);   /* the bridge, if queued */
	}
	uint32_t w = atomic_load_explicit(&p->fd_writes, memory_order_acquire);            /* XF5 */
	if (w != p->fd_read) {
		uint64_t v;
		if (read(p->efd, &v, sizeof v) == (ssize_t)sizeof v)
			p->fd_read += (uint32_t)v;
	}
}

/* The start and the end of a call that polls, waits or sleeps on the
 * place: the outermost one disarms the descriptor, and arms it again. */
void nemo__xp_enter(nemo_xproc_place *p)
{
	if (p->busy++ == 0 && p->efd >= 0)
		fd_disarm(p);
}

void nemo__xp_exit(nemo_xproc_place *p)
{
	if (--p->busy == 0 && p->efd >= 0 && own_ok(p, memory_order_relaxed))
		fd_arm(p);
}

int nemo__xp_fd(nemo_xproc_place *p, int *fd)
{
	if (p->efd < 0) {
		int e = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (e < 0)
			return nemo__fail(errno, "nemo_place_fd", "cannot create place %#x's eventfd", p->id);
		p->efd = e;
		p->fd_read = 0;
		atomic_store_explicit(&p->fd_writes, 0, memory_order_relaxed);
		atomic_store_explicit(&p->fd_exit, 0, memory_order_relaxed);
		atomic_store_explicit(&p->fd_armed, 0, memory_order_relaxed);
		int rc = pthread_create(&p->bridge, NULL, bridge, p);
		if (rc) {
			close(e);
			p->efd = -1;
			return nemo__fail(rc, "nemo_place_fd", "cannot start place %#x's bridge thread", p->id);
		}
		p->bridge_on = true;
	}
	if (!p->busy)
		fd_arm(p);
	*fd = p->efd;
	return 0;
}

int nemo_xproc_fd(nemo_xproc_place *p, int *fd)
{
	if (!p || !p->joined || !fd)
		return NEMO__FAIL(EINVAL, "place is NULL or not joined, or fd is NULL");
	if (nemo__xp_inherited(p->x))
		return NEMO__XP_INHERITED();
	if (!own_ok(p, memory_order_relaxed))
		return nemo__xp_own_lost(p, __func__);
	return nemo__xp_fd(p, fd);
}

void nemo__xp_fd_close(nemo_xproc_place *p)
{
	if (p->efd < 0)
		return;
	fd_disarm(p);
	atomic_store_explicit(&p->fd_exit, 1, memory_order_release);
	nemo__word_wake(&p->fd_armed, INT_MAX, NEMO_FUTEX_PRIVATE);
	nemo__word_wake(&place_at(p->x, p->idx)->wstate, INT_MAX, NEMO_FUTEX_SHARED);
	if (p->bridge_on)
		pthread_join(p->bridge, NULL);
	p->bridge_on = false;
	close(p->efd);
	p->efd = -1;
}
