/*
 * preload.c - libnemo-preload.so: LD_PRELOAD it and an unmodified
 * program's pthread_cond_* calls go to nemo_cond, and its sem_wait,
 * sem_timedwait and sem_clockwait poll before glibc's call sleeps
 * (SEMAPHORES, below), with the wait policy of NEMO_WAIT (spin, block,
 * hybrid[:NS], adaptive; default adaptive).
 *
 * Why this is safe for real programs:
 *  - A nemo_cond has the size of pthread_cond_t and all-zero is a valid
 *    initialised nemo_cond, so PTHREAD_COND_INITIALIZER works as is.
 *  - Process-shared condvars go to glibc.  pthread_cond_init with the
 *    PTHREAD_PROCESS_SHARED attribute calls glibc's init, which sets bit 0
 *    of the 32-bit word at offset 36 (glibc's __wrefs); nemo never sets
 *    that bit (cond.c keeps its flags there on purpose), so every later
 *    call on that object is routed to glibc by looking at it.
 *  - glibc's own functions are found with dlvsym at version GLIBC_2.3.2
 *    (GLIBC_2.30 for clockwait): a plain dlsym can return the pre-2003
 *    compatibility versions, which have another layout.
 *  - Fork and cancellation are handled inside nemo_cond (cond.c).
 *  - errno is left as the program had it, as glibc's condvar leaves it
 *    (nemo's own futex wrappers keep it too; this is the last guard).
 * Only the pthread_cond_* and sem_*wait symbols are exported
 * (preload.map), so the library's own functions cannot clash with a
 * program's.
 * Not covered: binaries linked against the pre-2.3.2 condvar ABI.
 */
#define _GNU_SOURCE
#include <nemo/event.h>

#include <nemo/waiter.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*init_fn)(pthread_cond_t *, const pthread_condattr_t *);
typedef int (*one_fn)(pthread_cond_t *);
typedef int (*wait_fn)(pthread_cond_t *, pthread_mutex_t *);
typedef int (*timed_fn)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
typedef int (*clock_fn)(pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *);

static struct {
	init_fn init;
	one_fn destroy, signal, broadcast;
	wait_fn wait;
	timed_fn timedwait;
	clock_fn clockwait;
} glibc;
static pthread_once_t glibc_once = PTHREAD_ONCE_INIT;

static void *find(const char *name, const char *version)
{
	void *f = version ? dlvsym(RTLD_NEXT, name, version) : NULL;
	if (!f)
		f = dlsym(RTLD_NEXT, name);
	if (!f) {
		fprintf(stderr, "nemo-preload: cannot find glibc's %s\n", name);
		abort();
	}
	return f;
}

/* POSIX's way to turn dlsym's void * into a function pointer. */
static void glibc_load(void)
{
	*(void **)&glibc.init = find("pthread_cond_init", "GLIBC_2.3.2");
	*(void **)&glibc.destroy = find("pthread_cond_destroy", "GLIBC_2.3.2");
	*(void **)&glibc.signal = find("pthread_cond_signal", "GLIBC_2.3.2");
	*(void **)&glibc.broadcast = find("pthread_cond_broadcast", "GLIBC_2.3.2");
	*(void **)&glibc.wait = find("pthread_cond_wait", "GLIBC_2.3.2");
	*(void **)&glibc.timedwait = find("pthread_cond_timedwait", "GLIBC_2.3.2");
	*(void **)&glibc.clockwait = find("pthread_cond_clockwait", "GLIBC_2.30");
}

/* Initialised by glibc as process-shared (see the top of this file). */
static int is_glibc(const pthread_cond_t *c)
{
	uint32_t w;
	memcpy(&w, (const char *)c + 36, sizeof w);
	if (!(w & 1u))
		return 0;
	pthread_once(&glibc_once, glibc_load);
	return 1;
}

#define NC(c) ((nemo_cond *)(void *)(c))

/* glibc declares these arguments nonnull, so a plain `if (!c)` may be
 * compiled away; a NULL still deserves EINVAL rather than a crash. */
__attribute__((noinline, noipa)) static int is_null(const volatile void *p)
{
	return p == NULL;
}

/* ---------------------------------------------------------------- STATS
 *
 * NEMO_STATS: at exit, one line with what the interposer and the waits did
 * - to see what nemo did to a program without changing it (nemo-run
 * --stats sets it):
 *   unset, empty or 0   nothing;
 *   1                   the line on stderr;
 *   a path (it has a /) the line appended to that file (a relative path is
 *                       taken from the working directory at start), so
 *                       that every process of a tree adds its own line.
 * Anything else is refused at start with one message on stderr.
 *
 * The line: the calls interposed (condvar waits, signals and broadcasts,
 * semaphore waits, and the calls on process-shared condvars left to
 * glibc), then nemo_waiter_get_counters() (waits, how many polled, slept;
 * kicks issued, avoided) and the adaptive policy's cost of blocking.
 *
 * The interposer counts its calls only when NEMO_STATS asks for the line
 * (otherwise one predictable branch per call).  Each thread counts in a
 * block of its own, a cache line taken from a static pool at its first
 * counted call (no allocation: malloc may itself wait on a condvar), so
 * that counting adds no sharing between threads; the blocks of threads
 * that exited stay counted.  Past the pool's blocks, threads share one
 * block with atomic additions. */

enum { ST_COND_WAIT, ST_COND_WAKE, ST_SEM_WAIT, ST_GLIBC, ST_KINDS };

struct st_block {
	_Alignas(64) _Atomic uint64_t n[ST_KINDS];
};

#define ST_POOL 1024
static struct st_block st_pool[ST_POOL];
static struct st_block st_shared;   /* past the pool */
static atomic_uint st_used;
static __thread struct st_block *st_mine;
static int st_mode;                 /* 0 off, 1 stderr, 2 file */
static char st_path[4096];

/* Only the owner writes its block: a relaxed load and store, no lock. */
__attribute__((noinline)) static void st_count_slow(int kind)
{
	struct st_block *b = st_mine;
	if (!b) {
		unsigned i = atomic_fetch_add_explicit(&st_used, 1, memory_order_relaxed);
		b = i < ST_POOL ? &st_pool[i] : &st_shared;
		st_mine = b;
	}
	if (b == &st_shared) {
		atomic_fetch_add_explicit(&b->n[kind], 1, memory_order_relaxed);
		return;
	}
	atomic_store_explicit(&b->n[kind], atomic_load_explicit(&b->n[kind], memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

static inline void st_count(int kind)
{
	if (__builtin_expect(st_mode != 0, 0))
		st_count_slow(kind);
}

/* A child of fork counts its own calls. */
static void st_forked(void)
{
	unsigned used = atomic_load_explicit(&st_used, memory_order_relaxed);
	for (unsigned i = 0; i < used && i < ST_POOL; i++)
		for (int k = 0; k < ST_KINDS; k++)
			atomic_store_explicit(&st_pool[i].n[k], 0, memory_order_relaxed);
	for (int k = 0; k < ST_KINDS; k++)
		atomic_store_explicit(&st_shared.n[k], 0, memory_order_relaxed);
}

__attribute__((constructor)) static void stats_init(void)
{
	const char *s = getenv("NEMO_STATS");
	if (!s || !*s || !strcmp(s, "0"))
		return;
	if (!strcmp(s, "1")) {
		st_mode = 1;
	} else if (strchr(s, '/')) {
		char cwd[2048];
		int n = s[0] == '/' || !getcwd(cwd, sizeof cwd)
				? snprintf(st_path, sizeof st_path, "%s", s)
				: snprintf(st_path, sizeof st_path, "%s/%s", cwd, s);
		if (n < 0 || (size_t)n >= sizeof st_path) {
			fprintf(stderr, "nemo-preload: NEMO_STATS: the path is too long; no statistics\n");
			return;
		}
		st_mode = 2;
	} else {
		fprintf(stderr,
			"nemo-preload: NEMO_STATS='%s' is neither 1 (stderr) nor a path with a '/' "
			"(./%s for a file here); no statistics\n", s, s);
		return;
	}
	pthread_atfork(NULL, NULL, st_forked);
}

__attribute__((destructor)) static void stats_at_exit(void)
{
	if (!st_mode)
		return;
	uint64_t n[ST_KINDS] = {0};
	unsigned used = atomic_load_explicit(&st_used, memory_order_relaxed);
	for (unsigned i = 0; i < used && i < ST_POOL; i++)
		for (int k = 0; k < ST_KINDS; k++)
			n[k] += atomic_load_explicit(&st_pool[i].n[k], memory_order_relaxed);
	for (int k = 0; k < ST_KINDS; k++)
		n[k] += atomic_load_explicit(&st_shared.n[k], memory_order_relaxed);
	nemo_waiter_counters c = {0};
	nemo_wait_calibration cal = {0};
	int have_cal = nemo_waiter_get_counters(&c) == 0 && nemo_wait_get_calibration(&cal) == 0;
	char line[640];
	int len = snprintf(line, sizeof line,
			   "nemo-preload: pid %ld (%s): interposed %llu condvar waits, %llu signals/broadcasts, "
			   "%llu semaphore waits, %llu process-shared calls left to glibc; "
			   "%llu waits: %llu polled, %llu slept; kicks %llu issued, %llu avoided",
			   (long)getpid(), program_invocation_short_name, (unsigned long long)n[ST_COND_WAIT],
			   (unsigned long long)n[ST_COND_WAKE], (unsigned long long)n[ST_SEM_WAIT],
			   (unsigned long long)n[ST_GLIBC], (unsigned long long)c.waits,
			   (unsigned long long)c.waits_polled, (unsigned long long)c.sleeps,
			   (unsigned long long)c.kicks_issued, (unsigned long long)c.kicks_avoided);
	if (len > 0 && (size_t)len < sizeof line && have_cal)
		len += snprintf(line + len, sizeof line - (size_t)len, "; cost of blocking %.0f ns (%s, %u samples)",
				cal.budget_ns, cal.source, cal.samples);
	if (len < 0)
		return;
	if ((size_t)len >= sizeof line - 1)
		len = (int)sizeof line - 2;
	line[len++] = '\n';
	int fd = 2, saved = errno;
	if (st_mode == 2) {
		fd = open(st_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0) {
			fprintf(stderr, "nemo-preload: NEMO_STATS: cannot open %s: %s; the line goes here\n", st_path,
				strerror(errno));
			fd = 2;
		}
	}
	ssize_t w = write(fd, line, (size_t)len);   /* one write: lines of processes never interleave */
	(void)w;
	if (fd != 2)
		close(fd);
	errno = saved;
}

/* Run a nemo_cond call with the caller's errno kept. */
#define KEEP_ERRNO(call)                  \
	do {                              \
		int saved_ = errno;       \
		int rc_ = (call);         \
		errno = saved_;           \
		return rc_;               \
	} while (0)

int pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *a)
{
	int pshared = PTHREAD_PROCESS_PRIVATE;
	if (a && pthread_condattr_getpshared(a, &pshared) == 0 && pshared == PTHREAD_PROCESS_SHARED) {
		pthread_once(&glibc_once, glibc_load);
		return glibc.init(c, a);
	}
	KEEP_ERRNO(nemo_cond_init(NC(c), a));
}

int pthread_cond_destroy(pthread_cond_t *c)
{
	if (is_null(c))
		return EINVAL;
	if (is_glibc(c))
		return glibc.destroy(c);
	KEEP_ERRNO(nemo_cond_destroy(NC(c)));
}

int pthread_cond_signal(pthread_cond_t *c)
{
	if (is_null(c))
		return EINVAL;
	if (is_glibc(c)) {
		st_count(ST_GLIBC);
		return glibc.signal(c);
	}
	st_count(ST_COND_WAKE);
	KEEP_ERRNO(nemo_cond_signal(NC(c)));
}

int pthread_cond_broadcast(pthread_cond_t *c)
{
	if (is_null(c))
		return EINVAL;
	if (is_glibc(c)) {
		st_count(ST_GLIBC);
		return glibc.broadcast(c);
	}
	st_count(ST_COND_WAKE);
	KEEP_ERRNO(nemo_cond_broadcast(NC(c)));
}

int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
	if (is_null(c))
		return EINVAL;
	if (is_glibc(c)) {
		st_count(ST_GLIBC);
		return glibc.wait(c, m);
	}
	st_count(ST_COND_WAIT);
	KEEP_ERRNO(nemo_cond_wait(NC(c), m));
}

int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t)
{
	if (is_null(c))
		return EINVAL;
	if (is_glibc(c)) {
		st_count(ST_GLIBC);
		return glibc.timedwait(c, m, t);
	}
	st_count(ST_COND_WAIT);
	KEEP_ERRNO(nemo_cond_timedwait(NC(c), m, t));
}

int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clk,
			   const struct timespec *t)
{
	if (is_null(c))
		return EINVAL;
	if (is_glibc(c)) {
		st_count(ST_GLIBC);
		return glibc.clockwait(c, m, clk, t);
	}
	st_count(ST_COND_WAIT);
	KEEP_ERRNO(nemo_cond_clockwait(NC(c), m, clk, t));
}

/* ------------------------------------------------------------ SEMAPHORES
 *
 * POSIX semaphores: sem_wait, sem_timedwait and sem_clockwait poll
 * (nemo_wait_foreign, with the policy of NEMO_WAIT) before glibc's own
 * call sleeps.  glibc's semaphore stays what it is - layout, sem_post,
 * process-shared use - since the poll only calls glibc's sem_trywait,
 * and a poster whose waiter is still polling finds no sleeper and makes
 * no FUTEX_WAKE.  Why: CPython's threading.Lock is a semaphore, so each
 * hand-off between Python threads was a futex sleep and a wake-up that
 * nemo_cond (the GIL) could not reach.  The calls keep glibc's contract:
 * -1 with errno EINTR when a handler runs while they wait (for sem_wait
 * one without SA_RESTART; NEMO_WAIT_FOREIGN_EINTR: CPython's Ctrl-C in
 * Lock.acquire depends on it), EINVAL for a bad tv_nsec or clock,
 * ETIMEDOUT, errno untouched on success, and cancellation points.
 * NEMO_WAIT=block turns the poll off (one try, then glibc's call).
 *
 * The uncontended call (the semaphore above 0) takes glibc's own path:
 * the argument checks, a cancellation check, one sem_trywait.  Through
 * nemo_wait_foreign it cost about 220 instructions against glibc's 18;
 * now a loop of sem_wait and sem_timedwait on a semaphore above 0 counts
 * 60 instructions a call against glibc's 26 (callgrind, 300,000 calls). */

typedef int (*sem_one_fn)(sem_t *);
typedef int (*sem_timed_fn)(sem_t *, const struct timespec *);
typedef int (*sem_clock_fn)(sem_t *, clockid_t, const struct timespec *);

static struct {
	sem_one_fn wait, trywait;
	sem_timed_fn timedwait;
	sem_clock_fn clockwait;
} glibc_sem;
static pthread_once_t glibc_sem_once = PTHREAD_ONCE_INIT;

/* The default versions: the current semaphore ABI of this platform. */
static void glibc_sem_load(void)
{
	*(void **)&glibc_sem.wait = find("sem_wait", NULL);
	*(void **)&glibc_sem.trywait = find("sem_trywait", NULL);
	*(void **)&glibc_sem.timedwait = find("sem_timedwait", NULL);
	*(void **)&glibc_sem.clockwait = find("sem_clockwait", NULL);
}

static bool sem_take(void *s)
{
	return glibc_sem.trywait(s) == 0;
}

/* glibc's blocking call, with the deadline of the wait. */
static int sem_block(void *s, clockid_t clk, const struct timespec *abstime)
{
	int rc = !abstime ? glibc_sem.wait(s) : clk == CLOCK_REALTIME ? glibc_sem.timedwait(s, abstime)
							    : glibc_sem.clockwait(s, clk, abstime);
	return rc == 0 ? 0 : errno;
}

/* The wait proper, with the caller's errno to put back. */
__attribute__((noinline)) static int sem_wait_slow(sem_t *s, clockid_t clk, const struct timespec *abstime,
						   int saved)
{
	int rc = nemo_wait_foreign(sem_take, sem_block, s, NULL, clk, abstime,
				   NEMO_WAIT_FOREIGN_EINTR | NEMO_WAIT_FOREIGN_CANCEL);
	errno = rc ? rc : saved;
	return rc ? -1 : 0;
}

static inline int sem_wait_for(sem_t *s, clockid_t clk, const struct timespec *abstime)
{
	if (is_null(s)) {
		errno = EINVAL;
		return -1;
	}
	pthread_once(&glibc_sem_once, glibc_sem_load);
	st_count(ST_SEM_WAIT);
	int saved = errno;
	/* The uncontended path, as glibc's: checks, cancellation, one try.
	 * (Bad arguments go on to nemo_wait_foreign, which names them.) */
	if (!abstime || (abstime->tv_nsec >= 0 && abstime->tv_nsec < 1000000000L &&
			 (clk == CLOCK_MONOTONIC || clk == CLOCK_REALTIME))) {
		pthread_testcancel();
		if (glibc_sem.trywait(s) == 0)
			return 0;                /* errno untouched: trywait sets it only on failure */
	}
	return sem_wait_slow(s, clk, abstime, saved);
}

int sem_wait(sem_t *s)
{
	return sem_wait_for(s, CLOCK_REALTIME, NULL);
}

int sem_timedwait(sem_t *s, const struct timespec *abstime)
{
	if (is_null(abstime)) {
		errno = EINVAL;
		return -1;
	}
	return sem_wait_for(s, CLOCK_REALTIME, abstime);
}

int sem_clockwait(sem_t *s, clockid_t clk, const struct timespec *abstime)
{
	if (is_null(abstime)) {
		errno = EINVAL;
		return -1;
	}
	return sem_wait_for(s, clk, abstime);
}
