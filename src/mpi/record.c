/*
 * record.c - a rank's record: its window and queue (mpi_internal.h,
 * SENDS: MS1-MS5), the doorbell rings, and the naps of a blocked send.
 */
#define _GNU_SOURCE
#include "../platform/deadline.h"
#include "mpi_internal.h"

/* ------------------------------------------------------------------------
 * Sends: a rank's window and FIFO (SENDS, mpi_internal.h)
 * ------------------------------------------------------------------------ */




/* Memory that may be taken in a handler run by a signal (interrupt
 * mode): mmap, as the local overflow does. */
void *pages(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* busy and npending after a change of the record (lock held). */
void settle(nemo_mpi *m, peer *p)
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

/* MS5: drop what the record of dead (or given-up) rank r holds: the FIFO
 * always, the window if this thread may call MPI.  Lock held. */
void drop_record(nemo_mpi *m, peer *p, int r, bool mpi)
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

/* MS2: test the window, oldest first; completed sends leave it.  Returns
 * how many completed.  Lock held, MPI allowed. */
unsigned reap(nemo_mpi *m, peer *p, int r)
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
int isend(nemo_mpi *m, peer *p, int r, const wire *w)
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
bool have_window(peer *p)
{
	return p->fl || (p->fl = pages(FLIGHT_MAX * sizeof(flight))) != NULL;
}

/* MS2 for rank r: reap, then move the FIFO's head into the window while
 * it has room; a dead or given-up rank's record is dropped (MS5).  Lock
 * held.  Returns how much moved (completed or posted). */
unsigned push(nemo_mpi *m, peer *p, int r, bool mpi)
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

/* Keep w at the FIFO's tail (MS1).  Lock held.  0, ENOBUFS, ENOMEM. */
int keep(peer *p, const wire *w)
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

void thr_kick(nemo_mpi *m)
{
	atomic_thread_fence(memory_order_seq_cst);                                         /* DBK2 */
	nemo__word_kick(&m->bell->state, NEMO_WAITER_SLEEPING, m->bell_flags);             /* DBK3 */
}

/* After a send to rank r completed: ring r's doorbell if its progress
 * thread sleeps (DBR1 fence, DBR2 the raw word's kick). */
void ring(nemo_mpi *m, int r)
{
	bell *b = m->peers[r].bell;
	if (!b)
		return;
	atomic_thread_fence(memory_order_seq_cst);                                         /* DBR1 */
	nemo__word_kick(&b->state, NEMO_WAITER_SLEEPING, NEMO_FUTEX_SHARED);               /* DBR2 */
}

void nap_round(naps *b, const struct timespec *abstime)
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
	nemo__deadline_in(CLOCK_MONOTONIC, b->nap_ns, &until);
	if (abstime && nemo__ts_before(abstime, &until))
		until = *abstime;
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
		;
}
