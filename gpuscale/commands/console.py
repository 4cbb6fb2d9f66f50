"""The rich console the text commands (`run`, `recommend`, `devices`) print with.

On a terminal, lines wrap at its width as usual. Off a terminal (a pipe, a file)
a line of text is never hard-wrapped: ``median 477.1 ms`` stays on one line for
``grep`` and for the reader, so text is printed with rich's ``soft_wrap``. Tables
and charts keep the console's width (80 columns by default, ``COLUMNS`` when set):
a table lays itself out in its columns either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import rich.console

if TYPE_CHECKING:
    from rich.console import Console


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
    return console
