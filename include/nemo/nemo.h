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
#include <nemo/mcast.h>
#include <nemo/xproc.h>

/* nemo_version, nemo_strerror and nemo_last_error are in nemo/platform.h. */

#endif /* NEMO_NEMO_H */
