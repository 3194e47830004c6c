"""Reading nemo-bench JSON (docs/bench-json.md) with precise complaints.

A malformed file or a bad row never stops the report: the problem is
recorded as "FILE: PATH: what" and everything valid is kept.
"""
import json
import pathlib

from . import evloop, mpi, reqreply

STATS = ("min", "p50", "p90", "p99", "max", "mean", "stddev")
ROW_REQUIRED = ("mechanism", "scenario", "src_cpu", "dst_cpu", "trials", "latency_ns", "sender_ns")
THROUGHPUT_REQUIRED = ("mechanism", "scenario", "src_cpu", "dst_cpu", "trials", "seconds", "batch",
                       "messages", "msgs_per_s", "msgs_per_s_stats", "kicks_per_msg")
PRELOAD_REQUIRED = ("mechanism", "mode", "trials", "rate_per_s", "rate_per_s_stats", "interposed")
APP_REQUIRED = ("mechanism", "shape", "places", "runtime_s", "requests", "delay_ns", "delay_hist",
                "interrupts", "polls")
SYSCOST_REQUIRED = ("mechanism", "trials", "cost_ns", "btw_ns")


class Run:
    """One JSON document: its suite, machine, config and valid rows."""

    def __init__(self, path, doc, rows):
        self.path = path
        self.suite = doc.get("suite", "?")
        self.machine = doc.get("machine", {}) if isinstance(doc.get("machine"), dict) else {}
        self.config = doc.get("config", {}) if isinstance(doc.get("config"), dict) else {}
        self.started_at = doc.get("started_at", "")
        self.duration_s = doc.get("duration_s", 0)
        self.rows = rows


def _check_stats(obj, where, problems):
    if not isinstance(obj, dict):
        problems.append(f"{where}: missing or not an object")
        return False
    for k in STATS:
        if not isinstance(obj.get(k), (int, float)):
            problems.append(f"{where}.{k}: missing")
            return False
    return True


def is_throughput_row(suite, row):
    """A row of the throughput suite, to be read as one: the suite's rows
    carry rates instead of latencies (docs/bench-json.md).  A row of that
    suite that has latencies is read as a latency row (and lands in the
    report's table of other results)."""
    return suite == "throughput" and isinstance(row, dict) and "latency_ns" not in row


def _check_throughput_row(row, where, problems):
    for k in THROUGHPUT_REQUIRED:
        if k not in row:
            problems.append(f"{where}.{k}: missing")
            return False
    for k in ("msgs_per_s", "kicks_per_msg", "seconds"):
        if not isinstance(row[k], (int, float)) or isinstance(row[k], bool):
            problems.append(f"{where}.{k}: not a number")
            return False
    return _check_stats(row["msgs_per_s_stats"], f"{where}.msgs_per_s_stats", problems)


def is_preload_row(suite, row):
    """A row of the preload suite (a program's rate plain or preloaded),
    read as one; like throughput rows, a row of that suite with latencies
    is read as a latency row."""
    return suite == "preload" and isinstance(row, dict) and "latency_ns" not in row


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_preload_row(row, where, problems):
    for k in PRELOAD_REQUIRED:
        if k not in row:
            problems.append(f"{where}.{k}: missing")
            return False
    if not _number(row["rate_per_s"]):
        problems.append(f"{where}.rate_per_s: not a number")
        return False
    if not isinstance(row["mode"], str) or not isinstance(row["mechanism"], str):
        problems.append(f"{where}.mode: not a string")
        return False
    rounds = row.get("rate_per_s_rounds")
    if rounds is not None and not (isinstance(rounds, list) and all(_number(x) for x in rounds)):
        problems.append(f"{where}.rate_per_s_rounds: not a list of numbers")
        return False
    return _check_stats(row["rate_per_s_stats"], f"{where}.rate_per_s_stats", problems)


def is_app_row(suite, row):
    """A row of the app suite (Perkovic & Keleher's study)."""
    return suite == "app" and isinstance(row, dict) and "latency_ns" not in row


def is_syscost_row(suite, row):
    """A row of the syscost suite (the table of Minnich, Floren & McKie)."""
    return suite == "syscost" and isinstance(row, dict) and "latency_ns" not in row


def is_multicast_row(suite, row):
    """A row of the multicast suite: latency per group size, a membership
    change's cost, or the machine's constants for the simulator."""
    return suite == "multicast" and isinstance(row, dict)


def _check_multicast_row(row, where, problems):
    if "mechanism" not in row:
        problems.append(f"{where}.mechanism: missing")
        return False
    if row["mechanism"] == "mcast-constants":
        for k in ("send", "latency", "atomic", "node"):
            if not _number(row.get(k)):
                problems.append(f"{where}.{k}: not a number")
                return False
        return True
    key = "change_ns" if row.get("scenario") == "membership" else "latency_ns"
    if not _check_required(row, (key, "n", "group", "topology"), where, problems):
        return False
    return _check_stats(row[key], f"{where}.{key}", problems)


def _check_required(row, keys, where, problems):
    for k in keys:
        if k not in row:
            problems.append(f"{where}.{k}: missing")
            return False
    return True


def _check_app_row(row, where, problems):
    if not _check_required(row, APP_REQUIRED, where, problems):
        return False
    h = row["delay_hist"]
    if not (isinstance(h, dict) and all(isinstance(h.get(k), list) for k in ("upper_edges_ns", "counts", "sum_ns"))
            and len(h["counts"]) == len(h["sum_ns"]) == len(h["upper_edges_ns"])):
        problems.append(f"{where}.delay_hist: malformed")
        return False
    if not _number(row["runtime_s"]) or row["runtime_s"] <= 0:
        problems.append(f"{where}.runtime_s: not a positive number")
        return False
    return _check_stats(row["delay_ns"], f"{where}.delay_ns", problems)


def _check_syscost_row(row, where, problems):
    if not _check_required(row, SYSCOST_REQUIRED, where, problems):
        return False
    ok = _check_stats(row["cost_ns"], f"{where}.cost_ns", problems)
    if row["btw_ns"] is not None:
        ok = _check_stats(row["btw_ns"], f"{where}.btw_ns", problems) and ok
    return ok


def _check_row(row, where, problems, suite=None):
    if not isinstance(row, dict):
        problems.append(f"{where}: not an object")
        return False
    if mpi.is_row(suite, row):
        return mpi.check_row(row, where, problems)
    if evloop.is_row(suite, row):
        return evloop.check_row(row, where, problems)
    if reqreply.is_row(suite, row):
        return reqreply.check_row(row, where, problems)
    if is_app_row(suite, row):
        return _check_app_row(row, where, problems)
    if is_multicast_row(suite, row):
        return _check_multicast_row(row, where, problems)
    if is_syscost_row(suite, row):
        return _check_syscost_row(row, where, problems)
    if is_throughput_row(suite, row):
        return _check_throughput_row(row, where, problems)
    if is_preload_row(suite, row):
        return _check_preload_row(row, where, problems)
    for k in ROW_REQUIRED:
        if k not in row:
            problems.append(f"{where}.{k}: missing")
            return False
    ok = _check_stats(row["latency_ns"], f"{where}.latency_ns", problems)
    ok = _check_stats(row["sender_ns"], f"{where}.sender_ns", problems) and ok
    if "waiters" in row:
        for k in ("first_ns", "last_ns", "spread_ns"):
            ok = _check_stats(row.get(k), f"{where}.{k}", problems) and ok
    return ok


def load_file(path, problems):
    """Return a Run, or None (with the reason appended to problems)."""
    path = pathlib.Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        problems.append(f"{path}: cannot read JSON: {e}")
        return None
    if not isinstance(doc, dict) or doc.get("tool") != "nemo-bench":
        problems.append(f"{path}: tool: not a nemo-bench document")
        return None
    results = doc.get("results")
    if not isinstance(results, list):
        problems.append(f"{path}: results: missing")
        return None
    rows = []
    for i, row in enumerate(results):
        mine = []
        if _check_row(row, f"results[{i}]", mine, doc.get("suite")):
            row["_file"] = path
            rows.append(row)
        problems.extend(f"{path}: {m}" for m in mine)
    return Run(path, doc, rows)


def expand(paths):
    """Files named, and the *.json files of folders named."""
    out = []
    for p in map(pathlib.Path, paths):
        out.extend(sorted(p.glob("*.json")) if p.is_dir() else [p])
    return out


def load_all(paths):
    problems = []
    runs = [r for r in (load_file(p, problems) for p in expand(paths)) if r is not None]
    return runs, problems
