"""The ``gpuscale`` command line. Imports neither TensorFlow nor Textual: each
command module imports what it needs inside its ``main``."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gpuscale import __version__
from gpuscale.commands import stdout_fallback
from gpuscale.errors import EXIT_INTERRUPTED, EXIT_OUTPUT, EXIT_USAGE, GpuscaleError

COMMANDS = ("run", "watch", "recommend", "replay", "runs", "devices")


class _Parser(argparse.ArgumentParser):
    NEGATIVE_NUMBER = re.compile(r"-\.?\d")
    """What argparse reads as a value rather than an option: a minus, then a digit
    (``-1%``, ``-1e-3``, ``-1,2``, ``-.5``). Python 3.11's own pattern takes only
    ``-1`` and ``-0.5``, so ``--probe-budget -1%`` was "expected one argument"
    instead of the option's own one-line error. No gpuscale option looks like a
    negative number, and everything after a bare ``--`` is the script's still."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        # argparse's own attribute (not public; a Python that renamed it fails
        # tests/test_cli_small_findings.py's negative-value tests)
        self._negative_number_matcher = self.NEGATIVE_NUMBER

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
    """Run the command ``argv`` asks for; its exit status. Output that cannot be
    written (stdout or stderr: a full disk, an I/O error, stdout closed) is one
    line on stderr where stderr works and :data:`EXIT_OUTPUT`, never a traceback;
    a reader that went away (``| head -1``) is a quiet 0."""
    if sys.stdout is None:  # started with stdout closed (``>&-``): nowhere to answer
        return _output_failed(None)
    stdout_fallback.take()  # what an earlier main() (a test's) left is not this one's
    streams = _CheckedStream.install()
    try:
        try:
            code = _main(argv)
        except SystemExit:  # argparse: --help, --version, a usage error
            failed = _CheckedStream.flush_all(streams)
            if failed is not None:
                return _output_failed(failed)
            raise
        failed = _CheckedStream.flush_all(streams)  # also a write error someone swallowed
        return code if failed is None else _output_failed(failed)
    except OutputFailed as exc:
        return _output_failed(exc)
    except BrokenPipeError:
        return _reader_went_away()
    finally:
        _CheckedStream.uninstall(streams)
        stdout_fallback.take()


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = _parse(parser, argv)
    if getattr(args, "func", None) is None:  # no COMMAND (a command may define its own "command")
        parser.print_help()
        return EXIT_USAGE
    try:
        with stop_signals_interrupt():
            code = int(args.func(args) or 0)
            sys.stdout.flush()  # a closed pipe or a full disk is found here, not at exit
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


class OutputFailed(Exception):
    """Writing stdout or stderr failed with ``error`` (not a closed pipe: that is
    :class:`BrokenPipeError`, a quiet exit). Not an :class:`OSError`, so that no
    ``except OSError`` on the way (argparse's ``--help`` has one) swallows it."""

    def __init__(self, stream: str, error: OSError):
        super().__init__(f"{stream}: {error}")
        self.stream = stream
        self.error = error


class _CheckedStream:
    """``sys.stdout`` or ``sys.stderr`` while :func:`main` runs: the stream itself
    (every attribute passed through: ``isatty``, ``fileno``, ...), but a write or
    flush that fails with an :class:`OSError` raises :class:`OutputFailed` and is
    remembered (:attr:`failed`), so the one handler in :func:`main` says it. A
    :class:`BrokenPipeError` passes as it is."""

    def __init__(self, name: str, stream: Any):
        self._name = name
        self._stream = stream
        self.failed: OutputFailed | None = None

    @classmethod
    def install(cls) -> list[_CheckedStream]:
        checked = []
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if stream is not None and not isinstance(stream, cls):
                checked.append(cls(name, stream))
                setattr(sys, name, checked[-1])
        return checked

    @staticmethod
    def uninstall(checked: list[_CheckedStream]) -> None:
        for stream in checked:
            if getattr(sys, stream._name) is stream:
                setattr(sys, stream._name, stream._stream)

    def _call(self, method: str, *args: Any) -> Any:
        try:
            return getattr(self._stream, method)(*args)
        except BrokenPipeError:
            raise
        except OSError as exc:
            if self.failed is None:
                self.failed = OutputFailed(self._name, exc)
            raise self.failed from None

    def write(self, text: str) -> int:
        return self._call("write", text)

    def writelines(self, lines: Any) -> None:
        self._call("writelines", lines)

    def flush(self) -> None:
        self._call("flush")

    @staticmethod
    def flush_all(checked: list[_CheckedStream]) -> OutputFailed | None:
        """Flush each of ``checked`` (what is buffered must reach the file before
        the status is known); the first write that failed, even one that something
        on the way caught, or ``None``. A closed pipe raises :class:`BrokenPipeError`."""
        for stream in checked:
            if stream.failed is None:
                try:
                    stream.flush()
                except OutputFailed:
                    pass
        return next((stream.failed for stream in checked if stream.failed), None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _output_failed(failed: OutputFailed | None) -> int:
    """Say on stderr, where it works, that the output could not be written
    (``failed``; ``None``: stdout was closed before gpuscale started), and return
    :data:`EXIT_OUTPUT`. The stream that failed is pointed at /dev/null, so that
    Python's own flush at exit finds nothing left to fail on. Where stdout failed, the
    line ends with what the command said only there, where it recorded the run
    (:mod:`gpuscale.commands.stdout_fallback`)."""
    why = "stdout is closed" if failed is None else (failed.error.strerror or str(failed.error))
    kept = stdout_fallback.take()
    if kept and (failed is None or failed.stream == "stdout"):
        why += f" ({'; '.join(kept)})"
    stderr = sys.stderr._stream if isinstance(sys.stderr, _CheckedStream) else sys.stderr
    if failed is None or failed.stream == "stdout":
        _to_devnull(sys.stdout._stream if isinstance(sys.stdout, _CheckedStream) else sys.stdout)
    said = False
    if stderr is not None and (failed is None or failed.stream != "stderr"):
        try:
            print(f"gpuscale: error: cannot write the output: {why}", file=stderr, flush=True)
            said = True
        except (OSError, ValueError):
            pass
    if not said:
        _to_devnull(stderr)
    return EXIT_OUTPUT


def _to_devnull(stream: Any) -> None:
    """Point ``stream``'s file descriptor at /dev/null (nothing when it has none)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real file (a test's capture)
        pass


def _reader_went_away() -> int:
    """stdout's reader closed the pipe (``gpuscale replay FILE | head -1``): what it
    wanted was printed, so end quietly with status 0, every command alike (as
    ``git log | head`` does). stdout is pointed at /dev/null first, so that
    Python's own flush at exit finds no broken pipe to report."""
    _to_devnull(sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
