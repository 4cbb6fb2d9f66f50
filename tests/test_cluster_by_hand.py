"""A multi-host run started by hand, one `gpuscale run --strategy multi-worker` per
worker (here on loopback, with plain scripts and event clients standing in for
TensorFlow): a worker that joins late, one whose cluster differs from the chief's, one
started twice, and a worker's script that fails after training."""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path

import pytest
from run_events import collect
from script_flags import wait_for_flag

from gpuscale.errors import GpuscaleError
from gpuscale.events.schema import EndEvent, ErrorEvent, LogEvent, StartEvent, StepEvent
from gpuscale.events.transport import EventClient
from gpuscale.live import cluster, script_run
from gpuscale.live.script_run import ADD_CALLBACK_HINT, LOADED_NO_STEP_HINT, ScriptRun
from gpuscale.recording.reader import load_run

ROOT = str(Path(__file__).resolve().parent.parent)
TOKEN = "by-hand-secret"


def _env(port: int) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("GPUSCALE_EVENTS", None)
    env.update({"GPUSCALE_PORT": str(port), "GPUSCALE_TOKEN": TOKEN})
    return env


def _info(workers: list[str], index: int) -> cluster.ClusterInfo:
    tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
    return cluster.parse_tf_config(json.dumps(tf_config))


def _collect(run: ScriptRun, timeout_s: float = 60.0, on_event=None) -> list:
    return collect(run, timeout_s, on_event)


def _start(worker: int, model: str = "mlp") -> StartEvent:
    return StartEvent(
        t=time.time(),
        worker=worker,
        gpuscale_version="test",
        host=f"host{worker}",
        pid=1000 + worker,
        source="script",
        model=model,
        strategy="multi-worker",
        num_workers=2,
        num_replicas=2,
    )


CALLBACK_SCRIPT = (
    "import os, sys, time\n"
    "sys.path.insert(0, {root!r})\n"
    "from gpuscale.events.schema import EndEvent, StartEvent, StepEvent\n"
    "from gpuscale.events.transport import EventClient\n"
    "client = EventClient.from_env()\n"
    "{wait}"
    "worker = int(os.environ['GPUSCALE_WORKER'])\n"
    "client.send(StartEvent(t=time.time(), worker=worker, gpuscale_version='test', host='here',\n"
    "    pid=os.getpid(), source='script', model='mlp', strategy='multi-worker', num_workers=2,\n"
    "    num_replicas=2))\n"
    "for step in range(3):\n"
    "    client.send(StepEvent(t=time.time(), worker=worker, step=step, step_time_s=0.01,\n"
    "        samples=8))\n"
    "client.send(EndEvent(t=time.time(), worker=worker, status='completed', steps=3))\n"
    "client.close()\n"
    "{after}"
)
"""A script that sends what gpuscale's callback would: a start, steps and an end
(after ``wait``, as TensorFlow starts training only when every worker has joined)."""


def _chief(tmp_path: Path, script: str) -> tuple[ScriptRun, int, list[str]]:
    """Worker 0 of a two-worker cluster on loopback running ``script`` under gpuscale,
    recorded to ``tmp_path / "chief.ndjson"``: the run, its event port, the workers."""
    port = cluster.free_ports(1)[0]
    workers = [f"127.0.0.1:{p}" for p in cluster.free_ports(2)]
    chief = ScriptRun(
        [sys.executable, "-c", script],
        record=tmp_path / "chief.ndjson",
        cluster_info=_info(workers, 0),
        start_timeout_s=0.3,
        sampler=False,
        env=_env(port),
    ).start()
    return chief, port, workers


def _worker_whose_chief_goes(script: str, grace_s: float) -> tuple[ScriptRun, int]:
    """Worker 1 running ``script`` under gpuscale, connected to a chief's event server
    that then closes (its gpuscale ended): the run and the chief's port."""
    from gpuscale.events.transport import EventServer

    port = cluster.free_ports(1)[0]
    workers = [f"127.0.0.1:{p}" for p in cluster.free_ports(2)]
    chief = EventServer(lambda event: None, port=port, token=TOKEN)  # the chief's gpuscale
    other = ScriptRun(
        [sys.executable, "-c", script],
        cluster_info=_info(workers, 1),
        sampler=False,
        env=_env(port),
        chief_gone_grace_s=grace_s,
    ).start()
    try:
        deadline = time.monotonic() + 30  # returns as soon as it holds
        while not chief.connected(1) and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        chief.close()  # gone, and its port closed
    return other, port


def test_a_worker_that_joins_after_the_start_timeout_gets_the_run_its_own_start(
    tmp_path, monkeypatch
):
    """The chief was started first and worker 1 a while later (a second terminal,
    another machine): the chief made up a start when its 15 s were over, told the user
    the script did not use gpuscale's callback, and recorded the run as 1 CPU with
    strategy unknown. While a worker of the cluster is awaited no start is made up:
    the workers' own starts make the run's."""
    monkeypatch.setattr(script_run, "AWAITED_FIRST_S", 0.6)  # said after the 0.3 s below
    joined = tmp_path / "joined"
    script = CALLBACK_SCRIPT.format(root=ROOT, wait=wait_for_flag(joined, 60), after="")
    path = tmp_path / "chief.ndjson"
    chief, port, _ = _chief(tmp_path, script)
    remote: list[EventClient] = []

    def worker_1_joins_once_awaited(event) -> None:
        if remote or not (isinstance(event, LogEvent) and event.message.startswith("waiting ")):
            return  # the chief's start timeout is over by now: it says so after it
        client = EventClient(f"127.0.0.1:{port}", TOKEN, worker=1)
        remote.append(client)
        client.send(_start(1))
        for step in range(3):
            client.send(StepEvent(t=time.time(), worker=1, step=step, step_time_s=0.01, samples=8))
        client.send(EndEvent(t=time.time(), worker=1, status="completed", steps=3))
        client.close()
        joined.touch()

    events = _collect(chief, on_event=worker_1_joins_once_awaited)
    assert remote, "the chief never said whom it awaited"
    assert chief.status == "completed", [e for e in events if isinstance(e, ErrorEvent)]
    warnings = [e.message for e in events if isinstance(e, LogEvent)]
    assert not any(ADD_CALLBACK_HINT in m or LOADED_NO_STEP_HINT in m for m in warnings)
    start = load_run(path).start
    assert (start.model, start.strategy, start.num_replicas) == ("mlp", "multi-worker", 2)
    assert not start.provisional
    assert [w["worker"] for w in start.config["workers"]] == [0, 1]


def test_a_chief_whose_workers_run_without_gpuscale_shows_its_steps_live(tmp_path, monkeypatch):
    """Only the chief runs under gpuscale (its workers run plain `python train.py`, so
    none connects): its script's own start and steps were held back until it exited,
    the live view blank for the whole run (found by review). A start from the chief's
    own script means TensorFlow has every worker: the run starts there."""
    monkeypatch.setattr(script_run, "REMOTE_END_WAIT_S", 1.0)  # none will come
    done = tmp_path / "done"
    script = CALLBACK_SCRIPT.format(root=ROOT, wait="", after=wait_for_flag(done, 60))
    chief, _, _ = _chief(tmp_path, script)
    seen: list = []

    def steps_while_running(event) -> None:
        seen.append((type(event).__name__, chief.done or done.exists()))
        if isinstance(event, StepEvent) and event.step == 2:
            done.touch()  # the script ends only once its steps were shown

    _collect(chief, timeout_s=40, on_event=steps_while_running)
    shown = [name for name, after in seen if not after]
    assert "StartEvent" in shown and shown.count("StepEvent") == 3, seen


def _chief_waiting_on_a_flag(tmp_path: Path, flag: Path) -> tuple[ScriptRun, int, list[str]]:
    return _chief(tmp_path, wait_for_flag(flag, 60))


def test_a_worker_whose_cluster_differs_from_the_chiefs_is_refused_and_runs_nothing(tmp_path):
    """Worker 1's TF_CONFIG names another port for worker 0: TensorFlow on both would
    wait for ever (worker 1 at an address where nothing listens), and the chief did not
    even say whom it awaited (worker 1 was connected). The chief refuses it at once,
    saying why, and worker 1 runs nothing."""
    done = tmp_path / "done"
    chief, port, workers = _chief_waiting_on_a_flag(tmp_path, done)
    wrong = [workers[0].rsplit(":", 1)[0] + ":1", workers[1]]  # worker 0's port differs
    marker = tmp_path / "ran"
    other = ScriptRun(
        [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"],
        cluster_info=_info(wrong, 1),
        sampler=False,
        env=_env(port),
    )
    with pytest.raises(GpuscaleError) as refused:
        other.start()
    message = str(refused.value)
    assert "refused this worker: worker 1's cluster lists other ports than the chief's" in message
    assert workers[0] in message and "GPUSCALE_TOKEN" not in message
    assert message.endswith("(nothing was run)") and not other._procs
    assert chief._server.refused_workers == {1: "its TF_CONFIG lists another cluster"}
    done.touch()
    events = _collect(chief)
    said = [e.message for e in events if isinstance(e, LogEvent)]
    assert (
        "worker 1 is missing from this run: its hello was refused: its TF_CONFIG lists "
        "another cluster" in said
    )
    assert not marker.exists()


def test_a_cluster_of_another_size_is_refused_too():
    info = _info(["a:1", "b:2"], 0)
    assert cluster.cluster_mismatch(info, cluster.fingerprint(info), 1) == ""
    assert cluster.cluster_mismatch(info, "", 1) == ""  # a worker that did not say
    bigger = _info(["a:1", "b:2", "c:3"], 1)
    assert "has 3 workers, the chief's 2 (a:1, b:2)" in cluster.cluster_mismatch(
        info, cluster.fingerprint(bigger), 1
    )
    # hosts may be spelled differently on each machine; ports may not
    assert cluster.fingerprint(_info(["a.example:1", "10.0.0.2:2"], 1)) == cluster.fingerprint(info)


def test_the_same_worker_started_twice_is_refused_while_the_first_runs(tmp_path):
    """Worker 1 started in two terminals: the second was taken in, its TensorFlow
    failed to bind worker 1's port, and its failed end and output went into the run as
    worker 1's (a later loss of the real worker 1 would then not have been seen)."""
    done = tmp_path / "done"
    chief, port, workers = _chief_waiting_on_a_flag(tmp_path, done)
    first = ScriptRun(
        [sys.executable, "-c", wait_for_flag(done, 60)],
        cluster_info=_info(workers, 1),
        sampler=False,
        env=_env(port),
    ).start()
    marker = tmp_path / "ran"
    second = ScriptRun(
        [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"],
        cluster_info=_info(workers, 1),
        sampler=False,
        env=_env(port),
    )
    with pytest.raises(GpuscaleError, match="worker 1 is in this run already") as refused:
        second.start()
    assert "start each worker once" in str(refused.value) and not second._procs
    done.touch()
    events = _collect(chief)
    first.wait(10)
    assert chief.status == "completed" and first.status == "completed"
    assert not [e for e in events if isinstance(e, ErrorEvent)]
    assert not marker.exists()


def test_a_workers_script_that_fails_after_training_is_not_said_to_have_had_no_step(tmp_path):
    """A worker's script sends its steps to the chief itself: its own gpuscale sees
    none, and said the script failed "before gpuscale's callback reported a step"
    after it had trained for minutes (its chief was stopped with Ctrl-C)."""
    done = tmp_path / "done"
    chief, port, workers = _chief_waiting_on_a_flag(tmp_path, done)
    after = "print('UnavailableError: the collective was aborted', file=sys.stderr)\nsys.exit(3)\n"
    other = ScriptRun(
        [sys.executable, "-c", CALLBACK_SCRIPT.format(root=ROOT, wait="", after=after)],
        cluster_info=_info(workers, 1),
        sampler=False,
        env=_env(port),
    ).start()
    assert other.wait(60)
    done.touch()
    _collect(chief)
    assert other.status == "failed" and other.returncode == 3
    assert other.error.message == (
        f"the script worker 1 ({shlex.join(other.argv)}) exited with status 3: "
        "UnavailableError: the collective was aborted"
    )


def test_a_worker_whose_chief_is_gone_stops_its_script_and_says_why(tmp_path):
    """The chief's gpuscale ended (Ctrl-C there, or its TensorFlow failed to start):
    a worker said "events are no longer reported (training goes on)" and its script
    waited for ever in TensorFlow for a chief that was not coming back."""
    ticking = (
        "import time\n"
        "deadline = time.monotonic() + 60  # a hang guard\n"
        "while time.monotonic() < deadline:\n"
        "    print('tick', flush=True)\n"
        "    time.sleep(0.1)\n"
    )
    # 60 s by default: a script may write its files first
    other, port = _worker_whose_chief_goes(ticking, grace_s=1.0)
    assert other.wait(50), "the worker ran on without its chief"
    assert other.status == "lost" and other.returncode == 0  # `gpuscale run` exits 1
    assert other.error.message.startswith(
        f"the chief at 127.0.0.1:{port} is gone (its gpuscale ended, or its machine went away)"
    )
    assert "script was stopped 1 s later" in other.error.message


def test_a_worker_that_ends_on_its_own_after_its_chief_completed_is_not_killed(tmp_path):
    """The chief's run completed and its gpuscale closed its port while this worker's
    script still wrote its files: the worker killed it at once and ended 'lost'
    (found by review)."""
    done = tmp_path / "done"
    writing = (
        "import time\n"
        "deadline = time.monotonic() + 60  # a hang guard\n"
        f"while time.monotonic() < deadline and not __import__('os').path.exists({str(done)!r}):\n"
        "    print('writing', flush=True)\n"
        "    time.sleep(0.1)\n"
    )
    other, _ = _worker_whose_chief_goes(writing, grace_s=30.0)
    deadline = time.monotonic() + 20  # until the worker has seen its chief gone
    while not other._forward._broken and time.monotonic() < deadline:
        time.sleep(0.05)
    assert other._forward._broken
    time.sleep(4.0)  # the old rule stopped the script within 3 s of that
    assert not other.done  # still running: not killed at once
    done.touch()  # its files written: the script ends on its own
    assert other.wait(30)
    assert other.status == "completed" and other.returncode == 0


def test_a_failure_after_another_worker_stopped_names_that_worker(tmp_path):
    """Ctrl-C on worker 1's machine stopped its script; the chief's script then failed
    in its next all-reduce, and the chief said only "the script worker 0 (...) exited
    with status 1", as if worker 0 had broken."""
    stopped = tmp_path / "stopped"
    script = wait_for_flag(stopped, 60) + (
        "import sys\n"
        "print('UnavailableError: Collective ops is aborted by: Socket closed', file=sys.stderr)\n"
        "sys.exit(1)\n"
    )
    chief, port, _ = _chief(tmp_path, script)
    remote = EventClient(f"127.0.0.1:{port}", TOKEN, worker=1)
    remote.send(_start(1))
    for step in range(3):
        remote.send(StepEvent(t=time.time(), worker=1, step=step, step_time_s=0.01, samples=8))
    remote.send(EndEvent(t=time.time(), worker=1, status="stopped", steps=3))
    remote.close()

    def fail_once_worker_1_stopped(event) -> None:
        if isinstance(event, LogEvent) and event.message.startswith("worker 1: training stopped"):
            stopped.touch()

    events = _collect(chief, on_event=fail_once_worker_1_stopped)
    assert chief.status == "failed" and chief.returncode == 1
    (error,) = [e for e in events if isinstance(e, ErrorEvent)]
    assert error.message == (
        f"the script worker 0 ({shlex.join(chief.argv)}) exited with status 1 after worker 1 "
        "ended stopped (MultiWorkerMirroredStrategy is synchronous: no worker trains on "
        "without the others)"
    )


async def test_a_workers_dashboard_says_where_its_steps_go_not_that_it_has_no_callback():
    """`gpuscale watch --strategy multi-worker -- python train_mw.py` on worker 1 (as the
    docs say, on each machine): its script sends its steps to the chief, so this
    dashboard sees none, and it said "No step times: the script does not use gpuscale's
    callback", and "recording none (nothing was recorded)"."""
    from gpuscale.events.transport import EventServer
    from gpuscale.ui.app import build_app
    from gpuscale.ui.sources import LiveSource
    from gpuscale.ui.widgets.advice import AdvicePanel
    from gpuscale.ui.widgets.header import RunHeader

    port = cluster.free_ports(1)[0]
    workers = [f"127.0.0.1:{p}" for p in cluster.free_ports(2)]
    chief = EventServer(lambda event: None, port=port, token=TOKEN)
    run = ScriptRun(
        [sys.executable, "-c", "print('training', flush=True)"],
        cluster_info=_info(workers, 1),
        sampler=False,
        env=_env(port),
    )
    source = LiveSource(run)
    app = build_app(source)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            deadline = time.monotonic() + 60  # events, not a time: a hang guard
            while app.model.end is None and time.monotonic() < deadline:
                await pilot.pause(0.1)
                if run.done:
                    await app.settle()
            await app.settle()
            assert app.model.end is not None and app.model.end.status == "completed"
            advice = str(app.query_one(AdvicePanel).body.render())
            assert "does not use gpuscale's callback" not in advice
            assert f"go to the chief at 127.0.0.1:{port}" in advice.replace("\n", " ")
            header = str(app.query_one(RunHeader).render())
            assert "no step times" not in header and "nothing was recorded" not in header
            assert "steps at the chief" in header
        source.stop()
    finally:
        chief.close()
