/*
 * test_plan.c - nemo-bench's plans for machines this one is not: default
 * K values, waiter CPUs, coherence pairs and trials per pair (bench/core/plan.c)
 * on synthetic topologies of 16, 64 and 128 CPUs.
 */
#include "check.h"
#include "plan.h"

#include <stdbool.h>
#include <string.h>

/* A synthetic machine: per CPU its core, L2, L3, package and NUMA node. */
typedef struct machine {
	int n;
	int core[256], l2[256], l3[256], pkg[256], numa[256];
} machine;

/* nemo_topo_distance's classes. */
static int mdist(int a, int b, void *ctx)
{
	const machine *m = ctx;
	if (a == b)
		return 0;
	if (m->core[a] == m->core[b])
		return 1;
	if (m->l2[a] == m->l2[b])
		return 2;
	if (m->l3[a] == m->l3[b])
		return 3;
	if (m->pkg[a] == m->pkg[b])
		return 4;
	if (m->numa[a] == m->numa[b])
		return 5;
	return 6;
}

/* cores x smt CPUs; `siblings_adjacent`: CPU 2c and 2c+1 share core c
 * (else CPU c and c + cores, Linux's usual Intel numbering); l3_cores
 * cores per L3, pkg_cores per package (= NUMA node). */
static void make(machine *m, int cores, int smt, bool siblings_adjacent, int l3_cores, int pkg_cores)
{
	m->n = cores * smt;
	for (int i = 0; i < m->n; i++) {
		int c = siblings_adjacent ? i / smt : i % cores;
		m->core[i] = c;
		m->l2[i] = c;
		m->l3[i] = c / l3_cores;
		m->pkg[i] = c / pkg_cores;
		m->numa[i] = m->pkg[i];
	}
}

/* The waiter order from sender src on m. */
static int order(const machine *m, int src, int *out)
{
	int cand[256], dist[256], core[256], n = 0;
	for (int i = 0; i < m->n; i++) {
		if (i == src)
			continue;
		cand[n] = i;
		dist[n] = mdist(src, i, (void *)m);
		core[n] = m->core[i];
		n++;
	}
	plan_waiter_order(n, cand, dist, core, m->core[src], out);
	return n;
}

static bool ks_are(int P, const int *want, int nwant)
{
	int ks[64];
	int n = plan_default_ks(P, ks, 64);
	if (n != nwant)
		return false;
	return memcmp(ks, want, sizeof *ks * (size_t)n) == 0;
}

static void test_default_ks(void)
{
	CHECK(ks_are(1, (int[]){ 1, 2, 4, 8 }, 4));      /* 2 CPUs: as always */
	CHECK(ks_are(7, (int[]){ 1, 2, 4, 8 }, 4));      /* 8 CPUs */
	CHECK(ks_are(8, (int[]){ 1, 2, 4, 8 }, 4));      /* 9 CPUs */
	CHECK(ks_are(15, (int[]){ 1, 2, 4, 8, 15 }, 5));
	CHECK(ks_are(63, (int[]){ 1, 2, 4, 8, 16, 32, 63 }, 7));
	CHECK(ks_are(64, (int[]){ 1, 2, 4, 8, 16, 32, 64 }, 7));
	CHECK(ks_are(127, (int[]){ 1, 2, 4, 8, 16, 32, 64, 127 }, 8));
	int ks[3];
	CHECK_EQ_INT(plan_default_ks(127, ks, 3), 3);    /* room for 3: the last is P */
	CHECK_EQ_INT(ks[2], 127);
}

static void test_waiter_order(void)
{
	machine m;
	int o[256];
	/* 8 cores x 2, Intel numbering: CPU c and c+8 share core c. */
	make(&m, 8, 2, false, 8, 8);
	CHECK_EQ_INT(order(&m, 0, o), 15);
	for (int i = 0; i < 7; i++)
		CHECK_EQ_INT(o[i], i + 1);      /* a core each */
	for (int i = 7; i < 14; i++)
		CHECK_EQ_INT(o[i], i + 2);      /* then the waiters' siblings */
	CHECK_EQ_INT(o[14], 8);                  /* the sender's sibling last */
	/* Siblings adjacent (CPU 2c, 2c+1 share core c). */
	make(&m, 8, 2, true, 8, 8);
	order(&m, 0, o);
	for (int i = 0; i < 7; i++)
		CHECK_EQ_INT(o[i], 2 * (i + 1));
	for (int i = 7; i < 14; i++)
		CHECK_EQ_INT(o[i], 2 * (i - 7) + 3);
	CHECK_EQ_INT(o[14], 1);
	/* 64 CPUs: 2 packages x 16 cores x 2, an L3 per 8 cores.  A core
	 * each, nearest first: own L3, own package, the other package. */
	make(&m, 32, 2, false, 8, 16);
	CHECK_EQ_INT(order(&m, 0, o), 63);
	for (int i = 0; i < 31; i++)
		CHECK_EQ_INT(o[i], i + 1);
	CHECK_EQ_INT(mdist(0, o[6], &m), 3);
	CHECK_EQ_INT(mdist(0, o[7], &m), 4);
	CHECK_EQ_INT(mdist(0, o[15], &m), 6);
	CHECK_EQ_INT(o[62], 32);
	/* Every CPU once. */
	bool seen[256] = { false };
	for (int i = 0; i < 63; i++) {
		CHECK(!seen[o[i]] && o[i] != 0);
		seen[o[i]] = true;
	}
	/* From a sender in the middle: its own L3 first. */
	order(&m, 20, o);
	for (int i = 0; i < 7; i++)
		CHECK_EQ_INT(mdist(20, o[i], &m), 3);
	/* Unknown topology: by number. */
	int cand[5] = { 5, 3, 1, 4, 2 }, dist[5] = { -1, -1, -1, -1, -1 }, core[5] = { -1, -1, -1, -1, -1 };
	plan_waiter_order(5, cand, dist, core, -1, o);
	for (int i = 0; i < 5; i++)
		CHECK_EQ_INT(o[i], i + 1);
}

static void check_pairs(const machine *m, const plan_pair *p, int np)
{
	for (int i = 0; i < np; i++) {
		CHECK(p[i].src != p[i].dst);
		CHECK(p[i].src >= 0 && p[i].src < m->n && p[i].dst >= 0 && p[i].dst < m->n);
		CHECK_EQ_INT(p[i].distance, mdist(p[i].src, p[i].dst, (void *)m));
		if (i)    /* sorted, no duplicates */
			CHECK(p[i - 1].src < p[i].src ||
			      (p[i - 1].src == p[i].src && p[i - 1].dst < p[i].dst));
	}
}

static void test_pairs(void)
{
	static machine m;
	static plan_pair p[128 * 127];
	int cpus[256];
	/* 64 CPUs: every pair. */
	make(&m, 32, 2, false, 8, 16);
	for (int i = 0; i < m.n; i++)
		cpus[i] = i;
	CHECK_EQ_INT(plan_pairs_max(64, 1, 2), 4032);
	int np = plan_pairs(cpus, 64, 1, 2, 42, mdist, &m, p);
	CHECK_EQ_INT(np, 4032);
	check_pairs(&m, p, np);
	/* 128 CPUs: 4 packages x 16 cores x 2, sampled. */
	make(&m, 64, 2, false, 8, 16);
	for (int i = 0; i < m.n; i++)
		cpus[i] = i;
	size_t max = plan_pairs_max(128, 0, 2);
	CHECK(max <= sizeof p / sizeof p[0]);
	np = plan_pairs(cpus, 128, 0, 2, 42, mdist, &m, p);
	CHECK(np > 0 && (size_t)np <= max);
	check_pairs(&m, p, np);
	/* From every CPU, two receivers of each class it has (each class
	 * here has at least two): 1 SMT sibling, 3, 4 and 6. */
	for (int a = 0; a < 128; a++) {
		int per[8] = { 0 };
		for (int i = 0; i < np; i++)
			if (p[i].src == a)
				per[p[i].distance + 1]++;
		CHECK_EQ_INT(per[1 + 1], 1);    /* one sibling only */
		CHECK_EQ_INT(per[3 + 1], 2);
		CHECK_EQ_INT(per[4 + 1], 2);
		CHECK_EQ_INT(per[6 + 1], 2);
		CHECK_EQ_INT(per[2 + 1] + per[5 + 1] + per[0], 0);
	}
	CHECK_EQ_INT(np, 128 * 7);
	/* The same seed, the same sample. */
	static plan_pair q[128 * 127];
	CHECK_EQ_INT(plan_pairs(cpus, 128, 0, 2, 42, mdist, &m, q), np);
	CHECK(memcmp(p, q, sizeof *p * (size_t)np) == 0);
}

static void test_trials(void)
{
	CHECK_EQ_INT(plan_trials_per_pair(2000, 2, 240, 200), 2000);
	CHECK_EQ_INT(plan_trials_per_pair(2000, 240, 240, 200), 2000);   /* 16 CPUs */
	CHECK_EQ_INT(plan_trials_per_pair(2000, 992, 240, 200), 483);    /* 32 CPUs */
	CHECK_EQ_INT(plan_trials_per_pair(2000, 4032, 240, 200), 200);   /* 64 CPUs */
	CHECK_EQ_INT(plan_trials_per_pair(100, 4032, 240, 200), 100);    /* never above the default */
}

int main(void)
{
	test_default_ks();
	test_waiter_order();
	test_pairs();
	test_trials();
	return check_exit("test_plan");
}
