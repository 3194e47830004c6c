/*
 * fail.h - why a nemo call failed, in words (internal).
 *
 * Every public call that rejects its arguments or its caller's state
 * returns through NEMO__FAIL(code, "what, in words", ...): the code as
 * before, plus a per-thread text that nemo_last_error() returns
 * ("nemo_place_join: cpu 99 is not available to this process (EINVAL)"),
 * and with NEMO_DEBUG=1 the same line on stderr.  Only failure paths pay
 * for it.  It may run in an interrupt-mode handler (a signal handler):
 * it formats only integers and strings into a thread-local buffer and
 * writes with write(2), and keeps errno.
 */
#ifndef NEMO_PLATFORM_FAIL_H
#define NEMO_PLATFORM_FAIL_H

int nemo__fail(int code, const char *fn, const char *fmt, ...)
	__attribute__((cold, format(printf, 3, 4)));

#define NEMO__FAIL(code, ...) nemo__fail((code), __func__, __VA_ARGS__)

#endif
