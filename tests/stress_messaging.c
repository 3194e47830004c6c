/*
 * stress_messaging.c - all-to-all floods of active messages and
 * notifications over one domain with small rings, oversubscribed (more
 * places than CPUs), every wait policy, interrupt mode, places leaving
 * and re-joining.
 *
 * Each of T threads is a place.  It sends active messages to random
 * destinations (itself included) with every flag mix (0, NEMO_MORE
 * published later by a plain send or nemo_flush, NEMO_PUSH, NEMO_NONBLOCK
 * retried on EAGAIN), by action id or by event, with payloads of 0..48
 * bytes, and notifications on the side.  Handlers sometimes reply
 * (NEMO_NONBLOCK only).  Checks, in the handlers:
 *
 *   - exactly once and FIFO: every message carries its stream's
 *     per-(sender thread, receiver thread) sequence number, which must be
 *     the previous one + 1 (notifications: the 16-bit chan carries it
 *     mod 2^11, the sender thread in bits 11-14, bit 15 telling replies
 *     apart);
 *   - visibility: the sender writes a plain data word before sending;
 *     the handler must read it;
 *   - the right handler: the action (handler function and context) the
 *     sender meant, an event resolved through the destination's own
 *     mapping (events map to different actions on different places and
 *     epochs), the payload bytes, src and dest, and the context the
 *     handler runs in (poll, wait, interrupt) against what the thread was
 *     doing;
 *   - leaving: a message sent to a place that left is either handled by
 *     it before its leave returned or refused with ESRCH; an id of a
 *     place known to be live is never refused.
 *
 * Sequences are per thread pair and continue across re-joins: a sender
 * that re-joined (a new place, a new link) sends a stream to a thread
 * again only once everything it sent there from its previous place was
 * handled (the library orders one place's messages, not two places').
 *
 * Three floods (struct cfg, main):
 *   ring8     8 places on 2 CPUs, 8-slot rings, 3 in interrupt mode;
 *   ring16    6 places, 16-slot rings, 2 in interrupt mode, a real-time
 *             signal as the interrupt signal;
 *   parallel  2 places on 2 CPUs, spin and hybrid waits: the lock-free
 *             paths at full speed (about 10x the oversubscribed rate).
 * Threads rejoin every 50-450 steps, some pinned (pinning must be undone
 * by the leave).  Meanwhile the main thread reads the domain's counters
 * (they never go down), lists its places and checks live ids.
 *
 * Handlers may run in a signal handler, so they touch only atomics and
 * thread-own memory and record failures in atomics (count, and the first
 * occurrence's details); main reports them.  At the end every thread
 * stops, flushes, and polls until every pair has handled up to the last
 * sequence number sent; then every pair's handler count must equal its
 * count of sends that returned 0, and the domain's counters must agree.
 * A watchdog prints every pair's state and fails the test if nothing
 * progresses for 20 s.  NEMO_STRESS_SCALE (default 1) scales the counts
 * (0.05 under the sanitizers).  About 26M messages in 25-50 s here.
 */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/nemo.h>

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TMAX 12                /* threads */
#define PMAX 16                /* max_places */
#define GENS 4096              /* id -> thread map: generations kept per index */
#define WIN 64                 /* data words per pair and stream */
#define NACT 4
#define NEV 3
#define SEQNF 0x7FFu            /* notification sequence bits in chan */

enum { S_AM, S_AMREPLY, S_NF, S_NFREPLY, NSTREAM };
static const char *stream_name[NSTREAM] = { "am", "am-reply", "notify", "notify-reply" };

/* What the thread is doing, as its handlers see it. */
enum {
	W_OUT,          /* not a place */
	W_NONE,         /* main code, outside nemo */
	W_POLL,         /* nemo_poll */
	W_WAIT,         /* nemo_place_wait */
	W_SEND,         /* a blocking send or notify */
	W_SENDNB,       /* a NEMO_NONBLOCK send or notify */
	W_FLUSH,        /* nemo_flush */
	W_LEAVE,        /* nemo_place_leave */
	W_SETIRQ,       /* nemo_place_set_interrupts */
	W_OTHER,        /* join, set_handler, event_map, set_policy */
	W_HANDLER,      /* inside one of our handlers */
};
static const char *where_name[] = { "out", "main", "poll", "wait", "send", "send-nb",
				    "flush", "leave", "set-irq", "other", "handler" };

/* Failures seen by handlers (signal context: counted, reported later). */
enum {
	F_WRONG_THREAD,    /* a message for another thread */
	F_STALE_DEST,      /* handled by a later place of the thread, or msg->dest wrong */
	F_SRC,             /* msg->src / notification src is not the sender's place */
	F_ACTION,          /* wrong action, handler context or event */
	F_PAYLOAD,         /* length or bytes */
	F_ORDER,           /* sequence not previous + 1 */
	F_VISIBILITY,      /* the sender's data word not visible */
	F_CONTEXT,         /* msg->context does not fit what the thread was doing */
	F_NESTED,          /* a handler ran inside a handler */
	F_OUTSIDE,         /* a handler ran while the thread was not a place */
	F_NF_CTX,          /* notification handler context pointer */
	F_REPLY_RC,        /* a reply send returned something unexpected */
	F_ERRNO,           /* an interrupt changed errno */
	NFAIL
};
static const char *fail_name[NFAIL] = {
	"message for another thread", "stale destination", "wrong src", "wrong action/event",
	"payload", "order (lost, duplicate or reordered)", "visibility", "handler context",
	"nested handler", "handler outside a place", "notification ctx", "reply send error",
	"errno changed by interrupt",
};
static _Atomic unsigned long fails[NFAIL];
static _Atomic uint64_t first_fail[NFAIL][5];
static atomic_flag first_fail_set[NFAIL];

static void fail(int kind, uint64_t a, uint64_t b, uint64_t c, uint64_t dd, uint64_t e)
{
	atomic_fetch_add(&fails[kind], 1);
	if (!atomic_flag_test_and_set(&first_fail_set[kind])) {
		atomic_store(&first_fail[kind][0], a);
		atomic_store(&first_fail[kind][1], b);
		atomic_store(&first_fail[kind][2], c);
		atomic_store(&first_fail[kind][3], dd);
		atomic_store(&first_fail[kind][4], e);
	}
}

/* Statistics, per thread, relaxed. */
enum {
	ST_AM_OK, ST_AM_MORE, ST_AM_PUSH, ST_AM_NB, ST_AM_EVENT, ST_AM_PAYLOAD,
	ST_NF_OK, ST_ESRCH, ST_EAGAIN, ST_NB_RETRIED,
	ST_REPLY_OK, ST_REPLY_EAGAIN, ST_REPLY_ESRCH,
	ST_CTX_POLL, ST_CTX_WAIT, ST_CTX_IRQ, ST_NF_HANDLED,
	ST_REJOIN, ST_COMPUTE, ST_WAIT_OK, ST_WAIT_TIMEOUT, ST_POLL, ST_FLUSH,
	ST_GATE_EPOCH, ST_GATE_WINDOW, ST_FLUSH_ALL_ESRCH,
	NST
};

/* ------------------------------------------------------------- helpers */

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

static uint64_t word_of(int stream, int s, int r, uint64_t seq)
{
	return mix(seq ^ ((uint64_t)s << 40) ^ ((uint64_t)r << 48) ^ ((uint64_t)stream << 56)) | 1;
}

static void fill_payload(unsigned char *p, size_t len, uint64_t w)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)((w >> ((i & 7) * 8)) ^ (i * 37));
}

static bool payload_ok(const unsigned char *p, size_t len, uint64_t w)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != (unsigned char)((w >> ((i & 7) * 8)) ^ (i * 37)))
			return false;
	return true;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static struct timespec in_ns(long ns)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_nsec += ns;
	while (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

static double scale = 1.0;

/* ------------------------------------------------------- message layout
 *
 * arg: bits 0-3 sender thread, 4-7 receiver thread, 8-9 action index,
 * 10 reply, 11-16 payload length, 17 sent by event, 18-19 event index,
 * 20-29 the receiver's epoch (mod 1024) as the sender knew it, 30-63 seq.
 */
static uint64_t make_arg(int s, int r, unsigned a, bool reply, size_t len, bool by_event,
			 unsigned e, uint32_t epoch, uint64_t seq)
{
	return (uint64_t)s | (uint64_t)r << 4 | (uint64_t)a << 8 | (uint64_t)reply << 10 |
	       (uint64_t)len << 11 | (uint64_t)by_event << 17 | (uint64_t)e << 18 |
	       (uint64_t)(epoch & 1023u) << 20 | seq << 30;
}

static const uint32_t act_id[NACT] = { 1, 7, 42, 63 };
static const uint32_t ev_id[NEV] = { 0, 5, 31 };
static const int act_fn[NACT] = { 0, 1, 0, 1 };     /* which handler function */
static int act_ctx[NACT];                           /* their contexts: &act_ctx[a] */

/* The action index thread t maps event index e to in its epoch. */
static unsigned mapping(int t, uint32_t epoch, unsigned e)
{
	return (unsigned)(t + (int)epoch + 2 * (int)e) % NACT;
}

/* ---------------------------------------------------------------- state */

struct thr {
	int t;
	pthread_t th;
	uint64_t rng;                 /* main code */
	uint64_t hrng;                /* handlers */
	bool irq_thread;              /* uses interrupt mode */
	nemo_wait_policy pol;
	_Atomic uint32_t epoch;       /* joins so far (bumped before each join) */
	_Atomic int where;
	_Atomic bool irq;             /* interrupt mode may be on */
	_Atomic bool ready;           /* the id map knows the current place */
	_Atomic int phase;            /* 0 sending, 1 quota done, 2 quiet, 3 left */
	uint64_t cache[TMAX];         /* main: pack(epoch, id) of each destination */
	uint32_t gate_main[NSTREAM][TMAX];  /* epoch of the last send per stream (main) */
	uint32_t gate_reply[NSTREAM][TMAX]; /* the same, for handlers */
	uint32_t deferred_mask;       /* destinations with NEMO_MORE sends unpublished */
	nemo_place_id deferred_id[TMAX];
	int deferred_budget;
	_Atomic long main_sent;
	_Atomic uint64_t st[NST];
	int nf_ctx;                   /* &nf_ctx: the notification handler's context */
	cpu_set_t affinity;           /* before the first join */
};

static struct run {
	nemo_domain *d;
	int T;
	long quota;                   /* main active messages per thread */
	struct thr th[TMAX];
	_Atomic uint64_t table[TMAX];            /* pack(epoch, id); the id may be stale */
	_Atomic uint64_t live[TMAX];             /* id while surely a place, else NONE */
	_Atomic uint64_t sent[NSTREAM][TMAX][TMAX];
	_Atomic uint64_t recv[NSTREAM][TMAX][TMAX];   /* next sequence number expected */
	_Atomic uint64_t count[NSTREAM][TMAX][TMAX];  /* handlers run */
	uint64_t data[NSTREAM][TMAX][TMAX][WIN];  /* plain: the visibility words */
	_Atomic int quota_done, quiet, exited;
	_Atomic bool stop;
	_Atomic uint64_t idmap[PMAX][GENS];      /* generation << 4 | (thread + 1) */
	pthread_barrier_t start;
} R;

static _Thread_local struct thr *self;
static _Atomic unsigned long progress;
static _Atomic bool finished;
static _Atomic(const char *) current = "start";

#define ST(me, k) atomic_fetch_add_explicit(&(me)->st[k], 1, memory_order_relaxed)

static void set_where(struct thr *me, int w)
{
	atomic_store_explicit(&me->where, w, memory_order_relaxed);
	atomic_signal_fence(memory_order_seq_cst);
}

static int thread_of(nemo_place_id id)
{
	if (id == NEMO_PLACE_NONE || nemo_place_index(id) >= PMAX)
		return -1;
	uint64_t gen = id >> 16;            /* nemo/domain.h: the high 48 bits */
	uint64_t v = atomic_load_explicit(&R.idmap[nemo_place_index(id)][gen % GENS], memory_order_relaxed);
	if ((v >> 4) != gen || (v & 15) == 0)
		return -1;
	return (int)(v & 15) - 1;
}

/* A thread's place as the others see it, in one word that a handler
 * reads at once (signal context: no locks): the epoch mod 2^16 (a
 * multiple of the 1024 and NACT that it is used modulo), the id's
 * generation (below 2^44: join checks it; about 10^5 joins per index
 * happen here) and its index (below PMAX = 16). */
#define PACK_NONE UINT64_MAX

static uint64_t pack(uint32_t epoch, nemo_place_id id)
{
	return (uint64_t)(epoch & 0xFFFFu) << 48 | (id >> 16) << 4 | nemo_place_index(id);
}

static nemo_place_id pack_id(uint64_t te)
{
	if (te == PACK_NONE)
		return NEMO_PLACE_NONE;
	return ((te & 0xFFFFFFFFFFFFull) >> 4) << 16 | (te & 15);
}

static uint32_t pack_epoch(uint64_t te)
{
	return (uint32_t)(te >> 48);
}

/* ------------------------------------------------------------- watchdog */

static void dump(void)
{
	fprintf(stderr, "stress_messaging: state of %s\n", atomic_load(&current));
	for (int t = 0; t < R.T; t++) {
		struct thr *x = &R.th[t];
		uint64_t te = atomic_load(&R.table[t]);
		fprintf(stderr, "  thread %d: phase %d, where %s, epoch %u, place %#llx (live %#llx), irq %d, main sent %ld\n",
			t, atomic_load(&x->phase), where_name[atomic_load(&x->where)],
			atomic_load(&x->epoch), (unsigned long long)pack_id(te),
			(unsigned long long)atomic_load(&R.live[t]),
			atomic_load(&x->irq), atomic_load(&x->main_sent));
	}
	for (int k = 0; k < NSTREAM; k++)
		for (int s = 0; s < R.T; s++)
			for (int r = 0; r < R.T; r++) {
				uint64_t a = atomic_load(&R.sent[k][s][r]), b = atomic_load(&R.recv[k][s][r]);
				if (a != b)
					fprintf(stderr, "  %s %d->%d: sent %llu, handled %llu\n", stream_name[k], s,
						r, (unsigned long long)a, (unsigned long long)b);
			}
	for (int k = 0; k < NFAIL; k++)
		if (atomic_load(&fails[k]))
			fprintf(stderr, "  %lu failures: %s; first: %#llx %#llx %#llx %#llx %#llx\n",
				atomic_load(&fails[k]), fail_name[k], (unsigned long long)atomic_load(&first_fail[k][0]),
				(unsigned long long)atomic_load(&first_fail[k][1]),
				(unsigned long long)atomic_load(&first_fail[k][2]),
				(unsigned long long)atomic_load(&first_fail[k][3]),
				(unsigned long long)atomic_load(&first_fail[k][4]));
	nemo_domain_counters c;
	if (R.d && nemo_domain_get_counters(R.d, &c) == 0)
		fprintf(stderr, "  domain: am %llu sent %llu handled, notify %llu sent %llu handled, "
				"kicks futex %llu signal %llu, full waits %llu, sleeps %llu\n",
			(unsigned long long)c.am_sent, (unsigned long long)c.am_handled,
			(unsigned long long)c.notify_sent, (unsigned long long)c.notify_handled,
			(unsigned long long)c.kicks_futex, (unsigned long long)c.kicks_signal,
			(unsigned long long)c.full_waits, (unsigned long long)c.sleeps);
}

/* Task tid's run time and time spent runnable but not running, ns (the
 * two first fields of /proc/self/task/tid/schedstat; 0 and 0 if it is
 * gone). */
static void task_sched(int tid, unsigned long long *run, unsigned long long *wait)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", tid);
	FILE *f = fopen(path, "r");
	if (!f || fscanf(f, "%llu %llu", run, wait) != 2)
		*run = *wait = 0;
	if (f)
		fclose(f);
}

/* Was anybody starved?  Each task's state, CPU, scheduling policy, and
 * the run and wait times the kernel counted (/proc/self/task/T/stat and
 * schedstat): a thread that is runnable but was not run for seconds is a
 * scheduling matter, not a lost wake-up.  With NEMO_STRESS_GDB set, every
 * thread's stack as well (gdb attaches to this process). */
static void dump_tasks(void)
{
	char path[64], buf[1024];
	DIR *dir = opendir("/proc/self/task");
	struct dirent *de;
	while (dir && (de = readdir(dir))) {
		int tid = atoi(de->d_name);
		if (tid <= 0)
			continue;
		snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t len = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
		buf[len] = 0;
		/* After the ")" that ends the name: field 3 is the state; the
		 * processor is field 39 and the policy field 41. */
		char *q = strrchr(buf, ')');
		if (!q)
			continue;
		char state = 0;
		int field = 2, cpu = -1, pol = -1;
		for (char *tok = strtok(q + 1, " "); tok; tok = strtok(NULL, " ")) {
			field++;
			if (field == 3)
				state = tok[0];
			else if (field == 39)
				cpu = atoi(tok);
			else if (field == 41)
				pol = atoi(tok);
		}
		unsigned long long run, wait;
		task_sched(tid, &run, &wait);
		fprintf(stderr, "  task %d: state %c, cpu %d, policy %d, ran %.3f s, waited to run %.3f s\n",
			tid, state, cpu, pol, run / 1e9, wait / 1e9);
	}
	if (dir)
		closedir(dir);
	if (getenv("NEMO_STRESS_GDB")) {
		char cmd[128];
		snprintf(cmd, sizeof cmd, "gdb -p %d -batch -ex 'thread apply all bt' 1>&2", (int)getpid());
		if (system(cmd) != 0)
			fprintf(stderr, "  (gdb failed)\n");
	}
}

/* The time this process's threads have run (*ran) and spent runnable
 * but not running (the result), summed over its tasks (the two first
 * fields of each schedstat), in ns. */
static unsigned long long waited_to_run(unsigned long long *ran)
{
	unsigned long long sum = 0;
	*ran = 0;
	DIR *dir = opendir("/proc/self/task");
	struct dirent *de;
	while (dir && (de = readdir(dir))) {
		int tid = atoi(de->d_name);
		if (tid <= 0)
			continue;
		unsigned long long run, wait;
		task_sched(tid, &run, &wait);
		sum += wait;
		*ran += run;
	}
	if (dir)
		closedir(dir);
	return sum;
}

/*
 * No progress for 20 seconds is a lost message or wake-up, unless the
 * threads were starved: a second in which they waited half a second or
 * more to run and ran less than half a second in all is other programs'
 * load, not a protocol hole (a machine loaded at 15-35 on 2 CPUs kept
 * runnable threads off the CPU for 45 s and failed this test), so it does
 * not count.  A lost wake-up leaves the threads asleep (neither running
 * nor waiting to run), a livelock keeps them running: both count.
 * ctest's time limit still ends a run starved for ever.
 */
static void *watchdog(void *p)
{
	(void)p;
	unsigned long last = atomic_load(&progress);
	unsigned long long ran, ran_now;
	unsigned long long waited = waited_to_run(&ran);
	int idle = 0, starved = 0;
	while (!atomic_load(&finished)) {
		sleep(1);
		unsigned long now = atomic_load(&progress);
		unsigned long long w = waited_to_run(&ran_now);
		bool starved_now = w - waited >= 500000000ull && ran_now - ran < 500000000ull;
		waited = w;
		ran = ran_now;
		if (now != last)
			idle = 0;
		else if (starved_now)
			starved++;
		else
			idle++;
		last = now;
		if (idle >= 20) {
			fprintf(stderr, "stress_messaging: no progress for 20 s in %s (progress %lu; "
					"%d more s of starvation not counted): a lost message or wake-up\n",
				atomic_load(&current), now, starved);
			dump();
			dump_tasks();
			_exit(1);
		}
	}
	return NULL;
}

/* ------------------------------------------------------------ handlers */

static void reply(struct thr *me, int s, bool notify);

/* Is context ctx (or a notification, ctx < 0) possible while the thread
 * is at w? */
static bool context_ok(struct thr *me, int w, int ctx)
{
	bool irq = atomic_load_explicit(&me->irq, memory_order_relaxed);
	if (ctx == NEMO_AM_CTX_INTERRUPT)
		return irq;
	if (w == W_SETIRQ)
		return true;
	if (ctx == NEMO_AM_CTX_POLL)
		return w == W_POLL || w == W_LEAVE || irq;
	if (ctx == NEMO_AM_CTX_WAIT)
		return w == W_WAIT || w == W_SEND || irq;
	/* notification: no context given */
	return w == W_POLL || w == W_LEAVE || w == W_WAIT || w == W_SEND || irq;
}

/* Message seq of stream k from s to r (the caller): it must be the one
 * expected.  Count it; on a gap, report and go on from it (a lost
 * message then shows as one failure and a count short at the end, not
 * as a hang); a late one (duplicate or reordered) is reported only. */
static void take_seq(int k, int s, int r, uint64_t seq, bool modnf)
{
	uint64_t exp = atomic_load_explicit(&R.recv[k][s][r], memory_order_relaxed);
	if (modnf) {           /* the sequence number nearest exp with these low bits */
		uint64_t diff = (seq - exp) & SEQNF;
		seq = diff <= SEQNF / 2 ? exp + diff : exp - (SEQNF + 1 - diff);
	}
	atomic_store_explicit(&R.count[k][s][r],
			      atomic_load_explicit(&R.count[k][s][r], memory_order_relaxed) + 1,
			      memory_order_relaxed);
	if (seq != exp)
		fail(F_ORDER, (uint64_t)k, (uint64_t)s, (uint64_t)r, exp, seq);
	if (seq < exp)
		return;
	if (R.data[k][s][r][seq % WIN] != word_of(k, s, r, seq))
		fail(F_VISIBILITY, (uint64_t)k, (uint64_t)s, (uint64_t)r, seq, R.data[k][s][r][seq % WIN]);
	atomic_store_explicit(&R.recv[k][s][r], seq + 1, memory_order_release);
}

static void am_check(const nemo_am_msg *m, void *ctx, int fn)
{
	struct thr *me = self;
	int saved = atomic_load_explicit(&me->where, memory_order_relaxed);
	if (saved == W_HANDLER)
		fail(F_NESTED, m->arg, (uint64_t)m->context, 0, (uint64_t)me->t, me->irq_thread);
	if (saved == W_OUT)
		fail(F_OUTSIDE, m->arg, (uint64_t)m->context, 0, (uint64_t)me->t, me->irq_thread);
	set_where(me, W_HANDLER);
	atomic_fetch_add_explicit(&progress, 1, memory_order_relaxed);

	uint64_t arg = m->arg;
	int s = (int)(arg & 15), r = (int)(arg >> 4 & 15);
	unsigned a = (unsigned)(arg >> 8 & 3), e = (unsigned)(arg >> 18 & 3);
	bool is_reply = arg >> 10 & 1, by_event = arg >> 17 & 1;
	size_t len = (size_t)(arg >> 11 & 63);
	uint32_t dep = (uint32_t)(arg >> 20 & 1023);
	uint64_t seq = arg >> 30;
	uint32_t epoch = atomic_load_explicit(&me->epoch, memory_order_relaxed);

	ST(me, m->context == NEMO_AM_CTX_POLL ? ST_CTX_POLL
	       : m->context == NEMO_AM_CTX_WAIT ? ST_CTX_WAIT : ST_CTX_IRQ);
	if (!context_ok(me, saved, (int)m->context))
		fail(F_CONTEXT, arg, (uint64_t)m->context, (uint64_t)saved,
		     atomic_load_explicit(&me->irq, memory_order_relaxed), 0);
	if (r != me->t || s >= R.T) {
		fail(F_WRONG_THREAD, arg, (uint64_t)me->t, m->dest, 0, 0);
		goto out;
	}
	if (dep != (epoch & 1023u) || m->dest != nemo_place_self())
		fail(F_STALE_DEST, arg, m->dest, nemo_place_self(), epoch, 0);
	if (thread_of(m->src) != s)
		fail(F_SRC, arg, m->src, (uint64_t)(int64_t)thread_of(m->src), 0, 0);
	if (ctx != &act_ctx[a] || act_fn[a] != fn || m->action != act_id[a] ||
	    (by_event ? m->event != ev_id[e] || a != mapping(me->t, epoch, e)
		      : m->event != NEMO_AM_NO_EVENT))
		fail(F_ACTION, arg, m->action, m->event, (uint64_t)fn, 0);
	int k = is_reply ? S_AMREPLY : S_AM;
	if (m->len != len || (len == 0) != (m->payload == NULL) ||
	    (len && !payload_ok(m->payload, len, word_of(k, s, r, seq))))
		fail(F_PAYLOAD, arg, m->len, (uint64_t)(uintptr_t)m->payload, 0, 0);
	take_seq(k, s, r, seq, false);
	if (!is_reply && !atomic_load_explicit(&R.stop, memory_order_relaxed) &&
	    rnd(&me->hrng) % 4 == 0)
		reply(me, s, rnd(&me->hrng) % 4 == 0);
out:
	set_where(me, saved);
}

static void h0(const nemo_am_msg *m, void *ctx)
{
	am_check(m, ctx, 0);
}

static void h1(const nemo_am_msg *m, void *ctx)
{
	am_check(m, ctx, 1);
}

static void nf_handler(void *ctx, nemo_place_id src, uint32_t chan)
{
	struct thr *me = self;
	int saved = atomic_load_explicit(&me->where, memory_order_relaxed);
	if (saved == W_HANDLER)
		fail(F_NESTED, chan, src, 1, (uint64_t)me->t, me->irq_thread);
	if (saved == W_OUT)
		fail(F_OUTSIDE, chan, src, 1, (uint64_t)me->t, me->irq_thread);
	set_where(me, W_HANDLER);
	atomic_fetch_add_explicit(&progress, 1, memory_order_relaxed);
	ST(me, ST_NF_HANDLED);
	if (!context_ok(me, saved, -1))
		fail(F_CONTEXT, chan, src, (uint64_t)saved, atomic_load_explicit(&me->irq, memory_order_relaxed), 1);
	if (ctx != &me->nf_ctx)
		fail(F_NF_CTX, chan, src, 0, 0, 0);
	int s = (int)(chan >> 11 & 15);
	if (s >= R.T) {
		fail(F_WRONG_THREAD, chan, src, (uint64_t)me->t, 1, 0);
		goto out;
	}
	if (thread_of(src) != s)
		fail(F_SRC, chan, src, (uint64_t)(int64_t)thread_of(src), 1, 0);
	bool is_reply = chan >> 15 & 1;
	take_seq(is_reply ? S_NFREPLY : S_NF, s, me->t, chan & SEQNF, true);
	if (!is_reply && !atomic_load_explicit(&R.stop, memory_order_relaxed) &&
	    rnd(&me->hrng) % 4 == 0)
		reply(me, s, rnd(&me->hrng) % 2 == 0);
out:
	set_where(me, saved);
}

/* May `me` send stream k to r now?  After a re-join, only once everything
 * of that stream sent from its earlier places was handled; and never
 * more than WIN - 1 unhandled (the data words are reused). */
static bool gate(struct thr *me, uint32_t *g, int k, int r, uint64_t seq)
{
	uint32_t epoch = atomic_load_explicit(&me->epoch, memory_order_relaxed);
	uint64_t got = atomic_load_explicit(&R.recv[k][me->t][r], memory_order_acquire);
	if (*g != epoch) {
		if (got != seq) {
			ST(me, ST_GATE_EPOCH);
			return false;
		}
		*g = epoch;
	}
	if (seq - got >= WIN - 1) {
		ST(me, ST_GATE_WINDOW);
		return false;
	}
	return true;
}

/* A handler's reply to thread s: NEMO_NONBLOCK, never waits. */
static void reply(struct thr *me, int s, bool notify)
{
	if (!atomic_load_explicit(&me->ready, memory_order_relaxed))
		return;
	uint64_t te = atomic_load_explicit(&R.table[s], memory_order_acquire);
	nemo_place_id id = pack_id(te);
	uint32_t dep = pack_epoch(te);
	int k = notify ? S_NFREPLY : S_AMREPLY;
	uint64_t seq = atomic_load_explicit(&R.sent[k][me->t][s], memory_order_relaxed);
	if (id == NEMO_PLACE_NONE || !gate(me, &me->gate_reply[k][s], k, s, seq))
		return;
	uint64_t w = word_of(k, me->t, s, seq);
	R.data[k][me->t][s][seq % WIN] = w;
	unsigned flags = NEMO_NONBLOCK | (rnd(&me->hrng) % 2 ? NEMO_PUSH : 0);
	int rc;
	if (notify) {
		rc = nemo_notify(id, (uint32_t)(seq & SEQNF) | (uint32_t)me->t << 11 | 1u << 15, flags);
	} else {
		uint64_t x = rnd(&me->hrng);
		bool by_event = x & 1;
		unsigned e = (unsigned)(x >> 1 & 0xff) % NEV;
		unsigned a = by_event ? mapping(s, dep, e) : (unsigned)(x >> 9) % NACT;
		size_t len = (size_t)(x >> 16) % (NEMO_AM_PAYLOAD_MAX + 1);
		unsigned char buf[NEMO_AM_PAYLOAD_MAX];
		fill_payload(buf, len, w);
		uint64_t arg = make_arg(me->t, s, a, true, len, by_event, e, dep, seq);
		rc = nemo_am_sendv(id, by_event ? NEMO_AM_EVENT(ev_id[e]) : act_id[a], arg, buf, len, flags);
	}
	if (rc == 0) {
		atomic_store_explicit(&R.sent[k][me->t][s], seq + 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&progress, 1, memory_order_relaxed);
		ST(me, ST_REPLY_OK);
	} else if (rc == EAGAIN) {
		ST(me, ST_REPLY_EAGAIN);
	} else if (rc == ESRCH) {
		ST(me, ST_REPLY_ESRCH);
	} else {
		fail(F_REPLY_RC, (uint64_t)rc, (uint64_t)k, (uint64_t)me->t, (uint64_t)s, id);
	}
}

/* --------------------------------------------------------- main code */

static void receive(struct thr *me)
{
	unsigned n = 0;
	if (rnd(&me->rng) % 4) {        /* 3/4 nemo_poll, 1/4 nemo_place_wait */
		set_where(me, W_POLL);
		int rc = nemo_poll(&n);
		set_where(me, W_NONE);
		CHECK_EQ_INT(rc, 0);
		ST(me, ST_POLL);
	} else {
		long ns = me->pol.kind == NEMO_WAIT_SPIN ? 20000 + (long)(rnd(&me->rng) % 60000)
							 : 50000 + (long)(rnd(&me->rng) % 450000);
		struct timespec dl = in_ns(ns);
		set_where(me, W_WAIT);
		int rc = nemo_place_wait(&dl, &n);
		set_where(me, W_NONE);
		CHECK(rc == 0 || rc == ETIMEDOUT);
		if (rc == 0) {
			CHECK(n >= 1);
			ST(me, ST_WAIT_OK);
		} else if (rc != 0) {
			ST(me, ST_WAIT_TIMEOUT);
		}
	}
}

static void flush_dest(struct thr *me, nemo_place_id id)
{
	set_where(me, W_FLUSH);
	int rc = nemo_flush(id);
	set_where(me, W_NONE);
	if (id == NEMO_PLACE_ALL && rc == ESRCH)
		ST(me, ST_FLUSH_ALL_ESRCH);
	else if (rc != 0 && rc != ESRCH)
		CHECK_EQ_INT(rc, 0);
	ST(me, ST_FLUSH);
}

/* Publish NEMO_MORE sends: by destination or all at once. */
static void flush_deferred(struct thr *me)
{
	if (!me->deferred_mask)
		return;
	if (rnd(&me->rng) % 2) {
		flush_dest(me, NEMO_PLACE_ALL);
	} else {
		for (int r = 0; r < R.T; r++)
			if (me->deferred_mask >> r & 1)
				flush_dest(me, me->deferred_id[r]);
	}
	me->deferred_mask = 0;
}

static void deferred_sent(struct thr *me, int r, nemo_place_id id, unsigned flags)
{
	if (flags & NEMO_MORE) {
		if (!(me->deferred_mask >> r & 1) || me->deferred_id[r] != id) {
			if (me->deferred_mask >> r & 1)
				flush_dest(me, me->deferred_id[r]);
			if (!me->deferred_mask)
				me->deferred_budget = 1 + (int)(rnd(&me->rng) % 16);
			me->deferred_mask |= 1u << r;
			me->deferred_id[r] = id;
		}
	} else if ((me->deferred_mask >> r & 1) && me->deferred_id[r] == id) {
		me->deferred_mask &= ~(1u << r);
	}
}

static void refresh(struct thr *me, int r)
{
	me->cache[r] = atomic_load_explicit(&R.table[r], memory_order_acquire);
}

/* An ESRCH from id of thread r: r must not have been live at id all along. */
static void check_esrch(struct thr *me, int r, nemo_place_id id, nemo_place_id live_before)
{
	nemo_place_id live_after = atomic_load(&R.live[r]);
	if (live_before == id && live_after == id) {
		fprintf(stderr, "stress_messaging: ESRCH from thread %d for place %#llx of thread %d, live all along\n",
			me->t, (unsigned long long)id, r);
		CHECK(!"ESRCH for a live place");
	}
	ST(me, ST_ESRCH);
	refresh(me, r);
}

static unsigned pick_flags(struct thr *me)
{
	static const unsigned mix_[] = { 0, 0, NEMO_MORE, NEMO_MORE, NEMO_PUSH, NEMO_NONBLOCK,
					 NEMO_NONBLOCK | NEMO_PUSH, NEMO_NONBLOCK | NEMO_MORE,
					 NEMO_MORE | NEMO_PUSH };
	return mix_[rnd(&me->rng) % (sizeof mix_ / sizeof mix_[0])];
}

/* One active message from the main code: true if it was sent. */
static bool send_am(struct thr *me, int r)
{
	nemo_place_id id = pack_id(me->cache[r]);
	uint32_t dep = pack_epoch(me->cache[r]);
	uint64_t seq = atomic_load_explicit(&R.sent[S_AM][me->t][r], memory_order_relaxed);
	if (!gate(me, &me->gate_main[S_AM][r], S_AM, r, seq))
		return false;
	uint64_t x = rnd(&me->rng);
	unsigned flags = pick_flags(me);
	bool by_event = x & 1;
	unsigned e = (unsigned)(x >> 1 & 0xff) % NEV;
	unsigned a = by_event ? mapping(r, dep, e) : (unsigned)(x >> 9 & 0xff) % NACT;
	size_t len = x >> 20 & 1 ? (size_t)(x >> 24) % (NEMO_AM_PAYLOAD_MAX + 1) : 0;
	uint64_t w = word_of(S_AM, me->t, r, seq);
	unsigned char buf[NEMO_AM_PAYLOAD_MAX];
	fill_payload(buf, len, w);
	uint64_t arg = make_arg(me->t, r, a, false, len, by_event, e, dep, seq);
	uint32_t aid = by_event ? NEMO_AM_EVENT(ev_id[e]) : act_id[a];
	R.data[S_AM][me->t][r][seq % WIN] = w;
	for (int attempt = 0;; attempt++) {
		nemo_place_id live_before = atomic_load(&R.live[r]);
		set_where(me, flags & NEMO_NONBLOCK ? W_SENDNB : W_SEND);
		int rc = len || x >> 40 & 1 ? nemo_am_sendv(id, aid, arg, len ? buf : NULL, len, flags)
					    : nemo_am_send(id, aid, arg, flags);
		set_where(me, W_NONE);
		if (rc == 0) {
			atomic_store_explicit(&R.sent[S_AM][me->t][r], seq + 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&progress, 1, memory_order_relaxed);
			atomic_store_explicit(&me->main_sent, atomic_load_explicit(&me->main_sent, memory_order_relaxed) + 1,
					      memory_order_relaxed);
			ST(me, ST_AM_OK);
			if (flags & NEMO_MORE)
				ST(me, ST_AM_MORE);
			if (flags & NEMO_PUSH)
				ST(me, ST_AM_PUSH);
			if (flags & NEMO_NONBLOCK)
				ST(me, ST_AM_NB);
			if (by_event)
				ST(me, ST_AM_EVENT);
			if (len)
				ST(me, ST_AM_PAYLOAD);
			if (attempt)
				ST(me, ST_NB_RETRIED);
			deferred_sent(me, r, id, flags);
			return true;
		}
		if (rc == EAGAIN && (flags & NEMO_NONBLOCK)) {
			ST(me, ST_EAGAIN);
			if (attempt == 3)
				return false;
			receive(me);
			continue;
		}
		if (rc == ESRCH) {
			check_esrch(me, r, id, live_before);
			return false;
		}
		fprintf(stderr, "stress_messaging: nemo_am_send from thread %d to thread %d (%#llx, %s), "
				"flags 0x%x, action 0x%x: %d (%s)\n", me->t, r, (unsigned long long)id,
			live_before == id && atomic_load(&R.live[r]) == id ? "live" : "leaving: ESRCH expected",
			flags, aid, rc, strerror(rc));
		CHECK(!"nemo_am_send failed");
		return false;
	}
}

static bool send_notify(struct thr *me, int r)
{
	nemo_place_id id = pack_id(me->cache[r]);
	uint64_t seq = atomic_load_explicit(&R.sent[S_NF][me->t][r], memory_order_relaxed);
	if (!gate(me, &me->gate_main[S_NF][r], S_NF, r, seq))
		return false;
	unsigned flags = pick_flags(me);
	R.data[S_NF][me->t][r][seq % WIN] = word_of(S_NF, me->t, r, seq);
	for (int attempt = 0;; attempt++) {
		nemo_place_id live_before = atomic_load(&R.live[r]);
		set_where(me, flags & NEMO_NONBLOCK ? W_SENDNB : W_SEND);
		int rc = nemo_notify(id, (uint32_t)(seq & SEQNF) | (uint32_t)me->t << 11, flags);
		set_where(me, W_NONE);
		if (rc == 0) {
			atomic_store_explicit(&R.sent[S_NF][me->t][r], seq + 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&progress, 1, memory_order_relaxed);
			ST(me, ST_NF_OK);
			if (attempt)
				ST(me, ST_NB_RETRIED);
			deferred_sent(me, r, id, flags);
			return true;
		}
		if (rc == EAGAIN && (flags & NEMO_NONBLOCK)) {
			ST(me, ST_EAGAIN);
			if (attempt == 3)
				return false;
			receive(me);
			continue;
		}
		if (rc == ESRCH) {
			check_esrch(me, r, id, live_before);
			return false;
		}
		fprintf(stderr, "stress_messaging: nemo_notify from thread %d to thread %d (%#llx, %s), flags 0x%x: %d (%s)\n",
			me->t, r, (unsigned long long)id,
			live_before == id && atomic_load(&R.live[r]) == id ? "live" : "leaving: ESRCH expected",
			flags, rc, strerror(rc));
		CHECK(!"nemo_notify failed");
		return false;
	}
}

/* Interrupt-mode threads: compute without polling; handlers run from the
 * signal.  errno must come back as it was. */
static void compute(struct thr *me)
{
	unsigned n = 2000 + (unsigned)(rnd(&me->rng) % 20000);
	errno = 4242;
	for (volatile unsigned i = 0; i < n; i++)
		;
	if (errno != 4242)
		fail(F_ERRNO, (uint64_t)errno, (uint64_t)me->t, 0, 0, 0);
	ST(me, ST_COMPUTE);
}

/* A critical section: interrupts off, compute, on again. */
static void critical(struct thr *me)
{
	set_where(me, W_SETIRQ);
	CHECK_EQ_INT(nemo_place_set_interrupts(false), 0);
	atomic_store(&me->irq, false);
	set_where(me, W_NONE);
	unsigned n = 1000 + (unsigned)(rnd(&me->rng) % 4000);
	for (volatile unsigned i = 0; i < n; i++)
		;
	atomic_store(&me->irq, true);
	set_where(me, W_SETIRQ);
	CHECK_EQ_INT(nemo_place_set_interrupts(true), 0);
	set_where(me, W_NONE);
}

static void join(struct thr *me)
{
	uint32_t epoch = atomic_fetch_add(&me->epoch, 1) + 1;
	nemo_place_attr at;
	memset(&at, 0, sizeof at);
	bool irq_at_join = me->irq_thread && epoch % 2 == 0;
	bool pol_at_join = epoch % 2 == 1;
	if (irq_at_join)
		at.flags |= NEMO_PLACE_INTERRUPTS;
	if (pol_at_join)
		at.policy = me->pol;
	if (me->t < 2 && epoch % 3 == 0) {
		at.flags |= NEMO_PLACE_PIN;
		at.cpu = me->t % 2;
	}
	atomic_store(&me->irq, irq_at_join);
	set_where(me, W_OTHER);
	nemo_place_id id = NEMO_PLACE_NONE;
	int rc = nemo_place_join(R.d, &at, &id);
	CHECK_EQ_INT(rc, 0);
	if (rc) {
		fprintf(stderr, "stress_messaging: thread %d: join failed: %s\n", me->t, strerror(rc));
		exit(1);
	}
	CHECK_EQ_INT(nemo_place_self(), id);
	CHECK(nemo_place_domain() == R.d);
	CHECK(nemo_place_index(id) < PMAX);
	if (!pol_at_join)
		CHECK_EQ_INT(nemo_place_set_policy(&me->pol), 0);
	CHECK_EQ_INT(nemo_notify_set_handler(nf_handler, &me->nf_ctx), 0);
	for (unsigned e = 0; e < NEV; e++)
		CHECK_EQ_INT(nemo_am_event_map(ev_id[e], act_id[mapping(me->t, epoch, e)]), 0);
	uint32_t a = 0;
	CHECK_EQ_INT(nemo_am_event_lookup(id, ev_id[1], &a), 0);
	CHECK_EQ_INT(a, act_id[mapping(me->t, epoch, 1)]);
	CHECK((id >> 16) < (1ull << 44));     /* pack() */
	atomic_store(&R.idmap[nemo_place_index(id)][(id >> 16) % GENS], (id >> 16) << 4 | (uint64_t)(me->t + 1));
	atomic_store(&me->ready, true);
	if (me->irq_thread && !irq_at_join) {
		atomic_store(&me->irq, true);
		set_where(me, W_SETIRQ);
		CHECK_EQ_INT(nemo_place_set_interrupts(true), 0);
	}
	set_where(me, W_NONE);
	me->cache[me->t] = pack(epoch, id);
	atomic_store(&R.table[me->t], pack(epoch, id));
	atomic_store(&R.live[me->t], id);
}

static void leave(struct thr *me)
{
	atomic_store(&R.live[me->t], NEMO_PLACE_NONE);
	if (rnd(&me->rng) % 2)
		flush_deferred(me);     /* else the leave flushes them */
	me->deferred_mask = 0;
	set_where(me, W_LEAVE);
	int rc = nemo_place_leave();
	atomic_store(&me->ready, false);
	atomic_store(&me->irq, false);
	set_where(me, W_OUT);
	CHECK_EQ_INT(rc, 0);
	CHECK_EQ_INT(nemo_place_self(), NEMO_PLACE_NONE);
	CHECK(nemo_place_domain() == NULL);
}

static void rejoin(struct thr *me)
{
	leave(me);
	cpu_set_t after;
	CHECK_EQ_INT(sched_getaffinity(0, sizeof after, &after), 0);
	if (!CPU_EQUAL(&me->affinity, &after)) {      /* pinning undone? */
		fprintf(stderr, "stress_messaging: thread %d: affinity not restored by nemo_place_leave "
				"(%d CPUs, was %d)\n", me->t, CPU_COUNT(&after), CPU_COUNT(&me->affinity));
		CHECK(!"nemo_place_leave restores the affinity");
		sched_setaffinity(0, sizeof me->affinity, &me->affinity);
	}
	CHECK_EQ_INT(nemo_poll(NULL), ENOTCONN);
	CHECK_EQ_INT(nemo_am_send(pack_id(me->cache[me->t]), act_id[0], 0, 0), ENOTCONN);
	/* Out for a moment: senders meet the stale id. */
	if (rnd(&me->rng) % 2)
		sched_yield();
	join(me);
	ST(me, ST_REJOIN);
}

static bool all_matched(void)
{
	for (int k = 0; k < NSTREAM; k++)
		for (int s = 0; s < R.T; s++)
			for (int r = 0; r < R.T; r++)
				if (atomic_load(&R.sent[k][s][r]) != atomic_load(&R.recv[k][s][r]))
					return false;
	return true;
}

static void *worker(void *p)
{
	struct thr *me = p;
	self = me;
	set_where(me, W_OUT);
	CHECK_EQ_INT(sched_getaffinity(0, sizeof me->affinity, &me->affinity), 0);
	join(me);
	pthread_barrier_wait(&R.start);
	for (int r = 0; r < R.T; r++)
		refresh(me, r);
	long next_rejoin = 50 + (long)(rnd(&me->rng) % 400);
	long ops = 0;
	bool quota = false;
	while (!atomic_load_explicit(&R.stop, memory_order_relaxed)) {
		ops++;
		if (!quota) {
			int burst = 1 + (int)(rnd(&me->rng) % 8);
			for (int b = 0; b < burst; b++) {
				int r = (int)(rnd(&me->rng) % (uint64_t)R.T);
				if (rnd(&me->rng) % 4 == 0)
					send_notify(me, r);
				else
					send_am(me, r);
			}
			if (me->main_sent >= R.quota) {
				quota = true;
				atomic_store(&me->phase, 1);
				if (atomic_fetch_add(&R.quota_done, 1) + 1 == R.T)
					atomic_store(&R.stop, true);
			}
		}
		if (me->deferred_mask && --me->deferred_budget <= 0)
			flush_deferred(me);
		uint64_t x = rnd(&me->rng) % 16;
		if (me->irq_thread && x < 3)
			compute(me);
		else if (me->irq_thread && x == 3)
			critical(me);
		else if (x < 6 || quota)
			receive(me);
		if (ops >= next_rejoin) {
			rejoin(me);
			next_rejoin = ops + 50 + (long)(rnd(&me->rng) % 400);
		}
	}
	/* Stop: publish everything, then handle until every pair matches. */
	flush_dest(me, NEMO_PLACE_ALL);
	me->deferred_mask = 0;
	atomic_store(&me->phase, 2);
	atomic_fetch_add(&R.quiet, 1);
	while (atomic_load(&R.quiet) < R.T || !all_matched())
		receive(me);
	atomic_store(&R.live[me->t], NEMO_PLACE_NONE);
	set_where(me, W_LEAVE);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	atomic_store(&me->irq, false);
	set_where(me, W_OUT);
	atomic_store(&me->phase, 3);
	atomic_fetch_add(&R.exited, 1);
	return NULL;
}

/* The main thread, while the places run: monitoring calls race joins,
 * leaves and floods.  Counters are sums over every place, past and
 * present, so they never go down; a place live all along is a place. */
static void monitor(void)
{
	nemo_domain_counters prev, c;
	memset(&prev, 0, sizeof prev);
	unsigned long snaps = 0;
	while (atomic_load(&R.exited) < R.T) {
		CHECK_EQ_INT(nemo_domain_get_counters(R.d, &c), 0);
		const uint64_t *a = (const uint64_t *)&prev, *b = (const uint64_t *)&c;
		for (size_t i = 0; i < sizeof c / sizeof(uint64_t); i++)
			if (b[i] < a[i]) {
				fprintf(stderr, "stress_messaging: domain counter %zu went down: %llu -> %llu\n", i,
					(unsigned long long)a[i], (unsigned long long)b[i]);
				CHECK(!"domain counters never go down");
			}
		prev = c;
		nemo_place_id ids[PMAX];
		size_t n = 0;
		CHECK_EQ_INT(nemo_domain_places(R.d, ids, PMAX, &n), 0);
		CHECK(n <= (size_t)R.T);
		for (int t = 0; t < R.T; t++) {
			nemo_place_id id = atomic_load(&R.live[t]);
			if (id == NEMO_PLACE_NONE)
				continue;
			int rc = nemo_place_check(R.d, id);
			if (rc != 0 && atomic_load(&R.live[t]) == id) {
				fprintf(stderr, "stress_messaging: nemo_place_check(%#llx) of live thread %d: %d\n",
					(unsigned long long)id, t, rc);
				CHECK(!"nemo_place_check of a live place");
			}
		}
		snaps++;
		usleep(500);
	}
	CHECK(snaps > 0);
}

/* ------------------------------------------------------------------ run */

/* One flood: a domain, T threads. */
struct cfg {
	const char *name;
	int T;                        /* threads (places) */
	unsigned ring, maxp;          /* ring_slots, max_places */
	int sig;                      /* irq_signal (0: SIGURG) */
	int irq_every;                /* thread t uses interrupt mode if t % irq_every == 1 */
	int pol0;                     /* thread t's policy: pols[(pol0 + t) % 8] */
	long quota;                   /* main active messages per thread, before scaling */
};

static nemo_domain *dead[8];     /* destroyed domains: checked for EIDRM at the end */
static int ndead;

static void run(const struct cfg *cf)
{
	const char *name = cf->name;
	int T = cf->T;
	unsigned ring = cf->ring;
	long quota = (long)((double)cf->quota * scale);
	if (quota < 1000)
		quota = 1000;
	double t0 = now_s();
	memset(&R, 0, sizeof R);
	for (int k = 0; k < NFAIL; k++)
		atomic_flag_clear(&first_fail_set[k]);
	current = name;
	R.T = T;
	R.quota = quota;
	for (int t = 0; t < TMAX; t++) {
		atomic_store(&R.table[t], PACK_NONE);
		atomic_store(&R.live[t], NEMO_PLACE_NONE);
	}
	nemo_domain_attr da;
	memset(&da, 0, sizeof da);
	da.max_places = cf->maxp;
	da.ring_slots = ring;
	da.max_actions = ring == 8 ? 64 : 0;
	da.max_events = ring == 8 ? 32 : 0;
	da.irq_signal = cf->sig;
	CHECK_EQ_INT(nemo_domain_create(&da, &R.d), 0);
	for (int a = 0; a < NACT; a++)
		CHECK_EQ_INT(nemo_action_register(R.d, act_id[a], act_fn[a] ? h1 : h0, &act_ctx[a]), 0);
	CHECK_EQ_INT(nemo_action_register(R.d, act_id[2], h0, &act_ctx[2]), EEXIST);

	static const nemo_wait_policy pols[] = {
		{ NEMO_WAIT_SPIN, 0 }, { NEMO_WAIT_BLOCK, 0 }, { NEMO_WAIT_HYBRID, 5000 },
		{ NEMO_WAIT_ADAPTIVE, 0 }, { NEMO_WAIT_HYBRID, 30000 }, { NEMO_WAIT_BLOCK, 0 },
		{ NEMO_WAIT_DEFAULT, 0 }, { NEMO_WAIT_HYBRID, 2000 },
	};
	pthread_barrier_init(&R.start, NULL, (unsigned)T);
	for (int t = 0; t < T; t++) {
		struct thr *x = &R.th[t];
		x->t = t;
		x->rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(t + 1) + (uint64_t)ring;
		x->hrng = 0xdeadbeefcafeULL + (uint64_t)t * 7919;
		x->pol = pols[(cf->pol0 + t) % 8];
		x->irq_thread = cf->irq_every && t % cf->irq_every == 1;
		atomic_store(&x->where, W_OUT);
	}
	for (int t = 0; t < T; t++)
		pthread_create(&R.th[t].th, NULL, worker, &R.th[t]);
	monitor();
	for (int t = 0; t < T; t++)
		pthread_join(R.th[t].th, NULL);
	pthread_barrier_destroy(&R.start);
	double secs = now_s() - t0;

	/* Every pair: handlers run == sends that returned 0. */
	uint64_t tot[NSTREAM] = { 0 };
	for (int k = 0; k < NSTREAM; k++)
		for (int s = 0; s < T; s++)
			for (int r = 0; r < T; r++) {
				uint64_t a = atomic_load(&R.sent[k][s][r]), b = atomic_load(&R.count[k][s][r]);
				if (a != b)
					fprintf(stderr, "stress_messaging %s: %s %d->%d: %llu sent, %llu handled\n", name,
						stream_name[k], s, r, (unsigned long long)a, (unsigned long long)b);
				CHECK_EQ_INT(a, b);
				tot[k] += a;
			}
	for (int k = 0; k < NFAIL; k++) {
		unsigned long nf = atomic_load(&fails[k]);
		if (nf) {
			fprintf(stderr, "stress_messaging %s: %lu failures: %s; first: %#llx %#llx %#llx %#llx %#llx\n",
				name, nf, fail_name[k], (unsigned long long)atomic_load(&first_fail[k][0]),
				(unsigned long long)atomic_load(&first_fail[k][1]),
				(unsigned long long)atomic_load(&first_fail[k][2]),
				(unsigned long long)atomic_load(&first_fail[k][3]),
				(unsigned long long)atomic_load(&first_fail[k][4]));
			CHECK_EQ_INT(nf, 0);
			atomic_store(&fails[k], 0);
		}
	}
	uint64_t st[NST] = { 0 };
	for (int t = 0; t < T; t++)
		for (int k = 0; k < NST; k++)
			st[k] += atomic_load(&R.th[t].st[k]);

	nemo_domain_counters c;
	CHECK_EQ_INT(nemo_domain_get_counters(R.d, &c), 0);
	CHECK_EQ_INT(c.am_handled, c.am_sent);
	CHECK_EQ_INT(c.notify_handled, c.notify_sent);
	CHECK_EQ_INT(c.am_sent, tot[S_AM] + tot[S_AMREPLY]);
	CHECK_EQ_INT(c.notify_sent, tot[S_NF] + tot[S_NFREPLY]);
	CHECK_EQ_INT(st[ST_CTX_POLL] + st[ST_CTX_WAIT] + st[ST_CTX_IRQ], tot[S_AM] + tot[S_AMREPLY]);
	CHECK_EQ_INT(st[ST_NF_HANDLED], tot[S_NF] + tot[S_NFREPLY]);
	nemo_place_id left[PMAX];
	size_t n = 99;
	CHECK_EQ_INT(nemo_domain_places(R.d, left, PMAX, &n), 0);
	CHECK_EQ_INT(n, 0);
	for (size_t i = 0; i < n && i < PMAX; i++)
		fprintf(stderr, "stress_messaging %s: place %#llx still listed after every thread left\n", name,
			(unsigned long long)left[i]);
	CHECK_EQ_INT(nemo_domain_destroy(R.d), 0);
	CHECK_EQ_INT(nemo_domain_destroy(R.d), EIDRM);
	if (ndead < (int)(sizeof dead / sizeof dead[0]))
		dead[ndead++] = R.d;

	unsigned long long msgs = (unsigned long long)(tot[0] + tot[1] + tot[2] + tot[3]);
	printf("stress_messaging %s: %d places, ring %u: %llu messages in %.2f s (%.2f M/s): "
	       "am %llu + %llu replies, notify %llu + %llu replies\n",
	       name, T, ring, msgs, secs, (double)msgs / secs / 1e6, (unsigned long long)tot[S_AM],
	       (unsigned long long)tot[S_AMREPLY], (unsigned long long)tot[S_NF],
	       (unsigned long long)tot[S_NFREPLY]);
	printf("  sends: %llu MORE, %llu PUSH, %llu NONBLOCK (%llu EAGAIN, %llu retried ok), "
	       "%llu by event, %llu with payload; %llu ESRCH, %llu rejoins, %llu flushes\n",
	       (unsigned long long)st[ST_AM_MORE], (unsigned long long)st[ST_AM_PUSH],
	       (unsigned long long)st[ST_AM_NB], (unsigned long long)st[ST_EAGAIN],
	       (unsigned long long)st[ST_NB_RETRIED], (unsigned long long)st[ST_AM_EVENT],
	       (unsigned long long)st[ST_AM_PAYLOAD], (unsigned long long)st[ST_ESRCH],
	       (unsigned long long)st[ST_REJOIN], (unsigned long long)st[ST_FLUSH]);
	printf("  handled: %llu in poll, %llu in wait, %llu in interrupts; replies %llu EAGAIN, "
	       "%llu ESRCH; waits %llu ok, %llu timed out; gated %llu epoch, %llu window\n",
	       (unsigned long long)st[ST_CTX_POLL], (unsigned long long)st[ST_CTX_WAIT],
	       (unsigned long long)st[ST_CTX_IRQ], (unsigned long long)st[ST_REPLY_EAGAIN],
	       (unsigned long long)st[ST_REPLY_ESRCH], (unsigned long long)st[ST_WAIT_OK],
	       (unsigned long long)st[ST_WAIT_TIMEOUT], (unsigned long long)st[ST_GATE_EPOCH],
	       (unsigned long long)st[ST_GATE_WINDOW]);
	printf("  domain: kicks %llu futex, %llu signal, %llu avoided, %llu skipped; %llu full waits, "
	       "%llu send failures, %llu interrupts, %llu sleeps\n",
	       (unsigned long long)c.kicks_futex, (unsigned long long)c.kicks_signal,
	       (unsigned long long)c.kicks_avoided, (unsigned long long)c.kicks_skipped,
	       (unsigned long long)c.full_waits, (unsigned long long)c.send_failures,
	       (unsigned long long)c.interrupts, (unsigned long long)c.sleeps);
	fflush(stdout);
}

int main(void)
{
	const char *sc = getenv("NEMO_STRESS_SCALE");
	if (sc && atof(sc) > 0)
		scale = atof(sc);
	nemo_clock_init();
	pthread_t wd;
	pthread_create(&wd, NULL, watchdog, NULL);
	double t0 = now_s();
	const struct cfg cfgs[] = {
		{ "ring8", 8, 8, 12, 0, 3, 0, 250000 },
		{ "ring16", 6, 16, PMAX, SIGRTMIN + 3, 3, 3, 300000 },
		{ "parallel", 2, 8, 4, SIGUSR1, 0, 7, 6000000 },
	};
	for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++)
		run(&cfgs[i]);
	/* A destroyed domain's record stays: later calls get EIDRM. */
	for (int i = 0; i < ndead; i++) {
		nemo_domain_counters c;
		CHECK_EQ_INT(nemo_domain_get_counters(dead[i], &c), EIDRM);
		CHECK_EQ_INT(nemo_place_join(dead[i], NULL, NULL), EIDRM);
	}
	atomic_store(&finished, true);
	pthread_join(wd, NULL);
	printf("stress_messaging: done in %.2f s\n", now_s() - t0);
	return check_exit("stress_messaging");
}
