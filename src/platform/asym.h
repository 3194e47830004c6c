/*
 * asym.h - the asymmetric barrier (internal): a fence that the rare side
 * of a store-buffering handshake pays for both (asym.c has the rule).
 */
#ifndef NEMO_PLATFORM_ASYM_H
#define NEMO_PLATFORM_ASYM_H

#include <stdbool.h>

/* True when the heavy side calls membarrier, so the light side needs no
 * fence (a compiler barrier): set once, by nemo__asym_setup. */
extern bool nemo__asym;

/* The heavy side: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), or a
 * full fence where it is not registered. */
void nemo__asym_heavy(void);

/* Register this process for it, once (NEMO_MEMBARRIER=0: never). */
void nemo__asym_setup(void);

#endif
