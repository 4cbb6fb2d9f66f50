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

import difflib
import os
import re
import stat
from typing import Any

import msgspec
import msgspec.inspect

from gpuscale.errors import folder_given_reason

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
        where = _out_of_range_at(data) if _out_of_range(exc) and decoder is None else None
        if where is not None:  # msgspec's path is `$[...]`: it names no key
            raise JsonInputError(f"{where[0]} must be a finite number (got {where[1]})") from None
        raise JsonInputError(plain_validation_message(exc)) from None
    except msgspec.DecodeError as exc:
        raise JsonInputError(f"not valid JSON ({json_problem(exc)})") from None
    except RecursionError:
        raise JsonInputError(f"JSON nested more than {max_depth} levels deep") from None
    except DECODE_ERRORS as exc:
        raise JsonInputError(f"not valid JSON ({exc})") from None


def json_problem(exc: Exception) -> str:
    """msgspec's decode error as a plain clause, the same words wherever JSON is
    read (a sweep file, a recording's line): ``JSON is malformed: invalid
    character (byte 0)`` -> ``invalid character at byte 0``; ``Input data was
    truncated`` -> ``it ends early``."""
    text = str(exc).removeprefix("JSON is malformed: ")
    if text == "Input data was truncated":
        return "it ends early"
    return text.replace(" (byte ", " at byte ").removesuffix(")") if "(byte " in text else text


def _out_of_range(exc: Exception) -> bool:
    return str(exc).startswith("Number out of range")


class _Huge:
    """A number a float cannot hold, kept as its text to name where it is."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


def _float_or_huge(text: str) -> Any:
    value = float(text)
    return _Huge(text) if value in (float("inf"), float("-inf")) else value


def _out_of_range_at(data: bytes) -> tuple[str, str] | None:
    """Where the first number beyond a float's range (``1e999``) is in the JSON
    document ``data``, as ``(points[0].step_time_s, "1e999")``; ``None`` when it
    cannot be found. Its text is decoded again with such numbers kept as text
    (a rare error path: the cost of a second decode does not matter)."""
    try:
        document = msgspec.json.Decoder(float_hook=_float_or_huge).decode(data)
    except DECODE_ERRORS:
        return None
    stack: list[tuple[Any, str]] = [(document, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, _Huge):
            return path.lstrip(".") or "the file", item.text[:40]
        if isinstance(item, dict):
            children = [(v, path + _key(k)) for k, v in item.items()]
        elif isinstance(item, list):
            children = [(v, f"{path}[{i}]") for i, v in enumerate(item)]
        else:
            continue
        stack.extend(reversed(children))  # depth first, in the document's order
    return None


def _key(name: str) -> str:
    return f".{name}" if re.fullmatch(r"\w+", name) else f"[{_shown(name)}]"


def plain_validation_message(
    exc: Exception, data: Any = None, *, at: str = "", type: Any = None
) -> str:
    """msgspec's validation message (``Expected `float` >= 1e-06 - at `$.throughput```)
    in a user's words, one line: ``throughput must be a positive number (got 0)``.

    ``data`` is what was validated: the value at fault is quoted from it. ``at``
    names where ``data`` sits (``points[0]``, so ``points[0].throughput``); ``type``,
    the struct it was validated as, lists the values an enum takes and names the
    field an unknown key probably meant. A message of another shape is kept,
    with its ``$.`` path made readable."""
    text = " ".join(str(exc).split())
    match = re.fullmatch(r"(.*?)(?: - at `\$([^`]*)`)?", text)
    body, path = match.group(1), match.group(2) or ""
    where = (at + path).lstrip(".") or "the file"
    value = _value_at(data, path)
    got = f" (got {_shown(value[0])})" if value else ""
    field = re.findall(r"\.(\w+)", path)
    if m := re.fullmatch(r"Expected `([^`]+)`, got `([^`]+)`", body):
        got = got or f" (got {_KINDS.get(m.group(2), m.group(2))})"
        return f"{where} must be {_kind(m.group(1))}{got}"
    if m := re.fullmatch(r"Expected `([^`]+)` (>=|>|<=|<) (\S+)", body):
        return f"{where} must be {_bound(m.group(2), m.group(3), value)}{got}"
    if m := re.fullmatch(r"Invalid enum value (.+)", body):
        values = _field_values(type, field[-1]) if len(field) == 1 else None
        one_of = _either(values) if values else "a value it takes"
        return f"{where} must be {one_of}{got or f' (got {m.group(1)})'}"
    if body == "Number out of range":
        return f"{where} must be a finite number{got}"
    if m := re.fullmatch(r"Object missing required field `([^`]+)`", body):
        values = _field_values(type, m.group(1)) if not path else None
        return f"{where} needs {m.group(1)}" + (f" ({_either(values)})" if values else "")
    if m := re.fullmatch(r"Object contains unknown field `([^`]+)`", body):
        names = _field_names(type) if not path else []
        close = difflib.get_close_matches(m.group(1), names, n=1)
        meant = f" (did you mean {close[0]}?)" if close else ""
        return f"{where} has an unknown key {_shown(m.group(1))}{meant}"
    return text.replace("`$.", "`").replace("`$`", "the file")


def validation_key(exc: Exception) -> str | None:
    """The top-level key a msgspec validation error is about (the unknown key, or
    the first field of its ``$.`` path); ``None`` when it names none (a missing
    field, a fault in the object as a whole)."""
    text = " ".join(str(exc).split())
    if m := re.search(r"unknown field `([^`]+)`(?: - at `\$`)?$", text):
        return m.group(1)
    m = re.search(r" - at `\$\.(\w+)", text)
    return m.group(1) if m else None


_KINDS = {
    "int": "a whole number",
    "float": "a number",
    "str": "text",
    "bool": "true or false",
    "array": "a list",
    "object": "an object",
}


def json_kind(name: str) -> str:
    """msgspec's name of a JSON type (``int``, ``object``) in words (``a whole
    number``, ``an object``)."""
    return _KINDS.get(name, name)


def _either(values: list[str]) -> str:
    """``"a", "b" or "c"``."""
    return " or ".join([", ".join(values[:-1]), values[-1]] if len(values) > 1 else values)


def _kind(expected: str) -> str:
    """``float | null`` -> ``a number``: what msgspec expected, in words."""
    kinds = [_KINDS.get(k, k) for k in expected.split(" | ") if k != "null"]
    return " or ".join(dict.fromkeys(kinds)) or "null"


def _bound(op: str, bound: str, value: tuple[Any] | None) -> str:
    """The range a number broke, in words: ``at least 1``, ``a positive number``."""
    limit = float(bound)
    shown = f"{int(limit):,}" if limit.is_integer() and abs(limit) < 1e7 else f"{limit:g}"
    got = value[0] if value and isinstance(value[0], (int, float)) else None
    if op == ">" and limit == 0 or op == ">=" and 0 < limit < 1 and got is not None and got <= 0:
        return "a positive number"
    if op == ">=":
        return "0 or more" if limit == 0 else f"at least {shown}"
    if op == ">":
        return f"more than {shown}"
    return f"at most {shown}" if op == "<=" else f"less than {shown}"


def _value_at(data: Any, path: str) -> tuple[Any] | None:
    """The value at a msgspec path (``.points[0].devices``) in ``data``, as a
    1-tuple; ``None`` when there is none to quote."""
    if data is None or not path:
        return None
    item = data
    for name, index in re.findall(r"\.(\w+)|\[(\d+)\]", path):
        try:
            item = item[name] if name else item[int(index)]
        except (KeyError, IndexError, TypeError):
            return None
    return (item,)


def _shown(value: Any) -> str:
    """A value as the JSON that gave it, cut to 40 characters."""
    try:
        text = msgspec.json.encode(value).decode()
    except (TypeError, ValueError, msgspec.EncodeError):
        text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _struct_fields(type: Any) -> list[Any]:
    try:
        info = msgspec.inspect.type_info(type)
    except (TypeError, ValueError):
        return []
    return list(getattr(info, "fields", ()))


def _field_names(type: Any) -> list[str]:
    return [f.encode_name for f in _struct_fields(type)]


def _field_values(type: Any, name: str) -> list[str] | None:
    """The values a ``Literal`` field of struct ``type`` takes, quoted as JSON."""
    for f in _struct_fields(type):
        if f.encode_name == name:
            kinds = getattr(f.type, "types", (f.type,))  # ``Literal[...] | None``
            values = [v for k in kinds for v in getattr(k, "values", ())]
            return [_shown(v) for v in values] or None
    return None


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
        raise JsonInputError(folder_given_reason(path)) from None
    except PermissionError:
        raise JsonInputError("permission denied (cannot read the file)") from None
    except OSError as exc:
        raise JsonInputError(f"cannot open: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise JsonInputError(folder_given_reason(path))
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
    "json_kind",
    "json_problem",
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
