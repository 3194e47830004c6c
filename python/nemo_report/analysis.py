"""Numbers derived from the rows: ratios, winners, the blocked-wake breakdown.

Every sentence of the report's advice comes from here, from the measured
numbers of one run; nothing is written by hand.
"""


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


def best_broadcast(rows):
    """Lowest last-waiter p50 at the largest K measured."""
    if not rows:
        return None
    kmax = max(r["waiters"] for r in rows)
    at = [r for r in rows if r["waiters"] == kmax]
    best = min(at, key=lambda r: r["last_ns"]["p50"])
    return kmax, best, at


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
