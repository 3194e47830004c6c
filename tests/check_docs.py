#!/usr/bin/env python3
"""check_docs.py - what a reader copies from the documentation works.

Every ```c block of README.md and docs/*.md is compiled against the build's
headers, with warnings as errors:

  - a block with no marker is a complete program (or file): it is compiled,
    linked against the build's libnemo (and libnemo-mpi when it includes
    nemo/mpi.h), and, if it has a main(), run: it must exit 0 within 60 s
    (an MPI program under `mpiexec -n 2`);
  - <!-- compile-only --> on the line before the fence: the same, not run
    (a server that runs until killed);
  - <!-- fragment --> or <!-- fragment: DECLARATIONS -->: a piece of a
    program.  It is wrapped: the nemo headers, then the DECLARATIONS (the
    names the piece uses without defining them), then the block's own
    #include lines and function definitions (a line at column 0 ending in
    ')' followed by a line '{' at column 0, up to the next '}' at column 0)
    at file scope, and the rest of it as the body of a function.  It is
    compiled, not linked.  Unused names are allowed in fragments.

Any other comment right before a ```c fence is an error (a misspelt marker
must not turn a fragment into a program silently).  MPI blocks are skipped,
with a note, only when the build has no libnemo-mpi (MPICH not installed).

Two more rules of the user-facing text:
  - the papers are named by authors and title: "seed 00N" (our file
    numbers) appears nowhere in README.md, docs/ or include/;
  - the README's examples table names every program of examples/.

Usage: check_docs.py SOURCE_DIR BUILD_DIR [--cc CC]
Exit 0 when every block and rule holds; 1 with one message per failure.
"""
import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^```c\s*$")
MARKER = re.compile(r"^<!--\s*(.*?)\s*-->\s*$", re.S)
FUNC_HEAD = re.compile(r"^[A-Za-z_][^;{}]*\)\s*(/\*.*\*/)?\s*$")
FLAGS = ["-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror"]
FRAGMENT_FLAGS = ["-Wno-unused-variable", "-Wno-unused-but-set-variable", "-Wno-unused-function",
                  "-Wno-unused-label", "-Wno-unused-value"]


class Block:
    def __init__(self, path, line, code, marker):
        self.path, self.line, self.code, self.marker = path, line, code, marker

    @property
    def where(self):
        return f"{self.path}:{self.line}"

    @property
    def mpi(self):
        return "nemo/mpi.h" in self.code or re.search(r"\bnemo_mpi_|\bMPI_", self.code) is not None


def blocks(path, rel):
    """The ```c blocks of a Markdown file, with the marker before each."""
    lines = path.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        if FENCE.match(lines[i]):
            start = i + 1
            j = start
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            # The marker: an HTML comment (one or more lines) ending on the
            # line before the fence, or the one before that if it is blank.
            k = i - 1
            if k >= 0 and not lines[k].strip():
                k -= 1
            m = None
            if k >= 0 and lines[k].rstrip().endswith("-->"):
                s = k
                while s > 0 and "<!--" not in lines[s]:
                    s -= 1
                m = MARKER.match(" ".join(ln.strip() for ln in lines[s:k + 1]))
            out.append(Block(rel, start + 1, "\n".join(lines[start:j]) + "\n", m.group(1) if m else None))
            i = j + 1
        else:
            i += 1
    return out


def split_fragment(code):
    """(file scope, body): #include lines and function definitions at
    file scope, the rest in the body."""
    top, body = [], []
    lines = code.splitlines()
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("#include"):
            top.append(ln)
        elif FUNC_HEAD.match(ln) and i + 1 < len(lines) and lines[i + 1].rstrip() == "{":
            j = i + 1
            while j < len(lines) and lines[j].rstrip() != "}":
                j += 1
            top.extend(lines[i:j + 1])
            i = j
        else:
            body.append(ln)
        i += 1
    return "\n".join(top), "\n".join(body)


def headers_for(code):
    hs = ["_GNU_SOURCE"]
    inc = ["<nemo/nemo.h>"]
    if re.search(r"\bnemo_mpi_|\bMPI_", code):
        inc.append("<nemo/mpi.h>")
    if "nemo_fastwrite" in code:
        inc.append("<nemo/fastio.h>")
    inc += ["<errno.h>", "<pthread.h>", "<stdatomic.h>", "<stdbool.h>", "<stdint.h>", "<stdio.h>",
            "<stdlib.h>", "<string.h>", "<time.h>", "<unistd.h>"]
    return "".join(f"#define {h}\n" for h in hs) + "".join(f"#include {i}\n" for i in inc)


def wrap(block, decls):
    top, body = split_fragment(block.code)
    return (f"/* {block.where}, a fragment */\n{headers_for(block.code)}\n{decls}\n\n{top}\n\n"
            f"void doc_fragment(void);\nvoid doc_fragment(void)\n{{\n{body}\n}}\n")


class Checker:
    def __init__(self, src, build, cc):
        self.src, self.build, self.cc = src, build, cc
        self.failures, self.notes = [], []
        self.inc = [f"-I{src / 'include'}", f"-I{build / 'include'}"]
        self.lib = build / "lib"
        self.has_mpi = (self.lib / "libnemo-mpi.so").exists()
        self.mpicc = shutil.which("mpicc")
        self.mpiexec = shutil.which("mpiexec")
        self.work = pathlib.Path(tempfile.mkdtemp(prefix="check_docs."))

    def fail(self, msg):
        self.failures.append(msg)

    def run(self, cmd, what, timeout=120, **kw):
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
        except subprocess.TimeoutExpired:
            return None, f"{what}: no exit within {timeout} s"
        return p, p.stdout + p.stderr

    def check(self, b):
        marker = b.marker
        kind, decls = "program", ""
        if marker is not None:
            m = re.match(r"^(fragment|compile-only)(?::\s*(.*))?$", marker, re.S)
            if not m or (m.group(1) == "compile-only" and m.group(2)):
                self.fail(f"{b.where}: unknown marker <!-- {marker} --> (fragment, fragment: DECLS, compile-only)")
                return
            kind, decls = m.group(1), m.group(2) or ""
        if b.mpi and not (self.has_mpi and self.mpicc):
            self.notes.append(f"{b.where}: an MPI block, skipped: "
                              f"{'no mpicc on PATH' if self.has_mpi else 'this build has no libnemo-mpi'}")
            return
        name = re.sub(r"[^A-Za-z0-9]+", "_", b.where)
        c = self.work / f"{name}.c"
        cc = self.mpicc if b.mpi else self.cc
        if kind == "fragment":
            c.write_text(wrap(b, decls))
            p, out = self.run([cc, *FLAGS, *FRAGMENT_FLAGS, *self.inc, "-c", str(c), "-o", str(c.with_suffix(".o"))],
                              f"{b.where}: compiling")
            if p is None or p.returncode:
                self.fail(f"{b.where}: the fragment does not compile (wrapped as {c}):\n{out}")
            return
        c.write_text(b.code)
        exe = c.with_suffix("")
        has_main = re.search(r"^int\s+main\s*\(", b.code, re.M) is not None
        libs = [f"-L{self.lib}", f"-Wl,-rpath,{self.lib}"] + (["-lnemo-mpi"] if b.mpi else []) + ["-lnemo"]
        cmd = [cc, *FLAGS, *self.inc, str(c), "-o", str(exe), *libs] if has_main else \
              [cc, *FLAGS, *self.inc, "-c", str(c), "-o", str(c.with_suffix(".o"))]
        p, out = self.run(cmd, f"{b.where}: compiling")
        if p is None or p.returncode:
            self.fail(f"{b.where}: the program does not compile ({c}):\n{out}")
            return
        if not has_main or kind == "compile-only":
            return
        if b.mpi:
            if not self.mpiexec:
                self.notes.append(f"{b.where}: compiled; not run: no mpiexec")
                return
            cmd = [self.mpiexec, "-n", "2", str(exe)]
        else:
            cmd = [str(exe)]
        env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
        p, out = self.run(cmd, f"{b.where}: running", timeout=60, env=env, cwd=self.work)
        if p is None or p.returncode:
            self.fail(f"{b.where}: the program exits {'(timeout)' if p is None else p.returncode}, not 0:\n{out}")

    def seeds(self):
        files = [self.src / "README.md", *sorted((self.src / "docs").rglob("*")),
                 *sorted((self.src / "include").rglob("*"))]
        pat = re.compile(r"seed\s*0\d", re.I)
        for f in files:
            if not f.is_file():
                continue
            for n, ln in enumerate(f.read_text(errors="replace").splitlines(), 1):
                if pat.search(ln):
                    self.fail(f"{f.relative_to(self.src)}:{n}: names a paper by our file number "
                              f"(name it by authors and title): {ln.strip()}")

    def examples(self):
        readme = (self.src / "README.md").read_text()
        for ex in sorted((self.src / "examples").glob("*.c")):
            if not re.search(rf"`(examples/)?{re.escape(ex.name)}`", readme):
                self.fail(f"README.md: examples/{ex.name} is missing from the examples table")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("source", type=pathlib.Path)
    ap.add_argument("build", type=pathlib.Path)
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    a = ap.parse_args()
    ch = Checker(a.source.resolve(), a.build.resolve(), a.cc)
    if not (ch.lib / "libnemo.so").exists():
        print(f"check_docs: {ch.lib}/libnemo.so is missing: build first", file=sys.stderr)
        return 1
    docs = [a.source / "README.md", *sorted((a.source / "docs").glob("*.md"))]
    n = 0
    for d in docs:
        for b in blocks(d, d.relative_to(a.source)):
            ch.check(b)
            n += 1
    ch.seeds()
    ch.examples()
    for note in ch.notes:
        print(f"check_docs: {note}")
    for f in ch.failures:
        print(f"check_docs: {f}")
    if ch.failures:
        print(f"check_docs: {len(ch.failures)} failure(s); the sources are kept in {ch.work}")
        return 1
    shutil.rmtree(ch.work, ignore_errors=True)
    print(f"check_docs: {n} code blocks of {len(docs)} files compile (and the programs run); "
          f"no paper named by file number; every example listed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
