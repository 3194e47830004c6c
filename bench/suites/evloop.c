/*
 * evloop.c - suite `event-loop`: a receiving place that lives in an
 * event loop, flooded by two senders, and the two ways a program waits
 * for it without nemo's loop.
 *
 * Rows (mechanism x scenario), interleaved in --rounds rounds: each
 * round runs every row once, for --seconds, in turn, so all rows span
 * the same stretch of time.
 *
 *   nemo-place-fd    the receiver is a place in an epoll loop: epoll_wait
 *                    on nemo_place_fd, then nemo_poll (nemo/domain.h,
 *                    "Event loops"); the senders nemo_am_send to it
 *   nemo-place-wait  the receiver calls nemo_place_wait (default policy)
 *   eventfd-ring     no nemo: each sender pushes into its own SPSC ring
 *                    (spsc.h, as many slots as a nemo ring by default)
 *                    and writes an eventfd after every push; the receiver
 *                    epoll_waits on the eventfd, reads it, drains both
 *                    rings.  The obvious design: it never loses a
 *                    wake-up, and pays a write(2) per message for it
 *
 * Scenarios: `flood` (the senders send as fast as they can) and `paused`
 * (each pauses PAUSE_US, busy, after every PAUSE_EVERY messages, so the
 * receiver runs dry and waits again).  Every setting is the default: a
 * domain with default attributes, places with the default wait policy.
 *
 * What a row counts (the receiver's loop is the unit):
 *   iterations   returns of the receiver's wait: epoll_wait returns that
 *                reported the descriptor, nemo_place_wait returns
 *   empty        iterations that handled nothing (a wake-up for a
 *                message an earlier iteration had already taken)
 *   wakeups      the receiver's voluntary context switches: it slept in
 *                the kernel and was woken
 *   kicks        wake-ups made by anyone: nemo's counters (kicks_fd +
 *                kicks_futex + kicks_signal, summed over the domain's
 *                places: the receiver's kicks of senders that waited
 *                for room are in them too; kicks_fd alone are the
 *                senders' kicks of an event loop's receiver), or the
 *                eventfd writes
 * Every message carries its sender and sequence number: the receiver
 * checks that each sender's arrive in order, none lost; a broken
 * hand-off ends the run with an error rather than giving a row.
 */
#define _GNU_SOURCE
#include "bench.h"
#include "spsc.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define SENDERS 2
#define PAUSE_US 50.0
#define PAUSE_EVERY 100
#define RING_SLOTS 256u                 /* nemo_domain_attr.ring_slots' default */

/* A message: bit 63 the sender's last (its arg the count it sent), bits
 * 48-62 the sender, bits 0-47 the sequence number from 1. */
#define MSG_FINAL (1ull << 63)
#define MSG_SHIFT 48
#define MSG_SEQ ((1ull << MSG_SHIFT) - 1)

enum { EL_FD, EL_WAIT, EL_EVENTFD, EL_COUNT };
enum { SC_FLOOD, SC_PAUSED, ELSC_COUNT };

typedef struct el_mech {
	const char *name;
	const char *what;
} el_mech;

static const el_mech el_mechs[EL_COUNT] = {
	[EL_FD] = { .name = "nemo-place-fd", .what = "epoll_wait on nemo_place_fd, then nemo_poll" },
	[EL_WAIT] = { .name = "nemo-place-wait", .what = "nemo_place_wait, the default policy" },
	[EL_EVENTFD] = { .name = "eventfd-ring", .what = "an SPSC ring per sender, an eventfd write per push, "
						       "epoll_wait + read + drain" },
};

static const char *const el_scen[ELSC_COUNT] = { "flood", "paused" };

/* One measurement: one row, one round. */
struct el_run {
	int mech, scen;
	nemo_domain *d;
	int efd;
	spsc_ring *ring[SENDERS];
	_Alignas(BENCH_CACHELINE) atomic_uint ready;   /* threads set up */
	atomic_bool go, stop;
	_Atomic nemo_place_id rx_id;
	uint64_t t_go;
	struct {
		_Alignas(BENCH_CACHELINE) uint64_t sent, full, writes;
	} tx[SENDERS];
	/* The receiver's own lines. */
	_Alignas(BENCH_CACHELINE) uint64_t got, finals, last[SENDERS], bad_value, final_at[SENDERS];
	unsigned bad_sender;
	uint64_t iterations, empty, t_end;
	long vcsw0, vcsw1;
	double cpu0, cpu1;
};

/* One round's figures of a row. */
struct el_sample {
	double seconds, cpu_ns;
	uint64_t messages, iterations, empty, wakeups, kicks, full;
	nemo_domain_counters c;
};

/* The receiver takes message v (a handler or a ring's drain). */
static void take(struct el_run *r, uint64_t v)
{
	unsigned s = (unsigned)((v & ~MSG_FINAL) >> MSG_SHIFT);
	uint64_t seq = v & MSG_SEQ;
	if (s >= SENDERS) {
		r->bad_value = v ? v : 1;
		r->bad_sender = s;
		return;
	}
	if (v & MSG_FINAL) {
		r->final_at[s] = seq;
		r->finals++;
		return;
	}
	if (seq != r->last[s] + 1 && !r->bad_value) {
		r->bad_value = v;
		r->bad_sender = s;
	}
	r->last[s] = seq;
	r->got++;
}

static void el_handler(const nemo_am_msg *m, void *ctx)
{
	take(ctx, m->arg);
}

static bool is_nemo(int mech)
{
	return mech != EL_EVENTFD;
}

static void wait_ready(struct el_run *r, unsigned want)
{
	wait_until_eq(&r->ready, want, BENCH_STUCK_S, "event-loop: threads starting");
}

/* ------------------------------------------------------------ receiver */

static int epoll_on(int fd)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
		fatal("event-loop: epoll: %s", strerror(errno));
	return ep;
}

/* One wait of the loop: false when it timed out (1 s) with nothing. */
static bool rx_wait(struct el_run *r, int ep, unsigned *handled)
{
	struct epoll_event ev;
	int n, rc;
	*handled = 0;
	switch (r->mech) {
	case EL_FD:
		n = epoll_wait(ep, &ev, 1, 1000);
		if (n < 0 && errno != EINTR)
			fatal("event-loop: epoll_wait: %s", strerror(errno));
		if (n <= 0)
			return false;
		if ((rc = nemo_poll(handled)) != 0)
			fatal("event-loop: nemo_poll: %s", nemo_strerror(rc));
		return true;
	case EL_WAIT: {
		struct timespec dl;
		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_sec += 1;
		rc = nemo_place_wait(&dl, handled);
		if (rc == ETIMEDOUT)
			return false;
		if (rc)
			fatal("event-loop: nemo_place_wait: %s", nemo_strerror(rc));
		return true;
	}
	default: {
		n = epoll_wait(ep, &ev, 1, 1000);
		if (n < 0 && errno != EINTR)
			fatal("event-loop: epoll_wait: %s", strerror(errno));
		if (n <= 0)
			return false;
		uint64_t cnt;
		if (read(r->efd, &cnt, sizeof cnt) < 0 && errno != EAGAIN)
			fatal("event-loop: read(eventfd): %s", strerror(errno));
		uint64_t v;
		for (int s = 0; s < SENDERS; s++)
			while (spsc_pop(r->ring[s], &v)) {
				take(r, v);
				++*handled;
			}
		return true;
	}
	}
}

static void *el_receiver(void *p)
{
	struct el_run *r = p;
	int ep = -1, fd = -1, rc;
	nemo_place_id id = NEMO_PLACE_NONE;
	if (is_nemo(r->mech) && (rc = nemo_place_join(r->d, NULL, &id)) != 0)
		fatal("event-loop: nemo_place_join (receiver): %s", nemo_strerror(rc));
	if (r->mech == EL_FD && (rc = nemo_place_fd(&fd)) != 0)
		fatal("event-loop: nemo_place_fd: %s", nemo_strerror(rc));
	if (r->mech == EL_EVENTFD)
		fd = r->efd;
	if (fd >= 0)
		ep = epoll_on(fd);
	long total;
	thread_ctx_switches(&r->vcsw0, &total);
	r->cpu0 = thread_cpu_ns();
	atomic_store_explicit(&r->rx_id, id, memory_order_release);
	atomic_fetch_add(&r->ready, 1);
	uint64_t stuck = nemo_ns_to_ticks(BENCH_STUCK_S * 1e9), seen = nemo_ticks();
	while (r->finals < SENDERS) {
		unsigned h;
		if (!rx_wait(r, ep, &h)) {
			if (nemo_ticks() - seen > stuck)
				fatal("event-loop %s %s: no message for %.0f s after %llu; giving up",
				      el_mechs[r->mech].name, el_scen[r->scen], BENCH_STUCK_S,
				      (unsigned long long)r->got);
			continue;
		}
		r->iterations++;
		if (h == 0)
			r->empty++;
		else
			seen = nemo_ticks();
	}
	r->t_end = nemo_ticks();
	r->cpu1 = thread_cpu_ns();
	thread_ctx_switches(&r->vcsw1, &total);
	if (ep >= 0)
		close(ep);
	if (is_nemo(r->mech) && (rc = nemo_place_leave()) != 0)
		fatal("event-loop: nemo_place_leave (receiver): %s", nemo_strerror(rc));
	return NULL;
}

/* -------------------------------------------------------------- senders */

struct el_tx {
	struct el_run *r;
	unsigned idx;
};

static void el_send(struct el_run *r, unsigned idx, nemo_place_id dest, uint64_t v)
{
	if (is_nemo(r->mech)) {
		int rc = nemo_am_send(dest, 0, v, 0);
		if (rc)
			fatal("event-loop: nemo_am_send: %s", nemo_strerror(rc));
		return;
	}
	if (!spsc_push(r->ring[idx], v)) {
		r->tx[idx].full++;
		while (!spsc_push(r->ring[idx], v))
			sched_yield();
	}
	uint64_t one = 1;
	if (write(r->efd, &one, sizeof one) != (ssize_t)sizeof one)
		fatal("event-loop: write(eventfd): %s", strerror(errno));
	r->tx[idx].writes++;
}

static void *el_sender(void *p)
{
	struct el_tx *t = p;
	struct el_run *r = t->r;
	nemo_place_id dest = NEMO_PLACE_NONE;
	int rc;
	if (is_nemo(r->mech)) {
		if ((rc = nemo_place_join(r->d, NULL, NULL)) != 0)
			fatal("event-loop: nemo_place_join (sender): %s", nemo_strerror(rc));
		while ((dest = atomic_load_explicit(&r->rx_id, memory_order_acquire)) == NEMO_PLACE_NONE)
			nemo_cpu_relax();
	}
	atomic_fetch_add(&r->ready, 1);
	while (!atomic_load_explicit(&r->go, memory_order_acquire))
		nemo_cpu_relax();
	uint64_t seq = 0, who = (uint64_t)t->idx << MSG_SHIFT;
	bool paused = r->scen == SC_PAUSED;
	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		el_send(r, t->idx, dest, who | ++seq);
		if (paused && seq % PAUSE_EVERY == 0)
			nemo_spin_ns(PAUSE_US * 1000.0);
	}
	el_send(r, t->idx, dest, MSG_FINAL | who | seq);
	r->tx[t->idx].sent = seq;
	if (is_nemo(r->mech) && (rc = nemo_place_leave()) != 0)
		fatal("event-loop: nemo_place_leave (sender): %s", nemo_strerror(rc));
	return NULL;
}

/* ------------------------------------------------------------ one round */

/* Sleep s seconds in steps, redrawing the progress bar; an interrupt
 * (main thread: bench_interrupted) cuts it short. */
static void el_sleep(double s)
{
	uint64_t end = nemo_ticks() + nemo_ns_to_ticks(s * 1e9);
	while (nemo_ticks() < end && !bench_interrupted()) {
		struct timespec step = { 0, 10 * 1000 * 1000 };
		double left = nemo_ticks_to_ns((int64_t)(end - nemo_ticks()));
		if (left < 1e7)
			step.tv_nsec = left > 0 ? (long)left : 0;
		nanosleep(&step, NULL);
		progress_tick();
	}
}

static void el_measure(const bench_opts *o, int mech, int scen, const int cpus[1 + SENDERS],
		       struct el_sample *out)
{
	struct el_run *r = xaligned(sizeof *r);
	r->mech = mech;
	r->scen = scen;
	r->efd = -1;
	atomic_init(&r->rx_id, NEMO_PLACE_NONE);
	int rc;
	if (is_nemo(mech)) {
		if ((rc = nemo_domain_create(NULL, &r->d)) != 0 ||
		    (rc = nemo_action_register(r->d, 0, el_handler, r)) != 0)
			fatal("event-loop: domain: %s", nemo_strerror(rc));
	} else {
		r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (r->efd < 0)
			fatal("event-loop: eventfd: %s", strerror(errno));
		for (int s = 0; s < SENDERS; s++) {
			r->ring[s] = xaligned(spsc_size(RING_SLOTS));
			spsc_init(r->ring[s], RING_SLOTS);
		}
	}
	pthread_t th[1 + SENDERS];
	struct el_tx tx[SENDERS];
	thread_start_pinned(&th[0], cpus[0], el_receiver, r);
	wait_ready(r, 1);
	for (unsigned s = 0; s < SENDERS; s++) {
		tx[s] = (struct el_tx){ r, s };
		thread_start_pinned(&th[1 + s], cpus[1 + s], el_sender, &tx[s]);
	}
	wait_ready(r, 1 + SENDERS);
	r->t_go = nemo_ticks();
	atomic_store_explicit(&r->go, true, memory_order_release);
	el_sleep(o->seconds);
	atomic_store_explicit(&r->stop, true, memory_order_relaxed);
	for (int i = 0; i < 1 + SENDERS; i++)
		pthread_join(th[i], NULL);

	const char *name = el_mechs[mech].name;
	if (r->bad_value)
		fatal("event-loop %s: sender %u's message %#llx came out of order (lost or duplicated)", name,
		      r->bad_sender, (unsigned long long)r->bad_value);
	uint64_t sent = 0;
	for (int s = 0; s < SENDERS; s++) {
		if (r->last[s] != r->tx[s].sent || r->final_at[s] != r->tx[s].sent)
			fatal("event-loop %s: sender %d sent %llu messages, the receiver took %llu", name, s,
			      (unsigned long long)r->tx[s].sent, (unsigned long long)r->last[s]);
		sent += r->tx[s].sent;
	}
	*out = (struct el_sample){
		.seconds = nemo_ticks_to_ns((int64_t)(r->t_end - r->t_go)) / 1e9,
		.cpu_ns = r->cpu1 - r->cpu0, .messages = sent, .iterations = r->iterations,
		.empty = r->empty, .wakeups = (uint64_t)(r->vcsw1 - r->vcsw0),
	};
	if (is_nemo(mech)) {
		if ((rc = nemo_domain_get_counters(r->d, &out->c)) != 0 || (rc = nemo_domain_destroy(r->d)) != 0)
			fatal("event-loop: domain: %s", nemo_strerror(rc));
		out->kicks = out->c.kicks_fd + out->c.kicks_futex + out->c.kicks_signal;
		out->full = out->c.full_waits;
	} else {
		for (int s = 0; s < SENDERS; s++) {
			out->kicks += r->tx[s].writes;
			out->full += r->tx[s].full;
			free(r->ring[s]);
		}
		close(r->efd);
	}
	free(r);
}

/* ------------------------------------------------------------ the rows */

struct el_row {
	int mech, scen;
	int n;                        /* rounds measured */
	struct el_sample sum;
	double *rate;                 /* per round, messages/s */
	struct el_sample *round;      /* per round */
};

static json_t *counters_json(const nemo_domain_counters *c)
{
	return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "kicks_fd", (json_int_t)c->kicks_fd,
			 "kicks_futex", (json_int_t)c->kicks_futex, "kicks_signal", (json_int_t)c->kicks_signal,
			 "kicks_avoided", (json_int_t)c->kicks_avoided, "kicks_skipped", (json_int_t)c->kicks_skipped,
			 "sleeps", (json_int_t)c->sleeps, "full_waits", (json_int_t)c->full_waits,
			 "room_kicks", (json_int_t)c->room_kicks);
}

static double per(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

static void el_emit(const bench_opts *o, struct el_row *w, const int cpus[1 + SENDERS], bool oversub,
		    json_t *results)
{
	const char *name = el_mechs[w->mech].name, *scen = el_scen[w->scen];
	char file[128], *rel = NULL;
	snprintf(file, sizeof file, "event-loop-%s-%s.csv", name, scen);
	FILE *f = samples_create(o, file, &rel);
	if (f) {
		fprintf(f, "round,seconds,messages,msgs_per_s,iterations,empty_iterations,wakeups,kicks,full_waits\n");
		for (int i = 0; i < w->n; i++) {
			const struct el_sample *s = &w->round[i];
			fprintf(f, "%d,%.9f,%llu,%.17g,%llu,%llu,%llu,%llu,%llu\n", i, s->seconds,
				(unsigned long long)s->messages, w->rate[i], (unsigned long long)s->iterations,
				(unsigned long long)s->empty, (unsigned long long)s->wakeups,
				(unsigned long long)s->kicks, (unsigned long long)s->full);
		}
		if (fclose(f) != 0)
			fatal("cannot write samples to %s/%s: %s", o->samples_dir, file, strerror(errno));
	}
	const struct el_sample *s = &w->sum;
	json_t *src = json_array();
	for (int i = 0; i < SENDERS; i++)
		json_array_append_new(src, json_integer(cpus[1 + i]));
	double *rates = xcalloc((size_t)w->n, sizeof(double));
	memcpy(rates, w->rate, (size_t)w->n * sizeof(double));
	json_t *j = json_pack("{s:s,s:s,s:i,s:o,s:i,s:b,s:f,s:i,s:i,s:f,s:I,s:f,s:o}",
		"mechanism", name, "scenario", scen, "dst_cpu", cpus[0], "src_cpus", src,
		"senders", SENDERS, "oversubscribed", oversub,
		"pause_us", w->scen == SC_PAUSED ? PAUSE_US : 0.0,
		"pause_every", w->scen == SC_PAUSED ? PAUSE_EVERY : 0, "trials", w->n,
		"seconds", s->seconds, "messages", (json_int_t)s->messages,
		"msgs_per_s", s->seconds > 0 ? (double)s->messages / s->seconds : 0.0,
		"msgs_per_s_stats", stats_object(rates, (size_t)w->n));
	json_object_update_new(j, json_pack("{s:I,s:I,s:f,s:f,s:I,s:f,s:I,s:f,s:I,s:f,s:f}",
		"iterations", (json_int_t)s->iterations, "empty_iterations", (json_int_t)s->empty,
		"empty_share", per(s->empty, s->iterations), "msgs_per_iteration", per(s->messages, s->iterations),
		"wakeups", (json_int_t)s->wakeups, "wakeups_per_msg", per(s->wakeups, s->messages),
		"kicks", (json_int_t)s->kicks, "kicks_per_msg", per(s->kicks, s->messages),
		"full_waits", (json_int_t)s->full, "full_waits_per_msg", per(s->full, s->messages),
		"cpu_ns_per_msg", s->messages ? s->cpu_ns / (double)s->messages : 0.0));
	json_object_set_new(j, "nemo_counters", is_nemo(w->mech) ? counters_json(&s->c) : json_null());
	json_object_set_new(j, "samples_file", rel ? json_string(rel) : json_null());
	free(rel);
	free(rates);
	json_array_append_new(results, j);
}

static void add_counters(nemo_domain_counters *a, const nemo_domain_counters *b)
{
	a->kicks_fd += b->kicks_fd;
	a->kicks_futex += b->kicks_futex;
	a->kicks_signal += b->kicks_signal;
	a->kicks_avoided += b->kicks_avoided;
	a->kicks_skipped += b->kicks_skipped;
	a->sleeps += b->sleeps;
	a->full_waits += b->full_waits;
	a->room_kicks += b->room_kicks;
}

static int el_find(const char *name)
{
	for (int i = 0; i < EL_COUNT; i++)
		if (!strcmp(el_mechs[i].name, name))
			return i;
	return -1;
}

/* The receiver on dst; the senders on src and on the next CPU that is
 * neither (src again where there is none).  True if two share a CPU. */
static bool el_cpus(const bench_opts *o, int cpus[1 + SENDERS])
{
	int all[BENCH_MAX_CPUS];
	int n = bench_usable_cpus(all, BENCH_MAX_CPUS);
	cpus[0] = o->dst;
	cpus[1] = o->src;
	cpus[2] = o->src;
	for (int i = 0; i < n; i++)
		if (all[i] != o->dst && all[i] != o->src) {
			cpus[2] = all[i];
			break;
		}
	return cpus[2] == cpus[1];
}

static void el_run_suite(const bench_opts *o, json_t *results, json_t *config)
{
	int sel[EL_COUNT], n = 0;
	if (o->nmechs)
		for (int i = 0; i < o->nmechs; i++)
			sel[n++] = el_find(o->mechs[i]);
	else
		for (int i = 0; i < EL_COUNT; i++)
			sel[n++] = i;
	int cpus[1 + SENDERS];
	bool oversub = el_cpus(o, cpus);
	json_object_del(config, "warmup");
	json_object_del(config, "delay_us");
	json_object_del(config, "seed");
	json_object_set_new(config, "scenarios", json_pack("[s,s]", el_scen[0], el_scen[1]));
	json_object_set_new(config, "seconds", json_real(o->seconds));
	json_object_set_new(config, "rounds", json_integer(o->rounds));
	json_object_set_new(config, "trials", json_integer(o->rounds));
	json_object_set_new(config, "senders", json_integer(SENDERS));
	json_object_set_new(config, "pause_us", json_real(PAUSE_US));
	json_object_set_new(config, "pause_every", json_integer(PAUSE_EVERY));
	json_object_set_new(config, "ring_slots", json_integer(RING_SLOTS));
	json_object_set_new(config, "cpus", json_pack("[i,i,i]", cpus[0], cpus[1], cpus[2]));
	json_object_set_new(config, "skipped", json_array());
	int nrows = n * ELSC_COUNT;
	struct el_row *rows = xcalloc((size_t)nrows, sizeof *rows);
	for (int i = 0; i < nrows; i++) {
		rows[i].mech = sel[i / ELSC_COUNT];
		rows[i].scen = i % ELSC_COUNT;
		rows[i].rate = xcalloc((size_t)o->rounds, sizeof(double));
		rows[i].round = xcalloc((size_t)o->rounds, sizeof(struct el_sample));
	}
	progress_begin(o, "event-loop", (uint64_t)nrows * (uint64_t)o->rounds);
	for (int k = 0; k < o->rounds && !bench_interrupted(); k++) {
		/* Odd rounds run the rows in reverse: no row always follows the same one. */
		for (int j = 0; j < nrows && !bench_interrupted(); j++) {
			struct el_row *w = &rows[k % 2 ? nrows - 1 - j : j];
			struct el_sample s;
			el_measure(o, w->mech, w->scen, cpus, &s);
			w->round[w->n] = s;
			w->rate[w->n] = s.seconds > 0 ? (double)s.messages / s.seconds : 0.0;
			w->n++;
			w->sum.seconds += s.seconds;
			w->sum.cpu_ns += s.cpu_ns;
			w->sum.messages += s.messages;
			w->sum.iterations += s.iterations;
			w->sum.empty += s.empty;
			w->sum.wakeups += s.wakeups;
			w->sum.kicks += s.kicks;
			w->sum.full += s.full;
			add_counters(&w->sum.c, &s.c);
			progress_add(1);
		}
	}
	progress_end();
	for (int i = 0; i < nrows; i++) {
		if (rows[i].n)
			el_emit(o, &rows[i], cpus, oversub, results);
		free(rows[i].rate);
		free(rows[i].round);
	}
	free(rows);
}

static bool el_has(const char *name)
{
	return el_find(name) >= 0;
}

static void el_list(FILE *out)
{
	for (int i = 0; i < EL_COUNT; i++)
		fprintf(out, "    %-20s [flood, paused] %s\n", el_mechs[i].name, el_mechs[i].what);
}

static void el_help(FILE *out)
{
	fprintf(out,
"%d senders flood one receiver: the receiver on --dst, the senders on --src and\n"
"the next CPU.  Scenario flood sends as fast as it can, paused pauses %.0f us\n"
"every %d messages.  Per row: messages/s, the receiver's loop iterations, the\n"
"share of them that handled nothing, its wake-ups (voluntary context switches)\n"
"and the senders' kicks per message.  Default settings throughout.\n"
"Mechanisms [scenarios]:\n", SENDERS, PAUSE_US, PAUSE_EVERY);
	el_list(out);
}

static void el_print(json_t *results)
{
	printf("%-16s %-7s %10s %9s %9s %9s %9s %9s\n", "mechanism", "scenario", "Mmsg/s", "msg/iter",
	       "empty", "wake/msg", "kick/msg", "full/msg");
	size_t i;
	json_t *r;
	json_array_foreach(results, i, r) {
		printf("%-16s %-7s %10.3f %9.2f %8.1f%% %9.4f %9.4f %9.4f\n",
		       json_string_value(json_object_get(r, "mechanism")),
		       json_string_value(json_object_get(r, "scenario")),
		       json_number_value(json_object_get(r, "msgs_per_s")) / 1e6,
		       json_number_value(json_object_get(r, "msgs_per_iteration")),
		       json_number_value(json_object_get(r, "empty_share")) * 100,
		       json_number_value(json_object_get(r, "wakeups_per_msg")),
		       json_number_value(json_object_get(r, "kicks_per_msg")),
		       json_number_value(json_object_get(r, "full_waits_per_msg")));
	}
}

const suite suite_event_loop = {
	.name = "event-loop",
	.summary = "a place in an epoll loop (nemo_place_fd) against nemo_place_wait and an eventfd hand-off",
	.options = OPT_MECHS | OPT_SRC_DST | OPT_SECONDS | OPT_ROUNDS,
	.default_trials = 5,
	.help = el_help,
	.list = el_list,
	.has_mechanism = el_has,
	.run = el_run_suite,
	.print = el_print,
	.default_seconds = 0.2,
	.default_rounds = 5,
};
