"""`gpuscale watch` with stdout piped or redirected: no screen (it would write escape
codes into the file and wait for `q` for ever) but `gpuscale run`'s plain text, the
same recording, and a one-line note on stderr."""

from __future__ import annotations

import subprocess
import sys

from gpuscale.recording.reader import load_run


def test_watch_off_a_terminal_runs_as_run_and_ends(tmp_path):
    recording = tmp_path / "watched.ndjson"
    proc = subprocess.run(
        [sys.executable, "-m", "gpuscale", "watch", "--record", str(recording), "--"]
        + [sys.executable, "-c", "print('hello from the script')"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "\x1b[" not in proc.stdout  # no screen drawn into the file
    assert "status: completed" in proc.stdout  # the run's summary, as `gpuscale run` prints it
    assert "stdout is not one, so this was 'gpuscale run'" in proc.stderr
    assert "Traceback" not in proc.stderr
    loaded = load_run(recording)
    assert loaded.end is not None and loaded.end.status == "completed"


def test_watch_off_a_terminal_keeps_its_sample_interval(monkeypatch, capsys):
    """Off a terminal watch runs as run does, at the --sample-interval it was given."""
    import pytest

    from gpuscale.cli import build_parser
    from gpuscale.commands import watch
    from gpuscale.errors import GpuscaleError
    from gpuscale.live import script_run

    asked: dict = {}

    class Refused(script_run.ScriptRun):
        def __init__(self, argv, **kwargs):
            asked.update(kwargs)
            raise GpuscaleError("stop here")

    monkeypatch.setattr(script_run, "ScriptRun", Refused)
    args = build_parser().parse_args(
        ["watch", "--sample-interval", "0.2", "--no-record", "--", "python", "x.py"]
    )
    with pytest.raises(GpuscaleError, match="stop here"):
        watch.main(args)  # capsys: stdout is not a terminal
    assert asked["sample_interval_s"] == 0.2
