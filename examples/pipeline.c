/*
 * pipeline.c - a producer and a consumer hand items through a bounded
 * queue guarded by a pthread mutex and two nemo_conds, "not empty" and
 * "not full".  nemo_cond is a drop-in for pthread_cond_t: the same calls
 * with a nemo_ prefix, and the default (adaptive) policy polls briefly
 * before it sleeps, so a hand-off between busy threads costs no syscall.
 *
 *   pipeline [ITEMS]      default 1000000
 */
#define _POSIX_C_SOURCE 200809L   /* clock_gettime, clockid_t: see <nemo/platform.h> */
#include <nemo/nemo.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define QLEN 64

static struct {
	pthread_mutex_t lock;
	nemo_cond not_empty, not_full;
	uint64_t buf[QLEN];
	unsigned head, tail;          /* head - tail items queued */
} q = { .lock = PTHREAD_MUTEX_INITIALIZER };

static uint64_t items;

static void *producer(void *arg)
{
	(void)arg;
	for (uint64_t i = 1; i <= items; i++) {
		pthread_mutex_lock(&q.lock);
		while (q.head - q.tail == QLEN)
			nemo_cond_wait(&q.not_full, &q.lock);
		q.buf[q.head++ % QLEN] = i;
		pthread_mutex_unlock(&q.lock);
		nemo_cond_signal(&q.not_empty);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	items = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
	if (!items) {
		fprintf(stderr, "usage: pipeline [ITEMS > 0]\n");
		return 2;
	}
	/* A zero-filled nemo_cond is ready to use, as PTHREAD_COND_INITIALIZER
	 * is; nemo_cond_init is there for attributes. */
	nemo_cond_init(&q.not_empty, NULL);
	nemo_cond_init(&q.not_full, NULL);

	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_t p;
	if (pthread_create(&p, NULL, producer, NULL) != 0) {
		perror("pthread_create");
		return 1;
	}
	uint64_t sum = 0, expect = 1;
	for (uint64_t n = 0; n < items; n++) {
		pthread_mutex_lock(&q.lock);
		while (q.head == q.tail)
			nemo_cond_wait(&q.not_empty, &q.lock);
		uint64_t v = q.buf[q.tail++ % QLEN];
		pthread_mutex_unlock(&q.lock);
		nemo_cond_signal(&q.not_full);
		if (v != expect++) {
			fprintf(stderr, "pipeline: got item %llu, expected %llu\n",
				(unsigned long long)v, (unsigned long long)(expect - 1));
			return 1;
		}
		sum += v;
	}
	pthread_join(p, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;

	nemo_cond_destroy(&q.not_empty);
	nemo_cond_destroy(&q.not_full);
	if (sum != items * (items + 1) / 2) {
		fprintf(stderr, "pipeline: wrong sum\n");
		return 1;
	}
	nemo_waiter_counters c;
	nemo_waiter_get_counters(&c);
	printf("pipeline: %llu items in order in %.3f s (%.0f per second); "
	       "%llu waits, %llu ended while polling, %llu sleeps\n",
	       (unsigned long long)items, s, (double)items / s, (unsigned long long)c.waits,
	       (unsigned long long)c.waits_polled, (unsigned long long)c.sleeps);
	return 0;
}
