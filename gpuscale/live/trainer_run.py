"""A live run: the trainer child process, telemetry and the recorder, as one stream.

:class:`LiveRun` starts an :class:`EventServer`, spawns the trainer
(``python -m gpuscale.trainer``, in its own session so a Ctrl-C in the terminal
reaches only the parent, which then stops the child cleanly), turns the child's
stdout/stderr lines into LogEvents, starts the telemetry
:class:`~gpuscale.telemetry.sampler.Sampler` on the child's PIDs, writes every
event to a :class:`~gpuscale.recording.writer.Recorder`, and hands every event to
the consumer through a thread-safe queue.

The run always ends with exactly one EndEvent, carrying the run's summary
(:func:`gpuscale.analysis.summary.summarize`): the trainer's own, or, when the
child died without one, one made here (status ``lost``, after an ErrorEvent with
its exit status and last output lines). Nothing here imports TensorFlow.
"""

from __future__ import annotations

import collections
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import msgspec

from gpuscale import __version__
from gpuscale.analysis.summary import summarize, summary_document
from gpuscale.errors import EXIT_USAGE, GpuscaleError
from gpuscale.events.schema import (
    EndEvent,
    ErrorEvent,
    Event,
    GpuSample,
    HostSample,
    LogEvent,
    StartEvent,
    StepEvent,
    run_duration_s,
)
from gpuscale.events.transport import EventServer
from gpuscale.live.base import RunBase
from gpuscale.live.child import (
    AFTER_EXIT_S,
    STOP_DEADLINE_S,
    STOP_GRACE_S,
    describe_exit,
    read_lines,
    release,
    spawn,
)
from gpuscale.telemetry.nvml import probe as nvml_probe
from gpuscale.telemetry.topology import probe_topology
from gpuscale.trainer.options import TrainConfig, to_json


def spawn_trainer(
    python: str, args: list[str], server: EventServer, extra_env: dict[str, str]
) -> subprocess.Popen:
    """Start ``python -m gpuscale.trainer ARGS`` in a session of its own, its
    events to ``server``, its output through pipes (line-buffered text). Closes
    ``server`` and raises :class:`GpuscaleError` when the process cannot start."""
    env = {
        **os.environ,
        **extra_env,
        **server.env(),
        "PYTHONUNBUFFERED": "1",
        "GPUSCALE_PARENT_PIPE": "1",
    }
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        return spawn(
            [python, "-m", "gpuscale.trainer", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
            text=True,
            errors="replace",
            bufsize=1,
        )
    except OSError as exc:
        server.close()
        raise GpuscaleError(f"cannot start the trainer process: {exc}", exit_code=1) from exc


class LiveRun(RunBase):
    """One training run in a child process, as a stream of events.

    ``record``: ``"default"`` (a new file in the runs folder, open from the start
    with a provisional start event and renamed once the trainer says what runs
    where), a path, or ``None`` (not recorded).
    Consume with :meth:`events` (blocking iterator) or :meth:`drain`
    (non-blocking); ``queue`` holds the events and a final ``None``.
    """

    def __init__(
        self,
        config: TrainConfig,
        *,
        record: Path | str | None = "default",
        sample_interval_s: float = 0.5,
        nvml: Any = None,
        sampler: bool = True,
        python: str | None = None,
        env: dict[str, str] | None = None,
        on_problem: Callable[[str], None] | None = None,
    ):
        self._init_run()
        self.config = config
        self.record = record
        self.sample_interval_s = sample_interval_s
        self._nvml = nvml
        self._use_sampler = sampler
        self._python = python or sys.executable
        self._extra_env = env or {}
        self._on_problem = on_problem
        self.telemetry_status: str | None = None
        self._events: list[Event] = []
        self._pending: list[Event] = []
        self._lock = threading.RLock()
        self._finish_lock = threading.Lock()
        self._finishing = False
        self._child_end: EndEvent | None = None
        self._disconnected = threading.Event()
        self._stop_requested = False
        self._proc: subprocess.Popen | None = None
        self._server: EventServer | None = None
        self._readers: list[threading.Thread] = []
        self._tail: collections.deque[str] = collections.deque(maxlen=12)
        self._last_stderr: str | None = None
        """The child's last line on stderr: where a crash says why."""
        self._started_at = time.time()

    # -- life cycle ----------------------------------------------------------------
    def start(self) -> LiveRun:
        """Start the server, the trainer process and the sampler; returns at once.
        A sampler that refuses its settings raises before the trainer starts."""
        self._started_at = time.time()
        if self._use_sampler:
            self._sampler = self._new_sampler(
                self._on_event, self.pids, nvml=self._nvml, gpu_indices=self.config.gpus
            )
        self._server = EventServer(self._on_event, on_disconnect=self._on_disconnect)
        self._proc = spawn_trainer(
            self._python, ["--config", to_json(self.config)], self._server, self._extra_env
        )
        for stream_name in ("stdout", "stderr"):
            thread = threading.Thread(
                target=read_lines,
                args=(getattr(self._proc, stream_name), stream_name, self._on_line(stream_name)),
                name=f"gpuscale-trainer-{stream_name}",
                daemon=True,
            )
            thread.start()
            self._readers.append(thread)
        with self._lock:  # the trainer's own start may come at any moment
            self._begin_recording(self._provisional_start(), self.config.model)
        self._start_sampler()
        threading.Thread(target=self._watch, name="gpuscale-trainer-watch", daemon=True).start()
        return self

    def _provisional_start(self) -> StartEvent:
        """What is known before the trainer says what runs where (see
        :meth:`RunBase._begin_recording`): what was asked (model, strategy, devices)."""
        from gpuscale.trainer.options import asked_devices, gpu_indices

        nvml = self._nvml
        found = None
        if self.config.gpus is None:  # which devices the trainer will pick: is there a GPU?
            found = gpu_indices(None if nvml is None else (lambda: nvml_probe(nvml)))
        platform, devices = asked_devices(self.config, found)
        return StartEvent(
            t=time.time(),
            gpuscale_version=__version__,
            host=socket.gethostname(),
            pid=os.getpid(),
            source="trainer",
            provisional=True,
            config=msgspec.to_builtins(self.config),
            platform=platform,  # type: ignore[arg-type]
            model=self.config.model,
            strategy=self.config.strategy,
            num_replicas=devices,
            pids=[self._proc.pid] if self._proc is not None else [],
            note="provisional: what was asked; the trainer's own start event follows when it is known",
        )

    def _start_sampler(self) -> None:
        if self._sampler is None:
            return
        try:
            self._sampler.start()
            self.telemetry_status = self._sampler.status
        except Exception as exc:  # telemetry must never stop a run
            self._notice(f"telemetry is off: {type(exc).__name__}: {exc}", "warning")
            self._sampler = None

    def pids(self) -> list[int]:
        """The trainer process and its children (for per-process telemetry)."""
        proc = self._proc
        if proc is None:
            return []
        pids = [proc.pid]
        try:
            import psutil

            pids += [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
        except Exception:
            pass
        return pids

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Ask the trainer to finish its step (SIGTERM); SIGKILL its process group
        after ``grace_s``; return once the run is over (final EndEvent queued), within
        :data:`STOP_DEADLINE_S` in all."""
        deadline = time.monotonic() + STOP_DEADLINE_S
        self._stop_requested = True
        proc = self._proc
        if proc is not None and proc.poll() is None:
            self._signal(signal.SIGTERM)
            grace_s = min(grace_s, STOP_DEADLINE_S - 1.5)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self._notice(f"the trainer did not stop within {grace_s:g} s; killed it", "warning")
                self._signal(signal.SIGKILL)
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic() - 1.0))
                except subprocess.TimeoutExpired:
                    pass
        if proc is None:
            self._finish()
        # the watcher finishes the run once the last events are in; if that takes
        # too long, finish it here (whatever arrives later is not waited for)
        if not self._done.wait(timeout=max(0.0, deadline - time.monotonic() - 0.8)):
            self._finish()
            self._done.wait(timeout=max(0.0, deadline - time.monotonic()))

    def _signal(self, signum: int) -> None:
        proc = self._proc
        if proc is None:
            return
        try:
            # its own session: the group is the trainer and its children
            os.killpg(proc.pid, signum)
        except (ProcessLookupError, PermissionError):
            try:
                proc.send_signal(signum)
            except ProcessLookupError:
                pass

    # -- sources -------------------------------------------------------------------
    def _notice(self, message: str, level: str = "info") -> None:
        self._on_event(LogEvent(t=time.time(), message=message, source="gpuscale", level=level))

    def _on_line(self, stream: str) -> Callable[[str, str], None]:
        def on_line(level: str, message: str) -> None:
            if level != "debug":
                self._tail.append(message)
                if stream == "stderr":
                    self._last_stderr = message
            self._on_event(LogEvent(t=time.time(), message=message, source="trainer", level=level))

        return on_line

    def _on_disconnect(self, worker: int, saw_end: bool) -> None:
        self._disconnected.set()

    def _on_event(self, event: Event) -> None:
        with self._lock:
            if self._done.is_set():
                return
            if isinstance(event, EndEvent):
                self._child_end = event  # the final one, with the summary, comes from _finish
                return
            if self._child_end is not None and isinstance(event, (HostSample, GpuSample)):
                return  # the process tearing down, after the run's end: not the run's
            if isinstance(event, StartEvent):
                if self.start_event is not None:
                    return
                self.start_event = event
                if event.topology is None:  # this machine's GPU links, read by this process
                    topology = getattr(self._sampler, "topology", None)
                    event.topology = topology or probe_topology(self._nvml)
                if self._proc is not None and self._proc.pid not in event.pids:
                    event.pids = [*event.pids, self._proc.pid]
                fresh = self._recorder is None
                self._record_start(event, self.config.model)
                if fresh and self._recorder is not None:
                    for pending in self._pending:
                        self._recorder.write(pending)
                self._pending.clear()
            elif isinstance(event, ErrorEvent) and self.error is None:
                self.error = event
            self._events.append(event)
            self._write(event)
            self.queue.put(event)

    # -- recording -----------------------------------------------------------------
    def _recording_problem(self, message: str) -> None:
        self.recording_problem = message
        if self._on_problem is not None:
            self._on_problem(message)

    def _write(self, event: Event) -> None:
        if self.record is None or isinstance(event, StartEvent):
            return
        if self._recorder is None:
            if self.start_event is None:
                self._pending.append(event)
        else:
            self._recorder.write(event)

    # -- the end ---------------------------------------------------------------------
    def _watch(self) -> None:
        proc = self._proc
        assert proc is not None
        self.returncode = proc.wait()
        for thread in self._readers:
            thread.join(timeout=AFTER_EXIT_S)
        if self.start_event is not None or self._events:
            self._disconnected.wait(timeout=AFTER_EXIT_S)
        self._finish()

    def _finish(self) -> None:
        with self._finish_lock:
            if self._finishing:
                return
            self._finishing = True
        # Outside self._lock: their threads may be waiting in _on_event for it.
        if self._sampler is not None:
            try:
                self._sampler.stop()
            except Exception:
                pass
        if self._server is not None:
            self._server.close()
        with self._lock:
            if self.returncode is None and self._proc is not None:
                self.returncode = self._proc.poll()
            if self.returncode is not None and self._proc is not None:
                release(self._proc)  # over: gpuscale's death need not kill its group
            end = self._child_end
            if end is None:
                end = self._synthesize_end()
            elif (
                self._stop_requested and end.status == "completed" and self.config.steps > end.steps
            ):
                end.status = "stopped"
            if self.start_event is not None:  # the one duration every view shows
                latest = max((e.t for e in self._events), default=end.t)
                end.duration_s = run_duration_s(self.start_event.t, max(latest, end.t))
            self._events.append(end)
            end.summary = self._summarize()
            self.end = end
            self._write(end)
            self.queue.put(end)
            if self._recorder is not None:
                if self._refused_before_its_first_step(end):
                    # bad input found by the trainer, not before it: what the parent's
                    # own refusals leave, no recording (a run that never ran loses nothing)
                    self._recorder.discard()
                    self.recording_path = None
                else:
                    self._recorder.close()
                    if self._recorder.events_written == 0:
                        self.recording_path = None
            self._pending.clear()  # ended before it started: nothing ran, nothing to keep
            self._done.set()
            self.queue.put(None)

    def _refused_before_its_first_step(self, end: EndEvent) -> bool:
        """The trainer refused its configuration (:func:`is_configuration_error`: a
        ``--model`` whose function returns no model, ...; exit 2) before its first
        step: nothing was measured, and the command exits 2 as for bad input."""
        return (
            end.status == "failed"
            and is_configuration_error(self)
            and not any(isinstance(e, StepEvent) for e in self._events)
        )

    def _synthesize_end(self) -> EndEvent:
        code = self.returncode
        how = "did not start" if code is None else describe_exit(code)
        steps = sum(1 for e in self._events if isinstance(e, StepEvent))
        status: Literal["stopped", "failed", "lost"]
        if self._stop_requested:
            status = "stopped"
        elif self.error is not None:
            status = "failed"
        else:
            status = "lost"
            tail = "\n".join(self._tail)
            error = ErrorEvent(
                t=time.time(),
                message=f"the trainer process {how} without reporting an end"
                + (
                    f"; its last output: {last}"
                    if (last := self._last_stderr or (self._tail and self._tail[-1]))
                    else ""
                ),
                traceback=tail or None,
                source="gpuscale",
            )
            self.error = error
            self._events.append(error)
            self._write(error)
            self.queue.put(error)
        return EndEvent(
            t=time.time(), status=status, steps=steps, duration_s=time.time() - self._started_at
        )

    def _summarize(self) -> dict[str, Any] | None:
        try:
            return summary_document(summarize(self._events))
        except Exception as exc:  # the run's events are kept even if the analysis trips
            self._tail.append(f"summary failed: {exc}")
            return None


def is_configuration_error(run: Any) -> bool:
    """The run failed on its configuration, found by the trainer itself (a
    ``--model`` module without that function, ...): the trainer exits with
    :data:`~gpuscale.errors.EXIT_USAGE` for a :class:`GpuscaleError`, and the
    command exits with it too, as for the errors the parent finds first."""
    return (
        getattr(run, "error", None) is not None and getattr(run, "returncode", None) == EXIT_USAGE
    )
