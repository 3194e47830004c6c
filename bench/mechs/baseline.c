/*
 * baseline.c - the wake mechanisms every nemo mechanism is compared
 * against, in the same run: the coherence floor (spin, spin-rtt), the
 * kernel's blocking paths (futex, pthread condvar, eventfd, pipe,
 * io_uring MSG_RING) and signals (to a running and to a blocked thread).
 * spin, futex and condvar also wake K waiters (broadcast), with the same
 * wait and the same signal, which then wakes all.
 */
#define _GNU_SOURCE
#include "mech.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

static int ensure_ok(mech_ctx *c, int err, const char *what)
{
	if (err)
		snprintf(c->why, sizeof c->why, "%s: %s", what, strerror(err));
	return err;
}

/* ------------------------------------------------------------------ spin */
/* The receivers poll one cache line; the sender's store is the signal.
 * A waiter that shares its CPU (an oversubscribed broadcast row) yields
 * between checks, so the others get to see the store at all. */

static uint64_t spin_wait(mech_ctx *c, int w, unsigned seq)
{
	(void)w;
	bool yield = c->shared_cpu;
	unsigned n = 0;
	while (atomic_load_explicit(&c->word, memory_order_acquire) != seq) {
		nemo_cpu_relax();
		if (yield && (++n & 63u) == 0)
			sched_yield();
	}
	return nemo_ticks_ordered();
}

static void spin_signal(mech_ctx *c, unsigned seq)
{
	atomic_store_explicit(&c->word, seq, memory_order_release);
}

static const bench_mech mech_spin = {
	.name = "spin",
	.family = "baseline",
	.unicast = {
		.summary = "receiver polls a cache line; the store is the signal (coherence floor)",
		.scenarios = SC_POLLING,
		.rx_wait = spin_wait,
		.signal = spin_signal,
	},
	.broadcast = {
		.summary = "all K waiters poll one shared word; the broadcast is one store (the floor)",
		.scenarios = SC_POLLING,
		.rx_wait = spin_wait,
		.signal = spin_signal,
	},
};

/* -------------------------------------------------------------- spin-rtt */
/* Ping-pong on two lines; latency is half the sender's round trip, so
 * it needs no synchronised clocks. */

static uint64_t rtt_wait(mech_ctx *c, int w, unsigned seq)
{
	while (atomic_load_explicit(&c->word, memory_order_acquire) != seq)
		nemo_cpu_relax();
	(void)w;
	atomic_store_explicit(&c->word2, seq, memory_order_release);
	return 1; /* stamp unused: the sender measures */
}

static void rtt_signal(mech_ctx *c, unsigned seq)
{
	atomic_store_explicit(&c->word, seq, memory_order_release);
	while (atomic_load_explicit(&c->word2, memory_order_acquire) != seq)
		nemo_cpu_relax();
}

static const bench_mech mech_spin_rtt = {
	.name = "spin-rtt",
	.family = "baseline",
	.unicast = {
		.summary = "cache-line ping-pong; latency = half the round trip (sender cost = whole round trip)",
		.scenarios = SC_POLLING,
		.rx_wait = rtt_wait,
		.signal = rtt_signal,
		.sender_measures = true,
	},
};

/* ----------------------------------------------------------------- futex */

static uint64_t futex_rx(mech_ctx *c, int w, unsigned seq)
{
	unsigned v;
	(void)w;
	while ((v = atomic_load_explicit(&c->word, memory_order_acquire)) != seq)
		nemo_futex_wait((uint32_t *)&c->word, v, NULL, NEMO_FUTEX_PRIVATE);
	return 0;
}

/* The sender always calls wake: one waiter (unicast) or all of them. */
static void futex_tx(mech_ctx *c, unsigned seq)
{
	atomic_store_explicit(&c->word, seq, memory_order_release);
	nemo_futex_wake((uint32_t *)&c->word, 1, NEMO_FUTEX_PRIVATE, NULL);
}

static void futex_tx_all(mech_ctx *c, unsigned seq)
{
	atomic_store_explicit(&c->word, seq, memory_order_release);
	nemo_futex_wake((uint32_t *)&c->word, INT_MAX, NEMO_FUTEX_PRIVATE, NULL);
}

static const bench_mech mech_futex = {
	.name = "futex",
	.family = "baseline",
	.unicast = {
		.summary = "FUTEX_WAIT / FUTEX_WAKE on a private word (sender always calls wake)",
		.scenarios = SC_BLOCKED | SC_LOADED,
		.rx_wait = futex_rx,
		.signal = futex_tx,
	},
	.broadcast = {
		.summary = "FUTEX_WAKE of all K waiters sleeping on one word",
		.scenarios = SC_BLOCKED,
		.rx_wait = futex_rx,
		.signal = futex_tx_all,
	},
};

/* --------------------------------------------------------------- condvar */

struct cv_state {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned value;
};

static int cv_setup(mech_ctx *c)
{
	struct cv_state *s = xcalloc(1, sizeof *s);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	c->priv = s;
	return 0;
}

static void cv_teardown(mech_ctx *c)
{
	struct cv_state *s = c->priv;
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

static uint64_t cv_rx(mech_ctx *c, int w, unsigned seq)
{
	struct cv_state *s = c->priv;
	(void)w;
	pthread_mutex_lock(&s->mu);
	while (s->value != seq)
		pthread_cond_wait(&s->cv, &s->mu);
	uint64_t t = nemo_ticks_ordered();   /* woken and holding the mutex */
	pthread_mutex_unlock(&s->mu);
	return t;
}

static void cv_post(mech_ctx *c, unsigned seq, int (*wake)(pthread_cond_t *))
{
	struct cv_state *s = c->priv;
	pthread_mutex_lock(&s->mu);
	s->value = seq;
	wake(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

static void cv_tx(mech_ctx *c, unsigned seq)
{
	cv_post(c, seq, pthread_cond_signal);
}

static void cv_tx_all(mech_ctx *c, unsigned seq)
{
	cv_post(c, seq, pthread_cond_broadcast);
}

static const bench_mech mech_condvar = {
	.name = "condvar",
	.family = "baseline",
	.unicast = {
		.summary = "pthread_cond_wait / pthread_cond_signal (glibc) with its mutex",
		.scenarios = SC_BLOCKED | SC_LOADED,
		.setup = cv_setup,
		.teardown = cv_teardown,
		.rx_wait = cv_rx,
		.signal = cv_tx,
	},
	.broadcast = {
		.summary = "pthread_cond_broadcast (glibc) to K waiters in pthread_cond_wait",
		.scenarios = SC_BLOCKED,
		.setup = cv_setup,
		.teardown = cv_teardown,
		.rx_wait = cv_rx,
		.signal = cv_tx_all,
	},
};

/* --------------------------------------------------------- eventfd, pipe */

struct fd_state {
	int rfd, wfd;
	size_t len;                   /* bytes per signal */
};

static int eventfd_setup(mech_ctx *c)
{
	int fd = eventfd(0, EFD_CLOEXEC);
	if (fd < 0)
		return ensure_ok(c, errno, "eventfd");
	struct fd_state *s = xcalloc(1, sizeof *s);
	*s = (struct fd_state){ fd, fd, 8 };
	c->priv = s;
	return 0;
}

static int pipe_setup(mech_ctx *c)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		return ensure_ok(c, errno, "pipe2");
	struct fd_state *s = xcalloc(1, sizeof *s);
	*s = (struct fd_state){ p[0], p[1], 1 };
	c->priv = s;
	return 0;
}

static void fd_teardown(mech_ctx *c)
{
	struct fd_state *s = c->priv;
	close(s->rfd);
	if (s->wfd != s->rfd)
		close(s->wfd);
	free(s);
}

static uint64_t fd_rx(mech_ctx *c, int w, unsigned seq)
{
	(void)w;
	struct fd_state *s = c->priv;
	uint64_t buf = 0;
	(void)seq;
	while (read(s->rfd, &buf, s->len) != (ssize_t)s->len)
		if (errno != EINTR)
			fatal("read: %s", strerror(errno));
	return 0;
}

static void fd_tx(mech_ctx *c, unsigned seq)
{
	struct fd_state *s = c->priv;
	uint64_t one = 1;
	(void)seq;
	while (write(s->wfd, &one, s->len) != (ssize_t)s->len)
		if (errno != EINTR)
			fatal("write: %s", strerror(errno));
}

static const bench_mech mech_eventfd = {
	.name = "eventfd",
	.family = "baseline",
	.unicast = {
		.summary = "read() blocks on an eventfd; write() of 1 wakes it",
		.scenarios = SC_BLOCKED | SC_LOADED,
		.setup = eventfd_setup,
		.teardown = fd_teardown,
		.rx_wait = fd_rx,
		.signal = fd_tx,
	},
};

static const bench_mech mech_pipe = {
	.name = "pipe",
	.family = "baseline",
	.unicast = {
		.summary = "read() blocks on a pipe; a 1-byte write() wakes it",
		.scenarios = SC_BLOCKED | SC_LOADED,
		.setup = pipe_setup,
		.teardown = fd_teardown,
		.rx_wait = fd_rx,
		.signal = fd_tx,
	},
};

/* -------------------------------------------------------- signal-running */
/* The receiver computes (it watches no shared memory); the signal handler
 * stamps its entry.  One process-wide handler, so one context at a time. */

static mech_ctx *sig_ctx;

static void on_sigusr1(int sig)
{
	(void)sig;
	mech_ctx *c = sig_ctx;
	c->handler_stamp = nemo_ticks_ordered();
	atomic_store_explicit(&c->handled,
		atomic_load_explicit(&c->sent_seq, memory_order_acquire),
		memory_order_relaxed);
}

static int sigrun_setup(mech_ctx *c)
{
	sig_ctx = c;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sigusr1;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) != 0)
		return ensure_ok(c, errno, "sigaction");
	return 0;
}

static void sigrun_teardown(mech_ctx *c)
{
	(void)c;
	signal(SIGUSR1, SIG_IGN);
	sig_ctx = NULL;
}

static uint64_t sigrun_rx(mech_ctx *c, int w, unsigned seq)
{
	(void)w;
	uint64_t x = seq;
	/* "Computing": arithmetic on registers; the only memory it reads is
	 * the flag its own signal handler writes (no cache-line transfer). */
	while (atomic_load_explicit(&c->handled, memory_order_relaxed) != seq) {
		for (int i = 0; i < 64; i++)
			x = x * 6364136223846793005ULL + 1;
		__asm__ __volatile__("" : "+r"(x));
	}
	atomic_signal_fence(memory_order_acquire);
	return c->handler_stamp;
}

static void sigrun_tx(mech_ctx *c, unsigned seq)
{
	atomic_store_explicit(&c->sent_seq, seq, memory_order_release);
	syscall(SYS_tgkill, c->pid, c->rx_tid, SIGUSR1);
}

static const bench_mech mech_signal_running = {
	.name = "signal-running",
	.family = "baseline",
	.unicast = {
		.summary = "tgkill(SIGUSR1) to a thread that is computing; latency to handler entry",
		.scenarios = SC_BUSY,
		.setup = sigrun_setup,
		.teardown = sigrun_teardown,
		.rx_wait = sigrun_rx,
		.signal = sigrun_tx,
	},
};

/* -------------------------------------------------------- signal-blocked */

static void sigblk_rx_init(mech_ctx *c, int w)
{
	(void)w;
	(void)c;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

static uint64_t sigblk_rx(mech_ctx *c, int w, unsigned seq)
{
	(void)w;
	(void)c;
	(void)seq;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	while (sigwaitinfo(&set, NULL) < 0)
		if (errno != EINTR)
			fatal("sigwaitinfo: %s", strerror(errno));
	return 0;
}

static void sigblk_tx(mech_ctx *c, unsigned seq)
{
	(void)seq;
	syscall(SYS_tgkill, c->pid, c->rx_tid, SIGUSR2);
}

static const bench_mech mech_signal_blocked = {
	.name = "signal-blocked",
	.family = "baseline",
	.unicast = {
		.summary = "tgkill(SIGUSR2) to a thread blocked in sigwaitinfo()",
		.scenarios = SC_BLOCKED | SC_LOADED,
		.rx_init = sigblk_rx_init,
		.rx_wait = sigblk_rx,
		.signal = sigblk_tx,
	},
};

/* ----------------------------------------------------- io_uring-msg-ring */
/* The receiver waits for a completion on its own ring; the sender posts
 * one there with IORING_OP_MSG_RING from its ring.  Each ring is set up by
 * the thread that uses it. */

struct ur_state {
	struct io_uring rx, tx;
	atomic_int rx_fd;
};

static int ur_setup(mech_ctx *c)
{
	/* Probe: can this kernel do MSG_RING at all? */
	struct io_uring_probe *p = io_uring_get_probe();
	if (!p) {
		snprintf(c->why, sizeof c->why, "io_uring is not available on this kernel");
		return ENOTSUP;
	}
	int ok = io_uring_opcode_supported(p, IORING_OP_MSG_RING);
	io_uring_free_probe(p);
	if (!ok) {
		snprintf(c->why, sizeof c->why, "this kernel lacks IORING_OP_MSG_RING (Linux >= 5.18)");
		return ENOTSUP;
	}
	struct ur_state *s = xcalloc(1, sizeof *s);
	atomic_init(&s->rx_fd, -1);
	c->priv = s;
	return 0;
}

static void ur_teardown(mech_ctx *c)
{
	free(c->priv);
}

static void ur_rx_init(mech_ctx *c, int w)
{
	(void)w;
	struct ur_state *s = c->priv;
	int err = io_uring_queue_init(8, &s->rx, 0);
	if (err < 0)
		fatal("io_uring_queue_init: %s", strerror(-err));
	atomic_store(&s->rx_fd, s->rx.ring_fd);
}

static void ur_rx_fini(mech_ctx *c, int w)
{
	(void)w;
	struct ur_state *s = c->priv;
	io_uring_queue_exit(&s->rx);
}

static void ur_tx_init(mech_ctx *c)
{
	struct ur_state *s = c->priv;
	int err = io_uring_queue_init(8, &s->tx, 0);
	if (err < 0)
		fatal("io_uring_queue_init: %s", strerror(-err));
}

static void ur_tx_fini(mech_ctx *c)
{
	struct ur_state *s = c->priv;
	io_uring_queue_exit(&s->tx);
}

static uint64_t ur_rx(mech_ctx *c, int w, unsigned seq)
{
	(void)w;
	struct ur_state *s = c->priv;
	struct io_uring_cqe *cqe;
	int err;
	while ((err = io_uring_wait_cqe(&s->rx, &cqe)) == -EINTR)
		;
	if (err < 0)
		fatal("io_uring_wait_cqe: %s", strerror(-err));
	uint64_t t = nemo_ticks_ordered();
	if (cqe->user_data != seq)
		fatal("io_uring-msg-ring: got message %llu, expected %u",
		      (unsigned long long)cqe->user_data, seq);
	io_uring_cqe_seen(&s->rx, cqe);
	return t;
}

static void ur_tx(mech_ctx *c, unsigned seq)
{
	struct ur_state *s = c->priv;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&s->tx);
	io_uring_prep_msg_ring(sqe, atomic_load(&s->rx_fd), 0, seq, 0);
	int err = io_uring_submit(&s->tx);
	if (err < 0)
		fatal("io_uring_submit: %s", strerror(-err));
}

static void ur_tx_after(mech_ctx *c, unsigned seq)
{
	/* MSG_RING also completes on the sender's ring: reap it off the clock. */
	struct ur_state *s = c->priv;
	struct io_uring_cqe *cqe;
	int err;
	(void)seq;
	while ((err = io_uring_wait_cqe(&s->tx, &cqe)) == -EINTR)
		;
	if (err < 0)
		fatal("io_uring_wait_cqe: %s", strerror(-err));
	if (cqe->res < 0)
		fatal("IORING_OP_MSG_RING failed: %s", strerror(-cqe->res));
	io_uring_cqe_seen(&s->tx, cqe);
}

static const bench_mech mech_io_uring = {
	.name = "io_uring-msg-ring",
	.family = "baseline",
	.unicast = {
		.summary = "IORING_OP_MSG_RING to a ring whose owner waits in io_uring_wait_cqe()",
		.scenarios = SC_BLOCKED | SC_LOADED,
		.setup = ur_setup,
		.teardown = ur_teardown,
		.rx_init = ur_rx_init,
		.rx_fini = ur_rx_fini,
		.tx_init = ur_tx_init,
		.tx_fini = ur_tx_fini,
		.rx_wait = ur_rx,
		.signal = ur_tx,
		.tx_after = ur_tx_after,
	},
};

const bench_mech *const mechs_baseline[] = {
	&mech_spin, &mech_spin_rtt, &mech_futex, &mech_condvar, &mech_eventfd,
	&mech_pipe, &mech_signal_running, &mech_signal_blocked, &mech_io_uring,
	NULL,
};
