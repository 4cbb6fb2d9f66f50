"""Read a recording back: safely (any damage is one clear error) and fast.

How it stays fast: the file is read in 1 MiB (1,048,576-byte) chunks, each cut at its last
newline and decoded in one call to msgspec's ``Decoder.decode_lines``, which
parses and validates every line against the typed schema in C (no dicts, no
per-line Python call). Only when a chunk fails (or holds a line that is not
exactly one event) is it decoded again line by line, to name the bad line.

How it stays safe: nothing is executed (JSON only, decoded into typed structs);
memory is bounded (one chunk plus one line of at most
:data:`~gpuscale.recording.format.MAX_LINE_BYTES`; gzip output is decompressed
a chunk at a time, so a compression bomb is read like a large file; :func:`load_run`
counts the memory the decoded events take, not only their text); files are
opened through :mod:`gpuscale.events.bounded` (devices refused, a FIFO without a
writer not waited on); the start line's nesting is checked before it is decoded;
values outside the plausible ranges of :mod:`gpuscale.events.limits` are refused
by the schema; every problem becomes a :class:`RecordingError` naming the file
and the line, after the events before it were yielded (:func:`iter_events`).

What is forgiven, with a one-line warning: a cut-off last line (the writer was
killed while writing it), a gzip stream that ends early (the same crash), gzip data
damaged mid-way (the whole lines before the damage are read: :func:`gunzip_chunks`,
:func:`lines_before_damage`), a missing end event (the run was killed or is still
running), a damaged first line with a start event further in the first chunk (read
from that start), events run together on one line (a lost newline: each read), a
damaged line after the start (not JSON, not a valid event: a disk or an editor
garbled it; skipped, the rest is read, nothing else recorded is lost; the first
:data:`MAX_SKIP_WARNINGS` are named, then a count), and, in a file of a newer
minor version, event kinds this gpuscale does not know. What is not forgiven: a
file that is not a recording (no start event where one should be, binary data),
and events out of order (two runs joined in one file).
"""

from __future__ import annotations

import os
import re
import socket
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from gpuscale.errors import GpuscaleError
from gpuscale.events.bounded import (
    MAX_DEPTH,
    UTF8_BOM,
    JsonInputError,
    check_depth,
    data_too_deep,
    json_kind,
    json_problem,
    open_untrusted,
    plain_validation_message,
)
from gpuscale.events.schema import (
    EVENT_TYPES,
    EndEvent,
    Event,
    LogEvent,
    StartEvent,
)
from gpuscale.formatting import format_bytes
from gpuscale.recording.format import (
    CLOCK_SOURCE,
    DECODE_ERRORS,
    GZIP_CUT_AT_START,
    GZIP_MAGIC,
    MAX_LINE_BYTES,
    READER_MINOR,
    TIME_TOLERANCE_S,
    gzip_damage_warning,
    gzip_header_damaged,
    gzip_problem,
    parse_version,
    version_problem,
)
from gpuscale.recording.liveness import writer_alive

CHUNK_BYTES = 1024 * 1024
"""Bytes read (or decompressed) at a time."""

LOAD_LIMIT_BYTES = 2 * 1024**3
"""Most memory :func:`load_run` lets the decoded events take; past this it asks
the caller to stream with :func:`iter_events` instead. Counted as what is kept:
the (uncompressed) text of the events times :data:`KEPT_PER_TEXT_BYTE`."""

KEPT_PER_TEXT_BYTE = 3
"""Memory the decoded events take per byte of their JSON text (measured: 1.5 for
sample events, 2.2 for short log lines, up to about 4 in process RSS), so a
gzip of log lines cannot make :func:`load_run` hold several times the limit."""

_DECODE_ERRORS = DECODE_ERRORS
_JSON_SPACE = b" \t\r\n"


def _count_nonblank_lines(data: bytes) -> int:
    """Lines holding something other than JSON whitespace (C-speed: strip the
    in-line whitespace, then split on the newlines that remain)."""
    return len(data.translate(None, b" \t\r").split())


_EVENT_CLASSES = {cls.__struct_config__.tag: cls for cls in EVENT_TYPES}
_KNOWN_KINDS = frozenset(_EVENT_CLASSES)


class RecordingError(GpuscaleError):
    """A recording cannot be read. The message names the file and, where there
    is one, the line (1-based); exit code 2."""

    def __init__(self, path: str | os.PathLike, message: str, line: int | None = None):
        self.path = Path(path)
        self.line = line
        self.reason = message
        where = f"{path}: line {line}: " if line is not None else f"{path}: "
        super().__init__(where + message)


@dataclass
class LoadedRun:
    """A whole recording in memory."""

    path: Path
    start: StartEvent
    events: list[Event]
    """The complete stream in file order: ``start`` first, ``end`` last when present."""
    end: EndEvent | None
    """``None`` when the run was killed (or is still being recorded)."""
    warnings: list[str] = field(default_factory=list)
    """One line each: what was forgiven (a cut last line, a missing end event)."""
    truncated: bool = False
    """The file ends in the middle of a line or of its gzip stream (a crash)."""
    schema: str = "1.0"
    """The file's format version (from its start event)."""


class _Probe(msgspec.Struct):
    """Just enough of a line to route it: its kind and, on the first, its version."""

    kind: object = None
    schema: object = None


_probe_decoder = msgspec.json.Decoder(_Probe)


MAX_SKIP_WARNINGS = 5
"""Damaged lines named one warning each; past these, one warning counts the rest."""


def event_problem(exc: Exception, kind: object = None) -> str:
    """Why a line of JSON is not a valid event, in a user's words: msgspec's
    ``Expected `object`, got `int``` (the line as a whole) -> ``a whole number
    where an event (a JSON object) was expected``; a field's fault named as
    :func:`~gpuscale.events.bounded.plain_validation_message` names it
    (``step_time_s must be at least 1e-09``); ``kind``, the line's event kind, lets
    it list the values a field takes."""
    text = " ".join(str(exc).split())
    if m := re.fullmatch(r"Expected `([^`]+)`, got `([^`]+)`", text):  # no path: the line
        return f"{json_kind(m.group(2))} where an event (a JSON object) was expected"
    cls = _EVENT_CLASSES.get(kind) if isinstance(kind, str) else None
    if " - at `$" not in text:
        return plain_validation_message(exc, at="it", type=cls)
    return plain_validation_message(exc, type=cls)


_CUT_START = "the start event is cut off (the run was killed while writing it): nothing to read"


_raw_decoder = msgspec.json.Decoder(msgspec.Raw)
_TRAILING = re.compile(r"trailing characters \(byte (\d+)\)")


MAX_BAD_PARTS = 8
"""Parts of a line that are no event after which :func:`joined_parts` stops
splitting (the rest of the line is its last part): a line of many JSON values
that are not events (``{}{}{}...``, up to a 32 MiB line) is given up early."""


def joined_parts(
    line: bytes, is_event: Callable[[bytes], bool] | None = None
) -> list[bytes] | None:
    """The JSON values run together on ``line`` (a newline lost between two
    events: ``{...}{...}``), split where msgspec says the next begins (its
    ``trailing characters (byte N)``, counted from 1; each decode stops there, and
    the line is walked by offset, so a line of many costs one pass); the last part
    may be damaged. ``None`` when ``line`` does not begin with a whole JSON value
    followed by another. With ``is_event``: ``None`` too when the first part is no
    event, and after :data:`MAX_BAD_PARTS` parts that are none, the rest of the
    line is the last part."""
    line = line.strip(_JSON_SPACE)
    view = memoryview(line)
    parts: list[bytes] = []
    pos = 0
    bad = 0
    while pos < len(line) and bad < MAX_BAD_PARTS:
        try:
            _raw_decoder.decode(view[pos:])
        except msgspec.DecodeError as exc:
            match = _TRAILING.search(str(exc))
            cut = int(match.group(1)) - 1 if match else 0  # msgspec counts from 1
            if not 0 < cut < len(line) - pos:
                break
            part = line[pos : pos + cut]
            if is_event is not None and not is_event(part):
                if not parts:
                    return None
                bad += 1
            parts.append(part)
            pos += cut
            continue
        except _DECODE_ERRORS:
            break
        break
    if not parts:
        return None
    parts.append(line[pos:])  # the last value (whole, or the damage after the others)
    return parts


START_FURTHER_IN = "read from the start event on line"
"""How the warning of a recording read from a start event after its damaged first
line says so (``line 1: the start event is cut off (...); read from the start event
on line 4 (lines 1-3 skipped)``)."""


class _StartDamaged(RecordingError):
    """A first line that is no start event (damaged, cut, another kind): the
    reader looks for one further in (:meth:`_Reader._start_further_in`)."""

    def as_error(self) -> RecordingError:
        return RecordingError(self.path, self.reason, self.line)


def _damage_words(reason: str) -> str:
    """A first line's error as the damage it is, when a start event further in is
    read: without "nothing to read" and "not a gpuscale recording"."""
    words = reason.removesuffix(": nothing to read").removesuffix(": not a gpuscale recording")
    words = words.removeprefix("not a gpuscale recording: ")
    return words.partition("; a gpuscale recording starts")[0]


class _DamageAfter(Exception):
    """A damaged line in a chunk: the events before it (to be kept) and the error."""

    def __init__(self, events: list[Event], error: RecordingError):
        super().__init__(str(error))
        self.events = events
        self.error = error


class GzipCut(Exception):
    """The gzip stream ended before its end marker (a crash while writing): what
    it decoded was yielded (:func:`gunzip_chunks`)."""


class GzipDamaged(Exception):
    """zlib refused a gzip stream (:func:`gunzip_chunks`): what it decoded before
    was yielded, but for :attr:`salvaged`. ``fatal``: the file's first gzip header
    is damaged (it is not gzip at all), so nothing of it can be read."""

    def __init__(self, error: zlib.error, first_member: bool, salvaged: bytes):
        super().__init__(str(error))
        self.error = error
        self.first_member = first_member
        self.fatal = first_member and gzip_header_damaged(error)
        self.salvaged = salvaged
        """What zlib decoded of the refused data before it noticed the damage: the
        text before the damage, and maybe garbage after it (up to where zlib noticed)."""

    def problem(self, after_line: int = 0) -> str:
        """What is wrong, in the words of :func:`~gpuscale.recording.format.gzip_problem`."""
        return gzip_problem(self.error, first_member=self.first_member, after_line=after_line)


SALVAGE_BYTES = 64
"""Compressed bytes fed at a time to decode what comes before damaged gzip data."""


def gunzip_chunks(f, size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """The decompressed bytes of the gzip file ``f`` (concatenated members too), at
    most ``size`` at a time, so that a compression bomb is read like a large file.
    Raises :class:`GzipCut` after the last bytes when the stream ends early (a
    crash while writing), :class:`GzipDamaged` where zlib refuses the data, with
    what decodes of the refused call before the damage (its ``salvaged``: the call is
    repeated on a copy of the decompressor, :data:`SALVAGE_BYTES` at a time; zlib's
    output of a refused call is otherwise lost). ``OSError`` passes through."""
    decomp = zlib.decompressobj(16 + zlib.MAX_WBITS)
    first_member = True
    while True:
        if decomp.eof:
            data = decomp.unused_data or f.read(size)
            if not data:
                return  # clean end of the last gzip member
            decomp = zlib.decompressobj(16 + zlib.MAX_WBITS)  # concatenated member
            first_member = False
        elif decomp.unconsumed_tail:
            data = decomp.unconsumed_tail
        else:
            data = f.read(size)
            if not data:
                try:
                    rest = decomp.flush()
                except zlib.error as exc:
                    raise GzipDamaged(exc, first_member, b"") from None
                if rest:
                    yield rest
                raise GzipCut
        before = decomp.copy()
        try:
            out = decomp.decompress(data, size)
        except zlib.error as exc:
            raise GzipDamaged(exc, first_member, _salvage(before, data, size)) from None
        if out:
            yield out


def lines_before_damage(
    data: bytes,
    decode: Callable[[bytes], object] | None = None,
    newer_minor: bool = False,
    at_start: bool = False,
) -> bytes:
    """Of ``data``, the text decoded last before damaged gzip data, its whole lines
    before the first that is no event (``decode`` raises; blank lines pass): zlib
    notices damage some bytes after it, and decodes garbage until then; the same in
    the reader and the listing. With ``newer_minor``, a line of an event kind
    unknown to this gpuscale passes. ``at_start``: ``data`` is the file's first
    text, its byte-order mark (an editor's) removed. Empty when there is none."""
    decode = decode or msgspec.json.Decoder(Event).decode
    if at_start and data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM) :]
    cut = data.rfind(b"\n")
    end = 0
    while end <= cut:
        next_end = data.index(b"\n", end) + 1
        line = data[end:next_end]
        if line.strip(_JSON_SPACE):
            try:
                decode(line)
            except _DECODE_ERRORS:
                if not (newer_minor and _unknown_kind(line)):
                    break
        end = next_end
    return data[:end]


def _unknown_kind(line: bytes) -> bool:
    try:
        kind = _probe_decoder.decode(line).kind
    except _DECODE_ERRORS:
        return False
    return isinstance(kind, str) and kind not in _KNOWN_KINDS


def _salvage(decomp, data: bytes, size: int) -> bytes:
    """What ``decomp`` decodes of ``data`` before zlib refuses it (at most ``size``
    bytes: the call that failed asked for no more): fed :data:`SALVAGE_BYTES` at a
    time, and the piece it refuses again a byte at a time (a refused call's output
    is lost, and a piece of compressed bytes can hold several lines)."""
    out: list[bytes] = []
    total = 0
    step = SALVAGE_BYTES
    begin = 0
    while begin < len(data) and total < size:
        saved = decomp.copy()
        try:
            piece = decomp.decompress(data[begin : begin + step], size - total)
        except zlib.error:
            if step == 1:
                break
            decomp, step = saved, 1  # the refused piece again, a byte at a time
            continue
        out.append(piece)
        total += len(piece)
        if decomp.eof or decomp.unconsumed_tail:
            break
        begin += step
    return b"".join(out)


class _Reader:
    def __init__(
        self,
        path: str | os.PathLike,
        on_warning: Callable[[str], None] | None,
        max_bytes: int | None = None,
    ):
        self.path = Path(path)
        self.on_warning = on_warning
        self.max_bytes = max_bytes
        self.decoder = msgspec.json.Decoder(Event)
        self.line_no = 0
        """Lines fully consumed so far."""
        self.bytes_read = 0
        self.started = False
        self.ended = False
        self.last_t: dict[int, float] = {}
        self.truncated = False
        self.schema = "1.0"
        self.newer_minor = False
        self.skipped_kinds: set[str] = set()
        self.skipped_lines = 0
        """Damaged lines after the start, skipped (see :meth:`_skip_damaged`)."""
        self.start: StartEvent | None = None
        self.first_start: StartEvent | None = None
        """The file's first start event (gpuscale's provisional one, when it has one)."""
        self.end: EndEvent | None = None
        self._pending_start: StartEvent | None = None
        self._pending_joined: list[Event] = []
        """Events run together with the start on its line, read after it."""

    # -- errors and warnings -------------------------------------------------------

    def error(self, message: str, line: int | None = None) -> RecordingError:
        return RecordingError(self.path, message, line)

    def warn(self, message: str) -> None:
        if self.on_warning is not None:
            self.on_warning(f"{self.path}: {message}")

    def _skip_damaged(self, error: RecordingError) -> None:
        """A damaged line after the start: say so (the first few by line) and read on."""
        self.skipped_lines += 1
        if self.skipped_lines <= MAX_SKIP_WARNINGS:
            self.warn(f"line {error.line}: {error.reason}, skipped")

    # -- bytes -----------------------------------------------------------------

    def open(self):
        try:
            raw, regular = open_untrusted(self.path)
        except JsonInputError as exc:
            raise self.error(str(exc)) from None
        f = raw  # a buffered reader (peek works on pipes too); closed by the caller
        try:
            if self.max_bytes is not None and regular:
                size = os.fstat(f.fileno()).st_size
                if size * KEPT_PER_TEXT_BYTE > self.max_bytes and f.peek(2)[:2] != GZIP_MAGIC:
                    raise self.error(
                        f"{format_bytes(size)} is more than gpuscale loads into memory at once "
                        f"({format_bytes(self.max_bytes)}); stream it with "
                        "gpuscale.recording.reader.iter_events"
                    )
        except BaseException:
            f.close()
            raise
        return f

    def chunks(self, f) -> Iterator[bytes]:
        """The file's (decompressed) bytes, a chunk at a time."""
        try:
            head = f.peek(2)[:2]
        except OSError as exc:
            raise self.error(f"cannot read: {exc.strerror or exc}") from None
        if head == GZIP_MAGIC:
            yield from self._gzip_chunks(f)
            return
        while True:
            try:
                data = f.read(CHUNK_BYTES)
            except OSError as exc:
                raise self.error(f"cannot read: {exc.strerror or exc}", self.line_no + 1) from None
            if not data:
                return
            yield data

    def _gzip_chunks(self, f) -> Iterator[bytes]:
        try:
            yield from gunzip_chunks(f)
        except GzipDamaged as damage:
            if damage.fatal:
                raise self.error(damage.problem()) from None
            raise
        except OSError as exc:
            raise self.error(f"cannot read: {exc.strerror or exc}", self.line_no + 1) from None

    # -- lines -----------------------------------------------------------------

    def batches(self) -> Iterator[list[Event]]:
        """Validated events, a chunk's worth at a time, in file order."""
        f = self.open()
        with f:
            pending: list[bytes] = []
            pending_len = 0
            stream_cut = False
            gzip_damage: GzipDamaged | None = None
            chunks = self.chunks(f)
            while gzip_damage is None:
                try:
                    chunk = next(chunks)
                except StopIteration:
                    break
                except GzipCut:
                    stream_cut = True
                    break
                except GzipDamaged as exc:  # the whole lines before it, then no more
                    gzip_damage = exc
                    chunk = self._before_damage(b"".join(pending) + exc.salvaged)
                    pending, pending_len = [], 0
                    if not chunk:
                        break
                if self.bytes_read == 0 and chunk.startswith(UTF8_BOM):
                    chunk = chunk[len(UTF8_BOM) :]  # an editor's byte-order mark
                self.bytes_read += len(chunk)
                if (
                    self.max_bytes is not None
                    and self.bytes_read * KEPT_PER_TEXT_BYTE > self.max_bytes
                ):
                    raise self.error(
                        f"the events uncompress to more than gpuscale loads into memory at once "
                        f"({format_bytes(self.max_bytes // KEPT_PER_TEXT_BYTE)} of text, about "
                        f"{format_bytes(self.max_bytes)} once decoded); "
                        "stream it with gpuscale.recording.reader.iter_events",
                        self.line_no + 1,
                    )
                cut = chunk.rfind(b"\n")
                if cut < 0:
                    pending.append(chunk)
                    pending_len += len(chunk)
                    if pending_len > MAX_LINE_BYTES:
                        raise self.error(
                            f"a line longer than {format_bytes(MAX_LINE_BYTES)}: "
                            "not a gpuscale recording",
                            self.line_no + 1,
                        )
                    continue
                if pending:
                    pending.append(chunk[: cut + 1])
                    complete = b"".join(pending)
                else:
                    complete = chunk if cut == len(chunk) - 1 else chunk[: cut + 1]
                rest = chunk[cut + 1 :]
                pending = [rest] if rest else []
                pending_len = len(rest)
                if not self.started:
                    complete = self._first_lines(complete)
                    if not complete and self._pending_start is None:
                        continue
                try:
                    events = self._decode_complete(complete)
                except _DamageAfter as damage:
                    if damage.events:  # what came before the damaged line is kept
                        yield damage.events
                    raise damage.error from None
                if events:
                    yield events
            tail = b"".join(pending)
            if gzip_damage is not None:
                self._damaged_stream(gzip_damage)
            else:
                last = self._last_line(tail, stream_cut)
                if last:
                    yield last
        if not self.started:
            if stream_cut and self.bytes_read == 0:
                raise self.error(GZIP_CUT_AT_START)
            if self.line_no == 0 and not tail.strip():
                raise self.error("empty file: not a gpuscale recording")
            raise self.error("no start event: not a gpuscale recording", 1)
        if self.skipped_lines > MAX_SKIP_WARNINGS:
            self.warn(
                f"{self.skipped_lines} damaged lines skipped in all (the first "
                f"{MAX_SKIP_WARNINGS} named above); read the rest"
            )
        if self.end is None and gzip_damage is None:  # its warning says what is lost
            self.warn(f"no end event after line {self.line_no}: {self._why_no_end()}")

    def _before_damage(self, data: bytes) -> bytes:
        """:func:`lines_before_damage`, a line of a kind unknown to this reader in a
        file of a newer minor version taken as whole (it is skipped, not damage)."""
        return lines_before_damage(
            data, self.decoder.decode, self.newer_minor, at_start=self.bytes_read == 0
        )

    def _damaged_stream(self, damage: GzipDamaged) -> None:
        """Gzip data damaged after some lines: they are kept (what decoded after them
        is not: :meth:`_before_damage`), with a warning; with no line yet, nothing to
        read."""
        if not self.started:
            raise self.error(damage.problem())
        self.truncated = True
        self.warn(gzip_damage_warning(damage.problem(self.line_no), self.line_no))

    def _why_no_end(self) -> str:
        """Why a recording has no end event: still being written, or interrupted
        (told apart by its writer's process where that ran on this host)."""
        starts = [s for s in (self.first_start, self.start) if s is not None]
        if writer_alive(starts):
            return "the run is still running; read what was recorded so far"
        if any(s.host == socket.gethostname() for s in starts):
            return "the run was interrupted (its process is gone); read what was recorded"
        return "the run was killed or is still running; read what was recorded"

    def _first_lines(self, complete: bytes) -> bytes:
        """Consume leading blank lines and the start line; return the rest."""
        stripped = complete.lstrip(_JSON_SPACE)
        if not stripped:
            self.line_no += complete.count(b"\n")
            return b""
        begin = complete.rfind(b"\n", 0, len(complete) - len(stripped)) + 1
        end = complete.index(b"\n", begin)
        self.line_no += complete.count(b"\n", 0, begin) + 1
        try:
            self._start(complete[begin:end])
        except _StartDamaged as damaged:
            return self._start_further_in(complete, end + 1, damaged)
        return complete[end + 1 :]

    def _start_further_in(self, complete: bytes, pos: int, damaged: _StartDamaged) -> bytes:
        """The first line (number ``damaged.line``) is damaged: read from the first
        whole start event after it in ``complete`` (the text read so far: the first
        chunk), with a warning naming the lines skipped (a provisional start cut off,
        and what came before the run's own); return what follows it. None there: the
        first line's error."""
        first = damaged.line or self.line_no
        number = self.line_no
        while pos < len(complete):
            nl = complete.index(b"\n", pos)
            line = complete[pos:nl]
            number += 1
            pos = nl + 1
            if b'"start"' not in line:
                continue
            self.line_no = number
            try:
                self._start(line)
            except _StartDamaged:
                continue
            skipped = f"line {first}" if number - 1 == first else f"lines {first}-{number - 1}"
            self.warn(
                f"line {first}: {_damage_words(damaged.reason)}; {START_FURTHER_IN} {number} "
                f"({skipped} skipped)"
            )
            return complete[pos:]
        raise damaged.as_error()

    def _start(self, line: bytes) -> StartEvent:
        number = self.line_no
        if line.startswith(UTF8_BOM):
            line = line[len(UTF8_BOM) :]
        try:
            check_depth(line)  # the start event carries free-form data (its config)
        except JsonInputError as exc:
            raise self._damaged(f"{exc}: not a gpuscale recording", number) from None
        try:
            probe = _probe_decoder.decode(line)
        except msgspec.ValidationError:
            raise self._damaged("not a JSON object: not a gpuscale recording", number) from None
        except msgspec.DecodeError as exc:
            if line.lstrip().startswith(b"{") and str(exc) == "Input data was truncated":
                raise self._damaged(_CUT_START, number) from None
            parts = joined_parts(line, self._is_event) if _TRAILING.search(str(exc)) else None
            if parts:  # a newline lost after the start: read it, then the others
                start = self._start(parts[0])
                self._pending_joined = self._read_parts(parts, number, first=start)
                return start
            raise self._damaged(
                f"not a gpuscale recording: not JSON ({json_problem(exc)})",
                number,
            ) from None
        except _DECODE_ERRORS:
            raise self._damaged("not a JSON object: not a gpuscale recording", number) from None
        if probe.kind != "start":
            kind = probe.kind if isinstance(probe.kind, str) else None
            what = f"a {kind[:40]!r} event" if kind else "no 'kind' field"
            raise self._damaged(
                f"the first line has {what}; a gpuscale recording starts with a start event",
                number,
            )
        schema = probe.schema if probe.schema is not None else "1.0"
        if not isinstance(schema, str):
            raise self._damaged("the start event's 'schema' is not a string", number)
        problem = version_problem(schema)
        if problem is not None:  # not damage: a format this gpuscale does not read
            raise self.error(problem, number)
        self.schema = schema
        self.newer_minor = (parse_version(schema) or (0, 0))[1] > READER_MINOR
        try:
            start = self.decoder.decode(line)
        except _DECODE_ERRORS as exc:
            raise self._damaged(
                f"the start event is not valid: {event_problem(exc)}", number
            ) from None
        if self.newer_minor and start.schema != schema:
            start = msgspec.structs.replace(start, schema=schema)
        self.start = start
        self.first_start = start
        self.started = True
        self._pending_start = start
        return start

    def _damaged(self, message: str, line: int) -> _StartDamaged:
        return _StartDamaged(self.path, message, line)

    def _decode_complete(self, complete: bytes) -> list[Event]:
        """Decode whole lines (``complete`` ends with a newline) and check their order."""
        n_lines = complete.count(b"\n")
        events: list[Event] | None
        try:
            events = self.decoder.decode_lines(complete)
        except _DECODE_ERRORS:
            events = None
        line_numbers: list[int] | None = None
        if events is not None and len(events) != n_lines:
            # Blank lines (skipped by decode_lines) explain the difference, or a line
            # held other than exactly one value: then decode line by line.
            if _count_nonblank_lines(complete) != len(events):
                events = None
        if events is None:
            events, line_numbers = self._decode_slowly(complete)
        start = self._pending_start
        if start is not None:  # with the events run together with it on its line
            lead = [start, *self._pending_joined]
            self._pending_start, self._pending_joined = None, []
            events[0:0] = lead
            if line_numbers is not None:
                line_numbers[0:0] = [self.line_no] * len(lead)
            base_shift = len(lead)
        else:
            base_shift = 0
        bad = self._check_order(events)
        if bad is not None:
            index, message = bad
            if line_numbers is not None:
                line = line_numbers[index]
            else:
                line = self.line_no + max(index + 1 - base_shift, 0)
            raise _DamageAfter(events[:index], self.error(message, line))
        self.line_no += n_lines
        return events

    def _decode_slowly(self, complete: bytes) -> tuple[list[Event], list[int]]:
        """Line by line: to name a bad line, skip blank ones, and skip kinds unknown
        to this reader in a file of a newer minor version."""
        events: list[Event] = []
        numbers: list[int] = []
        lines = complete.split(b"\n")
        lines.pop()  # after the final newline
        decode = self.decoder.decode
        for offset, line in enumerate(lines):
            number = self.line_no + offset + 1
            if not line.strip():
                continue
            try:
                events.append(decode(line))
            except _DECODE_ERRORS as exc:
                joined = self._joined(line, number)
                if joined:
                    events += joined
                    numbers += [number] * len(joined)
                elif not self._skippable(line, number):
                    self._skip_damaged(self._line_error(line, exc, number))
                continue
            numbers.append(number)
        return events, numbers

    def _is_event(self, part: bytes) -> bool:
        try:
            self.decoder.decode(part)
        except _DECODE_ERRORS:
            return self.newer_minor and _unknown_kind(part)
        return True

    def _joined(self, line: bytes, number: int) -> list[Event]:
        """The events of a line that holds several run together (a newline lost:
        ``{...}{...}``), split where msgspec says the first ends, with a warning; a
        part that is no event is skipped as a damaged line is. Empty when ``line``
        is not such a line, or none of its parts is an event."""
        parts = joined_parts(line, self._is_event)
        if parts is None:
            return []
        return self._read_parts(parts, number)

    def _read_parts(
        self, parts: list[bytes], number: int, first: Event | None = None
    ) -> list[Event]:
        """The events of ``parts`` (of line ``number``; ``first``: its first, read
        already, not returned), with a warning: events run together where every part
        after the first is an object, else an event followed by damaged bytes."""
        events: list[Event] = []
        damaged: list[tuple[bytes, Exception]] = []
        for index, part in enumerate(parts):
            if index == 0 and first is not None:
                continue
            try:
                events.append(self.decoder.decode(part))
            except _DECODE_ERRORS as exc:
                damaged.append((part, exc))
        if not events and first is None:
            return []
        if not all(part.lstrip(_JSON_SPACE).startswith(b"{") for part in parts[1:]):
            # not a newline lost: bytes that are no JSON object after the event(s)
            self.skipped_lines += 1
            if self.skipped_lines <= MAX_SKIP_WARNINGS:
                n = len(events) + (first is not None)
                what = "an event" if n == 1 else f"{n} events"
                self.warn(f"line {number}: {what} followed by damaged bytes (skipped)")
            damaged = [d for d in damaged if d[0].lstrip(_JSON_SPACE).startswith(b"{")]
        else:
            read = "read both" if len(parts) == 2 else f"read all {len(parts)}"
            if damaged:
                read = f"read {len(parts) - len(damaged)} of them"
            self.warn(f"line {number}: {len(parts)} events run together (a newline lost): {read}")
        for part, exc in damaged:
            if not self._skippable(part, number):
                self._skip_damaged(self._line_error(part, exc, number))
        return events

    def _skippable(self, line: bytes, number: int) -> bool:
        if not self.newer_minor:
            return False
        try:
            kind = _probe_decoder.decode(line).kind
        except _DECODE_ERRORS:
            return False
        if not isinstance(kind, str) or kind in _KNOWN_KINDS:
            return False
        if kind not in self.skipped_kinds:
            self.skipped_kinds.add(kind)
            self.warn(
                f"line {number}: skipping {kind[:40]!r} events, a kind this gpuscale does not "
                f"know (the file is format {self.schema})"
            )
        return True

    def _line_error(self, line: bytes, exc: Exception, number: int) -> RecordingError:
        if isinstance(exc, RecursionError):
            return self.error("JSON nested too deeply", number)
        if isinstance(exc, UnicodeDecodeError):
            return self.error(f"text is not valid UTF-8 ({exc.reason} at byte {exc.start})", number)
        if isinstance(exc, msgspec.DecodeError) and not isinstance(exc, msgspec.ValidationError):
            return self.error(f"not JSON ({json_problem(exc)})", number)
        try:
            kind = _probe_decoder.decode(line).kind
        except _DECODE_ERRORS:
            kind = None
        if isinstance(kind, str) and kind not in _KNOWN_KINDS:
            return self.error(f"unknown event kind {kind[:40]!r}", number)
        problem = event_problem(exc, kind)
        if isinstance(kind, str):
            return self.error(f"not a valid {kind!r} event: {problem}", number)
        if problem.endswith("was expected"):
            return self.error(problem, number)
        return self.error(f"not a valid event: {problem}", number)

    def _check_order(self, events: list[Event]) -> tuple[int, str] | None:
        """Index and reason of the first event out of order, or ``None``.

        Rules: one start event, first; nothing after the end event; within a
        worker, ``t`` never goes back by more than TIME_TOLERANCE_S (the start
        and end events are placed by position, not by ``t``)."""
        last_t = self.last_t
        tolerance = TIME_TOLERANCE_S
        ended = self.ended
        for index, event in enumerate(events):
            cls = type(event)
            if ended:
                return index, "an event after the end event (two runs joined in one file?)"
            if cls is StartEvent:
                if index == 0 and event is self.start and not last_t:
                    continue
                if self.start is not None and self.start.provisional and not event.provisional:
                    if (
                        event.source == "script"
                        and (event.config or {}).get("callback") is False
                        and event.t > self.start.t
                    ):
                        # the start gpuscale made up for a script without the callback:
                        # gpuscale 0.1.0 stamped it when made (at the run's end, so the
                        # run lasted 0.2 ms); the run began at the launch, as now recorded
                        event.t = self.start.t
                    self.start = event  # the run's own start supersedes the provisional one
                    continue
                return index, "a second start event (two runs joined in one file?)"
            if cls is EndEvent:
                if event.summary and data_too_deep(event.summary):
                    return index, f"the end event's summary nests more than {MAX_DEPTH} levels"
                ended = True
                self.end = event
                continue  # like the start, its t is when it was composed, not in the order
            worker = event.worker
            t = event.t
            if cls is LogEvent and event.source == CLOCK_SOURCE:
                last_t[worker] = t  # the clock stepped back: the order starts again here
                continue
            previous = last_t.get(worker)
            if previous is None:
                last_t[worker] = t
            elif t > previous:
                last_t[worker] = t
            elif t < previous - tolerance:
                return index, (
                    f"time goes backwards by {previous - t:.3g} s (events out of order; "
                    f"up to {tolerance:g} s is tolerated)"
                )
        self.ended = ended
        return None

    def _last_line(self, tail: bytes, stream_cut: bool) -> list[Event]:
        """The bytes after the last newline: a complete event kept (or the events
        run together on it), a cut one dropped."""
        if stream_cut:
            self.truncated = True
            self.warn(
                f"the gzip stream ends early after line {self.line_no} (the run was cut off "
                "while writing); read what was recorded"
            )
        if not tail.strip(b" \t\r\n"):
            return []
        number = self.line_no + 1
        if not self.started:
            if tail.strip(b" \t\r\n\x00"):
                self.line_no += 1
                try:
                    self._start(tail)  # a cut one says so; anything else is not a recording
                except _StartDamaged as damaged:
                    raise damaged.as_error() from None
                try:  # the start, and the events run together with it on its line
                    return self._decode_complete(b"")
                except _DamageAfter as damage:
                    raise damage.error from None
            return []
        try:
            events = [self.decoder.decode(tail)]
        except _DECODE_ERRORS:
            events = self._joined(tail, number)
        if events:
            bad = self._check_order(events)
            if bad is not None:
                raise self.error(bad[1], number)
            self.line_no += 1
            return events
        self.truncated = True
        self.warn(
            f"line {number} is cut off (the run was killed while writing it); dropped it and "
            f"kept the {self.line_no} lines before"
        )
        return []


def iter_events(
    path: str | os.PathLike, on_warning: Callable[[str], None] | None = None
) -> Iterator[Event]:
    """Stream a recording's events in file order (start first), in bounded memory.

    Raises :class:`RecordingError` on damage (possibly after yielding the events
    before it); calls ``on_warning(message)`` for what is forgiven."""
    reader = _Reader(path, on_warning)
    for batch in reader.batches():
        yield from batch


def load_run(
    path: str | os.PathLike,
    on_warning: Callable[[str], None] | None = None,
    *,
    max_bytes: int = LOAD_LIMIT_BYTES,
) -> LoadedRun:
    """Read a whole recording into memory; raises :class:`RecordingError` on damage.

    ``max_bytes`` bounds the (uncompressed) size held in memory."""
    warnings: list[str] = []

    def warn(message: str) -> None:
        warnings.append(message)
        if on_warning is not None:
            on_warning(message)

    reader = _Reader(path, warn, max_bytes)
    events: list[Event] = []
    for batch in reader.batches():
        events.extend(batch)
    assert reader.start is not None  # batches() raises otherwise
    return LoadedRun(
        path=reader.path,
        start=reader.start,
        events=events,
        end=reader.end,
        warnings=warnings,
        truncated=reader.truncated,
        schema=reader.schema,
    )
