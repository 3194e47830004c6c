/*
 * nemo/fastio.h - curried kernel I/O (currying as in Minnich, Floren &
 * McKie, "Using Currying and Process-Private System Calls to Break the
 * One-Microsecond System Call Barrier"): a write whose file and buffer are
 * validated and registered once, so that each later write is the shortest
 * path the kernel offers.
 *
 * nemo_fastwrite_open registers the file descriptor and one fixed buffer
 * with a private io_uring (liburing): the kernel checks both once instead
 * of on every write (io_uring's registered files and fixed buffers).  With
 * NEMO_FASTWRITE_SQPOLL a kernel thread polls the submission queue, so a
 * write is a store to shared memory and no system call at all - where the
 * process may create one (it needs locked memory; the ring takes well under
 * this VM's 8 MiB limit); otherwise it falls back to one io_uring_enter per
 * write, or to plain write(2) where io_uring is unavailable (seccomp, old
 * kernels), and nemo_fastwrite_mode says which.
 *
 * The buffer must be writable memory to be registered (the kernel pins it
 * as it pins any fixed buffer; a string literal cannot be): read-only
 * memory still works, named on each write instead of registered.
 *
 * Order and the buffer: the writes of one handle reach the file in the
 * order of the calls.  For a regular file each write has its own offset
 * (continuing from the file's position at open), so many can be in
 * flight; so can writes to an eventfd, which only add to its counter;
 * for anything else (pipe, socket) a write is submitted once the previous
 * one has completed.  A write reads the buffer when the
 * kernel performs it, so change the buffer's bytes only after
 * nemo_fastwrite_wait.  Completions are reaped in batches; a failed write
 * is reported by the next call (and by nemo_fastwrite_wait) with its errno.
 *
 * A descriptor closed by the caller under an io_uring handle stays open for
 * the handle (the registration holds the file) until nemo_fastwrite_close.
 *
 * Lives in libnemo-fastio (pkg-config nemo-fastio), so that libnemo and the
 * interposer do not load liburing.
 */
#ifndef NEMO_FASTIO_H
#define NEMO_FASTIO_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A curried write handle (opaque): nemo_fastwrite_open makes one. */
typedef struct nemo_fastio nemo_fastio;

/** nemo_fastwrite_open flags */
enum {
	NEMO_FASTWRITE_SQPOLL = 1u << 0,  /**< submit by polling: no system call per write */
};

/** How a handle writes (nemo_fastwrite_mode). */
typedef enum nemo_fastwrite_mode_t {
	NEMO_FASTWRITE_MODE_SQPOLL = 1,   /**< io_uring, a kernel thread polls the queue */
	NEMO_FASTWRITE_MODE_ENTER = 2,    /**< io_uring, one io_uring_enter per write */
	NEMO_FASTWRITE_MODE_WRITE = 3,    /**< plain write(2): io_uring unavailable */
} nemo_fastwrite_mode_t;

/**
 * Register fd and the buffer [buf, buf + len) for fast writes.
 * @return 0 with *out set; EBADF for a descriptor that is not open for
 *         writing; EINVAL for NULL arguments, len 0 or above 1 GiB, or
 *         unknown flags; ENOMEM.
 */
int nemo_fastwrite_open(int fd, const void *buf, size_t len, unsigned flags, nemo_fastio **out);

/**
 * Write the first len bytes of the registered buffer.
 * @return 0 once submitted; EINVAL for len 0 or above the registered
 *         length; the errno of an earlier write that failed (EBADF for a
 *         file closed under the handle, EPIPE...), reported once.
 */
int nemo_fastwrite(nemo_fastio *h, size_t len);

/** Wait until every submitted write has completed.  @return 0, or the
 *  errno of a write that failed. */
int nemo_fastwrite_wait(nemo_fastio *h);

/** The handle's mode, or 0 for NULL. */
nemo_fastwrite_mode_t nemo_fastwrite_mode(const nemo_fastio *h);

/** Wait for the writes in flight, release the ring (the descriptor stays
 *  open: it is the caller's).  @return as nemo_fastwrite_wait; EINVAL for
 *  NULL. */
int nemo_fastwrite_close(nemo_fastio *h);

#ifdef __cplusplus
}
#endif

#endif /* NEMO_FASTIO_H */
