/*
 * fail.c - the text behind a failed nemo call (see fail.h).
 */
#define _GNU_SOURCE
#include "fail.h"

#include <nemo/platform.h>
#include <nemo/version.h>

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static __thread char last[320] __attribute__((tls_model("initial-exec")));
static _Atomic int debug = -1;     /* NEMO_DEBUG, read at the first failure */

int nemo__fail(int code, const char *fn, const char *fmt, ...)
{
	int saved = errno;
	char what[240];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	const char *name = strerrorname_np(code);
	int n = snprintf(last, sizeof last, "%s: %s (%s)", fn, what, name ? name : "?");
	int dbg = atomic_load_explicit(&debug, memory_order_relaxed);
	if (dbg < 0) {
		const char *e = getenv("NEMO_DEBUG");
		dbg = e && *e && strcmp(e, "0") != 0;
		atomic_store_explicit(&debug, dbg, memory_order_relaxed);
	}
	if (dbg && n > 0) {
		size_t len = (size_t)n < sizeof last ? (size_t)n : sizeof last - 1;
		ssize_t w = write(STDERR_FILENO, "nemo: ", 6);
		w = write(STDERR_FILENO, last, len);
		w = write(STDERR_FILENO, "\n", 1);
		(void)w;
	}
	errno = saved;
	return code;
}

const char *nemo_last_error(void)
{
	return last;
}
