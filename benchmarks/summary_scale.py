"""What a long run's summary costs the live dashboard, which asks for one about
every second (:meth:`gpuscale.ui.model.RunModel.summary`, under the lock that the
events wait on).

Feeds a :class:`~gpuscale.analysis.summary.RunAccumulator` a run shaped like a
long 8-GPU one: every GPU sampled at 2 Hz (the sampler's default interval, 0.5 s)
with the fields the summary keeps (utilization, clock event reasons, power limit,
the process's memory), a training step every 0.1 s and a host sample a second;
``--hours`` of it (default 6: 345,600 GPU samples). Side by side in this one
process, alternating, several times each:

* ``summary``: ``acc.summary(live=True)`` of the whole run, as the live view asks
  for it (the held-down GPUs' rows are read again only as they grow by a tenth:
  the second and later calls pay for the rest);
* ``summary, rows re-read``: ``acc.summary()``, exact (what the first call, the
  end's and every summary outside the live view pay).

Also the memory the accumulator keeps (tracemalloc), per event fed. Last line::

    summary of a 6 h 8-GPU run: X s a call (Y s with the rows re-read), Z% of the live view's second; kept W MB (V bytes an event, N events)

Run: ``python benchmarks/summary_scale.py [--hours H] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpuscale.analysis.summary import RunAccumulator  # noqa: E402
from gpuscale.events.schema import (  # noqa: E402
    DeviceInfo,
    GpuSample,
    HostSample,
    StartEvent,
    StepEvent,
)

GPUS = 8
SAMPLE_S = 0.5
STEP_S = 0.1


def events(hours: float):
    """The run's events in time order."""
    t0 = 1_800_000_000.0
    yield StartEvent(
        t=t0,
        gpuscale_version="bench",
        host="bench",
        pid=1,
        model="resnet50",
        strategy="mirrored",
        num_replicas=GPUS,
        platform="gpu",
        global_batch=256 * GPUS,
        per_replica_batch=256,
        devices=[DeviceInfo(index=i, name="H100", kind="gpu") for i in range(GPUS)],
    )
    end = hours * 3600
    step = 0
    t = 0.0
    next_sample = 0.0
    next_host = 0.0
    while t < end:
        t += STEP_S
        yield StepEvent(
            t=t0 + t, step=step, step_time_s=STEP_S, samples=256 * GPUS, warmup=step < 5
        )
        step += 1
        while next_sample <= t:
            for i in range(GPUS):
                yield GpuSample(
                    t=t0 + next_sample,
                    index=i,
                    util_gpu_pct=95.0 - i,
                    throttle_reasons=["sw_power_cap"] if int(next_sample) % 3 == 0 else None,
                    power_limit_w=700.0,
                    proc_mem_bytes=40 * 2**30,
                )
            next_sample += SAMPLE_S
        if next_host <= t:
            yield HostSample(
                t=t0 + next_host, cpu_pct=40.0, mem_used_bytes=2**34, mem_total_bytes=2**36
            )
            next_host += 1.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    tracemalloc.start()
    acc = RunAccumulator()
    gpu_samples = 0
    for event in events(args.hours):
        acc.add(event)
        gpu_samples += isinstance(event, GpuSample)
    kept = tracemalloc.get_traced_memory()[0]
    total = sum(1 for _ in events(args.hours))
    tracemalloc.stop()
    acc.summary(live=True)  # the first call reads the rows
    cached: list[float] = []
    reread: list[float] = []
    for _ in range(args.repeat):
        began = time.perf_counter()
        acc.summary(live=True)
        cached.append(time.perf_counter() - began)
        began = time.perf_counter()
        acc.summary()  # not live: exact, the rows read again
        reread.append(time.perf_counter() - began)
    call, full = statistics.median(cached), statistics.median(reread)
    print(
        f"{gpu_samples:,} GPU samples; summary calls (s): {', '.join(f'{x:.2f}' for x in cached)}"
    )
    print(f"with the rows re-read (s): {', '.join(f'{x:.2f}' for x in reread)}")
    print(
        f"summary of a {args.hours:g} h {GPUS}-GPU run: {call:.2f} s a call ({full:.2f} s with the "
        f"rows re-read), {call:.0%} of the live view's second; kept {kept / 1e6:.0f} MB "
        f"({kept / total:.0f} bytes an event, {total:,} events)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
