"""nemo-report command line."""
import argparse
import pathlib
import sys

from . import __version__, advice, analysis, load

DESCRIPTION = """Turn nemo-bench JSON (docs/bench-json.md) into figures and one
self-contained HTML report (build), or print its advice, what to use on the
measured machine, as text (advice).  Exit status: 0 when the report was written
(problems with some input are printed and listed in the report), 1 when nothing
could be read, 2 for a bad command line, 3 when the Python running it lacks
numpy or matplotlib (the installed launcher)."""


def build(paths, outdir):
    from . import figures, html      # matplotlib: only for the report itself
    outdir = pathlib.Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    runs, problems = load.load_all(paths)
    for p in problems:
        print(f"nemo-report: {p}", file=sys.stderr)
    if not any(r.rows for r in runs):
        print("nemo-report: no valid results to report", file=sys.stderr)
        return 1
    urows = analysis.unicast_rows(runs)
    brows = analysis.broadcast_rows(runs)
    trows = analysis.throughput_rows(runs)
    prows = analysis.preload_rows(runs)
    arows = analysis.app_rows(runs)
    made = []
    for fn, arg in ((figures.latency_boxes, urows), (figures.latency_cdfs, urows),
                    (figures.sender_cost, urows), (figures.broadcast_vs_k, brows),
                    (figures.spread_cdf, brows), (figures.coherence_heatmap, runs),
                    (figures.breakdown_bars, urows), (figures.policy_sweep, runs),
                    (figures.throughput_rates, trows), (figures.preload_ratios, prows),
                    (figures.app_delay_distribution, arows), (figures.app_delay_share, arows),
                    (figures.app_runtime, arows), (figures.multicast_vs_n, runs),
                    (figures.multicast_projection, runs), (figures.event_loop_rates, runs),
                    (figures.request_reply_cdf, runs)):
        try:
            fig = fn(arg, outdir)
        except Exception as ex:  # a figure that fails must not cost the others
            problems.append(f"figure {fn.__name__}: {ex}")
            print(f"nemo-report: figure {fn.__name__}: {ex}", file=sys.stderr)
            continue
        if fig:
            made.append(fig)
    (outdir / "index.html").write_text(html.page(runs, made, problems, outdir))
    print(f"nemo-report: {outdir / 'index.html'} ({len(made)} figures)")
    return 0


def print_advice(paths):
    runs, problems = load.load_all(paths)
    for p in problems:
        print(f"nemo-report: {p}", file=sys.stderr)
    if not any(r.rows for r in runs):
        print("nemo-report: no valid results to report", file=sys.stderr)
        return 1
    print(advice.as_text(runs))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="nemo-report", description=DESCRIPTION)
    ap.add_argument("--version", action="version",
                    version=f"nemo-report {__version__} ({pathlib.Path(__file__).resolve().parent})")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="write DIR/index.html and the PNGs", description=DESCRIPTION)
    b.add_argument("results", nargs="+", help="nemo-bench JSON files, or folders of them")
    b.add_argument("-o", "--output", required=True, help="output folder")
    a = sub.add_parser("advice", help="print what to use on this machine, as text",
                       description="Print the report's advice (what to use on the measured machine, "
                                   "and why) as text.")
    a.add_argument("results", nargs="+", help="nemo-bench JSON files, or folders of them")
    m = sub.add_parser("simulate-multicast",
                       help="project nemo_multicast's latency with the discrete-event simulator",
                       description="Simulate nemo's acknowledged multicast (every topology x mechanism x "
                                   "static/dynamic, 32 random groups per size, median) with the Xeon "
                                   "Phi constants of Kuban, Rotta & Nolte (Help Your Busy Neighbors) or with this machine's, measured by nemo-bench.")
    m.add_argument("--constants", choices=("paper", "measured"), default="paper")
    m.add_argument("--results", nargs="*", default=[],
                   help="with --constants measured: nemo-bench JSON files (syscost, unicast, multicast)")
    m.add_argument("--places", type=int, action="append",
                   help="places to simulate (repeatable; default: the paper's 60, or the measured CPUs)")
    m.add_argument("--groups", type=int, default=32, help="random groups per size (default 32)")
    m.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args(argv)
    if args.cmd == "simulate-multicast":
        from . import mcast_sim
        if args.constants == "measured" and not args.results:
            ap.error("--constants measured needs --results FILE...")
        try:
            return mcast_sim.main_simulate(args)
        except (OSError, ValueError) as e:
            print(f"nemo-report: {e}", file=sys.stderr)
            return 1
    if args.cmd == "advice":
        return print_advice(args.results)
    return build(args.results, args.output)
