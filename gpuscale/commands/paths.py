"""Argument types for the options that take a path (``replay FILE``, ``recommend
--from``/``--plot``, ``run``/``watch --record``, ``runs --dir``): an empty path
(``--plot ""``, an unset shell variable) or one of spaces only is bad input, one
line and exit 2, never read as the current folder (``Path("")`` is ``.``) nor
silently ignored."""

from __future__ import annotations

import argparse
from pathlib import Path


def _checked(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("an empty path: give a file name")
    if not text.strip():
        raise argparse.ArgumentTypeError(f"a path of spaces only ({text!r}): give a file name")
    return text


def path_arg(text: str) -> Path:
    """A path given on the command line, as a :class:`~pathlib.Path`."""
    return Path(_checked(text))


def name_arg(text: str) -> str:
    """A path or name given on the command line (a sweep's name is one), as given."""
    return _checked(text)


def folder_arg(text: str) -> Path:
    """A folder given on the command line (``runs --dir``)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path: give a folder")
    if not text.strip():
        raise argparse.ArgumentTypeError(f"a path of spaces only ({text!r}): give a folder")
    return Path(text)
