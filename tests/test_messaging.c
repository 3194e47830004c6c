/*
 * test_messaging.c - domains, places, notifications and active messages:
 * every error of the API, delivery in each context, order, visibility,
 * backpressure, leaving with messages queued, and a send racing a leave.
 * No test here asserts a time.
 */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/nemo.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/membarrier.h>

/* ------------------------------------------------------------ helpers */

typedef struct rec {
	atomic_uint count;
	atomic_uint last_action;
	atomic_uint last_event;
	_Atomic uint64_t last_arg;
	_Atomic nemo_place_id last_src;
	_Atomic nemo_place_id last_dest;
	atomic_int last_ctx;
	atomic_uint bad_order;
	_Atomic uint64_t expect_next;     /* order check: args must be 1, 2, 3... */
	unsigned char payload[NEMO_AM_PAYLOAD_MAX];
	atomic_size_t len;
} rec;

static void record(const nemo_am_msg *m, void *ctx)
{
	rec *r = ctx;
	atomic_store(&r->last_action, m->action);
	atomic_store(&r->last_event, m->event);
	atomic_store(&r->last_arg, m->arg);
	atomic_store(&r->last_src, m->src);
	atomic_store(&r->last_dest, m->dest);
	atomic_store(&r->last_ctx, (int)m->context);
	if (m->len)
		memcpy(r->payload, m->payload, m->len);
	atomic_store(&r->len, m->len);
	atomic_fetch_add(&r->count, 1);
}

static void ordered(const nemo_am_msg *m, void *ctx)
{
	rec *r = ctx;
	uint64_t want = atomic_load(&r->expect_next);
	if (m->arg != want)
		atomic_fetch_add(&r->bad_order, 1);
	atomic_store(&r->expect_next, m->arg + 1);
	atomic_fetch_add(&r->count, 1);
}

static void run_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
	CHECK(pthread_create(t, NULL, fn, arg) == 0);
}

static void spin_until(atomic_uint *v, unsigned want)
{
	struct timespec dl = in_ms(CLOCK_MONOTONIC, 20000);
	while (atomic_load(v) < want) {
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > dl.tv_sec || (now.tv_sec == dl.tv_sec && now.tv_nsec > dl.tv_nsec)) {
			fprintf(stderr, "spin_until: stuck at %u < %u\n", atomic_load(v), want);
			CHECK(!"progress");
			return;
		}
		sched_yield();
	}
}

/* --------------------------------------------------- the barrier in use */

/* NEMO_MEMBARRIER=0 (ctest: test_messaging_fenced) turns the leaver's
 * membarrier off and every send fences instead (src/platform/asym.c
 * BARRIER): the process must then not be registered for the expedited
 * membarrier, or that run tests the default path a second time.  The
 * kernel says which: MEMBARRIER_CMD_PRIVATE_EXPEDITED fails with EPERM in
 * a process that did not register.  (Without the variable nemo registers
 * where the kernel lets it, and falls back where it does not: both are
 * right, so only the fenced run is checked.) */
static void test_barrier_mode(void)
{
	nemo_domain *d;
	CHECK_EQ_INT(nemo_domain_create(NULL, &d), 0);   /* nemo decides here */
	long rc = syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
	int err = rc == 0 ? 0 : errno;
	const char *env = getenv("NEMO_MEMBARRIER");
	fprintf(stderr, "barrier: %s\n", err ? "senders fence" : "the leaver's membarrier");
	if (env && strcmp(env, "0") == 0)
		CHECK_EQ_INT(err, EPERM);
	CHECK_EQ_INT(nemo_domain_destroy(d), 0);
}

/* ------------------------------------------------------------ domain API */

static void test_domain_errors(void)
{
	nemo_domain *d;
	nemo_domain_attr a = { .ring_slots = 12 };
	CHECK_EQ_INT(nemo_domain_create(&a, &d), EINVAL);      /* not a power of two */
	a = (nemo_domain_attr){ .ring_slots = 4 };
	CHECK_EQ_INT(nemo_domain_create(&a, &d), EINVAL);
	a = (nemo_domain_attr){ .max_places = NEMO_PLACES_MAX + 1 };
	CHECK_EQ_INT(nemo_domain_create(&a, &d), EINVAL);
	a = (nemo_domain_attr){ .max_actions = NEMO_AM_ACTIONS_MAX + 1 };
	CHECK_EQ_INT(nemo_domain_create(&a, &d), EINVAL);
	a = (nemo_domain_attr){ .irq_signal = SIGKILL };
	CHECK_EQ_INT(nemo_domain_create(&a, &d), EINVAL);
	CHECK_EQ_INT(nemo_domain_create(NULL, NULL), EINVAL);
	CHECK_EQ_INT(nemo_domain_destroy(NULL), EINVAL);

	CHECK_EQ_INT(nemo_domain_create(NULL, &d), 0);
	/* Not a place yet. */
	CHECK_EQ_INT(nemo_am_send(0, 0, 0, 0), ENOTCONN);
	CHECK_EQ_INT(nemo_notify(0, 0, 0), ENOTCONN);
	CHECK_EQ_INT(nemo_poll(NULL), ENOTCONN);
	CHECK_EQ_INT(nemo_place_wait(NULL, NULL), ENOTCONN);
	CHECK_EQ_INT(nemo_place_leave(), ENOTCONN);
	CHECK_EQ_INT(nemo_flush(NEMO_PLACE_ALL), ENOTCONN);
	CHECK_EQ_INT(nemo_am_event_map(0, 0), ENOTCONN);
	CHECK_EQ_INT(nemo_notify_set_handler(NULL, NULL), ENOTCONN);
	CHECK_EQ_INT(nemo_place_set_interrupts(true), ENOTCONN);
	CHECK(nemo_place_self() == NEMO_PLACE_NONE);
	CHECK(nemo_place_domain() == NULL);

	/* Registration. */
	rec r = { 0 };
	CHECK_EQ_INT(nemo_action_register(d, 0, NULL, NULL), EINVAL);
	CHECK_EQ_INT(nemo_action_register(NULL, 0, record, &r), EINVAL);
	CHECK_EQ_INT(nemo_action_register(d, 256, record, &r), ERANGE);
	CHECK_EQ_INT(nemo_action_register(d, 3, record, &r), 0);
	CHECK_EQ_INT(nemo_action_register(d, 3, record, &r), EEXIST);

	/* Join: bad attributes, twice. */
	nemo_place_attr pa = { .flags = 1u << 7 };
	nemo_place_id me;
	CHECK_EQ_INT(nemo_place_join(d, &pa, &me), EINVAL);
	pa = (nemo_place_attr){ .flags = NEMO_PLACE_PIN, .cpu = -1 };
	CHECK_EQ_INT(nemo_place_join(d, &pa, &me), EINVAL);
	pa = (nemo_place_attr){ .flags = NEMO_PLACE_PIN, .cpu = 100000 };
	CHECK_EQ_INT(nemo_place_join(d, &pa, &me), EINVAL);
	CHECK(nemo_place_self() == NEMO_PLACE_NONE);
	CHECK_EQ_INT(nemo_place_join(d, NULL, &me), 0);
	CHECK(nemo_place_self() == me);
	CHECK(nemo_place_domain() == d);
	CHECK_EQ_INT(nemo_place_join(d, NULL, &me), EALREADY);
	CHECK_EQ_INT(nemo_place_check(d, me), 0);
	size_t n = 0;
	nemo_place_id ids[4];
	CHECK_EQ_INT(nemo_domain_places(d, ids, 4, &n), 0);
	CHECK_EQ_INT(n, 1);
	CHECK(ids[0] == me);
	CHECK_EQ_INT(nemo_domain_places(d, NULL, 4, &n), EINVAL);

	/* Sends: every bad input gets its own code. */
	CHECK_EQ_INT(nemo_am_send(me, 4, 0, 0), ENOENT);            /* unregistered */
	CHECK_EQ_INT(nemo_am_send(me, 999, 0, 0), ERANGE);          /* out of range */
	CHECK_EQ_INT(nemo_am_send(me, NEMO_AM_EVENT(999), 0, 0), ERANGE);
	CHECK_EQ_INT(nemo_am_send(me, NEMO_AM_EVENT(5), 0, 0), ENOENT);  /* unmapped */
	CHECK_EQ_INT(nemo_am_send(nemo_place_index(me) + 1, 3, 0, 0), ESRCH);  /* never joined */
	CHECK_EQ_INT(nemo_am_send(4095, 3, 0, 0), ESRCH);           /* beyond max_places */
	CHECK_EQ_INT(nemo_am_send(me + ((nemo_place_id)1 << 16), 3, 0, 0), ESRCH); /* another generation */
	CHECK_EQ_INT(nemo_am_send(NEMO_PLACE_NONE, 3, 0, 0), ESRCH);
	CHECK_EQ_INT(nemo_am_send(me, 3, 0, 1u << 9), EINVAL);      /* unknown flag */
	char big[NEMO_AM_PAYLOAD_MAX + 1] = { 0 };
	CHECK_EQ_INT(nemo_am_sendv(me, 3, 0, big, sizeof big, 0), EMSGSIZE);
	CHECK_EQ_INT(nemo_am_sendv(me, 3, 0, NULL, 4, 0), EINVAL);
	CHECK_EQ_INT(nemo_am_event_map(999, 3), ERANGE);
	CHECK_EQ_INT(nemo_am_event_map(5, 999), ERANGE);
	CHECK_EQ_INT(nemo_am_event_map(5, 4), ENOENT);
	uint32_t act;
	CHECK_EQ_INT(nemo_am_event_lookup(me, 5, &act), ENOENT);
	CHECK_EQ_INT(nemo_am_event_lookup(me, 5, NULL), EINVAL);
	CHECK_EQ_INT(nemo_notify(me, 1, 0), ENOENT);                /* no handler */
	CHECK_EQ_INT(nemo_notify(me, NEMO_NOTIFY_CHAN_MAX + 1, 0), ERANGE);
	CHECK_EQ_INT(nemo_notify(me, 1, 1u << 9), EINVAL);
	CHECK_EQ_INT(nemo_flush(4095), ESRCH);
	nemo_wait_policy bad = { .kind = 99 };
	CHECK_EQ_INT(nemo_place_set_policy(&bad), EINVAL);
	CHECK_EQ_INT(nemo_place_set_policy(NULL), EINVAL);
	struct timespec badts = { .tv_sec = 0, .tv_nsec = 2000000000L };
	CHECK_EQ_INT(nemo_place_wait(&badts, NULL), EINVAL);
	struct timespec soon = in_ms(CLOCK_MONOTONIC, 5);
	CHECK_EQ_INT(nemo_place_wait(&soon, NULL), ETIMEDOUT);
	CHECK_EQ_INT(r.count, 0);                                   /* none of those queued anything */

	/* Destroy with a place in it. */
	CHECK_EQ_INT(nemo_domain_destroy(d), EBUSY);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_place_leave(), ENOTCONN);
	CHECK_EQ_INT(nemo_place_check(d, me), ESRCH);
	CHECK_EQ_INT(nemo_domain_destroy(d), 0);
	/* Destroyed: every call with it says so. */
	CHECK_EQ_INT(nemo_domain_destroy(d), EIDRM);
	CHECK_EQ_INT(nemo_place_join(d, NULL, &me), EIDRM);
	CHECK_EQ_INT(nemo_action_register(d, 1, record, &r), EIDRM);
	nemo_domain_counters c;
	CHECK_EQ_INT(nemo_domain_get_counters(d, &c), EIDRM);
	CHECK_EQ_INT(nemo_place_check(d, me), EIDRM);
}

/* ------------------------------------------------- self-send, contexts */

static void test_self_send(void)
{
	nemo_domain *d;
	CHECK_EQ_INT(nemo_domain_create(NULL, &d), 0);
	rec r = { 0 };
	CHECK_EQ_INT(nemo_action_register(d, 7, record, &r), 0);
	nemo_place_id me;
	CHECK_EQ_INT(nemo_place_join(d, NULL, &me), 0);
	CHECK_EQ_INT(nemo_am_event_map(42, 7), 0);
	uint32_t act = 0;
	CHECK_EQ_INT(nemo_am_event_lookup(me, 42, &act), 0);
	CHECK_EQ_INT(act, 7);

	const char text[] = "forty-eight bytes of payload, exactly, here!!!!";
	CHECK_EQ_INT(sizeof text, 48);
	CHECK_EQ_INT(nemo_am_sendv(me, NEMO_AM_EVENT(42), 0x1122334455667788ull, text, sizeof text, 0), 0);
	CHECK_EQ_INT(r.count, 0);                  /* queued, not run: we did not poll */
	unsigned h = 0;
	CHECK_EQ_INT(nemo_poll(&h), 0);
	CHECK_EQ_INT(h, 1);
	CHECK_EQ_INT(r.count, 1);
	CHECK_EQ_INT(r.last_action, 7);
	CHECK_EQ_INT(r.last_event, 42);
	CHECK(r.last_arg == 0x1122334455667788ull);
	CHECK(r.last_src == me && r.last_dest == me);
	CHECK_EQ_INT(r.last_ctx, NEMO_AM_CTX_POLL);
	CHECK_EQ_INT(r.len, 48);
	CHECK(memcmp(r.payload, text, 48) == 0);

	/* Every payload length round-trips. */
	for (size_t len = 0; len <= NEMO_AM_PAYLOAD_MAX; len++) {
		unsigned char buf[NEMO_AM_PAYLOAD_MAX];
		for (size_t i = 0; i < len; i++)
			buf[i] = (unsigned char)(len * 7 + i);
		CHECK_EQ_INT(nemo_am_sendv(me, 7, len, buf, len, 0), 0);
		struct timespec dl = in_ms(CLOCK_MONOTONIC, 1000);
		CHECK_EQ_INT(nemo_place_wait(&dl, &h), 0);
		CHECK_EQ_INT(r.len, len);
		CHECK_EQ_INT(r.last_ctx, NEMO_AM_CTX_WAIT);
		CHECK(len == 0 || memcmp(r.payload, buf, len) == 0);
	}
	/* A batch larger than the ring, to ourselves: the send serves its own
	 * queue while it waits for room; order and count hold. */
	{
		uint64_t args[1000];
		for (int i = 0; i < 1000; i++)
			args[i] = 1000 + (uint64_t)i;
		unsigned before = r.count;
		size_t sent = 99;
		CHECK_EQ_INT(nemo_am_send_batch(me, 7, args, 1000, 0, &sent), 0);
		CHECK_EQ_INT(sent, 1000);
		CHECK_EQ_INT(nemo_poll(&h), 0);
		CHECK_EQ_INT(r.count, before + 1000);
		CHECK(r.last_arg == 1999);
		CHECK_EQ_INT(nemo_am_send_batch(me, 7, NULL, 3, 0, &sent), EINVAL);
		CHECK_EQ_INT(nemo_am_send_batch(me, 7, args, 0, 0, &sent), 0);
		CHECK_EQ_INT(sent, 0);
		CHECK_EQ_INT(nemo_am_send_batch(me, 999, args, 3, 0, &sent), ERANGE);
		CHECK_EQ_INT(nemo_am_send_batch(4095, 7, args, 3, 0, &sent), ESRCH);
		CHECK_EQ_INT(sent, 0);
		CHECK_EQ_INT(nemo_am_send_batch(me, 7, args, 3, 1u << 9, &sent), EINVAL);
	}
	/* Unmap: the event no longer resolves. */
	CHECK_EQ_INT(nemo_am_event_map(42, NEMO_AM_EVENT(0) | 0x7FFFFFFFu), 0);
	CHECK_EQ_INT(nemo_am_send(me, NEMO_AM_EVENT(42), 0, 0), ENOENT);
	nemo_domain_counters c;
	CHECK_EQ_INT(nemo_domain_get_counters(d, &c), 0);
	CHECK_EQ_INT(c.am_sent, 1 + NEMO_AM_PAYLOAD_MAX + 1 + 1000);
	CHECK_EQ_INT(c.am_handled, c.am_sent);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(d), 0);
}

/* ------------------------------- two places: ALT per place, order, wait */

struct pair {
	nemo_domain *d;
	atomic_uint ready;
	_Atomic nemo_place_id rx;
	rec r1, r2;
	nemo_wait_policy pol;
	long n;
	uint64_t data[1024];      /* plain memory: written before send, read in the handler */
	atomic_uint data_bad;
	atomic_uint stop;
};

static void check_data(const nemo_am_msg *m, void *ctx)
{
	struct pair *p = ctx;
	/* Visibility: the sender wrote data[arg % 1024] = arg before sending. */
	if (p->data[m->arg % 1024] != m->arg)
		atomic_fetch_add(&p->data_bad, 1);
	ordered(m, &p->r1);
}

static void *pair_rx(void *arg)
{
	struct pair *p = arg;
	nemo_place_attr a = { .policy = p->pol };
	nemo_place_id id;
	CHECK_EQ_INT(nemo_place_join(p->d, &a, &id), 0);
	CHECK_EQ_INT(nemo_am_event_map(9, 2), 0);     /* event 9 means action 2 here */
	atomic_store(&p->rx, id);
	atomic_fetch_add(&p->ready, 1);
	while (atomic_load(&p->r1.count) < (unsigned)p->n) {
		struct timespec dl = in_ms(CLOCK_MONOTONIC, 20000);
		int rc = nemo_place_wait(&dl, NULL);
		CHECK_EQ_INT(rc, 0);
		if (rc)
			break;
	}
	/* Stay a place until the sender is done with us: it still flushes
	 * to us after its last message, which we may have handled already. */
	spin_until(&p->stop, 1);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void test_pair(nemo_wait_kind kind)
{
	struct pair *p = calloc(1, sizeof *p);
	p->pol = (nemo_wait_policy){ kind, 2000 };
	p->n = 20000;
	atomic_store(&p->r1.expect_next, 1);
	CHECK_EQ_INT(nemo_domain_create(NULL, &p->d), 0);
	CHECK_EQ_INT(nemo_action_register(p->d, 1, check_data, p), 0);
	CHECK_EQ_INT(nemo_action_register(p->d, 2, record, &p->r2), 0);
	pthread_t t;
	run_thread(&t, pair_rx, p);
	nemo_place_id me;
	CHECK_EQ_INT(nemo_place_join(p->d, NULL, &me), 0);
	CHECK_EQ_INT(nemo_am_event_map(9, 1), 0);     /* ...and action 1 on this place */
	spin_until(&p->ready, 1);
	nemo_place_id rx = atomic_load(&p->rx);
	uint32_t act;
	CHECK_EQ_INT(nemo_am_event_lookup(rx, 9, &act), 0);
	CHECK_EQ_INT(act, 2);
	CHECK_EQ_INT(nemo_am_event_lookup(me, 9, &act), 0);
	CHECK_EQ_INT(act, 1);
	/* One event, two meanings. */
	CHECK_EQ_INT(nemo_am_send(rx, NEMO_AM_EVENT(9), 77, 0), 0);
	spin_until(&p->r2.count, 1);
	CHECK_EQ_INT(p->r2.last_event, 9);
	CHECK_EQ_INT(p->r2.last_action, 2);
	CHECK(p->r2.last_src == me);
	/* A stream, in order, with data written before each send. */
	for (long i = 1; i <= p->n; i++) {
		p->data[i % 1024] = (uint64_t)i;
		unsigned fl = (i % 7 == 0) ? NEMO_MORE : (i % 11 == 0) ? NEMO_PUSH : 0;
		int rc = nemo_am_send(rx, 1, (uint64_t)i, fl);
		CHECK_EQ_INT(rc, 0);
		if (rc)
			break;
		/* The receiver must be done with data[i % 1024] before it is
		 * overwritten: wait for it every 1000 messages. */
		if (i % 1000 == 0) {
			CHECK_EQ_INT(nemo_flush(rx), 0);
			spin_until(&p->r1.count, (unsigned)i);
		}
	}
	CHECK_EQ_INT(nemo_flush(NEMO_PLACE_ALL), 0);
	atomic_store(&p->stop, 1);
	pthread_join(t, NULL);
	CHECK_EQ_INT(p->r1.count, p->n);
	CHECK_EQ_INT(p->r1.bad_order, 0);
	CHECK_EQ_INT(p->data_bad, 0);
	CHECK_EQ_INT(nemo_am_send(rx, 1, 0, 0), ESRCH);   /* it left */
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(p->d), 0);
	free(p);
}

/* ---------------------------------------------------------- backpressure */

struct bp {
	nemo_domain *d;
	_Atomic nemo_place_id rx;
	atomic_uint phase;
	rec r;
	atomic_uint chans, chan_bad;
};

static void nf_handler(void *ctx, nemo_place_id src, uint32_t chan)
{
	struct bp *b = ctx;
	(void)src;
	unsigned want = atomic_load(&b->chans);
	if (chan != want)
		atomic_fetch_add(&b->chan_bad, 1);
	atomic_fetch_add(&b->chans, 1);
}

static void *bp_rx(void *arg)
{
	struct bp *b = arg;
	nemo_place_id id;
	CHECK_EQ_INT(nemo_place_join(b->d, NULL, &id), 0);
	CHECK_EQ_INT(nemo_notify_set_handler(nf_handler, b), 0);
	atomic_store(&b->rx, id);
	atomic_store(&b->phase, 1);
	spin_until(&b->phase, 2);    /* the sender filled our queues */
	/* Drain slowly: the blocked sender must get room each time. */
	while (atomic_load(&b->r.count) < 8 + 100 || atomic_load(&b->chans) < 16 + 100) {
		struct timespec dl = in_ms(CLOCK_MONOTONIC, 20000);
		CHECK_EQ_INT(nemo_place_wait(&dl, NULL), 0);
	}
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void test_backpressure(void)
{
	struct bp *b = calloc(1, sizeof *b);
	nemo_domain_attr a = { .ring_slots = 8 };
	CHECK_EQ_INT(nemo_domain_create(&a, &b->d), 0);
	atomic_store(&b->r.expect_next, 1);
	CHECK_EQ_INT(nemo_action_register(b->d, 0, ordered, &b->r), 0);
	pthread_t t;
	run_thread(&t, bp_rx, b);
	CHECK_EQ_INT(nemo_place_join(b->d, NULL, NULL), 0);
	spin_until(&b->phase, 1);
	nemo_place_id rx = atomic_load(&b->rx);
	/* The ring holds exactly 8 one-slot messages; the FIFO 16 entries. */
	uint64_t next = 1;
	for (int i = 0; i < 8; i++)
		CHECK_EQ_INT(nemo_am_send(rx, 0, next++, NEMO_NONBLOCK), 0);
	CHECK_EQ_INT(nemo_am_send(rx, 0, next, NEMO_NONBLOCK), EAGAIN);
	for (uint32_t i = 0; i < 16; i++)
		CHECK_EQ_INT(nemo_notify(rx, i, NEMO_NONBLOCK), 0);
	CHECK_EQ_INT(nemo_notify(rx, 16, NEMO_NONBLOCK), EAGAIN);
	/* A payload message needs 1 + 4 slots: no room either. */
	char pl[48] = { 0 };
	CHECK_EQ_INT(nemo_am_sendv(rx, 0, next, pl, sizeof pl, NEMO_NONBLOCK), EAGAIN);
	atomic_store(&b->phase, 2);
	/* Blocking sends now wait for room; nothing is lost, order holds. */
	for (int i = 0; i < 100; i++) {
		CHECK_EQ_INT(nemo_am_send(rx, 0, next++, 0), 0);
		CHECK_EQ_INT(nemo_notify(rx, 16 + (uint32_t)i, 0), 0);
	}
	pthread_join(t, NULL);
	CHECK_EQ_INT(b->r.count, 108);
	CHECK_EQ_INT(b->r.bad_order, 0);
	CHECK_EQ_INT(b->chans, 116);
	CHECK_EQ_INT(b->chan_bad, 0);
	nemo_domain_counters c;
	CHECK_EQ_INT(nemo_domain_get_counters(b->d, &c), 0);
	CHECK(c.full_waits > 0);
	CHECK_EQ_INT(c.notify_sent, c.notify_handled);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(b->d), 0);
	free(b);
}

/* ------------------------------------------ a cycle of full queues */

struct cyc {
	nemo_domain *d;
	_Atomic nemo_place_id id[2];
	atomic_uint joined;
	rec r[2];
};

struct cyc_arg {
	struct cyc *c;
	int me;
};

static void *cyc_main(void *arg)
{
	struct cyc_arg *a = arg;
	struct cyc *c = a->c;
	nemo_place_id id;
	CHECK_EQ_INT(nemo_place_join(c->d, NULL, &id), 0);
	atomic_store(&c->id[a->me], id);
	atomic_fetch_add(&c->joined, 1);
	spin_until(&c->joined, 2);
	nemo_place_id peer = atomic_load(&c->id[1 - a->me]);
	/* Both flood each other without ever polling: each blocking send
	 * must serve its own queue, or both would wait forever. */
	for (uint64_t i = 1; i <= 5000; i++)
		CHECK_EQ_INT(nemo_am_send(peer, (uint32_t)(1 - a->me), i, 0), 0);
	while (atomic_load(&c->r[a->me].count) < 5000) {
		struct timespec dl = in_ms(CLOCK_MONOTONIC, 20000);
		CHECK_EQ_INT(nemo_place_wait(&dl, NULL), 0);
	}
	atomic_fetch_add(&c->joined, 1);
	spin_until(&c->joined, 4);     /* don't leave while the peer still sends */
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void test_full_cycle(void)
{
	struct cyc *c = calloc(1, sizeof *c);
	nemo_domain_attr a = { .ring_slots = 8 };
	CHECK_EQ_INT(nemo_domain_create(&a, &c->d), 0);
	for (int i = 0; i < 2; i++) {
		atomic_store(&c->r[i].expect_next, 1);
		/* action 0 runs on place 0, action 1 on place 1 */
		CHECK_EQ_INT(nemo_action_register(c->d, (uint32_t)i, ordered, &c->r[i]), 0);
	}
	struct cyc_arg args[2] = { { c, 0 }, { c, 1 } };
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		run_thread(&t[i], cyc_main, &args[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ_INT(c->r[i].count, 5000);
		CHECK_EQ_INT(c->r[i].bad_order, 0);
	}
	CHECK_EQ_INT(nemo_domain_destroy(c->d), 0);
	free(c);
}

/* ------------------------------------- leaving with messages queued */

struct lv {
	nemo_domain *d;
	_Atomic nemo_place_id rx;
	atomic_uint phase;
	rec r;
	atomic_int leave_in_handler;
};

static void try_leave(const nemo_am_msg *m, void *ctx)
{
	struct lv *l = ctx;
	(void)m;
	atomic_store(&l->leave_in_handler, nemo_place_leave());
	atomic_fetch_add(&l->r.count, 1);
}

static void *lv_rx(void *arg)
{
	struct lv *l = arg;
	nemo_place_id id;
	CHECK_EQ_INT(nemo_place_join(l->d, NULL, &id), 0);
	CHECK_EQ_INT(nemo_notify_set_handler(nf_handler, NULL), 0);
	atomic_store(&l->rx, id);
	atomic_store(&l->phase, 1);
	spin_until(&l->phase, 2);
	/* Never polled: leaving runs every queued handler, here. */
	CHECK_EQ_INT(l->r.count, 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(l->r.count, 101);
	CHECK_EQ_INT(l->leave_in_handler, EBUSY);
	atomic_store(&l->phase, 3);
	return NULL;
}

static void *lv_exit_rx(void *arg)
{
	struct lv *l = arg;
	nemo_place_id id;
	CHECK_EQ_INT(nemo_place_join(l->d, NULL, &id), 0);
	atomic_store(&l->rx, id);
	atomic_store(&l->phase, 1);
	spin_until(&l->phase, 2);
	return NULL;      /* exits as a place: the exit leaves, handling all */
}

static void test_leave_pending(void)
{
	struct lv *l = calloc(1, sizeof *l);
	CHECK_EQ_INT(nemo_domain_create(NULL, &l->d), 0);
	atomic_store(&l->r.expect_next, 1);
	CHECK_EQ_INT(nemo_action_register(l->d, 0, ordered, &l->r), 0);
	CHECK_EQ_INT(nemo_action_register(l->d, 1, try_leave, l), 0);
	pthread_t t;
	run_thread(&t, lv_rx, l);
	CHECK_EQ_INT(nemo_place_join(l->d, NULL, NULL), 0);
	spin_until(&l->phase, 1);
	nemo_place_id rx = atomic_load(&l->rx);
	for (uint64_t i = 1; i <= 100; i++)
		CHECK_EQ_INT(nemo_am_send(rx, 0, i, (i % 3) ? NEMO_MORE : 0), 0);
	CHECK_EQ_INT(nemo_am_send(rx, 1, 0, 0), 0);
	atomic_store(&l->phase, 2);
	pthread_join(t, NULL);
	CHECK_EQ_INT(l->r.bad_order, 0);
	CHECK_EQ_INT(nemo_am_send(rx, 0, 1, 0), ESRCH);
	CHECK_EQ_INT(nemo_notify(rx, 1, 0), ESRCH);

	/* A thread that exits as a place: its queue is handled too. */
	atomic_store(&l->phase, 0);
	atomic_store(&l->r.count, 0);
	atomic_store(&l->r.expect_next, 1);
	run_thread(&t, lv_exit_rx, l);
	spin_until(&l->phase, 1);
	rx = atomic_load(&l->rx);
	for (uint64_t i = 1; i <= 50; i++)
		CHECK_EQ_INT(nemo_am_send(rx, 0, i, 0), 0);
	atomic_store(&l->phase, 2);
	pthread_join(t, NULL);
	CHECK_EQ_INT(l->r.count, 50);
	CHECK_EQ_INT(l->r.bad_order, 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(l->d), 0);
	free(l);
}

/* ---------------------------- a send racing a leave: delivered XOR failed */

struct race {
	nemo_domain *d;
	_Atomic nemo_place_id rx;
	atomic_uint phase;
	atomic_uint handled;
	atomic_uint nf_handled;
	atomic_uint stop;
};

static void race_handler(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	atomic_fetch_add(&((struct race *)ctx)->handled, 1);
}

static void race_nf(void *ctx, nemo_place_id src, uint32_t chan)
{
	(void)src;
	(void)chan;
	atomic_fetch_add(&((struct race *)ctx)->nf_handled, 1);
}

static void *race_rx(void *arg)
{
	struct race *r = arg;
	nemo_place_id id;
	CHECK_EQ_INT(nemo_place_join(r->d, NULL, &id), 0);
	CHECK_EQ_INT(nemo_notify_set_handler(race_nf, r), 0);
	atomic_store(&r->rx, id);
	atomic_store(&r->phase, 1);
	/* Handle some, then leave in the middle of the stream. */
	for (int i = 0; i < 3; i++)
		nemo_poll(NULL);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void test_leave_race(void)
{
	struct race *r = calloc(1, sizeof *r);
	nemo_domain_attr a = { .ring_slots = 16 };
	CHECK_EQ_INT(nemo_domain_create(&a, &r->d), 0);
	CHECK_EQ_INT(nemo_action_register(r->d, 0, race_handler, r), 0);
	CHECK_EQ_INT(nemo_place_join(r->d, NULL, NULL), 0);
	unsigned ok = 0, nf_ok = 0;
	for (int round = 0; round < 300; round++) {
		atomic_store(&r->phase, 0);
		pthread_t t;
		run_thread(&t, race_rx, r);
		spin_until(&r->phase, 1);
		nemo_place_id rx = atomic_load(&r->rx);
		for (int i = 0;; i++) {
			int rc;
			if (i % 3 == 2) {
				/* A batch: the delivered part is a prefix, counted. */
				uint64_t args[7] = { 0 };
				size_t sent = 0;
				rc = nemo_am_send_batch(rx, 0, args, 7, 0, &sent);
				ok += (unsigned)sent;
				if (rc == ESRCH)
					break;
				CHECK_EQ_INT(rc, 0);
				CHECK_EQ_INT(sent, 7);
				if (rc)
					break;
				continue;
			}
			rc = (i & 1) ? nemo_notify(rx, (uint32_t)i, 0) : nemo_am_send(rx, 0, (uint64_t)i, 0);
			if (rc == ESRCH)
				break;
			CHECK_EQ_INT(rc, 0);
			if (rc)
				break;
			if (i & 1)
				nf_ok++;
			else
				ok++;
		}
		pthread_join(t, NULL);
	}
	/* Every send that returned 0 was handled, and no other. */
	CHECK_EQ_INT(r->handled, ok);
	CHECK_EQ_INT(r->nf_handled, nf_ok);
	nemo_domain_counters c;
	CHECK_EQ_INT(nemo_domain_get_counters(r->d, &c), 0);
	CHECK_EQ_INT(c.am_handled, c.am_sent);
	CHECK_EQ_INT(c.notify_handled, c.notify_sent);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(r->d), 0);
	free(r);
}

/* ---------------------------------- a live receiver is never reported gone */

/* Several senders, more threads than CPUs, one receiver that stays a
 * place until told to stop: every send, notify, batch and flush to it
 * must succeed (EAGAIN only where NEMO_NONBLOCK asked for it).  A send
 * that reported a live place gone (ESRCH) would fail here. */
#define LIVE_SENDERS 4
#define LIVE_OPS 20000

struct live {
	nemo_domain *d;
	_Atomic nemo_place_id rx;
	atomic_uint ready, stop;
	atomic_uint am_got, nf_got, am_sent, nf_sent;
};

static void live_am(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	atomic_fetch_add(&((struct live *)ctx)->am_got, 1);
}

static void live_nf(void *ctx, nemo_place_id src, uint32_t chan)
{
	(void)src;
	(void)chan;
	atomic_fetch_add(&((struct live *)ctx)->nf_got, 1);
}

static void *live_rx(void *arg)
{
	struct live *l = arg;
	nemo_place_attr a = { .policy = { NEMO_WAIT_HYBRID, 2000 } };
	nemo_place_id id;
	CHECK_EQ_INT(nemo_place_join(l->d, &a, &id), 0);
	CHECK_EQ_INT(nemo_notify_set_handler(live_nf, l), 0);
	atomic_store(&l->rx, id);
	atomic_store(&l->ready, 1);
	while (!atomic_load(&l->stop)) {
		struct timespec dl = in_ms(CLOCK_MONOTONIC, 10);
		int rc = nemo_place_wait(&dl, NULL);
		CHECK(rc == 0 || rc == ETIMEDOUT);
	}
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void *live_tx(void *arg)
{
	struct live *l = arg;
	static const unsigned flags[] = { 0, NEMO_MORE, NEMO_PUSH, NEMO_NONBLOCK, NEMO_MORE | NEMO_NONBLOCK };
	CHECK_EQ_INT(nemo_place_join(l->d, NULL, NULL), 0);
	nemo_place_id rx = atomic_load(&l->rx);
	uint64_t args[16] = { 0 };
	unsigned am = 0, nf = 0, bad = 0;
	for (int i = 0; i < LIVE_OPS && bad < 10; i++) {
		unsigned f = flags[i % 5];
		int rc;
		if (i % 13 == 0) {
			size_t sent = 0;
			rc = nemo_am_send_batch(rx, 0, args, 16, f, &sent);
			am += (unsigned)sent;
		} else if (i % 4 == 0) {
			rc = nemo_notify(rx, (uint32_t)i & 0xFFFFu, f);
			nf += rc == 0;
		} else {
			rc = nemo_am_send(rx, 0, (uint64_t)i, f);
			am += rc == 0;
		}
		if (rc == EAGAIN && (f & NEMO_NONBLOCK))
			rc = nemo_poll(NULL);
		if (rc) {
			fprintf(stderr, "live receiver: op %d (flags %#x): %s\n", i, f, strerror(rc));
			bad++;
		}
		CHECK_EQ_INT(rc, 0);
		if (i % 64 == 0) {
			rc = nemo_flush(rx);
			bad += rc != 0;
			CHECK_EQ_INT(rc, 0);
		}
		if (i % 512 == 0)
			CHECK_EQ_INT(nemo_place_check(l->d, rx), 0);
	}
	CHECK_EQ_INT(nemo_flush(rx), 0);
	CHECK_EQ_INT(nemo_flush(NEMO_PLACE_ALL), 0);
	atomic_fetch_add(&l->am_sent, am);
	atomic_fetch_add(&l->nf_sent, nf);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void test_live_receiver(void)
{
	struct live *l = calloc(1, sizeof *l);
	nemo_domain_attr a = { .ring_slots = 16 };
	CHECK_EQ_INT(nemo_domain_create(&a, &l->d), 0);
	CHECK_EQ_INT(nemo_action_register(l->d, 0, live_am, l), 0);
	pthread_t rx, tx[LIVE_SENDERS];
	run_thread(&rx, live_rx, l);
	spin_until(&l->ready, 1);
	for (int i = 0; i < LIVE_SENDERS; i++)
		run_thread(&tx[i], live_tx, l);
	for (int i = 0; i < LIVE_SENDERS; i++)
		pthread_join(tx[i], NULL);
	/* Every sender has left; what they sent is queued: wait for it. */
	spin_until(&l->am_got, atomic_load(&l->am_sent));
	spin_until(&l->nf_got, atomic_load(&l->nf_sent));
	atomic_store(&l->stop, 1);
	pthread_join(rx, NULL);
	CHECK_EQ_INT(l->am_got, l->am_sent);
	CHECK_EQ_INT(l->nf_got, l->nf_sent);
	CHECK(l->am_sent > LIVE_SENDERS * LIVE_OPS / 2);
	CHECK_EQ_INT(nemo_domain_destroy(l->d), 0);
	free(l);
}

/* --------------------------------------------------------- generations */

#ifndef NEMO_TEST_OLD_CODE
/* Test-only (src/messaging/domain.c, messaging_internal.h): give free
 * index idx of d generation gen, so that its next occupant gets gen + 1.
 * It lets a test reach generations that 2^30 or 2^48 joins would. */
int nemo__test_set_gen(nemo_domain *d, unsigned idx, uint64_t gen);
#endif

/* The generation of an id (nemo/domain.h: the high 48 bits). */
static uint64_t gen_of(nemo_place_id id)
{
#ifdef NEMO_TEST_OLD_CODE
	return id >> 12;
#else
	return id >> 16;
#endif
}

struct gen {
	nemo_domain *d;
	_Atomic nemo_place_id rx;
	atomic_uint phase;               /* main -> rx: poll now (even) ; rx: done (odd) */
	_Atomic nemo_place_id am_src[8], nf_src[8];   /* by arg / chan */
	atomic_int am_reply[8], nf_reply[8];          /* the rx's reply to src */
	atomic_uint misdirected;         /* handled by a place nothing was sent to */
};

static struct gen *gen_test;

/* At the receiver: record who sent it, and answer it (NEMO_NONBLOCK). */
static void gen_am(const nemo_am_msg *m, void *ctx)
{
	struct gen *g = ctx;
	unsigned k = (unsigned)m->arg & 7;
	atomic_store(&g->am_src[k], m->src);
	atomic_store(&g->am_reply[k], nemo_am_send(m->src, 1, 100 + m->arg, NEMO_NONBLOCK));
}

static void gen_nf(void *ctx, nemo_place_id src, uint32_t chan)
{
	struct gen *g = ctx;
	atomic_store(&g->nf_src[chan & 7], src);
	atomic_store(&g->nf_reply[chan & 7], nemo_notify(src, 100 + chan, NEMO_NONBLOCK));
}

/* At a sender: nothing should arrive except the replies it asked for. */
static void gen_stray(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	(void)ctx;
	atomic_fetch_add(&gen_test->misdirected, 1);
}

static void gen_stray_nf(void *ctx, nemo_place_id src, uint32_t chan)
{
	(void)ctx;
	(void)src;
	(void)chan;
	atomic_fetch_add(&gen_test->misdirected, 1);
}

static void *gen_rx(void *arg)
{
	struct gen *g = arg;
	nemo_place_id id;
	CHECK_EQ_INT(nemo_place_join(g->d, NULL, &id), 0);
	CHECK_EQ_INT(nemo_notify_set_handler(gen_nf, g), 0);
	atomic_store(&g->rx, id);
	/* Poll only when told: messages wait meanwhile. */
	for (unsigned ph = 2; ph <= 10; ph += 2) {
		spin_until(&g->phase, ph);
		CHECK_EQ_INT(nemo_poll(NULL), 0);
		atomic_store(&g->phase, ph + 1);
	}
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void gen_join(struct gen *g, nemo_place_id *id)
{
	CHECK_EQ_INT(nemo_place_join(g->d, NULL, id), 0);
	CHECK_EQ_INT(nemo_notify_set_handler(gen_stray_nf, NULL), 0);
}

static void gen_step(struct gen *g, unsigned ph)
{
	atomic_store(&g->phase, ph);
	spin_until(&g->phase, ph + 1);
}

/* Index 1 is re-occupied 256 times while a message and a notification
 * of its first occupant A wait at the receiver: the handlers must name
 * A, and the receiver's replies to A must fail (ESRCH), not reach the
 * place B that now holds the index (with 7-bit sender tags, B's
 * generation was A's + 256: the same tag).  B's first send to the
 * receiver waits until A's entries are consumed (EAGAIN with
 * NEMO_NONBLOCK).  Then the same with generations past 2^32 and at the
 * 48-bit wrap. */
static void test_sender_generation(void)
{
	struct gen *g = calloc(1, sizeof *g);
	gen_test = g;
	nemo_domain_attr a = { .max_places = 4, .ring_slots = 8 };
	CHECK_EQ_INT(nemo_domain_create(&a, &g->d), 0);
	CHECK_EQ_INT(nemo_action_register(g->d, 0, gen_am, g), 0);
	CHECK_EQ_INT(nemo_action_register(g->d, 1, gen_stray, NULL), 0);
	atomic_store(&g->rx, NEMO_PLACE_NONE);
	pthread_t t;
	run_thread(&t, gen_rx, g);
	while (atomic_load(&g->rx) == NEMO_PLACE_NONE)
		sched_yield();
	nemo_place_id rx = atomic_load(&g->rx), A, B;
	CHECK_EQ_INT(nemo_place_index(rx), 0);

	gen_join(g, &A);
	CHECK_EQ_INT(nemo_place_index(A), 1);
	CHECK_EQ_INT(nemo_am_send(rx, 0, 1, 0), 0);
	CHECK_EQ_INT(nemo_notify(rx, 1, 0), 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	for (int i = 0; i < 255; i++) {
		nemo_place_id x;
		CHECK_EQ_INT(nemo_place_join(g->d, NULL, &x), 0);
		CHECK_EQ_INT(nemo_place_leave(), 0);
	}
	gen_join(g, &B);
	CHECK_EQ_INT(nemo_place_index(B), 1);
	CHECK(gen_of(B) == gen_of(A) + 256);
	/* The first send on each queue waits for A's entry there. */
	CHECK_EQ_INT(nemo_am_send(rx, 0, 2, NEMO_NONBLOCK), EAGAIN);
	CHECK_EQ_INT(nemo_notify(rx, 2, NEMO_NONBLOCK), EAGAIN);
	gen_step(g, 2);                       /* the receiver handles A's */
	CHECK(atomic_load(&g->am_src[1]) == A);
	CHECK(atomic_load(&g->nf_src[1]) == A);
	CHECK_EQ_INT(atomic_load(&g->am_reply[1]), ESRCH);
	CHECK_EQ_INT(atomic_load(&g->nf_reply[1]), ESRCH);
	CHECK_EQ_INT(nemo_poll(NULL), 0);
	CHECK_EQ_INT(g->misdirected, 0);      /* no reply to A reached B */
	/* Now B's own: they carry B's name, and B gets the replies. */
	CHECK_EQ_INT(nemo_am_send(rx, 0, 2, NEMO_NONBLOCK), 0);
	CHECK_EQ_INT(nemo_notify(rx, 2, 0), 0);
	gen_step(g, 4);
	CHECK(atomic_load(&g->am_src[2]) == B);
	CHECK(atomic_load(&g->nf_src[2]) == B);
	CHECK_EQ_INT(atomic_load(&g->am_reply[2]), 0);
	CHECK_EQ_INT(atomic_load(&g->nf_reply[2]), 0);
	CHECK_EQ_INT(nemo_poll(NULL), 0);
	CHECK_EQ_INT(g->misdirected, 2);
	atomic_store(&g->misdirected, 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);

#ifndef NEMO_TEST_OLD_CODE
	/* Generations no 32-bit word holds: past 2^32, and the wrap of the
	 * 48-bit generation (from 2^48 - 1 to 1; 0 is never used). */
	CHECK_EQ_INT(nemo__test_set_gen(g->d, 0, 5), EBUSY);       /* rx is there */
	CHECK_EQ_INT(nemo__test_set_gen(g->d, 1, (1ull << 32) + 6), 0);
	gen_join(g, &A);
	CHECK(gen_of(A) == (1ull << 32) + 7);
	CHECK_EQ_INT(nemo_am_send(rx, 0, 3, 0), 0);
	CHECK_EQ_INT(nemo_notify(rx, 3, 0), 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo__test_set_gen(g->d, 1, (1ull << 48) - 2), 0);
	gen_join(g, &B);
	CHECK(gen_of(B) == (1ull << 48) - 1);
	CHECK(B != NEMO_PLACE_NONE && B != NEMO_PLACE_ALL);
	CHECK_EQ_INT(nemo_am_send(rx, 0, 4, NEMO_NONBLOCK), EAGAIN);
	gen_step(g, 6);
	CHECK(atomic_load(&g->am_src[3]) == A);
	CHECK(atomic_load(&g->nf_src[3]) == A);
	CHECK_EQ_INT(atomic_load(&g->am_reply[3]), ESRCH);
	CHECK_EQ_INT(atomic_load(&g->nf_reply[3]), ESRCH);
	CHECK_EQ_INT(nemo_am_send(rx, 0, 4, NEMO_NONBLOCK), 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	gen_join(g, &A);                      /* the wrap */
	CHECK(gen_of(A) == 1);
	CHECK_EQ_INT(nemo_am_send(rx, 0, 5, NEMO_NONBLOCK), EAGAIN);  /* B's is queued */
	gen_step(g, 8);
	CHECK(atomic_load(&g->am_src[4]) == B);
	CHECK_EQ_INT(atomic_load(&g->am_reply[4]), ESRCH);
	CHECK_EQ_INT(nemo_am_send(rx, 0, 5, 0), 0);
	gen_step(g, 10);
	CHECK(atomic_load(&g->am_src[5]) == A);
	CHECK_EQ_INT(atomic_load(&g->am_reply[5]), 0);
	CHECK_EQ_INT(nemo_poll(NULL), 0);
	CHECK_EQ_INT(g->misdirected, 1);
	CHECK_EQ_INT(nemo_place_leave(), 0);
#else
	gen_step(g, 6);
	gen_step(g, 8);
	gen_step(g, 10);
#endif
	pthread_join(t, NULL);
	CHECK_EQ_INT(nemo_domain_destroy(g->d), 0);
	gen_test = NULL;
	free(g);
}

/* A blocking first send waits for the previous occupant's entries while
 * serving its own queues, and fails with ESRCH if the receiver leaves. */
struct gw {
	nemo_domain *d;
	_Atomic nemo_place_id rx;
	atomic_uint phase, got;
	atomic_int rc;
	atomic_int idle;       /* the receiver is out of its waits (round 1 may start) */
};

static void gw_am(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	atomic_fetch_add(&((struct gw *)ctx)->got, 1);
}

static void *gw_rx(void *arg)
{
	struct gw *w = arg;
	nemo_place_id id;
	CHECK_EQ_INT(nemo_place_join(w->d, NULL, &id), 0);
	atomic_store(&w->rx, id);
	atomic_store(&w->phase, 1);
	spin_until(&w->phase, 2);
	CHECK_EQ_INT(w->got, 0);
	/* The new occupant is blocked in its first send: handle what its
	 * predecessor sent, and then the send itself. */
	while (atomic_load(&w->got) < 3) {
		struct timespec dl = in_ms(CLOCK_MONOTONIC, 20000);
		CHECK_EQ_INT(nemo_place_wait(&dl, NULL), 0);
	}
	/* Out of the wait: round 1's messages must not be drained before
	 * its sender is seen waiting (a slow machine once left us in the
	 * wait's drain while they came, and the send did not wait). */
	atomic_store(&w->idle, 1);
	spin_until(&w->phase, 3);
	CHECK_EQ_INT(nemo_place_leave(), 0);     /* with 2 more queued */
	return NULL;
}

static void *gw_tx(void *arg)
{
	struct gw *w = arg;
	CHECK_EQ_INT(nemo_place_join(w->d, NULL, NULL), 0);
	atomic_store(&w->rc, nemo_am_send(atomic_load(&w->rx), 0, 0, 0));
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

/* Until n sends have waited (domain counter full_waits). */
static void wait_full_waits(nemo_domain *d, uint64_t n)
{
	struct timespec dl = in_ms(CLOCK_MONOTONIC, 20000);
	for (;;) {
		nemo_domain_counters c;
		CHECK_EQ_INT(nemo_domain_get_counters(d, &c), 0);
		if (c.full_waits >= n)
			return;
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > dl.tv_sec || (now.tv_sec == dl.tv_sec && now.tv_nsec > dl.tv_nsec)) {
			fprintf(stderr, "first send: no wait seen (full_waits %llu < %llu)\n",
				(unsigned long long)c.full_waits, (unsigned long long)n);
			CHECK(!"the first send waits");
			return;
		}
		sched_yield();
	}
}

static void test_first_send_wait(void)
{
	struct gw *w = calloc(1, sizeof *w);
	nemo_domain_attr a = { .max_places = 2 };
	CHECK_EQ_INT(nemo_domain_create(&a, &w->d), 0);
	CHECK_EQ_INT(nemo_action_register(w->d, 0, gw_am, w), 0);
	pthread_t rx, tx;
	run_thread(&rx, gw_rx, w);
	spin_until(&w->phase, 1);
	nemo_place_id r = atomic_load(&w->rx);
	for (int round = 0; round < 2; round++) {
		/* Two messages of a place that leaves; then its successor sends,
		 * and must wait: the receiver does not look at its queues. */
		if (round == 1)
			while (!atomic_load(&w->idle))
				sched_yield();
		CHECK_EQ_INT(nemo_place_join(w->d, NULL, NULL), 0);
		CHECK_EQ_INT(nemo_am_send(r, 0, 0, 0), 0);
		CHECK_EQ_INT(nemo_am_send(r, 0, 0, 0), 0);
		CHECK_EQ_INT(nemo_place_leave(), 0);
		atomic_store(&w->rc, -1);
		run_thread(&tx, gw_tx, w);
		wait_full_waits(w->d, (uint64_t)round + 1);
		CHECK_EQ_INT(atomic_load(&w->rc), -1);   /* still waiting */
		/* Round 0: the receiver handles all three.  Round 1: it leaves,
		 * handling the predecessor's two in its final drain.  The send
		 * then fails with ESRCH - or, if the final drain gave the
		 * entries back before its last pass and the send wrote in time,
		 * that pass takes it and the send succeeds: a send racing a
		 * leave either reaches the place or fails, and says which. */
		atomic_store(&w->phase, 2 + (unsigned)round);
		pthread_join(tx, NULL);
		if (round == 0)
			CHECK_EQ_INT(atomic_load(&w->rc), 0);
		else
			CHECK(atomic_load(&w->rc) == ESRCH || atomic_load(&w->rc) == 0);
	}
	pthread_join(rx, NULL);
	/* Exactly the messages that were reported sent were handled. */
	CHECK_EQ_INT(w->got, atomic_load(&w->rc) == 0 ? 6 : 5);
	CHECK_EQ_INT(nemo_domain_destroy(w->d), 0);
	free(w);
}

/* An id whose index has been re-occupied 2^20 times (where a 20-bit
 * generation wrapped) is still stale: ESRCH, not the new occupant. */
static void test_stale_id(void)
{
	nemo_domain *d;
	nemo_domain_attr a = { .max_places = 1 };
	CHECK_EQ_INT(nemo_domain_create(&a, &d), 0);
	rec r = { 0 };
	CHECK_EQ_INT(nemo_action_register(d, 0, record, &r), 0);
	nemo_place_id A, B, x = 0;
	CHECK_EQ_INT(nemo_place_join(d, NULL, &A), 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	unsigned bad = 0;
	for (unsigned i = 1; i < (1u << 20); i++) {
		bad += nemo_place_join(d, NULL, &x) != 0;
		bad += x == A;
		bad += nemo_place_leave() != 0;
	}
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(nemo_place_join(d, NULL, &B), 0);
	CHECK(B != A);
	CHECK(gen_of(B) == gen_of(A) + (1u << 20));
	CHECK_EQ_INT(nemo_place_check(d, A), ESRCH);
	CHECK_EQ_INT(nemo_am_send(A, 0, 1, 0), ESRCH);
	CHECK_EQ_INT(nemo_flush(A), ESRCH);
	CHECK_EQ_INT(nemo_poll(NULL), 0);
	CHECK_EQ_INT(r.count, 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
#ifndef NEMO_TEST_OLD_CODE
	/* Where 32 bits would wrap: 2^32 more joins. */
	CHECK_EQ_INT(nemo__test_set_gen(d, 0, gen_of(A) + (1ull << 32) - 1), 0);
	CHECK_EQ_INT(nemo_place_join(d, NULL, &B), 0);
	CHECK(gen_of(B) == gen_of(A) + (1ull << 32));
	CHECK_EQ_INT(nemo_place_check(d, A), ESRCH);
	CHECK_EQ_INT(nemo_am_send(A, 0, 1, 0), ESRCH);
	CHECK_EQ_INT(nemo_place_check(d, B), 0);
	CHECK_EQ_INT(nemo_am_send(B, 0, 2, 0), 0);
	CHECK_EQ_INT(nemo_poll(NULL), 0);
	CHECK_EQ_INT(r.count, 1);
	CHECK(r.last_src == B);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo__test_set_gen(d, 1, 5), EINVAL);     /* no such index */
#endif
	CHECK_EQ_INT(nemo_domain_destroy(d), 0);
}

/* ------------------------------------------------------ interrupt mode */

struct irq {
	nemo_domain *d;
	_Atomic nemo_place_id rx;
	atomic_uint phase;
	atomic_uint got;
	atomic_int ctx_seen;
	atomic_uint nf_got;
};

static void irq_handler_am(const nemo_am_msg *m, void *ctx)
{
	struct irq *q = ctx;
	atomic_store(&q->ctx_seen, (int)m->context);
	atomic_store(&q->got, (unsigned)m->arg);
}

static void irq_nf(void *ctx, nemo_place_id src, uint32_t chan)
{
	(void)src;
	atomic_store(&((struct irq *)ctx)->nf_got, chan);
}

static void *irq_rx(void *arg)
{
	struct irq *q = arg;
	nemo_place_attr a = { .flags = NEMO_PLACE_INTERRUPTS };
	nemo_place_id id;
	CHECK_EQ_INT(nemo_place_join(q->d, &a, &id), 0);
	CHECK_EQ_INT(nemo_notify_set_handler(irq_nf, q), 0);
	atomic_store(&q->rx, id);
	atomic_store(&q->phase, 1);
	/* Compute, never poll: only the signal can run the handler. */
	uint64_t x = 1;
	while (atomic_load_explicit(&q->got, memory_order_relaxed) < 20) {
		for (int i = 0; i < 64; i++)
			x = x * 6364136223846793005ULL + 1;
		__asm__ __volatile__("" : "+r"(x));
	}
	while (atomic_load_explicit(&q->nf_got, memory_order_relaxed) != 5)
		;
	/* Interrupts off: a message waits; on again: it runs at once. */
	CHECK_EQ_INT(nemo_place_set_interrupts(false), 0);
	atomic_store(&q->phase, 2);
	spin_until(&q->phase, 3);
	CHECK_EQ_INT(q->got, 20);           /* not run while off */
	CHECK_EQ_INT(nemo_place_set_interrupts(true), 0);
	CHECK_EQ_INT(q->got, 21);           /* run by turning them on */
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void test_interrupts(void)
{
	struct irq *q = calloc(1, sizeof *q);
	CHECK_EQ_INT(nemo_domain_create(NULL, &q->d), 0);
	CHECK_EQ_INT(nemo_action_register(q->d, 0, irq_handler_am, q), 0);
	pthread_t t;
	run_thread(&t, irq_rx, q);
	CHECK_EQ_INT(nemo_place_join(q->d, NULL, NULL), 0);
	spin_until(&q->phase, 1);
	nemo_place_id rx = atomic_load(&q->rx);
	for (unsigned i = 1; i <= 20; i++) {
		CHECK_EQ_INT(nemo_am_send(rx, 0, i, 0), 0);
		spin_until(&q->got, i);
	}
	CHECK_EQ_INT(q->ctx_seen, NEMO_AM_CTX_INTERRUPT);
	CHECK_EQ_INT(nemo_notify(rx, 5, 0), 0);
	spin_until(&q->phase, 2);
	CHECK_EQ_INT(nemo_am_send(rx, 0, 21, 0), 0);
	usleep(20000);
	atomic_store(&q->phase, 3);
	pthread_join(t, NULL);
	nemo_domain_counters c;
	CHECK_EQ_INT(nemo_domain_get_counters(q->d, &c), 0);
	CHECK(c.interrupts >= 1);
	CHECK(c.kicks_signal >= 1);
	CHECK_EQ_INT(c.am_handled, 21);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(q->d), 0);
	free(q);
}

/* A place in interrupt mode streams to a polling place with the generic
 * send (curried after its second send, bound.c), while that place sends
 * it requests as fast as it can: the replies, sent by handlers that run
 * in the signal handler, go on the very pair the stream uses, and a
 * signal lands inside a stream send again and again.  A send that read
 * its position before it turned interrupts off wrote that position
 * twice: a message overwritten (the stream out of order, or a reply
 * lost).  nemo-bench's app suite hung this way in half its runs. */
#define XS_SENDS 200000u

struct xs {
	nemo_domain *d;
	_Atomic nemo_place_id streamer, server;
	atomic_uint phase;
	atomic_uint replies, requests;
	atomic_uint got, bad_order;
	uint64_t next;
};

static void xs_req(const nemo_am_msg *m, void *ctx)   /* on the streamer, in its signal handler */
{
	struct xs *x = ctx;
	atomic_fetch_add_explicit(&x->requests, 1, memory_order_relaxed);
	CHECK_EQ_INT(nemo_am_reply(m, 2, m->arg, NULL, 0, 0), 0);
}

static void xs_rep(const nemo_am_msg *m, void *ctx)   /* on the server */
{
	(void)m;
	struct xs *x = ctx;
	atomic_fetch_add_explicit(&x->replies, 1, memory_order_relaxed);
}

static void xs_data(const nemo_am_msg *m, void *ctx)  /* on the server */
{
	struct xs *x = ctx;
	if (m->arg != x->next)
		atomic_fetch_add_explicit(&x->bad_order, 1, memory_order_relaxed);
	x->next = m->arg + 1;
	atomic_fetch_add_explicit(&x->got, 1, memory_order_release);
}

static void *xs_streamer(void *arg)
{
	struct xs *x = arg;
	nemo_place_attr pa = { .flags = NEMO_PLACE_INTERRUPTS };
	nemo_place_id id;
	CHECK_EQ_INT(nemo_place_join(x->d, &pa, &id), 0);
	atomic_store(&x->streamer, id);
	spin_until(&x->phase, 1);
	nemo_place_id srv = atomic_load(&x->server);
	for (unsigned i = 0; i < XS_SENDS; i++)
		if (nemo_am_send(srv, 1, i, 0) != 0) {
			CHECK(!"stream send");
			break;
		}
	atomic_store(&x->phase, 2);
	spin_until(&x->phase, 3);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void test_interrupts_stream(void)
{
	struct xs *x = calloc(1, sizeof *x);
	CHECK_EQ_INT(nemo_domain_create(NULL, &x->d), 0);
	CHECK_EQ_INT(nemo_action_register(x->d, 0, xs_req, x), 0);
	CHECK_EQ_INT(nemo_action_register(x->d, 1, xs_data, x), 0);
	CHECK_EQ_INT(nemo_action_register(x->d, 2, xs_rep, x), 0);
	nemo_place_id me;
	CHECK_EQ_INT(nemo_place_join(x->d, NULL, &me), 0);
	atomic_store(&x->server, me);
	pthread_t t;
	run_thread(&t, xs_streamer, x);
	while (!atomic_load(&x->streamer))
		sched_yield();
	nemo_place_id st = atomic_load(&x->streamer);
	atomic_store(&x->phase, 1);
	/* Requests as fast as the ring takes them, draining between. */
	unsigned sent = 0;
	struct timespec dl = in_ms(CLOCK_MONOTONIC, 30000);
	while (atomic_load(&x->phase) < 2 || atomic_load(&x->replies) < sent ||
	       atomic_load(&x->got) < XS_SENDS) {
		if (atomic_load(&x->phase) < 2 && sent - atomic_load(&x->replies) < 8 &&
		    nemo_am_send(st, 0, sent, NEMO_NONBLOCK) == 0)
			sent++;
		nemo_poll(NULL);
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > dl.tv_sec) {
			/* The streamer may wait for room for good: no join. */
			fprintf(stderr, "xs: stuck: %u of %u replies, %u of %u stream messages, %u out of order\n",
				atomic_load(&x->replies), sent, atomic_load(&x->got), XS_SENDS,
				atomic_load(&x->bad_order));
			CHECK(!"stream and replies complete");
			exit(check_exit("test_messaging"));
		}
	}
	CHECK(sent > 0);
	CHECK_EQ_INT(atomic_load(&x->bad_order), 0);
	CHECK_EQ_INT(atomic_load(&x->got), XS_SENDS);
	CHECK_EQ_INT(atomic_load(&x->replies), sent);
	atomic_store(&x->phase, 3);
	pthread_join(t, NULL);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(x->d), 0);
	free(x);
}

/* A place in interrupt mode switches its notification handler while
 * others flood it: a signal that lands inside nemo_notify_set_handler
 * must run one handler with its own context, never another's. */
#define SW_SENDERS 2
#define SW_WANT 5000u

struct sw {
	nemo_domain *d;
	_Atomic nemo_place_id rx;
	atomic_uint ready, stop;
	atomic_uint got, foreign;
	int ctx_a, ctx_b;
};

static struct sw *sw_test;

static void sw_a(void *ctx, nemo_place_id src, uint32_t chan)
{
	(void)src;
	(void)chan;
	if (ctx != &sw_test->ctx_a)
		atomic_fetch_add(&sw_test->foreign, 1);
	atomic_fetch_add(&sw_test->got, 1);
}

static void sw_b(void *ctx, nemo_place_id src, uint32_t chan)
{
	(void)src;
	(void)chan;
	if (ctx != &sw_test->ctx_b)
		atomic_fetch_add(&sw_test->foreign, 1);
	atomic_fetch_add(&sw_test->got, 1);
}

static void *sw_rx(void *arg)
{
	struct sw *w = arg;
	nemo_place_attr a = { .flags = NEMO_PLACE_INTERRUPTS };
	nemo_place_id id;
	CHECK_EQ_INT(nemo_place_join(w->d, &a, &id), 0);
	CHECK_EQ_INT(nemo_notify_set_handler(sw_a, &w->ctx_a), 0);
	atomic_store(&w->rx, id);
	atomic_store(&w->ready, 1);
	/* Never poll: only the signal runs handlers, mostly in here. */
	unsigned bad = 0;
	while (atomic_load_explicit(&w->got, memory_order_relaxed) < SW_WANT) {
		bad += nemo_notify_set_handler(sw_b, &w->ctx_b) != 0;
		bad += nemo_notify_set_handler(sw_a, &w->ctx_a) != 0;
	}
	CHECK_EQ_INT(bad, 0);
	atomic_store(&w->stop, 1);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void *sw_tx(void *arg)
{
	struct sw *w = arg;
	CHECK_EQ_INT(nemo_place_join(w->d, NULL, NULL), 0);
	nemo_place_id rx = atomic_load(&w->rx);
	for (uint32_t i = 0; !atomic_load_explicit(&w->stop, memory_order_relaxed); i++) {
		int rc = nemo_notify(rx, i & 0xFFFFu, NEMO_PUSH | NEMO_NONBLOCK);
		if (rc == ESRCH)
			break;          /* it left: done */
		if (rc == EAGAIN)
			sched_yield();
		else
			CHECK_EQ_INT(rc, 0);
	}
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void test_handler_switch(void)
{
	struct sw *w = calloc(1, sizeof *w);
	sw_test = w;
	CHECK_EQ_INT(nemo_domain_create(NULL, &w->d), 0);
	pthread_t rx, tx[SW_SENDERS];
	run_thread(&rx, sw_rx, w);
	spin_until(&w->ready, 1);
	for (int i = 0; i < SW_SENDERS; i++)
		run_thread(&tx[i], sw_tx, w);
	pthread_join(rx, NULL);
	for (int i = 0; i < SW_SENDERS; i++)
		pthread_join(tx[i], NULL);
	if (atomic_load(&w->foreign))
		fprintf(stderr, "handler switch: %u of %u notifications ran with another handler's context\n",
			atomic_load(&w->foreign), atomic_load(&w->got));
	CHECK_EQ_INT(w->foreign, 0);
	nemo_domain_counters c;
	CHECK_EQ_INT(nemo_domain_get_counters(w->d, &c), 0);
	CHECK(c.interrupts > 0);
	CHECK_EQ_INT(nemo_domain_destroy(w->d), 0);
	sw_test = NULL;
	free(w);
}

/* No signal after interrupts end: a place in interrupt mode is flooded
 * (every send kicks it, NEMO_PUSH), then turns interrupts off or leaves
 * and sleeps in nanosleep, which a stray signal would end with EINTR.
 * A kicker that read irq_on before it was cleared must not land its
 * tgkill afterwards. */
#define ST_SENDERS 3
#define ST_ROUNDS 300

struct stale {
	nemo_domain *d;
	_Atomic nemo_place_id rx;
	atomic_uint stop, got, eintr, sleeps;
};

static void stale_am(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	atomic_fetch_add(&((struct stale *)ctx)->got, 1);
}

static void *stale_tx(void *arg)
{
	struct stale *st = arg;
	CHECK_EQ_INT(nemo_place_join(st->d, NULL, NULL), 0);
	while (!atomic_load_explicit(&st->stop, memory_order_relaxed)) {
		nemo_place_id rx = atomic_load(&st->rx);
		int rc = rx == NEMO_PLACE_NONE ? ESRCH : nemo_am_send(rx, 0, 0, NEMO_PUSH | NEMO_NONBLOCK);
		if (rc == ESRCH || rc == EAGAIN)
			sched_yield();
		else
			CHECK_EQ_INT(rc, 0);
	}
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

/* Sleep 1 ms twice; count sleeps cut short by a signal. */
static void stale_sleep(struct stale *st)
{
	for (int i = 0; i < 2; i++) {
		struct timespec ts = { 0, 1000000 };
		if (nanosleep(&ts, NULL) != 0 && errno == EINTR)
			atomic_fetch_add(&st->eintr, 1);
		atomic_fetch_add(&st->sleeps, 1);
	}
}

static void *stale_rx(void *arg)
{
	struct stale *st = arg;
	nemo_place_attr a = { .flags = NEMO_PLACE_INTERRUPTS };
	for (int round = 0; round < ST_ROUNDS; round++) {
		nemo_place_id id;
		CHECK_EQ_INT(nemo_place_join(st->d, &a, &id), 0);
		atomic_store(&st->rx, id);
		/* Compute, never poll, until two interrupts' worth arrived. */
		unsigned want = atomic_load(&st->got) + 2;
		struct timespec dl = in_ms(CLOCK_MONOTONIC, 20000);
		while (atomic_load_explicit(&st->got, memory_order_relaxed) < want) {
			struct timespec now;
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec > dl.tv_sec) {
				CHECK(!"interrupts arrive");
				break;
			}
		}
		if (round % 2) {
			/* Interrupts off: no signal may land now either. */
			CHECK_EQ_INT(nemo_place_set_interrupts(false), 0);
			stale_sleep(st);
			CHECK_EQ_INT(nemo_place_set_interrupts(true), 0);
		}
		atomic_store(&st->rx, NEMO_PLACE_NONE);
		CHECK_EQ_INT(nemo_place_leave(), 0);
		stale_sleep(st);
	}
	atomic_store(&st->stop, 1);
	return NULL;
}

static void test_no_stale_signal(void)
{
	struct stale *st = calloc(1, sizeof *st);
	atomic_store(&st->rx, NEMO_PLACE_NONE);
	CHECK_EQ_INT(nemo_domain_create(NULL, &st->d), 0);
	CHECK_EQ_INT(nemo_action_register(st->d, 0, stale_am, st), 0);
	pthread_t rx, tx[ST_SENDERS];
	for (int i = 0; i < ST_SENDERS; i++)
		run_thread(&tx[i], stale_tx, st);
	run_thread(&rx, stale_rx, st);
	pthread_join(rx, NULL);
	for (int i = 0; i < ST_SENDERS; i++)
		pthread_join(tx[i], NULL);
	if (atomic_load(&st->eintr))
		fprintf(stderr, "stale signals: %u of %u sleeps after interrupts ended returned EINTR\n",
			atomic_load(&st->eintr), atomic_load(&st->sleeps));
	CHECK_EQ_INT(st->eintr, 0);
	CHECK_EQ_INT(nemo_domain_destroy(st->d), 0);
	free(st);
}

/* What a blocking system call sees when the interrupt signal arrives
 * (nemo/domain.h, "Interrupt mode"): the handler is installed with
 * SA_RESTART, so a read() of a pipe is restarted after the handlers ran;
 * calls that signal(7) says are never restarted, such as nanosleep, fail
 * with EINTR (nanosleep reporting the time left).  Not under
 * ThreadSanitizer: it runs an asynchronous signal's handler only at the
 * thread's next interceptor or in the few calls it knows to block, so
 * no handler runs while read() waits, and the kernel restarts the read
 * under TSan's own handler. */
#if defined(__SANITIZE_THREAD__)
#define NEMO_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NEMO_TEST_TSAN 1
#endif
#endif

#ifndef NEMO_TEST_TSAN
struct sc {
	nemo_domain *d;
	_Atomic nemo_place_id rx;
	atomic_uint phase, got;
	int pipe[2];
	ssize_t read_rc;
	int read_errno, sleep_rc, sleep_errno;
	struct timespec left;
};

static void sc_am(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	atomic_fetch_add(&((struct sc *)ctx)->got, 1);
}

static void *sc_rx(void *arg)
{
	struct sc *c = arg;
	nemo_place_attr a = { .flags = NEMO_PLACE_INTERRUPTS };
	nemo_place_id id;
	CHECK_EQ_INT(nemo_place_join(c->d, &a, &id), 0);
	atomic_store(&c->rx, id);
	atomic_store(&c->phase, 1);
	char b = 0;
	errno = 0;
	c->read_rc = read(c->pipe[0], &b, 1);     /* interrupted, restarted */
	c->read_errno = errno;
	atomic_store(&c->phase, 2);
	struct timespec req = { 20, 0 };
	errno = 0;
	c->sleep_rc = nanosleep(&req, &c->left);  /* interrupted: EINTR */
	c->sleep_errno = errno;
	atomic_store(&c->phase, 3);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void test_syscall_restart(void)
{
	struct sc *c = calloc(1, sizeof *c);
	CHECK_EQ_INT(pipe(c->pipe), 0);
	CHECK_EQ_INT(nemo_domain_create(NULL, &c->d), 0);
	CHECK_EQ_INT(nemo_action_register(c->d, 0, sc_am, c), 0);
	CHECK_EQ_INT(nemo_place_join(c->d, NULL, NULL), 0);
	pthread_t t;
	run_thread(&t, sc_rx, c);
	spin_until(&c->phase, 1);
	nemo_place_id rx = atomic_load(&c->rx);
	/* Signals while it blocks in read(): 20 handler runs, 1 ms apart,
	 * then the byte it reads. */
	struct timespec dl = in_ms(CLOCK_MONOTONIC, 20000), now;
	for (unsigned want = 1; want <= 20; want++) {
		CHECK_EQ_INT(nemo_am_send(rx, 0, 0, NEMO_PUSH), 0);
		while (atomic_load(&c->got) < want) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec > dl.tv_sec)
				break;
			sched_yield();
		}
		usleep(1000);
	}
	CHECK_EQ_INT(atomic_load(&c->got), 20);   /* the handlers ran */
	CHECK_EQ_INT(atomic_load(&c->phase), 1);    /* still in read() */
	CHECK_EQ_INT(write(c->pipe[1], "x", 1), 1);
	spin_until(&c->phase, 2);
	CHECK_EQ_INT(c->read_rc, 1);
	CHECK_EQ_INT(c->read_errno, 0);
	/* Then signals until its 20-second nanosleep ends. */
	dl = in_ms(CLOCK_MONOTONIC, 20000);
	while (atomic_load(&c->phase) == 2) {
		CHECK_EQ_INT(nemo_am_send(rx, 0, 0, NEMO_PUSH), 0);
		usleep(1000);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > dl.tv_sec)
			break;
	}
	pthread_join(t, NULL);
	CHECK_EQ_INT(c->sleep_rc, -1);
	CHECK_EQ_INT(c->sleep_errno, EINTR);
	/* The time left: more than nothing, and not more than asked for
	 * (plus the timer slack: Linux reports the remaining time to the
	 * timer's latest expiry, which the slack puts up to 50 us past). */
	CHECK(c->left.tv_sec > 0 || c->left.tv_nsec > 0);
	CHECK(c->left.tv_sec < 20 || (c->left.tv_sec == 20 && c->left.tv_nsec < 1000000));
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(c->d), 0);
	close(c->pipe[0]);
	close(c->pipe[1]);
	free(c);
}

#endif /* NEMO_TEST_TSAN */

/* ---------------------------------------------------------- broadcast */

#define BK 4

struct bc {
	nemo_domain *d;
	_Atomic nemo_place_id id[BK];
	atomic_uint joined, done;
	atomic_uint got[BK];
	atomic_uint action_of[BK];
};

struct bc_arg {
	struct bc *b;
	int k;
};

static void bc_handler(const nemo_am_msg *m, void *ctx)
{
	struct bc *b = ctx;
	for (int k = 0; k < BK; k++)
		if (atomic_load(&b->id[k]) == m->dest) {
			atomic_fetch_add(&b->got[k], 1);
			atomic_store(&b->action_of[k], m->action);
		}
}

static void *bc_main(void *arg)
{
	struct bc_arg *a = arg;
	struct bc *b = a->b;
	nemo_place_attr pa = { .policy = { NEMO_WAIT_BLOCK, 0 } };
	nemo_place_id id;
	CHECK_EQ_INT(nemo_place_join(b->d, &pa, &id), 0);
	CHECK_EQ_INT(nemo_am_event_map(1, (uint32_t)(a->k % 2)), 0);   /* event 1: action 0 or 1 */
	atomic_store(&b->id[a->k], id);
	atomic_fetch_add(&b->joined, 1);
	unsigned want = (a->k < 2) ? 3 : 2;     /* the set send reaches places 0 and 1 only */
	while (atomic_load(&b->got[a->k]) < want) {
		struct timespec dl = in_ms(CLOCK_MONOTONIC, 20000);
		CHECK_EQ_INT(nemo_place_wait(&dl, NULL), 0);
	}
	atomic_fetch_add(&b->done, 1);
	spin_until(&b->done, BK + 1);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	return NULL;
}

static void test_broadcast(void)
{
	struct bc *b = calloc(1, sizeof *b);
	CHECK_EQ_INT(nemo_domain_create(NULL, &b->d), 0);
	CHECK_EQ_INT(nemo_action_register(b->d, 0, bc_handler, b), 0);
	CHECK_EQ_INT(nemo_action_register(b->d, 1, bc_handler, b), 0);
	for (int k = 0; k < BK; k++)
		atomic_store(&b->id[k], NEMO_PLACE_NONE);
	struct bc_arg args[BK];
	pthread_t t[BK];
	for (int k = 0; k < BK; k++) {
		args[k] = (struct bc_arg){ b, k };
		run_thread(&t[k], bc_main, &args[k]);
	}
	CHECK_EQ_INT(nemo_place_join(b->d, NULL, NULL), 0);
	spin_until(&b->joined, BK);
	size_t sent = 0;
	/* To everyone but the caller, by action. */
	CHECK_EQ_INT(nemo_am_broadcast(NULL, 0, 0, 5, NULL, 0, 0, &sent), 0);
	CHECK_EQ_INT(sent, BK);
	/* By event: each place runs its own mapping. */
	char pl[20] = "broadcast payload";
	CHECK_EQ_INT(nemo_am_broadcast(NULL, 0, NEMO_AM_EVENT(1), 6, pl, sizeof pl, 0, &sent), 0);
	CHECK_EQ_INT(sent, BK);
	/* To a set with a stranger in it: the others still get it. */
	nemo_place_id set[3] = { atomic_load(&b->id[0]), 4000, atomic_load(&b->id[1]) };
	CHECK_EQ_INT(nemo_am_broadcast(set, 3, 0, 7, NULL, 0, 0, &sent), ESRCH);
	CHECK_EQ_INT(sent, 2);
	CHECK_EQ_INT(nemo_am_broadcast(NULL, 2, 0, 7, NULL, 0, 0, &sent), EINVAL);
	CHECK_EQ_INT(nemo_am_broadcast(set, 3, 0, 7, NULL, 99, 0, &sent), EMSGSIZE);
	spin_until(&b->done, BK);
	for (int k = 0; k < BK; k++)
		CHECK_EQ_INT(b->action_of[k], (k < 2) ? 0 : (unsigned)(k % 2));
	atomic_fetch_add(&b->done, 1);
	for (int k = 0; k < BK; k++)
		pthread_join(t[k], NULL);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(b->d), 0);
	free(b);
}

/* -------------------------------------------------------- domain full */

static void *join_fails(void *arg)
{
	nemo_domain *d = arg;
	CHECK_EQ_INT(nemo_place_join(d, NULL, NULL), ENOSPC);
	return NULL;
}

static void test_full_domain(void)
{
	nemo_domain *d;
	nemo_domain_attr a = { .max_places = 1 };
	CHECK_EQ_INT(nemo_domain_create(&a, &d), 0);
	CHECK_EQ_INT(nemo_place_join(d, NULL, NULL), 0);
	pthread_t t;
	run_thread(&t, join_fails, d);
	pthread_join(t, NULL);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	/* The index is reused with a new generation. */
	nemo_place_id a1, a2;
	CHECK_EQ_INT(nemo_place_join(d, NULL, &a1), 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_place_join(d, NULL, &a2), 0);
	CHECK(a1 != a2 && nemo_place_index(a1) == nemo_place_index(a2));
	CHECK_EQ_INT(nemo_place_check(d, a1), ESRCH);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(d), 0);
}

int main(void)
{
	nemo_clock_init();
	fprintf(stderr, "-- %s\n", "test_barrier_mode()");
	test_barrier_mode();
	fprintf(stderr, "-- %s\n", "test_domain_errors()");
	test_domain_errors();
	fprintf(stderr, "-- %s\n", "test_self_send()");
	test_self_send();
	fprintf(stderr, "-- %s\n", "test_full_domain()");
	test_full_domain();
	fprintf(stderr, "-- %s\n", "test_pair(NEMO_WAIT_SPIN)");
	test_pair(NEMO_WAIT_SPIN);
	fprintf(stderr, "-- %s\n", "test_pair(NEMO_WAIT_BLOCK)");
	test_pair(NEMO_WAIT_BLOCK);
	fprintf(stderr, "-- %s\n", "test_pair(NEMO_WAIT_HYBRID)");
	test_pair(NEMO_WAIT_HYBRID);
	fprintf(stderr, "-- %s\n", "test_pair(NEMO_WAIT_ADAPTIVE)");
	test_pair(NEMO_WAIT_ADAPTIVE);
	fprintf(stderr, "-- %s\n", "test_backpressure()");
	test_backpressure();
	fprintf(stderr, "-- %s\n", "test_full_cycle()");
	test_full_cycle();
	fprintf(stderr, "-- %s\n", "test_leave_pending()");
	test_leave_pending();
	fprintf(stderr, "-- %s\n", "test_leave_race()");
	test_leave_race();
	fprintf(stderr, "-- %s\n", "test_live_receiver()");
	test_live_receiver();
	fprintf(stderr, "-- %s\n", "test_sender_generation()");
	test_sender_generation();
	fprintf(stderr, "-- %s\n", "test_first_send_wait()");
	test_first_send_wait();
	fprintf(stderr, "-- %s\n", "test_stale_id()");
	test_stale_id();
	fprintf(stderr, "-- %s\n", "test_interrupts()");
	test_interrupts();
	fprintf(stderr, "-- %s\n", "test_interrupts_stream()");
	test_interrupts_stream();
	fprintf(stderr, "-- %s\n", "test_handler_switch()");
	test_handler_switch();
	fprintf(stderr, "-- %s\n", "test_no_stale_signal()");
	test_no_stale_signal();
#ifndef NEMO_TEST_TSAN
	fprintf(stderr, "-- %s\n", "test_syscall_restart()");
	test_syscall_restart();
#endif
	fprintf(stderr, "-- %s\n", "test_broadcast()");
	test_broadcast();
	return check_exit("test_messaging");
}
