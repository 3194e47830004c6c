/*
 * test_fastio.c - curried writes (nemo/fastio.h): the right bytes in the
 * right order to a regular file (many in flight) and to a pipe (one at a
 * time), counts to an eventfd, with and without SQPOLL; errors for bad
 * descriptors, bad lengths, and a reader that went away (EPIPE, reported
 * by a later call).
 */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/fastio.h>
#include <nemo/nemo.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

static const char text[] = "0123456789abcdefghijklmnopqrstuvwxyz";
static char wtext[37];        /* writable: registered as a fixed buffer */
#define N 2000

static size_t len_of(int i)
{
	return (size_t)(i % 36) + 1;
}

static void file_order(unsigned flags)
{
	char path[] = "/tmp/nemo-fastio-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	unlink(path);
	CHECK(write(fd, "hdr:", 4) == 4);         /* writes continue from the position */
	nemo_fastio *h;
	memcpy(wtext, text, sizeof text);
	CHECK_EQ_INT(nemo_fastwrite_open(fd, wtext, 36, flags, &h), 0);
	int mode = nemo_fastwrite_mode(h);
	CHECK(mode >= NEMO_FASTWRITE_MODE_SQPOLL && mode <= NEMO_FASTWRITE_MODE_WRITE);
	size_t total = 4;
	for (int i = 0; i < N; i++) {
		CHECK_EQ_INT(nemo_fastwrite(h, len_of(i)), 0);
		total += len_of(i);
	}
	CHECK_EQ_INT(nemo_fastwrite_close(h), 0);
	char *got = malloc(total), *want = malloc(total);
	memcpy(want, "hdr:", 4);
	size_t at = 4;
	for (int i = 0; i < N; i++) {
		memcpy(want + at, text, len_of(i));
		at += len_of(i);
	}
	CHECK(pread(fd, got, total, 0) == (ssize_t)total);
	CHECK(memcmp(got, want, total) == 0);
	printf("fastio file (mode %d%s): %d writes, %zu bytes in order\n", mode,
	       (flags & NEMO_FASTWRITE_SQPOLL) ? ", SQPOLL asked" : "", N, total);
	free(got);
	free(want);
	close(fd);
}

struct reader {
	int fd;
	size_t want;
	char *buf;
};

static void *read_all(void *p)
{
	struct reader *r = p;
	size_t at = 0;
	while (at < r->want) {
		ssize_t k = read(r->fd, r->buf + at, r->want - at);
		if (k <= 0)
			break;
		at += (size_t)k;
	}
	r->want = at;
	return NULL;
}

static void pipe_order(unsigned flags)
{
	int p[2];
	CHECK(pipe(p) == 0);
	size_t total = 0;
	for (int i = 0; i < N; i++)
		total += len_of(i);
	struct reader r = { p[0], total, malloc(total) };
	pthread_t t;
	pthread_create(&t, NULL, read_all, &r);
	nemo_fastio *h;
	CHECK_EQ_INT(nemo_fastwrite_open(p[1], text, 36, flags, &h), 0);
	for (int i = 0; i < N; i++)
		CHECK_EQ_INT(nemo_fastwrite(h, len_of(i)), 0);
	CHECK_EQ_INT(nemo_fastwrite_close(h), 0);
	pthread_join(t, NULL);
	CHECK_EQ_INT(r.want, total);
	size_t at = 0;
	int bad = 0;
	for (int i = 0; i < N && at < r.want; i++) {
		bad += memcmp(r.buf + at, text, len_of(i)) != 0;
		at += len_of(i);
	}
	CHECK_EQ_INT(bad, 0);
	free(r.buf);
	close(p[0]);
	close(p[1]);
}

static void eventfd_count(unsigned flags)
{
	int e = eventfd(0, EFD_CLOEXEC);
	uint64_t one = 1, v = 0;
	nemo_fastio *h;
	CHECK_EQ_INT(nemo_fastwrite_open(e, &one, sizeof one, flags, &h), 0);
	for (int i = 0; i < N; i++)
		CHECK_EQ_INT(nemo_fastwrite(h, sizeof one), 0);
	CHECK_EQ_INT(nemo_fastwrite_wait(h), 0);
	CHECK(read(e, &v, sizeof v) == sizeof v);
	CHECK_EQ_INT(v, N);
	CHECK_EQ_INT(nemo_fastwrite_close(h), 0);
	close(e);
}

static void errors(void)
{
	nemo_fastio *h = NULL;
	char b[8] = { 0 };
	CHECK_EQ_INT(nemo_fastwrite_open(-1, b, 8, 0, &h), EBADF);
	CHECK_EQ_INT(nemo_fastwrite_open(12345, b, 8, 0, &h), EBADF);
	int p[2];
	CHECK(pipe(p) == 0);
	CHECK_EQ_INT(nemo_fastwrite_open(p[0], b, 8, 0, &h), EBADF);       /* read end */
	CHECK(strstr(nemo_last_error(), "not open for writing") != NULL);
	CHECK_EQ_INT(nemo_fastwrite_open(p[1], NULL, 8, 0, &h), EINVAL);
	CHECK_EQ_INT(nemo_fastwrite_open(p[1], b, 0, 0, &h), EINVAL);
	CHECK_EQ_INT(nemo_fastwrite_open(p[1], b, 8, 0x10, &h), EINVAL);
	CHECK_EQ_INT(nemo_fastwrite_open(p[1], b, 8, 0, NULL), EINVAL);
	CHECK_EQ_INT(nemo_fastwrite_open(p[1], b, 8, 0, &h), 0);
	CHECK_EQ_INT(nemo_fastwrite(h, 0), EINVAL);
	CHECK_EQ_INT(nemo_fastwrite(h, 9), EINVAL);
	CHECK(strstr(nemo_last_error(), "registered 8 bytes") != NULL);
	CHECK_EQ_INT(nemo_fastwrite(NULL, 1), EINVAL);
	/* The reader goes away: the write fails, and a call reports it. */
	close(p[0]);
	int e = 0;
	for (int i = 0; i < 3 && !e; i++)
		e = nemo_fastwrite(h, 8);
	if (!e)
		e = nemo_fastwrite_wait(h);
	CHECK_EQ_INT(e, EPIPE);
	CHECK_EQ_INT(nemo_fastwrite_close(h), 0);    /* reported once */
	CHECK_EQ_INT(nemo_fastwrite_close(NULL), EINVAL);
	CHECK_EQ_INT(nemo_fastwrite_mode(NULL), 0);
	close(p[1]);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	errors();
	for (int sq = 0; sq < 2; sq++) {
		unsigned f = sq ? NEMO_FASTWRITE_SQPOLL : 0;
		file_order(f);
		pipe_order(f);
		eventfd_count(f);
	}
	return check_exit("test_fastio");
}
