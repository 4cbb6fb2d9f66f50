"""Multi-worker runs on localhost: 2 and 3 worker processes (TF_CONFIG with loopback
ports, CPU devices), a worker killed mid-run, strangers without the token, and the
chief/worker roles of a multi-host run (with plain scripts, no TensorFlow)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from run_events import collect
from script_flags import wait_for_flag

from gpuscale.commands.run import SCRIPT_STOPPED_NOTE
from gpuscale.errors import GpuscaleError
from gpuscale.events.schema import (
    EndEvent,
    ErrorEvent,
    LogEvent,
    PhaseEvent,
    StartEvent,
    StepEvent,
)
from gpuscale.events.transport import EventClient, HelloRefused
from gpuscale.live import cluster
from gpuscale.live.script_run import ADD_CALLBACK_HINT, ScriptRun
from gpuscale.recording.reader import load_run
from gpuscale.trainer.schedule import FIRST_PROBE_AFTER

SCRIPT = Path(__file__).parent / "scripts_keras" / "train_tiny.py"
QUIET_TF = {"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(QUIET_TF)
    env.pop("GPUSCALE_EVENTS", None)
    return env


def _collect(run: ScriptRun, timeout_s: float = 150.0, on_event=None) -> list:
    return collect(run, timeout_s, on_event, poll_s=1.0)


def _wait_for_flag(flag: Path) -> str:
    return wait_for_flag(flag, 60)


@pytest.mark.tf
def test_two_workers_report_into_one_recording(tmp_path):
    path = tmp_path / "two.ndjson"
    run = ScriptRun(
        [sys.executable, str(SCRIPT), "6"],
        record=path,
        local_workers=2,
        sampler=False,
        env=_env(),
    ).start()
    events = _collect(run)
    assert run.status == "completed", [e for e in events if isinstance(e, ErrorEvent)]
    start = events[0]
    assert isinstance(start, StartEvent) and start.source == "script"
    assert start.strategy == "multi-worker" and start.cross_device_ops == "collective"
    assert start.num_workers == 2 and start.num_replicas == 2
    assert [w["worker"] for w in start.config["workers"]] == [0, 1]
    assert all(w["host"] for w in start.config["workers"])
    for worker in (0, 1):
        steps = [e for e in events if isinstance(e, StepEvent) and e.worker == worker]
        assert [s.step for s in steps] == list(range(6))
        assert all(s.samples == 32 and s.step_time_s > 0 for s in steps)
        phases = [e for e in events if isinstance(e, PhaseEvent) and e.worker == worker]
        assert phases and all(p.compute_s > 0 and p.allreduce_s >= 0 for p in phases)
        assert phases[0].payload_bytes == start.payload_bytes == (8 * 16 + 16 + 16 * 3 + 3) * 4
    loaded = load_run(path)
    assert loaded.end is not None and loaded.end.status == "completed"
    recorded_steps = [e for e in loaded.events if isinstance(e, StepEvent)]
    assert len(recorded_steps) == 12


@pytest.mark.tf
def test_two_workers_probe_together_within_the_budget(tmp_path):
    """Without ``every``: worker 0's schedule decides for both through a vote
    between steps, the first when the first probe is due."""
    run = ScriptRun(
        [sys.executable, str(SCRIPT), "8", "0", "budget"],
        record=tmp_path / "budget.ndjson",
        local_workers=2,
        sampler=False,
        env=_env(),
    ).start()
    events = _collect(run)
    assert run.status == "completed", [e for e in events if isinstance(e, ErrorEvent)]
    assert "worker 0's schedule for every worker" in events[0].config["probe_schedule"]
    probed = [
        [e.step for e in events if isinstance(e, PhaseEvent) and e.worker == w] for w in (0, 1)
    ]
    # 2 warm-up steps (0, 1), then FIRST_PROBE_AFTER counted ones: the probe after step 4
    assert probed[0][:1] == [2 + FIRST_PROBE_AFTER - 1]
    assert probed[1] == probed[0]


@pytest.mark.tf
def test_three_workers_one_killed_is_reported_and_the_rest_kept(tmp_path):
    path = tmp_path / "three.ndjson"
    run = ScriptRun(
        [sys.executable, str(SCRIPT), "400", "0.05"],
        record=path,
        local_workers=3,
        sampler=False,
        env=_env(),
    ).start()
    killed = {}

    def kill_worker_2_mid_run(event):
        if isinstance(event, StepEvent) and event.worker == 2 and event.step >= 3 and not killed:
            killed["pid"] = run.pid_of(2)
            os.kill(killed["pid"], signal.SIGKILL)

    events = _collect(run, on_event=kill_worker_2_mid_run)
    assert killed, "worker 2 never reached step 3"
    assert run.status == "lost" and run.lost_workers == [2]
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert errors and errors[0].worker == 2
    assert "worker 2" in errors[0].message and "lost" in errors[0].message
    assert isinstance(events[-1], EndEvent) and events[-1].status == "lost"
    # every process of the cluster is gone
    for proc in run._procs.values():
        assert proc.poll() is not None
    # the recording keeps what came before the loss, and the loss itself
    loaded = load_run(path)
    assert loaded.end is not None and loaded.end.status == "lost"
    recorded = [e for e in loaded.events if isinstance(e, StepEvent) and e.worker == 2]
    assert len(recorded) >= 4
    assert any(isinstance(e, ErrorEvent) and "worker 2" in e.message for e in loaded.events)


def test_a_stranger_without_the_token_is_refused_and_a_script_without_callback_runs(tmp_path):
    path = tmp_path / "plain.ndjson"
    shown = tmp_path / "shown"  # the script runs on until its line was shown
    script = "print('hello from the script', flush=True)\n" + _wait_for_flag(shown)
    run = ScriptRun(
        [sys.executable, "-c", script],
        record=path,
        start_timeout_s=0.3,
        sampler=False,
        env=_env(),
    ).start()
    with pytest.raises(HelloRefused):
        EventClient(run._server.address, "not-the-token", worker=7)

    def end_once_shown(event):  # shown once the start timeout passed: the script still runs
        if isinstance(event, LogEvent) and event.message == "hello from the script":
            shown.touch()

    events = _collect(run, timeout_s=30, on_event=end_once_shown)
    assert run.status == "completed"
    # shown at once with a provisional start, recorded with the made-up one and the hint
    assert isinstance(events[0], StartEvent) and events[0].source == "script"
    start = load_run(path).start
    assert start.note == ADD_CALLBACK_HINT and start.config["callback"] is False
    assert [e for e in events if isinstance(e, StartEvent)][-1] == start
    assert not any(isinstance(e, StepEvent) for e in events)
    logs = [e.message for e in events if isinstance(e, LogEvent)]
    assert any("rejected a connection" in m for m in logs)
    assert "hello from the script" in logs
    assert any("step times are unavailable" in m for m in logs)
    assert load_run(path).end.status == "completed"


def test_a_failing_script_ends_failed_with_its_stderr(tmp_path):
    script = "import sys; print('bad things', file=sys.stderr); sys.exit(3)"
    run = ScriptRun(
        [sys.executable, "-c", script], record=None, start_timeout_s=5, sampler=False
    ).start()
    events = _collect(run, timeout_s=30)
    assert run.status == "failed" and run.returncode == 3
    error = next(e for e in events if isinstance(e, ErrorEvent))
    assert "exited with status 3" in error.message and "bad things" in error.traceback


def test_chief_and_worker_roles_of_a_multi_host_run(tmp_path):
    """The chief listens on GPUSCALE_PORT with the shared token; the other worker
    forwards its script's output and telemetry there, stamped with its index."""
    port = cluster.free_ports(1)[0]
    workers = [f"127.0.0.1:{p}" for p in cluster.free_ports(2)]
    env = _env()
    env.update({"GPUSCALE_PORT": str(port), "GPUSCALE_TOKEN": "shared-secret-1"})

    def info(index: int) -> cluster.ClusterInfo:
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        return cluster.parse_tf_config(json.dumps(tf_config))

    script = "import os; print('worker', os.environ['GPUSCALE_WORKER'], flush=True)\n"
    forwarded = tmp_path / "forwarded"  # the chief's script runs on until worker 1's line came
    chief = ScriptRun(
        [sys.executable, "-c", script + _wait_for_flag(forwarded)],
        record=tmp_path / "chief.ndjson",
        cluster_info=info(0),
        start_timeout_s=0.5,
        sampler=False,
        env=env,
    ).start()
    other = ScriptRun(
        [sys.executable, "-c", script],
        cluster_info=info(1),
        sampler=False,
        env=env,
    ).start()

    def end_once_forwarded(event):
        if isinstance(event, LogEvent) and (event.worker, event.message) == (1, "worker 1"):
            forwarded.touch()

    events = _collect(chief, timeout_s=60, on_event=end_once_forwarded)
    other.wait(10)
    logs = [(e.worker, e.message) for e in events if isinstance(e, LogEvent)]
    assert (0, "worker 0") in logs and (1, "worker 1") in logs
    assert chief.status == "completed" and other.status == "completed"


def test_a_remote_worker_that_vanishes_is_reported_lost(tmp_path):
    """A worker on another host is seen only through its connection: closing it
    without an end event is a lost worker, named with its host."""
    port = cluster.free_ports(1)[0]
    workers = [f"127.0.0.1:{p}" for p in cluster.free_ports(2)]
    env = _env()
    env.update({"GPUSCALE_PORT": str(port), "GPUSCALE_TOKEN": "shared-secret-2"})
    tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": 0}}
    path = tmp_path / "chief.ndjson"
    chief = ScriptRun(
        [sys.executable, "-c", "import time; time.sleep(30)"],
        record=path,
        cluster_info=cluster.parse_tf_config(json.dumps(tf_config)),
        start_timeout_s=0.3,
        sampler=False,
        env=env,
        # how long a closed connection may wait for its worker to reconnect: 1 s, not
        # the default 6 (the reconnect test below keeps the default)
        lost_grace_s=1.0,
    ).start()
    remote = EventClient(f"127.0.0.1:{port}", "shared-secret-2", worker=1)
    remote.send(
        StartEvent(
            t=time.time(),
            worker=1,
            gpuscale_version="test",
            host="far-away-host",
            pid=4242,
            source="script",
        )
    )
    for step in range(3):
        remote.send(StepEvent(t=time.time(), worker=1, step=step, step_time_s=0.1, samples=8))
    time.sleep(0.5)
    remote.close()  # gone without an end event
    events = _collect(chief, timeout_s=30)
    assert chief.status == "lost" and chief.lost_workers == [1]
    error = next(e for e in events if isinstance(e, ErrorEvent))
    assert "worker 1 on far-away-host (pid 4242) was lost" in error.message
    assert "after 3 steps" in error.message
    loaded = load_run(path)
    assert [e.step for e in loaded.events if isinstance(e, StepEvent)] == [0, 1, 2]
    assert loaded.end.status == "lost"


def test_stop_ends_the_script_and_its_children_within_5_s():
    import psutil

    script = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        "print('started', flush=True); time.sleep(60)"
    )
    run = ScriptRun(
        [sys.executable, "-c", script], record=None, sampler=False, start_timeout_s=0.2
    ).start()
    for event in run.events(timeout=10):
        if isinstance(event, LogEvent) and event.message == "started":
            break
    parent = psutil.Process(run.pid_of(0))
    children = parent.children(recursive=True)
    assert children
    started = time.monotonic()
    run.stop()
    assert time.monotonic() - started < 5
    assert run.done and run.status == "stopped"
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in children)
    assert isinstance(run.end, EndEvent) and run.end.status == "stopped"


def _chief(tmp_path: Path, token: str, script: str = "import time; time.sleep(30)") -> tuple:
    port = cluster.free_ports(1)[0]
    workers = [f"127.0.0.1:{p}" for p in cluster.free_ports(2)]
    env = _env()
    env.update({"GPUSCALE_PORT": str(port), "GPUSCALE_TOKEN": token})
    tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": 0}}
    path = tmp_path / "chief.ndjson"
    chief = ScriptRun(
        [sys.executable, "-c", script],
        record=path,
        cluster_info=cluster.parse_tf_config(json.dumps(tf_config)),
        start_timeout_s=0.3,
        sampler=False,
        env=env,
    ).start()
    return chief, port, path


def test_a_remote_worker_that_reconnects_is_not_lost(tmp_path):
    """A network hiccup: the worker's EventClient reconnects after a failed send.
    The old connection closes without an end event, but a new one from the same
    worker is open within the grace period, so the run goes on."""
    done = tmp_path / "remote-done"  # the chief's script ends once the remote worker has
    chief, port, path = _chief(tmp_path, "shared-secret-3", _wait_for_flag(done))
    remote = EventClient(f"127.0.0.1:{port}", "shared-secret-3", worker=1)
    remote.send(
        StartEvent(
            t=time.time(), worker=1, gpuscale_version="t", host="far", pid=1, source="script"
        )
    )
    for step in range(3):
        remote.send(StepEvent(t=time.time(), worker=1, step=step, step_time_s=0.1, samples=8))
    time.sleep(0.5)
    remote._sock.shutdown(socket.SHUT_RDWR)  # the connection breaks; the next send reconnects
    time.sleep(0.3)
    for step in range(3, 6):
        remote.send(StepEvent(t=time.time(), worker=1, step=step, step_time_s=0.1, samples=8))
    remote.send(EndEvent(t=time.time(), worker=1, status="completed", steps=6))
    remote.close()
    done.touch()
    events = _collect(chief, timeout_s=40)
    assert chief.lost_workers == [] and chief.status == "completed"
    assert not any(isinstance(e, ErrorEvent) for e in events)
    loaded = load_run(path)
    assert [e.step for e in loaded.events if isinstance(e, StepEvent)] == list(range(6))


def test_a_killed_gpuscale_leaves_no_script_behind():
    """SIGKILL gives gpuscale no chance to stop the script: the kernel does
    (PR_SET_PDEATHSIG), for one script and for each local worker."""
    import psutil

    code = (
        "import sys, time\n"
        "from gpuscale.live.script_run import ScriptRun\n"
        "argv = [sys.executable, '-c', 'import time; time.sleep(60)']\n"
        "one = ScriptRun(argv, record=None, sampler=False).start()\n"
        "two = ScriptRun(argv, record=None, sampler=False, local_workers=2).start()\n"
        "print(one.pid_of(0), two.pid_of(0), two.pid_of(1), flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 3 and all(psutil.pid_exists(p) for p in pids)

    def gone(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 5
    while not all(gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    leftover = [p for p in pids if not gone(p)]
    for pid in leftover:
        os.kill(pid, signal.SIGKILL)
    assert leftover == []


def test_a_worker_that_cannot_start_takes_the_started_ones_down(monkeypatch):
    import gpuscale.live.child as child

    started: list = []
    real_spawn = child.spawn

    def spawn(args, **kwargs):
        if started:
            raise FileNotFoundError(2, "No such file or directory")
        proc = real_spawn([sys.executable, "-c", "import time; time.sleep(60)"], **kwargs)
        started.append(proc)
        return proc

    monkeypatch.setattr(child, "spawn", spawn)
    with pytest.raises(GpuscaleError, match="cannot start"):
        cluster.launch_local_workers(["train"], 3, events_address="127.0.0.1:1", token="t" * 8)
    assert len(started) == 1 and started[0].returncode is not None  # killed and reaped


def test_a_non_chief_worker_says_where_its_events_went(capsys):
    from types import SimpleNamespace

    from gpuscale.commands.run import print_run_summary

    run = SimpleNamespace(
        start_event=None,
        end=EndEvent(t=1.0, status="completed"),
        forwarding_to="chief-host:47470",
        worker=1,
        error=None,
        recording_path=None,
        recording_problem=None,
    )
    print_run_summary(run)
    out = capsys.readouterr().out
    assert "worker 1: completed" in out and "chief at chief-host:47470" in out
    assert "0 steps" not in out


def test_a_refused_sample_interval_starts_no_script(tmp_path):
    marker = tmp_path / "ran"
    run = ScriptRun(
        [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"],
        record=tmp_path / "run.ndjson",
        sample_interval_s=0.05,
        local_workers=2,
    )
    with pytest.raises(GpuscaleError, match="sample interval"):
        run.start()
    assert run._procs == {} and run._server is None
    time.sleep(0.5)
    assert not marker.exists()


def test_issue17_case2_a_worker_with_the_wrong_token_fails_and_the_chief_names_it(tmp_path):
    """The hello is answered: a refused worker says so and runs nothing (exit
    non-zero through GpuscaleError); the chief does not wait for it and says
    which worker is missing and why."""
    port = cluster.free_ports(1)[0]
    workers = [f"127.0.0.1:{p}" for p in cluster.free_ports(2)]
    env = _env()
    env.update({"GPUSCALE_PORT": str(port), "GPUSCALE_TOKEN": "shared-sécret-1"})

    def info(index: int) -> cluster.ClusterInfo:
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        return cluster.parse_tf_config(json.dumps(tf_config))

    script = "import time; print('hello', flush=True); time.sleep(1)"
    chief = ScriptRun(
        [sys.executable, "-c", script],
        record=tmp_path / "chief.ndjson",
        cluster_info=info(0),
        start_timeout_s=0.5,
        sampler=False,
        env=env,
    ).start()
    other = ScriptRun(
        [sys.executable, "-c", script],
        cluster_info=info(1),
        sampler=False,
        env={**env, "GPUSCALE_TOKEN": "another-sécret"},
    )
    with pytest.raises(GpuscaleError, match="refused this worker") as refused:
        other.start()
    assert refused.value.exit_code != 0 and not other._procs
    events = _collect(chief, timeout_s=60)
    messages = [e.message for e in events if isinstance(e, LogEvent)]
    assert any("worker 1 is missing from this run: its hello was refused" in m for m in messages)
    recorded = load_run(tmp_path / "chief.ndjson")
    assert any(
        isinstance(e, LogEvent) and "worker 1 is missing" in e.message for e in recorded.events
    )


def test_issue17_case10_a_grandchild_in_its_own_session_is_stopped_too():
    """A script starts a helper that calls setsid (leaving the script's process
    group) and exits, orphaning it: the stop still ends it."""
    import psutil

    script = (
        "import os, subprocess, sys, time\n"
        "helper = 'import os, time; os.setsid(); print(os.getpid(), flush=True); time.sleep(60)'\n"
        "p = subprocess.Popen([sys.executable, '-c', helper], stdout=subprocess.PIPE, text=True)\n"
        "print('helper', p.stdout.readline().strip(), flush=True)\n"
        "time.sleep(60)\n"
    )
    run = ScriptRun(
        [sys.executable, "-c", script], record=None, sampler=False, start_timeout_s=0.2
    ).start()
    helper = None
    for event in run.events(timeout=30):
        if isinstance(event, LogEvent) and event.message.startswith("helper "):
            helper = psutil.Process(int(event.message.split()[1]))
            break
    assert helper is not None
    assert os.getpgid(helper.pid) != os.getpgid(run.pid_of(0))
    time.sleep(1.0)  # the pump has seen it by now (it looks twice a second)
    run.stop()
    assert run.done and run.status == "stopped"
    try:
        helper.wait(timeout=5)
    except psutil.TimeoutExpired:
        helper.kill()
        raise AssertionError("the setsid grandchild survived the stop") from None


def test_issue17_case10_a_command_that_does_not_exist_fails_at_once():
    run = ScriptRun(["/nonexistent/command"], record=None, sampler=False)
    with pytest.raises(GpuscaleError, match="cannot start /nonexistent/command"):
        run.start()
    began = time.monotonic()
    run.close()  # what `gpuscale run` does on the way out
    assert time.monotonic() - began < 2.0  # it waited 5 s for a run that never began
    assert run.done


def test_the_chief_says_which_workers_it_still_awaits(tmp_path, monkeypatch):
    """A multi-host run started on the chief alone: TensorFlow waits for every worker
    in TF_CONFIG, silently; the chief says whom it awaits (a new user's trial waited
    two minutes with nothing on the screen)."""
    from gpuscale.live import script_run

    monkeypatch.setattr(script_run, "AWAITED_FIRST_S", 0.3)
    port = cluster.free_ports(1)[0]
    workers = [f"127.0.0.1:{p}" for p in cluster.free_ports(2)]
    env = _env()
    env.update({"GPUSCALE_PORT": str(port), "GPUSCALE_TOKEN": "shared-secret-2"})
    tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": 0}}
    chief = ScriptRun(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        record=tmp_path / "chief.ndjson",
        cluster_info=cluster.parse_tf_config(json.dumps(tf_config)),
        start_timeout_s=0.2,
        sampler=False,
        env=env,
    ).start()

    def stop_once_said(event) -> None:  # the user gives up: Ctrl-C
        if isinstance(event, LogEvent) and event.message.startswith("waiting "):
            chief.stop()

    events = _collect(chief, timeout_s=60, on_event=stop_once_said)
    said = [e.message for e in events if isinstance(e, LogEvent) and "waiting" in e.message]
    assert said and said[0].startswith("waiting ")
    assert f"for worker 1 ({workers[1]}) of TF_CONFIG: training starts only when" in said[0]
    recorded = [e for e in load_run(tmp_path / "chief.ndjson").events if isinstance(e, LogEvent)]
    assert any(e.message == said[0] for e in recorded)


def test_the_builtin_trainer_as_a_worker_program_is_named_by_its_model():
    """`--strategy multi-worker` without a command runs `python -m gpuscale.trainer
    --config JSON` on each worker: its run is the model's, not "gpuscale.trainer"."""
    from gpuscale.live.script_run import builtin_trainer_model, script_name

    argv = [sys.executable, "-m", "gpuscale.trainer", "--config", '{"model": "mlp", "steps": 30}']
    assert builtin_trainer_model(argv) == "mlp" and script_name(argv) == "mlp"
    assert builtin_trainer_model([sys.executable, "train.py"]) is None
    assert script_name([sys.executable, "-m", "pkg.train"]) == "pkg.train"
    broken = [sys.executable, "-m", "gpuscale.trainer", "--config", "{not json"]
    assert builtin_trainer_model(broken) is None


# a stand-in for the built-in trainer as a worker: 3 steps, then its end says `stopped`
# and it exits 0, as every worker does when one of them was stopped alone (kill)
STOPPED_WORKER = """
import os, sys, time
from gpuscale.events.schema import EndEvent, LogEvent, StartEvent, StepEvent
from gpuscale.events.transport import EventClient
from gpuscale.trainer.vote import stop_asked_message

client = EventClient.from_env()
w = client.worker
client.send(StartEvent(t=time.time(), worker=w, gpuscale_version="test", host="here", pid=os.getpid()))
for step in range(3):
    client.send(StepEvent(t=time.time(), worker=w, step=step, step_time_s=0.01, samples=8))
if str(w) in sys.argv[1:]:  # this one was asked to stop
    client.send(LogEvent(t=time.time(), worker=w, message=stop_asked_message("SIGTERM")))
client.send(EndEvent(t=time.time(), worker=w, status="stopped", steps=3))
client.close()
"""


@pytest.mark.parametrize(
    ("asked", "builtin", "why"),
    [
        (["1"], False, "worker 1 was asked to stop (SIGTERM)"),
        # the built-in trainer's workers end stopped only when one of them was asked
        ([], True, "worker 0 and worker 1 ended stopped"),
    ],
)
def test_workers_that_stopped_on_their_own_end_the_run_stopped_not_completed(
    tmp_path, monkeypatch, asked, builtin, why
):
    if builtin:  # the stand-in run as the built-in trainer's workers
        monkeypatch.setattr("gpuscale.live.script_run.builtin_trainer_model", lambda argv: "mlp")
    path = tmp_path / "run.ndjson"
    run = ScriptRun(
        [sys.executable, "-c", STOPPED_WORKER, *asked],
        record=path,
        local_workers=2,
        sampler=False,
        env=_env(),
    ).start()
    events = _collect(run, timeout_s=60)
    assert run.status == "stopped" and run.returncode == 0
    end = events[-1]
    assert isinstance(end, EndEvent) and end.status == "stopped" and end.steps == 3
    said = [e for e in events if isinstance(e, LogEvent) and e.source == "gpuscale"]
    assert (said[-1].level, said[-1].message) == (
        "warning",
        f"the run stopped after 3 steps, not through gpuscale: {why}",
    )
    loaded = load_run(path)
    assert loaded.end.status == "stopped" and loaded.end.summary["status"] == "stopped"
    assert said[-1].message in [e.message for e in loaded.events if isinstance(e, LogEvent)]
    assert not run.stopped_by_script


def test_a_scripts_own_early_stop_is_recorded_stopped_without_a_signal_warning(tmp_path):
    # a custom loop's close("stopped") on every worker, no worker asked to stop: the
    # script's own choice, not "worker 0 and worker 1 ended stopped" (and no exit 130)
    path = tmp_path / "run.ndjson"
    run = ScriptRun(
        [sys.executable, "-c", STOPPED_WORKER],
        record=path,
        local_workers=2,
        sampler=False,
        env=_env(),
    ).start()
    events = _collect(run, timeout_s=60)
    assert run.status == "stopped" and run.returncode == 0 and run.stopped_by_script
    end = events[-1]
    assert isinstance(end, EndEvent) and end.status == "stopped" and end.steps == 3
    said = [e.message for e in events if isinstance(e, LogEvent)]
    assert not any("not through gpuscale" in m or "ended stopped" in m for m in said)
    assert load_run(path).end.status == "stopped"


def test_run_exits_130_after_a_scripts_own_early_stop(tmp_path):
    # `gpuscale run` of a script whose own loop ends close("stopped") on every worker:
    # 130 as for any stopped run (a shell must not take it for completed), one line
    # saying so, and no "not through gpuscale" warning
    path = tmp_path / "run.ndjson"
    proc = subprocess.run(
        [sys.executable, "-m", "gpuscale", "run", "--record", str(path), "--"]
        + [sys.executable, "-c", STOPPED_WORKER],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env={**_env(), "GPUSCALE_DATA_DIR": str(tmp_path)},
        timeout=120,
    )
    assert proc.returncode == 130, (proc.returncode, proc.stderr[-2000:])
    assert "not through gpuscale" not in proc.stdout + proc.stderr
    assert proc.stderr.splitlines().count(SCRIPT_STOPPED_NOTE) == 1
    assert load_run(path).end.status == "stopped"
