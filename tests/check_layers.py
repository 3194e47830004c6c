#!/usr/bin/env python3
"""check_layers.py - the layering rules of docs/architecture.md, checked on
the build's object files and the sources:

  1. a file calls (or reads a variable of) only files of its own layer or
     of the layers below it (symbols from `nm`: what each object defines
     and what it needs), and includes only headers of those layers;
  2. no cycle between the files of one layer (each layer's files form a
     DAG, so each can be read knowing only those below it);
  3. the waiter slot's layout (src/waiter/slot.h) is included by no file
     of src/ outside src/waiter/: everything else reaches a slot through
     the functions of waiter_internal.h (tests/test_adaptive.c, a
     white-box test of the wait history, includes it; tests are not
     scanned);
  4. no futex call in messaging, poll, mcast, xproc or mpi: they sleep
     and kick through the waiter layer (waiter.c, THE RAW WORD);
  5. a file of src/ outside src/messaging/ includes from src/messaging/
     only its narrow headers: modes.h (what a receiver mode - the
     progress thread, the watchdog - or a layer that acts as a place
     needs of a place, as functions: nemo_place stays an incomplete
     type) and remote.h (the transports' hook).  messaging_internal.h
     (the layout of places, queues and domains), grant.h and any other
     header there are the messaging layer's own.

Usage: check_layers.py BUILD_DIR [SOURCE_DIR]
Exit 0 when every rule holds, 1 with one line per violation.
"""
import collections
import glob
import os
import re
import subprocess
import sys

# Which layers each layer may use (besides itself).  events and messaging
# are siblings: neither uses the other.
ALLOWED = {
    "platform": set(),
    "waiter": {"platform"},
    "events": {"waiter", "platform"},
    "messaging": {"waiter", "platform"},
    "poll": {"messaging", "waiter", "platform"},
    "mcast": {"poll", "messaging", "waiter", "platform"},
    "preload": {"events", "waiter", "platform"},
    "fastio": {"platform"},
    "xproc": {"messaging", "waiter", "platform"},
    "mpi": {"poll", "messaging", "waiter", "platform"},
}
# The headers of src/messaging/ that other layers may include (rule 5).
MESSAGING_NARROW = {"modes.h", "remote.h"}
# Public headers and the layer each belongs to.
PUBLIC = {
    "platform.h": "platform", "version.h": "platform", "waiter.h": "waiter",
    "event.h": "events", "domain.h": "messaging", "notify.h": "messaging",
    "am.h": "messaging", "poll.h": "poll", "fastio.h": "fastio",
    "mcast.h": "mcast", "xproc.h": "xproc", "mpi.h": "mpi",
    "nemo.h": None,  # the umbrella: for users only
}


def layer_of(path):
    parts = path.split("/")
    if parts[0] != "src":
        return None
    return parts[1] if len(parts) > 2 else "platform"   # src/version.c


def objects(build):
    """source path -> object file, one per source (the first target's)."""
    out = {}
    for o in sorted(glob.glob(os.path.join(build, "CMakeFiles", "*.dir", "src", "**", "*.o"),
                              recursive=True)):
        src = "src/" + o.split(os.sep + "src" + os.sep, 1)[1][:-2]
        out.setdefault(src, o)
    return out


def symbols(obj):
    text = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, needed = set(), set()
    for line in text.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "TDBRVWG":
            defined.add(f[2])
        elif len(f) == 2 and f[0] == "U":
            needed.add(f[1])
    return defined, needed


def find_cycle(nodes, edges):
    """One cycle of the directed graph as a list of nodes, or None."""
    color = dict.fromkeys(nodes, 0)
    stack = []

    def visit(n):
        color[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if color.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if color.get(m) == 0:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        color[n] = 2
        return None

    for n in sorted(nodes):
        if color[n] == 0:
            c = visit(n)
            if c:
                return c
    return None


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    build = sys.argv[1]
    root = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..")
    os.chdir(root)
    bad = []

    objs = {s: o for s, o in objects(build).items() if os.path.exists(s) and layer_of(s)}
    if len(objs) < 10:
        print(f"check_layers: only {len(objs)} objects under {build}: build first", file=sys.stderr)
        return 2
    defs, needs = {}, {}
    for src, o in objs.items():
        defs[src], needs[src] = symbols(o)
    owner = {}
    for src, d in defs.items():
        for s in d:
            owner.setdefault(s, src)
    uses = collections.defaultdict(dict)      # file -> {file: a symbol}
    for src, n in needs.items():
        for s in sorted(n):
            g = owner.get(s)
            if g and g != src:
                uses[src].setdefault(g, s)

    # 1. Calls go down (or sideways within a layer).
    for src in sorted(uses):
        la = layer_of(src)
        for g, s in sorted(uses[src].items()):
            lb = layer_of(g)
            if lb != la and lb not in ALLOWED.get(la, set()):
                bad.append(f"{src} ({la}) uses {s} of {g} ({lb}): not a layer below")
    # ... and so do includes.
    inc = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
    for src in sorted(glob.glob("src/**/*.[ch]", recursive=True)):
        la = layer_of(src)
        text = open(src, encoding="utf-8").read()
        for kind, name in inc.findall(text):
            if kind == "<" and name.startswith("nemo/"):
                lb = PUBLIC.get(name[5:], "?")
                if lb is None:
                    bad.append(f"{src} includes the umbrella <{name}>: include the layer's header")
                    continue
            elif kind == '"' and "/" in name:
                target = os.path.normpath(os.path.join(os.path.dirname(src), name))
                lb = layer_of(target)
                if os.path.basename(target) == "slot.h" and la != "waiter":
                    bad.append(f"{src} includes {target}: the slot's layout is the waiter layer's")
                # 5. messaging's layout is private: others see modes.h / remote.h.
                if (lb == "messaging" and la != "messaging"
                        and os.path.basename(target) not in MESSAGING_NARROW):
                    bad.append(f"{src} includes {target}: private to src/messaging "
                               f"(include modes.h or remote.h)")
            else:
                continue
            if lb and lb != la and lb not in ALLOWED.get(la, set()):
                bad.append(f"{src} ({la}) includes {name} ({lb}): not a layer below")

    # 2. No cycle within a layer.
    by_layer = collections.defaultdict(set)
    for src in objs:
        by_layer[layer_of(src)].add(src)
    for layer, files in sorted(by_layer.items()):
        edges = {f: {g for g in uses.get(f, {}) if g in files} for f in files}
        c = find_cycle(files, edges)
        if c:
            steps = " -> ".join(f"{a} ({uses[a][b]})" for a, b in zip(c, c[1:]))
            bad.append(f"cycle in {layer}: {steps} -> {c[-1]}")

    # 4. The futex is the waiter layer's: the layers that sleep and kick
    # through it (messaging, poll, mcast, xproc, mpi) make no futex call
    # of their own (waiter.c, THE RAW WORD).
    futex_sym = re.compile(r"^nemo_futex_")
    for src in sorted(needs):
        if layer_of(src) in ("messaging", "poll", "mcast", "xproc", "mpi"):
            for s in sorted(needs[src]):
                if futex_sym.match(s):
                    bad.append(f"{src} calls {s}: sleep and kick through the waiter layer (nemo__word_*)")
    for src in sorted(glob.glob("src/**/*.[ch]", recursive=True)):
        if layer_of(src) in ("messaging", "poll", "mcast", "xproc", "mpi"):
            for no, line in enumerate(open(src, encoding="utf-8"), 1):
                if "SYS_futex" in line or "SYS_futex_waitv" in line:
                    bad.append(f"{src}:{no} makes a futex system call: the waiter layer's")

    # 3. The project describes itself: no source or document points at a
    # file that is not in it (the design map is docs/architecture.md).
    outside = re.compile(r"DESIGN\.md|\.\./shared/|shared/seeds")
    for pat in ("src/**/*.[ch]", "include/**/*.h", "bench/**/*.[ch]", "examples/**/*.c",
                "docs/**/*.md", "README.md", "models/*.pml", "python/**/*.py", "tests/*.[ch]"):
        for path in sorted(glob.glob(pat, recursive=True)):
            for no, line in enumerate(open(path, encoding="utf-8"), 1):
                if outside.search(line):
                    bad.append(f"{path}:{no} points outside the project: {line.strip()[:80]}")

    for b in bad:
        print("check_layers:", b)
    if bad:
        return 1
    n = sum(len(v) for v in uses.values())
    print(f"check_layers: ok ({len(objs)} files, {n} file-to-file uses, "
          f"{len(by_layer)} layers, no cycle)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
