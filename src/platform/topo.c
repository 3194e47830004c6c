/*
 * topo.c - CPU topology through hwloc.
 *
 * nemo asks hwloc once and keeps a flat table: for every processing unit,
 * the logical index of its core, package, NUMA node, L2 and L3.  hwloc
 * does the discovery (sysfs, cpuid, device tree); nemo never parses those
 * itself.  The hwloc topology is released as soon as the table is built.
 */
#define _GNU_SOURCE
#include <nemo/platform.h>

#include "fail.h"

#include <errno.h>
#include <hwloc.h>
#include <stdlib.h>

struct nemo_topo {
	int ncpus;
	nemo_cpu_place *cpu;          /* sorted by OS index */
};

static int ancestor_index(hwloc_topology_t t, hwloc_obj_t pu, hwloc_obj_type_t type)
{
	hwloc_obj_t o = hwloc_get_ancestor_obj_by_type(t, type, pu);
	return o ? (int)o->logical_index : -1;
}

/* NUMA nodes are memory children in hwloc 2, not ancestors: match by cpuset. */
static int numa_index(hwloc_topology_t t, hwloc_obj_t pu)
{
	int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
	for (int i = 0; i < n; i++) {
		hwloc_obj_t node = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, (unsigned)i);
		if (node && node->cpuset && hwloc_bitmap_isset(node->cpuset, pu->os_index))
			return (int)node->logical_index;
	}
	return -1;
}

static int cmp_place(const void *a, const void *b)
{
	const nemo_cpu_place *x = a, *y = b;
	return (x->cpu > y->cpu) - (x->cpu < y->cpu);
}

int nemo_topo_load(nemo_topo **out)
{
	if (!out)
		return NEMO__FAIL(EINVAL, "out is NULL");
	*out = NULL;
	hwloc_topology_t t;
	if (hwloc_topology_init(&t) != 0)
		return NEMO__FAIL(ENOMEM, "hwloc_topology_init failed");
	if (hwloc_topology_load(t) != 0) {
		hwloc_topology_destroy(t);
		return NEMO__FAIL(EIO, "hwloc could not load this machine's topology");
	}
	int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
	nemo_topo *topo = calloc(1, sizeof *topo);
	nemo_cpu_place *cpu = n > 0 ? calloc((size_t)n, sizeof *cpu) : NULL;
	if (!topo || !cpu) {
		free(topo);
		free(cpu);
		hwloc_topology_destroy(t);
		if (n <= 0)
			return NEMO__FAIL(EIO, "hwloc found no processing units (%d)", n);
		return NEMO__FAIL(ENOMEM, "cannot allocate the places of %d CPUs", n);
	}
	for (int i = 0; i < n; i++) {
		hwloc_obj_t pu = hwloc_get_obj_by_type(t, HWLOC_OBJ_PU, (unsigned)i);
		hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_CORE, pu);
		cpu[i] = (nemo_cpu_place){
			.cpu = (int)pu->os_index,
			.core = core ? (int)core->logical_index : -1,
			.package = ancestor_index(t, pu, HWLOC_OBJ_PACKAGE),
			.numa = numa_index(t, pu),
			.l2 = ancestor_index(t, pu, HWLOC_OBJ_L2CACHE),
			.l3 = ancestor_index(t, pu, HWLOC_OBJ_L3CACHE),
			.smt_siblings = core && core->cpuset ? hwloc_bitmap_weight(core->cpuset) : 1,
		};
		if (cpu[i].smt_siblings < 1)
			cpu[i].smt_siblings = 1;
	}
	hwloc_topology_destroy(t);
	qsort(cpu, (size_t)n, sizeof *cpu, cmp_place);
	topo->ncpus = n;
	topo->cpu = cpu;
	*out = topo;
	return 0;
}

void nemo_topo_free(nemo_topo *topo)
{
	if (!topo)
		return;
	free(topo->cpu);
	free(topo);
}

int nemo_topo_cpus(const nemo_topo *topo)
{
	return topo ? topo->ncpus : 0;
}

int nemo_topo_cpu(const nemo_topo *topo, int i, nemo_cpu_place *out)
{
	if (!topo || !out)
		return NEMO__FAIL(EINVAL, "%s is NULL", !topo ? "topo" : "out");
	if (i < 0 || i >= topo->ncpus)
		return NEMO__FAIL(EINVAL, "i %d is outside 0..%d (the topology has %d CPUs)", i,
				  topo->ncpus - 1, topo->ncpus);
	*out = topo->cpu[i];
	return 0;
}

static const nemo_cpu_place *find(const nemo_topo *topo, int os_cpu)
{
	for (int i = 0; i < topo->ncpus; i++)
		if (topo->cpu[i].cpu == os_cpu)
			return &topo->cpu[i];
	return NULL;
}

static bool same(int a, int b)
{
	return a >= 0 && a == b;
}

int nemo_topo_distance(const nemo_topo *topo, int cpu_a, int cpu_b, int *out)
{
	if (!topo || !out)
		return NEMO__FAIL(EINVAL, "%s is NULL", !topo ? "topo" : "out");
	const nemo_cpu_place *a = find(topo, cpu_a), *b = find(topo, cpu_b);
	if (!a || !b)
		return NEMO__FAIL(EINVAL, "%s %d is not a CPU of the topology (OS numbers, %d CPUs)",
				  !a ? "cpu_a" : "cpu_b", !a ? cpu_a : cpu_b, topo->ncpus);
	if (a == b)
		*out = 0;
	else if (same(a->core, b->core))
		*out = 1;
	else if (same(a->l2, b->l2))
		*out = 2;
	else if (same(a->l3, b->l3))
		*out = 3;
	else if (same(a->package, b->package))
		*out = 4;
	else if (same(a->numa, b->numa))
		*out = 5;
	else
		*out = 6;
	return 0;
}
