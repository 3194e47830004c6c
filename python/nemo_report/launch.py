"""Entry point of the installed launcher (bin/nemo-report, from
python/nemo-report.in): check that this Python has what the report needs
before anything imports it, and say how to get it when it has not."""
import sys

# module -> the Debian package that provides it for the system python3
NEEDS = (("numpy", "python3-numpy"), ("matplotlib", "python3-matplotlib"))
EXIT_MISSING = 3


def missing():
    out = []
    for mod, pkg in NEEDS:
        try:
            __import__(mod)
        except ImportError:
            out.append((mod, pkg))
    return out


def run(argv=None):
    miss = missing()
    if miss:
        sys.stderr.write(
            f"nemo-report: {sys.executable} cannot import {' or '.join(m for m, _ in miss)}, which "
            "nemo-report needs.\n"
            f"nemo-report: on Debian or Ubuntu install them: sudo apt-get install "
            f"{' '.join(p for _, p in miss)}\n"
            "nemo-report: or point NEMO_PYTHON at a python3 that has numpy and matplotlib.\n")
        return EXIT_MISSING
    from .cli import main
    return main(argv)
