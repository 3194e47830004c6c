/*
 * asym.c - the asymmetric barrier: a store-buffering handshake whose one
 * side runs millions of times a second and whose other side runs rarely
 * pays both fences on the rare side.
 *
 * THE RULE
 *
 * S1;S3 against LV1;LV2 is again store-then-load on both sides, which
 * needs a full fence on both.  But senders send millions of times a
 * second and places leave rarely, so the fence is moved to the leaver:
 * after LV1 it calls membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which
 * makes every running thread of the process pass a full barrier before
 * it returns (a thread that is not running is past one already: the
 * context switch).  A sender's S3 is then a plain load: if it read the
 * old status, it did so before its barrier point, and its entry store,
 * earlier in program order, was visible at that point, before LV2 looks.
 * (liburcu's urcu-membarrier and folly's asymmetricHeavyBarrier use the
 * same trade.)  Measured on the 2-vCPU VM: the per-message seq_cst fence
 * cost the batched sender about two thirds of its throughput, because it
 * waits for the store to the line the consumer is reading.  Where
 * membarrier is unavailable (old kernel, seccomp) or NEMO_MEMBARRIER=0,
 * nemo__asym is false and every send fences at S2 instead.
 * models/place.pml -DLEAVE models the sender's entry store as buffered
 * (x86-TSO) until a fence, a locked instruction or the leaver's barrier.
 *
 *
 * Its users: a place's leave (messaging: LV1 against every send's S1-S3),
 * a stream grant's revocation (messaging, THE STREAM GRANT), and a sender
 * about to sleep for room (messaging, THE WAIT FOR ROOM, RW2).
 */
#define _GNU_SOURCE
#include "asym.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static _Atomic unsigned fence_word;

bool nemo__asym;
static pthread_once_t asym_once = PTHREAD_ONCE_INIT;

/* Register for MEMBARRIER_CMD_PRIVATE_EXPEDITED (THE ASYMMETRIC
 * BARRIER above).  NEMO_MEMBARRIER=0 turns it off (senders then fence), so the
 * tests can run both ways. */
static void asym_init(void)
{
	const char *env = getenv("NEMO_MEMBARRIER");
	if (env && strcmp(env, "0") == 0)
		return;
	if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
		nemo__asym = true;
}

void nemo__asym_heavy(void)
{
	if (nemo__asym && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
		return;
	/* Not registered, or it failed: senders fence at S2 only if
	 * nemo__asym is false, which it is in the first case; in the second
	 * (cannot happen once registered) a fence is the best we can do. */
	atomic_fetch_add_explicit(&fence_word, 0, memory_order_seq_cst);   /* a full barrier (TSan models it) */
}

void nemo__asym_setup(void)
{
	pthread_once(&asym_once, asym_init);
}
