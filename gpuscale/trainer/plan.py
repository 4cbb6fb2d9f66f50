"""The devices a run uses (:class:`DevicePlan`): the one type that both the
single-machine set-up (:mod:`gpuscale.trainer.loop`) and the multi-worker one
(:mod:`gpuscale.trainer.multiworker`) return, kept apart so neither imports the
other for it. No TensorFlow."""

from __future__ import annotations

from dataclasses import dataclass

from gpuscale.events.schema import DeviceInfo


@dataclass
class DevicePlan:
    """The devices a run uses."""

    platform: str
    """``gpu`` or ``cpu-logical``."""
    names: list[str]
    """TensorFlow device names, one per replica."""
    infos: list[DeviceInfo]
    warning: str = ""
    """Something the user should know about the device choice ("" if nothing)."""

    def subset(self, positions: list[int]) -> DevicePlan:
        """The plan for some of these devices (by position), for a run that shares
        a process set up for more (``python -m gpuscale.trainer --sweep``)."""
        return DevicePlan(
            self.platform,
            [self.names[i] for i in positions],
            [self.infos[i] for i in positions],
            self.warning,
        )
