/* test_topo.c - CPUs, pinning, identification, hwloc topology. */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/nemo.h>

#include <errno.h>
#include <string.h>

static void test_cpus_and_pinning(void)
{
	int n = nemo_cpu_count();
	CHECK(n >= 1);
	for (int c = 0; c < n; c++) {
		CHECK_EQ_INT(nemo_pin_self(c), 0);
		CHECK_EQ_INT(nemo_cpu_current(), c);
	}
	CHECK_EQ_INT(nemo_pin_self(-1), EINVAL);
	CHECK_EQ_INT(nemo_pin_self(n + 4096), EINVAL);
	CHECK_EQ_INT(nemo_unpin_self(), 0);
}

static void test_identify(void)
{
	nemo_cpu_id id;
	CHECK_EQ_INT(nemo_cpu_identify(NULL), EINVAL);
	CHECK_EQ_INT(nemo_cpu_identify(&id), 0);
	CHECK(strlen(id.model) > 0);
	if (id.virtualized)
		CHECK(strlen(id.hypervisor) > 0);
	printf("cpu: %s, virtualized %d (%s)\n", id.model, id.virtualized, id.hypervisor);
}

static void test_topology(void)
{
	nemo_topo *t = NULL;
	CHECK_EQ_INT(nemo_topo_load(NULL), EINVAL);
	CHECK_EQ_INT(nemo_topo_load(&t), 0);
	if (!t)
		return;
	int n = nemo_topo_cpus(t);
	CHECK_EQ_INT(n, nemo_cpu_count());
	nemo_cpu_place p;
	int prev = -1;
	for (int i = 0; i < n; i++) {
		CHECK_EQ_INT(nemo_topo_cpu(t, i, &p), 0);
		CHECK(p.cpu > prev);   /* sorted by OS number */
		prev = p.cpu;
		CHECK(p.core >= 0);
		CHECK(p.package >= 0);
		CHECK(p.smt_siblings >= 1);
		printf("cpu %d: core %d package %d numa %d l2 %d l3 %d smt %d\n", p.cpu, p.core,
		       p.package, p.numa, p.l2, p.l3, p.smt_siblings);
		int d = -1;
		CHECK_EQ_INT(nemo_topo_distance(t, p.cpu, p.cpu, &d), 0);
		CHECK_EQ_INT(d, 0);
	}
	CHECK_EQ_INT(nemo_topo_cpu(t, n, &p), EINVAL);
	CHECK_EQ_INT(nemo_topo_cpu(t, -1, &p), EINVAL);
	CHECK_EQ_INT(nemo_topo_cpu(t, 0, NULL), EINVAL);
	int d;
	CHECK_EQ_INT(nemo_topo_distance(t, 0, 100000, &d), EINVAL);
	CHECK_EQ_INT(nemo_topo_distance(NULL, 0, 0, &d), EINVAL);
	if (n >= 2) {
		int ab, ba;
		CHECK_EQ_INT(nemo_topo_distance(t, 0, 1, &ab), 0);
		CHECK_EQ_INT(nemo_topo_distance(t, 1, 0, &ba), 0);
		CHECK_EQ_INT(ab, ba);
		CHECK(ab >= 1 && ab <= 6);
	}
	nemo_topo_free(t);
	nemo_topo_free(NULL);
	CHECK_EQ_INT(nemo_topo_cpus(NULL), 0);
}

static void test_version(void)
{
	CHECK(strcmp(nemo_version(), NEMO_VERSION_STRING) == 0);
	CHECK(strcmp(nemo_strerror(0), "success") == 0);
	CHECK(strlen(nemo_strerror(EINVAL)) > 0);
	CHECK(strlen(nemo_strerror(-3)) > 0);
	CHECK(strlen(nemo_strerror(99999)) > 0);
}

int main(void)
{
	test_cpus_and_pinning();
	test_identify();
	test_topology();
	test_version();
	return check_exit("test_topo");
}
