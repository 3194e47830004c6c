"""rows.py - what the suites whose rows carry a mechanism, a scenario,
numbers and one stats block share (event-loop, request-reply): the row
check and the choice of the newest document."""


def number(v):
    """A JSON number (not a bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_row(row, where, problems, numbers, stats_key, stats):
    """True if the row can be read: mechanism and scenario strings, every
    key of numbers a number, row[stats_key] a dict with every key of
    stats a number; else one precise complaint appended to problems."""
    for k in ("mechanism", "scenario"):
        if not isinstance(row.get(k), str):
            problems.append(f"{where}.{k}: missing")
            return False
    for k in numbers:
        if not number(row.get(k)):
            problems.append(f"{where}.{k}: missing or not a number")
            return False
    st = row.get(stats_key)
    if not isinstance(st, dict) or not all(number(st.get(k)) for k in stats):
        problems.append(f"{where}.{stats_key}: missing or not STATS")
        return False
    return True


def newest(runs, suite):
    """The newest document of suite with rows (ratios are within one run), or None."""
    docs = [run for run in runs if run.suite == suite and run.rows]
    return max(docs, key=lambda run: (run.started_at or "", str(run.path))) if docs else None
