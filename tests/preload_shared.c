/*
 * preload_shared.c - a program that uses libnemo itself (linked against
 * libnemo.so) and runs under libnemo-preload.so has one nemo in it: the
 * condvar waits the interposer takes show in the counters and the learned
 * cost of blocking that the program reads through its own libnemo (and
 * so do its thread policies: the same thread-local state).
 *
 *   preload_shared             plain: interposed waits count nothing
 *   preload_shared interposed  under LD_PRELOAD: they count
 */
#define _GNU_SOURCE
#include <nemo/nemo.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define ROUNDS 2000

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn;

static void *player(void *arg)
{
	int me = (int)(long)arg;
	/* Block at once: every wait that does not find its turn sleeps. */
	nemo_wait_policy block = { NEMO_WAIT_BLOCK, 0 };
	nemo_wait_set_thread_policy(&block);
	pthread_mutex_lock(&m);
	for (int i = 0; i < ROUNDS; i++) {
		while (turn != me)
			pthread_cond_wait(&cv, &m);
		turn = !me;
		pthread_cond_broadcast(&cv);
	}
	pthread_mutex_unlock(&m);
	return NULL;
}

int main(int argc, char **argv)
{
	int interposed = argc > 1 && strcmp(argv[1], "interposed") == 0;
	pthread_t t[2];
	for (long i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, player, (void *)i);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	nemo_waiter_counters c;
	if (nemo_waiter_get_counters(&c) != 0) {
		fprintf(stderr, "preload_shared: nemo_waiter_get_counters failed\n");
		return 1;
	}
	printf("preload_shared: %llu waits, %llu polled, %llu sleeps seen by the program's libnemo\n",
	       (unsigned long long)c.waits, (unsigned long long)c.waits_polled,
	       (unsigned long long)c.sleeps);
	if (!interposed) {
		if (c.waits != 0) {
			fprintf(stderr, "preload_shared: waits counted without the interposer\n");
			return 1;
		}
		return 0;
	}
	/* Two threads taking turns: some hand-offs found the turn not yet
	 * passed and waited, on any machine. */
	if (c.waits == 0 || c.sleeps == 0) {
		fprintf(stderr, "preload_shared: the interposer's waits are not in the program's libnemo: "
				"two copies of nemo's state\n");
		return 1;
	}
	return 0;
}
