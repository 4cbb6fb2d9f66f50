"""Checks of a trainer configuration against this machine, made in gpuscale's
own process before the trainer starts: what the trainer would otherwise find
only after 10-15 s of loading TensorFlow (``--gpus`` or ``--all-reduce nccl``
without a GPU, a ``--model`` module that does not exist). Each takes a
fraction of a second and imports no TensorFlow; each failure is one
:class:`~gpuscale.errors.GpuscaleError` line (exit 2).

A function missing from a ``--model`` module is found from the module's source
(its syntax tree, :func:`check_model_function`), without running it: importing a
user's module runs its top level, which may train a model of its own. What only
the trainer can know (a name bound in a way the source does not show, what the
function returns) stays the trainer's to say. The numbers of the configuration (device
counts, batch, steps) are :func:`gpuscale.trainer.options.validate`'s.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator, Sequence

from gpuscale.errors import GpuscaleError
from gpuscale.trainer import options
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
    found = gpu_indices(probe)
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
            f"{options.CPU_ALL_REDUCE_HINT}"
        )


def check_multi_worker_devices(devices: int | None, gpus: int | None) -> None:
    """Refuse a ``--devices`` that ``--strategy multi-worker`` cannot give, on a
    worker that sees ``gpus`` GPUs (``None``: cannot tell, nothing refused). The
    trainer asks it with TensorFlow's GPUs; gpuscale's own process with NVML's
    before it starts any worker (:func:`gpuscale.live.script_run.script_run_from_args`)."""
    if gpus is None:
        return
    if devices is not None and gpus and devices != gpus:
        raise GpuscaleError(
            "--strategy multi-worker uses every GPU a worker sees; choose them with --gpus "
            "or CUDA_VISIBLE_DEVICES, not --devices"
        )
    if devices not in (None, 1) and not gpus:
        raise GpuscaleError(
            "--strategy multi-worker uses one CPU device per worker (TensorFlow's "
            "MultiWorkerMirroredStrategy); more replicas need more workers (--local-workers N)"
        )


def gpu_indices(probe: Callable[[], object] | None = None) -> list[int] | None:
    """:func:`gpuscale.trainer.options.gpu_indices`, with this module's driver check."""
    return options.gpu_indices(probe, _nvidia_driver_loaded)


def _nvidia_driver_loaded() -> bool:
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")


def check_model_module(spec: str) -> None:
    """``--model package.module:function``: the module must be findable from the
    current directory or the installed packages (as the trainer will look, like
    ``python -m``). Found without running it: neither the module nor the
    packages above it are imported."""
    module_name, _, func_name = spec.partition(":")
    found = _find_module(module_name, ["", *sys.path])
    if found is None:
        raise GpuscaleError(
            f"--model {spec}: cannot find module {module_name!r} "
            f"from {os.getcwd()} or the installed packages "
            "(run from the directory that holds it, or install it)"
        )
    if func_name and module_name not in sys.modules:
        check_model_function(spec, found)


MAX_SOURCE_BYTES = 4 * 2**20
"""A ``--model`` module's source larger than this is not parsed (left to the trainer)."""

_DYNAMIC_NAMES = frozenset(
    {"globals", "vars", "exec", "eval", "setattr", "__getattr__", "__dict__"}
)
"""Names whose use in a module can bind a top-level name its syntax tree does not show."""


def check_model_function(spec: str, found: importlib.machinery.ModuleSpec) -> None:
    """``--model package.module:function``: the module's source must bind
    ``function`` at its top level (a ``def``, a class, an assignment or an import,
    also inside a top-level ``if``/``try``/``with``/``for``). Read, never run. Left
    to the trainer when the source cannot tell: no Python source (a compiled or
    built-in module, a namespace package), a source too large or that does not
    parse, a ``from ... import *``, or a use of ``globals``, ``vars``, ``exec``,
    ``eval``, ``setattr``, ``__dict__`` or a module ``__getattr__``."""
    module_name, _, func_name = spec.partition(":")
    origin = found.origin
    if not origin or not origin.endswith(".py") or not os.path.isfile(origin):
        return
    try:
        if os.path.getsize(origin) > MAX_SOURCE_BYTES:
            return
        with open(origin, "rb") as f:
            tree = ast.parse(importlib.util.decode_source(f.read()), filename=origin)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return  # the trainer's import says what is wrong with it
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return
        if isinstance(node, ast.Name) and node.id in _DYNAMIC_NAMES:
            return
        if isinstance(node, ast.Attribute) and node.attr in _DYNAMIC_NAMES:
            return
        if isinstance(node, ast.Global):  # a function that binds a top-level name
            bound.update(node.names)
    bound.update(_top_level_names(tree.body))
    if func_name in bound or "__getattr__" in bound:
        return
    functions = sorted(
        n.name
        for n in tree.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and not n.name.startswith("_")
    )
    listed = ", ".join(functions[:6]) + (", ..." if len(functions) > 6 else "")
    raise GpuscaleError(
        f"--model {spec}: module {module_name!r} has no function {func_name!r} "
        f"({'its functions: ' + listed if functions else 'it defines no function'}; "
        f"read from {origin}, not run)"
    )


def _top_level_names(body: list[ast.stmt]) -> Iterator[str]:
    """Every name a module's top level binds, through compound statements but not
    into function or class bodies."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                yield alias.asname or alias.name.partition(".")[0]
            continue
        for child in ast.walk(node):
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                yield child.id
            elif isinstance(child, ast.alias):
                yield child.asname or child.name.partition(".")[0]
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                yield child.name


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
