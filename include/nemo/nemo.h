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

#ifdef __cplusplus
}
#endif

#endif /* NEMO_NEMO_H */
