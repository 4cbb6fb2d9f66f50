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

The trainer's stdout/stderr lines go to the count that printed them. The pipes
and the event socket are not ordered with each other, so a count's last lines
may arrive after its end event; the child closes each count's output with a line
on both streams (:func:`~gpuscale.trainer.options.count_over_line`), and a count
is finished only once both streams have passed it (its next count has begun
meanwhile; lines of a count not begun yet wait for it). Should a stream not
catch up within :data:`OUTPUT_CATCH_UP_S`, the count is finished without them,
saying so, and its later lines go to the count in progress marked as its own.
The child tears a count down (its model, strategy and data released) before its
closing line, so what TensorFlow's C++ runtime prints to stderr as they go is that
count's. What cannot be known: a line TensorFlow's own threads print after the
closing line (work of the ended count that outlives its teardown) reads like any
line of the next count, and goes to it: nothing in the line says which count it is of.
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
    count_over,
    shared_process_refusal,
    sweep_to_json,
)

STREAMS = ("stdout", "stderr")
OUTPUT_CATCH_UP_S = 5.0
"""How long a count that has ended waits for its output to arrive on both streams
(up to the line that closes it) before it is finished without the rest."""


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
        self._output_of = dict.fromkeys(STREAMS, 0)
        """Per stream: the count whose output its next line is (past the last: over)."""
        self._closing: dict[int, threading.Timer] = {}
        """Counts that have ended, waiting for their output on both streams."""
        self._held: dict[int, list[tuple[str, str, str]]] = {}
        """Lines of a count not begun yet: (stream, level, message), in order."""

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
            for stream_name in STREAMS:
                thread = threading.Thread(
                    target=self._read_stream,
                    args=(stream_name,),
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

    def stamp(self, sweep_id: str, available_devices: int | None = None) -> None:
        """Give every count's run its :class:`~gpuscale.events.schema.SweepRef`
        (``sweep_id``, its place, the counts planned, the devices the machine has);
        call before :meth:`start`, since a count begins without being asked for."""
        planned = self.counts
        for i, run in enumerate(self.runs):
            run.sweep_ref = SweepRef(
                id=sweep_id, index=i, planned=list(planned), available_devices=available_devices
            )

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
            self._close_when_output_is_in(self._current)
            self._current = following
            if self._proc is not None:
                self.runs[following]._begin(self._proc)
            for stream, level, message in self._held.pop(following, []):
                self.runs[following]._on_line(stream)(level, message)

    # -- the output, split by count ----------------------------------------------------
    def _read_stream(self, stream: str) -> None:
        assert self._proc is not None
        read_lines(getattr(self._proc, stream), stream, lambda lv, m: self._on_line(stream, lv, m))
        with self._lock:  # nothing more comes on it: it has passed every count
            self._output_of[stream] = len(self.runs)
            for index in list(self._closing):
                self._close_if_output_is_in(index)

    def _on_line(self, stream: str, level: str, message: str) -> None:
        """A line of the child's ``stream``: to the count that printed it."""
        with self._lock:
            over = count_over(message)
            if over is not None:  # every line before it on this stream was that count's
                self._output_of[stream] = max(self._output_of[stream], over + 1)
                self._close_if_output_is_in(over)
                return
            index = self._output_of[stream]
            if index > self._current and index < len(self.runs) and not self._last_end:
                self._held.setdefault(index, []).append((stream, level, message))
                return
            index = min(index, self._current)
            run = self.runs[index]
            if run.done and index < self._current:  # it was finished without this line
                run = self.runs[self._current]
                message = f"[late output of the {self.counts[index]}-device count] {message}"
            run._on_line(stream)(level, message)

    def _close_when_output_is_in(self, index: int) -> None:
        """Count ``index`` has ended: finish it once both streams have passed it, or
        after :data:`OUTPUT_CATCH_UP_S` (under the lock)."""
        timer = threading.Timer(OUTPUT_CATCH_UP_S, self._close_without_output, args=(index,))
        timer.daemon = True
        self._closing[index] = timer
        timer.start()
        self._close_if_output_is_in(index)

    def _close_if_output_is_in(self, index: int) -> None:
        if index in self._closing and all(self._output_of[s] > index for s in STREAMS):
            self._closing.pop(index).cancel()
            self.runs[index]._finish()

    def _close_without_output(self, index: int) -> None:
        with self._lock:
            if self._closing.pop(index, None) is None:
                return
            lagging = [s for s in STREAMS if self._output_of[s] <= index]
            run = self.runs[index]
        run._notice(
            f"the trainer's {' and '.join(lagging)} had not caught up {OUTPUT_CATCH_UP_S:g} s "
            "after this count ended: what it printed later for this count is in the next "
            f"count's log, marked 'late output of the {self.counts[index]}-device count'",
            "warning",
        )
        run._finish()

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
            held = [line for index in sorted(self._held) for line in self._held[index]]
            self._held.clear()
            closing = sorted(self._closing)
            for index in closing:
                self._closing.pop(index).cancel()
        for index in closing:  # the streams are over: all their lines are in
            self.runs[index]._finish()
        for stream, level, message in held:  # after the last count's end: its process's
            self.runs[current]._on_line(stream)(level, message)
        for run in self.runs[current:]:
            run.returncode = self.returncode
        self.runs[current]._finish()
        for run in self.runs[current + 1 :]:
            run._never_begun()
        self._done.set()
