"""The rows of nemo-bench event-loop (bench/suites/evloop.c, docs/bench-json.md
"Event-loop rows"): two senders flood one receiving place, which waits

  nemo-place-fd     in epoll on nemo_place_fd, then nemo_poll;
  nemo-place-wait   in nemo_place_wait;
  eventfd-ring      (no nemo) in epoll on an eventfd written after every
                    push into a per-sender ring, then drains the rings;

in scenarios flood (as fast as they can) and paused (each sender pauses
50 us every 100 messages).  The suite's reading and its section of the
report stay together here, as mpi.py's do."""
import html

from . import rows as suite_rows

SUITE = "event-loop"
FD, WAIT, BASE = "nemo-place-fd", "nemo-place-wait", "eventfd-ring"
MECHS = (FD, WAIT, BASE)
SCENARIOS = ("flood", "paused")
STATS = ("min", "p50", "p90", "p99", "max", "mean", "stddev")
NUMBERS = ("msgs_per_s", "messages", "seconds", "iterations", "empty_iterations", "empty_share",
           "wakeups_per_msg", "kicks_per_msg", "trials")

WHAT = {FD: "epoll_wait on nemo_place_fd, then nemo_poll",
        WAIT: "nemo_place_wait (no event loop)",
        BASE: "no nemo: a ring per sender, an eventfd write per message, epoll_wait + read + drain"}


def is_row(suite, row):
    return suite == SUITE and isinstance(row, dict)


def check_row(row, where, problems):
    """True if the row can be read; else a precise complaint in problems."""
    return suite_rows.check_row(row, where, problems, NUMBERS, "msgs_per_s_stats", STATS)


def newest(runs):
    """The newest event-loop document with rows (ratios are within one run), or None."""
    return suite_rows.newest(runs, SUITE)


def by_key(rows):
    """{(mechanism, scenario): row}."""
    return {(r["mechanism"], r["scenario"]): r for r in rows}


def rate(v):
    if v is None:
        return "-"
    if v >= 1e6:
        return f"{v / 1e6:.2f}M"
    return f"{v / 1e3:.1f}k" if v >= 1e4 else f"{v:.0f}"


def sentences(rows):
    """What the run shows, computed from its rows: per scenario, the event
    loop on nemo's descriptor against the eventfd hand-off."""
    t = by_key(rows)
    out = []
    for scen in SCENARIOS:
        fd, base, wait = t.get((FD, scen)), t.get((BASE, scen)), t.get((WAIT, scen))
        if fd and base and base["msgs_per_s"] > 0:
            out.append(f"{scen}: the loop on nemo_place_fd took {rate(fd['msgs_per_s'])} messages/s, "
                       f"{fd['msgs_per_s'] / base['msgs_per_s']:.2f}x the eventfd hand-off's "
                       f"{rate(base['msgs_per_s'])}; it woke {fd['wakeups_per_msg']:.4f} times per message "
                       f"against {base['wakeups_per_msg']:.4f}, and {fd['empty_share'] * 100:.1f}% of its "
                       f"iterations found nothing against {base['empty_share'] * 100:.1f}%.")
        if fd and wait and fd["msgs_per_s"] > 0:
            out.append(f"{scen}: nemo_place_wait took {rate(wait['msgs_per_s'])} messages/s, "
                       f"{wait['msgs_per_s'] / fd['msgs_per_s']:.2f}x the event loop's.")
    return out


def _e(x):
    return html.escape(str(x))


def section(runs):
    """The report's section, or "" when there is no event-loop document."""
    run = newest(runs)
    if run is None:
        return ""
    rows = sorted(run.rows, key=lambda r: (SCENARIOS.index(r["scenario"]) if r["scenario"] in SCENARIOS else 9,
                                           MECHS.index(r["mechanism"]) if r["mechanism"] in MECHS else 9))
    cfg = run.config
    out = [f"<p>nemo-bench event-loop: {_e(cfg.get('senders', 2))} senders flood one receiving place, "
           f"{_e(cfg.get('rounds', '?'))} rounds of {_e(cfg.get('seconds', '?'))} s per row, interleaved. "
           "<i>flood</i>: the senders send as fast as they can; <i>paused</i>: each pauses "
           f"{_e(cfg.get('pause_us', 50))} us every {_e(cfg.get('pause_every', 100))} messages, so that "
           "the receiver runs dry and waits again. Default settings throughout.</p>",
           "<ul>" + "".join(f"<li>{_e(s)}</li>" for s in sentences(rows)) + "</ul>",
           "<table><tr><th>mechanism</th><th>scenario</th><th>msgs/s</th><th>range over rounds</th>"
           "<th>msgs per iteration</th><th>empty iterations</th><th>wake-ups/msg</th><th>kicks/msg</th>"
           "<th>full waits/msg</th><th>receiver CPU/msg</th></tr>"]
    for r in rows:
        st = r["msgs_per_s_stats"]
        out.append(f"<tr><td>{_e(r['mechanism'])}</td><td>{_e(r['scenario'])}</td><td>{rate(r['msgs_per_s'])}</td>"
                   f"<td>{rate(st['min'])} - {rate(st['max'])}</td>"
                   f"<td>{r.get('msgs_per_iteration', 0):.1f}</td><td>{r['empty_share'] * 100:.1f}%</td>"
                   f"<td>{r['wakeups_per_msg']:.4f}</td><td>{r['kicks_per_msg']:.4f}</td>"
                   f"<td>{r.get('full_waits_per_msg', 0):.4f}</td><td>{r.get('cpu_ns_per_msg', 0):.0f} ns</td></tr>")
    out.append("</table><p>" + "; ".join(f"<i>{_e(m)}</i>: {_e(w)}" for m, w in WHAT.items()) +
               ". An iteration is one return of the receiver's wait; an empty one handled nothing (it was "
               "woken for messages an earlier iteration had taken). Wake-ups are the receiver's voluntary "
               "context switches; kicks, the wake-ups the senders made (nemo's counters over the domain; "
               "the eventfd writes).</p>")
    if any(r.get("oversubscribed") for r in rows):
        out.append("<p class=warn>The senders shared a CPU (fewer CPUs than threads): the rates say as much "
                   "about the scheduler as about the mechanisms.</p>")
    return "\n".join(out)
