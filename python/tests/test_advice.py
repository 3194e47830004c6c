"""The report's advice ("What to use on this machine"), the adaptive
policy's verdict and the hand-off table, from synthetic documents whose
numbers the tests choose: the advice names the nemo API and the policy a
programmer should use per scenario, quotes numbers that are in the input
(and only those), says "not measured" for what no document covers, and
says so where nemo does not help or loses."""
import json
import pathlib
import re
import sys

import pytest

from nemo_report import advice, cli, load

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import synth  # noqa: E402

FIX = pathlib.Path(__file__).parent / "fixtures"

# A machine where nemo wins where it should: polling, running receivers
# with interrupts, the interposed hand-off; and ties where the kernel wakes
# a sleeper.
LAT = {("spin", "polling"): 101.0, ("nemo-event", "polling"): (137.0, 410.0),
       ("nemo-cond", "polling"): 233.0, ("ck-ec", "polling"): 171.0,
       ("futex", "blocked"): (21400.0, 90300.0), ("condvar", "blocked"): (23600.0, 120700.0),
       ("nemo-event", "blocked"): (21900.0, 88100.0), ("nemo-cond", "blocked"): 23900.0,
       ("futex", "loaded"): (17300.0, 85000.0), ("condvar", "loaded"): (17900.0, 131000.0),
       ("nemo-cond", "loaded"): (18100.0, 133000.0), ("nemo-cond-kick", "loaded"): (18300.0, 41700.0),
       ("signal-running", "busy"): (17700.0, 80000.0), ("nemo-am", "busy"): (6130.0, 9900.0),
       ("nemo-am", "polling"): 187.0}

POLICY = {1: {"spin": (105.0, 1230.0), "block": (12000.0, 2700.0), "hybrid": (100.0, 1225.0),
              "adaptive": (112.0, 1250.0)},
          30: {"spin": (110.0, 31000.0), "block": (19700.0, 4900.0), "hybrid": (19800.0, 25800.0),
               "adaptive": (120.0, 30500.0)},
          1000: {"spin": (1200.0, 998000.0), "block": (36000.0, 13100.0), "hybrid": (47600.0, 35900.0),
                 "adaptive": (43300.0, 22700.0)}}


def runs_of(tmp_path, *docs):
    paths = [synth.write(tmp_path / f"{i}-{d['suite']}.json", d) for i, d in enumerate(docs)]
    runs, problems = load.load_all(paths)
    assert not problems
    return runs


def items(runs):
    return {it["key"]: it for it in advice.advise(runs)}


def text(it):
    return " ".join(it[k] for k in ("title", "use", "why", "not"))


def test_polling_receiver_names_the_event_api_and_the_spin_policy(tmp_path):
    it = items(runs_of(tmp_path, synth.unicast(LAT)))["unicast-polling"]
    assert it["verdict"] == "helps"
    assert "`nemo_event_post` / `nemo_event_wait`" in it["use"]
    assert "`NEMO_WAIT=spin`" in it["use"] and "`nemo_event_init`" in it["use"]
    # p50 and p99 of the row, the floor, and the ratio to the sleeping condvar
    for s in ("nemo-event/polling p50 137 ns, p99 410 ns", "spin/polling p50 101 ns",
              advice.fmt_x(137.0 / 101.0), advice.fmt_x(23600.0 / 137.0), "condvar/blocked p50 23.6 us",
              "ck-ec/polling", "171 ns", "nemo-cond/polling 233 ns", "nemo-am/polling 187 ns"):
        assert s in it["why"], s
    # what polling costs, from the row's CPU per event
    assert advice.fmt_ns(137.0 * 100) in it["not"] and "nemo-event/polling" in it["not"]


def test_sleeping_receiver_on_a_vm_nemo_does_not_help(tmp_path):
    it = items(runs_of(tmp_path, synth.unicast(LAT, virtualized=True, hypervisor="KVM")))["unicast-blocked"]
    assert it["verdict"] == "same"
    assert "Nothing to gain from nemo" in it["use"] and "`pthread_cond_*`" in it["use"]
    assert "nemo does not help here" in it["not"]
    assert "VM (KVM)" in it["not"] and "hypervisor" in it["not"] and "cannot beat futex" in it["not"]
    assert "nemo-event/blocked p50 21.9 us, p99 88.1 us" in it["why"]
    assert "futex/blocked, p50 21.4 us, p99 90.3 us" in it["why"]
    assert f"({advice.fmt_x(21400.0 / 21900.0)}: no difference)" in it["why"]
    assert "condvar/blocked" in it["why"]


def test_sleeping_receiver_where_nemo_loses_says_so(tmp_path):
    lat = dict(LAT)
    lat[("nemo-event", "blocked")] = 30000.0
    lat[("nemo-cond", "blocked")] = 31000.0
    it = items(runs_of(tmp_path, synth.unicast(lat)))["unicast-blocked"]
    assert it["verdict"] == "worse"
    assert "nemo is slower here" in it["not"]
    assert f"slower than futex ({advice.fmt_x(21400.0 / 30000.0)})" in it["why"]
    assert "hypervisor" not in it["not"]          # not a VM: the kernel's wake-up


def test_loaded_receiver_recommends_kick_mode_for_the_tail(tmp_path):
    it = items(runs_of(tmp_path, synth.unicast(LAT)))["unicast-loaded"]
    assert "`nemo_cond_set_kick(cv, true)`" in it["use"]
    assert f"nemo-cond-kick/loaded) p99 41.7 us against condvar/loaded p99 131.0 us: " \
           f"{advice.fmt_x(131000.0 / 41700.0)}" in it["why"]


def test_running_receiver_uses_interrupt_mode(tmp_path):
    it = items(runs_of(tmp_path, synth.unicast(LAT)))["unicast-busy"]
    assert it["verdict"] == "helps"
    assert "`nemo_am_send`" in it["use"] and "`nemo_place_set_interrupts(true)`" in it["use"]
    assert "nemo-am/busy p50 6130 ns, p99 9900 ns" in it["why"]
    assert f"{advice.fmt_x(17700.0 / 6130.0)} faster than signal-running" in it["why"]
    # The same against a plain signal that is as fast: no help, and the poll point is named.
    lat = dict(LAT)
    lat[("nemo-am", "busy")] = 17900.0
    it = items(runs_of(tmp_path, synth.unicast(lat)))["unicast-busy"]
    assert it["verdict"] == "same"
    assert "not deliver to a running thread faster than a plain signal" in it["not"]
    assert "`nemo_poll`" in it["not"] and "nemo-am/polling p50 187 ns" in it["not"]


def test_unmeasured_scenarios_say_so_and_name_the_suite(tmp_path):
    only_polling = {k: v for k, v in LAT.items() if k[1] == "polling"}
    got = items(runs_of(tmp_path, synth.unicast(only_polling)))
    assert got["unicast-polling"]["measured"]
    for scen in ("busy", "blocked", "loaded"):
        it = got[f"unicast-{scen}"]
        assert not it["measured"] and it["verdict"] == "not measured"
        assert it["use"] == f"Not measured: run `nemo-bench unicast --scenarios {scen}`."
        assert not re.search(r"\d+(\.\d+)? (ns|us|ms)", text(it))      # no number made up
    assert got["broadcast"]["use"] == "Not measured: run `nemo-bench broadcast`."
    assert got["throughput"]["use"] == "Not measured: run `nemo-bench throughput`."
    assert got["policy"]["use"] == "Not measured: run `nemo-bench policy`."
    for prog in ("condvar-handoff", "pool", "python-handoff"):
        assert got[f"preload-{prog}"]["use"] == f"Not measured: run `nemo-bench preload --mechanisms {prog}`."
    # No document at all for unicast: the suite to run.
    got = items(runs_of(tmp_path, synth.throughput({"nemo-am": 3e7, "ck-ring": 2e7})))
    assert got["unicast-polling"]["use"] == "Not measured: run `nemo-bench unicast`."


def test_preload_advice_default_first_and_losses(tmp_path):
    d = synth.preload({"condvar-handoff": {"glibc": 39100.0, "nemo-default": 8840000.0, "nemo-hybrid": 9080000.0,
                                           "nemo-block": 40600.0},
                       "pool": {"glibc": 1150000.0, "nemo-default": 1390000.0, "nemo-hybrid": 1580000.0},
                       },
                      skipped=[("python-handoff", "no python3 on PATH")])
    got = items(runs_of(tmp_path, d))
    h = got["preload-condvar-handoff"]
    assert h["verdict"] == "helps"
    assert h["use"].startswith("`LD_PRELOAD=libnemo-preload.so`, no other setting")
    assert "condvar-handoff/nemo-default (no settings) runs 8.84M hand-offs/s against 39.1k with glibc" in h["why"]
    assert advice.fmt_x(8840000.0 / 39100.0) in h["why"]
    assert f"`NEMO_WAIT=hybrid` {advice.fmt_x(9080000.0 / 39100.0)}" in h["why"]
    assert f"`NEMO_WAIT=block` {advice.fmt_x(40600.0 / 39100.0)}" in h["why"]
    # pool: hybrid beats the default by more than the threshold: said, with the numbers
    p = got["preload-pool"]
    assert "`NEMO_WAIT=hybrid` did better still here" in p["use"]
    assert advice.fmt_x(1580000.0 / 1390000.0) + " the default" in p["use"]
    # skipped by nemo-bench: not measured, with its reason
    py = got["preload-python-handoff"]
    assert not py["measured"] and "no python3 on PATH" in py["why"]
    # A program slower under the interposer: do not preload it.
    d = synth.preload({"pool": {"glibc": 1150000.0, "nemo-default": 800000.0}})
    p = items(runs_of(tmp_path, d))["preload-pool"]
    assert p["verdict"] == "worse" and p["use"].startswith("Do not preload this program")
    assert f"nemo is slower here: {advice.fmt_x(800000.0 / 1150000.0)} glibc" in p["not"]
    # Within the threshold: no help.
    d = synth.preload({"pool": {"glibc": 1150000.0, "nemo-default": 1160000.0}})
    p = items(runs_of(tmp_path, d))["preload-pool"]
    assert p["verdict"] == "same" and "nemo does not help here" in p["not"]


def test_throughput_names_the_batch_call(tmp_path):
    d = synth.throughput({"nemo-am": 35.5e6, "nemo-am-each": 11.9e6, "ck-ring": 18.6e6})
    it = items(runs_of(tmp_path, d))["throughput-b64"]
    assert it["verdict"] == "helps"
    assert "`nemo_am_send_batch`" in it["use"] and "`nemo_poll`" in it["use"]
    assert "35.50M messages/s" in it["why"] and advice.fmt_x(35.5 / 18.6) + " ck-ring (18.60M/s)" in it["why"]
    assert f"11.90M/s, {advice.fmt_x(11.9 / 18.6)} ck-ring" in it["why"]
    assert "Send in batches" in it["not"]


def test_broadcast_prefers_a_k_with_a_cpu_per_waiter(tmp_path):
    """16 CPUs, K up to 15, each waiter on its own CPU: the advice is for
    K=15, names nemo_am_broadcast and its multiple of the one-way spin."""
    d = synth.broadcast(synth.topology(cores=8, smt=2, l3_cores=8, pkg_cores=8))
    got = items(runs_of(tmp_path, d))
    it = got["broadcast-polling"]
    assert it["title"] == "Broadcast to 15 waiters that are polling"
    assert "`nemo_am_broadcast`" in it["use"] and "`NEMO_WAIT=spin`" in it["use"]
    assert "2.50x the one-way spin floor" in it["why"]
    it = got["broadcast-blocked"]
    assert it["title"] == "Broadcast to 15 waiters that are asleep"
    assert it["verdict"] == "helps"                   # 90x against futex's 120x the floor
    assert "`NEMO_WAIT=block`" in it["use"]
    assert f"{advice.fmt_x(120.0 / 90.0)} faster than futex" in it["why"]


def test_adaptive_verdict_within_and_where_it_loses(tmp_path):
    t = advice.policy_table(runs_of(tmp_path, synth.policy(POLICY))[0].rows)
    assert [x["gap_ns"] for x in t] == [1000.0, 30000.0, 1000000.0]
    assert t[0]["best"] == "hybrid" and t[2]["best"] == "block"
    assert t[2]["cost_ratio"] == pytest.approx((43300 + 22700) / (36000 + 13100))
    assert t[2]["cpu_ratio"] == pytest.approx(22700 / 13100)
    vd = advice.adaptive_verdict(t)
    worst = (43300 + 22700) / (36000 + 13100)
    assert vd["text"].startswith(f"The default policy (adaptive) is within {advice.fmt_x(worst)} of the best "
                                 "fixed policy's cost")
    assert "at every gap measured (1 us to 1 ms)" in vd["text"]
    assert f"loses most at 1 ms ({advice.fmt_x(worst)} block's cost)" in vd["text"]
    assert "keeps the documented bound" in vd["text"]
    it = items(runs_of(tmp_path, synth.policy(POLICY)))["policy"]
    assert "`NEMO_WAIT=block` where your waits are about 30 us, 1 ms long" in it["use"]
    assert "`nemo_place_set_policy`" in it["use"]
    # adaptive within 1.1x everywhere: keep the default, nothing to set
    good = {}
    for g, c in POLICY.items():
        best = min((v for p, v in c.items() if p != "adaptive"), key=sum)
        good[g] = {**c, "adaptive": (best[0] * 1.03, best[1] * 1.02)}
    it = items(runs_of(tmp_path, synth.policy(good)))["policy"]
    assert it["verdict"] == "helps"
    assert it["use"].startswith("Keep the default: leave `NEMO_WAIT` unset")
    assert "is within 1.1x of the best fixed policy's cost (latency + CPU per event) at every gap" in it["why"]
    # over the documented 2x bound: named with the gap and the ratio
    bad = {g: dict(c) for g, c in POLICY.items()}
    bad[1000]["adaptive"] = (36000.0, 13100.0 * 2.6)
    vd = advice.adaptive_verdict(advice.policy_table(runs_of(tmp_path, synth.policy(bad))[0].rows))
    assert "breaks the documented bound" in vd["text"] and "1 ms (CPU 2.60x block)" in vd["text"]


def test_policy_table_agrees_with_nemo_bench():
    """On a real policy document, the per-gap verdict the report computes
    from the rows is nemo-bench's own config.adaptive_check."""
    runs, _ = load.load_all([FIX / "policy.json"])
    t = {x["gap_ns"]: x for x in advice.policy_table(runs[0].rows)}
    for c in runs[0].config["adaptive_check"]:
        x = t[c["gap_ns"]]
        assert x["best"] == c["best_fixed"] and x["matched"] == c["matched"]
        for k in ("latency_ratio", "cpu_ratio", "cost_ratio"):
            assert x[k] == pytest.approx(c[k], rel=1e-6), k


def _times(s):
    unit = {"ns": 1, "us": 1e3, "ms": 1e6}
    return sorted(float(v) * unit[u] for v, u in re.findall(r"(?<![\w.])(\d+(?:\.\d+)?) (ns|us|ms)\b", s))


def _scaled_unicast(f):
    return synth.unicast({k: tuple(x * f for x in v) if isinstance(v, tuple) else v * f for k, v in LAT.items()})


def test_no_time_in_the_advice_is_written_by_hand(tmp_path):
    """Every time the advice quotes moves with the input: the same
    documents with every time 3x give every quoted time 3x (and the same
    ratios)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = advice.as_text(runs_of(tmp_path / "a", _scaled_unicast(1.0)))
    b = advice.as_text(runs_of(tmp_path / "b", _scaled_unicast(3.0)))
    ta, tb = _times(a), _times(b)
    assert len(ta) == len(tb) and len(ta) > 20
    for x, y in zip(ta, tb):
        assert y == pytest.approx(3 * x, rel=0.02)
    assert re.findall(r"\d+\.\d+x", a) == re.findall(r"\d+\.\d+x", b)


def test_report_page_renders_the_advice_the_verdict_and_the_hand_off_table(tmp_path):
    d = synth.preload({"condvar-handoff": {"glibc": 39100.0, "nemo-hybrid": 9080000.0,
                                           "nemo-default": 8840000.0}})
    paths = [synth.write(tmp_path / "u.json", synth.unicast(LAT, virtualized=True, hypervisor="KVM")),
             synth.write(tmp_path / "p.json", synth.policy(POLICY)),
             synth.write(tmp_path / "h.json", d)]
    assert cli.main(["build", *map(str, paths), "-o", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / "index.html").read_text()
    adv = page[page.index("<h2>What to use on this machine</h2>"):page.index("<h2>Summary</h2>")]
    assert "<code>nemo_event_post</code> / <code>nemo_event_wait</code>" in adv
    assert "<code>NEMO_WAIT=spin</code>" in adv
    assert "Not measured: run <code>nemo-bench broadcast</code>." in adv
    assert "nemo does not help here" in adv
    assert "Row names and the API they measure" in adv
    # the raw mechanism names appear only as row names, each explained
    assert "<td>nemo-cond-kick</td><td>unicast</td><td>nemo</td>" in adv
    pol = page[page.index("<h2>The default wait policy against fixed policies</h2>"):]
    assert "<b>Verdict:</b> The default policy (adaptive) is within" in pol
    assert "<th>adaptive (default)</th>" in pol
    ho = page[page.index("<h2>What the interposer does to real programs</h2>"):]
    head = ho[:ho.index("</tr>")]
    assert head.index("nemo-default (no settings: what you get)") < head.index("nemo-hybrid")
    assert f"{8840000.0 / 39100.0:.2f}x (8.84 M/s)" in ho


def test_advice_command_prints_text(tmp_path, capsys):
    path = synth.write(tmp_path / "u.json", synth.unicast(LAT))
    assert cli.main(["advice", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("What to use on this machine")
    assert "* Hand-off to a receiver that is polling" in out
    assert "nemo-event/polling p50 137 ns" in out
    assert "From: unicast: u.json" in out


def test_every_mechanism_nemo_bench_emits_is_in_the_table():
    """The table of names covers every mechanism the bench sources define
    (bench/mechs/*.c `.name = "..."`, and the suites' own names), so no row
    is shown by a bare name."""
    bench = pathlib.Path(__file__).parents[2] / "bench"
    if not bench.is_dir():
        pytest.skip("no bench/ sources")
    names = set()
    for f in bench.rglob("*.c"):
        names |= set(re.findall(r'\.name\s*=\s*"([a-z0-9_-]+)"', f.read_text()))
    # the preload suite's programs
    progs = re.search(r"programs\[PR_COUNT\] = \{(.*?)\n\};", (bench / "suites" / "preload.c").read_text(),
                      re.S).group(1)
    names |= set(re.findall(r'\[PR_\w+\]\s*=\s*\{\s*"([a-z0-9_-]+)"', progs))
    assert {"condvar-handoff", "pool", "nemo-am-each", "ck-ring"} <= names
    suites = {"unicast", "broadcast", "coherence", "policy", "throughput", "preload", "calibrate", "app",
              "syscost", "multicast", "event-loop", "request-reply"}
    missing = sorted(n for n in names - suites if n not in advice.MECHANISMS)
    assert not missing, missing


def test_launcher_names_the_debian_packages(monkeypatch, capsys):
    from nemo_report import launch
    monkeypatch.setattr(launch, "missing", lambda: list(launch.NEEDS))
    assert launch.run(["--help"]) == 3
    err = capsys.readouterr().err
    assert "apt-get install python3-numpy python3-matplotlib" in err and "NEMO_PYTHON" in err


def test_real_fixtures_advice_has_no_bare_mechanism_advice():
    """On the real fixtures, every measured item says what to use in API
    terms (a backticked call or setting), never just a mechanism name."""
    runs, _ = load.load_all([FIX / n for n in ("unicast.json", "broadcast.json", "policy.json",
                                               "throughput.json", "preload.json")])
    for it in advice.advise(runs):
        assert "`" in it["use"], it
        if it["measured"]:
            assert re.search(r"\d", it["why"]), it
    assert json.dumps(advice.legend(runs))


def test_polling_advice_reads_the_default_policy_from_the_policy_suite(tmp_path):
    """With a policy document, the polling advice says whether the default
    policy catches a short wait polling, from the suite's smallest gap."""
    got = items(runs_of(tmp_path, synth.unicast(LAT), synth.policy(POLICY)))["unicast-polling"]
    assert ("The default policy polls too: at a 1 us gap the policy suite measured adaptive at p50 "
            "112 ns against spin's 105 ns") in got["why"]
    slow = {g: dict(c) for g, c in POLICY.items()}
    slow[1]["adaptive"] = (14100.0, 3000.0)
    got = items(runs_of(tmp_path, synth.unicast(LAT), synth.policy(slow)))["unicast-polling"]
    assert "The default policy did not catch it polling" in got["why"]
    assert "adaptive at p50 14.1 us" in got["why"] and "force `NEMO_WAIT=spin`" in got["why"]


def _app_doc(ratios_by_mech):
    """A synthetic app document: runtime = ratio x interrupt's, one row per shape."""
    rows = []
    for shape in ("short", "nested", "long"):
        for m, ratio in ratios_by_mech.items():
            rows.append({"mechanism": m, "shape": shape, "places": 2, "cpus": 2, "runtime_s": 0.1 * ratio,
                         "requests": 10, "delay_ns": {k: 1000.0 for k in ("min", "p50", "p90", "p99", "max",
                                                                          "mean", "stddev")},
                         "delay_hist": {"upper_edges_ns": [100.0, 1000.0, None], "counts": [0, 10, 0],
                                        "sum_ns": [0.0, 10000.0, 0.0]},
                         "interrupts": 0, "polls": 0, "progress_handled": None})
    return rows


def test_polling_strategy_names_the_best_with_its_ratio(tmp_path):
    from nemo_report import load
    doc = {"tool": "nemo-bench", "suite": "app", "started_at": "2026-01-01", "machine": {}, "config": {},
           "results": _app_doc({"interrupt": 1.0, "poll-send": 1.5, "poll-check": 0.97})}
    f = tmp_path / "app.json"
    f.write_text(json.dumps(doc))
    runs, problems = load.load_all([f])
    assert not problems
    item = advice.polling_strategy(runs[0])
    assert item["use"].startswith("poll-check")
    assert "NEMO_POLL_CHECK" in item["use"]
    assert "poll-check 0.97x" in item["why"] and "poll-send 1.50x" in item["why"]
    assert "NEMO_PLACE_PIN" in item["not"] and "no polling strategy" not in item["not"]
    doc["results"] = _app_doc({"interrupt": 1.0, "poll-send": 1.5, "poll-check": 1.2})
    f.write_text(json.dumps(doc))
    runs, problems = load.load_all([f])
    item = advice.polling_strategy(runs[0])
    assert item["not"].startswith("On this machine no polling strategy beat interrupts")


def test_polling_strategy_not_measured():
    item = advice.polling_strategy(None)
    assert item["verdict"] == "not measured" and "nemo-bench app" in item["use"]
