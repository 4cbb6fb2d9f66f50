"""What one trainer process for every device count saves a live sweep.

Each round runs the same short live sweep twice, as a user would:
``gpuscale recommend --sweep 1,2 --width 4 --global-batch 16 --steps 40
--no-record --json`` on CPU logical devices, once with the counts sharing one
trainer process (the default) and once with ``--no-reuse`` (a fresh TensorFlow
process per count), the order alternating between rounds so drifting machine
load hits both alike. The wall clock is the whole command's.

Printed: each round's two wall times; the median step time of each count in
both ways (a first count's compilation must not leak into the next: the shared
process must measure what separate processes measure); then, from one shared
process running the counts 1, 2 several times over (``--cycles``), the resident
memory (RSS, the telemetry's ``proc_rss_bytes``) at the end of each run, which
must not keep growing; and last
``sweep wall time: reuse X s vs separate Y s (ratio R)`` (medians over rounds,
R = X / Y).

Run: ``python benchmarks/sweep_startup.py [--rounds 3] [--steps 40] [--cycles 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

TINY = ["--width", "4", "--global-batch", "16"]


def _sweep(counts: str, steps: int, warmup: int, reuse: bool) -> tuple[float, dict[int, float]]:
    """One `gpuscale recommend` live sweep: its wall time and each count's step time."""
    command = [sys.executable, "-m", "gpuscale", "recommend", "--sweep", counts, *TINY]
    command += ["--steps", str(steps), "--warmup-steps", str(warmup)]
    command += ["--no-record", "--no-chart", "--json"] + ([] if reuse else ["--no-reuse"])
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    wall_s = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"the sweep failed ({done.returncode}): {done.stderr[-1500:]}")
    points = json.loads(done.stdout)["points"]
    return wall_s, {p["devices"]: p["step_time_s"] for p in points if not p.get("predicted")}


def _memory(
    cycles: int, steps: int, warmup: int
) -> list[tuple[int, float, float | None, int | None]]:
    """Counts 1, 2 ``cycles`` times over in one process: per run, its device count,
    median step time, the process's RSS in its last host sample and its number of
    threads when the run ended (left-over threads of earlier strategies would show)."""
    import psutil

    from gpuscale.events.schema import HostSample, StepEvent
    from gpuscale.live.trainer_sweep import TrainerSweep
    from gpuscale.trainer.options import TrainConfig

    configs = [
        TrainConfig(devices=n, width=4, global_batch=16, steps=steps, warmup_steps=warmup)
        for _ in range(cycles)
        for n in (1, 2)
    ]
    sweep = TrainerSweep(configs, record=None, sample_interval_s=0.25)
    out = []
    try:
        for run in sweep.runs:
            run.start()
            rss, times = None, []
            for event in run.events(timeout=None):
                if isinstance(event, HostSample) and event.proc_rss_bytes:
                    rss = event.proc_rss_bytes
                elif isinstance(event, StepEvent) and not event.warmup:
                    times.append(event.step_time_s)
            if run.end is None or run.end.status != "completed":
                raise SystemExit(f"run {len(out) + 1} ended {run.end and run.end.status}")
            try:
                threads = psutil.Process(sweep._proc.pid).num_threads()
            except (psutil.Error, AttributeError):
                threads = None
            out.append((run.config.devices or 1, statistics.median(times), rss, threads))
    finally:
        sweep.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the two sweeps")
    parser.add_argument("--steps", type=int, default=40, help="steps per count (recommend's)")
    parser.add_argument("--warmup-steps", type=int, default=5)
    parser.add_argument("--cycles", type=int, default=3, help="1, 2 repeated in the RSS check")
    parser.add_argument(
        "--memory-only", action="store_true", help="only the one-process RSS and threads check"
    )
    args = parser.parse_args()
    if args.memory_only:
        args.rounds = 0
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    walls: dict[bool, list[float]] = {True: [], False: []}
    steps: dict[bool, dict[int, list[float]]] = {True: {}, False: {}}
    for r in range(args.rounds):
        order = (True, False) if r % 2 == 0 else (False, True)
        line = []
        for reuse in order:
            wall_s, per_count = _sweep("1,2", args.steps, args.warmup_steps, reuse)
            walls[reuse].append(wall_s)
            for n, t in per_count.items():
                steps[reuse].setdefault(n, []).append(t)
            line.append(f"{'reuse' if reuse else 'separate'} {wall_s:.1f} s")
        print(f"round {r + 1}: " + ", ".join(line), flush=True)
    for n in sorted(steps[True]):
        a, b = statistics.median(steps[True][n]), statistics.median(steps[False][n])
        print(
            f"step time on {n} device(s): reuse {a * 1e3:.1f} ms vs separate {b * 1e3:.1f} ms "
            f"(ratio {a / b:.2f}; per round reuse "
            f"{', '.join(f'{t * 1e3:.1f}' for t in steps[True][n])}, separate "
            f"{', '.join(f'{t * 1e3:.1f}' for t in steps[False][n])} ms)"
        )
    runs = _memory(args.cycles, args.steps, args.warmup_steps)
    for i, (n, step_s, rss, threads) in enumerate(runs, start=1):
        where = f"{rss / 2**20:.0f} MiB" if rss else "n/a"
        print(
            f"one process, run {i} on {n} device(s): step {step_s * 1e3:.1f} ms, RSS {where}, "
            f"{threads if threads is not None else 'n/a'} threads"
        )
    if not args.rounds:
        return 0
    reuse, separate = statistics.median(walls[True]), statistics.median(walls[False])
    print(
        f"sweep wall time: reuse {reuse:.1f} s vs separate {separate:.1f} s (ratio {reuse / separate:.2f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
