/* version.c - library version and error strings. */
#define _GNU_SOURCE
#include <nemo/platform.h>
#include <nemo/version.h>

#include <string.h>

const char *nemo_version(void)
{
	return NEMO_VERSION_STRING;
}

const char *nemo_strerror(int code)
{
	if (code == 0)
		return "success";
	if (code < 0)
		return "invalid error code (nemo codes are 0 or positive)";
	/* strerrordesc_np is thread-safe and returns static text (glibc >= 2.32). */
	const char *s = strerrordesc_np(code);
	return s ? s : "unknown error";
}
