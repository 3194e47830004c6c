/*
 * interrupts.c - active messages into a thread that never polls.  The
 * worker joins a domain in interrupt mode and computes; each message
 * sent to it runs its handler from a signal, in the middle of the
 * computation.  The main thread (also a place) sends MESSAGES "add"
 * messages, then a "stop" message, and waits for the worker's reply,
 * which the worker sends from its ordinary code once it sees "stop".
 *
 *   interrupts [MESSAGES]      default 10000
 *
 * What a handler may do in interrupt mode is in <nemo/domain.h>: keep it
 * short and async-signal-safe (here: atomic adds and a flag).
 */
#define _POSIX_C_SOURCE 200809L   /* clock_gettime, clockid_t: see <nemo/platform.h> */
#include <nemo/nemo.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ACT_ADD, ACT_STOP, ACT_RESULT };

static nemo_domain *dom;
static _Atomic nemo_place_id worker_id, main_id;
static atomic_ullong total, in_signal;
static atomic_bool stop;
static atomic_ullong result;
static atomic_bool have_result;

static void on_add(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	atomic_fetch_add_explicit(&total, m->arg, memory_order_relaxed);
	if (m->context == NEMO_AM_CTX_INTERRUPT)
		atomic_fetch_add_explicit(&in_signal, 1, memory_order_relaxed);
}

static void on_stop(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	(void)ctx;
	atomic_store_explicit(&stop, true, memory_order_release);
}

static void on_result(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	atomic_store(&result, m->arg);
	atomic_store(&have_result, true);
}

static void check(int err, const char *what)
{
	if (err) {
		fprintf(stderr, "interrupts: %s: %s\n", what, nemo_strerror(err));
		exit(1);
	}
}

static void *worker(void *arg)
{
	(void)arg;
	nemo_place_attr a = { .flags = NEMO_PLACE_INTERRUPTS };
	nemo_place_id id;
	check(nemo_place_join(dom, &a, &id), "worker join");
	atomic_store(&worker_id, id);
	/* Compute, with no nemo call in the loop: the handlers interrupt it. */
	volatile double x = 1;
	unsigned long iters = 0;
	while (!atomic_load_explicit(&stop, memory_order_acquire)) {
		for (int i = 0; i < 1000; i++)
			x = x * 1.0000001 + 1e-9;
		iters++;
	}
	/* No need to turn interrupts off around this send: a handler that
	 * would interrupt a nemo call is deferred until the call returns. */
	check(nemo_am_send(atomic_load(&main_id), ACT_RESULT, atomic_load(&total), 0), "reply");
	check(nemo_place_leave(), "worker leave");
	printf("interrupts: the worker computed %lu blocks while its handlers ran\n", iters);
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 10000;
	if (!n) {
		fprintf(stderr, "usage: interrupts [MESSAGES > 0]\n");
		return 2;
	}
	check(nemo_domain_create(NULL, &dom), "domain");
	check(nemo_action_register(dom, ACT_ADD, on_add, NULL), "register add");
	check(nemo_action_register(dom, ACT_STOP, on_stop, NULL), "register stop");
	check(nemo_action_register(dom, ACT_RESULT, on_result, NULL), "register result");
	nemo_place_id me;
	check(nemo_place_join(dom, NULL, &me), "main join");
	atomic_store(&main_id, me);

	pthread_t t;
	if (pthread_create(&t, NULL, worker, NULL) != 0)
		return 1;
	while (!atomic_load(&worker_id))
		nemo_poll(NULL);
	nemo_place_id w = atomic_load(&worker_id);
	unsigned long long want = 0;
	for (unsigned long i = 1; i <= n; i++) {
		/* A full ring blocks the send until the worker makes room,
		 * handling our own messages meanwhile; nothing is dropped. */
		check(nemo_am_send(w, ACT_ADD, i, 0), "send add");
		want += i;
	}
	check(nemo_am_send(w, ACT_STOP, 0, 0), "send stop");
	while (!atomic_load(&have_result))
		check(nemo_place_wait(NULL, NULL), "wait");
	pthread_join(t, NULL);
	check(nemo_place_leave(), "main leave");
	check(nemo_domain_destroy(dom), "destroy");

	unsigned long long got = atomic_load(&result);
	printf("interrupts: %lu messages, sum %llu (expected %llu), %llu handled from a signal\n", n,
	       got, want, (unsigned long long)atomic_load(&in_signal));
	return got == want ? 0 : 1;
}
