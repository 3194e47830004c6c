"""One self-contained HTML page: images as data URIs, inline CSS, no
external resources."""
import base64
import html

from . import analysis, load

CSS = """body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222;line-height:1.45}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
th{background:#f1f3f5}td:first-child,th:first-child{text-align:left}figure{margin:1.5em 0}
figcaption{font-size:.9em;color:#444;max-width:950px}img{max-width:100%}.warn{color:#a61e4d}
code{background:#f1f3f5;padding:0 .2em}"""


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


def _preload(prows):
    s = analysis.preload_summary(prows)
    several = len({x["file"] for x in s}) > 1
    out = ["<table><tr><th>program</th>" + ("<th>file</th>" if several else "") +
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
               "(CPython threads handing a token through <code>threading.Lock</code>s; every switch "
               "goes through the GIL's condvars), <i>pool</i> (a producer feeding a pool of twice "
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


def _advice(runs, urows, brows, trows=(), prows=()):
    items = []
    for w in analysis.winners(urows):
        t = (f"<b>{e(w['scenario'])}</b>: fastest median is <b>{e(w['p50'])}</b> ({ns(w['p50_ns'])})")
        if "p50_next" in w:
            t += f", {w['p50_margin']:.2f}x ahead of {e(w['p50_next'])}"
        t += f"; best tail (p99) is {e(w['p99'])} ({ns(w['p99_ns'])})."
        items.append(t)
    for scen, k, best, at in analysis.best_broadcast(brows):
        others = ", ".join(f"{e(r['mechanism'])}{' (the floor)' if r['mechanism'] == 'spin' else ''} "
                           f"{ns(r['last_ns']['p50'])}" for r in at if r is not best)
        floor = analysis.broadcast_floor(best)
        x = f", {best['last_ns']['p50'] / floor:.1f}x one-way spin" if floor else ""
        items.append(f"<b>broadcast to {k}, {e(scen)}</b>: <b>{e(best['mechanism'])}</b> wakes the "
                     f"last waiter soonest ({ns(best['last_ns']['p50'])} median{x}"
                     f"{'; ' + others if others else ''}).")
    for x in analysis.throughput_summary(list(trows)):
        if x["vs_baseline"] is not None:
            items.append(f"<b>throughput</b> (batch {x['batch']}): <b>{e(x['mechanism'])}</b> moves "
                         f"{rate(x['p50'])} (median interval), {x['vs_baseline']:.2f}x "
                         f"{e(x['baseline'])}, with {x['kicks_per_msg']:.4f} kicks per message.")
    for x in analysis.preload_summary(list(prows)):
        if x["mode"] == analysis.PRELOAD_DEFAULT and x["vs_glibc"] is not None:
            verdict = "faster" if x["vs_glibc"] >= 1 else "<span class=warn>slower</span>"
            items.append(f"<b>interposer, default policy</b>: <b>{e(x['program'])}</b> runs "
                         f"{x['vs_glibc']:.2f}x its glibc rate ({_count(x['p50'])} against "
                         f"{_count(x['baseline_p50'])} {e(x['unit'])}/s): {verdict} under "
                         f"<code>LD_PRELOAD=libnemo-preload.so</code>.")
    for r in sorted(urows, key=lambda r: -r["latency_ns"]["p99"] / max(analysis.p50(r), 1))[:3]:
        items.append(f"Heaviest tail: {e(r['mechanism'])} / {e(r['scenario'])} has p99 "
                     f"{r['latency_ns']['p99'] / max(analysis.p50(r), 1):.1f}x its median.")
    for mech, scen, b, a in analysis.probe_jumps(runs):
        items.append(f"<span class=warn>{e(mech)} / {e(scen)}: the cache-line probe moved from "
                     f"{b:.0f} to {a:.0f} ns during the row: the host moved the vCPUs; compare it "
                     f"with care.</span>")
    return "<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def page(runs, figures, problems, outdir):
    urows = analysis.unicast_rows(runs)
    brows = analysis.broadcast_rows(runs)
    trows = analysis.throughput_rows(runs)
    prows = analysis.preload_rows(runs)
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
             "<h2>Summary</h2>", _summary(urows) if urows else "<p>No unicast results.</p>",
             *(["<h2>Broadcast</h2>", _broadcast(brows)] if brows else []),
             *(["<h2>Throughput</h2>", _throughput(trows)] if trows else []),
             *(["<h2>What the interposer does to real programs</h2>", _preload(prows)] if prows else []),
             "<h2>What to use on this machine</h2>", _advice(runs, urows, brows, trows, prows),
             "<h2>Figures</h2>"]
    for name, caption in figures:
        data = base64.b64encode((outdir / name).read_bytes()).decode()
        parts.append(f"<figure><img src=\"data:image/png;base64,{data}\" alt=\"{e(name)}\">"
                     f"<figcaption>{e(caption)}</figcaption></figure>")
        if name == "coherence.png":
            parts.append(_coherence_classes(runs))
    other = [r for run in runs if run.suite not in ("unicast", "broadcast", "coherence", "policy")
             for r in run.rows if not load.is_throughput_row(run.suite, r)
             and not load.is_preload_row(run.suite, r)]
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
