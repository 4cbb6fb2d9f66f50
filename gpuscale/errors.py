"""Errors a user can cause. Each carries a one-line message and an exit code;
the CLI prints the message (never a traceback) and exits with the code."""

from __future__ import annotations

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
