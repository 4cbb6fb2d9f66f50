"""Rules of the recording format shared by the writer and the reader.

A recording is one run: newline-delimited JSON, one event per line
(:mod:`gpuscale.events.schema`), the start event first, the end event last,
optionally gzip-compressed. ``docs/recording-format.md`` is the user-facing
description; this module holds the numbers both sides must agree on.
"""

from __future__ import annotations

import re

import msgspec

from gpuscale.events.schema import SCHEMA_MAJOR, SCHEMA_VERSION
from gpuscale.formatting import format_duration_s

TIME_TOLERANCE_S = 5.0
"""How far ``t`` may go backwards between two consecutive events of one worker.

Events reach the recorder from several threads and processes (the sampler, the
trainer over TCP), so arrival order can differ from ``t`` order by a little;
more than this is damage (a shuffled or spliced file). The start and end
events are not part of this order (they are placed first and last by position):
the start may be composed after sampling began, and the end when the trainer
finished, before the last samples arrived."""

CLOCK_SOURCE = "clock"
"""``source`` of the ``log`` event the recorder writes where a worker's wall clock
stepped back by more than :data:`TIME_TOLERANCE_S` (an NTP step, a VM resume):
the events after it keep their own ``t`` and the order rule starts again from
the marker's ``t`` (the file's line order is the order of arrival)."""

MAX_LINE_BYTES = 32 * 1024 * 1024
"""No event line is longer; a longer one means the file is not a recording
(and the reader never has to hold more than this for one line)."""

SUFFIXES = (".ndjson", ".ndjson.gz", ".jsonl", ".jsonl.gz")
"""File names the store lists as recordings."""

GZIP_MAGIC = b"\x1f\x8b"

GZIP_CUT_AT_START = "cut off: its gzip data ends before its first line"
"""What a ``.gz`` recording is said to be when its gzip stream ends before any text."""


def gzip_problem(exc: Exception, *, first_member: bool = True, after_line: int = 0) -> str:
    """What zlib's error (``Error -3 while decompressing data: unknown header flags
    set``) says is wrong with a ``.gz`` recording, in a user's words, the same in
    ``runs``, ``replay`` and ``recommend --from``: its header is not gzip's (``not a
    gzip file``; after a complete gzip stream, something else appended), or its
    compressed data (or their checksum) is damaged, ``after_line`` lines in when
    known (zlib does not say where). A stream that merely ends early (cut off)
    raises no error: readers say so themselves (:data:`GZIP_CUT_AT_START`)."""
    reason = str(exc).rpartition(": ")[2]
    after = f" after line {after_line:,}" if after_line else ""
    if gzip_header_damaged(exc):
        if first_member:
            return "not a gzip file (it starts like one, but its gzip header is damaged)"
        return f"something that is not gzip follows its gzip data{after} (damaged, or appended)"
    if reason in ("incorrect data check", "incorrect length check"):
        return f"its gzip data is damaged{after} (its checksum does not match)"
    return f"its gzip data is damaged{after}"


def gzip_header_damaged(exc: Exception) -> bool:
    """Whether zlib's error is about a gzip header (not gzip there at all)."""
    reason = str(exc).rpartition(": ")[2]
    return "header" in reason or reason in ("unknown compression method", "invalid window size")


def gzip_damage_warning(problem: str, lines: int, lost: str = "") -> str:
    """What is said of a ``.gz`` recording whose gzip data is damaged after ``lines``
    whole lines (:func:`gzip_problem`'s ``problem``), which are read, and what is
    lost (:func:`gzip_loss_words`): ``its gzip data is damaged after line 90: the 90
    lines before it are read; ...``; the same words in ``replay``, ``recommend
    --from`` and ``runs``."""
    kept = "the line before it is read" if lines == 1 else f"the {lines:,} lines before it are read"
    return f"{problem}: {kept}" + (f"; {lost}" if lost else "")


def is_gzip_damage_warning(text: str) -> bool:
    """Whether a reader's warning (without its file name) is
    :func:`gzip_damage_warning`'s (the listing shows those as the file's damage)."""
    return text.startswith(("its gzip data is damaged", "something that is not gzip follows"))


def gzip_loss_words(
    before_s: float | None,
    after_s: float | None,
    noticed_at: int | None,
    file_size: int | None,
    resumed_at: int | None,
) -> str:
    """What damaged gzip data loses, of the run (``before_s``: seconds into it of
    the last event read before the damage; ``after_s``: of the first read after it)
    and of the file (zlib noticed the damage at byte ``noticed_at``, ``None`` where
    the text of a gzip member cut off before its checksum holds it; ``resumed_at``:
    the offset of the later gzip member read on from, ``None`` when there is none):
    ``the run after 1m 05s is lost (damage noticed at byte 40,000 of 52,000; no
    later gzip member to read on from)``, or ``read on from the next gzip member (byte 48,000): the run
    from 1m 05s to 1m 20s is lost``."""
    since = f"from {format_duration_s(before_s)}" if before_s is not None else "from its start"
    if resumed_at is not None:
        until = f" to {format_duration_s(after_s)}" if after_s is not None else ""
        return (
            f"read on from the next gzip member (byte {resumed_at:,}): "
            f"the run {since}{until} is lost"
        )
    after = since.replace("from", "after", 1)
    if noticed_at is None:
        return (
            f"the run {after} is lost (its last gzip member, cut off before its checksum, "
            "holds text that is no event in order there)"
        )
    where = f"byte {noticed_at:,}" + (f" of {file_size:,}" if file_size else "")
    return (
        f"the run {after} is lost (damage noticed at {where}; no later gzip member to read on from)"
    )


DECODE_ERRORS = (msgspec.MsgspecError, RecursionError, ValueError, TypeError, OverflowError)
"""What decoding untrusted bytes with msgspec can raise (ValueError covers
invalid UTF-8 in strings; RecursionError, JSON nested too deeply)."""

_VERSION_RE = re.compile(r"^(\d{1,6})\.(\d{1,6})$")

READER_MINOR = int(SCHEMA_VERSION.split(".")[1])


def parse_version(text: str) -> tuple[int, int] | None:
    """``"1.0"`` -> ``(1, 0)``; ``None`` when ``text`` is not ``MAJOR.MINOR``."""
    match = _VERSION_RE.match(text)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


def version_problem(text: str) -> str | None:
    """Why a file of schema version ``text`` cannot be read, or ``None`` if it can.

    Same major version: readable (a newer minor only adds optional fields and
    event kinds, which this reader ignores). Other major: refused, naming both."""
    parsed = parse_version(text)
    if parsed is None:
        return f"unknown recording format version {text[:40]!r} (expected MAJOR.MINOR)"
    if parsed[0] != SCHEMA_MAJOR:
        from gpuscale import __version__

        return (
            f"recording format {text}, but this gpuscale ({__version__}) reads format "
            f"{SCHEMA_MAJOR}.x (it writes {SCHEMA_VERSION}); "
            + (
                "upgrade gpuscale to read it"
                if parsed[0] > SCHEMA_MAJOR
                else "read it with an older gpuscale"
            )
        )
    return None
