"""A script that catches SIGTERM itself (`kill` of the script alone: gpuscale saw no
signal), ends its run with a custom loop's `close("stopped")` and exits 0: the run is
recorded `stopped`, and `gpuscale run` exits 130 as for any stopped run, with one line
that says why, so that a shell script does not take it for a completed one. No
TensorFlow: the script sends the events the custom loop sends, as plain Python."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpuscale.commands.run import SCRIPT_STOPPED_NOTE
from gpuscale.errors import EXIT_INTERRUPTED
from gpuscale.recording.reader import load_run

CATCHES_SIGTERM = """
import os, signal, sys, time
from gpuscale.events.schema import EndEvent, StartEvent, StepEvent
from gpuscale.events.transport import EventClient

asked = []
signal.signal(signal.SIGTERM, lambda signum, frame: asked.append(signum))
client = EventClient.from_env()
w = client.worker
client.send(StartEvent(t=time.time(), worker=w, gpuscale_version="test", host="here", pid=os.getpid()))
step = 0
while not asked:
    client.send(StepEvent(t=time.time(), worker=w, step=step, step_time_s=0.01, samples=8))
    step += 1
    if step == 3:
        os.kill(os.getpid(), signal.SIGTERM)  # as `kill PID` of the script alone
# what monitor.close("stopped") sends
client.send(EndEvent(t=time.time(), worker=w, status=sys.argv[1], steps=step))
client.close()
sys.exit(0)
"""


def _run(tmp_path, status: str, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpuscale", "run", *flags, "--record", str(tmp_path / "r.ndjson")]
        + ["--", sys.executable, "-c", CATCHES_SIGTERM, status],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "GPUSCALE_DATA_DIR": str(tmp_path)},
    )


@pytest.mark.parametrize("flags", [(), ("--json",)], ids=["text", "json"])
def test_a_script_that_closes_its_run_stopped_and_exits_0_makes_run_exit_130(tmp_path, flags):
    proc = _run(tmp_path, "stopped", *flags)
    assert proc.returncode == EXIT_INTERRUPTED, proc.stderr[-2000:]
    assert proc.stderr.splitlines().count(SCRIPT_STOPPED_NOTE) == 1
    assert "not through gpuscale" not in proc.stdout + proc.stderr  # no signal named
    assert load_run(tmp_path / "r.ndjson").end.status == "stopped"
    if flags:
        assert json.loads(proc.stdout)["status"] == "stopped"
    else:
        assert "status: stopped" in proc.stdout


def test_a_script_that_closes_its_run_completed_exits_0(tmp_path):
    proc = _run(tmp_path, "completed")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert SCRIPT_STOPPED_NOTE not in proc.stderr
    assert load_run(tmp_path / "r.ndjson").end.status == "completed"
