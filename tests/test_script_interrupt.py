"""Ctrl-C under ``gpuscale run -- python train.py`` reaches the script as Ctrl-C: its
own ``except KeyboardInterrupt`` (the usual checkpoint save) runs, as it does for
``python train.py`` run alone, before gpuscale stops what is left (SIGTERM, SIGKILL).
A signal that terminates gpuscale (SIGTERM, SIGHUP) still reaches it as SIGTERM. Plain
Python stand-in scripts, no TensorFlow."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from gpuscale.live.script_run import ScriptRun
from gpuscale.recording.reader import load_run
from gpuscale.ui.sources import LiveSource

# A training loop that saves its work on Ctrl-C, the usual pattern
# (``try: model.fit(...) except KeyboardInterrupt: model.save(...)``).
SAVES_ON_CTRL_C = """
import sys, time
print("training", flush=True)
try:
    for step in range(100000):
        time.sleep(0.05)
except KeyboardInterrupt:
    time.sleep(0.5)  # a checkpoint takes a while to write
    with open(sys.argv[1], "w") as f:
        f.write(f"saved at step {step}")
    print("checkpoint saved", flush=True)
"""

IGNORES_CTRL_C = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
print("training", flush=True)
time.sleep(600)
"""


def _default_sigint() -> None:
    """Ctrl-C as a terminal delivers it, even under a pytest started with SIGINT
    ignored (``pytest &`` from a script), which every child would inherit."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for_output(run: ScriptRun, text: str, timeout_s: float = 60.0) -> None:
    """Read the run's events until a line of the script's output says ``text``."""
    deadline = time.monotonic() + timeout_s  # a hang guard, not a timing promise
    while time.monotonic() < deadline:
        for event in run.events(timeout=0.2):
            if text in (getattr(event, "message", None) or ""):
                return
            if time.monotonic() >= deadline:
                break
        assert not run.done, "the script ended before it said " + repr(text)
    raise AssertionError(f"the script never said {text!r}")


def _script_run(tmp_path: Path, code: str, *args: str) -> ScriptRun:
    script = tmp_path / "train.py"
    script.write_text(code)
    # early_telemetry off and a start at once: the script's output reaches the consumer
    return ScriptRun(
        [sys.executable, str(script), *args],
        record=tmp_path / "run.ndjson",
        sampler=False,
        start_timeout_s=0.0,
    )


def _ctrl_c_gpuscale(tmp_path: Path, args: list[str], up: Callable[[], bool]) -> tuple:
    """``gpuscale ARGS`` in a subprocess, given Ctrl-C as a terminal gives it (SIGINT to
    gpuscale alone) once ``up()``: its exit status, stdout and stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuscale", *args],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200", "GPUSCALE_DATA_DIR": str(tmp_path / "data")},
        preexec_fn=_default_sigint,
    )
    try:
        deadline = time.monotonic() + 120  # a hang guard only
        while not up():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


def _start_as_in_a_terminal(run) -> None:
    """Start ``run`` with SIGINT at its default, as in a terminal (pytest may ignore it,
    and a script inherits an ignored SIGINT)."""
    previous = signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        run.start()
    finally:
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_to_gpuscale_run_reaches_the_script_which_saves_its_work(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SAVES_ON_CTRL_C)
    checkpoint = tmp_path / "ckpt.txt"
    recording = tmp_path / "run.ndjson"
    # under way once the script's first line is recorded
    code, out, err = _ctrl_c_gpuscale(
        tmp_path,
        ["run", "--record", str(recording), "--", sys.executable, str(script), str(checkpoint)],
        lambda: recording.exists() and '"message":"training"' in recording.read_text(),
    )
    assert checkpoint.read_text().startswith("saved at step"), err
    assert code == 130, err
    assert "stopping the script (Ctrl-C): Ctrl-C passed on to it" in err, err
    assert "Traceback" not in out + err
    run = load_run(recording)
    assert run.end is not None and run.end.status == "stopped"
    messages = [getattr(e, "message", None) for e in run.events]
    assert "checkpoint saved" in messages  # what the handler printed is recorded


def test_interrupt_passes_ctrl_c_on_and_stop_still_terminates(tmp_path):
    """:meth:`ScriptRun.interrupt` (a stop by hand) sends SIGINT first; :meth:`stop`
    (gpuscale itself terminated) sends SIGTERM, as before: no handler of Ctrl-C runs."""
    for how, saved in (("interrupt", True), ("stop", False)):
        folder = tmp_path / how
        folder.mkdir()
        checkpoint = folder / "ckpt.txt"
        run = _script_run(folder, SAVES_ON_CTRL_C, str(checkpoint))
        _start_as_in_a_terminal(run)
        try:
            _wait_for_output(run, "training")
            getattr(run, how)()
            assert run.wait(60)
        finally:
            run.stop()
        assert checkpoint.exists() == saved, how
        assert run.status == "stopped", how
        assert load_run(folder / "run.ndjson").end.status == "stopped", how


def test_a_stop_signal_cuts_short_the_wait_after_the_dashboards_q(tmp_path):
    """A script that ignores Ctrl-C: while the dashboard's ``q`` waits for it
    (:meth:`LiveSource.interrupt`), a stop signal to gpuscale (the watchdog's
    :meth:`LiveSource.stop`) has it stopped with SIGTERM at once."""
    run = _script_run(tmp_path, IGNORES_CTRL_C)
    run.interrupt_grace_s = 600.0  # the wait would outlast the test's hang guard
    source = LiveSource(run)
    source.start()
    try:
        _wait_for_output(run, "training")
        quitting = threading.Thread(target=source.interrupt, daemon=True)  # q
        quitting.start()
        deadline = time.monotonic() + 60  # a hang guard only
        while not run._stopping.is_set():  # q's stop is under way
            assert time.monotonic() < deadline
            time.sleep(0.01)
        source.stop()  # SIGTERM to gpuscale: the watchdog's stop
        quitting.join(60)  # a hang guard: without the cut, 600 s
        assert not quitting.is_alive()
    finally:
        run.stop()
    assert run.status == "stopped"
    assert run._procs[0].returncode == -signal.SIGTERM


def test_ctrl_c_to_a_recommend_sweep_of_a_script_reaches_the_script(tmp_path):
    """``gpuscale recommend -- python train.py``: Ctrl-C stops the count in progress as
    ``run`` does, the script's own handler first."""
    script = tmp_path / "train.py"
    # says it is up from inside its loop, so Ctrl-C cannot land before the handler is set
    script.write_text(
        SAVES_ON_CTRL_C.replace(
            "        time.sleep(0.05)\n",
            "        time.sleep(0.05)\n        open(sys.argv[2], 'a').close()\n",
        )
    )
    checkpoint, started = tmp_path / "ckpt.txt", tmp_path / "started"
    code, out, err = _ctrl_c_gpuscale(
        tmp_path,
        ["recommend", "--sweep", "1,2", "--no-chart", "--"]
        + [sys.executable, str(script), str(checkpoint), str(started)],
        started.exists,
    )
    assert checkpoint.read_text().startswith("saved at step"), out + err
    assert "Ctrl-C passed on to it" in out + err, out + err
    assert code == 130, out + err
    assert "Traceback" not in out + err


COUNTS_CTRL_C = """
import signal, sys, time
seen = []
def count(signum, frame):
    seen.append(signum)
    print(f"SIGINT {len(seen)}", flush=True)
    if len(seen) == 1:
        time.sleep(1.0)  # the handler's save, under way when a second one would come
        print("saved", flush=True)
        sys.exit(0)
signal.signal(signal.SIGINT, count)
print("training", flush=True)
time.sleep(600)
"""


def test_a_second_interrupt_sends_no_second_ctrl_c(tmp_path):
    """A review: the dashboard's quit and a signal's watchdog both stop by hand; a
    second SIGINT raises inside the script's handler and cuts its save short."""
    run = _script_run(tmp_path, COUNTS_CTRL_C)
    _start_as_in_a_terminal(run)
    try:
        _wait_for_output(run, "training")
        callers = [threading.Thread(target=run.interrupt, daemon=True) for _ in range(2)]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join(60)  # a hang guard
        assert run.wait(60)
    finally:
        run.stop()
    said = [getattr(e, "message", None) for e in load_run(tmp_path / "run.ndjson").events]
    assert said.count("SIGINT 1") == 1 and "SIGINT 2" not in said and "saved" in said


def test_a_second_stop_by_hand_waits_as_long_as_the_first_ones_ctrl_c():
    """A review: SIGINT to ``watch`` (its watchdog's interrupt) and the dashboard's own
    quit (a second interrupt) both stop by hand; the second waited 6 s, then the
    app exited and SIGTERM cut the script's 10 s handler short."""
    from gpuscale.ui.sources import STOP_WAIT_S

    class Run:
        interrupt_grace_s = 10.0
        queue = None
        recording_path = None

        def __init__(self):
            self.waited: list[float] = []
            self.calls: list[str] = []

        def interrupt(self):
            self.calls.append("interrupt")

        def stop(self):
            self.calls.append("stop")

        def hurry(self):
            self.calls.append("hurry")

        def wait(self, timeout=None):
            self.waited.append(timeout)
            return True

    run = Run()
    source = LiveSource(run)
    source.interrupt()  # the watchdog, after SIGINT
    source.interrupt()  # the dashboard's quit
    assert run.calls == ["interrupt"] and run.waited == [STOP_WAIT_S + 10.0]
    source.stop()  # then SIGTERM: cut short at once
    assert run.calls == ["interrupt", "hurry"] and run.waited[-1] == STOP_WAIT_S


def test_a_script_that_inherits_an_ignored_ctrl_c_gets_no_grace(tmp_path):
    """gpuscale started with SIGINT ignored (``cmd &`` from a script): the script
    inherits it, so a Ctrl-C passed on would only wait out the grace."""
    from gpuscale.live.base import passed_on_note

    run = _script_run(tmp_path, IGNORES_CTRL_C)
    assert run.interrupt_grace_s > 0
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        run.start()
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        assert run.interrupt_grace_s == 0.0
        assert passed_on_note(run, by_hand=True) == ""  # no "in 0 s" said
    finally:
        run.stop()
