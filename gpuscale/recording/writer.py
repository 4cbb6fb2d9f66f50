"""Write a run's events to disk as they happen, losing as little as possible.

Each event becomes one line of JSON written with a single ``write`` system call
straight to the file (no user-space buffer), so a process killed with SIGKILL
loses at most the line being written. Plain recordings are opened with
``O_DSYNC`` (``durable=True``, the default): each ``write`` returns once its line
is on stable storage, so a power cut too loses at most the line being written.
That costs about 0.2 ms per line on an ordinary disk (measured here: 207 us),
about 0.5% of one thread at the default 2 Hz sampling of 8 GPUs, paid by the
gpuscale process that records, never by the trainer. With ``durable=False`` (or
where ``O_DSYNC`` does not exist) the file is ``fsync``-ed at most once per
:data:`FSYNC_INTERVAL_S` instead, and a power cut loses at most that much.

Compressed recordings (a name ending in ``.gz``) go through one gzip stream
that is sync-flushed (``Z_SYNC_FLUSH``: every byte so far becomes decodable) at
most once per :data:`GZIP_FLUSH_INTERVAL_S` and at close; a crash loses at most
the events of that last interval. Flushing every line would cost compression
(each flush ends a deflate block) for little gain.

Problems never stop the run: an unwritable path, a full disk, or any other
``OSError`` is reported once through ``on_problem(message)`` and the recorder
becomes a no-op. An event that cannot be stored in a readable form (a NaN in a
required number, time going backwards, an event after the end) is replaced by a
warning line saying what was dropped, so the file always reads back.
"""

from __future__ import annotations

import errno
import os
import re
import sys
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import msgspec

from gpuscale.events.schema import EndEvent, Event, LogEvent, StartEvent
from gpuscale.recording.format import TIME_TOLERANCE_S

FSYNC_INTERVAL_S = 1.0
"""Longest time between two ``fsync`` calls (what a power cut can lose)."""
GZIP_FLUSH_INTERVAL_S = 1.0
"""Longest time between two gzip sync flushes (what a crash can lose in a .gz file)."""

MAX_HELD_EVENTS = 100_000
"""Events kept in memory while waiting for the start event (see ``write``)."""

_os_write = os.write
_os_fsync = os.fsync


def _enc_hook(obj: Any) -> Any:
    """Store what JSON cannot hold natively: numpy scalars and arrays as numbers
    and lists, anything else as its ``str``. Only reached from free-form fields
    (``config``, ``summary``) or values of the wrong Python type."""
    for attribute in ("item", "tolist"):
        method = getattr(obj, attribute, None)
        if callable(method):
            try:
                return method()
            except Exception:  # noqa: BLE001 - fall back to str below
                pass
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    return str(obj)


def _default_problem(message: str) -> None:
    print(f"gpuscale: warning: {message}", file=sys.stderr)


class Recorder:
    """Append a run's events to ``path`` (created with its parent folders, never
    overwriting an existing file).

    ``durable`` (plain files): every line is on stable storage before ``write``
    returns (``O_DSYNC``; see the module docstring for the cost); ``False`` fsyncs
    once a second instead. Compressed files always flush once a second.

    ``rename_if_taken``: when ``path`` exists (another run took the same default
    name in the same second), use ``<stem>-2``, ``-3``, ... instead of giving up;
    ``self.path`` is the name actually used. Without it an existing file is a
    problem (an explicit ``--record PATH`` never overwrites anything).

    ``write(event)`` stores one event (events that come before the start event
    are held and stored right after it); ``close()`` finishes the file (and
    removes it if no event was ever written). ``on_problem(message)`` is called at most
    once, from the thread that hit the problem; afterwards every call is a no-op.
    Thread-safe."""

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        on_problem: Callable[[str], None] | None = None,
        rename_if_taken: bool = False,
        durable: bool = True,
    ):
        self.path = Path(path)
        self._rename_if_taken = rename_if_taken
        self.on_problem = on_problem or _default_problem
        self.events_written = 0
        """Events stored so far (dropped ones excluded)."""
        self.problem: str | None = None
        """The message reported through ``on_problem``, if any."""
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._gzip = self.path.name.endswith(".gz")
        self._sync_each_line = durable and not self._gzip and hasattr(os, "O_DSYNC")
        """Every line on stable storage before ``write`` returns (``O_DSYNC``)."""
        self._compressor = None
        self._encoder = msgspec.json.Encoder(enc_hook=_enc_hook)
        self._decoder = msgspec.json.Decoder(Event)
        self._last_t: dict[int, float] = {}
        self._started = False
        self._ended = False
        self._dropped = 0
        self._last_fsync = time.monotonic()
        self._last_gzip_flush = self._last_fsync
        self._created = False
        self._held: list[Event] = []
        self._open()

    # -- public ------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """``True`` while events are being stored (no problem, not closed)."""
        return self._fd is not None

    def write(self, event: Event) -> None:
        """Store one event as one line; returns once the line is in the file.

        Events written before the start event are held (up to
        :data:`MAX_HELD_EVENTS`) and stored right after it: a recording always
        begins with its start event."""
        with self._lock:
            if self._fd is None:
                return
            if not self._started and type(event) is not StartEvent:
                if len(self._held) >= MAX_HELD_EVENTS:
                    self._give_up(
                        f"recording stopped: {MAX_HELD_EVENTS} events arrived before the run's "
                        "start event; the run goes on without recording"
                    )
                    return
                self._held.append(event)
                return
            self._store(event)
            if type(event) is StartEvent and self._started:
                held, self._held = self._held, []
                for early in held:
                    if self._fd is None:
                        return
                    self._store(early)

    def _store(self, event: Event) -> None:
        line = self._line(event)
        if line is None:
            return
        data = line + b"\n"
        try:
            if self._compressor is not None:
                data = self._compressor.compress(data)
                now = time.monotonic()
                if now - self._last_gzip_flush >= GZIP_FLUSH_INTERVAL_S:
                    data += self._compressor.flush(zlib.Z_SYNC_FLUSH)
                    self._last_gzip_flush = now
            if data:
                self._write_all(data)
            now = time.monotonic()
            if not self._sync_each_line and now - self._last_fsync >= FSYNC_INTERVAL_S:
                _os_fsync(self._fd)
                self._last_fsync = now
        except OSError as exc:
            self._fail(exc)
            return
        self.events_written += 1

    def close(self) -> None:
        """Finish the file: flush, fsync, close. Idempotent. A file that holds no
        event is removed (a run that died before its start event leaves nothing)."""
        with self._lock:
            if self._fd is None:
                return
            if self._held:
                held = len(self._held)
                self._held = []
                self._give_up(
                    f"nothing recorded: the run ended before its start event ({held} "
                    f"earlier event{'s' if held != 1 else ''} not saved)"
                )
                return
            try:
                if self._compressor is not None:
                    self._write_all(self._compressor.flush(zlib.Z_FINISH))
                _os_fsync(self._fd)
            except OSError as exc:
                self._fail(exc)
                return
            fd, self._fd = self._fd, None
            try:
                os.close(fd)
            except OSError:
                pass
            self._remove_if_empty()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "recording" if self.active else ("failed" if self.problem else "closed")
        return f"Recorder({str(self.path)!r}, {state}, {self.events_written} events)"

    # -- internals ---------------------------------------------------------------

    def _open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
            if self._sync_each_line:
                flags |= os.O_DSYNC
            for _attempt in range(1000):
                try:
                    self._fd = os.open(self.path, flags, 0o644)
                    break
                except FileExistsError:
                    if not self._rename_if_taken:
                        raise
                    self.path = next_free_name(self.path)
            else:
                raise FileExistsError(errno.EEXIST, "every numbered name is taken", self.path)
            self._created = True
        except OSError as exc:
            self._fail(exc)
            return
        if self._gzip:
            self._compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = _os_write(self._fd, view)
            if written <= 0:
                raise OSError(errno.EIO, "write returned 0")
            view = view[written:]

    def _fail(self, exc: OSError) -> None:
        """Report ``exc`` once and stop recording."""
        self._give_up(_describe(exc, self.path, self.events_written))

    def _give_up(self, message: str) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass
        self._remove_if_empty()
        if self.problem is not None:
            return
        self.problem = message
        self.on_problem(message)

    def _remove_if_empty(self) -> None:
        """Remove the file this recorder created if no event made it in."""
        if self._created and self.events_written == 0:
            try:
                self.path.unlink()
            except OSError:
                pass

    def _line(self, event: Event) -> bytes | None:
        """The event's line, or a warning line in its place when it cannot be
        stored readably, or ``None`` to drop it silently (never for a start)."""
        reason = self._order_problem(event)
        line = None
        if reason is None:
            try:
                if type(event) is StartEvent:
                    line = self._start_line(event)
                else:
                    line = self._encoder.encode(event)
                self._decoder.decode(line)  # what cannot be read back is not written
            except (
                msgspec.MsgspecError,
                TypeError,
                ValueError,
                OverflowError,
                RecursionError,
            ) as exc:
                reason = f"it cannot be stored readably ({exc})"
                line = None
        if line is not None:
            self._accept(event)
            return line
        if not self._started:
            self._give_up(
                f"recording stopped: the run's start event cannot be stored ({reason}); "
                "the run goes on without recording"
            )
            return None
        if self._ended:
            return None
        self._dropped += 1
        worker = getattr(event, "worker", 0)
        if not isinstance(worker, int):
            worker = 0
        t = self._last_t.get(worker, self._last_t.get(0, 0.0))
        kind = getattr(type(event), "__struct_config__", None)
        kind = kind.tag if kind is not None else type(event).__name__
        note = LogEvent(
            t=t,
            worker=worker,
            source="recorder",
            level="warning",
            message=f"dropped a {kind!r} event: {reason}",
        )
        return self._encoder.encode(note)

    def _order_problem(self, event: Event) -> str | None:
        if not self._started:
            return None if type(event) is StartEvent else "a recording starts with a start event"
        if type(event) is StartEvent:
            return "a second start event"
        if self._ended:
            return "an event after the end event"
        if type(event) is EndEvent:
            return None  # placed last by position; its t may precede late samples
        t = getattr(event, "t", None)
        worker = getattr(event, "worker", 0)
        previous = self._last_t.get(worker)
        if isinstance(t, (int, float)) and previous is not None and t < previous - TIME_TOLERANCE_S:
            return f"its time is {previous - t:.3g} s before the previous event's"
        return None

    def _accept(self, event: Event) -> None:
        cls = type(event)
        if cls is StartEvent:
            self._started = True
            return
        if cls is EndEvent:
            self._ended = True
        previous = self._last_t.get(event.worker)
        if previous is None or event.t > previous:
            self._last_t[event.worker] = event.t

    def _start_line(self, event: StartEvent) -> bytes:
        """The start event with its ``schema`` written out even though it equals
        the default (which the schema's ``omit_defaults`` would drop): a future
        reader must see which version wrote the file."""
        fields = msgspec.to_builtins(event, enc_hook=_enc_hook)
        ordered = {"kind": fields.pop("kind", "start"), "schema": event.schema}
        fields.pop("schema", None)
        ordered.update(fields)
        return self._encoder.encode(ordered)


_NUMBERED = re.compile(r"^(.*?)(?:-(\d+))?(\.ndjson(?:\.gz)?|\.[^.]*)?$")


def next_free_name(path: Path) -> Path:
    """The next numbered name after ``path``: ``run.ndjson`` -> ``run-2.ndjson``,
    ``run-2.ndjson`` -> ``run-3.ndjson`` (the numbering :func:`default_path` uses)."""
    match = _NUMBERED.match(path.name)
    assert match is not None  # the pattern matches every name
    stem, number, suffix = match.group(1), match.group(2), match.group(3) or ""
    return path.with_name(f"{stem}-{int(number) + 1 if number else 2}{suffix}")


def _describe(exc: OSError, path: Path, saved: int) -> str:
    """One line for the user: what happened, where, and what it means for the run."""
    saved_text = f"{saved} event{'s' if saved != 1 else ''} were saved" if saved else ""
    code = exc.errno
    if code in (errno.ENOSPC, errno.EDQUOT if hasattr(errno, "EDQUOT") else -1):
        what = f"the disk holding {path} is full"
    elif code == errno.EEXIST:
        what = f"{path} already exists (gpuscale never overwrites a recording; choose another --record PATH)"
    elif code in (errno.EACCES, errno.EPERM, errno.EROFS):
        what = f"no permission to write {path} (choose another place with --record PATH)"
    elif code in (errno.ENOTDIR, errno.EISDIR, errno.ENOENT):
        what = (
            f"cannot create {path}: {exc.strerror or exc} (choose another place with --record PATH)"
        )
    else:
        what = f"cannot write {path}: {exc.strerror or exc}"
    tail = f"; {saved_text}" if saved_text else ""
    return f"recording stopped: {what}{tail}; the run goes on without recording"
