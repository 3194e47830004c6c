/*
 * instrument.c - libnemo-instrument: a threshold check at every function
 * entry of code compiled with -finstrument-functions (Perkovic &
 * Keleher's "func-t", without a binary rewriter).  GCC and Clang call
 * __cyg_profile_func_enter / _exit around every function of such code;
 * this library makes the first a NEMO_POLL_CHECK() and the second
 * nothing.  Its own functions are not instrumented.  Link it after the
 * instrumented objects: -lnemo-instrument -lnemo (pkg-config
 * nemo-instrument).
 */
#define _POSIX_C_SOURCE 200809L
#include <nemo/poll.h>

void __cyg_profile_func_enter(void *fn, void *site) __attribute__((no_instrument_function));
void __cyg_profile_func_exit(void *fn, void *site) __attribute__((no_instrument_function));

void __cyg_profile_func_enter(void *fn, void *site)
{
	(void)fn;
	(void)site;
	NEMO_POLL_CHECK();
}

void __cyg_profile_func_exit(void *fn, void *site)
{
	(void)fn;
	(void)site;
}
