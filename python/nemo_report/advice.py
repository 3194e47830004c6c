"""What to use on this machine.

For every scenario the loaded documents cover, one piece of advice a
programmer can act on: which nemo API to use and with which wait policy
(`NEMO_WAIT`, or the per-object / per-place setter), why (the measured
numbers, with the rows they come from), and when nemo does not help.

Every number in these texts is read from the rows passed in.  The only
constants here are names (MECHANISMS: the mechanism names nemo-bench
emits, mapped to what a programmer writes) and SAME, the ratio under which
a difference is not worth acting on.  A scenario no document covers is
said to be not measured, with the nemo-bench command that measures it.

Ratios are taken only between rows of one document (one run): for each
suite the advice reads the most recent document of that suite.

Texts are plain strings; `code` is marked with backticks (html.py turns it
into <code>, `nemo-report advice` prints it as it is).
"""
import statistics

from . import advice_loop, advice_mcast, advice_rr, analysis, mpi, papers
from .advice_base import (SAME, _compare, _item, _lat, _not_measured, _p99, _ratio,  # noqa: F401
                          fmt_gap, fmt_ns, fmt_rate, fmt_x, latest, verdict)

ADAPTIVE = "adaptive"

# ---------------------------------------------------------------------------
# The one table: mechanism names in the JSON -> the API a programmer uses.
# Names as nemo-bench emits them: every mechanism is defined once, in
# bench/mechs/ (baseline.c, events.c, messaging.c: unicast, broadcast and
# throughput), and the preload suite's programs in bench/suites/preload.c.
# `kind`: nemo (an API of this library), baseline (what a program uses
# without nemo), peer (the best-known user-space library of the kind),
# floor (the hardware, no API), program (the preload suite's unmodified
# programs).  `policy`: where that API takes its wait policy
# besides NEMO_WAIT.  Keys (suite, name) and (suite, name, scenario)
# override a name's entry where the suite measures another call.
# ---------------------------------------------------------------------------
MECHANISMS = {
    "spin": {"kind": "floor", "api": "a load loop on one cache line, the store being the signal "
                                     "(the hardware's floor, no API)"},
    "spin-rtt": {"kind": "floor", "api": "a cache-line ping-pong (half its round trip)"},
    "futex": {"kind": "baseline", "api": "raw `futex` (`FUTEX_WAIT` / `FUTEX_WAKE`)"},
    "condvar": {"kind": "baseline", "api": "glibc's `pthread_cond_wait` / `pthread_cond_signal`"},
    "eventfd": {"kind": "baseline", "api": "an `eventfd` (`read` / `write`)"},
    "pipe": {"kind": "baseline", "api": "a `pipe` (`read` / `write`)"},
    "signal-running": {"kind": "baseline", "api": "a plain signal (`tgkill`) to the computing thread"},
    "signal-blocked": {"kind": "baseline", "api": "a signal (`tgkill`) to a thread in `sigwaitinfo`"},
    "io_uring-msg-ring": {"kind": "baseline", "api": "`io_uring`'s `IORING_OP_MSG_RING`"},
    "ck-ec": {"kind": "peer", "api": "Concurrency Kit's `ck_ec32` event count"},
    "ck-ring": {"kind": "peer", "api": "Concurrency Kit's single-producer `ck_ring`"},
    "nemo-event": {"kind": "nemo", "api": "`nemo_event_post` / `nemo_event_wait`",
                   "policy": "`nemo_event_init`'s policy argument"},
    "nemo-cond": {"kind": "nemo", "api": "`nemo_cond_signal` / `nemo_cond_wait` (the drop-in for "
                                         "`pthread_cond_t`)",
                  "policy": "`nemo_cond_set_policy`"},
    "nemo-cond-kick": {"kind": "nemo", "api": "`nemo_cond_*` in kick mode (`nemo_cond_set_kick(cv, true)`: "
                                              "the sleeper holds real-time priority)",
                       "policy": "`nemo_cond_set_policy`"},
    "nemo-am": {"kind": "nemo", "api": "`nemo_am_send` to a place waiting in `nemo_place_wait`",
                "policy": "`nemo_place_set_policy`"},
    "nemo-notify": {"kind": "nemo", "api": "`nemo_notify` to a place waiting in `nemo_place_wait`",
                    "policy": "`nemo_place_set_policy`"},
    "nemo-am-each": {"kind": "nemo", "api": "one `nemo_am_send` per message (`NEMO_MORE` on all but a "
                                            "batch's last)"},
    "nemo-am-bound": {"kind": "nemo", "api": "one `nemo_am_send_bound` per message, each published "
                                             "(`nemo_am_bind` once: the curried path)"},
    "condvar-handoff": {"kind": "program", "api": "an unmodified program handing a token between two "
                                                  "threads through one mutex and one condvar "
                                                  "(`nemo-handoff`)"},
    "python-handoff": {"kind": "program", "api": "unmodified CPython threads handing a token through "
                                                 "`threading.Lock`s (semaphores, and every switch "
                                                 "goes through the GIL's condvars)"},
    "pool": {"kind": "program", "api": "an unmodified thread pool: one producer, workers fed through "
                                       "one mutex and two condvars (`nemo-pool`)"},
    ("broadcast", "spin"): {"api": "K waiters polling one word, the broadcast being one store "
                                   "(the floor, no API)"},
    ("broadcast", "condvar"): {"api": "glibc's `pthread_cond_broadcast`"},
    ("broadcast", "futex"): {"api": "raw `futex` (`FUTEX_WAKE` of all)"},
    ("broadcast", "ck-ec"): {"api": "Concurrency Kit's `ck_ec32_inc` to K waiters in `ck_ec32_wait`"},
    ("broadcast", "nemo-cond"): {"api": "`nemo_cond_broadcast`"},
    ("broadcast", "nemo-event"): {"api": "a manual-reset `nemo_event` (`NEMO_EVENT_MANUAL_RESET`: one "
                                         "`nemo_event_post` releases every waiter)"},
    ("broadcast", "nemo-am"): {"api": "`nemo_am_broadcast` to places waiting in `nemo_place_wait`"},
    ("unicast", "nemo-am", "busy"): {"api": "`nemo_am_send` to a place in interrupt mode "
                                            "(`nemo_place_set_interrupts(true)`, or `NEMO_PLACE_INTERRUPTS` "
                                            "at `nemo_place_join`): the handler runs from a signal in "
                                            "the computing thread"},
    ("unicast", "nemo-notify", "busy"): {"api": "`nemo_notify` to a place in interrupt mode "
                                                "(`nemo_place_set_interrupts(true)`)"},
    ("throughput", "nemo-am"): {"api": "`nemo_am_send_batch` to a place that polls with `nemo_poll` "
                                       "(one call, one publish per batch)"},
    # nemo-bench multicast: nemo_multicast per topology and mechanism (nemo/mcast.h)
    **{f"{t}-{m}": {"kind": "nemo", "api": f"`nemo_multicast` on a {t} topology with {m} "
                    f"(`NEMO_MCAST_{t.upper()}`, `NEMO_MCAST_{m.upper()}`)"}
       for t in ("flat", "tree", "diamond") for m in ("smack", "help", "skip")},
    "mcast-constants": {"kind": "floor", "api": "the per-operation costs the multicast simulator takes"},
    # nemo-bench event-loop and request-reply (advice_loop.py, advice_rr.py)
    "nemo-place-fd": {"kind": "nemo", "api": "`nemo_place_fd` in an epoll loop, `nemo_poll` when it is readable"},
    "nemo-place-wait": {"kind": "nemo", "api": "`nemo_place_wait` (the default policy)"},
    "eventfd-ring": {"kind": "baseline", "api": "a ring and an `eventfd` written after every push "
                                                "(`epoll_wait` / `read` to wait)"},
    "unix-socket": {"kind": "baseline", "api": "a Unix stream socket pair (`read` / `write`)"},
    ("request-reply", "nemo-am"): {"api": "`nemo_am_send` answered by `nemo_am_reply`, both sides in "
                                          "`nemo_place_wait` (across processes: a shared domain, nemo/xproc.h)"},
}

PROGRAMS = (("condvar-handoff", "An unmodified pthread condvar program: a hand-off between two threads"),
            ("pool", "An unmodified thread pool on pthread condvars"),
            ("python-handoff", "Unmodified CPython threads"))


def mech(name, suite=None, scenario=None):
    """MECHANISMS' entry for a row: kind, api, policy (where the API takes
    its policy), the suite's and scenario's overrides applied."""
    m = {"kind": "nemo" if name.startswith("nemo-") else "baseline", "api": f"`{name}`", "policy": None}
    m.update(MECHANISMS.get(name, {}))
    m.update(MECHANISMS.get((suite, name), {}))
    m.update(MECHANISMS.get((suite, name, scenario), {}))
    return m


# ---------------------------------------------------------------- numbers

def _vm_note(run, base="futex"):
    m = run.machine if run else {}
    if m.get("virtualized"):
        hv = m.get("hypervisor") or "a hypervisor"
        return (f"This machine is a VM ({hv}): waking a sleeping vCPU goes through the hypervisor, "
                f"which bounds every mechanism alike, so nemo cannot beat {base} here.")
    return ("The wake-up of a sleeper is the kernel's (a futex wake and the scheduler): nemo cannot "
            "make it cheaper, only avoid it by polling.")


# ---------------------------------------------------------------- unicast

def _rows(run, scenario):
    return [r for r in run.rows if r.get("scenario") == scenario and "latency_ns" in r]


def _find(rows, *names):
    for n in names:
        for r in rows:
            if r["mechanism"] == n:
                return r
    return None


def _label(r):
    return f"{r['mechanism']}/{r['scenario']}"


def _fastest(rows, kinds, key=analysis.p50):
    c = [r for r in rows if mech(r["mechanism"], "unicast", r["scenario"])["kind"] in kinds]
    return min(c, key=key) if c else None


def _others(rows, best):
    o = [r for r in rows if r is not best and analysis.is_nemo(r["mechanism"])]
    if not o:
        return ""
    return (" Other nemo APIs measured here: " +
            ", ".join(f"{_label(r)} {fmt_ns(analysis.p50(r))}" for r in sorted(o, key=analysis.p50)) + ".")


def _policy_line(pol_run):
    """Whether the default policy catches a short wait polling: adaptive's
    latency at the smallest gap of the policy suite next to spin's (medians
    over repeats)."""
    t = policy_table(pol_run.rows) if pol_run is not None else []
    if not t or ADAPTIVE not in t[0]["policies"] or "spin" not in t[0]["policies"]:
        return ""
    line = t[0]
    ad, sp = line["policies"][ADAPTIVE]["latency"], line["policies"]["spin"]["latency"]
    blk = line["policies"].get("block", {}).get("latency")
    said = (f"at a {fmt_gap(line['gap_ns'])} gap the policy suite measured adaptive at p50 {fmt_ns(ad)} "
            f"against spin's {fmt_ns(sp)}" + (f" and block's {fmt_ns(blk)}" if blk else "") +
            f" (nemo-event, median of {line['repeats']} repeats)")
    # Polled or slept: nearer spin's latency than block's (on a log scale),
    # or, without a block row, within 2x of spin's.
    polled = ad * ad < sp * blk if blk else ad <= 2 * sp
    if not polled:
        return (f" The default policy did not catch it polling: {said}; force `NEMO_WAIT=spin` for "
                "such a receiver.")
    return f" The default policy polls too: {said}."


UNICAST_RUN = "nemo-bench unicast"


def unicast_polling(run, pol_run=None):
    key, title = "unicast-polling", "Hand-off to a receiver that is polling (waiting on a CPU of its own)"
    if run is None:
        return _not_measured(key, title, UNICAST_RUN)
    rows = _rows(run, "polling")
    best = _fastest(rows, ("nemo",))
    if best is None:
        return _not_measured(key, title, f"{UNICAST_RUN} --scenarios polling",
                             "No nemo row was measured polling." if rows else "")
    m = mech(best["mechanism"], "unicast", "polling")
    setter = f" or {m['policy']} with `NEMO_WAIT_SPIN`" if m.get("policy") else ""
    use = (f"{m['api']}, the receiver polling: `NEMO_WAIT=spin`{setter} when it has a CPU of its "
           "own. The default (`adaptive`) polls for up to the cost of blocking it has learned, so a "
           "signal that comes sooner is caught the same way.")
    why = [f"{_label(best)} {_lat(best)}"]
    floor = _find(rows, "spin")
    if floor:
        why.append(f"{fmt_x(_ratio(analysis.p50(best), analysis.p50(floor)))} the cache-line floor "
                   f"(spin/polling p50 {fmt_ns(analysis.p50(floor))})")
    sleeper = _find(_rows(run, "blocked"), "condvar", "futex")
    v = "info"
    if sleeper:
        r = _ratio(analysis.p50(sleeper), analysis.p50(best))
        v = verdict(r)
        who = "glibc's condvar" if sleeper["mechanism"] == "condvar" else "a raw futex"
        why.append(f"{_compare(analysis.p50(best), analysis.p50(sleeper), who + ', whose receiver sleeps')} "
                   f"({_label(sleeper)} {_lat(sleeper)}): it cannot poll")
    peer = _find(rows, "ck-ec")
    caveat = []
    if peer:
        rp = _ratio(analysis.p50(peer), analysis.p50(best))
        why.append(f"the peer that polls too, {_label(peer)}, has p50 {fmt_ns(analysis.p50(peer))} "
                   f"(nemo {fmt_x(rp)} its speed)")
        if verdict(rp) == "worse":
            caveat.append(f"Concurrency Kit's `ck_ec32` polls faster here ({_label(peer)} p50 "
                          f"{fmt_ns(analysis.p50(peer))} against {fmt_ns(analysis.p50(best))}).")
    slept = _find(_rows(run, "blocked"), best["mechanism"])
    if best.get("cpu_ns_per_event") is not None:
        c = (f"Polling costs the receiver its CPU while it waits: {_label(best)} used "
             f"{fmt_ns(best['cpu_ns_per_event'])} of CPU per event")
        if slept and slept.get("cpu_ns_per_event") is not None:
            c += f", against {fmt_ns(slept['cpu_ns_per_event'])} asleep ({_label(slept)})"
        caveat.append(c + ". Do not force `spin` where threads outnumber CPUs: keep the default, "
                          "which bounds the poll and stops polling where it cannot pay.")
    return _item(key, title, use, "; ".join(why) + "." + _others(rows, best) + _policy_line(pol_run),
                 " ".join(caveat), v)


def unicast_sleeping(run, scenario="blocked"):
    loaded = scenario == "loaded"
    key = f"unicast-{scenario}"
    title = ("Wake-up of a sleeping receiver whose CPU is busy with another thread" if loaded
             else "Wake-up of a receiver that is sleeping (blocked in the kernel)")
    if run is None:
        return _not_measured(key, title, UNICAST_RUN)
    rows = _rows(run, scenario)
    best = _fastest(rows, ("nemo",))
    base = _fastest(rows, ("baseline", "peer"))
    if best is None:
        return _not_measured(key, title, f"{UNICAST_RUN} --scenarios {scenario}",
                             f"No nemo row was measured {scenario}." if rows else "")
    m = mech(best["mechanism"], "unicast", scenario)
    why = [f"{_label(best)} {_lat(best)}"]
    v = "info"
    if base:
        r = _ratio(analysis.p50(base), analysis.p50(best))
        v = verdict(r)
        why.append(f"the best without nemo, {_label(base)}, {_lat(base)}: nemo is "
                   f"{_compare(analysis.p50(best), analysis.p50(base), base['mechanism'])} at the median, "
                   f"{_compare(_p99(best), _p99(base), base['mechanism'])} at p99")
        cv = _find(rows, "condvar")
        if cv is not None and cv is not base:
            why.append(f"glibc's condvar ({_label(cv)}) {_lat(cv)}")
    kick = _find(rows, "nemo-cond-kick")
    cv = _find(rows, "condvar")
    kick_helps = False
    if loaded and kick is not None and cv is not None:
        rk = _ratio(_p99(cv), _p99(kick))
        kick_helps = verdict(rk) == "helps"
        why.append(f"kick mode ({_label(kick)}) p99 {fmt_ns(_p99(kick))} against {_label(cv)} p99 "
                   f"{fmt_ns(_p99(cv))}: {fmt_x(rk)}")
    caveat = ""
    if v == "helps":
        use = (f"{m['api']}: it wakes a sleeping receiver sooner than anything else measured here. "
               "Any policy works for a receiver that is already asleep; `NEMO_WAIT=block` "
               f"{'(or ' + m['policy'] + ') ' if m.get('policy') else ''}saves the poll where waits are "
               "always long.")
    else:
        use = ("Nothing to gain from nemo for a receiver that is already asleep: keep "
               "`pthread_cond_*` or `futex`, or use nemo's objects with the default policy for the "
               "waits that end soon (they poll a bounded time first, then sleep like these).")
        caveat = ((f"nemo does not help here: the median's ratio is within {SAME}x. " if v == "same" else
                   "nemo is slower here at the median. ") + _vm_note(run, base["mechanism"] if base else "futex"))
    if kick_helps:
        use += (" Where the waiter's CPU is busy with other threads and its tail matters, kick mode "
                "(`nemo_cond_set_kick(cv, true)`) cuts the p99.")
    elif loaded and kick is not None and cv is not None:
        caveat += " Kick mode (`nemo_cond_set_kick`) does not cut the tail here."
    return _item(key, title, use, "; ".join(why) + "." + _others(rows, best), caveat.strip(), v)


def unicast_running(run):
    key, title = "unicast-busy", "Hand-off to a receiver that is running (computing, not waiting)"
    if run is None:
        return _not_measured(key, title, UNICAST_RUN)
    rows = _rows(run, "busy")
    best = _fastest(rows, ("nemo",))
    if best is None:
        return _not_measured(key, title, f"{UNICAST_RUN} --scenarios busy",
                             "No nemo row was measured busy." if rows else "")
    m = mech(best["mechanism"], "unicast", "busy")
    base = _find(rows, "signal-running")
    why = [f"{_label(best)} {_lat(best)} (to handler entry)"]
    v = "info"
    caveat = ""
    if base:
        r = _ratio(analysis.p50(base), analysis.p50(best))
        v = verdict(r)
        why.append(f"{_label(base)} {_lat(base)}: nemo is "
                   f"{_compare(analysis.p50(best), analysis.p50(base), base['mechanism'])}")
    polled = _find(_rows(run, "polling"), best["mechanism"])
    if v != "helps":
        caveat = ("nemo does not deliver to a running thread faster than a plain signal: both interrupt it "
                  "with one. Use interrupt mode for what it adds (handlers by action id, order, no lost "
                  "message), not for speed.")
        if polled:
            caveat += (f" A thread that can reach a poll point (`nemo_poll`) often gets the message "
                       f"much sooner: {_label(polled)} p50 {fmt_ns(analysis.p50(polled))}.")
    use = (f"{m['api']}. The policy does not apply: the receiver is not waiting.")
    return _item(key, title, use, "; ".join(why) + "." + _others(rows, best), caveat, v)


# ---------------------------------------------------------------- broadcast

BROADCAST_RUN = "nemo-bench broadcast"


def _blabel(r):
    return f"{r['mechanism']}/{r['scenario']} K={r['waiters']}"


def broadcast(run):
    """One item per scenario (polling, blocked), at the largest K measured."""
    titles = {"polling": "Broadcast to K waiters that are polling",
              "blocked": "Broadcast to K waiters that are asleep"}
    out = []
    rows = analysis.broadcast_rows([run]) if run is not None else []
    for scen in ("polling", "blocked"):
        key, title = f"broadcast-{scen}", titles[scen]
        rs = [r for r in rows if r["scenario"] == scen]
        nemo = [r for r in rs if mech(r["mechanism"], "broadcast")["kind"] == "nemo"]
        if not nemo:
            out.append(_not_measured(key, title, f"{BROADCAST_RUN} --scenarios {scen}",
                                     f"No nemo row was measured {scen}." if rs else ""))
            continue
        # The largest K whose rows had a CPU per thread, if that is a
        # broadcast at all; else the largest K (said to be oversubscribed).
        fair = [r["waiters"] for r in nemo if not r.get("oversubscribed")]
        k = max(fair) if fair and max(fair) > 1 else max(r["waiters"] for r in nemo)
        at = [r for r in rs if r["waiters"] == k]
        best = min((r for r in at if r in nemo), key=lambda r: r["last_ns"]["p50"])
        base = [r for r in at if mech(r["mechanism"], "broadcast")["kind"] in ("baseline", "peer")]
        bbest = min(base, key=lambda r: r["last_ns"]["p50"]) if base else None
        m = mech(best["mechanism"], "broadcast")
        pol = best.get("policy")
        title = (f"Broadcast to {k} waiter{'s' if k > 1 else ''} that {'are' if k > 1 else 'is'} "
                 f"{'polling' if scen == 'polling' else 'asleep'}")
        use = m["api"] + (f", the waiters with `NEMO_WAIT={pol}`" if pol else "") + "."
        why = [f"{_blabel(best)}: last waiter {_lat(best, 'last_ns')}, first p50 "
               f"{fmt_ns(best['first_ns']['p50'])}"]
        floor = analysis.broadcast_floor(best)
        if floor:
            why.append(f"the last waiter is {fmt_x(best['last_ns']['p50'] / floor)} the one-way "
                       f"spin floor ({fmt_ns(floor)})")
        v = "info"
        caveat = []
        if bbest is not None:
            r = _ratio(bbest["last_ns"]["p50"], best["last_ns"]["p50"])
            v = verdict(r)
            why.append(f"the best without nemo, {_blabel(bbest)}, last waiter {_lat(bbest, 'last_ns')}: nemo is "
                       f"{_compare(best['last_ns']['p50'], bbest['last_ns']['p50'], bbest['mechanism'])}")
            cv = _find(at, "condvar")
            if cv is not None and cv is not bbest:
                why.append(f"{_blabel(cv)} last waiter "
                           f"{_lat(cv, 'last_ns')}")
            if v != "helps":
                caveat.append(f"nemo does not help here: the ratio is within {SAME}x."
                              if v == "same" else "nemo is slower here.")
                if scen == "blocked":
                    caveat.append(_vm_note(run, bbest["mechanism"]))
        spin = _find(at, "spin")
        if spin is not None and bbest is None:
            why.append(f"the floor, {_blabel(spin)}, last waiter p50 {fmt_ns(spin['last_ns']['p50'])}")
        if best.get("oversubscribed"):
            caveat.append(f"At K={k} waiters shared CPUs (oversubscribed): the row says more about the "
                          "scheduler than about nemo.")
        others = sorted((r for r in nemo if r["waiters"] == k and r is not best),
                        key=lambda r: r["last_ns"]["p50"])
        tail = (" Other nemo APIs here: " + ", ".join(f"{_blabel(r)} {fmt_ns(r['last_ns']['p50'])}"
                                                      for r in others) + ".") if others else ""
        nr = [x for x in (run.config.get("not_run") or []) if isinstance(x, dict) and x.get("scenario") == scen]
        if nr:
            ks = ", ".join(str(x.get("waiters")) for x in nr)
            caveat.append(f"K = {ks} {'was' if len(nr) == 1 else 'were'} not run {scen}: "
                          f"{nr[0].get('reason', 'too few CPUs')}.")
        out.append(_item(key, title, use, "; ".join(why) + "." + tail, " ".join(caveat), v))
    return out


# ---------------------------------------------------------------- throughput

def throughput(run):
    key, title = "throughput", "A stream of messages from one thread to another (throughput)"
    if run is None:
        return [_not_measured(key, title, "nemo-bench throughput")]
    s = [x for x in analysis.throughput_summary(analysis.throughput_rows([run]))]
    out = []
    batches = sorted({x["batch"] for x in s})
    for batch in batches:
        xs = {x["mechanism"]: x for x in s if x["batch"] == batch}
        best = max((x for x in xs.values() if mech(x["mechanism"], "throughput")["kind"] == "nemo"),
                   key=lambda x: x["p50"], default=None)
        if best is None:
            out.append(_not_measured(key, title, "nemo-bench throughput --mechanisms nemo-am,ck-ring"))
            continue
        m = mech(best["mechanism"], "throughput")
        use = f"{m['api']}; the receiver polls, so no wake-up is needed."
        why = [f"{best['mechanism']} (batch {batch}) moves {fmt_rate(best['p50'])} messages/s "
               f"(median interval; {fmt_rate(best['min'])} - {fmt_rate(best['max'])}), "
               f"{best['kicks_per_msg']:.4f} kicks per message"]
        v, caveat = "info", ""
        if best["vs_baseline"] is not None:
            v = verdict(best["vs_baseline"])
            base = xs.get(best["baseline"])
            why.append(f"{fmt_x(best['vs_baseline'])} {best['baseline']} "
                       f"({fmt_rate(base['p50'] if base else None)}/s)")
            if v != "helps":
                caveat = (f"nemo does not move more messages than {best['baseline']} here (within {SAME}x)."
                          if v == "same" else f"{best['baseline']} moves more messages here.")
        each = xs.get("nemo-am-each")
        if each is not None and each is not best and each["vs_baseline"] is not None:
            why.append(f"one call per message (nemo-am-each) moves "
                       f"{fmt_rate(each['p50'])}/s, {fmt_x(each['vs_baseline'])} {each['baseline']}")
            if verdict(each["vs_baseline"]) == "worse":
                caveat = (caveat + " Send in batches: one `nemo_am_send` per message is slower than "
                          f"{each['baseline']} here.").strip()
        out.append(_item(f"{key}-b{batch}", title + (f", batches of {batch}" if len(batches) > 1 else ""),
                         use, "; ".join(why) + ".", caveat, v))
    return out or [_not_measured(key, title, "nemo-bench throughput")]


# ---------------------------------------------------------------- preload

PRELOAD_RUN = "nemo-bench preload"


def preload_modes(run):
    """Per program: {mode: summary line}, glibc first, nemo-default next,
    then the policies in the order of the document's config."""
    s = analysis.preload_summary(analysis.preload_rows([run])) if run is not None else []
    out = {}
    for x in s:
        out.setdefault(x["program"], {})[x["mode"]] = x
    return out


def mode_order(modes):
    rest = sorted(m for m in modes if m not in (analysis.PRELOAD_BASELINE, analysis.PRELOAD_DEFAULT))
    return [m for m in (analysis.PRELOAD_BASELINE, analysis.PRELOAD_DEFAULT) if m in modes] + rest


def preload(run):
    out = []
    progs = preload_modes(run)
    skipped = {x.get("mechanism") or x.get("program"): x.get("reason")
               for x in ((run.config.get("skipped") or []) if run else []) if isinstance(x, dict)}
    for prog, title in PROGRAMS:
        key = f"preload-{prog}"
        modes = progs.get(prog)
        d = modes.get(analysis.PRELOAD_DEFAULT) if modes else None
        if d is None or d["vs_glibc"] is None:
            why = f"nemo-bench skipped it: {skipped[prog]}." if prog in skipped else ""
            out.append(_not_measured(key, title, f"{PRELOAD_RUN} --mechanisms {prog}", why))
            continue
        unit = d["unit"]
        v = verdict(d["vs_glibc"])
        why = [f"{prog}/{analysis.PRELOAD_DEFAULT} (no settings) runs {fmt_rate(d['p50'])} {unit}/s "
               f"against {fmt_rate(d['baseline_p50'])} with glibc ({prog}/glibc): {fmt_x(d['vs_glibc'])} "
               f"(median of {d['rounds']} rounds)"]
        others = [modes[m] for m in mode_order(modes)
                  if m not in (analysis.PRELOAD_BASELINE, analysis.PRELOAD_DEFAULT)
                  and modes[m]["vs_glibc"] is not None]
        if others:
            why.append("with a policy forced: " + ", ".join(
                f"`NEMO_WAIT={x['nemo_wait'] or x['mode'][5:]}` {fmt_x(x['vs_glibc'])}" for x in others))
        bestp = max(others, key=lambda x: x["vs_glibc"], default=None)
        better = bestp is not None and verdict(_ratio(bestp["vs_glibc"], d["vs_glibc"])) == "helps"
        policy_tip = ""
        if better:
            pol = bestp["nemo_wait"] or bestp["mode"][5:]
            policy_tip = (f" `NEMO_WAIT={pol}` did better still here ({fmt_x(bestp['vs_glibc'])} glibc, "
                          f"{fmt_x(bestp['vs_glibc'] / d['vs_glibc'])} the default).")
        caveat = ""
        if v == "helps":
            use = ("`LD_PRELOAD=libnemo-preload.so`, no other setting: the default policy (`adaptive`) "
                   "is what this row measured." + policy_tip)
        elif v == "same":
            use = ("Preloading changes nothing for this program here; `LD_PRELOAD=libnemo-preload.so` "
                   "is safe but not worth it." + policy_tip)
            caveat = f"nemo does not help here: {fmt_x(d['vs_glibc'])} glibc is within {SAME}x."
        else:
            use = "Do not preload this program on this machine: it runs slower under the interposer." + policy_tip
            caveat = f"nemo is slower here: {fmt_x(d['vs_glibc'])} glibc."
        if not d["interposed"]:
            caveat += " Its condvar calls were not interposed."
        out.append(_item(key, title, use, "; ".join(why) + ".", caveat.strip(), v))
    return out


# ---------------------------------------------------------------- policy

def policy_rows(runs):
    return [r for run in runs if run.suite == "policy" for r in run.rows if "gap_ns" in r]


def policy_table(rows):
    """Per gap (ascending): every policy's median over repeats of latency
    p50 and receiver CPU per event; the best fixed policy (least latency +
    CPU); adaptive's cost (latency + CPU) over the best's, and its latency
    and CPU ratios against the fixed policy it resembles among those within
    1.3x of the best cost (nemo-bench policy's own rule: near the break-even
    gap spin and block cost the same with opposite profiles)."""
    cells, order = {}, []
    for r in rows:
        if "gap_ns" not in r:
            continue
        pol = r.get("policy") or r["scenario"]
        if pol not in order:
            order.append(pol)
        cells.setdefault((r["gap_ns"], pol), []).append(r)
    out = []
    for g in sorted({g for g, _ in cells}):
        med = {}
        for p in order:
            rs = cells.get((g, p))
            if rs:
                med[p] = {"latency": statistics.median(analysis.p50(r) for r in rs),
                          "cpu": statistics.median(r.get("cpu_ns_per_event", 0.0) for r in rs),
                          "repeats": len(rs)}
        line = {"gap_ns": g, "policies": med, "repeats": max(x["repeats"] for x in med.values())}
        fixed = [p for p in med if p != ADAPTIVE]
        cost = {p: med[p]["latency"] + med[p]["cpu"] for p in med}
        if fixed:
            best = min(fixed, key=lambda p: cost[p])
            line["best"] = best
            if ADAPTIVE in med:
                ad = med[ADAPTIVE]
                match = best
                rl = ad["latency"] / max(med[best]["latency"], 1)
                rc = ad["cpu"] / max(med[best]["cpu"], 1)
                for p in fixed:
                    if cost[p] > 1.3 * cost[best]:
                        continue
                    lr, cr = ad["latency"] / max(med[p]["latency"], 1), ad["cpu"] / max(med[p]["cpu"], 1)
                    if max(lr, cr) < max(rl, rc):
                        match, rl, rc = p, lr, cr
                line.update(matched=match, latency_ratio=rl, cpu_ratio=rc,
                            cost_ratio=cost[ADAPTIVE] / max(cost[best], 1))
        out.append(line)
    return out


def adaptive_verdict(table):
    """One line on the default policy against the best fixed policy, per
    gap; None when adaptive or every fixed policy is missing."""
    lines = [x for x in table if "cost_ratio" in x]
    if not lines:
        return None
    span = (f"{fmt_gap(lines[0]['gap_ns'])} to {fmt_gap(lines[-1]['gap_ns'])}"
            if len(lines) > 1 else fmt_gap(lines[0]["gap_ns"]))
    worst = max(lines, key=lambda x: x["cost_ratio"])
    loses = [x for x in lines if round(x["cost_ratio"], 2) >= SAME]
    if not loses:
        text = (f"The default policy (adaptive) is within {SAME}x of the best fixed policy's cost "
                f"(latency + CPU per event) at every gap measured ({span}): worst "
                f"{fmt_x(worst['cost_ratio'])} at {fmt_gap(worst['gap_ns'])}.")
    else:
        text = (f"The default policy (adaptive) is within {fmt_x(worst['cost_ratio'])} of the best "
                f"fixed policy's cost (latency + CPU per event) at every gap measured ({span}); it "
                f"loses most at {fmt_gap(worst['gap_ns'])} ({fmt_x(worst['cost_ratio'])} {worst['best']}'s "
                f"cost), and costs {SAME}x or more at " + ", ".join(fmt_gap(x["gap_ns"]) for x in loses) + ".")
    over = [x for x in lines if x["latency_ratio"] > 2 or x["cpu_ratio"] > 2]
    if over:
        text += (" It breaks the documented bound (2x the best fixed policy on latency and on CPU) at " +
                 ", ".join(f"{fmt_gap(x['gap_ns'])} ({'CPU' if x['cpu_ratio'] > 2 else 'latency'} "
                           f"{fmt_x(max(x['cpu_ratio'], x['latency_ratio']))} {x['matched']})"
                           for x in over) + ".")
    else:
        text += " It keeps the documented bound (2x the best fixed policy on latency and on CPU) at every gap."
    return {"text": text, "worst": worst, "loses": loses, "over_2x": over, "span": span}


def policy_advice(run):
    key, title = "policy", "Which wait policy (`NEMO_WAIT`)"
    if run is None:
        return _not_measured(key, title, "nemo-bench policy")
    table = policy_table(run.rows)
    vd = adaptive_verdict(table)
    if vd is None:
        return _not_measured(key, title, "nemo-bench policy --policies spin,block,hybrid,adaptive",
                             "The policy suite's document has no adaptive row or no fixed policy.")
    setters = ("per object `nemo_cond_set_policy` or `nemo_event_init`, per place "
               "`nemo_place_set_policy`, per thread `nemo_wait_set_thread_policy`")
    tips = {}     # policy -> the gaps where it beats the default (cost, or the 2x bound)
    for x in sorted(vd["loses"] + vd["over_2x"], key=lambda x: x["gap_ns"]):
        p = x["best"] if x in vd["loses"] else x["matched"]
        g = tips.setdefault(p, [])
        if fmt_gap(x["gap_ns"]) not in g:
            g.append(fmt_gap(x["gap_ns"]))
    if not tips:
        use = "Keep the default: leave `NEMO_WAIT` unset (`adaptive`); no calibration or setting is needed."
        v, caveat = "helps", ""
    else:
        tip = "; ".join(f"`NEMO_WAIT={p}` where your waits are about {', '.join(g)} long"
                        for p, g in tips.items())
        use = (f"Keep the default (`NEMO_WAIT` unset, `adaptive`) unless you know how long your waits are: "
               f"{tip} ({setters}).")
        v = "worse" if vd["over_2x"] else "same"
        caveat = ("Forcing a fixed policy pays off only where the waits stay in that range; elsewhere it "
                  "costs more than the default.")
    return _item(key, title, use, vd["text"], caveat, v)


# ---------------------------------------------------------------- all

KIND_NAMES = {"nemo": "nemo", "baseline": "without nemo", "peer": "peer library", "floor": "hardware floor",
              "program": "unmodified program"}


def legend(runs):
    """(row name, suite, kind, API) for every mechanism of the loaded
    documents that the advice may name, one line per distinct API."""
    seen, out = set(), []
    for run in runs:
        if run.suite not in ("unicast", "broadcast", "throughput", "preload", "event-loop", "request-reply"):
            continue
        for r in run.rows:
            name = r.get("mechanism")
            if not isinstance(name, str) or (run.suite == "broadcast" and "waiters" not in r):
                continue
            m = mech(name, run.suite, r.get("scenario"))
            if (name, m["api"]) in seen:
                continue
            seen.add((name, m["api"]))
            by_scenario = (run.suite, name, r.get("scenario")) in MECHANISMS
            where = run.suite + (f" ({r['scenario']})" if by_scenario else "")
            out.append({"name": name, "suite": where, "kind": KIND_NAMES.get(m["kind"], m["kind"]),
                        "api": m["api"]})
    order = {"nemo": 0, "unmodified program": 1, "without nemo": 2, "peer library": 3, "hardware floor": 4}
    return sorted(out, key=lambda x: (order.get(x["kind"], 9), x["name"], x["suite"]))


APP_RUN = "nemo-bench app"
SYSCOST_RUN = "nemo-bench syscost"

APP_API = {
    "poll-send": "no polling while computing: requests wait for the receiver's next nemo call",
    "poll-check": "`NEMO_POLL_CHECK()` in the loops that run long (or `-finstrument-functions` with "
                  "libnemo-instrument), `nemo_poll_threshold_set`",
    "progress-thread": "`nemo_progress_start` and `nemo_place_set_progress(true)` in the computing places",
    "watchdog-50us": "interrupt mode with `nemo_watchdog_start` and `nemo_place_set_watchdog(50000)`",
    "watchdog-1ms": "interrupt mode with `nemo_watchdog_start` and `nemo_place_set_watchdog(1000000)`",
    "check-watchdog-50us": "`NEMO_POLL_CHECK()` in the loops, and interrupt mode with `nemo_watchdog_start` and "
                           "`nemo_place_set_watchdog(50000)` for the requests the checks leave waiting",
    "check-watchdog-10us": "`NEMO_POLL_CHECK()` in the loops, and interrupt mode with `nemo_watchdog_start` and "
                           "`nemo_place_set_watchdog(10000)` for the requests the checks leave waiting",
    "interrupt": "interrupt mode (`NEMO_PLACE_INTERRUPTS`): a signal for every message",
    "threads": "more places than CPUs, each waiting in `nemo_place_wait`",
}


def polling_strategy(run):
    """Perkovic & Keleher's question: how should computing places serve each other's requests?"""
    title = f"Places that compute and serve each other's requests ({papers.POLLING}'s study)"
    if run is None:
        return _not_measured("app", title, APP_RUN)
    rows = analysis.app_rows([run])
    ratios = analysis.app_runtime_ratios(rows)
    if not ratios:
        return _not_measured("app", title, APP_RUN, why="the run has no interrupt rows to compare with")
    agg = {}
    for shape, r in ratios.items():
        for m, v in r.items():
            agg.setdefault(m, []).append(v)
    worst = {m: max(v) for m, v in agg.items()}
    best = min(worst, key=worst.get)
    why = ", ".join(f"{m} {worst[m]:.2f}x" for m in sorted(worst, key=worst.get))
    caveat = ("The study pins each place to a CPU of its own, so its waits poll 4x the cost of blocking "
              "before sleeping (`NEMO_PLACE_PIN`, docs/events.md); unpinned places sleep sooner, and "
              "requests sent to a sleeping place wait for its wake-up.")
    if best == "interrupt":
        caveat = "On this machine no polling strategy beat interrupts for this work. " + caveat
    return _item("app", title, use=f"{best}: {APP_API.get(best, best)}.",
                 why=(f"runtime of the same work relative to interrupt mode, the worst over the loop shapes "
                      f"measured ({', '.join(sorted(ratios))}): {why} ({APP_RUN})."),
                 caveat=caveat, run=APP_RUN)


def fast_paths(run):
    """Minnich, Floren & McKie's question: what does currying save here?"""
    title = f"Sending the same kind of message many times (curried paths, as {papers.CURRYING}'s)"
    if run is None:
        return _not_measured("syscost", title, SYSCOST_RUN)
    rows = {r["mechanism"]: r for r in run.rows}
    g, b = rows.get("nemo-am-send"), rows.get("nemo-am-bound")
    if not g or not b:
        return _not_measured("syscost", title, SYSCOST_RUN, why="nemo-am-send or nemo-am-bound is missing")
    gc, bc = g["cost_ns"]["p50"], b["cost_ns"]["p50"]
    why = (f"a bound send costs its sender {fmt_ns(bc)} at p50 against {fmt_ns(gc)} for nemo_am_send "
           f"({gc / bc:.2f}x)")
    if g.get("btw_ns") and b.get("btw_ns"):
        why += (f"; the receiver sees it after {fmt_ns(b['btw_ns']['p50'])} against "
                f"{fmt_ns(g['btw_ns']['p50'])}")
    w, q = rows.get("write-eventfd"), rows.get("uring-sqpoll-write")
    caveat = ""
    if w and q and q.get("btw_ns") and w.get("btw_ns") and q["btw_ns"]["p50"] > 10 * w["btw_ns"]["p50"]:
        caveat = (f"io_uring SQPOLL is not worth it here: its writes reach the reader after "
                  f"{fmt_ns(q['btw_ns']['p50'])} against write(2)'s {fmt_ns(w['btw_ns']['p50'])} (its kernel "
                  f"thread has no CPU of its own).")
    return _item("syscost", title, use="`nemo_am_bind` once, then `nemo_am_send_bound` (or `nemo_ctl` + "
                 "`nemo_fast` to set it up from a script).", why=why + f" ({SYSCOST_RUN}).", caveat=caveat,
                 run=SYSCOST_RUN)


def advise(runs):
    """Every item, in the order a programmer asks: existing programs
    first (no code change), then each scenario of new code, then the
    policy."""
    uni, _ = latest(runs, "unicast")
    bc, _ = latest(runs, "broadcast")
    tp, _ = latest(runs, "throughput")
    pre, _ = latest(runs, "preload")
    pol, _ = latest(runs, "policy")
    items = preload(pre)
    items.append(unicast_polling(uni, pol))
    items.append(unicast_running(uni))
    items.append(unicast_sleeping(uni, "blocked"))
    items.append(unicast_sleeping(uni, "loaded"))
    items.extend(broadcast(bc) if bc is not None else
                 [_not_measured("broadcast", "Broadcast to K waiters", BROADCAST_RUN)])
    items.extend(throughput(tp))
    loop, _ = latest(runs, "event-loop")
    rr, _ = latest(runs, "request-reply")
    mc, _ = latest(runs, "multicast")
    items.append(advice_loop.event_loop(loop))
    items.append(advice_rr.request_reply(rr, "threads"))
    items.append(advice_rr.request_reply(rr, "processes"))
    items.append(advice_rr.request_reply_ranks(mpi.newest(runs)))
    items.append(advice_mcast.multicast(mc))
    app_run, _ = latest(runs, "app")
    sc_run, _ = latest(runs, "syscost")
    items.append(polling_strategy(app_run))
    items.append(fast_paths(sc_run))
    items.append(policy_advice(pol))
    return items


def sources(runs):
    """Which document each suite's advice read, with a note where there
    were several."""
    out = []
    for suite in ("preload", "unicast", "broadcast", "throughput", "event-loop", "request-reply", "mpi",
                  "multicast", "policy"):
        run, n = latest(runs, suite)
        if run is not None:
            out.append((suite, run.path.name, n))
    return out


def as_text(runs):
    """The advice as plain text (`nemo-report advice`)."""
    lines = ["What to use on this machine", ""]
    for it in advise(runs):
        lines.append(f"* {it['title']}")
        for k in ("use", "why", "not"):
            if it[k]:
                lines.append(f"    {k}: {it[k]}")
        lines.append("")
    src = sources(runs)
    if src:
        lines.append("From: " + "; ".join(f"{s}: {f}" + (f" (latest of {n})" if n > 1 else "") for s, f, n in src))
    return "\n".join(lines)
