/*
 * publish.c - a shared domain's segment file appears under its name
 * whole, or not at all.
 *
 * THE PUBLICATION.  nemo_xproc_create builds the segment in a file that
 * has no name: O_TMPFILE in /dev/shm, the directory of POSIX shared
 * memory (glibc's shm_open opens /dev/shm/NAME).  It sizes it, maps it,
 * writes the rings, the header and the magic, and only then gives it the
 * name with linkat(2) (through /proc/self/fd, as open(2) describes for
 * O_TMPFILE): one atomic step that fails with EEXIST when the name
 * exists.  So:
 *
 *   - whoever opens the name finds a file whose header was complete
 *     before the name existed (the writes precede the link in program
 *     order, and a full fence and the link system call order them for
 *     every process that finds the name afterwards): attach never meets
 *     a header being written, and "create, else attach" in two processes
 *     at once gives one creator and one attacher, never EPROTO;
 *   - of two creators, the one whose link comes second gets EEXIST and
 *     drops its file (unnamed: closing it frees it);
 *   - a creator that dies at any instruction before the link leaves no
 *     name and no file behind: the kernel frees an unnamed file with its
 *     last descriptor and mapping.  There is no half-created segment to
 *     reclaim, and the name stays free for the next create.
 *
 * What is not covered: a file put under a nemo name by something else
 * (another program, an older nemo that published before writing its
 * header) is refused at attach (EPROTO, or EACCES for another owner) and
 * left alone - removing what we did not make could destroy a live
 * segment; nemo_xproc_unlink removes it.
 *
 * The test hook (segment.h) lives here, the lowest file of the folder.
 */
#define _GNU_SOURCE

#include "segment.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHM_DIR "/dev/shm"

void (*nemo__xproc_test_hook)(const char *where);

/* A file of size bytes and mode in SHM_DIR, with no name: 0 and *fd, or
 * an errno value (EOPNOTSUPP: no O_TMPFILE there). */
int nemo__xp_file_new(unsigned mode, size_t size, int *fd)
{
	*fd = open(SHM_DIR, O_TMPFILE | O_RDWR | O_CLOEXEC, (mode_t)mode);
	if (*fd < 0)
		return errno;
	/* The umask must not narrow what the caller asked for. */
	if (fchmod(*fd, (mode_t)mode) != 0 || ftruncate(*fd, (off_t)size) != 0) {
		int e = errno;
		close(*fd);
		*fd = -1;
		return e;
	}
	return 0;
}

/* Give the file of fd the shm name `name` (no slash): 0, EEXIST if the
 * name exists, or the errno of linkat. */
int nemo__xp_file_publish(int fd, const char *name)
{
	int dir = open(SHM_DIR, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
	if (dir < 0)
		return errno;
	atomic_thread_fence(memory_order_seq_cst);   /* the segment's stores, then the name */
	char self[64];
	snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
	int rc = linkat(AT_FDCWD, self, dir, name, AT_SYMLINK_FOLLOW);
	if (rc != 0 && errno == ENOENT)   /* no /proc: the descriptor itself (CAP_DAC_READ_SEARCH) */
		rc = linkat(fd, "", dir, name, AT_EMPTY_PATH);
	int e = rc ? errno : 0;
	close(dir);
	return e;
}

/* Does the name exist now?  (A hint that spares building a segment that
 * cannot be published; the link decides.) */
bool nemo__xp_name_taken(const char *name)
{
	char path[300];
	snprintf(path, sizeof path, SHM_DIR "/%s", name);
	return access(path, F_OK) == 0;
}
