/*
 * service.h - what the polling layer's service threads (the progress
 * thread, the watchdog) share: one per domain, claimed in a slot of the
 * domain under its lock, started and awaited the same way (internal).
 */
#ifndef NEMO_POLL_SERVICE_H
#define NEMO_POLL_SERVICE_H

#include "../messaging/modes.h"

#include <nemo/poll.h>

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

/*
 * SOURCES (src/poll/progress.c): a transport's share of a domain's
 * progress thread.  The MPI binding under NEMO_MPI_PROGRESS_THREAD is one
 * (the thread makes its passes and sleeps on its doorbell too), and under
 * NEMO_MPI_PROGRESS_WATCHDOG another (a timer), so that a domain has one
 * progress thread whatever serves it.
 */
typedef struct nemo__progress_source {
	void *arg;
	/* On the progress thread when it takes the source (0, or the error
	 * that nemo__progress_attach returns) and when it drops it. */
	int (*start)(void *arg);
	void (*stop)(void *arg);
	/* One pass: how much it moved (0: nothing to do). */
	unsigned (*pass)(void *arg);
	/* The re-check after the thread published SLEEPING on word (its
	 * sleep, progress.c): true if there is work (it may do it). */
	bool (*pending)(void *arg);
	/* The published-state word (RUNNING / SLEEPING: waiter.c, THE RAW
	 * WORD) that the source's producers kick with nemo__word_kick after
	 * making its work visible, and its futex flags (NEMO_FUTEX_SHARED
	 * for a word that other processes ring); NULL for a source that only
	 * its slice wakes (a timer: MPI's watchdog). */
	_Atomic uint32_t *word;
	int word_flags;
	/* How long the thread may sleep before its next pass, ns (0: no
	 * limit); idle: the last sleep ended at its deadline with nothing to
	 * do. */
	uint64_t (*slice_ns)(void *arg, bool idle);
	/* After each sleep: did a kick of word end it?  (Counters; NULL:
	 * none.) */
	void (*slept)(void *arg, bool kicked);
} nemo__progress_source;

/* Serve s from d's progress thread: the one running (nemo_progress_start),
 * or one started now with *attr (NULL: defaults), which stops when its
 * last user leaves (the source's detach, or the user's nemo_progress_stop
 * of a thread it adopted: nemo_progress_start on a domain whose thread a
 * source started hands out that thread).  *out: the thread.  0, EEXIST
 * naming fn if a source is attached already, or what starting the thread
 * or s->start returned. */
int nemo__progress_attach(struct nemo_domain *d, const nemo__progress_source *s,
			  const nemo_progress_attr *attr, nemo_progress **out, const char *fn);

/* Drop p's source (its stop runs on the thread) and stop the thread if
 * nobody else uses it. */
void nemo__progress_detach(nemo_progress *p);

/* CPU time of p's thread, ns. */
uint64_t nemo__progress_cpu_ns(nemo_progress *p);

#endif
