"""What to use for request and reply: a client that waits for each answer
of a server in another thread, another process or another MPI rank.

Read from the request-reply suite (threads, processes: nemo-am against a
Unix socket pair and eventfd + ring) and from nemo-bench-mpi (ranks:
nemo-am-remote against raw MPI ping-pong).  The round trip's median
decides (the client waits for each answer); the requests per second with
several in flight, the tail and the CPU that waiting costs are said
beside it.  Every number is read from the rows of one document."""
from . import mpi, reqreply
from .advice_base import SAME, _compare, _item, _lat, _not_measured, _ratio, fmt_ns, fmt_rate, fmt_x, verdict

RR_RUN = "nemo-bench request-reply"
MPI_RUN = "mpiexec -n 2 nemo-bench-mpi"

TITLES = {"threads": "Request and reply between threads (a client waits for each answer)",
          "processes": "Request and reply between processes (a client waits for each answer)"}
API = {"threads": ("`nemo_am_send` to the server's place, answered by `nemo_am_reply` from its handler; "
                   "the client waits with `nemo_place_wait` (or `nemo_place_wait_for` on a word its reply "
                   "handler sets)"),
       "processes": ("a shared domain (`nemo_xproc_create` in one process, `nemo_xproc_attach` in the "
                     "others, `nemo_xproc_join` a place per thread): `nemo_am_send` to "
                     "`nemo_xproc_place_id(x, id)`, answered by `nemo_am_reply` from a handler registered "
                     "with `nemo_xproc_handle_am`; both wait with `nemo_place_wait`")}
BASE_API = {"unix-socket": "a Unix stream socket pair (`socketpair`, `read` / `write`)",
            "eventfd-ring": "a ring in shared memory and an `eventfd` each way (`write` after a push, "
                            "`read` to wait)"}
POLICY = {"threads": "`nemo_place_set_policy`", "processes": "`nemo_xproc_set_policy`"}


def _label(r):
    return f"{r['mechanism']}/{r['scenario']}"


def _skipped(run, scenario):
    for x in run.config.get("skipped") or []:
        if isinstance(x, dict) and x.get("mechanism") == f"{reqreply.NEMO} ({scenario})":
            return f" nemo-bench skipped it: {x.get('reason')}."
    return ""


def request_reply(run, scenario):
    """Between threads or between processes: nemo_am_reply against the
    fastest of the socket and the eventfd hand-off of the same run."""
    key, title = f"reqreply-{scenario}", TITLES[scenario]
    if run is None:
        return _not_measured(key, title, RR_RUN)
    c = reqreply.compare(run.rows, scenario)
    n, b, t = c["nemo"], c["base_rtt"], c["base_tp"]
    if n is None:
        return _not_measured(key, title, f"{RR_RUN} --mechanisms nemo-am",
                             f"The run has no {reqreply.NEMO}/{scenario} row." + _skipped(run, scenario))
    why = [f"{_label(n)}: round trip {_lat(n, 'rtt_ns')}; {fmt_rate(n['requests_per_s'])} requests/s with "
           f"{n['in_flight']} in flight"]
    if b is None:
        return _item(key, title, f"{API[scenario]}.", "; ".join(why) + ".",
                     "No row without nemo (unix-socket, eventfd-ring) in this run: nothing to compare with; "
                     f"run `{RR_RUN}` with its default mechanisms.", "info")
    r_lat = _ratio(reqreply.rtt50(b), reqreply.rtt50(n))
    v = verdict(r_lat)
    why.append(f"the fastest without nemo, {_label(b)}: round trip {_lat(b, 'rtt_ns')}: nemo is "
               f"{_compare(reqreply.rtt50(n), reqreply.rtt50(b), b['mechanism'])} at the median, "
               f"{_compare(n['rtt_ns']['p99'], b['rtt_ns']['p99'], b['mechanism'])} at p99")
    r_tp = _ratio(n["requests_per_s"], t["requests_per_s"])
    why.append(f"with {n['in_flight']} in flight nemo answers {fmt_x(r_tp)} the requests of {_label(t)} "
               f"({fmt_rate(t['requests_per_s'])}/s)")
    caveat = []
    if v == "helps":
        use = f"{API[scenario]}; the default policy."
    elif v == "same":
        use = (f"Either: {BASE_API[b['mechanism']]} answers as fast here. Use nemo for what it adds (handlers "
               f"by action, replies matched by tag, one API across threads, processes and ranks): {API[scenario]}.")
        caveat.append(f"nemo does not help here: the round trip's median is within {SAME}x of {b['mechanism']}'s.")
    else:
        use = f"{BASE_API[b['mechanism']][0].upper()}{BASE_API[b['mechanism']][1:]}: its round trip is shorter here."
        caveat.append(f"nemo is slower here: {_label(b)} answers in {fmt_ns(reqreply.rtt50(b))} against "
                      f"{fmt_ns(reqreply.rtt50(n))} at the median.")
    if verdict(r_tp) == "worse":
        caveat.append(f"With many requests in flight {t['mechanism']} moves more ({fmt_x(1 / r_tp)} nemo's).")
    elif verdict(r_tp) == "helps" and v != "helps":
        use += f" With many requests in flight nemo moves more ({fmt_x(r_tp)} {t['mechanism']})."
    nc, bc = n.get("server_cpu_ns_per_rtt"), b.get("server_cpu_ns_per_rtt")
    if nc is not None and bc and round(nc / bc, 2) >= SAME:
        caveat.append(f"Waiting costs nemo's server more CPU: {fmt_ns(nc)} per round trip against {fmt_ns(bc)} "
                      f"for {b['mechanism']} ({n['server_wakeups_per_rtt']:.2f} wake-ups per round trip "
                      f"against {b['server_wakeups_per_rtt']:.2f}): its default policy polls before it sleeps. "
                      f"Where CPUs are scarce, `NEMO_WAIT=block` ({POLICY[scenario]}) gives the CPU back at "
                      "once.")
    return _item(key, title, use, "; ".join(why) + f" ({RR_RUN}).", " ".join(caveat), v, run=RR_RUN)


def request_reply_ranks(run):
    """Between MPI ranks: nemo-bench-mpi's remote active message answered
    by nemo_am_reply against raw MPI ping-pong (half round trips), and the
    progress strategy that served ranks that compute best."""
    key, title = "reqreply-ranks", "Request and reply between MPI ranks"
    if run is None:
        return _not_measured(key, title, MPI_RUN)
    pairs = mpi.latency_pairs(run.rows)
    both = [p for p in pairs if p["nemo"] and p["mpi"]]
    if not both:
        have = {m for p in pairs for m, r in (("nemo-am-remote", p["nemo"]), ("mpi-pingpong", p["mpi"])) if r}
        lack = [m for m in ("nemo-am-remote", "mpi-pingpong") if m not in have]
        return _not_measured(key, title, MPI_RUN, f"The mpi document has no {' and no '.join(lack)} row.")
    p = both[0]
    nm, mp = p["nemo"], p["mpi"]
    a, b = p["pair"]
    r = _ratio(mp["latency_ns"]["p50"], nm["latency_ns"]["p50"])
    v = verdict(r)
    why = [f"ranks {a} and {b}: nemo-am-remote half round trip {_lat(nm)} against mpi-pingpong {_lat(mp)}: nemo "
           f"is {_compare(nm['latency_ns']['p50'], mp['latency_ns']['p50'], 'raw MPI')} at the median, "
           f"{_compare(nm['latency_ns']['p99'], mp['latency_ns']['p99'], 'raw MPI')} at p99"]
    if len(both) > 1:
        why.append(f"{len(both)} rank pairs measured; the first is quoted")
    best = mpi.app_best(run.rows)
    strategy = ""
    if best is not None:
        strategy = (f" For ranks that compute between requests, the progress strategy `{best['scenario']}` "
                    f"({mpi.STRATEGY.get(best['scenario'], best['scenario'])}) was fastest here.")
        why.append(f"ranks that compute and ask each other: {best['scenario']} finished in "
                   f"{best['runtime_s'] * 1e3:.1f} ms (slowest rank), {best['relative_to_interrupt']:.2f}x "
                   "interrupt-style progress")
    api = ("`nemo_am_send` to a place of another rank (a domain over MPI, `nemo/mpi.h`), answered by "
           "`nemo_am_reply`.")
    caveat = ""
    if v == "helps":
        use = api + strategy
    else:
        use = ("Raw `MPI_Send` / `MPI_Recv` where only speed matters; nemo across ranks for what it adds (handlers "
               "by action, one API for threads, processes and ranks, dead ranks found): " + api + strategy)
        caveat = (f"nemo does not help here: within {SAME}x of raw MPI at the median." if v == "same" else
                  f"nemo is slower here: raw MPI ping-pong takes {fmt_ns(mp['latency_ns']['p50'])} against "
                  f"{fmt_ns(nm['latency_ns']['p50'])}: the agent's hand-over costs more than it saves.")
    return _item(key, title, use, "; ".join(why) + " (nemo-bench-mpi).", caveat, v, run=MPI_RUN)
