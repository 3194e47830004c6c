/*
 * invariant.c - the failure path of NEMO__INVARIANT (invariant.h).
 */
#define _GNU_SOURCE
#include "invariant.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef NDEBUG
static void put(const char *s)
{
	ssize_t w = write(STDERR_FILENO, s, strlen(s));
	(void)w;
}

_Noreturn void nemo__invariant_broken(const char *cond, const char *what, const char *file, int line)
{
	char num[16];
	int i = (int)sizeof num - 1;
	num[i] = 0;
	unsigned v = line > 0 ? (unsigned)line : 0;
	do
		num[--i] = (char)('0' + v % 10);
	while ((v /= 10) && i > 0);
	put("nemo: invariant broken: ");
	put(cond);
	put(" (");
	put(what);
	put(") at ");
	put(file);
	put(":");
	put(num + i);
	put("\n");
	abort();
}
#else
/* Release builds: nothing here (ISO C wants a translation unit to hold
 * a declaration). */
typedef int nemo__invariant_unused;
#endif
