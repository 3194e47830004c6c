/*
 * mcast.pml - completion counting of acknowledged multicast
 * (src/mcast/mcast.c: THE ROLES, SENDS THAT RETURNED 0, WHY EXACTLY
 * ONCE, AND WHY IT COMPLETES, LIFETIME), checked with spin:
 *
 *   MV1 the multicast completes: the source's wait always ends (else an
 *       invalid end state), whatever happens to each role's message
 *       (queued, kept and delivered later, kept and dropped because its
 *       place left, refused at once because it had left, or - with
 *       -DOOM - neither sent nor kept);
 *   MV2 it completes only when every member's run happened or its
 *       failure was reported: when `done` is stored, every member ran, or
 *       its role was done by another place (it had left; a dropped kept
 *       message was reported), and a member that never left and ran no
 *       role of its own has err set (ENOMEM);
 *   MV3 exactly once: no member runs the function twice;
 *   MV4 lifetime: no role touches the multicast after the source saw done
 *       (and freed it), and nothing is left queued or kept at the end.
 *
 * THE MODEL
 *
 * Four places, all members; place 0 is the source.  One static topology
 * of four brackets, one per place (THE TOPOLOGY, topo.c):
 *
 *   Tree (default)  b0 = {head 0, gather hosted by 0, kids b1 b2},
 *                   b1 = {head 1, hosted by 1, kid b3}, b2 = {head 2},
 *                   b3 = {head 3}; the head forwards, then runs.
 *   -DDIAMOND       b0 = {head 0, tail 3, kids b1 b2}, b1 = {head 1},
 *                   b2 = {head 2}: three brackets; the head runs, then
 *                   forwards, and the tail runs in complete(b0).
 *
 * Mechanism SmAck: every role goes to its place as a message.  Each role
 * (enter, arrive, complete, finish) is one atomic step of the place
 * doing it; roles done inline go on a local list of that place and run
 * as separate steps, so other places interleave between them.  cnt[b]
 * starts at children + 1; arrive's fetch_sub is one step.
 *
 * A send (send_op) to a place that left fails at once (ESRCH): the
 * sender does the role inline.  Otherwise it is queued at the place, or
 * kept by the sender (its overflow); a kept message is later delivered,
 * or, its place having left, dropped and reported to the sender
 * (on_undelivered), which does the role inline.  With -DOOM a send may
 * also fail with ENOMEM: the role is done inline and err is set.
 * Places 1..3 may leave at any time their queue and their kept list are
 * empty (the leave's final drain handles what was queued, the overflow
 * delivers what was kept: place.pml and overflow.pml check those); a
 * place that left never runs again, and no message reaches it.
 *
 * BROKEN VARIANTS (tests/check_models.sh: must fail)
 *
 *   -DBROKEN_DROP_SILENT  a kept role message dropped because its place
 *                         left is not reported (no role done inline):
 *                         the multicast never completes (MV1)
 *   -DBROKEN_COUNT_SENDS  the sender of an ENTER counts the child's
 *                         arrival at its parent when the message is sent,
 *                         not when the child's subtree completes: done
 *                         before a member ran (MV2), and roles after the
 *                         free (MV4)
 */

#define NP 4
#define NONE 255
#define OP_ENTER 1
#define OP_COMPLETE 2
#define OP_DONE 3
#define OP_ARRIVE 4      /* local only: arrive(b) done as its own step */

#ifdef DIAMOND
#define NB 3
#define FWD_FIRST 0
#else
#define NB 4
#define FWD_FIRST 1
#endif

byte head[NB], tail[NB], host[NB], par[NB], kid0[NB], nkids[NB];
byte kids[NB];
byte cnt[NB];

byte ran[NP];          /* runs of the function, per member */
bit reported[NP];      /* a role with a run for this member was done by another place */
bit gone[NP];          /* the place left its domain */
bit done, freed, err;
bit sent_enter[NB];    /* BROKEN_COUNT_SENDS: ENTER b went as a message */

chan q[NP] = [4] of { byte, byte };            /* queued role messages: op, bracket */
chan kept[NP] = [4] of { byte, byte, byte };   /* a sender's kept messages: dest, op, bracket */

inline topology()
{
#ifdef DIAMOND
	head[0] = 0; tail[0] = 3;    host[0] = NONE; par[0] = NONE; kid0[0] = 0; nkids[0] = 2;
	head[1] = 1; tail[1] = NONE; host[1] = NONE; par[1] = 0;    kid0[1] = 0; nkids[1] = 0;
	head[2] = 2; tail[2] = NONE; host[2] = NONE; par[2] = 0;    kid0[2] = 0; nkids[2] = 0;
	kids[0] = 1; kids[1] = 2;
	cnt[0] = 3; cnt[1] = 1; cnt[2] = 1;
#else
	head[0] = 0; tail[0] = NONE; host[0] = 0; par[0] = NONE; kid0[0] = 0; nkids[0] = 2;
	head[1] = 1; tail[1] = NONE; host[1] = 1; par[1] = 0;    kid0[1] = 2; nkids[1] = 1;
	head[2] = 2; tail[2] = NONE; host[2] = 2; par[2] = 0;    kid0[2] = 0; nkids[2] = 0;
	head[3] = 3; tail[3] = NONE; host[3] = 3; par[3] = 1;    kid0[3] = 0; nkids[3] = 0;
	kids[0] = 1; kids[1] = 2; kids[2] = 3;
	cnt[0] = 3; cnt[1] = 2; cnt[2] = 1; cnt[3] = 1;
#endif
}

/* MV2 and MV3, when done is stored. */
inline check_done()
{
	k = 0;
	do
	:: k < NP ->
		assert(ran[k] == 1 || reported[k]);
		assert(ran[k] == 1 || gone[k] || err);
		k++
	:: else -> break
	od
}

/* run_at(p): the function runs only at its own place (a role done inline
 * for another place never runs it), at most once (MV3). */
inline run_at(p)
{
	if
	:: p == self ->
		ran[self]++;
		assert(ran[self] <= 1)
	:: else -> skip
	fi
}

/* A role for place `to` that another place does: its run, if any, is
 * reported (the member left, or -DOOM). */
inline report_role(op, b, to)
{
	if
	:: op == OP_ENTER && head[b] == to -> reported[to] = 1
	:: op == OP_COMPLETE && tail[b] == to -> reported[to] = 1
	:: else -> skip
	fi
}

/* send_op: ok := whether the message went (queued or kept). */
inline send_op(op, b, to)
{
	if
	:: gone[to] -> ok = 0; report_role(op, b, to)           /* ESRCH */
	:: else ->
		if
		:: q[to]!op, b; ok = 1
		:: kept[self]!to, op, b; ok = 1
#ifdef OOM
		:: err == 0 -> err = 1; ok = 0; report_role(op, b, to)   /* ENOMEM, once */
#endif
		fi
	fi
}

/* finish: done := 1 by the source's own place (DONE), or here. */
inline finish()
{
	if
	:: self == 0 -> check_done(); done = 1
	:: else ->
		send_op(OP_DONE, 0, 0);
		if
		:: !ok -> check_done(); done = 1
		:: else -> skip
		fi
	fi
}

inline dispatch_enter(c)
{
	if
	:: head[c] == self -> todo!OP_ENTER, c
	:: else ->
		send_op(OP_ENTER, c, head[c]);
		if
		:: !ok -> todo!OP_ENTER, c
		:: else ->
#ifdef BROKEN_COUNT_SENDS
			sent_enter[c] = 1;
			todo!OP_ARRIVE, par[c]
#else
			skip
#endif
		fi
	fi
}

/* One role at place self (atomic), from its list or its queue. */
inline role(op, b)
{
	assert(!freed);      /* MV4 */
	if
	:: op == OP_ENTER ->
		if :: !FWD_FIRST -> run_at(head[b]) :: else -> skip fi;
		i = 0;
		do
		:: i < nkids[b] -> dispatch_enter(kids[kid0[b] + i]); i++
		:: else -> break
		od;
		if :: FWD_FIRST -> run_at(head[b]) :: else -> skip fi;
		todo!OP_ARRIVE, b
	:: op == OP_ARRIVE ->
		if
		:: b == NONE -> finish()
		:: else ->
			cnt[b]--;
			if
			:: cnt[b] == 0 ->
				at = (tail[b] != NONE -> tail[b] : host[b]);
				if
				:: at == NONE || at == self -> todo!OP_COMPLETE, b
				:: else ->
					send_op(OP_COMPLETE, b, at);
					if :: !ok -> todo!OP_COMPLETE, b :: else -> skip fi
				fi
			:: else -> skip
			fi
		fi
	:: op == OP_COMPLETE ->
		run_at(tail[b]);
#ifdef BROKEN_COUNT_SENDS
		if
		:: sent_enter[b] -> skip      /* counted when its ENTER was sent */
		:: else -> todo!OP_ARRIVE, par[b]
		fi
#else
		todo!OP_ARRIVE, par[b]
#endif
	:: op == OP_DONE -> check_done(); done = 1
	fi
}

/* Do every role on the list, one step each. */
inline drain_todo()
{
	do
	:: atomic { todo?[op, b] -> todo?op, b; role(op, b) }
	:: empty(todo) -> break
	od
}

proctype place(byte self)
{
	chan todo = [8] of { byte, byte };
	byte op, b, to, i, k, at;
	bit ok;
	if
	:: self == 0 ->
		/* The source: start the multicast (the root's head is itself). */
		atomic { dispatch_enter(0) };
		drain_todo()
	:: else -> skip
	fi;
	do
	:: atomic { q[self]?[op, b] -> q[self]?op, b; role(op, b) };
		drain_todo()
	:: atomic {
		kept[self]?[to, op, b] -> kept[self]?to, op, b;
		if
		:: !gone[to] -> q[to]!op, b             /* delivered */
		:: else ->                              /* dropped: reported to this place */
#ifdef BROKEN_DROP_SILENT
			skip
#else
			report_role(op, b, to);
			todo!op, b
#endif
		fi };
		drain_todo()
	:: atomic { self != 0 && empty(q[self]) && empty(kept[self]) -> gone[self] = 1 };
		break
	:: self == 0 && done -> break
	:: atomic { self != 0 && done && empty(q[self]) && empty(kept[self]) } -> break
	od
}

init
{
	byte p, k;
	topology();
	atomic {
		p = 0;
		do
		:: p < NP -> run place(p); p++
		:: else -> break
		od
	};
	done == 1;
	freed = 1;             /* the source released the multicast */
	_nr_pr == 1;           /* every place ended */
	k = 0;
	do
	:: k < NP -> assert(empty(q[k]) && empty(kept[k])); k++
	:: else -> break
	od
}
