/*
 * preload_prog.c - an ordinary pthread program (no nemo in it) run under
 * LD_PRELOAD=libnemo-preload.so by ctest.  It exercises what real
 * programs do with condition variables and exits 0 only if every case
 * behaved as POSIX says:
 *   - PTHREAD_COND_INITIALIZER, signal and broadcast to several waiters;
 *   - the clock attribute (a monotonic timed wait);
 *   - a process-shared condvar in shared memory, used across fork()
 *     (handed to glibc by the interposer);
 *   - fork() of a process whose condvar has a waiter;
 *   - cancellation of a waiter (mutex re-acquired in cleanup);
 *   - timed-wait errors (EINVAL, ETIMEDOUT);
 *   - POSIX semaphores, which the interposer makes poll before glibc's
 *     sem_wait sleeps: strict hand-off between two threads, every timed
 *     form and its errors, errno kept on success, EINTR from a handler
 *     installed without SA_RESTART (and none from one with it), the
 *     signal mask unchanged, cancellation, and a process-shared
 *     semaphore across fork();
 *   - a fault (SIGSEGV, SIGBUS) raised by sem_wait's own access to the
 *     semaphore while the interposer polls reaches the program's handler
 *     (one that returns, one that siglongjmps out), instead of killing
 *     the process (sem_faults, below).
 * argv[1] == "expect-interposed" also checks that the calls really went
 * to libnemo-preload.so.
 */
#define _GNU_SOURCE
#include "check.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <time.h>
#include <unistd.h>

static int failures;   /* (check.h supplies only in_ms here) */
#define EXPECT(c) do { if (!(c)) { failures++; fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); } } while (0)

/* ---- static initializer, signal, broadcast ---- */
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int gen, woke, items;

static void *gen_waiter(void *p)
{
	(void)p;
	pthread_mutex_lock(&m);
	while (gen == 0)     /* not "changes from what I saw": a late thread would hang */
		pthread_cond_wait(&c, &m);
	woke++;
	pthread_mutex_unlock(&m);
	return NULL;
}

static void *item_waiter(void *p)
{
	(void)p;
	pthread_mutex_lock(&m);
	while (items == 0)
		pthread_cond_wait(&c, &m);
	items--;
	woke++;
	pthread_mutex_unlock(&m);
	return NULL;
}

static void basic(void)
{
	pthread_t th[6];
	for (int i = 0; i < 6; i++)
		pthread_create(&th[i], NULL, gen_waiter, NULL);
	usleep(20000);
	pthread_mutex_lock(&m);
	gen++;
	pthread_cond_broadcast(&c);
	pthread_mutex_unlock(&m);
	for (int i = 0; i < 6; i++)
		pthread_join(th[i], NULL);
	EXPECT(woke == 6);
	woke = 0;
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, item_waiter, NULL);
	for (int i = 0; i < 4; i++) {
		pthread_mutex_lock(&m);
		items++;
		pthread_cond_signal(&c);
		pthread_mutex_unlock(&m);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	EXPECT(woke == 4 && items == 0);
}

/* ---- clock attribute and timed-wait errors ---- */
static void clocks(void)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_t mc;
	EXPECT(pthread_cond_init(&mc, &a) == 0);
	pthread_mutex_lock(&m);
	struct timespec d = in_ms(CLOCK_MONOTONIC, 5);
	EXPECT(pthread_cond_timedwait(&mc, &m, &d) == ETIMEDOUT);
	struct timespec bad = { 0, 2000000000L };
	EXPECT(pthread_cond_timedwait(&mc, &m, &bad) == EINVAL);
	d = in_ms(CLOCK_REALTIME, 5);
	EXPECT(pthread_cond_clockwait(&mc, &m, CLOCK_REALTIME, &d) == ETIMEDOUT);
	pthread_mutex_unlock(&m);
	EXPECT(pthread_cond_destroy(&mc) == 0);
	pthread_condattr_destroy(&a);
}

/* ---- process-shared condvar across fork ---- */
struct shm {
	pthread_mutex_t m;
	pthread_cond_t c;
	int ready, go;
};

static void pshared(void)
{
	struct shm *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	EXPECT(s != MAP_FAILED);
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(&s->m, &ma);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
	EXPECT(pthread_cond_init(&s->c, &ca) == 0);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		pthread_mutex_lock(&s->m);
		s->ready = 1;
		pthread_cond_broadcast(&s->c);
		while (!s->go)
			pthread_cond_wait(&s->c, &s->m);
		pthread_mutex_unlock(&s->m);
		_exit(0);
	}
	pthread_mutex_lock(&s->m);
	while (!s->ready)
		pthread_cond_wait(&s->c, &s->m);
	s->go = 1;
	pthread_cond_broadcast(&s->c);
	pthread_mutex_unlock(&s->m);
	int st = -1;
	waitpid(pid, &st, 0);
	EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	EXPECT(pthread_cond_destroy(&s->c) == 0);
	munmap(s, sizeof *s);
}

/* ---- fork while a thread waits ---- */
static void forked(void)
{
	gen = 0;
	woke = 0;
	pthread_t th;
	pthread_create(&th, NULL, gen_waiter, NULL);
	usleep(20000);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		pthread_t t2;
		pthread_create(&t2, NULL, gen_waiter, NULL);
		usleep(20000);
		pthread_mutex_lock(&m);
		gen++;
		pthread_cond_signal(&c);
		pthread_mutex_unlock(&m);
		struct timespec d = in_ms(CLOCK_REALTIME, 5000);
		_exit(pthread_timedjoin_np(t2, NULL, &d) == 0 && woke == 1 ? 0 : 1);
	}
	int st = -1;
	waitpid(pid, &st, 0);
	EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	pthread_mutex_lock(&m);
	gen++;
	pthread_cond_signal(&c);
	pthread_mutex_unlock(&m);
	pthread_join(th, NULL);
	EXPECT(woke == 1);
}

/* ---- cancellation ---- */
static pthread_mutex_t em;
static pthread_cond_t ec = PTHREAD_COND_INITIALIZER;
static int owned_in_cleanup = -1;

static void cleanup(void *p)
{
	(void)p;
	owned_in_cleanup = pthread_mutex_unlock(&em) == 0;
}

static void *cancelled(void *p)
{
	(void)p;
	pthread_mutex_lock(&em);
	pthread_cleanup_push(cleanup, NULL);
	for (;;)
		pthread_cond_wait(&ec, &em);
	pthread_cleanup_pop(1);
	return NULL;
}

static void cancellation(void)
{
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&em, &ma);
	pthread_t th;
	pthread_create(&th, NULL, cancelled, NULL);
	usleep(20000);
	pthread_cancel(th);
	void *ret = NULL;
	pthread_join(th, &ret);
	EXPECT(ret == PTHREAD_CANCELED);
	EXPECT(owned_in_cleanup == 1);
	EXPECT(pthread_cond_destroy(&ec) == 0);
}

/* ---- POSIX semaphores ---- */
enum { SEM_ROUNDS = 20000 };
static sem_t sem_a, sem_b;
static int sem_turns[2];

static void *sem_player(void *p)
{
	int me = (int)(intptr_t)p;
	sem_t *mine = me ? &sem_b : &sem_a, *other = me ? &sem_a : &sem_b;
	for (int i = 0; i < SEM_ROUNDS; i++) {
		/* errno stays as it was, on whichever path the wait took */
		errno = 4321;
		int rc = sem_wait(mine);
		EXPECT(rc == 0 && errno == 4321);
		sem_turns[me]++;
		/* Strict alternation: player 1 has had exactly as many turns as
		 * player 0 before its own, one fewer after. */
		EXPECT(sem_turns[0] - sem_turns[1] == (me ? 0 : 1));
		EXPECT(sem_post(other) == 0);
	}
	return NULL;
}

static volatile sig_atomic_t handled;
static void on_usr1(int sig)
{
	(void)sig;
	handled++;
}

static sem_t sem_sig;
static _Atomic int sem_rc = -2, sem_errno;
static void *sem_sig_waiter(void *p)
{
	(void)p;
	int rc = sem_wait(&sem_sig);
	atomic_store(&sem_errno, errno);
	atomic_store(&sem_rc, rc);
	return NULL;
}

/* A handler that siglongjmps out of sem_wait, then the thread exits
 * with a cleanup handler of its own: the wait must leave nothing of its
 * own registered (once, under NEMO_WAIT=spin, the thread's exit jumped
 * into a dead frame). */
static sigjmp_buf jump_env;
static atomic_int jump_armed, jumped, jump_cleanup;
static void on_usr2_jump(int sig)
{
	(void)sig;
	siglongjmp(jump_env, 1);
}

static void jump_cleanup_ran(void *p)
{
	(void)p;
	atomic_store(&jump_cleanup, 1);
}

static void *sem_jump_waiter(void *p)
{
	pthread_cleanup_push(jump_cleanup_ran, NULL);
	if (sigsetjmp(jump_env, 1) == 0) {
		/* Only now may the handler jump here: a signal that came before
		 * sigsetjmp jumped to an unset jump_env (seen under load, when
		 * this thread had not run 20 ms after its creation). */
		atomic_store(&jump_armed, 1);
		sem_wait(p);                   /* never posted */
	}
	/* No second jump: main may signal once more before it sees this. */
	sigset_t usr2;
	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &usr2, NULL);
	atomic_store(&jumped, 1);
	pthread_exit(NULL);
	pthread_cleanup_pop(0);
	return NULL;
}

/* A timed wait hit by a handler with SA_RESTART fails with EINTR (the
 * kernel does not restart timed futex waits for glibc's semaphores). */
static void *sem_timed_sig_waiter(void *p)
{
	(void)p;
	struct timespec far;
	clock_gettime(CLOCK_REALTIME, &far);
	far.tv_sec += 60;
	int rc = sem_timedwait(&sem_sig, &far);
	atomic_store(&sem_errno, errno);
	atomic_store(&sem_rc, rc);
	return NULL;
}

static void *sem_cancel_waiter(void *p)
{
	sem_wait(p);                   /* never posted: cancelled */
	return NULL;
}

/* One waiter in sem_wait, hit by SIGUSR1 (installed with `flags`) after
 * it started waiting; with SA_RESTART it must go on waiting until the
 * post, without it fail with EINTR. */
static void sem_signalled(int flags)
{
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = flags };
	sigemptyset(&sa.sa_mask);
	EXPECT(sigaction(SIGUSR1, &sa, NULL) == 0);
	EXPECT(sem_init(&sem_sig, 0, 0) == 0);
	handled = 0;
	atomic_store(&sem_rc, -2);
	pthread_t t;
	pthread_create(&t, NULL, sem_sig_waiter, NULL);
	/* It may be polling or asleep in glibc's call: both must behave. */
	struct timespec ms = { 0, 20000000 };
	nanosleep(&ms, NULL);
	pthread_kill(t, SIGUSR1);
	if (!(flags & SA_RESTART)) {
		/* A signal that came before it reached sem_wait interrupts
		 * nothing, on a loaded machine too: signal again until it
		 * returns. */
		while (atomic_load(&sem_rc) == -2) {
			nanosleep(&ms, NULL);
			if (atomic_load(&sem_rc) == -2)
				pthread_kill(t, SIGUSR1);
		}
	}
	if (flags & SA_RESTART) {
		while (!handled)
			sched_yield();
		nanosleep(&ms, NULL);
		EXPECT(atomic_load(&sem_rc) == -2);   /* still waiting */
		sem_post(&sem_sig);
		pthread_join(t, NULL);
		EXPECT(atomic_load(&sem_rc) == 0);
	} else {
		pthread_join(t, NULL);
		EXPECT(atomic_load(&sem_rc) == -1 && atomic_load(&sem_errno) == EINTR);
		EXPECT(handled >= 1);
	}
	sem_destroy(&sem_sig);
	signal(SIGUSR1, SIG_DFL);
}

static void semaphores(void)
{
	/* Hand-off. */
	EXPECT(sem_init(&sem_a, 0, 1) == 0 && sem_init(&sem_b, 0, 0) == 0);
	pthread_t t0, t1;
	pthread_create(&t0, NULL, sem_player, (void *)(intptr_t)0);
	pthread_create(&t1, NULL, sem_player, (void *)(intptr_t)1);
	pthread_join(t0, NULL);
	pthread_join(t1, NULL);
	EXPECT(sem_turns[0] == SEM_ROUNDS && sem_turns[1] == SEM_ROUNDS);

	/* Timed forms: available, past deadlines, errors; errno kept. */
	sem_t s;
	EXPECT(sem_init(&s, 0, 2) == 0);
	struct timespec now, past = { 0, 0 }, bad = { 0, 1000000000L };
	clock_gettime(CLOCK_REALTIME, &now);
	errno = 1234;
	EXPECT(sem_timedwait(&s, &past) == 0 && errno == 1234);    /* available: no timeout */
	EXPECT(sem_clockwait(&s, CLOCK_MONOTONIC, &past) == 0 && errno == 1234);
	EXPECT(sem_timedwait(&s, &past) == -1 && errno == ETIMEDOUT);
	EXPECT(sem_clockwait(&s, CLOCK_MONOTONIC, &past) == -1 && errno == ETIMEDOUT);
	struct timespec neg = { -1, 0 };
	EXPECT(sem_timedwait(&s, &neg) == -1 && errno == ETIMEDOUT);
	EXPECT(sem_timedwait(&s, &bad) == -1 && errno == EINVAL);
	EXPECT(sem_clockwait(&s, CLOCK_MONOTONIC, &bad) == -1 && errno == EINVAL);
	EXPECT(sem_clockwait(&s, CLOCK_PROCESS_CPUTIME_ID, &now) == -1 && errno == EINVAL);
	struct timespec soon;
	clock_gettime(CLOCK_MONOTONIC, &soon);
	soon.tv_nsec += 30000000;
	if (soon.tv_nsec >= 1000000000L) {
		soon.tv_sec++;
		soon.tv_nsec -= 1000000000L;
	}
	EXPECT(sem_clockwait(&s, CLOCK_MONOTONIC, &soon) == -1 && errno == ETIMEDOUT);
	struct timespec m2;
	clock_gettime(CLOCK_MONOTONIC, &m2);
	EXPECT(m2.tv_sec > soon.tv_sec || (m2.tv_sec == soon.tv_sec && m2.tv_nsec >= soon.tv_nsec));
	EXPECT(sem_post(&s) == 0);
	errno = 77;
	EXPECT(sem_wait(&s) == 0 && errno == 77);
	EXPECT(sem_trywait(&s) == -1 && errno == EAGAIN);
	sem_destroy(&s);

	/* Signals, and the mask left as it was. */
	sigset_t before, after;
	pthread_sigmask(SIG_SETMASK, NULL, &before);
	sem_signalled(0);
	sem_signalled(SA_RESTART);
	pthread_sigmask(SIG_SETMASK, NULL, &after);
	for (int sig = 1; sig < SIGRTMIN; sig++)
		EXPECT(sigismember(&before, sig) == sigismember(&after, sig));

	/* A timed wait and a handler with SA_RESTART: EINTR all the same. */
	struct sigaction sr = { .sa_handler = on_usr1, .sa_flags = SA_RESTART };
	sigemptyset(&sr.sa_mask);
	EXPECT(sigaction(SIGUSR1, &sr, NULL) == 0);
	EXPECT(sem_init(&sem_sig, 0, 0) == 0);
	atomic_store(&sem_rc, -2);
	pthread_t tt;
	pthread_create(&tt, NULL, sem_timed_sig_waiter, NULL);
	struct timespec ms20 = { 0, 20000000 };
	while (atomic_load(&sem_rc) == -2) {
		pthread_kill(tt, SIGUSR1);    /* again, until it returns */
		nanosleep(&ms20, NULL);
	}
	pthread_join(tt, NULL);
	EXPECT(atomic_load(&sem_rc) == -1 && atomic_load(&sem_errno) == EINTR);
	sem_destroy(&sem_sig);
	signal(SIGUSR1, SIG_DFL);

	/* A handler that jumps out of the wait; the thread then exits. */
	struct sigaction sj = { .sa_handler = on_usr2_jump };
	sigemptyset(&sj.sa_mask);
	EXPECT(sigaction(SIGUSR2, &sj, NULL) == 0);
	sem_t nobody;
	EXPECT(sem_init(&nobody, 0, 0) == 0);
	pthread_t tj;
	pthread_create(&tj, NULL, sem_jump_waiter, &nobody);
	while (!atomic_load(&jump_armed))
		nanosleep(&ms20, NULL);
	while (!atomic_load(&jumped)) {
		nanosleep(&ms20, NULL);
		if (!atomic_load(&jumped))
			pthread_kill(tj, SIGUSR2);
	}
	pthread_join(tj, NULL);
	EXPECT(atomic_load(&jump_cleanup) == 1);
	sem_destroy(&nobody);
	signal(SIGUSR2, SIG_DFL);

	/* Cancellation point. */
	sem_t never;
	EXPECT(sem_init(&never, 0, 0) == 0);
	pthread_t tc;
	pthread_create(&tc, NULL, sem_cancel_waiter, &never);
	struct timespec ms = { 0, 10000000 };
	nanosleep(&ms, NULL);
	pthread_cancel(tc);
	void *res;
	pthread_join(tc, &res);
	EXPECT(res == PTHREAD_CANCELED);
	sem_destroy(&never);

	/* Process-shared, across fork: the child waits, the parent posts. */
	sem_t *ps = mmap(NULL, 2 * sizeof(sem_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	EXPECT(ps != MAP_FAILED);
	if (ps == MAP_FAILED)
		return;
	EXPECT(sem_init(&ps[0], 1, 0) == 0 && sem_init(&ps[1], 1, 0) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		for (int i = 0; i < 1000; i++) {
			while (sem_wait(&ps[0]) != 0)
				;
			sem_post(&ps[1]);
		}
		_exit(0);
	}
	for (int i = 0; i < 1000; i++) {
		sem_post(&ps[0]);
		while (sem_wait(&ps[1]) != 0)
			;
	}
	int st;
	EXPECT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	munmap(ps, 2 * sizeof(sem_t));
}

/* ---- a fault inside the interposer's poll ----
 *
 * The kernel cannot defer a fault: a SIGSEGV or SIGBUS that the faulting
 * thread blocks kills the process, whatever handler the program has.  So
 * a poll that blocked every signal (the interposer's sem_wait once did,
 * to keep EINTR: src/waiter/wait.c, INTERRUPTIBLE POLLS) killed a program
 * whose semaphore faulted while it polled - a page the program protects
 * and unprotects in its SIGSEGV handler (a garbage collector's barrier),
 * or a file mapping that was truncated (SIGBUS).
 *
 * The semaphore lies on a page that faults at every access, one by one:
 * each fault's handler gives the page back and sets the x86 trap flag,
 * and the trap that follows the retried instruction takes the page away
 * again.  sem_wait's accesses to the semaphore are then counted exactly.
 * Under the interposer the first is its uncontended try, the second the
 * wait loop's first try, the third the poll's first try (a poll always
 * runs under NEMO_WAIT=spin; under block the third is glibc's own call).
 * The third fault ends the case: its SIGSEGV handler posts the semaphore
 * and returns (sem_wait must then return 0), its SIGBUS handler
 * siglongjmps out of the wait (the thread must then run its own cleanup
 * at exit with its signal mask as it was, nothing of the wait's left
 * registered).  Run only where sem_wait is interposed: glibc's own
 * sem_wait would enter the futex call with the page away (EFAULT, which
 * glibc treats as fatal).  x86-64 only (the trap flag). */
#if defined(__x86_64__)
enum { FAULT_END = 3 };
static char *fault_page;
static size_t fault_len;
static int fault_fd = -1;               /* SIGBUS case: the file behind the page */
static sem_t *fault_sem;
static volatile sig_atomic_t fault_n, fault_armed, fault_end_masked;
static sigjmp_buf fault_env;
static atomic_int fault_rc = -2, fault_jumped, fault_cleanup, fault_mask_kept;

static void fault_take_page(void)
{
	if (fault_fd >= 0)
		(void)ftruncate(fault_fd, 0);                         /* beyond the end: SIGBUS */
	else
		mprotect(fault_page, fault_len, PROT_NONE);           /* SIGSEGV */
}

static void fault_give_page(void)
{
	if (fault_fd >= 0)
		(void)ftruncate(fault_fd, (off_t)fault_len);
	else
		mprotect(fault_page, fault_len, PROT_READ | PROT_WRITE);
}

static void on_fault(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;
	char *a = si->si_addr;
	if (!fault_armed || a < fault_page || a >= fault_page + fault_len) {
		signal(sig, SIG_DFL);                                 /* not ours: crash as it would */
		return;
	}
	fault_give_page();
	if (++fault_n < FAULT_END) {
		uc->uc_mcontext.gregs[REG_EFL] |= 0x100;              /* trap after the retry */
		return;
	}
	/* The third access: was an asynchronous signal blocked around it
	 * (the interposer's poll blocks those, never a fault's)? */
	fault_end_masked = sigismember(&uc->uc_sigmask, SIGUSR1) == 1;
	fault_armed = 0;
	if (sig == SIGBUS)
		siglongjmp(fault_env, 1);
	sem_post(fault_sem);                                          /* async-signal-safe */
}

static void on_trap(int sig, siginfo_t *si, void *uc_)
{
	(void)sig;
	(void)si;
	ucontext_t *uc = uc_;
	uc->uc_mcontext.gregs[REG_EFL] &= ~0x100;
	if (fault_armed)
		fault_take_page();
}

static void *fault_waiter(void *p)
{
	(void)p;
	atomic_store(&fault_rc, sem_wait(fault_sem));
	return NULL;
}

static void fault_cleanup_ran(void *p)
{
	(void)p;
	atomic_store(&fault_cleanup, 1);
}

static void *fault_jump_waiter(void *p)
{
	(void)p;
	sigset_t before, after;
	pthread_sigmask(SIG_SETMASK, NULL, &before);
	pthread_cleanup_push(fault_cleanup_ran, NULL);
	if (sigsetjmp(fault_env, 1) == 0)
		atomic_store(&fault_rc, sem_wait(fault_sem));         /* never returns */
	else
		atomic_store(&fault_jumped, 1);
	pthread_sigmask(SIG_SETMASK, NULL, &after);
	int same = 1;
	for (int sig = 1; sig < SIGRTMIN; sig++)
		same &= sigismember(&before, sig) == sigismember(&after, sig);
	atomic_store(&fault_mask_kept, same);
	pthread_exit(NULL);
	pthread_cleanup_pop(0);
	return NULL;
}

static void sem_fault_case(int sig)
{
	long pg = sysconf(_SC_PAGESIZE);
	fault_len = (size_t)pg;
	fault_fd = -1;
	if (sig == SIGBUS) {
		fault_fd = memfd_create("preload_prog-sem", MFD_CLOEXEC);
		EXPECT(fault_fd >= 0 && ftruncate(fault_fd, pg) == 0);
		if (fault_fd < 0)
			return;
		fault_page = mmap(NULL, fault_len, PROT_READ | PROT_WRITE, MAP_SHARED, fault_fd, 0);
	} else {
		fault_page = mmap(NULL, fault_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	}
	EXPECT(fault_page != MAP_FAILED);
	if (fault_page == MAP_FAILED)
		return;
	fault_sem = (sem_t *)(void *)fault_page;
	EXPECT(sem_init(fault_sem, 0, 0) == 0);
	struct sigaction sa = { .sa_sigaction = on_fault, .sa_flags = SA_SIGINFO };
	struct sigaction st = { .sa_sigaction = on_trap, .sa_flags = SA_SIGINFO };
	sigemptyset(&sa.sa_mask);
	sigemptyset(&st.sa_mask);
	EXPECT(sigaction(sig, &sa, NULL) == 0 && sigaction(SIGTRAP, &st, NULL) == 0);
	fault_n = 0;
	fault_end_masked = 0;
	atomic_store(&fault_rc, -2);
	atomic_store(&fault_jumped, 0);
	atomic_store(&fault_cleanup, 0);
	atomic_store(&fault_mask_kept, 0);
	fault_armed = 1;
	fault_take_page();
	pthread_t t;
	pthread_create(&t, NULL, sig == SIGBUS ? fault_jump_waiter : fault_waiter, NULL);
	pthread_join(t, NULL);
	fault_armed = 0;
	fault_give_page();
	EXPECT(fault_n == FAULT_END);
	if (sig == SIGBUS) {
		EXPECT(atomic_load(&fault_jumped) == 1 && atomic_load(&fault_rc) == -2);
		EXPECT(atomic_load(&fault_cleanup) == 1);
		EXPECT(atomic_load(&fault_mask_kept) == 1);
	} else {
		EXPECT(atomic_load(&fault_rc) == 0);
	}
	/* Under NEMO_WAIT=spin the third access is the poll's, which runs
	 * with asynchronous signals blocked: the fault came from inside it. */
	const char *w = getenv("NEMO_WAIT");
	if (w && !strcmp(w, "spin"))
		EXPECT(fault_end_masked == 1);
	signal(sig, SIG_DFL);
	signal(SIGTRAP, SIG_DFL);
	munmap(fault_page, fault_len);
	if (fault_fd >= 0)
		close(fault_fd);
	fault_fd = -1;
}

static void sem_faults(bool interposed)
{
	if (!interposed)
		return;
	sem_fault_case(SIGSEGV);
	sem_fault_case(SIGBUS);
}
#else
static void sem_faults(bool interposed)
{
	(void)interposed;
}
#endif

int main(int argc, char **argv)
{
	basic();
	clocks();
	pshared();
	forked();
	cancellation();
	semaphores();
	Dl_info info;
	void *sym = dlsym(RTLD_DEFAULT, "pthread_cond_wait");
	bool interposed = sym && dladdr(sym, &info) && info.dli_fname &&
			  strstr(info.dli_fname, "nemo-preload");
	Dl_info sinfo;
	void *ssym = dlsym(RTLD_DEFAULT, "sem_wait");
	bool sem_interposed = ssym && dladdr(ssym, &sinfo) && sinfo.dli_fname &&
			      strstr(sinfo.dli_fname, "nemo-preload");
	EXPECT(sem_interposed == interposed);
	sem_faults(sem_interposed);
	if (argc > 1 && !strcmp(argv[1], "expect-interposed"))
		EXPECT(interposed);
	printf("preload_prog: interposed %s, %d failures\n", interposed ? "yes" : "no", failures);
	return failures ? 1 : 0;
}
