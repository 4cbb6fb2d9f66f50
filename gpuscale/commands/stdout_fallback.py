"""What a command must tell the user even where its stdout cannot be written
(``> /dev/full``, a full disk, an I/O error): where it kept what the user recorded.

A command that names a recording (or a recorded sweep) on stdout only hands that
clause here first (:func:`say_if_stdout_fails`); should stdout fail,
:func:`gpuscale.cli.main`'s one error line on stderr ends with it (``gpuscale: error:
cannot write the output: No space left on device (the run is recorded in PATH)``,
exit 74 still), so the run is found again. What is said on stderr anyway (a live
sweep's ``Recorded as ...`` line) need not come here. No imports."""

from __future__ import annotations

_PENDING: list[str] = []


def say_if_stdout_fails(clause: str) -> None:
    """Say ``clause`` (``the run is recorded in PATH``, made safe to print by the
    caller) on stderr, with the error line, should stdout fail before gpuscale exits."""
    if clause not in _PENDING:
        _PENDING.append(clause)


def take() -> list[str]:
    """The clauses handed in since the last call (in order), forgotten now."""
    clauses = list(_PENDING)
    _PENDING.clear()
    return clauses
