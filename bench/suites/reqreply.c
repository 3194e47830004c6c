/*
 * reqreply.c - suite `request-reply`: a client asks a server and waits
 * for the answer, between two threads of one process and between two
 * processes, through nemo and through what a program uses without it.
 *
 *   nemo-am       nemo_am_send to the server's place; its handler answers
 *                 with nemo_am_reply; both sides wait in nemo_place_wait
 *                 (default policy).  Threads: a domain of this process.
 *                 Processes: a shared domain (nemo/xproc.h) - the same
 *                 public calls on nemo_xproc_place_id's ids, handlers
 *                 registered by name (nemo_xproc_handle_am)
 *   unix-socket   a Unix stream socket pair: 8 bytes each way; the server
 *                 reads what is there and writes the answers in one write
 *   eventfd-ring  a request ring and a reply ring (spsc.h) in a shared
 *                 page and an eventfd each way: push, then write the
 *                 peer's eventfd; a side that waits blocks in read(2) on
 *                 its own eventfd, then drains its ring
 *
 * The server is a thread pinned to --dst (between = threads) or a forked
 * child pinned there (processes); the client a thread pinned to --src.
 * Rows are interleaved in --rounds rounds; each round starts a fresh
 * server and runs, for every row in turn:
 *   warm-up   --warmup round trips, not measured;
 *   latency   trials/rounds round trips, one in flight, each after a
 *             random busy think time of --delay-us (default 20-50 us,
 *             so that the server waits when the request comes): the
 *             client's clock before the send to after the answer;
 *   throughput  as many requests, IN_FLIGHT in flight: requests over
 *             the time from the first send to the last answer.
 * Every answer carries its request's number; the client checks that
 * they come back in order, none lost (else the run fails).  Around the
 * phases the client sends a mark, which the server answers after it has
 * read its own counters (voluntary context switches, CPU time, nemo's
 * kicks), so each phase's figures are the server's too.
 */
#define _GNU_SOURCE
#include "bench.h"
#include "spsc.h"

#include <nemo/xproc.h>

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define IN_FLIGHT 16
#define RR_SLOTS 64u                    /* a shared domain ring's default */
#define RR_QUIT UINT64_MAX
#define RR_MARK (1ull << 62)            /* | mark number */
#define RR_MARKS 3                      /* before latency, after it, after throughput */
#define RR_BUF 512                      /* socket reads and writes: 64 messages */

enum { RR_NEMO, RR_UNIX, RR_EVENTFD, RR_COUNT };
enum { BT_THREADS, BT_PROCESSES, BT_COUNT };

typedef struct rr_mech {
	const char *name;
	const char *what;
} rr_mech;

static const rr_mech rr_mechs[RR_COUNT] = {
	[RR_NEMO] = { .name = "nemo-am", .what = "nemo_am_send, answered by nemo_am_reply; nemo_place_wait" },
	[RR_UNIX] = { .name = "unix-socket", .what = "a Unix stream socket pair, read/write" },
	[RR_EVENTFD] = { .name = "eventfd-ring", .what = "an SPSC ring and an eventfd each way" },
};
static const char *const rr_between[BT_COUNT] = { "threads", "processes" };

/* What the server read at a mark. */
struct rr_mark {
	long vcsw;
	double cpu_ns;
	uint64_t kicks;
};

/* The page both sides share (MAP_SHARED: also across fork). */
struct rr_shared {
	_Alignas(BENCH_CACHELINE) atomic_int srv_status;  /* 0 starting, 1 serving, 2 done, -1 failed */
	_Atomic nemo_place_id srv_id;                      /* threads: the server's place */
	struct rr_mark mark[RR_MARKS];
	char why[160];
	_Alignas(BENCH_CACHELINE) spsc_ring *req, *rep;    /* eventfd-ring (same addresses after fork) */
};

struct rr_run;

/* The server's state: in the server's thread, or in the child's copy. */
struct rr_srv {
	struct rr_run *r;
	nemo_xproc *x;                   /* processes: the server's handle */
	uint32_t code_rep;
	bool quit;
};

struct rr_run {
	int mech, bt;
	struct rr_shared *sh;
	char seg[64];
	nemo_domain *d;                  /* threads */
	nemo_xproc *x;                   /* processes: the client's handle */
	uint32_t code_req;
	int sock[2];                     /* client, server */
	int efd_srv, efd_cli;
	long warmup, n;                  /* round trips per phase */
	double think_min, think_max;
	uint64_t seed;
	struct rr_srv srv;
};

/* ------------------------------------------------------------ the server */

static void srv_mark(struct rr_srv *s, unsigned k)
{
	if (k >= RR_MARKS)
		return;
	struct rr_mark *m = &s->r->sh->mark[k];
	long total;
	thread_ctx_switches(&m->vcsw, &total);
	m->cpu_ns = thread_cpu_ns();
	m->kicks = 0;
	nemo_xproc_counters c;
	if (s->x && nemo_xproc_get_counters(s->x, &c) == 0)
		m->kicks = c.kicks;
}

/* The server takes v: false for the quit, else answer v. */
static bool srv_take(struct rr_srv *s, uint64_t v)
{
	if (v == RR_QUIT) {
		s->quit = true;
		return false;
	}
	if (v & RR_MARK)
		srv_mark(s, (unsigned)(v & 0xff));
	return true;
}

static void on_req(const nemo_am_msg *m, void *ctx)
{
	struct rr_srv *s = ctx;
	if (!srv_take(s, m->arg))
		return;
	int rc = nemo_am_reply(m, s->code_rep, m->arg, NULL, 0, 0);
	if (rc)
		fatal("request-reply: nemo_am_reply: %s", nemo_strerror(rc));
}

static int srv_fail(struct rr_shared *sh, const char *what, int rc)
{
	snprintf(sh->why, sizeof sh->why, "server: %s: %s", what, strerror(rc));
	atomic_store(&sh->srv_status, -1);
	return 1;
}

static void write_all(int fd, const void *buf, size_t len, const char *who)
{
	const char *p = buf;
	while (len) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			fatal("request-reply: %s: write: %s", who, strerror(errno));
		p += w;
		len -= (size_t)w;
	}
}

static int serve_nemo(struct rr_srv *s)
{
	struct rr_run *r = s->r;
	int rc;
	nemo_xproc_place *p = NULL;
	if (r->bt == BT_THREADS) {
		nemo_place_id id;
		if ((rc = nemo_place_join(r->d, NULL, &id)) != 0)
			return srv_fail(r->sh, "nemo_place_join", rc);
		atomic_store_explicit(&r->sh->srv_id, id, memory_order_release);
	} else {
		if ((rc = nemo_xproc_attach(r->seg, NULL, &s->x)) || (rc = nemo_xproc_handle_am(s->x, "rr-req", on_req, s)) ||
		    (rc = nemo_xproc_name(s->x, "rr-rep", &s->code_rep)) || (rc = nemo_xproc_join(s->x, "server", &p, NULL)))
			return srv_fail(r->sh, nemo_last_error(), rc);
	}
	atomic_store(&r->sh->srv_status, 1);
	while (!s->quit) {
		rc = nemo_place_wait(NULL, NULL);
		if (rc && rc != EOWNERDEAD)
			return srv_fail(r->sh, "nemo_place_wait", rc);
	}
	if (r->bt == BT_THREADS) {
		if ((rc = nemo_place_leave()) != 0)
			return srv_fail(r->sh, "nemo_place_leave", rc);
	} else {
		nemo_xproc_detach(s->x);
	}
	return 0;
}

static int serve_unix(struct rr_srv *s)
{
	int fd = s->r->sock[1];
	unsigned char in[RR_BUF + 8];
	uint64_t out[RR_BUF / 8];
	size_t have = 0;
	atomic_store(&s->r->sh->srv_status, 1);
	while (!s->quit) {
		ssize_t n = read(fd, in + have, RR_BUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return srv_fail(s->r->sh, "read", n ? errno : EPIPE);
		have += (size_t)n;
		size_t k = 0, i = 0;
		for (; i + 8 <= have; i += 8) {
			uint64_t v;
			memcpy(&v, in + i, 8);
			if (srv_take(s, v))
				out[k++] = v;
		}
		memmove(in, in + i, have - i);
		have -= i;
		if (k)
			write_all(fd, out, k * 8, "server");
	}
	return 0;
}

static int serve_eventfd(struct rr_srv *s)
{
	struct rr_run *r = s->r;
	atomic_store(&r->sh->srv_status, 1);
	while (!s->quit) {
		uint64_t c, v, one = 1;
		if (read(r->efd_srv, &c, 8) != 8) {
			if (errno == EINTR)
				continue;
			return srv_fail(r->sh, "read(eventfd)", errno);
		}
		while (spsc_pop(r->sh->req, &v)) {
			if (!srv_take(s, v))
				continue;
			if (!spsc_push(r->sh->rep, v))
				return srv_fail(r->sh, "the reply ring is full", ENOBUFS);
			write_all(r->efd_cli, &one, 8, "server");
		}
	}
	return 0;
}

static int serve(struct rr_run *r, int cpu)
{
	if (nemo_pin_self(cpu))
		return srv_fail(r->sh, "pin", EINVAL);
	struct rr_srv *s = &r->srv;
	*s = (struct rr_srv){ .r = r, .code_rep = 1 };
	int rc = r->mech == RR_NEMO ? serve_nemo(s) : r->mech == RR_UNIX ? serve_unix(s) : serve_eventfd(s);
	if (!rc)
		atomic_store(&r->sh->srv_status, 2);
	return rc;
}

struct rr_srv_thread {
	struct rr_run *r;
	int cpu;
};

static void *srv_thread(void *p)
{
	struct rr_srv_thread *t = p;
	serve(t->r, t->cpu);
	return NULL;
}

/* ------------------------------------------------------------ the client */

struct rr_cli {
	struct rr_run *r;
	nemo_place_id dest;
	uint64_t seq, acked, mark_got, bad;
	unsigned char in[RR_BUF + 8];
	size_t have;
	/* results */
	double *rtt;                     /* n round trips, ns */
	double tp_seconds;
	double think_ns;                 /* the latency phase's think time, which the client's CPU time includes */
	struct rr_mark mark[RR_MARKS];   /* the client's own, at each mark */
};

static void cl_take(struct rr_cli *c, uint64_t v)
{
	if (v & RR_MARK) {
		c->mark_got = v;
		return;
	}
	if (v != c->acked + 1 && !c->bad)
		c->bad = v ? v : RR_QUIT;
	c->acked++;
}

static void on_rep(const nemo_am_msg *m, void *ctx)
{
	struct rr_cli *c = ctx;
	if ((!m->is_reply || m->tag != m->arg) && !c->bad)
		c->bad = m->arg ? m->arg : RR_QUIT;
	cl_take(c, m->arg);
}

static void cl_send(struct rr_cli *c, uint64_t v)
{
	struct rr_run *r = c->r;
	int rc;
	uint64_t one = 1;
	switch (r->mech) {
	case RR_NEMO:
		if ((rc = nemo_am_send(c->dest, r->code_req, v, 0)) != 0)
			fatal("request-reply %s: nemo_am_send: %s", rr_between[r->bt], nemo_strerror(rc));
		break;
	case RR_UNIX:
		write_all(r->sock[0], &v, 8, "client");
		break;
	default:
		if (!spsc_push(r->sh->req, v))
			fatal("request-reply: the request ring is full");
		write_all(r->efd_srv, &one, 8, "client");
		break;
	}
}

/* Wait until at least one answer was taken (the watchdog of rr_measure
 * ends a run whose server stopped answering). */
static void cl_recv(struct rr_cli *c)
{
	struct rr_run *r = c->r;
	uint64_t before = c->acked, mark = c->mark_got, v;
	int rc;
	switch (r->mech) {
	case RR_NEMO:
		while (c->acked == before && c->mark_got == mark) {
			rc = nemo_place_wait(NULL, NULL);
			if (rc && rc != EOWNERDEAD)
				fatal("request-reply %s: nemo_place_wait: %s", rr_between[r->bt], nemo_strerror(rc));
		}
		break;
	case RR_UNIX:
		while (c->acked == before && c->mark_got == mark) {
			ssize_t n = read(r->sock[0], c->in + c->have, RR_BUF);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				fatal("request-reply: client: read: %s", n ? strerror(errno) : "the server closed");
			c->have += (size_t)n;
			size_t i = 0;
			for (; i + 8 <= c->have; i += 8) {
				memcpy(&v, c->in + i, 8);
				cl_take(c, v);
			}
			memmove(c->in, c->in + i, c->have - i);
			c->have -= i;
		}
		break;
	default:
		while (c->acked == before && c->mark_got == mark) {
			uint64_t cnt;
			if (read(r->efd_cli, &cnt, 8) != 8) {
				if (errno == EINTR)
					continue;
				fatal("request-reply: client: read(eventfd): %s", strerror(errno));
			}
			while (spsc_pop(r->sh->rep, &v))
				cl_take(c, v);
		}
		break;
	}
}

static void cl_mark(struct rr_cli *c, unsigned k)
{
	long total;
	uint64_t v = RR_MARK | k;
	cl_send(c, v);
	while (c->mark_got != v)
		cl_recv(c);
	struct rr_mark *m = &c->mark[k];
	thread_ctx_switches(&m->vcsw, &total);
	m->cpu_ns = thread_cpu_ns();
	m->kicks = 0;
	nemo_domain_counters dc;
	nemo_xproc_counters xc;
	if (c->r->mech == RR_NEMO && c->r->bt == BT_THREADS && nemo_domain_get_counters(c->r->d, &dc) == 0)
		m->kicks = dc.kicks_futex + dc.kicks_signal + dc.kicks_fd;   /* both places */
	if (c->r->mech == RR_NEMO && c->r->bt == BT_PROCESSES && nemo_xproc_get_counters(c->r->x, &xc) == 0)
		m->kicks = xc.kicks;                                          /* this process's */
}

static void round_trip(struct rr_cli *c)
{
	cl_send(c, ++c->seq);
	while (c->acked < c->seq)
		cl_recv(c);
}

static void *cl_thread(void *p)
{
	struct rr_cli *c = p;
	struct rr_run *r = c->r;
	int rc;
	nemo_xproc_place *xp = NULL;
	if (r->mech == RR_NEMO) {
		if (r->bt == BT_THREADS) {
			if ((rc = nemo_place_join(r->d, NULL, NULL)) != 0)
				fatal("request-reply: nemo_place_join (client): %s", nemo_strerror(rc));
			while ((c->dest = atomic_load_explicit(&r->sh->srv_id, memory_order_acquire)) == NEMO_PLACE_NONE)
				nemo_cpu_relax();
		} else {
			nemo_xproc_id sid;
			if ((rc = nemo_xproc_join(r->x, "client", &xp, NULL)) != 0)
				fatal("request-reply: nemo_xproc_join (client): %s", nemo_last_error());
			uint64_t deadline = nemo_ticks() + nemo_ns_to_ticks(BENCH_STUCK_S * 1e9);
			while (nemo_xproc_find(r->x, "server", &sid) != 0) {
				if (atomic_load(&r->sh->srv_status) < 0 || nemo_ticks() > deadline)
					fatal("request-reply: the server did not join: %s", r->sh->why);
				usleep(100);
			}
			c->dest = nemo_xproc_place_id(r->x, sid);
		}
	}
	uint64_t rng = r->seed;
	for (long i = 0; i < r->warmup; i++)
		round_trip(c);
	cl_mark(c, 0);
	for (long i = 0; i < r->n; i++) {
		uint64_t think = nemo_ticks();
		random_delay(&rng, r->think_min, r->think_max);
		uint64_t t0 = nemo_ticks_ordered();
		c->think_ns += nemo_ticks_to_ns((int64_t)(t0 - think));
		round_trip(c);
		c->rtt[i] = nemo_ticks_to_ns((int64_t)(nemo_ticks_ordered() - t0));
	}
	cl_mark(c, 1);
	uint64_t t0 = nemo_ticks_ordered(), base = c->seq;
	while (c->acked < base + (uint64_t)r->n) {
		while (c->seq < base + (uint64_t)r->n && c->seq - c->acked < IN_FLIGHT)
			cl_send(c, ++c->seq);
		cl_recv(c);
	}
	c->tp_seconds = nemo_ticks_to_ns((int64_t)(nemo_ticks_ordered() - t0)) / 1e9;
	cl_mark(c, 2);
	cl_send(c, RR_QUIT);
	if (r->mech == RR_NEMO && r->bt == BT_THREADS && (rc = nemo_place_leave()) != 0)
		fatal("request-reply: nemo_place_leave (client): %s", nemo_strerror(rc));
	if (xp && (rc = nemo_xproc_leave(xp)) != 0)
		fatal("request-reply: nemo_xproc_leave (client): %s", nemo_strerror(rc));
	return NULL;
}

/* ------------------------------------------------------------ one round */

/* A measurement that runs far past its time ends the run: a client
 * blocked in read(2) on a server that died cannot watch itself. */
struct rr_watchdog {
	pthread_t t;
	atomic_bool done;
	double limit_s;
};

static void *rr_watchdog_main(void *p)
{
	struct rr_watchdog *w = p;
	struct timespec step = { 0, 50 * 1000 * 1000 };
	for (double t = 0; t < w->limit_s; t += 0.05) {
		if (atomic_load(&w->done))
			return NULL;
		nanosleep(&step, NULL);
	}
	if (!atomic_load(&w->done))
		fatal("request-reply: a round did not end within %.0f s (a lost answer?); giving up", w->limit_s);
	return NULL;
}

/* One round of one row: the client's figures in *c, the server's marks
 * in r->sh->mark.  False (why set) if it cannot run here. */
static bool rr_measure(const bench_opts *o, struct rr_run *r, struct rr_cli *c, char *why, size_t whylen)
{
	int rc = 0;
	r->sock[0] = r->sock[1] = r->efd_srv = r->efd_cli = -1;
	atomic_store(&r->sh->srv_status, 0);
	atomic_store(&r->sh->srv_id, NEMO_PLACE_NONE);
	if (r->mech == RR_NEMO && r->bt == BT_THREADS) {
		if ((rc = nemo_domain_create(NULL, &r->d)) || (rc = nemo_action_register(r->d, 0, on_req, &r->srv)) ||
		    (rc = nemo_action_register(r->d, 1, on_rep, c)))
			fatal("request-reply: domain: %s", nemo_strerror(rc));
		r->code_req = 0;
	} else if (r->mech == RR_NEMO) {
		snprintf(r->seg, sizeof r->seg, "nemo-bench-rr-%d", (int)getpid());
		nemo_xproc_unlink(r->seg);
		if ((rc = nemo_xproc_create(r->seg, NULL, &r->x)) || (rc = nemo_xproc_name(r->x, "rr-req", &r->code_req)) ||
		    (rc = nemo_xproc_handle_am(r->x, "rr-rep", on_rep, c))) {
			snprintf(why, whylen, "shared domain: %s", nemo_last_error());
			if (r->x)
				nemo_xproc_detach(r->x);
			r->x = NULL;
			return false;
		}
	} else if (r->mech == RR_UNIX) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, r->sock) != 0) {
			snprintf(why, whylen, "socketpair: %s", strerror(errno));
			return false;
		}
	} else {
		r->efd_srv = eventfd(0, EFD_CLOEXEC);
		r->efd_cli = eventfd(0, EFD_CLOEXEC);
		if (r->efd_srv < 0 || r->efd_cli < 0)
			fatal("request-reply: eventfd: %s", strerror(errno));
		spsc_init(r->sh->req, RR_SLOTS);
		spsc_init(r->sh->rep, RR_SLOTS);
	}
	struct rr_srv_thread st = { r, o->dst };
	pthread_t srv, cli;
	pid_t kid = -1;
	if (r->bt == BT_PROCESSES) {
		kid = fork();
		if (kid < 0)
			fatal("request-reply: fork: %s", strerror(errno));
		if (kid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			_exit(serve(r, o->dst));
		}
	} else {
		bench_thread_start(&srv, srv_thread, &st);
	}
	struct rr_watchdog wd = { .limit_s = BENCH_STUCK_S + (double)(r->n + r->warmup) * (r->think_max * 1e-6 + 0.01) };
	bench_thread_start(&wd.t, rr_watchdog_main, &wd);
	thread_start_pinned(&cli, o->src, cl_thread, c);
	pthread_join(cli, NULL);
	int st_code = 0;
	if (kid > 0)
		waitpid(kid, &st_code, 0);
	else
		pthread_join(srv, NULL);
	atomic_store(&wd.done, true);
	pthread_join(wd.t, NULL);
	if (atomic_load(&r->sh->srv_status) != 2 || (kid > 0 && !(WIFEXITED(st_code) && WEXITSTATUS(st_code) == 0)))
		fatal("request-reply %s %s: %s", rr_mechs[r->mech].name, rr_between[r->bt],
		      r->sh->why[0] ? r->sh->why : "the server failed");
	if (c->bad)
		fatal("request-reply %s %s: answer %#llx came out of order (lost or duplicated)",
		      rr_mechs[r->mech].name, rr_between[r->bt], (unsigned long long)c->bad);
	if (r->d && (rc = nemo_domain_destroy(r->d)) != 0)
		fatal("request-reply: nemo_domain_destroy: %s", nemo_strerror(rc));
	r->d = NULL;
	if (r->x) {
		nemo_xproc_unlink(r->seg);
		nemo_xproc_detach(r->x);
		r->x = NULL;
	}
	for (int i = 0; i < 2; i++)
		if (r->sock[i] >= 0)
			close(r->sock[i]);
	if (r->efd_srv >= 0)
		close(r->efd_srv);
	if (r->efd_cli >= 0)
		close(r->efd_cli);
	return true;
}

/* ------------------------------------------------------------ the rows */

struct rr_row {
	int mech, bt;
	bool skip;
	int rounds;                      /* measured */
	double *rtt;                     /* every round trip, ns */
	int *rtt_round;
	long nrtt;
	double *rate;                    /* per round, requests/s */
	double tp_seconds;
	long tp_requests;
	/* sums over rounds: the latency phase, then the throughput phase */
	double lat_cw, lat_sw, lat_ccpu, lat_scpu, lat_kicks;
	double tp_cw, tp_sw, tp_cpu, tp_kicks;
};

static double mark_delta(const struct rr_mark *a, const struct rr_mark *b, int what)
{
	switch (what) {
	case 0:
		return (double)(b->vcsw - a->vcsw);
	case 1:
		return b->cpu_ns - a->cpu_ns;
	default:
		return (double)(b->kicks - a->kicks);
	}
}

static void rr_add(struct rr_row *w, const struct rr_cli *c, const struct rr_shared *sh, long n)
{
	for (long i = 0; i < n; i++) {
		w->rtt[w->nrtt] = c->rtt[i];
		w->rtt_round[w->nrtt++] = w->rounds;
	}
	const struct rr_mark *cm = c->mark, *sm = sh->mark;
	w->lat_cw += mark_delta(&cm[0], &cm[1], 0);
	w->lat_sw += mark_delta(&sm[0], &sm[1], 0);
	w->lat_ccpu += fmax(0, mark_delta(&cm[0], &cm[1], 1) - c->think_ns);
	w->lat_scpu += mark_delta(&sm[0], &sm[1], 1);
	w->lat_kicks += mark_delta(&cm[0], &cm[1], 2) + mark_delta(&sm[0], &sm[1], 2);
	w->tp_cw += mark_delta(&cm[1], &cm[2], 0);
	w->tp_sw += mark_delta(&sm[1], &sm[2], 0);
	w->tp_cpu += mark_delta(&cm[1], &cm[2], 1) + mark_delta(&sm[1], &sm[2], 1);
	w->tp_kicks += mark_delta(&cm[1], &cm[2], 2) + mark_delta(&sm[1], &sm[2], 2);
	w->rate[w->rounds] = c->tp_seconds > 0 ? (double)n / c->tp_seconds : 0.0;
	w->tp_seconds += c->tp_seconds;
	w->tp_requests += n;
	w->rounds++;
}

static json_t *num_or_null(bool ok, double v)
{
	return ok ? json_real(v) : json_null();
}

static void rr_emit(const bench_opts *o, struct rr_row *w, json_t *results)
{
	const char *name = rr_mechs[w->mech].name, *bt = rr_between[w->bt];
	char file[128], *rel = NULL;
	snprintf(file, sizeof file, "request-reply-%s-%s-%d-%d.csv", name, bt, o->src, o->dst);
	FILE *f = samples_create(o, file, &rel);
	if (f) {
		fprintf(f, "round,trial,rtt_ns\n");
		for (long i = 0; i < w->nrtt; i++)
			fprintf(f, "%d,%ld,%.1f\n", w->rtt_round[i], i, w->rtt[i]);
		if (fclose(f) != 0)
			fatal("cannot write samples to %s/%s: %s", o->samples_dir, file, strerror(errno));
	}
	stats st;
	double cdf[STATS_CDF_POINTS];
	stats_compute(w->rtt, (size_t)w->nrtt, &st, cdf);
	json_t *jcdf = json_array(), *jrounds = json_array();
	for (int i = 0; i < STATS_CDF_POINTS; i++)
		json_array_append_new(jcdf, json_real(cdf[i]));
	for (int i = 0; i < w->rounds; i++)
		json_array_append_new(jrounds, json_real(w->rate[i]));
	double *rates = xcalloc((size_t)w->rounds, sizeof(double));
	memcpy(rates, w->rate, (size_t)w->rounds * sizeof(double));
	double n = (double)w->nrtt, m = (double)w->tp_requests;
	bool nemo = w->mech == RR_NEMO;
	json_t *j = json_pack("{s:s,s:s,s:i,s:i,s:I,s:i,s:I,s:[f,f],s:o,s:o,s:f,s:f,s:f,s:f,s:o}",
		"mechanism", name, "scenario", bt, "src_cpu", o->src, "dst_cpu", o->dst,
		"trials", (json_int_t)w->nrtt, "rounds", w->rounds, "warmup", (json_int_t)o->warmup,
		"think_us", o->delay_min_us, o->delay_max_us, "rtt_ns", stats_json(&st), "rtt_cdf_ns", jcdf,
		"client_wakeups_per_rtt", w->lat_cw / n, "server_wakeups_per_rtt", w->lat_sw / n,
		"client_cpu_ns_per_rtt", w->lat_ccpu / n, "server_cpu_ns_per_rtt", w->lat_scpu / n,
		"kicks_per_rtt", num_or_null(nemo, w->lat_kicks / n));
	json_object_update_new(j, json_pack("{s:i,s:I,s:f,s:f,s:o,s:o,s:f,s:f,s:f,s:o}",
		"in_flight", IN_FLIGHT, "requests", (json_int_t)w->tp_requests, "seconds", w->tp_seconds,
		"requests_per_s", w->tp_seconds > 0 ? m / w->tp_seconds : 0.0,
		"requests_per_s_stats", stats_object(rates, (size_t)w->rounds), "requests_per_s_rounds", jrounds,
		"client_wakeups_per_request", w->tp_cw / m, "server_wakeups_per_request", w->tp_sw / m,
		"cpu_ns_per_request", w->tp_cpu / m, "kicks_per_request", num_or_null(nemo, w->tp_kicks / m)));
	json_object_set_new(j, "samples_file", rel ? json_string(rel) : json_null());
	free(rel);
	free(rates);
	json_array_append_new(results, j);
}

static int rr_find(const char *name)
{
	for (int i = 0; i < RR_COUNT; i++)
		if (!strcmp(rr_mechs[i].name, name))
			return i;
	return -1;
}

static void rr_run_suite(const bench_opts *o, json_t *results, json_t *config)
{
	int sel[RR_COUNT], n = 0;
	if (o->nmechs)
		for (int i = 0; i < o->nmechs; i++)
			sel[n++] = rr_find(o->mechs[i]);
	else
		for (int i = 0; i < RR_COUNT; i++)
			sel[n++] = i;
	json_object_set_new(config, "scenarios", json_pack("[s,s]", rr_between[0], rr_between[1]));
	json_object_set_new(config, "rounds", json_integer(o->rounds));
	json_object_set_new(config, "in_flight", json_integer(IN_FLIGHT));
	json_object_set_new(config, "ring_slots", json_integer(RR_SLOTS));
	json_t *skipped = json_array();
	int nrows = n * BT_COUNT;
	struct rr_row *rows = xcalloc((size_t)nrows, sizeof *rows);
	for (int i = 0; i < nrows; i++) {
		rows[i] = (struct rr_row){ .mech = sel[i / BT_COUNT], .bt = i % BT_COUNT };
		rows[i].rtt = xcalloc((size_t)o->trials, sizeof(double));
		rows[i].rtt_round = xcalloc((size_t)o->trials, sizeof(int));
		rows[i].rate = xcalloc((size_t)o->rounds, sizeof(double));
	}
	/* The shared page and the rings, once: every round reuses them. */
	size_t ring = spsc_size(RR_SLOTS), len = sizeof(struct rr_shared) + 2 * ring;
	len = (len + 4095) / 4096 * 4096;
	char *page = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		fatal("request-reply: mmap: %s", strerror(errno));
	struct rr_shared *sh = (struct rr_shared *)page;
	size_t off = (sizeof *sh + SPSC_ALIGN - 1) / SPSC_ALIGN * SPSC_ALIGN;
	sh->req = (spsc_ring *)(page + off);
	sh->rep = (spsc_ring *)(page + off + ring);
	progress_begin(o, "request-reply", (uint64_t)nrows * (uint64_t)o->rounds);
	for (int k = 0; k < o->rounds && !bench_interrupted(); k++) {
		long per = o->trials / o->rounds + (k < o->trials % o->rounds);
		for (int j = 0; j < nrows && !bench_interrupted(); j++) {
			struct rr_row *w = &rows[k % 2 ? nrows - 1 - j : j];
			if (w->skip)
				continue;
			struct rr_run r = { .mech = w->mech, .bt = w->bt, .sh = sh, .warmup = o->warmup, .n = per,
					    .think_min = o->delay_min_us, .think_max = o->delay_max_us,
					    .seed = o->seed ^ (uint64_t)(k * 131 + j) };
			memset(sh->mark, 0, sizeof sh->mark);
			sh->why[0] = 0;
			struct rr_cli *c = xaligned(sizeof *c);
			c->r = &r;
			c->rtt = xcalloc((size_t)per, sizeof(double));
			char why[200] = "";
			if (rr_measure(o, &r, c, why, sizeof why)) {
				rr_add(w, c, sh, per);
			} else {
				char what[64];
				snprintf(what, sizeof what, "%s (%s)", rr_mechs[w->mech].name, rr_between[w->bt]);
				mechanism_unavailable(o, what, why, skipped);
				w->skip = true;
			}
			free(c->rtt);
			free(c);
			progress_add(1);
		}
	}
	progress_end();
	for (int i = 0; i < nrows; i++) {
		if (rows[i].rounds)
			rr_emit(o, &rows[i], results);
		free(rows[i].rtt);
		free(rows[i].rtt_round);
		free(rows[i].rate);
	}
	free(rows);
	munmap(page, len);
	json_object_set_new(config, "skipped", skipped);
}

static bool rr_has(const char *name)
{
	return rr_find(name) >= 0;
}

static void rr_list(FILE *out)
{
	for (int i = 0; i < RR_COUNT; i++)
		fprintf(out, "    %-20s [threads, processes] %s\n", rr_mechs[i].name, rr_mechs[i].what);
}

static void rr_help(FILE *out)
{
	fprintf(out,
"A client (on --src) asks a server (on --dst: a thread, or a forked process)\n"
"and waits for each answer.  Per row: the round trip with one request in flight\n"
"after a think time of --delay-us (p50, p99), then requests per second with %d\n"
"in flight; the wake-ups and CPU of both sides per request.  --trials round\n"
"trips (and as many requests) per row, split over --rounds rounds.\n"
"Mechanisms [scenarios]:\n", IN_FLIGHT);
	rr_list(out);
}

static void rr_print(json_t *results)
{
	printf("%-14s %-10s %10s %10s %12s %9s %11s\n", "mechanism", "scenario", "rtt p50", "rtt p99",
	       "req/s", "wake/rtt", "srv cpu/rtt");
	size_t i;
	json_t *r;
	json_array_foreach(results, i, r) {
		json_t *rtt = json_object_get(r, "rtt_ns");
		printf("%-14s %-10s %8.1fus %8.1fus %12.0f %9.2f %9.1fus\n",
		       json_string_value(json_object_get(r, "mechanism")),
		       json_string_value(json_object_get(r, "scenario")),
		       json_number_value(json_object_get(rtt, "p50")) / 1e3,
		       json_number_value(json_object_get(rtt, "p99")) / 1e3,
		       json_number_value(json_object_get(r, "requests_per_s")),
		       json_number_value(json_object_get(r, "client_wakeups_per_rtt")) +
		       json_number_value(json_object_get(r, "server_wakeups_per_rtt")),
		       json_number_value(json_object_get(r, "server_cpu_ns_per_rtt")) / 1e3);
	}
}

const suite suite_request_reply = {
	.name = "request-reply",
	.summary = "a client waits for each answer of a server, thread or process: nemo_am_reply against a "
		   "Unix socket and eventfd + ring",
	.options = OPT_MECHS | OPT_SRC_DST | OPT_ROUNDS,
	.default_trials = 2000,
	.default_delay_min_us = 20,
	.default_delay_max_us = 50,
	.help = rr_help,
	.list = rr_list,
	.has_mechanism = rr_has,
	.run = rr_run_suite,
	.print = rr_print,
	.default_rounds = 5,
};
