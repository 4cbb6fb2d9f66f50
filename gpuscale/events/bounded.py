"""Reading JSON nobody vouched for: bounded before it is decoded.

Every JSON gpuscale reads (recordings, sweep files, transport frames, ``--json``
output read back, ``TF_CONFIG``) comes from a file, a pipe, the network or the
environment, and may be damaged or hostile. This module is the one place that
makes such input safe to hand to a decoder:

* **Bytes are bounded before anything is decoded.** :func:`read_bounded` reads a
  regular file only if its size is within the cap, reads a pipe or FIFO (e.g.
  ``<(cmd)``) up to the cap and no further, and refuses devices (``/dev/zero``,
  ``/dev/urandom``) outright. A FIFO without a writer reads as empty instead of
  blocking for ever.
* **Depth is bounded before a recursive decoder sees it.**
  :func:`too_deep` finds nesting deeper than :data:`MAX_DEPTH` in C-speed passes
  (strings removed, then the innermost bracket pairs peeled off once per level),
  so neither msgspec nor any later recursive code (Rich, ``json``, ``to_builtins``)
  meets a ``[[[[...`` of 100,000 levels.
* **A UTF-8 byte-order mark is accepted** (:func:`strip_bom`): editors on Windows
  write one, and it is not JSON's business.

:func:`decode_json` puts these together for one document. Errors are
:class:`JsonInputError` with a reason only; the caller adds the file and line
(``gpuscale: error: FILE: line N: reason``).

Headless: imports nothing but the standard library and msgspec.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Any

import msgspec

MAX_DEPTH = 64
"""Deepest JSON nesting gpuscale accepts anywhere. Its own files nest at most 5
levels (a sweep file's recommendation; a start event's ``config``); 64 leaves
room for a user's configuration and stays far below Python's recursion limit
(1,000), so any recursive code that later walks the data is safe."""

UTF8_BOM = b"\xef\xbb\xbf"

_READ_CHUNK = 1024 * 1024

DECODE_ERRORS = (msgspec.MsgspecError, RecursionError, ValueError, TypeError, OverflowError)
"""What decoding untrusted bytes with msgspec can raise (ValueError covers
invalid UTF-8 in strings; RecursionError, JSON nested too deeply)."""


class JsonInputError(ValueError):
    """Input that cannot be read safely; ``str(error)`` is the reason, without the
    file name (the caller adds it)."""


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def too_deep(data: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether ``data`` (JSON text, one or many documents) nests arrays/objects
    more than ``limit`` levels deep. Brackets inside strings do not count.

    Linear in ``len(data)`` per level peeled, all in C: for well-formed input
    each pass removes one level, so input within the limit costs at most
    ``limit`` passes over its brackets (not over its text)."""
    if data.count(b"[") + data.count(b"{") <= limit:
        return False  # fewer openers than the limit cannot nest deeper
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    for _ in range(limit):
        if not brackets:
            return False
        peeled = brackets.replace(b"[]", b"").replace(b"{}", b"")
        if peeled == brackets:
            return _max_depth_slow(brackets, limit) > limit  # unbalanced (not JSON)
        brackets = peeled
    return bool(brackets)


def _max_depth_slow(brackets: bytes, limit: int) -> int:
    """Nesting of a bracket string that does not pair up, stopping past ``limit``."""
    depth = deepest = 0
    for byte in brackets:
        if byte in b"[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif depth:
            depth -= 1
    return deepest


def strip_bom(data: bytes) -> bytes:
    """``data`` without a leading UTF-8 byte-order mark."""
    return data[3:] if data.startswith(UTF8_BOM) else data


def check_depth(data: bytes, limit: int = MAX_DEPTH) -> None:
    """Raise :class:`JsonInputError` when ``data`` nests deeper than ``limit``."""
    if too_deep(data, limit):
        raise JsonInputError(f"JSON nested more than {limit} levels deep")


def decode_json(
    data: bytes,
    type: Any = Any,
    *,
    max_bytes: int | None = None,
    max_depth: int = MAX_DEPTH,
    decoder: msgspec.json.Decoder | None = None,
) -> Any:
    """Decode one JSON document of untrusted bytes, safely.

    The byte-order mark is dropped, the size and the depth checked, then
    msgspec decodes (into ``type``, or with ``decoder`` when given). Raises
    :class:`JsonInputError` with a one-line reason for anything wrong, including
    a ``msgspec.ValidationError`` (the reason then says which field)."""
    if max_bytes is not None and len(data) > max_bytes:
        raise JsonInputError(f"longer than {_size(max_bytes)}")
    data = strip_bom(data)
    check_depth(data, max_depth)
    try:
        if decoder is not None:
            return decoder.decode(data)
        return msgspec.json.decode(data, type=type)
    except msgspec.ValidationError as exc:
        raise JsonInputError(plain_validation_message(exc)) from None
    except msgspec.DecodeError as exc:
        raise JsonInputError(f"not valid JSON ({exc})") from None
    except RecursionError:
        raise JsonInputError(f"JSON nested more than {max_depth} levels deep") from None
    except DECODE_ERRORS as exc:
        raise JsonInputError(f"not valid JSON ({exc})") from None


def plain_validation_message(exc: Exception) -> str:
    """msgspec's validation message with ``$.`` paths made readable, on one line."""
    return " ".join(str(exc).replace("`$.", "`").replace("`$`", "the file").split())


def _size(n: int) -> str:
    from gpuscale.formatting import format_bytes

    return format_bytes(n)


def open_untrusted(path: str | os.PathLike) -> tuple[Any, bool]:
    """Open ``path`` for reading bytes without blocking on a FIFO that has no
    writer. Returns ``(file, is_regular)``; a pipe or FIFO is not regular and
    must be read with a cap. Raises :class:`JsonInputError` for a folder, a
    device, or a file that cannot be opened (the reason says which)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise JsonInputError("no such file") from None
    except IsADirectoryError:
        raise JsonInputError("is a folder, not a file") from None
    except PermissionError:
        raise JsonInputError("permission denied (cannot read the file)") from None
    except OSError as exc:
        raise JsonInputError(f"cannot open: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise JsonInputError("is a folder, not a file")
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            raise JsonInputError("is a device, not a file; give a recording or a sweep file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # a FIFO with a writer: wait for its data
        return os.fdopen(fd, "rb"), stat.S_ISREG(mode)
    except BaseException:
        os.close(fd)
        raise


def read_bounded(path: str | os.PathLike, max_bytes: int) -> bytes:
    """The whole content of ``path``, which may not exceed ``max_bytes``.

    A regular file larger than that is refused from its size, before reading; a
    pipe or FIFO is read up to ``max_bytes + 1`` bytes and refused if it has more;
    a device is refused. Raises :class:`JsonInputError` (reason only)."""
    f, regular = open_untrusted(path)
    with f:
        try:
            if regular:
                size = os.fstat(f.fileno()).st_size
                if size > max_bytes:
                    raise JsonInputError(
                        f"{_size(size)} is more than gpuscale reads of such a file "
                        f"({_size(max_bytes)})"
                    )
            parts: list[bytes] = []
            total = 0
            while total <= max_bytes:  # chunks: read(n) would allocate n bytes up front
                part = f.read(min(_READ_CHUNK, max_bytes + 1 - total))
                if not part:
                    break
                parts.append(part)
                total += len(part)
            data = b"".join(parts)
        except OSError as exc:
            raise JsonInputError(f"cannot read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise JsonInputError(f"more than gpuscale reads of such a file ({_size(max_bytes)})")
    return data


def read_head(path: str | os.PathLike, n_bytes: int) -> bytes:
    """Up to the first ``n_bytes`` of ``path`` (same refusals as :func:`read_bounded`).

    Careful: on a pipe the bytes read are consumed; callers that sniff a pipe
    must keep them."""
    f, _regular = open_untrusted(path)
    with f:
        try:
            return f.read(n_bytes)
        except OSError as exc:
            raise JsonInputError(f"cannot read: {exc.strerror or exc}") from None


__all__ = [
    "DECODE_ERRORS",
    "MAX_DEPTH",
    "JsonInputError",
    "check_depth",
    "data_too_deep",
    "decode_json",
    "open_untrusted",
    "plain_validation_message",
    "read_bounded",
    "read_head",
    "strip_bom",
    "too_deep",
]


def data_too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether decoded data (dicts and lists) nests more than ``limit`` levels.

    Iterative (no recursion), and stops at the first container past the limit;
    for free-form fields decoded by a typed decoder whose own guard is deeper."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend(
            (child, depth + 1) for child in children if isinstance(child, (dict, list, tuple))
        )
    return False
