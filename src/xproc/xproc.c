/*
 * xproc.c - shared domains: places in different processes, rings in a
 * named shared-memory segment, shared futexes, peer death, and a segment
 * that a hostile peer cannot turn into memory corruption.  This file
 * owns the segment's layout, create / attach / detach, join / leave, the
 * handlers and the counters; segment.h has the map of the folder's other
 * files (the rings, kept sends, the sleep and the waits, the sends, the
 * descriptor, the public calls), each opening with its protocol.
 *
 * THE SEGMENT.  Four tables, at offsets computed from the geometry
 * (procs P, places N, ring slots R, names M), each record on its own
 * cache line(s):
 *
 *   header   magic, version, size, P N R M, creator uid/gid; and `deaths`
 *            (line 1), bumped once per reclaimed process
 *   procs[P]     word (64 bits: 0 free, else the process's pid and start
 *                time, and RECLAIM while it is being reclaimed; procs.c)
 *   places[N]    line A: wstate (the futex word: RUNNING, POLLING,
 *                SLEEPING, FD_ARMED), room (bit s: place s waits for room
 *                in its ring to this one, or keeps sends for it); line B:
 *                word (gen:16 | owner:8 | state:8; states FREE, CLAIM,
 *                LIVE, DEAD), name (6 words), dead_gen (ring.c)
 *   names[M]     state (0 free, a claimer's identity, READY), name (names.c)
 *   rings[N][N]  ring (s, r): R slots of two cache lines each, written by
 *                place s's owner and read by place r's owner (ring.c)
 *
 * THE VALIDATION RULE.  The segment holds no pointer, and nothing read
 * from it is trusted.  The geometry is read once, at attach, checked
 * against the segment's size (fstat) and the limits, and copied into the
 * private handle; every offset is computed from the private copy, never
 * read again.  Every value read from the segment afterwards is either
 * compared with a value we expect (a seq, a place word, an id) or, if it
 * is an index or length, checked against the private geometry before it
 * is used (ring.c: a slot's code, len, kind, src and dst; owner < P).
 * Positions in a ring are private (prod, cons) and reduced with the
 * private mask.  Every loop is bounded by the private geometry (a drain
 * takes at most R slots of a ring per round; a scan visits each record
 * once), and every sleep has a deadline (sleep.c: waits sleep in slices
 * of at most 100 ms, a send waiting in slices of 10 ms; the one wait on
 * another process's progress, a name being entered, ends with EBUSY
 * after 10 s: names.c).  A slot that fails validation is consumed,
 * counted (rejected) and reported (EBADMSG): it is never handed to a
 * handler.
 *
 * OUR OWN PLACE.  A live process can find its place reclaimed: another
 * process took it for dead (only a hostile peer can make that happen
 * since procs.c's identity words), or the index was joined again after
 * that.  Its rings are then someone else's, or about to be reset for
 * someone else: a send into them would be rejected and could put the
 * new owner's ring out of step (a stale slot a lap ahead of its
 * producer), a drain would take the new owner's messages.  So every
 * send, poll and wait compares our place word with (our gen, our slot,
 * LIVE) first (segment.h, own_ok) and returns EOWNERDEAD, with a text
 * saying so, when it differs; a drain compares it again after each
 * slot's seq (ring.c).  The check before a send's write is a load of our
 * own line B; a reclaim between it and the write can put one stale slot
 * into the reset ring (ring.c, STALE SLOTS) - one per send, and the next
 * send fails.  XD3 kicks every sleeping place, DEAD ones included, and XW3
 * reads our word, so a sleeper learns it at once.  EOWNERDEAD means this
 * and nothing else: a peer's death is ECONNRESET (ring.c, PEER DEATH).
 * The cure is the caller's: detach, attach and join again.
 *
 * JOIN AND LEAVE.  Join: CAS word (FREE or DEAD, gen g) -> (g+1, me,
 * CLAIM) - of an index whose rings out hold nothing unread if there is
 * one, else of any (the unread are counted in `dropped`); reset the rings
 * into and out of the index (seq of slot k = k), its room mask, and its
 * bit in every other place's room mask (a waiter that died waiting
 * left it); wstate = RUNNING; name; word = (g+1, me, LIVE) (seq_cst);
 * then, if another LIVE place has the same name, leave again (EEXIST).
 * Senders check the destination's word (LIVE, their generation) before
 * they write, and reset their private position when the generation they
 * knew changed; receivers do the same for each sender's index (ring.c).
 * Leave: end the descriptor's bridge (fd.c); deliver what the place keeps
 * (kept.c; sleep.c, XW_KEPT: waiting for room, serving the place's queues
 * meanwhile, so that what the handlers run then keep is delivered too);
 * XL1 CAS (g, me, LIVE) -> (g, 0, FREE); XL2 kick the senders waiting for
 * room (their bits in our room mask: sleep.c, THE WAIT FOR ROOM), who
 * then fail with ESRCH; clear our bits in others' masks (XR3, XR4).
 * Messages still queued are dropped with the rings, unhandled: a send
 * that passed its check of our word just before XL1 cannot be told ESRCH
 * (in-process places handle what is queued at their leave and can; across
 * processes that would take a second handshake per send), so the leave
 * does not drain but for the kept sends' sake, and a sender blocked on
 * our full ring learns ESRCH.  Generations are 16 bits.
 *
 * ACTIONS.  A handler is kept per action in a private table of
 * NEMO_XPROC_ACTIONS_MAX + M records: an integer id's at the id, a
 * name's code (NEMO_XPROC_NAMED_BASE + its slot) after them (segment.h,
 * xp_action).  A registration replaces the record with one atomic
 * exchange; the replaced record is kept until detach (a drain on another
 * thread may be reading it), so a drain sees one whole registration.
 */
#define _GNU_SOURCE

#include "segment.h"

#include "../platform/fail.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static _Atomic uint32_t place_serial;

/* ------------------------------------------------------------------ */
/* Layout                                                              */
/* ------------------------------------------------------------------ */

static void layout(uint32_t procs, uint32_t places, uint32_t slots, uint32_t names, size_t *op, size_t *ol,
		   size_t *on, size_t *orr, size_t *size)
{
	*op = sizeof(struct seg_hdr);
	*ol = *op + (size_t)procs * sizeof(struct seg_proc);
	*on = *ol + (size_t)places * sizeof(struct seg_place);
	*orr = *on + (size_t)names * sizeof(struct seg_name);
	*size = *orr + (size_t)places * places * slots * sizeof(struct seg_slot);
}

/* ------------------------------------------------------------------ */
/* Create, attach, detach                                              */
/* ------------------------------------------------------------------ */

static int shm_path(const char *name, char *buf, size_t cap)
{
	if (!name_ok(name, 200) || !strcmp(name, ".") || !strcmp(name, ".."))
		return EINVAL;
	snprintf(buf, cap, "/%s", name);
	return 0;
}

static int handle_alloc(nemo_xproc *x)
{
	x->handlers = calloc(NEMO_XPROC_ACTIONS_MAX + x->nnames, sizeof *x->handlers);
	x->places = calloc(x->nplaces, sizeof *x->places);
	x->peers = malloc(x->nprocs * sizeof *x->peers);
	if (!x->handlers || !x->places || !x->peers)
		return ENOMEM;
	for (uint32_t k = 0; k < x->nprocs; k++)
		x->peers[k] = (nemo__proc_ref){ .pid = 0, .fd = -1, .start = 0, .dead = true };
	x->pid = (uint32_t)getpid();
	x->ident = xp_ident(getpid(), nemo__proc_self_start());
	x->me = UINT32_MAX;
	x->forkgen = atomic_load_explicit(&nemo__xp_fork_gen, memory_order_relaxed);
	pthread_mutex_init(&x->peers_lock, NULL);
	return 0;
}

static void handle_free(nemo_xproc *x)
{
	if (!x)
		return;
	if (x->peers)
		for (uint32_t k = 0; k < x->nprocs; k++)
			nemo__proc_close(&x->peers[k]);
	if (x->base)
		munmap(x->base, x->size);
	if (x->fd >= 0)
		close(x->fd);
	if (x->handlers)
		for (uint32_t i = 0; i < NEMO_XPROC_ACTIONS_MAX + x->nnames; i++)
			free(atomic_load_explicit(&x->handlers[i], memory_order_relaxed));
	for (struct handler *h = atomic_load_explicit(&x->retired, memory_order_relaxed), *n; h; h = n) {
		n = h->retired_next;
		free(h);
	}
	free(x->handlers);
	free(x->places);
	free(x->peers);
	free(x);
}

/* Create: the segment is built in a file with no name and published
 * whole (publish.c, THE PUBLICATION). */
int nemo_xproc_create(const char *name, const nemo_xproc_attr *attr, nemo_xproc **out)
{
	char path[256];
	if (!out)
		return NEMO__FAIL(EINVAL, "out is NULL");
	*out = NULL;
	nemo_clock_init();   /* the handle reads ticks (procs.c, WHO ASKS) */
	if (shm_path(name, path, sizeof path))
		return NEMO__FAIL(EINVAL, "name '%s' is not 1-200 of [A-Za-z0-9._-] (nor . or ..)",
				  name ? name : "(null)");
	nemo_xproc_attr a = attr ? *attr : (nemo_xproc_attr){0};
	if (!a.mode)
		a.mode = 0600;
	if (!a.max_procs)
		a.max_procs = 16;
	if (!a.max_places)
		a.max_places = 16;
	if (!a.ring_slots)
		a.ring_slots = 64;
	if (!a.max_names)
		a.max_names = 64;
	if (a.mode & ~0777u)
		return NEMO__FAIL(EINVAL, "mode %o has bits beyond 0777", a.mode);
	if (a.max_procs > NEMO_XPROC_PROCS_MAX || a.max_places > NEMO_XPROC_PLACES_MAX ||
	    a.max_names > NEMO_XPROC_NAMES_MAX)
		return NEMO__FAIL(EINVAL, "procs %u, places %u or names %u above the limits (%u, %u, %u)",
				  a.max_procs, a.max_places, a.max_names, NEMO_XPROC_PROCS_MAX,
				  NEMO_XPROC_PLACES_MAX, NEMO_XPROC_NAMES_MAX);
	if (a.ring_slots < 2 || a.ring_slots > 4096 || (a.ring_slots & (a.ring_slots - 1)))
		return NEMO__FAIL(EINVAL, "ring_slots %u is not a power of two in 2..4096", a.ring_slots);
	if (a.overflow_max > NEMO_OVERFLOW_MAX)
		return NEMO__FAIL(EINVAL, "overflow_max %u is above %u", a.overflow_max, NEMO_OVERFLOW_MAX);
	if (nemo__xp_name_taken(name))
		return NEMO__FAIL(EEXIST, "shared domain '%s' exists (attach it, or nemo_xproc_unlink it)", name);

	nemo_xproc *x = calloc(1, sizeof *x);
	if (!x)
		return NEMO__FAIL(ENOMEM, "cannot allocate the handle");
	x->fd = -1;
	x->nprocs = a.max_procs;
	x->nplaces = a.max_places;
	x->nslots = a.ring_slots;
	x->nnames = a.max_names;
	x->ovf_max = a.overflow_max ? a.overflow_max : 65536;
	layout(x->nprocs, x->nplaces, x->nslots, x->nnames, &x->off_procs, &x->off_places, &x->off_names,
	       &x->off_rings, &x->size);
	int rc = handle_alloc(x);
	if (rc) {
		handle_free(x);
		return NEMO__FAIL(rc, "cannot allocate the handle's tables");
	}
	if ((rc = nemo__xp_file_new(a.mode, x->size, &x->fd))) {
		handle_free(x);
		return NEMO__FAIL(rc, "cannot make an unnamed file of %zu bytes in /dev/shm (O_TMPFILE)", x->size);
	}
	x->base = mmap(NULL, x->size, PROT_READ | PROT_WRITE, MAP_SHARED, x->fd, 0);
	if (x->base == MAP_FAILED) {
		rc = errno;
		x->base = NULL;
		handle_free(x);
		return NEMO__FAIL(rc, "cannot map the segment of '%s'", path);
	}
	/* The segment is zero: every proc, place and name is free.  Rings
	 * start with seq k in slot k. */
	for (uint32_t s = 0; s < x->nplaces; s++)
		for (uint32_t r = 0; r < x->nplaces; r++) {
			struct seg_slot *ring = ring_at(x, s, r);
			for (uint32_t k = 0; k < x->nslots; k++)
				atomic_store_explicit(&ring[k].seq, k, memory_order_relaxed);
		}
	if (nemo__xproc_test_hook)
		nemo__xproc_test_hook("create");
	struct seg_hdr *h = hdr(x);
	h->size = x->size;
	h->version = XP_VERSION;
	h->procs = x->nprocs;
	h->places = x->nplaces;
	h->slots = x->nslots;
	h->names = x->nnames;
	h->uid = (uint32_t)geteuid();
	h->gid = (uint32_t)getegid();
	h->magic = XP_MAGIC;
	nemo__xp_claim_proc(x);
	/* An entry in the registry before the name: once the name exists
	 * others may attach, and nothing may undo the create then. */
	nemo_xproc *mine = NULL;
	if ((rc = nemo__xp_publish_handle(x, &mine))) {
		nemo__xp_release_proc(x);
		handle_free(x);
		return rc;
	}
	if ((rc = nemo__xp_file_publish(x->fd, name))) {
		nemo__xp_registry_drop(x);
		handle_free(x);
		return NEMO__FAIL(rc, rc == EEXIST ? "shared domain '%s' exists (another process created it "
				  "meanwhile: attach it)" : "cannot publish the segment as /dev/shm/%s", name);
	}
	*out = mine;
	return 0;
}

int nemo_xproc_attach(const char *name, const nemo_xproc_attach_attr *attr, nemo_xproc **out)
{
	char path[256];
	if (!out)
		return NEMO__FAIL(EINVAL, "out is NULL");
	*out = NULL;
	nemo_clock_init();   /* the handle reads ticks (procs.c, WHO ASKS) */
	if (shm_path(name, path, sizeof path))
		return NEMO__FAIL(EINVAL, "name '%s' is not 1-200 of [A-Za-z0-9._-] (nor . or ..)",
				  name ? name : "(null)");
	if (attr && attr->overflow_max > NEMO_OVERFLOW_MAX)
		return NEMO__FAIL(EINVAL, "overflow_max %u is above %u", attr->overflow_max, NEMO_OVERFLOW_MAX);
	uid_t uid = attr && attr->use_ids ? attr->uid : geteuid();
	gid_t gid = attr && attr->use_ids ? attr->gid : getegid();
	int fd = shm_open(path, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0) {
		int e = errno;
		return NEMO__FAIL(e, "shm_open('%s') failed", path);
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return NEMO__FAIL(e, "cannot stat '%s'", path);
	}
	if (st.st_uid != uid || ((st.st_mode & 0070) && st.st_gid != gid)) {
		close(fd);
		return NEMO__FAIL(EACCES, "'%s' belongs to uid %u gid %u, not the expected %u/%u", path,
				  (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)uid, (unsigned)gid);
	}
	if ((size_t)st.st_size < sizeof(struct seg_hdr)) {
		close(fd);
		return NEMO__FAIL(EPROTO, "'%s' is %lld bytes: not a nemo segment", path, (long long)st.st_size);
	}
	struct seg_hdr h;
	if (pread(fd, &h, offsetof(struct seg_hdr, deaths), 0) != (ssize_t)offsetof(struct seg_hdr, deaths)) {
		close(fd);
		return NEMO__FAIL(EPROTO, "cannot read the header of '%s'", path);
	}
	size_t op, ol, on, orr, size = 0;
	bool ok = h.magic == XP_MAGIC && h.version == XP_VERSION && h.procs >= 1 &&
		  h.procs <= NEMO_XPROC_PROCS_MAX && h.places >= 1 && h.places <= NEMO_XPROC_PLACES_MAX &&
		  h.names >= 1 && h.names <= NEMO_XPROC_NAMES_MAX && h.slots >= 2 && h.slots <= 4096 &&
		  !(h.slots & (h.slots - 1)) && h.uid == (uint32_t)st.st_uid;
	if (ok) {
		layout(h.procs, h.places, h.slots, h.names, &op, &ol, &on, &orr, &size);
		ok = h.size == size && (size_t)st.st_size == size;
	}
	if (!ok) {
		close(fd);
		return NEMO__FAIL(EPROTO, "'%s' has no valid nemo header of version %u for its %lld bytes", path,
				  XP_VERSION, (long long)st.st_size);
	}
	nemo_xproc *x = calloc(1, sizeof *x);
	if (!x) {
		close(fd);
		return NEMO__FAIL(ENOMEM, "cannot allocate the handle");
	}
	x->fd = fd;
	x->nprocs = h.procs;
	x->nplaces = h.places;
	x->nslots = h.slots;
	x->nnames = h.names;
	x->ovf_max = attr && attr->overflow_max ? attr->overflow_max : 65536;
	x->size = size;
	x->off_procs = op;
	x->off_places = ol;
	x->off_names = on;
	x->off_rings = orr;
	int rc = handle_alloc(x);
	if (rc) {
		handle_free(x);
		return NEMO__FAIL(rc, "cannot allocate the handle's tables");
	}
	x->base = mmap(NULL, x->size, PROT_READ | PROT_WRITE, MAP_SHARED, x->fd, 0);
	if (x->base == MAP_FAILED) {
		rc = errno;
		x->base = NULL;
		handle_free(x);
		return NEMO__FAIL(rc, "cannot map '%s'", path);
	}
	for (uint32_t k = 0; k < x->nprocs; k++)   /* dead processes first: their slots come free */
		nemo__xp_check_proc(x, k);
	if (nemo__xp_claim_proc(x)) {
		handle_free(x);
		return NEMO__FAIL(EUSERS, "every one of the %u process slots of '%s' is taken", h.procs, path);
	}
	rc = nemo__xp_publish_handle(x, out);
	if (rc) {
		nemo__xp_release_proc(x);
		handle_free(x);
	}
	return rc;
}

/* The private memory of a place (leave, and detach of an inherited handle). */
static void place_free(nemo_xproc_place *p)
{
	p->x->places[p->idx] = NULL;
	nemo__xp_tls_forget(p);
	if (p->efd >= 0)
		close(p->efd);            /* a child's copy of an inherited place's descriptor */
	free(p->kept);
	free(p->dgen);
	free(p);
}

int nemo_xproc_detach(nemo_xproc *x)
{
	if (!x)
		return NEMO__FAIL(EINVAL, "handle is NULL");
	if (nemo__xp_inherited(x)) {
		/* The child's copy: free it, and leave the parent's places
		 * and process slot (and the registry entry, which the fork
		 * handler cleared and which may name the child's own handle
		 * now) alone.  (Its bridge threads were the parent's: the
		 * child has none to end.) */
		for (uint32_t i = 0; i < x->nplaces; i++)
			if (x->places[i])
				place_free(x->places[i]);
		handle_free(x);
		return 0;
	}
	for (uint32_t i = 0; i < x->nplaces; i++)
		if (x->places[i] && x->places[i]->depth)
			return NEMO__FAIL(EBUSY, "place %#x is running a handler: detach after it returns",
					  x->places[i]->id);
	for (uint32_t i = 0; i < x->nplaces; i++)
		if (x->places[i])
			nemo_xproc_leave(x->places[i]);
	nemo__xp_release_proc(x);
	nemo__xp_registry_drop(x);
	handle_free(x);
	return 0;
}

int nemo_xproc_unlink(const char *name)
{
	char path[256];
	if (shm_path(name, path, sizeof path))
		return NEMO__FAIL(EINVAL, "name '%s' is not 1-200 of [A-Za-z0-9._-] (nor . or ..)",
				  name ? name : "(null)");
	if (shm_unlink(path) != 0) {
		int e = errno;
		return NEMO__FAIL(e, "shm_unlink('%s') failed", path);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Places                                                              */
/* ------------------------------------------------------------------ */

int nemo_xproc_find(nemo_xproc *x, const char *name, nemo_xproc_id *id)
{
	if (!x || !id || !name_ok(name, NEMO_XPROC_NAME_MAX))
		return NEMO__FAIL(EINVAL, "NULL handle or id, or name not 1-%u of [A-Za-z0-9._-]",
				  NEMO_XPROC_NAME_MAX);
	uint32_t w[NAME_WORDS];
	name_pack(name, w);
	for (uint32_t i = 0; i < x->nplaces; i++) {
		struct seg_place *pl = place_at(x, i);
		uint32_t pw = atomic_load_explicit(&pl->word, memory_order_acquire);
		if (pw_state(pw) == P_LIVE && name_eq(pl->name, w) &&
		    atomic_load_explicit(&pl->word, memory_order_acquire) == pw) {
			*id = id_make(i, pw_gen(pw));
			return 0;
		}
	}
	return ENOENT;
}

int nemo_xproc_join(nemo_xproc *x, const char *name, nemo_xproc_place **out, nemo_xproc_id *id)
{
	if (!x || !out)
		return NEMO__FAIL(EINVAL, "handle or out is NULL");
	if (nemo__xp_inherited(x))
		return NEMO__XP_INHERITED();
	if (name && !name_ok(name, NEMO_XPROC_NAME_MAX))
		return NEMO__FAIL(EINVAL, "place name is not 1-%u of [A-Za-z0-9._-]", NEMO_XPROC_NAME_MAX);
	nemo_xproc_id other;
	if (name && nemo_xproc_find(x, name, &other) == 0)
		return NEMO__FAIL(EEXIST, "a live place is named '%s'", name);
	nemo_xproc_place *p = calloc(1, sizeof *p);
	uint32_t *arr = calloc(7 * (size_t)x->nplaces, sizeof *arr);
	if (!p || !arr) {
		free(p);
		free(arr);
		return NEMO__FAIL(ENOMEM, "cannot allocate the place");
	}
	p->dgen = arr;
	p->prod = arr + x->nplaces;
	p->sgen = arr + 2 * x->nplaces;
	p->cons = arr + 3 * x->nplaces;
	p->talk = arr + 4 * x->nplaces;
	p->deadg = arr + 5 * x->nplaces;
	p->kept_n = arr + 6 * x->nplaces;
	p->room_for = -1;
	p->efd = -1;
	p->x = x;
	/* Which index: first pass, only those whose departed occupant's
	 * messages have all been read (its receivers may still be draining
	 * them: taking the index resets its rings); second pass, any. */
	for (uint32_t t = 0; t < 2 * x->nplaces; t++) {
		uint32_t i = t % x->nplaces;
		struct seg_place *pl = place_at(x, i);
		uint32_t w = atomic_load_explicit(&pl->word, memory_order_acquire);
		if (pw_state(w) != P_FREE && pw_state(w) != P_DEAD)
			continue;
		if (t < x->nplaces && nemo__xp_sent_unread(x, i))
			continue;
		uint32_t gen = (pw_gen(w) + 1) & 0xFFFFu;
		if (gen == 0)
			gen = 1;
		if (!atomic_compare_exchange_strong_explicit(&pl->word, &w, pw_make(gen, x->me, P_CLAIM),
							     memory_order_seq_cst, memory_order_relaxed))
			continue;
		/* (The first pass took an index with nothing unread; after
		 * the CAS nobody writes its rings out, so that stays true.) */
		uint32_t lost = t < x->nplaces ? 0 : nemo__xp_sent_unread(x, i);
		if (lost)
			atomic_fetch_add_explicit(&x->dropped, lost, memory_order_relaxed);
		for (uint32_t o = 0; o < x->nplaces; o++) {
			nemo__xp_ring_reset(x, o, i);
			nemo__xp_ring_reset(x, i, o);
			/* A waiter for room of index i's last occupant that died
			 * waiting left its bit: nobody waits there now. */
			if (o != i)
				atomic_fetch_and_explicit(&place_at(x, o)->room, ~(1ull << i), memory_order_relaxed);
		}
		atomic_store_explicit(&pl->room, 0, memory_order_relaxed);
		atomic_store_explicit(&pl->wstate, NEMO_WAITER_RUNNING, memory_order_relaxed);
		if (name)
			name_store(pl->name, name);
		else
			name_store(pl->name, ".");
		p->idx = i;
		p->gen = gen;
		p->id = id_make(i, gen);
		p->deaths_seen = atomic_load_explicit(&hdr(x)->deaths, memory_order_relaxed);
		p->joined = true;
		p->serial = atomic_fetch_add_explicit(&place_serial, 1, memory_order_relaxed) + 1;
		x->places[i] = p;
		uint32_t c = pw_make(gen, x->me, P_CLAIM);
		if (!atomic_compare_exchange_strong_explicit(&pl->word, &c, pw_make(gen, x->me, P_LIVE),
							     memory_order_seq_cst, memory_order_relaxed)) {
			/* Reclaimed under us (we were taken for dead) or scribbled. */
			x->places[i] = NULL;
			free(arr);
			free(p);
			return NEMO__FAIL(EBADMSG, "place %u was changed by another process while joining", i);
		}
		/* Another place that went LIVE under the same name meanwhile:
		 * both published (seq_cst) before they look, so at least one
		 * sees the other, and whoever sees one backs out. */
		if (name) {
			uint32_t nw[NAME_WORDS];
			name_pack(name, nw);
			for (uint32_t o = 0; o < x->nplaces; o++) {
				struct seg_place *op = place_at(x, o);
				if (o != i && pw_state(atomic_load_explicit(&op->word, memory_order_seq_cst)) == P_LIVE &&
				    name_eq(op->name, nw)) {
					nemo_xproc_leave(p);
					return NEMO__FAIL(EEXIST, "a live place is named '%s'", name);
				}
			}
		}
		*out = p;
		if (id)
			*id = p->id;
		nemo__xp_tls_adopt(p);
		return 0;
	}
	free(arr);
	free(p);
	return NEMO__FAIL(ENOSPC, "every one of the %u places is taken", x->nplaces);
}

int nemo_xproc_leave(nemo_xproc_place *p)
{
	if (!p || !p->joined)
		return NEMO__FAIL(EINVAL, "place is NULL or not joined");
	if (p->depth)
		return NEMO__FAIL(EBUSY, "place %#x is running a handler", p->id);
	nemo_xproc *x = p->x;
	if (nemo__xp_inherited(x))
		return NEMO__XP_INHERITED();
	nemo__xp_fd_close(p);
	/* What the handlers kept goes first; what cannot go (our place was
	 * reclaimed) is dropped, counted. */
	if (own_ok(p, memory_order_relaxed))
		nemo__xp_kept_wait_all(p);
	nemo__xp_kept_drop_all(p);
	uint32_t w = pw_make(p->gen, x->me, P_LIVE);
	atomic_compare_exchange_strong_explicit(&place_at(x, p->idx)->word, &w, pw_make(p->gen, 0, P_FREE),
						memory_order_seq_cst, memory_order_relaxed);          /* XL1 */
	/* XL2: the senders that wait for room in a ring to us learn that we
	 * left (sleep.c, THE WAIT FOR ROOM). */
	uint64_t room = atomic_load_explicit(&place_at(x, p->idx)->room, memory_order_seq_cst);
	for (uint32_t s = 0; s < x->nplaces; s++)
		if (room >> s & 1u)
			nemo__xp_kick_place(x, s);
	place_free(p);
	return 0;
}

nemo_xproc_id nemo_xproc_self(const nemo_xproc_place *p)
{
	return p ? p->id : 0;
}

int nemo_xproc_set_notify(nemo_xproc_place *p, nemo_xproc_notify_handler fn, void *ctx)
{
	if (!p)
		return NEMO__FAIL(EINVAL, "place is NULL");
	p->nfn = fn;
	p->nctx = ctx;
	return 0;
}

int nemo_xproc_set_policy(nemo_xproc_place *p, const nemo_wait_policy *pol)
{
	if (!p || !pol)
		return NEMO__FAIL(EINVAL, "place or policy is NULL");
	nemo_wait_policy r;
	if (nemo__wait_policy_resolve(pol, &r))
		return NEMO__FAIL(EINVAL, "unknown policy kind %d", (int)pol->kind);
	p->policy = *pol;
	return 0;
}

int nemo_xproc_place_check(nemo_xproc *x, nemo_xproc_id id)
{
	if (!x)
		return NEMO__FAIL(EINVAL, "handle is NULL");
	if (nemo__xp_inherited(x))
		return NEMO__XP_INHERITED();
	uint32_t i = id_idx(id);
	if (i >= x->nplaces || !id_ok(id))
		return ESRCH;
	uint32_t w = atomic_load_explicit(&place_at(x, i)->word, memory_order_acquire);
	if (pw_gen(w) != id_gen(id))
		return ESRCH;
	if (pw_state(w) == P_DEAD)
		return ECONNRESET;
	if (pw_state(w) != P_LIVE)
		return ESRCH;
	uint32_t k = pw_owner(w);
	if (k >= x->nprocs)
		return EBADMSG;
	if (nemo__xp_check_proc(x, k))
		return ECONNRESET;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Handlers (ACTIONS)                                                  */
/* ------------------------------------------------------------------ */

/* The action's handler in this process: one of the two kinds (or none). */
static int set_handler(nemo_xproc *x, uint32_t code, nemo_xproc_handler fn, nemo_am_handler afn, void *ctx)
{
	struct handler *h = malloc(sizeof *h);
	if (!h)
		return NEMO__FAIL(ENOMEM, "no memory for the handler of action %u", code);
	*h = (struct handler){ .fn = fn, .afn = afn, .ctx = ctx };
	struct handler *old = atomic_exchange_explicit(&x->handlers[xp_action(x, code)], h, memory_order_acq_rel);
	if (old) {
		old->retired_next = atomic_load_explicit(&x->retired, memory_order_relaxed);
		while (!atomic_compare_exchange_weak_explicit(&x->retired, &old->retired_next, old,
							      memory_order_release, memory_order_relaxed))
			;
	}
	return 0;
}

static int handle_name(nemo_xproc *x, const char *name, nemo_xproc_handler fn, nemo_am_handler afn, void *ctx)
{
	uint32_t code;
	int rc = nemo_xproc_name(x, name, &code);
	return rc ? rc : set_handler(x, code, fn, afn, ctx);
}

/* An integer id, or the code of a name entered in the table. */
static int handle_id(nemo_xproc *x, uint32_t id, nemo_xproc_handler fn, nemo_am_handler afn, void *ctx,
		     const char *fn_name)
{
	if (!x)
		return nemo__fail(EINVAL, fn_name, "handle is NULL");
	uint32_t a = xp_action(x, id);
	if (a == UINT32_MAX ||
	    (a >= NEMO_XPROC_ACTIONS_MAX &&
	     atomic_load_explicit(&name_at(x, a - NEMO_XPROC_ACTIONS_MAX)->state, memory_order_acquire) != NAME_READY))
		return nemo__fail(ERANGE, fn_name, "action %u is neither an integer id (below %u) nor the code of a "
				  "name entered in the table (nemo_xproc_name: %u + its slot)", id,
				  NEMO_XPROC_ACTIONS_MAX, NEMO_XPROC_NAMED_BASE);
	return set_handler(x, id, fn, afn, ctx);
}

int nemo_xproc_handle(nemo_xproc *x, const char *name, nemo_xproc_handler fn, void *ctx)
{
	return handle_name(x, name, fn, NULL, ctx);
}

int nemo_xproc_handle_am(nemo_xproc *x, const char *name, nemo_am_handler fn, void *ctx)
{
	return handle_name(x, name, NULL, fn, ctx);
}

int nemo_xproc_handle_id(nemo_xproc *x, uint32_t id, nemo_xproc_handler fn, void *ctx)
{
	return handle_id(x, id, fn, NULL, ctx, __func__);
}

int nemo_xproc_handle_am_id(nemo_xproc *x, uint32_t id, nemo_am_handler fn, void *ctx)
{
	return handle_id(x, id, NULL, fn, ctx, __func__);
}

int nemo_xproc_get_counters(nemo_xproc *x, nemo_xproc_counters *out)
{
	if (!x || !out)
		return NEMO__FAIL(EINVAL, "handle or out is NULL");
	out->sent = atomic_load_explicit(&x->sent, memory_order_relaxed);
	out->received = atomic_load_explicit(&x->received, memory_order_relaxed);
	out->kicks = atomic_load_explicit(&x->kicks, memory_order_relaxed);
	out->unhandled = atomic_load_explicit(&x->unhandled, memory_order_relaxed);
	out->rejected = atomic_load_explicit(&x->rejected, memory_order_relaxed);
	out->dropped = atomic_load_explicit(&x->dropped, memory_order_relaxed);
	out->reclaimed = atomic_load_explicit(&x->reclaimed, memory_order_relaxed);
	out->overflowed = atomic_load_explicit(&x->overflowed, memory_order_relaxed);
	out->overflow_dropped = atomic_load_explicit(&x->overflow_dropped, memory_order_relaxed);
	out->send_failures = atomic_load_explicit(&x->send_failures, memory_order_relaxed);
	out->deaths = atomic_load_explicit(&x->deaths, memory_order_relaxed);
	return 0;
}

