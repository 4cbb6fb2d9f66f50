"""A live sweep for the scaling view (``gpuscale recommend --watch``): the trainer
at each device count in turn, each run in its own child process (TensorFlow never
loads here) and recorded, as the view's data source. No Textual here: the app
runs :meth:`LiveSweep.run` in a worker thread and gets two callbacks, one with
the run in progress (at most every ``status_interval_s``) and one after each
device count, both with a whole :class:`~gpuscale.ui.sweep_app.SweepView`; the
run in progress is also folded into a :class:`~gpuscale.ui.model.RunModel`
(:attr:`LiveSweep.model`), which the view draws as ``gpuscale watch`` does.

:meth:`LiveSweep.stop` (``q``, Ctrl-C, SIGTERM) stops the run in progress cleanly
(its recording ends with its end event) and starts no other; the counts already
measured stay, and so do the steps the stopped count had counted (as a plain
sweep's Ctrl-C keeps them, and ``recommend --from`` reads them from its recording),
and the view says the recommendation rests on them.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpuscale.analysis.summary import RunAccumulator
from gpuscale.analysis.sweep import SweepPoint, point_from_summary, runs_topology
from gpuscale.events.schema import EndEvent, PhaseEvent, StepEvent, SweepRef
from gpuscale.formatting import format_ms, plural, step_of
from gpuscale.recording.sweeps import new_sweep_id
from gpuscale.ui.model import RunModel
from gpuscale.ui.sweep_app import SweepView
from gpuscale.ui.widgets.charts import longer_than_step

Callback = Callable[[SweepView], None]


def _default_run_factory(config: Any, record: str | None) -> Any:
    from gpuscale.live.trainer_run import LiveRun

    return LiveRun(config, record=record)


class LiveSweep:
    """Runs ``configs`` (one per count of ``counts``) one after another."""

    def __init__(
        self,
        view: SweepView,
        configs: list[Any],
        *,
        record: bool = True,
        run_factory: Callable[[Any, str | None], Any] = _default_run_factory,
        status_interval_s: float = 0.25,
        sweep_id: str | None = None,
        one_process: bool = False,
        script: Any = None,
    ) -> None:
        self.view = view
        self.sweep_id = sweep_id or new_sweep_id()
        """Carried by every run's start event (with its index and the planned counts)."""
        self.configs = configs
        self.record = record
        self.script = script
        """The counts are runs of the user's script: a
        :class:`~gpuscale.live.script_sweep.ScriptCounts`, which is then the
        ``run_factory`` too; its runs are settled as one workload."""
        self.run_factory = script or run_factory
        self.one_process = one_process
        """The counts share one TensorFlow process (``run_factory`` hands out its runs):
        TensorFlow starts once, for the first; the others only build their model."""
        self.status_interval_s = status_interval_s
        self.stop_requested = threading.Event()
        self.finished = threading.Event()
        """Set when :meth:`run` has returned (or raised): :attr:`view` is final."""
        self.failure: str | None = None
        """Why the sweep ended early, other than a stop request."""
        self.failed_devices: int | None = None
        """The device count whose run failed (:attr:`failure` says why), if one did."""
        self.failed_returncode: int | None = None
        """That run's exit status, where a script's run failed with one (passed
        through as ``recommend -- python train.py`` passes it)."""
        self._runs: list[tuple[Any, Any, str]] = []
        """``(summary, start, source)`` of every count measured (a script's are
        settled together)."""
        self._current: Any = None
        self._lock = threading.Lock()
        self.model: RunModel | None = None
        """The run in progress (the last one once the sweep is over), every event
        absorbed as the dashboard's model does: the view draws its devices, step
        times and phases from it, as ``gpuscale watch`` does."""
        self.model_devices: int | None = None
        """The device count of the run in :attr:`model`."""
        self.cut_short: str | None = None
        """What a stop request cut short, when it stopped a count in progress:
        ``the first count (1 device, 133 of 300 steps)``; ``None`` otherwise."""
        self.cut_short_recording: str | None = None
        """That count's recording (it ends ``stopped``), when it was recorded."""
        self.failed_recording: str | None = None
        """The recording of the count that failed, where it left one (a first count's
        error line names it: no report names the sweep then)."""
        self.kept_cut_short: tuple[int, int] | None = None
        """``(devices, steps counted)`` of the count the stop cut short, when it had
        counted steps: they are its measurement (a point of :attr:`view`)."""

    def stop(self) -> None:
        """Stop the run in progress and start no other (any thread)."""
        self._stop(by_hand=False)

    def interrupt(self) -> None:
        """As :meth:`stop`, by hand (``q``, Ctrl-C): the run in progress stops as
        its own ``interrupt()`` stops it, so a script gets Ctrl-C first (its
        ``except KeyboardInterrupt`` runs), as under ``watch -- python train.py``.
        It may wait for the script: call it off the UI thread."""
        self._stop(by_hand=True)

    @property
    def interrupt_grace_s(self) -> float:
        """How long :meth:`interrupt` may wait for the run in progress after its
        Ctrl-C (a script's; 0 for the trainer)."""
        with self._lock:
            current = self._current
        return float(getattr(current, "interrupt_grace_s", 0.0) or 0.0)

    def _stop(self, by_hand: bool) -> None:
        self.stop_requested.set()
        with self._lock:
            current = self._current
        if current is not None and not current.done:
            gentle = getattr(current, "interrupt", None) if by_hand else None
            (gentle if callable(gentle) else current.stop)()

    def run(self, on_status: Callback, on_count: Callback) -> SweepView:
        try:
            return self._run(on_status, on_count)
        finally:
            self.finished.set()

    def _run(self, on_status: Callback, on_count: Callback) -> SweepView:
        points: list[SweepPoint] = list(self.view.points)
        sources: list[str] = list(self.view.sources)
        for index, (n, config) in enumerate(zip(self.view.planned, self.configs, strict=True)):
            if self.stop_requested.is_set():
                break
            self.view = replace(self.view, state="running", running_devices=n, status_line=None)
            on_status(self.view)
            point, failure = self._one_count(n, config, on_status, index)
            if point is not None:
                points.append(point)
                sources.append(point.source or f"live run on {plural(n, 'device')}")
                if self.script is not None:  # one workload: settled on every count's run
                    points = self._settled()
                self.view = replace(
                    self.view,
                    points=list(points),
                    sources=list(sources),
                    cut_short=self.kept_cut_short,
                    topology=runs_topology(start for _, start, _ in self._runs),
                )
                on_count(replace(self.view, status_line=None))
            if failure is not None:
                self.failure, self.failed_devices = failure, n
                break
        complete = [p.devices for p in points] == list(self.view.planned)
        self.view = replace(
            self.view,
            state="complete" if complete else "stopped",
            running_devices=None,
            status_line=self.failure,
        )
        on_count(self.view)
        return self.view

    def _one_count(
        self, n: int, config: Any, on_status: Callback, index: int = 0
    ) -> tuple[SweepPoint | None, str | None]:
        run = self.run_factory(config, "default" if self.record else None)
        run.sweep_ref = SweepRef(
            id=self.sweep_id,
            index=index,
            planned=list(self.view.planned),
            available_devices=self.view.available_devices,
        )
        acc = RunAccumulator()
        model = RunModel()
        with self._lock:
            self._current = run
            self.model, self.model_devices = model, n
        try:
            run.start()
            if self.stop_requested.is_set():  # asked while starting
                run.stop()
            last = 0.0
            starting = "building the model" if self.one_process and index else "starting TensorFlow"
            if self.script is not None:
                starting = self.script.starting
            status = f"{n} device{'s' if n > 1 else ''}: {starting}"
            on_status(replace(self.view, status_line=status))
            steps = getattr(config, "steps", None)
            # the counted steps' times, kept sorted (the median is then the middle one):
            # the step the line shows, and the probes' check
            counted_s: list[float] = []
            median_s: float | None = None
            steps_done = 0
            while True:
                finished = run.done  # then what is queued is all there is
                for event in run.events(timeout=0.05 if finished else 0.1):
                    acc.add(event)
                    model.absorb([event])
                    if isinstance(event, StepEvent):
                        steps_done = max(steps_done, event.step + 1)
                    if isinstance(event, StepEvent) and not event.warmup:
                        bisect.insort(counted_s, event.step_time_s)
                    if isinstance(event, (StepEvent, PhaseEvent)):  # the lines that use it
                        median_s = _sorted_median(counted_s)
                    status = _status(n, event, status, steps, median_s)
                    if time.monotonic() - last >= self.status_interval_s:
                        last = time.monotonic()
                        on_status(replace(self.view, status_line=status))
                if finished:
                    break
        finally:
            if not run.done:
                run.stop()
            with self._lock:
                self._current = None
        summary = acc.summary() if acc.start is not None else None
        failed = run.error is not None and not self.stop_requested.is_set()
        if failed or summary is None or summary.step_time_s is None:
            if self.stop_requested.is_set():
                self._note_cut_short(n, index, steps_done, steps, run)
                return None, None
            no_steps = self.script.no_steps if self.script else "the run ended without steps"
            message = run.error.message if run.error is not None else no_steps
            if run.error is not None:
                self.failed_returncode = getattr(run, "returncode", None)
            path = getattr(run, "recording_path", None)
            self.failed_recording = str(path) if path and Path(path).exists() else None
            return None, f"the {n}-device run failed: {message}"
        if self.stop_requested.is_set() and (run.end is None or run.end.status != "completed"):
            self._note_cut_short(n, index, steps_done, steps, run)
            if run.error is not None or summary.devices != n:
                return None, None  # cut short, and not a measurement of this count
            # its counted steps are: kept, as a plain sweep keeps them (kept_when_stopped)
            self.kept_cut_short = (n, summary.steps_counted)
        wrong = self.script.check(n, summary.devices) if self.script else None
        if wrong is not None:
            return None, wrong
        source = (
            str(run.recording_path)
            if run.recording_path
            else f"live run on {n} device{'s' if n > 1 else ''} (not recorded)"
        )
        self._runs.append((summary, acc.start, source))
        return point_from_summary(summary, acc.start, source), None

    def _settled(self) -> list[SweepPoint]:
        """The script's counts measured so far as one workload's points."""
        from gpuscale.analysis.script_runs import settle_script_runs

        return [
            point_from_summary(s, start, src) for s, start, src in settle_script_runs(self._runs)
        ]

    def _note_cut_short(
        self, n: int, index: int, steps_done: int, steps: int | None, run: Any
    ) -> None:
        """Say what the stop cut short (:attr:`cut_short`): which count, how far along."""
        which = "the first count" if index == 0 else f"count {index + 1} of {len(self.configs)}"
        if steps_done:
            done = f"{steps_done} of {steps} steps" if steps else plural(steps_done, "step")
        else:
            done = "before its first step"
        self.cut_short = f"{which} ({plural(n, 'device')}, {done})"
        path = getattr(run, "recording_path", None)
        self.cut_short_recording = str(path) if path else None


def _sorted_median(values: list[float]) -> float | None:
    """The median of ``values``, already sorted (``None`` for none)."""
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def _status(
    n: int, event: Any, previous: str, steps: int | None, median_step_s: float | None = None
) -> str:
    """One line on the run in progress: its step, the median counted step so far
    (``median_step_s``: the step the phases are parts of, as every other view
    says, never a recent step beside phases of another) and the last probe's
    phases, or, where they add up to more than that median step (or compute alone
    fills it), that they are not resolved (as the phase chart says)."""
    who = f"{n} device{'s' if n > 1 else ''}"
    if isinstance(event, StepEvent):
        total = steps or event.total_steps  # a script's fit says its own (format 1.8)
        if event.warmup or median_step_s is None:
            what = "warm-up" if event.warmup else f"{format_ms(event.step_time_s, 0)}/step"
        else:
            what = f"median {format_ms(median_step_s, 0)}/step"
        phases = previous.partition(" | ")[2]  # the last breakdown stays on the line
        step = step_of(event.step + 1, total)
        return f"{who}: step {step}, {what}" + (f" | {phases}" if phases else "")
    if isinstance(event, PhaseEvent):
        head = previous.partition(" | ")[0]
        fills = median_step_s is not None and event.compute_s >= median_step_s
        if fills and n == 1 and not longer_than_step(event, median_step_s):
            # one device: nothing to derive from it, the pass is the step within its noise
            return f"{head} | compute \u2248 the whole step"
        if fills or longer_than_step(event, median_step_s):
            return f"{head} | last probe longer than the median step: not resolved"
        return (
            f"{head} | compute {format_ms(event.compute_s, 0)}, all-reduce "
            f"{format_ms(event.allreduce_s, 0)}, apply {format_ms(event.apply_s, 0)}"
        )
    if isinstance(event, EndEvent):
        return f"{who}: {event.status}"
    return previous
