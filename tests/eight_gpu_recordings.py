"""Recordings of runs on an 8-GPU box made the way gpuscale records them: the real
:class:`~gpuscale.telemetry.sampler.Sampler` over :class:`fake_nvml.FakeNvml` (an
NVSwitch H100 box, or 8 PCIe A100s on two sockets), the real
:class:`~gpuscale.recording.writer.Recorder`, steps and a few probes; no
TensorFlow. ``tweak`` sets the GPUs' state before each sample (a GPU held down,
one idle), so the summary, ``replay --end`` and ``recommend --from`` read what
NVML would have said."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from fake_nvml import (
    FakeClock,
    FakeGpu,
    FakeNvml,
    nvmlClocksEventReasonGpuIdle,
    nvmlClocksEventReasonHwSlowdown,
    nvmlClocksEventReasonSwPowerCap,
    nvmlClocksEventReasonSwThermalSlowdown,
)

from gpuscale.events.schema import EndEvent, LogEvent, PhaseEvent, StartEvent, StepEvent
from gpuscale.recording.writer import Recorder
from gpuscale.telemetry.sampler import Sampler

T0 = 1_790_000_000.0
SAMPLE_S = 0.5
Tweak = Callable[[list[FakeGpu], int], None]
"""Called with the machine's GPUs and the sample's number before each sample."""

THERMAL = nvmlClocksEventReasonSwThermalSlowdown
HW_SLOWDOWN = nvmlClocksEventReasonHwSlowdown
POWER_CAP = nvmlClocksEventReasonSwPowerCap


def idle(gpu: FakeGpu) -> None:
    """``gpu`` with nothing to do (no kernel runs on it)."""
    gpu.util_gpu = gpu.util_mem = 0
    gpu.gpm_sm_util = gpu.gpm_tensor_util = 0
    gpu.power_mw, gpu.sm_clock_mhz = 71_000, 345
    gpu.throttle_mask = nvmlClocksEventReasonGpuIdle


def held(gpu: FakeGpu, mask: int, *, limit_w: float | None = None) -> None:
    """``gpu`` busy with its clocks held down by ``mask`` (and its power limit
    lowered to ``limit_w``)."""
    gpu.util_gpu = 100
    gpu.throttle_mask = mask
    gpu.sm_clock_mhz = 1155
    if limit_w is not None:
        gpu.power_limit_mw = int(limit_w * 1000)
        gpu.power_mw = gpu.power_limit_mw - 1000


def record(
    path: Path,
    *,
    machine: str = "h100-box",
    devices: int = 8,
    tweak: Tweak | None = None,
    seconds: float = 20.0,
    step_s: float = 0.130,
    sample_all: bool = False,
    seed: int = 0,
    gpus: list[int] | None = None,
    exchange_s: float | None = None,
) -> Path:
    """A run of ``devices`` replicas on GPUs ``0..devices-1`` of ``machine`` (a
    :data:`fake_nvml.SCENARIOS` name), recorded to ``path``. Every GPU is at its
    power cap under load unless ``tweak`` says otherwise (the fake's default, as a
    real H100 under full load). ``sample_all``: the sampler reads every GPU of the
    machine (a script's run: gpuscale does not know which GPUs it uses), not only
    the run's."""
    clock = FakeClock()
    fake = FakeNvml.scenario(machine, clock=clock)
    used = sorted(gpus) if gpus is not None else list(range(devices))
    devices = len(used)
    for i, gpu in enumerate(fake.gpus):
        if i not in used:
            idle(gpu)
    events = []
    sampler = Sampler(
        events.append,
        nvml=fake,
        interval_s=SAMPLE_S,
        host_clock=clock,
        gpu_indices=None if sample_all else used,
    )
    sampler.open()
    infos = [d for d in sampler.devices if d.index in used]
    for d in infos:
        d.tf_name = f"/job:localhost/replica:0/task:0/device:GPU:{d.index}"
    per_replica = 64
    start = StartEvent(
        t=T0,
        gpuscale_version="0.1.0",
        tensorflow_version="2.21.0",
        host="box",
        pid=4242,
        config={"model": "resnet50", "gpus": used},
        devices=infos,
        platform="gpu",
        model="resnet50",
        strategy="mirrored",
        cross_device_ops="nccl" if devices > 1 else None,
        num_replicas=devices,
        global_batch=per_replica * devices,
        per_replica_batch=per_replica,
        param_count=25_557_032,
        payload_bytes=102_228_128,
        topology=sampler.topology,
    )
    rng = random.Random(seed)
    out: list = [start, LogEvent(t=T0 + 0.01, message=sampler.status, source="telemetry")]
    t, step, sample, next_sample = T0 + 1.0, 0, 0, T0 + SAMPLE_S
    exchange = 0.0 if devices == 1 else 0.004 + 0.001 * devices
    if exchange_s is not None and devices > 1:
        exchange = exchange_s
    while t < T0 + seconds:
        took = (step_s + exchange) * rng.uniform(0.98, 1.03)
        t += took
        while next_sample <= t:
            if tweak is not None:
                tweak(fake.gpus, sample)
            clock.now = next_sample
            sampler.refresh_pcie()
            out.extend(sampler.sample_once(next_sample))
            next_sample += SAMPLE_S
            sample += 1
        out.append(
            StepEvent(
                t=t, step=step, step_time_s=took, samples=per_replica * devices, warmup=step < 3
            )
        )
        if step % 10 == 5:
            compute = step_s * rng.uniform(0.99, 1.01)
            part = exchange * rng.uniform(0.9, 1.1)
            out.append(
                PhaseEvent(
                    t=t + 0.001,
                    step=step,
                    step_time_s=compute + part + 0.004,
                    compute_s=compute,
                    allreduce_s=part,
                    apply_s=0.004,
                    payload_bytes=102_228_128,
                    method="split-step",
                    compute_allreduce_s=compute + part if devices > 1 else None,
                    compute_first=(step // 10) % 2 == 0 if devices > 1 else None,
                )
            )
        step += 1
    out.append(EndEvent(t=t + 0.01, status="completed", steps=step, duration_s=t + 0.01 - T0))
    recorder = Recorder(path)
    for event in out:
        recorder.write(event)
    recorder.close()
    return path
