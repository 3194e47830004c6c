/*
 * fuzz_xproc.c - a hostile peer scribbles over a shared domain's segment
 * while a receiver and a sender use it (nemo/xproc.h, THE VALIDATION
 * RULE in src/xproc/xproc.c).
 *
 *   fuzz_xproc [SECONDS [SEED]]     default 3 s, seed from the clock
 *
 * Four processes: the parent creates the domain; R joins "rx" and waits
 * (timed) and polls, re-joining when its place was taken from it; S
 * finds "rx" and sends active messages and notifications without
 * blocking; C maps the segment and writes random words, random bytes,
 * plausible slots (seq one ahead of a consumer) and plausible process
 * and place words, at random offsets, in bursts (the first half of every
 * 200 ms is quiet, so that the delivery path runs between them), for
 * SECONDS.  R and S check that
 * every call returns one of its documented codes and that every message
 * a handler sees is well-formed; they must exit 0 at the end.  A crash,
 * a sanitizer report (ASan build: `make fuzz-xproc` runs 10 minutes) or
 * a hang (each child has an alarm) fails the run.  Operations may fail:
 * that is what a hostile peer can do to you.
 */
#define _GNU_SOURCE
#include <nemo/xproc.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char seg[64];
static double seconds = 3;
static uint64_t seed;
static _Atomic int *attached;   /* shared: R and S have attached (C waits for them) */

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rnd(uint64_t *s)   /* splitmix64 */
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int bad_code(const char *who, const char *call, int rc)
{
	fprintf(stderr, "fuzz_xproc: %s: %s returned %d (%s), not a documented code\n", who, call, rc,
		strerror(rc));
	return 1;
}

static unsigned long long seen, malformed;

static void on_msg(void *ctx, nemo_xproc_place *p, const nemo_xproc_msg *m)
{
	(void)ctx;
	if (m->len > NEMO_XPROC_PAYLOAD_MAX || m->dst != nemo_xproc_self(p))
		malformed++;
	seen++;
}

static void on_note(void *ctx, nemo_xproc_place *p, nemo_xproc_id src, uint32_t chan)
{
	(void)ctx;
	(void)p;
	(void)src;
	if (chan > NEMO_NOTIFY_CHAN_MAX) {
		/* The receiver's validation lets no channel above the bound
		 * through, whatever a peer scribbled. */
		fprintf(stderr, "fuzz_xproc: R: a notification with channel %#x reached the handler\n", chan);
		_exit(3);
	}
	seen++;
}

static int receiver(double end)
{
	alarm((unsigned)seconds + 60);
	nemo_xproc *x;
	nemo_xproc_place *p = NULL;
	int rc = nemo_xproc_attach(seg, NULL, &x);
	atomic_fetch_add(attached, 1);
	if (rc)
		return bad_code("R", "attach", rc);
	nemo_xproc_handle(x, "msg", on_msg, NULL);
	uint64_t s = seed ^ 0x1234;
	unsigned rounds = 0;
	while (now_s() < end) {
		if (!p) {
			rc = nemo_xproc_join(x, "rx", &p, NULL);
			if (rc == EEXIST || rc == ENOSPC || rc == EBADMSG) {
				nemo_xproc_check(x);
				p = NULL;
				usleep(1000);
				continue;
			}
			if (rc)
				return bad_code("R", "join", rc);
			nemo_xproc_set_notify(p, on_note, NULL);
			nemo_wait_policy pol = {.kind = (nemo_wait_kind)(1 + rnd(&s) % 4), .spin_ns = 2000};
			nemo_xproc_set_policy(p, &pol);
		}
		struct timespec dl;
		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_nsec += 20000000;
		if (dl.tv_nsec >= 1000000000) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000;
		}
		rc = (rounds & 1) ? nemo_xproc_wait(p, &dl, NULL) : nemo_xproc_poll(p, NULL);
		if (rc && rc != ETIMEDOUT && rc != EOWNERDEAD && rc != ECONNRESET && rc != EBADMSG)
			return bad_code("R", "wait/poll", rc);
		if (++rounds % 64 == 0) {
			nemo_xproc_check(x);
			nemo_xproc_id me;
			/* Our place taken from us (reclaimed or scribbled): join again. */
			if (nemo_xproc_find(x, "rx", &me) != 0 || me != nemo_xproc_self(p)) {
				nemo_xproc_leave(p);
				p = NULL;
			}
			char name[16];
			uint32_t code;
			snprintf(name, sizeof name, "n%u", (unsigned)(rnd(&s) % 32));
			rc = nemo_xproc_name(x, name, &code);
			if (rc && rc != ENOSPC && rc != EBADMSG && rc != EBUSY)
				return bad_code("R", "name", rc);
		}
	}
	nemo_xproc_detach(x);
	fprintf(stderr, "fuzz_xproc: R handled %llu messages\n", seen);
	return malformed ? 1 : 0;
}

static int sender(double end)
{
	alarm((unsigned)seconds + 60);
	nemo_xproc *x;
	nemo_xproc_place *p;
	int rc = nemo_xproc_attach(seg, NULL, &x);
	atomic_fetch_add(attached, 1);
	if (rc)
		return bad_code("S", "attach", rc);
	rc = nemo_xproc_join(x, "tx", &p, NULL);
	if (rc)
		return bad_code("S", "join", rc);
	uint32_t code;
	/* EBUSY: a scribbled claim names a live process (names.c). */
	while ((rc = nemo_xproc_name(x, "msg", &code)) == EBUSY && now_s() < end)
		;
	if (rc == EBUSY) {
		nemo_xproc_detach(x);
		return 0;
	}
	if (rc)
		return bad_code("S", "name", rc);
	uint64_t s = seed ^ 0x5678;
	nemo_xproc_id rx = 0;
	unsigned long long sent = 0;
	unsigned stuck = 0;
	bool rejoin = false;
	while (now_s() < end) {
		if (!rx && nemo_xproc_find(x, "rx", &rx) != 0) {
			rx = 0;
			usleep(100);
			continue;
		}
		unsigned char buf[NEMO_XPROC_PAYLOAD_MAX];
		size_t len = rnd(&s) % (NEMO_XPROC_PAYLOAD_MAX + 1);
		memset(buf, (int)len, sizeof buf);
		/* Channels: mostly valid, one in 16 above NEMO_NOTIFY_CHAN_MAX (ERANGE). */
		uint32_t chan = (uint32_t)rnd(&s);
		bool chan_ok = (chan & 0xF) != 0;
		if (chan_ok)
			chan &= NEMO_NOTIFY_CHAN_MAX;
		else
			chan |= NEMO_NOTIFY_CHAN_MAX + 1;
		bool notify = !(rnd(&s) & 3);
		rc = notify ? nemo_xproc_notify(p, rx, chan, NEMO_XPROC_NONBLOCK)
			    : nemo_xproc_send(p, rx, code, sent, buf, len, NEMO_XPROC_NONBLOCK);
		if (notify && !chan_ok) {
			if (rc != ERANGE)
				return bad_code("S", "notify above NEMO_NOTIFY_CHAN_MAX", rc);
			continue;
		}
		if (rc == 0) {
			sent++;
			stuck = 0;
		}
		else if (rc == ESRCH || rc == EOWNERDEAD || rc == ECONNRESET || rc == EBADMSG)
			rx = 0;
		else if (rc == EAGAIN && ++stuck < 20000)
			nemo_xproc_poll(p, NULL);
		else if (rc == EAGAIN) {
			/* A ring scribbled into "full" for good: a join resets it. */
			stuck = 0;
			rejoin = true;
		}
		else
			return bad_code("S", "send", rc);
		if ((sent & 1023) == 0 || (rc && rc != EAGAIN) || rejoin) {
			nemo_xproc_check(x);
			/* Our place taken from us (reclaimed or scribbled): join again. */
			nemo_xproc_id me;
			if (rejoin || nemo_xproc_find(x, "tx", &me) != 0 || me != nemo_xproc_self(p)) {
				rejoin = false;
				nemo_xproc_leave(p);
				while ((rc = nemo_xproc_join(x, "tx", &p, NULL)) != 0) {
					if (rc != EEXIST && rc != ENOSPC && rc != EBADMSG)
						return bad_code("S", "join", rc);
					if (now_s() >= end) {
						nemo_xproc_detach(x);
						return 0;
					}
					nemo_xproc_check(x);
					usleep(1000);
				}
			}
			rc = nemo_xproc_place_check(x, rx);
			if (rc && rc != ESRCH && rc != EOWNERDEAD && rc != ECONNRESET && rc != EBADMSG)
				return bad_code("S", "place_check", rc);
		}
	}
	nemo_xproc_detach(x);
	fprintf(stderr, "fuzz_xproc: S sent %llu messages\n", sent);
	return 0;
}

static int corrupter(double end)
{
	alarm((unsigned)seconds + 60);
	char path[80];
	snprintf(path, sizeof path, "/%s", seg);
	int fd = shm_open(path, O_RDWR, 0);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0)
		return 2;
	size_t size = (size_t)st.st_size;
	unsigned char *b = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (b == MAP_FAILED)
		return 2;
	uint64_t s = seed;
	unsigned long long writes = 0;
	/* Let R and S attach before the scribbling starts (a scribbled
	 * header makes attach fail with EPROTO, which is right but ends
	 * their part of the test). */
	for (int i = 0; i < 10000 && atomic_load(attached) < 2; i++)
		usleep(1000);
	while (now_s() < end) {
		/* Quiet for the first half of every 200 ms, so that the domain
		 * recovers and the delivery path runs between the bursts. */
		double t = now_s();
		if (t - 0.2 * (double)(long long)(t / 0.2) < 0.1) {
			usleep(5000);
			continue;
		}
		uint64_t r = rnd(&s);
		size_t off = (size_t)(rnd(&s) % (size / 4)) * 4;
		volatile uint32_t *w = (volatile uint32_t *)(b + off);
		switch (r % 8) {
		case 0: case 1: case 2:   /* a random word */
			*w = (uint32_t)rnd(&s);
			break;
		case 3:                   /* a random byte */
			((volatile unsigned char *)b)[rnd(&s) % size] = (unsigned char)rnd(&s);
			break;
		case 4: case 5: {         /* a plausible slot: small seq, fields near real ones */
			size_t line = (size_t)(rnd(&s) % (size / 64)) * 64;
			volatile uint32_t *sl = (volatile uint32_t *)(b + line);
			sl[0] = (uint32_t)(rnd(&s) % 16);
			sl[1 + rnd(&s) % 15] = (uint32_t)(rnd(&s) % 0x30000);
			break;
		}
		case 6:                   /* small values: indices, states, lengths */
			*w = (uint32_t)(rnd(&s) % 0x400);
			break;
		default:                  /* a place word (gen|owner|state) or a pid */
			*w = (uint32_t)((rnd(&s) % 8) << 16 | (rnd(&s) % 8) << 8 | (rnd(&s) % 5));
			break;
		}
		writes++;
		if (r & 0x100)
			usleep((useconds_t)(rnd(&s) % 200));
	}
	fprintf(stderr, "fuzz_xproc: C made %llu writes\n", writes);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		seconds = atof(argv[1]);
	seed = argc > 2 ? strtoull(argv[2], NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 20;
	fprintf(stderr, "fuzz_xproc: %.0f s, seed %llu\n", seconds, (unsigned long long)seed);
	snprintf(seg, sizeof seg, "nemo-fuzz-xproc-%d", (int)getpid());
	nemo_xproc *x;
	nemo_xproc_attr a = {.max_procs = 4, .max_places = 4, .ring_slots = 8, .max_names = 8};
	int rc = nemo_xproc_create(seg, &a, &x);
	if (rc) {
		fprintf(stderr, "fuzz_xproc: create: %s\n", strerror(rc));
		return 1;
	}
	attached = mmap(NULL, sizeof *attached, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (attached == MAP_FAILED)
		return 1;
	double end = now_s() + seconds;
	pid_t kid[3];
	int (*fn[3])(double) = {receiver, sender, corrupter};
	for (int i = 0; i < 3; i++) {
		kid[i] = fork();
		if (kid[i] == 0)
			_exit(fn[i](end));
	}
	int fails = 0;
	const char *who[3] = {"receiver", "sender", "corrupter"};
	for (int i = 0; i < 3; i++) {
		int st;
		waitpid(kid[i], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "fuzz_xproc: %s %s %d (seed %llu)\n", who[i],
				WIFSIGNALED(st) ? "killed by signal" : "exited", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
				(unsigned long long)seed);
			fails++;
		}
	}
	nemo_xproc_unlink(seg);
	nemo_xproc_detach(x);
	fprintf(stderr, "fuzz_xproc: %s\n", fails ? "FAILED" : "ok");
	return fails ? 1 : 0;
}
