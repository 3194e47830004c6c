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
