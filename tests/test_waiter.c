/* test_waiter.c - wait policies, calibration, profiles, parking slots,
 * kick, the counters, and waits in front of someone else's primitive
 * (nemo_wait_foreign). */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/nemo.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_policy_parse(void)
{
	nemo_wait_policy p;
	CHECK_EQ_INT(nemo_wait_policy_parse("spin", &p), 0);
	CHECK_EQ_INT(p.kind, NEMO_WAIT_SPIN);
	CHECK_EQ_INT(nemo_wait_policy_parse("block", &p), 0);
	CHECK_EQ_INT(p.kind, NEMO_WAIT_BLOCK);
	CHECK_EQ_INT(nemo_wait_policy_parse("adaptive", &p), 0);
	CHECK_EQ_INT(p.kind, NEMO_WAIT_ADAPTIVE);
	CHECK_EQ_INT(nemo_wait_policy_parse("hybrid", &p), 0);
	CHECK_EQ_INT(p.kind, NEMO_WAIT_HYBRID);
	CHECK_EQ_INT(p.spin_ns, NEMO_WAIT_HYBRID_DEFAULT_NS);
	CHECK_EQ_INT(nemo_wait_policy_parse("hybrid:1500", &p), 0);
	CHECK_EQ_INT(p.spin_ns, 1500);
	const char *bad[] = { "", "Spin", "hybrid:", "hybrid:0", "hybrid:-5", "hybrid:12x",
			      "hybrid:2000000000", "sleep", "spin ", NULL };
	for (int i = 0; bad[i]; i++) {
		p = (nemo_wait_policy){ NEMO_WAIT_SPIN, 7 };
		CHECK_EQ_INT(nemo_wait_policy_parse(bad[i], &p), EINVAL);
		CHECK_EQ_INT(p.spin_ns, 7);    /* unchanged on error */
	}
	CHECK_EQ_INT(nemo_wait_policy_parse(NULL, &p), EINVAL);
	CHECK_EQ_INT(nemo_wait_policy_parse("spin", NULL), EINVAL);

	char buf[32];
	nemo_wait_policy h = { NEMO_WAIT_HYBRID, 4242 };
	CHECK_EQ_INT(nemo_wait_policy_format(&h, buf, sizeof buf), 0);
	CHECK(strcmp(buf, "hybrid:4242") == 0);
	CHECK_EQ_INT(nemo_wait_policy_format(&h, buf, 4), ERANGE);
	nemo_wait_policy back;
	const char *all[] = { "spin", "block", "adaptive", "hybrid:99", NULL };
	for (int i = 0; all[i]; i++) {      /* round trip */
		CHECK_EQ_INT(nemo_wait_policy_parse(all[i], &p), 0);
		CHECK_EQ_INT(nemo_wait_policy_format(&p, buf, sizeof buf), 0);
		CHECK_EQ_INT(nemo_wait_policy_parse(buf, &back), 0);
		CHECK(back.kind == p.kind && back.spin_ns == p.spin_ns);
	}
	nemo_wait_policy weird = { (nemo_wait_kind)42, 0 };
	CHECK_EQ_INT(nemo_wait_policy_format(&weird, buf, sizeof buf), EINVAL);
	CHECK_EQ_INT(nemo_wait_policy_resolve(&weird, &back), EINVAL);
	CHECK_EQ_INT(nemo_wait_set_thread_policy(&weird), EINVAL);
}

static void test_policy_resolve(void)
{
	nemo_wait_policy r;
	/* Environment default: NEMO_WAIT if the test runs with it, else adaptive. */
	const char *env = getenv("NEMO_WAIT");
	CHECK_EQ_INT(nemo_wait_policy_resolve(NULL, &r), 0);
	if (env && strcmp(env, "hybrid:1234") == 0)
		CHECK(r.kind == NEMO_WAIT_HYBRID && r.spin_ns == 1234);
	else if (!env)
		CHECK_EQ_INT(r.kind, NEMO_WAIT_ADAPTIVE);
	/* An explicit kind wins; the thread's policy beats the environment. */
	nemo_wait_policy spin = { NEMO_WAIT_SPIN, 0 }, def = { NEMO_WAIT_DEFAULT, 0 };
	CHECK_EQ_INT(nemo_wait_policy_resolve(&spin, &r), 0);
	CHECK_EQ_INT(r.kind, NEMO_WAIT_SPIN);
	nemo_wait_policy blk = { NEMO_WAIT_BLOCK, 0 };
	CHECK_EQ_INT(nemo_wait_set_thread_policy(&blk), 0);
	CHECK_EQ_INT(nemo_wait_policy_resolve(&def, &r), 0);
	CHECK_EQ_INT(r.kind, NEMO_WAIT_BLOCK);
	CHECK_EQ_INT(nemo_wait_set_thread_policy(NULL), 0);
	CHECK_EQ_INT(nemo_wait_policy_resolve(&def, &r), 0);
	CHECK(r.kind != NEMO_WAIT_BLOCK || (env && strcmp(env, "block") == 0));
	CHECK_EQ_INT(nemo_wait_policy_resolve(NULL, NULL), EINVAL);
}

static void test_calibration_and_profile(void)
{
	nemo_wait_calibration c;
	CHECK_EQ_INT(nemo_wait_get_calibration(NULL), EINVAL);
	CHECK_EQ_INT(nemo_wait_get_calibration(&c), 0);
	CHECK(c.block_wake_ns > 0);
	CHECK(c.budget_ns > 0);
	CHECK(c.source != NULL);
	CHECK(!strcmp(c.source, "learned") || !strcmp(c.source, "profile") || !strcmp(c.source, "default"));
	printf("calibration: block+wake %.0f ns (%s)\n", c.block_wake_ns, c.source);

	double ns = 0, cpu = -1;
	CHECK_EQ_INT(nemo_wait_measure(5, -1, -1, &ns, NULL), EINVAL);
	CHECK_EQ_INT(nemo_wait_measure(20, 0, 100000, &ns, NULL), EINVAL);
	CHECK_EQ_INT(nemo_wait_measure(20, -1, -1, NULL, NULL), EINVAL);
	CHECK_EQ_INT(nemo_wait_measure(20, -1, -1, &ns, &cpu), 0);
	CHECK(ns > 0);
	CHECK(cpu > 0);
	CHECK_NEAR(c.budget_ns, c.block_wake_ns + c.block_cpu_ns, 1e-6);

	char dir[] = "/tmp/nemo-profile-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char path[256];
	snprintf(path, sizeof path, "%s/profile", dir);
	CHECK_EQ_INT(nemo_wait_profile_write(path, 0, 0), EINVAL);
	CHECK_EQ_INT(nemo_wait_profile_write(path, -3, 0), EINVAL);
	CHECK_EQ_INT(nemo_wait_profile_write(path, 100, -1), EINVAL);
	CHECK_EQ_INT(nemo_wait_profile_write(path, 12345, 678), 0);
	FILE *f = fopen(path, "r");
	CHECK(f != NULL);
	if (f) {
		char line[256];
		int found = 0;
		while (fgets(line, sizeof line, f))
			found += strcmp(line, "block_wake_ns 12345\n") == 0 ||
				 strcmp(line, "block_cpu_ns 678\n") == 0;
		fclose(f);
		CHECK_EQ_INT(found, 2);
	}
	setenv("NEMO_PROFILE", path, 1);
	char got[256];
	CHECK_EQ_INT(nemo_wait_profile_path(got, sizeof got), 0);
	CHECK(strcmp(got, path) == 0);
	CHECK_EQ_INT(nemo_wait_profile_path(got, 4), ERANGE);
	CHECK_EQ_INT(nemo_wait_profile_write("/nonexistent-dir/x/profile", 100, 10), ENOENT);
	unlink(path);
	rmdir(dir);
	unsetenv("NEMO_PROFILE");
}

/* A parked thread released by another: with every policy, with and
 * without a prior sleep; counters tell a kick issued from one avoided. */
struct park {
	nemo_waiter *w;
	nemo_wait_policy pol;
	atomic_int armed;
	int rc;
	int payload_seen;
	int payload;
};

static void *parker(void *p)
{
	struct park *k = p;
	k->w = nemo_waiter_self();
	nemo_waiter_arm(k->w);
	atomic_store(&k->armed, 1);
	k->rc = nemo_waiter_wait(k->w, &k->pol, CLOCK_MONOTONIC, NULL);
	k->payload_seen = k->payload;
	return NULL;
}

static void release_parked(nemo_wait_kind kind)
{
	struct park k = { .pol = { kind, 2000 } };
	atomic_init(&k.armed, 0);
	pthread_t th;
	pthread_create(&th, NULL, parker, &k);
	while (!atomic_load(&k.armed))
		;
	if (kind == NEMO_WAIT_BLOCK) {   /* let it fall asleep (it will: no budget) */
		for (int i = 0; i < 100000 && nemo_waiter_get_state(k.w) != NEMO_WAITER_SLEEPING; i++)
			usleep(100);
	}
	k.payload = 777;                 /* written before the release... */
	CHECK_EQ_INT(nemo_waiter_release(k.w), 0);
	pthread_join(th, NULL);
	CHECK_EQ_INT(k.rc, 0);
	CHECK_EQ_INT(k.payload_seen, 777);   /* ...visible after the wait */
	CHECK_EQ_INT(nemo_waiter_get_state(k.w), NEMO_WAITER_RUNNING);
}

static void test_slots(void)
{
	nemo_waiter *a = nemo_waiter_self();
	CHECK(a != NULL);
	CHECK(a == nemo_waiter_self());
	CHECK_EQ_INT(nemo_waiter_get_state(a), NEMO_WAITER_RUNNING);
	CHECK_EQ_INT(nemo_waiter_arm(NULL), EINVAL);
	CHECK_EQ_INT(nemo_waiter_release(NULL), EINVAL);
	CHECK_EQ_INT(nemo_waiter_kick(NULL), EINVAL);
	CHECK_EQ_INT(nemo_waiter_wait(NULL, NULL, CLOCK_MONOTONIC, NULL), EINVAL);
	CHECK_EQ_INT(nemo_waiter_wait(a, NULL, CLOCK_PROCESS_CPUTIME_ID, NULL), EINVAL);
	struct timespec bad = { 0, -1 };
	CHECK_EQ_INT(nemo_waiter_wait(a, NULL, CLOCK_MONOTONIC, &bad), EINVAL);

	/* Released before waiting: returns at once. */
	nemo_waiter_arm(a);
	nemo_waiter_release(a);
	CHECK_EQ_INT(nemo_waiter_wait(a, NULL, CLOCK_MONOTONIC, NULL), 0);

	/* Timeouts, polling and sleeping. */
	nemo_wait_policy kinds[] = { { NEMO_WAIT_SPIN, 0 }, { NEMO_WAIT_BLOCK, 0 },
				     { NEMO_WAIT_HYBRID, 1000 }, { NEMO_WAIT_ADAPTIVE, 0 } };
	for (int i = 0; i < 4; i++) {
		nemo_waiter_arm(a);
		struct timespec dl;
		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_nsec += 2000000;
		if (dl.tv_nsec >= 1000000000L) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000L;
		}
		CHECK_EQ_INT(nemo_waiter_wait(a, &kinds[i], CLOCK_MONOTONIC, &dl), ETIMEDOUT);
		struct timespec past = { 1, 0 };
		CHECK_EQ_INT(nemo_waiter_wait(a, &kinds[i], CLOCK_REALTIME, &past), ETIMEDOUT);
	}

	nemo_waiter_counters c0, c1;
	CHECK_EQ_INT(nemo_waiter_get_counters(NULL), EINVAL);
	CHECK_EQ_INT(nemo_waiter_get_counters(&c0), 0);
	release_parked(NEMO_WAIT_BLOCK);
	CHECK_EQ_INT(nemo_waiter_get_counters(&c1), 0);
	CHECK(c1.kicks_issued >= c0.kicks_issued + 1);   /* it slept: a FUTEX_WAKE */
	CHECK(c1.sleeps >= c0.sleeps + 1);
	nemo_waiter_get_counters(&c0);
	release_parked(NEMO_WAIT_SPIN);
	nemo_waiter_get_counters(&c1);
	CHECK_EQ_INT(c1.kicks_issued, c0.kicks_issued);  /* it polled: no syscall */
	CHECK(c1.kicks_avoided >= c0.kicks_avoided + 1);
	CHECK(c1.waits_polled >= c0.waits_polled + 1);
	release_parked(NEMO_WAIT_HYBRID);
	release_parked(NEMO_WAIT_ADAPTIVE);
	/* Kicking a thread that is not waiting costs nothing and is counted. */
	nemo_waiter_get_counters(&c0);
	CHECK_EQ_INT(nemo_waiter_kick(a), 0);
	nemo_waiter_get_counters(&c1);
	CHECK_EQ_INT(c1.kicks_avoided, c0.kicks_avoided + 1);
}

/* ---- nemo_wait_foreign: a flag stands for the other primitive ---- */
struct foreign {
	atomic_int ready;             /* the condition: take it by clearing */
	atomic_int tries, blocks;
	int block_rc;                 /* what block() returns */
	atomic_int polling;           /* set by try_take: the wait has begun */
	int raise_at;                 /* try_take raises SIGUSR1 at this try (0: never) */
	int ready_at;                 /* try_take makes it ready at this try (0: never) */
};

static bool f_take(void *arg)
{
	struct foreign *f = arg;
	int n = atomic_fetch_add(&f->tries, 1) + 1;
	atomic_store(&f->polling, 1);
	if (n == f->raise_at)
		pthread_kill(pthread_self(), SIGUSR1);
	if (n == f->ready_at)
		atomic_store(&f->ready, 1);
	int one = 1;
	return atomic_compare_exchange_strong(&f->ready, &one, 0);
}

static int f_block(void *arg, clockid_t clock, const struct timespec *abstime)
{
	(void)clock;
	(void)abstime;
	struct foreign *f = arg;
	atomic_fetch_add(&f->blocks, 1);
	return f->block_rc;
}

static atomic_int usr1_seen;
static void on_usr1(int sig)
{
	(void)sig;
	atomic_fetch_add(&usr1_seen, 1);
}

struct foreign_run {
	struct foreign *f;
	nemo_wait_policy pol;
	unsigned flags;
	atomic_int rc;
};

static void *foreign_waiter(void *p)
{
	struct foreign_run *r = p;
	atomic_store(&r->rc, nemo_wait_foreign(f_take, f_block, r->f, &r->pol, CLOCK_MONOTONIC, NULL, r->flags));
	return NULL;
}

/* A wait on this thread that raises SIGUSR1 (installed with sa_flags) at
 * its third try, so that the signal surely comes while it polls: returns
 * the wait's result; *blocks, whether block() was called.  The signal
 * mask must be what it was before. */
static int foreign_signalled(int sa_flags, unsigned flags, const struct timespec *abstime,
			     const nemo_wait_policy *pol, int ready_at, int *blocks)
{
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = sa_flags };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	atomic_store(&usr1_seen, 0);
	struct foreign f = { .block_rc = 0, .raise_at = 3, .ready_at = ready_at };
	sigset_t before, after;
	pthread_sigmask(SIG_SETMASK, NULL, &before);
	int rc = nemo_wait_foreign(f_take, f_block, &f, pol, CLOCK_MONOTONIC, abstime, flags);
	pthread_sigmask(SIG_SETMASK, NULL, &after);
	for (int sig = 1; sig < SIGRTMIN; sig++)
		CHECK_EQ_INT(sigismember(&after, sig), sigismember(&before, sig));
	*blocks = atomic_load(&f.blocks);
	signal(SIGUSR1, SIG_DFL);
	return rc;
}

static void test_foreign(void)
{
	struct foreign f = { .block_rc = 0 };
	nemo_wait_policy blk = { NEMO_WAIT_BLOCK, 0 }, bad = { (nemo_wait_kind)99, 0 };
	struct timespec past = { 0, 0 }, badns = { 0, -1 };

	/* Bad input: a specific EINVAL each, nothing called. */
	CHECK_EQ_INT(nemo_wait_foreign(NULL, f_block, &f, NULL, CLOCK_MONOTONIC, NULL, 0), EINVAL);
	CHECK_EQ_INT(nemo_wait_foreign(f_take, NULL, &f, NULL, CLOCK_MONOTONIC, NULL, 0), EINVAL);
	CHECK_EQ_INT(nemo_wait_foreign(f_take, f_block, &f, NULL, CLOCK_MONOTONIC, NULL, 1u << 9), EINVAL);
	CHECK_EQ_INT(nemo_wait_foreign(f_take, f_block, &f, NULL, CLOCK_PROCESS_CPUTIME_ID, NULL, 0), EINVAL);
	CHECK_EQ_INT(nemo_wait_foreign(f_take, f_block, &f, NULL, CLOCK_MONOTONIC, &badns, 0), EINVAL);
	CHECK_EQ_INT(nemo_wait_foreign(f_take, f_block, &f, &bad, CLOCK_MONOTONIC, NULL, 0), EINVAL);
	CHECK_EQ_INT(atomic_load(&f.tries) + atomic_load(&f.blocks), 0);

	/* Available: taken at the first try. */
	atomic_store(&f.ready, 1);
	CHECK_EQ_INT(nemo_wait_foreign(f_take, f_block, &f, NULL, CLOCK_MONOTONIC, NULL, 0), 0);
	CHECK_EQ_INT(atomic_load(&f.blocks), 0);
	CHECK_EQ_INT(atomic_load(&f.ready), 0);

	/* A deadline already past: ETIMEDOUT after one try, block not called. */
	atomic_store(&f.tries, 0);
	CHECK_EQ_INT(nemo_wait_foreign(f_take, f_block, &f, NULL, CLOCK_MONOTONIC, &past, 0), ETIMEDOUT);
	CHECK_EQ_INT(atomic_load(&f.tries), 1);
	CHECK_EQ_INT(atomic_load(&f.blocks), 0);

	/* BLOCK: one try, then block once; its result comes back as it is,
	 * and the wait counts as a sleep. */
	nemo_waiter_counters c0, c1;
	nemo_waiter_get_counters(&c0);
	f.block_rc = EIO;
	atomic_store(&f.tries, 0);
	CHECK_EQ_INT(nemo_wait_foreign(f_take, f_block, &f, &blk, CLOCK_MONOTONIC, NULL, 0), EIO);
	CHECK_EQ_INT(atomic_load(&f.tries), 1);
	CHECK_EQ_INT(atomic_load(&f.blocks), 1);
	nemo_waiter_get_counters(&c1);
	CHECK_EQ_INT(c1.sleeps - c0.sleeps, 1);
	CHECK_EQ_INT(c1.waits - c0.waits, 1);

	/* HYBRID with a short budget and nobody to set the flag: polls,
	 * then blocks once. */
	nemo_wait_policy hyb = { NEMO_WAIT_HYBRID, 50000 };
	f.block_rc = 0;
	atomic_store(&f.tries, 0);
	atomic_store(&f.blocks, 0);
	CHECK_EQ_INT(nemo_wait_foreign(f_take, f_block, &f, &hyb, CLOCK_MONOTONIC, NULL, 0), 0);
	CHECK(atomic_load(&f.tries) > 1);
	CHECK_EQ_INT(atomic_load(&f.blocks), 1);

	/* SPIN, taken while polling: never blocks. */
	atomic_store(&f.blocks, 0);
	atomic_store(&f.polling, 0);
	struct foreign_run r = { .f = &f, .pol = { NEMO_WAIT_SPIN, 0 }, .rc = -1 };
	pthread_t t;
	pthread_create(&t, NULL, foreign_waiter, &r);
	while (!atomic_load(&f.polling))
		sched_yield();
	usleep(5000);
	atomic_store(&f.ready, 1);
	pthread_join(t, NULL);
	CHECK_EQ_INT(atomic_load(&r.rc), 0);
	CHECK_EQ_INT(atomic_load(&f.blocks), 0);

	/* Signals while polling (NEMO_WAIT_FOREIGN_EINTR): the handler runs
	 * once, after the poll, and the wait fails with EINTR exactly where
	 * the blocking call would have. */
	nemo_wait_policy spin = { NEMO_WAIT_SPIN, 0 };
	struct timespec far = in_ms(CLOCK_MONOTONIC, 60000);
	int blocks;
	/* untimed, no SA_RESTART: EINTR, block not called */
	CHECK_EQ_INT(foreign_signalled(0, NEMO_WAIT_FOREIGN_EINTR, NULL, &spin, 0, &blocks), EINTR);
	CHECK_EQ_INT(atomic_load(&usr1_seen), 1);
	CHECK_EQ_INT(blocks, 0);
	/* untimed, SA_RESTART: the call would have gone on, so the wait goes
	 * on into block (SPIN's endless poll is capped at 1 ms here) */
	CHECK_EQ_INT(foreign_signalled(SA_RESTART, NEMO_WAIT_FOREIGN_EINTR, NULL, &spin, 0, &blocks), 0);
	CHECK_EQ_INT(atomic_load(&usr1_seen), 1);
	CHECK_EQ_INT(blocks, 1);
	/* timed, SA_RESTART: a timed wait fails with EINTR whatever the flags */
	CHECK_EQ_INT(foreign_signalled(SA_RESTART, NEMO_WAIT_FOREIGN_EINTR, &far, &spin, 0, &blocks), EINTR);
	CHECK_EQ_INT(atomic_load(&usr1_seen), 1);
	CHECK_EQ_INT(blocks, 0);
	/* the same under the default policy */
	CHECK_EQ_INT(foreign_signalled(0, NEMO_WAIT_FOREIGN_EINTR, NULL, NULL, 0, &blocks), EINTR);
	CHECK_EQ_INT(atomic_load(&usr1_seen), 1);
	/* no flag: the handler runs at once, the poll goes on (taken at the
	 * 50th try) */
	CHECK_EQ_INT(foreign_signalled(0, 0, NULL, &spin, 50, &blocks), 0);
	CHECK_EQ_INT(atomic_load(&usr1_seen), 1);
	CHECK_EQ_INT(blocks, 0);
	/* a signal the caller blocks is not ours to deliver: no EINTR, it
	 * stays pending until the caller unblocks it */
	sigset_t usr1, old;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	struct sigaction sa = { .sa_handler = on_usr1 };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	pthread_sigmask(SIG_BLOCK, &usr1, &old);
	CHECK_EQ_INT(foreign_signalled(0, NEMO_WAIT_FOREIGN_EINTR, NULL, &spin, 0, &blocks), 0);
	CHECK_EQ_INT(blocks, 1);
	CHECK_EQ_INT(atomic_load(&usr1_seen), 0);
	sigaction(SIGUSR1, &sa, NULL);     /* (foreign_signalled reset it) */
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	CHECK_EQ_INT(atomic_load(&usr1_seen), 1);
	signal(SIGUSR1, SIG_DFL);
}

int main(void)
{
	nemo_clock_init();
	test_policy_parse();
	test_policy_resolve();
	test_calibration_and_profile();
	test_slots();
	test_foreign();
	return check_exit("test_waiter");
}
