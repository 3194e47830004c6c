"""The rows of nemo-bench request-reply (bench/suites/reqreply.c,
docs/bench-json.md "Request-reply rows"): a client waits for each answer
of a server, a thread (scenario threads) or a forked process (processes),
through

  nemo-am        nemo_am_send, answered by nemo_am_reply (a domain, or a
                 shared domain across processes);
  unix-socket    a Unix stream socket pair;
  eventfd-ring   a ring and an eventfd each way.

Per row the round trip with one request in flight after a think time
(rtt_ns), and requests per second with several in flight.  The suite's
reading and its section of the report stay together here, as mpi.py's do."""
import html

from . import rows as suite_rows

SUITE = "request-reply"
NEMO = "nemo-am"
BASELINES = ("unix-socket", "eventfd-ring")
SCENARIOS = ("threads", "processes")
STATS = ("min", "p50", "p90", "p99", "max", "mean", "stddev")
NUMBERS = ("trials", "requests_per_s", "requests", "seconds", "in_flight", "client_wakeups_per_rtt",
           "server_wakeups_per_rtt")

WHAT = {NEMO: "nemo_am_send, answered by nemo_am_reply from the server's handler; both wait in nemo_place_wait",
        "unix-socket": "a Unix stream socket pair, 8 bytes each way",
        "eventfd-ring": "a ring in shared memory and an eventfd each way; the waiting side blocks in read"}


def is_row(suite, row):
    return suite == SUITE and isinstance(row, dict)


def check_row(row, where, problems):
    """True if the row can be read; else a precise complaint in problems."""
    return suite_rows.check_row(row, where, problems, NUMBERS, "rtt_ns", STATS)


def newest(runs):
    """The newest request-reply document with rows (ratios are within one run), or None."""
    return suite_rows.newest(runs, SUITE)


def rtt50(r):
    return r["rtt_ns"]["p50"]


def compare(rows, scenario):
    """The nemo row of a scenario, its fastest baseline by round-trip median
    and its baseline with the most requests per second (None where absent)."""
    rs = [r for r in rows if r["scenario"] == scenario]
    nemo = next((r for r in rs if r["mechanism"] == NEMO), None)
    base = [r for r in rs if r["mechanism"] in BASELINES]
    return {"nemo": nemo, "base_rtt": min(base, key=rtt50) if base else None,
            "base_tp": max(base, key=lambda r: r["requests_per_s"]) if base else None}


def _ns(v):
    if v is None:
        return "-"
    if v >= 1e6:
        return f"{v / 1e6:.2f} ms"
    return f"{v / 1000:.1f} us" if v >= 10000 else f"{v:.0f} ns"


def _rate(v):
    if v >= 1e6:
        return f"{v / 1e6:.2f}M"
    return f"{v / 1e3:.1f}k" if v >= 1e4 else f"{v:.0f}"


def sentences(rows):
    """What the run shows, computed from its rows."""
    out = []
    for scen in SCENARIOS:
        c = compare(rows, scen)
        n, b, t = c["nemo"], c["base_rtt"], c["base_tp"]
        if n and b and rtt50(n) > 0:
            out.append(f"Between {scen}: a round trip through nemo takes {_ns(rtt50(n))} at p50 and "
                       f"{_ns(n['rtt_ns']['p99'])} at p99, against {_ns(rtt50(b))} and {_ns(b['rtt_ns']['p99'])} "
                       f"for {b['mechanism']} ({rtt50(b) / rtt50(n):.2f}x; above 1.00x nemo is faster).")
        if n and t and t["requests_per_s"] > 0:
            out.append(f"Between {scen}, {n['in_flight']} requests in flight: nemo answers "
                       f"{_rate(n['requests_per_s'])} requests/s, {n['requests_per_s'] / t['requests_per_s']:.2f}x "
                       f"{t['mechanism']}'s {_rate(t['requests_per_s'])}.")
    return out


def _e(x):
    return html.escape(str(x))


def section(runs):
    """The report's section, or "" when there is no request-reply document."""
    run = newest(runs)
    if run is None:
        return ""
    rows = sorted(run.rows, key=lambda r: (SCENARIOS.index(r["scenario"]) if r["scenario"] in SCENARIOS else 9,
                                           rtt50(r)))
    cfg = run.config
    think = cfg.get("delay_us") or ["?", "?"]
    out = [f"<p>nemo-bench request-reply: a client on CPU {_e(cfg.get('src_cpu', '?'))} asks a server on CPU "
           f"{_e(cfg.get('dst_cpu', '?'))} and waits for each answer; the server is a thread of the same "
           "process (<i>threads</i>) or a forked process (<i>processes</i>: nemo through a shared domain, "
           f"<code>nemo/xproc.h</code>). The round trip is measured one request at a time, after a think time "
           f"of {_e(think[0])}-{_e(think[-1])} us (so the server is waiting when the request comes); the "
           f"rate with {_e(cfg.get('in_flight', '?'))} requests in flight. Default settings throughout.</p>",
           "<ul>" + "".join(f"<li>{_e(s)}</li>" for s in sentences(run.rows)) + "</ul>",
           "<table><tr><th>mechanism</th><th>scenario</th><th>round trip p50</th><th>p99</th>"
           "<th>requests/s</th><th>wake-ups per round trip (client / server)</th>"
           "<th>CPU per round trip (client / server)</th><th>kicks per round trip</th></tr>"]
    for r in rows:
        k = r.get("kicks_per_rtt")
        out.append(f"<tr><td>{_e(r['mechanism'])}</td><td>{_e(r['scenario'])}</td><td>{_ns(rtt50(r))}</td>"
                   f"<td>{_ns(r['rtt_ns']['p99'])}</td><td>{_rate(r['requests_per_s'])}</td>"
                   f"<td>{r['client_wakeups_per_rtt']:.2f} / {r['server_wakeups_per_rtt']:.2f}</td>"
                   f"<td>{_ns(r.get('client_cpu_ns_per_rtt'))} / {_ns(r.get('server_cpu_ns_per_rtt'))}</td>"
                   f"<td>{'-' if k is None else f'{k:.2f}'}</td></tr>")
    out.append("</table><p>" + "; ".join(f"<i>{_e(m)}</i>: {_e(w)}" for m, w in WHAT.items()) +
               ". Wake-ups are voluntary context switches (about 1 per round trip where that side slept "
               "for each request or answer); CPU is each side's thread time (the client's without its think "
               "time): what waiting costs, polling or asleep.</p>")
    skipped = [x for x in (cfg.get("skipped") or []) if isinstance(x, dict)]
    if skipped:
        out.append("<p class=warn>Not run here: " + "; ".join(
            f"{_e(x.get('mechanism'))}: {_e(x.get('reason'))}" for x in skipped) + ".</p>")
    return "\n".join(out)
