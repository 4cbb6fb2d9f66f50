"""The script's side of ``--devices N``: ``GPUSCALE_DEVICES=N`` applied at ``import gpuscale.keras``.

Without a GPU, the CPU is split into N logical devices; with GPUs, the first N
stay visible. Either way ``tf.distribute.MirroredStrategy()`` (no arguments)
mirrors over exactly those N devices. TensorFlow fixes its devices when it first
initialises them (the first op, or ``tf.config.list_logical_devices``), so the
import must come before anything that runs TensorFlow; ``import tensorflow`` and
``import keras`` alone are fine. Set by ``gpuscale run|watch|recommend --devices N
-- python train.py``, or by hand: ``GPUSCALE_DEVICES=2 python train.py``, checked
as ``--devices`` is, with the same one-line refusal and exit 2: a whole number, at least
1; no more GPUs than TensorFlow sees; without a GPU, no more logical devices than
cores (2 are always allowed).
A global batch Keras's ``fit`` cannot split evenly over the replicas is said in one
line instead of TensorFlow's traceback (:func:`install_batch_split_hook`;
``GPUSCALE_TRACEBACK=1`` shows the traceback).
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import tensorflow as tf

from gpuscale.errors import EXIT_USAGE, GpuscaleError
from gpuscale.live.devices import (
    ENV_DEVICES,
    env_devices_refusal,
    env_devices_request,
    uneven_batch_hook,
)


def apply_device_request(environ: dict[str, str] | None = None) -> int | None:
    """Set up the devices ``GPUSCALE_DEVICES`` asks for; the count set up, or ``None``
    when the variable is unset (or empty), or cannot be honoured because TensorFlow
    has set up its devices already or the script is one worker of a cluster (said
    once on stderr: the script then runs on what TensorFlow finds). The value is
    checked as ``--devices`` is, and refused as ``--devices`` refuses it, one line
    naming the variable and exit 2, before TensorFlow starts the devices: not a
    whole number, below 1
    (:func:`~gpuscale.live.devices.env_devices_request`), more GPUs than TensorFlow
    sees, or without a GPU more CPU logical devices than the cores (2 are always
    allowed: :func:`~gpuscale.live.devices.env_devices_refusal`)."""
    environ = os.environ if environ is None else environ
    try:
        n = env_devices_request(environ)
    except GpuscaleError as exc:
        _refuse(str(exc))
    if n is None:
        return None
    if "TF_CONFIG" in environ:
        _say(f"{ENV_DEVICES} ignored under TF_CONFIG: each worker of a cluster has its own devices")
        return None
    try:
        gpus = tf.config.list_physical_devices("GPU")
        refusal = env_devices_refusal(n, gpus=len(gpus))
        if refusal is not None:
            _refuse(refusal)
        if gpus:
            tf.config.set_visible_devices(gpus[:n], "GPU")
            return n
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)]
        )
        return n
    except RuntimeError:  # TensorFlow already initialised its devices
        _say(
            f"{ENV_DEVICES}={n} ignored: TensorFlow had already set up its devices; "
            "put 'import gpuscale.keras' before the first TensorFlow operation"
        )
        return None


def _refuse(message: str) -> NoReturn:
    """``--devices``' refusal: one line, exit 2 (before TensorFlow starts)."""
    print(f"gpuscale: error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def _say(message: str) -> None:
    print(f"gpuscale: {message}", file=sys.stderr)


def install_batch_split_hook() -> None:
    """Say one line, not TensorFlow's traceback, when Keras's ``fit`` cannot split
    the global batch evenly over the replicas in its first-batch build
    (:func:`~gpuscale.live.devices.uneven_batch_message`): a batch of 64 on
    ``GPUSCALE_DEVICES=5`` (or ``--devices 3`` on a machine with the cores for 3).
    The error's type and first line follow it, with how to see the whole traceback
    (``GPUSCALE_TRACEBACK=1``, under which the hook steps aside). Every other
    exception goes to the hook there was."""
    if getattr(sys.excepthook, "_gpuscale_batch_split", False):
        return
    hook = uneven_batch_hook(sys.excepthook)
    hook._gpuscale_batch_split = True  # type: ignore[attr-defined]
    sys.excepthook = hook
