/*
 * notify.c - the public calls of notifications (nemo/notify.h) and
 * nemo_flush (nemo/domain.h): argument checks, the busy section, then
 * the send paths of overflow.c and send.c.  Nothing below calls up here.
 */
#define _GNU_SOURCE
#include "messaging_internal.h"
#include "remote.h"

#include <errno.h>

int nemo_notify(nemo_place_id dest, uint32_t chan, unsigned flags)
{
	if (nemo__id_is_remote(dest)) return nemo__remote_notify(dest, chan, flags, NULL);  /* remote.h */
	nemo_place *me = nemo__place_self();
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	int ferr = nemo__check_flags(flags, __func__);
	if (ferr)
		return ferr;
	if (chan > NEMO_NOTIFY_CHAN_MAX)
		return NEMO__FAIL(ERANGE, "channel %u is above %u", chan, NEMO_NOTIFY_CHAN_MAX);
	nemo__busy_enter(me);
	int err = nemo__notify_send(me, dest, chan, flags);
	nemo__busy_exit(me);
	return err;
}

int nemo_notify_timed(nemo_place_id dest, uint32_t chan, unsigned flags, const struct timespec *abstime)
{
	int err = nemo__check_deadline(__func__, CLOCK_MONOTONIC, abstime);
	if (err)
		return err;
	if (nemo__id_is_remote(dest)) return nemo__remote_notify(dest, chan, flags, abstime);  /* remote.h */
	nemo_place *me = nemo__place_self();
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	if ((err = nemo__check_flags(flags, __func__)))
		return err;
	if (chan > NEMO_NOTIFY_CHAN_MAX)
		return NEMO__FAIL(ERANGE, "channel %u is above %u", chan, NEMO_NOTIFY_CHAN_MAX);
	nemo__busy_enter(me);
	const struct timespec *outer = me->send_by;
	me->send_by = abstime;
	err = nemo__notify_send(me, dest, chan, flags);
	me->send_by = outer;
	nemo__busy_exit(me);
	return err;
}

int nemo_domain_notify(nemo_domain *d, nemo_place_id dest, uint32_t chan, unsigned flags)
{
	int err = nemo__place_adopt(d, __func__);
	return err ? err : nemo_notify(dest, chan, flags);
}

int nemo_notify_set_handler(nemo_notify_handler fn, void *ctx)
{
	nemo_place *me = nemo__place_self();
	if (!me)  /* a place of a shared domain's, or none (remote.h) */
		return nemo__remote_self(NEMO__SELF_NOTIFY_HANDLER,
					 &(nemo__remote_self_args){ .nfn = fn, .ctx = ctx }, __func__);
	/* Only this thread reads the pair, in a drain: a nemo call, so the
	 * interrupt handler cannot run one in between these two stores (it
	 * defers to busy_exit, which then runs the new handler).  Senders
	 * read fn only to refuse a place without one (ENOENT). */
	nemo__busy_enter(me);
	atomic_store_explicit(&me->nf_ctx, ctx, memory_order_relaxed);
	atomic_store_explicit(&me->nf_fn, fn, memory_order_release);
	nemo__busy_exit(me);
	return 0;
}

int nemo_flush(nemo_place_id dest)
{
	nemo_place *me = nemo__place_self();
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	struct nemo_domain *d = me->d;
	int err = 0;
	nemo__busy_enter(me);
	if (dest == NEMO_PLACE_ALL) {
		for (unsigned r = 0; r < d->P; r++)
			if (nemo__out_of(d, me->idx, r)->deferred)
				nemo__publish(me, r, false);
	} else {
		uint64_t st;
		if (nemo__dest(d, dest, &st))
			nemo__publish(me, nemo_place_index(dest), false);
		else
			err = ESRCH;
	}
	nemo__busy_exit(me);
	return err;
}
