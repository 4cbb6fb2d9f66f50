"""Runs still open when the script ends are ended, recorded, and said.

A monitor writing its own recording (a script run without gpuscale) ends its run
when ``fit`` ends or ``CustomLoop.close()`` is called. Ctrl-C in ``fit``, an
exception out of it, ``sys.exit`` from a callback or a custom loop never closed
skip that: Keras calls no ``on_train_end`` on the way out. Then the recording had
no end event (``gpuscale runs`` listed it "interrupted") and the script never said
where it was. Here the process's exit ends each such run instead, with the status
gpuscale gives a script that exits so under ``gpuscale run -- python ...`` (its exit
status decides): ``stopped`` after a KeyboardInterrupt, ``failed`` after another
uncaught exception or a ``sys.exit`` with a status other than 0 (``sys.exit(3)``:
the process exits 3, a failure; the error's line is recorded too, as gpuscale
records a failed script's), ``completed`` after ``sys.exit(0)``, else what the
monitor says (:meth:`gpuscale.keras.monitor.Monitor._end_at_exit`: a ``fit`` that
never returned, e.g. ``raise SystemExit(3)``, whose status no hook sees, ends
``stopped``), and the monitor prints where it recorded it, as at a normal end.

``sys.exit``'s status is noted by a wrapper put in its place once a run is tracked
(Python calls no hook for the SystemExit it raises); one that the script catches and
then goes on is forgotten only by a later ``sys.exit``.

Under gpuscale (``gpuscale run``/``watch -- python ...``) the parent ends the run
from the process's exit, so only monitors with a recording of their own are
tracked. A kill (SIGKILL, SIGTERM without a handler) runs no exit hook: the
recording keeps every step written, without its end.
"""

from __future__ import annotations

import atexit
import functools
import os
import shlex
import signal
import sys
import threading
import traceback
from dataclasses import dataclass
from typing import Any

_open: set = set()
"""Strong references: the README's ``callbacks=[ScalingMonitor()]`` holds none of its own
(a weak set lost it before the exit came); :func:`untrack` at each run's end."""
_uncaught: list[tuple[type[BaseException], BaseException, Any] | None] = [None]
_exit_asked: list[tuple[Any] | None] = [None]
"""``(status,)`` of the latest ``sys.exit(status)`` (None: not called)."""
_installed = False
_pid = 0
"""The process that tracks the runs (a forked child inherits the exit hook)."""


@dataclass(frozen=True)
class Exit:
    """How the process exits, as far as gpuscale saw it."""

    status: str | None
    """The run's end: ``stopped``, ``failed``, ``completed``; None where not known."""
    error: str | None = None
    """Why it failed, one line (a failed run's ErrorEvent)."""
    traceback: str | None = None


def track(monitor: Any) -> None:
    """End ``monitor``'s run at the process's exit unless :func:`untrack`\\ ed first."""
    global _installed, _pid
    _open.add(monitor)
    if _installed:
        return
    _installed = True
    _pid = os.getpid()
    previous = sys.excepthook

    def note_uncaught(exc_type, exc, tb):  # noqa: ANN001 (sys.excepthook's signature)
        _uncaught[0] = (exc_type, exc, tb)
        previous(exc_type, exc, tb)

    sys.excepthook = note_uncaught
    sys.exit = _noting_exit(sys.exit)
    atexit.register(end_open_runs)


def _noting_exit(previous: Any) -> Any:
    """``sys.exit`` as it was, noting its status first: the main thread's only (another
    thread's SystemExit ends that thread, not the process)."""

    @functools.wraps(previous)
    def exit(*status: Any) -> None:  # noqa: A001 (sys.exit's own name, its one positional)
        if threading.current_thread() is threading.main_thread():
            _exit_asked[0] = (status[0] if status else None,)
        previous(*status)

    return exit


def went_on() -> None:
    """The script trained on (a step was counted): a ``sys.exit`` it caught before is
    not how it exits (argparse's ``sys.exit(2)`` inside a ``try``)."""
    _exit_asked[0] = None


def untrack(monitor: Any) -> None:
    _open.discard(monitor)


def exit_code(status: Any) -> int:
    """The process's exit status for ``sys.exit(status)``, as Python makes it: None 0,
    an int itself (modulo 256, as the shell sees it), anything else (a message) 1."""
    if status is None:
        return 0
    if isinstance(status, int):
        return status & 0xFF
    return 1


def command() -> str:
    """The script's command line as typed (``python train.py --epochs 3``), as
    gpuscale's own error line names a script."""
    argv = getattr(sys, "orig_argv", None) or [os.path.basename(sys.executable), *sys.argv]
    return shlex.join(argv)


def how_it_exits() -> Exit:
    """``stopped`` after an uncaught KeyboardInterrupt, ``failed`` after another
    uncaught exception or ``sys.exit`` with a status other than 0, ``completed``
    after ``sys.exit(0)``; not known (None) where the script ended otherwise."""
    uncaught = _uncaught[0]
    if uncaught is not None:
        kind, exc, tb = uncaught
        if issubclass(kind, KeyboardInterrupt):
            return Exit("stopped")
        first = next((line for line in str(exc).splitlines() if line.strip()), "")
        said = f"{kind.__name__}: {first}" if first else kind.__name__  # one line
        text = "".join(traceback.format_exception(kind, exc, tb)).rstrip()
        return Exit("failed", f"the script ({command()}) failed: {said}", text or None)
    if _exit_asked[0] is None:
        return Exit(None)
    (status,) = _exit_asked[0]
    code = exit_code(status)
    if code == 0:
        return Exit("completed")
    if code == 128 + signal.SIGINT:  # `except KeyboardInterrupt: sys.exit(130)`: Ctrl-C
        return Exit("stopped")
    why = f": {status}" if not isinstance(status, int) else ""
    return Exit("failed", f"the script ({command()}) exited with status {code}{why} (sys.exit)")


def end_open_runs() -> None:
    """End every tracked run (the process is exiting); nothing in a child process
    that ``os.fork()`` made (its exit is not the script's, and the run not its own)."""
    if os.getpid() != _pid:
        return
    how = how_it_exits()
    for monitor in list(_open):
        try:
            monitor._end_at_exit(how.status, error=how)
        except Exception as exc:  # noqa: BLE001 (at exit: say it, end the others)
            print(f"gpuscale: could not end the run at exit: {exc}", file=sys.stderr)
