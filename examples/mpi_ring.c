/*
 * mpi_ring.c - a token goes around the ranks (nemo/mpi.h, docs/mpi.md).
 *
 *   mpiexec -n 4 build/examples/mpi_ring [laps] [send|check|thread|watchdog]
 *
 * Every rank's place 0 computes between tokens and calls nemo_mpi_check
 * in its loop; the token is an active message to place 0 of the next
 * rank, whose handler passes it on.  Rank 0 counts laps and, at the end,
 * asks every rank for its counters with a request each rank answers with
 * nemo_am_reply.
 */
#define _GNU_SOURCE
#include <nemo/mpi.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { A_TOKEN = 1, A_ASK = 2, A_ANSWER = 3 };

static int rank, size, laps = 1000;
static nemo_mpi *m;
static _Atomic int done, answers;
static _Atomic unsigned long tokens;

static nemo_place_id next_place(void)
{
	nemo_place_id id;
	nemo_mpi_place(m, (rank + 1) % size, 0, &id);
	return id;
}

static void on_token(const nemo_am_msg *msg, void *ctx)
{
	(void)ctx;
	atomic_fetch_add(&tokens, 1);
	uint64_t lap = msg->arg;
	if (rank == 0)
		lap++;
	if (rank == 0 && lap == (uint64_t)laps) {
		atomic_store(&done, 1);
		return;
	}
	nemo_am_send(next_place(), A_TOKEN, lap, 0);
}

static void on_ask(const nemo_am_msg *msg, void *ctx)
{
	(void)ctx;
	unsigned long t = atomic_load(&tokens);
	nemo_am_reply(msg, A_ANSWER, (uint64_t)rank, &t, sizeof t, 0);
}

static void on_answer(const nemo_am_msg *msg, void *ctx)
{
	(void)ctx;
	unsigned long t;
	memcpy(&t, msg->payload, sizeof t);
	printf("rank %llu handled %lu tokens\n", (unsigned long long)msg->arg, t);
	atomic_fetch_add(&answers, 1);
}

int main(int argc, char **argv)
{
	int level;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &level);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc > 1)
		laps = atoi(argv[1]);
	nemo_mpi_attr a = {.progress = NEMO_MPI_PROGRESS_CHECK};
	if (argc > 2)
		a.progress = !strcmp(argv[2], "thread")     ? NEMO_MPI_PROGRESS_THREAD
			     : !strcmp(argv[2], "watchdog") ? NEMO_MPI_PROGRESS_WATCHDOG
			     : !strcmp(argv[2], "send")     ? NEMO_MPI_PROGRESS_SEND
							    : NEMO_MPI_PROGRESS_CHECK;
	nemo_domain *d;
	nemo_domain_create(NULL, &d);
	nemo_action_register(d, A_TOKEN, on_token, NULL);
	nemo_action_register(d, A_ASK, on_ask, NULL);
	nemo_action_register(d, A_ANSWER, on_answer, NULL);
	nemo_place_join(d, NULL, NULL);
	int err = nemo_mpi_create(d, MPI_COMM_WORLD, &a, &m);
	if (err) {
		fprintf(stderr, "mpi_ring: nemo_mpi_create: %s\n", nemo_last_error());
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	if (laps < 1 || size < 2) {
		if (rank == 0)
			printf("mpi_ring: nothing to do (%d laps, %d ranks)\n", laps, size);
	} else if (rank == 0) {
		nemo_am_send(next_place(), A_TOKEN, 0, 0);
		volatile unsigned long work = 0;
		while (!atomic_load(&done)) {
			for (int i = 0; i < 1000; i++)
				work += (unsigned long)i;   /* the computation */
			nemo_mpi_check(m);
			nemo_mpi_poll(m, NULL);   /* under SEND, the only progress */
		}
		for (int r = 0; r < size; r++) {
			nemo_place_id p;
			nemo_mpi_place(m, r, 0, &p);
			nemo_am_send(p, A_ASK, 0, 0);
		}
		while (atomic_load(&answers) < size)
			nemo_mpi_wait(m, NULL, NULL);
		printf("mpi_ring: %d laps around %d ranks\n", laps, size);
	}
	/* Every rank keeps handling until all are done: finalize drains. */
	MPI_Request q;
	MPI_Ibarrier(MPI_COMM_WORLD, &q);
	for (int f = 0; !f;) {
		nemo_mpi_poll(m, NULL);
		MPI_Test(&q, &f, MPI_STATUS_IGNORE);
	}
	nemo_mpi_finalize(m);
	nemo_place_leave();
	nemo_domain_destroy(d);
	MPI_Finalize();
	return 0;
}
