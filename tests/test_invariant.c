/*
 * test_invariant.c - a broken invariant stops the process with a message
 * that names it (src/platform/invariant.h), in the builds where they are
 * on (no NDEBUG: Debug and the sanitizer builds); in release builds the
 * check compiles to nothing, which this test also states.
 */
#define _GNU_SOURCE
#include "check.h"

#include "../src/platform/invariant.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
#ifdef NDEBUG
	NEMO__INVARIANT(check_count < 0, "compiled out");     /* must not stop us */
	printf("test_invariant: release build: invariants compiled out\n");
#else
	int fds[2];
	CHECK(pipe(fds) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], STDERR_FILENO);
		signal(SIGABRT, SIG_DFL);
		int x = 0;
		NEMO__INVARIANT(x == 1, "x is one");
		_exit(0);
	}
	close(fds[1]);
	char buf[512] = { 0 };
	size_t n = 0;
	for (ssize_t k; n < sizeof buf - 1 && (k = read(fds[0], buf + n, sizeof buf - 1 - n)) > 0;)
		n += (size_t)k;       /* to EOF: the message comes in several writes */
	int st = 0;
	waitpid(pid, &st, 0);
	CHECK(n > 0);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
	CHECK(strstr(buf, "nemo: invariant broken: x == 1 (x is one) at ") != NULL);
	CHECK(strstr(buf, "test_invariant.c:") != NULL);
#endif
	return check_exit("test_invariant");
}
