"""Write a run's events to disk as they happen, losing as little as possible.

Events are encoded (and checked to read back) in the caller's thread and
appended to an in-memory batch; the batch goes to the file in one ``write``
system call at most :data:`FLUSH_INTERVAL_S` after its first event (a flusher
thread does it), at once when it holds :data:`MAX_BATCH_BYTES`, and at once
after a start or an end event. The file is ``fsync``-ed at most once per
:data:`FSYNC_INTERVAL_S` (and after the end event and at close). So:

* a gpuscale process killed with SIGKILL loses at most the events of the last
  :data:`FLUSH_INTERVAL_S` (the kernel keeps what was written);
* a power cut loses at most :data:`FSYNC_INTERVAL_S` + :data:`FLUSH_INTERVAL_S`;
* an end event is on disk (written and fsync-ed) when ``write`` returns.

This costs a few microseconds per event in the recording process (measured by
``benchmarks/recorder.py``), instead of one synchronous disk write per line.
Memory is bounded: a batch never holds more than :data:`MAX_BATCH_BYTES` (the
producer writes it out itself when the flusher is behind).

Compressed recordings (a name ending in ``.gz``) go through a gzip stream that
is sync-flushed (``Z_SYNC_FLUSH``: every byte so far becomes decodable) with each
batch, so the same loss window holds. A new gzip member (concatenated members are
one gzip file to every gzip reader) begins after the batch that brings the
current one to :data:`GZIP_MEMBER_BYTES` of text: damaged gzip data cannot be
read on past within a member, so a disk or a copy that garbles some bytes loses
the rest of one member, not the rest of the run (the reader reads on from the
next member: :func:`~gpuscale.recording.reader.gunzip_chunks`).

Problems never stop the run: an unwritable path, a full disk, or any other
``OSError`` is reported once through ``on_problem(message)`` and the recorder
becomes a no-op. An event that cannot be stored in a readable form (a NaN in a
required number, an event after the end) is replaced by a warning line saying
what was dropped, so the file always reads back. An event whose wall time steps
back (an NTP step, a VM resume) is kept, after a ``log`` marker with ``source:
"clock"`` (see :data:`~gpuscale.recording.format.CLOCK_SOURCE`).
"""

from __future__ import annotations

import atexit
import errno
import math
import os
import re
import sys
import threading
import time
import weakref
import zlib
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import msgspec

from gpuscale.events.schema import EndEvent, Event, LogEvent, StartEvent
from gpuscale.formatting import plural
from gpuscale.recording.format import CLOCK_SOURCE, TIME_TOLERANCE_S

FLUSH_INTERVAL_S = 0.2
"""Longest time an event waits in memory before its line is written to the file
(what a SIGKILL of the recording process can lose)."""
FSYNC_INTERVAL_S = 1.0
"""Longest time between two ``fsync`` calls while events come in (what a power cut
can lose, on top of :data:`FLUSH_INTERVAL_S`)."""
GZIP_FLUSH_INTERVAL_S = FLUSH_INTERVAL_S
"""A .gz recording is sync-flushed with every batch: the same loss window."""
GZIP_MEMBER_BYTES = 256 * 1024
"""Text (uncompressed) after which a .gz recording begins a new gzip member, at
the end of a batch. Measured on a simulated hour of events (8 GPUs, 10 steps a
second: 24 MB of text; 1 GPU, 2 steps a second: 4 MB): the file grows by 0.5%
(0.13% at 1 MiB, 2% at 64 KiB); what damage loses is at most one member, about
40 s of the busier run."""
MAX_BATCH_BYTES = 1 << 20
"""A batch this large is written at once, by the producer (bounded memory)."""

MAX_HELD_EVENTS = 100_000
"""Events kept in memory while waiting for the start event (see ``write``)."""

_open_recorders: weakref.WeakSet[Recorder] = weakref.WeakSet()


@atexit.register
def _flush_open_recorders() -> None:
    """A process that exits without closing its recorder (an exception out of the
    user's script) still writes what is batched."""
    for recorder in list(_open_recorders):
        try:
            recorder.flush(sync=True)
        except Exception:  # noqa: BLE001 - exiting anyway
            pass


_LEVELS = frozenset(("debug", "info", "warning", "error"))
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
    overwriting an existing file), in batches (see the module docstring for what
    a crash can lose).

    ``durable`` is accepted for compatibility: every recording is fsync-ed once a
    second (:data:`FSYNC_INTERVAL_S`) and after its end event.

    ``rename_if_taken``: when ``path`` exists (another run took the same default
    name in the same second), use ``<stem>-2``, ``-3``, ... instead of giving up;
    ``self.path`` is the name actually used. Without it an existing file is a
    problem (an explicit ``--record PATH`` never overwrites anything).

    ``write(event)`` stores one event. A recording begins with a start event: one
    with ``provisional=True`` (written when a run begins, before its own start is
    known) may be followed, once, by the real one, which supersedes it. Events
    that come before any start event are held (up to :data:`MAX_HELD_EVENTS`) and
    stored right after it. ``flush()`` writes what is batched now; ``close()``
    finishes the file (and removes it if no event was ever written).
    ``on_problem(message)`` is called at most once, from the thread that hit the
    problem; afterwards every call is a no-op. Thread-safe."""

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
        """Events in the file so far (batched ones and dropped ones excluded)."""
        self.problem: str | None = None
        """The message reported through ``on_problem``, if any."""
        self._lock = threading.Lock()
        """Guards the batch and the encoder state."""
        self._io_lock = threading.RLock()
        """Guards the file descriptor (taken inside ``_lock``, held while writing)."""
        self._fd: int | None = None
        self._gzip = self.path.name.endswith(".gz")
        self._compressor = None
        self._member_bytes = 0
        """Text in the current gzip member (see GZIP_MEMBER_BYTES)."""
        self._encoder = msgspec.json.Encoder(enc_hook=_enc_hook)
        self._decoder = msgspec.json.Decoder(Event)
        self._last_t: dict[int, float] = {}
        self._started = False
        self._provisional = False
        self._ended = False
        self._closing = False
        self._dropped = 0
        self._batch = bytearray()
        self._batch_events = 0
        self._batch_since: float | None = None
        self._unsynced = False
        self._last_fsync = time.monotonic()
        self._created = False
        self._held: list[Event] = []
        self._wake = threading.Event()
        self._flusher: threading.Thread | None = None
        self._open()

    # -- public ------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """``True`` while events are being stored (no problem, not closed)."""
        return self._fd is not None

    @property
    def on_disk(self) -> bool:
        """Whether the file exists with at least one event in it."""
        return self._created and self.events_written > 0

    def write(self, event: Event) -> None:
        """Store one event as one line (batched; see the module docstring). A start
        event is written out at once, an end event written and fsync-ed at once."""
        cls = type(event)
        if cls is LogEvent and self._append_fast(event):
            return
        with self._lock:
            if self._fd is None:
                return
            if not self._started and cls is not StartEvent:
                if len(self._held) >= MAX_HELD_EVENTS:
                    self._give_up(
                        f"recording stopped: {MAX_HELD_EVENTS} events arrived before the run's "
                        "start event; the run goes on without recording"
                    )
                    return
                self._held.append(event)
                return
            self._store(event)
            if cls is StartEvent and self._started:
                held, self._held = self._held, []
                for early in held:
                    if self._fd is None:
                        return
                    self._store(early)
            if cls is StartEvent or cls is EndEvent or len(self._batch) >= MAX_BATCH_BYTES:
                self._flush_locked(sync=cls is EndEvent)
        if self._flusher is None and self._fd is not None and self._batch_events:
            self._start_flusher()

    def _append_fast(self, event: LogEvent) -> bool:
        """The common case of a busy run, output lines, in a few microseconds: a
        log line with a finite time in order and a valid level needs no read-back
        check (its only other fields are strings). ``False``: take the full path."""
        t = event.t
        if event.level not in _LEVELS or not math.isfinite(t) or self._compressor is not None:
            return False
        with self._lock:
            if self._fd is None or not self._started or self._ended:
                return False
            previous = self._last_t.get(event.worker)
            if previous is not None and t < previous - TIME_TOLERANCE_S:
                return False
            batch = self._batch
            before = len(batch)
            try:
                self._encoder.encode_into(event, batch, -1)
            except (msgspec.MsgspecError, TypeError, ValueError, OverflowError):
                del batch[before:]
                return False
            batch += b"\n"
            self._batch_events += 1
            if previous is None or t > previous:
                self._last_t[event.worker] = t
            if self._batch_since is None:
                self._batch_since = time.monotonic()
            if len(batch) >= MAX_BATCH_BYTES:
                self._flush_locked(sync=False)
        if self._flusher is None:
            self._start_flusher()
        return True

    def rename(self, path: str | os.PathLike) -> None:
        """Give the file a better name (the run's default name once its own start is
        known), the next free number if taken; never overwrites; a failure keeps
        the old name."""
        target = Path(path)
        with self._io_lock:
            if self._fd is None or target == self.path:
                return
            try:
                for _attempt in range(1000):
                    try:
                        os.link(self.path, target)
                        break
                    except FileExistsError:
                        target = next_free_name(target)
                else:
                    return
                os.unlink(self.path)
            except OSError:
                return
            self.path = target

    def flush(self, sync: bool = False) -> None:
        """Write what is batched now (and ``fsync`` with ``sync``)."""
        with self._lock:
            if self._fd is not None:
                self._flush_locked(sync=sync)

    def close(self) -> None:
        """Finish the file: flush, fsync, close. Idempotent. A file that holds no
        event is removed (a run that died before its start event leaves nothing)."""
        with self._lock:
            self._closing = True
            self._wake.set()
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
            self._flush_locked(sync=False, final=True)
            with self._io_lock:
                fd, self._fd = self._fd, None
                if fd is None:
                    return
                try:
                    _os_fsync(fd)
                except OSError as exc:
                    self._fd = fd
                    self._fail(exc)
                    return
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._remove_if_empty()

    def discard(self) -> None:
        """Close without keeping anything: the file this recorder created is
        removed (a run that never ran: refused on its configuration before its
        first step). A file it did not create is never touched. Idempotent."""
        with self._lock:
            self._closing = True
            self._wake.set()
            self._held = []
            self._batch.clear()
            self._batch_events = 0
            self._close_fd()
            if self._created:
                try:
                    self.path.unlink()
                except OSError:
                    pass
                self._created = False

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

    def _store(self, event: Event) -> None:
        """Encode ``event`` into the batch (caller holds ``_lock``)."""
        for line in self._lines(event):
            if self._compressor is not None:
                self._batch += self._compressor.compress(line + b"\n")
                self._member_bytes += len(line) + 1
            else:
                self._batch += line
                self._batch += b"\n"
            self._batch_events += 1
        if self._batch_since is None and self._batch_events:
            self._batch_since = time.monotonic()

    def _flush_locked(self, *, sync: bool, final: bool = False) -> None:
        """Write the batch in one call (caller holds ``_lock``); fsync with ``sync``
        (the periodic fsync is the flusher's, outside ``_lock``: see _sync_if_due)."""
        if self._compressor is not None and (self._batch_events or final):
            member_full = self._member_bytes >= GZIP_MEMBER_BYTES
            try:
                tail = self._compressor.flush(
                    zlib.Z_FINISH if final or member_full else zlib.Z_SYNC_FLUSH
                )
            except zlib.error:
                tail = b""
            self._batch += tail
            if member_full and not final:  # the next batch begins a new gzip member
                self._compressor = _gzip_compressor()
                self._member_bytes = 0
        data = bytes(self._batch)
        count = self._batch_events
        self._batch.clear()
        self._batch_events = 0
        self._batch_since = None
        with self._io_lock:
            if self._fd is None:
                return
            try:
                if data:
                    self._write_all(data)
                    self.events_written += count
                    self._unsynced = True
                if self._unsynced and sync:
                    _os_fsync(self._fd)
                    self._last_fsync = time.monotonic()
                    self._unsynced = False
            except OSError as exc:
                self._fail(exc)

    def _sync_if_due(self) -> None:
        """fsync once FSYNC_INTERVAL_S has passed since the last one, holding only the
        file's lock, so producers are not held up by the disk."""
        error = None
        with self._io_lock:
            if self._fd is None or not self._unsynced:
                return
            if time.monotonic() - self._last_fsync < FSYNC_INTERVAL_S:
                return
            try:
                _os_fsync(self._fd)
                self._last_fsync = time.monotonic()
                self._unsynced = False
            except OSError as exc:
                error = exc
        if error is not None:
            with self._lock:
                if self._fd is not None:
                    self._fail(error)

    def _start_flusher(self) -> None:
        with self._lock:
            if self._flusher is not None or self._fd is None:
                return
            self._flusher = threading.Thread(
                target=self._flush_loop, name="gpuscale-recorder", daemon=True
            )
            self._flusher.start()

    def _flush_loop(self) -> None:
        """Write each batch at most FLUSH_INTERVAL_S after its first event; fsync a
        second after a write at the latest."""
        while not self._closing:
            self._wake.wait(FLUSH_INTERVAL_S / 2)
            with self._lock:
                if self._fd is None or self._closing:
                    return
                now = time.monotonic()
                if (
                    self._batch_since is not None
                    and now - self._batch_since >= FLUSH_INTERVAL_S / 2
                ):
                    self._flush_locked(sync=False)
            self._sync_if_due()

    def _open(self) -> None:
        try:
            _make_parent(self.path)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
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
            self._compressor = _gzip_compressor()
        _open_recorders.add(self)

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

    def _close_fd(self) -> None:
        """Close the file, never under a write or fsync in progress; idempotent."""
        with self._io_lock:
            fd, self._fd = self._fd, None
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def _give_up(self, message: str) -> None:
        self._close_fd()
        self._batch.clear()
        self._batch_events = 0
        self._closing = True
        self._wake.set()
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
            self._created = False

    def _lines(self, event: Event) -> list[bytes]:
        """The event's line (after a clock marker where its time stepped back), or
        a warning line in its place when it cannot be stored readably, or nothing
        (never for a first start)."""
        reason = self._order_problem(event)
        if reason == "":
            return []  # silently ignored (a second provisional start)
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
            marker = self._clock_marker(event)
            self._accept(event)
            return [line] if marker is None else [marker, line]
        if not self._started:
            self._give_up(
                f"recording stopped: the run's start event cannot be stored ({reason}); "
                "the run goes on without recording"
            )
            return []
        if self._ended:
            return []
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
        return [self._encoder.encode(note)]

    def _order_problem(self, event: Event) -> str | None:
        """Why ``event`` cannot go next (``""``: ignore it silently), or ``None``."""
        cls = type(event)
        if not self._started:
            return None if cls is StartEvent else "a recording starts with a start event"
        if cls is StartEvent:
            if self._provisional and not self._ended:
                return "" if event.provisional else None
            return "a second start event"
        if self._ended:
            return "an event after the end event"
        return None

    def _clock_marker(self, event: Event) -> bytes | None:
        """The ``clock`` log line that goes before an event whose ``t`` is more than
        TIME_TOLERANCE_S before its worker's latest (the event is kept)."""
        cls = type(event)
        if cls is StartEvent or cls is EndEvent:
            return None
        t = event.t
        previous = self._last_t.get(event.worker)
        if previous is None or t >= previous - TIME_TOLERANCE_S:
            return None
        self._last_t[event.worker] = t
        return self._encoder.encode(
            LogEvent(
                t=t,
                worker=event.worker,
                source=CLOCK_SOURCE,
                level="warning",
                message=(
                    f"the wall clock of worker {event.worker} stepped back {previous - t:.3g} s "
                    "(an NTP step or a resumed machine?); the events after this keep their "
                    "own time"
                ),
            )
        )

    def _accept(self, event: Event) -> None:
        cls = type(event)
        if cls is StartEvent:
            self._started = True
            self._provisional = bool(event.provisional)
            return
        if cls is EndEvent:
            self._ended = True
            return
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


def _gzip_compressor():
    """A gzip member's compressor (header, deflate data and trailer)."""
    return zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)


def _make_parent(path: Path) -> None:
    """Create ``path``'s folder; a part of it that is a file is named in the error."""
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        for folder in (parent, *parent.parents):
            if folder.exists() and not folder.is_dir():
                raise NotADirectoryError(
                    errno.ENOTDIR, f"{folder} is a file, not a folder", str(path)
                ) from None
        raise


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
    saved_text = f"{plural(saved, 'event')} were saved" if saved else ""
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
