/*
 * service.h - what the polling layer's service threads (the progress
 * thread, the watchdog) share: one per domain, claimed in a slot of the
 * domain under its lock, started and awaited the same way (internal).
 */
#ifndef NEMO_POLL_SERVICE_H
#define NEMO_POLL_SERVICE_H

#include "../messaging/modes.h"

#include <pthread.h>

/* Claim d's slot which for self (under d's lock: nemo__domain_service_claim
 * of modes.h): 0, or EEXIST naming `what` for the public call fn. */
int nemo__service_claim(struct nemo_domain *d, enum nemo__service which, void *self, const char *what,
			const char *fn);

/* Give the slot back. */
void nemo__service_unclaim(struct nemo_domain *d, enum nemo__service which);

/* From the service thread itself: ask for SCHED_FIFO priority 1, so that
 * its short bursts run as soon as it is woken even when every CPU is
 * busy computing (CFS would let it wait for the next preemption point,
 * milliseconds).  Returns whether it was granted (root or CAP_SYS_NICE,
 * or an RLIMIT_RTPRIO of 1 or more); if not, it runs as it is. */
bool nemo__service_realtime(void);

/* CPU time thread t has used, in ns (0 if unknown). */
uint64_t nemo__thread_cpu_ns(pthread_t t);

/* Start fn(arg) and wait until it has set *started: 1 running; -1 it
 * could not (then it is joined and ENOMEM returned).  0 or an error. */
int nemo__service_run(pthread_t *t, void *(*fn)(void *), void *arg, _Atomic int *started);

#endif
