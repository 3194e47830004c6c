/*
 * nemo/nemo.h - umbrella header for libnemo.
 *
 * Include this one header to get every layer.  Each layer also has its own
 * header under nemo/, usable alone; docs/architecture.md says what each
 * layer does and which layers it may use.
 */
#ifndef NEMO_NEMO_H
#define NEMO_NEMO_H

#include <nemo/version.h>
#include <nemo/platform.h>
#include <nemo/waiter.h>
#include <nemo/event.h>
#include <nemo/domain.h>
#include <nemo/notify.h>
#include <nemo/am.h>
#include <nemo/poll.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Version of the library actually linked ("MAJOR.MINOR.PATCH"), which
 *  may differ from NEMO_VERSION_STRING seen at compile time. */
const char *nemo_version(void);

/**
 * Text for a code returned by a nemo function (0 or a positive errno
 * value); never NULL, thread-safe.
 */
const char *nemo_strerror(int code);

/**
 * Why the calling thread's last failed nemo call failed, in words: the
 * call, what was wrong (which argument, which state) and the code, e.g.
 * "nemo_am_sendv: action 7 has no handler in this domain (ENOENT)".
 * "" if no call of this thread has failed with such a text yet; a later
 * failure replaces it, a success leaves it.  Thread-local; never NULL.
 * With the environment variable NEMO_DEBUG=1, every such failure is also
 * written to stderr as it happens ("nemo: ..."), which finds the failing
 * call in a program that drops the code.  Covered: domains, places,
 * notifications and active messages (argument and state errors, and
 * ESRCH for a place that is not there); wait policies, waiter slots,
 * events and condition variables (nemo_cond, so also pthread_cond_*
 * under the interposer); and the platform calls' refused arguments
 * (futex wrappers, pinning, topology, clock).  Outcomes are not failures
 * and leave it alone: ETIMEDOUT from a timed wait, EAGAIN from a try-wait
 * or under NEMO_NONBLOCK, and the futex wrappers' EAGAIN and EINTR.
 */
const char *nemo_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* NEMO_NEMO_H */
