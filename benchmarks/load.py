"""How fast a recording loads, against plain ``json.loads`` of the same lines.

Generates (in a temporary folder) a recording of one million events shaped like
a long 8-GPU run: every GPU sampled at 10 Hz with all NVML fields, a host sample
a second, a training step every 0.5 s and a phase breakdown every 20 steps
(about 3.3 hours of run), written through the real :class:`Recorder`. Then loads
it, side by side in this one process, several times each, alternating:

* ``reader``: ``gpuscale.recording.reader.load_run`` (decoded, validated against
  the schema, order checked, typed structs);
* ``json.loads``: the same file read line by line into plain dicts, no checks.

Prints the median of each, the streaming reader's peak memory (tracemalloc,
while iterating all events without keeping them), and as its last line
``load: X s per 1M events (json.loads baseline Y s)``.

Run: ``python benchmarks/load.py [--events N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from gpuscale.events.schema import (
    DeviceInfo,
    EndEvent,
    GpuSample,
    HostSample,
    LogEvent,
    PhaseEvent,
    StartEvent,
    StepEvent,
)
from gpuscale.recording.reader import iter_events, load_run
from gpuscale.recording.writer import Recorder

GPUS = 8
SAMPLE_HZ = 10
STEP_S = 0.5
PHASE_EVERY = 20


def generate(path: Path, n_events: int) -> tuple[int, float]:
    """Write a recording of ``n_events`` events; returns (events, seconds of run)."""
    t0 = 1_800_000_000.0
    count = 0
    with Recorder(path, durable=False) as recorder:  # reading is measured, not disk syncs
        recorder.write(
            StartEvent(
                t=t0,
                gpuscale_version="0.1.0",
                tensorflow_version="2.21.0",
                host="bench",
                pid=4242,
                model="resnet50",
                platform="gpu",
                strategy="mirrored",
                cross_device_ops="nccl",
                num_replicas=GPUS,
                global_batch=256 * GPUS,
                per_replica_batch=256,
                param_count=25_557_032,
                payload_bytes=102_228_128,
                devices=[
                    DeviceInfo(
                        index=i, name="NVIDIA H100 80GB HBM3", memory_total_bytes=85_520_809_984
                    )
                    for i in range(GPUS)
                ],
                config={"model": "resnet50", "steps": 100000, "batch": 256},
            )
        )
        count += 1
        tick = 0
        step = 0
        ticks_per_step = int(STEP_S * SAMPLE_HZ)
        while count < n_events - 1:
            t = t0 + tick / SAMPLE_HZ
            for index in range(GPUS):
                recorder.write(
                    GpuSample(
                        t=t,
                        index=index,
                        util_gpu_pct=97.0 - index,
                        util_mem_pct=41.5,
                        mem_used_bytes=61_203_283_968 + tick % 1000,
                        mem_total_bytes=85_520_809_984,
                        proc_mem_bytes=60_129_542_144,
                        power_w=612.25 + (tick % 7),
                        power_limit_w=700.0,
                        temp_c=61.0,
                        sm_clock_mhz=1980.0,
                        mem_clock_mhz=2619.0,
                        pcie_rx_bytes_s=1.25e9,
                        pcie_tx_bytes_s=0.75e9,
                        nvlink_rx_bytes_s=2.1e11,
                        nvlink_tx_bytes_s=2.1e11,
                    )
                )
                count += 1
            if tick % SAMPLE_HZ == 0:
                recorder.write(
                    HostSample(
                        t=t,
                        cpu_pct=38.5,
                        mem_used_bytes=201_326_592_000,
                        mem_total_bytes=2_164_663_517_184,
                        proc_cpu_pct=812.0,
                        proc_rss_bytes=18_253_611_008,
                    )
                )
                count += 1
            if tick % ticks_per_step == 0:
                recorder.write(
                    StepEvent(
                        t=t, step=step, step_time_s=0.4981, samples=256 * GPUS, warmup=step < 5
                    )
                )
                count += 1
                if step % PHASE_EVERY == PHASE_EVERY - 1:
                    recorder.write(
                        PhaseEvent(
                            t=t,
                            step=step,
                            step_time_s=0.4981,
                            compute_s=0.41,
                            allreduce_s=0.061,
                            apply_s=0.0271,
                            payload_bytes=102_228_128,
                            num_tensors=161,
                        )
                    )
                    count += 1
                if step % 1000 == 0:
                    recorder.write(LogEvent(t=t, message=f"step {step}: loss 1.234"))
                    count += 1
                step += 1
            tick += 1
        duration_s = tick / SAMPLE_HZ
        recorder.write(
            EndEvent(t=t0 + duration_s, status="completed", steps=step, duration_s=duration_s)
        )
        count += 1
    return count, duration_s


def load_with_reader(path: Path) -> int:
    return len(load_run(path).events)


def load_with_json(path: Path) -> int:
    loads = json.loads
    with open(path, "rb") as f:
        return len([loads(line) for line in f])


def timed(fn, path: Path) -> float:
    gc.collect()
    start = time.perf_counter()
    n = fn(path)
    elapsed = time.perf_counter() - start
    assert n > 0
    return elapsed


def streaming_peak_bytes(path: Path) -> tuple[int, int]:
    """(events, tracemalloc peak) while streaming every event without keeping it."""
    gc.collect()
    tracemalloc.start()
    count = 0
    for _ in iter_events(path):
        count += 1
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return count, peak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="gpuscale-bench-") as tmp:
        path = Path(tmp) / "bench.ndjson"
        start = time.perf_counter()
        n_events, duration_s = generate(path, args.events)
        write_s = time.perf_counter() - start
        size = path.stat().st_size
        print(
            f"recording: {n_events} events, {duration_s / 3600:.2f} h of run, "
            f"{size / 1e6:.0f} MB; written through Recorder in {write_s:.1f} s "
            f"({write_s / n_events * 1e6:.1f} us per event)",
            flush=True,
        )
        reader_s: list[float] = []
        json_s: list[float] = []
        for _ in range(args.repeat):
            reader_s.append(timed(load_with_reader, path))
            json_s.append(timed(load_with_json, path))
            print(f"  reader {reader_s[-1]:.2f} s   json.loads {json_s[-1]:.2f} s", flush=True)
        count, peak = streaming_peak_bytes(path)
        assert count == n_events, (count, n_events)
        print(
            f"streaming (iter_events) peak memory: {peak / 2**20:.1f} MiB (tracemalloc) "
            f"for a {size / 1e6:.0f} MB file"
        )
        scale = 1_000_000 / n_events
        reader_med = statistics.median(reader_s) * scale
        json_med = statistics.median(json_s) * scale
        print(f"reader / json.loads: {reader_med / json_med:.2f}x (median of {args.repeat})")
        print(f"load: {reader_med:.2f} s per 1M events (json.loads baseline {json_med:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
