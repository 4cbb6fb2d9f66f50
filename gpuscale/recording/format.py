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


def gzip_damage_warning(problem: str, lines: int) -> str:
    """What is said of a ``.gz`` recording whose gzip data is damaged after ``lines``
    whole lines (:func:`gzip_problem`'s ``problem``), which are read: ``its gzip data
    is damaged after line 90: the 90 lines before it are read``; the same words in
    ``replay``, ``recommend --from`` and ``runs``."""
    kept = "the line before it is read" if lines == 1 else f"the {lines:,} lines before it are read"
    return f"{problem}: {kept}"


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
