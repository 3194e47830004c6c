/*
 * workers.c - a worker pool with active messages and replies.
 *
 * WORKERS threads join a domain as places and wait for tasks.  A client
 * thread that never joins anything submits TASKS tasks round-robin with
 * nemo_domain_am_send (which makes it a place at its first send); each
 * worker's handler computes and answers with nemo_am_reply, which carries
 * the task's number back as the reply's tag.  The client waits for every
 * reply with nemo_place_wait and checks each one.
 *
 *   workers [TASKS [WORKERS]]      default 100000 tasks, 2 x CPUs workers
 *
 * No flow control is written here: a reply that finds the client's queue
 * full is kept by the worker and delivered as room appears, and the
 * client's sends to a worker that keeps replies for it wait (serving the
 * client's replies meanwhile) until they are delivered (<nemo/domain.h>,
 * "Sends from handlers").  Each worker's state comes to its handler
 * through the place context (msg->place_ctx).
 */
#define _POSIX_C_SOURCE 200809L   /* clock_gettime, clockid_t: see <nemo/platform.h> */
#include <nemo/nemo.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { ACT_TASK, ACT_RESULT };

struct worker {
	pthread_t thread;
	nemo_place_id id;
	atomic_bool ready;
	unsigned long done;          /* tasks this worker ran: its own state */
};

static nemo_domain *dom;
static atomic_bool stop;

static uint64_t work(uint64_t x)   /* the "computation" */
{
	return x * x + 1;
}

/* Runs on a worker, for each task: reply with the result. */
static void on_task(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	struct worker *w = m->place_ctx;
	w->done++;
	int err = nemo_am_reply(m, ACT_RESULT, work(m->arg), NULL, 0, 0);
	if (err)
		fprintf(stderr, "workers: reply: %s\n", nemo_last_error());
}

struct client {
	unsigned long tasks, replies, wrong;
	unsigned char *seen;
};

/* Runs on the client, for each reply: msg->tag is the task's arg. */
static void on_result(const nemo_am_msg *m, void *ctx)
{
	struct client *c = ctx;
	if (!m->is_reply || m->tag >= c->tasks || m->arg != work(m->tag) || c->seen[m->tag]++)
		c->wrong++;
	c->replies++;
}

static void *worker_main(void *p)
{
	struct worker *w = p;
	nemo_place_attr a = { .context = w };
	int err = nemo_place_join(dom, &a, &w->id);
	if (err) {
		fprintf(stderr, "workers: join: %s\n", nemo_last_error());
		exit(1);
	}
	atomic_store(&w->ready, true);
	while (!atomic_load(&stop)) {
		struct timespec dl;
		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_nsec += 20 * 1000000;
		if (dl.tv_nsec >= 1000000000) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000;
		}
		nemo_place_wait(&dl, NULL);   /* handles tasks; ETIMEDOUT to look at stop */
	}
	nemo_place_leave();
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long tasks = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned nw = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : (unsigned)(ncpu > 0 ? 2 * ncpu : 4);
	if (!tasks || !nw || nw > 60) {
		fprintf(stderr, "usage: workers [TASKS [WORKERS (1..60)]]\n");
		return 2;
	}
	struct client c = { .tasks = tasks, .seen = calloc(tasks, 1) };
	if (!c.seen || nemo_domain_create(NULL, &dom) ||
	    nemo_action_register(dom, ACT_TASK, on_task, NULL) ||
	    nemo_action_register(dom, ACT_RESULT, on_result, &c)) {
		fprintf(stderr, "workers: setup: %s\n", nemo_last_error());
		return 1;
	}
	struct worker *ws = calloc(nw, sizeof *ws);
	for (unsigned i = 0; i < nw; i++)
		pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]);
	for (unsigned i = 0; i < nw; i++)
		while (!atomic_load(&ws[i].ready))
			;

	/* The client: this thread is not a place; its first send joins it. */
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned long k = 0; k < tasks; k++) {
		int err = nemo_domain_am_send(dom, ws[k % nw].id, ACT_TASK, k, NULL, 0, 0);
		if (err) {
			fprintf(stderr, "workers: task %lu: %s\n", k, nemo_last_error());
			return 1;
		}
	}
	while (c.replies < tasks)
		nemo_place_wait(NULL, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;

	atomic_store(&stop, true);
	unsigned long ran = 0;
	for (unsigned i = 0; i < nw; i++) {
		pthread_join(ws[i].thread, NULL);
		ran += ws[i].done;
	}
	nemo_domain_counters cnt;
	nemo_domain_get_counters(dom, &cnt);
	nemo_place_leave();
	nemo_domain_destroy(dom);
	printf("workers: %lu tasks on %u workers, %lu replies, %lu wrong, %.0f round trips/s "
	       "(%llu replies kept a while in an overflow)\n", tasks, nw, c.replies, c.wrong, tasks / s,
	       (unsigned long long)cnt.overflowed);
	free(ws);
	free(c.seen);
	return (c.wrong || ran != tasks) ? 1 : 0;
}
