"""The script's side of ``--devices N``: ``GPUSCALE_DEVICES=N`` applied at ``import gpuscale.keras``.

Without a GPU, the CPU is split into N logical devices; with GPUs, the first N
stay visible. Either way ``tf.distribute.MirroredStrategy()`` (no arguments)
mirrors over exactly those N devices. TensorFlow fixes its devices when it first
initialises them (the first op, or ``tf.config.list_logical_devices``), so the
import must come before anything that runs TensorFlow; ``import tensorflow`` and
``import keras`` alone are fine. Set by ``gpuscale run|watch|recommend --devices N
-- python train.py``, or by hand: ``GPUSCALE_DEVICES=2 python train.py``.
"""

from __future__ import annotations

import os
import sys

import tensorflow as tf

from gpuscale.live.devices import ENV_DEVICES


def apply_device_request(environ: dict[str, str] | None = None) -> int | None:
    """Set up the devices ``GPUSCALE_DEVICES`` asks for; the count set up, or ``None``
    when the variable is unset or cannot be honoured (said once on stderr: the
    script then runs on what TensorFlow finds, never fails for it)."""
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
