"""`gpuscale run -- python script.py` and `gpuscale run --strategy multi-worker
--local-workers 2` end to end through the command line (real processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuscale.events.schema import LogEvent, PhaseEvent, StepEvent
from gpuscale.recording.reader import load_run
from gpuscale.trainer.schedule import FIRST_PROBE_AFTER

SCRIPT = Path(__file__).parent / "scripts_keras" / "train_tiny.py"


def _gpuscale(*args: str, env: dict | None = None, timeout: int = 180):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUSCALE_", "TF_CONFIG"))}
    full_env.update({"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}, **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "gpuscale", *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.tf
def test_run_a_user_script_with_the_callback(tmp_path):
    path = tmp_path / "script.ndjson"
    proc = _gpuscale("run", "--json", "--record", str(path), "--", sys.executable, str(SCRIPT), "5")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["model"] == "tiny" and summary["strategy"] == "mirrored"
    assert summary["devices"] == 2 and summary["status"] == "completed"
    assert summary["step_time_s"] > 0 and summary["throughput_samples_s"] > 0
    loaded = load_run(path)
    assert loaded.start.source == "script" and loaded.end.status == "completed"
    steps = [e for e in loaded.events if isinstance(e, StepEvent)]
    assert len(steps) == 5 + 2 + 3  # fit, fit with 2 steps per call, the custom loop
    logs = [e.message for e in loaded.events if isinstance(e, LogEvent)]
    assert "trained 5 steps" in logs  # the script's own stdout


@pytest.mark.tf
def test_built_in_trainer_on_two_local_workers(tmp_path):
    path = tmp_path / "mw.ndjson"
    proc = _gpuscale(
        "run",
        "--json",
        "--record",
        str(path),
        "--strategy",
        "multi-worker",
        "--local-workers",
        "2",
        "--model",
        "mlp",
        "--steps",
        "6",
        "--warmup-steps",
        "1",
        "--phase-every",
        "2",
        "--batch-per-replica",
        "16",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["workers"] == 2 and summary["devices"] == 2
    assert summary["strategy"] == "multi-worker" and summary["phase_steps"] > 0
    loaded = load_run(path)
    assert {e.worker for e in loaded.events if isinstance(e, StepEvent)} == {0, 1}
    assert loaded.start.config["workers"][1]["host"]


@pytest.mark.tf
def test_two_local_workers_probe_at_the_same_steps_within_the_budget(tmp_path):
    """No --phase-every: worker 0's budgeted schedule decides for both, its ballot
    summed in the step, so every worker learns of the probe one step after it is
    asked for and runs the next step split."""
    path = tmp_path / "mw-budget.ndjson"
    proc = _gpuscale(
        "run",
        "--json",
        "--record",
        str(path),
        "--strategy",
        "multi-worker",
        "--local-workers",
        "2",
        "--model",
        "mlp",
        "--steps",
        "10",
        "--warmup-steps",
        "1",
        "--batch-per-replica",
        "16",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = load_run(path)
    phases = [e for e in loaded.events if isinstance(e, PhaseEvent)]
    probed = [[e.step for e in phases if e.worker == w] for w in (0, 1)]
    # asked for after the FIRST_PROBE_AFTER-th counted step (steps 1-3), read after
    # step 4 (its ballot rode that step), step 5 runs split
    assert probed[0][:1] == [2 + FIRST_PROBE_AFTER]
    assert probed[1] == probed[0]
    assert {e.method for e in phases} == {"split-step"}


def test_bad_commands_are_one_line_errors(tmp_path):
    missing = _gpuscale("run", "--no-record", "--", str(tmp_path / "no-such-program"))
    assert missing.returncode == 2
    assert missing.stderr.startswith("gpuscale: error: cannot start")
    assert "Traceback" not in missing.stderr
    no_cluster = _gpuscale("run", "--no-record", "--strategy", "multi-worker")
    assert no_cluster.returncode == 2 and "TF_CONFIG" in no_cluster.stderr
    bad_workers = _gpuscale("run", "--no-record", "--local-workers", "0", "--", "true")
    assert bad_workers.returncode == 2 and "--local-workers" in bad_workers.stderr
    bad_config = _gpuscale(
        "run", "--no-record", "--strategy", "multi-worker", env={"TF_CONFIG": "{oops"}
    )
    assert (
        bad_config.returncode == 2
        and "TF_CONFIG is not usable: not valid JSON" in bad_config.stderr
    )


def test_a_multi_worker_device_count_is_refused_before_any_worker_starts(tmp_path):
    """--devices 2 with CPU workers: the trainer's own check, made before launching:
    one line, exit 2, nothing recorded, no advice about a script's callback."""
    path = tmp_path / "mw.ndjson"
    proc = _gpuscale(
        "run",
        "--strategy",
        "multi-worker",
        "--devices",
        "2",
        "--local-workers",
        "2",
        "--steps",
        "10",
        "--record",
        str(path),
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("gpuscale: error: --strategy multi-worker uses one CPU device")
    assert proc.stderr.count("\n") == 1 and proc.stdout == ""
    assert not path.exists()
