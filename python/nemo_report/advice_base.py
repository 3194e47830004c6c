"""The pieces every part of the advice shares (advice.py and the
situations split from it: advice_rr.py, advice_loop.py, advice_mcast.py):
how numbers and ratios are written, the verdict on a ratio, an item of the
table, and which document of a suite is read.

SAME is the one threshold: a ratio within 1/SAME .. SAME is "no
difference", not worth acting on."""

SAME = 1.1      # a ratio within 1/SAME .. SAME: "nemo does not help here"


def fmt_ns(v):
    if v is None:
        return "-"
    if v >= 1e6:
        return f"{v / 1e6:.2f} ms"
    return f"{v / 1000:.1f} us" if v >= 10000 else f"{v:.0f} ns"


def fmt_x(r):
    """A ratio: 183x, 18.3x, 1.28x."""
    if r is None:
        return "-"
    if r >= 100:
        return f"{r:.0f}x"
    return f"{r:.1f}x" if r >= 10 else f"{r:.2f}x"


def fmt_rate(v):
    if v is None:
        return "-"
    if v >= 1e6:
        return f"{v / 1e6:.2f}M"
    return f"{v / 1e3:.1f}k" if v >= 1e4 else f"{v:.0f}"


def fmt_gap(ns_):
    us = ns_ / 1000
    return f"{us / 1000:g} ms" if us >= 1000 else f"{us:g} us"


def verdict(r):
    """helps / same / worse for a ratio where above 1 means nemo is better:
    better or worse by SAME or more, judged as printed (two decimals), so
    that the text never says "1.10x: no difference"."""
    if r is None:
        return "same"
    if round(r, 2) >= SAME:
        return "helps"
    return "worse" if r > 0 and round(1 / r, 2) >= SAME else "same"


def _item(key, title, use="", why="", caveat="", verdict_="info", measured=True, run=""):
    return {"key": key, "title": title, "measured": measured, "use": use, "why": why,
            "not": caveat, "verdict": verdict_, "run": run}


def _not_measured(key, title, run, why=""):
    return _item(key, title, why=why, verdict_="not measured", measured=False, run=run,
                 use=f"Not measured: run `{run}`.")


def latest(runs, suite):
    """The most recent document of a suite with rows (ratios are taken
    within one run), and how many documents of the suite there were."""
    docs = [r for r in runs if r.suite == suite and r.rows]
    if not docs:
        return None, 0
    return max(docs, key=lambda r: (r.started_at or "", str(r.path))), len(docs)


def _lat(r, key="latency_ns"):
    return f"p50 {fmt_ns(r[key]['p50'])}, p99 {fmt_ns(r[key]['p99'])}"


def _p99(r, key="latency_ns"):
    return r[key]["p99"]


def _ratio(a, b):
    """a / b, None where b is not positive."""
    return a / b if a is not None and b else None


def _compare(nemo_v, base_v, base_label):
    """'1.28x faster than X' / 'within 1.1x of X (1.02x: no difference)' /
    'slower than X (0.80x)', for latencies (lower is better)."""
    r = _ratio(base_v, nemo_v)
    v = verdict(r)
    if v == "helps":
        return f"{fmt_x(r)} faster than {base_label}"
    if v == "same":
        return f"within {SAME}x of {base_label} ({fmt_x(r)}: no difference)"
    return f"slower than {base_label} ({fmt_x(r)})"
