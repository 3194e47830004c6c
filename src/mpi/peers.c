/*
 * peers.c - remote ids, dead ranks (mpi_internal.h, DEAD RANKS), which
 * ranks each local place talked to (the deaths it is told of), and the
 * bindings table (THE BINDING'S LIFETIME: PINS).
 */
#define _GNU_SOURCE
#include "mpi_internal.h"

/* ------------------------------------------------------------------------
 * Ids
 * ------------------------------------------------------------------------ */


int nemo_mpi_rank_of(nemo_place_id id)
{
	return nemo__id_is_remote(id) ? (int)((id >> 40) & RANK_MAX) : -1;
}

/* The local id that remote id r names now on this rank, or 0 (none). */
nemo_place_id local_of(nemo_mpi *m, nemo_place_id r)
{
	unsigned idx = (unsigned)(r & 0xFFFFu);
	uint64_t g24 = (r >> 16) & GEN24;
	if (idx >= nemo__domain_places(m->d))
		return 0;
	nemo_place_id id = nemo__domain_place_id(m->d, idx);   /* its status: ACTIVE, and the generation */
	if (id == NEMO_PLACE_NONE)
		return 0;
	uint64_t gen = nemo__id_gen(id);
	if (g24 != GEN24 && (gen & GEN24) != g24)
		return 0;
	return id;
}
/* ------------------------------------------------------------------------
 * Liveness (DEAD RANKS, mpi_internal.h)
 * ------------------------------------------------------------------------ */

void mark_dead(nemo_mpi *m, int r)
{
	peer *p = &m->peers[r];
	if (atomic_load_explicit(&p->dead, memory_order_relaxed))
		return;
	/* Numbered under a lock, dseq before ndead (release): whoever reads
	 * ndead = k (acquire) reads every death up to k numbered. */
	bool first = false;
	pthread_mutex_lock(&m->dead_lock);
	if (!atomic_load_explicit(&p->dead, memory_order_relaxed)) {
		uint64_t k = atomic_load_explicit(&m->ndead, memory_order_relaxed) + 1;
		atomic_store_explicit(&p->dseq, k, memory_order_relaxed);
		atomic_store_explicit(&p->dead, 1, memory_order_relaxed);
		atomic_store_explicit(&m->ndead, k, memory_order_release);
		CADD(m, c_dead);
		first = true;
	}
	pthread_mutex_unlock(&m->dead_lock);
	if (!first)
		return;
	/* Wake every place here that talked to r and sleeps in a wait: its
	 * drive (op_drive) reads ndead and returns ECONNRESET now, not at
	 * the end of its slice (SLICE_OTHER_NS).  The kick follows the
	 * release of ndead, and the woken wait loads it with acquire. */
	unsigned np = nemo__domain_places(m->d);
	for (unsigned w = 0; w < NEMO_PLACES_MAX / 64; w++) {
		uint64_t bits = atomic_load_explicit(&p->talk[w], memory_order_relaxed);
		for (; bits; bits &= bits - 1) {
			unsigned idx = w * 64 + (unsigned)__builtin_ctzll(bits);
			if (idx < np)
				nemo__place_wake(nemo__domain_place(m->d, idx));
		}
	}
}


/* Place me's record (its own thread): a new occupant of the index starts
 * afresh, having talked to nobody. */
prec *prec_of(nemo_mpi *m, const nemo_place *me)
{
	unsigned idx = nemo__place_idx(me);
	nemo_place_id id = nemo__place_id(me);
	prec *q = &m->precs[idx];
	if (q->id != id) {
		q->id = id;
		q->seen = 0;
		q->nap = 0;
		for (int r = 0; r < m->size; r++) {
			atomic_fetch_and_explicit(&m->peers[r].talk[idx / 64], ~(1ull << (idx % 64)),
						  memory_order_relaxed);
			atomic_fetch_and_explicit(&m->peers[r].told[idx / 64], ~(1ull << (idx % 64)),
						  memory_order_relaxed);
		}
	}
	return q;
}

/* Place me talks to remote place id of rank r (a send to it, a message
 * from it): its death is news for me. */
void talk(nemo_mpi *m, const nemo_place *me, int r, nemo_place_id id)
{
	if (r < 0 || r >= m->size || r == m->rank)
		return;
	prec_of(m, me);
	peer *p = &m->peers[r];
	unsigned idx = nemo__place_idx(me);
	uint64_t bit = 1ull << (idx % 64);
	if (!(atomic_load_explicit(&p->talk[idx / 64], memory_order_relaxed) & bit))
		atomic_fetch_or_explicit(&p->talk[idx / 64], bit, memory_order_relaxed);
	if (atomic_load_explicit(&p->last_id, memory_order_relaxed) != id)
		atomic_store_explicit(&p->last_id, id, memory_order_relaxed);
}

bool talked(const nemo_mpi *m, int r, unsigned idx)
{
	return (atomic_load_explicit(&m->peers[r].talk[idx / 64], memory_order_relaxed) >> (idx % 64)) & 1u;
}

bool tell(nemo_mpi *m, const nemo_place *me, int r)
{
	prec_of(m, me);   /* a new occupant starts untold */
	unsigned idx = nemo__place_idx(me);
	uint64_t bit = 1ull << (idx % 64);
	return atomic_fetch_or_explicit(&m->peers[r].told[idx / 64], bit, memory_order_relaxed) & bit;
}

/* Ask the references of the peers on this host, every LIVE_CHECK_NS (any
 * thread; one at a time, live_lock).  next_live is stored only after a
 * check has marked what it found (release), so a check that is not due
 * means one that started less than LIVE_CHECK_NS ago has finished:
 * returns true when every rank of this host that died more than
 * LIVE_CHECK_NS ago is marked dead (acquire), false while another
 * thread's check is under way (its findings may not be marked yet: the
 * caller must not hand a record to MPI on the strength of it, DEAD
 * RANKS).  Never blocks: a handler run by a signal may get here while
 * its thread holds live_lock. */
bool live_check(nemo_mpi *m)
{
	if (nemo_ticks() < atomic_load_explicit(&m->next_live, memory_order_acquire))
		return true;
	if (pthread_mutex_trylock(&m->live_lock))
		return false;
	uint64_t now = nemo_ticks();
	if (now >= atomic_load_explicit(&m->next_live, memory_order_relaxed)) {
		for (int r = 0; r < m->size; r++) {
			peer *p = &m->peers[r];
			if (p->local && !is_dead(p) && nemo__proc_dead(&p->proc))
				mark_dead(m, r);
		}
		atomic_store_explicit(&m->next_live, now + nemo_ns_to_ticks(LIVE_CHECK_NS), memory_order_release);
	}
	pthread_mutex_unlock(&m->live_lock);
	return true;
}

/* ------------------------------------------------------------------------
 * Bindings: one per domain, found from the sending place's domain, used
 * pinned (THE BINDING'S LIFETIME, mpi_internal.h).
 * ------------------------------------------------------------------------ */

bslot bindings[BIND_MAX];
pthread_mutex_t bind_lock = PTHREAD_MUTEX_INITIALIZER;
unsigned nbound;

/* The binding of domain d, pinned (*slot: unpin it there), or NULL;
 * *closing: d's binding is finalizing. */
nemo_mpi *pin(nemo_domain *d, unsigned *slot, bool *closing)
{
	*closing = false;
	for (unsigned i = 0; i < BIND_MAX; i++) {
		bslot *b = &bindings[i];
		if (atomic_load_explicit(&b->d, memory_order_acquire) != d)                  /* MP0 */
			continue;
		if (!atomic_load_explicit(&b->m, memory_order_relaxed)) {
			*closing = true;
			continue;
		}
		atomic_fetch_add_explicit(&b->pins, 1, memory_order_seq_cst);                 /* MP1 */
		nemo_mpi *m = atomic_load_explicit(&b->m, memory_order_seq_cst);              /* MP2 */
		if (m && m->d == d) {
			*slot = i;
			return m;
		}
		atomic_fetch_sub_explicit(&b->pins, 1, memory_order_release);
		*closing |= !m;
	}
	return NULL;
}

void unpin(unsigned slot)
{
	atomic_fetch_sub_explicit(&bindings[slot].pins, 1, memory_order_release);            /* MP3 */
}

/* Is d bound (a binding published or finalizing)?  (bind_lock held) */
bool bound_locked(nemo_domain *d)
{
	for (unsigned i = 0; i < BIND_MAX; i++)
		if (atomic_load_explicit(&bindings[i].d, memory_order_relaxed) == d)
			return true;
	return false;
}
