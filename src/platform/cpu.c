/*
 * cpu.c - CPU count, current CPU, pinning, CPU identification.
 */
#define _GNU_SOURCE
#include <nemo/platform.h>

#include "fail.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

int nemo_cpu_count(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

int nemo_cpu_current(void)
{
	return sched_getcpu();
}

static bool cpu_online(int cpu)
{
	char path[64];
	if (cpu == 0)
		return true;    /* cpu0 often has no "online" file */
	snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/online", cpu);
	FILE *f = fopen(path, "r");
	if (!f)   /* no sysfs: trust the online count */
		return cpu < nemo_cpu_count();
	int c = fgetc(f);
	fclose(f);
	return c == '1';
}

int nemo_pin_self(int cpu)
{
	if (cpu < 0 || cpu >= CPU_SETSIZE)
		return NEMO__FAIL(EINVAL, "cpu %d is out of range (0..%d)", cpu, CPU_SETSIZE - 1);
	if (!cpu_online(cpu))
		return NEMO__FAIL(EINVAL, "cpu %d is not online (%d CPUs are)", cpu, nemo_cpu_count());
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set) != 0) {
		int err = errno;
		return NEMO__FAIL(err, "cpu %d is not allowed to this thread (sched_setaffinity: a cpuset "
				  "or cgroup may exclude it)", cpu);
	}
	return 0;
}

int nemo_unpin_self(void)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	int n = nemo_cpu_count();
	for (int i = 0; i < CPU_SETSIZE && n > 0; i++) {
		if (cpu_online(i)) {
			CPU_SET(i, &set);
			n--;
		}
	}
	if (sched_setaffinity(0, sizeof set, &set) != 0) {
		int err = errno;
		return NEMO__FAIL(err, "cannot allow every online CPU to this thread (sched_setaffinity)");
	}
	return 0;
}

static void model_from_proc(char *buf, size_t len)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, "model name", 10) != 0)
			continue;
		char *p = strchr(line, ':');
		if (!p)
			continue;
		p++;
		while (*p == ' ' || *p == '\t')
			p++;
		p[strcspn(p, "\n")] = 0;
		snprintf(buf, len, "%s", p);
		break;
	}
	fclose(f);
}

int nemo_cpu_identify(nemo_cpu_id *out)
{
	if (!out)
		return NEMO__FAIL(EINVAL, "out is NULL");
	memset(out, 0, sizeof *out);
	snprintf(out->model, sizeof out->model, "unknown");
	model_from_proc(out->model, sizeof out->model);
#if defined(__x86_64__) || defined(__i386__)
	unsigned a, b, c, d;
	if (__get_cpuid(1, &a, &b, &c, &d) && ((c >> 31) & 1u)) {
		out->virtualized = true;
		unsigned regs[3];
		__cpuid(0x40000000u, a, regs[0], regs[1], regs[2]);
		char vendor[13];
		memcpy(vendor, regs, 12);
		vendor[12] = 0;
		/* "KVMKVMKVM\0\0\0" -> "KVM" */
		if (strncmp(vendor, "KVMKVMKVM", 9) == 0)
			snprintf(out->hypervisor, sizeof out->hypervisor, "KVM");
		else
			snprintf(out->hypervisor, sizeof out->hypervisor, "%s", vendor);
	}
#endif
	return 0;
}
