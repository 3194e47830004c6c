/*
 * syscost.c - the `syscost` suite: what one operation costs the thread
 * that submits it, and "bits to the wire": how long until a reader
 * spinning on another CPU sees its effect (the table of Minnich, Floren &
 * McKie, "Using Currying and Process-Private System Calls to Break the
 * One-Microsecond System Call Barrier": the generic path against the
 * curried one).
 *
 * Each row is one mechanism.  cost_ns: the sender (pinned to --src) times
 * 64 back-to-back operations between two ordered TSC reads, one sample per
 * trial (the mean of the 64).  For the curried writes the writes of the
 * previous trial are waited for first, outside the timing (settle), so a
 * sample is what submitting costs while the kernel keeps up;
 * uring-sqpoll-write-stream runs its trials back to back instead, and so
 * measures the rate of the kernel thread that performs the writes.  btw_ns, for operations with a visible
 * effect: the reader (pinned to --dst) spins until it sees the effect and
 * stamps; one sample per trial, after a random 5-10 us pause so that
 * trials do not overlap.  The reader spins during the cost trials too, as
 * it would in use.  For eventfd targets the reader spins on a
 * non-blocking read(2), so its own detection step is one read (~0.3 us on
 * this VM); for active messages it spins on nemo_poll and the handler
 * stamps.  Rows are measured in --rounds rounds, interleaved.
 */
#define _GNU_SOURCE
#include "bench.h"

#include <nemo/fastio.h>

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#define OPS 64                    /* operations per cost sample */
#define BATCH 16                  /* writes per enter, uring-fixed-write-batch */

enum reader_kind { RD_NONE, RD_EVENTFD, RD_PLACE };

struct sc {
	const bench_opts *o;
	const struct sc_mech *m;
	int efd;
	uint64_t one;
	_Atomic uint32_t futex_word;
	nemo_fastio *fw;
	struct io_uring ring;
	bool ring_ok;
	unsigned inflight;
	nemo_domain *d;
	_Atomic nemo_place_id rx;
	nemo_am_bound *bound;
	uint64_t arg;
	atomic_uint ready, stop;
	_Atomic uint64_t seen_at;
	pthread_t reader;
};

typedef struct sc_mech {
	const char *name;
	const char *summary;
	enum reader_kind reader;
	bool btw;                     /* has a visible effect to time */
	int (*setup)(struct sc *s, char *why, size_t whylen);
	void (*op)(struct sc *s);
	/* Before each cost trial, outside the timing: let the kernel finish
	 * what the previous trial submitted (NULL: back to back). */
	void (*settle)(struct sc *s);
} sc_mech;

/* ------------------------------------------------------------ operations */

static void op_getppid(struct sc *s)
{
	(void)s;
	(void)syscall(SYS_getppid);
}

static void op_eventfd(struct sc *s)
{
	if (write(s->efd, &s->one, sizeof s->one) != (ssize_t)sizeof s->one)
		fatal("write-eventfd: %s", strerror(errno));
}

static void op_futex_none(struct sc *s)
{
	nemo_futex_wake((uint32_t *)&s->futex_word, 1, NEMO_FUTEX_PRIVATE, NULL);
}

static void op_fastwrite(struct sc *s)
{
	int err = nemo_fastwrite(s->fw, sizeof s->one);
	if (err)
		fatal("%s: nemo_fastwrite: %s", s->m->name, nemo_strerror(err));
}

/* The writes of the previous trial completed: a cost sample is then what
 * submitting costs while the kernel keeps up, not the kernel's rate. */
static void settle_fastwrite(struct sc *s)
{
	int err = nemo_fastwrite_wait(s->fw);
	if (err)
		fatal("%s: nemo_fastwrite_wait: %s", s->m->name, nemo_strerror(err));
}

static void ring_reap(struct sc *s)
{
	struct io_uring_cqe *cqes[64];
	unsigned n = io_uring_peek_batch_cqe(&s->ring, cqes, 64);
	for (unsigned i = 0; i < n; i++)
		if (cqes[i]->res < 0)
			fatal("uring-fixed-write-batch: write: %s", strerror(-cqes[i]->res));
	io_uring_cq_advance(&s->ring, n);
	s->inflight -= n;
}

/* BATCH writes of the fixed buffer to the fixed file, one enter.  The
 * cost sample divides by OPS, and OPS / BATCH ops make OPS writes. */
static void op_uring_batch(struct sc *s)
{
	while (s->inflight + BATCH > 128 - BATCH) {
		ring_reap(s);
		if (s->inflight + BATCH > 128 - BATCH) {
			struct io_uring_cqe *c;
			io_uring_wait_cqe(&s->ring, &c);
		}
	}
	for (int i = 0; i < BATCH; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);
		io_uring_prep_write_fixed(sqe, 0, &s->one, sizeof s->one, (uint64_t)-1, 0);
		sqe->flags |= IOSQE_FIXED_FILE;
	}
	s->inflight += BATCH;
	if (io_uring_submit(&s->ring) < 0)
		fatal("uring-fixed-write-batch: io_uring_submit failed");
}

static void op_am_send(struct sc *s)
{
	int err = nemo_am_send(atomic_load_explicit(&s->rx, memory_order_relaxed), 0, ++s->arg, 0);
	if (err)
		fatal("nemo-am-send: %s", nemo_strerror(err));
}

static void op_am_bound(struct sc *s)
{
	int err = nemo_am_send_bound(s->bound, ++s->arg);
	if (err)
		fatal("nemo-am-bound: %s", nemo_strerror(err));
}

static void op_fast(struct sc *s)
{
	int err = nemo_fast(0, ++s->arg);
	if (err)
		fatal("nemo-fast: %s", nemo_strerror(err));
}

/* ----------------------------------------------------------------- setup */

static int setup_none(struct sc *s, char *why, size_t whylen)
{
	(void)s;
	(void)why;
	(void)whylen;
	return 0;
}

static int setup_eventfd(struct sc *s, char *why, size_t whylen)
{
	s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->efd < 0) {
		snprintf(why, whylen, "eventfd: %s", strerror(errno));
		return errno;
	}
	return 0;
}

static int setup_fastwrite(struct sc *s, unsigned flags, nemo_fastwrite_mode_t want, char *why, size_t whylen)
{
	int err = setup_eventfd(s, why, whylen);
	if (err)
		return err;
	err = nemo_fastwrite_open(s->efd, &s->one, sizeof s->one, flags, &s->fw);
	if (err) {
		snprintf(why, whylen, "nemo_fastwrite_open: %s", nemo_last_error());
		return err;
	}
	if (nemo_fastwrite_mode(s->fw) != want) {
		snprintf(why, whylen, "io_uring %s is not available here (mode %d)",
			 want == NEMO_FASTWRITE_MODE_SQPOLL ? "SQPOLL" : "", (int)nemo_fastwrite_mode(s->fw));
		return ENOTSUP;
	}
	return 0;
}

static int setup_enter(struct sc *s, char *why, size_t whylen)
{
	return setup_fastwrite(s, 0, NEMO_FASTWRITE_MODE_ENTER, why, whylen);
}

static int setup_sqpoll(struct sc *s, char *why, size_t whylen)
{
	return setup_fastwrite(s, NEMO_FASTWRITE_SQPOLL, NEMO_FASTWRITE_MODE_SQPOLL, why, whylen);
}

static int setup_batch(struct sc *s, char *why, size_t whylen)
{
	int err = setup_eventfd(s, why, whylen);
	if (err)
		return err;
	int rc = io_uring_queue_init(128, &s->ring, 0);
	if (rc < 0) {
		snprintf(why, whylen, "io_uring_queue_init: %s", strerror(-rc));
		return -rc;
	}
	struct iovec iov = { &s->one, sizeof s->one };
	if ((rc = io_uring_register_files(&s->ring, &s->efd, 1)) < 0 ||
	    (rc = io_uring_register_buffers(&s->ring, &iov, 1)) < 0) {
		snprintf(why, whylen, "io_uring registration: %s", strerror(-rc));
		io_uring_queue_exit(&s->ring);
		return -rc;
	}
	s->ring_ok = true;
	return 0;
}

static void nop_handler(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	struct sc *s = ctx;
	atomic_store_explicit(&s->seen_at, nemo_ticks_ordered(), memory_order_release);
}

static int setup_domain(struct sc *s, char *why, size_t whylen)
{
	int err = nemo_domain_create(NULL, &s->d);
	if (!err)
		err = nemo_action_register(s->d, 0, nop_handler, s);
	if (err)
		snprintf(why, whylen, "%s", nemo_last_error());
	return err;
}

static const sc_mech sc_mechs[] = {
	{ "getppid", "the cheapest system call (getppid): the floor of any syscall path",
	  RD_NONE, false, setup_none, op_getppid, NULL },
	{ "write-eventfd", "write(2) of 8 bytes to an eventfd: the generic kernel path",
	  RD_EVENTFD, true, setup_eventfd, op_eventfd, NULL },
	{ "futex-wake-none", "FUTEX_WAKE with nobody waiting: a kick that finds no sleeper",
	  RD_NONE, false, setup_none, op_futex_none, NULL },
	{ "uring-fixed-write", "nemo_fastwrite to an eventfd: registered file and fixed buffer, one io_uring_enter per write",
	  RD_EVENTFD, true, setup_enter, op_fastwrite, settle_fastwrite },
	{ "uring-fixed-write-batch", "16 fixed writes per io_uring_enter (cost per write)",
	  RD_NONE, false, setup_batch, op_uring_batch, NULL },
	{ "uring-sqpoll-write", "nemo_fastwrite with NEMO_FASTWRITE_SQPOLL: the curried write, no system call",
	  RD_EVENTFD, true, setup_sqpoll, op_fastwrite, settle_fastwrite },
	{ "uring-sqpoll-write-stream", "the same, trials back to back: a stream pays the kernel thread's rate",
	  RD_EVENTFD, false, setup_sqpoll, op_fastwrite, NULL },
	{ "nemo-am-send", "nemo_am_send to a place spinning in nemo_poll: the generic send",
	  RD_PLACE, true, setup_domain, op_am_send, NULL },
	{ "nemo-am-bound", "nemo_am_send_bound: the curried send",
	  RD_PLACE, true, setup_domain, op_am_bound, NULL },
	{ "nemo-fast", "nemo_fast(slot): the bound send set up by nemo_ctl",
	  RD_PLACE, true, setup_domain, op_fast, NULL },
};
#define SC_N (sizeof sc_mechs / sizeof sc_mechs[0])

static const sc_mech *sc_find(const char *name)
{
	for (size_t i = 0; i < SC_N; i++)
		if (!strcmp(sc_mechs[i].name, name))
			return &sc_mechs[i];
	return NULL;
}

static bool sc_has(const char *name)
{
	return sc_find(name) != NULL;
}

static void sc_list(FILE *out)
{
	for (size_t i = 0; i < SC_N; i++)
		fprintf(out, "    %-24s %s\n", sc_mechs[i].name, sc_mechs[i].summary);
}

static void sc_help(FILE *out)
{
	fprintf(out,
"What one operation costs the thread that submits it (cost_ns: the mean of\n"
"%d back-to-back operations per trial, between ordered TSC reads), and, for\n"
"operations with an effect, \"bits to the wire\" (btw_ns: from the call until\n"
"a reader spinning on --dst sees it).  The generic paths (write to an eventfd,\n"
"nemo_am_send) beside the curried ones (io_uring with a registered file and\n"
"fixed buffer, SQPOLL; nemo_am_send_bound, nemo_fast): the table of\n"
"Minnich, Floren & McKie (Using Currying and Process-Private System Calls).\n"
"The curried writes wait, between trials and untimed, for the previous\n"
"trial's writes (the cost of submitting while the kernel keeps up);\n"
"uring-sqpoll-write-stream does not (a stream pays the kernel thread's rate).\n", OPS);
}

/* ---------------------------------------------------------------- reader */

static void *reader_main(void *p)
{
	struct sc *s = p;
	if (s->m->reader == RD_EVENTFD) {
		atomic_store_explicit(&s->ready, 1, memory_order_release);
		while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
			uint64_t v;
			if (read(s->efd, &v, sizeof v) == (ssize_t)sizeof v)
				atomic_store_explicit(&s->seen_at, nemo_ticks_ordered(), memory_order_release);
		}
		return NULL;
	}
	nemo_place_attr a = { .policy = { NEMO_WAIT_SPIN, 0 } };
	nemo_place_id id;
	int err = nemo_place_join(s->d, &a, &id);
	if (err)
		fatal("%s: the reader cannot join: %s", s->m->name, nemo_last_error());
	atomic_store_explicit(&s->rx, id, memory_order_release);
	atomic_store_explicit(&s->ready, 1, memory_order_release);
	while (!atomic_load_explicit(&s->stop, memory_order_relaxed))
		nemo_poll(NULL);
	while (nemo_poll(NULL) == 0) {    /* what is still queued */
		unsigned n = 0;
		nemo_poll(&n);
		if (!n)
			break;
	}
	nemo_place_leave();
	return NULL;
}

/* ------------------------------------------------------------------- row */

struct sc_sender {
	struct sc *s;
	double *cost, *btw;
	long ncost, nbtw;
	uint64_t rng;
};

static void *sender_main(void *p)
{
	struct sc_sender *x = p;
	struct sc *s = x->s;
	const bench_opts *o = s->o;
	if (s->m->reader == RD_PLACE) {
		if (nemo_place_join(s->d, NULL, NULL))
			fatal("%s: the sender cannot join: %s", s->m->name, nemo_last_error());
		nemo_place_id rx = atomic_load_explicit(&s->rx, memory_order_acquire);
		if (!strcmp(s->m->name, "nemo-am-bound") && nemo_am_bind(rx, 0, 0, &s->bound))
			fatal("nemo-am-bound: nemo_am_bind: %s", nemo_last_error());
		if (!strcmp(s->m->name, "nemo-fast")) {
			char cmd[96];
			snprintf(cmd, sizeof cmd, "bind am dest=%#llx action=0 slot=0", (unsigned long long)rx);
			if (nemo_ctl(s->d, cmd))
				fatal("nemo-fast: nemo_ctl: %s", nemo_last_error());
		}
	}
	int per = s->m->op == op_uring_batch ? OPS / BATCH : OPS;
	for (long t = -o->warmup; t < o->trials && !bench_stop_requested(); t++) {
		if (s->m->settle)
			s->m->settle(s);
		uint64_t t0 = nemo_ticks_ordered();
		for (int k = 0; k < per; k++)
			s->m->op(s);
		uint64_t t1 = nemo_ticks_ordered();
		if (t >= 0)
			x->cost[x->ncost++] = nemo_ticks_to_ns((int64_t)(t1 - t0)) / OPS;
	}
	if (s->m->op == op_uring_batch)
		while (s->inflight) {
			struct io_uring_cqe *c;
			io_uring_wait_cqe(&s->ring, &c);
			ring_reap(s);
		}
	if (s->m->btw) {
		for (long t = -o->warmup; t < o->trials && !bench_stop_requested(); t++) {
			random_delay(&x->rng, 5, 10);
			atomic_store_explicit(&s->seen_at, 0, memory_order_relaxed);
			uint64_t t0 = nemo_ticks_ordered();
			s->m->op(s);
			uint64_t seen, start = nemo_ticks();
			while (!(seen = atomic_load_explicit(&s->seen_at, memory_order_acquire))) {
				nemo_cpu_relax();
				if (nemo_ticks_to_ns((int64_t)(nemo_ticks() - start)) > BENCH_STUCK_S * 1e9)
					fatal("%s: the reader never saw the effect (trial %ld)", s->m->name, t);
			}
			if (t >= 0)
				x->btw[x->nbtw++] = nemo_ticks_to_ns((int64_t)(seen - t0));
		}
	}
	if (s->bound)
		nemo_am_unbind(s->bound);
	if (!strcmp(s->m->name, "nemo-fast"))
		nemo_ctl(s->d, "unbind slot=0");
	if (s->m->reader == RD_PLACE)
		nemo_place_leave();
	return NULL;
}


static bool sc_row(const bench_opts *o, const sc_mech *m, json_t *results, char *why, size_t whylen)
{
	struct sc s = { .o = o, .m = m, .efd = -1, .one = 1, .rx = NEMO_PLACE_NONE };
	if (m->setup(&s, why, whylen)) {
		if (s.fw)
			nemo_fastwrite_close(s.fw);
		if (s.efd >= 0)
			close(s.efd);
		return false;
	}
	double probe_before = coherence_probe(o->src, o->dst, 1000);
	if (m->reader != RD_NONE) {
		thread_start_pinned(&s.reader, o->dst, reader_main, &s);
		wait_until_eq(&s.ready, 1, BENCH_STUCK_S, m->name);
	}
	struct sc_sender x = { &s, xcalloc((size_t)o->trials, sizeof(double)),
			       xcalloc((size_t)o->trials, sizeof(double)), 0, 0, o->seed ^ 0x5C5C };
	pthread_t snd;
	thread_start_pinned(&snd, o->src, sender_main, &x);
	progress_join(&snd, 1);
	atomic_store_explicit(&s.stop, 1, memory_order_relaxed);
	if (m->reader != RD_NONE)
		pthread_join(s.reader, NULL);
	double probe_after = coherence_probe(o->src, o->dst, 1000);
	if (x.ncost) {
		json_t *j = json_pack("{s:s,s:i,s:i,s:I}", "mechanism", m->name, "src_cpu", o->src, "dst_cpu", o->dst,
				      "trials", (json_int_t)x.ncost);
		json_object_set_new(j, "cost_ns", stats_object(x.cost, (size_t)x.ncost));
		json_object_set_new(j, "btw_ns", x.nbtw ? stats_object(x.btw, (size_t)x.nbtw) : json_null());
		json_object_set_new(j, "mode", s.fw ? json_integer(nemo_fastwrite_mode(s.fw)) : json_null());
		json_object_set_new(j, "coherence_probe_ns",
				    json_pack("{s:f,s:f}", "before", probe_before, "after", probe_after));
		json_array_append_new(results, j);
		probe_check(o, m->name, probe_before, probe_after);
	}
	free(x.cost);
	free(x.btw);
	if (s.fw)
		nemo_fastwrite_close(s.fw);
	if (s.ring_ok)
		io_uring_queue_exit(&s.ring);
	if (s.efd >= 0)
		close(s.efd);
	if (s.d)
		nemo_domain_destroy(s.d);
	return true;
}

static void sc_run(const bench_opts *o, json_t *results, json_t *config)
{
	const sc_mech *sel[SC_N * BENCH_MAX_LIST];
	size_t n = 0;
	if (o->nmechs)
		for (int i = 0; i < o->nmechs; i++)
			sel[n++] = sc_find(o->mechs[i]);
	else
		for (size_t i = 0; i < SC_N; i++)
			sel[n++] = &sc_mechs[i];
	json_object_del(config, "delay_us");
	json_object_del(config, "scenarios");
	json_object_set_new(config, "ops_per_cost_sample", json_integer(OPS));
	json_object_set_new(config, "rounds", json_integer(o->rounds));
	json_t *skipped = json_array();
	bench_opts per = *o;
	per.trials = o->trials / o->rounds > 0 ? o->trials / o->rounds : 1;
	progress_begin(o, "syscost", (uint64_t)n * (uint64_t)o->rounds);
	/* Rows interleaved over rounds; each round's row appended, then the
	 * rows of one mechanism merged into one at the end. */
	json_t *parts = json_array();
	for (int r = 0; r < o->rounds && !bench_interrupted(); r++)
		for (size_t i = 0; i < n && !bench_interrupted(); i++) {
			char why[200];
			if (!sc_row(&per, sel[i], parts, why, sizeof why)) {
				if (r == 0)
					mechanism_unavailable(o, sel[i]->name, why, skipped);
			}
			progress_add(1);
		}
	progress_end();
	/* Merge: the samples of each mechanism's rounds, through the STATS of
	 * their union (kept: the p50/p99 of every round, too). */
	for (size_t i = 0; i < n; i++) {
		json_t *merged = NULL, *rounds = json_array();
		size_t idx;
		json_t *jr;
		json_array_foreach(parts, idx, jr) {
			if (strcmp(json_string_value(json_object_get(jr, "mechanism")), sel[i]->name))
				continue;
			json_array_append(rounds, json_object_get(jr, "cost_ns"));
			if (!merged)
				merged = json_deep_copy(jr);
			else
				json_object_set_new(merged, "trials",
						    json_integer(json_integer_value(json_object_get(merged, "trials")) +
								 json_integer_value(json_object_get(jr, "trials"))));
		}
		if (merged) {
			json_object_set_new(merged, "cost_ns_rounds", rounds);
			json_array_append_new(results, merged);
		} else {
			json_decref(rounds);
		}
	}
	json_decref(parts);
	json_object_set_new(config, "skipped", skipped);
}

static void sc_print(json_t *results)
{
	printf("%-24s %12s %12s %12s %12s\n", "mechanism", "cost p50 ns", "cost p99 ns", "btw p50 ns", "btw p99 ns");
	size_t i;
	json_t *jr;
	json_array_foreach(results, i, jr) {
		json_t *c = json_object_get(jr, "cost_ns"), *b = json_object_get(jr, "btw_ns");
		printf("%-24s %12.1f %12.1f", json_string_value(json_object_get(jr, "mechanism")),
		       json_real_value(json_object_get(c, "p50")), json_real_value(json_object_get(c, "p99")));
		if (json_is_object(b))
			printf(" %12.0f %12.0f\n", json_real_value(json_object_get(b, "p50")),
			       json_real_value(json_object_get(b, "p99")));
		else
			printf(" %12s %12s\n", "-", "-");
	}
}

const suite suite_syscost = {
	.name = "syscost",
	.summary = "cost of one operation to its submitter, and bits to the wire: generic vs curried paths",
	.options = OPT_MECHS | OPT_SRC_DST | OPT_ROUNDS,
	.default_trials = 600,
	.default_delay_min_us = 5,
	.default_delay_max_us = 10,
	.help = sc_help,
	.list = sc_list,
	.has_mechanism = sc_has,
	.run = sc_run,
	.print = sc_print,
	.default_rounds = 3,
};
