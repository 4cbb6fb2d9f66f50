"""Sweeps for the scaling view's tests: a measured 1-2-4-8 GPU sweep with phase
breakdowns, the same sweep stopped after two counts, and the shipped CPU runs."""

from __future__ import annotations

from pathlib import Path

from gpuscale.analysis.sweep import SweepPoint, load_inputs, normalize
from gpuscale.ui.sweep_app import SweepView, sweep_heading

SAMPLES = Path(__file__).resolve().parent.parent / "sample_runs"
CPU_RUNS = [SAMPLES / "mnist-cnn_1xcpu.ndjson", SAMPLES / "mnist-cnn_2xcpu.ndjson"]

# (devices, compute, exposed all-reduce, apply, input wait) in ms: weak scaling,
# the exposed all-reduce growing with N as a ring's does on PCIe.
GPU_STEPS_MS = [
    (1, 80.0, 0.0, 4.0, 1.0),
    (2, 80.0, 9.0, 4.0, 1.0),
    (4, 80.0, 16.0, 4.0, 1.5),
    (8, 80.0, 40.0, 4.0, 2.0),
]


def gpu_points(counts: tuple[int, ...] = (1, 2, 4, 8)) -> list[SweepPoint]:
    points = []
    for n, compute, allreduce, apply, wait in GPU_STEPS_MS:
        if n not in counts:
            continue
        step_s = (compute + allreduce + apply + wait) / 1000
        points.append(
            normalize(
                SweepPoint(
                    devices=n,
                    scaling="weak",
                    model="resnet50",
                    config="nccl",
                    per_replica_batch=64,
                    step_time_s=step_s,
                    steps=95,
                    spread=0.03,
                    compute_s=compute / 1000,
                    allreduce_s=allreduce / 1000,
                    apply_s=apply / 1000,
                    input_s=wait / 1000,
                    payload_bytes=102_000_000,
                    device_name="NVIDIA A100-SXM4-80GB",
                    source=f"runs/resnet50_{n}xgpu.ndjson",
                )
            )
        )
    return points


def gpu_sweep() -> SweepView:
    points = gpu_points()
    return SweepView(points=points, heading=sweep_heading(points, 4), available_devices=8)


def stopped_sweep() -> SweepView:
    points = gpu_points((1, 2))
    return SweepView(
        points=points,
        heading=sweep_heading(points),
        planned=[1, 2, 4, 8],
        state="stopped",
        available_devices=8,
    )


def cpu_sweep() -> SweepView:
    sweep = load_inputs(CPU_RUNS)
    return SweepView(points=sweep.points, heading=sweep_heading(sweep.points, 2))


def published_sweep() -> SweepView:
    """A published table (seed000): step times only, no phase breakdown anywhere."""
    sweep = load_inputs([SAMPLES / "seed000_v100.json"])
    return SweepView(
        points=sweep.points,
        heading=sweep_heading(sweep.points),
        available_devices=sweep.available_devices,
    )


def one_count_sweep() -> SweepView:
    """The shipped 1-device CPU run alone: a sweep of 1 and 2 stopped after its first
    count, nothing to predict from."""
    sweep = load_inputs([SAMPLES / "mnist-cnn_1xcpu.ndjson"])
    return SweepView(
        points=sweep.points,
        heading=sweep_heading(sweep.points),
        planned=[1, 2],
        state="stopped",
    )
