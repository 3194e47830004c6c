/*
 * send.c - the remote sends (mpi_internal.h, SENDS: MS1-MS4 of one send)
 * and the messaging hook's am / notify ops.
 */
#define _GNU_SOURCE
#include "mpi_internal.h"

/* Send w to rank r (MS1-MS4).  me: the sending place. */
static int send_to(nemo_mpi *m, nemo_place *me, int r, const wire *w, unsigned flags,
		   const struct timespec *abstime, const char *fn)
{
	peer *p = &m->peers[r];
	bool mpi = may_call_mpi(m), handler = nemo__place_hdepth(me) > 0;
	bool owner = pthread_equal(pthread_self(), m->owner);
	naps b = {0, 0};
	for (;;) {
		if (atomic_load_explicit(&m->closing, memory_order_seq_cst))
			return nemo__fail(ESHUTDOWN, fn, "this rank's binding is finalizing");
		/* Nothing goes to MPI for a rank of this host unless its death,
		 * if older than LIVE_CHECK_NS, is marked: MPI may complete a send
		 * to a dead process, and it would be lost uncounted.  While
		 * another thread's check is under way, there is no room. */
		bool fresh = !p->local || live_check(m);
		int err = -1;          /* -1: no room */
		bool kept = false;
		pthread_mutex_lock(&p->lock);
		if (atomic_load_explicit(&m->closing, memory_order_seq_cst)) {
			/* Finalize waits for this send's pin: no MPI call now. */
			pthread_mutex_unlock(&p->lock);
			return nemo__fail(ESHUTDOWN, fn, "this rank's binding is finalizing");
		}
		if (!is_dead(p)) {
			push(m, p, r, mpi && fresh);
			if (mpi && fresh && !p->q_n && p->fl_n < FLIGHT_MAX && !is_dead(p)) {
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
			tell(m, me, r);   /* this return tells the place: no wait repeats it */
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
		/* MS4: serve while waiting.  The owner progresses MPI (its
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
	nemo_mpi *m = pin(nemo__place_domain(me), slot, &closing);
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
			if (me)
				tell(m, me, r);   /* this return tells the place: no wait repeats it */
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
	nemo__place_busy_enter(me);
	int err = send_to(m, me, r, w, flags, abstime, fn);
	if (!err && m->prog != NEMO_MPI_PROGRESS_THREAD && pthread_equal(pthread_self(), m->owner))
		try_progress(m);
	nemo__place_busy_exit(me);
	return err;
}

int op_am(nemo_place_id dest, uint32_t id, uint64_t arg, const void *payload, size_t len,
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
	struct nemo_domain *d = nemo__place_domain(me);
	if (id & 0x80000000u ? (id & 0x7FFFFFFFu) >= nemo__domain_events(d) : id >= nemo__domain_actions(d)) {
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
	nemo_place_id self = nemo__place_id(me);
	wire w = {.src = rid(m->rank, nemo_place_index(self), nemo__id_gen(self)), .dest = dest, .arg = arg,
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

int op_notify(nemo_place_id dest, uint32_t chan, unsigned flags, const struct timespec *abstime)
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
	nemo_place_id self = nemo__place_id(me);
	wire w = {.src = rid(m->rank, nemo_place_index(self), nemo__id_gen(self)), .dest = dest, .kind = K_NOTIFY, .id = chan};
	err = send_wire(m, me, r, &w, flags, abstime, fn);
out:
	unpin(slot);
	return err;
}
