"""Run a benchmark in several fresh processes and report the median of its figures.

Measured on a 2-core machine (2026-11-26): a compiled TensorFlow function runs a
fixed -2 % to +5 % against another for a whole process (two identical trainers
built side by side in one process differed by -1.9 % to +2.4 %; the same
benchmark on the same code gave 0.2 % to 6.0 % in five processes), so one
process's figure lands near 0 % or near 5 % whatever the code; the median of
several says what a user meets. With so few processes the median itself is
uncertain: each figure's line says by how much (a bootstrap interval of the median),
and ``python benchmarks/processes.py LOG [LOG ...]`` pools the processes of several
saved runs of one benchmark (on the same code) into one median and interval."""

from __future__ import annotations

import argparse
import random
import re
import statistics
import subprocess
import sys

#: draws of the bootstrap; seeded, so a figure's interval is the same every time
BOOTSTRAP_DRAWS = 10_000


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
            hits = re.findall(_figure(name), done.stdout, re.MULTILINE)
            if hits:
                values.append(float(hits[-1]))
    for name, values in found.items():
        if values:
            print(median_line(name, values))
    return 0


def _figure(name: str) -> str:
    """A process's ``NAME: X%`` line (``step-time-only overhead: 0.9% (split)`` too),
    not the medians' line :func:`in_processes` prints after the processes."""
    return rf"^{re.escape(name)}: (-?[0-9.]+)%(?! \(median of)"


def median_interval(values: list[float], coverage: float = 0.95) -> tuple[float, float]:
    """A percentile bootstrap interval of the median of ``values`` (seeded): how far
    the median of so few processes may be from the one many more would give."""
    rng = random.Random(0)
    n = len(values)
    medians = sorted(statistics.median(rng.choices(values, k=n)) for _ in range(BOOTSTRAP_DRAWS))
    tail = (1 - coverage) / 2
    return medians[int(tail * BOOTSTRAP_DRAWS)], medians[int((1 - tail) * BOOTSTRAP_DRAWS) - 1]


def median_line(name: str, values: list[float]) -> str:
    """``NAME: X% (median of N processes: ...; 95% bootstrap interval of the median
    a% to b%)``: the figure first, as :func:`in_processes` and the docs read it."""
    each = ", ".join(f"{v:.1f}%" for v in values)
    low, high = median_interval(values)
    return (
        f"{name}: {statistics.median(values):.1f}% (median of {len(values)} processes: "
        f"{each}; 95% bootstrap interval of the median {low:.1f}% to {high:.1f}%)"
    )


def process_figures(text: str, name: str) -> list[float]:
    """The per-process figures ``name`` in a saved output of :func:`in_processes`:
    each process's last ``NAME: X%`` line before the next process's header."""
    values = []
    for part in re.split(r"^--- process \d+ of \d+$", text, flags=re.MULTILINE)[1:]:
        hits = re.findall(_figure(name), part, re.MULTILINE)
        if hits:
            values.append(float(hits[-1]))
    return values


def pool(argv: list[str] | None = None) -> int:
    """Pool the processes of saved runs of one benchmark (``--processes P`` output)."""
    parser = argparse.ArgumentParser(description=pool.__doc__)
    parser.add_argument("logs", nargs="+", help="saved outputs of one benchmark")
    parser.add_argument("--figure", default="wall overhead", help="the figure's name")
    args = parser.parse_args(argv)
    values: list[float] = []
    for path in args.logs:
        try:
            with open(path, encoding="utf-8") as f:
                found = process_figures(f.read(), args.figure)
        except OSError as exc:
            parser.error(f"{path}: {exc.strerror or exc}")
        if not found:
            parser.error(f"{path}: no process's '{args.figure}: X%' line in it")
        print(f"{path}: {len(found)} processes")
        values += found
    print(median_line(args.figure, values))
    return 0


if __name__ == "__main__":
    raise SystemExit(pool())
