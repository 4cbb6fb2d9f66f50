"""Defaults the trainer picks once it knows the devices (no TensorFlow here).

On GPUs the defaults are the real workloads (seed 002's mnist-cnn: 128 channels,
global batch 1024, strong scaling). On a CPU-only machine those take 12-25 s per
step on 2 cores, so, unless the user set them, the width and batch shrink to
something that steps several times a second; the note says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from gpuscale.errors import GpuscaleError
from gpuscale.formatting import plural
from gpuscale.trainer.options import TrainConfig

SEED_002_WIDTH = 128
SEED_002_GLOBAL_BATCH = 1024
CPU_WIDTH = 32
"""mnist-cnn width picked on CPU. Measured on 2 shared cores, 2 logical devices,
TF 2.21: width 128 at global batch 1024 (seed 002) 12-25 s/step; width 128 at 128
~0.9 s/step; width 64 at 128 ~0.25 s/step; width 32 at 128 0.08-0.15 s/step
(picked: about 10 steps/s, still six real convolutions); width 32 at 64 ~0.04 s/step."""
CPU_GLOBAL_BATCH = 128

PER_REPLICA_DEFAULTS = {
    # model: (GPU, CPU) batch per replica (weak scaling)
    "resnet50": (64, 4),
    "mlp": (256, 64),
    "transformer": (32, 4),
}
USER_MODEL_BATCH = (32, 8)


@dataclass
class Sizing:
    width: int | None
    """mnist-cnn width (None for other models)."""
    per_replica_batch: int
    scaling: str
    """``weak`` (batch per replica fixed) or ``strong`` (global batch fixed)."""
    note: str
    """What was picked automatically and why ("" when nothing was)."""


def resolve_sizing(
    config: TrainConfig, platform: str, num_replicas: int, cpu_count: int | None = None
) -> Sizing:
    """Decide width, batch and scaling mode; explain automatic choices in ``note``."""
    on_cpu = platform != "gpu"
    cpu_count = cpu_count or os.cpu_count() or 1
    notes: list[str] = []
    width = None
    if config.model == "mnist-cnn":
        if config.width is not None:
            width = config.width
        elif on_cpu and config.batch_per_replica is None and config.global_batch is None:
            width = CPU_WIDTH
        else:
            width = SEED_002_WIDTH

    if config.global_batch is not None:
        global_batch, scaling = config.global_batch, "strong"
    elif config.batch_per_replica is not None:
        return Sizing(
            width, config.batch_per_replica, "weak", _cpu_note(platform, width, notes, cpu_count)
        )
    elif config.model == "mnist-cnn":
        scaling = "strong"
        if on_cpu and width == CPU_WIDTH and config.width is None:
            global_batch = CPU_GLOBAL_BATCH
            notes.append(
                f"CPU only ({plural(cpu_count, 'core')}): mnist-cnn shrunk to {CPU_WIDTH} channels and global batch "
                f"{CPU_GLOBAL_BATCH} so it steps several times a second (seed 002's {SEED_002_WIDTH} channels "
                f"at batch {SEED_002_GLOBAL_BATCH} take 12-25 s per step on 2 cores); "
                f"pass --width {SEED_002_WIDTH} --global-batch {SEED_002_GLOBAL_BATCH} for the original."
            )
        else:
            if on_cpu:
                global_batch = CPU_GLOBAL_BATCH
                notes.append(
                    f"global batch {global_batch} (seed 002's is {SEED_002_GLOBAL_BATCH}; smaller "
                    "because there is no GPU), strong scaling."
                )
            else:
                global_batch = SEED_002_GLOBAL_BATCH
                notes.append(f"global batch {global_batch}, strong scaling, as in seed 002.")
    else:
        gpu_b, cpu_b = PER_REPLICA_DEFAULTS.get(config.model, USER_MODEL_BATCH)
        per_replica = cpu_b if on_cpu else gpu_b
        notes.append(
            f"batch {per_replica} per replica (weak scaling){', small because there is no GPU' if on_cpu else ''}."
        )
        return Sizing(width, per_replica, "weak", _cpu_note(platform, width, notes, cpu_count))
    if global_batch % num_replicas:
        if config.global_batch is not None:
            raise GpuscaleError(
                f"--global-batch {global_batch} does not split evenly across {num_replicas} replicas"
            )
        rounded = -(-global_batch // num_replicas) * num_replicas
        notes.append(
            f"global batch rounded up from {global_batch} to {rounded} to split evenly across {num_replicas} replicas."
        )
        global_batch = rounded
    return Sizing(
        width, global_batch // num_replicas, scaling, _cpu_note(platform, width, notes, cpu_count)
    )


def _cpu_note(platform: str, width: int | None, notes: list[str], cpu_count: int) -> str:
    """The notes, led by what a replica is on a machine without a GPU: a logical CPU
    device of this process (``cpu-logical``), or, in a multi-worker run (``cpu``),
    the one CPU device of each worker."""
    if platform != "gpu" and not any("CPU only" in n for n in notes):
        what = (
            "replicas are logical CPU devices of one process"
            if platform == "cpu-logical"
            else "each worker is one replica on its machine's CPU (one CPU device per worker)"
        )
        notes.insert(0, f"CPU only ({plural(cpu_count, 'core')}), no GPU: {what}.")
    return " ".join(notes)
