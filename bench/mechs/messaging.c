/*
 * mech_messaging.c - nemo's messaging layers in nemo-bench: an active
 * message (nemo-am) and a notification (nemo-notify) from one place to
 * another, and one active message broadcast to K places (broadcast
 * nemo-am, with the places polling or asleep).
 *
 * Every row makes its own domain.  The receiver and the sender join it as
 * places on their own threads (rx_init / tx_init) and leave it there
 * (rx_fini / tx_fini).  The handler runs on the receiver's thread and
 * takes the wake stamp as its first act, so a sample is "sender about to
 * send -> the receiver's code runs", the same end point as the signal
 * mechanisms' handler entry.
 *
 * Scenario -> how the receiver waits:
 *   polling  nemo_place_wait, policy spin: it watches its queues, and the
 *            sender finds it polling and kicks nobody;
 *   blocked  nemo_place_wait, policy block: asleep in the kernel at once,
 *            so the row measures the FUTEX_WAKE kick, not a spin budget;
 *   busy     computing in interrupt mode: the kick is a signal and the
 *            handler runs from the signal handler, on top of the very
 *            loop signal-running uses (compare the two rows directly).
 */
#define _GNU_SOURCE
#include "broadcast.h"
#include "unicast.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

/* "Nothing handled yet": no seq, generation or channel the runs reach. */
#define GOT_NONE UINT_MAX

static nemo_wait_policy place_policy(const uc_ctx *c)
{
	if (c->policy.kind != NEMO_WAIT_DEFAULT)
		return c->policy;      /* the policy suite sets it */
	return (nemo_wait_policy){ c->scenario == SC_POLLING ? NEMO_WAIT_SPIN : NEMO_WAIT_BLOCK, 0 };
}

/* ------------------------------------------------ unicast: nemo-am, nemo-notify */

struct msg_state {
	nemo_domain *d;
	bool notify;                  /* nemo-notify (else nemo-am) */
	/* The receiver's own line: the handler writes it on the receiver's
	 * thread (from a signal handler in the busy scenario). */
	_Alignas(BENCH_CACHELINE) atomic_uint got;  /* seq (am) or chan (notify) handled last */
	uint64_t stamp;               /* that handler's entry stamp */
	unsigned last;                /* the last seq rx_wait returned */
	/* Receiver -> sender, once: its place id. */
	_Alignas(BENCH_CACHELINE) atomic_uint joined;
	_Atomic nemo_place_id rx_id;
	/* Sender -> receiver: the last seq whose send call has returned. */
	_Alignas(BENCH_CACHELINE) atomic_uint sent;
	/* The sender's own copy of the receiver's id. */
	_Alignas(BENCH_CACHELINE) nemo_place_id dest;
};

static void am_handler(const nemo_am_msg *msg, void *ctx)
{
	uint64_t t = nemo_ticks_ordered();   /* first: this is the wake-up */
	struct msg_state *s = ctx;
	s->stamp = t;
	atomic_store_explicit(&s->got, (unsigned)msg->arg, memory_order_release);
}

static void nf_handler(void *ctx, nemo_place_id src, uint32_t chan)
{
	uint64_t t = nemo_ticks_ordered();
	struct msg_state *s = ctx;
	(void)src;
	s->stamp = t;
	atomic_store_explicit(&s->got, chan, memory_order_release);
}

static int msg_setup_common(uc_ctx *c, bool notify)
{
	struct msg_state *s = xaligned(sizeof *s);
	s->notify = notify;
	atomic_init(&s->got, GOT_NONE);
	atomic_init(&s->joined, 0);
	atomic_init(&s->rx_id, NEMO_PLACE_NONE);
	atomic_init(&s->sent, 0);
	int err = nemo_domain_create(NULL, &s->d);
	if (err) {
		snprintf(c->why, sizeof c->why, "nemo_domain_create: %s", nemo_strerror(err));
		free(s);
		return err;
	}
	if (!notify && (err = nemo_action_register(s->d, 0, am_handler, s)) != 0) {
		snprintf(c->why, sizeof c->why, "nemo_action_register: %s", nemo_strerror(err));
		nemo_domain_destroy(s->d);
		free(s);
		return err;
	}
	c->priv = s;
	return 0;
}

static int am_setup(uc_ctx *c)
{
	return msg_setup_common(c, false);
}

static int nf_setup(uc_ctx *c)
{
	return msg_setup_common(c, true);
}

static void msg_teardown(uc_ctx *c)
{
	struct msg_state *s = c->priv;
	/* Both threads have left and been joined: the domain must be empty. */
	int err = nemo_domain_destroy(s->d);
	if (err)
		fatal("nemo_domain_destroy: %s", nemo_strerror(err));
	free(s);
}

static void msg_rx_init(uc_ctx *c)
{
	struct msg_state *s = c->priv;
	/* No NEMO_PLACE_PIN: the harness has pinned the thread already. */
	nemo_place_attr a = { .policy = place_policy(c) };
	if (c->scenario == SC_BUSY)
		a.flags |= NEMO_PLACE_INTERRUPTS;
	nemo_place_id id;
	int err = nemo_place_join(s->d, &a, &id);
	if (err)
		fatal("nemo_place_join (receiver): %s", nemo_strerror(err));
	/* The handler before the id: a notification to a place without one
	 * fails at the sender (ENOENT). */
	if (s->notify && (err = nemo_notify_set_handler(nf_handler, s)) != 0)
		fatal("nemo_notify_set_handler: %s", nemo_strerror(err));
	atomic_store_explicit(&s->rx_id, id, memory_order_relaxed);
	atomic_store_explicit(&s->joined, 1, memory_order_release);
}

static void msg_rx_fini(uc_ctx *c)
{
	struct msg_state *s = c->priv;
	/* The last handler can run while the sender is still inside its last
	 * send (kicking, counting).  The harness releases the sender only
	 * after rx_fini, so wait here until that send has returned: the
	 * receiver never leaves under a send, and the row never measures the
	 * leave race (the stress tests do). */
	wait_until_eq(&s->sent, s->last, BENCH_STUCK_S, s->notify ? "nemo-notify" : "nemo-am");
	int err = nemo_place_leave();
	if (err)
		fatal("nemo_place_leave (receiver): %s", nemo_strerror(err));
}

static void msg_tx_init(uc_ctx *c)
{
	struct msg_state *s = c->priv;
	int err = nemo_place_join(s->d, NULL, NULL);
	if (err)
		fatal("nemo_place_join (sender): %s", nemo_strerror(err));
	wait_until_eq(&s->joined, 1, BENCH_STUCK_S, "receiver's nemo_place_join");
	s->dest = atomic_load_explicit(&s->rx_id, memory_order_relaxed);
}

static void msg_tx_fini(uc_ctx *c)
{
	(void)c;
	int err = nemo_place_leave();
	if (err)
		fatal("nemo_place_leave (sender): %s", nemo_strerror(err));
}

static uint64_t msg_rx(uc_ctx *c, unsigned seq)
{
	struct msg_state *s = c->priv;
	unsigned want = s->notify ? (seq & NEMO_NOTIFY_CHAN_MAX) : seq;
	if (c->scenario == SC_BUSY) {
		/* Computing, as sigrun_rx: arithmetic on registers; the only
		 * memory read is the word the handler writes on this very
		 * thread, from the interrupt-mode signal handler. */
		uint64_t x = seq;
		while (atomic_load_explicit(&s->got, memory_order_relaxed) != want) {
			for (int i = 0; i < 64; i++)
				x = x * 6364136223846793005ULL + 1;
			__asm__ __volatile__("" : "+r"(x));
		}
		atomic_signal_fence(memory_order_acquire);
	} else {
		while (atomic_load_explicit(&s->got, memory_order_acquire) != want) {
			int err = nemo_place_wait(NULL, NULL);
			if (err)
				fatal("nemo_place_wait: %s", nemo_strerror(err));
		}
	}
	s->last = seq;
	return s->stamp;
}

static void am_tx(uc_ctx *c, unsigned seq)
{
	struct msg_state *s = c->priv;
	int err = nemo_am_send(s->dest, 0, seq, 0);
	if (err)
		fatal("nemo_am_send: %s", nemo_strerror(err));
}

static void nf_tx(uc_ctx *c, unsigned seq)
{
	struct msg_state *s = c->priv;
	int err = nemo_notify(s->dest, seq & NEMO_NOTIFY_CHAN_MAX, 0);
	if (err)
		fatal("nemo_notify: %s", nemo_strerror(err));
}

static void msg_tx_after(uc_ctx *c, unsigned seq)
{
	/* Off the clock: tells msg_rx_fini the send call has returned. */
	struct msg_state *s = c->priv;
	atomic_store_explicit(&s->sent, seq, memory_order_release);
}

static const uc_mech mech_nemo_am = {
	.name = "nemo-am",
	.summary = "nemo_am_send to a place in nemo_place_wait (polling: spin, blocked: block) "
		   "or computing in interrupt mode (busy); latency to handler entry",
	.scenarios = SC_POLLING | SC_BLOCKED | SC_BUSY,
	.setup = am_setup,
	.teardown = msg_teardown,
	.rx_init = msg_rx_init,
	.rx_fini = msg_rx_fini,
	.tx_init = msg_tx_init,
	.tx_fini = msg_tx_fini,
	.rx_wait = msg_rx,
	.tx_signal = am_tx,
	.tx_after = msg_tx_after,
};

static const uc_mech mech_nemo_notify = {
	.name = "nemo-notify",
	.summary = "nemo_notify (one-line FIFO) to a place, waiting as nemo-am; latency to handler entry",
	.scenarios = SC_POLLING | SC_BLOCKED | SC_BUSY,
	.setup = nf_setup,
	.teardown = msg_teardown,
	.rx_init = msg_rx_init,
	.rx_fini = msg_rx_fini,
	.tx_init = msg_tx_init,
	.tx_fini = msg_tx_fini,
	.rx_wait = msg_rx,
	.tx_signal = nf_tx,
	.tx_after = msg_tx_after,
};

const uc_mech *const uc_messaging[] = { &mech_nemo_am, &mech_nemo_notify, NULL };

/* --------------------------------------------------------- broadcast: nemo-am */

struct bam_waiter {
	/* Waiter w's own line, written by its handler on its thread. */
	_Alignas(BENCH_CACHELINE) atomic_uint got;   /* generation handled last */
	uint64_t stamp;
	unsigned last;                /* the last generation rx_wait returned */
};

struct bam_state {
	nemo_domain *d;
	struct bam_waiter *w;         /* K */
	/* Sender -> waiters: the last generation whose broadcast returned. */
	_Alignas(BENCH_CACHELINE) atomic_uint sent;
	/* Place index -> waiter.  Entry i is written by the waiter at index i
	 * when it joins, and read by the handler on that same thread. */
	_Alignas(BENCH_CACHELINE) int w_of[NEMO_PLACES_MAX];
};

static void bam_handler(const nemo_am_msg *msg, void *ctx)
{
	uint64_t t = nemo_ticks_ordered();   /* first: this is the wake-up */
	struct bam_state *s = ctx;
	struct bam_waiter *me = &s->w[s->w_of[nemo_place_index(msg->dest)]];
	me->stamp = t;
	atomic_store_explicit(&me->got, (unsigned)msg->arg, memory_order_release);
}

static int bam_setup(bc_ctx *c)
{
	if ((unsigned)c->waiters + 1 > NEMO_PLACES_MAX) {
		snprintf(c->why, sizeof c->why, "a domain has at most %u places (K + the sender)",
			 NEMO_PLACES_MAX);
		return EINVAL;
	}
	struct bam_state *s = xaligned(sizeof *s);
	s->w = xaligned(sizeof *s->w * (size_t)c->waiters);
	for (int w = 0; w < c->waiters; w++)
		atomic_init(&s->w[w].got, GOT_NONE);
	atomic_init(&s->sent, 0);
	nemo_domain_attr a = { .max_places = (unsigned)c->waiters + 1 };
	int err = nemo_domain_create(&a, &s->d);
	if (err) {
		snprintf(c->why, sizeof c->why, "nemo_domain_create: %s", nemo_strerror(err));
		goto fail;
	}
	if ((err = nemo_action_register(s->d, 0, bam_handler, s)) != 0) {
		snprintf(c->why, sizeof c->why, "nemo_action_register: %s", nemo_strerror(err));
		nemo_domain_destroy(s->d);
		goto fail;
	}
	c->priv = s;
	return 0;
fail:
	free(s->w);
	free(s);
	return err;
}

static void bam_teardown(bc_ctx *c)
{
	struct bam_state *s = c->priv;
	int err = nemo_domain_destroy(s->d);
	if (err)
		fatal("nemo_domain_destroy: %s", nemo_strerror(err));
	free(s->w);
	free(s);
}

static void bam_rx_init(bc_ctx *c, int w)
{
	struct bam_state *s = c->priv;
	/* Polling: waiting in nemo_place_wait with the polling policy; blocked:
	 * policy block, asleep at once. */
	nemo_place_attr a = { .policy = c->policy };
	nemo_place_id id;
	int err = nemo_place_join(s->d, &a, &id);
	if (err)
		fatal("nemo_place_join (waiter %d): %s", w, nemo_strerror(err));
	s->w_of[nemo_place_index(id)] = w;
}

static void bam_rx_fini(bc_ctx *c, int w)
{
	struct bam_state *s = c->priv;
	/* As msg_rx_fini: never leave under the sender's last broadcast. */
	wait_until_eq(&s->sent, s->w[w].last, BENCH_STUCK_S, "nemo-am");
	int err = nemo_place_leave();
	if (err)
		fatal("nemo_place_leave (waiter %d): %s", w, nemo_strerror(err));
}

static void bam_tx_init(bc_ctx *c)
{
	struct bam_state *s = c->priv;
	int err = nemo_place_join(s->d, NULL, NULL);
	if (err)
		fatal("nemo_place_join (sender): %s", nemo_strerror(err));
}

static void bam_tx_fini(bc_ctx *c)
{
	(void)c;
	int err = nemo_place_leave();
	if (err)
		fatal("nemo_place_leave (sender): %s", nemo_strerror(err));
}

static uint64_t bam_wait(bc_ctx *c, int w, unsigned gen)
{
	struct bam_state *s = c->priv;
	struct bam_waiter *me = &s->w[w];
	while (atomic_load_explicit(&me->got, memory_order_acquire) != gen) {
		int err = nemo_place_wait(NULL, NULL);
		if (err)
			fatal("nemo_place_wait (waiter %d): %s", w, nemo_strerror(err));
	}
	me->last = gen;
	return me->stamp;
}

static void bam_broadcast(bc_ctx *c, unsigned gen)
{
	struct bam_state *s = c->priv;
	size_t sent = 0;
	/* set NULL: every place but the sender, i.e. the K waiters (the
	 * ready handshake has seen each of them join). */
	int err = nemo_am_broadcast(NULL, 0, 0, gen, NULL, 0, 0, &sent);
	if (err)
		fatal("nemo_am_broadcast: %s (reached %zu of %d)", nemo_strerror(err), sent,
		      c->waiters);
	if (sent != (size_t)c->waiters)
		fatal("nemo_am_broadcast reached %zu places, wanted %d", sent, c->waiters);
	atomic_store_explicit(&s->sent, gen, memory_order_release);
}

static const bc_mech bc_nemo_am = {
	.name = "nemo-am",
	.summary = "nemo_am_broadcast to K places waiting in nemo_place_wait (polling: "
		   "--poll-policy, blocked: block); latency to handler entry",
	.scenarios = SC_POLLING | SC_BLOCKED,
	.nemo_policy = true,
	.setup = bam_setup,
	.teardown = bam_teardown,
	.rx_init = bam_rx_init,
	.rx_fini = bam_rx_fini,
	.tx_init = bam_tx_init,
	.tx_fini = bam_tx_fini,
	.rx_wait = bam_wait,
	.tx_broadcast = bam_broadcast,
};

const bc_mech *const bc_messaging[] = { &bc_nemo_am, NULL };
