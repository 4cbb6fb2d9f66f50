"""A child's output line as a terminal would show it.

Progress bars (Keras's, tqdm's) redraw one line: ``\\r`` goes back to column 0
and what follows overwrites it, ``\\b`` steps back one column, ``ESC[K`` erases
to the end of the line, and ANSI SGR codes (``ESC[32m``) colour the text. Read
from a pipe, such a line arrives as every state it went through, concatenated.
:func:`settle_line` keeps what the terminal would show at the end: the last
state of the line, with its colours (SGR codes) kept and every other escape
sequence dropped; :func:`plain` drops the colours too.
"""

from __future__ import annotations

import re

from gpuscale.formatting import visible

_ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
"""CSI sequences (colours, erase, cursor moves), OSC sequences (titles, links), and
two-character escapes."""
_TOKENS = re.compile(_ESCAPE.pattern + r"|[\r\b]|[^\x1b\r\b]+|\x1b")
_RESET = "\x1b[0m"


def settle_line(text: str) -> str:
    """The final state of one output line (see the module docstring)."""
    if "\r" not in text and "\b" not in text and "\x1b" not in text:
        return text
    cells: list[tuple[str, str]] = []  # (character, the SGR codes in force for it)
    style = ""
    col = 0
    for token in _TOKENS.findall(text):
        if token == "\r":
            col = 0
        elif token == "\b":
            col = max(0, col - 1)
        elif token.startswith("\x1b"):
            if token.startswith("\x1b[") and token.endswith("m"):
                style = "" if token in ("\x1b[m", "\x1b[0m") else style + token
            elif token.startswith("\x1b[") and token.endswith("K"):
                mode = token[2:-1] or "0"
                if mode == "0":
                    del cells[col:]
                elif mode == "2":
                    cells = [(" ", "")] * col
            # other sequences (cursor moves, titles) do not change the line's text
        else:
            for char in token:
                if col < len(cells):
                    cells[col] = (char, style)
                else:
                    cells.extend([(" ", "")] * (col - len(cells)))
                    cells.append((char, style))
                col += 1
    out: list[str] = []
    current = ""
    for char, cell_style in cells:
        if cell_style != current:
            out.append(_RESET if not cell_style else (_RESET if current else "") + cell_style)
            current = cell_style
        out.append(char)
    if current:
        out.append(_RESET)
    return "".join(out).rstrip()


def plain(text: str) -> str:
    """The final state of the line without colours."""
    return _ESCAPE.sub("", settle_line(text))


_SGR = re.compile(r"(\x1b\[[0-9;]*m)")


def settle_visible(text: str) -> str:
    """:func:`settle_line` made safe to show: its colours (SGR codes) kept, every
    other control character in it shown escaped (:func:`gpuscale.formatting.visible`),
    so a script's output can colour its own text but never move the cursor, set
    the window title or clear the screen. For ``rich.text.Text.from_ansi``."""
    parts = _SGR.split(settle_line(text))
    return "".join(
        part if i % 2 else visible(part, keep_newlines=True) for i, part in enumerate(parts)
    )
