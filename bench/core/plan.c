/*
 * plan.c - default K values, waiter CPUs, coherence pairs and trials per
 * pair (plan.h).
 */
#include "plan.h"

#include <stdbool.h>
#include <stdlib.h>

int plan_default_ks(int P, int *ks, int max)
{
	int n = 0;
	if (P < 8) {
		for (int k = 1; k <= 8 && n < max; k *= 2)
			ks[n++] = k;
		return n;
	}
	for (int k = 1; k < P && n < max - 1; k *= 2)
		ks[n++] = k;
	if (n < max)
		ks[n++] = P;
	return n;
}

void plan_waiter_order(int n, const int *cand, const int *dist, const int *core, int src_core,
		       int *order)
{
	bool *taken = calloc((size_t)n + 1, sizeof *taken);
	int *used = calloc((size_t)n + 2, sizeof *used), nused = 0;
	if (!taken || !used)
		abort();
	if (src_core >= 0)
		used[nused++] = src_core;
	for (int k = 0; k < n; k++) {
		int best = -1;
		bool best_used = true;
		int best_d = 0;
		for (int i = 0; i < n; i++) {
			if (taken[i])
				continue;
			bool u = false;
			for (int j = 0; j < nused && core[i] >= 0; j++)
				u |= used[j] == core[i];
			/* SMT siblings of the sender last, as nemo-bench's
			 * default --dst; unknown distances after the known. */
			int d = dist[i] < 0 ? 50 : dist[i] <= 1 ? 100 + dist[i] : dist[i];
			if (best < 0 || (!u && best_used) ||
			    (u == best_used && (d < best_d || (d == best_d && cand[i] < cand[best])))) {
				best = i;
				best_used = u;
				best_d = d;
			}
		}
		taken[best] = true;
		order[k] = cand[best];
		if (!best_used && core[best] >= 0)
			used[nused++] = core[best];
	}
	free(taken);
	free(used);
}

size_t plan_pairs_max(int n, int all, int per_class)
{
	if (n < 2)
		return 1;
	return all ? (size_t)n * (size_t)(n - 1) : (size_t)n * 8 * (size_t)per_class;
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

static int pair_cmp(const void *x, const void *y)
{
	const plan_pair *a = x, *b = y;
	return a->src != b->src ? (a->src > b->src) - (a->src < b->src)
				: (a->dst > b->dst) - (a->dst < b->dst);
}

int plan_pairs(const int *cpus, int n, int all, int per_class, uint64_t seed,
	       plan_distance_fn distance, void *ctx, plan_pair *out)
{
	int np = 0;
	int *dist = calloc((size_t)n + 1, sizeof *dist), *cand = calloc((size_t)n + 1, sizeof *cand);
	if (!dist || !cand)
		abort();
	uint64_t rng = seed | 1;
	for (int a = 0; a < n; a++) {
		for (int b = 0; b < n; b++) {
			int d = b == a ? 0 : distance(cpus[a], cpus[b], ctx);
			dist[b] = b == a ? 0 : d <= 0 ? -1 : d > 6 ? 6 : d;
		}
		if (all) {
			for (int b = 0; b < n; b++)
				if (b != a)
					out[np++] = (plan_pair){ cpus[a], cpus[b], dist[b] };
			continue;
		}
		/* Classes -1 (unknown) and 1..6; 0 is the CPU itself. */
		for (int d = -1; d <= 6; d++) {
			if (d == 0)
				continue;
			int nc = 0;
			for (int k = 1; k < n; k++) {
				int b = (a + k) % n;
				if (dist[b] == d)
					cand[nc++] = b;
			}
			/* cand[0]: the first after a; the rest shuffled. */
			for (int i = nc - 1; i > 1; i--) {
				int j = 1 + (int)(xorshift(&rng) % (uint64_t)i);
				int t = cand[i];
				cand[i] = cand[j];
				cand[j] = t;
			}
			for (int i = 0; i < nc && i < per_class; i++)
				out[np++] = (plan_pair){ cpus[a], cpus[cand[i]], d };
		}
	}
	free(dist);
	free(cand);
	qsort(out, (size_t)np, sizeof *out, pair_cmp);
	return np;
}

long plan_trials_per_pair(long default_trials, int npairs, int full_pairs, long min_trials)
{
	if (npairs <= full_pairs)
		return default_trials;
	long t = (long)((double)default_trials * full_pairs / npairs);
	if (t < min_trials)
		t = min_trials;
	return t > default_trials ? default_trials : t;
}
