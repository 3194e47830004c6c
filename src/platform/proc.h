/*
 * proc.h - is a peer process still the one we knew? (internal)
 *
 * The one liveness check of nemo: shared domains (src/xproc/) and MPI
 * ranks (src/mpi/) both ask it about their peers.  A process is named by
 * its pid and its start time (field 22 of /proc/PID/stat, clock ticks
 * since boot): a pid alone is reused by the kernel as soon as its
 * process is reaped, so "kill(pid, 0) succeeds" says nothing about the
 * process that was there before.
 *
 * THE RULE.  A reference is opened once per (pid, start time) and kept:
 *
 *   O1  fd := pidfd_open(pid)        ESRCH -> dead at once
 *   O2  st := start time of pid now  differs from the expected one -> dead
 *                                    (the pid names another process)
 *   O3  poll(fd) readable            -> dead (the process exited: a
 *                                    zombie's pidfd is readable too)
 *
 * O1 before O2: if the pid was reused before O1, the pidfd is of the new
 * process and O2 reads the new process's start time, which differs.  If
 * the process dies and its pid is reused after O1, the pidfd still
 * refers to the original process, and O3 finds it readable.  So once O2
 * has matched, "dead" is decided by the kept pidfd alone, one poll(2)
 * with a zero timeout per check, whatever happens to the pid; no later
 * check reads /proc, and none can mistake a reuse for the peer.  Where
 * pidfd_open is missing (ENOSYS, or out of descriptors: EMFILE), each
 * check does kill(pid, 0) and compares the start time again (a reuse
 * between two checks is then caught by the start time).
 *
 * Death is latched: a reference once found dead stays dead.
 *
 * Costs: opening reads /proc/PID/stat once and makes one descriptor
 * (O_CLOEXEC); a check is one poll(2).  Not async-signal-safe (it opens
 * files); call it from threads.
 */
#ifndef NEMO_PLATFORM_PROC_H
#define NEMO_PLATFORM_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct nemo__proc_ref {
	pid_t pid;                    /* 0: no reference (closed or never opened) */
	int fd;                       /* the pidfd, or -1 (no pidfd: kill + start time) */
	uint64_t start;               /* the process's start time (0: unknown) */
	bool dead;                    /* latched */
} nemo__proc_ref;

/* The start time of process pid (field 22 of /proc/PID/stat), or 0 when
 * it cannot be read (no such process, or /proc not mounted). */
uint64_t nemo__proc_start_time(pid_t pid);

/* The calling process's pid namespace (device and inode of
 * /proc/self/ns/pid; 0: unknown): a pid names a process only inside its
 * namespace, so peers are checked by pid only when theirs is ours. */
uint64_t nemo__proc_pid_namespace(void);

/* The calling process's start time (read once, then cached). */
uint64_t nemo__proc_self_start(void);

/* Open a reference to the process pid that started at `start` (0: the
 * process that has pid now; its start time is read and kept).  The
 * reference may be dead at once (O1, O2).  Returns 0, or EINVAL for a
 * pid <= 0 (the reference is then closed). */
int nemo__proc_open(nemo__proc_ref *r, pid_t pid, uint64_t start);

/* Is the referenced process gone (O3, latched)?  A closed reference is
 * dead.  Our own process is never dead. */
bool nemo__proc_dead(nemo__proc_ref *r);

/* Does r refer to exactly (pid, start)?  (A cache keyed by both: a
 * reference to a pid's earlier process is not reused for a later one.) */
bool nemo__proc_is(const nemo__proc_ref *r, pid_t pid, uint64_t start);

/* Close the descriptor; the reference reads as dead afterwards. */
void nemo__proc_close(nemo__proc_ref *r);

#endif
