"""LiveRun with stand-in trainer processes (no TensorFlow): a child that dies
without a word, and one that ignores SIGTERM and has a child of its own."""

from __future__ import annotations

import os
import stat
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from fake_nvml import FakeNvml

from gpuscale.events.schema import EndEvent, ErrorEvent, StartEvent, StepEvent
from gpuscale.session import LiveRun
from gpuscale.trainer.options import TrainConfig

# A stand-in for `python -m gpuscale.trainer`: ignores its arguments, reports a
# start and two steps through the real EventClient, then does what $FAKE_MODE says.
FAKE_TRAINER = textwrap.dedent(
    f"""\
    #!{sys.executable}
    import os, signal, subprocess, sys, time
    sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
    from gpuscale.events.schema import StartEvent, StepEvent
    from gpuscale.events.transport import EventClient
    mode = os.environ["FAKE_MODE"]
    print("fake trainer here", flush=True)
    client = EventClient.from_env()
    client.send(StartEvent(t=time.time(), gpuscale_version="0", host="h", pid=os.getpid(),
                           model="fake", num_replicas=2, pids=[os.getpid()]))
    for step in range(2):
        client.send(StepEvent(t=time.time(), step=step, step_time_s=0.01, samples=8))
    client.close()
    if mode == "die":
        print("about to crash hard", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen(["sleep", "60"])
        print(f"grandchild {{child.pid}}", flush=True)
        while True:
            time.sleep(0.1)
    """
)


@pytest.fixture
def fake_python(tmp_path: Path) -> str:
    path = tmp_path / "fake-python"
    path.write_text(FAKE_TRAINER)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _run(fake_python: str, mode: str, tmp_path: Path) -> LiveRun:
    return LiveRun(
        TrainConfig(steps=10, warmup_steps=0),
        record=tmp_path / "run.ndjson",
        python=fake_python,
        env={"FAKE_MODE": mode},
        nvml=FakeNvml.scenario("no-driver"),
        sample_interval_s=0.1,
    )


def test_child_that_dies_without_a_word_ends_the_run_as_lost(fake_python, tmp_path):
    run = _run(fake_python, "die", tmp_path).start()
    events = list(run.events(timeout=20))
    assert run.done
    end = events[-1]
    assert isinstance(end, EndEvent)
    assert end.status == "lost"
    assert end.steps == 2
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1
    assert "SIGKILL" in errors[0].message
    assert "about to crash hard" in errors[0].message
    assert sum(isinstance(e, EndEvent) for e in events) == 1
    assert end.summary is not None and end.summary["steps_total"] == 2

    from gpuscale.recording.reader import load_run

    loaded = load_run(run.recording_path)
    assert isinstance(loaded.start, StartEvent)
    assert loaded.end is not None and loaded.end.status == "lost"
    assert sum(isinstance(e, StepEvent) for e in loaded.events) == 2


def test_stop_kills_a_stubborn_child_and_its_children(fake_python, tmp_path):
    run = _run(fake_python, "stubborn", tmp_path).start()
    grandchild = None
    deadline = time.monotonic() + 20
    while grandchild is None and time.monotonic() < deadline:
        for event in run.drain():
            message = getattr(event, "message", "")
            if message.startswith("grandchild "):
                grandchild = int(message.split()[1])
        time.sleep(0.05)
    assert grandchild is not None, "the fake trainer never started its child"
    trainer_pid = run.pids()[0]
    started = time.monotonic()
    run.stop(grace_s=1.0)
    assert time.monotonic() - started < 5.0
    assert run.done and run.end is not None
    assert run.end.status == "stopped"
    for pid in (trainer_pid, grandchild):
        gone = not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        assert gone, f"process {pid} outlived stop()"
    assert os.path.exists(run.recording_path)
