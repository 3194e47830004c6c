/*
 * throughput.c - suite `throughput`: how many small messages per second
 * one sender can hand to one receiver on another CPU, the receiver
 * polling.  The other suites time one wake-up at a time; this one
 * measures the steady stream, where the cost per message is the queue's
 * (enqueue, dequeue, the cache lines they move) rather than a wake-up's.
 *
 * Mechanisms:
 *   nemo-am  nemo's active messages: action 0 sums msg->arg on the
 *            receiver, a place polling with nemo_poll (policy spin); the
 *            sender sends batches of B with one nemo_am_send_batch call
 *            (validated once, one publication per batch).
 *   nemo-am-each  the same, one nemo_am_send per message: B-1 with
 *            NEMO_MORE (only the hint and the kick are deferred:
 *            domain.h), the B-th without.  What a caller that cannot
 *            gather its messages into an array gets.
 *   ck-ring  the peer baseline: Concurrency Kit's SPSC ring of 8-byte
 *            values (the value carried as the void *), a spinning
 *            consumer; the producer spins while the ring is full.
 *
 * Method, the same for both:
 *   - The sender sends 1, 2, 3, ... as fast as it can, checking a stop
 *     flag between batches.  The receiver checks that each value is the
 *     previous one plus 1 (a single sender's messages arrive in order)
 *     and sums them; at the end the sum must be n(n+1)/2 for the n
 *     messages sent.  Any mismatch is fatal: a broken hand-off is not a
 *     measurement.
 *   - The receiver owns the clock: it reads the cycle counter after every
 *     CHECK_EVERY messages it has taken, and on every poll that finds
 *     nothing (it is idle then, so the read is free).  So the sender's
 *     loop carries no timing at all, and an interval boundary is seen at
 *     most CHECK_EVERY messages late; each interval's rate uses its real
 *     measured length.
 *   - From its first message, the receiver lets a warm-up pass (one
 *     interval, at most 0.2 s: page faults of the rings, caches, clock
 *     ramp-up), then measures INTERVALS intervals of --seconds/INTERVALS
 *     each: the messages taken in one interval over its length is one
 *     sample.  Then it raises the stop flag, takes everything still
 *     queued, and checks the sum.
 */
#define _GNU_SOURCE
#include "bench.h"

#include <ck_ring.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Samples per row: enough for a p90 of the rate with a 2 s default. */
#define INTERVALS 20
/* Messages between two clock reads of a busy receiver: a read costs about
 * as much as taking a message, and 256 messages are a few microseconds,
 * nothing against an interval of 0.1 s. */
#define CHECK_EVERY 256u
#define WARMUP_MAX_S 0.2

/*
 * ck-ring entries (a power of two; ck_ring holds one less).  Measured on
 * the 2-vCPU KVM guest this suite was written on, 64 to 16384 entries,
 * interleaved, 10 runs of 0.5 s each: medians of the p50 rate 7, 10, 10,
 * 12, 16 Mmsg/s, while the runs of any one size spread from 1-4 to 19-56
 * Mmsg/s as the host moved the vCPUs (coherence probe 40, 85 or 300 ns).
 * No size was clearly better, so the usual 1024 stays: 4x nemo-am's
 * default ring of 256 slots, so the baseline is not handicapped by room.
 */
#define CK_RING_ENTRIES 1024u

/* ----------------------------------------------------------- one row */

/* The receiver's tally: touched by the receiver's thread only (nemo-am's
 * handler runs there too). */
struct tp_sink {
	uint64_t count, sum;
	uint64_t bad_at;              /* first out-of-order message number, or 0 */
	uint64_t bad_value;
};

/* The receiver's clock: warm-up, intervals, stop, drain. */
enum { PH_FIRST, PH_WARMUP, PH_MEASURE, PH_DRAIN };

struct tp_meter {
	int phase, interval;          /* interval: those measured so far */
	uint64_t len_ticks, warm_ticks, stuck_ticks;
	uint64_t phase_end;
	uint64_t checked;             /* count at the last clock read */
	uint64_t seen, seen_at;       /* watchdog: last count that moved, and when */
	uint64_t stamp[INTERVALS + 1], at[INTERVALS + 1];  /* interval edges: ticks, counts */
	double cpu0, cpu1;
};

struct tp_run {
	/* Sender -> receiver words, each on its own line. */
	_Alignas(BENCH_CACHELINE) atomic_bool stop;       /* receiver: measurement over */
	_Alignas(BENCH_CACHELINE) atomic_uint rx_ready;   /* receiver: ready (nemo-am: id published) */
	_Alignas(BENCH_CACHELINE) atomic_uint tx_done;    /* sender: no more messages; `sent` is final */
	_Alignas(BENCH_CACHELINE) atomic_uint drained;    /* receiver: took all `sent` */
	_Alignas(BENCH_CACHELINE) _Atomic uint64_t sent;
	_Alignas(BENCH_CACHELINE) struct tp_sink sink;
	_Alignas(BENCH_CACHELINE) struct tp_meter meter;
	uint64_t full;                /* sender: sends that found the ring full (ck-ring) */
	long batch;
	const char *name;
	/* nemo-am */
	nemo_domain *domain;
	_Atomic nemo_place_id rx_id;
	nemo_domain_counters before;
	/* ck-ring */
	ck_ring_t *ring;
	ck_ring_buffer_t *ring_buf;
};

static void meter_init(struct tp_meter *m, double seconds)
{
	double len_s = seconds / INTERVALS;
	*m = (struct tp_meter){
		.phase = PH_FIRST,
		.len_ticks = nemo_ns_to_ticks(len_s * 1e9),
		.warm_ticks = nemo_ns_to_ticks((len_s < WARMUP_MAX_S ? len_s : WARMUP_MAX_S) * 1e9),
		.stuck_ticks = nemo_ns_to_ticks(BENCH_STUCK_S * 1e9),
		.seen_at = nemo_ticks(),
	};
}

/* The slow path of meter_step: read the clock, move through the phases.
 * Returns true once the row is over (stopped, and everything sent taken). */
static bool meter_check(struct tp_run *r, uint64_t count)
{
	struct tp_meter *m = &r->meter;
	uint64_t now = nemo_ticks();
	m->checked = count;
	if (count != m->seen) {
		m->seen = count;
		m->seen_at = now;
	} else if (now - m->seen_at > m->stuck_ticks) {
		fatal("%s: no message for %.0f s after %llu (phase %d); giving up",
		      r->name, BENCH_STUCK_S, (unsigned long long)count, m->phase);
	}
	/* Interrupted (bench.h) before the first interval ended: the row
	 * measured nothing; stop, drain and check the hand-off as usual. */
	if (m->phase < PH_MEASURE && bench_stop_requested()) {
		m->phase = PH_DRAIN;
		atomic_store_explicit(&r->stop, true, memory_order_relaxed);
		return false;
	}
	switch (m->phase) {
	case PH_FIRST:
		if (count) {
			m->phase = PH_WARMUP;
			m->phase_end = now + m->warm_ticks;
		}
		return false;
	case PH_WARMUP:
		if (now < m->phase_end)
			return false;
		m->phase = PH_MEASURE;
		m->stamp[0] = now;
		m->at[0] = count;
		m->cpu0 = thread_cpu_ns();
		m->phase_end = now + m->len_ticks;
		return false;
	case PH_MEASURE:
		if (now < m->phase_end)
			return false;
		m->interval++;
		m->stamp[m->interval] = now;
		m->at[m->interval] = count;
		progress_add(1);
		/* An interrupted run ends the row here, at an interval's end:
		 * it keeps the intervals it has. */
		if (m->interval < INTERVALS && !bench_stop_requested()) {
			/* The next interval starts now: a late boundary (the
			 * receiver was preempted) lengthens one interval, and its
			 * rate still uses its real length. */
			m->phase_end = now + m->len_ticks;
			return false;
		}
		m->cpu1 = thread_cpu_ns();
		m->phase = PH_DRAIN;
		atomic_store_explicit(&r->stop, true, memory_order_relaxed);
		return false;
	default:
		if (!atomic_load_explicit(&r->tx_done, memory_order_acquire))
			return false;
		uint64_t sent = atomic_load_explicit(&r->sent, memory_order_relaxed);
		if (count > sent)
			fatal("%s: the receiver took %llu messages, the sender sent %llu",
			      r->name, (unsigned long long)count, (unsigned long long)sent);
		return count == sent;
	}
}

/* After every poll: count is the receiver's total so far, idle whether
 * the poll found nothing.  Cheap unless the clock is due. */
static inline bool meter_step(struct tp_run *r, uint64_t count, bool idle)
{
	if (!idle && count - r->meter.checked < CHECK_EVERY)
		return false;
	return meter_check(r, count);
}

static inline void sink_take(struct tp_sink *s, uint64_t v)
{
	if (__builtin_expect(v != s->count + 1, 0) && !s->bad_at) {
		s->bad_at = s->count + 1;
		s->bad_value = v;
	}
	s->sum += v;
	s->count++;
}

/* The hand-off's proof: every value 1..n once, in order. */
static void sink_verify(const struct tp_run *r)
{
	const struct tp_sink *s = &r->sink;
	uint64_t n = atomic_load(&r->sent);
	/* n(n+1)/2 modulo 2^64, as the receiver's sum wraps. */
	uint64_t want = n % 2 == 0 ? (n / 2) * (n + 1) : n * ((n + 1) / 2);
	if (s->bad_at)
		fatal("%s: message %llu carried %llu (out of order, lost or duplicated)",
		      r->name, (unsigned long long)s->bad_at, (unsigned long long)s->bad_value);
	if (s->count != n || s->sum != want)
		fatal("%s: the receiver took %llu messages summing to %llu; the sender sent %llu (sum %llu)",
		      r->name, (unsigned long long)s->count, (unsigned long long)s->sum,
		      (unsigned long long)n, (unsigned long long)want);
}

/* The sender's end: publish the count, wait until the receiver took it
 * all (the watchdog of the receiver or of the row ends a stall). */
static void sender_done(struct tp_run *r, uint64_t v)
{
	atomic_store_explicit(&r->sent, v, memory_order_relaxed);
	atomic_store_explicit(&r->tx_done, 1, memory_order_release);
	wait_until_eq(&r->drained, 1, BENCH_STUCK_S + 5, r->name);
}

/* -------------------------------------------------------------- nemo-am */

/* (nemo_domain_destroy keeps a small header for good, so that a stale
 * pointer gets EIDRM, on a list of its own: LeakSanitizer sees it
 * reachable.  Nothing to keep here.) */

static void am_handler(const nemo_am_msg *msg, void *ctx)
{
	sink_take(ctx, msg->arg);
}

static int am_setup(struct tp_run *r, char *why, size_t whylen)
{
	int err = nemo_domain_create(NULL, &r->domain);
	if (!err)
		err = nemo_action_register(r->domain, 0, am_handler, &r->sink);
	if (err) {
		snprintf(why, whylen, "%s: %s", r->domain ? "nemo_action_register" : "nemo_domain_create",
			 nemo_strerror(err));
		if (r->domain)
			nemo_domain_destroy(r->domain);
		r->domain = NULL;
	}
	return err;
}

static void *am_receiver(void *p)
{
	struct tp_run *r = p;
	nemo_place_attr pa = { .policy = { NEMO_WAIT_SPIN, 0 } };
	nemo_place_id id;
	int err = nemo_place_join(r->domain, &pa, &id);
	if (err)
		fatal("nemo-am: the receiver cannot join: %s", nemo_strerror(err));
	atomic_store_explicit(&r->rx_id, id, memory_order_relaxed);
	atomic_store_explicit(&r->rx_ready, 1, memory_order_release);
	for (;;) {
		unsigned n = 0;
		err = nemo_poll(&n);
		if (err)
			fatal("nemo-am: nemo_poll: %s", nemo_strerror(err));
		if (!n)
			nemo_cpu_relax();
		if (meter_step(r, r->sink.count, n == 0))
			break;
	}
	atomic_store_explicit(&r->drained, 1, memory_order_release);
	err = nemo_place_leave();
	if (err)
		fatal("nemo-am: the receiver cannot leave: %s", nemo_strerror(err));
	return NULL;
}

/* Both nemo-am senders: join, wait for the receiver's id, note the
 * counters the row's kicks_per_msg starts from. */
static nemo_place_id am_sender_begin(struct tp_run *r)
{
	int err = nemo_place_join(r->domain, NULL, NULL);
	if (err)
		fatal("%s: the sender cannot join: %s", r->name, nemo_strerror(err));
	wait_until_eq(&r->rx_ready, 1, BENCH_STUCK_S, r->name);
	err = nemo_domain_get_counters(r->domain, &r->before);
	if (err)
		fatal("%s: nemo_domain_get_counters: %s", r->name, nemo_strerror(err));
	return atomic_load_explicit(&r->rx_id, memory_order_relaxed);
}

static void am_sender_end(struct tp_run *r, uint64_t sent)
{
	sender_done(r, sent);
	int err = nemo_place_leave();
	if (err)
		fatal("%s: the sender cannot leave: %s", r->name, nemo_strerror(err));
}

/* nemo-am-each: one call per message. */
static void *am_each_sender(void *p)
{
	struct tp_run *r = p;
	nemo_place_id rx = am_sender_begin(r);
	uint64_t v = 0;
	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		/* B-1 deferred sends, then the batch's last, which publishes
		 * them (hint, kick if needed). */
		for (long b = 1; b <= r->batch; b++) {
			int err = nemo_am_send(rx, 0, ++v, b < r->batch ? NEMO_MORE : 0);
			if (__builtin_expect(err != 0, 0))
				fatal("%s: nemo_am_send (message %llu): %s", r->name,
				      (unsigned long long)v, nemo_strerror(err));
		}
	}
	am_sender_end(r, v);
	return NULL;
}

/* nemo-am-bound: one bound send per message, each published (no
 * NEMO_MORE, no batch): the curried path of nemo/am.h on a stream. */
static void *am_bound_sender(void *p)
{
	struct tp_run *r = p;
	nemo_place_id rx = am_sender_begin(r);
	nemo_am_bound *b;
	int err = nemo_am_bind(rx, 0, 0, &b);
	if (err)
		fatal("%s: nemo_am_bind: %s", r->name, nemo_strerror(err));
	uint64_t v = 0;
	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		for (long k = 0; k < r->batch; k++) {   /* the stop flag read once per --batch */
			err = nemo_am_send_bound(b, ++v);
			if (__builtin_expect(err != 0, 0))
				fatal("%s: nemo_am_send_bound (message %llu): %s", r->name,
				      (unsigned long long)v, nemo_strerror(err));
		}
	}
	nemo_am_unbind(b);
	am_sender_end(r, v);
	return NULL;
}

static void *am_sender(void *p)
{
	struct tp_run *r = p;
	nemo_place_id rx = am_sender_begin(r);
	uint64_t v = 0;
	uint64_t *args = xcalloc((size_t)r->batch, sizeof *args);
	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		/* One batch: nemo_am_send_batch validates once, writes the ring
		 * entries in a tight loop and publishes once (hint, kick if
		 * needed).  The values fill the array as the producer of a real
		 * stream would. */
		for (long b = 0; b < r->batch; b++)
			args[b] = v + 1 + (uint64_t)b;
		size_t sent = 0;
		int err = nemo_am_send_batch(rx, 0, args, (size_t)r->batch, 0, &sent);
		v += sent;
		if (__builtin_expect(err != 0, 0))
			fatal("%s: nemo_am_send_batch (message %llu): %s", r->name,
			      (unsigned long long)v + 1, nemo_strerror(err));
	}
	free(args);
	am_sender_end(r, v);
	return NULL;
}

/* -------------------------------------------------------------- ck-ring */

static int ck_setup(struct tp_run *r, char *why, size_t whylen)
{
	(void)why;
	(void)whylen;
	r->ring = xaligned(sizeof *r->ring);
	r->ring_buf = xaligned(CK_RING_ENTRIES * sizeof *r->ring_buf);
	ck_ring_init(r->ring, CK_RING_ENTRIES);
	atomic_store(&r->rx_ready, 1);
	return 0;
}

static void *ck_receiver(void *p)
{
	struct tp_run *r = p;
	struct tp_sink *s = &r->sink;
	for (;;) {
		/* Up to 64 messages between two checks of the clock's due
		 * count: the same work per loop as a nemo_poll that finds a
		 * batch. */
		int k = 0;
		void *v;
		while (k < 64 && ck_ring_dequeue_spsc(r->ring, r->ring_buf, &v)) {
			sink_take(s, (uint64_t)(uintptr_t)v);
			k++;
		}
		if (!k)
			nemo_cpu_relax();
		if (meter_step(r, s->count, k == 0))
			break;
	}
	atomic_store_explicit(&r->drained, 1, memory_order_release);
	return NULL;
}

static void *ck_sender(void *p)
{
	struct tp_run *r = p;
	uint64_t v = 0, full = 0;
	long batch = r->batch;
	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		for (long b = 0; b < batch; b++) {
			++v;
			if (ck_ring_enqueue_spsc(r->ring, r->ring_buf, (void *)(uintptr_t)v))
				continue;
			/* Counted once per send, as nemo's full_waits. */
			full++;
			do
				nemo_cpu_relax();
			while (!ck_ring_enqueue_spsc(r->ring, r->ring_buf, (void *)(uintptr_t)v));
		}
	}
	r->full = full;
	sender_done(r, v);
	return NULL;
}

static void ck_teardown(struct tp_run *r)
{
	free(r->ring);
	free(r->ring_buf);
}

/* --------------------------------------------------------- mechanisms */

typedef struct tp_mech {
	const char *name;
	const char *summary;
	int (*setup)(struct tp_run *r, char *why, size_t whylen);
	void *(*receiver)(void *);
	void *(*sender)(void *);
} tp_mech;

static const tp_mech tp_mechs[] = {
	{ "nemo-am", "nemo_am_send_batch of --batch messages to a place polling with nemo_poll (policy spin)",
	  am_setup, am_receiver, am_sender },
	{ "nemo-am-each", "nemo-am with one nemo_am_send per message (NEMO_MORE but the batch's last)",
	  am_setup, am_receiver, am_each_sender },
	{ "nemo-am-bound", "nemo-am with one nemo_am_send_bound per message, each published (no batching)",
	  am_setup, am_receiver, am_bound_sender },
	{ "ck-ring", "Concurrency Kit ck_ring SPSC (1024 entries), spinning consumer and producer",
	  ck_setup, ck_receiver, ck_sender },
};
#define TP_NMECHS (sizeof tp_mechs / sizeof tp_mechs[0])

static const tp_mech *tp_find(const char *name)
{
	for (size_t i = 0; i < TP_NMECHS; i++)
		if (strcmp(tp_mechs[i].name, name) == 0)
			return &tp_mechs[i];
	return NULL;
}

static bool tp_has(const char *name)
{
	return tp_find(name) != NULL;
}

static void tp_list(FILE *out)
{
	for (size_t i = 0; i < TP_NMECHS; i++)
		fprintf(out, "    %-20s [polling] %s\n", tp_mechs[i].name, tp_mechs[i].summary);
}

static void tp_help(FILE *out)
{
	fprintf(out,
"Messages per second from one sender to one polling receiver on another CPU.\n"
"The sender sends 1, 2, 3, ... as fast as it can, in batches of --batch; the\n"
"receiver sums them and the sum is checked exactly at the end.  After a\n"
"warm-up, --seconds are measured in %d intervals: each interval's rate is one\n"
"sample (msgs_per_s_stats); msgs_per_s is all messages over all the time.\n"
"Mechanisms [scenario]:\n", INTERVALS);
	tp_list(out);
}

/* The row watchdog: a receiver stuck inside a poll cannot watch itself,
 * so a third thread ends a row that runs far past its time. */
struct watchdog {
	pthread_t t;
	atomic_bool done;
	double limit_s;
	const char *what;
};

static void *watchdog_main(void *p)
{
	struct watchdog *w = p;
	struct timespec step = { 0, 50 * 1000 * 1000 };
	for (double t = 0; t < w->limit_s; t += 0.05) {
		if (atomic_load(&w->done))
			return NULL;
		nanosleep(&step, NULL);
	}
	if (!atomic_load(&w->done))
		fatal("%s: the row did not end within %.0f s; giving up", w->what, w->limit_s);
	return NULL;
}

static void row_json(const bench_opts *o, const tp_mech *m, struct tp_run *r, double kicks,
		     double full, double probe_before, double probe_after, json_t *results)
{
	const struct tp_meter *mt = &r->meter;
	int nint = mt->interval;      /* INTERVALS, fewer if interrupted */
	double rate[INTERVALS];
	char name[128], *rel = NULL;
	snprintf(name, sizeof name, "throughput-%s-polling-%d-%d-b%ld.csv", m->name, o->src, o->dst,
		 o->batch);
	FILE *f = samples_create(o, name, &rel);
	if (f)
		fprintf(f, "interval,start_s,seconds,messages,msgs_per_s\n");
	for (int i = 0; i < nint; i++) {
		double s = nemo_ticks_to_ns((int64_t)(mt->stamp[i + 1] - mt->stamp[i])) / 1e9;
		uint64_t n = mt->at[i + 1] - mt->at[i];
		rate[i] = s > 0 ? (double)n / s : 0;
		if (f)
			fprintf(f, "%d,%.6f,%.6f,%llu,%.17g\n", i,
				nemo_ticks_to_ns((int64_t)(mt->stamp[i] - mt->stamp[0])) / 1e9, s,
				(unsigned long long)n, rate[i]);
	}
	if (f && fclose(f) != 0)
		fatal("cannot write samples to %s/%s: %s", o->samples_dir, name, strerror(errno));
	double secs = nemo_ticks_to_ns((int64_t)(mt->stamp[nint] - mt->stamp[0])) / 1e9;
	uint64_t msgs = mt->at[nint] - mt->at[0];
	json_t *j = json_pack("{s:s,s:s,s:i,s:i,s:i,s:f,s:I,s:I,s:f,s:o,s:f,s:f,s:f}",
		"mechanism", m->name, "scenario", "polling", "src_cpu", o->src, "dst_cpu", o->dst,
		"trials", nint, "seconds", secs, "batch", (json_int_t)o->batch,
		"messages", (json_int_t)msgs, "msgs_per_s", secs > 0 ? (double)msgs / secs : 0.0,
		"msgs_per_s_stats", stats_object(rate, (size_t)nint),
		"kicks_per_msg", kicks, "full_waits_per_msg", full,
		"cpu_ns_per_msg", msgs ? (mt->cpu1 - mt->cpu0) / (double)msgs : 0.0);
	json_object_set_new(j, "coherence_probe_ns",
		json_pack("{s:f,s:f}", "before", probe_before, "after", probe_after));
	probe_check(o, m->name, probe_before, probe_after);
	json_object_set_new(j, "samples_file", rel ? json_string(rel) : json_null());
	free(rel);
	json_array_append_new(results, j);
}

/* Measure one mechanism; false (with why) if it cannot run here. */
static bool tp_row(const bench_opts *o, const tp_mech *m, json_t *results, char *why, size_t whylen)
{
	struct tp_run *r = xaligned(sizeof *r);
	r->batch = o->batch;
	r->name = m->name;
	meter_init(&r->meter, o->seconds);
	if (m->setup(r, why, whylen) != 0) {
		free(r);
		return false;
	}
	double probe_before = coherence_probe(o->src, o->dst, 1000);
	struct watchdog wd = { .limit_s = WARMUP_MAX_S + o->seconds * 1.5 + 2 * BENCH_STUCK_S + 10,
			       .what = m->name };
	bench_thread_start(&wd.t, watchdog_main, &wd);
	pthread_t th[2];
	thread_start_pinned(&th[0], o->dst, m->receiver, r);
	thread_start_pinned(&th[1], o->src, m->sender, r);
	progress_join(th, 2);
	atomic_store(&wd.done, true);
	pthread_join(wd.t, NULL);
	double probe_after = coherence_probe(o->src, o->dst, 1000);
	sink_verify(r);

	uint64_t sent = atomic_load(&r->sent);
	double kicks = 0, full = (double)r->full / (double)(sent ? sent : 1);
	if (r->domain) {
		nemo_domain_counters after;
		int err = nemo_domain_get_counters(r->domain, &after);
		if (err)
			fatal("nemo-am: nemo_domain_get_counters: %s", nemo_strerror(err));
		const nemo_domain_counters *b = &r->before;
		/* Over every message of the row, warm-up and drain included:
		 * the counters cannot be cut at the interval edges. */
		kicks = (double)((after.kicks_futex - b->kicks_futex) + (after.kicks_signal - b->kicks_signal)) /
			(double)(sent ? sent : 1);
		full = (double)(after.full_waits - b->full_waits) / (double)(sent ? sent : 1);
		if (after.am_sent - b->am_sent != sent || after.am_handled - b->am_handled != sent)
			warn(o, "nemo-am: the domain counters say %llu sent and %llu handled; %llu were",
			     (unsigned long long)(after.am_sent - b->am_sent),
			     (unsigned long long)(after.am_handled - b->am_handled), (unsigned long long)sent);
		err = nemo_domain_destroy(r->domain);
		if (err)
			fatal("nemo-am: nemo_domain_destroy: %s", nemo_strerror(err));
	} else {
		ck_teardown(r);
	}
	if (r->meter.interval > 0)    /* none: interrupted before the first */
		row_json(o, m, r, kicks, full, probe_before, probe_after, results);
	free(r);
	return true;
}

static int tp_run(const bench_opts *o, json_t *results, json_t *config)
{
	const tp_mech *sel[TP_NMECHS * BENCH_MAX_LIST];
	size_t n = 0;
	if (o->nmechs)
		for (int i = 0; i < o->nmechs; i++)
			sel[n++] = tp_find(o->mechs[i]);
	else
		for (size_t i = 0; i < TP_NMECHS; i++)
			sel[n++] = &tp_mechs[i];
	/* The trial options do not apply here; say what does. */
	json_object_del(config, "warmup");
	json_object_del(config, "delay_us");
	json_object_del(config, "seed");
	json_object_del(config, "scenarios");
	json_object_set_new(config, "seconds", json_real(o->seconds));
	json_object_set_new(config, "batch", json_integer(o->batch));
	json_object_set_new(config, "intervals", json_integer(INTERVALS));
	json_object_set_new(config, "ck_ring_entries", json_integer(CK_RING_ENTRIES));
	json_t *skipped = json_array();
	progress_begin(o, "throughput", (uint64_t)n * INTERVALS);
	for (size_t i = 0; i < n && !bench_interrupted(); i++) {
		char why[200];
		if (!tp_row(o, sel[i], results, why, sizeof why))
			mechanism_unavailable(o, sel[i]->name, why, skipped);
	}
	progress_end();
	json_object_set_new(config, "skipped", skipped);
	return 0;
}

const suite suite_throughput = {
	.name = "throughput",
	.summary = "messages per second, one sender to one polling receiver (nemo-am vs ck-ring)",
	.options = OPT_MECHS | OPT_SRC_DST | OPT_SECONDS | OPT_BATCH | OPT_SUMMARY,
	.default_trials = INTERVALS,
	.default_delay_min_us = 0,
	.default_delay_max_us = 0,
	.help = tp_help,
	.list = tp_list,
	.has_mechanism = tp_has,
	.run = tp_run,
};
