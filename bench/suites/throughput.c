/*
 * throughput.c - suite `throughput`: how many small messages per second
 * one sender can hand to one receiver on another CPU, the receiver
 * polling.  The other suites time one wake-up at a time; this one
 * measures the steady stream, where the cost per message is the queue's
 * (enqueue, dequeue, the cache lines they move) rather than a wake-up's.
 *
 * It measures the throughput role of a mechanism (mech.h: the stream
 * role): nemo's active messages (nemo-am, nemo-am-each, nemo-am-bound)
 * and the peer baseline ck-ring, all in mechs/messaging.c.
 *
 * Method, the same for all:
 *   - The sender sends 1, 2, 3, ... as fast as it can, checking a stop
 *     flag between batches.  The receiver checks that each value is the
 *     previous one plus 1 (a single sender's messages arrive in order)
 *     and sums them; at the end the sum must be n(n+1)/2 for the n
 *     messages sent.  Any mismatch is fatal: a broken hand-off is not a
 *     measurement.
 *   - The receiver owns the clock: it reads the cycle counter after every
 *     STREAM_CHECK_EVERY messages it has taken, and on every poll that finds
 *     nothing (it is idle then, so the read is free).  So the sender's
 *     loop carries no timing at all, and an interval boundary is seen at
 *     most STREAM_CHECK_EVERY messages late; each interval's rate uses its real
 *     measured length.
 *   - From its first message, the receiver lets a warm-up pass (one
 *     interval, at most 0.2 s: page faults of the rings, caches, clock
 *     ramp-up), then measures STREAM_INTERVALS intervals of --seconds/STREAM_INTERVALS
 *     each: the messages taken in one interval over its length is one
 *     sample.  Then it raises the stop flag, takes everything still
 *     queued, and checks the sum.
 */
#define _GNU_SOURCE
#include "mech.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WARMUP_MAX_S 0.2

/* ----------------------------------------------------------- one row */

/* The receiver's clock (stream_meter's phase): warm-up, intervals, stop, drain. */
enum { PH_FIRST, PH_WARMUP, PH_MEASURE, PH_DRAIN };

static void meter_init(stream_meter *m, double seconds)
{
	double len_s = seconds / STREAM_INTERVALS;
	*m = (stream_meter){
		.phase = PH_FIRST,
		.len_ticks = nemo_ns_to_ticks(len_s * 1e9),
		.warm_ticks = nemo_ns_to_ticks((len_s < WARMUP_MAX_S ? len_s : WARMUP_MAX_S) * 1e9),
		.stuck_ticks = nemo_ns_to_ticks(BENCH_STUCK_S * 1e9),
		.seen_at = nemo_ticks(),
	};
}

/* The slow path of stream_rx_step: read the clock, move through the
 * phases.  Returns true once the row is over (stopped, and everything sent
 * taken). */
bool stream_meter_check(stream_ctx *r, uint64_t count)
{
	stream_meter *m = &r->meter;
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
		if (m->interval < STREAM_INTERVALS && !bench_stop_requested()) {
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

/* The hand-off's proof: every value 1..n once, in order. */
static void sink_verify(const stream_ctx *r)
{
	const stream_sink *s = &r->sink;
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

void stream_rx_done(stream_ctx *r)
{
	atomic_store_explicit(&r->drained, 1, memory_order_release);
}

/* The sender's end: publish the count, wait until the receiver took it
 * all (the watchdog of the receiver or of the row ends a stall). */
void stream_tx_done(stream_ctx *r, uint64_t v)
{
	atomic_store_explicit(&r->sent, v, memory_order_relaxed);
	atomic_store_explicit(&r->tx_done, 1, memory_order_release);
	wait_until_eq(&r->drained, 1, BENCH_STUCK_S + 5, r->name);
}

static bool tp_has(const char *name)
{
	return mech_find(ROLE_THROUGHPUT, name) != NULL;
}

static void tp_list(FILE *out)
{
	mech_list(ROLE_THROUGHPUT, out);
}

static void tp_help(FILE *out)
{
	fprintf(out,
"Messages per second from one sender to one polling receiver on another CPU.\n"
"The sender sends 1, 2, 3, ... as fast as it can, in batches of --batch; the\n"
"receiver sums them and the sum is checked exactly at the end.  After a\n"
"warm-up, --seconds are measured in %d intervals: each interval's rate is one\n"
"sample (msgs_per_s_stats); msgs_per_s is all messages over all the time.\n"
"Mechanisms [scenario]:\n", STREAM_INTERVALS);
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

static void row_json(const bench_opts *o, const bench_mech *m, stream_ctx *r,
		     double probe_before, double probe_after, json_t *results)
{
	const stream_meter *mt = &r->meter;
	int nint = mt->interval;      /* STREAM_INTERVALS, fewer if interrupted */
	double rate[STREAM_INTERVALS];
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
		"kicks_per_msg", r->kicks_per_msg, "full_waits_per_msg", r->full_per_msg,
		"cpu_ns_per_msg", msgs ? (mt->cpu1 - mt->cpu0) / (double)msgs : 0.0);
	json_object_set_new(j, "coherence_probe_ns",
		json_pack("{s:f,s:f}", "before", probe_before, "after", probe_after));
	probe_check(o, m->name, probe_before, probe_after);
	json_object_set_new(j, "samples_file", rel ? json_string(rel) : json_null());
	free(rel);
	json_array_append_new(results, j);
}

/* Measure one mechanism; false (with why) if it cannot run here. */
static bool tp_row(const bench_opts *o, const bench_mech *m, json_t *results, char *why, size_t whylen)
{
	const mech_stream *h = &m->throughput;
	stream_ctx *r = xaligned(sizeof *r);
	r->batch = o->batch;
	r->name = m->name;
	meter_init(&r->meter, o->seconds);
	if (h->setup && h->setup(r) != 0) {
		snprintf(why, whylen, "%s", r->why[0] ? r->why : "setup failed");
		free(r);
		return false;
	}
	double probe_before = coherence_probe(o->src, o->dst, 1000);
	struct watchdog wd = { .limit_s = WARMUP_MAX_S + o->seconds * 1.5 + 2 * BENCH_STUCK_S + 10,
			       .what = m->name };
	bench_thread_start(&wd.t, watchdog_main, &wd);
	pthread_t th[2];
	thread_start_pinned(&th[0], o->dst, h->receiver, r);
	thread_start_pinned(&th[1], o->src, h->sender, r);
	progress_join(th, 2);
	atomic_store(&wd.done, true);
	pthread_join(wd.t, NULL);
	double probe_after = coherence_probe(o->src, o->dst, 1000);
	sink_verify(r);

	uint64_t sent = atomic_load(&r->sent);
	r->full_per_msg = (double)r->full / (double)(sent ? sent : 1);
	if (h->finish)
		h->finish(o, r);
	if (r->meter.interval > 0)    /* none: interrupted before the first */
		row_json(o, m, r, probe_before, probe_after, results);
	free(r);
	return true;
}

static void tp_run(const bench_opts *o, json_t *results, json_t *config)
{
	const bench_mech *sel[BENCH_MAX_LIST];
	int n = 0;
	if (o->nmechs)
		for (int i = 0; i < o->nmechs; i++)
			sel[n++] = mech_find(ROLE_THROUGHPUT, o->mechs[i]);
	else
		n = mech_all(ROLE_THROUGHPUT, sel, BENCH_MAX_LIST);
	/* The trial options do not apply here; say what does. */
	json_object_del(config, "warmup");
	json_object_del(config, "delay_us");
	json_object_del(config, "seed");
	json_object_del(config, "scenarios");
	json_object_set_new(config, "seconds", json_real(o->seconds));
	json_object_set_new(config, "batch", json_integer(o->batch));
	json_object_set_new(config, "intervals", json_integer(STREAM_INTERVALS));
	json_object_set_new(config, "ck_ring_entries", json_integer(mech_ck_ring_entries));
	json_t *skipped = json_array();
	progress_begin(o, "throughput", (uint64_t)n * STREAM_INTERVALS);
	for (int i = 0; i < n && !bench_interrupted(); i++) {
		char why[200];
		if (!tp_row(o, sel[i], results, why, sizeof why))
			mechanism_unavailable(o, sel[i]->name, why, skipped);
	}
	progress_end();
	json_object_set_new(config, "skipped", skipped);
}

const suite suite_throughput = {
	.name = "throughput",
	.summary = "messages per second, one sender to one polling receiver (nemo-am vs ck-ring)",
	.options = OPT_MECHS | OPT_SRC_DST | OPT_SECONDS | OPT_BATCH | OPT_SUMMARY,
	.default_trials = STREAM_INTERVALS,
	.default_delay_min_us = 0,
	.default_delay_max_us = 0,
	.help = tp_help,
	.list = tp_list,
	.has_mechanism = tp_has,
	.run = tp_run,
};
