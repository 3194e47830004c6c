/*
 * xproc.c - cross-process unicast rows (xproc.h): the receiver is a
 * forked child, the sender this process; their stamps meet in a shared
 * page.  The TSC is one clock for both (the child inherits the parent's
 * calibration with its memory).  Both sides use the calls a program
 * uses in-process (nemo_am_send, nemo_notify, nemo_place_wait, handlers
 * of nemo/am.h's type) on the shared domain's places.
 */
#define _GNU_SOURCE
#include "xproc.h"

#include <nemo/xproc.h>
#include <nemo/am.h>
#include <nemo/notify.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *const xproc_mechs[] = {
	"nemo-am-xproc", "nemo-event-xproc", "futex-xproc", "eventfd-xproc", "pipe-xproc",
	"unix-socket-xproc", NULL,
};

enum { X_AM, X_EVENT, X_FUTEX, X_EVENTFD, X_PIPE, X_UNIX };

static int mech_index(const char *name)
{
	for (int i = 0; xproc_mechs[i]; i++)
		if (!strcmp(name, xproc_mechs[i]))
			return i;
	return -1;
}

unsigned xproc_scenarios(const char *name)
{
	int i = mech_index(name);
	if (i < 0)
		return 0;
	return i <= X_EVENT ? (SC_POLLING | SC_BLOCKED) : SC_BLOCKED;
}

/* The page both processes share. */
struct xshared {
	_Alignas(BENCH_CACHELINE) atomic_uint ready;       /* receiver: about to wait for seq */
	_Alignas(BENCH_CACHELINE) _Atomic uint32_t word;   /* futex-xproc's word */
	_Alignas(BENCH_CACHELINE) atomic_int rx_status;    /* 0 running, 1 done, -1 failed */
	double ctx, vctx, cpu_ns;                          /* receiver's, per trial */
	char why[160];
	_Alignas(BENCH_CACHELINE) _Atomic uint64_t wake[]; /* per seq (1-based: wake[seq-1]) */
};

struct xrun {
	int mech;
	unsigned sc;
	long total;
	struct xshared *sh;
	char seg[64];
	int fd[2];                /* eventfd (fd[0]), pipe, socket pair */
};

static _Atomic uint64_t *stamp_slot;   /* receiver: wake[] of the run */
static long stamp_total;

static void on_am(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	uint64_t t = nemo_ticks();
	if (m->arg >= 1 && (long)m->arg <= stamp_total)
		atomic_store_explicit(&stamp_slot[m->arg - 1], t, memory_order_relaxed);
}

static void on_event(void *ctx, nemo_place_id src, uint32_t chan)
{
	(void)ctx;
	(void)src;
	uint64_t t = nemo_ticks();
	if (chan >= 1 && (long)chan <= stamp_total)
		atomic_store_explicit(&stamp_slot[chan - 1], t, memory_order_relaxed);
}

static int rx_fail(struct xshared *sh, const char *what, int rc)
{
	snprintf(sh->why, sizeof sh->why, "receiver: %s: %s", what, strerror(rc));
	atomic_store(&sh->rx_status, -1);
	return 1;
}

static int receiver(struct xrun *r, int cpu)
{
	struct xshared *sh = r->sh;
	if (nemo_pin_self(cpu))
		return rx_fail(sh, "pin", EINVAL);
	stamp_slot = sh->wake;
	stamp_total = r->total;
	nemo_xproc *x = NULL;
	nemo_xproc_place *q = NULL;
	int rc;
	if (r->mech == X_AM || r->mech == X_EVENT) {
		if ((rc = nemo_xproc_attach(r->seg, NULL, &x)))
			return rx_fail(sh, "nemo_xproc_attach", rc);
		if ((rc = nemo_xproc_handle_am(x, "stamp", on_am, NULL)))
			return rx_fail(sh, "nemo_xproc_handle", rc);
		if ((rc = nemo_xproc_join(x, "rx", &q, NULL)))
			return rx_fail(sh, "nemo_xproc_join", rc);
		nemo_notify_set_handler(on_event, NULL);
		nemo_wait_policy pol = {.kind = r->sc == SC_POLLING ? NEMO_WAIT_SPIN : NEMO_WAIT_BLOCK};
		nemo_xproc_set_policy(q, &pol);
	}
	struct rusage ru0, ru1;
	getrusage(RUSAGE_SELF, &ru0);
	for (long seq = 1; seq <= r->total; seq++) {
		atomic_store_explicit(&sh->ready, (unsigned)seq, memory_order_release);
		uint64_t t = 0;
		unsigned char b[8];
		switch (r->mech) {
		case X_AM:
		case X_EVENT:
			while (atomic_load_explicit(&sh->wake[seq - 1], memory_order_relaxed) == 0) {
				struct timespec dl;
				clock_gettime(CLOCK_MONOTONIC, &dl);
				dl.tv_sec += 20;
				rc = nemo_place_wait(&dl, NULL);
				if (rc && rc != EOWNERDEAD)
					return rx_fail(sh, "nemo_place_wait", rc);
			}
			continue;
		case X_FUTEX:
			while (atomic_load_explicit(&sh->word, memory_order_acquire) != (uint32_t)seq)
				nemo_futex_wait((uint32_t *)&sh->word, (uint32_t)seq - 1, NULL, NEMO_FUTEX_SHARED);
			t = nemo_ticks();
			break;
		case X_EVENTFD:
			if (read(r->fd[0], b, 8) != 8)
				return rx_fail(sh, "read(eventfd)", errno);
			t = nemo_ticks();
			break;
		case X_PIPE:
		case X_UNIX:
			if (read(r->fd[0], b, 1) != 1)
				return rx_fail(sh, "read", errno);
			t = nemo_ticks();
			break;
		}
		atomic_store_explicit(&sh->wake[seq - 1], t, memory_order_relaxed);
	}
	getrusage(RUSAGE_SELF, &ru1);
	double n = (double)r->total;
	sh->vctx = (double)(ru1.ru_nvcsw - ru0.ru_nvcsw) / n;
	sh->ctx = (double)(ru1.ru_nvcsw - ru0.ru_nvcsw + ru1.ru_nivcsw - ru0.ru_nivcsw) / n;
	sh->cpu_ns = ((double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) * 1e9 +
		      (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) * 1e3) / n;
	if (x)
		nemo_xproc_detach(x);
	atomic_store(&sh->rx_status, 1);
	return 0;
}

void xproc_acc_init(xproc_acc *a, const char *name, unsigned sc, long trials)
{
	*a = (xproc_acc){.name = name, .sc = sc, .lat = xcalloc((size_t)trials, sizeof(double)),
			 .snd = xcalloc((size_t)trials, sizeof(double))};
}

void xproc_acc_free(xproc_acc *a)
{
	free(a->lat);
	free(a->snd);
}

void xproc_emit(const bench_opts *o, xproc_acc *a, int src, int dst, json_t *results)
{
	if (a->n == 0)
		return;
	double n = (double)a->n;
	row out = {.mechanism = a->name, .scenario = scenario_name(a->sc), .src = src, .dst = dst,
		   .trials = a->n, .lat_ns = a->lat, .nlat = (size_t)a->n, .send_ns = a->snd,
		   .ctx = a->ctx / n, .vctx = a->vctx / n, .cpu_ns = a->cpu_ns / n,
		   .probe_before = a->probe_before, .probe_after = a->probe_after};
	row_emit(o, &out, results);
}

bool xproc_row(const bench_opts *o, const char *name, unsigned sc, int src, int dst, json_t *results,
	       char *why, size_t whylen)
{
	xproc_acc a;
	xproc_acc_init(&a, name, sc, o->trials);
	bool ok = xproc_measure(o, &a, src, dst, o->trials, why, whylen);
	if (ok)
		xproc_emit(o, &a, src, dst, results);
	xproc_acc_free(&a);
	return ok;
}

bool xproc_measure(const bench_opts *o, xproc_acc *acc, int src, int dst, long trials, char *why,
		   size_t whylen)
{
	const char *name = acc->name;
	unsigned sc = acc->sc;
	int mech = mech_index(name);
	if (mech < 0 || !(xproc_scenarios(name) & sc)) {
		snprintf(why, whylen, "%s does not run in scenario %s", name, scenario_name(sc));
		return false;
	}
	struct xrun r = {.mech = mech, .sc = sc, .total = o->warmup + trials, .fd = {-1, -1}};
	size_t shsize = sizeof(struct xshared) + (size_t)r.total * sizeof(uint64_t);
	r.sh = mmap(NULL, shsize, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (r.sh == MAP_FAILED) {
		snprintf(why, whylen, "mmap: %s", strerror(errno));
		return false;
	}
	nemo_xproc *x = NULL;
	nemo_xproc_place *p = NULL;
	uint32_t code = 0;
	int rc = 0;
	switch (mech) {
	case X_AM:
	case X_EVENT:
		snprintf(r.seg, sizeof r.seg, "nemo-bench-xproc-%d", (int)getpid());
		nemo_xproc_unlink(r.seg);
		if ((rc = nemo_xproc_create(r.seg, NULL, &x)) || (rc = nemo_xproc_join(x, "tx", &p, NULL)) ||
		    (rc = nemo_xproc_name(x, "stamp", &code))) {
			snprintf(why, whylen, "%s", nemo_last_error());
			goto out;
		}
		break;
	case X_EVENTFD:
		r.fd[0] = eventfd(0, EFD_CLOEXEC);
		r.fd[1] = r.fd[0];
		rc = r.fd[0] < 0 ? errno : 0;
		break;
	case X_PIPE:
		rc = pipe2(r.fd, O_CLOEXEC) ? errno : 0;
		break;
	case X_UNIX:
		rc = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, r.fd) ? errno : 0;
		break;
	default:
		break;
	}
	if (rc) {
		snprintf(why, whylen, "setup: %s", strerror(rc));
		goto out;
	}
	double probe_before = coherence_probe(src, dst, 1000);
	pid_t kid = fork();
	if (kid < 0) {
		rc = errno;
		snprintf(why, whylen, "fork: %s", strerror(rc));
		goto out;
	}
	if (kid == 0)
		_exit(receiver(&r, dst));
	nemo_pin_self(src);
	nemo_xproc_id rx = 0;
	nemo_place_id rxp = NEMO_PLACE_NONE;
	double *lat = acc->lat + acc->n;
	double *snd = acc->snd + acc->n;
	uint64_t *tsend = xcalloc((size_t)r.total, sizeof(uint64_t));
	uint64_t rng = o->seed ^ (uint64_t)mech << 32 ^ sc;
	bool ok = true;
	for (long seq = 1; seq <= r.total && ok; seq++) {
		/* The receiver's announcement, with a deadline (never a hang). */
		uint64_t deadline = nemo_ticks() + nemo_ns_to_ticks(20e9);
		while (atomic_load_explicit(&r.sh->ready, memory_order_acquire) != (unsigned)seq) {
			if (atomic_load(&r.sh->rx_status) < 0 || nemo_ticks() > deadline) {
				ok = false;
				break;
			}
			nemo_cpu_relax();
		}
		if (!ok)
			break;
		if ((mech == X_AM || mech == X_EVENT) && !rx) {
			while (nemo_xproc_find(x, "rx", &rx) != 0)
				nemo_cpu_relax();
			rxp = nemo_xproc_place_id(x, rx);
		}
		random_delay(&rng, o->delay_min_us, o->delay_max_us);
		uint64_t t0 = nemo_ticks_ordered();
		uint64_t one = 1;
		switch (mech) {
		case X_AM:
			rc = nemo_am_send(rxp, code, (uint64_t)seq, 0);
			break;
		case X_EVENT:
			rc = nemo_notify(rxp, (uint32_t)seq, 0);
			break;
		case X_FUTEX:
			atomic_store_explicit(&r.sh->word, (uint32_t)seq, memory_order_release);
			rc = nemo_futex_wake((uint32_t *)&r.sh->word, 1, NEMO_FUTEX_SHARED, NULL);
			break;
		case X_EVENTFD:
			rc = write(r.fd[1], &one, 8) == 8 ? 0 : errno;
			break;
		default:
			rc = write(r.fd[1], "x", 1) == 1 ? 0 : errno;
			break;
		}
		uint64_t t1 = nemo_ticks_ordered();
		tsend[seq - 1] = t0;
		if (rc) {
			snprintf(why, whylen, "signal: %s", strerror(rc));
			ok = false;
		}
		if (seq > o->warmup)
			snd[seq - 1 - o->warmup] = nemo_ticks_to_ns((int64_t)(t1 - t0));
	}
	int st = 0;
	if (!ok)
		kill(kid, SIGKILL);
	waitpid(kid, &st, 0);
	if (ok && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
		snprintf(why, whylen, "%s", r.sh->why[0] ? r.sh->why : "receiver failed");
		ok = false;
	} else if (!ok && !why[0]) {
		snprintf(why, whylen, "%s", r.sh->why[0] ? r.sh->why : "receiver did not announce in 20 s");
	}
	if (ok) {
		for (long i = 0; i < trials; i++) {
			long s = o->warmup + i;
			lat[i] = nemo_ticks_to_ns((int64_t)(atomic_load(&r.sh->wake[s]) - tsend[s]));
		}
		if (acc->n == 0)
			acc->probe_before = probe_before;
		acc->probe_after = coherence_probe(src, dst, 1000);
		acc->ctx += r.sh->ctx * (double)trials;
		acc->vctx += r.sh->vctx * (double)trials;
		acc->cpu_ns += r.sh->cpu_ns * (double)trials;
		acc->n += trials;
	}
	free(tsend);
	rc = ok ? 0 : EIO;
out:
	if (x) {
		nemo_xproc_unlink(r.seg);
		nemo_xproc_detach(x);
	}
	if (r.fd[0] >= 0)
		close(r.fd[0]);
	if (r.fd[1] >= 0 && r.fd[1] != r.fd[0])
		close(r.fd[1]);
	munmap(r.sh, shsize);
	return rc == 0;
}
