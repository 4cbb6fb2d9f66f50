"""The user's script at each count of a sweep: what makes a count's run and
judges it, for ``recommend -- python train.py`` and its ``--watch`` alike
(:mod:`gpuscale.commands.recommend_script`, :class:`gpuscale.ui.live_sweep.LiveSweep`)."""

from __future__ import annotations

from collections.abc import Sequence

from gpuscale.live.script_run import ScriptRun

NO_STEPS = (
    "no step times (does the script's model.fit have callbacks=[gpuscale.keras.ScalingMonitor()]?)"
)
"""Why a count whose script ran without a step time measured nothing."""


def wrong_devices(n: int, devices: int) -> str | None:
    """Why an ``n``-device count's run is not one (it trained on ``devices``), or ``None``."""
    if devices == n:
        return None
    return (
        f"the {n}-device run trained on {devices} replica(s): the script picks its "
        "own devices. Use tf.distribute.MirroredStrategy() without a device list and "
        "import gpuscale.keras before the first TensorFlow operation"
    )


class ScriptCounts:
    """Each count's run: a :class:`~gpuscale.live.script_run.ScriptRun` of
    ``command`` with that count's environment (its devices in ``GPUSCALE_DEVICES``);
    called as a :class:`~gpuscale.ui.live_sweep.LiveSweep`'s ``run_factory``."""

    starting = "starting the script"
    no_steps = NO_STEPS

    def __init__(self, command: Sequence[str]) -> None:
        self.command = list(command)

    def __call__(self, env: dict[str, str], record: str | None) -> ScriptRun:
        return ScriptRun(self.command, record=record, env=env)

    @staticmethod
    def check(n: int, devices: int) -> str | None:
        return wrong_devices(n, devices)
