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
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from gpuscale.errors import GpuscaleError
from gpuscale.events.schema import EndEvent, ErrorEvent, Event, LogEvent, StartEvent
from gpuscale.events.transport import EventServer
from gpuscale.trainer.options import TrainConfig, to_json

STOP_GRACE_S = 4.0
"""How long :meth:`LiveRun.stop` waits after SIGTERM before SIGKILL."""
_AFTER_EXIT_S = 2.0
"""How long to wait, after the child exits, for its last events to arrive."""

# TensorFlow's C++ log lines: "I0000 00:00:1795289356.204669    7852 port.cc:153] ..."
_TF_LOG = re.compile(r"^([IWEF])\d{4} [\d:.]+\s+\d+ [^\]]+\] (.*)$")
_HARMLESS = (
    "failed call to cuInit",  # no GPU on this machine: expected, said by the CPU fallback note
    "Could not find cuda drivers",
    "All log messages before absl::InitializeLog",
    "oneDNN custom operations are on",
    "Unable to register cu",  # cuDNN/cuFFT/cuBLAS factory double registration
    "computation placer already registered",
)


def classify_line(line: str, stream: str) -> tuple[str, str]:
    """``(level, message)`` for one line the trainer printed: TensorFlow's C++
    logs keep their level (known start-up noise becomes ``debug``), other stderr
    lines are warnings, stdout lines info."""
    text = line.rstrip("\r\n")
    if any(h in text for h in _HARMLESS):
        return "debug", text
    match = _TF_LOG.match(text)
    if match:
        letter, message = match.groups()
        return {"I": "debug", "W": "warning", "E": "error", "F": "error"}[letter], message
    if stream == "stderr":
        return ("warning" if text.strip() else "debug"), text
    return "info", text


class LiveRun:
    """One training run in a child process, as a stream of events.

    ``record``: ``"default"`` (a new file in the runs folder, named once the
    trainer says what runs where), a path, or ``None`` (not recorded).
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
        self.config = config
        self.record = record
        self.sample_interval_s = sample_interval_s
        self._nvml = nvml
        self._use_sampler = sampler
        self._python = python or sys.executable
        self._extra_env = env or {}
        self._on_problem = on_problem
        self.queue: queue.Queue[Event | None] = queue.Queue()
        self.start_event: StartEvent | None = None
        self.end: EndEvent | None = None
        """The final EndEvent (with ``summary``) once the run is over."""
        self.error: ErrorEvent | None = None
        self.returncode: int | None = None
        self.recording_path: Path | None = None
        self.recording_problem: str | None = None
        self.telemetry_status: str | None = None
        self._events: list[Event] = []
        self._pending: list[Event] = []
        self._recorder = None
        self._lock = threading.RLock()
        self._finish_lock = threading.Lock()
        self._finishing = False
        self._child_end: EndEvent | None = None
        self._disconnected = threading.Event()
        self._done = threading.Event()
        self._stop_requested = False
        self._proc: subprocess.Popen | None = None
        self._server: EventServer | None = None
        self._sampler = None
        self._readers: list[threading.Thread] = []
        self._tail: collections.deque[str] = collections.deque(maxlen=12)
        self._started_at = time.time()

    # -- life cycle ----------------------------------------------------------------
    def start(self) -> LiveRun:
        """Start the server, the trainer process and the sampler; returns at once."""
        self._started_at = time.time()
        self._server = EventServer(self._on_event, on_disconnect=self._on_disconnect)
        env = {
            **os.environ,
            **self._extra_env,
            **self._server.env(),
            "PYTHONUNBUFFERED": "1",
            "GPUSCALE_PARENT_PIPE": "1",
        }
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        try:
            self._proc = subprocess.Popen(
                [self._python, "-m", "gpuscale.trainer", "--config", to_json(self.config)],
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
            self._server.close()
            raise GpuscaleError(f"cannot start the trainer process: {exc}", exit_code=1) from exc
        for stream_name in ("stdout", "stderr"):
            thread = threading.Thread(
                target=self._read_stream,
                args=(getattr(self._proc, stream_name), stream_name),
                name=f"gpuscale-trainer-{stream_name}",
                daemon=True,
            )
            thread.start()
            self._readers.append(thread)
        self._start_sampler()
        threading.Thread(target=self._watch, name="gpuscale-trainer-watch", daemon=True).start()
        return self

    def _start_sampler(self) -> None:
        if not self._use_sampler:
            return
        try:
            from gpuscale.telemetry.sampler import Sampler
        except ImportError:  # telemetry not installed in this tree: run without it
            return
        try:
            self._sampler = Sampler(
                self._on_event,
                interval_s=self.sample_interval_s,
                pids=self.pids,
                gpu_indices=self.config.gpus,
                nvml=self._nvml,
            )
            self._sampler.start()
            self.telemetry_status = self._sampler.status
        except GpuscaleError:
            raise
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
        after ``grace_s``; return once the run is over (final EndEvent queued)."""
        self._stop_requested = True
        proc = self._proc
        if proc is not None and proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self._notice(f"the trainer did not stop within {grace_s:g} s; killed it", "warning")
                self._signal(signal.SIGKILL)
                proc.wait()
        if proc is None:
            self._finish()
        self._done.wait(timeout=_AFTER_EXIT_S + 1.0)

    def _signal(self, signum: int) -> None:
        proc = self._proc
        if proc is None:
            return
        try:
            os.killpg(
                proc.pid, signum
            )  # its own session: the group is the trainer and its children
        except (ProcessLookupError, PermissionError):
            try:
                proc.send_signal(signum)
            except ProcessLookupError:
                pass

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run is over; False if ``timeout`` passed first."""
        return self._done.wait(timeout)

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def close(self) -> None:
        """Stop the run if it is still going (idempotent)."""
        if not self._done.is_set():
            self.stop()

    def __enter__(self) -> LiveRun:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- consuming -----------------------------------------------------------------
    def events(self, timeout: float | None = None) -> Iterator[Event]:
        """Yield events until the run is over (after its final EndEvent). With a
        ``timeout``, also return when no event came for that many seconds (call
        again to go on)."""
        while True:
            try:
                event = self.queue.get(timeout=timeout)
            except queue.Empty:
                return
            if event is None:
                self.queue.put(None)  # later calls end at once too
                return
            yield event

    def drain(self, max_events: int = 10_000) -> list[Event]:
        """The events queued now, without waiting (the end marker left in place)."""
        out: list[Event] = []
        while len(out) < max_events:
            try:
                event = self.queue.get_nowait()
            except queue.Empty:
                break
            if event is None:
                self.queue.put(None)
                break
            out.append(event)
        return out

    # -- sources -------------------------------------------------------------------
    def _notice(self, message: str, level: str = "info") -> None:
        self._on_event(LogEvent(t=time.time(), message=message, source="gpuscale", level=level))

    def _read_stream(self, stream, name: str) -> None:
        try:
            for line in stream:
                if not line.strip():
                    continue
                level, message = classify_line(line, name)
                if level != "debug":
                    self._tail.append(message)
                self._on_event(
                    LogEvent(t=time.time(), message=message, source="trainer", level=level)
                )
        except (OSError, ValueError):
            pass

    def _on_disconnect(self, worker: int, saw_end: bool) -> None:
        self._disconnected.set()

    def _on_event(self, event: Event) -> None:
        with self._lock:
            if self._done.is_set():
                return
            if isinstance(event, EndEvent):
                self._child_end = event  # the final one, with the summary, comes from _finish
                return
            if isinstance(event, StartEvent):
                if self.start_event is not None:
                    return
                self.start_event = event
                if self._proc is not None and self._proc.pid not in event.pids:
                    event.pids = [*event.pids, self._proc.pid]
                self._open_recorder(event)
            elif isinstance(event, ErrorEvent) and self.error is None:
                self.error = event
            self._events.append(event)
            self._write(event)
            self.queue.put(event)

    # -- recording -----------------------------------------------------------------
    def _open_recorder(self, start: StartEvent) -> None:
        if self.record is None:
            return
        try:
            from gpuscale.recording.store import default_path
            from gpuscale.recording.writer import Recorder
        except ImportError:
            self.recording_problem = "recording is not available in this installation"
            return
        try:
            path = (
                default_path(start.model or self.config.model, start.num_replicas, start.platform)
                if self.record == "default"
                else Path(self.record)
            )
        except (OSError, GpuscaleError) as exc:
            self.recording_problem = f"cannot choose a recording file: {exc}"
            if self._on_problem is not None:
                self._on_problem(self.recording_problem)
            return

        def problem(message: str) -> None:
            self.recording_problem = message
            if self._on_problem is not None:
                self._on_problem(message)

        self._recorder = Recorder(path, on_problem=problem)
        self.recording_path = path
        self._recorder.write(start)
        for event in self._pending:
            self._recorder.write(event)
        self._pending.clear()

    def _write(self, event: Event) -> None:
        if self.record is None or isinstance(event, StartEvent):
            return
        if self._recorder is None:
            self._pending.append(event)
        else:
            self._recorder.write(event)

    # -- the end ---------------------------------------------------------------------
    def _watch(self) -> None:
        proc = self._proc
        assert proc is not None
        self.returncode = proc.wait()
        for thread in self._readers:
            thread.join(timeout=_AFTER_EXIT_S)
        if self.start_event is not None or self._events:
            self._disconnected.wait(timeout=_AFTER_EXIT_S)
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
            end = self._child_end
            if end is None:
                end = self._synthesize_end()
            elif (
                self._stop_requested and end.status == "completed" and self.config.steps > end.steps
            ):
                end.status = "stopped"
            self._events.append(end)
            end.summary = self._summarize()
            self.end = end
            self._write(end)
            self.queue.put(end)
            if self._recorder is not None:
                self._recorder.close()
                if self._recorder.events_written == 0:
                    self.recording_path = None
            elif self._pending:  # ended before it started: nothing ran, nothing to keep
                self._pending.clear()
            self._done.set()
            self.queue.put(None)

    def _synthesize_end(self) -> EndEvent:
        code = self.returncode
        if code is None:
            how = "did not start"
        elif code < 0:
            how = f"was killed by {signal.Signals(-code).name}"
        else:
            how = f"exited with status {code}"
        steps = sum(1 for e in self._events if type(e).__name__ == "StepEvent")
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
                + (f"; its last output: {self._tail[-1]}" if self._tail else ""),
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
            import msgspec

            from gpuscale.analysis.summary import summarize
        except ImportError:
            return None
        try:
            return msgspec.to_builtins(summarize(self._events))
        except Exception as exc:  # the run's events are kept even if the analysis trips
            self._tail.append(f"summary failed: {exc}")
            return None
