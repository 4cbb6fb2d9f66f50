"""Which GPUs a run on fewer than all of them uses: the best-connected ones.

``--devices N`` without ``--gpus`` used to mean "the first N GPUs". On a machine
whose GPUs are not all connected alike (two CPU sockets, PCIe switches, an
NVLink bridge on two of four cards) the first N are not always the best N:
GPUs 0 and 4 of a two-socket box talk across the sockets, GPUs 0 and 1 through
one PCIe switch. So the parent process reads the topology through NVML, picks
:func:`gpuscale.analysis.topology.best_gpus`, turns ``--devices N`` into
``--gpus LIST`` and says so in one line. It leaves the choice alone when
``--gpus`` was given, when ``CUDA_VISIBLE_DEVICES`` is set (the user already
chose, and CUDA's numbering then differs from NVML's), for multi-worker runs
(each machine chooses its own), and when NVML reports no link between any two
GPUs (then the first N stay).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import IO, Any

import msgspec

from gpuscale.analysis.topology import LINK_LABELS, best_gpus, slowest_link
from gpuscale.events.schema import Topology
from gpuscale.trainer.options import TrainConfig, validate


def choose_gpus(
    config: TrainConfig,
    topology: Topology | None,
    *,
    environ: Mapping[str, str] = os.environ,
) -> tuple[TrainConfig, str | None]:
    """``config`` with ``--devices N`` turned into the best ``--gpus``, and the one
    line that says so; ``(config, None)`` when nothing changes (module docstring)."""
    k = config.devices
    if k is None or config.gpus is not None or config.strategy == "multi-worker":
        return config, None
    if environ.get("CUDA_VISIBLE_DEVICES") is not None or topology is None:
        return config, None
    gpus = best_gpus(topology, k)  # the rule `gpuscale devices` and `recommend` advise by
    if gpus is None:
        return config, None
    count = len(topology.gpus)
    chosen = msgspec.structs.replace(config, devices=None, gpus=gpus)
    validate(chosen)
    listed = ",".join(map(str, gpus))
    link = slowest_link(topology, gpus)
    if link is None:
        return chosen, f"--devices 1: using GPU {listed} of {count} (--gpus to choose another)"
    return chosen, (
        f"--devices {k}: using GPUs {listed} of {count}, the best-connected "
        f"({LINK_LABELS[link.link_class]}; --gpus to choose others)"
    )


def with_best_gpus(
    config: TrainConfig, *, nvml: Any = None, out: IO[str] | None = None
) -> TrainConfig:
    """:func:`choose_gpus` with this machine's topology (read through NVML, never
    raising); prints its line as ``gpuscale: ...`` on ``out`` (stderr)."""
    if config.devices is None or config.gpus is not None:
        return config  # nothing to choose: do not start NVML
    from gpuscale.telemetry.topology import probe_topology

    chosen, line = choose_gpus(config, probe_topology(nvml))
    if line is not None:
        print(f"gpuscale: {line}", file=out or sys.stderr, flush=True)
    return chosen
