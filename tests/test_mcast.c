/*
 * test_mcast.c - acknowledged multicast (nemo/mcast.h): exactly once and
 * completion after every run, for every topology x mechanism x static /
 * dynamic, with random groups; then the same under membership churn
 * concurrent with the multicasts; asynchronous handles; every error.
 * Checked under ThreadSanitizer too (label concurrency).  No timing.
 *
 * Places: NW worker threads, each a place that waits in nemo_place_wait
 * until told to stop, plus the main thread (the source, a place too, and
 * sometimes a member).  The multicast's function counts runs per place
 * index; after each multicast the counts must be exactly 1 for every
 * member that stayed a member throughout, 0 for places that never were
 * members during it, and at most 1 for places whose membership changed.
 */
#define _GNU_SOURCE
#include <nemo/nemo.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NW 7                  /* worker places */
#define MAXP 16               /* domain max_places: 8 present, 8 never joined */

static int failures;
#define CHECK(c)                                                                   \
	do {                                                                       \
		if (!(c)) {                                                        \
			fprintf(stderr, "%s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #c, \
				nemo_last_error());                                \
			failures++;                                                \
		}                                                                  \
	} while (0)

static nemo_domain *dom;
static nemo_place_id ids[MAXP];       /* by index; NONE if no place there */
static atomic_int stop;
static atomic_int joined;
static _Atomic unsigned runs[MAXP];
static _Atomic uint64_t last_arg[MAXP];
static unsigned sanitized_scale = 1;

static void *worker(void *arg)
{
	(void)arg;
	nemo_place_id id;
	if (nemo_place_join(dom, NULL, &id) != 0) {
		fprintf(stderr, "join failed: %s\n", nemo_last_error());
		exit(1);
	}
	ids[nemo_place_index(id)] = id;
	atomic_fetch_add(&joined, 1);
	struct timespec t;
	while (!atomic_load(&stop)) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		t.tv_nsec += 2000000;
		if (t.tv_nsec >= 1000000000) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000;
		}
		nemo_place_wait(&t, NULL);
	}
	nemo_place_leave();
	return NULL;
}

static void fn(nemo_place_id self, uint64_t arg, void *ctx)
{
	CHECK(ctx == &runs);
	CHECK(nemo_place_self() == self);       /* runs in the member's own place */
	unsigned i = nemo_place_index(self);
	atomic_fetch_add(&runs[i], 1);
	atomic_store(&last_arg[i], arg);
}

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

static const char *tname[] = { "tree", "flat", "diamond" };
static const char *mname[] = { "skip", "smack", "help" };

/* Random groups on one group object; every multicast checked. */
static void run_config(nemo_mcast_topology top, nemo_mcast_mechanism mech, bool dynamic, unsigned fanout)
{
	nemo_mcast_attr a = { .topology = top, .mechanism = mech, .dynamic = dynamic, .fanout = fanout };
	nemo_mcast_group *g;
	if (nemo_mcast_group_create(dom, &a, &g) != 0) {
		CHECK(!"group create");
		return;
	}
	bool mem[MAXP] = { 0 };
	unsigned rounds = 60 / sanitized_scale;
	for (unsigned r = 0; r < rounds; r++) {
		/* A new random group: flip each present place with p = 1/2. */
		for (unsigned i = 0; i < MAXP; i++) {
			if (ids[i] == NEMO_PLACE_NONE || !(rnd() & 1))
				continue;
			if (mem[i])
				CHECK(nemo_mcast_remove(g, ids[i]) == 0);
			else
				CHECK(nemo_mcast_add(g, ids[i]) == 0);
			mem[i] = !mem[i];
		}
		size_t n = 0, want = 0;
		for (unsigned i = 0; i < MAXP; i++)
			want += mem[i];
		CHECK(nemo_mcast_members(g, NULL, 0, &n) == 0 && n == want);
		for (unsigned i = 0; i < MAXP; i++)
			atomic_store(&runs[i], 0);
		uint64_t arg = rnd();
		if (r % 3 == 2) {
			nemo_mcast *h = NULL;
			CHECK(nemo_multicast(g, fn, &runs, arg, NEMO_MCAST_ASYNC, &h) == 0);
			int rc;
			while ((rc = nemo_mcast_test(h)) == EBUSY)
				;
			CHECK(rc == 0);
		} else {
			CHECK(nemo_multicast(g, fn, &runs, arg, 0, NULL) == 0);
		}
		for (unsigned i = 0; i < MAXP; i++) {
			unsigned k = atomic_load(&runs[i]);
			if (k != (mem[i] ? 1u : 0u)) {
				fprintf(stderr, "%s-%s %s fanout %u round %u: place index %u (%s) ran %u times\n",
					tname[top], mname[mech], dynamic ? "dynamic" : "static", fanout, r, i,
					mem[i] ? "member" : "non-member", k);
				failures++;
			}
			if (mem[i] && k == 1)
				CHECK(atomic_load(&last_arg[i]) == arg);
		}
	}
	nemo_mcast_counters c;
	CHECK(nemo_mcast_get_counters(g, &c) == 0);
	CHECK(c.multicasts == rounds);
	if (mech == NEMO_MCAST_SMACK && !dynamic)
		CHECK(c.helped == 0 && c.skipped == 0);
	if (mech == NEMO_MCAST_SKIP && !dynamic && top != NEMO_MCAST_FLAT)
		CHECK(c.skipped > 0);     /* 8 never-joined indexes: whole subgroups */
	if (dynamic)
		CHECK(c.rebuilds > 0 && c.skipped == 0);
	CHECK(nemo_mcast_group_destroy(g) == 0);
}

/* ------------------------------------------------------------- churn */

struct churn {
	nemo_mcast_group *g;
	atomic_int go;
	/* Volatile indexes flip membership; epoch counts changes per index,
	 * bumped before and after each change (odd: changing). */
	_Atomic unsigned epoch[MAXP];
	bool vol[MAXP];
};

static void *churner(void *arg)
{
	struct churn *c = arg;
	bool mem[MAXP] = { 0 };
	while (atomic_load(&c->go)) {
		unsigned i = (unsigned)(rnd() % MAXP);
		if (!c->vol[i] || ids[i] == NEMO_PLACE_NONE)
			continue;
		atomic_fetch_add(&c->epoch[i], 1);
		int rc = mem[i] ? nemo_mcast_remove(c->g, ids[i]) : nemo_mcast_add(c->g, ids[i]);
		CHECK(rc == 0);
		mem[i] = !mem[i];
		atomic_fetch_add(&c->epoch[i], 1);
	}
	for (unsigned i = 0; i < MAXP; i++)
		if (mem[i])
			CHECK(nemo_mcast_remove(c->g, ids[i]) == 0);
	return NULL;
}

static void run_churn(nemo_mcast_topology top, nemo_mcast_mechanism mech, bool dynamic)
{
	struct churn c;
	memset(&c, 0, sizeof c);
	nemo_mcast_attr a = { .topology = top, .mechanism = mech, .dynamic = dynamic };
	if (nemo_mcast_group_create(dom, &a, &c.g) != 0) {
		CHECK(!"group create");
		return;
	}
	/* Stable members: even indexes present; volatile: odd ones. */
	bool stable[MAXP] = { 0 };
	for (unsigned i = 0; i < MAXP; i++) {
		if (ids[i] == NEMO_PLACE_NONE)
			continue;
		if (i % 2 == 0) {
			stable[i] = true;
			CHECK(nemo_mcast_add(c.g, ids[i]) == 0);
		} else {
			c.vol[i] = true;
		}
	}
	atomic_store(&c.go, 1);
	pthread_t t;
	pthread_create(&t, NULL, churner, &c);
	unsigned rounds = 300 / sanitized_scale;
	for (unsigned r = 0; r < rounds; r++) {
		unsigned e0[MAXP];
		for (unsigned i = 0; i < MAXP; i++) {
			atomic_store(&runs[i], 0);
			e0[i] = atomic_load(&c.epoch[i]);
		}
		CHECK(nemo_multicast(c.g, fn, &runs, r, 0, NULL) == 0);
		for (unsigned i = 0; i < MAXP; i++) {
			unsigned k = atomic_load(&runs[i]), e1 = atomic_load(&c.epoch[i]);
			bool bad;
			if (stable[i])
				bad = k != 1;
			else if (e0[i] == e1 && e0[i] % 4 == 0)
				bad = k != 0;         /* a non-member throughout */
			else if (e0[i] == e1 && e0[i] % 4 == 2)
				bad = k != 1;         /* a member throughout */
			else
				bad = k > 1;
			if (bad) {
				fprintf(stderr, "churn %s-%s %s round %u: index %u (%s) ran %u times\n", tname[top],
					mname[mech], dynamic ? "dynamic" : "static", r, i,
					stable[i] ? "stable member" : "volatile", k);
				failures++;
			}
		}
	}
	atomic_store(&c.go, 0);
	pthread_join(t, NULL);
	for (unsigned i = 0; i < MAXP; i++)
		if (stable[i])
			CHECK(nemo_mcast_remove(c.g, ids[i]) == 0);
	CHECK(nemo_mcast_group_destroy(c.g) == 0);
}

/* ---------------------------------------------------- service places */

/* Service mode: members that never poll (they block on a condvar until
 * the end), pinned to the CPUs; their function runs on the service place
 * of their CPU, once each. */
static pthread_mutex_t svc_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t svc_cv = PTHREAD_COND_INITIALIZER;
static bool svc_done;
static nemo_domain *svc_dom;
static nemo_place_id svc_ids[MAXP];
static atomic_int svc_joined;
static _Atomic unsigned svc_runs[MAXP];

static void *sleeper(void *arg)
{
	long i = (long)arg;
	nemo_place_attr pa = { .flags = NEMO_PLACE_PIN, .cpu = (int)(i % 2) };
	cpu_set_t set;
	sched_getaffinity(0, sizeof set, &set);
	if (!CPU_ISSET(pa.cpu, &set))
		pa.flags = 0;                 /* one CPU: unpinned, added by itself */
	nemo_place_id id;
	if (nemo_place_join(svc_dom, &pa, &id) != 0) {
		fprintf(stderr, "sleeper join: %s\n", nemo_last_error());
		exit(1);
	}
	svc_ids[i] = id;
	atomic_fetch_add(&svc_joined, 1);
	pthread_mutex_lock(&svc_lock);
	while (!svc_done)
		pthread_cond_wait(&svc_cv, &svc_lock);     /* never polls */
	pthread_mutex_unlock(&svc_lock);
	nemo_place_leave();
	return NULL;
}

static void svc_fn(nemo_place_id self, uint64_t arg, void *ctx)
{
	(void)arg;
	(void)ctx;
	CHECK(nemo_place_self() != self);          /* on a service place, not the member */
	atomic_fetch_add(&svc_runs[nemo_place_index(self)], 1);
}

static void test_service(void)
{
	enum { NS = 5 };
	nemo_domain_attr da = { .max_places = MAXP };
	CHECK(nemo_domain_create(&da, &svc_dom) == 0);
	nemo_place_id me;
	CHECK(nemo_place_leave() == 0);
	CHECK(nemo_place_join(svc_dom, NULL, &me) == 0);
	pthread_t t[NS];
	for (long i = 0; i < NS; i++)
		pthread_create(&t[i], NULL, sleeper, (void *)i);
	while (atomic_load(&svc_joined) < NS)
		;
	for (int top = 0; top < 3; top++)
		for (int mech = 0; mech < 3; mech++)
			for (int dyn = 0; dyn < 2; dyn++) {
				nemo_mcast_attr a = { .topology = (nemo_mcast_topology)top,
						      .mechanism = (nemo_mcast_mechanism)mech, .dynamic = dyn,
						      .service = true };
				nemo_mcast_group *g;
				if (nemo_mcast_group_create(svc_dom, &a, &g) != 0) {
					CHECK(!"service group create");
					continue;
				}
				bool mem[NS] = { 0 };
				for (unsigned r = 0; r < 20 / sanitized_scale + 2; r++) {
					for (int i = 0; i < NS; i++) {
						if (!(rnd() & 1))
							continue;
						int rc = mem[i] ? nemo_mcast_remove(g, svc_ids[i]) : nemo_mcast_add(g, svc_ids[i]);
						if (rc == EINVAL && !mem[i])
							continue;     /* unpinned on a one-CPU machine */
						CHECK(rc == 0);
						mem[i] = !mem[i];
					}
					for (int i = 0; i < MAXP; i++)
						atomic_store(&svc_runs[i], 0);
					CHECK(nemo_multicast(g, svc_fn, NULL, r, 0, NULL) == 0);
					for (int i = 0; i < NS; i++) {
						unsigned k = atomic_load(&svc_runs[nemo_place_index(svc_ids[i])]);
						if (k != (mem[i] ? 1u : 0u)) {
							fprintf(stderr, "service %s-%s %s round %u: member %d ran %u times\n",
								tname[top], mname[mech], dyn ? "dynamic" : "static", r, i, k);
							failures++;
						}
					}
				}
				for (int i = 0; i < NS; i++)
					if (mem[i])
						CHECK(nemo_mcast_remove(g, svc_ids[i]) == 0);
				/* A service place cannot be a member. */
				nemo_place_id all[MAXP];
				size_t n = 0;
				CHECK(nemo_domain_places(svc_dom, all, MAXP, &n) == 0);
				unsigned nsvc = 0;
				for (size_t k = 0; k < n; k++) {
					bool app = all[k] == me;
					for (int i = 0; i < NS; i++)
						app |= all[k] == svc_ids[i];
					if (!app) {
						nsvc++;
						CHECK(nemo_mcast_add(g, all[k]) == EINVAL);
					}
				}
				CHECK(nsvc >= 1);
				CHECK(nemo_mcast_group_destroy(g) == 0);
			}
	pthread_mutex_lock(&svc_lock);
	svc_done = true;
	pthread_cond_broadcast(&svc_cv);
	pthread_mutex_unlock(&svc_lock);
	for (int i = 0; i < NS; i++)
		pthread_join(t[i], NULL);
	CHECK(nemo_place_leave() == 0);
	CHECK(nemo_domain_destroy(svc_dom) == 0);
	/* back to the main domain for the rest */
	CHECK(nemo_place_join(dom, NULL, &me) == 0);
	ids[nemo_place_index(me)] = me;
	/* No room for the service places: ENOSPC, and nothing left behind. */
	nemo_domain *tiny;
	nemo_domain_attr ta = { .max_places = 1 };
	CHECK(nemo_domain_create(&ta, &tiny) == 0);
	nemo_mcast_attr sa = { .service = true };
	nemo_mcast_group *g;
	CHECK(nemo_mcast_group_create(tiny, &sa, &g) == ENOSPC);
	CHECK(nemo_domain_destroy(tiny) == 0);
}

/* ------------------------------------------------------------- errors */

static void *not_a_place(void *arg)
{
	nemo_mcast_group *g = arg;
	CHECK(nemo_multicast(g, fn, &runs, 0, 0, NULL) == ENOTCONN);
	return NULL;
}

static void in_handler(const nemo_am_msg *msg, void *ctx)
{
	(void)msg;
	nemo_mcast_group *g = ctx;
	CHECK(nemo_multicast(g, fn, &runs, 0, 0, NULL) == EDEADLK);
}

static void test_errors(void)
{
	nemo_mcast_group *g = NULL;
	CHECK(nemo_mcast_group_create(NULL, NULL, &g) == EINVAL);
	CHECK(nemo_mcast_group_create(dom, NULL, NULL) == EINVAL);
	nemo_mcast_attr bad = { .topology = (nemo_mcast_topology)7 };
	CHECK(nemo_mcast_group_create(dom, &bad, &g) == EINVAL);
	bad = (nemo_mcast_attr){ .mechanism = (nemo_mcast_mechanism)9 };
	CHECK(nemo_mcast_group_create(dom, &bad, &g) == EINVAL);
	bad = (nemo_mcast_attr){ .fanout = 1 };
	CHECK(nemo_mcast_group_create(dom, &bad, &g) == EINVAL);
	bad = (nemo_mcast_attr){ .fanout = NEMO_MCAST_FANOUT_MAX + 1 };
	CHECK(nemo_mcast_group_create(dom, &bad, &g) == EINVAL);
	CHECK(nemo_action_register(dom, 5, in_handler, NULL) == 0);
	bad = (nemo_mcast_attr){ .action = 5 };
	CHECK(nemo_mcast_group_create(dom, &bad, &g) == EEXIST);

	CHECK(nemo_mcast_group_create(dom, NULL, &g) == 0);
	CHECK(nemo_mcast_add(NULL, ids[0]) == EINVAL);
	CHECK(nemo_mcast_add(g, NEMO_PLACE_NONE) == ESRCH);
	CHECK(nemo_mcast_add(g, (nemo_place_id)MAXP + 3) == ESRCH);       /* never joined */
	CHECK(nemo_mcast_add(g, ids[1] + ((nemo_place_id)1 << 16)) == ESRCH); /* wrong generation */
	CHECK(nemo_mcast_add(g, ids[1]) == 0);
	CHECK(nemo_mcast_add(g, ids[1]) == EALREADY);
	CHECK(nemo_mcast_remove(g, ids[2]) == ENOENT);
	CHECK(nemo_mcast_remove(NULL, ids[2]) == EINVAL);
	CHECK(nemo_mcast_members(g, NULL, 3, NULL) == EINVAL);
	CHECK(nemo_multicast(NULL, fn, NULL, 0, 0, NULL) == EINVAL);
	CHECK(nemo_multicast(g, NULL, NULL, 0, 0, NULL) == EINVAL);
	CHECK(nemo_multicast(g, fn, &runs, 0, 0x80, NULL) == EINVAL);
	CHECK(nemo_multicast(g, fn, &runs, 0, NEMO_MCAST_ASYNC, NULL) == EINVAL);
	pthread_t t;
	pthread_create(&t, NULL, not_a_place, g);
	pthread_join(t, NULL);
	/* A multicast from a handler must not wait. */
	nemo_mcast_group *g2;
	CHECK(nemo_mcast_group_create(dom, NULL, &g2) == 0);
	/* Re-register action 5's context: a fresh action for this check. */
	CHECK(nemo_action_register(dom, 6, in_handler, g2) == 0);
	CHECK(nemo_am_send(nemo_place_self(), 6, 0, 0) == 0);
	CHECK(nemo_poll(NULL) == 0);
	/* Destroy with a multicast in flight: EBUSY. */
	for (unsigned i = 0; i < MAXP; i++)
		atomic_store(&runs[i], 0);
	nemo_mcast *h = NULL;
	CHECK(nemo_multicast(g, fn, &runs, 1, NEMO_MCAST_ASYNC, &h) == 0);
	int rc = nemo_mcast_group_destroy(g);
	if (rc != EBUSY && rc != 0)
		CHECK(!"destroy: EBUSY or (already done) 0 expected");
	if (rc == EBUSY) {
		CHECK(nemo_mcast_wait(NULL, NULL) == EINVAL);
		struct timespec badt = { 0, 2000000000L };
		CHECK(nemo_mcast_wait(h, &badt) == EINVAL);
		CHECK(nemo_mcast_wait(h, NULL) == 0);
		CHECK(atomic_load(&runs[1]) == 1);
		CHECK(nemo_mcast_remove(g, ids[1]) == 0);
		CHECK(nemo_mcast_group_destroy(g) == 0);
	}
	CHECK(nemo_mcast_test(NULL) == EINVAL);
	CHECK(nemo_mcast_group_destroy(NULL) == EINVAL);
	CHECK(nemo_mcast_group_destroy(g2) == 0);
	/* An empty group completes at once. */
	nemo_mcast_attr dyn = { .dynamic = true };
	CHECK(nemo_mcast_group_create(dom, &dyn, &g) == 0);
	CHECK(nemo_multicast(g, fn, &runs, 0, 0, NULL) == 0);
	CHECK(nemo_mcast_group_destroy(g) == 0);
}

int main(void)
{
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
	sanitized_scale = 5;
#endif
	nemo_domain_attr da = { .max_places = MAXP };
	if (nemo_domain_create(&da, &dom) != 0) {
		fprintf(stderr, "domain: %s\n", nemo_last_error());
		return 1;
	}
	for (unsigned i = 0; i < MAXP; i++)
		ids[i] = NEMO_PLACE_NONE;
	nemo_place_id me;
	if (nemo_place_join(dom, NULL, &me) != 0)
		return 1;
	ids[nemo_place_index(me)] = me;
	pthread_t w[NW];
	for (int i = 0; i < NW; i++)
		pthread_create(&w[i], NULL, worker, NULL);
	while (atomic_load(&joined) < NW)
		nemo_poll(NULL);

	for (int top = 0; top < 3; top++)
		for (int mech = 0; mech < 3; mech++)
			for (int dyn = 0; dyn < 2; dyn++)
				run_config((nemo_mcast_topology)top, (nemo_mcast_mechanism)mech, dyn, 0);
	run_config(NEMO_MCAST_TREE, NEMO_MCAST_SKIP, false, 3);
	run_config(NEMO_MCAST_DIAMOND, NEMO_MCAST_HELP, false, 4);
	run_config(NEMO_MCAST_TREE, NEMO_MCAST_SMACK, true, 16);
	for (int top = 0; top < 3; top++)
		for (int mech = 0; mech < 3; mech++)
			run_churn((nemo_mcast_topology)top, (nemo_mcast_mechanism)mech, top == 1 && mech == 1);
	run_churn(NEMO_MCAST_TREE, NEMO_MCAST_HELP, true);
	test_errors();
	test_service();

	atomic_store(&stop, 1);
	for (int i = 0; i < NW; i++)
		pthread_join(w[i], NULL);
	nemo_place_leave();
	if (failures) {
		fprintf(stderr, "test_mcast: %d failures\n", failures);
		return 1;
	}
	printf("test_mcast: ok (every topology x mechanism x static/dynamic, churn, service places, errors)\n");
	return 0;
}
