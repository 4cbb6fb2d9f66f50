"""What a script's run is called when the script names no model: its file name.

Headless (the standard library and msgspec): the script runner names a run by it
(:class:`gpuscale.live.script_run.ScriptRun`), and ``gpuscale runs`` names a
recorded run by it from the command its start event kept (``config.argv``), so
that a recording made before a naming fix lists the same name."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePath

import msgspec

_PYTHON = re.compile(r"^(python|pypy)(\d+(\.\d+)*)?[a-z]?(\.exe)?$|^py(\.exe)?$")
"""An interpreter's file name (``python3.11``, ``pypy3``, ``py.exe``)."""

_TAKES_A_VALUE = frozenset({"-W", "-X", "--check-hash-based-pycs"})
"""Python's options whose value is the next argument (``python -W ignore train.py``)."""


def builtin_trainer_model(argv: Sequence[str]) -> str | None:
    """The model of gpuscale's own trainer run as a worker program (``python -m
    gpuscale.trainer --config JSON``: ``--strategy multi-worker`` without a command),
    else ``None``."""
    args = list(argv[1:])
    if args[:2] != ["-m", "gpuscale.trainer"] or "--config" not in args:
        return None
    at = args.index("--config") + 1
    try:
        model = msgspec.json.decode(args[at]).get("model") if at < len(args) else None
    except (msgspec.DecodeError, AttributeError):
        return None
    return str(model) if model else "gpuscale.trainer"


def script_name(argv: Sequence[str]) -> str:
    """A short name for the run of the command ``argv``: the script file
    (``train.py``), the module (``-m pkg``), ``python -c`` for code given on the
    command line (never the code itself), ``python -`` for code on stdin, or the
    built-in trainer's model. A command that is not Python (``./train.sh --epochs
    3``, ``uv run train.py``) is named by its first ``.py`` argument, else by the
    program."""
    builtin = builtin_trainer_model(argv)
    if builtin is not None:
        return builtin
    if not argv:
        return "script"
    program = PurePath(argv[0]).name or "script"
    if not _PYTHON.match(program):
        scripts = [
            a for a in argv[1:] if a.endswith(".py") and not a.startswith("-") and " " not in a
        ]
        return PurePath(scripts[0]).name if scripts else program
    args = list(argv[1:])
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-m":
            return args[i + 1] if i + 1 < len(args) else program
        if arg == "-c" or _short_options_end_with(arg, "c"):
            return "python -c"
        if arg.startswith("-m") and not arg.startswith("--"):
            return arg[2:]  # -mpkg
        if arg == "-":
            return "python -"
        if arg == "--":
            i += 1
            break
        if arg in _TAKES_A_VALUE:
            i += 2
            continue
        if not arg.startswith("-"):
            return PurePath(arg).name
        i += 1
    if i < len(args):  # after "--": the script
        return PurePath(args[i]).name
    return program


def _short_options_end_with(arg: str, letter: str) -> bool:
    """``-uc``: flags without values, then ``letter`` (whose value follows)."""
    return (
        len(arg) > 2
        and arg.startswith("-")
        and not arg.startswith("--")
        and arg.endswith(letter)
        and arg[1:-1].isalpha()
        and "W" not in arg[1:-1]
        and "X" not in arg[1:-1]
        and "m" not in arg[1:-1]
        and "c" not in arg[1:-1]
    )
