"""`gpuscale recommend --watch` in a real terminal, stopped by SIGINT (``kill -INT``,
twice, as an impatient user does): the sweep's run in progress is stopped, its
recording ends ``stopped``, the counts already measured are kept and the report
printed, exit 130. The trainer is a stand-in (tests/fake_sweep_trainer.py) in one
shared process, as recommend runs it; no TensorFlow."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest

pty = pytest.importorskip("pty")

TESTS = Path(__file__).resolve().parent

PROGRAM = """
import os, sys
sys.path.insert(0, {tests!r})
import gpuscale.commands.recommend_live as live
from gpuscale.live.trainer_sweep import TrainerSweep
from gpuscale.trainer.options import TrainConfig

python = os.path.join({folder!r}, "python")
with open(python, "w") as f:
    f.write('#!/bin/sh\\nexec "{exe}" "{fake}" "$@"\\n')
os.chmod(python, 0o755)
configs = [TrainConfig(devices=n, global_batch=16, steps=6, warmup_steps=1) for n in (1, 2, 4)]
live.plan = lambda args: ([1, 2, 4], "Sweep on stand-in devices", None, 4)
live.sweep_configs = lambda *a: (configs, [])
live.shared_process = lambda configs, record, no_reuse=False: TrainerSweep(
    configs, record=record, sampler=False, python=python, env={{"FAKE_SWEEP": "slow"}}
)
from gpuscale.cli import main
sys.exit(main(["recommend", "--watch", "--no-chart"]))
"""


def _read(master: int) -> bytes:
    try:
        return os.read(master, 65536)
    except OSError:  # nothing yet (EAGAIN), or the terminal is closed (EIO)
        return b""


def test_sigint_twice_stops_the_sweep_and_keeps_what_was_measured(tmp_path):
    data = tmp_path / "data"
    program = PROGRAM.format(
        tests=str(TESTS),
        folder=str(tmp_path),
        exe=sys.executable,
        fake=str(TESTS / "fake_sweep_trainer.py"),
    )
    pid, master = pty.fork()
    if pid == 0:  # the child: gpuscale in a terminal of its own
        try:
            os.environ.update(
                {
                    "TERM": "xterm-256color",
                    "COLUMNS": "120",
                    "LINES": "40",
                    "GPUSCALE_DATA_DIR": str(data),
                    "FAKE_STEP_S": "0.5",
                }
            )
            os.execv(sys.executable, [sys.executable, "-c", program])
        finally:
            os._exit(127)
    os.set_blocking(master, False)
    output = b""
    done = 0
    runs = data / "runs"
    try:
        deadline = time.monotonic() + 90
        while True:  # until the second count has taken a step
            output += _read(master)
            files = sorted(runs.glob("*.ndjson")) if runs.exists() else []
            if len(files) >= 2 and '"kind":"step"' in files[-1].read_text():
                break
            assert time.monotonic() < deadline, "the second count never started"
            time.sleep(0.05)
        os.kill(pid, signal.SIGINT)
        time.sleep(0.2)
        os.kill(pid, signal.SIGINT)  # again, before the first has stopped the sweep
        deadline = time.monotonic() + 60
        while True:
            output += _read(master)
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            assert time.monotonic() < deadline, "gpuscale did not end"
            time.sleep(0.05)
    finally:
        if not done:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    while chunk := _read(master):
        output += chunk
    os.close(master)
    text = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", output.decode("utf-8", "replace"))
    ends = {}
    for path in sorted(runs.glob("*.ndjson")):
        last = json.loads(path.read_text().strip().splitlines()[-1])
        ends[path.name] = last.get("status") if last.get("kind") == "end" else last.get("kind")
    assert sorted(ends.values()) == ["completed", "stopped"], ends  # every recording ended
    assert os.waitstatus_to_exitcode(status) == 130
    assert "Traceback" not in text
    assert "Sweep stopped after 1 of 3 counts" in text  # the report, from the count measured


def test_a_stopped_sweeps_heading_says_what_it_rests_on_in_a_sentence_of_its_own():
    # "...for the original; Sweep stopped after 1 of 2 counts: ...; recorded as ..."
    from gpuscale.commands.recommend_watch import _heading

    heading = _heading(
        "mnist-cnn-w32 on CPU logical devices",
        ["pass --width 32 --global-batch 128 for the original."],
        "Sweep stopped after 1 of 2 counts: recommending from what was measured (1 device)",
        "recorded as sweep-1",
    )
    first, second = heading.splitlines()
    assert first.endswith("for the original") and "Sweep" not in first
    assert second == (
        "Sweep stopped after 1 of 2 counts: recommending from what was measured "
        "(1 device); recorded as sweep-1."
    )
    complete = _heading("mnist-cnn-w32", [], None, "recorded as sweep-1")
    assert complete == "mnist-cnn-w32; recorded as sweep-1"
