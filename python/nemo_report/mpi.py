"""The rows of nemo-bench-mpi (suite "mpi", bench/mpi/nemo_bench_mpi.c,
docs/bench-json.md "mpi rows"): nemo domains across MPI ranks.

Three kinds of row, by mechanism:
  mpi-pingpong, nemo-am-remote   half a round trip between two ranks: raw
                                 MPI_Send/MPI_Recv against an active message
                                 answered by nemo_am_reply (latency_ns);
  nemo-mpi-idle                  what an idle binding's helper thread costs
                                 (cpu_percent, wakeups_per_s), per scenario
                                 (thread, watchdog);
  nemo-mpi-app                   ranks that compute and ask each other for
                                 things, per progress strategy (scenario):
                                 runtime_s and its ratios.
Kept apart from load.py and html.py so that the suite's reading and its
section stay together."""
import html

from . import papers
from . import rows as suite_rows

SUITE = "mpi"
LATENCY = ("mpi-pingpong", "nemo-am-remote")
IDLE = "nemo-mpi-idle"
APP = "nemo-mpi-app"
STATS = ("min", "p50", "p90", "p99", "max", "mean", "stddev")

# What each progress strategy of the app rows is (nemo/mpi.h).
STRATEGY = {
    "send": "NEMO_MPI_PROGRESS_SEND: MPI progressed at the owner's polls, waits and sends",
    "check": "NEMO_MPI_PROGRESS_CHECK: and nemo_mpi_check() in the compute loop",
    "thread-check": "NEMO_MPI_PROGRESS_THREAD, with NEMO_POLL_CHECK() in the loop",
    "watchdog": ("NEMO_MPI_PROGRESS_WATCHDOG: nemo_mpi_check() in the loop, and a watchdog thread; "
                 "the owner in interrupt mode"),
    "thread-interrupt": "NEMO_MPI_PROGRESS_THREAD, the owner in interrupt mode (no checks)",
}
IDLE_WHAT = {
    "thread": "NEMO_MPI_PROGRESS_THREAD's progress thread",
    "watchdog": "NEMO_MPI_PROGRESS_WATCHDOG's watchdog thread",
}


def is_row(suite, row):
    return suite == SUITE and isinstance(row, dict)


def check_row(row, where, problems):
    """True if the row can be read; else a precise complaint in problems."""
    mech = row.get("mechanism")
    if not isinstance(mech, str):
        problems.append(f"{where}.mechanism: missing")
        return False
    if not isinstance(row.get("scenario"), str):
        problems.append(f"{where}.scenario: missing")
        return False
    if mech in LATENCY:
        need = ("src_rank", "dst_rank", "trials")
    elif mech == IDLE:
        need = ("cpu_percent", "wakeups_per_s", "seconds")
    elif mech == APP:
        need = ("ranks", "runtime_s", "relative_to_best", "relative_to_interrupt")
    else:
        problems.append(f"{where}.mechanism: '{mech}' is not a row of nemo-bench-mpi "
                        f"(want {', '.join(LATENCY + (IDLE, APP))})")
        return False
    for k in need:
        if not suite_rows.number(row.get(k)):
            problems.append(f"{where}.{k}: missing or not a number")
            return False
    if mech in LATENCY:
        st = row.get("latency_ns")
        if not isinstance(st, dict):
            problems.append(f"{where}.latency_ns: missing or not an object")
            return False
        for k in STATS:
            if not suite_rows.number(st.get(k)):
                problems.append(f"{where}.latency_ns.{k}: missing")
                return False
    if mech == APP and row["runtime_s"] <= 0:
        problems.append(f"{where}.runtime_s: not a positive number")
        return False
    return True


def newest(runs):
    """The newest mpi document with rows (its ratios are within one run), or None."""
    return suite_rows.newest(runs, SUITE)


def latency_pairs(rows):
    """Per rank pair: {"pair": (src, dst), "mpi": row, "nemo": row, "ratio": nemo p50 / mpi p50}."""
    by = {}
    for r in rows:
        if r["mechanism"] in LATENCY:
            by.setdefault((r["src_rank"], r["dst_rank"]), {})[r["mechanism"]] = r
    out = []
    for pair in sorted(by):
        raw, am = by[pair].get("mpi-pingpong"), by[pair].get("nemo-am-remote")
        ratio = (am["latency_ns"]["p50"] / raw["latency_ns"]["p50"]
                 if raw and am and raw["latency_ns"]["p50"] > 0 else None)
        out.append({"pair": pair, "mpi": raw, "nemo": am, "ratio": ratio})
    return out


def app_best(rows):
    """The app row with the least runtime, or None."""
    app = [r for r in rows if r["mechanism"] == APP]
    return min(app, key=lambda r: r["runtime_s"]) if app else None


def _e(x):
    return html.escape(str(x))


def _ns(v):
    if v is None:
        return "-"
    return f"{v / 1000:.1f} us" if v >= 10000 else f"{v:.0f} ns"


def sentences(rows):
    """What the run shows, computed from its rows."""
    out = []
    for p in latency_pairs(rows):
        if p["ratio"] is None:
            continue
        a, b = p["pair"]
        out.append(f"Ranks {a} and {b}: an active message answered by nemo_am_reply takes "
                   f"{_ns(p['nemo']['latency_ns']['p50'])} one way at p50 against raw MPI ping-pong's "
                   f"{_ns(p['mpi']['latency_ns']['p50'])} ({p['ratio']:.2f}x; above 1.00x nemo is slower).")
    for r in rows:
        if r["mechanism"] == IDLE:
            out.append(f"Idle, {IDLE_WHAT.get(r['scenario'], r['scenario'])} used "
                       f"{r['cpu_percent']:.3f}% of a CPU and woke {r['wakeups_per_s']:.0f} times a second "
                       f"(the worst rank, over {r['seconds']:.1f} s).")
    best = app_best(rows)
    if best:
        irq = [r for r in rows if r["mechanism"] == APP and r["scenario"] == "thread-interrupt"]
        line = (f"Ranks that compute and ask each other for things: the fastest strategy is "
                f"{best['scenario']} ({best['runtime_s'] * 1e3:.1f} ms for the slowest rank")
        if irq and best is not irq[0]:
            line += f", {best['relative_to_interrupt']:.2f}x interrupt-style progress"
        out.append(line + ").")
    return out


def section(runs):
    """The report's section, or "" when there is no mpi document."""
    run = newest(runs)
    if run is None:
        return ""
    rows = run.rows
    out = [f"<p>nemo-bench-mpi, {_e(run.config.get('ranks', '?'))} ranks "
           f"({_e(run.machine.get('mpi', 'MPI'))}): a nemo domain that spans MPI ranks "
           "(<code>nemo/mpi.h</code>, docs/mpi.md). The progress strategies are "
           f"{_e(papers.POLLING)}'s polling strategies applied to MPI.</p>",
           "<ul>" + "".join(f"<li>{_e(s)}</li>" for s in sentences(rows)) + "</ul>"]
    pairs = latency_pairs(rows)
    if pairs:
        out.append("<table><tr><th>ranks</th><th>mpi-pingpong p50</th><th>p99</th>"
                   "<th>nemo-am-remote p50</th><th>p99</th><th>nemo / MPI (p50)</th></tr>")
        for p in pairs:
            cell = (lambda r: f"<td>{_ns(r['latency_ns']['p50'])}</td><td>{_ns(r['latency_ns']['p99'])}</td>"
                    if r else "<td>-</td><td>-</td>")
            ratio = "-" if p["ratio"] is None else f"{p['ratio']:.2f}x"
            out.append(f"<tr><td>{p['pair'][0]}-{p['pair'][1]}</td>{cell(p['mpi'])}{cell(p['nemo'])}"
                       f"<td>{ratio}</td></tr>")
        out.append("</table><p>Half a round trip, in alternating blocks of the same run: raw "
                   "<code>MPI_Send</code>/<code>MPI_Recv</code> of 8 bytes, and <code>nemo_am_send</code> "
                   "answered by <code>nemo_am_reply</code>, both owners polling with "
                   "<code>nemo_mpi_poll</code>.</p>")
    idle = [r for r in rows if r["mechanism"] == IDLE]
    if idle:
        out.append("<table><tr><th>idle binding</th><th>CPU used</th><th>wake-ups/s</th><th>over</th></tr>")
        for r in idle:
            out.append(f"<tr><td>{_e(IDLE_WHAT.get(r['scenario'], r['scenario']))}</td>"
                       f"<td>{r['cpu_percent']:.3f}%</td><td>{r['wakeups_per_s']:.0f}</td>"
                       f"<td>{r['seconds']:.1f} s</td></tr>")
        out.append("</table><p>With no traffic, the helper thread of a binding (the worst rank); "
                   "MPICH's own asynchronous progress spins a whole core instead.</p>")
    app = [r for r in rows if r["mechanism"] == APP]
    if app:
        out.append("<table><tr><th>strategy</th><th>what it is</th><th>runtime (slowest rank)</th>"
                   "<th>x best</th><th>x interrupt-style</th></tr>")
        for r in sorted(app, key=lambda r: r["runtime_s"]):
            out.append(f"<tr><td>{_e(r['scenario'])}</td><td>{_e(STRATEGY.get(r['scenario'], '-'))}</td>"
                       f"<td>{r['runtime_s'] * 1e3:.1f} ms</td><td>{r['relative_to_best']:.2f}x</td>"
                       f"<td>{r['relative_to_interrupt']:.2f}x</td></tr>")
        units, period = app[0].get("units"), app[0].get("period")
        out.append(f"</table><p>Every rank computes {_e(units)} units of about 5 us and, every "
                   f"{_e(period)} units, asks a random other rank for something and waits for the "
                   "answer; the runtime is the slowest rank's.</p>")
    return "\n".join(out)
