"""Checks of a trainer configuration against this machine, made in gpuscale's
own process before the trainer starts: what the trainer would otherwise find
only after 10-15 s of loading TensorFlow (``--gpus`` or ``--all-reduce nccl``
without a GPU, a ``--model`` module that does not exist). Each takes a
fraction of a second and imports no TensorFlow; each failure is one
:class:`~gpuscale.errors.GpuscaleError` line (exit 2).

What only the trainer can know (a function missing from the module, what it
returns) stays the trainer's to say. The numbers of the configuration (device
counts, batch, steps) are :func:`gpuscale.trainer.options.validate`'s.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence

from gpuscale.errors import GpuscaleError
from gpuscale.trainer.options import TrainConfig

GPU_ONLY_ALL_REDUCE = ("nccl", "hierarchical-copy")
"""All-reduce implementations TensorFlow has only for GPUs."""


def check_config(config: TrainConfig, probe: Callable[[], object] | None = None) -> None:
    """:func:`check_machine` for a trainer configuration (after
    :func:`gpuscale.trainer.options.validate`)."""
    check_machine(model=config.model, gpus=config.gpus, all_reduce=config.all_reduce, probe=probe)


def check_machine(
    *,
    model: str,
    gpus: Sequence[int] | None,
    all_reduce: str,
    probe: Callable[[], object] | None = None,
) -> None:
    """Raise :class:`GpuscaleError` for the first thing in the configuration this
    machine cannot do. ``probe`` answers what NVML sees (default:
    :func:`gpuscale.telemetry.nvml.probe`; tests give a stand-in); it is asked
    only when the configuration needs a GPU."""
    if ":" in model:
        check_model_module(model)
    if gpus is None and all_reduce not in GPU_ONLY_ALL_REDUCE:
        return
    found = _gpu_indices(probe)
    if found is None:
        return  # cannot tell (e.g. NVML missing where a driver is loaded): the trainer will
    if gpus is not None:
        if not found:
            raise GpuscaleError(
                "--gpus: this machine has no NVIDIA GPU (no driver found); "
                "use --devices N for N logical CPU devices"
            )
        missing = [i for i in gpus if i not in found]
        if missing:
            raise GpuscaleError(
                f"--gpus {','.join(map(str, gpus))}: no GPU {', '.join(map(str, missing))} "
                f"on this machine (its GPUs: {', '.join(map(str, found))})"
            )
    if all_reduce in GPU_ONLY_ALL_REDUCE and not found:
        raise GpuscaleError(
            f"--all-reduce {all_reduce} needs GPUs and this machine has none; "
            "on CPU logical devices use reduce-to-one or auto"
        )


def _gpu_indices(probe: Callable[[], object] | None) -> list[int] | None:
    """The GPUs' indices as NVML sees them; ``[]`` when there is surely no GPU
    (NVML finds none and no NVIDIA driver is loaded); ``None`` when it cannot be
    told."""
    if probe is None:
        from gpuscale.telemetry import nvml

        probe = nvml.probe
    found = probe()
    if getattr(found, "ok", False):
        return sorted(d.index for d in found.devices)  # type: ignore[attr-defined]
    if _nvidia_driver_loaded():
        return None
    return []


def _nvidia_driver_loaded() -> bool:
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")


def check_model_module(spec: str) -> None:
    """``--model package.module:function``: the module must be findable from the
    current directory or the installed packages (as the trainer will look, like
    ``python -m``). Found without running it: neither the module nor the
    packages above it are imported."""
    module_name = spec.partition(":")[0]
    if _find_module(module_name, ["", *sys.path]) is None:
        raise GpuscaleError(
            f"--model {spec}: cannot find module {module_name!r} "
            f"from {os.getcwd()} or the installed packages "
            "(run from the directory that holds it, or install it)"
        )


def _find_module(name: str, path: list[str]) -> importlib.machinery.ModuleSpec | None:
    """The spec of dotted module ``name``, looked up one part at a time in the
    package folders (``importlib.util.find_spec`` would import the parents)."""
    if name in sys.modules:
        return importlib.util.find_spec(name)
    spec = None
    search: list[str] | None = [os.path.abspath(p) if p == "" else p for p in path]
    parts = name.split(".")
    for depth in range(len(parts)):
        if search is None:
            return None  # a module, not a package: it has no submodules
        full = ".".join(parts[: depth + 1])
        spec = importlib.machinery.PathFinder.find_spec(full, search)
        if spec is None:
            if depth == 0 and importlib.util.find_spec(full) is not None:
                spec = importlib.util.find_spec(full)  # a built-in or frozen top-level module
            else:
                return None
        locations = spec.submodule_search_locations
        search = list(locations) if locations is not None else None
    return spec
