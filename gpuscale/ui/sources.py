"""Event sources for the dashboard: a live run or a recording, one interface.

The dashboard never asks where events came from: it calls :meth:`EventSource.read`
from a background thread and folds what it gets into its model. A replay also
answers the transport controls (pause, seek, speed, jump to the end); a live run
only starts and stops. No Textual import here.
"""

from __future__ import annotations

import bisect
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gpuscale.analysis.script_runs import count_chosen
from gpuscale.errors import GpuscaleError
from gpuscale.events.schema import EndEvent, Event, StartEvent
from gpuscale.formatting import plural

MAX_BATCH = 20_000
"""Most events handed over in one read, so a jump through a long recording
still lets the screen redraw between batches."""
STOP_WAIT_S = 6.0
"""How long a second :meth:`LiveSource.stop` waits for the run the first one stops."""

SPEEDS: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
"""The replay speeds `+` and `-` step through (run seconds per wall second)."""


@dataclass
class Batch:
    """Events to fold into the model; ``reset`` means forget everything first."""

    events: list[Event]
    reset: bool = False


@dataclass
class ReplayStatus:
    """Where a replay stands, in run seconds from the start event."""

    position_s: float
    duration_s: float
    speed: float
    paused: bool
    at_end: bool


@dataclass
class SourceInfo:
    kind: Literal["live", "replay", "memory"]
    label: str
    """What the header shows: the recording path (live runs record by default)."""
    warnings: list[str] = field(default_factory=list)
    waiting: str | None = None
    """What the header says before the run's start event, when more is known than
    "waiting for the run to start" (a script's name, how long until it is shown)."""
    still_running: bool = False
    """A recording with no end event whose writer is alive on this host: the run is
    in progress (:func:`gpuscale.recording.liveness.writer_alive`), not interrupted."""


class EventSource:
    """Base interface. Subclasses implement :meth:`read`; the rest is optional."""

    info: SourceInfo

    def start(self) -> None:
        """Begin producing events (a live run starts its trainer here)."""

    def read(self, timeout_s: float) -> Batch | None:
        """The next events, waiting at most ``timeout_s``; ``None`` when none came."""
        raise NotImplementedError

    @property
    def finished(self) -> bool:
        """No further events will come (until a replay seeks back)."""
        return False

    def stop(self) -> None:
        """Stop producing (a live run stops its trainer and finalizes the recording).
        Idempotent."""

    def interrupt(self) -> None:
        """Stop as the user asked by hand (``q``, Ctrl-C): :meth:`stop`, unless the
        source has a gentler way (a live script is sent Ctrl-C first)."""
        self.stop()

    def replay_status(self) -> ReplayStatus | None:
        """Transport state for a replay; ``None`` for a live run."""
        return None


# -- replay ------------------------------------------------------------------------


def load_recording(path: Path) -> tuple[list[Event], list[str]]:
    """All events of a recording and the reader's warnings.

    Raises :class:`GpuscaleError` (exit 2) for a file that cannot be used at all.
    """
    from gpuscale.recording.reader import load_run

    run = load_run(path)
    events: list[Event] = list(run.events)
    if not events or not isinstance(events[0], StartEvent):
        # (a file that begins with gpuscale's provisional start keeps it first: the
        # replay's clock starts at the launch, and the run's own start, which
        # supersedes it, plays where it came)
        events.insert(0, run.start)
    if run.end is not None and events[-1] is not run.end:
        events.append(run.end)
    return events, list(run.warnings)


class ReplaySource(EventSource):
    """Plays a recording back at ``speed`` run seconds per wall second.

    ``clock`` is injectable so tests can drive time by hand.
    """

    def __init__(
        self,
        path: Path | str,
        *,
        speed: float = 1.0,
        end: bool = False,
        seek_step_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        events: list[Event] | None = None,
        warnings: Iterable[str] = (),
    ) -> None:
        self.path = Path(path)
        read_from_file = events is None
        if events is None:
            events, found = load_recording(self.path)
            warnings = [*warnings, *found]
        if not events or not isinstance(events[0], StartEvent):
            raise GpuscaleError(f"{self.path}: not a gpuscale recording (no start event)")
        if speed <= 0:
            raise GpuscaleError(f"--speed must be positive, got {speed}")
        self.info = SourceInfo("replay", str(self.path), list(warnings))
        if not isinstance(events[-1], EndEvent):
            from gpuscale.recording.liveness import writer_alive

            self.info.still_running = writer_alive(e for e in events if isinstance(e, StartEvent))
        if not isinstance(events[-1], EndEvent) and not read_from_file:
            # (the reader of a file has said so already: one warning, not two)
            self.info.warnings.append(
                f"{self.path.name} has no end event: the run was interrupted "
                "(everything recorded up to then is shown)"
            )
        self._events = events
        t0 = events[0].t
        # Offsets in run seconds; a recording is in time order, but never trust it blindly.
        offsets: list[float] = []
        latest = 0.0
        for event in events:
            latest = max(latest, event.t - t0)
            offsets.append(latest)
        self._offsets = offsets
        self.duration_s = offsets[-1]
        self.seek_step_s = seek_step_s
        self._clock = clock
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._speed = speed
        self._paused = False
        self._anchor_pos_s = 0.0
        self._anchor_clock = clock()
        self._cursor = 0  # events handed over so far
        self._need_reset = False
        if end:
            self.jump_to_end()

    @property
    def events(self) -> list[Event]:
        """Every event of the recording, in order (do not modify)."""
        return self._events

    # transport ------------------------------------------------------------------
    def _position_locked(self) -> float:
        pos = self._anchor_pos_s
        if not self._paused:
            pos += (self._clock() - self._anchor_clock) * self._speed
        return min(max(pos, 0.0), self.duration_s)

    def _set_position_locked(self, pos_s: float) -> None:
        pos_s = min(max(pos_s, 0.0), self.duration_s)
        self._anchor_pos_s = pos_s
        self._anchor_clock = self._clock()
        target = bisect.bisect_right(self._offsets, pos_s)
        if target < self._cursor:
            self._cursor = 0
            self._need_reset = True
        self._wake.set()

    @property
    def position_s(self) -> float:
        with self._lock:
            return self._position_locked()

    def toggle_pause(self) -> bool:
        """Pause or resume; returns True when now paused."""
        with self._lock:
            self._set_position_locked(self._position_locked())
            self._paused = not self._paused
            return self._paused

    def seek(self, delta_s: float) -> None:
        """Move the replay position by ``delta_s`` run seconds (negative: back)."""
        with self._lock:
            self._set_position_locked(self._position_locked() + delta_s)

    def seek_to(self, position_s: float) -> None:
        with self._lock:
            self._set_position_locked(position_s)

    def jump_to_end(self) -> None:
        """Show the final state at once."""
        with self._lock:
            self._set_position_locked(self.duration_s)

    def change_speed(self, direction: int) -> float:
        """One step faster (+1) or slower (-1) through :data:`SPEEDS`; returns the speed."""
        with self._lock:
            self._set_position_locked(self._position_locked())
            if direction > 0:
                faster = [s for s in SPEEDS if s > self._speed]
                self._speed = faster[0] if faster else self._speed
            else:
                slower = [s for s in SPEEDS if s < self._speed]
                self._speed = slower[-1] if slower else self._speed
            return self._speed

    def replay_status(self) -> ReplayStatus:
        with self._lock:
            pos = self._position_locked()
            return ReplayStatus(
                position_s=pos,
                duration_s=self.duration_s,
                speed=self._speed,
                paused=self._paused,
                at_end=self._cursor >= len(self._events),
            )

    # reading --------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        with self._lock:
            return self._cursor >= len(self._events)

    def read(self, timeout_s: float) -> Batch | None:
        with self._lock:
            batch = self._take_locked()
            if batch is not None:
                return batch
            wait = timeout_s
            if not self._paused and self._cursor < len(self._events):
                due = (self._offsets[self._cursor] - self._position_locked()) / self._speed
                wait = min(timeout_s, max(due, 0.0))
            self._wake.clear()
        self._wake.wait(wait)
        with self._lock:
            return self._take_locked()

    def _take_locked(self) -> Batch | None:
        target = bisect.bisect_right(self._offsets, self._position_locked())
        reset = self._need_reset
        if target <= self._cursor and not reset:
            return None
        stop = min(target, self._cursor + MAX_BATCH)
        events = self._events[self._cursor : stop]
        self._cursor = stop
        self._need_reset = False
        return Batch(events, reset=reset)


# -- live and in-memory ---------------------------------------------------------


class QueueSource(EventSource):
    """Events pushed by anyone (tests, benchmarks, a producer thread) via :meth:`put`."""

    def __init__(self, label: str = "(in memory)") -> None:
        self.info = SourceInfo("memory", label)
        self._queue: queue.Queue[Event] = queue.Queue()
        self._ended = False
        self.started = False
        self.stopped = False

    def put(self, event: Event) -> None:
        self._queue.put(event)

    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        self.stopped = True

    @property
    def finished(self) -> bool:
        return self._ended and self._queue.empty()

    def read(self, timeout_s: float) -> Batch | None:
        try:
            first = self._queue.get(timeout=timeout_s)
        except queue.Empty:
            return None
        events = [first]
        while len(events) < MAX_BATCH:
            try:
                events.append(self._queue.get_nowait())
            except queue.Empty:
                break
        if any(isinstance(e, EndEvent) for e in events):
            self._ended = True
        return Batch(events)


def waiting_text(run: Any) -> str | None:
    """The header's line for a script run before any start: its name, and when its
    output shows (its callback's first step or the made-up start after
    ``start_timeout_s``; its telemetry, with a provisional start, from its first
    sample: see gpuscale.live.script_run)."""
    timeout_s = getattr(run, "start_timeout_s", None)
    name = getattr(run, "name", None)
    if timeout_s is not None and name:
        return f"{name}: starting (its output shows with its first step, or in {timeout_s:g} s)"
    return asked_text(getattr(run, "asked", None))


_ASKED_DEVICES = {"gpu": "GPU", "cpu-logical": "CPU logical device", "cpu": "CPU"}


def asked_text(asked: StartEvent | None) -> str | None:
    """``starting mlp on 2 GPUs (as asked)…``: what a built-in run was asked for (its
    provisional start, :attr:`gpuscale.live.base.RunBase.asked`), said while
    TensorFlow starts, with ``the default`` (or ``all GPUs found``) in place of
    ``as asked`` where no count was given; ``None`` when nothing was asked yet."""
    if not isinstance(asked, StartEvent) or not asked.model:
        return None
    devices = plural(max(1, asked.num_replicas), _ASKED_DEVICES.get(asked.platform, "device"))
    workers = f", {asked.num_workers} workers" if asked.num_workers > 1 else ""
    return f"starting {asked.model} on {devices}{workers} ({count_chosen(asked)})…"


class LiveSource(EventSource):
    """A live run: wraps :class:`gpuscale.live.trainer_run.LiveRun` (or anything with its
    ``start()``, ``queue`` of events ending with ``None``, ``drain()``, ``stop()``
    and ``recording_path``)."""

    def __init__(self, run: Any) -> None:
        self.run = run
        self._ended = False
        self._stopped = False
        self._stopped_by_hand = False
        self._stop_lock = threading.Lock()
        self._had_path = False
        self.end: EndEvent | None = None
        """The run's EndEvent once it arrived."""
        self.start_error: Exception | None = None
        """Why the run could not start, where it could not (:meth:`start` raised it)."""
        self.info = SourceInfo("live", "", waiting=waiting_text(run))
        self._update_label()

    def _update_label(self) -> None:
        """The recording's path as the run has it now: it is renamed once the run's
        own start arrives, and dropped when nothing was written."""
        path = getattr(self.run, "recording_path", None)
        chief = getattr(self.run, "forwarding_to", None)
        if chief:  # a worker of a multi-host run: its chief records the whole run
            self.info.label = f"by the chief ({chief})"
        elif path:
            self.info.label = str(path)
            self._had_path = True
        elif getattr(self.run, "record", getattr(self.run, "_record", "default")) is None:
            self.info.label = "off (--no-record)"
        elif self._had_path or self._ended:
            self.info.label = "none (nothing was recorded)"
        else:
            self.info.label = "(starts with the run)"

    def start(self) -> None:
        try:
            self.run.start()
        except Exception as exc:
            # the run never began (a script that cannot start): nothing will come, and
            # nothing was recorded; `watch` says why once the screen closes
            self.start_error = exc
            self._ended = True
            self._update_label()
            raise
        self.info.waiting = waiting_text(self.run)  # what was asked, once it began

    def read(self, timeout_s: float) -> Batch | None:
        if self.info.waiting is None:  # a sweep's count begins after the sweep does
            self.info.waiting = waiting_text(self.run)
        if self._ended:
            time.sleep(timeout_s)
            return None
        try:
            first = self.run.queue.get(timeout=timeout_s)
        except queue.Empty:
            return None
        if first is None:  # the run's end marker: nothing follows
            self.run.queue.put(None)
            self._ended = True
            self._update_label()
            return None
        events = [first, *self.run.drain(MAX_BATCH)]
        for event in events:
            if isinstance(event, EndEvent):
                self.end = event
        self._update_label()  # the recording is renamed once the run's own start arrives
        return Batch(events)

    @property
    def finished(self) -> bool:
        return self._ended

    def stop(self) -> None:
        """Stop the trainer cleanly (the run finalizes its recording); idempotent:
        a second call (from another thread) returns once the run is over too, and
        cuts short the wait of an :meth:`interrupt` under way (a stop signal came)."""
        self._stop(by_hand=False)

    def interrupt(self) -> None:
        """As :meth:`stop`, by hand (``q``, Ctrl-C): the run's own ``interrupt()`` where
        it has one (your script gets Ctrl-C first: its ``except KeyboardInterrupt`` runs,
        for :data:`~gpuscale.live.child.INTERRUPT_GRACE_S` at most)."""
        self._stop(by_hand=True)

    @property
    def interrupt_grace_s(self) -> float:
        """How long :meth:`interrupt` may wait for the run's program after its Ctrl-C."""
        return float(getattr(self.run, "interrupt_grace_s", 0.0) or 0.0)

    def _stop(self, by_hand: bool) -> None:
        with self._stop_lock:  # the dashboard's quit and a signal's watchdog call at once
            first = not self._stopped
            self._stopped = True
            if first:
                self._stopped_by_hand = by_hand
        if first:
            how = getattr(self.run, "interrupt", None) if by_hand else None
            (how if callable(how) else self.run.stop)()
            return
        hurry = None if by_hand else getattr(self.run, "hurry", None)
        if callable(hurry):
            hurry()
        wait = getattr(self.run, "wait", None)
        if callable(wait):
            # a second stop by hand waits as long as the first one's Ctrl-C may take
            # (a SIGINT's watchdog and `q` both call here: 6 s had cut the 10 s short)
            extra = self.interrupt_grace_s if by_hand and self._stopped_by_hand else 0.0
            wait(STOP_WAIT_S + extra)
