"""The advice for the situations a programmer decides between (advice_rr.py,
advice_loop.py, advice_mcast.py): request and reply between threads,
processes and MPI ranks, an event loop, a multicast.  For each, from
synthetic documents whose numbers the tests choose: a run where nemo wins
(the advice names nemo's API and quotes the numbers), one where the
baseline wins (it says not to use nemo there, and why), and one with rows
missing (it says what is missing and quotes no number)."""
import pathlib
import re
import sys

from nemo_report import advice, cli, load

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import synth  # noqa: E402


def runs_of(tmp_path, *docs):
    paths = [synth.write(tmp_path / f"{i}-{d['suite']}.json", d) for i, d in enumerate(docs)]
    runs, problems = load.load_all(paths)
    assert not problems
    return runs


def items(runs):
    return {it["key"]: it for it in advice.advise(runs)}


def numbers(text):
    """The numbers a text quotes, but those of the commands it names."""
    return re.findall(r"\d", re.sub(r"`[^`]*`", "", text))


def assert_missing(it, run):
    assert it["verdict"] == "not measured" and not it["measured"]
    assert f"`{run}" in it["use"]
    assert not numbers(it["why"]), it["why"]


# ------------------------------------------------------------ event loops

FLOOD, PAUSED = "flood", "paused"


def test_event_loop_nemo_wins(tmp_path):
    d = synth.event_loop({("nemo-place-fd", FLOOD): 5e6, ("eventfd-ring", FLOOD): 5e5,
                          ("nemo-place-fd", PAUSED): 4e5, ("eventfd-ring", PAUSED): 2e5,
                          ("nemo-place-wait", FLOOD): 4.8e6, ("nemo-place-wait", PAUSED): 4.1e5})
    it = items(runs_of(tmp_path, d))["event-loop"]
    assert it["verdict"] == "helps"
    assert "`nemo_place_fd`" in it["use"] and "`nemo_poll`" in it["use"] and "Default settings" in it["use"]
    for s in ("nemo-place-fd/flood 5.00M msgs/s", "eventfd-ring/flood 500.0k msgs/s", "nemo takes 10.0x",
              "nemo-place-fd/paused 400.0k msgs/s", "nemo takes 2.00x", "0.0010 wake-ups", "0.0100 wake-ups",
              "nemo-place-wait/flood (no loop) 4.80M msgs/s"):
        assert s in it["why"], s
    assert it["not"] == ""


def test_event_loop_baseline_wins(tmp_path):
    d = synth.event_loop({("nemo-place-fd", FLOOD): 3e5, ("eventfd-ring", FLOOD): 6e5,
                          ("nemo-place-fd", PAUSED): 1e5, ("eventfd-ring", PAUSED): 2e5,
                          ("nemo-place-wait", FLOOD): 9e5})
    it = items(runs_of(tmp_path, d))["event-loop"]
    assert it["verdict"] == "worse"
    assert it["use"].startswith("Without nemo") and "`eventfd`" in it["use"]
    assert "fewer messages than the eventfd hand-off here (flood, paused)" in it["not"]
    assert "nemo takes 0.50x its messages" in it["why"]
    # nemo_place_wait took 3x the loop's: said, as the way out of the loop
    assert "`nemo_place_wait` (3.00x when flood)" in it["not"]


def test_event_loop_missing_rows(tmp_path):
    it = items(runs_of(tmp_path, synth.unicast({("spin", "polling"): 100.0})))["event-loop"]
    assert_missing(it, "nemo-bench event-loop")
    only_base = synth.event_loop({("eventfd-ring", FLOOD): 6e5})
    it = items(runs_of(tmp_path, only_base))["event-loop"]
    assert_missing(it, "nemo-bench event-loop --mechanisms nemo-place-fd,eventfd-ring")
    assert "no nemo-place-fd row" in it["why"]
    no_base = synth.event_loop({("nemo-place-fd", FLOOD): 6e5})
    it = items(runs_of(tmp_path, no_base))["event-loop"]
    assert it["verdict"] == "info" and "nothing without nemo to compare with" in it["not"]
    assert "600.0k msgs/s" in it["why"] and "nemo takes" not in it["why"]


# ------------------------------------------- request and reply: threads, processes

def test_request_reply_threads_nemo_wins(tmp_path):
    d = synth.request_reply({("nemo-am", "threads"): (2000.0, 3000.0), ("unix-socket", "threads"): 30000.0,
                             ("eventfd-ring", "threads"): (20000.0, 40000.0)},
                            rates={("nemo-am", "threads"): 4e6, ("unix-socket", "threads"): 3e5,
                                   ("eventfd-ring", "threads"): 5e5})
    it = items(runs_of(tmp_path, d))["reqreply-threads"]
    assert it["verdict"] == "helps"
    assert "`nemo_am_send`" in it["use"] and "`nemo_am_reply`" in it["use"] and "default policy" in it["use"]
    for s in ("nemo-am/threads: round trip p50 2000 ns, p99 3000 ns", "4.00M requests/s with 16 in flight",
              "eventfd-ring/threads: round trip p50 20.0 us, p99 40.0 us", "10.0x faster than eventfd-ring at the median",
              "13.3x faster than eventfd-ring at p99", "8.00x the requests of eventfd-ring/threads (500.0k/s)"):
        assert s in it["why"], s
    assert it["not"] == ""


def test_request_reply_threads_baseline_wins_and_polling_costs(tmp_path):
    d = synth.request_reply({("nemo-am", "threads"): 40000.0, ("unix-socket", "threads"): 30000.0,
                             ("eventfd-ring", "threads"): 20000.0},
                            rates={("nemo-am", "threads"): 1e5, ("unix-socket", "threads"): 3e5,
                                   ("eventfd-ring", "threads"): 2e5},
                            server_cpu={("nemo-am", "threads"): 35000.0, ("eventfd-ring", "threads"): 5000.0})
    it = items(runs_of(tmp_path, d))["reqreply-threads"]
    assert it["verdict"] == "worse"
    assert it["use"].startswith("A ring in shared memory and an `eventfd` each way")
    assert "nemo is slower here: eventfd-ring/threads answers in 20.0 us against 40.0 us" in it["not"]
    assert "unix-socket moves more (3.00x nemo's)" in it["not"]
    assert "35.0 us per round trip against 5000 ns" in it["not"] and "`NEMO_WAIT=block`" in it["not"]


def test_request_reply_processes_nemo_wins(tmp_path):
    d = synth.request_reply({("nemo-am", "processes"): 9000.0, ("unix-socket", "processes"): 30000.0,
                             ("eventfd-ring", "processes"): 25000.0})
    it = items(runs_of(tmp_path, d))["reqreply-processes"]
    assert it["verdict"] == "helps"
    assert "`nemo_xproc_create`" in it["use"] and "`nemo_xproc_place_id(x, id)`" in it["use"]
    assert "`nemo_xproc_handle_am`" in it["use"]
    assert "nemo-am/processes: round trip p50 9000 ns" in it["why"]
    assert f"{advice.fmt_x(25000.0 / 9000.0)} faster than eventfd-ring at the median" in it["why"]


def test_request_reply_processes_baseline_wins(tmp_path):
    d = synth.request_reply({("nemo-am", "processes"): (50000.0, 900000.0), ("unix-socket", "processes"): 30000.0,
                             ("eventfd-ring", "processes"): 35000.0})
    it = items(runs_of(tmp_path, d))["reqreply-processes"]
    assert it["verdict"] == "worse"
    assert it["use"].startswith("A Unix stream socket pair (`socketpair`, `read` / `write`)")
    assert "unix-socket/processes: round trip p50 30.0 us" in it["why"]
    assert "slower than unix-socket (0.60x) at the median" in it["why"]
    assert "nemo is slower here: unix-socket/processes answers in 30.0 us against 50.0 us" in it["not"]


def test_request_reply_processes_same(tmp_path):
    d = synth.request_reply({("nemo-am", "processes"): 26000.0, ("unix-socket", "processes"): 30000.0,
                             ("eventfd-ring", "processes"): 25000.0})
    it = items(runs_of(tmp_path, d))["reqreply-processes"]
    assert it["verdict"] == "same"
    assert it["use"].startswith("Either: a ring in shared memory")
    assert "nemo does not help here" in it["not"]


def test_request_reply_missing_rows(tmp_path):
    it = items(runs_of(tmp_path, synth.unicast({("spin", "polling"): 100.0})))
    assert_missing(it["reqreply-threads"], "nemo-bench request-reply")
    assert_missing(it["reqreply-processes"], "nemo-bench request-reply")
    # processes skipped (no /dev/shm), threads without a baseline
    d = synth.request_reply({("nemo-am", "threads"): 2000.0, ("unix-socket", "processes"): 30000.0},
                            skipped=[("nemo-am (processes)", "shared domain: no /dev/shm")])
    it = items(runs_of(tmp_path, d))
    p = it["reqreply-processes"]
    assert_missing(p, "nemo-bench request-reply --mechanisms nemo-am")
    assert "no nemo-am/processes row" in p["why"] and "no /dev/shm" in p["why"]
    t = it["reqreply-threads"]
    assert t["verdict"] == "info" and "nothing to compare with" in t["not"]
    assert "faster" not in t["why"]


# ------------------------------------------------------------ MPI ranks

def test_ranks_nemo_wins(tmp_path):
    d = synth.mpi(pingpong=600.0, remote=300.0, app={"send": 0.03, "watchdog": 0.012, "thread-interrupt": 0.02})
    it = items(runs_of(tmp_path, d))["reqreply-ranks"]
    assert it["verdict"] == "helps"
    assert "`nemo_am_send` to a place of another rank" in it["use"] and "`nemo/mpi.h`" in it["use"]
    assert "progress strategy `watchdog`" in it["use"]
    assert "nemo-am-remote half round trip p50 300 ns" in it["why"] and "mpi-pingpong p50 600 ns" in it["why"]
    assert "2.00x faster than raw MPI at the median" in it["why"]
    assert "watchdog finished in 12.0 ms" in it["why"] and "0.60x interrupt-style" in it["why"]


def test_ranks_mpi_wins(tmp_path):
    it = items(runs_of(tmp_path, synth.mpi(pingpong=300.0, remote=900.0)))["reqreply-ranks"]
    assert it["verdict"] == "worse"
    assert it["use"].startswith("Raw `MPI_Send` / `MPI_Recv` where only speed matters")
    assert "nemo is slower here: raw MPI ping-pong takes 300 ns against 900 ns" in it["not"]


def test_ranks_missing(tmp_path):
    it = items(runs_of(tmp_path, synth.unicast({("spin", "polling"): 100.0})))["reqreply-ranks"]
    assert_missing(it, "mpiexec -n 2 nemo-bench-mpi")
    it = items(runs_of(tmp_path, synth.mpi(pingpong=300.0)))["reqreply-ranks"]
    assert_missing(it, "mpiexec -n 2 nemo-bench-mpi")
    assert "no nemo-am-remote row" in it["why"]


# ------------------------------------------------------------ multicast

def test_multicast_topology_wins(tmp_path):
    d = synth.multicast({("tree-smack", "static", 4): 2000.0, ("flat-smack", "static", 4): 5000.0,
                         ("tree-skip", "dynamic", 4): 2500.0, ("flat-smack", "static", 2): 1500.0})
    it = items(runs_of(tmp_path, d))["multicast"]
    assert it["verdict"] == "helps"
    assert "`NEMO_MCAST_TREE`, `NEMO_MCAST_SMACK`" in it["use"] and "up to 4 places" in it["use"]
    assert "n = 4 members of 4 places, measured: tree-smack/static p50 2000 ns" in it["why"]
    assert "flat-smack/static, p50 5000 ns (2.50x the topology's)" in it["why"]
    # beyond this machine: simulated with the run's costs, and said to be
    assert "at 64 places, all members" in it["use"] and "at 256 places" in it["use"] and "(simulated)" in it["use"]
    assert "simulated with this run's costs, all 64 members" in it["why"]
    assert "simulated with this machine's costs" in it["not"] and "not measured" in it["not"]
    # one other member: a round trip (1000 ns) beats the multicast (1500 ns)
    assert "round trip 1000 ns) is cheaper than a multicast (flat-smack/static at n = 2: 1500 ns)" in it["not"]


def test_multicast_flat_wins(tmp_path):
    d = synth.multicast({("tree-smack", "static", 4): 5000.0, ("flat-help", "static", 4): 2000.0,
                         ("flat-smack", "static", 2): 900.0}, round_trip=1000.0)
    it = items(runs_of(tmp_path, d))["multicast"]
    assert it["verdict"] == "same"
    assert it["use"].startswith("`nemo_multicast` with Flat (`NEMO_MCAST_FLAT`, `NEMO_MCAST_HELP`) up to 4 places")
    assert "A topology does not help at 4 members here" in it["not"]
    assert "is cheaper than a multicast" not in it["not"]       # 900 ns: the multicast wins at n = 2


def test_multicast_missing(tmp_path):
    it = items(runs_of(tmp_path, synth.unicast({("spin", "polling"): 100.0})))["multicast"]
    assert_missing(it, "nemo-bench multicast")
    # no constants: the measured part, and what the projection lacks
    d = synth.multicast({("tree-smack", "static", 4): 2000.0, ("flat-smack", "static", 4): 5000.0},
                        constants=False)
    it = items(runs_of(tmp_path, d))["multicast"]
    assert it["verdict"] == "helps" and "simulated" not in it["why"] and "(simulated)" not in it["use"]
    assert "No projection beyond 4 places: the results lack send and latency" in it["not"]


# ------------------------------------------------------------ the report

def test_sections_and_advice_in_the_report(tmp_path):
    docs = [synth.event_loop({("nemo-place-fd", FLOOD): 5e6, ("eventfd-ring", FLOOD): 5e5,
                              ("nemo-place-wait", FLOOD): 4e6}),
            synth.request_reply({("nemo-am", "threads"): 2000.0, ("unix-socket", "threads"): 30000.0,
                                 ("nemo-am", "processes"): 9000.0, ("eventfd-ring", "processes"): 25000.0})]
    paths = [synth.write(tmp_path / f"{d['suite']}.json", d) for d in docs]
    out = tmp_path / "report"
    assert cli.main(["build", *map(str, paths), "-o", str(out)]) == 0
    page = (out / "index.html").read_text()
    assert "<h2>Event loops: a place on its descriptor</h2>" in page
    assert "<h2>Request and reply: threads and processes</h2>" in page
    assert "flood: the loop on nemo_place_fd took 5.00M messages/s, 10.00x the eventfd hand-off" in page
    assert "Between threads: a round trip through nemo takes 2000 ns at p50" in page
    assert "15.00x; above 1.00x nemo is faster" in page
    assert (out / "event_loop.png").exists() and (out / "request_reply.png").exists()
    assert "A thread that runs an event loop" in page and "Request and reply between processes" in page
    # not listed again under "Other results"
    assert "Other results" not in page
    assert "From event-loop.json; request-reply.json" in page or "event-loop.json" in page


def test_bad_rows_of_the_new_suites_are_named(tmp_path, capsys):
    el = synth.event_loop({("nemo-place-fd", FLOOD): 5e6})
    del el["results"][0]["wakeups_per_msg"]
    rr = synth.request_reply({("nemo-am", "threads"): 2000.0})
    rr["results"][0]["rtt_ns"] = {"p50": 1.0}
    paths = [synth.write(tmp_path / f"{d['suite']}.json", d) for d in (el, rr)]
    _, problems = load.load_all(paths)
    assert any("results[0].wakeups_per_msg: missing or not a number" in p for p in problems)
    assert any("results[0].rtt_ns: missing or not STATS" in p for p in problems)
