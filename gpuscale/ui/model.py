"""The dashboard's state: every event of a run absorbed into one model.

Pure Python (no Textual): the event source's thread calls :meth:`RunModel.absorb`
as fast as events arrive, and the screen redraws from the model on a timer, so
the redraw rate never depends on the event rate. A lock guards the model; the
UI takes a :meth:`RunModel.snapshot` (cheap copies) under it and renders
outside it.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field

from gpuscale.analysis.summary import RunAccumulator, RunSummary
from gpuscale.events.schema import (
    DeviceInfo,
    EndEvent,
    ErrorEvent,
    Event,
    GpuSample,
    HostSample,
    LogEvent,
    PhaseEvent,
    StartEvent,
    StepEvent,
    run_duration_s,
)
from gpuscale.formatting import format_duration_s, plural

HISTORY_POINTS = 120
"""Samples kept per device for the utilization history (a minute at 2 Hz)."""
STEP_POINTS = 600
"""Steps kept for the step-time and throughput chart."""
PHASE_POINTS = 60
"""Phase breakdowns kept for the stacked chart."""
LOG_LINES = 2000
MAX_DISPLAY_LINE = 2000
"""Longest log line the dashboard draws (characters); the rest is replaced by a
note saying how much (a live run's lines are already capped at 64 KiB, a
recording's are not, and drawing a line of megabytes takes the UI minutes)."""


@dataclass
class DeviceState:
    """One GPU (or logical CPU device) as the dashboard knows it."""

    worker: int
    index: int
    info: DeviceInfo | None = None
    last: GpuSample | None = None
    util_history_pct: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))
    lost: bool = False
    util_history_t: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))
    """When each of ``util_history_pct`` was sampled (event ``t``, seconds)."""
    gpm_history_t: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))
    """When each of ``sm_history_pct`` (GPM, Hopper and newer) was sampled; empty
    where the GPU reads no GPM."""
    sm_history_pct: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_POINTS))
    """GPM's SM activity, a value per sample that read it: what the GPU worked, beside
    ``util_history_pct``, what it was busy (any kernel running, copies included)."""
    tensor_history_pct: deque[float | None] = field(
        default_factory=lambda: deque(maxlen=HISTORY_POINTS)
    )
    """GPM's tensor-core activity at the same samples (``None`` where one did not read it)."""

    @property
    def kind(self) -> str:
        return self.info.kind if self.info is not None else "gpu"


@dataclass(frozen=True)
class LogLine:
    seq: int
    t: float
    source: str
    level: str
    message: str


@dataclass
class Snapshot:
    """What one frame draws: copies taken under the model's lock."""

    version: int
    epoch: int
    start: StartEvent | None
    elapsed_s: float
    """The run's duration so far as the dashboard saw it
    (:func:`gpuscale.events.schema.run_duration_s` from :attr:`RunModel.first_t`: the
    launch, gpuscale's provisional start, not the run's own start that replaces it,
    so the clock never jumps back)."""
    duration_s: float
    """The run's own duration so far, as recorded (``gpuscale runs``, the end event's
    ``duration_s``): :func:`gpuscale.events.schema.run_duration_s` from
    :attr:`RunModel.own_start_t`, without the start-up before the run's own start.
    What the log's end line and the toasts say; shorter than :attr:`elapsed_s` by
    that start-up."""
    last_step: int
    steps_done: int
    """Steps so far, counted from the first step number seen (the trainer numbers
    from 0, a user's callback may number from 1)."""
    steps_total: int | None
    """Where the latest step said its training is planned to end
    (``StepEvent.total_steps``), counted as ``steps_done`` is and never below it;
    None where it did not say (a script's ``fit`` on data of unknown length, a
    custom loop, recordings before format 1.8)."""
    steps_measured: int
    steps_t: list[int]
    steps_warmup: list[bool]
    step_times_s: list[float]
    throughputs: list[float]
    phases: list[PhaseEvent]
    devices: list[DeviceState]
    host: HostSample | None
    host_cpu_history_pct: list[float]
    host_cpu_history_t: list[float]
    """When each of ``host_cpu_history_pct`` was sampled (event ``t``, seconds)."""
    host_trainer: HostSample | None
    """The latest host sample that measured the run's own processes (a resident size
    above zero): what the host card shows for them once they are gone."""
    origin_t: float | None
    """The run's origin (the latest start event's ``t``, else the first event's):
    charts over time count seconds from it."""
    end: EndEvent | None
    errors: list[ErrorEvent]
    log_epoch: int
    logs: list[LogLine]
    notices: list[str]

    @property
    def gpus_sampled(self) -> int:
        """The GPUs whose samples came so far (telemetry flows from them)."""
        return sum(1 for d in self.devices if d.last is not None)


class RunModel:
    """Absorbs events (any thread) and hands out snapshots (UI thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Forget everything (a replay seeking backwards rebuilds from the start)."""
        lock = self._lock
        with lock:
            self.version = getattr(self, "version", 0) + 1
            self.epoch = getattr(self, "epoch", 0) + 1
            self.events_absorbed = getattr(self, "events_absorbed", 0)
            self.start: StartEvent | None = None
            self.first_t: float | None = None
            """Where the elapsed time counts from: the earliest of the first event and
            the starts (a provisional start is stamped at the launch; the run's own,
            which replaces it, comes once TensorFlow has started)."""
            self.own_start_t: float | None = None
            """Where the run's recorded duration counts from, as ``gpuscale runs`` reads
            it (:func:`gpuscale.recording.store.list_runs`): the first start that is
            not provisional, else the first start."""
            self.last_t: float | None = None
            self.end_last_t: float | None = None
            """``last_t`` when the end event came: where the run's duration stops."""
            self.last_step = 0
            self.first_step: int | None = None
            self.total_steps: int | None = None
            """The latest step's ``total_steps``."""
            self.steps: deque[StepEvent] = deque(maxlen=STEP_POINTS)
            self.steps_measured = 0
            self.phases: deque[PhaseEvent] = deque(maxlen=PHASE_POINTS)
            self.accumulator = RunAccumulator()
            self.devices: dict[tuple[int, int], DeviceState] = {}
            self.host: HostSample | None = None
            self.host_trainer: HostSample | None = None
            self.host_cpu_history_pct: deque[float] = deque(maxlen=HISTORY_POINTS)
            self.host_cpu_history_t: deque[float] = deque(maxlen=HISTORY_POINTS)
            self.end: EndEvent | None = None
            self.errors: list[ErrorEvent] = []
            self.logs: deque[LogLine] = deque(maxlen=LOG_LINES)
            self.log_seq = 0
            self.notices: list[str] = []

    # -- absorbing ---------------------------------------------------------------
    def absorb(self, events: list[Event]) -> None:
        """Fold a batch of events into the model (thread-safe)."""
        with self._lock:
            for event in events:
                self._absorb_one(event)
            self.events_absorbed += len(events)
            self.version += 1

    def add_notice(self, message: str) -> None:
        """A gpuscale message about the stream itself (e.g. a damaged recording)."""
        with self._lock:
            self.notices.append(message)
            self._log(self.last_t or 0.0, "gpuscale", "warning", message)
            self.version += 1

    def _log(self, t: float, source: str, level: str, message: str) -> None:
        if len(message) > MAX_DISPLAY_LINE:  # drawing megabytes of one line freezes the UI
            cut = len(message) - MAX_DISPLAY_LINE
            message = f"{message[:MAX_DISPLAY_LINE]} [... {cut} more characters not shown]"
        self.log_seq += 1
        self.logs.append(LogLine(self.log_seq, t, source, level, message))

    def _device(self, worker: int, index: int) -> DeviceState:
        key = (worker, index)
        state = self.devices.get(key)
        if state is None:
            state = self.devices[key] = DeviceState(worker, index)
        return state

    def _absorb_one(self, event: Event) -> None:
        self.accumulator.add(event)
        t = event.t
        if self.first_t is None:
            self.first_t = t
        if self.last_t is None or t > self.last_t:
            self.last_t = t
        if isinstance(event, GpuSample):
            state = self._device(event.worker, event.index)
            if state.info is None:
                state.info = DeviceInfo(index=event.index, name=f"GPU {event.index}")
            state.last = event
            if event.lost:
                state.lost = True
            elif event.util_gpu_pct is not None:
                state.util_history_pct.append(event.util_gpu_pct)
                state.util_history_t.append(t)
            if not event.lost and event.gpm_sm_activity_pct is not None:
                state.gpm_history_t.append(t)
                state.sm_history_pct.append(event.gpm_sm_activity_pct)
                state.tensor_history_pct.append(event.gpm_tensor_activity_pct)
        elif isinstance(event, StepEvent):
            self.steps.append(event)
            self.last_step = max(self.last_step, event.step)
            self.total_steps = event.total_steps
            if self.first_step is None or event.step < self.first_step:
                self.first_step = event.step
            if not event.warmup:
                self.steps_measured += 1
        elif isinstance(event, PhaseEvent):
            self.phases.append(event)
        elif isinstance(event, HostSample):
            self.host = event
            if event.proc_rss_bytes:
                self.host_trainer = event
            self.host_cpu_history_pct.append(event.cpu_pct)
            self.host_cpu_history_t.append(t)
        elif isinstance(event, LogEvent):
            self._log(t, event.source, event.level, event.message)
        elif isinstance(event, ErrorEvent):
            self.errors.append(event)
            self._log(t, event.source, "error", event.message)
        elif isinstance(event, StartEvent):
            # One rule for every start: a later one (the run's own start superseding a
            # provisional one, a script's callback after gpuscale's made-up start)
            # describes the run from then on, but the clock keeps counting from the
            # earliest (first_t: the launch the user saw; from the run's own start, the
            # elapsed time jumped back by TensorFlow's start-up when it arrived).
            if self.first_t is None or t < self.first_t:
                self.first_t = t
            if self.own_start_t is None or (
                self.start is not None and self.start.provisional and not event.provisional
            ):
                self.own_start_t = t
            self.start = event
            for info in event.devices:
                self._device(event.worker, info.index).info = info
            for worker, info in _other_workers_cpus(event):
                self._device(worker, info.index).info = info
        elif isinstance(event, EndEvent):
            self.end = event
            self.end_last_t = self.last_t  # the latest t up to the end: where elapsed stops
            # the run's recorded duration (`gpuscale runs`'), not the header's clock
            # from the launch: the same recording says the same number everywhere
            duration_s = (
                run_duration_s(self.own_start_t, self.end_last_t or t)
                if self.own_start_t is not None
                else event.duration_s
            )
            self._log(
                t,
                "gpuscale",
                "info" if event.status == "completed" else "warning",
                f"run {event.status} after {plural(event.steps, 'step')}, {format_duration_s(duration_s)}",
            )

    # -- reading -----------------------------------------------------------------
    def summary(self, live: bool = False) -> tuple[int, RunSummary]:
        """The analysis of everything absorbed so far (``gpuscale.analysis``), with
        the model version it describes. Costs a sort of the step times: call it
        at most about once a second, off the UI thread. ``live``: the run goes on
        and this is asked again soon (the accumulator may reuse its slowest part,
        :meth:`~gpuscale.analysis.summary.RunAccumulator.summary`)."""
        with self._lock:
            return self.version, self.accumulator.summary(live=live)

    def snapshot(self, logs_after: int = 0) -> Snapshot:
        """Copies of what a frame needs; ``logs_after`` skips log lines already drawn."""
        with self._lock:
            start_t = self.start.t if self.start is not None else self.first_t
            # From first_t (the launch, never back to the run's own start when it
            # comes). Ended: to the latest event up to the end event (where the log's
            # duration stops too), not to host samples that still arrive after it (the trial:
            # 10.9 s logged, 11.9 s in the toast), nor back to the end's own t (a
            # trainer composes it before its last samples are in: elapsed went from
            # 0:21 back to 0:19)
            last_t = self.end_last_t if self.end is not None else self.last_t
            first_t = self.first_t
            elapsed = run_duration_s(first_t, last_t) if (last_t and first_t) else 0.0
            own_t = self.own_start_t
            duration = run_duration_s(own_t, last_t) if (last_t and own_t) else 0.0
            steps = list(self.steps)
            first_step = self.first_step
            done = self.last_step - first_step + 1 if first_step is not None else 0
            return Snapshot(
                version=self.version,
                epoch=self.epoch,
                start=self.start,
                elapsed_s=elapsed,
                duration_s=duration,
                last_step=self.last_step,
                steps_done=done,
                steps_total=(
                    max(done, self.total_steps - first_step)
                    if self.total_steps is not None and first_step is not None
                    else None
                ),
                steps_measured=self.steps_measured,
                steps_t=[s.step for s in steps],
                steps_warmup=[s.warmup for s in steps],
                step_times_s=[s.step_time_s for s in steps],
                throughputs=[
                    s.samples / s.step_time_s if s.step_time_s > 0 else 0.0 for s in steps
                ],
                phases=list(self.phases),
                devices=[
                    DeviceState(
                        d.worker,
                        d.index,
                        d.info,
                        d.last,
                        deque(d.util_history_pct),
                        d.lost,
                        deque(d.util_history_t),
                        deque(d.gpm_history_t),
                        deque(d.sm_history_pct),
                        deque(d.tensor_history_pct),
                    )
                    for _, d in sorted(self.devices.items())
                ],
                host=self.host,
                host_cpu_history_pct=list(self.host_cpu_history_pct),
                host_cpu_history_t=list(self.host_cpu_history_t),
                host_trainer=self.host_trainer,
                origin_t=start_t,
                end=self.end,
                errors=list(self.errors),
                log_epoch=self.epoch,
                logs=[line for line in self.logs if line.seq > logs_after],
                notices=list(self.notices),
            )


def _other_workers_cpus(start: StartEvent) -> list[tuple[int, DeviceInfo]]:
    """The CPU devices of a multi-worker run's other workers, from the start's
    ``config["workers"]`` (the chief's start lists only its own devices): one replica
    each, which no sample would otherwise show (GPUs come with their samples)."""
    if start.platform != "cpu" or start.num_workers <= 1:
        return []
    workers = (start.config or {}).get("workers")
    found = []
    for entry in workers if isinstance(workers, list) else []:
        if not isinstance(entry, dict) or entry.get("worker") == start.worker:
            continue
        worker, names = entry.get("worker"), entry.get("devices")
        if not isinstance(worker, int) or not isinstance(names, list):
            continue
        for index, name in enumerate(names):
            if isinstance(name, str) and "GPU" not in name.upper():
                found.append(
                    (worker, DeviceInfo(index=index, name="CPU", kind="cpu", tf_name=name))
                )
    return found
