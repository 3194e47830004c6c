/*
 * mcast.c - the `multicast` suite: nemo_multicast's latency against group
 * size (Fig. 4 of Kuban, Rotta & Nolte, "Help Your Busy Neighbors"), for every topology x mechanism x static /
 * dynamic topology; the cost of a membership change; and the per-operation
 * costs the simulator takes as this machine's constants
 * (nemo-report simulate-multicast --constants measured).
 *
 * Method.  P places (the largest group size asked for): the source, place
 * index 0 on the first CPU, and P - 1 member threads spread over the
 * usable CPUs.  Rows whose places outnumber the CPUs are marked
 * "oversubscribed": their places wait (nemo_place_wait) instead of
 * polling, and what they measure is the scheduler's as much as nemo's.
 * For each size n: --rounds random groups (default 32) of the source and
 * n - 1 other places; for each group, every row in turn (interleaved) is
 * given that membership and timed over --trials multicasts (default 16):
 * the time nemo_multicast takes to return, with a no-op function.  The
 * membership changes that switch a row from one group to the next are
 * timed too (scenario "membership").
 */
#define _GNU_SOURCE
#include "bench.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MC_TOPS 3
#define MC_MECHS 3
#define MC_ROWS (MC_TOPS * MC_MECHS * 2)
#define MC_MAX_PLACES 256

static const char *const top_name[MC_TOPS] = { "tree", "flat", "diamond" };
static const char *const mech_name[MC_MECHS] = { "skip", "smack", "help" };

struct mc_row {
	char name[32];                /* flat-smack ... */
	int top, mech;
	bool dynamic;
	nemo_mcast_group *g;
	bool mem[MC_MAX_PLACES];
	double *lat, *chg;
	size_t nlat, nchg, cap_lat, cap_chg;
};

static struct {
	nemo_domain *d;
	nemo_place_id id[MC_MAX_PLACES];
	int P;
	bool oversub;
	atomic_int joined, stop;
	/* constants: the one-way stamp */
	_Atomic uint64_t stamp_seen;
} mc;

static void noop(nemo_place_id self, uint64_t arg, void *ctx)
{
	(void)self;
	(void)arg;
	(void)ctx;
}

static uint64_t echo_word;

static void stamp_handler(const nemo_am_msg *msg, void *ctx)
{
	(void)ctx;
	if (msg->arg == 1)                /* the round trip's request: answer */
		nemo_am_reply(msg, 2, 0, NULL, 0, 0);
	else
		atomic_store_explicit(&mc.stamp_seen, nemo_ticks_ordered(), memory_order_release);
}

static void echo_handler(const nemo_am_msg *msg, void *ctx)
{
	(void)msg;
	(void)ctx;
	__atomic_store_n(&echo_word, __atomic_load_n(&echo_word, __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);
}

static void *member_main(void *arg)
{
	(void)arg;
	nemo_place_id id;
	if (nemo_place_join(mc.d, NULL, &id) != 0)
		fatal("multicast: place join: %s", nemo_last_error());
	mc.id[nemo_place_index(id)] = id;
	atomic_fetch_add(&mc.joined, 1);
	while (!atomic_load_explicit(&mc.stop, memory_order_relaxed)) {
		if (mc.oversub) {
			struct timespec t;
			clock_gettime(CLOCK_MONOTONIC, &t);
			t.tv_nsec += 1000000;
			if (t.tv_nsec >= 1000000000) {
				t.tv_sec++;
				t.tv_nsec -= 1000000000;
			}
			nemo_place_wait(&t, NULL);
		} else {
			nemo_poll(NULL);
			nemo_cpu_relax();
		}
	}
	nemo_place_leave();
	return NULL;
}

static void push(double **v, size_t *n, size_t *cap, double x)
{
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 1024;
		*v = realloc(*v, *cap * sizeof **v);
		if (!*v)
			fatal("multicast: out of memory");
	}
	(*v)[(*n)++] = x;
}

/* Give row r the membership want[], timing each change. */
static void set_members(struct mc_row *r, const bool *want)
{
	for (int i = 0; i < mc.P; i++) {
		if (r->mem[i] == want[i])
			continue;
		uint64_t t0 = nemo_ticks_ordered();
		int err = want[i] ? nemo_mcast_add(r->g, mc.id[i]) : nemo_mcast_remove(r->g, mc.id[i]);
		uint64_t t1 = nemo_ticks_ordered();
		if (err)
			fatal("multicast: %s: membership change: %s", r->name, nemo_last_error());
		push(&r->chg, &r->nchg, &r->cap_chg, nemo_ticks_to_ns((int64_t)(t1 - t0)));
		r->mem[i] = want[i];
	}
}

static void emit(const bench_opts *o, struct mc_row *r, int n, json_t *results)
{
	if (r->nlat) {
		json_t *j = json_object();
		json_object_set_new(j, "mechanism", json_string(r->name));
		json_object_set_new(j, "topology", json_string(top_name[r->top]));
		json_object_set_new(j, "group", json_string(r->dynamic ? "dynamic" : "static"));
		json_object_set_new(j, "scenario", json_string(mc.oversub ? "blocking" : "polling"));
		json_object_set_new(j, "n", json_integer(n));
		json_object_set_new(j, "places", json_integer(mc.P));
		json_object_set_new(j, "oversubscribed", json_boolean(mc.oversub));
		json_object_set_new(j, "trials", json_integer((json_int_t)r->nlat));
		json_object_set_new(j, "latency_ns", stats_object(r->lat, r->nlat));
		json_array_append_new(results, j);
	}
	if (r->nchg) {
		json_t *j = json_object();
		json_object_set_new(j, "mechanism", json_string(r->name));
		json_object_set_new(j, "topology", json_string(top_name[r->top]));
		json_object_set_new(j, "group", json_string(r->dynamic ? "dynamic" : "static"));
		json_object_set_new(j, "scenario", json_string("membership"));
		json_object_set_new(j, "n", json_integer(n));
		json_object_set_new(j, "places", json_integer(mc.P));
		json_object_set_new(j, "trials", json_integer((json_int_t)r->nchg));
		json_object_set_new(j, "change_ns", stats_object(r->chg, r->nchg));
		json_array_append_new(results, j);
	}
	(void)o;
	r->nlat = r->nchg = 0;
}

static double median(double *v, size_t n)
{
	json_t *s = stats_object(v, n);
	double m = json_real_value(json_object_get(s, "p50"));
	json_decref(s);
	return m;
}

/* This machine's costs for the simulator (mcast_sim.py), measured here:
 * send (one active message, published at once: its cost to the sender),
 * latency (half a request/reply round trip waited for as a multicast
 * waits, less the send: one hop as a multicast sees it), atomic (a cache line from the source's CPU to
 * place 1's: what a gather counter last touched elsewhere costs), node
 * (one role done inline, membership tests included: below), call (what
 * nemo_multicast costs its caller around the roles: an empty group's). */
static void constants(const bench_opts *o, json_t *results, int cpu0, int cpu1)
{
	enum { REPS = 200 };
	uint32_t act = 1;
	if (nemo_action_register(mc.d, act, stamp_handler, NULL) != 0)
		fatal("multicast: %s", nemo_last_error());
	double send[REPS], lat[REPS], node[REPS], call[REPS], rtt[REPS];
	if (nemo_action_register(mc.d, 2, echo_handler, NULL) != 0)
		fatal("multicast: %s", nemo_last_error());
	nemo_place_id to = mc.id[1];
	for (int r = 0; r < REPS; r++) {
		/* One message, published at once (as a multicast's are): its
		 * cost to the sender, and when its handler starts at place 1. */
		uint64_t until = nemo_ticks() + nemo_ns_to_ticks(5000);
		while (nemo_ticks() < until)
			nemo_poll(NULL);
		atomic_store(&mc.stamp_seen, 0);
		uint64_t s = nemo_ticks_ordered();
		nemo_am_send(to, act, 0, 0);
		uint64_t s1 = nemo_ticks_ordered();
		uint64_t seen;
		while (!(seen = atomic_load_explicit(&mc.stamp_seen, memory_order_acquire)))
			nemo_cpu_relax();
		send[r] = nemo_ticks_to_ns((int64_t)(s1 - s));
		lat[r] = seen > s1 ? nemo_ticks_to_ns((int64_t)(seen - s1)) : 0;
		/* A round trip, waited for as nemo_multicast waits: two hops. */
		uint64_t old = __atomic_load_n(&echo_word, __ATOMIC_ACQUIRE);
		uint64_t r0 = nemo_ticks_ordered();
		nemo_am_send(to, act, 1, 0);
		while (__atomic_load_n(&echo_word, __ATOMIC_ACQUIRE) == old)
			nemo_place_wait_for(&echo_word, old, NULL, NULL);
		rtt[r] = nemo_ticks_to_ns((int64_t)(nemo_ticks_ordered() - r0));
	}
	/* Roles done inline: a domain of 64 place indexes of which only the
	 * source is a place, a static Flat group without members under Help
	 * (the source does all 65 roles), less an empty group's multicast
	 * (the call's own overhead). */
	nemo_domain *d2;
	nemo_domain_attr da = { .max_places = 64 };
	if (nemo_domain_create(&da, &d2) != 0)
		fatal("multicast: %s", nemo_last_error());
	nemo_place_leave();
	if (nemo_place_join(d2, NULL, NULL) != 0)
		fatal("multicast: %s", nemo_last_error());
	nemo_mcast_attr a = { .topology = NEMO_MCAST_FLAT, .mechanism = NEMO_MCAST_HELP };
	nemo_mcast_attr e = { .dynamic = true };
	nemo_mcast_group *g, *empty;
	if (nemo_mcast_group_create(d2, &a, &g) != 0 || nemo_mcast_group_create(d2, &e, &empty) != 0)
		fatal("multicast: %s", nemo_last_error());
	for (int r = 0; r < REPS; r++) {
		uint64_t t0 = nemo_ticks_ordered();
		nemo_multicast(empty, noop, NULL, 0, 0, NULL);
		uint64_t t1 = nemo_ticks_ordered();
		nemo_multicast(g, noop, NULL, 0, 0, NULL);
		uint64_t t2 = nemo_ticks_ordered();
		double full = nemo_ticks_to_ns((int64_t)(t2 - t1)), base = nemo_ticks_to_ns((int64_t)(t1 - t0));
		node[r] = (full > base ? full - base : 0) / 65;
		call[r] = base;
	}
	nemo_mcast_group_destroy(g);
	nemo_mcast_group_destroy(empty);
	nemo_place_leave();
	nemo_domain_destroy(d2);
	nemo_place_id back;
	if (nemo_place_join(mc.d, NULL, &back) != 0 || nemo_place_index(back) != 0)
		fatal("multicast: the source could not rejoin as place 0: %s", nemo_last_error());
	mc.id[0] = back;
	json_t *j = json_object();
	json_object_set_new(j, "mechanism", json_string("mcast-constants"));
	json_object_set_new(j, "scenario", json_string("constants"));
	json_object_set_new(j, "trials", json_integer(REPS));
	json_object_set_new(j, "places", json_integer(mc.P));
	json_object_set_new(j, "send", json_real(median(send, REPS)));
	/* A hop as a multicast sees it: half the round trip, less the send
	 * (the one-way figure, from a spinning reader, is kept beside it). */
	double hop = median(rtt, REPS) / 2, snd = median(send, REPS);
	json_object_set_new(j, "latency", json_real(hop > snd ? hop - snd : 0));
	json_object_set_new(j, "one_way_ns", json_real(median(lat, REPS)));
	json_object_set_new(j, "round_trip_ns", json_real(median(rtt, REPS)));
	json_object_set_new(j, "recv", json_real(0));
	json_object_set_new(j, "poll", json_real(0));
	json_object_set_new(j, "atomic", json_real(coherence_probe(cpu0, cpu1, 200)));
	json_object_set_new(j, "node", json_real(median(node, REPS)));
	json_object_set_new(j, "check", json_real(0));
	json_object_set_new(j, "action", json_real(0));
	json_object_set_new(j, "call", json_real(median(call, REPS)));
	json_array_append_new(results, j);
	(void)o;
}

static bool mc_has(const char *name)
{
	for (int t = 0; t < MC_TOPS; t++)
		for (int m = 0; m < MC_MECHS; m++) {
			char b[32];
			snprintf(b, sizeof b, "%s-%s", top_name[t], mech_name[m]);
			if (!strcmp(b, name))
				return true;
		}
	return false;
}

static void mc_list(FILE *out)
{
	for (int t = 0; t < MC_TOPS; t++)
		for (int m = 0; m < MC_MECHS; m++)
			fprintf(out, "  %s-%s\n", top_name[t], mech_name[m]);
}

static void mc_help(FILE *out)
{
	fprintf(out,
		"multicast: nemo_multicast's latency against group size n (--waiters, default 2,4,8,16,32,60\n"
		"up to the usable CPUs), for each topology-mechanism, static and dynamic; --rounds random\n"
		"groups per n (default 32), --trials multicasts per group (default 16), median.  Places\n"
		"beyond the CPUs are allowed and marked oversubscribed.  Also the cost of membership\n"
		"changes, and this machine's costs for nemo-report simulate-multicast.\n");
}

static void mc_run(const bench_opts *o, json_t *results, json_t *config)
{
	int cpus[BENCH_MAX_CPUS];
	int ncpu = o->ncpus ? o->ncpus : bench_usable_cpus(cpus, BENCH_MAX_CPUS);
	if (o->ncpus)
		memcpy(cpus, o->cpus, (size_t)o->ncpus * sizeof *cpus);
	int sizes[BENCH_MAX_LIST], nsz = 0;
	if (o->nwaiters) {
		for (int i = 0; i < o->nwaiters; i++)
			sizes[nsz++] = o->waiters[i];
	} else {
		static const int def[] = { 2, 4, 8, 16, 32, 60 };
		for (size_t i = 0; i < sizeof def / sizeof *def; i++)
			if (def[i] <= (ncpu > 2 ? ncpu : 2))
				sizes[nsz++] = def[i];
		if (ncpu > 2 && sizes[nsz - 1] != ncpu && ncpu <= 60)
			sizes[nsz++] = ncpu;
	}
	mc.P = 2;
	for (int i = 0; i < nsz; i++) {
		if (sizes[i] < 1 || sizes[i] > MC_MAX_PLACES)
			usage_error("multicast: group size %d is outside 1..%d", sizes[i], MC_MAX_PLACES);
		if (sizes[i] > mc.P)
			mc.P = sizes[i];
	}
	mc.oversub = mc.P > ncpu;
	int rounds = o->rounds > 0 ? o->rounds : 32;
	long reps = o->trials_set ? o->trials : 16;

	nemo_domain_attr da = { .max_places = (unsigned)mc.P };
	if (nemo_domain_create(&da, &mc.d) != 0)
		fatal("multicast: domain: %s", nemo_last_error());
	if (nemo_pin_self(cpus[0]) != 0)
		fatal("multicast: cannot pin to CPU %d", cpus[0]);
	nemo_place_id me;
	if (nemo_place_join(mc.d, NULL, &me) != 0 || nemo_place_index(me) != 0)
		fatal("multicast: the source is not place 0: %s", nemo_last_error());
	mc.id[0] = me;
	pthread_t *th = calloc((size_t)mc.P, sizeof *th);
	for (int i = 1; i < mc.P; i++)
		thread_start_pinned(&th[i], cpus[i % ncpu], member_main, NULL);
	while (atomic_load(&mc.joined) < mc.P - 1)
		nemo_poll(NULL);

	struct mc_row rows[MC_ROWS];
	int nrows = 0;
	for (int t = 0; t < MC_TOPS; t++)
		for (int m = 0; m < MC_MECHS; m++)
			for (int dyn = 0; dyn < 2; dyn++) {
				char name[32];
				snprintf(name, sizeof name, "%s-%s", top_name[t], mech_name[m]);
				bool want = !o->nmechs;
				for (int k = 0; k < o->nmechs; k++)
					want |= !strcmp(o->mechs[k], name);
				if (!want)
					continue;
				struct mc_row *r = &rows[nrows++];
				memset(r, 0, sizeof *r);
				snprintf(r->name, sizeof r->name, "%s", name);
				r->top = t;
				r->mech = m;
				r->dynamic = dyn;
				nemo_mcast_attr a = { .topology = (nemo_mcast_topology)t,
						      .mechanism = (nemo_mcast_mechanism)m, .dynamic = dyn };
				if (nemo_mcast_group_create(mc.d, &a, &r->g) != 0)
					fatal("multicast: %s: %s", name, nemo_last_error());
			}
	json_object_set_new(config, "places", json_integer(mc.P));
	json_object_set_new(config, "oversubscribed", json_boolean(mc.oversub));
	json_object_set_new(config, "groups_per_size", json_integer(rounds));
	json_object_set_new(config, "multicasts_per_group", json_integer(reps));
	json_object_del(config, "delay_us");
	json_object_del(config, "scenarios");

	uint64_t seed = o->seed ? o->seed : 0x2545f4914f6cdd1dull;
	progress_begin(o, "multicast", (uint64_t)nsz * (uint64_t)rounds);
	for (int s = 0; s < nsz && !bench_interrupted(); s++) {
		int n = sizes[s];
		for (int g = 0; g < rounds && !bench_interrupted(); g++) {
			bool want[MC_MAX_PLACES] = { 0 };
			want[0] = true;             /* the source is a member (the paper's root) */
			for (int k = 1; k < n;) {
				int p = 1 + (int)(rng_next(&seed) % (uint64_t)(mc.P - 1));
				if (!want[p]) {
					want[p] = true;
					k++;
				}
			}
			for (int i = 0; i < nrows; i++) {
				struct mc_row *r = &rows[i];
				set_members(r, want);
				nemo_multicast(r->g, noop, NULL, 0, 0, NULL);   /* warm-up */
				for (long k = 0; k < reps; k++) {
					uint64_t t0 = nemo_ticks_ordered();
					int err = nemo_multicast(r->g, noop, NULL, 0, 0, NULL);
					uint64_t t1 = nemo_ticks_ordered();
					if (err)
						fatal("multicast: %s: %s", r->name, nemo_last_error());
					push(&r->lat, &r->nlat, &r->cap_lat, nemo_ticks_to_ns((int64_t)(t1 - t0)));
				}
			}
			progress_add(1);
		}
		for (int i = 0; i < nrows; i++)
			emit(o, &rows[i], n, results);
	}
	progress_end();
	for (int i = 0; i < nrows; i++) {
		bool none[MC_MAX_PLACES] = { 0 };
		set_members(&rows[i], none);
		nemo_mcast_group_destroy(rows[i].g);
		free(rows[i].lat);
		free(rows[i].chg);
	}
	if (mc.P > 1 && !bench_interrupted())
		constants(o, results, cpus[0], cpus[1 % ncpu]);

	atomic_store(&mc.stop, 1);
	for (int i = 1; i < mc.P; i++)
		pthread_join(th[i], NULL);
	free(th);
	nemo_place_leave();
	nemo_domain_destroy(mc.d);
}

static void mc_print(json_t *results)
{
	printf("%-16s %-8s %5s %5s %12s %12s\n", "mechanism", "group", "n", "P", "p50 ns", "p99 ns");
	size_t i;
	json_t *r;
	json_array_foreach(results, i, r) {
		json_t *l = json_object_get(r, "latency_ns");
		if (!l)
			continue;
		printf("%-16s %-8s %5lld %5lld %12.0f %12.0f%s\n", json_string_value(json_object_get(r, "mechanism")),
		       json_string_value(json_object_get(r, "group")),
		       (long long)json_integer_value(json_object_get(r, "n")),
		       (long long)json_integer_value(json_object_get(r, "places")),
		       json_real_value(json_object_get(l, "p50")), json_real_value(json_object_get(l, "p99")),
		       json_is_true(json_object_get(r, "oversubscribed")) ? "  oversubscribed" : "");
	}
}

const suite suite_multicast = {
	.name = "multicast",
	.summary = "acknowledged multicast: latency against group size, per topology x mechanism x static/dynamic",
	.options = OPT_MECHS | OPT_WAITERS | OPT_CPUS | OPT_ROUNDS | OPT_GROUPS,
	.default_trials = 16,
	.help = mc_help,
	.list = mc_list,
	.has_mechanism = mc_has,
	.run = mc_run,
	.print = mc_print,
	.default_rounds = 32,
};
