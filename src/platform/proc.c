/*
 * proc.c - process liveness that survives pid reuse (proc.h has the rule).
 */
#define _GNU_SOURCE
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

uint64_t nemo__proc_start_time(pid_t pid)
{
	if (pid <= 0)
		return 0;
	char path[48], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	/* "pid (comm) state ...": comm may hold spaces and parentheses, so
	 * count fields from the last ')'.  Field 3 (state) follows it. */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	unsigned field = 2;
	for (; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	return strtoull(p, NULL, 10);
}

uint64_t nemo__proc_pid_namespace(void)
{
	struct stat st;
	if (stat("/proc/self/ns/pid", &st))
		return 0;
	return ((uint64_t)st.st_dev << 32) ^ (uint64_t)st.st_ino;
}

uint64_t nemo__proc_self_start(void)
{
	static _Atomic uint64_t cached;
	static _Atomic pid_t cached_pid;
	pid_t me = getpid();
	/* Re-read after fork: the child is another process. */
	if (atomic_load_explicit(&cached_pid, memory_order_acquire) != me) {
		atomic_store_explicit(&cached, nemo__proc_start_time(me), memory_order_relaxed);
		atomic_store_explicit(&cached_pid, me, memory_order_release);
	}
	return atomic_load_explicit(&cached, memory_order_relaxed);
}

static int pidfd_open_(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	(void)pid;
	errno = ENOSYS;
	return -1;
#endif
}

int nemo__proc_open(nemo__proc_ref *r, pid_t pid, uint64_t start)
{
	*r = (nemo__proc_ref){ .pid = 0, .fd = -1, .start = 0, .dead = true };
	if (pid <= 0)
		return EINVAL;
	r->pid = pid;
	r->dead = false;
	if (pid == getpid()) {
		r->start = start ? start : nemo__proc_self_start();
		r->dead = start && start != nemo__proc_self_start();
		return 0;
	}
	r->fd = pidfd_open_(pid);                                           /* O1 */
	if (r->fd < 0 && errno == ESRCH) {
		r->start = start;
		r->dead = true;
		return 0;
	}
	uint64_t now = nemo__proc_start_time(pid);                          /* O2 */
	r->start = start ? start : now;
	if (start && now && now != start)
		r->dead = true;
	else if (!now && r->fd >= 0)
		r->dead = nemo__proc_dead(r);   /* /proc unreadable: the pidfd alone */
	if (r->dead && r->fd >= 0) {
		close(r->fd);
		r->fd = -1;
	}
	return 0;
}

bool nemo__proc_dead(nemo__proc_ref *r)
{
	if (r->dead || r->pid <= 0)
		return true;
	if (r->pid == getpid())
		return false;
	if (r->fd >= 0) {                                                  /* O3 */
		struct pollfd pf = { .fd = r->fd, .events = POLLIN };
		int n;
		do
			n = poll(&pf, 1, 0);
		while (n < 0 && errno == EINTR);
		if (n > 0)
			r->dead = true;
	} else if (kill(r->pid, 0) != 0 && errno == ESRCH) {
		r->dead = true;
	} else if (r->start) {
		uint64_t now = nemo__proc_start_time(r->pid);
		if (now && now != r->start)
			r->dead = true;
	}
	if (r->dead && r->fd >= 0) {
		close(r->fd);
		r->fd = -1;
	}
	return r->dead;
}

bool nemo__proc_is(const nemo__proc_ref *r, pid_t pid, uint64_t start)
{
	return r->pid == pid && pid > 0 && (r->start == start || !start);
}

void nemo__proc_close(nemo__proc_ref *r)
{
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	r->pid = 0;
	r->dead = true;
}
