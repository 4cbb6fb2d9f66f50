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
from collections.abc import Mapping

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
    if devices < 1:
        raise GpuscaleError(f"--devices must be at least 1, not {devices}")
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
