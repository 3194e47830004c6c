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
