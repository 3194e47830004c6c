"""Numbers derived from the rows: ratios, winners, the blocked-wake breakdown.

Every sentence of the report's advice comes from here, from the measured
numbers of one run; nothing is written by hand.
"""
import statistics


BASELINES_FLOOR = "spin"     # the coherence floor: a store to a polled line


def is_nemo(mech):
    return mech.startswith("nemo-")


def p50(row, key="latency_ns"):
    return row[key]["p50"]


def unicast_rows(runs):
    return [r for run in runs if run.suite == "unicast" for r in run.rows]


def by_scenario(rows):
    out = {}
    for r in rows:
        out.setdefault(r["scenario"], []).append(r)
    return out


def floor_ns(rows):
    """The coherence floor: spin polling p50, if measured."""
    for r in rows:
        if r["mechanism"] == "spin" and r["scenario"] == "polling":
            return p50(r)
    return None


def summary(rows):
    """Per nemo mechanism and scenario: p50/p99 vs the best baseline of the
    same scenario (ratio = baseline / nemo: above 1 means nemo is faster)."""
    out = []
    floor = floor_ns(rows)
    for scen, rs in by_scenario(rows).items():
        base = [r for r in rs if not is_nemo(r["mechanism"]) and r["mechanism"] != "spin-rtt"]
        if scen == "polling":
            base = [r for r in base if r["mechanism"] != "spin"] or base
        best = min(base, key=p50) if base else None
        for r in rs:
            if not is_nemo(r["mechanism"]):
                continue
            out.append({
                "mechanism": r["mechanism"], "scenario": scen,
                "p50": p50(r), "p99": r["latency_ns"]["p99"],
                "baseline": best["mechanism"] if best else None,
                "baseline_p50": p50(best) if best else None,
                "speedup_p50": p50(best) / p50(r) if best and p50(r) > 0 else None,
                "speedup_p99": (best["latency_ns"]["p99"] / r["latency_ns"]["p99"]
                                if best and r["latency_ns"]["p99"] > 0 else None),
                "vs_floor": p50(r) / floor if floor else None,
            })
    return out


def winners(rows):
    """Per scenario: fastest by p50 and by p99, and the margin to the next."""
    out = []
    for scen, rs in sorted(by_scenario(rows).items()):
        rs = [r for r in rs if r["mechanism"] != "spin-rtt"]
        if len(rs) < 1:
            continue
        s50 = sorted(rs, key=p50)
        s99 = sorted(rs, key=lambda r: r["latency_ns"]["p99"])
        w = {"scenario": scen, "p50": s50[0]["mechanism"], "p50_ns": p50(s50[0]),
             "p99": s99[0]["mechanism"], "p99_ns": s99[0]["latency_ns"]["p99"]}
        if len(s50) > 1:
            w["p50_next"] = s50[1]["mechanism"]
            w["p50_margin"] = p50(s50[1]) / max(p50(s50[0]), 1e-9)
        out.append(w)
    return out


def probe_jumps(runs):
    """Rows whose coherence probe before/after differ by more than 2x."""
    out = []
    for run in runs:
        for r in run.rows:
            pr = r.get("coherence_probe_ns") or {}
            b, a = pr.get("before"), pr.get("after")
            if b and a and max(a, b) / max(min(a, b), 1e-9) > 2:
                out.append((r["mechanism"], r["scenario"], b, a))
    return out


def broadcast_rows(runs):
    return [r for run in runs if run.suite == "broadcast" for r in run.rows if "waiters" in r]


def broadcast_oneway_rows(runs):
    """The broadcast suite's one-way spin rows: sender to each waiter CPU."""
    return [r for run in runs if run.suite == "broadcast" for r in run.rows
            if "waiters" not in r and r.get("scenario") == "one-way"]


def best_broadcast(rows):
    """Per scenario: lowest last-waiter p50 at the largest K measured in
    that scenario, `spin` (the floor, not a notification) aside when
    anything else was measured.  A list of (scenario, K, best row, rows at
    K), polling first."""
    out = []
    for scen in sorted({r["scenario"] for r in rows}, key=lambda s: (s != "polling", s)):
        rs = [r for r in rows if r["scenario"] == scen]
        kmax = max(r["waiters"] for r in rs)
        at = [r for r in rs if r["waiters"] == kmax]
        cand = [r for r in at if r["mechanism"] != BASELINES_FLOOR] or at
        out.append((scen, kmax, min(cand, key=lambda r: r["last_ns"]["p50"]), at))
    return out


def broadcast_floor(row):
    """The row's one-way spin floor: the slowest median one-way transfer
    from the sender to any of its waiter CPUs, measured in the same run
    (None for files that predate it)."""
    v = row.get("one_way_spin_p50_ns")
    return v if isinstance(v, (int, float)) and v > 0 else None


def broadcast_table(rows):
    """One line per broadcast row, polling first, by mechanism and K: the
    first and last waiter's medians, the last's p99, and the last waiter's
    median over the one-way spin floor ("x one-way"): how many cache-line
    transfers the slowest waiter's wake-up costs."""
    out = []
    for r in sorted(rows, key=lambda r: (r["scenario"] != "polling", r["scenario"],
                                         r["mechanism"] != "spin", r["mechanism"], r["waiters"])):
        floor = broadcast_floor(r)
        out.append({"mechanism": r["mechanism"], "scenario": r["scenario"],
                    "policy": r.get("policy"), "waiters": r["waiters"],
                    "oversubscribed": bool(r.get("oversubscribed")),
                    "first_p50": r["first_ns"]["p50"], "last_p50": r["last_ns"]["p50"],
                    "last_p99": r["last_ns"]["p99"], "floor": floor,
                    "x_floor": r["last_ns"]["p50"] / floor if floor else None,
                    "ctx": r.get("ctx_switches_per_trial")})
    return out


DISTANCE_NAMES = {0: "same CPU", 1: "SMT siblings", 2: "share an L2", 3: "share an L3",
                  4: "same package", 5: "same NUMA node", 6: "apart", -1: "unknown"}


def _topo_distance(topo, a, b):
    """nemo_topo_distance from the machine's topology table (for files
    whose rows predate their `distance` field)."""
    pa, pb = topo.get(a), topo.get(b)
    if pa is None or pb is None:
        return -1
    if a == b:
        return 0
    for cls, key in ((1, "core"), (2, "l2"), (3, "l3"), (4, "package"), (5, "numa")):
        if pa.get(key, -1) >= 0 and pa.get(key) == pb.get(key):
            return cls
    return 6


def coherence_rows(runs):
    """The coherence suite's rows, each with its distance class (from the
    row, else from the run's topology) in `_distance`."""
    out = []
    for run in runs:
        if run.suite != "coherence":
            continue
        topo = {t.get("cpu"): t for t in run.machine.get("topology") or [] if isinstance(t, dict)}
        for r in run.rows:
            d = r.get("distance")
            r["_distance"] = d if isinstance(d, int) else _topo_distance(topo, r["src_cpu"], r["dst_cpu"])
            out.append(r)
    return out


def coherence_classes(rows):
    """Per distance class: how many pairs, and the median, lowest and
    highest of their p50s, one-way and half round trip."""
    out = []
    for d in sorted({r["_distance"] for r in rows}, key=lambda d: (d < 0, d)):
        line = {"distance": d, "name": DISTANCE_NAMES.get(d, str(d))}
        for scen in ("one-way", "round-trip"):
            v = sorted(p50(r) for r in rows if r["_distance"] == d and r["scenario"] == scen)
            line[scen] = ({"pairs": len(v), "median": v[len(v) // 2] if len(v) % 2 else
                           (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2, "min": v[0], "max": v[-1]}
                          if v else None)
        out.append(line)
    return out


def breakdown(rows):
    """Blocked-wake cost estimate per blocking mechanism, from medians of one
    run: coherence floor, sender's syscall, rest of the wake path with a busy
    (non-idle) receiver CPU, and the extra for waking an idle CPU."""
    floor = floor_ns(rows) or 0.0
    idx = {(r["mechanism"], r["scenario"]): r for r in rows}
    out = []
    for (mech, scen), r in sorted(idx.items()):
        if scen != "blocked":
            continue
        blocked = p50(r)
        sender = r["sender_ns"]["p50"]
        loaded = idx.get((mech, "loaded"))
        if loaded is not None:
            busy_path = max(p50(loaded) - sender - floor, 0.0)
            idle = max(blocked - p50(loaded), 0.0)
        else:
            busy_path = max(blocked - sender - floor, 0.0)
            idle = 0.0
        out.append({"mechanism": mech, "floor": floor, "sender": sender,
                    "wake_path": busy_path, "idle_cpu": idle, "total": blocked})
    return out


def throughput_rows(runs):
    """Rows of the throughput suite read as such (rates, not latencies)."""
    return [r for run in runs if run.suite == "throughput" for r in run.rows
            if "msgs_per_s_stats" in r]


def app_rows(runs):
    """Rows of the app suite (Perkovic & Keleher's study), from the newest document."""
    docs = [run for run in runs if run.suite == "app" and run.rows]
    if not docs:
        return []
    newest = max(docs, key=lambda run: run.started_at)
    return [r for r in newest.rows if "runtime_s" in r]


def app_pooled(runs):
    """The newest app document's `config.pooled` (each strategy's delays over
    the run's rounds, and the watchdog's bound judged on them), or []."""
    docs = [run for run in runs if run.suite == "app" and run.rows]
    if not docs:
        return []
    pooled = max(docs, key=lambda run: run.started_at).config.get("pooled")
    return pooled if isinstance(pooled, list) else []


def app_bound_rounds(rows, mech, t_ns):
    """(held, rounds): the rounds and shapes in which `mech`'s p99 was at most
    t_ns plus interrupt mode's p99 in the same round and shape."""
    irq = {(r["shape"], r.get("round", 0)): r["delay_ns"]["p99"] for r in rows if r["mechanism"] == "interrupt"}
    held = n = 0
    for r in rows:
        k = (r["shape"], r.get("round", 0))
        if r["mechanism"] == mech and k in irq:
            n += 1
            held += r["delay_ns"]["p99"] <= t_ns + irq[k]
    return held, n


def app_runtime_ratios(rows):
    """{shape: {strategy: median runtime / median runtime of `interrupt`}}, over rounds."""
    out = {}
    by = {}
    for r in rows:
        by.setdefault(r["shape"], {}).setdefault(r["mechanism"], []).append(r["runtime_s"])
    for shape, mechs in by.items():
        if "interrupt" not in mechs:
            continue
        base = statistics.median(mechs["interrupt"])
        out[shape] = {m: statistics.median(v) / base for m, v in mechs.items()}
    return out


def app_delays(rows, mech):
    """The merged delay histogram of a strategy: (upper_edges, counts, sums)."""
    edges, counts, sums = None, None, None
    for r in rows:
        if r["mechanism"] != mech:
            continue
        h = r["delay_hist"]
        if edges is None:
            edges = h["upper_edges_ns"]
            counts = [0.0] * len(h["counts"])
            sums = [0.0] * len(h["sum_ns"])
        counts = [a + b for a, b in zip(counts, h["counts"])]
        sums = [a + b for a, b in zip(sums, h["sum_ns"])]
    return edges, counts, sums


def app_share_above(rows, mech, threshold_ns):
    """The share of the strategy's total delay that comes from delays above threshold_ns."""
    edges, counts, sums = app_delays(rows, mech)
    if edges is None or sum(sums) <= 0:
        return None
    lower = [0.0] + [e for e in edges[:-1]]
    above = sum(x for lo, x in zip(lower, sums) if lo >= threshold_ns)
    return above / sum(sums)


def syscost_rows(runs):
    """Rows of the syscost suite, from the newest document."""
    docs = [run for run in runs if run.suite == "syscost" and run.rows]
    if not docs:
        return []
    return max(docs, key=lambda run: run.started_at).rows


THROUGHPUT_BASELINE = "ck-ring"

PRELOAD_BASELINE = "glibc"
PRELOAD_DEFAULT = "nemo-default"


def preload_rows(runs):
    """Rows of the preload suite read as such (a program's rate per mode)."""
    return [r for run in runs if run.suite == "preload" for r in run.rows
            if "rate_per_s_stats" in r and "mode" in r]


def preload_summary(rows):
    """Per preload row: the median rate over rounds, its range, and the ratio
    of that median to the median of the same program's glibc row of the
    same run (same file): above 1, the program ran faster preloaded.  The
    ratio is computed here, from the numbers, not read from the file.
    Each round's rate over the glibc median is kept for the figure."""
    base = {}
    for r in rows:
        if r["mode"] == PRELOAD_BASELINE:
            base[(r["_file"], r["mechanism"])] = r
    out = []
    for r in rows:
        st = r["rate_per_s_stats"]
        b = base.get((r["_file"], r["mechanism"]))
        bp50 = b["rate_per_s"] if b is not None else None
        ok = bool(bp50) and bp50 > 0
        out.append({"program": r["mechanism"], "mode": r["mode"], "file": r["_file"].name,
                    "unit": r.get("unit", "events"), "p50": r["rate_per_s"],
                    "min": st["min"], "max": st["max"], "rounds": r["trials"],
                    "interposed": bool(r["interposed"]), "nemo_wait": r.get("nemo_wait"),
                    "vs_glibc": r["rate_per_s"] / bp50 if ok else None,
                    "rounds_vs_glibc": [x / bp50 for x in r.get("rate_per_s_rounds") or []] if ok else [],
                    "baseline_p50": bp50})
    return out


def throughput_summary(rows):
    """Per throughput row: the median per-interval rate, its range, the
    kicks per message, and the ratio of its median to the median of the
    baseline (ck-ring) of the same run (same file, CPUs and batch): above
    1, it moved more messages per second than the baseline."""
    base = {}
    for r in rows:
        if r["mechanism"] == THROUGHPUT_BASELINE:
            base[(r["_file"], r["src_cpu"], r["dst_cpu"], r["batch"])] = r
    out = []
    for r in rows:
        st = r["msgs_per_s_stats"]
        b = base.get((r["_file"], r["src_cpu"], r["dst_cpu"], r["batch"]))
        ratio = None
        if b is not None and b is not r and b["msgs_per_s_stats"]["p50"] > 0:
            ratio = st["p50"] / b["msgs_per_s_stats"]["p50"]
        out.append({"mechanism": r["mechanism"], "file": r["_file"].name,
                    "src_cpu": r["src_cpu"], "dst_cpu": r["dst_cpu"], "batch": r["batch"],
                    "p50": st["p50"], "min": st["min"], "max": st["max"],
                    "msgs_per_s": r["msgs_per_s"], "kicks_per_msg": r["kicks_per_msg"],
                    "baseline": b["mechanism"] if b is not None and b is not r else None,
                    "vs_baseline": ratio})
    return out
