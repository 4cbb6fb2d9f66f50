"""Run a benchmark in several fresh processes and report the median of its figures.

Measured on a 2-core machine (2026-11-26): a compiled TensorFlow function runs a
fixed -2 % to +5 % against another for a whole process (two identical trainers
built side by side in one process differed by -1.9 % to +2.4 %; the same
benchmark on the same code gave 0.2 % to 6.0 % in five processes), so one
process's figure lands near 0 % or near 5 % whatever the code; the median of
several says what a user meets."""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys


def add_processes_argument(parser: argparse.ArgumentParser) -> None:
    """``--processes P`` (default 3), what :func:`in_processes` runs."""
    parser.add_argument(
        "--processes",
        type=int,
        default=3,
        help="run the rounds in this many fresh processes, one after the other, and "
        "report the median of their figures (a compiled function's speed differs from "
        "process to process by a few percent; 1: this process alone)",
    )


def in_processes(script: str, count: int, figures: tuple[str, ...]) -> int:
    """Run ``script`` with this process's arguments and ``--processes 1``, ``count``
    times one after the other, each in a fresh interpreter: each one's output as it
    comes, then for every name in ``figures`` (lines ``NAME: X%``, the last one of
    each process) the median over processes; the last of ``figures`` last."""
    argv = list(sys.argv[1:])
    if "--processes" in argv:
        at = argv.index("--processes")
        del argv[at : at + 2]
    found: dict[str, list[float]] = {name: [] for name in figures}
    for n in range(count):
        print(f"--- process {n + 1} of {count}", flush=True)
        done = subprocess.run(
            [sys.executable, script, *argv, "--processes", "1"], capture_output=True, text=True
        )
        sys.stdout.write(done.stdout)
        if done.returncode != 0:
            sys.stderr.write(done.stderr[-3000:])
            return done.returncode
        for name, values in found.items():
            hits = re.findall(rf"^{re.escape(name)}: (-?[0-9.]+)%", done.stdout, re.MULTILINE)
            if hits:
                values.append(float(hits[-1]))
    for name, values in found.items():
        if not values:
            continue
        each = ", ".join(f"{v:.1f}%" for v in values)
        print(
            f"{name}: {statistics.median(values):.1f}% (median of {len(values)} processes: {each})"
        )
    return 0
