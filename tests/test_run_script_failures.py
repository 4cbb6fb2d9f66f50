"""`gpuscale run -- COMMAND` with a script that fails: gpuscale exits with the
script's own status (as `time` and `nohup` do), says it failed before its first
step (with its last stderr line), not that it lacks gpuscale's callback; a script
that ran and sent no step gets that advice once; `--json` says null for the
scaling and exchange it does not know. No TensorFlow: the scripts are plain Python."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gpuscale.analysis.summary import with_defaults
from gpuscale.recording.reader import load_run

ADVICE = "does not use gpuscale's callback"


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
    assert "before its first step" in error
    if status == 3:
        assert error.endswith("exited with status 3 before its first step: bad things")


def test_a_missing_script_file_is_said_with_pythons_own_line(tmp_path):
    missing = tmp_path / "nofile.py"
    proc = _gpuscale(
        tmp_path, "run", "--record", str(tmp_path / "r.ndjson"), "--", sys.executable, str(missing)
    )
    assert proc.returncode == 2  # python's own status for a file it cannot open
    said = proc.stdout + proc.stderr
    assert ADVICE not in said
    assert "exited with status 2 before its first step: " in said and "nofile.py" in said
    run = load_run(tmp_path / "r.ndjson")
    assert run.start.note == "the script exited with status 2 before its first step"
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
