"""LiveRun with stand-in trainer processes (no TensorFlow): a child that dies
without a word, and one that ignores SIGTERM and has a child of its own."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import threading
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
    if mode == "config-error":  # what the trainer alone finds, e.g. a missing --model function
        from gpuscale.events.schema import EndEvent, ErrorEvent
        client.send(ErrorEvent(t=time.time(), message="--model json:nope: no function 'nope'"))
        client.send(EndEvent(t=time.time(), status="failed"))
        client.close()
        sys.exit(2)
    client.send(StartEvent(t=time.time(), gpuscale_version="0", host="h", pid=os.getpid(),
                           model="fake", num_replicas=2, pids=[os.getpid()]))
    for step in range(2):
        client.send(StepEvent(t=time.time(), step=step, step_time_s=0.01, samples=8))
    if mode in ("complete", "stopped-alone"):  # stopped-alone: SIGTERMed, not by gpuscale
        from gpuscale.events.schema import EndEvent
        status = "completed" if mode == "complete" else "stopped"
        client.send(EndEvent(t=time.time(), status=status, steps=2, duration_s=0.1))
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


def _trainer_of(gpuscale: psutil.Process) -> int:
    """The pid of gpuscale's trainer child (not its group reaper, see live/child.py)."""
    return next(c.pid for c in gpuscale.children() if "gpuscale.trainer" in c.cmdline())


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
        trainer = _trainer_of(psutil.Process(proc.pid))
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
        trainer = _trainer_of(gpuscale)
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


# -- nothing of gpuscale keeps running after a run -----------------------------------

LINGERING = ("gpuscale-trainer-", "gpuscale-script-", "gpuscale-sampler", "gpuscale-event")
"""Threads of a run (its output readers and watcher, the telemetry sampler, the
event server) that must all be gone once it has ended."""


def lingering_threads(older: set[threading.Thread]) -> list[str]:
    """Run threads alive now that were not in ``older`` (another test's are not ours)."""
    return [
        t.name for t in threading.enumerate() if t.name.startswith(LINGERING) and t not in older
    ]


async def assert_nothing_of_gpuscale_runs(
    older: set[threading.Thread], window_s: float = 1.0
) -> None:
    """No thread of a finished run is left (a deterministic check), and the
    process is idle: over ``window_s`` it uses under a tenth of a core. A thread
    that spins (as the stdout/stderr readers once did, issue 19) uses far more;
    a busy machine only lowers what a spinning thread gets, never what an idle
    process uses. Async, so that a dashboard on this event loop keeps running."""
    deadline = time.monotonic() + 10
    while lingering_threads(older):
        assert time.monotonic() < deadline, f"still running: {lingering_threads(older)}"
        await asyncio.sleep(0.05)
    me = psutil.Process()
    before = me.cpu_times()
    started = time.monotonic()
    await asyncio.sleep(window_s)
    after = me.cpu_times()
    used_s = (after.user + after.system) - (before.user + before.system)
    assert used_s < 0.1 * (time.monotonic() - started), f"{used_s:.2f} s of CPU while idle"


async def test_a_finished_watch_leaves_nothing_of_gpuscale_running(fake_python, tmp_path):
    """The dashboard of a finished live run stays open, idle: no reader, sampler
    or event-server thread left, no polling of a stream that has ended."""
    from gpuscale.ui.app import build_app
    from gpuscale.ui.sources import LiveSource

    older = set(threading.enumerate())
    run = _run(fake_python, "complete", tmp_path)
    app = build_app(LiveSource(run))
    async with app.run_test(size=(100, 30)) as pilot:
        deadline = time.monotonic() + 30
        while not app._finished_posted:
            assert time.monotonic() < deadline, "the run never finished"
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        assert app.model.end is not None and app.model.end.status == "completed"
        assert not [w for w in app.workers if w.group == "pump" and w.is_running]
        await assert_nothing_of_gpuscale_runs(older)


def test_a_finished_live_sweep_leaves_nothing_of_gpuscale_running(fake_python, monkeypatch):
    """`gpuscale recommend`'s live sweep, with the stand-in trainer: after the
    last run nothing of gpuscale's keeps running (a run's leftovers would also
    slow the next run down and skew the sweep)."""
    import argparse
    import functools

    import gpuscale.commands.recommend_live as recommend_live
    import gpuscale.live.trainer_run as trainer_run
    import gpuscale.telemetry.nvml as nvml

    monkeypatch.setattr(
        trainer_run.LiveRun,
        "__init__",
        functools.partialmethod(
            trainer_run.LiveRun.__init__,
            python=fake_python,
            nvml=FakeNvml.scenario("no-driver"),
            env={"FAKE_MODE": "complete"},
        ),
    )
    real_probe = nvml.probe
    monkeypatch.setattr(nvml, "probe", lambda: real_probe(FakeNvml.scenario("no-driver")))
    parser = argparse.ArgumentParser()
    from gpuscale.trainer.options import add_trainer_arguments

    add_trainer_arguments(parser)
    parser.add_argument("--sweep")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args(["--steps", "2", "--warmup-steps", "0", "--no-record"])
    args.sweep = [1, 2]
    args.no_reuse = True  # a LiveRun per count, the stand-in's (tests/test_trainer_sweep_split.py: one shared process)
    older = set(threading.enumerate())
    sweep, _ = recommend_live.run_sweep(args, quiet=True)
    assert len(sweep.points) == 2  # the stand-in always says 2 replicas
    asyncio.run(assert_nothing_of_gpuscale_runs(older))


def _with_fake_trainer(monkeypatch, fake_python: str, mode: str) -> None:
    import functools

    import gpuscale.live.trainer_run as trainer_run

    monkeypatch.setattr(
        trainer_run.LiveRun,
        "__init__",
        functools.partialmethod(
            trainer_run.LiveRun.__init__,
            python=fake_python,
            nvml=FakeNvml.scenario("no-driver"),
            env={"FAKE_MODE": mode},
        ),
    )


def test_a_configuration_error_only_the_trainer_finds_is_one_line_and_exit_2(
    fake_python, monkeypatch, capsys
):
    from gpuscale.cli import main

    _with_fake_trainer(monkeypatch, fake_python, "config-error")
    assert main(["run", "--no-record"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[-1] == "gpuscale: error: --model json:nope: no function 'nope'"
    assert "" not in lines and sum(line.startswith("gpuscale: error") for line in lines) == 1


@pytest.mark.parametrize(("mode", "code"), [("complete", 0), ("stopped-alone", 130)])
def test_a_trainer_stopped_on_its_own_exits_as_a_ctrl_c_run_does(
    fake_python, monkeypatch, capsys, mode, code
):
    """A trainer stopped by a signal that did not come through gpuscale (``kill`` of
    the trainer, or of one worker) ends ``stopped``: ``run`` exits 130, as after Ctrl-C."""
    from gpuscale.cli import main

    _with_fake_trainer(monkeypatch, fake_python, mode)
    assert main(["run", "--no-record", "--steps", "10"]) == code
    status = "completed" if mode == "complete" else "stopped"
    assert f"status: {status}" in capsys.readouterr().out


async def test_the_dashboard_says_why_a_run_failed_before_its_first_step(fake_python, monkeypatch):
    """Not "Waiting for the first steps…" under the error: the panel says it failed, and why."""
    from gpuscale.ui.app import build_app
    from gpuscale.ui.sources import LiveSource
    from gpuscale.ui.widgets.header import RunHeader

    _with_fake_trainer(monkeypatch, fake_python, "config-error")
    app = build_app(LiveSource(LiveRun(TrainConfig(steps=10), record=None)))
    async with app.run_test(size=(100, 30)) as pilot:
        deadline = time.monotonic() + 30
        while not app._finished_posted:
            assert time.monotonic() < deadline, "the run never finished"
            await pilot.pause(0.05)
        await pilot.pause(0.3)
        await app.settle()
        panel = str(app.advice_panel.body.render())
        # not "before its first step": a script without the callback may have trained
        assert "failed before any step was reported" in panel and "no function 'nope'" in panel
        assert "Waiting" not in panel
        assert "FAILED" in str(app.query_one(RunHeader).render())


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
