"""Synthetic nemo-bench documents for machines the tests do not run on.

A machine is `cores` cores x `smt` threads, Linux's usual numbering (CPU c
and c + cores share core c), an L3 per `l3_cores` cores, a package (and
NUMA node) per `pkg_cores` cores.  Rows follow docs/bench-json.md, with
latencies set per topology distance class, so that a test knows what the
report must find.
"""
import json
import random

# One-way p50 per distance class, ns (half round trip: 0.9x).
CLASS_NS = {1: 30.0, 2: 40.0, 3: 55.0, 4: 95.0, 5: 150.0, 6: 190.0}


def topology(cores=32, smt=2, l3_cores=8, pkg_cores=16):
    out = []
    for cpu in range(cores * smt):
        c = cpu % cores
        out.append({"cpu": cpu, "core": c, "package": c // pkg_cores, "numa": c // pkg_cores,
                    "l2": c, "l3": c // l3_cores})
    return out


def distance(topo, a, b):
    pa, pb = topo[a], topo[b]
    if a == b:
        return 0
    for cls, key in ((1, "core"), (2, "l2"), (3, "l3"), (4, "package"), (5, "numa")):
        if pa[key] == pb[key]:
            return cls
    return 6


def stats(p50, spread=0.15):
    return {"min": p50 * (1 - spread), "p50": p50, "p90": p50 * (1 + spread),
            "p99": p50 * (1 + 2 * spread), "max": p50 * (1 + 4 * spread), "mean": p50,
            "stddev": p50 * spread / 2}


def cdf(st):
    lo, mid, hi = st["min"], st["p50"], st["max"]
    return [lo + (mid - lo) * i / 50 if i <= 50 else mid + (hi - mid) * (i - 50) / 50
            for i in range(101)]


def row(mech, scen, src, dst, p50, trials=200, **extra):
    lat = stats(p50)
    snd = stats(30.0)
    r = {"mechanism": mech, "scenario": scen, "src_cpu": src, "dst_cpu": dst, "trials": trials,
         "latency_ns": lat, "sender_ns": snd, "latency_cdf_ns": cdf(lat), "sender_cdf_ns": cdf(snd),
         "ctx_switches_per_trial": 0.0, "voluntary_ctx_switches_per_trial": 0.0,
         "cpu_ns_per_event": p50, "coherence_probe_ns": {"before": 60.0, "after": 61.0},
         "samples_file": None}
    r.update(extra)
    return r


def machine(topo):
    return {"cpu_model": "Synthetic CPU", "cpus": len(topo), "tsc_hz": 2.5e9, "clock_source": "tsc",
            "clock_overhead_ns": 10.0, "clock_resolution_ns": 1.0, "kernel": "6.1.0",
            "virtualized": False, "hypervisor": None, "topology": topo}


def doc(suite, topo, config, results):
    return {"tool": "nemo-bench", "version": "0.1.0", "suite": suite,
            "started_at": "2025-01-01T00:00:00Z", "duration_s": 12.0, "machine": machine(topo),
            "config": {"trials": 200, **config}, "results": results}


def coherence(topo, outliers=((0, 40), (17, 3), (50, 61)), keep=None, seed=1):
    """Every ordered pair (or those keep(src, dst) accepts), both
    scenarios; the outlier pairs read 40x their class."""
    rnd = random.Random(seed)
    n = len(topo)
    rows = []
    pairs = [(a, b) for a in range(n) for b in range(n) if a != b and (keep is None or keep(a, b))]
    for a, b in pairs:
        d = distance(topo, a, b)
        base = CLASS_NS[d] * (40 if (a, b) in outliers else 1) * (1 + rnd.uniform(-0.05, 0.05))
        rows.append(row("spin", "one-way", a, b, round(base, 1), distance=d))
        rows.append(row("spin-rtt", "round-trip", a, b, round(base * 0.9, 1), distance=d))
    classes = {}
    for a, b in pairs:
        classes[distance(topo, a, b)] = classes.get(distance(topo, a, b), 0) + 1
    cfg = {"cpus": list(range(n)), "pairs": "all" if keep is None else "sample",
           "pairs_measured": len(pairs), "pairs_total": n * (n - 1), "trials_scaled": True,
           "distance_classes": [{"distance": d, "pairs": c} for d, c in sorted(classes.items())]}
    return doc("coherence", topo, cfg, rows)


def broadcast(topo, ks=(1, 2, 4, 8, 15), src=0):
    """Polling and blocked rows on a machine with a CPU per waiter: last
    waiter of nemo-am polling at 2.5x the one-way floor, spin at 1.2x."""
    n = len(topo)
    order = [c for c in range(n) if c != src]
    oneway = {c: CLASS_NS[distance(topo, src, c)] for c in order}
    rows = []
    mechs = (("spin", "polling", None, 1.2), ("nemo-am", "polling", "spin", 2.5),
             ("nemo-cond", "polling", "spin", 4.0), ("futex", "blocked", None, 120.0),
             ("nemo-am", "blocked", "block", 90.0))
    for mech, scen, pol, factor in mechs:
        for k in ks:
            cpus = [order[i % len(order)] for i in range(k)]
            floor = max(oneway[c] for c in cpus)
            last, first = floor * factor, floor * factor * 0.6
            extra = {"waiters": k, "waiter_cpus": cpus, "oversubscribed": k > len(order),
                     "one_way_spin_p50_ns": floor, "first_ns": stats(first), "last_ns": stats(last),
                     "spread_ns": stats(max(last - first, 1) / 3), "first_cdf_ns": cdf(stats(first)),
                     "last_cdf_ns": cdf(stats(last)), "spread_cdf_ns": cdf(stats(max(last - first, 1) / 3))}
            if pol:
                extra["policy"] = pol
            r = row(mech, scen, src, cpus[0], (first + last) / 2, **extra)
            if scen == "blocked":
                r["ctx_switches_per_trial"] = r["voluntary_ctx_switches_per_trial"] = 1.0
            rows.append(r)
    used = sorted({c for r in rows for c in r["waiter_cpus"]})
    for c in used:
        rows.append(row("spin", "one-way", src, c, oneway[c], distance=distance(topo, src, c)))
    cfg = {"waiters": list(ks), "rounds": 10, "poll_policy": "spin", "poll_delay_us": [0.3, 2.0],
           "waiter_cpu_order": order, "src_cpu": src, "not_run": [], "skipped": []}
    return doc("broadcast", topo, cfg, rows)


def write(path, d):
    path.write_text(json.dumps(d))
    return path


# ------------------------------------------------------------------ advice
# Small documents of the suites the report's advice reads, with the numbers
# given by the test, so that a test knows what the advice must say.

def small_topology(cpus=4):
    return [{"cpu": c, "core": c, "package": 0, "numa": 0, "l2": c, "l3": 0} for c in range(cpus)]


def unicast(latencies, virtualized=False, hypervisor=None, cpus=4):
    """latencies: {(mechanism, scenario): p50 or (p50, p99)}; every row's
    CPU per event is its p50 times 2, except polling rows (p50 times 100:
    the receiver burned the wait)."""
    rows = []
    for (mech, scen), v in latencies.items():
        p50, p99 = v if isinstance(v, tuple) else (v, None)
        r = row(mech, scen, 0, 1, p50)
        if p99 is not None:
            r["latency_ns"]["p99"] = p99
            r["latency_ns"]["max"] = max(r["latency_ns"]["max"], p99)
        r["cpu_ns_per_event"] = p50 * (100 if scen == "polling" else 2)
        if scen in ("blocked", "loaded"):
            r["ctx_switches_per_trial"] = r["voluntary_ctx_switches_per_trial"] = 1.0
        rows.append(r)
    d = doc("unicast", small_topology(cpus), {"rounds": 10, "skipped": []}, rows)
    d["machine"]["virtualized"] = virtualized
    d["machine"]["hypervisor"] = hypervisor
    return d


def policy(cells, repeats=3):
    """cells: {gap_us: {policy: (latency p50 ns, cpu ns per event)}}; each
    (policy, gap) gets `repeats` rows whose median is the cell (the
    others 0.8x and 1.5x)."""
    rows = []
    spread = [1.0, 0.8, 1.5][:repeats]
    for rep in range(repeats):
        for gap, pols in sorted(cells.items()):
            for pol, (lat, cpu) in pols.items():
                f = spread[rep]
                rows.append(row("nemo-event", pol, 0, 1, lat * f, policy=pol, gap_ns=gap * 1000.0,
                                repeat=rep, cpu_ns_per_event=cpu * f))
    cfg = {"policies": sorted({p for c in cells.values() for p in c}), "gaps_us": sorted(cells),
           "repeats": repeats}
    return doc("policy", small_topology(), cfg, rows)


UNITS = {"condvar-handoff": "hand-offs", "python-handoff": "round trips", "pool": "tasks"}


def preload(rates, skipped=()):
    """rates: {program: {mode: rate per second}} (modes glibc, nemo-default,
    nemo-POLICY); three rounds per row, the median the rate given."""
    rows = []
    for prog, modes in rates.items():
        g = modes.get("glibc")
        for mode, rate in modes.items():
            rounds = [rate * 0.9, rate, rate * 1.1]
            st = stats(rate, 0.1)
            st.update(min=rate * 0.9, max=rate * 1.1, p50=rate)
            rows.append({"mechanism": prog, "mode": mode,
                         "nemo_wait": mode[5:] if mode.startswith("nemo-") and mode != "nemo-default" else None,
                         "preloaded": mode != "glibc", "interposed": mode != "glibc",
                         "unit": UNITS.get(prog, "events"), "command": prog, "seconds": 1.0,
                         "trials": 3, "rate_per_s": rate, "rate_per_s_stats": st,
                         "rate_per_s_rounds": rounds, "ratio_vs_glibc": rate / g if g else None,
                         "samples_file": None})
    modes = sorted({m for ms in rates.values() for m in ms})
    cfg = {"seconds": 1.0, "rounds": 3, "programs": list(rates), "modes": modes,
           "preload_library": "/usr/lib/libnemo-preload.so", "pool_workers": 8, "python": None,
           "src_cpu": 0, "dst_cpu": 1, "skipped": [{"mechanism": p, "reason": why} for p, why in skipped]}
    return doc("preload", small_topology(), cfg, rows)


def throughput(rates, batch=64):
    """rates: {mechanism: messages per second (median interval)}."""
    rows = []
    for mech, rate in rates.items():
        st = stats(rate, 0.1)
        rows.append({"mechanism": mech, "scenario": "polling", "src_cpu": 0, "dst_cpu": 1, "trials": 10,
                     "seconds": 1.0, "batch": batch, "messages": int(rate), "msgs_per_s": rate,
                     "msgs_per_s_stats": st, "kicks_per_msg": 0.0, "full_waits_per_msg": 0.0,
                     "cpu_ns_per_msg": 1e9 / rate, "coherence_probe_ns": {"before": 60.0, "after": 61.0},
                     "samples_file": None})
    return doc("throughput", small_topology(), {"seconds": 1.0, "batch": batch, "intervals": 10,
                                                "ck_ring_entries": 1024, "skipped": []}, rows)


# ------------------------------------------------- situations (advice_*.py)

def event_loop(rates, wakeups=None):
    """rates: {(mechanism, scenario): messages per second over 1 s};
    wakeups: {(mechanism, scenario): wake-ups per message} (default: 0.001
    for nemo's rows, 0.01 for eventfd-ring)."""
    rows = []
    for (mech, scen), rate in rates.items():
        msgs = int(rate)
        it = max(1, msgs // 100)
        w = (wakeups or {}).get((mech, scen), 0.01 if mech == "eventfd-ring" else 0.001)
        kicks = msgs + 4 if mech == "eventfd-ring" else msgs // 1000
        st = stats(rate, 0.1)
        nemo = None if mech == "eventfd-ring" else {
            "kicks_fd": kicks if mech == "nemo-place-fd" else 0, "kicks_futex": 0 if mech == "nemo-place-fd" else kicks,
            "kicks_signal": 0, "kicks_avoided": 10, "kicks_skipped": msgs, "sleeps": 0, "full_waits": 0,
            "room_kicks": 0}
        rows.append({"mechanism": mech, "scenario": scen, "dst_cpu": 1, "src_cpus": [0, 2], "senders": 2,
                     "oversubscribed": False, "pause_us": 50.0 if scen == "paused" else 0.0,
                     "pause_every": 100 if scen == "paused" else 0, "trials": 2, "seconds": 1.0,
                     "messages": msgs, "msgs_per_s": rate, "msgs_per_s_stats": st, "iterations": it,
                     "empty_iterations": it // 50, "empty_share": (it // 50) / it,
                     "msgs_per_iteration": msgs / it, "wakeups": int(w * msgs), "wakeups_per_msg": w,
                     "kicks": kicks, "kicks_per_msg": kicks / msgs, "full_waits": 0, "full_waits_per_msg": 0.0,
                     "cpu_ns_per_msg": 1e9 / rate, "nemo_counters": nemo, "samples_file": None})
    cfg = {"trials": 2, "rounds": 2, "seconds": 0.5, "scenarios": ["flood", "paused"], "senders": 2,
           "pause_us": 50.0, "pause_every": 100, "ring_slots": 256, "cpus": [1, 0, 2], "skipped": []}
    return doc("event-loop", small_topology(), cfg, rows)


def request_reply(rtts, rates=None, server_cpu=None, skipped=()):
    """rtts: {(mechanism, scenario): round-trip p50 ns, or (p50, p99)};
    rates: {(mechanism, scenario): requests per second} (default 4e9 / p50);
    server_cpu: {(mechanism, scenario): server CPU ns per round trip}
    (default p50 / 4); skipped: (mechanism label, reason) pairs."""
    rows = []
    for (mech, scen), v in rtts.items():
        p50, p99 = v if isinstance(v, tuple) else (v, v * 1.3)
        st = stats(p50)
        st["p99"], st["max"] = p99, max(st["max"], p99)
        rate = (rates or {}).get((mech, scen), 4e9 / p50)
        nemo = mech == "nemo-am"
        rows.append({"mechanism": mech, "scenario": scen, "src_cpu": 0, "dst_cpu": 1, "trials": 200,
                     "rounds": 2, "warmup": 20, "think_us": [20.0, 50.0], "rtt_ns": st, "rtt_cdf_ns": cdf(st),
                     "client_wakeups_per_rtt": 0.0 if nemo else 1.0,
                     "server_wakeups_per_rtt": 0.0 if nemo else 1.0, "client_cpu_ns_per_rtt": p50 / 4,
                     "server_cpu_ns_per_rtt": (server_cpu or {}).get((mech, scen), p50 / 4),
                     "kicks_per_rtt": 0.5 if nemo else None, "in_flight": 16, "requests": 200,
                     "seconds": 200 / rate, "requests_per_s": rate, "requests_per_s_stats": stats(rate, 0.05),
                     "requests_per_s_rounds": [rate * 0.95, rate * 1.05], "client_wakeups_per_request": 0.1,
                     "server_wakeups_per_request": 0.1, "cpu_ns_per_request": 1e9 / rate,
                     "kicks_per_request": 0.1 if nemo else None, "samples_file": None})
    cfg = {"trials": 200, "warmup": 20, "delay_us": [20.0, 50.0], "seed": 1, "src_cpu": 0, "dst_cpu": 1,
           "rounds": 2, "scenarios": ["threads", "processes"], "in_flight": 16, "ring_slots": 64,
           "skipped": [{"mechanism": m, "reason": why} for m, why in skipped]}
    return doc("request-reply", small_topology(), cfg, rows)


def mpi(pingpong=None, remote=None, app=None):
    """A nemo-bench-mpi document: the half round trip p50 of mpi-pingpong
    and nemo-am-remote between ranks 0 and 1 (None: no such row); app:
    {strategy: runtime in seconds}."""
    rows = []
    for mech, scen, p50 in (("mpi-pingpong", "blocking-recv", pingpong), ("nemo-am-remote", "polling", remote)):
        if p50 is not None:
            st = stats(p50)
            rows.append({"mechanism": mech, "scenario": scen, "src_rank": 0, "dst_rank": 1, "src_cpu": -1,
                         "dst_cpu": -1, "trials": 1000, "bytes": 8, "method": "alternating blocks",
                         "latency_ns": st, "latency_cdf_ns": cdf(st)})
    best = min(app.values()) if app else None
    for strat, t in (app or {}).items():
        rows.append({"mechanism": "nemo-mpi-app", "scenario": strat, "ranks": 2, "runtime_s": t,
                     "relative_to_best": t / best, "relative_to_interrupt": t / app.get("thread-interrupt", t),
                     "units": 100, "unit_ns": 5000, "period": 10})
    d = doc("mpi", small_topology(), {"ranks": 2, "app_units": 100, "idle_s": 1.0, "suites": []}, rows)
    d["machine"] = {"cpus": 4, "tsc_hz": 2.5e9, "mpi": "MPICH Version: 4.0"}
    return d


def multicast(latencies, places=4, constants=True, round_trip=1000.0):
    """latencies: {(mechanism, group, n): p50 ns} (mechanism TOPOLOGY-MECHANISM);
    constants: add the mcast-constants row (this machine's costs for the
    simulator), with a request-reply round trip of round_trip ns."""
    rows = []
    for (mech, group, n), p50 in latencies.items():
        rows.append({"mechanism": mech, "scenario": "polling", "topology": mech.split("-")[0], "group": group,
                     "n": n, "places": places, "oversubscribed": False, "trials": 64, "latency_ns": stats(p50)})
    if constants:
        rows.append({"mechanism": "mcast-constants", "scenario": "constants", "trials": 64, "send": 150.0,
                     "latency": 350.0, "atomic": 60.0, "node": 40.0, "call": 100.0, "check": 2.0,
                     "action": 5.0, "recv": 0.0, "poll": 0.0, "one_way_ns": 200.0, "round_trip_ns": round_trip})
    return doc("multicast", small_topology(places), {"rounds": 8, "trials": 8}, rows)
