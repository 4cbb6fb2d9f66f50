"""A script run alone whose run ends before the monitor's own end (Ctrl-C in ``fit``,
an exception, ``sys.exit`` from a callback, a custom loop never closed): the
recording gets its end, with how the run ended, and the script says where it is
(:mod:`gpuscale.keras.at_exit`). The status is the one ``gpuscale run -- python ...``
gives the same exit (test_run_script_failures.py): ``sys.exit(3)`` in ``fit`` is a
failure, recorded with its error line (it was recorded ``stopped`` while the script
exited 3, and ``gpuscale run`` said ``failed``); ``sys.exit(0)`` there completed (it
was ``stopped``, while ``gpuscale run`` said ``completed`` and exited 0)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuscale.events.schema import EndEvent, ErrorEvent, StepEvent
from gpuscale.recording.reader import load_run

pytestmark = pytest.mark.tf

SCRIPT = Path(__file__).parent / "scripts_keras" / "train_cut_short.py"


@pytest.mark.parametrize(
    ("mode", "exit_code", "status", "steps"),
    [
        ("interrupt", -2, "stopped", 8 + 3),  # Python dies of the SIGINT it got
        ("error", 1, "failed", 8 + 3),
        ("exit", 0, "completed", 8 + 3),
        ("exit3", 3, "failed", 8 + 3),
        ("loop", 0, "completed", 7),
    ],
)
def test_a_run_cut_short_is_ended_recorded_and_said(tmp_path, mode, exit_code, status, steps):
    path = tmp_path / "cut.ndjson"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUSCALE_", "TF_CONFIG"))}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), mode, str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == exit_code, proc.stderr[-3000:]
    said = "" if status == "completed" else f" (the run {status})"
    assert f"gpuscale: recorded {steps} steps{said} to {path}" in proc.stderr
    events = load_run(path).events
    assert sum(isinstance(e, StepEvent) for e in events) == steps
    end = events[-1]
    assert isinstance(end, EndEvent) and end.status == status and end.steps == steps
    assert end.summary is not None and end.summary["status"] == status
    if mode == "interrupt":
        assert "KeyboardInterrupt" in proc.stderr  # Python's own report still comes
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    if status != "failed":
        assert not errors
    elif mode == "exit3":  # said as gpuscale says a script's failure
        (error,) = errors
        assert error.message.endswith(
            f"train_cut_short.py exit3 {path}) exited with status 3 (sys.exit)"
        )
    else:
        (error,) = errors
        assert error.message.endswith("failed: ValueError: the data went bad")
        assert "Traceback" in error.traceback


@pytest.mark.parametrize(
    ("status", "end", "said"),
    [
        (0, "completed", None),
        (None, "completed", None),
        (256, "completed", None),  # the shell sees 256 & 255: 0
        (3, "failed", "exited with status 3 (sys.exit)"),
        (-1, "failed", "exited with status 255 (sys.exit)"),
        ("disk full", "failed", "exited with status 1: disk full (sys.exit)"),
    ],
)
def test_a_sys_exit_ends_the_run_as_the_exit_status_it_makes(monkeypatch, status, end, said):
    """What ``sys.exit(status)`` makes of a run still open, in process: the exit status
    Python then exits with decides, as gpuscale's for a script's (0 completed, any
    other failed); without a ``sys.exit`` nothing is known (the monitor's own word)."""
    from gpuscale.keras import at_exit

    monkeypatch.setattr(at_exit, "_uncaught", [None])
    monkeypatch.setattr(at_exit, "_exit_asked", [None])
    assert at_exit.how_it_exits() == at_exit.Exit(None)
    at_exit._noting_exit(lambda status=None: None)(status)
    how = at_exit.how_it_exits()
    assert how.status == end
    assert (how.error is None) if said is None else how.error.endswith(said)


def test_a_caught_exit_a_ctrl_c_status_and_a_forked_child(monkeypatch):
    """Found by review: argparse's ``sys.exit(2)`` caught in a ``try`` and training on
    was recorded ``failed``; ``except KeyboardInterrupt: sys.exit(130)`` (Ctrl-C) was
    ``failed``, not ``stopped``; a child made by ``os.fork()`` that exited ended its
    parent's run."""
    from gpuscale.keras import at_exit

    monkeypatch.setattr(at_exit, "_uncaught", [None])
    monkeypatch.setattr(at_exit, "_exit_asked", [None])
    noting = at_exit._noting_exit(lambda *status: None)
    noting(2)
    at_exit.went_on()  # a step came after it: the script trained on
    assert at_exit.how_it_exits() == at_exit.Exit(None)
    noting(130)
    assert at_exit.how_it_exits().status == "stopped"
    noting()  # sys.exit() with no status: 0
    assert at_exit.how_it_exits().status == "completed"

    ended: list[object] = []

    class Monitor:
        def _end_at_exit(self, status, error=None):
            ended.append(status)

    monkeypatch.setattr(at_exit, "_open", {Monitor()})
    monkeypatch.setattr(at_exit, "_pid", os.getpid() + 1)  # as in a forked child
    at_exit.end_open_runs()
    assert ended == []
    monkeypatch.setattr(at_exit, "_pid", os.getpid())
    at_exit.end_open_runs()
    assert ended == ["completed"]


def test_an_uncaught_exception_of_several_lines_is_said_in_one(monkeypatch):
    from gpuscale.keras import at_exit

    try:
        raise ValueError("the data went bad\nat row 3\nof 9")
    except ValueError as exc:
        monkeypatch.setattr(at_exit, "_uncaught", [(ValueError, exc, exc.__traceback__)])
    how = at_exit.how_it_exits()
    assert how.status == "failed" and "\n" not in how.error
    assert how.error.endswith("failed: ValueError: the data went bad")
    assert "of 9" in how.traceback
