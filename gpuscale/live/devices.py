"""How many devices the user's script gets: ``gpuscale run|watch --devices N -- python train.py``.

gpuscale cannot reach into the script, so it tells it through the environment:

* ``GPUSCALE_DEVICES=N`` (:data:`ENV_DEVICES`): read by ``import gpuscale.keras``
  (:mod:`gpuscale.keras.devices`) before TensorFlow initialises its devices. Without
  a GPU it splits the CPU into N logical devices; with GPUs it keeps the first N
  visible. ``tf.distribute.MirroredStrategy()`` then mirrors over all of them. The
  same variable works without gpuscale: ``GPUSCALE_DEVICES=2 python train.py``.
* ``CUDA_VISIBLE_DEVICES``: on a machine where NVML sees GPUs, the first N of
  them (or those of ``--gpus``), so CUDA itself shows the script only those.

No TensorFlow here.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpuscale.errors import GpuscaleError

ENV_DEVICES = "GPUSCALE_DEVICES"
"""Number of devices the script's ``import gpuscale.keras`` sets up (see the module docstring)."""


def device_env(
    devices: int | None,
    gpus: list[int] | None,
    env: Mapping[str, str] | None = None,
    *,
    nvml: object = None,
) -> dict[str, str]:
    """The environment variables that give a script ``devices`` devices (or the GPUs
    ``gpus``); ``{}`` when neither is asked for (the script decides for itself).

    A ``CUDA_VISIBLE_DEVICES`` already set in ``env`` is kept and narrowed to its
    first N entries; otherwise, where NVML sees GPUs, it is set to the first N.
    Raises :class:`GpuscaleError` when more GPUs are asked for than there are."""
    if devices is None and gpus is None:
        return {}
    if devices is not None and gpus is not None:
        raise GpuscaleError("give --devices or --gpus, not both")
    env = os.environ if env is None else env
    if gpus is not None:
        return {ENV_DEVICES: str(len(gpus)), "CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus))}
    assert devices is not None
    from gpuscale.trainer.options import device_count_refusal

    if why := device_count_refusal(devices):
        raise GpuscaleError(why)
    out = {ENV_DEVICES: str(devices)}
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        listed = [v for v in visible.split(",") if v.strip()]
        if listed:  # the user chose GPUs: take the first N of them
            if devices > len(listed):
                raise GpuscaleError(
                    f"--devices {devices}: CUDA_VISIBLE_DEVICES={visible} lists only {len(listed)}"
                )
            out["CUDA_VISIBLE_DEVICES"] = ",".join(listed[:devices])
        return out  # "" hides every GPU: CPU logical devices
    from gpuscale.telemetry.nvml import probe

    found = probe(nvml)
    if found.ok and found.devices:
        if devices > len(found.devices):
            raise GpuscaleError(
                f"--devices {devices}: this machine has {len(found.devices)} GPU(s)"
            )
        out["CUDA_VISIBLE_DEVICES"] = ",".join(str(d.index) for d in found.devices[:devices])
    return out


def env_devices_request(environ: Mapping[str, str] | None = None) -> int | None:
    """The device count ``GPUSCALE_DEVICES`` asks for (``environ``, default the
    process's), or ``None`` when it is unset or empty. Checked as ``--devices`` is,
    and refused in the words ``--devices`` gets, naming the variable
    (:class:`GpuscaleError`): a whole number (as ``int()`` reads it, as argparse
    reads ``--devices``), at least 1, at most what gpuscale supports."""
    from gpuscale.trainer.options import device_count_refusal

    text = (os.environ if environ is None else environ).get(ENV_DEVICES, "").strip()
    if not text:
        return None
    try:
        devices = int(text)
    except ValueError:
        raise GpuscaleError(f"{ENV_DEVICES}: invalid int value: {text!r}") from None
    if why := device_count_refusal(devices, ENV_DEVICES):
        raise GpuscaleError(why)
    return devices


def env_devices_refusal(
    devices: int, *, cores: int | None = None, gpus: int | None = None
) -> str | None:
    """Why ``GPUSCALE_DEVICES=devices`` is refused in the script (``import
    gpuscale.keras``), or ``None``: the checks ``--devices`` makes before the script
    starts, for a script run without gpuscale (``GPUSCALE_DEVICES=5 python
    train.py``), which nothing checked. With ``gpus`` GPUs that TensorFlow sees, no
    more than those (``--devices`` against the GPUs NVML sees); without a GPU, no
    more CPU logical devices than the ``cores``, and 2 are always allowed
    (:func:`gpuscale.trainer.options.cpu_devices_refusal`)."""
    from gpuscale.trainer.options import cpu_devices_refusal

    if gpus:
        if devices > gpus:
            return f"{ENV_DEVICES}={devices}: this machine has {gpus} GPU(s) TensorFlow can use"
        return None
    return cpu_devices_refusal([devices], cores or os.cpu_count() or 1, f"{ENV_DEVICES}={devices}")


ENV_TRACEBACK = "GPUSCALE_TRACEBACK"
"""Set (to anything but ``0``) in the script's environment, :func:`uneven_batch_hook`
steps aside: every error's whole traceback is printed as Python prints it."""

KERAS_FIRST_BATCH_BUILD = "_maybe_symbolic_build"
"""The method of Keras 3's TensorFlow trainer (``keras/src/backend/tensorflow/trainer.py``)
in which ``fit`` under a ``tf.distribute`` strategy averages the first batch over the
replicas to build the model: the one place :func:`uneven_batch_message` speaks for."""

_UNEVEN_SPLIT = re.compile(
    r"AddN_N_(\d+)_.*must have the same size and shape\.\s+"
    r"Input \d+: \[(\d+)((?:,\d+)*)\] != input \d+: \[(\d+)((?:,\d+)*)\]",
    re.S,
)


def in_first_batch_build(frames: Sequence[tuple[str, str]]) -> bool:
    """Whether ``frames`` (file name, function name) pass through Keras's own
    first-batch build (:data:`KERAS_FIRST_BATCH_BUILD`, in a ``keras`` folder)."""
    keras = f"{os.sep}keras{os.sep}"
    return any(name == KERAS_FIRST_BATCH_BUILD and keras in path for path, name in frames)


def uneven_batch_message(error: str, frames: Sequence[tuple[str, str]]) -> str | None:
    """One line for TensorFlow's ``Inputs to operation AddN ... must have the same
    size and shape. Input 0: [13,28,28,1] != input 4: [12,28,28,1]`` raised in Keras's
    first-batch build (``frames``: file and function name of the frames the error
    came through, :func:`error_frames`). At the start of ``fit`` under a
    ``tf.distribute`` strategy, Keras 3 averages the first batch over the replicas
    to build the model (:data:`KERAS_FIRST_BATCH_BUILD`); that fails when the global
    batch does not divide by the replicas (64 over 5: 13, 13, 13, 13, 12). ``None``
    for any other error, the same error raised elsewhere (a custom layer's own
    ``AddN``), or shapes that differ in more than the batch."""
    if not in_first_batch_build(frames):
        return None
    match = _UNEVEN_SPLIT.search(error)
    if match is None or match.group(3) != match.group(5) or match.group(2) == match.group(4):
        return None  # not the batch dimension alone
    replicas, big, small = int(match.group(1)), int(match.group(2)), int(match.group(4))
    big, small = max(big, small), min(big, small)
    return (
        f"Keras's fit split the global batch unevenly over the {replicas} replicas "
        f"({big} and {small} samples): under tf.distribute it needs a global batch "
        f"(fit's batch_size) divisible by the number of replicas; use a batch_size "
        f"that is a multiple of {replicas}, or a device count that divides the batch"
    )


MAX_FRAMES = 1000
"""Frames :func:`error_frames` reads at most on each of its two walks."""


def error_frames(tb: Any) -> list[tuple[str, str]]:
    """File and function name of each frame of the traceback ``tb``, then of the
    callers of its deepest frame: Keras filters its own frames out of a traceback
    (unless ``keras.config.disable_traceback_filtering()``), but the frame the error
    was raised in still knows who called it."""
    frames: list[tuple[str, str]] = []
    deepest, at = None, tb
    while at is not None and len(frames) < MAX_FRAMES:
        deepest = at.tb_frame
        frames.append((deepest.f_code.co_filename, deepest.f_code.co_name))
        at = at.tb_next
    caller = deepest.f_back if deepest is not None else None
    for _ in range(MAX_FRAMES):
        if caller is None:
            break
        frames.append((caller.f_code.co_filename, caller.f_code.co_name))
        caller = caller.f_back
    return frames


def traceback_wanted(environ: Mapping[str, str] | None = None) -> bool:
    """``GPUSCALE_TRACEBACK`` (:data:`ENV_TRACEBACK`) asks for Python's whole traceback."""
    value = (os.environ if environ is None else environ).get(ENV_TRACEBACK, "").strip()
    return value not in ("", "0")


def uneven_batch_hook(previous: Callable[..., Any]) -> Callable[..., Any]:
    """A ``sys.excepthook`` that says :func:`uneven_batch_message`'s line on stderr
    (``gpuscale: error: ...``) in place of TensorFlow's traceback for that error,
    with the error's own type and first line below it and how to see the rest
    (:data:`ENV_TRACEBACK`); every other exception, and every one when
    ``GPUSCALE_TRACEBACK`` is set, goes to ``previous`` as it came (its cause and
    context with it). The script still exits with 1."""

    def hook(kind: type[BaseException], error: BaseException, tb: Any) -> None:
        line = None
        if kind.__name__ == "InvalidArgumentError" and not traceback_wanted():
            try:
                line = uneven_batch_message(str(error), error_frames(tb))
            except Exception:  # never hide the error behind one of ours
                line = None
        if line is None:
            previous(kind, error, tb)
            return
        first = next((t.strip() for t in str(error).splitlines() if t.strip()), "")
        print(
            f"gpuscale: error: {line}\n"
            f"  {kind.__name__}: {first}\n"
            f"  ({ENV_TRACEBACK}=1 shows the whole traceback)",
            file=sys.stderr,
        )

    return hook
