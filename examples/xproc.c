/*
 * xproc.c - two processes share a nemo domain (nemo/xproc.h): a server
 * squares numbers for clients in other processes, by active message.
 *
 *   xproc server NAME            create domain NAME and serve until a
 *                                client sends "quit" (Ctrl-C also works)
 *   xproc client NAME N          attach, send N requests, check every
 *                                answer, then tell the server to quit
 *   xproc demo [N]               both, forked: what make test runs
 *
 * In two terminals:   ./xproc server demo-sq      ./xproc client demo-sq 100000
 *
 * The calls are the in-process ones (nemo/am.h): nemo_am_send to the
 * server's nemo_place_id, nemo_am_reply from its handler, nemo_place_wait
 * in each process's thread, and integer action ids that both programs
 * agree on.  A reply is never lost: one that finds the client's ring full
 * is kept by the server and delivered as room appears.  If the server is
 * killed (kill -9), the client's send or wait fails with ECONNRESET within
 * about 100 ms instead of hanging.
 */
#define _GNU_SOURCE
#include <nemo/xproc.h>
#include <nemo/am.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { SQUARE = 1, ANSWER = 2, QUIT = 3 };   /* action ids, the same in both programs */
static int quit;
static uint64_t answers, wrong;

static void on_square(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	if (nemo_am_reply(m, ANSWER, m->arg * m->arg, NULL, 0, 0) != 0)
		fprintf(stderr, "server: cannot answer %#llx: %s\n", (unsigned long long)m->src, nemo_last_error());
}

static void on_quit(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	(void)m;
	quit = 1;
}

static void on_answer(const nemo_am_msg *m, void *ctx)
{
	uint64_t *next = ctx;   /* answers come back in order, each tagged with its request */
	if (!m->is_reply || m->tag != *next || m->arg != *next * *next)
		wrong++;
	(*next)++;
	answers++;
}

static int server(const char *name)
{
	nemo_xproc *x;
	nemo_xproc_place *p;
	nemo_xproc_unlink(name);   /* a stale segment of an earlier run */
	int rc = nemo_xproc_create(name, NULL, &x);
	if (rc || nemo_xproc_handle_am_id(x, SQUARE, on_square, NULL) ||
	    nemo_xproc_handle_am_id(x, QUIT, on_quit, NULL) || nemo_xproc_join(x, "server", &p, NULL)) {
		fprintf(stderr, "server: %s\n", nemo_last_error());
		return 1;
	}
	while (!quit) {
		rc = nemo_place_wait(NULL, NULL);   /* this thread's place: the shared one */
		if (rc == ECONNRESET)
			fprintf(stderr, "server: a client died; serving the others\n");
	}
	nemo_xproc_unlink(name);
	nemo_xproc_detach(x);
	return 0;
}

static int client(const char *name, uint64_t n)
{
	nemo_xproc *x = NULL;
	nemo_xproc_place *p;
	nemo_xproc_id srv;
	int rc = EAGAIN;
	for (int tries = 0; tries < 5000 && rc; tries++) {   /* the server may still be starting */
		rc = nemo_xproc_attach(name, NULL, &x);
		if (!rc && nemo_xproc_find(x, "server", &srv) != 0) {
			nemo_xproc_detach(x);
			rc = ENOENT;
		}
		if (rc)
			usleep(1000);
	}
	uint64_t next = 1;
	if (rc || nemo_xproc_handle_am_id(x, ANSWER, on_answer, &next) || nemo_xproc_join(x, NULL, &p, NULL)) {
		fprintf(stderr, "client: %s\n", nemo_last_error());
		return 1;
	}
	nemo_place_id server_id = nemo_xproc_place_id(x, srv);
	uint64_t sent = 0;
	while (answers < n) {
		/* Keep up to 256 requests in flight. */
		while (sent < n && sent - answers < 256) {
			rc = nemo_am_send(server_id, SQUARE, ++sent, 0);
			if (rc) {
				fprintf(stderr, "client: send: %s\n", nemo_last_error());
				return 1;
			}
		}
		if (nemo_place_wait(NULL, NULL) == ECONNRESET) {   /* we talk only to the server */
			fprintf(stderr, "client: the server died\n");
			return 1;
		}
	}
	nemo_am_send(server_id, QUIT, 0, 0);
	printf("client: %llu answers, %llu wrong\n", (unsigned long long)answers, (unsigned long long)wrong);
	nemo_xproc_detach(x);
	return wrong ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "server"))
		return server(argv[2]);
	if (argc >= 4 && !strcmp(argv[1], "client"))
		return client(argv[2], strtoull(argv[3], NULL, 10));
	if (argc >= 2 && !strcmp(argv[1], "demo")) {
		uint64_t n = argc >= 3 ? strtoull(argv[2], NULL, 10) : 100000;
		char name[64];
		snprintf(name, sizeof name, "nemo-example-xproc-%d", (int)getpid());
		pid_t s = fork();
		if (s == 0)
			_exit(server(name));
		int rc = client(name, n);
		int st;
		waitpid(s, &st, 0);
		return rc || !WIFEXITED(st) || WEXITSTATUS(st) ? 1 : 0;
	}
	fprintf(stderr, "usage: xproc server NAME | xproc client NAME N | xproc demo [N]\n");
	return 2;
}
