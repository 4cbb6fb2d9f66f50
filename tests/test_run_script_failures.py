"""`gpuscale run -- COMMAND` with a script that fails: gpuscale exits with the
script's own status (as `time` and `nohup` do) and says only what it knows, with
the last stderr line: "before its first step" where the script loaded gpuscale's
callback, else "before gpuscale's callback reported a step" (it may have trained
for hours, uncounted); a script that failed early is not told to add the callback,
one that evidently trained (Keras's epoch lines, or it ran a while) is, once; a
script that ran and sent no step gets that advice once; several local workers: the
error line and the exit status name the same worker, the first to fail; `--json`
says null for the scaling and exchange it does not know. No TensorFlow: the
scripts are plain Python."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpuscale.analysis.summary import with_defaults
from gpuscale.recording.reader import load_run

ADVICE = "does not use gpuscale's callback"
NO_CALLBACK_STEP = "before gpuscale's callback reported a step"


def _gpuscale(tmp_path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpuscale", *argv],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "GPUSCALE_DATA_DIR": str(tmp_path)},
    )


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("import sys; print('bad things', file=sys.stderr); sys.exit(3)", 3),
        ("import sys; sys.exit(2)", 2),  # the script's 2, after its summary
        ("import os; os.kill(os.getpid(), 9)", 128 + 9),
    ],
)
def test_a_failing_script_passes_its_own_status_through(tmp_path, code, status):
    proc = _gpuscale(tmp_path, "run", "--no-record", "--", sys.executable, "-c", code)
    assert proc.returncode == status, proc.stderr
    assert "status: failed" in proc.stdout  # the summary first, then the error line
    assert ADVICE not in proc.stdout + proc.stderr
    (error,) = [line for line in proc.stderr.splitlines() if line.startswith("gpuscale: error:")]
    assert NO_CALLBACK_STEP in error and "first step" not in error  # no callback: not known
    if status == 3:
        assert error.endswith(f"exited with status 3 {NO_CALLBACK_STEP}: bad things")


AVX_NOTICE = (
    "import sys\n"
    "print('I0000 00:00:1795866374.441107   14782 cpu_feature_guard.cc:227] This TensorFlow "
    "binary is optimized to use available CPU instructions.', file=sys.stderr)\n"
    "print('To enable the following instructions: AVX2 FMA, in other operations, rebuild "
    "TensorFlow with the appropriate compiler flags.', file=sys.stderr)\n"
    "sys.exit(3)\n"
)


def test_tensorflows_start_up_notice_is_not_quoted_as_why_a_script_failed(tmp_path):
    """A script that exits 3 without a word: its last stderr line was TensorFlow's
    start-up notice about CPU instructions, quoted as if it were the error."""
    script = tmp_path / "quiet.py"
    script.write_text(AVX_NOTICE)
    proc = _gpuscale(tmp_path, "run", "--no-record", "--", sys.executable, str(script))
    assert proc.returncode == 3, proc.stderr
    (error,) = [line for line in proc.stderr.splitlines() if line.startswith("gpuscale: error:")]
    assert error.endswith(f"exited with status 3 {NO_CALLBACK_STEP}")
    assert "instructions" not in error


def test_a_missing_script_file_is_said_with_pythons_own_line(tmp_path):
    missing = tmp_path / "nofile.py"
    proc = _gpuscale(
        tmp_path, "run", "--record", str(tmp_path / "r.ndjson"), "--", sys.executable, str(missing)
    )
    assert proc.returncode == 2  # python's own status for a file it cannot open
    said = proc.stdout + proc.stderr
    assert ADVICE not in said
    assert f"exited with status 2 {NO_CALLBACK_STEP}: " in said and "nofile.py" in said
    run = load_run(tmp_path / "r.ndjson")
    assert run.start.note == f"the script exited with status 2 {NO_CALLBACK_STEP}"
    assert run.start.config["callback"] is None  # not known: it never got that far
    assert run.end.status == "failed"
    # re-read, it is a run that ended before its first step, not one without the callback
    again = _gpuscale(tmp_path, "recommend", "--from", str(tmp_path / "r.ndjson"))
    assert again.returncode == 2 and "before its first step" in again.stderr
    assert ADVICE not in again.stderr


def test_a_script_that_ran_without_the_callback_gets_the_advice_once(tmp_path):
    proc = _gpuscale(tmp_path, "run", "--no-record", "--", sys.executable, "-c", "print('hi')")
    assert proc.returncode == 0, proc.stderr
    assert (proc.stdout + proc.stderr).count(ADVICE) == 1, proc.stderr


def test_run_json_says_null_for_the_scaling_and_exchange_of_a_script_it_knows_nothing_of(
    tmp_path,
):
    proc = _gpuscale(tmp_path, "run", "--json", "--no-record", "--", sys.executable, "-c", "0")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["strategy"] == "unknown" and doc["exchange"] is None and doc["scaling"] is None
    assert doc["global_batch"] is None and doc["per_replica_batch"] is None
    assert doc["devices"] == 1 and doc["workers"] == 1


def test_with_defaults_keeps_what_a_run_says():
    said = with_defaults({"strategy": "mirrored", "global_batch": 64, "per_replica_batch": 32})
    assert said["exchange"] == "ring" and said["scaling"] == "weak"
    said = with_defaults({"strategy": "unknown"})
    assert said["exchange"] is None and said["scaling"] is None and said["global_batch"] is None


CRASHED_IN_TRAINING = (
    "import sys\n"
    "print('Epoch 1/3')\n"
    "print('100/100 - loss: 0.5')\n"
    "print('RuntimeError: out of memory in epoch 1', file=sys.stderr)\n"
    "sys.exit(1)\n"
)


def test_a_script_that_trained_without_the_callback_and_crashed_gets_the_advice(tmp_path):
    """Keras's epoch line says it trained: not "before its first step" (gpuscale
    never counted one), and told once to add the callback; recorded as a script
    without it."""
    script = tmp_path / "train.py"
    script.write_text(CRASHED_IN_TRAINING)
    record = tmp_path / "r.ndjson"
    proc = _gpuscale(tmp_path, "run", "--record", str(record), "--", sys.executable, str(script))
    assert proc.returncode == 1, proc.stderr
    said = proc.stdout + proc.stderr
    assert said.count(ADVICE) == 1, said
    (error,) = [line for line in proc.stderr.splitlines() if line.startswith("gpuscale: error:")]
    assert error.endswith(
        f"exited with status 1 {NO_CALLBACK_STEP}: RuntimeError: out of memory in epoch 1"
    )
    assert "first step" not in said
    run = load_run(record)
    assert run.start.config["callback"] is False and run.end.status == "failed"


def test_a_script_that_ran_a_while_without_the_callback_and_failed_gets_the_advice():
    """No Keras output, but it ran past ``trained_after_s`` without a word from
    gpuscale.keras (past its imports): the advice, and the run's start is a script
    without the callback. In process (a ScriptRun, no TensorFlow)."""
    from gpuscale.events.schema import ErrorEvent, LogEvent, StartEvent
    from gpuscale.live.script_run import ScriptRun

    code = "import sys, time; time.sleep(0.6); print('boom', file=sys.stderr); sys.exit(4)"
    run = ScriptRun(
        [sys.executable, "-c", code], record=None, sampler=False, trained_after_s=0.3
    ).start()
    events = []
    while (event := run.queue.get(timeout=60)) is not None:
        events.append(event)
    assert run.status == "failed" and run.returncode == 4
    advice = [e for e in events if isinstance(e, LogEvent) and ADVICE in e.message]
    assert len(advice) == 1
    starts = [e for e in events if isinstance(e, StartEvent) and not e.provisional]
    assert starts and starts[-1].config["callback"] is False
    (error,) = [e for e in events if isinstance(e, ErrorEvent)]
    assert error.message.endswith(f"exited with status 4 {NO_CALLBACK_STEP}: boom")


LOADS_THE_CALLBACK = (
    "import os, sys, time\n"
    "sys.path.insert(0, {root!r})\n"
    "from gpuscale.events.schema import LogEvent\n"
    "from gpuscale.events.transport import EventClient\n"
    "client = EventClient.from_env()\n"
    "# what `import gpuscale.keras` sends (gpuscale.keras.channel.announce), without TF\n"
    "client.send(LogEvent(t=time.time(), message=f'gpuscale.keras loaded in process {{os.getpid()}}',\n"
    "    source='keras-callback', level='debug'))\n"
    "client.close()\n"
    "deadline = time.monotonic() + 60  # until gpuscale has it on record: a hang guard\n"
    "while 'gpuscale.keras loaded' not in open({record!r}).read() and time.monotonic() < deadline:\n"
    "    time.sleep(0.05)\n"
    "print('ValueError: the model does not build', file=sys.stderr)\n"
    "sys.exit(1)\n"
)


def test_a_script_that_loaded_the_callback_fails_before_its_first_step(tmp_path):
    """``import gpuscale.keras`` announced itself and no step came: "before its first
    step", and no advice to add what it has."""
    record = tmp_path / "r.ndjson"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = tmp_path / "train.py"
    script.write_text(LOADS_THE_CALLBACK.format(root=root, record=str(record)))
    proc = _gpuscale(tmp_path, "run", "--record", str(record), "--", sys.executable, str(script))
    assert proc.returncode == 1, proc.stderr
    said = proc.stdout + proc.stderr
    assert ADVICE not in said and NO_CALLBACK_STEP not in said
    (error,) = [line for line in proc.stderr.splitlines() if line.startswith("gpuscale: error:")]
    assert error.endswith(
        "exited with status 1 before its first step: ValueError: the model does not build"
    )
    run = load_run(record)
    assert run.start.note == "the script exited with status 1 before its first step"


WORKERS = (
    "import os, sys, time\n"
    "if os.environ['GPUSCALE_WORKER'] == '1':\n"
    "    print('worker one broke', file=sys.stderr)\n"
    "    sys.exit(5)\n"
    "time.sleep(120)  # worker 0 waits, as in an all-reduce, until gpuscale stops it\n"
)


def test_the_error_line_and_the_exit_status_name_the_same_worker(tmp_path):
    """Worker 1 fails first (status 5); gpuscale then stops worker 0 (SIGTERM): the
    error names worker 1 and its status, and gpuscale exits with that status."""
    script = tmp_path / "train.py"
    script.write_text(WORKERS)
    proc = _gpuscale(
        tmp_path, "run", "--no-record", "--local-workers", "2", "--", sys.executable, str(script)
    )
    (error,) = [line for line in proc.stderr.splitlines() if line.startswith("gpuscale: error:")]
    assert "the script worker 1 (" in error, proc.stderr
    assert error.endswith(f"exited with status 5 {NO_CALLBACK_STEP}: worker one broke"), error
    assert proc.returncode == 5, proc.stderr


EXITS_MID_FIT = (
    "import os, socket, sys, time\n"
    "sys.path.insert(0, {root!r})\n"
    "from gpuscale.events.schema import StartEvent, StepEvent\n"
    "from gpuscale.events.transport import EventClient\n"
    "# what ScalingMonitor sends by its third step, without TF; then a callback's\n"
    "# sys.exit, which runs no on_train_end: no end of the callback's comes\n"
    "client = EventClient.from_env()\n"
    "client.send(StartEvent(t=time.time(), gpuscale_version='test', host=socket.gethostname(),\n"
    "    pid=os.getpid(), source='script', model='train.py', strategy='mirrored',\n"
    "    global_batch=32, per_replica_batch=32, scaling='strong'))\n"
    "for step in range(3):\n"
    "    client.send(StepEvent(t=time.time(), step=step, step_time_s=0.01, samples=32,\n"
    "        warmup=step < 2))\n"
    "client.close()\n"
    "print('stopping the run', flush=True)\n"
    "sys.exit({code})\n"
)


@pytest.mark.parametrize(("code", "status"), [(3, "failed"), (0, "completed")])
def test_a_script_that_exits_mid_fit_ends_as_its_exit_status_says(tmp_path, code, status):
    """A callback's ``sys.exit(3)`` in ``fit`` (steps reported, no end of the
    callback's): the script failed; ``gpuscale run`` says so after the run's summary,
    passes 3 through (the README's exit statuses), and the recording ends ``failed``
    with its summary and the error; ``sys.exit(0)`` is a completed run, exit 0. The
    script run alone records the same (test_keras_at_exit.py)."""
    record = tmp_path / "r.ndjson"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = tmp_path / "train.py"
    script.write_text(EXITS_MID_FIT.format(root=root, code=code))
    proc = _gpuscale(tmp_path, "run", "--record", str(record), "--", sys.executable, str(script))
    assert proc.returncode == code, proc.stderr
    assert f"status: {status} in " in proc.stdout and "3 steps" in proc.stdout
    errors = [line for line in proc.stderr.splitlines() if line.startswith("gpuscale: error:")]
    run = load_run(record)
    assert run.end.status == status and run.end.summary["status"] == status
    assert run.end.steps == 3
    if code:
        assert errors == [
            f"gpuscale: error: the script ({sys.executable} {script}) exited with status 3"
        ]
        (error,) = [e for e in run.events if type(e).__name__ == "ErrorEvent"]
        assert error.message == errors[0].removeprefix("gpuscale: error: ")
    else:
        assert not errors
