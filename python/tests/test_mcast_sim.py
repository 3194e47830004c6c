"""The multicast simulator (nemo_report/mcast_sim.py): the medians of
Kuban, Rotta & Nolte (Help Your Busy Neighbors) with their constants, the
projection's shape, and topologies that match the library's rules
(src/mcast/mcast.c)."""
import json
import subprocess
import sys

from nemo_report import mcast_sim as ms
from nemo_report import cli

K = ms.PAPER


def p50(top, mech, dyn, n, places=None):
    return ms.simulate(K, top, mech, dyn, n, places)["latency"]["p50"]


def near(x, want, tol=0.20):
    return abs(x / want - 1) <= tol


def test_paper_static_smack_at_60():
    # Fig. 4: static SmAck, n = 60: Flat ~77k, Tree ~39k, Diamond ~38k cycles.
    assert near(p50("flat", "smack", False, 60), 77e3)
    assert near(p50("tree", "smack", False, 60), 39e3)
    assert near(p50("diamond", "smack", False, 60), 38e3)


def test_paper_two_member_groups():
    # 2 members: the best dynamic ~5.6k, the best static ~15.5k cycles.
    dyn = min(p50(t, m, True, 2) for t in ms.TOPOLOGIES for m in ms.MECHANISMS)
    sta = min(p50(t, m, False, 2) for t in ms.TOPOLOGIES for m in ms.MECHANISMS)
    assert near(dyn, 5.6e3), dyn
    assert near(sta, 15.5e3), sta
    assert sta > 2 * dyn


def test_projection_shape():
    # Tree and Diamond beat Flat from 16 places up; Skip beats Help for
    # small static groups.
    for P in (16, 64, 128, 256):
        flat = p50("flat", "smack", False, P, P)
        assert p50("tree", "smack", False, P, P) < flat
        assert p50("diamond", "smack", False, P, P) < flat
        for top in ("tree", "diamond"):
            assert p50(top, "skip", False, 2, P) < p50(top, "help", False, 2, P)


def test_topologies_cover_every_place_once():
    for top in ms.TOPOLOGIES:
        for n in (1, 2, 3, 7, 60):
            t = ms.Topology(top, range(n))
            seen = [p for b in t.b for p in (b.head, b.tail) if p >= 0]
            assert sorted(seen) == list(range(n)), (top, n)
            kids = [c for b in t.b for c in b.kids]
            assert sorted(kids + [t.root]) == list(range(len(t.b)))


def test_exactly_once_in_the_simulation():
    # Every member runs the action once, static and dynamic, each mechanism.
    for top in ms.TOPOLOGIES:
        for mech in ms.MECHANISMS:
            for dyn in (False, True):
                members = [0, 3, 4, 9, 17]
                topo = ms.Topology(top, members if dyn else range(20))
                s = ms.Sim(topo, members, mech, dyn, K)
                assert s.run() > 0
                assert s.runs == len(members), (top, mech, dyn)


def test_cli_json(tmp_path):
    out = tmp_path / "sim.json"
    assert cli.main(["simulate-multicast", "--places", "16", "--groups", "4", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    rows = doc["results"]
    assert {r["mechanism"] for r in rows} >= {"flat-smack", "tree-help", "diamond-skip"}
    for r in rows:
        assert r["group"] in ("static", "dynamic") and r["cycles"]["p50"] > 0 and r["unit"] == "cycles"


def test_measured_needs_results(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"tool": "nemo-bench", "suite": "unicast", "results": []}))
    assert cli.main(["simulate-multicast", "--constants", "measured", "--results", str(bad)]) == 1
    assert "syscost" in capsys.readouterr().err
