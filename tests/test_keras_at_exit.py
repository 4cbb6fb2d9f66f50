"""A script run alone whose run ends before the monitor's own end (Ctrl-C in ``fit``,
an exception, ``sys.exit`` from a callback, a custom loop never closed): the
recording gets its end, with how the run ended, and the script says where it is
(:mod:`gpuscale.keras.at_exit`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuscale.events.schema import EndEvent, StepEvent
from gpuscale.recording.reader import load_run

pytestmark = pytest.mark.tf

SCRIPT = Path(__file__).parent / "scripts_keras" / "train_cut_short.py"


@pytest.mark.parametrize(
    ("mode", "exit_code", "status", "steps"),
    [
        ("interrupt", -2, "stopped", 8 + 3),  # Python dies of the SIGINT it got
        ("error", 1, "failed", 8 + 3),
        ("exit", 0, "stopped", 8 + 3),
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
    if mode == "interrupt":
        assert "KeyboardInterrupt" in proc.stderr  # Python's own report still comes
