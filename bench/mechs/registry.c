/*
 * registry.c - every mechanism nemo-bench knows, in the order suites run
 * and list them: the baselines, the events layer (with its peer ck-ec),
 * the messaging layers (with their peer ck-ring).  A suite asks for the
 * mechanisms of its role (mech.h); a new mechanism goes into its family's
 * table in mechs/, or a new family's table goes here.
 */
#define _GNU_SOURCE
#include "mech.h"

#include <string.h>

static const bench_mech *const *const families[] = { mechs_baseline, mechs_events, mechs_messaging };

#define FOR_EACH_MECH(m)                                                          \
	for (size_t f_ = 0; f_ < sizeof families / sizeof families[0]; f_++)        \
		for (const bench_mech *const *p_ = families[f_]; (m = *p_) != NULL; p_++)

bool mech_plays(const bench_mech *m, enum mech_role role)
{
	switch (role) {
	case ROLE_UNICAST:
		return m->unicast.rx_wait != NULL;
	case ROLE_BROADCAST:
		return m->broadcast.rx_wait != NULL;
	case ROLE_THROUGHPUT:
		return m->throughput.receiver != NULL;
	}
	return false;
}

const bench_mech *mech_find(enum mech_role role, const char *name)
{
	const bench_mech *m;
	FOR_EACH_MECH(m)
		if (mech_plays(m, role) && strcmp(m->name, name) == 0)
			return m;
	return NULL;
}

int mech_all(enum mech_role role, const bench_mech **out, int max)
{
	const bench_mech *m;
	int n = 0;
	FOR_EACH_MECH(m)
		if (n < max && mech_plays(m, role))
			out[n++] = m;
	return n;
}

void mech_list(enum mech_role role, FILE *out)
{
	const bench_mech *m;
	FOR_EACH_MECH(m) {
		if (!mech_plays(m, role))
			continue;
		fprintf(out, "    %-20s [", m->name);
		if (role == ROLE_THROUGHPUT) {
			/* A stream's receiver always polls. */
			fprintf(out, "%s] %s\n", scenario_name(SC_POLLING), m->throughput.summary);
			continue;
		}
		const mech_wake *h = mech_wake_of(m, role);
		const char *sep = "";
		for (int i = 0; i < SC_COUNT; i++)
			if (h->scenarios & (1u << i)) {
				fprintf(out, "%s%s", sep, scenario_name(1u << i));
				sep = ",";
			}
		fprintf(out, "] %s\n", h->summary);
	}
}
