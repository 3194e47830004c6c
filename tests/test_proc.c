/* test_proc.c - the one liveness check (src/platform/proc.h): a live
 * peer, a peer that exits (zombie and reaped), a peer whose pid another
 * process took (a real reuse, forced through ns_last_pid when we may),
 * and a reference opened with a start time that is not the pid's. */
#define _GNU_SOURCE
#include "check.h"
#include "pidreuse.h"

#include "platform/proc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static int sleeper(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return 0;
}

static pid_t spawn(void)
{
	pid_t p = fork();
	if (p == 0)
		_exit(sleeper(NULL));
	return p;
}

static void test_self(void)
{
	nemo__proc_ref r;
	CHECK_EQ_INT(nemo__proc_open(&r, getpid(), 0), 0);
	CHECK(!nemo__proc_dead(&r));
	CHECK(nemo__proc_self_start() != 0);
	CHECK(nemo__proc_is(&r, getpid(), nemo__proc_self_start()));
	nemo__proc_close(&r);
	CHECK(nemo__proc_dead(&r));
	CHECK_EQ_INT(nemo__proc_open(&r, 0, 0), EINVAL);
	CHECK(nemo__proc_dead(&r));
	CHECK_EQ_INT(nemo__proc_open(&r, -5, 0), EINVAL);
}

static void test_exit(void)
{
	pid_t c = spawn();
	CHECK(c > 0);
	uint64_t st = nemo__proc_start_time(c);
	CHECK(st != 0);
	nemo__proc_ref r;
	CHECK_EQ_INT(nemo__proc_open(&r, c, st), 0);
	CHECK(!nemo__proc_dead(&r));
	CHECK(!nemo__proc_dead(&r));
	/* The wrong start time: another process than the one named. */
	nemo__proc_ref wrong;
	CHECK_EQ_INT(nemo__proc_open(&wrong, c, st + 1), 0);
	CHECK(nemo__proc_dead(&wrong));
	nemo__proc_close(&wrong);
	/* Killed and not reaped (a zombie): dead. */
	kill(c, SIGKILL);
	siginfo_t si;
	waitid(P_PID, (id_t)c, &si, WEXITED | WNOWAIT);
	CHECK(nemo__proc_dead(&r));
	/* Reaped: still dead (latched, and its pid is free). */
	waitpid(c, NULL, 0);
	CHECK(nemo__proc_dead(&r));
	nemo__proc_close(&r);
	/* Opened after it was reaped: dead at once. */
	CHECK_EQ_INT(nemo__proc_open(&r, c, st), 0);
	CHECK(nemo__proc_dead(&r));
	nemo__proc_close(&r);
}

/* The pid of a dead peer, taken by a new process: still dead, both for a
 * reference kept from before and for one opened after with the peer's
 * start time. */
static void test_reuse(void)
{
	pid_t c = spawn();
	uint64_t st = nemo__proc_start_time(c);
	nemo__proc_ref kept;
	CHECK_EQ_INT(nemo__proc_open(&kept, c, st), 0);
	CHECK(!nemo__proc_dead(&kept));
	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
	/* Start times are in clock ticks: make sure the new one differs. */
	usleep(30000);
	pid_t n = pidreuse_fork(c, sleeper, NULL);
	CHECK(n > 0);
	if (n != c) {
		printf("test_reuse: skipped (pid %d could not be reused: not root, or taken)\n", (int)c);
	} else {
		CHECK(kill(c, 0) == 0);                 /* the pid is alive again */
		CHECK(nemo__proc_dead(&kept));          /* but not our peer */
		nemo__proc_ref later;
		CHECK_EQ_INT(nemo__proc_open(&later, c, st), 0);
		CHECK(nemo__proc_dead(&later));
		nemo__proc_close(&later);
		/* And the new process, named with its own start time, lives. */
		nemo__proc_ref fresh;
		CHECK_EQ_INT(nemo__proc_open(&fresh, c, 0), 0);
		CHECK(!nemo__proc_dead(&fresh));
		CHECK(!nemo__proc_is(&fresh, c, st));
		nemo__proc_close(&fresh);
		printf("test_reuse: pid %d reused\n", (int)c);
	}
	if (n > 0) {
		kill(n, SIGKILL);
		waitpid(n, NULL, 0);
	}
	nemo__proc_close(&kept);
}

int main(void)
{
	test_self();
	test_exit();
	test_reuse();
	return check_exit("test_proc");
}
