"""What to use for an acknowledged multicast (nemo_multicast): which
topology, mechanism and fan-out for how many places.

Up to the places this machine has, from the multicast suite's measured
rows (their fan-out is the default, 2); beyond, from the simulator
(mcast_sim.py) run with the costs the same run measured (its
mcast-constants row), every topology x mechanism x fan-out.  The
comparison is Flat: a message to every member and an acknowledgement from
each, which is what a program writes with one nemo_am_send per member.
Every number is read from one document, or simulated from its constants
(and said to be)."""
from . import mcast_sim
from .advice_base import SAME, _item, _not_measured, _ratio, fmt_ns, fmt_x, verdict

MC_RUN = "nemo-bench multicast"
PROJECT = (64, 256)        # places the projection covers, beyond the machine's
FANOUTS = (2, 4, 8, 16)
SMALL = 4                  # a small group: this many members among the most places projected
SMALL_GROUPS = 8           # random small groups simulated per configuration


def _api(topology, mechanism, fanout=None, dynamic=None):
    s = f"`NEMO_MCAST_{topology.upper()}`, `NEMO_MCAST_{mechanism.upper()}`"
    if fanout and topology != "flat":
        s += f", `fanout = {fanout}`"
    if dynamic is not None:
        s += f", `dynamic = {'true' if dynamic else 'false'}`"
    return s


def _configs():
    for top in mcast_sim.TOPOLOGIES:
        for mech in mcast_sim.MECHANISMS:
            for f in ((None,) if top == "flat" else FANOUTS):
                yield top, mech, f


def simulate_best(k, n, places, dynamics, count):
    """The simulated choice for groups of n among `places`, and the best
    Flat: (p50, topology, mechanism, fanout, dynamic) each.  The choice is
    the fastest configuration, or Flat where that is not SAME faster (a
    topology that does not pay is not worth its setting)."""
    out = []
    for top, mech, f in _configs():
        for dyn in dynamics:
            row = mcast_sim.simulate(k, top, mech, dyn, n, places, count=count, fanout=f or 2)
            out.append((row["latency"]["p50"], top, mech, f, dyn))
    best, flat = min(out), min(x for x in out if x[1] == "flat")
    return (best if verdict(_ratio(flat[0], best[0])) == "helps" else flat), flat


def _sim_line(choice, flat):
    """A simulated choice against the best Flat, in words."""
    b50, top, mech, f, d = choice
    what = f"{top}-{mech}{f' fan-out {f}' if f else ''}{', dynamic' if d else ''} {fmt_ns(b50)}"
    if top == "flat":
        return f"{what} (no topology is {SAME}x faster)"
    return f"{what} against Flat's {fmt_ns(flat[0])} ({fmt_x(_ratio(flat[0], b50))})"


def _rlabel(r):
    return f"{r['mechanism']}/{r['group']}"


def _mech(r):
    """The mechanism part of a row's name (tree-help: help)."""
    return r["mechanism"].split("-", 1)[-1]


def multicast(run):
    key, title = "multicast", "Acknowledged multicast to a group of places (`nemo_multicast`)"
    if run is None:
        return _not_measured(key, title, MC_RUN)
    rows = [r for r in run.rows if "latency_ns" in r and "topology" in r and "n" in r]
    if not rows:
        return _not_measured(key, title, MC_RUN, "The multicast document has no latency rows.")
    fair = [r for r in rows if not r.get("oversubscribed")]
    use_rows = fair or rows
    n = max(r["n"] for r in use_rows)
    at = [r for r in use_rows if r["n"] == n]
    best = min(at, key=lambda r: r["latency_ns"]["p50"])
    flat = min((r for r in at if r["topology"] == "flat"), key=lambda r: r["latency_ns"]["p50"], default=None)
    places = best["places"]
    why = [f"n = {n} members of {places} places, measured: {_rlabel(best)} p50 {fmt_ns(best['latency_ns']['p50'])}"]
    caveat = []
    if flat is None:
        v = "info"
        caveat.append("The run has no Flat row to compare with.")
    elif flat is best:
        v = "same"
        why.append("Flat is the fastest measured")
    else:
        r = _ratio(flat["latency_ns"]["p50"], best["latency_ns"]["p50"])
        v = verdict(r)
        why.append(f"the best Flat, {_rlabel(flat)}, p50 {fmt_ns(flat['latency_ns']['p50'])} "
                   f"({fmt_x(r)} the topology's)")
    dyn = best["group"] == "dynamic"
    if v == "helps":
        use = (f"`nemo_multicast` over a group (`nemo_mcast_group_create`) with {_api(best['topology'], _mech(best))}"
               f"{', `dynamic = true`' if dyn else ''} (the default fan-out, 2) up to {places} places")
    else:
        use = (f"`nemo_multicast` with Flat ({_api('flat', _mech(flat) if flat else 'smack')}) up to "
               f"{places} places: a topology does not pay at that size here")
        if v != "info":
            caveat.append(f"A topology does not help at {n} members here: Flat is "
                          + (f"within {SAME}x." if v == "same" else "faster."))
    if not fair:
        caveat.append(f"Every row had more places than CPUs (oversubscribed): the figures at {n} members say "
                      "as much about the scheduler as about the topology.")
    # Beyond this machine: the simulator with this run's costs.
    doc = {"suite": run.suite, "machine": run.machine, "results": run.rows}
    try:
        k = mcast_sim.from_results([doc])
    except ValueError as e:
        caveat.append(f"No projection beyond {places} places: {e}.")
        k = None
    proj = [p for p in PROJECT if p > places]
    if k is not None and proj:
        parts = []
        for p in proj:
            choice, fl = simulate_best(k, p, p, (False,), 1)
            parts.append(f"at {p} places, all members: {_api(*choice[1:4])}")
            why.append(f"simulated with this run's costs, all {p} members: {_sim_line(choice, fl)}")
        p = proj[-1]
        choice, fl = simulate_best(k, SMALL, p, (False, True), SMALL_GROUPS)
        parts.append(f"{SMALL} members among {p} places: {_api(*choice[1:])}")
        why.append(f"simulated, {SMALL} random members of {p} places: {_sim_line(choice, fl)}")
        use += "; " + "; ".join(parts) + " (simulated)"
        caveat.append("The projections are simulated with this machine's costs (the run's mcast-constants row), "
                      "not measured: check them on a machine of that size.")
    const = next((r for r in run.rows if r.get("mechanism") == "mcast-constants"), None)
    two = [r for r in use_rows if r["n"] == 2]
    if const and const.get("round_trip_ns") and two:
        m2 = min(two, key=lambda r: r["latency_ns"]["p50"])
        rt = const["round_trip_ns"]
        if round(m2["latency_ns"]["p50"] / rt, 2) >= SAME:
            caveat.append(f"For one other member, a request and its reply (`nemo_am_send` + `nemo_am_reply`, "
                          f"round trip {fmt_ns(rt)}) is cheaper than a multicast ({_rlabel(m2)} at n = 2: "
                          f"{fmt_ns(m2['latency_ns']['p50'])}).")
    return _item(key, title, use + ".", "; ".join(why) + f" ({MC_RUN}).", " ".join(caveat), v, run=MC_RUN)
