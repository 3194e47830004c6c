/*
 * broadcast.c - a start gate: WORKERS threads wait for the next round on
 * one nemo_cond; the main thread opens each round with one
 * nemo_cond_broadcast and waits (on a second nemo_cond) until every
 * worker has done its part.  nemo_cond_broadcast hands every waiter its
 * wake-up at once and makes a single futex call for all the sleepers
 * (none if they are all still polling).
 *
 *   broadcast [WORKERS [ROUNDS]]     default 4 and 10000
 */
#define _POSIX_C_SOURCE 200809L   /* clock_gettime, clockid_t: see <nemo/platform.h> */
#include <nemo/nemo.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static nemo_cond go, done;          /* zero-filled: ready to use */
static long round_no, finished, rounds, workers;
static long *work;                  /* per worker: rounds seen */

static void *worker(void *arg)
{
	long me = (long)arg, seen = 0;
	pthread_mutex_lock(&lock);
	while (seen < rounds) {
		while (round_no == seen)
			nemo_cond_wait(&go, &lock);
		seen = round_no;
		work[me]++;
		if (++finished == workers)
			nemo_cond_signal(&done);
	}
	pthread_mutex_unlock(&lock);
	return NULL;
}

int main(int argc, char **argv)
{
	workers = argc > 1 ? atol(argv[1]) : 4;
	rounds = argc > 2 ? atol(argv[2]) : 10000;
	if (workers < 1 || workers > 1024 || rounds < 1) {
		fprintf(stderr, "usage: broadcast [WORKERS 1..1024 [ROUNDS > 0]]\n");
		return 2;
	}
	work = calloc((size_t)workers, sizeof *work);
	pthread_t *t = calloc((size_t)workers, sizeof *t);
	if (!work || !t)
		return 1;
	for (long i = 0; i < workers; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)i) != 0) {
			perror("pthread_create");
			return 1;
		}
	pthread_mutex_lock(&lock);
	for (long r = 1; r <= rounds; r++) {
		finished = 0;
		round_no = r;
		nemo_cond_broadcast(&go);
		while (finished < workers)
			nemo_cond_wait(&done, &lock);
	}
	pthread_mutex_unlock(&lock);
	for (long i = 0; i < workers; i++)
		pthread_join(t[i], NULL);
	/* Safe right after the last broadcast: destroy waits until every
	 * woken waiter has left the condvar. */
	nemo_cond_destroy(&go);
	nemo_cond_destroy(&done);
	for (long i = 0; i < workers; i++)
		if (work[i] != rounds) {
			fprintf(stderr, "broadcast: worker %ld saw %ld of %ld rounds\n", i, work[i], rounds);
			return 1;
		}
	printf("broadcast: %ld rounds to %ld workers, every worker saw every round\n", rounds, workers);
	free(work);
	free(t);
	return 0;
}
