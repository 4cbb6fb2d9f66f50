"""Script lines for tests whose script must wait for something the test saw."""

from __future__ import annotations

from pathlib import Path


def wait_for_flag(flag: Path, deadline_s: float) -> str:
    """Script lines that wait for ``flag``, which the test creates on an event it saw
    (at most ``deadline_s``, so a missing event fails the test rather than hangs it)."""
    return (
        "import os, time\n"
        f"deadline = time.monotonic() + {deadline_s!r}\n"
        f"while not os.path.exists({str(flag)!r}) and time.monotonic() < deadline:\n"
        "    time.sleep(0.02)\n"
    )
