"""LiveRun with stand-in trainer processes (no TensorFlow): a child that dies
without a word, and one that ignores SIGTERM and has a child of its own."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from fake_nvml import FakeNvml

from gpuscale.errors import GpuscaleError
from gpuscale.events.schema import EndEvent, ErrorEvent, StartEvent, StepEvent
from gpuscale.live.child import STOP_DEADLINE_S, describe_exit
from gpuscale.live.trainer_run import LiveRun
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
    if mode == "sleep":
        while True:
            time.sleep(0.1)
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


# `gpuscale` as a user runs it, with the fake trainer and the NVML stand-in.
def _cli_with_fake_trainer(fake_python: str) -> str:
    return (
        "import functools, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from fake_nvml import FakeNvml\n"
        "import gpuscale.live.trainer_run as session\n"
        "session.LiveRun.__init__ = functools.partialmethod(\n"
        f"    session.LiveRun.__init__, python={fake_python!r},\n"
        "    nvml=FakeNvml.scenario('no-driver'), env={'FAKE_MODE': 'sleep'})\n"
        "from gpuscale.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )


def _wait_for(predicate, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_sighup_to_gpuscale_stops_the_trainer_and_ends_the_recording(
    fake_python, tmp_path, signum
):
    """kill, timeout, scancel or a closed terminal: the same clean stop as Ctrl-C."""
    path = tmp_path / "run.ndjson"
    proc = subprocess.Popen(
        [sys.executable, "-c", _cli_with_fake_trainer(fake_python), "run", "--record", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: path.exists() and path.read_text().count("\n") >= 3)
        trainer = psutil.Process(proc.pid).children()[0].pid
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert f"stopping the trainer ({signum.name})" in err
    from gpuscale.recording.reader import load_run

    loaded = load_run(path)
    assert loaded.end is not None and loaded.end.status == "stopped"
    assert _gone(trainer)


def test_a_killed_gpuscale_leaves_no_trainer_behind(fake_python, tmp_path):
    """SIGKILL gives gpuscale no chance to clean up: the kernel ends the trainer
    (PR_SET_PDEATHSIG), even when the run was started from a thread that has
    finished since (as the dashboard's worker thread does) and the trainer
    ignores SIGTERM."""
    code = (
        "import sys, threading, time\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from fake_nvml import FakeNvml\n"
        "from gpuscale.live.trainer_run import LiveRun\n"
        "from gpuscale.trainer.options import TrainConfig\n"
        f"run = LiveRun(TrainConfig(steps=10), record=None, python={fake_python!r},\n"
        "              env={'FAKE_MODE': 'stubborn'}, sampler=False)\n"
        "starter = threading.Thread(target=run.start)\n"
        "starter.start(); starter.join()\n"
        "print(run.pids()[0], flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        trainer = int(proc.stdout.readline())
        time.sleep(1.0)  # the starting thread is long gone: the trainer must still run
        assert not _gone(trainer)
        proc.kill()
        proc.wait()
        _wait_for(lambda: _gone(trainer), timeout_s=5)
    finally:
        proc.kill()
        if not _gone(trainer):
            os.kill(trainer, signal.SIGKILL)


def test_a_refused_sample_interval_starts_no_trainer(fake_python, tmp_path):
    run = LiveRun(
        TrainConfig(steps=10),
        record=tmp_path / "run.ndjson",
        python=fake_python,
        env={"FAKE_MODE": "sleep"},
        nvml=FakeNvml.scenario("no-driver"),
        sample_interval_s=0.05,
    )
    with pytest.raises(GpuscaleError, match="sample interval"):
        run.start()
    assert run._proc is None and run._server is None
    assert not (tmp_path / "run.ndjson").exists()


def test_watch_refuses_a_too_short_sample_interval_in_one_line(capsys):
    from gpuscale.cli import main

    assert main(["watch", "--sample-interval", "0.05", "--no-record"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gpuscale: error: --sample-interval") and "\n" not in err
    assert "0.1-60 s" in err


def test_describe_exit_names_unknown_signals_too():
    assert describe_exit(-9) == "was killed by SIGKILL"
    assert describe_exit(-200) == "was killed by signal 200"
    assert describe_exit(3) == "exited with status 3"


def test_stop_with_the_default_grace_ends_within_5_s(fake_python, tmp_path):
    run = _run(fake_python, "stubborn", tmp_path).start()
    _wait_for(
        lambda: any(
            e.message.startswith("grandchild ") for e in run.drain() if hasattr(e, "message")
        )
    )
    started = time.monotonic()
    run.stop()
    assert time.monotonic() - started < STOP_DEADLINE_S + 0.3
    assert run.done and run.end.status == "stopped"


@pytest.mark.skipif(shutil.which("script") is None, reason="needs script(1) for a terminal")
def test_sigterm_to_gpuscale_watch_quits_like_q_and_ends_the_recording(fake_python, tmp_path):
    """The dashboard owns the terminal: SIGTERM quits it from its own loop (no
    traceback, terminal restored), the trainer is stopped, the recording ends."""
    path = tmp_path / "watch.ndjson"
    command = shlex.join(
        [sys.executable, "-c", _cli_with_fake_trainer(fake_python), "watch", "--record", str(path)]
    )
    proc = subprocess.Popen(
        ["script", "-qec", command, "/dev/null"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"},
    )
    try:
        _wait_for(lambda: path.exists() and path.read_text().count("\n") >= 3, timeout_s=30)
        gpuscale = next(
            p
            for p in psutil.Process(proc.pid).children(recursive=True)
            if "watch" in p.cmdline() and "script" not in p.name()
        )
        trainer = gpuscale.children()[0].pid
        gpuscale.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=15)
    finally:
        proc.kill()
    text = out.decode("utf-8", "replace")
    assert "Traceback" not in text
    assert "gpuscale: stopped (SIGTERM)" in text
    from gpuscale.recording.reader import load_run

    loaded = load_run(path)
    assert loaded.end is not None and loaded.end.status == "stopped"
    assert _gone(trainer)


@pytest.mark.parametrize("text", [True, False], ids=["text-pipe", "bytes-pipe"])
def test_read_lines_ends_with_the_stream_and_leaves_nothing_running(text):
    """A child's pipe at end of stream ends the reader, text or bytes alike: a
    reader that spun on "" after the child exited burnt a core and skewed the
    next run of a sweep (issue 19)."""
    import threading

    from gpuscale.live.child import read_lines

    child = subprocess.Popen(
        [sys.executable, "-c", "print('one'); print('two')"],
        stdout=subprocess.PIPE,
        text=text,
    )
    lines: list[str] = []
    reader = threading.Thread(
        target=read_lines, args=(child.stdout, "stdout", lambda level, msg: lines.append(msg))
    )
    reader.start()
    child.wait(timeout=30)
    reader.join(timeout=10)
    assert not reader.is_alive()
    assert [m.strip() for m in lines] == ["one", "two"]
    # No thread of this process is left burning CPU once the stream has ended.
    me = psutil.Process()
    before = me.cpu_times()
    time.sleep(0.5)
    after = me.cpu_times()
    assert (after.user + after.system) - (before.user + before.system) < 0.25


@pytest.mark.parametrize("sampler", [True, False], ids=["from-sampler", "probed"])
def test_the_start_event_records_the_topology(fake_python, tmp_path, sampler):
    fake = FakeNvml.scenario("pcie-two-sockets")
    run = LiveRun(
        TrainConfig(steps=10, warmup_steps=0),
        record=tmp_path / "run.ndjson",
        python=fake_python,
        env={"FAKE_MODE": "exit"},
        nvml=fake,
        sampler=sampler,
        sample_interval_s=0.1,
    ).start()
    list(run.events(timeout=20))
    assert run.done
    from gpuscale.recording.reader import load_run

    start = load_run(run.recording_path).start
    assert start.topology is not None
    assert [g.index for g in start.topology.gpus] == list(range(8))
    assert {(p.a, p.b): p.pcie for p in start.topology.pairs}[(0, 1)] == "single"
    assert not fake.initialized  # NVML shut down again


def test_no_gpu_no_topology_in_the_start_event(fake_python, tmp_path):
    run = _run(fake_python, "exit", tmp_path).start()
    list(run.events(timeout=20))
    assert run.start_event is not None and run.start_event.topology is None
