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


def _watch_in_a_terminal(
    tmp_path, ready, stop, env: dict[str, str] | None = None
) -> tuple[int, str, dict[str, dict]]:
    """`recommend --watch` of the stand-in sweep (1, 2, 4 devices) in a terminal of
    its own; ``stop(pid, master)`` once ``ready(recordings)`` says so. Returns the
    exit status, the terminal's text (its lines joined) and, per recording, its
    last event and the trainer's processes (its first start's ``pids``)."""
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
                    **(env or {}),
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
        while True:
            output += _read(master)
            files = sorted(runs.glob("*.ndjson")) if runs.exists() else []
            if ready(files):
                break
            assert time.monotonic() < deadline, "the sweep never got there"
            time.sleep(0.05)
        stop(pid, master)
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
    text = " ".join(text.split())  # the report's lines as the terminal wrapped them, joined
    recordings = {}
    for path in sorted(runs.glob("*.ndjson")):
        events = [json.loads(line) for line in path.read_text().strip().splitlines()]
        pids = next(e["pids"] for e in events if e.get("kind") == "start")
        recordings[path.name] = {"last": events[-1], "pids": pids}
    return os.waitstatus_to_exitcode(status), text, recordings


def _ended(recordings: dict[str, dict]) -> list[str | None]:
    return sorted(
        r["last"].get("status") if r["last"].get("kind") == "end" else r["last"].get("kind")
        for r in recordings.values()
    )


def test_sigint_twice_stops_the_sweep_and_keeps_what_was_measured(tmp_path):
    def second_count_stepped(files) -> bool:
        return len(files) >= 2 and '"kind":"step"' in files[-1].read_text()

    def sigint_twice(pid, master) -> None:
        os.kill(pid, signal.SIGINT)
        time.sleep(0.2)
        os.kill(pid, signal.SIGINT)  # again, before the first has stopped the sweep

    code, text, recordings = _watch_in_a_terminal(tmp_path, second_count_stepped, sigint_twice)
    assert _ended(recordings) == ["completed", "stopped"], recordings  # every recording ended
    assert code == 130
    assert "Traceback" not in text
    # the report, from the count measured, and the second's counted steps where the
    # stop came after it counted one (kept, as a plain sweep keeps them)
    assert "Sweep stopped after 1 of 3 counts" in text or re.search(
        r"Sweep stopped during the 2-device run, kept with the \d+ steps? it counted: "
        r"recommending from what was measured \(1, 2 devices\)",
        text,
    )


def test_q_during_the_first_count_keeps_its_counted_steps_and_leaves_no_trainer(tmp_path):
    """q in the first count, after it counted steps: the trainer child is stopped
    (its recording ends ``stopped``) and gone, no other count starts, and the
    report is printed from those steps, exit 0; it said "no recommendation: ...
    no count finished, so nothing to judge" while `recommend --from` of the same
    recording judged them."""

    def counted_two_steps(files) -> bool:
        return len(files) == 1 and files[0].read_text().count('"kind":"step"') >= 3

    code, text, recordings = _watch_in_a_terminal(
        tmp_path, counted_two_steps, lambda pid, master: os.write(master, b"q")
    )
    assert _ended(recordings) == ["stopped"], recordings  # one count, stopped, ended
    assert code == 0
    assert "Traceback" not in text and "gpuscale: no recommendation" not in text
    assert re.search(r"Sweep stopped during the 1-device run, kept with the \d+ steps", text)
    assert "Recommendation: NONE yet: measured at 1 device only" in text
    _assert_gone(recordings)


def test_q_while_the_trainer_starts_stops_it_and_says_nothing_was_counted(tmp_path):
    """q while the first count's trainer is still starting (importing TensorFlow):
    it is stopped there, the one line says what ran, exit 0, no trainer left."""

    def begun(files) -> bool:
        return len(files) == 1 and '"provisional":true' in files[0].read_text()

    code, text, recordings = _watch_in_a_terminal(
        tmp_path, begun, lambda pid, master: os.write(master, b"q"), {"FAKE_START_S": "60"}
    )
    assert _ended(recordings) == ["stopped"], recordings
    assert code == 0
    assert "Traceback" not in text
    assert (
        "gpuscale: no recommendation: the sweep stopped during the first count (1 device, "
        "before its first step): no step was counted, so nothing to judge; recorded to "
    ) in text
    _assert_gone(recordings)


def _assert_gone(recordings: dict[str, dict]) -> None:
    """No process of the sweep's trainer outlived gpuscale."""
    for recording in recordings.values():
        for pid in recording["pids"]:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)


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
