/*
 * invariant.h - executable invariants (internal).
 *
 * NEMO__INVARIANT(cond, "what it means") states a fact of a protocol's
 * state at a transition: a status word moving FREE -> ACTIVE -> LEAVING ->
 * FREE, a nesting depth that never goes below zero, a ring position never
 * more than R ahead of what the receiver gave back.  On in Debug builds and
 * in the sanitizer builds of make test (no NDEBUG); compiled out of release
 * builds (RelWithDebInfo and Release define NDEBUG), so they cost nothing
 * there.  A broken one writes "nemo: invariant broken: ..." with the file
 * and line to stderr and aborts: a bug of nemo's, never a user error
 * (those get an error code and nemo_last_error()).  Async-signal-safe: it
 * formats nothing but fixed strings and calls write(2) and abort(3).
 */
#ifndef NEMO_PLATFORM_INVARIANT_H
#define NEMO_PLATFORM_INVARIANT_H

#ifdef NDEBUG
#define NEMO__INVARIANT(cond, what) ((void)0)
#else
_Noreturn void nemo__invariant_broken(const char *cond, const char *what, const char *file, int line);
#define NEMO__INVARIANT(cond, what) \
	((cond) ? (void)0 : nemo__invariant_broken(#cond, (what), __FILE__, __LINE__))
#endif

#endif
