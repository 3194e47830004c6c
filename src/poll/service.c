/*
 * service.c - claim, start and await a domain's service thread (service.h).
 */
#define _GNU_SOURCE
#include "service.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>

int nemo__service_claim(struct nemo_domain *d, enum nemo__service which, void *self, const char *what,
			const char *fn)
{
	if (nemo__domain_service_claim(d, which, self))
		return nemo__fail(EEXIST, fn, "the domain has a %s already", what);
	return 0;
}

void nemo__service_unclaim(struct nemo_domain *d, enum nemo__service which)
{
	nemo__domain_service_unclaim(d, which);
}

uint64_t nemo__thread_cpu_ns(pthread_t t)
{
	clockid_t c;
	struct timespec ts;
	if (pthread_getcpuclockid(t, &c) != 0 || clock_gettime(c, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool nemo__service_realtime(void)
{
	struct sched_param sp = { .sched_priority = 1 };
	return pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;
}

int nemo__service_run(pthread_t *t, void *(*fn)(void *), void *arg, _Atomic int *started)
{
	int err = pthread_create(t, NULL, fn, arg);
	if (err)
		return err;
	while (!atomic_load_explicit(started, memory_order_acquire))
		sched_yield();
	if (atomic_load_explicit(started, memory_order_acquire) < 0) {
		pthread_join(*t, NULL);
		return ENOMEM;
	}
	return 0;
}
