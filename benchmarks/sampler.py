"""What the telemetry sampler costs: its CPU time as a share of one core at 10 Hz.

Method: the same process alternates idle windows (the main thread sleeps) and
sampler windows (a :class:`Sampler` at ``--interval`` sampling every device
NVML sees, plus the host) of equal wall time, ``--rounds`` times. For each
window it reads the process CPU time (``time.process_time``); the cost is

    (CPU seconds in sampler windows - CPU seconds in idle windows) / wall seconds

in percent of one core, measured side by side in one run. It also reports the
sampler threads' own CPU time (``pthread_getcpuclockid``), which excludes
everything else in the process. NVML start-up is excluded (it happens once).

On a machine without an NVIDIA GPU this measures the host sampler (psutil);
with a GPU it measures the real NVML calls. ``--stand-in N`` samples N
stand-in GPUs from ``tests/fake_nvml.py`` instead: the Python side of the
sampler without any driver time (a lower bound for N real GPUs).

Last line: ``sampler: X% of one core at 10 Hz (N GPUs, host)``. Goal: under 2%.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from gpuscale.telemetry.sampler import Sampler


def thread_cpu_s(sampler: Sampler) -> float:
    """CPU seconds used so far by the sampler's live threads."""
    total = 0.0
    for thread in sampler._threads:
        if thread.is_alive() and thread.ident is not None:
            try:
                total += time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
            except (OSError, AttributeError):
                pass
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="wall time per mode (total)")
    parser.add_argument("--rounds", type=int, default=3, help="idle/sampler alternations")
    parser.add_argument("--interval", type=float, default=0.1, help="sample interval (s)")
    parser.add_argument(
        "--stand-in", type=int, default=0, metavar="N", help="sample N stand-in GPUs (no driver)"
    )
    args = parser.parse_args()
    nvml = None
    if args.stand_in:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        from fake_nvml import FakeNvml

        nvml = FakeNvml.h100_box(args.stand_in)
    window = args.seconds / args.rounds
    pids = [os.getpid()]
    idle_cpu = sampler_cpu = threads_cpu = 0.0
    wall = 0.0
    samples = 0
    devices = 0
    status = ""
    for _ in range(args.rounds):
        c0 = time.process_time()
        time.sleep(window)
        idle_cpu += time.process_time() - c0

        count = [0]

        def emit(event, count=count):
            count[0] += 1

        sampler = Sampler(emit, interval_s=args.interval, pids=lambda: pids, nvml=nvml)
        sampler.start()
        devices = len(sampler.devices)
        status = sampler.status
        t0 = time.perf_counter()
        c0 = time.process_time()
        th0 = thread_cpu_s(sampler)
        time.sleep(window)
        th1 = thread_cpu_s(sampler)
        sampler_cpu += time.process_time() - c0
        wall += time.perf_counter() - t0
        sampler.stop()
        threads_cpu += th1 - th0
        samples += count[0]
    hz = 1.0 / args.interval
    cost = 100.0 * (sampler_cpu - idle_cpu) / wall
    thread_cost = 100.0 * threads_cpu / wall
    kind = "stand-in NVML" if args.stand_in else ("NVML" if devices else "host")
    print(f"status: {status}")
    print(f"wall per mode: {wall:.2f} s in {args.rounds} rounds, {samples} events emitted")
    print(f"idle process CPU:     {100.0 * idle_cpu / wall:6.3f}% of one core")
    print(f"sampling process CPU: {100.0 * sampler_cpu / wall:6.3f}% of one core")
    print(f"sampler threads CPU:  {thread_cost:6.3f}% of one core")
    print(f"sampler: {cost:.2f}% of one core at {hz:g} Hz ({devices} GPUs, {kind})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
