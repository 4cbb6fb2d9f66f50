"""Stopping a built-in multi-worker run (``gpuscale run --strategy multi-worker
--local-workers 2``): every worker stops after the same step, within a step or two
of the signal, and the run ends ``stopped`` (``gpuscale run`` exits 130). Ctrl-C
reaches gpuscale, which SIGTERMs the workers (TensorFlow's own SIGTERM handler must
not swallow it); a worker stopped alone takes the others with it (its stop rides the
step's sum, gpuscale/trainer/vote.py), rather than leaving them in the next step's
all-reduce, and the run ends ``stopped`` too (not ``completed``: every worker exits
0), with a warning that names the worker asked to stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from gpuscale.errors import EXIT_INTERRUPTED
from gpuscale.events.schema import LogEvent, StepEvent
from gpuscale.recording.reader import load_run

pytestmark = pytest.mark.tf


@pytest.mark.parametrize("whom", ["gpuscale", "worker 1"])
def test_a_stopped_two_worker_run_stops_every_worker_after_the_same_step(tmp_path, whom):
    path = tmp_path / "run.ndjson"
    argv = [sys.executable, "-m", "gpuscale", "run", "--strategy", "multi-worker"]
    argv += ["--local-workers", "2", "--model", "mlp", "--steps", "5000", "--record", str(path)]
    env = {**os.environ, "GPUSCALE_DATA_DIR": str(tmp_path), "TF_CPP_MIN_LOG_LEVEL": "3"}
    env["CUDA_VISIBLE_DEVICES"] = ""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # a pytest started with SIGINT ignored would pass that on to gpuscale
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 240  # a hang guard only
        while True:  # mid-run: both workers have reported a few steps
            lines = path.read_text().splitlines() if path.exists() else []
            events = [json.loads(line) for line in lines if line.endswith("}")]
            steps = [e for e in events if e["kind"] == "step" and e["step"] >= 3]
            if {e.get("worker", 0) for e in steps} == {0, 1}:
                break
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        sent = time.time()
        if whom == "gpuscale":
            proc.send_signal(signal.SIGINT)
        else:  # one worker alone: the other learns it from the step's sum
            os.kill(events[0]["pids"][1], signal.SIGTERM)
        out, err = proc.communicate(timeout=120)  # a hang guard only
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    run = load_run(path)
    assert run.end is not None, (out, err[-2000:])
    assert run.end.status == "stopped", (out, err[-2000:])
    assert run.end.summary["status"] == "stopped"
    # what `run` says and exits with is what a Ctrl-C'd run gives
    assert proc.returncode == EXIT_INTERRUPTED, (out, err[-2000:])
    assert "status: stopped" in out
    last = {}
    for worker in (0, 1):
        mine = [e for e in run.events if isinstance(e, StepEvent) and e.worker == worker]
        after = [e for e in mine if e.t > sent]
        # the signal reaches the workers a moment later; the step carrying the stop is unreported
        assert len(after) <= 3, (worker, [e.step for e in after])
        last[worker] = mine[-1].step
    assert last[0] == last[1]
    assert run.end.steps == last[0] + 1
    # each worker's own end (gpuscale logs it): stopped, after the same number of steps
    ends = {e.message for e in run.events if isinstance(e, LogEvent) and "training " in e.message}
    assert ends == {f"worker {w}: training stopped after {run.end.steps} steps" for w in (0, 1)}
    # a worker stopped alone is named (gpuscale stopped the others: nothing more to say)
    said = [
        e for e in run.events if isinstance(e, LogEvent) and "not through gpuscale" in e.message
    ]
    if whom == "gpuscale":
        assert said == []
    else:
        assert [(e.source, e.level, e.message) for e in said] == [
            (
                "gpuscale",
                "warning",
                f"the run stopped after {run.end.steps} steps, not through gpuscale: "
                "worker 1 was asked to stop (SIGTERM)",
            )
        ]
        assert said[0].message in out + err
