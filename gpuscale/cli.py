"""The ``gpuscale`` command line. Imports neither TensorFlow nor Textual: each
command module imports what it needs inside its ``main``."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from gpuscale import __version__
from gpuscale.errors import EXIT_INTERRUPTED, EXIT_USAGE, GpuscaleError

COMMANDS = ("run", "watch", "recommend", "replay", "runs", "devices")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, like every other bad input
        self.exit(EXIT_USAGE, f"gpuscale: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gpuscale",
        description=(
            "Will this TensorFlow training job run faster on several GPUs, "
            "or am I paying for communication?"
        ),
    )
    parser.add_argument("--version", action="version", version=f"gpuscale {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        module = importlib.import_module(f"gpuscale.commands.{name}")
        module.register(sub)
    return parser


_STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
"""Signals that end gpuscale the way Ctrl-C does: Ctrl-C itself, ``kill``, ``timeout``,
``scancel``, a closed terminal."""


def _interrupt(signum: int, frame: object) -> None:
    """The first stop signal: the others are ignored from now on, before anything
    else runs (none can land in the stop's own handling, nor cut the report and the
    recording that follow it), then KeyboardInterrupt (no name for Ctrl-C)."""
    _ignore_stop_signals()
    if signum == getattr(signal, "SIGINT", None):
        raise KeyboardInterrupt
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _ignore_stop_signals() -> None:
    for signum in _STOP_SIGNALS:
        try:
            signal.signal(signum, signal.SIG_IGN)
        except (ValueError, OSError):  # not the main thread, or not allowed
            pass


@contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """While inside: SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt in the main
    thread, so a killed ``gpuscale`` stops its trainer and closes its recording (with
    its end event) as on Ctrl-C. After the first, every stop signal is ignored until
    gpuscale exits: a stop in progress, its report and its recording are finished
    whatever comes (a later SIGTERM once ended gpuscale after its stop, status -15,
    with its report maybe unflushed). Without a stop signal the
    previous handlers are restored after."""
    previous = {}
    try:
        for signum in _STOP_SIGNALS:
            if signal.getsignal(signum) is signal.SIG_IGN:  # e.g. under nohup: keep it so
                continue
            try:
                previous[signum] = signal.signal(signum, _interrupt)
            except (ValueError, OSError):  # not the main thread, or not allowed
                pass
        yield
    finally:
        for signum, handler in previous.items():
            if signal.getsignal(signum) is _interrupt:  # else a stop began: ignored till exit
                signal.signal(signum, handler)


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``parser.parse_args``, but arguments no command knows are refused by that
    command's parser, so the message names its help (``gpuscale run --help``)."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        func = getattr(args, "func", None)
        for action in parser._subparsers._group_actions if parser._subparsers else ():
            for command in getattr(action, "choices", {}).values():
                if func is not None and command.get_default("func") is func:
                    command.error(f"unrecognized arguments: {' '.join(extras)}")
        parser.error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = _parse(parser, argv)
    if getattr(args, "func", None) is None:  # no COMMAND (a command may define its own "command")
        parser.print_help()
        return EXIT_USAGE
    try:
        with stop_signals_interrupt():
            code = int(args.func(args) or 0)
            sys.stdout.flush()  # a closed pipe is found here, not after main returns
        return code
    except GpuscaleError as exc:
        from gpuscale.formatting import visible  # messages quote data: shown, not obeyed

        if exc.warnings:  # what was forgiven before it failed: often the reason
            from gpuscale.commands.recommend import print_warnings

            print_warnings(exc.warnings)
        print(f"gpuscale: error: {visible(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("gpuscale: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return _reader_went_away()


def _reader_went_away() -> int:
    """stdout's reader closed the pipe (``gpuscale replay FILE | head -1``): what it
    wanted was printed, so end quietly with status 0, every command alike (as
    ``git log | head`` does). stdout is pointed at /dev/null first, so that
    Python's own flush at exit finds no broken pipe to report."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout (a test's capture)
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
