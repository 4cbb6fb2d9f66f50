"""The rich console the text commands (`run`, `recommend`, `devices`) print with.

On a terminal, lines wrap at its width as usual. Off a terminal (a pipe, a file)
a line of text is never hard-wrapped: ``median 477.1 ms`` stays on one line for
``grep`` and for the reader, so text is printed with rich's ``soft_wrap``. Tables
are laid out at :func:`layout_width`: off a terminal every column whole (no 80-column
squeeze), unless a width was asked for (``COLUMNS``, ``width=``). Charts keep the
console's width (80 columns by default, ``COLUMNS`` when set).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import rich.console

if TYPE_CHECKING:
    from rich.console import Console


FULL_WIDTH = 1000
"""The width tables get off a terminal when none was asked for: as wide as they need."""


def _reader_went_away() -> None:
    """The reader went away (``| head -1``): the one handler in
    :func:`gpuscale.cli.main` ends quietly (rich's own exits with status 1)."""
    raise BrokenPipeError


def text_console(**kwargs: Any) -> Console:
    """A :class:`rich.console.Console` (``kwargs`` passed on) whose text lines are
    not wrapped when its output is not a terminal. A closed pipe raises
    :class:`BrokenPipeError`, which :func:`gpuscale.cli.main` turns into a quiet
    exit 0, as for ``print``."""
    console = rich.console.Console(**kwargs)  # looked up now: tests stand in for it
    console.on_broken_pipe = _reader_went_away  # type: ignore[method-assign]
    if not console.is_terminal:
        console.soft_wrap = True
        asked = kwargs.get("width") is not None or os.environ.get("COLUMNS", "").isdigit()
        console.gpuscale_full_width = not asked  # type: ignore[attr-defined]
    return console


def layout_width(console: Console) -> int:
    """The width a table is laid out in on ``console``: its width, or off a terminal
    where no width was asked for (``COLUMNS`` unset) :data:`FULL_WIDTH`, so a piped
    table keeps every column and whole headers (print it with :func:`print_at_width`)."""
    return FULL_WIDTH if getattr(console, "gpuscale_full_width", False) else console.width


def print_at_width(console: Console, renderable: Any, width: int) -> None:
    """Print ``renderable`` (a table) laid out in ``width`` columns, wider than the
    console's own if need be (rich's ``print(width=)`` never exceeds it); off a
    terminal its lines lose the spaces that pad them."""
    if width <= console.width:
        console.print(renderable)
        return
    own = console.width
    console.width = width
    try:
        with console.capture() as captured:
            console.print(renderable)
    finally:
        console.width = own
    for line in captured.get().splitlines():
        console.file.write(line.rstrip() + "\n")
