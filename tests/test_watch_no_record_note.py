"""`gpuscale watch --no-record` off a terminal says the run was not recorded (its
note used to say "same recording")."""

from __future__ import annotations

import subprocess
import sys


def test_watch_off_a_terminal_with_no_record_says_nothing_was_recorded(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "gpuscale", "watch", "--no-record", "--"]
        + [sys.executable, "-c", "print('hello from the script')"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    note = [line for line in proc.stderr.splitlines() if "stdout is not one" in line]
    assert note == [
        "gpuscale: watch shows the run in a terminal; stdout is not one, so this was "
        "'gpuscale run' (plain text, not recorded: --no-record)"
    ], proc.stderr
    assert "recorded to" not in proc.stdout
