/*
 * ctl.c - private fast calls set up by a control string (the "fastwrite"
 * ctl command of Minnich, Floren & McKie's Plan 9 paper):
 * nemo_ctl(d, "bind am dest=3 action=7 slot=1") binds (bound.c) and
 * stores the binding in slot 1 of the calling thread's private table;
 * nemo_fast(1, arg) calls it.  So a tool or a script can set up a
 * program's fast paths by writing words, and the program's hot loop is
 * one indexed call.
 *
 * Grammar (words separated by blanks; keys in any order):
 *   bind am     dest=D (action=A | event=E) slot=S [flags=F]
 *   bind notify dest=D chan=C slot=S [flags=F]
 *   unbind slot=S
 * D: a place index of d (its current occupant) or a full place id (0x...);
 * A, E, C, S: decimal or 0x hex; F: push, more, nonblock, joined by ','.
 * Every malformed form gets EINVAL (ERANGE for a slot out of range) and a
 * nemo_last_error() text that quotes the bad word.
 */
#define _GNU_SOURCE
#include "messaging_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static __thread nemo_am_bound *slots[NEMO_FAST_SLOTS];

#define MAXW 12
#define WLEN 64

/* Split s into at most MAXW words of at most WLEN - 1 characters. */
static int words(const char *s, char w[MAXW][WLEN], int *n)
{
	*n = 0;
	while (*s) {
		while (*s == ' ' || *s == '\t' || *s == '\n')
			s++;
		if (!*s)
			break;
		if (*n == MAXW)
			return nemo__fail(EINVAL, "nemo_ctl", "more than %d words", MAXW);
		size_t k = 0;
		const char *start = s;
		while (*s && *s != ' ' && *s != '\t' && *s != '\n') {
			if (k == WLEN - 1)
				return nemo__fail(EINVAL, "nemo_ctl", "the word '%.20s...' is too long", start);
			w[*n][k++] = *s++;
		}
		w[*n][k] = 0;
		(*n)++;
	}
	return 0;
}

static int number(const char *word, const char *v, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 0);
	if (!*v || *end || errno || *v == '-')
		return nemo__fail(EINVAL, "nemo_ctl", "'%s': not a number", word);
	*out = x;
	return 0;
}

static int parse_flags(const char *word, const char *v, unsigned *out)
{
	*out = 0;
	char buf[WLEN];
	strcpy(buf, v);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (!strcmp(t, "push"))
			*out |= NEMO_PUSH;
		else if (!strcmp(t, "more"))
			*out |= NEMO_MORE;
		else if (!strcmp(t, "nonblock"))
			*out |= NEMO_NONBLOCK;
		else
			return nemo__fail(EINVAL, "nemo_ctl", "'%s': unknown flag '%s' (push, more, nonblock)", word, t);
	}
	return 0;
}

int nemo_ctl(nemo_domain *d, const char *cmd)
{
	int err = nemo__domain_check(d);
	if (err)
		return err;
	if (!cmd)
		return NEMO__FAIL(EINVAL, "cmd is NULL");
	nemo_place *me = nemo__place_self();
	if (!me)
		return NEMO__FAIL(ENOTCONN, "the calling thread is not a place (nemo_place_join first)");
	if (me->d != d)
		return NEMO__FAIL(EXDEV, "the calling thread is a place of another domain");
	char w[MAXW][WLEN];
	int n;
	if ((err = words(cmd, w, &n)))
		return err;
	if (n == 0)
		return nemo__fail(EINVAL, "nemo_ctl", "empty command (bind am ..., bind notify ..., unbind ...)");
	bool bind;
	int first;
	bool notify = false;
	if (!strcmp(w[0], "bind")) {
		if (n < 2 || (strcmp(w[1], "am") && strcmp(w[1], "notify")))
			return nemo__fail(EINVAL, "nemo_ctl", "'bind %s': bind what? (am, notify)", n < 2 ? "" : w[1]);
		bind = true;
		notify = !strcmp(w[1], "notify");
		first = 2;
	} else if (!strcmp(w[0], "unbind")) {
		bind = false;
		first = 1;
	} else {
		return nemo__fail(EINVAL, "nemo_ctl", "'%s': unknown command (bind, unbind)", w[0]);
	}
	bool have_dest = false, have_id = false, have_slot = false;
	uint64_t dest = 0, id = 0, slot = 0;
	unsigned flags = 0;
	for (int i = first; i < n; i++) {
		char *eq = strchr(w[i], '=');
		if (!eq)
			return nemo__fail(EINVAL, "nemo_ctl", "'%s': expected key=value", w[i]);
		*eq = 0;
		const char *k = w[i], *v = eq + 1;
		char word[WLEN + 1];
		snprintf(word, sizeof word, "%s=%s", k, v);
		if (!strcmp(k, "slot")) {
			if ((err = number(word, v, &slot)))
				return err;
			if (slot >= NEMO_FAST_SLOTS)
				return nemo__fail(ERANGE, "nemo_ctl", "'%s': slots are 0..%u", word, NEMO_FAST_SLOTS - 1);
			have_slot = true;
		} else if (bind && !strcmp(k, "dest")) {
			if ((err = number(word, v, &dest)))
				return err;
			if (dest < d->P) {   /* an index: its current occupant */
				uint64_t s = atomic_load_explicit(&d->places[dest].status, memory_order_acquire);
				if (nemo__status_state(s) != NEMO__ST_ACTIVE)
					return nemo__fail(ESRCH, "nemo_ctl", "'%s': no place at index %llu", word,
							  (unsigned long long)dest);
				dest = nemo__make_id((unsigned)dest, nemo__status_gen(s));
			}
			have_dest = true;
		} else if (bind && !notify && (!strcmp(k, "action") || !strcmp(k, "event"))) {
			if (have_id)
				return nemo__fail(EINVAL, "nemo_ctl", "'%s': action or event given twice", word);
			if ((err = number(word, v, &id)))
				return err;
			if (id > 0x7FFFFFFFu)
				return nemo__fail(ERANGE, "nemo_ctl", "'%s': out of range", word);
			if (!strcmp(k, "event"))
				id = NEMO_AM_EVENT(id);
			have_id = true;
		} else if (bind && notify && !strcmp(k, "chan")) {
			if ((err = number(word, v, &id)))
				return err;
			if (id > NEMO_NOTIFY_CHAN_MAX)
				return nemo__fail(ERANGE, "nemo_ctl", "'%s': channels are 0..%u", word, NEMO_NOTIFY_CHAN_MAX);
			have_id = true;
		} else if (bind && !strcmp(k, "flags")) {
			if ((err = parse_flags(word, v, &flags)))
				return err;
		} else {
			return nemo__fail(EINVAL, "nemo_ctl", "'%s': unknown key for '%s%s%s' (%s)", word, w[0],
					  bind ? " " : "", bind ? w[1] : "",
					  !bind ? "slot" : notify ? "dest, chan, slot, flags"
								  : "dest, action or event, slot, flags");
		}
	}
	if (!have_slot)
		return nemo__fail(EINVAL, "nemo_ctl", "'%s': slot=S is missing", cmd);
	if (!bind) {
		if (!slots[slot])
			return nemo__fail(ENOENT, "nemo_ctl", "slot %llu is empty", (unsigned long long)slot);
		nemo_am_unbind(slots[slot]);
		slots[slot] = NULL;
		return 0;
	}
	if (!have_dest)
		return nemo__fail(EINVAL, "nemo_ctl", "'%s': dest=D is missing", cmd);
	if (!have_id)
		return nemo__fail(EINVAL, "nemo_ctl", "'%s': %s is missing", cmd, notify ? "chan=C" : "action=A or event=E");
	nemo_am_bound *b;
	err = notify ? nemo_notify_bind(dest, (uint32_t)id, flags, &b)
		     : nemo_am_bind(dest, (uint32_t)id, flags, &b);
	if (err)
		return err;
	if (slots[slot])
		nemo_am_unbind(slots[slot]);
	slots[slot] = b;
	return 0;
}

int nemo_fast(unsigned slot, uint64_t arg)
{
	if (__builtin_expect(slot >= NEMO_FAST_SLOTS, 0))
		return NEMO__FAIL(ERANGE, "slot %u: slots are 0..%u", slot, NEMO_FAST_SLOTS - 1);
	nemo_am_bound *b = slots[slot];
	if (__builtin_expect(!b, 0))
		return NEMO__FAIL(ENOENT, "slot %u is empty (nemo_ctl \"bind ... slot=%u\")", slot, slot);
	return nemo__bound_is_notify(b) ? nemo_notify_bound(b) : nemo_am_send_bound(b, arg);
}
