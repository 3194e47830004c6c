/*
 * test_ctl.c - private fast calls set up by a control string (nemo_ctl,
 * nemo_fast): the forms that work, and every malformed form with its
 * error and a text that quotes the bad word.
 */
#define _GNU_SOURCE
#include "check.h"

#include <nemo/nemo.h>

#include <errno.h>
#include <string.h>

static unsigned long got, got_nf;
static uint64_t last;

static void on_msg(const nemo_am_msg *m, void *ctx)
{
	(void)ctx;
	last = m->arg;
	got++;
}

static void on_nf(void *ctx, nemo_place_id src, uint32_t chan)
{
	(void)ctx;
	(void)src;
	(void)chan;
	got_nf++;
}

static int says(const char *needle)
{
	if (strstr(nemo_last_error(), needle))
		return 1;
	fprintf(stderr, "nemo_last_error() is \"%s\", wanted \"%s\"\n", nemo_last_error(), needle);
	return 0;
}

#define BAD(cmd, code, needle)                                  \
	do {                                                    \
		CHECK_EQ_INT(nemo_ctl(d, cmd), code);           \
		CHECK(says(needle));                            \
	} while (0)

int main(void)
{
	nemo_domain *d, *other;
	CHECK_EQ_INT(nemo_domain_create(NULL, &d), 0);
	CHECK_EQ_INT(nemo_domain_create(NULL, &other), 0);
	CHECK_EQ_INT(nemo_ctl(d, "bind am dest=0 action=1 slot=0"), ENOTCONN);
	CHECK_EQ_INT(nemo_fast(0, 1), ENOENT);
	CHECK_EQ_INT(nemo_action_register(d, 1, on_msg, NULL), 0);
	nemo_place_id me;
	CHECK_EQ_INT(nemo_place_join(d, NULL, &me), 0);
	CHECK_EQ_INT(nemo_notify_set_handler(on_nf, NULL), 0);
	CHECK_EQ_INT(nemo_ctl(other, "unbind slot=0"), EXDEV);
	CHECK_EQ_INT(nemo_ctl(NULL, "unbind slot=0"), EINVAL);
	CHECK_EQ_INT(nemo_ctl(d, NULL), EINVAL);

	/* Malformed forms. */
	BAD("", EINVAL, "empty command");
	BAD("   ", EINVAL, "empty command");
	BAD("bnd am dest=0 action=1 slot=0", EINVAL, "'bnd': unknown command");
	BAD("bind", EINVAL, "bind what?");
	BAD("bind msg dest=0 action=1 slot=0", EINVAL, "'bind msg': bind what?");
	BAD("bind am dest=0 acton=1 slot=0", EINVAL, "'acton=1': unknown key");
	BAD("bind am dest=0 action=1 slot", EINVAL, "'slot': expected key=value");
	BAD("bind am dest=0 action=x1 slot=0", EINVAL, "'action=x1': not a number");
	BAD("bind am dest=0 action=-1 slot=0", EINVAL, "'action=-1': not a number");
	BAD("bind am dest=0 action=1 slot=16", ERANGE, "'slot=16': slots are 0..15");
	BAD("bind am dest=0 action=1", EINVAL, "slot=S is missing");
	BAD("bind am action=1 slot=0", EINVAL, "dest=D is missing");
	BAD("bind am dest=0 slot=0", EINVAL, "action=A or event=E is missing");
	BAD("bind am dest=0 action=1 event=2 slot=0", EINVAL, "given twice");
	BAD("bind am dest=0 action=1 slot=0 flags=fast", EINVAL, "unknown flag 'fast'");
	BAD("bind notify dest=0 chan=70000 slot=0", ERANGE, "'chan=70000'");
	BAD("bind notify dest=0 action=1 slot=0", EINVAL, "'action=1': unknown key");
	BAD("bind am dest=5 action=1 slot=0", ESRCH, "no place at index 5");
	BAD("bind am dest=0 action=9 slot=0", ENOENT, "action 9 has no handler");
	BAD("unbind slot=3", ENOENT, "slot 3 is empty");
	BAD("unbind dest=0 slot=3", EINVAL, "'dest=0': unknown key");
	BAD("bind am dest=0 action=1 slot=0 a=1 b=2 c=3 d=4 e=5 f=6 g=7 h=8", EINVAL, "more than 12 words");
	CHECK_EQ_INT(nemo_fast(16, 0), ERANGE);

	/* Working forms: by index and by full id, with flags; fast calls. */
	CHECK_EQ_INT(nemo_ctl(d, "bind am dest=0 action=1 slot=1"), 0);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "  bind   am slot=2 dest=%#llx action=0x1 flags=push,more ",
		 (unsigned long long)me);
	CHECK_EQ_INT(nemo_ctl(d, cmd), 0);
	CHECK_EQ_INT(nemo_ctl(d, "bind notify dest=0 chan=3 slot=3"), 0);
	for (uint64_t i = 1; i <= 100; i++)
		CHECK_EQ_INT(nemo_fast(1, i), 0);
	CHECK_EQ_INT(nemo_fast(2, 500), 0);
	CHECK_EQ_INT(nemo_fast(3, 0), 0);
	CHECK_EQ_INT(nemo_flush(NEMO_PLACE_ALL), 0);
	unsigned h;
	while (got < 101 || got_nf < 1)
		CHECK_EQ_INT(nemo_poll(&h), 0);
	CHECK_EQ_INT(got, 101);
	CHECK_EQ_INT(last, 500);
	CHECK_EQ_INT(got_nf, 1);
	/* Rebinding a slot replaces it; unbinding empties it. */
	CHECK_EQ_INT(nemo_ctl(d, "bind am dest=0 action=1 slot=1"), 0);
	CHECK_EQ_INT(nemo_ctl(d, "unbind slot=1"), 0);
	CHECK_EQ_INT(nemo_fast(1, 0), ENOENT);
	CHECK(says("slot 1 is empty"));
	CHECK_EQ_INT(nemo_ctl(d, "unbind slot=2"), 0);
	CHECK_EQ_INT(nemo_ctl(d, "unbind slot=3"), 0);
	CHECK_EQ_INT(nemo_place_leave(), 0);
	CHECK_EQ_INT(nemo_domain_destroy(d), 0);
	CHECK_EQ_INT(nemo_domain_destroy(other), 0);
	return check_exit("test_ctl");
}
