/*
 * remote.c - the hook through which the public sends reach places of
 * other processes (remote.h).  One pointer, registered from above; the
 * sends call here only for ids with the remote tag, so a local send
 * pays one shift and compare.
 *
 * The pointer is stored with release and loaded with acquire, so a send
 * that sees the table sees it filled.  A transport unregisters (NULL)
 * only after its last send returned (src/mpi/mpi.c, nemo_mpi_finalize).
 */
#define _GNU_SOURCE
#include "remote.h"

#include "../platform/fail.h"

#include <errno.h>
#include <stdatomic.h>

static const nemo__remote_ops *_Atomic remote_ops;

const nemo__remote_ops *nemo__remote_register(const nemo__remote_ops *ops)
{
	return atomic_exchange_explicit(&remote_ops, ops, memory_order_acq_rel);
}

int nemo__remote_am(nemo_place_id dest, uint32_t id, uint64_t arg, const void *payload, size_t len,
		    unsigned flags, const uint64_t *tag)
{
	const nemo__remote_ops *o = atomic_load_explicit(&remote_ops, memory_order_acquire);
	if (!o)
		return NEMO__FAIL(ESRCH, "place %#llx is a remote place, and no transport (nemo/mpi.h) is running",
				  (unsigned long long)dest);
	return o->am(dest, id, arg, payload, len, flags, tag);
}

int nemo__remote_notify(nemo_place_id dest, uint32_t chan, unsigned flags)
{
	const nemo__remote_ops *o = atomic_load_explicit(&remote_ops, memory_order_acquire);
	if (!o)
		return NEMO__FAIL(ESRCH, "place %#llx is a remote place, and no transport (nemo/mpi.h) is running",
				  (unsigned long long)dest);
	return o->notify(dest, chan, flags);
}
