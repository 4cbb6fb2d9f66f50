"""Read a recording back: safely (any damage is one clear error) and fast.

How it stays fast: the file is read in 1 MiB (1,048,576-byte) chunks, each cut at its last
newline and decoded in one call to msgspec's ``Decoder.decode_lines``, which
parses and validates every line against the typed schema in C (no dicts, no
per-line Python call). Only when a chunk fails (or holds a line that is not
exactly one event) is it decoded again line by line, to name the bad line.

How it stays safe: nothing is executed (JSON only, decoded into typed structs);
memory is bounded (one chunk plus one line of at most
:data:`~gpuscale.recording.format.MAX_LINE_BYTES`; gzip output is decompressed
a chunk at a time, so a compression bomb is read like a large file, with at most
:data:`GZIP_HOLD_BYTES` held until its member's checksum is read; :func:`load_run`
counts the memory the decoded events take, not only their text); files are
opened through :mod:`gpuscale.events.bounded` (devices refused, a FIFO without a
writer not waited on); the start line's nesting is checked before it is decoded;
values outside the plausible ranges of :mod:`gpuscale.events.limits` are refused
by the schema; every problem becomes a :class:`RecordingError` naming the file
and the line, after the events before it were yielded (:func:`iter_events`).

What is forgiven, with a one-line warning: a cut-off last line (the writer was
killed while writing it), a gzip stream that ends early (the same crash), gzip data
damaged mid-way (the whole lines before the damage are read, and the gzip members
after it, with the part of the run lost: :func:`gunzip_chunks`,
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
import stat
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
    gzip_loss_words,
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
_event_decoder = msgspec.json.Decoder(Event)
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


def is_event(
    part: bytes, decode: Callable[[bytes], object] | None = None, newer_minor: bool = False
) -> bool:
    """Whether ``part`` is an event (``decode`` does not raise), or, with
    ``newer_minor`` (a file of a newer minor version), an event of a kind this
    gpuscale does not know: what :func:`joined_parts` splits a line by, in the
    reader and the listing alike."""
    try:
        (decode or _event_decoder.decode)(part)
    except _DECODE_ERRORS:
        return newer_minor and _unknown_kind(part)
    return True


def decode_parts(
    parts: list[bytes], decode: Callable[[bytes], Event] | None = None
) -> tuple[list[Event], list[tuple[bytes, Exception]]]:
    """The events of :func:`joined_parts`'s ``parts``, and the parts that are none
    with why."""
    decode = decode or _event_decoder.decode
    events: list[Event] = []
    damaged: list[tuple[bytes, Exception]] = []
    for part in parts:
        try:
            events.append(decode(part))
        except _DECODE_ERRORS as exc:
            damaged.append((part, exc))
    return events, damaged


def joined_events(
    line: bytes, decode: Callable[[bytes], Event] | None = None, newer_minor: bool = False
) -> list[Event]:
    """The events of a line holding several run together (a newline lost), as the
    reader reads them: split by :func:`joined_parts` (with its early give-up) where
    the first part is an event (:func:`is_event`), the parts that are events. Empty
    when ``line`` is no such line."""
    decode = decode or _event_decoder.decode
    parts = joined_parts(line, lambda part: is_event(part, decode, newer_minor))
    return decode_parts(parts, decode)[0] if parts else []


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
    it decoded of its members whose checksum matched was yielded
    (:func:`gunzip_chunks`); :attr:`text` is what it decoded of the last, cut
    before its checksum (so not verified)."""

    def __init__(self, text: bytes = b""):
        super().__init__("the gzip stream ends early")
        self.text = text


class GzipDamaged(Exception):
    """zlib refused a gzip stream (:func:`gunzip_chunks`): what it decoded before
    was yielded, but for :attr:`salvaged`. ``fatal``: the file's first gzip header
    is damaged (it is not gzip at all), so nothing of it can be read. Raised where
    nothing after the damage can be read; yielded (a gap in the text) where a later
    gzip member is read on from (:attr:`resumed_at`)."""

    def __init__(
        self,
        error: zlib.error,
        first_member: bool,
        salvaged: bytes,
        noticed_at: int | None = 0,
        file_size: int | None = None,
    ):
        super().__init__(str(error))
        self.error = error
        self.first_member = first_member
        self.fatal = first_member and gzip_header_damaged(error)
        self.salvaged = salvaged
        """What zlib decoded of the damaged gzip member and not yet yielded: the
        text before the damage, and maybe garbage after it (up to where zlib
        noticed); the same for a member whose checksum does not match."""
        self.noticed_at = noticed_at
        """Offset in the file (compressed bytes) where zlib noticed the damage: the
        damage is there or a little before."""
        self.file_size = file_size
        """The file's size in bytes (``None`` when not a regular file)."""
        self.resumed_at: int | None = None
        """Offset in the file of the gzip member read on from; ``None``: none."""

    def problem(self, after_line: int = 0) -> str:
        """What is wrong, in the words of :func:`~gpuscale.recording.format.gzip_problem`."""
        return gzip_problem(self.error, first_member=self.first_member, after_line=after_line)


SALVAGE_BYTES = 64
"""Compressed bytes fed at a time to decode what comes before damaged gzip data."""

GZIP_HOLD_BYTES = 2 * 1024 * 1024
"""Decompressed text :func:`gunzip_chunks` holds back until its gzip member's
checksum is read and matches: damaged deflate data decodes to garbage (often
copies of earlier lines, which read as events out of order) before zlib notices,
so text is yielded once its member is verified, or once this much follows it in
one member (the recorder starts a new member every
:data:`~gpuscale.recording.writer.GZIP_MEMBER_BYTES`, so its members are always
verified before they are read)."""

_MEMBER_HEADER = b"\x1f\x8b\x08"
"""How a gzip member begins: its magic number and the deflate method."""
MEMBER_CHECK_BYTES = 4096
"""Compressed bytes a candidate gzip member is tried on, after damage."""


def _gunzipper():
    return zlib.decompressobj(16 + zlib.MAX_WBITS)


def gunzip_chunks(f, size: int = CHUNK_BYTES) -> Iterator[bytes | GzipDamaged]:
    """The decompressed bytes of the gzip file ``f`` (concatenated members too), at
    most ``size`` at a time, so that a compression bomb is read like a large file;
    a member's text is held back (up to :data:`GZIP_HOLD_BYTES`) until its
    checksum matches. Raises :class:`GzipCut` with the last member's text when the
    stream ends early (a crash while writing: that text is not verified). Where zlib refuses the data, the member's
    text not yet yielded (and what decodes of the refused call before the damage:
    the call is repeated on a copy of the decompressor, :data:`SALVAGE_BYTES` at a
    time; zlib's output of a refused call is otherwise lost) is the ``salvaged`` of
    a :class:`GzipDamaged`: yielded, and the bytes of the next gzip member after the
    damage follow (gzip data cannot be read on past damage within a member, but a
    new member starts afresh), or raised where there is none. ``OSError`` passes
    through."""
    raw = b""  # compressed bytes read last
    raw_at = 0  # their offset in the file
    pos = 0  # of raw, fed to the decompressor so far
    previous = b""  # the compressed bytes read before raw
    member_at = 0
    first_member = True
    fed = False  # the current member has been fed bytes
    decomp = _gunzipper()
    held = bytearray()
    while True:
        damage: GzipDamaged | None = None
        if pos >= len(raw):
            data = f.read(size)
            if not data:
                if not fed:
                    return  # clean end of the last gzip member
                try:
                    held += decomp.flush()
                except zlib.error as exc:
                    damage = GzipDamaged(
                        exc, first_member, bytes(held), raw_at + pos, _file_size(f)
                    )
                else:  # cut off, or damaged so that zlib ran on into the members after it
                    damage = GzipDamaged(_RAN_ON, first_member, bytes(held), None, _file_size(f))
            else:
                previous, raw, raw_at, pos = raw, data, raw_at + len(raw), 0
        if damage is None:
            before = decomp.copy()
            data = memoryview(raw)[pos:]
            try:
                out = decomp.decompress(data, size)
            except zlib.error as exc:
                salvaged, noticed = _salvage(before, data, size)
                damage = GzipDamaged(
                    exc, first_member, bytes(held) + salvaged, raw_at + pos + noticed, _file_size(f)
                )
        if damage is not None:
            found = None
            if not damage.fatal:
                found = _next_member(f, previous + raw, raw_at - len(previous), member_at + 1, size)
            if found is None:
                if damage.error is _RAN_ON:
                    raise GzipCut(damage.salvaged)
                raise damage from None
            raw, raw_at = found
            previous, pos = b"", 0
            damage.resumed_at = member_at = raw_at
            first_member, fed, decomp, held = False, False, _gunzipper(), bytearray()
            yield damage
            continue
        fed = True
        # at a member's end what follows it is unused_data; zlib leaves the call's
        # unconsumed_tail as it was when the output limit was reached in that call
        # too (the same bytes), so the two are never added up
        pos = len(raw) - len(decomp.unused_data if decomp.eof else decomp.unconsumed_tail)
        held += out
        if decomp.eof:  # the member's checksum matched: its text is whole
            yield from _release(held, size)
            member_at = raw_at + pos
            first_member, fed, decomp = False, False, _gunzipper()
        elif len(held) > GZIP_HOLD_BYTES + size:
            yield from _release(held, size, keep=GZIP_HOLD_BYTES)


_RAN_ON = zlib.error("Error -3 while decompressing data: a gzip member runs on into the next")
"""The damage of a gzip member that zlib decoded to the file's end without noticing
damage, where a gzip member begins after it: damage made it run on into it."""


def _release(held: bytearray, size: int, keep: int = 0) -> Iterator[bytes]:
    """``held`` but its last ``keep`` bytes, ``size`` at a time, removed from it."""
    end = len(held) - keep
    for begin in range(0, end, size):
        yield bytes(held[begin : min(begin + size, end)])
    del held[:end]


def _file_size(f) -> int | None:
    try:
        info = os.fstat(f.fileno())
    except (OSError, AttributeError, ValueError):
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def _next_member(f, buf: bytes, buf_at: int, after: int, size: int) -> tuple[bytes, int] | None:
    """The compressed bytes from the first gzip member that begins at or after file
    offset ``after`` on, and its offset: ``buf`` (at offset ``buf_at``) is searched,
    then the rest of ``f``. A member is a gzip header whose first text begins a
    JSON object (a member the recorder started, at a line's start); ``None`` when
    there is none."""
    at = max(after - buf_at, 0)
    ended = False
    while True:
        at = buf.find(_MEMBER_HEADER, at)
        if at >= 0 and (ended or len(buf) - at >= MEMBER_CHECK_BYTES):
            if _begins_text(buf[at : at + MEMBER_CHECK_BYTES]):
                return buf[at:], buf_at + at
            at += 1
            continue
        if ended:
            return None
        data = f.read(size)
        if not data:
            ended = True
            continue
        cut = at if at >= 0 else max(len(buf) - len(_MEMBER_HEADER) + 1, 0)
        buf_at += cut
        buf, at = buf[cut:] + data, 0


def _begins_text(data: bytes) -> bool:
    """Whether ``data`` begins a gzip member whose text begins with ``{``."""
    if len(data) < 10 or data[3] & 0xE0:  # reserved header flags set: not gzip
        return False
    try:
        out = _gunzipper().decompress(data, 64)
    except zlib.error:
        return False
    return out.lstrip(_JSON_SPACE)[:1] == b"{"


def lines_before_damage(
    data: bytes,
    decode: Callable[[bytes], object] | None = None,
    newer_minor: bool = False,
    at_start: bool = False,
    last_t: dict[int, float] | None = None,
    copies: bool = True,
) -> bytes:
    """Of ``data``, the text of a damaged gzip member (decoded before zlib noticed
    the damage, or whose checksum does not match), its whole lines before the first
    that is no event (``decode`` raises; blank lines pass), a copy of an earlier
    line of ``data``, or an event more than TIME_TOLERANCE_S before the latest of
    its worker (``last_t``: the latest read before ``data``, per worker): damaged
    deflate data decodes to garbage, often to copies of earlier text, until zlib
    notices; the same in the reader and the listing. With ``newer_minor``, a line of
    an event kind unknown to this gpuscale passes. ``at_start``: ``data`` is the
    file's first text, its byte-order mark (an editor's) removed, and the lines
    before its first start event pass (the reader judges them: a damaged first
    line). ``copies=False``: a copy of an earlier line passes (the text of a gzip
    member cut off before its checksum, damaged or not). Empty when there is none."""
    decode = decode or _event_decoder.decode
    latest = dict(last_t or {})
    setters: dict[int, tuple[int, float | None]] = {}
    seen: set[bytes] = set()
    if at_start and data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM) :]
    before_start = at_start
    cut = data.rfind(b"\n")
    end = 0
    while end <= cut:
        next_end = data.index(b"\n", end) + 1
        line = data[end:next_end]
        if line.strip(_JSON_SPACE):
            try:
                event = decode(line)
            except _DECODE_ERRORS:
                if not (before_start or (newer_minor and _unknown_kind(line))):
                    break
                event = None
            if before_start and type(event) is StartEvent:  # its version: kinds to skip
                before_start = False
                newer_minor = (parse_version(event.schema) or (0, 0))[1] > READER_MINOR
            if copies and line in seen:
                break
            outlier = _out_of_order(event, end, latest, setters)
            if outlier is not None:
                end = outlier
                break
            if copies:
                seen.add(line)
        end = next_end
    return data[:end]


def _out_of_order(
    event: object, at: int, latest: dict[int, float], setters: dict[int, tuple[int, float | None]]
) -> int | None:
    """Where damaged text goes wrong if ``event`` (its line at offset ``at``) goes
    back in time more than the reader tolerates: at it, or at the line that set its
    worker's latest time where that one jumped ahead (a damaged digit: ``t`` of
    1790000060 for 1790000050) and ``event`` is in order with the time before it.
    ``None`` when in order (``latest`` and ``setters`` are updated)."""
    if event is None or type(event) in (StartEvent, EndEvent):
        return None
    worker, t = getattr(event, "worker", None), getattr(event, "t", None)
    if not isinstance(worker, int) or not isinstance(t, (int, float)):
        return None
    previous = latest.get(worker)
    if type(event) is LogEvent and event.source == CLOCK_SOURCE:
        latest[worker] = t
        setters[worker] = (at, previous)
        return None
    if previous is not None and t < previous - TIME_TOLERANCE_S:
        setter = setters.get(worker)
        if setter is not None and setter[1] is not None and t >= setter[1] - TIME_TOLERANCE_S:
            return setter[0]
        return at
    if previous is None or t > previous:
        latest[worker] = t
        setters[worker] = (at, previous)
    return None


def _unknown_kind(line: bytes) -> bool:
    try:
        kind = _probe_decoder.decode(line).kind
    except _DECODE_ERRORS:
        return False
    return isinstance(kind, str) and kind not in _KNOWN_KINDS


def _salvage(decomp, data: bytes, size: int) -> tuple[bytes, int]:
    """What ``decomp`` decodes of ``data`` before zlib refuses it (at most ``size``
    bytes: the call that failed asked for no more), and the offset in ``data`` of
    the byte refused: fed :data:`SALVAGE_BYTES` at a time, and the piece it refuses
    again a byte at a time (a refused call's output is lost, and a piece of
    compressed bytes can hold several lines)."""
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
    return b"".join(out), min(begin, len(data))


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
        self._gap: tuple[GzipDamaged, int, float | None] | None = None
        """Damaged gzip data read on past (the damage, lines before it, the run's
        time before it), until the first line after it says the time lost."""
        self.gaps = 0
        """Places gzip data was damaged and read on past."""

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
            gap: GzipDamaged | None = None
            chunks = self.chunks(f)
            while gzip_damage is None and not stream_cut:
                if gap is not None:  # the lines before a gap are read
                    if not self.started:
                        raise self.error(gap.problem())
                    self._gap_opened(gap)
                    gap = None
                try:
                    chunk = next(chunks)
                except StopIteration:
                    break
                except GzipCut as cut:  # the last member's text, read as far as it is whole
                    stream_cut = True
                    chunk = cut.text
                    gzip_damage = self._cut_member_damage(pending, chunk)
                    if gzip_damage is not None:
                        chunk = self._before_damage(b"".join(pending) + chunk, copies=False)
                        pending, pending_len = [], 0
                    if self._gap is not None and chunk:
                        self._gap_closed(b"".join(pending) + chunk)
                except GzipDamaged as exc:  # the whole lines before it, then no more
                    gzip_damage = exc
                    chunk = self._before_damage(b"".join(pending) + exc.salvaged)
                    pending, pending_len = [], 0
                    if self._gap is not None and chunk:
                        self._gap_closed(chunk)
                    if not chunk:
                        break
                else:
                    if isinstance(chunk, GzipDamaged):  # the lines before it, then a gap
                        damage = chunk
                        # a later member is read on from: a damaged member's text failed
                        # its checksum, and zlib does not say where, so none of it is
                        # kept (an in-order line may still be made up: a flipped digit);
                        # the first member's lines before the damage are (the start)
                        salvaged = damage.salvaged if damage.first_member else b""
                        chunk = self._before_damage(b"".join(pending) + salvaged)
                        pending, pending_len = [], 0
                        if self._gap is not None:
                            if not chunk:  # nothing read between: one gap, to the later member
                                self._gap = (damage, *self._gap[1:])
                                continue
                            self._gap_closed(chunk)
                        gap = damage
                        if not chunk:
                            continue
                    elif self._gap is not None:
                        self._gap_closed(chunk)
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
            if gap is not None and not self.started:
                raise self.error(gap.problem())
            if self._gap is not None or gap is not None:  # nothing read after the gap
                if gap is not None:
                    self._gap_opened(gap)
                self._gap_closed(b"")
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
        if self.gaps > MAX_SKIP_WARNINGS:
            self.warn(
                f"its gzip data is damaged in {self.gaps} places in all (the first "
                f"{MAX_SKIP_WARNINGS} named above); read the gzip members after each"
            )
        if self.end is None and gzip_damage is None:  # its warning says what is lost
            self.warn(f"no end event after line {self.line_no}: {self._why_no_end()}")

    def _before_damage(self, data: bytes, copies: bool = True) -> bytes:
        """:func:`lines_before_damage`, a line of a kind unknown to this reader in a
        file of a newer minor version taken as whole (it is skipped, not damage)."""
        return lines_before_damage(
            data,
            self.decoder.decode,
            self.newer_minor,
            at_start=self.bytes_read == 0,
            last_t=self.last_t,
            copies=copies,
        )

    def _cut_member_damage(self, pending: list[bytes], text: bytes) -> GzipDamaged | None:
        """The damage in the text of a gzip member cut off before its checksum (not
        verified: damaged data that zlib did not notice decodes to garbage), where
        a whole line of it is no event, or goes back in time: ``None`` if none."""
        data = b"".join(pending) + text
        whole = data.rfind(b"\n") + 1
        if len(self._before_damage(data, copies=False)) == whole:
            return None
        error = zlib.error("Error -3 while decompressing data: damaged text in a cut member")
        return GzipDamaged(error, False, b"", noticed_at=None)

    def _damaged_stream(self, damage: GzipDamaged) -> None:
        """Gzip data damaged after some lines, none readable after: they are kept
        (what decoded after them is not: :meth:`_before_damage`), with a warning
        saying what is lost; with no line yet, nothing to read."""
        if not self.started:
            raise self.error(damage.problem())
        self.truncated = True
        lost = ""  # its end event was read before the damage: nothing of the run is lost
        if self.end is None:
            lost = gzip_loss_words(
                self._run_time(), None, damage.noticed_at, damage.file_size, resumed_at=None
            )
        self.warn(gzip_damage_warning(damage.problem(self.line_no), self.line_no, lost))

    def _run_time(self) -> float | None:
        """Seconds into the run of the latest event read (``None``: none yet)."""
        if self.start is None or not self.last_t:
            return None
        return max(max(self.last_t.values()) - self.start.t, 0.0)

    def _gap_opened(self, gap: GzipDamaged) -> None:
        """Gzip data damaged, a later member read on from: said once its first line
        is seen (:meth:`_gap_closed`), with the time lost."""
        self._gap = (gap, self.line_no, self._run_time())
        self.last_t.clear()  # lines were lost: the order starts again after the gap

    def _gap_closed(self, chunk: bytes) -> None:
        """Say what the gap lost: the run from the last event before it to the first
        after it (the first line of ``chunk``, the text after the gap)."""
        assert self._gap is not None
        gap, lines, before = self._gap
        self._gap = None
        after = None
        first = chunk.lstrip(_JSON_SPACE).partition(b"\n")[0]
        if first and self.start is not None:
            try:
                event = self.decoder.decode(first)
            except _DECODE_ERRORS:
                event = None
            if event is not None and type(event) not in (StartEvent, EndEvent):
                after = max(event.t - self.start.t, 0.0)
        self.gaps += 1
        if self.gaps > MAX_SKIP_WARNINGS:
            return
        lost = gzip_loss_words(before, after, gap.noticed_at, gap.file_size, gap.resumed_at)
        self.warn(gzip_damage_warning(gap.problem(lines), lines, lost))

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
        return is_event(part, self.decoder.decode, self.newer_minor)

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
        events, damaged = decode_parts(
            parts[1:] if first is not None else parts, self.decoder.decode
        )
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
