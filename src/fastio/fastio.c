/*
 * fastio.c - curried writes through io_uring (nemo/fastio.h).
 *
 * A handle owns a small io_uring (256 entries), with fd registered as fixed
 * file 0 and the buffer as fixed buffer 0.  nemo_fastwrite fills one SQE
 * (IORING_OP_WRITE_FIXED on fixed file 0), and submits: with SQPOLL,
 * io_uring_submit only publishes the tail and makes a system call solely
 * when the kernel thread has gone idle (IORING_SQ_NEED_WAKEUP); without
 * it, one io_uring_enter.  Completions are peeked in batches when the
 * ring runs low and in nemo_fastwrite_wait; the first failure is kept and
 * returned by the next call.
 */
#define _GNU_SOURCE
#include <nemo/fastio.h>

#include "../platform/fail.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Submission entries.  A burst of up to ENTRIES - 1 writes to an eventfd
 * or a regular file goes in without waiting for the kernel; with 64, a
 * burst of 64 waited for a completion (on 2 vCPUs, for the kernel thread
 * to get a CPU), which is the kernel's rate and not a submission's cost.
 * 256 entries take 16 KiB of SQEs and 8 KiB of CQEs. */
#define ENTRIES 256u

struct nemo_fastio {
	struct io_uring ring;
	int fd;
	const void *buf;
	size_t len;
	nemo_fastwrite_mode_t mode;
	bool seekable;
	bool commutes;                /* an eventfd: writes add to a counter, order is moot */
	bool fixed_buf;               /* the buffer is registered (else plain writes from it) */
	uint64_t off;                 /* next offset (regular files) */
	unsigned inflight;
	int err;                      /* first failure not yet reported */
};

static void reap(nemo_fastio *h, bool wait_one)
{
	struct io_uring_cqe *cqes[ENTRIES];
	for (;;) {
		unsigned n = io_uring_peek_batch_cqe(&h->ring, cqes, ENTRIES);
		if (!n && wait_one && h->inflight) {
			struct io_uring_cqe *c;
			int rc = io_uring_wait_cqe(&h->ring, &c);
			if (rc == -EINTR)
				continue;
			if (rc < 0) {
				if (!h->err)
					h->err = -rc;
				h->inflight = 0;
				return;
			}
			continue;
		}
		for (unsigned i = 0; i < n; i++)
			if (cqes[i]->res < 0 && !h->err)
				h->err = -cqes[i]->res;
		io_uring_cq_advance(&h->ring, n);
		h->inflight -= n < h->inflight ? n : h->inflight;
		return;
	}
}

int nemo_fastwrite_open(int fd, const void *buf, size_t len, unsigned flags, nemo_fastio **out)
{
	if (!out || !buf)
		return NEMO__FAIL(EINVAL, "%s is NULL", out ? "buf" : "out");
	*out = NULL;
	if (!len || len > (1u << 30))
		return NEMO__FAIL(EINVAL, "len %zu: from 1 byte to 1 GiB", len);
	if (flags & ~(unsigned)NEMO_FASTWRITE_SQPOLL)
		return NEMO__FAIL(EINVAL, "flags 0x%x: unknown bits (NEMO_FASTWRITE_SQPOLL)", flags);
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY)
		return NEMO__FAIL(EBADF, "fd %d is %s", fd, fl < 0 ? "not open" : "not open for writing");
	struct stat st;
	if (fstat(fd, &st) != 0)
		return NEMO__FAIL(EBADF, "fd %d cannot be examined", fd);
	nemo_fastio *h = calloc(1, sizeof *h);
	if (!h)
		return ENOMEM;
	h->fd = fd;
	h->buf = buf;
	h->len = len;
	h->seekable = S_ISREG(st.st_mode) && !(fl & O_APPEND);
	char link[64], path[32];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	ssize_t ln = readlink(path, link, sizeof link - 1);
	if (ln > 0) {
		link[ln] = 0;
		h->commutes = !strcmp(link, "anon_inode:[eventfd]");
	}
	if (h->seekable) {
		off_t pos = lseek(fd, 0, SEEK_CUR);
		h->off = pos < 0 ? 0 : (uint64_t)pos;
	}
	int rc = -1;
	if (flags & NEMO_FASTWRITE_SQPOLL) {
		struct io_uring_params p;
		memset(&p, 0, sizeof p);
		p.flags = IORING_SETUP_SQPOLL;
		p.sq_thread_idle = 2000;          /* ms before the kernel thread sleeps */
		rc = io_uring_queue_init_params(ENTRIES, &h->ring, &p);
		if (rc == 0)
			h->mode = NEMO_FASTWRITE_MODE_SQPOLL;
	}
	if (rc != 0) {
		rc = io_uring_queue_init(ENTRIES, &h->ring, 0);
		if (rc == 0)
			h->mode = NEMO_FASTWRITE_MODE_ENTER;
	}
	if (rc == 0) {
		if (io_uring_register_files(&h->ring, &fd, 1) != 0) {
			io_uring_queue_exit(&h->ring);
			rc = -1;
		} else {
			/* The kernel pins a fixed buffer for writing, so read-only
			 * memory (a string literal) cannot be one: then the writes
			 * name the buffer each time (still a registered file). */
			struct iovec iov = { (void *)buf, len };
			h->fixed_buf = io_uring_register_buffers(&h->ring, &iov, 1) == 0;
		}
	}
	if (rc != 0)
		h->mode = NEMO_FASTWRITE_MODE_WRITE;   /* io_uring unavailable: the documented fallback */
	*out = h;
	return 0;
}

nemo_fastwrite_mode_t nemo_fastwrite_mode(const nemo_fastio *h)
{
	return h ? h->mode : 0;
}

static int take_err(nemo_fastio *h)
{
	int e = h->err;
	h->err = 0;
	return e ? nemo__fail(e, "nemo_fastwrite", "an earlier write failed") : 0;
}

int nemo_fastwrite(nemo_fastio *h, size_t len)
{
	if (!h)
		return NEMO__FAIL(EINVAL, "the handle is NULL");
	if (!len || len > h->len)
		return NEMO__FAIL(EINVAL, "len %zu: from 1 to the registered %zu bytes", len, h->len);
	if (h->mode == NEMO_FASTWRITE_MODE_WRITE) {
		ssize_t w = h->seekable ? pwrite(h->fd, h->buf, len, (off_t)h->off) : write(h->fd, h->buf, len);
		if (w < 0)
			return NEMO__FAIL(errno, "write to fd %d failed", h->fd);
		if (h->seekable)
			h->off += (uint64_t)w;
		return 0;
	}
	if (h->err)
		return take_err(h);
	/* Order: one in flight at a time where the file has no offsets. */
	bool ordered = !h->seekable && !h->commutes;
	if (h->inflight && (ordered || h->inflight >= ENTRIES - 1)) {
		reap(h, false);
		while (h->inflight && ordered)
			reap(h, true);
		if (h->inflight >= ENTRIES - 1)
			reap(h, true);
		if (h->err)
			return take_err(h);
	}
	/* A free submission entry.  With SQPOLL the entries are given back
	 * when the kernel thread has consumed them, which on a loaded machine
	 * can take a while: wait for that (io_uring_sqring_wait), not for
	 * completions.  (Found under load: the first version gave up with
	 * EAGAIN.) */
	struct io_uring_sqe *sqe;
	while (!(sqe = io_uring_get_sqe(&h->ring))) {
		if (h->mode == NEMO_FASTWRITE_MODE_SQPOLL) {
			int rc = io_uring_sqring_wait(&h->ring);
			if (rc < 0 && rc != -EINTR && rc != -EAGAIN)
				return NEMO__FAIL(-rc, "waiting for room in the submission queue failed");
		} else {
			io_uring_submit(&h->ring);
			reap(h, h->inflight > 0);
		}
	}
	uint64_t off = h->seekable ? h->off : (uint64_t)-1;
	if (h->fixed_buf)
		io_uring_prep_write_fixed(sqe, 0, h->buf, (unsigned)len, off, 0);
	else
		io_uring_prep_write(sqe, 0, h->buf, (unsigned)len, off);
	sqe->flags |= IOSQE_FIXED_FILE;
	if (h->seekable)
		h->off += len;
	h->inflight++;
	int rc = io_uring_submit(&h->ring);
	if (rc < 0) {
		h->inflight--;
		return NEMO__FAIL(-rc, "io_uring submission failed");
	}
	return 0;
}

int nemo_fastwrite_wait(nemo_fastio *h)
{
	if (!h)
		return NEMO__FAIL(EINVAL, "the handle is NULL");
	if (h->mode != NEMO_FASTWRITE_MODE_WRITE)
		while (h->inflight)
			reap(h, true);
	return take_err(h);
}

int nemo_fastwrite_close(nemo_fastio *h)
{
	if (!h)
		return NEMO__FAIL(EINVAL, "the handle is NULL");
	int err = nemo_fastwrite_wait(h);
	if (h->mode != NEMO_FASTWRITE_MODE_WRITE)
		io_uring_queue_exit(&h->ring);
	free(h);
	return err;
}
