"""Runs still open when the script ends are ended, recorded, and said.

A monitor writing its own recording (a script run without gpuscale) ends its run
when ``fit`` ends or ``CustomLoop.close()`` is called. Ctrl-C in ``fit``, an
exception out of it, ``sys.exit`` from a callback or a custom loop never closed
skip that: Keras calls no ``on_train_end`` on the way out. Then the recording had
no end event (``gpuscale runs`` listed it "interrupted") and the script never said
where it was. Here the process's exit ends each such run instead: ``stopped`` after
a KeyboardInterrupt, ``failed`` after another uncaught exception, else what the
monitor says (:meth:`gpuscale.keras.monitor.Monitor._end_at_exit`), and the
monitor prints where it recorded it, as at a normal end.

Under gpuscale (``gpuscale run``/``watch -- python ...``) the parent ends the run
from the process's exit, so only monitors with a recording of their own are
tracked. A kill (SIGKILL, SIGTERM without a handler) runs no exit hook: the
recording keeps every step written, without its end.
"""

from __future__ import annotations

import atexit
import sys
from typing import Any

_open: set = set()
"""Strong references: the README's ``callbacks=[ScalingMonitor()]`` holds none of its own
(a weak set lost it before the exit came); :func:`untrack` at each run's end."""
_uncaught: list[type[BaseException] | None] = [None]
_installed = False


def track(monitor: Any) -> None:
    """End ``monitor``'s run at the process's exit unless :func:`untrack`\\ ed first."""
    global _installed
    _open.add(monitor)
    if _installed:
        return
    _installed = True
    previous = sys.excepthook

    def note_uncaught(exc_type, exc, tb):  # noqa: ANN001 (sys.excepthook's signature)
        _uncaught[0] = exc_type
        previous(exc_type, exc, tb)

    sys.excepthook = note_uncaught
    atexit.register(end_open_runs)


def untrack(monitor: Any) -> None:
    _open.discard(monitor)


def exit_status() -> str | None:
    """``stopped`` after an uncaught KeyboardInterrupt, ``failed`` after another
    uncaught exception, None where the script ended without one."""
    kind = _uncaught[0]
    if kind is None:
        return None
    return "stopped" if issubclass(kind, KeyboardInterrupt) else "failed"


def end_open_runs() -> None:
    """End every tracked run (the process is exiting)."""
    status = exit_status()
    for monitor in list(_open):
        try:
            monitor._end_at_exit(status)
        except Exception as exc:  # noqa: BLE001 (at exit: say it, end the others)
            print(f"gpuscale: could not end the run at exit: {exc}", file=sys.stderr)
