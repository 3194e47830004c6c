/*
 * remote.c - the hook through which the public calls reach places of
 * other processes (remote.h).  One pointer per transport, registered
 * from above; the sends call here only for ids with the remote tag, so a
 * local send pays one shift and compare, and the calls about the
 * caller's own place only in their "not a place" branch.
 *
 * The pointers are stored with release and loaded with acquire, so a
 * call that sees a table sees it filled.  A transport unregisters (NULL)
 * only after its last call returned (src/mpi/mpi.c, nemo_mpi_finalize;
 * src/xproc/xproc.c never unregisters: its table serves every handle).
 */
#define _GNU_SOURCE
#include "remote.h"

#include "../platform/fail.h"

#include <errno.h>
#include <stdatomic.h>

static const nemo__remote_ops *_Atomic remote_ops[NEMO__REMOTE_N];
_Atomic unsigned nemo__remote_drivers;

static const char *const transport_name[NEMO__REMOTE_N] = {
	"a remote place, and no transport (nemo/mpi.h) is running",
	"a place of a shared domain (nemo/xproc.h), and no shared domain is attached",
};

const nemo__remote_ops *nemo__remote_register(unsigned t, const nemo__remote_ops *ops)
{
	if (t >= NEMO__REMOTE_N)
		return NULL;
	const nemo__remote_ops *old = atomic_exchange_explicit(&remote_ops[t], ops, memory_order_acq_rel);
	if (ops && ops->drive && !(old && old->drive))
		atomic_fetch_add_explicit(&nemo__remote_drivers, 1, memory_order_relaxed);
	else if (old && old->drive && !(ops && ops->drive))
		atomic_fetch_sub_explicit(&nemo__remote_drivers, 1, memory_order_relaxed);
	return old;
}

int nemo__remote_drive(nemo_domain *d, const char *report, unsigned *handled, uint64_t *slice_ns)
{
	int rc = -1;
	*slice_ns = 0;
	for (unsigned t = 0; t < NEMO__REMOTE_N; t++) {
		const nemo__remote_ops *o = atomic_load_explicit(&remote_ops[t], memory_order_acquire);
		uint64_t s = 0;
		int r = o && o->drive ? o->drive(d, report, handled, &s) : -1;
		if (r < 0)
			continue;
		if (s && (!*slice_ns || s < *slice_ns))
			*slice_ns = s;
		if (rc <= 0)
			rc = r;
	}
	return rc;
}

static const nemo__remote_ops *ops_of(nemo_place_id dest)
{
	return atomic_load_explicit(&remote_ops[nemo__remote_transport(dest)], memory_order_acquire);
}

static int no_transport(nemo_place_id dest)
{
	return NEMO__FAIL(ESRCH, "place %#llx is %s", (unsigned long long)dest,
			  transport_name[nemo__remote_transport(dest)]);
}

int nemo__remote_am(nemo_place_id dest, uint32_t id, uint64_t arg, const void *payload, size_t len,
		    unsigned flags, const uint64_t *tag, const struct timespec *abstime)
{
	const nemo__remote_ops *o = ops_of(dest);
	return o ? o->am(dest, id, arg, payload, len, flags, tag, abstime) : no_transport(dest);
}

int nemo__remote_notify(nemo_place_id dest, uint32_t chan, unsigned flags, const struct timespec *abstime)
{
	const nemo__remote_ops *o = ops_of(dest);
	return o ? o->notify(dest, chan, flags, abstime) : no_transport(dest);
}

int nemo__remote_broadcast(const nemo_place_id *set, size_t n, uint32_t id, uint64_t arg,
			   const void *payload, size_t len, unsigned flags, size_t *sent)
{
	if (sent)
		*sent = 0;
	unsigned t = nemo__remote_transport(set[0]);
	for (size_t i = 0; i < n; i++)
		if (!nemo__id_is_remote(set[i]) || nemo__remote_transport(set[i]) != t)
			return NEMO__FAIL(EINVAL, "set[%zu] = %#llx: a broadcast's places are all of this process, "
					  "or all of one transport (set[0] = %#llx)", i, (unsigned long long)set[i],
					  (unsigned long long)set[0]);
	const nemo__remote_ops *o = ops_of(set[0]);
	if (!o)
		return no_transport(set[0]);
	if (o->broadcast)
		return o->broadcast(set, n, id, arg, payload, len, flags, sent);
	int first = 0;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		int e = o->am(set[i], id, arg, payload, len, flags, NULL, NULL);
		if (e && !first)
			first = e;
		k += !e;
	}
	if (sent)
		*sent = k;
	return first;
}

int nemo__remote_dead(nemo_place_id *ids, size_t cap, size_t *n, uint64_t *total)
{
	for (unsigned t = 0; t < NEMO__REMOTE_N; t++) {
		const nemo__remote_ops *o = atomic_load_explicit(&remote_ops[t], memory_order_acquire);
		int rc = o && o->dead ? o->dead(ids, cap, n, total) : 0;
		if (rc)
			return rc;
	}
	return 0;
}

int nemo__remote_self(nemo__remote_self_op op, const nemo__remote_self_args *a, const char *fn)
{
	for (unsigned t = 0; t < NEMO__REMOTE_N; t++) {
		const nemo__remote_ops *o = atomic_load_explicit(&remote_ops[t], memory_order_acquire);
		int rc = o && o->self ? o->self(op, a) : -1;
		if (rc >= 0)
			return rc;
	}
	/* fn NULL: a query (nemo_place_self), not a failure: no text. */
	return fn ? nemo__fail(ENOTCONN, fn, "the calling thread is not a place (nemo_place_join first)") : ENOTCONN;
}
