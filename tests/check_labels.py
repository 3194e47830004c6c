#!/usr/bin/env python3
"""check_labels.py - every protocol step label means one step of one
protocol (docs/architecture.md, "Protocol step labels").

The table of that section gives each protocol its label prefixes (the
letters of a label such as W2, RK3 or XS1) and the files that may name
them: the owning file, the model or test, and the files that refer to the
protocol.  This check fails when

  1. a prefix is registered by two rows, a row registers none, or a row
     lists a path that does not exist;
  2. a file under src/, include/, models/, tests/, docs/ or scripts/
     holds a label whose prefix is registered, and the row that owns the
     prefix does not list that file (or a folder above it).

A label is a word of 1-4 capitals, then digits, then at most one small
letter (a suffix, or a plural), as a whole word; one that follows a '-'
at the start of a word is a command-line flag (-O2), not a label.  The
table itself and this file are not scanned.

Usage: check_labels.py [SOURCE_DIR]
Exit 0 when the labels are where the table says, 1 with one line per
violation.
"""
import os
import re
import sys

SECTION = "## Protocol step labels"
TABLE = os.path.join("docs", "architecture.md")
SCANNED = ("src", "include", "models", "tests", "docs", "scripts")
LABEL = re.compile(r"(?<![\w])([A-Z]{1,4})(\d+)[a-z]?(?![\w])")
PATH = re.compile(r"`([^`\s]+/[^`\s]*)`")


def labels(text):
    """The (prefix, label, offset) of every label in text."""
    for m in LABEL.finditer(text):
        i = m.start()
        if i and text[i - 1] == "-" and (i < 2 or not text[i - 2].isalnum()):
            continue    # a flag: -O2, (-O3
        yield m.group(1), m.group(0), i


def read_table(root):
    """prefix -> (row name, allowed paths); the table's line span; errors."""
    with open(os.path.join(root, TABLE), encoding="utf-8") as f:
        lines = f.read().split("\n")
    try:
        start = lines.index(SECTION)
    except ValueError:
        return {}, None, [f"{TABLE}: no section '{SECTION}'"]
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    owner, dup, errors = {}, set(), []
    rows = [(i, l) for i, l in enumerate(lines[start:end], start) if l.startswith("|")]
    for n, line in rows[2:]:            # after the header and its |---| line
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5:
            errors.append(f"{TABLE}:{n + 1}: a row of {len(cells)} cells, not 5")
            continue
        name, _, labs, _, _ = cells
        paths = set()
        for cell in (cells[1], cells[3], cells[4]):
            for p in PATH.findall(cell):
                if not os.path.exists(os.path.join(root, p)):
                    errors.append(f"{TABLE}:{n + 1}: {p} does not exist")
                paths.add(p)
        prefixes = {p for p, _, _ in labels(labs)}
        if not prefixes:
            errors.append(f"{TABLE}:{n + 1}: '{name}' registers no label")
        for p in prefixes:
            if p in owner:
                errors.append(f"{TABLE}:{n + 1}: prefix {p} is registered by '{owner[p][0]}' already")
                dup.add(p)
            else:
                owner[p] = (name, paths)
    for p in dup:       # reported once above, not at every use
        del owner[p]
    return owner, (start, end), errors


def allowed(path, paths):
    return any(path == p or (p.endswith("/") and path.startswith(p)) for p in paths)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    owner, span, errors = read_table(root)
    me = os.path.relpath(os.path.abspath(__file__), root)
    nfiles = nlabels = 0
    for top in SCANNED:
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(x for x in dirs if not x.startswith(".") and x != "__pycache__")
            for fn in sorted(files):
                path = os.path.relpath(os.path.join(d, fn), root).replace(os.sep, "/")
                if path == me:
                    continue
                try:
                    with open(os.path.join(d, fn), encoding="utf-8") as f:
                        lines = f.read().split("\n")
                except (UnicodeDecodeError, OSError):
                    continue    # not text
                nfiles += 1
                for n, line in enumerate(lines):
                    if path == TABLE and span and span[0] <= n < span[1]:
                        continue
                    for prefix, lab, _ in labels(line):
                        if prefix not in owner:
                            continue
                        nlabels += 1
                        name, paths = owner[prefix]
                        if not allowed(path, paths):
                            errors.append(f"{path}:{n + 1}: {lab} is a label of '{name}', "
                                          f"whose row in {TABLE} does not list this file")
    for e in errors:
        print(e)
    print(f"check_labels: {len(owner)} prefixes, {nlabels} labels in {nfiles} files, "
          f"{len(errors)} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
