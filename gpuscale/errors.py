"""Errors a user can cause. Each carries a one-line message and an exit code;
the CLI prints the message (never a traceback) and exits with the code."""

from __future__ import annotations

import shlex

EXIT_OK = 0
EXIT_FAILED = 1
"""The run itself failed (trainer error, killed)."""
EXIT_USAGE = 2
"""Bad input: a wrong flag, a missing or damaged file, a bad model spec."""
EXIT_OUTPUT = 74
"""The output could not be written: stdout or stderr failed (a full disk, an I/O
error) or stdout was closed. sysexits.h's ``EX_IOERR``; a reader that went away
(``| head -1``) is not this: that ends quietly with 0."""
EXIT_INTERRUPTED = 130


class GpuscaleError(Exception):
    """A problem the user can fix; ``str(error)`` is the one-line message."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        self.warnings: list[str] = []
        """What was forgiven on the way to the error (a recording's damaged lines
        skipped): the CLI says them, as warnings, before the error line."""
        if exit_code is not None:
            self.exit_code = exit_code


def folder_given(path: object) -> str:
    """What every command says of a folder given where a recording or a sweep file
    is read (``replay FILE``, ``recommend --from``, the recording reader): one
    wording everywhere, ``PATH: is a folder, not a recording or a sweep file
    (gpuscale runs --dir PATH lists the recordings in it)``."""
    return f"{path}: {folder_given_reason(path)}"


def folder_given_reason(path: object) -> str:
    """:func:`folder_given` without the leading ``PATH: `` (for a reader whose
    errors name the path themselves)."""
    return (
        "is a folder, not a recording or a sweep file "
        f"(gpuscale runs --dir {shlex.quote(str(path))} lists the recordings in it)"
    )
