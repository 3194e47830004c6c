/*
 * remote.h - the messaging layer's one hook for places of other
 * processes (src/messaging/remote.c).  Internal: not installed.
 *
 * A place id whose two top bits are 10 names a place reached through a
 * transport registered from above (today only src/mpi/: MPI ranks).
 * Local ids never have them: a local id's high 48 bits are a
 * generation, which would need 2^47 joins of one index; and
 * NEMO_PLACE_NONE / NEMO_PLACE_ALL have the top bits 11.
 *
 * The hook is downward-legal: this layer holds a pointer to a table of
 * functions that the upper layer registers (nemo__remote_register) and
 * never includes an upper layer's header.  The public sends call
 * nemo__remote_am / nemo__remote_notify as their first line when the
 * destination is remote (am.c: nemo_am_sendv, nemo_am_reply; notify.c:
 * nemo_notify); nothing else changes.
 */
#ifndef NEMO_MESSAGING_REMOTE_H
#define NEMO_MESSAGING_REMOTE_H

#include <nemo/domain.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Is id a remote place's (top bits 10)? */
static inline bool nemo__id_is_remote(nemo_place_id id)
{
	return (id >> 62) == 2u;
}

/** What a transport does for the public sends. */
typedef struct nemo__remote_ops {
	/** nemo_am_sendv to a remote dest (tag non-NULL: nemo_am_reply with
	 *  that tag).  Returns as nemo_am_sendv. */
	int (*am)(nemo_place_id dest, uint32_t id, uint64_t arg, const void *payload, size_t len,
		  unsigned flags, const uint64_t *tag);
	/** nemo_notify to a remote dest.  Returns as nemo_notify. */
	int (*notify)(nemo_place_id dest, uint32_t chan, unsigned flags);
} nemo__remote_ops;

/** Register the transport (NULL: none).  Returns the previous one. */
const nemo__remote_ops *nemo__remote_register(const nemo__remote_ops *ops);

/** The hooks: forward to the transport, or ESRCH when none is registered. */
int nemo__remote_am(nemo_place_id dest, uint32_t id, uint64_t arg, const void *payload, size_t len,
		    unsigned flags, const uint64_t *tag);
int nemo__remote_notify(nemo_place_id dest, uint32_t chan, unsigned flags);

#endif /* NEMO_MESSAGING_REMOTE_H */
