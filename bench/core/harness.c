/*
 * harness.c - pinned threads, the busy neighbour, the coherence probe,
 * context-switch counts, the pre-signal delay, watchdog waits, progress.
 */
#define _GNU_SOURCE
#include "bench.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------- errors */

static void vsay(const char *prefix, const char *fmt, va_list ap)
{
	fprintf(stderr, "nemo-bench: %s", prefix);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay("", fmt, ap);
	va_end(ap);
	exit(EXIT_USAGE);
}

void fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay("", fmt, ap);
	va_end(ap);
	exit(EXIT_FAILURE);
}

void warn(const bench_opts *o, const char *fmt, ...)
{
	if (o->quiet)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsay("warning: ", fmt, ap);
	va_end(ap);
}

void mechanism_unavailable(const bench_opts *o, const char *name, const char *why, json_t *skipped)
{
	if (o->nmechs)
		fatal("mechanism %s is not available here: %s", name, why);
	warn(o, "skipping %s: %s", name, why);
	json_array_append_new(skipped, json_pack("{s:s,s:s}", "mechanism", name, "reason", why));
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		fatal("out of memory");
	return p;
}

void *xaligned(size_t size)
{
	size_t n = (size + BENCH_CACHELINE - 1) / BENCH_CACHELINE * BENCH_CACHELINE;
	void *p = aligned_alloc(BENCH_CACHELINE, n ? n : BENCH_CACHELINE);
	if (!p)
		fatal("out of memory");
	memset(p, 0, n ? n : BENCH_CACHELINE);
	return p;
}

/* ------------------------------------------------------------- scenarios */

static const char *const sc_names[SC_COUNT] = {
	"polling", "blocked", "loaded", "busy", "one-way", "round-trip",
};

const char *scenario_name(unsigned sc)
{
	for (int i = 0; i < SC_COUNT; i++)
		if (sc == 1u << i)
			return sc_names[i];
	return "?";
}

unsigned scenario_parse(const char *name)
{
	for (int i = 0; i < SC_COUNT; i++)
		if (strcmp(name, sc_names[i]) == 0)
			return 1u << i;
	return 0;
}

/* --------------------------------------------------------------- threads */

struct pinned_start {
	int cpu;
	void *(*fn)(void *);
	void *arg;
};

static void *pinned_trampoline(void *p)
{
	struct pinned_start s = *(struct pinned_start *)p;
	free(p);
	int err = nemo_pin_self(s.cpu);
	if (err)
		fatal("cannot pin a thread to CPU %d: %s", s.cpu, nemo_strerror(err));
	return s.fn(s.arg);
}

void thread_start_pinned(pthread_t *t, int cpu, void *(*fn)(void *), void *arg)
{
	struct pinned_start *s = xcalloc(1, sizeof *s);
	*s = (struct pinned_start){ cpu, fn, arg };
	bench_thread_start(t, pinned_trampoline, s);
}

static void *busy_main(void *p)
{
	busy_thread *b = p;
	volatile uint64_t sink = 0;
	uint64_t x = 88172645463325252ULL;
	while (!atomic_load_explicit(&b->stop, memory_order_relaxed)) {
		for (int i = 0; i < 256; i++)
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		sink = x;
	}
	(void)sink;
	return NULL;
}

void busy_start(busy_thread *b, int cpu)
{
	atomic_init(&b->stop, false);
	b->cpu = cpu;
	thread_start_pinned(&b->t, cpu, busy_main, b);
}

void busy_stop(busy_thread *b)
{
	atomic_store(&b->stop, true);
	pthread_join(b->t, NULL);
}

void thread_ctx_switches(long *voluntary, long *total)
{
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	*voluntary = ru.ru_nvcsw;
	*total = ru.ru_nvcsw + ru.ru_nivcsw;
}

double thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ---------------------------------------------------------- CPUs, topology */

int bench_usable_cpus(int *out, int max)
{
	cpu_set_t set;
	int n = 0;
	if (sched_getaffinity(0, sizeof set, &set) != 0) {
		for (int c = 0; c < nemo_cpu_count() && n < max; c++)
			out[n++] = c;
		return n;
	}
	for (int c = 0; c < CPU_SETSIZE && n < max; c++)
		if (CPU_ISSET(c, &set))
			out[n++] = c;
	return n;
}

static struct {
	bool tried;
	nemo_topo *t;                 /* NULL: unknown */
} topo;

static nemo_topo *bench_topo(void)
{
	if (!topo.tried) {
		topo.tried = true;
		if (nemo_topo_load(&topo.t) != 0)
			topo.t = NULL;
	}
	return topo.t;
}

int bench_cpu_distance(int cpu_a, int cpu_b)
{
	int d;
	nemo_topo *t = bench_topo();
	if (!t || nemo_topo_distance(t, cpu_a, cpu_b, &d) != 0)
		return cpu_a == cpu_b ? 0 : -1;
	return d;
}

int bench_cpu_core(int cpu)
{
	nemo_topo *t = bench_topo();
	if (!t)
		return -1;
	for (int i = 0; i < nemo_topo_cpus(t); i++) {
		nemo_cpu_place p;
		if (nemo_topo_cpu(t, i, &p) == 0 && p.cpu == cpu)
			return p.core;
	}
	return -1;
}

/* ------------------------------------------------------- coherence probe */

struct probe {
	_Alignas(BENCH_CACHELINE) atomic_uint ping;
	_Alignas(BENCH_CACHELINE) atomic_uint pong;
	int rounds;
};

static void *probe_echo(void *p)
{
	struct probe *pr = p;
	for (unsigned i = 1; i <= (unsigned)pr->rounds; i++) {
		wait_until_eq(&pr->ping, i, BENCH_STUCK_S, "coherence probe");
		atomic_store_explicit(&pr->pong, i, memory_order_release);
	}
	return NULL;
}

struct probe_run {
	struct probe *pr;
	double *rtt;
};

static void *probe_ping(void *p)
{
	struct probe_run *run = p;
	struct probe *pr = run->pr;
	for (unsigned i = 1; i <= (unsigned)pr->rounds; i++) {
		uint64_t t0 = nemo_ticks_ordered();
		atomic_store_explicit(&pr->ping, i, memory_order_release);
		wait_until_eq(&pr->pong, i, BENCH_STUCK_S, "coherence probe");
		run->rtt[i - 1] = nemo_ticks_to_ns((int64_t)(nemo_ticks_ordered() - t0)) / 2;
	}
	return NULL;
}

double coherence_probe(int cpu_a, int cpu_b, int rounds)
{
	struct probe *pr = xaligned(sizeof *pr);
	atomic_init(&pr->ping, 0);
	atomic_init(&pr->pong, 0);
	pr->rounds = rounds;
	struct probe_run run = { pr, xcalloc((size_t)rounds, sizeof(double)) };
	pthread_t a, b;
	thread_start_pinned(&b, cpu_b, probe_echo, pr);
	thread_start_pinned(&a, cpu_a, probe_ping, &run);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	/* The first rounds pull the lines into place: skip a tenth. */
	int skip = rounds / 10;
	double med = stats_median(run.rtt + skip, (size_t)(rounds - skip));
	free(run.rtt);
	free(pr);
	return med;
}

/* ------------------------------------------------------- delays & waits */

void random_delay(uint64_t *rng, double min_us, double max_us)
{
	double span = max_us - min_us;
	double us = min_us + (span > 0 ? span * (double)(rng_next(rng) >> 11) * 0x1p-53 : 0);
	if (us > 0)
		nemo_spin_ns(us * 1000.0);
}

void wait_until_eq(const atomic_uint *word, unsigned want, double timeout_s, const char *what)
{
	if (atomic_load_explicit(word, memory_order_acquire) == want)
		return;
	uint64_t deadline = nemo_ticks() + nemo_ns_to_ticks(timeout_s * 1e9);
	unsigned n = 0;
	while (atomic_load_explicit(word, memory_order_acquire) != want) {
		nemo_cpu_relax();
		/* Check the clock only now and then: it costs more than a load. */
		if ((++n & 1023u) == 0 && nemo_ticks() > deadline)
			fatal("%s: no progress for %.0f s (a lost wake-up?); giving up",
			      what, timeout_s);
	}
}

/* -------------------------------------------------------------- progress */

static struct {
	bool on;
	const char *what;
	uint64_t total;
	atomic_uint_fast64_t done;
	uint64_t start;
	bool drawn;
} prog;

void progress_begin(const bench_opts *o, const char *what, uint64_t total)
{
	prog.on = !o->quiet && isatty(STDERR_FILENO);
	prog.what = what;
	prog.total = total ? total : 1;
	atomic_store(&prog.done, 0);
	prog.start = nemo_ticks();
	prog.drawn = false;
}

void progress_add(uint64_t units)
{
	atomic_fetch_add_explicit(&prog.done, units, memory_order_relaxed);
}

static void progress_draw(void)
{
	if (!prog.on)
		return;
	double el = nemo_ticks_to_ns((int64_t)(nemo_ticks() - prog.start)) / 1e9;
	if (el < 1.0 && !prog.drawn)
		return;
	uint64_t d = atomic_load_explicit(&prog.done, memory_order_relaxed);
	double f = (double)d / (double)prog.total;
	if (f > 1)
		f = 1;
	int w = 30, fill = (int)(f * w);
	char bar[32];
	for (int i = 0; i < w; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[w] = 0;
	double eta = f > 0.01 ? el * (1 - f) / f : 0;
	fprintf(stderr, "\r%-28.28s [%s] %3.0f%%  %5.1fs left ", prog.what, bar, f * 100, eta);
	prog.drawn = true;
}

void progress_tick(void)
{
	bench_interrupted();
	progress_draw();
}

void progress_join(pthread_t *threads, int n)
{
	for (int i = 0; i < n; i++) {
		for (;;) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 100 * 1000 * 1000;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			/* Pass on a Ctrl-C to the measuring threads (they
			 * look between trials). */
			bench_interrupted();
			int err = pthread_timedjoin_np(threads[i], NULL, &ts);
			if (err != ETIMEDOUT && err != EINTR)
				break;
			progress_draw();
		}
	}
}

void progress_end(void)
{
	if (prog.on && prog.drawn)
		fprintf(stderr, "\r%*s\r", 60, "");
}
