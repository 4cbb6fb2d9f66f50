"""Shared helpers for the dashboard tests: deterministic sources and a fake live run."""

from __future__ import annotations

from pathlib import Path

from gpuscale.events.schema import Event
from gpuscale.live.base import RunBase
from gpuscale.ui.sources import ReplaySource
from gpuscale.ui.synthetic import synthetic_run


class FakeClock:
    """A clock the test moves by hand (replay timing without sleeping)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeLiveRun(RunBase):
    """Stands in for gpuscale.live.trainer_run.LiveRun: the real run base (its queue and
    ``drain``), fed a fixed list of events and ending in None once the run is
    over; records whether start() and stop() were called. Stopped, it is over, as
    a real run is once its ``stop`` returns (a second ``LiveSource.stop`` waits for
    that: 6 s for a fake that never ended)."""

    def __init__(self, events: list[Event], *, finish: bool = True) -> None:
        self._init_run()
        for event in events:
            self.queue.put(event)
        if finish:
            self.queue.put(None)
        self.started = False
        self.stop_calls = 0
        self.record = "default"
        self.recording_path = Path("/runs/fake.ndjson")

    def start(self) -> FakeLiveRun:
        self.started = True
        return self

    def stop(self) -> None:
        """As a real run's: returns once the run is over (``wait`` returns at once)."""
        self.stop_calls += 1
        self.queue.put(None)
        self._done.set()


def cpu_run(**kwargs) -> list[Event]:
    return synthetic_run(gpus=0, cpu_devices=2, duration_s=30.0, **kwargs)


def gpu8_run(**kwargs) -> list[Event]:
    return synthetic_run(gpus=8, duration_s=20.0, sample_hz=10.0, lost_gpu=5, **kwargs)


def replay(events: list[Event], **kwargs) -> ReplaySource:
    kwargs.setdefault("clock", FakeClock())
    return ReplaySource(Path("/recordings/synthetic.ndjson"), events=events, **kwargs)
