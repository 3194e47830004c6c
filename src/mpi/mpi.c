/*
 * mpi.c - a nemo domain that spans MPI ranks (nemo/mpi.h, docs/mpi.md):
 * the doorbells' setup, create, finalize (mpi_internal.h, FINALIZE'S
 * BOUNDED WAIT) and the public calls.
 */
#define _GNU_SOURCE
#include "mpi_internal.h"

static const nemo__remote_ops ops = {.am = op_am, .notify = op_notify, .drive = op_drive, .dead = op_dead};

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
	if (!me || nemo__place_domain(me) != d)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place of d (nemo_place_join first)");
	nemo_mpi_attr a = attr ? *attr : (nemo_mpi_attr){0};
	if ((unsigned)a.progress > NEMO_MPI_PROGRESS_WATCHDOG)
		return NEMO__FAIL(EINVAL, "progress %d is not a strategy", (int)a.progress);
	if (!a.action)
		a.action = nemo__domain_actions(d) - 1;
	if (a.action >= nemo__domain_actions(d))
		return NEMO__FAIL(EINVAL, "action %u is out of range: the domain has max_actions %u", a.action,
				  nemo__domain_actions(d));
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
	nemo_am_handler cur = nemo__domain_action_handler(d, a.action);
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
	m->owner_id = nemo__place_id(me);
	m->K = a.recv_depth;
	m->host = host_hash();
	m->pidns = nemo__proc_pid_namespace();
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
	m->precs = calloc(nemo__domain_places(d), sizeof *m->precs);
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

	/* Every rank has posted its receives before anyone sends.  And the
	 * binding is published only after the barrier: other threads' sends
	 * through it would call MPI while the owner is in a collective, and
	 * MPI's lock, which is not fair, let a thread that sends in a loop
	 * starve the owner's barrier for seconds (finalize-race, 4 ranks on 2
	 * CPUs: the other ranks then waited in finalize for its BYE). */
	MPI_Barrier(m->comm);
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

	/* The owner's last MPI call of the create is made before the
	 * binding's thread calls MPI (SERIALIZED: one thread at a time).  A
	 * failure below finalizes the binding as it is (its strategy
	 * unchanged: senders may read it), with no thread. */
	if ((m->prog == NEMO_MPI_PROGRESS_THREAD && (err = thr_attach(m))) ||
	    (m->prog == NEMO_MPI_PROGRESS_WATCHDOG && (err = wd_attach(m)))) {
		bool join = m->pt_join_err != 0;
		nemo_mpi_finalize(m);
		return join ? NEMO__FAIL(err, "the progress thread could not join the domain (it needs a place of "
					 "its own to hand messages over)")
			    : NEMO__FAIL(err, "the domain's progress thread could not be started for the binding");
	}
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
	atomic_store_explicit(&m->closing, 1, memory_order_seq_cst);                          /* MF1 */
	/* The binding's thread first: it would only compete with the pinned
	 * sends for MPI's lock while they finish (a send that may not call
	 * MPI leaves at its next round anyway: closing). */
	if (m->pt) {
		m->thr_cpu_ns = nemo__progress_cpu_ns(m->pt);
		nemo__progress_detach(m->pt);
		m->pt = NULL;
	}
	atomic_store_explicit(&bs->m, NULL, memory_order_seq_cst);                            /* MF2 */
	naps b = {0, 0};
	while (atomic_load_explicit(&bs->pins, memory_order_seq_cst))                         /* MF3 */
		nap_round(&b, NULL);   /* the CPU to the sends that finish */
	atomic_thread_fence(memory_order_acquire);
	/* The owner is the agent from here on, and nobody else sends. */
	atomic_store_explicit(&m->bounded, 1, memory_order_relaxed);
	nemo_place *me = nemo__place_self();
	if (me)
		nemo__place_busy_enter(me);   /* no interrupt-mode handler while we hold locks */
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
		nemo__place_busy_exit(me);
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
	if (!me || nemo__place_domain(me) != m->d)
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
	if (!*me || nemo__place_domain(*me) != m->d)
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
	out->thread_cpu_ns = m->pt ? nemo__progress_cpu_ns(m->pt) : m->thr_cpu_ns;
	return 0;
}
