/*
 * pidreuse.h - make the kernel hand a given pid to a new child, so that a
 * test can reuse the pid of a process that has died (root only: it
 * writes /proc/sys/kernel/ns_last_pid, under an flock of that file, as
 * CRIU does).  Another process forking at the same moment can take the
 * pid first: the helper retries, and a caller that still gets another pid
 * skips its check (it says so) rather than failing.
 */
#ifndef NEMO_TEST_PIDREUSE_H
#define NEMO_TEST_PIDREUSE_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* Fork a child whose pid is `want` (a pid no process has now).  The
 * child runs child_fn(arg) and _exits with its value.  Returns the
 * child's pid, which is not `want` when the reuse failed (a live child
 * all the same: the caller kills or waits for it), or -1 if fork failed. */
static inline pid_t pidreuse_fork(pid_t want, int (*child_fn)(void *), void *arg)
{
	pid_t got = -1;
	enum { TRIES = 20 };
	for (int tries = 1; tries <= TRIES; tries++) {
		int fd = open("/proc/sys/kernel/ns_last_pid", O_RDWR | O_CLOEXEC);
		if (fd >= 0)
			flock(fd, LOCK_EX);
		if (fd >= 0) {
			char buf[32];
			int n = snprintf(buf, sizeof buf, "%d", (int)want - 1);
			if (write(fd, buf, (size_t)n) != n) {
				close(fd);
				fd = -1;
			}
		}
		got = fork();
		if (got == 0) {
			if (fd >= 0)
				close(fd);
			_exit(child_fn(arg));
		}
		if (fd >= 0) {
			flock(fd, LOCK_UN);
			close(fd);
		}
		if (got < 0 || got == want || fd < 0 || tries == TRIES)
			return got;   /* the last try's child lives: the caller ends it */
		/* Someone else took it: end that child and try again. */
		kill(got, SIGKILL);
		waitpid(got, NULL, 0);
	}
	return got;
}

#endif
