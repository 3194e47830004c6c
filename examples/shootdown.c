/*
 * shootdown.c - a software TLB shootdown with nemo_multicast: worker
 * threads cache entries of a shared table; before the updater reuses an
 * entry, it retires it, multicasts "drop entry e" to every thread that may
 * cache it (the group), and reuses the entry only once the multicast
 * returned, i.e. once every member has dropped it.  Threads join and leave
 * the group as they start and stop caching.
 *
 * The check: every use of a cached entry compares the cached version with
 * the table's.  Between the retirement and the reuse a thread may still
 * use its copy (as a CPU may use a TLB entry until the shootdown reaches
 * it); after the reuse, a cached copy would be stale: the program counts
 * such uses and fails if there is one.
 *
 *   shootdown [WORKERS [UPDATES]]     default 3 and 20000
 */
#define _POSIX_C_SOURCE 200809L
#include <nemo/nemo.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define ENTRIES 64

/* An entry's version: even = live, odd = retired (being shot down). */
static struct {
	_Atomic uint64_t version;
	_Atomic uint64_t value;           /* always version * 7 while live */
} table[ENTRIES];

struct cache {                            /* one worker's "TLB" */
	bool valid[ENTRIES];
	uint64_t version[ENTRIES], value[ENTRIES];
	nemo_place_id self;
	uint64_t uses, stale, drops;
};

static nemo_domain *dom;
static nemo_mcast_group *group;
static atomic_bool stop;
static atomic_int ready;

/* Run by nemo_multicast in each member's own place. */
static void drop_entry(nemo_place_id self, uint64_t e, void *ctx)
{
	(void)self;
	(void)ctx;
	struct cache *c = nemo_place_context();
	c->valid[e] = false;
	c->drops++;
}

static void drop_all(struct cache *c)
{
	for (int e = 0; e < ENTRIES; e++)
		c->valid[e] = false;
}

static void *worker(void *arg)
{
	struct cache *c = arg;
	nemo_place_attr pa = { .context = c };
	if (nemo_place_join(dom, &pa, &c->self) != 0) {
		fprintf(stderr, "join: %s\n", nemo_last_error());
		exit(1);
	}
	unsigned seed = (unsigned)c->self;
	bool member = false;
	atomic_fetch_add(&ready, 1);
	while (!atomic_load(&stop)) {
		if (!member) {                    /* start caching: join the group first */
			if (nemo_mcast_add(group, c->self) != 0) {
				fprintf(stderr, "add: %s\n", nemo_last_error());
				exit(1);
			}
			member = true;
		}
		for (int i = 0; i < 200; i++) {
			int e = rand_r(&seed) % ENTRIES;
			if (c->valid[e]) {        /* a use of the cached copy */
				uint64_t now = atomic_load(&table[e].version);
				c->uses++;
				if (now >= c->version[e] + 2)   /* reused while we held it */
					c->stale++;
			} else {                  /* a miss: load it unless it is retired */
				uint64_t v = atomic_load(&table[e].version);
				if (v & 1)
					continue;
				uint64_t val = atomic_load(&table[e].value);
				if (atomic_load(&table[e].version) != v)
					continue;
				c->valid[e] = true;
				c->version[e] = v;
				c->value[e] = val;
			}
			if (i % 8 == 0)
				nemo_poll(NULL);  /* where shootdowns reach us */
		}
		/* Idle a little, as a thread between requests: a shootdown
		 * wakes the place (it polls first, then sleeps). */
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		t.tv_nsec += 20000;
		if (t.tv_nsec >= 1000000000) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000;
		}
		nemo_place_wait(&t, NULL);
		if (rand_r(&seed) % 32 == 0) {    /* stop caching for a while */
			drop_all(c);
			if (nemo_mcast_remove(group, c->self) != 0) {
				fprintf(stderr, "remove: %s\n", nemo_last_error());
				exit(1);
			}
			member = false;
			nemo_poll(NULL);
		}
	}
	if (member)
		nemo_mcast_remove(group, c->self);
	nemo_place_leave();
	return NULL;
}

int main(int argc, char **argv)
{
	int workers = argc > 1 ? atoi(argv[1]) : 3;
	long updates = argc > 2 ? atol(argv[2]) : 20000;
	if (workers < 1 || workers > 60 || updates < 1) {
		fprintf(stderr, "usage: shootdown [WORKERS 1..60 [UPDATES]]\n");
		return 2;
	}
	nemo_domain_attr da = { .max_places = 64 };
	if (nemo_domain_create(&da, &dom) != 0 || nemo_place_join(dom, NULL, NULL) != 0) {
		fprintf(stderr, "setup: %s\n", nemo_last_error());
		return 1;
	}
	nemo_mcast_attr ma = { .topology = NEMO_MCAST_TREE, .mechanism = NEMO_MCAST_SKIP };
	if (nemo_mcast_group_create(dom, &ma, &group) != 0) {
		fprintf(stderr, "group: %s\n", nemo_last_error());
		return 1;
	}
	for (int e = 0; e < ENTRIES; e++)
		atomic_store(&table[e].value, 0);

	struct cache *caches = calloc((size_t)workers, sizeof *caches);
	pthread_t *t = calloc((size_t)workers, sizeof *t);
	if (!caches || !t)
		return 1;
	for (int i = 0; i < workers; i++)
		pthread_create(&t[i], NULL, worker, &caches[i]);
	while (atomic_load(&ready) < workers)
		nemo_poll(NULL);

	unsigned seed = 1;
	for (long u = 0; u < updates; u++) {
		int e = rand_r(&seed) % ENTRIES;
		uint64_t v = atomic_load(&table[e].version);
		atomic_store(&table[e].version, v + 1);                   /* retire */
		if (nemo_multicast(group, drop_entry, NULL, (uint64_t)e, 0, NULL) != 0) {
			fprintf(stderr, "multicast: %s\n", nemo_last_error());
			return 1;
		}
		atomic_store(&table[e].value, (v + 2) * 7);               /* reuse */
		atomic_store(&table[e].version, v + 2);
	}
	atomic_store(&stop, true);
	for (int i = 0; i < workers; i++)
		pthread_join(t[i], NULL);

	uint64_t uses = 0, stale = 0, drops = 0;
	for (int i = 0; i < workers; i++) {
		struct cache *c = &caches[i];
		uses += c->uses;
		stale += c->stale;
		drops += c->drops;
	}
	nemo_mcast_counters mc;
	nemo_mcast_get_counters(group, &mc);
	printf("shootdown: %d workers, %ld updates, %llu cached uses, %llu drops by multicast, "
	       "%llu membership changes, %llu stale uses\n",
	       workers, updates, (unsigned long long)uses, (unsigned long long)drops,
	       (unsigned long long)mc.changes, (unsigned long long)stale);
	nemo_mcast_group_destroy(group);
	nemo_place_leave();
	nemo_domain_destroy(dom);
	free(caches);
	free(t);
	return stale ? 1 : 0;
}
