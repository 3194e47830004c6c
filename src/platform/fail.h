/*
 * fail.h - why a nemo call failed, in words (internal).
 *
 * Every public call that rejects its arguments or its caller's state
 * returns through NEMO__FAIL(code, "what, in words", ...): the code as
 * before, plus a per-thread text that nemo_last_error() returns
 * ("nemo_place_join: cpu 99 is not available to this process (EINVAL)"),
 * and with NEMO_DEBUG=1 the same line on stderr.  Only failure paths pay
 * for it.  It may run in an interrupt-mode handler (a signal handler):
 * it writes with write(2) into stderr from a thread-local buffer, and
 * keeps errno; the calls that may run in one (posts, releases, kicks,
 * futex wakes, sends) pass it only integers, pointers and strings.
 *
 * Which returns are failures.  An outcome the caller asked to hear about
 * is not: ETIMEDOUT from a timed wait (its deadline passed), EAGAIN from
 * a try-wait (nemo_event_trywait) or under NEMO_NONBLOCK (flow control),
 * and the futex wrappers' EAGAIN (the word had changed), ETIMEDOUT and
 * EINTR.  These stay bare codes: loops meet them all the time, and a
 * NEMO_DEBUG=1 log of them would bury the real failures.  Everything else
 * a public call refuses - a NULL, malformed or out-of-range argument, an
 * object in the wrong state (not initialised, destroyed, still in use),
 * a resource it could not get - gives a text that names the call, the
 * argument or state at fault and its value.
 *
 * A public call that other nemo code also calls where a refusal is an
 * ordinary result (the NEMO_WAIT variable's parse, the profile path, a
 * policy's resolution inside a wait) has a bare internal twin for those
 * callers, so that a successful call never leaves a text behind.  A call
 * that wraps another and names itself passes its own name to nemo__fail
 * (nemo_cond_wait, nemo_event_wait, nemo_futex_wait_until).
 */
#ifndef NEMO_PLATFORM_FAIL_H
#define NEMO_PLATFORM_FAIL_H

int nemo__fail(int code, const char *fn, const char *fmt, ...)
	__attribute__((cold, format(printf, 3, 4)));

#define NEMO__FAIL(code, ...) nemo__fail((code), __func__, __VA_ARGS__)

#endif
