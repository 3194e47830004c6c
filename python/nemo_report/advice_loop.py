"""What to use for a thread that runs an event loop (epoll, libuv, GLib)
and receives messages: nemo's descriptor (nemo_place_fd + nemo_poll)
against the eventfd hand-off a program writes without nemo, from the
event-loop suite's rows, flooded and paused.  Messages per second decide;
the wake-ups, kicks and empty iterations per message are said beside
them, and nemo_place_wait where the thread needs no loop at all.  Every
number is read from the rows of one document."""
from . import evloop
from .advice_base import SAME, _item, _not_measured, _ratio, fmt_rate, fmt_x, verdict

LOOP_RUN = "nemo-bench event-loop"
API = ("`nemo_place_fd` once, its descriptor in your loop (`epoll_ctl` with `EPOLLIN`, or libuv's "
       "`uv_poll_start`), `nemo_poll` whenever it is readable; senders `nemo_am_send` to the place. "
       "Default settings.")
BASE_API = ("a ring per sender and an `eventfd` written after every push, the loop reading the eventfd "
            "and draining the rings")


def _line(r):
    return (f"{r['mechanism']}/{r['scenario']} {fmt_rate(r['msgs_per_s'])} msgs/s, "
            f"{r['wakeups_per_msg']:.4f} wake-ups and {r['kicks_per_msg']:.4f} kicks per message, "
            f"{r['empty_share'] * 100:.1f}% empty iterations")


def event_loop(run):
    key, title = "event-loop", "A thread that runs an event loop (epoll, libuv) and receives messages"
    if run is None:
        return _not_measured(key, title, LOOP_RUN)
    t = evloop.by_key(run.rows)
    scens = [s for s in evloop.SCENARIOS if (evloop.FD, s) in t]
    if not scens:
        return _not_measured(key, title, f"{LOOP_RUN} --mechanisms {evloop.FD},{evloop.BASE}",
                             f"The run has no {evloop.FD} row.")
    why, verdicts, caveat = [], {}, []
    for s in scens:
        fd, base = t[(evloop.FD, s)], t.get((evloop.BASE, s))
        line = _line(fd)
        if base is not None:
            r = _ratio(fd["msgs_per_s"], base["msgs_per_s"])
            verdicts[s] = verdict(r)
            line += f"; {_line(base)}: nemo takes {fmt_x(r)} its messages"
        why.append(line)
    missing = [s for s in scens if s not in verdicts]
    if not verdicts:
        return _item(key, title, API, "; ".join(why) + f" ({LOOP_RUN}).",
                     f"No {evloop.BASE} row in this run: nothing without nemo to compare with; run `{LOOP_RUN}` "
                     "with its default mechanisms.", "info", run=LOOP_RUN)
    vs = set(verdicts.values())
    v = "helps" if vs == {"helps"} else "worse" if "worse" in vs and "helps" not in vs else \
        "same" if vs == {"same"} else "info"
    if v == "helps":
        use = API
    elif v == "worse":
        use = f"Without nemo: {BASE_API}; it moved more messages here."
        caveat.append("nemo's descriptor takes fewer messages than the eventfd hand-off here (" +
                      ", ".join(s for s, x in verdicts.items() if x == "worse") + ").")
    else:
        use = (f"Either: {BASE_API} keeps up here. Use nemo for what it adds (handlers by action, replies, "
               f"no ring to write): {API}")
        lose = [s for s, x in verdicts.items() if x != "helps"]
        caveat.append(f"nemo does not help {'when ' + ' or '.join(lose) if lose else 'here'}: "
                      + ("slower" if "worse" in vs else f"within {SAME}x") + " of the eventfd hand-off.")
    if missing:
        caveat.append(f"No {evloop.BASE} row for {', '.join(missing)}: not compared there.")
    for s in scens:
        fd, wait = t[(evloop.FD, s)], t.get((evloop.WAIT, s))
        if wait is None:
            continue
        rw = _ratio(wait["msgs_per_s"], fd["msgs_per_s"])
        why.append(f"{evloop.WAIT}/{s} (no loop) {fmt_rate(wait['msgs_per_s'])} msgs/s, {fmt_x(rw)} the loop's")
        if verdict(rw) == "helps":
            caveat.append(f"A thread with nothing else to wait for takes more from `nemo_place_wait` ({fmt_x(rw)} "
                          f"when {s}): an event loop pays an `epoll_wait` and a `read` per wake-up.")
    return _item(key, title, use, "; ".join(why) + f" ({LOOP_RUN}).", " ".join(caveat), v, run=LOOP_RUN)
