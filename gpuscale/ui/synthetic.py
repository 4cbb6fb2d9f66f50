"""Synthetic, deterministic runs: event streams with known content for the
dashboard's tests, its benchmark and demos. Not measurements: every number here
is made up from a seeded random generator, and the start event says so."""

from __future__ import annotations

import random
from pathlib import Path

from gpuscale.events.schema import (
    DeviceInfo,
    EndEvent,
    ErrorEvent,
    Event,
    GpuSample,
    HostSample,
    LogEvent,
    PhaseEvent,
    StartEvent,
    StepEvent,
    encode,
)

T0 = 1_763_750_000.0
"""A fixed start time, so every generated run is byte-for-byte the same."""
GIB = 2**30


def synthetic_run(
    *,
    gpus: int = 0,
    cpu_devices: int = 2,
    duration_s: float = 30.0,
    sample_hz: float = 2.0,
    steps_per_s: float = 5.0,
    phase_every: int = 10,
    warmup_steps: int = 3,
    fail: bool = False,
    lost_gpu: int | None = None,
    gpm: bool = True,
    seed: int = 0,
    model: str = "mnist-cnn",
) -> list[Event]:
    """A whole run: start, samples, steps, phases, logs, and an end (or an error).

    ``gpus > 0`` makes a GPU run with that many GPUs (H100-like numbers, NVLink,
    GPM when ``gpm``); otherwise a run on ``cpu_devices`` logical CPU devices.
    """
    rng = random.Random(seed)
    n = gpus or cpu_devices
    if gpus:
        devices = [
            DeviceInfo(
                index=i,
                name="NVIDIA H100 80GB HBM3",
                kind="gpu",
                memory_total_bytes=80 * GIB,
                pcie_gen=5,
                pcie_width=16,
                nvlink_links=18,
                tf_name=f"/device:GPU:{i}",
            )
            for i in range(gpus)
        ]
        platform = "gpu"
    else:
        devices = [
            DeviceInfo(index=i, name=f"CPU:{i}", kind="cpu-logical", tf_name=f"/device:CPU:{i}")
            for i in range(cpu_devices)
        ]
        platform = "cpu-logical"
    per_replica = 64
    start = StartEvent(
        t=T0,
        gpuscale_version="0.1.0",
        tensorflow_version="2.21.0",
        host="synthetic-host",
        pid=4242,
        devices=devices,
        platform=platform,
        model=model,
        strategy="mirrored" if n > 1 else "one-device",
        cross_device_ops=("nccl" if gpus else "reduce-to-one") if n > 1 else None,
        num_replicas=n,
        scaling="weak",
        global_batch=per_replica * n,
        per_replica_batch=per_replica,
        param_count=1_200_000,
        payload_bytes=4_800_000,
        note="synthetic run (made-up numbers, for tests and benchmarks)",
    )
    events: list[Event] = [start]
    timed: list[tuple[float, int, Event]] = []
    order = 0

    def add(event: Event) -> None:
        nonlocal order
        order += 1
        timed.append((event.t, order, event))

    add(LogEvent(t=T0 + 0.01, message=f"building {model} on {n} device(s)"))
    add(
        LogEvent(
            t=T0 + 0.02,
            message="NVML: synthetic" if gpus else "No NVIDIA driver found: host samples only",
            source="telemetry",
        )
    )
    compute = 0.030 if gpus else 0.120
    allreduce = 0.004 * (n - 1)
    t = T0 + 1.0
    step = 0
    end_t = T0 + duration_s
    while t < end_t:
        step += 1
        jitter = rng.uniform(0.95, 1.08)
        step_time = (compute + allreduce + 0.002) * jitter
        t += max(step_time, 1 / steps_per_s)
        if t >= end_t:
            step -= 1
            break
        add(
            StepEvent(
                t=t,
                step=step - 1,  # numbered from 0, as the format says
                step_time_s=step_time,
                samples=per_replica * n,
                warmup=step <= warmup_steps,
            )
        )
        if step % phase_every == 0:
            c = compute * rng.uniform(0.97, 1.03)
            a = allreduce * rng.uniform(0.8, 1.2)
            add(
                PhaseEvent(
                    t=t + 0.001,
                    step=step - 1,
                    step_time_s=c + a + 0.002,
                    compute_s=c,
                    allreduce_s=a,
                    apply_s=0.002,
                    input_s=0.0005 * rng.random(),
                    payload_bytes=4_800_000,
                    # the exchange timed alone: longer than its exposed part (overlap)
                    allreduce_total_s=2.5 * allreduce if n > 1 else None,
                )
            )
        if step % 100 == 0:
            add(LogEvent(t=t + 0.002, message=f"step {step}: loss {2.3 / (1 + step / 200):.3f}"))
    last_step = step
    period = 1 / sample_hz
    k = 0
    s_t = T0 + 0.5
    while s_t < end_t:
        k += 1
        add(
            HostSample(
                t=s_t,
                cpu_pct=min(100.0, 80 + rng.uniform(-8, 8)),
                mem_used_bytes=int(9.5 * GIB),
                mem_total_bytes=24 * GIB,
                proc_cpu_pct=150 + rng.uniform(-20, 20),
                proc_rss_bytes=int(1.4 * GIB),
            )
        )
        for i in range(gpus):
            if lost_gpu == i and s_t > T0 + duration_s / 2:
                continue  # no samples after the GPU is lost
            util = min(100.0, max(0.0, 85 + 10 * ((i % 3) - 1) + rng.uniform(-5, 5)))
            add(
                GpuSample(
                    t=s_t + 0.001 * i,
                    index=i,
                    util_gpu_pct=round(util, 1),
                    util_mem_pct=round(util * 0.6, 1),
                    mem_used_bytes=int((40 + i) * GIB),
                    mem_total_bytes=80 * GIB,
                    proc_mem_bytes=int((38 + i) * GIB),
                    power_w=round(550 + rng.uniform(-30, 30)),
                    power_limit_w=700.0,
                    temp_c=float(60 + i),
                    sm_clock_mhz=1980.0,
                    mem_clock_mhz=2619.0,
                    pcie_rx_bytes_s=1.2e9 + rng.uniform(-1e8, 1e8),
                    pcie_tx_bytes_s=0.4e9,
                    nvlink_rx_bytes_s=45e9 + rng.uniform(-1e9, 1e9),
                    nvlink_tx_bytes_s=45e9,
                    gpm_sm_activity_pct=round(util * 0.7, 1) if gpm else None,
                    gpm_tensor_activity_pct=round(util * 0.4, 1) if gpm else None,
                )
            )
        s_t += period
    if lost_gpu is not None and lost_gpu < gpus:
        add(GpuSample(t=T0 + duration_s / 2, index=lost_gpu, lost=True))
        add(
            LogEvent(
                t=T0 + duration_s / 2,
                source="telemetry",
                level="error",
                message=f"GPU {lost_gpu} fell off the bus (NVML GpuIsLost)",
            )
        )
    timed.sort()
    events.extend(e for _, _, e in timed)
    if fail:
        events.append(
            ErrorEvent(
                t=end_t,
                message="ResourceExhaustedError: OOM when allocating tensor with shape [64,128,28,28]",
                traceback='Traceback (most recent call last):\n  File "loop.py", line 88, in train\n    step_fn()\ntensorflow.errors.ResourceExhaustedError: OOM',
            )
        )
        events.append(
            EndEvent(t=end_t + 0.01, status="failed", steps=last_step, duration_s=duration_s)
        )
    else:
        events.append(EndEvent(t=end_t, status="completed", steps=last_step, duration_s=duration_s))
    return events


def write_run(path: Path, events: list[Event]) -> Path:
    """Write events as a recording (one JSON object a line)."""
    path.write_bytes(b"".join(encode(e) + b"\n" for e in events))
    return path
