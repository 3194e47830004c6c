/*
 * test_errors.c - a failed call says why: nemo_last_error() names the
 * call, what was wrong and the code, per thread; a success leaves it.
 * Run again with NEMO_DEBUG=1 (ctest: errors.debug), where every such
 * failure is also one line on stderr.
 */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/nemo.h>

#include <errno.h>
#include <pthread.h>
#include <string.h>

static int says(const char *needle)
{
	const char *t = nemo_last_error();
	if (strstr(t, needle))
		return 1;
	fprintf(stderr, "nemo_last_error() is \"%s\", wanted it to contain \"%s\"\n", t, needle);
	return 0;
}

static void nop(const nemo_am_msg *m, void *ctx)
{
	(void)m;
	(void)ctx;
}

static void *other_thread(void *arg)
{
	(void)arg;
	/* Thread-local: this thread has failed nothing yet. */
	CHECK(strcmp(nemo_last_error(), "") == 0);
	CHECK_EQ_INT(nemo_am_send(1, 0, 0, 0), ENOTCONN);
	CHECK(says("nemo_am_sendv: the calling thread is not a place"));
	return NULL;
}

int main(void)
{
	CHECK(nemo_last_error() != NULL);
	CHECK(strcmp(nemo_last_error(), "") == 0);

	nemo_domain *d;
	nemo_domain_attr bad = { .ring_slots = 100 };
	CHECK_EQ_INT(nemo_domain_create(&bad, &d), EINVAL);
	CHECK(says("nemo_domain_create: ring_slots 100 is not a power of two from 8 to 32768 (EINVAL)"));
	bad = (nemo_domain_attr){ .max_places = 5000 };
	CHECK_EQ_INT(nemo_domain_create(&bad, &d), EINVAL);
	CHECK(says("max_places 5000 is above"));

	nemo_domain_attr a = { .max_actions = 16, .max_events = 8 };
	CHECK_EQ_INT(nemo_domain_create(&a, &d), 0);
	CHECK(says("max_places 5000"));               /* a success leaves it */

	/* The three: a bad pin CPU, a bad flag, an unknown action -
	 * each its own text, where errno's text was the same or misleading. */
	nemo_place_attr pa = { .flags = NEMO_PLACE_PIN, .cpu = 4000 };
	CHECK_EQ_INT(nemo_place_join(d, &pa, NULL), EINVAL);
	CHECK(says("nemo_place_join: cannot pin to cpu 4000"));
	pa = (nemo_place_attr){ .flags = 0x40 };
	CHECK_EQ_INT(nemo_place_join(d, &pa, NULL), EINVAL);
	CHECK(says("nemo_place_join: flags 0x40: unknown bits 0x40"));

	nemo_place_id me;
	CHECK_EQ_INT(nemo_place_join(d, NULL, &me), 0);
	CHECK_EQ_INT(nemo_place_join(d, NULL, NULL), EALREADY);
	CHECK(says("already a place"));
	CHECK_EQ_INT(nemo_am_send(me, 7, 0, 0), ENOENT);
	CHECK(says("nemo_am_sendv: action 7 has no handler in this domain (nemo_action_register) (ENOENT)"));
	CHECK_EQ_INT(nemo_am_send(me, 16, 0, 0), ERANGE);
	CHECK(says("action 16 is out of range: the domain has max_actions 16 (ERANGE)"));
	CHECK_EQ_INT(nemo_am_send(me, 0, 0, 0x100), EINVAL);
	CHECK(says("flags 0x100: unknown bits 0x100"));
	char big[64] = { 0 };
	CHECK_EQ_INT(nemo_action_register(d, 0, nop, NULL), 0);
	CHECK_EQ_INT(nemo_am_sendv(me, 0, 0, big, sizeof big, 0), EMSGSIZE);
	CHECK(says("payload of 64 bytes"));
	CHECK_EQ_INT(nemo_action_register(d, 0, nop, NULL), EEXIST);
	CHECK(says("nemo_action_register: action 0 has a handler already (EEXIST)"));
	CHECK_EQ_INT(nemo_am_send(me, NEMO_AM_EVENT(3), 0, 0), ENOENT);
	CHECK(says("event 3 is not mapped at place"));
	CHECK_EQ_INT(nemo_am_send(((nemo_place_id)77 << 16 | 40), 0, 0, 0), ESRCH);
	CHECK(says("is not in the domain"));
	CHECK_EQ_INT(nemo_notify(me, 0, 0), ENOENT);
	CHECK(says("nemo_notify: place"));
	CHECK(says("has no notification handler"));
	CHECK_EQ_INT(nemo_notify(me, 1u << 20, 0), ERANGE);
	CHECK(says("channel 1048576 is above"));
	CHECK_EQ_INT(nemo_domain_destroy(d), EBUSY);
	CHECK(says("nemo_domain_destroy: 1 places are still joined"));
	/* The code is kept as it was: only the text is new. */
	errno = 1234;
	CHECK_EQ_INT(nemo_am_send(me, 7, 0, 0), ENOENT);
	CHECK_EQ_INT(errno, 1234);

	pthread_t t;
	CHECK_EQ_INT(pthread_create(&t, NULL, other_thread, NULL), 0);
	pthread_join(t, NULL);
	CHECK(says("nemo_am_sendv: action 7"));   /* ours, not the other thread's */

	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_place_leave(), ENOTCONN);
	CHECK(says("nemo_place_leave: the calling thread is not a place"));
	CHECK_EQ_INT(nemo_domain_destroy(d), 0);
	CHECK_EQ_INT(nemo_place_join(d, NULL, NULL), EIDRM);
	CHECK(says("nemo_place_join: the domain was destroyed (EIDRM)"));
	return check_exit("test_errors");
}
