/*
 * mech.h - the one mechanism interface of nemo-bench.
 *
 * A mechanism is one way to hand a wake-up or a message from one thread to
 * another (a futex, a pthread condvar, nemo_cond, an active message...).
 * Each is defined once, in mechs/, as a bench_mech: its name, its family,
 * and the hooks of every role it can play.  A suite asks the registry
 * (mechs/registry.c) for the mechanisms of its role; a mechanism plays a
 * role when that role's rx_wait (wake roles) or receiver (stream role) is
 * set.
 *
 * The roles and who owns the method:
 *   unicast    one sender wakes one receiver (suites unicast, coherence,
 *              policy, calibrate; suites/unicast.c is the harness): the
 *              receiver announces `ready = seq` and calls rx_wait(c, 0,
 *              seq); the sender sees the announcement, waits the random
 *              delay, stamps t_send, calls signal(c, seq), stamps again.
 *   broadcast  one sender wakes K waiters (suites/broadcast.c): waiter w
 *              announces `slot[w].ready = gen` and calls rx_wait(c, w,
 *              gen); the sender sees every announcement, calls
 *              prepare(c, gen) if set, waits, stamps, calls signal(c, gen).
 *   throughput one sender streams 1, 2, 3, ... to one polling receiver
 *              (suites/throughput.c): the mechanism's receiver and sender
 *              are the two threads; the harness's stream_* calls count,
 *              check and time what they hand over.
 * A wake role's mechanism only has to make every rx_wait(c, w, seq)
 * return once signal(c, seq) has been called, and never before.  The
 * unicast and broadcast roles have the same hooks on the same context, so
 * a mechanism whose code is the same for one waiter and for K (condvar,
 * futex, nemo-cond, ck-ec) names the same functions in both.
 */
#ifndef NEMO_BENCH_MECH_H
#define NEMO_BENCH_MECH_H

#include "bench.h"

#include <sys/types.h>

/* ------------------------------------------------------------------ */
/* Wake roles: unicast and broadcast                                    */
/* ------------------------------------------------------------------ */

typedef struct mech_slot {
	_Alignas(BENCH_CACHELINE) atomic_uint ready;  /* broadcast waiter w: about to wait for gen */
} mech_slot;

typedef struct mech_ctx {
	/* Harness words, each on its own cache line. */
	_Alignas(BENCH_CACHELINE) atomic_uint ready;   /* unicast receiver: about to wait for seq */
	_Alignas(BENCH_CACHELINE) _Atomic uint64_t t_send; /* sender's stamp */
	/* Set by the sender before the trial it makes the row's last (the
	 * run was interrupted: bench_stop_requested); 0 until then. */
	atomic_uint last;
	/* Mechanism words. */
	_Alignas(BENCH_CACHELINE) atomic_uint word;    /* flag / generation / futex word */
	_Alignas(BENCH_CACHELINE) atomic_uint word2;   /* second line (ping-pong reply) */
	_Alignas(BENCH_CACHELINE) atomic_uint sent_seq; /* what the signal carries */
	atomic_uint handled;                           /* receiver-local (signal handler) */
	uint64_t handler_stamp;
	/* The row, set by the harness before setup. */
	unsigned scenario;            /* SC_* of this row */
	/* How nemo's receivers wait: unicast, the policy the row forces
	 * (policy suite) or else spin when polling and block otherwise;
	 * broadcast, --poll-policy when polling and block otherwise. */
	nemo_wait_policy policy;
	int waiters;                  /* 1 (unicast) or K (broadcast) */
	mech_slot *slot;              /* broadcast: one per waiter */
	/* Broadcast: some waiter shares its CPU with another thread of the
	 * row (oversubscribed): a mechanism that polls must let the others run. */
	bool shared_cpu;
	pid_t rx_tid;                 /* unicast receiver's thread id (for tgkill) */
	pid_t pid;
	void *priv;                   /* mechanism-private state */
	char why[160];                /* setup failure reason */
} mech_ctx;

/* The hooks of one wake role.  w is the waiter (0 for unicast). */
typedef struct mech_wake {
	const char *summary;          /* a line for `nemo-bench list` */
	unsigned scenarios;           /* SC_* this mechanism can be measured in */
	/** Main thread, before the threads start; 0 or errno with c->why set. */
	int (*setup)(mech_ctx *c);
	void (*teardown)(mech_ctx *c);
	/** Receiver w's thread, before its first wait / after its last, before
	 *  it announces it is done (optional). */
	void (*rx_init)(mech_ctx *c, int w);
	void (*rx_fini)(mech_ctx *c, int w);
	/** Sender thread, before the first signal / after every receiver
	 *  announced it is done (optional). */
	void (*tx_init)(mech_ctx *c);
	void (*tx_fini)(mech_ctx *c);
	/** Receiver w waits for signal seq; returns its wake stamp (ticks) or
	 *  0 to let the harness stamp right after the return. */
	uint64_t (*rx_wait)(mech_ctx *c, int w, unsigned seq);
	/** Broadcast, off the clock: every waiter has announced seq, i.e. has
	 *  returned from its wait for seq - 1 (optional). */
	void (*prepare)(mech_ctx *c, unsigned seq);
	/** Deliver signal seq (to every waiter of a broadcast). */
	void (*signal)(mech_ctx *c, unsigned seq);
	/** Unicast, after the sender's second stamp (reap completions...;
	 *  optional). */
	void (*tx_after)(mech_ctx *c, unsigned seq);
	/** Unicast: the sender measures the latency itself, half of its own
	 *  stamp-to-stamp time (round-trip mechanisms). */
	bool sender_measures;
	/** Broadcast: the waiters wait with c->policy, so rows say which. */
	bool nemo_policy;
} mech_wake;

/* ------------------------------------------------------------------ */
/* Stream role: throughput                                              */
/* ------------------------------------------------------------------ */

/* Samples per throughput row: enough for a p90 of the rate with a 2 s default. */
#define STREAM_INTERVALS 20
/* Messages between two clock reads of a busy receiver: a read costs about
 * as much as taking a message, and 256 messages are a few microseconds,
 * nothing against an interval of 0.1 s. */
#define STREAM_CHECK_EVERY 256u

/* The receiver's tally: touched by the receiver's thread only (a handler
 * that takes messages runs there too). */
typedef struct stream_sink {
	uint64_t count, sum;
	uint64_t bad_at;              /* first out-of-order message number, or 0 */
	uint64_t bad_value;
} stream_sink;

/* The receiver's clock (suites/throughput.c): warm-up, intervals, stop, drain. */
typedef struct stream_meter {
	int phase, interval;          /* interval: those measured so far */
	uint64_t len_ticks, warm_ticks, stuck_ticks;
	uint64_t phase_end;
	uint64_t checked;             /* count at the last clock read */
	uint64_t seen, seen_at;       /* watchdog: last count that moved, and when */
	uint64_t stamp[STREAM_INTERVALS + 1], at[STREAM_INTERVALS + 1];  /* interval edges: ticks, counts */
	double cpu0, cpu1;
} stream_meter;

typedef struct stream_ctx {
	/* Sender -> receiver words, each on its own line. */
	_Alignas(BENCH_CACHELINE) atomic_bool stop;       /* receiver: measurement over */
	_Alignas(BENCH_CACHELINE) atomic_uint rx_ready;   /* receiver: ready (the sender may start) */
	_Alignas(BENCH_CACHELINE) atomic_uint tx_done;    /* sender: no more messages; `sent` is final */
	_Alignas(BENCH_CACHELINE) atomic_uint drained;    /* receiver: took all `sent` */
	_Alignas(BENCH_CACHELINE) _Atomic uint64_t sent;
	_Alignas(BENCH_CACHELINE) stream_sink sink;
	_Alignas(BENCH_CACHELINE) stream_meter meter;
	uint64_t full;                /* sender: sends that found the queue full */
	long batch;                   /* --batch */
	const char *name;
	/* Per message over the row, for its JSON: the harness sets
	 * full_per_msg from `full`; a mechanism's finish may set both. */
	double kicks_per_msg, full_per_msg;
	void *priv;                   /* mechanism-private state */
	char why[160];                /* setup failure reason */
} stream_ctx;

typedef struct mech_stream {
	const char *summary;
	/** Main thread, before the threads start; 0 or errno with r->why set. */
	int (*setup)(stream_ctx *r);
	/** The two threads' bodies (argument: the stream_ctx). */
	void *(*receiver)(void *r);
	void *(*sender)(void *r);
	/** Main thread, after both threads ended and the hand-off was checked:
	 *  counters into kicks_per_msg / full_per_msg (optional), free. */
	void (*finish)(const bench_opts *o, stream_ctx *r);
} mech_stream;

/* The receiver takes message value v (it must be the previous one + 1). */
static inline void stream_take(stream_sink *s, uint64_t v)
{
	if (__builtin_expect(v != s->count + 1, 0) && !s->bad_at) {
		s->bad_at = s->count + 1;
		s->bad_value = v;
	}
	s->sum += v;
	s->count++;
}

/* The slow path of stream_rx_step (suites/throughput.c). */
bool stream_meter_check(stream_ctx *r, uint64_t count);

/* The receiver, after every poll: count is its total so far, idle whether
 * the poll found nothing.  Returns true once the row is over (stopped, and
 * everything sent taken): the receiver then calls stream_rx_done.  Cheap
 * unless the clock is due. */
static inline bool stream_rx_step(stream_ctx *r, uint64_t count, bool idle)
{
	if (!idle && count - r->meter.checked < STREAM_CHECK_EVERY)
		return false;
	return stream_meter_check(r, count);
}

/* The receiver took everything: the sender may end. */
void stream_rx_done(stream_ctx *r);
/* The sender's end: v messages sent; waits until the receiver took them
 * all (the watchdogs of the receiver and of the row end a stall). */
void stream_tx_done(stream_ctx *r, uint64_t v);

/* ------------------------------------------------------------------ */
/* Mechanisms and the registry                                          */
/* ------------------------------------------------------------------ */

typedef struct bench_mech {
	const char *name;             /* as rows and --mechanisms name it */
	const char *family;           /* "baseline", "events" or "messaging" */
	mech_wake unicast;
	mech_wake broadcast;
	mech_stream throughput;
} bench_mech;

enum mech_role { ROLE_UNICAST, ROLE_BROADCAST, ROLE_THROUGHPUT };

/** Does m play role? */
bool mech_plays(const bench_mech *m, enum mech_role role);
/** The mechanism called name that plays role, or NULL. */
const bench_mech *mech_find(enum mech_role role, const char *name);
/** The mechanisms of role in the registry's order (at most max) into out;
 *  returns how many. */
int mech_all(enum mech_role role, const bench_mech **out, int max);
/** `nemo-bench list` lines of role's mechanisms: name, [scenarios], summary. */
void mech_list(enum mech_role role, FILE *out);
/** The wake hooks of role (ROLE_UNICAST or ROLE_BROADCAST). */
static inline const mech_wake *mech_wake_of(const bench_mech *m, enum mech_role role)
{
	return role == ROLE_BROADCAST ? &m->broadcast : &m->unicast;
}

/** Each family's mechanisms (mechs/<family>.c), NULL-terminated; the
 *  registry lists them in this order. */
extern const bench_mech *const mechs_baseline[];
extern const bench_mech *const mechs_events[];
extern const bench_mech *const mechs_messaging[];

/** ck-ring's entries (mechs/messaging.c), for the throughput rows' config. */
extern const unsigned mech_ck_ring_entries;

#endif
