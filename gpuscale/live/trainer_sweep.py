"""Several device counts of a sweep in one trainer process, each still a run of
its own. No TensorFlow here.

Starting TensorFlow and setting up its devices costs many seconds per process;
a sweep that starts one trainer child for every device count pays it each time.
:class:`TrainerSweep` starts one child (``python -m gpuscale.trainer --sweep``)
that sets the devices up once, for the widest count, and then runs each count
in turn on a subset of them (a strategy, model, optimizer and data of its own).
The child reports each count as it would a separate run: its own start event,
steps, phases and end event, one after the other on one event stream.

This side splits that stream back into runs (:class:`CountRun`, one per count,
each a :class:`~gpuscale.live.trainer_run.LiveRun` in all a consumer sees: its
queue, start and end events, recording, telemetry sampler and summary). The
rule (:func:`next_count`): events belong to the count in progress; a count ends
with the child's end event for it, and when that end says ``completed`` and
counts remain, the next count begins at once (its recording opens with a
provisional start, as a separate run's does when its process starts). Any other
end (failed, stopped) is the child's last: the count is finished when the
process exits, with its exit status, and the counts never begun end as
``stopped`` without a recording. Stopping any count stops the child (it
finishes its step and ends that count) and so the whole sweep.

The trainer's stdout/stderr lines go to the count in progress when they
arrive; a line printed just before a count's end may reach the next count, as
the pipes and the event socket are not ordered with each other.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuscale.errors import GpuscaleError
from gpuscale.events.schema import EndEvent, Event, SweepRef
from gpuscale.events.transport import EventServer
from gpuscale.live.child import AFTER_EXIT_S, STOP_GRACE_S, read_lines, release
from gpuscale.live.trainer_run import LiveRun, spawn_trainer
from gpuscale.trainer.options import (
    TrainConfig,
    shared_process_refusal,
    sweep_to_json,
)


def next_count(current: int, end: EndEvent, total: int, stopping: bool) -> int | None:
    """The count that begins after ``end`` closes count ``current`` (of ``total``),
    or ``None`` when the child will run no other (it failed or was stopped, the
    sweep is being stopped, or that was the last count)."""
    if end.status != "completed" or stopping or current + 1 >= total:
        return None
    return current + 1


class CountRun(LiveRun):
    """One device count of a :class:`TrainerSweep`: a run of its own (events,
    start and end, recording, telemetry) in a trainer process it shares with
    the sweep's other counts. ``start`` starts the sweep (once); ``stop`` stops it."""

    def __init__(self, sweep: TrainerSweep, index: int, config: TrainConfig, **kwargs: Any):
        super().__init__(config, **kwargs)
        self.sweep = sweep
        self.index = index

    def start(self) -> CountRun:
        self.sweep.start()
        return self

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        self.sweep.stop(grace_s)

    def _begin(self, proc: subprocess.Popen) -> None:
        """The child has begun this count (called by the sweep, under its lock)."""
        self._proc = proc
        self._started_at = time.time()
        with self._lock:
            self._begin_recording(self._provisional_start(), self.config.model)
        self._start_sampler()

    def _stop_now(self, grace_s: float) -> None:
        LiveRun.stop(self, grace_s)

    def _never_begun(self) -> None:
        """The sweep ended before this count began: end it, with nothing recorded."""
        self._stop_requested = True
        self._sampler = None
        self._finish()


class TrainerSweep:
    """One trainer process for the device counts of ``configs`` (one config per
    count, differing only in their devices; see
    :func:`gpuscale.trainer.options.shared_process_refusal`). ``runs`` holds a
    :class:`CountRun` per count, in order; consume each as a LiveRun. ``record``:
    ``"default"`` (a recording per count in the runs folder) or ``None``. The other
    arguments are LiveRun's, for every count."""

    def __init__(
        self,
        configs: list[TrainConfig],
        *,
        record: Path | str | None = "default",
        sample_interval_s: float = 0.5,
        nvml: Any = None,
        sampler: bool = True,
        python: str | None = None,
        env: dict[str, str] | None = None,
        on_problem: Callable[[str], None] | None = None,
    ):
        if (why := shared_process_refusal(configs)) is not None:
            raise GpuscaleError(f"these runs cannot share one trainer process: {why}")
        if record not in ("default", None):
            raise GpuscaleError("a sweep's runs are recorded under default names, or not at all")
        self.configs = configs
        self._python = python
        self._extra_env = env or {}
        self.runs = [
            CountRun(
                self,
                i,
                config,
                record=record,
                sample_interval_s=sample_interval_s,
                nvml=nvml,
                sampler=sampler,
                on_problem=on_problem,
            )
            for i, config in enumerate(configs)
        ]
        self.returncode: int | None = None
        self._lock = threading.RLock()
        self._current = 0
        self._started = False
        self._stop_requested = False
        self._proc: subprocess.Popen | None = None
        self._server: EventServer | None = None
        self._readers: list[threading.Thread] = []
        self._disconnected = threading.Event()
        self._saw_event = False
        self._last_end = False
        self._done = threading.Event()

    @property
    def counts(self) -> list[int]:
        return [c.num_devices or 1 for c in self.configs]

    @property
    def done(self) -> bool:
        return self._done.is_set()

    # -- life cycle ----------------------------------------------------------------
    def start(self) -> TrainerSweep:
        """Start the trainer process on the first count; returns at once (again: nothing)."""
        with self._lock:
            if self._started:
                return self
            self._started = True
            first = self.runs[0]
            for run in self.runs:  # a refused sampler setting raises before anything starts
                if run._use_sampler:
                    run._sampler = run._new_sampler(
                        run._on_event, run.pids, nvml=run._nvml, gpu_indices=run.config.gpus
                    )
            self._server = EventServer(self._route, on_disconnect=self._on_disconnect)
            self._proc = spawn_trainer(
                self._python or first._python,
                ["--sweep", sweep_to_json(self.configs)],
                self._server,
                self._extra_env,
            )
            for stream_name in ("stdout", "stderr"):
                thread = threading.Thread(
                    target=read_lines,
                    args=(
                        getattr(self._proc, stream_name),
                        stream_name,
                        self._route_line(stream_name),
                    ),
                    name=f"gpuscale-sweep-{stream_name}",
                    daemon=True,
                )
                thread.start()
                self._readers.append(thread)
            first._begin(self._proc)
        threading.Thread(target=self._watch, name="gpuscale-sweep-watch", daemon=True).start()
        return self

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop the sweep: the count in progress ends ``stopped`` once the child
        has finished its step, and no other count begins. Returns once every
        count is over."""
        with self._lock:
            self._stop_requested = True
            started = self._started
            self._started = True  # a stopped sweep starts no process
            current = self.runs[self._current]
        if not started:
            for run in self.runs:
                run._never_begun()
            self._done.set()
            return
        current._stop_now(grace_s)  # even if it just ended: the child may be on the next
        self._done.wait(timeout=AFTER_EXIT_S + 1.0)

    def close(self) -> None:
        """Stop the sweep if it is still going (idempotent)."""
        if not self._done.is_set():
            self.stop()

    def stamp(self, sweep_id: str) -> None:
        """Give every count's run its :class:`~gpuscale.events.schema.SweepRef`
        (``sweep_id``, its place, the counts planned); call before :meth:`start`,
        since a count begins without being asked for."""
        planned = self.counts
        for i, run in enumerate(self.runs):
            run.sweep_ref = SweepRef(id=sweep_id, index=i, planned=list(planned))

    def factory(self) -> Callable[[TrainConfig, str | None], CountRun]:
        """A run factory for :class:`gpuscale.ui.live_sweep.LiveSweep`: each call
        hands out the next count's run (the config must be that count's)."""
        handed = iter(self.runs)

        def next_run(config: TrainConfig, record: str | None = None) -> CountRun:
            run = next(handed)
            if run.config != config:
                raise GpuscaleError("the sweep's runs were asked for out of order")
            return run

        next_run.close = self.close  # type: ignore[attr-defined]
        return next_run

    # -- the stream, split by count --------------------------------------------------
    def _route(self, event: Event) -> None:
        with self._lock:
            self._saw_event = True
            if self._last_end:  # the child's last count has ended: nothing more belongs to it
                return
            run = self.runs[self._current]
            run._on_event(event)
            if not isinstance(event, EndEvent):
                return
            following = next_count(self._current, event, len(self.runs), self._stop_requested)
            if following is None:
                self._last_end = True
                return  # the child's last count: finished when the process exits
            run._finish()
            self._current = following
            if self._proc is not None:
                self.runs[following]._begin(self._proc)

    def _route_line(self, stream: str) -> Callable[[str, str], None]:
        def on_line(level: str, message: str) -> None:
            with self._lock:
                run = self.runs[self._current]
            run._on_line(stream)(level, message)

        return on_line

    def _on_disconnect(self, worker: int, saw_end: bool) -> None:
        self._disconnected.set()

    def _watch(self) -> None:
        proc = self._proc
        assert proc is not None
        self.returncode = proc.wait()
        release(proc)
        for thread in self._readers:
            thread.join(timeout=AFTER_EXIT_S)
        if self._saw_event:
            self._disconnected.wait(timeout=AFTER_EXIT_S)
        if self._server is not None:
            self._server.close()
        with self._lock:
            current = self._current
        for run in self.runs[current:]:
            run.returncode = self.returncode
        self.runs[current]._finish()
        for run in self.runs[current + 1 :]:
            run._never_begun()
        self._done.set()
