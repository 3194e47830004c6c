/*
 * topo.c - CPU topology through hwloc.
 *
 * nemo asks hwloc once and keeps a flat table: for every processing unit,
 * the logical index of its core, package, NUMA node, L2 and L3.  hwloc
 * does the discovery (sysfs, cpuid, device tree); nemo never parses those
 * itself.  The hwloc topology is released as soon as the table is built.
 *
 * hwloc is loaded with dlopen at the first nemo_topo_load, not linked:
 * the library's waits and messages never need it, and libnemo-preload.so,
 * which links libnemo, must not bring hwloc and its dependencies (libudev,
 * libxml2...) into every program it is preloaded into.  Only the eight
 * exported functions below are used; hwloc's inline helpers (by type) are
 * written here over their by-depth counterparts.  Without hwloc,
 * nemo_topo_load fails with ENOSYS and says so in nemo_last_error().
 */
#define _GNU_SOURCE
#include <nemo/platform.h>

#include "fail.h"

#include <dlfcn.h>
#include <errno.h>
#include <hwloc.h>
#include <pthread.h>
#include <stdlib.h>

static struct {
	int (*topology_init)(hwloc_topology_t *);
	int (*topology_load)(hwloc_topology_t);
	void (*topology_destroy)(hwloc_topology_t);
	int (*get_type_depth)(hwloc_topology_t, hwloc_obj_type_t);
	unsigned (*get_nbobjs_by_depth)(hwloc_topology_t, int);
	hwloc_obj_t (*get_obj_by_depth)(hwloc_topology_t, int, unsigned);
	int (*bitmap_isset)(hwloc_const_bitmap_t, unsigned);
	int (*bitmap_weight)(hwloc_const_bitmap_t);
} hw;
static int hw_err = -1;               /* -1 not tried; 0 loaded; else the error */
static pthread_once_t hw_once = PTHREAD_ONCE_INIT;

static void hw_load(void)
{
	static const char *const names[] = { "libhwloc.so.15", "libhwloc.so" };
	void *h = NULL;
	for (size_t i = 0; !h && i < sizeof names / sizeof names[0]; i++)
		h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		hw_err = ENOSYS;
		return;
	}
#define SYM(field, name) (*(void **)&hw.field = dlsym(h, name))
	if (!SYM(topology_init, "hwloc_topology_init") || !SYM(topology_load, "hwloc_topology_load") ||
	    !SYM(topology_destroy, "hwloc_topology_destroy") || !SYM(get_type_depth, "hwloc_get_type_depth") ||
	    !SYM(get_nbobjs_by_depth, "hwloc_get_nbobjs_by_depth") ||
	    !SYM(get_obj_by_depth, "hwloc_get_obj_by_depth") || !SYM(bitmap_isset, "hwloc_bitmap_isset") ||
	    !SYM(bitmap_weight, "hwloc_bitmap_weight")) {
		hw_err = ENOSYS;
		return;
	}
#undef SYM
	hw_err = 0;
}

/* hwloc's inline helpers, over the by-depth functions. */
static unsigned nbobjs_by_type(hwloc_topology_t t, hwloc_obj_type_t type)
{
	int depth = hw.get_type_depth(t, type);
	if (depth == HWLOC_TYPE_DEPTH_UNKNOWN || depth == HWLOC_TYPE_DEPTH_MULTIPLE)
		return 0;
	return hw.get_nbobjs_by_depth(t, depth);
}

static hwloc_obj_t obj_by_type(hwloc_topology_t t, hwloc_obj_type_t type, unsigned idx)
{
	int depth = hw.get_type_depth(t, type);
	if (depth == HWLOC_TYPE_DEPTH_UNKNOWN || depth == HWLOC_TYPE_DEPTH_MULTIPLE)
		return NULL;
	return hw.get_obj_by_depth(t, depth, idx);
}

static hwloc_obj_t ancestor_by_type(hwloc_obj_type_t type, hwloc_obj_t obj)
{
	hwloc_obj_t a = obj->parent;
	while (a && a->type != type)
		a = a->parent;
	return a;
}

struct nemo_topo {
	int ncpus;
	nemo_cpu_place *cpu;          /* sorted by OS index */
};

static int ancestor_index(hwloc_topology_t t, hwloc_obj_t pu, hwloc_obj_type_t type)
{
	(void)t;
	hwloc_obj_t o = ancestor_by_type(type, pu);
	return o ? (int)o->logical_index : -1;
}

/* NUMA nodes are memory children in hwloc 2, not ancestors: match by cpuset. */
static int numa_index(hwloc_topology_t t, hwloc_obj_t pu)
{
	int n = (int)nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
	for (int i = 0; i < n; i++) {
		hwloc_obj_t node = obj_by_type(t, HWLOC_OBJ_NUMANODE, (unsigned)i);
		if (node && node->cpuset && hw.bitmap_isset(node->cpuset, pu->os_index))
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
	pthread_once(&hw_once, hw_load);
	if (hw_err)
		return NEMO__FAIL(hw_err, "hwloc (libhwloc.so.15) cannot be loaded: install the hwloc library "
				  "(Debian: libhwloc15) to know the topology");
	hwloc_topology_t t;
	if (hw.topology_init(&t) != 0)
		return NEMO__FAIL(ENOMEM, "hwloc_topology_init failed");
	if (hw.topology_load(t) != 0) {
		hw.topology_destroy(t);
		return NEMO__FAIL(EIO, "hwloc could not load this machine's topology");
	}
	int n = (int)nbobjs_by_type(t, HWLOC_OBJ_PU);
	nemo_topo *topo = calloc(1, sizeof *topo);
	nemo_cpu_place *cpu = n > 0 ? calloc((size_t)n, sizeof *cpu) : NULL;
	if (!topo || !cpu) {
		free(topo);
		free(cpu);
		hw.topology_destroy(t);
		if (n <= 0)
			return NEMO__FAIL(EIO, "hwloc found no processing units (%d)", n);
		return NEMO__FAIL(ENOMEM, "cannot allocate the places of %d CPUs", n);
	}
	for (int i = 0; i < n; i++) {
		hwloc_obj_t pu = obj_by_type(t, HWLOC_OBJ_PU, (unsigned)i);
		hwloc_obj_t core = ancestor_by_type(HWLOC_OBJ_CORE, pu);
		cpu[i] = (nemo_cpu_place){
			.cpu = (int)pu->os_index,
			.core = core ? (int)core->logical_index : -1,
			.package = ancestor_index(t, pu, HWLOC_OBJ_PACKAGE),
			.numa = numa_index(t, pu),
			.l2 = ancestor_index(t, pu, HWLOC_OBJ_L2CACHE),
			.l3 = ancestor_index(t, pu, HWLOC_OBJ_L3CACHE),
			.smt_siblings = core && core->cpuset ? hw.bitmap_weight(core->cpuset) : 1,
		};
		if (cpu[i].smt_siblings < 1)
			cpu[i].smt_siblings = 1;
	}
	hw.topology_destroy(t);
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
