/*
 * events.c - nemo's events layer in nemo-bench (nemo-event, nemo-cond,
 * nemo-cond-kick) and its peer baseline ck-ec (Concurrency Kit's event
 * count: the best-known C primitive of the kind), to one receiver
 * (unicast) and to K waiters (broadcast).
 *
 * Wait policy: the harness sets c->policy (mech.h).  Unicast: `polling`
 * makes the receiver poll (policy spin: the signal lands within its
 * budget); `blocked` and `loaded` make it sleep at once (policy block),
 * so the rows measure the wake path itself, not the budget; the policy
 * suite forces its own.  Broadcast: --poll-policy when polling, block
 * otherwise.
 */
#define _GNU_SOURCE
#include "mech.h"

#include <ck_ec.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

/* ------------------------------------------------------------ nemo-event */
/* Unicast: one auto-reset event; a post wakes the receiver. */

static int ev_setup(mech_ctx *c)
{
	nemo_event *e = xaligned(BENCH_CACHELINE);
	int err = nemo_event_init(e, NEMO_EVENT_AUTO_RESET, &c->policy);
	if (err) {
		free(e);
		snprintf(c->why, sizeof c->why, "nemo_event_init: %s", nemo_strerror(err));
		return err;
	}
	c->priv = e;
	return 0;
}

static void ev_teardown(mech_ctx *c)
{
	nemo_event_destroy(c->priv);
	free(c->priv);
}

static uint64_t ev_rx(mech_ctx *c, int w, unsigned seq)
{
	(void)w;
	(void)seq;
	int err = nemo_event_wait(c->priv);
	if (err)
		fatal("nemo_event_wait: %s", nemo_strerror(err));
	return 0;
}

static void ev_tx(mech_ctx *c, unsigned seq)
{
	(void)seq;
	nemo_event_post(c->priv);
}

/* ------------------------------------------------ nemo-event, broadcast */
/*
 * A manual-reset event: one post releases every waiter.  Two events, on
 * lines of their own, alternate by generation: waiters of gen wait on
 * ev[gen & 1].  The one for gen + 1 is reset off the clock (prepare)
 * once every waiter has announced gen, i.e. has passed its wait for
 * gen - 1 on that same event; nobody waits on it again before the post
 * of gen has released them.
 */

struct bev {
	_Alignas(BENCH_CACHELINE) nemo_event ev;
};

static int bev_setup(mech_ctx *c)
{
	struct bev *s = xaligned(sizeof *s * 2);
	for (int i = 0; i < 2; i++) {
		int err = nemo_event_init(&s[i].ev, NEMO_EVENT_MANUAL_RESET, &c->policy);
		if (err) {
			snprintf(c->why, sizeof c->why, "nemo_event_init: %s", nemo_strerror(err));
			if (i)
				nemo_event_destroy(&s[0].ev);
			free(s);
			return err;
		}
	}
	c->priv = s;
	return 0;
}

static void bev_teardown(mech_ctx *c)
{
	struct bev *s = c->priv;
	for (int i = 0; i < 2; i++) {
		int err = nemo_event_destroy(&s[i].ev);
		if (err)
			fatal("nemo_event_destroy: %s", nemo_strerror(err));
	}
	free(s);
}

static uint64_t bev_wait(mech_ctx *c, int w, unsigned gen)
{
	struct bev *s = c->priv;
	int err = nemo_event_wait(&s[gen & 1].ev);
	if (err)
		fatal("nemo_event_wait (waiter %d): %s", w, nemo_strerror(err));
	return 0;
}

static void bev_prepare(mech_ctx *c, unsigned gen)
{
	struct bev *s = c->priv;
	int err = nemo_event_reset(&s[(gen + 1) & 1].ev);
	if (err)
		fatal("nemo_event_reset: %s", nemo_strerror(err));
}

static void bev_broadcast(mech_ctx *c, unsigned gen)
{
	struct bev *s = c->priv;
	nemo_event_post(&s[gen & 1].ev);
}

static const bench_mech mech_nemo_event = {
	.name = "nemo-event",
	.family = "events",
	.unicast = {
		.summary = "nemo_event_post / nemo_event_wait (auto-reset; polling: spin policy, else block)",
		.scenarios = SC_POLLING | SC_BLOCKED | SC_LOADED,
		.setup = ev_setup,
		.teardown = ev_teardown,
		.rx_wait = ev_rx,
		.signal = ev_tx,
	},
	.broadcast = {
		.summary = "nemo_event_post of a manual-reset event to K waiters in nemo_event_wait "
			   "(polling: --poll-policy, blocked: block)",
		.scenarios = SC_POLLING | SC_BLOCKED,
		.nemo_policy = true,
		.setup = bev_setup,
		.teardown = bev_teardown,
		.rx_wait = bev_wait,
		.prepare = bev_prepare,
		.signal = bev_broadcast,
	},
};

/* ------------------------------------------------------ nemo-cond (kick) */
/* The same code for one receiver and for K waiters; a waiter woken stamps
 * holding the mutex, as `condvar`. */

struct ncv {
	pthread_mutex_t mu;
	nemo_cond cv;
	unsigned value;
};

static int ncv_setup_common(mech_ctx *c, bool kick)
{
	struct ncv *s = xaligned(sizeof(struct ncv) + BENCH_CACHELINE);
	pthread_mutex_init(&s->mu, NULL);
	nemo_cond_init(&s->cv, NULL);
	nemo_cond_set_policy(&s->cv, &c->policy);
	nemo_cond_set_kick(&s->cv, kick);
	s->value = 0;
	c->priv = s;
	return 0;
}

static int ncv_setup(mech_ctx *c)
{
	return ncv_setup_common(c, false);
}

static int ncv_kick_setup(mech_ctx *c)
{
	return ncv_setup_common(c, true);
}

static void ncv_teardown(mech_ctx *c)
{
	struct ncv *s = c->priv;
	nemo_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

static uint64_t ncv_rx(mech_ctx *c, int w, unsigned seq)
{
	struct ncv *s = c->priv;
	(void)w;
	pthread_mutex_lock(&s->mu);
	while (s->value != seq)
		nemo_cond_wait(&s->cv, &s->mu);
	uint64_t t = nemo_ticks_ordered();   /* woken and holding the mutex, as `condvar` */
	pthread_mutex_unlock(&s->mu);
	return t;
}

static void ncv_post(mech_ctx *c, unsigned seq, int (*wake)(nemo_cond *))
{
	struct ncv *s = c->priv;
	pthread_mutex_lock(&s->mu);
	s->value = seq;
	wake(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

static void ncv_tx(mech_ctx *c, unsigned seq)
{
	ncv_post(c, seq, nemo_cond_signal);
}

static void ncv_tx_all(mech_ctx *c, unsigned seq)
{
	ncv_post(c, seq, nemo_cond_broadcast);
}

static const bench_mech mech_nemo_cond = {
	.name = "nemo-cond",
	.family = "events",
	.unicast = {
		.summary = "nemo_cond_wait / nemo_cond_signal with a pthread mutex (the condvar drop-in)",
		.scenarios = SC_POLLING | SC_BLOCKED | SC_LOADED,
		.setup = ncv_setup,
		.teardown = ncv_teardown,
		.rx_wait = ncv_rx,
		.signal = ncv_tx,
	},
	.broadcast = {
		.summary = "nemo_cond_broadcast (tokens, then one FUTEX_WAKE_BITSET for the sleepers) to K waiters in nemo_cond_wait "
			   "(polling: --poll-policy, blocked: block); a woken waiter stamps holding the mutex",
		.scenarios = SC_POLLING | SC_BLOCKED,
		.nemo_policy = true,
		.setup = ncv_setup,
		.teardown = ncv_teardown,
		.rx_wait = ncv_rx,
		.signal = ncv_tx_all,
	},
};

static const bench_mech mech_nemo_cond_kick = {
	.name = "nemo-cond-kick",
	.family = "events",
	.unicast = {
		.summary = "nemo-cond in kick mode: the sleeper holds RT priority so its wake preempts a busy CPU",
		.scenarios = SC_POLLING | SC_BLOCKED | SC_LOADED,
		.setup = ncv_kick_setup,
		.teardown = ncv_teardown,
		.rx_wait = ncv_rx,
		.signal = ncv_tx,
	},
};

/* ----------------------------------------------------------------- ck-ec */
/* ck_ec needs the platform's futex and clock, given as an ops table. */

static int ckec_gettime(const struct ck_ec_ops *ops, struct timespec *out)
{
	(void)ops;
	return clock_gettime(CLOCK_MONOTONIC, out);
}

static void ckec_wait32(const struct ck_ec_wait_state *st, const uint32_t *addr,
			uint32_t expected, const struct timespec *deadline)
{
	(void)st;
	if (deadline)
		nemo_futex_wait_until((uint32_t *)addr, expected, CLOCK_MONOTONIC, deadline,
				      NEMO_FUTEX_PRIVATE);
	else
		nemo_futex_wait((uint32_t *)addr, expected, NULL, NEMO_FUTEX_PRIVATE);
}

static void ckec_wake32(const struct ck_ec_ops *ops, const uint32_t *addr)
{
	(void)ops;
	nemo_futex_wake((uint32_t *)addr, INT_MAX, NEMO_FUTEX_PRIVATE, NULL);
}

static const struct ck_ec_ops ckec_ops_blocking = {
	.gettime = ckec_gettime, .wait32 = ckec_wait32, .wake32 = ckec_wake32,
};
/* Polling: ck_ec's own busy loop, made long enough to span the delay. */
static const struct ck_ec_ops ckec_ops_polling = {
	.gettime = ckec_gettime, .wait32 = ckec_wait32, .wake32 = ckec_wake32,
	.busy_loop_iter = UINT32_MAX,
};

/* One event count; an increment wakes every waiter (wake32 is a
 * FUTEX_WAKE of every sleeper), so one receiver and K waiters run the same
 * code.  Polling: ck_ec's own busy loop. */

struct ckec {
	struct ck_ec32 ec;
	struct ck_ec_mode mode;
};

static int ckec_setup(mech_ctx *c)
{
	struct ckec *s = xaligned(sizeof *s);
	ck_ec32_init(&s->ec, 0);
	s->mode = (struct ck_ec_mode){
		.ops = c->scenario == SC_POLLING ? &ckec_ops_polling : &ckec_ops_blocking,
		.single_producer = true,
	};
	c->priv = s;
	return 0;
}

static void ckec_teardown(mech_ctx *c)
{
	free(c->priv);
}

static uint64_t ckec_rx(mech_ctx *c, int w, unsigned seq)
{
	struct ckec *s = c->priv;
	uint32_t v;
	(void)w;
	while ((v = ck_ec32_value(&s->ec)) != seq)
		ck_ec32_wait(&s->ec, &s->mode, v, NULL);
	return 0;
}

static void ckec_tx(mech_ctx *c, unsigned seq)
{
	struct ckec *s = c->priv;
	(void)seq;
	ck_ec32_inc(&s->ec, &s->mode);
}

static const bench_mech mech_ck_ec = {
	.name = "ck-ec",
	.family = "events",
	.unicast = {
		.summary = "Concurrency Kit ck_ec32 event count (polling: its busy loop; blocked: futex)",
		.scenarios = SC_POLLING | SC_BLOCKED,
		.setup = ckec_setup,
		.teardown = ckec_teardown,
		.rx_wait = ckec_rx,
		.signal = ckec_tx,
	},
	.broadcast = {
		.summary = "Concurrency Kit ck_ec32_inc to K waiters in ck_ec32_wait "
			   "(polling: its busy loop; blocked: futex)",
		.scenarios = SC_POLLING | SC_BLOCKED,
		.setup = ckec_setup,
		.teardown = ckec_teardown,
		.rx_wait = ckec_rx,
		.signal = ckec_tx,
	},
};

const bench_mech *const mechs_events[] = {
	&mech_nemo_event, &mech_nemo_cond, &mech_nemo_cond_kick, &mech_ck_ec, NULL,
};
