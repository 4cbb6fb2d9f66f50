"""Sample runs for the recording tests: a small but complete event stream."""

from __future__ import annotations

from pathlib import Path

from gpuscale.events.schema import (
    DeviceInfo,
    EndEvent,
    Event,
    GpuSample,
    HostSample,
    LogEvent,
    PhaseEvent,
    StartEvent,
    StepEvent,
)
from gpuscale.recording.writer import Recorder

T0 = 1_790_000_000.0


def sample_events(steps: int = 20, gpus: int = 2, *, end: bool = True) -> list[Event]:
    """A run of ``steps`` steps on ``gpus`` GPUs: start, samples, steps, phases, log, end."""
    events: list[Event] = [
        StartEvent(
            t=T0,
            gpuscale_version="0.1.0",
            tensorflow_version="2.21.0",
            host="testhost",
            pid=1234,
            model="mnist-cnn",
            platform="gpu",
            strategy="mirrored",
            cross_device_ops="nccl",
            num_replicas=gpus,
            global_batch=64 * gpus,
            per_replica_batch=64,
            devices=[
                DeviceInfo(index=i, name="Tesla V100", memory_total_bytes=16 << 30)
                for i in range(gpus)
            ],
            config={"model": "mnist-cnn", "steps": steps, "nested": {"a": [1, 2.5, None, "x"]}},
        )
    ]
    for step in range(steps):
        t = T0 + 1.0 + step * 0.25
        for index in range(gpus):
            events.append(
                GpuSample(
                    t=t, index=index, util_gpu_pct=90.0, mem_used_bytes=1 << 30, power_w=200.5
                )
            )
        events.append(
            HostSample(t=t, cpu_pct=12.5, mem_used_bytes=8 << 30, mem_total_bytes=32 << 30)
        )
        events.append(
            StepEvent(t=t + 0.01, step=step, step_time_s=0.2, samples=64 * gpus, warmup=step < 2)
        )
        if step % 5 == 4:
            events.append(
                PhaseEvent(
                    t=t + 0.02,
                    step=step,
                    step_time_s=0.2,
                    compute_s=0.15,
                    # one replica exchanges nothing: the probe records 0 (its apply
                    # is the rest of the step)
                    allreduce_s=0.04 if gpus > 1 else 0.0,
                    apply_s=0.01 if gpus > 1 else 0.05,
                )
            )
    events.append(
        LogEvent(t=T0 + 1.0 + steps * 0.25, message='done \u00e9\u00e8 "quoted"\nnewline')
    )
    if end:
        events.append(
            EndEvent(
                t=T0 + 2.0 + steps * 0.25,
                status="completed",
                steps=steps,
                duration_s=1.0 + steps * 0.25,
            )
        )
    return events


def write_run(path: Path, events: list[Event] | None = None) -> Path:
    """Record ``events`` (default :func:`sample_events`) at ``path`` through the Recorder."""
    problems: list[str] = []
    with Recorder(path, on_problem=problems.append) as recorder:
        for event in events if events is not None else sample_events():
            recorder.write(event)
    assert not problems, problems
    return path


def steady_steps(
    start: StartEvent, steps: int, step_s: float, allreduce_s: float, *, probe_every: int | None
) -> list[Event]:
    """After ``start``: ``steps`` steps of ``step_s`` (the first 2 warm-up), a probe
    splitting ``allreduce_s`` off every ``probe_every``-th (``None``: no probes), the end."""
    t = start.t
    events: list[Event] = []
    for i in range(steps):
        events.append(
            StepEvent(t=t + i, step=i, step_time_s=step_s, samples=start.global_batch, warmup=i < 2)
        )
        if probe_every and i % probe_every == probe_every - 1:
            events.append(
                PhaseEvent(
                    t=t + i,
                    step=i,
                    step_time_s=step_s,
                    compute_s=step_s - allreduce_s - 0.001,
                    allreduce_s=allreduce_s,
                    apply_s=0.001,
                    payload_bytes=start.payload_bytes,
                )
            )
    events.append(EndEvent(t=t + steps + 1, status="completed", steps=steps))
    return events


def script_start(workers: int = 1, t: float = 1_800_000_000.0) -> StartEvent:
    """The start of a Keras script's run on 2 CPU logical devices per worker (strong
    scaling, global batch 64, probe budget 2 %, 2 warm-up steps)."""
    return StartEvent(
        t=t,
        gpuscale_version="0",
        host="h",
        pid=1,
        source="script",
        model="train.py",
        strategy="mirrored",
        num_replicas=2 * workers,
        num_workers=workers,
        scaling="strong",
        per_replica_batch=32 // workers,
        global_batch=64,
        platform="cpu-logical",
        config={"probe_budget": 0.02, "warmup_steps": 2},
    )
