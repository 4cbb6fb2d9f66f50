"""The script's side of ``--devices N``: ``GPUSCALE_DEVICES=N`` applied at ``import gpuscale.keras``.

Without a GPU, the CPU is split into N logical devices; with GPUs, the first N
stay visible. Either way ``tf.distribute.MirroredStrategy()`` (no arguments)
mirrors over exactly those N devices. TensorFlow fixes its devices when it first
initialises them (the first op, or ``tf.config.list_logical_devices``), so the
import must come before anything that runs TensorFlow; ``import tensorflow`` and
``import keras`` alone are fine. Set by ``gpuscale run|watch|recommend --devices N
-- python train.py``, or by hand: ``GPUSCALE_DEVICES=2 python train.py``, checked
as ``--devices`` is (without a GPU, no more logical devices than cores, at least 2).
A global batch Keras's ``fit`` cannot split evenly over the replicas is said in one
line instead of TensorFlow's traceback (:func:`install_batch_split_hook`;
``GPUSCALE_TRACEBACK=1`` shows the traceback).
"""

from __future__ import annotations

import os
import sys

import tensorflow as tf

from gpuscale.live.devices import ENV_DEVICES, env_devices_refusal, uneven_batch_hook


def apply_device_request(environ: dict[str, str] | None = None) -> int | None:
    """Set up the devices ``GPUSCALE_DEVICES`` asks for; the count set up, or ``None``
    when the variable is unset or cannot be honoured (said once on stderr: the
    script then runs on what TensorFlow finds). More CPU logical devices than
    ``--devices`` allows (:func:`~gpuscale.live.devices.env_devices_refusal`: past
    the cores they only wait for one) are refused as ``--devices`` refuses them:
    one line, exit 2, before TensorFlow starts them."""
    text = (os.environ if environ is None else environ).get(ENV_DEVICES, "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        _say(f"{ENV_DEVICES}={text!r} ignored: expected a whole number of devices, at least 1")
        return None
    n = int(text)
    if "TF_CONFIG" in (os.environ if environ is None else environ):
        _say(f"{ENV_DEVICES} ignored under TF_CONFIG: each worker of a cluster has its own devices")
        return None
    try:
        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            if n > len(gpus):
                _say(f"{ENV_DEVICES}={n}: TensorFlow sees only {len(gpus)} GPU(s); using them all")
                return len(gpus)
            tf.config.set_visible_devices(gpus[:n], "GPU")
            return n
        refusal = env_devices_refusal(n)
        if refusal is not None:
            print(f"gpuscale: error: {refusal}", file=sys.stderr)
            raise SystemExit(2)
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
