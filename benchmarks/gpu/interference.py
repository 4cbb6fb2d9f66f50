"""What gpuscale's telemetry costs a training job on the GPU it samples.

gpuscale samples NVML from its own process (``gpuscale run``/``watch``), not from
the training process; the question a user asks is whether those calls (the fast
ones every period, the GPM samples, the PCIe throughput calls that block about
20 ms in a thread of their own) slow the job's steps. ``benchmarks/sampler.py``
measures the sampler's CPU; this measures the other process's step time.

Method: a training-like loop runs in a child process for the whole benchmark
(``--workload torch``: a bf16 MLP's forward, backward and SGD update on the GPU, a
host sync each step, as ``fit`` has; ``--workload cpu``: numpy matrix products, to
try the benchmark on a machine without a GPU). It stamps every step's end with the
system-wide monotonic clock. This process alternates windows of equal length,
side by side: no sampler; a :class:`Sampler` at the default interval (0.5 s); one
at 0.1 s (``--interval``'s lowest sensible setting). Each window starts after the
sampler's start (NVML's start-up is a one-time cost, reported apart). Per mode:
the median step time and the steps per second of wall clock (every cost the job
meets in the window). Last line:
``telemetry's cost to the job: X% wall at 0.5 s (Y% at 0.1 s)``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from gpuscale.telemetry.sampler import DEFAULT_INTERVAL_S, Sampler

MODES = ("off", f"{DEFAULT_INTERVAL_S:g} s", "0.1 s")
INTERVALS = {"off": None, MODES[1]: DEFAULT_INTERVAL_S, "0.1 s": 0.1}


def workload(kind: str, times_path: str) -> int:
    """The child: step until stdin closes, then write each step's end time."""
    import threading

    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    if kind == "torch":
        import torch

        dev = torch.device("cuda")
        torch.manual_seed(0)
        width, batch = 8192, 2048
        layers = [torch.nn.Linear(width, width, device=dev, dtype=torch.bfloat16) for _ in range(4)]
        model = torch.nn.Sequential(*[m for lin in layers for m in (lin, torch.nn.GELU())])
        opt = torch.optim.SGD(model.parameters(), lr=1e-4)
        x = torch.randn(batch, width, device=dev, dtype=torch.bfloat16)

        def step() -> None:
            opt.zero_grad(set_to_none=True)
            loss = model(x).float().square().mean()
            loss.backward()
            opt.step()
            loss.item()  # the host sync a fit() step has (its logs)

    else:
        import numpy as np

        a = np.random.default_rng(0).standard_normal((384, 384))

        def step() -> None:
            (a @ a).sum()

    for _ in range(20):  # warm-up: kernels chosen, memory allocated
        step()
    ends: list[float] = []
    print("ready", flush=True)
    while not stop.is_set():
        step()
        ends.append(time.monotonic())
    Path(times_path).write_text("\n".join(f"{t:.9f}" for t in ends))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("torch", "cpu"), default="torch")
    parser.add_argument("--window", type=float, default=3.0, help="seconds per window")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the three modes")
    parser.add_argument("--child", metavar="TIMES", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return workload(args.workload, args.child)

    times_path = Path(f"/tmp/gpuscale-interference-{os.getpid()}.txt")
    child = subprocess.Popen(
        [sys.executable, __file__, "--workload", args.workload, "--child", str(times_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdin is not None
    if child.stdout.readline().strip() != "ready":
        print("the workload did not start", file=sys.stderr)
        return 1
    pids = [child.pid]
    windows: list[tuple[str, float, float]] = []
    starts: list[float] = []
    status = ""
    samples = 0
    for r in range(args.rounds):
        # rotate the order each round so that no mode always follows another
        order = MODES[r % 3 :] + MODES[: r % 3]
        for mode in order:
            interval = INTERVALS[mode]
            sampler = None
            if interval is not None:
                count = [0]
                sampler = Sampler(
                    lambda event, count=count: count.__setitem__(0, count[0] + 1),
                    interval_s=interval,
                    pids=lambda: pids,
                )
                t0 = time.perf_counter()
                sampler.start()
                starts.append(time.perf_counter() - t0)
                status = sampler.status
            begin = time.monotonic()
            time.sleep(args.window)
            end = time.monotonic()
            if sampler is not None:
                sampler.stop()
                samples += count[0]
            windows.append((mode, begin, end))
            time.sleep(0.2)  # the sampler's threads gone before the next window
    child.stdin.close()
    child.wait(timeout=60)
    ends = [float(line) for line in times_path.read_text().split()]
    times_path.unlink()

    print(f"status: {status}")
    print(f"workload: {args.workload}; {args.rounds} rounds of {args.window:g} s windows")
    print(f"sampler start (NVML open, one-time): median {statistics.median(starts) * 1e3:.0f} ms")
    print(f"events from the samplers: {samples}")
    result: dict[str, tuple[float, float]] = {}
    for mode in MODES:
        step_times: list[float] = []
        rates: list[float] = []
        for m, begin, end in windows:
            if m != mode:
                continue
            inside = [t for t in ends if begin <= t <= end]
            step_times += [b - a for a, b in zip(inside, inside[1:], strict=False)]
            rates.append(len(inside) / (end - begin))
        result[mode] = (statistics.median(step_times), statistics.median(rates))
        print(
            f"{mode:>6}: median step {result[mode][0] * 1e3:8.3f} ms; "
            f"{result[mode][1]:8.1f} steps/s over the wall (median of {len(rates)} windows)"
        )
    off_rate = result["off"][1]
    wall = {m: 100.0 * (off_rate / result[m][1] - 1.0) for m in MODES[1:]}
    step = {m: 100.0 * (result[m][0] / result["off"][0] - 1.0) for m in MODES[1:]}
    print(f"step-time cost: {step[MODES[1]]:+.2f}% at {MODES[1]} ({step['0.1 s']:+.2f}% at 0.1 s)")
    print(
        f"telemetry's cost to the job: {wall[MODES[1]]:+.2f}% wall at {MODES[1]} "
        f"({wall['0.1 s']:+.2f}% at 0.1 s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
