/*
 * spsc.h - the plain single-producer single-consumer ring of the
 * baselines that pair a ring with an eventfd (suites event-loop and
 * request-reply): what a program without nemo writes.  64-bit values,
 * a power-of-two number of slots; one producer thread and one consumer
 * thread (or process: the ring may live in a MAP_SHARED page, since it
 * holds no pointers).
 *
 * Ordering: the producer writes the slot, then publishes tail with a
 * release store; the consumer reads tail with an acquire load before the
 * slot, and gives the slot back with a release store of head.  C11
 * atomics only, so ThreadSanitizer sees every edge (Concurrency Kit's
 * ck_ring relies on x86's store order, which it cannot see).  Cost: a
 * push or a pop reads the other side's index, one cache-line transfer
 * when that side moved since.
 */
#ifndef NEMO_BENCH_SPSC_H
#define NEMO_BENCH_SPSC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPSC_ALIGN 64

typedef struct spsc_ring {
	_Alignas(SPSC_ALIGN) _Atomic uint64_t head;   /* consumer: next slot to read */
	_Alignas(SPSC_ALIGN) _Atomic uint64_t tail;   /* producer: next slot to write */
	_Alignas(SPSC_ALIGN) uint64_t mask;           /* slots - 1 */
	uint64_t slot[];
} spsc_ring;

/** Bytes of a ring of `slots` slots (a power of two). */
static inline size_t spsc_size(unsigned slots)
{
	size_t n = sizeof(spsc_ring) + (size_t)slots * sizeof(uint64_t);
	return (n + SPSC_ALIGN - 1) / SPSC_ALIGN * SPSC_ALIGN;
}

/** Initialise zeroed memory of spsc_size(slots) bytes as an empty ring. */
static inline void spsc_init(spsc_ring *r, unsigned slots)
{
	atomic_init(&r->head, 0);
	atomic_init(&r->tail, 0);
	r->mask = slots - 1;
}

/** Producer: append v; false if the ring is full. */
static inline bool spsc_push(spsc_ring *r, uint64_t v)
{
	uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
	if (t - atomic_load_explicit(&r->head, memory_order_acquire) > r->mask)
		return false;
	r->slot[t & r->mask] = v;
	atomic_store_explicit(&r->tail, t + 1, memory_order_release);
	return true;
}

/** Consumer: take the oldest value into *v; false if the ring is empty. */
static inline bool spsc_pop(spsc_ring *r, uint64_t *v)
{
	uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
	if (h == atomic_load_explicit(&r->tail, memory_order_acquire))
		return false;
	*v = r->slot[h & r->mask];
	atomic_store_explicit(&r->head, h + 1, memory_order_release);
	return true;
}

#endif
