/*
 * progress.c - receiving: the agent's pass and the hand-over
 * (mpi_internal.h, THE AGENT, THE LOCK-FREE HANDSHAKE), the ordinary
 * calls' drive and nemo_dead_places (remote.h), and the binding's thread
 * (THE PROGRESS THREAD'S SLEEP, THE WATCHDOG).
 */
#define _GNU_SOURCE
#include "mpi_internal.h"

/* ------------------------------------------------------------------------
 * Receiving: the agent's pass
 * ------------------------------------------------------------------------ */

int post(nemo_mpi *m, unsigned i)
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
	int err;
	if (w->kind == K_AM)
		err = nemo__am_deliver_remote(me, w->src, w->id, w->tagged, w->arg, w->len ? w->payload : NULL,
					      w->len, ctx);
	else
		err = nemo__notify_deliver_remote(me, w->src, w->id);   /* ENOENT: no handler */
	if (err)
		CADD(m, c_dropped);
}

/* The reserved action: a handed slot, on its destination's thread.
 * Nothing of the slot or the binding is touched after the done store,
 * but the kick, bracketed by kicking (THE LOCK-FREE HANDSHAKE, mpi_internal.h). */
void handed_handler(const nemo_am_msg *msg, void *ctx)
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
	nemo_place_id via = me ? nemo__place_id(me) : NEMO_PLACE_NONE;
	/* One path per destination at a time: while slots handed to it by
	 * one agent place are in its ring, neither another agent's ring nor
	 * the direct path may overtake them (AGENTS AND ORDER, mpi_internal.h). */
	if (m->out_n[di] && (via == to || m->out_by[di] != via))
		return EAGAIN;
	if (me && via == to) {
		/* For the agent itself: handle it now, as a handler of a poll
		 * (busy and hdepth: nemo__place_handler_enter). */
		nemo__place_handler_enter(me);
		deliver_here(m, me, &s->w, NEMO_AM_CTX_POLL);
		nemo__place_handler_exit(me);
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

/* The ranks' records with work (MS2): the agent's share of the sends.
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
unsigned progress(nemo_mpi *m)
{
	unsigned n = 0;
	CADD(m, c_progress);
	uint64_t now = nemo_ticks();
	atomic_store_explicit(&m->last_progress, now, memory_order_relaxed);
	/* First: a record of a rank found dead is dropped, not sent; while
	 * another thread's check is under way, no record moves this pass. */
	if (live_check(m))
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
unsigned try_progress(nemo_mpi *m)
{
	if (pthread_mutex_trylock(&m->agent_lock))
		return 0;
	unsigned n = progress(m);
	pthread_mutex_unlock(&m->agent_lock);
	return n;
}
/* ------------------------------------------------------------------------
 * The ordinary calls: nemo_poll, nemo_place_wait, nemo_place_wait_for
 * drive the binding (remote.h's drive op; placewait.c, DRIVEN WAITS),
 * and nemo_dead_places asks it (the dead op)
 * ------------------------------------------------------------------------ */

#define SLICE_MIN_NS 16000ull            /* the owner's first slice of sleep */
#define SLICE_OTHER_NS (2 * LIVE_CHECK_NS) /* everyone else's: to learn of a death */

/* A place of d polls or waits.  The owner of a SEND / CHECK / WATCHDOG
 * binding is the one that receives (and, under THREAD, the progress
 * thread in a handler of a place it serves): it makes a pass, and sleeps in
 * slices that double from SLICE_MIN_NS to idle_max_ns while nothing
 * comes (MPI cannot wake a sleeper).  The others are woken by the local
 * ring that the agent hands their messages through, and sleep in slices
 * of SLICE_OTHER_NS only to learn of deaths.  A wait or a poll (report:
 * its name, for the error's text) returns
 * ECONNRESET once per new death of a rank that the place talked to. */
int op_drive(nemo_domain *d, const char *report, unsigned *handled, uint64_t *slice_ns)
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
	/* The one that receives: the owner (not under THREAD); and the
	 * progress thread (THREAD, WATCHDOG) inside a handler of a place it
	 * serves - its own passes are its source's: that handler's wait for
	 * a reply from another rank must move MPI itself, as no other thread
	 * may (THREAD) or will while the owner computes (WATCHDOG: the
	 * takeover is this thread's). */
	bool in_served = on_progress_thread(m) && nemo__place_hdepth(me) > 0;
	bool agent = in_served || (m->prog != NEMO_MPI_PROGRESS_THREAD && pthread_equal(pthread_self(), m->owner));
	if (agent && !atomic_load_explicit(&m->closing, memory_order_relaxed)) {
		uint64_t before = atomic_load_explicit(&m->c_direct, memory_order_relaxed);
		unsigned n;
		if (in_served) {
			/* As the thread's own place, the agent that hands
			 * messages over, not the served place whose handler
			 * waits: a message for that place goes through its ring
			 * behind the one it is handling (AGENTS AND ORDER), and
			 * the wait drains it from there. */
			nemo__tls_place = m->pt_place;
			n = try_progress(m);
			nemo__tls_place = me;
		} else {
			n = try_progress(m);   /* its direct deliveries are ours: we held the agent's lock */
			*handled += (unsigned)(atomic_load_explicit(&m->c_direct, memory_order_relaxed) - before);
		}
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
			    talked(m, r, nemo__place_idx(me)) && !tell(m, me, r))
				rc = nemo__fail(ECONNRESET, report, "rank %d, which this place talked to, died "
						"(nemo_dead_places)", r);
		q->seen = k;
	}
	unpin(slot);
	return rc;
}

/* nemo_dead_places for the calling thread's place: the dead ranks it
 * talked to, latest death first, each by the id of it last talked to. */
int op_dead(nemo_place_id *ids, size_t cap, size_t *n, uint64_t *total)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return 0;
	unsigned slot;
	bool closing;
	nemo_mpi *m = pin(nemo__place_domain(me), &slot, &closing);
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
			if (s && s < below && s > bs && talked(m, r, nemo__place_idx(me))) {
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

/* THREAD: the domain's progress thread serves the binding (a source of
 * src/poll/progress.c, SOURCES; THE PROGRESS THREAD'S SLEEP,
 * mpi_internal.h): its passes, the re-check after it published SLEEPING
 * on the doorbell, and how long it may sleep. */
static int src_start(void *arg)
{
	nemo_mpi *m = arg;
	int err = nemo_place_join(m->d, NULL, NULL);   /* a place: it hands messages over */
	if (err)
		return m->pt_join_err = err;    /* named by nemo_mpi_create, on the binding's thread */
	m->pt_thread = pthread_self();
	m->pt_place = nemo__place_self();
	atomic_store_explicit(&m->pt_on, true, memory_order_release);
	return 0;
}

static void src_stop(void *arg)
{
	nemo_mpi *m = arg;
	atomic_store_explicit(&m->pt_on, false, memory_order_relaxed);
	nemo_place_leave();
}

static unsigned src_pass(void *arg)
{
	nemo_mpi *m = arg;
	unsigned h = 0, n = try_progress(m);
	nemo_poll(&h);   /* its own place: room kicks, replies to its hand-overs */
	return n + h;
}

/* DBT3: after DBT1 (the progress thread's store of SLEEPING and fence). */
static bool src_pending(void *arg)
{
	return try_progress(arg) > 0;
}

/* With every peer able to ring us, sleep long - LIVE_CHECK_NS: the
 * timeout is a safety net, and each pass asks whether a rank died
 * (live_check), which wakes the places that talked to it (mark_dead) -
 * unless sends wait in the records, which only our MPI calls move; else
 * a backoff that doubles from 16 us to idle_max_ns while sleeps end with
 * nothing to do.  After traffic the poll phase comes first. */
static uint64_t src_slice(void *arg, bool idle)
{
	nemo_mpi *m = arg;
	uint64_t backoff = idle ? m->thr_nap : 0;
	uint64_t nap = backoff ? backoff * 2 : 16000;
	if (nap > m->attr.idle_max_ns)
		nap = m->attr.idle_max_ns;
	m->thr_nap = nap;
	bool waiting = atomic_load_explicit(&m->npending, memory_order_seq_cst) != 0;
	uint64_t slice = m->all_belled && !waiting ? LIVE_CHECK_NS : nap;
	return slice + (idle ? 0 : m->attr.spin_ns);
}

/* DBT5: the progress thread took the word back; kicked: a kick claimed it. */
static void src_slept(void *arg, bool kicked)
{
	nemo_mpi *m = arg;
	CADD(m, c_sleeps);
	if (kicked)
		CADD(m, c_wakeups);
}

int thr_attach(nemo_mpi *m)
{
	const nemo__progress_source src = {
		.arg = m, .start = src_start, .stop = src_stop, .pass = src_pass,
		.pending = src_pending, .word = &m->bell->state, .word_flags = m->bell_flags,
		.slice_ns = src_slice, .slept = src_slept,
	};
	/* Started here: after traffic poll spin_ns, then sleep. */
	const nemo_progress_attr attr = {
		.policy = m->attr.spin_ns ? (nemo_wait_policy){ .kind = NEMO_WAIT_HYBRID, .spin_ns = m->attr.spin_ns }
					  : (nemo_wait_policy){ .kind = NEMO_WAIT_BLOCK },
	};
	m->pt_join_err = 0;
	return nemo__progress_attach(m->d, &src, &attr, &m->pt, "nemo_mpi_create");
}

/* WATCHDOG: the same thread, with another source: no doorbell (only the
 * detach wakes it early), a slice of watchdog_ns, and a pass that takes
 * over the owner's only when the owner has made none for watchdog_ns. */
static unsigned wd_pass(void *arg)
{
	nemo_mpi *m = arg;
	uint64_t lp = atomic_load_explicit(&m->last_progress, memory_order_relaxed);
	if (nemo_ticks_to_ns((int64_t)(nemo_ticks() - lp)) >= (double)m->attr.watchdog_ns && try_progress(m))
		CADD(m, c_takeovers);
	nemo_poll(NULL);   /* its own place: room kicks */
	return 0;          /* then sleep its slice again, whatever it did */
}

static bool wd_pending(void *arg)
{
	(void)arg;
	return false;      /* its timer, not its work, wakes it */
}

static uint64_t wd_slice(void *arg, bool idle)
{
	(void)idle;
	return ((nemo_mpi *)arg)->attr.watchdog_ns;   /* 10 us..1 s: nemo_mpi_create checked it */
}

static void wd_slept(void *arg, bool kicked)
{
	(void)kicked;
	CADD((nemo_mpi *)arg, c_sleeps);
}

int wd_attach(nemo_mpi *m)
{
	const nemo__progress_source src = {
		.arg = m, .start = src_start, .stop = src_stop, .pass = wd_pass, .pending = wd_pending,
		.slice_ns = wd_slice, .slept = wd_slept,
	};
	const nemo_progress_attr attr = { .policy = { .kind = NEMO_WAIT_BLOCK } };   /* a timer: no poll */
	m->pt_join_err = 0;
	return nemo__progress_attach(m->d, &src, &attr, &m->pt, "nemo_mpi_create");
}
