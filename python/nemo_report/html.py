"""One self-contained HTML page: images as data URIs, inline CSS, no
external resources."""
import base64
import html
import re

from . import advice, analysis, evloop, load, mpi, papers, reqreply

CSS = """body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222;line-height:1.45}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{background:#f1f3f5}td:first-child,th:first-child{text-align:left}figure{margin:1.5em 0}
figcaption{font-size:.9em;color:#444;max-width:950px}img{max-width:100%}.warn{color:#a61e4d}
code{background:#f1f3f5;padding:0 .2em}table.advice td{text-align:left;vertical-align:top}
tr.nm td{color:#777}"""


def e(x):
    return html.escape(str(x))


def ns(v):
    if v is None:
        return "-"
    return f"{v / 1000:.1f} us" if v >= 10000 else f"{v:.0f} ns"


def _machine(runs):
    m = next((r.machine for r in runs if r.machine), {})
    rows = [("CPU", m.get("cpu_model")), ("CPUs", m.get("cpus")), ("kernel", m.get("kernel")),
            ("virtualised", f"{m.get('virtualized')} ({m.get('hypervisor') or 'no hypervisor'})"),
            ("cycle counter", f"{m.get('clock_source')} at {m.get('tsc_hz', 0) / 1e9:.3f} GHz, "
                              f"read cost {m.get('clock_overhead_ns', 0):.0f} ns")]
    out = ["<table>"] + [f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in rows] + ["</table>"]
    runs_t = ["<table><tr><th>suite</th><th>file</th><th>started</th><th>duration</th><th>rows</th></tr>"]
    for r in runs:
        runs_t.append(f"<tr><td>{e(r.suite)}</td><td>{e(r.path.name)}</td><td>{e(r.started_at)}</td>"
                      f"<td>{r.duration_s:.1f} s</td><td>{len(r.rows)}</td></tr>")
    return "\n".join(out + runs_t + ["</table>"])


def _summary(urows):
    s = analysis.summary(urows)
    if s:
        out = ["<table><tr><th>nemo mechanism</th><th>scenario</th><th>p50</th><th>p99</th>"
               "<th>best baseline (same scenario)</th><th>baseline p50</th><th>faster by (p50)</th>"
               "<th>faster by (p99)</th><th>x cache-line floor</th></tr>"]
        for x in sorted(s, key=lambda x: (x["scenario"], x["mechanism"])):
            f = lambda v: "-" if v is None else f"{v:.2f}x"
            out.append(f"<tr><td>{e(x['mechanism'])}</td><td>{e(x['scenario'])}</td><td>{ns(x['p50'])}</td>"
                       f"<td>{ns(x['p99'])}</td><td>{e(x['baseline'])}</td><td>{ns(x['baseline_p50'])}</td>"
                       f"<td>{f(x['speedup_p50'])}</td><td>{f(x['speedup_p99'])}</td><td>{f(x['vs_floor'])}</td></tr>")
        out.append("</table><p>\"Faster by\" is the best baseline's latency divided by nemo's, in the "
                   "same run: above 1.00x nemo is faster. \"x cache-line floor\" compares with a "
                   "receiver polling one cache line (<code>spin</code>), the hardware's floor.</p>")
        return "\n".join(out)
    out = ["<p>No nemo mechanisms in these results yet: baselines ranked per scenario.</p><table>"
           "<tr><th>scenario</th><th>mechanism</th><th>p50</th><th>p99</th><th>x best</th></tr>"]
    for scen, rs in sorted(analysis.by_scenario(urows).items()):
        best = min(analysis.p50(r) for r in rs)
        for r in sorted(rs, key=analysis.p50):
            out.append(f"<tr><td>{e(scen)}</td><td>{e(r['mechanism'])}</td><td>{ns(analysis.p50(r))}</td>"
                       f"<td>{ns(r['latency_ns']['p99'])}</td><td>{analysis.p50(r) / best:.2f}x</td></tr>")
    return "\n".join(out + ["</table>"])


def rate(v):
    if v is None:
        return "-"
    return f"{v / 1e6:.2f} M/s" if v >= 1e5 else f"{v:.0f} /s"


def _throughput(trows):
    s = analysis.throughput_summary(trows)
    several = len({x["file"] for x in s}) > 1
    out = ["<table><tr><th>mechanism</th>" + ("<th>file</th>" if several else "") +
           "<th>CPUs</th><th>batch</th><th>msgs/s p50</th><th>range (min - max)</th>"
           f"<th>p50 / {e(analysis.THROUGHPUT_BASELINE)} p50</th><th>kicks/msg</th></tr>"]
    for x in sorted(s, key=lambda x: (x["file"], x["batch"], -x["p50"])):
        ratio = "-" if x["vs_baseline"] is None else f"{x['vs_baseline']:.2f}x"
        out.append(f"<tr><td>{e(x['mechanism'])}</td>" + (f"<td>{e(x['file'])}</td>" if several else "") +
                   f"<td>{x['src_cpu']}&gt;{x['dst_cpu']}</td><td>{x['batch']}</td>"
                   f"<td>{rate(x['p50'])}</td><td>{rate(x['min'])} - {rate(x['max'])}</td>"
                   f"<td>{ratio}</td><td>{x['kicks_per_msg']:.4f}</td></tr>")
    out.append("</table><p>One sender streams small messages to one receiver on another CPU, "
               "which polls and checks every value. Each row is measured over many short "
               "intervals: p50 is the median interval's rate, the range the slowest and the fastest. "
               f"The ratio divides by {e(analysis.THROUGHPUT_BASELINE)} (Concurrency Kit's "
               "single-producer ring) of the same run: above 1.00x, more messages per second. "
               "kicks/msg counts the wake-ups the sender had to make per message: a polling "
               "receiver needs none.</p>")
    return "\n".join(out)


PRELOAD_POLICY_NOTE = ("Measured with the default policy (no <code>NEMO_WAIT</code>, no calibration "
                       "profile) unless the mode says otherwise: <i>nemo-default</i> is what a user "
                       "gets from <code>LD_PRELOAD=libnemo-preload.so</code> alone; "
                       "<i>nemo-POLICY</i> ran with <code>NEMO_WAIT=POLICY</code>.")


def _count(v):
    """A rate without its unit: 2150, 0.13 M."""
    if v is None:
        return "-"
    return f"{v / 1e6:.2f} M" if v >= 1e5 else f"{v:.0f}"


def _ratio_cell(v):
    if v is None:
        return "-"
    return f"<span class=warn>{v:.2f}x</span>" if v < 1 else f"{v:.2f}x"


def _preload_modes(prows):
    """Hand-off results at a glance: per program, its glibc rate and its
    ratio to it under each mode, the default (no settings) first."""
    s = analysis.preload_summary(prows)
    files = sorted({x["file"] for x in s})
    out = []
    for f in files:
        xs = [x for x in s if x["file"] == f]
        modes = advice.mode_order({x["mode"] for x in xs})
        pre = [m for m in modes if m != analysis.PRELOAD_BASELINE]
        head = "".join(f"<th>{e(m)}{' (no settings: what you get)' if m == analysis.PRELOAD_DEFAULT else ''}</th>"
                       for m in pre)
        out.append((f"<p>{e(f)}:</p>" if len(files) > 1 else "") +
                   f"<table><tr><th>program</th><th>glibc</th>{head}</tr>")
        for prog in dict.fromkeys(x["program"] for x in xs):
            by = {x["mode"]: x for x in xs if x["program"] == prog}
            g = by.get(analysis.PRELOAD_BASELINE)
            cells = "".join(f"<td>{_ratio_cell(by[m]['vs_glibc'])} ({_count(by[m]['p50'])}/s)</td>"
                            if m in by else "<td>-</td>" for m in pre)
            unit = next(iter(by.values()))["unit"]
            out.append(f"<tr><td>{e(prog)}</td><td>{_count(g['p50']) if g else '-'} {e(unit)}/s</td>{cells}</tr>")
        out.append("</table>")
    out.append("<p>Each cell: the program's median rate under <code>LD_PRELOAD=libnemo-preload.so</code> "
               "over its median rate with glibc, in the same run. <i>nemo-default</i> ran with no "
               "<code>NEMO_WAIT</code> and no calibration profile: the default policy "
               "(<code>adaptive</code>), what a user gets with no settings; the other columns forced "
               "<code>NEMO_WAIT</code>.</p>")
    return "\n".join(out)


def _preload(prows):
    s = analysis.preload_summary(prows)
    several = len({x["file"] for x in s}) > 1
    out = [_preload_modes(prows),"<table><tr><th>program</th>" + ("<th>file</th>" if several else "") +
           "<th>mode</th><th>rate (median of rounds)</th><th>ratio vs glibc</th>"
           "<th>range over rounds (min - max)</th><th>rounds</th><th>interposed</th></tr>"]
    for x in s:
        out.append(f"<tr><td>{e(x['program'])}</td>" + (f"<td>{e(x['file'])}</td>" if several else "") +
                   f"<td>{e(x['mode'])}</td><td>{_count(x['p50'])} {e(x['unit'])}/s</td>"
                   f"<td>{_ratio_cell(x['vs_glibc'])}</td>"
                   f"<td>{_count(x['min'])} - {_count(x['max'])} /s</td><td>{x['rounds']}</td>"
                   f"<td>{'yes' if x['interposed'] else 'no'}</td></tr>")
    out.append("</table><p>Ordinary programs that know nothing of nemo, each run plain (<i>glibc</i>) "
               "and under the interposer, in one run, interleaved in rounds: "
               "<i>condvar-handoff</i> (two threads, one mutex, one condvar), <i>python-handoff</i> "
               "(CPython threads handing a token through <code>threading.Lock</code>s, which are "
               "semaphores; every switch goes through the GIL's condvars), <i>pool</i> (a producer feeding a pool of twice "
               "the CPUs in workers through a mutex and two condvars). The ratio divides the "
               "median rate by the same program's glibc median of the same run: above 1.00x the "
               "program ran faster under the interposer, below 1.00x (marked) slower. "
               f"{PRELOAD_POLICY_NOTE}</p>")
    return "\n".join(out)


def _broadcast(brows):
    t = analysis.broadcast_table(brows)
    out = ["<table><tr><th>mechanism</th><th>scenario</th><th>policy</th><th>K</th>"
           "<th>first p50</th><th>last p50</th><th>last p99</th><th>one-way spin p50</th>"
           "<th>last p50 / one-way</th><th>ctx/trial</th></tr>"]
    over = False
    for x in t:
        over |= x["oversubscribed"]
        k = f"{x['waiters']}{'*' if x['oversubscribed'] else ''}"
        xf = "-" if x["x_floor"] is None else f"{x['x_floor']:.1f}x"
        ctx = "-" if x["ctx"] is None else f"{x['ctx']:.2f}"
        out.append(f"<tr><td>{e(x['mechanism'])}</td><td>{e(x['scenario'])}</td>"
                   f"<td>{e(x['policy'] or '-')}</td><td>{k}</td><td>{ns(x['first_p50'])}</td>"
                   f"<td>{ns(x['last_p50'])}</td><td>{ns(x['last_p99'])}</td><td>{ns(x['floor'])}</td>"
                   f"<td>{xf}</td><td>{ctx}</td></tr>")
    out.append("</table><p>One sender wakes K waiters, each on its own CPU where the machine has "
               "enough. <i>polling</i>: the waiters are still within their spin budget when the "
               "broadcast comes; <i>blocked</i>: they sleep in the kernel. \"One-way spin\" is the "
               "median latency of one cache-line transfer from the sender to the slowest of the "
               "row's waiter CPUs, measured in the same run; \"last / one-way\" says how many such "
               "transfers the last waiter's wake-up costs. ctx/trial about 1: the waiters slept; "
               "about 0: they polled."
               + (" K*: oversubscribed, some waiters share a CPU (their figures say more about the "
                  "scheduler than the mechanism)." if over else "") + "</p>")
    return "\n".join(out)


def _coherence_classes(runs):
    rows = analysis.coherence_rows(runs)
    if not rows:
        return ""
    cls = analysis.coherence_classes(rows)
    out = ["<table><tr><th>distance class</th><th>pairs</th><th>one-way p50: median</th>"
           "<th>lowest - highest</th><th>half round trip p50: median</th><th>lowest - highest</th></tr>"]
    for c in cls:
        ow, rt = c["one-way"], c["round-trip"]
        pairs = (ow or rt or {}).get("pairs", 0)
        cell = lambda x: ("<td>-</td><td>-</td>" if x is None else
                          f"<td>{ns(x['median'])}</td><td>{ns(x['min'])} - {ns(x['max'])}</td>")
        out.append(f"<tr><td>{e(c['name'])}</td><td>{pairs}</td>{cell(ow)}{cell(rt)}</tr>")
    cfg = next((r.config for r in runs if r.suite == "coherence"), {})
    note = ""
    if cfg.get("pairs") == "sample":
        note = (f" A sample of {e(cfg.get('pairs_measured'))} of the {e(cfg.get('pairs_total'))} "
                "ordered pairs: from every CPU, a few of each distance class.")
    if cfg.get("trials_scaled"):
        note += f" {e(cfg.get('trials'))} trials per pair (fewer than the default: many pairs)."
    out.append("</table><p>The pairs of the map above, per topology distance class (as hwloc sees "
               f"the machine; on a VM, as the hypervisor presents it).{note}</p>")
    return "\n".join(out)


def code(text):
    """Escape a plain advice text and turn its `spans` into <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", e(text))


VERDICT_CLASS = {"worse": " class=warn", "not measured": " class=nm"}


def _advice(runs, urows=(), brows=(), trows=(), prows=()):
    """What to use on this machine: one row per scenario (advice.py), the
    names the rows use, and the warnings about rows to read with care."""
    out = ["<p>For each situation the results cover: the nemo API and wait policy to use, the "
           "numbers measured here behind it (row names are <i>mechanism/scenario</i> of the tables "
           "below), and where nemo does not help. A ratio within "
           f"{advice.SAME}x counts as no difference.</p>",
           "<table class=advice><tr><th>situation</th><th>what to use</th><th>why: measured here</th>"
           "<th>when nemo does not help</th></tr>"]
    for it in advice.advise(runs):
        cls = VERDICT_CLASS.get(it["verdict"], "")
        out.append(f"<tr{cls}><td>{code(it['title'])}</td><td>{code(it['use'])}</td>"
                   f"<td>{code(it['why'])}</td><td>{code(it['not']) or '-'}</td></tr>")
    out.append("</table>")
    src = advice.sources(runs)
    if src:
        out.append("<p>From " + "; ".join(f"{e(f)}" + (f" (the latest of {n} {e(s)} documents)" if n > 1 else "")
                                          for s, f, n in src) + ".</p>")
    leg = advice.legend(runs)
    if leg:
        out.append("<details><summary>Row names and the API they measure</summary><table>"
                   "<tr><th>row name</th><th>suite</th><th>kind</th><th>what a program calls</th></tr>")
        for x in leg:
            out.append(f"<tr><td>{e(x['name'])}</td><td>{e(x['suite'])}</td><td>{e(x['kind'])}</td>"
                       f"<td>{code(x['api'])}</td></tr>")
        out.append("</table></details>")
    warns = [f"<li class=warn>{e(mech)} / {e(scen)}: the cache-line probe moved from {b:.0f} to {a:.0f} ns "
             "during the row: the host moved the vCPUs; compare it with care.</li>"
             for mech, scen, b, a in analysis.probe_jumps(runs)]
    if warns:
        out.append("<ul>" + "".join(warns) + "</ul>")
    return "\n".join(out)


def _policy(runs):
    """The default policy against the best fixed policy, per gap."""
    run, _ = advice.latest(runs, "policy")
    table = advice.policy_table(run.rows) if run else []
    if not table:
        return ""
    pols = []
    for line in table:
        pols += [p for p in line["policies"] if p not in pols]
    pols.sort(key=lambda p: p == advice.ADAPTIVE)
    out = ["<table><tr><th>gap</th>" +
           "".join(f"<th>{e(p)}{' (default)' if p == advice.ADAPTIVE else ''}</th>" for p in pols) +
           "<th>best fixed</th><th>adaptive cost / best</th><th>adaptive latency, CPU / policy it "
           "resembles</th></tr>"]
    for line in table:
        cells = "".join(
            f"<td>{advice.fmt_ns(line['policies'][p]['latency'])} / "
            f"{advice.fmt_ns(line['policies'][p]['cpu'])}</td>" if p in line["policies"] else "<td>-</td>"
            for p in pols)
        if "cost_ratio" in line:
            over = line["latency_ratio"] > 2 or line["cpu_ratio"] > 2
            cost = (f"<span class=warn>{line['cost_ratio']:.2f}x</span>" if line["cost_ratio"] >= advice.SAME
                    else f"{line['cost_ratio']:.2f}x")
            rat = (f"{line['latency_ratio']:.2f}, {line['cpu_ratio']:.2f} vs {e(line['matched'])}"
                   + (" (tied)" if line["matched"] != line["best"] else ""))
            tail = (f"<td>{cost}</td><td{' class=warn' if over else ''}>{rat}"
                    f"{' OVER 2x' if over else ''}</td>")
        else:
            tail = "<td>-</td><td>-</td>"
        out.append(f"<tr><td>{advice.fmt_gap(line['gap_ns'])}</td>{cells}"
                   f"<td>{e(line.get('best', '-'))}</td>{tail}</tr>")
    out.append("</table>")
    vd = advice.adaptive_verdict(table)
    if vd:
        out.append(f"<p><b>Verdict:</b> {code(vd['text'])}</p>")
    out.append("<p>nemo-event with the receiver under each wait policy, the signal sent a fixed gap after "
               "the receiver starts to wait; each cell is latency p50 / the receiver's CPU per event, the "
               "median of the repeats. The best fixed policy has the least latency + CPU; "
               "<i>adaptive</i> is the default, what a program gets with no <code>NEMO_WAIT</code>. Its "
               "latency and CPU are also compared with the fixed policy it resembles among those "
               "within 1.3x of the best cost (near the break-even gap spin and block cost the same "
               "with opposite profiles), as <code>nemo-bench policy</code> does; the documented "
               "bound is 2x on each.</p>")
    return "\n".join(out)



WATCHDOG_T_NS = {"watchdog-50us": 50_000, "watchdog-1ms": 1_000_000, "check-watchdog-50us": 50_000,
                 "check-watchdog-10us": 10_000}


def _bound_sentences(arows, pooled):
    """The watchdog's bound (p99 at most T + interrupt mode's p99): on the
    run's rounds pooled (config.pooled) where the run has them, and per
    round; else on the rows' worst p99s (older files)."""
    out = []
    by = {}
    for p in pooled:
        if p.get("bound_ns") is not None:
            by.setdefault(p["mechanism"], []).append(p)
    order = {"short": 0, "nested": 1, "long": 2}
    for m, t in WATCHDOG_T_NS.items():
        held, n = analysis.app_bound_rounds(arows, m, t)
        per_round = f"; per round and shape, within in {held} of {n}" if n else ""
        if m in by:
            ps = sorted(by[m], key=lambda p: order.get(p["shape"], 9))
            shapes = " / ".join(p["shape"] for p in ps)
            above = [p for p in ps if not p["within_bound"]]
            verdict = ("within in every shape" if not above else
                       "above in " + ", ".join(f"{p['shape']} ({ns(p['delay_ns']['p99'])} against "
                                               f"{ns(p['bound_ns'])})" for p in above))
            k = ps[0]["rounds"]
            span = f"the run's {k} rounds pooled" if k > 1 else "one round"
            out.append(f"{m}: p99 delay {' / '.join(ns(p['delay_ns']['p99']) for p in ps)} in {shapes} loops "
                       f"({span}), against T + interrupt mode's p99 of "
                       f"{' / '.join(ns(p['bound_ns']) for p in ps)}: {verdict}{per_round}.")
            continue
        p99 = [r["delay_ns"]["p99"] for r in arows if r["mechanism"] == m]
        ip99 = [r["delay_ns"]["p99"] for r in arows if r["mechanism"] == "interrupt"]
        if p99 and ip99:
            w, lim = max(p99), t + max(ip99)
            out.append(f"{m}: p99 delay {ns(w)}, {'within' if w <= lim else 'above'} T + interrupt's p99 "
                       f"({ns(lim)}){per_round}.")
    return out


def app_sentences(arows, pooled=()):
    """What this machine shows in Perkovic & Keleher's study, in sentences computed from the rows."""
    out = []
    ratios = analysis.app_runtime_ratios(arows)
    for shape in ("short", "nested", "long"):
        r = ratios.get(shape)
        if not r:
            continue
        others = {m: v for m, v in r.items() if m != "interrupt"}
        if not others:
            continue
        best = min(others, key=others.get)
        line = (f"{shape} loops: the best strategy is {best}, {others[best]:.2f}x the runtime of interrupt "
                f"mode ({papers.POLLING}: within 1.01x for their best polling)")
        if "poll-send" in r and best != "poll-send":
            line += f"; poll-send, the base, takes {r['poll-send']:.2f}x"
            if r["poll-send"] <= 1.05 * others[best]:
                line += (f", within 5% of {best}: in this shape the checks come no more often than a "
                         f"place's own requests, and the waits for their replies serve the others' "
                         f"requests already (docs/polling.md)")
        out.append(line + ".")
    for m in ("poll-send", "poll-check", "interrupt"):
        a = analysis.app_share_above(arows, m, 10_000)
        b = analysis.app_share_above(arows, m, 1_000_000)
        if a is not None:
            out.append(f"{m}: {a * 100:.0f}% of the total notification delay comes from delays above 10 us, "
                       f"{b * 100:.0f}% from delays above 1 ms.")
    return out + _bound_sentences(arows, pooled)


def _app(arows, pooled=()):
    rows = sorted(arows, key=lambda r: (r["shape"], r["mechanism"]))
    parts = ["<ul>"] + [f"<li>{e(x)}</li>" for x in app_sentences(arows, pooled)] + ["</ul>",
             "<table><tr><th>strategy</th><th>shape</th><th>places</th><th>runtime</th><th>delay p50</th>"
             "<th>p99</th><th>max</th><th>signals</th><th>polls</th></tr>"]
    for r in rows:
        d = r["delay_ns"]
        parts.append(f"<tr><td>{e(r['mechanism'])}</td><td>{e(r['shape'])}</td><td>{r['places']}</td>"
                     f"<td>{r['runtime_s'] * 1e3:.1f} ms</td><td>{ns(d['p50'])}</td><td>{ns(d['p99'])}</td>"
                     f"<td>{ns(d['max'])}</td><td>{r['interrupts']}</td><td>{r['polls']}</td></tr>")
    parts.append("</table>")
    return "".join(parts)


def _syscost(srows):
    parts = ["<table><tr><th>operation</th><th>cost p50</th><th>cost p99</th><th>bits to the wire p50</th>"
             "<th>p99</th></tr>"]
    for r in srows:
        b = r["btw_ns"]
        parts.append(f"<tr><td>{e(r['mechanism'])}</td><td>{ns(r['cost_ns']['p50'])}</td>"
                     f"<td>{ns(r['cost_ns']['p99'])}</td><td>{ns(b['p50']) if b else '-'}</td>"
                     f"<td>{ns(b['p99']) if b else '-'}</td></tr>")
    parts.append("</table>")
    byname = {r["mechanism"]: r for r in srows}
    g, c = byname.get("nemo-am-send"), byname.get("nemo-am-bound")
    if g and c:
        parts.append(f"<p>The curried send costs {ns(c['cost_ns']['p50'])} against the generic "
                     f"{ns(g['cost_ns']['p50'])} ({g['cost_ns']['p50'] / c['cost_ns']['p50']:.2f}x; "
                     f"{e(papers.CURRYING)}: 3,000 / 620 cycles = 4.8x).</p>")
    w, q = byname.get("write-eventfd"), byname.get("uring-sqpoll-write")
    if w and q:
        parts.append(f"<p>The curried kernel write (io_uring SQPOLL) costs {ns(q['cost_ns']['p50'])} against "
                     f"write(2)'s {ns(w['cost_ns']['p50'])} ({q['cost_ns']['p50'] / w['cost_ns']['p50']:.2f}x) "
                     f"to submit while the kernel keeps up.</p>")
    st = byname.get("uring-sqpoll-write-stream")
    if w and st:
        parts.append(f"<p>Back to back, SQPOLL writes cost {ns(st['cost_ns']['p50'])} at p50 and "
                     f"{ns(st['cost_ns']['p99'])} at p99 (a stream faster than the kernel thread waits for "
                     f"room in the ring).</p>")
    return "".join(parts)


def _multicast(runs):
    """Latency per size, membership costs, and the simulator against the
    measured rows with this machine's constants."""
    from . import mcast_sim
    docs = [{"suite": r.suite, "machine": r.machine, "results": r.rows} for r in runs if r.suite == "multicast"]
    rows = [r for d in docs for r in d["results"] if "latency_ns" in r and "topology" in r]
    out = ["<p>nemo-bench multicast: median time for nemo_multicast to return (all members ran the "
           "function), over random groups of the source and n - 1 other places.  Oversubscribed rows "
           "(more places than CPUs) measure the scheduler as much as nemo.</p>",
           "<table><tr><th>mechanism</th><th>group</th><th>n</th><th>places</th><th>p50</th>"
           "<th>p99</th><th></th></tr>"]
    for r in sorted(rows, key=lambda r: (r["n"], r["mechanism"], r["group"])):
        out.append(f"<tr><td>{e(r['mechanism'])}</td><td>{e(r['group'])}</td><td>{r['n']}</td>"
                   f"<td>{r['places']}</td><td>{ns(r['latency_ns']['p50'])}</td>"
                   f"<td>{ns(r['latency_ns']['p99'])}</td>"
                   f"<td>{'oversubscribed' if r.get('oversubscribed') else ''}</td></tr>")
    out.append("</table>")
    chg = [r for d in docs for r in d["results"] if r.get("scenario") == "membership"]
    if chg:
        out.append("<p>Cost of one membership change (nemo_mcast_add / nemo_mcast_remove), median:</p>"
                   "<table><tr><th>mechanism</th><th>group</th><th>n</th><th>p50</th></tr>")
        for r in sorted(chg, key=lambda r: (r["n"], r["mechanism"], r["group"])):
            out.append(f"<tr><td>{e(r['mechanism'])}</td><td>{e(r['group'])}</td><td>{r['n']}</td>"
                       f"<td>{ns(r['change_ns']['p50'])}</td></tr>")
        out.append("</table>")
    try:
        k = mcast_sim.from_results(docs)
    except ValueError:
        return "\n".join(out)
    checks = mcast_sim.validate(k, docs, 16)
    if checks:
        out.append("<p>The simulator (nemo-report simulate-multicast) with this run's constants, "
                   "against the same run's measurements:</p><table><tr><th>mechanism</th><th>group</th>"
                   "<th>n</th><th>measured</th><th>simulated</th><th>ratio</th></tr>")
        for c in checks:
            out.append(f"<tr><td>{e(c['mechanism'])}</td><td>{e(c['group'])}</td><td>{c['n']}</td>"
                       f"<td>{ns(c['measured_ns'])}</td><td>{ns(c['simulated_ns'])}</td>"
                       f"<td>{c['ratio']:.2f}</td></tr>")
        out.append("</table>")
    return "\n".join(out)


def _paper_heading(what, authors, title):
    """A section's heading that names its paper by authors and title."""
    return f"<h2>{e(what)} (after {e(authors)}, <i>{e(title)}</i>)</h2>"


def page(runs, figures, problems, outdir):
    urows = analysis.unicast_rows(runs)
    brows = analysis.broadcast_rows(runs)
    trows = analysis.throughput_rows(runs)
    prows = analysis.preload_rows(runs)
    arows = analysis.app_rows(runs)
    srows = analysis.syscost_rows(runs)
    policy = _policy(runs)
    parts = ["<!doctype html><html><head><meta charset=utf-8><title>nemo report</title>",
             f"<style>{CSS}</style></head><body><h1>nemo: event notification on this machine</h1>",
             "<p><b>How to read this.</b> Each mechanism wakes a thread on another CPU. Latency is "
             "measured from just before the sender signals to just after the receiver wakes, many "
             "thousand times. The median (p50) is the typical cost; p99 is the tail a runtime "
             "feels. All comparisons are ratios between rows of the same run on this machine. "
             "Scenarios: <i>polling</i> (the receiver watches memory), <i>blocked</i> (it sleeps in "
             "the kernel), <i>loaded</i> (it sleeps and a busy thread shares its CPU), <i>busy</i> "
             "(it computes).</p>",
             "<h2>Machine</h2>", _machine(runs),
             "<h2>What to use on this machine</h2>", _advice(runs, urows, brows, trows, prows),
             "<h2>Summary</h2>", _summary(urows) if urows else "<p>No unicast results.</p>",
             *(["<h2>Broadcast</h2>", _broadcast(brows)] if brows else []),
             *(["<h2>Throughput</h2>", _throughput(trows)] if trows else []),
             *(["<h2>What the interposer does to real programs</h2>", _preload(prows)] if prows else []),
             *(["<h2>The default wait policy against fixed policies</h2>", policy] if policy else []),
             *([_paper_heading("Polling strategies", papers.POLLING, papers.POLLING_TITLE),
                _app(arows, analysis.app_pooled(runs))] if arows else []),
             *([_paper_heading("Fast paths by currying", papers.CURRYING, papers.CURRYING_TITLE), _syscost(srows)]
               if srows else []),
             *([_paper_heading("Acknowledged multicast", papers.MULTICAST, papers.MULTICAST_TITLE), _multicast(runs)]
               if any(run.suite == "multicast" for run in runs) else []),
             *(["<h2>Event loops: a place on its descriptor</h2>", evloop.section(runs)] if evloop.newest(runs) else []),
             *(["<h2>Request and reply: threads and processes</h2>", reqreply.section(runs)]
               if reqreply.newest(runs) else []),
             *(["<h2>Across MPI ranks (nemo-bench-mpi)</h2>", mpi.section(runs)] if mpi.newest(runs) else []),
             "<h2>Figures</h2>"]
    for name, caption in figures:
        data = base64.b64encode((outdir / name).read_bytes()).decode()
        parts.append(f"<figure><img src=\"data:image/png;base64,{data}\" alt=\"{e(name)}\">"
                     f"<figcaption>{e(caption)}</figcaption></figure>")
        if name == "coherence.png":
            parts.append(_coherence_classes(runs))
    other = [r for run in runs if run.suite not in ("unicast", "broadcast", "coherence", "policy", mpi.SUITE,
                                                    evloop.SUITE, reqreply.SUITE)
             for r in run.rows if not load.is_throughput_row(run.suite, r)
             and not load.is_preload_row(run.suite, r) and not load.is_app_row(run.suite, r)
             and not load.is_syscost_row(run.suite, r) and not load.is_multicast_row(run.suite, r)]
    if other:
        parts.append("<h2>Other results</h2><table><tr><th>suite file</th><th>mechanism</th>"
                     "<th>scenario</th><th>p50</th><th>p99</th><th>msgs/s</th></tr>")
        for r in other:
            parts.append(f"<tr><td>{e(r['_file'].name)}</td><td>{e(r['mechanism'])}</td>"
                         f"<td>{e(r['scenario'])}</td><td>{ns(analysis.p50(r))}</td>"
                         f"<td>{ns(r['latency_ns']['p99'])}</td><td>{e(r.get('msgs_per_s', '-'))}</td></tr>")
        parts.append("</table>")
    if problems:
        parts.append("<h2>Problems with the input</h2><ul class=warn>" +
                     "".join(f"<li>{e(p)}</li>" for p in problems) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)
