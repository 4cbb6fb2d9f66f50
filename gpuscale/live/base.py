"""What every live run shares (:class:`RunBase`): the consumer's queue, the life
cycle around ``start`` and ``stop``, the recorder and the telemetry sampler. The
trainer run (:mod:`gpuscale.live.trainer_run`) and a user's script
(:mod:`gpuscale.live.script_run`) build on it. No TensorFlow."""

from __future__ import annotations

import os
import queue
import re
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from gpuscale.errors import GpuscaleError
from gpuscale.events.schema import EndEvent, ErrorEvent, Event, StartEvent, SweepRef
from gpuscale.recording.store import default_path
from gpuscale.recording.writer import Recorder
from gpuscale.telemetry.sampler import Sampler


def passed_on_note(run: Any, by_hand: bool) -> str:
    """What a stop of ``run`` does first, said after ``stopping the script (Ctrl-C)``:
    ``: Ctrl-C passed on to it, SIGTERM if it is still running in 10 s`` where a stop
    by hand gives the program a grace (:attr:`RunBase.interrupt_grace_s`), else ``""``.
    One wording for ``run``, ``recommend`` and the dashboard."""
    grace_s = float(getattr(run, "interrupt_grace_s", 0.0) or 0.0) if by_hand else 0.0
    if grace_s <= 0:
        return ""
    return f": Ctrl-C passed on to it, SIGTERM if it is still running in {grace_s:g} s"


class RunBase:
    """What :class:`LiveRun` and :class:`gpuscale.live.script_run.ScriptRun` share: the
    consumer's queue (events, then ``None``), the life cycle around ``start`` and
    ``stop``, the recorder and the sampler."""

    record: Path | str | os.PathLike | None
    sample_interval_s: float

    def _init_run(self) -> None:
        self.queue: queue.Queue[Event | None] = queue.Queue()
        """Every event of the run, in order, for the consumer; ``None`` after the EndEvent."""
        self.start_event: StartEvent | None = None
        self.asked: StartEvent | None = None
        """The provisional start once the run began (what was asked: model, devices),
        until the run's own start says what runs where; what the header shows
        while it waits (:func:`gpuscale.ui.sources.waiting_text`)."""
        self.sweep_ref: SweepRef | None = None
        """The sweep this run is one count of (set before :meth:`start`): every start
        event of the run, provisional or its own, recorded or handed on, carries it."""
        self.end: EndEvent | None = None
        """The final EndEvent (with ``summary``) once the run is over."""
        self.error: ErrorEvent | None = None
        self.returncode: int | None = None
        self.stopped_by_script = False
        """The run ended ``stopped`` because the script itself said so (a custom loop's
        ``close("stopped")``, its own early stop): neither gpuscale nor a signal it saw
        cut it short, so nothing warns of a stop "not through gpuscale"; ``gpuscale
        run`` still exits 130 for it, as for any stopped run, and says why in a line."""
        self.recording_path: Path | None = None
        self.recording_problem: str | None = None
        self._recorder: Recorder | None = None
        self._sampler: Sampler | None = None
        self._done = threading.Event()

    # -- life cycle (start and stop are each run's own) --------------------------------
    def start(self) -> RunBase:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    interrupt_grace_s: float = 0.0
    """How long :meth:`interrupt` gives the program after passing Ctrl-C on to it
    before it stops it as :meth:`stop` does; 0: :meth:`interrupt` is :meth:`stop`."""

    def interrupt(self) -> None:
        """Stop the run as the user asked by hand (Ctrl-C in ``gpuscale run``, the
        dashboard's ``q``): :meth:`stop`, unless the run has a gentler way first (a
        user's script is sent Ctrl-C: :meth:`gpuscale.live.script_run.ScriptRun.interrupt`)."""
        self.stop()

    def hurry(self) -> None:
        """A stop signal to gpuscale (SIGTERM, SIGHUP) came while :meth:`interrupt`
        waits for the program: stop it now as :meth:`stop` does. Nothing here."""

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

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: object) -> None:
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

    # -- recording and telemetry ---------------------------------------------------------
    def _recording_problem(self, message: str) -> None:
        """Called once when recording becomes impossible (the run goes on)."""
        self.recording_problem = message

    def _open_recorder(self, start: StartEvent, model: str) -> None:
        """Open the recorder for a run that starts with ``start`` (``model`` names
        it when the start does not): a default name in the runs folder (the next
        free number when another run took it in the same second), or the given
        path (never overwritten)."""
        if self.record is None:
            return
        try:
            if self.record == "default":
                path = default_path(start.model or model, start.num_replicas, start.platform)
            else:
                path = Path(self.record)
        except (OSError, GpuscaleError) as exc:
            self._recording_problem(f"cannot choose a recording file: {exc}")
            return
        self._recorder = Recorder(
            path, on_problem=self._recording_problem, rename_if_taken=self.record == "default"
        )
        self.recording_path = self._recorder.path if self._recorder.active else None
        self._recorder_opened_at = time.time()

    def _begin_recording(self, provisional: StartEvent, model: str) -> None:
        """Write-ahead: open the recording when the run begins, with a provisional
        start, so every event is on disk within a flush interval even before the
        run's own start (see docs/recording-format.md)."""
        self._stamp_sweep(provisional)
        self.asked = provisional
        if self.record is None or self._recorder is not None:
            return
        self._open_recorder(provisional, model)
        if self._recorder is not None:
            self._recorder.write(provisional)

    def _record_start(self, start: StartEvent, model: str) -> None:
        """Record the run's own start: it supersedes the provisional one, and a
        default file name takes what the start says (model, devices)."""
        self._stamp_sweep(start)
        if self._recorder is None:
            self._open_recorder(start, model)
        elif self.record == "default" and self._recorder.active:
            try:
                better = default_path(
                    start.model or model,
                    start.num_replicas,
                    start.platform,
                    datetime.fromtimestamp(self._recorder_opened_at),
                )
            except (OSError, GpuscaleError, ValueError, OverflowError):
                better = None
            current = self._recorder.path
            if (
                better is not None
                and better.parent == current.parent
                and _unnumbered(better.name) != _unnumbered(current.name)
            ):
                self._recorder.rename(better)
                self.recording_path = self._recorder.path
        if self._recorder is not None:
            self._recorder.write(start)

    def _stamp_sweep(self, start: StartEvent) -> None:
        """Give ``start`` the run's sweep (in place: the same event goes on to the
        consumer); a start that names its own sweep keeps it."""
        if self.sweep_ref is not None and start.sweep is None:
            start.sweep = self.sweep_ref

    def _new_sampler(
        self,
        emit: Callable[[Event], None],
        pids: Callable[[], list[int]],
        *,
        nvml: Any = None,
        worker: int = 0,
        gpu_indices: list[int] | None = None,
    ) -> Sampler:
        """The run's sampler, built (its interval checked) before any process starts,
        so a refused interval leaves nothing running."""
        return Sampler(
            emit,
            interval_s=self.sample_interval_s,
            pids=pids,
            gpu_indices=gpu_indices,
            worker=worker,
            nvml=nvml,
        )


_NUMBER = re.compile(r"-\d+(?=\.ndjson(?:\.gz)?$)")


def _unnumbered(name: str) -> str:
    """A default recording name without the ``-2``, ``-3`` that makes it free."""
    return _NUMBER.sub("", name)
