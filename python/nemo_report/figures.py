"""The report's figures.  Each function writes one PNG and returns
(filename, caption), or None when the data for it is absent."""
import csv

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from . import analysis, papers  # noqa: E402

DPI = 110


def _label(r):
    return f"{r['mechanism']} / {r['scenario']}"


def _save(fig, outdir, name):
    fig.tight_layout()
    fig.savefig(outdir / name, dpi=DPI)
    plt.close(fig)
    return name


def _samples(row):
    """Raw latency samples if the CSV is there, else None."""
    rel = row.get("samples_file")
    if not rel:
        return None
    path = row["_file"].parent / rel
    try:
        with open(path) as f:
            return np.array([float(x["latency_ns"]) for x in csv.DictReader(f)])
    except (OSError, KeyError, ValueError):
        return None


def _cdf_points(row, key="latency_cdf_ns"):
    """(values, fractions) of a CDF: raw samples when present, else the
    101 percentiles stored in the JSON."""
    raw = _samples(row) if key == "latency_cdf_ns" else None
    if raw is not None and len(raw):
        v = np.sort(raw)
        return v, np.arange(1, len(v) + 1) / len(v)
    pts = row.get(key)
    if not pts or len(pts) != 101:
        return None
    return np.array(pts), np.linspace(0, 1, 101)


def latency_boxes(rows, outdir):
    rows = [r for r in rows if r.get("latency_cdf_ns")]
    if not rows:
        return None
    rows = sorted(rows, key=lambda r: (r["scenario"], analysis.p50(r)))
    stats = []
    for r in rows:
        c = r["latency_cdf_ns"]
        stats.append({"med": c[50], "q1": c[25], "q3": c[75], "whislo": c[1], "whishi": c[99],
                      "label": _label(r), "fliers": []})
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.5))
    bp = ax.bxp(stats, vert=False, showfliers=False, patch_artist=True)
    for patch, r in zip(bp["boxes"], rows):
        patch.set_facecolor("#e4572e" if analysis.is_nemo(r["mechanism"]) else "#9bc1bc")
    ax.set_xscale("log")
    ax.set_xlabel("one-way wake-up latency, ns (log)")
    ax.grid(axis="x", alpha=0.3)
    name = _save(fig, outdir, "latency_boxes.png")
    return name, ("One-way latency per mechanism and scenario: from the sender's cycle counter just "
                  "before it signals to the receiver's right after it wakes. Box: 25th-75th "
                  "percentile, line: median, whiskers: 1st and 99th percentile. nemo's mechanisms in "
                  "red, baselines in green. Log scale.")


def latency_cdfs(rows, outdir):
    rows = [r for r in rows if r.get("latency_cdf_ns")]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for r in sorted(rows, key=analysis.p50):
        pts = _cdf_points(r)
        if pts is None:
            continue
        ax.plot(pts[0], pts[1], label=_label(r), lw=2 if analysis.is_nemo(r["mechanism"]) else 1,
                ls="-" if analysis.is_nemo(r["mechanism"]) else "--")
    ax.set_xscale("log")
    ax.set_xlabel("one-way wake-up latency, ns (log)")
    ax.set_ylabel("fraction of trials")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="lower right")
    name = _save(fig, outdir, "latency_cdfs.png")
    return name, ("Cumulative distribution of the one-way latency (every raw sample when the run "
                  "kept them, else the 101 stored percentiles). Further left is faster; a long tail "
                  "to the right is the jitter a runtime sees. nemo's mechanisms solid, baselines dashed.")


def sender_cost(rows, outdir):
    rows = [r for r in rows if "sender_ns" in r and r["mechanism"] != "spin-rtt"]
    if not rows:
        return None
    rows = sorted(rows, key=lambda r: r["sender_ns"]["p50"])
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(rows) + 1.5))
    y = np.arange(len(rows))
    p50s = [r["sender_ns"]["p50"] for r in rows]
    p99s = [r["sender_ns"]["p99"] for r in rows]
    ax.barh(y, p50s, color=["#e4572e" if analysis.is_nemo(r["mechanism"]) else "#9bc1bc" for r in rows])
    ax.scatter(p99s, y, marker="|", color="black", s=80, label="p99")
    ax.set_yticks(y)
    ax.set_yticklabels([_label(r) for r in rows], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("time the sender spends inside the signalling call, ns (log); bar p50, tick p99")
    ax.grid(axis="x", alpha=0.3)
    name = _save(fig, outdir, "sender_cost.png")
    return name, ("Sender cost: the time between the sender's two cycle-counter reads around its "
                  "signalling call. A syscall costs microseconds; a store to a line the receiver "
                  "watches costs tens of nanoseconds.")


def _scenarios(rows):
    """The scenarios of broadcast rows, polling first."""
    return sorted({r["scenario"] for r in rows}, key=lambda s: (s != "polling", s))


def broadcast_vs_k(brows, outdir):
    if not brows:
        return None
    scens = _scenarios(brows)
    fig, axes = plt.subplots(1, len(scens), figsize=(6.5 * len(scens) + 1, 5), squeeze=False)
    any_over = False
    several = len({str(r.get("_file")) for r in brows}) > 1

    def line_key(r):       # one line per mechanism (and file, given several runs)
        return (str(r["_file"].name) if several else "", r["mechanism"])

    keys = sorted({line_key(r) for r in brows})
    colors = {k: f"C{i % 10}" for i, k in enumerate(keys)}   # one colour per line
    for ax, scen in zip(axes[0], scens):
        rows = [r for r in brows if r["scenario"] == scen]
        for lk in sorted({line_key(r) for r in rows}):
            rs = sorted((r for r in rows if line_key(r) == lk), key=lambda r: r["waiters"])
            m = f"{lk[1]} ({lk[0]})" if several else lk[1]
            k = [r["waiters"] for r in rs]
            over = [bool(r.get("oversubscribed")) for r in rs]
            any_over |= any(over)
            for key, ls in (("first_ns", ":"), ("last_ns", "-")):
                med = [r[key]["p50"] for r in rs]
                p99 = [r[key]["p99"] for r in rs]
                ax.plot(k, med, ls, color=colors[lk], label=f"{m} {key[:-3]} waiter (p50)")
                if key == "last_ns":
                    ax.fill_between(k, med, p99, color=colors[lk], alpha=0.08)
                for x, y, o in zip(k, med, over):
                    ax.plot([x], [y], "o", color=colors[lk], markersize=4,
                            markerfacecolor="none" if o else colors[lk])
        # The floor: one cache-line transfer to the slowest waiter CPU.
        floor = {}
        for r in rows:
            f = analysis.broadcast_floor(r)
            if f and (not several or line_key(r)[0] == keys[0][0]):   # the first run's
                floor.setdefault(r["waiters"], []).append(f)
        if floor:
            ks = sorted(floor)
            fl = [float(np.median(floor[k])) for k in ks]
            ax.plot(ks, fl, "--", color="#555555", lw=1, label="one-way spin, slowest waiter CPU (p50)")
            if scen == "polling":
                ax.plot(ks, [3 * f for f in fl], ":", color="#999999", lw=1, label="3x one-way spin")
        ks_all = sorted({r["waiters"] for r in rows})
        if len(ks_all) > 1 and ks_all[-1] / ks_all[0] >= 4:
            ax.set_xscale("log", base=2)
        ax.set_xticks(ks_all)
        ax.set_xticklabels([str(k) for k in ks_all])
        ax.minorticks_off()
        ax.set_xlabel("waiters K")
        ax.set_ylabel("latency from the broadcast, ns")
        ax.set_yscale("log")
        ax.set_title(f"{scen}: waiters {'polling' if scen == 'polling' else 'asleep in the kernel'}",
                     fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6.5)
    name = _save(fig, outdir, "broadcast_k.png")
    return name, ("Broadcast, per scenario: latency from the sender's signal to the first (dotted) and "
                  "the last (solid) of K waiters to wake, median per K; the band reaches the last "
                  "waiter's 99th percentile. Every waiter stamps its own wake-up. Grey dashed: the one-way spin "
                  "latency from the sender to the slowest of the waiter CPUs, measured in the same run "
                  "(polling: and 3x that)."
                  + (" Hollow markers: oversubscribed rows, where waiters share a CPU." if any_over else ""))


def spread_cdf(brows, outdir):
    if not brows:
        return None
    kmax = max(r["waiters"] for r in brows)
    rows = [r for r in brows if r["waiters"] == kmax and r.get("spread_cdf_ns")]
    if not rows or kmax < 2:
        return None
    fig, ax = plt.subplots(figsize=(8, 5))
    for r in sorted(rows, key=lambda r: (r["scenario"] != "polling", r["scenario"], r["mechanism"])):
        ax.plot(np.maximum(np.array(r["spread_cdf_ns"]), 1), np.linspace(0, 1, 101),
                ls="-" if r["scenario"] == "polling" else "--", label=_label(r))
    ax.set_xscale("log")
    ax.set_xlabel(f"standard deviation of the {kmax} wake-up times of one broadcast, ns (log)")
    ax.set_ylabel("fraction of broadcasts")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    name = _save(fig, outdir, "broadcast_spread.png")
    return name, (f"Synchrony of a broadcast to {kmax} waiters: for each broadcast, the standard "
                  "deviation of the waiters' wake-up times; the curve is its distribution over "
                  "broadcasts (polling solid, blocked dashed). Further left: the waiters wake closer "
                  "together.")


HEATMAP_MAX_TICKS = 16        # tick labels per axis at most
HEATMAP_ANNOTATE_MAX = 16     # CPUs up to which every cell shows its number


def heatmap_layout(n, values):
    """How to draw an n x n CPU heatmap of `values` (the measured cells)
    legibly at 2 to 64+ CPUs: the panel size grows with n (capped), tick
    labels are thinned to at most HEATMAP_MAX_TICKS per axis, cells carry
    numbers only up to HEATMAP_ANNOTATE_MAX CPUs, and the colour scale
    spans the 1st to 99th percentile beyond 8 CPUs, so that a few outliers
    (a pair measured while the host moved a vCPU) do not wash out the
    structure; the colour bar says when it clips."""
    v = np.asarray([x for x in values if np.isfinite(x)], dtype=float)
    step = max(1, int(np.ceil(n / HEATMAP_MAX_TICKS)))
    side = float(min(11.0, max(4.0, 2.5 + 0.13 * n)))
    if len(v) == 0:
        lo, hi = 0.0, 1.0
    elif n > 8 and len(v) >= 20:
        lo, hi = (float(x) for x in np.percentile(v, [1, 99]))
    else:
        lo, hi = float(v.min()), float(v.max())
    if hi <= lo:
        hi = lo + 1.0
    clip_lo = len(v) > 0 and v.min() < lo
    clip_hi = len(v) > 0 and v.max() > hi
    extend = {(False, False): "neither", (True, False): "min", (False, True): "max",
              (True, True): "both"}[(bool(clip_lo), bool(clip_hi))]
    return {"side": side, "ticks": list(range(0, n, step)), "vmin": lo, "vmax": hi,
            "extend": extend, "annotate": n <= HEATMAP_ANNOTATE_MAX,
            "tick_fontsize": 8 if n <= 32 else 7}


def coherence_heatmap(runs, outdir):
    rows = analysis.coherence_rows(runs)
    if not rows:
        return None
    cpus = sorted({r["src_cpu"] for r in rows} | {r["dst_cpu"] for r in rows})
    n = len(cpus)
    idx = {c: i for i, c in enumerate(cpus)}
    panels = [(s, t) for s, t in (("one-way", "one-way (spin)"), ("round-trip", "half round trip (spin-rtt)"))
              if any(r["scenario"] == s for r in rows)]
    mats = {}
    for scen, _ in panels:
        m = np.full((n, n), np.nan)
        for r in rows:
            if r["scenario"] == scen:
                m[idx[r["src_cpu"]], idx[r["dst_cpu"]]] = analysis.p50(r)
        mats[scen] = m
    lay = heatmap_layout(n, [x for m in mats.values() for x in m.ravel()])
    side = lay["side"]
    stacked = n > HEATMAP_ANNOTATE_MAX and len(panels) > 1
    if stacked:
        fig, axes = plt.subplots(len(panels), 1, figsize=(side + 1.5, side * len(panels)), squeeze=False)
        axes = axes[:, 0]
    else:
        fig, axes = plt.subplots(1, len(panels), figsize=(side * len(panels) + 1, side), squeeze=False)
        axes = axes[0]
    cmap = matplotlib.colormaps["viridis"].copy()
    cmap.set_bad("#e9ecef")
    missing = False
    for ax, (scen, title) in zip(axes, panels):
        m = mats[scen]
        missing |= bool(np.isnan(m[~np.eye(n, dtype=bool)]).any())
        im = ax.imshow(m, cmap=cmap, vmin=lay["vmin"], vmax=lay["vmax"], interpolation="nearest")
        if lay["annotate"]:
            for i in range(n):
                for j in range(n):
                    if not np.isnan(m[i, j]):
                        bright = (m[i, j] - lay["vmin"]) / (lay["vmax"] - lay["vmin"]) > 0.6
                        ax.text(j, i, f"{m[i, j]:.0f}", ha="center", va="center",
                                color="black" if bright else "white", fontsize=8 if n <= 8 else 6)
        ax.set_xticks(lay["ticks"])
        ax.set_xticklabels([cpus[i] for i in lay["ticks"]], fontsize=lay["tick_fontsize"])
        ax.set_yticks(lay["ticks"])
        ax.set_yticklabels([cpus[i] for i in lay["ticks"]], fontsize=lay["tick_fontsize"])
        ax.set_xlabel("receiver CPU")
        ax.set_ylabel("sender CPU")
        ax.set_title(f"{title}, p50 ns", fontsize=9)
        fig.colorbar(im, ax=ax, shrink=0.8, extend=lay["extend"])
    name = _save(fig, outdir, "coherence.png")
    caption = ("Cache-line latency between pairs of CPUs (median): the floor under every "
               "notification. One-way uses synchronised cycle counters; the half round trip needs "
               "none. On a VM the host may move vCPUs, so this map can change between runs.")
    if lay["extend"] != "neither":
        caption += (f" The colour scale spans the 1st to 99th percentile ({lay['vmin']:.0f}-"
                    f"{lay['vmax']:.0f} ns); the few cells beyond take its end colours.")
    if missing:
        caption += " Grey cells: pairs not measured (a sample of the pairs; see the table below)."
    if not lay["annotate"]:
        caption += " The table below summarises the pairs per topology distance class."
    return name, caption


def breakdown_bars(rows, outdir):
    parts = analysis.breakdown(rows)
    if not parts:
        return None
    fig, ax = plt.subplots(figsize=(9, 0.4 * len(parts) + 1.5))
    y = np.arange(len(parts))
    left = np.zeros(len(parts))
    for key, color, lab in (("floor", "#4c6ef5", "cache-line floor (spin p50)"),
                            ("sender", "#fab005", "sender's syscall (sender p50)"),
                            ("wake_path", "#e8590c", "rest of the wake path, receiver CPU busy"),
                            ("idle_cpu", "#868e96", "extra to wake an idle (halted) CPU")):
        vals = np.array([p[key] for p in parts])
        ax.barh(y, vals, left=left, color=color, label=lab)
        left += vals
    ax.set_yticks(y)
    ax.set_yticklabels([p["mechanism"] for p in parts])
    ax.set_xlabel("ns (estimate from medians)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0, -0.15), ncol=2)
    name = _save(fig, outdir, "breakdown.png")
    return name, ("Where a blocked wake-up's time goes (an estimate from medians of one run): the "
                  "cache-line floor (spin, polling); the sender's syscall (its sender cost); the rest "
                  "of the path when the receiver's CPU is busy (the `loaded` p50 minus the two); and "
                  "the extra for waking an idle CPU (`blocked` p50 minus `loaded` p50, never below 0).")


def policy_sweep(runs, outdir):
    rows = [r for run in runs if run.suite == "policy" for r in run.rows if "gap_ns" in r]
    if not rows:
        return None
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.5))
    for pol in sorted({r["scenario"] for r in rows}):
        gaps = sorted({r["gap_ns"] for r in rows if r["scenario"] == pol})
        lat = [np.median([analysis.p50(r) for r in rows if r["scenario"] == pol and r["gap_ns"] == g]) for g in gaps]
        cpu = [np.median([r.get("cpu_ns_per_event", 0) for r in rows if r["scenario"] == pol and r["gap_ns"] == g]) for g in gaps]
        a1.plot(np.array(gaps) / 1000, lat, marker="o", label=pol)
        a2.plot(np.array(gaps) / 1000, cpu, marker="o", label=pol)
    for a, lab in ((a1, "latency p50, ns"), (a2, "receiver CPU per event, ns")):
        a.set_xscale("log")
        a.set_yscale("log")
        a.set_xlabel("gap between waiting and the signal, us (log)")
        a.set_ylabel(lab)
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    name = _save(fig, outdir, "policy.png")
    return name, ("Wait policies across the gap between the receiver starting to wait and the "
                  "signal (median of the repeats): latency (left) and the receiver's CPU time per "
                  "event (right). Spinning wins latency and burns the whole gap; blocking costs a "
                  "wake-up; adaptive should stay near the better of the two everywhere.")


def preload_ratios(rows, outdir):
    """Each preloaded row's rate over its program's glibc rate (log scale)."""
    s = [x for x in analysis.preload_summary(rows)
         if x["mode"] != analysis.PRELOAD_BASELINE and x["vs_glibc"] is not None]
    if not s:
        return None
    files = {x["file"] for x in s}
    labels = [f"{x['program']} / {x['mode']}" + (f" ({x['file']})" if len(files) > 1 else "") for x in s]
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(s) + 1.8))
    y = np.arange(len(s))[::-1]
    ratios = np.array([x["vs_glibc"] for x in s])
    colors = ["#e4572e" if x["mode"] == analysis.PRELOAD_DEFAULT else "#f3a712" for x in s]
    # Bars grow from 1x, to the right when faster, to the left when slower.
    ax.barh(y, ratios - 1, left=1, color=colors)
    for yi, x in zip(y, s):
        pts = np.array(x["rounds_vs_glibc"])
        pts = pts[pts > 0]
        if len(pts):
            ax.scatter(pts, np.full(len(pts), yi) + (np.arange(len(pts)) % 5 - 2) * 0.06,
                       s=10, color="#333333", alpha=0.7, zorder=3)
        ax.text(x["vs_glibc"], yi, f" {x['vs_glibc']:.2f}x ", va="center", fontsize=8,
                ha="left" if x["vs_glibc"] >= 1 else "right")
    ax.axvline(1, color="black", lw=1)
    ax.set_xscale("log")
    lo = min([r for r in ratios] + [p for x in s for p in x["rounds_vs_glibc"] if p > 0])
    hi = max([r for r in ratios] + [p for x in s for p in x["rounds_vs_glibc"] if p > 0])
    ax.set_xlim(min(lo, 1) / 2, max(hi, 1) * 2)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlabel("rate under the interposer / the same program's glibc rate (log; right of 1: faster)")
    ax.grid(axis="x", alpha=0.3)
    name = _save(fig, outdir, "preload.png")
    return name, ("What the interposer does to real programs: each program's median rate preloaded "
                  "over its median rate with glibc's condvar, in the same run. Red: nemo-default, "
                  "measured with the default policy (no NEMO_WAIT, no calibration profile), what a "
                  "user gets; orange: the mode's NEMO_WAIT. Dots: each round's rate over the glibc "
                  "median.")


def _interval_rates(row):
    """Per-interval rates (msgs/s) from the row's samples CSV, or None."""
    rel = row.get("samples_file")
    if not rel:
        return None
    try:
        with open(row["_file"].parent / rel) as f:
            return np.array([float(x["msgs_per_s"]) for x in csv.DictReader(f)])
    except (OSError, KeyError, ValueError):
        return None


def throughput_rates(rows, outdir):
    if not rows:
        return None
    files = {r["_file"] for r in rows}
    rows = sorted(rows, key=lambda r: (str(r["_file"]), r["batch"], r["msgs_per_s_stats"]["p50"]))
    labels = [f"{r['mechanism']}, batch {r['batch']}" + (f" ({r['_file'].name})" if len(files) > 1 else "")
              for r in rows]
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(rows) + 1.6))
    y = np.arange(len(rows))
    p50 = np.array([r["msgs_per_s_stats"]["p50"] for r in rows]) / 1e6
    lo = np.array([r["msgs_per_s_stats"]["min"] for r in rows]) / 1e6
    hi = np.array([r["msgs_per_s_stats"]["max"] for r in rows]) / 1e6
    ax.barh(y, p50, color=["#e4572e" if analysis.is_nemo(r["mechanism"]) else "#9bc1bc" for r in rows])
    ax.hlines(y, lo, hi, color="black", lw=1)
    ax.scatter(np.concatenate([lo, hi]), np.concatenate([y, y]), marker="|", color="black", s=80)
    for i, r in enumerate(rows):
        pts = _interval_rates(r)
        if pts is not None and len(pts):
            ax.scatter(pts / 1e6, np.full(len(pts), i) + (np.arange(len(pts)) % 5 - 2) * 0.06,
                       s=8, color="#333333", alpha=0.6, zorder=3)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlabel("messages per second, millions: bar = median interval, line = slowest to fastest")
    ax.set_xlim(left=0)
    ax.grid(axis="x", alpha=0.3)
    name = _save(fig, outdir, "throughput.png")
    return name, ("Throughput: messages per second from one sender to one polling receiver on "
                  "another CPU, measured over short intervals. Bar: the median interval's rate; "
                  "line: the slowest to the fastest interval; dots, when the run kept its samples: "
                  "every interval. nemo's active messages in red, Concurrency Kit's SPSC ring in green. "
                  "Every message's value was checked by the receiver.")


APP_ORDER = ("interrupt", "poll-send", "poll-check", "progress-thread", "watchdog-50us", "watchdog-1ms",
             "check-watchdog-50us", "check-watchdog-10us", "threads")


def _app_mechs(rows):
    present = {r["mechanism"] for r in rows}
    return [m for m in APP_ORDER if m in present] + sorted(present - set(APP_ORDER))


def app_delay_distribution(rows, outdir):
    """Perkovic & Keleher's Fig. 3: how many requests waited how long, per strategy (log-log)."""
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for m in _app_mechs(rows):
        edges, counts, _ = analysis.app_delays(rows, m)
        xs = [e for e in edges if e is not None]
        ys = counts[:len(xs)]
        pts = [(x, y) for x, y in zip(xs, ys) if y > 0]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=m)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("notification delay (ns, bin upper edge)")
    ax.set_ylabel("requests")
    ax.set_title("Notification delay distribution (nemo-bench app)")
    ax.legend(fontsize=7)
    return _save(fig, outdir, "app_delays.png"), (f"After {papers.POLLING}, Fig. 3: notification delays per strategy "
                                                 "(all shapes), log-log")


def app_delay_share(rows, outdir):
    """Perkovic & Keleher's Fig. 4: the cumulative share of the total delay contributed by delays up to x."""
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for m in _app_mechs(rows):
        edges, _, sums = analysis.app_delays(rows, m)
        total = sum(sums)
        if total <= 0:
            continue
        xs = [e for e in edges if e is not None]
        acc, ys = 0.0, []
        for x in sums[:len(xs)]:
            acc += x
            ys.append(acc / total)
        ax.plot(xs, ys, label=m)
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("delay length (ns)")
    ax.set_ylabel("share of the total delay from delays up to x")
    ax.set_title("Where the total delay comes from (nemo-bench app)")
    ax.legend(fontsize=7)
    return _save(fig, outdir, "app_delay_share.png"), (f"After {papers.POLLING}, Fig. 4: cumulative share of the total "
                                                      "notification delay, by delay length")


def app_runtime(rows, outdir):
    """Perkovic & Keleher's Fig. 7: runtime per strategy relative to interrupt, per shape."""
    ratios = analysis.app_runtime_ratios(rows)
    if not ratios:
        return None
    shapes = [s for s in ("short", "nested", "long") if s in ratios]
    mechs = [m for m in _app_mechs(rows) if any(m in ratios[s] for s in shapes)]
    fig, ax = plt.subplots(figsize=(8, 4.2))
    width = 0.8 / max(1, len(mechs))
    for i, m in enumerate(mechs):
        vals = [ratios[s].get(m, float("nan")) for s in shapes]
        ax.bar([k + i * width for k in range(len(shapes))], vals, width, label=m)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([k + width * (len(mechs) - 1) / 2 for k in range(len(shapes))])
    ax.set_xticklabels(shapes)
    ax.set_ylabel("runtime / runtime with interrupts")
    ax.set_title("Runtime per strategy relative to interrupt (nemo-bench app)")
    ax.legend(fontsize=7)
    return _save(fig, outdir, "app_runtime.png"), (f"After {papers.POLLING}, Fig. 7: runtime of the fixed work per "
                                                  "strategy, relative to interrupt mode, per loop shape")


def _mcast_rows(runs):
    return [r for run in runs if run.suite == "multicast" for r in run.rows
            if "latency_ns" in r and "topology" in r]


def multicast_vs_n(runs, outdir):
    """Kuban, Rotta & Nolte's Fig. 4: median latency against group size, one panel per
    topology x mechanism, static (triangles) and dynamic (circles)."""
    rows = _mcast_rows(runs)
    if not rows:
        return None
    tops, mechs = ("flat", "tree", "diamond"), ("smack", "help", "skip")
    fig, axes = plt.subplots(3, 3, figsize=(10, 8), sharex=True, sharey=True)
    for i, mech in enumerate(mechs):
        for j, top in enumerate(tops):
            ax = axes[i][j]
            for group, marker in (("static", "^"), ("dynamic", "o")):
              for places in sorted({r["places"] for r in rows}):
                pts = sorted((r["n"], r["latency_ns"]["p50"] / 1000, r.get("oversubscribed", False))
                             for r in rows if r["mechanism"] == f"{top}-{mech}" and r["group"] == group
                             and r["places"] == places)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker,
                            label=f"{group}, {places} places")
                    over = [p for p in pts if p[2]]
                    if over:
                        ax.scatter([p[0] for p in over], [p[1] for p in over], s=80, facecolors="none",
                                   edgecolors="red")
            ax.set_title(f"{top} / {mech}", fontsize=9)
            if i == 2:
                ax.set_xlabel("group size n")
            if j == 0:
                ax.set_ylabel("median latency (us)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("nemo_multicast: latency against group size (red rings: oversubscribed places)")
    fig.tight_layout()
    return _save(fig, outdir, "multicast_vs_n.png"), (
        f"After {papers.MULTICAST}, Fig. 4: median multicast latency against group size, per topology (columns) and "
        "mechanism (rows); triangles: static topology over every place, circles: dynamic, over the "
        "members only.  Red rings: more places than CPUs.")


def multicast_projection(runs, outdir):
    """The simulator with this machine's constants (the multicast run's
    mcast-constants row), projected to 64, 128 and 256 places, with the
    measured points beside it."""
    from . import mcast_sim
    docs = [{"suite": r.suite, "machine": r.machine, "results": r.rows} for r in runs if r.suite == "multicast"]
    if not docs:
        return None
    try:
        k = mcast_sim.from_results(docs)
    except ValueError:
        return None
    sizes = (2, 4, 8, 16, 32, 64, 128, 256)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for top in ("flat", "tree", "diamond"):
        ys = [mcast_sim.simulate(k, top, "smack", False, n, n, count=8)["latency"]["p50"] / 1000 for n in sizes]
        ax.plot(sizes, ys, marker="^", label=f"{top}-smack, static, n = places (simulated)")
    ys = [mcast_sim.simulate(k, "tree", "skip", False, 2, P, count=8)["latency"]["p50"] / 1000 for P in sizes]
    ax.plot(sizes, ys, linestyle="--", label="tree-skip, static, n = 2 of P places (simulated)")
    meas = [(r["places"], r["latency_ns"]["p50"] / 1000) for r in _mcast_rows(runs)
            if r["mechanism"] == "tree-smack" and r["group"] == "static" and r["n"] == r["places"]]
    if meas:
        ax.scatter([m[0] for m in meas], [m[1] for m in meas], color="black", zorder=3,
                   label="tree-smack, measured here")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("places")
    ax.set_ylabel("median latency (us)")
    ax.set_title("Projection with this machine's costs (nemo-report simulate-multicast)")
    ax.legend(fontsize=7)
    return _save(fig, outdir, "multicast_projection.png"), (
        "The discrete-event simulator with the costs measured by this run's multicast suite, "
        "projected to 256 places: hierarchical topologies against Flat, and a small static group "
        "under Skip.")


def event_loop_rates(runs, outdir):
    """nemo-bench event-loop: messages per second (the bars) with the range
    over rounds, and the receiver's wake-ups per message, per mechanism and
    scenario."""
    from . import evloop
    run = evloop.newest(runs)
    if run is None:
        return None
    t = evloop.by_key(run.rows)
    mechs = [m for m in evloop.MECHS if any((m, s) in t for s in evloop.SCENARIOS)]
    scens = [s for s in evloop.SCENARIOS if any((m, s) in t for m in mechs)]
    if not mechs or not scens:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    width = 0.8 / len(mechs)
    for i, m in enumerate(mechs):
        xs = [k + i * width for k in range(len(scens))]
        rows = [t.get((m, s)) for s in scens]
        rate = [r["msgs_per_s"] / 1e6 if r else float("nan") for r in rows]
        lo = [max(0.0, v - r["msgs_per_s_stats"]["min"] / 1e6) if r else 0 for v, r in zip(rate, rows)]
        hi = [max(0.0, r["msgs_per_s_stats"]["max"] / 1e6 - v) if r else 0 for v, r in zip(rate, rows)]
        axes[0].bar(xs, rate, width, yerr=[lo, hi], capsize=3, label=m)
        axes[1].bar(xs, [r["wakeups_per_msg"] if r else float("nan") for r in rows], width, label=m)
    for ax in axes:
        ax.set_xticks([k + width * (len(mechs) - 1) / 2 for k in range(len(scens))])
        ax.set_xticklabels(scens)
    axes[0].set_ylabel("messages per second (millions)")
    axes[1].set_ylabel("receiver wake-ups per message")
    axes[0].legend(fontsize=7)
    fig.suptitle("Two senders flood one place in an event loop (nemo-bench event-loop)")
    return _save(fig, outdir, "event_loop.png"), (
        "Messages per second the receiver took (bars: all rounds together; whiskers: the slowest and the "
        "fastest round) and its wake-ups per message (voluntary context switches), flooded and with the "
        "senders pausing: nemo's descriptor in an epoll loop, nemo_place_wait, and an eventfd hand-off.")


def request_reply_cdf(runs, outdir):
    """nemo-bench request-reply: the round trip's distribution per
    mechanism, between threads and between processes."""
    from . import reqreply
    run = reqreply.newest(runs)
    if run is None:
        return None
    rows = [r for r in run.rows if isinstance(r.get("rtt_cdf_ns"), list) and len(r["rtt_cdf_ns"]) == 101]
    scens = [s for s in reqreply.SCENARIOS if any(r["scenario"] == s for r in rows)]
    if not scens:
        return None
    fig, axes = plt.subplots(1, len(scens), figsize=(5 * len(scens), 4), squeeze=False)
    for ax, s in zip(axes[0], scens):
        for r in sorted((r for r in rows if r["scenario"] == s), key=lambda r: r["mechanism"]):
            ax.plot(np.array(r["rtt_cdf_ns"]) / 1000, np.linspace(0, 1, 101), label=r["mechanism"])
        ax.set_xscale("log")
        ax.set_xlabel("round trip (us)")
        ax.set_ylabel("fraction of round trips")
        ax.set_title(f"between {s}")
        ax.legend(fontsize=7)
    fig.suptitle("A client waits for each answer (nemo-bench request-reply)")
    return _save(fig, outdir, "request_reply.png"), (
        "Distribution of the round trip, one request in flight after a think time, between two threads and "
        "between two processes: nemo_am_send answered by nemo_am_reply, a Unix socket pair, and an eventfd "
        "with a ring each way.")
