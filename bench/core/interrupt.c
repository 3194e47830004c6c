/*
 * interrupt.c - Ctrl-C, SIGTERM and SIGHUP during a run (bench.h,
 * docs/bench-json.md "Interrupted runs").
 *
 * The first of these signals only asks the run to stop: the handler sets
 * a volatile sig_atomic_t and nothing else.  The main thread, the only
 * one that takes these signals (every thread nemo-bench starts blocks
 * them: bench_thread_start), turns it into an atomic flag that the
 * measuring threads read between trials; C11 lets a handler's
 * sig_atomic_t be read by the thread it interrupted, not by the others.
 * The main thread looks at least every 100 ms (progress_join, the
 * preload suite's poll loop), so a row stops within about that plus one
 * trial.  Then main.c writes what was measured and ends the process with
 * the signal.
 *
 * A second signal ends the process at once, as before there was a first:
 * the handler removes the temporary output files (nothing is renamed
 * into place) and the preload suite's temporary folder, kills the
 * preload suite's running child, and re-raises
 * the signal with its default action.  unlink, kill, signal and raise are
 * async-signal-safe.
 */
#define _GNU_SOURCE
#include "bench.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t got_signal;     /* the first signal; set by the handler only */
static atomic_int stop_signal;               /* published to the measuring threads */
static volatile sig_atomic_t child_pid;      /* preload: the running child, or 0 */
static char tmp_path[INTERRUPT_TMP_SLOTS][PATH_MAX];   /* "" when none */

static const int handled[] = { SIGINT, SIGTERM, SIGHUP };
#define NHANDLED (sizeof handled / sizeof handled[0])

static void on_signal(int sig)
{
	if (!got_signal) {
		got_signal = sig;
		return;
	}
	/* The second: stop now, leaving every FILE as it was. */
	for (int i = 0; i < INTERRUPT_TMP_SLOTS; i++)
		if (tmp_path[i][0] && unlink(tmp_path[i]) != 0)
			rmdir(tmp_path[i]);
	if (child_pid > 0)
		kill((pid_t)child_pid, SIGKILL);
	signal(sig, SIG_DFL);
	raise(sig);
}

void interrupt_install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < NHANDLED; i++)
		sigaddset(&sa.sa_mask, handled[i]);   /* one handler at a time */
	for (size_t i = 0; i < NHANDLED; i++)
		sigaction(handled[i], &sa, NULL);
}

void interrupt_sigset(sigset_t *set)
{
	sigemptyset(set);
	for (size_t i = 0; i < NHANDLED; i++)
		sigaddset(set, handled[i]);
}

int bench_interrupted(void)
{
	int sig = got_signal;
	if (sig && !atomic_load_explicit(&stop_signal, memory_order_relaxed))
		atomic_store_explicit(&stop_signal, sig, memory_order_relaxed);
	return sig;
}

bool bench_stop_requested(void)
{
	return atomic_load_explicit(&stop_signal, memory_order_relaxed) != 0;
}

const char *interrupt_signal_name(int sig)
{
	switch (sig) {
	case SIGINT: return "SIGINT";
	case SIGTERM: return "SIGTERM";
	case SIGHUP: return "SIGHUP";
	default: return "a signal";
	}
}

/* The slots are written with the signals blocked, so that the handler
 * never reads a half-written path. */
static void with_signals_blocked(void (*fn)(void *), void *arg)
{
	sigset_t set, old;
	interrupt_sigset(&set);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	fn(arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

struct tmp_set {
	int slot;
	const char *path;
};

static void tmp_set_locked(void *p)
{
	struct tmp_set *t = p;
	if (t->path)
		snprintf(tmp_path[t->slot], sizeof tmp_path[t->slot], "%s", t->path);
	else
		tmp_path[t->slot][0] = 0;
}

void interrupt_tmp_set(int slot, const char *path)
{
	struct tmp_set t = { slot, path };
	with_signals_blocked(tmp_set_locked, &t);
}

void interrupt_child_set(pid_t pid)
{
	child_pid = pid;
}

void bench_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t set, old;
	interrupt_sigset(&set);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	int err = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		fatal("cannot create a thread: %s", strerror(err));
}

_Noreturn void interrupt_die(int sig)
{
	fflush(NULL);
	signal(sig, SIG_DFL);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, sig);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
	_exit(128 + sig);    /* not reached */
}
