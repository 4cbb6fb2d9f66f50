"""Ctrl-C while a script is still starting (before gpuscale's callback could say
anything): the run is recorded as what was asked (``--devices 2``, the script's
name), lasts from the launch, and no "the script does not use the callback"
warning is given (nothing tells). A stand-in script, no TensorFlow."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from gpuscale.recording.reader import load_run

STARTING = "import time\nprint('loading', flush=True)\ntime.sleep(120)\n"


def test_ctrl_c_while_a_script_starts_is_recorded_as_asked(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(STARTING)
    data = tmp_path / "data"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuscale",
            "run",
            "--devices",
            "2",
            "--",
            sys.executable,
            str(script),
        ],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "COLUMNS": "100", "GPUSCALE_DATA_DIR": str(data)},
    )
    runs = data / "runs"
    try:
        deadline = time.monotonic() + 60  # a hang guard, not a timing promise
        while not (runs.is_dir() and any(runs.iterdir())):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        time.sleep(1.0)  # the run has lasted a while
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    text = out.decode()
    assert "does not use gpuscale's callback" not in text, text
    assert text.count("stopped after") == 1, text
    assert "before any start from gpuscale's callback: no step times (telemetry only)" in text
    assert "train.py on 2 x CPU logical devices (as asked): strategy unknown" in text, text
    assert "stopping the script" in text, text
    (path,) = runs.iterdir()
    assert path.name.endswith("_train.py_2xcpu.ndjson"), path
    run = load_run(path)
    assert run.start.num_replicas == 2 and run.start.model == "train.py"
    assert run.end.status == "stopped" and run.end.duration_s >= 1.0


STARTED = (
    "import os, sys, time\n"
    "sys.path.insert(0, {root!r})\n"
    "from gpuscale.events.schema import StartEvent\n"
    "from gpuscale.events.transport import EventClient\n"
    "client = EventClient.from_env()\n"
    "client.send(StartEvent(t=time.time(), gpuscale_version='0', host='h', pid=os.getpid(),\n"
    "    source='script', platform='cpu', model='train.py', strategy='mirrored',\n"
    "    num_replicas=1, global_batch=64, per_replica_batch=64,\n"
    "    note='CPU only (2 cores), no GPU: a stand-in note'))\n"
    "print('started', flush=True)\n"
    "time.sleep(120)\n"
)


def test_ctrl_c_output_of_run_says_the_note_once(tmp_path):
    """``run``'s Ctrl-C summary is the same block as ``watch``'s; the start note is
    said once: above the progress bar when the run began (watch's screen is gone by
    its summary, so watch prints it there)."""
    script = tmp_path / "train.py"
    script.write_text(STARTED.format(root=str(Path(__file__).resolve().parents[1])))
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuscale", "run", "--no-record", "--", sys.executable, str(script)],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "COLUMNS": "200"},
        text=True,
    )
    try:
        seen = ""
        while "started" not in seen:  # the script's own output, after its start
            line = proc.stdout.readline()
            assert line, seen
            seen += line
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    text = seen + out
    assert "stopping the script" in text, text
    assert text.count("CPU only (2 cores), no GPU: a stand-in note") == 1, text


def test_without_devices_asked_the_count_is_not_said_to_be_asked():
    """A trial: a script run without ``--devices`` (1 CPU device: what gpuscale sees)
    was summarized ``1 x CPU (as asked)`` when nothing was asked."""
    from gpuscale.analysis.script_runs import count_chosen
    from gpuscale.live.script_run import ScriptRun, _PumpState

    plain = ScriptRun([sys.executable, "-c", "pass"], record=None, sampler=False)
    start = _PumpState(plain).provisional_start()
    assert start.config["devices"] is None and count_chosen(start) == "the default"
    from gpuscale.live.devices import ENV_DEVICES

    two = ScriptRun(
        [sys.executable, "-c", "pass"], record=None, sampler=False, env={ENV_DEVICES: "2"}
    )
    start = _PumpState(two).provisional_start()
    assert start.config["devices"] == 2 and count_chosen(start) == "as asked"
