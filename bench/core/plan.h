/*
 * plan.h - where nemo-bench puts its threads on a machine of any size:
 * the broadcast suite's default K values and waiter CPUs, the coherence
 * suite's pairs and trials per pair.  Pure functions of the CPU list and
 * the topology (given as arrays or a callback), so that tests can check
 * them for machines of 16 to 128 CPUs that they do not run on.
 */
#ifndef NEMO_BENCH_PLAN_H
#define NEMO_BENCH_PLAN_H

#include <stddef.h>
#include <stdint.h>

/**
 * Default K values for P waiter CPUs (every CPU but the sender's): 1, 2,
 * 4, 8 as always; with P >= 8 (a machine of more than 8 CPUs), the powers
 * of 2 below P and P itself: 1,2,4,8,15 for P = 15, 1,2,4,8,16,32,63 for
 * P = 63.  Writes at most max values to ks; returns how many.
 */
int plan_default_ks(int P, int *ks, int max);

/**
 * The order in which waiters take the n candidate CPUs cand[] (the
 * sender's excluded): a core of their own first (a CPU whose core is the
 * sender's, src_core, or an earlier pick's comes after every CPU with a
 * fresh core), nearest to the sender first (dist[i]: the distance class of
 * cand[i] from the sender; < 0 unknown: after the known; the sender's SMT
 * siblings, 1, last of all), then by CPU number.  core[i]
 * < 0: unknown, never shared.  Writes the n CPUs to order.
 */
void plan_waiter_order(int n, const int *cand, const int *dist, const int *core, int src_core,
		       int *order);

/** One ordered pair of CPUs and its distance class. */
typedef struct plan_pair {
	int src, dst, distance;
} plan_pair;

/** The distance class of two CPUs (< 0 unknown). */
typedef int (*plan_distance_fn)(int cpu_a, int cpu_b, void *ctx);

/**
 * The pairs of the coherence suite among cpus[0..n) (distinct CPUs),
 * sorted by (src, dst).  all: every ordered pair, n(n-1).  Else a sample:
 * from every CPU, per_class receivers of each distance class it has (the
 * first one after it in cpus[], cyclically, and others at random from
 * seed): at most n * 8 * per_class pairs.  out must hold that many (or
 * n(n-1)); returns the count.
 */
int plan_pairs(const int *cpus, int n, int all, int per_class, uint64_t seed,
	       plan_distance_fn distance, void *ctx, plan_pair *out);

/** Most pairs plan_pairs can return. */
size_t plan_pairs_max(int n, int all, int per_class);

/**
 * Trials per pair for npairs pairs when the user did not choose: the
 * default up to full_pairs pairs, then in proportion (default *
 * full_pairs / npairs), never below min_trials (nor above the default).
 */
long plan_trials_per_pair(long default_trials, int npairs, int full_pairs, long min_trials);

#endif
